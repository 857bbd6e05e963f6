//! The board's performance state through the binary, on fixture trees of real board layouts:
//! recorded in a run's manifest with its warnings said before the sweep, a refusal under
//! `--require-stable-clocks` before any results directory exists, `compare` withholding its
//! verdict across two states, and `probe`.

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn board(name: &str) -> String {
    format!(
        "{}/tests/fixtures/boards/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The stand-in worker whose latency scales with 1 / threads.
fn scaling() -> String {
    format!(
        "{}/tests/fixtures/workers/scaling.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A config `NAME.toml` in `dir` of the `command` engine running `program` at `threads`.
fn config(dir: &Path, name: &str, program: &str, threads: &str, measure: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    write(
        &path,
        &format!(
            "name = \"{name}\"\n[command]\nprogram = \"{program}\"\n[matrix]\n\
             engines = [\"command\"]\nmodels = [\"resnet34\"]\nthreads = [{threads}]\n\
             [measure]\nrepeats = 1\n{measure}"
        ),
    );
    path
}

/// A sweep of the `command` engine (a stand-in whose latency scales with 1 / threads) with
/// the board's state read under `root`; its results directory and stderr.
fn sweep(tmp: &Path, name: &str, threads: &str, root: &str) -> (PathBuf, String) {
    let config = config(tmp, name, &scaling(), threads, "retries = 0\n");
    let out = tmp.join(name);
    let a = run_command(&config, &out)
        .env("EDGEPROF_TELEMETRY_ROOT", root)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    (only_entry(&out), stderr)
}

fn manifest(dir: &Path) -> serde_json::Value {
    match serde_json::from_str(&read(&dir.join("manifest.json"))) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_run_keeps_the_state_and_compare_withholds_its_verdict_across_two_states() {
    let tmp = temp_dir();
    // AGX Orin in MAXN, four threads; Orin Nano in its 15 W mode, two.
    let (maxn, said) = sweep(tmp.path(), "maxn", "4", &board("orin-jp5"));
    assert!(
        said.contains("board state: power mode MAXN (0), jetson_clocks off"),
        "{said}"
    );
    assert!(
        said.contains("warning: jetson_clocks is off: the CPU, GPU and memory clocks follow the load (fix: sudo jetson_clocks"),
        "{said}"
    );
    let (w15, _) = sweep(tmp.path(), "w15", "2", &board("orin-jp6"));
    let state = &manifest(&maxn)["board_state"];
    assert_eq!(
        state["jetson"]["found"]["mode"]["found"]["name"], "MAXN",
        "{state}"
    );
    assert_eq!(
        manifest(&w15)["board_state"]["cpufreq"]["found"][0]["max_khz"],
        1510400
    );

    let compare = |extra: &[&str]| {
        let a = edgeprof()
            .arg("compare")
            .arg(&maxn)
            .arg(&w15)
            .args(extra)
            .assert()
            .success();
        String::from_utf8_lossy(&a.get_output().stdout).into_owned()
    };
    // Half the threads is slower, but the states differ: said, and no verdict.
    let text = compare(&["--fail-on-regression"]);
    assert!(
        text.contains("The two runs were measured in different board states"),
        "{text}"
    );
    assert!(text.contains("power mode: A MAXN (0), B 15W (0)"), "{text}");
    assert!(text.contains("withheld: states differ"), "{text}");
    assert!(
        text.contains("0 slower, 0 faster, 0 without a significant difference at 5 %, 0 not in both, 1 withheld"),
        "{text}"
    );
    // Asked for across the states: the verdict.
    let text = compare(&["--across-states"]);
    assert!(text.contains("1 slower, 0 faster"), "{text}");
    // The report says the state and its warnings.
    let a = edgeprof()
        .arg("report")
        .arg(&w15)
        .arg("--no-charts")
        .assert()
        .success();
    let report = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    assert!(
        report.contains("Board state: power mode 15W (0), jetson_clocks off"),
        "{report}"
    );
    assert!(
        report.contains("Warning: the power mode is 15W (0), below the board's fastest, MAXN_SUPER (2) (fix: sudo nvpmodel -m 2)."),
        "{report}"
    );
}

#[test]
fn require_stable_clocks_refuses_before_a_results_directory_exists() {
    let tmp = temp_dir();
    let config = config(tmp.path(), "t", &scaling(), "1", "");
    let out = tmp.path().join("out");
    let a = run_command(&config, &out)
        .arg("--require-stable-clocks")
        .env("EDGEPROF_TELEMETRY_ROOT", board("pi4"))
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("--require-stable-clocks: the board's state would make the figures wander: the CPU frequency governor is not `performance` (ondemand on CPUs 0-3)"),
        "{err}"
    );
    assert!(!out.exists(), "a results directory was made");
    // Xavier with jetson_clocks in force: stable, so it runs.
    run_command(&config, &out)
        .arg("--require-stable-clocks")
        .env("EDGEPROF_TELEMETRY_ROOT", board("xavier-jp5"))
        .assert()
        .success();
}

#[test]
fn probe_says_the_state_and_what_it_cannot_read() {
    let probe = |root: &str| -> (bool, String) {
        let a = edgeprof()
            .args(["probe", "--json", "--root", root])
            .assert()
            .success();
        let v: serde_json::Value =
            serde_json::from_slice(&a.get_output().stdout).unwrap_or_default();
        let entry = v
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|e| e["source"] == "board state (clocks, power mode)")
                    .cloned()
            })
            .unwrap_or_default();
        (
            entry["available"].as_bool().unwrap_or(false),
            entry["detail"].as_str().unwrap_or("").to_string(),
        )
    };
    let (found, detail) = probe(&board("thor-jp7"));
    assert!(found);
    assert_eq!(
        detail,
        "power mode MAXN (0), jetson_clocks on, GPU clock limit 1.57 GHz, CPU governor performance"
    );
    let (found, detail) = probe(&board("none"));
    assert!(!found);
    assert!(
        detail.starts_with("no clock state: no cpufreq here"),
        "{detail}"
    );
}

fn file(root: &Path, path: &str) -> String {
    read(&root.join(path)).trim().to_string()
}

const GOVERNOR: &str = "sys/devices/system/cpu/cpufreq/policy0/scaling_governor";
const MIN: &str = "sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq";
const GPU_MIN: &str = "sys/class/devfreq/17000000.ga10b/min_freq";

/// `edgeprof board lock --root ROOT`, started and read until it holds the clocks.
fn lock(root: &Path, cache: &Path) -> std::process::Child {
    use std::io::BufRead;
    let mut child = match std::process::Command::new(assert_cmd::cargo::cargo_bin("edgeprof"))
        .args(["board", "lock", "--root"])
        .arg(root)
        .env("EDGEPROF_CACHE_DIR", cache)
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let Some(err) = child.stderr.take() else {
        panic!("no stderr")
    };
    let mut said = String::new();
    for line in std::io::BufReader::new(err).lines() {
        let line = line.unwrap_or_default();
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("holding them until Ctrl-C") {
            assert!(
                said.contains("locked the board's clocks: policy0: governor performance"),
                "{said}"
            );
            assert!(
                said.contains("not set: jetson_clocks is not installed"),
                "{said}"
            );
            return child;
        }
    }
    panic!("board lock ended without holding the clocks: {said}")
}

fn locked_as_asked(root: &Path) {
    assert_eq!(file(root, GOVERNOR), "performance");
    assert_eq!(file(root, MIN), "2188800");
    assert_eq!(file(root, GPU_MIN), "1300500000");
}

fn as_before(root: &Path) {
    assert_eq!(file(root, GOVERNOR), "schedutil");
    assert_eq!(file(root, MIN), "115200");
    assert_eq!(file(root, GPU_MIN), "76800000");
}

#[test]
fn board_lock_sets_the_clocks_and_puts_them_back_after_sigint_and_after_sigkill() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let tmp = temp_dir();
    let root = tmp.path().join("orin");
    copy_tree(Path::new(&board("orin-jp5")), &root);
    let cache = tmp.path().join("cache");
    let restore = cache.join("board-restore.json");

    // Ctrl-C: put back, and the restore file gone.
    let mut child = lock(&root, &cache);
    locked_as_asked(&root);
    assert!(restore.is_file());
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    if let Err(e) = kill(pid, Signal::SIGINT) {
        panic!("{e}");
    }
    let status = child.wait().map(|s| s.code());
    assert_eq!(status.ok().flatten(), Some(0));
    as_before(&root);
    assert!(!restore.exists());

    // SIGKILL: nothing can run, so the state stays locked with its restore file, and the next
    // edgeprof (any command) puts it back and says so.
    let mut child = lock(&root, &cache);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    if let Err(e) = kill(pid, Signal::SIGKILL) {
        panic!("{e}");
    }
    let _ = child.wait();
    locked_as_asked(&root);
    assert!(restore.is_file());
    let a = edgeprof()
        .env("EDGEPROF_CACHE_DIR", &cache)
        .args(["board", "show", "--root"])
        .arg(&root)
        .assert()
        .success();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains(&format!(
            "edgeprof: put back the board's state that edgeprof (pid {}) changed and did not restore: 5 setting(s)",
            child.id()
        )),
        "{err}"
    );
    as_before(&root);
    assert!(!restore.exists());
    // After it, the state shows as it was, with its warnings and fixes.
    let text = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    assert!(
        text.contains(
            "policy0 (CPUs 0-3): tegra194 schedutil, 115 MHz–2.19 GHz of 115 MHz–2.19 GHz"
        ),
        "{text}"
    );
    assert!(text.contains("warning: jetson_clocks is off"), "{text}");
}

#[test]
fn without_cpufreq_board_lock_says_what_it_cannot_do() {
    let cache = temp_dir();
    let a = edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .args(["board", "lock", "--root", &board("none")])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("board lock: nothing here can be locked: no cpufreq here"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(cache.path())
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "a restore file was left"
    );
}

#[test]
fn a_run_with_locked_clocks_measures_them_locked_and_puts_them_back() {
    let tmp = temp_dir();
    let root = tmp.path().join("orin");
    copy_tree(Path::new(&board("orin-jp5")), &root);
    let config = config(tmp.path(), "t", &scaling(), "1", "");
    let out = tmp.path().join("out");
    let a = run_command(&config, &out)
        .args(["--lock-clocks", "--require-stable-clocks"])
        .env("EDGEPROF_TELEMETRY_ROOT", &root)
        .env("EDGEPROF_CACHE_DIR", tmp.path().join("cache"))
        .assert()
        .success();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("put the board's clocks back as they were"),
        "{err}"
    );
    let m = manifest(&only_entry(&out));
    assert_eq!(
        m["board_state"]["cpufreq"]["found"][1]["min_khz"], 2188800,
        "{}",
        m["board_state"]
    );
    as_before(&root);
}

#[test]
fn a_state_that_changes_during_a_sweep_is_said_and_kept_with_each_record() {
    let tmp = temp_dir();
    let root = tmp.path().join("orin");
    copy_tree(Path::new(&board("orin-jp5")), &root);
    // The worker switches the board to its 15 W mode (as someone running nvpmodel would).
    let worker = tmp.path().join("worker.sh");
    write(
        &worker,
        &format!(
            "#!/bin/sh\necho 'pmode:0001 fmode:quiet' > \"$EDGEPROF_TELEMETRY_ROOT/var/lib/nvpmodel/status\"\n\
             exec {}\n",
            scaling()
        ),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)) {
            panic!("{e}");
        }
    }
    let program = worker.display().to_string();
    let config = config(tmp.path(), "t", &program, "1, 2", "processes = 1\n");
    let out = tmp.path().join("out");
    let a = run_command(&config, &out)
        .env("EDGEPROF_TELEMETRY_ROOT", &root)
        .assert()
        .success();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    let change = "power mode: A MAXN (0), B MODE_15W (1)";
    // Said once, though both conditions ran in the changed state.
    assert_eq!(
        err.matches(&format!(
            "the board's state changed during the sweep (A: at its start, B: now): {change}"
        ))
        .count(),
        1,
        "{err}"
    );
    let dir = only_entry(&out);
    let changes: Vec<serde_json::Value> = read(&dir.join("runs.jsonl"))
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_default()["state_changes"]
                .clone()
        })
        .collect();
    assert_eq!(changes, vec![serde_json::json!([change]); 2]);
    // The manifest keeps the state the sweep began in.
    assert_eq!(
        manifest(&dir)["board_state"]["jetson"]["found"]["mode"]["found"]["id"],
        0
    );
}

#[test]
fn auto_input_data_is_settled_once_for_the_whole_sweep() {
    // Without photographs set up, `auto` is recorded as what every condition got: seeded values
    // (photographs set up in the middle of the sweep cannot feed some conditions and not others).
    let tmp = temp_dir();
    let config = config(tmp.path(), "t", &scaling(), "1", "");
    let out = tmp.path().join("out");
    run_command(&config, &out)
        .env("EDGEPROF_DATA_DIR", tmp.path().join("no-data"))
        .assert()
        .success();
    let m = manifest(&only_entry(&out));
    assert_eq!(
        m["config"]["measure"]["input_data"], "seeded",
        "{}",
        m["config"]
    );
}

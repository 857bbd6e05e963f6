//! Field conditions for a headless sweep: the terminal closed under it (tmux killed, as the
//! pane's own process and under a shell), its output piped into `head`, a second writer on its
//! directory, resuming exactly, and workers that leave processes behind, hold the pipes open,
//! write endless lines, or outlive a killed edgeprof. Needs tmux, setsid and pgrep.

mod common;

use common::tmux::Tmux;
use common::{edgeprof, read, temp_dir, write};
use rand::Rng;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> String {
    edgeprof().get_program().to_string_lossy().into_owned()
}

/// A worker script at `dir/name` (reads its request, then runs `body`).
fn worker(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    write(&path, &format!("#!/bin/sh\ncat >/dev/null\n{body}\n"));
    if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)) {
        panic!("{e}");
    }
    path
}

/// A config running `program` (the command engine) for each batch size, into `dir/results`.
fn config(dir: &Path, program: &Path, args: &[&str], batches: &str, measure: &str) -> PathBuf {
    let path = dir.join("field.toml");
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    write(
        &path,
        &format!(
            "name = \"field\"\n[command]\nprogram = \"{}\"\nargs = [{}]\n[matrix]\n\
             engines = [\"command\"]\nmodels = [\"resnet34\"]\nbatch = [{batches}]\n\
             [measure]\nsample_interval_ms = 50\n{measure}\n[output]\ndir = \"{}\"\n\
             formats = [\"csv\", \"json\", \"md\"]\n",
            program.display(),
            args.join(", "),
            dir.join("results").display()
        ),
    );
    path
}

/// A sweep of four conditions of `seconds` each.
fn slow_config(dir: &Path, seconds: f64) -> PathBuf {
    let slow = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/workers/slow.sh"
    );
    config(
        dir,
        Path::new(slow),
        &[&seconds.to_string()],
        "1, 2, 3, 4",
        "retries = 0",
    )
}

/// `edgeprof runs DIR --json`.
fn runs(out: &Path) -> Vec<serde_json::Value> {
    let output = edgeprof()
        .arg("runs")
        .arg(out)
        .arg("--json")
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    serde_json::from_slice::<Vec<serde_json::Value>>(&output).unwrap_or_default()
}

/// Waits until the one results directory under `out` exists and is no longer running.
fn wait_ended(out: &Path, seconds: u64) -> serde_json::Value {
    let until = Instant::now() + Duration::from_secs(seconds);
    loop {
        let found = runs(out);
        if let [one] = found.as_slice() {
            if one["state"] != "running" {
                return one.clone();
            }
        }
        if Instant::now() > until {
            panic!("the sweep under {} did not end: {found:?}", out.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until a results directory appears under `out`; its path.
fn wait_started(out: &Path, seconds: u64) -> PathBuf {
    let until = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(dir) = std::fs::read_dir(out)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path())
        {
            if dir.join("manifest.json").is_file() {
                return dir;
            }
        }
        if Instant::now() > until {
            panic!("no results directory under {}", out.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes whose command line matches `pattern`.
fn pgrep(pattern: &str) -> Vec<String> {
    Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until no process matches `pattern`; false if one still does after `seconds`.
fn gone(pattern: &str, seconds: u64) -> bool {
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        if pgrep(pattern).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    pgrep(pattern).is_empty()
}

/// A sweep whose terminal is killed at a random moment ends complete, every condition recorded,
/// with its progress in progress.log.
fn hang_up_trials(under_shell: bool) {
    let mut rng = rand::rng();
    for trial in 0..10 {
        let tmp = temp_dir();
        let config = slow_config(tmp.path(), 0.3);
        let out = tmp.path().join("results");
        let run = format!("'{}' run --no-charts '{}'", bin(), config.display());
        let t = if under_shell {
            let t = Tmux::start_command(tmp.path(), "bash --norc --noprofile");
            std::thread::sleep(Duration::from_millis(300));
            t.keys(&[&run, "Enter"]);
            t
        } else {
            Tmux::start_command(tmp.path(), &format!("exec {run}"))
        };
        let dir = wait_started(&out, 20);
        let delay = rng.random_range(0..2500);
        std::thread::sleep(Duration::from_millis(delay));
        t.tmux(&["kill-session", "-t", "s"]);
        let ended = wait_ended(&out, 60);
        let log = read(&dir.join("progress.log"));
        let what = format!("trial {trial} (terminal killed after {delay} ms): {ended}\n{log}");
        assert_eq!(ended["state"], "complete", "{what}");
        assert_eq!(ended["done"], 4, "{what}");
        assert!(log.contains("finished: complete (4 ok"), "{what}");
        assert!(!log.contains("panicked"), "{what}");
        for file in ["summary.csv", "summary.json", "summary.md"] {
            assert!(dir.join(file).is_file(), "{file} missing: {what}");
        }
    }
}

#[test]
fn closing_the_terminal_of_a_run_as_the_panes_process_never_ends_it_badly() {
    hang_up_trials(false);
}

#[test]
fn closing_the_terminal_of_a_run_under_a_shell_never_ends_it_badly() {
    hang_up_trials(true);
}

#[test]
fn a_run_piped_into_head_completes_its_sweep() {
    let tmp = temp_dir();
    let config = slow_config(tmp.path(), 0.1);
    let out = tmp.path().join("results");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' run '{}' 2>&1 | head -2 >/dev/null",
            bin(),
            config.display()
        ))
        .status();
    assert!(status.is_ok_and(|s| s.success()));
    let ended = wait_ended(&out, 30);
    assert_eq!(ended["state"], "complete", "{ended}");
    assert_eq!(ended["done"], 4, "{ended}");
}

#[test]
fn a_second_writer_is_refused_with_the_holders_pid() {
    let tmp = temp_dir();
    let config = slow_config(tmp.path(), 1.0);
    let out = tmp.path().join("results");
    let mut first = match Command::new(bin())
        .args(["run", "--no-charts"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let dir = wait_started(&out, 20);
    // Running, and `runs` says by whom.
    let until = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let found = runs(&out);
        if found.first().is_some_and(|l| l["state"] == "running") || Instant::now() > until {
            break found;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(listed[0]["pid"], first.id(), "{listed:?}");
    let assert = edgeprof()
        .args(["run", "--resume"])
        .arg(&dir)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!("pid {}", first.id())) && stderr.contains("being written"),
        "{stderr}"
    );
    // The text listing says how to follow it.
    let text = edgeprof().arg("runs").arg(&out).output();
    let text = text
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        text.contains("running") && text.contains("tail -f"),
        "{text}"
    );
    assert!(first.wait().is_ok_and(|s| s.success()));
    assert_eq!(wait_ended(&out, 10)["state"], "complete");
    // Two runs started together into one output directory get a directory each.
    let tmp = temp_dir();
    let config = slow_config(tmp.path(), 0.05);
    let children: Vec<_> = (0..2)
        .filter_map(|_| {
            Command::new(bin())
                .args(["run", "--no-charts"])
                .arg(&config)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .ok()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().is_ok_and(|s| s.success()));
    }
    let listed = runs(&tmp.path().join("results"));
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed
        .iter()
        .all(|l| l["state"] == "complete" && l["done"] == 4));
}

/// Runs a config that must succeed; its results directory under `out`.
fn run_ok(config: &Path, out: &Path) -> PathBuf {
    edgeprof()
        .args(["run", "--no-charts"])
        .arg(config)
        .assert()
        .success();
    wait_ended(out, 10)["dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// Rewrites a finished results directory as if it had been interrupted after `keep` records.
fn interrupt_after(dir: &Path, keep: usize) {
    let runs = read(&dir.join("runs.jsonl"));
    let kept: String = runs.lines().take(keep).map(|l| format!("{l}\n")).collect();
    write(&dir.join("runs.jsonl"), &kept);
    // The attempts whose records went were never made: their samples and telemetry go too.
    let key =
        |v: &serde_json::Value, id: &serde_json::Value| (id.to_string(), v["attempt"].to_string());
    let gone: Vec<(String, String)> = runs
        .lines()
        .skip(keep)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|r| key(&r, &r["condition"]["id"]))
        .collect();
    for file in ["samples.jsonl", "telemetry.jsonl"] {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let left: String = text
            .lines()
            .filter(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .map_or(true, |v| !gone.contains(&key(&v, &v["condition"])))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        write(&path, &left);
    }
    let manifest = read(&dir.join("manifest.json"))
        .replace("\"status\": \"complete\"", "\"status\": \"interrupted\"");
    write(&dir.join("manifest.json"), &manifest);
}

fn attempts(dir: &Path) -> Vec<(String, u64, bool)> {
    read(&dir.join("runs.jsonl"))
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|r| {
            (
                r["condition"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                r["attempt"].as_u64().unwrap_or(0),
                r["last"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[test]
fn a_relative_config_naming_an_onnx_file_resumes_from_anywhere() {
    let tmp = temp_dir();
    let models = tmp.path().join("models");
    let configs = tmp.path().join("cfg");
    for d in [&models, &configs] {
        if let Err(e) = std::fs::create_dir_all(d) {
            panic!("{e}");
        }
    }
    edgeprof()
        .args([
            "models",
            "export",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "--classes",
            "10",
            "-o",
        ])
        .arg(models.join("m.onnx"))
        .assert()
        .success();
    write(
        &configs.join("r.toml"),
        "name = \"r\"\n[matrix]\nengines = [\"tract\"]\nmodels = [\"../models/m.onnx\"]\n\
         inputs = [\"3x32x32\"]\nthreads = [1, 2]\n[measure]\nwarmup = 0\niterations = 2\n\
         repeats = 1\n[output]\ndir = \"out\"\n",
    );
    // Typed relative to where the user stands, as users do.
    edgeprof()
        .current_dir(tmp.path())
        .args(["run", "--no-charts", "./cfg/../cfg/r.toml"])
        .assert()
        .success();
    let dir = match std::fs::read_dir(tmp.path().join("out")) {
        Ok(mut d) => match d.next() {
            Some(Ok(e)) => e.path(),
            _ => panic!("no results"),
        },
        Err(e) => panic!("{e}"),
    };
    interrupt_after(&dir, 1);
    let assert = edgeprof()
        .current_dir("/")
        .args(["run", "--no-charts", "--resume"])
        .arg(&dir)
        .assert();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert.success();
    assert!(
        stderr.contains("1 of 2 condition(s) already done, 1 to run"),
        "{stderr}"
    );
    let ids: Vec<String> = attempts(&dir).into_iter().map(|a| a.0).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn a_resumed_plan_that_changed_says_which_conditions_differ() {
    let tmp = temp_dir();
    let config = slow_config(tmp.path(), 0.0);
    let dir = run_ok(&config, &tmp.path().join("results"));
    interrupt_after(&dir, 1);
    // The stored config now plans batch 5 instead of 4.
    let manifest = read(&dir.join("manifest.json")).replace("3, 4]", "3, 5]");
    write(&dir.join("manifest.json"), &manifest);
    let assert = edgeprof()
        .args(["run", "--resume"])
        .arg(&dir)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("no longer planned: command/resnet34/3x224x224/b4/t0/cpu")
            && stderr.contains("newly planned: command/resnet34/3x224x224/b5/t0/cpu"),
        "{stderr}"
    );
}

#[test]
fn retry_attempt_numbers_continue_across_an_interruption() {
    let tmp = temp_dir();
    let failing = worker(tmp.path(), "fail.sh", "echo broken >&2\nexit 3");
    let config = config(tmp.path(), &failing, &[], "1", "retries = 3");
    edgeprof()
        .args(["run", "--no-charts"])
        .arg(&config)
        .assert()
        .code(1);
    let out = tmp.path().join("results");
    let dir = wait_ended(&out, 10)["dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_default();
    assert_eq!(attempts(&dir).len(), 4);
    interrupt_after(&dir, 2);
    edgeprof()
        .args(["run", "--no-charts", "--resume"])
        .arg(&dir)
        .assert()
        .code(1);
    let made: Vec<(u64, bool)> = attempts(&dir).into_iter().map(|a| (a.1, a.2)).collect();
    assert_eq!(
        made,
        vec![(1, false), (2, false), (3, false), (4, true)],
        "retries = 3 means four attempts in all"
    );
}

/// The one run record of a sweep.
fn only_record(out: &Path) -> serde_json::Value {
    let dir = wait_ended(out, 10)["dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_default();
    let text = read(&dir.join("runs.jsonl"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    serde_json::from_str(lines[0]).unwrap_or_default()
}

#[test]
fn a_setsid_grandchild_holding_the_pipes_cannot_stall_the_sweep() {
    for (name, body) in [
        // The worker hangs and its grandchild holds the pipes: the timeout ends both.
        (
            "hang.sh",
            "echo '{\"type\":\"ready\",\"init_ms\":1}'\nsetsid sleep 3917 &\nsleep 3916",
        ),
        // The worker ends at once, its grandchild holding the pipes open: no wait for it.
        (
            "leave.sh",
            "echo '{\"type\":\"ready\",\"init_ms\":1}'\nsetsid sleep 3915 &\nexit 0",
        ),
    ] {
        let tmp = temp_dir();
        let program = worker(tmp.path(), name, body);
        let config = config(tmp.path(), &program, &[], "1", "retries = 0\ntimeout_s = 2");
        let started = Instant::now();
        edgeprof()
            .args(["run", "--no-charts"])
            .arg(&config)
            .timeout(Duration::from_secs(60))
            .assert()
            .code(1);
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2 + 2 + 6),
            "{name}: the sweep took {took:?} with a timeout of 2 s"
        );
        let record = only_record(&tmp.path().join("results"));
        let kind = record["failure"]["kind"].as_str().unwrap_or_default();
        let expected = if name == "hang.sh" {
            "timeout"
        } else {
            "protocol"
        };
        assert_eq!(kind, expected, "{record}");
        for pattern in ["sleep 3915", "sleep 3916", "sleep 3917"] {
            assert!(gone(pattern, 5), "{name}: {pattern} outlived its sweep");
        }
    }
}

#[test]
fn a_gigabyte_output_line_is_a_protocol_failure() {
    let tmp = temp_dir();
    let program = worker(
        tmp.path(),
        "flood.sh",
        "echo '{\"type\":\"ready\",\"init_ms\":1}'\n\
         head -c 1073741824 /dev/zero | tr '\\0' x\necho",
    );
    let config = config(
        tmp.path(),
        &program,
        &[],
        "1",
        "retries = 0\ntimeout_s = 120",
    );
    edgeprof()
        .args(["run", "--no-charts"])
        .arg(&config)
        .timeout(Duration::from_secs(120))
        .assert()
        .code(1);
    let record = only_record(&tmp.path().join("results"));
    assert_eq!(record["failure"]["kind"], "protocol", "{record}");
    let reason = record["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("longer than 64 MiB"), "{reason}");
}

#[test]
fn no_process_of_a_killed_sweep_survives() {
    let tmp = temp_dir();
    let program = worker(
        tmp.path(),
        "tree.sh",
        "echo '{\"type\":\"ready\",\"init_ms\":1}'\nsetsid sleep 3921 &\nsleep 3922 &\nsleep 3923",
    );
    let config = config(
        tmp.path(),
        &program,
        &[],
        "1",
        "retries = 0\ntimeout_s = 600",
    );
    let mut sweep = match Command::new(bin())
        .args(["run", "--no-charts"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let until = Instant::now() + Duration::from_secs(20);
    while ["sleep 3921", "sleep 3922", "sleep 3923"]
        .iter()
        .any(|p| pgrep(p).is_empty())
    {
        assert!(Instant::now() < until, "the worker's tree never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SIGKILL: edgeprof gets no chance to clean up itself.
    let _ = sweep.kill();
    let _ = sweep.wait();
    for pattern in ["sleep 3921", "sleep 3922", "sleep 3923"] {
        assert!(gone(pattern, 10), "{pattern} outlived the killed sweep");
    }
}

#[test]
fn a_full_disk_stops_the_sweep_cleanly_and_it_resumes() {
    use std::os::unix::process::CommandExt;
    let tmp = temp_dir();
    let slow = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/workers/slow.sh"
    );
    let config = config(
        tmp.path(),
        Path::new(slow),
        &["0"],
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16",
        "retries = 0",
    );
    // A file-size limit stands in for a full disk (no root needed): writes past it fail part
    // way, as they do when the disk fills.
    let mut command = Command::new(bin());
    command.args(["run", "--no-charts"]).arg(&config);
    // SAFETY: only async-signal-safe calls (signal, setrlimit) between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 12_000,
                rlim_max: 12_000,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = match command.output() {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let out = tmp.path().join("results");
    let stopped = wait_ended(&out, 10);
    assert_eq!(stopped["state"], "interrupted", "{stopped}");
    let dir = stopped["dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_default();
    assert!(
        stderr.contains(&format!(
            "can be finished with `edgeprof run --resume {}`",
            dir.display()
        )) && stderr.contains("File too large"),
        "{stderr}"
    );
    let done_before = stopped["done"].as_u64().unwrap_or(0);
    assert!(done_before > 0 && done_before < 16, "{stopped}");
    // Room again: the resume finishes every condition, once each.
    edgeprof()
        .args(["run", "--no-charts", "--resume"])
        .arg(&dir)
        .assert()
        .success();
    let ended = wait_ended(&out, 10);
    assert_eq!(ended["state"], "complete", "{ended}");
    assert_eq!(ended["done"], 16, "{ended}");
    let finished: Vec<(String, u64, bool)> = attempts(&dir);
    let mut ids: Vec<&str> = finished.iter().map(|a| a.0.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 16, "{finished:?}");
    edgeprof().arg("report").arg(&dir).assert().success();
}

#[test]
fn report_prints_what_it_cannot_write() {
    let tmp = temp_dir();
    let config = slow_config(tmp.path(), 0.0);
    let dir = run_ok(&config, &tmp.path().join("results"));
    // The summaries' temporary file cannot be made (as in a read-only directory, which root's
    // permissions would not stop).
    if let Err(e) = std::fs::create_dir(dir.join("summary.tmp")) {
        panic!("{e}");
    }
    let assert = edgeprof()
        .args(["report", "--no-charts"])
        .arg(&dir)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stdout.contains("4 ok, 0 failed"), "{stdout}");
    assert!(
        stderr.contains("warning: the summaries and charts were not written"),
        "{stderr}"
    );
}

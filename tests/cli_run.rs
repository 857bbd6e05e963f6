//! `edgeprof run` and `edgeprof report` through the binary: a real tract sweep, faulty workers,
//! peak memory against GNU time, interruption and resume.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn worker_fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/workers/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The one results directory under `parent`.
fn results_dir(parent: &Path) -> PathBuf {
    only_entry(parent)
}

fn records(dir: &Path) -> Vec<serde_json::Value> {
    read(&dir.join("runs.jsonl"))
        .lines()
        .map(|l| match serde_json::from_str(l) {
            Ok(v) => v,
            Err(e) => panic!("runs.jsonl line is not JSON: {l:?}: {e}"),
        })
        .collect()
}

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        // Zombies awaiting their reaper have an empty command line and hold nothing.
        if text.contains(needle) {
            found.push(format!("{name}: {text}"));
        }
    }
    found
}

#[test]
fn a_tract_sweep_writes_the_whole_results_directory() {
    let tmp = temp_dir();
    let config = tmp.path().join("tiny.toml");
    write(
        &config,
        "name = \"tiny\"\n[matrix]\nmodels = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\nthreads = [1]\n\
         [measure]\nwarmup = 1\niterations = 4\nrepeats = 2\nsample_interval_ms = 20\n\
         [output]\nformats = [\"csv\", \"json\", \"md\", \"svg\"]\n",
    );
    let out = tmp.path().join("results");
    let assert = edgeprof()
        .args(["run", &config.display().to_string(), "--output"])
        .arg(&out)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("1 condition(s) to run"), "{stderr}");
    assert!(stderr.contains("estimated"), "{stderr}");
    assert!(
        stdout.contains("tract/shufflenet_v2_x0_5/3x32x32/b1/t1/cpu"),
        "{stdout}"
    );
    assert!(stdout.contains("mean latency"), "{stdout}");
    let dir = results_dir(&out);
    assert!(
        dir.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("Z-tiny")),
        "{dir:?}"
    );
    for file in [
        "manifest.json",
        "runs.jsonl",
        "samples.jsonl",
        "summary.csv",
        "summary.json",
        "summary.md",
        "charts/latency.svg",
        "charts/peak_memory.svg",
        "charts/cpu_utilization.svg",
    ] {
        assert!(dir.join(file).is_file(), "missing {file}");
    }
    let manifest: serde_json::Value = match serde_json::from_str(&read(&dir.join("manifest.json")))
    {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(manifest["status"], "complete");
    assert!(manifest["device"]["cpus_available"]
        .as_u64()
        .is_some_and(|n| n >= 1));
    assert!(manifest["device"]["kernel"].is_string());
    assert_eq!(manifest["engines"]["tract"], "0.23.9");
    let runs = records(&dir);
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["ok"], true);
    assert_eq!(run["run"]["repeats"].as_array().map(Vec::len), Some(2));
    assert_eq!(run["stats"]["latency"]["samples"], 8);
    assert!(run["resources"]["peak_rss_bytes"]
        .as_u64()
        .is_some_and(|b| b > 1 << 20));
    assert!(read(&dir.join("samples.jsonl")).lines().count() >= 2);
    let csv = read(&dir.join("summary.csv"));
    assert!(csv.starts_with("id,engine,model,"), "{csv}");
    assert_eq!(csv.lines().count(), 2);
    // The stored run re-renders.
    let again = edgeprof()
        .args(["report", "--no-charts"])
        .arg(&dir)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&again.get_output().stdout).into_owned();
    assert!(text.contains("1 ok, 0 failed"), "{text}");
    assert!(!text.contains("mean latency"), "{text}");
}

#[test]
fn faulty_workers_are_recorded_retried_and_cleaned_up() {
    let tmp = temp_dir();
    let log = tmp.path().join("starts.log");
    let config = tmp.path().join("faults.toml");
    write(
        &config,
        &format!(
            "name = \"faults\"\n[command]\nprogram = \"{}\"\nargs = [\"{}\"]\n\
             [matrix]\nengines = [\"command\"]\n\
             models = [\"shufflenet_v2_x0_5\", \"mobilenet_v2\", \"resnet34\", \"resnet50\", \"vgg19\"]\n\
             [measure]\ntimeout_s = 2\nretries = 1\nsample_interval_ms = 50\n",
            worker_fixture("faulty.sh"),
            log.display()
        ),
    );
    let out = tmp.path().join("results");
    let started = Instant::now();
    let assert = run_command(&config, &out)
        .timeout(Duration::from_secs(120))
        .assert()
        .code(1);
    // Two attempts of a 2 s timeout plus the 1 s kill grace, and little else.
    assert!(started.elapsed() < Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("4 of 5 condition(s) failed"), "{stderr}");
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(
        stdout.contains("about to crash"),
        "stderr tail missing: {stdout}"
    );

    // Every failing condition ran twice (one retry), the good one once per worker process its
    // five repeats are spread over (three by default).
    let starts = read(&log);
    for (what, times) in [
        ("ok", 3),
        ("segv", 2),
        ("hang", 2),
        ("garbage", 2),
        ("exit", 2),
    ] {
        assert_eq!(
            starts.lines().filter(|l| *l == what).count(),
            times,
            "{what} in {starts}"
        );
    }
    let dir = results_dir(&out);
    let runs = records(&dir);
    assert_eq!(runs.len(), 9);
    let last = |model: &str| -> serde_json::Value {
        match runs
            .iter()
            .rev()
            .find(|r| r["condition"]["model"]["name"] == model)
        {
            Some(r) => r.clone(),
            None => panic!("no record for {model}"),
        }
    };
    assert_eq!(last("shufflenet_v2_x0_5")["ok"], true);
    for (model, kind, words) in [
        ("mobilenet_v2", "signal", "signal 11"),
        ("resnet34", "timeout", "timeout"),
        ("resnet50", "protocol", "broke the protocol"),
        ("vgg19", "exit", "status 3"),
    ] {
        let r = last(model);
        assert_eq!(r["ok"], false, "{model}");
        assert_eq!(r["last"], true, "{model}");
        assert_eq!(r["attempt"], 2, "{model}");
        assert_eq!(r["failure"]["kind"], kind, "{model}");
        let reason = r["reason"].as_str().unwrap_or("");
        assert!(reason.contains(words), "{model}: {reason}");
    }
    assert!(last("vgg19")["failure"]["stderr_tail"]
        .as_str()
        .is_some_and(|t| t.contains("giving up")));
    let summary = read(&dir.join("summary.csv"));
    assert_eq!(
        summary.lines().filter(|l| l.contains(",failed,")).count(),
        4
    );
    // Nothing the hanging worker started survives.
    let needle = tmp.path().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "orphans remain: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `Maximum resident set size (kbytes): N` of GNU time's verbose report.
fn gnu_time_max_rss(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let v = l
            .trim()
            .strip_prefix("Maximum resident set size (kbytes):")?;
        v.trim().parse::<u64>().ok().map(|kib| kib * 1024)
    })
}

#[test]
fn peak_rss_agrees_with_gnu_time_within_five_percent() {
    let gnu_time = Path::new("/usr/bin/time");
    assert!(
        gnu_time.is_file(),
        "GNU time is needed for this test: apt-get install time (.ci/run installs it)"
    );
    let tmp = temp_dir();
    let config = tmp.path().join("memory.toml");
    write(
        &config,
        &format!(
            "name = \"memory\"\n[command]\nprogram = \"{}\"\nargs = [\"300\"]\n\
             [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\"]\n\
             [measure]\nretries = 0\nsample_interval_ms = 20\n",
            worker_fixture("allocate.py")
        ),
    );
    let out = tmp.path().join("results");
    run_config(&config, &out);
    let runs = records(&results_dir(&out));
    let resources = &runs[0]["resources"];
    let peak = resources["peak_rss_bytes"].as_u64().unwrap_or(0);
    let hwm = resources["vmhwm_bytes"].as_u64().unwrap_or(0);
    let rusage = resources["rusage_maxrss_bytes"].as_u64().unwrap_or(0);

    // The same program, with the same request on stdin, under GNU time.
    let request = r#"{"condition":{"id":"x","engine":"command","model":{"kind":"zoo","name":"resnet34"},"input":"3x224x224","batch":1,"threads":0,"device":"cpu"},"warmup":10,"iterations":100,"repeats":5,"seed":1,"classes":1000}"#;
    let output = std::process::Command::new(gnu_time)
        .arg("-v")
        .arg(worker_fixture("allocate.py"))
        .arg("300")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(request.as_bytes())?;
            }
            child.wait_with_output()
        });
    let output = match output {
        Ok(o) => o,
        Err(e) => panic!("cannot run GNU time: {e}"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let Some(reference) = gnu_time_max_rss(&stderr) else {
        panic!("GNU time gave no maximum RSS: {stderr}")
    };
    let within = |a: u64, what: &str| {
        let ratio = a as f64 / reference as f64;
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{what} {a} B vs GNU time {reference} B (ratio {ratio:.3})"
        );
    };
    assert!(
        reference > 300 << 20,
        "the program touched less than 300 MiB: {reference}"
    );
    within(peak, "peak RSS");
    within(hwm, "sampled VmHWM");
    within(rusage, "rusage maxrss");
}

/// Starts `edgeprof run` on a sweep of slow command-engine conditions (0.4 s each).
fn slow_sweep(tmp: &Path, conditions: usize) -> (std::process::Child, PathBuf) {
    slow_sweep_of(tmp, conditions, "0.4", Stdio::null())
}

/// Starts `edgeprof run` on `conditions` command-engine conditions of `seconds` each, its
/// stderr going to `stderr`.
fn slow_sweep_of(
    tmp: &Path,
    conditions: usize,
    seconds: &str,
    stderr: Stdio,
) -> (std::process::Child, PathBuf) {
    let config = tmp.join("slow.toml");
    let batches: Vec<String> = (1..=conditions).map(|b| b.to_string()).collect();
    write(
        &config,
        &format!(
            "name = \"slow\"\n[command]\nprogram = \"{}\"\nargs = [\"{seconds}\"]\n\
             [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\"]\nbatch = [{}]\n\
             [measure]\nretries = 0\nsample_interval_ms = 50\n",
            worker_fixture("slow.sh"),
            batches.join(", ")
        ),
    );
    let out = tmp.join("results");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("edgeprof"))
        .args(["run", "--no-charts"])
        .arg(&config)
        .arg("--output")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn();
    match child {
        Ok(c) => (c, out),
        Err(e) => panic!("cannot start edgeprof: {e}"),
    }
}

/// Waits until the sweep has stored `n` records.
fn wait_for_records(out: &Path, n: usize) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(dir) = std::fs::read_dir(out)
            .ok()
            .and_then(|mut e| e.next())
            .and_then(|e| e.ok())
            .map(|e| e.path())
        {
            let lines = std::fs::read_to_string(dir.join("runs.jsonl"))
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if lines >= n {
                return dir;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the sweep stored fewer than {n} records"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    if let Err(e) = nix::sys::signal::kill(pid, signal) {
        panic!("cannot signal edgeprof: {e}");
    }
}

fn resume(dir: &Path) -> assert_cmd::assert::Assert {
    edgeprof()
        .args(["run", "--no-charts", "--resume"])
        .arg(dir)
        .assert()
        .success()
}

fn assert_each_condition_once(dir: &Path, conditions: usize) {
    let runs = records(dir);
    let mut ids: Vec<String> = runs
        .iter()
        .map(|r| r["condition"]["id"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(runs.iter().all(|r| r["ok"] == true), "{runs:?}");
    assert_eq!(ids.len(), conditions, "{ids:?}");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), conditions, "a condition ran twice");
}

#[test]
fn a_sweep_killed_with_sigkill_is_finished_by_resume() {
    let tmp = temp_dir();
    let (mut child, out) = slow_sweep(tmp.path(), 6);
    let dir = wait_for_records(&out, 2);
    signal(&child, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    let before = records(&dir).len();
    assert!((2..6).contains(&before), "{before} records before the kill");
    // The worker that was running died with its parent.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_mentioning("slow.sh").is_empty() {
        assert!(Instant::now() < deadline, "orphan worker after SIGKILL");
        std::thread::sleep(Duration::from_millis(50));
    }
    let assert = resume(&dir);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!("{before} of 6 condition(s) already done")),
        "{stderr}"
    );
    assert_each_condition_once(&dir, 6);
    let manifest = read(&dir.join("manifest.json"));
    assert!(manifest.contains("\"status\": \"complete\""), "{manifest}");
    assert!(manifest.contains("\"resumed\": ["), "{manifest}");
    // Resuming a finished sweep runs nothing again.
    resume(&dir);
    assert_each_condition_once(&dir, 6);
}

#[test]
fn ctrl_c_saves_what_was_measured_and_exits_130() {
    let tmp = temp_dir();
    let (mut child, out) = slow_sweep(tmp.path(), 5);
    let dir = wait_for_records(&out, 1);
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let status = match child.wait() {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(status.code(), Some(130));
    let manifest = read(&dir.join("manifest.json"));
    assert!(
        manifest.contains("\"status\": \"interrupted\""),
        "{manifest}"
    );
    let done = records(&dir).len();
    assert!((1..5).contains(&done));
    assert!(dir.join("summary.csv").is_file());
    resume(&dir);
    assert_each_condition_once(&dir, 5);
}

/// Two SIGINTs 2 ms apart (as `timeout -s INT` sends them: to its child, then to the child's
/// process group) are one stop: the run still ends by saying how to resume, rather than at once
/// as a second Ctrl-C does.
#[test]
fn two_sigints_at_once_are_one_stop() {
    let tmp = temp_dir();
    let (child, _) = slow_sweep_of(tmp.path(), 2, "30", Stdio::piped());
    // The worker (30 s) is running by now.
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, nix::sys::signal::Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(2));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    let output = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("finish with: edgeprof run --resume"),
        "{stderr}"
    );
}

/// Ctrl-C after a condition's first repeat finished, while its second runs: the finished repeat
/// is kept, and `--resume` measures only the one still missing, then forgets what it kept.
#[test]
fn ctrl_c_keeps_a_finished_repeat_for_resume() {
    let tmp = temp_dir();
    let mark = tmp.path().join("first-repeat-done");
    let config = tmp.path().join("repeats.toml");
    write(
        &config,
        &format!(
            "name = \"repeats\"\n[command]\nprogram = \"{}\"\nargs = [\"60\", \"{}\"]\n\
             [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\"]\n\
             [measure]\nretries = 0\nwarmup = 0\niterations = 3\nrepeats = 2\nprocesses = 1\n",
            worker_fixture("repeats.sh"),
            mark.display()
        ),
    );
    let out = tmp.path().join("results");
    let child = spawn_run(&config, &out);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !mark.exists() {
        assert!(
            Instant::now() < deadline,
            "the worker never finished a repeat"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The worker has written its first repeat; give edgeprof a moment to read it.
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let output = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("kept the finished repeats of 1 condition(s)"),
        "{stderr}"
    );
    let dir = results_dir(&out);
    assert!(records(&dir).is_empty());
    let resumed = resume(&dir);
    let said = String::from_utf8_lossy(&resumed.get_output().stderr).into_owned();
    assert!(
        said.contains("1 condition(s) go on from the 1 repeat(s)"),
        "{said}"
    );
    let runs = records(&dir);
    assert_eq!(runs.len(), 1, "{runs:?}");
    // The kept repeat first, then the one measured on resuming.
    assert_eq!(
        runs[0]["run"]["repeats"],
        serde_json::json!([[1.0, 2.0, 3.0], [7.0, 8.0, 9.0]]),
        "{}",
        runs[0]
    );
    assert!(!dir.join("partial.jsonl").exists());
}

#[test]
fn run_and_report_refuse_bad_input_with_exit_code_2() {
    assert_bad_input(&["run"], "name a config file");
    assert_bad_input(&["run", "/nonexistent/x.toml"], "cannot read config");
    assert_bad_input(
        &["run", "--resume", "/nonexistent/dir"],
        "not an edgeprof results directory",
    );
    assert_bad_input(
        &["report", "/nonexistent/dir"],
        "not an edgeprof results directory",
    );
    let tmp = temp_dir();
    let config = tmp.path().join("none.toml");
    write(
        &config,
        "[matrix]\nmodels = [\"resnet34\"]\n[[matrix.exclude]]\nmodel = \"resnet34\"\n",
    );
    assert_bad_input(&["run", &config.display().to_string()], "nothing to run");
    let both = config.display().to_string();
    assert_bad_input(&["run", &both, "--resume", "/tmp"], "leave CONFIG out");
    // Photographs asked for where none are set up: refused before a results directory is made.
    let photographs = tmp.path().join("photographs.toml");
    write(
        &photographs,
        "[matrix]\nmodels = [\"resnet34\"]\n[measure]\ninput_data = \"images\"\n",
    );
    let out = tmp.path().join("results");
    let assert = edgeprof()
        .env("EDGEPROF_DATA_DIR", tmp.path().join("data"))
        .args(["run", "--no-charts", "--output"])
        .arg(&out)
        .arg(&photographs)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("measure.input_data = \"images\", and no sample images in"),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn report_warns_about_a_torn_record_and_still_renders() {
    let tmp = temp_dir();
    let (mut child, out) = slow_sweep(tmp.path(), 2);
    let _ = child.wait();
    let dir = results_dir(&out);
    let runs = dir.join("runs.jsonl");
    let mut text = read(&runs);
    text.push_str("{\"condition\":{\"id\":");
    write(&runs, &text);
    let assert = edgeprof().arg("report").arg(&dir).assert().success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("torn last line"), "{stderr}");
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("2 ok"), "{stdout}");
    assert!(dir.join("charts/latency.svg").is_file());
}

#[test]
fn an_engine_that_built_another_model_fails_its_condition() {
    let tmp = temp_dir();
    let config = tmp.path().join("params.toml");
    write(
        &config,
        &format!(
            "name = \"params\"\n[command]\nprogram = \"{}\"\n[matrix]\nengines = [\"command\"]\n\
             models = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\n[measure]\nretries = 0\n",
            worker_fixture("wrong-params.sh")
        ),
    );
    let out = tmp.path().join("results");
    run_command(&config, &out).assert().code(1);
    let runs = records(&results_dir(&out));
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["ok"], false);
    assert_eq!(runs[0]["failure"]["kind"], "parameter_mismatch");
    let reason = runs[0]["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains(
            "the engine built 12345 parameters where the zoo's shufflenet_v2_x0_5 has 1366792"
        ),
        "{reason}"
    );
}

#[test]
fn tract_and_candle_run_side_by_side_from_one_config() {
    let tmp = temp_dir();
    let config = tmp.path().join("two.toml");
    write(
        &config,
        "name = \"two\"\n[matrix]\nengines = [\"tract\", \"candle\"]\n\
         models = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\nthreads = [1]\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n",
    );
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("2 ok, 0 failed"), "{stdout}");
    let dir = results_dir(&out);
    let runs = records(&dir);
    let engine = |name: &str| -> serde_json::Value {
        match runs.iter().find(|r| r["condition"]["engine"] == name) {
            Some(r) => r.clone(),
            None => panic!("no {name} record in {runs:?}"),
        }
    };
    assert_eq!(engine("tract")["ok"], true);
    let candle = engine("candle");
    assert_eq!(candle["ok"], true, "{candle}");
    assert_eq!(candle["run"]["engine_version"], "0.11.1");
    assert_eq!(candle["run"]["threads"], 1);
    // candle reports the parameters it built; they are the zoo's.
    assert!(
        candle["run"]["parameters"]
            .as_u64()
            .is_some_and(|n| n > 300_000),
        "{candle}"
    );
    let manifest = read(&dir.join("manifest.json"));
    assert!(manifest.contains("\"candle\": \"0.11.1\""), "{manifest}");
}

#[test]
fn a_fleet_node_reads_its_share_to_the_end_line_and_stops_when_its_stdin_closes() {
    let tmp = temp_dir();
    let share = "name = \"node\"\n[matrix]\nmodels = [\"shufflenet_v2_x0_5\"]\n\
                 inputs = [\"3x32x32\", \"3x64x64\"]\nthreads = [1]\n\
                 [measure]\nwarmup = 1\niterations = 100000\nrepeats = 1\n";
    let out = tmp.path().join("results");
    let run = |stdin: String| {
        edgeprof()
            .args(["run", "-", "--stream", "--control", "--output"])
            .arg(&out)
            .write_stdin(stdin)
            .timeout(std::time::Duration::from_secs(60))
            .output()
    };
    // The share and its end line, then stdin closes at once: the node stops as interrupted
    // instead of running 100,000 iterations.
    let output = match run(format!("{share}# edgeprof: end of the share\n")) {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("{\"started\""), "{stdout}");
    assert!(stdout.contains("\"status\":\"interrupted\""), "{stdout}");
    // Without the end line the controller went away before the share was whole.
    let output = match run(share.to_string()) {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("before the share's end line"), "{stderr}");
    // --control is for a streaming node only.
    edgeprof()
        .args(["run", "-", "--control"])
        .write_stdin(share)
        .assert()
        .code(2);
}

#[test]
fn excluded_outliers_stay_out_of_the_mean_and_kept_ones_stay_in() {
    let tmp = temp_dir();
    let mean_under = |policy: &str| -> (f64, f64, serde_json::Value) {
        let config = tmp.path().join(format!("{policy}.toml"));
        write(
            &config,
            &format!(
                "name = \"{policy}\"\n[command]\nprogram = \"{}\"\n\
                 [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\"]\n\
                 [measure]\nrepeats = 1\nretries = 0\noutliers = \"{policy}\"\n",
                worker_fixture("outlier.sh"),
            ),
        );
        let out = tmp.path().join(format!("results-{policy}"));
        run_command(&config, &out).assert().success();
        let runs = records(&results_dir(&out));
        let Some(stats) = runs.first().map(|r| r["stats"].clone()) else {
            panic!("no record under {policy}")
        };
        let mean = stats["latency"]["mean_ms"].as_f64().unwrap_or(f64::NAN);
        let repeat_mean = stats["repeat_summary"]["mean_ms"]
            .as_f64()
            .unwrap_or(f64::NAN);
        (mean, repeat_mean, stats)
    };
    let (mean, repeat_mean, stats) = mean_under("exclude");
    assert!((mean - 1.0).abs() < 0.05, "excluded: mean {mean} ms");
    assert!(
        (repeat_mean - 1.0).abs() < 0.05,
        "excluded: {repeat_mean} ms"
    );
    assert_eq!(stats["excluded_from_mean"], 1, "{stats}");
    assert_eq!(stats["outliers"], serde_json::json!([19]), "{stats}");
    // The raw figures still show the stall.
    assert_eq!(stats["latency"]["max_ms"], 50.0, "{stats}");
    // Robust figures sit near 1 ms either way.
    let trimmed = stats["latency"]["trimmed_mean_ms"]
        .as_f64()
        .unwrap_or(f64::NAN);
    assert!((trimmed - 1.0).abs() < 0.05, "trimmed mean {trimmed}");
    let (kept, _, stats) = mean_under("keep");
    assert!(kept > 2.0, "kept: mean {kept} ms");
    assert_eq!(stats["excluded_from_mean"], 0, "{stats}");
}

#[test]
fn compare_finds_no_difference_against_itself_and_half_the_threads_slower() {
    let tmp = temp_dir();
    let sweep = |name: &str, threads: &str| -> PathBuf {
        let config = tmp.path().join(format!("{name}.toml"));
        write(
            &config,
            &format!(
                "name = \"{name}\"\n[command]\nprogram = \"{}\"\n\
                 [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\", \"mobilenet_v2\"]\n\
                 threads = [{threads}]\n[measure]\nrepeats = 1\nretries = 0\n",
                worker_fixture("scaling.sh"),
            ),
        );
        let out = tmp.path().join(name);
        run_command(&config, &out).assert().success();
        results_dir(&out)
    };
    let first = sweep("first", "2, 4");
    let again = sweep("again", "2, 4");
    let half = sweep("half", "1, 2");
    let compare = |a: &Path, b: &Path, extra: &[&str]| {
        let mut c = edgeprof();
        c.arg("compare").arg(a).arg(b).args(extra);
        c
    };
    let out = compare(&first, &again, &["--json"]).assert().success();
    let json: serde_json::Value =
        serde_json::from_slice(&out.get_output().stdout).unwrap_or_default();
    let verdicts: Vec<&str> = json["conditions"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["verdict"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(verdicts.len(), 4, "{json}");
    assert!(
        verdicts.iter().all(|v| *v == "no-significant-difference"),
        "{json}"
    );
    // Half the threads: every condition pairs with its counterpart and is slower.
    let out = compare(&first, &half, &[]).assert().success();
    let table = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(table.contains("4 slower, 0 faster"), "{table}");
    let out = compare(&first, &half, &["--markdown", "--fail-on-regression"])
        .assert()
        .code(1);
    let markdown = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(markdown.contains("| ratio [95 % interval] |"), "{markdown}");
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("4 of 4 condition(s) are slower"),
        "{stderr}"
    );
    // The other way round: faster, and no regression.
    let out = compare(&half, &first, &["--fail-on-regression"])
        .assert()
        .success();
    let table = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(table.contains("0 slower, 4 faster"), "{table}");
    // Within one directory: four threads against two, model by model.
    let within = |dir: &Path, spec: &str| {
        let mut c = edgeprof();
        c.arg("compare").arg(dir).args(["--within", spec]);
        c
    };
    let out = within(&first, "threads=2").assert().success();
    let table = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(table.contains("0 slower, 2 faster"), "{table}");
    assert!(table.contains("/t2→t4/cpu "), "{table}");
    within(&first, "speed=2").assert().code(2);
    within(&first, "threads=3").assert().code(2);
    // Not a results directory: bad input.
    compare(tmp.path(), &first, &[]).assert().code(2);
}

#[test]
fn a_cpu_hog_during_a_condition_marks_it_disturbed_and_is_named() {
    let tmp = temp_dir();
    let config = tmp.path().join("hog.toml");
    write(
        &config,
        &format!(
            "name = \"hog\"\n[command]\nprogram = \"{}\"\nargs = [\"1.5\"]\n\
             [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\"]\n\
             [measure]\nrepeats = 1\nretries = 0\n",
            worker_fixture("slow.sh"),
        ),
    );
    // Not a child of edgeprof: someone else's busy process on the same machine.
    let mut hog = match std::process::Command::new("yes")
        .stdout(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("cannot start the hog: {e}"),
    };
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out).assert();
    let _ = hog.kill();
    let _ = hog.wait();
    let assert = assert.success();
    let runs = records(&results_dir(&out));
    let Some(record) = runs.first() else {
        panic!("no record")
    };
    let disturbance = &record["telemetry"]["disturbance"];
    let named = disturbance["top"]
        .as_array()
        .is_some_and(|top| top.iter().any(|o| o["name"] == "yes"));
    assert!(named, "{disturbance}");
    assert!(
        disturbance["others_cpu_pct"].as_f64().unwrap_or(0.0) >= 20.0,
        "{disturbance}"
    );
    let summary = read(&results_dir(&out).join("summary.json"));
    assert!(summary.contains("\"verdict\": \"disturbed\""), "{summary}");
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("DISTURBED (") && stderr.contains("yes (pid"),
        "{stderr}"
    );
}

/// Run it with `cargo test --test cli_run -- --ignored`. Every exception carries a non-clean
/// verdict: the second sweep is compared with the first through this device's history (its own
/// cache directory here), so a condition beyond both intervals of its clean first run is judged
/// noisy. Ignored because the share that agrees still falls short now and then on a shared VM:
/// over eight pairs of sweeps of this config (release build), 94 of 96 conditions agreed, but
/// one pair had both its exceptions (10 of 12, the second sweep 1.8× slower on two threads
/// throughout) — about one run of this test in eight — and it takes 106 s in a debug build.
#[test]
#[ignore = "about one run in eight has two of its twelve conditions apart on a shared VM; 106 s"]
fn the_same_config_twice_agrees_within_the_intervals_or_says_why_not() {
    let tmp = temp_dir();
    let config = tmp.path().join("twice.toml");
    write(
        &config,
        "name = \"twice\"\n[matrix]\nengines = [\"tract\"]\n\
         models = [\"shufflenet_v2_x0_5\", \"mobilenet_v2\", \"resnet34\"]\n\
         inputs = [\"3x32x32\", \"3x48x48\"]\nthreads = [1, 2]\n[measure]\nwarmup = 5\n\
         iterations = 30\nrepeats = 3\nretries = 0\ncheck_outputs = false\n",
    );
    // A history of its own: the second sweep is compared with the first and no other.
    let cache = tmp.path().join("cache");
    let sweep = |name: &str| -> PathBuf {
        let out = tmp.path().join(name);
        run_command(&config, &out)
            .env("EDGEPROF_CACHE_DIR", &cache)
            .assert()
            .success();
        results_dir(&out)
    };
    let (a, b) = (sweep("a"), sweep("b"));
    // Per condition: median, its interval, and the verdict.
    let load = |dir: &Path| -> Vec<(String, f64, f64, f64)> {
        records(dir)
            .iter()
            .filter(|r| r["ok"] == true)
            .map(|r| {
                let s = &r["stats"];
                let interval = &s["median_interval_ms"];
                (
                    r["condition"]["id"].as_str().unwrap_or("").to_string(),
                    s["latency"]["median_ms"].as_f64().unwrap_or(f64::NAN),
                    interval[0].as_f64().unwrap_or(f64::NAN),
                    interval[1].as_f64().unwrap_or(f64::NAN),
                )
            })
            .collect()
    };
    let verdicts = |dir: &Path| -> serde_json::Value {
        serde_json::from_str(&read(&dir.join("summary.json"))).unwrap_or_default()
    };
    let (first, second) = (load(&a), load(&b));
    assert_eq!(first.len(), 12);
    let summary_b = verdicts(&b);
    let summary_a = verdicts(&a);
    let verdict_of = |summary: &serde_json::Value, id: &str| -> String {
        summary["conditions"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["id"] == id))
            .and_then(|r| r["verdict"].as_str())
            .unwrap_or("")
            .to_string()
    };
    let mut agree = 0;
    let mut report = Vec::new();
    for (id, m1, lo1, hi1) in &first {
        let Some((_, m2, lo2, hi2)) = second.iter().find(|x| &x.0 == id) else {
            panic!("{id} ran only once")
        };
        // The intervals of the two medians overlap.
        let overlap = lo1 <= hi2 && lo2 <= hi1;
        let why = (verdict_of(&summary_a, id), verdict_of(&summary_b, id));
        report.push(format!(
            "{id}: {m1:.3} [{lo1:.3}, {hi1:.3}] and {m2:.3} [{lo2:.3}, {hi2:.3}] ms, {why:?}"
        ));
        if overlap {
            agree += 1;
        } else {
            assert!(
                why.0 != "clean" || why.1 != "clean",
                "apart beyond their intervals, both judged clean: {report:#?}"
            );
        }
    }
    eprintln!("twice: {agree} of 12 within their intervals: {report:#?}");
    // At least 90 %: 11 of 12.
    assert!(agree >= 11, "{agree} of 12: {report:#?}");
    // compare says the same: no condition significantly different unless a verdict explains it.
    let out = edgeprof()
        .args(["compare", "--json"])
        .arg(&a)
        .arg(&b)
        .assert()
        .success();
    let json: serde_json::Value =
        serde_json::from_slice(&out.get_output().stdout).unwrap_or_default();
    for c in json["conditions"].as_array().cloned().unwrap_or_default() {
        let id = c["baseline"].as_str().unwrap_or("");
        if c["verdict"] != "no-significant-difference" {
            assert!(
                verdict_of(&summary_a, id) != "clean" || verdict_of(&summary_b, id) != "clean",
                "{c} against {report:#?}"
            );
        }
    }
}

/// A config's threads past the cores here run, with the warning `bench` gives, in the run's
/// log too.
#[test]
fn a_sweep_warns_of_more_threads_than_cores() {
    let tmp = temp_dir();
    let cores = edgeprof::collect::device::available_cores();
    let config = tmp.path().join("many.toml");
    write(
        &config,
        &format!(
            "name = \"many\"\n[matrix]\nmodels = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\n\
             threads = [{}]\n[measure]\nwarmup = 0\niterations = 2\nrepeats = 1\n",
            cores + 1
        ),
    );
    let out = tmp.path().join("results");
    let assert = run_config(&config, &out);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let warning = format!(
        "warning: {} threads are more than the {cores} cores here",
        cores + 1
    );
    assert!(stderr.contains(&warning), "{stderr}");
    let log = read(&only_entry(&out).join("progress.log"));
    assert!(log.contains(&warning), "{log}");
}

#[test]
fn a_lower_precision_is_measured_beside_its_fp32_twin_with_its_accuracy_cost() {
    let tmp = temp_dir();
    let config = tmp.path().join("precision.toml");
    write(
        &config,
        "name = \"precision\"\n[matrix]\nengines = [\"candle\"]\nmodels = [\"shufflenet_v2_x0_5\"]\n\
         inputs = [\"3x32x32\"]\nbatch = [2]\nthreads = [1]\nprecision = [\"fp32\", \"fp16\", \"int8\"]\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n[output]\nformats = [\"csv\", \"json\"]\n",
    );
    let out = tmp.path().join("results");
    run_config(&config, &out).success();
    let dir = results_dir(&out);
    let summary: serde_json::Value = match serde_json::from_str(&read(&dir.join("summary.json"))) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let twin = "candle/shufflenet_v2_x0_5/3x32x32/b2/t1/cpu";
    let compared = summary["accuracy"]["compared"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let found: Vec<(String, String, u64)> = compared
        .iter()
        .map(|a| {
            (
                a["condition"].as_str().unwrap_or("").to_string(),
                a["reference"].as_str().unwrap_or("").to_string(),
                a["images"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(found, [(format!("{twin}/fp16"), twin.to_string(), 2)]);
    // float16 rounding moves the outputs a little, never their direction.
    let cosine = compared[0]["cosine"].as_f64().unwrap_or(0.0);
    assert!(cosine > 0.99, "{compared:?}");
    // The int8 condition is skipped with candle's reason, and the CSV says each precision.
    let csv = read(&dir.join("summary.csv"));
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let column = reader
        .headers()
        .ok()
        .and_then(|h| h.iter().position(|c| c == "precision"));
    let rows: Vec<csv::StringRecord> = reader.records().flatten().collect();
    let precision_of = |id: &str| {
        rows.iter()
            .find(|r| r.get(0) == Some(id))
            .and_then(|r| r.get(column?))
            .map(str::to_string)
    };
    assert_eq!(precision_of(twin).as_deref(), Some("fp32"));
    assert_eq!(
        precision_of(&format!("{twin}/fp16")).as_deref(),
        Some("fp16")
    );
    let skipped = summary["conditions"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|r| r["id"] == format!("{twin}/int8").as_str())
        })
        .map(|r| r["reason"].as_str().unwrap_or("").to_string());
    assert!(
        skipped
            .as_deref()
            .is_some_and(|r| r.contains("no integer kernels")),
        "{skipped:?}"
    );
}

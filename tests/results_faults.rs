//! Results directories that were damaged, swapped or tampered with between a run and its
//! readers: bad bytes, a disk that filled, a model file replaced, another device, symbolic
//! links, FIFOs.

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn worker_fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/workers/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A finished sweep of two quick `command` conditions (batch 1 and 2) on the ONNX file
/// `model.onnx` in `tmp`; returns its results directory.
fn finished_sweep(tmp: &Path) -> PathBuf {
    let model = tmp.join("model.onnx");
    export_model("shufflenet_v2_x0_5", "3x32x32", &model);
    let config = tmp.join("quick.toml");
    write(
        &config,
        &format!(
            "name = \"quick\"\n[command]\nprogram = \"{}\"\nargs = [\"0.3\"]\n\
             [matrix]\nengines = [\"command\"]\nmodels = [\"model.onnx\"]\ninputs = [\"3x32x32\"]\n\
             batch = [1, 2]\n[measure]\nretries = 0\nsample_interval_ms = 20\n",
            worker_fixture("slow.sh")
        ),
    );
    let out = tmp.join("results");
    run_config(&config, &out);
    only_entry(&out)
}

fn lines(path: &Path) -> Vec<String> {
    read(path).lines().map(str::to_string).collect()
}

/// Leaves the directory as a sweep killed after its first condition would: one record, and
/// the manifest still saying it runs.
fn interrupt_after_the_first(dir: &Path) {
    let runs = lines(&dir.join("runs.jsonl"));
    write(&dir.join("runs.jsonl"), &format!("{}\n", runs[0]));
    let manifest = read(&dir.join("manifest.json"))
        .replace("\"status\": \"complete\"", "\"status\": \"interrupted\"");
    write(&dir.join("manifest.json"), &manifest);
}

/// Appends `bytes` to the run's samples.
fn append_to_samples(dir: &Path, bytes: &[u8]) {
    let samples = dir.join("samples.jsonl");
    let mut all = std::fs::read(&samples).unwrap_or_default();
    all.extend_from_slice(bytes);
    if let Err(e) = std::fs::write(&samples, &all) {
        panic!("{e}");
    }
}

fn resume(dir: &Path) -> assert_cmd::Command {
    let mut command = edgeprof();
    command.args(["run", "--no-charts", "--resume"]).arg(dir);
    command
}

/// A sweep interrupted after its first condition, with one bad byte in a line of its samples.
fn interrupted_with_a_bad_sample(tmp: &Path) -> PathBuf {
    let dir = finished_sweep(tmp);
    interrupt_after_the_first(&dir);
    append_to_samples(
        &dir,
        b"{\"condition\":\"mod\xe8les\",\"attempt\":1,\"t_s\":0.1}\n",
    );
    dir
}

fn stderr_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[test]
fn a_line_that_is_not_utf8_is_skipped_by_report_and_resume() {
    let tmp = temp_dir();
    let dir = interrupted_with_a_bad_sample(tmp.path());
    // And a last line torn inside a two-byte character.
    append_to_samples(&dir, b"{\"condition\":\"mod\xc3");
    let report = edgeprof().arg("report").arg(&dir).assert().success();
    assert!(
        stderr_of(&report).contains("ignored a line that is not UTF-8 text"),
        "{}",
        stderr_of(&report)
    );
    let resumed = resume(&dir).assert().success();
    assert!(
        stderr_of(&resumed).contains("1 of 2 condition(s) already done"),
        "{}",
        stderr_of(&resumed)
    );
    assert_eq!(lines(&dir.join("runs.jsonl")).len(), 2);
}

/// What the resume found wrong in the directory reaches the terminal UI too: after the run's
/// start, as the sweep's own warnings do (the UI starts its log at the start).
#[test]
fn a_resumes_warnings_come_after_its_start_as_warnings() {
    use edgeprof::event::{Event, RunEvent};
    use edgeprof::runner::sweep::SweepEvent;
    let tmp = temp_dir();
    let dir = interrupted_with_a_bad_sample(tmp.path());
    let events = std::sync::Mutex::new(Vec::new());
    let sink = |event: Event| {
        if let Event::Run(e) = event {
            if let Ok(mut events) = events.lock() {
                events.push(e);
            }
        }
    };
    edgeprof::jobs::resume(
        &dir,
        &edgeprof::collect::stop::Cancel::new(),
        Path::new("/"),
        &sink,
    );
    let events = events.into_inner().unwrap_or_default();
    let started = events
        .iter()
        .position(|e| matches!(e, RunEvent::Started { .. }));
    let warned = events.iter().position(
        |e| matches!(e, RunEvent::Sweep(SweepEvent::Warning(w)) if w.contains("not UTF-8")),
    );
    match (started, warned) {
        (Some(s), Some(w)) => assert!(s < w, "the warning came before the start: {events:?}"),
        _ => panic!("no start or no warning: {events:?}"),
    }
}

#[test]
fn a_condition_whose_samples_were_cut_short_is_measured_again() {
    let tmp = temp_dir();
    let dir = finished_sweep(tmp.path());
    // As a disk that filled while the second condition's samples were written leaves it.
    let runs = lines(&dir.join("runs.jsonl"));
    let second: serde_json::Value = match serde_json::from_str(&runs[1]) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let id = second["condition"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kept: Vec<String> = lines(&dir.join("samples.jsonl"))
        .into_iter()
        .filter(|l| !l.contains(&format!("\"condition\":\"{id}\"")))
        .collect();
    write(&dir.join("samples.jsonl"), &(kept.join("\n") + "\n"));
    let resumed = resume(&dir).assert().success();
    let stderr = stderr_of(&resumed);
    assert!(
        stderr.contains(&format!(
            "{id} (attempt 1) is measured again: its record says"
        )),
        "{stderr}"
    );
    let after = lines(&dir.join("runs.jsonl"));
    let last: serde_json::Value = match after.last().map(|l| serde_json::from_str(l)) {
        Some(Ok(v)) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (
            after.len(),
            last["condition"]["id"].as_str(),
            last["attempt"].as_u64()
        ),
        (3, Some(id.as_str()), Some(2))
    );
}

/// How many lines of `file` (samples.jsonl, telemetry.jsonl) each (condition, attempt) has.
fn lines_per_attempt(file: &Path) -> std::collections::HashMap<(String, u64), u64> {
    let mut counts = std::collections::HashMap::new();
    for line in lines(file) {
        let v: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => panic!("{e}: {line}"),
        };
        let key = (
            v["condition"].as_str().unwrap_or_default().to_string(),
            v["attempt"].as_u64().unwrap_or(0),
        );
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

#[test]
fn a_write_error_while_a_conditions_samples_are_stored_leaves_it_to_be_measured_again() {
    use std::os::unix::process::CommandExt;
    let tmp = temp_dir();
    let config = tmp.path().join("quick.toml");
    write(
        &config,
        &format!(
            "name = \"quick\"\n[command]\nprogram = \"{}\"\nargs = [\"0.3\"]\n\
             [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\"]\nbatch = [1, 2, 3]\n\
             [measure]\nretries = 0\nsample_interval_ms = 20\n",
            worker_fixture("slow.sh")
        ),
    );
    let out = tmp.path().join("results");
    // A file may not grow past 8 KiB: a condition's samples (about 10 KiB) fail to be written,
    // as on a full disk (EFBIG here, ENOSPC there), while the manifest and records fit.
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("edgeprof"));
    command
        .args(["run", "--no-charts"])
        .arg(&config)
        .arg("--output")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: between fork and exec the closure only calls setrlimit and signal, both
    // async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, 8192, 8192)
                .map_err(std::io::Error::from)?;
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGXFSZ,
                nix::sys::signal::SigHandler::SigIgn,
            )
            .map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let status = match command.status() {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        status.code(),
        Some(1),
        "the write error did not stop the sweep"
    );
    let dir = only_entry(&out);
    resume(&dir).assert().success();
    // Every condition's result has all the samples and telemetry lines it counts.
    let samples = lines_per_attempt(&dir.join("samples.jsonl"));
    let telemetry = lines_per_attempt(&dir.join("telemetry.jsonl"));
    let mut short = Vec::new();
    let runs = lines(&dir.join("runs.jsonl"));
    for line in &runs {
        let r: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        let key = (
            r["condition"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            r["attempt"].as_u64().unwrap_or(0),
        );
        let said = (
            r["resources"]["samples"].as_u64().unwrap_or(0),
            r["telemetry"]["samples"].as_u64().unwrap_or(0),
        );
        let held = (
            samples.get(&key).copied().unwrap_or(0),
            telemetry.get(&key).copied().unwrap_or(0),
        );
        if held.0 < said.0 || held.1 < said.1 {
            short.push(format!(
                "{key:?}: record says {said:?}, files hold {held:?}"
            ));
        }
    }
    assert_eq!(short, Vec::<String>::new());
    assert_eq!(runs.len(), 3, "{runs:?}");
}

#[test]
fn a_model_file_replaced_before_resume_is_refused() {
    let tmp = temp_dir();
    let dir = finished_sweep(tmp.path());
    interrupt_after_the_first(&dir);
    export_model("mobilenet_v2", "3x32x32", &tmp.path().join("model.onnx"));
    let refused = resume(&dir).assert().code(2);
    assert!(
        stderr_of(&refused).contains("model.onnx holds another content"),
        "{}",
        stderr_of(&refused)
    );
}

#[test]
fn a_directory_of_another_device_is_resumed_only_when_told() {
    let tmp = temp_dir();
    let dir = finished_sweep(tmp.path());
    interrupt_after_the_first(&dir);
    let path = dir.join("manifest.json");
    let mut manifest: serde_json::Value = match serde_json::from_str(&read(&path)) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    manifest["device"]["arch"] = "aarch64".into();
    manifest["device"]["board"] = "NVIDIA Jetson AGX Orin Developer Kit".into();
    write(&path, &manifest.to_string());
    let refused = resume(&dir).assert().code(2);
    assert!(
        stderr_of(&refused).contains("pass --resume-on-other-device"),
        "{}",
        stderr_of(&refused)
    );
    assert_eq!(lines(&dir.join("runs.jsonl")).len(), 1);
    resume(&dir)
        .arg("--resume-on-other-device")
        .assert()
        .success();
    let last: serde_json::Value = match lines(&dir.join("runs.jsonl"))
        .last()
        .map(|l| serde_json::from_str(l))
    {
        Some(Ok(v)) => v,
        other => panic!("{other:?}"),
    };
    let here = std::env::consts::ARCH;
    assert!(
        last["ran_on"].as_str().is_some_and(|d| d.ends_with(here)),
        "{last}"
    );
    // The first record says it ran elsewhere; the report then says the table mixes devices.
    let runs = lines(&dir.join("runs.jsonl"));
    let mut first: serde_json::Value = match serde_json::from_str(&runs[0]) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    first["ran_on"] = "orin: NVIDIA Jetson AGX Orin Developer Kit, 12 CPUs, aarch64".into();
    write(&dir.join("runs.jsonl"), &format!("{first}\n{}\n", runs[1]));
    let report = edgeprof().arg("report").arg(&dir).assert().success();
    assert!(
        stderr_of(&report).contains("this sweep was measured on 2 devices"),
        "{}",
        stderr_of(&report)
    );
}

#[test]
fn resume_writes_through_no_symbolic_link() {
    let tmp = temp_dir();
    let dir = finished_sweep(tmp.path());
    interrupt_after_the_first(&dir);
    let victim = tmp.path().join("victim.txt");
    write(&victim, "precious\n");
    let samples = dir.join("samples.jsonl");
    if let Err(e) =
        std::fs::remove_file(&samples).and_then(|_| std::os::unix::fs::symlink(&victim, &samples))
    {
        panic!("{e}");
    }
    let refused = resume(&dir).assert().code(2);
    assert!(
        stderr_of(&refused).contains("it is a symbolic link"),
        "{}",
        stderr_of(&refused)
    );
    assert_eq!(read(&victim), "precious\n");
}

#[test]
fn a_lock_file_that_is_a_symbolic_link_is_not_overwritten() {
    let tmp = temp_dir();
    let dir = finished_sweep(tmp.path());
    interrupt_after_the_first(&dir);
    let victim = tmp.path().join("victim.txt");
    write(&victim, "precious\n");
    let lock = dir.join("writer.lock");
    let _ = std::fs::remove_file(&lock);
    if let Err(e) = std::os::unix::fs::symlink(&victim, &lock) {
        panic!("{e}");
    }
    resume(&dir).assert().code(2);
    assert_eq!(read(&victim), "precious\n");
}

#[test]
fn report_writes_no_chart_into_a_linked_charts_directory() {
    let tmp = temp_dir();
    let dir = finished_sweep(tmp.path());
    let elsewhere = tmp.path().join("elsewhere");
    if let Err(e) = std::fs::create_dir(&elsewhere)
        .and_then(|_| std::fs::remove_dir_all(dir.join("charts")))
        .or_else(|_| std::fs::create_dir_all(&elsewhere))
        .and_then(|_| std::os::unix::fs::symlink(&elsewhere, dir.join("charts")))
    {
        panic!("{e}");
    }
    // The report still shows the tables; it says why it wrote no charts.
    let report = edgeprof().arg("report").arg(&dir).assert().success();
    assert!(
        stderr_of(&report).contains("charts is a symbolic link"),
        "{}",
        stderr_of(&report)
    );
    let written = std::fs::read_dir(&elsewhere).map_or(0, |d| d.count());
    assert_eq!(written, 0);
}

#[test]
fn runs_reads_no_fifo_named_manifest() {
    let tmp = temp_dir();
    let dir = tmp.path().join("results/2026-01-01T00-00-00Z-x");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("{e}");
    }
    match std::process::Command::new("mkfifo")
        .arg(dir.join("manifest.json"))
        .status()
    {
        Ok(s) if s.success() => {}
        other => panic!("mkfifo: {other:?}"),
    }
    edgeprof()
        .arg("runs")
        .arg(tmp.path().join("results"))
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .success();
}

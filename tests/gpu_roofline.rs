//! A config with a GPU condition and `roofline = true`: after the sweep the condition runs once
//! more under the profiler (stand-ins for ncu and nvprof that run the worker and print recorded
//! CSV), and its point, advice, chart and files land in the results directory, the report and
//! the HTML report; a profiler that is missing or refused is a reason per condition.

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn fixture_file(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A cache with this machine's CPU ceilings and GPU 0's, both imported from ERT fixtures.
fn cache_with_ceilings() -> tempfile::TempDir {
    let cache = temp_dir();
    for args in [
        vec![fixture_file("ert/new-dialect.json")],
        vec![
            fixture_file("ert/gpu-v100-fp32.json"),
            "--gpu".into(),
            "0".into(),
        ],
    ] {
        edgeprof()
            .env("EDGEPROF_CACHE_DIR", cache.path())
            .args(["roofline", "import-ert"])
            .args(&args)
            .assert()
            .success();
    }
    cache
}

/// A config in `dir`: the request-keeping worker as the `command` engine on GPU 0, with the
/// roofline on and `profiler` as output.gpu_profiler.
fn gpu_config(dir: &Path, profiler: &str) -> PathBuf {
    let config = dir.join("gpu.toml");
    write(
        &config,
        &format!(
            "name = \"gpu\"\n[command]\nprogram = \"{}\"\n[matrix]\nengines = [\"command\"]\n\
             models = [\"resnet34\"]\ndevices = [\"gpu:0\"]\n[measure]\nwarmup = 1\n\
             iterations = 6\nrepeats = 1\nretries = 0\n[output]\nroofline = true\n\
             gpu_profiler = \"{profiler}\"\n",
            fixture_file("workers/gpu-request.sh")
        ),
    );
    config
}

fn with_stand_ins() -> String {
    format!(
        "{}:{}",
        fixture_file("bin"),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn only_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(e) => e.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

fn json_file(path: &Path) -> serde_json::Value {
    match serde_json::from_str(&read(path)) {
        Ok(v) => v,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

struct Ran {
    dir: PathBuf,
    stdout: String,
    stderr: String,
}

fn run_gpu(tmp: &Path, cache: &Path, profiler: &str, env: &[(&str, &str)]) -> Ran {
    let config = gpu_config(tmp, profiler);
    let out = tmp.join(format!("results-{profiler}-{}", env.len()));
    let mut command = run_command(&config, &out);
    command
        .env("EDGEPROF_CACHE_DIR", cache)
        .env("PATH", with_stand_ins())
        .env("FAKE_PROFILER_RUN_APP", "1");
    for (k, v) in env {
        command.env(k, v);
    }
    let assert = command.assert().success();
    let output = assert.get_output();
    Ran {
        dir: only_entry(&out),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn a_gpu_condition_is_profiled_placed_and_advised_in_every_output() {
    let cache = cache_with_ceilings();
    let tmp = temp_dir();
    let requests = tmp.path().join("requests.jsonl");
    let requests_text = requests.to_string_lossy().into_owned();
    let ran = run_gpu(
        tmp.path(),
        cache.path(),
        "ncu",
        &[("FAKE_WORKER_LOG", &requests_text)],
    );
    let id = "command/resnet34/3x224x224/b1/t0/gpu:0";
    // Progress, then the GPU roofline with its chart and ordered advice.
    assert!(
        ran.stderr
            .contains(&format!("[GPU roofline 1/1] {id}: running under ncu")),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains(": placed, "), "{}", ran.stderr);
    assert!(ran.stdout.contains("\nGPU 0 roofline\n"), "{}", ran.stdout);
    assert!(ran.stdout.contains(&format!("A  {id}")), "{}", ran.stdout);
    assert!(ran.stdout.contains("1. "), "no advice: {}", ran.stdout);
    // No CPU condition, no CPU roofline (nor its ceilings measured).
    assert!(!ran.stdout.contains("\nroofline\n"), "{}", ran.stdout);
    // The profiled run got the worker's request on its stdin: short, on the GPU.
    let sent = read(&requests);
    let last: serde_json::Value = sent
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    assert_eq!(last["iterations"], 5, "{sent}");
    assert_eq!(last["condition"]["device"], "gpu:0", "{sent}");
    assert_eq!(
        sent.lines().count(),
        2,
        "the sweep's run, then the profiled one"
    );
    // The results directory: the point, its tool and files, the ceilings, the analysis, a chart.
    let json = json_file(&ran.dir.join("gpu-roofline.json"));
    let c = &json["conditions"][0];
    assert_eq!(c["condition"], id);
    assert_eq!(c["tool"], "ncu");
    assert_eq!(c["program"]["source"], "gpu_counters", "{c}");
    assert!(ran
        .dir
        .join(c["folder"].as_str().unwrap_or("?"))
        .join("ncu.csv")
        .is_file());
    assert!(json["ceilings"][0]["ceilings"].is_object(), "{json}");
    assert_eq!(json["analyses"].as_array().map(Vec::len), Some(1), "{json}");
    assert!(ran.dir.join("charts/gpu-roofline.svg").is_file());
    // The report and the HTML report show it.
    let report = edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .arg("report")
        .arg(&ran.dir)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&report.get_output().stdout).into_owned();
    assert!(text.contains("GPU 0 roofline"), "{text}");
    assert!(text.contains(id), "{text}");
    edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .arg("report")
        .arg(&ran.dir)
        .arg("--html")
        .assert()
        .success();
    let html = read(&ran.dir.join("report.html"));
    assert!(html.contains("<h2 id=\"gpu-roofline\">GPU roofline</h2>"));
    let gpu_section = html.split("id=\"gpu-roofline\"").nth(1).unwrap_or("");
    assert!(gpu_section.contains("<svg"), "no GPU roofline chart");
}

#[test]
fn nvprof_places_the_point_and_a_refusal_or_a_missing_profiler_is_a_reason() {
    let cache = cache_with_ceilings();
    let tmp = temp_dir();
    // Older GPUs (compute capability < 7.2): nvprof, its metrics and its summary.
    let ran = run_gpu(tmp.path(), cache.path(), "nvprof", &[]);
    let json = json_file(&ran.dir.join("gpu-roofline.json"));
    let c = &json["conditions"][0];
    assert_eq!(c["tool"], "nvprof", "{json}");
    assert_eq!(c["program"]["flops"], 2e7, "{json}");
    // A driver that keeps the counters to administrators: the sweep stands, the reason is kept.
    let tmp = temp_dir();
    let ran = run_gpu(
        tmp.path(),
        cache.path(),
        "ncu",
        &[("FAKE_PROFILER_FAIL", "perm")],
    );
    let json = json_file(&ran.dir.join("gpu-roofline.json"));
    let reason = json["conditions"][0]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("run edgeprof as root"), "{json}");
    assert!(json["conditions"][0]["program"].is_null());
    assert!(
        ran.stderr.contains("not placed: ncu may not read"),
        "{}",
        ran.stderr
    );
    assert!(ran.stdout.contains("not placed"), "{}", ran.stdout);
    // No profiler installed (PATH without the stand-ins).
    if !Path::new("/usr/local/cuda/bin/ncu").exists() {
        let tmp = temp_dir();
        let config = gpu_config(tmp.path(), "ncu");
        let out = tmp.path().join("results");
        run_command(&config, &out)
            .env("EDGEPROF_CACHE_DIR", cache.path())
            .env("PATH", "/usr/bin:/bin")
            .assert()
            .success();
        let json = json_file(&only_entry(&out).join("gpu-roofline.json"));
        let reason = json["conditions"][0]["reason"].as_str().unwrap_or("");
        assert!(reason.contains("ncu is not installed"), "{json}");
    }
}

//! `edgeprof probe` and `edgeprof monitor` on fixture trees of real board layouts (Jetson Nano,
//! TX2, Xavier, Orin on JetPack 5 and 6, Thor, an AMD GPU with RAPL, a Raspberry Pi 4, and a
//! machine with none of them and garbled files), tegrastats replay, and process sampling.

mod common;

use common::*;
use serde_json::Value;

fn board(name: &str) -> String {
    format!(
        "{}/tests/fixtures/boards/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `probe --json` on a fixture tree: (source, available, detail) for each source.
fn probe(root: &str) -> Vec<(String, bool, String)> {
    probe_with_path(root, None)
}

/// `probe --json` with PATH set to `path` when given.
fn probe_with_path(root: &str, path: Option<&str>) -> Vec<(String, bool, String)> {
    let mut command = edgeprof();
    if let Some(p) = path {
        command.env("PATH", p);
    }
    let out = command
        .args(["probe", "--root", root, "--json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap_or_default();
    v.as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap_or("").to_string(),
                e["available"].as_bool().unwrap_or(false),
                e["detail"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// `monitor --root ROOT ARGS…` with PATH set to `path` when given: its stdout lines.
fn monitor_lines(root: &str, path: Option<&str>, args: &[&str]) -> Vec<String> {
    let mut command = edgeprof();
    if let Some(p) = path {
        command.env("PATH", p);
    }
    let out = command
        .args(["monitor", "--root", root])
        .args(args)
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The first sample of `monitor_lines`, as JSON.
fn first_sample(root: &str, path: Option<&str>, args: &[&str]) -> Value {
    let lines = monitor_lines(root, path, args);
    serde_json::from_str(lines.first().map_or("", String::as_str)).unwrap_or_default()
}

fn source<'a>(entries: &'a [(String, bool, String)], prefix: &str) -> &'a (String, bool, String) {
    match entries.iter().find(|e| e.0.starts_with(prefix)) {
        Some(e) => e,
        None => panic!("no source {prefix}: {entries:?}"),
    }
}

#[test]
fn probe_finds_what_each_board_has() {
    // (board, Jetson GPU detail, INA3221 rails or None, AMD, RAPL)
    type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, bool, bool);
    let cases: [Case; 8] = [
        (
            "nano-jp4",
            Some("gpu, JetPack 4 (L4T R32.7.1), load from sysfs"),
            Some("rails POM_5V_IN, POM_5V_GPU, POM_5V_CPU"),
            false,
            false,
        ),
        (
            "tx2-jp4",
            Some("gp10b, JetPack 4 (L4T R32.6.1)"),
            Some("rails VDD_SYS_GPU, VDD_SYS_SOC, VDD_4V0_WIFI, VDD_IN, VDD_SYS_CPU, VDD_SYS_DDR"),
            false,
            false,
        ),
        (
            "xavier-jp5",
            Some("gv11b, JetPack 5 (L4T R35.4.1)"),
            Some("rails GPU, CPU, SOC, CV, VDDRQ, SYS5V"),
            false,
            false,
        ),
        (
            "orin-jp5",
            Some("ga10b, JetPack 5"),
            Some("rails VDD_GPU_SOC, VDD_CPU_CV, VIN_SYS_5V0, VDDQ_VDD2_1V8AO"),
            false,
            false,
        ),
        (
            "orin-jp6",
            Some("gpu, JetPack 6 (L4T R36.4.0)"),
            Some("rails VDD_IN, VDD_CPU_GPU_CV, VDD_SOC"),
            false,
            false,
        ),
        (
            "thor-jp7",
            Some("gb10b, JetPack 7 (L4T R38.2.0), no load file"),
            Some("rails VDD_GPU, VDD_CPU_SOC_MSS, VIN_SYS_5V0"),
            false,
            false,
        ),
        ("amd-x86", None, None, true, true),
        ("pi4", None, None, false, false),
    ];
    for (name, jetson, rails, amd, rapl) in cases {
        let e = probe(&board(name));
        assert!(source(&e, "cpu").1, "{name}: {e:?}");
        assert!(source(&e, "memory").1, "{name}: {e:?}");
        assert!(source(&e, "thermal").1, "{name}: {e:?}");
        let gpu = source(&e, "Jetson GPU");
        match jetson {
            Some(detail) => assert!(gpu.1 && gpu.2.starts_with(detail), "{name}: {gpu:?}"),
            None => assert!(
                !gpu.1 && gpu.2.starts_with("no Jetson GPU"),
                "{name}: {gpu:?}"
            ),
        }
        let ina = source(&e, "Jetson power");
        match rails {
            Some(detail) => assert_eq!((ina.1, ina.2.as_str()), (true, detail), "{name}"),
            None => assert!(!ina.1, "{name}: {ina:?}"),
        }
        assert_eq!(source(&e, "AMD").1, amd, "{name}: {e:?}");
        assert_eq!(source(&e, "RAPL").1, rapl, "{name}: {e:?}");
        for (s, available, detail) in &e {
            assert!(
                available | !detail.is_empty(),
                "{name}: {s} gives no reason"
            );
        }
    }
    let amd = probe(&board("amd-x86"));
    assert_eq!(source(&amd, "AMD").2, "card1");
    assert_eq!(source(&amd, "RAPL").2, "1 zone(s): package-0");
}

#[test]
fn a_machine_with_garbled_files_reports_and_never_panics() {
    let e = probe(&board("none"));
    assert!(!source(&e, "cpu").1, "{e:?}");
    assert!(!source(&e, "memory").1, "{e:?}");
    assert!(source(&e, "Jetson GPU").2.contains("no Jetson GPU"));
    assert!(source(&e, "RAPL").2.contains("not readable"), "{e:?}");
    // Sampling it yields samples with empty fields, not a failure.
    let lines = monitor_lines(
        &board("none"),
        None,
        &["--interval", "50ms", "--duration", "100ms"],
    );
    assert!(!lines.is_empty());
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_default();
        assert!(v["t_s"].as_f64().is_some(), "{line}");
        assert!(
            v.get("cores").is_none() && v.get("gpus").is_none(),
            "{line}"
        );
    }
}

#[test]
fn a_raspberry_pi_reports_firmware_throttling_through_vcgencmd() {
    let without = probe_with_path(&board("pi4"), Some("/usr/bin:/bin"));
    let pi = source(&without, "Raspberry");
    assert!(!pi.1, "{pi:?}");
    assert!(pi.2.contains("vcgencmd is not installed"), "{pi:?}");

    let bin = format!(
        "{}/tests/fixtures/bin:/usr/bin:/bin",
        env!("CARGO_MANIFEST_DIR")
    );
    let with = probe_with_path(&board("pi4"), Some(&bin));
    let pi = source(&with, "Raspberry");
    assert!(pi.1, "{pi:?}");
    assert_eq!(
        pi.2,
        "Raspberry Pi 4 Model B Rev 1.4; throttling now: under-voltage, throttled; since boot: under-voltage, throttled"
    );
    let first = first_sample(
        &board("pi4"),
        Some(&bin),
        &["--interval", "50ms", "--duration", "120ms"],
    );
    assert_eq!(
        first["throttling"],
        serde_json::json!(["under-voltage", "throttled"])
    );
    assert_eq!(first["temperatures"][0]["value"], 55.844);
}

#[test]
fn monitoring_a_jetson_tree_gives_gpu_power_and_offline_cores() {
    let v = first_sample(
        &board("nano-jp4"),
        None,
        &["--headless", "--interval", "50ms", "--duration", "120ms"],
    );
    // Wall-clock time, UTC to the millisecond, beside the offset from the start.
    let stamp = v["timestamp"].as_str().unwrap_or_default();
    assert!(
        stamp.len() == 24 && stamp.ends_with('Z') && stamp.as_bytes()[19] == b'.',
        "{v}"
    );
    assert_eq!(v["gpus"][0]["name"], "jetson gpu");
    assert_eq!(v["gpus"][0]["load_pct"], 45.3);
    assert_eq!(v["gpus"][0]["freq_mhz"], 921);
    assert_eq!(v["gpus"][0]["mem_used_bytes"], 262_144u64 * 1024);
    // POM_5V_IN is the board's input: 3520 mW on iio.
    assert_eq!(v["power_w"], 3.52);
    let cores = v["cores"].as_array().cloned().unwrap_or_default();
    assert_eq!(cores.len(), 4);
    assert_eq!(cores[2]["online"], false);
    assert_eq!(cores[0]["freq_mhz"], 1479);

    // hwmon (JetPack 5): mV × mA; NC and the sum-of-shunts channel are left out.
    let csv = monitor_lines(
        &board("orin-jp5"),
        None,
        &[
            "--interval",
            "50ms",
            "--duration",
            "60ms",
            "--format",
            "csv",
        ],
    );
    let mut lines = csv.iter().map(String::as_str);
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let row: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let cell = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .and_then(|i| row.get(i).copied())
    };
    assert_eq!(cell("rail_VDD_GPU_SOC_w"), Some("9.340"));
    assert_eq!(cell("gpu0_pct"), Some("78.100"));
    assert_eq!(cell("cpu11_pct"), Some("off"));
    assert!(
        !header
            .iter()
            .any(|h| h.contains("NC") || h.contains("shunt")),
        "{header:?}"
    );
    // No VDD_IN on AGX Orin: the total is the sum of the rails.
    assert_eq!(cell("power_w"), Some("17.555"));
    assert!(
        cell("temp_CV0_therm_c").is_none(),
        "offline sensors are left out"
    );
}

#[test]
fn tegrastats_logs_replay_as_samples() {
    let log = |name: &str| {
        format!(
            "{}/tests/fixtures/tegrastats/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let out = edgeprof()
        .args(["monitor", "--from-tegrastats", &log("jp5-orin-root.log")])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let samples: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_default())
        .collect();
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[1]["t_s"], 1.0);
    assert_eq!(samples[1]["timestamp"], "2026-11-29T14:02:12");
    assert_eq!(samples[1]["gpus"][0]["load_pct"], 81.0);
    // Without timestamps, lines are --interval apart.
    let out = edgeprof()
        .args([
            "monitor",
            "--from-tegrastats",
            &log("jp4-nano-root.log"),
            "--interval",
            "500ms",
            "--format",
            "csv",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(rows[2].starts_with("0.500,"), "{text}");
    // A broken log: what can be read is kept, the rest is named on stderr.
    let out = edgeprof()
        .args(["monitor", "--from-tegrastats", &log("broken.log")])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("broken.log:1: not a tegrastats line"),
        "{stderr}"
    );
    assert!(stderr.contains("not understood: CPU"), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stdout)
            .lines()
            .count(),
        2
    );
    assert_bad_input(
        &["monitor", "--from-tegrastats", "/nonexistent.log"],
        "cannot read /nonexistent.log",
    );
}

#[test]
fn a_process_is_sampled_until_it_ends() {
    let mut child = match std::process::Command::new("sleep").arg("1").spawn() {
        Ok(c) => c,
        Err(e) => panic!("cannot start sleep: {e}"),
    };
    let pid = child.id().to_string();
    let out = edgeprof()
        .args([
            "monitor",
            "--pid",
            &pid,
            "--interval",
            "100ms",
            "--duration",
            "5s",
        ])
        .assert()
        .success();
    let _ = child.wait();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!("process {pid} has ended")),
        "{stderr}"
    );
    let n = text.lines().count();
    assert!((3..=12).contains(&n), "{n} samples in about 1 s at 100 ms");
    let v: Value = serde_json::from_str(text.lines().next().unwrap_or("")).unwrap_or_default();
    assert!(
        v["process"]["rss_bytes"].as_u64().is_some_and(|b| b > 0),
        "{v}"
    );
    assert_bad_input(&["monitor", "--pid", "999999999"], "no process 999999999");
    assert_bad_input(&["monitor", "--interval", "fast"], "not a duration");
}

/// Runs one small tract condition with telemetry read under `root` and PATH led by `path`;
/// the condition's record, the run's stderr and the lines of telemetry.jsonl.
fn run_with_telemetry(root: &str, path: Option<&str>) -> (Value, String, Vec<Value>) {
    let tmp = temp_dir();
    let config = tmp.path().join("t.toml");
    if let Err(e) = std::fs::write(
        &config,
        "name = \"t\"\n[matrix]\nmodels = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\n\
         threads = [1]\n[measure]\nwarmup = 1\niterations = 20\nrepeats = 1\nsample_interval_ms = 20\n",
    ) {
        panic!("{e}");
    }
    let out = tmp.path().join("results");
    let mut command = run_command(&config, &out);
    command.env("EDGEPROF_TELEMETRY_ROOT", root);
    if let Some(p) = path {
        command.env("PATH", p);
    }
    let assert = command.assert().success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let dir = only_entry(&out);
    let runs = std::fs::read_to_string(dir.join("runs.jsonl")).unwrap_or_default();
    let record = serde_json::from_str(runs.lines().next().unwrap_or("")).unwrap_or_default();
    let telemetry = std::fs::read_to_string(dir.join("telemetry.jsonl")).unwrap_or_default();
    let samples = telemetry
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_default())
        .collect();
    (record, stderr, samples)
}

#[test]
fn a_run_is_marked_throttled_and_gets_its_energy_per_inference() {
    // The Pi's firmware reports under-voltage and throttling throughout.
    let bin = format!(
        "{}/tests/fixtures/bin:{}",
        env!("CARGO_MANIFEST_DIR"),
        std::env::var("PATH").unwrap_or_default()
    );
    let (record, stderr, _) = run_with_telemetry(&board("pi4"), Some(&bin));
    let t = &record["telemetry"];
    assert_eq!(t["throttled"], true, "{record}");
    assert_eq!(
        t["reasons"],
        serde_json::json!(["under-voltage", "throttled"])
    );
    assert!(t["samples"].as_u64().is_some_and(|n| n >= 1), "{t}");
    assert!(
        stderr.contains("THROTTLED (under-voltage; throttled)"),
        "{stderr}"
    );
    assert!(
        t.get("energy_per_inference_j").is_none(),
        "a Pi has no power source: {t}"
    );

    // A Jetson Nano's input rail reads 3.52 W: energy per inference = 3.52 W × mean latency.
    let (record, stderr, samples) = run_with_telemetry(&board("nano-jp4"), None);
    let t = &record["telemetry"];
    assert_eq!(t["throttled"], false, "{t}");
    let watts = t["power_mean_w"].as_f64().unwrap_or(0.0);
    assert!((watts - 3.52).abs() < 1e-9, "{t}");
    let mean_ms = record["stats"]["latency"]["mean_ms"]
        .as_f64()
        .unwrap_or(0.0);
    let joules = t["energy_per_inference_j"].as_f64().unwrap_or(0.0);
    assert!(
        (joules - 3.52 * mean_ms / 1e3).abs() < 1e-9,
        "{joules} vs {mean_ms} ms"
    );
    assert_eq!(t["gpu_load_mean_pct"], 45.3);
    assert!(stderr.contains(" 3.52 W, "), "{stderr}");
    // Every sample behind the summary is kept in telemetry.jsonl, under its condition.
    assert_eq!(Some(samples.len() as u64), t["samples"].as_u64(), "{t}");
    for s in &samples {
        assert_eq!(s["condition"], record["condition"]["id"], "{s}");
        assert_eq!(s["attempt"], 1, "{s}");
        assert_eq!(s["gpus"][0]["load_pct"], 45.3, "{s}");
        assert_eq!(s["power_w"], 3.52, "{s}");
    }
}

#[test]
fn every_board_tree_is_sampled_with_what_it_has() {
    // (board, GPU name, GPU load %, board power in W)
    type Case<'a> = (&'a str, Option<&'a str>, Option<f64>, Option<f64>);
    let cases: [Case; 9] = [
        ("nano-jp4", Some("jetson gpu"), Some(45.3), Some(3.52)),
        (
            "tx2-jp4",
            Some("jetson gp10b"),
            Some(0.0),
            Some(3140.0 / 1e3),
        ),
        // Xavier's hwmon rails have no VDD_IN: the sum, 19.08 V × (420 + 300 + 250 + 10 + 80) mA
        // + 4.99 V × 690 mA.
        (
            "xavier-jp5",
            Some("jetson gv11b"),
            Some(81.2),
            Some(19.08 * 1.06 + 4.99 * 0.69),
        ),
        ("orin-jp5", Some("jetson ga10b"), Some(78.1), Some(17.555)),
        ("orin-jp6", Some("jetson gpu"), Some(63.0), Some(7.12)),
        // Thor's load comes only through NVML: the sysfs reader gives the clock alone.
        (
            "thor-jp7",
            Some("jetson gb10b"),
            None,
            Some(4.02 + 6.63 + 2.2),
        ),
        // RAPL's package power: its fixture counter stands still, so 0 W.
        ("amd-x86", Some("amdgpu card1"), Some(37.0), Some(0.0)),
        ("pi4", None, None, None),
        ("none", None, None, None),
    ];
    for (name, gpu, load, power) in cases {
        let v = first_sample(
            &board(name),
            Some("/usr/bin:/bin"),
            &["--interval", "50ms", "--duration", "50ms"],
        );
        assert_eq!(v["gpus"][0]["name"].as_str(), gpu, "{name}: {v}");
        assert_eq!(v["gpus"][0]["load_pct"].as_f64(), load, "{name}: {v}");
        match (power, v["power_w"].as_f64()) {
            (Some(want), Some(got)) => {
                assert!((want - got).abs() < 1e-6, "{name}: {got} W, not {want}")
            }
            (None, None) => {}
            (want, got) => panic!("{name}: power {got:?}, expected {want:?}"),
        }
        // Per-process GPU memory comes from nvmap's debugfs, which only root can read: the
        // Xavier tree has its `maps` table, Orin JetPack 5 its `clients` table, the other Jetson
        // trees neither, as a user other than root sees them.
        let processes: Vec<(u64, u64)> = v["gpus"][0]["processes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| Some((p[0].as_u64()?, p[1].as_u64()?)))
                    .collect()
            })
            .unwrap_or_default();
        let expected: &[(u64, u64)] = match name {
            "xavier-jp5" => &[(777, 1 << 20), (4242, 8 << 20)],
            "orin-jp5" => &[
                (1969, 69532 << 10),
                (2170, 103916 << 10),
                (4242, (812344 + 2048) << 10),
                (5151, 16 << 20),
            ],
            _ => &[],
        };
        assert_eq!(processes, expected, "{name}: {v}");
        let pi = probe_with_path(&board(name), Some("/usr/bin:/bin"));
        if gpu.is_some_and(|g| g.starts_with("jetson")) {
            let (_, _, jetson) = source(&pi, "Jetson GPU");
            let says = if expected.is_empty() {
                "no per-process memory (nvmap debugfs is readable by root only)"
            } else {
                "per-process memory from nvmap debugfs"
            };
            assert!(jetson.ends_with(says), "{name}: {jetson}");
        }
        let (_, available, why) = source(&pi, "Raspberry");
        assert!(!available, "{name}");
        let expected = if name == "pi4" {
            "vcgencmd is not installed"
        } else {
            "not a Raspberry Pi"
        };
        assert!(why.contains(expected), "{name}: {why}");
    }
}

/// Every GPU of a machine is sampled: a fixture tree with two amdgpu cards gives two GPUs in
/// every sample, each with its own load and memory.
#[test]
fn two_gpus_are_both_monitored() {
    let lines = monitor_lines(
        &board("two-gpus"),
        Some("/usr/bin:/bin"),
        &["--interval", "50ms", "--duration", "120ms"],
    );
    assert!(!lines.is_empty());
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_default();
        let gpus = v["gpus"].as_array().cloned().unwrap_or_default();
        let seen: Vec<(Option<&str>, Option<f64>, Option<u64>)> = gpus
            .iter()
            .map(|g| {
                (
                    g["name"].as_str(),
                    g["load_pct"].as_f64(),
                    g["mem_used_bytes"].as_u64(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (Some("amdgpu card1"), Some(37.0), Some(2 << 30)),
                (Some("amdgpu card2"), Some(64.0), Some(1 << 30)),
            ],
            "{line}"
        );
    }
}

#[test]
fn terminal_escapes_in_a_tegrastats_log_are_shown_escaped() {
    let tmp = temp_dir();
    let path = tmp.path().join("evil.log");
    write(
        &path,
        "RAM 5321/30536MB CPU [31%@2201] hello \u{1b}]0;PWNED-TITLE\u{7} \u{1b}[2J\n",
    );
    let out = edgeprof()
        .args(["monitor", "--from-tegrastats", &path.to_string_lossy()])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("not understood: hello \\x1b]0;PWNED-TITLE\\x07 \\x1b[2J"),
        "{stderr:?}"
    );
}

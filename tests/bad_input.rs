//! Bad input gets one clear error naming the file, never a panic, an abort or silent nonsense:
//! malformed ONNX files, inputs too large to allocate, absurd profiler and ceiling figures,
//! implausible telemetry, and files too large to read whole.

mod common;

use common::*;

/// A malformed ONNX file under tests/fixtures/onnx/malformed.
fn malformed(name: &str) -> String {
    format!(
        "{}/tests/fixtures/onnx/malformed/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Files on which tract 0.23 panics (the first six) or reads out of bounds (the last).
const MALFORMED: &[&str] = &[
    "bad_pads.onnx",
    "zero_stride.onnx",
    "bad_perm.onnx",
    "bad_split_axis.onnx",
    "missing_output.onnx",
    "raw_string_tensor.onnx",
    "repeated_perm.onnx",
    "huge_conv_output.onnx",
    "rank1_batchnorm.onnx",
];

#[test]
fn malformed_onnx_files_are_one_line_errors_in_bench() {
    for name in MALFORMED {
        let file = malformed(name);
        assert_bad_input(
            &[
                "bench",
                "--model",
                &file,
                "--iterations",
                "1",
                "--warmup",
                "0",
            ],
            &format!("error: {file}"),
        );
    }
}

#[test]
fn malformed_onnx_files_fail_their_condition_in_a_worker_with_the_reason() {
    let tmp = temp_dir();
    // bench --isolated: the worker process reports the contained panic as an error record.
    let assert = edgeprof()
        .args(["bench", "--isolated", "--iterations", "1", "--warmup", "0"])
        .args(["--input", "2x6x6", "--model", &malformed("bad_pads.onnx")])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("tract failed while"), "{stderr}");
    // edgeprof run: each malformed model's condition (at the file's own 2x6x6) fails with the
    // reason; the sweep goes on.
    let models: Vec<String> = ["zero_stride.onnx", "missing_output.onnx"]
        .iter()
        .map(|n| format!("{:?}", malformed(n)))
        .collect();
    let config = tmp.path().join("malformed.toml");
    write(
        &config,
        &format!(
            "name = \"malformed\"\n[matrix]\nmodels = [{}]\nthreads = [1]\n\
             [measure]\nwarmup = 0\niterations = 1\nrepeats = 1\nretries = 0\n",
            models.join(", ")
        ),
    );
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out).assert().code(1);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let dir = only_entry(&out);
    let runs: Vec<serde_json::Value> = read(&dir.join("runs.jsonl"))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in &runs {
        assert_eq!(r["ok"], false, "{r}");
        let reason = r["reason"].as_str().unwrap_or("");
        assert!(reason.contains("tract failed while"), "{reason}");
        assert!(reason.contains(".onnx"), "{reason}");
    }
}

#[test]
fn inputs_too_large_to_allocate_are_refused_before_loading() {
    // 4096 × 3 × 8192 × 8192 float32 values: 3 TiB.
    assert_bad_input(
        &[
            "bench",
            "--model",
            "shufflenet_v2_x0_5",
            "--input",
            "3x8192x8192",
            "--batch",
            "4096",
            "--iterations",
            "1",
        ],
        "the input tensor needs 3.00 TiB but only",
    );
    // A 3 GiB input whose activations (over 100 GiB by the analytic model) cannot fit.
    assert_bad_input(
        &[
            "bench",
            "--model",
            "vgg19",
            "--input",
            "3x8192x8192",
            "--batch",
            "4",
            "--iterations",
            "1",
        ],
        // The bound may be the system or a container's cgroup: the test does not choose.
        "but only",
    );
    // An ONNX file with an input given on the command line.
    assert_bad_input(
        &[
            "bench",
            "--model",
            &fixture("dynamic_input.onnx"),
            "--input",
            "64x100000x100000",
            "--batch",
            "64",
        ],
        // The bound may be the system or a container's cgroup: the test does not choose.
        "but only",
    );
}

/// `too_much_memory.onnx` cut to its Pad, and two more Pads of the same input beside it: three
/// graph outputs of 4 GiB each, every one held to the end.
fn three_held_pads(path: &std::path::Path) {
    use prost::Message;
    use tract_onnx::pb;
    let bytes = std::fs::read(fixture("too_much_memory.onnx")).unwrap_or_default();
    let mut proto = match pb::ModelProto::decode(&bytes[..]) {
        Ok(p) => p,
        Err(e) => panic!("too_much_memory.onnx: {e}"),
    };
    let Some(g) = proto.graph.as_mut() else {
        panic!("too_much_memory.onnx holds no graph");
    };
    let Some(pad) = g.node.iter().find(|n| n.op_type == "Pad").cloned() else {
        panic!("too_much_memory.onnx holds no Pad");
    };
    g.node.clear();
    g.output.clear();
    g.initializer.retain(|t| t.name != "pads");
    // 1×2×6×6 padded to 1×2×67108864×8 floats (4 GiB), split three ways above and below.
    for (k, top) in [33_554_429i64, 33_554_428, 33_554_427]
        .into_iter()
        .enumerate()
    {
        let pads = [0, 0, top, 1, 0, 0, 67_108_858 - top, 1];
        g.initializer.push(pb::TensorProto {
            name: format!("pads{k}"),
            dims: vec![8],
            data_type: pb::tensor_proto::DataType::Int64 as i32,
            raw_data: pads.iter().flat_map(|p| p.to_le_bytes()).collect(),
            ..Default::default()
        });
        let mut node = pad.clone();
        node.name = format!("pad{k}");
        node.input[1] = format!("pads{k}");
        node.output = vec![format!("out{k}")];
        g.node.push(node);
        g.output.push(pb::ValueInfoProto {
            name: format!("out{k}"),
            ..Default::default()
        });
    }
    if let Err(e) = std::fs::write(path, edgeprof::models::onnx::encode(&proto)) {
        panic!("{}: {e}", path.display());
    }
}

#[test]
fn a_model_whose_outputs_together_exceed_the_memory_left_is_refused_at_the_plans_peak() {
    // Each node's input and output fit under `ulimit -v` of 12 GiB (4 GiB: a machine with 4 GiB
    // free will do), as does the largest tensor; the three outputs, all held to the end, need
    // 12 GiB, and the process's own address space counts against the limit. Only the plan's
    // peak, counted in tract's own evaluation order, sees that.
    let tmp = temp_dir();
    let model = tmp.path().join("three_pads.onnx");
    three_held_pads(&model);
    let bin = assert_cmd::cargo::cargo_bin("edgeprof");
    let mut limited = assert_cmd::Command::new("sh");
    limited
        .args(["-c", "ulimit -v 12582912 && exec \"$0\" \"$@\""])
        .arg(&bin)
        .args(["bench", "--model"])
        .arg(&model)
        .args(["--iterations", "1", "--warmup", "0"])
        .timeout(std::time::Duration::from_secs(120));
    let assert = limited.assert().code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("running it (its tensors at their peak) needs 12.00 GiB but only"),
        "{stderr}"
    );
}

#[test]
fn a_model_whose_tensors_together_exceed_the_memory_left_is_refused_naming_the_limit() {
    // Found by the fuzz campaign: each tensor fits, but a Relu's input and output together need
    // 18 GiB, and running it aborted the process in an allocation. Under `ulimit -v` of 12 GiB
    // the largest tensor (9 GiB) fits and that node does not, whatever the machine has; edgeprof's
    // own walk of the graph refuses it before tract types it.
    let model = fixture("too_much_memory.onnx");
    let bin = assert_cmd::cargo::cargo_bin("edgeprof");
    let mut limited = assert_cmd::Command::new("sh");
    limited
        .args(["-c", "ulimit -v 12582912 && exec \"$0\" \"$@\""])
        .arg(&bin)
        .args([
            "bench",
            "--model",
            &model,
            "--iterations",
            "1",
            "--warmup",
            "0",
        ]);
    let assert = limited.assert().code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(
            "running node \"relu\" (its inputs and outputs at once) needs 18.00 GiB but only"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("left under this process's address-space limit (ulimit -v)"),
        "{stderr}"
    );
}

fn fixture_text(relative: &str) -> String {
    read(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(relative),
    )
}

/// `fixture` with `from` replaced by `to` (which must occur), written to `dir/name`.
fn edited(dir: &std::path::Path, fixture: &str, from: &str, to: &str, name: &str) -> String {
    let text = fixture_text(fixture);
    assert!(text.contains(from), "{fixture} lacks {from:?}");
    let path = dir.join(name);
    write(&path, &text.replacen(from, to, 1));
    path.display().to_string()
}

fn roofline(cache: &std::path::Path, args: &[&str]) -> assert_cmd::Command {
    let mut c = edgeprof();
    c.env("EDGEPROF_CACHE_DIR", cache)
        .arg("roofline")
        .args(args);
    c
}

/// One error line naming the file, exit 2, no panic.
fn assert_one_error(assert: assert_cmd::assert::Assert, needles: &[&str]) {
    let assert = assert.code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{stderr:?} lacks {needle:?}");
    }
    assert_eq!(
        stderr.lines().filter(|l| l.contains("error")).count(),
        1,
        "{stderr}"
    );
}

#[test]
fn absurd_profiler_figures_are_refused_naming_the_file_and_field() {
    let tmp = temp_dir();
    let cache = tmp.path().join("cache");
    let ceilings = format!(
        "{}/tests/fixtures/ceilings-orin-gpu.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let dram = "\"dram__bytes.sum\",\"byte\",\"200,000,000\"";
    for (value, why) in [
        ("1e100", "is more than any GPU reaches"),
        ("-200", "is negative"),
        ("1e400", "is not a finite number"),
        ("inf", "is not a finite number"),
    ] {
        let file = edited(
            tmp.path(),
            "gpu-profilers/ncu-orin.csv",
            dram,
            &format!("\"dram__bytes.sum\",\"byte\",\"{value}\""),
            "ncu.csv",
        );
        // With --ceilings the chart is drawn: 1e100 used to index past its x-axis labels.
        let assert = roofline(&cache, &["import-ncu", &file, "--ceilings", &ceilings]).assert();
        assert_one_error(
            assert,
            &[&format!("{file}: line 9: dram__bytes.sum = {value} {why}")],
        );
    }
    // nvprof: a negative count per invocation, and an infinite time in the summary, whose
    // file is the one named.
    let metrics = fixture_text("gpu-profilers/nvprof-nano-metrics.csv");
    let line = match metrics.lines().find(|l| l.contains("flop_count_sp")) {
        Some(l) => l.to_string(),
        None => panic!("no flop_count_sp line"),
    };
    let Some(avg) = line.rsplit(',').next() else {
        panic!("{line}")
    };
    let bad_line = format!("{},\"-5\"", &line[..line.len() - avg.len() - 1]);
    let metrics_file = tmp.path().join("nvprof-metrics.csv");
    write(&metrics_file, &metrics.replacen(&line, &bad_line, 1));
    let metrics_file = metrics_file.display().to_string();
    let summary = format!(
        "{}/tests/fixtures/gpu-profilers/nvprof-nano-summary.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    assert_one_error(
        roofline(
            &cache,
            &["import-nvprof", &metrics_file, "--summary", &summary],
        )
        .assert(),
        &[&metrics_file, "flop_count_sp = -5 is negative"],
    );
    let summary_text = fixture_text("gpu-profilers/nvprof-nano-summary.csv");
    let time_line = match summary_text.lines().find(|l| l.contains("GPU activities")) {
        Some(l) => l.to_string(),
        None => panic!("no GPU activities line"),
    };
    let fields: Vec<&str> = time_line.split(',').collect();
    let mut broken = fields.clone();
    broken[2] = "\"1e999\"";
    let summary_file = tmp.path().join("nvprof-summary.csv");
    write(
        &summary_file,
        &summary_text.replacen(&time_line, &broken.join(","), 1),
    );
    let summary_file = summary_file.display().to_string();
    let good_metrics = format!(
        "{}/tests/fixtures/gpu-profilers/nvprof-nano-metrics.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    assert_one_error(
        roofline(
            &cache,
            &["import-nvprof", &good_metrics, "--summary", &summary_file],
        )
        .assert(),
        &[&summary_file, "Time = 1e999 is not a finite number"],
    );
}

#[test]
fn absurd_ceilings_are_refused_at_import_and_when_read() {
    let tmp = temp_dir();
    let cache = tmp.path().join("cache");
    // ERT: 1e300 GFLOP/s became an infinite ceiling, kept as null, and every later roofline
    // command failed on the kept file.
    let ert = edited(
        tmp.path(),
        "ert/new-dialect.json",
        "61.5",
        "1e300",
        "roofline.json",
    );
    assert_one_error(
        roofline(&cache, &["import-ert", &ert]).assert(),
        &[&format!("{ert}: empirical.gflops.data[0] = 1e300 GFLOP/s")],
    );
    assert!(!cache.exists() || std::fs::read_dir(&cache).map_or(0, |d| d.count()) == 0);
    // A ceiling of 1e-311 FLOP/s was kept, and `roofline show --svg` then never finished.
    let tiny = edited(
        tmp.path(),
        "ert/new-dialect.json",
        "122.9",
        "1e-320",
        "tiny.json",
    );
    assert_one_error(
        roofline(&cache, &["import-ert", &tiny]).assert(),
        &[&format!(
            "{tiny}: empirical.gflops.data[1] = 1e-320 GFLOP/s is not a figure any machine reaches"
        )],
    );
    let negative = edited(
        tmp.path(),
        "ert/new-dialect.json",
        "[\"DRAM\", 21.9]",
        "[\"DRAM\", -21.9]",
        "negative.json",
    );
    assert_one_error(
        roofline(&cache, &["import-ert", &negative]).assert(),
        &["empirical.gbytes.data[2] is not a [name, number] pair"],
    );
    // A bandwidth sweep with an infinite GB/s.
    let sweep = tmp.path().join("max");
    write(&sweep, "fp64\n16384 1000 1 1 1 290 1e999 310 1 1 1\n");
    assert_one_error(
        roofline(
            &cache,
            &[
                "import-ert",
                &format!(
                    "{}/tests/fixtures/ert/new-dialect.json",
                    env!("CARGO_MANIFEST_DIR")
                ),
                "--sweep",
                &sweep.display().to_string(),
            ],
        )
        .assert(),
        &["sweep line 2", "GB/s is not a bandwidth"],
    );
    // A ceilings file with a negative peak, given or kept.
    let text = fixture_text("ceilings-orin-gpu.json");
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let mut value = value;
    value["ceilings"]["compute"][0]["flops_per_s"] = serde_json::json!(-3.0);
    let file = tmp.path().join("ceilings.json");
    write(&file, &value.to_string());
    let file = file.display().to_string();
    assert_one_error(
        roofline(&cache, &["show", "--ceilings", &file]).assert(),
        &[&format!(
            "{file}: ceilings.compute[0].flops_per_s (fp32 peak) = -3 FLOP/s is not positive"
        )],
    );
}

#[test]
fn implausible_tegrastats_readings_are_dropped_with_a_counted_warning() {
    let log = format!(
        "{}/tests/fixtures/tegrastats/implausible.log",
        env!("CARGO_MANIFEST_DIR")
    );
    let assert = edgeprof()
        .args(["monitor", "--from-tegrastats", &log])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: {log}: dropped 7 implausible field(s) (first at line 2: CPU0 -4%)"
        )),
        "{stderr}"
    );
    let samples: Vec<serde_json::Value> = String::from_utf8_lossy(&assert.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_default())
        .collect();
    assert_eq!(samples.len(), 4);
    let loads = |s: &serde_json::Value| -> Vec<f64> {
        let cores = s["cores"].as_array().cloned().unwrap_or_default();
        let gpus = s["gpus"].as_array().cloned().unwrap_or_default();
        cores
            .iter()
            .chain(gpus.iter())
            .filter_map(|c| c.get("load_pct").and_then(|v| v.as_f64()))
            .collect()
    };
    for s in &samples {
        assert!(loads(s).iter().all(|l| (0.0..=100.0).contains(l)), "{s}");
        // NaN would be written as null; a u64 overflow as a wrapped (tiny) byte count.
        assert!(!s.to_string().contains("null"), "{s}");
        if let Some(used) = s["mem_used_bytes"].as_u64() {
            assert!(used >= 1 << 30, "{s}");
        }
    }
    assert_eq!(samples[1]["cores"][0].get("load_pct"), None);
    assert_eq!(samples[2].get("mem_used_bytes"), None);
    assert_eq!(samples[2].get("power_w"), None);
}

#[test]
fn a_large_tegrastats_log_is_replayed_in_little_memory() {
    let tmp = temp_dir();
    let log = tmp.path().join("big.log");
    let first = fixture_text("tegrastats/jp4-nano-root.log");
    let first = first.lines().next().unwrap_or_default();
    let noise = "this line is not tegrastats output, and there are very many of them\n";
    let size = 32 << 20;
    let mut text = format!("{first}\n");
    text.push_str(&noise.repeat(size / noise.len()));
    write(&log, &text);
    drop(text);
    let report = tmp.path().join("time.txt");
    let assert = assert_cmd::Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(assert_cmd::cargo::cargo_bin("edgeprof"))
        .args(["monitor", "--from-tegrastats"])
        .arg(&log)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("more line(s) with warnings not shown"),
        "{stderr}"
    );
    assert!(
        stderr.lines().count() < 30,
        "{} warning lines",
        stderr.lines().count()
    );
    let peak_kib: u64 = read(&report).trim().parse().unwrap_or(u64::MAX);
    // The log is 32 MiB: holding it whole would take more than that.
    assert!(
        peak_kib * 1024 < size as u64,
        "peak RSS {peak_kib} KiB for a {size}-byte log"
    );
}

#[test]
fn implausible_sysfs_readings_are_dropped_with_a_counted_warning() {
    let tmp = temp_dir();
    let root = tmp.path().join("orin");
    copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boards/orin-jp6"),
        &root,
    );
    let sys = root.join("sys");
    // 3000 °C, a GPU load of 250 %, a clock of 18 EHz.
    write(&sys.join("class/thermal/thermal_zone0/temp"), "3000000\n");
    write(
        &sys.join("class/devfreq/17000000.gpu/device/load"),
        "2500\n",
    );
    write(
        &sys.join("devices/system/cpu/cpu0/cpufreq/scaling_cur_freq"),
        "18446744073709551615\n",
    );
    let assert = edgeprof()
        .args(["monitor", "--root"])
        .arg(&root)
        .args(["--interval", "50ms", "--duration", "120ms"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let zone = sys.join("class/thermal/thermal_zone0/temp");
    // Each reading is counted (the sampler's first, unkept reading too), the first named.
    let cpufreq = sys.join("devices/system/cpu/cpu0/cpufreq/scaling_cur_freq");
    for (reader, first) in [
        ("thermal zones (sysfs)", format!("{}: 3000", zone.display())),
        (
            "Jetson GPU (devfreq)",
            "17000000.gpu/device/load: 2500".to_string(),
        ),
        (
            "cpu (procfs, cpufreq)",
            format!("{}: 18446744073709551615)", cpufreq.display()),
        ),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&format!("warning: {reader}: dropped ")))
            .unwrap_or_default();
        assert!(line.contains("implausible reading(s) (first: "), "{stderr}");
        assert!(line.contains(&first), "{line} lacks {first}");
    }
    let samples: Vec<serde_json::Value> = String::from_utf8_lossy(&assert.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_default())
        .collect();
    assert_eq!(samples.len(), 2);
    for s in &samples {
        let temps = s["temperatures"].as_array().cloned().unwrap_or_default();
        assert!(!temps.is_empty());
        assert!(
            temps.iter().all(|t| t["value"].as_f64() < Some(200.0)),
            "{s}"
        );
        assert_eq!(s["gpus"][0].get("load_pct"), None, "{s}");
        assert_eq!(s["cores"][0].get("freq_mhz"), None, "{s}");
        assert!(s["cores"][1]["freq_mhz"].as_u64().is_some(), "{s}");
    }
}

#[test]
fn files_too_large_to_parse_are_refused_naming_their_size_and_the_limit() {
    let tmp = temp_dir();
    // A 5 MiB configuration (a log or a model given by mistake, or a generated one).
    let config = tmp.path().join("big.toml");
    let mut text = String::from("name = \"big\"\n");
    text.push_str(&"# a comment line that pads the file out\n".repeat((5 << 20) / 40));
    write(&config, &text);
    let file = config.display().to_string();
    assert_bad_input(
        &["config", "check", &file],
        &format!("cannot read config {file}: it is 5.00 MiB and edgeprof reads files of this kind up to 4.00 MiB"),
    );
    // A 17 MiB ERT file.
    let ert = tmp.path().join("roofline.json");
    write(&ert, &format!("{{\"pad\": \"{}\"}}", "x".repeat(17 << 20)));
    let ert = ert.display().to_string();
    assert_one_error(
        roofline(&tmp.path().join("cache"), &["import-ert", &ert]).assert(),
        &[&format!("cannot read {ert}: it is 17.00 MiB and edgeprof reads files of this kind up to 16.00 MiB")],
    );
}

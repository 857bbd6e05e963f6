//! `edgeprof roofline` through the binary: measuring, importing ERT, showing programs and
//! advice, per-layer ranking, and the errors on the way.

mod common;

use common::*;
use edgeprof::collect::kernels::Unit;
use std::path::Path;

/// Hand-written ceilings of a Raspberry Pi 4 (fp32 and fp64, L1, L2, DRAM).
fn pi4() -> String {
    format!(
        "{}/tests/fixtures/ceilings-pi4.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn ert(name: &str) -> String {
    format!("{}/tests/fixtures/ert/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn stdout_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

/// A config in `dir` for one small shufflenet condition on one thread, plus `extra` TOML.
fn shufflenet_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let config = dir.join("shufflenet.toml");
    let text = format!(
        "name = \"s\"\n[matrix]\nmodels = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\n\
         threads = [1]\n[measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n{extra}"
    );
    if let Err(e) = std::fs::write(&config, text) {
        panic!("{e}");
    }
    config
}

fn roofline(cache: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache)
        .arg("roofline")
        .args(args)
        .assert()
}

#[test]
fn measured_ceilings_are_sane_and_kept_for_this_device() {
    let cache = temp_dir();
    let assert = roofline(
        cache.path(),
        &["measure", "--quick", "--threads", "2", "--json"],
    )
    .success();
    let json: serde_json::Value = match serde_json::from_slice(&assert.get_output().stdout) {
        Ok(v) => v,
        Err(e) => panic!("not JSON: {e}"),
    };
    let c = &json["ceilings"];
    let compute = c["compute"].as_array().cloned().unwrap_or_default();
    // fp64, fp32 and every narrow-precision unit this CPU has, on 1 and 2 threads.
    let units: Vec<Unit> = Unit::of_this_architecture()
        .iter()
        .copied()
        .filter(|u| u.available().is_ok() && !u.superseded())
        .collect();
    assert_eq!(
        compute.len(),
        4 + 2 * units.len(),
        "fp64 and fp32 and {units:?} on 1 and 2 threads: {compute:?}"
    );
    for unit in &units {
        let by_threads: Vec<(u64, String)> = compute
            .iter()
            .filter(|r| r["via"] == unit.to_string().as_str())
            .map(|r| {
                (
                    r["threads"].as_u64().unwrap_or(0),
                    r["precision"].to_string(),
                )
            })
            .collect();
        let precision = format!("\"{}\"", unit.precision());
        assert_eq!(
            by_threads,
            [(1, precision.clone()), (2, precision)],
            "{unit}"
        );
    }
    let get = |kind: &str, key: &str, name: &str, threads: u64| -> Option<f64> {
        c[kind].as_array()?.iter().find_map(|r| {
            (r[key] == name && r["threads"] == threads).then(|| {
                r[if kind == "compute" {
                    "flops_per_s"
                } else {
                    "bytes_per_s"
                }]
                .as_f64()
            })?
        })
    };
    for precision in ["fp64", "fp32"] {
        let (one, two) = (
            get("compute", "precision", precision, 1),
            get("compute", "precision", precision, 2),
        );
        assert!(one.is_some_and(|v| v > 1e8), "{precision}: {one:?}");
        assert!(
            two >= one,
            "{precision}: all-thread {two:?} < one-thread {one:?}"
        );
    }
    // L1 ≥ L2 ≥ L3 ≥ DRAM for every thread count measured.
    for threads in [1, 2] {
        let levels: Vec<f64> = ["L1", "L2", "L3", "DRAM"]
            .iter()
            .filter_map(|l| get("bandwidth", "level", l, threads))
            .collect();
        assert!(!levels.is_empty());
        assert!(
            levels.windows(2).all(|w| w[0] >= w[1]),
            "{threads} thread(s): {levels:?}"
        );
    }
    assert!(c["sweep"].as_array().is_some_and(|s| s.len() >= 3));
    // Every figure keeps the spread of its trials: the peaks, then each sweep point.
    let trials = c["trials"].as_array().cloned().unwrap_or_default();
    let figures = compute.len() + c["sweep"].as_array().map_or(0, Vec::len);
    assert_eq!(trials.len(), figures, "{trials:?}");
    assert!(
        trials
            .iter()
            .all(|t| t["count"].as_u64().unwrap_or(0) >= 2
                && t["worst"].as_f64() <= t["best"].as_f64()),
        "{trials:?}"
    );
    let saved: Vec<_> = match std::fs::read_dir(cache.path()) {
        Ok(d) => d.flatten().collect(),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(saved.len(), 1);
    // A later command finds them.
    let shown = stdout_of(&roofline(cache.path(), &["show", "--ascii"]).success());
    assert!(shown.contains("measured by edgeprof"), "{shown}");
    assert!(shown.contains("hardware counters"), "{shown}");
}

#[test]
fn a_precision_the_ceilings_lack_is_refused_with_what_they_have() {
    let cache = temp_dir();
    let assert = roofline(
        cache.path(),
        &["show", "--ceilings", &pi4(), "--precision", "int8"],
    )
    .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("have no int8 roof (they have fp64, fp32)"),
        "{stderr}"
    );
}

#[test]
fn every_narrow_precision_unit_here_is_checked_or_said_absent() {
    let cache = temp_dir();
    let out = stdout_of(&roofline(cache.path(), &["kernels"]).success());
    for &unit in Unit::of_this_architecture() {
        let name = unit.to_string();
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")) || l.starts_with(&format!("  {name} (")));
        match unit.available() {
            Ok(()) => assert!(line.is_some_and(|l| l.ends_with(" ok")), "{name}: {out}"),
            Err(why) => assert!(line.is_some_and(|l| l.ends_with(&why.0)), "{name}: {out}"),
        }
    }
}

#[test]
fn show_without_ceilings_says_how_to_get_them() {
    let cache = temp_dir();
    let assert = roofline(cache.path(), &["show"]).code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("run `edgeprof roofline measure`"),
        "{stderr}"
    );
}

#[test]
fn ert_imports_in_both_dialects_and_relabels_by_size() {
    let cache = temp_dir();
    let new =
        stdout_of(&roofline(cache.path(), &["import-ert", &ert("new-dialect.json")]).success());
    assert!(new.contains("(4 thread(s))"), "{new}");
    assert!(
        new.contains("61.5 GFLOP/s") && new.contains("21.9 GB/s"),
        "{new}"
    );
    let old =
        stdout_of(&roofline(cache.path(), &["import-ert", &ert("old-dialect.json")]).success());
    assert!(
        old.contains("44.0 GFLOP/s") && old.contains("80.2 GB/s"),
        "{old}"
    );
    // The last import is the device's ceilings now.
    let shown = stdout_of(&roofline(cache.path(), &["show"]).success());
    assert!(
        shown.contains("imported from ERT") && shown.contains("old-dialect.json"),
        "{shown}"
    );
    let with_sweep = roofline(
        cache.path(),
        &[
            "import-ert",
            &ert("old-dialect.json"),
            "--sweep",
            &ert("sweep.max"),
        ],
    )
    .success();
    let stderr = String::from_utf8_lossy(&with_sweep.get_output().stderr).into_owned();
    assert!(!stderr.contains("by their position"), "{stderr}");
    let broken = roofline(cache.path(), &["import-ert", &ert("broken.json")]).code(2);
    let stderr = String::from_utf8_lossy(&broken.get_output().stderr).into_owned();
    assert!(
        stderr.contains("broken.json: empirical.gflops.data[0] is not a [name, number] pair"),
        "{stderr}"
    );
    // A ceilings file that is not there is bad input, named.
    let tmp = temp_dir();
    let missing = tmp.path().join("missing.json");
    let none = roofline(
        cache.path(),
        &["show", "--ceilings", &missing.display().to_string()],
    )
    .code(2);
    let stderr = String::from_utf8_lossy(&none.get_output().stderr).into_owned();
    assert!(
        stderr.contains("cannot read") && stderr.contains("missing.json"),
        "{stderr}"
    );
}

#[test]
fn a_results_directory_becomes_points_with_advice_and_an_svg() {
    let cache = temp_dir();
    let pi4 = pi4();
    let tmp = temp_dir();
    let config = tmp.path().join("r.toml");
    if let Err(e) = std::fs::write(
        &config,
        "name = \"r\"\n[matrix]\nmodels = [\"resnet34\", \"mobilenet_v2\"]\ninputs = [\"3x32x32\"]\nthreads = [1]\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n",
    ) {
        panic!("{e}");
    }
    let out = tmp.path().join("results");
    run_config(&config, &out);
    let dir = only_entry(&out);
    let svg = tmp.path().join("roofline.svg");
    let shown = stdout_of(
        &roofline(
            cache.path(),
            &[
                "show",
                &dir.display().to_string(),
                "--ceilings",
                &pi4,
                "--svg",
                &svg.display().to_string(),
            ],
        )
        .success(),
    );
    assert!(
        shown.contains("A  tract/resnet34/3x32x32/b1/t1/cpu"),
        "{shown}"
    );
    assert!(
        shown.contains("B  tract/mobilenet_v2/3x32x32/b1/t1/cpu"),
        "{shown}"
    );
    assert!(shown.contains("   1. "), "{shown}");
    assert!(shown.contains("rests on:"), "{shown}");
    assert!(std::fs::read_to_string(&svg).is_ok_and(|s| s.starts_with("<svg")));
    let json = roofline(
        cache.path(),
        &[
            "show",
            &dir.display().to_string(),
            "--ceilings",
            &pi4,
            "--json",
        ],
    )
    .success();
    let v: serde_json::Value = match serde_json::from_slice(&json.get_output().stdout) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(v["programs"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["analyses"][0]["binding"], "DRAM");
    assert_eq!(v["programs"][0]["source"], "analytic");
}

#[test]
fn layers_are_ranked_by_the_time_they_can_save() {
    let cache = temp_dir();
    let svg = cache.path().join("layers.svg");
    let pi4 = pi4();
    let out = stdout_of(
        &roofline(
            cache.path(),
            &[
                "layers",
                "resnet34",
                "--input",
                "3x32x32",
                "--threads",
                "1",
                "--runs",
                "2",
                "--ceilings",
                &pi4,
                "--top",
                "3",
                "--ascii",
                "--svg",
                &svg.display().to_string(),
            ],
        )
        .success(),
    );
    assert!(out.contains("layer") && out.contains("saving %"), "{out}");
    // The three highest-ranked layers are drawn as A, B, C and marked so in the table.
    let (chart, table) = out.split_once("\n   layer ").unwrap_or_default();
    for mark in ['A', 'B', 'C'] {
        assert!(chart.contains(mark), "{mark} not drawn: {chart}");
    }
    let rows: Vec<&str> = table.lines().skip(2).collect();
    assert!(rows.len() > 3, "{table}");
    assert!(
        rows[0].starts_with("A  ") && rows[2].starts_with("C  "),
        "{table}"
    );
    assert!(rows[3].starts_with("   "), "{table}");
    let first_layer = rows[0].split_whitespace().nth(1).unwrap_or("?");
    let svg_text = std::fs::read_to_string(&svg).unwrap_or_default();
    assert!(
        svg_text.contains(first_layer),
        "the SVG lacks {first_layer}"
    );
    assert!(
        out.contains("layer1.0.conv1") || out.contains("conv1"),
        "{out}"
    );
    assert!(out.contains("first: "), "{out}");
}

#[test]
fn a_run_that_asks_for_it_adds_the_roofline_to_its_outputs() {
    let cache = temp_dir();
    roofline(cache.path(), &["import-ert", &ert("new-dialect.json")]).success();
    let tmp = temp_dir();
    let config = shufflenet_config(tmp.path(), "[output]\nroofline = true\n");
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out)
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .assert()
        .success();
    let stdout = stdout_of(&assert);
    assert!(stdout.contains("\nroofline\n"), "{stdout}");
    assert!(
        stdout.contains("A  tract/shufflenet_v2_x0_5/3x32x32/b1/t1/cpu"),
        "{stdout}"
    );
    assert!(stdout.contains("fp32 peak 122.9 GFLOP/s"), "{stdout}");
    let dir = only_entry(&out);
    let json: serde_json::Value = match serde_json::from_str(
        &std::fs::read_to_string(dir.join("roofline.json")).unwrap_or_default(),
    ) {
        Ok(v) => v,
        Err(e) => panic!("roofline.json: {e}"),
    };
    assert_eq!(json["analyses"].as_array().map(Vec::len), Some(1));
    assert!(dir.join("charts/roofline.svg").is_file());

    // The worker was asked for hardware counters: it reports them or says why not, and the
    // source line says which; nothing fails either way.
    let runs = std::fs::read_to_string(dir.join("runs.jsonl")).unwrap_or_default();
    let record: serde_json::Value =
        serde_json::from_str(runs.lines().next().unwrap_or("")).unwrap_or_default();
    let counters = &record["run"]["counters"];
    assert_eq!(counters["iterations"], 3, "{record}");
    let counted = counters["counts"].as_array().is_some_and(|c| !c.is_empty());
    if counted {
        // Counted cache events place the point; FLOP events alone leave it analytic.
        assert!(
            stdout.contains("hardware counters for 1")
                || stdout.contains("hardware counters available"),
            "{stdout}"
        );
    } else {
        let why = counters["unavailable"][0].as_str().unwrap_or("");
        assert!(why.starts_with("all events: "), "{why}");
        assert!(
            stdout.contains("hardware counters unavailable: "),
            "{stdout}"
        );
        assert_eq!(json["programs"][0]["source"], "analytic");
    }
}

/// The run's report is printed as soon as its summaries are stored, before the rooflines'
/// steps: a first ceilings measurement takes minutes on a board, and the results are ready.
#[test]
fn a_runs_report_comes_before_its_ceilings_are_measured() {
    let cache = temp_dir();
    let tmp = temp_dir();
    let config = shufflenet_config(tmp.path(), "[output]\nroofline = true\n");
    let out = tmp.path().join("results");
    // Both streams into one pipe, in the order they were written.
    let merged = std::process::Command::new("sh")
        .arg("-c")
        .arg("\"$0\" run --no-charts \"$1\" --output \"$2\" 2>&1")
        .arg(assert_cmd::cargo::cargo_bin("edgeprof"))
        .arg(&config)
        .arg(&out)
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .output();
    let text = match merged {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => panic!("{}", String::from_utf8_lossy(&o.stdout)),
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    let report = text.find("\ncondition ");
    let measuring = text.find("no ceilings for this device yet");
    match (report, measuring) {
        (Some(r), Some(m)) => assert!(r < m, "{text}"),
        _ => panic!("no report or no measurement: {text}"),
    }
}

#[test]
fn cache_simulation_places_l2_and_dram_points_and_is_kept() {
    let cache = temp_dir();
    roofline(cache.path(), &["import-ert", &ert("new-dialect.json")]).success();
    let tmp = temp_dir();
    let config = shufflenet_config(tmp.path(), "");
    let out = tmp.path().join("results");
    run_config(&config, &out).success();
    let dir = only_entry(&out);
    let dir_arg = dir.display().to_string();

    // Without valgrind on PATH the request is refused in one sentence.
    let refused = edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .env("PATH", tmp.path())
        .args(["roofline", "show", &dir_arg, "--cache-sim"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(
        stderr.contains("--cache-sim needs valgrind: valgrind is not installed"),
        "{stderr}"
    );

    // valgrind is installed by .ci/run; this test needs it.
    let shown = roofline(
        cache.path(),
        &[
            "show",
            &dir_arg,
            "--cache-sim",
            "--cache-sim-iterations",
            "1",
            "--json",
        ],
    )
    .success();
    let v: serde_json::Value = match serde_json::from_slice(&shown.get_output().stdout) {
        Ok(v) => v,
        Err(e) => panic!("no JSON: {e}"),
    };
    let program = &v["programs"][0];
    assert_eq!(program["source"], "cache_simulation", "{program}");
    let traffic = program["traffic"].as_array().cloned().unwrap_or_default();
    let bytes = |level: &str| {
        traffic
            .iter()
            .find(|t| t[0] == level)
            .and_then(|t| t[1].as_f64())
    };
    // Every weight (1,366,792 fp32 parameters) passes from L2 into a far smaller L1 at least once
    // per inference.
    let l2 = bytes("L2").unwrap_or(0.0);
    assert!(l2 >= 0.9 * 4.0 * 1_366_792.0, "L2 bytes {l2}");
    assert!(
        bytes("DRAM").is_some_and(|d| d >= 0.0 && d <= l2 * 2.0),
        "{traffic:?}"
    );
    assert!(dir.join("cache-sim.json").is_file());

    // Kept: a later show uses it without valgrind.
    let again = edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .args(["roofline", "show", &dir_arg, "--ascii"])
        .assert()
        .success();
    let text = stdout_of(&again);
    assert!(text.contains("cache simulation for 1"), "{text}");
    assert!(
        text.contains("from cache simulation (valgrind, one thread"),
        "{text}"
    );
}

fn gpu_profile(name: &str) -> String {
    format!(
        "{}/tests/fixtures/gpu-profilers/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn gpu_profiler_output_becomes_points_and_advice() {
    let tmp = temp_dir();
    // ncu: two kernels placed, the failed launch named on stderr.
    let out = roofline(tmp.path(), &["import-ncu", &gpu_profile("ncu-orin.csv")]).success();
    let text = stdout_of(&out);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        text.contains("ncu-orin: 2 kernel(s) from Nsight Compute"),
        "{text}"
    );
    assert!(text.contains("program: 0.816 GFLOP in 1.100 ms"), "{text}");
    assert!(text.contains("no ceilings for GPU 0 yet"), "{text}");
    assert!(
        stderr.contains("layernorm_kernel") && stderr.contains("failed launch"),
        "{stderr}"
    );
    // With the GPU's ceilings: the chart and the ordered advice, like the CPU roofline.
    let orin = format!(
        "{}/tests/fixtures/ceilings-orin-gpu.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let svg = tmp.path().join("gpu.svg");
    let out = roofline(
        tmp.path(),
        &[
            "import-ncu",
            &gpu_profile("ncu-orin.csv"),
            "--ceilings",
            &orin,
            "--label",
            "resnet on Orin",
            "--svg",
            &svg.to_string_lossy(),
        ],
    )
    .success();
    let text = stdout_of(&out);
    assert!(text.contains("resnet on Orin"), "{text}");
    assert!(text.contains("1. "), "no advice:\n{text}");
    assert!(svg.is_file());
    // nvprof with its GPU summary; JSON carries kernels, program and warnings.
    let v = json_of(&[
        "roofline",
        "import-nvprof",
        &gpu_profile("nvprof-nano-metrics.csv"),
        "--summary",
        &gpu_profile("nvprof-nano-summary.csv"),
        "--json",
    ]);
    assert_eq!(v["tool"], "nvprof");
    assert_eq!(v["kernels"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["program"]["flops"], 2e7);
    assert!(v["warnings"].to_string().contains("broken_kernel"), "{v}");
    // Broken input: one clear error, exit code 2.
    assert_bad_input(
        &["roofline", "import-ncu", &gpu_profile("not-a-profile.txt")],
        "is not Nsight Compute CSV output",
    );
    assert_bad_input(
        &["roofline", "import-nvprof", "/nonexistent.csv"],
        "cannot read /nonexistent.csv",
    );
}

#[test]
fn profile_gpu_runs_the_profiler_the_gpu_needs() {
    let tmp = temp_dir();
    let path = format!(
        "{}/tests/fixtures/bin:{}",
        env!("CARGO_MANIFEST_DIR"),
        std::env::var("PATH").unwrap_or_default()
    );
    let profile = |cc: &str, out: &str, fail: Option<&str>| {
        let mut c = edgeprof();
        c.env("PATH", &path).current_dir(tmp.path());
        if let Some(f) = fail {
            c.env("FAKE_PROFILER_FAIL", f);
        }
        c.args([
            "roofline",
            "profile-gpu",
            "--compute-capability",
            cc,
            "--output",
            out,
        ])
        .args(["--", "./resnet_infer", "--batch", "1"])
        .assert()
    };
    // Orin (8.7): Nsight Compute, its CSV kept and placed.
    let out = profile("8.7", "orin", None).success();
    let text = stdout_of(&out);
    assert!(text.contains("2 kernel(s) from Nsight Compute"), "{text}");
    assert!(tmp.path().join("orin/ncu.csv").is_file());
    // Jetson Nano (5.3): nvprof, twice (metrics, then the GPU summary for the times).
    let out = profile("5.3", "nano", None).success();
    let text = stdout_of(&out);
    assert!(text.contains("2 kernel(s) from nvprof"), "{text}");
    assert!(text.contains("program: 0.020 GFLOP in 5.430 ms"), "{text}");
    assert!(tmp.path().join("nano/nvprof-metrics.csv").is_file());
    assert!(tmp.path().join("nano/nvprof-summary.csv").is_file());
    // A driver that keeps the counters to administrators: said in one sentence.
    let out = profile("8.7", "denied", Some("perm")).code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("run edgeprof as root"), "{stderr}");
    assert_bad_input(
        &[
            "roofline",
            "profile-gpu",
            "--compute-capability",
            "eight",
            "--",
            "x",
        ],
        "is not MAJOR.MINOR",
    );
    // Without the profiler installed, the reason (PATH without the stand-ins).
    if !Path::new("/usr/local/cuda/bin/ncu").exists() {
        let out = edgeprof()
            .env("PATH", "/usr/bin:/bin")
            .args(["roofline", "profile-gpu", "--tool", "ncu", "--", "x"])
            .assert()
            .code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stderr.contains("GPU profiling unavailable: ncu is not installed"),
            "{stderr}"
        );
    }
}

/// A layer profile of shufflenet_v2_x0_5 at 3x64x64 (10 runs on one thread), saved with
/// `roofline layers --json` against the Raspberry Pi 4 ceilings: its `ranking` is what the CLI
/// said when it profiled.
fn saved_profile() -> String {
    format!(
        "{}/tests/fixtures/layers/shufflenet_v2_x0_5-3x64x64.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn labels(ranking: &serde_json::Value) -> Vec<String> {
    ranking
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["label"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn parsed(text: &str) -> serde_json::Value {
    match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => panic!("{e}: {text}"),
    }
}

#[test]
fn a_saved_layer_profile_ranks_as_it_did_when_profiled() {
    let cache = temp_dir();
    let (saved, pi4) = (saved_profile(), pi4());
    let out = stdout_of(
        &roofline(
            cache.path(),
            &[
                "layers",
                "shufflenet_v2_x0_5",
                "--profile",
                &saved,
                "--ceilings",
                &pi4,
                "--json",
            ],
        )
        .success(),
    );
    let stored = parsed(&std::fs::read_to_string(&saved).unwrap_or_default());
    assert_eq!(labels(&parsed(&out)["ranking"]), labels(&stored["ranking"]));
}

/// The saved profile with a twin of its first layer whose runs trade places with it: the two
/// tie, and resampling the runs puts either first about half the time.
fn tied_profile(dir: &Path) -> std::path::PathBuf {
    let mut v = parsed(&std::fs::read_to_string(saved_profile()).unwrap_or_default());
    let first = labels(&v["ranking"]).first().cloned().unwrap_or_default();
    let layers = v["layers"].as_array().cloned().unwrap_or_default();
    let Some(k) = layers.iter().position(|l| l["label"] == first.as_str()) else {
        panic!("no layer {first}");
    };
    let runs: Vec<f64> = v["runs_s"][k]
        .as_array()
        .map(|r| r.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default();
    let (low, high) = (runs[0] * 0.9, runs[0] * 1.1);
    let a: Vec<f64> = (0..runs.len())
        .map(|i| if i % 2 == 0 { low } else { high })
        .collect();
    let b: Vec<f64> = (0..runs.len())
        .map(|i| if i % 2 == 0 { high } else { low })
        .collect();
    let mut twin = layers[k].clone();
    twin["label"] = serde_json::json!(format!("{first}-twin"));
    v["runs_s"][k] = serde_json::json!(a);
    if let Some(l) = v["layers"].as_array_mut() {
        l.push(twin);
    }
    if let Some(r) = v["runs_s"].as_array_mut() {
        r.push(serde_json::json!(b));
    }
    let path = dir.join("tied.json");
    if let Err(e) = std::fs::write(&path, v.to_string()) {
        panic!("{e}");
    }
    path
}

#[test]
fn a_steady_first_layer_is_called_steady_and_a_tie_is_called_unstable() {
    let cache = temp_dir();
    let pi4 = pi4();
    let rank = |profile: &str| {
        stdout_of(
            &roofline(
                cache.path(),
                &[
                    "layers",
                    "shufflenet_v2_x0_5",
                    "--profile",
                    profile,
                    "--ceilings",
                    &pi4,
                ],
            )
            .success(),
        )
    };
    let steady = rank(&saved_profile());
    assert!(
        steady.contains("the first layer stays first in"),
        "{steady}"
    );
    let tied = tied_profile(cache.path());
    let unsteady = rank(&tied.to_string_lossy());
    assert!(unsteady.contains("the ranking is unstable"), "{unsteady}");
}

#[test]
fn a_kernel_without_flop_counts_shows_zero_not_negative_zero() {
    let tmp = temp_dir();
    let csv = tmp.path().join("metrics.csv");
    write(
        &csv,
        "==1== Metric result:\n\
         \"Device\",\"Kernel\",\"Invocations\",\"Metric Name\",\"Metric Description\",\"Min\",\"Max\",\"Avg\"\n\
         \"GPU (0)\",\"copy_kernel(float*)\",4,\"gld_transactions\",\"Global Load Transactions\",1000,1000,1000\n\
         \"GPU (0)\",\"copy_kernel(float*)\",4,\"dram_read_transactions\",\"Device Memory Read Transactions\",500,500,500\n",
    );
    let out = edgeprof()
        .args(["roofline", "import-nvprof", &csv.to_string_lossy()])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(!text.contains("-0.0"), "{text}");
}

#[test]
fn terminal_escapes_in_a_profilers_kernel_names_are_shown_escaped() {
    let tmp = temp_dir();
    let csv = tmp.path().join("metrics.csv");
    write(
        &csv,
        "==1== Metric result:\n\
         \"Device\",\"Kernel\",\"Invocations\",\"Metric Name\",\"Metric Description\",\"Min\",\"Max\",\"Avg\"\n\
         \"GPU (0)\",\"k\u{1b}]0;PWNED\u{7}\",1,\"flop_count_sp\",\"Floating Point Operations(Single Precision)\",nan,nan,nan\n\
         \"GPU (0)\",\"good(float*)\",4,\"flop_count_sp\",\"Floating Point Operations(Single Precision)\",1000,1000,1000\n",
    );
    let out = edgeprof()
        .args(["roofline", "import-nvprof", &csv.to_string_lossy()])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("k\\x1b]0;PWNED\\x07"), "{stderr:?}");
}

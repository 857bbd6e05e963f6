//! The external frameworks: `edgeprof env`, the harness protocol against a fake framework
//! (crash, hang, wrong parameter count, missing package), and tract, candle and onnxruntime side
//! by side on the same models, with their outputs compared.

mod common;

use common::{edgeprof, export_model, only_entry, read, run_command, temp_dir, test_python, write};
use std::path::{Path, PathBuf};

fn records(dir: &Path) -> Vec<serde_json::Value> {
    read(&dir.join("runs.jsonl"))
        .lines()
        .map(|l| match serde_json::from_str(l) {
            Ok(v) => v,
            Err(e) => panic!("bad record {l}: {e}"),
        })
        .collect()
}

fn fake_framework_dir() -> String {
    format!("{}/tests/fixtures/fakefw", env!("CARGO_MANIFEST_DIR"))
}

/// A Python with numpy (the harness needs it) and without torch.
fn python_without_torch() -> PathBuf {
    test_python(
        "import numpy, importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)",
        &["numpy"],
    )
}

/// The zoo's shufflenet_v2_x0_5 with 1000 classes.
const SHUFFLENET_PARAMETERS: u64 = 1_366_792;

/// Runs one pytorch condition on the fake torch in `mode`; returns the run's records.
fn fake_run(mode: &str) -> (Vec<serde_json::Value>, String) {
    let tmp = temp_dir();
    let python = python_without_torch();
    let config = tmp.path().join("fake.toml");
    write(
        &config,
        &format!(
            "name = \"fake\"\n[matrix]\nengines = [\"pytorch\"]\nmodels = [\"shufflenet_v2_x0_5\"]\n\
             inputs = [\"3x32x32\"]\nthreads = [1]\n[measure]\nwarmup = 1\niterations = 3\n\
             repeats = 1\nretries = 0\ntimeout_s = 3\n[frameworks.pytorch]\npython = \"{}\"\n",
            python.display()
        ),
    );
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out)
        .env("PYTHONPATH", fake_framework_dir())
        .env("EDGEPROF_FAKE_MODE", mode)
        .env("EDGEPROF_FAKE_PARAMS", SHUFFLENET_PARAMETERS.to_string())
        .env("EDGEPROF_DATA_DIR", tmp.path().join("data"))
        .assert();
    let code = assert.get_output().status.code();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert_eq!(
        code,
        Some(if mode == "ok" { 0 } else { 1 }),
        "{mode}: {stdout}"
    );
    (records(&only_entry(&out)), stdout)
}

#[test]
fn the_harness_reports_a_fake_frameworks_version_device_threads_and_parameters() {
    let (runs, _) = fake_run("ok");
    assert_eq!(runs.len(), 1);
    let run = &runs[0]["run"];
    assert_eq!(runs[0]["ok"], true, "{:?}", runs[0]);
    assert_eq!(run["engine"], "pytorch");
    assert_eq!(run["engine_version"], "0.0-fake (torchvision 0.0-fake)");
    assert_eq!(run["device"], "cpu");
    assert_eq!(run["threads"], 1);
    assert_eq!(run["parameters"], SHUFFLENET_PARAMETERS);
    assert_eq!(run["repeats"][0].as_array().map(Vec::len), Some(3));
    assert_eq!(run["warmup_ms"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_fake_framework_that_crashes_hangs_or_builds_another_model_fails_with_the_reason() {
    let cases = [
        (
            "crash",
            "signal",
            "killed by signal 6 (SIGABRT: the engine aborted)",
        ),
        ("hang", "timeout", "did not finish within the 3 s timeout"),
        (
            "wrong_params",
            "parameter_mismatch",
            "the engine built 1366793 parameters where the zoo's shufflenet_v2_x0_5 has 1366792",
        ),
    ];
    for (mode, kind, reason) in cases {
        let (runs, stdout) = fake_run(mode);
        assert_eq!(runs.len(), 1, "{mode}");
        assert_eq!(runs[0]["ok"], false, "{mode}");
        assert_eq!(runs[0]["failure"]["kind"], kind, "{mode}: {:?}", runs[0]);
        let got = runs[0]["reason"].as_str().unwrap_or("");
        assert!(got.contains(reason), "{mode}: {got}");
        assert!(
            stdout.contains(reason),
            "{mode}: the report lacks the reason: {stdout}"
        );
    }
}

#[test]
fn a_missing_framework_package_is_named_with_the_command_that_sets_it_up() {
    let tmp = temp_dir();
    let python = python_without_torch();
    // Planned with an interpreter that lacks torch: skipped, saying so.
    let config = tmp.path().join("missing.toml");
    write(
        &config,
        &format!(
            "[matrix]\nengines = [\"tract\", \"pytorch\"]\nmodels = [\"shufflenet_v2_x0_5\"]\n\
             inputs = [\"3x32x32\"]\n[frameworks.pytorch]\npython = \"{}\"\n",
            python.display()
        ),
    );
    let assert = edgeprof()
        .env("EDGEPROF_DATA_DIR", tmp.path().join("data"))
        .args(["config", "check"])
        .arg(&config)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(
        text.contains(&format!("pytorch cannot run with {}", python.display()))
            && text.contains("there has no torch module"),
        "{text}"
    );
    // The harness itself, run by hand on that interpreter: one error record naming the package,
    // the interpreter and the command that sets it up.
    let program = edgeprof()
        .args(["env", "harness", "pytorch"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let harness = tmp.path().join("harness.py");
    if let Err(e) = std::fs::write(&harness, program) {
        panic!("{e}");
    }
    let request = serde_json::json!({
        "condition": {"id": "pytorch/shufflenet_v2_x0_5/3x32x32/b1/t1/cpu", "engine": "pytorch",
            "model": {"kind": "zoo", "name": "shufflenet_v2_x0_5"}, "input": "3x32x32",
            "batch": 1, "threads": 1, "device": "cpu"},
        "warmup": 0, "iterations": 1, "repeats": 1, "seed": 1, "classes": 1000,
    });
    let out = assert_cmd::Command::new(&python)
        .arg(&harness)
        .write_stdin(request.to_string())
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let record: serde_json::Value = match serde_json::from_str(stdout.trim()) {
        Ok(v) => v,
        Err(e) => panic!("not one JSON record ({e}): {stdout}"),
    };
    assert_eq!(record["type"], "error");
    let message = record["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("the Python package torch is not installed for")
            && message.ends_with("set it up with: edgeprof env setup pytorch"),
        "{message}"
    );
}

#[test]
fn env_commands_say_what_they_can_and_cannot_do() {
    let tmp = temp_dir();
    let data = tmp.path().join("data");
    let listed = edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .env("PATH", "/nonexistent")
        .args(["env", "list", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let listed: serde_json::Value = match serde_json::from_slice(&listed) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let state = |engine: &str| {
        listed
            .as_array()
            .and_then(|a| a.iter().find(|e| e["engine"] == engine))
            .map(|e| (e["state"].clone(), e["description"].clone()))
    };
    assert_eq!(state("tract").map(|s| s.0), Some("built_in".into()));
    assert_eq!(state("candle").map(|s| s.0), Some("built_in".into()));
    // Without python3 on PATH nothing is found system-wide.
    let ort = state("onnxruntime").unwrap_or_default();
    assert_eq!(ort.0, "not_set_up");
    assert_eq!(ort.1, "not set up (run: edgeprof env setup onnxruntime)");
    for framework in ["pytorch", "tensorflow", "tflite"] {
        assert_eq!(state(framework).map(|s| s.0), Some("not_set_up".into()));
    }
    common::assert_bad_input(&["env", "setup", "tract"], "tract is built into edgeprof");
    common::assert_bad_input(&["env", "setup", "caffe"], "unknown framework caffe");
    // Remove leaves alone a directory edgeprof did not make.
    let foreign = data.join("envs/onnxruntime");
    if let Err(e) = std::fs::create_dir_all(&foreign) {
        panic!("{e}");
    }
    let assert = edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["env", "remove", "onnxruntime"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("is not an environment edgeprof made"),
        "{stderr}"
    );
    assert!(foreign.exists());
    // A failed setup leaves nothing half-made, and says why.
    let assert = edgeprof()
        .env("EDGEPROF_DATA_DIR", tmp.path().join("fresh"))
        .args(["env", "setup", "onnxruntime", "--python", "/bin/false"])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("setting up onnxruntime failed") && stderr.contains("-m venv failed"),
        "{stderr}"
    );
    assert!(!tmp.path().join("fresh/envs/onnxruntime").exists());
}

/// edgeprof's data directory for the tests that need a real framework: kept under target/ so
/// the environments are made once.
/// The shared data directory with onnxruntime set up in it, as a user would (a no-op when CI or
/// an earlier test already did).
fn onnxruntime_set_up() -> PathBuf {
    common::framework_set_up("onnxruntime")
}

#[test]
fn tract_candle_and_onnxruntime_agree_on_the_same_models() {
    let data = common::shared_data_dir();
    // Set up as a user would (a no-op when CI or an earlier run already did).
    let assert = edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["env", "setup", "onnxruntime"])
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .success();
    let said = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(said.contains("onnxruntime"), "{said}");
    let listed = edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["env", "list"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let listed = String::from_utf8_lossy(&listed).into_owned();
    assert!(
        listed.contains("onnxruntime  ready (") && listed.contains("edgeprof's environment"),
        "{listed}"
    );
    let tmp = temp_dir();
    let config = tmp.path().join("three.toml");
    write(
        &config,
        "name = \"three\"\n[matrix]\nengines = [\"tract\", \"candle\", \"onnxruntime\"]\n\
         models = [\"shufflenet_v2_x0_5\", \"mobilenet_v2\"]\ninputs = [\"3x32x32\"]\n\
         batch = [2]\nthreads = [1]\nclasses = 10\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n",
    );
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out)
        .env("EDGEPROF_DATA_DIR", &data)
        .assert()
        .success();
    let report = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let dir = only_entry(&out);
    let runs = records(&dir);
    assert_eq!(runs.len(), 6, "{report}");
    let info = |model: &str| -> u64 {
        let v = common::json_of(&[
            "models",
            "info",
            model,
            "--input",
            "3x32x32",
            "--classes",
            "10",
            "--json",
        ]);
        v["total"]["params"]
            .as_u64()
            .or_else(|| v["params"].as_u64())
            .unwrap_or(0)
    };
    for run in &runs {
        assert_eq!(run["ok"], true, "{run}");
        let c = &run["condition"];
        let engine = c["engine"].as_str().unwrap_or("");
        if engine == "onnxruntime" || engine == "candle" {
            let model = c["model"]["name"].as_str().unwrap_or("");
            assert_eq!(
                run["run"]["parameters"].as_u64(),
                Some(info(model)),
                "{run}"
            );
        }
        if engine == "onnxruntime" {
            assert!(
                run["run"]["engine_version"]
                    .as_str()
                    .is_some_and(|v| !v.is_empty()),
                "{run}"
            );
            assert_eq!(run["run"]["device"], "cpu");
            assert_eq!(run["run"]["threads"], 1);
        }
    }
    // Every engine's output against tract's, per model: 2 models × (candle, onnxruntime).
    let summary: serde_json::Value = match serde_json::from_str(&read(&dir.join("summary.json"))) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let compared = summary["outputs"]["compared"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(compared.len(), 4, "{summary}");
    for a in &compared {
        assert_eq!(a["agree"], true, "{a}");
        assert_eq!(a["values"], 20, "{a}");
        let rel = a["max_rel_diff"].as_f64().unwrap_or(1.0);
        assert!(rel <= 1e-4, "{a}");
        assert!(
            a["reference"]
                .as_str()
                .is_some_and(|r| r.starts_with("tract/")),
            "{a}"
        );
    }
    assert!(
        report.contains("outputs: each engine's first output"),
        "{report}"
    );
}

#[test]
fn every_harness_is_python_3_6_and_reads_its_options_by_name() {
    // JetPack 4 ships Python 3.6: the harnesses must parse with its grammar.
    let python = python_without_torch();
    let parses_as_3_6 = |program: Vec<u8>| {
        assert_cmd::Command::new(&python)
            .args([
                "-c",
                "import ast, sys; ast.parse(sys.stdin.read(), feature_version=(3, 6))",
            ])
            .write_stdin(program)
            .assert()
            .success();
    };
    for framework in ["onnxruntime", "pytorch", "tensorflow", "tflite"] {
        let program = edgeprof()
            .args(["env", "harness", framework])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8_lossy(&program).into_owned();
        assert!(
            text.contains(&format!("FRAMEWORK = \"{framework}\"")),
            "{framework}"
        );
        assert!(text.contains("OPTIONS = ("), "{framework}");
        parses_as_3_6(program);
    }
    // The placement unit program onnxruntime serves units with (`place`) and the converter to
    // lower precisions as well.
    for program in ["ort_unit.py", "ort_quantize.py"] {
        parses_as_3_6(
            read(
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("src/engines/harness")
                    .join(program),
            )
            .into_bytes(),
        );
    }
    common::assert_bad_input(&["env", "harness", "mxnet"], "unknown framework mxnet");
}

#[test]
fn a_failed_tflite_conversion_fails_its_condition_before_it_starts() {
    let tmp = temp_dir();
    let python = python_without_torch();
    let config = tmp.path().join("tflite.toml");
    write(
        &config,
        &format!(
            "[matrix]\nengines = [\"tract\", \"tflite\"]\nmodels = [\"shufflenet_v2_x0_5\"]\n\
             inputs = [\"3x32x32\"]\nthreads = [1]\n[measure]\nwarmup = 1\niterations = 2\n\
             repeats = 1\n[frameworks.tensorflow]\npython = \"{p}\"\n[frameworks.tflite]\n\
             python = \"{p}\"\n",
            p = python.display()
        ),
    );
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out)
        .env("PYTHONPATH", fake_framework_dir())
        .env("EDGEPROF_DATA_DIR", tmp.path().join("data"))
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let runs = records(&only_entry(&out));
    // tract ran; tflite failed once (nothing to retry) with the converter's own words.
    assert_eq!(runs.len(), 2, "{stdout}");
    assert_eq!(runs[0]["ok"], true);
    assert_eq!(runs[1]["failure"]["kind"], "prepare", "{}", runs[1]);
    let reason = runs[1]["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("cannot start this condition: cannot make shufflenet_v2_x0_5 ready for tflite: TensorFlow's conversion to .tflite failed:")
            && reason.ends_with(
                "failed: tensorflow failed: RuntimeError: the fake TensorFlow converts nothing"
            ),
        "{reason}"
    );
    assert!(stdout.contains(reason), "{stdout}");
}

/// Median of the medians of `rounds`.
fn middle(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn the_onnxruntime_harness_times_what_onnxruntimes_own_loop_times() {
    let data = onnxruntime_set_up();
    // The interpreter edgeprof runs onnxruntime in, and the model it feeds it.
    let python = data.join("envs/onnxruntime/bin/python");
    assert!(python.is_file(), "{}", python.display());
    let tmp = temp_dir();
    let model = tmp.path().join("s.onnx");
    export_model("shufflenet_v2_x0_5", "3x64x64", &model);
    let config = tmp.path().join("ort.toml");
    write(
        &config,
        "name = \"fidelity\"\n[matrix]\nengines = [\"onnxruntime\"]\n\
         models = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x64x64\"]\nthreads = [1]\n\
         [measure]\nwarmup = 10\niterations = 100\nrepeats = 1\nretries = 0\n\
         check_outputs = false\n",
    );
    let script = format!(
        "{}/scripts/plain-loop-onnxruntime.py",
        env!("CARGO_MANIFEST_DIR")
    );
    // Interleaved, seven rounds each: edgeprof's run, then onnxruntime's own loop (the median
    // round of each side, as single runs on a shared host differ by more than 5 %).
    let (mut ours, mut theirs, mut verdicts) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..7 {
        let out = tmp.path().join(format!("r{round}"));
        run_command(&config, &out)
            .env("EDGEPROF_DATA_DIR", &data)
            .assert()
            .success();
        let runs = records(&only_entry(&out));
        let Some(run) = runs.last() else {
            panic!("no record")
        };
        ours.push(
            run["stats"]["latency"]["median_ms"]
                .as_f64()
                .unwrap_or(f64::NAN),
        );
        let summary = read(&only_entry(&out).join("summary.json"));
        verdicts.push(
            ["clean", "noisy", "disturbed", "throttled"]
                .into_iter()
                .find(|v| summary.contains(&format!("\"verdict\": \"{v}\"")))
                .unwrap_or("none"),
        );
        let plain = std::process::Command::new(&python)
            .arg(&script)
            .arg(&model)
            .args(["--threads", "1", "--warmup", "10", "--iterations", "100"])
            .output();
        let plain = match plain {
            Ok(o) if o.status.success() => o.stdout,
            Ok(o) => panic!("{}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => panic!("{e}"),
        };
        let v: serde_json::Value = match serde_json::from_slice(&plain) {
            Ok(v) => v,
            Err(e) => panic!("{e}: {}", String::from_utf8_lossy(&plain)),
        };
        theirs.push(v["median_ms"].as_f64().unwrap_or(f64::NAN));
    }
    let (a, b) = (middle(ours.clone()), middle(theirs.clone()));
    let ratio = a / b;
    // The figures, for the record (the note of the issue quotes them).
    eprintln!(
        "fidelity: edgeprof {ours:?} ms ({verdicts:?}), onnxruntime's loop {theirs:?} ms, \
         ratio of the median rounds {ratio:.3}"
    );
    // Rounds that differ among themselves by more than the tolerance cannot resolve it either.
    let spread = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (v[v.len() * 3 / 4] - v[v.len() / 4]) / v[v.len() / 2]
    };
    // The agreement asked for is 5 %, or three times what the rounds themselves spread on this
    // machine when that is more (a shared 2-core host): a harness that times something else
    // (session creation, a copy per inference, the wrong thread count) misses it either way.
    let tolerance = 0.05_f64.max(3.0 * spread(&ours).max(spread(&theirs)));
    assert!(
        (ratio - 1.0).abs() < tolerance,
        "edgeprof's median {a:.3} ms against onnxruntime's own loop {b:.3} ms (ratio {ratio:.3}, \
         tolerance {tolerance:.3}; verdicts {verdicts:?}): {ours:?} against {theirs:?}"
    );
}

/// `costmodel profile --engine pytorch` times the fake torch's modules through the harness's
/// hooks: a leaf module is its layer, a block's own time goes to the functional layers no
/// module runs (ShuffleNet's concatenation and shuffle), summed into tract's groups. The fake's
/// modules are busy for fixed times, so each group's time has a floor.
#[test]
fn costmodel_profiles_pytorch_module_times_through_the_harness_hooks() {
    let tmp = temp_dir();
    let python = python_without_torch();
    let db = tmp.path().join("db.jsonl");
    edgeprof()
        .args(["costmodel", "profile", "--engine", "pytorch", "--python"])
        .arg(&python)
        .args(["--model", "shufflenet_v2_x0_5", "--input", "3x32x32"])
        .args([
            "--threads",
            "1",
            "--rounds",
            "1",
            "--layer-runs",
            "5",
            "--db",
        ])
        .arg(&db)
        .env("PYTHONPATH", fake_framework_dir())
        .env("EDGEPROF_FAKE_PARAMS", SHUFFLENET_PARAMETERS.to_string())
        .assert()
        .success();
    let profile: serde_json::Value = serde_json::from_str(read(&db).trim()).unwrap_or_default();
    assert_eq!(profile["engine"], "pytorch", "{profile}");
    let groups = profile["groups"].as_array().cloned().unwrap_or_default();
    // The time of the groups holding any of `members`.
    let ms_of = |members: &[&str]| -> f64 {
        groups
            .iter()
            .filter(|g| {
                g["label"]
                    .as_str()
                    .is_some_and(|l| l.split('+').any(|m| members.contains(&m)))
            })
            .map(|g| g["seconds"].as_f64().unwrap_or(0.0) * 1e3)
            .sum()
    };
    // conv1's convolution, batch norm and ReLU (0.4 + 0.1 + 0.1 ms) are one group.
    assert!(ms_of(&["conv1.0"]) >= 0.6, "{profile}");
    assert_eq!(ms_of(&["conv1.0"]), ms_of(&["conv1.0", "conv1.2"]));
    assert!(ms_of(&["maxpool"]) >= 0.2, "{profile}");
    // The unit's own 0.3 ms lands on its concatenation and shuffle, not on its branches,
    // whose 13 modules keep their own 0.1 ms each.
    assert!(
        ms_of(&["stage2.0.cat", "stage2.0.shuffle"]) >= 0.3,
        "{profile}"
    );
    let branches: Vec<String> = (0..5)
        .map(|i| format!("stage2.0.branch1.{i}"))
        .chain((0..8).map(|i| format!("stage2.0.branch2.{i}")))
        .collect();
    let branches: Vec<&str> = branches.iter().map(String::as_str).collect();
    let branch_ms = ms_of(&branches);
    assert!(branch_ms >= 1.3, "{branch_ms}: {profile}");
}

/// A placement unit served by onnxruntime: on this machine its CPU provider stands in for the
/// GPU's CUDA provider (the same unit program, profile, copy benchmark and split run; only the
/// device differs), and a CUDA unit is refused with the reason.
#[test]
fn a_split_plan_hands_blocks_to_an_onnxruntime_unit_and_matches_the_whole_model() {
    let data = onnxruntime_set_up();
    let cpu = common::allowed_cpus().first().copied().unwrap_or(0);
    let units = format!("host={cpu},ort=onnxruntime:cpu@{cpu}");
    let place = |units: &str| {
        let mut command = edgeprof();
        command.env("EDGEPROF_DATA_DIR", &data).args([
            "place",
            "--model",
            "mobilenet_v2",
            "--input",
            "3x32x32",
            "--classes",
            "10",
            "--units",
            units,
            "--blocks",
            "4",
            "--runs",
            "3",
            "--assign",
            "0,1,1,0",
            "--json",
        ]);
        command
            .timeout(std::time::Duration::from_secs(600))
            .assert()
    };
    let out = place(&units).success().get_output().stdout.clone();
    let report: serde_json::Value = match serde_json::from_slice(&out) {
        Ok(v) => v,
        Err(e) => panic!("place --json: {e}"),
    };
    assert_eq!(report["units"][1]["engine"]["device"], "cpu", "{report}");
    for s in report["stages"].as_array().into_iter().flatten() {
        let ms: Vec<f64> = s["ms"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_f64())
            .collect();
        assert!(ms.len() == 2 && ms.iter().all(|&m| m > 0.0), "{s}");
    }
    // Both directions of the copy to and from the onnxruntime unit were measured and fitted.
    for (a, b) in [(0, 1), (1, 0)] {
        let link = &report["links"]["links"][a][b];
        let one_mib = link["alpha_ms"].as_f64().unwrap_or(-1.0);
        assert!(one_mib >= 0.0, "{link}");
    }
    let measured = &report["measured"];
    assert_eq!(
        measured["segments"].as_array().map(Vec::len),
        Some(3),
        "{measured}"
    );
    assert!(
        measured["max_relative_difference"]
            .as_f64()
            .is_some_and(|d| d < 1e-4),
        "{measured}"
    );
    assert!(measured["median_ms"].as_f64().is_some_and(|m| m > 0.0));
    // An ONNX file's blocks are its own sub-models, which the onnxruntime unit loads as well.
    let tmp = temp_dir();
    let file = tmp.path().join("squeezenet.onnx");
    common::export_model("squeezenet1_1", "3x32x32", &file);
    let mut command = edgeprof();
    command
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["place", "--model"])
        .arg(&file)
        .args([
            "--units", &units, "--blocks", "3", "--runs", "1", "--assign", "1,0,1", "--json",
        ]);
    let out = command
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let report: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
    let difference = report["measured"]["max_relative_difference"].as_f64();
    assert!(difference.is_some_and(|d| d < 1e-4), "{report}");
    // A CUDA unit where onnxruntime has no CUDA provider: refused with the reason.
    let failed = place(&format!("host={cpu},gpu=onnxruntime:cuda:0")).failure();
    let said = String::from_utf8_lossy(&failed.get_output().stderr).into_owned();
    assert!(
        said.contains("unit gpu: this onnxruntime")
            && said.contains("has no CUDA execution provider")
            && said.contains("install onnxruntime-gpu"),
        "{said}"
    );
}

/// An output file of a run, as float32 values.
fn output_values(dir: &Path, id: &str) -> Vec<f32> {
    let name = format!("{}.f32", id.replace(['/', ':', ' '], "_"));
    let bytes = std::fs::read(dir.join("outputs").join(&name))
        .unwrap_or_else(|e| panic!("cannot read output {name}: {e}"));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn tract_and_onnxruntime_run_one_int8_file_and_agree_within_the_stated_tolerance() {
    let data = onnxruntime_set_up();
    let tmp = temp_dir();
    let config = tmp.path().join("int8.toml");
    write(
        &config,
        "name = \"int8\"\n[matrix]\nengines = [\"tract\", \"onnxruntime\"]\n\
         models = [\"mobilenet_v2\"]\ninputs = [\"3x64x64\"]\nbatch = [2]\nthreads = [1]\n\
         classes = 10\nprecision = [\"fp32\", \"int8\"]\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\ninput_data = \"seeded\"\n",
    );
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out)
        .env("EDGEPROF_DATA_DIR", &data)
        .assert()
        .success();
    let report = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let dir = only_entry(&out);
    let ok: Vec<String> = records(&dir)
        .iter()
        .filter(|r| r["ok"] == true)
        .map(|r| r["condition"]["id"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(ok.len(), 4, "{report}");
    // One quantized file, made once by onnxruntime's tool, beside the export in the cache.
    let made: Vec<PathBuf> = std::fs::read_dir(data.join("cache/models"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        made.iter().any(|p| p.to_string_lossy().ends_with(
            "mobilenet_v2-3x64x64-b2-c10-seed20240601.int8-static-qdq-cal8-seed20240601.onnx"
        )),
        "{made:?}"
    );
    let id = |engine: &str, precision: &str| {
        format!("{engine}/mobilenet_v2/3x64x64/b2/t1/cpu{precision}")
    };
    let fp32 = output_values(&dir, &id("onnxruntime", ""));
    let tract = output_values(&dir, &id("tract", "/int8"));
    let ort = output_values(&dir, &id("onnxruntime", "/int8"));
    assert_eq!((tract.len(), ort.len()), (20, 20));
    // The stated tolerance (docs/precision.md): the two engines' answers on the same int8 file
    // differ by no more than 10 % of the fp32 output's range (each requantizes with its own
    // rounding, layer after layer), and point the same way (cosine at least 0.99).
    let range = fp32.iter().copied().fold(f32::MIN, f32::max)
        - fp32.iter().copied().fold(f32::MAX, f32::min);
    let worst = tract
        .iter()
        .zip(&ort)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= 0.10 * range, "{worst} of a range of {range}");
    let dot: f32 = tract.iter().zip(&ort).map(|(a, b)| a * b).sum();
    let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>().sqrt();
    let cosine = dot / (norm(&tract) * norm(&ort));
    assert!(cosine >= 0.99, "cosine {cosine}");
    // And each int8 condition's cost against its fp32 twin is in the summary.
    let summary: serde_json::Value =
        serde_json::from_str(&read(&dir.join("summary.json"))).unwrap_or_default();
    let costed: Vec<&str> = summary["accuracy"]["compared"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["condition"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(costed, [id("tract", "/int8"), id("onnxruntime", "/int8")]);
    // The HTML report shows the same cost, a row per int8 condition.
    edgeprof()
        .arg("report")
        .arg(&dir)
        .arg("--html")
        .assert()
        .success();
    let html = read(&dir.join("report.html"));
    let section = html
        .split("<h2 id=\"accuracy\">")
        .nth(1)
        .and_then(|s| s.split("</table>").next())
        .unwrap_or_default();
    assert_eq!(section.matches("<tr><td>").count(), 2, "{section}");
    assert!(section.contains(&id("tract", "/int8")), "{section}");
}

#[test]
fn pytorch_runs_fp16_and_bf16_under_autocast_and_int8_quantized_with_their_accuracy() {
    let data = common::framework_set_up("pytorch");
    let tmp = temp_dir();
    let config = tmp.path().join("torch.toml");
    write(
        &config,
        "name = \"torch\"\n[matrix]\nengines = [\"pytorch\"]\nmodels = [\"mobilenet_v2\"]\n\
         inputs = [\"3x32x32\"]\nbatch = [4]\nthreads = [1]\nclasses = 10\n\
         precision = [\"fp32\", \"fp16\", \"bf16\", \"int8\"]\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n",
    );
    let out = tmp.path().join("results");
    let assert = run_command(&config, &out)
        .env("EDGEPROF_DATA_DIR", &data)
        .assert()
        .success();
    let report = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let dir = only_entry(&out);
    let runs = records(&dir);
    let note = |precision: &str| {
        note_of(
            &runs,
            &format!("pytorch/mobilenet_v2/3x32x32/b4/t1/cpu{precision}"),
            &report,
        )
    };
    assert!(
        note("/fp16").ends_with(", fp16 autocast"),
        "{}",
        note("/fp16")
    );
    assert!(
        note("/bf16").ends_with(", bf16 autocast"),
        "{}",
        note("/bf16")
    );
    assert!(
        note("/int8").contains("int8 (FX static quantization"),
        "{}",
        note("/int8")
    );
    // Each lower precision moves the outputs a little, not wholesale.
    let (summary, compared) = accuracy_of(&dir);
    assert_eq!(compared.len(), 3, "{summary}");
    for c in &compared {
        let cosine = c["cosine"].as_f64().unwrap_or(0.0);
        assert!(cosine > 0.9, "{c}");
    }
}

/// What the worker of condition `id` said about how it ran (it must have run: else the
/// sweep's `report` is the failure).
fn note_of(runs: &[serde_json::Value], id: &str, report: &str) -> String {
    runs.iter()
        .find(|r| r["condition"]["id"] == id && r["ok"] == true)
        .and_then(|r| r["run"]["note"].as_str())
        .unwrap_or_else(|| panic!("{id} did not run: {report}"))
        .to_string()
}

/// A results directory's summary.json and its accuracy comparisons.
fn accuracy_of(dir: &Path) -> (serde_json::Value, Vec<serde_json::Value>) {
    let summary: serde_json::Value =
        serde_json::from_str(&read(&dir.join("summary.json"))).unwrap_or_default();
    let compared = summary["accuracy"]["compared"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (summary, compared)
}

/// Runs the config `text` (named by its `name`) with the data folder `data`, which must
/// succeed, into a folder of `tmp`: its results directory and its report.
fn swept(tmp: &Path, data: &Path, text: &str) -> (PathBuf, String) {
    let name = text
        .lines()
        .next()
        .and_then(|l| l.split('"').nth(1))
        .unwrap_or("sweep");
    let config = tmp.join(format!("{name}.toml"));
    write(&config, text);
    let out = tmp.join(name);
    let assert = run_command(&config, &out)
        .env("EDGEPROF_DATA_DIR", data)
        .assert()
        .success();
    (
        only_entry(&out),
        String::from_utf8_lossy(&assert.get_output().stdout).into_owned(),
    )
}

/// With the sample photographs set up, every engine of a run is fed the same pictures (tract
/// through the input file too), int8 is calibrated on the pictures after them, and the record,
/// the accuracy table and summary.json say which pictures they were; `input_data = "seeded"`
/// goes back to seeded values and says so.
#[test]
fn the_sample_photographs_feed_every_engine_and_the_accuracy_says_so() {
    let data = onnxruntime_set_up();
    common::framework_set_up("images");
    let tmp = temp_dir();
    let sweep = |input_data: &str| {
        swept(
            tmp.path(),
            &data,
            &format!(
                "name = \"{input_data}\"\n[matrix]\nengines = [\"tract\", \"onnxruntime\"]\n\
                 models = [\"resnet18\"]\ninputs = [\"3x64x64\"]\nbatch = [2]\nthreads = [1]\n\
                 classes = 10\nprecision = [\"fp32\", \"int8\"]\n\
                 [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n\
                 input_data = \"{input_data}\"\n"
            ),
        )
    };
    let (dir, report) = sweep("images");
    let pictures = "2 photographs (";
    // Every record names the pictures; the fp32 engines agreed on them (the run checks
    // outputs and succeeded).
    for r in records(&dir) {
        let inputs = r["run"]["inputs"].as_str().unwrap_or("");
        assert!(
            inputs.starts_with(pictures) && inputs.contains("scikit-image 0.24.0"),
            "{}: {inputs}",
            r["condition"]["id"]
        );
    }
    assert!(
        report.contains("its fp32 twin's (on 2 photographs ("),
        "{report}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&read(&dir.join("summary.json"))).unwrap_or_default();
    assert!(
        summary["accuracy"]["inputs"]
            .as_str()
            .is_some_and(|s| s.starts_with(pictures)),
        "{}",
        summary["accuracy"]
    );
    let compared = summary["accuracy"]["compared"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(compared.len(), 2, "{report}");
    assert!(compared.iter().all(|a| a["cosine"].as_f64() > Some(0.9)));
    // The int8 file was calibrated on the photographs.
    let made: Vec<String> = std::fs::read_dir(data.join("cache/models"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        made.iter()
            .any(|n| n
                .starts_with("resnet18-3x64x64-b2-c10-seed20240601.int8-static-qdq-cal8-images")),
        "{made:?}"
    );
    let (dir, _) = sweep("seeded");
    let summary: serde_json::Value =
        serde_json::from_str(&read(&dir.join("summary.json"))).unwrap_or_default();
    assert_eq!(
        summary["accuracy"]["inputs"],
        "seeded synthetic values, uniform in [-1, 1) (seed 20240601)"
    );
}

/// TensorFlow runs fp16 and bf16 under Keras's mixed precision policies, and TensorFlow Lite
/// runs the float16 and full-integer int8 files TensorFlow's converter makes (int8 calibrated
/// on the batches every int8 conversion uses), each with its accuracy against fp32.
#[test]
fn tensorflow_and_tflite_run_their_lower_precisions_with_their_accuracy() {
    common::framework_set_up("tensorflow");
    let data = common::framework_set_up("tflite");
    let tmp = temp_dir();
    let (dir, report) = swept(
        tmp.path(),
        &data,
        "name = \"tf\"\n[matrix]\nengines = [\"tensorflow\", \"tflite\"]\n\
         models = [\"resnet18\"]\ninputs = [\"3x32x32\"]\nbatch = [2]\nthreads = [1]\n\
         classes = 10\nprecision = [\"fp32\", \"fp16\", \"bf16\", \"int8\"]\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\n",
    );
    let runs = records(&dir);
    let note = |engine: &str, precision: &str| {
        note_of(
            &runs,
            &format!("{engine}/resnet18/3x32x32/b2/t1/cpu{precision}"),
            &report,
        )
    };
    assert!(
        note("tensorflow", "/fp16").ends_with("Keras mixed precision mixed_float16"),
        "{}",
        note("tensorflow", "/fp16")
    );
    assert!(
        note("tensorflow", "/bf16").ends_with("Keras mixed precision mixed_bfloat16"),
        "{}",
        note("tensorflow", "/bf16")
    );
    assert!(
        note("tflite", "/fp16")
            .ends_with("to float16 weights (post-training float16 quantization)"),
        "{}",
        note("tflite", "/fp16")
    );
    assert!(
        note("tflite", "/int8")
            .ends_with("to full-integer int8 (8 calibration batches; float32 inputs and outputs)"),
        "{}",
        note("tflite", "/int8")
    );
    // tensorflow int8 and tflite bf16 are skipped with their reasons.
    assert!(
        report.contains(
            "TensorFlow runs int8 through TensorFlow Lite's conversion: the tflite engine"
        ),
        "{report}"
    );
    assert!(
        report.contains("TensorFlow Lite's converter makes float16 and int8 models, not bf16"),
        "{report}"
    );
    let (_, compared) = accuracy_of(&dir);
    assert_eq!(compared.len(), 4, "{report}");
    for a in &compared {
        assert!(a["cosine"].as_f64() > Some(0.9), "{a}");
    }
}

/// A sweep's int8 layer profiles teach the cost model int8 apart from fp32: `costmodel import`
/// keeps one profile per precision, with the quantization nodes counted to their layers.
#[test]
fn a_sweeps_int8_layer_times_become_int8_profiles() {
    let data = onnxruntime_set_up();
    let tmp = temp_dir();
    let (dir, report) = swept(
        tmp.path(),
        &data,
        "name = \"layers\"\n[matrix]\nengines = [\"tract\"]\nmodels = [\"mobilenet_v2\"]\n\
         inputs = [\"3x32x32\"]\nthreads = [1]\nprecision = [\"fp32\", \"int8\"]\n\
         [measure]\nwarmup = 1\niterations = 3\nrepeats = 1\nlayer_runs = 2\n",
    );
    let db = tmp.path().join("db.jsonl");
    let assert = edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["costmodel", "import"])
        .arg(&dir)
        .arg("--db")
        .arg(&db)
        .assert()
        .success();
    let out = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(out.contains("2 profile(s) added"), "{out}\n{report}");
    let profiles: Vec<serde_json::Value> = read(&db)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|p: &serde_json::Value| p.get("groups").is_some())
        .collect();
    let layers_ms = |precision: Option<&str>| -> f64 {
        profiles
            .iter()
            .find(|p| p["precision"].as_str() == precision)
            .and_then(|p| p["groups"].as_array())
            .map(|g| g.iter().filter_map(|g| g["seconds"].as_f64()).sum::<f64>() * 1e3)
            .unwrap_or(0.0)
    };
    // fp32 is written without a precision (as before); int8 says so; both have layer times.
    assert!(layers_ms(None) > 0.0, "{profiles:?}");
    assert!(layers_ms(Some("int8")) > 0.0, "{profiles:?}");
}

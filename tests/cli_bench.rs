//! `edgeprof bench` through the binary: zoo models, ONNX files, broken files.

mod common;

use common::*;
use predicates::prelude::*;

#[test]
fn bench_zoo_model_prints_init_first_inference_and_statistics() {
    let assert = edgeprof()
        .args([
            "bench",
            "--engine",
            "tract",
            "--model",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "--threads",
            "2",
            "--warmup",
            "2",
            "--iterations",
            "5",
        ])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    for needle in [
        "init (load + optimise)",
        "first inference",
        "mean",
        "median",
        "std",
        "p90",
        "p99",
        "min",
        "max",
        "2 thread(s)",
        "inferences/s",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
}

#[test]
fn bench_json_has_every_sample_and_a_layer_profile() {
    let out = edgeprof()
        .args([
            "bench",
            "--model",
            "resnet34",
            "--input",
            "3x32x32",
            "--batch",
            "2",
            "--threads",
            "1",
            "--warmup",
            "1",
            "--iterations",
            "4",
            "--repeats",
            "2",
            "--profile",
            "--profile-runs",
            "2",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let report: serde_json::Value = match serde_json::from_slice(&out) {
        Ok(v) => v,
        Err(e) => panic!("no JSON: {e}"),
    };
    assert_eq!(report["samples_ms"].as_array().map(Vec::len), Some(8));
    assert_eq!(report["latency"]["samples"], 8);
    assert_eq!(report["repeats"].as_array().map(Vec::len), Some(2));
    assert_eq!(report["repeat_summary"]["repeats"], 2);
    assert!(report["outliers"].is_array() && report["cv"].is_f64());
    assert_eq!(report["input_shape"], serde_json::json!([2, 3, 32, 32]));
    let mean = report["latency"]["mean_ms"].as_f64().unwrap_or(0.0);
    let ips = report["inferences_per_s"].as_f64().unwrap_or(0.0);
    assert!((ips * mean / 1e3 - 1.0).abs() < 1e-9);
    assert!((report["images_per_s"].as_f64().unwrap_or(0.0) - 2.0 * ips).abs() < 1e-6);
    let Some(profile) = report["profile"].as_array() else {
        panic!("no profile")
    };
    let mapped: Vec<&str> = profile
        .iter()
        .filter(|l| l["mapped"] == true)
        .filter_map(|l| l["layer"].as_str())
        .collect();
    assert!(mapped.contains(&"fc"), "{mapped:?}");
    assert!(
        mapped.iter().any(|l| l.starts_with("layer4.")),
        "{mapped:?}"
    );
}

#[test]
fn bench_runs_an_exported_onnx_file_and_a_dynamic_one_with_input() {
    let dir = temp_dir();
    let file = dir.path().join("mnv2.onnx");
    edgeprof()
        .args([
            "models",
            "export",
            "mobilenet_v2",
            "--input",
            "3x32x32",
            "-o",
        ])
        .arg(&file)
        .assert()
        .success();
    let path = file.to_string_lossy().into_owned();
    edgeprof()
        .args([
            "bench",
            "--model",
            &path,
            "--warmup",
            "0",
            "--iterations",
            "3",
            "--profile",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("1×3×32×32").and(predicate::str::contains("features.")));
    edgeprof()
        .args([
            "bench",
            "--model",
            &fixture("dynamic_input.onnx"),
            "--input",
            "3x40x32",
            "--batch",
            "2",
            "--iterations",
            "2",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("2×3×40×32"));
}

#[test]
fn broken_or_unreadable_onnx_files_are_exit_code_2() {
    for (file, needle) in [
        ("not_protobuf.onnx", "is not an ONNX model"),
        ("empty.onnx", "holds no graph"),
        ("no_graph.onnx", "holds no graph"),
        ("truncated.onnx", "is not an ONNX model"),
        ("dangling_input.onnx", "produced by no node"),
        (
            "dynamic_input.onnx",
            "input x has open dimensions ([N, 3, H, W]): give them with --input x=DIMS",
        ),
    ] {
        assert_bad_input(
            &["bench", "--model", &fixture(file), "--iterations", "1"],
            needle,
        );
    }
    assert_bad_input(
        &["bench", "--model", "missing/model.onnx"],
        "cannot read ONNX file",
    );
    let dir = env!("CARGO_MANIFEST_DIR");
    assert_bad_input(
        &["bench", "--model", &format!("{dir}/tests/fixtures/onnx/")],
        "cannot read ONNX file",
    );
}

/// 0 threads means every available core, as in configs.
#[test]
fn zero_threads_means_every_available_core() {
    let v = common::json_of(&[
        "bench",
        "--model",
        "shufflenet_v2_x0_5",
        "--input",
        "3x32x32",
        "--threads",
        "0",
        "--warmup",
        "0",
        "--iterations",
        "1",
        "--json",
    ]);
    let default = common::json_of(&[
        "bench",
        "--model",
        "shufflenet_v2_x0_5",
        "--input",
        "3x32x32",
        "--warmup",
        "0",
        "--iterations",
        "1",
        "--json",
    ]);
    assert!(v["threads"].as_u64().is_some_and(|n| n >= 1), "{v}");
    assert_eq!(v["threads"], default["threads"], "{v}");
}

#[test]
fn bench_rejects_bad_arguments() {
    assert_bad_input(&["bench", "--model", "resnet99"], "unknown model");
    assert_bad_input(
        &["bench", "--model", "resnet50", "--input", "3x31x64"],
        "between 32 and",
    );
    assert_bad_input(
        &["bench", "--model", "resnet50", "--iterations", "0"],
        "--iterations",
    );
    assert_bad_input(
        &[
            "bench",
            "--model",
            &fixture("dynamic_input.onnx"),
            "--batch",
            "2",
        ],
        "input x has open dimensions ([N, 3, H, W]): give them with --input x=DIMS",
    );
    // Bounded as a config's threads are.
    assert_bad_input(
        &["bench", "--model", "resnet50", "--threads", "5000"],
        "must be a whole number from 0 to 1024",
    );
}

/// More threads than cores run, with a warning that says what such times tell of.
#[test]
fn more_threads_than_cores_are_run_and_warned_of() {
    let cores = edgeprof::collect::device::available_cores();
    let threads = (cores + 1).to_string();
    let out = edgeprof()
        .args([
            "bench",
            "--model",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "--warmup",
            "0",
            "--iterations",
            "1",
            "--threads",
            &threads,
        ])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!(
            "warning: {threads} threads are more than the {cores} cores here"
        )),
        "{stderr}"
    );
}

#[test]
fn an_operator_tract_lacks_fails_the_run_with_a_reason() {
    let assert = edgeprof()
        .args([
            "bench",
            "--model",
            &fixture("unknown_op.onnx"),
            "--iterations",
            "1",
        ])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains(
            "tract does not implement the operator NoSuchOp (com.example): export the model \
             without custom operators, or run it where they are implemented"
        ),
        "{stderr}"
    );
}

#[test]
fn candle_benches_zoo_models_and_says_what_it_cannot_run() {
    let v = json_of(&[
        "bench",
        "--engine",
        "candle",
        "--model",
        "mobilenet_v2",
        "--input",
        "3x32x32",
        "--threads",
        "1",
        "--warmup",
        "1",
        "--iterations",
        "3",
        "--json",
    ]);
    assert_eq!(v["engine"], "candle");
    assert_eq!(v["threads"], 1);
    assert_eq!(v["samples_ms"].as_array().map(Vec::len), Some(3));
    // In its own worker process too.
    let v = json_of(&[
        "bench",
        "--engine",
        "candle",
        "--model",
        "shufflenet_v2_x0_5",
        "--input",
        "3x32x32",
        "--warmup",
        "1",
        "--iterations",
        "2",
        "--isolated",
        "--json",
    ]);
    assert_eq!(v["engine"], "candle");
    assert_bad_input(
        &[
            "bench",
            "--engine",
            "candle",
            "--model",
            &fixture("dynamic_input.onnx"),
            "--input",
            "3x32x32",
        ],
        "candle runs the zoo's models",
    );
    assert_bad_input(
        &[
            "bench",
            "--engine",
            "candle",
            "--model",
            "resnet34",
            "--input",
            "3x32x32",
            "--profile",
        ],
        "--profile needs tract's node profile",
    );
}

/// An ONNX file in a worker process is fed its inputs by name from `.npy` files and its outputs
/// come back: checked against the expected ones and saved, the same seeded values as in this
/// process when no values are given.
#[test]
fn a_file_in_a_worker_is_fed_by_name_and_its_outputs_come_back(
) -> Result<(), Box<dyn std::error::Error>> {
    use edgeprof::models::npy;
    const FLOAT: i32 = 1;
    let tmp = temp_dir();
    let a = [0.5, -1.0, 2.0, 3.25];
    let b = [1.5, 1.0, -2.0, 0.25];
    let sum: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    npy::write_file(&tmp.path().join("a.npy"), FLOAT, &[1, 4], &a)?;
    npy::write_file(&tmp.path().join("b.npy"), FLOAT, &[1, 4], &b)?;
    npy::write_file(&tmp.path().join("sum.npy"), FLOAT, &[1, 4], &sum)?;
    npy::write_file(&tmp.path().join("wrong.npy"), FLOAT, &[1, 4], &a)?;
    let bench = |expected: &str, saved: &str, isolated: bool, given: bool| {
        let mut cmd = edgeprof();
        cmd.args(["bench", "--model", &fixture("two_inputs.onnx")])
            .args(["--warmup", "0", "--iterations", "1"]);
        if isolated {
            cmd.arg("--isolated");
        }
        if given {
            cmd.arg("--input")
                .arg(format!("a=@{}", tmp.path().join("a.npy").display()))
                .arg("--input")
                .arg(format!("b=@{}", tmp.path().join("b.npy").display()));
        }
        if !expected.is_empty() {
            cmd.arg("--expect").arg(tmp.path().join(expected));
        }
        cmd.arg("--save-outputs").arg(tmp.path().join(saved));
        cmd.assert()
    };
    let out = bench("sum.npy", "worker", true, true).success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("1 of 1 agree with the expected"), "{text}");
    let saved = npy::read_file(&tmp.path().join("worker/output_0.npy"))?;
    assert_eq!((saved.shape, saved.values), (vec![1, 4], sum));
    let failed = bench("wrong.npy", "wrong", true, true).code(1);
    let err = String::from_utf8_lossy(&failed.get_output().stderr).into_owned();
    assert!(err.contains("output 0 differs from the expected"), "{err}");
    // Seeded inputs: the worker is fed what this process feeds (input k with seed + k).
    bench("", "seeded-here", false, false).success();
    bench("", "seeded-worker", true, false).success();
    let here = std::fs::read(tmp.path().join("seeded-here/output_0.npy"))?;
    let there = std::fs::read(tmp.path().join("seeded-worker/output_0.npy"))?;
    assert_eq!(here, there);
    Ok(())
}

/// A file fed by name is profiled node by node too, each node under its layer's name.
#[test]
fn a_file_fed_by_name_is_profiled_by_layer() {
    let v = json_of(&[
        "bench",
        "--model",
        &fixture("two_inputs.onnx"),
        "--input",
        "a=1x4",
        "--input",
        "b=1x4",
        "--iterations",
        "2",
        "--profile",
        "--profile-runs",
        "2",
        "--json",
    ]);
    let layers: Vec<(&str, bool)> = v["profile"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|l| Some((l["layer"].as_str()?, l["mapped"].as_bool()?)))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(layers, [("sum", true)], "{v}");
}

/// A file named .tflite that is no TensorFlow Lite model is refused before any framework starts,
/// saying what it is.
#[test]
fn a_tflite_name_on_another_file_is_refused_in_a_sentence() -> Result<(), std::io::Error> {
    let tmp = temp_dir();
    let renamed = tmp.path().join("model.tflite");
    std::fs::copy(fixture("two_inputs.onnx"), &renamed)?;
    let renamed = renamed.display().to_string();
    assert_bad_input(
        &["bench", "--engine", "tflite", "--model", &renamed],
        "model.tflite is not a TensorFlow Lite model (it lacks the TFL3 mark of one); it is an \
         ONNX file: run it on tract or onnxruntime",
    );
    Ok(())
}

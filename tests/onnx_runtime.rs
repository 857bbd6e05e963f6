//! Exported models against the ONNX reference tooling: `onnx.checker` with full_check, and
//! onnxruntime's outputs equal to tract's (relative tolerance 1e-4).
//!
//! Needs Python 3 with onnx, onnxruntime and numpy. The test uses `$EDGEPROF_TEST_PYTHON` when
//! set; otherwise it creates (once) a virtual environment in `target/test-venv` and installs them
//! from PyPI, so `cargo test` works on a fresh machine that can reach PyPI.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process;

/// The Python interpreter with onnx and onnxruntime, set up on first use.
fn python() -> &'static Path {
    onnx_python()
}

/// Exports each (model, input) with reference data and runs the checker script on all of them.
fn export_and_check(cases: &[(&str, &str)]) {
    let dir = temp_dir();
    let mut script_args: Vec<PathBuf> = Vec::new();
    for (model, input) in cases {
        let stem = format!("{model}_{input}");
        let file = dir.path().join(format!("{stem}.onnx"));
        let data = dir.path().join(&stem);
        edgeprof()
            .args(["models", "export", model, "--input", input, "-o"])
            .arg(&file)
            .arg("--test-data")
            .arg(&data)
            .assert()
            .success();
        script_args.push(file);
        script_args.push(data);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/check_onnx.py");
    let out = process::Command::new(python())
        .arg(script)
        .args(&script_args)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("cannot run the checker: {e}"),
    };
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "check failed:\n{report}");
    assert_eq!(
        report.matches("MATCH").count() - report.matches("MISMATCH").count(),
        cases.len()
    );
}

#[test]
fn all_five_models_at_32x32_pass_the_checker_and_match_onnxruntime() {
    export_and_check(&[
        ("shufflenet_v2_x0_5", "3x32x32"),
        ("mobilenet_v2", "3x32x32"),
        ("resnet34", "3x32x32"),
        ("resnet50", "3x32x32"),
        ("vgg19", "3x32x32"),
    ]);
}

#[test]
fn the_edge_models_and_widths_pass_the_checker_and_match_onnxruntime() {
    // SqueezeNet at 66×66 pools a 32×32 map in ceil mode (one window more than floor mode);
    // MobileNetV3 and EfficientNet bring hard-swish, SiLU and squeeze-and-excitation; the other
    // widths of ShuffleNetV2 and MNASNet (channels rounded to eighths) each once.
    export_and_check(&[
        ("resnet18", "3x32x32"),
        ("squeezenet1_1", "3x66x66"),
        ("mnasnet1_0", "3x32x32"),
        ("mobilenet_v3_small", "3x64x64"),
        ("mobilenet_v3_large", "3x32x32"),
        ("efficientnet_b0", "3x48x48"),
        ("shufflenet_v2_x1_0", "3x32x32"),
        ("shufflenet_v2_x1_5", "3x32x32"),
        ("shufflenet_v2_x2_0", "3x32x32"),
        ("mnasnet0_5", "3x32x32"),
        ("mnasnet0_75", "3x32x32"),
        ("mnasnet1_3", "3x32x32"),
    ]);
}

#[test]
fn full_size_and_overlapping_adaptive_pooling_match_onnxruntime() {
    // 224×224 at full size; VGG-19 at 128×128 pools a 4×4 map to 7×7 with overlapping windows,
    // and at 80×112 a 2×3 map, neither a plain pooling.
    export_and_check(&[
        ("mobilenet_v2", "3x224x224"),
        ("vgg19", "3x128x128"),
        ("vgg19", "3x80x112"),
    ]);
}

/// The cost model learns from onnxruntime's own op profiler, run in its harness: every layer
/// group of the zoo's export gets onnxruntime's time, and fits, predictions and refusals name
/// the engine.
#[test]
fn costmodel_profiles_onnxruntime_through_its_op_profiler() {
    let tmp = temp_dir();
    let db = tmp.path().join("db.jsonl");
    let db = db.to_string_lossy().into_owned();
    let py = python().to_string_lossy().into_owned();
    edgeprof()
        .args([
            "costmodel",
            "profile",
            "--engine",
            "onnxruntime",
            "--python",
            &py,
        ])
        .args([
            "--model",
            "mobilenet_v2",
            "--model",
            "squeezenet1_1",
            "--probes",
            "2",
        ])
        .args(["--input", "3x64x64", "--threads", "1", "--rounds", "1"])
        .args(["--layer-runs", "5", "--db", &db])
        .assert()
        .success();
    let text = read(Path::new(&db));
    let profiles: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_default())
        .collect();
    assert_eq!(profiles.len(), 4, "{text}");
    for p in &profiles {
        assert_eq!(p["engine"], "onnxruntime", "{p}");
        let groups = p["groups"].as_array().cloned().unwrap_or_default();
        let summed: f64 = groups
            .iter()
            .map(|g| g["seconds"].as_f64().unwrap_or(0.0) * 1e3)
            .sum();
        let latency = p["latency_ms"].as_f64().unwrap_or(0.0);
        // The op profiler's nodes map onto the groups: their sum is the latency's order
        // (onnxruntime's layout conversions stay outside; its profiler adds a microsecond or
        // two to every node, which doubles the tiniest networks' sum).
        assert!(
            summed > 0.5 * latency && summed < 3.0 * latency,
            "{summed} ms of layers against {latency} ms: {p}"
        );
    }
    let fit = edgeprof()
        .args(["costmodel", "fit", "--engine", "onnxruntime", "--db", &db])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&fit.get_output().stdout).into_owned();
    assert!(
        out.contains("onnxruntime on 1 thread(s), from 2 model(s) and 2 probe(s)"),
        "{out}"
    );
    let v = json_of(&[
        "costmodel",
        "predict",
        "resnet18",
        "--engine",
        "onnxruntime",
        "--input",
        "3x32x32",
        "--db",
        &db,
        "--json",
    ]);
    assert!(v["predicted_ms"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
    assert_eq!(v["engine"], "onnxruntime");
    assert_bad_input(
        &[
            "costmodel",
            "predict",
            "resnet18",
            "--db",
            &db,
            "--no-profile",
        ],
        "no tract profile on 1 thread(s) in the database",
    );
    assert_bad_input(
        &[
            "costmodel",
            "profile",
            "--engine",
            "tensorflow",
            "--db",
            &db,
        ],
        "invalid value 'tensorflow'",
    );
}

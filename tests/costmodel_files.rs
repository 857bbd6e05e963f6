//! The cost model on ONNX files it never saw: every file held out at once over stored profiles
//! (the 17 zoo models, 80 operator-template probes and 60 graph probes, and ten real models from
//! PyPI wheels, all profiled on tract within the hour on the 2-core x86 development machine), and
//! `costmodel predict` and `roofline layers` on files made of operators the zoo lacks.

mod common;

use common::*;

/// The stored profiles, with the real models' paths (kept relative to the test cache, as
/// `test-models/PACKAGE-VERSION/…`) pointed at the cache they are fetched into: the cost model
/// reads each file again to cost its nodes.
fn stored(dir: &std::path::Path) -> String {
    let fixture = format!(
        "{}/tests/fixtures/costmodel/tract-2core-x86-files.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let cache = format!("\"model\":\"{}/", real_models().display());
    let db = dir.join("profiles.jsonl");
    write(
        &db,
        &read(std::path::Path::new(&fixture)).replace("\"model\":\"test-models/", &cache),
    );
    db.to_string_lossy().into_owned()
}

/// The real models, none of them in the fit, predicted from the zoo and the probes. The goal
/// is within ±10 % for 80 % of the (model, threads) pairs and within ±25 % for all; these
/// profiles reach 9 and 16 of 20 (the misses are in docs/commands/costmodel.md), and the test
/// fails if a change loses any of them.
#[test]
fn real_models_held_out_are_predicted_from_the_zoo_and_the_probes() {
    let tmp = temp_dir();
    let db = stored(tmp.path());
    let v = json_of(&["costmodel", "eval", "--files", "--db", &db, "--json"]);
    assert_eq!(v["pairs"], 20, "{v}");
    assert_eq!(v["measured_wider_than_3_pct"], 0, "{v}");
    let within = |k: &str| v[k].as_u64().unwrap_or(0);
    assert!(within("within_10_pct") >= 9, "{v}");
    assert!(within("within_25_pct") >= 16, "{v}");
    for h in v["held_out"].as_array().cloned().unwrap_or_default() {
        assert_eq!(h["fallbacks"], 0, "{h}");
    }
    // The text says what was held out.
    let out = edgeprof()
        .args(["costmodel", "eval", "--files", "--db", &db])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains(
            "without any profile of any ONNX file (the zoo's models and the probes only)"
        ),
        "{text}"
    );
}

/// A graph probe written as a file: convolutions, upsampling or transposed convolutions, or a
/// recurrent or attention part, which the zoo-vocabulary reader refused.
fn probe_file(dir: &std::path::Path, seed: u64) -> String {
    use edgeprof::tune::costmodel::graph_probe;
    let path = dir.join(format!("probe{seed}.onnx"));
    let bytes = edgeprof::models::onnx::encode(&graph_probe::build(seed));
    if let Err(e) = std::fs::write(&path, bytes) {
        panic!("{}: {e}", path.display());
    }
    path.to_string_lossy().into_owned()
}

#[test]
fn predict_takes_any_file_and_says_what_it_could_not_cost() {
    let tmp = temp_dir();
    let db = stored(tmp.path());
    // Seed 6 draws an LSTM; seed 3 a resize and a transposed convolution.
    for seed in [3, 6] {
        let file = probe_file(tmp.path(), seed);
        let v = json_of(&["costmodel", "predict", &file, "--db", &db, "--json"]);
        assert!(v["predicted_ms"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
        assert_eq!(v["nodes_costed"], v["nodes"], "{v}");
        assert_eq!(v["fallbacks"], 0, "{v}");
        assert_eq!(v["input"], "declared", "{v}");
    }
    // An operator nothing knows after the rest: predicted from the rest, and said.
    let mut proto = edgeprof::tune::costmodel::graph_probe::build(3);
    if let Some(g) = proto.graph.as_mut() {
        let last = g.output[0].name.clone();
        g.node.push(tract_onnx::pb::NodeProto {
            name: "odd".into(),
            op_type: "Frobnicate".into(),
            domain: "com.example".into(),
            input: vec![last],
            output: vec!["odd".into()],
            ..Default::default()
        });
        g.output[0].name = "odd".into();
    }
    let unknown = tmp.path().join("unknown.onnx");
    if let Err(e) = std::fs::write(&unknown, edgeprof::models::onnx::encode(&proto)) {
        panic!("{}: {e}", unknown.display());
    }
    let unknown = unknown.to_string_lossy().into_owned();
    let out = edgeprof()
        .args(["costmodel", "predict", &unknown, "--db", &db])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("nodes were costed; the others are not in the prediction"),
        "{text}"
    );
    // Inputs by name, as `models info` takes them; one that is not the file's is refused.
    let two = fixture("two_inputs.onnx");
    assert_bad_input(
        &[
            "costmodel",
            "predict",
            &two,
            "--input",
            "nosuch=1x3x8x8",
            "--db",
            &db,
        ],
        "nosuch",
    );
}

#[test]
fn roofline_layers_ranks_the_groups_of_a_file() {
    let tmp = temp_dir();
    let file = probe_file(tmp.path(), 3);
    let v = json_of(&[
        "roofline",
        "layers",
        &file,
        "--threads",
        "1",
        "--runs",
        "3",
        "--ceilings",
        &format!(
            "{}/tests/fixtures/ceilings-pi4.json",
            env!("CARGO_MANIFEST_DIR")
        ),
        "--json",
    ]);
    let layers = v["layers"].as_array().cloned().unwrap_or_default();
    assert!(layers.len() > 5, "{v}");
    // Points are named after the file's own nodes, the fused ones joined by `+`.
    assert!(
        layers.iter().any(|l| l["label"]
            .as_str()
            .is_some_and(|s| s.contains("_Conv+") || s.contains("_ConvTranspose"))),
        "{v}"
    );
    assert!(!v["ranking"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .is_empty());
    assert_bad_input(
        &["roofline", "layers", &file, "--batch", "2"],
        "is an ONNX file: its inputs, batch included, are given by --input NAME=DIMS",
    );
}

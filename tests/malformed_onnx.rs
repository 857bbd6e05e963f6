//! ONNX files no engine can run, and files that are no ONNX file at all: refused in one
//! sentence before an engine is asked to load them, and a load that does not end stopped.

mod common;

use common::*;
use prost::Message;
use tract_onnx::pb;

/// The zoo's mobilenet_v2 at 3x32x32 as an ONNX file, decoded.
fn mobilenet(dir: &std::path::Path) -> pb::ModelProto {
    let path = dir.join("mobilenet_v2.onnx");
    export_model("mobilenet_v2", "3x32x32", &path);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    match pb::ModelProto::decode(&bytes[..]) {
        Ok(p) => p,
        Err(e) => panic!("the export is no ONNX model: {e}"),
    }
}

/// Writes `proto` as `name` under `dir`; its path.
fn save(dir: &std::path::Path, name: &str, proto: &pb::ModelProto) -> String {
    let path = dir.join(name);
    if let Err(e) = std::fs::write(&path, edgeprof::models::onnx::encode(proto)) {
        panic!("{}: {e}", path.display());
    }
    path.to_string_lossy().into_owned()
}

/// A bench that must end by itself: a regression is a failure, not a hang.
fn bench(model: &str, extra: &[&str]) -> assert_cmd::assert::Assert {
    edgeprof()
        .args([
            "bench",
            "--model",
            model,
            "--iterations",
            "1",
            "--warmup",
            "0",
        ])
        .args(extra)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[test]
fn a_tile_whose_output_wraps_64_bits_is_refused_naming_the_node() {
    let tmp = temp_dir();
    let mut proto = mobilenet(tmp.path());
    let Some(g) = proto.graph.as_mut() else {
        panic!("the export holds no graph");
    };
    let last = g.output[0].name.clone();
    let reps = (1u64 << 32) as f64;
    g.initializer
        .push(edgeprof::models::onnx_graph::tensor_proto(
            "reps",
            pb::tensor_proto::DataType::Int64 as i32,
            &[2],
            &[reps, reps],
        ));
    g.node.push(pb::NodeProto {
        name: "big_tile".into(),
        op_type: "Tile".into(),
        input: vec![last, "reps".into()],
        output: vec!["tiled".into()],
        ..Default::default()
    });
    g.output[0] = pb::ValueInfoProto {
        name: "tiled".into(),
        ..Default::default()
    };
    let file = save(tmp.path(), "tile.onnx", &proto);
    let out = bench(&file, &[]).code(2);
    let text = stderr(&out);
    assert!(
        text.contains("node big_tile (Tile) cannot run: a tensor of shape"),
        "{text}"
    );
}

#[test]
fn a_min_of_five_operands_that_do_not_broadcast_is_refused_before_tract_loads_it() {
    let tmp = temp_dir();
    let mut proto = mobilenet(tmp.path());
    let Some(g) = proto.graph.as_mut() else {
        panic!("the export holds no graph");
    };
    let Some(bn) = g
        .node
        .iter_mut()
        .find(|n| n.op_type == "BatchNormalization")
    else {
        panic!("the export has no BatchNormalization");
    };
    bn.op_type = "Min".into();
    bn.attribute.clear();
    bn.name = "bn_as_min".into();
    let file = save(tmp.path(), "min.onnx", &proto);
    let out = bench(&file, &[]).code(2);
    let text = stderr(&out);
    assert!(
        text.contains("node bn_as_min (Min) cannot run: shapes 1x32x16x16 and 32 and 32 and 32 and 32 cannot be broadcast together"),
        "{text}"
    );
}

#[test]
fn a_load_past_its_time_limit_is_stopped_with_a_sentence() {
    let out = bench(
        "resnet18",
        &["--input", "3x64x64", "--load-timeout", "0.001"],
    )
    .code(1);
    let text = stderr(&out);
    assert!(
        text.contains("zoo model resnet18 did not load within 0.001 s (--load-timeout)"),
        "{text}"
    );
}

#[test]
fn an_onnx_name_on_a_device_is_refused_unread_at_a_given_input() {
    let tmp = temp_dir();
    let link = tmp.path().join("zero.onnx");
    if let Err(e) = std::os::unix::fs::symlink("/dev/zero", &link) {
        panic!("{}: {e}", link.display());
    }
    let link = link.to_string_lossy().into_owned();
    let out = bench(&link, &["--input", "3x32x32"]).code(2);
    let text = stderr(&out);
    assert!(text.contains("it is not a regular file"), "{text}");
}

#[test]
fn config_check_refuses_a_model_path_whose_file_is_no_onnx_model() {
    let tmp = temp_dir();
    write(&tmp.path().join("notes.onnx"), "not a model, a note\n");
    let config = tmp.path().join("edgeprof.toml");
    write(
        &config,
        "[matrix]\nengines = [\"tract\"]\nmodels = [\"notes.onnx\"]\n",
    );
    let out = edgeprof()
        .arg("config")
        .arg("check")
        .arg(&config)
        .assert()
        .code(2);
    let text = stderr(&out);
    assert!(text.contains("notes.onnx is not an ONNX model"), "{text}");
}

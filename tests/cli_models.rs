//! `edgeprof models …` through the binary: listing, per-layer costs, export, and bad input.

mod common;

use common::*;
use predicates::prelude::*;

#[test]
fn list_shows_the_zoo_with_torchvision_parameter_counts() {
    let listing = json_of(&["models", "list", "--json"]);
    let expected = [
        ("shufflenet_v2_x0_5", 1_366_792),
        ("mobilenet_v2", 3_504_872),
        ("resnet34", 21_797_672),
        ("resnet50", 25_557_032),
        ("vgg19", 143_667_240),
        ("resnet18", 11_689_512),
        ("squeezenet1_1", 1_235_496),
        ("mnasnet1_0", 4_383_312),
        ("mobilenet_v3_small", 2_542_856),
        ("mobilenet_v3_large", 5_483_032),
        ("efficientnet_b0", 5_288_548),
        ("shufflenet_v2_x1_0", 2_278_604),
        ("shufflenet_v2_x1_5", 3_503_624),
        ("shufflenet_v2_x2_0", 7_393_996),
        ("mnasnet0_5", 2_218_512),
        ("mnasnet0_75", 3_170_208),
        ("mnasnet1_3", 6_282_256),
    ];
    let Some(rows) = listing.as_array() else {
        panic!("not a list: {listing}")
    };
    assert_eq!(rows.len(), expected.len());
    for ((name, params), row) in expected.iter().zip(rows) {
        assert_eq!(row["name"], *name);
        assert_eq!(row["params"], *params);
    }
    edgeprof()
        .args(["models", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("25,557,032").and(predicate::str::contains("vgg19")));
}

#[test]
fn info_layers_sum_to_totals_and_scale_with_batch() {
    let one = json_of(&[
        "models",
        "info",
        "mobilenet_v2",
        "--input",
        "3x96x64",
        "--json",
    ]);
    let two = json_of(&[
        "models",
        "info",
        "mobilenet_v2",
        "--input",
        "3x96x64",
        "--batch",
        "2",
        "--json",
    ]);
    let Some(layers) = one["layers"].as_array() else {
        panic!("no layers")
    };
    for key in ["flops", "macs", "params", "dram_bytes", "output_bytes"] {
        let sum: u64 = layers.iter().filter_map(|l| l[key].as_u64()).sum();
        assert_eq!(Some(sum), one["total"][key].as_u64(), "{key}");
    }
    assert_eq!(one["input_shape"], serde_json::json!([1, 3, 96, 64]));
    // Activations and compute double with the batch; parameters do not.
    let f1 = one["total"]["macs"].as_u64().unwrap_or(0);
    let f2 = two["total"]["macs"].as_u64().unwrap_or(0);
    assert_eq!(f2, 2 * f1);
    assert_eq!(one["total"]["params"], two["total"]["params"]);
    edgeprof()
        .args(["models", "info", "resnet50"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("layer4.2.conv3")
                .and(predicate::str::contains("4,089,184,256"))
                .and(predicate::str::contains("min. DRAM traffic")),
        );
}

#[test]
fn vgg19_adaptive_pool_output_is_7x7_at_every_size() {
    for input in ["3x32x32", "3x128x128", "3x224x224", "1x45x77"] {
        let info = json_of(&["models", "info", "vgg19", "--input", input, "--json"]);
        let Some(layers) = info["layers"].as_array() else {
            panic!("no layers")
        };
        let pool = layers.iter().find(|l| l["name"] == "avgpool");
        let Some(pool) = pool else {
            panic!("no avgpool")
        };
        assert_eq!(
            pool["output_shape"],
            serde_json::json!([1, 512, 7, 7]),
            "{input}"
        );
    }
}

#[test]
fn classes_change_the_classifier_only() {
    let info = json_of(&["models", "info", "resnet34", "--classes", "10", "--json"]);
    // 21 797 672 − 513 000 (the 1000-way fc) + 5 130 (a 10-way fc).
    assert_eq!(info["total"]["params"], 21_797_672 - 513_000 + 5_130);
    assert_eq!(info["output_shape"], serde_json::json!([1, 10]));
}

#[test]
fn bad_model_names_and_shapes_are_exit_code_2() {
    assert_bad_input(
        &["models", "info", "resnet51"],
        "unknown model \"resnet51\"",
    );
    assert_bad_input(
        &["models", "info", "vgg19", "--input", "3x16x16"],
        "between 32 and",
    );
    assert_bad_input(
        &["models", "info", "vgg19", "--input", "3x224"],
        "not CxHxW",
    );
    assert_bad_input(
        &["models", "info", "vgg19", "--input", "3xAx224"],
        "not CxHxW",
    );
    assert_bad_input(
        &["models", "info", "vgg19", "--input", "0x224x224"],
        "not CxHxW",
    );
    assert_bad_input(&["models", "info", "vgg19", "--batch", "0"], "batch size");
    assert_bad_input(
        &["models", "export", "nope", "-o", "x.onnx"],
        "unknown model",
    );
}

#[test]
fn export_writes_an_onnx_file_and_reference_data() {
    let dir = temp_dir();
    let file = dir.path().join("m.onnx");
    let data = dir.path().join("data");
    edgeprof()
        .args([
            "models",
            "export",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "-o",
        ])
        .arg(&file)
        .arg("--test-data")
        .arg(&data)
        .assert()
        .success()
        .stderr(predicate::str::contains("opset 13"));
    let bytes = std::fs::read(&file).unwrap_or_default();
    // 1 366 792 parameters + BN statistics as float32 dominate the file.
    assert!(bytes.len() > 1_366_792 * 4, "{} bytes", bytes.len());
    assert!(data.join("test_data_set_0/input_0.pb").is_file());
    assert!(data.join("test_data_set_0/output_0.pb").is_file());
    // Same seed, same bytes; another seed, other weights.
    let again = dir.path().join("again.onnx");
    edgeprof()
        .args([
            "models",
            "export",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "-o",
        ])
        .arg(&again)
        .assert()
        .success();
    assert_eq!(std::fs::read(&again).unwrap_or_default(), bytes);
    let other = dir.path().join("other.onnx");
    edgeprof()
        .args([
            "models",
            "export",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "--seed",
            "7",
            "-o",
        ])
        .arg(&other)
        .assert()
        .success();
    assert_ne!(std::fs::read(&other).unwrap_or_default(), bytes);
}

#[test]
fn export_to_an_unwritable_path_is_exit_code_2() {
    assert_bad_input(
        &[
            "models",
            "export",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "-o",
            "/nonexistent/dir/m.onnx",
        ],
        "cannot write /nonexistent/dir/m.onnx",
    );
}

#[test]
fn help_reads_well() {
    edgeprof()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("models").and(predicate::str::contains("bench")));
    edgeprof()
        .args(["bench", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("--threads").and(predicate::str::contains("--iterations")),
        );
}

/// A typo's tips name commands a user runs, never the internal ones edgeprof starts itself.
#[test]
fn typo_tips_leave_internal_commands_out() {
    let out = edgeprof().arg("place-work").assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("unrecognized subcommand 'place-work'"),
        "{err}"
    );
    assert!(err.contains("'place'"), "{err}");
    assert!(
        !err.contains("place-worker") && !err.contains("gpu-bench-worker"),
        "{err}"
    );
    let out = edgeprof().arg("reap").assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!err.contains("reap-guard"), "{err}");
}

/// Two PyTorch exports of one small network (tests/fixtures/onnx/torch/make.py): TorchScript's
/// at opset 13 with an open batch, and dynamo's at opset 20.
#[test]
fn info_reads_pytorch_exports_node_by_node() {
    for (file, params, nodes) in [
        ("small_opset13.onnx", 6_538, 77),
        ("small_dynamo.onnx", 6_378, 24),
    ] {
        let path = fixture(&format!("torch/{file}"));
        let v = json_of(&["models", "info", &path, "--json"]);
        let ops: Vec<&str> = v["nodes"]
            .as_array()
            .map(|l| l.iter().filter_map(|x| x["op"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            (v["node_count"].as_u64(), v["costed"].as_u64()),
            (Some(nodes), Some(nodes)),
            "{file}: {ops:?}"
        );
        for op in ["Conv", "Sigmoid", "Transpose", "Gemm", "MaxPool"] {
            assert!(ops.contains(&op), "{file}: {op} in {ops:?}");
        }
        assert_eq!(v["total"]["params"], params, "{file}");
        assert_eq!(
            v["outputs"][0]["shape"],
            serde_json::json!([1, 10]),
            "{file}"
        );
    }
    // The batch is open in the TorchScript export: --batch sets it.
    let small = fixture("torch/small_opset13.onnx");
    let flops = |args: &[&str]| {
        let v = json_of(&[&["models", "info", &small, "--json"], args].concat());
        v["total"]["flops"].as_u64().unwrap_or(0)
    };
    assert_eq!(flops(&["--batch", "4"]), 4 * flops(&[]));
    assert_eq!(flops(&["--input", "input=4x3x64x64"]), 4 * flops(&[]));
    // dynamo's export fixes the batch at 1: another one contradicts the file.
    assert_bad_input(
        &[
            "models",
            "info",
            &fixture("torch/small_dynamo.onnx"),
            "--batch",
            "4",
        ],
        "input x fixes dimension 0 at 1 in the file; 4x3x64x64 contradicts it",
    );
    assert_bad_input(
        &["models", "info", &small, "--classes", "10"],
        "--classes sets a zoo model's classifier",
    );
    assert_bad_input(
        &["models", "info", &small, "--input", "y=1x3x64x64"],
        "it has no input named \"y\"",
    );
    assert_bad_input(
        &["models", "info", &fixture("not_protobuf.onnx")],
        "not_protobuf.onnx is not an ONNX model",
    );
}

/// An operator edgeprof does not know is listed, never a refusal of the model.
#[test]
fn info_lists_an_unknown_operator_and_costs_the_rest() {
    let v = json_of(&["models", "info", &fixture("unknown_op.onnx"), "--json"]);
    assert_eq!(v["not_costed"][0]["op"], "com.example.NoSuchOp");
    assert_eq!(
        v["not_costed"][0]["reason"],
        "a custom domain's operator, which edgeprof does not know"
    );
    let out = edgeprof()
        .args(["models", "info", &fixture("unknown_op.onnx")])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("not costed: 1 of 1 nodes"), "{text}");
}

/// `models export -o` writes to the path as named, as a shell's redirection would: through a
/// symbolic link, to /dev/stdout, leaving a user's `NAME.tmp` beside it alone; an unusable
/// `--test-data` folder is refused after the model is written and said.
#[test]
fn export_writes_where_it_is_told() {
    let tmp = temp_dir();
    let dir = tmp.path();
    write(&dir.join("model.tmp"), "mine");
    if let Err(e) = std::os::unix::fs::symlink("target.onnx", dir.join("link.onnx")) {
        panic!("{e}");
    }
    let export = |output: &str| {
        let mut c = edgeprof();
        c.current_dir(dir).args([
            "models",
            "export",
            "shufflenet_v2_x0_5",
            "--input",
            "3x32x32",
            "-o",
            output,
        ]);
        c
    };
    export("link.onnx").assert().success();
    assert!(dir.join("link.onnx").is_symlink());
    let through = std::fs::metadata(dir.join("target.onnx")).map_or(0, |m| m.len());
    assert!(through > 1000, "nothing written through the link");
    let out = export("/dev/stdout").assert().success();
    assert_eq!(out.get_output().stdout.len() as u64, through);
    let refused = export("model.onnx")
        .args(["--test-data", "model.tmp"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(stderr.contains("wrote model.onnx"), "{stderr}");
    assert!(
        stderr.contains("cannot create model.tmp/test_data_set_0"),
        "{stderr}"
    );
    assert_eq!(read(&dir.join("model.tmp")), "mine");
}

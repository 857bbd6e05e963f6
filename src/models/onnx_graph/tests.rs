//! Tests of the node-by-node analysis: the zoo's own exports cost as the zoo's model says,
//! operators by hand, inputs bound as the user gives them, and nodes it cannot cost.

use super::*;
use crate::models::cost::analyze;
use crate::models::onnx::{float_tensor, int, int64_tensor, ints, to_onnx, value_info};
use crate::models::zoo::{self, ModelParams};
use pb::tensor_shape_proto::{dimension::Value as DimValue, Dimension};

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> pb::NodeProto {
    pb::NodeProto {
        op_type: op.to_string(),
        name: name.to_string(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn with(mut n: pb::NodeProto, attrs: Vec<pb::AttributeProto>) -> pb::NodeProto {
    n.attribute = attrs;
    n
}

fn text(name: &str, value: &str) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.to_string(),
        r#type: pb::attribute_proto::AttributeType::String as i32,
        s: value.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn weights(name: &str, dims: &[usize]) -> pb::TensorProto {
    float_tensor(name, dims, &vec![0.5; dims.iter().product()])
}

/// An input whose dimensions are fixed (Some) or open under a symbol.
fn input(name: &str, elem: i32, dims: &[Result<usize, &str>]) -> pb::ValueInfoProto {
    let mut v = value_info(name, &[]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        v.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = elem;
        t.shape = Some(pb::TensorShapeProto {
            dim: dims
                .iter()
                .map(|d| Dimension {
                    value: Some(match d {
                        Ok(v) => DimValue::DimValue(*v as i64),
                        Err(s) => DimValue::DimParam(s.to_string()),
                    }),
                    ..Default::default()
                })
                .collect(),
        });
    }
    v
}

fn f32_input(name: &str, dims: &[usize]) -> pb::ValueInfoProto {
    input(
        name,
        F32,
        &dims
            .iter()
            .map(|&d| Ok(d))
            .collect::<Vec<Result<usize, &str>>>(),
    )
}

const F32: i32 = pb::tensor_proto::DataType::Float as i32;
const I64: i32 = pb::tensor_proto::DataType::Int64 as i32;

fn model(
    nodes: Vec<pb::NodeProto>,
    inputs: Vec<pb::ValueInfoProto>,
    inits: Vec<pb::TensorProto>,
    outputs: &[&str],
) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(pb::GraphProto {
            node: nodes,
            input: inputs,
            initializer: inits,
            output: outputs.iter().map(|o| value_info(o, &[])).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(proto: &pb::ModelProto, given: &[&str]) -> GraphCost {
    let given: Vec<InputSpec> = given
        .iter()
        .map(|g| match g.parse() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        })
        .collect();
    match analyse(proto, "m", "m.onnx", &given, None) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

fn refused(proto: &pb::ModelProto, given: &[&str]) -> String {
    let given: Vec<InputSpec> = given.iter().filter_map(|g| g.parse().ok()).collect();
    match analyse(proto, "m", "m.onnx", &given, None) {
        Ok(c) => panic!("analysed: {c:?}"),
        Err(e) => e.to_string(),
    }
}

fn only(c: &GraphCost, name: &str) -> NodeCost {
    match c.nodes.iter().find(|n| n.name == name) {
        Some(n) => n.clone(),
        None => panic!("no node {name} in {:?}", c.nodes),
    }
}

#[test]
fn every_zoo_export_costs_what_the_zoo_model_says() {
    // vgg19 at 64×64 pools 2×2 to 7×7 with two pooling matrices in its export (an adaptive
    // pool ONNX has no operator for): the file does matrix products the zoo counts as window
    // sums. MobileNetV3's and EfficientNet's activations are two nodes in the file (the gate
    // and the product), whose intermediate tensor the file writes and reads again.
    let pooled_by_matrices = ["vgg19"];
    let two_node_activations = [
        "mobilenet_v3_small",
        "mobilenet_v3_large",
        "efficientnet_b0",
    ];
    for entry in zoo::ZOO {
        let params = ModelParams {
            num_classes: 10,
            channels: 3,
            height: 64,
            width: 64,
            batch: 2,
        };
        let m = match zoo::build(entry.name, &params) {
            Ok(m) => m,
            Err(e) => panic!("{}: {e}", entry.name),
        };
        let want = analyze(&m).total;
        let got = run(&to_onnx(&m, 1), &[]);
        assert_eq!(got.costed, got.node_count, "{}", entry.name);
        let t = got.cost_totals();
        if pooled_by_matrices.contains(&entry.name) {
            assert!(t.macs > want.macs, "{}", entry.name);
            continue;
        }
        assert_eq!(
            (t.macs, t.flops, t.params, t.buffers),
            (want.macs, want.flops, want.params, want.buffers),
            "{}",
            entry.name
        );
        if two_node_activations.contains(&entry.name) {
            assert!(t.dram_bytes > want.dram_bytes, "{}", entry.name);
        } else {
            assert_eq!(t.dram_bytes, want.dram_bytes, "{}", entry.name);
        }
    }
}

#[test]
fn a_1d_convolution_and_a_transposed_one_by_hand() {
    // 4→8 channels, kernel 3, stride 2, pad 1 on 1×4×10: 5 outputs per channel, 40 in all,
    // each 4·3 = 12 MACs → 480 MACs, 960 FLOPs + 40 for the bias.
    let conv = with(
        node("Conv", "c", &["x", "w", "b"], &["y"]),
        vec![ints("strides", &[2]), ints("pads", &[1, 1])],
    );
    // Transposed 8→2 channels, kernel 4, stride 2 on 1×8×5: (5−1)·2 + 4 = 12 outputs;
    // MACs = inputs (40) · C_out (2) · kernel (4) = 320.
    let up = with(
        node("ConvTranspose", "t", &["y", "wt"], &["z"]),
        vec![ints("strides", &[2])],
    );
    let c = run(
        &model(
            vec![conv, up],
            vec![f32_input("x", &[1, 4, 10])],
            vec![
                weights("w", &[8, 4, 3]),
                weights("b", &[8]),
                weights("wt", &[8, 2, 4]),
            ],
            &["z"],
        ),
        &[],
    );
    let a = only(&c, "c");
    assert_eq!(a.output_shape, Some(vec![1, 8, 5]));
    assert_eq!((a.macs, a.flops, a.params), (480, 1000, 8 * 12 + 8));
    assert_eq!(a.dram_bytes, (104 + 40 + 40) * 4);
    let b = only(&c, "t");
    assert_eq!(b.output_shape, Some(vec![1, 2, 12]));
    assert_eq!((b.macs, b.flops, b.params), (320, 640, 64));
    assert_eq!(c.outputs[0].shape.clone(), Some(vec![1, 2, 12]));
}

#[test]
fn an_lstm_by_hand() {
    // Sequence 7, batch 1, input 16, hidden 32, forward: per step 4·32·(16+32) = 6144 MACs,
    // 7 steps → 43 008 MACs; FLOPs 2·MACs + 7·32·32 = 86 016 + 7 168.
    let lstm = with(
        node("LSTM", "l", &["x", "W", "R", "B"], &["y", "h", "c"]),
        vec![int("hidden_size", 32)],
    );
    let c = run(
        &model(
            vec![lstm],
            vec![f32_input("x", &[7, 1, 16])],
            vec![
                weights("W", &[1, 128, 16]),
                weights("R", &[1, 128, 32]),
                weights("B", &[1, 256]),
            ],
            &["y", "h"],
        ),
        &[],
    );
    let l = only(&c, "l");
    assert_eq!(l.output_shape, Some(vec![7, 1, 1, 32]));
    assert_eq!((l.macs, l.flops), (43_008, 86_016 + 7_168));
    assert_eq!(l.params, 128 * 16 + 128 * 32 + 256);
    assert_eq!(c.outputs[1].shape.clone(), Some(vec![1, 1, 32]));
}

#[test]
fn a_resize_einsum_and_layer_norm_by_hand() {
    // Bilinear ×2 of 1×2×3×4: 1×2×6×8 = 96 outputs, 2 axes resized → 7 FLOPs each.
    let resize = with(
        node("Resize", "r", &["x", "", "scales"], &["up"]),
        vec![text("mode", "linear")],
    );
    // bhqd,bhkd->bhqk on 1×2×6×8 with itself: 1·2·6·6·8 = 576 MACs.
    let attn = with(
        node("Einsum", "e", &["up", "up"], &["s"]),
        vec![text("equation", "bhqd,bhkd->bhqk")],
    );
    // LayerNormalization over the last axis: 7 FLOPs per element of 1×2×6×6, scale and bias
    // of 6 are its parameters.
    let ln = with(
        node("LayerNormalization", "n", &["s", "g", "beta"], &["o"]),
        vec![int("axis", -1)],
    );
    let scales = float_tensor("scales", &[4], &[1.0, 1.0, 2.0, 2.0]);
    let c = run(
        &model(
            vec![resize, attn, ln],
            vec![f32_input("x", &[1, 2, 3, 4])],
            vec![scales, weights("g", &[6]), weights("beta", &[6])],
            &["o"],
        ),
        &[],
    );
    let r = only(&c, "r");
    assert_eq!(r.output_shape, Some(vec![1, 2, 6, 8]));
    assert_eq!((r.flops, r.params), (96 * 7, 0));
    let e = only(&c, "e");
    assert_eq!(e.output_shape, Some(vec![1, 2, 6, 6]));
    assert_eq!((e.macs, e.flops), (576, 1152));
    let n = only(&c, "n");
    assert_eq!((n.flops, n.params), (72 * 7, 12));
}

#[test]
fn shapes_computed_from_shapes_are_followed() {
    // A YOLO head's pattern: Shape → Gather → Concat with a constant → Reshape.
    let nodes = vec![
        node("Shape", "shape", &["x"], &["s"]),
        with(
            node("Gather", "batch", &["s", "zero"], &["n"]),
            vec![int("axis", 0)],
        ),
        with(
            node("Concat", "cat", &["n", "rest"], &["target"]),
            vec![int("axis", 0)],
        ),
        node("Reshape", "r", &["x", "target"], &["y"]),
        node("Softmax", "sm", &["y"], &["z"]),
    ];
    let c = run(
        &model(
            nodes,
            vec![input("x", F32, &[Err("batch"), Ok(4), Ok(8), Ok(8)])],
            vec![int64_tensor("zero", &[0]), int64_tensor("rest", &[4, -1])],
            &["z"],
        ),
        &["x=3x4x8x8"],
    );
    assert_eq!(c.costed, c.node_count, "{:?}", c.not_costed);
    assert_eq!(only(&c, "r").output_shape, Some(vec![3, 4, 64]));
    assert_eq!(only(&c, "sm").flops, 3 * 4 * 64 * 5);
    assert!(only(&c, "cat").folded);
}

#[test]
fn a_per_channel_scale_counts_what_the_file_holds() {
    let c = run(
        &model(
            vec![
                node("Mul", "scale", &["x", "s"], &["y"]),
                node("Add", "shift", &["y", "one"], &["z"]),
            ],
            vec![f32_input("x", &[1, 16, 4, 4])],
            vec![weights("s", &[1, 16, 1, 1]), weights("one", &[])],
            &["z"],
        ),
        &[],
    );
    assert_eq!((c.total.params, c.total.buffers), (17, 0));
    assert_eq!(only(&c, "scale").flops, 256);
}

#[test]
fn an_unknown_operator_is_listed_and_the_rest_costed() {
    let mut custom = node("NoSuchOp", "mystery", &["a"], &["b"]);
    custom.domain = "com.example".into();
    let c = run(
        &model(
            vec![
                node("Relu", "first", &["x"], &["a"]),
                custom,
                node("Relu", "after", &["b"], &["y"]),
                node("Sigmoid", "beside", &["a"], &["z"]),
                node("NonZero", "nz", &["a"], &["w"]),
            ],
            vec![f32_input("x", &[1, 8])],
            vec![],
            &["y", "z", "w"],
        ),
        &[],
    );
    assert_eq!((c.node_count, c.costed), (5, 2));
    let ops: Vec<(&str, usize)> = c
        .not_costed
        .iter()
        .map(|n| (n.op.as_str(), n.nodes))
        .collect();
    // The node after the unknown one is not costed because of it, and said so apart.
    assert_eq!(ops, [("com.example.NoSuchOp", 1), ("NonZero", 1)]);
    assert_eq!(c.downstream, 1);
    assert_eq!(only(&c, "after").after.as_deref(), Some("mystery"));
    assert_eq!(c.total.flops, 8 + 32);
}

fn branchy() -> pb::ModelProto {
    // if sr == 16000: a Relu, else a Sigmoid and a Tanh (silero's pattern).
    let branch = |ops: &[&str]| pb::GraphProto {
        node: ops
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let from = if i == 0 {
                    "x".to_string()
                } else {
                    format!("{}_{}", ops[i - 1], i - 1)
                };
                node(op, &format!("{op}_{i}"), &[&from], &[&format!("{op}_{i}")])
            })
            .collect(),
        output: vec![value_info(
            &format!("{}_{}", ops[ops.len() - 1], ops.len() - 1),
            &[],
        )],
        ..Default::default()
    };
    let graph_attr = |name: &str, g: pb::GraphProto| pb::AttributeProto {
        name: name.to_string(),
        r#type: pb::attribute_proto::AttributeType::Graph as i32,
        g: Some(g),
        ..Default::default()
    };
    model(
        vec![
            node("Equal", "is16k", &["sr", "k16"], &["cond"]),
            with(
                node("If", "choose", &["cond"], &["y"]),
                vec![
                    graph_attr("then_branch", branch(&["Relu"])),
                    graph_attr("else_branch", branch(&["Sigmoid", "Tanh"])),
                ],
            ),
        ],
        vec![f32_input("x", &[1, 10]), input("sr", I64, &[])],
        vec![int64_tensor("k16", &[16000])],
        &["y"],
    )
}

#[test]
fn an_if_costs_the_branch_its_known_condition_takes() {
    // The comparison runs each time (sr is an input); the Relu branch is taken.
    let c = run(&branchy(), &["sr=int64:16000"]);
    assert_eq!(c.costed, c.node_count);
    assert_eq!(c.total.flops, 1 + 10);
    assert_eq!(c.inputs[1].value, Some(16000.0));
    assert!(c.nodes.iter().any(|n| n.name == "choose/then/Relu_0"));
    let c = run(&branchy(), &["sr=int64:8000"]);
    assert_eq!(c.total.flops, 1 + 80);
    assert!(refused(&branchy(), &["sr=int64:16000.5"]).contains("16000.5 is not one of its values"));
    // Without the value, the If is listed and its output keeps the shape both branches give.
    let c = run(&branchy(), &[]);
    assert_eq!(c.not_costed.len(), 1);
    assert_eq!(c.not_costed[0].op, "If");
    assert_eq!(c.outputs[0].shape.clone(), Some(vec![1, 10]));
}

#[test]
fn inputs_are_bound_by_name_and_contradictions_refused() {
    let proto = model(
        vec![node("Add", "a", &["x", "state"], &["y"])],
        vec![
            input("x", F32, &[Err("batch"), Ok(128)]),
            input("state", F32, &[Err("batch"), Ok(128)]),
        ],
        vec![],
        &["y"],
    );
    // The open batch is 1 unless given; a symbol bound once holds for every input.
    assert_eq!(run(&proto, &[]).inputs[1].shape, vec![1, 128]);
    assert_eq!(run(&proto, &["x=4x128"]).inputs[1].shape, vec![4, 128]);
    assert!(refused(&proto, &["x=4x128", "state=2x128"])
        .contains("dimension batch is 4 in one input and 2 in input state"));
    assert!(refused(&proto, &["x=1x64"]).contains("input x fixes dimension 1 at 128"));
    assert!(refused(&proto, &["y=1x128"])
        .contains("it has no input named \"y\" (its inputs: x, state)"));
    assert!(
        refused(&proto, &["x=int64:1x128"]).contains("input x is float32 in the file, not int64")
    );
    let open = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", F32, &[Err("n"), Ok(3), Err("h"), Err("w")])],
        vec![],
        &["y"],
    );
    assert!(refused(&open, &[])
        .contains("input x has open dimensions ([n, 3, h, w]): give them with --input x=DIMS"));
    // The old way: CxHxW for a single image input, the batch apart.
    let c = match analyse(
        &open,
        "m",
        "m.onnx",
        &[match "3x32x48".parse() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }],
        Some(2),
    ) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(c.inputs[0].shape, vec![2, 3, 32, 48]);
}

#[test]
fn input_specs_parse_and_bad_ones_say_why() {
    let spec = |s: &str| match s.parse::<InputSpec>() {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(spec("images=1x3x640x640").dims, Some(vec![1, 3, 640, 640]));
    let sr = spec("sr=int64:16000");
    assert_eq!((sr.elem, sr.value), (Some(I64), Some(16000.0)));
    assert_eq!(spec("3x224x224").image.map(|i| i.height), Some(224));
    assert_eq!(spec("state=2x1x128").name.as_deref(), Some("state"));
    for (bad, why) in [
        ("=1x3", "the name before = is empty"),
        ("x=", "no dimensions"),
        ("x=1xAx3", "dimensions are whole numbers"),
        ("x=complex9:1", "unknown element type"),
    ] {
        match bad.parse::<InputSpec>() {
            Ok(v) => panic!("{bad} parsed as {v:?}"),
            Err(e) => assert!(e.to_string().contains(why), "{bad}: {e}"),
        }
    }
}

#[test]
fn a_tile_whose_size_wraps_is_not_costed() {
    let c = run(
        &model(
            vec![node("Tile", "t", &["x", "reps"], &["y"])],
            vec![f32_input("x", &[1, 1000])],
            vec![int64_tensor("reps", &[1 << 32, 1 << 32])],
            &["y"],
        ),
        &[],
    );
    assert_eq!(c.costed, 0);
    assert!(
        c.not_costed[0].reason.contains("larger than any model's"),
        "{:?}",
        c.not_costed
    );
}

#[test]
fn other_formats_are_named_with_how_to_convert() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let tflite = dir.path().join("m.tflite");
    let mut head = vec![0x1c, 0, 0, 0];
    head.extend_from_slice(b"TFL3");
    head.extend_from_slice(&[0xff; 40]);
    if let Err(e) = std::fs::write(&tflite, &head) {
        panic!("{e}");
    }
    match analyse_file(&tflite, &[], None) {
        Ok(_) => panic!("a TFLite file analysed"),
        Err(e) => assert!(
            e.to_string().contains("this is a TensorFlow Lite model"),
            "{e}"
        ),
    }
    match analyse_file(Path::new("/dev/zero"), &[], None) {
        Ok(_) => panic!("/dev/zero analysed"),
        Err(e) => assert!(e.to_string().contains("not a regular file"), "{e}"),
    }
}

#[test]
fn nodes_out_of_order_are_sorted_and_a_cycle_is_named() {
    let c = run(
        &model(
            vec![
                node("Sigmoid", "second", &["a"], &["y"]),
                node("Relu", "first", &["x"], &["a"]),
            ],
            vec![f32_input("x", &[1, 8])],
            vec![],
            &["y"],
        ),
        &[],
    );
    assert_eq!(c.costed, 2);
    assert_eq!(c.total.flops, 8 + 32);
    let cyclic = run(
        &model(
            vec![
                node("Add", "p", &["x", "b"], &["a"]),
                node("Relu", "q", &["a"], &["b"]),
            ],
            vec![f32_input("x", &[1, 8])],
            vec![],
            &["b"],
        ),
        &[],
    );
    assert_eq!(cyclic.costed, 0);
    assert!(
        cyclic
            .not_costed
            .iter()
            .any(|n| n.reason == "the graph has a cycle through this node"),
        "{:?}",
        cyclic.not_costed
    );
}

#[test]
fn constants_computed_from_shapes_are_no_parameters() {
    // A detector's anchors: a Range over the input's width, scaled by a weight.
    let mut nodes = vec![
        node("Shape", "shape", &["x"], &["s"]),
        with(
            node("Gather", "w", &["s", "three"], &["width"]),
            vec![int("axis", 0)],
        ),
        node("Range", "grid", &["zero", "width", "one"], &["g"]),
        node("Cast", "as_float", &["g"], &["gf"]),
        node("Mul", "scale", &["gf", "half"], &["anchors"]),
        node("Add", "place", &["x", "anchors"], &["y"]),
    ];
    nodes[3].attribute = vec![int("to", F32 as i64)];
    let c = run(
        &model(
            nodes,
            vec![f32_input("x", &[1, 2, 4, 16])],
            vec![
                scalar_i64("three", 3),
                scalar_i64("zero", 0),
                scalar_i64("one", 1),
                float_tensor("half", &[], &[0.5]),
            ],
            &["y"],
        ),
        &[],
    );
    assert_eq!(c.costed, c.node_count, "{:?}", c.not_costed);
    // The anchors (16 values) are read as data, not counted as parameters.
    assert_eq!(c.total.params, 0);
    assert_eq!(only(&c, "place").input_bytes, (128 + 16) * 4);
}

#[test]
fn an_input_given_twice_or_a_zero_batch_is_refused() {
    let proto = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", F32, &[Err("n"), Ok(8)])],
        vec![],
        &["y"],
    );
    assert!(refused(&proto, &["x=1x8", "x=2x8"]).contains("input x is given twice"));
    match analyse(&proto, "m", "m.onnx", &[], Some(0)) {
        Ok(c) => panic!("analysed: {c:?}"),
        Err(e) => assert!(
            e.to_string().contains("the batch must be at least 1"),
            "{e}"
        ),
    }
}

fn scalar_i64(name: &str, v: i64) -> pb::TensorProto {
    pb::TensorProto {
        name: name.to_string(),
        data_type: I64,
        int64_data: vec![v],
        ..Default::default()
    }
}

#[test]
fn a_branch_node_is_known_by_its_own_name_in_the_file() {
    assert_eq!(source_node_name("cond/then/conv"), "conv");
    assert_eq!(source_node_name("a/else/b/then/c"), "c");
    assert_eq!(source_node_name("/model.0/conv/Conv"), "/model.0/conv/Conv");
}

#[test]
fn a_float_export_has_no_quantized_ops_and_a_qdq_graph_names_each_once() {
    let Ok(model) = zoo::build("resnet18", &ModelParams::default()) else {
        panic!("resnet18 does not build");
    };
    assert!(quantized_ops_of(&to_onnx(&model, 1)).is_empty());
    let proto = pb::ModelProto {
        graph: Some(pb::GraphProto {
            node: vec![
                node("QuantizeLinear", "q", &["x", "s", "z"], &["xq"]),
                node("DequantizeLinear", "d", &["xq", "s", "z"], &["xd"]),
                node("Relu", "r", &["xd"], &["y"]),
                node("QuantizeLinear", "q2", &["y", "s", "z"], &["yq"]),
                node("QLinearSigmoid", "s", &["yq"], &["o"]),
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        quantized_ops_of(&proto),
        ["QuantizeLinear", "DequantizeLinear", "QLinearSigmoid"]
    );
}

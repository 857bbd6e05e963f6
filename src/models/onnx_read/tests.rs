//! Tests of the ONNX reader: every zoo model read back from its own export, the patterns other
//! exporters write (PyTorch's and TensorFlow's), and the files it refuses.

use super::*;
use crate::models::cost::analyze;
use crate::models::graph::GraphBuilder;
use crate::models::onnx::{float, float_tensor, int, int64_tensor, ints, to_onnx, value_info};
use crate::models::zoo::{self, ModelParams};
use pb::tensor_shape_proto::{dimension::Value as Dim, Dimension};

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

fn weights(name: &str, dims: &[usize]) -> pb::TensorProto {
    float_tensor(name, dims, &vec![0.0; dims.iter().product()])
}

/// An input of the given dimensions, `None` for a named (open) one.
fn open_input(name: &str, dims: &[Option<usize>]) -> pb::ValueInfoProto {
    let mut v = value_info(name, &[]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        v.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.shape = Some(pb::TensorShapeProto {
            dim: dims
                .iter()
                .map(|d| Dimension {
                    value: Some(match d {
                        Some(v) => Dim::DimValue(*v as i64),
                        None => Dim::DimParam("N".to_string()),
                    }),
                    ..Default::default()
                })
                .collect(),
        });
    }
    v
}

fn model_of(graph: pb::GraphProto) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: 8,
        graph: Some(graph),
        ..Default::default()
    }
}

fn read(proto: &pb::ModelProto, input: Option<&str>) -> Result<Model, ReadError> {
    let input = input.map(|s| match s.parse() {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    });
    from_proto(proto, "m", "m.onnx", Given { input, batch: None })
}

/// A layer's name, kind, output shape, FLOPs, parameters and DRAM bytes.
type LayerCosts = (String, &'static str, Vec<usize>, u64, u64, u64);

fn costs(model: &Model) -> Vec<LayerCosts> {
    analyze(model)
        .layers
        .into_iter()
        .map(|l| {
            (
                l.name,
                l.kind,
                l.output_shape,
                l.flops,
                l.params,
                l.dram_bytes,
            )
        })
        .collect()
}

#[test]
fn every_zoo_model_reads_back_from_its_export_with_the_same_layers_and_costs() {
    for name in zoo::zoo_names() {
        // 64×64 gives VGG's adaptive pool overlapping windows (two pooling matrices in the
        // export). VGG's 140 million weights are written once only (their values are generated).
        let sizes: &[usize] = if name == "vgg19" { &[64] } else { &[64, 224] };
        for &size in sizes {
            let params = ModelParams {
                height: size,
                width: size,
                ..Default::default()
            };
            let model = match zoo::build(name, &params) {
                Ok(m) => m,
                Err(e) => panic!("{name}: {e}"),
            };
            let proto = to_onnx(&model, 1);
            let read = match from_proto(&proto, name, "export", Given::default()) {
                Ok(m) => m,
                Err(e) => panic!("{name} at {size}: {e}"),
            };
            assert_eq!(costs(&read), costs(&model), "{name} at {size}");
            assert_eq!(read.output, model.output, "{name}");
            assert_eq!(analyze(&read).total, analyze(&model).total, "{name}");
        }
    }
}

/// What PyTorch's exporter writes for a small network: an open batch, BN folded into the
/// convolutions, ReLU6 as Clip with constant bounds, Hardswish as one node, a channel split
/// and concatenation, the flatten as `Shape → Gather → Unsqueeze → Concat → Reshape`, the
/// classifier as MatMul then Add, and `x · sigmoid(x)`.
fn torch_style() -> pb::ModelProto {
    let nodes = vec![
        with(
            node("Conv", "/stem/Conv", &["x", "w1", "b1"], &["c1"]),
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("strides", &[2, 2]),
                ints("pads", &[1, 1, 1, 1]),
                int("group", 1),
            ],
        ),
        node("Clip", "/stem/Clip", &["c1", "zero", "six"], &["a1"]),
        with(
            node("Conv", "/dw/Conv", &["a1", "w2", "b2"], &["c2"]),
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("pads", &[1, 1, 1, 1]),
                int("group", 16),
            ],
        ),
        node("HardSwish", "/dw/HardSwish", &["c2"], &["a2"]),
        with(
            node("Split", "/split", &["a2", "halves"], &["s0", "s1"]),
            vec![int("axis", 1)],
        ),
        node("Sigmoid", "/silu/Sigmoid", &["s1"], &["g"]),
        node("Mul", "/silu/Mul", &["s1", "g"], &["m"]),
        with(
            node("Concat", "/cat", &["s0", "m"], &["cat"]),
            vec![int("axis", 1)],
        ),
        with(
            node("MaxPool", "/pool", &["cat"], &["p"]),
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        ),
        node("Shape", "/Shape", &["p"], &["shape"]),
        with(
            node("Constant", "/zero_index", &[], &["i0"]),
            vec![pb::AttributeProto {
                name: "value".to_string(),
                t: Some(int64_tensor("", &[0])),
                ..Default::default()
            }],
        ),
        with(
            node("Gather", "/Gather", &["shape", "i0"], &["n"]),
            vec![int("axis", 0)],
        ),
        with(
            node("Concat", "/shape_cat", &["n", "minus_one"], &["flat_shape"]),
            vec![int("axis", 0)],
        ),
        node("Reshape", "/Reshape", &["p", "flat_shape"], &["flat"]),
        node("MatMul", "/fc/MatMul", &["flat", "wf"], &["mm"]),
        node("Add", "/fc/Add", &["mm", "bf"], &["logits"]),
        with(
            node("Softmax", "/Softmax", &["logits"], &["y"]),
            vec![int("axis", 1)],
        ),
    ];
    let graph = pb::GraphProto {
        node: nodes,
        initializer: vec![
            weights("w1", &[16, 3, 3, 3]),
            weights("b1", &[16]),
            float_tensor("zero", &[], &[0.0]),
            float_tensor("six", &[], &[6.0]),
            weights("w2", &[16, 1, 3, 3]),
            weights("b2", &[16]),
            int64_tensor("halves", &[8, 8]),
            int64_tensor("minus_one", &[-1]),
            weights("wf", &[16 * 4 * 4, 10]),
            weights("bf", &[10]),
        ],
        input: vec![open_input("x", &[None, Some(3), None, None])],
        output: vec![value_info("y", &[1, 10])],
        ..Default::default()
    };
    model_of(graph)
}

#[test]
fn a_pytorch_style_export_reads_as_the_network_it_describes() {
    let read = match read(&torch_style(), Some("3x16x16")) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    let mut b = GraphBuilder::new("m", [1, 3, 16, 16]);
    let built = (|| -> Result<Model, crate::models::graph::GraphError> {
        let x = b.conv("/stem/Conv", ValueId::Input, 16, 3, 2, 1, 1, true)?;
        let x = b.add("/stem/Clip", Op::Relu6, &[x])?;
        let x = b.conv("/dw/Conv", x, 16, 3, 1, 1, 16, true)?;
        let x = b.add("/dw/HardSwish", Op::Hardswish, &[x])?;
        let s0 = b.add("/split", Op::ChannelSlice { start: 0, end: 8 }, &[x])?;
        let s1 = b.add("/split.1", Op::ChannelSlice { start: 8, end: 16 }, &[x])?;
        let m = b.add("/silu/Mul", Op::Silu, &[s1])?;
        let x = b.add("/cat", Op::Concat, &[s0, m])?;
        let x = b.max_pool("/pool", x, 2, 2, 0)?;
        let x = b.add("/Reshape", Op::Flatten, &[x])?;
        let x = b.linear("/fc/MatMul", x, 10)?;
        b.add("/Softmax", Op::Sigmoid, &[x])?;
        Ok(b.finish())
    })();
    let built = match built {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(costs(&read), costs(&built));
    assert_eq!(read.input_shape, vec![1, 3, 16, 16]);
}

#[test]
fn same_padding_ceil_mode_and_overlapping_poolings_read_as_the_zoo_layers_costing_alike() {
    let graph = pb::GraphProto {
        node: vec![
            with(
                node("Conv", "conv", &["x", "w"], &["c"]),
                vec![
                    ints("strides", &[2, 2]),
                    pb::AttributeProto {
                        name: "auto_pad".to_string(),
                        s: b"SAME_UPPER".to_vec(),
                        ..Default::default()
                    },
                ],
            ),
            // PyTorch's ceil mode as the writer spells it: one extra cell of padding at the end.
            with(
                node("MaxPool", "pool", &["c"], &["p"]),
                vec![
                    ints("kernel_shape", &[3, 3]),
                    ints("strides", &[2, 2]),
                    ints("pads", &[0, 0, 1, 1]),
                ],
            ),
            with(
                node("AveragePool", "avg", &["p"], &["q"]),
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ),
            // Inception's: overlapping, padded windows.
            with(
                node("AveragePool", "branch", &["q"], &["r"]),
                vec![
                    ints("kernel_shape", &[3, 3]),
                    ints("pads", &[1, 1, 1, 1]),
                    int("count_include_pad", 0),
                ],
            ),
            with(
                node("ReduceMean", "mean", &["r"], &["y"]),
                vec![ints("axes", &[2, 3]), int("keepdims", 0)],
            ),
        ],
        initializer: vec![weights("w", &[8, 3, 3, 3])],
        input: vec![value_info("x", &[1, 3, 32, 32])],
        output: vec![value_info("y", &[1, 8])],
        ..Default::default()
    };
    let read = match read(&model_of(graph), None) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    let ops: Vec<&Op> = read.layers.iter().map(|l| &l.op).collect();
    assert!(matches!(
        ops[0],
        Op::Conv2d {
            padding: [1, 1],
            stride: [2, 2],
            bias: false,
            ..
        }
    ));
    assert_eq!(read.layers[0].output_shape, vec![1, 8, 16, 16]);
    assert!(matches!(
        ops[1],
        Op::MaxPool2d {
            padding: [0, 0],
            ceil: true,
            ..
        }
    ));
    assert_eq!(read.layers[1].output_shape, vec![1, 8, 8, 8]);
    assert_eq!(ops[2], &Op::AdaptiveAvgPool2d { output: [4, 4] });
    assert_eq!(
        ops[3],
        &Op::MaxPool2d {
            kernel: [3, 3],
            stride: [1, 1],
            padding: [1, 1],
            ceil: false
        }
    );
    assert_eq!(read.layers[3].output_shape, vec![1, 8, 4, 4]);
    assert_eq!(ops[4], &Op::AdaptiveAvgPool2d { output: [1, 1] });
    assert_eq!(ops[5], &Op::Flatten);
    assert_eq!(read.output_shape(), [1, 8]);
}

fn single(op: pb::NodeProto, initializer: Vec<pb::TensorProto>) -> pb::ModelProto {
    model_of(pb::GraphProto {
        node: vec![op],
        initializer,
        input: vec![value_info("x", &[1, 3, 8, 8])],
        output: vec![value_info("y", &[1, 3, 8, 8])],
        ..Default::default()
    })
}

fn refusal(proto: &pb::ModelProto, input: Option<&str>) -> String {
    match read(proto, input) {
        Ok(m) => panic!("read {} layers", m.layers.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn operators_it_cannot_cost_are_named_with_their_counts() {
    let mut proto = single(node("Resize", "r", &["x"], &["y"]), vec![]);
    if let Some(g) = proto.graph.as_mut() {
        g.node.push(node("Resize", "r2", &["y"], &["z"]));
        let mut custom = node("FusedConv", "f", &["z"], &["w"]);
        custom.domain = "com.microsoft".to_string();
        g.node.push(custom);
    }
    let e = refusal(&proto, None);
    assert!(
        e.contains(
            "m.onnx uses operators edgeprof cannot cost: Resize ×2, com.microsoft.FusedConv ×1"
        ),
        "{e}"
    );
}

#[test]
fn nodes_it_reads_but_cannot_cost_this_way_are_named() {
    let dilated = with(
        node("Conv", "atrous", &["x", "w"], &["y"]),
        vec![ints("dilations", &[2, 2])],
    );
    let e = refusal(&single(dilated, vec![weights("w", &[3, 3, 3, 3])]), None);
    assert!(
        e.contains("node atrous (Conv): a dilated convolution"),
        "{e}"
    );
    let axis0 = with(
        node("Concat", "c", &["x", "x"], &["y"]),
        vec![int("axis", 0)],
    );
    let e = refusal(&single(axis0, vec![]), None);
    assert!(
        e.contains("node c (Concat): a concatenation along axis 0"),
        "{e}"
    );
    let dangling = node("Relu", "r", &["nowhere"], &["y"]);
    let e = refusal(&single(dangling, vec![]), None);
    assert!(e.contains("\"nowhere\" is produced by no node"), "{e}");
    let leaky = with(
        node("LeakyRelu", "l", &["x"], &["y"]),
        vec![float("alpha", 0.1)],
    );
    assert!(read(&single(leaky, vec![]), None).is_ok());
}

#[test]
fn the_input_size_comes_from_the_user_else_the_file() {
    let relu = || node("Relu", "r", &["x"], &["y"]);
    let fixed = single(relu(), vec![]);
    assert!(read(&fixed, None).is_ok_and(|m| m.input_shape == [1, 3, 8, 8]));
    // As the engines run it: at the size they are given.
    assert!(read(&fixed, Some("3x64x64")).is_ok_and(|m| m.input_shape == [1, 3, 64, 64]));
    let mut open = single(relu(), vec![]);
    if let Some(g) = open.graph.as_mut() {
        g.input = vec![open_input("x", &[None, Some(3), None, None])];
    }
    let e = refusal(&open, None);
    assert!(
        e.contains("open (3x?x?): give it with --input CxHxW"),
        "{e}"
    );
    match read(&open, Some("3x20x30")) {
        Ok(m) => assert_eq!(m.input_shape, vec![1, 3, 20, 30]),
        Err(e) => panic!("{e}"),
    }
    let mut two = single(relu(), vec![]);
    if let Some(g) = two.graph.as_mut() {
        g.input.push(value_info("z", &[1, 3, 8, 8]));
    }
    assert!(refusal(&two, None).contains("exactly one input; this one has 2"));
    let mut flat = single(relu(), vec![]);
    if let Some(g) = flat.graph.as_mut() {
        g.input = vec![value_info("x", &[1, 192])];
    }
    assert!(refusal(&flat, None).contains("not an image batch (N, C, H, W): 1x192"));
    let batch = |n| {
        from_proto(
            &open,
            "m",
            "m.onnx",
            Given {
                input: "3x8x8".parse().ok(),
                batch: Some(n),
            },
        )
    };
    match batch(4) {
        Ok(m) => assert_eq!(m.input_shape, vec![4, 3, 8, 8]),
        Err(e) => panic!("{e}"),
    }
    let fixed_batch = from_proto(
        &fixed,
        "m",
        "m.onnx",
        Given {
            input: None,
            batch: Some(4),
        },
    );
    assert!(fixed_batch.is_ok_and(|m| m.input_shape == [4, 3, 8, 8]));
}

#[test]
fn files_that_are_not_models_are_refused_in_one_sentence() {
    let dir = std::env::temp_dir().join(format!("edgeprof-onnx-read-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let junk = dir.join("junk.onnx");
    if let Err(e) = std::fs::write(&junk, b"\xff\xff\xff not protobuf") {
        panic!("{e}");
    }
    let e = match read_file(&junk, Given::default()) {
        Ok(_) => panic!("read junk"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("junk.onnx is not an ONNX model"), "{e}");
    let e = match read_file(&dir.join("absent.onnx"), Given::default()) {
        Ok(_) => panic!("read nothing"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with("cannot read ") && e.contains("absent.onnx"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let e = refusal(&pb::ModelProto::default(), None);
    assert!(e.contains("holds no graph"), "{e}");
}

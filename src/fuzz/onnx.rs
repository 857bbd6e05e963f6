//! ONNX: tract loading, optimising and running mutated models, with its panics contained.

use super::*;

/// Small models to mutate: a hand-made graph of the operators whose attributes tract checks
/// least (pads, strides, kernel shapes, axes, shape tensors), and a small zoo export.
pub(super) fn onnx_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![crate::models::onnx::encode(
        &crate::engines::tract::tests::tiny_graph(),
    )];
    let params = crate::models::zoo::ModelParams {
        height: 32,
        width: 32,
        num_classes: 4,
        ..crate::models::zoo::ModelParams::default()
    };
    if let Ok(model) = crate::models::zoo::build("shufflenet_v2_x0_5", &params) {
        seeds.push(crate::models::onnx::encode(&crate::models::onnx::to_onnx(
            &model, 1,
        )));
    }
    seeds
}

/// The seeds are sound models, so that mutations start from something tract runs.
#[test]
pub(super) fn onnx_seeds_load_and_run() {
    use crate::engines::tract::TractSession;
    for (i, bytes) in onnx_seeds().iter().enumerate() {
        let session = match TractSession::load_bytes(bytes, "seed", None, 1) {
            Ok(s) => s,
            Err(e) => panic!("seed {i}: {e}"),
        };
        let outcome = session.make_input(1).and_then(|input| session.run(&input));
        match outcome {
            Ok((shape, values)) => {
                assert_eq!(shape.first(), Some(&1), "seed {i}");
                assert!(values.iter().all(|v| v.is_finite()), "seed {i}");
            }
            Err(e) => panic!("seed {i}: {e}"),
        }
    }
}

/// Integers that break shape arithmetic.
pub(super) const ONNX_INTS: &[i64] = &[
    0,
    -1,
    -2,
    1,
    2,
    3,
    7,
    -7,
    64,
    1 << 20,
    i32::MAX as i64,
    i32::MIN as i64,
    i64::MAX,
    i64::MIN,
    -(1 << 40),
    1 << 31,
    1 << 32,
    (1 << 32) + 1,
];

pub(super) const ONNX_FLOATS: &[f32] = &[
    0.0,
    -1.0,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    1e30,
    -1e-30,
];

/// Operators a node may become.
pub(super) const ONNX_OPS: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "Pad",
    "Reshape",
    "Transpose",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "Flatten",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Gemm",
    "MatMul",
    "Add",
    "Mul",
    "Div",
    "Relu",
    "Softmax",
    "BatchNormalization",
    "Resize",
    "Squeeze",
    "Unsqueeze",
    "ReduceMean",
    "Expand",
    "Tile",
    "DepthToSpace",
    "SpaceToDepth",
    "LRN",
    "Clip",
    "Identity",
];

/// Attribute names the operators above read.
pub(super) const ONNX_ATTRIBUTES: &[&str] = &[
    "pads",
    "strides",
    "kernel_shape",
    "dilations",
    "group",
    "axis",
    "axes",
    "perm",
    "split",
    "blocksize",
    "keepdims",
    "auto_pad",
    "ceil_mode",
    "count_include_pad",
    "transA",
    "transB",
    "alpha",
    "beta",
    "epsilon",
    "output_padding",
    "output_shape",
    "size",
    "mode",
];

/// One structural change to a decoded model: an attribute's value, a node's operator or wiring,
/// an initializer's dimensions or data, the input's dimensions.
pub(super) fn mutate_model(rng: &mut ChaCha8Rng, model: &mut tract_onnx::pb::ModelProto) {
    use tract_onnx::pb;
    let Some(graph) = model.graph.as_mut() else {
        return;
    };
    let int = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.8) {
            *pick(rng, ONNX_INTS)
        } else {
            rng.random_range(-10..40)
        }
    };
    match rng.random_range(0..14) {
        // A node appended after the output, reading it and a shape-like int64 initializer
        // (repeats, a shape, pads) of extreme values: a Tile by [2^32, 2^32] makes an output
        // whose element count wraps 2^64.
        12 | 13 => {
            let Some(out) = graph.output.first_mut() else {
                return;
            };
            let from = out.name.clone();
            let to = format!("{from}_appended");
            let op = *pick(
                rng,
                &["Tile", "Expand", "Reshape", "Pad", "Min", "Max", "Sum"],
            );
            let values: Vec<i64> = (0..rng.random_range(1..=4)).map(|_| int(rng)).collect();
            let name = format!("{to}_values");
            graph.initializer.push(pb::TensorProto {
                name: name.clone(),
                dims: vec![values.len() as i64],
                data_type: pb::tensor_proto::DataType::Int64 as i32,
                raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ..Default::default()
            });
            out.name = to.clone();
            out.r#type = None;
            graph.node.push(pb::NodeProto {
                op_type: op.to_string(),
                input: vec![from, name],
                output: vec![to],
                ..Default::default()
            });
        }
        // An attribute value.
        0..=3 if !graph.node.is_empty() => {
            let n = rng.random_range(0..graph.node.len());
            let node = &mut graph.node[n];
            if node.attribute.is_empty() || rng.random_bool(0.2) {
                let name = pick(rng, ONNX_ATTRIBUTES).to_string();
                let values: Vec<i64> = (0..rng.random_range(0..6)).map(|_| int(rng)).collect();
                node.attribute.push(pb::AttributeProto {
                    name,
                    r#type: if values.len() == 1 {
                        pb::attribute_proto::AttributeType::Int as i32
                    } else {
                        pb::attribute_proto::AttributeType::Ints as i32
                    },
                    i: values.first().copied().unwrap_or(0),
                    ints: values,
                    ..Default::default()
                });
                return;
            }
            let a = rng.random_range(0..node.attribute.len());
            let attr = &mut node.attribute[a];
            match rng.random_range(0..6) {
                0 if !attr.ints.is_empty() => {
                    let i = rng.random_range(0..attr.ints.len());
                    attr.ints[i] = int(rng);
                }
                1 => {
                    if rng.random_bool(0.5) {
                        attr.ints.pop();
                    } else {
                        attr.ints.push(int(rng));
                    }
                }
                2 => attr.i = int(rng),
                3 => attr.f = *pick(rng, ONNX_FLOATS),
                4 => attr.r#type = rng.random_range(0..15),
                _ => {
                    node.attribute.remove(a);
                }
            }
        }
        // A node's operator.
        4 if !graph.node.is_empty() => {
            let n = rng.random_range(0..graph.node.len());
            graph.node[n].op_type = pick(rng, ONNX_OPS).to_string();
        }
        // A node's wiring: an input dropped, added, or pointed elsewhere.
        5 if !graph.node.is_empty() => {
            let names: Vec<String> = graph
                .node
                .iter()
                .flat_map(|n| n.output.iter().cloned())
                .chain(graph.initializer.iter().map(|t| t.name.clone()))
                .chain(std::iter::once("input".to_string()))
                .collect();
            let n = rng.random_range(0..graph.node.len());
            let node = &mut graph.node[n];
            match rng.random_range(0..3) {
                0 => {
                    node.input.pop();
                }
                1 => node.input.push(pick(rng, &names).clone()),
                _ if !node.input.is_empty() => {
                    let i = rng.random_range(0..node.input.len());
                    node.input[i] = pick(rng, &names).clone();
                }
                _ => {}
            }
        }
        // A node removed or duplicated.
        6 if !graph.node.is_empty() => {
            let n = rng.random_range(0..graph.node.len());
            if rng.random_bool(0.5) {
                graph.node.remove(n);
            } else {
                let copy = graph.node[n].clone();
                graph.node.insert(n, copy);
            }
        }
        // An initializer's dimensions.
        7 | 8 if !graph.initializer.is_empty() => {
            let t = rng.random_range(0..graph.initializer.len());
            let tensor = &mut graph.initializer[t];
            match rng.random_range(0..3) {
                0 if !tensor.dims.is_empty() => {
                    let i = rng.random_range(0..tensor.dims.len());
                    tensor.dims[i] = int(rng);
                }
                1 => {
                    tensor.dims.push(int(rng).clamp(-1, 8));
                }
                _ => {
                    tensor.dims.pop();
                }
            }
        }
        // An initializer's data: int64 values (shapes, pads, axes) or cut bytes.
        9 if !graph.initializer.is_empty() => {
            let t = rng.random_range(0..graph.initializer.len());
            let tensor = &mut graph.initializer[t];
            if tensor.data_type == pb::tensor_proto::DataType::Int64 as i32
                && tensor.raw_data.len() >= 8
            {
                let slots = tensor.raw_data.len() / 8;
                let i = rng.random_range(0..slots) * 8;
                tensor.raw_data[i..i + 8].copy_from_slice(&int(rng).to_le_bytes());
            } else if rng.random_bool(0.5) {
                let keep = rng.random_range(0..=tensor.raw_data.len());
                tensor.raw_data.truncate(keep);
            } else {
                tensor.data_type = rng.random_range(0..17);
            }
        }
        // The input's dimensions.
        10 => {
            use pb::tensor_shape_proto::dimension::Value;
            if let Some(shape) = graph
                .input
                .first_mut()
                .and_then(|i| i.r#type.as_mut())
                .and_then(|t| match t.value.as_mut() {
                    Some(pb::type_proto::Value::TensorType(t)) => t.shape.as_mut(),
                    _ => None,
                })
            {
                if !shape.dim.is_empty() {
                    let d = rng.random_range(0..shape.dim.len());
                    shape.dim[d].value = match rng.random_range(0..3) {
                        0 => Some(Value::DimParam("N".into())),
                        1 => None,
                        _ => Some(Value::DimValue(int(rng).clamp(-2, 4096))),
                    };
                }
            }
        }
        // The opset.
        _ => {
            if let Some(o) = model.opset_import.first_mut() {
                o.version = *pick(rng, &[1, 6, 9, 10, 11, 12, 13, 17, 18, 21, 99]);
            }
        }
    }
}

/// A structurally mutated model, sometimes with byte mutations on top.
pub(super) fn mutate_onnx(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    use prost::Message;
    let base = pick(rng, seeds);
    let Ok(mut model) = tract_onnx::pb::ModelProto::decode(&base[..]) else {
        return base.clone();
    };
    for _ in 0..rng.random_range(1..=3) {
        mutate_model(rng, &mut model);
    }
    let mut bytes = model.encode_to_vec();
    if rng.random_bool(0.1) {
        mutate_once(rng, &mut bytes, seeds, &[]);
    }
    bytes
}

/// Inputs larger than this are not run (the load and the optimisation are what is fuzzed).
pub(super) const ONNX_RUN_ELEMENTS: usize = 1 << 16;
/// Nor one that makes a tensor larger than this, or whose tensors together take more at once.
pub(super) const ONNX_RUN_BYTES: u64 = 16 << 20;

pub(super) fn run_onnx(_: &mut Scratch, bytes: &[u8]) {
    use crate::engines::tract::TractSession;
    let Ok(session) = TractSession::load_bytes(bytes, "fuzz.onnx", None, 1) else {
        return;
    };
    // Running is for the small models: a mutated one can be valid and merely enormous (seconds
    // per inference, gigabytes of tensors), which is no bug and would stall the campaign.
    if session.input_shape.iter().product::<usize>() > ONNX_RUN_ELEMENTS
        || session.largest_tensor.max(session.peak_bytes) > ONNX_RUN_BYTES
        || !small_dimensions(bytes)
    {
        return;
    }
    if let Ok(input) = session.make_input(1) {
        let _ = session.run(&input);
    }
}

/// Whether every value the analysis sizes keeps each dimension within [`ONNX_RUN_ELEMENTS`]:
/// an empty tensor with a dimension of billions (a `Tile` of 0 × 2^31) takes no memory, yet
/// tract loops over it for seconds an inference — a valid, slow model, no bug.
fn small_dimensions(bytes: &[u8]) -> bool {
    use tract_onnx::prelude::Framework;
    let Ok(proto) = tract_onnx::onnx().proto_model_for_read(&mut &bytes[..]) else {
        return false;
    };
    let Ok(cost) = crate::models::onnx_graph::analyse(&proto, "fuzz", "fuzz.onnx", &[], None)
    else {
        return false;
    };
    cost.nodes.iter().all(|n| {
        n.output_shape
            .as_ref()
            .is_none_or(|s| s.iter().all(|&d| d <= ONNX_RUN_ELEMENTS))
    })
}

pub(super) fn onnx_target() -> Target {
    Target {
        name: "onnx",
        seeds: onnx_seeds,
        dictionary: &[],
        structured: Some(mutate_onnx),
        run: run_onnx,
        short: 300,
    }
}

/// The ONNX reader's seeds: the engine target's, and the PyTorch exports its tests read (the
/// patterns it folds: shape arithmetic, gated activations, chunks and shuffles).
pub(super) fn onnx_reader_seeds() -> Vec<Vec<u8>> {
    let mut seeds = onnx_seeds();
    seeds.extend(super::targets::fixtures(&[
        "onnx/torch/small_opset13.onnx",
        "onnx/torch/small_dynamo.onnx",
    ]));
    seeds
}

/// Reads a model for costs: an error is the expected answer to a broken file, a panic the bug.
pub(super) fn run_onnx_reader(_: &mut Scratch, bytes: &[u8]) {
    use crate::models::onnx_read::{from_proto, Given};
    use prost::Message;
    let Ok(proto) = tract_onnx::pb::ModelProto::decode(bytes) else {
        return;
    };
    for given in [
        Given::default(),
        Given {
            input: Some(crate::models::InputShape {
                channels: 3,
                height: 32,
                width: 32,
            }),
            batch: Some(2),
        },
    ] {
        if let Ok(model) = from_proto(&proto, "fuzz", "fuzz.onnx", given) {
            let _ = crate::models::cost::analyze(&model);
        }
        // The node-by-node analysis of the same file, at the file's shapes and at the given.
        let specs: Vec<crate::models::onnx_graph::InputSpec> = given
            .input
            .map(crate::models::onnx_graph::InputSpec::image)
            .into_iter()
            .collect();
        let _ =
            crate::models::onnx_graph::analyse(&proto, "fuzz", "fuzz.onnx", &specs, given.batch);
    }
}

pub(super) fn onnx_reader_target() -> Target {
    Target {
        name: "onnx-reader",
        seeds: onnx_reader_seeds,
        dictionary: &[],
        structured: Some(mutate_onnx),
        run: run_onnx_reader,
        short: 1_000,
    }
}

//! ONNX writer: turns a [`Model`] into an opset-13 ONNX graph with seeded random weights.
//!
//! Nodes carry the layer names; a layer that needs several ONNX nodes (channel shuffle, an
//! adaptive pooling that is not a plain pooling) names the extra nodes `{layer}.{step}` so that
//! per-node profiles map back to the layer. The weights are the seeded parameters of
//! [`super::weights`], shared with the other engines.

use super::graph::{Model, Op, ValueId};
use super::weights;
use prost::Message;
use rand::distr::{Distribution, Uniform};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use tract_onnx::pb;

/// The opset the writer targets.
pub const OPSET: i64 = 13;
/// ONNX IR version 7 is the one that introduced opset 13.
pub const IR_VERSION: i64 = 7;
/// Seed used when the user gives none.
pub const DEFAULT_SEED: u64 = 20_240_601;

const FLOAT: i32 = pb::tensor_proto::DataType::Float as i32;
const INT64: i32 = pb::tensor_proto::DataType::Int64 as i32;

/// FNV-1a: a stable hash of a tensor name, mixed into the seed.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `count` values uniform in [low, high), reproducible from (seed, name).
pub fn seeded_uniform(seed: u64, name: &str, count: usize, low: f32, high: f32) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ name_hash(name));
    match Uniform::new(low, high) {
        Ok(dist) => (0..count).map(|_| dist.sample(&mut rng)).collect(),
        // An empty interval: every value is `low`.
        Err(_) => vec![low; count],
    }
}

pub fn float_tensor(name: &str, dims: &[usize], data: &[f32]) -> pb::TensorProto {
    let mut raw_data = Vec::with_capacity(data.len() * 4);
    for v in data {
        raw_data.extend_from_slice(&v.to_le_bytes());
    }
    pb::TensorProto {
        name: name.to_string(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: FLOAT,
        raw_data,
        ..Default::default()
    }
}

pub(crate) fn int64_tensor(name: &str, data: &[i64]) -> pb::TensorProto {
    pb::TensorProto {
        name: name.to_string(),
        dims: vec![data.len() as i64],
        data_type: INT64,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

pub(crate) fn ints(name: &str, values: &[usize]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.to_string(),
        r#type: pb::attribute_proto::AttributeType::Ints as i32,
        ints: values.iter().map(|&v| v as i64).collect(),
        ..Default::default()
    }
}

pub(crate) fn int(name: &str, value: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.to_string(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i: value,
        ..Default::default()
    }
}

pub(crate) fn float(name: &str, value: f32) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.to_string(),
        r#type: pb::attribute_proto::AttributeType::Float as i32,
        f: value,
        ..Default::default()
    }
}

pub(crate) fn value_info(name: &str, shape: &[usize]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    let dim = shape
        .iter()
        .map(|&d| Dimension {
            value: Some(Value::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    pb::ValueInfoProto {
        name: name.to_string(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: FLOAT,
                shape: Some(pb::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Collects nodes and initializers while the layers are visited.
struct Writer {
    seed: u64,
    nodes: Vec<pb::NodeProto>,
    initializers: Vec<pb::TensorProto>,
}

impl Writer {
    fn node(
        &mut self,
        op_type: &str,
        name: &str,
        inputs: Vec<String>,
        output: &str,
        attribute: Vec<pb::AttributeProto>,
    ) {
        self.nodes.push(pb::NodeProto {
            op_type: op_type.to_string(),
            name: name.to_string(),
            input: inputs,
            output: vec![output.to_string()],
            attribute,
            ..Default::default()
        });
    }

    /// Adds the layer's seeded parameters as initializers and returns their names.
    fn params(&mut self, op: &Op, layer: &str) -> Vec<String> {
        weights::layer_params(op, layer, self.seed)
            .into_iter()
            .map(|p| {
                self.initializers
                    .push(float_tensor(&p.name, &p.dims, &p.data));
                p.name
            })
            .collect()
    }

    fn constant(&mut self, name: String, dims: &[usize], data: &[f32]) -> String {
        self.initializers.push(float_tensor(&name, dims, data));
        name
    }

    fn ints_constant(&mut self, name: String, data: &[i64]) -> String {
        self.initializers.push(int64_tensor(&name, data));
        name
    }

    fn layer(&mut self, model: &Model, index: usize, names: &HashMap<ValueId, String>) {
        let layer = &model.layers[index];
        let name = layer.name.as_str();
        let out = &names[&ValueId::Layer(index)];
        let mut inputs: Vec<String> = layer.inputs.iter().map(|v| names[v].clone()).collect();
        let in_shape = model.shape_of(layer.inputs[0]).to_vec();
        match &layer.op {
            Op::Conv2d {
                kernel,
                stride,
                padding,
                groups,
                ..
            } => {
                inputs.extend(self.params(&layer.op, name));
                let attrs = vec![
                    ints("kernel_shape", kernel),
                    ints("strides", stride),
                    ints("pads", &[padding[0], padding[1], padding[0], padding[1]]),
                    ints("dilations", &[1, 1]),
                    int("group", *groups as i64),
                ];
                self.node("Conv", name, inputs, out, attrs);
            }
            Op::BatchNorm2d { eps, .. } => {
                inputs.extend(self.params(&layer.op, name));
                let attrs = vec![float("epsilon", *eps), float("momentum", 0.9)];
                self.node("BatchNormalization", name, inputs, out, attrs);
            }
            Op::Relu => self.node("Relu", name, inputs, out, vec![]),
            Op::Relu6 => {
                inputs.push(self.constant(format!("{name}.min"), &[], &[0.0]));
                inputs.push(self.constant(format!("{name}.max"), &[], &[6.0]));
                self.node("Clip", name, inputs, out, vec![]);
            }
            Op::Hardswish => {
                // x · hardsigmoid(x): ONNX's HardSwish needs opset 14, this any runtime reads.
                let gate = format!("{name}.gate");
                let attrs = vec![float("alpha", 1.0 / 6.0), float("beta", 0.5)];
                self.node("HardSigmoid", &gate, inputs.clone(), &gate, attrs);
                inputs.push(gate);
                self.node("Mul", name, inputs, out, vec![]);
            }
            Op::Hardsigmoid => {
                // PyTorch's: relu6(x + 3) / 6, which is ONNX's with alpha 1/6 (not its 0.2).
                let attrs = vec![float("alpha", 1.0 / 6.0), float("beta", 0.5)];
                self.node("HardSigmoid", name, inputs, out, attrs);
            }
            Op::Sigmoid => self.node("Sigmoid", name, inputs, out, vec![]),
            Op::Silu => {
                let gate = format!("{name}.sigmoid");
                self.node("Sigmoid", &gate, inputs.clone(), &gate, vec![]);
                inputs.push(gate);
                self.node("Mul", name, inputs, out, vec![]);
            }
            Op::MaxPool2d {
                kernel,
                stride,
                padding,
                ceil,
            } => {
                // Ceil mode as extra padding at the end (ONNX's padded cells never win either),
                // which every runtime reads alike.
                let end = crate::models::graph::pool_end_padding(
                    &in_shape, *kernel, *stride, *padding, *ceil,
                );
                let pads = [
                    padding[0],
                    padding[1],
                    padding[0] + end[0],
                    padding[1] + end[1],
                ];
                let attrs = vec![
                    ints("kernel_shape", kernel),
                    ints("strides", stride),
                    ints("pads", &pads),
                ];
                self.node("MaxPool", name, inputs, out, attrs);
            }
            Op::AdaptiveAvgPool2d { output } => {
                let (h, w) = (in_shape[2], in_shape[3]);
                if *output == [1, 1] {
                    self.node("GlobalAveragePool", name, inputs, out, vec![]);
                } else if h % output[0] == 0 && w % output[1] == 0 {
                    let k = [h / output[0], w / output[1]];
                    let attrs = vec![ints("kernel_shape", &k), ints("strides", &k)];
                    self.node("AveragePool", name, inputs, out, attrs);
                } else {
                    // Overlapping windows: averaging is separable, so Y = P_h · X · P_wᵀ with
                    // PyTorch's window bounds in the pooling matrices (exact, not approximate).
                    let pw_t = transpose(&weights::pooling_matrix(w, output[1]), output[1], w);
                    let pw_t = self.constant(format!("{name}.cols_matrix"), &[w, output[1]], &pw_t);
                    let ph = weights::pooling_matrix(h, output[0]);
                    let ph = self.constant(format!("{name}.rows_matrix"), &[output[0], h], &ph);
                    let cols = format!("{name}.cols");
                    let x = inputs.remove(0);
                    self.node("MatMul", &cols, vec![x, pw_t], &cols, vec![]);
                    self.node("MatMul", name, vec![ph, cols.clone()], out, vec![]);
                }
            }
            Op::Add => self.node("Add", name, inputs, out, vec![]),
            Op::ChannelScale => self.node("Mul", name, inputs, out, vec![]),
            Op::Concat => self.node("Concat", name, inputs, out, vec![int("axis", 1)]),
            Op::ChannelShuffle { groups } => {
                let [n, c, h, w] = [in_shape[0], in_shape[1], in_shape[2], in_shape[3]];
                let split = [n, *groups, c / groups, h, w].map(|d| d as i64);
                let split = self.ints_constant(format!("{name}.split_shape"), &split);
                let merged = self.ints_constant(
                    format!("{name}.merged_shape"),
                    &[n, c, h, w].map(|d| d as i64),
                );
                let (grouped, swapped) = (format!("{name}.grouped"), format!("{name}.swapped"));
                let x = inputs.remove(0);
                self.node("Reshape", &grouped, vec![x, split], &grouped, vec![]);
                let perm = vec![ints("perm", &[0, 2, 1, 3, 4])];
                self.node("Transpose", &swapped, vec![grouped.clone()], &swapped, perm);
                self.node("Reshape", name, vec![swapped.clone(), merged], out, vec![]);
            }
            Op::ChannelSlice { start, end } => {
                inputs.push(self.ints_constant(format!("{name}.starts"), &[*start as i64]));
                inputs.push(self.ints_constant(format!("{name}.ends"), &[*end as i64]));
                inputs.push(self.ints_constant(format!("{name}.axes"), &[1]));
                self.node("Slice", name, inputs, out, vec![]);
            }
            Op::Flatten => self.node("Flatten", name, inputs, out, vec![int("axis", 1)]),
            Op::Linear { .. } => {
                inputs.extend(self.params(&layer.op, name));
                self.node("Gemm", name, inputs, out, vec![int("transB", 1)]);
            }
            Op::Dropout { .. } => self.node("Dropout", name, inputs, out, vec![]),
        }
    }
}

fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; m.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = m[r * cols + c];
        }
    }
    t
}

/// Builds the ONNX model proto: input "input" (N, C, H, W), output "output".
pub fn to_onnx(model: &Model, seed: u64) -> pb::ModelProto {
    let mut names: HashMap<ValueId, String> = HashMap::new();
    names.insert(ValueId::Input, "input".to_string());
    for (i, layer) in model.layers.iter().enumerate() {
        let id = ValueId::Layer(i);
        let name = if id == model.output {
            "output".to_string()
        } else {
            layer.name.clone()
        };
        names.insert(id, name);
    }
    let mut writer = Writer {
        seed,
        nodes: Vec::new(),
        initializers: Vec::new(),
    };
    for index in 0..model.layers.len() {
        writer.layer(model, index, &names);
    }
    let graph = pb::GraphProto {
        name: model.name.clone(),
        node: writer.nodes,
        initializer: writer.initializers,
        input: vec![value_info("input", &model.input_shape)],
        output: vec![value_info("output", model.output_shape())],
        ..Default::default()
    };
    pb::ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        producer_name: "edgeprof".to_string(),
        producer_version: env!("CARGO_PKG_VERSION").to_string(),
        doc_string: format!(
            "{} with random weights (seed {seed}), input {:?}",
            model.name, model.input_shape
        ),
        graph: Some(graph),
        ..Default::default()
    }
}

/// Serialised ONNX bytes.
pub fn encode(proto: &pb::ModelProto) -> Vec<u8> {
    proto.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::zoo::{self, ModelParams};

    #[test]
    fn weights_are_reproducible_and_name_dependent() {
        let a = seeded_uniform(1, "conv1.weight", 8, -1.0, 1.0);
        let b = seeded_uniform(1, "conv1.weight", 8, -1.0, 1.0);
        let c = seeded_uniform(1, "conv2.weight", 8, -1.0, 1.0);
        let d = seeded_uniform(2, "conv1.weight", 8, -1.0, 1.0);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
    }

    #[test]
    fn pooling_matrix_rows_average_pytorch_windows() {
        let m = weights::pooling_matrix(4, 7);
        // Row 1 averages input cells 0 and 1.
        assert_eq!(&m[4..8], &[0.5, 0.5, 0.0, 0.0]);
        for row in m.chunks(4) {
            let sum: f32 = row.iter().sum();
            assert!((sum - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn export_names_nodes_after_layers_and_counts_parameters() {
        let model = match zoo::build("resnet34", &ModelParams::default()) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        let proto = to_onnx(&model, DEFAULT_SEED);
        let Some(graph) = proto.graph.as_ref() else {
            panic!("no graph")
        };
        assert_eq!(graph.node.len(), model.layers.len());
        assert_eq!(graph.node[0].name, "conv1");
        assert_eq!(
            graph.node.last().map(|n| n.output[0].as_str()),
            Some("output")
        );
        // Trainable parameters + BN running statistics are all initializers.
        let cost = crate::models::cost::analyze(&model);
        let stored: i64 = graph
            .initializer
            .iter()
            .map(|t| t.dims.iter().product::<i64>())
            .sum();
        assert_eq!(stored as u64, cost.total.params + cost.total.buffers);
    }
}

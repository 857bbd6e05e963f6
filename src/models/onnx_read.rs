//! ONNX reader: an ONNX file's layers as a [`Model`], so that what edgeprof knows of the zoo's
//! models — analytic FLOPs and bytes, operator templates, the cost model's prediction — holds
//! for a user's file too.
//!
//! The model it gives is a description for costs, never run: each node becomes the layer of the
//! zoo's vocabulary that costs what it does. Patterns exporters write for one layer are read
//! back as that layer: `x · sigmoid(x)` is a SiLU, `x · hardsigmoid(x)` a Hardswish, a
//! reshape–transpose–reshape of the channels a channel shuffle, the two pooling matrices of an
//! adaptive average pool that pooling. Shape arithmetic (`Shape`, `Gather`, `Concat`, … on
//! constants) is folded. Where a node only costs like a zoo layer it is read as that layer and
//! the docs list it: a clip to any range counts as ReLU6, LeakyReLU as ReLU, Tanh as a sigmoid,
//! Softmax as a sigmoid, an element-wise product of two maps as an addition, an affine map by
//! constants (`Mul`, `Add`, `Sub`, `Div` by a per-channel constant) as a batch norm, an average
//! pooling of overlapping or padded windows as a max pooling of them. Anything else is refused
//! with the operators named: a cost made up for an operator edgeprof does not know would
//! mislead.

use super::graph::{GraphBuilder, Model, Op, ValueId};
use super::InputShape;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use thiserror::Error;
use tract_onnx::pb;

/// Why a file could not be read as a model.
#[derive(Debug, Error, PartialEq)]
pub enum ReadError {
    #[error("cannot read {file}: {reason}")]
    Io { file: String, reason: String },
    #[error("{file} is not an ONNX model: {reason}")]
    Decode { file: String, reason: String },
    #[error(
        "{file} uses operators edgeprof cannot cost: {ops} (the cost model's layers are \
         convolutions, batch norms, activations, poolings, additions, channel scales, \
         concatenations, channel shuffles and slices, flattening and fully connected layers; \
         `edgeprof models info` costs every operator node by node)"
    )]
    Unsupported { file: String, ops: String },
    #[error("{file}: node {node} ({op}): {reason}")]
    Node {
        file: String,
        node: String,
        op: String,
        reason: String,
    },
    #[error("{file}: {reason}")]
    Graph { file: String, reason: String },
}

/// The operators the reader knows.
const KNOWN: [&str; 34] = [
    "Conv",
    "BatchNormalization",
    "Relu",
    "Clip",
    "LeakyRelu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Mul",
    "Add",
    "Sub",
    "Div",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "ReduceMean",
    "Concat",
    "Flatten",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Gemm",
    "MatMul",
    "Slice",
    "Split",
    "Dropout",
    "Identity",
    "Constant",
    "Shape",
    "Gather",
    "Cast",
    "Softmax",
];

/// The input's size and batch, over the file's own (as the engines run a file at the size
/// they are given): the batch is 1 when neither the file nor this sets it; the size must be
/// given when the file leaves it open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Given {
    pub input: Option<InputShape>,
    pub batch: Option<usize>,
}

/// Reads the ONNX file at `path`, its input's open dimensions set by `given`.
pub fn read_file(path: &Path, given: Given) -> Result<Model, ReadError> {
    use prost::Message;
    let file = path.display().to_string();
    // Only a regular file, and at most what an ONNX file can be.
    let bytes = super::onnx_graph::read_model_bytes(path).map_err(|reason| ReadError::Io {
        file: file.clone(),
        reason,
    })?;
    let proto = pb::ModelProto::decode(&bytes[..]).map_err(|e| ReadError::Decode {
        file: file.clone(),
        reason: format!("{e}{}", super::onnx_graph::format_hint(path)),
    })?;
    let name = path
        .file_stem()
        .map_or_else(|| file.clone(), |s| s.to_string_lossy().into_owned());
    from_proto(&proto, &name, &file, given)
}

/// A value of the graph as the reader follows it.
#[derive(Debug, Clone)]
enum Val {
    /// A tensor a layer (or the input) produces.
    Tensor(ValueId),
    /// A constant: its dimensions, and its values when it is small (shapes, axes, scalars).
    Const {
        dims: Vec<usize>,
        data: Option<Vec<f64>>,
    },
    /// A channel shuffle half done: reshaped to (N, groups, C/groups, H, W), then `swapped`.
    Grouped {
        x: ValueId,
        groups: usize,
        swapped: bool,
    },
    /// An adaptive average pool half done: its columns pooled to `width`.
    ColsPooled { x: ValueId, width: usize },
}

/// Constants larger than this keep their dimensions only (weights are never needed).
const SMALL: usize = 4096;

/// Little-endian values of `N` bytes each.
fn le<const N: usize>(raw: &[u8], value: impl Fn([u8; N]) -> f64) -> Vec<f64> {
    raw.chunks_exact(N)
        .filter_map(|c| <[u8; N]>::try_from(c).ok())
        .map(value)
        .collect()
}

fn const_of(t: &pb::TensorProto) -> Val {
    use pb::tensor_proto::DataType;
    let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
    let count = nodes::count(&dims);
    let data = (count <= SMALL)
        .then(|| {
            let raw = &t.raw_data;
            let dt = t.data_type;
            let values: Vec<f64> = if dt == DataType::Float as i32 {
                if raw.is_empty() {
                    t.float_data.iter().map(|&v| v as f64).collect()
                } else {
                    le(raw, |b| f32::from_le_bytes(b) as f64)
                }
            } else if dt == DataType::Int64 as i32 {
                if raw.is_empty() {
                    t.int64_data.iter().map(|&v| v as f64).collect()
                } else {
                    le(raw, |b| i64::from_le_bytes(b) as f64)
                }
            } else if dt == DataType::Int32 as i32 {
                if raw.is_empty() {
                    t.int32_data.iter().map(|&v| v as f64).collect()
                } else {
                    le(raw, |b| i32::from_le_bytes(b) as f64)
                }
            } else if dt == DataType::Double as i32 {
                t.double_data.clone()
            } else {
                return None;
            };
            (values.len() == count).then_some(values)
        })
        .flatten();
    Val::Const { dims, data }
}

fn attr<'a>(node: &'a pb::NodeProto, name: &str) -> Option<&'a pb::AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

fn attr_int(node: &pb::NodeProto, name: &str, default: i64) -> i64 {
    attr(node, name).map_or(default, |a| a.i)
}

fn attr_float(node: &pb::NodeProto, name: &str, default: f32) -> f32 {
    attr(node, name).map_or(default, |a| a.f)
}

fn attr_ints(node: &pb::NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(node, name).map(|a| a.ints.clone())
}

/// The name a node's layer takes: the node's, else its first output's, else its position.
pub(crate) fn node_name(node: &pb::NodeProto, index: usize) -> String {
    if !node.name.is_empty() {
        node.name.clone()
    } else if let Some(o) = node.output.first().filter(|o| !o.is_empty()) {
        o.clone()
    } else {
        format!("{}_{index}", node.op_type)
    }
}

/// The input's (N, C, H, W): the file's dimensions, `input` where they are open or given.
fn input_shape(
    graph: &pb::GraphProto,
    file: &str,
    given: Given,
) -> Result<(String, [usize; 4]), ReadError> {
    let inits: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<&pb::ValueInfoProto> = graph
        .input
        .iter()
        .filter(|v| !inits.contains(v.name.as_str()))
        .collect();
    let graph_err = |reason: String| ReadError::Graph {
        file: file.to_string(),
        reason,
    };
    let [input] = inputs[..] else {
        return Err(graph_err(format!(
            "edgeprof reads models with exactly one input; this one has {}",
            inputs.len()
        )));
    };
    use pb::tensor_shape_proto::dimension::Value;
    let dims: Vec<Option<usize>> = match input.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => t
            .shape
            .as_ref()
            .map(|s| {
                s.dim
                    .iter()
                    .map(|d| match d.value {
                        Some(Value::DimValue(v)) if v > 0 => Some(v as usize),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let shown = |d: &[Option<usize>]| {
        d.iter()
            .map(|v| v.map_or("?".to_string(), |v| v.to_string()))
            .collect::<Vec<_>>()
            .join("x")
    };
    if dims.len() != 4 {
        return Err(graph_err(format!(
            "its input {} is not an image batch (N, C, H, W): {}",
            input.name,
            if dims.is_empty() {
                "no shape given".to_string()
            } else {
                shown(&dims)
            }
        )));
    }
    let n = given.batch.or(dims[0]).unwrap_or(1);
    let chw = match (given.input, [dims[1], dims[2], dims[3]]) {
        (Some(g), _) => [g.channels, g.height, g.width],
        (None, [Some(c), Some(h), Some(w)]) => [c, h, w],
        (None, _) => {
            return Err(graph_err(format!(
                "its input's size is open ({}): give it with --input CxHxW",
                shown(&dims[1..])
            )))
        }
    };
    let shape = [n, chw[0], chw[1], chw[2]];
    if nodes::elements(&shape).is_none_or(|e| e > nodes::MAX_ELEMENTS) {
        return Err(graph_err(format!(
            "its input {n}x{}x{}x{} is larger than any tensor edgeprof can cost",
            chw[0], chw[1], chw[2]
        )));
    }
    Ok((input.name.clone(), shape))
}

/// The gate nodes an exporter writes for one activation — `Mul(x, Sigmoid(x))` for SiLU,
/// `Mul(x, HardSigmoid(x))` for Hardswish — found before reading: the gate (skipped) and the
/// product (read as the activation).
fn fused_gates(graph: &pb::GraphProto) -> (HashSet<usize>, HashMap<usize, Op>) {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for n in &graph.node {
        for i in &n.input {
            *uses.entry(i.as_str()).or_default() += 1;
        }
    }
    for o in &graph.output {
        *uses.entry(o.name.as_str()).or_default() += 1;
    }
    let producer: HashMap<&str, usize> = graph
        .node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect();
    let mut skip = HashSet::new();
    let mut fused = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        let [a, b] = &n.input[..] else { continue };
        if n.op_type != "Mul" {
            continue;
        }
        for (x, gate) in [(a, b), (b, a)] {
            let Some(&g) = producer.get(gate.as_str()) else {
                continue;
            };
            let gate_node = &graph.node[g];
            let op = match gate_node.op_type.as_str() {
                "Sigmoid" => Op::Silu,
                "HardSigmoid" => Op::Hardswish,
                _ => continue,
            };
            if gate_node.input.first() == Some(x) && uses.get(gate.as_str()) == Some(&1) {
                skip.insert(g);
                fused.insert(i, op);
                break;
            }
        }
    }
    (skip, fused)
}

/// Reads a decoded ONNX model; `name` names the model, `file` the file in messages.
pub fn from_proto(
    proto: &pb::ModelProto,
    name: &str,
    file: &str,
    given: Given,
) -> Result<Model, ReadError> {
    let graph = proto.graph.as_ref().ok_or_else(|| ReadError::Graph {
        file: file.to_string(),
        reason: "the file holds no graph".to_string(),
    })?;
    let mut unknown: Vec<(String, usize)> = Vec::new();
    for n in &graph.node {
        let custom = !(n.domain.is_empty() || n.domain == "ai.onnx");
        if custom || !KNOWN.contains(&n.op_type.as_str()) {
            let label = if custom {
                format!("{}.{}", n.domain, n.op_type)
            } else {
                n.op_type.clone()
            };
            match unknown.iter_mut().find(|(o, _)| *o == label) {
                Some((_, count)) => *count += 1,
                None => unknown.push((label, 1)),
            }
        }
    }
    if !unknown.is_empty() {
        let ops: Vec<String> = unknown
            .iter()
            .map(|(op, count)| format!("{op} ×{count}"))
            .collect();
        return Err(ReadError::Unsupported {
            file: file.to_string(),
            ops: ops.join(", "),
        });
    }
    let (input_name, shape) = input_shape(graph, file, given)?;
    let mut reader = Reader {
        builder: GraphBuilder::new(name, shape),
        values: HashMap::new(),
        names: HashSet::new(),
    };
    reader
        .values
        .insert(input_name, Val::Tensor(ValueId::Input));
    for t in &graph.initializer {
        reader.values.insert(t.name.clone(), const_of(t));
    }
    let (skip, fused) = fused_gates(graph);
    for (i, node) in graph.node.iter().enumerate() {
        if skip.contains(&i) {
            continue;
        }
        let layer = node_name(node, i);
        reader
            .node(node, &layer, fused.get(&i))
            .map_err(|reason| ReadError::Node {
                file: file.to_string(),
                node: layer.clone(),
                op: node.op_type.clone(),
                reason,
            })?;
    }
    let out = graph.output.first().ok_or_else(|| ReadError::Graph {
        file: file.to_string(),
        reason: "the graph names no output".to_string(),
    })?;
    match reader.values.get(&out.name) {
        Some(Val::Tensor(ValueId::Layer(i))) => {
            let i = *i;
            let mut model = reader.builder.finish();
            model.output = ValueId::Layer(i);
            Ok(model)
        }
        _ => Err(ReadError::Graph {
            file: file.to_string(),
            reason: format!("its output {} is produced by no layer", out.name),
        }),
    }
}

/// Follows the graph's values while the nodes are read, in the file's (topological) order.
struct Reader {
    builder: GraphBuilder,
    values: HashMap<String, Val>,
    names: HashSet<String>,
}

mod nodes;
#[cfg(test)]
mod tests;
mod views;

/// A layer name not used yet: `name`, else `name.2`, `name.3`, …
fn unique(names: &mut HashSet<String>, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut k = 2;
    while names.contains(&candidate) {
        candidate = format!("{name}.{k}");
        k += 1;
    }
    names.insert(candidate.clone());
    candidate
}

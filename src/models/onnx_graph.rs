//! Every node of an ONNX file costed by its operator's definition: FLOPs, multiply-accumulates,
//! parameters and the bytes it reads and writes, for any model a user brings — detectors, OCR,
//! segmentation, audio and small transformers as much as the zoo's classifiers.
//!
//! Shapes are inferred node by node from the inputs' shapes (the file's own fixed dimensions,
//! its open ones bound by the user), and small constant tensors are computed as the graph
//! computes them (`Shape`, `Gather`, `Concat`, `Range`, `ConstantOfShape`, comparisons, …), so
//! that reshapes, slices and resizes whose targets are computed at run time still get their
//! shapes. A node whose inputs are all known before the model runs (weights, shape arithmetic)
//! is folded: engines compute it once at load time, so it costs nothing per inference.
//!
//! Nothing is refused for one node. An operator this module does not know, a custom domain's
//! operator, or a node whose output shape depends on the values it computes (`NonZero`,
//! `NonMaxSuppression`) is listed as not costed with its reason; so is every node after it
//! whose shapes cannot be known, and the totals say what share of the nodes they cover.
//!
//! Counting rules (per output element unless said otherwise; an exponential, a square root or
//! an error function counts as one FLOP, as the zoo's analytic model counts them):
//! - Convolutions (any rank, grouped, integer): MACs = outputs · (C_in / groups) · kernel
//!   volume; FLOPs = 2 · MACs, plus one per output for a bias. Transposed convolutions:
//!   MACs = inputs · (C_out / groups) · kernel volume.
//! - MatMul, Gemm and their integer forms: MACs = batch · M · N · K; Gemm's C adds M · N.
//!   Einsum: the product of every index's size per extra operand.
//! - LSTM: 4 gates of H · (I + H) MACs per step, direction and batch row, and 32 FLOPs per
//!   hidden unit (biases, three sigmoids, two tanh, the cell and hidden updates); GRU: 3 gates
//!   and 22; RNN: 1 gate and 6.
//! - Element-wise: Relu, Neg, Abs, Floor, … 1; LeakyRelu, PRelu, Clip 2; HardSigmoid 3;
//!   Sigmoid, Tanh, HardSwish 4; Softplus, Elu 3; Gelu, Mish 6; binary operators 1 (variadic
//!   Sum/Max/Min: one per extra operand, Mean one more); Where 1; quantize and dequantize 2.
//! - BatchNormalization 2 (scale and shift once folded; its running mean and variance are
//!   buffers, not parameters); instance, layer, group and mean-variance normalisation 7
//!   (mean, variance, normalise, scale and shift); LRN 2 · size + 3; Softmax and LogSoftmax 5.
//! - Poolings: max (window − 1) comparisons, average and global average the window's size,
//!   Lp 2 · window. Reductions: one per input element (mean, sum of squares and L2 one more
//!   per input element; the rest one per input element less one per output).
//! - Resize: nearest 0, linear 2 · 2^d − 1 and cubic 2 · 4^d − 1 per output for d resized
//!   axes. TopK: inputs · ⌈log2(k + 1)⌉ comparisons; ArgMax/ArgMin: inputs − outputs.
//! - Data movement (Concat, Transpose, Pad, Tile, Expand, Gather, Resize's nearest, …) computes
//!   nothing but reads and writes its tensors; Reshape, Flatten, Squeeze, Unsqueeze, Identity,
//!   Dropout, Slice and Split are views: no FLOPs and no traffic (as the zoo counts them).
//! - Parameters are the elements of the weights a node reads (an initializer or a folded
//!   constant, each counted once in the totals); shape, axis, index and quantization-scale
//!   operands are not parameters. The minimal DRAM traffic of a node is its parameters, its
//!   inputs and its outputs at their element types' sizes, as the zoo's model counts it.
//!
//! `If` is costed by the branch its condition selects when that condition is known before the
//! model runs (give an input its value to fix it); otherwise it is listed as not costed and its
//! outputs keep the shapes both branches agree on. `Loop` and `Scan` are listed as not costed.

use super::InputShape;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use thiserror::Error;
use tract_onnx::pb;

mod chain;
mod fusion;
mod inputs;
mod ops;
mod preflight;
mod walk;
pub use chain::{tensor_proto, Chain, Crossing};
pub use fusion::fused_groups;
pub use inputs::{
    bind_file_inputs, bind_inputs, bind_undeclared, input_names, BoundInput, InputError, InputSpec,
    InputSpecError,
};
pub(crate) use preflight::check_runnable;
pub use preflight::{Heaviest, Unrunnable};
use walk::Walk;

crate::error::kinds!(crate::error::Kind::Failed => AnalysisError);

#[cfg(test)]
mod tests;

/// The largest ONNX file read: protobuf cannot encode a message past 2 GiB, so a file larger
/// than that is no ONNX model (weights past it live in external data files, never read here).
pub const MAX_FILE_BYTES: u64 = 2 << 30;

/// The words of the walk's reasons that say a node cannot run at all, on any engine (as
/// opposed to a node whose shapes the walk cannot follow): the reasons are made with them, and
/// [`preflight`] tells those nodes from the others by them.
pub(crate) mod impossible {
    pub const CANNOT_BROADCAST: &str = "cannot be broadcast together";
    pub const TOO_LARGE: &str = "larger than any model's";
    pub const SIZES_OVERFLOW: &str = "its sizes overflow 64 bits";
    pub const COST_OVERFLOWS: &str = "its cost overflows 64 bits";
    /// A `Tile` whose repeats are negative or not one per input dimension (the ONNX standard
    /// allows neither; tract looped over such a one for a minute).
    pub const BAD_REPEATS: &str = "do not fit a rank-";
    pub const ALL: [&str; 5] = [
        CANNOT_BROADCAST,
        TOO_LARGE,
        SIZES_OVERFLOW,
        COST_OVERFLOWS,
        BAD_REPEATS,
    ];
}

/// Tensors larger than this many elements are refused as no real model's (2^44: 64 TiB at
/// float32), which also keeps every FLOP count within 64 bits.
pub const MAX_ELEMENTS: u64 = 1 << 44;

/// Constants at most this large keep their values (shape arithmetic, scalars, small tables).
const SMALL: usize = 4096;

/// Why a file could not be analysed at all.
#[derive(Debug, Error, PartialEq)]
pub enum AnalysisError {
    #[error("cannot read ONNX file {file}: {reason}")]
    Io { file: String, reason: String },
    #[error("{file} is not an ONNX model ({reason}); edgeprof reads ONNX files{hint}")]
    Decode {
        file: String,
        reason: String,
        hint: String,
    },
    #[error("{file}: {reason}")]
    Inputs { file: String, reason: String },
    #[error("{file} cannot be cut into blocks for placement: {reason}")]
    Unplaceable { file: String, reason: String },
}

/// A protobuf decoding error in a few words: its reason without the path of fields it was
/// found under (which runs to thousands of characters in deeply nested graphs).
pub(crate) fn short_decode_error(e: &prost::DecodeError) -> String {
    let text = e.to_string();
    if text.contains("recursion limit reached") {
        return "its graphs are nested deeper than protobuf's recursion limit".into();
    }
    match text.rsplit_once(": ") {
        Some((_, reason)) => format!("failed to decode Protobuf message: {reason}"),
        None => text,
    }
}

/// The name ONNX gives an element type (`float32`, `int64`, …).
pub fn elem_type_name(t: i32) -> String {
    use pb::tensor_proto::DataType as D;
    match D::try_from(t) {
        Ok(D::Float) => "float32".into(),
        Ok(D::Double) => "float64".into(),
        Ok(D::Float16) => "float16".into(),
        Ok(d) => d.as_str_name().to_ascii_lowercase(),
        Err(_) => format!("type {t}"),
    }
}

/// Whether an element type is an integer one (bool included).
pub fn is_integer_type(t: i32) -> bool {
    use pb::tensor_proto::DataType as D;
    matches!(
        D::try_from(t),
        Ok(D::Int64
            | D::Int32
            | D::Int16
            | D::Int8
            | D::Uint8
            | D::Uint16
            | D::Uint32
            | D::Uint64
            | D::Bool)
    )
}

/// Bytes of one element (a 4-bit type rounds up to 1; a string counts as a pointer).
pub(crate) fn elem_bytes(t: i32) -> u64 {
    use pb::tensor_proto::DataType as D;
    match D::try_from(t) {
        Ok(D::Double | D::Int64 | D::Uint64 | D::Complex64 | D::String) => 8,
        Ok(D::Complex128) => 16,
        Ok(D::Float | D::Int32 | D::Uint32) => 4,
        Ok(D::Float16 | D::Bfloat16 | D::Int16 | D::Uint16) => 2,
        _ => 1,
    }
}

/// One input of the model as it was analysed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorDesc {
    pub name: String,
    pub elem_type: String,
    pub shape: Vec<usize>,
    /// A scalar input's value, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

/// One output of the model as it was analysed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputDesc {
    pub name: String,
    pub elem_type: Option<String>,
    pub shape: Option<Vec<usize>>,
}

/// One node's cost. A node that was not costed has zeros and says why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeCost {
    pub name: String,
    /// The operator, with its domain when not the standard one (`com.microsoft.FusedConv`).
    pub op: String,
    /// Its first output's shape, when known.
    pub output_shape: Option<Vec<usize>>,
    pub macs: u64,
    pub flops: u64,
    /// Weight elements it reads.
    pub params: u64,
    /// Non-trainable state it reads (batch norms' running mean and variance).
    pub buffers: u64,
    pub param_bytes: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub dram_bytes: u64,
    /// Computed once at load time from constants: costs nothing per inference.
    pub folded: bool,
    /// Why it was not costed; None when it was.
    pub not_costed: Option<String>,
    /// When it was not costed only because an input's shape is unknown: the node that
    /// input's unknown shape goes back to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// What, beside its work, sets how an engine runs it (for the cost model's templates).
    #[serde(skip)]
    pub form: Form,
}

/// A run-time node's form: its first data input's shape, how many of its data inputs are
/// computed at run time (not weights), and a windowed operator's kernel, stride and groups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Form {
    pub input_shape: Vec<usize>,
    pub runtime_inputs: usize,
    /// Kernel (each spatial axis), strides and groups of Conv, ConvTranspose and the pools.
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub groups: usize,
    /// Whether it works along an axis other than the last (a softmax over channels, say).
    pub inner_axis: bool,
    /// The values its run-time data inputs are, and those it produces (by name).
    pub reads: Vec<String>,
    /// The bytes of each of `reads`.
    pub read_bytes: Vec<u64>,
    pub writes: Vec<String>,
}

/// The operators that were not costed, each once with how many nodes and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotCosted {
    pub op: String,
    pub nodes: usize,
    pub reason: String,
    /// The first such node.
    pub first: String,
}

/// A whole file's analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphCost {
    pub model: String,
    pub inputs: Vec<TensorDesc>,
    /// The model's outputs; a shape (and type) unknown when a node before it was not costed.
    pub outputs: Vec<OutputDesc>,
    pub nodes: Vec<NodeCost>,
    /// Totals over the costed nodes; parameters count each weight once.
    pub total: super::cost::CostTotals,
    /// Nodes in all (branch bodies that were costed included) and those costed.
    pub node_count: usize,
    pub costed: usize,
    /// The operators not costed for a reason of their own (each once, with its count).
    pub not_costed: Vec<NotCosted>,
    /// Nodes not costed only because their inputs come after one of those (shapes unknown).
    pub downstream: usize,
}

impl GraphCost {
    /// The share of nodes costed, 0–1.
    pub fn coverage(&self) -> f64 {
        if self.node_count == 0 {
            1.0
        } else {
            self.costed as f64 / self.node_count as f64
        }
    }

    /// The totals as the zoo's cost model gives them.
    pub fn cost_totals(&self) -> super::cost::CostTotals {
        self.total.clone()
    }
}

/// The name a node has in its file: a node of an `If`'s branch is analysed as
/// `{if}/then/{node}` (or `/else/`), while an engine that inlines the branch keeps `{node}`.
pub fn source_node_name(name: &str) -> &str {
    let cut = [
        name.rfind("/then/").map(|i| i + 6),
        name.rfind("/else/").map(|i| i + 6),
    ]
    .into_iter()
    .flatten()
    .max();
    cut.map_or(name, |i| &name[i..])
}

/// What the file at `path` is when it is no ONNX file (by its first bytes or its name) and how
/// to convert it, as a clause to end a sentence with; empty when it looks like nothing known.
pub fn format_hint(path: &Path) -> String {
    use std::io::Read;
    let mut head = [0u8; 16];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    other_format_hint(path, &head[..n])
}

/// What a model file is when it is no ONNX file, by its first bytes or its name.
fn other_format_hint(path: &Path, head: &[u8]) -> String {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let tflite = head.get(4..8) == Some(b"TFL3") || ext == "tflite";
    let zip = head.starts_with(b"PK\x03\x04");
    if tflite {
        "; this is a TensorFlow Lite model: `edgeprof bench --engine tflite` runs it as it is; \
         the analyses read ONNX (convert it with `python -m tf2onnx.convert --tflite FILE \
         --output FILE.onnx`)"
            .into()
    } else if zip || matches!(ext.as_str(), "pt" | "pth" | "pt2" | "ptl") {
        "; this looks like a PyTorch file: `edgeprof bench --engine pytorch` runs a TorchScript \
         or exported program as it is; the analyses read ONNX (export it with \
         `torch.onnx.export(model, example, \"model.onnx\")`)"
            .into()
    } else if matches!(ext.as_str(), "pb" | "h5" | "keras" | "savedmodel") {
        "; this looks like a TensorFlow or Keras model: convert it with `python -m \
         tf2onnx.convert`"
            .into()
    } else {
        String::new()
    }
}

/// Reads a regular file of at most `MAX_FILE_BYTES`, refusing devices, FIFOs and directories.
pub(crate) fn read_model_bytes(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "it is {} bytes; an ONNX file holds at most 2 GiB (larger weights live in \
             external data files)",
            meta.len()
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err("it grew past 2 GiB while being read".into());
    }
    Ok(bytes)
}

/// Analyses the ONNX file at `path` with its inputs bound by `given` (and `batch`, which sets
/// the first dimension of a model's single image input when `CxHxW` is given the old way).
pub fn analyse_file(
    path: &Path,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<GraphCost, AnalysisError> {
    let (proto, file) = decode_file(path)?;
    let name = path
        .file_stem()
        .map_or_else(|| file.clone(), |s| s.to_string_lossy().into_owned());
    analyse(&proto, &name, &file, given, batch)
}

/// The ONNX model in the file at `path`, and the file's name for messages.
fn decode_file(path: &Path) -> Result<(pb::ModelProto, String), AnalysisError> {
    use prost::Message;
    let file = path.display().to_string();
    let bytes = read_model_bytes(path).map_err(|reason| AnalysisError::Io {
        file: file.clone(),
        reason,
    })?;
    let proto = pb::ModelProto::decode(&bytes[..]).map_err(|e| AnalysisError::Decode {
        file: file.clone(),
        reason: short_decode_error(&e),
        hint: other_format_hint(path, &bytes[..bytes.len().min(16)]),
    })?;
    Ok((proto, file))
}

/// Operators that mark an ONNX file as quantized already (QDQ pairs, QOperator and integer
/// kernels).
pub const QUANTIZED_OPS: &[&str] = &[
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "MatMulInteger",
    "ConvInteger",
];

/// The quantization operators of the ONNX file at `path` (its main graph), each named once in
/// the order they first appear; empty for a float model.
pub fn quantized_ops(path: &Path) -> Result<Vec<String>, AnalysisError> {
    let (proto, _) = decode_file(path)?;
    Ok(quantized_ops_of(&proto))
}

fn quantized_ops_of(proto: &pb::ModelProto) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for node in proto.graph.iter().flat_map(|g| &g.node) {
        let op = node.op_type.as_str();
        let quantized = QUANTIZED_OPS.contains(&op) || op.starts_with("QLinear");
        if quantized && !found.iter().any(|f| f == op) {
            found.push(op.to_string());
        }
    }
    found
}

/// A value as the analysis follows it: its element type, shape, whether it is known before
/// the model runs, and its values when small and known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct T {
    pub elem: i32,
    pub shape: Vec<usize>,
    pub constant: bool,
    /// One of the file's weights (an initializer, a `Constant`, or computed at load from
    /// them alone); a constant computed from shapes (a detector's anchor grid) is not.
    pub weight: bool,
    pub value: Option<Vec<f64>>,
}

impl T {
    fn elements(&self) -> u64 {
        self.shape
            .iter()
            .fold(1u64, |n, &d| n.saturating_mul(d as u64))
    }
}

/// A value's state: known, or unknown since a named node.
type Slot = Result<T, String>;

/// Little-endian values of `N` bytes each.
fn le<const N: usize>(raw: &[u8], value: impl Fn([u8; N]) -> f64) -> Vec<f64> {
    raw.chunks_exact(N)
        .filter_map(|c| <[u8; N]>::try_from(c).ok())
        .map(value)
        .collect()
}

/// Every value of a numeric tensor proto (None for types this does not read, or a count that
/// does not match its dimensions).
fn tensor_values(t: &pb::TensorProto) -> Option<Vec<f64>> {
    let count = checked_elements(
        &t.dims
            .iter()
            .map(|&d| d.max(0) as usize)
            .collect::<Vec<_>>(),
    )
    .ok()?;
    let v = values_of(t)?;
    (v.len() as u64 == count).then_some(v)
}

fn values_of(t: &pb::TensorProto) -> Option<Vec<f64>> {
    use pb::tensor_proto::DataType as D;
    let raw = &t.raw_data;
    Some(match D::try_from(t.data_type).ok()? {
        D::Float if raw.is_empty() => t.float_data.iter().map(|&v| v as f64).collect(),
        D::Float => le(raw, |b| f32::from_le_bytes(b) as f64),
        D::Double if raw.is_empty() => t.double_data.clone(),
        D::Double => le(raw, f64::from_le_bytes),
        D::Int64 if raw.is_empty() => t.int64_data.iter().map(|&v| v as f64).collect(),
        D::Int64 => le(raw, |b| i64::from_le_bytes(b) as f64),
        D::Int32 | D::Int16 | D::Int8 | D::Uint8 | D::Uint16 | D::Bool if raw.is_empty() => {
            t.int32_data.iter().map(|&v| v as f64).collect()
        }
        D::Int32 => le(raw, |b| i32::from_le_bytes(b) as f64),
        D::Int16 => le(raw, |b| i16::from_le_bytes(b) as f64),
        D::Uint16 => le(raw, |b| u16::from_le_bytes(b) as f64),
        D::Int8 => raw.iter().map(|&b| b as i8 as f64).collect(),
        D::Uint8 | D::Bool => raw.iter().map(|&b| b as f64).collect(),
        D::Uint32 | D::Uint64 if raw.is_empty() => {
            t.uint64_data.iter().map(|&v| v as f64).collect()
        }
        D::Uint32 => le(raw, |b| u32::from_le_bytes(b) as f64),
        D::Uint64 => le(raw, |b| u64::from_le_bytes(b) as f64),
        // Half-precision values are their bits: in int32_data, or two bytes each.
        D::Float16 | D::Bfloat16 => {
            let bits: Vec<u16> = if raw.is_empty() {
                t.int32_data.iter().map(|&v| v as u16).collect()
            } else {
                raw.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect()
            };
            let half = t.data_type == D::Float16 as i32;
            bits.iter()
                .map(|&b| {
                    if half {
                        tract_onnx::prelude::f16::from_bits(b).to_f64()
                    } else {
                        f32::from_bits(u32::from(b) << 16) as f64
                    }
                })
                .collect()
        }
        _ => return None,
    })
}

/// A tensor proto as a value: its dimensions always, its values when small and of a numeric
/// type this reads.
pub(crate) fn tensor_of(t: &pb::TensorProto) -> Result<T, String> {
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        shape.push(usize::try_from(d).map_err(|_| format!("a negative dimension {d}"))?);
    }
    let count = checked_elements(&shape)?;
    let value = (count <= SMALL as u64)
        .then(|| values_of(t).filter(|v| v.len() as u64 == count))
        .flatten();
    Ok(T {
        elem: t.data_type,
        shape,
        constant: true,
        weight: false,
        value,
    })
}

/// An initializer as a value: a weight of the file, or why it cannot be read (said as the
/// reason of the nodes that read it).
fn initializer(t: &pb::TensorProto) -> Slot {
    tensor_of(t)
        .map(|mut v| {
            v.weight = true;
            v
        })
        .map_err(|e| format!("its input {} cannot be read: {e}", t.name))
}

/// Elements of a shape, refused past [`MAX_ELEMENTS`].
pub(crate) fn checked_elements(shape: &[usize]) -> Result<u64, String> {
    let mut n: u64 = 1;
    for &d in shape {
        n = n
            .checked_mul(d as u64)
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| {
                format!(
                    "a tensor of shape {} is {} (over 2^44 elements)",
                    show_shape(shape),
                    impossible::TOO_LARGE
                )
            })?;
    }
    Ok(n)
}

pub fn show_shape(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// Analyses a decoded ONNX model; `name` names the model, `file` the file in messages.
pub fn analyse(
    proto: &pb::ModelProto,
    name: &str,
    file: &str,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<GraphCost, AnalysisError> {
    let Walked {
        walk, scope, bound, ..
    } = walked(proto, file, given, batch)?;
    let graph = proto.graph.as_ref();
    let outputs = graph
        .map(|g| g.output.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|o| match scope.get(&o.name) {
            Some(Ok(t)) => OutputDesc {
                name: o.name.clone(),
                elem_type: Some(elem_type_name(t.elem)),
                shape: Some(t.shape.clone()),
            },
            _ => OutputDesc {
                name: o.name.clone(),
                elem_type: None,
                shape: None,
            },
        })
        .collect();
    summarise(walk, name, &bound, outputs)
}

/// A model walked: every value it holds after the walk (known, or why not), and its inputs
/// as bound.
pub(crate) struct Walked {
    walk: Walk,
    pub scope: HashMap<String, Slot>,
    pub bound: Vec<(String, T)>,
    pub bound_inputs: Vec<BoundInput>,
}

/// Binds a decoded model's inputs and walks its graph.
pub(crate) fn walked(
    proto: &pb::ModelProto,
    file: &str,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<Walked, AnalysisError> {
    let inputs_err = |reason: String| AnalysisError::Inputs {
        file: file.to_string(),
        reason,
    };
    let graph = proto
        .graph
        .as_ref()
        .ok_or_else(|| inputs_err("the file holds no graph".into()))?;
    let bound_inputs = bind_inputs(graph, given, batch).map_err(|e| inputs_err(e.0))?;
    Ok(walk_bound(proto, graph, bound_inputs))
}

/// Walks a decoded model's graph with its inputs bound.
pub(crate) fn walk_bound(
    proto: &pb::ModelProto,
    graph: &pb::GraphProto,
    bound_inputs: Vec<BoundInput>,
) -> Walked {
    let opset = proto
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(13, |o| o.version);
    let bound: Vec<(String, T)> = bound_inputs
        .iter()
        .cloned()
        .map(|b| {
            let value = b.values.filter(|v| v.len() <= SMALL);
            (
                b.name,
                T {
                    elem: b.elem,
                    shape: b.shape,
                    constant: false,
                    weight: false,
                    value,
                },
            )
        })
        .collect();
    let open_scalars = bound
        .iter()
        .filter(|(_, t)| t.shape.is_empty() && t.value.is_none())
        .map(|(n, t)| format!("{n}={}:VALUE", elem_type_name(t.elem)))
        .collect();
    let mut walk = Walk {
        opset,
        open_scalars,
        nodes: Vec::new(),
        counted: std::collections::HashSet::new(),
        total: super::cost::CostTotals::default(),
    };
    let mut scope: HashMap<String, Slot> = HashMap::new();
    for t in &graph.initializer {
        scope.insert(t.name.clone(), initializer(t));
    }
    for (n, t) in &bound {
        scope.insert(n.clone(), Ok(t.clone()));
    }
    walk.graph(graph, &mut scope, "");
    Walked {
        walk,
        scope,
        bound,
        bound_inputs,
    }
}

/// The walk's nodes and totals as the analysis reports them.
fn summarise(
    walk: Walk,
    name: &str,
    bound: &[(String, T)],
    outputs: Vec<OutputDesc>,
) -> Result<GraphCost, AnalysisError> {
    let mut not_costed: Vec<NotCosted> = Vec::new();
    let downstream = walk
        .nodes
        .iter()
        .filter(|n| n.not_costed.is_some() && n.after.is_some())
        .count();
    for n in walk.nodes.iter().filter(|n| n.after.is_none()) {
        if let Some(reason) = &n.not_costed {
            match not_costed
                .iter_mut()
                .find(|c| c.op == n.op && c.reason == *reason)
            {
                Some(c) => c.nodes += 1,
                None => not_costed.push(NotCosted {
                    op: n.op.clone(),
                    nodes: 1,
                    reason: reason.clone(),
                    first: n.name.clone(),
                }),
            }
        }
    }
    let costed = walk.nodes.iter().filter(|n| n.not_costed.is_none()).count();
    Ok(GraphCost {
        model: name.to_string(),
        inputs: bound
            .iter()
            .map(|(n, t)| TensorDesc {
                name: n.clone(),
                elem_type: elem_type_name(t.elem),
                shape: t.shape.clone(),
                value: t
                    .value
                    .as_ref()
                    .filter(|_| t.shape.is_empty())
                    .and_then(|v| v.first().copied()),
            })
            .collect(),
        outputs,
        node_count: walk.nodes.len(),
        costed,
        downstream,
        nodes: walk.nodes,
        total: walk.total,
        not_costed,
    })
}

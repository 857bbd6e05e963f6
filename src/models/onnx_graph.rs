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

mod ops;
#[cfg(test)]
mod tests;

/// The largest ONNX file read: protobuf cannot encode a message past 2 GiB, so a file larger
/// than that is no ONNX model (weights past it live in external data files, never read here).
pub const MAX_FILE_BYTES: u64 = 2 << 30;

/// Tensors larger than this many elements are refused as no real model's (2^44: 64 TiB at
/// float32), which also keeps every FLOP count within 64 bits.
pub const MAX_ELEMENTS: u64 = 1 << 44;

/// Constants at most this large keep their values (shape arithmetic, scalars, small tables).
const SMALL: usize = 4096;

/// Why a file could not be analysed at all.
#[derive(Debug, Error, PartialEq)]
pub enum AnalysisError {
    #[error("cannot read {file}: {reason}")]
    Io { file: String, reason: String },
    #[error("{file} is not an ONNX model ({reason}); edgeprof reads ONNX files{hint}")]
    Decode {
        file: String,
        reason: String,
        hint: String,
    },
    #[error("{file}: {reason}")]
    Inputs { file: String, reason: String },
}

/// An input as the user gives it: `NAME=DIMS`, `NAME=TYPE:DIMS`, a scalar's value
/// `NAME=TYPE:VALUE` (for an input the file declares as a scalar), or `CxHxW` for a model with
/// one image input (with the batch apart).
#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    /// The input's name; None for the model's first input.
    pub name: Option<String>,
    pub elem: Option<i32>,
    pub dims: Option<Vec<usize>>,
    pub value: Option<f64>,
    /// A whole tensor's values (read from an ONNX `.pb` file), row-major; kept when small.
    pub values: Option<Vec<f64>>,
    /// `CxHxW` given the old way: the last three dimensions of a 4-D input.
    pub image: Option<InputShape>,
}

impl InputSpec {
    /// The old way: `CxHxW` of a model's one image input.
    pub fn image(shape: InputShape) -> InputSpec {
        InputSpec {
            name: None,
            elem: None,
            dims: None,
            value: None,
            values: None,
            image: Some(shape),
        }
    }

    /// An input given as a tensor (an ONNX test's `input_0.pb`): its type, shape and, when
    /// small, its values.
    pub fn from_tensor(
        name: Option<String>,
        tensor: &pb::TensorProto,
    ) -> Result<InputSpec, String> {
        let t = tensor_of(tensor)?;
        // Values of a type this does not read leave the input its type and shape only.
        let values = t.value.or_else(|| tensor_values(tensor));
        Ok(InputSpec {
            name,
            elem: Some(t.elem),
            dims: Some(t.shape),
            value: None,
            values,
            image: None,
        })
    }

    /// The tensor in an ONNX `.pb` file, unnamed (an expected output).
    pub fn from_pb_file(path: &Path) -> Result<InputSpec, String> {
        Self::from_file(None, path)
    }

    /// `NAME=@FILE`: the tensor in an ONNX `.pb` file (as ONNX's test data hold them).
    fn from_file(name: Option<String>, path: &Path) -> Result<InputSpec, String> {
        use prost::Message;
        let bytes =
            read_model_bytes(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let no_tensor = |why: String| format!("{} holds no ONNX tensor ({why})", path.display());
        if bytes.is_empty() {
            return Err(no_tensor("it is empty".into()));
        }
        let tensor =
            pb::TensorProto::decode(&bytes[..]).map_err(|e| no_tensor(short_decode_error(&e)))?;
        if tensor.data_type == 0 {
            return Err(no_tensor("it names no element type".into()));
        }
        Self::from_tensor(name, &tensor)
    }
}

#[derive(Debug, PartialEq)]
pub struct InputSpecError {
    pub text: String,
    pub why: String,
    /// The text is well formed but names a file that cannot be read as a tensor.
    pub file: bool,
}

impl std::fmt::Display for InputSpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.file {
            write!(f, "input {:?}: {}", self.text, self.why)
        } else {
            write!(
                f,
                "input {:?} is not NAME=DIMS (images=1x3x640x640), NAME=TYPE:DIMS \
                 (ids=int64:1x77), NAME=TYPE:VALUE for a scalar (sr=int64:16000), NAME=@FILE.pb \
                 or CxHxW (3x224x224): {}",
                self.text, self.why
            )
        }
    }
}

impl std::error::Error for InputSpecError {}

impl std::str::FromStr for InputSpec {
    type Err = InputSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |why: &str| InputSpecError {
            text: text.to_string(),
            why: why.to_string(),
            file: false,
        };
        let (name, rest) = match text.split_once('=') {
            Some((n, r)) => {
                let n = n.trim();
                if n.is_empty() {
                    return Err(err("the name before = is empty"));
                }
                (Some(n.to_string()), r.trim())
            }
            None => (None, text.trim()),
        };
        if let Some(file) = rest.strip_prefix('@') {
            if file.trim().is_empty() {
                return Err(err("no file after @"));
            }
            return Self::from_file(name, Path::new(file.trim())).map_err(|why| InputSpecError {
                text: text.to_string(),
                why,
                file: true,
            });
        }
        let (elem, body) = match rest.split_once(':') {
            Some((t, b)) => (
                Some(elem_type_named(t.trim()).ok_or_else(|| {
                    err(&format!(
                        "unknown element type {:?} (float32, float16, int64, int32, int8, \
                         uint8, bool, …)",
                        t.trim()
                    ))
                })?),
                b.trim(),
            ),
            None => (None, rest),
        };
        if body.is_empty() {
            return Err(err("no dimensions"));
        }
        let parts: Vec<&str> = body.split(['x', 'X', '×']).map(str::trim).collect();
        let dims: Option<Vec<usize>> = parts.iter().map(|p| p.parse::<usize>().ok()).collect();
        let value = if parts.len() == 1 {
            match body.to_ascii_lowercase().as_str() {
                "true" => Some(1.0),
                "false" => Some(0.0),
                _ => body.parse::<f64>().ok().filter(|v| v.is_finite()),
            }
        } else {
            None
        };
        if dims.is_none() && value.is_none() {
            if parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(err("a dimension is larger than any tensor's"));
            }
            return Err(err("dimensions are whole numbers joined by x"));
        }
        if dims.as_ref().is_some_and(|d| d.len() > 1 && d.contains(&0)) {
            return Err(err("a dimension is 0"));
        }
        if name.is_none() && elem.is_none() {
            if let Ok(image) = body.parse::<InputShape>() {
                return Ok(InputSpec::image(image));
            }
        }
        Ok(InputSpec {
            name,
            elem,
            dims,
            value,
            values: None,
            image: None,
        })
    }
}

/// The ONNX element type a user's name stands for.
fn elem_type_named(name: &str) -> Option<i32> {
    use pb::tensor_proto::DataType as D;
    let t = match name.to_ascii_lowercase().as_str() {
        "float32" | "f32" | "float" => D::Float,
        "float16" | "f16" | "half" => D::Float16,
        "bfloat16" | "bf16" => D::Bfloat16,
        "float64" | "f64" | "double" => D::Double,
        "int64" | "i64" => D::Int64,
        "int32" | "i32" => D::Int32,
        "int16" | "i16" => D::Int16,
        "int8" | "i8" => D::Int8,
        "uint8" | "u8" => D::Uint8,
        "uint16" | "u16" => D::Uint16,
        "uint32" | "u32" => D::Uint32,
        "uint64" | "u64" => D::Uint64,
        "bool" => D::Bool,
        _ => return None,
    };
    Some(t as i32)
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

/// One input of the model bound as the user gave it: name, ONNX element type, shape, and the
/// values when given (a scalar's, or a `.pb` file's).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundInput {
    pub name: String,
    pub elem: i32,
    pub shape: Vec<usize>,
    pub values: Option<Vec<f64>>,
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
}

/// Totals over the costed nodes; parameters count each weight once.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    pub macs: u64,
    pub flops: u64,
    pub params: u64,
    pub buffers: u64,
    pub param_bytes: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub dram_bytes: u64,
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
    pub total: Totals,
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
        let t = &self.total;
        super::cost::CostTotals {
            macs: t.macs,
            flops: t.flops,
            params: t.params,
            buffers: t.buffers,
            param_bytes: t.param_bytes,
            input_bytes: t.input_bytes,
            output_bytes: t.output_bytes,
            dram_bytes: t.dram_bytes,
        }
    }
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
        "; this is a TensorFlow Lite model, which edgeprof does not read: convert it with \
         `python -m tf2onnx.convert --tflite FILE --output FILE.onnx`"
            .into()
    } else if zip || matches!(ext.as_str(), "pt" | "pth" | "pt2" | "ptl") {
        "; this looks like a PyTorch file: export it with `torch.onnx.export(model, example, \
         \"model.onnx\")`"
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

/// The inputs of the ONNX file at `path` bound by `given`, as [`bind_inputs`] binds them.
pub fn bind_file_inputs(
    path: &Path,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<Vec<BoundInput>, AnalysisError> {
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
    let inputs_err = |reason: String| AnalysisError::Inputs {
        file: file.clone(),
        reason,
    };
    let graph = proto
        .graph
        .as_ref()
        .ok_or_else(|| inputs_err("the file holds no graph".into()))?;
    bind_inputs(graph, given, batch).map_err(inputs_err)
}

/// Analyses the ONNX file at `path` with its inputs bound by `given` (and `batch`, which sets
/// the first dimension of a model's single image input when `CxHxW` is given the old way).
pub fn analyse_file(
    path: &Path,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<GraphCost, AnalysisError> {
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
    let name = path
        .file_stem()
        .map_or_else(|| file.clone(), |s| s.to_string_lossy().into_owned());
    analyse(&proto, &name, &file, given, batch)
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
        self.shape.iter().map(|&d| d as u64).product()
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
                    "a tensor of shape {} is larger than any model's (over 2^44 elements)",
                    show_shape(shape)
                )
            })?;
    }
    Ok(n)
}

pub(crate) fn show_shape(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// A declared dimension: fixed, or open under a symbol (empty when anonymous).
#[derive(Debug, Clone, PartialEq)]
enum Dim {
    Fixed(usize),
    Open(String),
}

fn declared(v: &pb::ValueInfoProto) -> (i32, Option<Vec<Dim>>) {
    use pb::tensor_shape_proto::dimension::Value;
    match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => (
            t.elem_type,
            t.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(Value::DimValue(v)) if *v > 0 => Dim::Fixed(*v as usize),
                        // "?" is what some exporters write for an anonymous dimension.
                        Some(Value::DimParam(p)) if p != "?" => Dim::Open(p.clone()),
                        _ => Dim::Open(String::new()),
                    })
                    .collect()
            }),
        ),
        None => (0, None),
    }
}

fn show_declared(dims: &[Dim]) -> String {
    let dims: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(v) => v.to_string(),
            Dim::Open(s) if s.is_empty() => "?".into(),
            Dim::Open(s) => s.clone(),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// The model's inputs (graph inputs that are no initializer), each bound: the file's fixed
/// dimensions, the user's where given (a contradiction refused), a symbol bound once holds
/// everywhere, and an open leading dimension of an input of rank ≥ 2 is a batch of 1.
pub fn bind_inputs(
    graph: &pb::GraphProto,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<Vec<BoundInput>, String> {
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<&pb::ValueInfoProto> = graph
        .input
        .iter()
        .filter(|v| !inits.contains(v.name.as_str()))
        .collect();
    let names: Vec<&str> = inputs.iter().map(|v| v.name.as_str()).collect();
    for spec in given {
        if let Some(n) = &spec.name {
            if !names.contains(&n.as_str()) {
                return Err(format!(
                    "it has no input named {n:?} (its inputs: {})",
                    names.join(", ")
                ));
            }
        }
    }
    if batch == Some(0) {
        return Err("the batch must be at least 1".into());
    }
    for (k, spec) in given.iter().enumerate() {
        if let Some(n) = &spec.name {
            if given[..k].iter().any(|s| s.name.as_ref() == Some(n)) {
                return Err(format!("input {n} is given twice"));
            }
        }
    }
    let unnamed: Vec<&InputSpec> = given.iter().filter(|s| s.name.is_none()).collect();
    if unnamed.len() > 1 {
        return Err("more than one input given without a name: name them (NAME=DIMS)".into());
    }
    let mut symbols: HashMap<String, usize> = HashMap::new();
    let mut bound = Vec::new();
    for (k, v) in inputs.iter().enumerate() {
        if matches!(&v.r#type, Some(t) if t.value.is_none()) {
            return Err(format!(
                "input {} is not a tensor (a sequence, a map or an optional), which edgeprof \
                 does not analyse",
                v.name
            ));
        }
        let (decl_elem, decl) = declared(v);
        let spec = given
            .iter()
            .find(|s| s.name.as_deref() == Some(v.name.as_str()))
            .or_else(|| (k == 0).then(|| unnamed.first().copied()).flatten());
        let elem = spec.and_then(|s| s.elem).unwrap_or(if decl_elem == 0 {
            pb::tensor_proto::DataType::Float as i32
        } else {
            decl_elem
        });
        if decl_elem != 0 && elem != decl_elem {
            return Err(format!(
                "input {} is {} in the file, not {}",
                v.name,
                elem_type_name(decl_elem),
                elem_type_name(elem)
            ));
        }
        let mut value = None;
        let dims: Vec<usize> = match (spec, &decl) {
            (Some(s), Some(d)) if d.is_empty() && s.value.is_some() => {
                value = s.value.map(|x| vec![x]);
                Vec::new()
            }
            (
                Some(InputSpec {
                    values: Some(v),
                    dims: Some(g),
                    ..
                }),
                _,
            ) => {
                value = Some(v.clone());
                g.clone()
            }
            (Some(s), _) if s.value.is_some() && s.dims.is_none() => {
                return Err(format!(
                    "input {}: {} is a value, but the input is not a scalar (give its \
                     dimensions)",
                    v.name,
                    s.value.unwrap_or_default()
                ))
            }
            (
                Some(InputSpec {
                    image: Some(img), ..
                }),
                d,
            ) => {
                let rank = d.as_ref().map_or(4, Vec::len);
                if rank != 4 {
                    return Err(format!(
                        "input {} is not an image batch (N, C, H, W) but {}: give it as {}=DIMS",
                        v.name,
                        d.as_deref()
                            .map_or_else(|| "undeclared".into(), show_declared),
                        v.name
                    ));
                }
                let n = batch.map(Ok).unwrap_or_else(|| match d.as_deref() {
                    Some([Dim::Fixed(n), ..]) => Ok(*n),
                    _ => Ok::<usize, String>(1),
                })?;
                vec![n, img.channels, img.height, img.width]
            }
            (Some(InputSpec { dims: Some(g), .. }), _) => {
                if let (Some(b), Some(&first)) = (batch, g.first()) {
                    if g.len() >= 2 && first != b {
                        return Err(format!(
                            "--batch {b} contradicts input {}'s first dimension {first}",
                            v.name
                        ));
                    }
                }
                g.clone()
            }
            (_, Some(d)) => {
                let mut out = Vec::with_capacity(d.len());
                for (i, dim) in d.iter().enumerate() {
                    out.push(match dim {
                        Dim::Fixed(n) if i == 0 && batch.is_some() && d.len() >= 2 => {
                            batch.unwrap_or(*n)
                        }
                        Dim::Fixed(n) => *n,
                        Dim::Open(s) if !s.is_empty() && symbols.contains_key(s) => symbols[s],
                        Dim::Open(_) if i == 0 && d.len() >= 2 => batch.unwrap_or(1),
                        Dim::Open(_) => {
                            return Err(format!(
                                "input {} has open dimensions ({}): give them with --input \
                                 {}=DIMS",
                                v.name,
                                show_declared(d),
                                v.name
                            ))
                        }
                    });
                }
                out
            }
            (_, None) => {
                return Err(format!(
                    "input {} declares no shape: give it with --input {}=DIMS",
                    v.name, v.name
                ))
            }
        };
        if let Some(d) = &decl {
            if d.len() != dims.len() {
                return Err(format!(
                    "input {} has {} dimensions in the file ({}), not {} ({})",
                    v.name,
                    d.len(),
                    show_declared(d),
                    dims.len(),
                    show_shape(&dims)
                ));
            }
            for (i, (dim, &n)) in d.iter().zip(&dims).enumerate() {
                match dim {
                    Dim::Fixed(f) if *f != n => {
                        return Err(format!(
                            "input {} fixes dimension {i} at {f} in the file; {} contradicts \
                             it",
                            v.name,
                            show_shape(&dims)
                        ))
                    }
                    Dim::Open(s) if !s.is_empty() => match symbols.get(s) {
                        Some(&prev) if prev != n => {
                            return Err(format!(
                                "dimension {s} is {prev} in one input and {n} in input {}",
                                v.name
                            ))
                        }
                        _ => {
                            symbols.insert(s.clone(), n);
                        }
                    },
                    _ => {}
                }
            }
        }
        checked_elements(&dims).map_err(|e| format!("input {}: {e}", v.name))?;
        if let (Some(v2), true) = (&value, dims.is_empty()) {
            check_scalar(&v.name, elem, v2.first().copied().unwrap_or_default())?;
        }
        if let Some(v2) = &value {
            if v2.len() as u64 != checked_elements(&dims)? {
                return Err(format!(
                    "input {} has {} values for its shape {}",
                    v.name,
                    v2.len(),
                    show_shape(&dims)
                ));
            }
        }
        bound.push(BoundInput {
            name: v.name.clone(),
            elem,
            shape: dims,
            values: value,
        });
    }
    Ok(bound)
}

/// A scalar input's value fits its element type: a whole number in range for an integer, 0 or
/// 1 for a bool.
fn check_scalar(name: &str, elem: i32, value: f64) -> Result<(), String> {
    use pb::tensor_proto::DataType as D;
    let (lo, hi) = match D::try_from(elem) {
        Ok(D::Bool) => (0.0, 1.0),
        Ok(D::Int8) => (-128.0, 127.0),
        Ok(D::Uint8) => (0.0, 255.0),
        Ok(D::Int16) => (-32768.0, 32767.0),
        Ok(D::Uint16) => (0.0, 65535.0),
        Ok(D::Int32) => (-2147483648.0, 2147483647.0),
        Ok(D::Uint32) => (0.0, 4294967295.0),
        // Exactly representable integers only.
        Ok(D::Int64) => (-9007199254740992.0, 9007199254740992.0),
        Ok(D::Uint64) => (0.0, 9007199254740992.0),
        _ => return Ok(()),
    };
    if value.fract() != 0.0 || value < lo || value > hi {
        return Err(format!(
            "input {name} is {}: {value} is not one of its values",
            elem_type_name(elem)
        ));
    }
    Ok(())
}

/// Analyses a decoded ONNX model; `name` names the model, `file` the file in messages.
pub fn analyse(
    proto: &pb::ModelProto,
    name: &str,
    file: &str,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<GraphCost, AnalysisError> {
    let inputs_err = |reason: String| AnalysisError::Inputs {
        file: file.to_string(),
        reason,
    };
    let graph = proto
        .graph
        .as_ref()
        .ok_or_else(|| inputs_err("the file holds no graph".into()))?;
    let opset = proto
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(13, |o| o.version);
    let bound: Vec<(String, T)> = bind_inputs(graph, given, batch)
        .map_err(inputs_err)?
        .into_iter()
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
        total: Totals::default(),
    };
    let mut scope: HashMap<String, Slot> = HashMap::new();
    for t in &graph.initializer {
        scope.insert(t.name.clone(), initializer(t));
    }
    for (n, t) in &bound {
        scope.insert(n.clone(), Ok(t.clone()));
    }
    walk.graph(graph, &mut scope, "");
    let outputs = graph
        .output
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

/// The graph's nodes in an order where every node comes after those that produce its inputs
/// (the file's own order where it already is one, as ONNX requires; exporters sometimes do
/// not keep it), and the nodes on a cycle, which have no such place.
fn topological(graph: &pb::GraphProto, scope: &HashMap<String, Slot>) -> (Vec<usize>, Vec<usize>) {
    let producer: HashMap<&str, usize> = graph
        .node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect();
    let deps: Vec<Vec<usize>> = graph
        .node
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut d: Vec<usize> = n
                .input
                .iter()
                .filter(|x| !x.is_empty() && !scope.contains_key(x.as_str()))
                .filter_map(|x| producer.get(x.as_str()).copied())
                .filter(|&p| p != i || n.output.iter().all(|o| o.is_empty()))
                .collect();
            // A node that reads its own output is on a cycle of one.
            if n.input
                .iter()
                .any(|x| !x.is_empty() && n.output.contains(x))
            {
                d.push(i);
            }
            d
        })
        .collect();
    let mut state = vec![0u8; graph.node.len()]; // 0 new, 1 on the stack, 2 placed
    let mut order = Vec::with_capacity(graph.node.len());
    let mut cyclic = Vec::new();
    for start in 0..graph.node.len() {
        if state[start] != 0 {
            continue;
        }
        // Iterative depth-first search: (node, next dependency to visit).
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some((node, k)) = stack.pop() {
            if let Some(&dep) = deps[node].get(k) {
                stack.push((node, k + 1));
                match state[dep] {
                    0 => {
                        state[dep] = 1;
                        stack.push((dep, 0));
                    }
                    // Back to a node still open: a cycle.
                    1 if !cyclic.contains(&dep) => cyclic.push(dep),
                    _ => {}
                }
            } else {
                state[node] = 2;
                if !cyclic.contains(&node) {
                    order.push(node);
                }
            }
        }
    }
    // What depends on a node of a cycle cannot come before it either: it is listed after.
    cyclic.sort_unstable();
    (order, cyclic)
}

/// The walk over a graph and its costed branch bodies.
struct Walk {
    opset: i64,
    nodes: Vec<NodeCost>,
    /// Scalar inputs given no value, as `NAME=TYPE:VALUE` to suggest.
    open_scalars: Vec<String>,
    /// Weights already counted in the totals (by the name of the value that holds them).
    counted: std::collections::HashSet<String>,
    total: Totals,
}

/// The name a node goes by: its own, else its first output's, else its operator and place.
fn node_name(node: &pb::NodeProto, index: usize, prefix: &str) -> String {
    let own = if !node.name.is_empty() {
        node.name.clone()
    } else if let Some(o) = node.output.first().filter(|o| !o.is_empty()) {
        o.clone()
    } else {
        format!("{}_{index}", node.op_type)
    };
    format!("{prefix}{own}")
}

fn op_label(node: &pb::NodeProto) -> String {
    if node.domain.is_empty() || node.domain == "ai.onnx" {
        node.op_type.clone()
    } else {
        format!("{}.{}", node.domain, node.op_type)
    }
}

impl NodeCost {
    fn named(name: &str, op: &str) -> NodeCost {
        NodeCost {
            name: name.to_string(),
            op: op.to_string(),
            output_shape: None,
            macs: 0,
            flops: 0,
            params: 0,
            buffers: 0,
            param_bytes: 0,
            input_bytes: 0,
            output_bytes: 0,
            dram_bytes: 0,
            folded: false,
            not_costed: None,
            after: None,
        }
    }
}

impl Walk {
    fn graph(&mut self, graph: &pb::GraphProto, scope: &mut HashMap<String, Slot>, prefix: &str) {
        let (order, cyclic) = topological(graph, scope);
        // Nodes on a cycle never have all their inputs: their outputs are unknown to the nodes
        // that read them, and each is listed.
        for &i in &cyclic {
            for o in &graph.node[i].output {
                scope.insert(o.clone(), Err(format!("its input {o} comes from a cycle")));
            }
        }
        for i in order {
            let node = &graph.node[i];
            let name = node_name(node, i, prefix);
            self.node(node, &name, scope);
        }
        for i in cyclic {
            let node = &graph.node[i];
            let name = node_name(node, i, prefix);
            self.nodes.push(NodeCost {
                not_costed: Some("the graph has a cycle through this node".into()),
                ..NodeCost::named(&name, &op_label(node))
            });
        }
    }

    fn node(&mut self, node: &pb::NodeProto, name: &str, scope: &mut HashMap<String, Slot>) {
        let op = op_label(node);
        let inputs: Vec<Option<Slot>> =
            node.input
                .iter()
                .map(|i| {
                    if i.is_empty() {
                        None
                    } else {
                        Some(
                            scope.get(i).cloned().unwrap_or_else(|| {
                                Err(format!("its input {i} is produced nowhere"))
                            }),
                        )
                    }
                })
                .collect();
        let mut record = NodeCost::named(name, &op);
        let unknown = |why: String, scope: &mut HashMap<String, Slot>| {
            for o in &node.output {
                scope.insert(o.clone(), Err(name.to_string()));
            }
            why
        };
        // An input that is unknown: this node cannot be costed either.
        if let Some(Some(Err(since))) = inputs.iter().find(|i| matches!(i, Some(Err(_)))) {
            let why = if since.starts_with("its input") {
                since.clone()
            } else {
                record.after = Some(since.clone());
                format!("its input's shape is unknown (since node {since})")
            };
            // Later nodes trace back to the same first node.
            let root = record.after.clone().unwrap_or_else(|| name.to_string());
            for o in &node.output {
                scope.insert(o.clone(), Err(root.clone()));
            }
            record.not_costed = Some(why);
            self.nodes.push(record);
            return;
        }
        let known: Vec<Option<&T>> = inputs
            .iter()
            .map(|i| i.as_ref().and_then(|s| s.as_ref().ok()))
            .collect();
        if op == "If" {
            self.branch(node, name, &known, scope, record);
            return;
        }
        match ops::eval(node, self.opset, &known) {
            Err(why) => {
                record.not_costed = Some(unknown(why, scope));
                self.nodes.push(record);
            }
            Ok(out) => {
                // Shapes are known here, so a shape's or a size's value is too.
                let folded = !out.outputs.is_empty()
                    && (matches!(op.as_str(), "Shape" | "Size")
                        || known.iter().flatten().all(|t| t.constant)
                            && !ops::RUN_TIME.contains(&op.as_str()));
                record.output_shape = out.outputs.first().map(|t| t.shape.clone());
                // A folded node's outputs are weights when it is a Constant or every input it
                // computes on is one (a dequantized or reshaped weight).
                let data: Vec<&T> = known
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| ops::role(&op, *k) != ops::Role::Control)
                    .filter_map(|(_, t)| *t)
                    .collect();
                let weight = folded
                    && (op == "Constant" || (!data.is_empty() && data.iter().all(|t| t.weight)));
                if folded {
                    record.folded = true;
                } else {
                    self.charge(node, &op, &known, &out, &mut record);
                }
                for (o, mut t) in node.output.iter().zip(out.outputs) {
                    if o.is_empty() {
                        continue;
                    }
                    // Values stay known where they were computed from known ones (a shape
                    // from a given input's value), even where the node runs each time.
                    t.constant = folded;
                    t.weight = weight;
                    scope.insert(o.clone(), Ok(t));
                }
                self.nodes.push(record);
            }
        }
    }

    /// Fills in a run-time node's parameters and traffic and adds it to the totals.
    fn charge(
        &mut self,
        node: &pb::NodeProto,
        op: &str,
        known: &[Option<&T>],
        out: &ops::Out,
        record: &mut NodeCost,
    ) {
        record.macs = out.macs;
        record.flops = out.flops;
        for (k, t) in known.iter().enumerate() {
            let Some(t) = t else { continue };
            let role = ops::role(op, k);
            let bytes = t.elements().saturating_mul(elem_bytes(t.elem));
            if t.constant && t.weight {
                if role == ops::Role::Control {
                    continue;
                }
                let first_time = self.counted.insert(node.input[k].clone());
                match role {
                    ops::Role::Control => continue,
                    ops::Role::Buffer => {
                        record.buffers += t.elements();
                        if first_time {
                            self.total.buffers += t.elements();
                        }
                    }
                    ops::Role::Data => {
                        record.params += t.elements();
                        if first_time {
                            self.total.params += t.elements();
                        }
                    }
                }
                record.param_bytes += bytes;
            } else if role != ops::Role::Control {
                record.input_bytes += bytes;
            }
        }
        record.output_bytes = out
            .outputs
            .iter()
            .map(|t| t.elements().saturating_mul(elem_bytes(t.elem)))
            .sum();
        record.dram_bytes = if out.view {
            0
        } else {
            record.param_bytes + record.input_bytes + record.output_bytes
        };
        let t = &mut self.total;
        t.macs = t.macs.saturating_add(record.macs);
        t.flops = t.flops.saturating_add(record.flops);
        t.param_bytes += record.param_bytes;
        t.input_bytes += record.input_bytes;
        t.output_bytes += record.output_bytes;
        t.dram_bytes += record.dram_bytes;
    }

    /// `If`: the branch its condition selects, costed node by node under this one's name; with
    /// the condition unknown until the model runs, not costed, its outputs shaped as both
    /// branches agree.
    fn branch(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        known: &[Option<&T>],
        scope: &mut HashMap<String, Slot>,
        mut record: NodeCost,
    ) {
        let body = |attr: &str| {
            node.attribute
                .iter()
                .find(|a| a.name == attr)
                .and_then(|a| a.g.as_ref())
        };
        let (Some(then), Some(els)) = (body("then_branch"), body("else_branch")) else {
            record.not_costed = Some("it has no then_branch or else_branch".into());
            for o in &node.output {
                scope.insert(o.clone(), Err(name.to_string()));
            }
            self.nodes.push(record);
            return;
        };
        let cond = known
            .first()
            .copied()
            .flatten()
            .and_then(|t| t.value.as_ref())
            .and_then(|v| v.first().copied());
        match cond {
            Some(c) => {
                let (taken, label) = if c != 0.0 {
                    (then, "then")
                } else {
                    (els, "else")
                };
                self.nodes.push(record);
                let mut inner = scope.clone();
                for t in &taken.initializer {
                    inner.insert(t.name.clone(), initializer(t));
                }
                self.graph(taken, &mut inner, &format!("{name}/{label}/"));
                for (o, b) in node.output.iter().zip(&taken.output) {
                    let v = inner
                        .get(&b.name)
                        .cloned()
                        .unwrap_or_else(|| Err(name.to_string()));
                    scope.insert(o.clone(), v);
                }
            }
            None => {
                // Shapes both branches agree on, found without counting either.
                let mut shapes = Vec::new();
                for g in [then, els] {
                    let mut side = Walk {
                        opset: self.opset,
                        open_scalars: Vec::new(),
                        nodes: Vec::new(),
                        counted: self.counted.clone(),
                        total: Totals::default(),
                    };
                    let mut inner = scope.clone();
                    for t in &g.initializer {
                        inner.insert(t.name.clone(), initializer(t));
                    }
                    side.graph(g, &mut inner, "");
                    shapes.push(
                        g.output
                            .iter()
                            .map(|o| inner.get(&o.name).cloned())
                            .collect::<Vec<_>>(),
                    );
                }
                record.not_costed = Some(if self.open_scalars.is_empty() {
                    "its condition is known only when the model runs".into()
                } else {
                    format!(
                        "its condition is known only when the model runs (a scalar input's \
                         value may fix it: --input {})",
                        self.open_scalars.join(" --input ")
                    )
                });
                for (k, o) in node.output.iter().enumerate() {
                    let a = shapes[0].get(k).cloned().flatten();
                    let b = shapes[1].get(k).cloned().flatten();
                    let v = match (a, b) {
                        (Some(Ok(a)), Some(Ok(b))) if a.shape == b.shape && a.elem == b.elem => {
                            Ok(T {
                                constant: false,
                                weight: false,
                                value: None,
                                ..a
                            })
                        }
                        _ => Err(name.to_string()),
                    };
                    scope.insert(o.clone(), v);
                }
                self.nodes.push(record);
            }
        }
    }
}

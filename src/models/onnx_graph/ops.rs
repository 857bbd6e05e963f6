//! One node at a time: its outputs' element types and shapes (and values, where small and
//! known), and the work it does, by the operator's definition in the ONNX specification.

use super::{checked_elements, show_shape, SMALL, T};
use tract_onnx::pb;
use tract_onnx::pb::tensor_proto::DataType as D;

/// A node's outputs and work.
#[derive(Debug, Clone, Default)]
pub(crate) struct Out {
    pub outputs: Vec<T>,
    pub macs: u64,
    pub flops: u64,
    /// Moves no data (a view of its input).
    pub view: bool,
}

/// What an input of a node is to its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Data the node computes on; a constant one is a weight.
    Data,
    /// Non-trainable state (batch norms' running statistics).
    Buffer,
    /// A shape, axes, indices, a scalar bound or a quantization scale: no parameter.
    Control,
}

/// Operators whose outputs are never known before the model runs, even from constant inputs.
pub(crate) const RUN_TIME: [&str; 6] = [
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
];

/// The role of input `k` of operator `op`.
pub(crate) fn role(op: &str, k: usize) -> Role {
    match (op, k) {
        ("BatchNormalization", 3 | 4) => Role::Buffer,
        (_, 0) if op != "ConstantOfShape" && op != "Range" => Role::Data,
        (
            "Reshape"
            | "Expand"
            | "Tile"
            | "Slice"
            | "Pad"
            | "Resize"
            | "Upsample"
            | "Squeeze"
            | "Unsqueeze"
            | "TopK"
            | "Range"
            | "OneHot"
            | "Split"
            | "Clip"
            | "ConstantOfShape"
            | "ReduceMean"
            | "ReduceSum"
            | "ReduceMax"
            | "ReduceMin"
            | "ReduceProd"
            | "ReduceL1"
            | "ReduceL2"
            | "ReduceLogSum"
            | "ReduceLogSumExp"
            | "ReduceSumSquare"
            | "CumSum"
            | "Gather"
            | "GatherElements"
            | "GatherND"
            | "Compress"
            | "ScatterElements"
            | "ScatterND"
            | "Scatter"
            | "QuantizeLinear"
            | "DequantizeLinear"
            | "DynamicQuantizeLinear"
            | "Trilu"
            | "ReverseSequence"
            | "NonMaxSuppression"
            | "GridSample"
            | "RoiAlign",
            _,
        ) if !(matches!(op, "ScatterElements" | "ScatterND" | "Scatter") && k == 2) => {
            Role::Control
        }
        ("LSTM" | "GRU" | "RNN", 4) => Role::Control,
        ("ConvInteger" | "MatMulInteger", 2 | 3) => Role::Control,
        ("QLinearConv", 1 | 2 | 4 | 5 | 6 | 7) => Role::Control,
        ("QLinearMatMul", 1 | 2 | 4 | 5 | 6 | 7) => Role::Control,
        ("com.microsoft.DynamicQuantizeLSTM", k) if k == 4 || k >= 8 => Role::Control,
        ("com.microsoft.QLinearAdd" | "com.microsoft.QLinearMul", 1 | 2 | 4 | 5 | 6 | 7) => {
            Role::Control
        }
        _ => Role::Data,
    }
}

type R<X> = Result<X, String>;

fn attr<'a>(node: &'a pb::NodeProto, name: &str) -> Option<&'a pb::AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

fn ai(node: &pb::NodeProto, name: &str, default: i64) -> i64 {
    attr(node, name).map_or(default, |a| a.i)
}

fn af(node: &pb::NodeProto, name: &str, default: f32) -> f32 {
    attr(node, name).map_or(default, |a| a.f)
}

fn aints(node: &pb::NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(node, name).map(|a| a.ints.clone())
}

fn astr(node: &pb::NodeProto, name: &str, default: &str) -> String {
    attr(node, name).map_or_else(
        || default.to_string(),
        |a| String::from_utf8_lossy(&a.s).into_owned(),
    )
}

fn input<'a>(ins: &[Option<&'a T>], k: usize) -> R<&'a T> {
    ins.get(k)
        .copied()
        .flatten()
        .ok_or_else(|| format!("its input {k} is missing"))
}

fn opt<'a>(ins: &[Option<&'a T>], k: usize) -> Option<&'a T> {
    ins.get(k).copied().flatten()
}

/// The integer values of a small input that the node needs before it runs (a shape, axes).
fn ints(t: &T, what: &str) -> R<Vec<i64>> {
    match &t.value {
        Some(v) => Ok(v.iter().map(|&x| x as i64).collect()),
        None => Err(format!(
            "its {what} is known only when the model runs, so its output shape is too"
        )),
    }
}

fn floats(t: &T, what: &str) -> R<Vec<f64>> {
    t.value.clone().ok_or_else(|| {
        format!("its {what} is known only when the model runs, so its output shape is too")
    })
}

fn axis(a: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..r).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("axis {a} is outside a rank-{rank} tensor"))
    }
}

/// For insertion positions (Unsqueeze): axes in 0..=rank.
fn axis_incl(a: i64, rank: usize) -> R<usize> {
    axis(a, rank + 1)
}

fn t(elem: i32, shape: Vec<usize>) -> R<T> {
    checked_elements(&shape)?;
    Ok(T {
        elem,
        shape,
        constant: false,
        weight: false,
        value: None,
    })
}

fn with_value(elem: i32, shape: Vec<usize>, value: Option<Vec<f64>>) -> R<T> {
    let mut x = t(elem, shape)?;
    x.value = value.filter(|v| v.len() <= SMALL);
    Ok(x)
}

/// Elements of a shape (saturating: a shape past 64 bits is refused where a tensor is made).
fn n(shape: &[usize]) -> u64 {
    shape
        .iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// a · b for sizes, refused when it overflows.
fn times(a: usize, b: usize) -> R<usize> {
    a.checked_mul(b)
        .ok_or_else(|| "its sizes overflow 64 bits".to_string())
}

/// a · b · …, refused when it overflows.
fn mul(parts: &[u64]) -> R<u64> {
    parts
        .iter()
        .try_fold(1u64, |acc, &p| acc.checked_mul(p))
        .ok_or_else(|| "its cost overflows 64 bits".to_string())
}

fn add(a: u64, b: u64) -> R<u64> {
    a.checked_add(b)
        .ok_or_else(|| "its cost overflows 64 bits".to_string())
}

fn is_int(elem: i32) -> bool {
    matches!(
        D::try_from(elem),
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

const BOOL: i32 = D::Bool as i32;
const I64: i32 = D::Int64 as i32;
const F32: i32 = D::Float as i32;

/// Numpy-style broadcast of shapes.
fn broadcast(shapes: &[&[usize]]) -> R<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(format!(
                    "shapes {} cannot be broadcast together",
                    shapes
                        .iter()
                        .map(|s| show_shape(s))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ));
            }
        }
    }
    Ok(out)
}

/// For each element of `out`, the index of the element of a tensor of shape `shape`
/// broadcast to it.
fn source_index(out: &[usize], shape: &[usize]) -> Vec<usize> {
    let off = out.len() - shape.len();
    let strides = strides_of(shape);
    gather_positions(out, |pos| {
        shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if d == 1 { 0 } else { pos[off + i] * strides[i] })
            .sum()
    })
}

/// Row-major strides of a shape.
fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// For each position of an output of shape `out` (row-major), the source index `at` gives.
fn gather_positions(out: &[usize], at: impl Fn(&[usize]) -> usize) -> Vec<usize> {
    let total = n(out) as usize;
    let mut pos = vec![0usize; out.len()];
    let mut idx = Vec::with_capacity(total);
    for _ in 0..total {
        idx.push(at(&pos));
        for i in (0..out.len()).rev() {
            pos[i] += 1;
            if pos[i] < out[i] {
                break;
            }
            pos[i] = 0;
        }
    }
    idx
}

fn unary_value(op: &str, x: f64) -> Option<f64> {
    Some(match op {
        "Neg" => -x,
        "Abs" => x.abs(),
        "Floor" => x.floor(),
        "Ceil" => x.ceil(),
        "Round" => x.round_ties_even(),
        "Sqrt" => x.sqrt(),
        "Exp" => x.exp(),
        "Log" => x.ln(),
        "Reciprocal" => 1.0 / x,
        "Relu" => x.max(0.0),
        "Sign" => {
            if x == 0.0 {
                0.0
            } else {
                x.signum()
            }
        }
        "Not" => (x == 0.0) as u8 as f64,
        "Sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "Tanh" => x.tanh(),
        "Identity" | "Cast" | "Dropout" | "CastLike" | "Clip" => x,
        _ => return None,
    })
}

fn binary_value(op: &str, a: f64, b: f64) -> Option<f64> {
    Some(match op {
        "Add" | "Sum" => a + b,
        "Sub" => a - b,
        "Mul" => a * b,
        "Div" => a / b,
        "Pow" => a.powf(b),
        "Max" => a.max(b),
        "Min" => a.min(b),
        "Mod" => a % b,
        "Equal" => (a == b) as u8 as f64,
        "Less" => (a < b) as u8 as f64,
        "Greater" => (a > b) as u8 as f64,
        "LessOrEqual" => (a <= b) as u8 as f64,
        "GreaterOrEqual" => (a >= b) as u8 as f64,
        "And" => (a != 0.0 && b != 0.0) as u8 as f64,
        "Or" => (a != 0.0 || b != 0.0) as u8 as f64,
        "Xor" => ((a != 0.0) != (b != 0.0)) as u8 as f64,
        _ => return None,
    })
}

/// Element-wise FLOPs per output element of a one-input operator, None when it is not one.
fn unary_flops(op: &str) -> Option<u64> {
    Some(match op {
        "Identity" | "Dropout" | "Cast" | "CastLike" => 0,
        "Relu" | "Neg" | "Abs" | "Floor" | "Ceil" | "Round" | "Sign" | "Not" | "Exp" | "Log"
        | "Sqrt" | "Reciprocal" | "Erf" | "Sin" | "Cos" | "Tan" | "Asin" | "Acos" | "Atan"
        | "Sinh" | "Cosh" | "Asinh" | "Acosh" | "Atanh" | "IsNaN" | "IsInf" | "BitwiseNot"
        | "ThresholdedRelu" => 1,
        "LeakyRelu" | "Clip" | "Shrink" | "Softsign" => 2,
        "HardSigmoid" | "Softplus" | "Elu" | "Celu" => 3,
        "Sigmoid" | "Tanh" | "HardSwish" | "Selu" => 4,
        "Gelu" | "Mish" => 6,
        _ => return None,
    })
}

fn binary_op(op: &str) -> bool {
    matches!(
        op,
        "Add"
            | "Sub"
            | "Mul"
            | "Div"
            | "Pow"
            | "Mod"
            | "Equal"
            | "Less"
            | "Greater"
            | "LessOrEqual"
            | "GreaterOrEqual"
            | "And"
            | "Or"
            | "Xor"
            | "BitShift"
            | "BitwiseAnd"
            | "BitwiseOr"
            | "BitwiseXor"
    )
}

/// Evaluates one node: its outputs and its work.
pub(crate) fn eval(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let custom = !(node.domain.is_empty() || node.domain == "ai.onnx");
    let op = node.op_type.as_str();
    if custom {
        return match (node.domain.as_str(), op) {
            ("com.microsoft", _) => microsoft(node, op, ins),
            _ => Err("a custom domain's operator, which edgeprof does not know".into()),
        };
    }
    if let Some(per) = unary_flops(op) {
        return unary(node, op, per, ins);
    }
    if op == "PRelu" {
        // The slope is broadcast to X (older exports give it per channel, unaligned).
        return elementwise(input(ins, 0)?, 2);
    }
    if binary_op(op) {
        return binary(op, ins);
    }
    match op {
        "Constant" => constant(node),
        "Sum" | "Max" | "Min" | "Mean" => variadic(op, ins),
        "Where" => where_(ins),
        "Shape" => {
            let x = input(ins, 0)?;
            let r = x.shape.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let start = clamp(ai(node, "start", 0));
            let end = clamp(ai(node, "end", r));
            let dims: Vec<f64> = x.shape[start..end.max(start)]
                .iter()
                .map(|&d| d as f64)
                .collect();
            Ok(one(with_value(I64, vec![dims.len()], Some(dims))?, 0, 0))
        }
        "Size" => {
            let x = input(ins, 0)?;
            Ok(one(
                with_value(I64, vec![], Some(vec![n(&x.shape) as f64]))?,
                0,
                0,
            ))
        }
        "Reshape" => reshape(node, ins),
        "Flatten" => {
            let x = input(ins, 0)?;
            // Flatten's axis runs over -r..=r, a negative one counted from r.
            let r = x.shape.len() as i64;
            let a = ai(node, "axis", 1);
            let a = if a < 0 { a + r } else { a };
            if !(0..=r).contains(&a) {
                return Err(format!("axis {a} is outside a rank-{r} tensor"));
            }
            let a = a as usize;
            let shape = vec![n(&x.shape[..a]) as usize, n(&x.shape[a..]) as usize];
            Ok(view(with_value(x.elem, shape, x.value.clone())?))
        }
        "Squeeze" => squeeze(node, opset, ins),
        "Unsqueeze" => unsqueeze(node, opset, ins),
        "Transpose" => transpose(node, ins),
        "Concat" => concat(node, ins),
        "Split" => split(node, opset, ins),
        "Slice" => slice(node, opset, ins),
        "Gather" => gather(node, ins),
        "GatherElements" => {
            let idx = input(ins, 1)?;
            let x = input(ins, 0)?;
            Ok(one(t(x.elem, idx.shape.clone())?, 0, 0))
        }
        "GatherND" => gather_nd(node, ins),
        "ScatterElements" | "ScatterND" | "Scatter" => {
            let x = input(ins, 0)?;
            Ok(one(t(x.elem, x.shape.clone())?, 0, 0))
        }
        "Expand" => {
            let x = input(ins, 0)?;
            let target: Vec<usize> = ints(input(ins, 1)?, "target shape")?
                .iter()
                .map(|&d| d.max(0) as usize)
                .collect();
            let shape = broadcast(&[&x.shape, &target])?;
            let value = x.value.as_ref().and_then(|v| {
                (n(&shape) as usize <= SMALL).then(|| {
                    source_index(&shape, &x.shape)
                        .iter()
                        .map(|&i| v[i])
                        .collect()
                })
            });
            Ok(one(with_value(x.elem, shape, value)?, 0, 0))
        }
        "Tile" => {
            let x = input(ins, 0)?;
            let reps = ints(input(ins, 1)?, "repeats")?;
            if reps.len() != x.shape.len() || reps.iter().any(|&r| r < 0) {
                return Err(format!(
                    "repeats {reps:?} do not fit a rank-{} input",
                    x.shape.len()
                ));
            }
            let mut shape = Vec::with_capacity(reps.len());
            for (&d, &r) in x.shape.iter().zip(&reps) {
                shape.push(
                    d.checked_mul(r as usize)
                        .ok_or("its output size overflows")?,
                );
            }
            Ok(one(t(x.elem, shape)?, 0, 0))
        }
        "Pad" => pad(node, opset, ins),
        "ConstantOfShape" => {
            let dims = ints(input(ins, 0)?, "shape")?;
            if let Some(bad) = dims.iter().find(|&&d| d < 0) {
                return Err(format!("a dimension of {bad}"));
            }
            let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let (elem, fill) = match attr(node, "value").and_then(|a| a.t.as_ref()) {
                Some(tp) => {
                    let c = super::tensor_of(tp)?;
                    (
                        c.elem,
                        c.value.and_then(|v| v.first().copied()).unwrap_or(0.0),
                    )
                }
                None => (F32, 0.0),
            };
            let count = checked_elements(&dims)?;
            let value = (count as usize <= SMALL).then(|| vec![fill; count as usize]);
            Ok(one(with_value(elem, dims, value)?, 0, 0))
        }
        "Range" => {
            let s = floats(input(ins, 0)?, "start")?;
            let l = floats(input(ins, 1)?, "limit")?;
            let d = floats(input(ins, 2)?, "delta")?;
            let (Some(&s), Some(&l), Some(&d)) = (s.first(), l.first(), d.first()) else {
                return Err("start, limit and delta are not scalars".into());
            };
            if d == 0.0 {
                return Err("its delta is 0".into());
            }
            let count = ((l - s) / d).ceil().max(0.0);
            if count > super::MAX_ELEMENTS as f64 {
                return Err("its output is larger than any model's".into());
            }
            let count = count as usize;
            let value = (count <= SMALL).then(|| (0..count).map(|i| s + i as f64 * d).collect());
            Ok(one(
                with_value(input(ins, 0)?.elem, vec![count], value)?,
                0,
                0,
            ))
        }
        "EyeLike" => {
            let x = input(ins, 0)?;
            Ok(one(t(x.elem, x.shape.clone())?, 0, 0))
        }
        "OneHot" => {
            let idx = input(ins, 0)?;
            let depth = floats(input(ins, 1)?, "depth")?
                .first()
                .copied()
                .ok_or("its depth is empty")?;
            let values = input(ins, 2)?;
            let mut shape = idx.shape.clone();
            let a = axis_incl(ai(node, "axis", -1), shape.len())?;
            shape.insert(a, depth.max(0.0) as usize);
            Ok(one(t(values.elem, shape)?, 0, 0))
        }
        "DepthToSpace" | "SpaceToDepth" => {
            let x = input(ins, 0)?;
            let b = ai(node, "blocksize", 0).max(0) as usize;
            let [nb, c, h, w] = x.shape[..] else {
                return Err("its input is not N×C×H×W".into());
            };
            if b == 0 {
                return Err("its blocksize is 0".into());
            }
            let b2 = times(b, b)?;
            let shape = if op == "DepthToSpace" {
                if !c.is_multiple_of(b2) {
                    return Err(format!("{c} channels do not divide by blocksize² {b2}"));
                }
                vec![nb, c / b2, times(h, b)?, times(w, b)?]
            } else {
                if !h.is_multiple_of(b) || !w.is_multiple_of(b) {
                    return Err(format!("{h}×{w} does not divide by blocksize {b}"));
                }
                vec![nb, times(c, b2)?, h / b, w / b]
            };
            Ok(one(t(x.elem, shape)?, 0, 0))
        }
        "Conv" => conv(node, ins, 1, 0, 2),
        "ConvInteger" => conv(node, ins, 1, 0, usize::MAX),
        "QLinearConv" => conv(node, ins, 3, 0, 8),
        "ConvTranspose" => conv_transpose(node, ins),
        "MatMul" => matmul(ins, 0, 1),
        "MatMulInteger" => {
            let mut out = matmul(ins, 0, 1)?;
            out.outputs[0].elem = D::Int32 as i32;
            Ok(out)
        }
        "QLinearMatMul" => {
            let mut out = matmul(ins, 0, 3)?;
            out.outputs[0].elem = opt(ins, 7).map_or(D::Uint8 as i32, |z| z.elem);
            Ok(out)
        }
        "Gemm" => gemm(node, ins),
        "Einsum" => einsum(node, ins),
        "BatchNormalization" => {
            let x = input(ins, 0)?;
            let mut out = elementwise(x, 2)?;
            // Training-mode outputs (running mean and variance) share the scale's shape.
            if node.output.len() > 1 {
                if let Some(s) = opt(ins, 1) {
                    for _ in 1..node.output.len() {
                        out.outputs.push(t(x.elem, s.shape.clone())?);
                    }
                }
            }
            Ok(out)
        }
        "InstanceNormalization"
        | "MeanVarianceNormalization"
        | "GroupNormalization"
        | "LpNormalization" => {
            let x = input(ins, 0)?;
            elementwise(x, if op == "LpNormalization" { 3 } else { 7 })
        }
        "LayerNormalization" => {
            let x = input(ins, 0)?;
            let mut out = elementwise(x, 7)?;
            let a = axis(ai(node, "axis", -1), x.shape.len())?;
            let mut stat = x.shape.clone();
            for d in stat.iter_mut().skip(a) {
                *d = 1;
            }
            for _ in 1..node.output.len() {
                out.outputs.push(t(F32, stat.clone())?);
            }
            Ok(out)
        }
        "LRN" => {
            let x = input(ins, 0)?;
            let size = ai(node, "size", 1).max(1) as u64;
            elementwise(x, 2 * size + 3)
        }
        "Softmax" | "LogSoftmax" | "Hardmax" => {
            let x = input(ins, 0)?;
            axis(ai(node, "axis", -1), x.shape.len().max(1))?;
            elementwise(x, if op == "Hardmax" { 1 } else { 5 })
        }
        "CumSum" => elementwise(input(ins, 0)?, 1),
        "Trilu" | "ReverseSequence" => elementwise(input(ins, 0)?, 0),
        "QuantizeLinear" => {
            let x = input(ins, 0)?;
            let elem = opt(ins, 2).map_or(D::Uint8 as i32, |z| z.elem);
            let elem = attr(node, "output_dtype")
                .map(|a| a.i as i32)
                .filter(|&e| e != 0)
                .unwrap_or(elem);
            let flops = mul(&[n(&x.shape), 4])?;
            Ok(one(t(elem, x.shape.clone())?, 0, flops))
        }
        "DequantizeLinear" => {
            let x = input(ins, 0)?;
            let elem = opt(ins, 1).map_or(F32, |s| s.elem);
            let flops = mul(&[n(&x.shape), 2])?;
            Ok(one(t(elem, x.shape.clone())?, 0, flops))
        }
        "DynamicQuantizeLinear" => {
            let x = input(ins, 0)?;
            let flops = mul(&[n(&x.shape), 6])?;
            Ok(Out {
                outputs: vec![
                    t(D::Uint8 as i32, x.shape.clone())?,
                    t(F32, vec![])?,
                    t(D::Uint8 as i32, vec![])?,
                ],
                macs: 0,
                flops,
                view: false,
            })
        }
        "MaxPool" | "AveragePool" | "LpPool" => pool(node, op, ins),
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
            let x = input(ins, 0)?;
            if x.shape.len() < 3 {
                return Err("its input has no spatial axes".into());
            }
            let mut shape = x.shape.clone();
            for d in shape.iter_mut().skip(2) {
                *d = 1;
            }
            let inputs = n(&x.shape);
            let planes = n(&shape);
            let flops = match op {
                "GlobalAveragePool" => inputs,
                "GlobalMaxPool" => inputs.saturating_sub(planes),
                _ => mul(&[inputs, 2])?,
            };
            Ok(one(t(x.elem, shape)?, 0, flops))
        }
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" | "ArgMax"
        | "ArgMin" => reduce(node, op, opset, ins),
        "TopK" => {
            let x = input(ins, 0)?;
            let k = match opt(ins, 1) {
                Some(k) => ints(k, "k")?.first().copied().unwrap_or(0),
                None => ai(node, "k", 0),
            };
            let a = axis(ai(node, "axis", -1), x.shape.len())?;
            if k < 0 || k as usize > x.shape[a] {
                return Err(format!("k = {k} is outside 0..={}", x.shape[a]));
            }
            let mut shape = x.shape.clone();
            shape[a] = k as usize;
            let steps = (64 - (k as u64).leading_zeros()) as u64;
            let flops = mul(&[n(&x.shape), steps.max(1)])?;
            Ok(Out {
                outputs: vec![t(x.elem, shape.clone())?, t(I64, shape)?],
                macs: 0,
                flops,
                view: false,
            })
        }
        "Resize" | "Upsample" => resize(node, opset, ins),
        "LSTM" | "GRU" | "RNN" => recurrent(node, op, ins, 1),
        "GridSample" => {
            let x = input(ins, 0)?;
            let g = input(ins, 1)?;
            let [nb, c, ..] = x.shape[..] else {
                return Err("its input is not N×C×…".into());
            };
            let mut shape = vec![nb, c];
            shape.extend(g.shape.iter().skip(1).take(g.shape.len().saturating_sub(2)));
            let flops = mul(&[n(&shape), 7])?;
            Ok(one(t(x.elem, shape)?, 0, flops))
        }
        "RoiAlign" => {
            let x = input(ins, 0)?;
            let rois = input(ins, 1)?;
            let c = *x.shape.get(1).ok_or("its input is not N×C×H×W")?;
            let oh = ai(node, "output_height", 1).max(1) as usize;
            let ow = ai(node, "output_width", 1).max(1) as usize;
            let shape = vec![rois.shape.first().copied().unwrap_or(0), c, oh, ow];
            let ratio = ai(node, "sampling_ratio", 0).max(1) as u64;
            let flops = mul(&[n(&shape), ratio * ratio, 7])?;
            Ok(one(t(x.elem, shape)?, 0, flops))
        }
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            let size = ints(input(ins, 0)?, "size")?
                .first()
                .copied()
                .ok_or("its size is empty")?;
            let elem = ai(node, "output_datatype", F32 as i64) as i32;
            let shape = vec![size.max(0) as usize];
            let flops = mul(&[n(&shape), 4])?;
            Ok(one(t(elem, shape)?, 0, flops))
        }
        "MelWeightMatrix" => {
            let bins = ints(input(ins, 0)?, "number of mel bins")?;
            let dft = ints(input(ins, 1)?, "DFT length")?;
            let (Some(&bins), Some(&dft)) = (bins.first(), dft.first()) else {
                return Err("its mel bins or DFT length are empty".into());
            };
            let elem = ai(node, "output_datatype", F32 as i64) as i32;
            let shape = vec![(dft.max(0) / 2 + 1) as usize, bins.max(0) as usize];
            let flops = n(&shape);
            Ok(one(t(elem, shape)?, 0, flops))
        }
        "STFT" => stft(node, ins),
        "DFT" => dft(node, opset, ins),
        "CenterCropPad" => {
            let x = input(ins, 0)?;
            let target = ints(input(ins, 1)?, "target shape")?;
            let rank = x.shape.len();
            let axes: Vec<usize> = match aints(node, "axes") {
                Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<R<_>>()?,
                None => (0..rank).collect(),
            };
            if axes.len() != target.len() {
                return Err(format!("{} sizes for {} axes", target.len(), axes.len()));
            }
            let mut shape = x.shape.clone();
            for (&a, &d) in axes.iter().zip(&target) {
                shape[a] = d.max(0) as usize;
            }
            Ok(one(t(x.elem, shape)?, 0, 0))
        }
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
            let scores = input(ins, 0)?;
            let labels = input(ins, 1)?;
            let per_label = mul(&[n(&labels.shape), 2])?;
            let (shape, flops) = if astr(node, "reduction", "mean") == "none" {
                (labels.shape.clone(), per_label)
            } else {
                (Vec::new(), add(per_label, n(&labels.shape))?)
            };
            let mut out = one(t(scores.elem, shape)?, 0, flops);
            if op == "SoftmaxCrossEntropyLoss" {
                out.flops = add(out.flops, mul(&[n(&scores.shape), 5])?)?;
                out.outputs.push(t(scores.elem, scores.shape.clone())?);
            }
            Ok(out)
        }
        "NonZero" | "NonMaxSuppression" | "Unique" | "Compress" => Err(
            "its output's size depends on the values it computes, known only when the model \
             runs"
                .into(),
        ),
        "Loop" | "Scan" => Err("its body is not costed (its iterations are not analysed)".into()),
        "RandomNormal" | "RandomUniform" => {
            let shape: Vec<usize> = aints(node, "shape")
                .unwrap_or_default()
                .iter()
                .map(|&d| d.max(0) as usize)
                .collect();
            let elem = ai(node, "dtype", F32 as i64) as i32;
            Ok(one(t(elem, shape)?, 0, 0))
        }
        "RandomNormalLike" | "RandomUniformLike" | "Bernoulli" => {
            let x = input(ins, 0)?;
            Ok(one(t(x.elem, x.shape.clone())?, 0, 0))
        }
        "SequenceConstruct" | "SequenceAt" | "SequenceInsert" | "SequenceEmpty"
        | "SplitToSequence" | "ConcatFromSequence" | "SequenceLength" | "Optional"
        | "OptionalGetElement" | "OptionalHasElement" => {
            Err("it works on sequences or optionals, which edgeprof does not cost".into())
        }
        _ => Err("an operator edgeprof does not cost yet".into()),
    }
}

fn one(x: T, macs: u64, flops: u64) -> Out {
    Out {
        outputs: vec![x],
        macs,
        flops,
        view: false,
    }
}

fn view(x: T) -> Out {
    Out {
        outputs: vec![x],
        macs: 0,
        flops: 0,
        view: true,
    }
}

fn elementwise(x: &T, per: u64) -> R<Out> {
    let flops = mul(&[n(&x.shape), per])?;
    Ok(one(t(x.elem, x.shape.clone())?, 0, flops))
}

fn constant(node: &pb::NodeProto) -> R<Out> {
    let a = node.attribute.first().ok_or("a Constant without a value")?;
    let x = match a.name.as_str() {
        "value" => super::tensor_of(a.t.as_ref().ok_or("a Constant without a tensor")?)?,
        "value_float" => with_value(F32, vec![], Some(vec![a.f as f64]))?,
        "value_int" => with_value(I64, vec![], Some(vec![a.i as f64]))?,
        "value_floats" => with_value(
            F32,
            vec![a.floats.len()],
            Some(a.floats.iter().map(|&v| v as f64).collect()),
        )?,
        "value_ints" => with_value(
            I64,
            vec![a.ints.len()],
            Some(a.ints.iter().map(|&v| v as f64).collect()),
        )?,
        other => return Err(format!("a Constant's {other} is not read")),
    };
    Ok(one(x, 0, 0))
}

fn unary(node: &pb::NodeProto, op: &str, per: u64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let elem = match op {
        "Cast" => ai(node, "to", x.elem as i64) as i32,
        "CastLike" => input(ins, 1)?.elem,
        "IsNaN" | "IsInf" => BOOL,
        _ => x.elem,
    };
    let value = x.value.as_ref().and_then(|v| {
        let mut out = Vec::with_capacity(v.len());
        for &e in v {
            let mut r = unary_value(op, e)?;
            if op == "Clip" {
                let lo = opt(ins, 1)
                    .and_then(|t| t.value.as_ref()?.first().copied())
                    .unwrap_or(af(node, "min", f32::MIN) as f64);
                let hi = opt(ins, 2)
                    .and_then(|t| t.value.as_ref()?.first().copied())
                    .unwrap_or(af(node, "max", f32::MAX) as f64);
                r = r.max(lo).min(hi);
            }
            if is_int(elem) {
                r = r.trunc();
            }
            out.push(r);
        }
        Some(out)
    });
    let flops = mul(&[n(&x.shape), per])?;
    let mut out = one(with_value(elem, x.shape.clone(), value)?, 0, flops);
    out.view = matches!(op, "Identity" | "Dropout");
    // Dropout's mask, when asked for.
    if op == "Dropout" {
        out.outputs.push(t(BOOL, x.shape.clone())?);
    }
    Ok(out)
}

fn binary(op: &str, ins: &[Option<&T>]) -> R<Out> {
    let a = input(ins, 0)?;
    let b = input(ins, 1)?;
    let shape = broadcast(&[&a.shape, &b.shape])?;
    let elem = if matches!(
        op,
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor"
    ) {
        BOOL
    } else {
        a.elem
    };
    let value = match (&a.value, &b.value) {
        (Some(va), Some(vb)) if n(&shape) as usize <= SMALL => {
            let ia = source_index(&shape, &a.shape);
            let ib = source_index(&shape, &b.shape);
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| {
                    let r = binary_value(op, va[i], vb[j])?;
                    Some(if is_int(elem) && op == "Div" {
                        r.trunc()
                    } else {
                        r
                    })
                })
                .collect::<Option<Vec<f64>>>()
        }
        _ => None,
    };
    let per = if op == "PRelu" { 2 } else { 1 };
    let flops = mul(&[n(&shape), per])?;
    Ok(one(with_value(elem, shape, value)?, 0, flops))
}

fn variadic(op: &str, ins: &[Option<&T>]) -> R<Out> {
    let xs: Vec<&T> = ins.iter().flatten().copied().collect();
    let first = xs.first().ok_or("it has no inputs")?;
    let shapes: Vec<&[usize]> = xs.iter().map(|x| x.shape.as_slice()).collect();
    let shape = broadcast(&shapes)?;
    let mut value: Option<Vec<f64>> = None;
    if xs.iter().all(|x| x.value.is_some()) && n(&shape) as usize <= SMALL {
        let mut acc: Option<Vec<f64>> = None;
        for x in &xs {
            let v = x.value.as_ref().map(|v| {
                source_index(&shape, &x.shape)
                    .iter()
                    .map(|&i| v[i])
                    .collect::<Vec<f64>>()
            });
            acc = match (acc, v) {
                (None, v) => v,
                (Some(a), Some(b)) => a
                    .iter()
                    .zip(&b)
                    .map(|(&p, &q)| binary_value(if op == "Mean" { "Add" } else { op }, p, q))
                    .collect(),
                (Some(_), None) => None,
            };
        }
        if op == "Mean" {
            acc = acc.map(|a| a.iter().map(|v| v / xs.len() as f64).collect());
        }
        value = acc;
    }
    let per = (xs.len() as u64).saturating_sub(1) + u64::from(op == "Mean");
    let flops = mul(&[n(&shape), per])?;
    Ok(one(with_value(first.elem, shape, value)?, 0, flops))
}

fn where_(ins: &[Option<&T>]) -> R<Out> {
    let c = input(ins, 0)?;
    let a = input(ins, 1)?;
    let b = input(ins, 2)?;
    let shape = broadcast(&[&c.shape, &a.shape, &b.shape])?;
    let value = match (&c.value, &a.value, &b.value) {
        (Some(vc), Some(va), Some(vb)) if n(&shape) as usize <= SMALL => {
            let ic = source_index(&shape, &c.shape);
            let ia = source_index(&shape, &a.shape);
            let ib = source_index(&shape, &b.shape);
            Some(
                (0..ic.len())
                    .map(|k| {
                        if vc[ic[k]] != 0.0 {
                            va[ia[k]]
                        } else {
                            vb[ib[k]]
                        }
                    })
                    .collect(),
            )
        }
        _ => None,
    };
    let flops = n(&shape);
    Ok(one(with_value(a.elem, shape, value)?, 0, flops))
}

fn reshape(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let target = ints(input(ins, 1)?, "target shape")?;
    let allowzero = ai(node, "allowzero", 0) != 0;
    let mut shape = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            0 if !allowzero => shape.push(
                *x.shape
                    .get(i)
                    .ok_or_else(|| format!("a 0 in {target:?} copies no dimension"))?,
            ),
            d if d >= 0 => shape.push(d as usize),
            _ => return Err(format!("a reshape to {target:?} is not a shape")),
        }
    }
    let total = n(&x.shape);
    if let Some(i) = infer {
        let rest = n(&shape);
        if rest == 0 || !total.is_multiple_of(rest) {
            return Err(format!(
                "a reshape of {} to {target:?} does not divide",
                show_shape(&x.shape)
            ));
        }
        shape[i] = (total / rest) as usize;
    }
    if n(&shape) != total {
        return Err(format!(
            "a reshape of {} to {target:?} changes the element count",
            show_shape(&x.shape)
        ));
    }
    Ok(view(with_value(x.elem, shape, x.value.clone())?))
}

fn axes_of(
    node: &pb::NodeProto,
    opset: i64,
    ins: &[Option<&T>],
    since: i64,
) -> R<Option<Vec<i64>>> {
    if opset >= since {
        match opt(ins, 1) {
            Some(a) => Ok(Some(ints(a, "axes")?)),
            None => Ok(aints(node, "axes")),
        }
    } else {
        Ok(aints(node, "axes"))
    }
}

fn squeeze(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let shape: Vec<usize> = match axes_of(node, opset, ins, 13)? {
        Some(axes) => {
            let mut drop = Vec::new();
            for a in axes {
                let a = axis(a, rank)?;
                if x.shape[a] != 1 {
                    return Err(format!(
                        "axis {a} of {} is not 1 and cannot be squeezed",
                        show_shape(&x.shape)
                    ));
                }
                drop.push(a);
            }
            x.shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(_, &d)| d)
                .collect()
        }
        None => x.shape.iter().copied().filter(|&d| d != 1).collect(),
    };
    Ok(view(with_value(x.elem, shape, x.value.clone())?))
}

fn unsqueeze(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let axes = axes_of(node, opset, ins, 13)?.ok_or("it names no axes")?;
    let rank = x.shape.len() + axes.len();
    let mut pos: Vec<usize> = axes.iter().map(|&a| axis(a, rank)).collect::<R<Vec<_>>>()?;
    pos.sort_unstable();
    pos.dedup();
    if pos.len() != axes.len() {
        return Err(format!("axes {axes:?} repeat"));
    }
    let mut shape = Vec::with_capacity(rank);
    let mut rest = x.shape.iter();
    for i in 0..rank {
        if pos.contains(&i) {
            shape.push(1);
        } else {
            shape.push(*rest.next().ok_or("its axes do not fit")?);
        }
    }
    Ok(view(with_value(x.elem, shape, x.value.clone())?))
}

fn transpose(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match aints(node, "perm") {
        Some(p) => p.iter().map(|&a| axis(a, rank)).collect::<R<_>>()?,
        None => (0..rank).rev().collect(),
    };
    let mut seen = perm.clone();
    seen.sort_unstable();
    if seen != (0..rank).collect::<Vec<_>>() {
        return Err(format!("perm {perm:?} is not a permutation of {rank} axes"));
    }
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    // Small values are moved as they are (PyTorch writes pads reversed this way).
    let value = x.value.as_ref().map(|v| {
        let strides = strides_of(&x.shape);
        gather_positions(&shape, |pos| {
            pos.iter()
                .zip(&perm)
                .map(|(&p, &axis)| p * strides[axis])
                .sum()
        })
        .iter()
        .map(|&i| v[i])
        .collect()
    });
    Ok(one(with_value(x.elem, shape, value)?, 0, 0))
}

fn concat(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let xs: Vec<&T> = ins.iter().flatten().copied().collect();
    let first = xs.first().ok_or("it has no inputs")?;
    let rank = first.shape.len();
    let a = axis(ai(node, "axis", 0), rank.max(1))?;
    let mut shape = first.shape.clone();
    if rank == 0 {
        return Err("it concatenates scalars".into());
    }
    shape[a] = 0;
    for x in &xs {
        if x.shape.len() != rank
            || x.shape
                .iter()
                .enumerate()
                .any(|(i, &d)| i != a && d != first.shape[i])
        {
            return Err(format!(
                "inputs {} do not match beside axis {a}",
                xs.iter()
                    .map(|x| show_shape(&x.shape))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        shape[a] += x.shape[a];
    }
    let value = if xs.iter().all(|x| x.value.is_some()) && n(&shape) as usize <= SMALL {
        let outer = n(&shape[..a]) as usize;
        let inner = n(&shape[a + 1..]) as usize;
        let mut v = Vec::with_capacity(n(&shape) as usize);
        for o in 0..outer {
            for x in &xs {
                let block = x.shape[a] * inner;
                if let Some(xv) = &x.value {
                    v.extend_from_slice(&xv[o * block..(o + 1) * block]);
                }
            }
        }
        Some(v)
    } else {
        None
    };
    Ok(one(with_value(first.elem, shape, value)?, 0, 0))
}

fn split(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let a = axis(ai(node, "axis", 0), x.shape.len())?;
    let parts = node.output.len().max(1);
    let given = if opset >= 13 {
        opt(ins, 1).map(|s| ints(s, "split sizes")).transpose()?
    } else {
        aints(node, "split")
    };
    let len = x.shape[a];
    let sizes: Vec<usize> = match given {
        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
        None => {
            let chunk = len.div_ceil(parts);
            (0..parts)
                .map(|i| chunk.min(len.saturating_sub(i * chunk)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != len || sizes.len() != parts {
        return Err(format!(
            "split sizes {sizes:?} do not cover axis {a} of {}",
            show_shape(&x.shape)
        ));
    }
    let mut outputs = Vec::new();
    let mut start = 0;
    for s in sizes {
        let mut shape = x.shape.clone();
        shape[a] = s;
        let value = x
            .value
            .as_ref()
            .filter(|_| x.shape.len() == 1)
            .map(|v| v[start..start + s].to_vec());
        outputs.push(with_value(x.elem, shape, value)?);
        start += s;
    }
    Ok(Out {
        outputs,
        macs: 0,
        flops: 0,
        view: true,
    })
}

fn slice(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let (starts, ends, axes, steps) = if opset < 10 {
        (
            aints(node, "starts").ok_or("it has no starts")?,
            aints(node, "ends").ok_or("it has no ends")?,
            aints(node, "axes"),
            None,
        )
    } else {
        (
            ints(input(ins, 1)?, "starts")?,
            ints(input(ins, 2)?, "ends")?,
            opt(ins, 3).map(|a| ints(a, "axes")).transpose()?,
            opt(ins, 4).map(|s| ints(s, "steps")).transpose()?,
        )
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<R<_>>()?,
        None => (0..starts.len()).collect(),
    };
    if ends.len() != starts.len() || axes.len() != starts.len() {
        return Err("its starts, ends and axes differ in length".into());
    }
    let mut shape = x.shape.clone();
    let mut ranges: Vec<(i64, i64, i64)> = x.shape.iter().map(|&d| (0, d as i64, 1)).collect();
    for (k, &a) in axes.iter().enumerate() {
        let d = x.shape[a] as i64;
        let step = steps.as_ref().and_then(|s| s.get(k).copied()).unwrap_or(1);
        if step == 0 {
            return Err("a step of 0".into());
        }
        let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (s, e) = (fix(starts[k]), fix(ends[k]));
        let (s, e, count) = if d == 0 {
            (0, 0, 0)
        } else if step > 0 {
            let s = s.clamp(0, d);
            let e = e.clamp(0, d);
            let count = if e > s {
                ((e - s) as u64).div_ceil(step.unsigned_abs())
            } else {
                0
            };
            (s, e, count as i64)
        } else {
            let s = s.clamp(0, d - 1);
            let e = e.clamp(-1, d - 1);
            let count = if s > e {
                ((s - e) as u64).div_ceil(step.unsigned_abs())
            } else {
                0
            };
            (s, e, count as i64)
        };
        shape[a] = count as usize;
        ranges[a] = (s, e, step);
    }
    let value = x.value.as_ref().and_then(|v| {
        let strides = strides_of(&x.shape);
        gather_positions(&shape, |pos| {
            pos.iter()
                .enumerate()
                .map(|(a, &p)| {
                    let (s, _, step) = ranges[a];
                    (s + p as i64 * step) as usize * strides[a]
                })
                .sum()
        })
        .iter()
        .map(|&i| v.get(i).copied())
        .collect()
    });
    Ok(view(with_value(x.elem, shape, value)?))
}

fn gather(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let idx = input(ins, 1)?;
    let a = axis(ai(node, "axis", 0), x.shape.len())?;
    let mut shape = x.shape[..a].to_vec();
    shape.extend(&idx.shape);
    shape.extend(&x.shape[a + 1..]);
    let value = match (&x.value, &idx.value) {
        (Some(v), Some(iv)) if n(&shape) as usize <= SMALL => {
            let outer = n(&x.shape[..a]) as usize;
            let inner = n(&x.shape[a + 1..]) as usize;
            let len = x.shape[a] as i64;
            let mut out = Vec::with_capacity(n(&shape) as usize);
            for o in 0..outer {
                for &i in iv {
                    let i = i as i64;
                    let i = if i < 0 { i + len } else { i };
                    if !(0..len).contains(&i) {
                        return Err(format!("index {i} is outside 0..{len}"));
                    }
                    let base = (o * len as usize + i as usize) * inner;
                    out.extend_from_slice(&v[base..base + inner]);
                }
            }
            Some(out)
        }
        _ => None,
    };
    Ok(one(with_value(x.elem, shape, value)?, 0, 0))
}

fn gather_nd(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let idx = input(ins, 1)?;
    let b = ai(node, "batch_dims", 0).max(0) as usize;
    let last = *idx.shape.last().ok_or("its indices are a scalar")?;
    if b + last > x.shape.len() {
        return Err("its indices reach past the data's rank".into());
    }
    let mut shape = idx.shape[..idx.shape.len() - 1].to_vec();
    shape.extend(&x.shape[b + last..]);
    Ok(one(t(x.elem, shape)?, 0, 0))
}

fn pad(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let pads = if opset >= 11 {
        ints(input(ins, 1)?, "pads")?
    } else {
        aints(node, "pads").ok_or("it has no pads")?
    };
    let axes: Vec<usize> = match opt(ins, 3) {
        Some(a) => ints(a, "axes")?
            .iter()
            .map(|&v| axis(v, rank))
            .collect::<R<_>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!("{} pads for {} axes", pads.len(), axes.len()));
    }
    let mut shape = x.shape.clone();
    for (k, &a) in axes.iter().enumerate() {
        let d = shape[a] as i128 + pads[k] as i128 + pads[k + axes.len()] as i128;
        if d < 0 || d > super::MAX_ELEMENTS as i128 {
            return Err(format!("pads {pads:?} leave a size out of range"));
        }
        shape[a] = d as usize;
    }
    Ok(one(t(x.elem, shape)?, 0, 0))
}

/// Spatial output sizes of a convolution or pooling window.
fn windows(node: &pb::NodeProto, spatial: &[usize], kernel: &[usize], ceil: bool) -> R<Vec<usize>> {
    let s = spatial.len();
    let strides = aints(node, "strides").unwrap_or_else(|| vec![1; s]);
    let dil = aints(node, "dilations").unwrap_or_else(|| vec![1; s]);
    let pads = aints(node, "pads").unwrap_or_else(|| vec![0; 2 * s]);
    let auto = astr(node, "auto_pad", "NOTSET");
    if !matches!(
        auto.as_str(),
        "NOTSET" | "SAME_UPPER" | "SAME_LOWER" | "VALID" | ""
    ) {
        return Err(format!("auto_pad {auto:?} is none of ONNX's"));
    }
    if strides.len() != s || dil.len() != s || pads.len() != 2 * s || kernel.len() != s {
        return Err(format!(
            "its strides, dilations, pads or kernel do not fit {s} spatial axes"
        ));
    }
    let mut out = Vec::with_capacity(s);
    for i in 0..s {
        let (st, d) = (strides[i], dil[i]);
        if st <= 0 || d <= 0 {
            return Err("a stride or dilation below 1".into());
        }
        let (st, d) = (st as usize, d as usize);
        let span = times(kernel[i].max(1) - 1, d)? + 1;
        let len = spatial[i];
        let o = match auto.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => len.div_ceil(st),
            "VALID" => {
                if len < span {
                    return Err(format!("a window of {span} does not fit {len}"));
                }
                (len - span) / st + 1
            }
            _ => {
                let (pb, pe) = (pads[i], pads[i + s]);
                if pb < 0 || pe < 0 {
                    return Err("negative pads".into());
                }
                let padded = len
                    .checked_add(pb as usize)
                    .and_then(|v| v.checked_add(pe as usize))
                    .ok_or("its pads overflow")?;
                if padded < span {
                    return Err(format!("a window of {span} does not fit {padded}"));
                }
                if ceil {
                    let mut o = (padded - span).div_ceil(st) + 1;
                    if (o - 1).saturating_mul(st) >= len + pb as usize {
                        o -= 1;
                    }
                    o
                } else {
                    (padded - span) / st + 1
                }
            }
        };
        out.push(o);
    }
    Ok(out)
}

fn conv(node: &pb::NodeProto, ins: &[Option<&T>], w_at: usize, x_at: usize, b_at: usize) -> R<Out> {
    let x = input(ins, x_at)?;
    let w = input(ins, w_at)?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return Err(format!(
            "input {} and weights {} are not N×C×… and M×C/g×…",
            show_shape(&x.shape),
            show_shape(&w.shape)
        ));
    }
    let group = ai(node, "group", 1);
    if group < 1 {
        return Err(format!("a group of {group}"));
    }
    let group = group as usize;
    let (nb, c) = (x.shape[0], x.shape[1]);
    let m = w.shape[0];
    if !c.is_multiple_of(group) || !m.is_multiple_of(group) || times(w.shape[1], group)? != c {
        return Err(format!(
            "{c} input channels in {group} groups do not fit weights {}",
            show_shape(&w.shape)
        ));
    }
    let kernel: Vec<usize> = w.shape[2..].to_vec();
    if let Some(k) = aints(node, "kernel_shape") {
        if k.iter().map(|&v| v as usize).ne(kernel.iter().copied()) {
            return Err(format!(
                "kernel_shape {k:?} contradicts its weights {}",
                show_shape(&w.shape)
            ));
        }
    }
    let spatial = windows(node, &x.shape[2..], &kernel, false)?;
    let mut shape = vec![nb, m];
    shape.extend(&spatial);
    let outputs = n(&shape);
    let per = mul(&[w.shape[1] as u64, n(&kernel)])?;
    let macs = mul(&[outputs, per])?;
    let bias = if opt(ins, b_at).is_some() { outputs } else { 0 };
    let flops = add(mul(&[macs, 2])?, bias)?;
    let elem = if node.op_type == "ConvInteger" {
        D::Int32 as i32
    } else if node.op_type == "QLinearConv" {
        opt(ins, 7).map_or(D::Uint8 as i32, |z| z.elem)
    } else {
        x.elem
    };
    Ok(one(t(elem, shape)?, macs, flops))
}

fn conv_transpose(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let w = input(ins, 1)?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return Err("its input and weights are not N×C×… and C×M/g×…".into());
    }
    let s = x.shape.len() - 2;
    let group = ai(node, "group", 1).max(1) as usize;
    if w.shape[0] != x.shape[1] {
        return Err(format!(
            "{} input channels do not fit weights {}",
            x.shape[1],
            show_shape(&w.shape)
        ));
    }
    let m = times(w.shape[1], group)?;
    let kernel: Vec<usize> = w.shape[2..].to_vec();
    let strides = aints(node, "strides").unwrap_or_else(|| vec![1; s]);
    let dil = aints(node, "dilations").unwrap_or_else(|| vec![1; s]);
    let pads = aints(node, "pads").unwrap_or_else(|| vec![0; 2 * s]);
    let extra = aints(node, "output_padding").unwrap_or_else(|| vec![0; s]);
    if strides.len() != s || dil.len() != s || pads.len() != 2 * s || extra.len() != s {
        return Err("its strides, dilations, pads or output padding do not fit".into());
    }
    let spatial: Vec<usize> = match aints(node, "output_shape") {
        Some(o) if o.len() == s => o.iter().map(|&v| v.max(0) as usize).collect(),
        _ => {
            let auto = astr(node, "auto_pad", "NOTSET");
            let mut out = Vec::with_capacity(s);
            for i in 0..s {
                // Attributes may be any 64-bit numbers: computed wide, then checked.
                let len = x.shape[2 + i] as i128;
                let v = if auto.starts_with("SAME") {
                    len * strides[i] as i128
                } else {
                    strides[i] as i128 * (len - 1)
                        + extra[i] as i128
                        + (kernel[i] as i128 - 1) * dil[i] as i128
                        + 1
                        - pads[i] as i128
                        - pads[i + s] as i128
                };
                if v <= 0 || v > super::MAX_ELEMENTS as i128 {
                    return Err(format!("its output size {v} is out of range"));
                }
                out.push(v as usize);
            }
            out
        }
    };
    let mut shape = vec![x.shape[0], m];
    shape.extend(&spatial);
    let macs = mul(&[n(&x.shape), w.shape[1] as u64, n(&kernel)])?;
    let bias = if opt(ins, 2).is_some() { n(&shape) } else { 0 };
    let flops = add(mul(&[macs, 2])?, bias)?;
    Ok(one(t(x.elem, shape)?, macs, flops))
}

fn matmul(ins: &[Option<&T>], a_at: usize, b_at: usize) -> R<Out> {
    let a = input(ins, a_at)?;
    let b = input(ins, b_at)?;
    let mut sa = a.shape.clone();
    let mut sb = b.shape.clone();
    let (va, vb) = (sa.len() == 1, sb.len() == 1);
    if va {
        sa.insert(0, 1);
    }
    if vb {
        sb.push(1);
    }
    if sa.is_empty() || sb.is_empty() {
        return Err("MatMul of a scalar".into());
    }
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, nn) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if k != k2 {
        return Err(format!(
            "{} × {} do not multiply",
            show_shape(&a.shape),
            show_shape(&b.shape)
        ));
    }
    let batch = broadcast(&[&sa[..sa.len() - 2], &sb[..sb.len() - 2]])?;
    let mut shape = batch.clone();
    if !va {
        shape.push(m);
    }
    if !vb {
        shape.push(nn);
    }
    let macs = mul(&[n(&batch), m as u64, nn as u64, k as u64])?;
    Ok(one(t(a.elem, shape)?, macs, mul(&[macs, 2])?))
}

fn gemm(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let a = input(ins, 0)?;
    let b = input(ins, 1)?;
    let ([a0, a1], [b0, b1]) = (&a.shape[..], &b.shape[..]) else {
        return Err(format!(
            "{} and {} are not matrices",
            show_shape(&a.shape),
            show_shape(&b.shape)
        ));
    };
    let (a0, a1, b0, b1) = (*a0, *a1, *b0, *b1);
    let (m, k) = if ai(node, "transA", 0) != 0 {
        (a1, a0)
    } else {
        (a0, a1)
    };
    let (k2, nn) = if ai(node, "transB", 0) != 0 {
        (b1, b0)
    } else {
        (b0, b1)
    };
    if k != k2 {
        return Err(format!("{m}×{k} × {k2}×{nn} do not multiply"));
    }
    let macs = mul(&[m as u64, nn as u64, k as u64])?;
    let c = if opt(ins, 2).is_some() && af(node, "beta", 1.0) != 0.0 {
        mul(&[m as u64, nn as u64])?
    } else {
        0
    };
    Ok(one(
        t(a.elem, vec![m, nn])?,
        macs,
        add(mul(&[macs, 2])?, c)?,
    ))
}

fn einsum(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let eq: String = astr(node, "equation", "")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    let xs: Vec<&T> = ins.iter().flatten().copied().collect();
    if terms.len() != xs.len() {
        return Err(format!("equation {eq:?} names {} operands", terms.len()));
    }
    let mut sizes: std::collections::BTreeMap<char, usize> = Default::default();
    let mut ellipsis: Vec<usize> = Vec::new();
    let mut counts: std::collections::HashMap<char, usize> = Default::default();
    for (term, x) in terms.iter().zip(&xs) {
        let labels: Vec<char> = term.replace("...", "").chars().collect();
        let has_ell = term.contains("...");
        let ell = x
            .shape
            .len()
            .checked_sub(labels.len())
            .ok_or_else(|| format!("term {term:?} has more labels than its operand's rank"))?;
        if !has_ell && ell != 0 {
            return Err(format!(
                "term {term:?} does not fit shape {}",
                show_shape(&x.shape)
            ));
        }
        let at = term
            .find("...")
            .map_or(labels.len(), |p| term[..p].chars().count());
        let dims: Vec<usize> = x.shape.clone();
        let ell_dims = &dims[at..at + ell];
        ellipsis = broadcast(&[&ellipsis, ell_dims])?;
        for (i, &l) in labels.iter().enumerate() {
            let d = if i < at { dims[i] } else { dims[i + ell] };
            let e = sizes.entry(l).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && d != *e {
                return Err(format!("label {l} is {e} and {d}"));
            }
            *counts.entry(l).or_default() += 1;
        }
    }
    let out_labels: String = match rhs {
        Some(r) => r,
        None => {
            let once: String = sizes.keys().filter(|l| counts.get(l) == Some(&1)).collect();
            format!("...{once}")
        }
    };
    let mut shape = Vec::new();
    let at = out_labels.find("...");
    for (i, l) in out_labels.replace("...", "").chars().enumerate() {
        if at.is_some_and(|p| out_labels[..p].chars().count() == i) {
            shape.extend(&ellipsis);
        }
        shape.push(
            *sizes
                .get(&l)
                .ok_or_else(|| format!("output label {l} is no input's"))?,
        );
    }
    if at.is_some_and(|p| out_labels[..p].chars().count() == out_labels.replace("...", "").len()) {
        shape.extend(&ellipsis);
    }
    let labels: Vec<u64> = sizes.values().map(|&d| d as u64).collect();
    let space = mul(&[n(&ellipsis), mul(&labels)?])?;
    let (macs, flops) = if xs.len() >= 2 {
        let macs = mul(&[space, xs.len() as u64 - 1])?;
        (macs, mul(&[macs, 2])?)
    } else {
        (0, space.saturating_sub(n(&shape)))
    };
    let elem = xs.first().map_or(F32, |x| x.elem);
    Ok(one(t(elem, shape)?, macs, flops))
}

fn pool(node: &pb::NodeProto, op: &str, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    if x.shape.len() < 3 {
        return Err("its input has no spatial axes".into());
    }
    let kernel: Vec<usize> = aints(node, "kernel_shape")
        .ok_or("it has no kernel_shape")?
        .iter()
        .map(|&k| k.max(1) as usize)
        .collect();
    let spatial = windows(node, &x.shape[2..], &kernel, ai(node, "ceil_mode", 0) != 0)?;
    let mut shape = x.shape[..2].to_vec();
    shape.extend(&spatial);
    let window = n(&kernel);
    let per = match op {
        "MaxPool" => window - 1,
        "AveragePool" => window,
        _ => 2 * window,
    };
    let flops = mul(&[n(&shape), per])?;
    let mut out = one(t(x.elem, shape.clone())?, 0, flops);
    if op == "MaxPool" && node.output.len() > 1 {
        out.outputs.push(t(I64, shape)?);
    }
    Ok(out)
}

fn reduce(node: &pb::NodeProto, op: &str, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let keep = ai(node, "keepdims", 1) != 0;
    let arg = op.starts_with("Arg");
    let axes: Vec<usize> = if arg {
        vec![axis(ai(node, "axis", 0), rank)?]
    } else {
        let since = if op == "ReduceSum" { 13 } else { 18 };
        match axes_of(node, opset, ins, since)? {
            Some(a) if !a.is_empty() => a.iter().map(|&v| axis(v, rank)).collect::<R<_>>()?,
            _ if ai(node, "noop_with_empty_axes", 0) != 0 => Vec::new(),
            _ => (0..rank).collect(),
        }
    };
    let mut shape = Vec::with_capacity(rank);
    for (i, &d) in x.shape.iter().enumerate() {
        if axes.contains(&i) {
            if keep {
                shape.push(1);
            }
        } else {
            shape.push(d);
        }
    }
    let (i, o) = (n(&x.shape), n(&shape));
    let flops = match op {
        "ReduceMean" | "ReduceL1" | "ReduceLogSum" => i,
        "ReduceSumSquare" => mul(&[i, 2])?.saturating_sub(o),
        "ReduceL2" => mul(&[i, 2])?,
        "ReduceLogSumExp" => mul(&[i, 3])?,
        // An empty input reduces to outputs that cost nothing.
        _ => i.saturating_sub(o),
    };
    let value = match (&x.value, op) {
        (Some(v), "ReduceProd" | "ReduceSum" | "ReduceMax" | "ReduceMin") if o == 1 => {
            Some(vec![match op {
                "ReduceProd" => v.iter().product(),
                "ReduceSum" => v.iter().sum(),
                "ReduceMax" => v.iter().copied().fold(f64::MIN, f64::max),
                _ => v.iter().copied().fold(f64::MAX, f64::min),
            }])
        }
        _ => None,
    };
    let elem = if arg { I64 } else { x.elem };
    Ok(one(with_value(elem, shape, value)?, 0, flops))
}

fn resize(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    fn usable(t: Option<&T>) -> Option<&T> {
        t.filter(|t| n(&t.shape) > 0)
    }
    let (scales_at, sizes_at) = if node.op_type == "Upsample" || opset < 11 {
        (1, usize::MAX)
    } else {
        (2, 3)
    };
    let axes: Vec<usize> = match aints(node, "axes") {
        Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<R<_>>()?,
        None => (0..rank).collect(),
    };
    let mut shape = x.shape.clone();
    if let Some(sizes) = usable(opt(ins, sizes_at)) {
        let sizes = ints(sizes, "sizes")?;
        if sizes.len() != axes.len() {
            return Err(format!("{} sizes for {} axes", sizes.len(), axes.len()));
        }
        let policy = astr(node, "keep_aspect_ratio_policy", "stretch");
        if let Some(bad) = sizes.iter().find(|&&v| v < 0) {
            return Err(format!("a size of {bad}"));
        }
        if policy == "stretch" {
            for (&a, &s) in axes.iter().zip(&sizes) {
                shape[a] = s as usize;
            }
        } else {
            let ratios = axes
                .iter()
                .zip(&sizes)
                .map(|(&a, &s)| s as f64 / x.shape[a].max(1) as f64);
            let r = if policy == "not_larger" {
                ratios.fold(f64::MAX, f64::min)
            } else {
                ratios.fold(f64::MIN, f64::max)
            };
            for &a in &axes {
                shape[a] = (x.shape[a] as f64 * r).round() as usize;
            }
        }
    } else if let Some(scales) = usable(opt(ins, scales_at)) {
        let scales = floats(scales, "scales")?;
        if scales.len() != axes.len() {
            return Err(format!("{} scales for {} axes", scales.len(), axes.len()));
        }
        for (&a, &s) in axes.iter().zip(&scales) {
            if !(s > 0.0 && s.is_finite()) {
                return Err(format!("a scale of {s}"));
            }
            shape[a] = (x.shape[a] as f64 * s).floor() as usize;
        }
    } else if let Some(scales) = attr(node, "scales") {
        for (a, &s) in scales.floats.iter().enumerate().take(rank) {
            shape[a] = (x.shape[a] as f64 * s as f64).floor() as usize;
        }
    } else {
        return Err("it has neither scales nor sizes".into());
    }
    let d = shape.iter().zip(&x.shape).filter(|(a, b)| a != b).count() as u32;
    let per = match astr(node, "mode", "nearest").as_str() {
        "linear" | "bilinear" | "trilinear" => {
            2 * 2u64.checked_pow(d).ok_or("too many resized axes")? - 1
        }
        "cubic" | "bicubic" => 2 * 4u64.checked_pow(d).ok_or("too many resized axes")? - 1,
        _ => 0,
    };
    let flops = mul(&[n(&shape), per])?;
    Ok(one(t(x.elem, shape)?, 0, flops))
}

/// FLOPs of one fast Fourier transform of `len` points: 5 · N · log2 N, the usual count.
fn fft_flops(len: usize) -> u64 {
    let n = len.max(1) as u64;
    5 * n * (64 - (n - 1).leading_zeros()) as u64
}

/// STFT: frames of the signal, each transformed (one-sided: half the bins and one).
fn stft(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let [batch, len, _] = x.shape[..] else {
        return Err(format!(
            "its signal {} is not batch×length×1|2",
            show_shape(&x.shape)
        ));
    };
    let step = ints(input(ins, 1)?, "frame step")?
        .first()
        .copied()
        .unwrap_or(0);
    let frame = match (opt(ins, 3), opt(ins, 2)) {
        (Some(f), _) => ints(f, "frame length")?.first().copied().unwrap_or(0),
        (None, Some(w)) => *w.shape.first().ok_or("its window is a scalar")? as i64,
        (None, None) => return Err("it has neither a window nor a frame length".into()),
    };
    if step <= 0 || frame <= 0 || frame as usize > len {
        return Err(format!(
            "frames of {frame} every {step} do not fit {len} samples"
        ));
    }
    let (step, frame) = (step as usize, frame as usize);
    let frames = (len - frame) / step + 1;
    let bins = if ai(node, "onesided", 1) != 0 {
        frame / 2 + 1
    } else {
        frame
    };
    let flops = mul(&[batch as u64, frames as u64, fft_flops(frame) + frame as u64])?;
    Ok(one(t(x.elem, vec![batch, frames, bins, 2])?, 0, flops))
}

/// DFT along one axis (the last one holds real or complex parts).
fn dft(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    if rank < 2 || !matches!(x.shape[rank - 1], 1 | 2) {
        return Err(format!(
            "its input {} does not end in 1 or 2",
            show_shape(&x.shape)
        ));
    }
    let a = if opset >= 20 {
        match opt(ins, 2) {
            Some(a) => ints(a, "axis")?.first().copied().unwrap_or(-2),
            None => -2,
        }
    } else {
        ai(node, "axis", 1)
    };
    let a = axis(a, rank)?;
    if a == rank - 1 {
        return Err("its axis is the real/imaginary one".into());
    }
    let len = match opt(ins, 1) {
        Some(l) if n(&l.shape) > 0 => {
            ints(l, "DFT length")?.first().copied().unwrap_or(0).max(0) as usize
        }
        _ => x.shape[a],
    };
    let mut shape = x.shape.clone();
    shape[rank - 1] = 2;
    shape[a] = if ai(node, "onesided", 0) != 0 {
        len / 2 + 1
    } else {
        len
    };
    let transforms = n(&x.shape) / (x.shape[a].max(1) * x.shape[rank - 1]) as u64;
    let flops = mul(&[transforms, fft_flops(len)])?;
    Ok(one(t(x.elem, shape)?, 0, flops))
}

/// LSTM, GRU and RNN (and onnxruntime's dynamically quantized LSTM, weights at `w_at`).
fn recurrent(node: &pb::NodeProto, op: &str, ins: &[Option<&T>], w_at: usize) -> R<Out> {
    let x = input(ins, 0)?;
    let w = input(ins, w_at)?;
    let [a0, a1, input_size] = x.shape[..] else {
        return Err(format!("its input {} is not 3-D", show_shape(&x.shape)));
    };
    let layout = ai(node, "layout", 0);
    let (seq, batch) = if layout == 0 { (a0, a1) } else { (a1, a0) };
    let dirs = if astr(node, "direction", "forward") == "bidirectional" {
        2
    } else {
        1
    };
    let gates: usize = match op {
        "LSTM" => 4,
        "GRU" => 3,
        _ => 1,
    };
    let hidden = match ai(node, "hidden_size", 0) {
        h if h > 0 => h as usize,
        _ => w.shape.get(1).copied().unwrap_or(0) / gates,
    };
    if hidden == 0 {
        return Err("its hidden size is unknown".into());
    }
    let per_unit: u64 = match op {
        "LSTM" => 32,
        "GRU" => 22,
        _ => 6,
    };
    let steps = mul(&[seq as u64, dirs as u64, batch as u64])?;
    let macs = mul(&[
        steps,
        gates as u64,
        hidden as u64,
        (input_size as u64).saturating_add(hidden as u64),
    ])?;
    let flops = add(mul(&[macs, 2])?, mul(&[steps, hidden as u64, per_unit])?)?;
    let (y, state) = if layout == 0 {
        (vec![seq, dirs, batch, hidden], vec![dirs, batch, hidden])
    } else {
        (vec![batch, seq, dirs, hidden], vec![batch, dirs, hidden])
    };
    let mut outputs = vec![t(F32, y)?, t(F32, state.clone())?];
    if op == "LSTM" {
        outputs.push(t(F32, state)?);
    }
    outputs.truncate(node.output.len().max(1));
    Ok(Out {
        outputs,
        macs,
        flops,
        view: false,
    })
}

/// onnxruntime's contrib operators that exporters and its quantization tool write.
fn microsoft(node: &pb::NodeProto, op: &str, ins: &[Option<&T>]) -> R<Out> {
    match op {
        "DynamicQuantizeLSTM" => recurrent(node, "LSTM", ins, 1),
        "FusedConv" => {
            let mut out = conv(node, ins, 1, 0, 2)?;
            let extra = n(&out.outputs[0].shape);
            out.flops = add(out.flops, extra)?;
            Ok(out)
        }
        "FusedMatMul" | "DynamicQuantizeMatMul" | "MatMulIntegerToFloat" => {
            let mut out = matmul(ins, 0, 1)?;
            out.outputs[0].elem = F32;
            Ok(out)
        }
        "QLinearAdd" | "QLinearMul" => {
            let a = input(ins, 0)?;
            let b = input(ins, 3)?;
            let shape = broadcast(&[&a.shape, &b.shape])?;
            let flops = mul(&[n(&shape), 5])?;
            Ok(one(t(a.elem, shape)?, 0, flops))
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" => elementwise(input(ins, 0)?, 6),
        "QLinearGlobalAveragePool" => {
            let x = input(ins, 0)?;
            let last = ai(node, "channels_last", 0) != 0;
            let shape = if last {
                let mut s = vec![x.shape[0]];
                s.extend(std::iter::repeat_n(1, x.shape.len().saturating_sub(2)));
                s.push(*x.shape.last().unwrap_or(&1));
                s
            } else {
                let mut s = x.shape.clone();
                for d in s.iter_mut().skip(2) {
                    *d = 1;
                }
                s
            };
            Ok(one(t(x.elem, shape)?, 0, n(&x.shape)))
        }
        "Gelu" | "FastGelu" | "BiasGelu" | "QuickGelu" => elementwise(input(ins, 0)?, 6),
        "SkipLayerNormalization" => {
            let x = input(ins, 0)?;
            let mut out = elementwise(x, 8)?;
            out.outputs.truncate(1);
            Ok(out)
        }
        _ => Err("an onnxruntime contrib operator edgeprof does not cost yet".into()),
    }
}

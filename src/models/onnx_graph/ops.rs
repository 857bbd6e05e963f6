//! One node at a time: its outputs' element types and shapes (and values, where small and
//! known), and the work it does, by the operator's definition in the ONNX specification.

use super::{checked_elements, show_shape, SMALL, T};
use tract_onnx::pb;
use tract_onnx::pb::tensor_proto::DataType as D;

mod elementwise;
mod nn;
mod shape;
use elementwise::*;
use nn::*;
use shape::*;

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
        .ok_or_else(|| super::impossible::SIZES_OVERFLOW.to_string())
}

/// a · b · …, refused when it overflows.
fn mul(parts: &[u64]) -> R<u64> {
    parts
        .iter()
        .try_fold(1u64, |acc, &p| acc.checked_mul(p))
        .ok_or_else(|| super::impossible::COST_OVERFLOWS.to_string())
}

fn add(a: u64, b: u64) -> R<u64> {
    a.checked_add(b)
        .ok_or_else(|| super::impossible::COST_OVERFLOWS.to_string())
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
                    "shapes {} {}",
                    shapes
                        .iter()
                        .map(|s| show_shape(s))
                        .collect::<Vec<_>>()
                        .join(" and "),
                    super::impossible::CANNOT_BROADCAST
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
                    "repeats {reps:?} do not fit a rank-{} input (one count of 0 or more per \
                     dimension)",
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
                return Err(format!("its output is {}", super::impossible::TOO_LARGE));
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

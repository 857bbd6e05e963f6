//! One ONNX node read into layers (or folded, when it works on constants).

use super::{attr, attr_float, attr_int, attr_ints, const_of, unique, Reader, Val};
use crate::models::graph::{Op, ValueId};
use tract_onnx::pb;

pub(super) type Res<T> = Result<T, String>;

/// The padding the zoo's layers take (one number per axis, both ends), and whether in ceil
/// mode (`ceil_ok`: a pooling), that gives the output extent ONNX's begin/end `pads` give (in
/// ceil mode when `ceil`); None when no such padding exists.
fn symmetric(
    input: usize,
    kernel: usize,
    stride: usize,
    (begin, end): (usize, usize),
    ceil: bool,
    ceil_ok: bool,
) -> Option<(usize, bool)> {
    let padded = input + begin + end;
    if stride == 0 || padded < kernel {
        return None;
    }
    let span = padded - kernel;
    let want = if ceil {
        span.div_ceil(stride)
    } else {
        span / stride
    } + 1;
    let floor_out = |p: usize| (input + 2 * p).checked_sub(kernel).map(|s| s / stride + 1);
    let ceil_out = |p: usize| {
        (input + 2 * p)
            .checked_sub(kernel)
            .map(|_| crate::models::graph::ceil_extra(input, kernel, stride, p))
            .and_then(|extra| floor_out(p).map(|o| o + usize::from(extra > 0)))
    };
    let mut tries = vec![begin.min(end), begin.max(end), (begin + end) / 2];
    tries.dedup();
    for p in tries {
        if floor_out(p) == Some(want) {
            return Some((p, false));
        }
        if ceil_ok && ceil_out(p) == Some(want) {
            return Some((p, true));
        }
    }
    None
}

/// The (begin, end) padding of each spatial axis of a Conv or pooling node over `input` (N, C,
/// H, W), from its `pads` or `auto_pad`.
fn pads_of(
    node: &pb::NodeProto,
    input: &[usize],
    kernel: [usize; 2],
    stride: [usize; 2],
) -> Res<[(usize, usize); 2]> {
    let auto = attr(node, "auto_pad")
        .map(|a| String::from_utf8_lossy(&a.s).into_owned())
        .unwrap_or_default();
    let mut out = [(0, 0); 2];
    match auto.as_str() {
        "" | "NOTSET" => {
            let pads = attr_ints(node, "pads").unwrap_or_else(|| vec![0; 4]);
            let [b0, b1, e0, e1] = pads[..] else {
                return Err(format!("pads {pads:?} are not four numbers"));
            };
            for (axis, (b, e)) in [(b0, e0), (b1, e1)].into_iter().enumerate() {
                if !(0..=MAX_WINDOW).contains(&b) || !(0..=MAX_WINDOW).contains(&e) {
                    return Err(format!("pads {pads:?} out of range"));
                }
                out[axis] = (b as usize, e as usize);
            }
        }
        "VALID" => {}
        "SAME_UPPER" | "SAME_LOWER" => {
            for axis in 0..2 {
                let len = input[2 + axis];
                let total = (len.div_ceil(stride[axis]).saturating_sub(1) * stride[axis]
                    + kernel[axis])
                    .saturating_sub(len);
                let (small, large) = (total / 2, total - total / 2);
                out[axis] = if auto == "SAME_UPPER" {
                    (small, large)
                } else {
                    (large, small)
                };
            }
        }
        other => return Err(format!("auto_pad {other} is not one ONNX defines")),
    }
    Ok(out)
}

/// The largest kernel, stride, dilation or padding the reader takes (far beyond any network's).
const MAX_WINDOW: i64 = 1 << 16;

fn pair(node: &pb::NodeProto, name: &str, default: [usize; 2]) -> Res<[usize; 2]> {
    match attr_ints(node, name) {
        None => Ok(default),
        Some(v) => match v[..] {
            [a, b] if (1..=MAX_WINDOW).contains(&a) && (1..=MAX_WINDOW).contains(&b) => {
                Ok([a as usize, b as usize])
            }
            _ => Err(format!(
                "{name} {v:?} is not two positive numbers up to {MAX_WINDOW} (a 2-D operator)"
            )),
        },
    }
}

/// A node's first input, or why it has none.
pub(super) fn first(node: &pb::NodeProto) -> Res<&str> {
    node.input
        .first()
        .map(String::as_str)
        .ok_or_else(|| "it has no input".to_string())
}

/// Elements of a shape (saturating: shapes come from files).
pub(super) fn count(dims: &[usize]) -> usize {
    elements(dims).unwrap_or(usize::MAX)
}

/// Elements of a shape, None past usize.
pub(super) fn elements(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// The largest tensor (elements) and the most work per output element (a convolution's
/// channels × kernel, a fully connected layer's inputs) the reader accepts: far beyond any
/// network's, and small enough that the analytic costs stay within 64 bits.
pub(super) const MAX_ELEMENTS: usize = 1 << 30;
pub(super) const MAX_PER_OUTPUT: u64 = 1 << 24;

impl Reader {
    pub(super) fn val(&self, name: &str) -> Res<&Val> {
        self.values
            .get(name)
            .ok_or_else(|| format!("its input {name:?} is produced by no node before it"))
    }

    pub(super) fn tensor(&self, name: &str) -> Res<ValueId> {
        match self.val(name)? {
            Val::Tensor(v) => Ok(*v),
            _ => Err(format!(
                "its input {name:?} is not a tensor the layers compute"
            )),
        }
    }

    /// A small constant's values.
    pub(super) fn consts(&self, name: &str) -> Res<Vec<f64>> {
        match self.val(name)? {
            Val::Const { data: Some(d), .. } => Ok(d.clone()),
            _ => Err(format!(
                "its input {name:?} is not a constant edgeprof can read"
            )),
        }
    }

    /// An optional constant input: None when absent or named "".
    pub(super) fn opt_consts(&self, node: &pb::NodeProto, index: usize) -> Res<Option<Vec<f64>>> {
        match node.input.get(index).filter(|n| !n.is_empty()) {
            Some(n) => self.consts(n).map(Some),
            None => Ok(None),
        }
    }

    pub(super) fn shape(&self, v: ValueId) -> Vec<usize> {
        self.builder.shape(v).to_vec()
    }

    pub(super) fn layer(&mut self, name: &str, op: Op, inputs: &[ValueId]) -> Res<ValueId> {
        let per_output = match &op {
            Op::Conv2d {
                in_channels,
                groups,
                kernel,
                ..
            } => (in_channels / (*groups).max(1)) as u64 * kernel[0] as u64 * kernel[1] as u64,
            Op::Linear { in_features, .. } => *in_features as u64,
            Op::MaxPool2d { kernel, .. } => kernel[0] as u64 * kernel[1] as u64,
            _ => 1,
        };
        if per_output > MAX_PER_OUTPUT {
            return Err(format!(
                "{per_output} multiply-adds per output: beyond any network edgeprof can cost"
            ));
        }
        let name = unique(&mut self.names, name);
        let v = self
            .builder
            .add(&name, op, inputs)
            .map_err(|e| e.to_string())?;
        let shape = self.shape(v);
        if elements(&shape).is_none_or(|n| n > MAX_ELEMENTS) {
            return Err(format!(
                "an output of {shape:?}: larger than any tensor edgeprof can cost"
            ));
        }
        Ok(v)
    }

    pub(super) fn set(&mut self, node: &pb::NodeProto, index: usize, val: Val) {
        if let Some(o) = node.output.get(index).filter(|o| !o.is_empty()) {
            self.values.insert(o.clone(), val);
        }
    }

    /// Reads `node` (named `layer`); `fused` is the activation a gated product stands for.
    pub(super) fn node(
        &mut self,
        node: &pb::NodeProto,
        layer: &str,
        fused: Option<&Op>,
    ) -> Res<()> {
        let input = |i: usize| -> Res<&str> {
            node.input
                .get(i)
                .map(String::as_str)
                .ok_or_else(|| format!("it has no input {i}"))
        };
        let op = node.op_type.as_str();
        if let Some(act) = fused {
            // The gate was skipped: the one input still known is the gated tensor.
            let x = node
                .input
                .iter()
                .find_map(|n| match self.values.get(n) {
                    Some(Val::Tensor(v)) => Some(*v),
                    _ => None,
                })
                .ok_or("its gated input is not a tensor")?;
            let v = self.layer(layer, act.clone(), &[x])?;
            self.set(node, 0, Val::Tensor(v));
            return Ok(());
        }
        let val = match op {
            "Constant" => {
                let a = node.attribute.first().ok_or("it holds no value")?;
                match a.name.as_str() {
                    "value" => a.t.as_ref().map(const_of).ok_or("its value is empty")?,
                    "value_float" => Val::Const {
                        dims: vec![],
                        data: Some(vec![a.f as f64]),
                    },
                    "value_int" => Val::Const {
                        dims: vec![],
                        data: Some(vec![a.i as f64]),
                    },
                    "value_ints" => Val::Const {
                        dims: vec![a.ints.len()],
                        data: Some(a.ints.iter().map(|&v| v as f64).collect()),
                    },
                    "value_floats" => Val::Const {
                        dims: vec![a.floats.len()],
                        data: Some(a.floats.iter().map(|&v| v as f64).collect()),
                    },
                    other => return Err(format!("a constant given as {other}")),
                }
            }
            "Identity" | "Cast" => self.val(input(0)?)?.clone(),
            "Dropout" => match self.val(input(0)?)? {
                Val::Tensor(x) => {
                    let x = *x;
                    let ratio = match self.opt_consts(node, 1)? {
                        Some(r) => r.first().copied().unwrap_or(0.5) as f32,
                        None => attr_float(node, "ratio", 0.5),
                    };
                    Val::Tensor(self.layer(layer, Op::Dropout { p: ratio }, &[x])?)
                }
                other => other.clone(),
            },
            "Shape" => {
                let dims = match self.val(input(0)?)? {
                    Val::Tensor(v) => self.shape(*v),
                    Val::Const { dims, .. } => dims.clone(),
                    _ => return Err("the shape of a half-read reshape".to_string()),
                };
                let rank = dims.len() as i64;
                let at = |i: i64| (if i < 0 { i + rank } else { i }).clamp(0, rank) as usize;
                let (start, end) = (
                    at(attr_int(node, "start", 0)),
                    at(attr_int(node, "end", rank)),
                );
                let data: Vec<f64> = dims
                    .get(start..end.max(start))
                    .unwrap_or_default()
                    .iter()
                    .map(|&d| d as f64)
                    .collect();
                Val::Const {
                    dims: vec![data.len()],
                    data: Some(data),
                }
            }
            "Gather" => {
                let data = self.consts(input(0)?)?;
                let Val::Const { dims: idims, .. } = self.val(input(1)?)?.clone() else {
                    return Err("it gathers from a tensor the layers compute".to_string());
                };
                let index = self.consts(input(1)?)?;
                let picked = index
                    .iter()
                    .map(|&i| {
                        let i = if i < 0.0 { i + data.len() as f64 } else { i };
                        data.get(i as usize).copied()
                    })
                    .collect::<Option<Vec<f64>>>()
                    .ok_or("an index past the end")?;
                Val::Const {
                    dims: idims,
                    data: Some(picked),
                }
            }
            "Unsqueeze" | "Squeeze" => self.squeeze(node, layer, op == "Unsqueeze")?,
            "Concat" => self.concat(node, layer)?,
            "Add" | "Sub" | "Mul" | "Div" => self.binary(node, layer, op)?,
            "Relu" | "LeakyRelu" | "Clip" | "Sigmoid" | "Tanh" | "Softmax" | "HardSigmoid"
            | "HardSwish" => {
                let x = self.tensor(input(0)?)?;
                let act = match op {
                    "Relu" | "LeakyRelu" => Op::Relu,
                    "Clip" => {
                        let bound = |i: usize, name: &str| -> Res<Option<f64>> {
                            Ok(match self.opt_consts(node, i)? {
                                Some(v) => v.first().copied(),
                                None => attr(node, name).map(|a| a.f as f64),
                            })
                        };
                        match (bound(1, "min")?, bound(2, "max")?) {
                            (Some(0.0), None) => Op::Relu,
                            _ => Op::Relu6,
                        }
                    }
                    "Sigmoid" | "Tanh" | "Softmax" => Op::Sigmoid,
                    "HardSigmoid" => Op::Hardsigmoid,
                    _ => Op::Hardswish,
                };
                Val::Tensor(self.layer(layer, act, &[x])?)
            }
            "Conv" => self.conv(node, layer)?,
            "BatchNormalization" => {
                let x = self.tensor(input(0)?)?;
                let shape = self.shape(x);
                if shape.len() != 4 {
                    return Err(format!("a batch norm over {shape:?}, not an image batch"));
                }
                let op = Op::BatchNorm2d {
                    channels: shape[1],
                    eps: attr_float(node, "epsilon", 1e-5),
                };
                Val::Tensor(self.layer(layer, op, &[x])?)
            }
            "MaxPool" | "AveragePool" | "GlobalAveragePool" | "ReduceMean" => {
                self.pool(node, layer, op)?
            }
            "Flatten" => {
                let x = self.tensor(input(0)?)?;
                let rank = self.shape(x).len() as i64;
                let axis = attr_int(node, "axis", 1);
                match (rank, if axis < 0 { axis + rank } else { axis }) {
                    (2, 1) => Val::Tensor(x),
                    (_, 1) => Val::Tensor(self.layer(layer, Op::Flatten, &[x])?),
                    _ => return Err(format!("flattening from axis {axis}, not 1")),
                }
            }
            "Reshape" => self.reshape(node, layer)?,
            "Transpose" => match self.val(input(0)?)? {
                Val::Grouped {
                    x,
                    groups,
                    swapped: false,
                } if attr_ints(node, "perm").as_deref() == Some(&[0, 2, 1, 3, 4]) => Val::Grouped {
                    x: *x,
                    groups: *groups,
                    swapped: true,
                },
                _ => return Err("a transpose that is not half of a channel shuffle".to_string()),
            },
            "Gemm" | "MatMul" => self.matmul(node, layer, op)?,
            "Slice" => self.slice(node, layer)?,
            "Split" => return self.split(node, layer),
            other => return Err(format!("{other} is not read")),
        };
        self.set(node, 0, val);
        Ok(())
    }

    fn binary(&mut self, node: &pb::NodeProto, layer: &str, op: &str) -> Res<Val> {
        let [a, b] = &node.input[..] else {
            return Err(format!("{} inputs, not 2", node.input.len()));
        };
        let (va, vb) = (self.val(a)?.clone(), self.val(b)?.clone());
        match (&va, &vb) {
            (Val::Const { .. }, Val::Const { .. }) => {
                let (x, y) = (self.consts(a)?, self.consts(b)?);
                let n = x.len().max(y.len());
                let at = |v: &[f64], i: usize| v.get(if v.len() == 1 { 0 } else { i }).copied();
                let data = (0..n)
                    .map(|i| {
                        let (p, q) = (at(&x, i)?, at(&y, i)?);
                        Some(match op {
                            "Add" => p + q,
                            "Sub" => p - q,
                            "Mul" => p * q,
                            _ => (p / q).trunc(),
                        })
                    })
                    .collect::<Option<Vec<f64>>>()
                    .ok_or("constants of different lengths")?;
                let dims = if n == 1 && x.len() == y.len() {
                    match &va {
                        Val::Const { dims, .. } => dims.clone(),
                        _ => vec![1],
                    }
                } else {
                    vec![n]
                };
                Ok(Val::Const {
                    dims,
                    data: Some(data),
                })
            }
            (Val::Tensor(x), Val::Tensor(y)) => {
                let (sx, sy) = (self.shape(*x), self.shape(*y));
                if sx == sy {
                    return Ok(Val::Tensor(self.layer(layer, Op::Add, &[*x, *y])?));
                }
                let is_scale = |big: &[usize], small: &[usize]| {
                    big.len() == 4 && small == [big[0], big[1], 1, 1]
                };
                match op {
                    "Mul" if is_scale(&sx, &sy) => Ok(Val::Tensor(self.layer(
                        layer,
                        Op::ChannelScale,
                        &[*x, *y],
                    )?)),
                    "Mul" if is_scale(&sy, &sx) => Ok(Val::Tensor(self.layer(
                        layer,
                        Op::ChannelScale,
                        &[*y, *x],
                    )?)),
                    _ => Err(format!("{op} of tensors {sx:?} and {sy:?}")),
                }
            }
            (Val::Tensor(x), Val::Const { dims, .. })
            | (Val::Const { dims, .. }, Val::Tensor(x)) => {
                let shape = self.shape(*x);
                let n = count(dims);
                if shape.len() == 4 && (n == 1 || n == shape[1]) {
                    let op = Op::BatchNorm2d {
                        channels: shape[1],
                        eps: 0.0,
                    };
                    return Ok(Val::Tensor(self.layer(layer, op, &[*x])?));
                }
                if shape.len() == 2 && op == "Add" && n == shape[1] && self.builder.give_bias(*x) {
                    return Ok(Val::Tensor(*x));
                }
                Err(format!(
                    "{op} of a tensor {shape:?} and a constant {dims:?}"
                ))
            }
            _ => Err(format!("{op} of a half-read reshape")),
        }
    }

    fn conv(&mut self, node: &pb::NodeProto, layer: &str) -> Res<Val> {
        let x = self.tensor(first(node)?)?;
        let shape = self.shape(x);
        let Some(Val::Const { dims: w, .. }) = node.input.get(1).and_then(|n| self.values.get(n))
        else {
            return Err("its weights are not a constant".to_string());
        };
        let [out_channels, _, kh, kw] = w[..] else {
            return Err(format!("weights {w:?}: a 2-D convolution's are 4-D"));
        };
        if shape.len() != 4 {
            return Err(format!("a convolution over {shape:?}, not an image batch"));
        }
        if pair(node, "dilations", [1, 1])? != [1, 1] {
            return Err("a dilated convolution (edgeprof costs undilated ones)".to_string());
        }
        let kernel = pair(node, "kernel_shape", [kh, kw])?;
        let stride = pair(node, "strides", [1, 1])?;
        let pads = pads_of(node, &shape, kernel, stride)?;
        let mut padding = [0; 2];
        for axis in 0..2 {
            match symmetric(
                shape[2 + axis],
                kernel[axis],
                stride[axis],
                pads[axis],
                false,
                false,
            ) {
                Some((p, _)) => padding[axis] = p,
                None => return Err(format!("pads {pads:?}: no even padding gives its output")),
            }
        }
        let op = Op::Conv2d {
            in_channels: shape[1],
            out_channels,
            kernel,
            stride,
            padding,
            groups: attr_int(node, "group", 1).max(1) as usize,
            bias: node.input.get(2).is_some_and(|b| !b.is_empty()),
        };
        Ok(Val::Tensor(self.layer(layer, op, &[x])?))
    }

    fn pool(&mut self, node: &pb::NodeProto, layer: &str, op: &str) -> Res<Val> {
        let x = self.tensor(first(node)?)?;
        let shape = self.shape(x);
        if shape.len() != 4 {
            return Err(format!("a pooling over {shape:?}, not an image batch"));
        }
        let (h, w) = (shape[2], shape[3]);
        let global = Op::AdaptiveAvgPool2d { output: [1, 1] };
        let pooled = match op {
            "GlobalAveragePool" => global,
            "ReduceMean" => {
                let axes: Vec<i64> = match self.opt_consts(node, 1)? {
                    Some(a) => a.iter().map(|&v| v as i64).collect(),
                    None => attr_ints(node, "axes").unwrap_or_default(),
                };
                let mut axes: Vec<i64> = axes.iter().map(|&a| a.rem_euclid(4)).collect();
                axes.sort_unstable();
                if axes != [2, 3] {
                    return Err(format!("a mean over axes {axes:?}, not the map"));
                }
                let v = self.layer(layer, global, &[x])?;
                if attr_int(node, "keepdims", 1) == 0 {
                    let flat = format!("{layer}.flatten");
                    return Ok(Val::Tensor(self.layer(&flat, Op::Flatten, &[v])?));
                }
                return Ok(Val::Tensor(v));
            }
            _ => {
                let kernel = pair(node, "kernel_shape", [0, 0])?;
                if kernel.contains(&0) {
                    return Err("a pooling without kernel_shape".to_string());
                }
                let stride = pair(node, "strides", [1, 1])?;
                if pair(node, "dilations", [1, 1])? != [1, 1] {
                    return Err("a dilated pooling".to_string());
                }
                let pads = pads_of(node, &shape, kernel, stride)?;
                let ceil = attr_int(node, "ceil_mode", 0) != 0;
                let plain = pads == [(0, 0); 2] && !ceil;
                if op == "AveragePool" && plain && kernel == [h, w] {
                    global
                } else if op == "AveragePool"
                    && plain
                    && kernel == stride
                    && h % kernel[0] == 0
                    && w % kernel[1] == 0
                {
                    Op::AdaptiveAvgPool2d {
                        output: [h / kernel[0], w / kernel[1]],
                    }
                } else {
                    // Any other average pooling reads the same windows as a max pooling of
                    // them, and costs as one.
                    let mut padding = [0; 2];
                    let mut ceils = [false; 2];
                    for axis in 0..2 {
                        let (p, c) = symmetric(
                            shape[2 + axis],
                            kernel[axis],
                            stride[axis],
                            pads[axis],
                            ceil,
                            true,
                        )
                        .ok_or(format!("pads {pads:?}: no even padding gives its output"))?;
                        padding[axis] = p;
                        ceils[axis] = c;
                    }
                    if ceils[0] != ceils[1] {
                        return Err(format!("pads {pads:?}: no even padding gives its output"));
                    }
                    Op::MaxPool2d {
                        kernel,
                        stride,
                        padding,
                        ceil: ceils[0],
                    }
                }
            }
        };
        Ok(Val::Tensor(self.layer(layer, pooled, &[x])?))
    }

    fn matmul(&mut self, node: &pb::NodeProto, layer: &str, op: &str) -> Res<Val> {
        let a = self.val(first(node)?)?.clone();
        let b = self
            .val(node.input.get(1).ok_or("it has one input")?)?
            .clone();
        match (a, b) {
            (Val::Tensor(x), Val::Const { dims, .. }) => {
                let shape = self.shape(x);
                if op == "MatMul" && shape.len() == 4 && dims.len() == 2 && dims[0] == shape[3] {
                    return Ok(Val::ColsPooled { x, width: dims[1] });
                }
                let [k, m] = dims[..] else {
                    return Err(format!("weights {dims:?}, not a matrix"));
                };
                if attr_int(node, "transA", 0) != 0 {
                    return Err("a transposed input".to_string());
                }
                let (in_features, out_features) = if attr_int(node, "transB", 0) != 0 {
                    (m, k)
                } else {
                    (k, m)
                };
                if shape.len() != 2 || shape[1] != in_features {
                    return Err(format!(
                        "a fully connected layer of {in_features} inputs over {shape:?}"
                    ));
                }
                let op = Op::Linear {
                    in_features,
                    out_features,
                    bias: op == "Gemm" && node.input.get(2).is_some_and(|c| !c.is_empty()),
                };
                Ok(Val::Tensor(self.layer(layer, op, &[x])?))
            }
            (Val::Const { dims, .. }, Val::ColsPooled { x, width }) => {
                let shape = self.shape(x);
                match dims[..] {
                    [rows, h] if h == shape[2] => Ok(Val::Tensor(self.layer(
                        layer,
                        Op::AdaptiveAvgPool2d {
                            output: [rows, width],
                        },
                        &[x],
                    )?)),
                    _ => Err(format!("a pooling matrix {dims:?} over {shape:?}")),
                }
            }
            _ => Err("a product of two tensors the layers compute".to_string()),
        }
    }
}

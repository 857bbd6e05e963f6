//! The model description: a small graph of named layers with shapes inferred as it is built.
//!
//! It knows nothing about engines or file formats; the ONNX writer, the analytic cost model and
//! (later) other engines all read the same [`Model`].

use serde::Serialize;
use thiserror::Error;

/// A value in the graph: the model input, or the output of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ValueId {
    Input,
    Layer(usize),
}

/// The operators the zoo needs, with the attributes that fix their shape and cost.
/// All spatial tensors are NCHW, float32.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Op {
    Conv2d {
        in_channels: usize,
        out_channels: usize,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        groups: usize,
        bias: bool,
    },
    /// Inference-mode batch normalisation (running statistics) with PyTorch's epsilon (1e-5),
    /// or the model's own (MobileNetV3: 1e-3).
    BatchNorm2d {
        channels: usize,
        eps: f32,
    },
    Relu,
    /// min(max(x, 0), 6).
    Relu6,
    /// x · min(max(x + 3, 0), 6) / 6 (MobileNetV3).
    Hardswish,
    /// min(max(x + 3, 0), 6) / 6 (MobileNetV3's squeeze-and-excitation gate).
    Hardsigmoid,
    /// 1 / (1 + e^−x) (EfficientNet's squeeze-and-excitation gate).
    Sigmoid,
    /// x · sigmoid(x), also called swish (EfficientNet).
    Silu,
    /// Max pooling; padded cells never win (they count as negative infinity). `ceil`: PyTorch's
    /// ceil_mode, a last window that starts inside the input (padding included) may run past
    /// its end.
    MaxPool2d {
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil: bool,
    },
    /// PyTorch's AdaptiveAvgPool2d: output cell i averages input rows
    /// floor(i·H/out) .. ceil((i+1)·H/out), windows overlap when H is not a multiple of out.
    AdaptiveAvgPool2d {
        output: [usize; 2],
    },
    /// Element-wise sum of two tensors of one shape (residual connections).
    Add,
    /// A tensor scaled per channel by a second one of shape (N, C, 1, 1): the
    /// squeeze-and-excitation block's `scale * input`.
    ChannelScale,
    /// Concatenation along the channel axis.
    Concat,
    /// ShuffleNet's channel shuffle: view as (N, g, C/g, H, W), swap axes 1 and 2, flatten back.
    ChannelShuffle {
        groups: usize,
    },
    /// Channels start..end of the input (torch.chunk along dim 1).
    ChannelSlice {
        start: usize,
        end: usize,
    },
    /// Flatten all axes after the batch axis.
    Flatten,
    Linear {
        in_features: usize,
        out_features: usize,
        bias: bool,
    },
    /// Dropout: the identity at inference, kept so the layer list matches the reference.
    Dropout {
        p: f32,
    },
}

impl Op {
    /// A short, stable name for tables and JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Conv2d {
                groups,
                in_channels,
                ..
            } if *groups > 1 && groups == in_channels => "DepthwiseConv2d",
            Op::Conv2d { .. } => "Conv2d",
            Op::BatchNorm2d { .. } => "BatchNorm2d",
            Op::Relu => "ReLU",
            Op::Relu6 => "ReLU6",
            Op::Hardswish => "Hardswish",
            Op::Hardsigmoid => "Hardsigmoid",
            Op::Sigmoid => "Sigmoid",
            Op::Silu => "SiLU",
            Op::MaxPool2d { .. } => "MaxPool2d",
            Op::AdaptiveAvgPool2d { .. } => "AdaptiveAvgPool2d",
            Op::Add => "Add",
            Op::ChannelScale => "Mul",
            Op::Concat => "Concat",
            Op::ChannelShuffle { .. } => "ChannelShuffle",
            Op::ChannelSlice { .. } => "ChannelSlice",
            Op::Flatten => "Flatten",
            Op::Linear { .. } => "Linear",
            Op::Dropout { .. } => "Dropout",
        }
    }
}

/// The kinds ([`Op::kind`]) an engine fuses into the layer before them: a batch norm folded
/// into a convolution, an activation or a residual addition applied to its output, and the
/// layers that are views at inference.
pub const FUSED_AFTER: [&str; 10] = [
    "Add",
    "BatchNorm2d",
    "ReLU",
    "ReLU6",
    "Hardswish",
    "Hardsigmoid",
    "Sigmoid",
    "SiLU",
    "Dropout",
    "Flatten",
];

/// One named layer: its operator, the values it reads and the shape of the value it writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layer {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub output_shape: Vec<usize>,
}

/// A complete model: input shape (N, C, H, W), layers in execution order, and the output value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    pub name: String,
    pub input_shape: Vec<usize>,
    pub layers: Vec<Layer>,
    pub output: ValueId,
}

impl Model {
    pub fn shape_of(&self, value: ValueId) -> &[usize] {
        match value {
            ValueId::Input => &self.input_shape,
            ValueId::Layer(i) => &self.layers[i].output_shape,
        }
    }

    pub fn output_shape(&self) -> &[usize] {
        self.shape_of(self.output)
    }

    /// Layers `first..end` as a model of their own, its input the one tensor that enters them
    /// (the model's input, or layer `first - 1`'s output) and its output layer `end - 1`'s.
    /// Layer names are kept, so the seeded weights are the whole model's. None when the range is
    /// empty or another earlier tensor enters it (the cut is not a chain boundary).
    pub fn slice(&self, first: usize, end: usize) -> Option<Model> {
        if first >= end || end > self.layers.len() {
            return None;
        }
        let entry = first.checked_sub(1).map(ValueId::Layer);
        let mut layers = Vec::with_capacity(end - first);
        for layer in &self.layers[first..end] {
            let inputs = layer
                .inputs
                .iter()
                .map(|&v| match v {
                    ValueId::Layer(j) if j >= first => Some(ValueId::Layer(j - first)),
                    ValueId::Input if entry.is_none() => Some(ValueId::Input),
                    v if Some(v) == entry => Some(ValueId::Input),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            layers.push(Layer {
                inputs,
                ..layer.clone()
            });
        }
        let input_shape = match entry {
            Some(v) => self.shape_of(v).to_vec(),
            None => self.input_shape.clone(),
        };
        Some(Model {
            name: format!("{}[{}..{}]", self.name, first, end),
            input_shape,
            layers,
            output: ValueId::Layer(end - first - 1),
        })
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum GraphError {
    #[error("layer {layer} ({kind}): {reason}")]
    Shape {
        layer: String,
        kind: &'static str,
        reason: String,
    },
    #[error("two layers are both named {0}")]
    DuplicateName(String),
}

/// Builds a [`Model`] layer by layer, checking shapes as it goes.
pub struct GraphBuilder {
    model: Model,
}

impl GraphBuilder {
    /// `input_shape` is (N, C, H, W).
    pub fn new(name: &str, input_shape: [usize; 4]) -> Self {
        GraphBuilder {
            model: Model {
                name: name.to_string(),
                input_shape: input_shape.to_vec(),
                layers: Vec::new(),
                output: ValueId::Input,
            },
        }
    }

    pub fn shape(&self, value: ValueId) -> &[usize] {
        self.model.shape_of(value)
    }

    /// Channels of an NCHW value.
    pub fn channels(&self, value: ValueId) -> usize {
        self.shape(value).get(1).copied().unwrap_or(0)
    }

    /// Appends a layer reading `inputs`; returns the value it produces.
    pub fn add(&mut self, name: &str, op: Op, inputs: &[ValueId]) -> Result<ValueId, GraphError> {
        if self.model.layers.iter().any(|l| l.name == name) {
            return Err(GraphError::DuplicateName(name.to_string()));
        }
        let shapes: Vec<&[usize]> = inputs.iter().map(|v| self.shape(*v)).collect();
        let output_shape = infer_shape(&op, &shapes).map_err(|reason| GraphError::Shape {
            layer: name.to_string(),
            kind: op.kind(),
            reason,
        })?;
        self.model.layers.push(Layer {
            name: name.to_string(),
            op,
            inputs: inputs.to_vec(),
            output_shape,
        });
        let id = ValueId::Layer(self.model.layers.len() - 1);
        self.model.output = id;
        Ok(id)
    }

    /// A convolution with square kernel, stride and padding.
    #[allow(clippy::too_many_arguments)]
    pub fn conv(
        &mut self,
        name: &str,
        x: ValueId,
        out_channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        groups: usize,
        bias: bool,
    ) -> Result<ValueId, GraphError> {
        let op = Op::Conv2d {
            in_channels: self.channels(x),
            out_channels,
            kernel: [kernel; 2],
            stride: [stride; 2],
            padding: [padding; 2],
            groups,
            bias,
        };
        self.add(name, op, &[x])
    }

    pub fn batch_norm(&mut self, name: &str, x: ValueId) -> Result<ValueId, GraphError> {
        let channels = self.channels(x);
        self.add(
            name,
            Op::BatchNorm2d {
                channels,
                eps: crate::models::weights::BN_EPSILON,
            },
            &[x],
        )
    }

    pub fn relu(&mut self, name: &str, x: ValueId) -> Result<ValueId, GraphError> {
        self.add(name, Op::Relu, &[x])
    }

    pub fn max_pool(
        &mut self,
        name: &str,
        x: ValueId,
        kernel: usize,
        stride: usize,
        padding: usize,
    ) -> Result<ValueId, GraphError> {
        let op = Op::MaxPool2d {
            kernel: [kernel; 2],
            stride: [stride; 2],
            padding: [padding; 2],
            ceil: false,
        };
        self.add(name, op, &[x])
    }

    pub fn linear(
        &mut self,
        name: &str,
        x: ValueId,
        out_features: usize,
    ) -> Result<ValueId, GraphError> {
        let in_features = self.shape(x).get(1).copied().unwrap_or(0);
        let op = Op::Linear {
            in_features,
            out_features,
            bias: true,
        };
        self.add(name, op, &[x])
    }

    /// Gives the fully connected layer that produces `v` a bias (an exporter's MatMul, then
    /// Add of a constant); false when `v` is not a bias-less fully connected layer's output.
    pub fn give_bias(&mut self, v: ValueId) -> bool {
        let ValueId::Layer(i) = v else { return false };
        match self.model.layers.get_mut(i).map(|l| &mut l.op) {
            Some(Op::Linear { bias, .. }) if !*bias => {
                *bias = true;
                true
            }
            _ => false,
        }
    }

    pub fn finish(self) -> Model {
        self.model
    }
}

fn expect_inputs(shapes: &[&[usize]], count: usize, rank: usize) -> Result<(), String> {
    if shapes.len() != count {
        return Err(format!("expects {count} input(s), got {}", shapes.len()));
    }
    if let Some(bad) = shapes.iter().find(|s| s.len() != rank) {
        return Err(format!("expects rank-{rank} input(s), got shape {bad:?}"));
    }
    Ok(())
}

/// Output extent of a sliding window (floor mode, as PyTorch's default).
pub fn window_out(input: usize, kernel: usize, stride: usize, padding: usize) -> Option<usize> {
    let padded = input + 2 * padding;
    if stride == 0 || padded < kernel {
        return None;
    }
    Some((padded - kernel) / stride + 1)
}

/// The cells of padding a ceil-mode max pool adds at the end of an axis beyond `padding`, so
/// that floor mode over the padded input gives PyTorch's ceil-mode edge: its windows may run
/// past the end, but the last one must start inside the input or its leading padding. 0 when
/// ceil mode changes nothing (or the window does not fit).
pub fn ceil_extra(input: usize, kernel: usize, stride: usize, padding: usize) -> usize {
    let padded = input + 2 * padding;
    if stride == 0 || padded < kernel {
        return 0;
    }
    let mut out = (padded - kernel).div_ceil(stride) + 1;
    if (out - 1) * stride >= input + padding {
        out -= 1;
    }
    ((out - 1) * stride + kernel).saturating_sub(padded)
}

/// The extra end padding of a max pool over an input of NCHW `shape`, per spatial axis: what
/// [`ceil_extra`] gives in ceil mode, nothing in floor mode.
pub fn pool_end_padding(
    shape: &[usize],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    ceil: bool,
) -> [usize; 2] {
    let extra = |axis: usize| match (ceil, shape.get(2 + axis)) {
        (true, Some(&len)) => ceil_extra(len, kernel[axis], stride[axis], padding[axis]),
        _ => 0,
    };
    [extra(0), extra(1)]
}

fn spatial(
    shape: &[usize],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Result<[usize; 2], String> {
    let mut out = [0; 2];
    for axis in 0..2 {
        out[axis] = window_out(shape[2 + axis], kernel[axis], stride[axis], padding[axis])
            .ok_or_else(|| {
                format!(
                    "input {:?} is too small for a {}×{} window",
                    shape, kernel[0], kernel[1]
                )
            })?;
    }
    Ok(out)
}

fn infer_shape(op: &Op, shapes: &[&[usize]]) -> Result<Vec<usize>, String> {
    match op {
        Op::Conv2d {
            in_channels,
            out_channels,
            kernel,
            stride,
            padding,
            groups,
            ..
        } => {
            expect_inputs(shapes, 1, 4)?;
            let s = shapes[0];
            if s[1] != *in_channels {
                return Err(format!("expects {in_channels} channels, got {}", s[1]));
            }
            if *groups == 0 || in_channels % groups != 0 || out_channels % groups != 0 {
                return Err(format!(
                    "{groups} groups do not divide {in_channels} → {out_channels} channels"
                ));
            }
            let [h, w] = spatial(s, *kernel, *stride, *padding)?;
            Ok(vec![s[0], *out_channels, h, w])
        }
        Op::BatchNorm2d { channels, .. } => {
            expect_inputs(shapes, 1, 4)?;
            if shapes[0][1] != *channels {
                return Err(format!("expects {channels} channels, got {}", shapes[0][1]));
            }
            Ok(shapes[0].to_vec())
        }
        Op::Relu
        | Op::Relu6
        | Op::Hardswish
        | Op::Hardsigmoid
        | Op::Sigmoid
        | Op::Silu
        | Op::Dropout { .. } => {
            if shapes.len() != 1 {
                return Err(format!("expects 1 input, got {}", shapes.len()));
            }
            Ok(shapes[0].to_vec())
        }
        Op::MaxPool2d {
            kernel,
            stride,
            padding,
            ceil,
        } => {
            expect_inputs(shapes, 1, 4)?;
            if padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1] {
                return Err("padding must be at most half the kernel".to_string());
            }
            let s = shapes[0];
            let [h, w] = spatial(s, *kernel, *stride, *padding)?;
            if !ceil {
                return Ok(vec![s[0], s[1], h, w]);
            }
            // Ceil mode adds at most one window per axis: the one the extra padding completes.
            let extra = |axis: usize| {
                usize::from(ceil_extra(s[2 + axis], kernel[axis], stride[axis], padding[axis]) > 0)
            };
            Ok(vec![s[0], s[1], h + extra(0), w + extra(1)])
        }
        Op::AdaptiveAvgPool2d { output } => {
            expect_inputs(shapes, 1, 4)?;
            if output[0] == 0 || output[1] == 0 {
                return Err("output size must be positive".to_string());
            }
            let s = shapes[0];
            Ok(vec![s[0], s[1], output[0], output[1]])
        }
        Op::Add => {
            if shapes.len() != 2 || shapes[0] != shapes[1] {
                return Err(format!("expects two inputs of one shape, got {shapes:?}"));
            }
            Ok(shapes[0].to_vec())
        }
        Op::ChannelScale => {
            expect_inputs(shapes, 2, 4)?;
            let (x, s) = (shapes[0], shapes[1]);
            if s[0] != x[0] || s[1] != x[1] || s[2] != 1 || s[3] != 1 {
                return Err(format!(
                    "scales {x:?} by {s:?}: the scale must be (N, C, 1, 1) of the input's N and C"
                ));
            }
            Ok(x.to_vec())
        }
        Op::Concat => {
            if shapes.len() < 2 {
                return Err("expects at least two inputs".to_string());
            }
            expect_inputs(shapes, shapes.len(), 4)?;
            let first = shapes[0];
            let mut channels = 0;
            for s in shapes {
                if s[0] != first[0] || s[2..] != first[2..] {
                    return Err(format!(
                        "inputs differ outside the channel axis: {shapes:?}"
                    ));
                }
                channels += s[1];
            }
            Ok(vec![first[0], channels, first[2], first[3]])
        }
        Op::ChannelShuffle { groups } => {
            expect_inputs(shapes, 1, 4)?;
            if *groups == 0 || !shapes[0][1].is_multiple_of(*groups) {
                return Err(format!(
                    "{groups} groups do not divide {} channels",
                    shapes[0][1]
                ));
            }
            Ok(shapes[0].to_vec())
        }
        Op::ChannelSlice { start, end } => {
            expect_inputs(shapes, 1, 4)?;
            let s = shapes[0];
            if start >= end || *end > s[1] {
                return Err(format!(
                    "channels {start}..{end} are not within 0..{}",
                    s[1]
                ));
            }
            Ok(vec![s[0], end - start, s[2], s[3]])
        }
        Op::Flatten => {
            if shapes.len() != 1 || shapes[0].is_empty() {
                return Err("expects one input with a batch axis".to_string());
            }
            let s = shapes[0];
            Ok(vec![s[0], s[1..].iter().product()])
        }
        Op::Linear {
            in_features,
            out_features,
            ..
        } => {
            expect_inputs(shapes, 1, 2)?;
            if shapes[0][1] != *in_features {
                return Err(format!(
                    "expects {in_features} features, got {}",
                    shapes[0][1]
                ));
            }
            Ok(vec![shapes[0][0], *out_features])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_arithmetic_matches_pytorch_floor_mode() {
        assert_eq!(window_out(224, 7, 2, 3), Some(112));
        assert_eq!(window_out(112, 3, 2, 1), Some(56));
        assert_eq!(window_out(7, 2, 2, 0), Some(3));
        assert_eq!(window_out(1, 3, 1, 0), None);
    }

    #[test]
    fn builder_infers_shapes_and_rejects_mismatches() {
        let mut g = GraphBuilder::new("t", [2, 3, 32, 32]);
        let x = g.conv("c", ValueId::Input, 8, 3, 2, 1, 1, false);
        let x = x.map_err(|e| e.to_string());
        assert_eq!(x, Ok(ValueId::Layer(0)));
        assert_eq!(g.shape(ValueId::Layer(0)), &[2, 8, 16, 16]);
        let err = g.add("a", Op::Add, &[ValueId::Input, ValueId::Layer(0)]);
        assert!(matches!(err, Err(GraphError::Shape { .. })));
        let dup = g.relu("c", ValueId::Layer(0));
        assert_eq!(dup, Err(GraphError::DuplicateName("c".into())));
    }

    #[test]
    fn too_small_input_is_a_shape_error() {
        let mut g = GraphBuilder::new("t", [1, 3, 2, 2]);
        let err = g.conv("c", ValueId::Input, 8, 7, 2, 0, 1, false);
        assert!(matches!(err, Err(GraphError::Shape { .. })));
    }
}

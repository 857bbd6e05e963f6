//! The embedded candle engine (Hugging Face's minimalist Rust ML framework): a zoo model built
//! layer by layer from the model description with candle's own operators — `conv2d` (grouped
//! convolutions as candle runs them), `max_pool2d`, `avg_pool2d`, `matmul` — and the same seeded
//! parameters as the ONNX export (`models::weights`), so its outputs can be checked against
//! tract's. CPU only; candle's threads are rayon's, sized by `RAYON_NUM_THREADS`.

use crate::collect::kernels::Precision;
use crate::models::graph::{Model, Op, ValueId};
use crate::models::weights;
use candle_core::{DType, Device, Tensor};
use std::time::{Duration, Instant};

pub use super::tract::EngineError;

/// candle-core's version in this build, read from its dependency metadata (`Cargo.lock`) by
/// `build.rs`.
pub const CANDLE_VERSION: &str = env!("EDGEPROF_CANDLE_VERSION");

fn run_err(e: candle_core::Error) -> EngineError {
    let text = e.to_string().replace('\n', " ");
    EngineError::Run {
        reason: text.chars().take(300).collect(),
    }
}

/// What one layer computes, with its parameters already on the device.
enum Step {
    /// Convolution: (padding h, padding w) applied by candle when equal, else first.
    Conv {
        weight: Tensor,
        bias: Option<Tensor>,
        padding: [usize; 2],
        stride: usize,
        groups: usize,
    },
    /// Inference batch norm folded into a per-channel scale and shift, shaped (1, C, 1, 1).
    Affine {
        scale: Tensor,
        shift: Tensor,
    },
    Relu,
    Relu6,
    Hardswish,
    Hardsigmoid,
    Sigmoid,
    Silu,
    /// `padding` before and after each axis, and `end` more after it (ceil mode).
    MaxPool {
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        end: [usize; 2],
    },
    GlobalAvgPool,
    AvgPool {
        kernel: [usize; 2],
    },
    /// PyTorch's adaptive average pooling with overlapping windows: P_h · X · P_wᵀ.
    PoolMatrices {
        rows: Tensor,
        cols_t: Tensor,
    },
    Add,
    ChannelScale,
    Concat,
    Shuffle {
        groups: usize,
    },
    Slice {
        start: usize,
        len: usize,
    },
    Flatten,
    /// x · Wᵀ + b, with Wᵀ kept contiguous.
    Linear {
        weight_t: Tensor,
        bias: Option<Tensor>,
    },
    Identity,
}

impl Step {
    /// The step with its parameters in `dtype`.
    fn into_dtype(self, dtype: DType) -> candle_core::Result<Step> {
        let to = |t: Tensor| t.to_dtype(dtype);
        let to_opt = |t: Option<Tensor>| t.map(|t| t.to_dtype(dtype)).transpose();
        Ok(match self {
            Step::Conv {
                weight,
                bias,
                padding,
                stride,
                groups,
            } => Step::Conv {
                weight: to(weight)?,
                bias: to_opt(bias)?,
                padding,
                stride,
                groups,
            },
            Step::Affine { scale, shift } => Step::Affine {
                scale: to(scale)?,
                shift: to(shift)?,
            },
            Step::PoolMatrices { rows, cols_t } => Step::PoolMatrices {
                rows: to(rows)?,
                cols_t: to(cols_t)?,
            },
            Step::Linear { weight_t, bias } => Step::Linear {
                weight_t: to(weight_t)?,
                bias: to_opt(bias)?,
            },
            other => other,
        })
    }
}

/// The candle element type a precision runs in, or why candle does not run it here.
pub fn dtype_of(precision: Precision) -> Result<DType, crate::error::BadInput> {
    match precision {
        Precision::Fp32 => Ok(DType::F32),
        Precision::Fp16 => Ok(DType::F16),
        // Measured: "unsupported dtype BF16 for op matmul" from the first convolution.
        Precision::Bf16 => Err(crate::error::BadInput(format!(
            "candle {CANDLE_VERSION}'s CPU backend has no bf16 matrix multiply (its convolutions \
             need one)"
        ))),
        Precision::Fp64 | Precision::Int8 => Err(crate::error::BadInput(format!(
            "candle runs fp32 and fp16 here, not {precision} (it has no integer kernels)"
        ))),
    }
}

/// A zoo model ready to run on candle.
pub struct CandleSession {
    steps: Vec<(Step, Vec<ValueId>)>,
    output: ValueId,
    pub input_shape: Vec<usize>,
    /// Trainable parameters held, counted as torchvision counts them (batch-norm running
    /// statistics are buffers, not parameters).
    pub parameters: u64,
    /// Threads candle's thread pool runs with.
    pub threads: usize,
    /// The element type of its parameters, input and activations.
    pub dtype: DType,
    /// Building the layers and moving the parameters.
    pub init_time: Duration,
}

fn tensor(p: &weights::Param) -> Result<Tensor, EngineError> {
    Tensor::from_vec(p.data.clone(), p.dims.as_slice(), &Device::Cpu).map_err(run_err)
}

/// Sets the size of candle's (rayon's) thread pool; it must run before candle first computes
/// anything in this process. The count candle will really use is returned: rayon's global pool
/// cannot be resized once it exists.
pub fn set_threads(threads: usize) -> usize {
    let threads = threads.max(1);
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    // Builds the global pool now with that size; an error means it already exists.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
    rayon::current_num_threads()
}

impl CandleSession {
    /// Builds `model` with the parameters of `seed` on `threads` threads, in float32.
    pub fn load(model: &Model, seed: u64, threads: usize) -> Result<CandleSession, EngineError> {
        Self::load_in(model, seed, threads, Precision::Fp32)
    }

    /// As [`CandleSession::load`], with parameters, input and activations in `precision`
    /// (float32, float16 or bfloat16; the float32 parameters are rounded to it).
    pub fn load_in(
        model: &Model,
        seed: u64,
        threads: usize,
        precision: Precision,
    ) -> Result<CandleSession, EngineError> {
        let dtype = dtype_of(precision).map_err(|e| EngineError::UnsupportedModel {
            origin: format!("zoo model {} on candle", model.name),
            reason: e.0,
        })?;
        let start = Instant::now();
        let threads = set_threads(threads);
        let unsupported = |reason: String| EngineError::UnsupportedModel {
            origin: format!("zoo model {} on candle", model.name),
            reason,
        };
        let mut steps = Vec::with_capacity(model.layers.len());
        let mut parameters = 0u64;
        for layer in &model.layers {
            let params = weights::layer_params(&layer.op, &layer.name, seed);
            parameters += params
                .iter()
                .filter(|p| !p.name.ends_with(".running_mean") && !p.name.ends_with(".running_var"))
                .map(|p| p.data.len() as u64)
                .sum::<u64>();
            let in_shape = model.shape_of(layer.inputs[0]);
            let step = match &layer.op {
                Op::Conv2d {
                    stride,
                    padding,
                    groups,
                    ..
                } => {
                    if stride[0] != stride[1] {
                        return Err(unsupported(format!(
                            "layer {}: candle's conv2d takes one stride, not {stride:?}",
                            layer.name
                        )));
                    }
                    Step::Conv {
                        weight: tensor(&params[0])?,
                        bias: params
                            .get(1)
                            .map(|b| tensor(b)?.reshape((1, b.data.len(), 1, 1)).map_err(run_err))
                            .transpose()?,
                        padding: *padding,
                        stride: stride[0],
                        groups: *groups,
                    }
                }
                Op::BatchNorm2d { channels, eps } => {
                    // y = (x − mean) / √(var + ε) · γ + β = x · scale + shift.
                    let (g, b, m, v) = (
                        &params[0].data,
                        &params[1].data,
                        &params[2].data,
                        &params[3].data,
                    );
                    let scale: Vec<f32> =
                        (0..*channels).map(|c| g[c] / (v[c] + eps).sqrt()).collect();
                    let shift: Vec<f32> = (0..*channels).map(|c| b[c] - m[c] * scale[c]).collect();
                    let shape = (1, *channels, 1, 1);
                    Step::Affine {
                        scale: Tensor::from_vec(scale, shape, &Device::Cpu).map_err(run_err)?,
                        shift: Tensor::from_vec(shift, shape, &Device::Cpu).map_err(run_err)?,
                    }
                }
                Op::Relu => Step::Relu,
                Op::Relu6 => Step::Relu6,
                Op::Hardswish => Step::Hardswish,
                Op::Hardsigmoid => Step::Hardsigmoid,
                Op::Sigmoid => Step::Sigmoid,
                Op::Silu => Step::Silu,
                Op::MaxPool2d {
                    kernel,
                    stride,
                    padding,
                    ceil,
                } => Step::MaxPool {
                    kernel: *kernel,
                    stride: *stride,
                    padding: *padding,
                    end: crate::models::graph::pool_end_padding(
                        in_shape, *kernel, *stride, *padding, *ceil,
                    ),
                },
                Op::AdaptiveAvgPool2d { output } => {
                    let (h, w) = (in_shape[2], in_shape[3]);
                    if *output == [1, 1] {
                        Step::GlobalAvgPool
                    } else if h % output[0] == 0 && w % output[1] == 0 {
                        Step::AvgPool {
                            kernel: [h / output[0], w / output[1]],
                        }
                    } else {
                        let rows = weights::pooling_matrix(h, output[0]);
                        let cols = weights::pooling_matrix(w, output[1]);
                        Step::PoolMatrices {
                            rows: Tensor::from_vec(rows, (output[0], h), &Device::Cpu)
                                .map_err(run_err)?,
                            cols_t: Tensor::from_vec(cols, (output[1], w), &Device::Cpu)
                                .and_then(|t| t.t()?.contiguous())
                                .map_err(run_err)?,
                        }
                    }
                }
                Op::Add => Step::Add,
                Op::ChannelScale => Step::ChannelScale,
                Op::Concat => Step::Concat,
                Op::ChannelShuffle { groups } => Step::Shuffle { groups: *groups },
                Op::ChannelSlice { start, end } => Step::Slice {
                    start: *start,
                    len: end - start,
                },
                Op::Flatten => Step::Flatten,
                Op::Linear { .. } => Step::Linear {
                    weight_t: tensor(&params[0])?
                        .t()
                        .and_then(|t| t.contiguous())
                        .map_err(run_err)?,
                    bias: params.get(1).map(tensor).transpose()?,
                },
                Op::Dropout { .. } => Step::Identity,
            };
            let step = if dtype == DType::F32 {
                step
            } else {
                step.into_dtype(dtype).map_err(run_err)?
            };
            steps.push((step, layer.inputs.clone()));
        }
        Ok(CandleSession {
            steps,
            output: model.output,
            input_shape: model.input_shape.clone(),
            parameters,
            threads,
            dtype,
            init_time: start.elapsed(),
        })
    }

    /// The same reproducible input as tract's: uniform in [-1, 1) from `seed`.
    pub fn make_input(&self, seed: u64) -> Result<Tensor, EngineError> {
        self.input_from(weights::input_data(&self.input_shape, seed))
    }

    /// The input of `values` (as many as the input shape holds), in the session's precision.
    pub fn input_from(&self, values: Vec<f32>) -> Result<Tensor, EngineError> {
        Tensor::from_vec(values, self.input_shape.as_slice(), &Device::Cpu)
            .and_then(|t| t.to_dtype(self.dtype))
            .map_err(run_err)
    }

    fn forward(&self, input: &Tensor) -> candle_core::Result<Tensor> {
        let mut values: Vec<Tensor> = Vec::with_capacity(self.steps.len());
        let get = |values: &[Tensor], v: ValueId| -> Tensor {
            match v {
                ValueId::Input => input.clone(),
                ValueId::Layer(i) => values[i].clone(),
            }
        };
        for (step, inputs) in &self.steps {
            let x = get(&values, inputs[0]);
            let y = match step {
                Step::Conv {
                    weight,
                    bias,
                    padding,
                    stride,
                    groups,
                } => {
                    let y = if padding[0] == padding[1] {
                        x.conv2d(weight, padding[0], *stride, 1, *groups)?
                    } else {
                        x.pad_with_zeros(2, padding[0], padding[0])?
                            .pad_with_zeros(3, padding[1], padding[1])?
                            .conv2d(weight, 0, *stride, 1, *groups)?
                    };
                    match bias {
                        Some(b) => y.broadcast_add(b)?,
                        None => y,
                    }
                }
                Step::Affine { scale, shift } => x.broadcast_mul(scale)?.broadcast_add(shift)?,
                Step::Relu => x.relu()?,
                Step::Relu6 => x.clamp(0f32, 6f32)?,
                Step::Hardswish => (&x * hard_sigmoid(&x)?)?,
                Step::Hardsigmoid => hard_sigmoid(&x)?,
                Step::Sigmoid => sigmoid(&x)?,
                Step::Silu => (&x * sigmoid(&x)?)?,
                Step::MaxPool {
                    kernel,
                    stride,
                    padding,
                    end,
                } => {
                    let x = if *padding == [0, 0] && *end == [0, 0] {
                        x
                    } else {
                        pad_with_neg_infinity(&x, *padding, *end)?
                    };
                    x.max_pool2d_with_stride((kernel[0], kernel[1]), (stride[0], stride[1]))?
                }
                Step::GlobalAvgPool => x.mean_keepdim(3)?.mean_keepdim(2)?,
                Step::AvgPool { kernel } => {
                    x.avg_pool2d_with_stride((kernel[0], kernel[1]), (kernel[0], kernel[1]))?
                }
                Step::PoolMatrices { rows, cols_t } => {
                    rows.broadcast_matmul(&x.contiguous()?.broadcast_matmul(cols_t)?)?
                }
                Step::Add => (x + get(&values, inputs[1]))?,
                Step::ChannelScale => x.broadcast_mul(&get(&values, inputs[1]))?,
                Step::Concat => {
                    let parts: Vec<Tensor> = inputs.iter().map(|&v| get(&values, v)).collect();
                    Tensor::cat(&parts, 1)?
                }
                Step::Shuffle { groups } => {
                    let (n, c, h, w) = x.dims4()?;
                    x.reshape((n, *groups, c / groups, h, w))?
                        .transpose(1, 2)?
                        .contiguous()?
                        .reshape((n, c, h, w))?
                }
                Step::Slice { start, len } => x.narrow(1, *start, *len)?,
                Step::Flatten => x.flatten_from(1)?,
                Step::Linear { weight_t, bias } => {
                    let y = x.contiguous()?.matmul(weight_t)?;
                    match bias {
                        Some(b) => y.broadcast_add(b)?,
                        None => y,
                    }
                }
                Step::Identity => x,
            };
            values.push(y);
        }
        Ok(get(&values, self.output))
    }

    /// One inference; the output as float32 values with its shape.
    pub fn run(&self, input: &Tensor) -> Result<(Vec<usize>, Vec<f32>), EngineError> {
        let y = self.forward(input).map_err(run_err)?;
        let shape = y.dims().to_vec();
        let values = y
            .flatten_all()
            .and_then(|t| t.to_dtype(candle_core::DType::F32))
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(run_err)?;
        Ok((shape, values))
    }

    /// The time of one inference (the output is computed, then dropped).
    pub fn time_one(&self, input: &Tensor) -> Result<Duration, EngineError> {
        let start = Instant::now();
        let y = self.forward(input).map_err(run_err)?;
        // candle's CPU backend computes eagerly; reading one value makes sure of it.
        y.flatten_all()
            .and_then(|t| t.get(0))
            .and_then(|t| t.to_dtype(DType::F32))
            .and_then(|t| t.to_scalar::<f32>())
            .map_err(run_err)?;
        Ok(start.elapsed())
    }
}

/// Pads the spatial axes with −∞, so that padded cells never win a max pooling.
fn pad_with_neg_infinity(
    x: &Tensor,
    padding: [usize; 2],
    end: [usize; 2],
) -> candle_core::Result<Tensor> {
    // Along `axis`: `before` cells of −∞, x, `after` cells (empty parts left out).
    let pad = |x: Tensor, axis: usize, before: usize, after: usize| {
        if before + after == 0 {
            return Ok(x);
        }
        let mut dims = x.dims().to_vec();
        let mut side = |len: usize| -> candle_core::Result<Option<Tensor>> {
            if len == 0 {
                return Ok(None);
            }
            dims[axis] = len;
            Tensor::full(f32::NEG_INFINITY, dims.as_slice(), x.device())
                .and_then(|t| t.to_dtype(x.dtype()))
                .map(Some)
        };
        let first = side(before)?;
        let last = side(after)?;
        let parts: Vec<&Tensor> = first.iter().chain([&x]).chain(last.iter()).collect();
        Tensor::cat(&parts, axis)
    };
    let x = pad(x.clone(), 2, padding[0], padding[0] + end[0])?;
    pad(x, 3, padding[1], padding[1] + end[1])
}

/// PyTorch's hardsigmoid: min(max(x + 3, 0), 6) / 6.
fn hard_sigmoid(x: &Tensor) -> candle_core::Result<Tensor> {
    x.affine(1.0, 3.0)?
        .clamp(0f32, 6f32)?
        .affine(1.0 / 6.0, 0.0)
}

/// 1 / (1 + e^−x).
fn sigmoid(x: &Tensor) -> candle_core::Result<Tensor> {
    x.neg()?.exp()?.affine(1.0, 1.0)?.recip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::tract::{ModelSource, TractSession};
    use crate::models::zoo::{self, ModelParams};

    fn params(h: usize) -> ModelParams {
        ModelParams {
            num_classes: 10,
            channels: 3,
            height: h,
            width: h,
            batch: 1,
        }
    }

    /// The largest difference of `output` from `reference`, and the reference's largest
    /// magnitude (at least 1e-6).
    fn worst_of(output: &[f32], reference: &[f32]) -> (f32, f32) {
        let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
        let worst = output
            .iter()
            .zip(reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        (worst, scale)
    }

    /// candle and tract compute the same function on every zoo model: the largest difference is
    /// within 1e-4 of the output's largest magnitude (summation orders differ).
    #[test]
    fn candle_agrees_with_tract_on_every_zoo_model() {
        for name in zoo::zoo_names() {
            let model = match zoo::build(name, &params(40)) {
                Ok(m) => m,
                Err(e) => panic!("{name}: {e}"),
            };
            let candle = match CandleSession::load(&model, 7, 1) {
                Ok(s) => s,
                Err(e) => panic!("{name}: {e}"),
            };
            let tract = match TractSession::load(
                ModelSource::Zoo {
                    model: &model,
                    seed: 7,
                },
                None,
                1,
            ) {
                Ok(s) => s,
                Err(e) => panic!("{name}: {e}"),
            };
            let (c_shape, c) = match candle.make_input(3).and_then(|x| candle.run(&x)) {
                Ok(v) => v,
                Err(e) => panic!("{name}: {e}"),
            };
            let (t_shape, t) = match tract.make_input(3).and_then(|x| tract.run(&x)) {
                Ok(v) => v,
                Err(e) => panic!("{name}: {e}"),
            };
            assert_eq!(c_shape, t_shape, "{name}");
            let (worst, scale) = worst_of(&c, &t);
            errln!("{name}: max |candle - tract| = {worst:.2e}, largest |output| {scale:.2e}");
            assert!(
                worst <= 1e-4 * scale,
                "{name}: differs by {worst} (scale {scale})"
            );
            let zoo_count = crate::models::cost::analyze(&model).total.params;
            assert_eq!(candle.parameters, zoo_count, "{name}");
        }
    }

    /// fp16 computes what fp32 does, within its rounding: the largest difference relative to
    /// the output's largest magnitude stays under 2 % (11-bit significand, rounding in every
    /// layer) on every zoo model, and the output has the same shape.
    #[test]
    fn float16_stays_near_float32_on_every_zoo_model() {
        for name in zoo::zoo_names() {
            let model = match zoo::build(name, &params(40)) {
                Ok(m) => m,
                Err(e) => panic!("{name}: {e}"),
            };
            let run = |precision| match CandleSession::load_in(&model, 7, 1, precision)
                .and_then(|s| s.make_input(3).and_then(|x| s.run(&x)))
            {
                Ok(v) => v,
                Err(e) => panic!("{name} {precision}: {e}"),
            };
            let (shape, full) = run(Precision::Fp32);
            let (precision, bound) = (Precision::Fp16, 0.02);
            let (s, narrow) = run(precision);
            assert_eq!(s, shape, "{name} {precision}");
            let (worst, scale) = worst_of(&narrow, &full);
            errln!("{name} {precision}: max |diff| {worst:.2e} of {scale:.2e}");
            assert!(
                worst <= bound * scale,
                "{name} {precision}: {worst} of {scale}"
            );
        }
    }

    #[test]
    fn candle_has_no_int8_or_bf16_and_says_why() {
        let model = match zoo::build("mobilenet_v2", &params(40)) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        for (precision, why) in [
            (Precision::Int8, "not int8 (it has no integer kernels)"),
            (Precision::Bf16, "no bf16 matrix multiply"),
        ] {
            let Err(e) = CandleSession::load_in(&model, 7, 1, precision) else {
                panic!("candle loaded a {precision} model");
            };
            assert!(e.to_string().contains(why), "{e}");
        }
    }

    #[test]
    fn max_pooling_never_picks_padding() {
        let x = match Tensor::from_vec(vec![-5f32, -6.0, -7.0, -8.0], (1, 1, 2, 2), &Device::Cpu)
            .and_then(|x| pad_with_neg_infinity(&x, [1, 1], [0, 0]))
            .and_then(|x| x.max_pool2d_with_stride((3, 3), (1, 1)))
            .and_then(|x| x.flatten_all()?.to_vec1::<f32>())
        {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(x, vec![-5.0, -5.0, -5.0, -5.0]);
    }
}

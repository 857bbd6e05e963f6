//! Analytic cost of a model: FLOPs, parameters and bytes moved, per layer and in total.
//!
//! Counting rules (float32, N = batch, "out" = output elements of the layer):
//! - Conv2d: MACs = out · (C_in / groups) · k_h · k_w; FLOPs = 2 · MACs, plus `out` for the bias.
//! - Linear: MACs = N · in · out_features; FLOPs = 2 · MACs, plus N · out_features for the bias.
//! - BatchNorm2d (inference): 2 FLOPs per element (one scale, one shift once folded).
//! - ReLU: 1 FLOP per element (a max); ReLU6: 2 (a max and a min).
//! - MaxPool2d: k_h · k_w − 1 comparisons per output element.
//! - AdaptiveAvgPool2d: for each output cell, window_h · window_w FLOPs (the window's adds and
//!   one scale), with PyTorch's window bounds.
//! - Add: 1 FLOP per element. Concat and ChannelShuffle move data but compute nothing.
//! - Flatten, Dropout (inference) and ChannelSlice are views: no FLOPs and no traffic.
//!
//! Minimal DRAM traffic of a layer is the compulsory traffic of running it on its own: its
//! parameters and buffers read once, its inputs read once, its output written once. Views move
//! nothing. The model total is the sum over layers: a lower bound for layer-by-layer
//! execution, and the "analytic" DRAM bytes that roofline points use when no counters exist.

use super::graph::{Model, Op};
use serde::Serialize;

pub const BYTES_PER_ELEMENT: u64 = 4;

/// The analytic cost of one layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerCost {
    pub name: String,
    pub kind: &'static str,
    pub output_shape: Vec<usize>,
    /// Multiply-accumulates of convolutions and linear layers (zero elsewhere).
    pub macs: u64,
    pub flops: u64,
    /// Trainable parameters, as torchvision counts them.
    pub params: u64,
    /// Non-trainable state read at inference (BatchNorm running mean and variance).
    pub buffers: u64,
    pub param_bytes: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub dram_bytes: u64,
}

/// Totals over all layers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostTotals {
    pub macs: u64,
    pub flops: u64,
    pub params: u64,
    pub buffers: u64,
    pub param_bytes: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub dram_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCost {
    pub model: String,
    pub input_shape: Vec<usize>,
    pub output_shape: Vec<usize>,
    pub layers: Vec<LayerCost>,
    pub total: CostTotals,
}

fn elements(shape: &[usize]) -> u64 {
    shape.iter().map(|&d| d as u64).product()
}

/// Start (inclusive) and end (exclusive) of PyTorch's adaptive-pooling window `i` of `out`
/// over an axis of length `len`: floor(i·len/out) .. ceil((i+1)·len/out).
pub fn adaptive_window(i: usize, len: usize, out: usize) -> (usize, usize) {
    let start = (i * len) / out;
    let end = ((i + 1) * len).div_ceil(out);
    (start, end)
}

/// Sum over output cells of the window area, for one (N, C) plane.
fn adaptive_window_area_sum(in_h: usize, in_w: usize, out: [usize; 2]) -> u64 {
    let rows: u64 = (0..out[0])
        .map(|i| {
            let (s, e) = adaptive_window(i, in_h, out[0]);
            (e - s) as u64
        })
        .sum();
    let cols: u64 = (0..out[1])
        .map(|j| {
            let (s, e) = adaptive_window(j, in_w, out[1]);
            (e - s) as u64
        })
        .sum();
    rows * cols
}

/// (MACs, FLOPs, params, buffers, is_view) of one operator.
fn op_cost(op: &Op, inputs: &[&[usize]], output: &[usize]) -> (u64, u64, u64, u64, bool) {
    let out = elements(output);
    let first = inputs.first().copied().unwrap_or(&[]);
    match op {
        Op::Conv2d {
            in_channels,
            out_channels,
            kernel,
            groups,
            bias,
            ..
        } => {
            let per_output = (in_channels / groups * kernel[0] * kernel[1]) as u64;
            let macs = out * per_output;
            let weights = *out_channels as u64 * per_output;
            let bias_params = if *bias { *out_channels as u64 } else { 0 };
            let bias_flops = if *bias { out } else { 0 };
            (macs, 2 * macs + bias_flops, weights + bias_params, 0, false)
        }
        Op::Linear {
            in_features,
            out_features,
            bias,
        } => {
            let batch = output.first().copied().unwrap_or(1) as u64;
            let macs = batch * (*in_features as u64) * (*out_features as u64);
            let weights = (*in_features as u64) * (*out_features as u64);
            let bias_params = if *bias { *out_features as u64 } else { 0 };
            let bias_flops = if *bias { out } else { 0 };
            (macs, 2 * macs + bias_flops, weights + bias_params, 0, false)
        }
        Op::BatchNorm2d { channels, .. } => (
            0,
            2 * out,
            2 * *channels as u64,
            2 * *channels as u64,
            false,
        ),
        Op::Relu => (0, out, 0, 0, false),
        Op::Relu6 => (0, 2 * out, 0, 0, false),
        // Counted as the element-wise operations each takes (an exponential as one).
        Op::Hardsigmoid => (0, 3 * out, 0, 0, false),
        Op::Hardswish | Op::Sigmoid => (0, 4 * out, 0, 0, false),
        Op::Silu => (0, 5 * out, 0, 0, false),
        Op::MaxPool2d { kernel, .. } => (0, out * (kernel[0] * kernel[1] - 1) as u64, 0, 0, false),
        Op::AdaptiveAvgPool2d { output: size } => {
            let planes =
                (first.first().copied().unwrap_or(0) * first.get(1).copied().unwrap_or(0)) as u64;
            let (h, w) = (
                first.get(2).copied().unwrap_or(0),
                first.get(3).copied().unwrap_or(0),
            );
            (
                0,
                planes * adaptive_window_area_sum(h, w, *size),
                0,
                0,
                false,
            )
        }
        Op::Add | Op::ChannelScale => (0, out, 0, 0, false),
        Op::Concat | Op::ChannelShuffle { .. } => (0, 0, 0, 0, false),
        Op::ChannelSlice { .. } | Op::Flatten | Op::Dropout { .. } => (0, 0, 0, 0, true),
    }
}

/// Computes every layer's cost and the totals.
pub fn analyze(model: &Model) -> ModelCost {
    let mut total = CostTotals::default();
    let layers: Vec<LayerCost> = model
        .layers
        .iter()
        .map(|layer| {
            let inputs: Vec<&[usize]> = layer.inputs.iter().map(|v| model.shape_of(*v)).collect();
            let (macs, flops, params, buffers, is_view) =
                op_cost(&layer.op, &inputs, &layer.output_shape);
            let param_bytes = (params + buffers) * BYTES_PER_ELEMENT;
            let input_bytes: u64 = inputs.iter().map(|s| elements(s) * BYTES_PER_ELEMENT).sum();
            let output_bytes = elements(&layer.output_shape) * BYTES_PER_ELEMENT;
            let dram_bytes = if is_view {
                0
            } else {
                param_bytes + input_bytes + output_bytes
            };
            let cost = LayerCost {
                name: layer.name.clone(),
                kind: layer.op.kind(),
                output_shape: layer.output_shape.clone(),
                macs,
                flops,
                params,
                buffers,
                param_bytes,
                input_bytes,
                output_bytes,
                dram_bytes,
            };
            total.macs += macs;
            total.flops += flops;
            total.params += params;
            total.buffers += buffers;
            total.param_bytes += param_bytes;
            total.input_bytes += input_bytes;
            total.output_bytes += output_bytes;
            total.dram_bytes += dram_bytes;
            cost
        })
        .collect();
    ModelCost {
        model: model.name.clone(),
        input_shape: model.input_shape.clone(),
        output_shape: model.output_shape().to_vec(),
        layers,
        total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::graph::{GraphBuilder, ValueId};
    use crate::models::zoo::{self, ModelParams};

    fn single(input: [usize; 4], op: Op) -> LayerCost {
        let mut g = GraphBuilder::new("t", input);
        if let Err(e) = g.add("l", op, &[ValueId::Input]) {
            panic!("{e}");
        }
        let cost = analyze(&g.finish());
        cost.layers[0].clone()
    }

    #[test]
    fn plain_conv_by_hand() {
        // 3→8 channels, 3×3, stride 1, pad 1 on 2×3×10×10: output 2×8×10×10 = 1600 elements,
        // each 3·3·3 = 27 MACs → 43 200 MACs, 86 400 FLOPs + 1600 for the bias.
        let l = single(
            [2, 3, 10, 10],
            Op::Conv2d {
                in_channels: 3,
                out_channels: 8,
                kernel: [3, 3],
                stride: [1, 1],
                padding: [1, 1],
                groups: 1,
                bias: true,
            },
        );
        assert_eq!(l.macs, 43_200);
        assert_eq!(l.flops, 88_000);
        assert_eq!(l.params, 8 * 27 + 8);
        assert_eq!(l.input_bytes, 2 * 3 * 100 * 4);
        assert_eq!(l.output_bytes, 1600 * 4);
        assert_eq!(l.dram_bytes, (224 + 600 + 1600) * 4);
    }

    #[test]
    fn grouped_and_depthwise_conv_by_hand() {
        // 8→16 channels in 4 groups, 1×1: each output sees 2 inputs. 1×16×5×5 = 400 outputs.
        let grouped = single(
            [1, 8, 5, 5],
            Op::Conv2d {
                in_channels: 8,
                out_channels: 16,
                kernel: [1, 1],
                stride: [1, 1],
                padding: [0, 0],
                groups: 4,
                bias: false,
            },
        );
        assert_eq!(grouped.macs, 800);
        assert_eq!(grouped.params, 32);
        assert_eq!(grouped.kind, "Conv2d");
        // Depthwise 3×3 stride 2 pad 1 on 1×32×112×112 → 1×32×56×56, 9 MACs per output.
        let dw = single(
            [1, 32, 112, 112],
            Op::Conv2d {
                in_channels: 32,
                out_channels: 32,
                kernel: [3, 3],
                stride: [2, 2],
                padding: [1, 1],
                groups: 32,
                bias: false,
            },
        );
        assert_eq!(dw.output_shape, vec![1, 32, 56, 56]);
        assert_eq!(dw.macs, 32 * 56 * 56 * 9);
        assert_eq!(dw.flops, 2 * 32 * 56 * 56 * 9);
        assert_eq!(dw.params, 288);
        assert_eq!(dw.kind, "DepthwiseConv2d");
    }

    #[test]
    fn linear_by_hand() {
        let mut g = GraphBuilder::new("t", [4, 2, 8, 8]);
        let x = g.add("flat", Op::Flatten, &[ValueId::Input]);
        let Ok(x) = x else { panic!("flatten") };
        if let Err(e) = g.linear("fc", x, 10) {
            panic!("{e}");
        }
        let cost = analyze(&g.finish());
        let fc = &cost.layers[1];
        assert_eq!(fc.macs, 4 * 128 * 10);
        assert_eq!(fc.flops, 2 * 4 * 128 * 10 + 40);
        assert_eq!(fc.params, 1290);
        // The flatten is a view: no traffic.
        assert_eq!(cost.layers[0].dram_bytes, 0);
        assert_eq!(fc.dram_bytes, (1290 + 512 + 40) * 4);
    }

    #[test]
    fn pooling_by_hand() {
        // 3×3/2 pad 1 on 1×4×8×8 → 1×4×4×4: 64 outputs × 8 comparisons.
        let max = single(
            [1, 4, 8, 8],
            Op::MaxPool2d {
                kernel: [3, 3],
                stride: [2, 2],
                padding: [1, 1],
                ceil: false,
            },
        );
        assert_eq!(max.output_shape, vec![1, 4, 4, 4]);
        assert_eq!(max.flops, 64 * 8);
        // Global average pooling of 2×3×7×7: each of 6 planes sums 49 values.
        let global = single([2, 3, 7, 7], Op::AdaptiveAvgPool2d { output: [1, 1] });
        assert_eq!(global.flops, 6 * 49);
    }

    #[test]
    fn adaptive_windows_match_pytorch() {
        // 4 → 7: windows [0,1) [0,2) [1,2) [1,3) [2,3) [2,4) [3,4) (PyTorch's overlapping cells).
        let windows: Vec<(usize, usize)> = (0..7).map(|i| adaptive_window(i, 4, 7)).collect();
        assert_eq!(
            windows,
            vec![(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (2, 4), (3, 4)]
        );
        // 1 → 7 replicates the single cell.
        assert!((0..7).all(|i| adaptive_window(i, 1, 7) == (0, 1)));
        // 14 → 7 is a plain 2×2/2 pooling; 7 → 7 the identity.
        assert!((0..7).all(|i| adaptive_window(i, 14, 7) == (2 * i, 2 * i + 2)));
        assert!((0..7).all(|i| adaptive_window(i, 7, 7) == (i, i + 1)));
        // 5 → 3: [0,2) [1,4) [3,5).
        let windows: Vec<(usize, usize)> = (0..3).map(|i| adaptive_window(i, 5, 3)).collect();
        assert_eq!(windows, vec![(0, 2), (1, 4), (3, 5)]);
    }

    #[test]
    fn adaptive_pool_costs_at_several_sizes() {
        // Per plane: rows window sum × cols window sum.
        // 4→7: window lengths 1,2,1,2,1,2,1 = 10 → 100 per plane.
        let l = single([1, 512, 4, 4], Op::AdaptiveAvgPool2d { output: [7, 7] });
        assert_eq!(l.flops, 512 * 100);
        // 1→7: 7 windows of 1 → 49 per plane.
        let l = single([1, 512, 1, 1], Op::AdaptiveAvgPool2d { output: [7, 7] });
        assert_eq!(l.flops, 512 * 49);
        // 14→7: 7 windows of 2 → 14² = 196 per plane = 49 outputs × 4.
        let l = single([2, 512, 14, 14], Op::AdaptiveAvgPool2d { output: [7, 7] });
        assert_eq!(l.flops, 2 * 512 * 196);
    }

    #[test]
    fn layer_sums_equal_totals_for_every_model() {
        for entry in zoo::ZOO {
            let params = ModelParams {
                height: 64,
                width: 48,
                batch: 2,
                ..ModelParams::default()
            };
            let model = match zoo::build(entry.name, &params) {
                Ok(m) => m,
                Err(e) => panic!("{e}"),
            };
            let cost = analyze(&model);
            let sum = |f: fn(&LayerCost) -> u64| cost.layers.iter().map(f).sum::<u64>();
            assert_eq!(sum(|l| l.flops), cost.total.flops, "{}", entry.name);
            assert_eq!(sum(|l| l.macs), cost.total.macs, "{}", entry.name);
            assert_eq!(sum(|l| l.params), cost.total.params, "{}", entry.name);
            assert_eq!(
                sum(|l| l.dram_bytes),
                cost.total.dram_bytes,
                "{}",
                entry.name
            );
        }
    }

    /// torchvision's published figures: `num_params` and `_ops` (GMACs of conv + linear at
    /// 3×224×224) from each model's weights metadata.
    const TORCHVISION: [(&str, u64, f64); 17] = [
        ("shufflenet_v2_x0_5", 1_366_792, 0.04),
        ("mobilenet_v2", 3_504_872, 0.301),
        ("resnet34", 21_797_672, 3.664),
        ("resnet50", 25_557_032, 4.089),
        ("vgg19", 143_667_240, 19.632),
        ("resnet18", 11_689_512, 1.814),
        ("squeezenet1_1", 1_235_496, 0.349),
        ("mnasnet1_0", 4_383_312, 0.314),
        ("mobilenet_v3_small", 2_542_856, 0.057),
        ("mobilenet_v3_large", 5_483_032, 0.217),
        ("efficientnet_b0", 5_288_548, 0.386),
        ("shufflenet_v2_x1_0", 2_278_604, 0.145),
        ("shufflenet_v2_x1_5", 3_503_624, 0.296),
        ("shufflenet_v2_x2_0", 7_393_996, 0.583),
        ("mnasnet0_5", 2_218_512, 0.104),
        ("mnasnet0_75", 3_170_208, 0.215),
        ("mnasnet1_3", 6_282_256, 0.526),
    ];

    #[test]
    fn parameter_counts_equal_torchvision() {
        for (name, params, _) in TORCHVISION {
            let model = match zoo::build(name, &ModelParams::default()) {
                Ok(m) => m,
                Err(e) => panic!("{e}"),
            };
            assert_eq!(analyze(&model).total.params, params, "{name}");
        }
    }

    #[test]
    fn multiply_adds_match_torchvision_within_one_percent() {
        for (name, _, gmacs) in TORCHVISION {
            let model = match zoo::build(name, &ModelParams::default()) {
                Ok(m) => m,
                Err(e) => panic!("{e}"),
            };
            let ours = analyze(&model).total.macs as f64 / 1e9;
            // torchvision rounds to three decimals (two for ShuffleNet): compare against the
            // rounding interval widened by 1 %.
            let half_step = if name == "shufflenet_v2_x0_5" {
                0.005
            } else {
                0.0005
            };
            let low = (gmacs - half_step) * 0.99;
            let high = (gmacs + half_step) * 1.01;
            assert!(
                ours >= low && ours <= high,
                "{name}: {ours:.4} GMACs vs torchvision {gmacs}"
            );
            if name != "shufflenet_v2_x0_5" {
                assert!(
                    (ours - gmacs).abs() / gmacs < 0.01,
                    "{name}: {ours} vs {gmacs}"
                );
            }
        }
    }
}

//! The edge models users ask for beside the seeds' five: ResNet-18, SqueezeNet 1.1, MNASNet 1.0,
//! MobileNetV3 small and large and EfficientNet-B0, layer for layer as torchvision defines them
//! (module paths as layer names, so that PyTorch loads the zoo's weights into torchvision's own
//! definition). Inference only: stochastic depth and dropout are the identity.

use super::{basic_block, conv_bn_act, conv_bn_eps, resnet};
use crate::models::graph::{GraphBuilder, GraphError, Op, ValueId};

pub(super) fn resnet18(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    resnet(g, classes, basic_block, [2, 2, 2, 2])
}

// ---------------------------------------------------------------- SqueezeNet 1.1

/// A Fire module: squeeze 1×1, then 1×1 and 3×3 expansions concatenated (every conv biased,
/// each followed by its ReLU).
fn fire(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    squeeze: usize,
    expand: usize,
) -> Result<ValueId, GraphError> {
    let s = g.conv(&format!("{prefix}.squeeze"), x, squeeze, 1, 1, 0, 1, true)?;
    let s = g.relu(&format!("{prefix}.squeeze_activation"), s)?;
    let a = g.conv(&format!("{prefix}.expand1x1"), s, expand, 1, 1, 0, 1, true)?;
    let a = g.relu(&format!("{prefix}.expand1x1_activation"), a)?;
    let b = g.conv(&format!("{prefix}.expand3x3"), s, expand, 3, 1, 1, 1, true)?;
    let b = g.relu(&format!("{prefix}.expand3x3_activation"), b)?;
    g.add(&format!("{prefix}.cat"), Op::Concat, &[a, b])
}

pub(super) fn squeezenet1_1(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    let pool = |g: &mut GraphBuilder, name: &str, x| {
        let op = Op::MaxPool2d {
            kernel: [3, 3],
            stride: [2, 2],
            padding: [0, 0],
            ceil: true,
        };
        g.add(name, op, &[x])
    };
    let x = g.conv("features.0", ValueId::Input, 64, 3, 2, 0, 1, true)?;
    let x = g.relu("features.1", x)?;
    let mut x = pool(g, "features.2", x)?;
    // (index, squeeze, expand); a max-pool at 5 and 8.
    for (index, squeeze, expand) in [
        (3, 16, 64),
        (4, 16, 64),
        (6, 32, 128),
        (7, 32, 128),
        (9, 48, 192),
        (10, 48, 192),
        (11, 64, 256),
        (12, 64, 256),
    ] {
        if index == 6 || index == 9 {
            x = pool(g, &format!("features.{}", index - 1), x)?;
        }
        x = fire(g, &format!("features.{index}"), x, squeeze, expand)?;
    }
    let x = g.add("classifier.0", Op::Dropout { p: 0.5 }, &[x])?;
    let x = g.conv("classifier.1", x, classes, 1, 1, 0, 1, true)?;
    let x = g.relu("classifier.2", x)?;
    let x = g.add(
        "classifier.3",
        Op::AdaptiveAvgPool2d { output: [1, 1] },
        &[x],
    )?;
    g.add("flatten", Op::Flatten, &[x])?;
    Ok(())
}

// ---------------------------------------------------------------- MNASNet

/// MNASNet's inverted residual: expand 1×1, depthwise k×k, project 1×1, each with BN (ReLU
/// after the first two), named `{prefix}.layers.N`.
#[allow(clippy::too_many_arguments)]
fn mnas_block(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    out: usize,
    kernel: usize,
    stride: usize,
    expansion: usize,
) -> Result<ValueId, GraphError> {
    let inp = g.channels(x);
    let mid = inp * expansion;
    let l = format!("{prefix}.layers");
    let y = g.conv(&format!("{l}.0"), x, mid, 1, 1, 0, 1, false)?;
    let y = g.batch_norm(&format!("{l}.1"), y)?;
    let y = g.relu(&format!("{l}.2"), y)?;
    let y = g.conv(
        &format!("{l}.3"),
        y,
        mid,
        kernel,
        stride,
        kernel / 2,
        mid,
        false,
    )?;
    let y = g.batch_norm(&format!("{l}.4"), y)?;
    let y = g.relu(&format!("{l}.5"), y)?;
    let y = g.conv(&format!("{l}.6"), y, out, 1, 1, 0, 1, false)?;
    let y = g.batch_norm(&format!("{l}.7"), y)?;
    if inp == out && stride == 1 {
        g.add(&format!("{prefix}.add"), Op::Add, &[y, x])
    } else {
        Ok(y)
    }
}

/// torchvision's `_round_to_multiple_of(val, 8)`: to the nearest multiple of 8 (at least 8),
/// one step up when that falls more than 10 % below `val`.
fn round_to_eighths(val: f64) -> usize {
    let rounded = ((((val + 4.0) as usize) / 8) * 8).max(8);
    if rounded as f64 >= 0.9 * val {
        rounded
    } else {
        rounded + 8
    }
}

/// MNASNet with depth multiplier `alpha` (torchvision's `_get_depths`: every stage's width
/// scaled and rounded to a multiple of 8; the last 1280 channels stay).
fn mnasnet(g: &mut GraphBuilder, classes: usize, alpha: f64) -> Result<(), GraphError> {
    let d: Vec<usize> = [32, 16, 24, 40, 80, 96, 192, 320]
        .iter()
        .map(|&depth| round_to_eighths(depth as f64 * alpha))
        .collect();
    let x = g.conv("layers.0", ValueId::Input, d[0], 3, 2, 1, 1, false)?;
    let x = g.batch_norm("layers.1", x)?;
    let x = g.relu("layers.2", x)?;
    let x = g.conv("layers.3", x, d[0], 3, 1, 1, d[0], false)?;
    let x = g.batch_norm("layers.4", x)?;
    let x = g.relu("layers.5", x)?;
    let x = g.conv("layers.6", x, d[1], 1, 1, 0, 1, false)?;
    let mut x = g.batch_norm("layers.7", x)?;
    // (out, kernel, first stride, expansion, repeats) of layers.8 … layers.13.
    let stacks = [
        (d[2], 3, 2, 3, 3),
        (d[3], 5, 2, 3, 3),
        (d[4], 5, 2, 6, 3),
        (d[5], 3, 1, 6, 2),
        (d[6], 5, 2, 6, 4),
        (d[7], 3, 1, 6, 1),
    ];
    for (s, (out, kernel, stride, expansion, repeats)) in stacks.into_iter().enumerate() {
        for i in 0..repeats {
            let stride = if i == 0 { stride } else { 1 };
            let prefix = format!("layers.{}.{i}", s + 8);
            x = mnas_block(g, &prefix, x, out, kernel, stride, expansion)?;
        }
    }
    let x = g.conv("layers.14", x, 1280, 1, 1, 0, 1, false)?;
    let x = g.batch_norm("layers.15", x)?;
    let x = g.relu("layers.16", x)?;
    // torchvision: x.mean([2, 3])
    let x = g.add("mean", Op::AdaptiveAvgPool2d { output: [1, 1] }, &[x])?;
    let x = g.add("flatten", Op::Flatten, &[x])?;
    let x = g.add("classifier.0", Op::Dropout { p: 0.2 }, &[x])?;
    g.linear("classifier.1", x, classes)?;
    Ok(())
}

pub(super) fn mnasnet0_5(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    mnasnet(g, classes, 0.5)
}

pub(super) fn mnasnet0_75(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    mnasnet(g, classes, 0.75)
}

pub(super) fn mnasnet1_0(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    mnasnet(g, classes, 1.0)
}

pub(super) fn mnasnet1_3(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    mnasnet(g, classes, 1.3)
}

// ---------------------------------------------------------------- MobileNetV3, EfficientNet

/// torchvision's `_make_divisible`: `v` rounded to a multiple of 8, never 10 % below it.
fn make_divisible(v: usize) -> usize {
    let rounded = ((v + 4) / 8 * 8).max(8);
    if rounded * 10 < v * 9 {
        rounded + 8
    } else {
        rounded
    }
}

/// Squeeze-and-excitation: global average, 1×1 conv down to `squeeze` (biased), `act`, 1×1
/// conv back (biased), `gate`, and the input scaled by it per channel.
fn squeeze_excitation(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    squeeze: usize,
    act: Op,
    gate: Op,
) -> Result<ValueId, GraphError> {
    let channels = g.channels(x);
    let s = g.add(
        &format!("{prefix}.avgpool"),
        Op::AdaptiveAvgPool2d { output: [1, 1] },
        &[x],
    )?;
    let s = g.conv(&format!("{prefix}.fc1"), s, squeeze, 1, 1, 0, 1, true)?;
    let s = g.add(&format!("{prefix}.activation"), act, &[s])?;
    let s = g.conv(&format!("{prefix}.fc2"), s, channels, 1, 1, 0, 1, true)?;
    let s = g.add(&format!("{prefix}.scale_activation"), gate, &[s])?;
    g.add(&format!("{prefix}.scale"), Op::ChannelScale, &[x, s])
}

/// MobileNetV3's batch-norm epsilon.
const V3_EPS: f32 = 1e-3;

/// One row of MobileNetV3's table: kernel, expanded channels, output channels, SE, hard-swish
/// (else ReLU), stride.
type V3Row = (usize, usize, usize, bool, bool, usize);

fn mobilenet_v3(
    g: &mut GraphBuilder,
    classes: usize,
    rows: &[V3Row],
    last: usize,
) -> Result<(), GraphError> {
    let mut x = conv_bn_eps(
        g,
        "features.0",
        ValueId::Input,
        16,
        3,
        2,
        1,
        V3_EPS,
        Some(Op::Hardswish),
    )?;
    for (i, &(kernel, expanded, out, se, hs, stride)) in rows.iter().enumerate() {
        let prefix = format!("features.{}.block", i + 1);
        let act = || if hs { Op::Hardswish } else { Op::Relu };
        let inp = g.channels(x);
        let mut y = x;
        let mut part = 0;
        if expanded != inp {
            let name = format!("{prefix}.{part}");
            y = conv_bn_eps(g, &name, y, expanded, 1, 1, 1, V3_EPS, Some(act()))?;
            part += 1;
        }
        let name = format!("{prefix}.{part}");
        y = conv_bn_eps(
            g,
            &name,
            y,
            expanded,
            kernel,
            stride,
            expanded,
            V3_EPS,
            Some(act()),
        )?;
        part += 1;
        if se {
            let name = format!("{prefix}.{part}");
            let squeeze = make_divisible(expanded / 4);
            y = squeeze_excitation(g, &name, y, squeeze, Op::Relu, Op::Hardsigmoid)?;
            part += 1;
        }
        let name = format!("{prefix}.{part}");
        y = conv_bn_eps(g, &name, y, out, 1, 1, 1, V3_EPS, None)?;
        if stride == 1 && inp == out {
            y = g.add(&format!("features.{}.add", i + 1), Op::Add, &[y, x])?;
        }
        x = y;
    }
    let inp = g.channels(x);
    let name = format!("features.{}", rows.len() + 1);
    let x = conv_bn_eps(g, &name, x, 6 * inp, 1, 1, 1, V3_EPS, Some(Op::Hardswish))?;
    let x = g.add("avgpool", Op::AdaptiveAvgPool2d { output: [1, 1] }, &[x])?;
    let x = g.add("flatten", Op::Flatten, &[x])?;
    let x = g.linear("classifier.0", x, last)?;
    let x = g.add("classifier.1", Op::Hardswish, &[x])?;
    let x = g.add("classifier.2", Op::Dropout { p: 0.2 }, &[x])?;
    g.linear("classifier.3", x, classes)?;
    Ok(())
}

pub(super) fn mobilenet_v3_large(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    const ROWS: [V3Row; 15] = [
        (3, 16, 16, false, false, 1),
        (3, 64, 24, false, false, 2),
        (3, 72, 24, false, false, 1),
        (5, 72, 40, true, false, 2),
        (5, 120, 40, true, false, 1),
        (5, 120, 40, true, false, 1),
        (3, 240, 80, false, true, 2),
        (3, 200, 80, false, true, 1),
        (3, 184, 80, false, true, 1),
        (3, 184, 80, false, true, 1),
        (3, 480, 112, true, true, 1),
        (3, 672, 112, true, true, 1),
        (5, 672, 160, true, true, 2),
        (5, 960, 160, true, true, 1),
        (5, 960, 160, true, true, 1),
    ];
    mobilenet_v3(g, classes, &ROWS, 1280)
}

pub(super) fn mobilenet_v3_small(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    const ROWS: [V3Row; 11] = [
        (3, 16, 16, true, false, 2),
        (3, 72, 24, false, false, 2),
        (3, 88, 24, false, false, 1),
        (5, 96, 40, true, true, 2),
        (5, 240, 40, true, true, 1),
        (5, 240, 40, true, true, 1),
        (5, 120, 48, true, true, 1),
        (5, 144, 48, true, true, 1),
        (5, 288, 96, true, true, 2),
        (5, 576, 96, true, true, 1),
        (5, 576, 96, true, true, 1),
    ];
    mobilenet_v3(g, classes, &ROWS, 1024)
}

pub(super) fn efficientnet_b0(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    // (expansion, kernel, first stride, output channels, layers) of features.1 … features.7.
    let stages = [
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    ];
    let mut x = conv_bn_act(g, "features.0", ValueId::Input, 32, 3, 2, 1, Some(Op::Silu))?;
    for (s, (expansion, kernel, stride, out, layers)) in stages.into_iter().enumerate() {
        for i in 0..layers {
            let stride = if i == 0 { stride } else { 1 };
            let prefix = format!("features.{}.{i}.block", s + 1);
            let inp = g.channels(x);
            let expanded = make_divisible(inp * expansion);
            let mut y = x;
            let mut part = 0;
            if expanded != inp {
                let name = format!("{prefix}.{part}");
                y = conv_bn_act(g, &name, y, expanded, 1, 1, 1, Some(Op::Silu))?;
                part += 1;
            }
            let name = format!("{prefix}.{part}");
            y = conv_bn_act(
                g,
                &name,
                y,
                expanded,
                kernel,
                stride,
                expanded,
                Some(Op::Silu),
            )?;
            let name = format!("{prefix}.{}", part + 1);
            y = squeeze_excitation(g, &name, y, (inp / 4).max(1), Op::Silu, Op::Sigmoid)?;
            let name = format!("{prefix}.{}", part + 2);
            y = conv_bn_act(g, &name, y, out, 1, 1, 1, None)?;
            if stride == 1 && inp == out {
                y = g.add(&format!("features.{}.{i}.add", s + 1), Op::Add, &[y, x])?;
            }
            x = y;
        }
    }
    let x = conv_bn_act(g, "features.8", x, 1280, 1, 1, 1, Some(Op::Silu))?;
    let x = g.add("avgpool", Op::AdaptiveAvgPool2d { output: [1, 1] }, &[x])?;
    let x = g.add("flatten", Op::Flatten, &[x])?;
    let x = g.add("classifier.0", Op::Dropout { p: 0.2 }, &[x])?;
    g.linear("classifier.1", x, classes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_divisible_rounds_as_torchvision() {
        // expanded // 4 of MobileNetV3's SE blocks, and their torchvision squeeze widths.
        for (v, want) in [
            (4, 8),
            (18, 24),
            (24, 24),
            (30, 32),
            (60, 64),
            (120, 120),
            (168, 168),
        ] {
            assert_eq!(make_divisible(v), want, "{v}");
        }
    }
}

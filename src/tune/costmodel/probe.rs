//! The operator-template microbenchmarks: small networks drawn at random from the templates the
//! zoo and ONNX files contain (full, depthwise, grouped and pointwise convolutions of kernel 1–7
//! and stride 1–2, squeeze-and-excitation scales, residual adds, concatenations and channel
//! shuffles, pooling, a linear head), with channel counts and map sizes sampled over the range
//! edge models use. Each is profiled like a zoo model, so every sampled configuration is timed as
//! the engine runs it — fused with its batch norm and activation, amid the layers that feed it —
//! and joins the device's measurement database as a profile named `probe-<seed>`.
//!
//! A probe is rebuilt from its name alone: the same seed draws the same network.

use crate::models::graph::{GraphBuilder, GraphError, Model, Op, ValueId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The name prefix of probe profiles.
pub const PREFIX: &str = "probe-";

/// The name of the probe drawn from `seed`.
pub fn name(seed: u64) -> String {
    format!("{PREFIX}{seed}")
}

/// The seed of a probe's name, or None for any other model.
pub fn seed_of(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX)?.parse().ok()
}

/// Channel counts the probes draw from: every multiple of 8 from 8 to 64, then steps that
/// cover the widths of the zoo's later stages.
const WIDTHS: [usize; 20] = [
    8, 16, 24, 32, 40, 48, 64, 72, 96, 112, 128, 160, 192, 240, 256, 320, 384, 480, 576, 960,
];

fn act(rng: &mut ChaCha8Rng) -> Op {
    match rng.random_range(0..4) {
        0 => Op::Relu,
        1 => Op::Relu6,
        2 => Op::Hardswish,
        _ => Op::Silu,
    }
}

/// A width near `c`: within a factor of about 2 either side, drawn from [`WIDTHS`].
fn width_near(rng: &mut ChaCha8Rng, c: usize) -> usize {
    let options: Vec<usize> = WIDTHS
        .iter()
        .copied()
        .filter(|&w| w * 5 >= c * 2 && w <= c * 5 / 2)
        .collect();
    if options.is_empty() {
        return c.clamp(8, 960);
    }
    options[rng.random_range(0..options.len())]
}

struct Net<'a> {
    g: GraphBuilder,
    rng: &'a mut ChaCha8Rng,
    layers: usize,
}

impl Net<'_> {
    fn next(&mut self, what: &str) -> String {
        self.layers += 1;
        format!("l{}.{what}", self.layers)
    }

    fn spatial(&self, x: ValueId) -> usize {
        self.g.shape(x).get(2).copied().unwrap_or(1)
    }

    /// A stride the map can take: 2 only while it stays at least 2 wide.
    fn stride(&mut self, x: ValueId, odds_of_two: f64) -> usize {
        if self.spatial(x) >= 4 && self.rng.random_bool(odds_of_two) {
            2
        } else {
            1
        }
    }

    /// Conv → batch norm → (activation), as the zoo builds them.
    fn conv(
        &mut self,
        x: ValueId,
        out: usize,
        kernel: usize,
        stride: usize,
        groups: usize,
        activate: bool,
    ) -> Result<ValueId, GraphError> {
        let name = self.next("conv");
        let y = self.g.conv(
            &name,
            x,
            out,
            kernel,
            stride,
            (kernel - 1) / 2,
            groups,
            false,
        )?;
        let name = self.next("bn");
        let y = self.g.batch_norm(&name, y)?;
        if activate {
            let op = act(self.rng);
            let name = self.next("act");
            return self.g.add(&name, op, &[y]);
        }
        Ok(y)
    }

    fn residual(&mut self, x: ValueId, y: ValueId) -> Result<ValueId, GraphError> {
        if self.g.shape(x) == self.g.shape(y) {
            let name = self.next("add");
            return self.g.add(&name, Op::Add, &[y, x]);
        }
        Ok(y)
    }

    /// An inverted residual: expand 1×1, depthwise k×k, optional squeeze-and-excitation,
    /// project 1×1.
    fn inverted(&mut self, x: ValueId) -> Result<ValueId, GraphError> {
        let c = self.g.channels(x);
        let expand = [1, 3, 4, 6][self.rng.random_range(0..4)];
        let kernel = [3, 3, 5, 7][self.rng.random_range(0..4)];
        let stride = self.stride(x, 0.3);
        let out = if stride == 1 && self.rng.random_bool(0.5) {
            c
        } else {
            width_near(self.rng, c * 3 / 2)
        };
        let mid = (c * expand).clamp(8, 1152);
        let mut y = if expand > 1 {
            self.conv(x, mid, 1, 1, 1, true)?
        } else {
            x
        };
        y = self.conv(y, mid, kernel, stride, mid, true)?;
        if self.rng.random_bool(0.4) {
            let squeeze = (mid / 4).max(8);
            let name = self.next("se.pool");
            let s = self
                .g
                .add(&name, Op::AdaptiveAvgPool2d { output: [1, 1] }, &[y])?;
            let name = self.next("se.fc1");
            let s = self.g.conv(&name, s, squeeze, 1, 1, 0, 1, true)?;
            let name = self.next("se.act");
            let s = self.g.add(&name, Op::Relu, &[s])?;
            let name = self.next("se.fc2");
            let s = self.g.conv(&name, s, mid, 1, 1, 0, 1, true)?;
            let name = self.next("se.gate");
            let s = self.g.add(&name, Op::Hardsigmoid, &[s])?;
            let name = self.next("se.scale");
            y = self.g.add(&name, Op::ChannelScale, &[y, s])?;
        }
        let y = self.conv(y, out, 1, 1, 1, false)?;
        self.residual(x, y)
    }

    /// A ResNet block: two 3×3 convolutions, or 1×1 → k×k → 1×1; a residual when shapes allow.
    fn resnet_block(&mut self, x: ValueId) -> Result<ValueId, GraphError> {
        let c = self.g.channels(x);
        let stride = self.stride(x, 0.3);
        let out = if stride == 1 {
            c
        } else {
            width_near(self.rng, c * 2)
        };
        let y = if self.rng.random_bool(0.5) {
            let y = self.conv(x, out, 3, stride, 1, true)?;
            self.conv(y, out, 3, 1, 1, false)?
        } else {
            let mid = width_near(self.rng, out / 4);
            let y = self.conv(x, mid, 1, 1, 1, true)?;
            let kernel = [3, 3, 5][self.rng.random_range(0..3)];
            let y = self.conv(y, mid, kernel, stride, 1, true)?;
            self.conv(y, out, 1, 1, 1, false)?
        };
        // The shortcut: the identity, or (where the shape changes) a strided 1×1 projection
        // with its batch norm, as ResNet's downsample.
        let shortcut = if self.g.shape(x) == self.g.shape(y) {
            x
        } else {
            self.conv(x, out, 1, stride, 1, false)?
        };
        let y = self.residual(shortcut, y)?;
        let name = self.next("relu");
        self.g.add(&name, Op::Relu, &[y])
    }

    /// A Fire module: squeeze 1×1, expand 1×1 and 3×3, concatenated.
    fn fire(&mut self, x: ValueId) -> Result<ValueId, GraphError> {
        let c = self.g.channels(x);
        let squeeze = width_near(self.rng, (c / 6).max(8));
        let expand = width_near(self.rng, c / 2 + 8);
        let s = self.conv(x, squeeze, 1, 1, 1, true)?;
        let a = self.conv(s, expand, 1, 1, 1, true)?;
        let b = self.conv(s, expand, 3, 1, 1, true)?;
        let name = self.next("cat");
        self.g.add(&name, Op::Concat, &[a, b])
    }

    /// A ShuffleNetV2 unit: split (or, strided, two branches), 1×1 → depthwise 3×3 → 1×1,
    /// concatenation and a channel shuffle.
    fn shuffle(&mut self, x: ValueId) -> Result<ValueId, GraphError> {
        let c = self.g.channels(x);
        let stride = self.stride(x, 0.3);
        let (left, right, branch) = if stride == 1 && c.is_multiple_of(2) {
            let half = c / 2;
            let name = self.next("chunk0");
            let l = self.g.add(
                &name,
                Op::ChannelSlice {
                    start: 0,
                    end: half,
                },
                &[x],
            )?;
            let name = self.next("chunk1");
            let r = self.g.add(
                &name,
                Op::ChannelSlice {
                    start: half,
                    end: c,
                },
                &[x],
            )?;
            (l, r, half)
        } else {
            let branch = width_near(self.rng, c).max(8);
            let l = self.conv(x, c, 3, stride, c, false)?;
            let l = self.conv(l, branch, 1, 1, 1, true)?;
            (l, x, branch)
        };
        let y = self.conv(right, branch, 1, 1, 1, true)?;
        let y = self.conv(y, branch, 3, stride, branch, false)?;
        let y = self.conv(y, branch, 1, 1, 1, true)?;
        let name = self.next("cat");
        let cat = self.g.add(&name, Op::Concat, &[left, y])?;
        let name = self.next("shuffle");
        self.g.add(&name, Op::ChannelShuffle { groups: 2 }, &[cat])
    }

    /// A plain or grouped convolution of kernel 1–7, or a max-pool.
    fn plain(&mut self, x: ValueId) -> Result<ValueId, GraphError> {
        let c = self.g.channels(x);
        match self.rng.random_range(0..5) {
            0 if self.spatial(x) >= 4 => {
                let name = self.next("maxpool");
                self.g.max_pool(&name, x, 3, 2, 1)
            }
            1 => {
                let groups = [2, 4, 8][self.rng.random_range(0..3)];
                let out = (width_near(self.rng, c) / groups).max(1) * groups;
                if !c.is_multiple_of(groups) {
                    return self.conv(x, out, 3, 1, 1, true);
                }
                let stride = self.stride(x, 0.3);
                self.conv(x, out, 3, stride, groups, true)
            }
            _ => {
                let kernel = [1, 3, 3, 5, 7][self.rng.random_range(0..5)];
                let stride = self.stride(x, 0.3);
                let out = width_near(self.rng, c);
                self.conv(x, out, kernel, stride, 1, true)
            }
        }
    }
}

/// The probe network drawn from `seed`, for an input of `input_shape` (C, H, W): a strided
/// stem, 4–12 blocks of the kinds above, then average pooling and a linear head.
pub fn build(seed: u64, input_shape: [usize; 3]) -> Result<Model, GraphError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let [channels, height, width] = input_shape;
    let g = GraphBuilder::new(&name(seed), [1, channels, height, width]);
    let mut net = Net {
        g,
        rng: &mut rng,
        layers: 0,
    };
    let stem = WIDTHS[net.rng.random_range(0..7)];
    let stem_kernel = [3, 3, 5, 7][net.rng.random_range(0..4)];
    let stride = net.stride(ValueId::Input, 0.8);
    let mut x = net.conv(ValueId::Input, stem, stem_kernel, stride, 1, true)?;
    let blocks = net.rng.random_range(4..=12);
    for _ in 0..blocks {
        x = match net.rng.random_range(0..9) {
            0..=2 => net.inverted(x)?,
            3 | 4 => net.resnet_block(x)?,
            5 => net.fire(x)?,
            6 => net.shuffle(x)?,
            _ => net.plain(x)?,
        };
    }
    // The head: global pooling and one linear layer, or (one in three) VGG's — pooling to a
    // small map, flattened into wide fully connected layers.
    let side = if net.rng.random_bool(1.0 / 3.0) {
        [2, 4, 7][net.rng.random_range(0..3)]
    } else {
        1
    };
    let name = net.next("pool");
    let x = net.g.add(
        &name,
        Op::AdaptiveAvgPool2d {
            output: [side, side],
        },
        &[x],
    )?;
    let name = net.next("flatten");
    let mut x = net.g.add(&name, Op::Flatten, &[x])?;
    if side > 1 {
        let hidden = [256, 1024, 2048, 4096][net.rng.random_range(0..4)];
        let name = net.next("fc");
        x = net.g.linear(&name, x, hidden)?;
        let name = net.next("relu");
        x = net.g.add(&name, Op::Relu, &[x])?;
    }
    let classes = [10, 100, 1000][net.rng.random_range(0..3)];
    let name = net.next("fc");
    net.g.linear(&name, x, classes)?;
    Ok(net.g.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_network_and_different_seeds_differ() {
        let a = build(7, [3, 64, 64]).map_err(|e| e.to_string());
        let b = build(7, [3, 64, 64]).map_err(|e| e.to_string());
        assert_eq!(a, b);
        let c = build(8, [3, 64, 64]).map_err(|e| e.to_string());
        assert_ne!(a, c);
        assert_eq!(seed_of(&name(42)), Some(42));
        assert_eq!(seed_of("mobilenet_v2"), None);
    }

    #[test]
    fn probes_cover_every_template_family_and_build_at_small_inputs() {
        let mut templates = std::collections::BTreeSet::new();
        let mut kinds = std::collections::BTreeSet::new();
        for seed in 0..64 {
            for input in [[3, 32, 32], [3, 64, 64], [3, 17, 23]] {
                let model = match build(seed, input) {
                    Ok(m) => m,
                    Err(e) => panic!("probe {seed} at {input:?}: {e}"),
                };
                for g in super::super::planned_groups(&model) {
                    templates.insert(g.template);
                }
                kinds.extend(model.layers.iter().map(|l| l.op.kind()));
            }
        }
        for t in [
            "conv3x3/s2",
            "conv1x1/s1",
            "dw3x3/s1",
            "dw5x5/s2",
            "dw7x7/s1",
            "gconv3x3/s1",
            "conv7x7/s1",
            "maxpool",
            "avgpool",
            "linear",
            "concat",
            "shuffle",
            "scale",
        ] {
            assert!(templates.contains(t), "{t} never drawn: {templates:?}");
        }
        // Residual additions, activations and slices are fused into the group before them.
        for k in ["Add", "BatchNorm2d", "Hardswish", "SiLU", "ChannelSlice"] {
            assert!(kinds.contains(k), "{k} never drawn: {kinds:?}");
        }
    }
}

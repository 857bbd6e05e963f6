//! Probes of the operator families real models have and the zoo lacks, written as ONNX graphs
//! the way exporters write them: depthwise convolutions of kernel 5–9, activations decomposed
//! into element-wise nodes (hard-swish as `x · clip(x + 3, 0, 6) / 6`, SiLU as
//! `x · sigmoid(x)`, GELU through `Erf`), dense blocks that concatenate every layer's output,
//! upsampling (`Resize`) into feature pyramids, transposed convolutions, 1-D convolutions,
//! recurrent layers (`LSTM`, `GRU`) and attention (matrix products, `Softmax`, layer norms
//! decomposed into reductions). Each is a small network drawn from its seed at an input drawn
//! with it (square images to 320, text lines such as 48×320), profiled as an ONNX file is, and
//! joins the device's measurement database as a profile named `graph-probe-<seed>`.

use super::files::DECLARED;
use crate::models::onnx::{float, float_tensor, int, int64_tensor, ints, seeded_uniform};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tract_onnx::pb;

mod sequence;

/// The name prefix of graph-probe profiles.
pub const PREFIX: &str = "graph-probe-";

/// The name of the graph probe drawn from `seed`.
pub fn name(seed: u64) -> String {
    format!("{PREFIX}{seed}")
}

/// The seed of a graph probe's name, or None for any other model.
pub fn seed_of(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX)?.parse().ok()
}

/// The input a graph probe's profile keeps: it runs at the shape its seed drew.
pub fn input() -> &'static str {
    DECLARED
}

/// The image the graph probe of `seed` takes (C, H, W of its one input).
pub fn image(seed: u64) -> Option<crate::models::InputShape> {
    use pb::tensor_shape_proto::dimension::Value;
    let proto = build(seed);
    let input = proto.graph.as_ref()?.input.first()?;
    let Some(pb::type_proto::Value::TensorType(t)) = input.r#type.as_ref()?.value.as_ref() else {
        return None;
    };
    let dims: Vec<usize> = t
        .shape
        .as_ref()?
        .dim
        .iter()
        .filter_map(|d| match d.value {
            Some(Value::DimValue(v)) => usize::try_from(v).ok(),
            _ => None,
        })
        .collect();
    match dims[..] {
        [1, channels, height, width] => Some(crate::models::InputShape {
            channels,
            height,
            width,
        }),
        _ => None,
    }
}

/// A value of the graph being written and its shape.
#[derive(Clone)]
struct V {
    name: String,
    shape: Vec<usize>,
}

struct Net {
    rng: ChaCha8Rng,
    seed: u64,
    /// How much wider than drawn the sequence part is (1, or 4 for one probe in three: the
    /// recognisers' 512-wide recurrent layers and classifiers over thousands of characters).
    wide: usize,
    /// Whether its stride-2 convolutions halve the rows only (`strides = [2, 1]`), as text-line
    /// recognisers keep the width they read as a sequence; tract runs them at the speed of a
    /// stride of 1, where a stride of 2 along the rows of the map is several times slower.
    rows_only: bool,
    nodes: Vec<pb::NodeProto>,
    weights: Vec<pb::TensorProto>,
    count: usize,
}

impl Net {
    /// One node of `op` on `inputs`, its output named after it.
    fn node(&mut self, op: &str, inputs: &[&str], attrs: Vec<pb::AttributeProto>) -> String {
        self.count += 1;
        let name = format!("n{}_{op}", self.count);
        self.nodes.push(pb::NodeProto {
            name: name.clone(),
            op_type: op.to_string(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![name.clone()],
            attribute: attrs,
            ..Default::default()
        });
        name
    }

    /// A weight of `dims`, uniform within ±1/√fan_in.
    fn weight(&mut self, dims: &[usize], fan_in: usize) -> String {
        self.count += 1;
        let name = format!("w{}", self.count);
        let bound = 1.0 / (fan_in.max(1) as f32).sqrt();
        let data = seeded_uniform(self.seed, &name, dims.iter().product(), -bound, bound);
        self.weights.push(float_tensor(&name, dims, &data));
        name
    }

    fn scalar(&mut self, value: f32) -> String {
        self.count += 1;
        let name = format!("c{}", self.count);
        self.weights.push(float_tensor(&name, &[], &[value]));
        name
    }

    fn shape_const(&mut self, dims: &[usize]) -> String {
        self.count += 1;
        let name = format!("s{}", self.count);
        let data: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        self.weights.push(int64_tensor(&name, &data));
        name
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.rng.random_range(0..from.len())]
    }

    /// Conv (with its bias, as exporters fold batch norms into it) on an image or a sequence.
    fn conv(&mut self, x: &V, out: usize, kernel: usize, stride: usize, groups: usize) -> V {
        let c = x.shape[1];
        let spatial = x.shape.len() - 2;
        let mut wdims = vec![out, c / groups];
        wdims.extend(std::iter::repeat_n(kernel, spatial));
        let w = self.weight(&wdims, c / groups * kernel.pow(spatial as u32));
        let b = self.weight(&[out], c);
        let pad = (kernel - 1) / 2;
        let mut strides = vec![stride; spatial];
        if self.rows_only && spatial == 2 {
            strides[1] = 1;
        }
        let y = self.node(
            "Conv",
            &[&x.name, &w, &b],
            vec![
                ints("kernel_shape", &vec![kernel; spatial]),
                ints("strides", &strides),
                ints("pads", &vec![pad; 2 * spatial]),
                int("group", groups as i64),
            ],
        );
        let mut shape = vec![x.shape[0], out];
        shape.extend(
            x.shape[2..]
                .iter()
                .zip(&strides)
                .map(|(&d, &s)| (d + 2 * pad - kernel) / s + 1),
        );
        V { name: y, shape }
    }

    /// An activation as exporters write it, drawn at random.
    fn act(&mut self, x: &V) -> V {
        let y = match self.rng.random_range(0..6) {
            // hard-swish, decomposed: x · clip(x + 3, 0, 6) / 6
            0 => {
                let three = self.scalar(3.0);
                let (lo, hi) = (self.scalar(0.0), self.scalar(6.0));
                let a = self.node("Add", &[&x.name, &three], vec![]);
                let c = self.node("Clip", &[&a, &lo, &hi], vec![]);
                let m = self.node("Mul", &[&x.name, &c], vec![]);
                let six = self.scalar(6.0);
                self.node("Div", &[&m, &six], vec![])
            }
            1 => {
                let s = self.node("Sigmoid", &[&x.name], vec![]);
                self.node("Mul", &[&x.name, &s], vec![])
            }
            2 => self.node("HardSwish", &[&x.name], vec![]),
            3 => {
                let s = self.node(
                    "HardSigmoid",
                    &[&x.name],
                    vec![float("alpha", 0.2), float("beta", 0.5)],
                );
                self.node("Mul", &[&x.name, &s], vec![])
            }
            4 => {
                let alpha = vec![float("alpha", 0.1)];
                self.node("LeakyRelu", &[&x.name], alpha)
            }
            _ => self.node("Relu", &[&x.name], vec![]),
        };
        V {
            name: y,
            shape: x.shape.clone(),
        }
    }

    fn conv_act(&mut self, x: &V, out: usize, kernel: usize, stride: usize, groups: usize) -> V {
        let y = self.conv(x, out, kernel, stride, groups);
        self.act(&y)
    }

    fn stride(&mut self, x: &V) -> usize {
        if x.shape[2] >= 8 && self.rng.random_bool(0.3) {
            2
        } else {
            1
        }
    }

    /// PP-LCNet's and MobileNetV3's block: depthwise k×k (5–9), optional squeeze-and-excite,
    /// pointwise.
    fn depthwise(&mut self, x: &V) -> V {
        let c = x.shape[1];
        let kernel = self.pick(&[3, 5, 5, 7, 9]);
        let stride = self.stride(x);
        let y = self.conv_act(x, c, kernel, stride, c);
        let y = if self.rng.random_bool(0.3) {
            let p = self.node("GlobalAveragePool", &[&y.name], vec![]);
            let pv = V {
                name: p,
                shape: vec![1, c, 1, 1],
            };
            let s = self.conv(&pv, (c / 4).max(8), 1, 1, 1);
            let r = self.node("Relu", &[&s.name], vec![]);
            let rv = V {
                name: r,
                shape: s.shape,
            };
            let e = self.conv(&rv, c, 1, 1, 1);
            let g = self.node(
                "HardSigmoid",
                &[&e.name],
                vec![float("alpha", 0.2), float("beta", 0.5)],
            );
            let m = self.node("Mul", &[&y.name, &g], vec![]);
            V {
                name: m,
                shape: y.shape,
            }
        } else {
            y
        };
        let out = self.pick(&[c, c, c * 2]).min(512);
        self.conv_act(&y, out, 1, 1, 1)
    }

    /// DenseNet's block: each layer's 1×1 → 3×3 output concatenated onto its input.
    fn dense(&mut self, x: &V) -> V {
        let growth = self.pick(&[12, 16, 32]);
        let layers = self.rng.random_range(2..=4);
        let mut x = x.clone();
        for _ in 0..layers {
            let y = self.conv_act(&x, growth * 4, 1, 1, 1);
            let y = self.conv_act(&y, growth, 3, 1, 1);
            let cat = self.node("Concat", &[&x.name, &y.name], vec![int("axis", 1)]);
            let mut shape = x.shape.clone();
            shape[1] += growth;
            x = V { name: cat, shape };
        }
        x
    }

    /// YOLO's C2f: split, a chain of 3×3 convolutions, every part concatenated, fused 1×1.
    fn c2f(&mut self, x: &V) -> V {
        let c = x.shape[1] / 2 * 2;
        let x = self.conv_act(x, c, 1, 1, 1);
        let half = c / 2;
        let parts = self.shape_const(&[half, half]);
        self.count += 1;
        let (a, b) = (
            format!("n{}_split0", self.count),
            format!("n{}_split1", self.count),
        );
        self.nodes.push(pb::NodeProto {
            name: format!("n{}_Split", self.count),
            op_type: "Split".into(),
            input: vec![x.name.clone(), parts],
            output: vec![a.clone(), b.clone()],
            attribute: vec![int("axis", 1)],
            ..Default::default()
        });
        let mut shape = x.shape.clone();
        shape[1] = half;
        let mut outs = vec![a, b.clone()];
        let mut last = V { name: b, shape };
        for _ in 0..self.rng.random_range(1..=2) {
            let y = self.conv_act(&last, half, 3, 1, 1);
            last = self.conv_act(&y, half, 3, 1, 1);
            outs.push(last.name.clone());
        }
        let refs: Vec<&str> = outs.iter().map(String::as_str).collect();
        let cat = self.node("Concat", &refs, vec![int("axis", 1)]);
        let mut shape = x.shape.clone();
        shape[1] = half * outs.len();
        self.conv_act(&V { name: cat, shape }, c, 1, 1, 1)
    }

    /// YOLO's spatial pyramid pooling at the deepest map: a 1×1 convolution to half the
    /// channels, max poolings of stride 1 (three 5×5 in a chain, as YOLOv5/v8's SPPF, or 5×5,
    /// 9×9 and 13×13 side by side, as YOLOX's SPP), all concatenated, a 1×1 convolution back.
    fn spp(&mut self, x: &V) -> V {
        let c = x.shape[1];
        let half = (c / 2).max(8);
        let first = self.conv_act(x, half, 1, 1, 1);
        let chained = self.rng.random_bool(0.5);
        let mut parts = vec![first.name.clone()];
        let mut last = first.name.clone();
        for k in [5usize, 9, 13] {
            let (kernel, from) = if chained {
                (5, last.clone())
            } else {
                (k, first.name.clone())
            };
            let pad = kernel / 2;
            last = self.node(
                "MaxPool",
                &[&from],
                vec![
                    ints("kernel_shape", &[kernel, kernel]),
                    ints("strides", &[1, 1]),
                    ints("pads", &[pad, pad, pad, pad]),
                ],
            );
            parts.push(last.clone());
        }
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        let cat = self.node("Concat", &refs, vec![int("axis", 1)]);
        let mut shape = first.shape.clone();
        shape[1] = half * 4;
        self.conv_act(&V { name: cat, shape }, c, 1, 1, 1)
    }

    /// A feature pyramid's step: upsample ×2 (nearest or bilinear) and add or concatenate the
    /// higher-resolution map it came from, or a transposed convolution (DBNet's head).
    fn upsample(&mut self, fine: &V, coarse: &V) -> V {
        let c = coarse.shape[1];
        let up = if self.rng.random_bool(0.3) {
            let kernel = self.pick(&[2, 4]);
            let out = (c / 2).max(8);
            let w = self.weight(&[c, out, kernel, kernel], c * kernel * kernel);
            let pad = (kernel - 2) / 2;
            let y = self.node(
                "ConvTranspose",
                &[&coarse.name, &w],
                vec![
                    ints("kernel_shape", &[kernel, kernel]),
                    ints("strides", &[2, 2]),
                    ints("pads", &[pad, pad, pad, pad]),
                ],
            );
            V {
                name: y,
                shape: vec![1, out, coarse.shape[2] * 2, coarse.shape[3] * 2],
            }
        } else {
            let scales = self.weights.len();
            let scales = format!("scales{scales}");
            self.weights
                .push(float_tensor(&scales, &[4], &[1.0, 1.0, 2.0, 2.0]));
            let mode = self.pick(&["nearest", "linear"]);
            let y = self.node(
                "Resize",
                &[&coarse.name, "", &scales],
                vec![pb::AttributeProto {
                    name: "mode".into(),
                    r#type: pb::attribute_proto::AttributeType::String as i32,
                    s: mode.as_bytes().to_vec(),
                    ..Default::default()
                }],
            );
            V {
                name: y,
                shape: vec![1, c, coarse.shape[2] * 2, coarse.shape[3] * 2],
            }
        };
        // The two maps meet at the finer one's size when it is exactly twice the coarser.
        if fine.shape[2..] != up.shape[2..] {
            return up;
        }
        let fine = if fine.shape[1] == up.shape[1] {
            fine.clone()
        } else {
            self.conv(fine, up.shape[1], 1, 1, 1)
        };
        if self.rng.random_bool(0.5) {
            let y = self.node("Add", &[&up.name, &fine.name], vec![]);
            V {
                name: y,
                shape: up.shape,
            }
        } else {
            let y = self.node("Concat", &[&up.name, &fine.name], vec![int("axis", 1)]);
            let mut shape = up.shape.clone();
            shape[1] *= 2;
            V { name: y, shape }
        }
    }

    /// YOLOv8's box head: 64 channels read as 4 sides × 16 bins, a softmax over the bins (an
    /// inner axis), and their expectation by a fixed 1×1 convolution: [1, 4, H·W].
    fn distribution_head(&mut self, x: &V) -> V {
        let y = self.conv(x, 64, 1, 1, 1);
        let cells = y.shape[2] * y.shape[3];
        let s = self.shape_const(&[1, 4, 16, cells]);
        let r = self.node("Reshape", &[&y.name, &s], vec![]);
        let t = self.node("Transpose", &[&r], vec![ints("perm", &[0, 2, 1, 3])]);
        let soft = self.node("Softmax", &[&t], vec![int("axis", 1)]);
        let v = V {
            name: soft,
            shape: vec![1, 16, 4, cells],
        };
        let e = self.conv(&v, 1, 1, 1, 1);
        let s = self.shape_const(&[1, 4, cells]);
        let out = self.node("Reshape", &[&e.name, &s], vec![]);
        V {
            name: out,
            shape: vec![1, 4, cells],
        }
    }
}

/// The graph probe drawn from `seed`: an image stem, convolutional blocks of the families
/// above with feature-pyramid steps, then either a detector's or segmenter's map head or a
/// sequence part (recurrent, attention, 1-D convolution) with a linear head.
pub fn build(seed: u64) -> pb::ModelProto {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6772_6170_6870_726f);
    let (h, w) = [
        (64, 64),
        (96, 96),
        (128, 128),
        (160, 160),
        (224, 224),
        (320, 320),
        (32, 128),
        (48, 192),
        (48, 320),
        (64, 256),
    ][rng.random_range(0..10)];
    // Drawn apart, so the other probes keep the networks their seeds drew before.
    let wide = if ChaCha8Rng::seed_from_u64(seed ^ 0x7769_6465).random_bool(1.0 / 3.0) {
        4
    } else {
        1
    };
    let mut net = Net {
        rng,
        seed,
        wide,
        rows_only: false,
        nodes: Vec::new(),
        weights: Vec::new(),
        count: 0,
    };
    let channels = net.pick(&[1, 3, 3, 3]);
    let input = V {
        name: "input".into(),
        shape: vec![1, channels, h, w],
    };
    let stem = net.pick(&[8, 16, 24, 32]);
    let mut x = net.conv_act(&input, stem, 3, 2, 1);
    let sequence_head = net.rng.random_bool(0.5);
    // Half the recognisers halve the rows only (drawn apart, as below).
    net.rows_only = sequence_head && ChaCha8Rng::seed_from_u64(seed ^ 0x726f_7773).random_bool(0.5);
    let mut maps: Vec<V> = vec![x.clone()];
    for _ in 0..net.rng.random_range(3..=7) {
        x = match net.rng.random_range(0..5) {
            0 | 1 => net.depthwise(&x),
            2 => net.dense(&x),
            3 => net.c2f(&x),
            _ => {
                let c = x.shape[1];
                let out = net.pick(&[c, c * 2]).min(384);
                net.conv_act(&x, out, 3, 2, 1)
            }
        };
        if x.shape[2] >= 4 && x.shape[3] >= 4 && net.rng.random_bool(0.3) {
            x = net.conv_act(&x, x.shape[1], 3, 2, 1);
        }
        maps.push(x.clone());
    }
    let output = if sequence_head {
        // Text-line recognisers pool the height away, then read the columns as a sequence.
        let pooled = if x.shape[2] > 1 {
            let k = x.shape[2];
            let y = net.node(
                "AveragePool",
                &[&x.name],
                vec![ints("kernel_shape", &[k, 1]), ints("strides", &[k, 1])],
            );
            V {
                name: y,
                shape: vec![1, x.shape[1], 1, x.shape[3]],
            }
        } else {
            x.clone()
        };
        let mut s = net.sequence_from(&pooled);
        let width = net.pick(&[64, 96, 120, 192]) * net.wide;
        s = net.linear(&s, width);
        for _ in 0..net.rng.random_range(1..=3) {
            s = match net.rng.random_range(0..3) {
                0 => net.recurrent(&s),
                1 => net.attention(&s),
                _ => net.conv1d(&s),
            };
        }
        let classes = net.pick(&[37, 96, 6625]);
        let logits = net.linear(&s, classes);
        let y = net.node("Softmax", &[&logits.name], vec![int("axis", -1)]);
        V {
            name: y,
            shape: logits.shape,
        }
    } else {
        // Half the detectors pool their deepest map as YOLO does (drawn apart, as below).
        if ChaCha8Rng::seed_from_u64(seed ^ 0x0073_7070).random_bool(0.5) {
            x = net.spp(&x);
            if let Some(deepest) = maps.last_mut() {
                *deepest = x.clone();
            }
        }
        // A feature pyramid back up two or three levels, then a per-pixel map.
        let mut y = x.clone();
        for fine in maps.iter().rev().skip(1).take(net.rng.random_range(2..=3)) {
            let fine = fine.clone();
            y = net.upsample(&fine, &y);
        }
        let maps_out = net.rng.random_range(1..=4);
        // One detector in three reads its boxes as YOLOv8 does, from a distribution over 16
        // bins (drawn apart, so the other probes keep the networks their seeds drew before).
        if ChaCha8Rng::seed_from_u64(seed ^ 0x64_666c).random_bool(1.0 / 3.0) {
            net.distribution_head(&y)
        } else {
            let y = net.conv(&y, maps_out, 3, 1, 1);
            let s = net.node("Sigmoid", &[&y.name], vec![]);
            V {
                name: s,
                shape: y.shape,
            }
        }
    };
    let graph = pb::GraphProto {
        name: name(seed),
        node: net.nodes,
        initializer: net.weights,
        input: vec![crate::models::onnx::value_info(&input.name, &input.shape)],
        output: vec![crate::models::onnx::value_info(&output.name, &output.shape)],
        ..Default::default()
    };
    pb::ModelProto {
        ir_version: crate::models::onnx::IR_VERSION,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: crate::models::onnx::OPSET,
        }],
        producer_name: "edgeprof".into(),
        graph: Some(graph),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::costmodel::files::file_groups;

    fn analysed(seed: u64) -> crate::models::onnx_graph::GraphCost {
        let proto = build(seed);
        match crate::models::onnx_graph::analyse(&proto, &name(seed), "probe", &[], None) {
            Ok(c) => c,
            Err(e) => panic!("graph probe {seed}: {e}"),
        }
    }

    #[test]
    fn a_seed_draws_the_same_graph_and_names_round_trip() {
        let encode = |s| crate::models::onnx::encode(&build(s));
        assert_eq!(encode(3), encode(3));
        assert_ne!(encode(3), encode(4));
        assert_eq!(seed_of(&name(17)), Some(17));
        assert_eq!(seed_of("probe-17"), None);
        let shape = image(3).map(|s| s.to_string());
        assert!(shape.is_some(), "{shape:?}");
    }

    #[test]
    fn every_graph_probe_is_costed_whole_and_together_they_cover_the_families_real_models_have() {
        let mut templates = std::collections::BTreeSet::new();
        let mut ops = std::collections::BTreeSet::new();
        for seed in 1..=40 {
            let cost = analysed(seed);
            assert_eq!(
                cost.costed, cost.node_count,
                "graph probe {seed}: {:?}",
                cost.not_costed
            );
            let groups = file_groups(&cost);
            assert!(groups.iter().all(|g| g.dims.is_some()));
            templates.extend(groups.iter().map(|g| g.template.clone()));
            ops.extend(cost.nodes.iter().map(|n| n.op.clone()));
        }
        for t in [
            "dw5x5/s1",
            "dw7x7/s1",
            "dw9x9/s1",
            "deconv2x2/s2",
            "resize",
            "rnn",
            "matmul",
            "softmax",
            "softmax_inner",
            "concat",
            "linear",
        ] {
            assert!(templates.contains(t), "{t} never drawn: {templates:?}");
        }
        for op in [
            "Erf",
            "Clip",
            "HardSigmoid",
            "LSTM",
            "GRU",
            "ConvTranspose",
            "Pow",
        ] {
            assert!(ops.contains(op), "{op} never drawn: {ops:?}");
        }
    }

    #[test]
    fn tract_runs_a_graph_probe_and_its_node_profile_lands_in_the_groups() {
        let how = crate::tune::costmodel::Measure {
            target: 0.5,
            min_runs: 2,
            max_runs: 4,
            layer_runs: 2,
        };
        let p = match crate::tune::costmodel::measure(&name(1), input(), 1, how) {
            Ok(p) => p,
            Err(e) => panic!("{e:#}"),
        };
        assert_eq!(p.model, name(1));
        // Most of the end-to-end time is in the groups (tract's node names map back).
        assert!(
            p.layers_ms() > 0.5 * p.latency_ms,
            "{} of {}",
            p.layers_ms(),
            p.latency_ms
        );
    }
}

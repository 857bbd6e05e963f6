//! The sequence parts of the graph probes: what text-line recognisers, transformers and audio
//! models put after their convolutions — the map read as a sequence, linear layers, LSTM and
//! GRU layers, transformer blocks with decomposed layer norms, 1-D convolutions.

use super::{Net, V};
use crate::models::onnx::{int, ints};
use rand::Rng;
use tract_onnx::pb;

impl Net {
    /// [1, C, H, W] → [1, H·W, C]: the sequence recognisers and transformers read.
    pub(super) fn sequence_from(&mut self, x: &V) -> V {
        let (c, t) = (x.shape[1], x.shape[2] * x.shape[3]);
        let s = self.shape_const(&[1, c, t]);
        let r = self.node("Reshape", &[&x.name, &s], vec![]);
        let y = self.node("Transpose", &[&r], vec![ints("perm", &[0, 2, 1])]);
        V {
            name: y,
            shape: vec![1, t, c],
        }
    }

    /// A layer norm over the last axis as exporters decompose it.
    pub(super) fn layer_norm(&mut self, x: &V) -> V {
        let c = *x.shape.last().unwrap_or(&1);
        let axes = vec![ints("axes", &[x.shape.len() - 1])];
        let mean = self.node("ReduceMean", &[&x.name], axes.clone());
        let d = self.node("Sub", &[&x.name, &mean], vec![]);
        let two = self.scalar(2.0);
        let sq = self.node("Pow", &[&d, &two], vec![]);
        let var = self.node("ReduceMean", &[&sq], axes);
        let eps = self.scalar(1e-5);
        let ve = self.node("Add", &[&var, &eps], vec![]);
        let sd = self.node("Sqrt", &[&ve], vec![]);
        let n = self.node("Div", &[&d, &sd], vec![]);
        let g = self.weight(&[c], 1);
        let b = self.weight(&[c], 1);
        let m = self.node("Mul", &[&n, &g], vec![]);
        let y = self.node("Add", &[&m, &b], vec![]);
        V {
            name: y,
            shape: x.shape.clone(),
        }
    }

    /// x · W (+ b) on a sequence [1, T, C].
    pub(super) fn linear(&mut self, x: &V, out: usize) -> V {
        let c = *x.shape.last().unwrap_or(&1);
        let w = self.weight(&[c, out], c);
        let m = self.node("MatMul", &[&x.name, &w], vec![]);
        let b = self.weight(&[out], c);
        let y = self.node("Add", &[&m, &b], vec![]);
        let mut shape = x.shape.clone();
        if let Some(last) = shape.last_mut() {
            *last = out;
        }
        V { name: y, shape }
    }

    /// A transformer block (SVTR's): layer norm, multi-head self-attention, residual; layer
    /// norm, MLP with GELU (through Erf), residual.
    pub(super) fn attention(&mut self, x: &V) -> V {
        let (t, c) = (x.shape[1], x.shape[2]);
        let heads = if c.is_multiple_of(8) {
            self.pick(&[2, 4, 8])
        } else {
            1
        };
        let d = c / heads;
        let n = self.layer_norm(x);
        let qkv = self.linear(&n, 3 * c);
        let s = self.shape_const(&[1, t, 3, heads, d]);
        let r = self.node("Reshape", &[&qkv.name, &s], vec![]);
        let p = self.node("Transpose", &[&r], vec![ints("perm", &[2, 0, 3, 1, 4])]);
        let split = self.shape_const(&[1, 1, 1]);
        self.count += 1;
        let names: Vec<String> = (0..3).map(|i| format!("n{}_qkv{i}", self.count)).collect();
        self.nodes.push(pb::NodeProto {
            name: format!("n{}_Split", self.count),
            op_type: "Split".into(),
            input: vec![p, split],
            output: names.clone(),
            attribute: vec![int("axis", 0)],
            ..Default::default()
        });
        let sq = self.shape_const(&[0]);
        let q = self.node("Squeeze", &[&names[0], &sq], vec![]);
        let k = self.node("Squeeze", &[&names[1], &sq], vec![]);
        let v = self.node("Squeeze", &[&names[2], &sq], vec![]);
        let kt = self.node("Transpose", &[&k], vec![ints("perm", &[0, 1, 3, 2])]);
        let scores = self.node("MatMul", &[&q, &kt], vec![]);
        let scale = self.scalar(1.0 / (d as f32).sqrt());
        let scaled = self.node("Mul", &[&scores, &scale], vec![]);
        let attn = self.node("Softmax", &[&scaled], vec![int("axis", -1)]);
        let o = self.node("MatMul", &[&attn, &v], vec![]);
        let ot = self.node("Transpose", &[&o], vec![ints("perm", &[0, 2, 1, 3])]);
        let s = self.shape_const(&[1, t, c]);
        let merged = self.node("Reshape", &[&ot, &s], vec![]);
        let proj = self.linear(
            &V {
                name: merged,
                shape: vec![1, t, c],
            },
            c,
        );
        let res = self.node("Add", &[&x.name, &proj.name], vec![]);
        let x1 = V {
            name: res,
            shape: vec![1, t, c],
        };
        let n2 = self.layer_norm(&x1);
        let wide = c * self.pick(&[2, 4]);
        let hidden = self.linear(&n2, wide);
        let sqrt2 = self.scalar(std::f32::consts::SQRT_2);
        let dv = self.node("Div", &[&hidden.name, &sqrt2], vec![]);
        let e = self.node("Erf", &[&dv], vec![]);
        let one = self.scalar(1.0);
        let e1 = self.node("Add", &[&e, &one], vec![]);
        let g = self.node("Mul", &[&hidden.name, &e1], vec![]);
        let half = self.scalar(0.5);
        let gelu = self.node("Mul", &[&g, &half], vec![]);
        let out = self.linear(
            &V {
                name: gelu,
                shape: hidden.shape.clone(),
            },
            c,
        );
        let y = self.node("Add", &[&x1.name, &out.name], vec![]);
        V {
            name: y,
            shape: vec![1, t, c],
        }
    }

    /// A recurrent layer over a sequence [1, T, C]: LSTM or GRU, one or both directions,
    /// back to [1, T, H·directions].
    pub(super) fn recurrent(&mut self, x: &V) -> V {
        let (t, c) = (x.shape[1], x.shape[2]);
        let hidden = self.pick(&[32, 48, 64, 96, 128]) * self.wide;
        let both = self.rng.random_bool(0.5);
        let dirs = if both { 2 } else { 1 };
        let (op, gates) = if self.rng.random_bool(0.7) {
            ("LSTM", 4)
        } else {
            ("GRU", 3)
        };
        let seq = self.node("Transpose", &[&x.name], vec![ints("perm", &[1, 0, 2])]);
        let w = self.weight(&[dirs, gates * hidden, c], c);
        let r = self.weight(&[dirs, gates * hidden, hidden], hidden);
        let b = self.weight(&[dirs, 2 * gates * hidden], hidden);
        let mut attrs = vec![int("hidden_size", hidden as i64)];
        if both {
            attrs.push(pb::AttributeProto {
                name: "direction".into(),
                r#type: pb::attribute_proto::AttributeType::String as i32,
                s: b"bidirectional".to_vec(),
                ..Default::default()
            });
        }
        let y = self.node(op, &[&seq, &w, &r, &b], attrs);
        // [T, dirs, 1, H] → [1, T, dirs·H]
        let p = self.node("Transpose", &[&y], vec![ints("perm", &[2, 0, 1, 3])]);
        let s = self.shape_const(&[1, t, dirs * hidden]);
        let out = self.node("Reshape", &[&p, &s], vec![]);
        V {
            name: out,
            shape: vec![1, t, dirs * hidden],
        }
    }

    /// A 1-D convolution over a sequence [1, T, C] (an audio model's), back to [1, T, C'].
    pub(super) fn conv1d(&mut self, x: &V) -> V {
        let c = x.shape[2];
        let tr = self.node("Transpose", &[&x.name], vec![ints("perm", &[0, 2, 1])]);
        let v = V {
            name: tr,
            shape: vec![1, c, x.shape[1]],
        };
        let kernel = self.pick(&[3, 5]);
        let out = self.pick(&[c, c, 2 * c]).min(256 * self.wide);
        let y = self.conv_act(&v, out, kernel, 1, 1);
        let back = self.node("Transpose", &[&y.name], vec![ints("perm", &[0, 2, 1])]);
        V {
            name: back,
            shape: vec![1, y.shape[2], out],
        }
    }
}

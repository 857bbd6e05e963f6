//! The seeded parameters of a zoo model, the same for every engine: the ONNX writer (tract,
//! onnxruntime) and candle read them from here, so that all engines compute the same function.
//!
//! Each tensor is drawn from a ChaCha stream seeded with the model seed and the tensor's name
//! (see [`seeded_uniform`]), so a layer's parameters do not depend on the layers before it.
//! Initialisation keeps activations of order one through deep stacks: He-uniform convolutions,
//! PyTorch's default uniform for linear layers, batch-norm statistics near the identity.

use super::cost::adaptive_window;
use super::graph::Op;
use super::onnx::seeded_uniform;

/// One parameter tensor of a layer, named as PyTorch names it (`conv1.weight`).
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub dims: Vec<usize>,
    pub data: Vec<f32>,
}

fn param(seed: u64, name: String, dims: &[usize], low: f32, high: f32) -> Param {
    let count = dims.iter().product();
    Param {
        data: seeded_uniform(seed, &name, count, low, high),
        name,
        dims: dims.to_vec(),
    }
}

/// The parameters of layer `name` doing `op`, in the order its ONNX node takes them:
/// convolution weight then bias; batch-norm scale, bias, running mean, running variance; linear
/// weight (out × in) then bias. Layers without parameters give none.
pub fn layer_params(op: &Op, name: &str, seed: u64) -> Vec<Param> {
    match op {
        Op::Conv2d {
            in_channels,
            out_channels,
            kernel,
            groups,
            bias,
            ..
        } => {
            let fan_in = (in_channels / groups * kernel[0] * kernel[1]) as f32;
            let bound = (6.0 / fan_in).sqrt();
            let dims = [*out_channels, in_channels / groups, kernel[0], kernel[1]];
            let mut out = vec![param(seed, format!("{name}.weight"), &dims, -bound, bound)];
            if *bias {
                let b = 1.0 / fan_in.sqrt();
                out.push(param(seed, format!("{name}.bias"), &[*out_channels], -b, b));
            }
            out
        }
        Op::BatchNorm2d { channels, .. } => {
            let c = [*channels];
            vec![
                param(seed, format!("{name}.weight"), &c, 0.75, 1.25),
                param(seed, format!("{name}.bias"), &c, -0.1, 0.1),
                param(seed, format!("{name}.running_mean"), &c, -0.1, 0.1),
                param(seed, format!("{name}.running_var"), &c, 0.75, 1.25),
            ]
        }
        Op::Linear {
            in_features,
            out_features,
            bias,
        } => {
            let b = 1.0 / (*in_features as f32).sqrt();
            let dims = [*out_features, *in_features];
            let mut out = vec![param(seed, format!("{name}.weight"), &dims, -b, b)];
            if *bias {
                out.push(param(seed, format!("{name}.bias"), &[*out_features], -b, b));
            }
            out
        }
        _ => Vec::new(),
    }
}

/// The reproducible input every engine feeds a model of `shape`: uniform in [-1, 1) from `seed`.
pub fn input_data(shape: &[usize], seed: u64) -> Vec<f32> {
    seeded_uniform(seed, "input", shape.iter().product(), -1.0, 1.0)
}

/// Batch-norm epsilon (PyTorch's default).
pub const BN_EPSILON: f32 = 1e-5;

/// The (out × len) matrix of PyTorch's adaptive average pooling of `len` cells to `out`: row i
/// averages the window `adaptive_window(i, len, out)`.
pub fn pooling_matrix(len: usize, out: usize) -> Vec<f32> {
    let mut m = vec![0.0; out * len];
    for i in 0..out {
        let (start, end) = adaptive_window(i, len, out);
        let weight = 1.0 / (end - start) as f32;
        for j in start..end {
            m[i * len + j] = weight;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_follow_the_layer_and_the_seed() {
        let conv = Op::Conv2d {
            in_channels: 4,
            out_channels: 8,
            kernel: [3, 3],
            stride: [1, 1],
            padding: [1, 1],
            groups: 2,
            bias: true,
        };
        let p = layer_params(&conv, "c", 7);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].name, "c.weight");
        assert_eq!(p[0].dims, vec![8, 2, 3, 3]);
        assert_eq!(p[0].data.len(), 144);
        // He-uniform bound sqrt(6 / 18).
        assert!(p[0].data.iter().all(|v| v.abs() <= (6.0f32 / 18.0).sqrt()));
        assert_eq!(p, layer_params(&conv, "c", 7));
        assert_ne!(p[0].data, layer_params(&conv, "c", 8)[0].data);
        let bn = layer_params(
            &Op::BatchNorm2d {
                channels: 3,
                eps: BN_EPSILON,
            },
            "bn",
            7,
        );
        let names: Vec<&str> = bn.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]
        );
        assert!(bn[3].data.iter().all(|v| *v >= 0.75));
        assert!(layer_params(&Op::Relu, "r", 7).is_empty());
    }

    #[test]
    fn pooling_rows_average_pytorch_windows() {
        // 5 → 3: windows [0,2), [1,4), [3,5).
        let m = pooling_matrix(5, 3);
        assert_eq!(&m[0..5], &[0.5, 0.5, 0.0, 0.0, 0.0]);
        let third = 1.0 / 3.0;
        assert_eq!(&m[5..10], &[0.0, third, third, third, 0.0]);
        assert_eq!(&m[10..15], &[0.0, 0.0, 0.0, 0.5, 0.5]);
    }
}

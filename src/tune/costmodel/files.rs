//! Any ONNX file's layer groups, from the node-by-node analysis ([`crate::models::onnx_graph`]):
//! each run-time node an operator template as the zoo's layers have (a convolution is
//! `conv3x3/s2` whichever model it is in, so what the zoo and the probes taught carries over),
//! and the operators the zoo lacks templates of their own (`deconv`, `resize`, `rnn`, `matmul`,
//! `softmax`, `norm`), grouped as an engine fuses them
//! ([`crate::models::onnx_graph::fused_groups`]).

use super::{Dims, Group};
use crate::error::BadInput;
use crate::models::onnx_graph::{fused_groups, GraphCost, InputSpec, NodeCost};
use std::path::Path;

/// The operator template of one run-time node of an ONNX file.
pub fn template(node: &NodeCost) -> String {
    let f = &node.form;
    let k = |i: usize| f.kernel.get(i).copied().unwrap_or(1);
    let s = stride_name(&f.strides);
    let c_in = f.input_shape.get(1).copied().unwrap_or(1);
    match node.op.as_str() {
        "Conv" | "ConvInteger" | "QLinearConv" | "com.microsoft.FusedConv" => {
            let family = if f.groups > 1 && f.groups == c_in {
                "dw"
            } else if f.groups > 1 {
                "gconv"
            } else {
                "conv"
            };
            if f.kernel.len() == 1 {
                format!("{family}{}/s{s}", k(0))
            } else {
                format!("{family}{}x{}/s{s}", k(0), k(1))
            }
        }
        "ConvTranspose" => format!("deconv{}x{}/s{s}", k(0), k(1)),
        "Gemm" | "MatMul" | "MatMulInteger" | "QLinearMatMul" | "Einsum" => {
            if f.runtime_inputs >= 2 {
                "matmul".to_string()
            } else {
                "linear".to_string()
            }
        }
        "MaxPool" | "GlobalMaxPool" | "ReduceMax" => "maxpool".to_string(),
        "AveragePool" | "GlobalAveragePool" | "ReduceMean" | "ReduceSum" | "LpPool" => {
            "avgpool".to_string()
        }
        "Add" | "Sub" | "Mul" | "Div" | "Sum" | "Max" | "Min" | "Pow" | "Where" => {
            "add".to_string()
        }
        "Concat" => "concat".to_string(),
        "Transpose" | "Split" | "Slice" | "Gather" | "DepthToSpace" | "SpaceToDepth" | "Tile"
        | "Expand" | "Pad" => "shuffle".to_string(),
        "Resize" | "Upsample" => "resize".to_string(),
        "LSTM" | "GRU" | "RNN" => "rnn".to_string(),
        // tract's softmax over an inner axis (YOLOv8's box distributions, over 16 bins along
        // axis 1) ran at a small fraction of its speed over the last axis.
        "Softmax" | "LogSoftmax" if f.inner_axis => "softmax_inner".to_string(),
        "Softmax" | "LogSoftmax" => "softmax".to_string(),
        "LayerNormalization"
        | "InstanceNormalization"
        | "GroupNormalization"
        | "LRN"
        | "ReduceL2"
        | "LpNormalization" => "norm".to_string(),
        _ => "eltwise".to_string(),
    }
}

/// A window's strides as templates name them: `2` when every axis has it, else per axis
/// (`2x1`: the rows halved, the columns kept, as text-line recognisers do; tract runs such a
/// depthwise convolution at the speed of a stride of 1, where one of `2` along the columns is
/// several times slower).
fn stride_name(strides: &[usize]) -> String {
    match strides.first() {
        None => "1".to_string(),
        Some(&first) if strides.iter().all(|&s| s == first) => first.to_string(),
        Some(_) => strides
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("x"),
    }
}

/// The shape of a node that leads a group, as [`Dims`] keeps a layer's: channels in and out,
/// the output map (rows × 1 for a matrix product or a sequence), its window.
fn dims(node: &NodeCost, cost: &GraphCost) -> Dims {
    let f = &node.form;
    let out = node.output_shape.clone().unwrap_or_default();
    let at = |s: &[usize], i: usize| s.get(i).copied().unwrap_or(1);
    let (c_in, c_out, h, w) = match node.op.as_str() {
        "Gemm" | "MatMul" | "MatMulInteger" | "QLinearMatMul" | "Einsum" => {
            let rows = out
                .iter()
                .take(out.len().saturating_sub(1))
                .fold(1usize, |n, &d| n.saturating_mul(d));
            (
                f.input_shape.last().copied().unwrap_or(1),
                out.last().copied().unwrap_or(1),
                rows.max(1),
                1,
            )
        }
        // A sequence: its steps as rows.
        "LSTM" | "GRU" | "RNN" => (at(&f.input_shape, 2), at(&out, 3), at(&out, 0), 1),
        _ => (at(&f.input_shape, 1), at(&out, 1), at(&out, 2), at(&out, 3)),
    };
    Dims {
        c_in,
        c_out,
        h,
        w,
        kernel: f.kernel.first().copied().unwrap_or(1),
        // Along the columns, the innermost axis: the one that decides how fast tract's
        // kernels walk the map (see `stride_name`).
        stride: f.strides.last().copied().unwrap_or(1),
        groups: f.groups.max(1),
        model_flops: cost.total.flops,
        model_bytes: cost.total.dram_bytes,
    }
}

/// A file's groups, as [`super::planned_groups`] gives a zoo model's: the run-time nodes as
/// an engine fuses them ([`fused_groups`]), each with its leading node's template and shape
/// and the summed work of its members.
pub fn file_groups(cost: &GraphCost) -> Vec<Group> {
    fused_groups(cost)
        .into_iter()
        .filter_map(|members| {
            let lead = cost.nodes.get(*members.first()?)?;
            let nodes: Vec<&NodeCost> = members.iter().filter_map(|&i| cost.nodes.get(i)).collect();
            Some(Group {
                label: nodes
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>()
                    .join("+"),
                template: template(lead),
                flops: nodes.iter().map(|n| n.flops as f64).sum(),
                bytes: fused_bytes(&nodes) as f64,
                seconds: 0.0,
                dims: Some(dims(lead, cost)),
            })
        })
        .collect()
}

/// The bytes a fused group moves: every member's weights, what its members read from outside
/// it, and its last member's output; what one member hands the next stays in the caches (an
/// exporter's batch norm as a `Mul` and an `Add`, its hard-swish as four nodes, run fused with
/// their convolution, do not read and write the map eight more times).
fn fused_bytes(nodes: &[&NodeCost]) -> u64 {
    let mut made: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut bytes = 0u64;
    for n in nodes {
        bytes = bytes.saturating_add(n.param_bytes);
        for (v, b) in n.form.reads.iter().zip(&n.form.read_bytes) {
            if !made.contains(v.as_str()) {
                bytes = bytes.saturating_add(*b);
            }
        }
        made.extend(n.form.writes.iter().map(String::as_str));
    }
    bytes.saturating_add(nodes.last().map_or(0, |n| n.output_bytes))
}

/// What a profile of a file at its own shapes keeps as its input.
pub const DECLARED: &str = "declared";

/// The inputs a file's profile was taken at ([`DECLARED`], or specs separated by spaces).
pub fn specs(input: &str) -> Result<Vec<InputSpec>, BadInput> {
    if input.trim() == DECLARED || input.trim().is_empty() {
        return Ok(Vec::new());
    }
    input
        .split_whitespace()
        .map(|s| s.parse::<InputSpec>().map_err(|e| BadInput(e.to_string())))
        .collect()
}

/// The node-by-node analysis of the ONNX file at `path` at `input` ([`specs`]).
pub fn analysis(path: &Path, input: &str) -> Result<GraphCost, BadInput> {
    crate::models::onnx_graph::analyse_file(path, &specs(input)?, None)
        .map_err(|e| BadInput(e.to_string()))
}

/// Profiles the ONNX file at `path` with tract on `threads` threads, fed at `input` ([`specs`])
/// as `bench` feeds it, in this process: its end-to-end latency as [`super::measure`] takes a
/// zoo model's, then tract's node profile summed over [`file_groups`].
pub fn measure(
    path: &Path,
    input: &str,
    threads: usize,
    how: super::Measure,
) -> crate::error::Result<super::Profile> {
    let analysed = analysis(path, input)?;
    let bound = crate::models::onnx_graph::bind_file_inputs(path, &specs(input)?, None)?;
    let seed = crate::models::onnx::DEFAULT_SEED;
    let (session, fed) =
        crate::engines::tract::TractSession::load_fed(path, &bound, threads, seed)?;
    let (latency_ms, interval, times) =
        super::timed_runs(how, || Ok(session.time_fed(&fed)?.as_secs_f64() * 1e3))?;
    let layer_times = session.profile_fed(&fed, how.layer_runs)?;
    let groups = super::timed(file_groups(&analysed), &layer_times);
    Ok(super::Profile::one_round(
        "tract",
        (&path.to_string_lossy(), input, threads),
        groups,
        (latency_ms, interval),
        times,
    ))
}

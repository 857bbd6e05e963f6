//! How an engine fuses a file's run-time nodes: the nodes that join the group whose output they
//! read (activations, batch norms, a constant scale or shift, views, and a gate that reads only
//! what that group made), so that a group's time is what a node profile gives any of its
//! members. The cost model's groups and the roofline's layer points of a file are these.

use super::{GraphCost, NodeCost};
use std::collections::HashMap;

/// Element-wise operators of one input: fused into what comes before them.
const UNARY: [&str; 24] = [
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Clip",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Elu",
    "Selu",
    "Celu",
    "Gelu",
    "Softplus",
    "Softsign",
    "Mish",
    "Erf",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Neg",
    "Abs",
    "Cast",
    "ThresholdedRelu",
];

/// Operators that move no data, or only rename it.
const VIEWS: [&str; 7] = [
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Dropout",
    "Shape",
];

/// Whether `node` joins the group that made every run-time value it reads, when they all
/// come from one group: a gate such as SiLU's `x · sigmoid(x)`, which tract fuses
/// into the convolution before it, where a residual sum or a squeeze-and-excitation scale
/// reads two groups, and tract's node profile times it on its own.
fn follows(node: &NodeCost) -> bool {
    let op = node.op.as_str();
    matches!(op, "Mul" | "Add" | "Div" | "Sub")
        || UNARY.contains(&op)
        || VIEWS.contains(&op)
        || op == "BatchNormalization"
        // A constant shift or scale, or a power by a constant.
        || (matches!(op, "Pow" | "Max" | "Min") && node.form.runtime_inputs <= 1)
}

/// The groups of `cost`'s run-time nodes (indices into `cost.nodes`, the leading node first),
/// in the order the analysis met them; folded nodes (computed once at load) and nodes not
/// costed are in none. A node joins the group its inputs come from even when other nodes came
/// between (exporters interleave a detector head's branches, so that the activation of one
/// branch's convolution follows the other branch's).
pub fn fused_groups(cost: &GraphCost) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    // The group each run-time value comes from.
    let mut made_by: HashMap<&str, usize> = HashMap::new();
    for (i, node) in cost.nodes.iter().enumerate() {
        if node.folded || node.not_costed.is_some() || node.op == "If" {
            continue;
        }
        let mut sources = node
            .form
            .reads
            .iter()
            .map(|v| made_by.get(v.as_str()).copied());
        let source = match sources.next() {
            Some(Some(first)) if sources.all(|g| g == Some(first)) => Some(first),
            _ => None,
        };
        let at = match source {
            Some(g) if follows(node) => g,
            _ => {
                out.push(Vec::new());
                out.len() - 1
            }
        };
        out[at].push(i);
        for v in &node.form.writes {
            made_by.insert(v.as_str(), at);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::onnx::{float_tensor, ints, value_info};
    use tract_onnx::pb;

    fn node(op: &str, inputs: &[&str], out: &str) -> pb::NodeProto {
        pb::NodeProto {
            name: out.to_string(),
            op_type: op.to_string(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.to_string()],
            ..Default::default()
        }
    }

    /// conv → sigmoid → x·sigmoid(x) → conv → + the first conv's gated output (a residual)
    /// → hard-sigmoid → the gated output scaled by it (reading an earlier group too).
    #[test]
    fn a_gate_joins_its_convolution_and_a_residual_sum_or_a_scale_leads_a_group() {
        let mut conv2 = node("Conv", &["silu", "w2"], "conv2");
        conv2.attribute.push(ints("kernel_shape", &[1, 1]));
        let graph = pb::GraphProto {
            node: vec![
                node("Conv", &["x", "w1"], "conv1"),
                node("Sigmoid", &["conv1"], "sig"),
                node("Mul", &["conv1", "sig"], "silu"),
                conv2,
                node("Add", &["conv2", "silu"], "sum"),
                node("HardSigmoid", &["sum"], "gate"),
                node("Mul", &["silu", "gate"], "out"),
            ],
            initializer: vec![
                float_tensor("w1", &[4, 3, 3, 3], &[0.1; 108]),
                float_tensor("w2", &[4, 4, 1, 1], &[0.1; 16]),
            ],
            input: vec![value_info("x", &[1, 3, 8, 8])],
            output: vec![value_info("out", &[1, 4, 6, 6])],
            ..Default::default()
        };
        let proto = pb::ModelProto {
            ir_version: 7,
            opset_import: vec![pb::OperatorSetIdProto {
                domain: String::new(),
                version: 13,
            }],
            graph: Some(graph),
            ..Default::default()
        };
        let cost = match super::super::analyse(&proto, "m", "m.onnx", &[], None) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let names = |g: &Vec<usize>| -> Vec<&str> {
            g.iter().map(|&i| cost.nodes[i].name.as_str()).collect()
        };
        let groups: Vec<Vec<&str>> = fused_groups(&cost).iter().map(names).collect();
        assert_eq!(
            groups,
            vec![
                vec!["conv1", "sig", "silu"],
                vec!["conv2"],
                vec!["sum", "gate"],
                vec!["out"],
            ]
        );
    }
}

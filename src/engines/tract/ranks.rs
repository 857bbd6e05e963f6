//! Ranks of a graph's tensors as far as they can be told from the file alone, and the check
//! that the operators working on images (convolutions, poolings, batch norms) get tensors of a
//! rank they can index. tract reads their channel and spatial axes without bounds checks, so a
//! malformed file with a rank-1 input to a Conv aborts a debug build and reads past a buffer in
//! a release one: no panic to contain, so it is refused before tract sees it.

use std::collections::{BTreeSet, HashMap};
use tract_onnx::pb;

/// The least input rank of an operator that indexes channel and spatial axes, and which of
/// its inputs are so indexed.
fn needs(op: &str) -> Option<(usize, &'static [usize])> {
    match op {
        "Conv" | "ConvTranspose" | "ConvInteger" => Some((3, &[0, 1])),
        "QLinearConv" => Some((3, &[0, 3])),
        "MaxPool" | "AveragePool" | "LpPool" | "GlobalAveragePool" | "GlobalMaxPool"
        | "GlobalLpPool" => Some((3, &[0])),
        "BatchNormalization" => Some((2, &[0])),
        _ => None,
    }
}

fn rank_of_value_info(v: &pb::ValueInfoProto) -> Option<usize> {
    let pb::type_proto::Value::TensorType(t) = v.r#type.as_ref()?.value.as_ref()?;
    Some(t.shape.as_ref()?.dim.len())
}

fn attr<'a>(node: &'a pb::NodeProto, name: &str) -> Option<&'a pb::AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

/// Values of a one-dimensional int64 initializer (shapes, axes).
fn int_values(graph: &pb::GraphProto, name: &str) -> Option<Vec<i64>> {
    let t = graph.initializer.iter().find(|t| t.name == name)?;
    if t.data_type != pb::tensor_proto::DataType::Int64 as i32 || t.dims.len() != 1 {
        return None;
    }
    if !t.int64_data.is_empty() {
        return Some(t.int64_data.clone());
    }
    Some(
        t.raw_data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
    )
}

/// Length of the one-dimensional initializer `name` (a shape or an axes list).
fn length_of(graph: &pb::GraphProto, name: &str) -> Option<usize> {
    let t = graph.initializer.iter().find(|t| t.name == name)?;
    match t.dims.as_slice() {
        [n] => usize::try_from(*n).ok(),
        _ => None,
    }
}

/// Output rank of `node` from its inputs' ranks; None when it cannot be told.
fn output_rank(graph: &pb::GraphProto, node: &pb::NodeProto, r: &[Option<usize>]) -> Option<usize> {
    let first = r.first().copied().flatten();
    let keepdims = attr(node, "keepdims").is_none_or(|a| a.i != 0);
    let axes_len = || {
        attr(node, "axes")
            .map(|a| a.ints.len())
            .or_else(|| node.input.get(1).and_then(|n| length_of(graph, n)))
    };
    match node.op_type.as_str() {
        "Relu"
        | "Sigmoid"
        | "Tanh"
        | "Clip"
        | "LeakyRelu"
        | "Elu"
        | "Selu"
        | "HardSigmoid"
        | "HardSwish"
        | "Softmax"
        | "LogSoftmax"
        | "Identity"
        | "Dropout"
        | "Neg"
        | "Abs"
        | "Exp"
        | "Log"
        | "Sqrt"
        | "Reciprocal"
        | "Cast"
        | "Floor"
        | "Ceil"
        | "Round"
        | "Sign"
        | "Erf"
        | "Not"
        | "BatchNormalization"
        | "InstanceNormalization"
        | "LRN"
        | "Conv"
        | "ConvTranspose"
        | "MaxPool"
        | "AveragePool"
        | "LpPool"
        | "GlobalAveragePool"
        | "GlobalMaxPool"
        | "GlobalLpPool"
        | "Pad"
        | "Transpose"
        | "Slice"
        | "Split"
        | "Concat"
        | "Resize"
        | "Upsample"
        | "DepthToSpace"
        | "SpaceToDepth"
        | "Tile"
        | "CumSum"
        | "LayerNormalization"
        | "Softplus"
        | "Mish"
        | "Gelu"
        | "Shrink" => first,
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "Mean" | "Equal"
        | "Greater" | "Less" | "And" | "Or" | "Xor" | "Where" | "PRelu" | "Mod" => r
            .iter()
            .copied()
            .collect::<Option<Vec<usize>>>()?
            .into_iter()
            .max(),
        "Flatten" | "Gemm" => Some(2),
        "Shape" => Some(1),
        "Size" => Some(0),
        "MatMul" => match (first?, r.get(1).copied().flatten()?) {
            (1, 1) => Some(0),
            (1, b) => Some(b - 1),
            (a, 1) => Some(a - 1),
            (a, b) => Some(a.max(b)),
        },
        "Reshape" => node.input.get(1).and_then(|n| length_of(graph, n)),
        "ConstantOfShape" => node
            .input
            .first()
            .and_then(|n| int_values(graph, n))
            .map(|v| v.len()),
        "Expand" => {
            let target = node.input.get(1).and_then(|n| length_of(graph, n))?;
            Some(first?.max(target))
        }
        "Unsqueeze" => Some(first? + axes_len()?),
        "Squeeze" => first?.checked_sub(axes_len()?),
        "Gather" => (first? + r.get(1).copied().flatten()?).checked_sub(1),
        op if op.starts_with("Reduce") => {
            if keepdims {
                first
            } else {
                match axes_len() {
                    Some(n) => first?.checked_sub(n),
                    None => Some(0),
                }
            }
        }
        "ArgMax" | "ArgMin" => {
            if keepdims {
                first
            } else {
                first?.checked_sub(1)
            }
        }
        "Constant" => attr(node, "value")
            .and_then(|a| a.t.as_ref())
            .map(|t| t.dims.len()),
        _ => None,
    }
}

/// A Transpose's `perm` must name each axis once: tract panics on an axis past the end
/// (`[0, 1, 3, 9]`) and allocates without bound on a repeated one (`[0, 1, 3, 3]`) while it
/// optimises the graph. Its length against the input's rank is left to tract, which answers
/// that with an error.
fn check_permutation(node: &pb::NodeProto) -> Result<(), String> {
    let Some(perm) = attr(node, "perm").map(|a| &a.ints) else {
        return Ok(());
    };
    let len = perm.len();
    let mut seen = vec![false; len];
    for &axis in perm {
        match usize::try_from(axis).ok().filter(|&a| a < len) {
            Some(a) if !seen[a] => seen[a] = true,
            _ => {
                return Err(format!(
                    "node {:?} (Transpose) has perm {perm:?}, which is not a permutation of \
                     0..{len}",
                    node.name
                ))
            }
        }
    }
    Ok(())
}

/// Why the graph cannot go to tract, if it cannot: an image operator given a tensor of too
/// low a rank, or a transpose whose permutation is not one. `input_rank` is the rank of an input shape given on the command line.
pub fn check(
    graph: &pb::GraphProto,
    input_rank: Option<usize>,
) -> Result<(), crate::error::BadInput> {
    let mut ranks: HashMap<&str, BTreeSet<usize>> = HashMap::new();
    let initializers: BTreeSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    for t in &graph.initializer {
        ranks.entry(&t.name).or_default().insert(t.dims.len());
    }
    for (i, v) in graph.input.iter().enumerate() {
        let given = (i == 0 && !initializers.contains(v.name.as_str()))
            .then_some(input_rank)
            .flatten();
        if let Some(rank) = given.or_else(|| rank_of_value_info(v)) {
            ranks.entry(&v.name).or_default().insert(rank);
        }
    }
    for v in graph.value_info.iter().chain(&graph.output) {
        if let Some(rank) = rank_of_value_info(v) {
            ranks.entry(&v.name).or_default().insert(rank);
        }
    }
    // Files list nodes in order, but a malformed one may not: passes until nothing changes.
    for _ in 0..graph.node.len().min(64) + 1 {
        let mut changed = false;
        for node in &graph.node {
            let inputs: Vec<Option<usize>> = node
                .input
                .iter()
                .map(|n| ranks.get(n.as_str()).and_then(|s| s.iter().next().copied()))
                .collect();
            if let Some(rank) = output_rank(graph, node, &inputs) {
                let outputs = match node.op_type.as_str() {
                    "Split" => node.output.len(),
                    _ => 1,
                };
                for out in node.output.iter().take(outputs) {
                    changed |= ranks.entry(out).or_default().insert(rank);
                }
            }
        }
        if !changed {
            break;
        }
    }
    for node in &graph.node {
        if node.op_type == "Transpose" {
            check_permutation(node)?;
        }
        let Some((least, indexed)) = needs(&node.op_type) else {
            continue;
        };
        for &i in indexed {
            let Some(name) = node.input.get(i) else {
                continue;
            };
            if let Some(&rank) = ranks.get(name.as_str()).and_then(|s| s.iter().next()) {
                if rank < least {
                    return Err(crate::error::BadInput::from(format!(
                        "node {:?} ({}) needs a tensor of rank {least} or more as input {i}, \
                         but {name:?} has rank {rank}",
                        node.name, node.op_type
                    )));
                }
            }
        }
    }
    Ok(())
}

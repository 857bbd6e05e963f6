//! The check made of an ONNX file before an engine is asked to load it: that no node of it is
//! one no engine can run — inputs whose shapes cannot be broadcast together, a tensor or a
//! cost past any machine's. tract's shape inference does
//! not always stop on such a node: five operands of a `Min` that do not broadcast kept it
//! unifying shapes for minutes while its memory grew, and a `Tile` whose output wraps 2^64
//! elements made an empty tensor that then "ran". edgeprof's own walk of the graph finds them
//! in milliseconds and names the node.

use super::*;

/// Whether a walk's reason says the node cannot run at all.
fn impossible(reason: &str) -> bool {
    // Not an operator the walk does not know, nor a shape known only at run time: an engine
    // may well run those.
    impossible::ALL.iter().any(|p| reason.contains(p))
}

/// A node no engine can run: its name (control characters shown as `?`), operator and why.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("node {node} ({op}) cannot run: {reason}")]
pub struct Unrunnable {
    pub node: String,
    pub op: String,
    pub reason: String,
}

/// The most memory one node of a model holds at once by edgeprof's own walk — its inputs and
/// outputs, both alive while it runs — so that an engine can refuse a model past the memory it
/// has before its own shape inference spends a minute typing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Heaviest {
    /// The node (control characters shown as `?`).
    pub node: String,
    pub bytes: u64,
}

/// Refuses a decoded model with its inputs bound as `inputs` when one of its nodes cannot run
/// (see the module's note), naming the first such node; else the node that holds the most
/// memory at once, when the walk sized any.
pub(crate) fn check_runnable(
    proto: &pb::ModelProto,
    inputs: &[BoundInput],
) -> Result<Option<Heaviest>, Unrunnable> {
    let Some(graph) = proto.graph.as_ref() else {
        return Ok(None);
    };
    let walked = walk_bound(proto, graph, inputs.to_vec());
    let bad = walked.walk.nodes.iter().find_map(|n| {
        let reason = n.not_costed.as_deref()?;
        (n.after.is_none() && impossible(reason)).then_some((n, reason))
    });
    if let Some((node, reason)) = bad {
        return Err(Unrunnable {
            node: printable(&node.name),
            op: node.op.clone(),
            reason: reason.to_string(),
        });
    }
    Ok(walked
        .walk
        .nodes
        .iter()
        .map(|n| (n, n.input_bytes.saturating_add(n.output_bytes)))
        .filter(|&(_, bytes)| bytes > 0)
        .max_by_key(|&(_, bytes)| bytes)
        .map(|(n, bytes)| Heaviest {
            node: printable(&n.name),
            bytes,
        }))
}

/// A node's name with its control characters shown as `?`.
fn printable(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reasons_of_a_node_that_cannot_run_are_told_from_the_others() {
        assert!(impossible(
            "shapes 1x3x8x8 and 4 cannot be broadcast together"
        ));
        assert!(impossible(
            "a tensor of shape 4294967296x4294967296 is larger than any model's (over 2^44 \
             elements)"
        ));
        assert!(!impossible(
            "its target shape is known only when the model runs, so its output shape is too"
        ));
        assert!(!impossible("its input's shape is unknown (since node a)"));
        // Found by the long fuzz campaign: tract ran a Tile of repeats
        // [-1099511627776, 2147483647, 22, 3] for 43 s (a debug build) to no end.
        assert!(impossible(
            "repeats [-1099511627776, 2147483647, 22, 3] do not fit a rank-4 input"
        ));
    }
}

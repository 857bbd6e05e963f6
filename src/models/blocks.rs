//! A model cut into blocks: runs of consecutive layers (or ONNX nodes) with exactly one tensor
//! crossing each cut, the pieces a placement can put on different units.

use crate::models::graph::{Model, ValueId};
use crate::models::onnx_graph::Chain;
use serde::{Deserialize, Serialize};

/// A run of consecutive layers with one tensor in and one out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub name: String,
    /// Layer indices `first..end`.
    pub first: usize,
    pub end: usize,
    pub out_bytes: u64,
}

/// Cuts the model's layers where exactly one tensor crosses: after layer i when no later layer
/// reads any value other than layer i's output from before the cut. Each piece is a block; a
/// chain of them can be placed exactly. Blocks are then merged up to `max_blocks` (by joining
/// the neighbours with the fewest layers), keeping the search and the split plans small.
pub fn blocks(model: &Model, max_blocks: usize) -> Vec<Block> {
    let n = model.layers.len();
    // The last layer that reads each value (the model's output counts as read at the end).
    let mut last_read = vec![0usize; n + 1];
    let slot = |v: ValueId| match v {
        ValueId::Input => 0,
        ValueId::Layer(i) => i + 1,
    };
    for (i, layer) in model.layers.iter().enumerate() {
        for &v in &layer.inputs {
            last_read[slot(v)] = last_read[slot(v)].max(i);
        }
    }
    last_read[slot(model.output)] = n;
    let mut cuts = Vec::new();
    for i in 0..n.saturating_sub(1) {
        // Values made at or before layer i (and the input) must not be read after i, except
        // layer i's own output.
        let crossing = (0..=i + 1)
            .filter(|&s| s != i + 1 && last_read[s] > i)
            .count();
        if crossing == 0 && last_read[i + 1] > i {
            cuts.push(i + 1);
        }
    }
    let mut bounds = vec![0];
    bounds.extend(cuts);
    bounds.push(n);
    merged(&bounds, max_blocks)
        .into_iter()
        .map(|(first, end)| {
            let shape = &model.layers[end - 1].output_shape;
            let elements: u64 = shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
            Block {
                name: span_name(
                    &model.layers[first].name,
                    &model.layers[end - 1].name,
                    first,
                    end,
                ),
                first,
                end,
                out_bytes: elements * crate::models::cost::BYTES_PER_ELEMENT,
            }
        })
        .collect()
}

/// The blocks of an ONNX file's graph: its nodes cut where one tensor crosses (see
/// [`Chain`]), merged up to `max_blocks` as [`blocks`] merges a zoo model's.
pub fn file_blocks(chain: &Chain, max_blocks: usize) -> Vec<Block> {
    let n = chain.len();
    let mut bounds = vec![0];
    bounds.extend(chain.cuts().iter().map(|c| c.position));
    bounds.push(n);
    merged(&bounds, max_blocks)
        .into_iter()
        .map(|(first, end)| Block {
            name: span_name(chain.name(first), chain.name(end - 1), first, end),
            first,
            end,
            out_bytes: if end == n {
                chain.output_bytes()
            } else {
                chain
                    .cuts()
                    .iter()
                    .find(|c| c.position == end)
                    .map_or(0, |c| c.bytes())
            },
        })
        .collect()
}

fn span_name(first_name: &str, last_name: &str, first: usize, end: usize) -> String {
    if end - first == 1 {
        first_name.to_string()
    } else {
        format!("{first_name}..{last_name}")
    }
}

/// The pieces between consecutive `bounds`, joined until at most `max_blocks` are left (the
/// adjacent pair with the fewest layers or nodes first).
fn merged(bounds: &[usize], max_blocks: usize) -> Vec<(usize, usize)> {
    let mut pieces: Vec<(usize, usize)> = bounds
        .windows(2)
        .filter(|w| w[0] < w[1])
        .map(|w| (w[0], w[1]))
        .collect();
    while pieces.len() > max_blocks.max(1) {
        let k = (0..pieces.len() - 1)
            .min_by_key(|&k| pieces[k + 1].1 - pieces[k].0)
            .unwrap_or(0);
        pieces[k].1 = pieces[k + 1].1;
        pieces.remove(k + 1);
    }
    pieces
}

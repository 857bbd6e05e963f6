//! The nodes that view or regroup a tensor's channels and shape (squeeze, concatenation,
//! reshape, slice, split), read into layers, or folded when they work on constants.

use super::nodes::{count, first, Res};
use super::{attr_int, attr_ints, Reader, Val};
use crate::models::graph::{Op, ValueId};
use tract_onnx::pb;

impl Reader {
    pub(super) fn squeeze(
        &mut self,
        node: &pb::NodeProto,
        layer: &str,
        unsqueeze: bool,
    ) -> Res<Val> {
        let axes: Vec<i64> = match self.opt_consts(node, 1)? {
            Some(a) => a.iter().map(|&v| v as i64).collect(),
            None => attr_ints(node, "axes").unwrap_or_default(),
        };
        match self.val(first(node)?)?.clone() {
            Val::Const { dims, data } => {
                let mut dims = dims;
                if unsqueeze {
                    let rank = (dims.len() + axes.len()) as i64;
                    let mut at: Vec<usize> = axes
                        .iter()
                        .map(|&a| (if a < 0 { a + rank } else { a }).max(0) as usize)
                        .collect();
                    at.sort_unstable();
                    for a in at {
                        dims.insert(a.min(dims.len()), 1);
                    }
                } else {
                    let rank = dims.len() as i64;
                    let drop: Vec<usize> = axes
                        .iter()
                        .map(|&a| (if a < 0 { a + rank } else { a }).max(0) as usize)
                        .collect();
                    dims = dims
                        .iter()
                        .enumerate()
                        .filter(|(i, &d)| !(d == 1 && (drop.is_empty() || drop.contains(i))))
                        .map(|(_, &d)| d)
                        .collect();
                }
                Ok(Val::Const { dims, data })
            }
            Val::Tensor(x) => {
                let shape = self.shape(x);
                let squeezes_map = !unsqueeze
                    && shape.len() == 4
                    && shape[2] == 1
                    && shape[3] == 1
                    && (axes.is_empty() || {
                        let mut a: Vec<i64> = axes.iter().map(|&a| a.rem_euclid(4)).collect();
                        a.sort_unstable();
                        a == [2, 3]
                    });
                if squeezes_map {
                    Ok(Val::Tensor(self.layer(layer, Op::Flatten, &[x])?))
                } else {
                    Err(format!(
                        "{} axes {axes:?} of a tensor {shape:?}",
                        if unsqueeze { "adds" } else { "drops" }
                    ))
                }
            }
            _ => Err("a half-read reshape is squeezed".to_string()),
        }
    }

    pub(super) fn concat(&mut self, node: &pb::NodeProto, layer: &str) -> Res<Val> {
        let vals: Vec<Val> = node
            .input
            .iter()
            .map(|n| self.val(n).cloned())
            .collect::<Res<_>>()?;
        if vals.iter().all(|v| matches!(v, Val::Const { .. })) {
            let mut data = Vec::new();
            for n in &node.input {
                data.extend(self.consts(n)?);
            }
            return Ok(Val::Const {
                dims: vec![data.len()],
                data: Some(data),
            });
        }
        let xs: Vec<ValueId> = node
            .input
            .iter()
            .map(|n| self.tensor(n))
            .collect::<Res<_>>()?;
        let rank = xs.first().map_or(0, |x| self.shape(*x).len()) as i64;
        let axis = attr_int(node, "axis", 1);
        if (if axis < 0 { axis + rank } else { axis }) != 1 {
            return Err(format!(
                "a concatenation along axis {axis}, not the channels"
            ));
        }
        match xs[..] {
            [x] => Ok(Val::Tensor(x)),
            _ => Ok(Val::Tensor(self.layer(layer, Op::Concat, &xs)?)),
        }
    }

    pub(super) fn reshape(&mut self, node: &pb::NodeProto, layer: &str) -> Res<Val> {
        let target = self.consts(node.input.get(1).ok_or("it has no shape input")?)?;
        let data = self.val(first(node)?)?.clone();
        let from: Vec<usize> = match &data {
            Val::Tensor(x) => self.shape(*x),
            Val::Const { dims, .. } => dims.clone(),
            Val::Grouped { x, groups, swapped } => {
                let s = self.shape(*x);
                let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
                if *swapped {
                    vec![n, c / groups, *groups, h, w]
                } else {
                    vec![n, *groups, c / groups, h, w]
                }
            }
            Val::ColsPooled { .. } => return Err("a reshape of a half-read pooling".to_string()),
        };
        let allow_zero = attr_int(node, "allowzero", 0) != 0;
        let mut dims: Vec<usize> = Vec::with_capacity(target.len());
        let mut open = None;
        for (i, &t) in target.iter().enumerate() {
            match t as i64 {
                -1 => {
                    open = Some(i);
                    dims.push(1);
                }
                0 if !allow_zero => dims.push(from.get(i).copied().ok_or("a 0 past the rank")?),
                t if t >= 0 => dims.push(t as usize),
                t => return Err(format!("a shape entry {t}")),
            }
        }
        let total = count(&from);
        if let Some(i) = open {
            let known = count(&dims).max(1);
            dims[i] = total / known;
        }
        if count(&dims) != total {
            let target: Vec<i64> = target.iter().map(|&t| t as i64).collect();
            return Err(format!(
                "a reshape of {from:?} to {target:?}: the file fixes a size it is not read at"
            ));
        }
        match data {
            Val::Const { data, .. } => Ok(Val::Const { dims, data }),
            Val::Tensor(x) => {
                if dims == from {
                    return Ok(Val::Tensor(x));
                }
                match (from.len(), dims.len()) {
                    (4, 2) if dims[0] == from[0] => {
                        Ok(Val::Tensor(self.layer(layer, Op::Flatten, &[x])?))
                    }
                    (2, 2) if dims[0] == from[0] => Ok(Val::Tensor(x)),
                    (4, 5) if dims[0] == from[0] && dims[3..] == from[2..] && dims[1] > 0 => {
                        Ok(Val::Grouped {
                            x,
                            groups: dims[1],
                            swapped: false,
                        })
                    }
                    _ => Err(format!("a reshape of {from:?} to {dims:?}")),
                }
            }
            Val::Grouped {
                x,
                groups,
                swapped: true,
            } if dims == self.shape(x) => Ok(Val::Tensor(self.layer(
                layer,
                Op::ChannelShuffle { groups },
                &[x],
            )?)),
            _ => Err(format!(
                "a reshape to {dims:?} that is not a channel shuffle's"
            )),
        }
    }

    /// Channels `start..end` of a 4-D tensor on axis 1 (or -3), as ONNX's bounds are clamped.
    fn channel_range(&self, x: ValueId, axis: i64, start: f64, end: f64) -> Res<(usize, usize)> {
        let shape = self.shape(x);
        let rank = shape.len() as i64;
        if shape.len() != 4 || (if axis < 0 { axis + rank } else { axis }) != 1 {
            return Err(format!(
                "a slice along axis {axis} of {shape:?}, not the channels"
            ));
        }
        let c = shape[1] as f64;
        let clamp = |v: f64| (if v < 0.0 { v + c } else { v }).clamp(0.0, c) as usize;
        Ok((clamp(start), clamp(end)))
    }

    pub(super) fn slice(&mut self, node: &pb::NodeProto, layer: &str) -> Res<Val> {
        let from_attr =
            |name: &str| attr_ints(node, name).map(|v| v.iter().map(|&x| x as f64).collect());
        let arg = |i: usize, name: &str| -> Res<Option<Vec<f64>>> {
            Ok(self.opt_consts(node, i)?.or_else(|| from_attr(name)))
        };
        let starts = arg(1, "starts")?.ok_or("it has no starts")?;
        let ends = arg(2, "ends")?.ok_or("it has no ends")?;
        let axes = arg(3, "axes")?;
        if arg(4, "steps")?.is_some_and(|s| s.iter().any(|&v| v != 1.0)) {
            return Err("a slice with steps".to_string());
        }
        match self.val(first(node)?)?.clone() {
            Val::Const { data: Some(d), .. } if starts.len() == 1 => {
                let n = d.len() as f64;
                let at = |v: f64| (if v < 0.0 { v + n } else { v }).clamp(0.0, n) as usize;
                let picked = d[at(starts[0])..at(ends[0]).max(at(starts[0]))].to_vec();
                Ok(Val::Const {
                    dims: vec![picked.len()],
                    data: Some(picked),
                })
            }
            Val::Tensor(x) if starts.len() == 1 && ends.len() == 1 => {
                let axis = axes
                    .as_ref()
                    .and_then(|a| a.first().copied())
                    .unwrap_or(0.0) as i64;
                let (start, end) = self.channel_range(x, axis, starts[0], ends[0])?;
                if start == 0 && end == self.shape(x)[1] {
                    return Ok(Val::Tensor(x));
                }
                Ok(Val::Tensor(self.layer(
                    layer,
                    Op::ChannelSlice { start, end },
                    &[x],
                )?))
            }
            _ => Err("a slice along several axes, or of a half-read reshape".to_string()),
        }
    }

    pub(super) fn split(&mut self, node: &pb::NodeProto, layer: &str) -> Res<()> {
        let x = self.tensor(first(node)?)?;
        let channels = self.shape(x).get(1).copied().unwrap_or(0);
        let parts = node.output.len().max(1);
        let sizes: Vec<usize> = match self.opt_consts(node, 1)? {
            Some(s) => s.iter().map(|&v| v.max(0.0) as usize).collect(),
            None => match attr_ints(node, "split") {
                Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
                None => {
                    let each = channels.div_ceil(parts);
                    (0..parts)
                        .map(|i| each.min(channels.saturating_sub(i * each)))
                        .collect()
                }
            },
        };
        let total = sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
        if sizes.len() != node.output.len() || total != Some(channels) {
            return Err(format!("splits {sizes:?} of {channels} channels"));
        }
        let mut start = 0;
        for (k, size) in sizes.iter().enumerate() {
            let axis = attr_int(node, "axis", 0);
            let (s, e) = self.channel_range(x, axis, start as f64, (start + size) as f64)?;
            let name = if k == 0 {
                layer.to_string()
            } else {
                format!("{layer}.{k}")
            };
            let v = self.layer(&name, Op::ChannelSlice { start: s, end: e }, &[x])?;
            self.set(node, k, Val::Tensor(v));
            start += size;
        }
        Ok(())
    }
}

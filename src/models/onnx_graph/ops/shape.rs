//! Operators that reshape, move or pick data: their shapes (and small values) only.

use super::*;

pub(super) fn reshape(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let target = ints(input(ins, 1)?, "target shape")?;
    let allowzero = ai(node, "allowzero", 0) != 0;
    let mut shape = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            0 if !allowzero => shape.push(
                *x.shape
                    .get(i)
                    .ok_or_else(|| format!("a 0 in {target:?} copies no dimension"))?,
            ),
            d if d >= 0 => shape.push(d as usize),
            _ => return Err(format!("a reshape to {target:?} is not a shape")),
        }
    }
    let total = n(&x.shape);
    if let Some(i) = infer {
        let rest = n(&shape);
        if rest == 0 || !total.is_multiple_of(rest) {
            return Err(format!(
                "a reshape of {} to {target:?} does not divide",
                show_shape(&x.shape)
            ));
        }
        shape[i] = (total / rest) as usize;
    }
    if n(&shape) != total {
        return Err(format!(
            "a reshape of {} to {target:?} changes the element count",
            show_shape(&x.shape)
        ));
    }
    Ok(view(with_value(x.elem, shape, x.value.clone())?))
}

pub(super) fn axes_of(
    node: &pb::NodeProto,
    opset: i64,
    ins: &[Option<&T>],
    since: i64,
) -> R<Option<Vec<i64>>> {
    if opset >= since {
        match opt(ins, 1) {
            Some(a) => Ok(Some(ints(a, "axes")?)),
            None => Ok(aints(node, "axes")),
        }
    } else {
        Ok(aints(node, "axes"))
    }
}

pub(super) fn squeeze(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let shape: Vec<usize> = match axes_of(node, opset, ins, 13)? {
        Some(axes) => {
            let mut drop = Vec::new();
            for a in axes {
                let a = axis(a, rank)?;
                if x.shape[a] != 1 {
                    return Err(format!(
                        "axis {a} of {} is not 1 and cannot be squeezed",
                        show_shape(&x.shape)
                    ));
                }
                drop.push(a);
            }
            x.shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(_, &d)| d)
                .collect()
        }
        None => x.shape.iter().copied().filter(|&d| d != 1).collect(),
    };
    Ok(view(with_value(x.elem, shape, x.value.clone())?))
}

pub(super) fn unsqueeze(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let axes = axes_of(node, opset, ins, 13)?.ok_or("it names no axes")?;
    let rank = x.shape.len() + axes.len();
    let mut pos: Vec<usize> = axes.iter().map(|&a| axis(a, rank)).collect::<R<Vec<_>>>()?;
    pos.sort_unstable();
    pos.dedup();
    if pos.len() != axes.len() {
        return Err(format!("axes {axes:?} repeat"));
    }
    let mut shape = Vec::with_capacity(rank);
    let mut rest = x.shape.iter();
    for i in 0..rank {
        if pos.contains(&i) {
            shape.push(1);
        } else {
            shape.push(*rest.next().ok_or("its axes do not fit")?);
        }
    }
    Ok(view(with_value(x.elem, shape, x.value.clone())?))
}

pub(super) fn transpose(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match aints(node, "perm") {
        Some(p) => p.iter().map(|&a| axis(a, rank)).collect::<R<_>>()?,
        None => (0..rank).rev().collect(),
    };
    let mut seen = perm.clone();
    seen.sort_unstable();
    if seen != (0..rank).collect::<Vec<_>>() {
        return Err(format!("perm {perm:?} is not a permutation of {rank} axes"));
    }
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    // Small values are moved as they are (PyTorch writes pads reversed this way).
    let value = x.value.as_ref().map(|v| {
        let strides = strides_of(&x.shape);
        gather_positions(&shape, |pos| {
            pos.iter()
                .zip(&perm)
                .map(|(&p, &axis)| p * strides[axis])
                .sum()
        })
        .iter()
        .map(|&i| v[i])
        .collect()
    });
    Ok(one(with_value(x.elem, shape, value)?, 0, 0))
}

pub(super) fn concat(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let xs: Vec<&T> = ins.iter().flatten().copied().collect();
    let first = xs.first().ok_or("it has no inputs")?;
    let rank = first.shape.len();
    let a = axis(ai(node, "axis", 0), rank.max(1))?;
    let mut shape = first.shape.clone();
    if rank == 0 {
        return Err("it concatenates scalars".into());
    }
    shape[a] = 0;
    for x in &xs {
        if x.shape.len() != rank
            || x.shape
                .iter()
                .enumerate()
                .any(|(i, &d)| i != a && d != first.shape[i])
        {
            return Err(format!(
                "inputs {} do not match beside axis {a}",
                xs.iter()
                    .map(|x| show_shape(&x.shape))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        shape[a] += x.shape[a];
    }
    let value = if xs.iter().all(|x| x.value.is_some()) && n(&shape) as usize <= SMALL {
        let outer = n(&shape[..a]) as usize;
        let inner = n(&shape[a + 1..]) as usize;
        let mut v = Vec::with_capacity(n(&shape) as usize);
        for o in 0..outer {
            for x in &xs {
                let block = x.shape[a] * inner;
                if let Some(xv) = &x.value {
                    v.extend_from_slice(&xv[o * block..(o + 1) * block]);
                }
            }
        }
        Some(v)
    } else {
        None
    };
    Ok(one(with_value(first.elem, shape, value)?, 0, 0))
}

pub(super) fn split(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let a = axis(ai(node, "axis", 0), x.shape.len())?;
    let parts = node.output.len().max(1);
    let given = if opset >= 13 {
        opt(ins, 1).map(|s| ints(s, "split sizes")).transpose()?
    } else {
        aints(node, "split")
    };
    let len = x.shape[a];
    let sizes: Vec<usize> = match given {
        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
        None => {
            let chunk = len.div_ceil(parts);
            (0..parts)
                .map(|i| chunk.min(len.saturating_sub(i * chunk)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != len || sizes.len() != parts {
        return Err(format!(
            "split sizes {sizes:?} do not cover axis {a} of {}",
            show_shape(&x.shape)
        ));
    }
    let mut outputs = Vec::new();
    let mut start = 0;
    for s in sizes {
        let mut shape = x.shape.clone();
        shape[a] = s;
        let value = x
            .value
            .as_ref()
            .filter(|_| x.shape.len() == 1)
            .map(|v| v[start..start + s].to_vec());
        outputs.push(with_value(x.elem, shape, value)?);
        start += s;
    }
    Ok(Out {
        outputs,
        macs: 0,
        flops: 0,
        view: true,
    })
}

pub(super) fn slice(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let (starts, ends, axes, steps) = if opset < 10 {
        (
            aints(node, "starts").ok_or("it has no starts")?,
            aints(node, "ends").ok_or("it has no ends")?,
            aints(node, "axes"),
            None,
        )
    } else {
        (
            ints(input(ins, 1)?, "starts")?,
            ints(input(ins, 2)?, "ends")?,
            opt(ins, 3).map(|a| ints(a, "axes")).transpose()?,
            opt(ins, 4).map(|s| ints(s, "steps")).transpose()?,
        )
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<R<_>>()?,
        None => (0..starts.len()).collect(),
    };
    if ends.len() != starts.len() || axes.len() != starts.len() {
        return Err("its starts, ends and axes differ in length".into());
    }
    let mut shape = x.shape.clone();
    let mut ranges: Vec<(i64, i64, i64)> = x.shape.iter().map(|&d| (0, d as i64, 1)).collect();
    for (k, &a) in axes.iter().enumerate() {
        let d = x.shape[a] as i64;
        let step = steps.as_ref().and_then(|s| s.get(k).copied()).unwrap_or(1);
        if step == 0 {
            return Err("a step of 0".into());
        }
        let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (s, e) = (fix(starts[k]), fix(ends[k]));
        let (s, e, count) = if d == 0 {
            (0, 0, 0)
        } else if step > 0 {
            let s = s.clamp(0, d);
            let e = e.clamp(0, d);
            let count = if e > s {
                ((e - s) as u64).div_ceil(step.unsigned_abs())
            } else {
                0
            };
            (s, e, count as i64)
        } else {
            let s = s.clamp(0, d - 1);
            let e = e.clamp(-1, d - 1);
            let count = if s > e {
                ((s - e) as u64).div_ceil(step.unsigned_abs())
            } else {
                0
            };
            (s, e, count as i64)
        };
        shape[a] = count as usize;
        ranges[a] = (s, e, step);
    }
    let value = x.value.as_ref().and_then(|v| {
        let strides = strides_of(&x.shape);
        gather_positions(&shape, |pos| {
            pos.iter()
                .enumerate()
                .map(|(a, &p)| {
                    let (s, _, step) = ranges[a];
                    (s + p as i64 * step) as usize * strides[a]
                })
                .sum()
        })
        .iter()
        .map(|&i| v.get(i).copied())
        .collect()
    });
    Ok(view(with_value(x.elem, shape, value)?))
}

pub(super) fn gather(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let idx = input(ins, 1)?;
    let a = axis(ai(node, "axis", 0), x.shape.len())?;
    let mut shape = x.shape[..a].to_vec();
    shape.extend(&idx.shape);
    shape.extend(&x.shape[a + 1..]);
    let value = match (&x.value, &idx.value) {
        (Some(v), Some(iv)) if n(&shape) as usize <= SMALL => {
            let outer = n(&x.shape[..a]) as usize;
            let inner = n(&x.shape[a + 1..]) as usize;
            let len = x.shape[a] as i64;
            let mut out = Vec::with_capacity(n(&shape) as usize);
            for o in 0..outer {
                for &i in iv {
                    let i = i as i64;
                    let i = if i < 0 { i + len } else { i };
                    if !(0..len).contains(&i) {
                        return Err(format!("index {i} is outside 0..{len}"));
                    }
                    let base = (o * len as usize + i as usize) * inner;
                    out.extend_from_slice(&v[base..base + inner]);
                }
            }
            Some(out)
        }
        _ => None,
    };
    Ok(one(with_value(x.elem, shape, value)?, 0, 0))
}

pub(super) fn gather_nd(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let idx = input(ins, 1)?;
    let b = ai(node, "batch_dims", 0).max(0) as usize;
    let last = *idx.shape.last().ok_or("its indices are a scalar")?;
    if b + last > x.shape.len() {
        return Err("its indices reach past the data's rank".into());
    }
    let mut shape = idx.shape[..idx.shape.len() - 1].to_vec();
    shape.extend(&x.shape[b + last..]);
    Ok(one(t(x.elem, shape)?, 0, 0))
}

pub(super) fn pad(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let pads = if opset >= 11 {
        ints(input(ins, 1)?, "pads")?
    } else {
        aints(node, "pads").ok_or("it has no pads")?
    };
    let axes: Vec<usize> = match opt(ins, 3) {
        Some(a) => ints(a, "axes")?
            .iter()
            .map(|&v| axis(v, rank))
            .collect::<R<_>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!("{} pads for {} axes", pads.len(), axes.len()));
    }
    let mut shape = x.shape.clone();
    for (k, &a) in axes.iter().enumerate() {
        let d = shape[a] as i128 + pads[k] as i128 + pads[k + axes.len()] as i128;
        if d < 0 || d > super::super::MAX_ELEMENTS as i128 {
            return Err(format!("pads {pads:?} leave a size out of range"));
        }
        shape[a] = d as usize;
    }
    Ok(one(t(x.elem, shape)?, 0, 0))
}

//! Network operators: convolutions, poolings, matrix products, reductions, resizes,
//! recurrences, transforms and onnxruntime's contrib operators.

use super::*;

/// Spatial output sizes of a convolution or pooling window.
pub(super) fn windows(
    node: &pb::NodeProto,
    spatial: &[usize],
    kernel: &[usize],
    ceil: bool,
) -> R<Vec<usize>> {
    let s = spatial.len();
    let strides = aints(node, "strides").unwrap_or_else(|| vec![1; s]);
    let dil = aints(node, "dilations").unwrap_or_else(|| vec![1; s]);
    let pads = aints(node, "pads").unwrap_or_else(|| vec![0; 2 * s]);
    let auto = astr(node, "auto_pad", "NOTSET");
    if !matches!(
        auto.as_str(),
        "NOTSET" | "SAME_UPPER" | "SAME_LOWER" | "VALID" | ""
    ) {
        return Err(format!("auto_pad {auto:?} is none of ONNX's"));
    }
    if strides.len() != s || dil.len() != s || pads.len() != 2 * s || kernel.len() != s {
        return Err(format!(
            "its strides, dilations, pads or kernel do not fit {s} spatial axes"
        ));
    }
    let mut out = Vec::with_capacity(s);
    for i in 0..s {
        let (st, d) = (strides[i], dil[i]);
        if st <= 0 || d <= 0 {
            return Err("a stride or dilation below 1".into());
        }
        let (st, d) = (st as usize, d as usize);
        let span = times(kernel[i].max(1) - 1, d)? + 1;
        let len = spatial[i];
        let o = match auto.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => len.div_ceil(st),
            "VALID" => {
                if len < span {
                    return Err(format!("a window of {span} does not fit {len}"));
                }
                (len - span) / st + 1
            }
            _ => {
                let (pb, pe) = (pads[i], pads[i + s]);
                if pb < 0 || pe < 0 {
                    return Err("negative pads".into());
                }
                let padded = len
                    .checked_add(pb as usize)
                    .and_then(|v| v.checked_add(pe as usize))
                    .ok_or("its pads overflow")?;
                if padded < span {
                    return Err(format!("a window of {span} does not fit {padded}"));
                }
                if ceil {
                    let mut o = (padded - span).div_ceil(st) + 1;
                    if (o - 1).saturating_mul(st) >= len + pb as usize {
                        o -= 1;
                    }
                    o
                } else {
                    (padded - span) / st + 1
                }
            }
        };
        out.push(o);
    }
    Ok(out)
}

pub(super) fn conv(
    node: &pb::NodeProto,
    ins: &[Option<&T>],
    w_at: usize,
    x_at: usize,
    b_at: usize,
) -> R<Out> {
    let x = input(ins, x_at)?;
    let w = input(ins, w_at)?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return Err(format!(
            "input {} and weights {} are not N×C×… and M×C/g×…",
            show_shape(&x.shape),
            show_shape(&w.shape)
        ));
    }
    let group = ai(node, "group", 1);
    if group < 1 {
        return Err(format!("a group of {group}"));
    }
    let group = group as usize;
    let (nb, c) = (x.shape[0], x.shape[1]);
    let m = w.shape[0];
    if !c.is_multiple_of(group) || !m.is_multiple_of(group) || times(w.shape[1], group)? != c {
        return Err(format!(
            "{c} input channels in {group} groups do not fit weights {}",
            show_shape(&w.shape)
        ));
    }
    let kernel: Vec<usize> = w.shape[2..].to_vec();
    if let Some(k) = aints(node, "kernel_shape") {
        if k.iter().map(|&v| v as usize).ne(kernel.iter().copied()) {
            return Err(format!(
                "kernel_shape {k:?} contradicts its weights {}",
                show_shape(&w.shape)
            ));
        }
    }
    let spatial = windows(node, &x.shape[2..], &kernel, false)?;
    let mut shape = vec![nb, m];
    shape.extend(&spatial);
    let outputs = n(&shape);
    let per = mul(&[w.shape[1] as u64, n(&kernel)])?;
    let macs = mul(&[outputs, per])?;
    let bias = if opt(ins, b_at).is_some() { outputs } else { 0 };
    let flops = add(mul(&[macs, 2])?, bias)?;
    let elem = if node.op_type == "ConvInteger" {
        D::Int32 as i32
    } else if node.op_type == "QLinearConv" {
        opt(ins, 7).map_or(D::Uint8 as i32, |z| z.elem)
    } else {
        x.elem
    };
    Ok(one(t(elem, shape)?, macs, flops))
}

pub(super) fn conv_transpose(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let w = input(ins, 1)?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return Err("its input and weights are not N×C×… and C×M/g×…".into());
    }
    let s = x.shape.len() - 2;
    let group = ai(node, "group", 1).max(1) as usize;
    if w.shape[0] != x.shape[1] {
        return Err(format!(
            "{} input channels do not fit weights {}",
            x.shape[1],
            show_shape(&w.shape)
        ));
    }
    let m = times(w.shape[1], group)?;
    let kernel: Vec<usize> = w.shape[2..].to_vec();
    let strides = aints(node, "strides").unwrap_or_else(|| vec![1; s]);
    let dil = aints(node, "dilations").unwrap_or_else(|| vec![1; s]);
    let pads = aints(node, "pads").unwrap_or_else(|| vec![0; 2 * s]);
    let extra = aints(node, "output_padding").unwrap_or_else(|| vec![0; s]);
    if strides.len() != s || dil.len() != s || pads.len() != 2 * s || extra.len() != s {
        return Err("its strides, dilations, pads or output padding do not fit".into());
    }
    let spatial: Vec<usize> = match aints(node, "output_shape") {
        Some(o) if o.len() == s => o.iter().map(|&v| v.max(0) as usize).collect(),
        _ => {
            let auto = astr(node, "auto_pad", "NOTSET");
            let mut out = Vec::with_capacity(s);
            for i in 0..s {
                // Attributes may be any 64-bit numbers: computed wide, then checked.
                let len = x.shape[2 + i] as i128;
                let v = if auto.starts_with("SAME") {
                    len * strides[i] as i128
                } else {
                    strides[i] as i128 * (len - 1)
                        + extra[i] as i128
                        + (kernel[i] as i128 - 1) * dil[i] as i128
                        + 1
                        - pads[i] as i128
                        - pads[i + s] as i128
                };
                if v <= 0 || v > super::super::MAX_ELEMENTS as i128 {
                    return Err(format!("its output size {v} is out of range"));
                }
                out.push(v as usize);
            }
            out
        }
    };
    let mut shape = vec![x.shape[0], m];
    shape.extend(&spatial);
    let macs = mul(&[n(&x.shape), w.shape[1] as u64, n(&kernel)])?;
    let bias = if opt(ins, 2).is_some() { n(&shape) } else { 0 };
    let flops = add(mul(&[macs, 2])?, bias)?;
    Ok(one(t(x.elem, shape)?, macs, flops))
}

pub(super) fn matmul(ins: &[Option<&T>], a_at: usize, b_at: usize) -> R<Out> {
    let a = input(ins, a_at)?;
    let b = input(ins, b_at)?;
    let mut sa = a.shape.clone();
    let mut sb = b.shape.clone();
    let (va, vb) = (sa.len() == 1, sb.len() == 1);
    if va {
        sa.insert(0, 1);
    }
    if vb {
        sb.push(1);
    }
    if sa.is_empty() || sb.is_empty() {
        return Err("MatMul of a scalar".into());
    }
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, nn) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if k != k2 {
        return Err(format!(
            "{} × {} do not multiply",
            show_shape(&a.shape),
            show_shape(&b.shape)
        ));
    }
    let batch = broadcast(&[&sa[..sa.len() - 2], &sb[..sb.len() - 2]])?;
    let mut shape = batch.clone();
    if !va {
        shape.push(m);
    }
    if !vb {
        shape.push(nn);
    }
    let macs = mul(&[n(&batch), m as u64, nn as u64, k as u64])?;
    Ok(one(t(a.elem, shape)?, macs, mul(&[macs, 2])?))
}

pub(super) fn gemm(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let a = input(ins, 0)?;
    let b = input(ins, 1)?;
    let ([a0, a1], [b0, b1]) = (&a.shape[..], &b.shape[..]) else {
        return Err(format!(
            "{} and {} are not matrices",
            show_shape(&a.shape),
            show_shape(&b.shape)
        ));
    };
    let (a0, a1, b0, b1) = (*a0, *a1, *b0, *b1);
    let (m, k) = if ai(node, "transA", 0) != 0 {
        (a1, a0)
    } else {
        (a0, a1)
    };
    let (k2, nn) = if ai(node, "transB", 0) != 0 {
        (b1, b0)
    } else {
        (b0, b1)
    };
    if k != k2 {
        return Err(format!("{m}×{k} × {k2}×{nn} do not multiply"));
    }
    let macs = mul(&[m as u64, nn as u64, k as u64])?;
    let c = if opt(ins, 2).is_some() && af(node, "beta", 1.0) != 0.0 {
        mul(&[m as u64, nn as u64])?
    } else {
        0
    };
    Ok(one(
        t(a.elem, vec![m, nn])?,
        macs,
        add(mul(&[macs, 2])?, c)?,
    ))
}

pub(super) fn einsum(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let eq: String = astr(node, "equation", "")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    let xs: Vec<&T> = ins.iter().flatten().copied().collect();
    if terms.len() != xs.len() {
        return Err(format!("equation {eq:?} names {} operands", terms.len()));
    }
    let mut sizes: std::collections::BTreeMap<char, usize> = Default::default();
    let mut ellipsis: Vec<usize> = Vec::new();
    let mut counts: std::collections::HashMap<char, usize> = Default::default();
    for (term, x) in terms.iter().zip(&xs) {
        let labels: Vec<char> = term.replace("...", "").chars().collect();
        let has_ell = term.contains("...");
        let ell = x
            .shape
            .len()
            .checked_sub(labels.len())
            .ok_or_else(|| format!("term {term:?} has more labels than its operand's rank"))?;
        if !has_ell && ell != 0 {
            return Err(format!(
                "term {term:?} does not fit shape {}",
                show_shape(&x.shape)
            ));
        }
        let at = term
            .find("...")
            .map_or(labels.len(), |p| term[..p].chars().count());
        let dims: Vec<usize> = x.shape.clone();
        let ell_dims = &dims[at..at + ell];
        ellipsis = broadcast(&[&ellipsis, ell_dims])?;
        for (i, &l) in labels.iter().enumerate() {
            let d = if i < at { dims[i] } else { dims[i + ell] };
            let e = sizes.entry(l).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && d != *e {
                return Err(format!("label {l} is {e} and {d}"));
            }
            *counts.entry(l).or_default() += 1;
        }
    }
    let out_labels: String = match rhs {
        Some(r) => r,
        None => {
            let once: String = sizes.keys().filter(|l| counts.get(l) == Some(&1)).collect();
            format!("...{once}")
        }
    };
    let mut shape = Vec::new();
    let at = out_labels.find("...");
    for (i, l) in out_labels.replace("...", "").chars().enumerate() {
        if at.is_some_and(|p| out_labels[..p].chars().count() == i) {
            shape.extend(&ellipsis);
        }
        shape.push(
            *sizes
                .get(&l)
                .ok_or_else(|| format!("output label {l} is no input's"))?,
        );
    }
    if at.is_some_and(|p| out_labels[..p].chars().count() == out_labels.replace("...", "").len()) {
        shape.extend(&ellipsis);
    }
    let labels: Vec<u64> = sizes.values().map(|&d| d as u64).collect();
    let space = mul(&[n(&ellipsis), mul(&labels)?])?;
    let (macs, flops) = if xs.len() >= 2 {
        let macs = mul(&[space, xs.len() as u64 - 1])?;
        (macs, mul(&[macs, 2])?)
    } else {
        (0, space.saturating_sub(n(&shape)))
    };
    let elem = xs.first().map_or(F32, |x| x.elem);
    Ok(one(t(elem, shape)?, macs, flops))
}

pub(super) fn pool(node: &pb::NodeProto, op: &str, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    if x.shape.len() < 3 {
        return Err("its input has no spatial axes".into());
    }
    let kernel: Vec<usize> = aints(node, "kernel_shape")
        .ok_or("it has no kernel_shape")?
        .iter()
        .map(|&k| k.max(1) as usize)
        .collect();
    let spatial = windows(node, &x.shape[2..], &kernel, ai(node, "ceil_mode", 0) != 0)?;
    let mut shape = x.shape[..2].to_vec();
    shape.extend(&spatial);
    let window = n(&kernel);
    let per = match op {
        "MaxPool" => window - 1,
        "AveragePool" => window,
        _ => 2 * window,
    };
    let flops = mul(&[n(&shape), per])?;
    let mut out = one(t(x.elem, shape.clone())?, 0, flops);
    if op == "MaxPool" && node.output.len() > 1 {
        out.outputs.push(t(I64, shape)?);
    }
    Ok(out)
}

pub(super) fn reduce(node: &pb::NodeProto, op: &str, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    let keep = ai(node, "keepdims", 1) != 0;
    let arg = op.starts_with("Arg");
    let axes: Vec<usize> = if arg {
        vec![axis(ai(node, "axis", 0), rank)?]
    } else {
        let since = if op == "ReduceSum" { 13 } else { 18 };
        match axes_of(node, opset, ins, since)? {
            Some(a) if !a.is_empty() => a.iter().map(|&v| axis(v, rank)).collect::<R<_>>()?,
            _ if ai(node, "noop_with_empty_axes", 0) != 0 => Vec::new(),
            _ => (0..rank).collect(),
        }
    };
    let mut shape = Vec::with_capacity(rank);
    for (i, &d) in x.shape.iter().enumerate() {
        if axes.contains(&i) {
            if keep {
                shape.push(1);
            }
        } else {
            shape.push(d);
        }
    }
    let (i, o) = (n(&x.shape), n(&shape));
    let flops = match op {
        "ReduceMean" | "ReduceL1" | "ReduceLogSum" => i,
        "ReduceSumSquare" => mul(&[i, 2])?.saturating_sub(o),
        "ReduceL2" => mul(&[i, 2])?,
        "ReduceLogSumExp" => mul(&[i, 3])?,
        // An empty input reduces to outputs that cost nothing.
        _ => i.saturating_sub(o),
    };
    let value = match (&x.value, op) {
        (Some(v), "ReduceProd" | "ReduceSum" | "ReduceMax" | "ReduceMin") if o == 1 => {
            Some(vec![match op {
                "ReduceProd" => v.iter().product(),
                "ReduceSum" => v.iter().sum(),
                "ReduceMax" => v.iter().copied().fold(f64::MIN, f64::max),
                _ => v.iter().copied().fold(f64::MAX, f64::min),
            }])
        }
        _ => None,
    };
    let elem = if arg { I64 } else { x.elem };
    Ok(one(with_value(elem, shape, value)?, 0, flops))
}

pub(super) fn resize(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    fn usable(t: Option<&T>) -> Option<&T> {
        t.filter(|t| n(&t.shape) > 0)
    }
    let (scales_at, sizes_at) = if node.op_type == "Upsample" || opset < 11 {
        (1, usize::MAX)
    } else {
        (2, 3)
    };
    let axes: Vec<usize> = match aints(node, "axes") {
        Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<R<_>>()?,
        None => (0..rank).collect(),
    };
    let mut shape = x.shape.clone();
    if let Some(sizes) = usable(opt(ins, sizes_at)) {
        let sizes = ints(sizes, "sizes")?;
        if sizes.len() != axes.len() {
            return Err(format!("{} sizes for {} axes", sizes.len(), axes.len()));
        }
        let policy = astr(node, "keep_aspect_ratio_policy", "stretch");
        if let Some(bad) = sizes.iter().find(|&&v| v < 0) {
            return Err(format!("a size of {bad}"));
        }
        if policy == "stretch" {
            for (&a, &s) in axes.iter().zip(&sizes) {
                shape[a] = s as usize;
            }
        } else {
            let ratios = axes
                .iter()
                .zip(&sizes)
                .map(|(&a, &s)| s as f64 / x.shape[a].max(1) as f64);
            let r = if policy == "not_larger" {
                ratios.fold(f64::MAX, f64::min)
            } else {
                ratios.fold(f64::MIN, f64::max)
            };
            for &a in &axes {
                shape[a] = (x.shape[a] as f64 * r).round() as usize;
            }
        }
    } else if let Some(scales) = usable(opt(ins, scales_at)) {
        let scales = floats(scales, "scales")?;
        if scales.len() != axes.len() {
            return Err(format!("{} scales for {} axes", scales.len(), axes.len()));
        }
        for (&a, &s) in axes.iter().zip(&scales) {
            if !(s > 0.0 && s.is_finite()) {
                return Err(format!("a scale of {s}"));
            }
            shape[a] = (x.shape[a] as f64 * s).floor() as usize;
        }
    } else if let Some(scales) = attr(node, "scales") {
        for (a, &s) in scales.floats.iter().enumerate().take(rank) {
            shape[a] = (x.shape[a] as f64 * s as f64).floor() as usize;
        }
    } else {
        return Err("it has neither scales nor sizes".into());
    }
    let d = shape.iter().zip(&x.shape).filter(|(a, b)| a != b).count() as u32;
    let per = match astr(node, "mode", "nearest").as_str() {
        "linear" | "bilinear" | "trilinear" => {
            2 * 2u64.checked_pow(d).ok_or("too many resized axes")? - 1
        }
        "cubic" | "bicubic" => 2 * 4u64.checked_pow(d).ok_or("too many resized axes")? - 1,
        _ => 0,
    };
    let flops = mul(&[n(&shape), per])?;
    Ok(one(t(x.elem, shape)?, 0, flops))
}

/// FLOPs of one fast Fourier transform of `len` points: 5 · N · log2 N, the usual count.
pub(super) fn fft_flops(len: usize) -> u64 {
    let n = len.max(1) as u64;
    5 * n * (64 - (n - 1).leading_zeros()) as u64
}

/// STFT: frames of the signal, each transformed (one-sided: half the bins and one).
pub(super) fn stft(node: &pb::NodeProto, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let [batch, len, _] = x.shape[..] else {
        return Err(format!(
            "its signal {} is not batch×length×1|2",
            show_shape(&x.shape)
        ));
    };
    let step = ints(input(ins, 1)?, "frame step")?
        .first()
        .copied()
        .unwrap_or(0);
    let frame = match (opt(ins, 3), opt(ins, 2)) {
        (Some(f), _) => ints(f, "frame length")?.first().copied().unwrap_or(0),
        (None, Some(w)) => *w.shape.first().ok_or("its window is a scalar")? as i64,
        (None, None) => return Err("it has neither a window nor a frame length".into()),
    };
    if step <= 0 || frame <= 0 || frame as usize > len {
        return Err(format!(
            "frames of {frame} every {step} do not fit {len} samples"
        ));
    }
    let (step, frame) = (step as usize, frame as usize);
    let frames = (len - frame) / step + 1;
    let bins = if ai(node, "onesided", 1) != 0 {
        frame / 2 + 1
    } else {
        frame
    };
    let flops = mul(&[batch as u64, frames as u64, fft_flops(frame) + frame as u64])?;
    Ok(one(t(x.elem, vec![batch, frames, bins, 2])?, 0, flops))
}

/// DFT along one axis (the last one holds real or complex parts).
pub(super) fn dft(node: &pb::NodeProto, opset: i64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let rank = x.shape.len();
    if rank < 2 || !matches!(x.shape[rank - 1], 1 | 2) {
        return Err(format!(
            "its input {} does not end in 1 or 2",
            show_shape(&x.shape)
        ));
    }
    let a = if opset >= 20 {
        match opt(ins, 2) {
            Some(a) => ints(a, "axis")?.first().copied().unwrap_or(-2),
            None => -2,
        }
    } else {
        ai(node, "axis", 1)
    };
    let a = axis(a, rank)?;
    if a == rank - 1 {
        return Err("its axis is the real/imaginary one".into());
    }
    let len = match opt(ins, 1) {
        Some(l) if n(&l.shape) > 0 => {
            ints(l, "DFT length")?.first().copied().unwrap_or(0).max(0) as usize
        }
        _ => x.shape[a],
    };
    let mut shape = x.shape.clone();
    shape[rank - 1] = 2;
    shape[a] = if ai(node, "onesided", 0) != 0 {
        len / 2 + 1
    } else {
        len
    };
    let transforms = n(&x.shape) / (x.shape[a].max(1) * x.shape[rank - 1]) as u64;
    let flops = mul(&[transforms, fft_flops(len)])?;
    Ok(one(t(x.elem, shape)?, 0, flops))
}

/// LSTM, GRU and RNN (and onnxruntime's dynamically quantized LSTM, weights at `w_at`).
pub(super) fn recurrent(node: &pb::NodeProto, op: &str, ins: &[Option<&T>], w_at: usize) -> R<Out> {
    let x = input(ins, 0)?;
    let w = input(ins, w_at)?;
    let [a0, a1, input_size] = x.shape[..] else {
        return Err(format!("its input {} is not 3-D", show_shape(&x.shape)));
    };
    let layout = ai(node, "layout", 0);
    let (seq, batch) = if layout == 0 { (a0, a1) } else { (a1, a0) };
    let dirs = if astr(node, "direction", "forward") == "bidirectional" {
        2
    } else {
        1
    };
    let gates: usize = match op {
        "LSTM" => 4,
        "GRU" => 3,
        _ => 1,
    };
    let hidden = match ai(node, "hidden_size", 0) {
        h if h > 0 => h as usize,
        _ => w.shape.get(1).copied().unwrap_or(0) / gates,
    };
    if hidden == 0 {
        return Err("its hidden size is unknown".into());
    }
    let per_unit: u64 = match op {
        "LSTM" => 32,
        "GRU" => 22,
        _ => 6,
    };
    let steps = mul(&[seq as u64, dirs as u64, batch as u64])?;
    let macs = mul(&[
        steps,
        gates as u64,
        hidden as u64,
        (input_size as u64).saturating_add(hidden as u64),
    ])?;
    let flops = add(mul(&[macs, 2])?, mul(&[steps, hidden as u64, per_unit])?)?;
    let (y, state) = if layout == 0 {
        (vec![seq, dirs, batch, hidden], vec![dirs, batch, hidden])
    } else {
        (vec![batch, seq, dirs, hidden], vec![batch, dirs, hidden])
    };
    let mut outputs = vec![t(F32, y)?, t(F32, state.clone())?];
    if op == "LSTM" {
        outputs.push(t(F32, state)?);
    }
    outputs.truncate(node.output.len().max(1));
    Ok(Out {
        outputs,
        macs,
        flops,
        view: false,
    })
}

/// onnxruntime's contrib operators that exporters and its quantization tool write.
pub(super) fn microsoft(node: &pb::NodeProto, op: &str, ins: &[Option<&T>]) -> R<Out> {
    match op {
        "DynamicQuantizeLSTM" => recurrent(node, "LSTM", ins, 1),
        "FusedConv" => {
            let mut out = conv(node, ins, 1, 0, 2)?;
            let extra = n(&out.outputs[0].shape);
            out.flops = add(out.flops, extra)?;
            Ok(out)
        }
        "FusedMatMul" | "DynamicQuantizeMatMul" | "MatMulIntegerToFloat" => {
            let mut out = matmul(ins, 0, 1)?;
            out.outputs[0].elem = F32;
            Ok(out)
        }
        "QLinearAdd" | "QLinearMul" => {
            let a = input(ins, 0)?;
            let b = input(ins, 3)?;
            let shape = broadcast(&[&a.shape, &b.shape])?;
            let flops = mul(&[n(&shape), 5])?;
            Ok(one(t(a.elem, shape)?, 0, flops))
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" => elementwise(input(ins, 0)?, 6),
        "QLinearGlobalAveragePool" => {
            let x = input(ins, 0)?;
            let last = ai(node, "channels_last", 0) != 0;
            let shape = if last {
                let mut s = vec![x.shape[0]];
                s.extend(std::iter::repeat_n(1, x.shape.len().saturating_sub(2)));
                s.push(*x.shape.last().unwrap_or(&1));
                s
            } else {
                let mut s = x.shape.clone();
                for d in s.iter_mut().skip(2) {
                    *d = 1;
                }
                s
            };
            Ok(one(t(x.elem, shape)?, 0, n(&x.shape)))
        }
        "Gelu" | "FastGelu" | "BiasGelu" | "QuickGelu" => elementwise(input(ins, 0)?, 6),
        "SkipLayerNormalization" => {
            let x = input(ins, 0)?;
            let mut out = elementwise(x, 8)?;
            out.outputs.truncate(1);
            Ok(out)
        }
        _ => Err("an onnxruntime contrib operator edgeprof does not cost yet".into()),
    }
}

//! Element-wise operators: their values where known, their FLOPs per output element.

use super::*;

pub(super) fn unary_value(op: &str, x: f64) -> Option<f64> {
    Some(match op {
        "Neg" => -x,
        "Abs" => x.abs(),
        "Floor" => x.floor(),
        "Ceil" => x.ceil(),
        "Round" => x.round_ties_even(),
        "Sqrt" => x.sqrt(),
        "Exp" => x.exp(),
        "Log" => x.ln(),
        "Reciprocal" => 1.0 / x,
        "Relu" => x.max(0.0),
        "Sign" => {
            if x == 0.0 {
                0.0
            } else {
                x.signum()
            }
        }
        "Not" => (x == 0.0) as u8 as f64,
        "Sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "Tanh" => x.tanh(),
        "Identity" | "Cast" | "Dropout" | "CastLike" | "Clip" => x,
        _ => return None,
    })
}

pub(super) fn binary_value(op: &str, a: f64, b: f64) -> Option<f64> {
    Some(match op {
        "Add" | "Sum" => a + b,
        "Sub" => a - b,
        "Mul" => a * b,
        "Div" => a / b,
        "Pow" => a.powf(b),
        "Max" => a.max(b),
        "Min" => a.min(b),
        "Mod" => a % b,
        "Equal" => (a == b) as u8 as f64,
        "Less" => (a < b) as u8 as f64,
        "Greater" => (a > b) as u8 as f64,
        "LessOrEqual" => (a <= b) as u8 as f64,
        "GreaterOrEqual" => (a >= b) as u8 as f64,
        "And" => (a != 0.0 && b != 0.0) as u8 as f64,
        "Or" => (a != 0.0 || b != 0.0) as u8 as f64,
        "Xor" => ((a != 0.0) != (b != 0.0)) as u8 as f64,
        _ => return None,
    })
}

/// Element-wise FLOPs per output element of a one-input operator, None when it is not one.
pub(super) fn unary_flops(op: &str) -> Option<u64> {
    Some(match op {
        "Identity" | "Dropout" | "Cast" | "CastLike" => 0,
        "Relu" | "Neg" | "Abs" | "Floor" | "Ceil" | "Round" | "Sign" | "Not" | "Exp" | "Log"
        | "Sqrt" | "Reciprocal" | "Erf" | "Sin" | "Cos" | "Tan" | "Asin" | "Acos" | "Atan"
        | "Sinh" | "Cosh" | "Asinh" | "Acosh" | "Atanh" | "IsNaN" | "IsInf" | "BitwiseNot"
        | "ThresholdedRelu" => 1,
        "LeakyRelu" | "Clip" | "Shrink" | "Softsign" => 2,
        "HardSigmoid" | "Softplus" | "Elu" | "Celu" => 3,
        "Sigmoid" | "Tanh" | "HardSwish" | "Selu" => 4,
        "Gelu" | "Mish" => 6,
        _ => return None,
    })
}

pub(super) fn binary_op(op: &str) -> bool {
    matches!(
        op,
        "Add"
            | "Sub"
            | "Mul"
            | "Div"
            | "Pow"
            | "Mod"
            | "Equal"
            | "Less"
            | "Greater"
            | "LessOrEqual"
            | "GreaterOrEqual"
            | "And"
            | "Or"
            | "Xor"
            | "BitShift"
            | "BitwiseAnd"
            | "BitwiseOr"
            | "BitwiseXor"
    )
}

pub(super) fn one(x: T, macs: u64, flops: u64) -> Out {
    Out {
        outputs: vec![x],
        macs,
        flops,
        view: false,
    }
}

pub(super) fn view(x: T) -> Out {
    Out {
        outputs: vec![x],
        macs: 0,
        flops: 0,
        view: true,
    }
}

pub(super) fn elementwise(x: &T, per: u64) -> R<Out> {
    let flops = mul(&[n(&x.shape), per])?;
    Ok(one(t(x.elem, x.shape.clone())?, 0, flops))
}

pub(super) fn constant(node: &pb::NodeProto) -> R<Out> {
    let a = node.attribute.first().ok_or("a Constant without a value")?;
    let x = match a.name.as_str() {
        "value" => super::super::tensor_of(a.t.as_ref().ok_or("a Constant without a tensor")?)?,
        "value_float" => with_value(F32, vec![], Some(vec![a.f as f64]))?,
        "value_int" => with_value(I64, vec![], Some(vec![a.i as f64]))?,
        "value_floats" => with_value(
            F32,
            vec![a.floats.len()],
            Some(a.floats.iter().map(|&v| v as f64).collect()),
        )?,
        "value_ints" => with_value(
            I64,
            vec![a.ints.len()],
            Some(a.ints.iter().map(|&v| v as f64).collect()),
        )?,
        other => return Err(format!("a Constant's {other} is not read")),
    };
    Ok(one(x, 0, 0))
}

pub(super) fn unary(node: &pb::NodeProto, op: &str, per: u64, ins: &[Option<&T>]) -> R<Out> {
    let x = input(ins, 0)?;
    let elem = match op {
        "Cast" => ai(node, "to", x.elem as i64) as i32,
        "CastLike" => input(ins, 1)?.elem,
        "IsNaN" | "IsInf" => BOOL,
        _ => x.elem,
    };
    let value = x.value.as_ref().and_then(|v| {
        let mut out = Vec::with_capacity(v.len());
        for &e in v {
            let mut r = unary_value(op, e)?;
            if op == "Clip" {
                let lo = opt(ins, 1)
                    .and_then(|t| t.value.as_ref()?.first().copied())
                    .unwrap_or(af(node, "min", f32::MIN) as f64);
                let hi = opt(ins, 2)
                    .and_then(|t| t.value.as_ref()?.first().copied())
                    .unwrap_or(af(node, "max", f32::MAX) as f64);
                r = r.max(lo).min(hi);
            }
            if super::super::is_integer_type(elem) {
                r = r.trunc();
            }
            out.push(r);
        }
        Some(out)
    });
    let flops = mul(&[n(&x.shape), per])?;
    let mut out = one(with_value(elem, x.shape.clone(), value)?, 0, flops);
    out.view = matches!(op, "Identity" | "Dropout");
    // Dropout's mask, when asked for.
    if op == "Dropout" {
        out.outputs.push(t(BOOL, x.shape.clone())?);
    }
    Ok(out)
}

pub(super) fn binary(op: &str, ins: &[Option<&T>]) -> R<Out> {
    let a = input(ins, 0)?;
    let b = input(ins, 1)?;
    let shape = broadcast(&[&a.shape, &b.shape])?;
    let elem = if matches!(
        op,
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor"
    ) {
        BOOL
    } else {
        a.elem
    };
    let value = match (&a.value, &b.value) {
        (Some(va), Some(vb)) if n(&shape) as usize <= SMALL => {
            let ia = source_index(&shape, &a.shape);
            let ib = source_index(&shape, &b.shape);
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| {
                    let r = binary_value(op, va[i], vb[j])?;
                    Some(if super::super::is_integer_type(elem) && op == "Div" {
                        r.trunc()
                    } else {
                        r
                    })
                })
                .collect::<Option<Vec<f64>>>()
        }
        _ => None,
    };
    let per = if op == "PRelu" { 2 } else { 1 };
    let flops = mul(&[n(&shape), per])?;
    Ok(one(with_value(elem, shape, value)?, 0, flops))
}

pub(super) fn variadic(op: &str, ins: &[Option<&T>]) -> R<Out> {
    let xs: Vec<&T> = ins.iter().flatten().copied().collect();
    let first = xs.first().ok_or("it has no inputs")?;
    let shapes: Vec<&[usize]> = xs.iter().map(|x| x.shape.as_slice()).collect();
    let shape = broadcast(&shapes)?;
    let mut value: Option<Vec<f64>> = None;
    if xs.iter().all(|x| x.value.is_some()) && n(&shape) as usize <= SMALL {
        let mut acc: Option<Vec<f64>> = None;
        for x in &xs {
            let v = x.value.as_ref().map(|v| {
                source_index(&shape, &x.shape)
                    .iter()
                    .map(|&i| v[i])
                    .collect::<Vec<f64>>()
            });
            acc = match (acc, v) {
                (None, v) => v,
                (Some(a), Some(b)) => a
                    .iter()
                    .zip(&b)
                    .map(|(&p, &q)| binary_value(if op == "Mean" { "Add" } else { op }, p, q))
                    .collect(),
                (Some(_), None) => None,
            };
        }
        if op == "Mean" {
            acc = acc.map(|a| a.iter().map(|v| v / xs.len() as f64).collect());
        }
        value = acc;
    }
    let per = (xs.len() as u64).saturating_sub(1) + u64::from(op == "Mean");
    let flops = mul(&[n(&shape), per])?;
    Ok(one(with_value(first.elem, shape, value)?, 0, flops))
}

pub(super) fn where_(ins: &[Option<&T>]) -> R<Out> {
    let c = input(ins, 0)?;
    let a = input(ins, 1)?;
    let b = input(ins, 2)?;
    let shape = broadcast(&[&c.shape, &a.shape, &b.shape])?;
    let value = match (&c.value, &a.value, &b.value) {
        (Some(vc), Some(va), Some(vb)) if n(&shape) as usize <= SMALL => {
            let ic = source_index(&shape, &c.shape);
            let ia = source_index(&shape, &a.shape);
            let ib = source_index(&shape, &b.shape);
            Some(
                (0..ic.len())
                    .map(|k| {
                        if vc[ic[k]] != 0.0 {
                            va[ia[k]]
                        } else {
                            vb[ib[k]]
                        }
                    })
                    .collect(),
            )
        }
        _ => None,
    };
    let flops = n(&shape);
    Ok(one(with_value(a.elem, shape, value)?, 0, flops))
}

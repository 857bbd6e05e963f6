//! What tract is given of an ONNX file before it parses it: the types and values it lacks
//! said in one sentence, the symbolic intermediate shapes that would clash with a concrete
//! input dropped, and the tensors fed to a model whose inputs the user bound by name.

use super::*;

/// Drops the intermediate shapes (`value_info`) an exporter wrote with symbolic dimensions
/// (`batch,16,(height+1)/2,…`): they are hints, and tract would hold them against the concrete
/// input it is given (`Unifying shapes DynamicDimension.0,16,112,112 and 1,16,112,112`) where
/// onnxruntime infers them again. Concrete ones stay.
pub(super) fn forget_symbolic_value_info(proto: &mut pb::ModelProto) {
    if let Some(graph) = proto.graph.as_mut() {
        forget_symbolic_shapes(graph, true);
    }
}

/// [`forget_symbolic_value_info`] in one graph and its branch bodies (whose outputs' symbolic
/// shapes are hints too; the top graph's outputs stay as the file declares them).
pub(super) fn forget_symbolic_shapes(graph: &mut pb::GraphProto, top: bool) {
    use pb::tensor_shape_proto::dimension::Value;
    let symbolic = |v: &pb::ValueInfoProto| match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => t.shape.as_ref().is_some_and(|s| {
            s.dim
                .iter()
                .any(|d| !matches!(d.value, Some(Value::DimValue(v)) if v > 0))
        }),
        None => false,
    };
    graph.value_info.retain(|v| !symbolic(v));
    if !top {
        for o in graph.output.iter_mut() {
            if symbolic(o) {
                if let Some(pb::type_proto::Value::TensorType(t)) =
                    o.r#type.as_mut().and_then(|t| t.value.as_mut())
                {
                    t.shape = None;
                }
            }
        }
    }
    for node in graph.node.iter_mut() {
        for a in node.attribute.iter_mut() {
            if let Some(g) = a.g.as_mut() {
                forget_symbolic_shapes(g, false);
            }
            for g in a.graphs.iter_mut() {
                forget_symbolic_shapes(g, false);
            }
        }
    }
}

/// An integer input's given values as an initializer of its name.
pub(super) fn integer_tensor(input: &crate::models::onnx_graph::BoundInput) -> pb::TensorProto {
    crate::models::onnx_graph::tensor_proto(
        &input.name,
        input.elem,
        &input.shape,
        input.values.as_deref().unwrap_or_default(),
    )
}

/// A model file decoded by tract's reader (`decode`), its panics contained and its errors said
/// with what the file looks like when it is no ONNX file.
pub(super) fn decode_file(
    path: &Path,
    origin: &str,
    decode: impl FnOnce() -> TractResult<pb::ModelProto>,
) -> Result<pb::ModelProto, EngineError> {
    contained(decode)
        .map_err(|reason| EngineError::Crashed {
            origin: origin.to_string(),
            stage: "reading",
            reason: reason.0,
        })?
        .map_err(|e| EngineError::InvalidModel {
            origin: origin.to_string(),
            reason: format!(
                "{}{}",
                one_line(&e),
                crate::models::onnx_graph::format_hint(path)
            ),
        })
}

/// Refuses a file run at `input_shape` (N, C, H, W, else its own shapes) when one of its nodes
/// cannot run (see [`crate::models::onnx_graph::check_runnable`]). A file whose inputs cannot
/// be bound so is left to tract, which says what it lacks.
pub(super) fn check_runnable_at(
    proto: &pb::ModelProto,
    origin: &str,
    input_shape: Option<&[usize]>,
) -> Result<(), EngineError> {
    use crate::models::onnx_graph::{bind_inputs, InputSpec};
    let Some(graph) = proto.graph.as_ref() else {
        return Ok(());
    };
    let (specs, batch) = match input_shape {
        Some(&[n, c, h, w]) => {
            let image = crate::models::InputShape {
                channels: c,
                height: h,
                width: w,
            };
            (vec![InputSpec::image(image)], Some(n))
        }
        _ => (Vec::new(), None),
    };
    let Ok(inputs) = bind_inputs(graph, &specs, batch) else {
        return Ok(());
    };
    check_runnable_with(proto, origin, &inputs)
}

/// Refuses a model with its inputs bound as `inputs` when one of its nodes cannot run, or when
/// one node's inputs and outputs by edgeprof's own walk would not fit in memory together:
/// tract's typing of such a graph can take a minute before its own check refuses it (a Pad to
/// 16 GiB took 31 s). That figure is a floor of what tract's own check counts later (the peak
/// of its tensors alive at once), so no model is refused here that would have run.
pub(super) fn check_runnable_with(
    proto: &pb::ModelProto,
    origin: &str,
    inputs: &[crate::models::onnx_graph::BoundInput],
) -> Result<(), EngineError> {
    let heaviest = crate::models::onnx_graph::check_runnable(proto, inputs).map_err(|e| {
        EngineError::InvalidModel {
            origin: origin.to_string(),
            reason: e.to_string(),
        }
    })?;
    match heaviest {
        Some(h) => super::check_fits(
            origin,
            &format!("running node {:?} (its inputs and outputs at once)", h.node),
            Some(h.bytes),
        ),
        None => Ok(()),
    }
}

/// tract's element type for an ONNX one.
pub(super) fn datum_of(elem: i32, origin: &str) -> Result<DatumType, EngineError> {
    use pb::tensor_proto::DataType as D;
    Ok(match D::try_from(elem) {
        Ok(D::Float) => f32::datum_type(),
        Ok(D::Double) => f64::datum_type(),
        Ok(D::Float16) => f16::datum_type(),
        Ok(D::Int64) => i64::datum_type(),
        Ok(D::Int32) => i32::datum_type(),
        Ok(D::Int16) => i16::datum_type(),
        Ok(D::Int8) => i8::datum_type(),
        Ok(D::Uint64) => u64::datum_type(),
        Ok(D::Uint32) => u32::datum_type(),
        Ok(D::Uint16) => u16::datum_type(),
        Ok(D::Uint8) => u8::datum_type(),
        Ok(D::Bool) => bool::datum_type(),
        Ok(D::String) => {
            return Err(EngineError::UnsupportedModel {
                origin: origin.to_string(),
                reason: "it takes strings, and edgeprof feeds numbers and booleans only".into(),
            })
        }
        _ => {
            return Err(EngineError::UnsupportedModel {
                origin: origin.to_string(),
                reason: format!(
                    "it takes {} values, a type tract lacks ({TYPES_TRACT_LACKS})",
                    crate::models::onnx_graph::elem_type_name(elem)
                ),
            })
        }
    })
}

/// The tensor an input is fed ([`BoundInput::values_or_seeded`]).
///
/// [`BoundInput::values_or_seeded`]: crate::models::onnx_graph::BoundInput::values_or_seeded
pub(super) fn fed_tensor(
    input: &crate::models::onnx_graph::BoundInput,
    seed: u64,
) -> Result<Tensor, EngineError> {
    let run_err = |e: TractError| EngineError::Run {
        reason: format!("input {}: {}", input.name, one_line(&e)),
    };
    let datum = datum_of(input.elem, &format!("input {}", input.name))?;
    let values = input.values_or_seeded(seed);
    let wide = Tensor::from_shape(&input.shape, &values).map_err(run_err)?;
    let typed = if datum == bool::datum_type() {
        wide.cast_to::<f32>()
            .map_err(run_err)?
            .cast_to_dt(datum)
            .map_err(run_err)?
            .into_owned()
    } else {
        wide.cast_to_dt(datum).map_err(run_err)?.into_owned()
    };
    Ok(typed)
}

/// The element types of a valid ONNX file that tract has no tensor type for, and what tract
/// runs instead.
pub(super) const TYPES_TRACT_LACKS: &str =
    "tract runs float16, float32 and float64, integers of 8 to 64 bits, bool and strings";

/// Why tract cannot run a valid file, in one sentence, when it holds an element type tract
/// lacks (bfloat16, float8, 4-bit, complex), values that are no tensors (sequences,
/// optionals) or operators tract does not implement; None when it holds none of them.
pub(super) fn what_tract_lacks(graph: &pb::GraphProto) -> Option<String> {
    use pb::tensor_proto::DataType as D;
    let lacks = |t: i32| {
        matches!(
            D::try_from(t),
            Ok(D::Bfloat16
                | D::Float8e4m3fn
                | D::Float8e4m3fnuz
                | D::Float8e5m2
                | D::Float8e5m2fnuz
                | D::Uint4
                | D::Int4
                | D::Float4e2m1
                | D::Complex64
                | D::Complex128)
        )
        .then(|| crate::models::onnx_graph::elem_type_name(t))
    };
    let mut types: Vec<String> = Vec::new();
    let mut note = |t: Option<String>| {
        if let Some(t) = t {
            if !types.contains(&t) {
                types.push(t);
            }
        }
    };
    // A model input with a type that is no tensor's is a sequence, a map or an optional (the
    // types tract's reader does not decode); inside a graph an empty type is only unsaid.
    let mut not_tensors = graph
        .input
        .iter()
        .any(|v| matches!(&v.r#type, Some(t) if t.value.is_none()));
    let mut stack = vec![graph];
    while let Some(g) = stack.pop() {
        for v in g.input.iter().chain(&g.output).chain(&g.value_info) {
            if let Some(pb::type_proto::Value::TensorType(t)) =
                v.r#type.as_ref().and_then(|t| t.value.as_ref())
            {
                note(lacks(t.elem_type));
            }
        }
        for t in &g.initializer {
            note(lacks(t.data_type));
        }
        for n in &g.node {
            if n.op_type.starts_with("Sequence") || n.op_type.starts_with("Optional") {
                not_tensors = true;
            }
            for a in &n.attribute {
                match a.name.as_str() {
                    "to" | "output_dtype" | "dtype" => note(lacks(a.i as i32)),
                    _ => {}
                }
                if let Some(t) = &a.t {
                    note(lacks(t.data_type));
                }
                stack.extend(a.g.iter());
                stack.extend(a.graphs.iter());
            }
        }
    }
    if !types.is_empty() {
        Some(format!(
            "it holds {} tensors, a type tract lacks ({TYPES_TRACT_LACKS}): run it \
             on the onnxruntime engine",
            types.join(" and ")
        ))
    } else if not_tensors {
        Some(
            "it holds sequences or optionals, which tract does not run: run it on the \
             onnxruntime engine"
                .to_string(),
        )
    } else {
        unimplemented_ops(graph)
    }
}

/// The operators of a graph (and its branch and loop bodies) that tract has no implementation
/// of, named in one sentence (onnxruntime's own operators, such as `DynamicQuantizeLSTM`, are
/// the usual ones); None when tract implements them all.
fn unimplemented_ops(graph: &pb::GraphProto) -> Option<String> {
    let onnx = tract_onnx::onnx();
    let mut missing: Vec<String> = Vec::new();
    // Operators of a domain neither tract nor onnxruntime knows: the model's own.
    let mut custom = false;
    let mut stack = vec![graph];
    while let Some(g) = stack.pop() {
        for n in &g.node {
            if !onnx.op_register.0.contains_key(&n.op_type) {
                let name = if n.domain.is_empty() || n.domain == "ai.onnx" {
                    n.op_type.clone()
                } else {
                    format!("{} ({})", n.op_type, n.domain)
                };
                custom |= !matches!(n.domain.as_str(), "" | "ai.onnx" | "com.microsoft");
                if !missing.contains(&name) {
                    missing.push(name);
                }
            }
            for a in &n.attribute {
                stack.extend(a.g.iter());
                stack.extend(a.graphs.iter());
            }
        }
    }
    (!missing.is_empty()).then(|| {
        format!(
            "tract does not implement {} {}: {}",
            if missing.len() == 1 {
                "the operator"
            } else {
                "the operators"
            },
            missing.join(", "),
            if custom {
                "export the model without custom operators, or run it where they are implemented"
            } else {
                "run it on the onnxruntime engine"
            }
        )
    })
}

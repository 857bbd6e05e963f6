//! Tests of `engines/tract.rs`.

use super::*;
use crate::models::zoo::{self, ModelParams};

#[test]
fn contained_panics_become_their_message_and_leave_their_place() {
    let _ = take_last_panic();
    let outcome: Result<(), crate::error::Panicked> =
        contained(|| panic!("pads {} for rank {}", 3, 2));
    assert_eq!(outcome, Err("pads 3 for rank 2".into()));
    let place = take_last_panic().unwrap_or_default();
    assert!(place.contains("src/engines/tract/tests.rs"), "{place}");
    assert_eq!(take_last_panic(), None);
    // Nested: the inner one is caught, the outer carries on.
    let nested = contained(|| contained(|| -> u8 { panic!("inner") }).is_err());
    assert_eq!(nested, Ok(true));
    assert_eq!(contained(|| 7), Ok(7));
}

#[test]
fn models_load_from_bytes_and_image_operators_need_their_rank() {
    let bytes = crate::models::onnx::encode(&tiny_graph());
    let session = match TractSession::load_bytes(&bytes, "tiny", None, 2) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(session.input_shape, vec![1, 2, 6, 6]);
    // A rank-3 input given on the command line leaves the convolution rank 3: allowed by
    // the rank check (tract then says what it thinks).
    let graph = tiny_graph().graph.unwrap_or_default();
    assert!(ranks::check(&graph, Some(3)).is_ok());
    let why = ranks::check(&graph, Some(2)).err().unwrap_or_default();
    assert!(
        why.contains("\"conv\" (Conv) needs a tensor of rank 3"),
        "{why}"
    );
}

#[test]
fn node_names_map_to_the_longest_layer_prefix() {
    let layers: Vec<String> = ["conv1", "conv1.0", "layer1.0.conv1", "fc", ""]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(map_to_layer("conv1.0.add_bias", &layers), Some("conv1.0"));
    assert_eq!(map_to_layer("conv1", &layers), Some("conv1"));
    assert_eq!(map_to_layer("conv10", &layers), None);
    assert_eq!(
        map_to_layer("layer1.0.conv1.pack", &layers),
        Some("layer1.0.conv1")
    );
    assert_eq!(map_to_layer("fc_bias", &layers), None);
}

#[test]
fn zoo_model_runs_and_profiles_at_small_size() {
    let params = ModelParams {
        height: 32,
        width: 32,
        num_classes: 10,
        ..ModelParams::default()
    };
    let model = match zoo::build("shufflenet_v2_x0_5", &params) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    let session = TractSession::load(
        ModelSource::Zoo {
            model: &model,
            seed: 1,
        },
        None,
        2,
    );
    let session = match session {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(session.input_shape, vec![1, 3, 32, 32]);
    let input = match session.make_input(7) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let (shape, values) = match session.run(&input) {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(shape, vec![1, 10]);
    assert!(values.iter().all(|v| v.is_finite()));
    let profile = match session.profile(&input, 2) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    assert!(profile.iter().any(|l| l.mapped && l.layer == "fc"));
    assert!(profile
        .iter()
        .any(|l| l.mapped && l.layer.starts_with("stage3.")));
}

/// Input 1x2x6x6 → Pad → Conv 3x3 → Relu → MaxPool → AveragePool → Reshape → Gemm → Softmax, with
/// a Transpose, Slice, Concat and Split on the side.
pub(crate) fn tiny_graph() -> tract_onnx::pb::ModelProto {
    use crate::models::onnx::{float_tensor, IR_VERSION, OPSET};
    use tract_onnx::pb;
    let ints = |name: &str, v: &[i64]| pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    };
    let int = |name: &str, v: i64| pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i: v,
        ..Default::default()
    };
    let text_attr = |name: &str, v: &str| pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    };
    let node = |op: &str, inputs: &[&str], outputs: &[&str], attribute: Vec<pb::AttributeProto>| {
        pb::NodeProto {
            op_type: op.into(),
            name: outputs[0].into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute,
            ..Default::default()
        }
    };
    let int64 = |name: &str, v: &[i64]| pb::TensorProto {
        name: name.into(),
        dims: vec![v.len() as i64],
        data_type: pb::tensor_proto::DataType::Int64 as i32,
        raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ..Default::default()
    };
    let weights: Vec<f32> = (0..3 * 2 * 9).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
    let fc: Vec<f32> = (0..18 * 4).map(|i| (i % 5) as f32 * 0.05).collect();
    let nodes = vec![
        node(
            "Pad",
            &["input", "pads"],
            &["padded"],
            vec![text_attr("mode", "constant")],
        ),
        node(
            "Conv",
            &["padded", "w", "b"],
            &["conv"],
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("strides", &[1, 1]),
                ints("pads", &[0, 0, 0, 0]),
                ints("dilations", &[1, 1]),
                int("group", 1),
            ],
        ),
        node("Relu", &["conv"], &["relu"], vec![]),
        node(
            "MaxPool",
            &["relu"],
            &["pool"],
            vec![
                ints("kernel_shape", &[2, 2]),
                ints("strides", &[2, 2]),
                ints("pads", &[0, 0, 0, 0]),
            ],
        ),
        node(
            "AveragePool",
            &["pool"],
            &["avg"],
            vec![
                ints("kernel_shape", &[1, 1]),
                ints("strides", &[1, 1]),
                int("count_include_pad", 0),
            ],
        ),
        node(
            "Transpose",
            &["avg"],
            &["t"],
            vec![ints("perm", &[0, 1, 3, 2])],
        ),
        node(
            "Slice",
            &["t", "starts", "ends", "axes"],
            &["sliced"],
            vec![],
        ),
        node(
            "Concat",
            &["sliced", "sliced"],
            &["cat"],
            vec![int("axis", 3)],
        ),
        node(
            "Split",
            &["cat"],
            &["half_a", "half_b"],
            vec![int("axis", 3)],
        ),
        node("Add", &["half_a", "half_b"], &["sum"], vec![]),
        node("Reshape", &["sum", "shape"], &["flat"], vec![]),
        node(
            "Gemm",
            &["flat", "fc", "fcb"],
            &["logits"],
            vec![int("transB", 0)],
        ),
        node("Softmax", &["logits"], &["output"], vec![int("axis", 1)]),
    ];
    let graph = pb::GraphProto {
        name: "tiny".into(),
        node: nodes,
        initializer: vec![
            int64("pads", &[0, 0, 1, 1, 0, 0, 1, 1]),
            float_tensor("w", &[3, 2, 3, 3], &weights),
            float_tensor("b", &[3], &[0.1, 0.0, -0.1]),
            int64("starts", &[0]),
            int64("ends", &[2]),
            int64("axes", &[3]),
            int64("shape", &[1, -1]),
            float_tensor("fc", &[18, 4], &fc),
            float_tensor("fcb", &[4], &[0.0; 4]),
        ],
        input: vec![value_info("input", &[1, 2, 6, 6])],
        output: vec![value_info("output", &[1, 4])],
        ..Default::default()
    };
    pb::ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

fn value_info(name: &str, shape: &[i64]) -> tract_onnx::pb::ValueInfoProto {
    use tract_onnx::pb;
    use tract_onnx::pb::tensor_shape_proto::{dimension::Value, Dimension};
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: pb::tensor_proto::DataType::Float as i32,
                shape: Some(pb::TensorShapeProto {
                    dim: shape
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The malformed models under tests/fixtures/onnx/malformed: the tiny graph with one thing
/// broken each, on which tract 0.23 panics (most), allocates without bound (the repeated
/// permutation, the huge convolution output) or would read out of bounds (the rank-1 batch
/// norm). The permutations, the batch norm and the convolution (by the memory its input and
/// output take) are refused before tract sees them.
fn malformed_models() -> Vec<(&'static str, tract_onnx::pb::ModelProto)> {
    use tract_onnx::pb;
    let edit = |change: &dyn Fn(&mut pb::GraphProto)| {
        let mut model = tiny_graph();
        if let Some(g) = model.graph.as_mut() {
            change(g);
        }
        model
    };
    let set_ints = |g: &mut pb::GraphProto, op: &str, name: &str, values: &[i64]| {
        for node in g.node.iter_mut().filter(|n| n.op_type == op) {
            for a in node.attribute.iter_mut().filter(|a| a.name == name) {
                a.ints = values.to_vec();
                a.i = values.first().copied().unwrap_or(0);
            }
        }
    };
    vec![
        // Two pads for a 2-D convolution, which needs four.
        (
            "bad_pads.onnx",
            edit(&|g| set_ints(g, "Conv", "pads", &[1])),
        ),
        // A stride of zero: the output size divides by it.
        (
            "zero_stride.onnx",
            edit(&|g| set_ints(g, "Conv", "strides", &[0, 0])),
        ),
        // A permutation naming an axis the tensor does not have.
        (
            "bad_perm.onnx",
            edit(&|g| set_ints(g, "Transpose", "perm", &[0, 1, 3, 9])),
        ),
        // A split along an axis the tensor does not have.
        (
            "bad_split_axis.onnx",
            edit(&|g| {
                for node in g.node.iter_mut().filter(|n| n.op_type == "Split") {
                    for a in node.attribute.iter_mut().filter(|a| a.name == "axis") {
                        a.i = 9;
                    }
                }
            }),
        ),
        // A graph output that no node produces.
        (
            "missing_output.onnx",
            edit(&|g| {
                if let Some(o) = g.output.first_mut() {
                    o.name = "nowhere".into();
                }
            }),
        ),
        // A string tensor stored as raw bytes, which tract does not load.
        (
            "raw_string_tensor.onnx",
            edit(&|g| {
                if let Some(t) = g.initializer.iter_mut().find(|t| t.name == "b") {
                    t.data_type = pb::tensor_proto::DataType::String as i32;
                }
            }),
        ),
        // A permutation that names one axis twice: tract allocates without bound.
        (
            "repeated_perm.onnx",
            edit(&|g| set_ints(g, "Transpose", "perm", &[0, 1, 3, 3])),
        ),
        // Pads that make a convolution's output enormous from a tiny input: tract's
        // optimiser sizes a table by that output and aborts the process allocating it.
        (
            "huge_conv_output.onnx",
            edit(&|g| {
                set_ints(g, "Conv", "pads", &[100_000, 100_000, 100_000, 100_000]);
                // The convolution's output is the graph's: nothing after it refuses it.
                g.node.truncate(2);
                g.output = vec![pb::ValueInfoProto {
                    name: "conv".into(),
                    ..Default::default()
                }];
            }),
        ),
        // A batch norm fed a rank-1 tensor: tract indexes its channel axis unchecked.
        (
            "rank1_batchnorm.onnx",
            edit(&|g| {
                g.node.push(pb::NodeProto {
                    op_type: "BatchNormalization".into(),
                    name: "bn".into(),
                    input: ["b", "b", "b", "b", "b"].map(String::from).to_vec(),
                    output: vec!["bn".into()],
                    ..Default::default()
                });
                // A second output, so that nothing else constrains it.
                g.output.push(pb::ValueInfoProto {
                    name: "bn".into(),
                    ..Default::default()
                });
            }),
        ),
    ]
}

fn malformed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/onnx/malformed")
}

/// Writes tests/fixtures/onnx/malformed again (they are checked in).
#[test]
#[ignore]
fn write_malformed_onnx_fixtures() {
    let dir = malformed_dir();
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("{}: {e}", dir.display());
    }
    for (name, model) in malformed_models() {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, crate::models::onnx::encode(&model)) {
            panic!("{}: {e}", path.display());
        }
    }
}

/// Every malformed fixture is one the fixture writer makes, and each is answered with an error
/// naming the file: the panics contained, the out-of-bounds read refused before tract runs.
#[test]
fn malformed_onnx_fixtures_are_errors_not_crashes() {
    for (name, model) in malformed_models() {
        let path = malformed_dir().join(name);
        let on_disk = std::fs::read(&path).unwrap_or_default();
        assert_eq!(
            on_disk,
            crate::models::onnx::encode(&model),
            "{name} is stale: run the ignored test engines::tract::tests::write_malformed_onnx_fixtures"
        );
        let outcome = contained(|| TractSession::load(ModelSource::OnnxFile(&path), None, 1));
        let error = match outcome {
            Ok(Ok(_)) => panic!("{name} loaded"),
            Ok(Err(e)) => e,
            Err(panic) => panic!("{name}: a panic escaped: {panic}"),
        };
        assert!(error.is_bad_input(), "{name}: {error}");
        assert!(error.to_string().contains(name), "{name}: {error}");
        if name == "rank1_batchnorm.onnx" {
            assert!(matches!(error, EngineError::InvalidModel { .. }), "{error}");
            assert!(error.to_string().contains("rank"), "{error}");
        } else if name.ends_with("perm.onnx") {
            assert!(matches!(error, EngineError::InvalidModel { .. }), "{error}");
            assert!(error.to_string().contains("not a permutation"), "{error}");
        } else if name == "huge_conv_output.onnx" {
            assert!(matches!(error, EngineError::TooLarge { .. }), "{error}");
            assert!(
                error
                    .to_string()
                    .contains("running node \"conv\" (its inputs and outputs at once)"),
                "{error}"
            );
        } else {
            assert!(
                matches!(error, EngineError::Crashed { .. }),
                "{name}: {error}"
            );
        }
    }
}

/// A plan of `wire`'s graph over a 1024-float input, unoptimised, as tract would run it.
fn plan_of(
    wire: impl Fn(&mut TypedModel, OutletId) -> TractResult<OutletId>,
) -> Arc<TypedSimplePlan> {
    let built = (|| -> TractResult<Arc<TypedSimplePlan>> {
        let mut model = TypedModel::default();
        let x = model.add_source("x", f32::fact([1024]))?;
        let out = wire(&mut model, x)?;
        model.select_output_outlets(&[out])?;
        tract_onnx::tract_core::plan::SimplePlan::new(model)
    })();
    match built {
        Ok(plan) => plan,
        Err(e) => panic!("{e:#}"),
    }
}

#[test]
fn the_peak_counts_the_tensors_alive_together() {
    use tract_onnx::tract_core::ops::math;
    const T: u64 = 4096;
    // x → a → b → c: each step holds its input and its output.
    let chain = plan_of(|m, x| {
        let a = m.wire_node("a", math::abs(), &[x])?[0];
        let b = m.wire_node("b", math::abs(), &[a])?[0];
        Ok(m.wire_node("c", math::abs(), &[b])?[0])
    });
    assert_eq!(peak_bytes(&chain), Some(2 * T));
    // x feeds a and b, which the sum reads: x is held until b is made, a and b until the sum.
    let branches = plan_of(|m, x| {
        let a = m.wire_node("a", math::abs(), &[x])?[0];
        let b = m.wire_node("b", math::neg(), &[x])?[0];
        Ok(m.wire_node("sum", math::add(), &[a, b])?[0])
    });
    assert_eq!(peak_bytes(&branches), Some(3 * T));
}

/// A Pad whose output no machine holds (1×2×1048576×1048576 floats, 8 TiB, under the walk's
/// limit for any model) is refused by edgeprof's own walk of the graph, before tract types it:
/// the long fuzz campaign found tract's typing of a Pad to 16 GiB taking over 30 s before its
/// own check refused the model.
#[test]
fn a_tensor_past_memory_is_refused_before_tract_types_the_graph() {
    use tract_onnx::pb;
    let mut model = tiny_graph();
    let p = 524_285i64;
    if let Some(g) = model.graph.as_mut() {
        if let Some(t) = g.initializer.iter_mut().find(|t| t.name == "pads") {
            t.raw_data = [0, 0, p, p, 0, 0, p, p]
                .iter()
                .flat_map(|x: &i64| x.to_le_bytes())
                .collect();
        }
        g.node.truncate(1);
        g.output = vec![pb::ValueInfoProto {
            name: "padded".into(),
            ..Default::default()
        }];
    }
    let refused = check_runnable_at(&model, "huge_pad", None);
    match refused {
        Err(EngineError::TooLarge { what, needed, .. }) => {
            assert_eq!(
                what,
                "running node \"padded\" (its inputs and outputs at once)"
            );
            // The output, and the 1×2×6×6 input held with it.
            assert_eq!(needed, 2 * 1_048_576 * 1_048_576 * 4 + 2 * 6 * 6 * 4);
        }
        other => panic!("not refused as too large: {other:?}"),
    }
}

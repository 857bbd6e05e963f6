//! The chain of a hand-made residual graph: where it is cut, what its sub-models hold, and
//! the graphs it refuses.

use super::*;

fn node(op: &str, inputs: &[&str], output: &str) -> pb::NodeProto {
    pb::NodeProto {
        op_type: op.into(),
        name: output.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

/// x → conv → relu ─┬→ conv → add → relu → reshape(shape arithmetic) → y
///                  └──────────↗
fn residual_graph(extra_input: bool) -> pb::ModelProto {
    const INT64: i32 = pb::tensor_proto::DataType::Int64 as i32;
    let weight = |name: &str| tensor_proto(name, FLOAT, &[4, 4, 1, 1], &[0.1; 16]);
    let mut concat = node("Concat", &["first", "minus_one"], "target");
    concat.attribute.push(pb::AttributeProto {
        name: "axis".into(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i: 0,
        ..Default::default()
    });
    let mut input = vec![value_info("x", FLOAT, Some(&[1, 4, 8, 8]))];
    if extra_input {
        input.push(value_info("h", FLOAT, Some(&[1, 4, 8, 8])));
    }
    let graph = pb::GraphProto {
        name: "residual".into(),
        node: vec![
            node("Conv", &["x", "w0"], "c0"),
            node("Relu", &["c0"], "r0"),
            node("Conv", &["r0", "w1"], "c1"),
            node("Add", &["r0", "c1"], "a0"),
            node("Shape", &["a0"], "s"),
            node("Gather", &["s", "zero"], "first"),
            concat,
            node("Relu", &["a0"], "r1"),
            node("Reshape", &["r1", "target"], "y"),
        ],
        initializer: vec![
            weight("w0"),
            weight("w1"),
            tensor_proto("zero", INT64, &[1], &[0.0]),
            tensor_proto("minus_one", INT64, &[1], &[-1.0]),
        ],
        input,
        output: vec![value_info("y", FLOAT, None)],
        ..Default::default()
    };
    pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

fn names(values: &[pb::ValueInfoProto]) -> Vec<&str> {
    values.iter().map(|v| v.name.as_str()).collect()
}

#[test]
fn cuts_fall_where_one_tensor_crosses_never_inside_the_residual() -> Result<(), AnalysisError> {
    let chain = Chain::new(residual_graph(false), "residual.onnx", &[])?;
    // The shape arithmetic is folded: six nodes run.
    assert_eq!(chain.len(), 6);
    let cuts: Vec<(usize, &str)> = chain
        .cuts()
        .iter()
        .map(|c| (c.position, c.name.as_str()))
        .collect();
    assert_eq!(cuts, vec![(1, "c0"), (2, "r0"), (4, "a0"), (5, "r1")]);
    assert_eq!(chain.crossing_at(2).map(Crossing::bytes), Some(4 * 256));
    Ok(())
}

#[test]
fn a_sub_model_carries_its_weights_and_the_shape_arithmetic_it_reads() -> Result<(), AnalysisError>
{
    let chain = Chain::new(residual_graph(false), "residual.onnx", &[])?;
    let sub = chain.sub_model(2, 4)?;
    let g = sub.graph.as_ref().ok_or_else(|| AnalysisError::Inputs {
        file: String::new(),
        reason: "no graph".into(),
    })?;
    assert_eq!(names(&g.input), vec!["r0"]);
    assert_eq!(names(&g.output), vec!["a0"]);
    let ops: Vec<&str> = g.node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, vec!["Conv", "Add"]);
    let inits: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(inits, vec!["w1"]);
    // After the last cut: the Reshape's target, computed from a shape before the cut,
    // travels as a constant with its values.
    let last = chain.sub_model(4, 6)?;
    let g = last.graph.as_ref().ok_or_else(|| AnalysisError::Inputs {
        file: String::new(),
        reason: "no graph".into(),
    })?;
    assert_eq!(names(&g.output), vec!["y"]);
    let target = g.initializer.iter().find(|t| t.name == "target");
    assert_eq!(target.map(|t| t.int64_data.clone()), Some(vec![1, -1]));
    assert_eq!(g.node.len(), 2);
    Ok(())
}

#[test]
fn a_range_that_does_not_end_at_a_cut_is_refused() -> Result<(), AnalysisError> {
    let chain = Chain::new(residual_graph(false), "residual.onnx", &[])?;
    let err = match chain.sub_model(2, 3) {
        Ok(_) => panic!("nodes 2..3 were cut though 3 is no cut"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("position 3 is not a cut"), "{err}");
    Ok(())
}

#[test]
fn a_model_fed_two_tensors_is_refused_with_their_names() {
    let mut model = residual_graph(true);
    if let Some(g) = model.graph.as_mut() {
        g.node.insert(7, node("Add", &["a0", "h"], "ah"));
        g.node[8].input[0] = "ah".into();
    }
    let err = match Chain::new(model, "two.onnx", &[]) {
        Ok(_) => panic!("a model fed two tensors was cut"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("starts from one input, and 2 are fed when it runs (x, h)"),
        "{err}"
    );
}

#[test]
fn a_model_whose_outputs_are_known_from_its_shapes_is_refused() {
    let mut model = residual_graph(false);
    if let Some(g) = model.graph.as_mut() {
        g.node = vec![node("Shape", &["x"], "y")];
    }
    let err = match Chain::new(model, "shape.onnx", &[]) {
        Ok(_) => panic!("a model with no run-time node was cut"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("there is nothing to place"), "{err}");
}

#[test]
fn nodes_and_inputs_nothing_reads_take_no_place() -> Result<(), AnalysisError> {
    // A dead branch off the residual, and a second input nothing reads.
    let mut model = residual_graph(true);
    if let Some(g) = model.graph.as_mut() {
        g.node.insert(2, node("Sigmoid", &["r0"], "dead"));
        g.node.push(node("Relu", &["h"], "unused"));
    }
    let chain = Chain::new(model, "dead.onnx", &[])?;
    assert_eq!(chain.len(), 6);
    assert_eq!(chain.cuts().len(), 4);
    Ok(())
}

fn refusal(model: pb::ModelProto) -> String {
    match Chain::new(model, "bad.onnx", &[]) {
        Ok(_) => panic!("a malformed graph was cut"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_malformed_graph_is_refused_for_what_is_wrong_with_it() {
    let mut twice = residual_graph(false);
    let mut undefined = residual_graph(false);
    let mut shadowing = residual_graph(false);
    let mut no_output = residual_graph(false);
    if let (Some(a), Some(b), Some(c), Some(d)) = (
        twice.graph.as_mut(),
        undefined.graph.as_mut(),
        shadowing.graph.as_mut(),
        no_output.graph.as_mut(),
    ) {
        a.node.push(node("Relu", &["c0"], "r0"));
        b.node[3].input[1] = "ghost".into();
        c.node.push(node("Relu", &["r1"], "x"));
        d.output.clear();
    }
    assert!(refusal(twice).contains("r0 is made twice (by node r0 and node r0)"));
    assert!(refusal(undefined)
        .contains("node a0 reads ghost, which no node, input or weight of the graph makes"));
    assert!(refusal(shadowing).contains("x is made twice (by input x and node x)"));
    assert!(refusal(no_output).contains("its graph has no outputs"));
}

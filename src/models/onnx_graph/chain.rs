//! A file's graph as a chain for placement: the places where exactly one run-time tensor
//! crosses from the nodes before to the nodes after, and the sub-model of the nodes between
//! two such places, which runs on its own.
//!
//! Values known before the model runs may cross a cut freely: a weight travels with the
//! nodes that read it (with the nodes that compute it from other weights), and shape
//! arithmetic whose values the analysis knows (a `Shape` of a tensor before the cut read by a
//! `Reshape` after it) becomes a constant of the sub-model. A cut is placed only where every
//! other value that crosses it is of those kinds, the one run-time tensor is float32 and it
//! is none of the model's outputs.

use super::*;
use std::collections::HashSet;

/// A place between two positions of the chain and the tensor that crosses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    /// Nodes before it: `0` is the model's input, the chain's length its end.
    pub position: usize,
    pub name: String,
    pub shape: Vec<usize>,
}

impl Crossing {
    pub fn bytes(&self) -> u64 {
        self.shape
            .iter()
            .fold(4u64, |acc, &d| acc.saturating_mul(d as u64))
    }
}

/// How a value read after a place reaches the nodes there.
#[derive(Debug, Clone, PartialEq)]
enum Reach {
    /// Computed when the model runs: it must be the one tensor crossing.
    RunTime,
    /// One of the file's initializers.
    Initializer(usize),
    /// Known before the model runs: written into the sub-model with these values.
    Known(T),
    /// Known before the model runs but too large to have been kept: computed again by the
    /// graph node of this index (from weights, shapes and other such values).
    Computed(usize),
    /// None of those (an unknown value).
    Unreachable,
}

/// A file's graph in run order, with the places it can be cut.
pub struct Chain {
    file: String,
    proto: pb::ModelProto,
    /// Graph node indices of the nodes that run when the model runs (the others compute
    /// what is known before: they travel with the nodes that read them), in an order where
    /// each follows its inputs' producers: the chain's positions.
    order: Vec<usize>,
    /// Each graph node's place in that order among all nodes.
    rank: Vec<usize>,
    names: Vec<String>,
    /// Values each position's node reads (inputs of its branch bodies included).
    reads: Vec<Vec<String>>,
    /// The graph node that makes each value.
    producer: HashMap<String, usize>,
    initializers: HashMap<String, usize>,
    scope: HashMap<String, Slot>,
    /// Inputs given their values (integers: a sample rate, a shape), as constants.
    given: HashMap<String, BoundInput>,
    /// Every input of the file as bound (those nothing reads included), as the whole file
    /// is fed.
    bound: Vec<BoundInput>,
    input: Crossing,
    /// The model's outputs, at the chain's end.
    outputs: Vec<String>,
    cuts: Vec<Crossing>,
}

/// Every value a node reads: its inputs and what its branch or loop bodies read from outside.
fn node_reads(node: &pb::NodeProto) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in node.input.iter().filter(|i| !i.is_empty()) {
        if !out.contains(i) {
            out.push(i.clone());
        }
    }
    for a in &node.attribute {
        for g in a.g.iter().chain(&a.graphs) {
            outer_reads(g, &mut out);
        }
    }
    out
}

fn outer_reads(g: &pb::GraphProto, out: &mut Vec<String>) {
    let defined: HashSet<&str> = g
        .initializer
        .iter()
        .map(|t| t.name.as_str())
        .chain(g.input.iter().map(|v| v.name.as_str()))
        .chain(
            g.node
                .iter()
                .flat_map(|n| n.output.iter().map(String::as_str)),
        )
        .collect();
    for n in &g.node {
        for r in node_reads(n) {
            if !defined.contains(r.as_str()) && !out.contains(&r) {
                out.push(r);
            }
        }
    }
}

/// Refuses a graph that names a value twice, reads one nothing defines, or has no output:
/// what no engine would run, said before anything is measured.
fn well_formed(graph: &pb::GraphProto) -> Result<(), String> {
    if graph.output.is_empty() {
        return Err("its graph has no outputs".into());
    }
    let mut made: HashMap<&str, String> = HashMap::new();
    let sources = graph
        .input
        .iter()
        .map(|v| (v.name.as_str(), format!("input {}", v.name)))
        .chain(
            graph
                .initializer
                .iter()
                .map(|t| (t.name.as_str(), format!("weight {}", t.name))),
        );
    for (name, what) in sources {
        made.entry(name).or_insert(what);
    }
    for (i, node) in graph.node.iter().enumerate() {
        for o in node.output.iter().filter(|o| !o.is_empty()) {
            let this = format!("node {}", walk::node_name(node, i, ""));
            if let Some(first) = made.insert(o.as_str(), this.clone()) {
                if !first.starts_with("weight") || graph.input.iter().any(|v| v.name == *o) {
                    return Err(format!("{o} is made twice (by {first} and {this})"));
                }
            }
        }
    }
    for (i, node) in graph.node.iter().enumerate() {
        if let Some(v) = node_reads(node)
            .iter()
            .find(|v| !made.contains_key(v.as_str()))
        {
            return Err(format!(
                "node {} reads {v}, which no node, input or weight of the graph makes",
                walk::node_name(node, i, "")
            ));
        }
    }
    Ok(())
}

/// The index of the node that makes each value.
fn producers(graph: &pb::GraphProto) -> HashMap<String, usize> {
    graph
        .node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| {
            n.output
                .iter()
                .filter(|o| !o.is_empty())
                .map(move |o| (o.clone(), i))
        })
        .collect()
}

/// The nodes the graph's outputs depend on (by their index); the others never need to run.
fn needed_nodes(graph: &pb::GraphProto) -> Vec<bool> {
    let producer = producers(graph);
    let mut needed = vec![false; graph.node.len()];
    let mut todo: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
    while let Some(v) = todo.pop() {
        if let Some(&i) = producer.get(&v) {
            if !needed[i] {
                needed[i] = true;
                todo.extend(node_reads(&graph.node[i]));
            }
        }
    }
    needed
}

/// A tensor proto holding `values` at element type `elem`.
pub fn tensor_proto(name: &str, elem: i32, shape: &[usize], values: &[f64]) -> pb::TensorProto {
    use pb::tensor_proto::DataType as D;
    let mut t = pb::TensorProto {
        name: name.to_string(),
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: elem,
        ..Default::default()
    };
    match D::try_from(elem) {
        Ok(D::Float) => t.float_data = values.iter().map(|&v| v as f32).collect(),
        Ok(D::Double) => t.double_data = values.to_vec(),
        Ok(D::Int64) => t.int64_data = values.iter().map(|&v| v as i64).collect(),
        Ok(D::Uint64 | D::Uint32) => t.uint64_data = values.iter().map(|&v| v as u64).collect(),
        Ok(D::Float16) => {
            t.int32_data = values
                .iter()
                .map(|&v| i32::from(tract_onnx::prelude::f16::from_f64(v).to_bits()))
                .collect()
        }
        Ok(D::Bfloat16) => {
            t.int32_data = values
                .iter()
                .map(|&v| ((v as f32).to_bits() >> 16) as i32)
                .collect()
        }
        _ => t.int32_data = values.iter().map(|&v| v as i32).collect(),
    }
    t
}

fn value_info(name: &str, elem: i32, shape: Option<&[usize]>) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    pb::ValueInfoProto {
        name: name.to_string(),
        r#type: Some(pb::TypeProto {
            denotation: String::new(),
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: elem,
                shape: shape.map(|s| pb::TensorShapeProto {
                    dim: s
                        .iter()
                        .map(|&d| Dimension {
                            denotation: String::new(),
                            value: Some(Value::DimValue(d as i64)),
                        })
                        .collect(),
                }),
            })),
        }),
        doc_string: String::new(),
    }
}

const FLOAT: i32 = pb::tensor_proto::DataType::Float as i32;

impl Chain {
    /// Reads the ONNX file at `path` with its inputs bound by `given` and finds its cuts.
    pub fn open(path: &Path, given: &[InputSpec]) -> Result<Chain, AnalysisError> {
        let (proto, file) = decode_file(path)?;
        Chain::new(proto, &file, given)
    }

    /// The chain of a decoded model; `file` names it in messages.
    pub fn new(
        proto: pb::ModelProto,
        file: &str,
        given: &[InputSpec],
    ) -> Result<Chain, AnalysisError> {
        let refuse = |reason: String| AnalysisError::Unplaceable {
            file: file.to_string(),
            reason,
        };
        let Walked {
            scope,
            bound_inputs,
            ..
        } = walked(&proto, file, given, None)?;
        let graph = proto
            .graph
            .as_ref()
            .ok_or_else(|| refuse("the file holds no graph".into()))?;
        if let Some(t) = graph
            .initializer
            .iter()
            .find(|t| t.data_location == Some(pb::tensor_proto::DataLocation::External as i32))
        {
            return Err(refuse(format!(
                "its weight {} is kept in an external data file, which placement does not \
                 read",
                t.name
            )));
        }
        well_formed(graph).map_err(refuse)?;
        let needed = needed_nodes(graph);
        let read: HashSet<String> = graph
            .node
            .iter()
            .zip(&needed)
            .filter(|(_, &n)| n)
            .flat_map(|(node, _)| node_reads(node))
            .chain(graph.output.iter().map(|o| o.name.clone()))
            .collect();
        // Integer inputs given their values are constants, as the engines run them; the
        // others are fed when the model runs (an input nothing reads is left out).
        let (given, fed): (Vec<BoundInput>, Vec<BoundInput>) = bound_inputs
            .iter()
            .filter(|b| read.contains(&b.name))
            .cloned()
            .partition(|b| b.values.is_some() && is_integer_type(b.elem));
        let input = match fed.as_slice() {
            [one] if one.elem == FLOAT => Crossing {
                position: 0,
                name: one.name.clone(),
                shape: one.shape.clone(),
            },
            [one] => {
                return Err(refuse(format!(
                    "its input {} is {}; placement hands float32 tensors between units",
                    one.name,
                    elem_type_name(one.elem)
                )))
            }
            [] => return Err(refuse("it has no input fed when it runs".into())),
            many => {
                return Err(refuse(format!(
                    "placement cuts a chain that starts from one input, and {} are fed when it \
                     runs ({}); give the others their values (NAME=TYPE:VALUE) where they are \
                     integers",
                    many.len(),
                    many.iter()
                        .map(|b| b.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        };
        let (order, cyclic) = walk::topological(graph, &scope_of_inputs(graph, &input));
        if let Some(&i) = cyclic.first() {
            return Err(refuse(format!(
                "its graph has a cycle through node {}",
                walk::node_name(&graph.node[i], i, "")
            )));
        }
        let mut rank = vec![0; graph.node.len()];
        for (k, &i) in order.iter().enumerate() {
            rank[i] = k;
        }
        // A node whose every output is known before the model runs is folded: it is no
        // place of the chain.
        let known_before = |node: &pb::NodeProto| {
            let outs: Vec<&String> = node.output.iter().filter(|o| !o.is_empty()).collect();
            !outs.is_empty()
                && outs
                    .iter()
                    .all(|o| matches!(scope.get(o.as_str()), Some(Ok(t)) if t.constant))
        };
        // Nor is a node whose outputs nothing reads.
        let order: Vec<usize> = order
            .into_iter()
            .filter(|&i| needed[i] && !known_before(&graph.node[i]))
            .collect();
        if order.is_empty() {
            return Err(refuse(
                "none of its nodes runs when the model runs (its outputs are known from the \
                 shapes and weights alone): there is nothing to place"
                    .into(),
            ));
        }
        // Names are shown in tables: a control character in one is shown escaped (`\x1b`).
        let names = order
            .iter()
            .map(|&i| crate::text::shown(&walk::node_name(&graph.node[i], i, "")))
            .collect();
        let reads: Vec<Vec<String>> = order.iter().map(|&i| node_reads(&graph.node[i])).collect();
        let producer = producers(graph);
        let initializers = graph
            .initializer
            .iter()
            .enumerate()
            .map(|(k, t)| (t.name.clone(), k))
            .collect();
        let outputs = graph.output.iter().map(|o| o.name.clone()).collect();
        let mut chain = Chain {
            file: file.to_string(),
            order,
            rank,
            names,
            reads,
            producer,
            initializers,
            scope,
            given: given.into_iter().map(|b| (b.name.clone(), b)).collect(),
            bound: bound_inputs,
            input,
            outputs,
            cuts: Vec::new(),
            proto,
        };
        chain.cuts = chain.find_cuts();
        Ok(chain)
    }

    /// The graph node at `position`.
    fn node(&self, position: usize) -> Option<&pb::NodeProto> {
        let graph = self.proto.graph.as_ref()?;
        graph.node.get(*self.order.get(position)?)
    }

    /// Nodes in the chain.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The name of the node at `position`.
    pub fn name(&self, position: usize) -> &str {
        self.names.get(position).map_or("", String::as_str)
    }

    /// The model's input, at position 0.
    pub fn input(&self) -> &Crossing {
        &self.input
    }

    /// Every input of the file as bound, as the whole file is fed.
    pub fn bound_inputs(&self) -> &[BoundInput] {
        &self.bound
    }

    /// The places the chain can be cut, in order.
    pub fn cuts(&self) -> &[Crossing] {
        &self.cuts
    }

    /// The tensor crossing position `p`: the model's input at 0, else a cut's.
    pub fn crossing_at(&self, p: usize) -> Option<&Crossing> {
        if p == 0 {
            Some(&self.input)
        } else {
            self.cuts.iter().find(|c| c.position == p)
        }
    }

    /// Bytes of the largest tensor the model makes when it runs (its input included).
    pub fn largest_bytes(&self) -> u64 {
        self.scope
            .values()
            .filter_map(|slot| slot.as_ref().ok())
            .filter(|t| !t.constant)
            .map(|t| t.elements().saturating_mul(elem_bytes(t.elem)))
            .fold(self.input.bytes(), u64::max)
    }

    /// Bytes of the model's outputs (float32 where the analysis does not know their type).
    pub fn output_bytes(&self) -> u64 {
        self.outputs
            .iter()
            .filter_map(|o| match self.scope.get(o) {
                Some(Ok(t)) => Some(t.elements().saturating_mul(elem_bytes(t.elem))),
                _ => None,
            })
            .sum()
    }

    fn reach(&self, value: &str) -> Reach {
        if value == self.input.name {
            return Reach::RunTime;
        }
        if let Some(b) = self.given.get(value) {
            return Reach::Known(T {
                elem: b.elem,
                shape: b.shape.clone(),
                constant: true,
                weight: false,
                value: b.values.clone(),
            });
        }
        if let Some(&k) = self.initializers.get(value) {
            if !self.producer.contains_key(value) {
                return Reach::Initializer(k);
            }
        }
        match self.scope.get(value) {
            Some(Ok(t)) if !t.constant => Reach::RunTime,
            Some(Ok(t)) if t.value.is_some() => Reach::Known(t.clone()),
            Some(Ok(_)) => match self.producer.get(value) {
                Some(&i) => Reach::Computed(i),
                None => Reach::Unreachable,
            },
            _ => Reach::Unreachable,
        }
    }

    /// Places where one float32 run-time tensor crosses and everything else crossing is known
    /// before the model runs.
    fn find_cuts(&self) -> Vec<Crossing> {
        let n = self.order.len();
        // The last position that reads each value; the model's outputs are read at the end.
        let mut last_read: HashMap<&str, usize> = HashMap::new();
        for (p, reads) in self.reads.iter().enumerate() {
            for r in reads {
                last_read.insert(r.as_str(), p);
            }
        }
        for o in &self.outputs {
            last_read.insert(o.as_str(), n);
        }
        let mut live: Vec<&str> = vec![self.input.name.as_str()];
        let mut cuts = Vec::new();
        for p in 1..n {
            for o in self.node(p - 1).iter().flat_map(|n| n.output.iter()) {
                if !o.is_empty() {
                    live.push(o.as_str());
                }
            }
            live.retain(|v| last_read.get(v).is_some_and(|&r| r >= p));
            let mut run_time = Vec::new();
            let mut blocked = false;
            for v in &live {
                match self.reach(v) {
                    Reach::RunTime => run_time.push(*v),
                    Reach::Unreachable => blocked = true,
                    _ => {}
                }
            }
            let [one] = run_time.as_slice() else { continue };
            if blocked || self.outputs.iter().any(|o| o == one) {
                continue;
            }
            if let Some(Ok(t)) = self.scope.get(*one) {
                if t.elem == FLOAT {
                    cuts.push(Crossing {
                        position: p,
                        name: one.to_string(),
                        shape: t.shape.clone(),
                    });
                }
            }
        }
        cuts
    }

    /// The sub-model of the nodes at positions `a..b`, each a cut, 0 or the chain's end: its
    /// input the tensor crossing `a`, its output the one crossing `b` (the model's outputs at
    /// the end), with the weights and the known values its nodes read.
    pub fn sub_model(&self, a: usize, b: usize) -> Result<pb::ModelProto, AnalysisError> {
        let refuse = |reason: String| AnalysisError::Unplaceable {
            file: self.file.clone(),
            reason,
        };
        let n = self.len();
        let at = |p: usize| self.crossing_at(p);
        let start = at(a)
            .filter(|_| a < b && b <= n)
            .ok_or_else(|| refuse(format!("nodes {a}..{b} do not lie between two cuts")))?;
        let end = if b == n {
            None
        } else {
            Some(at(b).ok_or_else(|| refuse(format!("position {b} is not a cut")))?)
        };
        let graph = self
            .proto
            .graph
            .as_ref()
            .ok_or_else(|| refuse("the file holds no graph".into()))?;
        let inside: HashSet<&str> = (a..b)
            .filter_map(|p| self.node(p))
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        let mut todo: Vec<String> = self.reads[a..b].iter().flatten().cloned().collect();
        if end.is_none() {
            todo.extend(self.outputs.iter().cloned());
        }
        let mut nodes: Vec<usize> = self.order[a..b].to_vec();
        let mut initializers = Vec::new();
        let mut known = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(v) = todo.pop() {
            if inside.contains(v.as_str()) || v == start.name || !seen.insert(v.clone()) {
                continue;
            }
            match self.reach(&v) {
                Reach::Initializer(k) => initializers.push(graph.initializer[k].clone()),
                Reach::Known(T {
                    elem,
                    shape,
                    value: Some(values),
                    ..
                }) => known.push(tensor_proto(&v, elem, &shape, &values)),
                Reach::Computed(i) => {
                    nodes.push(i);
                    todo.extend(graph.node.get(i).map(node_reads).unwrap_or_default());
                }
                _ => {
                    return Err(refuse(format!(
                        "nodes {a}..{b} read {v}, which is made when the model runs before them and is not the tensor that crosses the cut"
                    )))
                }
            }
        }
        nodes.sort_unstable_by_key(|&i| self.rank.get(i).copied().unwrap_or(usize::MAX));
        nodes.dedup();
        let output = |name: &str| match self.scope.get(name) {
            Some(Ok(t)) => value_info(name, t.elem, Some(&t.shape)),
            _ => graph
                .output
                .iter()
                .find(|o| o.name == name)
                .cloned()
                .unwrap_or_else(|| value_info(name, FLOAT, None)),
        };
        initializers.extend(known);
        let sub = pb::GraphProto {
            name: format!("{} nodes {a}..{b}", graph.name),
            node: nodes
                .iter()
                .filter_map(|&i| graph.node.get(i).cloned())
                .collect(),
            initializer: initializers,
            input: vec![value_info(&start.name, FLOAT, Some(&start.shape))],
            output: match end {
                Some(c) => vec![value_info(&c.name, FLOAT, Some(&c.shape))],
                None => self.outputs.iter().map(|o| output(o)).collect(),
            },
            ..Default::default()
        };
        Ok(pb::ModelProto {
            ir_version: self.proto.ir_version,
            opset_import: self.proto.opset_import.clone(),
            producer_name: "edgeprof".into(),
            functions: self.proto.functions.clone(),
            graph: Some(sub),
            ..Default::default()
        })
    }
}

/// The bound inputs as the topological sort needs them: present in scope.
fn scope_of_inputs(graph: &pb::GraphProto, input: &Crossing) -> HashMap<String, Slot> {
    let mut scope: HashMap<String, Slot> = HashMap::new();
    for t in &graph.initializer {
        scope.insert(t.name.clone(), Err(String::new()));
    }
    for v in &graph.input {
        scope.insert(v.name.clone(), Err(String::new()));
    }
    scope.insert(input.name.clone(), Err(String::new()));
    scope
}

#[cfg(test)]
mod tests {
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
    fn a_sub_model_carries_its_weights_and_the_shape_arithmetic_it_reads(
    ) -> Result<(), AnalysisError> {
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
}

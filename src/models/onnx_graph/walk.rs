//! The walk over a graph, node by node in an order where each follows its inputs' producers,
//! and over the branch bodies of the `If`s whose condition is known.

use super::*;

/// The graph's nodes in an order where every node comes after those that produce its inputs
/// (the file's own order where it already is one, as ONNX requires; exporters sometimes do
/// not keep it), and the nodes on a cycle, which have no such place.
pub(super) fn topological(
    graph: &pb::GraphProto,
    scope: &HashMap<String, Slot>,
) -> (Vec<usize>, Vec<usize>) {
    let producer: HashMap<&str, usize> = graph
        .node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect();
    let deps: Vec<Vec<usize>> = graph
        .node
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut d: Vec<usize> = n
                .input
                .iter()
                .filter(|x| !x.is_empty() && !scope.contains_key(x.as_str()))
                .filter_map(|x| producer.get(x.as_str()).copied())
                .filter(|&p| p != i || n.output.iter().all(|o| o.is_empty()))
                .collect();
            // A node that reads its own output is on a cycle of one.
            if n.input
                .iter()
                .any(|x| !x.is_empty() && n.output.contains(x))
            {
                d.push(i);
            }
            d
        })
        .collect();
    let mut state = vec![0u8; graph.node.len()]; // 0 new, 1 on the stack, 2 placed
    let mut order = Vec::with_capacity(graph.node.len());
    let mut cyclic = Vec::new();
    for start in 0..graph.node.len() {
        if state[start] != 0 {
            continue;
        }
        // Iterative depth-first search: (node, next dependency to visit).
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some((node, k)) = stack.pop() {
            if let Some(&dep) = deps[node].get(k) {
                stack.push((node, k + 1));
                match state[dep] {
                    0 => {
                        state[dep] = 1;
                        stack.push((dep, 0));
                    }
                    // Back to a node still open: a cycle.
                    1 if !cyclic.contains(&dep) => cyclic.push(dep),
                    _ => {}
                }
            } else {
                state[node] = 2;
                if !cyclic.contains(&node) {
                    order.push(node);
                }
            }
        }
    }
    // What depends on a node of a cycle cannot come before it either: it is listed after.
    cyclic.sort_unstable();
    (order, cyclic)
}

/// The walk over a graph and its costed branch bodies.
pub(super) struct Walk {
    pub(super) opset: i64,
    pub(super) nodes: Vec<NodeCost>,
    /// Scalar inputs given no value, as `NAME=TYPE:VALUE` to suggest.
    pub(super) open_scalars: Vec<String>,
    /// Weights already counted in the totals (by the name of the value that holds them).
    pub(super) counted: std::collections::HashSet<String>,
    pub(super) total: crate::models::cost::CostTotals,
}

/// The name a node goes by: its own, else its first output's, else its operator and place.
pub(super) fn node_name(node: &pb::NodeProto, index: usize, prefix: &str) -> String {
    format!(
        "{prefix}{}",
        crate::models::onnx_read::node_name(node, index)
    )
}

pub(super) fn op_label(node: &pb::NodeProto) -> String {
    if node.domain.is_empty() || node.domain == "ai.onnx" {
        node.op_type.clone()
    } else {
        format!("{}.{}", node.domain, node.op_type)
    }
}

/// A run-time node's [`super::Form`], from its inputs and attributes.
fn form(node: &pb::NodeProto, op: &str, known: &[Option<&T>]) -> super::Form {
    let data: Vec<&T> = known
        .iter()
        .enumerate()
        .filter(|(k, _)| ops::role(op, *k) == ops::Role::Data)
        .filter_map(|(_, t)| *t)
        .collect();
    let ints = |name: &str| -> Vec<usize> {
        node.attribute
            .iter()
            .find(|a| a.name == name)
            .map(|a| {
                a.ints
                    .iter()
                    .map(|&v| usize::try_from(v).unwrap_or(0))
                    .collect()
            })
            .unwrap_or_default()
    };
    let windowed = matches!(
        op,
        "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" | "LpPool"
    );
    let mut kernel = if windowed {
        ints("kernel_shape")
    } else {
        Vec::new()
    };
    // A convolution without kernel_shape takes it from its weight's spatial axes.
    if kernel.is_empty() && matches!(op, "Conv" | "ConvTranspose") {
        if let Some(w) = known.get(1).copied().flatten() {
            kernel = w.shape.iter().skip(2).copied().collect();
        }
    }
    let groups = node
        .attribute
        .iter()
        .find(|a| a.name == "group")
        .map_or(1, |a| usize::try_from(a.i).unwrap_or(1).max(1));
    let (reads, read_bytes) = known
        .iter()
        .enumerate()
        .filter_map(|(k, t)| match t {
            Some(t) if ops::role(op, k) == ops::Role::Data && !t.constant => Some((
                node.input.get(k)?.clone(),
                t.elements().saturating_mul(elem_bytes(t.elem)),
            )),
            _ => None,
        })
        .unzip();
    let rank = data.first().map_or(0, |t| t.shape.len()) as i64;
    let inner_axis = node
        .attribute
        .iter()
        .find(|a| a.name == "axis")
        .is_some_and(|a| rank > 0 && a.i != -1 && a.i != rank - 1);
    super::Form {
        inner_axis,
        reads,
        read_bytes,
        writes: node
            .output
            .iter()
            .filter(|o| !o.is_empty())
            .cloned()
            .collect(),
        input_shape: data.first().map(|t| t.shape.clone()).unwrap_or_default(),
        runtime_inputs: data.iter().filter(|t| !t.constant).count(),
        strides: if windowed {
            ints("strides")
        } else {
            Vec::new()
        },
        kernel,
        groups,
    }
}

impl NodeCost {
    fn named(name: &str, op: &str) -> NodeCost {
        NodeCost {
            name: name.to_string(),
            op: op.to_string(),
            output_shape: None,
            macs: 0,
            flops: 0,
            params: 0,
            buffers: 0,
            param_bytes: 0,
            input_bytes: 0,
            output_bytes: 0,
            dram_bytes: 0,
            folded: false,
            not_costed: None,
            after: None,
            form: super::Form::default(),
        }
    }
}

impl Walk {
    pub(super) fn graph(
        &mut self,
        graph: &pb::GraphProto,
        scope: &mut HashMap<String, Slot>,
        prefix: &str,
    ) {
        let (order, cyclic) = topological(graph, scope);
        // Nodes on a cycle never have all their inputs: their outputs are unknown to the nodes
        // that read them, and each is listed.
        for &i in &cyclic {
            for o in &graph.node[i].output {
                scope.insert(o.clone(), Err(format!("its input {o} comes from a cycle")));
            }
        }
        for i in order {
            let node = &graph.node[i];
            let name = node_name(node, i, prefix);
            self.node(node, &name, scope);
        }
        for i in cyclic {
            let node = &graph.node[i];
            let name = node_name(node, i, prefix);
            self.nodes.push(NodeCost {
                not_costed: Some("the graph has a cycle through this node".into()),
                ..NodeCost::named(&name, &op_label(node))
            });
        }
    }

    fn node(&mut self, node: &pb::NodeProto, name: &str, scope: &mut HashMap<String, Slot>) {
        let op = op_label(node);
        let inputs: Vec<Option<Slot>> =
            node.input
                .iter()
                .map(|i| {
                    if i.is_empty() {
                        None
                    } else {
                        Some(
                            scope.get(i).cloned().unwrap_or_else(|| {
                                Err(format!("its input {i} is produced nowhere"))
                            }),
                        )
                    }
                })
                .collect();
        let mut record = NodeCost::named(name, &op);
        let unknown = |why: String, scope: &mut HashMap<String, Slot>| {
            for o in &node.output {
                scope.insert(o.clone(), Err(name.to_string()));
            }
            why
        };
        // An input that is unknown: this node cannot be costed either.
        if let Some(Some(Err(since))) = inputs.iter().find(|i| matches!(i, Some(Err(_)))) {
            let why = if since.starts_with("its input") {
                since.clone()
            } else {
                record.after = Some(since.clone());
                format!("its input's shape is unknown (since node {since})")
            };
            // Later nodes trace back to the same first node.
            let root = record.after.clone().unwrap_or_else(|| name.to_string());
            for o in &node.output {
                scope.insert(o.clone(), Err(root.clone()));
            }
            record.not_costed = Some(why);
            self.nodes.push(record);
            return;
        }
        let known: Vec<Option<&T>> = inputs
            .iter()
            .map(|i| i.as_ref().and_then(|s| s.as_ref().ok()))
            .collect();
        if op == "If" {
            self.branch(node, name, &known, scope, record);
            return;
        }
        match ops::eval(node, self.opset, &known) {
            Err(why) => {
                record.not_costed = Some(unknown(why, scope));
                self.nodes.push(record);
            }
            Ok(out) => {
                // Shapes are known here, so a shape's or a size's value is too.
                let folded = !out.outputs.is_empty()
                    && (matches!(op.as_str(), "Shape" | "Size")
                        || known.iter().flatten().all(|t| t.constant)
                            && !ops::RUN_TIME.contains(&op.as_str()));
                record.output_shape = out.outputs.first().map(|t| t.shape.clone());
                // A folded node's outputs are weights when it is a Constant or every input it
                // computes on is one (a dequantized or reshaped weight).
                let data: Vec<&T> = known
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| ops::role(&op, *k) != ops::Role::Control)
                    .filter_map(|(_, t)| *t)
                    .collect();
                let weight = folded
                    && (op == "Constant" || (!data.is_empty() && data.iter().all(|t| t.weight)));
                if folded {
                    record.folded = true;
                } else {
                    self.charge(node, &op, &known, &out, &mut record);
                }
                for (o, mut t) in node.output.iter().zip(out.outputs) {
                    if o.is_empty() {
                        continue;
                    }
                    // Values stay known where they were computed from known ones (a shape
                    // from a given input's value), even where the node runs each time.
                    t.constant = folded;
                    t.weight = weight;
                    scope.insert(o.clone(), Ok(t));
                }
                self.nodes.push(record);
            }
        }
    }

    /// Fills in a run-time node's parameters and traffic and adds it to the totals.
    fn charge(
        &mut self,
        node: &pb::NodeProto,
        op: &str,
        known: &[Option<&T>],
        out: &ops::Out,
        record: &mut NodeCost,
    ) {
        record.macs = out.macs;
        record.flops = out.flops;
        record.form = form(node, op, known);
        for (k, t) in known.iter().enumerate() {
            let Some(t) = t else { continue };
            let role = ops::role(op, k);
            let bytes = t.elements().saturating_mul(elem_bytes(t.elem));
            if t.constant && t.weight {
                if role == ops::Role::Control {
                    continue;
                }
                let first_time = self.counted.insert(node.input[k].clone());
                match role {
                    ops::Role::Control => continue,
                    ops::Role::Buffer => {
                        record.buffers += t.elements();
                        if first_time {
                            self.total.buffers += t.elements();
                        }
                    }
                    ops::Role::Data => {
                        record.params += t.elements();
                        if first_time {
                            self.total.params += t.elements();
                        }
                    }
                }
                record.param_bytes += bytes;
            } else if role != ops::Role::Control {
                record.input_bytes += bytes;
            }
        }
        record.output_bytes = out
            .outputs
            .iter()
            .map(|t| t.elements().saturating_mul(elem_bytes(t.elem)))
            .sum();
        record.dram_bytes = if out.view {
            0
        } else {
            record.param_bytes + record.input_bytes + record.output_bytes
        };
        let t = &mut self.total;
        t.macs = t.macs.saturating_add(record.macs);
        t.flops = t.flops.saturating_add(record.flops);
        t.param_bytes += record.param_bytes;
        t.input_bytes += record.input_bytes;
        t.output_bytes += record.output_bytes;
        t.dram_bytes += record.dram_bytes;
    }

    /// `If`: the branch its condition selects, costed node by node under this one's name; with
    /// the condition unknown until the model runs, not costed, its outputs shaped as both
    /// branches agree.
    fn branch(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        known: &[Option<&T>],
        scope: &mut HashMap<String, Slot>,
        mut record: NodeCost,
    ) {
        let body = |attr: &str| {
            node.attribute
                .iter()
                .find(|a| a.name == attr)
                .and_then(|a| a.g.as_ref())
        };
        let (Some(then), Some(els)) = (body("then_branch"), body("else_branch")) else {
            record.not_costed = Some("it has no then_branch or else_branch".into());
            for o in &node.output {
                scope.insert(o.clone(), Err(name.to_string()));
            }
            self.nodes.push(record);
            return;
        };
        let cond = known
            .first()
            .copied()
            .flatten()
            .and_then(|t| t.value.as_ref())
            .and_then(|v| v.first().copied());
        match cond {
            Some(c) => {
                let (taken, label) = if c != 0.0 {
                    (then, "then")
                } else {
                    (els, "else")
                };
                self.nodes.push(record);
                let mut inner = scope.clone();
                for t in &taken.initializer {
                    inner.insert(t.name.clone(), initializer(t));
                }
                self.graph(taken, &mut inner, &format!("{name}/{label}/"));
                for (o, b) in node.output.iter().zip(&taken.output) {
                    let v = inner
                        .get(&b.name)
                        .cloned()
                        .unwrap_or_else(|| Err(name.to_string()));
                    scope.insert(o.clone(), v);
                }
            }
            None => {
                // Shapes both branches agree on, found without counting either.
                let mut shapes = Vec::new();
                for g in [then, els] {
                    let mut side = Walk {
                        opset: self.opset,
                        open_scalars: Vec::new(),
                        nodes: Vec::new(),
                        counted: self.counted.clone(),
                        total: crate::models::cost::CostTotals::default(),
                    };
                    let mut inner = scope.clone();
                    for t in &g.initializer {
                        inner.insert(t.name.clone(), initializer(t));
                    }
                    side.graph(g, &mut inner, "");
                    shapes.push(
                        g.output
                            .iter()
                            .map(|o| inner.get(&o.name).cloned())
                            .collect::<Vec<_>>(),
                    );
                }
                record.not_costed = Some(if self.open_scalars.is_empty() {
                    "its condition is known only when the model runs".into()
                } else {
                    format!(
                        "its condition is known only when the model runs (a scalar input's \
                         value may fix it: --input {})",
                        self.open_scalars.join(" --input ")
                    )
                });
                for (k, o) in node.output.iter().enumerate() {
                    let a = shapes[0].get(k).cloned().flatten();
                    let b = shapes[1].get(k).cloned().flatten();
                    let v = match (a, b) {
                        (Some(Ok(a)), Some(Ok(b))) if a.shape == b.shape && a.elem == b.elem => {
                            Ok(T {
                                constant: false,
                                weight: false,
                                value: None,
                                ..a
                            })
                        }
                        _ => Err(name.to_string()),
                    };
                    scope.insert(o.clone(), v);
                }
                self.nodes.push(record);
            }
        }
    }
}

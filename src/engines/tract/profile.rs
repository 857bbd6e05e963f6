//! tract's node-by-node profile, folded into the model's source layers.

use super::*;

/// Time spent in one source layer per inference, from a node-by-node profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LayerTime {
    /// The source layer name, or the tract node's own name when it maps to no layer.
    pub layer: String,
    pub mapped: bool,
    /// The median over the profiled runs.
    pub ms_per_run: f64,
    /// Each run's time, in run order (every layer is timed in every run, so the runs of
    /// different layers are interleaved).
    pub runs_ms: Vec<f64>,
    /// How many optimised tract nodes were attributed to this layer.
    pub tract_nodes: usize,
}

/// The layer a tract node belongs to: the longest layer name equal to the node name or a
/// dot-separated prefix of it (tract names the nodes it derives `{original}.{suffix}`).
pub fn map_to_layer<'a>(node_name: &str, layers: &'a [String]) -> Option<&'a str> {
    layers
        .iter()
        .filter(|l| {
            !l.is_empty()
                && node_name.starts_with(l.as_str())
                && matches!(node_name.as_bytes().get(l.len()), None | Some(b'.'))
        })
        .max_by_key(|l| l.len())
        .map(String::as_str)
}

impl TractSession {
    /// Runs one untimed inference (the first one pays for allocations and packing that later
    /// ones do not), then `runs` inferences timing every node, and folds node times into
    /// source layers (in plan order of first appearance).
    pub fn profile(&self, input: &Tensor, runs: usize) -> Result<Vec<LayerTime>, EngineError> {
        self.profile_fed(&tvec!(input.clone().into_tvalue()), runs)
    }

    /// [`TractSession::profile`] on inputs fed by name.
    pub fn profile_fed(
        &self,
        inputs: &TVec<TValue>,
        runs: usize,
    ) -> Result<Vec<LayerTime>, EngineError> {
        let model = self.plan.model();
        let runs = runs.max(1);
        // Per run, per node.
        let mut node_time = vec![vec![Duration::ZERO; model.nodes().len()]; runs];
        let mut evaluated = vec![false; model.nodes().len()];
        let mut order = Vec::new();
        contained(|| {
            let mut state = SimpleState::new(&self.plan).map_err(|e| EngineError::Run {
                reason: one_line(&e),
            })?;
            state.run(inputs.clone()).map_err(|e| EngineError::Run {
                reason: one_line(&e),
            })?;
            for times in node_time.iter_mut() {
                state
                    .run_plan_with_eval(inputs.clone(), |session, op_state, node, inputs| {
                        let start = Instant::now();
                        let result =
                            tract_onnx::tract_core::plan::eval(session, op_state, node, inputs);
                        times[node.id] += start.elapsed();
                        if !evaluated[node.id] {
                            evaluated[node.id] = true;
                            order.push(node.id);
                        }
                        result
                    })
                    .map_err(|e| EngineError::Run {
                        reason: one_line(&e),
                    })?;
            }
            Ok::<(), EngineError>(())
        })
        .map_err(self.crashed("profiling"))??;
        let mut layers: Vec<LayerTime> = Vec::new();
        for id in order {
            let node = &model.nodes()[id];
            // Sources only hand the input over; they belong to no layer and take no time.
            if node.inputs.is_empty() {
                continue;
            }
            let node_name = &node.name;
            let (layer, mapped) = match map_to_layer(node_name, &self.layer_names) {
                Some(l) => (l.to_string(), true),
                None => (node_name.clone(), false),
            };
            let ms: Vec<f64> = node_time
                .iter()
                .map(|run| run[id].as_secs_f64() * 1e3)
                .collect();
            match layers.iter_mut().find(|l| l.layer == layer) {
                Some(entry) => {
                    for (sum, t) in entry.runs_ms.iter_mut().zip(&ms) {
                        *sum += t;
                    }
                    entry.tract_nodes += 1;
                }
                None => layers.push(LayerTime {
                    layer,
                    mapped,
                    ms_per_run: 0.0,
                    runs_ms: ms,
                    tract_nodes: 1,
                }),
            }
        }
        for l in &mut layers {
            l.ms_per_run = crate::stats::median(&l.runs_ms).unwrap_or(0.0);
        }
        Ok(layers)
    }
}

//! The embedded tract engine: load a zoo model or an ONNX file, optimise it, run it with a chosen
//! thread count, and profile it node by node with times mapped back to the model's layer names.

use crate::models::graph::Model;
use crate::models::onnx;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::plan::SimpleState;
use tract_onnx::tract_core::runtime::RunOptions;

/// Where the model comes from.
pub enum ModelSource<'a> {
    /// A zoo model, exported to ONNX in memory with weights from `seed`.
    Zoo { model: &'a Model, seed: u64 },
    /// An ONNX file on disk (external data next to it is resolved).
    OnnxFile(&'a Path),
}

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("cannot read ONNX file {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{origin} is not a valid ONNX model: {reason}")]
    InvalidModel { origin: String, reason: String },
    #[error("{origin}: {reason}")]
    UnsupportedModel { origin: String, reason: String },
    #[error("tract could not optimise {origin}: {reason}")]
    Prepare { origin: String, reason: String },
    #[error("inference failed: {reason}")]
    Run { reason: String },
}

impl EngineError {
    /// True when the user's input (file, shape) is at fault rather than the engine or machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            EngineError::Unreadable { .. }
                | EngineError::InvalidModel { .. }
                | EngineError::UnsupportedModel { .. }
        )
    }
}

/// One line out of an error chain, short enough for a terminal.
fn one_line(e: &anyhow::Error) -> String {
    let text = format!("{e:#}").replace('\n', " ");
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// Thread count actually used and the executor that gives it.
fn run_options(threads: usize) -> RunOptions {
    let executor = if threads > 1 {
        Some(multithread::Executor::multithread(threads))
    } else {
        Some(multithread::Executor::SingleThread)
    };
    RunOptions {
        executor,
        ..Default::default()
    }
}

/// A model loaded, optimised and planned by tract.
pub struct TractSession {
    plan: Arc<TypedSimplePlan>,
    /// Shape of the single float32 input.
    pub input_shape: Vec<usize>,
    /// Layer names of the source graph (ONNX node names), for mapping profiles back.
    layer_names: Vec<String>,
    pub threads: usize,
    /// Parse + optimise + plan.
    pub init_time: Duration,
}

/// Time spent in one source layer per inference, from a node-by-node profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LayerTime {
    /// The source layer name, or the tract node's own name when it maps to no layer.
    pub layer: String,
    pub mapped: bool,
    pub ms_per_run: f64,
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
    /// Loads, optionally overrides the input shape (N, C, H, W) of a file, optimises and plans.
    pub fn load(
        source: ModelSource,
        input_shape: Option<&[usize]>,
        threads: usize,
    ) -> Result<TractSession, EngineError> {
        let start = Instant::now();
        let (proto, origin, dir) = match source {
            ModelSource::Zoo { model, seed } => (
                onnx::to_onnx(model, seed),
                format!("zoo model {}", model.name),
                None,
            ),
            ModelSource::OnnxFile(path) => {
                let unreadable = |reason: String| EngineError::Unreadable {
                    path: path.to_path_buf(),
                    reason,
                };
                if path.is_dir() {
                    return Err(unreadable("it is a directory".to_string()));
                }
                std::fs::File::open(path).map_err(|e| unreadable(e.to_string()))?;
                let proto = tract_onnx::onnx().proto_model_for_path(path).map_err(|e| {
                    EngineError::InvalidModel {
                        origin: path.display().to_string(),
                        reason: one_line(&e),
                    }
                })?;
                let dir = path.parent().map(|d| d.to_string_lossy().into_owned());
                (proto, path.display().to_string(), dir)
            }
        };
        let invalid = |e: anyhow::Error| EngineError::InvalidModel {
            origin: origin.clone(),
            reason: one_line(&e),
        };
        let unsupported = |reason: String| EngineError::UnsupportedModel {
            origin: origin.clone(),
            reason,
        };
        let graph: &pb::GraphProto = proto
            .graph
            .as_ref()
            .ok_or_else(|| invalid(anyhow::anyhow!("the file holds no graph")))?;
        let layer_names: Vec<String> = graph.node.iter().map(|n| n.name.clone()).collect();
        let parsed = tract_onnx::onnx()
            .parse(&proto, dir.as_deref())
            .map_err(invalid)?;
        if !parsed.unresolved_inputs.is_empty() {
            return Err(invalid(anyhow::anyhow!(
                "inputs {:?} are produced by no node",
                parsed.unresolved_inputs
            )));
        }
        let mut model = parsed.model;
        if model.inputs.len() != 1 {
            return Err(unsupported(format!(
                "edgeprof runs models with exactly one input; this one has {}",
                model.inputs.len()
            )));
        }
        if let Some(shape) = input_shape {
            model
                .set_input_fact(0, f32::fact(shape).into())
                .map_err(invalid)?;
        }
        let typed = model.into_optimized().map_err(|e| EngineError::Prepare {
            origin: origin.clone(),
            reason: one_line(&e),
        })?;
        let fact = typed.input_fact(0).map_err(invalid)?.clone();
        if fact.datum_type != f32::datum_type() {
            return Err(unsupported(format!(
                "its input is {:?}; edgeprof feeds float32 inputs only",
                fact.datum_type
            )));
        }
        let input_shape = fact
            .shape
            .as_concrete()
            .map(|s| s.to_vec())
            .ok_or_else(|| {
                unsupported(format!(
                    "its input shape {:?} is not fully known; give it with --input CxHxW and --batch N",
                    fact.shape
                ))
            })?;
        let threads = threads.max(1);
        let plan = typed
            .into_runnable_with_options(&run_options(threads))
            .map_err(|e| EngineError::Prepare {
                origin: origin.clone(),
                reason: one_line(&e),
            })?;
        Ok(TractSession {
            plan,
            input_shape,
            layer_names,
            threads,
            init_time: start.elapsed(),
        })
    }

    /// A reproducible input: uniform in [-1, 1) from `seed`.
    pub fn make_input(&self, seed: u64) -> Result<Tensor, EngineError> {
        let data = crate::models::weights::input_data(&self.input_shape, seed);
        Tensor::from_shape(&self.input_shape, &data).map_err(|e| EngineError::Run {
            reason: one_line(&e),
        })
    }

    /// One inference; returns the first output as float32 values with its shape.
    pub fn run(&self, input: &Tensor) -> Result<(Vec<usize>, Vec<f32>), EngineError> {
        let run_err = |e: anyhow::Error| EngineError::Run {
            reason: one_line(&e),
        };
        let outputs = self
            .plan
            .run(tvec!(input.clone().into_tvalue()))
            .map_err(run_err)?;
        let first = outputs
            .first()
            .ok_or_else(|| run_err(anyhow::anyhow!("the model produced no output")))?;
        let values = first
            .cast_to::<f32>()
            .map_err(run_err)?
            .to_plain_array_view::<f32>()
            .map_err(run_err)?
            .iter()
            .copied()
            .collect();
        Ok((first.shape().to_vec(), values))
    }

    /// Wall time of one inference.
    pub fn time_one(&self, input: &Tensor) -> Result<Duration, EngineError> {
        let value = input.clone().into_tvalue();
        let start = Instant::now();
        self.plan.run(tvec!(value)).map_err(|e| EngineError::Run {
            reason: one_line(&e),
        })?;
        Ok(start.elapsed())
    }

    /// Runs `runs` inferences timing every node, and folds node times into source layers
    /// (in plan order of first appearance).
    pub fn profile(&self, input: &Tensor, runs: usize) -> Result<Vec<LayerTime>, EngineError> {
        let model = self.plan.model();
        let mut node_time = vec![Duration::ZERO; model.nodes().len()];
        let mut evaluated = vec![false; model.nodes().len()];
        let mut order = Vec::new();
        let mut state = SimpleState::new(&self.plan).map_err(|e| EngineError::Run {
            reason: one_line(&e),
        })?;
        let runs = runs.max(1);
        for _ in 0..runs {
            state
                .run_plan_with_eval(
                    tvec!(input.clone().into_tvalue()),
                    |session, op_state, node, inputs| {
                        let start = Instant::now();
                        let result =
                            tract_onnx::tract_core::plan::eval(session, op_state, node, inputs);
                        node_time[node.id] += start.elapsed();
                        if !evaluated[node.id] {
                            evaluated[node.id] = true;
                            order.push(node.id);
                        }
                        result
                    },
                )
                .map_err(|e| EngineError::Run {
                    reason: one_line(&e),
                })?;
        }
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
            let ms = node_time[id].as_secs_f64() * 1e3 / runs as f64;
            match layers.iter_mut().find(|l| l.layer == layer) {
                Some(entry) => {
                    entry.ms_per_run += ms;
                    entry.tract_nodes += 1;
                }
                None => layers.push(LayerTime {
                    layer,
                    mapped,
                    ms_per_run: ms,
                    tract_nodes: 1,
                }),
            }
        }
        Ok(layers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::zoo::{self, ModelParams};

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
}

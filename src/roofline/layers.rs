//! A model's layers as points of the roofline: tract's node profile (one warm-up inference,
//! then the profiled runs) joined with each layer's analytic FLOPs and bytes. Profiling runs in
//! a worker process of its own (`edgeprof layers-worker`, started by [`profile_in_worker`]), so
//! that `roofline layers` and the terminal UI's drill-down measure the same way: the same runs,
//! the same warm-up, nothing else of edgeprof's on the cores.

use super::{Level, PointSource, Precision, Program};
use crate::models::onnx_graph::InputSpec;
use crate::protocol::Condition;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Profiled inferences by default: each layer's time is their median.
pub const RUNS: usize = 20;

/// The longest a worker may profile before it is stopped.
const WORKER_TIMEOUT: Duration = Duration::from_secs(3600);

/// The model whose layers to profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LayerModel {
    /// A zoo model built at its input, batch and classes.
    Zoo {
        name: String,
        channels: usize,
        height: usize,
        width: usize,
        batch: usize,
        classes: usize,
    },
    /// An ONNX file fed at its inputs (`--input` specs; none: the file's own shapes).
    File { path: PathBuf, inputs: Vec<String> },
}

/// A layer profile to make: what `edgeprof layers-worker` reads on its stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerRequest {
    pub model: LayerModel,
    /// tract's threads (at least 1).
    pub threads: usize,
    pub runs: usize,
}

impl LayerRequest {
    /// The layers of the model a condition of a stored sweep ran, on its threads, profiled as
    /// `roofline layers` profiles them by default.
    pub fn for_condition(
        c: &Condition,
        classes: usize,
    ) -> Result<LayerRequest, crate::error::BadInput> {
        let model = match &c.model {
            crate::config::ModelRef::Zoo(name) => LayerModel::Zoo {
                name: name.clone(),
                channels: c.input.channels,
                height: c.input.height,
                width: c.input.width,
                batch: c.batch,
                classes,
            },
            crate::config::ModelRef::Onnx(path) => LayerModel::File {
                path: path.clone(),
                inputs: c
                    .named_inputs
                    .as_deref()
                    .map(|n| n.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default(),
            },
            other => {
                return Err(crate::error::BadInput(format!(
                    "{other}: only zoo models and ONNX files have a layer profile"
                )))
            }
        };
        Ok(LayerRequest {
            model,
            threads: crate::protocol::resolve_threads(c.threads),
            runs: RUNS,
        })
    }

    /// Profiles in this process (what the worker does).
    pub fn profile(&self) -> crate::error::Result<LayerProfile> {
        match &self.model {
            LayerModel::Zoo {
                name,
                channels,
                height,
                width,
                batch,
                classes,
            } => {
                let params = crate::models::zoo::ModelParams {
                    num_classes: *classes,
                    channels: *channels,
                    height: *height,
                    width: *width,
                    batch: *batch,
                };
                let model = crate::models::zoo::build(name, &params)
                    .map_err(|e| crate::error::BadInput(e.to_string()))?;
                layer_profile(&model, self.threads, self.runs)
            }
            LayerModel::File { path, inputs } => {
                let given = inputs
                    .iter()
                    .map(|t| {
                        t.parse()
                            .map_err(|e| crate::error::BadInput(format!("{e}")))
                    })
                    .collect::<Result<Vec<InputSpec>, _>>()?;
                file_layer_profile(path, &given, self.threads, self.runs)
            }
        }
    }

    /// What the profile is of, in words.
    pub fn name(&self) -> String {
        match &self.model {
            LayerModel::Zoo { name, .. } => name.clone(),
            LayerModel::File { path, .. } => path.display().to_string(),
        }
    }
}

/// Profiles `request` in a worker process (`edgeprof layers-worker`), stopped when `cancel`
/// is raised.
pub fn profile_in_worker(
    request: &LayerRequest,
    cancel: Option<&crate::collect::stop::Cancel>,
) -> Result<LayerProfile, crate::collect::child::AskError> {
    let input = serde_json::to_vec(request).map_err(|e| {
        crate::collect::child::AskError::Failed(crate::error::ChildFailed(format!(
            "cannot encode the request for the layers' worker: {e}"
        )))
    })?;
    crate::collect::child::ask_worker(
        &["layers-worker"],
        &input,
        WORKER_TIMEOUT,
        &format!("the worker profiling the layers of {}", request.name()),
        cancel,
    )
}

/// A model's layers as tract ran them: one point per layer, or per group of layers tract fused
/// into one node, with each profiled run's seconds beside it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LayerProfile {
    pub programs: Vec<Program>,
    /// Per program, each run's seconds (the runs of all programs interleaved: every run times
    /// every layer).
    pub runs_s: Vec<Vec<f64>>,
}

/// A profile's layers ranked by the end-to-end time each can save under `ceilings`, with how
/// steady the first place is over resamples of the runs: what `roofline layers` prints and
/// the UI's layer view shows.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub ranks: Vec<crate::roofline::advice::LayerRank>,
    /// The share of resamples of the runs in which the first layer stays first (None: one run).
    pub stability: Option<f64>,
    /// How many runs the profile timed.
    pub runs: usize,
}

/// Resamples drawn to tell how steady a ranking is.
pub const STABILITY_RESAMPLES: usize = 1000;

impl LayerProfile {
    /// Its layers ranked under `ceilings` (see [`Ranked`]).
    pub fn ranked(&self, ceilings: &crate::roofline::Ceilings) -> Ranked {
        use crate::roofline::advice;
        Ranked {
            ranks: advice::rank_layers(&self.programs, ceilings),
            stability: advice::top_stability(
                &self.programs,
                &self.runs_s,
                ceilings,
                STABILITY_RESAMPLES,
            ),
            runs: self.runs_s.first().map_or(0, Vec::len),
        }
    }

    /// The layer `label`'s median run and half its 95 % interval, in milliseconds.
    pub fn spread_ms(&self, label: &str) -> Option<(f64, f64)> {
        let k = self.programs.iter().position(|p| p.label == label)?;
        let runs_ms: Vec<f64> = self.runs_s.get(k)?.iter().map(|s| s * 1e3).collect();
        let median = crate::stats::median(&runs_ms)?;
        let half = crate::stats::median_interval(&runs_ms, crate::stats::BOOTSTRAP_ROUNDS)
            .map_or(0.0, |(low, high)| (high - low) / 2.0);
        Some((median, half))
    }
}

/// The most of a saved profile read.
const MAX_SAVED_BYTES: u64 = 256 << 20;

/// A profile saved as `roofline layers --json` writes it (its `layers` and `runs_s`).
pub fn read_saved(path: &Path) -> Result<LayerProfile, crate::error::BadInput> {
    #[derive(Deserialize)]
    struct Saved {
        layers: Vec<Program>,
        runs_s: Vec<Vec<f64>>,
    }
    let text = crate::collect::read_capped(path, MAX_SAVED_BYTES)
        .map_err(|e| crate::error::BadInput(format!("cannot read {}: {e}", path.display())))?;
    let saved: Saved = serde_json::from_str(&text).map_err(|e| {
        crate::error::BadInput(format!(
            "{} is not a saved layer profile (the --json output of roofline layers): {e}",
            path.display()
        ))
    })?;
    if saved.runs_s.len() != saved.layers.len() {
        return Err(crate::error::BadInput(format!(
            "{}: {} layers but run times for {}",
            path.display(),
            saved.layers.len(),
            saved.runs_s.len()
        )));
    }
    for p in &saved.layers {
        p.check().map_err(|e| {
            crate::error::BadInput(format!("{}: layer {}: {}", path.display(), p.label, e.0))
        })?;
    }
    Ok(LayerProfile {
        programs: saved.layers,
        runs_s: saved.runs_s,
    })
}

/// Profiles `model` in tract `runs` times on `threads` threads. The analytic FLOPs and DRAM
/// bytes of each layer meet tract's node times; a layer tract timed no node for was fused into
/// a neighbour, and joins it as a group named `a+b` with the group's summed FLOPs and bytes: an
/// element-wise layer joins the group before it, any other the next layer that has time (tract
/// may keep a fused chain under its last layer's name).
pub fn layer_profile(
    model: &crate::models::graph::Model,
    threads: usize,
    runs: usize,
) -> crate::error::Result<LayerProfile> {
    use crate::engines::tract::{ModelSource, TractSession};
    let costs = crate::models::cost::analyze(model);
    let session = TractSession::load(
        ModelSource::Zoo {
            model,
            seed: crate::models::onnx::DEFAULT_SEED,
        },
        None,
        threads,
    )?;
    let input = session.make_input(crate::models::onnx::DEFAULT_SEED)?;
    let times = session.profile(&input, runs.max(1))?;
    Ok(group_layers(&costs.layers, &times))
}

/// [`layer_profile`] of the ONNX file at `path` fed at `given` (as `bench` feeds it): its
/// run-time nodes grouped as tract fuses them
/// ([`crate::models::onnx_graph::fused_groups`]), each group's FLOPs and bytes from the
/// node-by-node analysis and its time the sum of its members' node times. A group tract gave no
/// time (done in place, or folded into another) is left out, its work with it; so are nodes the
/// analysis could not cost (`models info` names them).
pub fn file_layer_profile(
    path: &std::path::Path,
    given: &[crate::models::onnx_graph::InputSpec],
    threads: usize,
    runs: usize,
) -> crate::error::Result<LayerProfile> {
    use crate::models::onnx_graph as graph;
    let cost = graph::analyse_file(path, given, None)?;
    let bound = graph::bind_file_inputs(path, given, None)?;
    let (session, fed) = crate::engines::tract::TractSession::load_fed(
        path,
        &bound,
        threads,
        crate::models::onnx::DEFAULT_SEED,
    )?;
    let times = session.profile_fed(&fed, runs.max(1))?;
    let mut out = LayerProfile::default();
    for members in graph::fused_groups(&cost) {
        let nodes: Vec<&graph::NodeCost> =
            members.iter().filter_map(|&i| cost.nodes.get(i)).collect();
        let mut runs_ms: Option<Vec<f64>> = None;
        for t in times.iter().filter(|t| {
            t.mapped
                && nodes
                    .iter()
                    .any(|n| graph::source_node_name(&n.name) == t.layer)
        }) {
            match &mut runs_ms {
                Some(sum) => sum.iter_mut().zip(&t.runs_ms).for_each(|(s, v)| *s += v),
                None => runs_ms = Some(t.runs_ms.clone()),
            }
        }
        let Some(runs_ms) = runs_ms else { continue };
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        out.programs.push(Program {
            label: names.join("+"),
            precision: Precision::Fp32,
            flops: nodes.iter().map(|n| n.flops as f64).sum(),
            seconds: crate::stats::median(&runs_ms).unwrap_or(0.0) / 1e3,
            traffic: vec![(Level::Dram, nodes.iter().map(|n| n.dram_bytes as f64).sum())],
            source: PointSource::Analytic,
            basis: vec!["time from tract's node profile (the median run)".to_string()],
        });
        out.runs_s.push(runs_ms.iter().map(|ms| ms / 1e3).collect());
    }
    Ok(out)
}

/// Joins analytic layer costs with profiled layer times (see [`layer_profile`]).
pub fn group_layers(
    costs: &[crate::models::cost::LayerCost],
    times: &[crate::engines::tract::LayerTime],
) -> LayerProfile {
    struct Group {
        names: Vec<String>,
        flops: f64,
        bytes: f64,
        runs_ms: Option<Vec<f64>>,
    }
    let mut groups: Vec<Group> = Vec::new();
    // Layers without time waiting for the next layer that has some.
    let mut pending: Vec<&crate::models::cost::LayerCost> = Vec::new();
    for cost in costs {
        let timed = times.iter().find(|t| t.mapped && t.layer == cost.name);
        match timed {
            Some(t) => {
                let mut g = Group {
                    names: Vec::new(),
                    flops: 0.0,
                    bytes: 0.0,
                    runs_ms: Some(t.runs_ms.clone()),
                };
                for p in pending.drain(..).chain(std::iter::once(cost)) {
                    g.names.push(p.name.clone());
                    g.flops += p.flops as f64;
                    g.bytes += p.dram_bytes as f64;
                }
                groups.push(g);
            }
            None => match groups.last_mut() {
                Some(g)
                    if pending.is_empty()
                        && crate::models::graph::FUSED_AFTER.contains(&cost.kind) =>
                {
                    g.names.push(cost.name.clone());
                    g.flops += cost.flops as f64;
                    g.bytes += cost.dram_bytes as f64;
                }
                _ => pending.push(cost),
            },
        }
    }
    // Untimed layers at the end belong to the last group.
    if let Some(g) = groups.last_mut() {
        for p in pending.drain(..) {
            g.names.push(p.name.clone());
            g.flops += p.flops as f64;
            g.bytes += p.dram_bytes as f64;
        }
    }
    let mut out = LayerProfile::default();
    for g in groups {
        let Some(runs_ms) = g.runs_ms else { continue };
        let seconds = crate::stats::median(&runs_ms).unwrap_or(0.0) / 1e3;
        out.programs.push(Program {
            label: g.names.join("+"),
            precision: Precision::Fp32,
            flops: g.flops,
            seconds,
            traffic: vec![(Level::Dram, g.bytes)],
            source: PointSource::Analytic,
            basis: vec!["time from tract's node profile (the median run)".to_string()],
        });
        out.runs_s.push(runs_ms.iter().map(|ms| ms / 1e3).collect());
    }
    out
}

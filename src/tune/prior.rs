//! The tuner's prior: what the device's measurement database predicts each candidate of a
//! search will cost before any of them runs, so the guided search starts from good
//! configurations and its Gaussian process models only what the prior gets wrong.
//!
//! A candidate's prior is, in order of preference:
//! - **measured before**: the mean of this model's own earlier trials of the same
//!   configuration (a second tuning starts where the first ended);
//! - **transferred**: the configuration's effect measured on other models on this device —
//!   each other model's per-sample cost relative to its own scale, the median over models —
//!   on top of this model's scale. The effect is looked up for the same configuration, else
//!   the nearest one measured (same engine, options and threads on any core set or batch, then
//!   same engine and options, then same engine). A model's scale is its latency on tract at
//!   the fewest profiled threads as the per-layer cost model predicts it from its layers, fitted
//!   without that model's own profiles; where this model has earlier trials, their median
//!   offset from the transferred effects sets its scale instead;
//! - **from the layers**: an engine at the options its layer profiles were measured at, on all
//!   cores or on a core set they were measured on, without any trial to go on, as the
//!   per-layer cost model predicts it.
//!
//! Each comes with the standard deviation of its logarithm: small for a measured
//! configuration, growing with every step away from an exact match and with the spread of the
//! effect across models.

use crate::tune::costmodel::{self, CostModel, Db, Profile};
use crate::tune::{Candidate, Measured, Objective, Space};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Tells a trial line of the database from a profile line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Trial,
}

/// One measured configuration of one model, kept in the device's database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    pub kind: Kind,
    /// The zoo model's name or the ONNX file's path, as the tuner names it.
    pub model: String,
    pub input: String,
    pub candidate: Candidate,
    pub measured: Measured,
    /// `tune` (a live trial), `table` (imported from an exhaustive run's table).
    pub source: String,
    pub written: String,
}

impl TrialRecord {
    pub fn new(
        model: &str,
        input: &str,
        candidate: &Candidate,
        measured: Measured,
        source: &str,
    ) -> TrialRecord {
        TrialRecord {
            kind: Kind::Trial,
            model: model.to_string(),
            input: input.to_string(),
            candidate: candidate.clone(),
            measured,
            source: source.to_string(),
            written: crate::text::now_rfc3339(),
        }
    }
}

/// Where a candidate's prior came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// This model's own earlier trials of the same configuration.
    Measured,
    /// Other models' trials: 0 for the same configuration, higher for a looser match.
    Transferred { level: usize },
    /// The per-layer cost model of tract.
    Layers,
}

/// One candidate's prior: the natural logarithm of its cost and that logarithm's standard
/// deviation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub log_cost: f64,
    pub sd: f64,
    pub source: Source,
}

/// The prior of every candidate of a space (None: nothing to go on for it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prior {
    pub entries: Vec<Option<Entry>>,
    /// Other models whose trials the transferred effects rest on.
    pub models: Vec<String>,
    /// This model's own earlier trials used.
    pub own_trials: usize,
    /// Models with layer profiles behind the per-layer cost model, and its operator probes.
    pub profiled_models: usize,
    pub profiled_probes: usize,
    /// The engines those layer profiles were measured on.
    #[serde(default)]
    pub profiled_engines: Vec<String>,
}

impl Prior {
    /// Whether it predicts no candidate.
    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(Option::is_none)
    }

    /// How many candidates it predicts.
    pub fn predicted(&self) -> usize {
        self.entries.iter().flatten().count()
    }

    /// One sentence on what it rests on.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "no prior: the database holds no trial of any model and no layer profile \
                    to predict these configurations from"
                .to_string();
        }
        let mut parts = Vec::new();
        if self.own_trials > 0 {
            parts.push(format!(
                "{} earlier trial(s) of this model",
                self.own_trials
            ));
        }
        if !self.models.is_empty() {
            parts.push(format!(
                "trials of {} other model(s) ({})",
                self.models.len(),
                self.models.join(", ")
            ));
        }
        if self.profiled_models > 0 {
            let probes = if self.profiled_probes > 0 {
                format!(" and {} operator probe(s)", self.profiled_probes)
            } else {
                String::new()
            };
            let engines = if self.profiled_engines.iter().any(|e| e != "tract") {
                format!(" ({})", self.profiled_engines.join(", "))
            } else {
                String::new()
            };
            parts.push(format!(
                "layer profiles of {} model(s){probes}{engines}",
                self.profiled_models
            ));
        }
        format!(
            "prior for {} of {} candidates from {}",
            self.predicted(),
            self.entries.len(),
            parts.join(", ")
        )
    }
}

/// The cost of `m` per sample under `objective`, as a natural logarithm: latencies are of a
/// whole batch, so they are divided by it; throughput's cost is per sample already.
fn per_sample(m: &Measured, batch: usize, objective: Objective) -> f64 {
    let cost = objective.cost(m).max(f64::MIN_POSITIVE).ln();
    match objective {
        Objective::Throughput => cost,
        _ => cost - (batch.max(1) as f64).ln(),
    }
}

/// The reverse of [`per_sample`]'s batch division.
fn batch_term(batch: usize, objective: Objective) -> f64 {
    match objective {
        Objective::Throughput => 0.0,
        _ => (batch.max(1) as f64).ln(),
    }
}

/// Levels of likeness between configurations, most alike first: which of a candidate's
/// engine, device, options, batch, threads and core set its key keeps at each level.
const LEVELS: [[bool; 6]; 5] = [
    [true, true, true, true, true, true],
    [true, true, true, true, true, false],
    [true, true, true, false, true, true],
    [true, true, true, false, false, false],
    [true, true, false, false, false, false],
];

/// The key a candidate is looked up by at `level`.
fn key(c: &Candidate, level: usize) -> String {
    let fields = [
        c.engine.clone(),
        c.device.to_string(),
        serde_json::Value::Object(c.options.clone()).to_string(),
        c.batch.to_string(),
        c.threads.to_string(),
        c.cores.label.clone(),
    ];
    let keep = LEVELS[level.min(LEVELS.len() - 1)];
    fields
        .into_iter()
        .zip(keep)
        .filter_map(|(f, k)| k.then_some(f))
        .collect::<Vec<_>>()
        .join("|")
}

/// Standard deviation of a transferred effect's logarithm at `level` before the spread across
/// models: about the run-to-run noise of one measurement for an exact match, more for each
/// step away from it.
fn level_sd(level: usize) -> f64 {
    0.1 + 0.15 * level as f64
}

/// Standard deviation of a model's scale taken from the per-layer cost model (held out, it
/// predicted every zoo model within ±20 % on the development VM, most within ±10 %).
const LAYERS_SD: f64 = 0.2;
/// Standard deviation of a configuration measured before (run-to-run noise).
const MEASURED_SD: f64 = 0.1;

/// The per-layer cost model's latency for a model, in ms: fitted on every latest profile of
/// `engine` at `threads` on `cores` (None: every CPU) but the model's own, summed over its
/// planned groups (a zoo model's, a probe's or an ONNX file's: [`costmodel::groups_of`]). None
/// for a model whose layers cannot be read, or without profiles to fit.
fn layers_ms(
    latest: &[&Profile],
    engine: &str,
    model: &str,
    input: &str,
    (threads, cores): (usize, Option<&[usize]>),
) -> Option<f64> {
    let others: Vec<&Profile> = latest
        .iter()
        .filter(|p| p.model != model)
        .copied()
        .collect();
    let fitted = CostModel::fit_on(&others, engine, threads, cores)?;
    let groups = costmodel::groups_of(model, input).ok()?;
    let (ms, _) = fitted.predict(&groups);
    (ms > 0.0 && ms.is_finite()).then_some(ms)
}

/// Whether a candidate runs as its engine's layer profiles were measured: tract (it has no
/// options), or onnxruntime at its harness's defaults (every graph optimisation, sequential
/// execution, spinning threads), or PyTorch eager with one inter-op thread: the options
/// `costmodel profile --engine onnxruntime|pytorch` runs.
fn profiled_as(c: &Candidate) -> bool {
    use serde_json::Value;
    match c.engine.as_str() {
        "tract" => true,
        "pytorch" => c.options.iter().all(|(k, v)| match (k.as_str(), v) {
            ("mode", Value::String(s)) => s == "eager",
            ("inter_op_threads", v) => v.as_u64() == Some(1),
            _ => false,
        }),
        "onnxruntime" => c.options.iter().all(|(k, v)| match (k.as_str(), v) {
            ("graph_optimization_level", Value::String(s)) => s == "all",
            ("execution_mode", Value::String(s)) => s == "sequential",
            ("spinning", Value::Bool(b)) => *b,
            ("inter_op_threads", v) => v.as_u64() == Some(1),
            _ => false,
        }),
        _ => false,
    }
}

/// Median and scaled median absolute deviation.
fn centre(values: &[f64]) -> Option<(f64, f64)> {
    let m = crate::stats::median(values)?;
    let dev: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    Some((m, 1.4826 * crate::stats::median(&dev).unwrap_or(0.0)))
}

/// Builds the prior of `space`'s candidates for `model` at `input` from `db`. `own`: whether
/// the model's own earlier trials count (a replay, which judges a first tuning, leaves them
/// out).
pub fn build(
    db: &Db,
    model: &str,
    input: &str,
    space: &Space,
    objective: Objective,
    own: bool,
) -> Prior {
    let latest = db.latest();
    let tract: Vec<&Profile> = latest
        .iter()
        .filter(|p| p.engine == "tract")
        .copied()
        .collect();
    let reference_threads = tract.iter().map(|p| p.threads).min();
    let mut scales: BTreeMap<(String, String), Option<f64>> = BTreeMap::new();
    let mut scale_of = |m: &str, i: &str| -> Option<f64> {
        *scales
            .entry((m.to_string(), i.to_string()))
            .or_insert_with(|| {
                layers_ms(&tract, "tract", m, i, (reference_threads?, None)).map(f64::ln)
            })
    };
    // Other models' effects per level and key: per model, the mean of its trials' offsets.
    let mut effects: Vec<BTreeMap<String, BTreeMap<String, Vec<f64>>>> =
        vec![BTreeMap::new(); LEVELS.len()];
    let mut models = std::collections::BTreeSet::new();
    let mut mine: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut own_trials = 0;
    for t in &db.trials {
        let cost = per_sample(&t.measured, t.candidate.batch, objective);
        if t.model == model && t.input == input {
            if own {
                mine.entry(key(&t.candidate, 0)).or_default().push(cost);
                own_trials += 1;
            }
            continue;
        }
        if t.model == model {
            continue;
        }
        let Some(scale) = scale_of(&t.model, &t.input) else {
            continue;
        };
        models.insert(t.model.clone());
        for (level, map) in effects.iter_mut().enumerate() {
            map.entry(key(&t.candidate, level))
                .or_default()
                .entry(t.model.clone())
                .or_default()
                .push(cost - scale);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    // The transferred effect of a configuration: (log effect, sd, level).
    let effect = |c: &Candidate| -> Option<(f64, f64, usize)> {
        (0..LEVELS.len()).find_map(|level| {
            let per_model: Vec<f64> = effects[level]
                .get(&key(c, level))?
                .values()
                .map(|v| mean(v))
                .collect();
            let (m, spread) = centre(&per_model)?;
            Some((m, (level_sd(level).powi(2) + spread.powi(2)).sqrt(), level))
        })
    };
    // This model's scale: from its own trials where they meet transferred effects, else from
    // its layers.
    let own_offsets: Vec<f64> = space
        .candidates
        .iter()
        .filter_map(|c| {
            let measured = mine.get(&key(c, 0))?;
            Some(mean(measured) - effect(c)?.0)
        })
        .collect();
    let scale = match centre(&own_offsets) {
        Some((m, spread)) => Some((m, (MEASURED_SD.powi(2) + spread.powi(2)).sqrt())),
        None => scale_of(model, input).map(|s| (s, LAYERS_SD)),
    };
    // The per-layer prediction of this model per engine, thread count and core set, fitted
    // once each.
    type Configuration = (String, usize, Option<Vec<usize>>);
    let mut own_layers: BTreeMap<Configuration, Option<f64>> = BTreeMap::new();
    let entries = space
        .candidates
        .iter()
        .map(|c| {
            let batch = batch_term(c.batch, objective);
            if let Some(measured) = mine.get(&key(c, 0)) {
                return Some(Entry {
                    log_cost: mean(measured) + batch,
                    sd: MEASURED_SD,
                    source: Source::Measured,
                });
            }
            if let (Some((e, sd, level)), Some((s, s_sd))) = (effect(c), scale) {
                return Some(Entry {
                    log_cost: s + e + batch,
                    sd: (sd.powi(2) + s_sd.powi(2)).sqrt(),
                    source: Source::Transferred { level },
                });
            }
            // An engine profiled layer by layer, at the options it was profiled at, on all
            // cores or on a core set it was profiled on, from its layers alone (no trial to go
            // on).
            if profiled_as(c) && c.device == crate::config::Device::Cpu {
                let cores = costmodel::profile_cores(c.cores.cpus.as_deref());
                let ms = (*own_layers
                    .entry((c.engine.clone(), c.threads, cores.clone()))
                    .or_insert_with(|| {
                        layers_ms(
                            &latest,
                            &c.engine,
                            model,
                            input,
                            (c.threads, cores.as_deref()),
                        )
                    }))?;
                let per_call = match objective {
                    Objective::Throughput => ms.ln(),
                    _ => ms.ln() + batch,
                };
                return Some(Entry {
                    log_cost: per_call,
                    sd: LAYERS_SD + 0.1,
                    source: Source::Layers,
                });
            }
            None
        })
        .collect();
    let mut profiled: Vec<&str> = latest
        .iter()
        .filter(|p| !p.is_probe())
        .map(|p| p.model.as_str())
        .collect();
    profiled.sort();
    profiled.dedup();
    let mut probes: Vec<&str> = latest
        .iter()
        .filter(|p| p.is_probe())
        .map(|p| p.model.as_str())
        .collect();
    probes.sort();
    probes.dedup();
    let mut engines: Vec<String> = latest.iter().map(|p| p.engine.clone()).collect();
    engines.sort();
    engines.dedup();
    Prior {
        entries,
        models: models.into_iter().collect(),
        own_trials,
        profiled_models: profiled.len(),
        profiled_probes: probes.len(),
        profiled_engines: engines,
    }
}

#[cfg(test)]
mod tests;

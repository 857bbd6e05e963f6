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
    precision: costmodel::Precision,
) -> Option<f64> {
    let others: Vec<&Profile> = latest
        .iter()
        .filter(|p| p.model != model)
        .copied()
        .collect();
    let fitted = CostModel::fit_in(&others, (engine, threads, cores), precision)?;
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
                layers_ms(
                    &tract,
                    "tract",
                    m,
                    i,
                    (reference_threads?, None),
                    costmodel::Precision::Fp32,
                )
                .map(f64::ln)
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
    type Configuration = (String, usize, Option<Vec<usize>>, costmodel::Precision);
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
                let precision = costmodel::Precision::of_models(&c.precision)?;
                let ms = (*own_layers
                    .entry((c.engine.clone(), c.threads, cores.clone(), precision))
                    .or_insert_with(|| {
                        // In the candidate's precision: from the layers profiled in it.
                        layers_ms(
                            &latest,
                            &c.engine,
                            model,
                            input,
                            (c.threads, cores.as_deref()),
                            precision,
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
mod tests {
    use super::*;
    use crate::collect::device::Cluster;
    use crate::error::Context;
    use crate::tune::search::{self, Settings, Strategy};
    use crate::tune::{core_sets, SpaceSpec};

    /// The core sets of one cluster of two CPUs.
    fn two_cpus() -> Vec<crate::tune::CoreSet> {
        core_sets(
            &[Cluster {
                cpus: vec![0, 1],
                capacity: None,
                max_freq_mhz: None,
            }],
            &[0, 1],
        )
    }

    /// A space of tract, candle and onnxruntime (two option values) on 1 or 2 threads, two core
    /// sets, batch 1 or 4: 48 candidates, like the tables kept with the tests.
    fn space() -> Space {
        let sets = two_cpus();
        SpaceSpec {
            engines: vec!["tract".into(), "candle".into(), "onnxruntime".into()],
            threads: vec![1, 2],
            batch: vec![1, 4],
            core_sets: sets,
            devices: vec![crate::config::Device::Cpu],
            precisions: Vec::new(),
            options: [(
                "onnxruntime".to_string(),
                crate::tune::OptionSpace::from([
                    (
                        "graph_optimization_level".to_string(),
                        vec!["basic".into(), "all".into()],
                    ),
                    ("spinning".to_string(), vec![true.into(), false.into()]),
                ]),
            )]
            .into(),
            flops_per_sample: 1e8,
        }
        .build()
    }

    /// A law of cost with a per-model scale and per-configuration effects: onnxruntime with every
    /// graph optimisation fastest, candle slowest, two threads help on all cores and hurt on one,
    /// batch costs per sample a little less.
    fn law(scale: f64, c: &Candidate) -> f64 {
        let engine = match c.engine.as_str() {
            "tract" => 1.0,
            "candle" => 6.0,
            _ => match c.options.get("graph_optimization_level") {
                Some(v) if v == "all" => 0.25,
                _ => 1.3,
            },
        };
        let spin = match c.options.get("spinning") {
            Some(v) if v == false => 1.1,
            _ => 1.0,
        };
        let threads = match (c.threads, c.cores.cpus.is_none()) {
            (2, true) => 0.7,
            (2, false) => 1.6,
            _ => 1.0,
        };
        scale * engine * spin * threads * c.batch as f64 * 0.9
    }

    fn measured(ms: f64) -> Measured {
        Measured {
            mean_ms: ms,
            p99_ms: ms * 1.2,
            throughput: 1e3 / ms,
            peak_rss_bytes: None,
            top1_agreement: None,
        }
    }

    /// A database with every candidate of `space` measured on `model` under the law at `scale`.
    fn db_of(space: &Space, models: &[(&str, f64)]) -> Db {
        let mut db = Db::default();
        for (model, scale) in models {
            for c in &space.candidates {
                db.trials.push(TrialRecord::new(
                    model,
                    "3x64x64",
                    c,
                    measured(law(*scale, c)),
                    "tune",
                ));
            }
        }
        db
    }

    /// The stored layer profiles (17 zoo models and 80 probes, one and two threads): the models' scales.
    fn with_profiles(mut db: Db) -> Db {
        let text = include_str!("../../tests/fixtures/costmodel/tract-2core-x86.jsonl");
        for line in text.lines() {
            if let Ok(p) = serde_json::from_str::<Profile>(line) {
                db.profiles.push(p);
            }
        }
        db
    }

    fn best_index(space: &Space, scale: f64) -> usize {
        (0..space.candidates.len())
            .min_by(|&a, &b| {
                law(scale, &space.candidates[a]).total_cmp(&law(scale, &space.candidates[b]))
            })
            .unwrap_or(0)
    }

    /// The prior of mobilenet_v2 at 3x64x64 for latency; `own`: its own trials count.
    fn prior_of(db: &Db, space: &Space, own: bool) -> Prior {
        build(
            db,
            "mobilenet_v2",
            "3x64x64",
            space,
            Objective::Latency,
            own,
        )
    }

    #[test]
    fn other_models_trials_transfer_the_configuration_effects() -> crate::error::Result<()> {
        let space = space();
        let db = with_profiles(db_of(&space, &[("resnet18", 4.0), ("squeezenet1_1", 1.0)]));
        let prior = prior_of(&db, &space, true);
        assert_eq!(prior.predicted(), space.candidates.len(), "{prior:?}");
        assert_eq!(prior.models, vec!["resnet18", "squeezenet1_1"]);
        assert_eq!(prior.own_trials, 0);
        assert!(
            prior.summary().contains("trials of 2 other model(s)"),
            "{}",
            prior.summary()
        );
        // Every candidate is an exact match; the ranking is the law's.
        let log = |i: usize| prior.entries[i].map_or(f64::NAN, |e| e.log_cost);
        let best = (0..space.candidates.len())
            .min_by(|&a, &b| log(a).total_cmp(&log(b)))
            .context("empty")?;
        assert_eq!(best, best_index(&space, 1.0));
        for (i, c) in space.candidates.iter().enumerate() {
            let e = prior.entries[i].context("missing")?;
            assert_eq!(e.source, Source::Transferred { level: 0 });
            // Ratios between candidates are the law's exactly.
            let want = (law(1.0, c) / law(1.0, &space.candidates[0])).ln();
            assert!((log(i) - log(0) - want).abs() < 1e-9, "{}", c.label());
        }
        Ok(())
    }

    #[test]
    fn a_configuration_not_measured_on_other_models_falls_back_to_a_looser_match(
    ) -> crate::error::Result<()> {
        let space = space();
        // The other model was measured at batch 1 only.
        let mut db = with_profiles(db_of(&space, &[("resnet18", 4.0)]));
        db.trials.retain(|t| t.candidate.batch == 1);
        let prior = prior_of(&db, &space, true);
        for (i, c) in space.candidates.iter().enumerate() {
            let e = prior.entries[i].context("missing")?;
            let want = if c.batch == 1 { 0 } else { 2 };
            assert_eq!(
                e.source,
                Source::Transferred { level: want },
                "{}",
                c.label()
            );
            if c.batch == 4 {
                // Batch 4's latency is per sample the batch-1 one, times four.
                let one = space
                    .candidates
                    .iter()
                    .position(|o| o.batch == 1 && key(o, 2) == key(c, 2))
                    .and_then(|j| prior.entries[j])
                    .context("no batch-1 twin")?;
                assert!((e.log_cost - one.log_cost - 4f64.ln()).abs() < 1e-9);
                assert!(e.sd > one.sd);
            }
        }
        Ok(())
    }

    #[test]
    fn a_second_tuning_starts_from_the_first_ones_best() -> crate::error::Result<()> {
        let space = space();
        // The first tuning measured eight candidates, the law's best among them.
        let best = best_index(&space, 2.0);
        let mut db = Db::default();
        for i in (0..space.candidates.len()).step_by(7).chain([best]) {
            let c = &space.candidates[i];
            db.trials.push(TrialRecord::new(
                "mobilenet_v2",
                "3x64x64",
                c,
                measured(law(2.0, c)),
                "tune",
            ));
        }
        let prior = prior_of(&db, &space, true);
        assert_eq!(prior.own_trials, 8);
        assert_eq!(
            prior.entries[best].map(|e| e.source),
            Some(Source::Measured)
        );
        // Without any other model or layer profile, only what was measured is predicted.
        assert_eq!(prior.predicted(), 8);
        let settings = Settings {
            strategy: Strategy::Guided,
            budget: 5,
            stall: 0,
            initial: 2,
            seed: 1,
        };
        let trace = search::run(
            &space,
            settings,
            Some(&prior),
            |i, _| Some(Ok(law(2.0, &space.candidates[i]))),
            |_| {},
        );
        assert_eq!(trace.trials[0].index, best);
        // Left out (a replay), the same database predicts nothing.
        let none = prior_of(&db, &space, false);
        assert!(none.is_empty());
        assert!(none.summary().starts_with("no prior"), "{}", none.summary());
        Ok(())
    }

    #[test]
    fn the_guided_search_corrects_a_prior_that_is_wrong_about_one_engine(
    ) -> crate::error::Result<()> {
        let space = space();
        let db = with_profiles(db_of(&space, &[("resnet18", 4.0)]));
        let prior = prior_of(&db, &space, true);
        // On this model, onnxruntime is three times slower than on the other: tract on two threads
        // and all cores is best, the prior's favourites are not.
        let truth =
            |c: &Candidate| law(1.0, c) * if c.engine == "onnxruntime" { 12.0 } else { 1.0 };
        let optimum = space
            .candidates
            .iter()
            .map(truth)
            .fold(f64::INFINITY, f64::min);
        // Eight trials: as many as the prior has onnxruntime favourites at batch 1, so trusting
        // the prior alone would never reach tract.
        let settings = Settings {
            strategy: Strategy::Guided,
            budget: 8,
            stall: 0,
            initial: 2,
            seed: 3,
        };
        let trace = search::run(
            &space,
            settings,
            Some(&prior),
            |i, _| Some(Ok(truth(&space.candidates[i]))),
            |_| {},
        );
        let (_, found) = trace.best().context("no best")?;
        assert!(found <= optimum * 1.05, "found {found}, optimum {optimum}");
        assert!(trace.trials.iter().all(|t| t.predicted.is_some()));
        Ok(())
    }

    #[test]
    fn the_database_keeps_trials_beside_profiles_and_skips_broken_lines() -> crate::error::Result<()>
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("db.jsonl");
        let space = space();
        let profile = include_str!("../../tests/fixtures/costmodel/tract-2core-x86.jsonl")
            .lines()
            .next()
            .context("empty fixture")?;
        std::fs::write(&path, format!("{profile}\n{{\"kind\": \"trial\"}}\n\n"))?;
        let mut db = Db::open(&path)?;
        db.append_trial(TrialRecord::new(
            "resnet18",
            "3x64x64",
            &space.candidates[3],
            measured(2.5),
            "tune",
        ))?;
        let again = Db::open(&path)?;
        assert_eq!(again.profiles.len(), 1);
        assert_eq!(again.trials.len(), 1);
        assert_eq!(again.trials[0].candidate, space.candidates[3]);
        assert_eq!(again.skipped, vec![2]);
        Ok(())
    }

    #[test]
    fn a_lower_precision_is_predicted_from_the_layers_profiled_in_it_only(
    ) -> crate::error::Result<()> {
        use crate::collect::kernels::Precision;
        let sets = two_cpus();
        let space = SpaceSpec {
            engines: vec!["tract".into()],
            threads: vec![1],
            batch: vec![1],
            core_sets: sets,
            devices: vec![crate::config::Device::Cpu],
            precisions: vec![Precision::Fp32, Precision::Int8],
            options: Default::default(),
            flops_per_sample: 1e8,
        }
        .build();
        let on_all = |prior: &Prior, precision: &str| {
            space
                .candidates
                .iter()
                .zip(&prior.entries)
                .find(|(c, _)| c.precision == precision && c.cores.cpus.is_none())
                .and_then(|(_, e)| e.map(|e| e.log_cost))
        };
        // fp32 profiles alone say nothing of int8.
        let fp32_only = with_profiles(Db::default());
        let prior = prior_of(&fp32_only, &space, true);
        let fp32 = on_all(&prior, "fp32").context("no fp32 prediction")?;
        assert_eq!(on_all(&prior, "int8"), None);
        // The same layers profiled in int8 at half the time: int8 is predicted from them.
        let mut both = fp32_only.clone();
        for p in &fp32_only.profiles {
            let mut q = p.clone();
            q.precision = Precision::Int8;
            q.latency_ms /= 2.0;
            q.latency_interval_ms = (q.latency_interval_ms.0 / 2.0, q.latency_interval_ms.1 / 2.0);
            for g in &mut q.groups {
                g.seconds /= 2.0;
            }
            both.profiles.push(q);
        }
        let prior = prior_of(&both, &space, true);
        let int8 = on_all(&prior, "int8").context("no int8 prediction")?;
        assert_eq!(on_all(&prior, "fp32"), Some(fp32));
        // Faster by about the factor its layers were (the fit is not exactly proportional:
        // its forest and per-template lines are refitted on the halved times).
        let faster = (fp32 - int8).exp();
        assert!(
            (1.5..3.0).contains(&faster),
            "{faster}× from {fp32} and {int8}"
        );
        Ok(())
    }

    #[test]
    fn layer_profiles_alone_predict_tract_on_all_cores() -> crate::error::Result<()> {
        let space = space();
        let prior = prior_of(&with_profiles(Db::default()), &space, true);
        let predicted: Vec<&Candidate> = space
            .candidates
            .iter()
            .zip(&prior.entries)
            .filter_map(|(c, e)| e.map(|_| c))
            .collect();
        // tract × threads 1, 2 × batch 1, 4 on all cores.
        assert_eq!(predicted.len(), 4, "{prior:?}");
        assert!(predicted
            .iter()
            .all(|c| c.engine == "tract" && c.cores.cpus.is_none()));
        assert!(prior
            .entries
            .iter()
            .flatten()
            .all(|e| e.source == Source::Layers));
        // Batch 4's call takes four times batch 1's.
        let log = |threads: usize, batch: usize| {
            space
                .candidates
                .iter()
                .zip(&prior.entries)
                .find(|(c, _)| {
                    c.engine == "tract"
                        && c.cores.cpus.is_none()
                        && c.threads == threads
                        && c.batch == batch
                })
                .and_then(|(_, e)| e.map(|e| e.log_cost))
        };
        let (one, four) = (log(1, 1).context("b1")?, log(1, 4).context("b4")?);
        assert!((four - one - 4f64.ln()).abs() < 1e-9);
        assert!(
            prior
                .summary()
                .contains("layer profiles of 17 model(s) and 80 operator probe(s)"),
            "{}",
            prior.summary()
        );
        Ok(())
    }

    #[test]
    fn layer_profiles_of_a_core_set_predict_that_core_set() -> crate::error::Result<()> {
        let space = space();
        // The stored profiles again, as if measured confined to CPU 0, every layer 1.5 times slower.
        let mut db = with_profiles(Db::default());
        let one: Vec<Profile> = db
            .profiles
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p.cores = Some(vec![0]);
                p.latency_ms *= 1.5;
                for g in &mut p.groups {
                    g.seconds *= 1.5;
                }
                p
            })
            .collect();
        db.profiles.extend(one);
        let prior = prior_of(&db, &space, true);
        let log = |cpus: Option<Vec<usize>>, threads: usize| {
            space
                .candidates
                .iter()
                .zip(&prior.entries)
                .find(|(c, _)| {
                    c.engine == "tract"
                        && c.cores.cpus == cpus
                        && c.threads == threads
                        && c.batch == 1
                })
                .and_then(|(_, e)| e.map(|e| e.log_cost))
        };
        // tract × threads 1, 2 × batch 1, 4 on all cores and on `one` (CPU 0).
        assert_eq!(prior.predicted(), 8, "{prior:?}");
        for threads in [1, 2] {
            let all = log(None, threads).context("all cores")?;
            let cpu0 = log(Some(vec![0]), threads).context("CPU 0")?;
            assert!((cpu0 - all - 1.5f64.ln()).abs() < 0.05, "{all} {cpu0}");
        }
        // Without profiles of a core set, its candidates are not predicted from layers.
        let prior = prior_of(&with_profiles(Db::default()), &space, true);
        assert_eq!(prior.predicted(), 4, "{prior:?}");
        Ok(())
    }

    #[test]
    fn onnxruntime_layer_profiles_predict_it_at_the_options_they_were_measured_at(
    ) -> crate::error::Result<()> {
        let space = space();
        // The stored tract profiles stand in for onnxruntime's, four times faster.
        let mut db = with_profiles(Db::default());
        let ort: Vec<Profile> = db
            .profiles
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p.engine = "onnxruntime".into();
                p.latency_ms /= 4.0;
                for g in &mut p.groups {
                    g.seconds /= 4.0;
                }
                p
            })
            .collect();
        db.profiles.extend(ort);
        let prior = prior_of(&db, &space, true);
        let predicted: Vec<(&Candidate, f64)> = space
            .candidates
            .iter()
            .zip(&prior.entries)
            .filter_map(|(c, e)| e.map(|e| (c, e.log_cost)))
            .collect();
        // tract and onnxruntime (every optimisation, spinning: as profiled) × threads 1, 2 ×
        // batch 1, 4, on all cores; onnxruntime's other options have no profile to go on.
        assert_eq!(predicted.len(), 8, "{prior:?}");
        for (c, _) in &predicted {
            if c.engine == "onnxruntime" {
                assert_eq!(
                    c.options.get("graph_optimization_level"),
                    Some(&"all".into())
                );
                assert_eq!(c.options.get("spinning"), Some(&true.into()));
            }
        }
        let log = |engine: &str| {
            predicted
                .iter()
                .find(|(c, _)| c.engine == engine && c.threads == 1 && c.batch == 1)
                .map(|(_, l)| *l)
        };
        let (tract, ort) = (
            log("tract").context("tract")?,
            log("onnxruntime").context("ort")?,
        );
        assert!((tract - ort - 4f64.ln()).abs() < 0.05, "{tract} {ort}");
        assert!(
            prior.summary().contains(
                "layer profiles of 17 model(s) and 80 operator probe(s) (onnxruntime, tract)"
            ),
            "{}",
            prior.summary()
        );
        Ok(())
    }

    #[test]
    fn pytorch_layer_profiles_stand_for_eager_mode_with_one_inter_op_thread() {
        let candidate = |options: serde_json::Value| Candidate {
            engine: "pytorch".into(),
            threads: 1,
            cores: crate::tune::CoreSet {
                label: "all".into(),
                cpus: None,
                count: 2,
                capacity: 1.0,
            },
            batch: 1,
            device: crate::config::Device::Cpu,
            precision: "fp32".into(),
            options: options.as_object().cloned().unwrap_or_default(),
        };
        // `costmodel profile --engine pytorch` times eager modules with one inter-op thread.
        assert!(profiled_as(&candidate(serde_json::json!({}))));
        assert!(profiled_as(&candidate(
            serde_json::json!({"mode": "eager", "inter_op_threads": 1})
        )));
        assert!(!profiled_as(&candidate(
            serde_json::json!({"mode": "torchscript"})
        )));
        assert!(!profiled_as(&candidate(
            serde_json::json!({"inter_op_threads": 2})
        )));
    }
}

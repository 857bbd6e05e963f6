//! The search over a finite space: the guided strategy (the engine's default first, a few
//! space-filling picks, then expected improvement under the Gaussian-process cost model) and
//! the baselines it is judged against (random and grid search at the same budget).
//!
//! The loop ([`run`]) is the same whether a trial is measured by a worker or read from a
//! table: the caller's `measure` says what each candidate cost, or that it failed.

use crate::tune::gp::{self, Gp};
use crate::tune::prior::Prior;
use crate::tune::Space;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Cost model and expected improvement.
    Guided,
    /// Uniformly random candidates, without repeats.
    Random,
    /// Every k-th candidate of the space's order, k chosen to fit the budget.
    Grid,
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::Guided => "guided",
            Strategy::Random => "random",
            Strategy::Grid => "grid",
        })
    }
}

/// How a search runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub strategy: Strategy,
    /// Most trials.
    pub budget: usize,
    /// Stop after this many trials in a row without a 1% improvement (0: never).
    pub stall: usize,
    /// Space-filling trials after the default, before the cost model chooses.
    pub initial: usize,
    pub seed: u64,
}

/// An improvement smaller than this fraction does not reset the stall count.
pub const STALL_GAIN: f64 = 0.01;
/// Exploration margin of expected improvement, in log-cost units: about 10%, the size of the
/// run-to-run noise of one measurement on a shared board, so the search does not spend trials
/// chasing gains smaller than it can measure.
const XI: f64 = 0.1;

/// One trial of a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// 1-based.
    pub n: usize,
    /// The candidate's index in the space.
    pub index: usize,
    /// What it cost (None: it failed or broke a limit).
    pub cost: Option<f64>,
    /// Why it has no cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The cost model's prediction before it ran, with its relative uncertainty (one
    /// standard deviation of the log cost), when the model chose it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_sd: Option<f64>,
    /// The best candidate so far and its cost, after this trial.
    pub best: Option<usize>,
    pub best_cost: Option<f64>,
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    Budget,
    Stalled,
    Exhausted,
    Cancelled,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::Budget => "the trial budget was spent",
            Stop::Stalled => "improvement stalled",
            Stop::Exhausted => "every candidate was measured",
            Stop::Cancelled => "stopped on request",
        })
    }
}

/// A finished search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub trials: Vec<Trial>,
    pub stop: Stop,
}

impl Trace {
    pub fn best(&self) -> Option<(usize, f64)> {
        let last = self.trials.last()?;
        Some((last.best?, last.best_cost?))
    }

    /// The cost model's error over the trials it predicted: the median and the mean of
    /// |predicted − measured| / measured, and how many trials that covers.
    pub fn prediction_error(&self) -> Option<(f64, f64, usize)> {
        let mut errors: Vec<f64> = self
            .trials
            .iter()
            .filter_map(|t| Some((t.predicted? - t.cost?).abs() / t.cost?))
            .collect();
        if errors.is_empty() {
            return None;
        }
        errors.sort_by(f64::total_cmp);
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        Some((crate::stats::median(&errors)?, mean, errors.len()))
    }
}

/// The final cost model's leave-one-out error over the successful trials: the median and the
/// mean of |predicted − measured| / measured, and how many trials (None below three).
pub fn leave_one_out_error(space: &Space, trace: &Trace) -> Option<(f64, f64, usize)> {
    let done: Vec<(usize, f64)> = trace
        .trials
        .iter()
        .filter_map(|t| Some((t.index, t.cost.filter(|c| *c > 0.0)?)))
        .collect();
    if done.len() < 3 {
        return None;
    }
    let x: Vec<Vec<f64>> = done
        .iter()
        .map(|(i, _)| space.features[*i].clone())
        .collect();
    let y: Vec<f64> = done.iter().map(|(_, c)| c.ln()).collect();
    let model = Gp::fit(&x, &y)?;
    let mut errors: Vec<f64> = model
        .leave_one_out()
        .iter()
        .zip(&done)
        .map(|(p, (_, c))| (p.exp() - c).abs() / c)
        .collect();
    errors.sort_by(f64::total_cmp);
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    Some((crate::stats::median(&errors)?, mean, errors.len()))
}

/// What the search proposes next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proposal {
    pub index: usize,
    /// Predicted cost and the standard deviation of its logarithm.
    pub predicted: Option<(f64, f64)>,
}

/// The state of one search over a space.
pub struct Search<'a> {
    space: &'a Space,
    settings: Settings,
    rng: rand_chacha::ChaCha8Rng,
    order: Vec<usize>,
    measured: Vec<bool>,
    /// (index, log cost) of the successful trials.
    observed: Vec<(usize, f64)>,
    /// What the database predicts of each candidate (guided search only).
    prior: Option<&'a Prior>,
}

fn distance2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
}

impl<'a> Search<'a> {
    /// A search; the guided strategy starts from `prior` where it predicts any candidate.
    pub fn new(space: &'a Space, settings: Settings, prior: Option<&'a Prior>) -> Search<'a> {
        let n = space.candidates.len();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(settings.seed);
        let order = match settings.strategy {
            Strategy::Random => {
                let mut o: Vec<usize> = (0..n).collect();
                o.shuffle(&mut rng);
                o
            }
            Strategy::Grid => {
                // A stride through the space's order, starting at a seed-chosen offset, then
                // the rest in order if the budget outlasts the stride.
                let stride = (n / settings.budget.max(1)).max(1);
                let offset = (settings.seed as usize) % stride;
                let mut o: Vec<usize> = (offset..n).step_by(stride).collect();
                o.extend((0..n).filter(|i| !(i + stride - offset).is_multiple_of(stride)));
                o
            }
            Strategy::Guided => Vec::new(),
        };
        Search {
            space,
            settings,
            rng,
            order,
            measured: vec![false; n],
            observed: Vec::new(),
            prior: prior.filter(|p| !p.is_empty() && p.entries.len() == n),
        }
    }

    /// Records a trial's outcome.
    pub fn record(&mut self, index: usize, cost: Option<f64>) {
        if let Some(m) = self.measured.get_mut(index) {
            *m = true;
        }
        if let Some(c) = cost.filter(|c| c.is_finite() && *c > 0.0) {
            self.observed.push((index, c.ln()));
        }
    }

    fn trials(&self) -> usize {
        self.measured.iter().filter(|m| **m).count()
    }

    /// The next candidate, or None when every one has been measured.
    pub fn propose(&mut self) -> Option<Proposal> {
        let open: Vec<usize> = (0..self.measured.len())
            .filter(|&i| !self.measured[i])
            .collect();
        if open.is_empty() {
            return None;
        }
        let plain = |index| {
            Some(Proposal {
                index,
                predicted: None,
            })
        };
        match self.settings.strategy {
            Strategy::Random | Strategy::Grid => {
                let next = self.order.iter().copied().find(|&i| !self.measured[i])?;
                plain(next)
            }
            Strategy::Guided => {
                if let Some(prior) = self.prior {
                    return self.with_prior(prior, &open);
                }
                if !self.measured[self.space.default] {
                    return plain(self.space.default);
                }
                if self.trials() <= self.settings.initial || self.observed.len() < 2 {
                    return plain(self.farthest(&open));
                }
                self.expected_improvement(&open)
                    .or_else(|| plain(self.farthest(&open)))
            }
        }
    }

    /// The open candidate farthest from every measured one (ties broken at random).
    fn farthest(&mut self, open: &[usize]) -> usize {
        let f = &self.space.features;
        let done: Vec<usize> = (0..self.measured.len())
            .filter(|&i| self.measured[i])
            .collect();
        let mut shuffled = open.to_vec();
        shuffled.shuffle(&mut self.rng);
        let score = |i: usize| {
            done.iter()
                .map(|&j| distance2(&f[i], &f[j]))
                .fold(f64::INFINITY, f64::min)
        };
        shuffled
            .iter()
            .copied()
            .max_by(|&a, &b| score(a).total_cmp(&score(b)))
            .unwrap_or(open[0])
    }

    /// With a prior: expected improvement under the prior plus a Gaussian process of what the
    /// prior got wrong on the trials so far (no default or space-filling trials first: the
    /// prior's best comes first). A candidate the prior cannot predict gets the median of its
    /// predictions with a wide uncertainty.
    fn with_prior(&self, prior: &Prior, open: &[usize]) -> Option<Proposal> {
        let known: Vec<f64> = prior.entries.iter().flatten().map(|e| e.log_cost).collect();
        let fallback = crate::stats::median(&known)?;
        let at =
            |i: usize| prior.entries[i].map_or((fallback, 1.0), |e| (e.log_cost, e.sd.max(0.05)));
        let x: Vec<Vec<f64>> = self
            .observed
            .iter()
            .map(|(i, _)| self.space.features[*i].clone())
            .collect();
        let residuals: Vec<f64> = self.observed.iter().map(|(i, y)| y - at(*i).0).collect();
        let model = if residuals.len() >= 2 {
            Gp::fit(&x, &residuals)
        } else {
            None
        };
        let shift = residuals.iter().sum::<f64>() / residuals.len().max(1) as f64;
        let predict = |i: usize| {
            let (mean, sd) = at(i);
            match &model {
                Some(m) => {
                    let p = m.predict(&self.space.features[i]);
                    gp::Prediction {
                        mean: mean + p.mean,
                        sd: p.sd.max(0.05),
                    }
                }
                None => gp::Prediction {
                    mean: mean + shift,
                    sd,
                },
            }
        };
        let best = self
            .observed
            .iter()
            .map(|(_, y)| *y)
            .fold(f64::INFINITY, f64::min);
        let (index, p, _) = open
            .iter()
            .map(|&i| {
                let p = predict(i);
                let ei = if best.is_finite() {
                    gp::expected_improvement(p, best, XI)
                } else {
                    -p.mean
                };
                (i, p, ei)
            })
            .max_by(|a, b| a.2.total_cmp(&b.2).then(b.1.mean.total_cmp(&a.1.mean)))?;
        Some(Proposal {
            index,
            predicted: Some((p.mean.exp(), p.sd)),
        })
    }

    fn expected_improvement(&self, open: &[usize]) -> Option<Proposal> {
        let x: Vec<Vec<f64>> = self
            .observed
            .iter()
            .map(|(i, _)| self.space.features[*i].clone())
            .collect();
        let y: Vec<f64> = self.observed.iter().map(|(_, v)| *v).collect();
        let model = Gp::fit(&x, &y)?;
        let best = y.iter().copied().fold(f64::INFINITY, f64::min);
        let (index, p, _) = open
            .iter()
            .map(|&i| {
                let p = model.predict(&self.space.features[i]);
                (i, p, gp::expected_improvement(p, best, XI))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2).then(b.1.mean.total_cmp(&a.1.mean)))?;
        Some(Proposal {
            index,
            predicted: Some((p.mean.exp(), p.sd)),
        })
    }
}

/// Whether the last `stall` trials brought no improvement of at least [`STALL_GAIN`].
fn stalled(trials: &[Trial], stall: usize) -> bool {
    if stall == 0 || trials.len() <= stall {
        return false;
    }
    let before = trials[trials.len() - 1 - stall].best_cost;
    let now = trials.last().and_then(|t| t.best_cost);
    match (before, now) {
        (Some(b), Some(n)) => n > b * (1.0 - STALL_GAIN),
        (None, None) => true,
        _ => false,
    }
}

/// Why a candidate gave no cost (its run failed, it went over the memory limit), in one
/// sentence.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct CandidateFailed(pub String);

impl From<String> for CandidateFailed {
    fn from(why: String) -> CandidateFailed {
        CandidateFailed(why)
    }
}

impl From<&str> for CandidateFailed {
    fn from(why: &str) -> CandidateFailed {
        CandidateFailed(why.to_string())
    }
}

/// What measuring one candidate gave.
pub type Outcome = Result<f64, CandidateFailed>;

/// Runs a search: proposes, has `measure` run each candidate, records, and stops at the
/// budget, a stall, the end of the space or when `measure` returns None (cancelled). The
/// guided strategy starts from `prior` where there is one.
pub fn run(
    space: &Space,
    settings: Settings,
    prior: Option<&Prior>,
    mut measure: impl FnMut(usize, &Proposal) -> Option<Outcome>,
    mut on_trial: impl FnMut(&Trial),
) -> Trace {
    let mut search = Search::new(space, settings, prior);
    let mut trials: Vec<Trial> = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    let stop = loop {
        if trials.len() >= settings.budget {
            break Stop::Budget;
        }
        if stalled(&trials, settings.stall) {
            break Stop::Stalled;
        }
        let Some(proposal) = search.propose() else {
            break Stop::Exhausted;
        };
        let Some(outcome) = measure(proposal.index, &proposal) else {
            break Stop::Cancelled;
        };
        let (cost, failure) = match outcome {
            Ok(c) => (Some(c), None),
            Err(why) => (None, Some(why.0)),
        };
        search.record(proposal.index, cost);
        if let Some(c) = cost {
            if best.is_none_or(|(_, b)| c < b) {
                best = Some((proposal.index, c));
            }
        }
        let trial = Trial {
            n: trials.len() + 1,
            index: proposal.index,
            cost,
            failure,
            predicted: proposal.predicted.map(|p| p.0),
            predicted_sd: proposal.predicted.map(|p| p.1),
            best: best.map(|b| b.0),
            best_cost: best.map(|b| b.1),
        };
        on_trial(&trial);
        trials.push(trial);
    };
    Trace { trials, stop }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::device::Cluster;
    use crate::error::Context;
    use crate::tune::{core_sets, SpaceSpec};

    /// A synthetic space whose cost has structure the model can learn: onnxruntime fastest,
    /// threads help, batch costs linearly, one option matters.
    fn synthetic() -> (Space, Vec<f64>) {
        let sets = core_sets(
            &[Cluster {
                cpus: vec![0, 1, 2, 3],
                capacity: None,
                max_freq_mhz: None,
            }],
            &[0, 1, 2, 3],
        );
        let spec = SpaceSpec {
            engines: vec!["tract".into(), "candle".into(), "onnxruntime".into()],
            threads: vec![1, 2, 4],
            batch: vec![1, 2],
            core_sets: sets,
            devices: vec![crate::config::Device::Cpu],
            precisions: Vec::new(),
            options: [(
                "onnxruntime".to_string(),
                crate::tune::OptionSpace::from([(
                    "graph_optimization_level".to_string(),
                    vec!["basic".into(), "all".into()],
                )]),
            )]
            .into(),
            flops_per_sample: 1e9,
        };
        let space = spec.build();
        let costs = space
            .candidates
            .iter()
            .map(|c| {
                let engine = match c.engine.as_str() {
                    "tract" => 10.0,
                    "candle" => 25.0,
                    _ => 6.0,
                };
                let usable = c.threads.min(c.cores.count) as f64;
                let over = (c.threads as f64 / c.cores.count as f64).max(1.0);
                let graph = match c.options.get("graph_optimization_level") {
                    Some(v) if v == "all" => 0.8,
                    _ => 1.0,
                };
                engine * c.batch as f64 / usable.powf(0.8) * over * graph
            })
            .collect();
        (space, costs)
    }

    fn settings(strategy: Strategy, budget: usize, seed: u64) -> Settings {
        Settings {
            strategy,
            budget,
            stall: 0,
            initial: 2,
            seed,
        }
    }

    fn search(space: &Space, costs: &[f64], s: Settings) -> Trace {
        run(space, s, None, |i, _| Some(Ok(costs[i])), |_| {})
    }

    #[test]
    fn every_strategy_measures_distinct_candidates_within_the_budget() {
        let (space, costs) = synthetic();
        for strategy in [Strategy::Guided, Strategy::Random, Strategy::Grid] {
            let trace = search(&space, &costs, settings(strategy, 10, 3));
            assert_eq!(trace.trials.len(), 10, "{strategy}");
            assert_eq!(trace.stop, Stop::Budget);
            let mut seen: Vec<usize> = trace.trials.iter().map(|t| t.index).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), 10, "{strategy} repeated a candidate");
            // The best so far never gets worse and is the minimum of what was measured.
            let min = trace
                .trials
                .iter()
                .filter_map(|t| t.cost)
                .fold(f64::MAX, f64::min);
            assert_eq!(trace.best().map(|b| b.1), Some(min));
        }
        let all = search(&space, &costs, settings(Strategy::Random, 1000, 1));
        assert_eq!(all.stop, Stop::Exhausted);
        assert_eq!(all.trials.len(), space.candidates.len());
    }

    #[test]
    fn the_guided_search_starts_at_the_default_and_predicts_after_its_initial_picks(
    ) -> crate::error::Result<()> {
        let (space, costs) = synthetic();
        let trace = search(&space, &costs, settings(Strategy::Guided, 12, 7));
        assert_eq!(trace.trials[0].index, space.default);
        assert!(trace.trials[..3].iter().all(|t| t.predicted.is_none()));
        assert!(trace.trials[3..].iter().all(|t| t.predicted.is_some()));
        let (median, _, n) = trace.prediction_error().context("missing")?;
        assert_eq!(n, 9);
        assert!(median.is_finite());
        let (loo, _, n) = leave_one_out_error(&space, &trace).context("missing")?;
        assert_eq!(n, 12);
        assert!(loo.is_finite() && loo >= 0.0);
        Ok(())
    }

    #[test]
    fn the_guided_search_beats_random_search_on_a_structured_space() -> crate::error::Result<()> {
        let (space, costs) = synthetic();
        let optimum = costs.iter().copied().fold(f64::MAX, f64::min);
        let budget = space.candidates.len() / 4;
        let mut guided_hits = 0;
        let mut random_hits = 0;
        for seed in 0..10 {
            let g = search(&space, &costs, settings(Strategy::Guided, budget, seed));
            let r = search(&space, &costs, settings(Strategy::Random, budget, seed));
            guided_hits += usize::from(g.best().context("missing")?.1 <= optimum * 1.05);
            random_hits += usize::from(r.best().context("missing")?.1 <= optimum * 1.05);
        }
        assert!(guided_hits >= 8, "guided {guided_hits}/10");
        assert!(
            guided_hits > random_hits,
            "guided {guided_hits} random {random_hits}"
        );
        Ok(())
    }

    #[test]
    fn failures_are_recorded_and_a_stall_stops_the_search() {
        let (space, _) = synthetic();
        // Every candidate fails: no best, and the stall rule ends the search.
        let s = Settings {
            stall: 4,
            ..settings(Strategy::Guided, 50, 1)
        };
        let trace = run(
            &space,
            s,
            None,
            |_, _| Some(Err("out of memory".into())),
            |_| {},
        );
        assert_eq!(trace.stop, Stop::Stalled);
        assert_eq!(trace.trials.len(), 5);
        assert!(trace.best().is_none());
        assert_eq!(trace.trials[0].failure.as_deref(), Some("out of memory"));
        // A flat space stalls after `stall` trials past the first.
        let trace = run(&space, s, None, |_, _| Some(Ok(5.0)), |_| {});
        assert_eq!((trace.stop, trace.trials.len()), (Stop::Stalled, 5));
        // Cancelled by the measurer.
        let trace = run(&space, s, None, |_, _| None, |_| {});
        assert_eq!((trace.stop, trace.trials.len()), (Stop::Cancelled, 0));
    }

    #[test]
    fn grid_search_strides_through_the_space() {
        let (space, costs) = synthetic();
        let n = space.candidates.len();
        let trace = search(&space, &costs, settings(Strategy::Grid, n / 4, 0));
        let stride = n / (n / 4);
        let picked: Vec<usize> = trace.trials.iter().map(|t| t.index).collect();
        assert_eq!(
            picked,
            (0..n).step_by(stride).take(n / 4).collect::<Vec<_>>()
        );
    }
}

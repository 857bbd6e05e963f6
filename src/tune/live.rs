//! The live tuner: each candidate the search proposes becomes a condition measured by a worker
//! process exactly as `edgeprof run` measures one (same harness, statistics and records, in one
//! results directory); at the end the engine's default and the best are re-measured in turns,
//! so the gain is judged on fresh, interleaved runs rather than on the search's own noise.
//! Progress goes out as [`TuneEvent`]s; nothing here prints.

use crate::config::{Config, ModelRef};
use crate::models::InputShape;
use crate::protocol::Condition;
use crate::results::{RunRecord, Writer};
use crate::runner::sweep::{Sweep, SweepEvent};
use crate::tune::search::{self, Proposal, Settings, Stop, Trace, Trial};
use crate::tune::{Candidate, Measured, Objective, Space};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What happens while tuning; owned, so that it crosses to a front-end's thread as it is.
#[derive(Debug)]
pub enum TuneEvent {
    /// A tuning starts in its results directory (sent by the session that runs it).
    Started {
        dir: std::path::PathBuf,
        /// "MODEL INPUT for OBJECTIVE".
        title: String,
        unit: String,
        budget: usize,
        candidates: usize,
        /// The engines and core sets left out of the space, each with its reason.
        skipped: Vec<String>,
        /// What the search starts from: the database's prior, or why there is none.
        prior: String,
    },
    /// A trial starts (`n` from 1; `budget` trials at most).
    Trial {
        n: usize,
        budget: usize,
        candidate: Candidate,
        predicted: Option<(f64, f64)>,
    },
    /// The worker's progress within the current trial or confirmation run.
    Sweep(SweepEvent),
    /// A trial ended.
    Measured { trial: Box<Trial> },
    /// A confirmation run starts: `which` is "default" or "best".
    Confirm {
        round: usize,
        rounds: usize,
        which: &'static str,
    },
    /// The tuning ended: its report (also in `tune.json`), or why it failed.
    Finished {
        report: Result<Box<TuneReport>, crate::error::JobError>,
    },
}

/// The default and the best, re-measured in alternation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    pub default_costs: Vec<f64>,
    pub best_costs: Vec<f64>,
    /// Median of each, and the gain: default's median over best's (1.25 = 25% better).
    pub default_median: Option<f64>,
    pub best_median: Option<f64>,
    pub gain: Option<f64>,
    /// The gain's 95 % bootstrap interval over the rounds.
    #[serde(default)]
    pub gain_interval: Option<(f64, f64)>,
    /// The best against the default, as `compare` says it (differences under 5 % are not
    /// significant).
    #[serde(default)]
    pub verdict: Option<crate::results::compare::Verdict>,
}

/// Everything a tuning run found (`tune.json` in its results directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    pub model: String,
    pub input: String,
    pub objective: Objective,
    pub unit: String,
    pub budget: usize,
    pub space: Vec<Candidate>,
    pub default: usize,
    pub trace: Trace,
    /// What each trial measured (index into `trace.trials`).
    pub measured: Vec<Option<Measured>>,
    pub best: Option<usize>,
    pub best_cost: Option<f64>,
    pub default_cost: Option<f64>,
    /// Median and mean |predicted − measured| / measured, over that many trials.
    pub prediction_error: Option<(f64, f64, usize)>,
    /// The same, leave-one-out, for the model fitted on every successful trial at the end.
    #[serde(default)]
    pub leave_one_out_error: Option<(f64, f64, usize)>,
    pub confirmation: Option<Confirmation>,
    /// The configuration to use: the best, unless the interleaved re-measurement found the
    /// default faster (the search's best was then a lucky measurement).
    pub recommended: Option<usize>,
}

/// A tuning run's inputs.
pub struct LiveTune<'a> {
    /// Measurement settings, frameworks and classes.
    pub config: &'a Config,
    pub model: &'a ModelRef,
    pub input: InputShape,
    pub space: &'a Space,
    pub settings: Settings,
    pub objective: Objective,
    pub max_memory: Option<u64>,
    pub confirm: usize,
    pub edgeprof: &'a Path,
    pub cancel: &'a crate::collect::stop::Cancel,
    pub telemetry_root: &'a Path,
    pub dir: &'a Path,
    /// What the guided search starts from.
    pub prior: Option<&'a crate::tune::prior::Prior>,
    /// The measurement database every measured trial is appended to.
    pub db: Option<&'a Path>,
    /// The most top-1 agreement with fp32 a lower-precision candidate may lose (a fraction).
    pub max_top1_drop: f64,
}

/// The condition that measures `candidate`.
pub fn condition_of(candidate: &Candidate, model: &ModelRef, input: InputShape) -> Condition {
    Condition::new(
        &candidate.engine,
        model.clone(),
        input,
        candidate.batch,
        candidate.threads,
        candidate.device,
    )
    // The precision stands before the placement in the id, as in a run's plan.
    .with_precision(
        crate::collect::kernels::Precision::of_models(&candidate.precision)
            .unwrap_or(crate::collect::kernels::Precision::Fp32),
    )
    .with_placement(candidate.cores.cpus.clone(), candidate.options.clone())
}

/// The figures the tuner keeps from a stored run.
pub fn measured_of(record: &RunRecord) -> Option<Measured> {
    let s = record.stats.as_ref()?;
    Some(Measured {
        mean_ms: s.repeat_summary.mean_ms,
        p99_ms: s.repeat_summary.p99_ms,
        throughput: s.repeat_summary.images_per_s,
        peak_rss_bytes: record.resources.peak_rss_bytes,
        top1_agreement: None,
    })
}

/// What one measurement gave: the figures, or why there are none; None when cancelled.
type Run = Option<Result<Measured, search::CandidateFailed>>;

impl LiveTune<'_> {
    /// Runs one condition through the sweep machinery (retries, telemetry, records).
    fn measure(
        &self,
        condition: Condition,
        index: usize,
        total: usize,
        writer: &mut Writer,
        on_event: &mut impl FnMut(TuneEvent),
    ) -> crate::error::Result<Run> {
        let conditions = [condition];
        let sweep = Sweep {
            config: self.config,
            conditions: &conditions,
            total,
            done_before: index,
            edgeprof: self.edgeprof,
            cancel: self.cancel,
            telemetry_root: self.telemetry_root,
            dir: self.dir,
            attempts_before: &Default::default(),
            partials: &Default::default(),
            board_state: None,
        };
        let mut last: Option<RunRecord> = None;
        let outcome = sweep.run(writer, |event| {
            if let SweepEvent::Done { record, .. } = &event {
                if record.last {
                    last = Some(RunRecord::clone(record));
                }
            }
            on_event(TuneEvent::Sweep(event));
        })?;
        if outcome.interrupted || self.cancel.is_raised() {
            return Ok(None);
        }
        let Some(record) = last else {
            return Ok(Some(Err("the worker left no record".into())));
        };
        let Some(m) = measured_of(&record) else {
            return Ok(Some(Err(record
                .reason
                .unwrap_or_else(|| "no timed iterations".into())
                .into())));
        };
        if let (Some(limit), Some(peak)) = (self.max_memory, m.peak_rss_bytes) {
            if peak > limit {
                let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
                return Ok(Some(Err(format!(
                    "peak memory {:.1} MiB exceeds the limit of {:.1} MiB",
                    mib(peak),
                    mib(limit)
                )
                .into())));
            }
        }
        Ok(Some(Ok(m)))
    }

    /// Measures `condition`; a lower precision is compared with its fp32 twin's output (the
    /// twin measured first where this tuning has not measured it yet), and its top-1 agreement
    /// kept in the figures.
    fn measure_costed(
        &self,
        candidate: &Candidate,
        index: usize,
        total: usize,
        writer: &mut Writer,
        on_event: &mut impl FnMut(TuneEvent),
    ) -> crate::error::Result<Run> {
        let condition = condition_of(candidate, self.model, self.input);
        if condition.precision == crate::collect::kernels::Precision::Fp32 {
            return self.measure(condition, index, total, writer, on_event);
        }
        let fp32 = Candidate {
            precision: "fp32".to_string(),
            ..candidate.clone()
        };
        let twin = condition_of(&fp32, self.model, self.input);
        let reference = crate::runner::prepare::output_path(self.dir, &twin.id);
        if !reference.is_file() {
            on_event(TuneEvent::Sweep(SweepEvent::Warning(format!(
                "measuring the fp32 twin {} first, for {}'s accuracy",
                twin.id, condition.precision
            ))));
            if self
                .measure(twin, index, total, writer, on_event)?
                .is_none()
            {
                return Ok(None);
            }
        }
        let own = crate::runner::prepare::output_path(self.dir, &condition.id);
        let batch = condition.batch;
        let run = self.measure(condition, index, total, writer, on_event)?;
        Ok(run.map(|result| {
            result.map(|mut m| {
                let read = crate::results::agreement::read_output;
                m.top1_agreement = match (read(&reference), read(&own)) {
                    (Some(r), Some(o)) => {
                        crate::results::accuracy::figures(&r, &o, batch).map(|f| f.top1_agreement)
                    }
                    _ => None,
                };
                m
            })
        }))
    }

    /// Searches, then confirms; every run is stored through `writer`.
    pub fn run(
        &self,
        writer: &mut Writer,
        mut on_event: impl FnMut(TuneEvent),
    ) -> crate::error::Result<TuneReport> {
        let budget = self.settings.budget;
        let mut measured: Vec<Option<Measured>> = Vec::new();
        let mut error: Option<crate::error::Error> = None;
        // Both the measuring and the reporting closure send events.
        let events = std::cell::RefCell::new(&mut on_event);
        let mut db_failed = false;
        let trace = search::run(
            self.space,
            self.settings,
            self.prior,
            |index, proposal: &Proposal| {
                let candidate = &self.space.candidates[index];
                let n = measured.len() + 1;
                let mut on_event = events.borrow_mut();
                on_event(TuneEvent::Trial {
                    n,
                    budget,
                    candidate: candidate.clone(),
                    predicted: proposal.predicted,
                });
                match self.measure_costed(candidate, n - 1, budget, writer, &mut *on_event) {
                    Ok(Some(result)) => {
                        if let (Ok(m), Some(path), false) = (&result, self.db, db_failed) {
                            let record = crate::tune::prior::TrialRecord::new(
                                &self.model.to_string(),
                                &self.input.to_string(),
                                candidate,
                                *m,
                                "tune",
                            );
                            if let Err(e) = crate::tune::costmodel::Db::append_to(path, &record) {
                                db_failed = true;
                                on_event(TuneEvent::Sweep(SweepEvent::Warning(format!(
                                    "the trials are not recorded for later tunings: {e:#}"
                                ))));
                            }
                        }
                        measured.push(result.as_ref().ok().copied());
                        // Measured either way (the table keeps the figures), but a candidate
                        // beyond the accuracy limit is not a configuration to pick.
                        Some(result.and_then(|m| {
                            crate::tune::within_accuracy(
                                &candidate.precision,
                                &m,
                                self.max_top1_drop,
                            )
                            .map(|()| self.objective.cost(&m))
                        }))
                    }
                    Ok(None) => None,
                    Err(e) => {
                        error = Some(e);
                        None
                    }
                }
            },
            |trial| {
                (events.borrow_mut())(TuneEvent::Measured {
                    trial: Box::new(trial.clone()),
                })
            },
        );
        if let Some(e) = error {
            return Err(e);
        }
        let default_cost = trace
            .trials
            .iter()
            .find(|t| t.index == self.space.default)
            .and_then(|t| t.cost);
        let best = trace.best();
        let confirmation = match best {
            // The default is the best found: nothing to weigh it against.
            Some((b, _)) if b == self.space.default => None,
            Some((b, _)) if trace.stop != Stop::Cancelled && self.confirm > 0 => {
                self.confirm(b, writer, &mut on_event)?
            }
            _ => None,
        };
        let recommended = recommend(confirmation.as_ref(), best.map(|b| b.0), self.space.default);
        Ok(TuneReport {
            recommended,
            model: self.model.to_string(),
            input: self.input.to_string(),
            objective: self.objective,
            unit: self.objective.unit().to_string(),
            budget,
            space: self.space.candidates.clone(),
            default: self.space.default,
            prediction_error: trace.prediction_error(),
            leave_one_out_error: search::leave_one_out_error(self.space, &trace),
            best: best.map(|b| b.0),
            best_cost: best.map(|b| b.1),
            default_cost,
            measured,
            trace,
            confirmation,
        })
    }

    /// Re-measures the default and the best in turns (default first in odd rounds, best first
    /// in even ones, so neither always runs on a machine the other just warmed).
    fn confirm(
        &self,
        best: usize,
        writer: &mut Writer,
        on_event: &mut impl FnMut(TuneEvent),
    ) -> crate::error::Result<Option<Confirmation>> {
        let default = self.space.default;
        let mut default_costs = Vec::new();
        let mut best_costs = Vec::new();
        let rounds = self.confirm;
        for round in 1..=rounds {
            let order: [(&'static str, usize); 2] = if round % 2 == 1 {
                [("default", default), ("best", best)]
            } else {
                [("best", best), ("default", default)]
            };
            for (which, index) in order {
                if self.cancel.is_raised() {
                    return Ok(None);
                }
                on_event(TuneEvent::Confirm {
                    round,
                    rounds,
                    which,
                });
                let mut condition =
                    condition_of(&self.space.candidates[index], self.model, self.input);
                condition.id = format!("confirm{round}-{which}/{}", condition.id);
                match self.measure(condition, 0, 1, writer, on_event)? {
                    None => return Ok(None),
                    Some(Ok(m)) => {
                        let cost = self.objective.cost(&m);
                        if which == "default" {
                            default_costs.push(cost);
                        } else {
                            best_costs.push(cost);
                        }
                    }
                    Some(Err(_)) => {}
                }
            }
        }
        Ok(Some(Confirmation::of(default_costs, best_costs)))
    }
}

/// Bootstrap resamples of a confirmation's gain.
const GAIN_RESAMPLES: usize = 2000;

impl Confirmation {
    /// The default's and the best's costs, one per round, weighed: their medians, the gain with
    /// its interval, and the verdict.
    pub fn of(default_costs: Vec<f64>, best_costs: Vec<f64>) -> Confirmation {
        use crate::results::compare;
        let default_median = crate::stats::median(&default_costs);
        let best_median = crate::stats::median(&best_costs);
        // Each round is one measurement: a repeat of one sample, as compare resamples them.
        let rounds = |costs: &[f64]| -> Vec<Vec<f64>> { costs.iter().map(|c| vec![*c]).collect() };
        let ratio = compare::ratio_interval(
            &rounds(&default_costs),
            &rounds(&best_costs),
            GAIN_RESAMPLES,
        );
        Confirmation {
            gain: default_median.zip(best_median).map(|(d, b)| d / b),
            gain_interval: ratio.map(|(_, low, high)| (1.0 / high, 1.0 / low)),
            verdict: ratio.map(|(r, low, high)| compare::verdict(r, low, high, compare::THRESHOLD)),
            default_costs,
            best_costs,
            default_median,
            best_median,
        }
    }
}

/// The configuration to use: the best found, unless re-measuring both in turns found the
/// default faster.
pub fn recommend(
    confirmation: Option<&Confirmation>,
    best: Option<usize>,
    default: usize,
) -> Option<usize> {
    let best = best?;
    match confirmation.and_then(|c| c.gain) {
        Some(g) if g < 1.0 => Some(default),
        _ => Some(best),
    }
}

/// A config for `edgeprof run` that measures the best candidate (and the default beside it).
pub fn best_config(base: &Config, model: &ModelRef, input: InputShape, best: &Candidate) -> Config {
    let mut config = base.clone();
    config.name = format!("{}-tuned", crate::tune::tuning::model_stem(model));
    config.matrix.engines = vec![best.engine.clone()];
    config.matrix.models = vec![model.clone()];
    config.matrix.inputs = vec![input];
    config.matrix.own_inputs.clear();
    config.matrix.inputs_given = true;
    config.matrix.batch = vec![best.batch];
    config.matrix.threads = vec![best.threads];
    config.matrix.devices = vec![best.device];
    config.matrix.cores = vec![best.cores.cpus.clone()];
    config.matrix.exclude.clear();
    if !best.options.is_empty() {
        config
            .frameworks
            .entry(best.engine.clone())
            .or_default()
            .options = best.options.clone();
    }
    config.tune = crate::config::Tune::default();
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirmation(default: f64, best: f64) -> Confirmation {
        Confirmation::of(vec![default], vec![best])
    }

    #[test]
    fn the_default_is_kept_when_re_measuring_finds_it_faster() {
        assert_eq!(
            recommend(Some(&confirmation(2.0, 1.0)), Some(5), 0),
            Some(5)
        );
        assert_eq!(
            recommend(Some(&confirmation(1.0, 2.0)), Some(5), 0),
            Some(0)
        );
        // No re-measurement: the search's best stands.
        assert_eq!(recommend(None, Some(0), 0), Some(0));
        assert_eq!(recommend(None, Some(5), 0), Some(5));
        assert_eq!(recommend(None, None, 0), None);
    }

    #[test]
    fn a_gain_comes_with_its_interval_and_verdict() {
        let faster = Confirmation::of(vec![10.0, 10.2, 9.9], vec![5.0, 5.1, 4.9]);
        let (low, high) = match faster.gain_interval {
            Some(i) => i,
            None => panic!("no interval: {faster:?}"),
        };
        assert!(
            low > 1.5 && high < 2.5 && low <= 2.0 && 2.0 <= high,
            "{faster:?}"
        );
        assert_eq!(
            faster.verdict,
            Some(crate::results::compare::Verdict::Faster)
        );
        let same = Confirmation::of(vec![5.0, 5.2, 4.9], vec![5.1, 4.95, 5.05]);
        assert_eq!(
            same.verdict,
            Some(crate::results::compare::Verdict::NoSignificantDifference)
        );
    }
}

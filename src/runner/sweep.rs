//! The sweep: every planned condition in its own worker process, one after another, with
//! retries, cool-downs and a stop on request; every attempt is appended to the results
//! directory before the next begins. Progress goes out as [`SweepEvent`]s; nothing here prints.

use crate::collect::stop::Cancel;
use crate::config::Config;
use crate::results::{RunRecord, Writer};
use crate::runner::matrix::Condition;
use crate::runner::prepare::{self, Prepared};
use crate::runner::protocol::{WorkerRequest, WorkerRun};
use crate::runner::repetition::{self, More, RepeatNote, Repetition, Watch};
use crate::runner::spawn::{self, RunFailure, RunLimits, WorkerEvent};
use crate::stats;
use crate::text::now_rfc3339;
use std::time::{Duration, Instant};

/// What happens during a sweep, for progress display: owned, so that a front-end can pass it
/// across threads as it is (the terminal UI's run thread sends it to the UI loop unchanged).
#[derive(Debug, Clone)]
pub enum SweepEvent {
    /// An attempt begins. `index` counts from 1 over the whole plan (resumed runs included).
    Start {
        index: usize,
        total: usize,
        condition: Condition,
        attempt: usize,
        attempts: usize,
    },
    Worker(WorkerEvent),
    /// What the telemetry sources saw, as the attempt runs.
    Telemetry(Box<crate::collect::telemetry::Sample>),
    /// An attempt ended and was stored; `retry` when another attempt follows.
    Done {
        index: usize,
        total: usize,
        record: Box<RunRecord>,
        retry: bool,
    },
    Cooldown {
        seconds: f64,
    },
    /// The condition gets `repeats` more repeats (another worker run of about `iterations`
    /// timed iterations), and why: disturbed repeats measured again, or the median's interval
    /// still wider than `measure.target_ci`.
    MoreRepeats {
        repeats: usize,
        iterations: usize,
        reason: String,
    },
}

/// How a condition's first worker run was made, for the runs that add repeats to it.
struct FirstRun<'a> {
    command: &'a spawn::WorkerCommand,
    request: &'a WorkerRequest,
    limits: RunLimits,
    /// When it started.
    began: Instant,
}

/// What [`Sweep::repeat_more`] added to a condition's first worker run.
struct Added {
    repetition: Repetition,
    /// What the added worker runs cost (None when there were none).
    resources: Option<spawn::Resources>,
    samples: Vec<crate::collect::proc::ProcSample>,
    measured_s: f64,
    cancelled: bool,
}

/// How a sweep ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepOutcome {
    /// Conditions that got their result in this sweep.
    pub ok: usize,
    pub failed: usize,
    pub interrupted: bool,
    pub attempts: usize,
    /// Wall time of the worker processes, start to exit.
    pub worker_s: f64,
    /// Of that, the work the workers measured: load, first inference, warm-up, timed iterations.
    pub measured_s: f64,
    pub wall_s: f64,
}

/// The figures of a sweep's plan.
pub struct Sweep<'a> {
    pub config: &'a Config,
    /// The conditions still to run, in order.
    pub conditions: &'a [Condition],
    /// Conditions of the whole plan, and how many had their result before this sweep.
    pub total: usize,
    pub done_before: usize,
    /// This edgeprof binary, run as `edgeprof worker` for the built-in engines.
    pub edgeprof: &'a std::path::Path,
    pub cancel: &'a Cancel,
    /// Where telemetry is read (`/`, or a fixture tree in tests).
    pub telemetry_root: &'a std::path::Path,
    /// The results directory (the conditions' first outputs go under it).
    pub dir: &'a std::path::Path,
    /// Attempts made at a condition before this sweep (a resumed one): its attempt numbers
    /// continue from there and its retries are what is left of the configured number.
    pub attempts_before: &'a std::collections::HashMap<String, usize>,
}

/// Seconds of work a worker measured (its own figures, not its process's life).
pub fn measured_seconds(run: &WorkerRun) -> f64 {
    let timed: f64 = run.repeats.iter().flatten().sum();
    let warm: f64 = run.warmup_ms.iter().sum();
    (run.init_ms + run.first_inference_ms.unwrap_or(0.0) + warm + timed) / 1e3
}

/// Sleeps, waking the moment the sweep is cancelled.
fn pause(seconds: f64, cancel: &Cancel) {
    let (tx, raised) = std::sync::mpsc::channel();
    let _registered = cancel.on_raise(move || {
        let _ = tx.send(());
    });
    let _ = raised.recv_timeout(Duration::from_secs_f64(seconds));
}

impl Sweep<'_> {
    fn request(&self, condition: &Condition) -> WorkerRequest {
        let m = &self.config.measure;
        WorkerRequest {
            condition: condition.clone(),
            warmup: m.warmup,
            warmup_seconds: m.warmup_seconds,
            iterations: m.iterations,
            min_duration_s: m.min_duration_s,
            // The first of the processes the repeats are spread over.
            repeats: repetition::share(m.repeats, m.processes, 0),
            seed: m.seed,
            classes: self.config.matrix.classes,
            counters: self.config.output.roofline,
            model_file: None,
            input_file: None,
            output_file: None,
            options: None,
        }
    }

    /// Adds repeats to a condition's first worker run `run` (whose repeats `first` describes)
    /// while [`repetition::next`] asks for them: the rest of the plan's repeats in the other
    /// processes they are spread over, disturbed ones measured again (after a pause that
    /// doubles from 1 s, so that a passing disturbance can end), then more until the median's
    /// interval meets the target, each batch in a worker run of its own. `run` gets the added
    /// raw times.
    fn repeat_more(
        &self,
        first_run: FirstRun,
        run: &mut WorkerRun,
        first: Vec<RepeatNote>,
        recorder: &crate::collect::telemetry::Recorder,
        on_event: &mut impl FnMut(SweepEvent),
    ) -> Added {
        let FirstRun {
            command,
            request,
            limits,
            began,
        } = first_run;
        let m = &self.config.measure;
        let mut added = Added {
            repetition: Repetition {
                repeats: first,
                runs: 1,
                target_ci: m.target_ci,
                ..Repetition::default()
            },
            resources: None,
            samples: Vec::new(),
            measured_s: 0.0,
            cancelled: false,
        };
        let r = &mut added.repetition;
        let mut disturbed_rounds = 0;
        loop {
            repetition::exclude_disturbed(m, &mut r.repeats);
            let Some(more) =
                repetition::next(m, &r.repeats, &run.repeats, r.runs, disturbed_rounds)
            else {
                break;
            };
            let n = more.repeats();
            // The plan's own processes are no addition: their iterations are in its total.
            if !matches!(more, More::Spread { .. }) {
                on_event(SweepEvent::MoreRepeats {
                    repeats: n,
                    iterations: n * m.iterations,
                    reason: more.reason(m.target_ci),
                });
            }
            if let More::Disturbed { .. } = more {
                pause(f64::from(1u32 << disturbed_rounds.min(3)), self.cancel);
                disturbed_rounds += 1;
                r.remeasured += n;
            }
            if self.cancel.is_raised() {
                added.cancelled = true;
                break;
            }
            let request = WorkerRequest {
                repeats: n,
                // The first run already wrote the output and counted the events.
                output_file: None,
                counters: false,
                ..request.clone()
            };
            let offset: usize = run.repeats.iter().map(Vec::len).sum();
            // The added run's samples count their time from the first run's start.
            let shift = began.elapsed().as_secs_f64();
            let mut watch = Watch::start(
                self.telemetry_root,
                std::process::id(),
                request.condition.cores.as_deref(),
            );
            let extra = spawn::run_worker(command, &request, limits, self.cancel, |event| {
                watch.event(&event);
                for sample in recorder.fresh() {
                    on_event(SweepEvent::Telemetry(Box::new(sample)));
                }
                // Progress counts on from the first run's iterations.
                let event = match event {
                    WorkerEvent::Timed(k) => WorkerEvent::Timed(offset + k),
                    e => e,
                };
                on_event(SweepEvent::Worker(event))
            });
            match &mut added.resources {
                Some(r) => r.absorb(&extra.resources),
                None => added.resources = Some(extra.resources.clone()),
            }
            added.samples.extend(extra.samples.into_iter().map(|mut s| {
                s.t_s += shift;
                s
            }));
            match extra.outcome {
                Ok(more_run) => {
                    r.runs += 1;
                    added.measured_s += measured_seconds(&more_run);
                    r.repeats.extend(watch.finish(&more_run.repeats, r.runs));
                    run.repeats.extend(more_run.repeats);
                }
                Err(RunFailure::Cancelled) => {
                    added.cancelled = true;
                    break;
                }
                Err(failure) => {
                    r.short = Some(format!(
                        "worker run {} of the condition failed: {failure}",
                        r.runs + 1
                    ));
                    break;
                }
            }
        }
        repetition::exclude_disturbed(m, &mut r.repeats);
        r.relative_half_width = repetition::relative_half_width(&r.kept(&run.repeats));
        if r.reached() == Some(false) && r.short.is_none() {
            r.short = Some(if run.repeats.len() >= m.max_repeats {
                format!(
                    "{} repeats, the most measure.max_repeats allows",
                    run.repeats.len()
                )
            } else {
                "stopped early".to_string()
            });
        }
        added
    }

    /// Runs the sweep, storing every attempt through `writer`.
    pub fn run(
        &self,
        writer: &mut Writer,
        mut on_event: impl FnMut(SweepEvent),
    ) -> anyhow::Result<SweepOutcome> {
        let start = Instant::now();
        // Whatever the workers start dies with edgeprof, even if edgeprof is killed.
        crate::collect::tree::start_guard(self.edgeprof);
        let m = &self.config.measure;
        let limits = RunLimits {
            timeout: Duration::from_secs_f64(m.timeout_s),
            sample_interval: Duration::from_millis(m.sample_interval_ms),
        };
        let attempts = 1 + m.retries;
        let mut outcome = SweepOutcome::default();
        // Telemetry sources that work here, sampled on their own thread during each attempt.
        let mut readers = Some(crate::collect::telemetry::working_readers(
            self.telemetry_root,
        ));
        let telemetry_interval = limits.sample_interval.max(Duration::from_millis(50));
        let interpreters = prepare::interpreters(self.config, self.conditions);
        'conditions: for (k, condition) in self.conditions.iter().enumerate() {
            let index = self.done_before + k + 1;
            let prepared = prepare::prepare(
                self.config,
                condition,
                self.request(condition),
                self.edgeprof,
                self.dir,
                &interpreters,
            );
            let Prepared { command, request } = match prepared {
                Ok(p) => p,
                Err(e) => {
                    // Nothing to retry: the condition cannot start here.
                    on_event(SweepEvent::Start {
                        index,
                        total: self.total,
                        condition: condition.clone(),
                        attempt: 1,
                        attempts: 1,
                    });
                    let failure = RunFailure::Prepare {
                        reason: format!("{e:#}"),
                    };
                    let record = RunRecord {
                        telemetry: None,
                        condition: condition.clone(),
                        attempt: 1,
                        last: true,
                        started: now_rfc3339(),
                        ok: false,
                        reason: Some(failure.to_string()),
                        failure: Some(failure),
                        run: None,
                        stats: None,
                        resources: Default::default(),
                        repetition: None,
                    };
                    writer.run(&record)?;
                    on_event(SweepEvent::Done {
                        index,
                        total: self.total,
                        record: Box::new(record),
                        retry: false,
                    });
                    outcome.failed += 1;
                    continue;
                }
            };
            let first = self
                .attempts_before
                .get(&condition.id)
                .map_or(1, |&made| (made + 1).min(attempts));
            for attempt in first..=attempts {
                if self.cancel.is_raised() {
                    outcome.interrupted = true;
                    break 'conditions;
                }
                on_event(SweepEvent::Start {
                    index,
                    total: self.total,
                    condition: condition.clone(),
                    attempt,
                    attempts,
                });
                let started = now_rfc3339();
                // Who else runs meanwhile: every process's CPU time before and after, and
                // per repeat from the scans the watch takes as the worker reports.
                let others_before = crate::collect::others::Scan::take(self.telemetry_root);
                let recorder = crate::collect::telemetry::Recorder::start(
                    readers.take().unwrap_or_default(),
                    telemetry_interval,
                );
                let mut watch = Watch::start(
                    self.telemetry_root,
                    std::process::id(),
                    condition.cores.as_deref(),
                );
                let began = Instant::now();
                let mut result =
                    spawn::run_worker(&command, &request, limits, self.cancel, |event| {
                        watch.event(&event);
                        for sample in recorder.fresh() {
                            on_event(SweepEvent::Telemetry(Box::new(sample)));
                        }
                        on_event(SweepEvent::Worker(event))
                    });
                let mut repetition = None;
                if let Ok(run) = &mut result.outcome {
                    outcome.measured_s += measured_seconds(run);
                    let first = watch.finish(&run.repeats, 1);
                    let more = self.repeat_more(
                        FirstRun {
                            command: &command,
                            request: &request,
                            limits,
                            began,
                        },
                        run,
                        first,
                        &recorder,
                        &mut on_event,
                    );
                    if let Some(more) = &more.resources {
                        result.resources.absorb(more);
                    }
                    result.samples.extend(more.samples);
                    outcome.measured_s += more.measured_s;
                    if more.cancelled {
                        result.outcome = Err(RunFailure::Cancelled);
                    }
                    repetition = Some(more.repetition);
                }
                let (telemetry_samples, back) = recorder.finish();
                readers = Some(back);
                let disturbance = crate::collect::others::between(
                    &others_before,
                    &crate::collect::others::Scan::take(self.telemetry_root),
                    std::process::id(),
                    condition.cores.as_deref(),
                );
                if matches!(result.outcome, Err(RunFailure::Cancelled)) {
                    // Not a result: a resumed sweep runs this condition again.
                    outcome.interrupted = true;
                    break 'conditions;
                }
                outcome.attempts += 1;
                outcome.worker_s += result.resources.wall_s;
                let (run, stats, failure) = match result.outcome {
                    Ok(run) => {
                        // Disturbed repeats that were measured again stay in the raw times
                        // but leave the statistics.
                        let kept = match &repetition {
                            Some(r) => r.kept(&run.repeats),
                            None => run.repeats.clone(),
                        };
                        let stats = stats::run_stats(
                            run.init_ms,
                            run.first_inference_ms,
                            &run.warmup_ms,
                            &kept,
                            condition.batch,
                            self.config.measure.outliers,
                        );
                        let failure = stats.is_none().then(|| RunFailure::Reported {
                            message: "the worker reported no timed iterations".to_string(),
                            stderr_tail: String::new(),
                        });
                        (Some(run), stats, failure)
                    }
                    Err(failure) => (None, None, Some(failure)),
                };
                let ok = failure.is_none();
                let last = ok || attempt == attempts;
                let mut telemetry = crate::throttle::summarize(
                    &telemetry_samples,
                    stats.as_ref().map(|s| s.latency.mean_ms),
                );
                telemetry.disturbance = Some(disturbance);
                let record = RunRecord {
                    telemetry: Some(telemetry),
                    condition: condition.clone(),
                    attempt,
                    last,
                    started,
                    ok,
                    reason: failure.as_ref().map(|f| f.to_string()),
                    failure,
                    run,
                    stats,
                    resources: result.resources,
                    repetition,
                };
                writer.run(&record)?;
                writer.samples(&condition.id, attempt, &result.samples)?;
                writer.telemetry(&condition.id, attempt, &telemetry_samples)?;
                on_event(SweepEvent::Done {
                    index,
                    total: self.total,
                    record: Box::new(record),
                    retry: !last,
                });
                if last {
                    if ok {
                        outcome.ok += 1;
                    } else {
                        outcome.failed += 1;
                    }
                }
                let more = !last || k + 1 < self.conditions.len();
                if m.cooldown_s > 0.0 && more {
                    on_event(SweepEvent::Cooldown {
                        seconds: m.cooldown_s,
                    });
                    pause(m.cooldown_s, self.cancel);
                }
                if ok {
                    break;
                }
            }
        }
        outcome.wall_s = start.elapsed().as_secs_f64();
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_work_is_load_first_warmup_and_timed() {
        let run = WorkerRun {
            init_ms: 100.0,
            first_inference_ms: Some(50.0),
            warmup_ms: vec![10.0, 10.0],
            repeats: vec![vec![5.0; 10], vec![5.0; 10]],
            ..WorkerRun::default()
        };
        assert!((measured_seconds(&run) - 0.27).abs() < 1e-12);
    }

    #[test]
    fn a_cancelled_pause_returns_at_once() {
        let cancel = Cancel::new();
        cancel.raise();
        let t = Instant::now();
        pause(30.0, &cancel);
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}

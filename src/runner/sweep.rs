//! The sweep: every planned condition in its own worker process, one after another, with
//! retries, cool-downs and a stop on request; every attempt is appended to the results
//! directory before the next begins. Progress goes out as [`SweepEvent`]s; nothing here prints.

use crate::collect::stop::Cancel;
use crate::config::Config;
use crate::results::{RunRecord, Writer};
use crate::runner::matrix::Condition;
use crate::runner::prepare::{self, Prepared};
use crate::runner::protocol::{WorkerRequest, WorkerRun};
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
            repeats: m.repeats,
            seed: m.seed,
            classes: self.config.matrix.classes,
            counters: self.config.output.roofline,
            model_file: None,
            input_file: None,
            output_file: None,
            options: None,
        }
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
                // Who else runs meanwhile: every process's CPU time before and after.
                let others_before = crate::collect::others::Scan::take(self.telemetry_root);
                let recorder = crate::collect::telemetry::Recorder::start(
                    readers.take().unwrap_or_default(),
                    telemetry_interval,
                );
                let result = spawn::run_worker(&command, &request, limits, self.cancel, |event| {
                    for sample in recorder.fresh() {
                        on_event(SweepEvent::Telemetry(Box::new(sample)));
                    }
                    on_event(SweepEvent::Worker(event))
                });
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
                        outcome.measured_s += measured_seconds(&run);
                        let stats = stats::run_stats(
                            run.init_ms,
                            run.first_inference_ms,
                            &run.warmup_ms,
                            &run.repeats,
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

//! The sweep: every planned condition measured in worker processes, with retries, cool-downs
//! and a stop on request; every condition's record is appended to the results directory as soon
//! as it is complete. Progress goes out as [`SweepEvent`]s; nothing here prints.
//!
//! A condition's repeats are spread over `measure.processes` worker processes, and those are
//! interleaved across neighbouring conditions: every condition of a window gets its first
//! process, then every one its second, and so on. The processes of one condition so lie minutes
//! apart rather than back to back, and the interval of its median sees how the machine itself
//! drifts over that time (a shared or thermally limited board's speed wanders by several per
//! cent within a minute); back to back, two sweeps of the same config disagreed beyond their
//! intervals far more often. A window holds about [`INTERLEAVE_WINDOW_S`] of estimated work, so
//! a stopped sweep loses at most that much: conditions without their record are measured again
//! on resumption.

mod condition;

use crate::collect::stop::Cancel;
use crate::config::Config;
use crate::protocol::Condition;
use crate::protocol::WorkerRun;
use crate::results::{RunRecord, Writer};
use crate::runner::spawn::{RunLimits, WorkerEvent};
use condition::{Pending, Started};
use std::time::{Duration, Instant};

/// Estimated seconds of work whose conditions' worker processes are interleaved (see the
/// module's description).
pub const INTERLEAVE_WINDOW_S: f64 = 180.0;

/// What happens during a sweep, for progress display: owned, so that a front-end can pass it
/// across threads as it is (the terminal UI's run thread sends it to the UI loop unchanged).
#[derive(Debug, Clone)]
pub enum SweepEvent {
    /// One of a condition's worker processes begins: `process` of `processes` (the first one
    /// of an attempt, or a later one of the repeats spread over them), planned for
    /// `iterations` timed iterations. `index` counts from 1 over the whole plan (resumed runs
    /// included). Worker events that follow count its timed iterations from 0.
    Start {
        index: usize,
        total: usize,
        condition: Condition,
        attempt: usize,
        attempts: usize,
        process: usize,
        processes: usize,
        iterations: usize,
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
    /// Something the user should know that does not stop the sweep, in one sentence.
    Warning(String),
    /// The condition gets `repeats` more repeats (another worker run of about `iterations`
    /// timed iterations, counted on from those of its latest `Start`), and why: disturbed repeats measured again, or the median's interval
    /// still wider than `measure.target_ci`.
    MoreRepeats {
        repeats: usize,
        iterations: usize,
        reason: String,
    },
}

/// How a sweep ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepOutcome {
    /// Conditions that got their result in this sweep.
    pub ok: usize,
    pub failed: usize,
    pub interrupted: bool,
    /// Conditions stopped part-way whose finished repeats were kept for `--resume`.
    pub kept: usize,
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
    pub attempts_before: &'a std::collections::HashMap<String, Made>,
    /// What a stopped sweep had measured of conditions it was in the middle of, by condition
    /// id: they go on from there.
    pub partials: &'a std::collections::HashMap<String, crate::results::partial::Partial>,
    /// The board's state as the sweep begins, when the caller has read it already; each record
    /// says how the state then differs from it. None: read here.
    pub board_state: Option<&'a crate::collect::board::BoardState>,
}

/// The attempts at a condition before a resumed sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Made {
    /// Attempts that have their record: they count against `measure.retries`.
    pub recorded: usize,
    /// The highest attempt number any line of the condition carries (an attempt whose record
    /// was never written — the disk filled, the run was killed — may have left samples): the
    /// next attempt is numbered past it, so that no two attempts share a number.
    pub numbered: usize,
}

/// Seconds of work a worker measured (its own figures, not its process's life).
pub fn measured_seconds(run: &WorkerRun) -> f64 {
    let timed: f64 = run.repeats.iter().flatten().sum();
    let warm: f64 = run.warmup_ms.iter().sum();
    (run.init_ms + run.first_inference_ms.unwrap_or(0.0) + warm + timed) / 1e3
}

impl Sweep<'_> {
    /// This device's history (see [`crate::results::history`]): from the cache directory,
    /// keyed like its ceilings.
    fn history(&self) -> (crate::results::history::History, Option<String>) {
        use crate::results::history::{path_for, History};
        let Some(dir) = crate::roofline::store::cache_dir() else {
            return (
                History::in_memory(),
                Some(
                    "no cache directory (set EDGEPROF_CACHE_DIR or HOME): conditions are not \
                     compared with their earlier runs on this device"
                        .to_string(),
                ),
            );
        };
        let device = crate::collect::device::fingerprint(self.telemetry_root);
        History::open(path_for(&dir, &crate::roofline::store::device_key(&device)))
    }
}

/// Sleeps, waking the moment the sweep is cancelled.
fn pause(seconds: f64, cancel: &Cancel) {
    let (tx, raised) = std::sync::mpsc::channel();
    let _registered = cancel.on_raise(move || {
        let _ = tx.send(());
    });
    let _ = raised.recv_timeout(Duration::from_secs_f64(seconds));
}

/// The conditions (by position) whose worker processes are interleaved, in order: consecutive
/// ones while their estimated seconds stay within `limit_s`, one at least.
pub fn windows(estimates: &[f64], limit_s: f64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut from, mut sum) = (0, 0.0);
    for (i, e) in estimates.iter().enumerate() {
        if i > from && sum + e > limit_s {
            out.push(from..i);
            (from, sum) = (i, 0.0);
        }
        sum += e;
    }
    if from < estimates.len() {
        out.push(from..estimates.len());
    }
    out
}

/// What a sweep carries from one worker run to the next.
struct State {
    limits: RunLimits,
    /// Telemetry sources that work here, sampled on their own thread during each worker run.
    readers: Option<Vec<Box<dyn crate::collect::telemetry::Reader>>>,
    telemetry_interval: Duration,
    outcome: SweepOutcome,
    /// Each condition's latest clean run on this device, to say when one moved beyond both
    /// intervals since.
    history: crate::results::history::History,
    /// The levels of the repeats of the window's conditions so far
    /// ([`crate::stats::repeat_factors`]), by condition id: how much their worker processes
    /// differ, for every condition's interval.
    levels: std::collections::HashMap<String, Vec<f64>>,
    /// This device in words, for each record (a resumed sweep may run on another).
    ran_on: String,
    /// The board's state as the sweep began, and the changes from it last said.
    board: (crate::collect::board::BoardState, Vec<String>),
}

impl State {
    /// Every level of the window so far.
    fn pool(&self) -> Vec<f64> {
        self.levels.values().flatten().copied().collect()
    }
}

impl Sweep<'_> {
    /// Runs the sweep, storing every attempt through `writer`.
    pub fn run(
        &self,
        writer: &mut Writer,
        mut on_event: impl FnMut(SweepEvent),
    ) -> crate::error::Result<SweepOutcome> {
        let start = Instant::now();
        // Whatever the workers start dies with edgeprof, even if edgeprof is killed.
        crate::collect::tree::start_guard(self.edgeprof);
        let m = &self.config.measure;
        let limits = RunLimits {
            timeout: Duration::from_secs_f64(m.timeout_s),
            sample_interval: Duration::from_millis(m.sample_interval_ms),
        };
        let mut st = State {
            limits,
            readers: Some(crate::collect::telemetry::working_readers(
                self.telemetry_root,
            )),
            telemetry_interval: limits.sample_interval.max(Duration::from_millis(50)),
            outcome: SweepOutcome::default(),
            levels: Default::default(),
            history: crate::results::history::History::in_memory(),
            ran_on: crate::collect::device::fingerprint(std::path::Path::new("/")).describe(),
            board: (
                self.board_state.cloned().unwrap_or_else(|| {
                    crate::collect::board::read(
                        self.telemetry_root,
                        &crate::collect::board::LiveCommands,
                    )
                }),
                Vec::new(),
            ),
        };
        let (history, note) = self.history();
        st.history = history;
        if let Some(why) = note {
            on_event(SweepEvent::Warning(why));
        }
        let interpreters = crate::runner::prepare::interpreters(self.config, self.conditions);
        let cores = crate::collect::device::available_cores();
        let estimates: Vec<f64> = self
            .conditions
            .iter()
            .map(|c| crate::runner::matrix::estimate_condition(self.config, c, cores))
            .collect();
        let processes = self.processes();
        let windows = windows(&estimates, INTERLEAVE_WINDOW_S);
        let last_window = windows.len().saturating_sub(1);
        // The conditions a stop caught between their first worker run and their record.
        let mut stopped: Vec<Box<Pending>> = Vec::new();
        'sweep: for (w, window) in windows.into_iter().enumerate() {
            // Round r gives every condition of the window its r-th worker process; the last
            // round's runs are followed by what each still needs, and its record.
            let mut pending: Vec<Box<Pending>> = Vec::new();
            st.levels.clear();
            for round in 1..=processes {
                let last_round = round == processes;
                let items: Vec<Result<usize, Box<Pending>>> = if round == 1 {
                    window.clone().map(Ok).collect()
                } else {
                    pending.drain(..).map(Err).collect()
                };
                let count = items.len();
                let mut items = items.into_iter().enumerate();
                // On a stop: this one, those of the round already past it, and those still
                // waiting for it.
                let mut stop = |this: Option<Box<Pending>>,
                                pending: &mut Vec<Box<Pending>>,
                                rest: &mut dyn Iterator<
                    Item = (usize, Result<usize, Box<Pending>>),
                >| {
                    stopped.extend(this);
                    stopped.append(pending);
                    stopped.extend(rest.filter_map(|(_, item)| item.err()));
                };
                while let Some((i, item)) = items.next() {
                    let p = match item {
                        Ok(k) => {
                            match self.start(&mut st, k, &interpreters, writer, &mut on_event)? {
                                Started::Measuring(p) => Some(p),
                                Started::Failed => None,
                                Started::Cancelled(p) => {
                                    stop(p, &mut pending, &mut items);
                                    break 'sweep;
                                }
                            }
                        }
                        Err(mut p) => {
                            if !self.spread(&mut st, &mut p, round, &mut on_event) {
                                stop(Some(p), &mut pending, &mut items);
                                break 'sweep;
                            }
                            Some(p)
                        }
                    };
                    if let Some(p) = p {
                        if !last_round {
                            pending.push(p);
                        } else if let Some(p) = self.finish(&mut st, p, writer, &mut on_event)? {
                            stop(Some(p), &mut pending, &mut items);
                            break 'sweep;
                        }
                    }
                    let more = !(w == last_window && last_round && i + 1 == count);
                    if m.cooldown_s > 0.0 && more {
                        on_event(SweepEvent::Cooldown {
                            seconds: m.cooldown_s,
                        });
                        pause(m.cooldown_s, self.cancel);
                    }
                }
            }
        }
        let mut outcome = st.outcome;
        // What the stopped conditions' workers did counts where the time went, and their
        // finished repeats are kept for a resumed sweep to go on from.
        for p in &stopped {
            let (worker_s, measured_s) = p.spent();
            outcome.worker_s += worker_s;
            outcome.measured_s += measured_s;
        }
        let kept: Vec<crate::results::partial::Partial> =
            stopped.iter().filter_map(|p| p.partial()).collect();
        crate::results::partial::keep(self.dir, &kept)?;
        outcome.kept = kept.len();
        // Stopped before every condition had its record: a resumed sweep measures the rest.
        outcome.interrupted = outcome.ok + outcome.failed < self.conditions.len();
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
    fn windows_hold_consecutive_conditions_up_to_the_limit_one_at_least() {
        assert_eq!(windows(&[60.0, 60.0, 60.0, 60.0], 180.0), [0..3, 3..4]);
        // A condition longer than the limit has a window of its own.
        assert_eq!(windows(&[500.0, 10.0, 10.0], 180.0), [0..1, 1..3]);
        assert_eq!(windows(&[10.0, 500.0], 180.0), [0..1, 1..2]);
        assert!(windows(&[], 180.0).is_empty());
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

//! One condition of a sweep, from its first worker run to its record: the runs that follow it
//! (the rest of its repeats, spread over its processes; disturbed ones measured again; more for
//! the target interval), each watched for telemetry and for other processes on its cores.

use super::{measured_seconds, pause, State, Sweep, SweepEvent};
use crate::collect::other_processes::{self as others, Disturbance, Scan};
use crate::collect::proc::ProcSample;
use crate::collect::telemetry::{Recorder, Sample};
use crate::protocol::repetition::{self, More, RepeatNote, Repetition, Watch};
use crate::protocol::Condition;
use crate::protocol::{WorkerRequest, WorkerRun};
use crate::results::partial::Partial;
use crate::results::{history, RunRecord, Writer};
use crate::runner::prepare::{self, Interpreters, Prepared};
use crate::runner::spawn::{self, Resources, RunFailure, WorkerCommand, WorkerEvent};
use crate::stats;
use crate::text::now_rfc3339;

/// What starting a condition came to.
pub(super) enum Started {
    /// Its first worker run gave times; the rest of its runs are to come.
    Measuring(Box<Pending>),
    /// It could not be prepared, or every attempt failed (each one recorded).
    Failed,
    /// The sweep was cancelled: what the condition's runs had given (finished repeats, the
    /// time they took), if a worker ran.
    Cancelled(Option<Box<Pending>>),
}

/// A condition between its first worker run and its record: what its runs gave so far.
pub(super) struct Pending {
    index: usize,
    condition: Condition,
    command: WorkerCommand,
    request: WorkerRequest,
    attempt: usize,
    attempts: usize,
    /// When the attempt began, for the record.
    started: String,
    run: WorkerRun,
    repetition: Repetition,
    resources: Option<Resources>,
    samples: Vec<ProcSample>,
    telemetry: Vec<Sample>,
    /// Other processes on its cores during each of its worker runs, with the run's wall time.
    disturbance: Vec<(Disturbance, f64)>,
    measured_s: f64,
    /// Iterations timed since its latest [`SweepEvent::Start`]: later runs count on from there.
    timed: usize,
    /// Whether this sweep has said it started (one restored from a stopped sweep has not).
    announced: bool,
}

impl Pending {
    fn new(index: usize, condition: &Condition, prepared: &Prepared, attempt: usize) -> Pending {
        Pending {
            index,
            condition: condition.clone(),
            command: prepared.command.clone(),
            request: prepared.request.clone(),
            attempt,
            attempts: 0,
            started: now_rfc3339(),
            run: WorkerRun::default(),
            repetition: Repetition::default(),
            resources: None,
            samples: Vec::new(),
            telemetry: Vec::new(),
            disturbance: Vec::new(),
            measured_s: 0.0,
            timed: 0,
            announced: true,
        }
    }

    /// The condition as a stopped sweep left it: its finished repeats and what they cost.
    fn restored(index: usize, prepared: &Prepared, partial: &Partial) -> Pending {
        Pending {
            started: partial.started.clone(),
            run: partial.run.clone(),
            repetition: partial.repetition.clone(),
            resources: Some(partial.resources.clone()),
            samples: partial.samples.clone(),
            telemetry: partial.telemetry.clone(),
            disturbance: partial.disturbance.clone(),
            measured_s: partial.measured_s,
            announced: false,
            ..Pending::new(index, &partial.condition, prepared, partial.attempt)
        }
    }

    /// What it has, to be kept when the sweep stops before its record.
    pub(super) fn partial(&self) -> Option<Partial> {
        (!self.run.repeats.is_empty()).then(|| Partial {
            condition: self.condition.clone(),
            attempt: self.attempt,
            started: self.started.clone(),
            run: self.run.clone(),
            repetition: self.repetition.clone(),
            resources: self.resources.clone().unwrap_or_default(),
            samples: self.samples.clone(),
            telemetry: self.telemetry.clone(),
            disturbance: self.disturbance.clone(),
            measured_s: self.measured_s,
        })
    }

    /// Worker wall time and measured seconds so far.
    pub(super) fn spent(&self) -> (f64, f64) {
        (
            self.resources.as_ref().map_or(0.0, |r| r.wall_s),
            self.measured_s,
        )
    }

    /// Adds a worker run's repeats (and their notes) to what the condition has.
    fn absorb(&mut self, run: WorkerRun, notes: Vec<RepeatNote>, target_ci: Option<f64>) {
        if self.repetition.runs == 0 {
            self.run = run;
            self.repetition = Repetition {
                repeats: notes,
                runs: 1,
                target_ci,
                ..Repetition::default()
            };
        } else {
            self.repetition.runs += 1;
            self.repetition.repeats.extend(notes);
            self.run.repeats.extend(run.repeats);
        }
    }
}

impl Pending {
    /// Puts the levels of its kept repeats into the window's pool.
    fn note_levels(&self, st: &mut State) {
        let kept = self.repetition.kept(&self.run.repeats);
        st.levels
            .insert(self.condition.id.clone(), stats::repeat_factors(&kept));
    }
}

impl Sweep<'_> {
    fn request(&self, condition: &Condition) -> WorkerRequest {
        let m = &self.config.measure;
        WorkerRequest {
            warmup: m.warmup,
            warmup_seconds: m.warmup_seconds,
            iterations: m.iterations,
            min_duration_s: m.min_duration_s,
            // The first of the processes the repeats are spread over.
            repeats: repetition::share(m.repeats, m.processes, 0),
            counters: self.config.output.roofline,
            layer_runs: m.layer_runs,
            ..WorkerRequest::new(condition.clone(), m.seed, self.config.matrix.classes)
        }
    }

    /// The worker processes a condition's repeats are spread over.
    pub(super) fn processes(&self) -> usize {
        let m = &self.config.measure;
        m.processes.clamp(1, m.repeats.max(1))
    }

    /// Prepares condition `k` and makes its first worker run, attempt after attempt until one
    /// gives times (each failed attempt is recorded at once).
    pub(super) fn start(
        &self,
        st: &mut State,
        k: usize,
        interpreters: &Interpreters,
        writer: &mut Writer,
        on_event: &mut impl FnMut(SweepEvent),
    ) -> crate::error::Result<Started> {
        let condition = &self.conditions[k];
        let index = self.done_before + k + 1;
        let m = &self.config.measure;
        // Attempts numbered on from the last line of an earlier run; the retries left are what
        // its records used, and a condition measured again after its lines were lost (it used
        // them all) gets one more.
        let (first, attempts) = match self.attempts_before.get(&condition.id) {
            None => (1, 1 + m.retries),
            Some(made) => {
                let left = (1 + m.retries).saturating_sub(made.recorded).max(1);
                (made.numbered + 1, made.numbered + left)
            }
        };
        let prepared = prepare::prepare(
            self.config,
            condition,
            self.request(condition),
            self.edgeprof,
            self.dir,
            interpreters,
        );
        let prepared = match prepared {
            Ok(p) => p,
            Err(e) => {
                // Nothing to retry: the condition cannot start here.
                on_event(SweepEvent::Start {
                    index,
                    total: self.total,
                    condition: condition.clone(),
                    attempt: 1,
                    attempts: 1,
                    process: 1,
                    processes: self.processes(),
                    iterations: 0,
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
                    drift: None,
                    ran_on: None,
                    state_changes: Vec::new(),
                };
                writer.run(&record)?;
                on_event(SweepEvent::Done {
                    index,
                    total: self.total,
                    record: Box::new(record),
                    retry: false,
                });
                st.outcome.failed += 1;
                return Ok(Started::Failed);
            }
        };
        // Stopped part-way before: go on from the repeats it finished.
        if let Some(partial) = self.partials.get(&condition.id) {
            let mut p = Pending::restored(index, &prepared, partial);
            p.attempts = attempts.max(partial.attempt);
            p.note_levels(st);
            return Ok(Started::Measuring(Box::new(p)));
        }
        for attempt in first..=attempts {
            if self.cancel.is_raised() {
                return Ok(Started::Cancelled(None));
            }
            on_event(SweepEvent::Start {
                index,
                total: self.total,
                condition: condition.clone(),
                attempt,
                attempts,
                process: 1,
                processes: self.processes(),
                iterations: prepared.request.repeats * m.iterations,
            });
            let mut p = Pending::new(index, condition, &prepared, attempt);
            p.attempts = attempts;
            let request = p.request.clone();
            match self.watched(st, &mut p, &request, on_event) {
                Ok(()) => {
                    p.note_levels(st);
                    return Ok(Started::Measuring(Box::new(p)));
                }
                Err(RunFailure::Cancelled) => return Ok(Started::Cancelled(Some(Box::new(p)))),
                Err(failure) => {
                    let last = attempt == attempts;
                    self.store(st, p, Some(failure), last, writer, on_event)?;
                    if !last && m.cooldown_s > 0.0 {
                        on_event(SweepEvent::Cooldown {
                            seconds: m.cooldown_s,
                        });
                        pause(m.cooldown_s, self.cancel);
                    }
                }
            }
        }
        Ok(Started::Failed)
    }

    /// Worker process `process` (from 1) of `p`'s condition: its share of the repeats, unless
    /// an earlier one failed. False when the sweep was cancelled.
    pub(super) fn spread(
        &self,
        st: &mut State,
        p: &mut Pending,
        process: usize,
        on_event: &mut impl FnMut(SweepEvent),
    ) -> bool {
        let m = &self.config.measure;
        if self.cancel.is_raised() {
            return false;
        }
        let n = repetition::share(m.repeats, m.processes, process - 1);
        // A condition restored from a stopped sweep may have run this process already.
        if n == 0 || p.repetition.short.is_some() || p.repetition.runs >= process {
            return true;
        }
        self.announce(p, process, self.processes(), n * m.iterations, on_event);
        p.timed = 0;
        self.more(st, p, n, on_event)
    }

    /// Says that worker process `process` of `processes` of `p`'s condition begins, planned
    /// for `iterations` timed iterations.
    fn announce(
        &self,
        p: &mut Pending,
        process: usize,
        processes: usize,
        iterations: usize,
        on_event: &mut impl FnMut(SweepEvent),
    ) {
        p.announced = true;
        on_event(SweepEvent::Start {
            index: p.index,
            total: self.total,
            condition: p.condition.clone(),
            attempt: p.attempt,
            attempts: p.attempts,
            process,
            processes,
            iterations,
        });
    }

    /// Another worker run of `p`'s condition for `repeats` repeats, its times added to the
    /// first run's; a failed one ends the condition's repetition with what it has. False when
    /// the sweep was cancelled.
    fn more(
        &self,
        st: &mut State,
        p: &mut Pending,
        repeats: usize,
        on_event: &mut impl FnMut(SweepEvent),
    ) -> bool {
        let request = WorkerRequest {
            repeats,
            // The first run already wrote the output, counted the events and profiled the
            // layers.
            output_file: None,
            counters: false,
            layer_runs: 0,
            outputs_dir: None,
            ..p.request.clone()
        };
        match self.watched(st, p, &request, on_event) {
            Ok(()) => {
                p.note_levels(st);
                true
            }
            Err(RunFailure::Cancelled) => false,
            Err(failure) => {
                p.repetition.short = Some(format!(
                    "worker run {} of the condition failed: {failure}",
                    p.repetition.runs + 1
                ));
                true
            }
        }
    }

    /// One worker run of `p`'s condition, with the telemetry recorder and the watch on other
    /// processes around it; what it cost and what they saw go into `p`, and its repeats (those
    /// it finished, when the sweep was cancelled during it).
    fn watched(
        &self,
        st: &mut State,
        p: &mut Pending,
        request: &WorkerRequest,
        on_event: &mut impl FnMut(SweepEvent),
    ) -> Result<(), RunFailure> {
        let own = std::process::id();
        let cores = p.condition.cores.clone();
        // Samples count their time on the condition's own clock: its worker runs laid end to
        // end (other conditions' runs come between them), as the sweep's timelines place them.
        let shift = p.resources.as_ref().map_or(0.0, |r| r.wall_s);
        let offset = p.timed;
        // Who else runs meanwhile: every process's CPU time before and after, and per repeat
        // from the scans the watch takes as the worker reports.
        let before = Scan::take(self.telemetry_root);
        let recorder =
            Recorder::start(st.readers.take().unwrap_or_default(), st.telemetry_interval);
        let mut watch = Watch::start(self.telemetry_root, own, cores.as_deref());
        let attempt = spawn::run_worker(&p.command, request, st.limits, self.cancel, |event| {
            watch.event(&event);
            for sample in recorder.fresh() {
                on_event(SweepEvent::Telemetry(Box::new(sample)));
            }
            let event = match event {
                WorkerEvent::Timed(k) => WorkerEvent::Timed(offset + k),
                e => e,
            };
            on_event(SweepEvent::Worker(event))
        });
        let (telemetry, back) = recorder.finish();
        st.readers = Some(back);
        let after = Scan::take(self.telemetry_root);
        p.disturbance.push((
            others::between(&before, &after, own, cores.as_deref()),
            attempt.resources.wall_s,
        ));
        p.telemetry.extend(telemetry.into_iter().map(|mut s| {
            s.t_s += shift;
            s
        }));
        p.samples.extend(attempt.samples.into_iter().map(|mut s| {
            s.t_s += shift;
            s
        }));
        match &mut p.resources {
            Some(r) => r.absorb(&attempt.resources),
            None => p.resources = Some(attempt.resources),
        }
        let (run, result) = match (attempt.outcome, attempt.finished) {
            (Ok(run), _) => (run, Ok(())),
            (Err(RunFailure::Cancelled), Some(finished)) => (finished, Err(RunFailure::Cancelled)),
            (Err(failure), _) => return Err(failure),
        };
        p.measured_s += measured_seconds(&run);
        p.timed += run.repeats.iter().map(Vec::len).sum::<usize>();
        let notes = watch.finish(&run.repeats, p.repetition.runs + 1);
        p.absorb(run, notes, self.config.measure.target_ci);
        result
    }

    /// Adds what `p` still needs — disturbed repeats measured again (after a pause that doubles
    /// from 1 s, so that a passing disturbance can end), then repeats until the median's
    /// interval meets the target, each batch in a worker run of its own — and stores its
    /// record. When the sweep was cancelled meanwhile nothing is stored and the condition comes
    /// back as it stands.
    pub(super) fn finish(
        &self,
        st: &mut State,
        mut p: Box<Pending>,
        writer: &mut Writer,
        on_event: &mut impl FnMut(SweepEvent),
    ) -> crate::error::Result<Option<Box<Pending>>> {
        let m = &self.config.measure;
        let mut disturbed_rounds = 0;
        while p.repetition.short.is_none() {
            let runs = p.repetition.runs;
            let r = &mut p.repetition;
            repetition::exclude_disturbed(m, &mut r.repeats);
            let pool = st.pool();
            let Some(more) = repetition::next(
                m,
                &r.repeats,
                &p.run.repeats,
                r.runs,
                disturbed_rounds,
                &pool,
            ) else {
                break;
            };
            let n = more.repeats();
            if !p.announced {
                // Restored from a stopped sweep: its next worker run is its first here.
                p.timed = 0;
                let processes = self.processes().max(runs + 1);
                self.announce(&mut p, runs + 1, processes, n * m.iterations, on_event);
            }
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
                p.repetition.remeasured += n;
            }
            if self.cancel.is_raised() || !self.more(st, &mut p, n, on_event) {
                return Ok(Some(p));
            }
        }
        let r = &mut p.repetition;
        repetition::exclude_disturbed(m, &mut r.repeats);
        p.note_levels(st);
        let r = &mut p.repetition;
        r.relative_half_width =
            repetition::relative_half_width(&r.kept(&p.run.repeats), &st.pool());
        if r.reached() == Some(false) && r.short.is_none() {
            r.short = Some(if p.run.repeats.len() >= m.max_repeats {
                format!(
                    "{} repeats, the most measure.max_repeats allows",
                    p.run.repeats.len()
                )
            } else {
                "stopped early".to_string()
            });
        }
        self.store(st, *p, None, true, writer, on_event)?;
        Ok(None)
    }

    /// Writes `p`'s record — its attempt failed with `failure`, or gave times — with its raw
    /// samples and telemetry, and tells the front-end; `last` when no attempt follows a failure.
    fn store(
        &self,
        st: &mut State,
        p: Pending,
        failure: Option<RunFailure>,
        last: bool,
        writer: &mut Writer,
        on_event: &mut impl FnMut(SweepEvent),
    ) -> crate::error::Result<()> {
        let resources = p.resources.unwrap_or_default();
        st.outcome.attempts += 1;
        st.outcome.worker_s += resources.wall_s;
        st.outcome.measured_s += p.measured_s;
        let (run, stats, failure, repetition) = match failure {
            None => {
                // Disturbed repeats that were measured again stay in the raw times but leave
                // the statistics.
                let kept = p.repetition.kept(&p.run.repeats);
                let mut stats = stats::run_stats(
                    p.run.init_ms,
                    p.run.first_inference_ms,
                    &p.run.warmup_ms,
                    &kept,
                    p.condition.batch,
                    self.config.measure.outliers,
                );
                // The interval also covers how much worker processes differ here, as the
                // window's conditions saw it.
                if let Some(s) = &mut stats {
                    s.median_interval_ms =
                        stats::median_interval_pooled(&kept, &st.pool(), stats::BOOTSTRAP_ROUNDS);
                }
                let failure = stats.is_none().then(|| RunFailure::Reported {
                    message: "the worker reported no timed iterations".to_string(),
                    stderr_tail: String::new(),
                });
                let mut run = p.run;
                run.inputs = p.request.input_note.clone();
                (Some(run), stats, failure, Some(p.repetition))
            }
            Some(failure) => (None, None, Some(failure), None),
        };
        let ok = failure.is_none();
        let last = ok || last;
        let mut telemetry = crate::run_telemetry::summarize(
            &p.telemetry,
            stats.as_ref().map(|s| s.latency.mean_ms),
        );
        telemetry.disturbance = Some(Disturbance::combine(&p.disturbance));
        let mut record = RunRecord {
            telemetry: Some(telemetry),
            condition: p.condition,
            attempt: p.attempt,
            last,
            started: p.started,
            ok,
            reason: failure.as_ref().map(|f| f.to_string()),
            failure,
            run,
            stats,
            resources,
            repetition,
            drift: None,
            ran_on: Some(st.ran_on.clone()),
            state_changes: board_changes(self.telemetry_root, &mut st.board, on_event),
        };
        if ok {
            let key = history::key(&record, &self.config.measure);
            record.drift = st.history.against(&key, &record);
            if let Err(why) = st.history.note(key, &record, self.dir) {
                // Said once; the sweep goes on without it.
                st.history = history::History::in_memory();
                on_event(SweepEvent::Warning(format!(
                    "{why}; conditions are no longer compared with their earlier runs here"
                )));
            }
        }
        // The record last: a condition is done only once all its lines are stored, so a full
        // disk while its samples are written leaves it to be measured again.
        writer.samples(&record.condition.id, record.attempt, &p.samples)?;
        writer.telemetry(&record.condition.id, record.attempt, &p.telemetry)?;
        writer.run(&record)?;
        on_event(SweepEvent::Done {
            index: p.index,
            total: self.total,
            record: Box::new(record),
            retry: !last,
        });
        if last {
            if ok {
                st.outcome.ok += 1;
            } else {
                st.outcome.failed += 1;
            }
        }
        Ok(())
    }
}

/// How the board's state now differs from the sweep's start (`start`); a change not said
/// before becomes a warning.
fn board_changes(
    root: &std::path::Path,
    (start, said): &mut (crate::collect::board::BoardState, Vec<String>),
    on_event: &mut impl FnMut(SweepEvent),
) -> Vec<String> {
    let now = crate::collect::board::read(root, &crate::collect::board::LiveCommands);
    let changes = crate::collect::board::BoardState::differences(start, &now);
    if changes != *said {
        if !changes.is_empty() {
            on_event(SweepEvent::Warning(format!(
                "the board's state changed during the sweep (A: at its start, B: now): {}",
                changes.join("; ")
            )));
        }
        *said = changes.clone();
    }
    changes
}

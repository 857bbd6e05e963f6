//! The sweep job: a new results directory from a config, or an interrupted one finished, run
//! to its end with its progress said as events and in the directory's `progress.log`, its
//! summaries and charts written, and its CPU and GPU rooflines when the config asks for them.
//! The CLI and the terminal UI start the same job and only show what it reports.

use super::Sink;
use crate::collect::stop::Cancel;
use crate::config::Config;
use crate::error::Context;
use crate::event::{Event, RunEvent};
use crate::lockfile::LockFile;
use crate::results::{self, summary, Manifest, Stored, SweepStatus};
use crate::runner::matrix::{self, Condition};
use crate::runner::progress::{Narrator, Said};
use crate::runner::spawn::WorkerEvent;
use crate::runner::sweep::{Made, Sweep, SweepEvent, SweepOutcome};
use crate::sweep_dir::{self, CpuRoofline, ResumeOptions};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use thiserror::Error;

/// Some conditions failed (exit code 1); their reasons are in the results.
#[derive(Debug, Error)]
#[error("{failed} of {total} condition(s) failed; reasons in {}", dir.display())]
pub struct SomeFailed {
    pub failed: usize,
    pub total: usize,
    pub dir: PathBuf,
}

/// The sweep was stopped (exit code 130); `--resume` finishes it.
#[derive(Debug, Error)]
#[error("interrupted with {done} of {total} condition(s) done; finish with: edgeprof run --resume {}", dir.display())]
pub struct Interrupted {
    pub done: usize,
    pub total: usize,
    pub dir: PathBuf,
}

/// A sweep ready to run in a results directory it holds (locked until the sweep ends).
pub struct Plan {
    pub config: Config,
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// The conditions to run, in order.
    pub todo: Vec<Condition>,
    /// Conditions finished by an earlier run of the directory, and the attempts made at the
    /// unfinished ones, so that retries count on.
    pub done_before: usize,
    pub attempts_before: HashMap<String, Made>,
    /// What a stopped sweep had measured of conditions it was in the middle of.
    pub partials: HashMap<String, results::partial::Partial>,
    /// Whether this finishes an interrupted directory.
    pub resumed: bool,
    /// What reopening the directory found worth saying (lines skipped, conditions measured
    /// again).
    pub warnings: Vec<String>,
    lock: LockFile,
}

impl Plan {
    /// A new results directory for the config `text` (`file` names it and resolves its
    /// relative paths), under `output` or the config's output directory.
    pub fn new(text: String, file: &Path, output: Option<&Path>) -> crate::error::Result<Plan> {
        Ok(Plan::started(sweep_dir::start_from_text(
            text, file, output,
        )?))
    }

    /// [`Plan::new`] for a config file.
    pub fn from_file(file: &Path, output: Option<&Path>) -> crate::error::Result<Plan> {
        Ok(Plan::started(sweep_dir::start_new(file, output)?))
    }

    fn started(started: sweep_dir::Started) -> Plan {
        Plan {
            config: started.config,
            dir: started.dir,
            manifest: started.manifest,
            todo: started.plan.to_run,
            done_before: 0,
            attempts_before: HashMap::new(),
            partials: HashMap::new(),
            resumed: false,
            warnings: Vec::new(),
            lock: started.lock,
        }
    }

    /// The conditions of the interrupted directory `dir` still without a result, under the
    /// config stored there.
    pub fn resume(dir: &Path, options: ResumeOptions) -> crate::error::Result<Plan> {
        let r = sweep_dir::resume(dir, options)?;
        Ok(Plan {
            config: r.config,
            dir: dir.to_path_buf(),
            manifest: r.manifest,
            todo: r.todo,
            done_before: r.done_before,
            attempts_before: r.attempts_before,
            partials: r.partials,
            resumed: true,
            warnings: r.warnings,
            lock: r.lock,
        })
    }

    /// Gives up the plan before it runs: a new directory is removed again (nothing was
    /// measured in it), a resumed one is left as it was.
    pub fn abandon(self) {
        if !self.resumed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// What a sweep job needs besides its plan.
pub struct Controls<'a> {
    /// Raised to stop: the condition running ends, the directory is left to `--resume`.
    pub cancel: &'a Cancel,
    /// Where telemetry is read (`/` but in tests).
    pub telemetry_root: &'a Path,
    /// Raised when the front-end's terminal went away (a hang-up): the sweep goes on, and its
    /// log says that from then on it is the only place its progress is told.
    pub detached: Option<&'a AtomicBool>,
}

/// A sweep that ran to its end (or was stopped and left resumable).
pub struct Swept {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub stored: std::sync::Arc<Stored>,
    pub rows: std::sync::Arc<Vec<summary::Row>>,
    pub outcome: SweepOutcome,
    /// The CPU roofline when the config asked for it and some condition ran on the CPU.
    pub roofline: Option<CpuRoofline>,
    /// The GPU roofline when the config asked for it and some condition ran on a GPU.
    pub gpu_roofline: Option<crate::runner::gpu_profile::GpuRoofline>,
}

impl Swept {
    /// How the sweep ended as a result: [`Interrupted`] when conditions are left to run,
    /// [`SomeFailed`] when some failed, Ok when every one has its result.
    pub fn verdict(&self) -> crate::error::Result<()> {
        let (ok, failed, not_run, _) = summary::counts(&self.rows);
        let total = self.manifest.conditions.len();
        let dir = self.dir.clone();
        if self.outcome.interrupted || not_run > 0 {
            let done = ok + failed;
            crate::error::bail!(Interrupted { done, total, dir });
        }
        if failed > 0 {
            crate::error::bail!(SomeFailed { failed, total, dir });
        }
        Ok(())
    }
}

/// The run's progress log (`progress.log`): every line said, with its time, so that a user
/// whose terminal went away can `tail -f` the run from a new one.
struct Teller<'a> {
    log: Option<std::fs::File>,
    send: Sink<'a>,
    detached: Option<&'a AtomicBool>,
    told_detached: bool,
}

impl Teller<'_> {
    fn say(&mut self, said: Said) {
        if !self.told_detached && self.detached.is_some_and(|d| d.load(Ordering::Relaxed)) {
            self.told_detached = true;
            self.log("the terminal hung up: carrying on; progress continues here only");
        }
        self.log(said.text());
        (self.send)(Event::Run(RunEvent::Said(said)));
    }

    fn log(&mut self, text: &str) {
        if let Some(log) = &mut self.log {
            let stamp = crate::text::now_rfc3339();
            // A full disk must not stop the sweep over its progress log: it goes quiet instead.
            if writeln!(log, "{stamp} {text}").is_err() {
                self.log = None;
            }
        }
    }
}

/// Runs `plan` to its end: progress as events (and in `progress.log`), then the summaries and,
/// when the config asks for it, the CPU and GPU rooflines. A results file that cannot be
/// written (a full disk) stops the sweep with the directory marked interrupted and the error
/// saying how to finish it.
pub fn sweep(plan: Plan, controls: &Controls, send: Sink) -> crate::error::Result<Swept> {
    let Plan {
        config,
        dir,
        mut manifest,
        todo,
        done_before,
        attempts_before,
        partials,
        resumed,
        warnings,
        lock: _lock,
    } = plan;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    let mut teller = Teller {
        log: crate::files::open_regular(&dir.join(results::PROGRESS), &options).ok(),
        send,
        detached: controls.detached,
        told_detached: false,
    };
    let total = manifest.conditions.len();
    if resumed {
        teller.say(Said::Line(format!(
            "resuming {}: {done_before} of {total} condition(s) already done, {} to run",
            dir.display(),
            todo.len()
        )));
    }
    let cores = crate::collect::device::available_cores();
    let mut warnings = warnings;
    // The board's performance state: kept with the results (a resume keeps the first and says
    // what changed), and what would make this sweep's figures wander, with the fixes.
    let state = crate::collect::board::read(
        controls.telemetry_root,
        &crate::collect::board::LiveCommands,
    );
    match &manifest.board_state {
        Some(before) if resumed => {
            let changed = crate::collect::board::BoardState::differences(before, &state);
            if !changed.is_empty() {
                warnings.push(format!(
                    "the board's state changed since the sweep began (A: then, B: now): {}",
                    changed.join("; ")
                ));
            }
        }
        _ => {
            manifest.board_state = Some(state.clone());
            results::write_manifest(&dir, &manifest)?;
        }
    }
    warnings.extend(state.warnings().iter().map(ToString::to_string));
    let threads: std::collections::BTreeSet<usize> = todo.iter().map(|c| c.threads).collect();
    warnings.extend(
        threads
            .into_iter()
            .filter_map(|t| crate::config::threads_warning(t, cores)),
    );
    let estimates: Vec<f64> = todo
        .iter()
        .map(|c| matrix::estimate_condition(&config, c, cores))
        .collect();
    send(Event::Run(RunEvent::Started {
        dir: dir.clone(),
        total,
        done_before,
        estimates: estimates.clone(),
    }));
    send(Event::Run(RunEvent::BoardState(Box::new(state.clone()))));
    // What the plan found (a resumed directory's records that could not be read, …) travels
    // as the sweep's own warnings do: an event for a front-end's log, a line for the rest.
    for why in warnings {
        send(Event::Run(RunEvent::Sweep(SweepEvent::Warning(
            why.clone(),
        ))));
        teller.say(Said::Line(format!("warning: {why}")));
    }
    teller.say(Said::Line(format!(
        "{}: {} condition(s) to run ({} skipped, {} excluded), estimated {}; results in {} \
         (edgeprof pid {})",
        config.name,
        todo.len(),
        manifest.skipped.len(),
        manifest.excluded,
        crate::text::duration(estimates.iter().sum()),
        dir.display(),
        std::process::id()
    )));
    for line in crate::runner::progress::skipped_lines(&manifest.skipped) {
        teller.say(Said::Line(line));
    }
    teller.say(Said::Line(format!("board state: {}", state.summary())));
    let edgeprof = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    let mut writer = results::Writer::open(&dir)?;
    let sweep = Sweep {
        config: &config,
        conditions: &todo,
        total,
        done_before,
        edgeprof: &edgeprof,
        cancel: controls.cancel,
        telemetry_root: controls.telemetry_root,
        dir: &dir,
        attempts_before: &attempts_before,
        partials: &partials,
        board_state: Some(&state),
    };
    let mut narrator = Narrator::new(estimates, total, done_before);
    let swept = sweep.run(&mut writer, |event| {
        if let Some(said) = narrator.event(&event) {
            teller.say(said);
        }
        if !matches!(
            event,
            crate::runner::sweep::SweepEvent::Worker(WorkerEvent::Ready)
        ) {
            send(Event::Run(RunEvent::Sweep(event)));
        }
    });
    let outcome = match swept {
        Ok(outcome) => outcome,
        Err(e) => {
            // A results file could not be written (a full disk, most often): stop here, say so
            // in the manifest if it can still be written, and say how to finish.
            manifest.status = SweepStatus::Interrupted;
            manifest.ended = Some(crate::text::now_rfc3339());
            let _ = results::write_manifest(&dir, &manifest);
            let e = e.context(format!(
                "the sweep in {} stopped and can be finished with `edgeprof run --resume {}`",
                dir.display(),
                dir.display()
            ));
            teller.say(Said::Logged(format!("stopped: {e:#}")));
            return Err(e);
        }
    };
    if outcome.kept > 0 {
        teller.say(Said::Line(format!(
            "kept the finished repeats of {} condition(s) stopped part-way: `edgeprof run \
             --resume` goes on from them",
            outcome.kept
        )));
    } else if !outcome.interrupted {
        // Every condition has its record: what stopped sweeps kept of them is history.
        results::partial::clear(&dir);
    }
    let (stored, rows) = sweep_dir::finish(&dir, &mut manifest, &outcome, &config.output.formats)?;
    let (stored, rows) = (std::sync::Arc::new(stored), std::sync::Arc::new(rows));
    teller.say(Said::Line(crate::runner::progress::overhead_line(&outcome)));
    send(Event::Run(RunEvent::Stored {
        manifest: Box::new(manifest.clone()),
        stored: std::sync::Arc::clone(&stored),
        rows: std::sync::Arc::clone(&rows),
    }));
    let (mut roofline, mut gpu_roofline) = (None, None);
    if config.output.roofline {
        roofline = sweep_dir::cpu_roofline(&stored, |p| {
            teller.say(match p {
                crate::roofline::store::Progress::Start(what) => Said::Line(what),
                crate::roofline::store::Progress::Step(s) => {
                    Said::Status(format!("[{}/{}] {}", s.done + 1, s.total, s.what))
                }
            })
        })?;
        if !controls.cancel.is_raised() {
            gpu_roofline = sweep_dir::gpu_roofline(
                &config,
                &stored,
                &edgeprof,
                controls.telemetry_root,
                controls.cancel,
                |e| {
                    teller.say(Said::Logged(e.line().0));
                    send(Event::Run(RunEvent::GpuProfile(e)));
                },
            )?;
        }
    }
    let (ok, failed, not_run, _) = summary::counts(&rows);
    teller.say(Said::Logged(format!(
        "finished: {} ({ok} ok, {failed} failed, {not_run} not run); `edgeprof report {}` shows \
         the tables",
        match manifest.status {
            SweepStatus::Complete => "complete",
            SweepStatus::Interrupted => "interrupted",
            SweepStatus::Running => "running",
        },
        dir.display()
    )));
    Ok(Swept {
        dir,
        manifest,
        stored,
        rows,
        outcome,
        roofline,
        gpu_roofline,
    })
}

crate::error::kinds!(crate::error::Kind::Interrupted => Interrupted);

crate::error::kinds!(crate::error::Kind::Failed => SomeFailed);

//! `edgeprof run`: the sweep from a config with progress on stderr (and in `progress.log`); the
//! tables and charts of a results directory (`run`, `report`) and `edgeprof runs` are in
//! `tables.rs`.

mod html;
mod tables;

pub use html::write_html;
pub use tables::*;

use crate::cli::{print_out, render, BadInput};
use anyhow::Context;
use edgeprof::collect::stop::Cancel;
use edgeprof::report;
use edgeprof::results::{self, summary, Stored, SweepStatus};
use edgeprof::runner::matrix::{self};
use edgeprof::runner::spawn::WorkerEvent;
use edgeprof::runner::sweep::{Sweep, SweepEvent, SweepOutcome};
use edgeprof::session::{self, start_new};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
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

pub struct RunOptions {
    pub config: Option<PathBuf>,
    pub resume: Option<PathBuf>,
    pub resume_options: session::ResumeOptions,
    pub output: Option<PathBuf>,
    pub charts: bool,
    /// JSON lines on stdout for a fleet controller (see [`edgeprof::fleet::Line`]).
    pub stream: bool,
    /// The controller's control channel on stdin (see [`edgeprof::fleet::SHARE_END`]).
    pub control: bool,
}

/// A share's config from stdin: to the end line of a controller's share, or to the end.
fn read_share(control: bool) -> anyhow::Result<String> {
    let mut text = String::new();
    let stdin = std::io::stdin();
    if !control {
        stdin
            .lock()
            .read_to_string(&mut text)
            .context("cannot read the config from stdin")?;
        return Ok(text);
    }
    for line in stdin.lock().lines() {
        let line = line.context("cannot read the config from stdin")?;
        if line == edgeprof::fleet::SHARE_END {
            return Ok(text);
        }
        text.push_str(&line);
        text.push('\n');
    }
    anyhow::bail!(BadInput(
        "stdin ended before the share's end line: the fleet controller went away".into()
    ))
}

/// Stops the sweep when the controller's control channel (the rest of stdin) closes.
fn cancel_when_stdin_closes(cancel: &Cancel) -> anyhow::Result<()> {
    let cancel = cancel.clone();
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            cancel.raise();
        })
        .context("cannot start the control channel's thread")?;
    Ok(())
}

/// What the stream's writer thread is handed.
enum StreamOut {
    Line(String),
    /// Told back once every line before it is written.
    Flushed(std::sync::mpsc::Sender<()>),
}

/// The stream's writer: lines go out from a thread of their own, so a controller whose ssh
/// session hung (it reads no more, and the pipe to it fills) never stalls the sweep, which
/// measures on and keeps every record in its directory for the controller's reconnect to collect.
static STREAM: std::sync::OnceLock<std::sync::mpsc::Sender<StreamOut>> = std::sync::OnceLock::new();

/// How long a run that ended waits for its stream to be written before it exits anyway (its
/// writer lock is already let go; the records are in its directory).
const STREAM_FLUSH: Duration = Duration::from_secs(30);

/// Writes one stream line (from the writer thread); a controller that went away ends the run
/// like a hang-up.
fn stream_line(line: &edgeprof::fleet::Line) {
    let Ok(text) = serde_json::to_string(line) else {
        return;
    };
    let writer = STREAM.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<StreamOut>();
        let spawned = std::thread::Builder::new()
            .name("stream".into())
            .spawn(move || {
                for out in rx {
                    match out {
                        StreamOut::Line(text) => {
                            let mut out = std::io::stdout().lock();
                            let _ = writeln!(out, "{text}");
                            let _ = out.flush();
                        }
                        StreamOut::Flushed(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            let _ = writeln!(std::io::stderr(), "cannot start the stream's thread: {e}");
        }
        tx
    });
    if let Err(std::sync::mpsc::SendError(StreamOut::Line(text))) =
        writer.send(StreamOut::Line(text))
    {
        // No writer thread: written here.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}

/// Waits until every stream line is written, at most `limit`: a stream nobody reads any more is
/// given up.
fn flush_stream(limit: Duration) {
    let Some(writer) = STREAM.get() else { return };
    let (done, written) = std::sync::mpsc::channel();
    if writer.send(StreamOut::Flushed(done)).is_ok() {
        let _ = written.recv_timeout(limit);
    }
}

/// `run --resume DIR --stream` (a fleet controller's reconnect) while the run that writes DIR
/// is still alive: its ssh session went half-dead and the node measured on. Rather than refuse,
/// it follows that run and streams every record in DIR, those already there and those to come,
/// until the run lets go of DIR. Ok(true): the run finished every condition (its end is
/// streamed too); Ok(false): nobody writes DIR (any more) and the rest is to be resumed. A cancel
/// from the controller (its stdin closes) interrupts the followed run as well.
fn attach(dir: &Path, cancel: &Cancel) -> anyhow::Result<bool> {
    use edgeprof::fleet::attach::{Followed, Follower};
    let lock = dir.join(results::LOCK);
    let Some(holder) = edgeprof::lockfile::holder(&lock) else {
        return Ok(false);
    };
    let manifest = results::read_manifest(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    stream_line(&edgeprof::fleet::Line::Started {
        dir: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
        manifest: Box::new(manifest.clone()),
    });
    let _ = writeln!(
        std::io::stderr(),
        "{} is still being written by edgeprof ({holder}): following it until it ends",
        dir.display()
    );
    let mut follower = Follower::new(dir);
    let mut records = Vec::new();
    loop {
        let followed = follower
            .follow(dir, cancel, |record| {
                stream_line(&edgeprof::fleet::Line::Record(Box::new(record.clone())));
                records.push(record);
            })
            .with_context(|| format!("cannot follow {}", dir.join(results::RUNS).display()))?;
        if followed == Followed::Cancelled {
            if let Some(h) = edgeprof::lockfile::holder(&lock).filter(|h| {
                h.pid > 0
                    && h.what
                        .as_deref()
                        .is_some_and(|w| w.starts_with("edgeprof run"))
            }) {
                // As Ctrl-C would: it stops, keeping what it finished.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(h.pid as i32),
                    nix::sys::signal::Signal::SIGINT,
                );
            }
            anyhow::bail!(Interrupted {
                done: results::finished_ids(&records).len(),
                total: manifest.conditions.len(),
                dir: dir.to_path_buf(),
            });
        }
        // Another writer may have taken the directory at once: follow that one too.
        if edgeprof::lockfile::holder(&lock).is_none() {
            break;
        }
    }
    let manifest = results::read_manifest(dir)?;
    if manifest.status != SweepStatus::Complete {
        return Ok(false);
    }
    stream_line(&edgeprof::fleet::Line::Finished {
        manifest: Box::new(manifest),
    });
    Ok(true)
}

/// Where progress goes: stderr (a redrawn status line on a terminal, plain lines otherwise)
/// while it is there, and always, as plain lines with their time, `progress.log` in the results
/// directory, so a user whose terminal went away can `tail -f` the run from a new one.
struct Output {
    /// Redraw a status line (stderr is a terminal).
    tty: bool,
    /// False once a write to stderr failed (a closed terminal or pipe) or the terminal hung up:
    /// nothing more is written there.
    stderr: bool,
    hangup: Arc<AtomicBool>,
    log: Option<std::fs::File>,
}

impl Output {
    fn new(dir: &Path, hangup: Arc<AtomicBool>) -> Output {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        let log = edgeprof::files::open_regular(&dir.join(results::PROGRESS), &options).ok();
        Output {
            tty: std::io::stderr().is_terminal(),
            stderr: true,
            hangup,
            log,
        }
    }

    /// Whether stderr is still worth writing to.
    fn terminal(&mut self) -> bool {
        if self.stderr && self.hangup.load(Ordering::Relaxed) {
            self.stderr = false;
            self.log_line("the terminal hung up: carrying on; progress continues here only");
        }
        self.stderr
    }

    fn log_line(&mut self, text: &str) {
        if let Some(log) = &mut self.log {
            let stamp = edgeprof::text::now_rfc3339();
            // A full disk must not stop the sweep over its progress log: it goes quiet instead.
            if writeln!(log, "{stamp} {text}").is_err() {
                self.log = None;
            }
        }
    }

    /// A line for the log and, while it is there, for stderr.
    fn line(&mut self, text: &str) {
        self.log_line(text);
        self.say(text);
    }

    /// A line for stderr only; on a terminal, wrapped at its width (continued lines indented)
    /// rather than left to the terminal to break anywhere.
    fn say(&mut self, text: &str) {
        let wrapped = match edgeprof::console::columns(2).filter(|_| self.tty) {
            Some(columns) => edgeprof::text::wrap(text, columns, "    "),
            None => text.to_string(),
        };
        if self.terminal() && !edgeprof::console::err(format_args!("{wrapped}\n")) {
            self.stderr = false;
        }
    }

    /// Replaces the terminal's status line (nothing without a terminal).
    fn status(&mut self, text: &str) {
        if self.tty && self.terminal() && !edgeprof::console::err(format_args!("\r\x1b[2K{text}")) {
            self.stderr = false;
        }
    }

    fn clear_status(&mut self) {
        if self.tty && self.terminal() && !edgeprof::console::err(format_args!("\r\x1b[2K")) {
            self.stderr = false;
        }
    }
}

/// Progress of a sweep, drawn through an [`Output`].
struct Progress {
    out: Output,
    tracker: edgeprof::runner::progress::Tracker,
    started: Instant,
    current: String,
    index: usize,
    total: usize,
    rss: Option<u64>,
    /// The latest telemetry figures worth a place on the status line.
    /// Each GPU's load, in the samples' order.
    gpu_load: Vec<f64>,
    power_w: Option<f64>,
    last_draw: Option<Instant>,
}

impl Progress {
    /// Seconds left (see [`edgeprof::runner::progress::Tracker::eta_s`]).
    fn eta(&self) -> f64 {
        self.tracker.eta_s(self.started.elapsed().as_secs_f64())
    }

    fn draw(&mut self) {
        if !self.out.tty {
            return;
        }
        let now = Instant::now();
        if self
            .last_draw
            .is_some_and(|t| now.duration_since(t) < Duration::from_millis(100))
        {
            return;
        }
        self.last_draw = Some(now);
        let frac = self.tracker.fraction();
        // One terminal line (short of its last column, where some terminals wrap) so the
        // redraw does not scroll: the bar narrows, the condition's name is cut in the middle,
        // and the extra figures go before the ETA does.
        let columns = edgeprof::console::columns(2).unwrap_or(80).max(40) - 1;
        let width = if columns >= 100 { 24 } else { 10 };
        let filled = ((frac * width as f64).round() as usize).min(width);
        let head = format!(
            "[{}{}] {}/{} {:>3.0}% ",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.index,
            self.total,
            frac * 100.0,
        );
        let mut extras = Vec::new();
        if let Some(rss) = self.rss {
            extras.push(format!(" · RSS {}", render::bytes(rss)));
        }
        if !self.gpu_load.is_empty() {
            let loads: Vec<String> = self.gpu_load.iter().map(|l| format!("{l:.0}")).collect();
            extras.push(format!(" · GPU {} %", loads.join("/")));
        }
        if let Some(w) = self.power_w {
            extras.push(format!(" · {w:.1} W"));
        }
        let eta = format!(" · ETA {}", render::duration(self.eta()));
        let len = |s: &str| s.chars().count();
        // The name keeps at least 16 characters while extras can go instead.
        while !extras.is_empty()
            && len(&head) + 16 + extras.iter().map(|e| len(e)).sum::<usize>() + len(&eta) > columns
        {
            extras.pop();
        }
        let room = columns
            .saturating_sub(len(&head) + extras.iter().map(|e| len(e)).sum::<usize>() + len(&eta));
        let name = edgeprof::text::cut_middle(&self.current, room);
        let line: String = format!("{head}{name}{}{eta}", extras.concat())
            .chars()
            .take(columns)
            .collect();
        self.out.status(&line);
    }

    fn event(&mut self, event: SweepEvent) {
        self.tracker
            .event(&event, self.started.elapsed().as_secs_f64());
        match event {
            SweepEvent::Start {
                index,
                total,
                condition,
                attempt,
                attempts,
                process,
                processes,
                ..
            } => {
                self.index = index;
                self.total = total;
                self.current = condition.id.clone();
                self.rss = None;
                self.last_draw = None;
                let mut notes = Vec::new();
                if attempt > 1 {
                    notes.push(format!("attempt {attempt} of {attempts}"));
                }
                if processes > 1 {
                    notes.push(format!("process {process} of {processes}"));
                }
                let line = if process > 1 {
                    format!("[{index}/{total}] {}: {}", condition.id, notes.join(", "))
                } else if notes.is_empty() {
                    format!("[{index}/{total}] {}: running", condition.id)
                } else {
                    format!(
                        "[{index}/{total}] {}: running ({})",
                        condition.id,
                        notes.join(", ")
                    )
                };
                if self.out.tty {
                    self.out.log_line(&line);
                    self.draw();
                } else {
                    self.out.line(&line);
                }
            }
            SweepEvent::Worker(WorkerEvent::Timed(_)) => self.draw(),
            SweepEvent::Worker(WorkerEvent::Sample(s)) => {
                self.rss = s.rss_bytes.or(self.rss);
                self.draw();
            }
            SweepEvent::Worker(WorkerEvent::Ready) => self.draw(),
            SweepEvent::Worker(WorkerEvent::Repeat(_)) => {}
            SweepEvent::Telemetry(sample) => {
                self.gpu_load = sample.gpus.iter().filter_map(|g| g.load_pct).collect();
                self.power_w = sample.power_w;
                self.draw();
            }
            SweepEvent::Done {
                index,
                total,
                record,
                retry,
            } => {
                self.out.clear_status();
                let mut line = format!(
                    "[{index}/{total}] {}: {}",
                    record.condition.id,
                    summary::record_line(&record, retry)
                );
                if !retry && !self.tracker.finished() {
                    let _ = write!(line, " (ETA {})", render::duration(self.eta()));
                }
                self.out.line(&line);
            }
            SweepEvent::MoreRepeats {
                repeats, reason, ..
            } => {
                let line = format!(
                    "[{}/{}] {}: {repeats} more repeat(s): {reason}",
                    self.index, self.total, self.current
                );
                if self.out.tty {
                    self.out.log_line(&line);
                    self.draw();
                } else {
                    self.out.line(&line);
                }
            }
            SweepEvent::Warning(why) => {
                self.out.clear_status();
                self.out.line(&format!("warning: {why}"));
            }
            SweepEvent::Cooldown { seconds } => {
                let line = format!("cooling down {seconds} s");
                if self.out.tty {
                    self.out.log_line(&line);
                } else {
                    self.out.line(&line);
                }
            }
        }
    }
}

/// Cancels on SIGINT or SIGTERM (a second one ends edgeprof at once, exit 130; workers die
/// with their parent). A hang-up (SIGHUP: a closed terminal, a dropped SSH session) does not
/// stop the work: the returned flag is raised, progress goes on in the results directory only,
/// and the sweep measures to the end. A closing terminal may send several hang-ups; they are
/// one. A thread blocks on the signals (signal-hook's self-pipe) and raises `cancel`, which
/// wakes whatever waits on it at once.
pub(super) fn install_stop_handlers(cancel: &Cancel) -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut incoming = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("cannot install the signal handlers")?;
    let hangup = Arc::new(AtomicBool::new(false));
    let (cancel, hung_up) = (cancel.clone(), Arc::clone(&hangup));
    std::thread::Builder::new()
        .name("stop-signals".into())
        .spawn(move || {
            for signal in incoming.forever() {
                if signal == SIGHUP {
                    hung_up.store(true, Ordering::Relaxed);
                } else if cancel.is_raised() {
                    std::process::exit(130);
                } else {
                    cancel.raise();
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(hangup)
}

/// `edgeprof run`.
pub fn run(options: RunOptions) -> anyhow::Result<()> {
    let stream = options.stream;
    // The run's writer lock is let go before the wait: a reconnected controller can collect
    // what a stream nobody reads did not carry.
    let result = run_sweep(options);
    if stream {
        flush_stream(STREAM_FLUSH);
    }
    result
}

fn run_sweep(options: RunOptions) -> anyhow::Result<()> {
    if let (None, Some(file)) = (&options.resume, &options.config) {
        if file.as_os_str() != "-" {
            let config = edgeprof::config::load(file)?;
            if config.train.is_some() && !options.stream {
                // The config's task is a distributed-training study, not the matrix.
                return crate::cli::train::run_config(&config, options.output);
            }
            if config.matrix.nodes != [edgeprof::config::LOCAL_NODE] {
                if options.stream {
                    anyhow::bail!(BadInput(
                        "--stream is what a node of a fleet run does; this config names nodes"
                            .into()
                    ));
                }
                return crate::cli::fleet::run(file, &config, options.output.as_deref());
            }
        }
    }
    // Handlers first: a hang-up while the plan is made must not end edgeprof either.
    let cancel = Cancel::new();
    let hangup = install_stop_handlers(&cancel)?;
    // A resumption's stdin holds no share: its control channel is open from the start, also
    // while it waits for a run still writing its directory.
    if options.control && options.resume.is_some() {
        cancel_when_stdin_closes(&cancel)?;
    }
    let no_attempts = HashMap::new();
    let mut resume_warnings = Vec::new();
    let (config, dir, mut manifest, done_before, todo, attempts_before, _lock) =
        match (&options.resume, &options.config) {
            (Some(_), Some(_)) => anyhow::bail!(BadInput(
                "--resume continues with the config stored in the results directory; leave \
                 CONFIG out"
                    .into()
            )),
            (None, None) => anyhow::bail!(BadInput(
                "name a config file (e.g. configs/default.toml), or --resume DIR".into()
            )),
            (Some(dir), None) => {
                if options.stream && attach(dir, &cancel)? {
                    return Ok(());
                }
                let r = session::resume(dir, options.resume_options)?;
                resume_warnings = r.warnings;
                (
                    r.config,
                    dir.clone(),
                    r.manifest,
                    r.done_before,
                    r.todo,
                    r.attempts_before,
                    r.lock,
                )
            }
            (None, Some(file)) => {
                let started = if file.as_os_str() == "-" {
                    let text = read_share(options.control)?;
                    session::start_from_text(
                        text,
                        Path::new("stdin.toml"),
                        options.output.as_deref(),
                    )?
                } else {
                    start_new(file, options.output.as_deref())?
                };
                (
                    started.config,
                    started.dir,
                    started.manifest,
                    0,
                    started.plan.to_run,
                    no_attempts,
                    started.lock,
                )
            }
        };
    if config.matrix.nodes != [edgeprof::config::LOCAL_NODE] {
        // Only a config read from stdin (a node's share) or a resumed one gets here.
        if options.resume.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        anyhow::bail!(BadInput(
            "a fleet run starts from a config file on the controller: a node's config (or a \
             resumed run) must not name other nodes in matrix.nodes"
                .into()
        ));
    }
    if options.control && options.resume.is_none() {
        cancel_when_stdin_closes(&cancel)?;
    }
    if options.stream {
        stream_line(&edgeprof::fleet::Line::Started {
            dir: std::path::absolute(&dir).unwrap_or_else(|_| dir.clone()),
            manifest: Box::new(manifest.clone()),
        });
        if options.resume.is_some() {
            // A controller's reconnect: what the node measured while the link was down (its
            // first run may have ended before this one began) goes first; the controller keeps
            // each record once.
            let stored = results::read_lines::<results::RunRecord>(&dir.join(results::RUNS))?;
            for record in stored.records {
                stream_line(&edgeprof::fleet::Line::Record(Box::new(record)));
            }
        }
    }
    let mut out = Output::new(&dir, Arc::clone(&hangup));
    for why in &resume_warnings {
        out.line(&format!("warning: {why}"));
    }
    if options.resume.is_some() {
        out.line(&format!(
            "resuming {}: {} of {} condition(s) already done, {} to run",
            dir.display(),
            done_before,
            manifest.conditions.len(),
            todo.len()
        ));
    }
    let cores = edgeprof::collect::device::available_cores();
    let estimates: Vec<f64> = todo
        .iter()
        .map(|c| matrix::estimate_condition(&config, c, cores))
        .collect();
    out.line(&format!(
        "{}: {} condition(s) to run ({} skipped, {} excluded), estimated {}; results in {} \
         (edgeprof pid {})",
        config.name,
        todo.len(),
        manifest.skipped.len(),
        manifest.excluded,
        render::duration(estimates.iter().sum()),
        dir.display(),
        std::process::id()
    ));
    for line in render::skipped_lines(&manifest.skipped) {
        out.line(&line);
    }
    let edgeprof = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    let mut writer = results::Writer::open(&dir)?;
    // Tests point telemetry at a fixture tree; everyone else reads this machine.
    let telemetry_root = std::env::var_os("EDGEPROF_TELEMETRY_ROOT")
        .map_or_else(|| PathBuf::from("/"), PathBuf::from);
    let sweep = Sweep {
        config: &config,
        conditions: &todo,
        total: manifest.conditions.len(),
        done_before,
        edgeprof: &edgeprof,
        cancel: &cancel,
        telemetry_root: &telemetry_root,
        dir: &dir,
        attempts_before: &attempts_before,
    };
    let mut progress = Progress {
        out,
        tracker: edgeprof::runner::progress::Tracker::new(
            estimates,
            manifest.conditions.len(),
            done_before,
        ),
        started: Instant::now(),
        current: String::new(),
        index: 0,
        total: manifest.conditions.len(),
        rss: None,
        gpu_load: Vec::new(),
        power_w: None,
        last_draw: None,
    };
    let stream = options.stream;
    let swept = sweep.run(&mut writer, |event| {
        if let (true, SweepEvent::Done { record, .. }) = (stream, &event) {
            stream_line(&edgeprof::fleet::Line::Record(record.clone()));
        }
        progress.event(event)
    });
    let mut out = progress.out;
    let outcome = match swept {
        Ok(outcome) => outcome,
        Err(e) => {
            // A results file could not be written (a full disk, most often): stop here, say so
            // in the manifest if it can still be written, and say how to finish.
            out.clear_status();
            manifest.status = SweepStatus::Interrupted;
            manifest.ended = Some(edgeprof::text::now_rfc3339());
            let _ = results::write_manifest(&dir, &manifest);
            let e = e.context(format!(
                "the sweep in {} stopped and can be finished with `edgeprof run --resume {}`",
                dir.display(),
                dir.display()
            ));
            out.log_line(&format!("stopped: {e:#}"));
            return Err(e);
        }
    };
    out.clear_status();
    let (stored, rows) = session::finish(&dir, &mut manifest, &outcome, &config.output.formats)?;
    let (ok, failed, not_run, _) = summary::counts(&rows);
    out.line(&overhead_line(&outcome));
    // The report goes to stdout; a reader that went away (`| head`, a closed terminal) is no
    // reason to fail a sweep whose results are all on disk.
    if stream {
        stream_line(&edgeprof::fleet::Line::Finished {
            manifest: Box::new(manifest.clone()),
        });
    } else if out.terminal() {
        let _ = print_out(&report_text(&stored, &rows, options.charts));
    }
    if config.output.roofline {
        // The CPU roofline places the conditions on the CPU; a sweep of GPU ones only has none.
        let on_cpu = stored
            .runs
            .iter()
            .any(|r| r.ok && r.condition.device == edgeprof::config::Device::Cpu);
        if on_cpu {
            let roofline = roofline_outputs(&stored)?;
            if !stream && out.terminal() {
                let _ = print_out(&roofline);
            }
        }
        if !cancel.is_raised() {
            let gpu = session::gpu_roofline(
                &config,
                &stored,
                &edgeprof,
                &telemetry_root,
                &cancel,
                |e| out.line(&e.line().0),
            )?;
            if let (Some(gpu), false, true) = (gpu, stream, out.terminal()) {
                let _ = print_out(&gpu_roofline_text(&gpu, true));
            }
        }
    }
    out.log_line(&format!(
        "finished: {} ({ok} ok, {failed} failed, {not_run} not run); `edgeprof report {}` shows \
         the tables",
        match manifest.status {
            SweepStatus::Complete => "complete",
            SweepStatus::Interrupted => "interrupted",
            SweepStatus::Running => "running",
        },
        dir.display()
    ));
    if outcome.interrupted || not_run > 0 {
        anyhow::bail!(Interrupted {
            done: ok + failed,
            total: manifest.conditions.len(),
            dir,
        });
    }
    if failed > 0 {
        anyhow::bail!(SomeFailed {
            failed,
            total: manifest.conditions.len(),
            dir,
        });
    }
    Ok(())
}

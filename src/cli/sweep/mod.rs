//! `edgeprof run`: the sweep from a config with progress on stderr (and in `progress.log`); the
//! tables and charts of a results directory (`run`, `report`) and `edgeprof runs` are in
//! `tables.rs`.

mod tables;

pub use tables::*;

use crate::cli::{print_out, render, BadInput};
use anyhow::Context;
use edgeprof::collect::stop::Cancel;
use edgeprof::event::{Event, RunEvent};
use edgeprof::jobs::{Controls, Plan};
use edgeprof::report::text::{gpu_roofline_text, report_text};
use edgeprof::results::{self, summary, SweepStatus};
use edgeprof::runner::progress::Said;
use edgeprof::runner::spawn::WorkerEvent;
use edgeprof::runner::sweep::SweepEvent;
use edgeprof::sweep_dir;
use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use edgeprof::jobs::Interrupted;

pub struct RunOptions {
    pub config: Option<PathBuf>,
    pub resume: Option<PathBuf>,
    pub resume_options: sweep_dir::ResumeOptions,
    pub output: Option<PathBuf>,
    pub charts: bool,
    /// JSON lines on stdout for a fleet controller (see [`edgeprof::fleet::Line`]).
    pub stream: bool,
    /// The controller's control channel on stdin (see [`edgeprof::fleet::SHARE_END`]).
    pub control: bool,
    /// Refuse to start when the board's state has a warning.
    pub require_stable_clocks: bool,
    /// Lock the board's clocks for the sweep.
    pub lock_clocks: bool,
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

/// Where progress goes: stderr, a redrawn status line on a terminal and plain lines otherwise,
/// while it is there (the run's `progress.log` is the library's).
struct Output {
    /// Redraw a status line (stderr is a terminal).
    tty: bool,
    /// False once a write to stderr failed (a closed terminal or pipe) or the terminal hung up:
    /// nothing more is written there.
    stderr: bool,
    hangup: Arc<AtomicBool>,
}

impl Output {
    fn new(hangup: Arc<AtomicBool>) -> Output {
        Output {
            tty: std::io::stderr().is_terminal(),
            stderr: true,
            hangup,
        }
    }

    /// Whether stderr is still worth writing to.
    fn terminal(&mut self) -> bool {
        if self.stderr && self.hangup.load(Ordering::Relaxed) {
            self.stderr = false;
        }
        self.stderr
    }

    /// A line for stderr; on a terminal, wrapped at its width (continued lines indented)
    /// rather than left to the terminal to break anywhere, the status line cleared first.
    fn say(&mut self, text: &str) {
        self.clear_status();
        let wrapped = match edgeprof::text::console::columns(2).filter(|_| self.tty) {
            Some(columns) => edgeprof::text::wrap(text, columns, "    "),
            None => text.to_string(),
        };
        if self.terminal() && !edgeprof::text::console::err(format_args!("{wrapped}\n")) {
            self.stderr = false;
        }
    }

    /// Replaces the terminal's status line (nothing without a terminal).
    fn status(&mut self, text: &str) {
        if self.tty
            && self.terminal()
            && !edgeprof::text::console::err(format_args!("\r\x1b[2K{text}"))
        {
            self.stderr = false;
        }
    }

    fn clear_status(&mut self) {
        if self.tty && self.terminal() && !edgeprof::text::console::err(format_args!("\r\x1b[2K")) {
            self.stderr = false;
        }
    }
}

/// A run's progress on stderr: the lines the job says, and on a terminal a status line
/// redrawn as the events come (bar, condition, RSS, GPU load, power, time left).
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
    /// Records and the end for a fleet controller, on stdout.
    stream: bool,
    /// Whether the report, printed once the summaries are stored, draws its charts.
    charts: bool,
}

impl Progress {
    fn new(out: Output, stream: bool, charts: bool) -> Progress {
        Progress {
            out,
            tracker: Default::default(),
            started: Instant::now(),
            current: String::new(),
            index: 0,
            total: 0,
            rss: None,
            gpu_load: Vec::new(),
            power_w: None,
            last_draw: None,
            stream,
            charts,
        }
    }

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
        let columns = edgeprof::text::console::columns(2).unwrap_or(80).max(40) - 1;
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

    /// Shows one event of the run.
    fn event(&mut self, event: RunEvent) {
        match event {
            RunEvent::Started {
                total,
                done_before,
                estimates,
                ..
            } => {
                self.tracker =
                    edgeprof::runner::progress::Tracker::new(estimates, total, done_before);
                self.started = Instant::now();
                self.total = total;
            }
            RunEvent::Said(Said::Line(text)) => self.out.say(&text),
            // A terminal shows these on the status line, redrawn at the next event.
            RunEvent::Said(Said::Status(text)) if self.out.tty => self.out.status(&text),
            RunEvent::Said(Said::Status(text)) => self.out.say(&text),
            RunEvent::Said(Said::Logged(_)) => {}
            RunEvent::GpuProfile(e) => self.out.say(&e.line().0),
            RunEvent::Stored { manifest, .. } if self.stream => {
                stream_line(&edgeprof::fleet::Line::Finished { manifest })
            }
            // The report goes to stdout as soon as it is stored, before the rooflines' steps (a
            // ceilings measurement may take minutes); a reader that went away (`| head`, a
            // closed terminal) is no reason to fail a sweep whose results are all on disk.
            RunEvent::Stored { stored, rows, .. } if self.out.terminal() => {
                self.out.clear_status();
                let _ = print_out(&report_text(&stored, &rows, self.charts));
            }
            RunEvent::Sweep(event) => self.sweep_event(event),
            _ => {}
        }
    }

    fn sweep_event(&mut self, event: SweepEvent) {
        self.tracker
            .event(&event, self.started.elapsed().as_secs_f64());
        match event {
            SweepEvent::Start {
                index, condition, ..
            } => {
                self.index = index;
                self.current = condition.id.clone();
                self.rss = None;
                self.last_draw = None;
                self.draw();
            }
            SweepEvent::Worker(WorkerEvent::Sample(s)) => {
                self.rss = s.rss_bytes.or(self.rss);
                self.draw();
            }
            SweepEvent::Telemetry(sample) => {
                self.gpu_load = sample.gpus.iter().filter_map(|g| g.load_pct).collect();
                self.power_w = sample.power_w;
                self.draw();
            }
            SweepEvent::Done { record, .. } if self.stream => {
                stream_line(&edgeprof::fleet::Line::Record(record))
            }
            SweepEvent::MoreRepeats { .. } | SweepEvent::Worker(_) => self.draw(),
            SweepEvent::Done { .. } | SweepEvent::Warning(_) | SweepEvent::Cooldown { .. } => {}
        }
    }
}

/// How soon after a first stop signal another is taken as the same one (see
/// [`install_stop_handlers`]).
const ONE_STOP: std::time::Duration = std::time::Duration::from_millis(300);

/// Cancels on SIGINT or SIGTERM (a second one ends edgeprof at once, exit 130; workers die
/// with their parent). Signals within [`ONE_STOP`] of the first are the same stop: `timeout`
/// sends its signal to its child and then to the child's whole process group, and a terminal's
/// Ctrl-C can reach edgeprof both directly and through a wrapper that forwards it; a person
/// pressing Ctrl-C twice is slower than that. A hang-up (SIGHUP: a closed terminal, a dropped
/// SSH session) does not stop the work: the returned flag is raised, progress goes on in the
/// results directory only, and the sweep measures to the end. A closing terminal may send
/// several hang-ups; they are one. A thread blocks on the signals (signal-hook's self-pipe) and raises `cancel`, which
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
            let mut first: Option<std::time::Instant> = None;
            for signal in incoming.forever() {
                if signal == SIGHUP {
                    hung_up.store(true, Ordering::Relaxed);
                } else if cancel.is_raised() {
                    if first.is_none_or(|at| at.elapsed() >= ONE_STOP) {
                        std::process::exit(130);
                    }
                } else {
                    first = Some(std::time::Instant::now());
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
    // Tests point telemetry at a fixture tree; everyone else reads this machine.
    let telemetry_root = std::env::var_os("EDGEPROF_TELEMETRY_ROOT")
        .map_or_else(|| PathBuf::from("/"), PathBuf::from);
    // Held until this function returns (or unwinds); a second Ctrl-C or a SIGKILL leaves the
    // restore file, and the next edgeprof puts the clocks back.
    let locked = if options.lock_clocks {
        Some(super::board::lock_for(&telemetry_root, None)?)
    } else {
        None
    };
    if options.require_stable_clocks {
        let state = edgeprof::collect::board::read(
            &telemetry_root,
            &edgeprof::collect::board::LiveCommands,
        );
        let warnings: Vec<String> = state.warnings().iter().map(ToString::to_string).collect();
        if !warnings.is_empty() {
            anyhow::bail!(BadInput(format!(
                "--require-stable-clocks: the board's state would make the figures wander: {}",
                warnings.join("; ")
            )));
        }
    }
    let plan = match (&options.resume, &options.config) {
        (Some(_), Some(_)) => anyhow::bail!(BadInput(
            "--resume continues with the config stored in the results directory; leave CONFIG \
             out"
            .into()
        )),
        (None, None) => anyhow::bail!(BadInput(
            "name a config file (e.g. configs/default.toml), or --resume DIR".into()
        )),
        (Some(dir), None) => {
            if options.stream && attach(dir, &cancel)? {
                return Ok(());
            }
            Plan::resume(dir, options.resume_options)?
        }
        (None, Some(file)) if file.as_os_str() == "-" => {
            let text = read_share(options.control)?;
            Plan::new(text, Path::new("stdin.toml"), options.output.as_deref())?
        }
        (None, Some(file)) => Plan::from_file(file, options.output.as_deref())?,
    };
    if plan.config.matrix.nodes != [edgeprof::config::LOCAL_NODE] {
        // Only a config read from stdin (a node's share) or a resumed one gets here.
        plan.abandon();
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
        let dir = &plan.dir;
        stream_line(&edgeprof::fleet::Line::Started {
            dir: std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
            manifest: Box::new(plan.manifest.clone()),
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
    let controls = Controls {
        cancel: &cancel,
        telemetry_root: &telemetry_root,
        detached: Some(&hangup),
    };
    let progress = Mutex::new(Progress::new(
        Output::new(Arc::clone(&hangup)),
        options.stream,
        options.charts,
    ));
    let show = |event: Event| {
        if let (Event::Run(event), Ok(mut progress)) = (event, progress.lock()) {
            progress.event(event);
        }
    };
    let swept = edgeprof::jobs::sweep::sweep(plan, &controls, &show);
    let mut progress = progress.into_inner().unwrap_or_else(|e| e.into_inner());
    let out = &mut progress.out;
    out.clear_status();
    if let Some(locked) = locked {
        super::board::release(locked);
    }
    let swept = swept?;
    // The rooflines follow the report (printed when the summaries were stored).
    if !options.stream && out.terminal() {
        if let Some(roofline) = &swept.roofline {
            let _ = print_out(&roofline.text());
        }
        if let Some(gpu) = &swept.gpu_roofline {
            let _ = print_out(&gpu_roofline_text(gpu, true));
        }
    }
    Ok(swept.verdict()?)
}

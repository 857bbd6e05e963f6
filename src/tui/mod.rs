//! The terminal UI: condition selection, the live run view, results, the roofline
//! with its advice, and a live monitor, over the same sweep, telemetry and roofline code as the
//! headless commands.
//!
//! The event loop is one current-thread tokio runtime that selects over terminal input
//! (crossterm's event stream), the domain's messages, its timers (the run clock, a deferred
//! redraw) and signals (SIGTERM, SIGHUP); it owns the [`app::App`] state and the terminal.
//! Blocking work stays on threads of its own that send [`Message`]s: one samples telemetry for
//! the Monitor tab (it sleeps to each sample's deadline), one runs a sweep or a tuning (and one
//! measures ceilings or profiles layers when asked), so drawing never waits on a measurement.
//! The terminal is restored on every exit: quit, error, panic (ratatui's hook), SIGTERM. On
//! SIGHUP (a dropped SSH session) drawing stops but a run goes on to completion and its results
//! are saved.

pub mod app;
pub mod conditions;
mod jobs;
mod results_dir;
pub mod theme;
pub mod view;

use anyhow::Context;
use app::{App, Command, RunEvent, Severity, Shown, Tab, TuneEvent};
use edgeprof::collect::stop::{Cancel, Stop};
use edgeprof::collect::telemetry;
use edgeprof::event::Event;
use edgeprof::results::{self, summary};
use edgeprof::roofline::Processor;
use edgeprof::train::study::TrainEvent;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, UnboundedReceiver};

use jobs::*;
pub use results_dir::open_results;
use results_dir::*;

/// How the UI was asked for on the command line.
#[derive(Default)]
pub struct TuiOptions {
    pub config: Option<PathBuf>,
    pub theme: Option<String>,
    pub ascii: bool,
    /// Results directory to open at start.
    pub open: Option<PathBuf>,
    /// Start on the Monitor tab (`edgeprof monitor` on a terminal), sampling every interval
    /// under a root path.
    pub monitor: Option<(Duration, PathBuf)>,
    /// Panic once the first frame is drawn: the fault the test of the terminal's restoration
    /// injects (a hidden option).
    pub panic_after_first_frame: bool,
}

/// What reaches the event loop.
pub enum Message {
    Key(crossterm::event::KeyEvent),
    Resize,
    /// A job's or the Monitor sampler's event.
    Event(edgeprof::event::Event),
    Ceilings(
        edgeprof::roofline::Processor,
        Shown<(edgeprof::roofline::Ceilings, String)>,
    ),
    Layers(String, Shown<Vec<edgeprof::roofline::Program>>),
    Probed(Vec<edgeprof::scorecard::here::Here>),
    /// What this machine offers, once the frameworks' interpreters have answered.
    Offer(Box<conditions::Offer>),
    /// The results directory being followed changed on disk (another edgeprof is writing it),
    /// or its writer ended.
    Followed(PathBuf),
}

/// Where the UI's background threads send their [`Message`]s: sending never blocks, from any
/// thread, and the event loop wakes for each.
pub type Sender<T> = mpsc::UnboundedSender<T>;

/// The config the UI starts with: the one given, else `configs/default.toml` if it is here, else
/// the built-in defaults (the same as an empty config file).
fn initial_config(given: Option<&Path>) -> anyhow::Result<(PathBuf, edgeprof::config::Config)> {
    if let Some(path) = given {
        return Ok((path.to_path_buf(), edgeprof::config::load(path)?));
    }
    let default = PathBuf::from("configs/default.toml");
    if default.is_file() {
        return Ok((default.clone(), edgeprof::config::load(&default)?));
    }
    let file = PathBuf::from("edgeprof.toml");
    let config = edgeprof::config::parse("", &file)?;
    Ok((file, config))
}

/// The user's configuration directory (`$XDG_CONFIG_HOME/edgeprof`, else `~/.config/edgeprof`).
fn config_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("edgeprof"))
}

/// Builds the UI's state for `options` (no terminal needed: the tests start here too).
pub fn new_app(options: &TuiOptions, offer: conditions::Offer) -> anyhow::Result<App> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme = theme::Theme::select(options.theme.as_deref(), no_color, config_dir().as_deref())?;
    let (file, config) = initial_config(options.config.as_deref())?;
    let mut app = App::new(
        conditions::Conditions::new(file, config, offer),
        theme,
        options.ascii,
    );
    app.scorecard = app::ScorecardView::load();
    app.scorecard.rejoin(&[]);
    Ok(app)
}

/// The event loop's resources: where messages arrive, the job in progress, its cancel flag.
pub struct Loop {
    pub tx: Sender<Message>,
    pub rx: UnboundedReceiver<Message>,
    pub cancel: Cancel,
    pub run: Option<std::thread::JoinHandle<()>>,
    pub telemetry_root: PathBuf,
    /// The Monitor tab's sampling interval in ms, which its sampler reads after each sample.
    pub monitor_interval_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Whether the Monitor tab shows, so that its sampler lists the processes too.
    pub processes_wanted: std::sync::Arc<AtomicBool>,
    /// What starts the jobs.
    pub runner: Box<dyn Runner>,
    /// The UI's runtime (the event loop runs it), which a fleet run's nodes are driven on.
    pub runtime: tokio::runtime::Handle,
}

impl Loop {
    pub fn new(runtime: tokio::runtime::Handle) -> Loop {
        Loop::with_runner(Box::new(Jobs), runtime)
    }

    /// A loop whose jobs `runner` starts, on `runtime` (the one its event loop runs).
    pub fn with_runner(runner: Box<dyn Runner>, runtime: tokio::runtime::Handle) -> Loop {
        let (tx, rx) = mpsc::unbounded_channel();
        Loop {
            tx,
            rx,
            cancel: Cancel::new(),
            run: None,
            telemetry_root: std::env::var_os("EDGEPROF_TELEMETRY_ROOT")
                .map_or_else(|| PathBuf::from("/"), PathBuf::from),
            monitor_interval_ms: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(500)),
            processes_wanted: std::sync::Arc::new(AtomicBool::new(false)),
            runner,
            runtime,
        }
    }

    /// Starts the background job (a run, a tuning, a training; one at a time) with a fresh
    /// cancel.
    fn start(&mut self, job: impl FnOnce(&dyn Runner, JobLink) -> std::thread::JoinHandle<()>) {
        self.cancel = Cancel::new();
        let link = JobLink {
            tx: self.tx.clone(),
            cancel: self.cancel.clone(),
            telemetry_root: self.telemetry_root.clone(),
            runtime: self.runtime.clone(),
        };
        self.run = Some(job(self.runner.as_ref(), link));
    }

    /// Carries out a command of the UI.
    pub fn execute(&mut self, app: &mut App, command: Command) {
        match command {
            Command::Quit | Command::CancelRun => self.cancel.raise(),
            Command::ResumeRun(dir) => {
                self.start(|r, link| r.resume(dir, link));
                app.run.active = true;
                app.train.shown = false;
            }
            Command::StartRun { text, file } => {
                self.start(|r, link| r.run(text, file, link));
                app.run.active = true;
                app.train.shown = false;
            }
            Command::StartTrain { text, file } => {
                self.start(|r, link| r.train(text, file, link));
                app.train.begin();
            }
            Command::StartTune { text, file } => {
                self.start(|r, link| r.tune(text, file, link));
                app.tune.active = true;
            }
            Command::SaveConfig(path) => {
                let text = app.conditions.to_toml();
                match results::write_atomic(&path, text.as_bytes()) {
                    Ok(()) => app.say(
                        Severity::Info,
                        format!(
                            "saved {}; run it with: edgeprof run {}",
                            path.display(),
                            path.display()
                        ),
                    ),
                    Err(e) => app.say(Severity::Error, format!("{e:#}")),
                }
            }
            Command::LoadConfig(path) => match edgeprof::config::load(&path) {
                Ok(config) => {
                    let offer = app.conditions.offer.clone();
                    app.conditions = conditions::Conditions::new(path.clone(), config, offer);
                    app.cursors = Default::default();
                    app.say(Severity::Info, format!("loaded {}", path.display()));
                }
                Err(e) => app.say(Severity::Error, format!("{e:#}")),
            },
            Command::OpenResults(dir) => open_results(app, &dir),
            Command::MonitorInterval(interval) => self
                .monitor_interval_ms
                .store(interval.as_millis() as u64, Ordering::Relaxed),
            Command::Layers { condition, classes } => {
                let tx = self.tx.clone();
                std::thread::spawn(move || {
                    // In a worker process, as `roofline layers` profiles: the UI's own threads
                    // stay off the cores being measured.
                    let result = edgeprof::roofline::layers::LayerRequest::for_condition(
                        &condition, classes,
                    )
                    .map_err(|e| e.0)
                    .and_then(|request| {
                        edgeprof::roofline::layers::profile_in_worker(&request, None)
                            .map(|p| p.programs)
                            .map_err(|e| format!("{e:#}"))
                    });
                    let _ = tx.send(Message::Layers(condition.id, result.into()));
                });
            }
            Command::ProbeFrameworks => {
                let tx = self.tx.clone();
                let cards = app.scorecard.cards.clone();
                std::thread::spawn(move || {
                    let found = edgeprof::scorecard::here::probe_all(&cards, |_| {});
                    let _ = tx.send(Message::Probed(found));
                });
            }
            Command::LoadCeilings(processor) => {
                *app.roofline.ceilings_of(processor) = Some(stored_ceilings(processor));
                app.refresh_roofline();
            }
            Command::MeasureCeilings(Processor::Cpu) => {
                let tx = self.tx.clone();
                app.roofline.ceilings = Some(Shown::Note(
                    "measuring this device's ceilings (quick effort, about 5 s) …".to_string(),
                ));
                std::thread::spawn(move || {
                    use edgeprof::roofline::store::{self, Kept};
                    let result = store::measure_and_keep(
                        edgeprof::collect::ceilings::Effort::Quick,
                        None,
                        false,
                        |_| {},
                    )
                    .map(|(stored, kept)| match kept {
                        Kept::Saved(p) => (stored.ceilings, p.display().to_string()),
                        Kept::NoCache => (stored.ceilings, "measured now, not kept".to_string()),
                        // Disturbed: the quiet set stays, and is what the chart shows.
                        Kept::Withheld { path, kept } => (
                            kept.ceilings,
                            format!(
                                "{} (kept: the measurement just made was disturbed)",
                                path.display()
                            ),
                        ),
                    })
                    .map_err(|e| format!("{e:#}"));
                    let _ = tx.send(Message::Ceilings(Processor::Cpu, result.into()));
                });
            }
            Command::MeasureCeilings(Processor::Gpu) => {
                let tx = self.tx.clone();
                *app.roofline.ceilings_of(Processor::Gpu) = Some(Shown::Note(
                    "measuring GPU 0's ceilings with the CUDA microbenchmark (quick effort) …"
                        .to_string(),
                ));
                std::thread::spawn(move || {
                    use edgeprof::collect::gpubench::GpuBenchError;
                    use edgeprof::roofline::store;
                    let result = store::gpu_bench_program()
                        .and_then(|program| {
                            store::measure_gpu_and_keep(
                                &program,
                                0,
                                edgeprof::collect::ceilings::Effort::Quick,
                                |_| {},
                            )
                        })
                        .map_err(|e| match e {
                            GpuBenchError::Unavailable(why) => {
                                format!("GPU ceilings unavailable: {why}")
                            }
                            GpuBenchError::Failed(why) => {
                                format!("the GPU benchmark failed: {why}")
                            }
                        })
                        .map(|(stored, saved)| {
                            let from = saved.map_or_else(
                                || "measured now, not kept".to_string(),
                                |p| p.display().to_string(),
                            );
                            (stored.ceilings, from)
                        });
                    let _ = tx.send(Message::Ceilings(Processor::Gpu, result.into()));
                });
            }
        }
    }

    /// Applies a message to the UI; what the event loop must then do, if anything.
    pub fn apply(&mut self, app: &mut App, message: Message) -> Option<Command> {
        match message {
            Message::Key(key) => return app.key(key),
            Message::Resize => {}
            Message::Event(Event::Telemetry(sample)) => app.monitor_sample(*sample),
            Message::Event(Event::BoardState(state)) => app.board_state = Some(*state),
            Message::Event(Event::Run(event)) => {
                let finished = match &event {
                    RunEvent::Finished { dir, .. } => Some(dir.clone()),
                    _ => None,
                };
                app.run_event(event);
                if let Some(dir) = finished {
                    if let Some(handle) = self.run.take() {
                        let _ = handle.join();
                    }
                    if let Some(dir) = dir {
                        let run_status = app.status.clone();
                        open_results(app, &dir);
                        if app.results.error.is_none() {
                            if let Some((severity, text)) = run_status {
                                app.say(severity, format!("{text} · 3: results, 4: roofline"));
                            }
                        }
                    }
                }
            }
            Message::Event(Event::Tune(event)) => {
                let finished = matches!(event, TuneEvent::Finished { .. });
                app.tune_event(event);
                if finished {
                    if let Some(handle) = self.run.take() {
                        let _ = handle.join();
                    }
                }
            }
            Message::Event(Event::Train(event)) => {
                let finished = matches!(event, TrainEvent::Finished { .. });
                app.train_event(event);
                if finished {
                    if let Some(handle) = self.run.take() {
                        let _ = handle.join();
                    }
                }
            }
            Message::Layers(condition, result) => app.layers_profiled(condition, result),
            Message::Probed(found) => app.frameworks_probed(found),
            Message::Offer(offer) => app.conditions.offer = *offer,
            Message::Followed(dir) => follow_update(app, &dir),
            Message::Ceilings(processor, result) => {
                *app.roofline.ceilings_of(processor) = Some(result);
                app.refresh_roofline();
            }
        }
        None
    }
}

/// Samples telemetry for the Monitor tab every `interval` (in ms, changed by the tab's keys:
/// read after each sample) until `stop`; while `processes` is set (the tab shows), with every
/// process's CPU and memory since the sample before.
fn spawn_monitor(
    tx: Sender<Message>,
    root: PathBuf,
    interval: std::sync::Arc<std::sync::atomic::AtomicU64>,
    processes: std::sync::Arc<AtomicBool>,
    stop: Stop,
) {
    let every = |ms: &std::sync::atomic::AtomicU64| {
        Duration::from_millis(ms.load(Ordering::Relaxed).max(10))
    };
    std::thread::spawn(move || {
        let readers = telemetry::working_readers(&root);
        let mut sampler = telemetry::Sampler::new(readers, every(&interval));
        let mut scan: Option<edgeprof::collect::other_processes::Scan> = None;
        let own = std::process::id();
        // The board's state (governors, clocks, power mode) changes rarely: read every 10 s.
        let mut state_read: Option<Instant> = None;
        while sampler.wait(&stop) {
            if state_read.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                let state =
                    edgeprof::collect::board::read(&root, &edgeprof::collect::board::LiveCommands);
                state_read = Some(Instant::now());
                if tx
                    .send(Message::Event(Event::BoardState(Box::new(state))))
                    .is_err()
                {
                    return;
                }
            }
            let mut sample = Box::new(sampler.take());
            if processes.load(Ordering::Relaxed) {
                let now = edgeprof::collect::other_processes::Scan::take(&root);
                if let Some(before) = &scan {
                    sample.processes = edgeprof::collect::other_processes::table(before, &now, own);
                }
                scan = Some(now);
            } else {
                scan = None;
            }
            if tx.send(Message::Event(Event::Telemetry(sample))).is_err() {
                return;
            }
            sampler.set_interval(every(&interval));
        }
    });
}

/// How the event loop ended.
enum Exit {
    Quit,
    Terminated,
}

/// `edgeprof` / `edgeprof tui`.
pub fn main(options: TuiOptions) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(edgeprof::error::BadInput(
            "the terminal UI needs a terminal; for scripts and logs use a subcommand \
             (edgeprof run CONFIG, edgeprof monitor --headless; see edgeprof --help)"
                .into()
        ));
    }
    // One current-thread runtime is the event loop (and drives a fleet run's nodes); its
    // signal listeners exist before the terminal is set up, so a SIGTERM from then on restores
    // the terminal.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the event loop")?;
    let mut work = Loop::new(runtime.handle().clone());
    if let Some((_, root)) = &options.monitor {
        work.telemetry_root = root.clone();
    }
    // Interpreters the starting config names count when finding the frameworks.
    let configured = initial_config(options.config.as_deref())
        .map(|(_, c)| c.interpreters())
        .unwrap_or_default();
    // The frameworks are asked after the first frame (a Python start and its imports take
    // about half a second); until then they read "finding out".
    let offer = conditions::Offer::quick(&work.telemetry_root);
    let mut app = new_app(&options, offer)?;
    if let Some(dir) = &options.open {
        open_results(&mut app, dir);
        app.tab = Tab::Results;
        if edgeprof::lockfile::holder(&dir.join(results::LOCK)).is_some() {
            follow_update(&mut app, dir);
            spawn_follower(work.tx.clone(), dir.clone());
        }
    }
    if options.monitor.is_some() {
        app.tab = Tab::Monitor;
    }
    let interval = options
        .monitor
        .as_ref()
        .map_or(Duration::from_millis(500), |m| m.0);
    let signals = {
        let _inside = runtime.enter();
        Signals::new().context("cannot install the signal handlers")?
    };
    let stop_monitor = Stop::new();
    work.monitor_interval_ms
        .store(interval.as_millis() as u64, Ordering::Relaxed);
    app.monitor_settings.interval = interval;
    spawn_monitor(
        work.tx.clone(),
        work.telemetry_root.clone(),
        work.monitor_interval_ms.clone(),
        work.processes_wanted.clone(),
        stop_monitor.clone(),
    );
    // ratatui installs a panic hook that restores the terminal before the message prints.
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            // Raw mode may be on already when the alternate screen is what failed.
            let _ = ratatui::try_restore();
            return Err(e).context("cannot set up the terminal");
        }
    };
    {
        let tx = work.tx.clone();
        let mut offer = app.conditions.offer.clone();
        let spawned = std::thread::Builder::new()
            .name("engines".into())
            .spawn(move || {
                offer.ask_engines(&configured);
                let _ = tx.send(Message::Offer(Box::new(offer)));
            });
        if let Err(e) = spawned {
            // No thread to spare: the frameworks stay unknown, and the UI says why.
            app.say(
                Severity::Warn,
                format!("cannot ask the frameworks whether they are set up: {e}"),
            );
        }
    }
    let hangup = AtomicBool::new(false);
    let after_frame: Box<dyn FnMut()> = if options.panic_after_first_frame {
        Box::new(|| panic!("asked to: panicking after the first frame"))
    } else {
        Box::new(|| {})
    };
    let outside = Outside {
        input: Some(terminal_input()),
        signals: Some(signals),
        after_frame,
    };
    let exit = runtime.block_on(event_loop(
        &mut terminal,
        &mut app,
        &mut work,
        outside,
        &hangup,
    ));
    stop_monitor.raise();
    let headless = hangup.load(Ordering::Relaxed);
    if !headless {
        let _ = terminal.show_cursor();
        ratatui::restore();
    }
    if headless {
        // The terminal is gone: let the run finish and save its results, then leave.
        finish_job(&runtime, &mut work);
    }
    match exit {
        Ok(Exit::Terminated) => {
            finish_job(&runtime, &mut work);
            std::process::exit(143);
        }
        Ok(Exit::Quit) => {
            let was_running = app.run.active;
            let was_training = app.train.active;
            finish_job(&runtime, &mut work);
            if was_running {
                return Err(cancelled_run(&mut app, &mut work));
            }
            if was_training {
                // The study stopped the size in progress on every member and kept what
                // finished, as Ctrl-C does to `edgeprof train`.
                while let Ok(message) = work.rx.try_recv() {
                    if let Message::Event(Event::Train(event)) = message {
                        app.train_event(event);
                    }
                }
                let dir = app.train.dir.clone().unwrap_or_default();
                return Err(edgeprof::jobs::TrainError::Cancelled { dir }.into());
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Waits for the job in progress to end, running the UI's runtime meanwhile: a fleet run's
/// nodes are driven on it, and would stop with it.
fn finish_job(runtime: &tokio::runtime::Runtime, work: &mut Loop) {
    if let Some(handle) = work.run.take() {
        let _ = runtime.block_on(runtime.spawn_blocking(move || handle.join()));
    }
}

/// What a run cancelled by quitting left, as the error that ends edgeprof with exit code 130
/// and says how to finish it (a sweep) or where the nodes' results are (a fleet run).
fn cancelled_run(app: &mut App, work: &mut Loop) -> anyhow::Error {
    // The run's last events, its end among them, arrived after the loop stopped.
    while let Ok(message) = work.rx.try_recv() {
        if let Message::Event(Event::Run(event)) = message {
            app.run_event(event);
        }
    }
    let r = &app.run;
    let dir = r.dir.clone().unwrap_or_default();
    if r.nodes.is_empty() {
        let (done, total) = (r.done_before + r.ok + r.failed, r.total);
        edgeprof::jobs::Interrupted { done, total, dir }.into()
    } else {
        let done = r.nodes.iter().map(|n| n.ok + n.failed).sum();
        let total = r.nodes.iter().map(|n| n.total).sum();
        edgeprof::jobs::FleetError::Cancelled { done, total, dir }.into()
    }
}

/// The signals the UI acts on, as streams of the event loop.
struct Signals {
    term: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers (inside the runtime): from now on SIGTERM and SIGHUP reach the
    /// loop instead of ending the process.
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }
}

/// The key presses and resizes of the terminal, ending once it is gone (SIGHUP, a closed pty),
/// as nothing more can be read from it.
fn terminal_input() -> impl futures_util::Stream<Item = Message> + Unpin {
    use crossterm::event::{Event, EventStream, KeyEventKind};
    use futures_util::StreamExt;
    Box::pin(futures_util::stream::unfold(
        EventStream::new(),
        |mut events| async move {
            loop {
                match events.next().await? {
                    Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                        return Some((Message::Key(k), events))
                    }
                    Ok(Event::Resize(..)) => return Some((Message::Resize, events)),
                    Ok(_) => {}
                    Err(_) => return None,
                }
            }
        },
    ))
}

/// What the event loop hears besides its messages, and what it does after each frame.
pub struct Outside<K> {
    /// The terminal's keys and resizes (a scripted stream in the tests).
    pub input: Option<K>,
    /// SIGTERM and SIGHUP (none in the tests).
    signals: Option<Signals>,
    /// Called after each frame is drawn: nothing, but for the fault the terminal-restoration
    /// test injects (`edgeprof tui --panic-after-first-frame`, hidden).
    pub after_frame: Box<dyn FnMut()>,
}

impl<K> Outside<K> {
    /// Keys from `input` alone, no signals, nothing after a frame.
    #[cfg(test)]
    pub fn keys(input: K) -> Outside<K> {
        Outside {
            input: Some(input),
            signals: None,
            after_frame: Box::new(|| {}),
        }
    }
}

/// A signal's next arrival; never, without the signal.
async fn next_signal(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Waits `wait`, or for ever when there is nothing to wait for.
async fn tick(wait: Option<Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}

/// The UI's loop over any backend (the terminal's, or ratatui's `TestBackend` in the tests):
/// draws `app`, and applies what arrives (keys, messages, signals) until it quits.
async fn event_loop<B, K>(
    terminal: &mut ratatui::Terminal<B>,
    app: &mut App,
    work: &mut Loop,
    outside: Outside<K>,
    hangup: &AtomicBool,
) -> anyhow::Result<Exit>
where
    B: ratatui::backend::Backend,
    K: futures_util::Stream<Item = Message> + Unpin,
{
    use futures_util::StreamExt;
    let Outside {
        mut input,
        signals,
        mut after_frame,
    } = outside;
    let (mut term, mut hangups) = match signals {
        Some(s) => (Some(s.term), Some(s.hangup)),
        None => (None, None),
    };
    let mut run_started: Option<Instant> = None;
    let mut dirty = true;
    let mut last_draw = Instant::now() - Duration::from_secs(1);
    loop {
        let headless = hangup.load(Ordering::Relaxed);
        if headless {
            // Nobody reads the terminal any more; its stream is dropped with it.
            input = None;
            if work.run.is_none() {
                return Ok(Exit::Quit);
            }
        }
        if app.quit {
            return Ok(Exit::Quit);
        }
        if app.run.active {
            let t = *run_started.get_or_insert_with(Instant::now);
            app.run.elapsed_s = t.elapsed().as_secs_f64();
        } else {
            run_started = None;
        }
        // A status line that has been read long enough clears (the message log keeps it).
        if app.status_expires().is_some_and(|at| Instant::now() >= at) {
            app.status = None;
            dirty = true;
        }
        let since = last_draw.elapsed();
        if !headless
            && (dirty && since >= Duration::from_millis(50)
                || app.run.active && since >= Duration::from_millis(500))
        {
            if terminal.draw(|f| view::draw(f, app)).is_err() {
                // The terminal went away without a SIGHUP reaching us: carry on without it.
                hangup.store(true, Ordering::Relaxed);
            }
            last_draw = Instant::now();
            dirty = false;
            after_frame();
        }
        // Wait for whatever comes first: a key, a message (samples, the run's events), a signal,
        // or, while a run is on, the next tick of its clock, or a deferred redraw.
        let wait = if app.run.active {
            Some(Duration::from_millis(100))
        } else if dirty && !headless {
            Some(Duration::from_millis(50).saturating_sub(last_draw.elapsed()))
        } else {
            None
        };
        // Wake when the status line is due to clear, too.
        let wait = match (wait, app.status_expires()) {
            (w, Some(at)) => {
                let until = at.saturating_duration_since(Instant::now());
                Some(w.map_or(until, |w| w.min(until)))
            }
            (w, None) => w,
        };
        let message = tokio::select! {
            message = work.rx.recv() => match message {
                Some(message) => Some(message),
                None => return Ok(Exit::Quit),
            },
            key = async {
                match input.as_mut() {
                    Some(events) => events.next().await,
                    None => std::future::pending().await,
                }
            }, if input.is_some() => {
                if key.is_none() {
                    input = None;
                }
                key
            },
            () = next_signal(term.as_mut()) => {
                work.cancel.raise();
                return Ok(Exit::Terminated);
            },
            () = next_signal(hangups.as_mut()) => {
                hangup.store(true, Ordering::Relaxed);
                None
            },
            () = tick(wait) => None,
        };
        if let Some(message) = message {
            // A telemetry sample changes the screen only where telemetry shows: the Monitor
            // tab, or the Run tab during a run. Elsewhere the idle UI draws nothing for it.
            let shown = match &message {
                Message::Event(Event::Telemetry(_)) => {
                    app.tab == Tab::Monitor || app.tab == Tab::Run && app.run.active
                }
                _ => true,
            };
            if let Some(command) = work.apply(app, message) {
                work.execute(app, command);
            }
            // The process list costs a scan of /proc per sample: only while it shows.
            work.processes_wanted
                .store(app.tab == Tab::Monitor, Ordering::Relaxed);
            dirty |= shown;
        }
    }
}

#[cfg(test)]
mod tests;

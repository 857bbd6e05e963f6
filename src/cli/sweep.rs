//! `edgeprof run` and `edgeprof report`: the sweep from a config with progress on stderr, and
//! the tables and charts of a results directory on stdout.

use crate::cli::{print_out, render, BadInput};
use anyhow::Context;
use edgeprof::report;
use edgeprof::results::{self, summary, Stored, SweepStatus};
use edgeprof::runner::matrix::{self};
use edgeprof::runner::spawn::WorkerEvent;
use edgeprof::runner::sweep::{Sweep, SweepEvent, SweepOutcome};
use edgeprof::session::{self, start_new};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Read, Write};
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
    pub output: Option<PathBuf>,
    pub charts: bool,
    /// JSON lines on stdout for a fleet controller (see [`edgeprof::fleet::Line`]).
    pub stream: bool,
}

/// Writes one stream line; a controller that went away ends the run like a hang-up.
fn stream_line(line: &edgeprof::fleet::Line) {
    if let Ok(text) = serde_json::to_string(line) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
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
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(results::PROGRESS))
            .ok();
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

    /// A line for stderr only.
    fn say(&mut self, text: &str) {
        if self.terminal() && !edgeprof::console::err(format_args!("{text}\n")) {
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
    /// Estimated seconds of each condition still to run in this sweep, in order.
    estimates: Vec<f64>,
    started: Instant,
    /// Estimated and actual seconds of the conditions finished so far in this sweep.
    estimated_done: f64,
    elapsed_done: f64,
    current_started: Option<Instant>,
    finished: usize,
    current: String,
    index: usize,
    total: usize,
    iterations: usize,
    timed: usize,
    rss: Option<u64>,
    /// The latest telemetry figures worth a place on the status line.
    gpu_load: Option<f64>,
    power_w: Option<f64>,
    last_draw: Option<Instant>,
}

impl Progress {
    /// Seconds left: the estimates of the conditions not finished, scaled by how the finished
    /// ones compared with their estimates on this machine, less the time the current one has
    /// already run.
    fn eta(&self) -> f64 {
        let in_current = self
            .current_started
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        matrix::eta_seconds(
            &self.estimates,
            self.finished,
            self.estimated_done,
            self.elapsed_done,
            in_current,
        )
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
        let frac = if self.total == 0 {
            1.0
        } else {
            let within = if self.iterations > 0 {
                (self.timed as f64 / self.iterations as f64).min(1.0)
            } else {
                0.0
            };
            ((self.index.saturating_sub(1)) as f64 + within) / self.total as f64
        };
        let width = 24;
        let filled = ((frac * width as f64).round() as usize).min(width);
        let mut line = format!(
            "[{}{}] {}/{} {:>3.0}% {}",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.index,
            self.total,
            frac * 100.0,
            self.current
        );
        if let Some(rss) = self.rss {
            let _ = write!(line, " · RSS {}", render::bytes(rss));
        }
        if let Some(gpu) = self.gpu_load {
            let _ = write!(line, " · GPU {gpu:.0} %");
        }
        if let Some(w) = self.power_w {
            let _ = write!(line, " · {w:.1} W");
        }
        let _ = write!(line, " · ETA {}", render::duration(self.eta()));
        // Keep to one terminal line so the redraw does not scroll.
        let line: String = line.chars().take(160).collect();
        self.out.status(&line);
    }

    fn event(&mut self, event: SweepEvent, per_condition_iterations: usize) {
        match event {
            SweepEvent::Start {
                index,
                total,
                condition,
                attempt,
                attempts,
                ..
            } => {
                self.index = index;
                self.total = total;
                if self.current_started.is_none() {
                    self.current_started = Some(Instant::now());
                }
                self.current = condition.id.clone();
                self.timed = 0;
                self.rss = None;
                self.iterations = per_condition_iterations;
                self.last_draw = None;
                let retry = if attempt > 1 {
                    format!(" (attempt {attempt} of {attempts})")
                } else {
                    String::new()
                };
                let line = format!("[{index}/{total}] {}: running{retry}", condition.id);
                if self.out.tty {
                    self.out.log_line(&line);
                    self.draw();
                } else {
                    self.out.line(&line);
                }
            }
            SweepEvent::Worker(WorkerEvent::Timed(n)) => {
                self.timed = n;
                self.draw();
            }
            SweepEvent::Worker(WorkerEvent::Sample(s)) => {
                self.rss = s.rss_bytes.or(self.rss);
                self.draw();
            }
            SweepEvent::Worker(WorkerEvent::Ready) => self.draw(),
            SweepEvent::Telemetry(sample) => {
                self.gpu_load = sample.gpus.first().and_then(|g| g.load_pct);
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
                if !retry {
                    self.estimated_done +=
                        self.estimates.get(self.finished).copied().unwrap_or(0.0);
                    self.elapsed_done = self.started.elapsed().as_secs_f64();
                    self.finished += 1;
                    self.current_started = None;
                }
                let r = &record.resources;
                let mut line = format!("[{index}/{total}] {}: ", record.condition.id);
                match (&record.stats, &record.reason) {
                    (Some(s), None) => {
                        let rs = &s.repeat_summary;
                        let _ = write!(
                            line,
                            "ok, mean {:.3} ms ± {:.3}, {:.1} inferences/s",
                            rs.mean_ms, rs.mean_spread_ms, rs.inferences_per_s
                        );
                        if s.noisy {
                            let _ = write!(line, ", noisy (CV {:.1} %)", 100.0 * s.cv);
                        }
                    }
                    (_, reason) => {
                        let what = if retry { "failed, retrying" } else { "failed" };
                        let _ = write!(
                            line,
                            "{what} (attempt {}): {}",
                            record.attempt,
                            reason.as_deref().unwrap_or("unknown reason")
                        );
                    }
                }
                if let Some(peak) = r.peak_rss_bytes {
                    let _ = write!(line, ", peak RSS {}", render::bytes(peak));
                }
                if let Some(cpu) = r.cpu_mean_pct {
                    let _ = write!(line, ", CPU {cpu:.0} %");
                }
                if let Some(t) = &record.telemetry {
                    if let Some(w) = t.power_mean_w {
                        let _ = write!(line, ", {w:.2} W");
                    }
                    if let Some(j) = t.energy_per_inference_j {
                        let _ = write!(line, ", {:.1} mJ/inference", j * 1e3);
                    }
                    if t.throttled {
                        let _ = write!(line, ", THROTTLED ({})", t.reasons.join("; "));
                    }
                }
                if !retry && self.finished < self.estimates.len() {
                    let _ = write!(line, " (ETA {})", render::duration(self.eta()));
                }
                self.out.line(&line);
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

/// Stops the sweep on SIGINT or SIGTERM (a second one ends edgeprof at once; workers die with
/// their parent). A hang-up (SIGHUP: a closed terminal, a dropped SSH session) does not stop
/// it: the returned flag is raised, progress goes on in the results directory only, and the
/// sweep measures to the end. A closing terminal may send several hang-ups; they are one.
pub(super) fn install_stop_handlers(cancel: &Arc<AtomicBool>) -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(cancel))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(cancel)))
            .context("cannot install the signal handlers")?;
    }
    let hangup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGHUP, Arc::clone(&hangup))
        .context("cannot install the signal handlers")?;
    Ok(hangup)
}

/// `edgeprof run`.
pub fn run(options: RunOptions) -> anyhow::Result<()> {
    if let (None, Some(file)) = (&options.resume, &options.config) {
        if file.as_os_str() != "-" {
            let config = edgeprof::config::load(file)?;
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
    let cancel = Arc::new(AtomicBool::new(false));
    let hangup = install_stop_handlers(&cancel)?;
    let no_attempts = HashMap::new();
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
                let r = session::resume(dir)?;
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
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .context("cannot read the config from stdin")?;
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
    if options.stream {
        stream_line(&edgeprof::fleet::Line::Started {
            dir: std::path::absolute(&dir).unwrap_or_else(|_| dir.clone()),
            manifest: Box::new(manifest.clone()),
        });
    }
    let mut out = Output::new(&dir, Arc::clone(&hangup));
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
    for s in &manifest.skipped {
        out.line(&format!("  skipped {}: {}", s.condition.id, s.reason));
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
        estimates,
        started: Instant::now(),
        estimated_done: 0.0,
        elapsed_done: 0.0,
        current_started: None,
        finished: 0,
        current: String::new(),
        index: 0,
        total: manifest.conditions.len(),
        iterations: 0,
        timed: 0,
        rss: None,
        gpu_load: None,
        power_w: None,
        last_draw: None,
    };
    let per_condition = config.measure.iterations * config.measure.repeats;
    let stream = options.stream;
    let swept = sweep.run(&mut writer, |event| {
        if let (true, SweepEvent::Done { record, .. }) = (stream, &event) {
            stream_line(&edgeprof::fleet::Line::Record(Box::new((*record).clone())));
        }
        progress.event(event, per_condition)
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
        let roofline = roofline_outputs(&stored)?;
        if !stream && out.terminal() {
            let _ = print_out(&roofline);
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

/// The roofline of a finished sweep: ceilings of this device (measured first if it has none),
/// its conditions as points with their advice on stdout, and `roofline.json` and
/// `charts/roofline.svg` in the results directory.
fn roofline_outputs(stored: &Stored) -> anyhow::Result<String> {
    use edgeprof::roofline::{advice, Precision};
    let (ceilings, from) = crate::cli::roofline::ceilings_or_measure()?;
    let c = &ceilings.ceilings;
    let simulations = edgeprof::runner::cachesim::load(&stored.dir)?;
    let (programs, left_out) = edgeprof::roofline::programs_from_results(stored, &simulations);
    let analyses: Vec<_> = programs
        .iter()
        .filter_map(|p| advice::analyse(p, c).ok())
        .collect();
    let value = serde_json::json!({
        "ceilings": c,
        "ceilings_file": from,
        "programs": programs,
        "left_out": left_out,
        "analyses": analyses,
    });
    let text = serde_json::to_string_pretty(&value).context("cannot encode the roofline")?;
    results::write_atomic(&stored.dir.join("roofline.json"), (text + "\n").as_bytes())?;
    let charts = stored.dir.join("charts");
    std::fs::create_dir_all(&charts)
        .with_context(|| format!("cannot create {}", charts.display()))?;
    let svg = report::svg::roofline(c, Precision::Fp32, &programs)?;
    results::write_atomic(&charts.join("roofline.svg"), svg.as_bytes())?;
    Ok(format!(
        "\nroofline\n{}",
        crate::cli::roofline::roofline_text(
            c,
            &from,
            &programs,
            &left_out,
            Precision::Fp32,
            false,
            (80, 24),
        )
    ))
}

/// Where the sweep's time went: the workers' measured work, their process life, and the rest.
pub fn overhead_line(o: &SweepOutcome) -> String {
    let outside = (o.wall_s - o.measured_s).max(0.0);
    let pct = if o.wall_s > 0.0 {
        100.0 * outside / o.wall_s
    } else {
        0.0
    };
    format!(
        "swept in {:.1} s: {:.1} s measured by the workers (load, first inference, warm-up, timed), \
         {:.1} s outside it ({pct:.1} %: {:.1} s worker start-up and exit, {:.1} s in edgeprof itself)",
        o.wall_s,
        o.measured_s,
        outside,
        (o.worker_s - o.measured_s).max(0.0),
        (o.wall_s - o.worker_s).max(0.0),
    )
}

fn opt(v: Option<f64>, places: usize) -> String {
    v.map(|x| format!("{x:.places$}"))
        .unwrap_or_else(|| "-".to_string())
}

/// The framework comparison: mean latency per engine, side by side, for every condition the
/// engines share (model, input, batch, threads, device); the fastest is starred. Empty when
/// fewer than two engines ran.
pub fn engine_comparison(rows: &[summary::Row]) -> String {
    let mut engines: Vec<&str> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.status == "ok") {
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
        let key = format!(
            "{}/{}/b{}/t{}/{}",
            r.model, r.input, r.batch, r.threads, r.device
        );
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    if engines.len() < 2 {
        return String::new();
    }
    let table: Vec<Vec<String>> = keys
        .iter()
        .map(|key| {
            let means: Vec<Option<f64>> = engines
                .iter()
                .map(|e| {
                    rows.iter()
                        .find(|r| {
                            r.status == "ok"
                                && r.engine == *e
                                && format!(
                                    "{}/{}/b{}/t{}/{}",
                                    r.model, r.input, r.batch, r.threads, r.device
                                ) == *key
                        })
                        .and_then(|r| r.mean_ms)
                })
                .collect();
            let best = means
                .iter()
                .flatten()
                .copied()
                .fold(f64::INFINITY, f64::min);
            let mut row = vec![key.clone()];
            row.extend(means.iter().map(|m| match m {
                Some(v) if *v == best => format!("*{v:.3}"),
                Some(v) => format!("{v:.3}"),
                None => "-".to_string(),
            }));
            row
        })
        .collect();
    let mut header = vec!["mean ms (* fastest)"];
    header.extend(engines.iter().copied());
    let mut right = vec![false];
    right.extend(engines.iter().map(|_| true));
    format!(
        "\nframeworks side by side:\n{}",
        render::table(&header, &right, &table)
    )
}

/// Tables and terminal charts of a stored sweep (what `run` and `report` print).
pub fn report_text(stored: &Stored, rows: &[summary::Row], charts: bool) -> String {
    let m = &stored.manifest;
    let (ok, failed, not_run, skipped) = summary::counts(rows);
    let mut out = format!(
        "{} ({}): {ok} ok, {failed} failed, {not_run} not run, {skipped} skipped; started {}, ended {}\n\n",
        m.name,
        stored.dir.display(),
        m.started,
        m.ended.as_deref().unwrap_or("(not finished)")
    );
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut flags = Vec::new();
            if r.noisy == Some(true) {
                flags.push("noisy".to_string());
            }
            if let Some(n) = r.outliers.filter(|&n| n > 0) {
                flags.push(format!("{n} outliers"));
            }
            if r.attempts > 1 {
                flags.push(format!("{} attempts", r.attempts));
            }
            vec![
                r.id.clone(),
                r.status.clone(),
                opt(r.mean_ms, 3),
                opt(r.mean_spread_ms, 3),
                opt(r.p99_ms, 3),
                opt(r.inferences_per_s, 1),
                r.peak_rss_bytes
                    .map(render::bytes)
                    .unwrap_or_else(|| "-".into()),
                opt(r.cpu_mean_pct, 0),
                flags.join(", "),
            ]
        })
        .collect();
    out.push_str(&render::table(
        &[
            "condition",
            "status",
            "mean ms",
            "±",
            "p99 ms",
            "inf/s",
            "peak RSS",
            "CPU %",
            "notes",
        ],
        &[false, false, true, true, true, true, true, true, false],
        &table_rows,
    ));
    let failures: Vec<&summary::Row> = rows
        .iter()
        .filter(|r| r.status != "ok" && r.reason.is_some())
        .collect();
    if !failures.is_empty() {
        out.push_str("\nwhy:\n");
        for r in failures {
            let _ = writeln!(
                out,
                "  {} ({}): {}",
                r.id,
                r.status,
                r.reason.as_deref().unwrap_or("")
            );
            let tail = stored
                .runs
                .iter()
                .rev()
                .find(|x| x.condition.id == r.id)
                .and_then(|x| x.failure.as_ref())
                .map(|f| f.stderr_tail().to_string())
                .unwrap_or_default();
            for line in tail
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                let _ = writeln!(out, "      | {line}");
            }
        }
    }
    out.push_str(&engine_comparison(rows));
    // How each engine ran, once per engine, version and note.
    let mut engines: Vec<(String, String)> = Vec::new();
    for r in rows.iter().filter(|r| r.status == "ok") {
        let mut said = r.engine_version.clone().unwrap_or_default();
        if let Some(note) = &r.engine_note {
            said = format!("{said}: {note}");
        }
        if !said.is_empty() && !engines.contains(&(r.engine.clone(), said.clone())) {
            engines.push((r.engine.clone(), said));
        }
    }
    if !engines.is_empty() {
        out.push_str("\nengines:\n");
        for (engine, said) in &engines {
            let _ = writeln!(out, "  {engine} {said}");
        }
    }
    let agreement = results::agreement::compare(&stored.dir, rows);
    if !agreement.is_empty() {
        let _ = writeln!(
            out,
            "\noutputs: each engine's first output against the reference's (same weights and \
             input; agree = within {:e} of the reference's largest value)",
            results::agreement::TOLERANCE
        );
        let table: Vec<Vec<String>> = agreement
            .iter()
            .map(|a| {
                vec![
                    a.condition.clone(),
                    a.reference.clone(),
                    format!("{:.2e}", a.max_abs_diff),
                    format!("{:.2e}", a.max_rel_diff),
                    if a.agree {
                        "yes".to_string()
                    } else {
                        format!(
                            "NO{}",
                            a.note
                                .as_deref()
                                .map(|n| format!(": {n}"))
                                .unwrap_or_default()
                        )
                    },
                ]
            })
            .collect();
        out.push_str(&render::table(
            &["condition", "reference", "max |diff|", "relative", "agree"],
            &[false, false, true, true, false],
            &table,
        ));
    }
    if charts {
        out.push('\n');
        out.push_str(&report::terminal_bars(
            "mean latency (ms, mean of repeat means)",
            "ms",
            &report::latency_groups(rows),
            40,
        ));
        out.push('\n');
        out.push_str(&report::terminal_bars(
            "peak resident memory of the worker (MiB)",
            "MiB",
            &report::memory_groups(rows),
            40,
        ));
        out.push('\n');
        out.push_str(&report::terminal_line(
            "worker CPU utilisation over the sweep (% of one core)",
            &report::cpu_timeline(&stored.runs, &stored.samples),
        ));
    }
    out
}

/// `edgeprof report DIR`. The tables go to stdout whatever happens to the files: a directory
/// that another edgeprof is still writing is read, not written; one that cannot be written
/// (read-only, a full disk) gets a warning.
pub fn report_command(dir: &Path, charts: bool, svg_dir: Option<&Path>) -> anyhow::Result<()> {
    let stored = results::load(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    for warning in &stored.warnings {
        errln!("warning: {warning}");
    }
    let rows = summary::rows(&stored.manifest, &stored.runs);
    let writer = edgeprof::lockfile::holder(&dir.join(results::LOCK));
    if let Some(holder) = &writer {
        errln!(
            "{} is still being written by edgeprof ({holder}): showing what it holds so far, \
             writing nothing",
            dir.display()
        );
    } else {
        let svg_dir = svg_dir
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.join("charts"));
        let written =
            session::write_summaries(&stored, &rows, &["csv", "json", "md"].map(String::from))
                .and_then(|()| session::write_svgs(&stored, &rows, &svg_dir));
        match written {
            Ok(paths) => errln!(
                "wrote summary.csv, summary.json, summary.md in {} and {} chart(s) in {}",
                dir.display(),
                paths.len(),
                svg_dir.display()
            ),
            Err(e) => errln!("warning: the summaries and charts were not written: {e:#}"),
        }
    }
    print_out(&report_text(&stored, &rows, charts))
}

/// `edgeprof runs [DIR]`.
pub fn runs_command(parent: &Path, json: bool) -> anyhow::Result<()> {
    use results::listing::{self, State};
    let found = listing::list(parent).map_err(|e| {
        BadInput(format!(
            "cannot list {}: {e} (name the output directory of your runs, e.g. edgeprof runs \
             results)",
            parent.display()
        ))
    })?;
    if json {
        return crate::cli::print_json(&found);
    }
    if found.is_empty() {
        return print_out(&format!(
            "no results directories under {}\n",
            parent.display()
        ));
    }
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|l| {
            let mut notes = Vec::new();
            if l.failed > 0 {
                notes.push(format!("{} failed", l.failed));
            }
            if let Some(pid) = l.pid {
                notes.push(format!("pid {pid}"));
            }
            if let Some(note) = &l.note {
                notes.push(note.clone());
            }
            vec![
                l.dir.display().to_string(),
                l.state.to_string(),
                format!("{}/{}", l.done, l.total),
                l.started.clone(),
                notes.join(", "),
            ]
        })
        .collect();
    let mut text = render::table(
        &["directory", "state", "done", "started", "notes"],
        &[false, false, true, false, false],
        &rows,
    );
    for l in &found {
        match l.state {
            State::Running => {
                let _ = writeln!(
                    text,
                    "\n{} is running: follow it with `edgeprof tui --open {}` or `tail -f {}`",
                    l.dir.display(),
                    l.dir.display(),
                    l.dir.join(results::PROGRESS).display()
                );
                if let Some(line) = &l.last_progress {
                    let _ = writeln!(text, "  last: {line}");
                }
            }
            State::Interrupted => {
                let _ = writeln!(
                    text,
                    "\n{} stopped at {} of {}: finish it with `edgeprof run --resume {}`",
                    l.dir.display(),
                    l.done,
                    l.total,
                    l.dir.display()
                );
            }
            State::Complete | State::Failed => {}
        }
    }
    print_out(&text)
}

//! The Run and Monitor tabs' state: a sweep's events as the UI receives them, its progress, and the
//! live telemetry figures.

use super::*;
use edgeprof::runner::progress::Said;

pub use edgeprof::event::RunEvent;

/// Points kept for the live charts.
pub const HISTORY: usize = 240;

pub(super) fn push(series: &mut VecDeque<f64>, v: f64) {
    if series.len() == HISTORY {
        series.pop_front();
    }
    series.push_back(v);
}

/// One GPU's figures over the samples, by its place in them (GPU0, GPU1, …).
#[derive(Debug, Clone, Default)]
pub struct GpuHistory {
    pub name: String,
    pub load: VecDeque<f64>,
    pub mem_mib: VecDeque<f64>,
}

/// Live figures of telemetry samples, for the Run and Monitor tabs.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Every GPU the samples report, in their order.
    pub gpus: Vec<GpuHistory>,
    pub mem_used_mib: VecDeque<f64>,
    pub cpu_mean: VecDeque<f64>,
    pub power_w: VecDeque<f64>,
    /// Each core's load (%), by core id, over the same points.
    pub core_load: std::collections::BTreeMap<usize, VecDeque<f64>>,
    /// Each core's clock (MHz), by core id, where cpufreq says.
    pub core_mhz: std::collections::BTreeMap<usize, VecDeque<f64>>,
    /// The latest sample, whole.
    pub last: Option<Sample>,
    pub samples: usize,
}

/// The sampling intervals the Monitor tab's `+` and `-` step through.
pub const MONITOR_INTERVALS: [Duration; 6] = [
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
];

/// What the Monitor tab's process list is sorted by (most first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProcessSort {
    #[default]
    Cpu,
    Memory,
    GpuMemory,
}

impl ProcessSort {
    pub fn next(self) -> ProcessSort {
        match self {
            ProcessSort::Cpu => ProcessSort::Memory,
            ProcessSort::Memory => ProcessSort::GpuMemory,
            ProcessSort::GpuMemory => ProcessSort::Cpu,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ProcessSort::Cpu => "CPU",
            ProcessSort::Memory => "memory",
            ProcessSort::GpuMemory => "GPU memory",
        }
    }
}

/// The Monitor tab's own settings: its sampling interval, whether it is paused, and the order
/// of its process list.
#[derive(Debug, Clone)]
pub struct MonitorSettings {
    pub interval: Duration,
    /// Paused: samples are not shown (the screen holds still to be read).
    pub paused: bool,
    pub sort: ProcessSort,
}

impl Default for MonitorSettings {
    fn default() -> MonitorSettings {
        MonitorSettings {
            interval: Duration::from_millis(500),
            paused: false,
            sort: ProcessSort::default(),
        }
    }
}

/// The processes of a sample in the list's order, each with its GPU memory (summed over the
/// GPUs that say, None where none does).
pub fn process_rows(
    sample: &Sample,
    sort: ProcessSort,
) -> Vec<(&edgeprof::collect::other_processes::ProcessRow, Option<u64>)> {
    let gpu_bytes = |pid: u32| -> Option<u64> {
        let used: Vec<u64> = sample
            .gpus
            .iter()
            .flat_map(|g| g.processes.iter())
            .filter(|(p, _)| *p == pid)
            .map(|(_, b)| *b)
            .collect();
        (!used.is_empty()).then(|| used.iter().sum())
    };
    let mut rows: Vec<_> = sample
        .processes
        .iter()
        .map(|p| (p, gpu_bytes(p.pid)))
        .collect();
    match sort {
        ProcessSort::Cpu => {}
        ProcessSort::Memory => rows.sort_by_key(|r| std::cmp::Reverse(r.0.rss_bytes)),
        ProcessSort::GpuMemory => rows.sort_by_key(|r| std::cmp::Reverse(r.1)),
    }
    rows
}

impl Live {
    /// The machine's memory in MiB, the scale of the memory chart.
    pub fn mem_total_mib(&self) -> Option<u64> {
        let total = self.last.as_ref()?.mem_total_bytes?;
        Some(total >> 20)
    }

    pub fn add(&mut self, sample: Sample) {
        const MIB: f64 = (1u64 << 20) as f64;
        for (i, g) in sample.gpus.iter().enumerate() {
            if self.gpus.len() <= i {
                self.gpus.push(GpuHistory::default());
            }
            let h = &mut self.gpus[i];
            h.name.clone_from(&g.name);
            if let Some(l) = g.load_pct {
                push(&mut h.load, l);
            }
            if let Some(m) = g.mem_used_bytes {
                push(&mut h.mem_mib, m as f64 / MIB);
            }
        }
        if let Some(m) = sample.mem_used_bytes {
            push(&mut self.mem_used_mib, m as f64 / MIB);
        }
        if let Some(c) = sample.cpu_load_pct() {
            push(&mut self.cpu_mean, c);
        }
        if let Some(w) = sample.power_w {
            push(&mut self.power_w, w);
        }
        for c in &sample.cores {
            if let Some(l) = c.load_pct.filter(|_| c.online) {
                push(self.core_load.entry(c.id).or_default(), l);
            }
            if let Some(f) = c.freq_mhz.filter(|_| c.online) {
                push(self.core_mhz.entry(c.id).or_default(), f64::from(f));
            }
        }
        self.samples += 1;
        self.last = Some(sample);
    }
}

/// One node of a fleet run, as the Run tab shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeProgress {
    pub name: String,
    /// Its conditions (known once it started), and their results so far.
    pub total: usize,
    pub ok: usize,
    pub failed: usize,
    /// `starting`, `running on DEVICE`, `dropped: …`, `complete` …
    pub state: String,
}

/// The Run tab's state.
#[derive(Debug, Clone, Default)]
pub struct RunView {
    /// A fleet run's nodes (empty for a run on this machine).
    pub nodes: Vec<NodeProgress>,
    pub active: bool,
    pub dir: Option<PathBuf>,
    pub total: usize,
    /// Conditions an earlier run of the directory finished (a resumption's).
    pub done_before: usize,
    pub index: usize,
    pub current: String,
    pub attempt: usize,
    pub attempts: usize,
    /// The current worker process of the condition, of how many.
    pub process: usize,
    pub processes: usize,
    /// Timed iterations planned for the current worker run.
    pub iterations: usize,
    /// Timed iterations the current condition got beyond `iterations` (repeats added to it).
    pub more_iterations: usize,
    pub timed: usize,
    /// Seconds since the run started (the loop advances it; tests set it).
    pub elapsed_s: f64,
    /// How far the sweep is and how long it has left.
    pub tracker: edgeprof::runner::progress::Tracker,
    pub ok: usize,
    pub failed: usize,
    pub rss_mib: VecDeque<f64>,
    pub worker_cpu: VecDeque<f64>,
    pub live: Live,
    pub log: Vec<(Severity, String)>,
    /// The sweep ended and its summaries are written; what follows (the rooflines) is told
    /// in the log, a step at a time.
    pub stored: bool,
    /// The log's last line is a step that the next one replaces.
    pub stepping: bool,
    pub outcome: Option<SweepOutcome>,
    pub error: Option<String>,
}

impl RunView {
    /// Share of the plan done, counting the current worker run's timed iterations.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        if !self.nodes.is_empty() || !self.active {
            return ((self.ok + self.failed) as f64 / self.total as f64).min(1.0);
        }
        self.tracker.fraction()
    }

    /// Seconds left (see [`edgeprof::runner::progress::Tracker::eta_s`]).
    pub fn eta_s(&self) -> f64 {
        self.tracker.eta_s(self.elapsed_s)
    }
}

impl App {
    /// A sweep's progress.
    pub fn run_event(&mut self, event: RunEvent) {
        let event = match event {
            RunEvent::BoardState(state) => {
                self.run
                    .log
                    .push((Severity::Info, format!("board state: {}", state.summary())));
                self.board_state = Some(*state);
                return;
            }
            other => other,
        };
        let mut announce = None;
        let r = &mut self.run;
        if let RunEvent::Sweep(e) = &event {
            r.tracker.event(e, r.elapsed_s);
        }
        match event {
            RunEvent::Started {
                dir,
                total,
                done_before,
                estimates,
            } => {
                *r = RunView {
                    active: true,
                    log: vec![(
                        Severity::Info,
                        format!(
                            "{} condition(s), estimated {}; results in {}",
                            estimates.len(),
                            edgeprof::text::duration(estimates.iter().sum()),
                            dir.display()
                        ),
                    )],
                    dir: Some(dir),
                    total,
                    done_before,
                    index: done_before,
                    tracker: edgeprof::runner::progress::Tracker::new(
                        estimates,
                        total,
                        done_before,
                    ),
                    ..RunView::default()
                };
            }
            RunEvent::Sweep(SweepEvent::Start {
                index,
                total,
                condition,
                attempt,
                attempts,
                process,
                processes,
                iterations,
            }) => {
                let condition = condition.id;
                r.index = index;
                r.total = total;
                r.attempt = attempt;
                r.attempts = attempts;
                r.process = process;
                r.processes = processes;
                r.iterations = iterations;
                r.timed = 0;
                r.more_iterations = 0;
                if attempt > 1 && process == 1 {
                    r.log.push((
                        Severity::Warn,
                        format!("{condition}: attempt {attempt} of {attempts}"),
                    ));
                }
                r.current = condition;
            }
            RunEvent::Sweep(SweepEvent::Worker(WorkerEvent::Timed(n))) => r.timed = n,
            RunEvent::Sweep(SweepEvent::Worker(WorkerEvent::Ready | WorkerEvent::Repeat(_))) => {}
            RunEvent::Sweep(SweepEvent::Worker(WorkerEvent::Sample(s))) => {
                if let Some(b) = s.rss_bytes {
                    push(&mut r.rss_mib, b as f64 / (1u64 << 20) as f64);
                }
                if let Some(c) = s.cpu_pct {
                    push(&mut r.worker_cpu, c);
                }
            }
            RunEvent::Sweep(SweepEvent::Telemetry(s)) => r.live.add(*s),
            RunEvent::Sweep(SweepEvent::Done { record, retry, .. }) => {
                if !retry {
                    if record.ok {
                        r.ok += 1;
                    } else {
                        r.failed += 1;
                    }
                }
                let throttled = record.telemetry.as_ref().is_some_and(|t| t.throttled);
                let severity = match (record.ok, retry) {
                    (false, false) => Severity::Error,
                    (false, true) => Severity::Warn,
                    (true, _) if throttled => Severity::Warn,
                    (true, _) => Severity::Info,
                };
                r.log.push((
                    severity,
                    format!(
                        "{}: {}",
                        record.condition.id,
                        summary::record_line(&record, retry)
                    ),
                ));
            }
            RunEvent::Sweep(SweepEvent::MoreRepeats {
                repeats,
                iterations,
                reason,
            }) => {
                r.more_iterations += iterations;
                r.log.push((
                    Severity::Info,
                    format!("{}: {repeats} more repeat(s): {reason}", r.current),
                ));
            }
            RunEvent::Sweep(SweepEvent::Warning(why)) => r.log.push((Severity::Warn, why)),
            RunEvent::BoardState(_) => {}
            RunEvent::Stored { .. } => r.stored = true,
            // The sweep's lines say what its own events show here; after it, they tell the
            // rooflines' steps (a ceilings measurement, most often).
            RunEvent::Said(said) if r.stored => {
                if r.stepping {
                    r.log.pop();
                }
                r.stepping = matches!(said, Said::Status(_));
                if !matches!(said, Said::Logged(_)) {
                    r.log.push((Severity::Info, said.text().to_string()));
                }
            }
            RunEvent::Said(_) => {}
            RunEvent::GpuProfile(e) => {
                let (line, failed) = e.line();
                let severity = if failed {
                    Severity::Warn
                } else {
                    Severity::Info
                };
                r.log.push((severity, line));
            }
            RunEvent::Sweep(SweepEvent::Cooldown { seconds }) => r
                .log
                .push((Severity::Info, format!("cooling down {seconds} s"))),
            RunEvent::FleetStarted { dir, nodes } => {
                *r = RunView {
                    active: true,
                    log: vec![(
                        Severity::Info,
                        format!(
                            "fleet run on {}; results in {}",
                            nodes.join(", "),
                            dir.display()
                        ),
                    )],
                    nodes: nodes
                        .into_iter()
                        .map(|name| NodeProgress {
                            name,
                            state: "starting".into(),
                            ..NodeProgress::default()
                        })
                        .collect(),
                    dir: Some(dir),
                    ..RunView::default()
                };
            }
            RunEvent::Node(event) => {
                use edgeprof::fleet::run::{FleetEvent, NodeStatus};
                let name = match &event {
                    FleetEvent::Started { node, .. }
                    | FleetEvent::Record { node, .. }
                    | FleetEvent::Dropped { node, .. } => node.clone(),
                    FleetEvent::Finished(o) => o.name.clone(),
                };
                let Some(i) = r.nodes.iter().position(|n| n.name == name) else {
                    return;
                };
                match event {
                    FleetEvent::Started {
                        conditions, device, ..
                    } => {
                        r.nodes[i].total = conditions;
                        r.nodes[i].state = format!("running on {device}");
                        r.total += conditions;
                        r.log.push((
                            Severity::Info,
                            format!("[{name}] started: {conditions} condition(s) on {device}"),
                        ));
                    }
                    FleetEvent::Record { record, .. } => {
                        let retry = !record.ok && !record.last;
                        if record.ok || record.last {
                            if record.ok {
                                r.nodes[i].ok += 1;
                                r.ok += 1;
                            } else {
                                r.nodes[i].failed += 1;
                                r.failed += 1;
                            }
                            r.index = r.ok + r.failed;
                        }
                        let line = (
                            if record.ok {
                                Severity::Info
                            } else {
                                Severity::Error
                            },
                            format!(
                                "[{name}] {}: {}",
                                record.condition.id,
                                summary::record_line(&record, retry)
                            ),
                        );
                        r.log.push(line);
                    }
                    FleetEvent::Dropped {
                        reason, resuming, ..
                    } => {
                        r.nodes[i].state = format!("dropped: {reason}");
                        r.log.push((
                            Severity::Warn,
                            format!(
                                "[{name}] dropped: {reason}{}",
                                if resuming { "; trying again" } else { "" }
                            ),
                        ));
                    }
                    FleetEvent::Finished(o) => {
                        // A node that never started has no count until now.
                        if o.conditions > r.nodes[i].total {
                            r.total += o.conditions - r.nodes[i].total;
                            r.nodes[i].total = o.conditions;
                        }
                        r.nodes[i].state = match o.status {
                            NodeStatus::Complete => "complete".to_string(),
                            NodeStatus::Dropped => format!(
                                "dropped: {}",
                                o.reason.as_deref().unwrap_or("no reason given")
                            ),
                            NodeStatus::Unreachable => format!(
                                "unreachable: {}",
                                o.reason.as_deref().unwrap_or("no reason given")
                            ),
                            NodeStatus::Cancelled => "cancelled".to_string(),
                        };
                    }
                }
            }
            RunEvent::Finished {
                dir,
                outcome,
                error,
            } => {
                r.active = false;
                let line = match (&outcome, &error) {
                    (_, Some(e)) => (Severity::Error, format!("the run stopped: {e}")),
                    // A fleet run is not resumed as one: each node kept what it finished.
                    (Some(o), None) if o.interrupted && !r.nodes.is_empty() => (
                        Severity::Warn,
                        format!(
                            "cancelled after {} ok, {} failed; each node's finished conditions are in {}",
                            o.ok,
                            o.failed,
                            dir.as_ref().map(|d| d.display().to_string()).unwrap_or_default()
                        ),
                    ),
                    (Some(o), None) if o.interrupted => (
                        Severity::Warn,
                        format!(
                            "cancelled after {} ok, {} failed; R resumes it (edgeprof run --resume {})",
                            o.ok,
                            o.failed,
                            dir.as_ref().map(|d| d.display().to_string()).unwrap_or_default()
                        ),
                    ),
                    (Some(o), None) => (
                        if o.failed > 0 {
                            Severity::Warn
                        } else {
                            Severity::Info
                        },
                        format!("done: {} ok, {} failed", o.ok, o.failed),
                    ),
                    (None, None) => (Severity::Warn, "the run ended".to_string()),
                };
                announce = Some(line.clone());
                r.log.push(line);
                r.outcome = outcome;
                r.error = error.map(|e| e.message);
                if dir.is_some() {
                    r.dir = dir;
                }
            }
        }
        if let Some((severity, text)) = announce {
            self.say(severity, text);
        }
    }

    /// A telemetry sample from the monitor thread.
    pub fn monitor_sample(&mut self, sample: Sample) {
        // Paused, the Monitor tab holds still; a run's own figures go on.
        if !self.monitor_settings.paused || self.run.active {
            self.monitor.add(sample);
        }
    }

    /// The Monitor tab's keys: space pauses and resumes, `+` and `-` sample more or less often,
    /// `s` sorts the processes by CPU, memory or GPU memory.
    pub(super) fn monitor_key(&mut self, key: KeyEvent) -> Option<Command> {
        let settings = &mut self.monitor_settings;
        let at = MONITOR_INTERVALS
            .iter()
            .position(|i| *i >= settings.interval)
            .unwrap_or(MONITOR_INTERVALS.len() - 1);
        let next = match key.code {
            KeyCode::Char(' ') | KeyCode::Char('p') => {
                settings.paused = !settings.paused;
                let said = if settings.paused {
                    "monitor paused (space resumes)"
                } else {
                    "monitor resumed"
                };
                self.say(Severity::Info, said);
                return None;
            }
            KeyCode::Char('s') => {
                settings.sort = settings.sort.next();
                let said = format!("processes by {}", settings.sort.name());
                self.say(Severity::Info, said);
                return None;
            }
            KeyCode::Char('+') | KeyCode::Char('=') => at.saturating_sub(1),
            KeyCode::Char('-') | KeyCode::Char('_') => (at + 1).min(MONITOR_INTERVALS.len() - 1),
            _ => return None,
        };
        let interval = MONITOR_INTERVALS[next];
        if interval == settings.interval {
            let end = if next == 0 { "shortest" } else { "longest" };
            self.say(
                Severity::Info,
                format!(
                    "sampling every {} already, the {end}",
                    duration_text(interval)
                ),
            );
            return None;
        }
        settings.interval = interval;
        self.say(
            Severity::Info,
            format!("sampling every {}", duration_text(interval)),
        );
        Some(Command::MonitorInterval(interval))
    }
}

/// "250 ms", "2 s".
pub fn duration_text(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} s", d.as_secs_f64())
    }
}

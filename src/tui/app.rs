//! The terminal UI's state and what keys and events do to it. Pure: no terminal, no threads, no
//! files — side effects leave as [`Command`]s that the event loop carries out, so every screen
//! can be driven and snapshot-tested from key events alone.

use super::conditions::{Axis, Conditions, AXES, PARAMS};
use super::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use edgeprof::collect::proc::ProcSample;
use edgeprof::collect::telemetry::Sample;
use edgeprof::results::summary::Row;
use edgeprof::results::RunRecord;
use edgeprof::roofline::advice::Analysis;
use edgeprof::roofline::{Ceilings, Precision, Program};
use edgeprof::runner::sweep::SweepOutcome;
use std::collections::VecDeque;
use std::path::PathBuf;

/// The tabs, in order (keys 1–7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Conditions,
    Run,
    Results,
    Roofline,
    Monitor,
    Tune,
    Scorecard,
}

pub const TABS: [Tab; 7] = [
    Tab::Conditions,
    Tab::Run,
    Tab::Results,
    Tab::Roofline,
    Tab::Monitor,
    Tab::Tune,
    Tab::Scorecard,
];

impl Tab {
    pub fn title(self) -> &'static str {
        match self {
            Tab::Conditions => "Conditions",
            Tab::Run => "Run",
            Tab::Results => "Results",
            Tab::Roofline => "Roofline",
            Tab::Monitor => "Monitor",
            Tab::Tune => "Tune",
            Tab::Scorecard => "Scorecard",
        }
    }
}

/// What the event loop must do for the UI.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Run the selection (its config text; `file` resolves its relative paths).
    StartRun {
        text: String,
        file: PathBuf,
    },
    CancelRun,
    /// Tune the selection's first model with its `[tune]` settings (config text and file).
    StartTune {
        text: String,
        file: PathBuf,
    },
    SaveConfig(PathBuf),
    LoadConfig(PathBuf),
    OpenResults(PathBuf),
    /// Read the kept ceilings of the CPU or of GPU 0 (the Roofline tab's `g` shows a side first
    /// seen).
    LoadCeilings(edgeprof::roofline::Processor),
    /// Measure the ceilings (quick effort) of the CPU or of GPU 0 for the roofline.
    MeasureCeilings(edgeprof::roofline::Processor),
    /// Profile the layers of a stored condition's model for the per-layer drill-down.
    Layers {
        condition: edgeprof::runner::matrix::Condition,
        classes: usize,
    },
    /// Probe which frameworks are installed here and what they see (child interpreters).
    ProbeFrameworks,
    Quit,
}

/// How a sweep is going, as the run thread reports it.
#[derive(Debug, Clone)]
pub enum RunEvent {
    Started {
        dir: PathBuf,
        total: usize,
        done_before: usize,
        estimates: Vec<f64>,
        iterations: usize,
    },
    Attempt {
        index: usize,
        total: usize,
        condition: String,
        attempt: usize,
        attempts: usize,
    },
    Timed(usize),
    Worker(ProcSample),
    Telemetry(Box<Sample>),
    Done {
        record: Box<RunRecord>,
        retry: bool,
    },
    Cooldown(f64),
    /// A fleet run began: its directory and nodes.
    FleetStarted {
        dir: PathBuf,
        nodes: Vec<String>,
    },
    /// How one node of a fleet run is going.
    Node(edgeprof::fleet::run::FleetEvent),
    Finished {
        dir: Option<PathBuf>,
        outcome: Option<SweepOutcome>,
        error: Option<String>,
    },
}

/// How a tuning run is going, as the tune thread reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneMsg {
    Started {
        dir: PathBuf,
        title: String,
        unit: String,
        budget: usize,
        candidates: usize,
        skipped: Vec<String>,
    },
    Trial {
        n: usize,
        label: String,
        predicted: Option<(f64, f64)>,
    },
    Measured {
        n: usize,
        cost: Option<f64>,
        failure: Option<String>,
        best_cost: Option<f64>,
    },
    Confirm {
        round: usize,
        rounds: usize,
        which: &'static str,
    },
    Finished {
        result: Option<TuneResult>,
        error: Option<String>,
    },
}

/// What a finished tuning run found, for the Tune tab.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneResult {
    pub stop: String,
    pub best: Option<(String, f64)>,
    pub default: (String, Option<f64>),
    /// The re-measured medians (default, best) and their ratio.
    pub confirmed: Option<(f64, f64, f64)>,
    /// Median and mean relative error of the cost model, over that many trials.
    pub model_error: Option<(f64, f64, usize)>,
    /// The re-measurement found the default faster than the search's best: keep the default.
    pub keep_default: bool,
}

/// One trial row of the Tune tab.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneRow {
    pub n: usize,
    pub label: String,
    pub predicted: Option<(f64, f64)>,
    pub cost: Option<f64>,
    pub failure: Option<String>,
    pub best_cost: Option<f64>,
}

/// The Tune tab's state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TuneView {
    pub active: bool,
    pub dir: Option<PathBuf>,
    /// `mobilenet_v2 3x64x64 for latency`.
    pub title: String,
    pub unit: String,
    pub budget: usize,
    pub candidates: usize,
    pub skipped: Vec<String>,
    pub rows: Vec<TuneRow>,
    /// What is being measured now.
    pub current: Option<String>,
    pub result: Option<TuneResult>,
    pub error: Option<String>,
}

/// The Scorecard tab's state: the curated cards, what was probed here, the runtime phase of the
/// open results directory, joined.
#[derive(Debug, Clone, Default)]
pub struct ScorecardView {
    pub cards: Vec<edgeprof::scorecard::cards::Card>,
    /// Why the cards could not be read, or a warning about refreshed figures.
    pub warning: Option<String>,
    pub here: Option<Vec<edgeprof::scorecard::here::Here>>,
    pub probing: bool,
    pub entries: Vec<edgeprof::scorecard::Entry>,
    pub selected: usize,
    /// Lines scrolled in the selected framework's table.
    pub scroll: u16,
}

impl ScorecardView {
    /// Loads the shipped cards with any refreshed GitHub figures.
    pub fn load() -> ScorecardView {
        let (cards, warning) = match edgeprof::scorecard::github::cards_with_refreshed() {
            Ok((cards, warning)) => (cards, warning),
            Err(e) => (Vec::new(), Some(format!("{e:#}"))),
        };
        ScorecardView {
            cards,
            warning,
            ..ScorecardView::default()
        }
    }

    /// Joins the cards, the probe and the results rows again.
    pub fn rejoin(&mut self, rows: &[Row]) {
        let runtimes = edgeprof::scorecard::runtimes(rows);
        self.entries = edgeprof::scorecard::join(
            self.cards.clone(),
            self.here.clone(),
            &runtimes,
            None,
            Vec::new(),
        )
        .frameworks;
        self.selected = self.selected.min(self.entries.len().saturating_sub(1));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warn,
    Error,
}

/// A line of text the user is typing (a path to save to, load or open).
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub purpose: PromptFor,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptFor {
    SaveConfig,
    LoadConfig,
    OpenResults,
    Add(Axis),
}

impl PromptFor {
    pub fn label(self) -> &'static str {
        match self {
            PromptFor::SaveConfig => "save the selection as",
            PromptFor::LoadConfig => "load config",
            PromptFor::OpenResults => "open results directory",
            PromptFor::Add(Axis::Models) => "add an ONNX model file",
            PromptFor::Add(Axis::Inputs) => "add an input shape (CxHxW)",
            PromptFor::Add(_) => "add a value",
        }
    }
}

/// Points kept for the live charts.
pub const HISTORY: usize = 240;

fn push(series: &mut VecDeque<f64>, v: f64) {
    if series.len() == HISTORY {
        series.pop_front();
    }
    series.push_back(v);
}

/// Live figures of telemetry samples, for the Run and Monitor tabs.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub gpu_load: VecDeque<f64>,
    pub gpu_mem_mib: VecDeque<f64>,
    pub mem_used_mib: VecDeque<f64>,
    pub cpu_mean: VecDeque<f64>,
    pub power_w: VecDeque<f64>,
    /// The latest sample, whole.
    pub last: Option<Sample>,
    pub samples: usize,
}

impl Live {
    /// The machine's memory in MiB, the scale of the memory chart.
    pub fn mem_total_mib(&self) -> Option<u64> {
        let total = self.last.as_ref()?.mem_total_bytes?;
        Some(total >> 20)
    }

    pub fn add(&mut self, sample: Sample) {
        const MIB: f64 = (1u64 << 20) as f64;
        if let Some(g) = sample.gpus.first() {
            if let Some(l) = g.load_pct {
                push(&mut self.gpu_load, l);
            }
            if let Some(m) = g.mem_used_bytes {
                push(&mut self.gpu_mem_mib, m as f64 / MIB);
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
    pub index: usize,
    pub current: String,
    pub attempt: usize,
    pub attempts: usize,
    pub iterations: usize,
    pub timed: usize,
    /// Seconds since the run started (the loop advances it; tests set it).
    pub elapsed_s: f64,
    pub estimates: Vec<f64>,
    pub finished: usize,
    pub estimated_done: f64,
    pub elapsed_done: f64,
    pub current_started_s: Option<f64>,
    pub ok: usize,
    pub failed: usize,
    pub rss_mib: VecDeque<f64>,
    pub worker_cpu: VecDeque<f64>,
    pub live: Live,
    pub log: Vec<(Severity, String)>,
    pub outcome: Option<SweepOutcome>,
    pub error: Option<String>,
}

impl RunView {
    /// Share of the plan done, counting the current condition's timed iterations.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        if !self.nodes.is_empty() {
            return ((self.ok + self.failed) as f64 / self.total as f64).min(1.0);
        }
        let within = if self.iterations > 0 && self.active {
            (self.timed as f64 / self.iterations as f64).min(1.0)
        } else {
            0.0
        };
        let done = if self.active {
            self.index.saturating_sub(1) as f64 + within
        } else {
            (self.ok + self.failed) as f64
        };
        (done / self.total as f64).min(1.0)
    }

    /// Seconds left: the estimates not finished, scaled by how the finished ones compared with
    /// their estimates here, less what the current one has run.
    pub fn eta_s(&self) -> f64 {
        let in_current = self
            .current_started_s
            .map_or(0.0, |t| (self.elapsed_s - t).max(0.0));
        edgeprof::runner::matrix::eta_seconds(
            &self.estimates,
            self.finished,
            self.estimated_done,
            self.elapsed_done,
            in_current,
        )
    }
}

/// The Results tab's state: a stored sweep's rows, sorted.
#[derive(Debug, Clone, Default)]
pub struct ResultsView {
    pub dir: Option<PathBuf>,
    pub rows: Vec<Row>,
    pub error: Option<String>,
    pub sort: usize,
    pub descending: bool,
    pub selected: usize,
    /// Over the sweep's time: worker CPU %, machine CPU %, GPU %.
    pub utilisation: Vec<(String, Vec<(f64, f64)>)>,
}

/// The sortable columns of the results table.
pub const RESULT_COLUMNS: [&str; 7] = [
    "condition",
    "status",
    "mean ms",
    "p99 ms",
    "inf/s",
    "peak RSS",
    "CPU %",
];

impl ResultsView {
    pub fn sort_rows(&mut self) {
        let key = |r: &Row| -> f64 {
            match self.sort {
                2 => r.mean_ms.unwrap_or(f64::INFINITY),
                3 => r.p99_ms.unwrap_or(f64::INFINITY),
                4 => r.inferences_per_s.unwrap_or(-1.0),
                5 => r.peak_rss_bytes.map_or(-1.0, |b| b as f64),
                6 => r.cpu_mean_pct.unwrap_or(-1.0),
                _ => 0.0,
            }
        };
        let sort = self.sort;
        self.rows.sort_by(|a, b| {
            let order = match sort {
                0 => a.id.cmp(&b.id),
                1 => a.status.cmp(&b.status).then(a.id.cmp(&b.id)),
                _ => key(a).total_cmp(&key(b)),
            };
            if self.descending {
                order.reverse()
            } else {
                order
            }
        });
    }
}

/// The per-layer drill-down of one condition: its layers ranked by time share × headroom.
#[derive(Debug, Clone, Default)]
pub struct LayersView {
    pub condition: String,
    /// In rank order (the chart's A, B, C … are the first).
    pub programs: Vec<Program>,
    pub ranks: Vec<edgeprof::roofline::advice::LayerRank>,
    pub selected: usize,
}

/// Layers drawn on the chart.
pub const LAYER_MARKS: usize = 8;

/// The Roofline tab's state.
#[derive(Debug, Clone, Default)]
pub struct RooflineView {
    /// The stored conditions (for the drill-down) and the sweep's class count.
    pub conditions: Vec<edgeprof::runner::matrix::Condition>,
    pub classes: usize,
    /// The drill-down: None shows the sweep's programs; Some(Err) says why or that it is being
    /// profiled.
    pub layers: Option<Result<LayersView, String>>,
    /// This device's ceilings and where they came from, or why there are none.
    pub ceilings: Option<Result<(Ceilings, String), String>>,
    pub programs: Vec<Program>,
    pub analyses: Vec<Result<Analysis, String>>,
    pub left_out: Vec<(String, String)>,
    pub selected: usize,
    pub precision: Option<Precision>,
    /// Whose roofline is shown: the CPU's (the sweep's conditions) or GPU 0's (the GPU profiles
    /// kept in the results directory); `g` swaps in the other side.
    pub processor: edgeprof::roofline::Processor,
    pub other: RooflineSide,
}

/// The side of the Roofline tab not shown: its ceilings and points.
#[derive(Debug, Clone, Default)]
pub struct RooflineSide {
    pub ceilings: Option<Result<(Ceilings, String), String>>,
    pub programs: Vec<Program>,
    pub left_out: Vec<(String, String)>,
}

impl RooflineView {
    /// Shows the other processor's side.
    pub fn swap_side(&mut self) {
        std::mem::swap(&mut self.ceilings, &mut self.other.ceilings);
        std::mem::swap(&mut self.programs, &mut self.other.programs);
        std::mem::swap(&mut self.left_out, &mut self.other.left_out);
        self.processor = match self.processor {
            edgeprof::roofline::Processor::Cpu => edgeprof::roofline::Processor::Gpu,
            edgeprof::roofline::Processor::Gpu => edgeprof::roofline::Processor::Cpu,
        };
        self.selected = 0;
        self.layers = None;
    }

    /// A side's ceilings, shown or not.
    pub fn ceilings_of(
        &mut self,
        processor: edgeprof::roofline::Processor,
    ) -> &mut Option<Result<(Ceilings, String), String>> {
        if processor == self.processor {
            &mut self.ceilings
        } else {
            &mut self.other.ceilings
        }
    }

    /// A side's points, shown or not.
    pub fn points_of(
        &mut self,
        processor: edgeprof::roofline::Processor,
    ) -> (&mut Vec<Program>, &mut Vec<(String, String)>) {
        if processor == self.processor {
            (&mut self.programs, &mut self.left_out)
        } else {
            (&mut self.other.programs, &mut self.other.left_out)
        }
    }
}

/// The whole UI.
pub struct App {
    pub theme: Theme,
    pub ascii: bool,
    pub tab: Tab,
    pub help: bool,
    pub quit: bool,
    pub conditions: Conditions,
    /// Focused axis, whether the focus is on its items, and the cursor in each axis.
    pub axis: usize,
    pub in_items: bool,
    pub cursors: [usize; AXES.len()],
    pub run: RunView,
    pub results: ResultsView,
    pub roofline: RooflineView,
    pub monitor: Live,
    pub tune: TuneView,
    pub scorecard: ScorecardView,
    pub prompt: Option<Prompt>,
    pub status: Option<(Severity, String)>,
}

impl App {
    pub fn new(conditions: Conditions, theme: Theme, ascii: bool) -> App {
        App {
            theme,
            ascii,
            tab: Tab::Conditions,
            help: false,
            quit: false,
            conditions,
            axis: 0,
            in_items: false,
            cursors: [0; AXES.len()],
            run: RunView::default(),
            results: ResultsView::default(),
            roofline: RooflineView::default(),
            monitor: Live::default(),
            tune: TuneView::default(),
            scorecard: ScorecardView::default(),
            prompt: None,
            status: None,
        }
    }

    pub fn say(&mut self, severity: Severity, text: impl Into<String>) {
        self.status = Some((severity, text.into()));
    }

    fn current_axis(&self) -> Axis {
        AXES[self.axis]
    }

    /// What a key does; the command the loop must carry out, if any.
    pub fn key(&mut self, key: KeyEvent) -> Option<Command> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return self.quit_request(true);
        }
        if let Some(prompt) = &mut self.prompt {
            match key.code {
                KeyCode::Esc => self.prompt = None,
                KeyCode::Backspace => {
                    prompt.text.pop();
                }
                KeyCode::Char(c) => prompt.text.push(c),
                KeyCode::Enter => {
                    let p = self.prompt.take()?;
                    let path = PathBuf::from(p.text.trim());
                    if p.text.trim().is_empty() {
                        self.say(Severity::Warn, "no path given; nothing done");
                        return None;
                    }
                    return Some(match p.purpose {
                        PromptFor::Add(axis) => {
                            match self.conditions.add(axis, &p.text) {
                                Ok(what) => self.say(Severity::Info, what),
                                Err(why) => self.say(Severity::Error, why),
                            }
                            return None;
                        }
                        PromptFor::SaveConfig => Command::SaveConfig(path),
                        PromptFor::LoadConfig => Command::LoadConfig(path),
                        PromptFor::OpenResults => Command::OpenResults(path),
                    });
                }
                _ => {}
            }
            return None;
        }
        if self.help {
            if matches!(
                key.code,
                KeyCode::Esc | KeyCode::Char('?') | KeyCode::Char('q') | KeyCode::Enter
            ) {
                self.help = false;
            }
            return None;
        }
        match key.code {
            KeyCode::Char('?') => {
                self.help = true;
                return None;
            }
            KeyCode::Char('q') => return self.quit_request(false),
            KeyCode::Char('Q') => return self.quit_request(true),
            KeyCode::Tab => {
                self.tab = TABS[(self.tab_index() + 1) % TABS.len()];
                return None;
            }
            KeyCode::BackTab => {
                self.tab = TABS[(self.tab_index() + TABS.len() - 1) % TABS.len()];
                return None;
            }
            KeyCode::Char(c @ '1'..='7') => {
                self.tab = TABS[(c as usize) - ('1' as usize)];
                return None;
            }
            KeyCode::Char('o') => {
                self.prompt = Some(Prompt {
                    purpose: PromptFor::OpenResults,
                    text: self
                        .results
                        .dir
                        .as_ref()
                        .or(self.run.dir.as_ref())
                        .map(|d| d.display().to_string())
                        .unwrap_or_default(),
                });
                return None;
            }
            _ => {}
        }
        match self.tab {
            Tab::Conditions => self.conditions_key(key),
            Tab::Run => {
                if key.code == KeyCode::Char('c') && self.run.active {
                    self.say(Severity::Warn, "cancelling: the current condition stops");
                    return Some(Command::CancelRun);
                }
                None
            }
            Tab::Results => {
                let n = self.results.rows.len();
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.results.selected = self.results.selected.saturating_sub(1)
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.results.selected = (self.results.selected + 1).min(n.saturating_sub(1))
                    }
                    KeyCode::Right | KeyCode::Char('s') => {
                        self.results.sort = (self.results.sort + 1) % RESULT_COLUMNS.len();
                        self.results.sort_rows();
                    }
                    KeyCode::Left => {
                        self.results.sort =
                            (self.results.sort + RESULT_COLUMNS.len() - 1) % RESULT_COLUMNS.len();
                        self.results.sort_rows();
                    }
                    KeyCode::Char('r') => {
                        self.results.descending = !self.results.descending;
                        self.results.sort_rows();
                    }
                    _ => {}
                }
                None
            }
            Tab::Roofline if self.roofline.layers.is_some() => {
                match key.code {
                    KeyCode::Esc | KeyCode::Char('l') | KeyCode::Left => {
                        self.roofline.layers = None
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        if let Some(Ok(l)) = &mut self.roofline.layers {
                            l.selected = l.selected.saturating_sub(1);
                        }
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        if let Some(Ok(l)) = &mut self.roofline.layers {
                            l.selected = (l.selected + 1).min(l.programs.len().saturating_sub(1));
                        }
                    }
                    _ => {}
                }
                None
            }
            Tab::Roofline => {
                let n = self.roofline.programs.len();
                match key.code {
                    KeyCode::Char('l') | KeyCode::Enter | KeyCode::Right => {
                        let program = self.roofline.programs.get(self.roofline.selected)?;
                        let condition = self
                            .roofline
                            .conditions
                            .iter()
                            .find(|c| c.id == program.label)
                            .cloned()?;
                        self.roofline.layers = Some(Err(format!(
                            "profiling the layers of {} with tract …",
                            condition.id
                        )));
                        return Some(Command::Layers {
                            condition,
                            classes: self.roofline.classes,
                        });
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.roofline.selected = self.roofline.selected.saturating_sub(1)
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.roofline.selected =
                            (self.roofline.selected + 1).min(n.saturating_sub(1))
                    }
                    KeyCode::Char('m') => {
                        return Some(Command::MeasureCeilings(self.roofline.processor))
                    }
                    KeyCode::Char('g') => {
                        self.roofline.swap_side();
                        self.refresh_roofline();
                        if self.roofline.ceilings.is_none() {
                            return Some(Command::LoadCeilings(self.roofline.processor));
                        }
                    }
                    KeyCode::Char('p') => {
                        use edgeprof::roofline::Precision;
                        self.roofline.precision = Some(match self.roofline.precision {
                            None | Some(Precision::Fp32) => Precision::Fp64,
                            Some(Precision::Fp64) => Precision::Fp16,
                            Some(_) => Precision::Fp32,
                        });
                        self.refresh_roofline();
                    }
                    _ => {}
                }
                None
            }
            Tab::Monitor => None,
            Tab::Tune => self.tune_key(key),
            Tab::Scorecard => self.scorecard_key(key),
        }
    }

    fn tab_index(&self) -> usize {
        TABS.iter().position(|t| *t == self.tab).unwrap_or(0)
    }

    fn quit_request(&mut self, force: bool) -> Option<Command> {
        if self.run.active && !force {
            self.say(
                Severity::Warn,
                "a run is in progress: c on the Run tab cancels it; Q cancels it and quits",
            );
            return None;
        }
        self.quit = true;
        Some(Command::Quit)
    }

    fn conditions_key(&mut self, key: KeyEvent) -> Option<Command> {
        let axis = self.current_axis();
        let count = self.conditions.items(axis).len();
        let cursor = &mut self.cursors[self.axis];
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                if self.in_items {
                    *cursor = cursor.saturating_sub(1);
                } else {
                    self.axis = self.axis.saturating_sub(1);
                }
            }
            KeyCode::Down | KeyCode::Char('j') => {
                if self.in_items {
                    *cursor = (*cursor + 1).min(count.saturating_sub(1));
                } else {
                    self.axis = (self.axis + 1).min(AXES.len() - 1);
                }
            }
            KeyCode::Right | KeyCode::Char('l') | KeyCode::Enter if !self.in_items => {
                self.in_items = true;
            }
            KeyCode::Left | KeyCode::Char('h') | KeyCode::Esc => self.in_items = false,
            KeyCode::Char(' ') | KeyCode::Enter => {
                let index = *cursor;
                if !self.conditions.toggle(axis, index) {
                    let item = self.conditions.items(axis).into_iter().nth(index);
                    let why = match item {
                        Some(i) if i.disabled => format!("{}: {}", i.label, i.note),
                        Some(i) if i.ticked == Some(true) => {
                            format!("{} keeps at least one value", axis.title())
                        }
                        Some(i) if axis == Axis::Parameters => {
                            format!("{}: change it with + and -", i.label)
                        }
                        Some(i) => format!("{}: {}", i.label, i.note),
                        None => String::new(),
                    };
                    if !why.is_empty() {
                        self.say(Severity::Warn, why);
                    }
                }
            }
            KeyCode::Char('+') | KeyCode::Char('=') | KeyCode::Char('-')
                if axis == Axis::Parameters =>
            {
                if let Some(&p) = PARAMS.get(*cursor) {
                    self.conditions.adjust(p, key.code != KeyCode::Char('-'));
                }
            }
            KeyCode::Char('a')
                if matches!(
                    axis,
                    Axis::Models | Axis::Inputs | Axis::Batch | Axis::Threads
                ) =>
            {
                self.prompt = Some(Prompt {
                    purpose: PromptFor::Add(axis),
                    text: String::new(),
                });
            }
            KeyCode::Char('w') => {
                self.prompt = Some(Prompt {
                    purpose: PromptFor::SaveConfig,
                    text: format!("{}.toml", self.conditions.config.name),
                });
            }
            KeyCode::Char('L') => {
                self.prompt = Some(Prompt {
                    purpose: PromptFor::LoadConfig,
                    text: self.conditions.file.display().to_string(),
                });
            }
            KeyCode::Char('r') => {
                if self.run.active || self.tune.active {
                    self.say(Severity::Warn, "a run or a tuning is already in progress");
                    return None;
                }
                let plan = self.conditions.plan();
                if plan.to_run.is_empty() {
                    self.say(
                        Severity::Error,
                        format!(
                            "nothing to run: {} skipped, {} excluded",
                            plan.skipped.len(),
                            plan.excluded
                        ),
                    );
                    return None;
                }
                self.tab = Tab::Run;
                return Some(Command::StartRun {
                    text: self.conditions.to_toml(),
                    file: self.conditions.file.clone(),
                });
            }
            _ => {}
        }
        None
    }

    /// Re-analyses the roofline's programs against its ceilings.
    pub fn refresh_roofline(&mut self) {
        let rv = &mut self.roofline;
        rv.analyses = match &rv.ceilings {
            Some(Ok((c, _))) => rv
                .programs
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    if let Some(precision) = rv.precision {
                        p.precision = precision;
                    }
                    edgeprof::roofline::advice::analyse(&p, c).map_err(|e| e.to_string())
                })
                .collect(),
            _ => Vec::new(),
        };
    }

    /// The layers of the drill-down, profiled (or why not).
    pub fn layers_profiled(&mut self, condition: String, result: Result<Vec<Program>, String>) {
        let rv = &mut self.roofline;
        rv.layers = Some(result.and_then(|programs| {
            let Some(Ok((ceilings, _))) = &rv.ceilings else {
                return Err("no ceilings to rank the layers against: press m first".to_string());
            };
            let ranks = edgeprof::roofline::advice::rank_layers(&programs, ceilings);
            if ranks.is_empty() {
                return Err(format!("{condition}: no layer could be placed"));
            }
            let ordered = ranks
                .iter()
                .filter_map(|r| programs.iter().find(|p| p.label == r.label).cloned())
                .collect();
            Ok(LayersView {
                condition,
                programs: ordered,
                ranks,
                selected: 0,
            })
        }));
    }

    /// A telemetry sample from the monitor thread.
    pub fn monitor_sample(&mut self, sample: Sample) {
        self.monitor.add(sample);
    }

    fn tune_key(&mut self, key: KeyEvent) -> Option<Command> {
        match key.code {
            KeyCode::Char('t') => {
                if self.tune.active || self.run.active {
                    self.say(Severity::Warn, "a run or a tuning is already in progress");
                    return None;
                }
                self.tune = TuneView {
                    active: true,
                    title: "starting …".into(),
                    ..TuneView::default()
                };
                Some(Command::StartTune {
                    text: self.conditions.to_toml(),
                    file: self.conditions.file.clone(),
                })
            }
            KeyCode::Char('c') if self.tune.active => {
                self.say(
                    Severity::Warn,
                    "cancelling the tuning: the current trial stops",
                );
                Some(Command::CancelRun)
            }
            _ => None,
        }
    }

    fn scorecard_key(&mut self, key: KeyEvent) -> Option<Command> {
        let v = &mut self.scorecard;
        let n = v.entries.len();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                v.selected = v.selected.saturating_sub(1);
                v.scroll = 0;
            }
            KeyCode::Down | KeyCode::Char('j') => {
                v.selected = (v.selected + 1).min(n.saturating_sub(1));
                v.scroll = 0;
            }
            KeyCode::PageDown | KeyCode::Char(' ') => v.scroll = v.scroll.saturating_add(10),
            KeyCode::PageUp => v.scroll = v.scroll.saturating_sub(10),
            KeyCode::Home => v.scroll = 0,
            KeyCode::Char('p') => {
                if v.probing {
                    self.say(Severity::Warn, "already probing this device");
                    return None;
                }
                v.probing = true;
                self.say(
                    Severity::Info,
                    "probing the frameworks here (each framework's Python is asked) …",
                );
                return Some(Command::ProbeFrameworks);
            }
            _ => {}
        }
        None
    }

    /// The probe of this device finished.
    pub fn frameworks_probed(&mut self, found: Vec<edgeprof::scorecard::here::Here>) {
        let installed = found
            .iter()
            .filter(|h| {
                matches!(
                    h.state,
                    edgeprof::scorecard::here::State::BuiltIn
                        | edgeprof::scorecard::here::State::Installed
                )
            })
            .count();
        let total = found.len();
        self.scorecard.here = Some(found);
        self.scorecard.probing = false;
        self.scorecard.rejoin(&self.results.rows);
        self.say(
            Severity::Info,
            format!("{installed} of {total} frameworks are built in or installed here"),
        );
    }

    /// A tuning run's progress.
    pub fn tune_event(&mut self, msg: TuneMsg) {
        let t = &mut self.tune;
        match msg {
            TuneMsg::Started {
                dir,
                title,
                unit,
                budget,
                candidates,
                skipped,
            } => {
                *t = TuneView {
                    active: true,
                    dir: Some(dir),
                    title,
                    unit,
                    budget,
                    candidates,
                    skipped,
                    ..TuneView::default()
                };
            }
            TuneMsg::Trial {
                n,
                label,
                predicted,
            } => {
                t.current = Some(format!("trial {n}/{}: {label}", t.budget));
                t.rows.push(TuneRow {
                    n,
                    label,
                    predicted,
                    cost: None,
                    failure: None,
                    best_cost: None,
                });
            }
            TuneMsg::Measured {
                n,
                cost,
                failure,
                best_cost,
            } => {
                if let Some(row) = t.rows.iter_mut().find(|r| r.n == n) {
                    row.cost = cost;
                    row.failure = failure;
                    row.best_cost = best_cost;
                }
                t.current = None;
            }
            TuneMsg::Confirm {
                round,
                rounds,
                which,
            } => {
                t.current = Some(format!("re-measuring the {which} (round {round}/{rounds})"));
            }
            TuneMsg::Finished { result, error } => {
                t.active = false;
                t.current = None;
                t.result = result;
                if let Some(e) = &error {
                    self.status = Some((Severity::Error, format!("tuning failed: {e}")));
                } else if let Some(d) = &t.dir {
                    self.status = Some((
                        Severity::Info,
                        format!("tuning done; results in {}", d.display()),
                    ));
                }
                t.error = error;
            }
        }
    }

    /// A sweep's progress.
    pub fn run_event(&mut self, event: RunEvent) {
        let r = &mut self.run;
        match event {
            RunEvent::Started {
                dir,
                total,
                done_before,
                estimates,
                iterations,
            } => {
                *r = RunView {
                    active: true,
                    log: vec![(
                        Severity::Info,
                        format!(
                            "{} condition(s), estimated {}; results in {}",
                            estimates.len(),
                            crate::cli::render::duration(estimates.iter().sum()),
                            dir.display()
                        ),
                    )],
                    dir: Some(dir),
                    total,
                    index: done_before,
                    estimates,
                    iterations,
                    ..RunView::default()
                };
            }
            RunEvent::Attempt {
                index,
                total,
                condition,
                attempt,
                attempts,
            } => {
                r.index = index;
                r.total = total;
                r.attempt = attempt;
                r.attempts = attempts;
                r.timed = 0;
                if r.current_started_s.is_none() {
                    r.current_started_s = Some(r.elapsed_s);
                }
                if attempt > 1 {
                    r.log.push((
                        Severity::Warn,
                        format!("{condition}: attempt {attempt} of {attempts}"),
                    ));
                }
                r.current = condition;
            }
            RunEvent::Timed(n) => r.timed = n,
            RunEvent::Worker(s) => {
                if let Some(b) = s.rss_bytes {
                    push(&mut r.rss_mib, b as f64 / (1u64 << 20) as f64);
                }
                if let Some(c) = s.cpu_pct {
                    push(&mut r.worker_cpu, c);
                }
            }
            RunEvent::Telemetry(s) => r.live.add(*s),
            RunEvent::Done { record, retry } => {
                if !retry {
                    r.estimated_done += r.estimates.get(r.finished).copied().unwrap_or(0.0);
                    r.elapsed_done = r.elapsed_s;
                    r.finished += 1;
                    r.current_started_s = None;
                    if record.ok {
                        r.ok += 1;
                    } else {
                        r.failed += 1;
                    }
                }
                let id = &record.condition.id;
                let line = match (&record.stats, &record.reason) {
                    (Some(s), None) => {
                        let rs = &s.repeat_summary;
                        let mut line = format!(
                            "{id}: ok, {:.3} ms ± {:.3}, {:.1}/s",
                            rs.mean_ms, rs.mean_spread_ms, rs.inferences_per_s
                        );
                        if s.noisy {
                            line.push_str(&format!(", noisy (CV {:.1} %)", 100.0 * s.cv));
                        }
                        (Severity::Info, line)
                    }
                    (_, reason) => (
                        if retry {
                            Severity::Warn
                        } else {
                            Severity::Error
                        },
                        format!(
                            "{id}: failed{}: {}",
                            if retry { ", retrying" } else { "" },
                            reason.as_deref().unwrap_or("unknown reason")
                        ),
                    ),
                };
                r.log.push(line);
                if let Some(t) = &record.telemetry {
                    if t.throttled {
                        r.log.push((
                            Severity::Warn,
                            format!("{id}: THROTTLED ({})", t.reasons.join("; ")),
                        ));
                    }
                }
            }
            RunEvent::Cooldown(s) => r.log.push((Severity::Info, format!("cooling down {s} s"))),
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
                        let line = if record.ok {
                            let median = record
                                .stats
                                .as_ref()
                                .map(|s| format!(", median {:.3} ms", s.latency.median_ms))
                                .unwrap_or_default();
                            (
                                Severity::Info,
                                format!("[{name}] {}: ok{median}", record.condition.id),
                            )
                        } else {
                            (
                                Severity::Error,
                                format!(
                                    "[{name}] {}: failed: {}",
                                    record.condition.id,
                                    record.reason.as_deref().unwrap_or("unknown reason")
                                ),
                            )
                        };
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
                r.current_started_s = None;
                let line = match (&outcome, &error) {
                    (_, Some(e)) => (Severity::Error, format!("the run stopped: {e}")),
                    (Some(o), None) if o.interrupted => (
                        Severity::Warn,
                        format!(
                            "cancelled after {} ok, {} failed; finish with: edgeprof run --resume {}",
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
                self.status = Some(line.clone());
                r.log.push(line);
                r.outcome = outcome;
                r.error = error;
                if dir.is_some() {
                    r.dir = dir;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conditions::tests::conditions;
    use super::*;

    fn app() -> App {
        let Some(theme) = Theme::built_in("dark") else {
            panic!("no dark theme")
        };
        App::new(
            conditions("[matrix]\nmodels = [\"resnet34\"]\n"),
            theme,
            false,
        )
    }

    fn press(app: &mut App, code: KeyCode) -> Option<Command> {
        app.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    /// A node that never started sends no count first: its failure records and outcome bring
    /// their own.
    #[test]
    fn a_fleet_node_that_never_started_counts_its_failed_conditions() {
        use edgeprof::fleet::run::{FleetEvent, NodeOutcome, NodeStatus};
        let mut a = app();
        a.run_event(RunEvent::FleetStarted {
            dir: PathBuf::from("results/f-fleet"),
            nodes: vec!["gone".into()],
        });
        for model in ["resnet34", "resnet50"] {
            let condition = edgeprof::runner::matrix::Condition::new(
                "tract",
                edgeprof::config::ModelRef::Zoo(model.into()),
                edgeprof::models::InputShape::default(),
                1,
                0,
                edgeprof::config::Device::Cpu,
            );
            a.run_event(RunEvent::Node(FleetEvent::Record {
                node: "gone".into(),
                record: Box::new(edgeprof::results::RunRecord {
                    condition,
                    attempt: 1,
                    last: true,
                    started: "2026-11-30T15:00:00Z".into(),
                    ok: false,
                    reason: Some("node gone never started its share: refused".into()),
                    failure: None,
                    run: None,
                    stats: None,
                    resources: Default::default(),
                    telemetry: None,
                }),
            }));
        }
        a.run_event(RunEvent::Node(FleetEvent::Finished(NodeOutcome {
            name: "gone".into(),
            destination: Some("pi@10.0.0.9".into()),
            status: NodeStatus::Unreachable,
            reason: Some("refused".into()),
            resumed: 0,
            remote_dir: None,
            conditions: 2,
            ok: 0,
            failed: 2,
        })));
        assert_eq!((a.run.nodes[0].total, a.run.nodes[0].failed), (2, 2));
        assert_eq!((a.run.total, a.run.failed), (2, 2));
        assert_eq!(a.run.fraction(), 1.0);
    }

    #[test]
    fn tabs_help_and_quit() {
        let mut a = app();
        press(&mut a, KeyCode::Char('3'));
        assert_eq!(a.tab, Tab::Results);
        press(&mut a, KeyCode::Tab);
        assert_eq!(a.tab, Tab::Roofline);
        press(&mut a, KeyCode::BackTab);
        press(&mut a, KeyCode::BackTab);
        assert_eq!(a.tab, Tab::Run);
        press(&mut a, KeyCode::Char('?'));
        assert!(a.help);
        // Keys go to the help overlay while it is open.
        assert_eq!(press(&mut a, KeyCode::Char('q')), None);
        assert!(!a.help && !a.quit);
        a.run.active = true;
        assert_eq!(press(&mut a, KeyCode::Char('q')), None);
        assert!(a
            .status
            .as_ref()
            .is_some_and(|s| s.1.contains("in progress")));
        assert_eq!(press(&mut a, KeyCode::Char('Q')), Some(Command::Quit));
    }

    #[test]
    fn tuning_starts_from_the_tune_tab_and_cancels() {
        let mut a = app();
        assert_eq!(press(&mut a, KeyCode::Char('6')), None);
        assert_eq!(a.tab, Tab::Tune);
        let Some(Command::StartTune { text, .. }) = press(&mut a, KeyCode::Char('t')) else {
            panic!("t started no tuning")
        };
        assert!(text.contains("[matrix]"), "{text}");
        assert!(a.tune.active);
        // One at a time.
        assert_eq!(press(&mut a, KeyCode::Char('t')), None);
        assert_eq!(press(&mut a, KeyCode::Char('c')), Some(Command::CancelRun));
        a.tune_event(TuneMsg::Finished {
            result: None,
            error: Some("no candidate can run here".into()),
        });
        assert!(!a.tune.active);
        assert_eq!(a.tune.error.as_deref(), Some("no candidate can run here"));
        assert!(matches!(a.status, Some((Severity::Error, _))));
        assert_eq!(press(&mut a, KeyCode::Char('c')), None);
    }

    #[test]
    fn selecting_and_running_from_keys() {
        let mut a = app();
        // Down to "Batch sizes", into its items, tick 2.
        for _ in 0..5 {
            press(&mut a, KeyCode::Down);
        }
        assert_eq!(a.current_axis(), Axis::Batch);
        press(&mut a, KeyCode::Right);
        press(&mut a, KeyCode::Down);
        press(&mut a, KeyCode::Char(' '));
        assert_eq!(a.conditions.config.matrix.batch, vec![1, 2]);
        let Some(Command::StartRun { text, .. }) = press(&mut a, KeyCode::Char('r')) else {
            panic!("no run")
        };
        assert!(text.contains("batch = [1, 2]"), "{text}");
        assert_eq!(a.tab, Tab::Run);
    }

    #[test]
    fn prompts_produce_commands() {
        let mut a = app();
        press(&mut a, KeyCode::Char('w'));
        let Some(p) = &a.prompt else {
            panic!("no prompt")
        };
        assert_eq!(p.purpose, PromptFor::SaveConfig);
        for _ in 0..p.text.len() {
            press(&mut a, KeyCode::Backspace);
        }
        for c in "/tmp/x.toml".chars() {
            press(&mut a, KeyCode::Char(c));
        }
        assert_eq!(
            press(&mut a, KeyCode::Enter),
            Some(Command::SaveConfig(PathBuf::from("/tmp/x.toml")))
        );
        press(&mut a, KeyCode::Char('o'));
        press(&mut a, KeyCode::Esc);
        assert!(a.prompt.is_none());
    }

    #[test]
    fn eta_scales_with_how_finished_conditions_compared() {
        let r = RunView {
            estimates: vec![10.0, 10.0, 10.0],
            finished: 1,
            estimated_done: 10.0,
            elapsed_done: 20.0,
            elapsed_s: 25.0,
            current_started_s: Some(20.0),
            ..RunView::default()
        };
        // Two left at twice the estimate, less the 5 s the current one has run.
        assert!((r.eta_s() - 35.0).abs() < 1e-9);
    }
}

//! The terminal UI's state and what keys and events do to it. Pure: no terminal, no threads, no
//! files — side effects leave as [`Command`]s that the event loop carries out, so every screen
//! can be driven and snapshot-tested from key events alone.

mod results;
mod roofline;
mod run;
mod scorecard;
mod train;
mod tune;

pub use results::*;
pub use roofline::*;
pub use run::*;
pub use scorecard::*;
pub use train::{SizeState, TrainView};
pub use tune::*;

use super::conditions::{Axis, Conditions, AXES, PARAMS};
use super::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use edgeprof::collect::telemetry::Sample;
use edgeprof::results::summary;
use edgeprof::results::summary::Row;
use edgeprof::roofline::advice::Analysis;
use edgeprof::roofline::{Ceilings, Precision, Program};
use edgeprof::runner::spawn::WorkerEvent;
use edgeprof::runner::sweep::{SweepEvent, SweepOutcome};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    /// Finish an interrupted results directory, as `edgeprof run --resume DIR` does.
    ResumeRun(PathBuf),
    /// Tune the selection's first model with its `[tune]` settings (config text and file).
    StartTune {
        text: String,
        file: PathBuf,
    },
    /// Train across the selection's members with its `[train]` settings (config text and file).
    StartTrain {
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
        condition: edgeprof::protocol::Condition,
        classes: usize,
    },
    /// Probe which frameworks are installed here and what they see (child interpreters).
    ProbeFrameworks,
    /// Sample the Monitor tab's telemetry at this interval from now on.
    MonitorInterval(Duration),
    Quit,
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
    /// The Results tab's filter.
    Filter,
}

impl PromptFor {
    pub fn label(self) -> &'static str {
        match self {
            PromptFor::SaveConfig => "save the selection as",
            PromptFor::LoadConfig => "load config",
            PromptFor::OpenResults => "open results directory",
            PromptFor::Add(Axis::Models) => "add an ONNX model file",
            PromptFor::Add(Axis::Inputs) => "add an input shape (CxHxW)",
            PromptFor::Add(Axis::Outputs) => "results go under the directory",
            PromptFor::Add(_) => "add a value",
            PromptFor::Filter => "show the conditions whose name holds (empty: all)",
        }
    }
}

/// The whole UI.
pub struct App {
    pub theme: Theme,
    pub ascii: bool,
    pub tab: Tab,
    pub help: bool,
    /// The first line of the help shown (it scrolls when the screen is shorter than it).
    pub help_scroll: u16,
    pub quit: bool,
    /// The last key was q (a second one during a run cancels it and quits).
    quit_asked: bool,
    pub conditions: Conditions,
    /// Focused axis, whether the focus is on its items, and the cursor in each axis.
    pub axis: usize,
    pub in_items: bool,
    pub cursors: [usize; AXES.len()],
    pub run: RunView,
    pub results: ResultsView,
    pub roofline: RooflineView,
    pub monitor: Live,
    /// The board's performance state, as last read (by the monitor or a sweep).
    pub board_state: Option<edgeprof::collect::board::BoardState>,
    pub monitor_settings: MonitorSettings,
    pub tune: TuneView,
    pub train: TrainView,
    pub scorecard: ScorecardView,
    pub prompt: Option<Prompt>,
    pub status: Option<(Severity, String)>,
    /// When the status line was said (it clears after a while: see [`App::status_expires`]).
    pub status_at: Option<Instant>,
    /// Everything said on the status line, oldest first, with its time of day (UTC).
    pub said: std::collections::VecDeque<(String, Severity, String)>,
    /// The message log is open (M).
    pub log_open: bool,
    /// The existing file a save would replace, once the user was told so: Enter again on the
    /// same path replaces it.
    pub replace_asked: Option<PathBuf>,
}

/// Messages the log keeps.
const SAID_KEPT: usize = 300;

impl App {
    pub fn new(conditions: Conditions, theme: Theme, ascii: bool) -> App {
        App {
            theme,
            ascii,
            tab: Tab::Conditions,
            help: false,
            help_scroll: 0,
            quit: false,
            quit_asked: false,
            conditions,
            axis: 0,
            in_items: false,
            cursors: [0; AXES.len()],
            run: RunView::default(),
            results: ResultsView::default(),
            roofline: RooflineView::default(),
            monitor: Live::default(),
            board_state: None,
            monitor_settings: MonitorSettings::default(),
            tune: TuneView::default(),
            train: TrainView::default(),
            scorecard: ScorecardView::default(),
            prompt: None,
            status: None,
            status_at: None,
            said: std::collections::VecDeque::new(),
            log_open: false,
            replace_asked: None,
        }
    }

    /// Says `text` on the status line and keeps it in the message log (M).
    pub fn say(&mut self, severity: Severity, text: impl Into<String>) {
        let text = text.into();
        let now = edgeprof::text::now_rfc3339();
        let time = now.get(11..19).unwrap_or("").to_string();
        if self.said.len() == SAID_KEPT {
            self.said.pop_front();
        }
        self.said.push_back((time, severity, text.clone()));
        self.status = Some((severity, text));
        self.status_at = Some(Instant::now());
    }

    /// When the status line clears: a note after 10 s, a warning after 30 s, an error after
    /// a minute (the message log keeps them all).
    pub fn status_expires(&self) -> Option<Instant> {
        let (severity, _) = self.status.as_ref()?;
        let keep = match severity {
            Severity::Info => 10,
            Severity::Warn => 30,
            Severity::Error => 60,
        };
        Some(self.status_at? + Duration::from_secs(keep))
    }

    fn current_axis(&self) -> Axis {
        AXES[self.axis]
    }

    /// What a key does; the command the loop must carry out, if any.
    pub fn key(&mut self, key: KeyEvent) -> Option<Command> {
        // Ctrl-C is q: it quits, and during a run asks first (the terminal's usual way to
        // stop a program should not lose a run on one slip).
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            let again = std::mem::replace(&mut self.quit_asked, true);
            return self.quit_request(again);
        }
        if let Some(prompt) = &mut self.prompt {
            let control = key.modifiers.contains(KeyModifiers::CONTROL);
            match key.code {
                KeyCode::Esc => self.prompt = None,
                KeyCode::Backspace => {
                    prompt.text.pop();
                }
                // As a shell's line editing does: Ctrl-U clears the line, Ctrl-W the last word.
                KeyCode::Char('u') if control => prompt.text.clear(),
                KeyCode::Char('w') if control => {
                    let kept = prompt.text.trim_end_matches([' ', '/']).len();
                    let cut = prompt.text[..kept].rfind([' ', '/']).map_or(0, |i| i + 1);
                    prompt.text.truncate(cut);
                }
                // Other control keys type nothing.
                KeyCode::Char(_) if control => {}
                KeyCode::Char(c) => prompt.text.push(c),
                KeyCode::Enter => {
                    let p = self.prompt.take()?;
                    if p.purpose == PromptFor::Filter {
                        self.results.filter = p.text.trim().to_string();
                        self.results.refresh_rows();
                        let said = self.results.shown();
                        self.say(Severity::Info, said);
                        return None;
                    }
                    let path = PathBuf::from(p.text.trim());
                    if p.text.trim().is_empty() {
                        self.say(Severity::Warn, "no path given; nothing done");
                        return None;
                    }
                    return Some(match p.purpose {
                        PromptFor::Add(axis) => {
                            match self.conditions.add(axis, &p.text) {
                                Ok(what) => self.say(Severity::Info, what),
                                Err(why) => self.say(Severity::Error, why.0),
                            }
                            return None;
                        }
                        PromptFor::SaveConfig => {
                            let asked = self.replace_asked.take();
                            if path.exists() && asked.as_ref() != Some(&path) {
                                self.say(
                                    Severity::Warn,
                                    format!(
                                        "{} exists: Enter again replaces it, or edit the path",
                                        path.display()
                                    ),
                                );
                                self.prompt = Some(p);
                                self.replace_asked = Some(path);
                                return None;
                            }
                            Command::SaveConfig(path)
                        }
                        PromptFor::LoadConfig => Command::LoadConfig(path),
                        PromptFor::OpenResults => Command::OpenResults(path),
                        PromptFor::Filter => return None,
                    });
                }
                _ => {}
            }
            return None;
        }
        if self.log_open {
            if matches!(
                key.code,
                KeyCode::Esc | KeyCode::Char('M') | KeyCode::Char('q') | KeyCode::Enter
            ) {
                self.log_open = false;
            }
            return None;
        }
        if self.help {
            // The view keeps the scroll within the lines that are there (some keys' lines wrap).
            let most = 3 * super::view::HELP.len() as u16;
            match key.code {
                KeyCode::Esc | KeyCode::Char('?') | KeyCode::Char('q') | KeyCode::Enter => {
                    self.help = false;
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    self.help_scroll = (self.help_scroll + 1).min(most);
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    self.help_scroll = self.help_scroll.saturating_sub(1);
                }
                KeyCode::PageDown | KeyCode::Char(' ') => {
                    self.help_scroll = (self.help_scroll + 10).min(most);
                }
                KeyCode::PageUp => self.help_scroll = self.help_scroll.saturating_sub(10),
                KeyCode::Home => self.help_scroll = 0,
                KeyCode::End => self.help_scroll = most,
                _ => {}
            }
            return None;
        }
        if key.code != KeyCode::Char('q') {
            self.quit_asked = false;
        }
        match key.code {
            KeyCode::Char('?') => {
                self.help = true;
                self.help_scroll = 0;
                return None;
            }
            KeyCode::Char('M') => {
                self.log_open = true;
                return None;
            }
            // A second q in a row, while a run goes on, cancels it and quits.
            KeyCode::Char('q') => {
                let again = std::mem::replace(&mut self.quit_asked, true);
                return self.quit_request(again);
            }
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
                if key.code == KeyCode::Char('c') && self.train.active {
                    self.say(
                        Severity::Warn,
                        "cancelling: the size in progress stops on every member",
                    );
                    return Some(Command::CancelRun);
                }
                if key.code == KeyCode::Char('c') && self.run.active {
                    self.say(Severity::Warn, "cancelling: the current condition stops");
                    return Some(Command::CancelRun);
                }
                if key.code == KeyCode::Char('R') {
                    // A fleet's directory is not one sweep: its nodes resume on the nodes.
                    let dir = self.run.dir.clone().filter(|_| self.run.nodes.is_empty());
                    return self.resume_request(dir);
                }
                None
            }
            Tab::Results => {
                let n = self.results.rows.len();
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.results.selected = self.results.selected.saturating_sub(1);
                        self.results.detail_scroll = 0;
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.results.selected =
                            (self.results.selected + 1).min(n.saturating_sub(1));
                        self.results.detail_scroll = 0;
                    }
                    // The detail pane scrolls (the view keeps it within its lines).
                    KeyCode::PageDown if self.results.detail => {
                        self.results.detail_scroll = self.results.detail_scroll.saturating_add(5);
                    }
                    KeyCode::PageUp if self.results.detail => {
                        self.results.detail_scroll = self.results.detail_scroll.saturating_sub(5);
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
                    KeyCode::Char('R') => return self.resume_request(self.results.dir.clone()),
                    KeyCode::Char('b') => {
                        let said = self.results.toggle_baseline();
                        self.say(Severity::Info, said);
                    }
                    KeyCode::Char('h') => {
                        self.results.hide_skipped = !self.results.hide_skipped;
                        self.results.refresh_rows();
                        let said = self.results.shown();
                        self.say(Severity::Info, said);
                    }
                    KeyCode::Char('/') => {
                        self.prompt = Some(Prompt {
                            purpose: PromptFor::Filter,
                            text: self.results.filter.clone(),
                        });
                    }
                    KeyCode::Enter => {
                        self.results.detail = !self.results.detail;
                        self.results.detail_scroll = 0;
                    }
                    KeyCode::Esc if self.results.detail => self.results.detail = false,
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
                        if let Some(Shown::Ready(l)) = &mut self.roofline.layers {
                            l.selected = l.selected.saturating_sub(1);
                        }
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        if let Some(Shown::Ready(l)) = &mut self.roofline.layers {
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
                        self.roofline.layers = Some(Shown::Note(format!(
                            "profiling the layers of {} with tract …",
                            condition.id
                        )));
                        return Some(Command::Layers {
                            condition,
                            classes: self.roofline.classes,
                        });
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.roofline.selected = self.roofline.selected.saturating_sub(1);
                        self.roofline.advice_scroll = 0;
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.roofline.selected =
                            (self.roofline.selected + 1).min(n.saturating_sub(1));
                        self.roofline.advice_scroll = 0;
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
                        // Only the precisions these ceilings have a roof for.
                        use edgeprof::roofline::Precision;
                        let offered: Vec<Precision> = Precision::ALL
                            .into_iter()
                            .filter(|&p| match &self.roofline.ceilings {
                                Some(Shown::Ready((c, _))) => c.peak(p).is_some(),
                                _ => p == Precision::Fp32,
                            })
                            .collect();
                        let now = self.roofline.precision.unwrap_or(Precision::Fp32);
                        let at = offered.iter().position(|&p| p == now).unwrap_or(0);
                        match offered.get((at + 1) % offered.len().max(1)) {
                            Some(&next) if offered.len() > 1 => {
                                self.roofline.precision = Some(next);
                                self.roofline.advice_scroll = 0;
                                self.refresh_roofline();
                            }
                            _ => self.say(
                                Severity::Info,
                                format!("these ceilings have only the {now} roof"),
                            ),
                        }
                    }
                    KeyCode::PageDown => self.roofline.advice_scroll += 5,
                    KeyCode::PageUp => {
                        self.roofline.advice_scroll = self.roofline.advice_scroll.saturating_sub(5)
                    }
                    _ => {}
                }
                None
            }
            Tab::Monitor => self.monitor_key(key),
            Tab::Tune => self.tune_key(key),
            Tab::Scorecard => self.scorecard_key(key),
        }
    }

    fn tab_index(&self) -> usize {
        TABS.iter().position(|t| *t == self.tab).unwrap_or(0)
    }

    /// `R`: finish `dir` when it is an interrupted sweep and nothing else runs.
    fn resume_request(&mut self, dir: Option<PathBuf>) -> Option<Command> {
        if self.run.active || self.tune.active || self.train.active {
            self.say(
                Severity::Warn,
                "a run is in progress: resume once it has ended",
            );
            return None;
        }
        let Some(dir) = dir else {
            self.say(
                Severity::Warn,
                "no results directory to resume: open one with o",
            );
            return None;
        };
        match edgeprof::results::read_manifest(&dir) {
            Ok(m) if m.status == edgeprof::results::SweepStatus::Complete => {
                self.say(
                    Severity::Info,
                    format!("{} is complete: nothing to resume", dir.display()),
                );
                None
            }
            Ok(_) => {
                self.say(Severity::Info, format!("resuming {}", dir.display()));
                self.tab = Tab::Run;
                Some(Command::ResumeRun(dir))
            }
            Err(e) => {
                self.say(Severity::Error, format!("cannot resume: {e:#}"));
                None
            }
        }
    }

    fn quit_request(&mut self, force: bool) -> Option<Command> {
        if (self.run.active || self.train.active) && !force {
            self.say(
                Severity::Warn,
                "a run is in progress: q (or Ctrl-C) again, or Q, cancels it and quits; c on \
                 the Run tab cancels it",
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
            // The output directory, edited in place (`a`, Enter or space on it).
            KeyCode::Char('a') | KeyCode::Char(' ') | KeyCode::Enter
                if axis == Axis::Outputs && *cursor == 0 =>
            {
                self.prompt = Some(Prompt {
                    purpose: PromptFor::Add(axis),
                    text: self.conditions.config.output.dir.display().to_string(),
                });
            }
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
                        Some(i) if axis == Axis::Training && i.ticked.is_none() => {
                            format!("{}: {}", i.label, i.note)
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
            KeyCode::Char('+') | KeyCode::Char('=') | KeyCode::Char('-')
                if axis == Axis::Training =>
            {
                let up = key.code != KeyCode::Char('-');
                if !self.conditions.adjust_training(*cursor, up) {
                    let why = if self.conditions.config.train.is_none() {
                        "tick train first: the task is the inference matrix"
                    } else {
                        "+ and - change the model, epochs, batch and the synthetic set's size"
                    };
                    self.say(Severity::Warn, why);
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
                // Beside the file the selection came from, named after the config; replacing
                // an existing file is asked first.
                let name = format!("{}.toml", self.conditions.config.name);
                let proposed = self
                    .conditions
                    .file
                    .parent()
                    .map_or_else(|| PathBuf::from(&name), |dir| dir.join(&name));
                self.replace_asked = None;
                self.prompt = Some(Prompt {
                    purpose: PromptFor::SaveConfig,
                    text: proposed.display().to_string(),
                });
            }
            KeyCode::Char('L') => {
                self.prompt = Some(Prompt {
                    purpose: PromptFor::LoadConfig,
                    text: self.conditions.file.display().to_string(),
                });
            }
            KeyCode::Char('r') => {
                if self.run.active || self.tune.active || self.train.active {
                    self.say(Severity::Warn, "a run or a tuning is already in progress");
                    return None;
                }
                if self.conditions.config.train.is_some() {
                    self.tab = Tab::Run;
                    return Some(Command::StartTrain {
                        text: self.conditions.to_toml(),
                        file: self.conditions.file.clone(),
                    });
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
}

#[cfg(test)]
mod tests;

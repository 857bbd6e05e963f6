//! The Tune tab's state: the tuner's messages, its trials and result, and the tab's keys.

use super::*;

pub use edgeprof::tune::live::TuneEvent;

/// What a finished tuning run found, for the Tune tab.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneResult {
    pub stop: String,
    pub best: Option<(String, f64)>,
    pub default: (String, Option<f64>),
    /// The re-measured medians (default, best) and their ratio.
    pub confirmed: Option<(f64, f64, f64)>,
    /// The ratio's 95 % interval.
    pub gain_interval: Option<(f64, f64)>,
    /// The default was the best found: nothing was re-measured.
    pub default_is_best: bool,
    /// Median and mean relative error of the cost model, over that many trials.
    pub model_error: Option<(f64, f64, usize)>,
    /// The re-measurement found the default faster than the search's best: keep the default.
    pub keep_default: bool,
}

impl TuneResult {
    /// What the Tune tab shows of a finished tuning's report.
    pub fn of(report: &edgeprof::tune::live::TuneReport) -> TuneResult {
        let label = |i: usize| report.space.get(i).map(|c| c.label()).unwrap_or_default();
        TuneResult {
            stop: report.trace.stop.to_string(),
            best: report
                .best
                .zip(report.best_cost)
                .map(|(b, c)| (label(b), c)),
            default: (label(report.default), report.default_cost),
            confirmed: report
                .confirmation
                .as_ref()
                .and_then(|c| Some((c.default_median?, c.best_median?, c.gain?))),
            gain_interval: report.confirmation.as_ref().and_then(|c| c.gain_interval),
            default_is_best: report.best == Some(report.default),
            model_error: report.prediction_error,
            keep_default: report.recommended.is_some() && report.recommended != report.best,
        }
    }
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
    /// What the search starts from (the database's prior, or why there is none).
    pub prior: String,
    pub rows: Vec<TuneRow>,
    /// What is being measured now.
    pub current: Option<String>,
    pub result: Option<TuneResult>,
    pub error: Option<String>,
}

impl App {
    pub(super) fn tune_key(&mut self, key: KeyEvent) -> Option<Command> {
        match key.code {
            KeyCode::Char('t') => {
                if self.tune.active || self.run.active || self.train.active {
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

    /// A tuning run's progress.
    pub fn tune_event(&mut self, event: TuneEvent) {
        let t = &mut self.tune;
        match event {
            TuneEvent::Started {
                dir,
                title,
                unit,
                budget,
                candidates,
                skipped,
                prior,
            } => {
                *t = TuneView {
                    active: true,
                    dir: Some(dir),
                    title,
                    unit,
                    budget,
                    candidates,
                    skipped,
                    prior,
                    ..TuneView::default()
                };
            }
            TuneEvent::Trial {
                n,
                candidate,
                predicted,
                ..
            } => {
                let label = candidate.label();
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
            TuneEvent::Measured { trial } => {
                if let Some(row) = t.rows.iter_mut().find(|r| r.n == trial.n) {
                    row.cost = trial.cost;
                    row.failure = trial.failure;
                    row.best_cost = trial.best_cost;
                }
                t.current = None;
            }
            // The worker's progress inside a trial: the tab shows trials, not iterations.
            TuneEvent::Sweep(_) => {}
            TuneEvent::Confirm {
                round,
                rounds,
                which,
            } => {
                t.current = Some(format!("re-measuring the {which} (round {round}/{rounds})"));
            }
            TuneEvent::Finished { report } => {
                let (result, error) = match report {
                    Ok(report) => (Some(TuneResult::of(&report)), None),
                    Err(e) => (None, Some(e)),
                };
                t.active = false;
                t.current = None;
                t.result = result;
                let said = if let Some(e) = &error {
                    Some((Severity::Error, format!("tuning failed: {e}")))
                } else {
                    t.dir.as_ref().map(|d| {
                        (
                            Severity::Info,
                            format!("tuning done; results in {}", d.display()),
                        )
                    })
                };
                t.error = error.map(|e| e.message);
                if let Some((severity, text)) = said {
                    self.say(severity, text);
                }
            }
        }
    }
}

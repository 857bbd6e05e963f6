//! A training study's progress as the Run tab shows it: each cluster size with rank 0's epochs,
//! each member of the size in progress with its device and live CPU, memory and traffic, and
//! the study's log.

use super::*;

use edgeprof::train::study::{Outcome, TrainEvent};

/// A member of a size, as it goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberRow {
    pub name: String,
    /// Its device in a few words, once it started its rank.
    pub device: Option<String>,
    pub cpu_pct: Option<f64>,
    pub mem_used_bytes: Option<u64>,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

/// How a size went.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeState {
    Training,
    /// Trained, in this many seconds (rank 0's time to the last epoch).
    Trained(f64),
    Failed(String),
    Cancelled,
}

/// One cluster size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeRow {
    pub nodes: usize,
    pub members: Vec<MemberRow>,
    pub epochs: Vec<edgeprof::train::Epoch>,
    pub state: SizeState,
    /// Against the smallest size, once the study ended.
    pub speedup: Option<f64>,
}

/// The study the Run tab shows (after `r` with the Training pane's task ticked).
#[derive(Debug, Clone, Default)]
pub struct TrainView {
    /// The Run tab shows the study, not the sweep (the last thing started was a study).
    pub shown: bool,
    pub active: bool,
    pub dir: Option<PathBuf>,
    pub title: String,
    pub data: String,
    pub epochs: usize,
    pub sizes: Vec<SizeRow>,
    pub log: Vec<(Severity, String)>,
    pub error: Option<String>,
}

impl TrainView {
    /// The row of size `nodes` (the latest, when a size appears twice).
    fn size(&mut self, nodes: usize) -> Option<&mut SizeRow> {
        self.sizes.iter_mut().rev().find(|s| s.nodes == nodes)
    }

    /// A study begins: what was there before goes.
    pub fn begin(&mut self) {
        *self = TrainView {
            shown: true,
            active: true,
            ..TrainView::default()
        };
    }
}

impl App {
    /// A training study's progress.
    pub fn train_event(&mut self, event: TrainEvent) {
        let t = &mut self.train;
        match event {
            TrainEvent::Started { dir, data } => {
                t.log
                    .push((Severity::Info, format!("results in {}", dir.display())));
                t.dir = Some(dir);
                t.data = data;
            }
            TrainEvent::Launch {
                nodes,
                model,
                framework,
                members,
            } => {
                t.title = format!("{model} with {}", framework.name());
                t.log.push((
                    Severity::Info,
                    format!(
                        "[{nodes}] training on {} ({})",
                        members.join(", "),
                        framework.launcher()
                    ),
                ));
                t.sizes.push(SizeRow {
                    nodes,
                    members: members
                        .into_iter()
                        .map(|name| MemberRow {
                            name,
                            ..MemberRow::default()
                        })
                        .collect(),
                    epochs: Vec::new(),
                    state: SizeState::Training,
                    speedup: None,
                });
            }
            TrainEvent::NodeReady {
                nodes,
                node,
                device,
            } => {
                if let Some(m) = t
                    .size(nodes)
                    .and_then(|s| s.members.iter_mut().find(|m| m.name == node))
                {
                    m.device = Some(device);
                }
            }
            TrainEvent::NodeSample {
                nodes,
                node,
                sample,
            } => {
                if let Some(m) = t
                    .size(nodes)
                    .and_then(|s| s.members.iter_mut().find(|m| m.name == node))
                {
                    m.cpu_pct = sample.cpu_pct.or(m.cpu_pct);
                    m.mem_used_bytes = sample.mem_used_bytes.or(m.mem_used_bytes);
                    m.rx_bytes = sample.rx_bytes;
                    m.tx_bytes = sample.tx_bytes;
                }
            }
            TrainEvent::Epoch {
                nodes,
                epochs,
                epoch,
            } => {
                t.epochs = epochs;
                if let Some(s) = t.size(nodes) {
                    s.epochs.push(epoch);
                }
            }
            TrainEvent::Ended { nodes, outcome } => {
                let (state, said) = match outcome {
                    Outcome::Trained(run) => (
                        SizeState::Trained(run.wall_s),
                        (
                            Severity::Info,
                            format!("[{nodes}] trained in {:.1} s", run.wall_s),
                        ),
                    ),
                    Outcome::Failed(why) => (
                        SizeState::Failed(why.clone()),
                        (Severity::Error, format!("[{nodes}] failed: {why}")),
                    ),
                    Outcome::Cancelled => (
                        SizeState::Cancelled,
                        (Severity::Warn, format!("[{nodes}] cancelled")),
                    ),
                };
                t.log.push(said);
                if let Some(s) = t.size(nodes) {
                    s.state = state;
                }
            }
            TrainEvent::Finished { result } => {
                t.active = false;
                match result {
                    Ok(f) => {
                        for row in &f.scaling {
                            if let Some(s) = t.size(row.nodes) {
                                s.speedup = Some(row.speedup);
                            }
                        }
                        t.dir = Some(f.dir.clone());
                        t.log.push((
                            Severity::Info,
                            format!("study ended; results in {}", f.dir.display()),
                        ));
                    }
                    Err(e) => {
                        t.log.push((Severity::Error, e.message.clone()));
                        t.error = Some(e.message.clone());
                        self.say(Severity::Error, e.message);
                    }
                }
            }
        }
    }
}

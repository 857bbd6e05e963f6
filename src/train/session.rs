//! A scaling study from its start to its end: the results directory, the data (a CIFAR-10
//! directory, or a synthetic set written in its format), one launch of PyTorch's launcher per
//! node count, each rank 0 report as it comes, and at the end `scaling.json` and the charts.
//! It reports through [`TrainEvent`]s and prints nothing; a raised [`Cancel`] stops the launch
//! in progress (SIGTERM, which torchrun passes on to its ranks) and skips the rest, keeping what
//! finished.

use super::{Epoch, Report, Trained, Watchdog};
use crate::collect::stop::Cancel;
use crate::engines::env::{self, Readiness};
use crate::error::{BadInput, ChildFailed};
use anyhow::Context;
use serde::Serialize;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The data a study trains on.
#[derive(Debug, Clone)]
pub enum Data {
    /// A CIFAR-10 directory in the standard binary format.
    Dir(PathBuf),
    /// A synthetic set of this many training images (and a fifth as many test images, at least
    /// ten), written into the results directory.
    Synthetic { train: usize },
}

/// What to train, on what, and where the results go.
#[derive(Debug, Clone)]
pub struct Study {
    /// Node counts, each a launch of its own (processes on this machine, one rank each).
    pub nodes: Vec<usize>,
    pub epochs: usize,
    /// A torchvision model name.
    pub model: String,
    pub data: Data,
    /// Images per rank per step.
    pub batch: usize,
    pub lr: f64,
    pub seed: u64,
    /// The Python with torch and torchvision.
    pub python: PathBuf,
    /// The results directory is made under this one.
    pub parent: PathBuf,
    /// How long one launch may take.
    pub timeout: Duration,
}

impl Study {
    /// Why the study cannot run as asked, before anything is made.
    pub fn check(&self) -> Result<(), BadInput> {
        if self.nodes.is_empty() || self.nodes.contains(&0) {
            return Err(BadInput::from("--nodes takes counts from 1, e.g. 1,2,4"));
        }
        if self.epochs == 0 || self.batch == 0 {
            return Err(BadInput::from("--epochs and --batch must be at least 1"));
        }
        if let Data::Synthetic { train } = self.data {
            if train < 10 {
                return Err(BadInput::from("--synthetic needs at least 10 images"));
            }
        }
        Ok(())
    }
}

/// The Python that trains: the one asked for, else where `edgeprof env setup pytorch` put
/// PyTorch.
pub fn python_for_pytorch(asked: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = asked {
        return Ok(p.to_path_buf());
    }
    let Some(framework) = crate::engines::external::find("pytorch") else {
        anyhow::bail!("this build has no PyTorch harness");
    };
    match env::readiness(framework, None) {
        Readiness::Ready(i) => Ok(i.python),
        other => anyhow::bail!(BadInput(format!(
            "training needs PyTorch: {} (or give --python)",
            other.describe()
        ))),
    }
}

/// How one launch ended.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Trained(Trained),
    /// Why it failed.
    Failed(String),
    /// Stopped by a cancel.
    Cancelled,
}

/// How a study goes, as it happens.
#[derive(Debug, Clone)]
pub enum TrainEvent {
    /// The study starts in `dir`; `data` says what it trains on.
    Started { dir: PathBuf, data: String },
    /// A launch on `nodes` ranks begins.
    Launch { nodes: usize, model: String },
    /// Rank 0 finished epoch `epoch.epoch` of `epochs`.
    Epoch {
        nodes: usize,
        epochs: usize,
        epoch: Epoch,
    },
    /// A launch ended.
    Ended { nodes: usize, outcome: Outcome },
}

/// What a study left: its directory, the runs that finished, the failures and the table.
#[derive(Debug, Clone, Serialize)]
pub struct Finished {
    pub dir: PathBuf,
    pub model: String,
    pub epochs: usize,
    pub batch_per_rank: usize,
    pub lr: f64,
    pub data: PathBuf,
    pub python: PathBuf,
    pub runs: Vec<Trained>,
    pub scaling: Vec<super::Scaling>,
    /// Node counts that failed, with why.
    pub failures: Vec<(usize, String)>,
    /// Node counts not trained because the study was cancelled first (the one stopped included).
    pub cancelled: Vec<usize>,
}

/// The files a study writes into its directory, besides the data and the harness.
pub const FILES: [&str; 3] = ["scaling.json", "charts/speedup.svg", "charts/accuracy.svg"];

/// Runs `study` to its end (or to a cancel), reporting through `send`.
pub fn run(
    study: &Study,
    cancel: &Cancel,
    send: &(dyn Fn(TrainEvent) + Sync),
) -> anyhow::Result<Finished> {
    study.check()?;
    let dir = crate::session::new_dir(&study.parent, &format!("train-{}", study.model))?;
    let (data, described) = match &study.data {
        Data::Dir(d) => {
            let (n_train, n_test) = super::count_records(d)?;
            let said = format!(
                "CIFAR-10 at {}: {n_train} training, {n_test} test images",
                d.display()
            );
            (d.clone(), said)
        }
        Data::Synthetic { train } => {
            let d = dir.join("cifar-synthetic");
            let test = (train / 5).max(10);
            super::write_synthetic(&d, *train, test, study.seed)
                .with_context(|| format!("cannot write the synthetic set to {}", d.display()))?;
            let said = format!(
                "synthetic CIFAR-10 ({train} training, {test} test images, seed {}) in {}",
                study.seed,
                d.display()
            );
            (d, said)
        }
    };
    send(TrainEvent::Started {
        dir: dir.clone(),
        data: described,
    });
    let harness = dir.join("ddp.py");
    crate::results::write_atomic(&harness, super::HARNESS.as_bytes())?;
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    let mut cancelled = Vec::new();
    for &nodes in &study.nodes {
        if cancel.is_raised() {
            cancelled.push(nodes);
            continue;
        }
        send(TrainEvent::Launch {
            nodes,
            model: study.model.clone(),
        });
        let outcome = match launch(study, &harness, &data, nodes, cancel, send) {
            Ok(t) => Outcome::Trained(t),
            Err(_) if cancel.is_raised() => Outcome::Cancelled,
            Err(why) => Outcome::Failed(why.0),
        };
        match &outcome {
            Outcome::Trained(t) => runs.push(t.clone()),
            Outcome::Failed(why) => failures.push((nodes, why.clone())),
            Outcome::Cancelled => cancelled.push(nodes),
        }
        send(TrainEvent::Ended { nodes, outcome });
    }
    let finished = Finished {
        scaling: super::scaling(&runs),
        dir,
        model: study.model.clone(),
        epochs: study.epochs,
        batch_per_rank: study.batch,
        lr: study.lr,
        data,
        python: study.python.clone(),
        runs,
        failures,
        cancelled,
    };
    write(&finished)?;
    Ok(finished)
}

/// The table as `scaling.json` and the two charts, each written whole.
fn write(f: &Finished) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(f).context("cannot encode the scaling")?;
    crate::results::write_atomic(&f.dir.join(FILES[0]), (text + "\n").as_bytes())?;
    let charts = f.dir.join("charts");
    std::fs::create_dir_all(&charts)
        .with_context(|| format!("cannot create {}", charts.display()))?;
    let svg = crate::report::svg::lines_xy(
        &format!("{}: speedup over one node", f.model),
        "nodes",
        "speedup",
        &[
            ("measured", &f.points(|s| s.speedup)),
            ("ideal", &f.points(|s| s.nodes as f64)),
        ],
    )?;
    crate::results::write_atomic(&f.dir.join(FILES[1]), svg.as_bytes())?;
    let svg = crate::report::svg::lines_xy(
        &format!("{}: accuracy after {} epoch(s)", f.model, f.epochs),
        "nodes",
        "accuracy",
        &[
            ("training", &f.points(|s| s.train_acc)),
            ("validation", &f.points(|s| s.val_acc)),
        ],
    )?;
    crate::results::write_atomic(&f.dir.join(FILES[2]), svg.as_bytes())?;
    Ok(())
}

impl Finished {
    /// One figure of the table against the node count, for a chart.
    pub fn points(&self, figure: impl Fn(&super::Scaling) -> f64) -> Vec<(f64, f64)> {
        self.scaling
            .iter()
            .map(|s| (s.nodes as f64, figure(s)))
            .collect()
    }
}

/// How long the launcher's output may stay open after it ended (a rank left behind can hold it).
const OUTPUT_GRACE: Duration = Duration::from_secs(5);

/// One launch on `nodes` ranks: its epochs and wall time, or why it failed.
fn launch(
    study: &Study,
    harness: &Path,
    data: &Path,
    nodes: usize,
    cancel: &Cancel,
    send: &(dyn Fn(TrainEvent) + Sync),
) -> Result<Trained, ChildFailed> {
    let cpus = crate::collect::device::available_cores().max(1);
    let threads = (cpus / nodes).max(1);
    let mut command = Command::new(&study.python);
    command
        .args([
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes",
            "1",
        ])
        .arg("--nproc-per-node")
        .arg(nodes.to_string())
        .arg(harness)
        .arg("--data")
        .arg(data)
        .args(["--model", &study.model])
        .args(["--epochs", &study.epochs.to_string()])
        .args(["--batch", &study.batch.to_string()])
        .args(["--lr", &study.lr.to_string()])
        .args(["--seed", &study.seed.to_string()])
        .args(["--threads", &threads.to_string()])
        .env("OMP_NUM_THREADS", threads.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, gone with edgeprof: the terminal's Ctrl-C reaches edgeprof, which
    // stops the launch itself, and a launch never outlives it.
    crate::collect::child::own_group(&mut command);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", study.python.display()))?;
    // Both pipes are read on threads that hand over what they read: after the launcher ends,
    // a rank it left behind may still hold them open, and then waiting for their end would
    // never return.
    let (said_tx, said_rx) = mpsc::channel::<String>();
    if let Some(mut s) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            let _ = said_tx.send(text);
        });
    }
    // What the loop below hears: the ranks' reports, the launcher's exit (from a thread
    // blocked in waitid, which leaves it unreaped for the watchdog) and a cancel.
    enum Heard {
        Report(Report),
        Exited,
        Cancelled,
    }
    let (heard_tx, heard) = mpsc::channel::<Heard>();
    if let Some(stdout) = child.stdout.take() {
        let heard_tx = heard_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(report) = super::parse_line(&line) {
                    if heard_tx.send(Heard::Report(report)).is_err() {
                        break;
                    }
                }
            }
        });
    }
    let cancel_heard = heard_tx.clone();
    let on_cancel = cancel.on_raise(move || {
        let _ = cancel_heard.send(Heard::Cancelled);
    });
    let exit_heard = heard_tx;
    let watched = crate::collect::exit::notify(child.id(), move || {
        let _ = exit_heard.send(Heard::Exited);
    });
    if let Err(e) = watched {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("cannot watch it for its exit: {e}").into());
    }
    // The launcher and its ranks are stopped at the time limit (or a cancel); the watchdog
    // holds the child so that only it can be signalled, never whatever process later gets its
    // pid.
    let mut watchdog = Watchdog::new(child, started + study.timeout, super::STOP_GRACE);
    if cancel.is_raised() {
        watchdog.stop_now();
    }
    let mut epochs = Vec::new();
    let mut done = None;
    let mut take = |report: Report| match report {
        Report::Epoch(e) => {
            send(TrainEvent::Epoch {
                nodes,
                epochs: study.epochs,
                epoch: e.clone(),
            });
            epochs.push(e);
        }
        Report::Done(d) => done = Some(d),
    };
    // Asleep until a report, the exit, a cancel, or the watchdog's next deadline.
    let status = loop {
        watchdog.tick();
        let next = match watchdog.next_due() {
            Some(at) => heard.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => heard
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(Heard::Report(report)) => take(report),
            Ok(Heard::Cancelled) => watchdog.stop_now(),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Exited (or nothing more can be heard, which happens only after the exit was
            // told): reap it, with what it left in its group.
            Ok(Heard::Exited) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                match watchdog.reap_exited() {
                    Ok(status) => break status,
                    Err(e) => return Err(format!("cannot wait for it: {e}").into()),
                }
            }
        }
    };
    // From here the channel ends with the output: the cancel no longer speaks on it.
    drop(on_cancel);
    // What it printed last, as long as its output stays open a little (not after a cancel:
    // nothing it says then is kept).
    let grace = if cancel.is_raised() {
        Duration::ZERO
    } else {
        OUTPUT_GRACE
    };
    let until = Instant::now() + grace;
    while let Ok(h) = heard.recv_timeout(until.saturating_duration_since(Instant::now())) {
        if let Heard::Report(report) = h {
            take(report);
        }
    }
    let said = said_rx
        .recv_timeout(until.saturating_duration_since(Instant::now()))
        .unwrap_or_default();
    match done {
        Some(d) if status.success() && epochs.len() == study.epochs => Ok(Trained {
            nodes,
            wall_s: d.wall_s,
            epochs,
        }),
        _ => {
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .trim()
                .to_string();
            let why = if cancel.is_raised() {
                "cancelled".to_string()
            } else if watchdog.timed_out() {
                format!("it did not finish within {} s", study.timeout.as_secs())
            } else {
                format!("the launcher ended ({status}): {last}")
            };
            Err(why.into())
        }
    }
}

//! Distributed-training scaling: CIFAR-10 in its standard binary format (and a
//! synthetic set written in it), the lines the training harness prints, and the scaling figures
//! against one node: speedup, accuracy-improvement and validation-accuracy-improvement ratios;
//! and the watchdog that holds a launch to its time limit.

use crate::collect::child::Started;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

pub mod cluster;
mod error;
pub mod study;

pub use error::TrainError;

/// The harness that PyTorch's launcher starts once per rank.
pub const HARNESS: &str = include_str!("ddp.py");
/// The harness each TensorFlow worker runs (MultiWorkerMirroredStrategy, `TF_CONFIG`).
pub const TF_HARNESS: &str = include_str!("tf_mwms.py");

/// One CIFAR-10 record: the label byte, then 32×32 red, green and blue planes.
pub const RECORD: usize = 1 + 3 * 32 * 32;
/// The standard files: five training batches and one test batch.
pub const TRAIN_FILES: [&str; 5] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
];
pub const TEST_FILE: &str = "test_batch.bin";
pub const CLASSES: [&str; 10] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];

/// One synthetic image of class `label`: a class colour, a class stripe orientation and
/// frequency, and noise, so that a CNN can learn the classes but not at once.
fn synthetic_image(label: u8, rng: &mut impl Rng, out: &mut Vec<u8>) {
    let c = f64::from(label);
    let base = [
        0.5 + 0.12 * (c * 0.7).sin(),
        0.5 + 0.12 * (c * 1.3 + 1.0).sin(),
        0.5 + 0.12 * (c * 2.1 + 2.0).sin(),
    ];
    let angle = c * std::f64::consts::PI / 10.0;
    let freq = 0.25 + 0.05 * f64::from(label % 4);
    let phase: f64 = rng.random_range(0.0..std::f64::consts::TAU);
    for (plane, level) in base.iter().enumerate() {
        for y in 0..32 {
            for x in 0..32 {
                let along = f64::from(x) * angle.cos() + f64::from(y) * angle.sin();
                let stripe = 0.15 * (along * freq + phase + plane as f64).sin();
                let noise: f64 = rng.random_range(-0.6..0.6);
                let v = (level + stripe + noise).clamp(0.0, 1.0);
                out.push((v * 255.0).round() as u8);
            }
        }
    }
}

/// Writes a synthetic CIFAR-10 set in the standard binary format under `dir`: `train` records
/// spread over the five training files, `test` in the test file, labels balanced.
pub fn write_synthetic(dir: &Path, train: usize, test: usize, seed: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut file = |name: &str, count: usize, offset: usize| -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(count * RECORD);
        for i in 0..count {
            let label = ((i + offset) % 10) as u8;
            bytes.push(label);
            synthetic_image(label, &mut rng, &mut bytes);
        }
        std::fs::write(dir.join(name), bytes)
    };
    let per_file = train.div_ceil(TRAIN_FILES.len());
    let mut left = train;
    for (k, name) in TRAIN_FILES.iter().enumerate() {
        let count = per_file.min(left);
        file(name, count, k * per_file)?;
        left -= count;
    }
    file(TEST_FILE, test, 0)?;
    std::fs::write(dir.join("batches.meta.txt"), CLASSES.join("\n") + "\n")
}

/// Counts the records of a CIFAR-10 directory (training, test), checking the format.
pub fn count_records(dir: &Path) -> Result<(usize, usize), crate::error::BadInput> {
    let count = |name: &str| -> Result<usize, String> {
        let path = dir.join(name);
        let len = std::fs::metadata(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len() as usize;
        if !len.is_multiple_of(RECORD) {
            return Err(format!(
                "{} is {len} bytes, not a whole number of {RECORD}-byte CIFAR-10 records",
                path.display()
            ));
        }
        Ok(len / RECORD)
    };
    let mut train = 0;
    for name in TRAIN_FILES {
        train += count(name)?;
    }
    Ok((train, count(TEST_FILE)?))
}

/// One epoch as rank 0 reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Epoch {
    pub epoch: usize,
    pub train_acc: f64,
    pub loss: f64,
    pub val_acc: f64,
    pub elapsed_s: f64,
}

/// The end of a training run as rank 0 reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {
    pub done: bool,
    pub wall_s: f64,
    pub world: usize,
    /// The framework and its version (older harnesses said `torch`).
    #[serde(alias = "torch")]
    pub framework: String,
}

/// A line of the harness's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Epoch(Epoch),
    Done(Done),
}

/// Reads one line of the harness's stdout; None for anything else (framework chatter).
pub fn parse_line(line: &str) -> Option<Report> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    if let Ok(done) = serde_json::from_str::<Done>(line) {
        return Some(Report::Done(done));
    }
    serde_json::from_str::<Epoch>(line).ok().map(Report::Epoch)
}

/// One node count's training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trained {
    pub nodes: usize,
    /// Time to the last epoch, as rank 0 measured it (process start-up not included).
    pub wall_s: f64,
    pub epochs: Vec<Epoch>,
    /// The framework and its version, as rank 0 said it.
    #[serde(default)]
    pub framework: Option<String>,
    /// The most bytes one member received and sent while it trained (over the interfaces
    /// between the members).
    #[serde(default)]
    pub busiest_link_bytes: u64,
}

impl Trained {
    pub fn train_acc(&self) -> f64 {
        self.epochs.last().map_or(0.0, |e| e.train_acc)
    }
    pub fn val_acc(&self) -> f64 {
        self.epochs.last().map_or(0.0, |e| e.val_acc)
    }
}

/// A row of the scaling table: the figures and their ratios to one node's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    pub nodes: usize,
    pub wall_s: f64,
    pub train_acc: f64,
    pub val_acc: f64,
    /// T(1) / T(n).
    pub speedup: f64,
    /// Speedup / n.
    pub efficiency: f64,
    /// acc(n) / acc(1), training and validation.
    pub acc_imp: f64,
    pub val_acc_imp: f64,
    /// The busiest member's traffic over the training, in MB/s: near the link's speed, the
    /// link and not the cores limits the speedup.
    pub link_mb_s: f64,
}

/// The scaling table against the run with the fewest nodes (one node, normally).
pub fn scaling(runs: &[Trained]) -> Vec<Scaling> {
    let Some(base) = runs.iter().min_by_key(|r| r.nodes) else {
        return Vec::new();
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let mut out: Vec<Scaling> = runs
        .iter()
        .map(|r| {
            let speedup = ratio(base.wall_s, r.wall_s) * base.nodes as f64;
            Scaling {
                nodes: r.nodes,
                wall_s: r.wall_s,
                train_acc: r.train_acc(),
                val_acc: r.val_acc(),
                speedup,
                efficiency: speedup / r.nodes as f64,
                acc_imp: ratio(r.train_acc(), base.train_acc()),
                val_acc_imp: ratio(r.val_acc(), base.val_acc()),
                link_mb_s: ratio(r.busiest_link_bytes as f64 / 1e6, r.wall_s),
            }
        })
        .collect();
    out.sort_by_key(|s| s.nodes);
    out
}

/// How long the launcher has to stop its ranks after being asked to at the time limit, before
/// it is killed: torchrun itself gives its ranks 30 s after passing the signal on.
pub const STOP_GRACE: Duration = Duration::from_secs(35);

/// How long the launcher has to stop its ranks after a cancel before it is killed.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// The launcher, held until it is reaped, with its time limit. It is signalled only through
/// this handle and only before it is reaped: until then its pid stays its own (a process ended
/// but not reaped still holds it), whereas a pid number kept past the reaping may by then name
/// any new process. Its owner hears of its exit from the supervisor ([`Heard::Exited`]) and
/// wakes for [`Watchdog::next_due`]; nothing polls.
///
/// [`Heard::Exited`]: crate::collect::child::Heard::Exited
pub struct Watchdog {
    child: Started,
    deadline: Instant,
    grace: Duration,
    /// When it was asked to stop (SIGTERM).
    stopped: Option<Instant>,
    killed: bool,
    status: Option<ExitStatus>,
}

impl Watchdog {
    /// Watches `child`, which may run until `deadline`, then has `grace` to stop.
    pub fn new(child: Started, deadline: Instant, grace: Duration) -> Self {
        Watchdog {
            child,
            deadline,
            grace,
            stopped: None,
            killed: false,
            status: None,
        }
    }

    /// Past the deadline, asks the child to stop (SIGTERM, which torchrun passes on to its
    /// ranks), and kills it and its group `grace` later; reaps nothing.
    pub fn tick(&mut self) {
        if self.status.is_some() {
            return;
        }
        let now = Instant::now();
        match self.stopped {
            None if now >= self.deadline => {
                self.child.signal(nix::sys::signal::Signal::SIGTERM);
                self.stopped = Some(now);
            }
            Some(at) if !self.killed && now >= at + self.grace => {
                // The launcher's group too: ranks it left behind would hold its output open.
                self.child.signal_group(nix::sys::signal::Signal::SIGKILL);
                self.killed = true;
            }
            _ => {}
        }
    }

    /// Reaps the child once it has exited, killing first what is left in its process group:
    /// ranks it left behind would hold its output open and outlive the study.
    pub fn reap_exited(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.child.signal_group(nix::sys::signal::Signal::SIGKILL);
        let status = self.child.reap()?.status;
        self.status = Some(status);
        Ok(status)
    }

    /// When [`Watchdog::tick`] next has something to do (the time limit, or the end of the
    /// grace); None once the child has ended or been killed.
    pub fn next_due(&self) -> Option<Instant> {
        match (self.status, self.stopped) {
            (Some(_), _) => None,
            (None, None) => Some(self.deadline),
            (None, Some(at)) if !self.killed => Some(at + self.grace),
            (None, Some(_)) => None,
        }
    }

    /// The last lines of its stderr, once the stream has ended or `wait` has passed.
    pub fn stderr(&self, wait: Duration) -> String {
        self.child.stderr(wait)
    }

    /// Asks the child to stop now (a cancel), with at most [`CANCEL_GRACE`] before it is
    /// killed.
    pub fn stop_now(&mut self) {
        if self.stopped.is_none() {
            self.deadline = Instant::now();
            self.grace = self.grace.min(CANCEL_GRACE);
        }
    }

    /// Whether the time limit was reached (the child was asked to stop).
    pub fn timed_out(&self) -> bool {
        self.stopped.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Watches `script` in sh, once it has said its first line (so its traps are set), as the
    /// launcher's loop does: woken by its exit or the watchdog's next due time.
    fn watch(script: &str, deadline_in: Duration, grace: Duration) -> (ExitStatus, bool) {
        use crate::collect::child::{Heard, Input, Output, Spec};
        let (tx, heard) = std::sync::mpsc::channel::<Heard>();
        let mut spec = Spec::new("sh");
        spec.args(["-c", script]);
        // stdin piped and kept open: `read` waits on it until signalled.
        let mut child = match spec.start(Input::Piped, Output::Lines { max: 100 }, &tx, None) {
            Ok(c) => c,
            Err(e) => panic!("cannot start sh: {e}"),
        };
        let _stdin = child.take_stdin();
        // Exit is heard on a thread of its own: it may come before the line.
        let mut exited = false;
        loop {
            match heard.recv_timeout(Duration::from_secs(20)) {
                Ok(Heard::Line(line)) if line == "ready" => break,
                Ok(Heard::Exited) => exited = true,
                other => panic!("expected the line \"ready\", heard {other:?}"),
            }
        }
        let mut w = Watchdog::new(child, Instant::now() + deadline_in, grace);
        let start = Instant::now();
        loop {
            w.tick();
            let due = w.next_due().unwrap_or(start + Duration::from_secs(20));
            let next = if exited {
                Ok(Heard::Exited)
            } else {
                heard.recv_timeout(due.saturating_duration_since(Instant::now()))
            };
            match next {
                Ok(Heard::Exited) => match w.reap_exited() {
                    Ok(status) => return (status, w.timed_out()),
                    Err(e) => panic!("{e}"),
                },
                Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(e) => panic!("{e}"),
            }
            assert!(start.elapsed() < Duration::from_secs(20), "never ended");
        }
    }

    #[test]
    fn the_watchdog_leaves_a_launcher_that_ends_in_time_alone() {
        let (status, timed_out) = watch(
            "echo ready; exit 3",
            Duration::from_secs(10),
            Duration::from_secs(1),
        );
        assert_eq!(status.code(), Some(3));
        assert!(!timed_out);
    }

    #[test]
    fn the_watchdog_asks_a_late_launcher_to_stop_then_kills_one_that_does_not() {
        use std::os::unix::process::ExitStatusExt;
        // `read` waits on stdin, which stays open: it runs until signalled.
        let (status, timed_out) = watch(
            "echo ready; read x",
            Duration::ZERO,
            Duration::from_secs(10),
        );
        assert_eq!(status.signal(), Some(15));
        assert!(timed_out);
        let (status, timed_out) = watch(
            "trap '' TERM; echo ready; read x",
            Duration::ZERO,
            Duration::from_millis(300),
        );
        assert_eq!(status.signal(), Some(9));
        assert!(timed_out);
    }

    #[test]
    fn the_synthetic_set_is_in_the_standard_format_with_balanced_labels() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        write_synthetic(dir.path(), 203, 50, 7)?;
        assert_eq!(count_records(dir.path()), Ok((203, 50)));
        let bytes = std::fs::read(dir.path().join(TEST_FILE))?;
        let labels: Vec<u8> = bytes.chunks(RECORD).map(|r| r[0]).collect();
        for class in 0..10u8 {
            assert_eq!(labels.iter().filter(|&&l| l == class).count(), 5);
        }
        // Same seed, same files.
        let again = tempfile::tempdir()?;
        write_synthetic(again.path(), 203, 50, 7)?;
        assert_eq!(
            std::fs::read(dir.path().join("data_batch_3.bin"))?,
            std::fs::read(again.path().join("data_batch_3.bin"))?
        );
        std::fs::write(dir.path().join(TEST_FILE), [0u8; 100])?;
        assert!(count_records(dir.path()).is_err_and(|e| e.contains("not a whole number")));
        Ok(())
    }

    #[test]
    fn classes_differ_on_average_so_there_is_something_to_learn() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mean = |label: u8, rng: &mut rand_chacha::ChaCha8Rng| {
            let mut v = Vec::new();
            synthetic_image(label, rng, &mut v);
            let red: f64 = v[..1024].iter().map(|&b| f64::from(b)).sum::<f64>() / 1024.0;
            red
        };
        let a = mean(0, &mut rng);
        let b = mean(3, &mut rng);
        assert!((a - b).abs() > 10.0, "{a} {b}");
    }

    #[test]
    fn harness_lines_parse_and_chatter_is_skipped() {
        assert_eq!(
            parse_line(
                r#"{"epoch": 2, "train_acc": 0.5, "loss": 1.2, "val_acc": 0.4, "elapsed_s": 3.0}"#
            ),
            Some(Report::Epoch(Epoch {
                epoch: 2,
                train_acc: 0.5,
                loss: 1.2,
                val_acc: 0.4,
                elapsed_s: 3.0
            }))
        );
        assert!(matches!(
            parse_line(r#"{"done": true, "wall_s": 9.5, "world": 4, "torch": "2.5.0"}"#),
            Some(Report::Done(Done { world: 4, .. }))
        ));
        assert_eq!(parse_line("[W socket.cpp] some warning"), None);
        assert_eq!(parse_line("{broken"), None);
    }

    #[test]
    fn ratios_are_against_one_node() {
        let run = |nodes, wall_s, acc, val| Trained {
            nodes,
            wall_s,
            framework: None,
            busiest_link_bytes: 1_000_000 * nodes as u64,
            epochs: vec![Epoch {
                epoch: 1,
                train_acc: acc,
                loss: 1.0,
                val_acc: val,
                elapsed_s: wall_s,
            }],
        };
        let table = scaling(&[
            run(4, 25.0, 0.45, 0.36),
            run(1, 80.0, 0.5, 0.4),
            run(2, 44.0, 0.5, 0.42),
        ]);
        assert_eq!(table.iter().map(|s| s.nodes).collect::<Vec<_>>(), [1, 2, 4]);
        assert_eq!(table[0].speedup, 1.0);
        assert!((table[2].speedup - 3.2).abs() < 1e-12);
        assert!((table[2].efficiency - 0.8).abs() < 1e-12);
        assert!((table[2].acc_imp - 0.9).abs() < 1e-12);
        assert!((table[1].val_acc_imp - 1.05).abs() < 1e-12);
        assert!(scaling(&[]).is_empty());
    }
}

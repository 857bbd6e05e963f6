//! Training across nodes, node side. For one cluster size the controller sends every node a
//! [`RankSpec`] (on the stdin of `edgeprof train-rank`, over SSH or as a local child); the node
//! writes the harness and the data into its working directory, starts its framework's launcher
//! for its rank — PyTorch's torchrun in multi-node mode with a c10d rendezvous on the first
//! node, or TensorFlow's MultiWorkerMirroredStrategy with this worker's `TF_CONFIG` — samples
//! its CPU, memory and network while it trains, and answers in [`NodeLine`]s on stdout. The
//! rest of stdin is the control channel: when it ends (the controller stopped the size, or went
//! away), the launcher and its ranks are stopped, so nothing is left running on the node.

use super::{Report, Watchdog};
use crate::collect::child;
use crate::collect::device::Fingerprint;
use crate::collect::telemetry::net::{self, Interface};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The distributed-training frameworks, each with its own launcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    /// DistributedDataParallel over gloo, started by torchrun.
    Pytorch,
    /// MultiWorkerMirroredStrategy, one worker per node, each told the cluster by `TF_CONFIG`.
    Tensorflow,
}

impl Framework {
    pub fn name(self) -> &'static str {
        match self {
            Framework::Pytorch => "pytorch",
            Framework::Tensorflow => "tensorflow",
        }
    }

    /// The launcher and its transport, as the progress lines say it.
    pub fn launcher(self) -> &'static str {
        match self {
            Framework::Pytorch => "torchrun (DDP over gloo)",
            Framework::Tensorflow => "TF_CONFIG (MultiWorkerMirroredStrategy)",
        }
    }

    /// The harness each rank runs, and its file name.
    pub fn harness(self) -> (&'static str, &'static str) {
        match self {
            Framework::Pytorch => ("ddp.py", super::HARNESS),
            Framework::Tensorflow => ("tf_mwms.py", super::TF_HARNESS),
        }
    }
}

impl std::str::FromStr for Framework {
    type Err = crate::error::BadInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "pytorch" | "torch" => Ok(Framework::Pytorch),
            "tensorflow" | "tf" => Ok(Framework::Tensorflow),
            other => Err(crate::error::BadInput(format!(
                "no training framework {other:?}: pytorch or tensorflow"
            ))),
        }
    }
}

/// Where a node finds the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataSpec {
    /// A CIFAR-10 directory in the standard binary format, at this path on the node.
    Dir(PathBuf),
    /// The synthetic set, written by the node itself (the same seed gives every node the same
    /// files).
    Synthetic {
        train: usize,
        test: usize,
        seed: u64,
    },
}

/// What one node does for one cluster size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSpec {
    /// The study's name: its files on the node go under `WORKDIR/train/STUDY`, and torchrun's
    /// rendezvous id is made from it and the size.
    pub study: String,
    pub framework: Framework,
    pub model: String,
    pub epochs: usize,
    /// Images per rank per step.
    pub batch: usize,
    pub lr: f64,
    pub seed: u64,
    pub data: DataSpec,
    /// Nodes in this cluster, and this node's rank among them (0: the first, which hosts the
    /// rendezvous).
    pub world: usize,
    pub rank: usize,
    /// Every rank's `address:port`, in rank order: rank 0's is torchrun's rendezvous endpoint,
    /// and all of them are TensorFlow's cluster.
    pub endpoints: Vec<String>,
    /// Threads per rank (0: the cores this node offers edgeprof).
    pub threads: usize,
    /// The Python with the framework (None: where `edgeprof env setup` put it on the node).
    pub python: Option<PathBuf>,
    /// How long the node's launch may take, in seconds.
    pub timeout_s: u64,
    /// Milliseconds between the node's CPU, memory and network samples.
    pub sample_ms: u64,
}

/// The launcher a node starts for its rank: program, arguments and environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(String, String)>,
}

impl RankSpec {
    /// Why the spec cannot be carried out, before anything starts.
    pub fn check(&self) -> Result<(), crate::error::BadInput> {
        if self.world == 0 || self.rank >= self.world || self.endpoints.len() != self.world {
            return Err(crate::error::BadInput(format!(
                "rank {} of {} with {} endpoint(s) is not a cluster",
                self.rank,
                self.world,
                self.endpoints.len()
            )));
        }
        if self.epochs == 0 || self.batch == 0 {
            return Err(crate::error::BadInput::from(
                "epochs and batch must be at least 1",
            ));
        }
        Ok(())
    }

    /// The launch for this rank of `harness` on the data at `data`, with `python`.
    pub fn launch(&self, python: &Path, harness: &Path, data: &Path, threads: usize) -> Launch {
        let mut args: Vec<OsString> = Vec::new();
        let mut env = vec![("OMP_NUM_THREADS".to_string(), threads.to_string())];
        match self.framework {
            Framework::Pytorch => {
                // c10d rendezvous on rank 0's endpoint; only the first node hosts its store
                // (is_host), so nodes that share an address (one machine, loopback) do not all
                // try to.
                let host = if self.rank == 0 { "1" } else { "0" };
                for a in [
                    "-m",
                    "torch.distributed.run",
                    "--nnodes",
                    &self.world.to_string(),
                    "--node-rank",
                    &self.rank.to_string(),
                    "--nproc-per-node",
                    "1",
                    "--rdzv-backend",
                    "c10d",
                    "--rdzv-endpoint",
                    &self.endpoints[0],
                    "--rdzv-id",
                    &format!("{}-{}", self.study, self.world),
                    "--rdzv-conf",
                    &format!("is_host={host}"),
                ] {
                    args.push(a.into());
                }
            }
            Framework::Tensorflow => {
                let config = serde_json::json!({
                    "cluster": { "worker": self.endpoints },
                    "task": { "type": "worker", "index": self.rank },
                });
                env.push(("TF_CONFIG".to_string(), config.to_string()));
                env.push(("TF_CPP_MIN_LOG_LEVEL".to_string(), "2".to_string()));
            }
        }
        args.push(harness.into());
        args.push("--data".into());
        args.push(data.into());
        for (flag, value) in [
            ("--model", self.model.clone()),
            ("--epochs", self.epochs.to_string()),
            ("--batch", self.batch.to_string()),
            ("--lr", self.lr.to_string()),
            ("--seed", self.seed.to_string()),
            ("--threads", threads.to_string()),
        ] {
            args.push(flag.into());
            args.push(value.into());
        }
        Launch {
            program: python.to_path_buf(),
            args,
            env,
        }
    }
}

/// One of a node's samples while it trains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    /// Seconds since the node started its launcher.
    pub t_s: f64,
    /// Mean load of its cores, in %.
    pub cpu_pct: Option<f64>,
    pub mem_used_bytes: Option<u64>,
    /// Bytes received and sent since the launcher started, over the interfaces that count (see
    /// [`net::counted`]).
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

/// How a node's rank ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeEnd {
    /// The launcher ended successfully.
    pub ok: bool,
    /// Why not, in a sentence: the launcher's last words, the time limit, or a stop.
    pub reason: Option<String>,
    pub wall_s: f64,
    pub samples: Vec<NodeSample>,
    /// Per interface, bytes received and sent while it trained.
    pub interfaces: Vec<Interface>,
}

/// A line a node sends its controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeLine {
    /// The node starts its launcher: its device, and the Python it trains with.
    Started {
        fingerprint: Box<Fingerprint>,
        python: PathBuf,
        threads: usize,
    },
    /// A line the harness printed (rank 0's epochs and its end).
    Epoch(super::Epoch),
    Done(super::Done),
    Sample(NodeSample),
    /// The node's rank ended (always its last line).
    Ended(NodeEnd),
    /// The node could not start its rank (always its last line).
    Failed {
        reason: String,
    },
}

/// How long the launcher has to stop its rank after the control channel ends.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// `edgeprof train-rank`: reads the spec (the first line of `control`), carries it out under
/// `workdir`, and writes [`NodeLine`]s to `out`. Err only when `out` cannot be written.
pub fn serve(
    mut control: impl BufRead + Send + 'static,
    workdir: &Path,
    out: &mut impl Write,
) -> crate::error::Result<()> {
    let mut say = |line: &NodeLine| -> crate::error::Result<()> {
        let text = serde_json::to_string(line)?;
        writeln!(out, "{text}")?;
        out.flush()?;
        Ok(())
    };
    let mut first = String::new();
    let spec = match control.read_line(&mut first) {
        Ok(0) => None,
        Ok(_) => serde_json::from_str::<RankSpec>(&first).ok(),
        Err(_) => None,
    };
    let Some(spec) = spec else {
        return say(&NodeLine::Failed {
            reason: "no training spec on stdin (edgeprof train-rank is started by edgeprof train)"
                .to_string(),
        });
    };
    match prepare(&spec, workdir) {
        Ok(ready) => rank(&spec, ready, control, &mut say),
        Err(e) => say(&NodeLine::Failed {
            reason: format!("{e:#}"),
        }),
    }
}

/// What a node has set up for its rank.
struct Ready {
    python: PathBuf,
    harness: PathBuf,
    data: PathBuf,
    threads: usize,
}

/// Writes the harness and the data, and finds the Python.
fn prepare(spec: &RankSpec, workdir: &Path) -> crate::error::Result<Ready> {
    use crate::error::Context;
    spec.check()?;
    let dir = workdir
        .join("train")
        .join(crate::config::node_name::dir_name(&spec.study));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (file, text) = spec.framework.harness();
    let harness = dir.join(file);
    crate::results::write_atomic(&harness, text.as_bytes())?;
    let data = match &spec.data {
        DataSpec::Dir(d) => {
            super::count_records(d)?;
            d.clone()
        }
        DataSpec::Synthetic { train, test, seed } => {
            let d = dir.join("cifar-synthetic");
            // The same set for every size: written once, whole (made beside, then renamed).
            if super::count_records(&d) != Ok((*train, *test)) {
                let part = dir.join(format!("cifar-synthetic.part{}", std::process::id()));
                super::write_synthetic(&part, *train, *test, *seed).with_context(|| {
                    format!("cannot write the synthetic set to {}", part.display())
                })?;
                let _ = std::fs::remove_dir_all(&d);
                std::fs::rename(&part, &d)
                    .with_context(|| format!("cannot move the synthetic set to {}", d.display()))?;
            }
            d
        }
    };
    let python = match &spec.python {
        Some(p) => p.clone(),
        None => python_for(spec.framework)?,
    };
    let threads = if spec.threads > 0 {
        spec.threads
    } else {
        crate::collect::device::available_cores().max(1)
    };
    Ok(Ready {
        python,
        harness,
        data,
        threads,
    })
}

/// The Python where `edgeprof env setup` put `framework` on this machine.
pub fn python_for(framework: Framework) -> Result<PathBuf, super::TrainError> {
    use crate::engines::env::{self, Readiness};
    let Some(found) = crate::engines::external::find(framework.name()) else {
        return Err(super::TrainError::NoHarness(framework.name().to_string()));
    };
    match env::readiness(found, None) {
        Readiness::Ready(i) => Ok(i.python),
        other => Err(super::TrainError::NotSetUp {
            framework: framework.name().to_string(),
            why: other.describe(),
        }),
    }
}

/// What the rank's loop hears: the launcher (through its supervisor) and the control channel.
enum Heard {
    Launcher(child::Heard),
    ControlEnded,
}

impl From<child::Heard> for Heard {
    fn from(h: child::Heard) -> Heard {
        Heard::Launcher(h)
    }
}

/// Longest line of the launcher's output read, in bytes: its reports are short.
const MAX_REPORT_LINE: usize = 1 << 20;

/// Passes on what a line of the launcher's output reports (an epoch, the end), if anything.
fn report(line: &str, said: &mut impl FnMut(&NodeLine)) {
    match super::parse_line(line) {
        Some(Report::Epoch(e)) => said(&NodeLine::Epoch(e)),
        Some(Report::Done(d)) => said(&NodeLine::Done(d)),
        None => {}
    }
}

/// Starts the launcher and reports until it ends or is stopped.
fn rank(
    spec: &RankSpec,
    ready: Ready,
    mut control: impl BufRead + Send + 'static,
    say: &mut impl FnMut(&NodeLine) -> crate::error::Result<()>,
) -> crate::error::Result<()> {
    let launch = spec.launch(&ready.python, &ready.harness, &ready.data, ready.threads);
    let mut command = child::Spec::new(&launch.program);
    command
        .args(&launch.args)
        .envs(launch.env.iter().map(|(k, v)| (k, v)));
    // Everything the launcher starts carries this tag, so that what is left of it after it
    // ends (ranks that left its group) is found and killed, and the guard kills it all if this
    // process is killed: nothing of a size outlives its stop on the node.
    let tag = crate::collect::tree::new_tag();
    command.env(crate::collect::tree::TAG_VAR, &tag);
    if let Ok(exe) = std::env::current_exe() {
        crate::collect::tree::start_guard(&exe);
    }
    let net_before = net::read(Path::new("/"));
    let ticks = || {
        std::fs::read_to_string("/proc/stat")
            .map(|t| crate::collect::telemetry::cpu::parse_proc_stat(&t))
            .unwrap_or_default()
    };
    let ticks_before = ticks();
    let counted = net::counted(&spec.endpoints);
    let recorder = crate::collect::telemetry::Recorder::start(
        crate::collect::telemetry::working_readers(Path::new("/")),
        Duration::from_millis(spec.sample_ms.max(100)),
    );
    say(&NodeLine::Started {
        fingerprint: Box::new(crate::collect::device::fingerprint(Path::new("/"))),
        python: ready.python.clone(),
        threads: ready.threads,
    })?;
    let started = Instant::now();
    let (heard_tx, heard) = mpsc::channel::<Heard>();
    let child = match command.start(
        child::Input::Null,
        child::Output::Lines {
            max: MAX_REPORT_LINE,
        },
        &heard_tx,
        None,
    ) {
        Ok(c) => c,
        Err(e) => {
            drop(recorder.finish());
            return say(&NodeLine::Failed {
                reason: format!("cannot start {}: {e}", launch.program.display()),
            });
        }
    };
    {
        let tx = heard_tx;
        std::thread::spawn(move || {
            // Anything more on the control channel is ignored; its end is the stop.
            let mut sink = [0u8; 256];
            while matches!(control.read(&mut sink), Ok(n) if n > 0) {}
            let _ = tx.send(Heard::ControlEnded);
        });
    }
    let mut watchdog = Watchdog::new(
        child,
        started + Duration::from_secs(spec.timeout_s.max(1)),
        STOP_GRACE,
    );
    let sample_every = Duration::from_millis(spec.sample_ms.max(100));
    let mut next_sample = Instant::now() + sample_every;
    let mut samples = Vec::new();
    let mut stopped = false;
    let take_samples = |samples: &mut Vec<NodeSample>, say: &mut dyn FnMut(&NodeLine)| {
        let now_net = net::read(Path::new("/"));
        let (rx, tx) = net::total(&net::delta(&net_before, &now_net), &counted);
        for s in recorder.fresh() {
            let sample = NodeSample {
                t_s: started.elapsed().as_secs_f64(),
                cpu_pct: s.cpu_load_pct(),
                mem_used_bytes: s.mem_used_bytes,
                rx_bytes: rx,
                tx_bytes: tx,
            };
            say(&NodeLine::Sample(sample.clone()));
            samples.push(sample);
        }
    };
    let mut failed_write = None;
    let mut said = |line: &NodeLine| {
        if let Err(e) = say(line) {
            failed_write.get_or_insert(e);
        }
    };
    let status = loop {
        watchdog.tick();
        let due = watchdog
            .next_due()
            .map_or(next_sample, |at| at.min(next_sample));
        match heard.recv_timeout(due.saturating_duration_since(Instant::now())) {
            Ok(Heard::Launcher(child::Heard::Line(line))) => report(&line, &mut said),
            Ok(Heard::ControlEnded) => {
                stopped = true;
                watchdog.stop_now();
            }
            Ok(Heard::Launcher(child::Heard::Exited))
            | Err(mpsc::RecvTimeoutError::Disconnected) => {
                break watchdog.reap_exited();
            }
            Ok(Heard::Launcher(_)) | Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() >= next_sample {
            take_samples(&mut samples, &mut said);
            next_sample = Instant::now() + sample_every;
        }
    };
    // Lines the harness printed just before it ended.
    while let Ok(h) = heard.recv_timeout(Duration::from_millis(200)) {
        if let Heard::Launcher(child::Heard::Line(line)) = h {
            report(&line, &mut said);
        }
    }
    crate::collect::tree::kill_tagged(Path::new("/"), &tag, Duration::from_secs(2));
    take_samples(&mut samples, &mut said);
    drop(recorder.finish());
    // The last sample covers the whole training: the cores' mean load since the start (so a
    // training shorter than one interval has one too).
    let loads = crate::collect::telemetry::cpu::loads(&ticks_before, &ticks());
    let (rx, tx) = net::total(
        &net::delta(&net_before, &net::read(Path::new("/"))),
        &counted,
    );
    let last = NodeSample {
        t_s: started.elapsed().as_secs_f64(),
        cpu_pct: (!loads.is_empty())
            .then(|| loads.iter().map(|l| l.1).sum::<f64>() / loads.len() as f64),
        mem_used_bytes: samples.last().and_then(|s| s.mem_used_bytes),
        rx_bytes: rx,
        tx_bytes: tx,
    };
    samples.push(last);
    let wall_s = started.elapsed().as_secs_f64();
    let last_words = watchdog.stderr(Duration::from_secs(1));
    let ok = matches!(&status, Ok(s) if s.success()) && !stopped && !watchdog.timed_out();
    let reason = (!ok).then(|| {
        if stopped {
            "stopped by the controller".to_string()
        } else if watchdog.timed_out() {
            format!("it did not finish within {} s", spec.timeout_s)
        } else {
            let last = crate::text::last_lines(&last_words, 1).join(" ");
            let status = match &status {
                Ok(s) => s.to_string(),
                Err(e) => format!("cannot wait for it: {e}"),
            };
            if last.trim().is_empty() {
                format!("the launcher ended ({status})")
            } else {
                format!("the launcher ended ({status}): {}", last.trim())
            }
        }
    });
    let interfaces = net::delta(&net_before, &net::read(Path::new("/")));
    said(&NodeLine::Ended(NodeEnd {
        ok,
        reason,
        wall_s,
        samples,
        interfaces,
    }));
    match failed_write {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(framework: Framework, world: usize, rank: usize) -> RankSpec {
        RankSpec {
            study: "s1".into(),
            framework,
            model: "cnn".into(),
            epochs: 2,
            batch: 16,
            lr: 0.05,
            seed: 3,
            data: DataSpec::Synthetic {
                train: 100,
                test: 20,
                seed: 3,
            },
            world,
            rank,
            endpoints: (0..world)
                .map(|r| format!("10.0.0.{}:29500", r + 1))
                .collect(),
            threads: 2,
            python: None,
            timeout_s: 60,
            sample_ms: 1000,
        }
    }

    fn words(launch: &Launch) -> Vec<String> {
        launch
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn torchrun_gets_the_multi_node_rendezvous_on_the_first_node() {
        let launch = spec(Framework::Pytorch, 3, 2).launch(
            Path::new("/py"),
            Path::new("/w/ddp.py"),
            Path::new("/w/data"),
            2,
        );
        let w = words(&launch);
        let at = |flag: &str| {
            w.iter()
                .position(|a| a == flag)
                .and_then(|i| w.get(i + 1))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(&w[..2], ["-m", "torch.distributed.run"]);
        assert_eq!(at("--nnodes"), "3");
        assert_eq!(at("--node-rank"), "2");
        assert_eq!(at("--nproc-per-node"), "1");
        assert_eq!(at("--rdzv-backend"), "c10d");
        assert_eq!(at("--rdzv-endpoint"), "10.0.0.1:29500");
        assert_eq!(at("--rdzv-conf"), "is_host=0");
        assert_eq!(at("--threads"), "2");
        assert!(launch.env.iter().all(|(k, _)| k != "TF_CONFIG"));
        let first = spec(Framework::Pytorch, 3, 0).launch(
            Path::new("/py"),
            Path::new("/w/ddp.py"),
            Path::new("/w/data"),
            2,
        );
        assert!(words(&first).contains(&"is_host=1".to_string()));
    }

    #[test]
    fn each_tensorflow_worker_is_told_the_cluster_and_its_index() -> crate::error::Result<()> {
        let launch = spec(Framework::Tensorflow, 2, 1).launch(
            Path::new("/py"),
            Path::new("/w/tf_mwms.py"),
            Path::new("/w/data"),
            1,
        );
        assert_eq!(words(&launch)[0], "/w/tf_mwms.py");
        let config = launch
            .env
            .iter()
            .find(|(k, _)| k == "TF_CONFIG")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&config)?;
        assert_eq!(
            v["cluster"]["worker"],
            serde_json::json!(["10.0.0.1:29500", "10.0.0.2:29500"])
        );
        assert_eq!(v["task"], serde_json::json!({"type": "worker", "index": 1}));
        Ok(())
    }

    #[test]
    fn a_spec_that_is_not_a_cluster_is_refused() {
        let mut s = spec(Framework::Pytorch, 2, 2);
        assert!(s.check().is_err());
        s.rank = 1;
        assert!(s.check().is_ok());
        s.endpoints.pop();
        assert!(s.check().is_err());
    }

    #[test]
    fn node_lines_round_trip() -> crate::error::Result<()> {
        let line = NodeLine::Sample(NodeSample {
            t_s: 1.5,
            cpu_pct: Some(40.0),
            mem_used_bytes: Some(1 << 30),
            rx_bytes: 10,
            tx_bytes: 20,
        });
        let text = serde_json::to_string(&line)?;
        assert_eq!(serde_json::from_str::<NodeLine>(&text)?, line);
        Ok(())
    }

    #[test]
    fn no_spec_is_a_failure_line_not_an_error() -> crate::error::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut out = Vec::new();
        serve(
            std::io::Cursor::new(b"not json\n".to_vec()),
            dir.path(),
            &mut out,
        )?;
        let line: NodeLine = serde_json::from_slice(&out)?;
        assert!(matches!(line, NodeLine::Failed { reason } if reason.contains("no training spec")));
        Ok(())
    }
}

//! A scaling study from its start to its end: the results directory, the data (a CIFAR-10
//! directory, or a synthetic set written in its format), one training per cluster size on the
//! first K members of the cluster (boards over SSH, or processes on this machine), each rank 0
//! report as it comes, and at the end `scaling.json`, each node's record and the charts. It
//! reports through [`TrainEvent`]s and prints nothing; a raised [`Cancel`] stops the size in
//! progress on every node and skips the rest, keeping what finished.

use super::cluster::{DataSpec, Framework, NodeEnd};
use super::{Epoch, Trained};
use crate::collect::device::Fingerprint;
use crate::collect::stop::Cancel;
use crate::config::Node;
use crate::error::BadInput;
use crate::error::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};

mod launch;

/// The data a study trains on.
#[derive(Debug, Clone)]
pub enum Data {
    /// A CIFAR-10 directory in the standard binary format (at the same path on every node).
    Dir(PathBuf),
    /// A synthetic set of this many training images (and a fifth as many test images, at least
    /// ten), written by every node in its working directory (and here, for the record).
    Synthetic { train: usize },
}

/// One member of the cluster: a node of the config, or this machine.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    /// None: this machine (a child edgeprof).
    pub node: Option<Node>,
    /// The address the other members reach it at.
    pub address: String,
}

impl Member {
    /// A process on this machine, reached at `address`.
    pub fn local(name: &str, address: &str) -> Member {
        Member {
            name: name.to_string(),
            node: None,
            address: address.to_string(),
        }
    }

    /// A node of the config, reached at its `address` or else its destination's host.
    pub fn remote(node: &Node) -> Member {
        let host = node
            .destination
            .rsplit_once('@')
            .map_or(node.destination.as_str(), |(_, h)| h);
        Member {
            name: node.name.clone(),
            address: node.address.clone().unwrap_or_else(|| host.to_string()),
            node: Some(node.clone()),
        }
    }
}

/// What to train, on what, and where the results go.
#[derive(Debug, Clone)]
pub struct Study {
    /// Cluster sizes, each a training of its own on the first K members.
    pub sizes: Vec<usize>,
    /// The members in rank order (rank 0, which hosts the rendezvous, first).
    pub cluster: Vec<Member>,
    pub framework: Framework,
    pub epochs: usize,
    /// A model the framework's harness knows (`cnn`, or a torchvision / Keras applications name).
    pub model: String,
    pub data: Data,
    /// Images per rank per step.
    pub batch: usize,
    pub lr: f64,
    pub seed: u64,
    /// The Python with the framework on every member (None: each finds its own, where
    /// `edgeprof env setup` put it).
    pub python: Option<PathBuf>,
    /// Threads per rank (None: a member's cores, shared among the ranks on this machine).
    pub threads: Option<usize>,
    /// The first port: rank r listens on `port + r` (torchrun's rendezvous on rank 0's).
    pub port: u16,
    /// The results directory is made under this one.
    pub parent: PathBuf,
    /// How long one size may take.
    pub timeout: std::time::Duration,
}

impl Study {
    /// Why the study cannot run as asked, before anything is made.
    pub fn check(&self) -> Result<(), BadInput> {
        if self.sizes.is_empty() || self.sizes.contains(&0) {
            return Err(BadInput::from(
                "--sizes takes cluster sizes from 1, e.g. 1,2,4",
            ));
        }
        if self.epochs == 0 || self.batch == 0 {
            return Err(BadInput::from("--epochs and --batch must be at least 1"));
        }
        if let Data::Synthetic { train } = self.data {
            if train < 10 {
                return Err(BadInput::from("--synthetic needs at least 10 images"));
            }
        }
        let largest = self.sizes.iter().max().copied().unwrap_or(0);
        if largest > self.cluster.len() {
            return Err(BadInput(format!(
                "a cluster of {largest} needs {largest} members; {} given ({})",
                self.cluster.len(),
                self.cluster
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let on_this_machine = |m: &&Member| m.node.is_none();
        let loopback = |m: &&Member| crate::collect::telemetry::net::is_loopback(&m.address);
        let members = &self.cluster[..largest];
        if members.iter().any(|m| m.node.is_some()) {
            if let Some(m) = members.iter().filter(on_this_machine).find(loopback) {
                return Err(BadInput(format!(
                    "{} trains with boards, which reach it at {}: give this machine's address \
                     on their network (--local-address, or local_address in [train])",
                    m.name, m.address
                )));
            }
        }
        Ok(())
    }
}

impl Study {
    /// The study a `[train]` section describes, on the config's `nodes`, with its results
    /// under `parent`. Named members become the cluster in rank order; when the only member is
    /// this machine, the cluster is processes on it, as many as the largest size (1, 2 and 4 by
    /// default).
    pub fn of(
        train: &crate::config::Train,
        nodes: &[Node],
        parent: PathBuf,
    ) -> Result<Study, BadInput> {
        let names = train.members(nodes);
        let processes = names == [crate::config::LOCAL_NODE];
        let cluster: Vec<Member> = if processes {
            let largest = train.sizes.iter().max().copied().unwrap_or(4);
            (0..largest)
                .map(|r| Member::local(&format!("local-{r}"), "127.0.0.1"))
                .collect()
        } else {
            names
                .iter()
                .map(|name| {
                    if name == crate::config::LOCAL_NODE {
                        return Ok(Member::local(name, &train.local_address));
                    }
                    nodes
                        .iter()
                        .find(|n| &n.name == name)
                        .map(Member::remote)
                        .ok_or_else(|| {
                            BadInput(format!(
                                "no node {name:?} among the config's [[nodes]] ({})",
                                nodes
                                    .iter()
                                    .map(|n| n.name.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ))
                        })
                })
                .collect::<Result<_, _>>()?
        };
        let sizes = match (train.sizes.is_empty(), processes) {
            (false, _) => train.sizes.clone(),
            (true, true) => vec![1, 2, 4],
            (true, false) => default_sizes(cluster.len()),
        };
        let study = Study {
            sizes,
            cluster,
            framework: train.framework.parse()?,
            epochs: train.epochs,
            model: train.model.clone(),
            data: match &train.data {
                Some(dir) => Data::Dir(dir.clone()),
                None => Data::Synthetic {
                    train: train.synthetic,
                },
            },
            batch: train.batch,
            lr: train.lr,
            seed: train.seed,
            python: train.python.clone(),
            threads: train.threads,
            port: train.port,
            parent,
            timeout: std::time::Duration::from_secs(train.timeout_s),
        };
        study.check()?;
        Ok(study)
    }
}

/// The sizes 1, 2, 4, … up to `members`, and `members` itself.
pub fn default_sizes(members: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = std::iter::successors(Some(1usize), |k| k.checked_mul(2))
        .take_while(|&k| k <= members)
        .collect();
    if members > 0 && sizes.last() != Some(&members) {
        sizes.push(members);
    }
    sizes
}

/// How one size ended.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Trained(Trained),
    /// Why it failed: the node that failed first, and its reason.
    Failed(String),
    /// Stopped by a cancel.
    Cancelled,
}

/// How a study goes, as it happens.
#[derive(Debug, Clone)]
pub enum TrainEvent {
    /// The study starts in `dir`; `data` says what it trains on.
    Started { dir: PathBuf, data: String },
    /// A size begins on its members.
    Launch {
        nodes: usize,
        model: String,
        framework: Framework,
        members: Vec<String>,
    },
    /// A member started its rank: its device in a few words.
    NodeReady {
        nodes: usize,
        node: String,
        device: String,
    },
    /// Rank 0 finished epoch `epoch.epoch` of `epochs`.
    Epoch {
        nodes: usize,
        epochs: usize,
        epoch: Epoch,
    },
    /// A member's sample while it trains: its CPU, memory and traffic so far.
    NodeSample {
        nodes: usize,
        node: String,
        sample: super::cluster::NodeSample,
    },
    /// A size ended.
    Ended { nodes: usize, outcome: Outcome },
    /// The study ended (sent by [`crate::jobs::train`] after its last size): what it left, or
    /// why it could not run.
    Finished {
        result: Result<Box<Finished>, crate::error::JobError>,
    },
}

/// One member's record of one size: its device and what it did while it trained.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRecord {
    pub name: String,
    pub destination: Option<String>,
    pub rank: usize,
    pub fingerprint: Option<Fingerprint>,
    pub python: Option<PathBuf>,
    pub threads: Option<usize>,
    /// How its rank ended (None: it never said, e.g. its stream broke).
    pub end: Option<NodeEnd>,
    /// Why it could not start, or its stream's last words when it broke.
    pub failure: Option<String>,
}

impl NodeRecord {
    /// Bytes it received and sent while it trained, over the interfaces between the members.
    pub fn traffic(&self) -> (u64, u64) {
        self.end
            .as_ref()
            .and_then(|e| e.samples.last())
            .map_or((0, 0), |s| (s.rx_bytes, s.tx_bytes))
    }
}

/// What a study left: its directory, the sizes that finished, the failures and the table.
#[derive(Debug, Clone, Serialize)]
pub struct Finished {
    pub dir: PathBuf,
    pub framework: Framework,
    pub model: String,
    pub epochs: usize,
    pub batch_per_rank: usize,
    pub lr: f64,
    pub data: String,
    pub runs: Vec<Trained>,
    pub scaling: Vec<super::Scaling>,
    /// Sizes that failed, with why.
    pub failures: Vec<(usize, String)>,
    /// Sizes not trained because the study was cancelled first (the one stopped included).
    pub cancelled: Vec<usize>,
    /// Every member's record of every size it took part in.
    pub nodes: Vec<(usize, NodeRecord)>,
}

/// The files a study writes into its directory, besides the data and each node's record
/// (`nodes/K-NAME.json`).
pub const FILES: [&str; 4] = [
    "scaling.json",
    "charts/speedup.svg",
    "charts/improvement.svg",
    "charts/accuracy.svg",
];

/// Runs `study` to its end (or to a cancel), reporting through `send`.
pub fn run(
    study: &Study,
    cancel: &Cancel,
    send: &(dyn Fn(TrainEvent) + Sync),
) -> crate::error::Result<Finished> {
    study.check()?;
    let dir = crate::sweep_dir::new_dir(&study.parent, &format!("train-{}", study.model))?;
    let (data, described) = match &study.data {
        Data::Dir(d) => {
            // Checked here when this machine trains; each node checks its own copy.
            if study.cluster.iter().any(|m| m.node.is_none()) {
                super::count_records(d)?;
            }
            (
                DataSpec::Dir(d.clone()),
                format!("CIFAR-10 at {} on every member", d.display()),
            )
        }
        Data::Synthetic { train } => {
            let test = (train / 5).max(10);
            let d = dir.join("cifar-synthetic");
            super::write_synthetic(&d, *train, test, study.seed)
                .with_context(|| format!("cannot write the synthetic set to {}", d.display()))?;
            (
                DataSpec::Synthetic {
                    train: *train,
                    test,
                    seed: study.seed,
                },
                format!(
                    "synthetic CIFAR-10 ({train} training, {test} test images, seed {}), \
                     written by every member",
                    study.seed
                ),
            )
        }
    };
    send(TrainEvent::Started {
        dir: dir.clone(),
        data: described.clone(),
    });
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    let mut cancelled = Vec::new();
    let mut nodes = Vec::new();
    let study_id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "train".to_string());
    for &size in &study.sizes {
        if cancel.is_raised() {
            cancelled.push(size);
            continue;
        }
        let members = &study.cluster[..size];
        send(TrainEvent::Launch {
            nodes: size,
            model: study.model.clone(),
            framework: study.framework,
            members: members.iter().map(|m| m.name.clone()).collect(),
        });
        let ran = launch::size(study, &study_id, &dir, &data, size, cancel, send);
        for record in &ran.records {
            nodes.push((size, record.clone()));
        }
        write_node_records(&dir, size, &ran.records)?;
        let outcome = match ran.result {
            Ok(t) => Outcome::Trained(t),
            Err(_) if cancel.is_raised() => Outcome::Cancelled,
            Err(why) => Outcome::Failed(why),
        };
        match &outcome {
            Outcome::Trained(t) => runs.push(t.clone()),
            Outcome::Failed(why) => failures.push((size, why.clone())),
            Outcome::Cancelled => cancelled.push(size),
        }
        send(TrainEvent::Ended {
            nodes: size,
            outcome,
        });
    }
    let finished = Finished {
        scaling: super::scaling(&runs),
        dir,
        framework: study.framework,
        model: study.model.clone(),
        epochs: study.epochs,
        batch_per_rank: study.batch,
        lr: study.lr,
        data: described,
        runs,
        failures,
        cancelled,
        nodes,
    };
    write(&finished)?;
    Ok(finished)
}

/// Each member's record of one size, as `nodes/K-NAME.json`.
fn write_node_records(dir: &Path, size: usize, records: &[NodeRecord]) -> crate::error::Result<()> {
    let nodes = dir.join("nodes");
    std::fs::create_dir_all(&nodes)
        .with_context(|| format!("cannot create {}", nodes.display()))?;
    for r in records {
        let name = format!(
            "{size}-{}.json",
            crate::config::node_name::dir_name(&r.name)
        );
        let text = serde_json::to_string_pretty(r).context("cannot encode a node's record")?;
        crate::results::write_atomic(&nodes.join(name), (text + "\n").as_bytes())?;
    }
    Ok(())
}

/// The table as `scaling.json` and the charts, each written whole.
fn write(f: &Finished) -> crate::error::Result<()> {
    let text = serde_json::to_string_pretty(f).context("cannot encode the scaling")?;
    crate::results::write_atomic(&f.dir.join(FILES[0]), (text + "\n").as_bytes())?;
    let charts = f.dir.join("charts");
    std::fs::create_dir_all(&charts)
        .with_context(|| format!("cannot create {}", charts.display()))?;
    type Series = Vec<(&'static str, Vec<(f64, f64)>)>;
    let charts: [(String, &str, Series); 3] = [
        (
            "speedup over one node".to_string(),
            "speedup",
            vec![
                ("measured", f.points(|s| s.speedup)),
                ("ideal", f.points(|s| s.nodes as f64)),
            ],
        ),
        (
            "accuracy improvement over one node".to_string(),
            "ratio",
            vec![
                ("acc-imp", f.points(|s| s.acc_imp)),
                ("val-acc-imp", f.points(|s| s.val_acc_imp)),
            ],
        ),
        (
            format!("accuracy after {} epoch(s)", f.epochs),
            "accuracy",
            vec![
                ("training", f.points(|s| s.train_acc)),
                ("validation", f.points(|s| s.val_acc)),
            ],
        ),
    ];
    for ((title, y, series), file) in charts.iter().zip(&FILES[1..]) {
        let series: Vec<(&str, &[(f64, f64)])> =
            series.iter().map(|(n, p)| (*n, p.as_slice())).collect();
        let svg = crate::report::svg::lines_xy(
            &format!("{} ({}): {title}", f.model, f.framework.name()),
            "cluster size",
            y,
            &series,
        )?;
        crate::results::write_atomic(&f.dir.join(file), svg.as_bytes())?;
    }
    Ok(())
}

impl Finished {
    /// One figure of the table against the cluster size, for a chart.
    pub fn points(&self, figure: impl Fn(&super::Scaling) -> f64) -> Vec<(f64, f64)> {
        self.scaling
            .iter()
            .map(|s| (s.nodes as f64, figure(s)))
            .collect()
    }
}

//! `edgeprof train`: distributed-training scaling with PyTorch's own launcher
//! (torchrun, DistributedDataParallel over gloo) on 1..N nodes of this machine (processes), on
//! CIFAR-10 in its standard binary format or a synthetic set written in it. The study itself
//! is the library's (`train::study`); this prints its events and its table.

use super::sweep::install_stop_handlers;
use super::{print_json, print_out, render};
use clap::Args;
use edgeprof::collect::stop::Cancel;
use edgeprof::train::study::{self, Finished, Outcome, TrainEvent};
use std::path::PathBuf;

/// Every option overrides the config's `[train]` (or its default, in brackets).
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Cluster sizes, each a training of its own on the first K members [1, 2, 4, … up to the
    /// members, and all of them]
    #[arg(
        long,
        visible_alias = "nodes",
        value_delimiter = ',',
        value_name = "K,…"
    )]
    sizes: Vec<usize>,
    /// A config: its [train] section and the [[nodes]] (boards over SSH) to train on; without
    /// nodes, every member is a process on this machine
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The members in rank order: names of the config's [[nodes]], or `local` for this machine
    /// (rank 0, the first, hosts the rendezvous) [every node]
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAME,…",
        requires = "config"
    )]
    on: Vec<String>,
    /// pytorch (DDP over gloo, launched by torchrun) or tensorflow (MultiWorkerMirroredStrategy,
    /// one worker per node told the cluster by TF_CONFIG) [pytorch]
    #[arg(long, value_parser = edgeprof::config::TRAIN_FRAMEWORKS)]
    framework: Option<String>,
    /// Epochs per training [2]
    #[arg(long)]
    epochs: Option<usize>,
    /// The model: cnn (a small CIFAR-10 CNN, in both frameworks), or a torchvision
    /// (shufflenet_v2_x0_5, resnet18 …) or Keras applications (mobilenet_v2 …) name [cnn]
    #[arg(long)]
    model: Option<String>,
    /// A CIFAR-10 directory in the standard binary format (data_batch_1..5.bin, test_batch.bin),
    /// at this path on every member
    #[arg(long, value_name = "DIR", conflicts_with = "synthetic")]
    data: Option<PathBuf>,
    /// Train on a synthetic set of this many training images (and a fifth as many test
    /// images) in CIFAR-10's format, written by every member [2000]
    #[arg(long, value_name = "N")]
    synthetic: Option<usize>,
    /// Images per rank per step [32]
    #[arg(long)]
    batch: Option<usize>,
    /// SGD learning rate (momentum 0.9), the same for every cluster size [0.01]
    #[arg(long)]
    lr: Option<f64>,
    /// [1]
    #[arg(long)]
    seed: Option<u64>,
    /// Threads per rank [a member's cores, shared among the ranks on this machine]
    #[arg(long, value_name = "N", value_parser = crate::cli::args::thread_count)]
    threads: Option<usize>,
    /// The first port: rank r listens on PORT+r, torchrun's rendezvous on rank 0's [29500]
    #[arg(long)]
    port: Option<u16>,
    /// This machine's address as the boards reach it, when `local` trains with them [127.0.0.1]
    #[arg(long, value_name = "ADDRESS")]
    local_address: Option<String>,
    /// The Python with the framework, at this path on every member [where `edgeprof env setup
    /// pytorch|tensorflow` put it on each]
    #[arg(long, value_name = "PYTHON")]
    python: Option<PathBuf>,
    /// Create the results directory under DIR [the config's output.dir, else results]
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Seconds one cluster size may take [3600]
    #[arg(long)]
    timeout_s: Option<u64>,
    /// Print the result as JSON instead of text
    #[arg(long)]
    json: bool,
}

/// One line of progress for an event (None: nothing to say on a terminal).
fn progress_line(event: &TrainEvent) -> Option<String> {
    let line = match event {
        TrainEvent::Started { data, .. } => data.clone(),
        TrainEvent::Launch {
            nodes,
            model,
            framework,
            members,
        } => format!(
            "[{nodes} node(s)] training {model} with {} on {} …",
            framework.launcher(),
            members.join(", ")
        ),
        TrainEvent::NodeReady { nodes, node, device } => {
            format!("[{nodes} node(s)] {node} started its rank: {device}")
        }
        TrainEvent::Epoch {
            nodes,
            epochs,
            epoch: e,
        } => format!(
            "[{nodes} node(s)] epoch {}/{epochs}: train acc {:.3}, val acc {:.3}, loss {:.3}, {:.1} s",
            e.epoch, e.train_acc, e.val_acc, e.loss, e.elapsed_s
        ),
        TrainEvent::Ended { nodes, outcome } => match outcome {
            Outcome::Trained(t) => format!(
                "[{nodes} node(s)] done in {:.1} s: train acc {:.3}, val acc {:.3}",
                t.wall_s,
                t.train_acc(),
                t.val_acc()
            ),
            Outcome::Failed(why) => format!("[{nodes} node(s)] failed: {why}"),
            Outcome::Cancelled => format!("[{nodes} node(s)] cancelled"),
        },
        // The samples go to each node's record; the end is the table below.
        TrainEvent::NodeSample { .. } | TrainEvent::Finished { .. } => return None,
    };
    Some(line)
}

/// The scaling table, the two terminal charts and where the files are.
fn table(f: &Finished) -> String {
    let rows: Vec<Vec<String>> = f
        .scaling
        .iter()
        .map(|s| {
            vec![
                s.nodes.to_string(),
                format!("{:.1}", s.wall_s),
                format!("{:.3}", s.train_acc),
                format!("{:.3}", s.val_acc),
                format!("{:.2}", s.speedup),
                format!("{:.2}", s.efficiency),
                format!("{:.3}", s.acc_imp),
                format!("{:.3}", s.val_acc_imp),
                format!("{:.2}", s.link_mb_s),
            ]
        })
        .collect();
    let mut out = render::table(
        &[
            "nodes",
            "time s",
            "train acc",
            "val acc",
            "speedup",
            "efficiency",
            "acc-imp",
            "val-acc-imp",
            "link MB/s",
        ],
        &[true; 9],
        &rows,
    );
    out.push('\n');
    out.push_str(&edgeprof::report::terminal_lines_xy(
        "speedup over one node (and the ideal line)",
        "cluster size →",
        &[&f.points(|s| s.speedup), &f.points(|s| s.nodes as f64)],
    ));
    out.push_str(&edgeprof::report::terminal_lines_xy(
        "acc-imp and val-acc-imp over cluster size",
        "cluster size →",
        &[&f.points(|s| s.acc_imp), &f.points(|s| s.val_acc_imp)],
    ));
    // Two lines, so that 80 columns hold each.
    out.push_str(&format!("\nresults in {}\n", f.dir.display()));
    let files = format!("{}, nodes/K-NAME.json", study::FILES.join(", "));
    out.push_str("  ");
    out.push_str(&edgeprof::text::wrap(&files, 76, "  "));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let config = args
        .config
        .as_deref()
        .map(edgeprof::config::load)
        .transpose()?;
    let nodes = config.as_ref().map(|c| c.nodes.clone()).unwrap_or_default();
    let mut t = config
        .as_ref()
        .and_then(|c| c.train.clone())
        .unwrap_or_default();
    if !args.sizes.is_empty() {
        t.sizes = args.sizes;
    }
    if !args.on.is_empty() {
        t.nodes = args.on;
    }
    if let Some(data) = args.data {
        t.data = Some(data);
    }
    if let Some(n) = args.synthetic {
        t.synthetic = n;
        t.data = None;
    }
    t.framework = args.framework.unwrap_or(t.framework);
    t.epochs = args.epochs.unwrap_or(t.epochs);
    t.model = args.model.unwrap_or(t.model);
    t.batch = args.batch.unwrap_or(t.batch);
    t.lr = args.lr.unwrap_or(t.lr);
    t.seed = args.seed.unwrap_or(t.seed);
    t.threads = args.threads.or(t.threads);
    t.port = args.port.unwrap_or(t.port);
    t.local_address = args.local_address.unwrap_or(t.local_address);
    t.python = args.python.or(t.python);
    t.timeout_s = args.timeout_s.unwrap_or(t.timeout_s);
    let parent = args
        .output
        .or_else(|| config.as_ref().map(|c| c.output.dir.clone()))
        .unwrap_or_else(|| PathBuf::from("results"));
    study(&t, &nodes, parent, args.json)
}

/// `edgeprof run` of a config with `[train]`.
pub fn run_config(
    config: &edgeprof::config::Config,
    output: Option<PathBuf>,
) -> anyhow::Result<()> {
    let Some(t) = &config.train else {
        anyhow::bail!("the config has no [train] section");
    };
    study(
        t,
        &config.nodes,
        output.unwrap_or_else(|| config.output.dir.clone()),
        false,
    )
}

/// Runs the study `t` describes, printing its progress and its table.
fn study(
    t: &edgeprof::config::Train,
    nodes: &[edgeprof::config::Node],
    parent: PathBuf,
    json: bool,
) -> anyhow::Result<()> {
    let cancel = Cancel::new();
    let hangup = install_stop_handlers(&cancel)?;
    let show = |event: edgeprof::event::Event| {
        // After a hang-up the study goes on, with no terminal to tell.
        if let edgeprof::event::Event::Train(event) = event {
            if let (false, Some(line)) = (
                hangup.load(std::sync::atomic::Ordering::Relaxed),
                progress_line(&event),
            ) {
                errln!("{line}");
            }
        }
    };
    let finished = edgeprof::jobs::study(t, nodes, parent, &cancel, &show)?;
    if json {
        print_json(&finished)?;
    } else {
        print_out(&table(&finished))?;
    }
    Ok(edgeprof::jobs::study_verdict(&finished)?)
}

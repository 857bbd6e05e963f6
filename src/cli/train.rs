//! `edgeprof train`: distributed-training scaling with PyTorch's own launcher
//! (torchrun, DistributedDataParallel over gloo) on 1..N nodes of this machine (processes), on
//! CIFAR-10 in its standard binary format or a synthetic set written in it. The study itself
//! is the library's (`train::session`); this prints its events and its table.

use super::sweep::install_stop_handlers;
use super::{print_json, print_out, render};
use clap::Args;
use edgeprof::collect::stop::Cancel;
use edgeprof::train::session::{self, Data, Finished, Outcome, Study, TrainEvent};
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Node counts to train on, each a separate run (processes on this machine, one rank each)
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    nodes: Vec<usize>,
    /// Epochs per run
    #[arg(long, default_value_t = 2)]
    epochs: usize,
    /// torchvision model: shufflenet_v2_x0_5, mobilenet_v2, resnet18 …
    #[arg(long, default_value = "shufflenet_v2_x0_5")]
    model: String,
    /// A CIFAR-10 directory in the standard binary format (data_batch_1..5.bin, test_batch.bin)
    #[arg(long, value_name = "DIR", conflicts_with = "synthetic")]
    data: Option<PathBuf>,
    /// Write a synthetic set of this many training images (and a fifth as many test images) in
    /// CIFAR-10's format instead
    #[arg(long, value_name = "N", default_value_t = 2000)]
    synthetic: usize,
    /// Images per rank per step
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// SGD learning rate (momentum 0.9), the same for every node count
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The Python with torch and torchvision (default: where `edgeprof env setup pytorch` put
    /// them, else the system's)
    #[arg(long, value_name = "PYTHON")]
    python: Option<PathBuf>,
    /// Create the results directory under DIR (default: results)
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Seconds one run may take
    #[arg(long, default_value_t = 3600)]
    timeout_s: u64,
    #[arg(long)]
    json: bool,
}

/// The study was stopped (exit code 130); what finished is in its directory.
#[derive(Debug, Error)]
#[error("training cancelled; what finished is in {}", dir.display())]
pub struct TrainCancelled {
    pub dir: PathBuf,
}

/// One line of progress for an event.
fn progress_line(event: &TrainEvent) -> String {
    match event {
        TrainEvent::Started { data, .. } => data.clone(),
        TrainEvent::Launch { nodes, model } => {
            format!("[{nodes} node(s)] training {model} with torchrun (gloo) …")
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
    }
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
        ],
        &[true; 8],
        &rows,
    );
    out.push('\n');
    out.push_str(&edgeprof::report::terminal_line_xy(
        "speedup over one node",
        "nodes →",
        &f.points(|s| s.speedup),
    ));
    out.push_str(&edgeprof::report::terminal_line_xy(
        "validation accuracy",
        "nodes →",
        &f.points(|s| s.val_acc),
    ));
    out.push_str(&format!(
        "\nresults in {}: {}\n",
        f.dir.display(),
        session::FILES.join(", ")
    ));
    out
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let study = Study {
        nodes: args.nodes,
        epochs: args.epochs,
        model: args.model,
        data: match args.data {
            Some(dir) => Data::Dir(dir),
            None => Data::Synthetic {
                train: args.synthetic,
            },
        },
        batch: args.batch,
        lr: args.lr,
        seed: args.seed,
        python: PathBuf::new(),
        parent: args.output.unwrap_or_else(|| PathBuf::from("results")),
        timeout: Duration::from_secs(args.timeout_s),
    };
    study.check()?;
    let study = Study {
        python: session::python_for_pytorch(args.python.as_deref())?,
        ..study
    };
    let cancel = Cancel::new();
    let hangup = install_stop_handlers(&cancel)?;
    let finished = session::run(&study, &cancel, &|event| {
        // After a hang-up the study goes on, with no terminal to tell.
        if !hangup.load(std::sync::atomic::Ordering::Relaxed) {
            errln!("{}", progress_line(&event));
        }
    })?;
    if args.json {
        print_json(&finished)?;
    } else {
        print_out(&table(&finished))?;
    }
    if !finished.cancelled.is_empty() {
        return Err(TrainCancelled { dir: finished.dir }.into());
    }
    if !finished.failures.is_empty() {
        let which: Vec<String> = finished
            .failures
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        anyhow::bail!(
            "training failed on {} node(s) (see above; results in {})",
            which.join(", "),
            finished.dir.display()
        );
    }
    Ok(())
}

//! `edgeprof train`: distributed-training scaling with PyTorch's own launcher
//! (torchrun, DistributedDataParallel over gloo) on 1..N nodes of this machine (processes), on
//! CIFAR-10 in its standard binary format or a synthetic set written in it.

use super::{print_json, print_out, render, BadInput};
use anyhow::Context;
use clap::Args;
use edgeprof::engines::env::{self, Readiness};
use edgeprof::train::{self, Report, Trained};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

fn python_for_pytorch(asked: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = asked {
        return Ok(p.to_path_buf());
    }
    let Some(framework) = edgeprof::engines::external::find("pytorch") else {
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

/// How long the launcher's output may stay open after it ended (a rank left behind can hold it).
const OUTPUT_GRACE: Duration = Duration::from_secs(5);

/// One run on `nodes` ranks: its epochs and wall time, or why it failed.
fn train_on(
    python: &Path,
    harness: &Path,
    data: &Path,
    args: &TrainArgs,
    nodes: usize,
) -> Result<Trained, String> {
    let cpus = edgeprof::collect::device::available_cores().max(1);
    let threads = (cpus / nodes).max(1);
    let mut command = Command::new(python);
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
        .args(["--model", &args.model])
        .args(["--epochs", &args.epochs.to_string()])
        .args(["--batch", &args.batch.to_string()])
        .args(["--lr", &args.lr.to_string()])
        .args(["--seed", &args.seed.to_string()])
        .args(["--threads", &threads.to_string()])
        .env("OMP_NUM_THREADS", threads.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
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
    // What the loop below hears: the ranks' reports, and the launcher's exit (from a thread
    // blocked in waitid, which leaves it unreaped for the watchdog).
    enum Heard {
        Report(Report),
        Exited,
    }
    let (heard_tx, heard) = mpsc::channel::<Heard>();
    if let Some(stdout) = child.stdout.take() {
        let heard_tx = heard_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(report) = train::parse_line(&line) {
                    if heard_tx.send(Heard::Report(report)).is_err() {
                        break;
                    }
                }
            }
        });
    }
    let exit_heard = heard_tx;
    let watched = edgeprof::collect::exit::notify(child.id(), move || {
        let _ = exit_heard.send(Heard::Exited);
    });
    if let Err(e) = watched {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("cannot watch it for its exit: {e}"));
    }
    let timeout = Duration::from_secs(args.timeout_s);
    // The launcher and its ranks are stopped at the time limit; the watchdog holds the child
    // so that only it can be signalled, never whatever process later gets its pid.
    let mut watchdog = train::Watchdog::new(child, started + timeout, train::STOP_GRACE);
    let mut epochs = Vec::new();
    let mut done = None;
    let mut take = |report: Report| match report {
        Report::Epoch(e) => {
            errln!(
                "[{nodes} node(s)] epoch {}/{}: train acc {:.3}, val acc {:.3}, loss {:.3}, {:.1} s",
                e.epoch, args.epochs, e.train_acc, e.val_acc, e.loss, e.elapsed_s
            );
            epochs.push(e);
        }
        Report::Done(d) => done = Some(d),
    };
    // Asleep until a report, the exit, or the watchdog's next deadline.
    let status = loop {
        match watchdog.poll() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
        let next = match watchdog.next_due() {
            Some(at) => heard.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => heard
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(Heard::Report(report)) => take(report),
            Ok(Heard::Exited) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Nothing more can be heard (the exit was told already): wait for it outright.
            Err(mpsc::RecvTimeoutError::Disconnected) => match watchdog.wait() {
                Ok(status) => break status,
                Err(e) => return Err(format!("cannot wait for it: {e}")),
            },
        }
    };
    // What it printed last, as long as its output stays open a little.
    let until = Instant::now() + OUTPUT_GRACE;
    while let Ok(h) = heard.recv_timeout(until.saturating_duration_since(Instant::now())) {
        if let Heard::Report(report) = h {
            take(report);
        }
    }
    let said = said_rx
        .recv_timeout(until.saturating_duration_since(Instant::now()))
        .unwrap_or_default();
    match done {
        Some(d) if status.success() && epochs.len() == args.epochs => Ok(Trained {
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
            let why = if watchdog.timed_out() {
                format!("it did not finish within {} s", args.timeout_s)
            } else {
                format!("the launcher ended ({status}): {last}")
            };
            Err(why)
        }
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    if args.nodes.is_empty() || args.nodes.contains(&0) {
        anyhow::bail!(BadInput("--nodes takes counts from 1, e.g. 1,2,4".into()));
    }
    if args.epochs == 0 || args.batch == 0 {
        anyhow::bail!(BadInput("--epochs and --batch must be at least 1".into()));
    }
    let python = python_for_pytorch(args.python.as_deref())?;
    let parent = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("results"));
    let dir = edgeprof::session::new_dir(&parent, &format!("train-{}", args.model))?;
    let data = match &args.data {
        Some(d) => {
            let (n_train, n_test) = train::count_records(d)?;
            errln!(
                "CIFAR-10 at {}: {n_train} training, {n_test} test images",
                d.display()
            );
            d.clone()
        }
        None => {
            if args.synthetic < 10 {
                anyhow::bail!(BadInput("--synthetic needs at least 10 images".into()));
            }
            let d = dir.join("cifar-synthetic");
            train::write_synthetic(&d, args.synthetic, (args.synthetic / 5).max(10), args.seed)
                .with_context(|| format!("cannot write the synthetic set to {}", d.display()))?;
            errln!(
                "synthetic CIFAR-10 ({} training, {} test images, seed {}) in {}",
                args.synthetic,
                (args.synthetic / 5).max(10),
                args.seed,
                d.display()
            );
            d
        }
    };
    let harness = dir.join("ddp.py");
    std::fs::write(&harness, train::HARNESS)
        .with_context(|| format!("cannot write {}", harness.display()))?;
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for &nodes in &args.nodes {
        errln!(
            "[{nodes} node(s)] training {} for {} epoch(s) with torchrun (gloo) …",
            args.model,
            args.epochs
        );
        match train_on(&python, &harness, &data, &args, nodes) {
            Ok(t) => runs.push(t),
            Err(why) => {
                errln!("[{nodes} node(s)] failed: {why}");
                failures.push((nodes, why));
            }
        }
    }
    let table = train::scaling(&runs);
    let value = serde_json::json!({
        "model": args.model,
        "epochs": args.epochs,
        "batch_per_rank": args.batch,
        "lr": args.lr,
        "data": data,
        "python": python,
        "runs": runs,
        "scaling": table,
        "failures": failures,
    });
    let text = serde_json::to_string_pretty(&value).context("cannot encode the scaling")?;
    edgeprof::results::write_atomic(&dir.join("scaling.json"), (text + "\n").as_bytes())?;
    let points = |f: &dyn Fn(&train::Scaling) -> f64| -> Vec<(f64, f64)> {
        table.iter().map(|s| (s.nodes as f64, f(s))).collect()
    };
    let speedup = points(&|s| s.speedup);
    let ideal = points(&|s| s.nodes as f64);
    let val = points(&|s| s.val_acc);
    let acc = points(&|s| s.train_acc);
    let charts = dir.join("charts");
    std::fs::create_dir_all(&charts)
        .with_context(|| format!("cannot create {}", charts.display()))?;
    let svg = edgeprof::report::svg::lines_xy(
        &format!("{}: speedup over one node", args.model),
        "nodes",
        "speedup",
        &[("measured", &speedup), ("ideal", &ideal)],
    )?;
    edgeprof::results::write_atomic(&charts.join("speedup.svg"), svg.as_bytes())?;
    let svg = edgeprof::report::svg::lines_xy(
        &format!("{}: accuracy after {} epoch(s)", args.model, args.epochs),
        "nodes",
        "accuracy",
        &[("training", &acc), ("validation", &val)],
    )?;
    edgeprof::results::write_atomic(&charts.join("accuracy.svg"), svg.as_bytes())?;
    if args.json {
        print_json(&value)?;
    } else {
        let rows: Vec<Vec<String>> = table
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
            &speedup,
        ));
        out.push_str(&edgeprof::report::terminal_line_xy(
            "validation accuracy",
            "nodes →",
            &val,
        ));
        out.push_str(&format!(
            "\nresults in {}: scaling.json, charts/speedup.svg, charts/accuracy.svg\n",
            dir.display()
        ));
        print_out(&out)?;
    }
    if !failures.is_empty() {
        let which: Vec<String> = failures.iter().map(|(n, _)| n.to_string()).collect();
        anyhow::bail!(
            "training failed on {} node(s) (see above; results in {})",
            which.join(", "),
            dir.display()
        );
    }
    Ok(())
}

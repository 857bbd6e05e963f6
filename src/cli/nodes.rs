//! `edgeprof nodes check|install`: the boards of a config's `[[nodes]]`, reached with the
//! system's `ssh`; and the hidden `node-info` a node's edgeprof answers them with.

use super::{print_json, print_out, render, BadInput};
use anyhow::Context;
use clap::Subcommand;
use edgeprof::config::Node;
use edgeprof::fleet::install::Installed;
use edgeprof::fleet::{self, Check};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum NodesCommand {
    /// For each node: reachable over SSH, its edgeprof version, its device, the frameworks ready
    /// there, and whether its working directory can be made
    Check {
        /// The config with the [[nodes]] (default: configs/default.toml)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the result as JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Copy an edgeprof binary to the nodes that lack it (or have another version): this one when
    /// the node's architecture matches, else the one given with --binary
    Install {
        /// The config with the [[nodes]] (default: configs/default.toml)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The binary to copy (e.g. target/aarch64-unknown-linux-gnu/release/edgeprof)
        #[arg(long, value_name = "FILE")]
        binary: Option<PathBuf>,
        /// Copy even where the same version is there
        #[arg(long)]
        force: bool,
    },
}

fn nodes_of(config: Option<&Path>) -> anyhow::Result<Vec<Node>> {
    let path = config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("configs/default.toml"));
    let config = edgeprof::config::load(&path)?;
    if config.nodes.is_empty() {
        anyhow::bail!(BadInput(format!(
            "{} has no [[nodes]]: add one per board (destination = \"user@host\"; see \
             docs/commands/nodes.md)",
            path.display()
        )));
    }
    Ok(config.nodes)
}

pub fn run(command: NodesCommand) -> anyhow::Result<()> {
    match command {
        NodesCommand::Check { config, json } => check(config.as_deref(), json),
        NodesCommand::Install {
            config,
            binary,
            force,
        } => install(config.as_deref(), binary.as_deref(), force),
    }
}

#[derive(serde::Serialize)]
struct Checked<'a> {
    node: &'a str,
    destination: &'a str,
    #[serde(flatten)]
    check: &'a Check,
}

fn check(config: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let nodes = nodes_of(config)?;
    errln!("checking {} node(s) over ssh …", nodes.len());
    let checks = fleet::check_all(&nodes);
    if json {
        let out: Vec<Checked> = nodes
            .iter()
            .zip(&checks)
            .map(|(n, c)| Checked {
                node: &n.name,
                destination: &n.destination,
                check: c,
            })
            .collect();
        return print_json(&out);
    }
    let here = env!("CARGO_PKG_VERSION");
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .zip(&checks)
        .map(|(node, check)| match check {
            Check::Unreachable { reason } => vec![
                node.name.clone(),
                "unreachable".into(),
                String::new(),
                String::new(),
                String::new(),
                reason.clone(),
            ],
            Check::NoEdgeprof { arch, path } => vec![
                node.name.clone(),
                "no edgeprof".into(),
                String::new(),
                arch.clone(),
                String::new(),
                format!("nothing at {path}: run edgeprof nodes install"),
            ],
            Check::Broken { reason } => vec![
                node.name.clone(),
                "broken".into(),
                String::new(),
                String::new(),
                String::new(),
                reason.clone(),
            ],
            Check::Ready {
                info,
                workdir_error,
                ..
            } => {
                let f = &info.fingerprint;
                let device = format!(
                    "{} {}, {} CPU(s)",
                    info.arch,
                    f.board
                        .clone()
                        .or_else(|| f.cpu_model.clone())
                        .unwrap_or_default(),
                    f.cpus_available
                );
                let ready: Vec<&str> = info
                    .engines
                    .iter()
                    .filter(|(_, ok, _)| *ok)
                    .map(|(name, _, _)| name.as_str())
                    .collect();
                let mut note = workdir_error.clone().unwrap_or_default();
                if info.edgeprof_version != here {
                    if !note.is_empty() {
                        note.push_str("; ");
                    }
                    note.push_str(&format!("this edgeprof is {here}: edgeprof nodes install"));
                }
                vec![
                    node.name.clone(),
                    "ready".into(),
                    info.edgeprof_version.clone(),
                    device,
                    ready.join(", "),
                    note,
                ]
            }
        })
        .collect();
    let mut out = render::table(
        &[
            "node",
            "state",
            "edgeprof",
            "device",
            "frameworks ready",
            "note",
        ],
        &[false; 6],
        &rows,
    );
    let ready = checks
        .iter()
        .filter(|c| matches!(c, Check::Ready { .. }))
        .count();
    out.push_str(&format!("\n{ready} of {} node(s) ready\n", nodes.len()));
    // What `edgeprof train` needs on each member beside edgeprof: a training framework.
    for framework in edgeprof::config::TRAIN_FRAMEWORKS {
        let with: Vec<&str> = nodes
            .iter()
            .zip(&checks)
            .filter(|(_, c)| match c {
                Check::Ready { info, .. } => info
                    .engines
                    .iter()
                    .any(|(name, ok, _)| *ok && name == framework),
                _ => false,
            })
            .map(|(n, _)| n.name.as_str())
            .collect();
        out.push_str(&format!(
            "ready to train with {framework}: {}\n",
            if with.is_empty() {
                format!("none (edgeprof env setup {framework} on each node)")
            } else {
                with.join(", ")
            }
        ));
    }
    print_out(&out)
}

fn install(config: Option<&Path>, binary: Option<&Path>, force: bool) -> anyhow::Result<()> {
    let nodes = nodes_of(config)?;
    let path = match binary {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe().context("cannot locate this edgeprof binary")?,
    };
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let Some(arch) = fleet::elf_arch(&bytes) else {
        anyhow::bail!(BadInput(format!(
            "{} is not an ELF executable",
            path.display()
        )));
    };
    let binary = fleet::install::Binary {
        bytes,
        arch,
        this_one: binary.is_none(),
    };
    let mut failed = 0;
    for node in &nodes {
        let copying = || {
            errln!(
                "{}: copying {} ({}) to {} …",
                node.name,
                path.display(),
                render::bytes(binary.bytes.len() as u64),
                node.edgeprof
            )
        };
        let outcome = fleet::install::install(node, &binary, force, copying);
        failed += usize::from(outcome.failed());
        match outcome {
            Installed::NotAPath => errln!(
                "{}: nodes.edgeprof = {:?} is a name looked up on the node's PATH, not a place to \
                 install to: give a path (the default is {})",
                node.name,
                node.edgeprof,
                edgeprof::config::DEFAULT_NODE_EDGEPROF
            ),
            Installed::Unreachable(why) => errln!("{}: unreachable: {why}", node.name),
            Installed::OtherArch {
                arch: node_arch,
                target,
            } => errln!(
                "{}: the node is {node_arch} and {} is {arch}: build one for it with `cargo build \
                 --release --target {target}` (README, Install) and run `edgeprof nodes install \
                 --binary target/{target}/release/edgeprof`",
                node.name,
                path.display()
            ),
            Installed::AlreadyThere(there) => {
                errln!("{}: {there} is already at {}", node.name, node.edgeprof)
            }
            Installed::Copied(says) => errln!("{}: installed; it says {says}", node.name),
            Installed::CopyFailed(why) => errln!("{}: the copy failed: {why}", node.name),
        }
    }
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} node(s) were not installed (see above)",
            nodes.len()
        );
    }
    Ok(())
}

/// `edgeprof node-info`: this machine as a node describes itself, as JSON.
pub fn node_info() -> anyhow::Result<()> {
    let info = fleet::node_info();
    let text = serde_json::to_string(&info).context("cannot encode the node's description")?;
    super::print_raw(&(text + "\n"))
}

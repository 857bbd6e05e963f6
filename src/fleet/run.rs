//! Fleet runs: each node runs the whole matrix headless (`edgeprof run - --stream`,
//! the config on stdin, over SSH or as a local child), streaming JSON lines back; the
//! controller keeps each node's stream as a results directory `FLEET/NODE/` with the node's own
//! device fingerprint, and `fleet.json` says how every node ended. A node whose stream breaks
//! is resumed once (`run --resume` of its own directory, which re-attaches to the node's first
//! run when a half-dead link left it measuring: see [`super::attach`]); if it still cannot
//! finish, each of its conditions without a result gets a failure record naming the drop; a
//! node that never starts its share (unreachable, no edgeprof) gets one for every condition,
//! naming why, in a results directory of its own: never silently missing. A run cancelled from
//! the controller closes each node's stdin, its control channel: every node stops its sweep,
//! keeping (and streaming) what it finished, and is not resumed.

use super::launch::{drop_reason, launch};
use super::{Line, SHARE_END};
use crate::collect::device::Fingerprint;
use crate::collect::stop::Cancel;
use crate::config::{Config, ModelRef, Node};
use crate::error::Context;
use crate::results::{self, Manifest, RunRecord, SweepStatus};
use crate::runner::matrix::{self, Condition, Skipped};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// The file that makes a directory a fleet run's.
pub const FLEET: &str = crate::config::node_name::FLEET_FILE;

/// Where one share of the matrix runs.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    /// None: this machine (a child edgeprof).
    pub node: Option<Node>,
}

/// How a node's share ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeStatus {
    /// Every condition has its result (ok or failed).
    Complete,
    /// The node dropped; conditions it did not finish are recorded as failures.
    Dropped,
    /// The node never started its share.
    Unreachable,
    /// The run was cancelled from the controller: the node stopped, keeping what it finished;
    /// the conditions it did not reach have no record.
    Cancelled,
}

impl NodeStatus {
    /// The status in one word, as `fleet.json` writes it.
    pub fn word(self) -> &'static str {
        match self {
            NodeStatus::Complete => "complete",
            NodeStatus::Dropped => "dropped",
            NodeStatus::Unreachable => "unreachable",
            NodeStatus::Cancelled => "cancelled",
        }
    }
}

/// A node's line of `fleet.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeOutcome {
    pub name: String,
    pub destination: Option<String>,
    pub status: NodeStatus,
    /// Why it dropped or could not start (ssh's or edgeprof's last words).
    pub reason: Option<String>,
    /// Resumptions after a drop.
    pub resumed: usize,
    /// The node's own results directory (on the node).
    pub remote_dir: Option<PathBuf>,
    pub conditions: usize,
    pub ok: usize,
    pub failed: usize,
}

/// `fleet.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetManifest {
    pub name: String,
    pub config_file: PathBuf,
    pub started: String,
    pub ended: Option<String>,
    pub nodes: Vec<NodeOutcome>,
}

/// What the controller hears from the node threads.
#[derive(Debug, Clone)]
pub enum FleetEvent {
    Started {
        node: String,
        conditions: usize,
        device: String,
    },
    Record {
        node: String,
        record: Box<RunRecord>,
    },
    Dropped {
        node: String,
        reason: String,
        resuming: bool,
    },
    Finished(NodeOutcome),
}

/// The config's `matrix.nodes` as targets (`local`: this machine).
pub fn targets(config: &Config) -> Vec<Target> {
    config
        .matrix
        .nodes
        .iter()
        .map(|name| Target {
            name: name.clone(),
            node: config.nodes.iter().find(|n| &n.name == name).cloned(),
        })
        .collect()
}

/// The results directory of node `name` in the fleet directory `fleet_dir`: always a
/// directory right inside it, whatever the name (see [`super::dir_name`]).
pub fn node_dir(fleet_dir: &Path, name: &str) -> PathBuf {
    fleet_dir.join(super::dir_name(name))
}

/// Writes `fleet.json` into `dir`.
pub fn write_manifest(dir: &Path, manifest: &FleetManifest) -> Result<(), super::FleetError> {
    let path = dir.join(FLEET);
    let failed = |reason: String| super::FleetError::Manifest {
        path: path.clone(),
        reason,
    };
    let text = serde_json::to_string_pretty(manifest).map_err(|e| failed(e.to_string()))?;
    results::write_atomic(&path, (text + "\n").as_bytes()).map_err(|e| failed(format!("{e:#}")))
}

/// Why a config cannot be sent to nodes as it is, if it cannot.
pub fn unshareable(config: &Config) -> Option<String> {
    if let Some(ModelRef::Onnx(path)) = config
        .matrix
        .models
        .iter()
        .find(|m| matches!(m, ModelRef::Onnx(_)))
    {
        return Some(format!(
            "a fleet run sends the config, not files: the ONNX model {} would have to be on every \
             node (use zoo models, or run on each node)",
            path.display()
        ));
    }
    if config.matrix.engines.iter().any(|e| e == "command") {
        return Some(
            "a fleet run sends the config, not programs: the command engine's program would have \
             to be on every node"
                .to_string(),
        );
    }
    None
}

/// The config each node runs: the controller's, without its nodes or output directory.
pub fn share_text(config_text: &str) -> Result<String, super::FleetError> {
    let share =
        |what: &str, e: &dyn std::fmt::Display| super::FleetError::Share(format!("{what}: {e}"));
    let mut table: toml::Table =
        toml::from_str(config_text).map_err(|e| share("cannot be read again", &e))?;
    table.remove("nodes");
    table.remove("output");
    // A node runs the matrix; a study is the controller's to run across them.
    table.remove("train");
    if let Some(toml::Value::Table(matrix)) = table.get_mut("matrix") {
        matrix.remove("nodes");
    }
    Ok(format!(
        "# The share of a fleet run that edgeprof sent to this node.\n{}",
        toml::to_string(&table).map_err(|e| share("cannot be written", &e))?
    ))
}

/// What every node runs: the config text it is sent, and that config as resolved here.
#[derive(Debug, Clone)]
pub struct Share {
    /// The config each node runs (see [`share_text`]).
    pub text: String,
    /// The controller's config file (relative paths in the share resolve against it).
    pub config_file: PathBuf,
    /// The share resolved, every default filled in.
    pub config: serde_json::Value,
    pub name: String,
    /// The conditions its matrix expands to (before any node checks its frameworks): what a
    /// node that never starts its share is recorded as owing.
    pub conditions: Vec<Condition>,
    /// Those no machine can run, and the rules' exclusions.
    pub skipped: Vec<Skipped>,
    pub excluded: usize,
}

/// The share of the config text `config_text` read from `file`.
pub fn share(config_text: &str, file: &Path) -> Result<Share, super::FleetError> {
    let text = share_text(config_text)?;
    let config = crate::config::parse(&text, file)
        .map_err(|e| super::FleetError::Share(format!("does not resolve: {e}")))?;
    let plan = matrix::expand(&config);
    Ok(Share {
        config_file: std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()),
        config: serde_json::to_value(&config)
            .map_err(|e| super::FleetError::Share(format!("cannot be encoded: {e}")))?,
        name: config.name,
        conditions: plan.to_run,
        skipped: plan.skipped,
        excluded: plan.excluded,
        text,
    })
}

/// The device of a node that never answered.
fn unknown_device() -> Fingerprint {
    Fingerprint {
        hostname: None,
        arch: "unknown".to_string(),
        cpu_model: None,
        board: None,
        cpus_online: None,
        cpus_available: 0,
        caches: Vec::new(),
        kernel: None,
        os: None,
        memory_total_bytes: None,
        clusters: Vec::new(),
        simd: Vec::new(),
    }
}

/// For a node that never started its share: a results directory in `node_dir` where each of
/// the share's conditions failed for `reason`, each record also sent as an event. The records
/// are sent even where the directory cannot be written.
fn record_unstarted(
    target: &Target,
    share: &Share,
    node_dir: &Path,
    reason: &str,
    send: &dyn Fn(FleetEvent),
) {
    let now = crate::text::now_rfc3339();
    let manifest = Manifest {
        format: results::FORMAT,
        edgeprof_version: env!("CARGO_PKG_VERSION").to_string(),
        name: share.name.clone(),
        config_file: share.config_file.clone(),
        config_text: share.text.clone(),
        config: share.config.clone(),
        device: unknown_device(),
        engines: Default::default(),
        conditions: share.conditions.clone(),
        skipped: share.skipped.clone(),
        excluded: share.excluded,
        started: now.clone(),
        ended: Some(now.clone()),
        resumed: Vec::new(),
        files: Default::default(),
        status: SweepStatus::Interrupted,
        board_state: None,
    };
    let mut writer = std::fs::create_dir_all(node_dir)
        .with_context(|| format!("cannot create {}", node_dir.display()))
        .and_then(|_| results::write_manifest(node_dir, &manifest))
        .and_then(|_| results::Writer::open(node_dir))
        .ok();
    let why = format!("node {} never started its share: {reason}", target.name);
    record_failures(target, share.conditions.iter(), &why, writer.as_mut(), send);
}

/// A failure record for each of `conditions` (a node that never ran them), kept in the node's
/// directory when it could be opened and told to the front-end.
fn record_failures<'a>(
    target: &Target,
    conditions: impl Iterator<Item = &'a Condition>,
    why: &str,
    mut writer: Option<&mut results::Writer>,
    send: &dyn Fn(FleetEvent),
) {
    for condition in conditions {
        let record = RunRecord {
            condition: condition.clone(),
            attempt: 1,
            last: true,
            started: crate::text::now_rfc3339(),
            ok: false,
            reason: Some(why.to_string()),
            failure: None,
            run: None,
            stats: None,
            resources: Default::default(),
            telemetry: None,
            repetition: None,
            drift: None,
            ran_on: None,
            state_changes: Vec::new(),
        };
        if let Some(w) = writer.as_deref_mut() {
            let _ = w.run(&record);
        }
        send(FleetEvent::Record {
            node: target.name.clone(),
            record: Box::new(record),
        });
    }
}

/// Runs one target's share to its end, keeping its stream in `fleet_dir/NAME/`.
async fn run_node(
    target: &Target,
    share: &Share,
    fleet_dir: &Path,
    cancel: &Cancel,
    send: &dyn Fn(FleetEvent),
) -> NodeOutcome {
    let node_dir = node_dir(fleet_dir, &target.name);
    let mut outcome = NodeOutcome {
        name: target.name.clone(),
        destination: target.node.as_ref().map(|n| n.destination.clone()),
        status: NodeStatus::Unreachable,
        reason: None,
        resumed: 0,
        remote_dir: None,
        conditions: 0,
        ok: 0,
        failed: 0,
    };
    let mut manifest: Option<Manifest> = None;
    let mut writer: Option<results::Writer> = None;
    let mut done: HashSet<String> = HashSet::new();
    let mut seen: HashSet<(String, usize, String)> = HashSet::new();
    let mut complete = false;
    let mut local_failure = false;
    let cancelled = || cancel.is_raised();
    // The first attempt, then one resumption (or one fresh start when it never began).
    for attempt in 0..2 {
        if cancelled() {
            break;
        }
        let resume = outcome.remote_dir.clone();
        let launched = launch(target, fleet_dir, resume.as_deref()).and_then(|(spec, log)| {
            let command = spec
                .tokio_command()
                .map_err(|e| crate::error::failed!("cannot start it: {e}"))?;
            Ok((command, log))
        });
        let (mut command, ssh_log) = match launched {
            Ok(c) => c,
            Err(e) => {
                outcome.reason = Some(format!("{e:#}"));
                break;
            }
        };
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A controller that dies takes its nodes' children with it.
        command.kill_on_drop(true);
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => {
                outcome.reason = Some(format!("cannot start it: {e}"));
                break;
            }
        };
        // Kept open: closing it is how a cancel reaches the node.
        let mut control = child.stdin.take();
        if let (Some(stdin), None) = (control.as_mut(), &resume) {
            let text = format!("{}\n{SHARE_END}\n", share.text);
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.flush().await;
        }
        let stderr = child.stderr.take().map(|mut s| {
            tokio::spawn(async move {
                let mut text = String::new();
                let _ = s.read_to_string(&mut text).await;
                text
            })
        });
        // Once cancelled: the control channel is closed at once, the child killed if it has
        // not ended within the grace.
        let mut grace: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        let mut lines = child.stdout.take().map(|s| BufReader::new(s).lines());
        while let Some(reader) = lines.as_mut() {
            let line = tokio::select! {
                line = reader.next_line() => line,
                () = cancel.raised(), if control.is_some() => {
                    drop(control.take());
                    grace = Some(Box::pin(tokio::time::sleep(CANCEL_GRACE)));
                    continue;
                },
                () = async {
                    match grace.as_mut() {
                        Some(grace) => grace.await,
                        None => std::future::pending().await,
                    }
                }, if grace.is_some() => {
                    let _ = child.start_kill();
                    grace = None;
                    continue;
                },
            };
            let Ok(Some(line)) = line else { break };
            let Ok(parsed) = serde_json::from_str::<Line>(&line) else {
                continue; // Not a stream line (a banner of the remote shell).
            };
            match parsed {
                Line::Started { dir, manifest: m } => {
                    outcome.remote_dir = Some(dir);
                    if manifest.is_none() {
                        let opened = std::fs::create_dir_all(&node_dir)
                            .with_context(|| format!("cannot create {}", node_dir.display()))
                            .and_then(|_| results::write_manifest(&node_dir, &m))
                            .and_then(|_| results::Writer::open(&node_dir));
                        match opened {
                            Ok(w) => writer = Some(w),
                            Err(e) => {
                                outcome.reason = Some(format!("{e:#}"));
                                local_failure = true;
                                let _ = child.start_kill();
                                break;
                            }
                        }
                        send(FleetEvent::Started {
                            node: target.name.clone(),
                            conditions: m.conditions.len(),
                            device: device_line(&m),
                        });
                        manifest = Some(*m);
                    }
                }
                Line::Record(record) => {
                    // A node that re-attached to its own sweep sends every record it holds,
                    // those this controller already has too.
                    let key = (
                        record.condition.id.clone(),
                        record.attempt,
                        record.started.clone(),
                    );
                    if !seen.insert(key) {
                        continue;
                    }
                    if let Some(w) = writer.as_mut() {
                        let _ = w.run(&record);
                    }
                    if record.ok || record.last {
                        done.insert(record.condition.id.clone());
                    }
                    send(FleetEvent::Record {
                        node: target.name.clone(),
                        record,
                    });
                }
                Line::Finished { manifest: m } => {
                    let _ = results::write_manifest(&node_dir, &m);
                    complete = m.status == SweepStatus::Complete;
                    manifest = Some(*m);
                }
            }
        }
        drop(lines);
        // Its output ended (or is no longer read): it ends by itself, or is killed once the
        // grace of a cancel (raised before or now) or of a local failure is over.
        let status = tokio::select! {
            status = child.wait() => status.ok(),
            () = async {
                match grace.take() {
                    Some(grace) => grace.await,
                    None => {
                        if !local_failure {
                            cancel.raised().await;
                        }
                        tokio::time::sleep(CANCEL_GRACE).await;
                    }
                }
            } => {
                let _ = child.start_kill();
                child.wait().await.ok()
            },
        };
        drop(control);
        let said = match stderr {
            Some(task) => task.await.unwrap_or_default(),
            None => String::new(),
        };
        // This machine could not keep the node's results: its reason stands, and trying the
        // node again would meet the same wall.
        if complete || local_failure || cancelled() {
            break;
        }
        let ssh_said = ssh_log.map(|log| std::fs::read_to_string(log.path()).unwrap_or_default());
        let reason = drop_reason(status, ssh_said.as_deref(), &said);
        let again = attempt == 0;
        send(FleetEvent::Dropped {
            node: target.name.clone(),
            reason: reason.clone(),
            resuming: again,
        });
        outcome.reason = Some(reason);
        if again {
            if outcome.remote_dir.is_some() {
                outcome.resumed += 1;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = cancel.raised() => {}
            }
        }
    }
    if let Some(m) = manifest.as_mut() {
        outcome.conditions = m.conditions.len();
        if complete {
            outcome.status = NodeStatus::Complete;
            outcome.reason = None;
        } else if cancelled() {
            // What it finished is recorded; what it did not reach stays without a record.
            outcome.status = NodeStatus::Cancelled;
            outcome.reason = Some("the run was cancelled".to_string());
            if m.status != SweepStatus::Interrupted || m.ended.is_none() {
                m.status = SweepStatus::Interrupted;
                m.ended = Some(crate::text::now_rfc3339());
                let _ = results::write_manifest(&node_dir, m);
            }
        } else {
            outcome.status = NodeStatus::Dropped;
            let why = format!(
                "node {} dropped before this condition finished: {}",
                target.name,
                outcome.reason.as_deref().unwrap_or("no reason given")
            );
            record_failures(
                target,
                m.conditions.iter().filter(|c| !done.contains(&c.id)),
                &why,
                writer.as_mut(),
                &send,
            );
            m.status = SweepStatus::Interrupted;
            m.ended = Some(crate::text::now_rfc3339());
            let _ = results::write_manifest(&node_dir, m);
        }
        if let Ok(stored) = results::load(&node_dir) {
            let rows = results::summary::rows(&stored.manifest, &stored.runs);
            let (ok, failed, not_run, _) = results::summary::counts(&rows);
            outcome.ok = ok;
            // A cancelled node's conditions not run were never owed a result.
            outcome.failed = failed + if cancelled() { 0 } else { not_run };
        }
    } else if cancelled() {
        outcome.status = NodeStatus::Cancelled;
        outcome.reason = Some("the run was cancelled before it started".to_string());
        outcome.conditions = share.conditions.len();
    } else {
        // It never started: every condition it owed fails for the reason it could not start.
        let reason = outcome
            .reason
            .get_or_insert_with(|| "it never started, without a message".to_string())
            .clone();
        record_unstarted(target, share, &node_dir, &reason, send);
        outcome.conditions = share.conditions.len();
        outcome.failed = share.conditions.len();
    }
    send(FleetEvent::Finished(outcome.clone()));
    outcome
}

/// The device a node reported, in a few words.
pub fn device_line(m: &Manifest) -> String {
    let d = &m.device;
    if *d == unknown_device() {
        return "unknown (never reached)".to_string();
    }
    format!(
        "{} {}, {} CPU(s)",
        d.arch,
        d.board
            .clone()
            .or_else(|| d.cpu_model.clone())
            .unwrap_or_default(),
        d.cpus_available
    )
}

/// How long a cancelled node has to stop by itself before its child (the ssh client, or the
/// local edgeprof) is killed.
const CANCEL_GRACE: Duration = Duration::from_millis(1200);

/// What drives a fleet run's async work: the runtime of the front-end's process (one per
/// process), which this thread runs itself (`edgeprof run` on the CLI's main thread), or which
/// another thread is running (the terminal UI's event loop drives it while the run's own thread
/// waits here).
pub enum Driver<'a> {
    Own(&'a tokio::runtime::Runtime),
    Shared(tokio::runtime::Handle),
}

impl Driver<'_> {
    fn block_on<F: std::future::Future>(&self, work: F) -> F::Output {
        match self {
            Driver::Own(runtime) => runtime.block_on(work),
            Driver::Shared(handle) => handle.block_on(work),
        }
    }
}

/// Runs every target's share at once; each node's stream lands in `fleet_dir/NAME/`. Raising
/// `cancel` stops every node within about [`CANCEL_GRACE`]: each keeps what it finished and
/// ends [`NodeStatus::Cancelled`].
///
/// The front-end's runtime (`driver`) drives every node: each node's child (ssh, or the local
/// edgeprof) is a tokio child process whose stream is read as it comes, beside the cancel and
/// the grace timer, so nothing wakes up to look while the nodes measure.
pub fn run_all(
    targets: &[Target],
    share: &Share,
    fleet_dir: &Path,
    cancel: &Cancel,
    driver: &Driver,
    send: impl Fn(FleetEvent),
) -> Vec<NodeOutcome> {
    let unreached = |t: &Target, reason: String| NodeOutcome {
        name: t.name.clone(),
        destination: t.node.as_ref().map(|n| n.destination.clone()),
        status: NodeStatus::Unreachable,
        reason: Some(reason),
        resumed: 0,
        remote_dir: None,
        conditions: 0,
        ok: 0,
        failed: 0,
    };
    let send = &send;
    driver.block_on(async {
        use futures_util::FutureExt;
        let nodes = targets.iter().map(|t| {
            // A node whose controller panics ends alone; the others go on.
            std::panic::AssertUnwindSafe(run_node(t, share, fleet_dir, cancel, send)).catch_unwind()
        });
        let ended = futures_util::future::join_all(nodes).await;
        ended
            .into_iter()
            .zip(targets)
            .map(|(outcome, t)| {
                outcome.unwrap_or_else(|_| unreached(t, "its controller panicked".into()))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_drops_nodes_and_output_and_keeps_the_rest() -> crate::error::Result<()> {
        let text = "name = \"f\"\n[matrix]\nengines = [\"tract\"]\nnodes = [\"a\", \"local\"]\n\
                    [output]\ndir = \"/x\"\n[[nodes]]\nname = \"a\"\ndestination = \"pi\"\n";
        let share = share_text(text)?;
        let config = crate::config::parse(&share, Path::new("stdin.toml"))
            .map_err(|e| crate::error::failed!("{e}"))?;
        assert_eq!(config.name, "f");
        assert_eq!(config.matrix.engines, ["tract"]);
        assert_eq!(config.matrix.nodes, [crate::config::LOCAL_NODE]);
        assert!(config.nodes.is_empty());
        assert_eq!(config.output.dir, PathBuf::from("results"));
        // What the controller records for a node that never starts: the share's conditions.
        let resolved = super::share(text, Path::new("/nonexistent/f.toml"))?;
        assert_eq!(resolved.text, share_text(text)?);
        assert_eq!(resolved.name, "f");
        assert_eq!(resolved.conditions, matrix::expand(&config).to_run);
        assert!(!resolved.conditions.is_empty());
        Ok(())
    }

    #[test]
    fn onnx_files_and_command_programs_cannot_be_shared() -> crate::error::Result<()> {
        let parse = |t: &str| {
            crate::config::parse(t, Path::new("/nonexistent/c.toml"))
                .map_err(|e| crate::error::failed!("{e}"))
        };
        let zoo = parse("[matrix]\nmodels = [\"resnet34\"]\n")?;
        assert_eq!(unshareable(&zoo), None);
        let command = parse("[matrix]\nengines = [\"command\"]\n[command]\nprogram = \"sh\"\n")?;
        assert!(unshareable(&command).is_some_and(|w| w.contains("command engine")));
        Ok(())
    }
}

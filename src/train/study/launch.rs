//! One cluster size on its members: `edgeprof train-rank` on each (over SSH, or as a child of
//! this process), its spec on the stream's stdin, its [`NodeLine`]s read back. The first member
//! to fail (its rank ended badly, it could not start, or its stream broke: a board unplugged,
//! ssh gone) fails the size: every other member's control channel is closed, which stops its
//! rank, and after a grace its stream is killed. So a node dropping mid-training is a recorded
//! failure of that size, never a hang.

use super::{Member, NodeRecord, Study, TrainEvent};
use crate::collect::child::{self, Spec, Started};
use crate::collect::stop::Cancel;
use crate::fleet::{command_line, ssh, Word};
use crate::train::cluster::{DataSpec, NodeLine, RankSpec};
use crate::train::{Done, Epoch, Trained};
use std::io::Write;
use std::path::Path;
use std::process::ChildStdin;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long members have, once their control channel is closed, to stop and say so before
/// their streams are killed.
const STOP_GRACE: Duration = Duration::from_secs(15);
/// Longest line of a member's stream read, in bytes: its lines are short records.
const MAX_LINE: usize = 1 << 20;
/// Milliseconds between a member's samples.
const SAMPLE_MS: u64 = 1000;

/// What one size left: each member's record, and the training or why it failed.
pub struct Ran {
    pub records: Vec<NodeRecord>,
    pub result: Result<Trained, String>,
}

/// One member's stream.
struct Stream {
    child: Option<Started>,
    stdin: Option<ChildStdin>,
    /// Its stdout ended.
    closed: bool,
}

/// What the loop hears.
enum Heard {
    Line(usize, NodeLine),
    Closed(usize),
    Cancelled,
}

/// The command that runs `edgeprof train-rank` on `member`, with its working directory.
fn command(member: &Member, local_workdir: &Path) -> Spec {
    match &member.node {
        Some(node) => ssh(
            node,
            &command_line(&[
                Word::Data(node.edgeprof.clone()),
                Word::Data("train-rank".to_string()),
                Word::Data("--workdir".to_string()),
                Word::Data(node.workdir.clone()),
            ]),
        ),
        None => {
            let exe = std::env::current_exe().unwrap_or_else(|_| "edgeprof".into());
            let mut c = Spec::new(exe);
            c.arg("train-rank").arg("--workdir").arg(local_workdir);
            c
        }
    }
}

/// Trains one size.
pub fn size(
    study: &Study,
    study_id: &str,
    dir: &Path,
    data: &DataSpec,
    size: usize,
    cancel: &Cancel,
    send: &(dyn Fn(TrainEvent) + Sync),
) -> Ran {
    let members = &study.cluster[..size];
    let endpoints: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(rank, m)| {
            let port = u32::from(study.port) + rank as u32;
            if m.address.contains(':') && !m.address.starts_with('[') {
                format!("[{}]:{port}", m.address)
            } else {
                format!("{}:{port}", m.address)
            }
        })
        .collect();
    // Ranks on this machine share its cores.
    let here = members.iter().filter(|m| m.node.is_none()).count().max(1);
    let local_threads = (crate::collect::device::available_cores() / here).max(1);
    let mut records: Vec<NodeRecord> = members
        .iter()
        .enumerate()
        .map(|(rank, m)| NodeRecord {
            name: m.name.clone(),
            destination: m.node.as_ref().map(|n| n.destination.clone()),
            rank,
            fingerprint: None,
            python: None,
            threads: None,
            end: None,
            failure: None,
        })
        .collect();
    let (tx, heard) = mpsc::channel::<Heard>();
    let mut streams = Vec::new();
    let mut failure: Option<String> = None;
    for (rank, m) in members.iter().enumerate() {
        let spec = RankSpec {
            study: study_id.to_string(),
            framework: study.framework,
            model: study.model.clone(),
            epochs: study.epochs,
            batch: study.batch,
            lr: study.lr,
            seed: study.seed,
            data: data.clone(),
            world: size,
            rank,
            endpoints: endpoints.clone(),
            threads: study
                .threads
                .unwrap_or(if m.node.is_none() { local_threads } else { 0 }),
            python: study.python.clone(),
            timeout_s: study.timeout.as_secs(),
            sample_ms: SAMPLE_MS,
        };
        let workdir = dir
            .join("work")
            .join(crate::config::node_name::dir_name(&m.name));
        match start(rank, command(m, &workdir), &spec, &tx) {
            Ok(s) => streams.push(s),
            Err(why) => {
                records[rank].failure = Some(why.clone());
                failure.get_or_insert(format!("{}: {why}", m.name));
                streams.push(Stream {
                    child: None,
                    stdin: None,
                    closed: true,
                });
            }
        }
    }
    let on_cancel = {
        let tx = tx.clone();
        cancel.on_raise(move || {
            let _ = tx.send(Heard::Cancelled);
        })
    };
    drop(tx);
    let deadline = Instant::now() + study.timeout + STOP_GRACE;
    let mut stopping: Option<Instant> = None;
    if failure.is_some() || cancel.is_raised() {
        stop(&mut streams, &mut stopping);
    }
    let mut epochs: Vec<Epoch> = Vec::new();
    let mut done: Option<Done> = None;
    while streams.iter().any(|s| !s.closed) {
        let until = match stopping {
            Some(at) => (at + STOP_GRACE).min(deadline),
            None => deadline,
        };
        match heard.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Heard::Line(rank, line)) => {
                let name = &members[rank].name;
                let record = &mut records[rank];
                match line {
                    NodeLine::Started {
                        fingerprint,
                        python,
                        threads,
                    } => {
                        send(TrainEvent::NodeReady {
                            nodes: size,
                            node: name.clone(),
                            device: describe(&fingerprint),
                        });
                        record.fingerprint = Some(*fingerprint);
                        record.python = Some(python);
                        record.threads = Some(threads);
                    }
                    NodeLine::Epoch(e) => {
                        send(TrainEvent::Epoch {
                            nodes: size,
                            epochs: study.epochs,
                            epoch: e.clone(),
                        });
                        epochs.push(e);
                    }
                    NodeLine::Done(d) => done = Some(d),
                    NodeLine::Sample(sample) => send(TrainEvent::NodeSample {
                        nodes: size,
                        node: name.clone(),
                        sample,
                    }),
                    NodeLine::Ended(end) => {
                        if let (false, Some(why), None) = (end.ok, &end.reason, stopping) {
                            failure.get_or_insert(format!("{name}: {why}"));
                        }
                        record.end = Some(end);
                    }
                    NodeLine::Failed { reason } => {
                        if stopping.is_none() {
                            failure.get_or_insert(format!("{name}: {reason}"));
                        }
                        record.failure = Some(reason);
                    }
                }
                if failure.is_some() && stopping.is_none() {
                    stop(&mut streams, &mut stopping);
                }
            }
            Ok(Heard::Closed(rank)) => {
                streams[rank].closed = true;
                let record = &mut records[rank];
                if record.end.is_none() && record.failure.is_none() {
                    // The stream broke before the member said how its rank ended.
                    let said = streams[rank]
                        .child
                        .as_ref()
                        .map(|c| c.stderr(Duration::from_secs(1)))
                        .unwrap_or_default();
                    let last = crate::text::last_lines(&said, 1).join(" ");
                    let why = if last.trim().is_empty() {
                        "its stream ended before it said how its rank ended".to_string()
                    } else {
                        format!("its stream ended: {}", last.trim())
                    };
                    if stopping.is_none() {
                        failure.get_or_insert(format!("{}: {why}", members[rank].name));
                        stop(&mut streams, &mut stopping);
                    }
                    record.failure = Some(why);
                }
            }
            Ok(Heard::Cancelled) => stop(&mut streams, &mut stopping),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                if now >= deadline && stopping.is_none() {
                    failure.get_or_insert(format!(
                        "the cluster did not finish within {} s",
                        study.timeout.as_secs()
                    ));
                    stop(&mut streams, &mut stopping);
                } else if stopping.is_some_and(|at| now >= at + STOP_GRACE) || now >= deadline {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(on_cancel);
    // Streams still open after the grace are killed (with what they started here); each is
    // reaped.
    for s in &mut streams {
        if let Some(mut child) = s.child.take() {
            child.signal_group(nix::sys::signal::Signal::SIGKILL);
            let _ = child.reap();
        }
    }
    let busiest = records
        .iter()
        .map(|r| {
            let (rx, tx) = r.traffic();
            rx + tx
        })
        .max()
        .unwrap_or(0);
    let ended = done.is_some();
    let result = match (failure, done) {
        (Some(why), _) => Err(why),
        _ if cancel.is_raised() => Err("cancelled".to_string()),
        (None, Some(d)) if epochs.len() == study.epochs => Ok(Trained {
            nodes: size,
            wall_s: d.wall_s,
            epochs,
            framework: Some(d.framework),
            busiest_link_bytes: busiest,
        }),
        (None, _) => Err(format!(
            "every member ended, but rank 0 reported {} of {} epochs and {}",
            epochs.len(),
            study.epochs,
            if ended { "its end" } else { "no end" }
        )),
    };
    Ran { records, result }
}

/// Closes every member's control channel (once): each stops its rank and says so.
fn stop(streams: &mut [Stream], stopping: &mut Option<Instant>) {
    if stopping.is_none() {
        *stopping = Some(Instant::now());
    }
    for s in streams {
        s.stdin = None;
    }
}

/// Starts one member's stream and sends it its spec.
fn start(
    rank: usize,
    command: Spec,
    spec: &RankSpec,
    tx: &mpsc::Sender<Heard>,
) -> Result<Stream, String> {
    let text = serde_json::to_string(spec).map_err(|e| e.to_string())? + "\n";
    let mut child = command
        .start_mapped(
            child::Input::Piped,
            child::Output::Lines { max: MAX_LINE },
            tx,
            move |heard| match heard {
                // Anything else (a login banner, a shell's words) is not the member's.
                child::Heard::Line(line) => serde_json::from_str::<NodeLine>(&line)
                    .ok()
                    .map(|parsed| Heard::Line(rank, parsed)),
                child::Heard::Closed => Some(Heard::Closed(rank)),
                _ => None,
            },
            None,
        )
        .map_err(|e| format!("cannot start {:?}: {e}", command.program()))?;
    let mut stdin = child.take_stdin();
    if let Some(input) = stdin.as_mut() {
        // A stream that cannot take its spec has ended: its stdout's end says so below.
        let _ = input
            .write_all(text.as_bytes())
            .and_then(|()| input.flush());
    }
    Ok(Stream {
        child: Some(child),
        stdin,
        closed: false,
    })
}

/// A device in a few words: board or CPU, cores, memory.
fn describe(f: &crate::collect::device::Fingerprint) -> String {
    let what = f
        .board
        .clone()
        .or_else(|| f.cpu_model.clone())
        .unwrap_or_else(|| f.arch.clone());
    let memory = f
        .memory_total_bytes
        .map(|b| format!(", {}", crate::text::bytes(b)))
        .unwrap_or_default();
    format!("{what}, {} cores{memory}", f.cpus_available)
}

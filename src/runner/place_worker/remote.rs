//! A placement unit served by onnxruntime in a child Python process (the unit program,
//! `harness/ort_unit.py`): the CPU or a GPU. The unit holds sub-models exported as ONNX files
//! with the zoo's seeded weights, times them with their input and output on its device, copies
//! tensors to and from the device, and runs a segment of a split plan on a tensor it is handed.
//!
//! The child is started by a thread already confined to the unit's CPUs, so the process and its
//! threads inherit them. It runs in a process group of its own and dies with the thread that
//! holds it (the parent-death signal), so neither a killed worker nor a stuck program leaves it
//! behind; it ends on its own when its stdin closes. Every request has a time limit.

use crate::collect::child::{Heard, Input, Output, Spec, Started};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The unit program, run by the interpreter that has onnxruntime.
const PROGRAM: &str = include_str!("../../engines/harness/ort_unit.py");

/// What runs a unit's blocks when it is not a tract thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitEngine {
    /// The framework; onnxruntime is the one that serves units.
    pub framework: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// The Python interpreter that has the framework.
    pub python: PathBuf,
}

/// How long the unit program may take to answer.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    /// Setting up (importing onnxruntime, starting CUDA) and loading a sub-model (a CUDA
    /// session is created and warmed up).
    pub setup: Duration,
    /// Timing, copying or running one sub-model.
    pub each: Duration,
}

impl Default for Patience {
    fn default() -> Self {
        Patience {
            setup: Duration::from_secs(300),
            each: Duration::from_secs(120),
        }
    }
}

/// One answer: its JSON and its bytes, or what was read instead.
type Answer = Result<(Value, Vec<u8>), String>;

/// A running unit program.
pub struct Remote {
    name: String,
    child: Started,
    /// Taken (closed) when the unit is dropped, so that the program ends.
    stdin: Option<ChildStdin>,
    /// The answers, read by a thread of their own (so a silent program can be waited for).
    answers: mpsc::Receiver<Answer>,
    /// Held by the thread that started the child; dropping it ends that thread, and with it the
    /// child (its parent-death signal).
    _hold: mpsc::Sender<()>,
    /// Told when the child exits (it stays unreaped until `child` is reaped).
    heard: mpsc::Receiver<Heard>,
    exited: bool,
    patience: Patience,
}

/// Reads answers from the program's stdout until it ends or says something else.
fn read_answers(stdout: ChildStdout, answers: mpsc::Sender<Answer>) {
    let mut stdout = BufReader::new(stdout);
    loop {
        let mut line = String::new();
        match stdout.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = match serde_json::from_str::<Value>(&line) {
            Ok(v) => {
                let n = v["bytes"].as_u64().unwrap_or(0) as usize;
                let mut bytes = vec![0u8; n];
                if stdout.read_exact(&mut bytes).is_err() {
                    return;
                }
                Ok((v, bytes))
            }
            Err(e) => Err(format!("answered {:?}, not JSON ({e})", line.trim())),
        };
        let stop = answer.is_err();
        if answers.send(answer).is_err() || stop {
            return;
        }
    }
}

impl Remote {
    /// Starts the program for unit `name` and sets it up on its device, one intra-op thread.
    pub fn start(name: &str, engine: &UnitEngine) -> crate::error::Result<Remote> {
        Remote::start_with(name, engine, Patience::default())
    }

    pub fn start_with(
        name: &str,
        engine: &UnitEngine,
        patience: Patience,
    ) -> crate::error::Result<Remote> {
        if engine.framework != "onnxruntime" {
            crate::error::bail!(
                "unit {name}: {} cannot serve a placement unit; onnxruntime can",
                engine.framework
            );
        }
        let mut spec = Spec::new(&engine.python);
        spec.args(["-c", PROGRAM]);
        // The thread that starts the child holds it (it inherits this thread's CPUs).
        let (spawned_tx, spawned_rx) =
            mpsc::channel::<Result<Started, crate::error::ChildFailed>>();
        let (hold, held) = mpsc::channel::<()>();
        let (heard_tx, heard) = mpsc::channel::<Heard>();
        std::thread::spawn(move || {
            let _ = spawned_tx.send(spec.start(Input::Piped, Output::Taken, &heard_tx, None));
            drop(heard_tx);
            // Until the Remote is dropped.
            let _ = held.recv();
        });
        let mut child = spawned_rx
            .recv()
            .map_err(|_| {
                crate::error::failed!("unit {name}: the thread starting its program ended")
            })?
            .map_err(|e| {
                crate::error::failed!(
                    "unit {name}: cannot start {} for onnxruntime: {e}",
                    engine.python.display()
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.take_stdin(), child.take_stdout()) else {
            crate::error::bail!("unit {name}: the child's pipes were not opened");
        };
        let (answer_tx, answers) = mpsc::channel();
        std::thread::spawn(move || read_answers(stdout, answer_tx));
        let mut remote = Remote {
            name: name.to_string(),
            child,
            stdin: Some(stdin),
            answers,
            _hold: hold,
            heard,
            exited: false,
            patience,
        };
        remote.ask(
            &json!({"op": "setup", "device": engine.device, "threads": 1}),
            &[],
            patience.setup,
        )?;
        Ok(remote)
    }

    /// Sends one request (and its bytes) and waits up to `limit` for the answer (and its bytes).
    fn ask(
        &mut self,
        request: &Value,
        payload: &[u8],
        limit: Duration,
    ) -> crate::error::Result<(Value, Vec<u8>)> {
        let mut line = request.to_string();
        line.push('\n');
        let sent = self.stdin.as_mut().map(|stdin| {
            stdin
                .write_all(line.as_bytes())
                .and_then(|_| stdin.write_all(payload))
                .and_then(|_| stdin.flush())
        });
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.ended());
        }
        let answer = match self.answers.recv_timeout(limit) {
            Ok(Ok(answer)) => answer,
            Ok(Err(what)) => crate::error::bail!("unit {}: the onnxruntime unit {what}", self.name),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(self.ended()),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.kill();
                crate::error::bail!(
                    "unit {}: the onnxruntime unit did not answer {} within {}",
                    self.name,
                    request["op"].as_str().unwrap_or("a request"),
                    crate::collect::child::said(limit)
                );
            }
        };
        if let Some(why) = answer.0["error"].as_str() {
            crate::error::bail!("unit {}: {why}", self.name);
        }
        Ok(answer)
    }

    /// Whether the program has exited by `deadline`.
    fn exited_by(&mut self, deadline: Instant) -> bool {
        if !self.exited {
            let left = deadline.saturating_duration_since(Instant::now());
            // Its exit is all it is heard saying (its stdout is read for answers).
            self.exited = !matches!(
                self.heard.recv_timeout(left),
                Err(mpsc::RecvTimeoutError::Timeout)
            );
        }
        self.exited
    }

    /// Kills the program with whatever it started in its group.
    fn kill(&mut self) {
        self.child.signal_group(nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.reap();
    }

    /// Why the child stopped answering: its exit and its last line on stderr.
    fn ended(&mut self) -> crate::error::Error {
        // A second for it to exit and for its stderr reader to finish, told, not polled.
        let deadline = Instant::now() + Duration::from_secs(1);
        let status = if self.exited_by(deadline) {
            self.child.try_reap().ok().flatten().map(|r| r.status)
        } else {
            None
        };
        let stderr = self
            .child
            .stderr(deadline.saturating_duration_since(Instant::now()));
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| format!(": {}", l.trim()))
            .unwrap_or_default();
        let how = status.map_or("stopped answering".to_string(), |s| format!("ended ({s})"));
        crate::error::failed!("unit {}: the onnxruntime unit {how}{last}", self.name)
    }

    /// Loads sub-model `id` from `path`, its input (of `shape`) placed on the device.
    pub fn load(
        &mut self,
        id: usize,
        path: &Path,
        shape: &[usize],
        seed: u64,
    ) -> crate::error::Result<()> {
        self.ask(
            &json!({"op": "load", "id": id, "path": path, "shape": shape, "seed": seed % (1 << 31)}),
            &[],
            self.patience.setup,
        )
        .map(drop)
    }

    /// One run of sub-model `id`, input and output on the device, in milliseconds.
    pub fn time(&mut self, id: usize) -> crate::error::Result<f64> {
        let (answer, _) = self.ask(&json!({"op": "time", "id": id}), &[], self.patience.each)?;
        answer["ms"]
            .as_f64()
            .ok_or_else(|| crate::error::failed!("unit {}: a time without milliseconds", self.name))
    }

    /// Copies `data` to the device (and keeps it there for [`Remote::fetch`]).
    pub fn put(&mut self, data: &[f32]) -> crate::error::Result<()> {
        let bytes = to_bytes(data);
        self.ask(
            &json!({"op": "put", "bytes": bytes.len()}),
            &bytes,
            self.patience.each,
        )
        .map(drop)
    }

    /// Copies what the last [`Remote::put`] placed on the device back to this process.
    pub fn fetch(&mut self) -> crate::error::Result<Vec<f32>> {
        let (_, bytes) = self.ask(&json!({"op": "fetch"}), &[], self.patience.each)?;
        Ok(from_bytes(&bytes))
    }

    /// Runs sub-model `id` on `data` (of `shape`): the output's shape and values.
    pub fn run(
        &mut self,
        id: usize,
        shape: &[usize],
        data: &[f32],
    ) -> crate::error::Result<(Vec<usize>, Vec<f32>)> {
        let bytes = to_bytes(data);
        let (answer, out) = self.ask(
            &json!({"op": "run", "id": id, "shape": shape, "bytes": bytes.len()}),
            &bytes,
            self.patience.each,
        )?;
        let shape: Vec<usize> = serde_json::from_value(answer["shape"].clone()).map_err(|e| {
            crate::error::failed!("unit {}: an output without a shape ({e})", self.name)
        })?;
        Ok((shape, from_bytes(&out)))
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Its stdin closed, the program ends on its own within two seconds; a stuck one is
        // killed.
        drop(self.stdin.take());
        if self.exited_by(Instant::now() + Duration::from_secs(2)) {
            let _ = self.child.reap();
            return;
        }
        self.kill();
    }
}

fn to_bytes(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in interpreter: a shell script that ignores the program it is given.
    fn stand_in(dir: &Path, body: &str) -> crate::error::Result<UnitEngine> {
        let path = dir.join("python");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        Ok(UnitEngine {
            framework: "onnxruntime".into(),
            device: "cuda:0".into(),
            python: path,
        })
    }

    fn start_error(engine: &UnitEngine) -> String {
        start_error_with(engine, Patience::default())
    }

    fn start_error_with(engine: &UnitEngine, patience: Patience) -> String {
        // A script just written may be busy while another test's child inherits its descriptor
        // between fork and exec: that is tried again.
        for _ in 0..20 {
            match Remote::start_with("gpu", engine, patience) {
                Ok(_) => panic!("a broken unit program started"),
                Err(e) if format!("{e:#}").contains("Text file busy") => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                Err(e) => return e.to_string(),
            }
        }
        panic!("the stand-in stayed busy")
    }

    #[test]
    fn a_unit_program_that_dies_or_talks_nonsense_is_reported_in_a_sentence(
    ) -> crate::error::Result<()> {
        let dir = tempfile::tempdir()?;
        let dies = stand_in(
            dir.path(),
            "echo 'CUDA driver version is insufficient' >&2; exit 3",
        )?;
        let said = start_error(&dies);
        assert!(
            said.starts_with("unit gpu: the onnxruntime unit ended (exit status: 3)")
                && said.ends_with(": CUDA driver version is insufficient"),
            "{said}"
        );
        let nonsense = stand_in(dir.path(), "read line; echo 'Segmentation fault'; sleep 5")?;
        let said = start_error(&nonsense);
        assert!(
            said.starts_with("unit gpu: the onnxruntime unit answered \"Segmentation fault\""),
            "{said}"
        );
        let refuses = stand_in(
            dir.path(),
            "read line; echo '{\"error\": \"no CUDA execution provider\"}'",
        )?;
        assert_eq!(
            start_error(&refuses),
            "unit gpu: no CUDA execution provider"
        );
        let mut other = refuses.clone();
        other.framework = "tflite".into();
        assert!(start_error(&other).contains("onnxruntime can"));
        Ok(())
    }

    #[test]
    fn a_silent_unit_program_is_given_up_on_and_killed() -> crate::error::Result<()> {
        let dir = tempfile::tempdir()?;
        let pid_file = dir.path().join("pid");
        // Reads the request, then says nothing (as a program stuck starting CUDA would).
        let silent = stand_in(
            dir.path(),
            &format!(
                "echo $$ > '{}'; read line; exec sleep 600",
                pid_file.display()
            ),
        )?;
        let patience = Patience {
            setup: Duration::from_millis(500),
            each: Duration::from_millis(500),
        };
        assert_eq!(
            start_error_with(&silent, patience),
            "unit gpu: the onnxruntime unit did not answer setup within 500 ms"
        );
        // It was killed: nothing is left running.
        let pid = std::fs::read_to_string(&pid_file)?;
        let alive = Path::new("/proc").join(pid.trim()).join("stat");
        let state = std::fs::read_to_string(&alive).unwrap_or_default();
        assert!(state.is_empty() || state.contains(") Z"), "{state}");
        Ok(())
    }

    #[test]
    fn tensors_cross_as_little_endian_floats() {
        let values = [0.0f32, -1.5, 3.25e-7, f32::MAX];
        let bytes = to_bytes(&values);
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[4..8], &(-1.5f32).to_le_bytes());
        assert_eq!(from_bytes(&bytes), values);
    }
}

//! A placement unit served by onnxruntime in a child Python process (the unit program,
//! `harness/ort_unit.py`): the CPU or a GPU. The unit holds sub-models exported as ONNX files
//! with the zoo's seeded weights, times them with their input and output on its device, copies
//! tensors to and from the device, and runs a segment of a split plan on a tensor it is handed.
//!
//! The child is started by a thread already confined to the unit's CPUs, so the process and its
//! threads inherit them. It ends when its stdin closes (this side dropped or killed).

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

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

impl UnitEngine {
    pub fn is_gpu(&self) -> bool {
        self.device != "cpu"
    }
}

/// A running unit program.
pub struct Remote {
    name: String,
    child: Child,
    /// Taken (closed) when the unit is dropped, so that the program ends.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The child's last words on stderr, for an error when it ends.
    stderr: Arc<Mutex<String>>,
}

impl Remote {
    /// Starts the program for unit `name` and sets it up on its device, one intra-op thread.
    pub fn start(name: &str, engine: &UnitEngine) -> anyhow::Result<Remote> {
        if engine.framework != "onnxruntime" {
            anyhow::bail!(
                "unit {name}: {} cannot serve a placement unit; onnxruntime can",
                engine.framework
            );
        }
        let mut child = Command::new(&engine.python)
            .args(["-c", PROGRAM])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!(
                    "unit {name}: cannot start {} for onnxruntime",
                    engine.python.display()
                )
            })?;
        let (Some(stdin), Some(stdout), Some(mut err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            anyhow::bail!("unit {name}: the child's pipes were not opened");
        };
        let stderr = Arc::new(Mutex::new(String::new()));
        let keep = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            if let Ok(mut kept) = keep.lock() {
                *kept = text;
            }
        });
        let mut remote = Remote {
            name: name.to_string(),
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            stderr,
        };
        remote.ask(
            &json!({"op": "setup", "device": engine.device, "threads": 1}),
            &[],
        )?;
        Ok(remote)
    }

    /// Sends one request (and its bytes) and reads the answer (and its bytes).
    fn ask(&mut self, request: &Value, payload: &[u8]) -> anyhow::Result<(Value, Vec<u8>)> {
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
        let mut reply = String::new();
        match self.stdout.read_line(&mut reply) {
            Ok(0) | Err(_) => return Err(self.ended()),
            Ok(_) => {}
        }
        let answer: Value = serde_json::from_str(&reply).map_err(|e| {
            anyhow::anyhow!(
                "unit {}: the onnxruntime unit answered {:?}, not JSON ({e})",
                self.name,
                reply.trim()
            )
        })?;
        if let Some(why) = answer["error"].as_str() {
            anyhow::bail!("unit {}: {why}", self.name);
        }
        let n = answer["bytes"].as_u64().unwrap_or(0) as usize;
        let mut bytes = vec![0u8; n];
        self.stdout
            .read_exact(&mut bytes)
            .map_err(|_| self.ended())?;
        Ok((answer, bytes))
    }

    /// Why the child stopped answering: its exit and its last line on stderr.
    fn ended(&mut self) -> anyhow::Error {
        // Give it a moment to exit and its stderr reader to finish.
        let mut status = None;
        for _ in 0..50 {
            if let Ok(Some(s)) = self.child.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let last = self
            .stderr
            .lock()
            .ok()
            .and_then(|t| {
                t.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let how = status.map_or("stopped answering".to_string(), |s| format!("ended ({s})"));
        anyhow::anyhow!("unit {}: the onnxruntime unit {how}: {last}", self.name)
    }

    /// Loads sub-model `id` from `path`, its input (of `shape`) placed on the device.
    pub fn load(
        &mut self,
        id: usize,
        path: &Path,
        shape: &[usize],
        seed: u64,
    ) -> anyhow::Result<()> {
        self.ask(
            &json!({"op": "load", "id": id, "path": path, "shape": shape, "seed": seed % (1 << 31)}),
            &[],
        )
        .map(drop)
    }

    /// One run of sub-model `id`, input and output on the device, in milliseconds.
    pub fn time(&mut self, id: usize) -> anyhow::Result<f64> {
        let (answer, _) = self.ask(&json!({"op": "time", "id": id}), &[])?;
        answer["ms"]
            .as_f64()
            .ok_or_else(|| anyhow::anyhow!("unit {}: a time without milliseconds", self.name))
    }

    /// Copies `data` to the device (and keeps it there for [`Remote::fetch`]).
    pub fn put(&mut self, data: &[f32]) -> anyhow::Result<()> {
        let bytes = to_bytes(data);
        self.ask(&json!({"op": "put", "bytes": bytes.len()}), &bytes)
            .map(drop)
    }

    /// Copies what the last [`Remote::put`] placed on the device back to this process.
    pub fn fetch(&mut self) -> anyhow::Result<Vec<f32>> {
        let (_, bytes) = self.ask(&json!({"op": "fetch"}), &[])?;
        Ok(from_bytes(&bytes))
    }

    /// Runs sub-model `id` on `data` (of `shape`): the output's shape and values.
    pub fn run(
        &mut self,
        id: usize,
        shape: &[usize],
        data: &[f32],
    ) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
        let bytes = to_bytes(data);
        let (answer, out) = self.ask(
            &json!({"op": "run", "id": id, "shape": shape, "bytes": bytes.len()}),
            &bytes,
        )?;
        let shape: Vec<usize> = serde_json::from_value(answer["shape"].clone())
            .map_err(|e| anyhow::anyhow!("unit {}: an output without a shape ({e})", self.name))?;
        Ok((shape, from_bytes(&out)))
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Its stdin closed, the program ends on its own; a stuck one is killed.
        drop(self.stdin.take());
        for _ in 0..200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    fn stand_in(dir: &Path, body: &str) -> anyhow::Result<UnitEngine> {
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
        // A script just written may be busy while another test's child inherits its descriptor
        // between fork and exec: that is tried again.
        for _ in 0..20 {
            match Remote::start("gpu", engine) {
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
    fn a_unit_program_that_dies_or_talks_nonsense_is_reported_in_a_sentence() -> anyhow::Result<()>
    {
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
    fn tensors_cross_as_little_endian_floats() {
        let values = [0.0f32, -1.5, 3.25e-7, f32::MAX];
        let bytes = to_bytes(&values);
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[4..8], &(-1.5f32).to_le_bytes());
        assert_eq!(from_bytes(&bytes), values);
    }
}

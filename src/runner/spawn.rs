//! Runs one condition in a child `edgeprof worker` process, in its own process group, and turns
//! what it says (and how it ends) into a run or a failure with its reason.
//!
//! Not yet here (the rest of the pipeline): sampling the child from /proc, timeouts, retries.

use crate::runner::protocol::{Collector, ProtocolError, WorkerRequest, WorkerRun};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use thiserror::Error;

/// Lines of the worker's stderr kept for a failure report.
pub const STDERR_TAIL_LINES: usize = 20;

/// Why a worker run failed.
#[derive(Debug, Error)]
pub enum RunFailure {
    #[error("cannot start the worker {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error("the worker reported an error: {message}")]
    Reported {
        message: String,
        stderr_tail: String,
    },
    #[error("the worker was killed by signal {signal}{}", crash_hint(*signal))]
    Signal { signal: i32, stderr_tail: String },
    #[error("the worker exited with status {code}")]
    Exit { code: i32, stderr_tail: String },
    #[error("the worker broke the protocol: {error}")]
    Protocol {
        error: ProtocolError,
        stderr_tail: String,
    },
}

fn crash_hint(signal: i32) -> &'static str {
    match signal {
        9 => " (SIGKILL: out of memory, or killed from outside)",
        11 => " (SIGSEGV: the engine crashed)",
        6 => " (SIGABRT: the engine aborted)",
        _ => "",
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n")
}

/// Runs `program` (normally this very binary) as `program worker`, sends it the request and
/// collects its protocol output.
pub fn run_worker(program: &Path, request: &WorkerRequest) -> Result<WorkerRun, RunFailure> {
    let spawn_failure = |reason: String| RunFailure::Spawn {
        program: program.display().to_string(),
        reason,
    };
    let mut child = Command::new(program)
        .arg("worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| spawn_failure(e.to_string()))?;
    let request_json = serde_json::to_vec(request).map_err(|e| spawn_failure(e.to_string()))?;
    // The request is small; write it and close stdin so the worker sees end of input.
    if let Some(mut stdin) = child.stdin.take() {
        if let Err(e) = stdin.write_all(&request_json) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_failure(format!("cannot send the request: {e}")));
        }
    }
    // Drain stderr on its own thread so a chatty worker never blocks on a full pipe.
    let stderr_reader = child.stderr.take().map(|mut stderr| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        })
    });
    let mut collector = Collector::default();
    let mut protocol_error = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if protocol_error.is_none() {
                if let Err(e) = collector.feed(&line) {
                    protocol_error = Some(e);
                }
            }
        }
    }
    let status = child.wait().map_err(|e| spawn_failure(e.to_string()))?;
    let stderr_tail = stderr_reader
        .and_then(|h| h.join().ok())
        .map(|t| tail(&t))
        .unwrap_or_default();
    if let Some(signal) = status.signal() {
        return Err(RunFailure::Signal {
            signal,
            stderr_tail,
        });
    }
    if let Some(error) = protocol_error {
        return Err(RunFailure::Protocol { error, stderr_tail });
    }
    let run = collector.finish();
    match (run, status.code()) {
        (Ok(run), _) if run.error.is_some() => Err(RunFailure::Reported {
            message: run.error.unwrap_or_default(),
            stderr_tail,
        }),
        (Ok(run), Some(0)) => Ok(run),
        (_, Some(code)) if code != 0 => Err(RunFailure::Exit { code, stderr_tail }),
        (Err(error), _) => Err(RunFailure::Protocol { error, stderr_tail }),
        (Ok(run), _) => Ok(run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Device, ModelRef};
    use crate::models::InputShape;
    use crate::runner::matrix::Condition;
    use std::os::unix::fs::PermissionsExt;

    fn request() -> WorkerRequest {
        WorkerRequest {
            condition: Condition {
                id: "fake".into(),
                engine: "command".into(),
                model: ModelRef::Zoo("resnet34".into()),
                input: InputShape::default(),
                batch: 1,
                threads: 1,
                device: Device::Cpu,
            },
            warmup: 0,
            iterations: 1,
            repeats: 1,
            seed: 0,
            classes: 10,
        }
    }

    /// Runs a shell script as the worker program.
    fn run_script(body: &str) -> Result<WorkerRun, RunFailure> {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("worker.sh");
        let script = format!("#!/bin/sh\n[ \"$1\" = worker ] || exit 99\ncat >/dev/null\n{body}\n");
        if let Err(e) = std::fs::write(&path, script)
            .and_then(|_| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)))
        {
            panic!("{e}");
        }
        run_worker(&path, &request())
    }

    const READY: &str = r#"echo '{"type":"ready","init_ms":1}'"#;

    #[test]
    fn a_well_behaved_worker_gives_its_run() {
        let body = format!(
            "{READY}\necho '{{\"type\":\"iterations\",\"latencies_ms\":[1,2]}}'\necho '{{\"type\":\"summary\"}}'"
        );
        match run_script(&body) {
            Ok(run) => assert_eq!(run.repeats, vec![vec![1.0, 2.0]]),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn failures_are_classified_with_their_stderr() {
        let crash = run_script(&format!(
            "{READY}\necho 'about to crash' >&2\nkill -SEGV $$"
        ));
        match crash {
            Err(RunFailure::Signal {
                signal: 11,
                stderr_tail,
            }) => {
                assert!(stderr_tail.contains("about to crash"))
            }
            other => panic!("{other:?}"),
        }
        let exit = run_script(&format!("{READY}\necho 'bad things' >&2\nexit 3"));
        match exit {
            Err(RunFailure::Exit {
                code: 3,
                stderr_tail,
            }) => assert!(stderr_tail.contains("bad things")),
            other => panic!("{other:?}"),
        }
        let garbage = run_script("echo 'this is not json'");
        assert!(
            matches!(
                garbage,
                Err(RunFailure::Protocol {
                    error: ProtocolError::Malformed { .. },
                    ..
                })
            ),
            "{garbage:?}"
        );
        let silent = run_script("true");
        assert!(
            matches!(
                silent,
                Err(RunFailure::Protocol {
                    error: ProtocolError::Unfinished,
                    ..
                })
            ),
            "{silent:?}"
        );
        let reported = run_script(r#"echo '{"type":"error","message":"model too big"}'; exit 1"#);
        match reported {
            Err(RunFailure::Reported { message, .. }) => assert_eq!(message, "model too big"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_program_cannot_start() {
        let missing = run_worker(Path::new("/nonexistent/edgeprof"), &request());
        assert!(
            matches!(missing, Err(RunFailure::Spawn { .. })),
            "{missing:?}"
        );
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let text: String = (0..30).map(|i| format!("line {i}\n")).collect();
        let t = tail(&text);
        assert_eq!(t.lines().count(), STDERR_TAIL_LINES);
        assert!(t.starts_with("line 10") && t.ends_with("line 29"));
    }

    #[test]
    fn signals_name_their_likely_cause() {
        assert!(crash_hint(9).contains("out of memory"));
        assert!(crash_hint(11).contains("crashed"));
        assert_eq!(crash_hint(15), "");
    }
}

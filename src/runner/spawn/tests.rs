//! Tests of `runner/spawn.rs`.

use super::*;
use crate::config::{Device, ModelRef};
use crate::models::InputShape;
use crate::protocol::Condition;
use std::os::unix::fs::PermissionsExt;

fn request() -> WorkerRequest {
    WorkerRequest::new(
        Condition::new(
            "command",
            ModelRef::Zoo("resnet34".into()),
            InputShape::default(),
            1,
            1,
            Device::Cpu,
        ),
        0,
        10,
    )
}

const LIMITS: RunLimits = RunLimits {
    timeout: Duration::from_secs(20),
    sample_interval: Duration::from_millis(20),
};

/// Runs a shell script as the worker program.
fn run_script_with(body: &str, limits: RunLimits, cancel: &Cancel) -> Attempt {
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
    run_worker(
        &WorkerCommand::edgeprof(&path),
        &request(),
        limits,
        cancel,
        |_| {},
    )
}

fn run_script(body: &str) -> Result<WorkerRun, RunFailure> {
    run_script_with(body, LIMITS, &Cancel::new()).outcome
}

const READY: &str = r#"echo '{"type":"ready","init_ms":1}'"#;

#[test]
fn a_well_behaved_worker_gives_its_run_and_resources() {
    let body = format!(
        "{READY}\necho '{{\"type\":\"iterations\",\"latencies_ms\":[1,2]}}'\nsleep 0.2\necho '{{\"type\":\"summary\"}}'"
    );
    let attempt = run_script_with(&body, LIMITS, &Cancel::new());
    match attempt.outcome {
        Ok(run) => assert_eq!(run.repeats, vec![vec![1.0, 2.0]]),
        Err(e) => panic!("{e}"),
    }
    let r = attempt.resources;
    assert!(r.wall_s >= 0.2, "{r:?}");
    assert!(r.rusage_maxrss_bytes.is_some_and(|b| b > 0), "{r:?}");
    assert!(r.samples >= 2, "{r:?}");
    assert_eq!(r.samples, attempt.samples.len());
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
    match garbage {
        Err(RunFailure::Protocol { error, .. }) => {
            assert!(error.contains("not a protocol record"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    let silent = run_script("true");
    match silent {
        Err(RunFailure::Protocol { error, .. }) => {
            assert_eq!(error, ProtocolError::Unfinished.to_string())
        }
        other => panic!("{other:?}"),
    }
    let reported = run_script(r#"echo '{"type":"error","message":"model too big"}'; exit 1"#);
    match reported {
        Err(RunFailure::Reported { message, .. }) => assert_eq!(message, "model too big"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hung_worker_and_its_children_are_killed_at_the_timeout() {
    let limits = RunLimits {
        timeout: Duration::from_millis(300),
        sample_interval: Duration::from_millis(50),
    };
    let started = Instant::now();
    // The script ignores SIGTERM and leaves a child behind: both must go.
    let attempt = run_script_with(
        &format!("{READY}\ntrap '' TERM\nsleep 30 &\nsleep 30"),
        limits,
        &Cancel::new(),
    );
    assert!(
        matches!(attempt.outcome, Err(RunFailure::Timeout { .. })),
        "{:?}",
        attempt.outcome
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_line_longer_than_the_limit_fails_the_run_without_reading_it_whole() {
    let started = Instant::now();
    let body = format!(
        "{READY}\nhead -c {} /dev/zero | tr '\\0' x\necho",
        MAX_PROTOCOL_LINE + 1000
    );
    match run_script(&body) {
        Err(RunFailure::Protocol { error, .. }) => {
            assert!(error.contains("longer than 64 MiB"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_grandchild_in_its_own_session_holding_the_pipes_is_killed_with_the_worker() {
    let limits = RunLimits {
        timeout: Duration::from_millis(500),
        sample_interval: Duration::from_millis(50),
    };
    let started = Instant::now();
    let attempt = run_script_with(
        &format!("{READY}\nsetsid sleep 3931 &\nsleep 3930"),
        limits,
        &Cancel::new(),
    );
    assert!(
        matches!(attempt.outcome, Err(RunFailure::Timeout { .. })),
        "{:?}",
        attempt.outcome
    );
    // The timeout, the kill grace, and some slack for a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(8));
    let left = std::process::Command::new("pgrep")
        .args(["-f", "sleep 3931"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(left.trim().is_empty(), "left behind: {left}");
}

#[test]
fn cancelling_stops_the_run() {
    let cancel = Cancel::new();
    cancel.raise();
    let attempt = run_script_with(&format!("{READY}\nsleep 30"), LIMITS, &cancel);
    assert_eq!(attempt.outcome.err(), Some(RunFailure::Cancelled));
}

#[test]
fn a_cancel_raised_mid_run_wakes_the_supervisor_between_its_samples() {
    // Samples a minute apart: only the cancel itself can wake the loop in time.
    let limits = RunLimits {
        timeout: Duration::from_secs(120),
        sample_interval: Duration::from_secs(60),
    };
    let cancel = Cancel::new();
    let raiser = cancel.clone();
    let started = Instant::now();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        raiser.raise();
    });
    let attempt = run_script_with(&format!("{READY}\nexec sleep 30"), limits, &cancel);
    let _ = thread.join();
    assert_eq!(attempt.outcome.err(), Some(RunFailure::Cancelled));
    // SIGTERM ends `sleep` at once; without the wake-up the loop would sleep to its next
    // sample, a minute away.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a_missing_program_cannot_start() {
    let missing = run_worker(
        &WorkerCommand::edgeprof(Path::new("/nonexistent/edgeprof")),
        &request(),
        LIMITS,
        &Cancel::new(),
        |_| {},
    );
    assert!(
        matches!(missing.outcome, Err(RunFailure::Spawn { .. })),
        "{:?}",
        missing.outcome
    );
}

//! Runs one condition in a child process, in its own process group, and turns what it says
//! (and how it ends) into a run or a failure with its reason. While the child runs, the parent
//! samples it from /proc at the configured interval, enforces the timeout (SIGTERM to the whole
//! group, SIGKILL a second later), and reaps it with `wait4` so the kernel's own peak-RSS and CPU
//! accounting cross-check the samples.

use crate::collect::child::{Input, Output, Reaped, Spec};
use crate::collect::proc::{ProcSample, ProcessSampler};
use crate::collect::stop::Cancel;
use crate::collect::tree::Tree;
pub use crate::protocol::outcome::{Resources, RunFailure, WorkerEvent};
use crate::protocol::{Collector, ProtocolError, WorkerRequest, WorkerRun};
use nix::sys::signal::Signal;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use crate::collect::child::STDERR_TAIL_LINES;
/// Grace between SIGTERM and SIGKILL when a run is stopped.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// The program a run starts: `edgeprof worker`, or a user's own command (the `command` engine).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// This very binary, as `edgeprof worker`.
    pub fn edgeprof(program: &Path) -> WorkerCommand {
        WorkerCommand {
            program: program.to_path_buf(),
            args: vec!["worker".to_string()],
        }
    }
}

/// Limits and sampling of one run.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    pub timeout: Duration,
    pub sample_interval: Duration,
}

/// One attempt at a run: its outcome, what it cost, and the samples taken while it ran.
#[derive(Debug)]
pub struct Attempt {
    pub outcome: Result<WorkerRun, RunFailure>,
    /// A run cancelled part-way: the repeats it had finished (see
    /// [`crate::protocol::Collector::whole_repeats`]).
    pub finished: Option<WorkerRun>,
    pub resources: Resources,
    pub samples: Vec<ProcSample>,
}

/// Longest line of protocol output read from a worker, in bytes. A record of a million raw
/// latencies is about 20 MB; a longer line is a broken worker, and reading it whole could cost
/// the parent more memory than the board has.
pub const MAX_PROTOCOL_LINE: usize = 64 << 20;

enum Stop {
    Timeout,
    Cancelled,
    /// A line of protocol output passed [`MAX_PROTOCOL_LINE`].
    Overlong,
}

/// What reaches the supervising loop: the worker's stdout (from the thread reading it), its
/// exit (from a thread blocked in waitid) and a cancel (the moment it is raised), all from the
/// supervisor.
type Out = crate::collect::child::Heard;

/// Runs `command` with `request` on its stdin and collects its protocol output, sampling it
/// every `limits.sample_interval`. `cancel` stops the run from outside (Ctrl-C).
pub fn run_worker(
    command: &WorkerCommand,
    request: &WorkerRequest,
    limits: RunLimits,
    cancel: &Cancel,
    mut on_event: impl FnMut(WorkerEvent),
) -> Attempt {
    let spawn_failure = |reason: String| Attempt {
        outcome: Err(RunFailure::Spawn {
            program: command.program.display().to_string(),
            reason,
        }),
        finished: None,
        resources: Resources::default(),
        samples: Vec::new(),
    };
    let request_json = match serde_json::to_vec(request) {
        Ok(j) => j,
        Err(e) => return spawn_failure(e.to_string()),
    };
    let mut spec = Spec::new(&command.program);
    spec.args(&command.args);
    // Confined before the program starts, so before any engine creates its threads (which
    // inherit the set).
    if let Some(cpus) = &request.condition.cores {
        spec.on_cpus(cpus);
    }
    let tag = crate::collect::tree::new_tag();
    spec.env(crate::collect::tree::TAG_VAR, &tag);
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<Out>();
    let mut child = match spec.start(
        Input::Piped,
        Output::Lines {
            max: MAX_PROTOCOL_LINE,
        },
        &tx,
        Some(cancel),
    ) {
        Ok(c) => c,
        Err(e) => return spawn_failure(e.0),
    };
    let pid = child.pid() as i32;
    let mut tree = Tree::new(pid, &tag);
    // The request is small; write it and close stdin so the worker sees end of input. A worker
    // that does not read its input (or dies first) is judged by how it ends, not by this write.
    if let Some(mut stdin) = child.take_stdin() {
        let _ = stdin.write_all(&request_json);
    }
    // The loop below is told, never polls: its exit, a cancel, its lines all come from the
    // supervisor's threads; it wakes on its own only for the samples and the deadlines.
    drop(tx);

    let mut sampler = ProcessSampler::new(Path::new("/"), pid as u32, start);
    let mut samples: Vec<ProcSample> = Vec::new();
    let mut next_sample = start;
    let mut collector = Collector::default();
    let mut protocol_error: Option<ProtocolError> = None;
    let mut reaped: Option<Reaped> = None;
    let mut reap_error: Option<String> = None;
    let mut stdout_open = true;
    let mut exited = false;
    let mut stop: Option<(Stop, Instant)> = None;
    // Even a worker that ended first (of the SIGPIPE our stopped reading gave it) broke the
    // protocol.
    let mut overlong = false;
    let mut killed = false;
    let mut last_progress = (false, 0, 0);
    let deadline = start + limits.timeout;
    let mut ended_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if reaped.is_none() && now >= next_sample {
            if let Some(sample) = sampler.sample(now) {
                on_event(WorkerEvent::Sample(sample.clone()));
                samples.push(sample);
            }
            // Descendants are followed while their parents live, to be stopped with them.
            tree.refresh();
            next_sample = (next_sample + limits.sample_interval).max(now);
        }
        if reaped.is_none() && exited {
            match child.try_reap() {
                Ok(Some(r)) => {
                    reaped = Some(r);
                    ended_at = Some(now);
                    // Take down anything the worker left behind, in its group or not.
                    tree.signal(Signal::SIGKILL);
                }
                // Told it exited but not reapable yet: asked again at the next wake.
                Ok(None) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    reap_error = Some(e.to_string());
                    tree.signal(Signal::SIGKILL);
                    break;
                }
            }
        }
        if reaped.is_some() && !stdout_open {
            break;
        }
        if stop.is_none() && reaped.is_none() {
            if now >= deadline {
                stop = Some((Stop::Timeout, now));
            } else if cancel.is_raised() {
                stop = Some((Stop::Cancelled, now));
            }
            if stop.is_some() {
                tree.signal(Signal::SIGTERM);
            }
        }
        if let Some((_, when)) = &stop {
            if !killed && now >= *when + KILL_GRACE {
                tree.signal(Signal::SIGKILL);
                killed = true;
            }
            // SIGKILL cannot be refused; a worker that still has not ended is stuck in the
            // kernel (uninterruptible I/O). The run ends anyway; the process is reaped later.
            if reaped.is_none() && now >= *when + KILL_GRACE * 5 {
                reap_error = Some("it did not end after SIGKILL".to_string());
                break;
            }
        }
        // Output still held open by something outside our reach: stop waiting for it.
        if let Some(end) = ended_at {
            if now >= end + KILL_GRACE * 2 {
                break;
            }
        }
        // Asleep until something is told or the next thing falls due.
        let mut due: Vec<Instant> = Vec::new();
        if reaped.is_none() {
            due.push(next_sample);
            if stop.is_none() {
                due.push(deadline);
            }
        }
        if let Some((_, when)) = &stop {
            due.push(if killed {
                *when + KILL_GRACE * 5
            } else {
                *when + KILL_GRACE
            });
        }
        if let Some(end) = ended_at {
            due.push(end + KILL_GRACE * 2);
        }
        if exited && reaped.is_none() {
            // Exited but not yet reapable (rare): look again shortly.
            due.push(now + Duration::from_millis(1));
        }
        let told = match due.into_iter().min() {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match told {
            Ok(Out::Line(line)) => {
                // A record marks a phase change (loaded, a repeat done): sample there too.
                if let Some(sample) = sampler.sample_memory(Instant::now()) {
                    on_event(WorkerEvent::Sample(sample.clone()));
                    samples.push(sample);
                }
                if protocol_error.is_none() {
                    if let Err(e) = collector.feed(&line) {
                        protocol_error = Some(e);
                    }
                    let progress = collector.progress();
                    if progress != last_progress {
                        if progress.0 && !last_progress.0 {
                            on_event(WorkerEvent::Ready);
                        }
                        if progress.2 != last_progress.2 {
                            on_event(WorkerEvent::Repeat(progress.2.saturating_sub(1)));
                        }
                        if progress.1 != last_progress.1 {
                            on_event(WorkerEvent::Timed(progress.1));
                        }
                        last_progress = progress;
                    }
                }
            }
            Ok(Out::Overlong) => {
                stdout_open = false;
                overlong = true;
                if stop.is_none() && reaped.is_none() {
                    stop = Some((Stop::Overlong, Instant::now()));
                    tree.signal(Signal::SIGTERM);
                }
            }
            Ok(Out::Closed) => stdout_open = false,
            Ok(Out::Exited) => exited = true,
            // Seen at the top of the loop.
            Ok(Out::Cancelled) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Every sender is gone (they are held for the whole run): nothing more to hear.
                stdout_open = false;
                exited = true;
            }
        }
    }
    let wall_s = ended_at
        .unwrap_or_else(Instant::now)
        .duration_since(start)
        .as_secs_f64();
    // Whatever is left of the tree goes now (a run stopped before its worker was reaped).
    tree.signal(Signal::SIGKILL);
    let stderr_tail = child.stderr(KILL_GRACE / 2);
    // VmHWM only grows within one address space; the last reading is after exec (the first
    // may be of the forked child before it).
    let vmhwm = samples.iter().rev().find_map(|s| s.hwm_bytes);
    let resources = Resources {
        wall_s,
        peak_rss_bytes: match (vmhwm, reaped.as_ref().map(|r| r.maxrss_bytes)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        },
        vmhwm_bytes: vmhwm,
        rusage_maxrss_bytes: reaped.as_ref().map(|r| r.maxrss_bytes),
        user_s: reaped.as_ref().map(|r| r.user_s),
        system_s: reaped.as_ref().map(|r| r.system_s),
        cpu_mean_pct: reaped
            .as_ref()
            .filter(|_| wall_s > 0.0)
            .map(|r| (r.user_s + r.system_s) / wall_s * 100.0),
        cpu_max_pct: samples
            .iter()
            .filter_map(|s| s.cpu_pct)
            .max_by(f64::total_cmp),
        samples: samples.len(),
    };
    let stop = stop.map(|s| s.0).or(overlong.then_some(Stop::Overlong));
    let finished = matches!(stop, Some(Stop::Cancelled))
        .then(|| collector.whole_repeats())
        .flatten();
    let outcome = judge(
        stop,
        limits,
        reaped.map(|r| r.status),
        reap_error,
        protocol_error,
        collector,
        stderr_tail,
    )
    .and_then(|run| check_parameters(request, run));
    Attempt {
        outcome,
        finished,
        resources,
        samples,
    }
}

/// A worker that reports the parameters of the model it built must have built the zoo's model:
/// the same trainable parameter count (a mismatch means another architecture). A file
/// converted to a lower precision is not counted: its conversion folds batch normalization into
/// the convolutions and hides the weights behind dequantization.
fn check_parameters(request: &WorkerRequest, run: WorkerRun) -> Result<WorkerRun, RunFailure> {
    let c = &request.condition;
    let (Some(built), crate::config::ModelRef::Zoo(name)) = (run.parameters, &c.model) else {
        return Ok(run);
    };
    if super::lowered::converts(&c.engine, c.precision) {
        return Ok(run);
    }
    let params = crate::models::zoo::ModelParams {
        num_classes: request.classes,
        channels: c.input.channels,
        height: c.input.height,
        width: c.input.width,
        batch: c.batch,
    };
    let Ok(model) = crate::models::zoo::build(name, &params) else {
        return Ok(run);
    };
    let expected = crate::models::cost::analyze(&model).total.params;
    if built == expected {
        Ok(run)
    } else {
        Err(RunFailure::ParameterMismatch {
            model: name.clone(),
            built,
            expected,
        })
    }
}

/// How a run ended, from first cause to last: stopped by us, killed by a signal, broke the
/// protocol, reported an error, exited non-zero, or finished.
fn judge(
    stop: Option<Stop>,
    limits: RunLimits,
    status: Option<ExitStatus>,
    reap_error: Option<String>,
    protocol_error: Option<ProtocolError>,
    collector: Collector,
    stderr_tail: String,
) -> Result<WorkerRun, RunFailure> {
    match stop {
        Some(Stop::Timeout) => {
            return Err(RunFailure::Timeout {
                seconds: limits.timeout.as_secs_f64(),
                stderr_tail,
            })
        }
        Some(Stop::Cancelled) => return Err(RunFailure::Cancelled),
        Some(Stop::Overlong) => {
            return Err(RunFailure::Protocol {
                error: format!(
                    "a line of its output is longer than {} MiB",
                    MAX_PROTOCOL_LINE >> 20
                ),
                stderr_tail,
            })
        }
        None => {}
    }
    let Some(status) = status else {
        return Err(RunFailure::Spawn {
            program: "worker".to_string(),
            reason: format!(
                "cannot wait for it: {}",
                reap_error.unwrap_or_else(|| "unknown".to_string())
            ),
        });
    };
    if let Some(signal) = status.signal() {
        return Err(RunFailure::Signal {
            signal,
            stderr_tail,
        });
    }
    if let Some(error) = protocol_error {
        return Err(RunFailure::Protocol {
            error: error.to_string(),
            stderr_tail,
        });
    }
    let run = collector.finish();
    match (run, status.code()) {
        (Ok(run), _) if run.error.is_some() => Err(RunFailure::Reported {
            message: run.error.unwrap_or_default(),
            stderr_tail,
        }),
        (Ok(run), Some(0)) => Ok(run),
        (_, Some(code)) if code != 0 => Err(RunFailure::Exit { code, stderr_tail }),
        (Err(error), _) => Err(RunFailure::Protocol {
            error: error.to_string(),
            stderr_tail,
        }),
        (Ok(run), _) => Ok(run),
    }
}

#[cfg(test)]
mod tests {
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
}

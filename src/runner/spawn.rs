//! Runs one condition in a child process, in its own process group, and turns what it says
//! (and how it ends) into a run or a failure with its reason. While the child runs, the parent
//! samples it from /proc at the configured interval, enforces the timeout (SIGTERM to the whole
//! group, SIGKILL a second later), and reaps it with `wait4` so the kernel's own peak-RSS and CPU
//! accounting cross-check the samples.

use crate::collect::proc::{ProcSample, ProcessSampler};
use crate::collect::stop::Cancel;
use crate::collect::tree::Tree;
pub use crate::protocol::outcome::{Resources, RunFailure, WorkerEvent};
use crate::protocol::{Collector, ProtocolError, WorkerRequest, WorkerRun};
use nix::sys::signal::Signal;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines of the worker's stderr kept for a failure report.
pub const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept, in bytes (the rest is cut).
const STDERR_LINE_BYTES: usize = 2000;
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
    pub resources: Resources,
    pub samples: Vec<ProcSample>,
}

/// Longest line of protocol output read from a worker, in bytes. A record of a million raw
/// latencies is about 20 MB; a longer line is a broken worker, and reading it whole could cost
/// the parent more memory than the board has.
pub const MAX_PROTOCOL_LINE: usize = 64 << 20;

/// Calls `f` with each line of a stream (lossily decoded, line end removed, and at most `max`
/// bytes of it: the rest of a longer line is read and dropped, so memory stays bounded however
/// long a line is) and how many bytes were dropped from it, until the stream ends or `f` returns
/// false.
fn for_each_line(stream: impl std::io::Read, max: usize, mut f: impl FnMut(String, usize) -> bool) {
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut line: Vec<u8> = Vec::new();
    let mut dropped = 0usize;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let newline = chunk.iter().position(|&b| b == b'\n');
        let part = &chunk[..newline.unwrap_or(chunk.len())];
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        dropped += part.len().saturating_sub(room);
        let used = newline.map_or(chunk.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            let text = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            line.clear();
            if !f(text, std::mem::take(&mut dropped)) {
                return;
            }
        }
    }
    if !line.is_empty() || dropped > 0 {
        f(String::from_utf8_lossy(&line).into_owned(), dropped);
    }
}

/// The last lines of a worker's stderr, shared with the thread that reads them; the condvar
/// says when the stream has ended.
#[derive(Clone, Default)]
struct Tail(std::sync::Arc<(std::sync::Mutex<TailLines>, std::sync::Condvar)>);

#[derive(Default)]
struct TailLines {
    lines: VecDeque<String>,
    ended: bool,
}

impl Tail {
    /// Reads `stream` to its end into the tail, each line cut to [`STDERR_LINE_BYTES`].
    fn fill(&self, stream: impl std::io::Read) {
        for_each_line(stream, STDERR_LINE_BYTES, |mut line, _| {
            // A cut in the middle of a character decodes to U+FFFD, which is longer: cut again.
            if line.len() > STDERR_LINE_BYTES {
                let mut cut = STDERR_LINE_BYTES;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                line.truncate(cut);
            }
            if let Ok(mut tail) = self.0 .0.lock() {
                tail.lines.push_back(line);
                if tail.lines.len() > STDERR_TAIL_LINES {
                    tail.lines.pop_front();
                }
            }
            true
        });
        if let Ok(mut tail) = self.0 .0.lock() {
            tail.ended = true;
        }
        self.0 .1.notify_all();
    }

    /// The lines so far, once the stream has ended or `wait` has passed (a process outside our
    /// reach may hold the stream open for ever).
    fn text(&self, wait: Duration) -> String {
        let Ok(tail) = self.0 .0.lock() else {
            return String::new();
        };
        match self.0 .1.wait_timeout_while(tail, wait, |t| !t.ended) {
            Ok((tail, _)) => Vec::from(tail.lines.clone()).join("\n"),
            Err(_) => String::new(),
        }
    }
}

/// Keeps the last lines of a stream, each cut to [`STDERR_LINE_BYTES`].
#[cfg(test)]
fn read_tail(stream: impl std::io::Read) -> String {
    let tail = Tail::default();
    tail.fill(stream);
    tail.text(Duration::ZERO)
}

/// The reaped child: its exit status and resource usage.
struct Reaped {
    status: ExitStatus,
    maxrss_bytes: u64,
    user_s: f64,
    system_s: f64,
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

/// Reaps `pid` if it has ended, without blocking.
fn try_reap(pid: i32) -> std::io::Result<Option<Reaped>> {
    let mut status: libc::c_int = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: wait4 only writes the status and the rusage buffer, both owned here and sized
    // for it; `pid` is our own child, which std's Child never reaps behind our back since we
    // never call its wait methods.
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, usage.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if r == 0 {
        return Ok(None);
    }
    // SAFETY: wait4 returned the child, so it filled the zero-initialised rusage.
    let usage = unsafe { usage.assume_init() };
    Ok(Some(Reaped {
        status: ExitStatus::from_raw(status),
        // Linux reports ru_maxrss in KiB.
        maxrss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        user_s: seconds(usage.ru_utime),
        system_s: seconds(usage.ru_stime),
    }))
}

enum Stop {
    Timeout,
    Cancelled,
    /// A line of protocol output passed [`MAX_PROTOCOL_LINE`].
    Overlong,
}

/// What reaches the supervising loop: the worker's stdout (from the thread reading it), its
/// exit (from a thread blocked in waitid) and a cancel (the moment it is raised).
enum Out {
    Line(String),
    Overlong,
    /// The stdout stream ended.
    Closed,
    /// The worker has exited (not reaped yet).
    Exited,
    Cancelled,
}

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
        resources: Resources::default(),
        samples: Vec::new(),
    };
    let request_json = match serde_json::to_vec(request) {
        Ok(j) => j,
        Err(e) => return spawn_failure(e.to_string()),
    };
    let mut builder = Command::new(&command.program);
    builder
        .args(&command.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, gone with edgeprof (SIGKILL, lost SSH session): as every child.
    crate::collect::child::own_group(&mut builder);
    // The condition's core set, made before the fork: the child only hands it to the kernel.
    let affinity = match &request.condition.cores {
        Some(cpus) => {
            let mut set = nix::sched::CpuSet::new();
            for &cpu in cpus {
                if let Err(e) = set.set(cpu) {
                    return spawn_failure(format!("cannot confine the worker to CPU {cpu}: {e}"));
                }
            }
            Some(set)
        }
        None => None,
    };
    if let Some(set) = affinity {
        // SAFETY: the closure runs in the forked child before exec (after own_group's) and
        // only makes an async-signal-safe system call (sched_setaffinity) on data made before
        // the fork.
        unsafe {
            builder.pre_exec(move || {
                // Confined before the program starts, so before any engine creates its threads
                // (which inherit the set).
                nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
                    .map_err(std::io::Error::from)
            });
        }
    }
    let tag = crate::collect::tree::new_tag();
    builder.env(crate::collect::tree::TAG_VAR, &tag);
    let start = Instant::now();
    let mut child = match builder.spawn() {
        Ok(c) => c,
        Err(e) => return spawn_failure(e.to_string()),
    };
    let pid = child.id() as i32;
    let mut tree = Tree::new(pid, &tag);
    // The request is small; write it and close stdin so the worker sees end of input. A worker
    // that does not read its input (or dies first) is judged by how it ends, not by this write.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&request_json);
    }
    let tail = Tail::default();
    if let Some(stderr) = child.stderr.take() {
        let tail = tail.clone();
        std::thread::spawn(move || tail.fill(stderr));
    }
    let (tx, rx) = mpsc::channel::<Out>();
    match child.stdout.take() {
        Some(stdout) => {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for_each_line(stdout, MAX_PROTOCOL_LINE, |line, dropped| {
                    let out = if dropped > 0 {
                        Out::Overlong
                    } else {
                        Out::Line(line)
                    };
                    let overlong = matches!(out, Out::Overlong);
                    tx.send(out).is_ok() && !overlong
                });
                let _ = tx.send(Out::Closed);
            });
        }
        None => {
            let _ = tx.send(Out::Closed);
        }
    }
    // The loop below is told, never polls: its exit comes from a thread blocked in waitid
    // (which leaves it unreaped, so a kill cannot reach a reused pid), a cancel the moment it is
    // raised; it wakes on its own only for the samples and the deadlines.
    let watched = {
        let tx = tx.clone();
        crate::collect::exit::notify(pid as u32, move || {
            let _ = tx.send(Out::Exited);
        })
    };
    if let Err(e) = watched {
        Tree::new(pid, &tag).signal(Signal::SIGKILL);
        let _ = child.wait();
        return spawn_failure(format!("cannot watch the worker for its exit: {e}"));
    }
    let _cancel_wakes = {
        let tx = tx.clone();
        cancel.on_raise(move || {
            let _ = tx.send(Out::Cancelled);
        })
    };
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
            match try_reap(pid) {
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
    let stderr_tail = tail.text(KILL_GRACE / 2);
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
    let outcome = judge(
        stop.map(|s| s.0).or(overlong.then_some(Stop::Overlong)),
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
        resources,
        samples,
    }
}

/// A worker that reports the parameters of the model it built must have built the zoo's model:
/// the same trainable parameter count (a mismatch means another architecture).
fn check_parameters(request: &WorkerRequest, run: WorkerRun) -> Result<WorkerRun, RunFailure> {
    let (Some(built), crate::config::ModelRef::Zoo(name)) =
        (run.parameters, &request.condition.model)
    else {
        return Ok(run);
    };
    let c = &request.condition;
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
mod tests;

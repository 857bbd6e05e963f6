//! Short-lived children: started, fed their input, their output kept (or streamed into a
//! file), and waited for until they exit or their time is up.

use super::streams::keep_tail;
use super::Spec;
use crate::error::ChildFailed;
use std::io::Write;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The most of a child's stdout kept (its last bytes): an answer is at the end.
pub const STDOUT_LIMIT: usize = 16 << 20;
/// The most of a child's stderr kept (its last bytes): the reason it failed is at the end.
pub const STDERR_LIMIT: usize = 64 << 10;

/// Where a child's stdout goes.
pub enum Stdout<'a> {
    /// Kept, up to [`STDOUT_LIMIT`].
    Capture,
    /// Written into this file as it comes (a profiler's CSV of any size).
    File(&'a Path),
}

/// How a child ended.
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    /// Its stdout (empty when it went to a file); the last [`STDOUT_LIMIT`] bytes of it.
    pub stdout: String,
    /// The last [`STDERR_LIMIT`] bytes of its stderr.
    pub stderr: String,
}

impl Ran {
    /// The last line it said on stderr that is not blank.
    pub fn last_words(&self) -> &str {
        self.stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
    }
}

/// A duration as the messages say it: `300 ms`, `20 s`.
pub fn said(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} s", d.as_secs())
    }
}

/// Runs `spec` with `input` on its stdin until it ends, or kills its process group after
/// `timeout`. Err when it cannot start, cannot be waited for, or ran out of time.
pub fn run(
    spec: &Spec,
    input: &[u8],
    timeout: Duration,
    stdout: Stdout,
) -> Result<Ran, ChildFailed> {
    run_until(spec, input, timeout, stdout, None)
}

/// [`run`], and its process group is killed the moment `cancel` is raised (Err then).
pub fn run_until(
    spec: &Spec,
    input: &[u8],
    timeout: Duration,
    stdout: Stdout,
    cancel: Option<&crate::collect::stop::Cancel>,
) -> Result<Ran, ChildFailed> {
    let mut command = spec
        .command()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let out = match stdout {
        Stdout::Capture => Stdio::piped(),
        Stdout::File(path) => std::fs::File::create(path)
            .map(Stdio::from)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?,
    };
    command
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    // A raised cancel kills the group; the wait below then ends at once.
    let _on_cancel = match (cancel, i32::try_from(child.id())) {
        (Some(cancel), Ok(pid)) => Some(cancel.on_raise(move || {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        })),
        _ => None,
    };
    let stdin = child.stdin.take();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A program that does not read its input is judged by its output below.
            let _ = stdin.write_all(&input);
        }
    });
    let stdout = keep_tail(child.stdout.take(), STDOUT_LIMIT);
    let stderr = keep_tail(child.stderr.take(), STDERR_LIMIT);
    // Blocked until it exits or the time is up, not asking every few milliseconds. Until it is
    // reaped below its pid (and its group's id) cannot name another process.
    let deadline = Instant::now() + timeout;
    let watch = crate::collect::exit::ExitWatch::start(child.id())
        .map_err(|e| format!("cannot wait for it: {e}"))?;
    if !watch.exited_by(deadline) {
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.kill();
        let _ = child.wait();
        return Err(ChildFailed::from(format!(
            "it did not answer within {}",
            said(timeout)
        )));
    }
    // What it started in its group and left behind would hold the pipes open. Killed before
    // the reaping: until then the group's id is still its own.
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for it: {e}"))?;
    let _ = writer.join();
    if cancel.is_some_and(|c| c.is_raised()) {
        return Err(ChildFailed::from("it was stopped on request".to_string()));
    }
    Ok(Ran {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Why a worker asked through [`ask_worker`] gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    /// It could not be started, failed, or answered something else than asked.
    #[error(transparent)]
    Failed(ChildFailed),
    /// It refused what it was given (exit status 2): the user's input is at fault.
    #[error(transparent)]
    Refused(crate::error::BadInput),
}

/// Runs this very program as one of its workers (`args`, `input` on its stdin) and reads its
/// one JSON answer on stdout; `what` names the worker in errors ("the placement worker").
/// A worker that exits with status 2 refused what it was given: that comes back as
/// [`AskError::Refused`]. Stopped when `cancel` is raised.
pub fn ask_worker<T: serde::de::DeserializeOwned>(
    args: &[&str],
    input: &[u8],
    timeout: Duration,
    what: &str,
    cancel: Option<&crate::collect::stop::Cancel>,
) -> Result<T, AskError> {
    let failed = |message: String| AskError::Failed(ChildFailed(message));
    let exe = std::env::current_exe()
        .map_err(|e| failed(format!("cannot locate the edgeprof binary: {e}")))?;
    let mut spec = Spec::new(exe);
    spec.args(args);
    let ran = run_until(&spec, input, timeout, Stdout::Capture, cancel)
        .map_err(|e| failed(format!("{what} {e}")))?;
    if !ran.status.success() {
        // Its last line, without the "edgeprof: error: " this error is printed with again.
        let last = ran.last_words().trim_start_matches("edgeprof: error: ");
        if last.is_empty() {
            return Err(failed(format!(
                "{what} ended ({}) without saying why",
                ran.status
            )));
        }
        if ran.status.code() == Some(2) {
            return Err(AskError::Refused(crate::error::BadInput(format!(
                "{what} refused it: {last}"
            ))));
        }
        return Err(failed(format!("{what} failed ({}): {last}", ran.status)));
    }
    serde_json::from_str(ran.stdout.trim()).map_err(|e| {
        failed(format!(
            "{what}'s answer is not what was asked for ({e}): {}",
            ran.stdout.chars().take(200).collect::<String>()
        ))
    })
}

impl From<AskError> for crate::error::Error {
    fn from(error: AskError) -> crate::error::Error {
        let kind = match error {
            AskError::Refused(_) => crate::error::Kind::BadInput,
            AskError::Failed(_) => crate::error::Kind::ChildFailed,
        };
        crate::error::Error::of(kind, &error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Spec {
        let mut c = Spec::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn input_goes_in_and_output_comes_back() -> Result<(), ChildFailed> {
        let ran = run(
            &sh("cat; echo oops >&2"),
            b"echoed",
            Duration::from_secs(20),
            Stdout::Capture,
        )?;
        assert!(ran.status.success());
        assert_eq!(ran.stdout, "echoed");
        assert_eq!(ran.last_words(), "oops");
        Ok(())
    }

    #[test]
    fn a_child_out_of_time_is_killed_with_what_it_started() {
        let start = Instant::now();
        // The grandchild holds the pipes: only killing the group lets the run end.
        let late = run(
            &sh("sleep 30 & sleep 30"),
            b"",
            Duration::from_millis(300),
            Stdout::Capture,
        );
        match late {
            Err(e) => assert_eq!(e.0, "it did not answer within 300 ms"),
            Ok(r) => panic!("it finished: {r:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn output_is_kept_up_to_its_last_bytes_or_goes_to_a_file(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("out.csv");
        let ran = run(
            &sh("seq 1 100000"),
            b"",
            Duration::from_secs(20),
            Stdout::File(&file),
        )?;
        assert!(ran.status.success());
        assert!(ran.stdout.is_empty());
        let text = std::fs::read_to_string(&file)?;
        assert_eq!(text.lines().count(), 100_000);
        assert_eq!(text.lines().last(), Some("100000"));
        Ok(())
    }
}

//! Waiting for a child's exit without polling: a thread blocks in `waitid(…, WNOWAIT)` on the
//! child and says when it has exited, leaving it unreaped. Its owner then reaps it as usual
//! (`Child::wait`); until then the pid stays the child's, so a kill on a timeout cannot reach
//! another process that reused the number. A supervisor thus waits for "exit or deadline" in
//! one blocking call instead of sleeping and asking every few milliseconds.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Instant;

/// Tells when one child has exited.
pub struct ExitWatch {
    exited: Receiver<()>,
}

impl ExitWatch {
    /// Starts watching `pid`, a child of this process.
    pub fn start(pid: u32) -> std::io::Result<ExitWatch> {
        let (tx, exited) = mpsc::channel();
        notify(pid, move || {
            let _ = tx.send(());
        })?;
        Ok(ExitWatch { exited })
    }

    /// True once the child has exited; waits for that at most until `deadline`.
    pub fn exited_by(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.exited.recv_timeout(left) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        }
    }
}

/// Calls `told` on a thread of its own once `pid`, a child of this process, has exited (or can
/// no longer be waited for), leaving it unreaped for its owner.
pub fn notify(pid: u32, told: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let id = libc::id_t::from(pid);
    std::thread::Builder::new()
        .name("exit-watch".into())
        .spawn(move || {
            loop {
                // SAFETY: waitid only writes the zeroed siginfo owned here.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                let r = unsafe {
                    libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT)
                };
                if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    // Exited, or no longer ours to wait for (reaped already): either way
                    // the owner's own wait now returns at once.
                    break;
                }
            }
            told();
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    fn spawn(seconds: &str) -> std::process::Child {
        match Command::new("sleep").arg(seconds).spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot run sleep: {e}"),
        }
    }

    fn watch(child: &std::process::Child) -> ExitWatch {
        match ExitWatch::start(child.id()) {
            Ok(w) => w,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn an_exit_is_told_at_once_and_leaves_the_child_to_its_owner() {
        let mut child = spawn("0.2");
        let w = watch(&child);
        let start = Instant::now();
        assert!(w.exited_by(start + Duration::from_secs(20)));
        // Told when it ended, not at the deadline.
        assert!(start.elapsed() < Duration::from_secs(10));
        // Not reaped by the watch: the owner's wait gets the status.
        match child.wait() {
            Ok(status) => assert!(status.success()),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_child_still_running_at_the_deadline_is_said_so_and_can_be_killed() {
        let mut child = spawn("30");
        let w = watch(&child);
        let start = Instant::now();
        assert!(!w.exited_by(start + Duration::from_millis(200)));
        assert!(start.elapsed() >= Duration::from_millis(200));
        let _ = child.kill();
        assert!(w.exited_by(Instant::now() + Duration::from_secs(20)));
        match child.wait() {
            Ok(status) => assert!(!status.success()),
            Err(e) => panic!("{e}"),
        }
    }
}

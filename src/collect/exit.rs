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

/// Waits until each of `pids` (any processes of this user, not only children) has exited, or
/// until `until`: told by each one's pidfd, never by asking /proc again and again. A process
/// already gone counts as exited. On a kernel without pidfds (before Linux 5.3: the Jetsons of
/// L4T r32) nothing can tell of another process's exit, so this waits a short while instead
/// and the caller looks again.
pub fn gone_by(pids: &[i32], until: Instant) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds: Vec<OwnedFd> = Vec::new();
    for &pid in pids {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd >= 0 {
            // SAFETY: the descriptor was just made for us and is owned by nothing else.
            fds.push(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        } else if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            let left = until.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(std::time::Duration::from_millis(20)));
            return;
        }
        // Any other error (ESRCH): it is gone already.
    }
    while !fds.is_empty() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let mut polled: Vec<libc::pollfd> = fds
            .iter()
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: poll reads and writes only the array owned here, of the length given.
        let r = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
        // A pidfd is readable once its process has exited.
        let mut k = 0;
        fds.retain(|_| {
            let alive = polled[k].revents == 0;
            k += 1;
            alive
        });
    }
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
    fn a_wait_for_processes_to_be_gone_ends_when_they_have() {
        let mut child = spawn("0.3");
        let pid = child.id() as i32;
        let start = Instant::now();
        gone_by(&[pid, i32::MAX], start + Duration::from_secs(20));
        // Exited, not yet reaped.
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(matches!(child.try_wait(), Ok(Some(_))));
        let mut late = spawn("30");
        let start = Instant::now();
        gone_by(&[late.id() as i32], start + Duration::from_millis(200));
        assert!(matches!(late.try_wait(), Ok(None)));
        let _ = late.kill();
        let _ = late.wait();
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

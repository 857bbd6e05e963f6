//! Lock files that say who holds them: one writer per results directory, one set-up per
//! framework environment. The lock is an open-file-description lock (`F_OFD_SETLK`): the kernel
//! drops it when the holder exits, however it exits (SIGKILL, power loss of the process, a crash),
//! so a lock is never stale, and closing another descriptor of the same file in the same process
//! does not drop it (as it would a classic POSIX record lock). The file also names the holder's
//! pid, which only means something while the lock is held. The file is never deleted: a process
//! that opened it just before a deletion would lock an orphaned inode while a third locked a new
//! file, and both would think they were alone.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Who holds a lock, as its holder wrote it in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// When the holder took the lock (RFC 3339), if it said.
    pub since: Option<String>,
    /// What the holder is doing (e.g. `edgeprof run`), if it said.
    pub what: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if let Some(what) = &self.what {
            write!(f, ", {what}")?;
        }
        if let Some(since) = &self.since {
            write!(f, ", since {since}")?;
        }
        Ok(())
    }
}

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{} is held by another process ({holder})", path.display())]
    Held { path: PathBuf, holder: Holder },
    /// The holder exists but has not written its pid yet (it is starting this very moment).
    #[error("{} is held by another process that is just starting", path.display())]
    HeldUnnamed { path: PathBuf },
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct LockFile {
    /// Held open: the lock lives exactly as long as this descriptor.
    _file: File,
}

fn flock_struct(kind: libc::c_short) -> libc::flock {
    // SAFETY: flock is a plain C struct; all-zero is a valid value of it.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // l_start = 0 and l_len = 0: the whole file. l_pid must be 0 for OFD locks.
    lock
}

/// Tries to take (or, with `test_only`, to test) a write lock on the whole file. Ok(true): taken
/// (or free, when testing).
fn ofd_lock(file: &File, test_only: bool) -> std::io::Result<bool> {
    let mut lock = flock_struct(libc::F_WRLCK as libc::c_short);
    let command = if test_only {
        libc::F_OFD_GETLK
    } else {
        libc::F_OFD_SETLK
    };
    // SAFETY: fcntl with an OFD lock command reads (and for GETLK writes) the flock struct we
    // own; the descriptor stays open for the call.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), command, &mut lock) };
    if r == 0 {
        return Ok(!test_only || lock.l_type == libc::F_UNLCK as libc::c_short);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        // Kernels before 3.15 have no OFD locks: flock(2) has the same lifetime rules.
        Some(libc::EINVAL) => flock_fallback(file, test_only),
        _ => Err(e),
    }
}

fn flock_fallback(file: &File, test_only: bool) -> std::io::Result<bool> {
    let kind = if test_only {
        libc::LOCK_SH
    } else {
        libc::LOCK_EX
    };
    // SAFETY: flock on a descriptor we own.
    let r = unsafe { libc::flock(file.as_raw_fd(), kind | libc::LOCK_NB) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    if test_only {
        // SAFETY: as above; drops the shared lock the test took.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    }
    Ok(true)
}

fn parse_holder(text: &str) -> Option<Holder> {
    let mut pid = None;
    let mut since = None;
    let mut what = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("pid ") {
            pid = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("since ") {
            since = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("what ") {
            what = Some(v.trim().to_string());
        }
    }
    Some(Holder {
        pid: pid?,
        since,
        what,
    })
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.rewind().ok()?;
    // The holder writes a few short lines; more is not a lock file of ours.
    file.take(4096).read_to_string(&mut text).ok()?;
    parse_holder(&text)
}

impl LockFile {
    /// Takes the lock at `path` (creating the file) or says who holds it. `what` is written
    /// for whoever finds it held.
    pub fn try_acquire(path: &Path, what: &str) -> Result<LockFile, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        // Not through a symbolic link: the holder's lines would overwrite its target.
        let mut file = crate::files::open_regular(path, &options).map_err(io)?;
        if !ofd_lock(&file, false).map_err(io)? {
            return Err(match read_holder(&mut file) {
                Some(holder) => LockError::Held {
                    path: path.to_path_buf(),
                    holder,
                },
                None => LockError::HeldUnnamed {
                    path: path.to_path_buf(),
                },
            });
        }
        let text = format!(
            "pid {}\nsince {}\nwhat {what}\n",
            std::process::id(),
            crate::text::now_rfc3339()
        );
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| file.write_all(text.as_bytes()))
            .and_then(|_| file.flush())
            .map_err(io)?;
        Ok(LockFile { _file: file })
    }

    /// Takes the lock at `path`, waiting (without polling) while another process holds it;
    /// `on_wait` hears who holds it, once.
    pub fn acquire_waiting(
        path: &Path,
        what: &str,
        mut on_wait: impl FnMut(&LockError),
    ) -> Result<LockFile, LockError> {
        let mut told = false;
        loop {
            match LockFile::try_acquire(path, what) {
                Ok(lock) => return Ok(lock),
                Err(e @ LockError::Io { .. }) => return Err(e),
                Err(held) => {
                    if !told {
                        on_wait(&held);
                        told = true;
                    }
                    // Asleep in the kernel until the holder lets go, then try again (another
                    // waiter may take it first).
                    wait_released(path).map_err(|source| LockError::Io {
                        path: path.to_path_buf(),
                        source,
                    })?;
                }
            }
        }
    }
}

/// Who holds the lock at `path` right now, without taking it; None when nobody does (or
/// there is no such file).
pub fn holder(path: &Path) -> Option<Holder> {
    let mut file = crate::files::open_read(path).ok()?;
    match ofd_lock(&file, true) {
        Ok(false) => read_holder(&mut file).or(Some(Holder {
            pid: 0,
            since: None,
            what: None,
        })),
        _ => None,
    }
}

/// Blocks until nobody holds the lock at `path` (at once when nobody does), without polling:
/// it asks the kernel for a shared lock and waits for it, then lets go of it at once. Err when
/// the file cannot be opened or locked.
pub fn wait_released(path: &Path) -> std::io::Result<()> {
    let file = crate::files::open_read(path)?;
    let mut lock = flock_struct(libc::F_RDLCK as libc::c_short);
    loop {
        // SAFETY: fcntl with an OFD lock command reads the flock struct we own; the
        // descriptor stays open for the call.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLKW, &mut lock) };
        if r == 0 {
            // Released when `file` closes, here.
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            // Kernels before 3.15 have no OFD locks: the holder took a flock(2) lock.
            Some(libc::EINVAL) => {
                // SAFETY: flock on a descriptor we own; it blocks until the holder lets go.
                return match unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                };
            }
            _ => return Err(e),
        }
    }
}

crate::error::kinds!(crate::error::Kind::Failed => LockError);

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_waiting_taker_is_told_once_and_takes_the_lock_when_it_is_let_go() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("env.lock");
        let held = match LockFile::try_acquire(&path, "edgeprof env setup") {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let taker = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut told = Vec::new();
                let lock = LockFile::acquire_waiting(&path, "second", |e| told.push(e.to_string()));
                (lock, told)
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!taker.is_finished(), "it took a held lock");
        drop(held);
        let (_taken, told) = match taker.join() {
            Ok((Ok(lock), told)) => (lock, told),
            Ok((Err(e), _)) => panic!("{e}"),
            Err(_) => panic!("the taker panicked"),
        };
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(told[0].contains("edgeprof env setup"), "{told:?}");
        // It holds the lock now (`_taken`), and says so.
        assert_eq!(
            holder(&path).and_then(|h| h.what),
            Some("second".to_string())
        );
        Ok(())
    }

    #[test]
    fn a_waiter_returns_when_the_holder_lets_go() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("x.lock");
        let held = match LockFile::try_acquire(&path, "edgeprof run") {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        // Raised just before the lock is let go: a waiter that returns sees it raised.
        let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiter = {
            let (path, released) = (path.clone(), std::sync::Arc::clone(&released));
            std::thread::spawn(move || {
                wait_released(&path).map(|_| released.load(std::sync::atomic::Ordering::SeqCst))
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "it returned while the lock was held");
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(held);
        let after_release = match waiter.join() {
            Ok(r) => r?,
            Err(_) => panic!("the waiter panicked"),
        };
        assert!(after_release, "it returned before the lock was let go");
        // The waiter let go at once: the lock can be taken again.
        assert!(LockFile::try_acquire(&path, "again").is_ok());
        // Nobody holds it: returns at once.
        wait_released(&path)
    }

    #[test]
    fn a_second_taker_is_refused_with_the_holders_pid_until_the_first_lets_go() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("x.lock");
        assert_eq!(holder(&path), None);
        let first = match LockFile::try_acquire(&path, "edgeprof run") {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        // A second open file description, as a second process would have.
        match LockFile::try_acquire(&path, "edgeprof run --resume") {
            Err(LockError::Held { holder, .. }) => {
                assert_eq!(holder.pid, std::process::id());
                assert_eq!(holder.what.as_deref(), Some("edgeprof run"));
                assert!(holder.to_string().starts_with("pid "), "{holder}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(holder(&path).map(|h| h.pid), Some(std::process::id()));
        drop(first);
        assert_eq!(holder(&path), None);
        assert!(LockFile::try_acquire(&path, "again").is_ok());
    }

    #[test]
    fn holders_are_read_from_their_lines() {
        assert_eq!(
            parse_holder("pid 42\nsince 2026-12-01T10:00:00Z\nwhat edgeprof run\n"),
            Some(Holder {
                pid: 42,
                since: Some("2026-12-01T10:00:00Z".into()),
                what: Some("edgeprof run".into()),
            })
        );
        assert_eq!(parse_holder("garbage"), None);
    }
}

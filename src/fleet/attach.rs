//! A node re-attaching to its own sweep: when the controller's link half-died (the ssh session
//! hung while the node went on measuring, and new connections still work), the controller's
//! `run --resume DIR --stream` finds DIR's writer lock held by the node's first run, alive. It
//! then follows that run instead of refusing: every record in `runs.jsonl`, those already there
//! and those appended meanwhile, until the writer lets go of its lock; then the rest is resumed
//! (or nothing is left). Nothing polls: one thread waits for the lock in the kernel, one blocks
//! on the directory's inotify events, and a cancel wakes the follower at once.

use crate::collect::stop::Cancel;
use crate::results::{self, RunRecord};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How a follow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// The writer let go of the directory.
    Released,
    /// The cancel was raised first.
    Cancelled,
}

/// What wakes a follower.
enum Wake {
    Changed,
    Released,
    Cancelled,
}

/// Reads a results directory's `runs.jsonl` as it grows, each whole line once.
pub struct Follower {
    path: PathBuf,
    offset: u64,
    /// A line not yet ended by its newline (the writer is between two writes).
    partial: Vec<u8>,
}

impl Follower {
    /// A follower of `dir`'s records from the first.
    pub fn new(dir: &Path) -> Follower {
        Follower {
            path: dir.join(results::RUNS),
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// The records written since the last call, whole lines only; a line that does not read as
    /// a record (a torn one left by a kill) is skipped.
    pub fn read_new(&mut self) -> std::io::Result<Vec<RunRecord>> {
        let mut file = match crate::files::open_read(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Ok(Vec::new());
        };
        let rest = self.partial.split_off(end + 1);
        let whole = std::mem::replace(&mut self.partial, rest);
        Ok(String::from_utf8_lossy(&whole)
            .lines()
            .filter_map(|l| serde_json::from_str::<RunRecord>(l).ok())
            .collect())
    }

    /// Hands `on_record` every record until the directory's writer lets go of its lock (the
    /// records it wrote last included) or `cancel` is raised.
    pub fn follow(
        &mut self,
        dir: &Path,
        cancel: &Cancel,
        mut on_record: impl FnMut(RunRecord),
    ) -> std::io::Result<Followed> {
        let (tx, rx) = mpsc::channel();
        {
            let (tx, lock) = (tx.clone(), dir.join(results::LOCK));
            std::thread::spawn(move || {
                // An error (the lock file cannot be opened) ends the following as a release.
                let _ = crate::lockfile::wait_released(&lock);
                let _ = tx.send(Wake::Released);
            });
        }
        let watching = watch(dir, tx.clone());
        let _on_cancel = {
            let tx = std::sync::Mutex::new(tx);
            cancel.on_raise(move || {
                if let Ok(tx) = tx.lock() {
                    let _ = tx.send(Wake::Cancelled);
                }
            })
        };
        loop {
            for record in self.read_new()? {
                on_record(record);
            }
            // Without inotify (a file system that has none) records are read every second.
            let wake = if watching {
                rx.recv().ok()
            } else {
                match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok(w) => Some(w),
                    Err(mpsc::RecvTimeoutError::Timeout) => Some(Wake::Changed),
                    Err(mpsc::RecvTimeoutError::Disconnected) => None,
                }
            };
            match wake {
                Some(Wake::Changed) => {}
                Some(Wake::Cancelled) => return Ok(Followed::Cancelled),
                Some(Wake::Released) | None => {
                    // What the writer wrote last, before it let go.
                    for record in self.read_new()? {
                        on_record(record);
                    }
                    return Ok(Followed::Released);
                }
            }
        }
    }
}

/// Sends [`Wake::Changed`] whenever a file of `dir` changes, from a thread that ends with the
/// follower (its next send fails). False when inotify is not there.
fn watch(dir: &Path, tx: mpsc::Sender<Wake>) -> bool {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let watching = Inotify::init(InitFlags::IN_CLOEXEC).and_then(|inotify| {
        inotify
            .add_watch(dir, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE)
            .map(|_| inotify)
    });
    let Ok(inotify) = watching else { return false };
    std::thread::spawn(move || {
        while inotify.read_events().is_ok() {
            if tx.send(Wake::Changed).is_err() {
                return;
            }
        }
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_follower_hands_each_whole_line_once_and_keeps_a_partial_one_for_later() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let fixture = include_str!("../../tests/fixtures/results/small/runs.jsonl");
        let record = |id: &str| {
            let line = fixture.lines().next().unwrap_or_default();
            let mut r: RunRecord = match serde_json::from_str(line) {
                Ok(r) => r,
                Err(e) => panic!("{e}"),
            };
            r.condition.id = id.to_string();
            match serde_json::to_string(&r) {
                Ok(t) => t,
                Err(e) => panic!("{e}"),
            }
        };
        let path = dir.path().join(results::RUNS);
        let mut follower = Follower::new(dir.path());
        let ids = |f: &mut Follower| -> Vec<String> {
            match f.read_new() {
                Ok(r) => r.into_iter().map(|r| r.condition.id).collect(),
                Err(e) => panic!("{e}"),
            }
        };
        assert!(ids(&mut follower).is_empty());
        let (a, b) = (record("a"), record("b"));
        let half = b.len() / 2;
        let write = |text: &str| {
            use std::io::Write;
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()));
            if let Err(e) = appended {
                panic!("{e}");
            }
        };
        write(&format!("{a}\n{}", &b[..half]));
        assert_eq!(ids(&mut follower), ["a"]);
        write(&format!("{}\n", &b[half..]));
        assert_eq!(ids(&mut follower), ["b"]);
        assert!(ids(&mut follower).is_empty());
    }
}

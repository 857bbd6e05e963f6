//! A worker's whole process tree, so that stopping a worker stops everything it started. A
//! worker's own process group is not enough: a child that calls `setsid` (a daemonising
//! framework helper, a user's script) leaves the group, keeps the worker's output pipes open and
//! outlives it. Two marks find such processes:
//!
//! - every worker is started with `EDGEPROF_WORKER_TAG=<edgeprof pid>-<n>` in its environment,
//!   which its descendants inherit (found by scanning `/proc/*/environ`, readable for our own
//!   processes);
//! - while it runs, its descendants are followed through `/proc/PID/task/TID/children`, which
//!   also finds one that cleared its environment, as long as it was seen before its parent died.
//!
//! Pids are remembered with their start time, so a pid reused by an unrelated process after a
//! descendant ended is never signalled.
//!
//! And if edgeprof itself is killed (SIGKILL, the OOM killer), a small guard process, started
//! once per edgeprof and holding the read end of a pipe only edgeprof writes, wakes at the pipe's
//! end and kills every process carrying one of this edgeprof's tags.

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The environment variable that marks a worker and its descendants.
pub const TAG_VAR: &str = "EDGEPROF_WORKER_TAG";

/// A tag for the next worker of this process: `<pid>-<n>`.
pub fn new_tag() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    format!("{}{}", tag_prefix(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What every tag of this process starts with.
pub fn tag_prefix() -> String {
    format!("{}-", std::process::id())
}

/// A process's start time in clock ticks since boot (field 22 of `/proc/PID/stat`): with the
/// pid, it names one process for good.
pub(crate) fn start_time(root: &Path, pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(root.join(format!("proc/{pid}/stat"))).ok()?;
    // Fields after the command name, which may hold spaces and ')'.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The children of every thread of `pid`.
fn children(root: &Path, pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(root.join(format!("proc/{pid}/task"))) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            found.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    found
}

/// Whether `environ` (NUL-separated `KEY=VALUE` entries) holds a worker tag accepted by `want`.
fn has_tag(environ: &[u8], want: impl Fn(&str) -> bool) -> bool {
    let key = TAG_VAR.as_bytes();
    environ.split(|&b| b == 0).any(|entry| {
        entry.len() > key.len()
            && entry.starts_with(key)
            && entry[key.len()] == b'='
            && std::str::from_utf8(&entry[key.len() + 1..]).is_ok_and(&want)
    })
}

/// Every process under `root`/proc (but this one) whose environment carries a tag `want` accepts.
pub fn tagged(root: &Path, want: impl Fn(&str) -> bool) -> Vec<i32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for (pid, dir) in crate::collect::proc::pids(root) {
        let Ok(pid_i32) = i32::try_from(pid) else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Other users' processes are unreadable (and not ours to stop): skipped.
        if let Ok(environ) = std::fs::read(dir.join("environ")) {
            if has_tag(&environ, &want) {
                found.push(pid_i32);
            }
        }
    }
    found
}

/// The processes of one worker.
pub struct Tree {
    root: PathBuf,
    /// The worker, which leads its own process group.
    leader: i32,
    tag: String,
    /// Descendants seen so far, with their start times.
    known: HashMap<i32, Option<u64>>,
}

impl Tree {
    /// The tree of the worker `leader`, started with `tag` in its environment.
    pub fn new(leader: i32, tag: &str) -> Tree {
        let root = PathBuf::from("/");
        let mut known = HashMap::new();
        known.insert(leader, start_time(&root, leader));
        Tree {
            root,
            leader,
            tag: tag.to_string(),
            known,
        }
    }

    /// Follows the tree down from every process known in it (cheap: a few small files).
    pub fn refresh(&mut self) {
        let mut queue: Vec<i32> = self.known.keys().copied().collect();
        while let Some(pid) = queue.pop() {
            for child in children(&self.root, pid) {
                if !self.known.contains_key(&child) {
                    self.known.insert(child, start_time(&self.root, child));
                    queue.push(child);
                }
            }
        }
    }

    /// The processes of the tree still alive now: the known ones that are still themselves,
    /// and every process carrying the worker's tag.
    pub fn members(&mut self) -> Vec<i32> {
        self.refresh();
        let mut alive: Vec<i32> = self
            .known
            .iter()
            .filter(|(&pid, &started)| {
                let now = start_time(&self.root, pid);
                now.is_some() && (started.is_none() || now == started)
            })
            .map(|(&pid, _)| pid)
            .collect();
        for pid in tagged(&self.root, |t| t == self.tag) {
            if !alive.contains(&pid) {
                alive.push(pid);
            }
        }
        alive
    }

    /// Sends `signal` to the worker's group and to every member of its tree; returns how many
    /// processes (besides the group) were signalled.
    pub fn signal(&mut self, signal: Signal) -> usize {
        let _ = killpg(Pid::from_raw(self.leader), signal);
        let members = self.members();
        let mut sent = 0;
        for pid in members {
            if kill(Pid::from_raw(pid), signal).is_ok() {
                sent += 1;
            }
        }
        sent
    }
}

/// Kills every process carrying a tag that starts with `prefix`, until none is left or `within`
/// has passed; returns how many were killed.
pub fn kill_tagged(root: &Path, prefix: &str, within: Duration) -> usize {
    let until = Instant::now() + within;
    let mut killed = std::collections::HashSet::new();
    loop {
        let found = tagged(root, |t| t.starts_with(prefix));
        if found.is_empty() || Instant::now() >= until {
            return killed.len();
        }
        for &pid in &found {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed.insert(pid);
            }
        }
        // Once those are gone, look again for any they started meanwhile.
        crate::collect::exit::gone_by(&found, until);
    }
}

/// `edgeprof reap-guard`: waits for its standard input to end (edgeprof exited, however it
/// exited), then kills whatever its workers left. It ignores the terminal's signals, so a hang-up
/// or Ctrl-C reaches edgeprof (which stops the sweep in order) but not the guard.
pub fn guard_main(prefix: &str) {
    use std::io::Read;
    for signal in [
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGPIPE,
    ] {
        // SAFETY: ignoring a signal installs no handler code.
        let _ = unsafe { nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigIgn) };
    }
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kill_tagged(Path::new("/"), prefix, Duration::from_secs(5));
}

/// Starts this process's guard (once; later calls do nothing while it lives). `edgeprof` is
/// this binary.
pub fn start_guard(edgeprof: &Path) {
    use crate::collect::child::{Heard, Input, Output, Spec, Started};
    use std::sync::Mutex;
    /// Its stdin, whose end (edgeprof's death) is its signal, and the child itself.
    static GUARD: Mutex<Option<(std::process::ChildStdin, Started)>> = Mutex::new(None);
    let Ok(mut held) = GUARD.lock() else {
        return;
    };
    if held.is_some() {
        return;
    }
    let mut spec = Spec::new(edgeprof);
    // Its work starts when edgeprof dies; out of the terminal's process group, Ctrl-C and a
    // hang-up go to edgeprof only.
    spec.args(["reap-guard", "--prefix", &tag_prefix()])
        .outliving_edgeprof();
    let (tx, heard) = std::sync::mpsc::channel::<Heard>();
    // Without a guard the sweep still runs; only the kill-on-edgeprof's-death is lost.
    let Ok(mut guard) = spec.start(Input::Piped, Output::Lines { max: 4096 }, &tx, None) else {
        return;
    };
    drop(tx);
    let Some(stdin) = guard.take_stdin() else {
        return;
    };
    *held = Some((stdin, guard));
    // Reaped by a thread of its own, so it never lingers as a zombie if it ends early.
    std::thread::spawn(move || {
        if heard.iter().any(|h| h == Heard::Exited) {
            if let Ok(mut held) = GUARD.lock() {
                if let Some((_, mut guard)) = held.take() {
                    let _ = guard.reap();
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_found_only_as_whole_entries() {
        let environ = b"HOME=/root\0EDGEPROF_WORKER_TAG=12-3\0PATH=/bin\0";
        assert!(has_tag(environ, |t| t == "12-3"));
        assert!(has_tag(environ, |t| t.starts_with("12-")));
        assert!(!has_tag(environ, |t| t == "12-30"));
        assert!(!has_tag(b"XEDGEPROF_WORKER_TAG=12-3\0", |_| true));
        assert!(!has_tag(b"EDGEPROF_WORKER_TAGS=12-3\0", |_| true));
        assert!(!has_tag(b"", |_| true));
    }

    #[test]
    fn tags_are_unique_and_carry_this_pid() {
        let (a, b) = (new_tag(), new_tag());
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}-", std::process::id())));
    }

    #[test]
    fn a_setsid_grandchild_is_found_by_its_tag_and_killed() {
        use std::process::Command;
        let tag = new_tag();
        // The shell starts a grandchild in a session of its own, then exits at once.
        let status = Command::new("sh")
            .args(["-c", "setsid sleep 30 >/dev/null 2>&1 </dev/null &"])
            .env(TAG_VAR, &tag)
            .status();
        assert!(status.is_ok_and(|s| s.success()));
        let until = Instant::now() + Duration::from_secs(5);
        let mut found = Vec::new();
        while found.is_empty() && Instant::now() < until {
            found = tagged(Path::new("/"), |t| t == tag);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(kill_tagged(Path::new("/"), &tag, Duration::from_secs(5)), 1);
        assert!(tagged(Path::new("/"), |t| t == tag).is_empty());
    }
}

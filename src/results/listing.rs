//! The results directories under an output directory and where each stands, so a user who
//! reconnects to a board can find a sweep that went on without them: running (which process,
//! how far), complete, complete with failures, or interrupted (and how to finish it).

use crate::results::{self, Manifest, SweepStatus};
use serde::Serialize;
use std::io::{BufRead, Read, Seek};
use std::path::{Path, PathBuf};

/// Where a sweep stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// An edgeprof holds the directory's lock now.
    Running,
    /// Every condition has its result and none failed.
    Complete,
    /// Every condition has its result; some failed.
    Failed,
    /// Stopped before the end (Ctrl-C, SIGTERM, or edgeprof killed): `run --resume` finishes it.
    Interrupted,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Running => "running",
            State::Complete => "complete",
            State::Failed => "failed",
            State::Interrupted => "interrupted",
        })
    }
}

/// One results directory.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub dir: PathBuf,
    pub name: String,
    pub state: State,
    /// The process writing it, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Conditions with their result, of the planned total.
    pub done: usize,
    pub total: usize,
    pub failed: usize,
    pub started: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// The last line of its progress log, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_progress: Option<String>,
    /// Why the state is what it is, when the manifest alone would mislead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Conditions with their result and how many failed, read record by record (a runs.jsonl
/// holds every raw latency; only three fields of each line are kept).
fn count_finished(path: &Path) -> (usize, usize) {
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    #[derive(serde::Deserialize)]
    struct Brief {
        condition: Id,
        ok: bool,
        last: bool,
    }
    let Ok(file) = crate::files::open_read(path) else {
        return (0, 0);
    };
    let mut results: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    for line in std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(Result::ok)
    {
        if let Ok(b) = serde_json::from_slice::<Brief>(&line) {
            if b.ok || b.last {
                results.insert(b.condition.id, b.ok);
            }
        }
    }
    let failed = results.values().filter(|ok| !**ok).count();
    (results.len(), failed)
}

/// The last line of a text file, read from its end.
fn last_line(path: &Path) -> Option<String> {
    let mut file = crate::files::open_read(path).ok()?;
    let len = file.seek(std::io::SeekFrom::End(0)).ok()?;
    file.seek(std::io::SeekFrom::Start(len.saturating_sub(4096)))
        .ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    String::from_utf8_lossy(&tail)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string)
}

/// Where the results directory `dir` stands, if it is one.
pub fn describe(dir: &Path) -> Option<Listing> {
    // The lock is asked before and after the manifest is read: a run that ends in between has
    // closed its manifest by the time it lets go, and one that starts in between holds the lock
    // by the time it rewrites it, so "not held and still says running" means it really died.
    let lock = dir.join(results::LOCK);
    let before = crate::lockfile::holder(&lock);
    let manifest: Manifest = results::read_manifest(dir).ok()?;
    let holder = before.or_else(|| crate::lockfile::holder(&lock));
    let (done, failed) = count_finished(&dir.join(results::RUNS));
    let total = manifest.conditions.len();
    let mut note = None;
    let state = match (&holder, manifest.status) {
        (Some(_), _) => State::Running,
        (None, SweepStatus::Running) => {
            note = Some(
                "its edgeprof ended without closing it (killed, or the machine restarted)"
                    .to_string(),
            );
            State::Interrupted
        }
        (None, SweepStatus::Interrupted) => State::Interrupted,
        (None, SweepStatus::Complete) if done < total => State::Interrupted,
        (None, SweepStatus::Complete) if failed > 0 => State::Failed,
        (None, SweepStatus::Complete) => State::Complete,
    };
    Some(Listing {
        dir: dir.to_path_buf(),
        name: manifest.name,
        state,
        pid: holder.map(|h| h.pid).filter(|&p| p > 0),
        done,
        total,
        failed,
        started: manifest.started,
        ended: manifest.ended,
        last_progress: if state == State::Running {
            last_line(&dir.join(results::PROGRESS))
        } else {
            None
        },
        note,
    })
}

/// The results directories directly under `parent`, and those one level further down (the
/// per-node directories of a fleet run), oldest first (their names start with the UTC time).
pub fn list(parent: &Path) -> std::io::Result<Vec<Listing>> {
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(parent)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for dir in entries {
        if let Some(listing) = describe(&dir) {
            found.push(listing);
            continue;
        }
        let Ok(inner) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut inner: Vec<PathBuf> = inner
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        inner.sort();
        found.extend(inner.iter().filter_map(|d| describe(d)));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_conditions_are_counted_once_with_their_last_attempt() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("runs.jsonl");
        let line = |id: &str, ok: bool, last: bool| {
            format!(
                "{{\"condition\":{{\"id\":\"{id}\",\"extra\":1}},\"ok\":{ok},\"last\":{last},\"run\":{{}}}}\n"
            )
        };
        let text = [
            line("a", false, false),
            line("a", true, true),
            line("b", false, false),
            line("c", false, true),
            "torn {".to_string(),
        ]
        .concat();
        if let Err(e) = std::fs::write(&path, text) {
            panic!("{e}");
        }
        assert_eq!(count_finished(&path), (2, 1));
        assert_eq!(count_finished(&dir.path().join("none")), (0, 0));
    }

    #[test]
    fn the_last_line_is_read_from_the_end() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("progress.log");
        let text = format!("{}\nsecond\nthird\n\n", "x".repeat(10_000));
        if let Err(e) = std::fs::write(&path, text) {
            panic!("{e}");
        }
        assert_eq!(last_line(&path).as_deref(), Some("third"));
    }
}

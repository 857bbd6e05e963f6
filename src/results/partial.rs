//! What a stopped sweep had measured of the conditions it was in the middle of: the repeats
//! their worker processes finished, with what those runs cost and saw. Kept in `partial.jsonl`
//! so that `--resume` goes on from them instead of measuring them again; a condition's record,
//! once stored, makes its partial lines history.

use crate::collect::other_processes::Disturbance;
use crate::collect::proc::ProcSample;
use crate::collect::telemetry::Sample;
use crate::error::Context;
use crate::protocol::repetition::Repetition;
use crate::protocol::{Condition, Resources, WorkerRun};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// The file of a results directory that holds the partial measurements.
pub const PARTIAL: &str = "partial.jsonl";

/// One condition's measurement stopped part-way: an attempt without its record yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    pub condition: Condition,
    pub attempt: usize,
    /// When the attempt began.
    pub started: String,
    /// Its load, first inference, warm-up and the repeats its runs finished.
    pub run: WorkerRun,
    pub repetition: Repetition,
    pub resources: Resources,
    pub samples: Vec<ProcSample>,
    pub telemetry: Vec<Sample>,
    /// Other processes on its cores during each of its worker runs, with the run's wall time.
    pub disturbance: Vec<(Disturbance, f64)>,
    /// Seconds of work its workers measured.
    pub measured_s: f64,
}

/// Appends `partials` to `dir`'s [`PARTIAL`] file and pushes them to the disk.
pub fn keep(dir: &Path, partials: &[Partial]) -> crate::error::Result<()> {
    if partials.is_empty() {
        return Ok(());
    }
    let mut file = super::open_append(&dir.join(PARTIAL))?;
    super::append_block(&mut file, PARTIAL, partials.iter())?;
    let _ = file.sync_data();
    Ok(())
}

/// The partial measurements of `dir` that a resumed sweep goes on from: for each condition the
/// last one kept, unless an attempt of it as late has a record (`recorded`: the highest
/// attempt with a record, by condition id). What could not be read is said in the warnings.
pub fn pending(
    dir: &Path,
    recorded: &HashMap<&str, usize>,
) -> crate::error::Result<(HashMap<String, Partial>, Vec<String>)> {
    let lines = super::read_lines::<Partial>(&dir.join(PARTIAL))
        .with_context(|| format!("cannot read the partial measurements of {}", dir.display()))?;
    let mut out: HashMap<String, Partial> = HashMap::new();
    for p in lines.records {
        let done = recorded
            .get(p.condition.id.as_str())
            .is_some_and(|&a| a >= p.attempt);
        if done || p.run.repeats.is_empty() {
            continue;
        }
        out.insert(p.condition.id.clone(), p);
    }
    Ok((out, lines.warnings))
}

/// Removes `dir`'s partial measurements once every condition has its record.
pub fn clear(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(PARTIAL));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(id: &str, attempt: usize, repeats: usize) -> Partial {
        let condition: Condition = match serde_json::from_value(serde_json::json!({
            "id": id, "engine": "command", "model": {"kind": "zoo", "name": "resnet34"},
            "input": "3x224x224", "batch": 1, "threads": 0, "device": "cpu"
        })) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        Partial {
            condition,
            attempt,
            started: "2026-12-05T00:00:00Z".into(),
            run: WorkerRun {
                repeats: vec![vec![1.0, 2.0]; repeats],
                ..WorkerRun::default()
            },
            repetition: Repetition::default(),
            resources: Resources::default(),
            samples: Vec::new(),
            telemetry: Vec::new(),
            disturbance: Vec::new(),
            measured_s: 0.1,
        }
    }

    #[test]
    fn the_last_partial_of_an_unrecorded_attempt_is_pending() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let kept = [
            partial("a", 1, 1),
            partial("a", 2, 2),
            partial("b", 1, 1),
            partial("c", 1, 0),
        ];
        if let Err(e) = keep(dir.path(), &kept) {
            panic!("{e}");
        }
        // b's attempt 1 has its record since.
        let recorded: HashMap<&str, usize> = [("b", 1)].into_iter().collect();
        let (pending, warnings) = match pending(dir.path(), &recorded) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert!(warnings.is_empty(), "{warnings:?}");
        let ids: Vec<&str> = pending.keys().map(String::as_str).collect();
        assert_eq!(ids, ["a"]);
        assert_eq!(pending["a"].attempt, 2);
        assert_eq!(pending["a"].run.repeats.len(), 2);
        clear(dir.path());
        assert!(!dir.path().join(PARTIAL).exists());
    }
}

//! What a resume checks before it trusts a results directory: that the files its conditions
//! read are still the ones measured, and that every condition counted as done has all of its
//! lines (a full disk can stop a sweep between a condition's record and its samples).

use super::{RunRecord, SampleRecord, TelemetryRecord};
use crate::config::ModelRef;
use crate::error::Context;
use crate::protocol::Condition;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The files `conditions` read: model files and the input tensors given by `NAME=@FILE`.
pub fn files_read(conditions: &[Condition]) -> BTreeSet<PathBuf> {
    let mut files = BTreeSet::new();
    for c in conditions {
        match &c.model {
            ModelRef::Onnx(p) | ModelRef::Tflite(p) | ModelRef::Torch(p) => {
                files.insert(p.clone());
            }
            ModelRef::Zoo(_) => {}
        }
        for spec in c.named_inputs.iter().flat_map(|s| s.split_whitespace()) {
            if let Some((_, file)) = spec.split_once("=@") {
                files.insert(PathBuf::from(file));
            }
        }
    }
    files
}

/// `sha256:` and the hex digest of the file at `path` (a regular file only).
pub fn digest(path: &Path) -> std::io::Result<String> {
    let mut file = crate::files::open_read(path)?;
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut block)?;
        if n == 0 {
            break;
        }
        hasher.update(&block[..n]);
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("sha256:{hex}"))
}

/// The digests of the files `conditions` read, by path. A file that cannot be read now is left
/// out: its conditions fail on their own, saying why.
pub fn digests(conditions: &[Condition]) -> BTreeMap<String, String> {
    files_read(conditions)
        .into_iter()
        .filter_map(|p| Some((p.display().to_string(), digest(&p).ok()?)))
        .collect()
}

/// The files of `stored` (path → digest when the sweep began) that are gone or hold something
/// else now, each said in a few words.
pub fn changed(stored: &BTreeMap<String, String>) -> Vec<String> {
    stored
        .iter()
        .filter_map(|(path, was)| match digest(Path::new(path)) {
            Ok(now) if &now == was => None,
            Ok(_) => Some(format!("{path} holds another content")),
            Err(e) => Some(format!("{path} cannot be read ({e})")),
        })
        .collect()
}

/// A condition counted as done whose lines are not all there.
#[derive(Debug, Clone, PartialEq)]
pub struct Incomplete {
    pub condition: String,
    pub attempt: usize,
    /// What is missing, in words (`its record says 106 samples; samples.jsonl holds 19`).
    pub missing: String,
}

/// Lines per (condition, attempt) in a samples or telemetry file.
fn counts<'a>(keys: impl Iterator<Item = (&'a str, usize)>) -> HashMap<(&'a str, usize), usize> {
    let mut counts = HashMap::new();
    for key in keys {
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// The finished conditions (by their result record) whose samples or telemetry lines are fewer
/// than their record says were taken.
pub fn incomplete(
    runs: &[RunRecord],
    samples: &[SampleRecord],
    telemetry: &[TelemetryRecord],
) -> Vec<Incomplete> {
    let sample_counts = counts(samples.iter().map(|s| (s.condition.as_str(), s.attempt)));
    let telemetry_counts = counts(telemetry.iter().map(|t| (t.condition.as_str(), t.attempt)));
    // A condition's result is its latest attempt that succeeded or was its last.
    let mut results: BTreeMap<&str, &RunRecord> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.ok || r.last) {
        results.insert(r.condition.id.as_str(), r);
    }
    let mut out = Vec::new();
    for (id, r) in results {
        let held = |counts: &HashMap<(&str, usize), usize>| {
            counts.get(&(id, r.attempt)).copied().unwrap_or(0)
        };
        let mut missing = Vec::new();
        let samples_held = held(&sample_counts);
        if samples_held < r.resources.samples {
            missing.push(format!(
                "its record says {} samples; {} holds {samples_held}",
                r.resources.samples,
                super::SAMPLES
            ));
        }
        let said = r.telemetry.as_ref().map_or(0, |t| t.samples);
        let telemetry_held = held(&telemetry_counts);
        if telemetry_held < said {
            missing.push(format!(
                "its record says {said} telemetry samples; {} holds {telemetry_held}",
                super::TELEMETRY
            ));
        }
        if !missing.is_empty() {
            out.push(Incomplete {
                condition: id.to_string(),
                attempt: r.attempt,
                missing: missing.join(", "),
            });
        }
    }
    out
}

/// The highest attempt number any line of a condition carries, in the samples and telemetry
/// files too: an attempt whose record was never written (the disk filled first) may have left
/// some of its lines, and the next attempt must not reuse its number.
pub fn highest_attempts(
    runs: &[RunRecord],
    samples: &[SampleRecord],
    telemetry: &[TelemetryRecord],
) -> HashMap<String, usize> {
    let mut highest: HashMap<String, usize> = HashMap::new();
    let all = runs
        .iter()
        .map(|r| (r.condition.id.as_str(), r.attempt))
        .chain(samples.iter().map(|s| (s.condition.as_str(), s.attempt)))
        .chain(telemetry.iter().map(|t| (t.condition.as_str(), t.attempt)));
    for (id, attempt) in all {
        let n = highest.entry(id.to_string()).or_default();
        *n = (*n).max(attempt);
    }
    highest
}

/// Reads a results directory's three line files for a resume, warnings included.
pub fn read_all(
    dir: &Path,
) -> crate::error::Result<(
    super::Lines<RunRecord>,
    super::Lines<SampleRecord>,
    super::Lines<TelemetryRecord>,
)> {
    let runs = super::read_lines::<RunRecord>(&dir.join(super::RUNS))?;
    let samples = super::read_lines::<SampleRecord>(&dir.join(super::SAMPLES))
        .with_context(|| format!("cannot check the samples of {}", dir.display()))?;
    let telemetry = super::read_lines::<TelemetryRecord>(&dir.join(super::TELEMETRY))
        .with_context(|| format!("cannot check the telemetry of {}", dir.display()))?;
    Ok((runs, samples, telemetry))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Device;
    use crate::models::InputShape;

    fn record(id: &str, attempt: usize, samples: usize) -> RunRecord {
        let mut condition = Condition::new(
            "tract",
            ModelRef::Zoo("resnet34".into()),
            InputShape::default(),
            1,
            1,
            Device::Cpu,
        );
        condition.id = id.to_string();
        RunRecord {
            attempt,
            resources: crate::protocol::Resources {
                samples,
                ..Default::default()
            },
            ..RunRecord::bare(condition)
        }
    }

    fn sample(id: &str, attempt: usize) -> SampleRecord {
        SampleRecord {
            condition: id.to_string(),
            attempt,
            sample: Default::default(),
        }
    }

    #[test]
    fn a_result_with_fewer_samples_than_it_took_is_incomplete() {
        let runs = [record("a", 1, 2), record("b", 2, 3)];
        let samples = [
            sample("a", 1),
            sample("a", 1),
            sample("b", 1),
            sample("b", 2),
            sample("b", 2),
        ];
        let found = incomplete(&runs, &samples, &[]);
        assert_eq!(
            found,
            vec![Incomplete {
                condition: "b".into(),
                attempt: 2,
                missing: "its record says 3 samples; samples.jsonl holds 2".into(),
            }]
        );
    }

    #[test]
    fn the_next_attempt_counts_on_from_lines_without_a_record() {
        let runs = [record("a", 1, 2)];
        let samples = [sample("a", 1), sample("a", 2)];
        assert_eq!(highest_attempts(&runs, &samples, &[]).get("a"), Some(&2));
    }

    #[test]
    fn a_changed_file_is_named() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("model.onnx");
        if let Err(e) = std::fs::write(&path, "one") {
            panic!("{e}");
        }
        let mut condition = record("x", 1, 0).condition;
        condition.model = ModelRef::Onnx(path.clone());
        let stored = digests(&[condition]);
        assert_eq!(changed(&stored), Vec::<String>::new());
        if let Err(e) = std::fs::write(&path, "two") {
            panic!("{e}");
        }
        assert_eq!(
            changed(&stored),
            vec![format!("{} holds another content", path.display())]
        );
    }
}

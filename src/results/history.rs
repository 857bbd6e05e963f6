//! What this device measured before: the latest clean median of every condition, kept per
//! device in the cache directory (`history-<device key>.json`), so that a run can say when a
//! condition moved beyond both intervals since its last clean run here.
//!
//! Figures measured inside one sweep cannot see a slowdown of the whole machine that lasts
//! exactly as long as the sweep (a hypervisor's neighbour, a host changing clocks): every
//! condition, every repeat and every worker process is slowed alike, so each looks clean and
//! its interval is honest about the sweep but not about the machine. Against the same
//! condition measured earlier on this device, such a run stands out, and its verdict says so.

use crate::results::RunRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Most bytes of a history file read back (a line of JSON per condition ever measured).
const MAX_BYTES: u64 = 16 << 20;
/// Most conditions a history keeps: the oldest are dropped beyond it.
const MAX_ENTRIES: usize = 20_000;

/// Why the history could not be kept, in one sentence naming its file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct HistoryError(pub String);

/// A condition's latest clean run on this device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Earlier {
    pub median_ms: f64,
    /// The 95 % interval of that median.
    pub interval_ms: (f64, f64),
    /// When it was measured (RFC 3339).
    pub written: String,
    /// The results directory it is in.
    pub results: String,
}

impl Earlier {
    /// A median and an interval that are times: finite, a positive median of a normal size
    /// (not a denormal), the interval in order.
    fn is_sound(&self) -> bool {
        let (low, high) = self.interval_ms;
        low.is_finite()
            && high.is_finite()
            && self.median_ms.is_normal()
            && self.median_ms > 0.0
            && low <= high
    }
}

/// A condition against its latest clean run on this device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub earlier: Earlier,
    /// This median over the earlier one.
    pub ratio: f64,
    /// The two intervals do not overlap: the difference is beyond what either run's own
    /// figures allow, so the machine was not the same.
    pub beyond: bool,
}

impl Drift {
    /// `14 % slower than its clean run of 2026-12-03T10:01Z here, beyond both intervals`.
    pub fn reason(&self) -> String {
        let pct = (self.ratio - 1.0).abs() * 100.0;
        let way = if self.ratio >= 1.0 {
            "slower"
        } else {
            "faster"
        };
        let when: String = self.earlier.written.chars().take(16).collect();
        format!(
            "{pct:.0} % {way} than its clean run of {when} on this device ({:.3} ms), beyond both intervals",
            self.earlier.median_ms
        )
    }
}

/// What makes two runs of a condition comparable: the condition, its engine's version and the
/// measurement settings that change a median.
pub fn key(record: &RunRecord, m: &crate::config::Measure) -> String {
    let version = record
        .run
        .as_ref()
        .and_then(|r| r.engine_version.as_deref())
        .unwrap_or("");
    format!(
        "{} {version} warmup={} {}s iterations={} min={}s outliers={:?}",
        record.condition.id, m.warmup, m.warmup_seconds, m.iterations, m.min_duration_s, m.outliers
    )
}

/// A device's history, read at the start of a sweep and written back as conditions end.
#[derive(Debug, Default)]
pub struct History {
    path: Option<PathBuf>,
    entries: BTreeMap<String, Earlier>,
}

/// The file of the device with this key in `dir`.
pub fn path_for(dir: &Path, device_key: &str) -> PathBuf {
    dir.join(format!("history-{device_key}.json"))
}

impl History {
    /// The history at `path`, empty when there is none yet, and what the user should know: a
    /// malformed one is replaced by a new one, an unreadable one leaves the history in memory.
    pub fn open(path: PathBuf) -> (History, Option<String>) {
        match crate::collect::read_capped(&path, MAX_BYTES) {
            Ok(text) => match serde_json::from_str::<BTreeMap<String, Earlier>>(&text) {
                Ok(mut entries) => {
                    // A run of another figure (edited by hand, or damaged) is no reference.
                    let before = entries.len();
                    entries.retain(|_, e| e.is_sound());
                    let left_out = before - entries.len();
                    let why = (left_out > 0).then(|| {
                        format!(
                            "{left_out} entr{} of {} held a median or an interval that is not \
                             a time and {} left out",
                            if left_out == 1 { "y" } else { "ies" },
                            path.display(),
                            if left_out == 1 { "is" } else { "are" }
                        )
                    });
                    (
                        History {
                            path: Some(path),
                            entries,
                        },
                        why,
                    )
                }
                Err(e) => {
                    let why = format!(
                        "{} was not an edgeprof history ({e}); a new one replaces it",
                        path.display()
                    );
                    (
                        History {
                            path: Some(path),
                            entries: BTreeMap::new(),
                        },
                        Some(why),
                    )
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                History {
                    path: Some(path),
                    entries: BTreeMap::new(),
                },
                None,
            ),
            Err(e) => (
                History::in_memory(),
                Some(format!(
                    "cannot read {}: {e}; conditions are not compared with their earlier runs on \
                     this device",
                    path.display()
                )),
            ),
        }
    }

    /// A history kept in memory only (tests, or where no cache directory can be written).
    pub fn in_memory() -> History {
        History::default()
    }

    /// `record` against its condition's latest clean run here, when there is one.
    pub fn against(&self, key: &str, record: &RunRecord) -> Option<Drift> {
        let earlier = self.entries.get(key)?;
        let stats = record.stats.as_ref()?;
        let (low, high) = stats.median_interval_ms?;
        let median = stats.latency.median_ms;
        if !(median > 0.0 && earlier.median_ms > 0.0) {
            return None;
        }
        let (e_low, e_high) = earlier.interval_ms;
        let ratio = median / earlier.median_ms;
        // A median of a denormal's size makes no ratio worth saying.
        ratio.is_finite().then(|| Drift {
            earlier: earlier.clone(),
            ratio,
            beyond: low > e_high || e_low > high,
        })
    }

    /// Keeps `record` as its condition's latest run when its own figures are clean (whatever
    /// it was against earlier runs: a machine that changed for good is the new reference), and
    /// writes the history back. Err says why it could not be written.
    pub fn note(
        &mut self,
        key: String,
        record: &RunRecord,
        results: &Path,
    ) -> Result<(), HistoryError> {
        let own = RunRecord {
            drift: None,
            ..record.clone()
        };
        if !matches!(crate::results::summary::verdict(&own), Some(("clean", _))) {
            return Ok(());
        }
        let Some(stats) = record.stats.as_ref() else {
            return Ok(());
        };
        let Some(interval_ms) = stats.median_interval_ms else {
            return Ok(());
        };
        self.entries.insert(
            key,
            Earlier {
                median_ms: stats.latency.median_ms,
                interval_ms,
                written: crate::text::now_rfc3339(),
                results: results.display().to_string(),
            },
        );
        while self.entries.len() > MAX_ENTRIES {
            let oldest = self
                .entries
                .iter()
                .min_by(|a, b| a.1.written.cmp(&b.1.written))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.entries.remove(&k),
                None => break,
            };
        }
        self.save()
    }

    /// Writes the history whole to a file of this process's own, then renames it over the
    /// old one: runs writing at once never leave half a file (the last one's entries win).
    fn save(&self) -> Result<(), HistoryError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let text = serde_json::to_string_pretty(&self.entries)
            .map_err(|e| HistoryError(format!("cannot encode the history: {e}")))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| HistoryError(format!("cannot create {}: {e}", dir.display())))?;
        }
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                HistoryError(format!(
                    "cannot keep this device's history in {}: {e}",
                    path.display()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_whose_figures_are_not_times_are_left_out_and_said() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("history.json");
        let entry = |m: f64, l: f64, h: f64| serde_json::json!({"median_ms": m, "interval_ms": [l, h], "written": "", "results": ""});
        let text = serde_json::json!({
            "denormal": entry(5e-324, 0.0, 1e-323),
            "negative": entry(-1.0, -1.1, -0.9),
            "inverted": entry(1.0, 1.1, 0.9),
            "sound": entry(1.0, 0.9, 1.1),
        });
        if let Err(e) = std::fs::write(&path, text.to_string()) {
            panic!("{e}");
        }
        let (history, why) = History::open(path);
        assert_eq!(history.entries.keys().collect::<Vec<_>>(), vec!["sound"]);
        assert!(
            why.is_some_and(|w| w.starts_with("3 entries of ")),
            "the entries left out are not said"
        );
    }

    fn record(median: f64, interval: (f64, f64), cv: f64) -> RunRecord {
        let times: Vec<f64> = (0..30)
            .map(|i| median * (1.0 + cv * ((i % 3) as f64 - 1.0)))
            .collect();
        let mut stats = crate::stats::run_stats(
            10.0,
            Some(median),
            &[],
            &[times],
            1,
            crate::stats::Outliers::Keep,
        );
        if let Some(s) = &mut stats {
            s.median_interval_ms = Some(interval);
        }
        RunRecord {
            stats,
            ..RunRecord::bare(crate::protocol::Condition::new(
                "tract",
                crate::config::ModelRef::Zoo("lenet".into()),
                crate::models::InputShape::default(),
                1,
                1,
                crate::config::Device::Cpu,
            ))
        }
    }

    type Result = std::result::Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_run_beyond_both_intervals_of_the_last_clean_one_is_a_drift() -> Result {
        let dir = tempfile::tempdir()?;
        let path = path_for(dir.path(), "abc");
        let (mut h, note) = History::open(path.clone());
        assert_eq!(note, None);
        let first = record(10.0, (9.8, 10.2), 0.01);
        assert_eq!(h.against("k", &first), None);
        h.note("k".into(), &first, Path::new("results/a"))?;
        // Read back from the file: a later run sees it.
        let (h, _) = History::open(path);
        let within = h.against("k", &record(10.1, (9.9, 10.3), 0.01));
        assert!(within.is_some_and(|d| !d.beyond));
        let slower = h
            .against("k", &record(11.4, (11.1, 11.7), 0.01))
            .ok_or("no drift")?;
        assert!(slower.beyond);
        assert!((slower.ratio - 1.14).abs() < 1e-9);
        assert!(slower
            .reason()
            .starts_with("14 % slower than its clean run of"));
        assert!(h.against("other", &first).is_none());
        Ok(())
    }

    #[test]
    fn only_clean_runs_become_the_reference_and_a_broken_file_is_replaced() -> Result {
        let dir = tempfile::tempdir()?;
        let path = path_for(dir.path(), "abc");
        let (mut h, _) = History::open(path.clone());
        // A noisy run (CV far over 10 %) is no reference.
        h.note("k".into(), &record(10.0, (9.0, 11.0), 0.5), Path::new("r"))?;
        assert!(h.against("k", &record(10.0, (9.9, 10.1), 0.01)).is_none());
        // A drifted but otherwise clean run is: the machine may have changed for good.
        h.note("k".into(), &record(10.0, (9.9, 10.1), 0.01), Path::new("r"))?;
        let mut moved = record(12.0, (11.9, 12.1), 0.01);
        moved.drift = h.against("k", &moved);
        assert!(moved.drift.as_ref().is_some_and(|d| d.beyond));
        h.note("k".into(), &moved, Path::new("r"))?;
        assert!(h.against("k", &moved).is_some_and(|d| !d.beyond));
        // A broken file is said and replaced.
        std::fs::write(&path, "not json")?;
        let (mut h, note) = History::open(path.clone());
        assert!(note.is_some_and(|n| n.contains("was not an edgeprof history")));
        h.note("k".into(), &moved, Path::new("r"))?;
        assert!(History::open(path).0.against("k", &moved).is_some());
        Ok(())
    }
}

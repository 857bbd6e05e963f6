//! The measurement database: per device, every profile and every tuning trial, one JSON line
//! each, appended as they are measured.

use super::Profile;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A device's measurement database: every profile and every tuning trial kept, one JSON line
/// each, in the cache directory beside the ceilings (`costmodel-<device key>.jsonl`).
#[derive(Debug, Clone, Default)]
pub struct Db {
    pub path: Option<PathBuf>,
    pub profiles: Vec<Profile>,
    pub trials: Vec<crate::tune::prior::TrialRecord>,
    /// Lines that did not parse, with their number.
    pub skipped: Vec<usize>,
    /// Records with a number out of range (a NaN, a negative FLOP count), left out: each line's
    /// number and its first bad field as `field = value`.
    pub invalid: Vec<(usize, String)>,
}

/// Most bytes of a database read back.
const MAX_DB_BYTES: u64 = 256 << 20;

impl Db {
    /// The database at `path` (empty when there is none yet).
    pub fn open(path: &Path) -> Result<Db, crate::error::BadInput> {
        let text = match crate::collect::read_capped(path, MAX_DB_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(crate::error::BadInput(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        };
        let mut db = Db {
            path: Some(path.to_path_buf()),
            ..Db::default()
        };
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            if let Ok(t) = serde_json::from_str::<crate::tune::prior::TrialRecord>(line) {
                match trial_problem(&t) {
                    Some(why) => db.invalid.push((n + 1, why)),
                    None => db.trials.push(t),
                }
                continue;
            }
            match serde_json::from_str::<Profile>(line) {
                Ok(p) => match profile_problem(&p) {
                    Some(why) => db.invalid.push((n + 1, why)),
                    None => db.profiles.push(p),
                },
                Err(_) => db.skipped.push(n + 1),
            }
        }
        // Each model built again once, however many profiles it has (thread counts, core
        // sets, engines), and the models in parallel: an ONNX file is read and analysed anew.
        use rayon::prelude::*;
        let models: std::collections::BTreeSet<(&str, &str)> = db
            .profiles
            .iter()
            .map(|p| (p.model.as_str(), p.input.as_str()))
            .collect();
        let planned: BTreeMap<(String, String), Vec<super::Group>> = models
            .into_par_iter()
            .filter_map(|(model, input)| {
                let groups = super::groups_of(model, input).ok()?;
                Some(((model.to_string(), input.to_string()), groups))
            })
            .collect();
        db.profiles = std::mem::take(&mut db.profiles)
            .into_iter()
            .map(|p| match planned.get(&(p.model.clone(), p.input.clone())) {
                Some(groups) => p.described_by(groups),
                None => p,
            })
            .collect();
        Ok(db)
    }

    /// What reading it left out, as warnings: lines that are not records, and records with a
    /// number out of range.
    pub fn warnings(&self) -> Vec<String> {
        let file = self
            .path
            .as_ref()
            .map(|p| crate::text::shown(&p.display().to_string()))
            .unwrap_or_default();
        let mut out = Vec::new();
        if let Some(first) = self.skipped.first() {
            out.push(format!(
                "{file}: {} line(s) are not profiles and were skipped (line {first})",
                self.skipped.len()
            ));
        }
        if let Some((line, why)) = self.invalid.first() {
            out.push(format!(
                "{file}: skipped {} record(s) that are not valid: first: line {line}, {why}",
                self.invalid.len()
            ));
        }
        out
    }

    /// This device's database in the cache directory.
    pub fn path_for_this_device() -> Option<PathBuf> {
        let dir = crate::roofline::store::cache_dir()?;
        let device = crate::collect::device::fingerprint(Path::new("/"));
        Some(dir.join(format!(
            "costmodel-{}.jsonl",
            crate::roofline::store::device_key(&device)
        )))
    }

    /// Appends `profile` (one line, flushed) and keeps it.
    pub fn append(&mut self, profile: Profile) -> crate::error::Result<()> {
        self.write_line(&profile)?;
        self.profiles.push(profile);
        Ok(())
    }

    /// Appends a tuning trial (one line, flushed) and keeps it.
    pub fn append_trial(
        &mut self,
        trial: crate::tune::prior::TrialRecord,
    ) -> crate::error::Result<()> {
        self.write_line(&trial)?;
        self.trials.push(trial);
        Ok(())
    }

    /// Appends a table's measured rows (from `edgeprof tune --exhaustive`) as trials, leaving
    /// out the rows already here (same model, input, configuration and figures): how many
    /// were added and how many were present.
    pub fn import(
        &mut self,
        table: &crate::tune::replay::Table,
    ) -> crate::error::Result<(usize, usize)> {
        let (mut added, mut present) = (0, 0);
        for row in &table.rows {
            let Some(measured) = row.measured else {
                continue;
            };
            let known = self.trials.iter().any(|t| {
                t.model == table.model
                    && t.input == table.input
                    && t.candidate == row.candidate
                    && t.measured == measured
            });
            if known {
                present += 1;
                continue;
            }
            let mut record = crate::tune::prior::TrialRecord::new(
                &table.model,
                &table.input,
                &row.candidate,
                measured,
                "table",
            );
            record.written = table.measured_at.clone();
            self.append_trial(record)?;
            added += 1;
        }
        Ok((added, present))
    }

    fn write_line(&self, value: &impl Serialize) -> crate::error::Result<()> {
        match &self.path {
            Some(path) => Db::append_to(path, value),
            None => Ok(()),
        }
    }

    /// Whether lines can be appended here: the file (and its folder) made when missing, nothing
    /// written — so that a long profiling run fails before it measures, not after.
    pub fn check_writable(&self) -> crate::error::Result<()> {
        use crate::error::Context;
        let Some(path) = &self.path else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(drop)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Appends one line to the database at `path` (made with its folder when missing), flushed
    /// to the disk.
    pub fn append_to(path: &Path, value: &impl Serialize) -> crate::error::Result<()> {
        use crate::error::Context;
        use std::io::Write;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let line = serde_json::to_string(value)? + "\n";
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_data())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The latest profile of each (engine, model, input, threads, core set).
    pub fn latest(&self) -> Vec<&Profile> {
        type Key<'a> = (
            &'a str,
            &'a str,
            &'a str,
            usize,
            Option<&'a [usize]>,
            super::Precision,
        );
        let mut by: BTreeMap<Key, &Profile> = BTreeMap::new();
        for p in &self.profiles {
            by.insert(
                (
                    &p.engine,
                    &p.model,
                    &p.input,
                    p.threads,
                    p.cores.as_deref(),
                    p.precision,
                ),
                p,
            );
        }
        by.into_values().collect()
    }
}

/// Most FLOPs or bytes one layer group may have (an exa-operation: far beyond any model).
const MAX_WORK: f64 = 1e18;
/// Most milliseconds one latency may be (a day).
const MAX_MS: f64 = 86_400e3;

/// `field = value` when `x` is not a finite number from `min` to `max`.
fn out_of(field: &str, x: f64, min: f64, max: f64) -> Option<String> {
    let text = if x == 0.0 || (1e-4..1e15).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    };
    (!(x.is_finite() && (min..=max).contains(&x))).then(|| format!("{field} = {text}"))
}

/// The first number of a profile out of range, as `field = value`.
fn profile_problem(p: &Profile) -> Option<String> {
    let (low, high) = p.latency_interval_ms;
    let bandwidth = |field: &str, v: Option<f64>| v.and_then(|b| out_of(field, b, 1.0, 1e15));
    p.groups
        .iter()
        .enumerate()
        .find_map(|(i, g)| {
            out_of(&format!("groups[{i}].flops"), g.flops, 0.0, MAX_WORK)
                .or_else(|| out_of(&format!("groups[{i}].bytes"), g.bytes, 0.0, MAX_WORK))
                .or_else(|| out_of(&format!("groups[{i}].seconds"), g.seconds, 0.0, 86_400.0))
        })
        .or_else(|| out_of("latency_ms", p.latency_ms, f64::MIN_POSITIVE, MAX_MS))
        .or_else(|| out_of("latency_interval_ms[0]", low, 0.0, MAX_MS))
        .or_else(|| out_of("latency_interval_ms[1]", high, low.max(0.0), MAX_MS))
        .or_else(|| {
            p.round_medians_ms
                .iter()
                .enumerate()
                .find_map(|(i, &m)| out_of(&format!("round_medians_ms[{i}]"), m, 0.0, MAX_MS))
        })
        .or_else(|| {
            p.times_ms
                .iter()
                .enumerate()
                .find_map(|(i, &m)| out_of(&format!("times_ms[{i}]"), m, 0.0, MAX_MS))
        })
        .or_else(|| bandwidth("stream_bytes_per_s", p.stream_bytes_per_s))
        .or_else(|| bandwidth("memory_bytes_per_s", p.memory_bytes_per_s))
}

/// The first number of a tuning trial out of range, as `field = value`.
fn trial_problem(t: &crate::tune::prior::TrialRecord) -> Option<String> {
    let m = &t.measured;
    out_of("measured.mean_ms", m.mean_ms, 0.0, MAX_MS)
        .or_else(|| out_of("measured.p99_ms", m.p99_ms, 0.0, MAX_MS))
        .or_else(|| out_of("measured.throughput", m.throughput, 0.0, 1e12))
}

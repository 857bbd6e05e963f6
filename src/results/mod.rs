//! The results directory:
//!
//! ```text
//! results/<UTC timestamp>-<config name>/
//!   manifest.json   config (as written and resolved), device fingerprint, versions, plan, start/end
//!   runs.jsonl      one record per attempt, appended and flushed as it happens
//!   samples.jsonl   /proc samples of each attempt's worker
//!   telemetry.jsonl the telemetry sources' samples (CPU cores, GPU, memory, power, temperatures)
//!                   during each attempt
//!   summary.csv / summary.json / summary.md   one row per condition, derived from runs.jsonl
//!   charts/*.svg    latency and peak-memory bars, CPU utilisation over time, per-condition GPU
//!                   and CPU curves where there are GPU figures (format `svg`)
//! ```
//!
//! A crash, SIGKILL or Ctrl-C loses nothing already written: every record is one line, flushed
//! before the next run starts, and a torn last line is ignored (and trimmed on resume).

pub mod accuracy;
pub mod agreement;
pub mod compare;
pub mod history;
pub mod integrity;
pub mod listing;
pub mod partial;
pub mod summary;

use crate::collect::device::Fingerprint;
use crate::collect::proc::ProcSample;
use crate::error::Context;
use crate::protocol::WorkerRun;
use crate::protocol::{Condition, Skipped};
use crate::protocol::{Resources, RunFailure};
use crate::stats::RunStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "manifest.json";
pub const RUNS: &str = "runs.jsonl";
pub const SAMPLES: &str = "samples.jsonl";
pub const TELEMETRY: &str = "telemetry.jsonl";
/// Held by the one process writing the directory (see [`crate::lockfile`]).
pub const LOCK: &str = "writer.lock";
/// The progress lines of the run, appended as they happen (`tail -f` it after a hang-up).
pub const PROGRESS: &str = "progress.log";
/// The largest manifest read: it holds the config and the list of conditions, megabytes for
/// the largest sweeps.
const MANIFEST_CAP: u64 = 256 << 20;
/// Version of the directory layout, raised when a reader could misread an older one.
pub const FORMAT: u32 = 1;

/// Where a sweep stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepStatus {
    Running,
    Interrupted,
    Complete,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub edgeprof_version: String,
    pub name: String,
    /// The config file as given (absolute), so relative model paths resolve again on resume.
    pub config_file: PathBuf,
    /// The config text exactly as it was read.
    pub config_text: String,
    /// The resolved config, every default filled in.
    pub config: serde_json::Value,
    pub device: Fingerprint,
    /// Engine name → version, for the engines built into this edgeprof.
    pub engines: BTreeMap<String, String>,
    pub conditions: Vec<Condition>,
    pub skipped: Vec<Skipped>,
    pub excluded: usize,
    pub started: String,
    pub ended: Option<String>,
    /// When the sweep was resumed, once per resume.
    #[serde(default)]
    pub resumed: Vec<String>,
    /// The SHA-256 of each file the conditions read (ONNX and TFLite files, PyTorch programs,
    /// input tensors), by path, as it was when the sweep began: a resume refuses to measure a
    /// file that changed in between under the same name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    pub status: SweepStatus,
    /// The board's performance state when the sweep began (governors, clocks, power mode);
    /// absent in directories from before edgeprof recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_state: Option<crate::collect::board::BoardState>,
}

/// One attempt at one condition: a line of runs.jsonl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub condition: Condition,
    /// 1 for the first attempt, 2 for the first retry, …
    pub attempt: usize,
    /// True when no retry follows this attempt: the condition's result.
    pub last: bool,
    pub started: String,
    pub ok: bool,
    /// Why it failed, in one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<RunFailure>,
    /// Everything the worker reported, every raw time included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<WorkerRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<RunStats>,
    pub resources: Resources,
    /// What the telemetry sources saw during the attempt: throttling, power, energy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<crate::run_telemetry::RunTelemetry>,
    /// Each repeat's disturbance and source, which ones the statistics leave out, and whether
    /// the median's interval reached `measure.target_ci` (records of successful runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<crate::protocol::repetition::Repetition>,
    /// The median against the condition's latest clean run on this device, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<history::Drift>,
    /// The device that measured it, in words (`host: CPU or board, arch`): a sweep resumed on
    /// another device says so record by record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_on: Option<String>,
    /// How the board's performance state differed, when this attempt was recorded, from the
    /// one the sweep began in (`power mode: A MAXN (0), B 15W (1)`; A: at the start); empty
    /// when it had not changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state_changes: Vec<String>,
}

impl RunRecord {
    /// The timed iterations by repeat that the statistics use: every repeat, less disturbed
    /// ones that were measured again. None without a run.
    pub fn kept_repeats(&self) -> Option<Vec<Vec<f64>>> {
        let raw = &self.run.as_ref()?.repeats;
        Some(match &self.repetition {
            Some(r) => r.kept(raw),
            None => raw.clone(),
        })
    }
}

/// A line of samples.jsonl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    pub condition: String,
    pub attempt: usize,
    #[serde(flatten)]
    pub sample: ProcSample,
}

/// A line of telemetry.jsonl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetryRecord {
    pub condition: String,
    pub attempt: usize,
    #[serde(flatten)]
    pub sample: crate::collect::telemetry::Sample,
}

/// The directory name of a new sweep: `20261129T190512Z-<name>`.
pub fn dir_name(name: &str) -> String {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let stamp = time::OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_else(|_| "run".to_string());
    format!("{stamp}-{name}")
}

pub use crate::files::write_atomic;

pub fn write_manifest(dir: &Path, manifest: &Manifest) -> crate::error::Result<()> {
    let text = serde_json::to_string_pretty(manifest).context("cannot encode the manifest")?;
    write_atomic(&dir.join(MANIFEST), (text + "\n").as_bytes())?;
    Ok(())
}

pub fn read_manifest(dir: &Path) -> crate::error::Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = crate::files::read_capped(&path, MANIFEST_CAP)
        .map_err(crate::error::Error::from)
        .and_then(|bytes| {
            String::from_utf8(bytes).map_err(|_| crate::error::failed!("it is not UTF-8 text"))
        })
        .with_context(|| {
            format!(
                "{} is not an edgeprof results directory (cannot read {MANIFEST})",
                dir.display()
            )
        })?;
    let manifest: Manifest = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid manifest", path.display()))?;
    if manifest.format > FORMAT {
        crate::error::bail!(
            "{} was written by a newer edgeprof (layout {}, this one reads up to {FORMAT})",
            dir.display(),
            manifest.format
        );
    }
    Ok(manifest)
}

/// Appends records to the JSON-lines files of a results directory.
pub struct Writer {
    runs: File,
    samples: File,
    telemetry: File,
}

/// Mends the end of a JSON-lines file after a write was cut short (SIGKILL, power loss, a full
/// disk): a last line that is a whole record and lacks only its newline gets the newline; a torn
/// one is cut off. Only the tail is read, so a large file costs no more than a small one.
fn trim_torn_tail(file: &mut File) -> std::io::Result<()> {
    let len = file.seek(std::io::SeekFrom::End(0))?;
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    file.seek(std::io::SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(());
    }
    // Find the start of the last line, reading backwards in blocks.
    let mut start = 0;
    let mut pos = len;
    let mut block = vec![0u8; 64 * 1024];
    while pos > 0 {
        let from = pos.saturating_sub(block.len() as u64);
        let part = &mut block[..(pos - from) as usize];
        file.seek(std::io::SeekFrom::Start(from))?;
        file.read_exact(part)?;
        if let Some(i) = part.iter().rposition(|&b| b == b'\n') {
            start = from + i as u64 + 1;
            break;
        }
        pos = from;
    }
    let mut tail = Vec::new();
    file.seek(std::io::SeekFrom::Start(start))?;
    file.read_to_end(&mut tail)?;
    if serde_json::from_slice::<serde::de::IgnoredAny>(&tail).is_ok() {
        // Appends go to the end whatever the position (the file is opened for appending).
        file.write_all(b"\n")?;
        file.flush()
    } else {
        file.set_len(start)
    }
}

fn open_append(path: &Path) -> crate::error::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).read(true).append(true);
    let mut file = crate::files::open_regular(path, &options)
        .with_context(|| format!("cannot open {} for appending", path.display()))?;
    trim_torn_tail(&mut file).with_context(|| format!("cannot repair {}", path.display()))?;
    Ok(file)
}

fn append_line(file: &mut File, path: &str, value: &impl Serialize) -> crate::error::Result<()> {
    let mut line =
        serde_json::to_vec(value).with_context(|| format!("cannot encode a {path} record"))?;
    line.push(b'\n');
    file.write_all(&line)
        .and_then(|_| file.flush())
        .with_context(|| format!("cannot append to {path}"))
}

impl Writer {
    /// Opens (creating if needed) the record files of `dir`.
    pub fn open(dir: &Path) -> crate::error::Result<Writer> {
        Ok(Writer {
            runs: open_append(&dir.join(RUNS))?,
            samples: open_append(&dir.join(SAMPLES))?,
            telemetry: open_append(&dir.join(TELEMETRY))?,
        })
    }

    /// Appends one run record and pushes it to the disk before returning, the attempt's
    /// samples and telemetry (written before it) too: the record is what says the attempt
    /// happened, so nothing it counts may be lost after it.
    pub fn run(&mut self, record: &RunRecord) -> crate::error::Result<()> {
        let _ = self.samples.sync_data();
        let _ = self.telemetry.sync_data();
        append_line(&mut self.runs, RUNS, record)?;
        // Survive a power cut too, not just a killed process: one sync per run is cheap.
        let _ = self.runs.sync_data();
        Ok(())
    }

    /// Appends the worker's /proc samples of one attempt.
    pub fn samples(
        &mut self,
        condition: &str,
        attempt: usize,
        samples: &[ProcSample],
    ) -> crate::error::Result<()> {
        let records = samples.iter().map(|sample| SampleRecord {
            condition: condition.to_string(),
            attempt,
            sample: sample.clone(),
        });
        append_block(&mut self.samples, SAMPLES, records)
    }

    /// Appends the telemetry samples of one attempt.
    pub fn telemetry(
        &mut self,
        condition: &str,
        attempt: usize,
        samples: &[crate::collect::telemetry::Sample],
    ) -> crate::error::Result<()> {
        let records = samples.iter().map(|sample| TelemetryRecord {
            condition: condition.to_string(),
            attempt,
            sample: sample.clone(),
        });
        append_block(&mut self.telemetry, TELEMETRY, records)
    }
}

/// Appends records as JSON lines in one write.
fn append_block<T: Serialize>(
    file: &mut File,
    path: &str,
    records: impl Iterator<Item = T>,
) -> crate::error::Result<()> {
    let mut block = Vec::new();
    for record in records {
        serde_json::to_writer(&mut block, &record)
            .with_context(|| format!("cannot encode a {path} record"))?;
        block.push(b'\n');
    }
    file.write_all(&block)
        .and_then(|_| file.flush())
        .with_context(|| format!("cannot append to {path}"))
}

/// A JSON-lines file read back: its records, and what had to be ignored.
pub struct Lines<T> {
    pub records: Vec<T>,
    pub warnings: Vec<String>,
}

/// Reads a JSON-lines file; a missing file is empty. Lines that do not parse — not UTF-8 text
/// (a tear inside a multi-byte character, one bad byte), or not a record — are reported in
/// `warnings` (a torn last line is expected after a kill) and skipped. Only a regular file is
/// read (see [`crate::files::open_regular`]).
pub fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> crate::error::Result<Lines<T>> {
    use std::io::BufRead;
    let file = match crate::files::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Lines {
                records: Vec::new(),
                warnings: Vec::new(),
            })
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut lines = Lines {
        records: Vec::new(),
        warnings: Vec::new(),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if read == 0 {
            break;
        }
        number += 1;
        let torn = line.last() != Some(&b'\n');
        let text = match std::str::from_utf8(&line) {
            Ok(t) => t,
            Err(_) if torn => {
                lines.warnings.push(format!(
                    "{name}: ignored a torn last line (the run was killed while writing it)"
                ));
                break;
            }
            Err(_) => {
                lines.warnings.push(format!(
                    "{name}:{number}: ignored a line that is not UTF-8 text"
                ));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(text) {
            Ok(r) => lines.records.push(r),
            Err(_) if torn => lines.warnings.push(format!(
                "{name}: ignored a torn last line (the run was killed while writing it)"
            )),
            Err(e) => lines.warnings.push(format!(
                "{name}:{number}: ignored a line that is not a record: {e}"
            )),
        }
    }
    Ok(lines)
}

/// A stored sweep, read back.
#[derive(Debug)]
pub struct Stored {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub runs: Vec<RunRecord>,
    pub samples: Vec<SampleRecord>,
    pub telemetry: Vec<TelemetryRecord>,
    pub warnings: Vec<String>,
}

impl Stored {
    /// The sweep's class count (1000 when the manifest predates the key).
    pub fn classes(&self) -> usize {
        self.manifest
            .config
            .pointer("/matrix/classes")
            .and_then(serde_json::Value::as_u64)
            .map_or(1000, |n| n as usize)
    }

    /// The seed the sweep's weights and inputs were drawn with.
    pub fn seed(&self) -> u64 {
        self.manifest
            .config
            .pointer("/measure/seed")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(crate::models::onnx::DEFAULT_SEED)
    }
}

pub fn load(dir: &Path) -> crate::error::Result<Stored> {
    let manifest = read_manifest(dir)?;
    let runs = read_lines::<RunRecord>(&dir.join(RUNS))?;
    let samples = read_lines::<SampleRecord>(&dir.join(SAMPLES))?;
    let telemetry = read_lines::<TelemetryRecord>(&dir.join(TELEMETRY))?;
    let mut warnings = runs.warnings;
    warnings.extend(samples.warnings);
    warnings.extend(telemetry.warnings);
    warnings.extend(devices_note(&runs.records));
    Ok(Stored {
        dir: dir.to_path_buf(),
        manifest,
        runs: runs.records,
        samples: samples.records,
        telemetry: telemetry.records,
        warnings,
    })
}

/// A warning when the records were measured on more than one device (a sweep resumed on
/// another with `--resume-on-other-device`): each device with its number of attempts.
fn devices_note(runs: &[RunRecord]) -> Option<String> {
    let mut devices: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        if let Some(d) = &r.ran_on {
            *devices.entry(d.as_str()).or_default() += 1;
        }
    }
    (devices.len() > 1).then(|| {
        let each: Vec<String> = devices
            .iter()
            .map(|(d, n)| format!("{d} ({n} attempt(s))"))
            .collect();
        format!(
            "this sweep was measured on {} devices, so its figures do not compare with each \
             other: {}",
            devices.len(),
            each.join("; ")
        )
    })
}

/// Ids of the conditions that have their result (a successful attempt, or a last failed one).
pub fn finished_ids(runs: &[RunRecord]) -> std::collections::HashSet<String> {
    runs.iter()
        .filter(|r| r.ok || r.last)
        .map(|r| r.condition.id.clone())
        .collect()
}

#[cfg(test)]
impl RunRecord {
    /// A successful, last first attempt at `condition` with nothing measured, for tests to fill
    /// in.
    pub(crate) fn bare(condition: Condition) -> RunRecord {
        RunRecord {
            condition,
            attempt: 1,
            last: true,
            started: String::new(),
            ok: true,
            reason: None,
            failure: None,
            run: None,
            stats: None,
            resources: Default::default(),
            telemetry: None,
            repetition: None,
            drift: None,
            ran_on: None,
            state_changes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_lines_are_trimmed_and_reported() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("x.jsonl");
        if let Err(e) = std::fs::write(&path, "{\"a\":1}\nnot json\n{\"a\":2}\n{\"a\":") {
            panic!("{e}")
        }
        let Ok(lines) = read_lines::<serde_json::Value>(&path) else {
            panic!("unreadable")
        };
        assert_eq!(lines.records.len(), 2);
        assert_eq!(lines.warnings.len(), 2);
        assert!(
            lines.warnings[0].contains("x.jsonl:2"),
            "{:?}",
            lines.warnings
        );
        assert!(lines.warnings[1].contains("torn"), "{:?}", lines.warnings);
        let Ok(mut file) = open_append(&path) else {
            panic!("cannot open")
        };
        if let Err(e) = append_line(&mut file, "x", &serde_json::json!({"a": 3})) {
            panic!("{e}")
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(text.ends_with("{\"a\":2}\n{\"a\":3}\n"), "{text}");
        let Ok(missing) = read_lines::<serde_json::Value>(&dir.path().join("none")) else {
            panic!("missing file is an error")
        };
        assert!(missing.records.is_empty() && missing.warnings.is_empty());
    }

    #[test]
    fn lines_that_are_not_utf8_are_reported_and_skipped() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("runs.jsonl");
        // One bad byte in a middle line, and a last line torn inside "è" (0xC3 0xA8).
        let mut bytes = b"{\"a\":1}\n{\"a\":\"\xff\"}\n{\"a\":3}\n".to_vec();
        bytes.extend_from_slice(b"{\"p\":\"mod\xc3");
        if let Err(e) = std::fs::write(&path, &bytes) {
            panic!("{e}")
        }
        let lines = match read_lines::<serde_json::Value>(&path) {
            Ok(l) => l,
            Err(e) => panic!("{e:#}"),
        };
        assert_eq!(lines.records.len(), 2);
        assert_eq!(
            lines.warnings,
            vec![
                "runs.jsonl:2: ignored a line that is not UTF-8 text".to_string(),
                "runs.jsonl: ignored a torn last line (the run was killed while writing it)"
                    .to_string()
            ]
        );
    }

    #[test]
    fn a_whole_last_record_without_its_newline_is_kept() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let path = dir.path().join("x.jsonl");
        if let Err(e) = std::fs::write(&path, "{\"a\":1}\n{\"a\":2}") {
            panic!("{e}")
        }
        let Ok(mut file) = open_append(&path) else {
            panic!("cannot open")
        };
        if let Err(e) = append_line(&mut file, "x", &serde_json::json!({"a": 3})) {
            panic!("{e}")
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(text, "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        // A long torn line (longer than one block of the backwards search) is still cut whole.
        let long = format!("{{\"a\":1}}\n{{\"b\":\"{}", "x".repeat(200_000));
        if let Err(e) = std::fs::write(&path, long) {
            panic!("{e}")
        }
        if open_append(&path).is_err() {
            panic!("cannot open")
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap_or_default(),
            "{\"a\":1}\n"
        );
    }

    #[test]
    fn directory_names_carry_a_utc_stamp_and_the_name() {
        let name = dir_name("default");
        assert!(name.ends_with("Z-default"), "{name}");
        assert_eq!(name.len(), "20261129T190512Z-default".len());
        assert!(crate::text::now_rfc3339().ends_with('Z'));
    }
}

//! Derived tables: one row per condition of a sweep, from its run records (the last attempt
//! decides), written as CSV, JSON and Markdown.

use crate::results::accuracy::Accuracy;
use crate::results::agreement::Agreement;

/// What the kept outputs of a results directory say: whether the engines compute the same
/// thing in fp32, and what each lower precision costs against its fp32 twin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputChecks {
    pub agreement: Vec<Agreement>,
    pub accuracy: Vec<Accuracy>,
}

impl OutputChecks {
    pub fn of(dir: &std::path::Path, rows: &[Row]) -> OutputChecks {
        OutputChecks {
            agreement: crate::results::agreement::compare(dir, rows),
            accuracy: crate::results::accuracy::compare(dir, rows),
        }
    }
}
use crate::results::{Manifest, RunRecord};
use serde::Serialize;

/// A condition's result in one row; times in milliseconds, memory in bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub id: String,
    pub engine: String,
    pub model: String,
    pub input: String,
    pub batch: usize,
    pub threads: usize,
    pub device: String,
    /// The precision the model ran in (`fp32`, `fp16`, `bf16`, `int8`).
    pub precision: String,
    /// `ok`, `failed`, `skipped` or `not run` (interrupted before it ran).
    pub status: String,
    pub attempts: usize,
    pub reason: Option<String>,
    pub init_ms: Option<f64>,
    pub first_inference_ms: Option<f64>,
    pub warmup_mean_ms: Option<f64>,
    /// Mean of the repeats' means, and the spread (sample std) of those means.
    pub mean_ms: Option<f64>,
    pub mean_spread_ms: Option<f64>,
    pub median_ms: Option<f64>,
    pub std_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub inferences_per_s: Option<f64>,
    pub images_per_s: Option<f64>,
    pub iterations: Option<usize>,
    pub repeats: Option<usize>,
    pub outliers: Option<usize>,
    /// Whether the means leave the outliers out (`measure.outliers = "exclude"`).
    pub outliers_excluded: Option<bool>,
    pub cv: Option<f64>,
    pub noisy: Option<bool>,
    pub peak_rss_bytes: Option<u64>,
    pub cpu_mean_pct: Option<f64>,
    pub cpu_max_pct: Option<f64>,
    pub wall_s: Option<f64>,
    /// The engine's version and what it said about how it ran, as its worker reported them.
    pub engine_version: Option<String>,
    pub engine_note: Option<String>,
    /// Robust figures over every timed iteration: the 10 % trimmed mean and the median
    /// absolute deviation.
    pub trimmed_mean_ms: Option<f64>,
    pub mad_ms: Option<f64>,
    /// clean, noisy, disturbed or throttled, with why (see [`verdict`]).
    pub verdict: Option<String>,
    pub verdict_reason: Option<String>,
    /// Half the width of the 95 % bootstrap interval of the median over every timed iteration
    /// (the `±` of `median 17.000 ms ±0.310`).
    pub median_ci_ms: Option<f64>,
    /// Whether the median's interval reached `measure.target_ci` (None without a target).
    pub target_reached: Option<bool>,
    /// Disturbed repeats measured again and left out of the statistics.
    pub repeats_remeasured: Option<usize>,
    /// What the timed input was made of (photographs, or seeded values), as the run prepared
    /// it (None in records of older runs, which were fed seeded values).
    pub inputs: Option<String>,
}

/// Half the width of a record's interval of its median.
fn half_width(s: &crate::stats::RunStats) -> Option<f64> {
    s.median_interval_ms.map(|(low, high)| (high - low) / 2.0)
}

/// One word for how trustworthy a condition's figures are, and why: `throttled` (the board
/// slowed itself), `disturbed` (other processes took CPU on its cores, named), `noisy` (its
/// coefficient of variation is over 10 %, or its median moved beyond both intervals since its
/// latest clean run on this device), else `clean`.
pub fn verdict(record: &RunRecord) -> Option<(&'static str, Option<String>)> {
    let stats = record.stats.as_ref()?;
    let t = record.telemetry.as_ref();
    if let Some(t) = t.filter(|t| t.throttled) {
        return Some(("throttled", Some(t.reasons.join("; "))));
    }
    match record.repetition.as_ref().filter(|r| !r.repeats.is_empty()) {
        // Per repeat where it was watched: only the repeats the statistics keep count.
        Some(r) => {
            if let Some((n, top)) = r.disturbed_kept() {
                return Some((
                    "disturbed",
                    Some(format!(
                        "{n} of {} repeats: {}",
                        r.repeats.iter().filter(|x| !x.excluded).count(),
                        crate::collect::other_processes::by_whom(&top)
                    )),
                ));
            }
        }
        None => {
            if let Some(d) = t
                .and_then(|t| t.disturbance.as_ref())
                .filter(|d| d.disturbed())
            {
                return Some((
                    "disturbed",
                    Some(format!(
                        "others took {:.0} % of a core: {}",
                        d.others_cpu_pct,
                        d.by_whom()
                    )),
                ));
            }
        }
    }
    let drift = record
        .drift
        .as_ref()
        .filter(|d| d.beyond)
        .map(|d| d.reason());
    let cv = stats.noisy.then(|| format!("CV {:.1} %", 100.0 * stats.cv));
    match (cv, drift) {
        (Some(cv), Some(drift)) => return Some(("noisy", Some(format!("{cv}; {drift}")))),
        (Some(why), None) | (None, Some(why)) => return Some(("noisy", Some(why))),
        (None, None) => {}
    }
    let remeasured = record
        .repetition
        .as_ref()
        .map_or(0, |r| r.repeats.iter().filter(|x| x.excluded).count());
    Some((
        "clean",
        (remeasured > 0)
            .then(|| format!("{remeasured} disturbed repeat(s) measured again and left out")),
    ))
}

impl Row {
    fn blank(c: &crate::protocol::Condition, status: &str) -> Row {
        Row {
            id: c.id.clone(),
            engine: c.engine.clone(),
            model: c.model.to_string(),
            input: c.input_text(),
            batch: c.batch,
            threads: c.threads,
            device: c.device.to_string(),
            precision: c.precision.to_string(),
            status: status.to_string(),
            attempts: 0,
            reason: None,
            init_ms: None,
            first_inference_ms: None,
            warmup_mean_ms: None,
            mean_ms: None,
            mean_spread_ms: None,
            median_ms: None,
            std_ms: None,
            p90_ms: None,
            p99_ms: None,
            min_ms: None,
            max_ms: None,
            inferences_per_s: None,
            images_per_s: None,
            iterations: None,
            repeats: None,
            outliers: None,
            outliers_excluded: None,
            cv: None,
            noisy: None,
            peak_rss_bytes: None,
            cpu_mean_pct: None,
            cpu_max_pct: None,
            wall_s: None,
            engine_version: None,
            engine_note: None,
            trimmed_mean_ms: None,
            mad_ms: None,
            verdict: None,
            verdict_reason: None,
            median_ci_ms: None,
            target_reached: None,
            repeats_remeasured: None,
            inputs: None,
        }
    }

    fn from_record(record: &RunRecord, attempts: usize) -> Row {
        let mut row = Row::blank(&record.condition, if record.ok { "ok" } else { "failed" });
        row.attempts = attempts;
        row.reason = record.reason.clone();
        let r = &record.resources;
        row.peak_rss_bytes = r.peak_rss_bytes;
        row.cpu_mean_pct = r.cpu_mean_pct;
        row.cpu_max_pct = r.cpu_max_pct;
        row.wall_s = Some(r.wall_s);
        if let Some(run) = &record.run {
            row.engine_version = run.engine_version.clone();
            row.engine_note = run.note.clone();
            row.inputs = run.inputs.clone();
        }
        if let Some(s) = &record.stats {
            let rs = &s.repeat_summary;
            row.init_ms = Some(s.init_ms);
            row.first_inference_ms = s.first_inference_ms;
            row.warmup_mean_ms = s.warmup_mean_ms;
            row.mean_ms = Some(rs.mean_ms);
            row.mean_spread_ms = Some(rs.mean_spread_ms);
            // The median over every timed iteration: the figure its interval is of, and the
            // one the progress line and `compare` give.
            row.median_ms = Some(s.latency.median_ms);
            row.std_ms = Some(rs.std_ms);
            row.p90_ms = Some(rs.p90_ms);
            row.p99_ms = Some(rs.p99_ms);
            row.min_ms = Some(rs.min_ms);
            row.max_ms = Some(rs.max_ms);
            row.inferences_per_s = Some(rs.inferences_per_s);
            row.images_per_s = Some(rs.images_per_s);
            row.iterations = Some(s.latency.samples);
            row.repeats = Some(rs.repeats);
            row.outliers = Some(s.outliers.len());
            row.outliers_excluded = Some(s.excluded_from_mean > 0);
            row.trimmed_mean_ms = s.latency.trimmed_mean_ms;
            row.mad_ms = s.latency.mad_ms;
            row.median_ci_ms = half_width(s);
            if let Some(r) = &record.repetition {
                row.target_reached = r.reached();
                row.repeats_remeasured = Some(r.repeats.iter().filter(|x| x.excluded).count());
            }
            if let Some((word, why)) = verdict(record) {
                row.verdict = Some(word.to_string());
                row.verdict_reason = why;
            }
            row.cv = Some(s.cv);
            row.noisy = Some(s.noisy);
        }
        row
    }
}

/// One row per planned and skipped condition, in plan order; a condition's last record decides.
pub fn rows(manifest: &Manifest, runs: &[RunRecord]) -> Vec<Row> {
    let mut out = Vec::new();
    for c in &manifest.conditions {
        let attempts: Vec<&RunRecord> = runs.iter().filter(|r| r.condition.id == c.id).collect();
        match attempts.iter().rev().find(|r| r.ok || r.last) {
            Some(record) => out.push(Row::from_record(record, attempts.len())),
            None => {
                let mut row = Row::blank(c, "not run");
                row.attempts = attempts.len();
                row.reason = attempts.last().and_then(|r| r.reason.clone());
                out.push(row);
            }
        }
    }
    for s in &manifest.skipped {
        let mut row = Row::blank(&s.condition, "skipped");
        row.reason = Some(s.reason.clone());
        out.push(row);
    }
    out
}

/// Counts of rows by status: (ok, failed, not run, skipped).
pub fn counts(rows: &[Row]) -> (usize, usize, usize, usize) {
    let n = |s: &str| rows.iter().filter(|r| r.status == s).count();
    (n("ok"), n("failed"), n("not run"), n("skipped"))
}

const COLUMNS: &[&str] = &[
    "id",
    "engine",
    "model",
    "input",
    "batch",
    "threads",
    "device",
    "status",
    "attempts",
    "reason",
    "init_ms",
    "first_inference_ms",
    "warmup_mean_ms",
    "mean_ms",
    "mean_spread_ms",
    "median_ms",
    "std_ms",
    "p90_ms",
    "p99_ms",
    "min_ms",
    "max_ms",
    "inferences_per_s",
    "images_per_s",
    "iterations",
    "repeats",
    "outliers",
    "cv",
    "noisy",
    "peak_rss_bytes",
    "cpu_mean_pct",
    "cpu_max_pct",
    "wall_s",
    "engine_version",
    "engine_note",
    "trimmed_mean_ms",
    "mad_ms",
    "outliers_excluded",
    "verdict",
    "verdict_reason",
    "median_ci_ms",
    "target_reached",
    "repeats_remeasured",
    "precision",
    "inputs",
];

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(|x| x.to_string()).unwrap_or_default()
}

fn cells(r: &Row) -> Vec<String> {
    vec![
        r.id.clone(),
        r.engine.clone(),
        r.model.clone(),
        r.input.clone(),
        r.batch.to_string(),
        r.threads.to_string(),
        r.device.clone(),
        r.status.clone(),
        r.attempts.to_string(),
        opt(&r.reason),
        opt(&r.init_ms),
        opt(&r.first_inference_ms),
        opt(&r.warmup_mean_ms),
        opt(&r.mean_ms),
        opt(&r.mean_spread_ms),
        opt(&r.median_ms),
        opt(&r.std_ms),
        opt(&r.p90_ms),
        opt(&r.p99_ms),
        opt(&r.min_ms),
        opt(&r.max_ms),
        opt(&r.inferences_per_s),
        opt(&r.images_per_s),
        opt(&r.iterations),
        opt(&r.repeats),
        opt(&r.outliers),
        opt(&r.cv),
        opt(&r.noisy),
        opt(&r.peak_rss_bytes),
        opt(&r.cpu_mean_pct),
        opt(&r.cpu_max_pct),
        opt(&r.wall_s),
        opt(&r.engine_version),
        opt(&r.engine_note),
        opt(&r.trimmed_mean_ms),
        opt(&r.mad_ms),
        opt(&r.outliers_excluded),
        opt(&r.verdict),
        opt(&r.verdict_reason),
        opt(&r.median_ci_ms),
        opt(&r.target_reached),
        opt(&r.repeats_remeasured),
        r.precision.clone(),
        opt(&r.inputs),
    ]
}

pub fn to_csv(rows: &[Row]) -> String {
    let mut out = crate::text::csv_record(COLUMNS) + "\n";
    for r in rows {
        out.push_str(&crate::text::csv_record(cells(r)));
        out.push('\n');
    }
    out
}

pub fn to_json(
    manifest: &Manifest,
    rows: &[Row],
    checks: &OutputChecks,
) -> crate::error::Result<String> {
    let (ok, failed, not_run, skipped) = counts(rows);
    let value = serde_json::json!({
        "name": manifest.name,
        "started": manifest.started,
        "ended": manifest.ended,
        "status": manifest.status,
        "device": manifest.device,
        "counts": {"ok": ok, "failed": failed, "not_run": not_run, "skipped": skipped},
        "conditions": rows,
        "outputs": {
            "tolerance": crate::results::agreement::TOLERANCE,
            "absolute_floor": crate::results::agreement::ABSOLUTE_FLOOR,
            "compared": checks.agreement
        },
        "accuracy": {
            "inputs": crate::results::accuracy::inputs_line(&checks.accuracy),
            "compared": checks.accuracy
        },
    });
    Ok(serde_json::to_string_pretty(&value)? + "\n")
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn fixed(v: Option<f64>, places: usize) -> String {
    v.map(|x| format!("{x:.places$}"))
        .unwrap_or_else(|| "–".to_string())
}

/// "Started …, ended …. 3 ok, 1 failed, 0 not run, 2 skipped."
pub fn outcome_line(manifest: &Manifest, rows: &[Row]) -> String {
    let (ok, failed, not_run, skipped) = counts(rows);
    format!(
        "Started {}, ended {}. {} ok, {} failed, {} not run, {} skipped.",
        manifest.started,
        manifest.ended.as_deref().unwrap_or("(not finished)"),
        ok,
        failed,
        not_run,
        skipped
    )
}

/// "Device: Jetson Orin Nano (aarch64), 6 CPUs, 7.4 GiB memory, kernel 5.15."
pub fn device_line(manifest: &Manifest) -> String {
    let d = &manifest.device;
    format!(
        "Device: {} ({}), {} CPUs, {} memory, kernel {}.",
        d.board
            .as_deref()
            .or(d.cpu_model.as_deref())
            .unwrap_or("unknown CPU"),
        d.arch,
        d.cpus_available,
        d.memory_total_bytes
            .map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64))
            .unwrap_or_else(|| "unknown".to_string()),
        d.kernel.as_deref().unwrap_or("unknown"),
    )
}

/// "Board state: power mode MAXN (0), jetson_clocks on, CPU governor schedutil." and each
/// warning the state gave; None for a directory from before edgeprof recorded it.
pub fn state_lines(manifest: &Manifest) -> Option<Vec<String>> {
    let state = manifest.board_state.as_ref()?;
    let mut lines = vec![format!("Board state: {}.", state.summary())];
    lines.extend(state.warnings().iter().map(|w| format!("Warning: {w}.")));
    Some(lines)
}

/// The headings of the conditions' table in the Markdown summary and the HTML report.
pub const TABLE_HEADINGS: [&str; 11] = [
    "condition",
    "status",
    "mean ms",
    "±",
    "median",
    "p90",
    "p99",
    "inf/s",
    "peak RSS MiB",
    "CPU %",
    "notes",
];

/// A row's cells under [`TABLE_HEADINGS`], as plain text.
pub fn table_cells(r: &Row) -> [String; 11] {
    let mut notes = Vec::new();
    if r.noisy == Some(true) {
        notes.push(format!("noisy (CV {:.1} %)", 100.0 * r.cv.unwrap_or(0.0)));
    }
    if let Some(n) = r.outliers.filter(|&n| n > 0) {
        notes.push(if r.outliers_excluded == Some(true) {
            format!("{n} outliers (left out of the mean)")
        } else {
            format!("{n} outliers")
        });
    }
    if let (Some("disturbed"), Some(why)) = (r.verdict.as_deref(), &r.verdict_reason) {
        notes.push(format!("disturbed: {why}"));
    }
    if let (Some("throttled"), Some(why)) = (r.verdict.as_deref(), &r.verdict_reason) {
        notes.push(format!("throttled: {why}"));
    }
    if r.target_reached == Some(false) {
        notes.push("interval target not reached".to_string());
    }
    if let Some(reason) = &r.reason {
        notes.push(reason.clone());
    }
    let median = match (r.median_ms, r.median_ci_ms) {
        (Some(m), Some(ci)) => format!("{m:.3} ±{ci:.3}"),
        (m, _) => fixed(m, 3),
    };
    [
        r.id.clone(),
        r.status.clone(),
        fixed(r.mean_ms, 3),
        fixed(r.mean_spread_ms, 3),
        median,
        fixed(r.p90_ms, 3),
        fixed(r.p99_ms, 3),
        fixed(r.inferences_per_s, 1),
        fixed(r.peak_rss_bytes.map(|b| b as f64 / (1u64 << 20) as f64), 1),
        fixed(r.cpu_mean_pct, 0),
        notes.join("; "),
    ]
}

pub fn to_markdown(manifest: &Manifest, rows: &[Row], checks: &OutputChecks) -> String {
    let agreement = &checks.agreement;
    let mut out = format!(
        "# {}\n\n{}\n\n{}\n\n",
        manifest.name,
        outcome_line(manifest, rows),
        device_line(manifest)
    );
    out.push_str(&format!("| {} |\n", TABLE_HEADINGS.join(" | ")));
    out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for r in rows {
        let cells = table_cells(r).map(|c| md_cell(&c));
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    if !agreement.is_empty() {
        out.push_str(&format!(
            "\n## Outputs\n\nEach engine's first output against the reference's, on the same \
             weights and input; they agree when the largest difference is within {:e} of the \
             reference's largest value, or at most {:e}.\n\n| model | condition | reference | \
             max abs diff | relative | agree |\n|---|---|---|--:|--:|---|\n",
            crate::results::agreement::TOLERANCE,
            crate::results::agreement::ABSOLUTE_FLOOR
        ));
        for a in agreement {
            out.push_str(&format!(
                "| {} | {} | {} | {:.2e} | {:.2e} | {} |\n",
                md_cell(&a.group),
                md_cell(&a.condition),
                md_cell(&a.reference),
                a.max_abs_diff,
                a.max_rel_diff,
                if a.agree {
                    "yes".to_string()
                } else {
                    format!(
                        "**no**{}",
                        a.note
                            .as_deref()
                            .map(|n| format!(" ({n})"))
                            .unwrap_or_default()
                    )
                }
            ));
        }
    }
    if !checks.accuracy.is_empty() {
        out.push_str(&format!(
            "\n## Accuracy of the lower precisions\n\nEach lower-precision condition's output \
             against its fp32 twin's, on {}.\n\n| condition | precision | top-1 agreement | \
             top-5 agreement | max abs error | mean abs error | cosine |\n\
             |---|---|--:|--:|--:|--:|--:|\n",
            crate::results::accuracy::inputs_line(&checks.accuracy)
        ));
        for a in &checks.accuracy {
            let cells = crate::results::accuracy::cells(a);
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                md_cell(&a.condition),
                a.precision,
                cells
                    .iter()
                    .map(|c| md_cell(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
    }
    out
}

/// Rows for other modules' tests.
/// A record in one line, after its condition's id: `ok, mean 1.234 ms ± 0.010, 810.3
/// inferences/s` with what was measured beside it (noise, peak RSS, CPU, power, energy,
/// throttling), or `failed: REASON` (`failed, retrying` when another attempt follows; the attempt
/// named from the second on). Every front-end and the fleet's progress say a record this way.
pub fn record_line(record: &RunRecord, retry: bool) -> String {
    use std::fmt::Write as _;
    let mut line = String::new();
    match (&record.stats, record.ok) {
        (Some(s), true) => {
            let rs = &s.repeat_summary;
            let _ = write!(
                line,
                "ok, mean {:.3} ms ± {:.3}, {:.1} inferences/s",
                rs.mean_ms, rs.mean_spread_ms, rs.inferences_per_s
            );
            if let Some(ci) = half_width(s) {
                let _ = write!(line, ", median {:.3} ms ±{ci:.3}", s.latency.median_ms);
            }
            if s.noisy {
                let _ = write!(line, ", noisy (CV {:.1} %)", 100.0 * s.cv);
            }
        }
        (None, true) => line.push_str("ok"),
        (_, false) => {
            line.push_str(if retry { "failed, retrying" } else { "failed" });
            if record.attempt > 1 {
                let _ = write!(line, " (attempt {})", record.attempt);
            }
            let _ = write!(
                line,
                ": {}",
                record.reason.as_deref().unwrap_or("unknown reason")
            );
        }
    }
    let r = &record.resources;
    if let Some(peak) = r.peak_rss_bytes {
        let _ = write!(line, ", peak RSS {}", crate::text::bytes(peak));
    }
    if let Some(cpu) = r.cpu_mean_pct {
        let _ = write!(line, ", CPU {cpu:.0} %");
    }
    if let Some(t) = &record.telemetry {
        if let Some(w) = t.power_mean_w {
            let _ = write!(line, ", {w:.2} W");
        }
        if let Some(j) = t.energy_per_inference_j {
            let _ = write!(line, ", {:.1} mJ/inference", j * 1e3);
        }
        if t.throttled {
            let _ = write!(line, ", THROTTLED ({})", t.reasons.join("; "));
        }
    }
    match verdict(record) {
        Some(("disturbed", Some(why))) => {
            let _ = write!(line, ", DISTURBED ({why})");
        }
        Some(("clean", Some(why))) => {
            let _ = write!(line, ", {why}");
        }
        _ => {}
    }
    if let Some(short) = record.repetition.as_ref().and_then(|r| r.shortfall()) {
        let _ = write!(line, ", {short}");
    }
    line
}

#[cfg(test)]
pub mod tests_support {
    pub fn row(c: &crate::protocol::Condition, status: &str) -> super::Row {
        super::Row::blank(c, status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_the_same_in_every_front_end() {
        let condition = crate::protocol::Condition::new(
            "tract",
            crate::config::ModelRef::Zoo("resnet34".into()),
            crate::models::InputShape::default(),
            1,
            0,
            crate::config::Device::Cpu,
        );
        let repeats = vec![vec![2.0, 2.0, 2.0, 2.0]; 3];
        let stats =
            crate::stats::run_stats(10.0, Some(3.0), &[2.5], &repeats, 1, Default::default());
        let mut record = RunRecord {
            condition,
            attempt: 1,
            last: true,
            started: "2026-12-02T00:00:00Z".into(),
            ok: true,
            reason: None,
            failure: None,
            run: None,
            stats,
            resources: Default::default(),
            telemetry: None,
            repetition: None,
            drift: None,
            ran_on: None,
            state_changes: Vec::new(),
        };
        record.resources.peak_rss_bytes = Some(40 << 20);
        assert_eq!(
            record_line(&record, false),
            "ok, mean 2.000 ms ± 0.000, 500.0 inferences/s, median 2.000 ms ±0.000, peak RSS \
             40.00 MiB"
        );
        record.stats = None;
        record.resources = Default::default();
        assert_eq!(record_line(&record, false), "ok");
        record.ok = false;
        record.reason = Some("the worker was killed".into());
        assert_eq!(
            record_line(&record, true),
            "failed, retrying: the worker was killed"
        );
        record.attempt = 2;
        assert_eq!(
            record_line(&record, false),
            "failed (attempt 2): the worker was killed"
        );
    }

    #[test]
    fn every_row_has_a_cell_per_column() {
        assert_eq!(
            COLUMNS.len(),
            cells(&Row::blank(
                &crate::protocol::Condition::new(
                    "tract",
                    crate::config::ModelRef::Zoo("resnet34".into()),
                    crate::models::InputShape::default(),
                    1,
                    0,
                    crate::config::Device::Cpu,
                ),
                "ok"
            ))
            .len()
        );
    }
}

//! NVIDIA GPU profiler output as roofline points: `ncu --csv` (Nsight Compute,
//! Volta and newer) with the hierarchical-roofline metric set, and `nvprof --csv` (Maxwell and
//! Pascal: Jetson Nano, TX2) with its flop_count and transaction metrics plus, for time, its GPU
//! summary. Pure parsers: the text in, kernels and warnings out.
//!
//! Quirks handled: the application's own output and `==PROF==` / `==PID==` lines before the
//! header; quoted values with thousands separators; unit columns (`byte`, `Kbyte`, `cycle`,
//! `hz`, `Ghz`, `nsecond`, …) and unit suffixes in values (`83.3%`, `1.5GB/s`); `nan` or `n/a`
//! after a failed launch (reported, the kernel is left out); nvprof's per-invocation averages,
//! multiplied by the invocation count; a truncated last line.
//!
//! Cleaning: only the metrics the roofline needs are kept; FLOPs are the sum of the
//! double, single and half precision counts (an FMA counts two); time is the sum over kernels
//! after unit normalisation; bytes are per-level sums (transactions × 32 bytes for nvprof).

use crate::collect::gpuprof::{
    ncu_flop_metric, NCU_BYTES, NCU_FLOP_OPS, NCU_TENSOR, NCU_TIME, NVPROF_DRAM, NVPROF_FLOPS,
    NVPROF_L1, NVPROF_L2,
};
use crate::roofline::{Level, PointSource, Precision, Program};
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ImportError {
    #[error("no {0} header line: this is not {1} CSV output (was it run with --csv?)")]
    NoHeader(&'static str, &'static str),
    #[error("the header has no {0:?} column")]
    MissingColumn(String),
    #[error("no kernel has the metrics a roofline needs ({0})")]
    NothingUsable(String),
    #[error("{place}: {field} = {value} is {why}")]
    BadValue {
        /// Where: "line 12", "GPU summary line 4", "launch 3".
        place: String,
        field: String,
        value: String,
        why: String,
    },
}

/// The largest count (FLOPs, bytes, instructions, cycles) a profiler can report for one kernel
/// (or per invocation): orders of magnitude past any GPU, so only a corrupted file reaches it.
pub const MAX_COUNT: f64 = 1e21;
/// The longest kernel time, in seconds (over three months).
pub const MAX_SECONDS: f64 = 1e7;
/// The fastest clock, in hertz.
pub const MAX_HZ: f64 = 1e12;
/// The most invocations of one kernel.
pub const MAX_INVOCATIONS: f64 = 1e12;

/// A value the profiler wrote for a failed launch (or a metric it could not collect).
fn is_missing(text: &str) -> bool {
    let t = text.trim().to_ascii_lowercase();
    matches!(t.as_str(), "" | "nan" | "-nan" | "n/a" | "(!) n/a" | "na")
}

/// A metric value in base units, checked: None for a missing value (a failed launch), an
/// error for one that is infinite, negative or past `limit` (a corrupted file), which would
/// otherwise put nonsense on the chart and in the advice.
fn checked_value(
    place: &'static str,
    line: usize,
    field: &str,
    text: &str,
    scale: f64,
    limit: f64,
) -> Result<Option<f64>, ImportError> {
    let bad = |why: String| ImportError::BadValue {
        place: format!("{place}line {line}"),
        field: field.to_string(),
        value: text.trim().chars().take(40).collect(),
        why,
    };
    if is_missing(text) {
        return Ok(None);
    }
    let t = text.trim().to_ascii_lowercase();
    if t.trim_start_matches(['-', '+']).starts_with("inf") {
        return Err(bad("not a finite number".to_string()));
    }
    let Some(raw) = number_unchecked(text) else {
        // Words where a number belongs: treated like a missing value, and reported.
        return Ok(None);
    };
    let value = raw * scale;
    if !value.is_finite() {
        Err(bad("not a finite number".to_string()))
    } else if value < 0.0 {
        Err(bad("negative".to_string()))
    } else if value > limit {
        Err(bad(format!(
            "more than any GPU reaches (at most {limit:e})"
        )))
    } else {
        Ok(Some(value))
    }
}

/// The bound on an ncu metric in base units (seconds, hertz, counts).
fn ncu_limit(metric: &str) -> f64 {
    if metric == NCU_TIME[1] {
        MAX_HZ
    } else if metric == "gpu__time_duration.sum" {
        MAX_SECONDS
    } else {
        MAX_COUNT
    }
}

/// Whether ncu's metric is one the roofline reads (others are kept as they are, unchecked).
fn is_ncu_roofline_metric(metric: &str) -> bool {
    NCU_TIME.contains(&metric)
        || metric == "gpu__time_duration.sum"
        || NCU_BYTES.contains(&metric)
        || NCU_FLOP_OPS.iter().any(|op| ncu_flop_metric(op) == metric)
}

pub use crate::text::csv_split as split_csv;

/// A number as the profilers print it: thousands separators, an optional unit suffix
/// (`%`, `GB/s`, `B`, …). None for `nan`, `n/a` or anything else.
pub fn number(text: &str) -> Option<f64> {
    number_unchecked(text).filter(|v| v.is_finite())
}

/// [`number`] without the finiteness check: `1e400` is infinite here, not missing.
fn number_unchecked(text: &str) -> Option<f64> {
    let t = text.trim().replace(',', "");
    let end = t
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == 'e'
                || c == 'E'
                || ((c == '-' || c == '+') && (i == 0 || t[..i].ends_with(['e', 'E']))))
        })
        .map_or(t.len(), |(i, _)| i);
    t[..end].parse().ok()
}

/// The factor from a unit to the base unit (bytes, seconds, hertz, cycles, instructions); None
/// for a unit edgeprof does not know.
pub fn unit_scale(unit: &str) -> Option<f64> {
    let u = unit.trim().to_ascii_lowercase();
    Some(match u.as_str() {
        "" | "byte" | "b" | "cycle" | "inst" | "hz" | "second" | "s" | "(!) n/a" => 1.0,
        "kbyte" | "kb" => 1e3,
        "mbyte" | "mb" => 1e6,
        "gbyte" | "gb" => 1e9,
        "tbyte" | "tb" => 1e12,
        "kcycle" => 1e3,
        "mcycle" => 1e6,
        "gcycle" => 1e9,
        "khz" => 1e3,
        "mhz" => 1e6,
        "ghz" => 1e9,
        "nsecond" | "ns" => 1e-9,
        "usecond" | "us" => 1e-6,
        "msecond" | "ms" => 1e-3,
        "kinst" => 1e3,
        "minst" => 1e6,
        "ginst" => 1e9,
        _ => return None,
    })
}

/// One profiled kernel (an ncu launch, or an nvprof kernel over all its invocations).
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// Launches it stands for.
    pub invocations: u64,
    /// Kernel-active time in seconds (None: the source gave none).
    pub seconds: Option<f64>,
    /// FLOPs by precision.
    pub flops: BTreeMap<Precision, f64>,
    /// Bytes moved at each level.
    pub bytes: BTreeMap<Level, f64>,
    /// Tensor-pipe warp instructions (ncu), whose FLOPs are not in `flops`; None where the
    /// profile did not count them.
    pub tensor_instructions: Option<f64>,
}

impl Kernel {
    pub fn total_flops(&self) -> f64 {
        // A sum of no counts is -0.0 in Rust; a kernel without them did no FLOPs.
        self.flops.values().sum::<f64>() + 0.0
    }
}

/// What an import found: the kernels, and what had to be left out or looks wrong.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Import {
    pub tool: &'static str,
    pub kernels: Vec<Kernel>,
    pub warnings: Vec<String>,
}

/// Finds the header line (the first whose fields include every name in `needs`); its index and
/// fields. Lines before it (application output, `==PROF==`) are skipped.
fn header(lines: &[&str], needs: &[&str]) -> Option<(usize, Vec<String>)> {
    lines.iter().enumerate().find_map(|(i, line)| {
        let fields = split_csv(line)?;
        needs
            .iter()
            .all(|n| fields.iter().any(|f| f == n))
            .then_some((i, fields))
    })
}

fn column(fields: &[String], name: &str) -> Result<usize, ImportError> {
    fields
        .iter()
        .position(|f| f == name)
        .ok_or_else(|| ImportError::MissingColumn(name.to_string()))
}

/// The precision of an ncu FLOP op (`dfma` → fp64) and the FLOPs per instruction (2 for FMA).
fn ncu_op(op: &str) -> (Precision, f64) {
    let precision = match op.as_bytes().first() {
        Some(b'd') => Precision::Fp64,
        Some(b'h') => Precision::Fp16,
        _ => Precision::Fp32,
    };
    (precision, if op.ends_with("fma") { 2.0 } else { 1.0 })
}

/// Calls `f` on each data row after the header line `start`: (line number, fields). Blank
/// lines and the profilers' own `==` lines are skipped; a row with the wrong number of fields (a
/// truncated last line) is reported in `warnings` and left out. Rows are split one at a time,
/// so a large file is not held twice over as fields.
fn each_row(
    lines: &[&str],
    start: usize,
    width: usize,
    what: &str,
    warnings: &mut Vec<String>,
    mut f: impl FnMut(usize, Vec<String>, &mut Vec<String>) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        if line.trim().is_empty() || line.starts_with("==") {
            continue;
        }
        match split_csv(line).filter(|r| r.len() == width) {
            Some(row) => f(i + 1, row, warnings)?,
            None => warnings.push(format!(
                "{what}line {}: not a complete row (truncated?); left out",
                i + 1
            )),
        }
    }
    Ok(())
}

/// `ncu --csv --metrics …` output: one row per (launch, metric).
pub fn parse_ncu(text: &str) -> Result<Import, ImportError> {
    let lines: Vec<&str> = text.lines().collect();
    let (start, fields) = header(
        &lines,
        &["ID", "Kernel Name", "Metric Name", "Metric Value"],
    )
    .ok_or(ImportError::NoHeader(
        "\"ID\",…,\"Metric Value\"",
        "Nsight Compute",
    ))?;
    let id = column(&fields, "ID")?;
    let kernel = column(&fields, "Kernel Name")?;
    let metric = column(&fields, "Metric Name")?;
    let unit = column(&fields, "Metric Unit").ok();
    let value = column(&fields, "Metric Value")?;
    let mut import = Import {
        tool: "Nsight Compute",
        ..Import::default()
    };
    // Launch id → (kernel name, metric → base-unit value or None for nan).
    let mut launches: BTreeMap<u64, (String, BTreeMap<String, Option<f64>>)> = BTreeMap::new();
    let warnings = &mut import.warnings;
    each_row(
        &lines,
        start,
        fields.len(),
        "",
        warnings,
        |line, row, warnings| {
            let Ok(launch) = row[id].trim().parse::<u64>() else {
                warnings.push(format!(
                    "line {line}: ID {:?} is not a number; left out",
                    row[id]
                ));
                return Ok(());
            };
            let scale = unit.map_or(Some(1.0), |u| unit_scale(&row[u]));
            let Some(scale) = scale else {
                warnings.push(format!(
                    "line {line}: unknown unit {:?} for {}; left out",
                    unit.map(|u| row[u].as_str()).unwrap_or(""),
                    row[metric]
                ));
                return Ok(());
            };
            let figure = if is_ncu_roofline_metric(&row[metric]) {
                checked_value(
                    "",
                    line,
                    &row[metric],
                    &row[value],
                    scale,
                    ncu_limit(&row[metric]),
                )?
            } else {
                number(&row[value]).map(|v| v * scale)
            };
            let entry = launches
                .entry(launch)
                .or_insert_with(|| (row[kernel].clone(), BTreeMap::new()));
            entry.1.insert(row[metric].clone(), figure);
            Ok(())
        },
    )?;
    for (launch, (name, metrics)) in launches {
        let get = |m: &str| metrics.get(m).copied().flatten();
        let missing: Vec<&String> = metrics
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k)
            .collect();
        if !missing.is_empty() {
            import.warnings.push(format!(
                "launch {launch} ({name}): no value for {} (a failed launch?); left out",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        }
        let seconds = match (get(NCU_TIME[0]), get(NCU_TIME[1])) {
            (Some(c), Some(hz)) if hz > 0.0 => Some(c / hz),
            _ => get("gpu__time_duration.sum"),
        };
        if seconds.is_some_and(|s| s.is_nan() || s > MAX_SECONDS) {
            return Err(ImportError::BadValue {
                place: format!("launch {launch} ({name})"),
                field: "its time".to_string(),
                value: format!("{:e} s", seconds.unwrap_or(f64::NAN)),
                why: format!("more than any kernel takes (at most {MAX_SECONDS:e} s)"),
            });
        }
        let mut flops = BTreeMap::new();
        for op in NCU_FLOP_OPS {
            let (precision, weight) = ncu_op(op);
            if let Some(n) = get(&ncu_flop_metric(op)) {
                *flops.entry(precision).or_insert(0.0) += weight * n;
            }
        }
        let mut bytes = BTreeMap::new();
        for (level, m) in [Level::L1, Level::L2, Level::Dram]
            .into_iter()
            .zip(NCU_BYTES)
        {
            if let Some(b) = get(m) {
                bytes.insert(level, b);
            }
        }
        if flops.is_empty() && bytes.is_empty() {
            import.warnings.push(format!(
                "launch {launch} ({name}): none of the roofline metrics (run ncu with the \
                 hierarchical roofline set); left out"
            ));
            continue;
        }
        import.kernels.push(Kernel {
            name,
            invocations: 1,
            seconds,
            flops,
            bytes,
            tensor_instructions: get(NCU_TENSOR),
        });
    }
    finish(import)
}

/// Bytes per nvprof transaction.
const TRANSACTION_BYTES: f64 = 32.0;

/// `nvprof --csv --metrics …` output (per-invocation Min/Max/Avg per kernel and metric), with the
/// kernels' times from `nvprof --csv --print-gpu-summary` output when given.
pub fn parse_nvprof(metrics: &str, summary: Option<&str>) -> Result<Import, ImportError> {
    let lines: Vec<&str> = metrics.lines().collect();
    let (start, fields) = header(&lines, &["Kernel", "Invocations", "Metric Name", "Avg"]).ok_or(
        ImportError::NoHeader("\"Device\",\"Kernel\",…,\"Avg\"", "nvprof"),
    )?;
    let kernel = column(&fields, "Kernel")?;
    let calls = column(&fields, "Invocations")?;
    let metric = column(&fields, "Metric Name")?;
    let avg = column(&fields, "Avg")?;
    let mut import = Import {
        tool: "nvprof",
        ..Import::default()
    };
    let mut kernels: Vec<(String, u64, BTreeMap<String, Option<f64>>)> = Vec::new();
    each_row(
        &lines,
        start,
        fields.len(),
        "",
        &mut import.warnings,
        |line, row, warnings| {
            let count = checked_value("", line, "Invocations", &row[calls], 1.0, MAX_INVOCATIONS)?;
            let Some(n) = count.filter(|n| *n >= 1.0) else {
                warnings.push(format!(
                    "line {line}: invocations {:?} is not a count; left out",
                    row[calls]
                ));
                return Ok(());
            };
            let name = row[kernel].clone();
            let index = match kernels.iter().position(|k| k.0 == name) {
                Some(k) => k,
                None => {
                    kernels.push((name, n as u64, BTreeMap::new()));
                    kernels.len() - 1
                }
            };
            let value = if is_roofline_metric(&row[metric]) {
                checked_value("", line, &row[metric], &row[avg], 1.0, MAX_COUNT)?
            } else {
                number(&row[avg])
            };
            kernels[index].2.insert(row[metric].clone(), value);
            Ok(())
        },
    )?;
    let times = match summary {
        Some(text) => gpu_summary(text, &mut import.warnings)?,
        None => {
            import.warnings.push(
                "no GPU summary given (nvprof --csv --print-gpu-summary): kernel times unknown, so \
                 no FLOP rates"
                    .to_string(),
            );
            BTreeMap::new()
        }
    };
    for (name, invocations, metrics) in kernels {
        let n = invocations as f64;
        let get = |m: &str| metrics.get(m).copied().flatten();
        let nan: Vec<&String> = metrics
            .iter()
            .filter(|(k, v)| v.is_none() && is_roofline_metric(k))
            .map(|(k, _)| k)
            .collect();
        if !nan.is_empty() {
            import.warnings.push(format!(
                "{name}: no value for {} (a failed launch?); left out",
                nan.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        }
        let mut flops = BTreeMap::new();
        for (precision, m) in [Precision::Fp64, Precision::Fp32, Precision::Fp16]
            .into_iter()
            .zip(NVPROF_FLOPS)
        {
            if let Some(v) = get(m) {
                flops.insert(precision, v * n);
            }
        }
        let mut bytes = BTreeMap::new();
        for (level, names) in [
            (Level::L1, &NVPROF_L1[..]),
            (Level::L2, &NVPROF_L2[..]),
            (Level::Dram, &NVPROF_DRAM[..]),
        ] {
            let found: Vec<f64> = names.iter().filter_map(|m| get(m)).collect();
            if !found.is_empty() {
                bytes.insert(level, found.iter().sum::<f64>() * TRANSACTION_BYTES * n);
            }
        }
        if flops.is_empty() && bytes.is_empty() {
            import.warnings.push(format!(
                "{name}: none of the roofline metrics (flop_count_*, *_transactions); left out"
            ));
            continue;
        }
        import.kernels.push(Kernel {
            seconds: times.get(&name).copied(),
            name,
            invocations,
            flops,
            bytes,
            tensor_instructions: None,
        });
    }
    finish(import)
}

fn is_roofline_metric(name: &str) -> bool {
    NVPROF_FLOPS.contains(&name)
        || NVPROF_L1.contains(&name)
        || NVPROF_L2.contains(&name)
        || NVPROF_DRAM.contains(&name)
}

/// Total GPU time per kernel name in seconds from `nvprof --csv --print-gpu-summary`: a header
/// ("Type","Time(%)","Time","Calls",…,"Name"), then a row of units ("","%","ms",…), then rows;
/// only "GPU activities" rows that are kernels (not `[CUDA memcpy …]`) are kept.
pub fn gpu_summary(
    text: &str,
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<String, f64>, ImportError> {
    let lines: Vec<&str> = text.lines().collect();
    let (start, fields) =
        header(&lines, &["Time", "Calls", "Name"]).ok_or(ImportError::NoHeader(
            "\"Type\",\"Time(%)\",\"Time\",…,\"Name\"",
            "nvprof GPU summary",
        ))?;
    let time = column(&fields, "Time")?;
    let name = column(&fields, "Name")?;
    let kind = column(&fields, "Type").ok();
    let mut scale = 1.0;
    let mut times = BTreeMap::new();
    each_row(
        &lines,
        start,
        fields.len(),
        "GPU summary ",
        warnings,
        |line, row, warnings| {
            // The units row, right under the header: the Time column holds a unit, not a number.
            let numeric = number_unchecked(&row[time]).is_some()
                || row[time].trim().to_ascii_lowercase().contains("inf");
            if !numeric {
                match unit_scale(&row[time]) {
                    Some(s) if line == start + 2 => scale = s,
                    _ => warnings.push(format!(
                        "GPU summary line {line}: time {:?} is not a number; left out",
                        row[time]
                    )),
                }
                return Ok(());
            }
            if kind.is_some_and(|k| row[k] != "GPU activities" && !row[k].is_empty()) {
                return Ok(());
            }
            if row[name].starts_with("[CUDA ") {
                return Ok(());
            }
            if let Some(t) =
                checked_value("GPU summary ", line, "Time", &row[time], scale, MAX_SECONDS)?
            {
                let total = times.entry(row[name].clone()).or_insert(0.0);
                *total += t;
                if *total > MAX_SECONDS {
                    return Err(ImportError::BadValue {
                        place: format!("GPU summary line {line}"),
                        field: format!("the total time of {}", row[name]),
                        value: format!("{total:e} s"),
                        why: format!("more than any kernel takes (at most {MAX_SECONDS:e} s)"),
                    });
                }
            }
            Ok(())
        },
    )?;
    Ok(times)
}

/// An import with at least one kernel, its levels checked; else why nothing could be used.
fn finish(mut import: Import) -> Result<Import, ImportError> {
    if import.kernels.is_empty() {
        return Err(ImportError::NothingUsable(import.warnings.join("; ")));
    }
    for k in &import.kernels {
        check_kernel(k)?;
    }
    check_levels(&mut import);
    Ok(import)
}

/// A kernel as a point: each figure was checked as read, but together they may still be
/// impossible (a count past [`MAX_COUNT`] once multiplied by its invocations, a time under a
/// nanosecond, a rate past any GPU's).
fn check_kernel(k: &Kernel) -> Result<(), ImportError> {
    let point = Program {
        label: k.name.clone(),
        precision: Precision::Fp32,
        flops: k.total_flops(),
        // Untimed kernels are checked for their counts alone.
        seconds: k.seconds.unwrap_or(1.0),
        traffic: k.bytes.iter().map(|(l, b)| (*l, *b)).collect(),
        source: PointSource::GpuCounters,
        basis: Vec::new(),
    };
    if k.seconds == Some(0.0) && point.flops == 0.0 {
        return Ok(());
    }
    point.check().map_err(|why| ImportError::BadValue {
        place: format!("kernel {}", k.name.chars().take(60).collect::<String>()),
        field: "its figures".to_string(),
        value: format!(
            "{} FLOPs in {} s",
            crate::roofline::figure(point.flops),
            crate::roofline::figure(point.seconds)
        ),
        why: format!("impossible: {why}"),
    })
}

/// Bytes should shrink from L1 to DRAM on consistent data (so AI_L1 ≤ AI_L2 ≤ AI_DRAM); a kernel
/// where they do not is kept but reported.
fn check_levels(import: &mut Import) {
    for k in &import.kernels {
        let l1 = k.bytes.get(&Level::L1);
        let l2 = k.bytes.get(&Level::L2);
        let dram = k.bytes.get(&Level::Dram);
        let pairs = [
            (Level::L1, l1, Level::L2, l2),
            (Level::L2, l2, Level::Dram, dram),
        ];
        for (upper, a, lower, b) in pairs {
            if let (Some(a), Some(b)) = (a, b) {
                if b > a {
                    import.warnings.push(format!(
                        "data quality: {}: more bytes at {lower} ({b:.0}) than at {upper} \
                         ({a:.0}), so AI_{upper} > AI_{lower}; the counters disagree",
                        k.name
                    ));
                }
            }
        }
    }
}

/// The whole import as one program: FLOPs summed over precisions and kernels, time summed over
/// kernels, bytes summed per level. Its precision is the one with the most FLOPs. None when no
/// kernel has a time.
pub fn program(import: &Import, label: &str) -> Option<Program> {
    let timed: Vec<&Kernel> = import
        .kernels
        .iter()
        .filter(|k| k.seconds.is_some())
        .collect();
    let seconds: f64 = timed.iter().filter_map(|k| k.seconds).sum();
    if timed.is_empty() || seconds <= 0.0 {
        return None;
    }
    let mut by_precision: BTreeMap<Precision, f64> = BTreeMap::new();
    let mut bytes: BTreeMap<Level, f64> = BTreeMap::new();
    for k in &timed {
        for (p, f) in &k.flops {
            *by_precision.entry(*p).or_default() += f;
        }
        for (l, b) in &k.bytes {
            *bytes.entry(*l).or_default() += b;
        }
    }
    let precision = by_precision
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(Precision::Fp32, |(p, _)| *p);
    let breakdown: Vec<String> = by_precision
        .iter()
        .filter(|(_, f)| **f > 0.0)
        .map(|(p, f)| format!("{p} {:.3e}", f))
        .collect();
    let mut basis = vec![format!(
        "{} metrics over {} kernel(s); FLOPs {}; time = summed kernel time",
        import.tool,
        timed.len(),
        if breakdown.is_empty() {
            "none".to_string()
        } else {
            breakdown.join(", ")
        }
    )];
    let tensor: Vec<f64> = timed
        .iter()
        .filter_map(|k| k.tensor_instructions)
        .filter(|n| *n > 0.0)
        .collect();
    if !tensor.is_empty() {
        basis.push(format!(
            "{} tensor-core instructions in {} kernel(s) are not counted as FLOPs (their ops \
             depend on each instruction's matrix shape, which the counters do not give): the \
             FLOP/s is a lower bound and the point sits below its true place",
            crate::roofline::figure(tensor.iter().sum()),
            tensor.len()
        ));
    }
    Some(Program {
        label: label.to_string(),
        precision,
        flops: by_precision.values().sum(),
        seconds,
        traffic: bytes.into_iter().collect(),
        source: PointSource::GpuCounters,
        basis,
    })
}

/// The GPU profiles kept in a results directory: every `ncu.csv`, and `nvprof-metrics.csv`
/// with its `nvprof-summary.csv`, in `dir` or a folder directly under it (where
/// `roofline profile-gpu --output DIR/NAME` puts them), each as one program named after its
/// folder; the profiles that cannot be placed, with the reason.
pub fn programs_in(dir: &std::path::Path) -> (Vec<Program>, Vec<(String, String)>) {
    let mut folders = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut subs: Vec<std::path::PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subs.sort();
        folders.extend(subs);
    }
    let mut programs = Vec::new();
    let mut left_out = Vec::new();
    for folder in folders {
        let label = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "gpu profile".to_string());
        let read = |name: &str| std::fs::read_to_string(folder.join(name)).ok();
        let import = match (read("ncu.csv"), read("nvprof-metrics.csv")) {
            (Some(text), _) => parse_ncu(&text),
            (None, Some(text)) => parse_nvprof(&text, read("nvprof-summary.csv").as_deref()),
            (None, None) => continue,
        };
        match import {
            Ok(import) => match program(&import, &label) {
                Some(p) => programs.push(p),
                None => left_out.push((
                    label,
                    "no kernel has a time (nvprof: nvprof-summary.csv is missing)".to_string(),
                )),
            },
            Err(e) => left_out.push((label, e.to_string())),
        }
    }
    (programs, left_out)
}

#[cfg(test)]
mod tests {
    //! Tests of `roofline/nvidia.rs`.

    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/gpu-profilers/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => panic!("{path}: {e}"),
        }
    }

    #[test]
    fn tensor_core_instructions_are_counted_and_said_to_be_missing_from_the_flops() {
        let import = match parse_ncu(&fixture("ncu-orin-tensor.csv")) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        let tensor: Vec<Option<f64>> = import
            .kernels
            .iter()
            .map(|k| k.tensor_instructions)
            .collect();
        assert_eq!(tensor, [Some(300_000.0), Some(0.0)]);
        let Some(p) = program(&import, "detector_fp16") else {
            panic!("no program")
        };
        // The CUDA cores' FLOPs alone: 2 × 2 M hfma and 2 × 1 M ffma in the first kernel,
        // 1 M fadd in the second.
        assert!(close(p.flops, 4e6 + 2e6 + 1e6), "{}", p.flops);
        assert_eq!(p.precision, Precision::Fp16);
        assert_eq!(
            p.basis.get(1).map(String::as_str),
            Some(
                "300000 tensor-core instructions in 1 kernel(s) are not counted as FLOPs (their \
                 ops depend on each instruction's matrix shape, which the counters do not give): \
                 the FLOP/s is a lower bound and the point sits below its true place"
            )
        );
        // Without tensor-core work, nothing is said.
        let plain = match parse_ncu(&fixture("ncu-orin.csv")) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        let Some(p) = program(&plain, "resnet_infer") else {
            panic!("no program")
        };
        assert_eq!(p.basis.len(), 1, "{:?}", p.basis);
    }

    #[test]
    fn numbers_and_units() {
        assert_eq!(number("134,957,158,144"), Some(134_957_158_144.0));
        assert_eq!(number("83.340104%"), Some(83.340104));
        assert_eq!(number("1.5GB/s"), Some(1.5));
        assert_eq!(number("2.5e+03"), Some(2500.0));
        assert_eq!(number("nan"), None);
        assert_eq!(number("n/a"), None);
        assert_eq!(unit_scale("Kbyte"), Some(1e3));
        assert_eq!(unit_scale("usecond"), Some(1e-6));
        assert_eq!(unit_scale("furlong"), None);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn ncu_kernels_after_application_output_with_units_and_a_failed_launch() {
        let import = match parse_ncu(&fixture("ncu-orin.csv")) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(import.kernels.len(), 2, "{import:?}");
        let conv = &import.kernels[0];
        assert!(conv.name.starts_with("void implicit_convolve_sgemm"));
        // 1.2 M cycles at 1.2 GHz; FLOPs = fadd + 2 × ffma + fmul; lts in Kbyte.
        assert!(close(conv.seconds.unwrap_or(0.0), 1e-3));
        assert!(close(
            conv.flops[&Precision::Fp32],
            10e6 + 2.0 * 400e6 + 5e6
        ));
        assert_eq!(conv.flops[&Precision::Fp64], 0.0);
        assert!(close(conv.bytes[&Level::L1], 2e9));
        assert!(close(conv.bytes[&Level::L2], 6e8));
        assert!(close(conv.bytes[&Level::Dram], 2e8));
        // The frequency in Ghz.
        assert!(close(import.kernels[1].seconds.unwrap_or(0.0), 1e-4));
        assert!(
            import
                .warnings
                .iter()
                .any(|w| w.contains("launch 2 (layernorm_kernel") && w.contains("failed launch")),
            "{:?}",
            import.warnings
        );
        let Some(p) = program(&import, "resnet_infer") else {
            panic!("no program")
        };
        assert!(close(p.seconds, 1.1e-3));
        assert!(close(p.flops, 815e6 + 1e6));
        assert_eq!(p.precision, Precision::Fp32);
        let traffic: BTreeMap<Level, f64> = p.traffic.iter().copied().collect();
        assert!(close(traffic[&Level::L1], 2.008e9));
        assert!(close(traffic[&Level::L2], 6.08e8));
        assert!(close(traffic[&Level::Dram], 2.08e8));
        // Consistent data: AI_L1 ≤ AI_L2 ≤ AI_DRAM, and no data-quality warning.
        let ai = |l| p.intensity(l).unwrap_or(f64::NAN);
        assert!(ai(Level::L1) <= ai(Level::L2) && ai(Level::L2) <= ai(Level::Dram));
        assert!(!import.warnings.iter().any(|w| w.contains("data quality")));
    }

    #[test]
    fn broken_ncu_files_are_reported_not_hidden() {
        let truncated = match parse_ncu(&fixture("ncu-truncated.csv")) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(truncated.kernels.len(), 1);
        assert!(truncated.warnings.iter().any(|w| w.contains("truncated")));
        let inconsistent = match parse_ncu(&fixture("ncu-inconsistent.csv")) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert!(
            inconsistent.warnings.iter().any(
                |w| w.starts_with("data quality: copy_kernel") && w.contains("AI_L2 > AI_DRAM")
            ),
            "{:?}",
            inconsistent.warnings
        );
        assert!(matches!(
            parse_ncu(&fixture("not-a-profile.txt")),
            Err(ImportError::NoHeader(..))
        ));
        assert!(matches!(parse_ncu(""), Err(ImportError::NoHeader(..))));
        // nvprof output is not ncu output.
        assert!(parse_ncu(&fixture("nvprof-nano-metrics.csv")).is_err());
    }

    #[test]
    fn nvprof_totals_are_averages_times_invocations() {
        let metrics = fixture("nvprof-nano-metrics.csv");
        let summary = fixture("nvprof-nano-summary.csv");
        let import = match parse_nvprof(&metrics, Some(&summary)) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(import.kernels.len(), 2, "{import:?}");
        let gemv = &import.kernels[0];
        assert_eq!(gemv.invocations, 10);
        assert!(close(gemv.flops[&Precision::Fp32], 2e6 * 10.0));
        // (gld + gst + shared load + shared store) × 32 B × 10 invocations.
        assert!(close(
            gemv.bytes[&Level::L1],
            (40000.0 + 1000.0 + 9000.0) * 32.0 * 10.0
        ));
        assert!(close(gemv.bytes[&Level::L2], 31000.0 * 320.0));
        assert!(close(gemv.bytes[&Level::Dram], 25500.0 * 320.0));
        // Times from the GPU summary, in ms by its units row; the memcpy is not a kernel.
        assert!(close(gemv.seconds.unwrap_or(0.0), 4.5e-3));
        assert!(close(import.kernels[1].seconds.unwrap_or(0.0), 0.93e-3));
        assert!(import
            .warnings
            .iter()
            .any(|w| w.starts_with("broken_kernel(int)")));
        let Some(p) = program(&import, "mlp_infer") else {
            panic!("no program")
        };
        assert!(close(p.seconds, 5.43e-3));
        assert!(close(p.flops, 20e6));
        // Without the summary there is no time, so no point, and the import says why.
        let untimed = match parse_nvprof(&metrics, None) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert!(program(&untimed, "x").is_none());
        assert!(untimed
            .warnings
            .iter()
            .any(|w| w.contains("--print-gpu-summary")));
        assert!(parse_nvprof(&fixture("ncu-orin.csv"), None).is_err());
        assert!(matches!(
            parse_nvprof(&metrics, Some("garbage")),
            Err(ImportError::NoHeader(..))
        ));
    }
}

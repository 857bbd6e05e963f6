//! Ceilings from the LBNL Empirical Roofline Toolkit: its `roofline.json` in both dialects
//! (older files name the peak "GFLOPs" and keep metadata as objects; newer ones name it
//! "FP64 GFLOPs" and keep metadata as a list of "KEY value" strings under the key ""), and
//! optionally its bandwidth sweep (`max` / `max.trimmed`: working-set bytes, trials, three
//! times in µs, three GB/s, three GFLOP/s per line), which lets edgeprof name the levels from
//! this device's cache sizes instead of ERT's positions. Units are 1e9.

use crate::collect::ceilings::SweepPoint;
use crate::collect::device::Cache;
use crate::roofline::{
    levels, BandwidthRoof, Ceilings, ComputeRoof, Level, Precision, MAX_BYTES_PER_S,
    MAX_FLOPS_PER_S, MIN_RATE,
};
use serde_json::Value;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ErtError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("no empirical.{0}.data list: this is not an ERT roofline.json")]
    Missing(&'static str),
    #[error("empirical.{section}.data[{index}] is not a [name, number] pair")]
    BadEntry { section: &'static str, index: usize },
    #[error("empirical.{section}.data[{index}] = {} {unit} is not a figure any machine reaches (from {:e} to {limit:e} {unit})", crate::roofline::figure(*value), MIN_RATE / 1e9)]
    Absurd {
        section: &'static str,
        index: usize,
        value: f64,
        unit: &'static str,
        limit: f64,
    },
    #[error("unknown bandwidth level {0:?} (ERT writes L1, L2, L3, DRAM)")]
    UnknownLevel(String),
    #[error("sweep line {line}: {reason}")]
    BadSweepLine { line: usize, reason: String },
    #[error("{0}")]
    BadCeiling(String),
}

/// Finds OPENMP_THREADS (and MPI processes) anywhere in the metadata, in either dialect.
fn threads_in(value: &Value) -> Option<usize> {
    match value {
        Value::Object(map) => map
            .get("OPENMP_THREADS")
            .and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            })
            .map(|n| n as usize)
            .or_else(|| map.values().find_map(threads_in)),
        Value::Array(items) => items.iter().find_map(|item| match item {
            Value::String(s) => s
                .trim()
                .strip_prefix("OPENMP_THREADS")
                .and_then(|rest| rest.trim().parse().ok()),
            other => threads_in(other),
        }),
        _ => None,
    }
}

/// The `[name, value]` pairs of a section, values finite, positive and at most `limit` (in the
/// file's units, 1e9 a second).
fn pairs<'a>(
    root: &'a Value,
    section: &'static str,
    unit: &'static str,
    limit: f64,
) -> Result<Vec<(&'a str, f64)>, ErtError> {
    let data = root
        .pointer(&format!("/empirical/{section}/data"))
        .and_then(Value::as_array)
        .ok_or(ErtError::Missing(section))?;
    data.iter()
        .enumerate()
        .map(|(index, entry)| {
            let bad = ErtError::BadEntry { section, index };
            let pair = entry.as_array().filter(|p| p.len() == 2).ok_or(bad)?;
            let name = pair[0].as_str();
            let value = pair[1].as_f64().filter(|v| v.is_finite() && *v > 0.0);
            match (name, value) {
                (Some(_), Some(v)) if v > limit || v < MIN_RATE / 1e9 => Err(ErtError::Absurd {
                    section,
                    index,
                    value: v,
                    unit,
                    limit,
                }),
                (Some(n), Some(v)) => Ok((n, v)),
                _ => Err(ErtError::BadEntry { section, index }),
            }
        })
        .collect()
}

fn precision_of(name: &str) -> Precision {
    let upper = name.to_ascii_uppercase();
    if upper.contains("FP32") || upper.contains("SP ") {
        Precision::Fp32
    } else if upper.contains("FP16") || upper.contains("HALF") {
        Precision::Fp16
    } else {
        // ERT's default precision, and what the older dialect's bare "GFLOPs" means.
        Precision::Fp64
    }
}

/// ERT's own level names.
fn level_of(name: &str) -> Result<Level, ErtError> {
    match name.trim().to_ascii_uppercase().as_str() {
        "L1" => Ok(Level::L1),
        "L2" => Ok(Level::L2),
        "L3" => Ok(Level::L3),
        "DRAM" | "HBM" | "MCDRAM" => Ok(Level::Dram),
        _ => Err(ErtError::UnknownLevel(name.to_string())),
    }
}

/// Parses an ERT sweep (`max`, `max.trimmed`): lines of numbers; other lines (precision names,
/// META_DATA blocks) are skipped. `threads` divides ERT's total working set among threads.
pub fn parse_sweep(text: &str, threads: usize) -> Result<Vec<SweepPoint>, ErtError> {
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() || fields[0].parse::<f64>().is_err() {
            continue;
        }
        let numbers: Result<Vec<f64>, _> = fields.iter().map(|f| f.parse::<f64>()).collect();
        let numbers = numbers.map_err(|e| ErtError::BadSweepLine {
            line: i + 1,
            reason: e.to_string(),
        })?;
        if numbers.len() < 8 {
            return Err(ErtError::BadSweepLine {
                line: i + 1,
                reason: format!("{} columns, expected 11", numbers.len()),
            });
        }
        let bad = |reason: String| ErtError::BadSweepLine {
            line: i + 1,
            reason,
        };
        if !(numbers[0].is_finite() && numbers[0] >= 0.0 && numbers[0] < 9.0e18) {
            return Err(bad(format!(
                "a working set of {} bytes is not a size",
                crate::roofline::figure(numbers[0])
            )));
        }
        if let Some(v) = numbers[5..8]
            .iter()
            .find(|v| !(v.is_finite() && (0.0..=MAX_BYTES_PER_S / 1e9).contains(*v)))
        {
            return Err(bad(format!(
                "{} GB/s is not a bandwidth (finite, from 0 to {:e} GB/s)",
                crate::roofline::figure(*v),
                MAX_BYTES_PER_S / 1e9
            )));
        }
        let gbs = numbers[5..8].iter().copied().fold(0.0, f64::max);
        points.push(SweepPoint {
            bytes_per_thread: (numbers[0] / threads.max(1) as f64) as u64,
            threads,
            bytes_per_s: gbs * 1e9,
        });
    }
    Ok(points)
}

/// What an import produced, and how its levels were named.
pub struct Imported {
    pub ceilings: Ceilings,
    pub threads: usize,
    /// True when the levels were named from this device's cache sizes (a sweep was given).
    pub relabelled: bool,
    /// True when the run measured a GPU (its metadata names GPU blocks or ERT_GPU True).
    pub gpu_run: bool,
}

/// Every metadata string of the file.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Whether an ERT run measured a GPU, and its blocks × threads per block when it says.
fn gpu_run(root: &Value) -> (bool, Option<usize>) {
    let mut all = Vec::new();
    strings(root, &mut all);
    let number = |key: &str| {
        all.iter().find_map(|s| {
            s.trim()
                .strip_prefix(key)
                .and_then(|rest| rest.trim().parse::<usize>().ok())
        })
    };
    let (blocks, threads) = (number("GPU_BLOCKS"), number("GPU_THREADS"));
    let flagged = all
        .iter()
        .any(|s| s.contains("'ERT_GPU': ['True']") || s.contains("'ERT_GPU': [True]"));
    let total = blocks.zip(threads).and_then(|(b, t)| b.checked_mul(t));
    (flagged || blocks.is_some() || threads.is_some(), total)
}

/// Ceilings from an ERT roofline.json (and its sweep, if given, labelled with `caches`).
pub fn import(
    json: &str,
    sweep: Option<&str>,
    caches: &[Cache],
    source: String,
) -> Result<Imported, ErtError> {
    let root: Value = serde_json::from_str(json).map_err(|e| ErtError::NotJson(e.to_string()))?;
    let (is_gpu, gpu_threads) = gpu_run(&root);
    let threads = gpu_threads.or_else(|| threads_in(&root)).unwrap_or(1);
    let compute = pairs(&root, "gflops", "GFLOP/s", MAX_FLOPS_PER_S / 1e9)?
        .into_iter()
        .map(|(name, gflops)| ComputeRoof {
            precision: precision_of(name),
            threads,
            flops_per_s: gflops * 1e9,
            via: None,
        })
        .collect();
    let (bandwidth, sweep_points, relabelled) = match sweep {
        Some(text) => {
            let points = parse_sweep(text, threads)?;
            let ranges = levels::level_ranges(caches, threads);
            let bandwidth = levels::label(&points, &ranges, threads)
                .into_iter()
                .map(|(level, bytes_per_s)| BandwidthRoof {
                    level,
                    threads,
                    bytes_per_s,
                })
                .collect();
            (bandwidth, points, true)
        }
        None => {
            let bandwidth = pairs(&root, "gbytes", "GB/s", MAX_BYTES_PER_S / 1e9)?
                .into_iter()
                .map(|(name, gbs)| {
                    Ok(BandwidthRoof {
                        level: level_of(name)?,
                        threads,
                        bytes_per_s: gbs * 1e9,
                    })
                })
                .collect::<Result<Vec<_>, ErtError>>()?;
            (bandwidth, Vec::new(), false)
        }
    };
    let ceilings = Ceilings {
        source,
        compute,
        bandwidth,
        sweep: sweep_points,
        notes: Vec::new(),
        processor: if is_gpu {
            crate::roofline::Processor::Gpu
        } else {
            crate::roofline::Processor::Cpu
        },
        gpu_sweep: Vec::new(),
        trials: Vec::new(),
        busy: Vec::new(),
    };
    // Checked piece by piece above; this is the same check every stored ceiling passes.
    ceilings.check().map_err(|e| ErtError::BadCeiling(e.0))?;
    Ok(Imported {
        ceilings,
        threads,
        relabelled,
        gpu_run: is_gpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = r#"{"empirical": {"metadata": {},
      "gflops": {"data": [["FP64 GFLOPs", 145.23]],
                 "metadata": {"": ["META_DATA", "FLOPS          16", "OPENMP_THREADS 8"]}},
      "gbytes": {"data": [["L1", 1114.38], ["L2", 680.88], ["DRAM", 150.74]],
                 "metadata": {"": ["FLOPS          1", "OPENMP_THREADS 8"]}}},
      "spec": {"gflops": {"data": []}, "gbytes": {"data": []}}}"#;

    const OLD: &str = r#"{"empirical": {
      "gbytes": {"data": [["L1", 1002.83], ["L2", 541.98], ["L3", 290.41], ["DRAM", 68.76]],
                 "metadata": {"FLOPS": 1}},
      "gflops": {"data": [["GFLOPs", 288.33]], "metadata": {"FLOPS": 16}},
      "metadata": {"ERT_VERSION": "1.1.0", "OPENMP_THREADS": 2}}}"#;

    fn imported(json: &str, sweep: Option<&str>, caches: &[Cache]) -> Imported {
        match import(json, sweep, caches, "ert".into()) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn both_dialects_give_peaks_levels_and_threads() {
        let new = imported(NEW, None, &[]);
        assert_eq!(new.threads, 8);
        assert_eq!(new.ceilings.peak(Precision::Fp64), Some(145.23e9));
        assert_eq!(new.ceilings.bandwidth(Level::L2), Some(680.88e9));
        assert_eq!(new.ceilings.bandwidth(Level::L3), None);
        assert!(!new.relabelled);
        let old = imported(OLD, None, &[]);
        assert_eq!(old.threads, 2);
        assert_eq!(old.ceilings.peak(Precision::Fp64), Some(288.33e9));
        assert_eq!(old.ceilings.bandwidth(Level::Dram), Some(68.76e9));
        assert_eq!(precision_of("FP32 GFLOPs"), Precision::Fp32);
        assert!(!new.gpu_run && !old.gpu_run);
        assert_eq!(new.ceilings.processor, crate::roofline::Processor::Cpu);
    }

    #[test]
    fn a_gpu_run_is_known_by_its_metadata() {
        let gpu = NEW.replace(
            r#""OPENMP_THREADS 8"]}},"#,
            r#""GPU_BLOCKS     640", "GPU_THREADS    256"]}},"#,
        );
        let g = imported(&gpu, None, &[]);
        assert!(g.gpu_run);
        assert_eq!(g.threads, 640 * 256);
        assert_eq!(g.ceilings.processor, crate::roofline::Processor::Gpu);
        // ERT's config line alone says so too.
        let flagged = NEW.replace(
            r#""OPENMP_THREADS 8"]}},"#,
            r#""CONFIG  {'ERT_GPU': ['True'], 'ERT_FLOPS': ['1']}"]}},"#,
        );
        assert!(imported(&flagged, None, &[]).gpu_run);
    }

    #[test]
    fn broken_files_say_what_is_wrong() {
        let err = |json: &str| match import(json, None, &[], String::new()) {
            Ok(_) => panic!("accepted {json}"),
            Err(e) => e,
        };
        assert!(matches!(err("{"), ErtError::NotJson(_)));
        assert_eq!(err("{}"), ErtError::Missing("gflops"));
        assert_eq!(
            err(r#"{"empirical": {"gflops": {"data": [["GFLOPs", "fast"]]}}}"#),
            ErtError::BadEntry {
                section: "gflops",
                index: 0
            }
        );
        assert_eq!(
            err(
                r#"{"empirical": {"gflops": {"data": [["GFLOPs", 1]]}, "gbytes": {"data": [["L4", 1]]}}}"#
            ),
            ErtError::UnknownLevel("L4".into())
        );
        assert!(matches!(
            parse_sweep("fp64\n8 1 2 3\n", 1),
            Err(ErtError::BadSweepLine { line: 2, .. })
        ));
    }

    #[test]
    fn a_short_sweep_is_named_by_sizes_not_positions() {
        // ERT ran 2 threads up to 2 MiB in all (1 MiB each) on a machine with 48 KiB of L1d
        // and 2 MiB of L2 per core and a 32 MiB L3: ERT calls the last plateau DRAM.
        let ert_json = r#"{"empirical": {
          "gflops": {"data": [["GFLOPs", 100.0]], "metadata": {"OPENMP_THREADS": 2}},
          "gbytes": {"data": [["L1", 310.0], ["DRAM", 150.0]]}}}"#;
        let sweep = "fp64\n\
            16384 1000 1 1 1 290 300 310 1 1 1\n\
            32768 1000 1 1 1 280 300 305 1 1 1\n\
            262144 100 1 1 1 140 148 150 1 1 1\n\
            2097152 10 1 1 1 130 135 140 1 1 1\n\
            META_DATA\n FLOPS 1\n";
        let caches = vec![
            Cache {
                level: 1,
                kind: "Data".into(),
                size_bytes: 48 << 10,
                shared_cpus: Some(1),
            },
            Cache {
                level: 2,
                kind: "Unified".into(),
                size_bytes: 2 << 20,
                shared_cpus: Some(1),
            },
            Cache {
                level: 3,
                kind: "Unified".into(),
                size_bytes: 32 << 20,
                shared_cpus: Some(2),
            },
        ];
        let by_position = imported(ert_json, None, &caches);
        assert_eq!(by_position.ceilings.bandwidth(Level::Dram), Some(150e9));
        let by_size = imported(ert_json, Some(sweep), &caches);
        assert!(by_size.relabelled);
        assert_eq!(by_size.ceilings.sweep.len(), 4);
        assert_eq!(by_size.ceilings.sweep[0].bytes_per_thread, 8192);
        assert_eq!(by_size.ceilings.bandwidth(Level::L1), Some(310e9));
        assert_eq!(by_size.ceilings.bandwidth(Level::L2), Some(150e9));
        // Nothing in the sweep reached memory: no DRAM roof rather than a wrong one.
        assert_eq!(by_size.ceilings.bandwidth(Level::Dram), None);
    }
}

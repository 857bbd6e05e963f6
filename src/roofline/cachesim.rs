//! Per-level traffic by cache simulation, for CPUs whose counters are out of reach:
//! one condition runs in `edgeprof worker` under valgrind's cache simulator, counting only the
//! timed inferences, and the misses become bytes:
//! - first-level data misses (D1mr + D1mw) × line size → traffic between L1 and L2;
//! - last-level misses (DLmr + DLmw) × line size → DRAM traffic.
//!
//! What it approximates: valgrind models two levels (D1 and LL, inclusive, LRU, no prefetcher)
//! and runs threads one at a time, so the simulation uses one thread; instruction fetches are
//! left out. The simulator is cachegrind's; edgeprof drives it through callgrind
//! (`--cache-sim=yes`) because callgrind can restrict counting to one function
//! (`--toggle-collect`), so loading the model and the first inference do not swamp the few
//! timed ones (cachegrind itself gained such a switch only in valgrind 3.22).

use crate::collect::device::Cache;
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

/// A cache shape valgrind accepts: size = ways × sets × line, with a power-of-two set count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub size_bytes: u64,
    pub ways: u64,
    pub line_bytes: u64,
}

impl Geometry {
    /// The `--D1=` / `--LL=` argument value.
    pub fn arg(&self) -> String {
        format!("{},{},{}", self.size_bytes, self.ways, self.line_bytes)
    }
}

/// A valid shape for a cache of `size_bytes` with `line_bytes` lines: a common associativity
/// whose set count is a power of two, else the odd factor of the line count as ways (e.g. a
/// 300 MiB cache is 75-way with 65 536 sets); None when neither fits.
pub fn geometry(size_bytes: u64, line_bytes: u64) -> Option<Geometry> {
    if line_bytes < 16 || !line_bytes.is_power_of_two() || !size_bytes.is_multiple_of(line_bytes) {
        return None;
    }
    let lines = size_bytes / line_bytes;
    let ways = [16, 12, 8, 20, 24, 32, 11, 10, 15, 4, 2]
        .into_iter()
        .find(|&w| lines.is_multiple_of(w) && (lines / w).is_power_of_two())
        .or_else(|| {
            let odd = lines >> lines.trailing_zeros();
            (odd <= 128).then_some(odd)
        })?;
    Some(Geometry {
        size_bytes,
        ways,
        line_bytes,
    })
}

/// The D1 and LL shapes to simulate from the caches this device reports (None: let valgrind
/// choose, which it does from CPUID on x86).
pub fn shapes(caches: &[Cache], line_bytes: u64) -> (Option<Geometry>, Option<Geometry>) {
    let d1 = caches
        .iter()
        .find(|c| c.level == 1 && c.kind != "Instruction")
        .and_then(|c| geometry(c.size_bytes, line_bytes));
    let ll = caches
        .iter()
        .filter(|c| c.level > 1 && c.kind != "Instruction")
        .max_by_key(|c| c.level)
        .and_then(|c| geometry(c.size_bytes, line_bytes));
    (d1, ll)
}

#[derive(Debug, Error, PartialEq)]
pub enum SimError {
    #[error("the simulation output has no summary line (truncated, or valgrind failed)")]
    NoSummary,
    #[error("the simulation output lacks the {0} event (was the cache simulation on?)")]
    MissingEvent(&'static str),
    #[error("line {line} of the simulation output is malformed: {text}")]
    Malformed { line: usize, text: String },
    #[error("no timed inference was counted")]
    NoIterations,
    #[error("valgrind counted no instruction inside the timed loop (its symbol was not found in this binary)")]
    NothingCounted,
}

/// What a callgrind output file says, reduced to what edgeprof uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    /// valgrind's description of the simulated caches, e.g. "49152 B, 64 B, 12-way associative".
    pub d1: Option<String>,
    pub ll: Option<String>,
    /// Event name → total over the counted region.
    pub events: Vec<(String, u64)>,
}

/// The line size in a cache description ("49152 B, 64 B, 12-way associative" → 64).
fn line_of(desc: &str) -> Option<u64> {
    desc.split(',')
        .nth(1)?
        .trim()
        .strip_suffix(" B")?
        .trim()
        .parse()
        .ok()
}

/// Parses a callgrind (or cachegrind) output file's header and summary.
pub fn parse(text: &str) -> Result<Output, SimError> {
    let mut d1 = None;
    let mut ll = None;
    let mut names: Option<Vec<String>> = None;
    let mut summary: Option<(usize, &str)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("desc: D1 cache:") {
            d1 = Some(rest.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("desc: LL cache:") {
            ll = Some(rest.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("events:") {
            names = Some(rest.split_whitespace().map(str::to_string).collect());
        } else if let Some(rest) = line.strip_prefix("summary:") {
            summary = Some((i + 1, rest));
        } else if let Some(rest) = line.strip_prefix("totals:") {
            summary = summary.or(Some((i + 1, rest)));
        }
    }
    let (line, values) = summary.ok_or(SimError::NoSummary)?;
    let names = names.ok_or(SimError::NoSummary)?;
    let values: Vec<u64> = values
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| SimError::Malformed {
            line,
            text: values.trim().chars().take(80).collect(),
        })?;
    if values.len() > names.len() || values.is_empty() {
        return Err(SimError::Malformed {
            line,
            text: format!("{} values for {} events", values.len(), names.len()),
        });
    }
    // Trailing zeros may be omitted in the format.
    let events = names
        .into_iter()
        .enumerate()
        .map(|(k, n)| (n, values.get(k).copied().unwrap_or(0)))
        .collect();
    Ok(Output { d1, ll, events })
}

/// Bytes per inference from a simulation over `iterations` inferences: (between L1 and L2, from
/// DRAM).
pub fn per_inference(out: &Output, iterations: usize) -> Result<(f64, f64), SimError> {
    if iterations == 0 {
        return Err(SimError::NoIterations);
    }
    let get = |name: &'static str| {
        out.events
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v as f64)
            .ok_or(SimError::MissingEvent(name))
    };
    if get("Ir").is_ok_and(|ir| ir == 0.0) {
        return Err(SimError::NothingCounted);
    }
    let d1_line = out.d1.as_deref().and_then(line_of).unwrap_or(64) as f64;
    let ll_line = out.ll.as_deref().and_then(line_of).unwrap_or(64) as f64;
    let n = iterations as f64;
    let l2 = (get("D1mr")? + get("D1mw")?) * d1_line / n;
    let dram = (get("DLmr")? + get("DLmw")?) * ll_line / n;
    Ok((l2, dram))
}

/// One condition's simulated traffic, as kept in a results directory (`cache-sim.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Simulation {
    pub condition: String,
    pub iterations: usize,
    pub threads: usize,
    pub output: Output,
    /// Bytes per inference between L1 and L2.
    pub l2_bytes: f64,
    /// Bytes per inference from DRAM.
    pub dram_bytes: f64,
    pub seconds: f64,
    pub written: String,
}

/// The simulations kept in a results directory.
pub fn load(dir: &Path) -> crate::error::Result<Vec<Simulation>> {
    let path = dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            crate::error::failed!("{} is not a cache-simulation file: {e}", path.display())
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(crate::error::failed!("cannot read {}: {e}", path.display())),
    }
}

/// Keeps the simulations in a results directory.
pub fn save(dir: &Path, sims: &[Simulation]) -> crate::error::Result<()> {
    let text = serde_json::to_string_pretty(sims)?;
    crate::results::write_atomic(&dir.join(FILE), text.as_bytes())?;
    Ok(())
}

/// The file in a results directory that keeps simulations.
pub const FILE: &str = "cache-sim.json";

crate::error::kinds!(crate::error::Kind::Failed => SimError);

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = include_str!("../../tests/fixtures/cachesim/callgrind.out");

    #[test]
    fn a_real_output_gives_bytes_per_inference_by_hand() {
        let out = match parse(REAL) {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(out.d1.as_deref(), Some("49152 B, 64 B, 12-way associative"));
        assert_eq!(
            out.ll.as_deref(),
            Some("318767104 B, 64 B, 38-way associative")
        );
        assert_eq!(out.events.len(), 9);
        // D1mr 194495 + D1mw 70475 = 264970 lines; DLmr 52 + DLmw 207 = 259; over 4 inferences.
        let (l2, dram) = match per_inference(&out, 4) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(l2, 264_970.0 * 64.0 / 4.0);
        assert_eq!(dram, 259.0 * 64.0 / 4.0);
        assert_eq!(per_inference(&out, 0), Err(SimError::NoIterations));
    }

    #[test]
    fn broken_outputs_are_reported() {
        let no_sim = include_str!("../../tests/fixtures/cachesim/no-cache-sim.out");
        let Ok(out) = parse(no_sim) else {
            panic!("an Ir-only output is still an output")
        };
        assert_eq!(per_inference(&out, 1), Err(SimError::MissingEvent("D1mr")));
        let truncated = include_str!("../../tests/fixtures/cachesim/truncated.out");
        assert_eq!(parse(truncated), Err(SimError::NoSummary));
        assert!(matches!(
            parse("events: Ir D1mr\nsummary: 12 x\n"),
            Err(SimError::Malformed { line: 2, .. })
        ));
        assert!(matches!(
            parse("events: Ir\nsummary: 1 2 3\n"),
            Err(SimError::Malformed { .. })
        ));
        assert!(matches!(
            parse("events: Ir D1mr D1mw DLmr DLmw\nsummary: 0\n").map(|o| per_inference(&o, 1)),
            Ok(Err(SimError::NothingCounted))
        ));
        // Omitted trailing zeros are zeros.
        let Ok(short) = parse("events: D1mr D1mw DLmr DLmw\nsummary: 10 6\n") else {
            panic!("rejected")
        };
        assert_eq!(per_inference(&short, 2), Ok((16.0 * 64.0 / 2.0, 0.0)));
    }

    #[test]
    fn shapes_valgrind_accepts() {
        // 48 KiB, 64 B lines: 768 lines = 12 ways × 64 sets.
        assert_eq!(
            geometry(48 << 10, 64),
            Some(Geometry {
                size_bytes: 48 << 10,
                ways: 12,
                line_bytes: 64
            })
        );
        // 1 MiB: 16 ways × 1024 sets.
        assert_eq!(geometry(1 << 20, 64).map(|g| g.ways), Some(16));
        // 300 MiB: 4 915 200 lines = 75 × 65 536.
        assert_eq!(
            geometry(300 << 20, 64).map(|g| g.arg()),
            Some("314572800,75,64".into())
        );
        // 1.5 MiB (Pi 4's L2 is 1 MiB; some boards report 1.5): 24 576 lines = 12 × 2048.
        assert_eq!(geometry(1536 << 10, 64).map(|g| g.ways), Some(12));
        assert_eq!(geometry(1000, 64), None);
        assert_eq!(geometry(1 << 20, 48), None);
        let caches = vec![
            Cache {
                level: 1,
                kind: "Instruction".into(),
                size_bytes: 32 << 10,
                shared_cpus: Some(1),
            },
            Cache {
                level: 1,
                kind: "Data".into(),
                size_bytes: 32 << 10,
                shared_cpus: Some(1),
            },
            Cache {
                level: 2,
                kind: "Unified".into(),
                size_bytes: 1 << 20,
                shared_cpus: Some(4),
            },
        ];
        let (d1, ll) = shapes(&caches, 64);
        assert_eq!(d1.map(|g| g.arg()), Some("32768,16,64".into()));
        assert_eq!(ll.map(|g| g.arg()), Some("1048576,16,64".into()));
        assert_eq!(shapes(&[], 64), (None, None));
    }
}

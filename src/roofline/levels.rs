//! Names the plateaus of a bandwidth sweep after the cache sizes the system reports, not after
//! their position (ERT calls its last plateau "DRAM" even when a too-small sweep ended inside a
//! cache). A level's bandwidth is the best sweep point whose per-thread working set fits in
//! half of that level's per-thread share and overflows the level inside it; DRAM needs at least
//! four times the last cache's share.

use crate::collect::ceilings::{Measurement, SweepPoint};
use crate::collect::device::Cache;
use crate::roofline::{BandwidthRoof, Ceilings, ComputeRoof, Level};
use serde::Serialize;

/// Per-thread working sets, in bytes, that exercise one level: (min, max], max None = no limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelRange {
    pub level: Level,
    pub above_bytes: u64,
    pub up_to_bytes: Option<u64>,
}

impl LevelRange {
    pub fn contains(&self, bytes: u64) -> bool {
        bytes > self.above_bytes && self.up_to_bytes.is_none_or(|max| bytes <= max)
    }
}

/// Each thread's share of a cache: private caches (L1, L2 unless the system says otherwise) are
/// whole per thread; shared ones are split between the threads that share them.
fn share(cache: &Cache, threads: usize) -> u64 {
    let sharers = cache
        .shared_cpus
        .unwrap_or(if cache.level <= 2 { 1 } else { threads });
    cache.size_bytes / sharers.clamp(1, threads.max(1)) as u64
}

/// The working-set ranges of each level, from the data (or unified) caches of the machine.
pub fn level_ranges(caches: &[Cache], threads: usize) -> Vec<LevelRange> {
    let mut ranges = Vec::new();
    let mut below = 0u64;
    for (level, n) in [(Level::L1, 1), (Level::L2, 2), (Level::L3, 3)] {
        let Some(cache) = caches
            .iter()
            .find(|c| c.level == n && (c.kind == "Data" || c.kind == "Unified"))
        else {
            continue;
        };
        let per_thread = share(cache, threads);
        let up_to = per_thread / 2;
        if up_to > below {
            ranges.push(LevelRange {
                level,
                above_bytes: below,
                up_to_bytes: Some(up_to),
            });
        }
        below = per_thread;
    }
    ranges.push(LevelRange {
        level: Level::Dram,
        above_bytes: (below * 4).max(16 << 20).saturating_sub(1),
        up_to_bytes: None,
    });
    ranges
}

/// The largest per-thread working set a sweep needs to reach DRAM, within a memory budget.
pub fn dram_working_set(ranges: &[LevelRange], threads: usize, memory_bytes: Option<u64>) -> u64 {
    let wanted = ranges
        .iter()
        .find(|r| r.level == Level::Dram)
        .map_or(64 << 20, |r| r.above_bytes + 1);
    // Never take more than a quarter of the machine's memory.
    let budget = memory_bytes.map_or(u64::MAX, |m| m / 4 / threads.max(1) as u64);
    wanted.min(budget).max(4096)
}

/// The bandwidth of each level: the best point of `threads` in its range.
pub fn label(points: &[SweepPoint], ranges: &[LevelRange], threads: usize) -> Vec<(Level, f64)> {
    ranges
        .iter()
        .filter_map(|r| {
            let best = points
                .iter()
                .filter(|p| p.threads == threads && r.contains(p.bytes_per_thread))
                .map(|p| p.bytes_per_s)
                .fold(f64::NAN, f64::max);
            (!best.is_nan()).then_some((r.level, best))
        })
        .collect()
}

/// Ceilings from a measurement, the levels named from the caches.
pub fn ceilings(m: &Measurement, caches: &[Cache], source: String) -> Ceilings {
    let ranges = level_ranges(caches, m.threads);
    let mut bandwidth = Vec::new();
    let mut counts = vec![m.threads];
    if m.threads > 1 {
        counts.push(1);
    }
    for threads in counts {
        let one_thread_ranges = level_ranges(caches, threads);
        let ranges = if threads == m.threads {
            &ranges
        } else {
            &one_thread_ranges
        };
        for (level, bytes_per_s) in label(&m.sweep, ranges, threads) {
            bandwidth.push(BandwidthRoof {
                level,
                threads,
                bytes_per_s,
            });
        }
    }
    let mut c = Ceilings {
        source,
        compute: m
            .peaks
            .iter()
            .map(|p| ComputeRoof {
                precision: p.precision,
                threads: p.threads,
                flops_per_s: p.flops_per_s,
                via: p.via.clone(),
            })
            .collect(),
        bandwidth,
        sweep: m.sweep.clone(),
        notes: Vec::new(),
        processor: crate::roofline::Processor::Cpu,
        gpu_sweep: Vec::new(),
        trials: m.trials.clone(),
        busy: m.busy.clone(),
    };
    make_monotone(&mut c);
    c
}

/// Holds the ceilings to what must be true of any machine, noting each change: a level serves
/// its data at least as fast as the levels beyond it (a lower figure is noise, or a level the
/// sweep could not isolate), and more threads never lower a peak (they could idle).
pub fn make_monotone(c: &mut Ceilings) {
    /// Raises `value` to `floor` when it is below, saying so: "SUBJECT measured V UNIT, below
    /// THAN F: raised to it" (values in units of 1e9).
    fn raise(
        value: &mut f64,
        floor: f64,
        subject: String,
        unit: &str,
        than: &str,
        notes: &mut Vec<String>,
    ) {
        if *value < floor {
            notes.push(format!(
                "{subject} measured {:.2} {unit}, below {than} {:.2}: raised to it",
                *value / 1e9,
                floor / 1e9
            ));
            *value = floor;
        }
    }
    let mut notes = Vec::new();
    // Threads first: a level raised here must still pass the level order below.
    let most = c.compute.iter().map(|r| r.threads).max().unwrap_or(1);
    // Each unit of a precision on its own: AMX's one-thread peak is no floor for VNNI's.
    let fewer_peak = |c: &Ceilings, precision, via: &Option<String>, threads| {
        c.compute
            .iter()
            .filter(|r| r.precision == precision && r.via == *via && r.threads < threads)
            .map(|r| r.flops_per_s)
            .fold(0.0, f64::max)
    };
    for i in 0..c.compute.len() {
        let (precision, threads) = (c.compute[i].precision, c.compute[i].threads);
        if threads == most {
            let via = c.compute[i].via.clone();
            let floor = fewer_peak(c, precision, &via, threads);
            let subject = match &via {
                Some(unit) => format!("{precision} peak ({unit}) on {threads} threads"),
                None => format!("{precision} peak on {threads} threads"),
            };
            let value = &mut c.compute[i].flops_per_s;
            raise(
                value,
                floor,
                subject,
                &format!("G{}/s", precision.op()),
                "fewer threads'",
                &mut notes,
            );
        }
    }
    let most_bw = c.bandwidth.iter().map(|r| r.threads).max().unwrap_or(1);
    for i in 0..c.bandwidth.len() {
        let (level, threads) = (c.bandwidth[i].level, c.bandwidth[i].threads);
        if threads == most_bw {
            let floor = c
                .bandwidth
                .iter()
                .filter(|r| r.level == level && r.threads < threads)
                .map(|r| r.bytes_per_s)
                .fold(0.0, f64::max);
            let subject = format!("{level} on {threads} threads");
            let value = &mut c.bandwidth[i].bytes_per_s;
            raise(value, floor, subject, "GB/s", "fewer threads'", &mut notes);
        }
    }
    // Then each level at least as fast as the levels beyond it, per thread count.
    let mut counts: Vec<usize> = c.bandwidth.iter().map(|r| r.threads).collect();
    counts.sort_unstable();
    counts.dedup();
    for threads in counts {
        let mut outer_best: Option<(Level, f64)> = None;
        for level in [Level::Dram, Level::L3, Level::L2, Level::L1] {
            let Some(roof) = c
                .bandwidth
                .iter_mut()
                .find(|r| r.level == level && r.threads == threads)
            else {
                continue;
            };
            if let Some((outer, best)) = outer_best {
                let subject = format!("{level} on {threads} thread(s)");
                let than = format!("{outer}'s");
                raise(
                    &mut roof.bytes_per_s,
                    best,
                    subject,
                    "GB/s",
                    &than,
                    &mut notes,
                );
            }
            outer_best = Some((level, roof.bytes_per_s));
        }
    }
    c.notes.extend(notes);
}

/// The sizes worth measuring on one thread too: the middle of each level's range.
pub fn single_thread_sizes(caches: &[Cache], dram_bytes: u64) -> Vec<u64> {
    level_ranges(caches, 1)
        .iter()
        .map(|r| match r.up_to_bytes {
            Some(max) => (max / 4096).max(1) * 4096,
            None => dram_bytes,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(level: u32, kind: &str, kib: u64, shared: Option<usize>) -> Cache {
        Cache {
            level,
            kind: kind.into(),
            size_bytes: kib * 1024,
            shared_cpus: shared,
        }
    }

    /// A Cortex-A57 cluster like the Jetson Nano's: 32 KiB L1d per core, 2 MiB L2 for four.
    fn nano() -> Vec<Cache> {
        vec![
            cache(1, "Data", 32, Some(1)),
            cache(1, "Instruction", 48, Some(1)),
            cache(2, "Unified", 2048, Some(4)),
        ]
    }

    #[test]
    fn ranges_follow_the_per_thread_share_of_each_cache() {
        let r = level_ranges(&nano(), 4);
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].level, r[0].above_bytes, r[0].up_to_bytes),
            (Level::L1, 0, Some(16 << 10))
        );
        // L2: 2 MiB for 4 threads → 512 KiB each, half of it at most.
        assert_eq!(
            (r[1].level, r[1].above_bytes, r[1].up_to_bytes),
            (Level::L2, 32 << 10, Some(256 << 10))
        );
        // DRAM: at least 4 × 512 KiB, and never below 16 MiB.
        assert_eq!((r[2].level, r[2].up_to_bytes), (Level::Dram, None));
        assert!(r[2].contains(16 << 20) && !r[2].contains(8 << 20));
        // One thread owns the whole L2.
        let one = level_ranges(&nano(), 1);
        assert_eq!(one[1].up_to_bytes, Some(1 << 20));
        // No caches reported: only DRAM.
        assert_eq!(level_ranges(&[], 2).len(), 1);
    }

    #[test]
    fn sizes_not_positions_name_the_plateaus() {
        // A sweep that stops at 1 MiB per thread on a machine with 2 MiB of L2 per thread and a
        // 32 MiB L3: ERT would call its last plateau DRAM; by size it is L2, and DRAM is absent.
        let caches = vec![
            cache(1, "Data", 48, Some(1)),
            cache(2, "Unified", 2048, Some(1)),
            cache(3, "Unified", 32768, Some(2)),
        ];
        let point = |kib: u64, gbs: f64| SweepPoint {
            bytes_per_thread: kib * 1024,
            threads: 2,
            bytes_per_s: gbs * 1e9,
        };
        let sweep = [
            point(8, 300.0),
            point(16, 310.0),
            point(128, 150.0),
            point(1024, 140.0),
        ];
        let labels = label(&sweep, &level_ranges(&caches, 2), 2);
        assert_eq!(labels, vec![(Level::L1, 310e9), (Level::L2, 150e9)]);
    }

    #[test]
    fn dram_working_set_respects_memory() {
        let ranges = level_ranges(&nano(), 4);
        assert_eq!(dram_working_set(&ranges, 4, None), 16 << 20);
        // 128 MiB of memory, 4 threads: at most 8 MiB each.
        assert_eq!(dram_working_set(&ranges, 4, Some(128 << 20)), 8 << 20);
    }

    #[test]
    fn ceilings_are_held_monotone_and_say_so() {
        let bw = |level, threads, gbs: f64| BandwidthRoof {
            level,
            threads,
            bytes_per_s: gbs * 1e9,
        };
        let flat = |threads, gf: f64| ComputeRoof {
            precision: crate::roofline::Precision::Fp64,
            threads,
            flops_per_s: gf * 1e9,
            via: None,
        };
        let mut c = Ceilings {
            source: String::new(),
            compute: vec![flat(1, 40.0), flat(2, 38.0)],
            bandwidth: vec![
                bw(Level::L1, 2, 100.0),
                bw(Level::L2, 2, 60.0),
                bw(Level::L3, 2, 8.0),
                bw(Level::Dram, 2, 9.0),
                bw(Level::L1, 1, 120.0),
                bw(Level::Dram, 1, 7.0),
            ],
            sweep: Vec::new(),
            notes: Vec::new(),
            processor: crate::roofline::Processor::Cpu,
            gpu_sweep: Vec::new(),
            trials: Vec::new(),
            busy: Vec::new(),
        };
        make_monotone(&mut c);
        let get = |level, threads| {
            c.bandwidth
                .iter()
                .find(|r| r.level == level && r.threads == threads)
                .map(|r| r.bytes_per_s / 1e9)
        };
        assert_eq!(get(Level::L3, 2), Some(9.0));
        assert_eq!(get(Level::L1, 2), Some(120.0));
        assert_eq!(get(Level::L2, 2), Some(60.0));
        assert_eq!(c.compute[1].flops_per_s, 40e9);
        assert_eq!(c.notes.len(), 3, "{:?}", c.notes);
        // L1 ≥ L2 ≥ L3 ≥ DRAM and all-thread ≥ one-thread now hold.
        let order: Vec<f64> = [Level::L1, Level::L2, Level::L3, Level::Dram]
            .iter()
            .filter_map(|&l| get(l, 2))
            .collect();
        assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");
    }

    #[test]
    fn each_unit_of_a_precision_is_held_monotone_on_its_own() {
        use crate::roofline::Precision;
        let int8 = |via: &str, threads, gops: f64| ComputeRoof {
            precision: Precision::Int8,
            threads,
            flops_per_s: gops * 1e9,
            via: Some(via.to_string()),
        };
        let mut c = crate::roofline::test_ceilings();
        c.compute = vec![
            int8("AMX-INT8", 1, 3000.0),
            int8("AMX-INT8", 2, 2900.0),
            int8("AVX-512 VNNI", 1, 300.0),
            int8("AVX-512 VNNI", 2, 590.0),
        ];
        c.notes.clear();
        make_monotone(&mut c);
        let rates: Vec<f64> = c.compute.iter().map(|r| r.flops_per_s / 1e9).collect();
        // AMX's two threads raised to its one; VNNI's not raised to AMX's one thread.
        assert_eq!(rates, [3000.0, 3000.0, 300.0, 590.0]);
        assert_eq!(
            c.notes,
            [
                "int8 peak (AMX-INT8) on 2 threads measured 2900.00 GOP/s, below fewer threads' \
              3000.00: raised to it"
            ]
        );
    }
}

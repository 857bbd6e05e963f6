//! The ceilings as text: the roofs by thread count, the ridge points, how far to trust them
//! (trial spread, busy figures, corrections) and the sweeps behind them.

use super::*;

use edgeprof::report::text::{gbytes, ops_rate};

/// The ceilings as a table: compute and bandwidth roofs by thread count, and ridge points.
pub fn ceilings_text(c: &Ceilings, caches: &[device::Cache]) -> String {
    let mut counts: Vec<usize> = c
        .compute
        .iter()
        .map(|r| r.threads)
        .chain(c.bandwidth.iter().map(|r| r.threads))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    let mut header = vec!["roof".to_string()];
    header.extend(counts.iter().map(|n| match c.processor {
        Processor::Cpu => format!("{n} thread(s)"),
        Processor::Gpu => format!("GPU ({n} threads)"),
    }));
    let mut rows = Vec::new();
    // A row per precision and unit, in the order of `Precision::ALL` then as measured.
    let mut roofs: Vec<(Precision, Option<&str>)> = Vec::new();
    for precision in Precision::ALL {
        for r in c.compute.iter().filter(|r| r.precision == precision) {
            if !roofs.contains(&(precision, r.via.as_deref())) {
                roofs.push((precision, r.via.as_deref()));
            }
        }
    }
    for (precision, via) in roofs {
        let cells: Vec<String> = counts
            .iter()
            .map(|&n| {
                c.compute
                    .iter()
                    .find(|r| r.precision == precision && r.threads == n && r.via.as_deref() == via)
                    .map_or("-".to_string(), |r| ops_rate(r.flops_per_s, precision))
            })
            .collect();
        let mut row = vec![match via {
            Some(unit) => format!("{precision} peak ({unit})"),
            None => format!("{precision} peak"),
        }];
        row.extend(cells);
        rows.push(row);
    }
    let all = counts.last().copied().unwrap_or(1);
    // The CPU's levels are named by its cache sizes; a GPU's by the microbenchmark (notes).
    let ranges = match c.processor {
        Processor::Cpu => levels::level_ranges(caches, all),
        Processor::Gpu => Vec::new(),
    };
    for level in [Level::L1, Level::L2, Level::L3, Level::Dram] {
        let cells: Vec<String> = counts
            .iter()
            .map(|&n| {
                c.bandwidth
                    .iter()
                    .find(|r| r.level == level && r.threads == n)
                    .map_or("-".to_string(), |r| gbytes(r.bytes_per_s))
            })
            .collect();
        if cells.iter().any(|x| x != "-") {
            let range = ranges
                .iter()
                .find(|r| r.level == level)
                .map(|r| match r.up_to_bytes {
                    Some(max) => format!(" (≤ {} per thread)", render::bytes(max)),
                    None => format!(" (> {} per thread)", render::bytes(r.above_bytes)),
                });
            let mut row = vec![format!("{level} bandwidth{}", range.unwrap_or_default())];
            row.extend(cells);
            rows.push(row);
        }
    }
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut right = vec![false];
    right.extend(counts.iter().map(|_| true));
    let mut out = render::table(&header_refs, &right, &rows);
    // Every precision's ridge points: fp64 is ERT's, fp32 what most models run in.
    out.push('\n');
    for precision in Precision::ALL {
        let Some(peak) = c.peak(precision) else {
            continue;
        };
        let ridges: Vec<String> = [Level::L1, Level::L2, Level::L3, Level::Dram]
            .iter()
            .filter_map(|&l| {
                c.bandwidth(l)
                    .map(|bw| format!("{l} {:.2}", edgeprof::roofline::ridge(peak, bw)))
            })
            .collect();
        if !ridges.is_empty() {
            let _ = writeln!(
                out,
                "{precision} ridge points ({}/byte): {}",
                precision.op(),
                ridges.join(", ")
            );
        }
    }
    out
}

/// How far to trust measured ceilings: the spread of each figure's trials (the figure is the
/// best), what other processes disturbed, and every correction made to the figures.
pub fn trust_text(c: &Ceilings) -> String {
    let mut out = String::new();
    if !c.trials.is_empty() {
        let widest = c
            .trials
            .iter()
            .max_by(|a, b| a.spread().total_cmp(&b.spread()));
        let median = {
            let mut s: Vec<f64> = c.trials.iter().map(|t| t.spread()).collect();
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        };
        if let Some(w) = widest {
            let _ = writeln!(
                out,
                "trials: each figure is the best of its trials; they were {:.1} % apart at the \
                 median, {:.1} % at the widest ({}, {} trials)",
                100.0 * median,
                100.0 * w.spread(),
                w.what,
                w.count
            );
        }
        let unsteady: Vec<String> = c
            .trials
            .iter()
            .filter(|t| t.spread() > UNSTEADY)
            .map(|t| format!("{} {:.0} %", t.what, 100.0 * t.spread()))
            .collect();
        if !unsteady.is_empty() {
            let shown = unsteady.len().min(3);
            let more = match unsteady.len() - shown {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            let _ = writeln!(
                out,
                "unsteady: trials more than {:.0} % apart in {}{more}: measure again on a \
                 quieter machine, or with --thorough",
                100.0 * UNSTEADY,
                unsteady[..shown].join("; ")
            );
        }
    }
    match c.busy.len() {
        0 => {}
        n if n <= 3 => {
            for b in &c.busy {
                let _ = writeln!(out, "busy: {b}");
            }
        }
        n => {
            let _ = writeln!(
                out,
                "busy: other processes took CPU during {n} of {} figures (the first: {}); the \
                 ceilings may be low: stop them and measure again (each figure in --json)",
                c.trials.len().max(n),
                c.busy[0]
            );
        }
    }
    for note in &c.notes {
        let _ = writeln!(out, "corrected: {note}");
    }
    out
}

/// Trials further apart than this (relative to the best) are called unsteady.
const UNSTEADY: f64 = 0.10;

/// The GPU microbenchmark's sweep: working set, load path, blocks, bandwidth.
fn gpu_sweep_text(c: &Ceilings) -> String {
    use edgeprof::collect::gpubench::LoadPath;
    let rows: Vec<Vec<String>> = c
        .gpu_sweep
        .iter()
        .map(|p| {
            vec![
                render::bytes(p.bytes),
                match p.path {
                    LoadPath::ThroughL1 => "through L1".to_string(),
                    LoadPath::BypassL1 => "around L1 (L2, DRAM)".to_string(),
                },
                p.blocks.to_string(),
                gbytes(p.bytes_per_s),
            ]
        })
        .collect();
    render::table(
        &["working set", "loads", "blocks", "load bandwidth"],
        &[true, false, true, true],
        &rows,
    )
}

/// The sweep as a table of working set → bandwidth, with the level each size exercises.
pub fn sweep_text(c: &Ceilings, caches: &[device::Cache]) -> String {
    if c.processor == Processor::Gpu {
        return gpu_sweep_text(c);
    }
    let mut rows = Vec::new();
    for p in &c.sweep {
        let level = levels::level_ranges(caches, p.threads)
            .iter()
            .find(|r| r.contains(p.bytes_per_thread))
            .map_or("(between levels)".to_string(), |r| r.level.to_string());
        rows.push(vec![
            render::bytes(p.bytes_per_thread),
            p.threads.to_string(),
            gbytes(p.bytes_per_s),
            level,
        ]);
    }
    render::table(
        &[
            "working set per thread",
            "threads",
            "load bandwidth",
            "level",
        ],
        &[true, true, true, false],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgeprof::collect::ceilings::Trials;

    fn trials(what: &str, best: f64, worst: f64) -> Trials {
        Trials {
            what: what.to_string(),
            best,
            worst,
            count: 3,
        }
    }

    #[test]
    fn ceilings_say_their_spread_what_was_busy_and_every_correction() {
        use edgeprof::roofline::{BandwidthRoof, ComputeRoof};
        let mut c = Ceilings {
            source: "test".into(),
            compute: [(Precision::Fp64, 10e9), (Precision::Fp32, 20e9)]
                .map(|(precision, flops_per_s)| ComputeRoof {
                    precision,
                    threads: 1,
                    flops_per_s,
                    via: None,
                })
                .to_vec(),
            bandwidth: vec![BandwidthRoof {
                level: Level::L1,
                threads: 1,
                bytes_per_s: 40e9,
            }],
            sweep: Vec::new(),
            notes: Vec::new(),
            processor: Processor::Cpu,
            gpu_sweep: Vec::new(),
            trials: Vec::new(),
            busy: Vec::new(),
        };
        c.trials = vec![
            trials("fp64 peak, 1 thread(s)", 10.0, 9.9),
            trials("fp32 peak, 1 thread(s)", 20.0, 15.0),
            trials("bandwidth, 4 KiB per thread × 2", 8.0, 7.8),
        ];
        c.busy = vec!["fp32 peak, 1 thread(s): other processes took 95 % of a core".into()];
        c.notes =
            vec!["L2 on 1 thread(s) measured 0.70 GB/s, below L3's 0.80: raised to it".into()];
        let text = trust_text(&c);
        assert!(
            text.contains("2.5 % apart at the median, 25.0 % at the widest (fp32 peak, 1 thread(s), 3 trials)"),
            "{text}"
        );
        assert!(
            text.contains("unsteady: trials more than 10 % apart in fp32 peak, 1 thread(s) 25 %"),
            "{text}"
        );
        assert!(
            text.contains("busy: fp32 peak, 1 thread(s): other processes took 95 %"),
            "{text}"
        );
        assert!(
            text.contains("corrected: L2 on 1 thread(s) measured 0.70 GB/s"),
            "{text}"
        );
        // Ridge points for every precision with a peak, fp32 beside fp64.
        let table = ceilings_text(&c, &[]);
        assert!(table.contains("fp64 ridge points (FLOP/byte):"), "{table}");
        assert!(table.contains("fp32 ridge points (FLOP/byte):"), "{table}");
    }

    #[test]
    fn narrow_precisions_have_a_row_per_unit_counted_in_their_own_unit() {
        use edgeprof::roofline::ComputeRoof;
        let roof = |precision, via: Option<&str>, rate: f64| ComputeRoof {
            precision,
            threads: 1,
            flops_per_s: rate,
            via: via.map(str::to_string),
        };
        let c = Ceilings {
            source: "test".into(),
            compute: vec![
                roof(Precision::Fp32, None, 100e9),
                roof(Precision::Int8, Some("AMX-INT8"), 3.5e12),
                roof(Precision::Int8, Some("AVX-512 VNNI"), 0.3e12),
                roof(Precision::Bf16, Some("AMX-BF16"), 1.6e12),
            ],
            bandwidth: vec![edgeprof::roofline::BandwidthRoof {
                level: Level::L1,
                threads: 1,
                bytes_per_s: 400e9,
            }],
            sweep: Vec::new(),
            notes: Vec::new(),
            processor: Processor::Cpu,
            gpu_sweep: Vec::new(),
            trials: Vec::new(),
            busy: Vec::new(),
        };
        let table = ceilings_text(&c, &[]);
        let row = |name: &str| {
            table
                .lines()
                .find(|l| l.starts_with(name))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        };
        assert_eq!(
            row("int8 peak (AMX-INT8)").as_deref(),
            Some("int8 peak (AMX-INT8) 3500.0 GOP/s")
        );
        assert_eq!(
            row("int8 peak (AVX-512 VNNI)").as_deref(),
            Some("int8 peak (AVX-512 VNNI) 300.0 GOP/s")
        );
        assert_eq!(
            row("bf16 peak (AMX-BF16)").as_deref(),
            Some("bf16 peak (AMX-BF16) 1600.0 GFLOP/s")
        );
        // The ridge is the best unit's: 3.5 TOP/s over L1's 400 GB/s.
        assert!(
            table.contains("int8 ridge points (OP/byte): L1 8.75\n"),
            "{table}"
        );
    }
}

//! GPU ceilings from the CUDA microbenchmark (`collect::gpubench`): the FMA peaks as flat roofs
//! and the sweep's plateaus as slanted ones. Levels are named by where each working set lives:
//! - L1: loads through L1 with at most one L1 of data per multiprocessor, or shared-memory
//!   reads (the same SRAM), whichever is faster;
//! - L2: loads that bypass L1 with at most half the L2 in use;
//! - DRAM: loads that bypass L1 over at least 4 × the L2.
//!
//! Each roof is the best point of its range (roofs are upper bounds). The theoretical figures
//! from the driver's clocks are kept as notes beside the measured ones.

use crate::collect::gpubench::{GpuMeasurement, LoadPath};
use crate::roofline::{BandwidthRoof, Ceilings, ComputeRoof, Level, Processor};

fn best(m: &GpuMeasurement, path: LoadPath, keep: impl Fn(u64) -> bool) -> Option<f64> {
    m.sweep
        .iter()
        .filter(|p| p.path == path && keep(p.bytes) && p.bytes_per_s.is_finite())
        .map(|p| p.bytes_per_s)
        .max_by(f64::total_cmp)
}

fn rate(v: f64, unit: &str) -> String {
    if v >= 1e12 {
        format!("{:.2} T{unit}", v / 1e12)
    } else {
        format!("{:.1} G{unit}", v / 1e9)
    }
}

/// The ceilings a measurement gives, with `source` saying where they came from.
pub fn ceilings(m: &GpuMeasurement, source: String) -> Ceilings {
    let info = &m.info;
    let threads = (info.multiprocessors * info.max_threads_per_sm) as usize;
    let sms = u64::from(info.multiprocessors.max(1));
    let mut notes = Vec::new();
    let compute: Vec<ComputeRoof> = m
        .peaks
        .iter()
        .filter(|p| p.flops_per_s.is_finite() && p.flops_per_s > 0.0)
        .map(|p| ComputeRoof {
            precision: p.precision,
            threads,
            flops_per_s: p.flops_per_s,
            // The unit where the precision has several; a measurement from before the
            // tensor-core kernels had only one int8 peak, dp4a's.
            via: p.via.clone().or_else(|| {
                (p.precision == crate::roofline::Precision::Int8).then(|| "dp4a".to_string())
            }),
        })
        .collect();
    let fp32 = m
        .peaks
        .iter()
        .find(|p| p.precision == crate::roofline::Precision::Fp32);
    if let (Some(p), Some(theory)) = (fp32, info.theoretical_fp32()) {
        notes.push(format!(
            "fp32 peak {} = {:.0} % of the {} that {} lanes × {} multiprocessors × 2 × {:.2} GHz give",
            rate(p.flops_per_s, "FLOP/s"),
            100.0 * p.flops_per_s / theory,
            rate(theory, "FLOP/s"),
            info.fp32_lanes_per_sm().unwrap_or(0),
            info.multiprocessors,
            info.clock_khz.unwrap_or(0) as f64 / 1e6
        ));
    }
    let mut bandwidth = Vec::new();
    let l1_loads = best(m, LoadPath::ThroughL1, |b| {
        b / sms <= info.l1_bytes_per_sm()
    });
    let l1 = match (l1_loads, m.shared_bytes_per_s) {
        (Some(loads), Some(shared)) => {
            notes.push(format!(
                "L1 roof from {}: loads through L1 {}, shared-memory reads {}",
                if shared > loads {
                    "shared-memory reads"
                } else {
                    "loads through L1"
                },
                rate(loads, "B/s"),
                rate(shared, "B/s")
            ));
            Some(loads.max(shared))
        }
        (a, b) => a.or(b),
    };
    let l2 = best(m, LoadPath::BypassL1, |b| b <= info.l2_bytes / 2);
    let dram = best(m, LoadPath::BypassL1, |b| b >= 4 * info.l2_bytes);
    for (level, value, why) in [
        (
            Level::L1,
            l1,
            "no working set small enough for L1 was measured",
        ),
        (
            Level::L2,
            l2,
            "no working set between the multiprocessors' share and half the L2 was measured",
        ),
        (
            Level::Dram,
            dram,
            "no working set of at least 4 × the L2 fitted in the free memory",
        ),
    ] {
        match value {
            Some(bytes_per_s) => bandwidth.push(BandwidthRoof {
                level,
                threads,
                bytes_per_s,
            }),
            None => notes.push(format!("no {level} roof: {why}")),
        }
    }
    if let (Some(d), Some(theory)) = (dram, info.theoretical_dram()) {
        notes.push(format!(
            "DRAM {} = {:.0} % of the {} from the driver's memory clock and bus width{}",
            rate(d, "B/s"),
            100.0 * d / theory,
            rate(theory, "B/s"),
            if info.integrated {
                " (integrated GPU: the driver's memory clock may not be the EMC's)"
            } else {
                ""
            }
        ));
    }
    notes.extend(m.skipped.iter().cloned());
    Ceilings {
        source,
        compute,
        bandwidth,
        sweep: Vec::new(),
        notes,
        processor: Processor::Gpu,
        gpu_sweep: m.sweep.clone(),
        trials: Vec::new(),
        busy: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::gpubench::{tests::orin, GpuPeak, GpuSweepPoint};
    use crate::roofline::Precision;

    /// A sweep shaped like a real one: high through L1 while the data fits, L2 plateau, DRAM
    /// plateau, with the small sizes latency-limited.
    fn measurement() -> GpuMeasurement {
        let info = orin();
        let mut sweep = Vec::new();
        let mut bytes = 16 * 16 * 1024u64;
        while bytes <= 256 << 20 {
            let per_sm = bytes / 16;
            let through = if per_sm <= 196 << 10 { 1.9e12 } else { 0.6e12 };
            let around = if bytes <= 2 << 20 {
                0.6e12
            } else if bytes < 16 << 20 {
                0.3e12
            } else {
                0.18e12
            };
            // The smallest sizes run one block per multiprocessor: latency-bound.
            let scale = if bytes < 1 << 20 { 0.5 } else { 1.0 };
            sweep.push(GpuSweepPoint {
                path: LoadPath::ThroughL1,
                bytes,
                blocks: 16,
                bytes_per_s: through * scale,
            });
            sweep.push(GpuSweepPoint {
                path: LoadPath::BypassL1,
                bytes,
                blocks: 16,
                bytes_per_s: around * scale,
            });
            bytes *= 2;
        }
        GpuMeasurement {
            info,
            peaks: vec![
                GpuPeak {
                    precision: Precision::Fp32,
                    flops_per_s: 4.8e12,
                    blocks: 96,
                    via: None,
                },
                GpuPeak {
                    precision: Precision::Fp64,
                    flops_per_s: 0.08e12,
                    blocks: 96,
                    via: None,
                },
            ],
            shared_bytes_per_s: Some(2.5e12),
            sweep,
            skipped: vec!["fp16 peak: test".into()],
            seconds: 3.0,
        }
    }

    #[test]
    fn plateaus_become_roofs_per_level() {
        let c = ceilings(&measurement(), "test".into());
        assert_eq!(c.processor, Processor::Gpu);
        assert_eq!(c.peak(Precision::Fp32), Some(4.8e12));
        assert_eq!(c.peak(Precision::Fp16), None);
        // Shared memory beats loads through L1: it sets the L1 roof.
        assert_eq!(c.bandwidth(Level::L1), Some(2.5e12));
        assert_eq!(c.bandwidth(Level::L2), Some(0.6e12));
        assert_eq!(c.bandwidth(Level::Dram), Some(0.18e12));
        assert!(c.bandwidth(Level::L1) >= c.bandwidth(Level::L2));
        let notes = c.notes.join("\n");
        assert!(
            notes.contains("L1 roof from shared-memory reads"),
            "{notes}"
        );
        assert!(
            notes.contains("fp32 peak 4.80 TFLOP/s = 90 % of the 5.33 TFLOP/s"),
            "{notes}"
        );
        assert!(
            notes.contains("DRAM 180.0 GB/s = 88 % of the 204.7 GB/s"),
            "{notes}"
        );
        assert!(notes.contains("integrated GPU"), "{notes}");
        assert!(notes.contains("fp16 peak: test"), "{notes}");
        assert_eq!(c.gpu_sweep.len(), measurement().sweep.len());
    }

    #[test]
    fn the_dp4a_peak_is_the_int8_roof_in_ops() {
        let mut m = measurement();
        // As stored before the tensor-core kernels: no unit named.
        m.peaks.push(GpuPeak {
            precision: Precision::Int8,
            flops_per_s: 19.2e12,
            blocks: 96,
            via: None,
        });
        let c = ceilings(&m, "test".into());
        assert_eq!(c.peak(Precision::Int8), Some(19.2e12));
        let roof = c.compute.iter().find(|r| r.precision == Precision::Int8);
        assert_eq!(roof.and_then(|r| r.via.as_deref()), Some("dp4a"));
        // The float roofs say nothing of a unit.
        assert!(c
            .compute
            .iter()
            .filter(|r| r.precision != Precision::Int8)
            .all(|r| r.via.is_none()));
    }

    #[test]
    fn the_tensor_cores_give_their_own_roofs_above_the_cuda_cores() {
        let mut m = measurement();
        for (precision, flops_per_s, via) in [
            (Precision::Int8, 19.2e12, "dp4a"),
            (Precision::Int8, 85.0e12, "tensor cores"),
            (Precision::Fp16, 42.0e12, "tensor cores"),
        ] {
            m.peaks.push(GpuPeak {
                precision,
                flops_per_s,
                blocks: 96,
                via: Some(via.to_string()),
            });
        }
        let c = ceilings(&m, "test".into());
        let units: Vec<(Precision, Option<&str>)> = c
            .compute
            .iter()
            .map(|r| (r.precision, r.via.as_deref()))
            .collect();
        assert_eq!(
            units,
            [
                (Precision::Fp32, None),
                (Precision::Fp64, None),
                (Precision::Int8, Some("dp4a")),
                (Precision::Int8, Some("tensor cores")),
                (Precision::Fp16, Some("tensor cores")),
            ]
        );
        // A condition of a precision is placed under its highest roof.
        assert_eq!(c.peak(Precision::Int8), Some(85.0e12));
        assert_eq!(c.peak(Precision::Fp16), Some(42.0e12));
    }

    #[test]
    fn a_level_without_points_is_left_out_and_said() {
        let mut m = measurement();
        m.sweep.retain(|p| p.bytes < 8 << 20);
        m.shared_bytes_per_s = None;
        let c = ceilings(&m, "test".into());
        assert_eq!(c.bandwidth(Level::Dram), None);
        assert_eq!(c.bandwidth(Level::L1), Some(1.9e12));
        assert!(
            c.notes.iter().any(|n| n.starts_with("no DRAM roof")),
            "{:?}",
            c.notes
        );
    }
}

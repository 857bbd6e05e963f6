//! What to optimise next, from one program's point against the ceilings.
//!
//! For each memory level with a known bandwidth and intensity I: the roof there is
//! min(peak, bw × I); the point is bandwidth-bound when I is left of the ridge (I < peak / bw),
//! compute-bound otherwise; its headroom is roof / achieved. The binding level is the one whose
//! roof is lowest at its intensity. Ordering of the steps:
//! - bandwidth-bound and near the bandwidth roof (achieved ≥ [`NEAR_ROOF`] × roof): the FLOP rate
//!   cannot rise until the point moves right, so raise intensity first, then the compute rate;
//! - bandwidth-bound and far below the roof: both directions have headroom; they are ranked by
//!   potential gain — up (roof / achieved) against right (peak / roof);
//! - compute-bound: raise compute efficiency (peak / achieved), or, when already near the peak,
//!   only doing less work helps.
//!
//! Layers are ranked by share of the time × headroom, so the first is where effort pays most.

use crate::roofline::{attainable, ridge, Ceilings, Level, PointSource, Processor, Program};
use serde::Serialize;

/// Within this fraction of a roof, a point is near it.
pub const NEAR_ROOF: f64 = 0.8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    BandwidthBound,
    ComputeBound,
}

/// A program seen from one memory level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelView {
    pub level: Level,
    pub intensity: f64,
    pub ridge: f64,
    pub region: Region,
    /// min(peak, bandwidth × intensity).
    pub roof_flops_per_s: f64,
    /// roof / achieved (1 = on the roof).
    pub headroom: f64,
}

/// The measurements a hint rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Basis {
    pub ceilings: String,
    pub counts: PointSource,
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rests on: ceilings {}; FLOPs and bytes from the {}; time = {}",
            self.ceilings,
            self.counts,
            match self.counts.processor() {
                Processor::Gpu => "kernel-active time",
                Processor::Cpu => "median latency",
            }
        )
    }
}

/// One step of advice. Display says what to do.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "hint", rename_all = "snake_case")]
pub enum Hint {
    /// Move right: more FLOPs per byte moved at `level`.
    RaiseIntensity {
        level: Level,
        intensity: f64,
        ridge: f64,
        /// peak / roof: what reaching the ridge would allow.
        gain: f64,
        basis: Basis,
    },
    /// Move up to the roof at the current intensity.
    RaiseComputeRate {
        level: Level,
        /// roof / achieved.
        gain: f64,
        basis: Basis,
    },
    /// Compute-bound below the peak.
    RaiseComputeEfficiency {
        /// peak / achieved.
        gain: f64,
        basis: Basis,
    },
    /// Compute-bound at the peak: only less work helps.
    AtPeak { fraction: f64, basis: Basis },
}

impl Hint {
    /// The measurements this step rests on.
    pub fn basis(&self) -> &Basis {
        match self {
            Hint::RaiseIntensity { basis, .. }
            | Hint::RaiseComputeRate { basis, .. }
            | Hint::RaiseComputeEfficiency { basis, .. }
            | Hint::AtPeak { basis, .. } => basis,
        }
    }

    /// What to do, without what it rests on (for a list of steps that says that once).
    pub fn advice(&self) -> String {
        let text = self.to_string();
        let basis = format!(" ({})", self.basis());
        text.strip_suffix(&basis).unwrap_or(&text).to_string()
    }

    /// The speed-up this step could give at most.
    pub fn gain(&self) -> f64 {
        match self {
            Hint::RaiseIntensity { gain, .. }
            | Hint::RaiseComputeRate { gain, .. }
            | Hint::RaiseComputeEfficiency { gain, .. } => *gain,
            Hint::AtPeak { .. } => 1.0,
        }
    }
}

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hint::RaiseIntensity {
                level,
                intensity,
                ridge,
                gain,
                basis,
            } => write!(
                f,
                "Raise arithmetic intensity at {level} (now {intensity:.2} FLOP/byte, ridge at {ridge:.2}): \
                 cut the traffic there — {}; up to {gain:.1}× before the compute roof ({basis})",
                match basis.counts.processor() {
                    Processor::Cpu => "fuse layers, tile for reuse in the level above, use a smaller \
                                       data type or a larger batch",
                    Processor::Gpu => "fuse kernels, tile for reuse in shared memory and registers, \
                                       use a smaller data type or a larger batch",
                }
            ),
            Hint::RaiseComputeRate { level, gain, basis } => write!(
                f,
                "Raise the FLOP rate toward the {level} bandwidth roof: {}; up to {gain:.1}× at this \
                 intensity ({basis})",
                match basis.counts.processor() {
                    Processor::Cpu => "more threads, vectorised kernels, fewer stalls and overheads \
                                       between operators",
                    Processor::Gpu => "more parallel work per launch (occupancy), coalesced \
                                       accesses, fewer launches and host gaps between kernels",
                }
            ),
            Hint::RaiseComputeEfficiency { gain, basis } => write!(
                f,
                "Compute-bound: raise compute efficiency — {}; up to {gain:.1}× to the peak ({basis})",
                match basis.counts.processor() {
                    Processor::Cpu => "use the widest SIMD and every core, a better-tuned kernel \
                                       library, fewer non-FLOP instructions",
                    Processor::Gpu => "use tensor cores or packed half2 math, a better-tuned kernel \
                                       library, fewer non-FLOP instructions, more independent work \
                                       per thread",
                }
            ),
            Hint::AtPeak { fraction, basis } => write!(
                f,
                "At {:.0} % of the peak FLOP rate: only less work helps — a cheaper model, pruning, or \
                 a precision with a higher peak ({basis})",
                100.0 * fraction
            ),
        }
    }
}

/// A program's analysis against the ceilings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub program: String,
    pub achieved_flops_per_s: f64,
    pub peak_flops_per_s: f64,
    pub levels: Vec<LevelView>,
    /// The level whose roof is lowest at its intensity.
    pub binding: Level,
    /// Ordered: do the first first.
    pub steps: Vec<Hint>,
}

/// Why a program cannot be analysed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdviceError {
    #[error("no {0} compute roof in the ceilings")]
    MissingPeak(crate::roofline::Precision),
    #[error("the program has no positive time or FLOP count")]
    ZeroRate,
    #[error("no memory level has both a measured bandwidth and the program's traffic")]
    NoCommonLevel,
    #[error(
        "a {program} program cannot be judged against {ceilings} ceilings: give the {program}'s \
         ceilings"
    )]
    ProcessorMismatch {
        program: Processor,
        ceilings: Processor,
    },
}

/// Places `program` against `ceilings` and orders the steps (see the module documentation).
pub fn analyse(program: &Program, ceilings: &Ceilings) -> Result<Analysis, AdviceError> {
    if program.source.processor() != ceilings.processor {
        return Err(AdviceError::ProcessorMismatch {
            program: program.source.processor(),
            ceilings: ceilings.processor,
        });
    }
    let peak = ceilings
        .peak(program.precision)
        .ok_or(AdviceError::MissingPeak(program.precision))?;
    let achieved = program
        .flops_per_s()
        .filter(|r| *r > 0.0)
        .ok_or(AdviceError::ZeroRate)?;
    let mut levels: Vec<LevelView> = program
        .traffic
        .iter()
        .filter_map(|&(level, _)| {
            let bw = ceilings.bandwidth(level)?;
            let intensity = program.intensity(level)?;
            let roof = attainable(peak, bw, intensity);
            let ridge = ridge(peak, bw);
            Some(LevelView {
                level,
                intensity,
                ridge,
                region: if intensity < ridge {
                    Region::BandwidthBound
                } else {
                    Region::ComputeBound
                },
                roof_flops_per_s: roof,
                headroom: roof / achieved,
            })
        })
        .collect();
    levels.sort_by_key(|l| l.level);
    let binding = levels
        .iter()
        .min_by(|a, b| a.roof_flops_per_s.total_cmp(&b.roof_flops_per_s))
        .ok_or(AdviceError::NoCommonLevel)?
        .clone();
    let basis = Basis {
        ceilings: ceilings.source.clone(),
        counts: program.source.clone(),
    };
    let roof = binding.roof_flops_per_s;
    let steps = match binding.region {
        Region::BandwidthBound => {
            let right = Hint::RaiseIntensity {
                level: binding.level,
                intensity: binding.intensity,
                ridge: binding.ridge,
                gain: peak / roof,
                basis: basis.clone(),
            };
            let up = Hint::RaiseComputeRate {
                level: binding.level,
                gain: roof / achieved,
                basis,
            };
            if achieved >= NEAR_ROOF * roof || right.gain() >= up.gain() {
                vec![right, up]
            } else {
                vec![up, right]
            }
        }
        Region::ComputeBound if achieved >= NEAR_ROOF * peak => vec![Hint::AtPeak {
            fraction: achieved / peak,
            basis,
        }],
        Region::ComputeBound => vec![Hint::RaiseComputeEfficiency {
            gain: peak / achieved,
            basis,
        }],
    };
    Ok(Analysis {
        program: program.label.clone(),
        achieved_flops_per_s: achieved,
        peak_flops_per_s: peak,
        binding: binding.level,
        levels,
        steps,
    })
}

/// A layer's place in the optimisation order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerRank {
    pub label: String,
    /// Of the layers' summed time.
    pub time_share: f64,
    /// Roof at the binding level / achieved.
    pub headroom: f64,
    /// The most of the end-to-end time that bringing this layer to its roof can save (Amdahl):
    /// time_share × (1 − 1/headroom). A layer with share s never saves more than s.
    pub saving: f64,
    /// What the ranking sorts by: the saving.
    pub score: f64,
}

/// Ranks layers by the end-to-end time they can save, time share × (1 − 1/headroom), largest
/// first; layers that cannot be analysed are left out.
pub fn rank_layers(layers: &[Program], ceilings: &Ceilings) -> Vec<LayerRank> {
    let total: f64 = layers.iter().map(|l| l.seconds.max(0.0)).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut ranks: Vec<LayerRank> = layers
        .iter()
        .filter_map(|layer| {
            let a = analyse(layer, ceilings).ok()?;
            let headroom = a
                .levels
                .iter()
                .find(|l| l.level == a.binding)
                .map(|l| l.headroom)?;
            let time_share = layer.seconds / total;
            // A layer already above its roof (a measurement below the clock's resolution,
            // a roof measured low) can save nothing.
            let saving = time_share * (1.0 - 1.0 / headroom.max(1.0));
            Some(LayerRank {
                label: layer.label.clone(),
                time_share,
                headroom,
                saving,
                score: saving,
            })
        })
        .collect();
    ranks.sort_by(|a, b| b.score.total_cmp(&a.score));
    ranks
}

/// How often the top layer stays on top when the profiled runs are resampled (with
/// replacement, the same runs for every layer, `rounds` times): 1.0 is a ranking that holds
/// still. `runs_s` gives each program's seconds per run. None with fewer than two runs.
pub fn top_stability(
    programs: &[Program],
    runs_s: &[Vec<f64>],
    ceilings: &Ceilings,
    rounds: usize,
) -> Option<f64> {
    use rand::Rng;
    let top = rank_layers(programs, ceilings).first()?.label.clone();
    let runs = runs_s.iter().map(Vec::len).min()?;
    if runs < 2 || runs_s.len() != programs.len() {
        return None;
    }
    let mut rng = crate::stats::bootstrap_rng();
    let mut kept = 0;
    let mut resampled = programs.to_vec();
    for _ in 0..rounds.max(1) {
        let picks: Vec<usize> = (0..runs).map(|_| rng.random_range(0..runs)).collect();
        for (p, times) in resampled.iter_mut().zip(runs_s) {
            let drawn: Vec<f64> = picks.iter().map(|&i| times[i]).collect();
            p.seconds = crate::stats::median(&drawn).unwrap_or(p.seconds);
        }
        if rank_layers(&resampled, ceilings)
            .first()
            .is_some_and(|r| r.label == top)
        {
            kept += 1;
        }
    }
    Some(kept as f64 / rounds.max(1) as f64)
}

/// Below this share of resamples keeping the top layer on top, the ranking is called unstable.
pub const STABLE_TOP: f64 = 0.8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roofline::Precision;

    fn ceilings() -> Ceilings {
        crate::roofline::test_ceilings()
    }

    /// A program doing `gflop` GFLOP in `seconds`, moving the given GB per level.
    fn program(gflop: f64, seconds: f64, traffic: &[(Level, f64)]) -> Program {
        Program {
            label: "p".into(),
            precision: Precision::Fp32,
            flops: gflop * 1e9,
            seconds,
            traffic: traffic.iter().map(|&(l, gb)| (l, gb * 1e9)).collect(),
            source: PointSource::Analytic,
            basis: Vec::new(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn gpu_programs_get_gpu_advice_and_never_cpu_ceilings() {
        let mut p = program(1.0, 0.1, &[(Level::Dram, 2.0)]);
        p.source = PointSource::GpuCounters;
        let cpu = ceilings();
        assert_eq!(
            analyse(&p, &cpu),
            Err(AdviceError::ProcessorMismatch {
                program: Processor::Gpu,
                ceilings: Processor::Cpu
            })
        );
        let mut gpu = cpu.clone();
        gpu.processor = Processor::Gpu;
        let cpu_program = program(1.0, 0.1, &[(Level::Dram, 2.0)]);
        assert!(matches!(
            analyse(&cpu_program, &gpu),
            Err(AdviceError::ProcessorMismatch { .. })
        ));
        let a = match analyse(&p, &gpu) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        let text: Vec<String> = a.steps.iter().map(|s| s.to_string()).collect();
        let text = text.join("\n");
        assert!(text.contains("time = kernel-active time"), "{text}");
        assert!(
            text.contains("fuse kernels, tile for reuse in shared memory"),
            "{text}"
        );
        assert!(!text.contains("median latency"), "{text}");
        // The same point as a CPU program gets the CPU's words, and the same numbers.
        let b = match analyse(&cpu_program, &cpu) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(a.levels, b.levels);
        assert!(b.steps[0].to_string().contains("fuse layers"));
    }

    #[test]
    fn bandwidth_bound_near_its_roof_raises_intensity_first() {
        // DRAM intensity 2 FLOP/byte → roof 20 GFLOP/s; achieved 18 (90 % of the roof).
        // L1 intensity 0.5 → roof 100 (compute); the DRAM roof binds.
        let a = match analyse(
            &program(18.0, 1.0, &[(Level::L1, 36.0), (Level::Dram, 9.0)]),
            &ceilings(),
        ) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(a.binding, Level::Dram);
        let dram = &a.levels[1];
        assert_eq!(dram.region, Region::BandwidthBound);
        assert!(close(dram.intensity, 2.0) && close(dram.ridge, 10.0));
        assert!(close(dram.roof_flops_per_s, 20e9));
        assert!(close(dram.headroom, 20.0 / 18.0));
        assert_eq!(a.levels[0].region, Region::ComputeBound);
        match &a.steps[..] {
            [Hint::RaiseIntensity {
                level: Level::Dram,
                gain,
                ..
            }, Hint::RaiseComputeRate { gain: up, .. }] => {
                assert!(close(*gain, 5.0), "{gain}");
                assert!(close(*up, 20.0 / 18.0), "{up}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn far_below_both_roofs_ranks_directions_by_gain() {
        // DRAM intensity 2 → roof 20; achieved 2: up gains 10×, right gains 5× → up first.
        let a = match analyse(&program(2.0, 1.0, &[(Level::Dram, 1.0)]), &ceilings()) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        assert!(matches!(a.steps[0], Hint::RaiseComputeRate { gain, .. } if close(gain, 10.0)));
        assert!(matches!(a.steps[1], Hint::RaiseIntensity { gain, .. } if close(gain, 5.0)));
        // DRAM intensity 0.5 → roof 5; achieved 2.5: up gains 2×, right 20× → right first.
        let a = match analyse(&program(2.5, 1.0, &[(Level::Dram, 5.0)]), &ceilings()) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        assert!(matches!(a.steps[0], Hint::RaiseIntensity { gain, .. } if close(gain, 20.0)));
        assert!(matches!(a.steps[1], Hint::RaiseComputeRate { gain, .. } if close(gain, 2.0)));
    }

    #[test]
    fn compute_bound_raises_efficiency_or_is_at_peak() {
        // DRAM intensity 20 > ridge 10: compute-bound; 40 of 100 GFLOP/s → 2.5×.
        let a = match analyse(&program(40.0, 1.0, &[(Level::Dram, 2.0)]), &ceilings()) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(a.levels[0].region, Region::ComputeBound);
        assert_eq!(a.steps.len(), 1);
        assert!(
            matches!(a.steps[0], Hint::RaiseComputeEfficiency { gain, .. } if close(gain, 2.5))
        );
        let a = match analyse(&program(90.0, 1.0, &[(Level::Dram, 2.0)]), &ceilings()) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        assert!(matches!(a.steps[0], Hint::AtPeak { fraction, .. } if close(fraction, 0.9)));
    }

    #[test]
    fn the_lowest_roof_binds() {
        // L2 intensity 0.5 → roof 50; DRAM intensity 20 → roof 100: L2 binds.
        let a = match analyse(
            &program(30.0, 1.0, &[(Level::L2, 60.0), (Level::Dram, 1.5)]),
            &ceilings(),
        ) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(a.binding, Level::L2);
        assert!(matches!(
            a.steps[0],
            Hint::RaiseComputeRate {
                level: Level::L2,
                ..
            } | Hint::RaiseIntensity {
                level: Level::L2,
                ..
            }
        ));
    }

    #[test]
    fn what_cannot_be_analysed_says_why() {
        let c = ceilings();
        let mut p = program(1.0, 1.0, &[(Level::Dram, 1.0)]);
        p.precision = Precision::Fp16;
        assert_eq!(
            analyse(&p, &c),
            Err(AdviceError::MissingPeak(Precision::Fp16))
        );
        assert_eq!(
            analyse(&program(1.0, 0.0, &[(Level::Dram, 1.0)]), &c),
            Err(AdviceError::ZeroRate)
        );
        assert_eq!(
            analyse(&program(1.0, 1.0, &[(Level::L3, 1.0)]), &c),
            Err(AdviceError::NoCommonLevel)
        );
    }

    #[test]
    fn hints_say_what_to_do_and_what_they_rest_on() {
        let a = match analyse(&program(18.0, 1.0, &[(Level::Dram, 9.0)]), &ceilings()) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        let text = a.steps[0].to_string();
        assert!(
            text.starts_with(
                "Raise arithmetic intensity at DRAM (now 2.00 FLOP/byte, ridge at 10.00)"
            ),
            "{text}"
        );
        assert!(text.contains("up to 5.0×"), "{text}");
        assert!(
            text.contains(
                "rests on: ceilings test machine; FLOPs and bytes from the analytic model"
            ),
            "{text}"
        );
    }

    #[test]
    fn layers_rank_by_time_share_times_headroom() {
        let mut a = program(2.0, 0.6, &[(Level::Dram, 1.0)]); // 3.33 GFLOP/s, roof 20 → 6×
        a.label = "a".into();
        let mut b = program(3.0, 0.3, &[(Level::Dram, 0.15)]); // 10 GFLOP/s, roof 100 → 10×
        b.label = "b".into();
        let mut c = program(1.8, 0.1, &[(Level::Dram, 0.9)]); // 18 GFLOP/s, roof 20 → 1.11×
        c.label = "c".into();
        let ranks = rank_layers(&[a, b, c], &ceilings());
        let labels: Vec<&str> = ranks.iter().map(|r| r.label.as_str()).collect();
        // Savings: a 0.6 × (1 − 1/6) = 0.5, b 0.3 × (1 − 1/10) = 0.27, c 0.1 × (1 − 0.9) = 0.01.
        assert_eq!(labels, ["a", "b", "c"]);
        assert!(close(ranks[0].saving, 0.5) && close(ranks[1].saving, 0.27));
        assert!(close(ranks[2].time_share, 0.1));
        assert!(rank_layers(&[], &ceilings()).is_empty());
    }

    #[test]
    fn no_layer_outranks_one_that_can_save_more_than_its_whole_share() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let layers: Vec<Program> = (0..8)
                .map(|i| {
                    let mut p = program(
                        rng.random_range(0.001..5.0),
                        rng.random_range(0.001..1.0),
                        &[(Level::Dram, rng.random_range(0.001..3.0))],
                    );
                    p.label = format!("l{i}");
                    p
                })
                .collect();
            let ranks = rank_layers(&layers, &ceilings());
            for r in &ranks {
                assert!(r.saving <= r.time_share + 1e-12, "{r:?}");
            }
            for (i, above) in ranks.iter().enumerate() {
                for below in &ranks[i + 1..] {
                    // Ranked above: it saves at least as much, so never a share s above a
                    // layer that saves more than s.
                    assert!(above.saving >= below.saving, "{above:?} above {below:?}");
                    assert!(below.saving <= above.time_share + 1e-12);
                }
            }
        }
        // The case that motivated it: 2.5 % of the time at a huge headroom against 21.9 % at 3×.
        let mut small = program(0.0001, 0.025, &[(Level::Dram, 0.00001)]);
        small.label = "small".into();
        let mut big = program(0.219 * 20.0 / 3.0, 0.219, &[(Level::Dram, 0.219)]);
        big.label = "big".into();
        let ranks = rank_layers(&[small, big], &ceilings());
        assert_eq!(ranks[0].label, "big", "{ranks:?}");
    }

    #[test]
    fn a_dominant_layer_holds_the_top_and_a_close_race_does_not() {
        let mut a = program(2.0, 0.6, &[(Level::Dram, 1.0)]);
        a.label = "a".into();
        let mut b = program(0.2, 0.06, &[(Level::Dram, 0.1)]);
        b.label = "b".into();
        // Five runs each: a far ahead in every one.
        let runs = vec![
            vec![0.6, 0.61, 0.59, 0.6, 0.62],
            vec![0.06, 0.07, 0.05, 0.06, 0.06],
        ];
        let stable = top_stability(&[a.clone(), b.clone()], &runs, &ceilings(), 200);
        assert_eq!(stable, Some(1.0));
        // The same work, their run times swapping the lead from run to run.
        let mut c = a.clone();
        c.label = "c".into();
        let race = vec![vec![0.5, 0.7, 0.5, 0.7, 0.6], vec![0.7, 0.5, 0.7, 0.5, 0.6]];
        let shaky = top_stability(&[a.clone(), c], &race, &ceilings(), 200).unwrap_or(1.0);
        assert!(shaky < STABLE_TOP, "{shaky}");
        // One run: nothing to resample.
        assert_eq!(
            top_stability(&[a, b], &[vec![0.6], vec![0.06]], &ceilings(), 10),
            None
        );
    }
}

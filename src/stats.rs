//! Latency statistics over a sample of durations (all figures in milliseconds).
//!
//! Percentiles use linear interpolation between closest ranks (NumPy's default, "type 7" of
//! Hyndman & Fan, 1996); the standard deviation is the sample one (n − 1 denominator).
//! Outliers are flagged, never dropped, by the modified z-score of Iglewicz & Hoaglin (1993):
//! M_i = 0.6745 · (x_i − median) / MAD, outlier when |M_i| > 3.5. When the MAD is zero (more than
//! half the samples equal), the mean absolute deviation stands in: M_i = (x_i − median) /
//! (1.253314 · MeanAD); when that is zero too, every sample equals the median and none is flagged.
//! A run is flagged as noisy when its coefficient of variation (std / mean) exceeds 10 %.
//! Beside the mean, robust figures: the median, the 10 % trimmed mean and the median absolute
//! deviation. Whether flagged outliers enter the mean (and the throughput derived from it) is the
//! [`Outliers`] policy; the raw latencies are always kept.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub samples: usize,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub std_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Mean of the middle 80 % (10 % of the samples trimmed from each end); None in records
    /// made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimmed_mean_ms: Option<f64>,
    /// Median absolute deviation from the median (unscaled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mad_ms: Option<f64>,
}

/// Whether iterations flagged as outliers enter the mean (and the throughput derived from it).
/// They are always kept in the raw latencies and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outliers {
    /// The mean is of every iteration: a stall on the board is a real cost of running there.
    #[default]
    Keep,
    /// The mean leaves the flagged iterations out.
    Exclude,
}

impl std::fmt::Display for Outliers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outliers::Keep => "keep",
            Outliers::Exclude => "exclude",
        })
    }
}

impl std::str::FromStr for Outliers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "keep" => Ok(Outliers::Keep),
            "exclude" => Ok(Outliers::Exclude),
            _ => Err(format!("unknown outlier policy {s:?}; use keep or exclude")),
        }
    }
}

/// The q-quantile (0 ≤ q ≤ 1) of sorted data, by linear interpolation.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let low = pos.floor() as usize;
    let high = pos.ceil() as usize;
    let frac = pos - low as f64;
    Some(sorted[low] + (sorted[high] - sorted[low]) * frac)
}

impl LatencyStats {
    /// Statistics of the samples; `None` for an empty sample or one holding a NaN.
    pub fn from_ms(samples: &[f64]) -> Option<LatencyStats> {
        if samples.is_empty() || samples.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let var = if sorted.len() > 1 {
            sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Some(LatencyStats {
            samples: sorted.len(),
            mean_ms: mean,
            median_ms: quantile_sorted(&sorted, 0.5)?,
            std_ms: var.sqrt(),
            p90_ms: quantile_sorted(&sorted, 0.9)?,
            p99_ms: quantile_sorted(&sorted, 0.99)?,
            min_ms: sorted[0],
            max_ms: sorted[sorted.len() - 1],
            trimmed_mean_ms: trimmed_mean_sorted(&sorted, 0.1),
            mad_ms: mad(&sorted),
        })
    }
}

/// Resamples drawn for a bootstrap interval.
pub const BOOTSTRAP_ROUNDS: usize = 1000;
/// The bootstraps' seed: the same latencies give the same interval.
const BOOTSTRAP_SEED: u64 = 0x5eed_c0de;

/// A generator for bootstraps, seeded so that results are reproducible.
pub fn bootstrap_rng() -> rand_chacha::ChaCha8Rng {
    use rand::SeedableRng;
    rand_chacha::ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED)
}

/// The median of `data` drawn with replacement as many times as it has values.
pub fn resampled_median(data: &[f64], rng: &mut impl rand::Rng, scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend((0..data.len()).map(|_| data[rng.random_range(0..data.len())]));
    scratch.sort_by(f64::total_cmp);
    quantile_sorted(scratch, 0.5).unwrap_or(f64::NAN)
}

/// The median of repeats resampled in two stages: as many repeats as there are, drawn with
/// replacement, then each drawn repeat's own values drawn with replacement. Differences between
/// repeats (another moment, another worker process) so widen the spread as much as they
/// should; with one repeat it is [`resampled_median`] of its values.
pub fn resampled_median_nested(
    repeats: &[Vec<f64>],
    rng: &mut impl rand::Rng,
    scratch: &mut Vec<f64>,
) -> f64 {
    let filled: Vec<&Vec<f64>> = repeats.iter().filter(|r| !r.is_empty()).collect();
    if filled.len() < 2 {
        return resampled_median(&repeats.concat(), rng, scratch);
    }
    scratch.clear();
    for _ in 0..filled.len() {
        let r = filled[rng.random_range(0..filled.len())];
        scratch.extend((0..r.len()).map(|_| r[rng.random_range(0..r.len())]));
    }
    scratch.sort_by(f64::total_cmp);
    quantile_sorted(scratch, 0.5).unwrap_or(f64::NAN)
}

/// The 95 % interval of the median of the repeats' values by the two-stage bootstrap of
/// [`resampled_median_nested`]; None for fewer than two values in all.
pub fn median_interval_of_repeats(repeats: &[Vec<f64>], rounds: usize) -> Option<(f64, f64)> {
    if repeats.iter().map(Vec::len).sum::<usize>() < 2 {
        return None;
    }
    let mut rng = bootstrap_rng();
    let mut scratch = Vec::new();
    let mut medians: Vec<f64> = (0..rounds.max(1))
        .map(|_| resampled_median_nested(repeats, &mut rng, &mut scratch))
        .collect();
    medians.sort_by(f64::total_cmp);
    Some((
        quantile_sorted(&medians, 0.025)?,
        quantile_sorted(&medians, 0.975)?,
    ))
}

/// Each repeat's level: the median of its values over the median of all of them (1.0 for a
/// repeat at the condition's level); none for fewer than two repeats with values.
pub fn repeat_factors(repeats: &[Vec<f64>]) -> Vec<f64> {
    let filled: Vec<&Vec<f64>> = repeats.iter().filter(|r| !r.is_empty()).collect();
    let Some(all) = median(&repeats.concat()).filter(|m| *m > 0.0 && filled.len() >= 2) else {
        return Vec::new();
    };
    filled
        .iter()
        .filter_map(|r| median(r))
        .map(|m| m / all)
        .filter(|f| f.is_finite() && *f > 0.0)
        .collect()
}

/// The 95 % interval of the median of the repeats' values when the level of a repeat varies as
/// `factors` do — the levels ([`repeat_factors`]) of the repeats of every condition measured
/// alongside, whose worker processes took turns with this one's. How much one worker process
/// runs slower or faster than another at another moment is a property of the machine more
/// than of the condition, and a condition's own two or three processes say little about it:
/// pooled over the conditions around it, it is known far better. Two-stage bootstrap: each
/// drawn repeat's values, brought to the condition's level, are scaled by a drawn factor, then
/// resampled. Joined with [`median_interval_of_repeats`], so it is never narrower than the
/// condition's own repeats say; that alone with fewer than two repeats or no factors.
pub fn median_interval_pooled(
    repeats: &[Vec<f64>],
    factors: &[f64],
    rounds: usize,
) -> Option<(f64, f64)> {
    let own = median_interval_of_repeats(repeats, rounds)?;
    let levelled: Vec<Vec<f64>> = repeats
        .iter()
        .zip(repeat_factors(repeats))
        .map(|(r, f)| r.iter().map(|v| v / f).collect())
        .collect();
    if factors.is_empty() || levelled.len() < 2 || levelled.len() != repeats.len() {
        return Some(own);
    }
    use rand::Rng;
    let mut rng = bootstrap_rng();
    let mut scratch = Vec::new();
    let mut medians: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            scratch.clear();
            for _ in 0..levelled.len() {
                let r = &levelled[rng.random_range(0..levelled.len())];
                let f = factors[rng.random_range(0..factors.len())];
                scratch.extend((0..r.len()).map(|_| r[rng.random_range(0..r.len())] * f));
            }
            scratch.sort_by(f64::total_cmp);
            quantile_sorted(&scratch, 0.5).unwrap_or(f64::NAN)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let low = quantile_sorted(&medians, 0.025)?;
    let high = quantile_sorted(&medians, 0.975)?;
    Some((low.min(own.0), high.max(own.1)))
}

/// The 95 % bootstrap (percentile) interval of the median of `data`; None for fewer than two
/// values.
pub fn median_interval(data: &[f64], rounds: usize) -> Option<(f64, f64)> {
    if data.len() < 2 {
        return None;
    }
    let mut rng = bootstrap_rng();
    let mut scratch = Vec::with_capacity(data.len());
    let mut medians: Vec<f64> = (0..rounds.max(1))
        .map(|_| resampled_median(data, &mut rng, &mut scratch))
        .collect();
    medians.sort_by(f64::total_cmp);
    Some((
        quantile_sorted(&medians, 0.025)?,
        quantile_sorted(&medians, 0.975)?,
    ))
}

/// The mean of sorted data without its `fraction` lowest and highest values (rounded down).
pub fn trimmed_mean_sorted(sorted: &[f64], fraction: f64) -> Option<f64> {
    let cut = (sorted.len() as f64 * fraction.clamp(0.0, 0.49)).floor() as usize;
    let middle = sorted.get(cut..sorted.len() - cut)?;
    (!middle.is_empty()).then(|| middle.iter().sum::<f64>() / middle.len() as f64)
}

/// The median absolute deviation from the median (unscaled).
pub fn mad(data: &[f64]) -> Option<f64> {
    let m = median(data)?;
    median(&data.iter().map(|x| (x - m).abs()).collect::<Vec<_>>())
}

/// |M_i| above this flags an outlier (Iglewicz & Hoaglin's recommendation).
pub const OUTLIER_Z: f64 = 3.5;
/// A run whose std / mean exceeds this is flagged as noisy.
pub const HIGH_CV: f64 = 0.10;

/// The median of unsorted data (None when empty).
pub fn median(data: &[f64]) -> Option<f64> {
    let mut sorted = data.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile_sorted(&sorted, 0.5)
}

/// Modified z-score of every sample (see the module documentation); all zero when the data
/// has no spread.
pub fn modified_z_scores(data: &[f64]) -> Vec<f64> {
    let Some(med) = median(data) else {
        return Vec::new();
    };
    let deviations: Vec<f64> = data.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&deviations).unwrap_or(0.0);
    let scale = if mad > 0.0 {
        mad / 0.6745
    } else {
        let mean_ad = deviations.iter().sum::<f64>() / deviations.len() as f64;
        1.253314 * mean_ad
    };
    if scale > 0.0 {
        data.iter().map(|x| (x - med) / scale).collect()
    } else {
        vec![0.0; data.len()]
    }
}

/// Indices of the samples whose |modified z-score| exceeds [`OUTLIER_Z`].
pub fn outlier_indices(data: &[f64]) -> Vec<usize> {
    modified_z_scores(data)
        .iter()
        .enumerate()
        .filter(|(_, z)| z.abs() > OUTLIER_Z)
        .map(|(i, _)| i)
        .collect()
}

impl LatencyStats {
    /// Coefficient of variation, std / mean (0 for a zero mean).
    pub fn cv(&self) -> f64 {
        if self.mean_ms > 0.0 {
            self.std_ms / self.mean_ms
        } else {
            0.0
        }
    }
}

/// One condition over its repeats: each statistic averaged over the repeats (mean of means),
/// with the spread of the repeat means; extremes over all repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatSummary {
    pub repeats: usize,
    pub mean_ms: f64,
    /// Sample standard deviation of the repeats' means (0 for one repeat).
    pub mean_spread_ms: f64,
    /// The mean of the repeats' medians (kept in records as written; what edgeprof calls "the
    /// median" of a condition is the median over every timed iteration,
    /// [`RunStats::latency`]'s, whose interval it gives).
    pub median_ms: f64,
    pub std_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub inferences_per_s: f64,
    /// Batch × inferences per second.
    pub images_per_s: f64,
    /// Repeats whose coefficient of variation exceeds [`HIGH_CV`].
    pub noisy_repeats: usize,
}

/// Combines the repeats of one condition; None without repeats.
pub fn summarize_repeats(runs: &[LatencyStats], batch: usize) -> Option<RepeatSummary> {
    if runs.is_empty() {
        return None;
    }
    let n = runs.len() as f64;
    let avg = |f: fn(&LatencyStats) -> f64| runs.iter().map(f).sum::<f64>() / n;
    let mean = avg(|r| r.mean_ms);
    let spread = if runs.len() > 1 {
        (runs.iter().map(|r| (r.mean_ms - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let inferences_per_s = if mean > 0.0 { 1e3 / mean } else { 0.0 };
    Some(RepeatSummary {
        repeats: runs.len(),
        mean_ms: mean,
        mean_spread_ms: spread,
        median_ms: avg(|r| r.median_ms),
        std_ms: avg(|r| r.std_ms),
        p90_ms: avg(|r| r.p90_ms),
        p99_ms: avg(|r| r.p99_ms),
        min_ms: runs.iter().map(|r| r.min_ms).fold(f64::INFINITY, f64::min),
        max_ms: runs
            .iter()
            .map(|r| r.max_ms)
            .fold(f64::NEG_INFINITY, f64::max),
        inferences_per_s,
        images_per_s: inferences_per_s * batch as f64,
        noisy_repeats: runs.iter().filter(|r| r.cv() > HIGH_CV).count(),
    })
}

/// Every statistic of one run, in milliseconds unless named otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub init_ms: f64,
    pub first_inference_ms: Option<f64>,
    pub warmup_iterations: usize,
    /// Mean of the warm-up iterations (None without warm-up).
    pub warmup_mean_ms: Option<f64>,
    /// Over every timed iteration of every repeat.
    pub latency: LatencyStats,
    /// Per repeat, and combined (mean of means with spread).
    pub repeats: Vec<LatencyStats>,
    pub repeat_summary: RepeatSummary,
    /// Indices (into the timed iterations, repeats concatenated) flagged by the modified
    /// z-score; always kept in the raw latencies.
    pub outliers: Vec<usize>,
    /// How many of them the means (of the whole run and of each repeat) leave out: all of them
    /// under [`Outliers::Exclude`], none under `Keep`.
    #[serde(default)]
    pub excluded_from_mean: usize,
    /// The 95 % bootstrap interval of the median over every timed iteration (two-stage: repeats,
    /// then iterations within them); a sweep widens it by how much the worker processes of the
    /// conditions measured alongside differed ([`median_interval_pooled`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_interval_ms: Option<(f64, f64)>,
    /// Coefficient of variation over all timed iterations; above [`HIGH_CV`] the run is noisy.
    pub cv: f64,
    pub noisy: bool,
    pub inferences_per_s: f64,
    /// Batch × inferences per second.
    pub images_per_s: f64,
}

/// The mean of `data` without the values at `skip` (indices from `offset`); None when nothing
/// is left.
fn mean_without(data: &[f64], offset: usize, skip: &[usize]) -> Option<f64> {
    let kept: Vec<f64> = data
        .iter()
        .enumerate()
        .filter(|(i, _)| !skip.contains(&(i + offset)))
        .map(|(_, v)| *v)
        .collect();
    (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
}

/// Statistics of a run from its raw times; None when a repeat is empty or holds a NaN.
/// `policy` decides whether the flagged outliers enter the means.
pub fn run_stats(
    init_ms: f64,
    first_inference_ms: Option<f64>,
    warmup_ms: &[f64],
    repeats: &[Vec<f64>],
    batch: usize,
    policy: Outliers,
) -> Option<RunStats> {
    let mut per_repeat = repeats
        .iter()
        .map(|r| LatencyStats::from_ms(r))
        .collect::<Option<Vec<_>>>()?;
    let samples: Vec<f64> = repeats.concat();
    let mut latency = LatencyStats::from_ms(&samples)?;
    // The spread is of what was measured, outliers and all.
    let cv = latency.cv();
    let outliers = outlier_indices(&samples);
    let excluded_from_mean = match policy {
        Outliers::Exclude if !outliers.is_empty() => {
            let mut offset = 0;
            for (stats, raw) in per_repeat.iter_mut().zip(repeats) {
                if let Some(mean) = mean_without(raw, offset, &outliers) {
                    stats.mean_ms = mean;
                }
                offset += raw.len();
            }
            if let Some(mean) = mean_without(&samples, 0, &outliers) {
                latency.mean_ms = mean;
            }
            outliers.len()
        }
        _ => 0,
    };
    let repeat_summary = summarize_repeats(&per_repeat, batch)?;
    let inferences_per_s = if latency.mean_ms > 0.0 {
        1e3 / latency.mean_ms
    } else {
        0.0
    };
    Some(RunStats {
        init_ms,
        first_inference_ms,
        warmup_iterations: warmup_ms.len(),
        warmup_mean_ms: (!warmup_ms.is_empty())
            .then(|| warmup_ms.iter().sum::<f64>() / warmup_ms.len() as f64),
        median_interval_ms: median_interval_of_repeats(repeats, BOOTSTRAP_ROUNDS),
        outliers,
        excluded_from_mean,
        noisy: cv > HIGH_CV,
        cv,
        latency,
        repeats: per_repeat,
        repeat_summary,
        inferences_per_s,
        images_per_s: inferences_per_s * batch as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn hand_computed_sample() {
        // 1..=10: mean 5.5, median 5.5, sample std sqrt(82.5/9), p90 at rank 8.1 → 9.1.
        let data: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let Some(s) = LatencyStats::from_ms(&data) else {
            panic!("stats")
        };
        assert!(close(s.mean_ms, 5.5));
        assert!(close(s.median_ms, 5.5));
        assert!(close(s.std_ms, (82.5f64 / 9.0).sqrt()));
        assert!(close(s.p90_ms, 9.1));
        assert!(close(s.p99_ms, 9.91));
        assert!(close(s.min_ms, 1.0));
        assert!(close(s.max_ms, 10.0));
    }

    #[test]
    fn single_and_empty_samples() {
        let Some(s) = LatencyStats::from_ms(&[2.0]) else {
            panic!("stats")
        };
        assert!(close(s.std_ms, 0.0) && close(s.p99_ms, 2.0));
        assert_eq!(LatencyStats::from_ms(&[]), None);
        assert_eq!(LatencyStats::from_ms(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn modified_z_scores_by_hand() {
        // median 3, |deviations| 2,1,0,1,97 → MAD 1; scale 1/0.6745; 100 → 97·0.6745 = 65.4.
        let data = [1.0, 2.0, 3.0, 4.0, 100.0];
        let z = modified_z_scores(&data);
        assert!(close(z[0], -2.0 * 0.6745));
        assert!(close(z[4], 97.0 * 0.6745));
        assert_eq!(outlier_indices(&data), vec![4]);
    }

    #[test]
    fn zero_mad_falls_back_to_mean_absolute_deviation() {
        // median 5, deviations 0,0,0,0,5 → MAD 0; MeanAD 1 → scale 1.253314; 10 → 3.99 > 3.5.
        let data = [5.0, 5.0, 5.0, 5.0, 10.0];
        let z = modified_z_scores(&data);
        assert!(close(z[4], 5.0 / 1.253314));
        assert_eq!(outlier_indices(&data), vec![4]);
        // No spread at all: nothing is an outlier.
        assert!(outlier_indices(&[2.0; 6]).is_empty());
        assert!(modified_z_scores(&[]).is_empty());
    }

    #[test]
    fn repeats_average_with_spread_and_noise_flags() {
        let a = LatencyStats::from_ms(&[10.0, 10.0, 10.0, 10.0]);
        let b = LatencyStats::from_ms(&[12.0, 12.0, 12.0, 12.0]);
        let noisy = LatencyStats::from_ms(&[5.0, 20.0, 5.0, 20.0]);
        let (Some(a), Some(b), Some(noisy)) = (a, b, noisy) else {
            panic!("stats")
        };
        let Some(s) = summarize_repeats(&[a.clone(), b], 4) else {
            panic!("summary")
        };
        assert!(close(s.mean_ms, 11.0));
        assert!(close(s.mean_spread_ms, 2f64.sqrt()));
        assert!(close(s.min_ms, 10.0) && close(s.max_ms, 12.0));
        assert!(close(s.inferences_per_s, 1e3 / 11.0));
        assert!(close(s.images_per_s, 4e3 / 11.0));
        assert_eq!(s.noisy_repeats, 0);
        // mean 12.5, std sqrt(75) = 8.66 → CV 0.69.
        assert!(noisy.cv() > HIGH_CV);
        let Some(s) = summarize_repeats(&[a, noisy], 1) else {
            panic!("summary")
        };
        assert_eq!(s.noisy_repeats, 1);
        assert_eq!(summarize_repeats(&[], 1), None);
    }

    #[test]
    fn run_stats_by_hand() {
        let repeats = vec![vec![10.0, 10.0, 10.0, 10.0], vec![12.0, 12.0, 12.0, 100.0]];
        let Some(s) = run_stats(5.0, Some(20.0), &[30.0, 10.0], &repeats, 2, Outliers::Keep) else {
            panic!("stats")
        };
        assert_eq!(s.warmup_iterations, 2);
        assert_eq!(s.warmup_mean_ms, Some(20.0));
        assert_eq!(s.latency.samples, 8);
        // mean of all 8: (40 + 136) / 8 = 22.
        assert!(close(s.latency.mean_ms, 22.0));
        assert!(close(s.inferences_per_s, 1e3 / 22.0));
        assert!(close(s.images_per_s, 2e3 / 22.0));
        assert_eq!(s.outliers, vec![7]);
        assert!(s.noisy);
        assert_eq!(s.repeats.len(), 2);
        assert!(close(s.repeat_summary.mean_ms, (10.0 + 34.0) / 2.0));
        assert_eq!(
            run_stats(1.0, None, &[], &[vec![]], 1, Outliers::Keep),
            None
        );
        assert_eq!(run_stats(1.0, None, &[], &[], 1, Outliers::Keep), None);
        let Some(no_warmup) = run_stats(1.0, None, &[], &[vec![1.0]], 1, Outliers::Keep) else {
            panic!("stats")
        };
        assert_eq!(no_warmup.warmup_mean_ms, None);
    }

    #[test]
    fn robust_figures_by_hand() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0];
        // One value trimmed from each end of ten.
        assert_eq!(trimmed_mean_sorted(&sorted, 0.1), Some(44.0 / 8.0));
        assert_eq!(trimmed_mean_sorted(&[], 0.1), None);
        // Deviations from the median 5.5: 4.5 3.5 2.5 1.5 0.5 0.5 1.5 2.5 3.5 94.5.
        assert_eq!(mad(&sorted), Some(2.5));
        let Some(s) = LatencyStats::from_ms(&sorted) else {
            panic!("no stats")
        };
        assert_eq!(s.trimmed_mean_ms, Some(5.5));
        assert_eq!(s.mad_ms, Some(2.5));
        assert_eq!("exclude".parse::<Outliers>(), Ok(Outliers::Exclude));
        assert!("drop".parse::<Outliers>().is_err());
    }

    #[test]
    fn excluded_outliers_leave_every_mean_and_kept_ones_stay() {
        // Two repeats of 1 ms; the second holds one 50 ms stall.
        let mut second = vec![1.0; 19];
        second.push(50.0);
        let repeats = vec![vec![1.0; 20], second];
        let Some(kept) = run_stats(0.0, None, &[], &repeats, 1, Outliers::Keep) else {
            panic!("no stats")
        };
        assert_eq!(kept.outliers, vec![39]);
        assert_eq!(kept.excluded_from_mean, 0);
        assert!(kept.latency.mean_ms > 2.0);
        let Some(clean) = run_stats(0.0, None, &[], &repeats, 1, Outliers::Exclude) else {
            panic!("no stats")
        };
        assert_eq!(clean.excluded_from_mean, 1);
        assert!(close(clean.latency.mean_ms, 1.0));
        assert!(close(clean.repeats[1].mean_ms, 1.0));
        assert!(close(clean.repeat_summary.mean_ms, 1.0));
        assert!(close(clean.inferences_per_s, 1000.0));
        // What was measured stays: the maximum, the spread, the flag.
        assert_eq!(clean.latency.max_ms, 50.0);
        assert!(close(clean.cv, kept.cv));
    }

    #[test]
    fn the_median_comes_with_a_reproducible_interval_around_it() {
        let data: Vec<f64> = (0..200)
            .map(|i| 10.0 + ((i * 37) % 23) as f64 * 0.1)
            .collect();
        let Some((low, high)) = median_interval(&data, BOOTSTRAP_ROUNDS) else {
            panic!("no interval")
        };
        let Some(m) = median(&data) else {
            panic!("no median")
        };
        assert!(low <= m && m <= high, "{low} {m} {high}");
        assert!(high - low > 0.0 && high - low < 1.0, "{low} {high}");
        assert_eq!(median_interval(&data, BOOTSTRAP_ROUNDS), Some((low, high)));
        assert_eq!(median_interval(&[1.0], BOOTSTRAP_ROUNDS), None);
        let Some(s) = run_stats(0.0, None, &[], &[data], 1, Outliers::Keep) else {
            panic!("no stats")
        };
        assert_eq!(s.median_interval_ms, Some((low, high)));
    }

    #[test]
    fn repeats_that_disagree_widen_the_interval() {
        let steady: Vec<f64> = (0..100).map(|i| 10.0 + (i % 7) as f64 * 0.01).collect();
        let shifted: Vec<f64> = steady.iter().map(|v| v * 1.10).collect();
        let alike = vec![
            steady.clone(),
            steady.clone(),
            steady.clone(),
            steady.clone(),
        ];
        let apart = vec![steady.clone(), shifted.clone(), steady, shifted];
        let width = |r: &[Vec<f64>]| match median_interval_of_repeats(r, BOOTSTRAP_ROUNDS) {
            Some((low, high)) => high - low,
            None => panic!("no interval"),
        };
        // Pooled, both have the same spread of values; by repeat, one is 10 % apart.
        assert!(
            width(&apart) > 5.0 * width(&alike),
            "{} {}",
            width(&apart),
            width(&alike)
        );
        assert_eq!(
            median_interval_of_repeats(&[vec![1.0]], BOOTSTRAP_ROUNDS),
            None
        );
    }

    #[test]
    fn levels_pooled_from_the_conditions_alongside_widen_a_steady_conditions_interval() {
        let steady: Vec<f64> = (0..30).map(|i| 10.0 + (i % 7) as f64 * 0.01).collect();
        let three = vec![steady.clone(), steady.clone(), steady.clone()];
        assert_eq!(repeat_factors(&three), vec![1.0, 1.0, 1.0]);
        assert!(repeat_factors(std::slice::from_ref(&steady)).is_empty());
        let own = median_interval_of_repeats(&three, BOOTSTRAP_ROUNDS);
        // Alone (its own levels, or none), nothing changes.
        assert_eq!(median_interval_pooled(&three, &[], BOOTSTRAP_ROUNDS), own);
        // Alongside ones as steady: about its own (another draw of the same resampling).
        let Some((low, high)) = median_interval_pooled(&three, &[1.0; 3], BOOTSTRAP_ROUNDS) else {
            panic!("no interval")
        };
        assert!(own.is_some_and(|(l, h)| low <= l && high >= h && high - low < 2.0 * (h - l)));
        // The processes around it ran up to 8 % apart: its three could have too.
        let around = [0.92, 1.0, 1.0, 1.08, 0.97, 1.03, 1.0, 0.95, 1.05];
        let Some((low, high)) = median_interval_pooled(&three, &around, BOOTSTRAP_ROUNDS) else {
            panic!("no interval")
        };
        let Some((own_low, own_high)) = own else {
            panic!("no interval of its own")
        };
        assert!(low <= own_low && high >= own_high);
        assert!(high - low > 0.04 * 10.0, "[{low}, {high}]");
        assert!(low < 10.0 && high > 10.06, "[{low}, {high}]");
        // One repeat: its own interval, whatever the others did.
        assert_eq!(
            median_interval_pooled(std::slice::from_ref(&steady), &around, BOOTSTRAP_ROUNDS),
            median_interval_of_repeats(&[steady], BOOTSTRAP_ROUNDS)
        );
    }
}

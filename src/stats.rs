//! Latency statistics over a sample of durations (all figures in milliseconds).
//!
//! Percentiles use linear interpolation between closest ranks (NumPy's default, "type 7" of
//! Hyndman & Fan, 1996); the standard deviation is the sample one (n − 1 denominator).

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyStats {
    pub samples: usize,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub std_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
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
        })
    }
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
}

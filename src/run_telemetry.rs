//! What the telemetry recorded during a run says about it: whether it was
//! throttled (a throttle flag raised, or a clock that dropped while its unit was busy), the
//! average power and the energy per inference when a power source exists. Pure functions of the
//! samples, so every rule is tested by hand.

use crate::collect::telemetry::Sample;
use serde::{Deserialize, Serialize};

/// A unit at least this busy is under load.
pub const BUSY_PCT: f64 = 50.0;
/// A clock below this share of the highest it reached in the run, under load, has dropped.
pub const DROP_SHARE: f64 = 0.85;

/// The telemetry summary of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTelemetry {
    pub samples: usize,
    pub throttled: bool,
    /// Why it counts as throttled, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_mean_w: Option<f64>,
    /// Mean power × mean latency: the board's (or package's) energy per inference, idle share
    /// included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_per_inference_j: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_load_mean_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mem_max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_max_c: Option<f64>,
    /// What other processes took on the condition's cores meanwhile, and who.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<crate::collect::other_processes::Disturbance>,
}

/// (load, MHz) readings of one clock domain, in time order.
fn dropped(readings: &[(Option<f64>, Option<u32>)]) -> Option<(u32, u32)> {
    let top = readings.iter().filter_map(|r| r.1).max()?;
    readings
        .iter()
        .filter(|(load, _)| load.is_some_and(|l| l >= BUSY_PCT))
        .filter_map(|r| r.1)
        .filter(|&f| f64::from(f) < DROP_SHARE * f64::from(top))
        .min()
        .map(|low| (top, low))
}

/// The running mean: a series of equal readings averages to exactly that reading (a sum divided
/// by the count does not: three samples of 45.3 % would report 45.29999999999999 %).
fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut m = None;
    for (i, x) in values.enumerate() {
        let prev = m.unwrap_or(0.0);
        m = Some(prev + (x - prev) / (i + 1) as f64);
    }
    m
}

/// Summarises a run's samples; `mean_latency_ms` gives the energy per inference.
pub fn summarize(samples: &[Sample], mean_latency_ms: Option<f64>) -> RunTelemetry {
    let mut reasons: Vec<String> = Vec::new();
    for s in samples {
        for t in &s.throttling {
            if !reasons.contains(t) {
                reasons.push(t.clone());
            }
        }
    }
    let gpu_names: Vec<String> = {
        let mut names: Vec<String> = samples
            .iter()
            .flat_map(|s| s.gpus.iter().map(|g| g.name.clone()))
            .collect();
        names.dedup();
        names.sort();
        names.dedup();
        names
    };
    for name in &gpu_names {
        let readings: Vec<_> = samples
            .iter()
            .filter_map(|s| s.gpus.iter().find(|g| &g.name == name))
            .map(|g| (g.load_pct, g.freq_mhz))
            .collect();
        if let Some((top, low)) = dropped(&readings) {
            reasons.push(format!(
                "{name}: clock dropped from {top} to {low} MHz under load"
            ));
        }
    }
    let mut core_ids: Vec<usize> = samples
        .iter()
        .flat_map(|s| s.cores.iter().map(|c| c.id))
        .collect();
    core_ids.sort_unstable();
    core_ids.dedup();
    for id in core_ids {
        let readings: Vec<_> = samples
            .iter()
            .filter_map(|s| s.cores.iter().find(|c| c.id == id && c.online))
            .map(|c| (c.load_pct, c.freq_mhz))
            .collect();
        if let Some((top, low)) = dropped(&readings) {
            reasons.push(format!(
                "cpu{id}: clock dropped from {top} to {low} MHz under load"
            ));
        }
    }
    let power_mean_w = mean(samples.iter().filter_map(|s| s.power_w));
    RunTelemetry {
        // Scanned by the sweep around the worker, not from these samples.
        disturbance: None,
        samples: samples.len(),
        throttled: !reasons.is_empty(),
        reasons,
        power_mean_w,
        energy_per_inference_j: power_mean_w
            .zip(mean_latency_ms)
            .map(|(w, ms)| w * ms / 1e3),
        gpu_load_mean_pct: mean(
            samples
                .iter()
                .flat_map(|s| s.gpus.iter().filter_map(|g| g.load_pct)),
        ),
        gpu_mem_max_bytes: samples
            .iter()
            .flat_map(|s| s.gpus.iter().filter_map(|g| g.mem_used_bytes))
            .max(),
        temp_max_c: samples
            .iter()
            .flat_map(|s| s.temperatures.iter().map(|t| t.value))
            .max_by(f64::total_cmp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::telemetry::{Core, Gpu, Reading};

    #[test]
    fn equal_readings_average_to_that_reading_exactly() {
        for n in 1..=50 {
            assert_eq!(
                mean(std::iter::repeat_n(45.3, n)),
                Some(45.3),
                "{n} samples"
            );
            assert_eq!(
                mean(std::iter::repeat_n(3.52, n)),
                Some(3.52),
                "{n} samples"
            );
        }
        assert_eq!(mean(std::iter::empty()), None);
        assert_eq!(mean([1.0, 2.0, 6.0].into_iter()), Some(3.0));
    }

    fn sample(
        t: f64,
        gpu: Option<(f64, u32)>,
        core: Option<(f64, u32)>,
        power: Option<f64>,
    ) -> Sample {
        Sample {
            t_s: t,
            gpus: gpu
                .map(|(load, mhz)| Gpu {
                    name: "jetson ga10b".into(),
                    load_pct: Some(load),
                    freq_mhz: Some(mhz),
                    mem_used_bytes: Some((t * 100.0) as u64),
                    ..Gpu::default()
                })
                .into_iter()
                .collect(),
            cores: core
                .map(|(load, mhz)| Core {
                    id: 3,
                    online: true,
                    load_pct: Some(load),
                    freq_mhz: Some(mhz),
                })
                .into_iter()
                .collect(),
            power_w: power,
            temperatures: vec![Reading {
                name: "tj".into(),
                value: 40.0 + t,
            }],
            ..Sample::default()
        }
    }

    #[test]
    fn a_steady_run_is_not_throttled_and_its_energy_is_power_times_latency() {
        let s = vec![
            sample(0.1, Some((90.0, 1300)), Some((99.0, 2201)), Some(10.0)),
            sample(0.2, Some((95.0, 1300)), Some((99.0, 2201)), Some(12.0)),
        ];
        let r = summarize(&s, Some(25.0));
        assert!(!r.throttled, "{r:?}");
        assert_eq!(r.power_mean_w, Some(11.0));
        // 11 W × 25 ms = 0.275 J.
        assert!((r.energy_per_inference_j.unwrap_or(0.0) - 0.275).abs() < 1e-12);
        assert_eq!(r.gpu_load_mean_pct, Some(92.5));
        assert_eq!(r.gpu_mem_max_bytes, Some(20));
        assert_eq!(r.temp_max_c, Some(40.2));
    }

    #[test]
    fn a_clock_that_drops_under_load_marks_the_run() {
        // 1300 → 1000 MHz (77 %) at 90 % load: dropped. The CPU idles at a low clock: not.
        let s = vec![
            sample(0.1, Some((90.0, 1300)), Some((5.0, 2201)), None),
            sample(0.2, Some((90.0, 1000)), Some((5.0, 729)), None),
        ];
        let r = summarize(&s, Some(25.0));
        assert!(r.throttled);
        assert_eq!(
            r.reasons,
            vec!["jetson ga10b: clock dropped from 1300 to 1000 MHz under load".to_string()]
        );
        assert_eq!(r.energy_per_inference_j, None);
        // 1300 → 1200 (92 %) is within the allowance.
        let s = vec![
            sample(0.1, Some((90.0, 1300)), None, None),
            sample(0.2, Some((90.0, 1200)), None, None),
        ];
        assert!(!summarize(&s, None).throttled);
        // A busy CPU core whose clock halves.
        let s = vec![
            sample(0.1, None, Some((99.0, 2201)), None),
            sample(0.2, None, Some((99.0, 1100)), None),
        ];
        assert_eq!(
            summarize(&s, None).reasons,
            vec!["cpu3: clock dropped from 2201 to 1100 MHz under load".to_string()]
        );
    }

    #[test]
    fn a_raised_flag_marks_the_run_once() {
        let mut a = sample(0.1, None, None, None);
        a.throttling = vec!["under-voltage".into()];
        let mut b = sample(0.2, None, None, None);
        b.throttling = vec!["under-voltage".into(), "GPU 0: power cap".into()];
        let r = summarize(&[a, b], None);
        assert_eq!(
            r.reasons,
            vec!["under-voltage".to_string(), "GPU 0: power cap".to_string()]
        );
        assert!(summarize(&[], None) == RunTelemetry::default());
    }
}

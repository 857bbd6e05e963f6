//! The memory hierarchy as the profiles met it: each profile's load bandwidth at its model's
//! working set, gathered into a curve over working-set size, and a group's work weighed with it.
//!
//! A layer that streams its weights runs at the bandwidth of wherever they live: on a machine
//! shared with other tenants the same 512-channel convolution ran twice as fast inside a 50 MB
//! model as inside a 100 MB one on a morning when the first still fitted in what was left of the
//! last-level cache, and as fast in both that afternoon. A group's bytes therefore count in its
//! work in proportion to how much slower than the fastest level its model's working set was
//! served when the profiles were taken.

use super::{Group, Profile};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Load bandwidth by working set: (bytes, bytes/s) points sorted by bytes, one per power of two
/// of the working set (the medians of the profiles there).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub points: Vec<(f64, f64)>,
}

impl Curve {
    /// From the profiles that measured their bandwidth (those that did not are weighed by the
    /// curve the others draw), and a last point at the working set no cache holds from those
    /// that measured it there; empty when none measured it.
    pub fn of<'a>(profiles: impl IntoIterator<Item = &'a Profile>) -> Curve {
        let mut points = Vec::new();
        let mut memory = Vec::new();
        for p in profiles {
            let rate = p.stream_bytes_per_s.filter(|r| *r > 0.0);
            if let (Some(rate), Some(bytes)) = (rate, footprint(&p.groups)) {
                points.push((bytes as f64, rate));
            }
            memory.extend(p.memory_bytes_per_s.filter(|r| *r > 0.0));
        }
        if points.is_empty() {
            return Curve::default();
        }
        if let Some(rate) = crate::stats::median(&memory) {
            points.push((crate::collect::ceilings::MAX_STREAM_BYTES as f64, rate));
        }
        let mut bins: BTreeMap<i64, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for (bytes, rate) in points {
            let bin = bins.entry(bytes.log2().floor() as i64).or_default();
            bin.0.push(bytes);
            bin.1.push(rate);
        }
        Curve {
            points: bins
                .values()
                .filter_map(|(bytes, rates)| {
                    Some((crate::stats::median(bytes)?, crate::stats::median(rates)?))
                })
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The bandwidth at a working set of `bytes`: interpolated between the nearest points on
    /// logarithmic scales, the end point's beyond them. None for an empty curve.
    pub fn at(&self, bytes: f64) -> Option<f64> {
        let ln = |v: f64| v.max(1.0).ln();
        let after = self.points.iter().position(|p| p.0 >= bytes);
        match after {
            Some(0) => self.points.first().map(|p| p.1),
            None => self.points.last().map(|p| p.1),
            Some(i) => {
                let (a, b) = (self.points[i - 1], self.points[i]);
                let span = ln(b.0) - ln(a.0);
                let t = if span > 0.0 {
                    (ln(bytes) - ln(a.0)) / span
                } else {
                    1.0
                };
                Some((ln(a.1) + t * (ln(b.1) - ln(a.1))).exp())
            }
        }
    }

    /// How many times slower than the curve's fastest point a working set of `bytes` is served
    /// (1 for an empty curve).
    pub fn slowdown(&self, bytes: f64) -> f64 {
        let fastest = self.points.iter().map(|p| p.1).fold(0.0, f64::max);
        match self.at(bytes) {
            Some(here) if here > 0.0 && fastest > 0.0 => fastest / here,
            _ => 1.0,
        }
    }
}

/// A group's work, what the forest divides its time by: its FLOPs, plus its bytes at
/// `byte_weight` FLOPs each times how much slower than the fastest level its model's working
/// set is served ([`Curve::slowdown`]), plus a floor for groups with neither.
pub fn work(curve: &Curve, byte_weight: f64, g: &Group) -> f64 {
    let slowdown = g.dims.map_or(1.0, |d| curve.slowdown(d.model_bytes as f64));
    g.flops + g.bytes * byte_weight * slowdown + 1e4
}

/// What a byte read at the fastest level costs in FLOPs, from `groups` (their time fitted on
/// FLOPs and slowed bytes, [`super::fit_linear`]); 1 without a curve or when the fit leaves
/// either out, and kept within [1/20, 20].
pub fn byte_weight<'a>(curve: &Curve, groups: impl IntoIterator<Item = &'a Group>) -> f64 {
    if curve.is_empty() {
        return 1.0;
    }
    let samples: Vec<(f64, f64, f64)> = groups
        .into_iter()
        .map(|g| {
            let slowdown = g.dims.map_or(1.0, |d| curve.slowdown(d.model_bytes as f64));
            (g.flops, g.bytes * slowdown, g.seconds)
        })
        .collect();
    match super::fit_linear(&samples) {
        Some(l) if l.per_flop > 0.0 && l.per_byte > 0.0 => {
            (l.per_byte / l.per_flop).clamp(1.0 / 20.0, 20.0)
        }
        _ => 1.0,
    }
}

/// Measures, after `profile`'s runs and on its threads (in the same confined process), the
/// memory hierarchy as they met it — the caches other tenants left: the load bandwidth at its
/// model's working set and, with `memory`, at one no cache holds. After the runs, not between
/// them: measured between the timed runs and the layers' it sped the layers up by a fifth on two
/// threads on the development VM, which their sum then no longer matched.
pub fn measure_bandwidth(profile: &mut Profile, memory: bool) {
    use crate::collect::ceilings::{stream_bandwidth, MAX_STREAM_BYTES};
    profile.stream_bytes_per_s =
        footprint(&profile.groups).and_then(|bytes| stream_bandwidth(bytes, profile.threads));
    if memory {
        profile.memory_bytes_per_s = stream_bandwidth(MAX_STREAM_BYTES, profile.threads);
    }
}

/// The bytes a model's layers move per inference (the [`Dims`] its groups carry): the working
/// set the memory hierarchy serves it.
pub fn footprint(groups: &[Group]) -> Option<u64> {
    groups
        .iter()
        .filter_map(|g| g.dims.map(|d| d.model_bytes))
        .find(|b| *b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_interpolates_on_log_scales_and_holds_its_ends() {
        let curve = Curve {
            points: vec![(1e6, 40e9), (1e7, 20e9), (1e8, 10e9)],
        };
        let near = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-9;
        assert!(curve.at(1e5).is_some_and(|r| near(r, 40e9)));
        assert!(curve.at(1e9).is_some_and(|r| near(r, 10e9)));
        assert!(curve.at(1e7).is_some_and(|r| near(r, 20e9)));
        // Halfway in log bytes is the geometric mean of the rates.
        assert!(curve
            .at(10f64.powf(6.5))
            .is_some_and(|r| near(r, 800e18f64.sqrt())));
        assert!(near(curve.slowdown(1e8), 4.0));
        assert!(near(Curve::default().slowdown(1e8), 1.0));
        assert_eq!(Curve::default().at(1.0), None);
    }
}

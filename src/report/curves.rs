//! Each condition's telemetry over its own time — its GPU's load and memory, the machine's CPU
//! load — one curve per condition, grouped by framework: the per-model utilisation curves of
//! the first seed. A condition's time is that of its last attempt's worker runs laid end to end.

use crate::collect::telemetry::{Gpu, Sample};
use crate::config::Device;
use crate::results::Stored;
use std::collections::HashMap;

/// One condition's curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The condition without its engine ("mobilenet_v2/3x224x224/b1/t1/gpu:0").
    pub label: String,
    /// (seconds into the condition's worker runs, value).
    pub points: Vec<(f64, f64)>,
}

/// The curves of one framework's conditions, in the order they ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub engine: String,
    pub curves: Vec<Curve>,
}

/// A figure of one sample, for a condition that ran on a device.
pub type Figure = fn(&Sample, Device) -> Option<f64>;

/// The GPU a condition ran on (`gpu:N` is NVML's N-th, as the samples list them); for a CPU
/// condition the first GPU, which a CPU run may share with others.
fn gpu_of(sample: &Sample, device: Device) -> Option<&Gpu> {
    match device {
        Device::Gpu(n) => sample.gpus.get(n as usize),
        Device::Cpu => sample.gpus.first(),
    }
}

/// The condition's GPU's load, in %.
pub fn gpu_load(sample: &Sample, device: Device) -> Option<f64> {
    gpu_of(sample, device)?.load_pct
}

/// The condition's GPU's used memory, in MiB (shared memory on a Jetson).
pub fn gpu_memory_mib(sample: &Sample, device: Device) -> Option<f64> {
    Some(gpu_of(sample, device)?.mem_used_bytes? as f64 / (1u64 << 20) as f64)
}

/// The machine's mean core load, in %.
pub fn cpu_load(sample: &Sample, _: Device) -> Option<f64> {
    sample.cpu_load_pct()
}

/// Per framework (in the order each first ran), each condition's curve of `figure` over its
/// last attempt; conditions without a point, and frameworks without a curve, are left out.
pub fn by_framework(stored: &Stored, figure: Figure) -> Vec<Group> {
    let mut by_attempt: HashMap<(&str, usize), Vec<&Sample>> = HashMap::new();
    for t in &stored.telemetry {
        by_attempt
            .entry((t.condition.as_str(), t.attempt))
            .or_default()
            .push(&t.sample);
    }
    let mut groups: Vec<Group> = Vec::new();
    for r in stored.runs.iter().filter(|r| r.last) {
        let c = &r.condition;
        let Some(samples) = by_attempt.get(&(c.id.as_str(), r.attempt)) else {
            continue;
        };
        let points: Vec<(f64, f64)> = samples
            .iter()
            .filter_map(|s| Some((s.t_s, figure(s, c.device)?)))
            .collect();
        if points.is_empty() {
            continue;
        }
        let label =
            c.id.strip_prefix(&format!("{}/", c.engine))
                .unwrap_or(&c.id)
                .to_string();
        let curve = Curve { label, points };
        match groups.iter_mut().find(|g| g.engine == c.engine) {
            Some(g) => g.curves.push(curve),
            None => groups.push(Group {
                engine: c.engine.clone(),
                curves: vec![curve],
            }),
        }
    }
    groups
}

/// `points` as `width` characters of a sparkline over their time span: each cell the mean of
/// the points in it (an empty cell repeats the one before), on a scale from 0 to `top`.
pub fn sparkline(points: &[(f64, f64)], width: usize, top: f64) -> String {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let width = width.max(1);
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return String::new();
    };
    let span = (last.0 - first.0).max(1e-9);
    let mut sums = vec![(0.0, 0usize); width];
    for &(t, v) in points {
        let cell = (((t - first.0) / span) * width as f64).floor() as usize;
        let cell = cell.min(width - 1);
        sums[cell].0 += v;
        sums[cell].1 += 1;
    }
    let mut previous = points[0].1;
    sums.iter()
        .map(|&(sum, n)| {
            if n > 0 {
                previous = sum / n as f64;
            }
            let level = (previous / top.max(1e-9) * LEVELS.len() as f64).floor() as usize;
            LEVELS[level.min(LEVELS.len() - 1)]
        })
        .collect()
}

/// A sparkline in plain ASCII (for terminals without block characters): `_.-=+*#@`.
pub fn ascii(spark: &str) -> String {
    spark
        .chars()
        .map(|c| match c {
            '▁' => '_',
            '▂' => '.',
            '▃' => '-',
            '▄' => '=',
            '▅' => '+',
            '▆' => '*',
            '▇' => '#',
            '█' => '@',
            other => other,
        })
        .collect()
}

/// The terminal's form: per framework, a line per condition with its curve as a sparkline,
/// its mean and its peak; `top` is the scale's top (100 for %), None for the largest value.
pub fn terminal(title: &str, unit: &str, groups: &[Group], top: Option<f64>) -> String {
    let mut out = format!("{title}\n");
    let top = top.unwrap_or_else(|| {
        groups
            .iter()
            .flat_map(|g| g.curves.iter().flat_map(|c| c.points.iter().map(|p| p.1)))
            .fold(0.0, f64::max)
    });
    let label_width = groups
        .iter()
        .flat_map(|g| g.curves.iter().map(|c| c.label.chars().count()))
        .max()
        .unwrap_or(0)
        .min(30);
    for g in groups {
        out.push_str(&format!("  {}\n", g.engine));
        for c in &g.curves {
            let values: Vec<f64> = c.points.iter().map(|p| p.1).collect();
            let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
            let peak = values.iter().copied().fold(f64::MIN, f64::max);
            out.push_str(&format!(
                "    {:<label_width$} {} mean {mean:.0} {unit}, peak {peak:.0} {unit}\n",
                crate::text::cut_middle(&c.label, label_width),
                sparkline(&c.points, 16, top),
            ));
        }
    }
    out
}

/// Every per-condition chart for the terminal (GPU load, GPU memory, the machine's CPU load),
/// each after an empty line; nothing when the telemetry has no GPU figures.
pub fn terminal_charts(stored: &Stored) -> String {
    if !crate::report::condition_charts_wanted(stored) {
        return String::new();
    }
    let gpu = by_framework(stored, gpu_load);
    let memory = by_framework(stored, gpu_memory_mib);
    let cpu = by_framework(stored, cpu_load);
    let mut out = String::new();
    for (title, unit, groups, top) in [
        ("GPU load per condition", "%", &gpu, Some(100.0)),
        ("GPU memory per condition", "MiB", &memory, None),
        ("machine CPU load per condition", "%", &cpu, Some(100.0)),
    ] {
        if !groups.is_empty() {
            out.push('\n');
            out.push_str(&terminal(title, unit, groups, top));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparkline_follows_its_points_over_their_time() {
        let ramp: Vec<(f64, f64)> = (0..=8).map(|i| (i as f64, i as f64 * 12.5)).collect();
        assert_eq!(sparkline(&ramp, 8, 100.0), "▁▂▃▄▅▆▇█");
        // Sparse points: the gaps repeat the value before.
        assert_eq!(sparkline(&[(0.0, 100.0), (10.0, 0.0)], 4, 100.0), "███▁");
        assert_eq!(sparkline(&[(0.0, 0.0), (10.0, 100.0)], 4, 100.0), "▁▁▁█");
        assert_eq!(sparkline(&[], 4, 100.0), "");
    }
}

//! Charts of a sweep: the data behind them (pure), drawn in the terminal (bars by
//! hand, lines with textplots' braille canvas) and as SVG files (plotters' SVG backend, which
//! writes text elements and needs no font library).

pub mod curves;
pub mod html;
pub mod roofline_chart;
pub mod scorecard;
pub mod svg;
pub mod text;

use crate::results::summary::Row;
use crate::results::{RunRecord, SampleRecord, TelemetryRecord};
use std::collections::HashMap;
use std::fmt::Write;

/// Bars side by side under one label: one bar per engine.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<(String, f64)>,
}

/// The condition without its engine, keeping only the parts that differ between conditions
/// (a sweep over one input size need not repeat it under every bar).
fn group_labels(rows: &[&Row]) -> Vec<String> {
    let parts = |r: &Row| {
        vec![
            r.model.clone(),
            r.input.clone(),
            format!("b{}", r.batch),
            format!("t{}", r.threads),
            r.device.clone(),
        ]
    };
    let all: Vec<Vec<String>> = rows.iter().map(|r| parts(r)).collect();
    let varies: Vec<bool> = (0..5)
        .map(|i| all.iter().any(|p| p[i] != all[0][i]))
        .collect();
    all.iter()
        .map(|p| {
            let kept: Vec<&str> = p
                .iter()
                .enumerate()
                .filter(|(i, _)| *i == 0 || varies[*i])
                .map(|(_, s)| s.as_str())
                .collect();
            kept.join(" ")
        })
        .collect()
}

/// Groups a per-condition figure by model × input (…) with a bar per engine, in plan order.
pub fn groups(rows: &[Row], value: impl Fn(&Row) -> Option<f64>) -> Vec<BarGroup> {
    let ok: Vec<&Row> = rows.iter().filter(|r| r.status == "ok").collect();
    let labels = group_labels(&ok);
    let mut out: Vec<BarGroup> = Vec::new();
    for (row, label) in ok.iter().zip(labels) {
        let Some(v) = value(row) else { continue };
        // A bar per engine, and per precision where there are several.
        let bar = if row.precision == "fp32" {
            row.engine.clone()
        } else {
            format!("{} {}", row.engine, row.precision)
        };
        match out.iter_mut().find(|g| g.label == label) {
            Some(g) => g.bars.push((bar, v)),
            None => out.push(BarGroup {
                label,
                bars: vec![(bar, v)],
            }),
        }
    }
    out
}

pub fn latency_groups(rows: &[Row]) -> Vec<BarGroup> {
    groups(rows, |r| r.mean_ms)
}

pub fn memory_groups(rows: &[Row]) -> Vec<BarGroup> {
    groups(rows, |r| {
        r.peak_rss_bytes.map(|b| b as f64 / (1u64 << 20) as f64)
    })
}

/// A figure over the sweep's time: the attempts laid end to end in the order they ran, each
/// sample at its attempt's start plus its own time.
pub fn timeline<T: Timed>(
    runs: &[RunRecord],
    samples: &[T],
    value: impl Fn(&T) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let mut by_attempt: HashMap<(&str, usize), Vec<&T>> = HashMap::new();
    for s in samples {
        by_attempt.entry(s.attempt_key()).or_default().push(s);
    }
    let mut offset = 0.0;
    let mut points = Vec::new();
    for r in runs {
        if let Some(list) = by_attempt.get(&(r.condition.id.as_str(), r.attempt)) {
            for s in list {
                if let Some(v) = value(s) {
                    points.push((offset + s.t_s(), v));
                }
            }
        }
        offset += r.resources.wall_s;
    }
    points
}

/// A stored sample of one attempt, placed in time from that attempt's start.
pub trait Timed {
    fn attempt_key(&self) -> (&str, usize);
    fn t_s(&self) -> f64;
}

impl Timed for SampleRecord {
    fn attempt_key(&self) -> (&str, usize) {
        (&self.condition, self.attempt)
    }
    fn t_s(&self) -> f64 {
        self.sample.t_s
    }
}

impl Timed for TelemetryRecord {
    fn attempt_key(&self) -> (&str, usize) {
        (&self.condition, self.attempt)
    }
    fn t_s(&self) -> f64 {
        self.sample.t_s
    }
}

/// The machine's mean core load (% of one core), as the telemetry sources saw it.
pub fn system_cpu_timeline(runs: &[RunRecord], telemetry: &[TelemetryRecord]) -> Vec<(f64, f64)> {
    timeline(runs, telemetry, |s| s.sample.cpu_load_pct())
}

/// The first GPU's load in %.
pub fn gpu_timeline(runs: &[RunRecord], telemetry: &[TelemetryRecord]) -> Vec<(f64, f64)> {
    timeline(runs, telemetry, |s| s.sample.gpus.first()?.load_pct)
}

/// The machine's used memory in MiB.
pub fn system_memory_timeline(
    runs: &[RunRecord],
    telemetry: &[TelemetryRecord],
) -> Vec<(f64, f64)> {
    timeline(runs, telemetry, |s| {
        s.sample
            .mem_used_bytes
            .map(|b| b as f64 / (1u64 << 20) as f64)
    })
}

/// The first GPU's used memory in MiB (the shared NvMap memory on a Jetson).
pub fn gpu_memory_timeline(runs: &[RunRecord], telemetry: &[TelemetryRecord]) -> Vec<(f64, f64)> {
    timeline(runs, telemetry, |s| {
        let bytes = s.sample.gpus.first()?.mem_used_bytes?;
        Some(bytes as f64 / (1u64 << 20) as f64)
    })
}

pub fn cpu_timeline(runs: &[RunRecord], samples: &[SampleRecord]) -> Vec<(f64, f64)> {
    timeline(runs, samples, |s| s.sample.cpu_pct)
}

pub fn rss_timeline(runs: &[RunRecord], samples: &[SampleRecord]) -> Vec<(f64, f64)> {
    timeline(runs, samples, |s| {
        s.sample.rss_bytes.map(|b| b as f64 / (1u64 << 20) as f64)
    })
}

/// Horizontal bars in the terminal, scaled to the largest value.
pub fn terminal_bars(title: &str, unit: &str, groups: &[BarGroup], width: usize) -> String {
    let mut out = format!("{title}\n");
    let max = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.1))
        .fold(0.0f64, f64::max);
    if groups.is_empty() || max <= 0.0 {
        out.push_str("  (nothing to show)\n");
        return out;
    }
    let name_width = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.0.chars().count()))
        .max()
        .unwrap_or(0);
    const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    for g in groups {
        let _ = writeln!(out, "  {}", g.label);
        for (name, v) in &g.bars {
            let cells = v / max * width as f64;
            let full = cells.floor() as usize;
            let part = ((cells - full as f64) * 8.0).floor() as usize;
            let mut bar = "█".repeat(full);
            if part > 0 {
                bar.push(EIGHTHS[part.min(7)]);
            }
            let _ = writeln!(out, "    {name:<name_width$} {bar} {v:.2} {unit}");
        }
    }
    out
}

/// A line over time on textplots' braille canvas.
pub fn terminal_line(title: &str, points: &[(f64, f64)]) -> String {
    terminal_line_xy(title, "time (s) →", points)
}

/// A line on textplots' braille canvas, the x axis named by `x_label`.
pub fn terminal_line_xy(title: &str, x_label: &str, points: &[(f64, f64)]) -> String {
    terminal_lines_xy(title, x_label, &[points])
}

/// Several lines on one terminal chart (e.g. a measured figure and its ideal), on shared axes.
pub fn terminal_lines_xy(title: &str, x_label: &str, series: &[&[(f64, f64)]]) -> String {
    let mut out = format!("{title}\n");
    if series.iter().all(|points| points.len() < 2) {
        out.push_str("  (not enough samples)\n");
        return out;
    }
    let all: Vec<Vec<(f32, f32)>> = series
        .iter()
        .map(|points| {
            points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .map(|&(x, y)| (x as f32, y as f32))
                .collect()
        })
        .collect();
    let xmax = all
        .iter()
        .flatten()
        .map(|p| p.0)
        .fold(0.0f32, f32::max)
        .max(1e-3);
    let ymax = all
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(0.0f32, f32::max)
        .max(1.0)
        * 1.05;
    let shapes: Vec<textplots::Shape> = all.iter().map(|p| textplots::Shape::Lines(p)).collect();
    let mut chart = textplots::Chart::new_with_y_range(120, 40, 0.0, xmax, 0.0, ymax);
    let mut plot = &mut chart;
    for shape in &shapes {
        plot = textplots::Plot::lineplot(plot, shape);
    }
    plot.axis();
    plot.figures();
    out.push_str(&plot.to_string());
    out.push_str(&format!("  {x_label}\n"));
    out
}

/// One of a results directory's charts.
pub struct Chart {
    /// Its file under `charts/`.
    pub file: &'static str,
    /// What it shows, in a few words.
    pub caption: &'static str,
    pub svg: String,
}

/// The seeds' chart set: latency and peak memory per condition, utilisation and memory over
/// the sweep.
pub fn charts(stored: &crate::results::Stored, rows: &[Row]) -> crate::error::Result<Vec<Chart>> {
    let cpu = cpu_timeline(&stored.runs, &stored.samples);
    let rss = rss_timeline(&stored.runs, &stored.samples);
    let system_cpu = system_cpu_timeline(&stored.runs, &stored.telemetry);
    let gpu = gpu_timeline(&stored.runs, &stored.telemetry);
    let system_memory = system_memory_timeline(&stored.runs, &stored.telemetry);
    let gpu_memory = gpu_memory_timeline(&stored.runs, &stored.telemetry);
    // Lines with no points (no GPU here, an older results directory) are left off the chart.
    type Series<'a> = (&'static str, &'a [(f64, f64)]);
    fn present<'a>(lines: [Series<'a>; 3]) -> Vec<Series<'a>> {
        lines
            .into_iter()
            .filter(|(_, points)| !points.is_empty())
            .collect()
    }
    let utilisation = present([
        ("worker CPU (% of one core)", &cpu),
        ("machine CPU (mean core, %)", &system_cpu),
        ("GPU (%)", &gpu),
    ]);
    let memory = present([
        ("worker RSS", &rss),
        ("machine memory used", &system_memory),
        ("GPU memory used", &gpu_memory),
    ]);
    let latency = "Mean latency per condition (mean of repeat means)";
    let peak = "Peak resident memory of the worker";
    let over_time = "CPU and GPU utilisation over the sweep";
    let memory_title = "Memory over the sweep";
    let mut charts = vec![
        Chart {
            file: "latency.svg",
            caption: latency,
            svg: svg::bars(latency, "ms", &latency_groups(rows))?,
        },
        Chart {
            file: "peak_memory.svg",
            caption: peak,
            svg: svg::bars(peak, "MiB", &memory_groups(rows))?,
        },
        Chart {
            file: "cpu_utilization.svg",
            caption: over_time,
            svg: svg::lines(over_time, "%", &utilisation)?,
        },
        Chart {
            file: "memory.svg",
            caption: memory_title,
            svg: svg::lines(memory_title, "MiB", &memory)?,
        },
    ];
    charts.extend(condition_charts(stored)?);
    Ok(charts)
}

/// Per-condition curves of GPU load, GPU memory and the machine's CPU load, a panel per
/// framework, when the telemetry has GPU figures (without a GPU there is nothing per model to
/// compare that the sweep's CPU chart does not show).
pub fn condition_charts(stored: &crate::results::Stored) -> crate::error::Result<Vec<Chart>> {
    if !condition_charts_wanted(stored) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (file, caption, figure, unit) in CONDITION_CURVES {
        let groups = curves::by_framework(stored, figure);
        if groups.is_empty() {
            continue;
        }
        let panels: Vec<svg::Panel> = groups
            .iter()
            .map(|g| {
                let lines = g
                    .curves
                    .iter()
                    .map(|c| (c.label.as_str(), c.points.as_slice()))
                    .collect();
                (g.engine.as_str(), lines)
            })
            .collect();
        out.push(Chart {
            file,
            caption,
            svg: svg::panels(caption, unit, &panels)?,
        });
    }
    Ok(out)
}

/// Whether a results directory's telemetry has GPU figures, for per-condition curves.
pub fn condition_charts_wanted(stored: &crate::results::Stored) -> bool {
    stored.telemetry.iter().any(|t| {
        t.sample
            .gpus
            .iter()
            .any(|g| g.load_pct.is_some() || g.mem_used_bytes.is_some())
    })
}

/// The per-condition charts: file, caption, figure, unit.
pub const CONDITION_CURVES: [(&str, &str, curves::Figure, &str); 3] = [
    (
        "gpu_per_condition.svg",
        "GPU load per condition, by framework",
        curves::gpu_load,
        "%",
    ),
    (
        "gpu_memory_per_condition.svg",
        "GPU memory per condition, by framework",
        curves::gpu_memory_mib,
        "MiB",
    ),
    (
        "cpu_per_condition.svg",
        "Machine CPU load per condition, by framework",
        curves::cpu_load,
        "%",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn row(engine: &str, model: &str, input: &str, mean: f64) -> Row {
        let c = crate::protocol::Condition::new(
            engine,
            crate::config::ModelRef::Zoo(model.into()),
            match input.parse() {
                Ok(s) => s,
                Err(e) => panic!("{e}"),
            },
            1,
            0,
            crate::config::Device::Cpu,
        );
        let mut r = crate::results::summary::tests_support::row(&c, "ok");
        r.mean_ms = Some(mean);
        r
    }

    #[test]
    fn bars_group_by_condition_with_one_bar_per_engine() {
        let rows = vec![
            row("tract", "resnet34", "3x32x32", 2.0),
            row("tract", "resnet34", "3x64x64", 6.0),
            row("command", "resnet34", "3x32x32", 3.0),
        ];
        let g = latency_groups(&rows);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].label, "resnet34 3x32x32");
        assert_eq!(
            g[0].bars,
            vec![("tract".to_string(), 2.0), ("command".to_string(), 3.0)]
        );
        let text = terminal_bars("mean latency", "ms", &g, 12);
        // The largest value fills the width; 3 of 6 fills half.
        assert!(
            text.contains(&format!("{} 6.00 ms", "█".repeat(12))),
            "{text}"
        );
        assert!(
            text.contains(&format!("command {} 3.00 ms", "█".repeat(6))),
            "{text}"
        );
        assert!(terminal_bars("x", "ms", &[], 10).contains("nothing to show"));
    }

    #[test]
    fn timelines_lay_attempts_end_to_end() {
        let c = crate::protocol::Condition::new(
            "tract",
            crate::config::ModelRef::Zoo("resnet34".into()),
            crate::models::InputShape::default(),
            1,
            0,
            crate::config::Device::Cpu,
        );
        let record = |attempt, wall_s| RunRecord {
            attempt,
            last: attempt == 2,
            resources: crate::protocol::Resources {
                wall_s,
                ..Default::default()
            },
            ..RunRecord::bare(c.clone())
        };
        let sample = |attempt, t_s, cpu| SampleRecord {
            condition: c.id.clone(),
            attempt,
            sample: crate::collect::proc::ProcSample {
                t_s,
                cpu_pct: Some(cpu),
                rss_bytes: None,
                hwm_bytes: None,
                mem_used_bytes: None,
                mem_total_bytes: None,
            },
        };
        let runs = vec![record(1, 2.0), record(2, 1.0)];
        let samples = vec![sample(1, 0.5, 100.0), sample(2, 0.5, 50.0)];
        assert_eq!(
            cpu_timeline(&runs, &samples),
            vec![(0.5, 100.0), (2.5, 50.0)]
        );
        // Telemetry samples are placed the same way; a sample without the figure is left out.
        let telemetry = |attempt, t_s, gpu: Option<f64>| TelemetryRecord {
            condition: c.id.clone(),
            attempt,
            sample: crate::collect::telemetry::Sample {
                t_s,
                gpus: gpu
                    .map(|load| crate::collect::telemetry::Gpu {
                        load_pct: Some(load),
                        mem_used_bytes: Some(3 << 20),
                        ..Default::default()
                    })
                    .into_iter()
                    .collect(),
                ..Default::default()
            },
        };
        let t = vec![
            telemetry(1, 0.25, Some(80.0)),
            telemetry(1, 0.5, None),
            telemetry(2, 0.75, Some(20.0)),
        ];
        assert_eq!(gpu_timeline(&runs, &t), vec![(0.25, 80.0), (2.75, 20.0)]);
        assert_eq!(
            gpu_memory_timeline(&runs, &t),
            vec![(0.25, 3.0), (2.75, 3.0)]
        );
        assert!(system_cpu_timeline(&runs, &t).is_empty());
        assert!(terminal_line("cpu", &[(0.0, 1.0)]).contains("not enough"));
        assert!(terminal_line("cpu", &cpu_timeline(&runs, &samples)).contains("time (s)"));
    }
}

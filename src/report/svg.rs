//! SVG charts through plotters' SVG backend: horizontal grouped bars (one row per condition and
//! engine, rows of a group adjacent, colour by engine) and lines over time.

use crate::report::BarGroup;
use plotters::prelude::*;

const WIDTH: u32 = 960;
/// Engine colours, in order of first appearance (a colour-blind-safe palette).
const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
];

fn chart_error(e: impl std::fmt::Display) -> crate::error::Error {
    crate::error::failed!("cannot draw the chart: {e}")
}

/// Horizontal bars, one row per (group, engine), as SVG text.
pub fn bars(title: &str, unit: &str, groups: &[BarGroup]) -> crate::error::Result<String> {
    let rows: Vec<(String, &str, f64)> = groups
        .iter()
        .flat_map(|g| {
            g.bars
                .iter()
                .map(move |(engine, v)| (format!("{} · {engine}", g.label), engine.as_str(), *v))
        })
        .collect();
    let mut engines: Vec<&str> = Vec::new();
    for (_, e, _) in &rows {
        if !engines.contains(e) {
            engines.push(e);
        }
    }
    let n = rows.len().max(1) as u32;
    let height = 120 + 26 * n;
    let max = rows.iter().map(|r| r.2).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let label_width = rows
        .iter()
        .map(|r| r.0.chars().count() as u32 * 7 + 16)
        .max()
        .unwrap_or(60)
        .clamp(60, 480);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width)
            .build_cartesian_2d(0f64..max, (0u32..n).into_segmented())
            .map_err(chart_error)?;
        let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        let label_of = move |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows.len().max(1))
            .y_label_formatter(&label_of)
            .x_desc(unit)
            .draw()
            .map_err(chart_error)?;
        for (k, engine) in engines.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            chart
                .draw_series(rows.iter().enumerate().filter(|(_, r)| r.1 == *engine).map(
                    |(i, r)| {
                        let i = i as u32;
                        let mut bar = Rectangle::new(
                            [
                                (0.0, SegmentValue::Exact(i)),
                                (r.2, SegmentValue::Exact(i + 1)),
                            ],
                            colour.filled(),
                        );
                        bar.set_margin(3, 3, 0, 0);
                        bar
                    },
                ))
                .map_err(chart_error)?
                .label(*engine)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

/// Lines over time, one per named series, as SVG text.
pub fn lines(
    title: &str,
    y_desc: &str,
    series: &[(&str, &[(f64, f64)])],
) -> crate::error::Result<String> {
    lines_xy(title, "time (s)", y_desc, series)
}

/// Lines, one per named series, as SVG text, the x axis described by `x_desc`.
pub fn lines_xy(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(&str, &[(f64, f64)])],
) -> crate::error::Result<String> {
    let xmax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        line_chart(&root, (title, 20), (x_desc, y_desc), (xmax, ymax), series)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

/// Named lines on `area` under a caption of that size, with axes described and a legend, on a
/// scale from 0 to the given maxima.
fn line_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    (caption, size): (&str, u32),
    (x_desc, y_desc): (&str, &str),
    (xmax, ymax): (f64, f64),
    series: &[(&str, &[(f64, f64)])],
) -> crate::error::Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", size))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(chart_error)?;
    for (k, (name, points)) in series.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(chart_error)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(chart_error)?;
    Ok(())
}

/// A panel of [`panels`]: its name and its named lines.
pub type Panel<'a> = (&'a str, Vec<(&'a str, &'a [(f64, f64)])>);

/// Lines over time in one panel per group (a framework's conditions, say), stacked under one
/// title, each panel with its own legend, on a shared scale, as SVG text.
pub fn panels(title: &str, y_desc: &str, groups: &[Panel]) -> crate::error::Result<String> {
    let all = || {
        groups
            .iter()
            .flat_map(|g| g.1.iter().flat_map(|s| s.1.iter()))
    };
    let xmax = all().map(|p| p.0).fold(0.0f64, f64::max).max(1e-3);
    let ymax = all().map(|p| p.1).fold(0.0f64, f64::max).max(1.0) * 1.05;
    let panel_height = 300u32;
    let height = 50 + panel_height * groups.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let root = root
            .titled(title, ("sans-serif", 20))
            .map_err(chart_error)?;
        let areas = root.split_evenly((groups.len().max(1), 1));
        for ((name, series), area) in groups.iter().zip(areas.iter()) {
            line_chart(
                area,
                (name, 16),
                ("time in the condition (s)", y_desc),
                (xmax, ymax),
                series,
            )?;
        }
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

/// The roofline, log-log, as SVG text: a slanted roof per memory level bending into the
/// compute roof at its ridge, flat roofs per precision, and each program's points lettered as in
/// the terminal chart.
pub fn roofline(
    ceilings: &crate::roofline::Ceilings,
    precision: crate::roofline::Precision,
    programs: &[crate::roofline::Program],
) -> crate::error::Result<String> {
    use crate::roofline::{Level, Precision};
    let marks = crate::report::roofline_chart::marks(programs);
    let peak = ceilings.peak(precision).unwrap_or(1e9);
    let levels: Vec<(Level, f64)> = [Level::L1, Level::L2, Level::L3, Level::Dram]
        .iter()
        .filter_map(|&l| ceilings.bandwidth(l).map(|bw| (l, bw)))
        .collect();
    let xs = levels
        .iter()
        .map(|(_, bw)| peak / bw)
        .chain(marks.iter().map(|m| m.intensity))
        .chain([0.1, 10.0]);
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let x_min = 10f64.powf(x_lo.log10().floor());
    let x_max = 10f64.powf(x_hi.log10().ceil());
    let ys = levels
        .iter()
        .map(|(_, bw)| bw * x_min)
        .chain(marks.iter().map(|m| m.flops_per_s))
        .chain([peak]);
    let (y_lo, y_hi) = ys.fold((f64::INFINITY, 0.0f64), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    let y_min = 10f64.powf(y_lo.log10().floor());
    let y_max = 10f64.powf(y_hi.log10().ceil());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Roofline ({precision})"), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x_min..x_max).log_scale(),
                (y_min / 1e9..y_max / 1e9).log_scale(),
            )
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (FLOP/byte)")
            .y_desc("GFLOP/s")
            .draw()
            .map_err(chart_error)?;
        for (k, (level, bw)) in levels.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let ridge = (peak / bw).clamp(x_min, x_max);
            chart
                .draw_series(LineSeries::new(
                    [(x_min, bw * x_min / 1e9), (ridge, bw * ridge / 1e9)],
                    colour.stroke_width(2),
                ))
                .map_err(chart_error)?
                .label(format!("{level} {:.1} GB/s", bw / 1e9))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        }
        // Every precision's roof within the chart's height (its own sets the height).
        for p in Precision::ALL {
            if let Some(v) = ceilings.peak(p).filter(|&v| v <= y_max) {
                let start = levels
                    .iter()
                    .map(|(_, bw)| (v / bw).clamp(x_min, x_max))
                    .fold(x_max, f64::min);
                chart
                    .draw_series(LineSeries::new(
                        [(start, v / 1e9), (x_max, v / 1e9)],
                        BLACK.stroke_width(2),
                    ))
                    .map_err(chart_error)?
                    .label(format!("{p} peak {:.1} G{}/s", v / 1e9, p.op()))
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
            }
        }
        chart
            .draw_series(marks.iter().map(|m| {
                EmptyElement::at((m.intensity, m.flops_per_s / 1e9))
                    + Circle::new((0, 0), 4, RED.filled())
                    + Text::new(m.letter.to_string(), (6, -14), ("sans-serif", 14))
            }))
            .map_err(chart_error)?;
        // A legend entry per program, so the letters can be read without the terminal output.
        for (i, p) in programs.iter().enumerate() {
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(chart_error)?
                .label(format!(
                    "{}  {}",
                    crate::report::roofline_chart::letter(i),
                    p.label
                ))
                .legend(|(x, y)| Circle::new((x + 8, y), 4, RED.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_chart_is_svg_with_every_label() {
        let groups = vec![
            BarGroup {
                label: "resnet34".into(),
                bars: vec![("tract".into(), 2.0), ("command".into(), 3.0)],
            },
            BarGroup {
                label: "vgg19".into(),
                bars: vec![("tract".into(), 9.0)],
            },
        ];
        let svg = match bars("mean latency", "ms", &groups) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert!(svg.starts_with("<svg"), "{}", &svg[..60.min(svg.len())]);
        for text in [
            "mean latency",
            "resnet34 · tract",
            "resnet34 · command",
            "vgg19 · tract",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(svg.matches("<rect").count() >= 3);
    }

    #[test]
    fn line_chart_is_svg_and_copes_with_no_data() {
        let points = [(0.0, 10.0), (1.0, 180.0), (2.0, 195.0)];
        let svg = match lines("CPU", "% of one core", &[("worker", &points)]) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert!(
            svg.contains("<polyline") || svg.contains("<path"),
            "no line drawn"
        );
        assert!(svg.contains("time (s)"));
        assert!(lines("CPU", "%", &[]).is_ok());
        assert!(bars("empty", "ms", &[]).is_ok());
    }

    #[test]
    fn roofline_chart_is_svg_with_roofs_and_points() {
        let (c, programs) = crate::report::roofline_chart::tests::sample();
        let svg = match roofline(&c, crate::roofline::Precision::Fp32, &programs) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        for text in [
            "Roofline (fp32)",
            "DRAM 10.0 GB/s",
            "fp32 peak 100.0 GFLOP/s",
            ">\nA\n</text>",
            ">\nB\n</text>",
            "A  resnet",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
    }
}

//! The Results tab: the stored sweep's summary rows, sortable.

use super::*;
use edgeprof::results::compare::Verdict;

pub(super) fn opt(v: Option<f64>, places: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.places$}"))
}

/// The selected condition in one line: its median with the interval, and why its verdict is
/// what it is (or why it failed).
fn selected_line(r: &edgeprof::results::summary::Row) -> String {
    let mut parts = Vec::new();
    if let Some(m) = r.median_ms {
        parts.push(match r.median_ci_ms {
            Some(ci) => format!("median {m:.3} ms ±{ci:.3}"),
            None => format!("median {m:.3} ms"),
        });
    }
    if let (Some(word), Some(why)) = (&r.verdict, &r.verdict_reason) {
        parts.push(format!("{word}: {why}"));
    }
    if r.target_reached == Some(false) {
        parts.push("interval target not reached".to_string());
    }
    if let Some(reason) = &r.reason {
        parts.push(reason.clone());
    }
    parts.join(" · ")
}

pub(super) fn draw_results(frame: &mut Frame, app: &App, area: Rect) {
    let res = &app.results;
    let Some(dir) = &res.dir else {
        let text = match &res.error {
            Some(e) => vec![Line::from(Span::styled(e.clone(), app.theme.error()))],
            None => vec![Line::from(Span::styled(
                "no results open: finish a run, or press o and give a results directory",
                app.theme.muted(),
            ))],
        };
        frame.render_widget(
            Paragraph::new(text)
                .wrap(Wrap { trim: true })
                .block(block(app, "Results", true)),
            area,
        );
        return;
    };
    let [table_area, charts] =
        Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(area);
    // Names without the parts every shown condition shares, which the title says once.
    let ids: Vec<String> = res.rows.iter().map(|r| r.id.clone()).collect();
    let (names, pattern) = edgeprof::text::varying_parts(&ids);
    let mut title = format!("Results: {}", dir.display());
    if let Some(p) = &pattern {
        title.push_str(&format!(" · every condition is {p}"));
    }
    if res.rows.len() < res.all.len() {
        title.push_str(&format!(" · {} of {} shown", res.rows.len(), res.all.len()));
    }
    let b = block(app, &title, true);
    let inner = b.inner(table_area);
    frame.render_widget(b, table_area);
    // Each column holds its name and the sort marker.
    let mut widths = [0usize, 9, 9, 9, 9, 8, 9, 5];
    for (w, name) in widths.iter_mut().zip(RESULT_COLUMNS).skip(1) {
        *w = (*w).max(name.chars().count() + 1);
    }
    // Under 100 columns p99 and CPU % make room for the names (the detail pane has them).
    let shown: Vec<usize> = if inner.width < 100 {
        vec![0, 1, 2, 3, 5, 6]
    } else {
        (0..widths.len()).collect()
    };
    let id_width = (inner.width as usize)
        .saturating_sub(shown.iter().map(|&k| widths[k] + 1).sum::<usize>())
        .max(12);
    let cell = |k: usize, text: String| -> String {
        let w = if k == 0 { id_width } else { widths[k] };
        let t = if k == 0 {
            edgeprof::text::cut_parts(&text, w)
        } else {
            text.chars().take(w).collect()
        };
        if k <= 1 {
            format!("{t:<w$}")
        } else {
            format!("{t:>w$}")
        }
    };
    let arrow = if res.descending { "v" } else { "^" };
    let header: Vec<Span> = RESULT_COLUMNS
        .iter()
        .enumerate()
        .filter(|(k, _)| shown.contains(k))
        .map(|(k, name)| {
            let name = if k == res.sort {
                format!("{name}{arrow}")
            } else {
                name.to_string()
            };
            let style = if k == res.sort {
                app.theme.accent().add_modifier(Modifier::BOLD)
            } else {
                app.theme.accent()
            };
            Span::styled(format!("{} ", cell(k, name)), style)
        })
        .collect();
    let mut lines = vec![Line::from(header)];
    // The header, the rows, and a line on the selected condition.
    let rows = (inner.height as usize).saturating_sub(2);
    let first = res.selected.saturating_sub(rows.saturating_sub(1));
    for (k, r) in res.rows.iter().enumerate().skip(first).take(rows) {
        // Against the baseline: * the baseline, + slower, - faster, = no significant difference.
        let mark = match (&res.baseline, res.versus.get(&r.id)) {
            (Some(b), _) if *b == r.id => "* ",
            (Some(_), Some(c)) => match c.verdict {
                Verdict::Slower => "+ ",
                Verdict::Faster => "- ",
                Verdict::NoSignificantDifference => "= ",
                Verdict::Unpaired => "  ",
                Verdict::Withheld => "? ",
            },
            _ => "",
        };
        let name = names.get(k).map_or(r.id.as_str(), String::as_str);
        let values = [
            format!("{mark}{name}"),
            crate::tui::app::status_word(r).to_string(),
            opt(r.median_ms, 3),
            opt(r.mean_ms, 3),
            opt(r.p99_ms, 3),
            opt(r.inferences_per_s, 1),
            r.peak_rss_bytes.map_or("-".into(), render::bytes),
            opt(r.cpu_mean_pct, 0),
        ];
        let text: Vec<String> = values
            .into_iter()
            .enumerate()
            .filter(|(c, _)| shown.contains(c))
            .map(|(c, v)| cell(c, v))
            .collect();
        let style = if k == res.selected {
            app.theme.selected()
        } else if r.status != "ok" {
            app.theme.error()
        } else if matches!(
            r.verdict.as_deref(),
            Some("disturbed" | "throttled" | "noisy")
        ) {
            app.theme.warn()
        } else {
            app.theme.text()
        };
        lines.push(Line::from(Span::styled(text.join(" "), style)));
    }
    if let Some(r) = res.rows.get(res.selected) {
        let mut text = selected_line(r);
        if let (Some(base), Some(c)) = (&res.baseline, res.versus.get(&r.id)) {
            if let (Some(ratio), Some(low), Some(high)) = (c.ratio, c.low, c.high) {
                text = format!(
                    "{} vs {base}: ×{ratio:.3} [{low:.3}, {high:.3}] · {text}",
                    c.verdict.words()
                );
            }
        }
        lines.push(Line::from(Span::styled(text, app.theme.muted())));
    }
    if res.rows.is_empty() {
        lines.push(Line::from(Span::styled(
            "this directory has no conditions",
            app.theme.muted(),
        )));
    }
    frame.render_widget(Paragraph::new(lines), inner);
    if res.detail {
        draw_detail(frame, app, charts);
        return;
    }
    let [bars, lines_area] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(charts);
    let b = block(app, "Mean latency (ms) and peak RSS (MiB)", false);
    let inner = b.inner(bars);
    frame.render_widget(b, bars);
    let width = (inner.width as usize).saturating_sub(30).clamp(6, 40);
    let mut text = edgeprof::report::terminal_bars(
        "mean latency",
        "ms",
        &edgeprof::report::latency_groups(&res.rows),
        width,
    );
    text.push_str(&edgeprof::report::terminal_bars(
        "peak RSS",
        "MiB",
        &edgeprof::report::memory_groups(&res.rows),
        width,
    ));
    if app.ascii {
        text = text.replace(['█', '▉', '▊', '▋', '▌', '▍', '▎', '▏'], "#");
    }
    frame.render_widget(Paragraph::new(text).style(app.theme.text()), inner);
    let b = block(app, "Utilisation over the sweep (%)", false);
    let inner = b.inner(lines_area);
    frame.render_widget(b, lines_area);
    let present: Vec<&(String, Vec<(f64, f64)>)> = res
        .utilisation
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if present.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("no samples stored", app.theme.muted())),
            inner,
        );
        return;
    }
    let each = (inner.height / present.len() as u16).max(2);
    for (k, (name, points)) in present.iter().enumerate() {
        let y = inner.y + each * k as u16;
        if y + 1 >= inner.y + inner.height {
            break;
        }
        let label = Rect::new(inner.x, y, inner.width, 1);
        let chart = Rect::new(inner.x, y + 1, inner.width, each.saturating_sub(1));
        let last = points.last().map_or(0.0, |p| p.1);
        frame.render_widget(
            Paragraph::new(Span::styled(
                format!("{name} (last {last:.0})"),
                Style::default().fg(app.theme.series(k)),
            )),
            label,
        );
        // Resampled to the width: the mean of the points falling in each column.
        let width = chart.width.max(1) as usize;
        let t_max = points.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
        let mut sums = vec![(0.0, 0usize); width];
        for (t, v) in points.iter() {
            let col = ((t / t_max) * (width - 1) as f64).round() as usize;
            sums[col.min(width - 1)].0 += v;
            sums[col.min(width - 1)].1 += 1;
        }
        let data: Vec<u64> = sums
            .iter()
            .map(|(s, n)| {
                if *n > 0 {
                    (s / *n as f64).round() as u64
                } else {
                    0
                }
            })
            .collect();
        let max = data.iter().copied().max().unwrap_or(1).max(100);
        frame.render_widget(sparkline(app, &data, Some(max), k), chart);
    }
}

/// The selected condition's every figure, its verdict and why, why it failed and what its
/// worker said last, and its timed iterations as a small chart (Enter shows it, Enter or Esc
/// goes back to the charts).
fn draw_detail(frame: &mut Frame, app: &App, area: Rect) {
    let res = &app.results;
    let Some(r) = res.rows.get(res.selected) else {
        frame.render_widget(
            Paragraph::new(Span::styled("no condition selected", app.theme.muted())).block(block(
                app,
                "Condition",
                false,
            )),
            area,
        );
        return;
    };
    let title = format!("{} (Enter: charts; PgUp/PgDn scroll)", r.id);
    let b = block(app, &title, false);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let ms = |label: &str, v: Option<f64>| v.map(|x| format!("{label} {x:.3} ms"));
    let figures: Vec<String> = [
        r.median_ms.map(|m| match r.median_ci_ms {
            Some(ci) => format!("median {m:.3} ms ±{ci:.3}"),
            None => format!("median {m:.3} ms"),
        }),
        r.mean_ms.map(|m| match r.mean_spread_ms {
            Some(s) => format!("mean {m:.3} ms ± {s:.3}"),
            None => format!("mean {m:.3} ms"),
        }),
        ms("trimmed mean", r.trimmed_mean_ms),
        ms("MAD", r.mad_ms),
        ms("std", r.std_ms),
        ms("p90", r.p90_ms),
        ms("p99", r.p99_ms),
        ms("min", r.min_ms),
        ms("max", r.max_ms),
        ms("first inference", r.first_inference_ms),
        ms("load", r.init_ms),
        r.inferences_per_s.map(|v| format!("{v:.1} inferences/s")),
        r.iterations
            .zip(r.repeats)
            .map(|(i, n)| format!("{i} timed iterations in {n} repeat(s)")),
        r.outliers
            .filter(|&n| n > 0)
            .map(|n| format!("{n} outliers")),
        r.cv.map(|cv| format!("CV {:.1} %", cv * 100.0)),
        r.peak_rss_bytes
            .map(|b| format!("peak RSS {}", render::bytes(b))),
        r.cpu_mean_pct.map(|c| format!("CPU {c:.0} % of a core")),
        r.engine_version
            .as_ref()
            .map(|v| format!("{} {v}", r.engine)),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Its verdict (or why it failed) first, then every figure.
    let status = crate::tui::app::status_word(r);
    let mut lines = vec![match (&r.verdict_reason, &r.reason) {
        (Some(why), _) => Line::from(Span::styled(format!("{status}: {why}"), app.theme.warn())),
        (None, Some(why)) => {
            Line::from(Span::styled(format!("{status}: {why}"), app.theme.error()))
        }
        (None, None) => Line::from(Span::styled(status.to_string(), app.theme.muted())),
    }];
    // Its telemetry over its own time, where the directory has GPU figures.
    for (what, unit, points) in res.curves.get(&r.id).into_iter().flatten() {
        let values = points.iter().map(|p| p.1);
        let mean = values.clone().sum::<f64>() / points.len().max(1) as f64;
        let peak = values.fold(f64::MIN, f64::max);
        let top = if *unit == "%" { 100.0 } else { peak };
        let spark = edgeprof::report::curves::sparkline(points, 24, top);
        let spark = if app.ascii {
            edgeprof::report::curves::ascii(&spark)
        } else {
            spark
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{what:<12} "), app.theme.muted()),
            Span::styled(spark, app.theme.text()),
            Span::styled(
                format!(" mean {mean:.0} {unit}, peak {peak:.0} {unit}"),
                app.theme.muted(),
            ),
        ]));
    }
    lines.push(Line::from(Span::styled(
        figures.join(" · "),
        app.theme.text(),
    )));
    // A lower precision: what it cost in accuracy against its fp32 twin.
    if let Some(a) = res.accuracy.get(&r.id) {
        let said = match &a.figures {
            Some(_) => {
                let [top1, top5, max, mean, cosine] = edgeprof::results::accuracy::cells(a);
                format!(
                    "{} against fp32: top-1 agreement {top1} · top-5 {top5} · max |err| {max} · \
                     mean |err| {mean} · cosine {cosine}",
                    a.precision
                )
            }
            None => format!(
                "{} against fp32: {}",
                a.precision,
                a.note.as_deref().unwrap_or("no figures")
            ),
        };
        lines.push(Line::from(Span::styled(said, app.theme.text())));
        lines.push(Line::from(Span::styled(
            format!("  on {}", a.inputs),
            app.theme.muted(),
        )));
    }
    if let Some(tail) = res.stderr_tails.get(&r.id) {
        lines.push(Line::from(Span::styled(
            "its worker's last words on stderr:",
            app.theme.muted(),
        )));
        for l in edgeprof::text::last_lines(tail, 5) {
            lines.push(Line::from(Span::styled(
                format!("  | {l}"),
                app.theme.muted(),
            )));
        }
    }
    let latencies: Vec<f64> = res
        .latencies
        .get(&r.id)
        .map(|repeats| repeats.iter().flatten().copied().collect())
        .unwrap_or_default();
    let chart_rows: u16 = if latencies.is_empty() { 0 } else { 3 };
    let [text_area, chart_area] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(chart_rows)]).areas(inner);
    // Scrolled, no further than its last line (lines counted as they wrap, roughly).
    let width = usize::from(text_area.width.max(1));
    let rows: usize = lines.iter().map(|l| l.width().max(1).div_ceil(width)).sum();
    let most = rows.saturating_sub(usize::from(text_area.height)) as u16;
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .scroll((res.detail_scroll.min(most), 0)),
        text_area,
    );
    if latencies.is_empty() {
        return;
    }
    // Each column the mean of the iterations falling in it, in microseconds above the fastest
    // (so that the spread shows, not the offset all of them share).
    let width = chart_area.width.max(1) as usize;
    let fastest = latencies.iter().copied().fold(f64::INFINITY, f64::min);
    let data: Vec<u64> = (0..width)
        .map(|c| {
            let from = (c * latencies.len() / width).min(latencies.len() - 1);
            let to = ((c + 1) * latencies.len() / width).clamp(from + 1, latencies.len());
            let part = &latencies[from..to];
            let mean = part.iter().sum::<f64>() / part.len() as f64;
            ((mean - fastest) * 1000.0).round() as u64 + 1
        })
        .collect();
    let [label, spark] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(chart_area);
    frame.render_widget(
        Paragraph::new(Span::styled(
            format!(
                "its {} timed iterations in order (latency above the fastest, {fastest:.3} ms)",
                latencies.len()
            ),
            app.theme.muted(),
        )),
        label,
    );
    frame.render_widget(sparkline(app, &data, None, 0), spark);
}

//! The Roofline tab: the chart, the roofs in words, the programs and their advice, and a
//! condition's layers.

use super::*;
use crate::tui::app::Shown;

pub(super) fn c_source(c: &edgeprof::roofline::Ceilings) -> String {
    c.source.to_string()
}

pub(super) fn draw_roofline(frame: &mut Frame, app: &App, area: Rect) {
    let rv = &app.roofline;
    let other = match rv.processor {
        edgeprof::roofline::Processor::Cpu => "GPU",
        edgeprof::roofline::Processor::Gpu => "CPU",
    };
    let bare_title = format!("{} roofline (g: {other})", rv.processor);
    let ceilings = match &rv.ceilings {
        None => {
            frame.render_widget(
                Paragraph::new(Span::styled(
                    "no results open: finish a run or press o; the roofline places each condition \
                     against this device's ceilings (g: the GPU's)",
                    app.theme.muted(),
                ))
                .wrap(Wrap { trim: true })
                .block(block(app, &bare_title, true)),
                area,
            );
            return;
        }
        Some(Shown::Note(why)) => {
            frame.render_widget(
                Paragraph::new(Span::styled(why.clone(), app.theme.error()))
                    .wrap(Wrap { trim: true })
                    .block(block(app, &bare_title, true)),
                area,
            );
            return;
        }
        Some(Shown::Ready(c)) => c,
    };
    let wide = area.width >= 110;
    let (chart_area, legend, advice) = if wide {
        let [a, side] =
            Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)])
                .areas(area);
        let [l, r] =
            Layout::vertical([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(side);
        (a, l, r)
    } else {
        let [a, below] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(area);
        let [l, r] = Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)])
            .areas(below);
        (a, l, r)
    };
    let precision = rv.precision.unwrap_or(edgeprof::roofline::Precision::Fp32);
    let title = format!(
        "{} roofline ({precision}; g: {other}; ceilings: {})",
        rv.processor,
        c_source(&ceilings.0)
    );
    let b = block(app, &title, false);
    let inner = b.inner(chart_area);
    frame.render_widget(b, chart_area);
    // Under the chart, which roof is which: the flat ones top to bottom, the slanted ones left
    // to right.
    let (flat, slanted) = edgeprof::report::roofline_chart::roofs(&ceilings.0, precision);
    let flat: Vec<String> = flat
        .iter()
        .map(|(p, v)| {
            format!(
                "{p} {:.1}{}",
                v / 1e9,
                if p.op() == "OP" { " GOP/s" } else { "" }
            )
        })
        .collect();
    let slanted: Vec<String> = slanted
        .iter()
        .map(|(l, bw, _)| format!("{l} {:.1}", bw / 1e9))
        .collect();
    let legend_text = format!(
        "flat: {} GFLOP/s · slanted: {} GB/s",
        flat.join(", "),
        slanted.join(", ")
    );
    let legend_rows = (legend_text.chars().count() as u16).div_ceil(inner.width.max(1));
    let [inner, legend_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(legend_rows)]).areas(inner);
    frame.render_widget(
        Paragraph::new(Span::styled(legend_text, app.theme.muted())).wrap(Wrap { trim: true }),
        legend_area,
    );
    // The drill-down draws the highest-ranked layers instead of the sweep's programs.
    let layers = match &rv.layers {
        Some(Shown::Ready(l)) => Some(l),
        _ => None,
    };
    let drawn: &[edgeprof::roofline::Program] = match layers {
        Some(l) => &l.programs[..l.programs.len().min(crate::tui::app::LAYER_MARKS)],
        None => &rv.programs,
    };
    let marks = edgeprof::report::roofline_chart::marks(drawn);
    let chart = edgeprof::report::roofline_chart::render(
        &ceilings.0,
        precision,
        &marks,
        inner.width as usize,
        (inner.height as usize).saturating_sub(2),
        app.ascii,
    );
    frame.render_widget(Paragraph::new(chart).style(app.theme.text()), inner);
    let list_title = match (layers, rv.processor) {
        (Some(l), _) => {
            // The drill-down profiles in tract whatever engine ran the condition.
            let engine = l.condition.split('/').next().unwrap_or("");
            let whose = if engine == "tract" {
                String::new()
            } else {
                format!("; tract's profile: {engine} has none")
            };
            format!("Layers of {} (saving %, headroom{whose})", l.condition)
        }
        (None, edgeprof::roofline::Processor::Cpu) => "Programs (l: layers)".to_string(),
        (None, edgeprof::roofline::Processor::Gpu) => "GPU profiles".to_string(),
    };
    let b = block(app, &list_title, true);
    let inner = b.inner(legend);
    frame.render_widget(b, legend);
    let rows = inner.height as usize;
    let mut lines: Vec<Line> = Vec::new();
    match &rv.layers {
        Some(Shown::Note(why)) => {
            lines.push(Line::from(Span::styled(why.clone(), app.theme.warn())))
        }
        Some(Shown::Ready(l)) => {
            let first = l.selected.saturating_sub(rows.saturating_sub(1));
            for (k, (p, r)) in l
                .programs
                .iter()
                .zip(&l.ranks)
                .enumerate()
                .skip(first)
                .take(rows)
            {
                let mark = if k < crate::tui::app::LAYER_MARKS {
                    edgeprof::report::roofline_chart::letter(k)
                } else {
                    ' '
                };
                let style = if k == l.selected {
                    app.theme.selected()
                } else {
                    app.theme.text()
                };
                lines.push(Line::from(Span::styled(
                    format!(
                        "{mark} {:>5.1}% {:>5.1}× {}",
                        100.0 * r.saving,
                        r.headroom,
                        p.label
                    ),
                    style,
                )));
            }
        }
        None => {
            let first = rv.selected.saturating_sub(rows.saturating_sub(1));
            for (k, p) in rv.programs.iter().enumerate().skip(first).take(rows) {
                let style = if k == rv.selected {
                    app.theme.selected()
                } else {
                    Style::default().fg(app.theme.series(k))
                };
                lines.push(Line::from(Span::styled(
                    format!(
                        "{} {}",
                        edgeprof::report::roofline_chart::letter(k),
                        p.label
                    ),
                    style,
                )));
            }
            for (what, why) in &rv.left_out {
                lines.push(Line::from(Span::styled(
                    format!("left out {what}: {why}"),
                    app.theme.muted(),
                )));
            }
            if lines.is_empty() {
                lines.push(Line::from(Span::styled(
                    match rv.processor {
                        edgeprof::roofline::Processor::Cpu => {
                            "no conditions to place (none finished)"
                        }
                        edgeprof::roofline::Processor::Gpu => {
                            "no GPU profiles in the results directory (roofline profile-gpu \
                             --output DIR/NAME -- COMMAND keeps one there)"
                        }
                    },
                    app.theme.muted(),
                )));
            }
        }
    }
    // Labels are cut at the edge rather than wrapped, so each stays on its own line; a message
    // (why there are no layers) wraps.
    let list = Paragraph::new(lines);
    let list = if matches!(rv.layers, Some(Shown::Note(_))) {
        list.wrap(Wrap { trim: true })
    } else {
        list
    };
    frame.render_widget(list, inner);
    let advice_title = if rv.advice_scroll > 0 {
        format!(
            "Advice, in order (PgUp/PgDn; {} lines down)",
            rv.advice_scroll
        )
    } else {
        "Advice, in order (PgUp/PgDn)".to_string()
    };
    let b = block(app, &advice_title, false);
    let inner = b.inner(advice);
    frame.render_widget(b, advice);
    let analysis = match layers {
        Some(l) => l.programs.get(l.selected).map(|p| {
            let mut p = p.clone();
            if let Some(precision) = rv.precision {
                p.precision = precision;
            }
            edgeprof::roofline::advice::analyse(&p, &ceilings.0).map_err(|e| e.to_string())
        }),
        None => rv.analyses.get(rv.selected).cloned(),
    };
    let text: Vec<Line> = match analysis {
        None => vec![Line::from(Span::styled(
            "select a program",
            app.theme.muted(),
        ))],
        Some(Err(why)) => vec![Line::from(Span::styled(
            format!("cannot advise: {why}"),
            app.theme.warn(),
        ))],
        Some(Ok(a)) => {
            let mut lines = vec![Line::from(Span::styled(
                format!(
                    "{:.2} GFLOP/s of {:.1} peak; bound by {}",
                    a.achieved_flops_per_s / 1e9,
                    a.peak_flops_per_s / 1e9,
                    a.binding
                ),
                app.theme.accent(),
            ))];
            for (k, step) in a.steps.iter().enumerate() {
                lines.push(Line::from(Span::styled(
                    format!("{}. {}", k + 1, step.advice()),
                    app.theme.text(),
                )));
            }
            // What the steps rest on, once.
            if let Some(step) = a.steps.first() {
                lines.push(Line::from(Span::styled(
                    format!("every step {}", step.basis()),
                    app.theme.muted(),
                )));
            }
            lines
        }
    };
    // PgUp/PgDn scroll a long advice.
    frame.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: true })
            .scroll((rv.advice_scroll, 0)),
        inner,
    );
}

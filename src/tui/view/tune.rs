//! The Tune tab: the search's progress, its trials (predicted and measured, best so far), each
//! trial's cost over the trials, and the result.

use super::*;

/// A cost as the tuner prints it.
pub(super) fn cost_text(cost: Option<f64>, unit: &str) -> String {
    match cost {
        Some(c) if c >= 100.0 => format!("{c:.1} {unit}"),
        Some(c) => format!("{c:.3} {unit}"),
        None => "-".into(),
    }
}

pub(super) fn draw_tune(frame: &mut Frame, app: &App, area: Rect) {
    let t = &app.tune;
    let [top, middle, bottom] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(6),
        Constraint::Length(6),
    ])
    .areas(area);
    let b = block(app, "Tuning", true);
    let inner = b.inner(top);
    frame.render_widget(b, top);
    let head = if !t.active && t.rows.is_empty() && t.result.is_none() && t.error.is_none() {
        vec![
            Line::from(Span::styled("no tuning yet", app.theme.muted())),
            Line::from(Span::styled(
                "press t to tune the selection's first model and input over its engines, \
                 threads, core sets and options ([tune] settings of the config)",
                app.theme.muted(),
            )),
        ]
    } else {
        let done = t
            .rows
            .iter()
            .filter(|r| r.cost.is_some() || r.failure.is_some())
            .count();
        let fraction = if t.budget == 0 {
            0.0
        } else {
            done as f64 / t.budget as f64
        };
        let width = (inner.width as usize).saturating_sub(44).clamp(10, 50);
        let state = if t.active {
            "tuning".to_string()
        } else if t.error.is_some() {
            "stopped".to_string()
        } else {
            t.result
                .as_ref()
                .map(|r| format!("done: {}", r.stop))
                .unwrap_or_else(|| "done".into())
        };
        vec![
            Line::from(vec![
                Span::styled(bar(app, fraction, width), app.theme.accent()),
                Span::styled(
                    format!(
                        " {done}/{} trials of {} candidates · {state}",
                        t.budget, t.candidates
                    ),
                    app.theme.text(),
                ),
            ]),
            Line::from(Span::styled(
                match (&t.current, &t.dir) {
                    (Some(c), _) => format!("{}: {c}", t.title),
                    (None, Some(d)) => format!("{} · results in {}", t.title, d.display()),
                    (None, None) => t.title.clone(),
                },
                app.theme.muted(),
            )),
        ]
    };
    frame.render_widget(Paragraph::new(head), inner);
    let [trials, charts] =
        Layout::horizontal([Constraint::Percentage(64), Constraint::Percentage(36)]).areas(middle);
    let title = if trials.width >= 62 {
        "Trials: predicted ± uncertainty, measured, best so far"
    } else {
        "Trials: measured, best so far"
    };
    let b = block(app, title, false);
    let inner = b.inner(trials);
    frame.render_widget(b, trials);
    // Narrow screens leave the prediction out of the rows (the search still makes it).
    let wide = inner.width >= 60;
    let label_width = (inner.width as usize)
        .saturating_sub(if wide { 44 } else { 28 })
        .max(8);
    let mut lines: Vec<Line> = t
        .rows
        .iter()
        .map(|r| {
            let label: String = r.label.chars().take(label_width).collect();
            let predicted = r
                .predicted
                .map(|(p, sd)| format!("{} ±{:.0}%", cost_text(Some(p), &t.unit), sd * 100.0))
                .unwrap_or_else(|| "-".into());
            let measured = match (&r.cost, &r.failure) {
                (Some(c), _) => cost_text(Some(*c), &t.unit),
                (None, Some(_)) => "failed".into(),
                (None, None) => "…".into(),
            };
            let style = if r.cost.is_some() && r.cost == r.best_cost {
                app.theme.ok()
            } else if r.failure.is_some() {
                app.theme.error()
            } else {
                app.theme.text()
            };
            let best = cost_text(r.best_cost, &t.unit);
            let text = if wide {
                format!(
                    "{:>3} {label:<label_width$} {predicted:>15} {measured:>11} {best:>11}",
                    r.n
                )
            } else {
                format!("{:>3} {label:<label_width$} {measured:>11} {best:>11}", r.n)
            };
            Line::from(Span::styled(text, style))
        })
        .collect();
    let room = inner.height as usize;
    if lines.len() > room {
        lines.drain(..lines.len() - room);
    }
    frame.render_widget(Paragraph::new(lines), inner);
    let [best_area, measured_area] =
        Layout::vertical([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(charts);
    // Costs in microseconds, so sub-millisecond differences still show.
    let micro = |v: Option<f64>| v.map(|c| (c * 1000.0).round() as u64).unwrap_or(0);
    let best: Vec<u64> = t.rows.iter().map(|r| micro(r.best_cost)).collect();
    let measured: Vec<u64> = t.rows.iter().map(|r| micro(r.cost)).collect();
    let top_value = measured.iter().chain(&best).copied().max();
    for (area, title, data, colour) in [
        (best_area, "best so far", &best, 1),
        (measured_area, "measured per trial", &measured, 0),
    ] {
        let b = block(app, title, false);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let skip = data.len().saturating_sub(inner.width as usize);
        frame.render_widget(sparkline(app, &data[skip..], top_value, colour), inner);
    }
    let b = block(app, "Result", false);
    let inner = b.inner(bottom);
    frame.render_widget(b, bottom);
    let mut result: Vec<Line> = Vec::new();
    if let Some(e) = &t.error {
        result.push(Line::from(Span::styled(e.clone(), app.theme.error())));
    }
    if let Some(r) = &t.result {
        match &r.best {
            Some((label, cost)) => result.push(Line::from(Span::styled(
                format!("best:    {label}  {}", cost_text(Some(*cost), &t.unit)),
                app.theme.ok(),
            ))),
            None => result.push(Line::from(Span::styled(
                "best:    none: no candidate could be measured",
                app.theme.error(),
            ))),
        }
        let gain = match (r.default.1, &r.best) {
            _ if r.default_is_best => "  (the default is the best found)".to_string(),
            (Some(d), Some((_, b))) => format!("  (best is {:.2}× faster)", d / b),
            _ => String::new(),
        };
        result.push(Line::from(Span::styled(
            format!(
                "default: {}  {}{gain}",
                r.default.0,
                cost_text(r.default.1, &t.unit)
            ),
            app.theme.text(),
        )));
        if let Some((d, b, g)) = r.confirmed {
            result.push(Line::from(Span::styled(
                format!(
                    "re-measured in turns: default {} · best {} → gain {g:.2}×{}",
                    cost_text(Some(d), &t.unit),
                    cost_text(Some(b), &t.unit),
                    r.gain_interval.map_or(String::new(), |(low, high)| format!(
                        " [{low:.2}, {high:.2}]"
                    ))
                ),
                app.theme.text(),
            )));
        }
        if r.keep_default {
            result.push(Line::from(Span::styled(
                "keep the default: re-measured in turns it was faster than the search's best",
                app.theme.warn(),
            )));
        }
        if let Some((median, mean, n)) = r.model_error {
            result.push(Line::from(Span::styled(
                format!(
                    "cost model: |predicted − measured| median {:.1}%, mean {:.1}% over {n} trial(s)",
                    median * 100.0,
                    mean * 100.0
                ),
                app.theme.muted(),
            )));
        }
    } else {
        if !t.prior.is_empty() {
            result.push(Line::from(Span::styled(t.prior.clone(), app.theme.muted())));
        }
        for s in &t.skipped {
            result.push(Line::from(Span::styled(
                format!("left out: {s}"),
                app.theme.muted(),
            )));
        }
        if t.active && t.skipped.is_empty() {
            result.push(Line::from(Span::styled(
                "the result appears here when the search and the re-measurement end",
                app.theme.muted(),
            )));
        }
    }
    frame.render_widget(Paragraph::new(result).wrap(Wrap { trim: true }), inner);
}

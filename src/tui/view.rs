//! Drawing the UI: one function per tab, all from [`App`] alone, so a frame depends on nothing
//! but the state (what the snapshot tests rely on). Usable from 80×24 up; `--ascii` draws with
//! ASCII only.

use super::app::{App, Live, Severity, Tab, RESULT_COLUMNS, TABS};
use super::conditions::{Axis, AXES};
use crate::cli::render;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Sparkline, Wrap};
use ratatui::Frame;
use std::collections::VecDeque;

const ASCII_BORDER: symbols::border::Set = symbols::border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

const ASCII_BARS: symbols::bar::Set = symbols::bar::Set {
    full: "#",
    seven_eighths: "#",
    three_quarters: "=",
    five_eighths: "=",
    half: "-",
    three_eighths: "-",
    one_quarter: ".",
    one_eighth: ".",
    empty: " ",
};

fn block<'a>(app: &App, title: &'a str, focused: bool) -> Block<'a> {
    let b = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {title} "), app.theme.accent()))
        .border_style(app.theme.border(focused));
    if app.ascii {
        b.border_set(ASCII_BORDER)
    } else {
        b
    }
}

/// A text progress bar `width` cells wide.
fn bar(app: &App, fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    let (on, off) = if app.ascii {
        ("#", "-")
    } else {
        ("█", "░")
    };
    format!("{}{}", on.repeat(filled), off.repeat(width - filled))
}

/// Draws the whole UI.
pub fn draw(frame: &mut Frame, app: &App) {
    let [header, body, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    draw_header(frame, app, header);
    match app.tab {
        Tab::Conditions => draw_conditions(frame, app, body),
        Tab::Run => draw_run(frame, app, body),
        Tab::Results => draw_results(frame, app, body),
        Tab::Roofline => draw_roofline(frame, app, body),
        Tab::Monitor => draw_monitor(frame, app, body),
        Tab::Tune => draw_tune(frame, app, body),
        Tab::Scorecard => draw_scorecard(frame, app, body),
    }
    draw_status(frame, app, status);
    draw_footer(frame, app, footer);
    if app.help {
        draw_help(frame, app);
    }
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let mut spans = vec![Span::styled("edgeprof ", app.theme.accent())];
    for (k, tab) in TABS.iter().enumerate() {
        let label = format!("{} {} ", k + 1, tab.title());
        let style = if *tab == app.tab {
            app.theme.selected()
        } else {
            app.theme.text()
        };
        spans.push(Span::styled(label, style));
    }
    if app.run.active {
        spans.push(Span::styled(
            format!(" running {}/{}", app.run.index, app.run.total),
            app.theme.warn(),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_status(frame: &mut Frame, app: &App, area: Rect) {
    let line = if let Some(p) = &app.prompt {
        Line::from(vec![
            Span::styled(format!("{}: ", p.purpose.label()), app.theme.accent()),
            Span::styled(format!("{}_", p.text), app.theme.text()),
            Span::styled("  (Enter: ok, Esc: cancel)", app.theme.muted()),
        ])
    } else if let Some((severity, text)) = &app.status {
        let style = match severity {
            Severity::Info => app.theme.ok(),
            Severity::Warn => app.theme.warn(),
            Severity::Error => app.theme.error(),
        };
        Line::from(Span::styled(text.clone(), style))
    } else {
        Line::from("")
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The keys of the current tab, for the footer.
pub fn footer_keys(app: &App) -> &'static str {
    match app.tab {
        Tab::Conditions if app.in_items => {
            "↑↓ move  space tick  +/- change  a add  ← axes  r run  w save  L load  ? help  q quit"
        }
        Tab::Conditions => {
            "↑↓ axis  → choose  r run  w save  L load  o open results  ? help  q quit"
        }
        Tab::Run => "c cancel  Tab next tab  o open results  ? help  q quit",
        Tab::Results => "↑↓ row  ←→/s sort  r reverse  o open  ? help  q quit",
        Tab::Roofline if app.roofline.layers.is_some() => {
            "↑↓ layer  l/Esc back to programs  p precision  ? help  q quit"
        }
        Tab::Roofline if app.roofline.processor == edgeprof::roofline::Processor::Gpu => {
            "↑↓ profile  g CPU  p precision  m measure  o open  ? help  q quit"
        }
        Tab::Roofline => {
            "↑↓ program  l layers  g GPU  p precision  m measure  o open  ? help  q quit"
        }
        Tab::Monitor => "Tab next tab  ? help  q quit",
        Tab::Tune if app.tune.active => "c cancel  Tab next tab  ? help  q quit",
        Tab::Tune => "t tune the selection's first model  Tab next tab  ? help  q quit",
        Tab::Scorecard => "↑↓ framework  PgUp/PgDn scroll  p probe this device  ? help  q quit",
    }
}

/// Key names as drawn: arrows become ^ v < > with `--ascii`.
fn arrows(app: &App, keys: &str) -> String {
    if app.ascii {
        keys.replace('↑', "^")
            .replace('↓', "v")
            .replace('←', "<")
            .replace('→', ">")
    } else {
        keys.to_string()
    }
}

fn draw_footer(frame: &mut Frame, app: &App, area: Rect) {
    let keys = footer_keys(app);
    let text = arrows(app, keys);
    frame.render_widget(Paragraph::new(Span::styled(text, app.theme.muted())), area);
}

fn draw_conditions(frame: &mut Frame, app: &App, area: Rect) {
    let [left, right] =
        Layout::horizontal([Constraint::Length(18), Constraint::Min(0)]).areas(area);
    let [items_area, summary_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(7)]).areas(right);
    let axes: Vec<Line> = AXES
        .iter()
        .enumerate()
        .map(|(k, axis)| {
            let style = if k == app.axis && !app.in_items {
                app.theme.selected()
            } else if k == app.axis {
                app.theme.accent()
            } else {
                app.theme.text()
            };
            Line::from(Span::styled(format!(" {}", axis.title()), style))
        })
        .collect();
    frame.render_widget(
        Paragraph::new(axes).block(block(app, "Axes", !app.in_items)),
        left,
    );
    let axis = AXES[app.axis];
    let items = app.conditions.items(axis);
    let cursor = app.cursors[app.axis];
    // Keep the cursor in view.
    let rows = items_area.height.saturating_sub(2) as usize;
    let first = cursor.saturating_sub(rows.saturating_sub(1));
    let label_width = items
        .iter()
        .map(|i| i.label.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<Line> = items
        .iter()
        .enumerate()
        .skip(first)
        .take(rows.max(1))
        .map(|(k, item)| {
            let mark = match (item.ticked, app.ascii) {
                (Some(true), false) => "[✓] ",
                (Some(true), true) => "[x] ",
                (Some(false), _) => "[ ] ",
                (None, _) => "    ",
            };
            let base = if item.disabled {
                app.theme.muted()
            } else {
                app.theme.text()
            };
            let style = if k == cursor && app.in_items {
                app.theme.selected()
            } else {
                base
            };
            Line::from(vec![
                Span::styled(format!("{mark}{:<label_width$}", item.label), style),
                Span::styled(format!("  {}", item.note), app.theme.muted()),
            ])
        })
        .collect();
    let title = axis.title();
    frame.render_widget(
        Paragraph::new(lines).block(block(app, title, app.in_items)),
        items_area,
    );
    let plan = app.conditions.plan();
    let c = &app.conditions.config;
    let m = &c.measure;
    let summary = vec![
        Line::from(vec![
            Span::styled(
                format!("{} conditions", plan.to_run.len()),
                app.theme.accent().add_modifier(Modifier::BOLD),
            ),
            Span::styled(
                format!(
                    " · {} skipped · {} excluded · about {}",
                    plan.skipped.len(),
                    plan.excluded,
                    render::duration(app.conditions.estimate_s())
                ),
                app.theme.text(),
            ),
        ]),
        Line::from(Span::styled(
            format!(
                "{} engines, {} models, {} inputs, {} batch, {} threads, {} devices",
                c.matrix.engines.len(),
                c.matrix.models.len(),
                c.matrix.inputs.len(),
                c.matrix.batch.len(),
                c.matrix.threads.len(),
                c.matrix.devices.len()
            ),
            app.theme.muted(),
        )),
        Line::from(Span::styled(
            format!(
                "{} warm-up, {} × {} timed, results in {}",
                m.warmup,
                m.repeats,
                m.iterations,
                c.output.dir.display()
            ),
            app.theme.muted(),
        )),
        Line::from(Span::styled(
            format!("config: {} ({})", c.name, app.conditions.file.display()),
            app.theme.muted(),
        )),
    ];
    frame.render_widget(
        Paragraph::new(summary)
            .wrap(Wrap { trim: true })
            .block(block(app, "Summary", false)),
        summary_area,
    );
    if axis == Axis::Parameters && app.in_items {
        // The footer already says +/-; nothing more to draw.
    }
}

fn sparkline<'a>(app: &App, data: &'a [u64], max: Option<u64>, colour: usize) -> Sparkline<'a> {
    let mut s = Sparkline::default()
        .data(data)
        .style(Style::default().fg(app.theme.series(colour)));
    if let Some(max) = max {
        s = s.max(max);
    }
    if app.ascii {
        s = s.bar_set(ASCII_BARS);
    }
    s
}

/// A cost as the tuner prints it.
fn cost_text(cost: Option<f64>, unit: &str) -> String {
    match cost {
        Some(c) if c >= 100.0 => format!("{c:.1} {unit}"),
        Some(c) => format!("{c:.3} {unit}"),
        None => "-".into(),
    }
}

/// The Tune tab: the search's progress, its trials (predicted and measured, best so far), the
/// best so far and each trial's cost over the trials, and the result.
fn draw_scorecard(frame: &mut Frame, app: &App, area: Rect) {
    let v = &app.scorecard;
    let [left, right] =
        Layout::horizontal([Constraint::Length(34), Constraint::Min(20)]).areas(area);
    let b = block(app, "Frameworks", true);
    let inner = b.inner(left);
    frame.render_widget(b, left);
    let mut lines: Vec<Line> = Vec::new();
    if v.entries.is_empty() {
        lines.push(Line::from(Span::styled(
            v.warning
                .clone()
                .unwrap_or_else(|| "no framework facts".into()),
            app.theme.error(),
        )));
    }
    for (i, e) in v.entries.iter().enumerate() {
        let style = if i == v.selected {
            app.theme.selected()
        } else {
            app.theme.text()
        };
        let runtime = match (&e.runtime, &e.card.engine) {
            (Some(r), _) => match r.geomean_vs_fastest {
                Some(g) => format!("×{g:.2}"),
                None => format!("{} ok", r.ok),
            },
            (None, Some(_)) => "·".to_string(),
            (None, None) => "–".to_string(),
        };
        let here = match &e.here {
            Some(h) => match h.state {
                edgeprof::scorecard::here::State::BuiltIn
                | edgeprof::scorecard::here::State::Installed => "✓",
                edgeprof::scorecard::here::State::Broken => "!",
                _ => " ",
            },
            None => " ",
        };
        let here = if app.ascii && here == "✓" {
            "y"
        } else {
            here
        };
        let title: String = e.card.title.chars().take(18).collect();
        lines.push(Line::from(Span::styled(
            format!(
                "{here} {title:<18} {}/8 {runtime:>6}",
                e.card.development.api.score()
            ),
            style,
        )));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "✓ here · API score · runtime ×geomean vs fastest",
        app.theme.muted(),
    )));
    if v.here.is_none() {
        lines.push(Line::from(Span::styled(
            if v.probing {
                "probing this device …"
            } else {
                "p: probe this device"
            },
            app.theme.muted(),
        )));
    }
    if app.results.dir.is_none() {
        lines.push(Line::from(Span::styled(
            "o (Results tab): open results for the runtime phase",
            app.theme.muted(),
        )));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);

    let Some(entry) = v.entries.get(v.selected) else {
        frame.render_widget(block(app, "Scorecard", false), right);
        return;
    };
    let title = format!(
        "{} — github.com/{}",
        entry.card.title, entry.card.repository
    );
    let b = block(app, &title, false);
    let inner = b.inner(right);
    frame.render_widget(b, right);
    let detail: Vec<Line> =
        edgeprof::report::scorecard::framework_lines(entry, inner.width as usize)
            .into_iter()
            .map(|(text, heading)| {
                let style = if heading {
                    app.theme.accent()
                } else {
                    app.theme.text()
                };
                Line::from(Span::styled(text, style))
            })
            .collect();
    frame.render_widget(Paragraph::new(detail).scroll((v.scroll, 0)), inner);
}

fn draw_tune(frame: &mut Frame, app: &App, area: Rect) {
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
                    "re-measured in turns: default {} · best {} → gain {g:.2}×",
                    cost_text(Some(d), &t.unit),
                    cost_text(Some(b), &t.unit)
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
    } else if !t.skipped.is_empty() {
        for s in &t.skipped {
            result.push(Line::from(Span::styled(
                format!("left out: {s}"),
                app.theme.muted(),
            )));
        }
    } else if t.active {
        result.push(Line::from(Span::styled(
            "the result appears here when the search and the re-measurement end",
            app.theme.muted(),
        )));
    }
    frame.render_widget(Paragraph::new(result).wrap(Wrap { trim: true }), inner);
}

/// The last `width` points of a series, as whole numbers for a sparkline.
fn tail(series: &VecDeque<f64>, width: usize) -> Vec<u64> {
    let skip = series.len().saturating_sub(width);
    series
        .iter()
        .skip(skip)
        .map(|v| v.max(0.0).round() as u64)
        .collect()
}

/// A chart of one series: a titled sparkline with its latest value, or why there is none.
struct Series<'a> {
    title: &'a str,
    data: &'a VecDeque<f64>,
    unit: &'a str,
    /// The top of the scale (None: the largest value shown).
    max: Option<u64>,
    colour: usize,
    /// Said when there are no points.
    missing: &'a str,
}

fn series_panel(frame: &mut Frame, app: &App, area: Rect, s: Series) {
    let label = match s.data.back() {
        Some(v) => format!("{} {v:.0} {}", s.title, s.unit),
        None => s.title.to_string(),
    };
    let b = block(app, &label, false);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    if s.data.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled(s.missing.to_string(), app.theme.muted()))
                .wrap(Wrap { trim: true }),
            inner,
        );
        return;
    }
    let data = tail(s.data, inner.width as usize);
    frame.render_widget(sparkline(app, &data, s.max, s.colour), inner);
}

/// The GPU's load, or why this machine has no GPU figures.
fn gpu_panel(frame: &mut Frame, app: &App, area: Rect, data: &VecDeque<f64>) {
    let missing = match &app.conditions.offer.gpu_telemetry {
        Err(why) => format!("no GPU figures: {}", why.split("; ").next().unwrap_or(why)),
        Ok(_) => "waiting for samples".to_string(),
    };
    series_panel(
        frame,
        app,
        area,
        Series {
            title: "GPU %",
            data,
            unit: "%",
            max: Some(100),
            colour: 0,
            missing: &missing,
        },
    );
}

/// One line per core: id, a load bar and the load.
fn core_lines(app: &App, live: &Live, width: usize) -> Vec<Line<'static>> {
    let Some(sample) = &live.last else {
        return vec![Line::from(Span::styled(
            "waiting for the first sample",
            app.theme.muted(),
        ))];
    };
    let bar_width = width.saturating_sub(14).clamp(4, 40);
    sample
        .cores
        .iter()
        .map(|c| {
            if !c.online {
                return Line::from(Span::styled(
                    format!("cpu{:<3} off", c.id),
                    app.theme.muted(),
                ));
            }
            let load = c.load_pct.unwrap_or(0.0);
            let style = if load >= 90.0 {
                app.theme.warn()
            } else {
                app.theme.ok()
            };
            Line::from(vec![
                Span::styled(format!("cpu{:<3}", c.id), app.theme.text()),
                Span::styled(bar(app, load / 100.0, bar_width), style),
                Span::styled(format!(" {load:>3.0}%"), app.theme.text()),
            ])
        })
        .collect()
}

fn draw_run(frame: &mut Frame, app: &App, area: Rect) {
    let r = &app.run;
    let [top, charts, bottom] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(area.height.saturating_sub(4) / 2),
        Constraint::Min(0),
    ])
    .areas(area);
    let b = block(app, "Progress", true);
    let inner = b.inner(top);
    frame.render_widget(b, top);
    let progress = if r.total == 0 && !r.active {
        vec![
            Line::from(Span::styled("no run yet", app.theme.muted())),
            Line::from(Span::styled(
                "pick conditions on the Conditions tab and press r to run them",
                app.theme.muted(),
            )),
        ]
    } else {
        let width = (inner.width as usize).saturating_sub(34).clamp(10, 60);
        let state = if r.active {
            format!("ETA {}", render::duration(r.eta_s()))
        } else if r.error.is_some() {
            "stopped".to_string()
        } else if r.outcome.as_ref().is_some_and(|o| o.interrupted) {
            "cancelled".to_string()
        } else {
            "done".to_string()
        };
        let mut current = if r.active {
            format!(
                "{}: {}/{} timed iterations",
                r.current, r.timed, r.iterations
            )
        } else {
            r.dir
                .as_ref()
                .map(|d| format!("results in {}", d.display()))
                .unwrap_or_default()
        };
        if r.active && r.attempt > 1 {
            current.push_str(&format!(" (attempt {} of {})", r.attempt, r.attempts));
        }
        vec![
            Line::from(vec![
                Span::styled(bar(app, r.fraction(), width), app.theme.accent()),
                Span::styled(
                    format!(
                        " {}/{} {:>3.0}% · {} ok · {} failed · {state}",
                        r.index,
                        r.total,
                        100.0 * r.fraction(),
                        r.ok,
                        r.failed
                    ),
                    app.theme.text(),
                ),
            ]),
            Line::from(Span::styled(current, app.theme.muted())),
        ]
    };
    frame.render_widget(Paragraph::new(progress), inner);
    let [gpu, mem, rss] = Layout::horizontal([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .areas(charts);
    gpu_panel(frame, app, gpu, &r.live.gpu_load);
    // System memory, and the GPU's beside it (half the panel each) when a source reports it.
    let memory = Series {
        title: "memory",
        data: &r.live.mem_used_mib,
        unit: "MiB",
        max: r.live.mem_total_mib(),
        colour: 1,
        missing: "waiting for samples",
    };
    if r.live.gpu_mem_mib.is_empty() {
        series_panel(frame, app, mem, memory);
    } else {
        let [system, gpu_mem] =
            Layout::vertical([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(mem);
        series_panel(frame, app, system, memory);
        series_panel(
            frame,
            app,
            gpu_mem,
            Series {
                title: "GPU memory",
                data: &r.live.gpu_mem_mib,
                unit: "MiB",
                max: r.live.mem_total_mib(),
                colour: 3,
                missing: "waiting for samples",
            },
        );
    }
    series_panel(
        frame,
        app,
        rss,
        Series {
            title: "worker RSS",
            data: &r.rss_mib,
            unit: "MiB",
            max: None,
            colour: 2,
            missing: "no worker running",
        },
    );
    let [cores, log] =
        Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(bottom);
    if r.nodes.is_empty() {
        let b = block(app, "CPU per core", false);
        let inner = b.inner(cores);
        frame.render_widget(b, cores);
        frame.render_widget(
            Paragraph::new(core_lines(app, &r.live, inner.width as usize)),
            inner,
        );
    } else {
        // A fleet run: each node's progress where this machine's cores would be.
        let b = block(app, "Nodes", false);
        let inner = b.inner(cores);
        frame.render_widget(b, cores);
        let mut lines = Vec::new();
        for n in &r.nodes {
            let done = n.ok + n.failed;
            let fraction = if n.total == 0 {
                0.0
            } else {
                done as f64 / n.total as f64
            };
            let width = (inner.width as usize).saturating_sub(24).clamp(4, 30);
            let style = if n.state.starts_with("dropped") || n.state.starts_with("unreachable") {
                app.theme.error()
            } else {
                app.theme.text()
            };
            lines.push(Line::from(vec![
                Span::styled(format!("{:<8.8} ", n.name), style),
                Span::styled(bar(app, fraction, width), app.theme.accent()),
                Span::styled(
                    format!(
                        " {done}/{} {}{}",
                        n.total,
                        n.failed,
                        if app.ascii { "x" } else { "✗" }
                    ),
                    style,
                ),
            ]));
            lines.push(Line::from(Span::styled(
                format!("  {}", n.state),
                app.theme.muted(),
            )));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
    let b = block(app, "Events", false);
    let inner = b.inner(log);
    frame.render_widget(b, log);
    let rows = inner.height as usize;
    let lines: Vec<Line> = r
        .log
        .iter()
        .skip(r.log.len().saturating_sub(rows))
        .map(|(severity, text)| {
            let style = match severity {
                Severity::Info => app.theme.text(),
                Severity::Warn => app.theme.warn(),
                Severity::Error => app.theme.error(),
            };
            Line::from(Span::styled(text.clone(), style))
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn opt(v: Option<f64>, places: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.places$}"))
}

fn draw_results(frame: &mut Frame, app: &App, area: Rect) {
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
    let title = format!("Results: {}", dir.display());
    let b = block(app, &title, true);
    let inner = b.inner(table_area);
    frame.render_widget(b, table_area);
    let widths = [0usize, 8, 9, 9, 8, 10, 6];
    let id_width = (inner.width as usize)
        .saturating_sub(widths.iter().sum::<usize>() + widths.len())
        .max(12);
    let cell = |k: usize, text: String| -> String {
        let w = if k == 0 { id_width } else { widths[k] };
        let t: String = text.chars().take(w).collect();
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
    let rows = (inner.height as usize).saturating_sub(1);
    let first = res.selected.saturating_sub(rows.saturating_sub(1));
    for (k, r) in res.rows.iter().enumerate().skip(first).take(rows) {
        let values = [
            r.id.clone(),
            r.status.clone(),
            opt(r.mean_ms, 3),
            opt(r.p99_ms, 3),
            opt(r.inferences_per_s, 1),
            r.peak_rss_bytes.map_or("-".into(), render::bytes),
            opt(r.cpu_mean_pct, 0),
        ];
        let text: Vec<String> = values
            .into_iter()
            .enumerate()
            .map(|(c, v)| cell(c, v))
            .collect();
        let style = if k == res.selected {
            app.theme.selected()
        } else if r.status == "ok" {
            app.theme.text()
        } else {
            app.theme.error()
        };
        lines.push(Line::from(Span::styled(text.join(" "), style)));
    }
    if res.rows.is_empty() {
        lines.push(Line::from(Span::styled(
            "this directory has no conditions",
            app.theme.muted(),
        )));
    }
    frame.render_widget(Paragraph::new(lines), inner);
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

fn draw_roofline(frame: &mut Frame, app: &App, area: Rect) {
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
        Some(Err(why)) => {
            frame.render_widget(
                Paragraph::new(Span::styled(why.clone(), app.theme.error()))
                    .wrap(Wrap { trim: true })
                    .block(block(app, &bare_title, true)),
                area,
            );
            return;
        }
        Some(Ok(c)) => c,
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
    // The drill-down draws the highest-ranked layers instead of the sweep's programs.
    let layers = match &rv.layers {
        Some(Ok(l)) => Some(l),
        _ => None,
    };
    let drawn: &[edgeprof::roofline::Program] = match layers {
        Some(l) => &l.programs[..l.programs.len().min(super::app::LAYER_MARKS)],
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
        (Some(l), _) => format!("Layers of {} (time % × headroom)", l.condition),
        (None, edgeprof::roofline::Processor::Cpu) => "Programs (l: layers)".to_string(),
        (None, edgeprof::roofline::Processor::Gpu) => "GPU profiles".to_string(),
    };
    let b = block(app, &list_title, true);
    let inner = b.inner(legend);
    frame.render_widget(b, legend);
    let rows = inner.height as usize;
    let mut lines: Vec<Line> = Vec::new();
    match &rv.layers {
        Some(Err(why)) => lines.push(Line::from(Span::styled(why.clone(), app.theme.warn()))),
        Some(Ok(l)) => {
            let first = l.selected.saturating_sub(rows.saturating_sub(1));
            for (k, (p, r)) in l
                .programs
                .iter()
                .zip(&l.ranks)
                .enumerate()
                .skip(first)
                .take(rows)
            {
                let mark = if k < super::app::LAYER_MARKS {
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
                        100.0 * r.time_share,
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
    let list = if matches!(rv.layers, Some(Err(_))) {
        list.wrap(Wrap { trim: true })
    } else {
        list
    };
    frame.render_widget(list, inner);
    let b = block(app, "Advice, in order", false);
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
                    format!("{}. {step}", k + 1),
                    app.theme.text(),
                )));
            }
            lines
        }
    };
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), inner);
}

fn c_source(c: &edgeprof::roofline::Ceilings) -> String {
    c.source.to_string()
}

fn draw_monitor(frame: &mut Frame, app: &App, area: Rect) {
    let live = &app.monitor;
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(area);
    let b = block(app, "CPU per core", false);
    let inner = b.inner(left);
    frame.render_widget(b, left);
    frame.render_widget(
        Paragraph::new(core_lines(app, live, inner.width as usize)),
        inner,
    );
    let [gpu, mem, facts] = Layout::vertical([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .areas(right);
    gpu_panel(frame, app, gpu, &live.gpu_load);
    series_panel(
        frame,
        app,
        mem,
        Series {
            title: "memory used",
            data: &live.mem_used_mib,
            unit: "MiB",
            max: live.mem_total_mib(),
            colour: 1,
            missing: "waiting for samples",
        },
    );
    let b = block(app, "Power, temperatures, throttling", false);
    let inner = b.inner(facts);
    frame.render_widget(b, facts);
    let mut lines = Vec::new();
    if let Some(s) = &live.last {
        let mut first = Vec::new();
        if let (Some(u), Some(t)) = (s.mem_used_bytes, s.mem_total_bytes) {
            first.push(format!(
                "memory {} of {}",
                render::bytes(u),
                render::bytes(t)
            ));
        }
        if let Some(g) = s.gpus.first() {
            if let Some(m) = g.mem_used_bytes {
                first.push(format!("GPU memory {}", render::bytes(m)));
            }
            if let Some(f) = g.freq_mhz {
                first.push(format!("GPU {f} MHz"));
            }
        }
        match s.power_w {
            Some(w) => first.push(format!("{w:.2} W")),
            None => first.push(match &app.conditions.offer.power {
                Ok(_) => "power: waiting".to_string(),
                Err(why) => format!("power: {why}"),
            }),
        }
        lines.push(Line::from(Span::styled(
            first.join(" · "),
            app.theme.text(),
        )));
        let temps: Vec<String> = s
            .temperatures
            .iter()
            .map(|t| format!("{} {:.0}°C", t.name, t.value))
            .collect();
        if !temps.is_empty() {
            lines.push(Line::from(Span::styled(temps.join("  "), app.theme.text())));
        }
        if !s.throttling.is_empty() {
            lines.push(Line::from(Span::styled(
                format!("THROTTLING: {}", s.throttling.join("; ")),
                app.theme.error(),
            )));
        }
    } else {
        lines.push(Line::from(Span::styled(
            "waiting for the first sample",
            app.theme.muted(),
        )));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), inner);
}

/// Every key, for the `?` overlay.
pub const HELP: &[(&str, &str)] = &[
    ("1-7, Tab, Shift-Tab", "switch tab"),
    ("?", "this help (Esc closes)"),
    ("q / Q", "quit (Q also cancels a run)"),
    ("o", "open a results directory"),
    ("Conditions: up/down", "choose an axis, or an item in it"),
    (
        "Conditions: right/left",
        "into the axis's items / back to the axes",
    ),
    ("Conditions: space/Enter", "tick or untick"),
    ("Conditions: + / -", "change a parameter"),
    (
        "Conditions: a",
        "add an ONNX file, input shape, batch or threads",
    ),
    ("Conditions: r", "run the selection"),
    (
        "Conditions: w / L",
        "save the selection as a config / load one",
    ),
    ("Run: c", "cancel the run (results so far are kept)"),
    ("Tune: t / c", "tune the selection's first model / cancel"),
    ("Results: ←/→ or s, r", "sort column, reverse"),
    (
        "Scorecard: ↑↓, PgUp/PgDn, p",
        "framework, scroll its table, probe this device",
    ),
    ("Roofline: up/down", "choose a program for its advice"),
    (
        "Roofline: l",
        "the selected condition's layers, ranked (Esc: back)",
    ),
    ("Roofline: p", "judge against the fp32, fp64 or fp16 roof"),
    (
        "Roofline: m",
        "measure the ceilings shown (CPU about 5 s; GPU by CUDA)",
    ),
    (
        "Roofline: g",
        "switch between the CPU's and GPU 0's roofline",
    ),
];

fn draw_help(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let width = area.width.saturating_sub(2).min(78);
    let height = (HELP.len() as u16 + 4).min(area.height.saturating_sub(2));
    let popup = Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height.saturating_sub(height)) / 2,
        width,
        height,
    );
    frame.render_widget(Clear, popup);
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(keys, what)| {
            Line::from(vec![
                Span::styled(format!("{:<24}", arrows(app, keys)), app.theme.accent()),
                Span::styled(what.to_string(), app.theme.text()),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block(app, "Keys", true)), popup);
}

#[cfg(test)]
mod tests {
    use super::super::app::{App, Command, Prompt, PromptFor, RunEvent, Tab};
    use super::super::conditions::tests::conditions;
    use super::super::theme::Theme;
    use super::*;
    use edgeprof::collect::telemetry::{Core, Gpu, Sample};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::path::{Path, PathBuf};

    const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

    fn app(text: &str, ascii: bool) -> App {
        let Some(theme) = Theme::built_in("dark") else {
            panic!("no dark theme")
        };
        App::new(conditions(text), theme, ascii)
    }

    fn default_app() -> App {
        app(include_str!("../../configs/default.toml"), false)
    }

    fn screen(app: &App, (w, h): (u16, u16)) -> String {
        let mut terminal = match Terminal::new(TestBackend::new(w, h)) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        if let Err(e) = terminal.draw(|f| draw(f, app)) {
            panic!("{e}");
        }
        format!("{}", terminal.backend())
    }

    /// Snapshots of `app` at both sizes, named `name_WxH`.
    fn snap(name: &str, app: &App) {
        for size in SIZES {
            insta::assert_snapshot!(format!("{name}_{}x{}", size.0, size.1), screen(app, size));
        }
    }

    fn fixture_results() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/small")
    }

    fn fixture_ceilings() -> edgeprof::roofline::Ceilings {
        let text = include_str!("../../tests/fixtures/ceilings-pi4.json");
        match serde_json::from_str::<edgeprof::roofline::store::Stored>(text) {
            Ok(s) => s.ceilings,
            Err(e) => panic!("{e}"),
        }
    }

    fn sample(t_s: f64, gpu: f64, cpu: [f64; 4]) -> Sample {
        Sample {
            t_s,
            cores: cpu
                .iter()
                .enumerate()
                .map(|(id, &l)| Core {
                    id,
                    online: id != 3,
                    load_pct: (id != 3).then_some(l),
                    freq_mhz: Some(1500),
                })
                .collect(),
            mem_used_bytes: Some((1200 + (t_s * 10.0) as u64) << 20),
            mem_total_bytes: Some(3956 << 20),
            gpus: vec![Gpu {
                name: "jetson gv11b".into(),
                load_pct: Some(gpu),
                freq_mhz: Some(1377),
                mem_used_bytes: Some((900 + (t_s * 5.0) as u64) << 20),
                ..Gpu::default()
            }],
            temperatures: vec![edgeprof::collect::telemetry::Reading {
                name: "GPU-therm".into(),
                value: 48.5,
            }],
            power_w: Some(9.8),
            ..Sample::default()
        }
    }

    #[test]
    fn conditions_tab() {
        let mut a = default_app();
        snap("conditions", &a);
        // Into the Models axis, the cursor on the third model.
        a.axis = 3;
        a.in_items = true;
        a.cursors[3] = 2;
        snap("conditions_models", &a);
        // Parameters, and an error in the status line.
        a.axis = 7;
        a.say(Severity::Error, "nothing to run: 0 skipped, 8 excluded");
        snap("conditions_parameters_error", &a);
        a.axis = 8;
        a.in_items = false;
        a.status = None;
        a.prompt = Some(Prompt {
            purpose: PromptFor::SaveConfig,
            text: "default.toml".into(),
        });
        snap("conditions_metrics_prompt", &a);
    }

    #[test]
    fn every_axis_pane() {
        let mut a = default_app();
        a.in_items = true;
        for (k, axis) in AXES.iter().enumerate() {
            a.axis = k;
            let name = axis.title().to_lowercase().replace(' ', "_");
            snap(&format!("axis_{name}"), &a);
        }
    }

    #[test]
    fn help_overlay_and_ascii() {
        let mut a = app(include_str!("../../configs/default.toml"), true);
        a.help = true;
        snap("help_ascii", &a);
        a.help = false;
        a.in_items = true;
        snap("conditions_ascii", &a);
    }

    #[test]
    fn run_tab_of_a_fleet_shows_each_node() {
        use edgeprof::fleet::run::{FleetEvent, NodeOutcome, NodeStatus};
        let mut a = default_app();
        a.tab = Tab::Run;
        a.run_event(RunEvent::FleetStarted {
            dir: PathBuf::from("results/20261130T150000Z-fleet-fleet"),
            nodes: vec!["pi4".into(), "orin".into(), "nano".into()],
        });
        for (node, device) in [
            ("pi4", "aarch64 Raspberry Pi 4 Model B Rev 1.5, 4 CPU(s)"),
            ("orin", "aarch64 NVIDIA Jetson AGX Orin, 12 CPU(s)"),
        ] {
            a.run_event(RunEvent::Node(FleetEvent::Started {
                node: node.into(),
                conditions: 4,
                device: device.into(),
            }));
        }
        let record = |id: &str, ok: bool| {
            let condition = edgeprof::runner::matrix::Condition::new(
                "tract",
                edgeprof::config::ModelRef::Zoo(id.into()),
                edgeprof::models::InputShape::default(),
                1,
                0,
                edgeprof::config::Device::Cpu,
            );
            Box::new(edgeprof::results::RunRecord {
                condition,
                attempt: 1,
                last: true,
                started: "2026-11-30T15:00:00Z".into(),
                ok,
                reason: (!ok).then(|| {
                    "node pi4 dropped before this condition finished: Connection reset".into()
                }),
                failure: None,
                run: None,
                stats: None,
                resources: Default::default(),
                telemetry: None,
            })
        };
        a.run_event(RunEvent::Node(FleetEvent::Record {
            node: "orin".into(),
            record: record("mobilenet_v2", true),
        }));
        a.run_event(RunEvent::Node(FleetEvent::Record {
            node: "pi4".into(),
            record: record("resnet34", true),
        }));
        a.run_event(RunEvent::Node(FleetEvent::Dropped {
            node: "pi4".into(),
            reason: "Connection reset by 10.0.0.21 port 22".into(),
            resuming: true,
        }));
        a.run_event(RunEvent::Node(FleetEvent::Record {
            node: "pi4".into(),
            record: record("resnet50", false),
        }));
        a.run_event(RunEvent::Node(FleetEvent::Finished(NodeOutcome {
            name: "nano".into(),
            destination: Some("nano@10.0.0.31".into()),
            status: NodeStatus::Unreachable,
            reason: Some("ssh: connect to host 10.0.0.31 port 22: No route to host".into()),
            resumed: 0,
            remote_dir: None,
            conditions: 0,
            ok: 0,
            failed: 0,
        })));
        assert_eq!((a.run.total, a.run.ok, a.run.failed), (8, 2, 1));
        assert_eq!(
            a.run.nodes[0].state,
            "dropped: Connection reset by 10.0.0.21 port 22"
        );
        snap("run_fleet", &a);
    }

    #[test]
    fn run_tab() {
        let mut a = default_app();
        a.tab = Tab::Run;
        snap("run_empty", &a);
        a.run_event(RunEvent::Started {
            dir: PathBuf::from("results/20261130T020000Z-default"),
            total: 8,
            done_before: 0,
            estimates: vec![10.0; 8],
            iterations: 500,
        });
        a.run_event(RunEvent::Attempt {
            index: 1,
            total: 8,
            condition: "tract/resnet34/3x32x32/b1/t0/cpu".into(),
            attempt: 1,
            attempts: 2,
        });
        for k in 0..60 {
            let t = k as f64 * 0.5;
            a.run_event(RunEvent::Telemetry(Box::new(sample(
                t,
                (k * 7 % 100) as f64,
                [90.0, 85.0, 12.0, 0.0],
            ))));
            a.run_event(RunEvent::Worker(edgeprof::collect::proc::ProcSample {
                t_s: t,
                cpu_pct: Some(180.0),
                rss_bytes: Some((40 + k) << 20),
                hwm_bytes: None,
                mem_used_bytes: None,
                mem_total_bytes: None,
            }));
        }
        a.run_event(RunEvent::Timed(250));
        a.run.elapsed_s = 4.0;
        snap("run_live", &a);
        a.run_event(RunEvent::Finished {
            dir: Some(PathBuf::from("results/20261130T020000Z-default")),
            outcome: None,
            error: Some(
                "cannot append to runs.jsonl: No space left on device (os error 28)".into(),
            ),
        });
        snap("run_error", &a);
    }

    #[test]
    fn results_and_roofline_tabs() {
        let mut a = default_app();
        a.tab = Tab::Results;
        snap("results_empty", &a);
        super::super::open_results(&mut a, Path::new("/nonexistent/results"));
        // The directory in the message is this test's own; the screen shows it as is.
        snap("results_missing", &a);
        a.results.error = None;
        a.roofline.ceilings = Some(Ok((fixture_ceilings(), "ceilings-pi4.json".into())));
        super::super::open_results(&mut a, &fixture_results());
        a.results.dir = Some(PathBuf::from("results/small"));
        a.status = None;
        snap("results", &a);
        a.key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Right,
            crossterm::event::KeyModifiers::NONE,
        ));
        a.key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Right,
            crossterm::event::KeyModifiers::NONE,
        ));
        assert_eq!(a.results.sort, 2);
        // Sorted by mean latency: shufflenet first.
        assert!(
            a.results.rows[0].id.contains("shufflenet"),
            "{:?}",
            a.results.rows[0].id
        );
        a.tab = Tab::Roofline;
        snap("roofline", &a);
        a.roofline.selected = 1;
        snap("roofline_second", &a);
        // The drill-down into the second condition's layers (profiled by hand here).
        let Some(Command::Layers { condition, classes }) = a.key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('l'),
            crossterm::event::KeyModifiers::NONE,
        )) else {
            panic!("no drill-down")
        };
        assert_eq!(classes, 1000);
        snap("roofline_layers_pending", &a);
        let layer = |label: &str, mflops: f64, ms: f64, kib: f64| edgeprof::roofline::Program {
            label: label.into(),
            precision: edgeprof::roofline::Precision::Fp32,
            flops: mflops * 1e6,
            seconds: ms / 1e3,
            traffic: vec![(edgeprof::roofline::Level::Dram, kib * 1024.0)],
            source: edgeprof::roofline::PointSource::Analytic,
            basis: Vec::new(),
        };
        a.layers_profiled(
            condition.id.clone(),
            Ok(vec![
                layer("features.0.conv", 1.8, 0.30, 120.0),
                layer("features.1.dw", 0.4, 0.45, 400.0),
                layer("features.2.pw", 3.2, 0.20, 60.0),
                layer("classifier", 1.3, 0.10, 5000.0),
            ]),
        );
        snap("roofline_layers", &a);
        a.key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Esc,
            crossterm::event::KeyModifiers::NONE,
        ));
        assert!(a.roofline.layers.is_none());
        a.roofline = Default::default();
        snap("roofline_empty", &a);
        a.roofline.ceilings = Some(Err(
            "no ceilings for this device yet: press m to measure them (about 5 s), or run \
             `edgeprof roofline measure`"
                .into(),
        ));
        snap("roofline_no_ceilings", &a);
        assert_eq!(
            a.key(crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char('m'),
                crossterm::event::KeyModifiers::NONE,
            )),
            Some(Command::MeasureCeilings(edgeprof::roofline::Processor::Cpu))
        );
    }

    #[test]
    fn the_gpu_side_of_the_roofline() {
        use edgeprof::roofline::Processor;
        let key = |a: &mut App, c: char| {
            a.key(crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char(c),
                crossterm::event::KeyModifiers::NONE,
            ))
        };
        let mut a = default_app();
        a.tab = Tab::Roofline;
        a.roofline.ceilings = Some(Ok((fixture_ceilings(), "ceilings-pi4.json".into())));
        // g: the GPU side, whose ceilings are read first.
        assert_eq!(
            key(&mut a, 'g'),
            Some(Command::LoadCeilings(Processor::Gpu))
        );
        assert_eq!(a.roofline.processor, Processor::Gpu);
        a.roofline.ceilings = Some(Err(
            "no ceilings for GPU 0 yet: press m to measure them with \
             the CUDA microbenchmark, or run `edgeprof roofline measure-gpu`"
                .into(),
        ));
        snap("roofline_gpu_no_ceilings", &a);
        assert_eq!(
            key(&mut a, 'm'),
            Some(Command::MeasureCeilings(Processor::Gpu))
        );
        let stored: edgeprof::roofline::store::Stored =
            match serde_json::from_str(include_str!("../../tests/fixtures/ceilings-orin-gpu.json"))
            {
                Ok(s) => s,
                Err(e) => panic!("{e}"),
            };
        a.roofline.ceilings = Some(Ok((stored.ceilings, "ceilings-orin-gpu.json".into())));
        let import = match edgeprof::roofline::nvidia::parse_ncu(include_str!(
            "../../tests/fixtures/gpu-profilers/ncu-orin.csv"
        )) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        a.roofline.programs = edgeprof::roofline::nvidia::program(&import, "resnet-orin")
            .into_iter()
            .collect();
        a.roofline.left_out = vec![("broken".into(), "not Nsight Compute CSV output".into())];
        a.refresh_roofline();
        assert!(
            matches!(a.roofline.analyses.first(), Some(Ok(_))),
            "{:?}",
            a.roofline.analyses
        );
        snap("roofline_gpu", &a);
        // g again: the CPU side as it was; a side already seen is not read again.
        assert_eq!(key(&mut a, 'g'), None);
        assert_eq!(a.roofline.processor, Processor::Cpu);
        assert!(matches!(&a.roofline.ceilings, Some(Ok((_, from))) if from == "ceilings-pi4.json"));
        assert_eq!(key(&mut a, 'g'), None);
        assert_eq!(a.roofline.programs.len(), 1);
    }

    #[test]
    fn scorecard_tab() -> anyhow::Result<()> {
        use edgeprof::scorecard::here::{Here, State};
        let mut a = default_app();
        a.tab = Tab::Scorecard;
        a.scorecard.cards = edgeprof::scorecard::cards::shipped()?;
        a.scorecard.rejoin(&[]);
        snap("scorecard_unprobed", &a);
        super::super::open_results(&mut a, &fixture_results());
        let here = |name: &str, state, version: Option<&str>, devices: &[&str]| Here {
            framework: name.into(),
            state,
            version: version.map(str::to_string),
            python: None,
            devices: devices.iter().map(|d| d.to_string()).collect(),
            tools: Vec::new(),
            note: None,
        };
        a.frameworks_probed(vec![
            here("tract", State::BuiltIn, Some("0.23.9"), &["CPU (asimd)"]),
            here("candle", State::BuiltIn, Some("0.11.1"), &["CPU (asimd)"]),
            here(
                "onnxruntime",
                State::Installed,
                Some("1.32.0"),
                &["CPUExecutionProvider"],
            ),
            here("tensorrt", State::Absent, None, &[]),
        ]);
        a.tab = Tab::Scorecard;
        snap("scorecard_tract", &a);
        // The runtime table of the selected framework comes from the open results.
        let text = screen(&a, (120, 40));
        assert!(text.contains("mobilenet_v2"), "{text}");
        a.key(crossterm::event::KeyEvent::from(
            crossterm::event::KeyCode::Down,
        ));
        a.key(crossterm::event::KeyEvent::from(
            crossterm::event::KeyCode::PageDown,
        ));
        assert_eq!((a.scorecard.selected, a.scorecard.scroll), (1, 10));
        let probe = a.key(crossterm::event::KeyEvent::from(
            crossterm::event::KeyCode::Char('p'),
        ));
        assert_eq!(probe, Some(Command::ProbeFrameworks));
        assert!(a.scorecard.probing);
        Ok(())
    }

    #[test]
    fn tune_tab() {
        use super::super::app::{TuneMsg, TuneResult};
        let mut a = default_app();
        a.tab = Tab::Tune;
        snap("tune_empty", &a);
        a.tune_event(TuneMsg::Started {
            dir: PathBuf::from("results/20261130T120000Z-tune-mobilenet_v2"),
            title: "mobilenet_v2 3x64x64 for latency".into(),
            unit: "ms".into(),
            budget: 12,
            candidates: 48,
            skipped: vec![
                "pytorch: pytorch is not set up (run: edgeprof env setup pytorch)".into(),
            ],
        });
        let trials = [
            ("tract t2 all b1", None, Some(5.433)),
            (
                "onnxruntime t2 one b4 graph_optimization_level=all spinning=false",
                None,
                Some(3.902),
            ),
            (
                "onnxruntime t1 one b4 graph_optimization_level=all spinning=false",
                Some((5.514, 0.32)),
                Some(3.738),
            ),
            ("candle t1 one b4", Some((4.34, 0.95)), None),
            (
                "onnxruntime t1 one b1 graph_optimization_level=all spinning=false",
                Some((4.925, 0.31)),
                Some(1.017),
            ),
        ];
        let mut best: Option<f64> = None;
        for (k, (label, predicted, cost)) in trials.iter().enumerate() {
            a.tune_event(TuneMsg::Trial {
                n: k + 1,
                label: label.to_string(),
                predicted: *predicted,
            });
            if let Some(c) = cost {
                best = Some(best.map_or(*c, |b: f64| b.min(*c)));
            }
            a.tune_event(TuneMsg::Measured {
                n: k + 1,
                cost: *cost,
                failure: cost
                    .is_none()
                    .then(|| "peak memory 900.0 MiB exceeds the limit".into()),
                best_cost: best,
            });
        }
        a.tune_event(TuneMsg::Trial {
            n: 6,
            label: "onnxruntime t2 all b1 graph_optimization_level=all spinning=false".into(),
            predicted: Some((1.068, 0.16)),
        });
        snap("tune_running", &a);
        a.tune_event(TuneMsg::Measured {
            n: 6,
            cost: Some(1.265),
            failure: None,
            best_cost: Some(1.017),
        });
        a.tune_event(TuneMsg::Finished {
            result: Some(TuneResult {
                stop: "the trial budget was spent".into(),
                best: Some((
                    "onnxruntime t1 one b1 graph_optimization_level=all spinning=false".into(),
                    1.017,
                )),
                default: ("tract t2 all b1".into(), Some(5.433)),
                confirmed: Some((6.054, 1.263, 4.79)),
                model_error: Some((0.371, 0.733, 4)),
                keep_default: false,
            }),
            error: None,
        });
        assert!(!a.tune.active);
        snap("tune_done", &a);
    }

    #[test]
    fn monitor_tab() {
        let mut a = default_app();
        a.tab = Tab::Monitor;
        snap("monitor_empty", &a);
        for k in 0..40 {
            let mut s = sample(k as f64, (k * 13 % 100) as f64, [55.0, 20.0, 100.0, 0.0]);
            if k == 39 {
                s.throttling = vec!["under-voltage".into()];
            }
            a.monitor_sample(s);
        }
        snap("monitor", &a);
    }
}

//! Drawing the UI: one function per tab, all from [`App`] alone, so a frame depends on nothing
//! but the state (what the snapshot tests rely on). Usable from 80×24 up; `--ascii` draws with
//! ASCII only.

mod conditions;
mod monitor;
mod results;
mod roofline;
mod run;
mod scorecard;
mod train;
mod tune;

use conditions::*;
use monitor::*;
use results::*;
use roofline::*;
use run::*;
use scorecard::*;
use train::*;
use tune::*;

use super::app::{App, GpuHistory, Live, Severity, Tab, RESULT_COLUMNS, TABS};
use super::conditions::{Axis, AXES};
use edgeprof::text as render;
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
        Tab::Run if app.train.shown => draw_train(frame, app, body),
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
    if app.log_open {
        draw_log(frame, app);
    }
    if app.ascii {
        to_ascii(frame.buffer_mut());
    }
}

/// An ASCII stand-in for a character the views draw (a terminal without Unicode fonts would
/// show a box or a question mark instead).
fn ascii_for(c: char) -> char {
    match c {
        '·' | '•' | '∙' => '.',
        '×' => 'x',
        '—' | '–' | '─' | '━' => '-',
        '…' => '~',
        '±' => '~',
        '→' | '▶' | '►' => '>',
        '←' | '◀' => '<',
        '↑' | '▲' => '^',
        '↓' | '▼' => 'v',
        '°' => 'o',
        'µ' | 'μ' => 'u',
        '│' | '┃' => '|',
        '≤' => '<',
        '≥' => '>',
        '█' | '▇' | '▆' | '▅' => '#',
        '▄' | '▃' | '▂' | '▁' => '_',
        c if c.is_ascii() => c,
        _ => '?',
    }
}

/// Every cell of `buffer` in ASCII: what `--ascii` promises, whatever a view or a name drew.
fn to_ascii(buffer: &mut ratatui::buffer::Buffer) {
    for cell in buffer.content.iter_mut() {
        let symbol = cell.symbol();
        if !symbol.is_ascii() {
            let plain: String = symbol.chars().map(ascii_for).collect();
            cell.set_symbol(&plain);
        }
    }
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let mut spans = Vec::new();
    let running = app
        .run
        .active
        .then(|| format!(" running {}/{}", app.run.index, app.run.total));
    // The tabs' whole names when they fit beside the run's state; else the tabs other than the
    // current one show their number and first letters, so that the run's state keeps its place.
    let whole: usize = "edgeprof ".len()
        + TABS
            .iter()
            .enumerate()
            .map(|(k, t)| format!("{} {} ", k + 1, t.title()).chars().count())
            .sum::<usize>()
        + running.as_ref().map_or(0, |r| r.chars().count());
    let narrow = whole > usize::from(area.width);
    // Under about 64 columns even the short tabs need the room the name takes.
    if !narrow || area.width >= 64 {
        spans.push(Span::styled("edgeprof ", app.theme.accent()));
    }
    for (k, tab) in TABS.iter().enumerate() {
        let title: String = if narrow && *tab != app.tab {
            tab.title().chars().take(4).collect()
        } else {
            tab.title().to_string()
        };
        let label = format!("{} {title} ", k + 1);
        let style = if *tab == app.tab {
            app.theme.selected()
        } else {
            app.theme.text()
        };
        spans.push(Span::styled(label, style));
    }
    if let Some(running) = running {
        spans.push(Span::styled(running, app.theme.warn()));
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
        Line::from(Span::styled(text.clone(), severity_style(app, *severity)))
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
        Tab::Results => "↑↓ row  Enter detail  / filter  h hide skipped  s sort  r reverse  q quit",
        Tab::Roofline if app.roofline.layers.is_some() => {
            "↑↓ layer  l/Esc back to programs  p precision  ? help  q quit"
        }
        Tab::Roofline if app.roofline.processor == edgeprof::roofline::Processor::Gpu => {
            "↑↓ profile  g CPU  p precision  m measure  o open  ? help  q quit"
        }
        Tab::Roofline => {
            "↑↓ program  l layers  g GPU  p precision  m measure  o open  ? help  q quit"
        }
        Tab::Monitor => "space pause  +/- interval  s sort  Tab next tab  ? help  q quit",
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

/// Each GPU's load, one chart above the other, or why this machine has no GPU figures.
fn gpu_panel(frame: &mut Frame, app: &App, area: Rect, gpus: &[GpuHistory]) {
    let missing = match &app.conditions.offer.gpu_telemetry {
        Err(why) => format!("no GPU figures: {}", why.split("; ").next().unwrap_or(why)),
        Ok(_) => "waiting for samples".to_string(),
    };
    let empty = VecDeque::new();
    gpu_series(
        frame,
        app,
        area,
        gpus,
        |g| &g.load,
        ("%", "%"),
        Some(100),
        0,
        &missing,
        &empty,
    );
}

/// One chart per GPU of `figure` ("GPU0 %", "GPU1 memory" …), stacked in `area` when each
/// gets three rows, else one line per GPU with its recent figures as a sparkline. A single
/// GPU's chart (or the place for one, with `missing`) is titled "GPU %" / "GPU memory".
#[allow(clippy::too_many_arguments)]
fn gpu_series<'a>(
    frame: &mut Frame,
    app: &App,
    area: Rect,
    gpus: &'a [GpuHistory],
    figure: impl Fn(&'a GpuHistory) -> &'a VecDeque<f64>,
    (what, unit): (&str, &str),
    max: Option<u64>,
    colour: usize,
    missing: &str,
    empty: &'a VecDeque<f64>,
) {
    if gpus.len() <= 1 {
        let data = gpus.first().map_or(empty, &figure);
        series_panel(
            frame,
            app,
            area,
            Series {
                title: &format!("GPU {what}"),
                data,
                unit,
                max,
                colour,
                missing,
            },
        );
        return;
    }
    if usize::from(area.height / 3) < gpus.len() {
        // Too many for a chart each: one line each, its recent figures as a sparkline.
        let title = format!("GPUs {what}");
        let b = block(app, &title, false);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let lines: Vec<Line> = gpus
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let data = figure(g);
                let now = data
                    .back()
                    .map_or("-".to_string(), |v| format!("{v:.0} {unit}"));
                let room = (inner.width as usize).saturating_sub(6 + now.len() + 1);
                let recent: Vec<(f64, f64)> = data
                    .iter()
                    .skip(data.len().saturating_sub(room))
                    .enumerate()
                    .map(|(k, v)| (k as f64, *v))
                    .collect();
                let top = max.map_or_else(
                    || recent.iter().map(|p| p.1).fold(1.0, f64::max),
                    |m| m as f64,
                );
                let mut spark = edgeprof::report::curves::sparkline(&recent, recent.len(), top);
                if app.ascii {
                    spark = edgeprof::report::curves::ascii(&spark);
                }
                Line::from(vec![
                    Span::styled(format!("GPU{i:<2} "), app.theme.muted()),
                    Span::styled(spark, app.theme.text()),
                    Span::styled(format!(" {now}"), app.theme.text()),
                ])
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), inner);
        return;
    }
    let rows =
        Layout::vertical(vec![Constraint::Ratio(1, gpus.len() as u32); gpus.len()]).split(area);
    for (i, (g, row)) in gpus.iter().zip(rows.iter()).enumerate() {
        let title = format!("GPU{i} {what}");
        series_panel(
            frame,
            app,
            *row,
            Series {
                title: &title,
                data: figure(g),
                unit,
                max,
                colour,
                missing: "waiting for samples",
            },
        );
    }
}

/// One line per core: its id, its load over the last samples (newest on the right), its load
/// now, its clock now and, where the panel has room, the range its clock took over the samples
/// shown.
fn core_lines(app: &App, live: &Live, width: usize) -> Vec<Line<'static>> {
    let Some(sample) = &live.last else {
        return vec![Line::from(Span::styled(
            "waiting for the first sample",
            app.theme.muted(),
        ))];
    };
    let with_freq = sample.cores.iter().any(|c| c.freq_mhz.is_some());
    // " 0.6-1.8" beside the clock when a history of 16 points still fits.
    let with_range = with_freq && width >= 6 + 5 + 7 + 8 + 16;
    let history_width = width
        .saturating_sub(6 + 5 + if with_freq { 7 } else { 0 } + if with_range { 8 } else { 0 })
        .clamp(4, 60);
    let levels: &[char] = if app.ascii {
        &[' ', '.', ':', '-', '=', '+', '*', '#', '@']
    } else {
        &[' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█']
    };
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
            let history: String = match live.core_load.get(&c.id) {
                Some(points) => {
                    let shown = tail(points, history_width);
                    let pad = history_width - shown.len();
                    std::iter::repeat_n(' ', pad)
                        .chain(shown.iter().map(|&v| {
                            let step = (v.min(100) as usize * (levels.len() - 1)).div_ceil(100);
                            levels[step.min(levels.len() - 1)]
                        }))
                        .collect()
                }
                None => bar(app, load / 100.0, history_width),
            };
            let mut spans = vec![
                Span::styled(format!("cpu{:<3}", c.id), app.theme.text()),
                Span::styled(history, style),
                Span::styled(format!(" {load:>3.0}%"), app.theme.text()),
            ];
            if with_freq {
                spans.push(Span::styled(
                    match c.freq_mhz {
                        Some(f) => format!(" {:>4.2}G", f64::from(f) / 1000.0),
                        None => "      ".to_string(),
                    },
                    app.theme.muted(),
                ));
            }
            if with_range {
                let shown = live
                    .core_mhz
                    .get(&c.id)
                    .map(|points| tail(points, history_width))
                    .unwrap_or_default();
                let range = match (shown.iter().min(), shown.iter().max()) {
                    (Some(&low), Some(&high)) => {
                        format!(" {:.1}-{:.1}", low as f64 / 1000.0, high as f64 / 1000.0)
                    }
                    _ => String::new(),
                };
                spans.push(Span::styled(range, app.theme.muted()));
            }
            Line::from(spans)
        })
        .collect()
}

/// Every key, for the `?` overlay.
pub const HELP: &[(&str, &str)] = &[
    ("1-7, Tab, Shift-Tab", "switch tab"),
    ("?", "this help (Esc closes)"),
    ("q / Q", "quit (Q, or q twice, cancels a run)"),
    ("M", "the message log: everything the status line said"),
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
    ("Run / Results: R", "resume the interrupted run shown"),
    ("Tune: t / c", "tune the selection's first model / cancel"),
    ("Results: ←/→ or s, r", "sort column, reverse"),
    (
        "Results: Enter",
        "the selected condition's every figure (again: charts; PgUp/PgDn scroll it)",
    ),
    (
        "Results: / or h",
        "show names holding a text / hide skipped",
    ),
    (
        "Results: b",
        "compare with the selected condition (again: stop)",
    ),
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
    (
        "Monitor: space, + / -",
        "pause and resume; sample more / less often",
    ),
    (
        "Monitor: s",
        "sort the processes by CPU, memory or GPU memory",
    ),
];

/// A cleared area in the middle of the screen, at most `width` × `height` and a cell short of
/// each edge, for an overlay.
fn centred_popup(frame: &mut Frame, width: u16, height: u16) -> Rect {
    let area = frame.area();
    let width = area.width.saturating_sub(2).min(width);
    let height = height.min(area.height.saturating_sub(2));
    let popup = Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height.saturating_sub(height)) / 2,
        width,
        height,
    );
    frame.render_widget(Clear, popup);
    popup
}

/// How a message of `severity` is drawn.
fn severity_style(app: &App, severity: Severity) -> Style {
    match severity {
        Severity::Info => app.theme.ok(),
        Severity::Warn => app.theme.warn(),
        Severity::Error => app.theme.error(),
    }
}

fn draw_help(frame: &mut Frame, app: &App) {
    let keys: Vec<String> = HELP.iter().map(|(k, _)| arrows(app, k)).collect();
    let key_width = keys.iter().map(|k| k.chars().count()).max().unwrap_or(0) + 2;
    let popup = centred_popup(frame, 78, HELP.len() as u16 + 2);
    // Each key, and what it does wrapped at spaces beside it.
    let room = usize::from(popup.width.saturating_sub(2))
        .saturating_sub(key_width)
        .max(10);
    let mut lines: Vec<Line> = Vec::new();
    for (key, (_, what)) in keys.iter().zip(HELP) {
        let wrapped = edgeprof::text::wrap(what, room, "");
        for (k, part) in wrapped.split('\n').enumerate() {
            let key = if k == 0 { key.as_str() } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!("{key:<key_width$}"), app.theme.accent()),
                Span::styled(part.to_string(), app.theme.text()),
            ]));
        }
    }
    // On a short screen the keys scroll; the title says where the list stands.
    let total = lines.len() as u16;
    let rows = popup.height.saturating_sub(2);
    let most = total.saturating_sub(rows);
    let scroll = app.help_scroll.min(most);
    let title = if most == 0 {
        "Keys".to_string()
    } else {
        format!(
            "Keys: lines {}-{} of {} ({} scroll)",
            scroll + 1,
            (scroll + rows).min(total),
            total,
            arrows(app, "↑↓")
        )
    };
    frame.render_widget(
        Paragraph::new(lines)
            .scroll((scroll, 0))
            .block(block(app, &title, true)),
        popup,
    );
}

/// The message log (M): everything the status line said, newest last, with its time (UTC).
fn draw_log(frame: &mut Frame, app: &App) {
    let popup = centred_popup(frame, 110, frame.area().height);
    let b = block(app, "Messages (M or Esc closes)", true);
    let inner = b.inner(popup);
    frame.render_widget(b, popup);
    if app.said.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("nothing said yet", app.theme.muted())),
            inner,
        );
        return;
    }
    // The newest at the bottom: as many of the last ones as fit, wrapped.
    // Counted as if lines were a little narrower: wrapping at spaces leaves some room unused.
    let width = (inner.width as usize).saturating_sub(10).max(10);
    let mut rows = 0;
    let shown = app
        .said
        .iter()
        .rev()
        .take_while(|(time, _, text)| {
            rows += (time.chars().count() + 1 + text.chars().count()).div_ceil(width);
            rows <= inner.height as usize
        })
        .count();
    let lines: Vec<Line> = app
        .said
        .iter()
        .skip(app.said.len() - shown)
        .map(|(time, severity, text)| {
            let style = match severity {
                Severity::Info => app.theme.text(),
                Severity::Warn => app.theme.warn(),
                Severity::Error => app.theme.error(),
            };
            Line::from(vec![
                Span::styled(format!("{time} "), app.theme.muted()),
                Span::styled(text.clone(), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

#[cfg(test)]
mod curves_tests;
#[cfg(test)]
mod gpu_roofline_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod train_tests;

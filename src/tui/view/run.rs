//! The Run tab: the sweep's progress, the live worker and board telemetry, and its log.

use super::*;

pub(super) fn draw_run(frame: &mut Frame, app: &App, area: Rect) {
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
            let process = if r.processes > 1 {
                format!(", process {} of {}", r.process, r.processes)
            } else {
                String::new()
            };
            format!(
                "{}{process}: {}/{} timed iterations",
                r.current,
                r.timed,
                r.iterations + r.more_iterations
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
        let label = format!(
            " {}/{} {:>3.0}% · {} ok · {} failed · {state}",
            r.index,
            r.total,
            100.0 * r.fraction(),
            r.ok,
            r.failed
        );
        // The bar takes what the words leave, so the ETA is never cut.
        let width = (inner.width as usize)
            .saturating_sub(label.chars().count())
            .clamp(5, 60);
        vec![
            Line::from(vec![
                Span::styled(bar(app, r.fraction(), width), app.theme.accent()),
                Span::styled(label, app.theme.text()),
            ]),
            Line::from(Span::styled(current, app.theme.muted())),
        ]
    };
    frame.render_widget(Paragraph::new(progress), inner);
    // Without a GPU to watch, memory and the worker's RSS share the width.
    let no_gpu = r.live.gpus.is_empty() && app.conditions.offer.gpu_telemetry.is_err();
    let (gpu, mem, rss) = if no_gpu {
        let [mem, rss] =
            Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(charts);
        (None, mem, rss)
    } else {
        let [gpu, mem, rss] = Layout::horizontal([
            Constraint::Ratio(1, 3),
            Constraint::Ratio(1, 3),
            Constraint::Ratio(1, 3),
        ])
        .areas(charts);
        (Some(gpu), mem, rss)
    };
    if let Some(gpu) = gpu {
        gpu_panel(frame, app, gpu, &r.live.gpus);
    }
    // System memory on a scale that shows what the run uses (the machine's whole memory would
    // draw a flat line), and the GPU's beside it (half the panel each) when a source reports it.
    if r.live.gpus.iter().all(|g| g.mem_mib.is_empty()) {
        super::monitor::memory_panel(frame, app, mem, &r.live.mem_used_mib);
    } else {
        let [system, gpu_mem] =
            Layout::vertical([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(mem);
        super::monitor::memory_panel(frame, app, system, &r.live.mem_used_mib);
        let empty = VecDeque::new();
        gpu_series(
            frame,
            app,
            gpu_mem,
            &r.live.gpus,
            |g| &g.mem_mib,
            ("memory", "MiB"),
            r.live.mem_total_mib(),
            3,
            "waiting for samples",
            &empty,
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
    // The newest events that fit, each wrapped at spaces (its later lines indented).
    let rows = inner.height as usize;
    let width = usize::from(inner.width).max(12);
    let mut lines: Vec<Line> = Vec::new();
    for (severity, text) in r.log.iter().rev() {
        if lines.len() >= rows {
            break;
        }
        let style = match severity {
            Severity::Info => app.theme.text(),
            Severity::Warn => app.theme.warn(),
            Severity::Error => app.theme.error(),
        };
        let wrapped = edgeprof::text::wrap(text, width, "  ");
        for part in wrapped.split('\n').rev() {
            lines.push(Line::from(Span::styled(part.to_string(), style)));
        }
    }
    lines.truncate(rows);
    lines.reverse();
    frame.render_widget(Paragraph::new(lines), inner);
}

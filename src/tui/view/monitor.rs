//! The Monitor tab: the board's live telemetry.

use super::*;

pub(super) fn draw_monitor(frame: &mut Frame, app: &App, area: Rect) {
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

//! The Run tab during (and after) a training study: each cluster size with rank 0's progress,
//! the members of the size in progress with their devices and live figures, and the log.

use super::*;
use crate::tui::app::{SizeState, TrainView};

pub(super) fn draw_train(frame: &mut Frame, app: &App, area: Rect) {
    let t: &TrainView = &app.train;
    let [top, sizes_area, members_area, log_area] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length((t.sizes.len() as u16 + 3).min(area.height / 3).max(4)),
        Constraint::Min(4),
        Constraint::Length(5),
    ])
    .areas(area);
    let state = if t.active {
        "training"
    } else if t.error.is_some() {
        "stopped"
    } else if t.sizes.iter().any(|s| s.state == SizeState::Cancelled) {
        "cancelled"
    } else {
        "done"
    };
    let done = t
        .sizes
        .iter()
        .filter(|s| s.state != SizeState::Training)
        .count();
    let header = vec![
        Line::from(vec![
            Span::styled(
                format!("training {}", t.title),
                app.theme.accent().add_modifier(Modifier::BOLD),
            ),
            Span::styled(
                format!(" · {done}/{} size(s) · {state}", t.sizes.len()),
                app.theme.text(),
            ),
        ]),
        Line::from(Span::styled(t.data.clone(), app.theme.muted())),
    ];
    frame.render_widget(
        Paragraph::new(header)
            .wrap(Wrap { trim: true })
            .block(block(app, "Study", true)),
        top,
    );
    let row = |cells: [String; 6]| {
        format!(
            "{:>5} {:>7} {:>9} {:>7} {:>8} {}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]
        )
    };
    let mut lines = vec![Line::from(Span::styled(
        row([
            "nodes".into(),
            "epoch".into(),
            "train acc".into(),
            "val acc".into(),
            "speedup".into(),
            "state".into(),
        ]),
        app.theme.muted(),
    ))];
    for s in &t.sizes {
        let last = s.epochs.last();
        let state = match &s.state {
            SizeState::Training => "training".to_string(),
            SizeState::Trained(secs) => format!("{secs:.1} s"),
            SizeState::Failed(why) => format!("failed: {why}"),
            SizeState::Cancelled => "cancelled".to_string(),
        };
        let style = match s.state {
            SizeState::Failed(_) => app.theme.error(),
            _ => app.theme.text(),
        };
        lines.push(Line::from(Span::styled(
            row([
                s.nodes.to_string(),
                format!("{}/{}", s.epochs.len(), t.epochs),
                last.map(|e| format!("{:.3}", e.train_acc))
                    .unwrap_or_else(|| "-".into()),
                last.map(|e| format!("{:.3}", e.val_acc))
                    .unwrap_or_else(|| "-".into()),
                s.speedup
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_else(|| "-".into()),
                state,
            ]),
            style,
        )));
    }
    frame.render_widget(
        Paragraph::new(lines).block(block(app, "Cluster sizes", false)),
        sizes_area,
    );
    // The members of the size in progress (or the last one).
    let current = t.sizes.last();
    let members: Vec<Line> = current
        .map(|s| {
            s.members
                .iter()
                .enumerate()
                .map(|(rank, m)| {
                    let figures = match m.cpu_pct {
                        Some(cpu) => format!(
                            "CPU {cpu:>3.0}%  mem {}  net ↓{} ↑{}  ",
                            m.mem_used_bytes
                                .map(render::bytes)
                                .unwrap_or_else(|| "-".into()),
                            render::bytes(m.rx_bytes),
                            render::bytes(m.tx_bytes)
                        ),
                        None => String::new(),
                    };
                    let figures = if app.ascii {
                        figures.replace('↓', "rx ").replace('↑', "tx ")
                    } else {
                        figures
                    };
                    // The live figures first: at 80 columns the device is what gets cut.
                    Line::from(vec![
                        Span::styled(format!("{rank} {:<10} ", m.name), app.theme.text()),
                        Span::styled(figures, app.theme.text()),
                        Span::styled(
                            m.device.clone().unwrap_or_else(|| "starting …".into()),
                            app.theme.muted(),
                        ),
                    ])
                })
                .collect()
        })
        .unwrap_or_default();
    let title = current
        .map(|s| format!("Members of size {}", s.nodes))
        .unwrap_or_else(|| "Members".into());
    frame.render_widget(
        Paragraph::new(members).block(block(app, title.as_str(), false)),
        members_area,
    );
    let rows = log_area.height.saturating_sub(2) as usize;
    let log: Vec<Line> = t
        .log
        .iter()
        .skip(t.log.len().saturating_sub(rows))
        .map(|(severity, text)| {
            Line::from(Span::styled(text.clone(), severity_style(app, *severity)))
        })
        .collect();
    frame.render_widget(
        Paragraph::new(log).block(block(app, "Log", false)),
        log_area,
    );
}

//! The Conditions tab: the axes and their choices, the selection and the plan it makes.

use super::*;

pub(super) fn draw_conditions(frame: &mut Frame, app: &App, area: Rect) {
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
    let mut summary = vec![
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
                "{} engines, {} models, {} inputs, {} batch, {} threads, {} devices{}",
                c.matrix.engines.len(),
                c.matrix.models.len(),
                c.matrix.inputs.len(),
                c.matrix.batch.len(),
                c.matrix.threads.len(),
                c.matrix.devices.len(),
                // fp32 alone is the default, said by the Precision pane.
                match c.matrix.precision.len() {
                    1 => String::new(),
                    n => format!(", {n} precisions"),
                }
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
    if let Some(study) = app.conditions.training_summary() {
        // The task is the study: r trains, and the matrix waits.
        summary[0] = Line::from(Span::styled(
            study,
            app.theme.accent().add_modifier(Modifier::BOLD),
        ));
    }
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

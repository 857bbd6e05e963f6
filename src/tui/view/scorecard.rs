//! The Scorecard tab: each framework's development- and deployment-time facts and what this device
//! found.

use super::*;

/// The Scorecard tab: the frameworks on the left, the selected one's facts on the right.
pub(super) fn draw_scorecard(frame: &mut Frame, app: &App, area: Rect) {
    let v = &app.scorecard;
    // The list takes two fifths of a narrow screen (its titles shortened), 34 columns at most.
    let list_width = (area.width * 2 / 5).clamp(24, 34);
    let [left, right] =
        Layout::horizontal([Constraint::Length(list_width), Constraint::Min(20)]).areas(area);
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
        // The mark, the title, the score (3) and the runtime (6) with a space between each.
        let room = usize::from(inner.width).saturating_sub(13).max(4);
        let title = edgeprof::text::cut_middle(&e.card.title, room);
        lines.push(Line::from(Span::styled(
            format!(
                "{here} {title:<room$} {}/8 {runtime:>6}",
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

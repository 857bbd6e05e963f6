//! The scorecard as terminal text and Markdown: an overview table, then one table per framework
//! across the three phases (development, deployment — curated and probed here — and runtime),
//! each value followed by the sources it cites. JSON is the `Scorecard` struct itself.

use crate::scorecard::cards::{Card, Cites, Fact, API_CRITERIA};
use crate::scorecard::{Entry, Runtime, Scorecard};
use crate::text::{bytes, table, thousands};
use std::fmt::Write;

/// One row of a framework's table: phase, metric, value, sources.
struct Line {
    phase: &'static str,
    metric: String,
    value: String,
    sources: Vec<String>,
}

fn cited<T>(fact: &Fact<T>, value: String) -> (String, Vec<String>) {
    let value = match &fact.note {
        Some(note) => format!("{value} ({note})"),
        None => value,
    };
    (value, keys(&fact.source))
}

fn keys(cites: &Cites) -> Vec<String> {
    cites.keys().into_iter().map(str::to_string).collect()
}

/// GitHub's figures in one line, or how to read them.
pub fn github_line(card: &Card) -> String {
    match &card.development.github {
        None => "not read yet (edgeprof frameworks refresh)".to_string(),
        Some(g) => {
            let n = |v: Option<u64>| v.map(thousands).unwrap_or_else(|| "?".to_string());
            format!(
                "{} stars, {} forks, {} contributors, {} open issues and PRs (read {})",
                n(g.stars),
                n(g.forks),
                n(g.contributors),
                n(g.open_issues),
                g.read.chars().take(10).collect::<String>()
            )
        }
    }
}

/// The API score with the criteria met.
pub fn api_line(card: &Card) -> String {
    let api = &card.development.api;
    let met: Vec<&str> = api
        .criteria()
        .iter()
        .filter(|(_, f)| f.value)
        .map(|(k, _)| *k)
        .collect();
    let missed: Vec<&str> = api
        .criteria()
        .iter()
        .filter(|(_, f)| !f.value)
        .map(|(k, _)| *k)
        .collect();
    let mut out = format!("{}/{}", api.score(), api.criteria().len());
    if !missed.is_empty() {
        let _ = write!(out, "; lacks {}", missed.join(", "));
    } else if !met.is_empty() {
        out.push_str("; every criterion");
    }
    out
}

/// The runtime phase in one line (the overview's column).
pub fn runtime_summary(entry: &Entry) -> String {
    match (&entry.runtime, &entry.card.engine) {
        (_, None) => "not run by edgeprof".to_string(),
        (None, Some(_)) => "not in these results".to_string(),
        (Some(r), Some(_)) if r.ok == 0 && r.failed == 0 => format!("skipped ({})", r.skipped),
        (Some(r), Some(_)) => match r.geomean_vs_fastest {
            Some(g) => format!(
                "×{g:.2} vs fastest, fastest in {}/{}",
                r.fastest_in, r.shared_workloads
            ),
            None => format!("{} ok, none shared", r.ok),
        },
    }
}

/// The probed state in one line.
pub fn here_summary(entry: &Entry) -> String {
    match &entry.here {
        None => "not probed".to_string(),
        Some(h) => match &h.version {
            Some(v) => format!("{} {v}", h.state.label()),
            None => h.state.label().to_string(),
        },
    }
}

fn lines(entry: &Entry) -> Vec<Line> {
    let card = &entry.card;
    let d = &card.development;
    let mut out = Vec::new();
    let mut push = |phase, metric: &str, (value, sources): (String, Vec<String>)| {
        out.push(Line {
            phase,
            metric: metric.to_string(),
            value,
            sources,
        })
    };
    let github_source = d
        .github
        .as_ref()
        .map(|g| vec![g.source.clone()])
        .unwrap_or_default();
    push("development", "GitHub", (github_line(card), github_source));
    push(
        "development",
        "last release",
        (
            format!("{} ({})", d.last_release.version, d.last_release.date),
            keys(&d.last_release.source),
        ),
    );
    let api_sources: Vec<String> = {
        let mut all: Vec<String> = d
            .api
            .criteria()
            .iter()
            .flat_map(|(_, f)| keys(&f.source))
            .collect();
        all.sort();
        all.dedup();
        all
    };
    push(
        "development",
        "API completeness",
        (api_line(card), api_sources),
    );
    push(
        "development",
        "pre-trained models",
        (
            format!(
                "{}: {}",
                d.pretrained.level.label(),
                d.pretrained.value.join("; ")
            ),
            keys(&d.pretrained.source),
        ),
    );
    for (tool, fact) in d.tooling.tools() {
        push("development", tool, cited(fact, fact.value.clone()));
    }
    for (metric, fact) in card.deployment.metrics() {
        push("deployment", metric, cited(fact, fact.value.join(", ")));
    }
    if let Some(h) = &entry.here {
        let mut state = here_summary(entry);
        if let Some(python) = &h.python {
            let _ = write!(state, " — {python}");
        }
        push("here", "state", (state, Vec::new()));
        if !h.devices.is_empty() {
            push("here", "sees", (h.devices.join(", "), Vec::new()));
        }
        if !h.tools.is_empty() {
            push("here", "tools", (h.tools.join(", "), Vec::new()));
        }
        if let Some(note) = &h.note {
            push("here", "note", (note.clone(), Vec::new()));
        }
    }
    match (&entry.runtime, &card.engine) {
        (None, None) => push(
            "runtime",
            "results",
            ("edgeprof does not benchmark it yet".to_string(), Vec::new()),
        ),
        (None, Some(_)) => push(
            "runtime",
            "results",
            ("not in these results".to_string(), Vec::new()),
        ),
        (Some(r), Some(_)) => runtime_lines(r, &mut push),
        (Some(_), None) => {}
    }
    out
}

fn runtime_lines(r: &Runtime, push: &mut impl FnMut(&'static str, &str, (String, Vec<String>))) {
    let mut conditions = format!("{} ok, {} failed", r.ok, r.failed);
    if r.not_run > 0 {
        let _ = write!(conditions, ", {} not run", r.not_run);
    }
    if r.skipped > 0 {
        let _ = write!(conditions, ", {} skipped", r.skipped);
        if let Some(reason) = &r.skip_reason {
            let _ = write!(conditions, " ({reason})");
        }
    }
    // How many medians come with a caveat, by verdict.
    let mut caveats: Vec<(String, usize)> = Vec::new();
    for w in &r.workloads {
        if let Some(v) = w.verdict.as_deref().filter(|v| *v != "clean") {
            match caveats.iter_mut().find(|(word, _)| word == v) {
                Some((_, n)) => *n += 1,
                None => caveats.push((v.to_string(), 1)),
            }
        }
    }
    if !caveats.is_empty() {
        let _ = write!(
            conditions,
            "; of the medians kept, {}",
            caveats
                .iter()
                .map(|(word, n)| format!("{n} {word}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    push("runtime", "conditions", (conditions, Vec::new()));
    if let Some(g) = r.geomean_vs_fastest {
        push(
            "runtime",
            "vs fastest",
            (
                format!(
                    "×{g:.2} (geometric mean over {} shared workloads; fastest in {})",
                    r.shared_workloads, r.fastest_in
                ),
                Vec::new(),
            ),
        );
    }
}

const WORKLOAD_HEADER: [&str; 10] = [
    "model",
    "input",
    "b",
    "median ms",
    "img/s",
    "peak RSS",
    "CPU %",
    "rank",
    "×fastest",
    "verdict",
];
const WORKLOAD_RIGHT: [bool; 10] = [
    false, false, true, true, true, true, true, true, true, false,
];

/// The runtime phase's per-workload rows.
fn workload_rows(r: &Runtime) -> Vec<Vec<String>> {
    r.workloads
        .iter()
        .map(|w| {
            vec![
                w.model.clone(),
                w.input.clone(),
                w.batch.to_string(),
                match w.median_ci_ms {
                    Some(ci) => format!("{:.3} ±{ci:.3}", w.median_ms),
                    None => format!("{:.3}", w.median_ms),
                },
                w.images_per_s
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_default(),
                w.peak_rss_bytes.map(bytes).unwrap_or_default(),
                w.cpu_mean_pct
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_default(),
                format!("{}/{}", w.rank, w.of),
                if w.of > 1 {
                    format!("{:.2}", w.vs_fastest)
                } else {
                    "–".to_string()
                },
                w.verdict.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

/// Greedy word wrap to `width` characters (at least 20).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(20);
    let mut out = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push(line);
    out
}

/// The overview: one row per framework.
fn overview_rows(card: &Scorecard) -> Vec<Vec<String>> {
    card.frameworks
        .iter()
        .map(|e| {
            let d = &e.card.development;
            vec![
                e.card.title.clone(),
                format!("{} ({})", d.last_release.version, d.last_release.date),
                format!("{}/8", d.api.score()),
                d.github
                    .as_ref()
                    .and_then(|g| g.stars)
                    .map(thousands)
                    .unwrap_or_else(|| "not read".to_string()),
                e.card.deployment.hardware.value.len().to_string(),
                here_summary(e),
                runtime_summary(e),
            ]
        })
        .collect()
}

const OVERVIEW: [&str; 7] = [
    "framework",
    "last release",
    "API",
    "GitHub stars",
    "HW kinds",
    "here",
    "runtime",
];

fn heading(card: &Scorecard) -> String {
    match &card.results {
        Some(r) => format!(
            "runtime from {} ({}: {} conditions on {}, started {})",
            r.dir, r.name, r.conditions, r.device, r.started
        ),
        None => "no results directory: the runtime phase is left out".to_string(),
    }
}

/// "Title (name)", or the name alone when they are the same.
fn title(c: &Card) -> String {
    if c.title == c.name {
        c.title.clone()
    } else {
        format!("{} ({})", c.title, c.name)
    }
}

/// Terminal text, values wrapped to `width` columns.
pub fn to_text(card: &Scorecard, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Framework scorecard — {}\n", heading(card));
    out.push_str(&table(
        &OVERVIEW,
        &[false, false, true, true, true, false, false],
        &overview_rows(card),
    ));
    for w in &card.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for entry in &card.frameworks {
        out.push('\n');
        out.push_str(&framework_text(entry, width));
    }
    out
}

/// A metric's rows: its name, then its value and source keys wrapped to `value_width`.
/// A metric and its value (wrapped) in `metric_width` + 1 + `value_width` characters: side by
/// side, or, for a metric longer than its column or a value column under 24 characters, the
/// metric on its own line and the value under it, indented.
fn metric_rows(line: &Line, metric_width: usize, value_width: usize) -> Vec<String> {
    let mut value = line.value.clone();
    if !line.sources.is_empty() {
        let _ = write!(value, " [{}]", line.sources.join(", "));
    }
    if line.metric.chars().count() > metric_width || value_width < 24 {
        let width = (metric_width + 1 + value_width).saturating_sub(2).max(10);
        let mut rows = vec![line.metric.clone()];
        rows.extend(wrap(&value, width).iter().map(|part| format!("  {part}")));
        return rows;
    }
    wrap(&value, value_width)
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let metric = if i == 0 { line.metric.as_str() } else { "" };
            format!("{metric:<metric_width$} {part}")
        })
        .collect()
}

/// One framework's table as terminal text: phases, workloads, sources.
pub fn framework_text(entry: &Entry, width: usize) -> String {
    let mut out = String::new();
    let c = &entry.card;
    let _ = writeln!(out, "{} — https://github.com/{}", title(c), c.repository);
    let metric_width = 20;
    let value_width = width.saturating_sub(metric_width + 5).max(30);
    let mut phase = "";
    for line in lines(entry) {
        if line.phase != phase {
            phase = line.phase;
            let _ = writeln!(out, "  {phase}");
        }
        for row in metric_rows(&line, metric_width, value_width) {
            let _ = writeln!(out, "    {row}");
        }
    }
    if let Some(r) = entry.runtime.as_ref().filter(|r| !r.workloads.is_empty()) {
        let table = table(&WORKLOAD_HEADER, &WORKLOAD_RIGHT, &workload_rows(r));
        for line in table.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    let _ = writeln!(out, "  sources");
    for (key, source) in &c.sources {
        let _ = writeln!(
            out,
            "    {key:<metric_width$} {} ({})",
            source.url, source.as_of
        );
    }
    out
}

/// The API completeness rubric, one criterion a line.
pub fn rubric() -> String {
    let mut out = String::from("API completeness: one point for each of\n");
    for (key, what) in API_CRITERIA {
        let _ = writeln!(out, "  {key:<16} {what}");
    }
    out
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Markdown: the overview table, then a table per framework with linked sources.
pub fn to_markdown(card: &Scorecard) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Framework scorecard\n\n{}\n", heading(card));
    let _ = writeln!(out, "| {} |", OVERVIEW.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(OVERVIEW.len()));
    for row in overview_rows(card) {
        let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    for w in &card.warnings {
        let _ = writeln!(out, "\n> warning: {}", md_cell(w));
    }
    for entry in &card.frameworks {
        let c = &entry.card;
        let heading = if c.title == c.name {
            c.title.clone()
        } else {
            format!("{} (`{}`)", c.title, c.name)
        };
        let repository = format!("https://github.com/{}", c.repository);
        let _ = write!(
            out,
            "\n## {heading}\n\n[github.com/{}]({repository})",
            c.repository
        );
        if c.homepage != repository {
            let _ = write!(out, " · [{}]({})", c.homepage, c.homepage);
        }
        out.push_str("\n\n");
        let _ = writeln!(
            out,
            "| phase | metric | value | sources |\n|---|---|---|---|"
        );
        for line in lines(entry) {
            let sources: Vec<String> = line
                .sources
                .iter()
                .map(|key| match c.sources.get(key) {
                    Some(s) => format!("[{key}]({}) {}", s.url, s.as_of),
                    None => format!("<{key}>"),
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                line.phase,
                md_cell(&line.metric),
                md_cell(&line.value),
                sources.join(", ")
            );
        }
        if let Some(r) = entry.runtime.as_ref().filter(|r| !r.workloads.is_empty()) {
            let _ = writeln!(
                out,
                "\n| {} |\n|{}",
                WORKLOAD_HEADER.join(" | "),
                WORKLOAD_RIGHT
                    .iter()
                    .map(|r| if *r { "--:|" } else { "---|" })
                    .collect::<String>()
            );
            for row in workload_rows(r) {
                let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
                let _ = writeln!(out, "| {} |", cells.join(" | "));
            }
        }
    }
    out
}

/// A framework's table as plain lines for the terminal UI, wrapped to `width`: the runtime
/// phase and what was probed here first (what the user just measured), then the curated facts.
/// The flag marks phase headings.
pub fn framework_lines(entry: &Entry, width: usize) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let metric_width = 18;
    // One column of indent, the metric, a space: the rest is the value's.
    let value_width = width.saturating_sub(metric_width + 2);
    let all = lines(entry);
    for phase in ["runtime", "here", "development", "deployment"] {
        let mut heading = true;
        for line in all.iter().filter(|l| l.phase == phase) {
            if heading {
                out.push((phase.to_string(), true));
                heading = false;
            }
            out.extend(
                metric_rows(line, metric_width, value_width)
                    .into_iter()
                    .map(|row| (format!(" {row}"), false)),
            );
        }
        if phase == "runtime" {
            if let Some(r) = entry.runtime.as_ref().filter(|r| !r.workloads.is_empty()) {
                // Fitted to the pane (less its indent): the columns that rank the framework
                // stay longest, then memory.
                let fit = crate::text::Fit {
                    keep: &[0, 1, 8, 9, 7, 5],
                    // The median is the point: the names are cut before it goes.
                    whole: &[3],
                    names: None,
                };
                let table = crate::text::table_within(
                    &WORKLOAD_HEADER,
                    &WORKLOAD_RIGHT,
                    &workload_rows(r),
                    Some(width.saturating_sub(1)),
                    &fit,
                );
                out.extend(table.lines().map(|l| (format!(" {l}"), false)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_words_whole_and_lines_within_the_width() {
        let lines = wrap("one two three four five six seven eight nine ten", 20);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:?}");
        assert_eq!(
            lines.join(" "),
            "one two three four five six seven eight nine ten"
        );
        assert_eq!(wrap("", 30), vec![String::new()]);
    }

    #[test]
    fn markdown_cells_escape_pipes() {
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
    }
}

//! What a stored sweep reads as: its tables and terminal charts, the engine comparison, the
//! overhead line and its roofline (`run` and `report` print them), and `edgeprof runs`.

use super::*;

/// The CPU roofline of a sweep as the terminal shows it: chart, roofs and advice.
pub fn cpu_roofline_text(r: &edgeprof::sweep_dir::CpuRoofline) -> String {
    format!(
        "\nroofline\n{}",
        crate::cli::roofline::roofline_text(
            &r.ceilings.ceilings,
            &r.from,
            &r.programs,
            &r.left_out,
            edgeprof::roofline::Precision::Fp32,
            false,
            (80, 24),
        )
    )
}

/// The GPU roofline of a sweep (`gpu-roofline.json`): per GPU, its chart (a terminal chart
/// when `chart`) and advice under its kept ceilings, or its points as figures when it has none;
/// every condition not placed, with the reason.
pub fn gpu_roofline_text(
    roofline: &edgeprof::runner::gpu_profile::GpuRoofline,
    chart: bool,
) -> String {
    use edgeprof::roofline::Precision;
    let mut out = String::new();
    for gpu in roofline.gpus() {
        let (programs, left_out) = roofline.points(gpu);
        let _ = writeln!(out, "\nGPU {gpu} roofline");
        let kept = roofline.ceilings_of(gpu);
        match kept.and_then(|c| c.ceilings.as_ref().map(|x| (x, c.file.as_deref()))) {
            Some((ceilings, file)) if chart => out.push_str(&crate::cli::roofline::roofline_text(
                ceilings,
                file.unwrap_or("kept by the sweep"),
                &programs,
                &left_out,
                Precision::Fp32,
                false,
                (80, 24),
            )),
            Some((ceilings, file)) => {
                let _ = writeln!(
                    out,
                    "ceilings: {} ({})",
                    ceilings.source,
                    file.unwrap_or("kept by the sweep")
                );
                out.push_str(&crate::cli::roofline::roofs_and_advice(
                    ceilings,
                    &programs,
                    &left_out,
                    Precision::Fp32,
                ));
            }
            None => {
                if let Some(why) = kept.and_then(|c| c.reason.as_deref()) {
                    let _ = writeln!(out, "no chart and no advice: {why}");
                }
                for p in &programs {
                    let dram = p
                        .traffic
                        .iter()
                        .find(|(l, _)| *l == edgeprof::roofline::Level::Dram)
                        .map(|(_, b)| *b);
                    let _ = writeln!(
                        out,
                        "  {}: {:.1} GFLOP/s ({}), {}",
                        p.label,
                        p.flops / p.seconds.max(f64::MIN_POSITIVE) / 1e9,
                        p.precision,
                        dram.filter(|b| *b > 0.0).map_or_else(
                            || "no DRAM traffic measured".to_string(),
                            |b| format!("{:.2} FLOP/byte at DRAM", p.flops / b)
                        )
                    );
                }
                for (id, why) in &left_out {
                    let _ = writeln!(out, "  {id}: not placed: {why}");
                }
            }
        }
    }
    out
}

pub(super) fn opt(v: Option<f64>, places: usize) -> String {
    v.map(|x| format!("{x:.places$}"))
        .unwrap_or_else(|| "-".to_string())
}

/// The framework comparison: mean latency per engine, side by side, for every condition the
/// engines share (model, input, batch, threads, device); the fastest is starred. Empty when
/// fewer than two engines ran.
pub fn engine_comparison(rows: &[summary::Row]) -> String {
    let mut engines: Vec<&str> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.status == "ok") {
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
        let key = format!(
            "{}/{}/b{}/t{}/{}",
            r.model, r.input, r.batch, r.threads, r.device
        );
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    if engines.len() < 2 {
        return String::new();
    }
    let table: Vec<Vec<String>> = keys
        .iter()
        .map(|key| {
            let means: Vec<Option<f64>> = engines
                .iter()
                .map(|e| {
                    rows.iter()
                        .find(|r| {
                            r.status == "ok"
                                && r.engine == *e
                                && format!(
                                    "{}/{}/b{}/t{}/{}",
                                    r.model, r.input, r.batch, r.threads, r.device
                                ) == *key
                        })
                        .and_then(|r| r.mean_ms)
                })
                .collect();
            let best = means
                .iter()
                .flatten()
                .copied()
                .fold(f64::INFINITY, f64::min);
            let mut row = vec![key.clone()];
            row.extend(means.iter().map(|m| match m {
                Some(v) if *v == best => format!("*{v:.3}"),
                Some(v) => format!("{v:.3}"),
                None => "-".to_string(),
            }));
            row
        })
        .collect();
    let mut header = vec!["mean ms (* fastest)"];
    header.extend(engines.iter().copied());
    let mut right = vec![false];
    right.extend(engines.iter().map(|_| true));
    format!(
        "\nframeworks side by side:\n{}",
        fitted_conditions(&header, &right, table, &[])
    )
}

/// A table whose first column names conditions, fitted to the terminal (`keep`: the columns
/// that stay longest, most important first): when it does not fit, the names lose the parts
/// every condition shares, which a line above the table gives once.
fn fitted_conditions(
    header: &[&str],
    right: &[bool],
    mut rows: Vec<Vec<String>>,
    keep: &[usize],
) -> String {
    let Some(width) = edgeprof::text::table_width() else {
        return render::table(header, right, &rows);
    };
    let whole = edgeprof::text::table_within(header, right, &rows, None, keep);
    if whole.lines().all(|l| l.chars().count() <= width) {
        return whole;
    }
    let names: Vec<String> = rows
        .iter()
        .map(|r| r.first().cloned().unwrap_or_default())
        .collect();
    let (short, pattern) = edgeprof::text::varying_parts(&names);
    let mut out = String::new();
    if let Some(pattern) = pattern {
        out.push_str(&edgeprof::text::cut_middle(
            &format!("(every condition is {pattern})"),
            width,
        ));
        out.push('\n');
        for (row, name) in rows.iter_mut().zip(short) {
            if let Some(first) = row.first_mut() {
                *first = name;
            }
        }
    }
    out.push_str(&render::table_keeping(header, right, &rows, keep));
    out
}

/// Tables and terminal charts of a stored sweep (what `run` and `report` print).
pub fn report_text(stored: &Stored, rows: &[summary::Row], charts: bool) -> String {
    let m = &stored.manifest;
    let (ok, failed, not_run, skipped) = summary::counts(rows);
    let mut out = format!(
        "{} ({}): {ok} ok, {failed} failed, {not_run} not run, {skipped} skipped; started {}, ended {}\n\n",
        m.name,
        stored.dir.display(),
        m.started,
        m.ended.as_deref().unwrap_or("(not finished)")
    );
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut flags = Vec::new();
            // The verdict first when it is not clean (noisy, disturbed, throttled).
            match r.verdict.as_deref() {
                Some("clean") | None if r.noisy == Some(true) => flags.push("noisy".to_string()),
                Some("clean") | None => {}
                Some(word) => flags.push(word.to_string()),
            }
            if let Some(n) = r.repeats_remeasured.filter(|&n| n > 0) {
                flags.push(format!("{n} re-measured"));
            }
            if r.target_reached == Some(false) {
                flags.push("target not reached".to_string());
            }
            if let Some(n) = r.outliers.filter(|&n| n > 0) {
                flags.push(format!("{n} outliers"));
            }
            if r.attempts > 1 {
                flags.push(format!("{} attempts", r.attempts));
            }
            vec![
                r.id.clone(),
                r.status.clone(),
                opt(r.mean_ms, 3),
                opt(r.mean_spread_ms, 3),
                opt(r.p99_ms, 3),
                opt(r.inferences_per_s, 1),
                r.peak_rss_bytes
                    .map(render::bytes)
                    .unwrap_or_else(|| "-".into()),
                opt(r.cpu_mean_pct, 0),
                flags.join(", "),
            ]
        })
        .collect();
    let header = [
        "condition",
        "status",
        "mean ms",
        "±",
        "p99 ms",
        "inf/s",
        "peak RSS",
        "CPU %",
        "notes",
    ];
    let right = [false, false, true, true, true, true, true, true, false];
    out.push_str(&fitted_conditions(
        &header,
        &right,
        table_rows,
        &[0, 1, 2, 8, 3, 5],
    ));
    let failures: Vec<&summary::Row> = rows
        .iter()
        .filter(|r| r.status != "ok" && r.status != "skipped" && r.reason.is_some())
        .collect();
    // Skipped conditions a line per reason (a framework not set up skips all of its own).
    let skips = render::skip_groups(
        rows.iter()
            .filter(|r| r.status == "skipped")
            .map(|r| (r.engine.as_str(), r.reason.as_deref().unwrap_or("skipped"))),
    );
    if !failures.is_empty() || !skips.is_empty() {
        out.push_str("\nwhy:\n");
        for g in &skips {
            let _ = writeln!(
                out,
                "  {} skipped condition(s) of {}: {}",
                g.count,
                g.engines.join(", "),
                g.reason
            );
        }
        for r in failures {
            let _ = writeln!(
                out,
                "  {} ({}): {}",
                r.id,
                r.status,
                r.reason.as_deref().unwrap_or("")
            );
            let tail = stored
                .runs
                .iter()
                .rev()
                .find(|x| x.condition.id == r.id)
                .and_then(|x| x.failure.as_ref())
                .map(|f| f.stderr_tail().to_string())
                .unwrap_or_default();
            for line in edgeprof::text::last_lines(&tail, 5) {
                let _ = writeln!(out, "      | {line}");
            }
        }
    }
    out.push_str(&engine_comparison(rows));
    // How each engine ran, once per engine, version and note.
    let mut engines: Vec<(String, String)> = Vec::new();
    for r in rows.iter().filter(|r| r.status == "ok") {
        let mut said = r.engine_version.clone().unwrap_or_default();
        if let Some(note) = &r.engine_note {
            said = format!("{said}: {note}");
        }
        if !said.is_empty() && !engines.contains(&(r.engine.clone(), said.clone())) {
            engines.push((r.engine.clone(), said));
        }
    }
    if !engines.is_empty() {
        out.push_str("\nengines:\n");
        for (engine, said) in &engines {
            let _ = writeln!(out, "  {engine} {said}");
        }
    }
    let agreement = results::agreement::compare(&stored.dir, rows);
    if !agreement.is_empty() {
        let _ = writeln!(
            out,
            "\noutputs: each engine's first output against the reference's (same weights and \
             input; agree = within {:e} of the reference's largest value, or {:e} apart)",
            results::agreement::TOLERANCE,
            results::agreement::ABSOLUTE_FLOOR
        );
        let table: Vec<Vec<String>> = agreement
            .iter()
            .map(|a| {
                vec![
                    a.condition.clone(),
                    a.reference.clone(),
                    format!("{:.2e}", a.max_abs_diff),
                    format!("{:.2e}", a.max_rel_diff),
                    if a.agree {
                        "yes".to_string()
                    } else {
                        format!(
                            "NO{}",
                            a.note
                                .as_deref()
                                .map(|n| format!(": {n}"))
                                .unwrap_or_default()
                        )
                    },
                ]
            })
            .collect();
        out.push_str(&fitted_conditions(
            &["condition", "reference", "max |diff|", "relative", "agree"],
            &[false, false, true, true, false],
            table,
            &[0, 4, 1],
        ));
    }
    if charts {
        out.push('\n');
        out.push_str(&report::terminal_bars(
            "mean latency (ms, mean of repeat means)",
            "ms",
            &report::latency_groups(rows),
            40,
        ));
        out.push('\n');
        out.push_str(&report::terminal_bars(
            "peak resident memory of the worker (MiB)",
            "MiB",
            &report::memory_groups(rows),
            40,
        ));
        out.push('\n');
        out.push_str(&report::terminal_line(
            "worker CPU utilisation over the sweep (% of one core)",
            &report::cpu_timeline(&stored.runs, &stored.samples),
        ));
        out.push_str(&report::curves::terminal_charts(stored));
    }
    // On a terminal the prose lines (the header, the reasons, the engines) wrap at its width
    // like the tables fit it.
    match edgeprof::text::table_width() {
        Some(width) => {
            out.lines()
                .map(|l| {
                    if l.chars().count() > width {
                        edgeprof::text::wrap(l, width, "    ")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        }
        None => out,
    }
}

/// `edgeprof report DIR`. The tables go to stdout whatever happens to the files: a directory
/// that another edgeprof is still writing is read, not written; one that cannot be written
/// (read-only, a full disk) gets a warning.
pub fn report_command(dir: &Path, charts: bool, svg_dir: Option<&Path>) -> anyhow::Result<()> {
    let stored = results::load(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    for warning in &stored.warnings {
        errln!("warning: {warning}");
    }
    let rows = summary::rows(&stored.manifest, &stored.runs);
    let writer = edgeprof::lockfile::holder(&dir.join(results::LOCK));
    if let Some(holder) = &writer {
        errln!(
            "{} is still being written by edgeprof ({holder}): showing what it holds so far, \
             writing nothing",
            dir.display()
        );
    } else {
        let svg_dir = svg_dir
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.join("charts"));
        let written =
            sweep_dir::write_summaries(&stored, &rows, &["csv", "json", "md"].map(String::from))
                .and_then(|()| sweep_dir::write_svgs(&stored, &rows, &svg_dir));
        match written {
            Ok(paths) => errln!(
                "wrote summary.csv, summary.json, summary.md in {} and {} chart(s) in {}",
                dir.display(),
                paths.len(),
                svg_dir.display()
            ),
            Err(e) => errln!("warning: the summaries and charts were not written: {e:#}"),
        }
    }
    let mut text = report_text(&stored, &rows, charts);
    match edgeprof::runner::gpu_profile::load(dir) {
        Ok(Some(gpu)) => text.push_str(&gpu_roofline_text(&gpu, charts)),
        Ok(None) => {}
        Err(e) => errln!("warning: {e:#}"),
    }
    print_out(&text)
}

/// `edgeprof runs [DIR]`.
pub fn runs_command(parent: &Path, json: bool) -> anyhow::Result<()> {
    use results::listing::{self, State};
    let found = listing::list(parent).map_err(|e| {
        BadInput(format!(
            "cannot list {}: {e} (name the output directory of your runs, e.g. edgeprof runs \
             results)",
            parent.display()
        ))
    })?;
    if json {
        return crate::cli::print_json(&found);
    }
    if found.is_empty() {
        return print_out(&format!(
            "no results directories under {}\n",
            parent.display()
        ));
    }
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|l| {
            let mut notes = Vec::new();
            if l.failed > 0 {
                notes.push(format!("{} failed", l.failed));
            }
            if let Some(pid) = l.pid {
                notes.push(format!("pid {pid}"));
            }
            if let Some(note) = &l.note {
                notes.push(note.clone());
            }
            vec![
                l.dir.display().to_string(),
                l.state.to_string(),
                format!("{}/{}", l.done, l.total),
                l.started.clone(),
                notes.join(", "),
            ]
        })
        .collect();
    let mut text = render::table(
        &["directory", "state", "done", "started", "notes"],
        &[false, false, true, false, false],
        &rows,
    );
    for l in &found {
        match l.state {
            State::Running => {
                let _ = writeln!(
                    text,
                    "\n{} is running: follow it with `edgeprof tui --open {}` or `tail -f {}`",
                    l.dir.display(),
                    l.dir.display(),
                    l.dir.join(results::PROGRESS).display()
                );
                if let Some(line) = &l.last_progress {
                    let _ = writeln!(text, "  last: {line}");
                }
            }
            State::Interrupted => {
                let _ = writeln!(
                    text,
                    "\n{} stopped at {} of {}: finish it with `edgeprof run --resume {}`",
                    l.dir.display(),
                    l.done,
                    l.total,
                    l.dir.display()
                );
            }
            State::Complete | State::Failed => {}
        }
    }
    print_out(&text)
}

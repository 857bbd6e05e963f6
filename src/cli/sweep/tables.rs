//! What a stored sweep reads as: its tables and terminal charts, the engine comparison, the
//! overhead line and its roofline (`run` and `report` print them), and `edgeprof runs`.

use super::*;

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

//! `edgeprof report DIR --html [FILE]`: the results directory as one self-contained HTML file.

use super::*;
use edgeprof::roofline::{store, Ceilings, Precision};
use std::path::{Path, PathBuf};

/// Where a results directory's HTML report goes when no file is named.
pub const HTML_FILE: &str = "report.html";

/// The ceilings to draw a results directory's roofline under, and where they came from: the
/// ones its own `roofline.json` kept (a sweep with `output.roofline`), else the ones measured
/// for its device and kept in this machine's cache. Never measures.
fn ceilings_for(stored: &Stored) -> Result<(Ceilings, String), String> {
    let kept = stored.dir.join("roofline.json");
    if let Ok(text) = std::fs::read_to_string(&kept) {
        let ceilings = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| serde_json::from_value::<Ceilings>(v["ceilings"].clone()).ok());
        if let Some(c) = ceilings {
            return Ok((c, kept.display().to_string()));
        }
    }
    let Some(cache) = store::cache_dir() else {
        return Err("no ceilings: there is no cache directory to look in".to_string());
    };
    match store::load(&cache, &stored.manifest.device) {
        Ok(Some(found)) => Ok((
            found.ceilings,
            store::path_for(&cache, &stored.manifest.device)
                .display()
                .to_string(),
        )),
        Ok(None) => Err(
            "no roofline: this device's ceilings were never measured on the machine writing the \
             report (`edgeprof roofline measure` on the board, then `report --html` there)"
                .to_string(),
        ),
        Err(e) => Err(format!("no roofline: {e:#}")),
    }
}

/// Writes the HTML report of the results directory `dir` to `file` (default DIR/report.html)
/// and returns where it went.
pub fn write_html(dir: &Path, file: Option<&Path>) -> anyhow::Result<PathBuf> {
    let stored = results::load(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    for warning in &stored.warnings {
        errln!("warning: {warning}");
    }
    let rows = summary::rows(&stored.manifest, &stored.runs);
    let charts = report::charts(&stored, &rows)?;
    let mut roofline_svg = None;
    let roofline_text = match ceilings_for(&stored) {
        Ok((ceilings, from)) => {
            let simulations = edgeprof::runner::cachesim::load(&stored.dir)?;
            let (programs, left_out) =
                edgeprof::roofline::programs_from_results(&stored, &simulations);
            roofline_svg = Some(report::svg::roofline(
                &ceilings,
                Precision::Fp32,
                &programs,
            )?);
            // The chart is the SVG above; the text keeps what it does not show.
            format!(
                "ceilings: {} ({from})\n{}",
                ceilings.source,
                crate::cli::roofline::roofs_and_advice(
                    &ceilings,
                    &programs,
                    &left_out,
                    Precision::Fp32
                )
            )
        }
        Err(why) => why,
    };
    // The sweep's GPU conditions under the profiler, when it had any.
    let gpu_roofline = match edgeprof::runner::gpu_profile::load(&stored.dir) {
        Ok(Some(gpu)) => {
            let mut svgs = Vec::new();
            for n in gpu.gpus() {
                let (programs, _) = gpu.points(n);
                if let (Some(c), false) = (
                    gpu.ceilings_of(n).and_then(|c| c.ceilings.as_ref()),
                    programs.is_empty(),
                ) {
                    svgs.push(report::svg::roofline(c, Precision::Fp32, &programs)?);
                }
            }
            Some((svgs, gpu_roofline_text(&gpu, false)))
        }
        Ok(None) => None,
        Err(e) => Some((Vec::new(), format!("{e:#}"))),
    };
    let mut texts = Vec::new();
    let engines = engine_comparison(&rows);
    if !engines.trim().is_empty() {
        texts.push(("Engines side by side".to_string(), engines));
    }
    let html = report::html::render(&report::html::Page {
        stored: &stored,
        rows: &rows,
        charts: &charts,
        roofline_svg,
        roofline_text,
        gpu_roofline,
        texts: &texts,
    });
    let path = file
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.join(HTML_FILE));
    results::write_atomic(&path, html.as_bytes())
        .with_context(|| format!("cannot write the HTML report {}", path.display()))?;
    Ok(path)
}

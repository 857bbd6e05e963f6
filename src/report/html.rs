//! `edgeprof report DIR --html`: one self-contained HTML file of a results directory — the
//! device, the conditions' table with verdicts and failures, every chart (inline SVG), the
//! roofline with its advice, and the engines side by side. No script, no external style sheet,
//! font or image: copied to a laptop (`scp`), it opens offline in any browser and prints.

use crate::error::BadInput;
use crate::results::summary::{self, Row};
use crate::results::{self, Stored};
use crate::roofline::{store, Ceilings, Precision};
use std::path::{Path, PathBuf};

/// What the page holds besides the results directory itself.
pub struct Page<'a> {
    pub stored: &'a Stored,
    pub rows: &'a [Row],
    /// The charts, each with its caption.
    pub charts: &'a [super::Chart],
    /// The roofline chart (SVG), when there are ceilings for the results' device.
    pub roofline_svg: Option<String>,
    /// Under the roofline: its advice, or why there is no roofline.
    pub roofline_text: String,
    /// The GPU conditions' roofline, when the sweep profiled some: a chart per GPU with
    /// ceilings, and the points, advice and reasons as text.
    pub gpu_roofline: Option<(Vec<String>, String)>,
    /// Further sections of preformatted text, as (title, text): the engines side by side.
    pub texts: &'a [(String, String)],
    /// Each lower-precision condition's accuracy against its fp32 twin.
    pub accuracy: &'a [crate::results::accuracy::Accuracy],
}

/// Text made safe inside HTML elements and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An SVG document as an element inside HTML: without its XML declaration and doctype (which
/// only a standalone file may have).
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |at| &svg[at..])
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:80rem;\
padding:0 1rem;color:#1d1d1f;background:#fff;line-height:1.45}\
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2.2rem;\
border-bottom:1px solid #ccc;padding-bottom:.2rem}\
table{border-collapse:collapse;font-size:.85rem;margin:.6rem 0;display:block;overflow-x:auto}\
th,td{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top}\
th{background:#f2f2f2;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
tr.failed td{background:#fdecea}tr.skipped td{color:#777}\
.verdict-disturbed,.verdict-throttled{color:#a12}.verdict-noisy{color:#a60}\
pre{background:#f7f7f7;border:1px solid #ddd;padding:.6rem;overflow-x:auto;font-size:.8rem}\
figure{margin:1rem 0}figure svg{max-width:100%;height:auto}\
figcaption{font-size:.85rem;color:#555}nav a{margin-right:1rem}\
@media print{nav{display:none}h2{break-after:avoid}figure,tr{break-inside:avoid}}";

/// The page, as one HTML5 document.
pub fn render(page: &Page) -> String {
    let manifest = &page.stored.manifest;
    let title = format!("edgeprof: {}", manifest.name);
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"edgeprof\">\n",
    );
    out.push_str(&format!("<title>{}</title>\n", escape(&title)));
    out.push_str(&format!("<style>{STYLE}</style>\n</head>\n<body>\n"));
    out.push_str(&format!("<h1>{}</h1>\n", escape(&manifest.name)));
    let state: String = summary::state_lines(manifest)
        .unwrap_or_default()
        .iter()
        .map(|l| format!("<br>{}", escape(l)))
        .collect();
    out.push_str(&format!(
        "<p>{}<br>{}{state}</p>\n",
        escape(&summary::outcome_line(manifest, page.rows)),
        escape(&summary::device_line(manifest))
    ));
    let mut sections = vec![("conditions", "Conditions")];
    if !page.accuracy.is_empty() {
        sections.push(("accuracy", "Accuracy"));
    }
    if !page.charts.is_empty() {
        sections.push(("charts", "Charts"));
    }
    sections.push(("roofline", "Roofline"));
    if page.gpu_roofline.is_some() {
        sections.push(("gpu-roofline", "GPU roofline"));
    }
    if !page.texts.is_empty() {
        sections.push(("more", "More"));
    }
    out.push_str("<nav>");
    for (id, name) in &sections {
        out.push_str(&format!("<a href=\"#{id}\">{name}</a>"));
    }
    out.push_str("</nav>\n");
    conditions(&mut out, page.rows);
    accuracy(&mut out, page.accuracy);
    if !page.charts.is_empty() {
        out.push_str("<h2 id=\"charts\">Charts</h2>\n");
        // Each chart carries its title.
        for chart in page.charts {
            out.push_str(&format!(
                "<figure aria-label=\"{}\">\n{}\n</figure>\n",
                escape(chart.caption),
                inline_svg(&chart.svg)
            ));
        }
    }
    out.push_str("<h2 id=\"roofline\">Roofline</h2>\n");
    if let Some(svg) = &page.roofline_svg {
        out.push_str(&format!(
            "<figure>\n{}\n<figcaption>The conditions under this device's ceilings \
             (fp32)</figcaption>\n</figure>\n",
            inline_svg(svg)
        ));
    }
    out.push_str(&format!(
        "<pre>{}</pre>\n",
        escape(page.roofline_text.trim_end())
    ));
    if let Some((svgs, text)) = &page.gpu_roofline {
        out.push_str("<h2 id=\"gpu-roofline\">GPU roofline</h2>\n");
        for svg in svgs {
            out.push_str(&format!(
                "<figure>\n{}\n<figcaption>The GPU conditions under their GPU's ceilings \
                 (fp32), from the profiler's counters</figcaption>\n</figure>\n",
                inline_svg(svg)
            ));
        }
        out.push_str(&format!("<pre>{}</pre>\n", escape(text.trim_end())));
    }
    if !page.texts.is_empty() {
        out.push_str("<h2 id=\"more\">More</h2>\n");
        for (heading, text) in page.texts {
            out.push_str(&format!(
                "<h3>{}</h3>\n<pre>{}</pre>\n",
                escape(heading),
                escape(text.trim_end())
            ));
        }
    }
    out.push_str(&format!(
        "<footer><p><small>Written by edgeprof {} from {}.</small></p></footer>\n\
         </body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&page.stored.dir.display().to_string())
    ));
    out
}

/// The conditions' table: the Markdown summary's columns, the verdict, and each failure's
/// reason in full.
fn conditions(out: &mut String, rows: &[Row]) {
    out.push_str("<h2 id=\"conditions\">Conditions</h2>\n<table>\n<thead><tr>");
    for (i, heading) in summary::TABLE_HEADINGS.iter().enumerate() {
        out.push_str(&format!("<th scope=\"col\">{}</th>", escape(heading)));
        if i == 1 {
            out.push_str("<th scope=\"col\">verdict</th>");
        }
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        let class = match r.status.as_str() {
            "failed" => " class=\"failed\"",
            "skipped" => " class=\"skipped\"",
            _ => "",
        };
        out.push_str(&format!("<tr{class}>"));
        for (i, cell) in summary::table_cells(r).iter().enumerate() {
            let numeric = (2..=9).contains(&i);
            out.push_str(&format!(
                "<td{}>{}</td>",
                if numeric { " class=\"n\"" } else { "" },
                escape(cell)
            ));
            if i == 1 {
                let verdict = r.verdict.as_deref().unwrap_or("–");
                let why = r
                    .verdict_reason
                    .as_deref()
                    .map(|w| format!(" title=\"{}\"", escape(w)))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "<td class=\"verdict-{}\"{why}>{}</td>",
                    escape(verdict),
                    escape(verdict)
                ));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// What each lower precision cost in accuracy against its fp32 twin (nothing when the results
/// hold no lower precision).
fn accuracy(out: &mut String, compared: &[crate::results::accuracy::Accuracy]) {
    if compared.is_empty() {
        return;
    }
    out.push_str(&format!(
        "<h2 id=\"accuracy\">Accuracy of the lower precisions</h2>\n<p>Each lower-precision \
         condition's output against its fp32 twin's, on {}.</p>\n<table>\n<thead><tr>",
        escape(&crate::results::accuracy::inputs_line(compared))
    ));
    for heading in [
        "condition",
        "precision",
        "fp32 twin",
        "top-1 agreement",
        "top-5 agreement",
        "max abs error",
        "mean abs error",
        "cosine",
    ] {
        out.push_str(&format!("<th scope=\"col\">{heading}</th>"));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for a in compared {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td>",
            escape(&a.condition),
            escape(&a.precision),
            escape(&a.reference)
        ));
        for cell in crate::results::accuracy::cells(a) {
            out.push_str(&format!("<td class=\"n\">{}</td>", escape(&cell)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

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

/// Writes the HTML report of the results directory `dir` to `file` (default DIR/report.html):
/// where it went, and the warnings reading the directory gave (torn or skipped lines).
pub fn write(dir: &Path, file: Option<&Path>) -> crate::error::Result<(PathBuf, Vec<String>)> {
    let stored = results::load(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    let rows = summary::rows(&stored.manifest, &stored.runs);
    let charts = super::charts(&stored, &rows)?;
    let mut roofline_svg = None;
    let roofline_text = match ceilings_for(&stored) {
        Ok((ceilings, from)) => {
            let simulations = crate::runner::cachesim::load(&stored.dir)?;
            let (programs, left_out) =
                crate::roofline::programs_from_results(&stored, &simulations);
            roofline_svg = Some(super::svg::roofline(&ceilings, Precision::Fp32, &programs)?);
            // The chart is the SVG above; the text keeps what it does not show.
            format!(
                "ceilings: {} ({from})\n{}",
                ceilings.source,
                super::text::roofs_and_advice(&ceilings, &programs, &left_out, Precision::Fp32)
            )
        }
        Err(why) => why,
    };
    // The sweep's GPU conditions under the profiler, when it had any.
    let gpu_roofline = match crate::runner::gpu_profile::load(&stored.dir) {
        Ok(Some(gpu)) => {
            let mut svgs = Vec::new();
            for n in gpu.gpus() {
                let (programs, _) = gpu.points(n);
                if let (Some(c), false) = (
                    gpu.ceilings_of(n).and_then(|c| c.ceilings.as_ref()),
                    programs.is_empty(),
                ) {
                    svgs.push(super::svg::roofline(c, Precision::Fp32, &programs)?);
                }
            }
            Some((svgs, super::text::gpu_roofline_text(&gpu, false)))
        }
        Ok(None) => None,
        Err(e) => Some((Vec::new(), format!("{e:#}"))),
    };
    let mut texts = Vec::new();
    let engines = super::text::engine_comparison(&rows);
    if !engines.trim().is_empty() {
        texts.push(("Engines side by side".to_string(), engines));
    }
    let accuracy = crate::results::accuracy::compare(&stored.dir, &rows);
    let html = render(&Page {
        stored: &stored,
        rows: &rows,
        charts: &charts,
        roofline_svg,
        roofline_text,
        gpu_roofline,
        texts: &texts,
        accuracy: &accuracy,
    });
    let path = file
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.join(HTML_FILE));
    results::write_atomic(&path, html.as_bytes()).map_err(|e| {
        crate::error::failed!(
            "cannot write the HTML report {}: {}",
            path.display(),
            e.reason()
        )
    })?;
    Ok((path, stored.warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped() {
        assert_eq!(
            escape("<a href=\"x\">Tom's & Jerry's</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom&#39;s &amp; Jerry&#39;s&lt;/a&gt;"
        );
    }

    #[test]
    fn an_svg_loses_its_xml_declaration_inline() {
        let svg = "<?xml version=\"1.0\"?>\n<svg width=\"1\"></svg>";
        assert_eq!(inline_svg(svg), "<svg width=\"1\"></svg>");
        assert_eq!(inline_svg("<svg/>"), "<svg/>");
    }
}

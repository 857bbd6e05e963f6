//! `edgeprof roofline layers` (per-layer points of a zoo model or an ONNX file) and `edgeprof roofline kernels`.

use super::*;

/// `edgeprof roofline layers`: per-layer points of one zoo model or ONNX file from tract's node profile and
/// the per-layer analytic cost (layers tract fused as groups), ranked by the end-to-end time
/// each can save, with how steady that ranking is.
pub struct LayersOptions<'a> {
    pub threads: usize,
    pub runs: usize,
    pub ceilings: Option<&'a Path>,
    pub json: bool,
    /// Layers drawn on the chart (the highest-ranked).
    pub top: usize,
    pub ascii: bool,
    pub size: (usize, usize),
    pub svg: Option<&'a Path>,
}

/// Where `roofline layers` gets its profile.
pub enum LayerSource<'a> {
    /// Profiled now, in a worker process.
    Profile(&'a edgeprof::roofline::layers::LayerRequest),
    /// Saved earlier (`--json` output).
    Saved(&'a Path),
}

pub fn layers(name: &str, source: LayerSource, o: LayersOptions) -> anyhow::Result<()> {
    let LayersOptions {
        threads,
        runs,
        ceilings: ceilings_file,
        json,
        ..
    } = o;
    use edgeprof::roofline::{advice, Program};
    let (stored, from) = load_ceilings(ceilings_file)?;
    let profile = match source {
        LayerSource::Profile(request) => {
            errln!("profiling {name} node by node over {runs} run(s) on {threads} thread(s) …");
            edgeprof::roofline::layers::profile_in_worker(request, None)?
        }
        LayerSource::Saved(file) => edgeprof::roofline::layers::read_saved(file)?,
    };
    let edgeprof::roofline::layers::Ranked {
        ranks,
        stability,
        runs: profiled_runs,
    } = profile.ranked(&stored.ceilings);
    let runs = if profiled_runs > 0 {
        profiled_runs
    } else {
        runs
    };
    let programs = &profile.programs;
    // The highest-ranked layers, in rank order, are the chart's points A, B, C, …
    let drawn: Vec<Program> = ranks
        .iter()
        .take(o.top)
        .filter_map(|r| programs.iter().find(|p| p.label == r.label).cloned())
        .collect();
    if let Some(path) = o.svg {
        let svg = edgeprof::report::svg::roofline(&stored.ceilings, Precision::Fp32, &drawn)?;
        edgeprof::results::write_atomic(path, svg.as_bytes())?;
        errln!("wrote {}", path.display());
    }
    if json {
        return print_json(&serde_json::json!({
            "model": name,
            "ceilings_file": from,
            "layers": programs,
            "runs_s": profile.runs_s,
            "ranking": ranks,
            "top_stability": stability,
        }));
    }
    let rows: Vec<Vec<String>> = ranks
        .iter()
        .take(20)
        .map(|r| {
            let p = programs.iter().find(|p| p.label == r.label);
            let mark = drawn
                .iter()
                .position(|d| d.label == r.label)
                .map_or(String::new(), |i| {
                    edgeprof::report::roofline_chart::letter(i).to_string()
                });
            vec![
                mark,
                // On a narrow terminal fused layers say the start they share once.
                if edgeprof::text::table_width().is_some() {
                    edgeprof::text::fused(&r.label)
                } else {
                    r.label.clone()
                },
                profile
                    .spread_ms(&r.label)
                    .map_or("-".into(), |(m, h)| format!("{m:.3} ±{h:.3}")),
                format!("{:.1}", 100.0 * r.time_share),
                p.and_then(|p| p.flops_per_s())
                    .map_or("-".into(), |v| format!("{:.2}", v / 1e9)),
                p.and_then(|p| p.intensity(Level::Dram))
                    .map_or("-".into(), |v| format!("{v:.2}")),
                format!("{:.1}×", r.headroom),
                format!("{:.1}", 100.0 * r.saving),
            ]
        })
        .collect();
    let mut out = format!(
        "{}: layers ranked by the end-to-end time each can save, time share × (1 − 1/headroom) \
         (ceilings: {}; FLOPs and DRAM bytes from the analytic model; time: the median of {runs} \
         runs of tract's node profile; layers tract fused are one group, a+b)\n\n",
        name, stored.ceilings.source
    );
    let marks = edgeprof::report::roofline_chart::marks(&drawn);
    out.push_str(&edgeprof::report::roofline_chart::render(
        &stored.ceilings,
        Precision::Fp32,
        &marks,
        o.size.0,
        o.size.1,
        o.ascii,
    ));
    out.push('\n');
    // Ranked by the saving: that column stays on a narrow terminal, the figures behind it go
    // first.
    let fit = edgeprof::text::Fit {
        keep: &[0, 1, 3, 6],
        whole: &[7],
        names: None,
    };
    out.push_str(&edgeprof::text::table_fit(
        &[
            "",
            "layer",
            "ms",
            "time %",
            "GFLOP/s",
            "FLOP/byte",
            "headroom",
            "saving %",
        ],
        &[false, false, true, true, true, true, true, true],
        &rows,
        &fit,
    ));
    match stability {
        Some(s) if s < advice::STABLE_TOP => {
            let _ = writeln!(
                out,
                "\nthe ranking is unstable: the first layer stays first in {:.0} % of resamples \
                 of the {runs} runs; profile more runs (--runs) on a quieter machine before \
                 acting on the order",
                100.0 * s
            );
        }
        Some(s) => {
            let _ = writeln!(
                out,
                "\nthe first layer stays first in {:.0} % of resamples of the {runs} runs",
                100.0 * s
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\none run: how steady the ranking is cannot be told (--runs 10 or more)"
            );
        }
    }
    if let Some(first) = ranks.first() {
        if let Some(p) = programs.iter().find(|p| p.label == first.label) {
            if let Ok(a) = advice::analyse(p, &stored.ceilings) {
                let _ = writeln!(out, "\nfirst: {}", first.label);
                for (i, step) in a.steps.iter().enumerate() {
                    let _ = writeln!(out, "   {}. {}", i + 1, step.advice());
                }
                if let Some(step) = a.steps.first() {
                    let _ = writeln!(out, "\nevery step above {}", step.basis());
                }
            }
        }
    }
    print_out(&out)
}

/// `edgeprof roofline kernels`.
pub fn kernels() -> anyhow::Result<()> {
    let checks = kernels::self_check();
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            vec![
                c.isa.to_string(),
                c.kernel.to_string(),
                c.claimed.to_string(),
                format!("{}", c.counted),
                if c.ok { "ok" } else { "MISMATCH" }.to_string(),
            ]
        })
        .collect();
    let mut out = format!(
        "widest SIMD: {} (of {})\n\n",
        kernels::best_isa(),
        kernels::available_isas()
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    out.push_str(&render::table(
        &["ISA", "kernel", "claimed", "counted", "check"],
        &[false, false, true, true, false],
        &rows,
    ));
    // The narrow-precision units this CPU lacks, and why: their roofs are not measured.
    let absent: Vec<String> = kernels::Unit::of_this_architecture()
        .iter()
        .filter_map(|u| {
            u.available()
                .err()
                .map(|why| format!("  {u} ({} {}): {why}", u.precision(), u.instruction()))
        })
        .collect();
    if !absent.is_empty() {
        out.push_str("\nnot on this CPU (no roof measured):\n");
        out.push_str(&absent.join("\n"));
        out.push('\n');
    }
    print_out(&out)?;
    let bad = checks.iter().filter(|c| !c.ok).count();
    if bad > 0 {
        anyhow::bail!("{bad} kernel(s) do not do the work they claim; the ceilings would be wrong");
    }
    Ok(())
}

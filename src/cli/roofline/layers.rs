//! `edgeprof roofline layers` (per-layer points of a zoo model) and `edgeprof roofline kernels`.

use super::*;

/// `edgeprof roofline layers`: per-layer points of one zoo model from tract's node profile and
/// the per-layer analytic cost, ranked by time share × headroom.
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

pub fn layers(model: &edgeprof::models::graph::Model, o: LayersOptions) -> anyhow::Result<()> {
    let LayersOptions {
        threads,
        runs,
        ceilings: ceilings_file,
        json,
        ..
    } = o;
    use edgeprof::roofline::{advice, Program};
    let (stored, from) = load_ceilings(ceilings_file)?;
    errln!(
        "profiling {} node by node over {runs} run(s) on {threads} thread(s) …",
        model.name
    );
    let programs = edgeprof::roofline::layer_programs(model, threads, runs)?;
    let ranks = advice::rank_layers(&programs, &stored.ceilings);
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
            "model": model.name,
            "ceilings_file": from,
            "layers": programs,
            "ranking": ranks,
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
                r.label.clone(),
                format!("{:.1}", 100.0 * r.time_share),
                p.and_then(|p| p.flops_per_s())
                    .map_or("-".into(), |v| format!("{:.2}", v / 1e9)),
                p.and_then(|p| p.intensity(Level::Dram))
                    .map_or("-".into(), |v| format!("{v:.2}")),
                format!("{:.1}×", r.headroom),
                format!("{:.2}", r.score),
            ]
        })
        .collect();
    let mut out = format!(
        "{}: layers ranked by time share × headroom (ceilings: {}; FLOPs and DRAM bytes from the \
         analytic model; time from tract's node profile, fused operators counted under the layer \
         tract kept)\n\n",
        model.name, stored.ceilings.source
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
    out.push_str(&render::table(
        &[
            "",
            "layer",
            "time %",
            "GFLOP/s",
            "FLOP/byte",
            "headroom",
            "score",
        ],
        &[false, false, true, true, true, true, true],
        &rows,
    ));
    if let Some(first) = ranks.first() {
        if let Some(p) = programs.iter().find(|p| p.label == first.label) {
            if let Ok(a) = advice::analyse(p, &stored.ceilings) {
                let _ = writeln!(out, "\nfirst: {}", first.label);
                for (i, step) in a.steps.iter().enumerate() {
                    let _ = writeln!(out, "   {}. {step}", i + 1);
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
    print_out(&out)?;
    let bad = checks.iter().filter(|c| !c.ok).count();
    if bad > 0 {
        anyhow::bail!("{bad} kernel(s) do not do the work they claim; the ceilings would be wrong");
    }
    Ok(())
}

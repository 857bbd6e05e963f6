//! Stored results as plain text, for any front-end to show: a sweep's tables and terminal charts,
//! the engine comparison, its rooflines with their roofs, point sources and ordered advice.

use crate::bench::BenchReport;
use crate::config::Config;
use crate::models::cost::ModelCost;
use crate::report;
use crate::results::{self, summary, Stored};
use crate::roofline::{Ceilings, Precision, Processor};
use crate::runner::matrix::Plan;
use crate::runner::progress::skipped_lines;
use crate::stats::RunStats;
use crate::text::{bytes, duration, si, table, table_keeping, thousands};
use std::fmt::Write as _;

pub fn gflops(v: f64) -> String {
    format!("{:.1} GFLOP/s", v / 1e9)
}

/// A compute rate in the unit of its precision: GFLOP/s, or GOP/s for integers.
pub fn ops_rate(v: f64, precision: Precision) -> String {
    format!("{:.1} G{}/s", v / 1e9, precision.op())
}

pub fn gbytes(v: f64) -> String {
    format!("{:.1} GB/s", v / 1e9)
}

/// The chart, the roofs in words, and each program's place and advice (`show` and `run`).
pub fn roofline_text(
    ceilings: &Ceilings,
    from: &str,
    programs: &[crate::roofline::Program],
    left_out: &[(String, String)],
    precision: Precision,
    ascii: bool,
    (width, height): (usize, usize),
) -> String {
    let marks = crate::report::roofline_chart::marks(programs);
    let mut out = format!("ceilings: {} ({from})\n\n", ceilings.source);
    out.push_str(&crate::report::roofline_chart::render(
        ceilings, precision, &marks, width, height, ascii,
    ));
    out.push_str(&roofs_and_advice(ceilings, programs, left_out, precision));
    out
}

/// What follows the roofline's chart: its roofs, where the points' figures come from, and each
/// point (lettered as on the chart) with its ordered advice.
pub fn roofs_and_advice(
    ceilings: &Ceilings,
    programs: &[crate::roofline::Program],
    left_out: &[(String, String)],
    precision: Precision,
) -> String {
    let mut out = String::new();
    let (flat, slanted) = crate::report::roofline_chart::roofs(ceilings, precision);
    let peaks: Vec<String> = flat
        .iter()
        .map(|(p, v)| format!("{p} peak {}", ops_rate(*v, *p)))
        .collect();
    let _ = writeln!(out, "\nflat roofs (top to bottom): {}", peaks.join(", "));
    let slopes: Vec<String> = slanted
        .iter()
        .map(|(l, bw, ridge)| {
            format!(
                "{l} {} (ridge {ridge:.2} {}/byte)",
                gbytes(*bw),
                precision.op()
            )
        })
        .collect();
    let _ = writeln!(out, "slanted roofs (left to right): {}", slopes.join(", "));
    for note in &ceilings.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out.push_str(&sources_text(
        programs,
        &crate::collect::perf::probe(),
        ceilings.processor,
    ));
    let mut bases: Vec<crate::roofline::advice::Basis> = Vec::new();
    for (i, p) in programs.iter().enumerate() {
        let letter = crate::report::roofline_chart::letter(i);
        match crate::roofline::advice::analyse(p, ceilings) {
            Ok(a) => {
                let binding = a.levels.iter().find(|l| l.level == a.binding);
                let _ = writeln!(
                    out,
                    "\n{letter}  {}: {} at {:.1} % of the {} peak; {}",
                    p.label,
                    // Each point under the roof of its own precision, in its unit.
                    ops_rate(a.achieved_flops_per_s, p.precision),
                    100.0 * a.achieved_flops_per_s / a.peak_flops_per_s,
                    p.precision,
                    binding.map_or(String::new(), |b| format!(
                        "{} {}/byte at {}, {}-bound there, headroom {:.1}×",
                        format_args!("{:.2}", b.intensity),
                        p.precision.op(),
                        b.level,
                        match b.region {
                            crate::roofline::advice::Region::BandwidthBound => "bandwidth",
                            crate::roofline::advice::Region::ComputeBound => "compute",
                        },
                        b.headroom
                    ))
                );
                let intensities: Vec<String> = p
                    .traffic
                    .iter()
                    .map(|&(level, _)| match p.intensity(level) {
                        Some(i) => format!("{level} {i:.2}"),
                        None => format!("{level} no traffic (all hits above it)"),
                    })
                    .collect();
                let mut data = vec![p.source.to_string()];
                data.extend(p.basis.iter().cloned());
                let _ = writeln!(
                    out,
                    "   {}/byte: {}; from {}",
                    p.precision.op(),
                    intensities.join(", "),
                    data.join("; ")
                );
                for (i, step) in a.steps.iter().enumerate() {
                    let _ = writeln!(out, "   {}. {}", i + 1, step.advice());
                    if !bases.contains(step.basis()) {
                        bases.push(step.basis().clone());
                    }
                }
            }
            Err(e) => {
                let _ = writeln!(out, "\n{letter}  {}: cannot be analysed: {e}", p.label);
            }
        }
    }
    for (id, why) in left_out {
        let _ = writeln!(out, "\n   {id}: not placed: {why}");
    }
    // What the steps rest on, once for the chart.
    for basis in &bases {
        let _ = writeln!(out, "\nevery step above {basis}");
    }
    out
}

/// Where program points can come from (counters, cache simulation, analytic costs, GPU
/// profilers): which ones the points use, and why the others are not.
fn sources_text(
    programs: &[crate::roofline::Program],
    counters: &Result<(), crate::error::Unavailable>,
    processor: Processor,
) -> String {
    use crate::roofline::PointSource;
    let used = |source: PointSource| programs.iter().filter(|p| p.source == source).count();
    if processor == Processor::Gpu {
        return format!(
            "point sources: GPU profiler counters (ncu / nvprof) for {}\n",
            used(PointSource::GpuCounters)
        );
    }
    let counters = match (used(PointSource::Counters), counters) {
        (n, _) if n > 0 => format!("hardware counters for {n}"),
        (_, Ok(())) => "hardware counters available (counted during `edgeprof run` when the config sets [output] roofline = true)".to_string(),
        (_, Err(why)) => format!("hardware counters unavailable: {why}"),
    };
    let simulated = match used(PointSource::CacheSimulation) {
        0 => "cache simulation for none (`roofline show DIR --cache-sim` adds L2 and DRAM traffic)"
            .to_string(),
        n => format!("cache simulation for {n}"),
    };
    format!(
        "point sources: analytic model for {} (exact FLOPs, DRAM bytes as the traffic lower bound); {counters}; {simulated}\n",
        used(PointSource::Analytic)
    )
}

/// The GPU roofline of a sweep (`gpu-roofline.json`): per GPU, its chart (a terminal chart
/// when `chart`) and advice under its kept ceilings, or its points as figures when it has none;
/// every condition not placed, with the reason.
pub fn gpu_roofline_text(
    roofline: &crate::runner::gpu_profile::GpuRoofline,
    chart: bool,
) -> String {
    use crate::roofline::Precision;
    let mut out = String::new();
    for gpu in roofline.gpus() {
        let (programs, left_out) = roofline.points(gpu);
        let _ = writeln!(out, "\nGPU {gpu} roofline");
        let kept = roofline.ceilings_of(gpu);
        match kept.and_then(|c| c.ceilings.as_ref().map(|x| (x, c.file.as_deref()))) {
            Some((ceilings, file)) if chart => out.push_str(&roofline_text(
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
                out.push_str(&roofs_and_advice(
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
                        .find(|(l, _)| *l == crate::roofline::Level::Dram)
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

/// What the engines of the framework comparison share: model, input, batch, threads, device and
/// the precision where it is not fp32.
fn comparison_key(r: &summary::Row) -> String {
    let key = format!(
        "{}/{}/b{}/t{}/{}",
        r.model, r.input, r.batch, r.threads, r.device
    );
    if r.precision == "fp32" {
        key
    } else {
        format!("{key}/{}", r.precision)
    }
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
        let key = comparison_key(r);
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
                        .find(|r| r.status == "ok" && r.engine == *e && comparison_key(r) == *key)
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
    rows: Vec<Vec<String>>,
    keep: &[usize],
) -> String {
    crate::text::table_fit(
        header,
        right,
        &rows,
        &crate::text::Fit {
            keep,
            names: Some("condition"),
            ..Default::default()
        },
    )
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
    if let Some(lines) = summary::state_lines(m) {
        out.push_str(&lines.join("\n"));
        out.push_str("\n\n");
    }
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
                    .map(crate::text::bytes)
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
    let skips = crate::runner::progress::skip_groups(
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
            for line in crate::text::last_lines(&tail, 5) {
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
    let checks = results::summary::OutputChecks::of(&stored.dir, rows);
    let agreement = &checks.agreement;
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
    let accuracy = &checks.accuracy;
    if !accuracy.is_empty() {
        let _ = writeln!(
            out,
            "\naccuracy: each lower-precision condition's output against its fp32 twin's (on {})",
            results::accuracy::inputs_line(accuracy)
        );
        let table: Vec<Vec<String>> = accuracy
            .iter()
            .map(|a| {
                let mut row = vec![a.condition.clone()];
                row.extend(results::accuracy::cells(a));
                row
            })
            .collect();
        out.push_str(&fitted_conditions(
            &[
                "condition",
                "top-1",
                "top-5",
                "max |err|",
                "mean |err|",
                "cosine",
            ],
            &[false, true, true, true, true, true],
            table,
            &[0, 1, 5],
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
    match crate::text::table_width() {
        Some(width) => {
            out.lines()
                .map(|l| {
                    if l.chars().count() > width {
                        crate::text::wrap(l, width, "    ")
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

fn shape(s: &[usize]) -> String {
    s.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("×")
}

/// The per-layer cost table and totals of `edgeprof models info`.
pub fn cost_table(cost: &ModelCost) -> String {
    let rows: Vec<Vec<String>> = cost
        .layers
        .iter()
        .map(|l| {
            vec![
                l.name.clone(),
                l.kind.to_string(),
                shape(&l.output_shape),
                si(l.flops),
                si(l.macs),
                thousands(l.params),
                bytes(l.input_bytes),
                bytes(l.output_bytes),
                bytes(l.dram_bytes),
            ]
        })
        .collect();
    let mut out = format!(
        "{}: input {}, output {}, {} layers\n\n",
        cost.model,
        shape(&cost.input_shape),
        shape(&cost.output_shape),
        cost.layers.len()
    );
    out.push_str(&table(
        &[
            "layer", "op", "output", "FLOPs", "MACs", "params", "in", "out", "DRAM",
        ],
        &[false, false, false, true, true, true, true, true, true],
        &rows,
    ));
    let _ = writeln!(out);
    out.push_str(&totals_block(
        &cost.total,
        "conv + linear",
        &format!(
            "{} with BN buffers",
            thousands(cost.total.params + cost.total.buffers)
        ),
        "layer by layer",
    ));
    out
}

/// The totals under a cost table: FLOPs, MACs (`macs_of` says of what), parameters (with
/// `params_note`), activations, the minimal DRAM traffic (`summed` says how) and the intensity.
fn totals_block(
    t: &crate::models::cost::CostTotals,
    macs_of: &str,
    params_note: &str,
    summed: &str,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "total FLOPs        {} ({})",
        thousands(t.flops),
        si(t.flops)
    );
    let _ = writeln!(
        out,
        "total MACs         {} ({}; {macs_of})",
        thousands(t.macs),
        si(t.macs)
    );
    let _ = writeln!(
        out,
        "parameters         {} ({params_note}: {})",
        thousands(t.params),
        bytes(t.param_bytes)
    );
    let _ = writeln!(
        out,
        "activations        {} read, {} written",
        bytes(t.input_bytes),
        bytes(t.output_bytes)
    );
    let _ = writeln!(
        out,
        "min. DRAM traffic  {} (weights + inputs + outputs, {summed})",
        bytes(t.dram_bytes)
    );
    if t.dram_bytes > 0 {
        let _ = writeln!(
            out,
            "intensity          {:.2} FLOP/byte at DRAM",
            t.flops as f64 / t.dram_bytes as f64
        );
    }
    out
}

/// The node-by-node cost of an ONNX file (`edgeprof models info FILE.onnx`): the nodes run
/// per inference, the cost by operator, the totals, and what was not costed and why.
pub fn graph_cost_table(cost: &crate::models::onnx_graph::GraphCost) -> String {
    // Prose lines wrap at spaces to the terminal's width (whole when not a terminal).
    let width = crate::text::table_width();
    let line = |text: String| match width {
        Some(w) => crate::text::wrap(&text, w, "  "),
        None => text,
    };
    let mut out = String::new();
    let inputs: Vec<String> = cost
        .inputs
        .iter()
        .map(|t| match t.value {
            Some(v) => format!("{} {} = {v}", t.name, t.elem_type),
            None => format!("{} {} {}", t.name, shape(&t.shape), t.elem_type),
        })
        .collect();
    let _ = writeln!(
        out,
        "{}",
        line(format!("{}: inputs {}", cost.model, inputs.join(", ")))
    );
    let outputs: Vec<String> = cost
        .outputs
        .iter()
        .map(|o| match &o.shape {
            Some(s) if s.is_empty() => format!("{} (scalar)", o.name),
            Some(s) => format!("{} {}", o.name, shape(s)),
            None => format!("{} (shape unknown)", o.name),
        })
        .collect();
    let _ = writeln!(out, "{}", line(format!("outputs {}", outputs.join(", "))));
    let folded = cost.nodes.iter().filter(|n| n.folded).count();
    let _ = writeln!(
        out,
        "{}\n",
        line(format!(
            "{} nodes: {} costed ({:.1} %), of which {} computed once at load",
            cost.node_count,
            cost.costed,
            100.0 * cost.coverage(),
            folded
        ))
    );
    let rows: Vec<Vec<String>> = cost
        .nodes
        .iter()
        .filter(|n| n.not_costed.is_none() && !n.folded)
        .map(|n| {
            vec![
                n.name.clone(),
                n.op.clone(),
                match n.output_shape.as_deref() {
                    Some([]) => "scalar".to_string(),
                    Some(s) => shape(s),
                    None => String::new(),
                },
                si(n.flops),
                si(n.macs),
                thousands(n.params),
                bytes(n.input_bytes),
                bytes(n.output_bytes),
                bytes(n.dram_bytes),
            ]
        })
        .collect();
    out.push_str(&table_keeping(
        &[
            "node", "op", "output", "FLOPs", "MACs", "params", "in", "out", "DRAM",
        ],
        &[false, false, false, true, true, true, true, true, true],
        &rows,
        &[0, 1, 3],
    ));
    // The operators that carry the work, largest first.
    let mut by_op: Vec<(String, usize, u64, u64)> = Vec::new();
    for n in cost
        .nodes
        .iter()
        .filter(|n| n.not_costed.is_none() && !n.folded)
    {
        match by_op.iter_mut().find(|(op, ..)| *op == n.op) {
            Some(e) => {
                e.1 += 1;
                e.2 += n.flops;
                e.3 += n.dram_bytes;
            }
            None => by_op.push((n.op.clone(), 1, n.flops, n.dram_bytes)),
        }
    }
    by_op.sort_by(|a, b| b.2.cmp(&a.2).then(b.3.cmp(&a.3)));
    let t = &cost.total;
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            "-".to_string()
        } else {
            format!("{:.1} %", 100.0 * part as f64 / whole as f64)
        }
    };
    let op_rows: Vec<Vec<String>> = by_op
        .iter()
        .map(|(op, count, flops, dram)| {
            vec![
                op.clone(),
                count.to_string(),
                si(*flops),
                share(*flops, t.flops),
                bytes(*dram),
                share(*dram, t.dram_bytes),
            ]
        })
        .collect();
    let _ = writeln!(out);
    out.push_str(&table_keeping(
        &["operator", "nodes", "FLOPs", "share", "DRAM", "share"],
        &[false, true, true, true, true, true],
        &op_rows,
        &[0, 2, 3],
    ));
    let _ = writeln!(out);
    out.push_str(&totals_block(
        t,
        "conv, matmul, RNN",
        &format!("and {} batch-norm statistics", thousands(t.buffers)),
        "node by node",
    ));
    if !cost.not_costed.is_empty() {
        let _ = writeln!(
            out,
            "\n{}",
            line(format!(
                "not costed: {} of {} nodes (the totals leave them out)",
                cost.node_count - cost.costed,
                cost.node_count
            ))
        );
        for n in &cost.not_costed {
            let _ = writeln!(
                out,
                "{}",
                line(format!(
                    "  {} ×{}: {} (first: {})",
                    n.op, n.nodes, n.reason, n.first
                ))
            );
        }
        if cost.downstream > 0 {
            let _ = writeln!(
                out,
                "{}",
                line(format!(
                    "  and {} node(s) after them, whose input shapes follow from them",
                    cost.downstream
                ))
            );
        }
    }
    out
}

/// The statistics of one run, one figure per line (bench and report share it).
pub fn stats_lines(r: &RunStats) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "init (load + optimise)  {:>10.3} ms", r.init_ms);
    if let Some(first) = r.first_inference_ms {
        let _ = writeln!(out, "first inference         {first:>10.3} ms");
    }
    if let Some(w) = r.warmup_mean_ms {
        let _ = writeln!(
            out,
            "warm-up mean            {:>10.3} ms  ({} iteration(s))",
            w, r.warmup_iterations
        );
    }
    let l = &r.latency;
    let _ = writeln!(out, "latency over {} timed iterations:", l.samples);
    for (name, v) in [
        ("mean", l.mean_ms),
        ("median", l.median_ms),
        ("std", l.std_ms),
        ("p90", l.p90_ms),
        ("p99", l.p99_ms),
        ("min", l.min_ms),
        ("max", l.max_ms),
    ] {
        let _ = writeln!(out, "  {name:<8} {v:>10.3} ms");
    }
    if r.repeats.len() > 1 {
        let s = &r.repeat_summary;
        let means: Vec<String> = r
            .repeats
            .iter()
            .map(|x| format!("{:.3}", x.mean_ms))
            .collect();
        let _ = writeln!(
            out,
            "repeats                 {:>10.3} ms mean of {} means (± {:.3} ms): {}",
            s.mean_ms,
            s.repeats,
            s.mean_spread_ms,
            means.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "throughput              {:>10.2} inferences/s, {:.2} images/s",
        r.inferences_per_s, r.images_per_s
    );
    let _ = writeln!(
        out,
        "outliers                {:>10} of {} iterations (modified z-score > {}; {})",
        r.outliers.len(),
        r.latency.samples,
        crate::stats::OUTLIER_Z,
        if r.excluded_from_mean > 0 {
            "left out of the mean"
        } else {
            "in the mean"
        }
    );
    if let (Some(trimmed), Some(mad)) = (r.latency.trimmed_mean_ms, r.latency.mad_ms) {
        let _ = writeln!(
            out,
            "robust                  {trimmed:>10.3} ms trimmed mean (10 % each end), MAD {mad:.3} ms"
        );
    }
    if r.noisy {
        let _ = writeln!(
            out,
            "warning: noisy run, coefficient of variation {:.1} % exceeds {:.0} %; close other work or raise --iterations",
            100.0 * r.cv,
            100.0 * crate::stats::HIGH_CV
        );
    }
    out
}

/// The summary `edgeprof bench` prints.
pub fn bench_summary(r: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {}{}, {}, {} thread(s)",
        r.model,
        r.engine,
        if r.precision == Precision::Fp32 {
            String::new()
        } else {
            format!(" in {}", r.precision)
        },
        if r.input_shape.is_empty() {
            "at the inputs the file declares".to_string()
        } else {
            format!("input {}", shape(&r.input_shape))
        },
        r.threads
    );
    out.push_str(&stats_lines(&r.stats));
    let l = &r.stats.latency;
    if let Some(a) = &r.analytic {
        let gflops = if l.median_ms > 0.0 {
            a.flops as f64 / (l.median_ms * 1e-3) / 1e9
        } else {
            0.0
        };
        // An int8 run's multiply-adds are integer operations.
        let op = r.precision.op();
        let _ = writeln!(
            out,
            "analytic work           {} {op}s per inference → {gflops:.2} G{op}/s at the median",
            si(a.flops)
        );
    }
    if !r.checked.is_empty() {
        let agree = r.checked.iter().filter(|c| c.agree).count();
        // The largest difference among the outputs whose shapes match.
        let widest = r
            .checked
            .iter()
            .filter(|c| c.max_rel_diff.is_finite())
            .max_by(|a, b| a.max_rel_diff.total_cmp(&b.max_rel_diff));
        let _ = writeln!(
            out,
            "outputs checked         {agree} of {} agree with the expected{}",
            r.checked.len(),
            widest
                .map(|c| format!(
                    " (at most {:.2e} apart, {:.2e} of the largest value)",
                    c.max_abs_diff, c.max_rel_diff
                ))
                .unwrap_or_default()
        );
    }
    if let Some(profile) = &r.profile {
        let total: f64 = profile.iter().map(|p| p.ms_per_run).sum();
        let mut sorted = profile.clone();
        sorted.sort_by(|a, b| b.ms_per_run.total_cmp(&a.ms_per_run));
        let rows: Vec<Vec<String>> = sorted
            .iter()
            .map(|p| {
                let share = if total > 0.0 {
                    100.0 * p.ms_per_run / total
                } else {
                    0.0
                };
                let name = if p.mapped {
                    p.layer.clone()
                } else {
                    format!("{} (tract node)", p.layer)
                };
                vec![
                    name,
                    format!("{:.4}", p.ms_per_run),
                    format!("{share:.1}"),
                    p.tract_nodes.to_string(),
                ]
            })
            .collect();
        let _ = writeln!(
            out,
            "\nper-layer profile (mean per inference, slowest first):"
        );
        out.push_str(&table(
            &["layer", "ms", "%", "tract nodes"],
            &[false, true, true, true],
            &rows,
        ));
    }
    out
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The inputs axis: `matrix.inputs`, or, without it, each ONNX file at its own shape.
fn inputs_line(m: &crate::config::Matrix) -> String {
    let mut parts: Vec<String> = Vec::new();
    // The image shapes, where a zoo model or an ONNX file runs at them.
    let images = m.models.iter().any(|model| match model {
        crate::config::ModelRef::Onnx(p) => {
            !m.own_inputs.contains_key(p) && !m.named_for.contains_key(p)
        }
        crate::config::ModelRef::Zoo(_) => true,
        crate::config::ModelRef::Tflite(_) => false,
        crate::config::ModelRef::Torch(p) => !m.named_for.contains_key(p),
    });
    if images {
        parts.push(list(&m.inputs));
    }
    let name = |path: &std::path::Path| {
        path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    for (path, shape) in &m.own_inputs {
        parts.push(format!("{} at its own {shape}", name(path)));
    }
    for (path, sets) in &m.named_for {
        parts.push(format!("{} by name: {}", name(path), sets.join(" | ")));
    }
    for model in &m.models {
        if let crate::config::ModelRef::Tflite(path) = model {
            parts.push(format!("{} at the inputs it declares", name(path)));
        }
    }
    parts.join("; ")
}

/// What `edgeprof config check` prints: the resolved axes, the plan and its estimate.
pub fn config_summary(file: &str, config: &Config, plan: &Plan, estimated_seconds: f64) -> String {
    let m = &config.matrix;
    let ms = &config.measure;
    let threads: Vec<String> = m
        .threads
        .iter()
        .map(|&t| {
            if t == 0 {
                "all".to_string()
            } else {
                t.to_string()
            }
        })
        .collect();
    let mut out = format!("{file}: config {:?} is valid\n\n", config.name);
    for (axis, values) in [
        ("engines", list(&m.engines)),
        ("models", list(&m.models)),
        ("inputs", inputs_line(m)),
        ("batch", list(&m.batch)),
        ("threads", threads.join(", ")),
        ("devices", list(&m.devices)),
    ] {
        let _ = writeln!(out, "{axis:<9} {values}");
    }
    if let Some(c) = &config.command {
        let _ = writeln!(
            out,
            "command   {}{}{}",
            c.program.display(),
            if c.args.is_empty() { "" } else { " " },
            c.args.join(" ")
        );
    }
    let _ = writeln!(
        out,
        "measure   {} warm-up + {} timed iterations × {} repeats, timeout {} s, {} retr{}, sampling every {} ms",
        ms.warmup,
        ms.iterations,
        ms.repeats,
        ms.timeout_s,
        ms.retries,
        if ms.retries == 1 { "y" } else { "ies" },
        ms.sample_interval_ms
    );
    let _ = writeln!(
        out,
        "output    {} ({})",
        config.output.dir.display(),
        config.output.formats.join(", ")
    );
    let _ = writeln!(
        out,
        "\n{} condition(s) to run, {} skipped, {} excluded; estimated duration {} (before any measurement)",
        plan.to_run.len(),
        plan.skipped.len(),
        plan.excluded,
        duration(estimated_seconds)
    );
    for line in skipped_lines(&plan.skipped) {
        let _ = writeln!(out, "{line}");
    }
    out
}

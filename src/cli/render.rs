//! Plain-text rendering of results for the terminal: tables, unit formatting, progress lines.

use edgeprof::bench::{BenchEvent, BenchReport};
use edgeprof::config::Config;
use edgeprof::models::cost::ModelCost;
use edgeprof::runner::matrix::Plan;
use edgeprof::stats::RunStats;
use std::fmt::Write;

pub use edgeprof::text::{bytes, duration, si, table, table_keeping, thousands};

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
    t: &edgeprof::models::cost::CostTotals,
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
pub fn graph_cost_table(cost: &edgeprof::models::onnx_graph::GraphCost) -> String {
    // Prose lines wrap at spaces to the terminal's width (whole when not a terminal).
    let width = edgeprof::text::table_width();
    let line = |text: String| match width {
        Some(w) => edgeprof::text::wrap(&text, w, "  "),
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
        edgeprof::stats::OUTLIER_Z,
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
            100.0 * edgeprof::stats::HIGH_CV
        );
    }
    out
}

/// The summary `edgeprof bench` prints.
pub fn bench_summary(r: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {}, {}, {} thread(s)",
        r.model,
        r.engine,
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
        let _ = writeln!(
            out,
            "analytic work           {} FLOPs per inference → {gflops:.2} GFLOP/s at the median",
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
fn inputs_line(m: &edgeprof::config::Matrix) -> String {
    let mut parts: Vec<String> = Vec::new();
    // The image shapes, where a zoo model or an ONNX file runs at them.
    let images = m.models.iter().any(|model| match model {
        edgeprof::config::ModelRef::Onnx(p) => {
            !m.own_inputs.contains_key(p) && !m.named_for.contains_key(p)
        }
        edgeprof::config::ModelRef::Zoo(_) => true,
        edgeprof::config::ModelRef::Tflite(_) => false,
        edgeprof::config::ModelRef::Torch(p) => !m.named_for.contains_key(p),
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
        if let edgeprof::config::ModelRef::Tflite(path) = model {
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

pub use edgeprof::runner::progress::skipped_lines;

/// Progress of a running benchmark, on stderr.
pub fn progress_line(event: BenchEvent) {
    match event {
        BenchEvent::Loading { model } => errln!("loading {model} …"),
        BenchEvent::Loaded { init } => {
            errln!("loaded and optimised in {:.1} ms", init.as_secs_f64() * 1e3)
        }
        BenchEvent::FirstInference { time } => {
            errln!("first inference {:.2} ms", time.as_secs_f64() * 1e3)
        }
        BenchEvent::WarmupDone { iterations } => {
            errln!("warm-up done ({iterations} iteration(s))")
        }
        BenchEvent::Timed { done, total } => {
            if done == total || done % (total / 4).max(1) == 0 {
                errln!("timed {done}/{total}");
            }
        }
        BenchEvent::Profiling { runs } => errln!("profiling node by node over {runs} runs …"),
        BenchEvent::InWorker => errln!("loaded in a worker process; timing …"),
    }
}

#[cfg(test)]
mod tests {
    use super::skipped_lines;
    use edgeprof::config::{Device, ModelRef};
    use edgeprof::models::InputShape;
    use edgeprof::protocol::{Condition, Skipped};

    fn skipped(engine: &str, batch: usize, reason: &str) -> Skipped {
        let input = InputShape {
            channels: 3,
            height: 32,
            width: 32,
        };
        Skipped {
            condition: Condition::new(
                engine,
                ModelRef::Zoo("resnet34".into()),
                input,
                batch,
                0,
                Device::Cpu,
            ),
            reason: reason.to_string(),
        }
    }

    #[test]
    fn skips_read_a_line_per_reason() {
        let lines = skipped_lines(&[
            skipped("pytorch", 1, "pytorch is not set up"),
            skipped("onnxruntime", 1, "too big"),
            skipped("pytorch", 2, "pytorch is not set up"),
        ]);
        assert_eq!(
            lines,
            [
                "  skipped 2 conditions of pytorch: pytorch is not set up",
                "  skipped onnxruntime/resnet34/3x32x32/b1/t0/cpu: too big",
            ]
        );
    }
}

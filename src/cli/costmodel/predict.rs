//! `edgeprof costmodel predict`: a model's latency from its layers, without running it, with
//! how far held-out models of the same database were off, and each layer group's share.

use super::{open, PredictArgs};
use crate::cli::{print_json, print_out, render, BadInput};
use anyhow::Context as _;
use edgeprof::tune::costmodel;
use edgeprof::tune::costmodel::predict::{LayerRow, PredictError, Target};
use std::fmt::Write as _;

fn target(args: &PredictArgs) -> anyhow::Result<Target> {
    if crate::cli::is_file_model(&args.model) {
        let path = std::fs::canonicalize(&args.model)
            .map_err(|e| BadInput(format!("{}: cannot read it: {e}", args.model)))?;
        let input = if args.input.is_empty() {
            costmodel::files::DECLARED.to_string()
        } else {
            args.input.join(" ")
        };
        let cost = edgeprof::models::onnx_graph::analyse_file(
            &path,
            &costmodel::files::specs(&input)?,
            args.batch,
        )
        .map_err(|e| BadInput(e.to_string()))?;
        let groups = costmodel::files::file_groups(&cost);
        if groups.is_empty() {
            anyhow::bail!(BadInput(format!(
                "{}: none of its {} node(s) could be costed, so there is nothing to predict from \
                 (`edgeprof models info {}` names their operators)",
                args.model, cost.node_count, args.model
            )));
        }
        let first = cost
            .inputs
            .first()
            .map(|i| i.shape.clone())
            .unwrap_or_default();
        return Ok(Target {
            groups,
            input,
            batch: first.first().copied().unwrap_or(1),
            image: match (&first[..], cost.inputs.len()) {
                ([_, c, h, w], 1) => Some(edgeprof::models::InputShape {
                    channels: *c,
                    height: *h,
                    width: *w,
                }),
                _ => None,
            },
            key: path.to_string_lossy().into_owned(),
            costed: Some((cost.costed, cost.node_count)),
        });
    }
    let shape = match &args.input[..] {
        [] => edgeprof::models::InputShape {
            channels: 3,
            height: 64,
            width: 64,
        },
        [text] => text
            .parse()
            .map_err(|e| BadInput(format!("--input {text}: {e}")))?,
        _ => anyhow::bail!(BadInput(format!(
            "{} is a zoo model with one input: give --input once (CxHxW)",
            args.model
        ))),
    };
    let model = if args.batch.is_some_and(|b| b != 1) {
        edgeprof::models::describe(&args.model, Some(shape), args.batch, None, shape)?
    } else {
        costmodel::zoo_model(&args.model, &shape.to_string())?
    };
    Ok(Target {
        groups: costmodel::planned_groups(&model),
        input: shape.to_string(),
        batch: model.input_shape.first().copied().unwrap_or(1),
        image: Some(shape),
        key: args.model.clone(),
        costed: None,
    })
}

pub(super) fn predict(args: PredictArgs) -> anyhow::Result<()> {
    let mut db = open(&args.db.db)?;
    let engine = args.db.engine.as_str();
    let target = target(&args)?;
    let cores = super::core_set(&args.cores)?;
    let mut attempt =
        costmodel::predict::predict(&db, &target, engine, args.threads, cores.as_deref());
    // Nothing to predict from yet: a quick profile first, unless told not to.
    let mut quick = None;
    if matches!(attempt, Err(PredictError::NoProfiles)) && !args.no_profile {
        let job = costmodel::profiling::quick(
            engine,
            args.threads,
            cores.clone(),
            args.db.db.clone(),
            &args.model,
        );
        errln!(
            "no {engine} profile on {} thread(s){} in the database yet: profiling {} zoo \
             models and {} probes first for a first prediction (seconds on a desktop CPU, \
             minutes on a small board; \
             `edgeprof costmodel profile` profiles the whole zoo later and narrows it)",
            args.threads,
            super::on_cpus(cores.as_deref()),
            job.models.len(),
            job.probes.unwrap_or(0)
        );
        costmodel::profiling::profile(&job, |line| errln!("{line}"))
            .context("the quick profile for a first prediction")?;
        db = open(&args.db.db)?;
        attempt = costmodel::predict::predict(&db, &target, engine, args.threads, cores.as_deref());
        quick = Some(job.models.len());
    }
    let prediction = match attempt {
        Ok(p) => p,
        Err(PredictError::NoProfiles) => anyhow::bail!(BadInput(format!(
            "no {engine} profile on {} thread(s){} in the database: `edgeprof costmodel \
             profile --engine {engine} --threads {}{}` measures them",
            args.threads,
            super::on_cpus(cores.as_deref()),
            args.threads,
            if cores.is_some() {
                format!(" --cores {}", args.cores)
            } else {
                String::new()
            }
        ))),
        Err(PredictError::Unpredictable(why)) => {
            anyhow::bail!(BadInput(format!("{}: {why}", args.model)))
        }
    };
    let Target {
        groups,
        input,
        batch,
        costed,
        ..
    } = &target;
    let batch = *batch;
    let (ms, fallbacks, spread, beyond, flops) = (
        prediction.ms,
        prediction.fallbacks,
        prediction.spread,
        prediction.extrapolated,
        prediction.flops,
    );
    let layers = args.layers.then_some(&prediction.layers);
    let (working_set, bandwidth) = (prediction.working_set, prediction.bandwidth);
    if args.db.json {
        let mut json = serde_json::json!({
            "model": args.model,
            "engine": engine,
            "input": input,
            "batch": batch,
            "flops": flops,
            "extrapolated": beyond,
            "threads": args.threads,
            "cores": cores,
            "predicted_ms": ms,
            "uncertainty": spread,
            "groups": groups.len(),
            "fallbacks": fallbacks,
            "measured_ms": prediction.measured_ms,
            "nodes_costed": costed.map(|c| c.0),
            "nodes": costed.map(|c| c.1),
            "working_set_bytes": working_set,
            "bandwidth_bytes_per_s": bandwidth,
        });
        if let Some(rows) = layers {
            json["overhead_ratio"] = prediction.overhead_ratio.into();
            json["layers"] = serde_json::to_value(rows)?;
        }
        return print_json(&json);
    }
    let batched = if batch > 1 {
        format!(" batch {batch}")
    } else {
        String::new()
    };
    let mut out = layers
        .map(|rows| layer_table(rows, prediction.overhead_ratio))
        .unwrap_or_default();
    if let (true, Some(bytes), Some(rate)) = (args.layers, working_set, bandwidth) {
        let _ = writeln!(
            out,
            "its layers move {} per inference, which the profiles' bandwidth curve serves at \
             {:.1} GB/s (`costmodel fit` shows the curve)\n",
            edgeprof::text::bytes(bytes),
            rate / 1e9
        );
    }
    let _ = write!(
        out,
        "{} {input}{batched} on {engine}, {} thread(s){}: {ms:.3} ms predicted from {} layer \
         groups",
        args.model,
        args.threads,
        super::on_cpus(cores.as_deref()),
        groups.len()
    );
    match spread {
        Some(s) => {
            let _ = write!(
                out,
                " (±{:.0} %: 9 in 10 models held out of this database were predicted that close)",
                100.0 * s
            );
        }
        None => out.push_str(" (no uncertainty: the database holds one model)"),
    }
    if fallbacks > 0 {
        let _ = write!(
            out,
            "; {fallbacks} group(s) without a shape used their template's linear fit"
        );
    }
    if let Some(m) = prediction.measured_ms {
        let _ = write!(out, "; measured here: {m:.3} ms");
    }
    if let Some(models) = quick {
        let _ = write!(
            out,
            "\nnote: from a quick profile of {models} zoo models and the probes, so the spread \
             above is wide and itself rough; `edgeprof costmodel profile --threads {}` (about \
             12 min) profiles the whole zoo and narrows it",
            args.threads
        );
    }
    if let Some((done, all)) = costed.filter(|(done, all)| done < all) {
        let _ = write!(
            out,
            "\nnote: {done} of its {all} nodes were costed; the others are not in the prediction \
             (`edgeprof models info {}` names them)",
            args.model
        );
    }
    if let Some((i, l)) = prediction.bigger_input {
        let _ = write!(
            out,
            "\nnote: its input {i} is larger than any profiled on this device (at most {l}): \
             the prediction extrapolates, and may err more than the held-out models did; \
             `edgeprof costmodel profile --input {i} --probes 0` profiles the zoo at that size"
        );
    } else if batch > 1 {
        let _ = write!(
            out,
            "\nnote: the profiles are of batch 1: batch {batch} is extrapolated from each layer's \
             time per unit of work, which misses how an engine batches (it has erred by half: \
             see Known limitations); `edgeprof bench --batch {batch}` measures it"
        );
    } else if beyond {
        let _ = write!(
            out,
            "\nnote: its {} FLOPs exceed the largest profiled model's {} on this device: the \
             prediction extrapolates, and may err more than the held-out models did",
            edgeprof::text::si(flops),
            edgeprof::text::si(prediction.largest_flops)
        );
    }
    print_out(&(out + "\n"))
}

/// A group's first layer, and how many more it fuses (`layer1.0.conv1 +2`): its full name, all
/// its layers joined by `+`, would be cut in the middle on a narrow terminal.
fn lead(group: &str) -> String {
    let mut layers = group.split('+');
    let first = layers.next().unwrap_or(group);
    match layers.count() {
        0 => first.to_string(),
        more => format!("{first} +{more}"),
    }
}

/// The layer groups as a table (each named by its first layer), each with its share of the
/// predicted sum, then the sums.
fn layer_table(rows: &[LayerRow], ratio: f64) -> String {
    let sum: f64 = rows.iter().map(|r| r.predicted_ms).sum();
    let measured: Option<f64> = rows.iter().map(|r| r.measured_ms).sum();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                lead(&r.group),
                r.template.clone(),
                render::si(r.flops as u64),
                format!(
                    "{:.4}{}",
                    r.predicted_ms,
                    if r.fell_back { "*" } else { "" }
                ),
                format!(
                    "{:.1} %",
                    100.0 * r.predicted_ms / sum.max(f64::MIN_POSITIVE)
                ),
                r.measured_ms.map_or("-".into(), |m| format!("{m:.4}")),
                r.measured_ms.filter(|m| *m > 0.0).map_or("-".into(), |m| {
                    format!("{:+.0} %", 100.0 * (r.predicted_ms / m - 1.0))
                }),
            ]
        })
        .collect();
    let mut out = render::table(
        &[
            "group (first layer)",
            "template",
            "FLOPs",
            "predicted ms",
            "share",
            "measured ms",
            "error",
        ],
        &[false, false, true, true, true, true, true],
        &cells,
    );
    let _ = write!(out, "\nthe groups sum to {sum:.3} ms");
    if let Some(m) = measured {
        let _ = write!(out, " ({m:.3} ms profiled)");
    }
    let _ = writeln!(
        out,
        "; the prediction is that sum × {ratio:.3}, the end-to-end latency over the layers' sum \
         on the profiled models (what the engine spends outside its layers)"
    );
    if rows.iter().any(|r| r.fell_back) {
        out.push_str("* no shape: its template's linear fit\n");
    }
    out.push('\n');
    out
}

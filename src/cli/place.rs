//! `edgeprof place`: layer placement across processing units. The measurements run
//! in `edgeprof place-worker` child processes: each block's latency on each unit, the copy
//! cost between units; the assignment is solved here (exact dynamic programme over the chain)
//! and then run as a split plan, measured against its prediction.

mod gpu;

use crate::cli::{print_json, print_out, render, BadInput};
use anyhow::Context;
use clap::Args;
use edgeprof::models::zoo::{self, ModelParams};
use edgeprof::models::InputShape;
use edgeprof::runner::split::{Request, Response, Source, Task, Unit};
use edgeprof::tune::placement::{self, Block, Link, Plan, Stage, Units};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct PlaceArgs {
    /// The model to place: one of the zoo's, or an ONNX file
    #[arg(long)]
    model: String,
    /// A zoo model's input as CxHxW (default 3x224x224); an ONNX file's inputs as `models
    /// info --input` takes them (NAME=DIMS, NAME=TYPE:VALUE, NAME=@FILE), repeated for several
    /// (default: the file's own shapes)
    #[arg(long, value_name = "SPEC")]
    input: Vec<String>,
    /// A zoo model's batch (default 1)
    #[arg(long)]
    batch: Option<usize>,
    /// A zoo model's classes (default 1000)
    #[arg(long)]
    classes: Option<usize>,
    /// The units as NAME=CPUS, comma-separated (e.g. big=4-7,little=0-3), or
    /// NAME=onnxruntime:DEVICE[@CPUS] for a unit onnxruntime serves on `cpu` or `cuda:N`; the
    /// first is the host, where the input starts and the output ends (default: big and LITTLE
    /// clusters, else the first two CPUs as two units, and GPU 0 as unit `gpu` where there is
    /// one and onnxruntime has its CUDA provider)
    #[arg(long)]
    units: Option<String>,
    /// With the default units, leave the GPU out
    #[arg(long)]
    no_gpu: bool,
    /// The Python whose onnxruntime serves the onnxruntime units (default: edgeprof's
    /// environment, else the system's python3)
    #[arg(long, value_name = "PATH")]
    python: Option<std::path::PathBuf>,
    /// Most blocks the chain is cut into
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    blocks: u32,
    /// Timed runs per measurement (medians are kept)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Run this assignment (the unit index of each block, e.g. 0,0,1,1) instead of the optimal
    #[arg(long, value_delimiter = ',')]
    assign: Vec<usize>,
    /// Only predict: do not run the plan
    #[arg(long)]
    no_run: bool,
    #[arg(long)]
    json: bool,
}

/// Transfer sizes of the copy microbenchmark.
const SIZES: &[u64] = &[4 << 10, 64 << 10, 1 << 20, 4 << 20];
/// Longest a measurement child may take.
const TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, Serialize)]
struct Measured {
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
    max_relative_difference: f64,
    /// Values of the whole model's output that are NaN or infinite.
    non_finite: usize,
    segments: Vec<(usize, usize, usize)>,
}

#[derive(Debug, Serialize)]
struct PlaceReport {
    model: String,
    input: String,
    batch: usize,
    units: Vec<Unit>,
    blocks: Vec<Block>,
    stages: Vec<Stage>,
    links: Units,
    input_bytes: u64,
    optimal: Plan,
    single: Vec<Plan>,
    /// The plan `--assign` gave, as predicted (run unless `--no-run`).
    assigned: Option<Plan>,
    ran: Option<Plan>,
    measured: Option<Measured>,
    /// Whether a GPU was weighed, and why not.
    gpu: String,
    /// What a block's range counts: a zoo model's layers, or an ONNX file's nodes.
    counts: &'static str,
}

/// The CPUs of unit `name`: a CPU list (`4-7`, `0,2`) or a core set of this machine (`big`,
/// `little`, `all`…), each CPU one this process may use.
fn unit_cpus(name: &str, list: &str) -> anyhow::Result<Vec<usize>> {
    let set = edgeprof::tune::resolve_core_set_here(list.trim())
        .map_err(|why| BadInput(format!("--units: {name}={list}: {}", why.0)))?;
    Ok(set
        .cpus
        .unwrap_or_else(edgeprof::tune::session::allowed_cpus))
}

fn parse_unit(part: &str, python: Option<&std::path::PathBuf>) -> anyhow::Result<Unit> {
    let not_a_unit = || {
        BadInput(format!(
            "--units: {part:?} is not NAME=CPUS (e.g. big=4-7) or NAME=onnxruntime:DEVICE"
        ))
    };
    let (name, spec) = part.split_once('=').ok_or_else(not_a_unit)?;
    let (name, spec) = (name.trim(), spec.trim());
    if name.is_empty() || spec.is_empty() {
        anyhow::bail!(not_a_unit());
    }
    if let Some(unit) = gpu::engine_unit(name, spec, python)? {
        return Ok(unit);
    }
    Ok(Unit::cpus(name, unit_cpus(name, spec)?))
}

/// Units as `a=0,b=1`, or separated by ';' when a CPU list holds a comma (`a=0,2;b=1`). The
/// first is the host, which holds the input and the output: a CPU unit.
fn units_arg(text: &str, python: Option<&std::path::PathBuf>) -> anyhow::Result<Vec<Unit>> {
    let separator = if text.contains(';') { ';' } else { ',' };
    let parts: Vec<&str> = text
        .split(separator)
        .filter(|s| !s.trim().is_empty())
        .collect();
    let Some(host) = parts.first() else {
        anyhow::bail!(BadInput(format!(
            "--units {text:?} names no unit (e.g. big=4-7,little=0-3)"
        )));
    };
    if let Some((name, spec)) = host.split_once('=') {
        if gpu::is_engine_spec(spec.trim()) {
            anyhow::bail!(BadInput(format!(
                "--units: the first unit ({}) is the host, where the input starts and the \
                 output ends: make it a CPU unit (NAME=CPUS)",
                name.trim()
            )));
        }
    }
    let units: Vec<Unit> = parts
        .iter()
        .map(|part| parse_unit(part, python))
        .collect::<anyhow::Result<_>>()?;
    for (i, u) in units.iter().enumerate() {
        if units[..i].iter().any(|v| v.name == u.name) {
            anyhow::bail!(BadInput(format!(
                "--units names {} twice: give each unit a name of its own",
                u.name
            )));
        }
    }
    Ok(units)
}

fn default_units() -> anyhow::Result<Vec<Unit>> {
    let allowed = edgeprof::tune::session::allowed_cpus();
    let clusters = edgeprof::collect::device::clusters(Path::new("/"));
    let sets = edgeprof::tune::core_sets(&clusters, &allowed);
    let big = sets.iter().find(|s| s.label == "big");
    let little = sets.iter().find(|s| s.label == "little");
    if let (Some(b), Some(l)) = (big, little) {
        return Ok(vec![
            Unit::cpus("big", b.cpus.clone().unwrap_or_default()),
            Unit::cpus("little", l.cpus.clone().unwrap_or_default()),
        ]);
    }
    match allowed.as_slice() {
        [a, b, ..] => Ok(vec![
            Unit::cpus(&format!("cpu{a}"), vec![*a]),
            Unit::cpus(&format!("cpu{b}"), vec![*b]),
        ]),
        _ => anyhow::bail!(BadInput(
            "this process may use one CPU only: there is nothing to place across (name units with --units)".into()
        )),
    }
}

/// Runs one request in an `edgeprof place-worker` child.
fn ask(request: &Request) -> anyhow::Result<Response> {
    let text = serde_json::to_string(request).context("cannot encode the request")?;
    crate::cli::ask_worker(
        &["place-worker".to_string()],
        text.as_bytes(),
        TIMEOUT,
        "the placement worker",
    )
}

/// The model as the worker takes it, its blocks, its input's bytes and how the report
/// names its input and batch.
struct Placed {
    source: Source,
    blocks: Vec<Block>,
    input_bytes: u64,
    input: String,
    batch: usize,
}

fn placed(args: &PlaceArgs) -> anyhow::Result<Placed> {
    let max_blocks = args.blocks as usize;
    if crate::cli::is_file_model(&args.model) {
        for (flag, given) in [
            ("--batch", args.batch.is_some()),
            ("--classes", args.classes.is_some()),
        ] {
            if given {
                anyhow::bail!(BadInput(format!(
                    "{flag} sets a zoo model's; {} has its own (bind its inputs with --input NAME=DIMS)",
                    args.model
                )));
            }
        }
        let path = Path::new(&args.model);
        let given = edgeprof::models::onnx_graph::InputSpec::parse_all(&args.input)
            .map_err(|e| BadInput(e.to_string()))?;
        let chain = edgeprof::models::onnx_graph::Chain::open(path, &given)
            .map_err(|e| BadInput(e.to_string()))?;
        let input = chain.input();
        // Before any worker starts: a block that cannot be held in memory is refused here.
        edgeprof::engines::tract::check_fits(
            &args.model,
            "its largest tensor",
            Some(chain.largest_bytes()),
        )
        .map_err(|e| BadInput(e.to_string()))?;
        return Ok(Placed {
            source: Source::File {
                path: path.to_path_buf(),
                inputs: args.input.clone(),
            },
            blocks: placement::file_blocks(&chain, max_blocks),
            input_bytes: input.bytes(),
            input: format!(
                "{}={}",
                input.name,
                edgeprof::models::onnx_graph::show_shape(&input.shape)
            ),
            batch: input.shape.first().copied().unwrap_or(1),
        });
    }
    if zoo::find(&args.model).is_none() {
        anyhow::bail!(BadInput(format!(
            "--model {}: neither a zoo model ({}) nor an ONNX file",
            args.model,
            zoo::zoo_names().join(", ")
        )));
    }
    let input: InputShape = match args.input.as_slice() {
        [] => InputShape::default(),
        [one] => one.parse().map_err(|e| {
            BadInput(format!(
                "--input {one}: {e} (a zoo model has one image input, CxHxW)"
            ))
        })?,
        _ => anyhow::bail!(BadInput(
            "a zoo model has one image input: give --input once, as CxHxW".into()
        )),
    };
    let batch = args.batch.unwrap_or(1);
    let classes = args.classes.unwrap_or(1000);
    let params = ModelParams {
        num_classes: classes,
        channels: input.channels,
        height: input.height,
        width: input.width,
        batch,
    };
    let model = zoo::build(&args.model, &params)?;
    Ok(Placed {
        source: Source::Zoo {
            model: args.model.clone(),
            input,
            batch,
            classes,
        },
        blocks: placement::blocks(&model, max_blocks),
        input_bytes: model
            .input_shape
            .iter()
            .fold(edgeprof::models::cost::BYTES_PER_ELEMENT, |n, &d| {
                n.saturating_mul(d as u64)
            }),
        input: input.to_string(),
        batch,
    })
}

pub fn run(args: PlaceArgs) -> anyhow::Result<()> {
    let Placed {
        source,
        blocks,
        input_bytes,
        input,
        batch,
    } = placed(&args)?;
    if args.no_gpu && args.units.is_some() {
        anyhow::bail!(BadInput(
            "--no-gpu leaves the GPU out of the default units; with --units, name only the \
             units wanted"
                .into()
        ));
    }
    let mut units = match &args.units {
        Some(text) => units_arg(text, args.python.as_ref())?,
        None => default_units()?,
    };
    // The GPU: said either way, so that a plan over CPU units alone is never mistaken for one
    // that weighed the GPU.
    let gpu = gpu::decide(
        &mut units,
        args.units.is_none() && !args.no_gpu,
        args.python.as_ref(),
    )?;
    if !args.assign.is_empty() && args.assign.len() != blocks.len() {
        anyhow::bail!(BadInput(format!(
            "--assign names {} unit(s) but the chain has {} block(s)",
            args.assign.len(),
            blocks.len()
        )));
    }
    if let Some(u) = args.assign.iter().find(|&&u| u >= units.len()) {
        anyhow::bail!(BadInput(format!(
            "--assign: unit {u} does not exist (units are numbered from 0 to {})",
            units.len() - 1
        )));
    }
    let request = |task: Task| Request {
        source: source.clone(),
        seed: edgeprof::models::onnx::DEFAULT_SEED,
        blocks: blocks.iter().map(|b| (b.first, b.end)).collect(),
        units: units.clone(),
        runs: args.runs as usize,
        task,
    };
    let names: Vec<String> = units.iter().map(gpu::describe).collect();
    errln!("{}", gpu.line);
    errln!(
        "profiling {} block(s) of {} on {} …",
        blocks.len(),
        args.model,
        names.join(", ")
    );
    let Response::Profile { ms } = ask(&request(Task::Profile))? else {
        anyhow::bail!("the placement worker answered a profile request with something else");
    };
    let k = units.len();
    let samples = if k > 1 {
        errln!("measuring the copy cost between the units …");
        let Response::Transfer { samples } = ask(&request(Task::Transfer {
            sizes: SIZES.to_vec(),
        }))?
        else {
            anyhow::bail!("the placement worker answered a transfer request with something else");
        };
        samples
    } else {
        vec![vec![Vec::new()]]
    };
    let mut links: Vec<Vec<Link>> = (0..k)
        .map(|a| {
            (0..k)
                .map(|b| {
                    if a == b {
                        Link::FREE
                    } else {
                        placement::fit_link(&samples[a][b]).unwrap_or(Link::FREE)
                    }
                })
                .collect()
        })
        .collect();
    if let Some((g, Some(kind))) = gpu.unit {
        gpu::apply_memory(&mut links, &samples, g, kind);
    }
    let units_model = Units {
        names: units.iter().map(|u| u.name.clone()).collect(),
        links,
    };
    let stages: Vec<Stage> = blocks
        .iter()
        .zip(&ms)
        .map(|(b, ms)| Stage {
            name: b.name.clone(),
            ms: ms.clone(),
            out_bytes: b.out_bytes,
        })
        .collect();
    let optimal = placement::optimal(&stages, &units_model, input_bytes);
    let single: Vec<Plan> = (0..k)
        .map(|u| placement::single(&stages, &units_model, input_bytes, u))
        .collect();
    let chosen = if args.assign.is_empty() {
        optimal.clone()
    } else {
        placement::evaluate(&stages, &units_model, input_bytes, &args.assign)
    };
    let chosen_plan = chosen.clone();
    let (ran, measured) = if args.no_run {
        (None, None)
    } else {
        errln!("running the plan {:?} as a split …", chosen.units);
        let Response::Split {
            median_ms,
            min_ms,
            max_ms,
            max_relative_difference,
            non_finite,
            segments,
        } = ask(&request(Task::Split {
            assign: chosen.units.clone(),
        }))?
        else {
            anyhow::bail!("the placement worker answered a split request with something else");
        };
        (
            Some(chosen),
            Some(Measured {
                median_ms,
                min_ms,
                max_ms,
                max_relative_difference,
                non_finite,
                segments,
            }),
        )
    };
    let report = PlaceReport {
        model: args.model.clone(),
        input,
        batch,
        units,
        blocks,
        stages,
        links: units_model,
        input_bytes,
        optimal,
        single,
        assigned: (!args.assign.is_empty()).then(|| chosen_plan.clone()),
        ran,
        measured,
        gpu: gpu.line,
        counts: if matches!(source, Source::File { .. }) {
            "nodes"
        } else {
            "layers"
        },
    };
    if args.json {
        print_json(&report)
    } else {
        print_out(&report_text(&report))
    }
}

fn report_text(r: &PlaceReport) -> String {
    let mut out = format!(
        "placement of {} {} batch {} over {} unit(s); unit 0 ({}) holds the input and the output\n{}\n\n",
        r.model,
        r.input,
        r.batch,
        r.units.len(),
        r.units.first().map_or("", |u| u.name.as_str()),
        r.gpu
    );
    let mut header = vec!["block".to_string(), r.counts.to_string(), "out".to_string()];
    header.extend(r.units.iter().map(|u| format!("{} ms", u.name)));
    header.push("optimal".into());
    let rows: Vec<Vec<String>> = r
        .blocks
        .iter()
        .zip(&r.stages)
        .enumerate()
        .map(|(i, (b, s))| {
            let mut row = vec![
                b.name.clone(),
                format!("{}..{}", b.first, b.end),
                render::bytes(b.out_bytes),
            ];
            row.extend(s.ms.iter().map(|m| format!("{m:.3}")));
            row.push(r.units[r.optimal.units[i]].name.clone());
            row
        })
        .collect();
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut right = vec![false, false, true];
    right.extend(r.units.iter().map(|_| true));
    right.push(false);
    out.push_str(&render::table(&header_refs, &right, &rows));
    let k = r.units.len();
    if k > 1 {
        out.push_str(
            "\ncopy cost between units (t = α + bytes/β, fitted from the copy microbenchmark)\n",
        );
        let mut link_rows = Vec::new();
        for a in 0..k {
            for b in (0..k).filter(|&b| b != a) {
                let l = &r.links.links[a][b];
                link_rows.push(vec![
                    format!("{} → {}", r.units[a].name, r.units[b].name),
                    format!("{:.4}", l.alpha_ms),
                    if l.beta.is_finite() {
                        format!("{:.2}", l.beta * 1e3 / 1e9)
                    } else {
                        "∞".into()
                    },
                    format!("{:.3}", l.ms(1 << 20)),
                ]);
            }
        }
        out.push_str(&render::table(
            &["link", "α ms", "β GB/s", "1 MiB ms"],
            &[false, true, true, true],
            &link_rows,
        ));
    }
    out.push_str("\nplans (predicted end-to-end latency)\n");
    let plan_name = |p: &Plan| -> String {
        p.units
            .iter()
            .map(|&u| r.units[u].name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut plan_rows = vec![vec![
        "optimal".to_string(),
        plan_name(&r.optimal),
        format!("{:.3}", r.optimal.predicted_ms),
        format!("{:.3}", r.optimal.transfer_ms),
    ]];
    if let Some(p) = &r.assigned {
        plan_rows.push(vec![
            "assigned".to_string(),
            plan_name(p),
            format!("{:.3}", p.predicted_ms),
            format!("{:.3}", p.transfer_ms),
        ]);
    }
    for (u, p) in r.single.iter().enumerate() {
        plan_rows.push(vec![
            format!("all on {}", r.units[u].name),
            plan_name(p),
            format!("{:.3}", p.predicted_ms),
            format!("{:.3}", p.transfer_ms),
        ]);
    }
    out.push_str(&render::table(
        &["plan", "units per block", "ms", "of which copies"],
        &[false, false, true, true],
        &plan_rows,
    ));
    if let (Some(p), Some(m)) = (&r.ran, &r.measured) {
        let _ = writeln!(
            out,
            "\nran {} as {} sub-model(s) chained {}: measured median {:.3} ms (range {:.3}–{:.3}) against {:.3} ms predicted ({:+.1}%); output matches the whole model's to {:.1e} (relative)",
            plan_name(p),
            m.segments.len(),
            if m.segments.iter().any(|s| r.units[s.0].engine.is_some()) {
                "through channels, and pipes to the onnxruntime units' processes"
            } else {
                "in one process"
            },
            m.median_ms,
            m.min_ms,
            m.max_ms,
            p.predicted_ms,
            (m.median_ms / p.predicted_ms - 1.0) * 100.0,
            m.max_relative_difference
        );
        if m.non_finite > 0 {
            let _ = writeln!(
                out,
                "warning: {} of the whole model's output values are NaN or infinite, so the \
                 comparison says little (each matched only the same non-finite value)",
                m.non_finite
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_parsed_from_names_and_cpu_lists() -> anyhow::Result<()> {
        let allowed = edgeprof::tune::session::allowed_cpus();
        let (a, b) = (allowed[0], *allowed.last().unwrap_or(&allowed[0]));
        let u = units_arg(&format!("x={a},y={b}"), None)?;
        assert_eq!(u.len(), 2);
        assert_eq!((u[0].cpus.clone(), u[1].cpus.clone()), (vec![a], vec![b]));
        let u = units_arg(&format!("x={a};y={a},{b}"), None)?;
        assert_eq!(u[1].cpus, if a == b { vec![a] } else { vec![a, b] });
        // A core set of this machine names its CPUs.
        assert_eq!(units_arg("x=all", None)?[0].cpus, allowed);
        let refused = |text: &str, needle: &str| match units_arg(text, None) {
            Ok(u) => panic!("{text} was taken: {u:?}"),
            Err(e) => assert!(e.to_string().contains(needle), "{text}: {e}"),
        };
        refused("nonsense", "is not NAME=CPUS");
        refused("a=x", "unknown core set \"x\"");
        refused("=0", "is not NAME=CPUS");
        refused(&format!("x={a};y={a},zzz"), "unknown core set");
        refused(",", "names no unit");
        refused(&format!("x={a},x={b}"), "names x twice");
        refused("x=4096", "names CPU 4096, which this process may not use");
        refused("x=onnxruntime:cpu", "the first unit (x) is the host");
        Ok(())
    }
}

//! Layer placement across processing units (`edgeprof place`): each block's latency on each
//! unit and the copy cost between units are measured in `edgeprof place-worker` child processes;
//! the assignment is solved here (exact dynamic programme over the chain) and then run as a split
//! plan, measured against its prediction.

mod gpu;

use crate::error::Context;
use crate::models::zoo::{self, ModelParams};
use crate::models::InputShape;
use crate::runner::place_worker::{Request, Response, Source, Task, Unit};
use crate::tune::placement::{self, Block, Link, Plan, Stage, Units};
use crate::tune::TuneError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a placement is asked, as `edgeprof place` takes it.
#[derive(Debug, Clone, Default)]
pub struct PlaceJob {
    /// A zoo model or an ONNX file.
    pub model: String,
    /// A zoo model's input as CxHxW, or an ONNX file's inputs (`models info --input` specs).
    pub input: Vec<String>,
    pub batch: Option<usize>,
    pub classes: Option<usize>,
    /// The units as `NAME=CPUS,…` or `NAME=onnxruntime:DEVICE[@CPUS]` (None: the default units).
    pub units: Option<String>,
    /// With the default units, leave the GPU out.
    pub no_gpu: bool,
    /// The Python whose onnxruntime serves the onnxruntime units.
    pub python: Option<PathBuf>,
    /// Most blocks the chain is cut into.
    pub blocks: usize,
    /// Timed runs per measurement.
    pub runs: usize,
    /// An assignment to run instead of the optimal one.
    pub assign: Vec<usize>,
    /// Run the plan as a split (else only predict).
    pub run: bool,
}

/// Transfer sizes of the copy microbenchmark.
const SIZES: &[u64] = &[4 << 10, 64 << 10, 1 << 20, 4 << 20];
/// Longest a measurement child may take.
const TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, Serialize)]
pub struct Measured {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub max_relative_difference: f64,
    /// Values of the whole model's output that are NaN or infinite.
    pub non_finite: usize,
    pub segments: Vec<(usize, usize, usize)>,
}

#[derive(Debug, Serialize)]
pub struct PlaceReport {
    pub model: String,
    pub input: String,
    pub batch: usize,
    pub units: Vec<Unit>,
    pub blocks: Vec<Block>,
    pub stages: Vec<Stage>,
    pub links: Units,
    pub input_bytes: u64,
    pub optimal: Plan,
    pub single: Vec<Plan>,
    /// The plan `--assign` gave, as predicted (run unless `--no-run`).
    pub assigned: Option<Plan>,
    pub ran: Option<Plan>,
    pub measured: Option<Measured>,
    /// Whether a GPU was weighed, and why not.
    pub gpu: String,
    /// What a block's range counts: a zoo model's layers, or an ONNX file's nodes.
    pub counts: &'static str,
}

/// The CPUs of unit `name`: a CPU list (`4-7`, `0,2`) or a core set of this machine (`big`,
/// `little`, `all`…), each CPU one this process may use.
fn unit_cpus(name: &str, list: &str) -> crate::error::Result<Vec<usize>> {
    let set = crate::tune::resolve_core_set_here(list.trim())
        .map_err(|why| TuneError::Asked(format!("--units: {name}={list}: {}", why.0)))?;
    Ok(set.cpus.unwrap_or_else(crate::tune::tuning::allowed_cpus))
}

fn parse_unit(part: &str, python: Option<&std::path::PathBuf>) -> crate::error::Result<Unit> {
    let not_a_unit = || {
        TuneError::Asked(format!(
            "--units: {part:?} is not NAME=CPUS (e.g. big=4-7) or NAME=onnxruntime:DEVICE"
        ))
    };
    let (name, spec) = part.split_once('=').ok_or_else(not_a_unit)?;
    let (name, spec) = (name.trim(), spec.trim());
    if name.is_empty() || spec.is_empty() {
        crate::error::bail!(not_a_unit());
    }
    if let Some(unit) = gpu::engine_unit(name, spec, python)? {
        return Ok(unit);
    }
    Ok(Unit::cpus(name, unit_cpus(name, spec)?))
}

/// Units as `a=0,b=1`, or separated by ';' when a CPU list holds a comma (`a=0,2;b=1`). The
/// first is the host, which holds the input and the output: a CPU unit.
pub fn units_arg(
    text: &str,
    python: Option<&std::path::PathBuf>,
) -> crate::error::Result<Vec<Unit>> {
    let separator = if text.contains(';') { ';' } else { ',' };
    let parts: Vec<&str> = text
        .split(separator)
        .filter(|s| !s.trim().is_empty())
        .collect();
    let Some(host) = parts.first() else {
        crate::error::bail!(TuneError::Asked(format!(
            "--units {text:?} names no unit (e.g. big=4-7,little=0-3)"
        )));
    };
    if let Some((name, spec)) = host.split_once('=') {
        if gpu::is_engine_spec(spec.trim()) {
            crate::error::bail!(TuneError::Asked(format!(
                "--units: the first unit ({}) is the host, where the input starts and the \
                 output ends: make it a CPU unit (NAME=CPUS)",
                name.trim()
            )));
        }
    }
    let units: Vec<Unit> = parts
        .iter()
        .map(|part| parse_unit(part, python))
        .collect::<crate::error::Result<_>>()?;
    for (i, u) in units.iter().enumerate() {
        if units[..i].iter().any(|v| v.name == u.name) {
            crate::error::bail!(TuneError::Asked(format!(
                "--units names {} twice: give each unit a name of its own",
                u.name
            )));
        }
    }
    Ok(units)
}

fn default_units() -> crate::error::Result<Vec<Unit>> {
    let allowed = crate::tune::tuning::allowed_cpus();
    let clusters = crate::collect::device::clusters(Path::new("/"));
    let sets = crate::tune::core_sets(&clusters, &allowed);
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
        _ => crate::error::bail!(TuneError::Asked(
            "this process may use one CPU only: there is nothing to place across (name units with --units)".into()
        )),
    }
}

/// Runs one request in an `edgeprof place-worker` child.
fn ask(request: &Request) -> crate::error::Result<Response> {
    let text = serde_json::to_string(request).context("cannot encode the request")?;
    Ok(crate::collect::child::ask_worker(
        &["place-worker"],
        text.as_bytes(),
        TIMEOUT,
        "the placement worker",
        None,
    )?)
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

fn placed(args: &PlaceJob) -> crate::error::Result<Placed> {
    let max_blocks = args.blocks;
    if crate::models::is_file_model(&args.model) {
        for (flag, given) in [
            ("--batch", args.batch.is_some()),
            ("--classes", args.classes.is_some()),
        ] {
            if given {
                crate::error::bail!(TuneError::Asked(format!(
                    "{flag} sets a zoo model's; {} has its own (bind its inputs with --input NAME=DIMS)",
                    args.model
                )));
            }
        }
        let path = Path::new(&args.model);
        let given = crate::models::onnx_graph::InputSpec::parse_all(&args.input)
            .map_err(|e| TuneError::Asked(e.to_string()))?;
        let chain = crate::models::onnx_graph::Chain::open(path, &given)
            .map_err(|e| TuneError::Asked(e.to_string()))?;
        let input = chain.input();
        // Before any worker starts: a block that cannot be held in memory is refused here.
        crate::engines::tract::check_fits(
            &args.model,
            "its largest tensor",
            Some(chain.largest_bytes()),
        )
        .map_err(|e| TuneError::Asked(e.to_string()))?;
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
                crate::models::onnx_graph::show_shape(&input.shape)
            ),
            batch: input.shape.first().copied().unwrap_or(1),
        });
    }
    if zoo::find(&args.model).is_none() {
        crate::error::bail!(TuneError::Asked(format!(
            "--model {}: neither a zoo model ({}) nor an ONNX file{}",
            args.model,
            zoo::zoo_names().join(", "),
            crate::text::did_you_mean(&args.model, zoo::zoo_names())
        )));
    }
    let input: InputShape = match args.input.as_slice() {
        [] => InputShape::default(),
        [one] => one.parse().map_err(|e| {
            TuneError::Asked(format!(
                "--input {one}: {e} (a zoo model has one image input, CxHxW)"
            ))
        })?,
        _ => crate::error::bail!(TuneError::Asked(
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
            .fold(crate::models::cost::BYTES_PER_ELEMENT, |n, &d| {
                n.saturating_mul(d as u64)
            }),
        input: input.to_string(),
        batch,
    })
}

/// Places `job`'s model across its units: each block profiled on each unit and the copy cost
/// between them measured in `edgeprof place-worker` children, the optimal assignment solved,
/// and (unless only predicting) the chosen plan run as a split and measured. `say` hears what
/// is being done.
pub fn place(job: &PlaceJob, mut say: impl FnMut(String)) -> crate::error::Result<PlaceReport> {
    let args = job;
    let Placed {
        source,
        blocks,
        input_bytes,
        input,
        batch,
    } = placed(args)?;
    if args.no_gpu && args.units.is_some() {
        crate::error::bail!(TuneError::Asked(
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
        crate::error::bail!(TuneError::Asked(format!(
            "--assign names {} unit(s) but the chain has {} block(s)",
            args.assign.len(),
            blocks.len()
        )));
    }
    if let Some(u) = args.assign.iter().find(|&&u| u >= units.len()) {
        crate::error::bail!(TuneError::Asked(format!(
            "--assign: unit {u} does not exist (units are numbered from 0 to {})",
            units.len() - 1
        )));
    }
    let request = |task: Task| Request {
        source: source.clone(),
        seed: crate::models::onnx::DEFAULT_SEED,
        blocks: blocks.iter().map(|b| (b.first, b.end)).collect(),
        units: units.clone(),
        runs: args.runs,
        task,
    };
    let names: Vec<String> = units.iter().map(gpu::describe).collect();
    say(gpu.line.clone());
    say(format!(
        "profiling {} block(s) of {} on {} …",
        blocks.len(),
        args.model,
        names.join(", ")
    ));
    let Response::Profile { ms } = ask(&request(Task::Profile))? else {
        crate::error::bail!(TuneError::Worker(
            "the placement worker answered a profile request with something else".into()
        ));
    };
    let k = units.len();
    let samples = if k > 1 {
        say("measuring the copy cost between the units …".to_string());
        let Response::Transfer { samples } = ask(&request(Task::Transfer {
            sizes: SIZES.to_vec(),
        }))?
        else {
            crate::error::bail!(TuneError::Worker(
                "the placement worker answered a transfer request with something else".into()
            ));
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
    let (ran, measured) = if !args.run {
        (None, None)
    } else {
        say(format!("running the plan {:?} as a split …", chosen.units));
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
            crate::error::bail!(TuneError::Worker(
                "the placement worker answered a split request with something else".into()
            ));
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
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_parsed_from_names_and_cpu_lists() -> crate::error::Result<()> {
        let allowed = crate::tune::tuning::allowed_cpus();
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

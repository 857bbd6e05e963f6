//! `edgeprof worker`: the child process that measures one condition with a built-in engine and
//! reports over the worker protocol (see `protocol.rs`). Timed latencies are sent in one batched
//! record per repeat, so writing output never lands inside the timed loop.

use crate::config::{Device, ModelRef};
use crate::engines::{Loaded, Source};
use crate::error::Context;
use crate::models::zoo::{self, ModelParams};
use crate::protocol::{WorkerMessage, WorkerRequest};
use std::io::{Read, Write};
use std::path::Path;

fn emit(out: &mut impl Write, message: &WorkerMessage) -> crate::error::Result<()> {
    writeln!(out, "{}", message.to_line())
        .and_then(|_| out.flush())
        .context("cannot write to the parent (stdout closed)")
}

/// Reads the request from `input`, runs it, writes protocol records to `out`. A failure is
/// reported as an `error` record and returned.
pub fn run(mut input: impl Read, out: &mut impl Write) -> crate::error::Result<()> {
    // tract's panics are contained where it is called; this catches any other, so that the
    // parent always gets an `error` record with the reason rather than a crashed worker.
    let result =
        crate::engines::tract::contained(|| measure(&mut input, out)).unwrap_or_else(|why| {
            Err(crate::error::failed!(
                "the worker failed unexpectedly: {why}"
            ))
        });
    if let Err(e) = &result {
        // Best effort: the parent also sees the exit status and stderr.
        let _ = emit(
            out,
            &WorkerMessage::Error {
                message: format!("{e:#}"),
            },
        );
    }
    result
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn measure(input: &mut impl Read, out: &mut impl Write) -> crate::error::Result<()> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .context("cannot read the request from stdin")?;
    let request: WorkerRequest = serde_json::from_str(&text).map_err(|e| {
        crate::error::BadInput(format!(
            "the worker request is not valid JSON for a condition: {e}"
        ))
    })?;
    let c = &request.condition;
    if !crate::engines::BUILT_IN.contains(&c.engine.as_str()) {
        crate::error::bail!(crate::error::BadInput(format!(
            "this worker runs the built-in engines ({}), not {}",
            crate::engines::BUILT_IN.join(", "),
            c.engine
        )));
    }
    if c.device != Device::Cpu {
        crate::error::bail!(crate::error::BadInput(format!(
            "{} runs on the CPU only here, not {}",
            c.engine, c.device
        )));
    }
    if let Some(key) = c.options.keys().next() {
        crate::error::bail!(crate::error::BadInput(format!(
            "{} takes no options (the condition sets {key})",
            c.engine
        )));
    }
    let threads = crate::protocol::resolve_threads(c.threads);
    // Counters open before the engine starts its threads, so that they inherit them.
    let counters = request
        .counters
        .then(|| crate::collect::perf::Counters::open(&crate::collect::perf::plan(Path::new("/"))));
    let input_shape = vec![c.batch, c.input.channels, c.input.height, c.input.width];
    let zoo_model;
    let fed;
    // The file converted to the condition's precision, where the run made one.
    let converted = request
        .model_file
        .as_deref()
        .filter(|_| c.engine == "tract");
    let source = match (&c.model, converted) {
        (ModelRef::Onnx(path), _) if !request.inputs.is_empty() => {
            fed = fed_inputs(&request.inputs)?;
            Source::OnnxFed {
                path: converted.unwrap_or(path),
                inputs: &fed,
            }
        }
        (ModelRef::Onnx(_) | ModelRef::Zoo(_), Some(path)) => Source::OnnxFile {
            path,
            input_shape: Some(&input_shape),
        },
        (ModelRef::Zoo(name), None) => {
            let params = ModelParams {
                num_classes: request.classes,
                channels: c.input.channels,
                height: c.input.height,
                width: c.input.width,
                batch: c.batch,
            };
            zoo_model = zoo::build(name, &params)?;
            crate::engines::tract::check_zoo_fits(
                &zoo_model,
                &crate::models::cost::analyze(&zoo_model),
            )?;
            Source::Zoo {
                model: &zoo_model,
                seed: request.seed,
            }
        }
        (ModelRef::Onnx(path), None) => Source::OnnxFile {
            path,
            input_shape: Some(&input_shape),
        },
        (ModelRef::Tflite(path), _) => crate::error::bail!(crate::error::BadInput(format!(
            "{} is a TensorFlow Lite file: it runs on the tflite engine",
            path.display()
        ))),
        (ModelRef::Torch(path), _) => crate::error::bail!(crate::error::BadInput(format!(
            "{} is a PyTorch program: it runs on the pytorch engine",
            path.display()
        ))),
    };
    // The input the run prepared (photographs, or the seed's values), else the seed's.
    let given = match &request.input_file {
        Some(path) if request.inputs.is_empty() => Some(read_f32(path)?),
        _ => None,
    };
    let session = Loaded::load(
        &c.engine,
        source,
        threads,
        (request.seed, given),
        c.precision,
    )?;
    emit(
        out,
        &WorkerMessage::Ready {
            init_ms: ms(session.init_time()),
            engine: Some(session.engine().to_string()),
            engine_version: crate::engines::version(session.engine()).map(str::to_string),
            device: Some("cpu".to_string()),
            threads: Some(session.threads()),
            parameters: session.parameters(),
        },
    )?;
    let first = session.time_one()?;
    emit(
        out,
        &WorkerMessage::First {
            latency_ms: ms(first),
        },
    )?;
    if let Some(dir) = &request.outputs_dir {
        crate::models::npy::write_outputs(dir, &session.outputs()?)?;
    }
    if let Some(path) = &request.output_file {
        let values = session.output()?;
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(path, bytes)
            .with_context(|| format!("cannot write the output to {}", path.display()))?;
    }
    // Warm-up: at least `warmup` iterations and at least `warmup_seconds`.
    let mut warm = Vec::with_capacity(request.warmup);
    let warm_start = std::time::Instant::now();
    while warm.len() < request.warmup || warm_start.elapsed().as_secs_f64() < request.warmup_seconds
    {
        warm.push(ms(session.time_one()?));
    }
    emit(out, &WorkerMessage::Warmup { latencies_ms: warm })?;
    // Counted over the timed loops only, not the records written between them.
    let counting = match &counters {
        Some(Ok(c)) => Some(c),
        _ => None,
    };
    if let Some(c) = counting {
        c.reset();
    }
    let mut counted = 0;
    for repeat in 0..request.repeats.max(1) {
        if let Some(c) = counting {
            c.resume();
        }
        let times = timed_repeat(
            &session,
            request.iterations.max(1),
            request.min_duration_s,
            &mut |done| emit(out, &WorkerMessage::Progress { done, repeat }),
        );
        if let Some(c) = counting {
            c.stop();
        }
        let times = times?;
        counted += times.len();
        emit(
            out,
            &WorkerMessage::Iterations {
                latencies_ms: times,
                repeat,
            },
        )?;
    }
    match counters {
        Some(Ok(c)) => {
            let report = c.read(counted);
            emit(
                out,
                &WorkerMessage::Counters {
                    iterations: report.iterations,
                    line_bytes: report.line_bytes,
                    counts: report.counts,
                    unavailable: report.unavailable,
                },
            )?;
        }
        Some(Err(why)) => emit(
            out,
            &WorkerMessage::Counters {
                iterations: counted,
                line_bytes: crate::collect::perf::line_bytes(Path::new("/")),
                counts: Vec::new(),
                unavailable: vec![format!("all events: {why}")],
            },
        )?,
        None => {}
    }
    // The engine's per-layer profile, when asked for and the engine has one.
    if request.layer_runs > 0 {
        if let Some(times) = session.layer_profile(request.layer_runs) {
            let nodes = times?
                .into_iter()
                .map(|t| crate::protocol::NodeTime {
                    name: t.layer,
                    op: String::new(),
                    ms: t.ms_per_run,
                })
                .collect();
            emit(
                out,
                &WorkerMessage::Layers {
                    runs: request.layer_runs,
                    nodes,
                },
            )?;
        }
    }
    emit(out, &WorkerMessage::Summary { note: None })
}

/// A little-endian float32 file's values.
fn read_f32(path: &Path) -> crate::error::Result<Vec<f32>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read the input {}", path.display()))?;
    if bytes.len() % 4 != 0 {
        crate::error::bail!(
            "the input {} is not float32 values ({} bytes)",
            path.display(),
            bytes.len()
        );
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// An ONNX file's inputs by name, each read from the `.npy` file the request names.
fn fed_inputs(
    inputs: &[crate::protocol::FedInput],
) -> crate::error::Result<Vec<crate::models::onnx_graph::BoundInput>> {
    inputs
        .iter()
        .map(|i| {
            let t = crate::models::npy::read_file(&i.file)
                .map_err(|e| crate::error::BadInput(format!("input {}: {e}", i.name)))?;
            Ok(crate::models::onnx_graph::BoundInput {
                name: i.name.clone(),
                elem: t.elem,
                shape: t.shape,
                values: Some(t.values),
            })
        })
        .collect()
}

/// The name cache simulation toggles on: only the inferences inside it are counted.
pub const TIMED_REPEAT_SYMBOL: &str = "*edgeprof::runner::worker::timed_repeat*";

/// How often a long repeat says how far it has got.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One repeat: at least `iterations` inferences and at least `min_duration_s` of timed work.
/// Every [`PROGRESS_EVERY`] it tells `progress` how many it has done (between two timed
/// inferences, never inside one: a line a second). Never inlined, so that valgrind can count
/// what happens inside it alone.
#[inline(never)]
fn timed_repeat(
    session: &Loaded,
    iterations: usize,
    min_duration_s: f64,
    progress: &mut dyn FnMut(usize) -> crate::error::Result<()>,
) -> crate::error::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(iterations);
    let repeat_start = std::time::Instant::now();
    let mut told = repeat_start;
    loop {
        let now = std::time::Instant::now();
        let elapsed = now.duration_since(repeat_start).as_secs_f64();
        if times.len() >= iterations && elapsed >= min_duration_s {
            return Ok(times);
        }
        if now.duration_since(told) >= PROGRESS_EVERY {
            progress(times.len())?;
            told = now;
        }
        times.push(ms(session.time_one()?));
    }
}

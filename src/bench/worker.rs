//! A benchmark in a worker process: a built-in engine's `edgeprof worker`, as the evaluation
//! pipeline runs it, or a framework's harness in its own Python environment. An ONNX file is
//! fed by name there: its inputs go to the worker as `.npy` files (the same values tract is fed
//! in this process) and every output of the first inference comes back the same way, to be
//! checked or saved.

use super::*;
use crate::config::{Device, ModelRef};
use crate::engines::external::{self, ModelInput};
use crate::error::Context;
use crate::models::npy::output_file_name;
use crate::models::onnx_graph::{self, BoundInput, InputSpec};
use crate::models::InputShape;
use crate::protocol::Condition;
use crate::protocol::WorkerRequest;
use crate::runner::spawn;
use std::path::Path;

/// A single benchmark has no configured time limit: a day stands for none.
const TIMEOUT: Duration = Duration::from_secs(86_400);

/// What the worker is given of the model.
enum Given<'a> {
    Zoo(&'a Model),
    /// An ONNX file and its inputs, every one bound.
    Fed {
        path: &'a Path,
        inputs: std::borrow::Cow<'a, [BoundInput]>,
        expected: &'a [PathBuf],
    },
    /// A .tflite file, at the inputs it declares.
    Tflite {
        path: &'a Path,
        expected: &'a [PathBuf],
    },
}

/// The model as a worker takes it: a zoo model, or an ONNX file with every input bound by name
/// (an image shape given as `CxHxW`, else the file's own shapes).
fn given(model: &BenchModel) -> crate::error::Result<Given<'_>> {
    Ok(match model {
        BenchModel::Zoo(m) => Given::Zoo(m),
        BenchModel::File { path, input_shape } => {
            let (specs, batch) = match input_shape.as_deref() {
                Some(&[n, c, h, w]) => (
                    vec![InputSpec::image(InputShape {
                        channels: c,
                        height: h,
                        width: w,
                    })],
                    Some(n),
                ),
                _ => (Vec::new(), None),
            };
            let inputs = onnx_graph::bind_file_inputs(path, &specs, batch)
                .map_err(|e| crate::error::BadInput(e.to_string()))?;
            Given::Fed {
                path,
                inputs: inputs.into(),
                expected: &[],
            }
        }
        BenchModel::Fed {
            path,
            inputs,
            expected,
        } => Given::Fed {
            path,
            inputs: inputs.as_slice().into(),
            expected,
        },
        BenchModel::Tflite { path, expected } => Given::Tflite { path, expected },
    })
}

/// The condition that names the run: a zoo model's input, or an ONNX file's first image input
/// (the input field of a condition is an image's; other inputs travel by name).
fn condition(engine: &str, given: &Given<'_>, threads: usize) -> Condition {
    let (model, input, batch) = match given {
        Given::Zoo(m) => {
            let s = &m.input_shape;
            let input = match s[..] {
                [_, c, h, w] => InputShape {
                    channels: c,
                    height: h,
                    width: w,
                },
                _ => InputShape::default(),
            };
            (
                ModelRef::Zoo(m.name.clone()),
                input,
                s.first().copied().unwrap_or(1),
            )
        }
        Given::Fed { path, inputs, .. } => {
            let image = inputs.iter().find_map(|i| match i.shape[..] {
                [n, c, h, w] if n > 0 && c > 0 && h > 0 && w > 0 => Some((
                    InputShape {
                        channels: c,
                        height: h,
                        width: w,
                    },
                    n,
                )),
                _ => None,
            });
            let (input, batch) = image.unwrap_or((InputShape::default(), 1));
            let model = if crate::config::is_torch_program(&path.to_string_lossy()) {
                ModelRef::Torch(path.to_path_buf())
            } else {
                ModelRef::Onnx(path.to_path_buf())
            };
            (model, input, batch)
        }
        Given::Tflite { path, .. } => {
            return Condition::new(
                engine,
                ModelRef::Tflite(path.to_path_buf()),
                InputShape::default(),
                1,
                threads,
                Device::Cpu,
            )
            .with_declared_inputs();
        }
    };
    Condition::new(engine, model, input, batch, threads, Device::Cpu)
}

/// Every output the worker wrote to `dir`, in order, as (shape, values).
fn read_outputs(dir: &Path) -> crate::error::Result<Vec<crate::engines::tract::Output>> {
    let mut outputs = Vec::new();
    loop {
        let path = dir.join(output_file_name(outputs.len()));
        if !path.is_file() {
            break;
        }
        let t = crate::models::npy::read_file(&path)?;
        outputs.push((t.shape, t.values.iter().map(|&v| v as f32).collect()));
    }
    if outputs.is_empty() {
        crate::error::bail!("the worker wrote none of the model's outputs");
    }
    Ok(outputs)
}

/// Refuses a file that is no TensorFlow Lite model (its flatbuffer says `TFL3` at byte 4), in
/// one sentence that says what it looks like.
fn check_tflite(path: &Path) -> Result<(), crate::error::BadInput> {
    use std::io::Read;
    let mut head = [0u8; 8];
    let read = std::fs::File::open(path).and_then(|mut f| f.read(&mut head));
    match read {
        Err(e) => Err(crate::error::BadInput(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
        Ok(n) if n == 8 && &head[4..8] == b"TFL3" => Ok(()),
        Ok(_) => {
            let looks = if onnx_graph::input_names(path).is_ok() {
                "; it is an ONNX file: run it on tract or onnxruntime".to_string()
            } else {
                String::new()
            };
            Err(crate::error::BadInput(format!(
                "{} is not a TensorFlow Lite model (it lacks the TFL3 mark of one){looks}",
                path.display()
            )))
        }
    }
}

/// The outputs the worker wrote, saved where asked and checked against the expected ones.
fn check_saved(
    outputs_dir: &Path,
    request: &BenchRequest,
    expected: &[PathBuf],
) -> crate::error::Result<Vec<OutputCheck>> {
    let outputs = read_outputs(outputs_dir)?;
    if let Some(dir) = &request.save_outputs {
        crate::models::npy::write_outputs(dir, &outputs)?;
    }
    Ok(check_outputs(&outputs, expected)?)
}

/// Runs the benchmark in a worker process, reporting progress through `on_event`.
pub fn run_in_worker(
    request: &BenchRequest,
    mut on_event: impl FnMut(BenchEvent),
) -> crate::error::Result<BenchReport> {
    let framework = external::find(&request.engine);
    let engine = match framework {
        Some(f) => f.name,
        None => crate::engines::BUILT_IN
            .iter()
            .copied()
            .find(|e| *e == request.engine)
            .ok_or_else(|| {
                crate::error::BadInput(format!("there is no engine named {}", request.engine))
            })?,
    };
    if request.profile_runs > 0 {
        crate::error::bail!(crate::error::BadInput(match framework {
            None =>
                "--profile times tract's nodes inside this process; leave out --isolated".into(),
            Some(f) => format!(
                "--profile needs tract's node profile; {} has none here",
                f.name
            ),
        }));
    }
    let tflite = framework.is_some_and(|f| f.model == ModelInput::Tflite);
    if matches!(request.model, BenchModel::Tflite { .. }) != tflite
        && !matches!(request.model, BenchModel::Zoo(_))
    {
        crate::error::bail!(crate::error::BadInput(if tflite {
            "tflite runs the zoo's models and .tflite files; run an ONNX file on tract or \
             onnxruntime"
                .to_string()
        } else {
            format!(
                "a .tflite file runs on the tflite engine (--engine tflite), not {}",
                request.engine
            )
        }));
    }
    let program = match &request.model {
        BenchModel::Fed { path, .. } => crate::config::is_torch_program(&path.to_string_lossy()),
        _ => false,
    };
    if program && engine != "pytorch" {
        crate::error::bail!(crate::error::BadInput(format!(
            "a PyTorch program runs on the pytorch engine, not {engine}"
        )));
    }
    if let (Some(f), BenchModel::File { .. } | BenchModel::Fed { .. }) = (framework, &request.model)
    {
        if f.model != ModelInput::Onnx && !program {
            crate::error::bail!(crate::error::BadInput(format!(
                "{} runs the zoo's models here; run an ONNX file on tract or onnxruntime",
                f.name
            )));
        }
    }
    if let BenchModel::Tflite { path, .. } = &request.model {
        check_tflite(path)?;
    }
    let given = given(&request.model)?;
    let scratch = scratch_dir("edgeprof-bench-")?;
    let outputs_dir = scratch.path().join("outputs");
    std::fs::create_dir_all(&outputs_dir)
        .with_context(|| format!("cannot create {}", outputs_dir.display()))?;
    let (label, inputs, analytic) = match &given {
        Given::Tflite { path, .. } => (path.display().to_string(), Vec::new(), None),
        Given::Zoo(m) => (m.name.clone(), Vec::new(), Some(cost::analyze(m).total)),
        Given::Fed { path, inputs, .. } => (
            path.display().to_string(),
            crate::runner::prepare::write_fed(scratch.path(), "input", inputs, request.seed)?,
            None,
        ),
    };
    let condition =
        condition(&request.engine, &given, request.threads).with_precision(request.precision);
    let mut config = crate::config::parse("", Path::new("edgeprof-bench.toml"))?;
    config.measure.check_outputs = false;
    config.measure.seed = request.seed;
    config.matrix.classes = request.classes;
    if let (Some(f), Some(python)) = (framework, &request.python) {
        config.set_python(f.name, python);
    }
    let worker_request = WorkerRequest {
        warmup: request.warmup,
        iterations: request.iterations.max(1),
        repeats: request.repeats.max(1),
        inputs,
        outputs_dir: Some(outputs_dir.clone()),
        ..WorkerRequest::new(condition.clone(), request.seed, request.classes)
    };
    let interpreters =
        crate::runner::prepare::interpreters(&config, std::slice::from_ref(&condition));
    let program = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    on_event(BenchEvent::Loading {
        model: label.clone(),
    });
    let prepared = crate::runner::prepare::prepare(
        &config,
        &condition,
        worker_request,
        &program,
        scratch.path(),
        &interpreters,
    )?;
    let limits = spawn::RunLimits {
        timeout: TIMEOUT,
        sample_interval: Duration::from_millis(500),
    };
    let total = request.iterations.max(1) * request.repeats.max(1);
    let mut before = 0;
    let mut in_repeat = 0;
    let attempt = spawn::run_worker(
        &prepared.command,
        &prepared.request,
        limits,
        &crate::collect::stop::Cancel::new(),
        |event| match event {
            spawn::WorkerEvent::Ready => on_event(BenchEvent::InWorker),
            spawn::WorkerEvent::Repeat(r) => {
                before = r * request.iterations.max(1);
                in_repeat = 0;
            }
            spawn::WorkerEvent::Timed(n) if n > in_repeat => {
                in_repeat = n;
                on_event(BenchEvent::Timed {
                    done: (before + n).min(total),
                    total,
                });
            }
            _ => {}
        },
    );
    let run = attempt.outcome?;
    let first_inference_ms = run
        .first_inference_ms
        .ok_or_else(|| crate::error::failed!("the worker reported no first inference"))?;
    let (checked, input_shape) = match &given {
        Given::Fed {
            inputs, expected, ..
        } => (
            check_saved(&outputs_dir, request, expected)?,
            inputs.first().map(|i| i.shape.clone()).unwrap_or_default(),
        ),
        Given::Tflite { expected, .. } => {
            (check_saved(&outputs_dir, request, expected)?, Vec::new())
        }
        Given::Zoo(m) => (Vec::new(), m.input_shape.clone()),
    };
    let mut report = assemble(
        engine,
        Measured {
            model: label,
            input_shape,
            threads: run.threads.unwrap_or(request.threads),
            init_ms: run.init_ms,
            first_inference_ms,
            warmup_ms: run.warmup_ms,
            repeats: run.repeats,
        },
        analytic,
        None,
    )?;
    report.checked = checked;
    Ok(report)
}

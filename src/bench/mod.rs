//! The direct benchmark: one model on one engine in this process (the multi-condition pipeline
//! with isolated worker processes builds on it). Measures and reports through events and a
//! plain result struct; printing is the front-end's job.

use crate::engines::tract::LayerTime;
use crate::engines::{Loaded, Source};
use crate::models::cost::{self, CostTotals};
use crate::models::graph::Model;
use crate::stats::{self, RunStats};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

mod watch;
mod worker;
pub use watch::{load_memory_limit, LoadStopped};
pub use worker::run_in_worker;

/// Which model to benchmark.
#[derive(Clone)]
pub enum BenchModel {
    Zoo(Model),
    /// An ONNX file, with an optional (N, C, H, W) input shape override.
    File {
        path: PathBuf,
        input_shape: Option<Vec<usize>>,
    },
    /// An ONNX file with its inputs bound by name (tract), and the outputs expected of it
    /// (ONNX `.pb` files, in output order; may be empty).
    Fed {
        path: PathBuf,
        inputs: Vec<crate::models::onnx_graph::BoundInput>,
        expected: Vec<PathBuf>,
    },
    /// A .tflite file as it is (the tflite engine), at the inputs it declares, and the outputs
    /// expected of it (may be empty).
    Tflite {
        path: PathBuf,
        expected: Vec<PathBuf>,
    },
}

/// One output against the output expected of it.
#[derive(Debug, Clone, Serialize)]
pub struct OutputCheck {
    pub output: usize,
    pub shape: Vec<usize>,
    pub expected_shape: Vec<usize>,
    pub max_abs_diff: f64,
    /// Over the expected output's largest magnitude.
    pub max_rel_diff: f64,
    pub agree: bool,
}

#[derive(Clone)]
pub struct BenchRequest {
    /// A built-in engine (tract, candle) or a framework run through its harness.
    pub engine: String,
    pub model: BenchModel,
    pub threads: usize,
    pub warmup: usize,
    pub iterations: usize,
    /// Timed loops of `iterations` each, averaged (mean of means).
    pub repeats: usize,
    /// Seed of the random weights (zoo models) and of the input data.
    pub seed: u64,
    /// The precision the model runs in.
    pub precision: crate::collect::kernels::Precision,
    /// Profile node by node over this many extra inferences (0: no profile).
    pub profile_runs: usize,
    /// Output classes of a zoo model, as the frameworks build it.
    pub classes: usize,
    /// Measure in a worker process, as the evaluation pipeline does (always so for the
    /// frameworks run through a harness).
    pub isolated: bool,
    /// Where to write the first inference's outputs of an ONNX file as `.npy` files.
    pub save_outputs: Option<PathBuf>,
    /// The interpreter of a framework run through its harness, when not the one set up.
    pub python: Option<PathBuf>,
    /// The longest an in-process load may take before the benchmark is stopped (its memory is
    /// bounded too: see [`load_memory_limit`]).
    pub load_timeout: Duration,
}

/// What happens while a benchmark runs, for progress display.
#[derive(Debug, Clone, PartialEq)]
pub enum BenchEvent {
    Loading {
        model: String,
    },
    Loaded {
        init: Duration,
    },
    FirstInference {
        time: Duration,
    },
    WarmupDone {
        iterations: usize,
    },
    Timed {
        done: usize,
        total: usize,
    },
    Profiling {
        runs: usize,
    },
    /// The worker process has loaded the model and is measuring.
    InWorker,
}

/// The outcome of one benchmark; every time in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub engine: &'static str,
    /// The precision the model ran in.
    pub precision: crate::collect::kernels::Precision,
    pub model: String,
    pub input_shape: Vec<usize>,
    pub threads: usize,
    #[serde(flatten)]
    pub stats: RunStats,
    /// Analytic totals of a zoo model (None for ONNX files).
    pub analytic: Option<CostTotals>,
    /// Per-layer profile, when asked for.
    pub profile: Option<Vec<LayerTime>>,
    /// Every timed iteration, in order.
    pub samples_ms: Vec<f64>,
    /// The outputs against the expected ones, when expected outputs were given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checked: Vec<OutputCheck>,
}

/// Reads the outputs expected of a model (ONNX `.pb` tensors) and compares them with the
/// outputs of one inference, by the rule engines are compared with: within
/// [`crate::results::agreement::TOLERANCE`] of the expected output's largest magnitude, or at
/// most [`crate::results::agreement::ABSOLUTE_FLOOR`] apart.
pub fn check_outputs(
    outputs: &[(Vec<usize>, Vec<f32>)],
    expected: &[PathBuf],
) -> Result<Vec<OutputCheck>, crate::error::BadInput> {
    use crate::results::agreement::{agrees, difference};
    if expected.len() > outputs.len() {
        return Err(crate::error::BadInput(format!(
            "{} expected outputs were given; the model has {}",
            expected.len(),
            outputs.len()
        )));
    }
    let mut checks = Vec::with_capacity(expected.len());
    for (k, (path, (shape, values))) in expected.iter().zip(outputs).enumerate() {
        let spec = crate::models::onnx_graph::InputSpec::from_pb_file(path)
            .map_err(|e| crate::error::BadInput(format!("--expect for output {k}: {}", e.0)))?;
        let want_shape = spec.dims.unwrap_or_default();
        let want: Vec<f32> = spec
            .values
            .unwrap_or_default()
            .iter()
            .map(|&v| v as f32)
            .collect();
        let (max_abs_diff, max_rel_diff, agree) = if *shape != want_shape {
            (f64::NAN, f64::NAN, false)
        } else if want.is_empty() && values.is_empty() {
            (0.0, 0.0, true)
        } else {
            match difference(&want, values) {
                Some((abs, rel)) => (abs, rel, agrees(abs, rel)),
                // A NaN or an infinity where both hold the same one agrees; elsewhere not.
                None => {
                    let same = want.len() == values.len()
                        && want
                            .iter()
                            .zip(values)
                            .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
                    (f64::NAN, f64::NAN, same)
                }
            }
        };
        checks.push(OutputCheck {
            output: k,
            shape: shape.clone(),
            expected_shape: want_shape,
            max_abs_diff,
            max_rel_diff,
            agree,
        });
    }
    Ok(checks)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A folder of this process's own for the files a worker reads and writes, removed with it.
pub fn scratch_dir(prefix: &str) -> crate::error::Result<tempfile::TempDir> {
    use crate::error::Context;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .with_context(|| {
            format!(
                "cannot create a scratch folder in {}",
                std::env::temp_dir().display()
            )
        })
}

/// Runs the benchmark, in this process or in a worker (see [`BenchRequest::isolated`]),
/// reporting progress through `on_event`.
pub fn run(
    request: &BenchRequest,
    on_event: impl FnMut(BenchEvent),
) -> crate::error::Result<BenchReport> {
    if let Some(why) = crate::engines::precision_unsupported(&request.engine, request.precision) {
        crate::error::bail!(crate::error::BadInput(why));
    }
    // A converted file is made (and run) through the run's own preparation, in a worker.
    let report = if request.isolated
        || !crate::engines::BUILT_IN.contains(&request.engine.as_str())
        || crate::runner::lowered::converts(&request.engine, request.precision)
    {
        run_in_worker(request, on_event)?
    } else {
        let label = match &request.model {
            BenchModel::Zoo(model) => format!("zoo model {}", model.name),
            BenchModel::File { path, .. }
            | BenchModel::Fed { path, .. }
            | BenchModel::Tflite { path, .. } => path.display().to_string(),
        };
        let owned = request.clone();
        watch::watched(
            label,
            request.load_timeout,
            move |on_event| run_here(&owned, on_event),
            on_event,
        )?
    };
    // The report is assembled from figures alone; the precision is the request's.
    Ok(BenchReport {
        precision: request.precision,
        ..report
    })
}

/// The benchmark in this process (on the thread [`watch::watched`] gives it).
fn run_here(
    request: &BenchRequest,
    on_event: &mut dyn FnMut(BenchEvent),
) -> crate::error::Result<BenchReport> {
    let (source, name, analytic) = match &request.model {
        BenchModel::Zoo(model) => {
            let costs = cost::analyze(model);
            check_zoo_fits(model, &costs)?;
            (
                Source::Zoo {
                    model,
                    seed: request.seed,
                },
                model.name.clone(),
                Some(costs.total),
            )
        }
        BenchModel::File { path, input_shape } => (
            Source::OnnxFile {
                path,
                input_shape: input_shape.as_deref(),
            },
            path.display().to_string(),
            None,
        ),
        BenchModel::Fed { path, inputs, .. } => (
            Source::OnnxFed { path, inputs },
            path.display().to_string(),
            None,
        ),
        BenchModel::Tflite { .. } => crate::error::bail!(crate::error::BadInput(format!(
            "a .tflite file runs on the tflite engine (--engine tflite), not {}",
            request.engine
        ))),
    };
    if request.profile_runs > 0 && request.engine != "tract" {
        crate::error::bail!(crate::error::BadInput(format!(
            "--profile needs tract's node profile; {} has none",
            request.engine
        )));
    }
    on_event(BenchEvent::Loading {
        model: name.clone(),
    });
    let session = Loaded::load(
        &request.engine,
        source,
        request.threads,
        (request.seed, None),
        request.precision,
    )?;
    on_event(BenchEvent::Loaded {
        init: session.init_time(),
    });
    let first = session.time_one()?;
    on_event(BenchEvent::FirstInference { time: first });
    let checked = match &request.model {
        BenchModel::Fed { expected, .. }
            if !expected.is_empty() || request.save_outputs.is_some() =>
        {
            let outputs = session.outputs()?;
            if let Some(dir) = &request.save_outputs {
                crate::models::npy::write_outputs(dir, &outputs)?;
            }
            check_outputs(&outputs, expected)?
        }
        _ => Vec::new(),
    };

    let mut warm: Vec<f64> = Vec::with_capacity(request.warmup);
    for _ in 0..request.warmup {
        warm.push(ms(session.time_one()?));
    }
    on_event(BenchEvent::WarmupDone {
        iterations: request.warmup,
    });

    let iterations = request.iterations.max(1);
    let repeats = request.repeats.max(1);
    let total = iterations * repeats;
    let step = (total / 20).max(1);
    let mut done = 0;
    let mut per_repeat = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let mut times = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            times.push(ms(session.time_one()?));
            done += 1;
            if done % step == 0 || done == total {
                on_event(BenchEvent::Timed { done, total });
            }
        }
        per_repeat.push(times);
    }

    let profile = match &session {
        _ if request.profile_runs == 0 => None,
        Loaded::Tract { session, input } => {
            on_event(BenchEvent::Profiling {
                runs: request.profile_runs,
            });
            Some(session.profile(input, request.profile_runs)?)
        }
        Loaded::TractFed { session, inputs } => {
            on_event(BenchEvent::Profiling {
                runs: request.profile_runs,
            });
            Some(session.profile_fed(inputs, request.profile_runs)?)
        }
        Loaded::Candle { .. } => None,
    };
    let mut report = assemble(
        session.engine(),
        Measured {
            model: name,
            input_shape: session.input_shape().to_vec(),
            threads: session.threads(),
            init_ms: ms(session.init_time()),
            first_inference_ms: ms(first),
            warmup_ms: warm,
            repeats: per_repeat,
        },
        analytic,
        profile,
    )?;
    report.checked = checked;
    Ok(report)
}

pub use crate::engines::tract::{check_zoo_fits, least_memory};

/// The raw figures of one benchmark, wherever it ran.
pub struct Measured {
    pub model: String,
    pub input_shape: Vec<usize>,
    pub threads: usize,
    pub init_ms: f64,
    pub first_inference_ms: f64,
    pub warmup_ms: Vec<f64>,
    /// Timed iterations, one list per repeat.
    pub repeats: Vec<Vec<f64>>,
}

/// Statistics and flags of a measured benchmark.
pub fn assemble(
    engine: &'static str,
    m: Measured,
    analytic: Option<CostTotals>,
    profile: Option<Vec<LayerTime>>,
) -> crate::error::Result<BenchReport> {
    let batch = m.input_shape.first().copied().unwrap_or(1);
    let stats = stats::run_stats(
        m.init_ms,
        Some(m.first_inference_ms),
        &m.warmup_ms,
        &m.repeats,
        batch,
        stats::Outliers::Keep,
    )
    .ok_or_else(|| crate::error::failed!("no valid latency samples were recorded"))?;
    Ok(BenchReport {
        engine,
        precision: crate::collect::kernels::Precision::Fp32,
        model: m.model,
        input_shape: m.input_shape,
        threads: m.threads,
        stats,
        analytic,
        profile,
        samples_ms: m.repeats.concat(),
        checked: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::EngineError;
    use crate::models::zoo::{self, ModelParams};

    #[test]
    fn least_memory_is_parameters_and_the_largest_layer() {
        let params = ModelParams {
            height: 64,
            width: 64,
            ..ModelParams::default()
        };
        let model = match zoo::build("vgg19", &params) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        let costs = cost::analyze(&model);
        let largest = costs
            .layers
            .iter()
            .map(|l| l.input_bytes + l.output_bytes)
            .max()
            .unwrap_or(0);
        assert_eq!(
            least_memory(&costs),
            Some(costs.total.param_bytes + largest)
        );
        // vgg19's first convolutions at 64 × 64: 64 channels in and out, 4 bytes a value.
        assert!(largest >= 2 * 64 * 64 * 64 * 4);
        assert!(check_zoo_fits(&model, &costs).is_ok());
        // At 8192 × 8192, batch 4, no machine edgeprof runs on holds its activations.
        let huge = match zoo::build(
            "vgg19",
            &ModelParams {
                height: 8192,
                width: 8192,
                batch: 4,
                ..ModelParams::default()
            },
        ) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        match check_zoo_fits(&huge, &cost::analyze(&huge)) {
            Err(e @ EngineError::TooLarge { .. }) => {
                assert!(e.is_bad_input());
                assert!(e.to_string().contains("vgg19"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }
}

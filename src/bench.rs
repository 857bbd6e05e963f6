//! The direct benchmark: one model on one engine in this process (the multi-condition pipeline
//! with isolated worker processes builds on it). Measures and reports through events and a
//! plain result struct; printing is the front-end's job.

use crate::engines::tract::{LayerTime, ModelSource, TractSession};
use crate::models::cost::{self, CostTotals};
use crate::models::graph::Model;
use crate::stats::{self, LatencyStats, RepeatSummary};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Which model to benchmark.
pub enum BenchModel {
    Zoo(Model),
    /// An ONNX file, with an optional (N, C, H, W) input shape override.
    File {
        path: PathBuf,
        input_shape: Option<Vec<usize>>,
    },
}

pub struct BenchRequest {
    pub model: BenchModel,
    pub threads: usize,
    pub warmup: usize,
    pub iterations: usize,
    /// Timed loops of `iterations` each, averaged (mean of means).
    pub repeats: usize,
    /// Seed of the random weights (zoo models) and of the input data.
    pub seed: u64,
    /// Profile node by node over this many extra inferences (0: no profile).
    pub profile_runs: usize,
}

/// What happens while a benchmark runs, for progress display.
#[derive(Debug, Clone, PartialEq)]
pub enum BenchEvent {
    Loading { model: String },
    Loaded { init: Duration },
    FirstInference { time: Duration },
    WarmupDone { iterations: usize },
    Timed { done: usize, total: usize },
    Profiling { runs: usize },
}

/// The outcome of one benchmark; every time in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub engine: &'static str,
    pub model: String,
    pub input_shape: Vec<usize>,
    pub threads: usize,
    pub warmup_iterations: usize,
    pub init_ms: f64,
    pub first_inference_ms: f64,
    /// Mean of the warm-up iterations (None without warm-up).
    pub warmup_mean_ms: Option<f64>,
    /// Statistics over every timed iteration of every repeat.
    pub latency: LatencyStats,
    /// Per repeat, and combined (mean of means with spread).
    pub repeats: Vec<LatencyStats>,
    pub repeat_summary: RepeatSummary,
    /// Indices (into `samples_ms`) of iterations flagged by the modified z-score; kept, not dropped.
    pub outliers: Vec<usize>,
    /// Coefficient of variation over all timed iterations; above 10 % the run is noisy.
    pub cv: f64,
    pub noisy: bool,
    pub inferences_per_s: f64,
    pub images_per_s: f64,
    /// Analytic totals of a zoo model (None for ONNX files).
    pub analytic: Option<CostTotals>,
    /// Per-layer profile, when asked for.
    pub profile: Option<Vec<LayerTime>>,
    /// Every timed iteration, in order.
    pub samples_ms: Vec<f64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Statistics exist for any non-empty sample of finite times.
fn no_nan<T>(value: Option<T>) -> anyhow::Result<T> {
    value.ok_or_else(|| anyhow::anyhow!("no valid latency samples were recorded"))
}

/// Runs the benchmark, reporting progress through `on_event`.
pub fn run(
    request: &BenchRequest,
    mut on_event: impl FnMut(BenchEvent),
) -> anyhow::Result<BenchReport> {
    let (source, name, override_shape, analytic) = match &request.model {
        BenchModel::Zoo(model) => (
            ModelSource::Zoo {
                model,
                seed: request.seed,
            },
            model.name.clone(),
            None,
            Some(cost::analyze(model).total),
        ),
        BenchModel::File { path, input_shape } => (
            ModelSource::OnnxFile(path),
            path.display().to_string(),
            input_shape.as_deref(),
            None,
        ),
    };
    on_event(BenchEvent::Loading {
        model: name.clone(),
    });
    let session = TractSession::load(source, override_shape, request.threads)?;
    on_event(BenchEvent::Loaded {
        init: session.init_time,
    });
    let input = session.make_input(request.seed)?;
    let first = session.time_one(&input)?;
    on_event(BenchEvent::FirstInference { time: first });

    let mut warm: Vec<f64> = Vec::with_capacity(request.warmup);
    for _ in 0..request.warmup {
        warm.push(ms(session.time_one(&input)?));
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
            times.push(ms(session.time_one(&input)?));
            done += 1;
            if done % step == 0 || done == total {
                on_event(BenchEvent::Timed { done, total });
            }
        }
        per_repeat.push(times);
    }

    let profile = if request.profile_runs > 0 {
        on_event(BenchEvent::Profiling {
            runs: request.profile_runs,
        });
        Some(session.profile(&input, request.profile_runs)?)
    } else {
        None
    };
    assemble(
        Measured {
            model: name,
            input_shape: session.input_shape.clone(),
            threads: session.threads,
            init_ms: ms(session.init_time),
            first_inference_ms: ms(first),
            warmup_ms: warm,
            repeats: per_repeat,
        },
        analytic,
        profile,
    )
}

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
    m: Measured,
    analytic: Option<CostTotals>,
    profile: Option<Vec<LayerTime>>,
) -> anyhow::Result<BenchReport> {
    let per_repeat = m
        .repeats
        .iter()
        .map(|r| no_nan(LatencyStats::from_ms(r)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let samples: Vec<f64> = m.repeats.concat();
    let latency = no_nan(LatencyStats::from_ms(&samples))?;
    let batch = m.input_shape.first().copied().unwrap_or(1);
    let repeat_summary = no_nan(stats::summarize_repeats(&per_repeat, batch))?;
    let inferences_per_s = if latency.mean_ms > 0.0 {
        1e3 / latency.mean_ms
    } else {
        0.0
    };
    let cv = latency.cv();
    Ok(BenchReport {
        engine: "tract",
        model: m.model,
        input_shape: m.input_shape,
        threads: m.threads,
        warmup_iterations: m.warmup_ms.len(),
        init_ms: m.init_ms,
        first_inference_ms: m.first_inference_ms,
        warmup_mean_ms: (!m.warmup_ms.is_empty())
            .then(|| m.warmup_ms.iter().sum::<f64>() / m.warmup_ms.len() as f64),
        outliers: stats::outlier_indices(&samples),
        noisy: cv > stats::HIGH_CV,
        cv,
        latency,
        repeats: per_repeat,
        repeat_summary,
        inferences_per_s,
        images_per_s: inferences_per_s * batch as f64,
        analytic,
        profile,
        samples_ms: samples,
    })
}

//! The hierarchical roofline: ceilings of a machine, points of programs, and the pure
//! maths between them. A compute roof is flat at the peak FLOP rate; the roof of a memory level
//! is the line bandwidth × arithmetic intensity, where intensity = FLOPs / bytes moved at that
//! level (Williams, Waterman & Patterson, "Roofline", CACM 2009). Attainable performance at
//! intensity I is min(peak, bandwidth × I); the ridge point, where the two meet, is at
//! I = peak / bandwidth. The hierarchical form (Yang et al., "Hierarchical Roofline Analysis",
//! 2020) draws one point per memory level for each program, all at the same FLOP rate.

pub mod advice;
pub mod cachesim;
pub mod ert;
pub mod gpu;
pub mod layers;
pub mod levels;
pub mod nvidia;
pub mod store;

pub use layers::{group_layers, LayerProfile};

use crate::error::BadInput;
use serde::{Deserialize, Serialize};

/// A level of the memory hierarchy, innermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    L1,
    L2,
    L3,
    #[serde(rename = "DRAM")]
    Dram,
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Level::L1 => "L1",
            Level::L2 => "L2",
            Level::L3 => "L3",
            Level::Dram => "DRAM",
        })
    }
}

pub use crate::collect::ceilings::SweepPoint;
pub use crate::collect::kernels::Precision;

/// A flat roof: the peak FLOP rate of one precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeRoof {
    pub precision: Precision,
    /// Threads the peak was measured with.
    pub threads: usize,
    /// Operations per second: FLOPs, or OPs for integer precisions ([`Precision::op`]).
    pub flops_per_s: f64,
    /// The unit that reached it where a precision has several (e.g. "AMX-INT8" and
    /// "AVX-512 VNNI"); none for a precision measured one way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A slanted roof: the sustained bandwidth of one memory level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthRoof {
    pub level: Level,
    pub threads: usize,
    pub bytes_per_s: f64,
}

/// The ceilings a program is judged against, and where they came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// How they were obtained, in words (e.g. "measured by edgeprof 0.1.0, AVX2+FMA, 2 threads",
    /// "imported from ERT roofline.json at PATH").
    pub source: String,
    pub compute: Vec<ComputeRoof>,
    pub bandwidth: Vec<BandwidthRoof>,
    /// The working-set sweep behind the bandwidth roofs, kept for display.
    #[serde(default)]
    pub sweep: Vec<SweepPoint>,
    /// Adjustments made to the measured figures, in words.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Whose ceilings these are: the CPU's (default) or a GPU's.
    #[serde(default, skip_serializing_if = "Processor::is_cpu")]
    pub processor: Processor,
    /// The GPU microbenchmark's sweep behind the bandwidth roofs, kept for display.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_sweep: Vec<crate::collect::gpubench::GpuSweepPoint>,
    /// How far apart each figure's trials were (the figure is the best of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<crate::collect::ceilings::Trials>,
    /// Figures measured while other processes took CPU, in words (each was measured again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy: Vec<String>,
}

/// The processor a set of ceilings, or a program's point, belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Processor {
    #[default]
    Cpu,
    Gpu,
}

impl Processor {
    pub fn is_cpu(&self) -> bool {
        *self == Processor::Cpu
    }
}

impl std::fmt::Display for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Processor::Cpu => "CPU",
            Processor::Gpu => "GPU",
        })
    }
}

/// The highest FLOP rate a ceiling may claim: past every chip's (an exaflop on one device), so
/// only a corrupted or mistyped file reaches it.
pub const MAX_FLOPS_PER_S: f64 = 1e18;
/// The highest bandwidth a ceiling may claim (100 PB/s).
pub const MAX_BYTES_PER_S: f64 = 1e17;

/// A figure for a message: plain when of everyday size, else in scientific notation.
pub fn figure(v: f64) -> String {
    if v == 0.0 || (v.is_finite() && (1e-3..1e6).contains(&v.abs())) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// The lowest FLOP rate or bandwidth a ceiling may claim: a thousand a second, below any
/// processor's. A ceiling of 1e-311 FLOP/s stretches a chart over hundreds of decades.
pub const MIN_RATE: f64 = 1e3;

/// Why a rate cannot be a ceiling: not finite, not positive, below [`MIN_RATE`], or past `limit`.
fn rate_problem(value: f64, limit: f64) -> Option<String> {
    if !value.is_finite() {
        Some("not a finite number".to_string())
    } else if value <= 0.0 {
        Some("not positive".to_string())
    } else if value < MIN_RATE {
        Some(format!(
            "less than any machine reaches (at least {MIN_RATE:e})"
        ))
    } else if value > limit {
        Some(format!("more than any machine reaches (at most {limit:e})"))
    } else {
        None
    }
}

impl Ceilings {
    /// Checks every figure: roofs finite, positive and below the limits above, sweep points
    /// finite and not negative. An infinite roof would be kept as `null` and break every later
    /// roofline command, and absurd ones put nonsense in the advice. The error names the field.
    pub fn check(&self) -> Result<(), crate::error::BadInput> {
        for (i, r) in self.compute.iter().enumerate() {
            if let Some(why) = rate_problem(r.flops_per_s, MAX_FLOPS_PER_S) {
                return Err(crate::error::BadInput::from(format!(
                    "compute[{i}].flops_per_s ({} peak) = {} FLOP/s is {why}",
                    r.precision,
                    figure(r.flops_per_s)
                )));
            }
        }
        for (i, r) in self.bandwidth.iter().enumerate() {
            if let Some(why) = rate_problem(r.bytes_per_s, MAX_BYTES_PER_S) {
                return Err(crate::error::BadInput::from(format!(
                    "bandwidth[{i}].bytes_per_s ({} bandwidth) = {} B/s is {why}",
                    r.level,
                    figure(r.bytes_per_s)
                )));
            }
        }
        let sweeps = self
            .sweep
            .iter()
            .map(|p| ("sweep", p.bytes_per_s))
            .chain(self.gpu_sweep.iter().map(|p| ("gpu_sweep", p.bytes_per_s)));
        for (i, (name, v)) in sweeps.enumerate() {
            if !(v.is_finite() && (0.0..=MAX_BYTES_PER_S).contains(&v)) {
                let i = if name == "sweep" {
                    i
                } else {
                    i - self.sweep.len()
                };
                return Err(crate::error::BadInput::from(format!(
                    "{name}[{i}].bytes_per_s = {} B/s is not a bandwidth (finite, from 0 to {MAX_BYTES_PER_S:e})",
                    figure(v)
                )));
            }
        }
        Ok(())
    }

    /// The highest compute roof of a precision (over thread counts).
    pub fn peak(&self, precision: Precision) -> Option<f64> {
        self.compute
            .iter()
            .filter(|r| r.precision == precision)
            .map(|r| r.flops_per_s)
            .max_by(f64::total_cmp)
    }

    /// The highest bandwidth of a level (over thread counts).
    pub fn bandwidth(&self, level: Level) -> Option<f64> {
        self.bandwidth
            .iter()
            .filter(|r| r.level == level)
            .map(|r| r.bytes_per_s)
            .max_by(f64::total_cmp)
    }
}

/// Where a program's FLOPs and bytes come from, best first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointSource {
    /// Hardware performance counters (named events).
    Counters,
    /// Cache simulation (cachegrind): approximate per-level traffic.
    CacheSimulation,
    /// The analytic model of the zoo: exact FLOPs; DRAM bytes are the traffic lower bound.
    Analytic,
    /// NVIDIA's GPU profilers (Nsight Compute, nvprof): counted FLOPs and bytes per level,
    /// kernel-active time.
    GpuCounters,
}

impl PointSource {
    /// The processor the program ran on.
    pub fn processor(&self) -> Processor {
        match self {
            PointSource::GpuCounters => Processor::Gpu,
            _ => Processor::Cpu,
        }
    }
}

impl std::fmt::Display for PointSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PointSource::Counters => "hardware counters",
            PointSource::CacheSimulation => {
                "cache simulation (valgrind, one thread, no prefetcher; FLOPs from the analytic model)"
            }
            PointSource::Analytic => "analytic model (DRAM bytes = lower bound)",
            PointSource::GpuCounters => "GPU profiler counters (Nsight Compute or nvprof)",
        })
    }
}

/// One program (a condition, or one layer of it) to place on the chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub label: String,
    pub precision: Precision,
    pub flops: f64,
    /// Compute time of one execution (median latency), in seconds.
    pub seconds: f64,
    /// Bytes moved at each level known.
    pub traffic: Vec<(Level, f64)>,
    pub source: PointSource,
    /// What each figure rests on, in words (events, simulated caches), when more than the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub basis: Vec<String>,
}

/// The shortest time a program point may claim, in seconds: no inference or kernel is
/// shorter than a nanosecond, and anything shorter makes rates past any chart.
pub const MIN_SECONDS: f64 = 1e-9;
/// The most FLOPs or bytes a program point may claim (a zetta).
pub const MAX_COUNT: f64 = 1e21;

impl Program {
    /// Whether the point can be placed: FLOPs and bytes zero or from a thousandth to
    /// [`MAX_COUNT`]; time from [`MIN_SECONDS`] to 1e7 s; a FLOP rate at most 100 times
    /// [`MAX_FLOPS_PER_S`]. Figures past these come from corrupted records, and their points
    /// would stretch a chart's axes over hundreds of decades.
    pub fn check(&self) -> Result<(), crate::error::BadInput> {
        // Zero, or at least a thousandth (nvprof's averages make fractional counts): a count of
        // 4e-316 bytes makes an intensity past f64's range.
        let count = |v: f64| v == 0.0 || (1e-3..=MAX_COUNT).contains(&v);
        if !count(self.flops) {
            return Err(crate::error::BadInput::from(format!(
                "{} FLOPs is not a count",
                figure(self.flops)
            )));
        }
        if let Some((level, bytes)) = self.traffic.iter().find(|(_, b)| !count(*b)) {
            return Err(crate::error::BadInput::from(format!(
                "{} bytes at {level} is not a count",
                figure(*bytes)
            )));
        }
        if !(self.seconds.is_finite() && (MIN_SECONDS..=1e7).contains(&self.seconds)) {
            return Err(crate::error::BadInput::from(format!(
                "a time of {} s is not one a program takes",
                figure(self.seconds)
            )));
        }
        let rate = self.flops / self.seconds;
        if rate > 100.0 * MAX_FLOPS_PER_S {
            return Err(crate::error::BadInput::from(format!(
                "{} FLOP/s is more than any machine reaches",
                figure(rate)
            )));
        }
        Ok(())
    }

    /// Achieved FLOP rate.
    pub fn flops_per_s(&self) -> Option<f64> {
        (self.seconds > 0.0 && self.flops >= 0.0).then(|| self.flops / self.seconds)
    }

    /// Arithmetic intensity at a level, FLOPs per byte.
    pub fn intensity(&self, level: Level) -> Option<f64> {
        let bytes = self.traffic.iter().find(|t| t.0 == level)?.1;
        (bytes > 0.0).then(|| self.flops / bytes)
    }
}

/// Attainable FLOP rate at an intensity under a peak and a bandwidth: min(peak, bw × I).
pub fn attainable(peak_flops_per_s: f64, bytes_per_s: f64, intensity: f64) -> f64 {
    peak_flops_per_s.min(bytes_per_s * intensity)
}

/// The intensity where the bandwidth roof meets the compute roof: peak / bandwidth.
pub fn ridge(peak_flops_per_s: f64, bytes_per_s: f64) -> f64 {
    peak_flops_per_s / bytes_per_s
}

/// The zoo model a condition of a stored sweep ran, or why it has none.
pub fn condition_model(
    c: &crate::protocol::Condition,
    classes: usize,
) -> Result<crate::models::graph::Model, crate::error::BadInput> {
    let crate::config::ModelRef::Zoo(name) = &c.model else {
        return Err(crate::error::BadInput::from(
            "an ONNX file has no analytic cost yet".to_string(),
        ));
    };
    let params = crate::models::zoo::ModelParams {
        num_classes: classes,
        channels: c.input.channels,
        height: c.input.height,
        width: c.input.width,
        batch: c.batch,
    };
    crate::models::zoo::build(name, &params).map_err(|e| BadInput(e.to_string()))
}

/// The analytic totals of the model a condition of a stored sweep ran: a zoo model's, or an
/// ONNX file's as the reader describes it at the condition's input and batch (the file read
/// again where the sweep found it).
pub fn condition_cost(
    c: &crate::protocol::Condition,
    classes: usize,
) -> Result<crate::models::cost::CostTotals, crate::error::BadInput> {
    let model = match &c.model {
        crate::config::ModelRef::Onnx(path) => {
            use crate::models::onnx_graph;
            let specs = match &c.named_inputs {
                Some(named) => crate::config::named_specs(named)?,
                None => vec![onnx_graph::InputSpec::image(c.input)],
            };
            let batch = crate::config::named_batch(c.named_inputs.as_deref(), c.batch);
            let cost = onnx_graph::analyse_file(path, &specs, batch)
                .map_err(|e| BadInput(e.to_string()))?;
            // Totals that leave nodes out would place the point too low: say which instead.
            if cost.costed < cost.node_count {
                let ops: Vec<String> = cost
                    .not_costed
                    .iter()
                    .map(|n| format!("{} ×{}", n.op, n.nodes))
                    .collect();
                return Err(BadInput(format!(
                    "{} of its {} nodes are not costed ({}): see `edgeprof models info {}`",
                    cost.node_count - cost.costed,
                    cost.node_count,
                    ops.join(", "),
                    path.display()
                )));
            }
            return Ok(cost.cost_totals());
        }
        crate::config::ModelRef::Zoo(_) => condition_model(c, classes)?,
        crate::config::ModelRef::Tflite(path) => {
            return Err(BadInput(format!(
                "{} is a TensorFlow Lite file; the roofline costs ONNX files (convert it with \
                 `python -m tf2onnx.convert --tflite FILE --output FILE.onnx`)",
                path.display()
            )))
        }
        crate::config::ModelRef::Torch(path) => {
            return Err(BadInput(format!(
                "{} is a PyTorch program; the roofline costs ONNX files (export it with \
                 `torch.onnx.export(model, example, \"model.onnx\")`)",
                path.display()
            )))
        }
    };
    Ok(crate::models::cost::analyze(&model).total)
}

/// Program points for the successful conditions of a stored sweep. FLOPs and bytes
/// come from the best source at hand: the worker's hardware counters when it could
/// count cache misses, else a cache simulation kept for the condition, else the analytic model
/// (FLOPs exact; DRAM bytes the traffic lower bound); the time is the median latency.
/// Conditions that cannot be placed (an ONNX file the reader cannot describe, or no longer
/// finds) are returned with the reason.
pub fn programs_from_results(
    stored: &crate::results::Stored,
    simulations: &[cachesim::Simulation],
) -> (Vec<Program>, Vec<(String, String)>) {
    let classes = stored.classes();
    let mut programs = Vec::new();
    let mut left_out = Vec::new();
    let mut costs: std::collections::HashMap<(String, String, usize), Result<_, BadInput>> =
        std::collections::HashMap::new();
    for record in stored.runs.iter().filter(|r| r.ok) {
        let c = &record.condition;
        let Some(stats) = &record.stats else { continue };
        if let crate::config::Device::Gpu(n) = c.device {
            // Its time is the GPU's, not this CPU's: the GPU roofline places it.
            left_out.push((
                c.id.clone(),
                format!("runs on GPU {n}: placed on the GPU roofline (gpu-roofline.json)"),
            ));
            continue;
        }
        // Once per model, input and batch: an ONNX file is read whole each time.
        let cost = costs
            .entry((c.model.to_string(), c.input_text(), c.batch))
            .or_insert_with(|| condition_cost(c, classes));
        let total = match cost.clone() {
            Ok(total) => total,
            Err(why) => {
                left_out.push((c.id.clone(), why.0));
                continue;
            }
        };
        // Under the roof of the precision it ran in (an int8 condition's multiply-adds counted
        // as OPs against the int8 roof).
        let mut program = Program {
            label: c.id.clone(),
            precision: c.precision,
            flops: total.flops as f64,
            seconds: stats.latency.median_ms / 1e3,
            traffic: vec![(Level::Dram, total.dram_bytes as f64)],
            source: PointSource::Analytic,
            basis: Vec::new(),
        };
        let counted = record
            .run
            .as_ref()
            .and_then(|r| r.counters.as_ref())
            .map(crate::collect::perf::CounterReport::derive);
        let simulated = simulations.iter().rev().find(|s| s.condition == c.id);
        match (counted, simulated) {
            (Some(d), _) if d.has_traffic() => {
                program.traffic = [(Level::L2, d.l2_bytes), (Level::Dram, d.dram_bytes)]
                    .into_iter()
                    .filter_map(|(level, bytes)| Some((level, bytes?)))
                    .collect();
                if let Some(flops) = d.flops {
                    program.flops = flops;
                } else {
                    program
                        .basis
                        .push("FLOPs from the analytic model".to_string());
                }
                program.basis.extend(d.basis);
                program.source = PointSource::Counters;
            }
            (_, Some(sim)) => {
                program.traffic = vec![(Level::L2, sim.l2_bytes), (Level::Dram, sim.dram_bytes)];
                program.basis.push(format!(
                    "simulated D1 {}, LL {}, {} inference(s) on {} thread",
                    sim.output.d1.as_deref().unwrap_or("(valgrind's default)"),
                    sim.output.ll.as_deref().unwrap_or("(valgrind's default)"),
                    sim.iterations,
                    sim.threads
                ));
                program.source = PointSource::CacheSimulation;
            }
            (_, None) if c.precision != Precision::Fp32 => {
                // The analytic bytes are float32's; the precision stores narrower elements.
                let width = c.precision.bytes() as f64 / Precision::Fp32.bytes() as f64;
                for (_, bytes) in &mut program.traffic {
                    *bytes *= width;
                }
                program.basis.push(format!(
                    "DRAM bytes scaled to {}'s {}-byte elements",
                    c.precision,
                    c.precision.bytes()
                ));
            }
            _ => {}
        }
        match program.check() {
            Ok(()) => programs.push(program),
            Err(why) => left_out.push((c.id.clone(), why.0)),
        }
    }
    (programs, left_out)
}

/// Ceilings for other modules' tests: 50 / 100 GFLOP/s (fp64 / fp32); L1 400, L2 100, DRAM 10
/// GB/s, so the fp32 ridges sit at 0.25, 1 and 10 FLOP/byte.
#[cfg(test)]
pub fn test_ceilings() -> Ceilings {
    let bw = |level, gbs: f64| BandwidthRoof {
        level,
        threads: 4,
        bytes_per_s: gbs * 1e9,
    };
    let flat = |precision, gflops: f64| ComputeRoof {
        precision,
        threads: 4,
        flops_per_s: gflops * 1e9,
        via: None,
    };
    Ceilings {
        source: "test machine".into(),
        compute: vec![flat(Precision::Fp64, 50.0), flat(Precision::Fp32, 100.0)],
        bandwidth: vec![
            bw(Level::L1, 400.0),
            bw(Level::L2, 100.0),
            bw(Level::Dram, 10.0),
        ],
        sweep: Vec::new(),
        notes: Vec::new(),
        processor: crate::roofline::Processor::Cpu,
        gpu_sweep: Vec::new(),
        trials: Vec::new(),
        busy: Vec::new(),
    }
}

#[cfg(test)]
mod tests;

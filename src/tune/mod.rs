//! The adaptive tuner: the search space of execution configurations of one model on
//! this device, the features the cost model learns from, the guided search and its baselines,
//! replay over a measured table, and layer placement across processing units.
//!
//! Everything here is pure: measuring a candidate is the caller's job (`live` runs workers,
//! `replay` reads a table), so the search is the same code in both.

pub mod costmodel;
mod error;
pub mod gp;
pub mod live;
pub mod place;
pub mod placement;
pub mod prior;
pub mod replay;
pub mod search;
pub mod tuning;

pub use error::TuneError;

use crate::collect::device::{cpu_list, Cluster};
pub use crate::config::tuning::{Objective, OptionSpace};
use crate::config::Device;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a measured candidate achieved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Mean over repeats of the per-repeat mean latency of one call, in ms.
    pub mean_ms: f64,
    pub p99_ms: f64,
    /// Samples per second.
    pub throughput: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// A lower precision's top-1 agreement with its fp32 twin (a fraction of the images);
    /// None for fp32, or where there was no output to compare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top1_agreement: Option<f64>,
}

/// Whether a measured candidate keeps to the accuracy limit: fp32 always; a lower precision
/// when its top-1 agreement with fp32 is at least `1 − max_top1_drop`. The error says why not.
pub fn within_accuracy(
    precision: &str,
    measured: &Measured,
    max_top1_drop: f64,
) -> Result<(), search::CandidateFailed> {
    if precision == "fp32" {
        return Ok(());
    }
    let floor = 1.0 - max_top1_drop;
    match measured.top1_agreement {
        // A hair of rounding below the floor is still at it (1 − 0.01 is not exactly 0.99).
        Some(a) if a >= floor - 1e-9 => Ok(()),
        Some(a) => Err(format!(
            "{precision} agrees with fp32 on the top-1 class of {:.1} % of the images, below \
             the {:.1} % the accuracy limit allows",
            100.0 * a,
            100.0 * floor
        )
        .into()),
        None => Err(format!(
            "{precision} has no top-1 agreement with fp32 to hold to the accuracy limit (its \
             output or its fp32 twin's was not kept)"
        )
        .into()),
    }
}

impl Objective {
    /// The cost to minimise (ms of one call, or ms per sample for throughput).
    pub fn cost(self, m: &Measured) -> f64 {
        match self {
            Objective::Latency => m.mean_ms,
            Objective::P99 => m.p99_ms,
            Objective::Throughput => 1e3 / m.throughput.max(1e-12),
        }
    }
}

/// A set of CPUs a worker is confined to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreSet {
    /// `all`, `big`, `little`, `clusterN`, `one` or the CPU list.
    pub label: String,
    /// The CPUs; None: every CPU this process may use.
    pub cpus: Option<Vec<usize>>,
    /// How many CPUs the set holds.
    pub count: usize,
    /// The set's mean capacity relative to the fastest core (1 where the kernel cannot say).
    pub capacity: f64,
}

fn relative(cluster: &Cluster, fastest: &Cluster) -> f64 {
    match (cluster.capacity, fastest.capacity) {
        (Some(c), Some(f)) if f > 0 => c as f64 / f as f64,
        _ => match (cluster.max_freq_mhz, fastest.max_freq_mhz) {
            (Some(c), Some(f)) if f > 0 => c as f64 / f as f64,
            _ => 1.0,
        },
    }
}

/// The core sets worth trying on a machine with these clusters (fastest first), keeping only
/// CPUs in `allowed`: all; big and LITTLE (or each cluster) where the cores differ; one core
/// of the fastest kind.
pub fn core_sets(clusters: &[Cluster], allowed: &[usize]) -> Vec<CoreSet> {
    let keep = |cpus: &[usize]| -> Vec<usize> {
        cpus.iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect()
    };
    let clusters: Vec<(Vec<usize>, &Cluster)> = clusters
        .iter()
        .map(|c| (keep(&c.cpus), c))
        .filter(|(cpus, _)| !cpus.is_empty())
        .collect();
    let total: usize = allowed.len().max(1);
    let Some((_, fastest)) = clusters.first() else {
        return vec![CoreSet {
            label: "all".into(),
            cpus: None,
            count: total,
            capacity: 1.0,
        }];
    };
    let mean_capacity = clusters
        .iter()
        .map(|(cpus, c)| cpus.len() as f64 * relative(c, fastest))
        .sum::<f64>()
        / clusters.iter().map(|(c, _)| c.len()).sum::<usize>().max(1) as f64;
    let mut sets = vec![CoreSet {
        label: "all".into(),
        cpus: None,
        count: total,
        capacity: mean_capacity,
    }];
    let named = |label: String, cpus: &[usize], c: &Cluster| CoreSet {
        label,
        cpus: Some(cpus.to_vec()),
        count: cpus.len(),
        capacity: relative(c, fastest),
    };
    if clusters.len() == 2 {
        sets.push(named("big".into(), &clusters[0].0, clusters[0].1));
        sets.push(named("little".into(), &clusters[1].0, clusters[1].1));
    } else if clusters.len() > 2 {
        for (k, (cpus, c)) in clusters.iter().enumerate() {
            sets.push(named(format!("cluster{k}"), cpus, c));
        }
    }
    if total > 1 {
        sets.push(named("one".into(), &clusters[0].0[..1], clusters[0].1));
    }
    sets
}

/// Resolves a core-set name or CPU list against this machine's clusters and the CPUs this
/// process may use ([`resolve_core_set`]).
pub fn resolve_core_set_here(name: &str) -> Result<CoreSet, crate::error::BadInput> {
    let allowed = crate::collect::ceilings::allowed_cpus();
    let clusters = crate::collect::device::clusters(std::path::Path::new("/"));
    resolve_core_set(name, &core_sets(&clusters, &allowed), &allowed)
}

/// Resolves a configured core-set name (`all`, `big`, `little`, `clusterN`, `one`) or CPU list
/// (`0-3,6`) against the sets of this machine.
pub fn resolve_core_set(
    name: &str,
    sets: &[CoreSet],
    allowed: &[usize],
) -> Result<CoreSet, crate::error::BadInput> {
    if let Some(s) = sets.iter().find(|s| s.label == name) {
        return Ok(s.clone());
    }
    let cpus = crate::collect::telemetry::cpu::parse_cpu_ids(name);
    if cpus.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
    {
        return Err(crate::error::BadInput::from(format!(
            "unknown core set {name:?}; this machine has {} or a CPU list such as 0-1",
            sets.iter()
                .map(|s| s.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if let Some(bad) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(crate::error::BadInput::from(format!(
            "core set {name:?} names CPU {bad}, which this process may not use (allowed: {})",
            cpu_list(allowed)
        )));
    }
    Ok(CoreSet {
        label: cpu_list(&cpus),
        count: cpus.len(),
        cpus: Some(cpus),
        capacity: 1.0,
    })
}

/// One execution configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub engine: String,
    /// Threads the engine uses (never 0 here: the tuner names its counts).
    pub threads: usize,
    pub cores: CoreSet,
    pub batch: usize,
    pub device: Device,
    /// `fp32`, `fp16`, `bf16` or `int8` (as the matrix's precision axis names them).
    pub precision: String,
    /// The framework's options (empty: its defaults).
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Candidate {
    /// A short description: `onnxruntime t2 all b1 graph_optimization_level=all`.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} t{} {} b{}",
            self.engine, self.threads, self.cores.label, self.batch
        );
        if self.device != Device::Cpu {
            s.push_str(&format!(" {}", self.device));
        }
        if self.precision != "fp32" {
            s.push_str(&format!(" {}", self.precision));
        }
        for (k, v) in &self.options {
            s.push_str(&format!(" {k}={}", value_text(v)));
        }
        s
    }
}

/// The options searched for an engine when `[tune.options.ENGINE]` does not name them: the
/// ones that change how the framework schedules and optimises, each with its default first.
pub fn default_options(engine: &str) -> OptionSpace {
    let strings = |v: &[&str]| v.iter().map(|s| serde_json::Value::from(*s)).collect();
    let bools = || vec![true.into(), false.into()];
    match engine {
        "onnxruntime" => OptionSpace::from([
            (
                "graph_optimization_level".to_string(),
                strings(&["all", "basic"]),
            ),
            (
                "execution_mode".to_string(),
                strings(&["sequential", "parallel"]),
            ),
            ("spinning".to_string(), bools()),
        ]),
        "pytorch" => OptionSpace::from([("mode".to_string(), strings(&["eager", "torchscript"]))]),
        "tensorflow" => OptionSpace::from([("mode".to_string(), strings(&["function", "eager"]))]),
        "tflite" => OptionSpace::from([("xnnpack".to_string(), bools())]),
        _ => OptionSpace::new(),
    }
}

/// What to enumerate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpaceSpec {
    pub engines: Vec<String>,
    pub threads: Vec<usize>,
    pub batch: Vec<usize>,
    pub core_sets: Vec<CoreSet>,
    pub devices: Vec<Device>,
    /// Precisions to try (empty: fp32); an engine is tried only in the precisions it runs.
    pub precisions: Vec<crate::collect::kernels::Precision>,
    pub options: BTreeMap<String, OptionSpace>,
    /// Floating-point operations of one sample of the model (for the features).
    pub flops_per_sample: f64,
}

/// The enumerated space: every candidate and its feature vector (scaled to [0, 1]).
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub candidates: Vec<Candidate>,
    pub features: Vec<Vec<f64>>,
    /// The engine's default configuration (all cores, smallest batch, no options).
    pub default: usize,
    /// Floating-point operations of one sample of the model.
    pub flops_per_sample: f64,
}

/// Whether `engine` can run on `device` in this build.
fn runs_on(engine: &str, device: Device) -> bool {
    device == Device::Cpu || crate::engines::external::find(engine).is_some_and(|f| f.gpu)
}

/// Every combination of one engine's option values, in order.
fn option_product(space: Option<&OptionSpace>) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let mut out = vec![serde_json::Map::new()];
    for (key, values) in space.into_iter().flatten() {
        if values.is_empty() {
            continue;
        }
        out = out
            .into_iter()
            .flat_map(|m| {
                values.iter().map(move |v| {
                    let mut m = m.clone();
                    m.insert(key.clone(), v.clone());
                    m
                })
            })
            .collect();
    }
    out
}

impl SpaceSpec {
    /// The default candidate of `engine`: all cores as threads, every core, the smallest batch,
    /// the first device, the framework's own option defaults.
    pub fn default_for(&self, engine: &str) -> Candidate {
        let all = self
            .core_sets
            .iter()
            .find(|s| s.cpus.is_none())
            .or(self.core_sets.first())
            .cloned()
            .unwrap_or(CoreSet {
                label: "all".into(),
                cpus: None,
                count: 1,
                capacity: 1.0,
            });
        Candidate {
            engine: engine.to_string(),
            threads: all.count,
            cores: all,
            batch: self.batch.iter().copied().min().unwrap_or(1),
            device: self.devices.first().copied().unwrap_or(Device::Cpu),
            precision: "fp32".into(),
            options: serde_json::Map::new(),
        }
    }

    /// The precisions tried (fp32 when none is named).
    pub fn precisions(&self) -> Vec<crate::collect::kernels::Precision> {
        if self.precisions.is_empty() {
            vec![crate::collect::kernels::Precision::Fp32]
        } else {
            self.precisions.clone()
        }
    }

    /// Enumerates the space: per engine, precisions it runs × threads × core sets × batch ×
    /// devices × option values; the first engine's default configuration is added when the
    /// product lacks it.
    pub fn enumerate(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for engine in &self.engines {
            let options = option_product(self.options.get(engine));
            let precisions: Vec<_> = self
                .precisions()
                .into_iter()
                .filter(|&p| crate::engines::precision_unsupported(engine, p).is_none())
                .collect();
            for &device in self.devices.iter().filter(|d| runs_on(engine, **d)) {
                for &batch in &self.batch {
                    for cores in &self.core_sets {
                        for &threads in &self.threads {
                            for precision in &precisions {
                                for o in &options {
                                    out.push(Candidate {
                                        engine: engine.clone(),
                                        threads,
                                        cores: cores.clone(),
                                        batch,
                                        device,
                                        precision: precision.to_string(),
                                        options: o.clone(),
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        if let Some(first) = self.engines.first() {
            let default = self.default_for(first);
            if !out.contains(&default) {
                out.insert(0, default);
            }
        }
        out
    }

    /// The space with its features.
    pub fn build(&self) -> Space {
        let candidates = self.enumerate();
        Space::new(
            candidates,
            self.flops_per_sample,
            self.engines.first().map(String::as_str),
        )
    }
}

impl Space {
    /// A space over given candidates (e.g. a measured table's rows); the default is the first
    /// engine's candidate with all cores, no options and the smallest batch, else the first.
    pub fn new(candidates: Vec<Candidate>, flops_per_sample: f64, engine: Option<&str>) -> Space {
        let features = features(&candidates, flops_per_sample);
        let engine = engine
            .map(str::to_string)
            .or_else(|| candidates.first().map(|c| c.engine.clone()));
        let min_batch = candidates.iter().map(|c| c.batch).min().unwrap_or(1);
        let default = candidates
            .iter()
            .position(|c| {
                Some(&c.engine) == engine.as_ref()
                    && c.cores.cpus.is_none()
                    && c.threads == c.cores.count
                    && c.options.is_empty()
                    && c.batch == min_batch
            })
            .unwrap_or(0);
        Space {
            candidates,
            features,
            default,
            flops_per_sample,
        }
    }
}

/// The bits of a precision's numbers (`fp32` 32, `fp16`/`bf16` 16, `int8` 8; 32 for a name the
/// tuner does not know).
fn precision_bits(precision: &str) -> f64 {
    match precision {
        "fp64" => 64.0,
        "fp16" | "bf16" => 16.0,
        "int8" => 8.0,
        _ => 32.0,
    }
}

/// The feature vectors of the candidates, every column scaled to [0, 1] over the set: engine
/// (one column per engine), device, threads, core count, core capacity, oversubscription,
/// the work of one call and the work per thread (from the model's analytic FLOPs), the bits of
/// the precision, and one column per framework option value.
pub fn features(candidates: &[Candidate], flops_per_sample: f64) -> Vec<Vec<f64>> {
    let engines: Vec<&str> = {
        let mut e: Vec<&str> = candidates.iter().map(|c| c.engine.as_str()).collect();
        e.sort();
        e.dedup();
        e
    };
    let option_values: Vec<(String, String)> = {
        let mut v: Vec<(String, String)> = candidates
            .iter()
            .flat_map(|c| {
                c.options
                    .iter()
                    .map(move |(k, x)| (format!("{}.{k}", c.engine), value_text(x)))
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let flops = flops_per_sample.max(1.0);
    let raw: Vec<Vec<f64>> = candidates
        .iter()
        .map(|c| {
            let mut f: Vec<f64> = engines
                .iter()
                .map(|e| f64::from(u8::from(*e == c.engine)))
                .collect();
            let threads = c.threads.max(1) as f64;
            let cores = c.cores.count.max(1) as f64;
            let work = flops * c.batch as f64;
            f.push(f64::from(u8::from(c.device != Device::Cpu)));
            f.push(threads.log2());
            f.push(cores.log2());
            f.push(c.cores.capacity);
            f.push((threads / cores).max(1.0).log2());
            f.push(work.ln());
            f.push((work / threads.min(cores)).ln());
            f.push(precision_bits(&c.precision).log2());
            for (key, value) in &option_values {
                let has = key
                    .strip_prefix(&format!("{}.", c.engine))
                    .and_then(|k| c.options.get(k))
                    .is_some_and(|v| &value_text(v) == value);
                f.push(f64::from(u8::from(has)));
            }
            f
        })
        .collect();
    let dims = raw.first().map_or(0, Vec::len);
    let mut out = raw.clone();
    for d in 0..dims {
        let lo = raw.iter().map(|r| r[d]).fold(f64::INFINITY, f64::min);
        let hi = raw.iter().map(|r| r[d]).fold(f64::NEG_INFINITY, f64::max);
        for (o, r) in out.iter_mut().zip(&raw) {
            o[d] = if hi > lo {
                (r[d] - lo) / (hi - lo)
            } else {
                0.0
            };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(cpus: &[usize], capacity: Option<u32>) -> Cluster {
        Cluster {
            cpus: cpus.to_vec(),
            capacity,
            max_freq_mhz: None,
        }
    }

    #[test]
    fn core_sets_follow_the_clusters() -> crate::error::Result<()> {
        let one = core_sets(&[cluster(&[0, 1], None)], &[0, 1]);
        let labels: Vec<&str> = one.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["all", "one"]);
        let big_little = core_sets(
            &[
                cluster(&[4, 5, 6, 7], Some(1024)),
                cluster(&[0, 1, 2, 3], Some(512)),
            ],
            &[0, 1, 2, 3, 4, 5, 6, 7],
        );
        let labels: Vec<&str> = big_little.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["all", "big", "little", "one"]);
        assert_eq!(big_little[2].capacity, 0.5);
        assert_eq!(big_little[0].capacity, 0.75);
        assert_eq!(big_little[3].cpus, Some(vec![4]));
        // CPUs this process may not use are left out.
        let limited = core_sets(&[cluster(&[0, 1, 2, 3], None)], &[2]);
        let labels: Vec<&str> = limited.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["all"]);
        assert_eq!(limited[0].count, 1);
        Ok(())
    }

    #[test]
    fn core_sets_resolve_by_name_or_list() -> crate::error::Result<()> {
        let sets = core_sets(&[cluster(&[0, 1, 2, 3], None)], &[0, 1, 2, 3]);
        assert_eq!(resolve_core_set("one", &sets, &[0, 1, 2, 3])?.count, 1);
        let listed = resolve_core_set("0-1,3", &sets, &[0, 1, 2, 3])?;
        assert_eq!(listed.cpus, Some(vec![0, 1, 3]));
        assert_eq!(listed.label, "0-1,3");
        assert!(resolve_core_set("big", &sets, &[0, 1, 2, 3])
            .err()
            .unwrap_or_default()
            .contains("all, one"));
        assert!(resolve_core_set("7", &sets, &[0, 1, 2, 3])
            .err()
            .unwrap_or_default()
            .contains("may not use"));
        Ok(())
    }

    fn spec() -> SpaceSpec {
        let sets = core_sets(&[cluster(&[0, 1], None)], &[0, 1]);
        let mut options = BTreeMap::new();
        options.insert(
            "onnxruntime".to_string(),
            OptionSpace::from([
                (
                    "graph_optimization_level".to_string(),
                    vec!["basic".into(), "all".into()],
                ),
                ("spinning".to_string(), vec![true.into(), false.into()]),
            ]),
        );
        SpaceSpec {
            engines: vec!["tract".into(), "candle".into(), "onnxruntime".into()],
            threads: vec![1, 2],
            batch: vec![1, 4],
            core_sets: sets,
            devices: vec![Device::Cpu, Device::Gpu(0)],
            precisions: Vec::new(),
            options,
            flops_per_sample: 1e8,
        }
    }

    #[test]
    fn the_space_is_the_product_of_its_axes() {
        let space = spec().build();
        // tract 8 + candle 8 + onnxruntime 32 (CPU only: the GPU is onnxruntime's alone, 32
        // more); tract's default (2 threads, all cores, batch 1) is in the product already.
        assert_eq!(space.candidates.len(), 8 + 8 + 32 + 32);
        let d = &space.candidates[space.default];
        assert_eq!(d.label(), "tract t2 all b1");
        assert!(space
            .features
            .iter()
            .all(|f| f.iter().all(|x| (0.0..=1.0).contains(x))));
        // Distinct candidates, distinct features.
        for i in 0..space.features.len() {
            for j in 0..i {
                assert_ne!(space.features[i], space.features[j], "{i} {j}");
            }
        }
        // An engine with options gets its default (no options) added when it leads.
        let mut s = spec();
        s.engines = vec!["onnxruntime".into()];
        s.devices = vec![Device::Cpu];
        let space = s.build();
        assert_eq!(space.candidates.len(), 33);
        assert_eq!(
            space.candidates[space.default].label(),
            "onnxruntime t2 all b1"
        );
    }
}

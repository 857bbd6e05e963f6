//! A per-layer learned cost model: each layer (or group of layers the engine fuses) is an
//! operator template — its kind and the attributes that change how an engine runs it
//! (`conv3x3/s2`, `dw5x5/s1`, `conv1x1/s1`, `linear`, `maxpool`, `add`, …) — with its analytic
//! FLOPs and DRAM bytes. Per template and thread count, a non-negative linear model of its time
//! (a fixed cost, a cost per FLOP, a cost per byte) is fitted by least squares over every
//! profiled group; a model's latency is the sum of its groups' predictions, scaled
//! by the measured ratio of end-to-end latency to the profiled sum (the per-inference overhead
//! outside the layers, and the profiler's own). It learns from a measurement database that
//! accumulates profiles per device ([`Db`]), and predicts models it has never run.
//!
//! The profiles come from tract's node profile, or onnxruntime's op profiler through its
//! harness; what an engine fuses is measured as it runs it.

use crate::models::graph::{Model, Op};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The CPUs of a core set as profiles keep them: sorted, each once (None: every CPU).
pub fn profile_cores(cpus: Option<&[usize]>) -> Option<Vec<usize>> {
    cpus.map(|c| {
        let mut c = c.to_vec();
        c.sort_unstable();
        c.dedup();
        c
    })
}

/// Whether a layer of `kind` never leads a group: the layers an engine fuses into the one
/// before them ([`crate::models::graph::FUSED_AFTER`]), and ShuffleNet's chunks (views). tract
/// names a fused node after any of its members — often the last — so a group's time is the sum
/// over all its members.
fn follows(kind: &str) -> bool {
    kind == "ChannelSlice" || crate::models::graph::FUSED_AFTER.contains(&kind)
}

/// The operator template of one layer: its kind with the attributes that set its efficiency.
pub fn template(op: &Op) -> String {
    match op {
        Op::Conv2d {
            in_channels,
            kernel,
            stride,
            groups,
            ..
        } => {
            let family = if *groups > 1 && groups == in_channels {
                "dw"
            } else if *groups > 1 {
                "gconv"
            } else {
                "conv"
            };
            format!("{family}{}x{}/s{}", kernel[0], kernel[1], stride[0])
        }
        Op::Linear { .. } => "linear".to_string(),
        Op::MaxPool2d { .. } => "maxpool".to_string(),
        Op::AdaptiveAvgPool2d { .. } => "avgpool".to_string(),
        Op::Add => "add".to_string(),
        Op::ChannelScale => "scale".to_string(),
        Op::Concat => "concat".to_string(),
        Op::ChannelShuffle { .. } => "shuffle".to_string(),
        _ => "eltwise".to_string(),
    }
}

/// The broader family a template falls back to when it has too few samples of its own.
pub fn family(template: &str) -> &str {
    let head = template.split('/').next().unwrap_or(template);
    if let Some(k) = head.strip_prefix("dw") {
        return if k.starts_with('3') { "dw3" } else { "dw" };
    }
    if head.starts_with("conv1x1") {
        return "conv1x1";
    }
    if head.starts_with("conv") || head.starts_with("gconv") {
        return "conv";
    }
    "other"
}

/// One profiled group: its template, FLOPs, bytes and median time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The layer names joined by `+`.
    pub label: String,
    pub template: String,
    pub flops: f64,
    pub bytes: f64,
    /// Median over the profiled runs.
    pub seconds: f64,
    /// The leading layer's shape (absent in profiles written before it was kept: filled in
    /// by rebuilding the model, [`Profile::refreshed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dims: Option<Dims>,
}

/// The shape of a group's leading layer: what, beside FLOPs and bytes, sets how fast an engine
/// runs it (a depthwise layer's time follows its channel rows, not its FLOPs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dims {
    pub c_in: usize,
    pub c_out: usize,
    /// The output map's height and width (1 for a vector).
    pub h: usize,
    pub w: usize,
    pub kernel: usize,
    pub stride: usize,
    pub groups: usize,
    /// The whole model's FLOPs and DRAM bytes: the context a layer runs in (the same
    /// convolution ran 20–40 % slower inside ResNet-34 than inside ResNet-18 here, its
    /// weights competing with more of the model's for the caches).
    #[serde(default)]
    pub model_flops: u64,
    #[serde(default)]
    pub model_bytes: u64,
}

impl Dims {
    fn of(model: &Model, layer: &crate::models::graph::Layer) -> Dims {
        let input = layer
            .inputs
            .first()
            .map(|v| model.shape_of(*v).to_vec())
            .unwrap_or_default();
        let out = &layer.output_shape;
        let at = |s: &[usize], i: usize| s.get(i).copied().unwrap_or(1);
        let (kernel, stride, groups) = match &layer.op {
            Op::Conv2d {
                kernel,
                stride,
                groups,
                ..
            } => (kernel[0], stride[0], *groups),
            Op::MaxPool2d { kernel, stride, .. } => (kernel[0], stride[0], 1),
            _ => (1, 1, 1),
        };
        Dims {
            c_in: at(&input, 1),
            c_out: at(out, 1),
            h: at(out, 2),
            w: at(out, 3),
            kernel,
            stride,
            groups,
            model_flops: 0,
            model_bytes: 0,
        }
    }
}

/// One model profiled on this device: its groups and its end-to-end latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub engine: String,
    pub model: String,
    pub input: String,
    pub threads: usize,
    /// The CPUs the profile was confined to (sorted); None: every CPU this process may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    pub groups: Vec<Group>,
    /// Median end-to-end latency and its 95 % interval, and the timed runs it rests on.
    pub latency_ms: f64,
    pub latency_interval_ms: (f64, f64),
    pub runs: usize,
    /// Rounds merged into it ([`Profile::merge`]); 1 for a single measurement.
    #[serde(default = "one")]
    pub rounds: usize,
    /// Each round's median latency, when there were several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_medians_ms: Vec<f64>,
    /// The timed runs, until rounds are merged (not kept in the database).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub times_ms: Vec<f64>,
    /// The load bandwidth (bytes/s) on its threads and cores at a working set of the model's
    /// bytes, measured right after its timed runs
    /// ([`crate::collect::ceilings::stream_bandwidth`]); the median over the rounds. None in
    /// profiles written before it was measured and in those of external engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_bytes_per_s: Option<f64>,
    /// The load bandwidth (bytes/s) on its threads and cores at a working set no cache holds
    /// ([`crate::collect::ceilings::MAX_STREAM_BYTES`]), the median over the profile run
    /// that took it: where the bandwidth curve ends beyond the largest model profiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_per_s: Option<f64>,
    pub written: String,
    /// The precision its layers ran in: fp32 (`costmodel profile`), or a lower one from a
    /// sweep's record (`costmodel import`); each precision is learnt apart.
    #[serde(default = "fp32", skip_serializing_if = "is_fp32")]
    pub precision: Precision,
}

pub use crate::collect::kernels::Precision;

fn fp32() -> Precision {
    Precision::Fp32
}

fn is_fp32(p: &Precision) -> bool {
    *p == Precision::Fp32
}

fn one() -> usize {
    1
}

fn unit() -> f64 {
    1.0
}

impl Profile {
    /// Half the width of the latency's interval over the latency.
    pub fn relative_half_width(&self) -> f64 {
        let (low, high) = self.latency_interval_ms;
        (high - low) / 2.0 / self.latency_ms.max(f64::MIN_POSITIVE)
    }

    /// The profiled sum of the groups, in ms.
    pub fn layers_ms(&self) -> f64 {
        self.groups.iter().map(|g| g.seconds).sum::<f64>() * 1e3
    }

    /// One profile from several `rounds` of the same (engine, model, input, threads), each
    /// taken at another time: the median of all their timed runs, and as its interval the
    /// two-stage bootstrap over rounds, then runs within each — so a slow or fast spell of the
    /// machine that lasted a whole round widens it as much as it should; the groups' times are
    /// the median over the rounds. None for no rounds.
    pub fn merge(rounds: &[Profile]) -> Option<Profile> {
        let first = rounds.first()?;
        let repeats: Vec<Vec<f64>> = rounds.iter().map(|p| p.times_ms.clone()).collect();
        let pooled = repeats.concat();
        let mut merged = first.clone();
        if rounds.len() > 1 && pooled.len() >= 2 {
            merged.latency_ms = crate::stats::median(&pooled)?;
            merged.latency_interval_ms =
                crate::stats::median_interval_of_repeats(&repeats, crate::stats::BOOTSTRAP_ROUNDS)?;
            merged.round_medians_ms = rounds.iter().map(|p| p.latency_ms).collect();
        }
        for (i, g) in merged.groups.iter_mut().enumerate() {
            let times: Vec<f64> = rounds
                .iter()
                .filter_map(|p| p.groups.get(i))
                .filter(|o| o.label == g.label)
                .map(|o| o.seconds)
                .collect();
            g.seconds = crate::stats::median(&times).unwrap_or(g.seconds);
        }
        let streams: Vec<f64> = rounds.iter().filter_map(|p| p.stream_bytes_per_s).collect();
        merged.stream_bytes_per_s = crate::stats::median(&streams);
        let memory: Vec<f64> = rounds.iter().filter_map(|p| p.memory_bytes_per_s).collect();
        merged.memory_bytes_per_s = crate::stats::median(&memory);
        merged.runs = rounds.iter().map(|p| p.runs).sum();
        merged.rounds = rounds.len();
        merged.times_ms = Vec::new();
        merged.written = rounds
            .last()
            .map_or(first.written.clone(), |p| p.written.clone());
        Some(merged)
    }

    /// One round's profile, written now: `(model, input, threads)`, the groups, the median
    /// latency with its interval, and the timed runs it rests on.
    pub fn one_round(
        engine: &str,
        (model, input, threads): (&str, &str, usize),
        groups: Vec<Group>,
        (latency_ms, latency_interval_ms): (f64, (f64, f64)),
        times_ms: Vec<f64>,
    ) -> Profile {
        Profile {
            engine: engine.to_string(),
            model: model.to_string(),
            input: input.to_string(),
            threads,
            cores: None,
            groups,
            latency_ms,
            latency_interval_ms,
            runs: times_ms.len(),
            rounds: 1,
            round_medians_ms: Vec::new(),
            times_ms,
            stream_bytes_per_s: None,
            memory_bytes_per_s: None,
            written: crate::text::now_rfc3339(),
            precision: Precision::Fp32,
        }
    }

    /// Whether this profile is of an operator-template probe, not a model of the zoo.
    pub fn is_probe(&self) -> bool {
        probe::seed_of(&self.model).is_some() || graph_probe::seed_of(&self.model).is_some()
    }

    /// The profile with its groups described as this version describes them: template,
    /// FLOPs, bytes and [`Dims`] taken from its model built again (groups matched by their
    /// layers), so that profiles written by earlier versions (without shapes, or with another
    /// count of a group's bytes) are learnt from alike; kept as they are where the model cannot
    /// be built (an ONNX file moved since).
    pub fn refreshed(self) -> Profile {
        match groups_of(&self.model, &self.input) {
            Ok(planned) => self.described_by(&planned),
            Err(_) => self,
        }
    }

    /// [`Profile::refreshed`] from its model's groups built already (`planned`).
    pub fn described_by(mut self, planned: &[Group]) -> Profile {
        for g in &mut self.groups {
            if let Some(p) = planned.iter().find(|p| p.label == g.label) {
                g.template = p.template.clone();
                g.flops = p.flops;
                g.bytes = p.bytes;
                g.dims = p.dims;
            }
        }
        self
    }
}

/// A model's groups ([`planned_groups`]) with the profiled seconds ([`timed`]).
pub fn profile_groups(model: &Model, times: &[crate::engines::tract::LayerTime]) -> Vec<Group> {
    timed(planned_groups(model), times)
}

/// `groups` with the profiled seconds: the sum of the median times tract gave any of their
/// layers. Time tract gave no layer of the model (its own nodes) is left out; the end-to-end
/// latency keeps it.
pub fn timed(mut groups: Vec<Group>, times: &[crate::engines::tract::LayerTime]) -> Vec<Group> {
    for g in &mut groups {
        g.seconds = g
            .label
            .split('+')
            .map(crate::models::onnx_graph::source_node_name)
            .filter_map(|name| times.iter().find(|t| t.mapped && t.layer == name))
            .map(|t| t.ms_per_run / 1e3)
            .sum();
    }
    groups
}

/// The groups of zoo model, probe or ONNX file `name` at `input`, as [`CostModel::predict`]
/// sums them: a file's from its node-by-node analysis ([`files::file_groups`]; `input` is
/// `declared` for the file's own shapes, else its inputs as `models info --input` takes them,
/// space-separated), the others' from the zoo's description ([`planned_groups`]).
pub fn groups_of(name: &str, input: &str) -> Result<Vec<Group>, crate::error::BadInput> {
    if let Some(seed) = graph_probe::seed_of(name) {
        let proto = graph_probe::build(seed);
        let cost =
            crate::models::onnx_graph::analyse(&proto, name, name, &files::specs(input)?, None)
                .map_err(|e| crate::error::BadInput(e.to_string()))?;
        return Ok(files::file_groups(&cost));
    }
    if is_file(name) {
        return Ok(files::file_groups(&files::analysis(
            std::path::Path::new(name),
            input,
        )?));
    }
    Ok(planned_groups(&zoo_model(name, input)?))
}

/// The groups of a model not yet run: what [`CostModel::predict`] sums. Every layer but the
/// followers leads a group (tract fuses batch norms and activations into what comes before).
/// A group's bytes are what it moves fused: its layers' weights, what they read from outside
/// the group, and its last layer's output (what one member hands the next stays in the caches,
/// as it does in a file's groups, [`files::file_groups`]).
pub fn planned_groups(model: &Model) -> Vec<Group> {
    use crate::models::graph::ValueId;
    let costs = crate::models::cost::analyze(model);
    let tensor_bytes = |v: ValueId| -> u64 {
        model
            .shape_of(v)
            .iter()
            .fold(4u64, |acc, &d| acc.saturating_mul(d as u64))
    };
    let mut out: Vec<Group> = Vec::new();
    // The current group's first layer, and what it has moved before its last output.
    let mut first = 0usize;
    let mut moved = 0u64;
    for (i, layer) in model.layers.iter().enumerate() {
        let cost = &costs.layers[i];
        let joins = !out.is_empty() && follows(layer.op.kind());
        if !joins {
            first = i;
            moved = 0;
        }
        let external: u64 = layer
            .inputs
            .iter()
            .filter(|v| !matches!(v, ValueId::Layer(j) if (first..i).contains(j)))
            .map(|v| tensor_bytes(*v))
            .sum();
        moved = moved
            .saturating_add(cost.param_bytes)
            .saturating_add(external);
        let bytes = moved.saturating_add(cost.output_bytes);
        match out.last_mut() {
            Some(g) if joins => {
                g.label = format!("{}+{}", g.label, layer.name);
                g.flops += cost.flops as f64;
                g.bytes = bytes as f64;
            }
            _ => out.push(Group {
                label: layer.name.clone(),
                template: template(&layer.op),
                flops: cost.flops as f64,
                bytes: bytes as f64,
                seconds: 0.0,
                dims: Some(Dims::of(model, layer)),
            }),
        }
    }
    for d in out.iter_mut().filter_map(|g| g.dims.as_mut()) {
        d.model_flops = costs.total.flops;
        d.model_bytes = costs.total.dram_bytes;
    }
    out
}

/// How a profile is measured: the end-to-end latency until its median's 95 % interval is within
/// `target` of it (or `max_runs` timed runs), then `layer_runs` runs of tract's node profile.
#[derive(Debug, Clone, Copy)]
pub struct Measure {
    pub target: f64,
    pub min_runs: usize,
    pub max_runs: usize,
    pub layer_runs: usize,
}

impl Default for Measure {
    fn default() -> Self {
        Measure {
            target: 0.03,
            min_runs: 20,
            max_runs: 600,
            layer_runs: 15,
        }
    }
}

/// Profiles zoo model, probe or ONNX file `name` at `input` with tract on `threads` threads, in
/// this process (the command runs it in a worker process of its own).
pub fn measure(
    name: &str,
    input: &str,
    threads: usize,
    how: Measure,
) -> crate::error::Result<Profile> {
    use crate::engines::tract::{ModelSource, TractSession};
    if is_file(name) {
        return files::measure(std::path::Path::new(name), input, threads, how);
    }
    if let Some(seed) = graph_probe::seed_of(name) {
        // Written where tract reads files from, then profiled as a file is.
        let scratch = crate::bench::scratch_dir("edgeprof-probe-")?;
        let path = scratch.path().join(format!("{name}.onnx"));
        crate::files::write_atomic(
            &path,
            &crate::models::onnx::encode(&graph_probe::build(seed)),
        )?;
        let mut p = files::measure(&path, input, threads, how)?;
        p.model = name.to_string();
        return Ok(p);
    }
    let model = zoo_model(name, input)?;
    let seed = crate::models::onnx::DEFAULT_SEED;
    let session = TractSession::load(
        ModelSource::Zoo {
            model: &model,
            seed,
        },
        None,
        threads,
    )?;
    let x = session.make_input(seed)?;
    let (latency_ms, interval, times) =
        timed_runs(how, || Ok(session.time_one(&x)?.as_secs_f64() * 1e3))?;
    let layer_times = session.profile(&x, how.layer_runs)?;
    let groups = profile_groups(&model, &layer_times);
    Ok(Profile::one_round(
        "tract",
        (name, input, threads),
        groups,
        (latency_ms, interval),
        times,
    ))
}

/// Three warm-up runs, then timed runs until the median's 95 % interval is within
/// `how.target` of it (or `how.max_runs`): the median, its interval and the runs, in ms.
fn timed_runs(
    how: Measure,
    mut one: impl FnMut() -> crate::error::Result<f64>,
) -> crate::error::Result<(f64, (f64, f64), Vec<f64>)> {
    for _ in 0..3 {
        one()?;
    }
    let mut times: Vec<f64> = Vec::new();
    let (latency_ms, interval) = loop {
        let more = if times.is_empty() {
            how.min_runs.max(2)
        } else {
            times.len()
        };
        for _ in 0..more.min(how.max_runs.saturating_sub(times.len()).max(1)) {
            times.push(one()?);
        }
        let median = crate::stats::median(&times).unwrap_or(0.0);
        let interval = crate::stats::median_interval(&times, crate::stats::BOOTSTRAP_ROUNDS)
            .unwrap_or((median, median));
        let half = (interval.1 - interval.0) / 2.0 / median.max(f64::MIN_POSITIVE);
        if half <= how.target || times.len() >= how.max_runs {
            break (median, interval);
        }
    };
    Ok((latency_ms, interval, times))
}

// ---------------------------------------------------------------- fitting

/// The families a layer's features mark (one feature each).
const FAMILIES: [&str; 18] = [
    "dw",
    "conv1x1",
    "conv",
    "linear",
    "maxpool",
    "avgpool",
    "add",
    "scale",
    "concat",
    "shuffle",
    "eltwise",
    "deconv",
    "resize",
    "rnn",
    "matmul",
    "softmax",
    "softmax_inner",
    "norm",
];

/// A group's features for the forest: the logarithms of its FLOPs, bytes, channels in and out,
/// output map area and channel rows, its kernel, stride and groups, the whole model's FLOPs and
/// bytes, and its template's family.
/// None without [`Dims`].
pub fn features(g: &Group) -> Option<Vec<f64>> {
    let d = g.dims?;
    let ln = |v: f64| v.max(1.0).ln();
    let head = g.template.split('/').next().unwrap_or(&g.template);
    let fam = if head.starts_with("dw") {
        "dw"
    } else if head.starts_with("conv1x1") {
        "conv1x1"
    } else if head.starts_with("conv") || head.starts_with("gconv") {
        "conv"
    } else if head.starts_with("deconv") {
        "deconv"
    } else {
        head
    };
    let mut f = vec![
        ln(g.flops),
        ln(g.bytes),
        ln(d.c_in as f64),
        ln(d.c_out as f64),
        ln((d.h * d.w) as f64),
        d.kernel as f64,
        d.stride as f64,
        ln(d.groups as f64),
        ln((d.c_out * d.h) as f64),
        ln(d.model_flops as f64),
        ln(d.model_bytes as f64),
    ];
    f.extend(FAMILIES.iter().map(|k| if *k == fam { 1.0 } else { 0.0 }));
    Some(f)
}

/// The cost model of one engine, thread count, core set and precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    pub engine: String,
    /// The precision of the layers it learnt from.
    #[serde(default = "fp32", skip_serializing_if = "is_fp32")]
    pub precision: Precision,
    pub threads: usize,
    /// The CPUs its profiles were confined to; None: every CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    pub templates: BTreeMap<String, Linear>,
    pub families: BTreeMap<String, Linear>,
    pub overall: Linear,
    /// End-to-end latency over the sum of the layers' predictions, median over the zoo models
    /// it learned from (over the probes when it has none): what the engine spends outside the
    /// layers, and how far the layer model runs low or high on whole models.
    pub overhead_ratio: f64,
    /// The models it learned from (the probes counted in `probes`).
    pub models: Vec<String>,
    #[serde(default)]
    pub probes: usize,
    /// Layer groups the forest learned from.
    #[serde(default)]
    pub samples: usize,
    /// The memory hierarchy its profiles met; empty (profiles written before it was measured,
    /// external engines' profiles) weighs a group's bytes like its FLOPs ([`stream::work`]).
    #[serde(default, skip_serializing_if = "stream::Curve::is_empty")]
    pub stream: stream::Curve,
    /// What a byte read at the fastest level costs in FLOPs ([`stream::byte_weight`]).
    #[serde(default = "unit")]
    pub byte_weight: f64,
    /// Each group's time per unit of its work ([`stream::work`]: dividing by it lets the
    /// forest learn a time per unit of work, which carries over to layers larger than any it
    /// saw, where a time learnt as such would not), from its [`features`] (the per-template
    /// linear fits above serve the groups without features).
    #[serde(skip)]
    pub forest: Option<trees::Forest>,
}

impl CostModel {
    /// Fits the model of `engine` on `threads` threads on every CPU from `profiles` (other
    /// engines, thread counts and core sets are ignored). None without any profile of them.
    pub fn fit(profiles: &[&Profile], engine: &str, threads: usize) -> Option<CostModel> {
        CostModel::fit_on(profiles, engine, threads, None)
    }

    /// [`CostModel::fit`] from the profiles confined to `cores` (sorted; None: every CPU).
    pub fn fit_on(
        profiles: &[&Profile],
        engine: &str,
        threads: usize,
        cores: Option<&[usize]>,
    ) -> Option<CostModel> {
        CostModel::fit_in(profiles, (engine, threads, cores), Precision::Fp32)
    }

    /// [`CostModel::fit_on`] from the profiles whose layers ran in `precision` (the others
    /// are left out: an int8 layer's time says little of its fp32 time).
    pub fn fit_in(
        profiles: &[&Profile],
        (engine, threads, cores): (&str, usize, Option<&[usize]>),
        precision: Precision,
    ) -> Option<CostModel> {
        let mine: Vec<&&Profile> = profiles
            .iter()
            .filter(|p| {
                p.engine == engine
                    && p.threads == threads
                    && p.cores.as_deref() == cores
                    && p.precision == precision
            })
            .collect();
        if mine.is_empty() {
            return None;
        }
        let mut by_template: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
        let mut by_family: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
        let mut all = Vec::new();
        for p in &mine {
            for g in &p.groups {
                let s = (g.flops, g.bytes, g.seconds);
                by_template.entry(g.template.clone()).or_default().push(s);
                by_family
                    .entry(family(&g.template).to_string())
                    .or_default()
                    .push(s);
                all.push(s);
            }
        }
        let fitted = |m: BTreeMap<String, Vec<(f64, f64, f64)>>| -> BTreeMap<String, Linear> {
            m.into_iter()
                .filter(|(_, s)| s.len() >= MIN_SAMPLES)
                .filter_map(|(k, s)| Some((k, fit_linear(&s)?)))
                .collect()
        };
        let mut models: Vec<String> = mine
            .iter()
            .filter(|p| !p.is_probe())
            .map(|p| p.model.clone())
            .collect();
        models.sort();
        models.dedup();
        let curve = stream::Curve::of(mine.iter().map(|p| **p));
        let byte_weight = stream::byte_weight(&curve, mine.iter().flat_map(|p| &p.groups));
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for g in mine.iter().flat_map(|p| &p.groups) {
            if let (Some(f), true) = (features(g), g.seconds > 0.0) {
                x.push(f);
                y.push(g.seconds.ln() - stream::work(&curve, byte_weight, g).ln());
            }
        }
        let mut fitted_model = CostModel {
            engine: engine.to_string(),
            precision,
            threads,
            cores: cores.map(<[usize]>::to_vec),
            templates: fitted(by_template),
            families: fitted(by_family),
            overall: fit_linear(&all)?,
            overhead_ratio: 1.0,
            probes: mine.iter().filter(|p| p.is_probe()).count(),
            models,
            samples: x.len(),
            stream: curve,
            byte_weight,
            forest: trees::Forest::fit(&x, &y, trees::Grow::default()),
        };
        // Calibrated on whole models: their measured latency over the sum of the layer
        // predictions (held out on three profiles of the zoo, this predicted as many models
        // within ±10 % as the ratio to the profiled sum, or more, and more within ±20 %).
        let ratio = |p: &&&Profile| {
            let sum = fitted_model.predict(&p.groups).0;
            (sum > 0.0).then(|| p.latency_ms / sum)
        };
        let zoo: Vec<f64> = mine
            .iter()
            .filter(|p| !p.is_probe())
            .filter_map(ratio)
            .collect();
        let ratios = if zoo.is_empty() {
            mine.iter().filter_map(ratio).collect()
        } else {
            zoo
        };
        fitted_model.overhead_ratio = crate::stats::median(&ratios).unwrap_or(1.0);
        Some(fitted_model)
    }

    /// The model for one group: its template's, else its family's, else the overall one.
    fn group_model(&self, template: &str) -> (&Linear, &'static str) {
        if let Some(l) = self.templates.get(template) {
            return (l, "template");
        }
        if let Some(l) = self.families.get(family(template)) {
            return (l, "family");
        }
        (&self.overall, "overall")
    }

    /// One group's predicted seconds: the forest's, else its template's linear fit (then
    /// `true`: it fell back to the coarser model).
    pub fn group_seconds(&self, g: &Group) -> (f64, bool) {
        if let (Some(forest), Some(f)) = (&self.forest, features(g)) {
            if forest.features() == f.len() {
                let work = stream::work(&self.stream, self.byte_weight, g);
                return (forest.predict(&f).0.exp() * work, false);
            }
        }
        let (m, from) = self.group_model(&g.template);
        (m.seconds(g.flops, g.bytes).max(0.0), from != "template")
    }

    /// A model's predicted latency in ms and the groups that fell back to a coarser fit.
    pub fn predict(&self, groups: &[Group]) -> (f64, usize) {
        let mut seconds = 0.0;
        let mut fallbacks = 0;
        for g in groups {
            let (s, fell_back) = self.group_seconds(g);
            seconds += s;
            fallbacks += usize::from(fell_back);
        }
        (seconds * 1e3 * self.overhead_ratio, fallbacks)
    }

    /// [`CostModel::predict`], refused (with the reason) when the time is not a finite
    /// number, so that a NaN is never shown as a prediction (the database or the model's
    /// description holds a number out of range: bad input).
    pub fn predict_finite(&self, groups: &[Group]) -> Result<(f64, usize), crate::error::BadInput> {
        let (ms, fallbacks) = self.predict(groups);
        if ms.is_finite() && ms >= 0.0 {
            return Ok((ms, fallbacks));
        }
        Err(crate::error::BadInput(format!(
            "the cost model's prediction is not a time ({ms}): a layer's FLOPs or bytes, or \
             the fit, are out of range"
        )))
    }
}

/// The zoo model or operator probe ([`probe`]) a profile was taken of, built again at `input`
/// (CxHxW); an ONNX file's groups come from its own analysis ([`groups_of`]).
pub fn zoo_model(name: &str, input: &str) -> Result<Model, crate::error::BadInput> {
    let shape: crate::models::InputShape = input
        .parse()
        .map_err(|e| crate::error::BadInput(format!("input {input:?}: {e}")))?;
    if let Some(seed) = probe::seed_of(name) {
        return probe::build(seed, [shape.channels, shape.height, shape.width])
            .map_err(|e| crate::error::BadInput(format!("{name} at {input}: {e}")));
    }
    let params = crate::models::zoo::ModelParams {
        channels: shape.channels,
        height: shape.height,
        width: shape.width,
        ..Default::default()
    };
    crate::models::zoo::build(name, &params).map_err(|e| crate::error::BadInput(e.to_string()))
}

/// Whether a profile's model is an ONNX file (its path) rather than a zoo model or a probe.
pub fn is_file(model: &str) -> bool {
    model.ends_with(".onnx")
}

mod db;
mod eval;
mod external;
pub mod files;
pub mod graph_probe;
mod linear;
pub mod partial;
pub mod predict;
pub mod probe;
pub mod profiling;
pub mod rounds;
pub mod stream;
pub mod sweep;
#[cfg(test)]
mod tests;
pub mod trees;

pub use db::Db;
pub use eval::{files_held_out, leave_one_model_out, planned, Held};
pub use external::{measure_external, profiles_files, PROFILED_ENGINES};
pub use linear::{fit_linear, Linear, MIN_SAMPLES};
pub use stream::{footprint, measure_bandwidth};

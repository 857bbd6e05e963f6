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
//! The profiles come from tract's node profile; what tract fuses is measured as tract runs it.

use crate::models::graph::{Model, Op};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
}

/// One model profiled on this device: its groups and its end-to-end latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub engine: String,
    pub model: String,
    pub input: String,
    pub threads: usize,
    pub groups: Vec<Group>,
    /// Median end-to-end latency and its 95 % interval, and the timed runs it rests on.
    pub latency_ms: f64,
    pub latency_interval_ms: (f64, f64),
    pub runs: usize,
    pub written: String,
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
}

/// A model's groups ([`planned_groups`]) with the profiled seconds: the sum of the median
/// times tract gave any of their layers. Time tract gave no layer of the model (its own
/// nodes) is left out; the end-to-end latency keeps it.
pub fn profile_groups(model: &Model, times: &[crate::engines::tract::LayerTime]) -> Vec<Group> {
    let mut groups = planned_groups(model);
    for g in &mut groups {
        g.seconds = g
            .label
            .split('+')
            .filter_map(|name| times.iter().find(|t| t.mapped && t.layer == name))
            .map(|t| t.ms_per_run / 1e3)
            .sum();
    }
    groups
}

/// The groups of a model not yet run: what [`CostModel::predict`] sums. Every layer but the
/// followers leads a group (tract fuses batch norms and activations into what comes before).
pub fn planned_groups(model: &Model) -> Vec<Group> {
    let costs = crate::models::cost::analyze(model);
    let mut out: Vec<Group> = Vec::new();
    for (i, layer) in model.layers.iter().enumerate() {
        let cost = &costs.layers[i];
        match out.last_mut() {
            Some(g) if follows(layer.op.kind()) => {
                g.label = format!("{}+{}", g.label, layer.name);
                g.flops += cost.flops as f64;
                g.bytes += cost.dram_bytes as f64;
            }
            _ => out.push(Group {
                label: layer.name.clone(),
                template: template(&layer.op),
                flops: cost.flops as f64,
                bytes: cost.dram_bytes as f64,
                seconds: 0.0,
            }),
        }
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

/// Profiles zoo model `name` at `input` with tract on `threads` threads, in this process (the
/// command runs it in a worker process of its own).
pub fn measure(name: &str, input: &str, threads: usize, how: Measure) -> anyhow::Result<Profile> {
    use crate::engines::tract::{ModelSource, TractSession};
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
    for _ in 0..3 {
        session.time_one(&x)?;
    }
    let mut times: Vec<f64> = Vec::new();
    let (latency_ms, interval) = loop {
        let more = if times.is_empty() {
            how.min_runs.max(2)
        } else {
            times.len()
        };
        for _ in 0..more.min(how.max_runs.saturating_sub(times.len()).max(1)) {
            times.push(session.time_one(&x)?.as_secs_f64() * 1e3);
        }
        let median = crate::stats::median(&times).unwrap_or(0.0);
        let interval = crate::stats::median_interval(&times, crate::stats::BOOTSTRAP_ROUNDS)
            .unwrap_or((median, median));
        let half = (interval.1 - interval.0) / 2.0 / median.max(f64::MIN_POSITIVE);
        if half <= how.target || times.len() >= how.max_runs {
            break (median, interval);
        }
    };
    let layer_times = session.profile(&x, how.layer_runs)?;
    Ok(Profile {
        engine: "tract".to_string(),
        model: name.to_string(),
        input: input.to_string(),
        threads,
        groups: profile_groups(&model, &layer_times),
        latency_ms,
        latency_interval_ms: interval,
        runs: times.len(),
        written: crate::text::now_rfc3339(),
    })
}

// ---------------------------------------------------------------- the database

/// A device's measurement database: every profile and every tuning trial kept, one JSON line
/// each, in the cache directory beside the ceilings (`costmodel-<device key>.jsonl`).
#[derive(Debug, Clone, Default)]
pub struct Db {
    pub path: Option<PathBuf>,
    pub profiles: Vec<Profile>,
    pub trials: Vec<crate::tune::prior::TrialRecord>,
    /// Lines that did not parse, with their number.
    pub skipped: Vec<usize>,
}

/// Most bytes of a database read back.
const MAX_DB_BYTES: u64 = 256 << 20;

impl Db {
    /// The database at `path` (empty when there is none yet).
    pub fn open(path: &Path) -> Result<Db, crate::error::BadInput> {
        let text = match crate::collect::read_capped(path, MAX_DB_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(crate::error::BadInput(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        };
        let mut db = Db {
            path: Some(path.to_path_buf()),
            ..Db::default()
        };
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            if let Ok(t) = serde_json::from_str::<crate::tune::prior::TrialRecord>(line) {
                db.trials.push(t);
                continue;
            }
            match serde_json::from_str::<Profile>(line) {
                Ok(p) => db.profiles.push(p),
                Err(_) => db.skipped.push(n + 1),
            }
        }
        Ok(db)
    }

    /// This device's database in the cache directory.
    pub fn path_for_this_device() -> Option<PathBuf> {
        let dir = crate::roofline::store::cache_dir()?;
        let device = crate::collect::device::fingerprint(Path::new("/"));
        Some(dir.join(format!(
            "costmodel-{}.jsonl",
            crate::roofline::store::device_key(&device)
        )))
    }

    /// Appends `profile` (one line, flushed) and keeps it.
    pub fn append(&mut self, profile: Profile) -> anyhow::Result<()> {
        self.write_line(&profile)?;
        self.profiles.push(profile);
        Ok(())
    }

    /// Appends a tuning trial (one line, flushed) and keeps it.
    pub fn append_trial(&mut self, trial: crate::tune::prior::TrialRecord) -> anyhow::Result<()> {
        self.write_line(&trial)?;
        self.trials.push(trial);
        Ok(())
    }

    /// Appends a table's measured rows (from `edgeprof tune --exhaustive`) as trials, leaving
    /// out the rows already here (same model, input, configuration and figures): how many
    /// were added and how many were present.
    pub fn import(&mut self, table: &crate::tune::replay::Table) -> anyhow::Result<(usize, usize)> {
        let (mut added, mut present) = (0, 0);
        for row in &table.rows {
            let Some(measured) = row.measured else {
                continue;
            };
            let known = self.trials.iter().any(|t| {
                t.model == table.model
                    && t.input == table.input
                    && t.candidate == row.candidate
                    && t.measured == measured
            });
            if known {
                present += 1;
                continue;
            }
            let mut record = crate::tune::prior::TrialRecord::new(
                &table.model,
                &table.input,
                &row.candidate,
                measured,
                "table",
            );
            record.written = table.measured_at.clone();
            self.append_trial(record)?;
            added += 1;
        }
        Ok((added, present))
    }

    fn write_line(&self, value: &impl Serialize) -> anyhow::Result<()> {
        match &self.path {
            Some(path) => Db::append_to(path, value),
            None => Ok(()),
        }
    }

    /// Appends one line to the database at `path` (made with its folder when missing), flushed
    /// to the disk.
    pub fn append_to(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
        use anyhow::Context;
        use std::io::Write;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let line = serde_json::to_string(value)? + "\n";
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_data())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The latest profile of each (engine, model, input, threads).
    pub fn latest(&self) -> Vec<&Profile> {
        let mut by: BTreeMap<(String, String, String, usize), &Profile> = BTreeMap::new();
        for p in &self.profiles {
            by.insert(
                (
                    p.engine.clone(),
                    p.model.clone(),
                    p.input.clone(),
                    p.threads,
                ),
                p,
            );
        }
        by.into_values().collect()
    }
}

// ---------------------------------------------------------------- fitting

/// Samples a template needs before it is fitted on its own (else its family's, else every
/// group's model is used).
pub const MIN_SAMPLES: usize = 4;

/// A fitted time model: seconds = fixed + per_flop · FLOPs + per_byte · bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    pub fixed: f64,
    pub per_flop: f64,
    pub per_byte: f64,
    pub samples: usize,
}

impl Linear {
    pub fn seconds(&self, flops: f64, bytes: f64) -> f64 {
        self.fixed + self.per_flop * flops + self.per_byte * bytes
    }
}

/// Non-negative least squares over `samples` (flops, bytes, seconds), in seconds: the large
/// layers that make up most of a model's latency weigh most (weighing each sample by its
/// relative error instead let the many tiny layers — squeeze-and-excitation convolutions on a
/// 1×1 map — set the cost per FLOP, and predicted held-out models about half as well). An
/// active set: a coefficient that comes out negative is dropped and the rest refitted.
pub fn fit_linear(samples: &[(f64, f64, f64)]) -> Option<Linear> {
    let usable: Vec<&(f64, f64, f64)> = samples.iter().filter(|s| s.2 > 0.0).collect();
    if usable.is_empty() {
        return None;
    }
    let mut active = [true; 3];
    loop {
        let index: Vec<usize> = (0..3).filter(|&j| active[j]).collect();
        if index.is_empty() {
            return None;
        }
        let n = index.len();
        let mut a = vec![vec![0.0; n]; n];
        let mut b = vec![0.0; n];
        for (f, by, t) in &usable {
            let x = [1.0, *f, *by];
            for (r, &jr) in index.iter().enumerate() {
                b[r] += x[jr] * t;
                for (c, &jc) in index.iter().enumerate() {
                    a[r][c] += x[jr] * x[jc];
                }
            }
        }
        // Collinear features (every sample's bytes a multiple of its FLOPs): the last one
        // still active goes, and the rest are fitted.
        let Some(solved) = solve(a, b) else {
            match (1..3).rev().find(|&j| active[j]) {
                Some(j) => {
                    active[j] = false;
                    continue;
                }
                None => return None,
            }
        };
        let mut coef = [0.0; 3];
        for (r, &j) in index.iter().enumerate() {
            coef[j] = solved[r];
        }
        match (0..3)
            .filter(|&j| active[j] && coef[j] < 0.0)
            .min_by(|&x, &y| coef[x].total_cmp(&coef[y]))
        {
            Some(j) => active[j] = false,
            None => {
                return Some(Linear {
                    fixed: coef[0],
                    per_flop: coef[1],
                    per_byte: coef[2],
                    samples: usable.len(),
                })
            }
        }
    }
}

/// Solves the normal equations `a x = b` (symmetric, positive definite unless the features
/// are collinear: None then) by Cholesky, the features scaled first (FLOPs and bytes reach 1e9
/// beside a constant 1).
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    use crate::tune::gp::{backward, cholesky, forward};
    let n = b.len();
    let scale: Vec<f64> = (0..n).map(|j| a[j][j].abs().sqrt().max(1e-300)).collect();
    for (r, row) in a.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v /= scale[r] * scale[c];
        }
        b[r] /= scale[r];
    }
    // Scaled, the diagonal is 1: a pivot this small is a collinear feature.
    let l = cholesky(&a)?;
    if l.iter().enumerate().any(|(i, row)| row[i] < 1e-6) {
        return None;
    }
    let x = backward(&l, &forward(&l, &b));
    Some(x.iter().zip(&scale).map(|(x, s)| x / s).collect())
}

/// The cost model of one engine and thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    pub engine: String,
    pub threads: usize,
    pub templates: BTreeMap<String, Linear>,
    pub families: BTreeMap<String, Linear>,
    pub overall: Linear,
    /// End-to-end latency over the profiled sum of the layers (median over the models).
    pub overhead_ratio: f64,
    /// The models it learned from.
    pub models: Vec<String>,
}

impl CostModel {
    /// Fits the model of `engine` on `threads` threads from `profiles` (other engines and
    /// thread counts are ignored). None without any profile of them.
    pub fn fit(profiles: &[&Profile], engine: &str, threads: usize) -> Option<CostModel> {
        let mine: Vec<&&Profile> = profiles
            .iter()
            .filter(|p| p.engine == engine && p.threads == threads)
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
        let ratios: Vec<f64> = mine
            .iter()
            .filter(|p| p.layers_ms() > 0.0)
            .map(|p| p.latency_ms / p.layers_ms())
            .collect();
        let mut models: Vec<String> = mine.iter().map(|p| p.model.clone()).collect();
        models.sort();
        models.dedup();
        Some(CostModel {
            engine: engine.to_string(),
            threads,
            templates: fitted(by_template),
            families: fitted(by_family),
            overall: fit_linear(&all)?,
            overhead_ratio: crate::stats::median(&ratios).unwrap_or(1.0),
            models,
        })
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

    /// A model's predicted latency in ms and the groups that fell back to a broader fit.
    pub fn predict(&self, groups: &[Group]) -> (f64, usize) {
        let mut seconds = 0.0;
        let mut fallbacks = 0;
        for g in groups {
            let (m, from) = self.group_model(&g.template);
            if from != "template" {
                fallbacks += 1;
            }
            seconds += m.seconds(g.flops, g.bytes).max(0.0);
        }
        (seconds * 1e3 * self.overhead_ratio, fallbacks)
    }
}

/// One model of a leave-one-model-out evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Held {
    pub model: String,
    pub input: String,
    pub threads: usize,
    pub measured_ms: f64,
    /// The measured median's own interval, relative half-width.
    pub measured_half_width: f64,
    pub predicted_ms: f64,
    /// predicted / measured − 1.
    pub error: f64,
    /// Groups predicted from a family's or the overall fit (their template had no samples).
    pub fallbacks: usize,
}

/// The zoo model a profile was taken of, built again.
pub fn zoo_model(name: &str, input: &str) -> Result<Model, crate::error::BadInput> {
    let shape: crate::models::InputShape = input
        .parse()
        .map_err(|e| crate::error::BadInput(format!("input {input:?}: {e}")))?;
    let params = crate::models::zoo::ModelParams {
        channels: shape.channels,
        height: shape.height,
        width: shape.width,
        ..Default::default()
    };
    crate::models::zoo::build(name, &params).map_err(|e| crate::error::BadInput(e.to_string()))
}

/// Leave-one-model-out over the latest profiles of `engine`: each model predicted by a cost
/// model fitted without any of its profiles, from its layers alone ([`planned_groups`]: nothing
/// of its own profile is used).
pub fn leave_one_model_out(db: &Db, engine: &str) -> Vec<Held> {
    let latest = db.latest();
    let mut out = Vec::new();
    for p in latest.iter().filter(|p| p.engine == engine) {
        let others: Vec<&Profile> = latest
            .iter()
            .filter(|o| o.model != p.model)
            .copied()
            .collect();
        let Some(model) = CostModel::fit(&others, engine, p.threads) else {
            continue;
        };
        let groups = match zoo_model(&p.model, &p.input) {
            Ok(m) => planned_groups(&m),
            Err(_) => continue,
        };
        let (predicted_ms, fallbacks) = model.predict(&groups);
        out.push(Held {
            model: p.model.clone(),
            input: p.input.clone(),
            threads: p.threads,
            measured_ms: p.latency_ms,
            measured_half_width: p.relative_half_width(),
            predicted_ms,
            error: predicted_ms / p.latency_ms - 1.0,
            fallbacks,
        });
    }
    out
}

#[cfg(test)]
mod tests;

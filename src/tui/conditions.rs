//! The condition-selection model behind the Conditions tab: one list of choices per axis of the
//! run matrix, the measurement parameters, the metrics and the outputs, turned into a [`Config`]
//! that `edgeprof run` runs unchanged. Pure: what the machine offers comes in as [`Offer`].

use edgeprof::config::{self, Config, Device, ModelRef};
use edgeprof::models::InputShape;
use edgeprof::runner::matrix;
use std::path::{Path, PathBuf};

/// What an external framework's state reads until its interpreter has answered.
pub const FINDING_OUT: &str = "finding out whether it is set up …";

/// The `command` engine: the user's own program.
fn command_engine() -> (String, Result<String, String>) {
    (
        "command".to_string(),
        Ok("your program, named in [command]".to_string()),
    )
}

/// What this machine offers the selection: facts gathered once when the UI starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// Cores this process may use.
    pub cores: usize,
    /// Every engine edgeprof knows, with whether it can run here and why not.
    pub engines: Vec<(String, Result<String, String>)>,
    /// GPUs the telemetry sources see (their names), for the device axis and the GPU metric.
    pub gpus: Vec<String>,
    /// Why GPU telemetry is unavailable, when it is.
    pub gpu_telemetry: Result<String, String>,
    /// A power source for energy per inference, or why there is none.
    pub power: Result<String, String>,
    /// Hardware counters for the roofline, or why not (the roofline then uses analytic counts).
    pub counters: Result<String, String>,
}

impl Offer {
    /// Finds whether each engine can run here: the external frameworks' interpreters are
    /// asked (a Python start and imports, about half a second), so the UI does it after its
    /// first frame.
    pub fn ask_engines(&mut self, configured: &std::collections::BTreeMap<String, PathBuf>) {
        self.engines = Offer::engines(configured);
    }

    fn engines(
        configured: &std::collections::BTreeMap<String, PathBuf>,
    ) -> Vec<(String, Result<String, String>)> {
        use edgeprof::engines::env::Readiness;
        let mut engines: Vec<(String, Result<String, String>)> =
            edgeprof::engines::env::engines_here(configured)
                .into_iter()
                .map(|(name, r)| {
                    let state = match r {
                        Readiness::BuiltIn { .. } | Readiness::Ready(_) => Ok(r.describe()),
                        _ => Err(r.describe()),
                    };
                    (name, state)
                })
                .collect();
        engines.push(command_engine());
        engines
    }

    /// What this machine offers before the external frameworks are asked: they read
    /// "finding out …" until [`Offer::ask_engines`] answers.
    pub fn quick(root: &Path) -> Offer {
        let mut engines: Vec<(String, Result<String, String>)> = edgeprof::engines::BUILT_IN
            .iter()
            .map(|&e| {
                let version = edgeprof::engines::version(e).unwrap_or("unknown");
                (e.to_string(), Ok(format!("built in ({version})")))
            })
            .collect();
        engines.extend(
            edgeprof::engines::external::FRAMEWORKS
                .iter()
                .map(|f| (f.name.to_string(), Err(FINDING_OUT.to_string()))),
        );
        engines.push(command_engine());
        Offer {
            engines,
            ..Offer::probe_with(root, Vec::new())
        }
    }

    /// What this machine offers, found by probing it (telemetry under `root`), with `engines`.
    fn probe_with(root: &Path, engines: Vec<(String, Result<String, String>)>) -> Offer {
        use edgeprof::collect::telemetry;
        let readers = telemetry::readers(root);
        let probes: Vec<(&str, Result<String, String>)> =
            readers.iter().map(|r| (r.name(), r.probe())).collect();
        let gpu_sources: Vec<&(&str, Result<String, String>)> =
            probes.iter().filter(|(n, _)| n.contains("GPU")).collect();
        let gpus: Vec<String> = gpu_sources
            .iter()
            .filter_map(|(n, p)| p.as_ref().ok().map(|what| format!("{n}: {what}")))
            .collect();
        let gpu_telemetry = if gpus.is_empty() {
            Err(gpu_sources
                .iter()
                .filter_map(|(_, p)| p.as_ref().err().cloned())
                .collect::<Vec<_>>()
                .join("; "))
        } else {
            Ok(gpus.join("; "))
        };
        let power = probes
            .iter()
            .filter(|(n, _)| n.contains("power") || n.contains("RAPL") || n.contains("NVIDIA"))
            .find_map(|(n, p)| p.as_ref().ok().map(|what| format!("{n}: {what}")))
            .ok_or_else(|| "no power source here (INA3221 rails, RAPL or NVML)".to_string());
        Offer {
            cores: edgeprof::collect::device::available_cores(),
            engines,
            gpus,
            gpu_telemetry,
            power,
            counters: edgeprof::collect::perf::probe()
                .map(|()| "hardware counters".to_string())
                .map_err(|e| e.0),
        }
    }
}

/// The axes and settings, in the order the Conditions tab lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Engines,
    Device,
    Nodes,
    Models,
    Inputs,
    Batch,
    Threads,
    Precision,
    Parameters,
    Metrics,
    Outputs,
    Training,
}

pub const AXES: [Axis; 12] = [
    Axis::Engines,
    Axis::Device,
    Axis::Nodes,
    Axis::Models,
    Axis::Inputs,
    Axis::Batch,
    Axis::Threads,
    Axis::Precision,
    Axis::Parameters,
    Axis::Metrics,
    Axis::Outputs,
    Axis::Training,
];

impl Axis {
    pub fn title(self) -> &'static str {
        match self {
            Axis::Engines => "Frameworks",
            Axis::Device => "Device",
            Axis::Nodes => "Nodes",
            Axis::Models => "Models",
            Axis::Inputs => "Input shapes",
            Axis::Batch => "Batch sizes",
            Axis::Threads => "Threads",
            Axis::Precision => "Precision",
            Axis::Parameters => "Parameters",
            Axis::Metrics => "Metrics",
            Axis::Outputs => "Outputs",
            Axis::Training => "Training",
        }
    }
}

/// One line of a pane: a choice that can be ticked, a number that can be changed, or a fact.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub label: String,
    /// Ticked (choices), or None for lines that are not choices.
    pub ticked: Option<bool>,
    /// Greyed out: cannot be chosen here.
    pub disabled: bool,
    /// What it is, or why it is disabled.
    pub note: String,
}

/// A measurement parameter changed with + and −.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Warmup,
    Iterations,
    Repeats,
    Timeout,
    Retries,
    Cooldown,
}

pub const PARAMS: [Param; 6] = [
    Param::Warmup,
    Param::Iterations,
    Param::Repeats,
    Param::Timeout,
    Param::Retries,
    Param::Cooldown,
];

const INPUTS: [&str; 4] = ["3x32x32", "3x128x128", "3x224x224", "3x299x299"];
const BATCHES: [usize; 5] = [1, 2, 4, 8, 16];

/// The selection: a base config (as loaded) with the axes the panes edit.
#[derive(Debug, Clone)]
pub struct Conditions {
    /// Where the config came from: relative paths resolve against it; saving defaults to it.
    pub file: PathBuf,
    pub config: Config,
    pub offer: Offer,
    /// The choices each axis offers, in display order.
    models: Vec<ModelRef>,
    inputs: Vec<InputShape>,
    batches: Vec<usize>,
    threads: Vec<usize>,
    devices: Vec<Device>,
}

/// Adds the values of `extra` missing from `list`, keeping order.
fn merged<T: PartialEq + Clone>(list: Vec<T>, extra: &[T]) -> Vec<T> {
    let mut out = list;
    for v in extra {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    out
}

/// Toggles `value` in `list`, keeping the order of `all`; the last value cannot be removed.
fn toggle<T: PartialEq + Clone>(list: &mut Vec<T>, value: &T, all: &[T]) -> bool {
    if list.contains(value) {
        if list.len() == 1 {
            return false;
        }
        list.retain(|v| v != value);
    } else {
        list.push(value.clone());
        let order = |v: &T| all.iter().position(|a| a == v).unwrap_or(usize::MAX);
        list.sort_by_key(order);
    }
    true
}

impl Conditions {
    pub fn new(file: PathBuf, config: Config, offer: Offer) -> Conditions {
        let zoo: Vec<ModelRef> = edgeprof::models::zoo::zoo_names()
            .into_iter()
            .map(|n| ModelRef::Zoo(n.to_string()))
            .collect();
        let inputs: Vec<InputShape> = INPUTS.iter().filter_map(|s| s.parse().ok()).collect();
        let mut threads = vec![0, 1];
        let mut n = 2;
        while n <= offer.cores {
            threads.push(n);
            n *= 2;
        }
        if offer.cores > 1 && !threads.contains(&offer.cores) {
            threads.push(offer.cores);
        }
        let mut devices = vec![Device::Cpu];
        devices.extend((0..offer.gpus.len() as u32).map(Device::Gpu));
        // Frameworks this machine cannot run start unticked (each would only add skipped
        // rows), as long as one that can run stays.
        let mut config = config;
        let runnable = |name: &String| {
            offer
                .engines
                .iter()
                .any(|(e, state)| e == name && state.is_ok())
                && (name != "command" || config.command.is_some())
        };
        let can_run: Vec<String> = config
            .matrix
            .engines
            .iter()
            .filter(|e| runnable(e))
            .cloned()
            .collect();
        if !can_run.is_empty() {
            config.matrix.engines = can_run;
        }
        Conditions {
            models: merged(zoo, &config.matrix.models),
            inputs: merged(inputs, &config.matrix.inputs),
            batches: merged(BATCHES.to_vec(), &config.matrix.batch),
            threads: merged(threads, &config.matrix.threads),
            devices: merged(devices, &config.matrix.devices),
            file,
            config,
            offer,
        }
    }

    /// The lines of `axis`'s pane.
    pub fn items(&self, axis: Axis) -> Vec<Item> {
        let m = &self.config.matrix;
        let choice = |label: String, ticked: bool, note: String| Item {
            label,
            ticked: Some(ticked),
            disabled: false,
            note,
        };
        let fact = |label: &str, note: String| Item {
            label: label.to_string(),
            ticked: None,
            disabled: false,
            note,
        };
        match axis {
            Axis::Engines => self
                .offer
                .engines
                .iter()
                .map(|(name, state)| {
                    let command_missing = name == "command" && self.config.command.is_none();
                    let (disabled, note) = match state {
                        _ if command_missing => {
                            (true, "needs a [command] table in the config".to_string())
                        }
                        Ok(what) => (false, what.clone()),
                        Err(why) => (true, why.clone()),
                    };
                    Item {
                        label: name.clone(),
                        ticked: Some(m.engines.contains(name)),
                        disabled,
                        note,
                    }
                })
                .collect(),
            Axis::Device => self
                .devices
                .iter()
                .map(|d| {
                    let note = match d {
                        Device::Cpu => format!("{} core(s) usable", self.offer.cores),
                        Device::Gpu(n) => self
                            .offer
                            .gpus
                            .get(*n as usize)
                            .cloned()
                            .unwrap_or_else(|| "not seen on this machine".to_string()),
                    };
                    choice(d.to_string(), m.devices.contains(d), note)
                })
                .collect(),
            Axis::Nodes => {
                let mut items = vec![choice(
                    config::LOCAL_NODE.to_string(),
                    m.nodes.iter().any(|n| n == config::LOCAL_NODE),
                    "this machine".into(),
                )];
                items.extend(self.config.nodes.iter().map(|n| {
                    let port = n.port.map(|p| format!(":{p}")).unwrap_or_default();
                    choice(
                        n.name.clone(),
                        m.nodes.contains(&n.name),
                        format!("{}{port} over ssh (edgeprof nodes check)", n.destination),
                    )
                }));
                if self.config.nodes.is_empty() {
                    items.push(fact(
                        "",
                        "other boards: add [[nodes]] to the config (docs/configuration.md)".into(),
                    ));
                }
                items
            }
            Axis::Models => self
                .models
                .iter()
                .map(|r| {
                    let note = match r {
                        ModelRef::Zoo(_) => "built-in zoo".to_string(),
                        ModelRef::Onnx(_) => "ONNX file".to_string(),
                        ModelRef::Tflite(_) => "TensorFlow Lite file".to_string(),
                        ModelRef::Torch(_) => "PyTorch program".to_string(),
                    };
                    choice(r.to_string(), m.models.contains(r), note)
                })
                .collect(),
            Axis::Inputs => self
                .inputs
                .iter()
                .map(|i| choice(i.to_string(), m.inputs.contains(i), "C×H×W".into()))
                .collect(),
            Axis::Batch => self
                .batches
                .iter()
                .map(|b| choice(b.to_string(), m.batch.contains(b), String::new()))
                .collect(),
            Axis::Threads => self
                .threads
                .iter()
                .map(|&t| {
                    let label = if t == 0 {
                        "all".to_string()
                    } else {
                        t.to_string()
                    };
                    let note = if t == 0 {
                        format!("{} here", self.offer.cores)
                    } else if t > self.offer.cores {
                        "more than the cores here".to_string()
                    } else {
                        String::new()
                    };
                    choice(label, m.threads.contains(&t), note)
                })
                .collect(),
            Axis::Precision => edgeprof::collect::kernels::Precision::OF_MODELS
                .iter()
                .map(|&p| {
                    // Which ticked frameworks run it: the others skip it with their reason.
                    let runs: Vec<&str> = m
                        .engines
                        .iter()
                        .filter(|e| edgeprof::engines::precision_unsupported(e, p).is_none())
                        .map(String::as_str)
                        .collect();
                    let note = if runs.is_empty() {
                        "no ticked framework runs it".to_string()
                    } else {
                        format!("on {}", runs.join(", "))
                    };
                    choice(p.to_string(), m.precision.contains(&p), note)
                })
                .collect(),
            Axis::Parameters => PARAMS
                .iter()
                .map(|&p| fact(param_name(p), self.param_text(p)))
                .collect(),
            Axis::Metrics => {
                let always = || "always measured".to_string();
                let state = |r: &Result<String, String>| match r {
                    Ok(what) => format!("from {what}"),
                    Err(why) => format!("unavailable: {why}"),
                };
                vec![
                    fact("latency", always()),
                    fact("throughput", always()),
                    fact("CPU", always()),
                    fact("memory", always()),
                    Item {
                        disabled: self.offer.gpu_telemetry.is_err(),
                        ..fact("GPU", state(&self.offer.gpu_telemetry))
                    },
                    Item {
                        disabled: self.offer.power.is_err(),
                        ..fact("energy", state(&self.offer.power))
                    },
                    choice(
                        "roofline".into(),
                        self.config.output.roofline,
                        match &self.offer.counters {
                            Ok(_) => "points from hardware counters".into(),
                            Err(_) => "points from analytic counts (no counters here)".into(),
                        },
                    ),
                ]
            }
            Axis::Outputs => {
                let mut items = vec![fact(
                    "directory",
                    self.config.output.dir.display().to_string(),
                )];
                items.extend(config::OUTPUT_FORMATS.iter().map(|&f| {
                    choice(
                        f.to_string(),
                        self.config.output.formats.iter().any(|g| g == f),
                        match f {
                            "csv" | "json" | "md" => "summary".into(),
                            _ => "charts".into(),
                        },
                    )
                }));
                items
            }
            Axis::Training => self.training_items(),
        }
    }

    /// Ticks or unticks item `index` of `axis`; false when nothing changed (a disabled item, a
    /// fact, or the last value of an axis, which must keep one).
    pub fn toggle(&mut self, axis: Axis, index: usize) -> bool {
        let Some(item) = self.items(axis).into_iter().nth(index) else {
            return false;
        };
        // A disabled item can be unticked (a framework not set up), not ticked.
        if item.ticked.is_none() || (item.disabled && item.ticked != Some(true)) {
            return false;
        }
        let m = &mut self.config.matrix;
        match axis {
            Axis::Engines => {
                let all: Vec<String> = self.offer.engines.iter().map(|e| e.0.clone()).collect();
                toggle(&mut m.engines, &item.label, &all)
            }
            Axis::Device => toggle(&mut m.devices, &self.devices[index], &self.devices),
            Axis::Models => toggle(&mut m.models, &self.models[index], &self.models),
            Axis::Inputs => {
                // Inputs chosen here hold for ONNX files too.
                m.own_inputs.clear();
                m.inputs_given = true;
                toggle(&mut m.inputs, &self.inputs[index], &self.inputs)
            }
            Axis::Batch => toggle(&mut m.batch, &self.batches[index], &self.batches),
            Axis::Threads => toggle(&mut m.threads, &self.threads[index], &self.threads),
            Axis::Precision => {
                let all = edgeprof::collect::kernels::Precision::OF_MODELS;
                toggle(&mut m.precision, &all[index], &all)
            }
            Axis::Metrics => {
                self.config.output.roofline = !self.config.output.roofline;
                true
            }
            Axis::Outputs => {
                let all: Vec<String> = config::OUTPUT_FORMATS
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                toggle(&mut self.config.output.formats, &item.label, &all)
            }
            Axis::Nodes => {
                let mut all = vec![config::LOCAL_NODE.to_string()];
                all.extend(self.config.nodes.iter().map(|n| n.name.clone()));
                match all.get(index).cloned() {
                    Some(name) => toggle(&mut self.config.matrix.nodes, &name, &all),
                    None => false,
                }
            }
            Axis::Parameters => false,
            Axis::Training => self.training_toggle(index),
        }
    }

    /// Adds a value to an axis and ticks it: an ONNX file (Models), a C×H×W shape (Input
    /// shapes), a batch size or a thread count; what was added, or why not.
    pub fn add(&mut self, axis: Axis, text: &str) -> Result<String, edgeprof::error::BadInput> {
        let text = text.trim();
        let m = &mut self.config.matrix;
        match axis {
            Axis::Models => {
                let path = PathBuf::from(text);
                if !path.is_file() {
                    return Err(edgeprof::error::BadInput::from(format!(
                        "{text}: no such file (give the path of an .onnx model)"
                    )));
                }
                let path = std::path::absolute(&path).unwrap_or(path);
                let model = ModelRef::Onnx(path);
                if !self.models.contains(&model) {
                    self.models.push(model.clone());
                }
                if !m.models.contains(&model) {
                    m.models.push(model.clone());
                }
                Ok(format!("added {model}"))
            }
            Axis::Inputs => {
                let shape = config::check_input(text).map_err(|why| format!("{text}: {why}"))?;
                if !self.inputs.contains(&shape) {
                    self.inputs.push(shape);
                }
                m.own_inputs.clear();
                m.inputs_given = true;
                if !m.inputs.contains(&shape) {
                    m.inputs.push(shape);
                }
                Ok(format!("added {shape}"))
            }
            Axis::Batch | Axis::Threads => {
                let range = if axis == Axis::Batch {
                    config::BATCH_RANGE
                } else {
                    config::THREADS_RANGE
                };
                let n = config::check_count(text, range).map_err(|why| format!("{text}: {why}"))?;
                let (all, chosen) = if axis == Axis::Batch {
                    (&mut self.batches, &mut m.batch)
                } else {
                    (&mut self.threads, &mut m.threads)
                };
                if !all.contains(&n) {
                    all.push(n);
                    all.sort_unstable();
                }
                if !chosen.contains(&n) {
                    chosen.push(n);
                    chosen.sort_by_key(|v| all.iter().position(|a| a == v));
                }
                Ok(format!("added {n}"))
            }
            Axis::Outputs => {
                // A path typed here is where the user is, not where the config lives.
                let dir = PathBuf::from(text);
                if dir.exists() && !dir.is_dir() {
                    return Err(edgeprof::error::BadInput::from(format!(
                        "{text}: not a directory"
                    )));
                }
                let dir = std::path::absolute(&dir).unwrap_or(dir);
                let said = format!("results go under {}", dir.display());
                self.config.output.dir = dir;
                Ok(said)
            }
            _ => Err(edgeprof::error::BadInput::from(format!(
                "{} takes no new values",
                axis.title()
            ))),
        }
    }

    fn param_text(&self, p: Param) -> String {
        let s = &self.config.measure;
        match p {
            Param::Warmup => format!("{} iterations", s.warmup),
            Param::Iterations => format!("{} timed per repeat", s.iterations),
            Param::Repeats => format!("{}", s.repeats),
            Param::Timeout => format!("{} s per run", s.timeout_s),
            Param::Retries => format!("{}", s.retries),
            Param::Cooldown => format!("{} s between runs", s.cooldown_s),
        }
    }

    /// Steps parameter `p` up (`up`) or down along its ladder of usual values.
    pub fn adjust(&mut self, p: Param, up: bool) {
        let s = &mut self.config.measure;
        match p {
            Param::Warmup => s.warmup = ladder(s.warmup, &[0, 1, 2, 5, 10, 20, 50, 100, 200], up),
            Param::Iterations => {
                s.iterations = ladder(
                    s.iterations,
                    &[1, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000],
                    up,
                )
            }
            Param::Repeats => s.repeats = ladder(s.repeats, &[1, 2, 3, 5, 10, 20, 50], up),
            Param::Timeout => {
                s.timeout_s = ladder(
                    s.timeout_s as usize,
                    &[30, 60, 120, 300, 600, 1200, 3600],
                    up,
                ) as f64
            }
            Param::Retries => s.retries = ladder(s.retries, &[0, 1, 2, 3, 5, 10], up),
            Param::Cooldown => {
                s.cooldown_s = ladder(s.cooldown_s as usize, &[0, 1, 2, 5, 10, 30, 60], up) as f64
            }
        }
    }

    /// The plan of the selection: conditions to run, skipped (with reasons) and excluded.
    /// Conditions of an engine this machine cannot run (a framework not set up) are skipped,
    /// as `edgeprof run` will skip them.
    pub fn plan(&self) -> matrix::Plan {
        let mut plan = matrix::expand(&self.config);
        let blocked = |c: &matrix::Condition| {
            self.offer
                .engines
                .iter()
                .find(|(name, _)| *name == c.engine)
                .and_then(|(_, state)| state.as_ref().err().cloned())
        };
        let (run, skip): (Vec<_>, Vec<_>) =
            plan.to_run.into_iter().partition(|c| blocked(c).is_none());
        plan.to_run = run;
        for condition in skip {
            let reason = format!(
                "{}: {}",
                condition.engine,
                blocked(&condition).unwrap_or_default()
            );
            plan.skipped.push(matrix::Skipped { condition, reason });
        }
        plan
    }

    /// Estimated seconds for the whole selection on this machine.
    pub fn estimate_s(&self) -> f64 {
        matrix::estimate_seconds(&self.config, &self.plan(), self.offer.cores)
    }

    /// The selection as config text.
    pub fn to_toml(&self) -> String {
        config::to_toml(&self.config)
    }
}

/// The next value of `steps` above `v` (`up`) or below it; `v` itself at either end.
fn ladder(v: usize, steps: &[usize], up: bool) -> usize {
    if up {
        steps.iter().copied().find(|&s| s > v).unwrap_or(v)
    } else {
        steps.iter().rev().copied().find(|&s| s < v).unwrap_or(v)
    }
}

pub fn param_name(p: Param) -> &'static str {
    match p {
        Param::Warmup => "warm-up",
        Param::Iterations => "iterations",
        Param::Repeats => "repeats",
        Param::Timeout => "timeout",
        Param::Retries => "retries",
        Param::Cooldown => "cool-down",
    }
}

mod training;

#[cfg(test)]
pub mod tests;

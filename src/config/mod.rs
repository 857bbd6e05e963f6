//! Run configuration (SPEC 1.2): a TOML file whose every key is optional, resolved into a complete
//! [`Config`]. Unknown keys and bad values are errors that name the file, the line, the key path
//! and the offending value, and say what is accepted.

pub mod node_name;
pub mod tuning;

use crate::models::zoo;
use crate::models::InputShape;
use serde::Deserialize;
use std::ops::Range;
use std::path::{Path, PathBuf};
use thiserror::Error;
use toml::Spanned;

/// Engines the configuration may name, all of which this build can run: built in (tract,
/// candle), through an embedded harness in the framework's own Python environment (see
/// `engines::external`; whether it is set up here is checked when a run is planned), or
/// `command`, once a `[command]` table names the program it runs.
pub const KNOWN_ENGINES: &[&str] = &[
    "tract",
    "candle",
    "onnxruntime",
    "pytorch",
    "tensorflow",
    "tflite",
    "command",
];
/// The engines run through a Python harness (`engines::external`, whose unit tests keep the two
/// lists the same): only these take `[frameworks.NAME]` settings and `[tune.options.NAME]`.
pub const EXTERNAL_FRAMEWORKS: &[&str] = &["onnxruntime", "pytorch", "tensorflow", "tflite"];
/// The engine a config without `matrix.engines` runs: the reference that reads any ONNX file.
pub const DEFAULT_ENGINE: &str = "tract";
pub const OUTPUT_FORMATS: &[&str] = &["csv", "json", "md", "svg"];

/// A configuration error, located in its file.
#[derive(Debug, Error, PartialEq)]
#[error("{file}:{line}: {key}{}: {message}", value.as_ref().map(|v| format!(" = {v}")).unwrap_or_default())]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    /// Dotted key path, e.g. `measure.iterations` or `matrix.inputs[1]`.
    pub key: String,
    /// The offending value as written in the file.
    pub value: Option<String>,
    pub message: String,
}

/// A model named by the configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum ModelRef {
    Zoo(String),
    Onnx(PathBuf),
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelRef::Zoo(name) => f.write_str(name),
            ModelRef::Onnx(path) => write!(f, "{}", path.display()),
        }
    }
}

/// `cpu` or `gpu:N`; written as that text in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Gpu(u32),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Gpu(n) => write!(f, "gpu:{n}"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "gpu" => Ok(Device::Gpu(0)),
            _ => s
                .strip_prefix("gpu:")
                .and_then(|n| n.parse().ok())
                .map(Device::Gpu)
                .ok_or(()),
        }
    }
}

serde_as_text!(Device);

/// An `exclude` rule: a condition matching every field it names is left out of the matrix.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Exclude {
    pub engine: Option<String>,
    pub model: Option<ModelRef>,
    pub input: Option<InputShape>,
    pub batch: Option<usize>,
    pub threads: Option<usize>,
    pub device: Option<Device>,
}

/// The axes of the run matrix (SPEC 1.1).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Matrix {
    pub engines: Vec<String>,
    pub models: Vec<ModelRef>,
    pub inputs: Vec<InputShape>,
    pub batch: Vec<usize>,
    /// Thread counts; 0 means all available cores.
    pub threads: Vec<usize>,
    pub devices: Vec<Device>,
    /// CPU sets the workers are confined to (None: every CPU edgeprof may use).
    pub cores: Vec<Option<Vec<usize>>>,
    pub classes: usize,
    pub exclude: Vec<Exclude>,
    /// Where the matrix runs: `local` (this machine) and names of `[[nodes]]`; every node runs
    /// every condition (a fleet run when any is not `local`).
    pub nodes: Vec<String>,
}

/// The node name of this machine in `matrix.nodes`.
pub const LOCAL_NODE: &str = "local";

/// How each condition is measured (SPEC 1.3).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Measure {
    pub warmup: usize,
    pub warmup_seconds: f64,
    pub iterations: usize,
    pub repeats: usize,
    pub min_duration_s: f64,
    pub timeout_s: f64,
    pub retries: usize,
    pub cooldown_s: f64,
    pub sample_interval_ms: u64,
    pub seed: u64,
    /// Keep each condition's first output and compare the engines that run the same weights
    /// on the same input.
    pub check_outputs: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Output {
    pub dir: PathBuf,
    pub formats: Vec<String>,
    /// Add the roofline and its advice to the outputs (measuring the ceilings if this device has
    /// none yet).
    pub roofline: bool,
}

/// The user's own program run as the `command` engine (SPEC 2.3): it reads the worker request
/// as JSON on stdin and speaks the worker protocol on stdout.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CommandEngine {
    /// Resolved against the config file's directory when it holds a '/', else found on PATH.
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// How an external framework runs (`[frameworks.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct FrameworkSettings {
    /// The interpreter that has the framework, instead of edgeprof's environment or the
    /// system's `python3`.
    pub python: Option<PathBuf>,
    /// Options handed to the framework's harness as JSON (each harness documents its own).
    pub options: serde_json::Map<String, serde_json::Value>,
}

/// A complete configuration: every key resolved.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Config {
    pub name: String,
    pub matrix: Matrix,
    pub measure: Measure,
    pub output: Output,
    pub command: Option<CommandEngine>,
    /// Settings of the external frameworks, by engine name.
    pub frameworks: std::collections::BTreeMap<String, FrameworkSettings>,
    /// How `edgeprof tune` searches (`[tune]`).
    pub tune: Tune,
    /// Boards reached over SSH (`[[nodes]]`).
    pub nodes: Vec<Node>,
}

/// A board reached over SSH with the system's `ssh` client (`[[nodes]]`), so
/// `~/.ssh/config` applies to its destination.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Node {
    /// A short name for tables and results (default: the destination); its results directory
    /// in a fleet run is `node_name::dir_name` of it.
    pub name: String,
    /// `user@host`, `host`, or a `Host` alias of `~/.ssh/config`.
    pub destination: String,
    pub port: Option<u16>,
    /// A private key file (`ssh -i`).
    pub identity: Option<PathBuf>,
    /// The edgeprof binary on the node; `~/` is the remote home.
    pub edgeprof: String,
    /// Where runs keep their files on the node; `~/` is the remote home.
    pub workdir: String,
    /// More `ssh -o KEY=VALUE` options.
    pub ssh_options: Vec<String>,
}

/// Where `nodes install` puts edgeprof on a node, and where a node's edgeprof is looked for.
pub const DEFAULT_NODE_EDGEPROF: &str = "~/.local/bin/edgeprof";
pub const DEFAULT_NODE_WORKDIR: &str = "~/edgeprof";

/// The tuner's settings (`[tune]`, SPEC 6); command-line options override them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Tune {
    /// The model to tune (default: the matrix's first).
    pub model: Option<ModelRef>,
    /// Its input (default: the matrix's first).
    pub input: Option<InputShape>,
    /// Engines to search over (default: the matrix's).
    pub engines: Option<Vec<String>>,
    /// Most trials.
    pub budget: usize,
    pub objective: tuning::Objective,
    /// Candidates whose peak resident memory exceeds this many bytes are rejected.
    pub max_memory: Option<u64>,
    /// Thread counts (empty: 1, 2, 4, … up to the cores of this machine).
    pub threads: Vec<usize>,
    pub batch: Vec<usize>,
    /// Core sets: all, big, little, clusterN, one, or CPU lists (empty: every set this
    /// machine offers).
    pub cores: Vec<String>,
    /// Trials in a row without a 1% gain that end the search (0: never).
    pub stall: usize,
    /// Space-filling trials after the default, before the cost model chooses.
    pub initial: usize,
    /// Rounds of re-measuring the default and the best, alternately, at the end.
    pub confirm: usize,
    pub seed: u64,
    /// Framework options to search, by engine (unnamed engines get edgeprof's defaults).
    pub options: std::collections::BTreeMap<String, tuning::OptionSpace>,
}

impl Default for Tune {
    fn default() -> Self {
        Tune {
            model: None,
            input: None,
            engines: None,
            budget: 20,
            objective: tuning::Objective::Latency,
            max_memory: None,
            threads: Vec::new(),
            batch: vec![1],
            cores: Vec::new(),
            stall: 8,
            initial: 1,
            confirm: 3,
            seed: 1,
            options: std::collections::BTreeMap::new(),
        }
    }
}

impl Config {
    /// The interpreters the config names, by framework.
    pub fn interpreters(&self) -> std::collections::BTreeMap<String, PathBuf> {
        self.frameworks
            .iter()
            .filter_map(|(name, f)| f.python.clone().map(|p| (name.clone(), p)))
            .collect()
    }
}

// ------------------------------------------------------------------ the user layer

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: Option<Spanned<String>>,
    matrix: Option<RawMatrix>,
    measure: Option<RawMeasure>,
    output: Option<RawOutput>,
    command: Option<Spanned<RawCommand>>,
    frameworks: Option<std::collections::BTreeMap<String, Spanned<RawFramework>>>,
    tune: Option<RawTune>,
    nodes: Option<Vec<Spanned<RawNode>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Option<Spanned<String>>,
    destination: Option<Spanned<String>>,
    port: Option<Spanned<i64>>,
    identity: Option<Spanned<String>>,
    edgeprof: Option<Spanned<String>>,
    workdir: Option<Spanned<String>>,
    ssh_options: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTune {
    model: Option<Spanned<String>>,
    input: Option<Spanned<String>>,
    engines: Option<Spanned<Vec<Spanned<String>>>>,
    budget: Option<Spanned<i64>>,
    objective: Option<Spanned<String>>,
    max_memory: Option<Spanned<i64>>,
    threads: Option<Spanned<Vec<Spanned<i64>>>>,
    batch: Option<Spanned<Vec<Spanned<i64>>>>,
    cores: Option<Spanned<Vec<Spanned<String>>>>,
    stall: Option<Spanned<i64>>,
    initial: Option<Spanned<i64>>,
    confirm: Option<Spanned<i64>>,
    seed: Option<Spanned<i64>>,
    options: Option<std::collections::BTreeMap<String, RawOptionSpace>>,
}

/// `[tune.options.ENGINE]`: option name → the values to try.
type RawOptionSpace = std::collections::BTreeMap<String, Spanned<Vec<toml::Value>>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFramework {
    python: Option<Spanned<String>>,
    options: Option<toml::Table>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCommand {
    program: Option<Spanned<String>>,
    args: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    engines: Option<Spanned<Vec<Spanned<String>>>>,
    models: Option<Spanned<Vec<Spanned<String>>>>,
    inputs: Option<Spanned<Vec<Spanned<String>>>>,
    batch: Option<Spanned<Vec<Spanned<i64>>>>,
    threads: Option<Spanned<Vec<Spanned<i64>>>>,
    devices: Option<Spanned<Vec<Spanned<String>>>>,
    cores: Option<Spanned<Vec<Spanned<String>>>>,
    classes: Option<Spanned<i64>>,
    exclude: Option<Vec<Spanned<RawExclude>>>,
    nodes: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExclude {
    engine: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    input: Option<Spanned<String>>,
    batch: Option<Spanned<i64>>,
    threads: Option<Spanned<i64>>,
    device: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMeasure {
    warmup: Option<Spanned<i64>>,
    warmup_seconds: Option<Spanned<f64>>,
    iterations: Option<Spanned<i64>>,
    repeats: Option<Spanned<i64>>,
    min_duration_s: Option<Spanned<f64>>,
    timeout_s: Option<Spanned<f64>>,
    retries: Option<Spanned<i64>>,
    cooldown_s: Option<Spanned<f64>>,
    sample_interval_ms: Option<Spanned<i64>>,
    seed: Option<Spanned<i64>>,
    check_outputs: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawOutput {
    dir: Option<Spanned<String>>,
    formats: Option<Spanned<Vec<Spanned<String>>>>,
    roofline: Option<bool>,
}

/// Turns spans into located errors while the user layer is resolved.
struct Resolver<'a> {
    file: &'a str,
    text: &'a str,
    /// Directory of the config file: relative ONNX paths are resolved against it.
    base: &'a Path,
}

impl Resolver<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn error(&self, key: &str, span: Option<Range<usize>>, message: String) -> ConfigError {
        let value = span
            .as_ref()
            .and_then(|s| self.text.get(s.clone()))
            .map(|v| v.trim().to_string());
        ConfigError {
            file: self.file.to_string(),
            line: span.map(|s| self.line_of(s.start)).unwrap_or(1),
            key: key.to_string(),
            value: value.filter(|v| !v.is_empty()),
            message,
        }
    }

    fn at<T>(&self, key: &str, v: &Spanned<T>, message: String) -> ConfigError {
        self.error(key, Some(v.span()), message)
    }

    fn int_in(
        &self,
        key: &str,
        v: &Spanned<i64>,
        min: i64,
        max: i64,
    ) -> Result<usize, ConfigError> {
        let n = *v.get_ref();
        if n < min || n > max {
            return Err(self.at(
                key,
                v,
                format!("must be a whole number from {min} to {max}"),
            ));
        }
        usize::try_from(n).map_err(|_| self.at(key, v, format!("must be from {min} to {max}")))
    }

    fn float_in(
        &self,
        key: &str,
        v: &Spanned<f64>,
        min: f64,
        max: f64,
    ) -> Result<f64, ConfigError> {
        let x = *v.get_ref();
        if !(min..=max).contains(&x) {
            return Err(self.at(key, v, format!("must be a number from {min} to {max}")));
        }
        Ok(x)
    }

    fn non_empty<'v, T>(
        &self,
        key: &str,
        list: &'v Option<Spanned<Vec<Spanned<T>>>>,
    ) -> Result<Option<&'v [Spanned<T>]>, ConfigError> {
        match list {
            Some(items) if items.get_ref().is_empty() => Err(self.at(
                key,
                items,
                "must list at least one value (leave the key out for the default)".to_string(),
            )),
            Some(items) => Ok(Some(items.get_ref())),
            None => Ok(None),
        }
    }

    fn engine(&self, key: &str, v: &Spanned<String>) -> Result<String, ConfigError> {
        let name = v.get_ref();
        if KNOWN_ENGINES.contains(&name.as_str()) {
            Ok(name.clone())
        } else {
            Err(self.at(
                key,
                v,
                format!(
                    "unknown engine; known engines: {}",
                    KNOWN_ENGINES.join(", ")
                ),
            ))
        }
    }

    fn model(&self, key: &str, v: &Spanned<String>) -> Result<ModelRef, ConfigError> {
        let name = v.get_ref();
        if zoo::find(name).is_some() {
            return Ok(ModelRef::Zoo(name.clone()));
        }
        if name.ends_with(".onnx") {
            let path = self.base.join(name);
            return if path.is_file() {
                // One spelling of the file however it was named (`../m.onnx`, a symlink).
                Ok(ModelRef::Onnx(std::fs::canonicalize(&path).unwrap_or(path)))
            } else {
                Err(self.at(key, v, format!("no ONNX file at {}", path.display())))
            };
        }
        Err(self.at(
            key,
            v,
            format!(
                "neither a zoo model ({}) nor a path ending in .onnx",
                zoo::zoo_names().join(", ")
            ),
        ))
    }

    fn input(&self, key: &str, v: &Spanned<String>) -> Result<InputShape, ConfigError> {
        check_input(v.get_ref()).map_err(|why| self.at(key, v, why))
    }

    /// `all` (None) or a CPU list such as `0-3,6`.
    fn core_list(&self, key: &str, v: &Spanned<String>) -> Result<Option<Vec<usize>>, ConfigError> {
        let text = v.get_ref().trim();
        if text == "all" {
            return Ok(None);
        }
        let cpus = crate::collect::telemetry::cpu::parse_cpu_ids(text);
        if cpus.is_empty() || !text.chars().all(|c| c.is_ascii_digit() || ",-".contains(c)) {
            return Err(self.at(
                key,
                v,
                "must be \"all\" or a CPU list such as \"0-3\" or \"4,6\"".to_string(),
            ));
        }
        Ok(Some(cpus))
    }

    fn device(&self, key: &str, v: &Spanned<String>) -> Result<Device, ConfigError> {
        v.get_ref()
            .parse()
            .map_err(|_| self.at(key, v, "must be \"cpu\" or \"gpu:N\"".to_string()))
    }

    /// Resolves a list axis: each element through `f`, or the default when the key is absent.
    fn axis<T, U>(
        &self,
        key: &str,
        list: &Option<Spanned<Vec<Spanned<T>>>>,
        default: Vec<U>,
        f: impl Fn(&Self, &str, &Spanned<T>) -> Result<U, ConfigError>,
    ) -> Result<Vec<U>, ConfigError> {
        match self.non_empty(key, list)? {
            None => Ok(default),
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| f(self, &format!("{key}[{i}]"), v))
                .collect(),
        }
    }

    fn matrix(&self, raw: RawMatrix) -> Result<Matrix, ConfigError> {
        let engines = self.axis(
            "matrix.engines",
            &raw.engines,
            vec![DEFAULT_ENGINE.to_string()],
            Self::engine,
        )?;
        let models = self.axis(
            "matrix.models",
            &raw.models,
            ["shufflenet_v2_x0_5", "mobilenet_v2", "resnet34", "resnet50"]
                .map(|m| ModelRef::Zoo(m.to_string()))
                .to_vec(),
            Self::model,
        )?;
        let inputs = self.axis(
            "matrix.inputs",
            &raw.inputs,
            vec![InputShape::default()],
            Self::input,
        )?;
        let batch = self.axis("matrix.batch", &raw.batch, vec![1], |r, k, v| {
            r.int_in(k, v, BATCH_RANGE.0 as i64, BATCH_RANGE.1 as i64)
        })?;
        let threads = self.axis("matrix.threads", &raw.threads, vec![0], |r, k, v| {
            r.int_in(k, v, THREADS_RANGE.0 as i64, THREADS_RANGE.1 as i64)
        })?;
        let devices = self.axis(
            "matrix.devices",
            &raw.devices,
            vec![Device::Cpu],
            Self::device,
        )?;
        let cores = self.axis("matrix.cores", &raw.cores, vec![None], Self::core_list)?;
        let classes = match &raw.classes {
            Some(v) => self.int_in("matrix.classes", v, 1, 1_000_000)?,
            None => 1000,
        };
        let mut exclude = Vec::new();
        for (i, spanned_rule) in raw.exclude.unwrap_or_default().iter().enumerate() {
            let rule = spanned_rule.get_ref();
            let key = |field: &str| format!("matrix.exclude[{i}].{field}");
            let parsed = Exclude {
                engine: rule
                    .engine
                    .as_ref()
                    .map(|v| self.engine(&key("engine"), v))
                    .transpose()?,
                model: rule
                    .model
                    .as_ref()
                    .map(|v| self.model(&key("model"), v))
                    .transpose()?,
                input: rule
                    .input
                    .as_ref()
                    .map(|v| self.input(&key("input"), v))
                    .transpose()?,
                batch: rule
                    .batch
                    .as_ref()
                    .map(|v| self.int_in(&key("batch"), v, 1, zoo::MAX_BATCH as i64))
                    .transpose()?,
                threads: rule
                    .threads
                    .as_ref()
                    .map(|v| self.int_in(&key("threads"), v, 0, 1024))
                    .transpose()?,
                device: rule
                    .device
                    .as_ref()
                    .map(|v| self.device(&key("device"), v))
                    .transpose()?,
            };
            if parsed == Exclude::default() {
                return Err(self.error(
                    &format!("matrix.exclude[{i}]"),
                    Some(spanned_rule.span().start..spanned_rule.span().start),
                    "an exclude rule must name at least one of engine, model, input, batch, threads, device".to_string(),
                ));
            }
            exclude.push(parsed);
        }
        Ok(Matrix {
            engines,
            models,
            inputs,
            batch,
            threads,
            devices,
            cores,
            classes,
            exclude,
            nodes: Vec::new(),
        })
    }

    fn nodes(&self, raw: Vec<Spanned<RawNode>>) -> Result<Vec<Node>, ConfigError> {
        // Text that goes into an ssh command line: printable, one line.
        let printable = |key: &str, v: &Spanned<String>| -> Result<String, ConfigError> {
            let text = v.get_ref();
            if text.trim().is_empty() {
                return Err(self.at(key, v, "must not be empty".to_string()));
            }
            if text.chars().any(char::is_control) {
                return Err(self.at(key, v, "must be one line of printable text".to_string()));
            }
            Ok(text.clone())
        };
        let mut out: Vec<Node> = Vec::new();
        for (i, node) in raw.into_iter().enumerate() {
            let span = node.span();
            let node = node.into_inner();
            let at = |k: &str| format!("nodes[{i}].{k}");
            let Some(dest) = &node.destination else {
                return Err(self.error(
                    &at("destination"),
                    Some(span.start..span.start),
                    "missing: user@host, host, or a Host alias of ~/.ssh/config".to_string(),
                ));
            };
            let destination = printable(&at("destination"), dest)?;
            if destination.starts_with('-') || destination.chars().any(char::is_whitespace) {
                return Err(self.at(
                    &at("destination"),
                    dest,
                    "must be user@host, host or an alias: no spaces, and not starting with '-'"
                        .to_string(),
                ));
            }
            // A name given is used as a directory as it is; one taken from the destination
            // (an ssh URI, an IPv6 address) gets a safe directory of its own (node_name::dir_name).
            let name = match &node.name {
                Some(v) => {
                    let name = printable(&at("name"), v)?;
                    if let Some(why) = node_name::name_problem(&name) {
                        return Err(self.at(&at("name"), v, why));
                    }
                    name
                }
                None => destination.clone(),
            };
            if name == LOCAL_NODE {
                let v = node.name.as_ref().unwrap_or(dest);
                return Err(self.at(
                    &at("name"),
                    v,
                    format!("{LOCAL_NODE:?} names this machine in matrix.nodes: give the node another name"),
                ));
            }
            if let Some(other) = out.iter().find(|n| n.name == name) {
                let v = node.name.as_ref().unwrap_or(dest);
                return Err(self.at(
                    &at("name"),
                    v,
                    format!(
                        "another node is already called {:?} (give each a name)",
                        other.name
                    ),
                ));
            }
            let dir = node_name::dir_name(&name);
            if let Some(other) = out.iter().find(|n| node_name::dir_name(&n.name) == dir) {
                let v = node.name.as_ref().unwrap_or(dest);
                return Err(self.at(
                    &at("name"),
                    v,
                    format!(
                        "its results directory would be {dir:?}, as node {:?}'s is (give each a name)",
                        other.name
                    ),
                ));
            }
            let port = match &node.port {
                Some(v) => Some(self.int_in(&at("port"), v, 1, 65535)? as u16),
                None => None,
            };
            let identity = match &node.identity {
                Some(v) => {
                    let text = printable(&at("identity"), v)?;
                    Some(match (text.strip_prefix("~/"), std::env::var_os("HOME")) {
                        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
                        _ => self.base.join(&text),
                    })
                }
                None => None,
            };
            let edgeprof = match &node.edgeprof {
                Some(v) => printable(&at("edgeprof"), v)?,
                None => DEFAULT_NODE_EDGEPROF.to_string(),
            };
            let workdir = match &node.workdir {
                Some(v) => printable(&at("workdir"), v)?,
                None => DEFAULT_NODE_WORKDIR.to_string(),
            };
            let mut ssh_options = Vec::new();
            for (j, v) in node.ssh_options.iter().flatten().enumerate() {
                let key = format!("nodes[{i}].ssh_options[{j}]");
                let text = printable(&key, v)?;
                let well_formed = text.split_once('=').is_some_and(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric())
                });
                if !well_formed {
                    return Err(self.at(
                        &key,
                        v,
                        "must be KEY=VALUE as ssh -o takes it (e.g. \"StrictHostKeyChecking=accept-new\")"
                            .to_string(),
                    ));
                }
                ssh_options.push(text);
            }
            out.push(Node {
                name,
                destination,
                port,
                identity,
                edgeprof,
                workdir,
                ssh_options,
            });
        }
        Ok(out)
    }

    fn tune(&self, raw: RawTune) -> Result<Tune, ConfigError> {
        let d = Tune::default();
        let int = |key: &str, v: &Option<Spanned<i64>>, min: i64, max: i64, default: usize| {
            v.as_ref()
                .map(|v| self.int_in(&format!("tune.{key}"), v, min, max))
                .unwrap_or(Ok(default))
        };
        let objective = match &raw.objective {
            Some(v) => v
                .get_ref()
                .parse()
                .map_err(|e: String| self.at("tune.objective", v, e))?,
            None => d.objective,
        };
        let mut options = std::collections::BTreeMap::new();
        for (engine, table) in raw.options.unwrap_or_default() {
            if !EXTERNAL_FRAMEWORKS.contains(&engine.as_str()) {
                return Err(self.error(
                    &format!("tune.options.{engine}"),
                    None,
                    "only the external frameworks take options (tract and candle have none)"
                        .to_string(),
                ));
            }
            let mut space = tuning::OptionSpace::new();
            for (key, values) in table {
                let path = format!("tune.options.{engine}.{key}");
                if values.get_ref().is_empty() {
                    return Err(self.at(&path, &values, "must list at least one value".into()));
                }
                let list = values
                    .get_ref()
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.at(&path, &values, format!("cannot be read: {e}")))?;
                space.insert(key, list);
            }
            options.insert(engine, space);
        }
        Ok(Tune {
            model: raw
                .model
                .as_ref()
                .map(|v| self.model("tune.model", v))
                .transpose()?,
            input: raw
                .input
                .as_ref()
                .map(|v| self.input("tune.input", v))
                .transpose()?,
            engines: match self.non_empty("tune.engines", &raw.engines)? {
                Some(items) => Some(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let key = format!("tune.engines[{i}]");
                            let e = self.engine(&key, v)?;
                            if e == "command" {
                                return Err(self.at(
                                    &key,
                                    v,
                                    "the tuner searches edgeprof's own engines and frameworks, not a command".to_string(),
                                ));
                            }
                            Ok(e)
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                None => None,
            },
            budget: int("budget", &raw.budget, 1, 100_000, d.budget)?,
            objective,
            max_memory: raw
                .max_memory
                .as_ref()
                .map(|v| self.int_in("tune.max_memory", v, 1, i64::MAX).map(|n| n as u64))
                .transpose()?,
            threads: self.axis("tune.threads", &raw.threads, Vec::new(), |r, k, v| {
                r.int_in(k, v, 1, 1024)
            })?,
            batch: self.axis("tune.batch", &raw.batch, d.batch.clone(), |r, k, v| {
                r.int_in(k, v, 1, zoo::MAX_BATCH as i64)
            })?,
            cores: self.axis("tune.cores", &raw.cores, Vec::new(), |_, _, v| {
                Ok(v.get_ref().clone())
            })?,
            stall: int("stall", &raw.stall, 0, 100_000, d.stall)?,
            initial: int("initial", &raw.initial, 0, 1000, d.initial)?,
            confirm: int("confirm", &raw.confirm, 0, 100, d.confirm)?,
            seed: int("seed", &raw.seed, 0, i64::MAX, d.seed as usize)? as u64,
            options,
        })
    }

    fn measure(&self, raw: RawMeasure) -> Result<Measure, ConfigError> {
        let int = |key: &str, v: &Option<Spanned<i64>>, min: i64, max: i64, default: usize| {
            v.as_ref()
                .map(|v| self.int_in(&format!("measure.{key}"), v, min, max))
                .unwrap_or(Ok(default))
        };
        let float = |key: &str, v: &Option<Spanned<f64>>, min: f64, max: f64, default: f64| {
            v.as_ref()
                .map(|v| self.float_in(&format!("measure.{key}"), v, min, max))
                .unwrap_or(Ok(default))
        };
        Ok(Measure {
            warmup: int("warmup", &raw.warmup, 0, 1_000_000, 10)?,
            warmup_seconds: float("warmup_seconds", &raw.warmup_seconds, 0.0, 3600.0, 0.0)?,
            iterations: int("iterations", &raw.iterations, 1, 10_000_000, 100)?,
            repeats: int("repeats", &raw.repeats, 1, 1000, 5)?,
            min_duration_s: float("min_duration_s", &raw.min_duration_s, 0.0, 86_400.0, 0.0)?,
            timeout_s: float("timeout_s", &raw.timeout_s, 1.0, 86_400.0, 600.0)?,
            retries: int("retries", &raw.retries, 0, 100, 1)?,
            cooldown_s: float("cooldown_s", &raw.cooldown_s, 0.0, 3600.0, 0.0)?,
            sample_interval_ms: int(
                "sample_interval_ms",
                &raw.sample_interval_ms,
                10,
                60_000,
                500,
            )? as u64,
            seed: int(
                "seed",
                &raw.seed,
                0,
                i64::MAX,
                crate::models::onnx::DEFAULT_SEED as usize,
            )? as u64,
            check_outputs: raw.check_outputs.unwrap_or(true),
        })
    }

    fn output(&self, raw: RawOutput) -> Result<Output, ConfigError> {
        let formats = self.axis(
            "output.formats",
            &raw.formats,
            ["csv", "json", "md"].map(String::from).to_vec(),
            |r, k, v| {
                if OUTPUT_FORMATS.contains(&v.get_ref().as_str()) {
                    Ok(v.get_ref().clone())
                } else {
                    Err(r.at(
                        k,
                        v,
                        format!("unknown format; choose from {}", OUTPUT_FORMATS.join(", ")),
                    ))
                }
            },
        )?;
        let dir = match &raw.dir {
            Some(v) if v.get_ref().trim().is_empty() => {
                return Err(self.at("output.dir", v, "must not be empty".to_string()))
            }
            Some(v) => PathBuf::from(v.get_ref()),
            None => PathBuf::from("results"),
        };
        Ok(Output {
            dir,
            formats,
            roofline: raw.roofline.unwrap_or(false),
        })
    }
}

/// Finds a bare program name on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

impl Resolver<'_> {
    fn command(
        &self,
        raw: Option<Spanned<RawCommand>>,
        engines: &[String],
        raw_engines: &Option<Spanned<Vec<Spanned<String>>>>,
    ) -> Result<Option<CommandEngine>, ConfigError> {
        let Some(raw) = raw else {
            if let Some(i) = engines.iter().position(|e| e == "command") {
                let span = raw_engines
                    .as_ref()
                    .and_then(|list| list.get_ref().get(i))
                    .map(|v| v.span());
                return Err(self.error(
                    &format!("matrix.engines[{i}]"),
                    span,
                    "the command engine needs a [command] table naming the program to run"
                        .to_string(),
                ));
            }
            return Ok(None);
        };
        let span = raw.span();
        let raw = raw.into_inner();
        let Some(program) = raw.program else {
            return Err(self.error(
                "command.program",
                Some(span.start..span.start),
                "missing: name the program that speaks the worker protocol".to_string(),
            ));
        };
        let name = program.get_ref();
        let path = if name.contains('/') {
            let path = self.base.join(name);
            if !path.is_file() {
                return Err(self.at(
                    "command.program",
                    &program,
                    format!("no program at {}", path.display()),
                ));
            }
            path
        } else {
            on_path(name).ok_or_else(|| {
                self.at(
                    "command.program",
                    &program,
                    "no program of that name on PATH".to_string(),
                )
            })?
        };
        Ok(Some(CommandEngine {
            program: path,
            args: raw.args.unwrap_or_default(),
        }))
    }
}

impl Resolver<'_> {
    fn frameworks(
        &self,
        raw: Option<std::collections::BTreeMap<String, Spanned<RawFramework>>>,
    ) -> Result<std::collections::BTreeMap<String, FrameworkSettings>, ConfigError> {
        let mut out = std::collections::BTreeMap::new();
        for (name, table) in raw.unwrap_or_default() {
            let key = format!("frameworks.{name}");
            let span = table.span();
            if !EXTERNAL_FRAMEWORKS.contains(&name.as_str()) {
                return Err(self.error(
                    &key,
                    Some(span.start..span.start),
                    format!(
                        "not an external framework; the ones set up here are {}",
                        EXTERNAL_FRAMEWORKS.join(", ")
                    ),
                ));
            }
            let table = table.into_inner();
            let python = match &table.python {
                None => None,
                Some(v) => {
                    let text = v.get_ref();
                    let path = if text.contains('/') {
                        let path = self.base.join(text);
                        if !path.exists() {
                            return Err(self.at(
                                &format!("{key}.python"),
                                v,
                                format!("no interpreter at {}", path.display()),
                            ));
                        }
                        path
                    } else {
                        on_path(text).ok_or_else(|| {
                            self.at(
                                &format!("{key}.python"),
                                v,
                                "no interpreter of that name on PATH".to_string(),
                            )
                        })?
                    };
                    Some(path)
                }
            };
            let options = match table.options {
                None => serde_json::Map::new(),
                Some(t) => match serde_json::to_value(t) {
                    Ok(serde_json::Value::Object(map)) => map,
                    _ => {
                        return Err(self.error(
                            &format!("{key}.options"),
                            Some(span),
                            "options must be a table of plain values".to_string(),
                        ))
                    }
                },
            };
            out.insert(name, FrameworkSettings { python, options });
        }
        Ok(out)
    }
}

/// serde's type names in words a config author uses.
fn friendly(message: &str) -> String {
    message
        .replace("expected i64", "expected a whole number")
        .replace("expected f64", "expected a number")
        .replace("expected a sequence", "expected a list")
        .replace("invalid type: sequence", "invalid type: list")
        .replace("invalid type: map", "invalid type: table")
}

/// The name a config gets when it names none: its file stem.
fn default_name(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".to_string())
}

/// Batch sizes and thread counts a matrix may hold (threads 0: every core).
pub const BATCH_RANGE: (usize, usize) = (1, zoo::MAX_BATCH);
pub const THREADS_RANGE: (usize, usize) = (0, 1024);

/// An input shape as a config may name it, or why not (the config reader and the terminal UI
/// apply the same rules, so a saved selection always reads back).
pub fn check_input(text: &str) -> Result<InputShape, String> {
    let shape: InputShape = text
        .parse()
        .map_err(|_| "must be CxHxW, e.g. \"3x224x224\"".to_string())?;
    let edge = zoo::MIN_SPATIAL..=zoo::MAX_SPATIAL;
    if !edge.contains(&shape.height) || !edge.contains(&shape.width) {
        return Err(format!(
            "height and width must be from {} to {}",
            zoo::MIN_SPATIAL,
            zoo::MAX_SPATIAL
        ));
    }
    if shape.channels > zoo::MAX_CHANNELS {
        return Err(format!("at most {} channels", zoo::MAX_CHANNELS));
    }
    Ok(shape)
}

/// A whole number in `range`, or why not, in the words the config reader uses.
pub fn check_count(text: &str, range: (usize, usize)) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (range.0..=range.1).contains(n))
        .ok_or_else(|| format!("must be a whole number from {} to {}", range.0, range.1))
}

/// The directory a config's relative paths are read from: the file's own, canonical, so that
/// resolved paths (and the condition ids made from them) do not depend on how the config's path
/// was typed (`configs/x.toml`, `./configs/x.toml`, an absolute path on resume).
fn base_dir(file: &Path) -> PathBuf {
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::canonicalize(parent)
        .or_else(|_| std::path::absolute(parent))
        .unwrap_or_else(|_| parent.to_path_buf())
}

/// Parses and resolves configuration text; `file` names it in errors and resolves relative paths.
pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
    let file_name = file.display().to_string();
    let base = base_dir(file);
    let resolver = Resolver {
        file: &file_name,
        text,
        base: &base,
    };
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        let message = e.message().to_string();
        resolver.error(
            "TOML syntax error",
            e.span().map(|s| s.start..s.start),
            message,
        )
    })?;
    let raw: RawConfig = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        let key = if key == "." {
            "(top level)".to_string()
        } else {
            key
        };
        let message = friendly(e.inner().message());
        let mut error = resolver.error(&key, e.inner().span(), message);
        if error.message.starts_with("unknown field") {
            // The span is the key itself; repeating it as the value says nothing.
            error.value = None;
        }
        error
    })?;
    let name = match &raw.name {
        Some(v) => {
            let ok = !v.get_ref().is_empty()
                && v.get_ref()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !ok {
                return Err(resolver.at(
                    "name",
                    v,
                    "must be letters, digits, '-', '_' or '.'".to_string(),
                ));
            }
            v.get_ref().clone()
        }
        None => default_name(file),
    };
    let raw_matrix = raw.matrix.unwrap_or_default();
    let raw_engines = raw_matrix.engines.clone();
    let raw_node_axis = raw_matrix.nodes.clone();
    let mut matrix = resolver.matrix(raw_matrix)?;
    let command = resolver.command(raw.command, &matrix.engines, &raw_engines)?;
    let nodes = resolver.nodes(raw.nodes.unwrap_or_default())?;
    matrix.nodes = resolver.axis(
        "matrix.nodes",
        &raw_node_axis,
        vec![LOCAL_NODE.to_string()],
        |r, key, v| {
            let name = v.get_ref();
            if name == LOCAL_NODE || nodes.iter().any(|n| &n.name == name) {
                return Ok(name.clone());
            }
            let mut known = vec![LOCAL_NODE.to_string()];
            known.extend(nodes.iter().map(|n| n.name.clone()));
            Err(r.at(
                key,
                v,
                format!("not a node: the [[nodes]] here are {}", known.join(", ")),
            ))
        },
    )?;
    let mut seen = std::collections::BTreeSet::new();
    if let Some(list) = &raw_node_axis {
        for (i, v) in list.get_ref().iter().enumerate() {
            if !seen.insert(v.get_ref().clone()) {
                return Err(resolver.at(
                    &format!("matrix.nodes[{i}]"),
                    v,
                    "named twice".to_string(),
                ));
            }
        }
    }
    Ok(Config {
        name,
        matrix,
        measure: resolver.measure(raw.measure.unwrap_or_default())?,
        output: resolver.output(raw.output.unwrap_or_default())?,
        command,
        frameworks: resolver.frameworks(raw.frameworks)?,
        tune: resolver.tune(raw.tune.unwrap_or_default())?,
        nodes,
    })
}

/// A resolved configuration written back as config text that [`parse`] reads to the same
/// configuration (every key written out, defaults included; ONNX and program paths absolute as
/// resolved). This is how the terminal UI saves a selection.
pub fn to_toml(config: &Config) -> String {
    use toml::{Table, Value};
    let strings = |items: &mut dyn Iterator<Item = String>| -> Value {
        Value::Array(items.map(Value::String).collect())
    };
    let ints = |items: &[usize]| -> Value {
        Value::Array(items.iter().map(|&n| Value::Integer(n as i64)).collect())
    };
    let path = |p: &Path| p.display().to_string();
    let m = &config.matrix;
    let mut matrix = Table::new();
    matrix.insert("engines".into(), strings(&mut m.engines.iter().cloned()));
    matrix.insert(
        "models".into(),
        strings(&mut m.models.iter().map(|r| match r {
            ModelRef::Zoo(name) => name.clone(),
            ModelRef::Onnx(p) => path(p),
        })),
    );
    matrix.insert(
        "inputs".into(),
        strings(&mut m.inputs.iter().map(|i| i.to_string())),
    );
    matrix.insert("batch".into(), ints(&m.batch));
    matrix.insert("threads".into(), ints(&m.threads));
    matrix.insert(
        "devices".into(),
        strings(&mut m.devices.iter().map(|d| d.to_string())),
    );
    if m.cores != [None] {
        matrix.insert(
            "cores".into(),
            strings(&mut m.cores.iter().map(|c| match c {
                Some(cpus) => crate::collect::device::cpu_list(cpus),
                None => "all".to_string(),
            })),
        );
    }
    matrix.insert("classes".into(), Value::Integer(m.classes as i64));
    if m.nodes != [LOCAL_NODE] {
        matrix.insert("nodes".into(), strings(&mut m.nodes.iter().cloned()));
    }
    if !m.exclude.is_empty() {
        let rules = m.exclude.iter().map(|e| {
            let mut rule = Table::new();
            if let Some(v) = &e.engine {
                rule.insert("engine".into(), Value::String(v.clone()));
            }
            if let Some(v) = &e.model {
                let name = match v {
                    ModelRef::Zoo(name) => name.clone(),
                    ModelRef::Onnx(p) => path(p),
                };
                rule.insert("model".into(), Value::String(name));
            }
            if let Some(v) = &e.input {
                rule.insert("input".into(), Value::String(v.to_string()));
            }
            if let Some(v) = e.batch {
                rule.insert("batch".into(), Value::Integer(v as i64));
            }
            if let Some(v) = e.threads {
                rule.insert("threads".into(), Value::Integer(v as i64));
            }
            if let Some(v) = e.device {
                rule.insert("device".into(), Value::String(v.to_string()));
            }
            Value::Table(rule)
        });
        matrix.insert("exclude".into(), Value::Array(rules.collect()));
    }
    let s = &config.measure;
    let mut measure = Table::new();
    for (key, value) in [
        ("warmup", Value::Integer(s.warmup as i64)),
        ("warmup_seconds", Value::Float(s.warmup_seconds)),
        ("iterations", Value::Integer(s.iterations as i64)),
        ("repeats", Value::Integer(s.repeats as i64)),
        ("min_duration_s", Value::Float(s.min_duration_s)),
        ("timeout_s", Value::Float(s.timeout_s)),
        ("retries", Value::Integer(s.retries as i64)),
        ("cooldown_s", Value::Float(s.cooldown_s)),
        (
            "sample_interval_ms",
            Value::Integer(s.sample_interval_ms as i64),
        ),
        ("seed", Value::Integer(s.seed as i64)),
        ("check_outputs", Value::Boolean(s.check_outputs)),
    ] {
        measure.insert(key.into(), value);
    }
    let mut output = Table::new();
    output.insert("dir".into(), Value::String(path(&config.output.dir)));
    output.insert(
        "formats".into(),
        strings(&mut config.output.formats.iter().cloned()),
    );
    output.insert("roofline".into(), Value::Boolean(config.output.roofline));
    let mut top = Table::new();
    top.insert("name".into(), Value::String(config.name.clone()));
    top.insert("matrix".into(), Value::Table(matrix));
    top.insert("measure".into(), Value::Table(measure));
    top.insert("output".into(), Value::Table(output));
    if let Some(c) = &config.command {
        let mut command = Table::new();
        command.insert("program".into(), Value::String(path(&c.program)));
        command.insert("args".into(), strings(&mut c.args.iter().cloned()));
        top.insert("command".into(), Value::Table(command));
    }
    if !config.frameworks.is_empty() {
        let mut frameworks = Table::new();
        for (name, f) in &config.frameworks {
            let mut table = Table::new();
            if let Some(p) = &f.python {
                table.insert("python".into(), Value::String(path(p)));
            }
            if !f.options.is_empty() {
                if let Ok(Value::Table(options)) = Value::try_from(&f.options) {
                    table.insert("options".into(), Value::Table(options));
                }
            }
            frameworks.insert(name.clone(), Value::Table(table));
        }
        top.insert("frameworks".into(), Value::Table(frameworks));
    }
    if config.tune != Tune::default() {
        top.insert("tune".into(), tune_table(&config.tune));
    }
    if !config.nodes.is_empty() {
        let nodes = config.nodes.iter().map(|n| {
            let mut t = Table::new();
            // A name taken from the destination is left to be taken again: it need not be
            // one that may be written as a name (`ssh://pi@board:2222`).
            if n.name != n.destination {
                t.insert("name".into(), Value::String(n.name.clone()));
            }
            t.insert("destination".into(), Value::String(n.destination.clone()));
            if let Some(port) = n.port {
                t.insert("port".into(), Value::Integer(i64::from(port)));
            }
            if let Some(identity) = &n.identity {
                t.insert("identity".into(), Value::String(path(identity)));
            }
            t.insert("edgeprof".into(), Value::String(n.edgeprof.clone()));
            t.insert("workdir".into(), Value::String(n.workdir.clone()));
            if !n.ssh_options.is_empty() {
                t.insert(
                    "ssh_options".into(),
                    strings(&mut n.ssh_options.iter().cloned()),
                );
            }
            Value::Table(t)
        });
        top.insert("nodes".into(), Value::Array(nodes.collect()));
    }
    format!(
        "# Written by edgeprof {}; run it with: edgeprof run FILE\n{}",
        env!("CARGO_PKG_VERSION"),
        toml::to_string(&top).unwrap_or_default()
    )
}

/// The `[tune]` table of a config, every key written out.
fn tune_table(t: &Tune) -> toml::Value {
    use toml::{Table, Value};
    let model_name = |r: &ModelRef| match r {
        ModelRef::Zoo(name) => name.clone(),
        ModelRef::Onnx(p) => p.display().to_string(),
    };
    let ints =
        |items: &[usize]| Value::Array(items.iter().map(|&n| Value::Integer(n as i64)).collect());
    let mut table = Table::new();
    if let Some(m) = &t.model {
        table.insert("model".into(), Value::String(model_name(m)));
    }
    if let Some(i) = &t.input {
        table.insert("input".into(), Value::String(i.to_string()));
    }
    if let Some(e) = &t.engines {
        table.insert(
            "engines".into(),
            Value::Array(e.iter().cloned().map(Value::String).collect()),
        );
    }
    table.insert("budget".into(), Value::Integer(t.budget as i64));
    table.insert("objective".into(), Value::String(t.objective.to_string()));
    if let Some(m) = t.max_memory {
        table.insert("max_memory".into(), Value::Integer(m as i64));
    }
    if !t.threads.is_empty() {
        table.insert("threads".into(), ints(&t.threads));
    }
    table.insert("batch".into(), ints(&t.batch));
    if !t.cores.is_empty() {
        table.insert(
            "cores".into(),
            Value::Array(t.cores.iter().cloned().map(Value::String).collect()),
        );
    }
    table.insert("stall".into(), Value::Integer(t.stall as i64));
    table.insert("initial".into(), Value::Integer(t.initial as i64));
    table.insert("confirm".into(), Value::Integer(t.confirm as i64));
    table.insert("seed".into(), Value::Integer(t.seed as i64));
    if !t.options.is_empty() {
        if let Ok(Value::Table(options)) = Value::try_from(&t.options) {
            table.insert("options".into(), Value::Table(options));
        }
    }
    Value::Table(table)
}

/// Error reading a config file (as opposed to its content).
#[derive(Debug, Error)]
#[error("cannot read config {}: {reason}", path.display())]
pub struct ConfigReadError {
    pub path: PathBuf,
    pub reason: String,
}

/// Most bytes of a configuration file. Real ones are a few KiB; parsing holds many times a
/// file's size (spans, keys, the resolved matrix), so a file given by mistake (a log, a model)
/// is refused by its size rather than exhausting memory.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// A configuration file's text, refused when larger than [`MAX_CONFIG_BYTES`] (the error names
/// the file, its size and the limit) or not UTF-8.
pub fn read_text(path: &Path) -> Result<String, ConfigReadError> {
    crate::collect::read_capped(path, MAX_CONFIG_BYTES).map_err(|e| ConfigReadError {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Reads and resolves a configuration file.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text = read_text(path)?;
    Ok(parse(&text, path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Config, ConfigError> {
        parse(text, Path::new("test.toml"))
    }

    #[test]
    fn empty_config_resolves_to_documented_defaults() {
        let Ok(c) = parse_str("") else {
            panic!("empty config rejected")
        };
        assert_eq!(c.name, "test");
        assert_eq!(c.matrix.engines, vec!["tract"]);
        assert_eq!(c.matrix.models.len(), 4);
        assert_eq!(c.matrix.inputs, vec![InputShape::default()]);
        assert_eq!(
            (c.matrix.batch.clone(), c.matrix.threads.clone()),
            (vec![1], vec![0])
        );
        assert_eq!(c.measure.iterations, 100);
        assert_eq!(c.measure.repeats, 5);
        assert_eq!(c.measure.sample_interval_ms, 500);
        assert_eq!(c.output.dir, PathBuf::from("results"));
    }

    #[test]
    fn written_configs_read_back_the_same() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let texts = [
            (
                dir.join("default.toml"),
                include_str!("../../configs/default.toml").to_string(),
            ),
            // A config whose path was typed relative to where the user stands (as the terminal
            // UI's starting config is): its resolved paths must not stay relative to that place.
            (
                PathBuf::from("tests/fixtures/workers/relative.toml"),
                "[command]\nprogram = \"./slow.sh\"\n[matrix]\n\
                 models = [\"../onnx/two_inputs.onnx\"]\n"
                    .to_string(),
            ),
            (
                dir.join("command-example.toml"),
                include_str!("../../configs/command-example.toml").to_string(),
            ),
            (
                dir.join("x.toml"),
                "name = \"x\"\n[matrix]\nthreads = [1, 2]\ndevices = [\"cpu\", \"gpu:1\"]\n\
                 [[matrix.exclude]]\nthreads = 2\nmodel = \"resnet34\"\n[measure]\ncooldown_s = 1.5\n\
                 [output]\nroofline = true\nformats = [\"svg\"]\n"
                    .to_string(),
            ),
            (
                dir.join("f.toml"),
                "[matrix]\nengines = [\"onnxruntime\", \"pytorch\"]\n[measure]\ncheck_outputs = false\n\
                 [frameworks.pytorch]\npython = \"sh\"\noptions = { mode = \"torchscript\" }\n\
                 [frameworks.onnxruntime.options]\ngraph_optimization_level = \"basic\"\n\
                 spinning = false\ninter_op_threads = 2\n"
                    .to_string(),
            ),
            (
                dir.join("t.toml"),
                "[matrix]\ncores = [\"all\", \"0-1\", \"3,5\"]\n[tune]\nmodel = \"resnet34\"\n\
                 input = \"3x64x64\"\nengines = [\"tract\", \"onnxruntime\"]\nbudget = 9\n\
                 objective = \"p99\"\nmax_memory = 1000000\nthreads = [1, 3]\nbatch = [1, 2]\n\
                 cores = [\"big\", \"0-1\"]\nstall = 0\ninitial = 3\nconfirm = 0\nseed = 4\n\
                 [tune.options.onnxruntime]\nspinning = [true, false]\n\
                 graph_optimization_level = [\"basic\"]\n"
                    .to_string(),
            ),
            (
                dir.join("n.toml"),
                "[[nodes]]\ndestination = \"pi@10.0.0.2\"\n[[nodes]]\nname = \"orin\"\n\
                 destination = \"orin\"\nport = 2222\nidentity = \"/keys/id_ed25519\"\n\
                 edgeprof = \"/opt/edgeprof/edgeprof\"\nworkdir = \"~/runs\"\n\
                 ssh_options = [\"StrictHostKeyChecking=accept-new\"]\n\
                 [[nodes]]\ndestination = \"ssh://pi@board:2222\"\n"
                    .to_string(),
            ),
        ];
        for (file, text) in texts {
            let first = match parse(&text, &file) {
                Ok(c) => c,
                Err(e) => panic!("{}: {e}", file.display()),
            };
            let written = to_toml(&first);
            // Written elsewhere: nothing in it may depend on the original file's directory.
            let second = match parse(&written, Path::new("/elsewhere/saved.toml")) {
                Ok(c) => c,
                Err(e) => panic!("{written}\n{e}"),
            };
            assert_eq!(first, second, "{written}");
        }
    }

    #[test]
    fn nodes_take_defaults_and_names() {
        let Ok(c) = parse_str("[[nodes]]\ndestination = \"pi@10.0.0.2\"\n") else {
            panic!("refused")
        };
        assert_eq!(
            c.nodes,
            vec![Node {
                name: "pi@10.0.0.2".into(),
                destination: "pi@10.0.0.2".into(),
                port: None,
                identity: None,
                edgeprof: DEFAULT_NODE_EDGEPROF.into(),
                workdir: DEFAULT_NODE_WORKDIR.into(),
                ssh_options: Vec::new(),
            }]
        );
        assert!(parse_str("[[nodes]]\ndestination = \"a b\"\n").is_err());
        assert!(parse_str("[[nodes]]\ndestination = \"pi\"\nworkdir = \"a\\nb\"\n").is_err());
        assert!(parse_str("[[nodes]]\ndestination = \"pi\"\nport = 70000\n").is_err());
    }

    /// A node's name is its results directory in a fleet run: one plain path component.
    #[test]
    fn node_names_that_would_not_be_one_plain_directory_are_refused_where_written() {
        for (name, why) in [
            ("..", "must not start with '.'"),
            (".", "must not start with '.'"),
            (".hidden", "must not start with '.'"),
            ("../../x", "must be letters, digits"),
            ("/etc", "must be letters, digits"),
            ("fleet.json", "the fleet run's own file"),
        ] {
            let text = format!("[[nodes]]\ndestination = \"pi\"\nname = \"{name}\"\n");
            match parse_str(&text) {
                Ok(_) => panic!("{name:?} accepted"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(&format!("test.toml:3: nodes[0].name = {name:?}")),
                        "{e}"
                    );
                    assert!(e.contains(why), "{name:?}: {e}");
                }
            }
        }
        let long = "n".repeat(101);
        assert!(parse_str(&format!(
            "[[nodes]]\ndestination = \"pi\"\nname = \"{long}\"\n"
        ))
        .is_err());
        // A destination (an ssh URI, an IPv6 address) names its node as it is; two whose
        // directories would be the same need names.
        let Ok(c) = parse_str("[[nodes]]\ndestination = \"ssh://pi@board:2222\"\n") else {
            panic!("refused")
        };
        assert_eq!(c.nodes[0].name, "ssh://pi@board:2222");
        match parse_str("[[nodes]]\ndestination = \"a:b\"\n[[nodes]]\ndestination = \"a_b\"\n") {
            Ok(_) => panic!("two nodes share a results directory"),
            Err(e) => assert!(
                e.to_string()
                    .contains("its results directory would be \"a_b\", as node \"a:b\"'s is"),
                "{e}"
            ),
        }
    }

    #[test]
    fn core_sets_are_an_axis_and_tune_settings_resolve() {
        let Ok(c) = parse_str(
            "[matrix]\ncores = [\"all\", \"2-3\"]\n[tune]\nobjective = \"throughput\"\n\
             [tune.options.pytorch]\nmode = [\"eager\"]\n",
        ) else {
            panic!("refused")
        };
        assert_eq!(c.matrix.cores, vec![None, Some(vec![2, 3])]);
        assert_eq!(c.tune.objective, tuning::Objective::Throughput);
        assert_eq!(c.tune.budget, Tune::default().budget);
        assert_eq!(
            c.tune.options["pytorch"]["mode"],
            vec![serde_json::json!("eager")]
        );
        for (text, key, message) in [
            (
                "[matrix]\ncores = [\"some\"]\n",
                "matrix.cores[0]",
                "CPU list",
            ),
            (
                "[tune]\nobjective = \"fast\"\n",
                "tune.objective",
                "latency, p99 or throughput",
            ),
            (
                "[tune]\nengines = [\"command\"]\n",
                "tune.engines[0]",
                "not a command",
            ),
            (
                "[tune.options.tract]\nx = [1]\n",
                "tune.options.tract",
                "only the external",
            ),
            (
                "[tune.options.onnxruntime]\nspinning = []\n",
                "tune.options.onnxruntime.spinning",
                "at least one",
            ),
            ("[tune]\nbudget = 0\n", "tune.budget", "from 1"),
            ("[tune]\nthreads = [0]\n", "tune.threads[0]", "from 1"),
            ("[tune]\nbudgett = 3\n", "tune.budgett", "unknown field"),
        ] {
            let Err(e) = parse_str(text) else {
                panic!("{text} accepted")
            };
            assert_eq!(e.key, key, "{text}: {e}");
            assert!(e.message.contains(message), "{text}: {e}");
        }
    }

    #[test]
    fn errors_name_line_key_and_value() {
        let text = "name = \"x\"\n\n[measure]\niterations = 0\n";
        let Err(e) = parse_str(text) else {
            panic!("accepted")
        };
        assert_eq!(e.line, 4);
        assert_eq!(e.key, "measure.iterations");
        assert_eq!(e.value.as_deref(), Some("0"));
        assert_eq!(
            e.to_string(),
            "test.toml:4: measure.iterations = 0: must be a whole number from 1 to 10000000"
        );
        let Err(e) = parse_str("[matrix]\ninputs = [\"3x32x32\", \"3x16x16\"]\n") else {
            panic!("accepted")
        };
        assert_eq!((e.line, e.key.as_str()), (2, "matrix.inputs[1]"));
        assert_eq!(e.value.as_deref(), Some("\"3x16x16\""));
        let Err(e) = parse_str("[measure]\niteratons = 5\n") else {
            panic!("accepted")
        };
        assert_eq!((e.line, e.key.as_str()), (2, "measure.iteratons"));
        assert!(e.message.contains("unknown field"), "{e}");
    }

    #[test]
    fn framework_tables_name_known_frameworks_and_real_interpreters() {
        let Ok(c) =
            parse_str("[frameworks.tensorflow]\noptions = { xla = true, mode = \"function\" }\n")
        else {
            panic!("rejected")
        };
        let tf = c.frameworks.get("tensorflow").cloned().unwrap_or_default();
        assert_eq!(tf.python, None);
        assert_eq!(tf.options.get("xla"), Some(&serde_json::Value::Bool(true)));
        assert!(c.interpreters().is_empty());
        assert!(c.measure.check_outputs);
        let Err(e) = parse_str("\n[frameworks.caffe]\npython = \"sh\"\n") else {
            panic!("accepted")
        };
        assert_eq!((e.line, e.key.as_str()), (2, "frameworks.caffe"));
        assert!(
            e.message
                .contains("onnxruntime, pytorch, tensorflow, tflite"),
            "{e}"
        );
        let Err(e) = parse_str("[frameworks.pytorch]\npython = \"./no/such/python\"\n") else {
            panic!("accepted")
        };
        assert_eq!((e.line, e.key.as_str()), (2, "frameworks.pytorch.python"));
        assert!(e.message.starts_with("no interpreter at"), "{e}");
        let Err(e) = parse_str("[frameworks.pytorch]\npython = \"no-such-python-here\"\n") else {
            panic!("accepted")
        };
        assert!(e.message.contains("on PATH"), "{e}");
        let Err(e) = parse_str("[frameworks.pytorch]\npyhton = \"python3\"\n") else {
            panic!("accepted")
        };
        assert!(e.message.contains("unknown field"), "{e}");
    }

    #[test]
    fn devices_parse() {
        assert_eq!("cpu".parse(), Ok(Device::Cpu));
        assert_eq!("gpu:1".parse(), Ok(Device::Gpu(1)));
        assert_eq!("gpu".parse(), Ok(Device::Gpu(0)));
        assert_eq!("tpu".parse::<Device>(), Err(()));
    }
}

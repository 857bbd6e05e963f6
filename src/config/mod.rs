//! Run configuration: a TOML file whose every key is optional, resolved into a complete
//! [`Config`]. Unknown keys and bad values are errors that name the file, the line, the key path
//! and the offending value, and say what is accepted.

pub mod node_name;
mod raw;
mod resolve;
mod train;
pub mod tuning;
pub use train::{Train, FRAMEWORKS as TRAIN_FRAMEWORKS};
mod write;

use raw::RawConfig;
use resolve::Resolver;
pub use write::to_toml;

use crate::error::BadInput;
use crate::models::zoo;
use crate::models::InputShape;
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
    /// A TensorFlow Lite file, run as it is on the tflite engine at the inputs it declares.
    Tflite(PathBuf),
    /// A PyTorch program (TorchScript, or an exported program), run as it is on the pytorch
    /// engine at the inputs given to it (it declares none).
    Torch(PathBuf),
}

/// Whether `name` names a PyTorch program by its extension (`.pt`, `.pth`, `.pt2`, `.ptl`,
/// `.jit`, `.torchscript`).
pub fn is_torch_program(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".pt", ".pth", ".pt2", ".ptl", ".jit", ".torchscript"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelRef::Zoo(name) => f.write_str(name),
            ModelRef::Onnx(path) | ModelRef::Tflite(path) | ModelRef::Torch(path) => {
                write!(f, "{}", path.display())
            }
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
    pub precision: Option<crate::collect::kernels::Precision>,
}

/// The axes of the run matrix.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Matrix {
    pub engines: Vec<String>,
    pub models: Vec<ModelRef>,
    pub inputs: Vec<InputShape>,
    /// Whether the config gives image shapes (else `inputs` holds the default for the zoo's
    /// models and ONNX files run at their own shapes).
    #[serde(skip)]
    pub inputs_given: bool,
    /// ONNX files' own image shapes (their first input's C×H×W where the file fixes it), which
    /// they run at when the config gives no `matrix.inputs`; empty when it gives some.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub own_inputs: std::collections::BTreeMap<PathBuf, InputShape>,
    /// Sets of an ONNX file's inputs by name (`input=1x512 state=2x1x128 sr=int64:16000`, a
    /// file's values as `NAME=@/absolute/path.npy`), as `matrix.inputs` gives them, each given to
    /// one model when it names it first (`/path/rec.onnx: x=1x3x48x320`, see [`split_named`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub named_inputs: Vec<String>,
    /// The sets of `named_inputs` each ONNX file runs at: those whose every name is an input of
    /// the file (a file with none runs at `inputs`, or its own shape).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub named_for: std::collections::BTreeMap<PathBuf, Vec<String>>,
    pub batch: Vec<usize>,
    /// Thread counts; 0 means all available cores.
    pub threads: Vec<usize>,
    pub devices: Vec<Device>,
    /// The precisions models run in (fp32 unless the config says otherwise); each engine runs
    /// those it can and the plan says why it skips the rest.
    pub precision: Vec<crate::collect::kernels::Precision>,
    /// CPU sets the workers are confined to (None: every CPU edgeprof may use).
    pub cores: Vec<Option<Vec<usize>>>,
    pub classes: usize,
    pub exclude: Vec<Exclude>,
    /// Where the matrix runs: `local` (this machine) and names of `[[nodes]]`; every node runs
    /// every condition (a fleet run when any is not `local`).
    pub nodes: Vec<String>,
}

impl Matrix {
    /// The inputs `model` runs at, each an image shape or a set of inputs by name: an ONNX
    /// file's sets by name where the config gives some for it, else its own shape when the
    /// config gives no inputs, else `matrix.inputs`.
    pub fn inputs_of(&self, model: &ModelRef) -> Vec<(InputShape, Option<String>)> {
        match model {
            ModelRef::Onnx(path) | ModelRef::Torch(path) if self.named_for.contains_key(path) => {
                self.named_for[path]
                    .iter()
                    .map(|n| (InputShape::default(), Some(n.clone())))
                    .collect()
            }
            ModelRef::Onnx(path) if self.own_inputs.contains_key(path) => {
                vec![(self.own_inputs[path], None)]
            }
            // Runs at the inputs it declares: one condition per batch.
            ModelRef::Tflite(_) => vec![(InputShape::default(), None)],
            _ => self.inputs.iter().map(|&i| (i, None)).collect(),
        }
    }
}

/// A set of inputs by name as `matrix.inputs` keeps it: the model it is given to, when it
/// names one (`/path/m.onnx: x=1x3x48x320`), and the set itself.
pub fn split_named(text: &str) -> (Option<PathBuf>, String) {
    match text.split_once(": ") {
        Some((model, set)) if model.ends_with(".onnx") || is_torch_program(model) => {
            (Some(PathBuf::from(model)), set.trim().to_string())
        }
        _ => (None, text.to_string()),
    }
}

/// The inputs of a set given by name (`input=1x512 state=2x1x128`), as `models info --input`
/// takes them one by one.
pub fn named_specs(text: &str) -> Result<Vec<crate::models::onnx_graph::InputSpec>, BadInput> {
    text.split_whitespace()
        .map(|spec| {
            let parsed: crate::models::onnx_graph::InputSpec =
                spec.parse().map_err(|e| BadInput(format!("{e}")))?;
            if parsed.name.is_none() {
                return Err(BadInput(format!(
                    "{spec:?} has no name: in a set of inputs by name each is NAME=SPEC"
                )));
            }
            Ok(parsed)
        })
        .collect()
}

/// The batch a set of inputs by name is bound with: the batch axis binds open leading
/// dimensions only beyond its default of 1 (a set gives its own leading dimensions, such as a
/// recurrent state's 2).
pub fn named_batch(named: Option<&str>, batch: usize) -> Option<usize> {
    (named.is_none() || batch != 1).then_some(batch)
}

/// The node name of this machine in `matrix.nodes`.
pub const LOCAL_NODE: &str = "local";

/// `measure.processes` when the config does not say: a condition's repeats run in up to three
/// worker processes, so that its interval sees how much processes differ.
pub const DEFAULT_PROCESSES: usize = 3;

/// How each condition is measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Measure {
    pub warmup: usize,
    pub warmup_seconds: f64,
    pub iterations: usize,
    pub repeats: usize,
    /// The worker processes a condition's repeats are spread over (each loads the model and
    /// warms up anew), so that the interval of the median also covers what differs between two
    /// processes: memory layout, thread placement, the moment. At most `repeats`.
    pub processes: usize,
    pub min_duration_s: f64,
    pub timeout_s: f64,
    pub retries: usize,
    pub cooldown_s: f64,
    pub sample_interval_ms: u64,
    pub seed: u64,
    /// Keep each condition's first output and compare the engines that run the same weights
    /// on the same input.
    pub check_outputs: bool,
    /// Whether iterations flagged as outliers enter the mean (keep, the default) or not.
    pub outliers: crate::stats::Outliers,
    /// Add repeats until the 95 % interval of the median is within this fraction of it (e.g.
    /// 0.02 for ±2 %); None measures `repeats` and stops.
    pub target_ci: Option<f64>,
    /// The most repeats a condition gets, re-measured and added ones included.
    pub max_repeats: usize,
    /// Rounds of re-measuring the repeats that other processes disturbed (0: none); the
    /// disturbed repeats are then left out of the statistics (kept in the raw times).
    pub rerun_disturbed: usize,
    /// Inferences profiled layer by layer after a condition's timed repeats (0: none), by the
    /// engines that can (tract's node profile, onnxruntime's op profiler, PyTorch's module
    /// times): the record keeps each layer's median, which `edgeprof costmodel import` learns
    /// from.
    pub layer_runs: usize,
    /// A folder of `.npy` files, each one batch of the model's first input, that int8
    /// conversions calibrate on (None: seeded inputs edgeprof draws).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<PathBuf>,
    /// What a condition's image input is made of: photographs where they are set up (auto),
    /// photographs or a refusal (images), or seeded values (seeded).
    pub input_data: InputData,
}

/// What an image input is made of (`measure.input_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputData {
    /// The sample photographs where `edgeprof env setup images` has fetched them, else seeded
    /// values.
    #[default]
    Auto,
    /// The sample photographs; a run without them set up is refused.
    Images,
    /// Seeded values, uniform in [-1, 1).
    Seeded,
}

impl std::str::FromStr for InputData {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(InputData::Auto),
            "images" => Ok(InputData::Images),
            "seeded" => Ok(InputData::Seeded),
            _ => Err(format!(
                "unknown input data {s:?}; use auto, images or seeded"
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Output {
    pub dir: PathBuf,
    pub formats: Vec<String>,
    /// Add the roofline and its advice to the outputs (measuring the ceilings if this device has
    /// none yet).
    pub roofline: bool,
    /// The profiler that places GPU conditions on the GPU roofline.
    pub gpu_profiler: GpuProfiler,
}

/// Which NVIDIA profiler runs a GPU condition for the roofline: the one its GPU needs (Nsight
/// Compute from compute capability 7.0, nvprof before), or the one named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuProfiler {
    #[default]
    Auto,
    Ncu,
    Nvprof,
}

/// The user's own program run as the `command` engine: it reads the worker request
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
    /// A distributed-training study (`[train]`): when there is one, `edgeprof run` carries it
    /// out instead of the matrix.
    pub train: Option<Train>,
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
    /// The address the other nodes reach it at when they train together (default: the
    /// destination's host, which must then resolve on every node).
    pub address: Option<String>,
    /// More `ssh -o KEY=VALUE` options.
    pub ssh_options: Vec<String>,
}

/// Where `nodes install` puts edgeprof on a node, and where a node's edgeprof is looked for.
pub const DEFAULT_NODE_EDGEPROF: &str = "~/.local/bin/edgeprof";
pub const DEFAULT_NODE_WORKDIR: &str = "~/edgeprof";

/// The tuner's settings (`[tune]`); command-line options override them.
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
    /// Runs the external framework `framework` under `python` (as `[frameworks.NAME] python`
    /// would), with no options.
    pub fn set_python(&mut self, framework: &str, python: &Path) {
        self.frameworks.insert(
            framework.to_string(),
            FrameworkSettings {
                python: Some(python.to_path_buf()),
                options: serde_json::Map::new(),
            },
        );
    }

    /// The interpreters the config names, by framework.
    pub fn interpreters(&self) -> std::collections::BTreeMap<String, PathBuf> {
        self.frameworks
            .iter()
            .filter_map(|(name, f)| f.python.clone().map(|p| (name.clone(), p)))
            .collect()
    }
}

/// serde's type names in words a config author uses.
fn friendly(message: &str) -> String {
    let message = match unknown_field(message) {
        Some((field, expected)) => match crate::text::nearest(field, expected) {
            Some(near) => format!("{message}; did you mean `{near}`?"),
            None => message.to_string(),
        },
        None => message.to_string(),
    };
    message
        .replace("expected i64", "expected a whole number")
        .replace("expected f64", "expected a number")
        .replace("expected a sequence", "expected a list")
        .replace("invalid type: sequence", "invalid type: list")
        .replace("invalid type: map", "invalid type: table")
}

/// serde's `unknown field `X`, expected one of `a`, `b`` as the field and the fields expected.
fn unknown_field(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest.split('`').skip(1).step_by(2).collect::<Vec<&str>>();
    Some((field, expected))
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

/// What to tell of `threads` threads on a machine of `cores` cores, when they are more: the
/// threads take turns on the cores, so a latency measured so tells of that, not of what the
/// engine would do with as many cores.
pub fn threads_warning(threads: usize, cores: usize) -> Option<String> {
    (cores > 0 && threads > cores).then(|| {
        format!(
            "{threads} threads are more than the {cores} cores here: they take turns on the \
             cores, and the times tell of that rather than of {threads} cores"
        )
    })
}

/// An input shape as a config may name it, or why not (the config reader and the terminal UI
/// apply the same rules, so a saved selection always reads back).
pub fn check_input(text: &str) -> Result<InputShape, crate::error::BadInput> {
    let shape: InputShape = text
        .parse()
        .map_err(|_| "must be CxHxW, e.g. \"3x224x224\"".to_string())?;
    let edge = zoo::MIN_SPATIAL..=zoo::MAX_SPATIAL;
    if !edge.contains(&shape.height) || !edge.contains(&shape.width) {
        return Err(crate::error::BadInput::from(format!(
            "height and width must be from {} to {}",
            zoo::MIN_SPATIAL,
            zoo::MAX_SPATIAL
        )));
    }
    if shape.channels > zoo::MAX_CHANNELS {
        return Err(crate::error::BadInput::from(format!(
            "at most {} channels",
            zoo::MAX_CHANNELS
        )));
    }
    Ok(shape)
}

/// A whole number in `range`, or why not, in the words the config reader uses.
pub fn check_count(text: &str, range: (usize, usize)) -> Result<usize, crate::error::BadInput> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (range.0..=range.1).contains(n))
        .ok_or_else(|| {
            BadInput(format!(
                "must be a whole number from {} to {}",
                range.0, range.1
            ))
        })
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
    Ok(Config {
        name,
        matrix,
        measure: resolver.measure(raw.measure.unwrap_or_default())?,
        output: resolver.output(raw.output.unwrap_or_default())?,
        command,
        frameworks: resolver.frameworks(raw.frameworks)?,
        tune: resolver.tune(raw.tune.unwrap_or_default())?,
        train: raw.train.map(|t| resolver.train(t, &nodes)).transpose()?,
        nodes,
    })
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

/// Why a configuration file could not be loaded: it could not be read, or it says something
/// edgeprof cannot run. Either is the user's to mend.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Read(#[from] ConfigReadError),
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// Reads and resolves a configuration file.
pub fn load(path: &Path) -> Result<Config, LoadError> {
    let text = read_text(path)?;
    Ok(parse(&text, path)?)
}

crate::error::kinds!(crate::error::Kind::BadInput => ConfigError, ConfigReadError, LoadError);

#[cfg(test)]
mod tests;

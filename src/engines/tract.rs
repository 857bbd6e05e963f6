//! The embedded tract engine: load a zoo model or an ONNX file, optimise it, run it with a chosen
//! thread count, and profile it node by node with times mapped back to the model's layer names.

use crate::models::graph::Model;
use crate::models::onnx;
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::plan::SimpleState;
use tract_onnx::tract_core::runtime::RunOptions;

/// tract-onnx's version: the `=0.23.9` pin on tract-linalg in Cargo.toml fixes the whole family.
pub const TRACT_VERSION: &str = "0.23.9";

/// Where the model comes from.
pub enum ModelSource<'a> {
    /// A zoo model, exported to ONNX in memory with weights from `seed`.
    Zoo { model: &'a Model, seed: u64 },
    /// An ONNX file on disk (external data next to it is resolved).
    OnnxFile(&'a Path),
}

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("cannot read ONNX file {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{origin} is not a valid ONNX model: {reason}")]
    InvalidModel { origin: String, reason: String },
    #[error("{origin}: {reason}")]
    UnsupportedModel { origin: String, reason: String },
    #[error("tract could not optimise {origin}: {reason}")]
    Prepare { origin: String, reason: String },
    #[error("inference failed: {reason}")]
    Run { reason: String },
    /// tract panicked on the model (malformed attributes such as negative pads, a zero divisor
    /// in a shape expression): contained and reported instead of crashing.
    #[error("{origin}: tract failed while {stage} the model ({reason}); the file is malformed or uses something tract does not support")]
    Crashed {
        origin: String,
        stage: &'static str,
        reason: String,
    },
    /// What the run would need exceeds the memory available now.
    #[error("{origin}: {what} needs {} but only {} of memory is available now; use a smaller --input or --batch", crate::text::bytes(*needed), crate::text::bytes(*available))]
    TooLarge {
        origin: String,
        what: String,
        needed: u64,
        available: u64,
    },
}

impl EngineError {
    /// True when the user's input (file, shape) is at fault rather than the engine or machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            EngineError::Unreadable { .. }
                | EngineError::InvalidModel { .. }
                | EngineError::UnsupportedModel { .. }
                | EngineError::Crashed { .. }
                | EngineError::TooLarge { .. }
        )
    }
}

/// One line out of an error chain, short enough for a terminal.
fn one_line(e: &anyhow::Error) -> String {
    let text = format!("{e:#}").replace('\n', " ");
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// Name prefix of the threads of tract's executor pool: a panic on one of them reaches the
/// contained caller (rayon hands it back), so its message is silenced too.
const POOL_NAME: &str = "edgeprof-tract";

thread_local! {
    /// Depth of [`contained`] calls on this thread: while above zero, panics are not printed.
    static QUIET: Cell<u32> = const { Cell::new(0) };
    /// The last silenced panic on this thread, with where it happened (for the fuzz reports).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Wraps the panic hook once: silenced panics are recorded instead of printed, every other one
/// goes to the previous hook (the default message, or a test harness's).
fn install_quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let quiet = QUIET.with(Cell::get) > 0
                || std::thread::current()
                    .name()
                    .is_some_and(|n| n.starts_with(POOL_NAME));
            if quiet {
                let place = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let text = format!("{}{place}", payload_text(info.payload()));
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(text));
            } else {
                previous(info);
            }
        }));
    });
}

/// The message a panic carries.
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

/// Runs `f`, turning a panic into its message and keeping the default panic report off the
/// terminal meanwhile. tract asserts on malformed models (negative pads, a zero divisor in a
/// shape) instead of returning errors; this is the only way to answer those with one line.
pub fn contained<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_quiet_hook();
    QUIET.with(|q| q.set(q.get() + 1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(q.get().saturating_sub(1)));
    result.map_err(|payload| {
        let text = payload_text(payload.as_ref()).replace('\n', " ");
        let mut short: String = text.chars().take(200).collect();
        if short.len() < text.len() {
            short.push('…');
        }
        short
    })
}

/// The last panic [`contained`] silenced on this thread, with its location; cleared.
#[cfg(test)]
pub fn take_last_panic() -> Option<String> {
    LAST_PANIC.with(|p| p.borrow_mut().take())
}

/// Thread count actually used and the executor that gives it.
fn run_options(threads: usize) -> RunOptions {
    let executor = if threads > 1 {
        Some(multithread::Executor::multithread_with_name(
            threads, POOL_NAME,
        ))
    } else {
        Some(multithread::Executor::SingleThread)
    };
    RunOptions {
        executor,
        ..Default::default()
    }
}

/// A model loaded, optimised and planned by tract.
pub struct TractSession {
    plan: Arc<TypedSimplePlan>,
    /// Shape of the single float32 input.
    pub input_shape: Vec<usize>,
    /// Layer names of the source graph (ONNX node names), for mapping profiles back.
    layer_names: Vec<String>,
    pub threads: usize,
    /// Parse + optimise + plan.
    pub init_time: Duration,
    /// The file or zoo model, for errors.
    origin: String,
    /// The largest tensor the model makes, in bytes, among those whose shape is known before
    /// it runs (0 when none is).
    pub largest_tensor: u64,
}

/// Time spent in one source layer per inference, from a node-by-node profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LayerTime {
    /// The source layer name, or the tract node's own name when it maps to no layer.
    pub layer: String,
    pub mapped: bool,
    pub ms_per_run: f64,
    /// How many optimised tract nodes were attributed to this layer.
    pub tract_nodes: usize,
}

/// The layer a tract node belongs to: the longest layer name equal to the node name or a
/// dot-separated prefix of it (tract names the nodes it derives `{original}.{suffix}`).
pub fn map_to_layer<'a>(node_name: &str, layers: &'a [String]) -> Option<&'a str> {
    layers
        .iter()
        .filter(|l| {
            !l.is_empty()
                && node_name.starts_with(l.as_str())
                && matches!(node_name.as_bytes().get(l.len()), None | Some(b'.'))
        })
        .max_by_key(|l| l.len())
        .map(String::as_str)
}

/// Bytes of a float32 tensor of `shape`; None when the count does not fit in 64 bits.
pub fn f32_bytes(shape: &[usize]) -> Option<u64> {
    shape
        .iter()
        .try_fold(4u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
}

/// Refuses a model one of whose tensors would not fit in memory, before tract's optimiser lays
/// out work for it: a convolution's patch tables grow with its output, and a file whose pads or
/// strides make that output enormous from a tiny input would abort the process there.
/// The largest tensor's size in bytes, when all fit.
fn check_tensors(origin: &str, typed: &TypedModel) -> Result<u64, EngineError> {
    let mut largest: Option<(u64, &str)> = None;
    for node in typed.nodes() {
        for output in &node.outputs {
            let Some(shape) = output.fact.shape.as_concrete() else {
                continue;
            };
            let what = || format!("the output of node {:?}", node.name);
            let item = output.fact.datum_type.size_of() as u64;
            let Some(bytes) = shape
                .iter()
                .try_fold(item, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
            else {
                return check_fits(origin, &what(), None).map(|()| 0);
            };
            if largest.is_none_or(|(most, _)| bytes > most) {
                largest = Some((bytes, &node.name));
            }
        }
    }
    match largest {
        Some((bytes, name)) => {
            check_fits(origin, &format!("the output of node {name:?}"), Some(bytes))?;
            Ok(bytes)
        }
        None => Ok(0),
    }
}

/// Memory available now, in bytes (MemAvailable of /proc/meminfo); None where it cannot be read.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    crate::collect::proc::kib_field(&text, "MemAvailable")
}

/// Refuses `needed` bytes for `what` when more than the memory available now: allocating them
/// would abort the process rather than fail.
pub fn check_fits(origin: &str, what: &str, needed: Option<u64>) -> Result<(), EngineError> {
    let available = available_memory();
    let too_large = |needed: u64, available: u64| EngineError::TooLarge {
        origin: origin.to_string(),
        what: what.to_string(),
        needed,
        available,
    };
    match (needed, available) {
        (None, a) => Err(too_large(u64::MAX, a.unwrap_or(0))),
        (Some(n), Some(a)) if n > a => Err(too_large(n, a)),
        // Without /proc/meminfo, at least what no address space can hold.
        (Some(n), None) if n > isize::MAX as u64 => Err(too_large(n, 0)),
        _ => Ok(()),
    }
}

impl TractSession {
    /// Loads, optionally overrides the input shape (N, C, H, W) of a file, optimises and plans.
    /// tract's panics on malformed models become [`EngineError::Crashed`].
    pub fn load(
        source: ModelSource,
        input_shape: Option<&[usize]>,
        threads: usize,
    ) -> Result<TractSession, EngineError> {
        let start = Instant::now();
        let (proto, origin, dir) = match source {
            ModelSource::Zoo { model, seed } => (
                onnx::to_onnx(model, seed),
                format!("zoo model {}", model.name),
                None,
            ),
            ModelSource::OnnxFile(path) => {
                let unreadable = |reason: String| EngineError::Unreadable {
                    path: path.to_path_buf(),
                    reason,
                };
                if path.is_dir() {
                    return Err(unreadable("it is a directory".to_string()));
                }
                std::fs::File::open(path).map_err(|e| unreadable(e.to_string()))?;
                let origin = path.display().to_string();
                let proto = contained(|| tract_onnx::onnx().proto_model_for_path(path))
                    .map_err(|reason| EngineError::Crashed {
                        origin: origin.clone(),
                        stage: "reading",
                        reason,
                    })?
                    .map_err(|e| EngineError::InvalidModel {
                        origin: origin.clone(),
                        reason: one_line(&e),
                    })?;
                let dir = path.parent().map(|d| d.to_string_lossy().into_owned());
                (proto, origin, dir)
            }
        };
        Self::prepare(proto, origin, dir, input_shape, threads, start)
    }

    /// Loads an ONNX model from its bytes (no external data), as [`TractSession::load`] does a
    /// file; `origin` names it in errors.
    #[cfg(test)]
    pub fn load_bytes(
        bytes: &[u8],
        origin: &str,
        input_shape: Option<&[usize]>,
        threads: usize,
    ) -> Result<TractSession, EngineError> {
        let start = Instant::now();
        let proto = contained(|| tract_onnx::onnx().proto_model_for_read(&mut &bytes[..]))
            .map_err(|reason| EngineError::Crashed {
                origin: origin.to_string(),
                stage: "reading",
                reason,
            })?
            .map_err(|e| EngineError::InvalidModel {
                origin: origin.to_string(),
                reason: one_line(&e),
            })?;
        Self::prepare(proto, origin.to_string(), None, input_shape, threads, start)
    }

    /// Parses, checks, optimises and plans a decoded model, containing tract's panics.
    fn prepare(
        proto: pb::ModelProto,
        origin: String,
        dir: Option<String>,
        input_shape: Option<&[usize]>,
        threads: usize,
        start: Instant,
    ) -> Result<TractSession, EngineError> {
        if let Some(shape) = input_shape {
            check_fits(&origin, "the input tensor", f32_bytes(shape))?;
        }
        let stage = Cell::new("loading");
        let outcome = contained(|| {
            Self::prepare_uncontained(
                &proto,
                &origin,
                dir.as_deref(),
                input_shape,
                threads,
                &stage,
            )
        });
        let (plan, input_shape, layer_names, threads, largest_tensor) =
            outcome.map_err(|reason| EngineError::Crashed {
                origin: origin.clone(),
                stage: stage.get(),
                reason,
            })??;
        Ok(TractSession {
            plan,
            input_shape,
            layer_names,
            threads,
            init_time: start.elapsed(),
            origin,
            largest_tensor,
        })
    }

    #[allow(clippy::type_complexity)]
    fn prepare_uncontained(
        proto: &pb::ModelProto,
        origin: &str,
        dir: Option<&str>,
        input_shape: Option<&[usize]>,
        threads: usize,
        stage: &Cell<&'static str>,
    ) -> Result<(Arc<TypedSimplePlan>, Vec<usize>, Vec<String>, usize, u64), EngineError> {
        let invalid = |e: anyhow::Error| EngineError::InvalidModel {
            origin: origin.to_string(),
            reason: one_line(&e),
        };
        let unsupported = |reason: String| EngineError::UnsupportedModel {
            origin: origin.to_string(),
            reason,
        };
        let graph: &pb::GraphProto = proto
            .graph
            .as_ref()
            .ok_or_else(|| invalid(anyhow::anyhow!("the file holds no graph")))?;
        let layer_names: Vec<String> = graph.node.iter().map(|n| n.name.clone()).collect();
        ranks::check(graph, input_shape.map(<[usize]>::len))
            .map_err(|why| invalid(anyhow::anyhow!(why)))?;
        let parsed = tract_onnx::onnx().parse(proto, dir).map_err(invalid)?;
        if !parsed.unresolved_inputs.is_empty() {
            return Err(invalid(anyhow::anyhow!(
                "inputs {:?} are produced by no node",
                parsed.unresolved_inputs
            )));
        }
        let mut model = parsed.model;
        if model.inputs.len() != 1 {
            return Err(unsupported(format!(
                "edgeprof runs models with exactly one input; this one has {}",
                model.inputs.len()
            )));
        }
        if let Some(shape) = input_shape {
            model
                .set_input_fact(0, f32::fact(shape).into())
                .map_err(invalid)?;
        }
        stage.set("optimising");
        let prepare = |e: anyhow::Error| EngineError::Prepare {
            origin: origin.to_string(),
            reason: one_line(&e),
        };
        let typed = model.into_typed().map_err(prepare)?;
        let largest_tensor = check_tensors(origin, &typed)?;
        let typed = typed.into_optimized().map_err(prepare)?;
        let fact = typed.input_fact(0).map_err(invalid)?.clone();
        if fact.datum_type != f32::datum_type() {
            return Err(unsupported(format!(
                "its input is {:?}; edgeprof feeds float32 inputs only",
                fact.datum_type
            )));
        }
        let input_shape = fact
            .shape
            .as_concrete()
            .map(|s| s.to_vec())
            .ok_or_else(|| {
                unsupported(format!(
                    "its input shape {:?} is not fully known; give it with --input CxHxW and --batch N",
                    fact.shape
                ))
            })?;
        // The file's own input shape (without --input) is checked here, before any inference
        // allocates it.
        check_fits(origin, "the input tensor", f32_bytes(&input_shape))?;
        let threads = threads.max(1);
        stage.set("planning");
        let plan = typed
            .into_runnable_with_options(&run_options(threads))
            .map_err(|e| EngineError::Prepare {
                origin: origin.to_string(),
                reason: one_line(&e),
            })?;
        Ok((plan, input_shape, layer_names, threads, largest_tensor))
    }

    /// A contained panic while running as an error naming the model.
    fn crashed(&self, stage: &'static str) -> impl Fn(String) -> EngineError + '_ {
        move |reason| EngineError::Crashed {
            origin: self.origin.clone(),
            stage,
            reason,
        }
    }

    /// A reproducible input: uniform in [-1, 1) from `seed`.
    pub fn make_input(&self, seed: u64) -> Result<Tensor, EngineError> {
        check_fits(
            &self.origin,
            "the input tensor",
            f32_bytes(&self.input_shape),
        )?;
        let data = crate::models::weights::input_data(&self.input_shape, seed);
        Tensor::from_shape(&self.input_shape, &data).map_err(|e| EngineError::Run {
            reason: one_line(&e),
        })
    }

    /// One inference; returns the first output as float32 values with its shape.
    pub fn run(&self, input: &Tensor) -> Result<(Vec<usize>, Vec<f32>), EngineError> {
        let run_err = |e: anyhow::Error| EngineError::Run {
            reason: one_line(&e),
        };
        contained(|| {
            let outputs = self
                .plan
                .run(tvec!(input.clone().into_tvalue()))
                .map_err(run_err)?;
            let first = outputs
                .first()
                .ok_or_else(|| run_err(anyhow::anyhow!("the model produced no output")))?;
            let values = first
                .cast_to::<f32>()
                .map_err(run_err)?
                .to_plain_array_view::<f32>()
                .map_err(run_err)?
                .iter()
                .copied()
                .collect();
            Ok((first.shape().to_vec(), values))
        })
        .map_err(self.crashed("running"))?
    }

    /// Wall time of one inference.
    pub fn time_one(&self, input: &Tensor) -> Result<Duration, EngineError> {
        let value = input.clone().into_tvalue();
        contained(|| {
            let start = Instant::now();
            self.plan.run(tvec!(value)).map_err(|e| EngineError::Run {
                reason: one_line(&e),
            })?;
            Ok(start.elapsed())
        })
        .map_err(self.crashed("running"))?
    }

    /// Runs `runs` inferences timing every node, and folds node times into source layers
    /// (in plan order of first appearance).
    pub fn profile(&self, input: &Tensor, runs: usize) -> Result<Vec<LayerTime>, EngineError> {
        let model = self.plan.model();
        let mut node_time = vec![Duration::ZERO; model.nodes().len()];
        let mut evaluated = vec![false; model.nodes().len()];
        let mut order = Vec::new();
        let runs = runs.max(1);
        contained(|| {
            let mut state = SimpleState::new(&self.plan).map_err(|e| EngineError::Run {
                reason: one_line(&e),
            })?;
            for _ in 0..runs {
                state
                    .run_plan_with_eval(
                        tvec!(input.clone().into_tvalue()),
                        |session, op_state, node, inputs| {
                            let start = Instant::now();
                            let result =
                                tract_onnx::tract_core::plan::eval(session, op_state, node, inputs);
                            node_time[node.id] += start.elapsed();
                            if !evaluated[node.id] {
                                evaluated[node.id] = true;
                                order.push(node.id);
                            }
                            result
                        },
                    )
                    .map_err(|e| EngineError::Run {
                        reason: one_line(&e),
                    })?;
            }
            Ok::<(), EngineError>(())
        })
        .map_err(self.crashed("profiling"))??;
        let mut layers: Vec<LayerTime> = Vec::new();
        for id in order {
            let node = &model.nodes()[id];
            // Sources only hand the input over; they belong to no layer and take no time.
            if node.inputs.is_empty() {
                continue;
            }
            let node_name = &node.name;
            let (layer, mapped) = match map_to_layer(node_name, &self.layer_names) {
                Some(l) => (l.to_string(), true),
                None => (node_name.clone(), false),
            };
            let ms = node_time[id].as_secs_f64() * 1e3 / runs as f64;
            match layers.iter_mut().find(|l| l.layer == layer) {
                Some(entry) => {
                    entry.ms_per_run += ms;
                    entry.tract_nodes += 1;
                }
                None => layers.push(LayerTime {
                    layer,
                    mapped,
                    ms_per_run: ms,
                    tract_nodes: 1,
                }),
            }
        }
        Ok(layers)
    }
}

/// Ranks of a graph's tensors as far as they can be told from the file alone, and the check
/// that the operators working on images (convolutions, poolings, batch norms) get tensors of a
/// rank they can index. tract reads their channel and spatial axes without bounds checks, so a
/// malformed file with a rank-1 input to a Conv aborts a debug build and reads past a buffer in
/// a release one: no panic to contain, so it is refused before tract sees it.
mod ranks {
    use std::collections::{BTreeSet, HashMap};
    use tract_onnx::pb;

    /// The least input rank of an operator that indexes channel and spatial axes, and which of
    /// its inputs are so indexed.
    fn needs(op: &str) -> Option<(usize, &'static [usize])> {
        match op {
            "Conv" | "ConvTranspose" | "ConvInteger" => Some((3, &[0, 1])),
            "QLinearConv" => Some((3, &[0, 3])),
            "MaxPool" | "AveragePool" | "LpPool" | "GlobalAveragePool" | "GlobalMaxPool"
            | "GlobalLpPool" => Some((3, &[0])),
            "BatchNormalization" => Some((2, &[0])),
            _ => None,
        }
    }

    fn rank_of_value_info(v: &pb::ValueInfoProto) -> Option<usize> {
        let pb::type_proto::Value::TensorType(t) = v.r#type.as_ref()?.value.as_ref()?;
        Some(t.shape.as_ref()?.dim.len())
    }

    fn attr<'a>(node: &'a pb::NodeProto, name: &str) -> Option<&'a pb::AttributeProto> {
        node.attribute.iter().find(|a| a.name == name)
    }

    /// Values of a one-dimensional int64 initializer (shapes, axes).
    fn int_values(graph: &pb::GraphProto, name: &str) -> Option<Vec<i64>> {
        let t = graph.initializer.iter().find(|t| t.name == name)?;
        if t.data_type != pb::tensor_proto::DataType::Int64 as i32 || t.dims.len() != 1 {
            return None;
        }
        if !t.int64_data.is_empty() {
            return Some(t.int64_data.clone());
        }
        Some(
            t.raw_data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    }

    /// Length of the one-dimensional initializer `name` (a shape or an axes list).
    fn length_of(graph: &pb::GraphProto, name: &str) -> Option<usize> {
        let t = graph.initializer.iter().find(|t| t.name == name)?;
        match t.dims.as_slice() {
            [n] => usize::try_from(*n).ok(),
            _ => None,
        }
    }

    /// Output rank of `node` from its inputs' ranks; None when it cannot be told.
    fn output_rank(
        graph: &pb::GraphProto,
        node: &pb::NodeProto,
        r: &[Option<usize>],
    ) -> Option<usize> {
        let first = r.first().copied().flatten();
        let keepdims = attr(node, "keepdims").is_none_or(|a| a.i != 0);
        let axes_len = || {
            attr(node, "axes")
                .map(|a| a.ints.len())
                .or_else(|| node.input.get(1).and_then(|n| length_of(graph, n)))
        };
        match node.op_type.as_str() {
            "Relu"
            | "Sigmoid"
            | "Tanh"
            | "Clip"
            | "LeakyRelu"
            | "Elu"
            | "Selu"
            | "HardSigmoid"
            | "HardSwish"
            | "Softmax"
            | "LogSoftmax"
            | "Identity"
            | "Dropout"
            | "Neg"
            | "Abs"
            | "Exp"
            | "Log"
            | "Sqrt"
            | "Reciprocal"
            | "Cast"
            | "Floor"
            | "Ceil"
            | "Round"
            | "Sign"
            | "Erf"
            | "Not"
            | "BatchNormalization"
            | "InstanceNormalization"
            | "LRN"
            | "Conv"
            | "ConvTranspose"
            | "MaxPool"
            | "AveragePool"
            | "LpPool"
            | "GlobalAveragePool"
            | "GlobalMaxPool"
            | "GlobalLpPool"
            | "Pad"
            | "Transpose"
            | "Slice"
            | "Split"
            | "Concat"
            | "Resize"
            | "Upsample"
            | "DepthToSpace"
            | "SpaceToDepth"
            | "Tile"
            | "CumSum"
            | "LayerNormalization"
            | "Softplus"
            | "Mish"
            | "Gelu"
            | "Shrink" => first,
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "Mean" | "Equal"
            | "Greater" | "Less" | "And" | "Or" | "Xor" | "Where" | "PRelu" | "Mod" => r
                .iter()
                .copied()
                .collect::<Option<Vec<usize>>>()?
                .into_iter()
                .max(),
            "Flatten" | "Gemm" => Some(2),
            "Shape" => Some(1),
            "Size" => Some(0),
            "MatMul" => match (first?, r.get(1).copied().flatten()?) {
                (1, 1) => Some(0),
                (1, b) => Some(b - 1),
                (a, 1) => Some(a - 1),
                (a, b) => Some(a.max(b)),
            },
            "Reshape" => node.input.get(1).and_then(|n| length_of(graph, n)),
            "ConstantOfShape" => node
                .input
                .first()
                .and_then(|n| int_values(graph, n))
                .map(|v| v.len()),
            "Expand" => {
                let target = node.input.get(1).and_then(|n| length_of(graph, n))?;
                Some(first?.max(target))
            }
            "Unsqueeze" => Some(first? + axes_len()?),
            "Squeeze" => first?.checked_sub(axes_len()?),
            "Gather" => (first? + r.get(1).copied().flatten()?).checked_sub(1),
            op if op.starts_with("Reduce") => {
                if keepdims {
                    first
                } else {
                    match axes_len() {
                        Some(n) => first?.checked_sub(n),
                        None => Some(0),
                    }
                }
            }
            "ArgMax" | "ArgMin" => {
                if keepdims {
                    first
                } else {
                    first?.checked_sub(1)
                }
            }
            "Constant" => attr(node, "value")
                .and_then(|a| a.t.as_ref())
                .map(|t| t.dims.len()),
            _ => None,
        }
    }

    /// A Transpose's `perm` must name each axis once: tract panics on an axis past the end
    /// (`[0, 1, 3, 9]`) and allocates without bound on a repeated one (`[0, 1, 3, 3]`) while it
    /// optimises the graph. Its length against the input's rank is left to tract, which answers
    /// that with an error.
    fn check_permutation(node: &pb::NodeProto) -> Result<(), String> {
        let Some(perm) = attr(node, "perm").map(|a| &a.ints) else {
            return Ok(());
        };
        let len = perm.len();
        let mut seen = vec![false; len];
        for &axis in perm {
            match usize::try_from(axis).ok().filter(|&a| a < len) {
                Some(a) if !seen[a] => seen[a] = true,
                _ => {
                    return Err(format!(
                        "node {:?} (Transpose) has perm {perm:?}, which is not a permutation of \
                         0..{len}",
                        node.name
                    ))
                }
            }
        }
        Ok(())
    }

    /// Why the graph cannot go to tract, if it cannot: an image operator given a tensor of too
    /// low a rank, or a transpose whose permutation is not one. `input_rank` is the rank of an input shape given on the command line.
    pub fn check(graph: &pb::GraphProto, input_rank: Option<usize>) -> Result<(), String> {
        let mut ranks: HashMap<&str, BTreeSet<usize>> = HashMap::new();
        let initializers: BTreeSet<&str> =
            graph.initializer.iter().map(|t| t.name.as_str()).collect();
        for t in &graph.initializer {
            ranks.entry(&t.name).or_default().insert(t.dims.len());
        }
        for (i, v) in graph.input.iter().enumerate() {
            let given = (i == 0 && !initializers.contains(v.name.as_str()))
                .then_some(input_rank)
                .flatten();
            if let Some(rank) = given.or_else(|| rank_of_value_info(v)) {
                ranks.entry(&v.name).or_default().insert(rank);
            }
        }
        for v in graph.value_info.iter().chain(&graph.output) {
            if let Some(rank) = rank_of_value_info(v) {
                ranks.entry(&v.name).or_default().insert(rank);
            }
        }
        // Files list nodes in order, but a malformed one may not: passes until nothing changes.
        for _ in 0..graph.node.len().min(64) + 1 {
            let mut changed = false;
            for node in &graph.node {
                let inputs: Vec<Option<usize>> = node
                    .input
                    .iter()
                    .map(|n| ranks.get(n.as_str()).and_then(|s| s.iter().next().copied()))
                    .collect();
                if let Some(rank) = output_rank(graph, node, &inputs) {
                    let outputs = match node.op_type.as_str() {
                        "Split" => node.output.len(),
                        _ => 1,
                    };
                    for out in node.output.iter().take(outputs) {
                        changed |= ranks.entry(out).or_default().insert(rank);
                    }
                }
            }
            if !changed {
                break;
            }
        }
        for node in &graph.node {
            if node.op_type == "Transpose" {
                check_permutation(node)?;
            }
            let Some((least, indexed)) = needs(&node.op_type) else {
                continue;
            };
            for &i in indexed {
                let Some(name) = node.input.get(i) else {
                    continue;
                };
                if let Some(&rank) = ranks.get(name.as_str()).and_then(|s| s.iter().next()) {
                    if rank < least {
                        return Err(format!(
                            "node {:?} ({}) needs a tensor of rank {least} or more as input {i}, \
                             but {name:?} has rank {rank}",
                            node.name, node.op_type
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::models::zoo::{self, ModelParams};

    #[test]
    fn contained_panics_become_their_message_and_leave_their_place() {
        let _ = take_last_panic();
        let outcome: Result<(), String> = contained(|| panic!("pads {} for rank {}", 3, 2));
        assert_eq!(outcome, Err("pads 3 for rank 2".to_string()));
        let place = take_last_panic().unwrap_or_default();
        assert!(place.contains("src/engines/tract.rs"), "{place}");
        assert_eq!(take_last_panic(), None);
        // Nested: the inner one is caught, the outer carries on.
        let nested = contained(|| contained(|| -> u8 { panic!("inner") }).is_err());
        assert_eq!(nested, Ok(true));
        assert_eq!(contained(|| 7), Ok(7));
    }

    #[test]
    fn models_load_from_bytes_and_image_operators_need_their_rank() {
        let bytes = crate::models::onnx::encode(&tiny_graph());
        let session = match TractSession::load_bytes(&bytes, "tiny", None, 2) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(session.input_shape, vec![1, 2, 6, 6]);
        // A rank-3 input given on the command line leaves the convolution rank 3: allowed by
        // the rank check (tract then says what it thinks).
        let graph = tiny_graph().graph.unwrap_or_default();
        assert!(ranks::check(&graph, Some(3)).is_ok());
        let why = ranks::check(&graph, Some(2)).err().unwrap_or_default();
        assert!(
            why.contains("\"conv\" (Conv) needs a tensor of rank 3"),
            "{why}"
        );
    }

    #[test]
    fn node_names_map_to_the_longest_layer_prefix() {
        let layers: Vec<String> = ["conv1", "conv1.0", "layer1.0.conv1", "fc", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(map_to_layer("conv1.0.add_bias", &layers), Some("conv1.0"));
        assert_eq!(map_to_layer("conv1", &layers), Some("conv1"));
        assert_eq!(map_to_layer("conv10", &layers), None);
        assert_eq!(
            map_to_layer("layer1.0.conv1.pack", &layers),
            Some("layer1.0.conv1")
        );
        assert_eq!(map_to_layer("fc_bias", &layers), None);
    }

    #[test]
    fn zoo_model_runs_and_profiles_at_small_size() {
        let params = ModelParams {
            height: 32,
            width: 32,
            num_classes: 10,
            ..ModelParams::default()
        };
        let model = match zoo::build("shufflenet_v2_x0_5", &params) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        let session = TractSession::load(
            ModelSource::Zoo {
                model: &model,
                seed: 1,
            },
            None,
            2,
        );
        let session = match session {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(session.input_shape, vec![1, 3, 32, 32]);
        let input = match session.make_input(7) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        let (shape, values) = match session.run(&input) {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(shape, vec![1, 10]);
        assert!(values.iter().all(|v| v.is_finite()));
        let profile = match session.profile(&input, 2) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert!(profile.iter().any(|l| l.mapped && l.layer == "fc"));
        assert!(profile
            .iter()
            .any(|l| l.mapped && l.layer.starts_with("stage3.")));
    }

    /// Input 1x2x6x6 → Pad → Conv 3x3 → Relu → MaxPool → AveragePool → Reshape → Gemm → Softmax, with
    /// a Transpose, Slice, Concat and Split on the side.
    pub(crate) fn tiny_graph() -> tract_onnx::pb::ModelProto {
        use crate::models::onnx::{float_tensor, IR_VERSION, OPSET};
        use tract_onnx::pb;
        let ints = |name: &str, v: &[i64]| pb::AttributeProto {
            name: name.into(),
            r#type: pb::attribute_proto::AttributeType::Ints as i32,
            ints: v.to_vec(),
            ..Default::default()
        };
        let int = |name: &str, v: i64| pb::AttributeProto {
            name: name.into(),
            r#type: pb::attribute_proto::AttributeType::Int as i32,
            i: v,
            ..Default::default()
        };
        let text_attr = |name: &str, v: &str| pb::AttributeProto {
            name: name.into(),
            r#type: pb::attribute_proto::AttributeType::String as i32,
            s: v.as_bytes().to_vec(),
            ..Default::default()
        };
        let node =
            |op: &str, inputs: &[&str], outputs: &[&str], attribute: Vec<pb::AttributeProto>| {
                pb::NodeProto {
                    op_type: op.into(),
                    name: outputs[0].into(),
                    input: inputs.iter().map(|s| s.to_string()).collect(),
                    output: outputs.iter().map(|s| s.to_string()).collect(),
                    attribute,
                    ..Default::default()
                }
            };
        let int64 = |name: &str, v: &[i64]| pb::TensorProto {
            name: name.into(),
            dims: vec![v.len() as i64],
            data_type: pb::tensor_proto::DataType::Int64 as i32,
            raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ..Default::default()
        };
        let weights: Vec<f32> = (0..3 * 2 * 9).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
        let fc: Vec<f32> = (0..18 * 4).map(|i| (i % 5) as f32 * 0.05).collect();
        let nodes = vec![
            node(
                "Pad",
                &["input", "pads"],
                &["padded"],
                vec![text_attr("mode", "constant")],
            ),
            node(
                "Conv",
                &["padded", "w", "b"],
                &["conv"],
                vec![
                    ints("kernel_shape", &[3, 3]),
                    ints("strides", &[1, 1]),
                    ints("pads", &[0, 0, 0, 0]),
                    ints("dilations", &[1, 1]),
                    int("group", 1),
                ],
            ),
            node("Relu", &["conv"], &["relu"], vec![]),
            node(
                "MaxPool",
                &["relu"],
                &["pool"],
                vec![
                    ints("kernel_shape", &[2, 2]),
                    ints("strides", &[2, 2]),
                    ints("pads", &[0, 0, 0, 0]),
                ],
            ),
            node(
                "AveragePool",
                &["pool"],
                &["avg"],
                vec![
                    ints("kernel_shape", &[1, 1]),
                    ints("strides", &[1, 1]),
                    int("count_include_pad", 0),
                ],
            ),
            node(
                "Transpose",
                &["avg"],
                &["t"],
                vec![ints("perm", &[0, 1, 3, 2])],
            ),
            node(
                "Slice",
                &["t", "starts", "ends", "axes"],
                &["sliced"],
                vec![],
            ),
            node(
                "Concat",
                &["sliced", "sliced"],
                &["cat"],
                vec![int("axis", 3)],
            ),
            node(
                "Split",
                &["cat"],
                &["half_a", "half_b"],
                vec![int("axis", 3)],
            ),
            node("Add", &["half_a", "half_b"], &["sum"], vec![]),
            node("Reshape", &["sum", "shape"], &["flat"], vec![]),
            node(
                "Gemm",
                &["flat", "fc", "fcb"],
                &["logits"],
                vec![int("transB", 0)],
            ),
            node("Softmax", &["logits"], &["output"], vec![int("axis", 1)]),
        ];
        let graph = pb::GraphProto {
            name: "tiny".into(),
            node: nodes,
            initializer: vec![
                int64("pads", &[0, 0, 1, 1, 0, 0, 1, 1]),
                float_tensor("w", &[3, 2, 3, 3], &weights),
                float_tensor("b", &[3], &[0.1, 0.0, -0.1]),
                int64("starts", &[0]),
                int64("ends", &[2]),
                int64("axes", &[3]),
                int64("shape", &[1, -1]),
                float_tensor("fc", &[18, 4], &fc),
                float_tensor("fcb", &[4], &[0.0; 4]),
            ],
            input: vec![value_info("input", &[1, 2, 6, 6])],
            output: vec![value_info("output", &[1, 4])],
            ..Default::default()
        };
        pb::ModelProto {
            ir_version: IR_VERSION,
            opset_import: vec![pb::OperatorSetIdProto {
                domain: String::new(),
                version: OPSET,
            }],
            graph: Some(graph),
            ..Default::default()
        }
    }

    fn value_info(name: &str, shape: &[i64]) -> tract_onnx::pb::ValueInfoProto {
        use tract_onnx::pb;
        use tract_onnx::pb::tensor_shape_proto::{dimension::Value, Dimension};
        pb::ValueInfoProto {
            name: name.into(),
            r#type: Some(pb::TypeProto {
                value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                    elem_type: pb::tensor_proto::DataType::Float as i32,
                    shape: Some(pb::TensorShapeProto {
                        dim: shape
                            .iter()
                            .map(|&d| Dimension {
                                value: Some(Value::DimValue(d)),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The malformed models under tests/fixtures/onnx/malformed: the tiny graph with one thing
    /// broken each, on which tract 0.23 panics (most), allocates without bound (the repeated
    /// permutation, the huge convolution output) or would read out of bounds (the rank-1 batch
    /// norm). The permutations and the batch norm are refused before tract sees them, the
    /// convolution before tract's optimiser.
    fn malformed_models() -> Vec<(&'static str, tract_onnx::pb::ModelProto)> {
        use tract_onnx::pb;
        let edit = |change: &dyn Fn(&mut pb::GraphProto)| {
            let mut model = tiny_graph();
            if let Some(g) = model.graph.as_mut() {
                change(g);
            }
            model
        };
        let set_ints = |g: &mut pb::GraphProto, op: &str, name: &str, values: &[i64]| {
            for node in g.node.iter_mut().filter(|n| n.op_type == op) {
                for a in node.attribute.iter_mut().filter(|a| a.name == name) {
                    a.ints = values.to_vec();
                    a.i = values.first().copied().unwrap_or(0);
                }
            }
        };
        vec![
            // Two pads for a 2-D convolution, which needs four.
            (
                "bad_pads.onnx",
                edit(&|g| set_ints(g, "Conv", "pads", &[1])),
            ),
            // A stride of zero: the output size divides by it.
            (
                "zero_stride.onnx",
                edit(&|g| set_ints(g, "Conv", "strides", &[0, 0])),
            ),
            // A permutation naming an axis the tensor does not have.
            (
                "bad_perm.onnx",
                edit(&|g| set_ints(g, "Transpose", "perm", &[0, 1, 3, 9])),
            ),
            // A split along an axis the tensor does not have.
            (
                "bad_split_axis.onnx",
                edit(&|g| {
                    for node in g.node.iter_mut().filter(|n| n.op_type == "Split") {
                        for a in node.attribute.iter_mut().filter(|a| a.name == "axis") {
                            a.i = 9;
                        }
                    }
                }),
            ),
            // A graph output that no node produces.
            (
                "missing_output.onnx",
                edit(&|g| {
                    if let Some(o) = g.output.first_mut() {
                        o.name = "nowhere".into();
                    }
                }),
            ),
            // A string tensor stored as raw bytes, which tract does not load.
            (
                "raw_string_tensor.onnx",
                edit(&|g| {
                    if let Some(t) = g.initializer.iter_mut().find(|t| t.name == "b") {
                        t.data_type = pb::tensor_proto::DataType::String as i32;
                    }
                }),
            ),
            // A permutation that names one axis twice: tract allocates without bound.
            (
                "repeated_perm.onnx",
                edit(&|g| set_ints(g, "Transpose", "perm", &[0, 1, 3, 3])),
            ),
            // Pads that make a convolution's output enormous from a tiny input: tract's
            // optimiser sizes a table by that output and aborts the process allocating it.
            (
                "huge_conv_output.onnx",
                edit(&|g| {
                    set_ints(g, "Conv", "pads", &[100_000, 100_000, 100_000, 100_000]);
                    // The convolution's output is the graph's: nothing after it refuses it.
                    g.node.truncate(2);
                    g.output = vec![pb::ValueInfoProto {
                        name: "conv".into(),
                        ..Default::default()
                    }];
                }),
            ),
            // A batch norm fed a rank-1 tensor: tract indexes its channel axis unchecked.
            (
                "rank1_batchnorm.onnx",
                edit(&|g| {
                    g.node.push(pb::NodeProto {
                        op_type: "BatchNormalization".into(),
                        name: "bn".into(),
                        input: ["b", "b", "b", "b", "b"].map(String::from).to_vec(),
                        output: vec!["bn".into()],
                        ..Default::default()
                    });
                    // A second output, so that nothing else constrains it.
                    g.output.push(pb::ValueInfoProto {
                        name: "bn".into(),
                        ..Default::default()
                    });
                }),
            ),
        ]
    }

    fn malformed_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/onnx/malformed")
    }

    /// Writes tests/fixtures/onnx/malformed again (they are checked in).
    #[test]
    #[ignore]
    fn write_malformed_onnx_fixtures() {
        let dir = malformed_dir();
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("{}: {e}", dir.display());
        }
        for (name, model) in malformed_models() {
            let path = dir.join(name);
            if let Err(e) = std::fs::write(&path, crate::models::onnx::encode(&model)) {
                panic!("{}: {e}", path.display());
            }
        }
    }

    /// Every malformed fixture is one the fixture writer makes, and each is answered with an error
    /// naming the file: the panics contained, the out-of-bounds read refused before tract runs.
    #[test]
    fn malformed_onnx_fixtures_are_errors_not_crashes() {
        for (name, model) in malformed_models() {
            let path = malformed_dir().join(name);
            let on_disk = std::fs::read(&path).unwrap_or_default();
            assert_eq!(
                on_disk,
                crate::models::onnx::encode(&model),
                "{name} is stale: run the ignored test engines::tract::tests::write_malformed_onnx_fixtures"
            );
            let outcome = contained(|| TractSession::load(ModelSource::OnnxFile(&path), None, 1));
            let error = match outcome {
                Ok(Ok(_)) => panic!("{name} loaded"),
                Ok(Err(e)) => e,
                Err(panic) => panic!("{name}: a panic escaped: {panic}"),
            };
            assert!(error.is_bad_input(), "{name}: {error}");
            assert!(error.to_string().contains(name), "{name}: {error}");
            if name == "rank1_batchnorm.onnx" {
                assert!(matches!(error, EngineError::InvalidModel { .. }), "{error}");
                assert!(error.to_string().contains("rank"), "{error}");
            } else if name.ends_with("perm.onnx") {
                assert!(matches!(error, EngineError::InvalidModel { .. }), "{error}");
                assert!(error.to_string().contains("not a permutation"), "{error}");
            } else if name == "huge_conv_output.onnx" {
                assert!(matches!(error, EngineError::TooLarge { .. }), "{error}");
                assert!(error.to_string().contains("the output of node"), "{error}");
            } else {
                assert!(
                    matches!(error, EngineError::Crashed { .. }),
                    "{name}: {error}"
                );
            }
        }
    }
}

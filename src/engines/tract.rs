//! The embedded tract engine: load a zoo model or an ONNX file, optimise it, run it with a chosen
//! thread count, and profile it node by node with times mapped back to the model's layer names.

use crate::collect::memory_room::{memory_room, Bound, Room};
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

/// tract-onnx's version in this build, read from its dependency metadata (`Cargo.lock`) by
/// `build.rs`.
pub const TRACT_VERSION: &str = env!("EDGEPROF_TRACT_VERSION");

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
    #[error("{origin}: {what} needs {} but only {} {}; use a smaller --input or --batch", crate::text::bytes(*needed), crate::text::bytes(*available), bound.phrase())]
    TooLarge {
        origin: String,
        what: String,
        needed: u64,
        available: u64,
        /// What bounds the memory left (the system, a cgroup limit, `ulimit -v`).
        bound: Bound,
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

/// One line out of tract's error chain, short enough for a terminal.
fn one_line(e: &TractError) -> String {
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
pub fn contained<T>(f: impl FnOnce() -> T) -> Result<T, crate::error::Panicked> {
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
        crate::error::Panicked(short)
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
    /// The most memory its tensors hold at once while it runs, in bytes (constants left out).
    pub peak_bytes: u64,
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
            let Some(bytes) = concrete_bytes(&output.fact) else {
                let what = format!("the output of node {:?}", node.name);
                return check_fits(origin, &what, None).map(|()| 0);
            };
            let Some(bytes) = bytes else { continue };
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

/// Bytes of a node output whose shape is known before the model runs: Some(None) when its
/// shape is symbolic, None when its size does not fit in 64 bits.
fn concrete_bytes(fact: &TypedFact) -> Option<Option<u64>> {
    let Some(shape) = fact.shape.as_concrete() else {
        return Some(None);
    };
    shape
        .iter()
        .try_fold(fact.datum_type.size_of() as u64, |acc, &d| {
            acc.checked_mul(u64::try_from(d).ok()?)
        })
        .map(Some)
}

/// The most memory the plan's tensors hold at once while it runs, in bytes, walking its
/// evaluation order as tract frees values: a node's outputs live from its step to the last step
/// that reads one of them (to the end when nothing reads them, or when they are model outputs).
/// Constants are left out: they are in memory already. None when a size overflows.
fn peak_bytes(plan: &TypedSimplePlan) -> Option<u64> {
    let model = plan.model();
    let order = plan.order_without_consts();
    let nodes = model.nodes();
    let mut last_read: Vec<usize> = vec![usize::MAX; nodes.len()];
    let mut read: Vec<bool> = vec![false; nodes.len()];
    for (step, &id) in order.iter().enumerate() {
        for input in &nodes[id].inputs {
            last_read[input.node] = step;
            read[input.node] = true;
        }
    }
    if let Ok(outputs) = model.output_outlets() {
        for o in outputs {
            last_read[o.node] = usize::MAX;
            read[o.node] = true;
        }
    }
    let mut frees_after: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
    for &id in order {
        if read[id] && last_read[id] < order.len() {
            frees_after[last_read[id]].push(id);
        }
    }
    let mut held: Vec<u64> = vec![0; nodes.len()];
    let (mut live, mut peak) = (0u64, 0u64);
    for (step, &id) in order.iter().enumerate() {
        for output in &nodes[id].outputs {
            let bytes = concrete_bytes(&output.fact)?.unwrap_or(0);
            held[id] = held[id].checked_add(bytes)?;
            live = live.checked_add(bytes)?;
        }
        peak = peak.max(live);
        for &freed in &frees_after[step] {
            live -= std::mem::take(&mut held[freed]);
        }
    }
    Some(peak)
}

/// Refuses `needed` bytes for `what` when more than this process may allocate now (the least of
/// the system's available memory, its cgroup's limit and `ulimit -v`): allocating them would
/// abort the process rather than fail.
pub fn check_fits(origin: &str, what: &str, needed: Option<u64>) -> Result<(), EngineError> {
    let room = memory_room();
    let too_large = |needed: u64, room: Option<Room>| EngineError::TooLarge {
        origin: origin.to_string(),
        what: what.to_string(),
        needed,
        available: room.map_or(0, |r| r.bytes),
        bound: room.map_or(Bound::System, |r| r.bound),
    };
    match (needed, room) {
        (None, r) => Err(too_large(u64::MAX, r)),
        (Some(n), Some(r)) if n > r.bytes => Err(too_large(n, Some(r))),
        // Without /proc, at least what no address space can hold.
        (Some(n), None) if n > isize::MAX as u64 => Err(too_large(n, None)),
        _ => Ok(()),
    }
}

/// The least a zoo model needs while it runs, by its analytic cost: its parameters, plus the
/// input and output of its largest layer held at once. tract keeps more (packed weights,
/// scratch space), so a model over this surely does not fit.
pub fn least_memory(costs: &crate::models::cost::ModelCost) -> Option<u64> {
    let largest = costs
        .layers
        .iter()
        .map(|l| l.input_bytes.checked_add(l.output_bytes))
        .try_fold(0u64, |m, b| Some(m.max(b?)))?;
    costs.total.param_bytes.checked_add(largest)
}

/// Refuses a zoo model whose input, or whose least running memory, exceeds the memory available
/// now: allocating it would abort the process instead of failing.
pub fn check_zoo_fits(
    model: &crate::models::graph::Model,
    costs: &crate::models::cost::ModelCost,
) -> Result<(), EngineError> {
    let origin = format!("zoo model {} at input {:?}", model.name, model.input_shape);
    check_fits(&origin, "the input tensor", f32_bytes(&model.input_shape))?;
    check_fits(
        &origin,
        "running it (parameters and the largest layer's input and output, by the analytic model)",
        least_memory(costs),
    )
}

/// One output of an inference: its shape and its values as float32.
pub type Output = (Vec<usize>, Vec<f32>);

/// An output tensor as its shape and float32 values.
fn as_output(o: &TValue) -> Result<Output, EngineError> {
    let run_err = |e: TractError| EngineError::Run {
        reason: one_line(&e),
    };
    let values = o
        .cast_to::<f32>()
        .map_err(run_err)?
        .to_plain_array_view::<f32>()
        .map_err(run_err)?
        .iter()
        .copied()
        .collect();
    Ok((o.shape().to_vec(), values))
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
                // At most what an ONNX file can be, and only a regular file's bytes.
                let bytes =
                    crate::models::onnx_graph::read_model_bytes(path).map_err(unreadable)?;
                let origin = path.display().to_string();
                let proto = decode_file(path, &origin, || {
                    tract_onnx::onnx().proto_model_for_read(&mut &bytes[..])
                })?;
                check_runnable_at(&proto, &origin, input_shape)?;
                let dir = path.parent().map(|d| d.to_string_lossy().into_owned());
                (proto, origin, dir)
            }
        };
        Self::prepare(proto, origin, dir, input_shape, None, threads, start)
    }

    /// Loads an ONNX file with its inputs as the user bound them (any number, any element
    /// type), and makes the tensors every inference is fed: the given values, else seeded
    /// uniform values in [-1, 1) for floating-point inputs and zeros for the others.
    pub fn load_fed(
        path: &Path,
        inputs: &[crate::models::onnx_graph::BoundInput],
        threads: usize,
        seed: u64,
    ) -> Result<(TractSession, TVec<TValue>), EngineError> {
        let start = Instant::now();
        let origin = path.display().to_string();
        let bytes = crate::models::onnx_graph::read_model_bytes(path).map_err(|reason| {
            EngineError::Unreadable {
                path: path.to_path_buf(),
                reason,
            }
        })?;
        let proto = decode_file(path, &origin, || {
            tract_onnx::onnx().proto_model_for_read(&mut &bytes[..])
        })?;
        // A node no engine can run is refused before tract is asked to load it.
        check_runnable_with(&proto, &origin, inputs)?;
        let dir = path.parent().map(|d| d.to_string_lossy().into_owned());
        // Integer inputs given with their values (a sample rate, axes, a target shape) become
        // constants: tract needs shapes and axes known when it optimises.
        // Each input keeps its place among the model's inputs, which seeds its values.
        let (constants, inputs): (Vec<_>, Vec<_>) =
            inputs.iter().enumerate().partition(|(_, i)| {
                i.values.is_some() && crate::models::onnx_graph::is_integer_type(i.elem)
            });
        let mut proto = proto;
        if let Some(graph) = proto.graph.as_mut() {
            for (_, c) in &constants {
                graph.input.retain(|v| v.name != c.name);
                graph.initializer.push(integer_tensor(c));
            }
        }
        // What tract lacks is said of the file before its inputs are made.
        if let Some(why) = proto.graph.as_ref().and_then(what_tract_lacks) {
            return Err(EngineError::UnsupportedModel {
                origin,
                reason: why,
            });
        }
        let mut tensors = TVec::new();
        for &(k, input) in &inputs {
            let bytes = input.shape.iter().try_fold(
                crate::models::onnx_graph::elem_bytes(input.elem),
                |acc, &d| acc.checked_mul(d as u64),
            );
            check_fits(&origin, &format!("input {}", input.name), bytes)?;
            tensors.push(fed_tensor(input, seed.wrapping_add(k as u64))?.into_tvalue());
        }
        let inputs: Vec<crate::models::onnx_graph::BoundInput> =
            inputs.into_iter().map(|(_, i)| i.clone()).collect();
        let session = Self::prepare(proto, origin, dir, None, Some(&inputs), threads, start)?;
        Ok((session, tensors))
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
                reason: reason.0,
            })?
            .map_err(|e| EngineError::InvalidModel {
                origin: origin.to_string(),
                reason: one_line(&e),
            })?;
        // As for a file: a node no engine can run is refused before tract is asked to load it.
        check_runnable_at(&proto, origin, input_shape)?;
        Self::prepare(
            proto,
            origin.to_string(),
            None,
            input_shape,
            None,
            threads,
            start,
        )
    }

    /// Parses, checks, optimises and plans a decoded model, containing tract's panics.
    fn prepare(
        proto: pb::ModelProto,
        origin: String,
        dir: Option<String>,
        input_shape: Option<&[usize]>,
        fed: Option<&[crate::models::onnx_graph::BoundInput]>,
        threads: usize,
        start: Instant,
    ) -> Result<TractSession, EngineError> {
        if let Some(shape) = input_shape {
            check_fits(&origin, "the input tensor", f32_bytes(shape))?;
        }
        let mut proto = proto;
        forget_symbolic_value_info(&mut proto);
        let stage = Cell::new("loading");
        let outcome = contained(|| {
            Self::prepare_uncontained(
                &proto,
                &origin,
                dir.as_deref(),
                input_shape,
                fed,
                threads,
                &stage,
            )
        });
        let (plan, input_shape, layer_names, threads, (largest_tensor, peak_bytes)) = outcome
            .map_err(|reason| EngineError::Crashed {
                origin: origin.clone(),
                stage: stage.get(),
                reason: reason.0,
            })??;
        Ok(TractSession {
            plan,
            input_shape,
            layer_names,
            threads,
            init_time: start.elapsed(),
            origin,
            largest_tensor,
            peak_bytes,
        })
    }

    #[allow(clippy::type_complexity)]
    fn prepare_uncontained(
        proto: &pb::ModelProto,
        origin: &str,
        dir: Option<&str>,
        input_shape: Option<&[usize]>,
        fed: Option<&[crate::models::onnx_graph::BoundInput]>,
        threads: usize,
        stage: &Cell<&'static str>,
    ) -> Result<
        (
            Arc<TypedSimplePlan>,
            Vec<usize>,
            Vec<String>,
            usize,
            (u64, u64),
        ),
        EngineError,
    > {
        let invalid = |e: TractError| EngineError::InvalidModel {
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
            .ok_or_else(|| invalid(TractError::msg("the file holds no graph")))?;
        if let Some(why) = what_tract_lacks(graph) {
            return Err(unsupported(why));
        }
        // The graph's nodes and those of its branch and loop bodies (tract inlines an `If`
        // whose condition is known, under its branch's node names).
        let mut layer_names: Vec<String> = Vec::new();
        let mut graphs = vec![graph];
        while let Some(g) = graphs.pop() {
            for n in &g.node {
                layer_names.push(n.name.clone());
                for a in &n.attribute {
                    graphs.extend(a.g.iter());
                    graphs.extend(a.graphs.iter());
                }
            }
        }
        ranks::check(graph, input_shape.map(<[usize]>::len))
            .map_err(|why| invalid(TractError::msg(why)))?;
        let parsed = tract_onnx::onnx().parse(proto, dir).map_err(invalid)?;
        if !parsed.unresolved_inputs.is_empty() {
            return Err(invalid(TractError::msg(format!(
                "inputs {:?} are produced by no node",
                parsed.unresolved_inputs
            ))));
        }
        let mut model = parsed.model;
        if let Some(fed) = fed {
            if fed.len() != model.inputs.len() {
                return Err(unsupported(format!(
                    "it has {} inputs and {} were bound",
                    model.inputs.len(),
                    fed.len()
                )));
            }
            for (k, input) in fed.iter().enumerate() {
                let fact = InferenceFact::dt_shape(datum_of(input.elem, origin)?, &input.shape);
                model.set_input_fact(k, fact).map_err(invalid)?;
            }
        } else if model.inputs.len() != 1 {
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
        let prepare = |e: TractError| EngineError::Prepare {
            origin: origin.to_string(),
            reason: one_line(&e),
        };
        let typed = model.into_typed().map_err(prepare)?;
        let largest_tensor = check_tensors(origin, &typed)?;
        let typed = typed.into_optimized().map_err(prepare)?;
        let fact = typed.input_fact(0).map_err(invalid)?.clone();
        if fed.is_none() && fact.datum_type != f32::datum_type() {
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
        if fed.is_none() {
            check_fits(origin, "the input tensor", f32_bytes(&input_shape))?;
        }
        let threads = threads.max(1);
        stage.set("planning");
        let plan = typed
            .into_runnable_with_options(&run_options(threads))
            .map_err(|e| EngineError::Prepare {
                origin: origin.to_string(),
                reason: one_line(&e),
            })?;
        // Each tensor may fit while those alive together do not: running would abort the
        // process in an allocation, so the plan's peak is checked against the memory left.
        let peak = peak_bytes(&plan);
        check_fits(origin, "running it (its tensors at their peak)", peak)?;
        let sizes = (largest_tensor, peak.unwrap_or(u64::MAX));
        Ok((plan, input_shape, layer_names, threads, sizes))
    }

    /// A contained panic while running as an error naming the model.
    fn crashed(&self, stage: &'static str) -> impl Fn(crate::error::Panicked) -> EngineError + '_ {
        move |reason| EngineError::Crashed {
            origin: self.origin.clone(),
            stage,
            reason: reason.0,
        }
    }

    /// A reproducible input: uniform in [-1, 1) from `seed`.
    pub fn make_input(&self, seed: u64) -> Result<Tensor, EngineError> {
        check_fits(
            &self.origin,
            "the input tensor",
            f32_bytes(&self.input_shape),
        )?;
        self.input_from(crate::models::weights::input_data(&self.input_shape, seed))
    }

    /// The input of `values` (as many as the input shape holds).
    pub fn input_from(&self, values: Vec<f32>) -> Result<Tensor, EngineError> {
        Tensor::from_shape(&self.input_shape, &values).map_err(|e| EngineError::Run {
            reason: format!(
                "the input of {} values does not fit {:?}: {}",
                values.len(),
                self.input_shape,
                one_line(&e)
            ),
        })
    }

    /// One inference; returns the first output as float32 values with its shape.
    pub fn run(&self, input: &Tensor) -> Result<(Vec<usize>, Vec<f32>), EngineError> {
        let run_err = |e: TractError| EngineError::Run {
            reason: one_line(&e),
        };
        contained(|| {
            let outputs = self
                .plan
                .run(tvec!(input.clone().into_tvalue()))
                .map_err(run_err)?;
            let first = outputs
                .first()
                .ok_or_else(|| run_err(TractError::msg("the model produced no output")))?;
            as_output(first)
        })
        .map_err(self.crashed("running"))?
    }

    /// One inference on fed inputs; every output as float32 values with its shape.
    pub fn run_fed(&self, inputs: &TVec<TValue>) -> Result<Vec<Output>, EngineError> {
        let run_err = |e: TractError| EngineError::Run {
            reason: one_line(&e),
        };
        contained(|| {
            let outputs = self.plan.run(inputs.clone()).map_err(run_err)?;
            outputs.iter().map(as_output).collect()
        })
        .map_err(self.crashed("running"))?
    }

    /// Wall time of one inference on fed inputs.
    pub fn time_fed(&self, inputs: &TVec<TValue>) -> Result<Duration, EngineError> {
        // The inputs are handed over before the clock starts, as `time_one` does.
        let inputs = inputs.clone();
        contained(|| {
            let start = Instant::now();
            self.plan.run(inputs).map_err(|e| EngineError::Run {
                reason: one_line(&e),
            })?;
            Ok(start.elapsed())
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
}

/// Ranks of a graph's tensors as far as they can be told from the file alone, and the check
/// that the operators working on images (convolutions, poolings, batch norms) get tensors of a
/// rank they can index. tract reads their channel and spatial axes without bounds checks, so a
/// malformed file with a rank-1 input to a Conv aborts a debug build and reads past a buffer in
/// a release one: no panic to contain, so it is refused before tract sees it.
mod export;
pub use export::{write_onnx, write_test_set, ExportError};
mod onnx_file;
use onnx_file::*;
mod profile;
pub use profile::{map_to_layer, LayerTime};
mod ranks;

#[cfg(test)]
pub(crate) mod tests;

crate::error::kinds_by_input!(EngineError);

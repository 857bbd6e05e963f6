//! `edgeprof place-worker`: the child process behind `edgeprof place`. It measures
//! what the placement needs, on processing units given as CPU sets, and runs split plans:
//!
//! - `profile`: each block of the chain as a sub-model of its own (a zoo model's layers
//!   exported with its seeded weights, or an ONNX file's nodes between two cuts, see
//!   [`source`]), timed on each unit by a thread confined to that unit's CPUs;
//! - `transfer`: the copy microbenchmark: a tensor handed from a thread on one unit to a thread
//!   on another, which copies it in, for several sizes (fitted to t = α + bytes / β);
//! - `split`: the plan itself: consecutive blocks on one unit merged into one sub-model, each
//!   on its own confined thread, chained through channels in one process; the end-to-end
//!   latency is timed and the output compared with the whole model's.
//!
//! Request on stdin, one JSON result on stdout. Each unit runs one engine thread (tract with
//! one thread), so that every measurement and the split run use the same execution. A unit may
//! instead be served by onnxruntime on the CPU or a GPU ([`remote`]): its blocks are exported
//! as ONNX files, timed with their data on its device, and the copy benchmark and the split hand
//! tensors to it as the plan would (to its process, onto its device, and back).

mod remote;
mod source;
use remote::Remote;
pub use remote::UnitEngine;
use source::{Piece, Whole};

use crate::engines::tract::TractSession;
use crate::error::Context;
use crate::models::InputShape;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;
use tract_onnx::prelude::Tensor;

/// A processing unit: a name and the CPUs its thread is confined to; with an engine, the CPUs
/// of the process that serves it (which runs its blocks on the engine's device).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    pub name: String,
    pub cpus: Vec<usize>,
    /// None: a tract thread on `cpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<UnitEngine>,
}

impl Unit {
    /// A tract thread on `cpus`.
    pub fn cpus(name: &str, cpus: Vec<usize>) -> Unit {
        Unit {
            name: name.to_string(),
            cpus,
            engine: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Task {
    Profile,
    Transfer {
        sizes: Vec<u64>,
    },
    Split {
        /// The unit of each block.
        assign: Vec<usize>,
    },
}

/// The model placed: one of the zoo's, or an ONNX file (its graph cut into a [`Chain`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    Zoo {
        model: String,
        input: InputShape,
        batch: usize,
        classes: usize,
    },
    /// Its inputs as given (`NAME=DIMS`, `NAME=TYPE:VALUE`, …); none: the file's own shapes.
    File { path: PathBuf, inputs: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub source: Source,
    pub seed: u64,
    /// Layer (or node) ranges `[first, end)` of the chain's blocks.
    pub blocks: Vec<(usize, usize)>,
    pub units: Vec<Unit>,
    /// Timed runs per measurement (the median is kept).
    pub runs: usize,
    #[serde(flatten)]
    pub task: Task,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Response {
    /// `ms[block][unit]`: median latency of each block on each unit.
    Profile { ms: Vec<Vec<f64>> },
    /// `samples[from][to]`: (bytes, median ms) per size; empty on the diagonal.
    Transfer { samples: Vec<Vec<Vec<(u64, f64)>>> },
    Split {
        /// Median and spread (min, max) of the end-to-end latency.
        median_ms: f64,
        min_ms: f64,
        max_ms: f64,
        /// Largest |split − whole| over the output, relative to the largest |whole| (infinite
        /// where the two differ in shape or in a non-finite value).
        #[serde(with = "unbounded")]
        max_relative_difference: f64,
        /// Values of the whole model's output that are NaN or infinite.
        #[serde(default)]
        non_finite: usize,
        /// The sub-models run, as (unit, first layer, end).
        segments: Vec<(usize, usize, usize)>,
    },
}

/// A figure that may be infinite: JSON has no infinity, so it is written as null and read back
/// as one.
mod unbounded {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}

/// Confines the calling thread (and the threads and children it starts later) to `cpus`.
pub fn confine(cpus: &[usize]) -> crate::error::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    for &c in cpus {
        set.set(c)
            .with_context(|| format!("CPU {c} is beyond what this system can address"))?;
    }
    // Pid 0: the calling thread.
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .with_context(|| format!("cannot confine a thread to CPUs {cpus:?}"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Starts the program serving `unit` on a thread confined to the unit's CPUs (which the
/// program inherits), shared by the threads that hand it tensors.
fn start_remote(unit: &Unit) -> crate::error::Result<Option<Arc<Mutex<Remote>>>> {
    let Some(engine) = unit.engine.clone() else {
        return Ok(None);
    };
    let name = unit.name.clone();
    let remote = on_unit(unit.cpus.clone(), move || Remote::start(&name, &engine))?;
    Ok(Some(Arc::new(Mutex::new(remote))))
}

fn lock(remote: &Mutex<Remote>) -> crate::error::Result<std::sync::MutexGuard<'_, Remote>> {
    remote
        .lock()
        .map_err(|_| crate::error::failed!("a thread using an onnxruntime unit panicked"))
}

/// A unit's blocks, loaded: tract sessions with their inputs, or the unit's program.
enum Loaded {
    Tract(Vec<(TractSession, Tensor)>),
    Remote(Remote),
}

impl Loaded {
    fn new(
        unit: &Unit,
        blocks: &[Piece],
        files: &[PathBuf],
        seed: u64,
    ) -> crate::error::Result<Loaded> {
        let Some(engine) = &unit.engine else {
            return blocks
                .iter()
                .map(|m| {
                    let (s, input) = m.session(seed)?;
                    for _ in 0..2 {
                        s.time_one(&input)?;
                    }
                    Ok((s, input))
                })
                .collect::<crate::error::Result<Vec<_>>>()
                .map(Loaded::Tract);
        };
        let mut remote = Remote::start(&unit.name, engine)?;
        for (id, (m, path)) in blocks.iter().zip(files).enumerate() {
            remote.load(id, path, m.input_shape(), seed)?;
        }
        Ok(Loaded::Remote(remote))
    }

    fn time(&mut self, block: usize) -> crate::error::Result<f64> {
        match self {
            Loaded::Tract(loaded) => match loaded.get(block) {
                Some((s, input)) => Ok(s.time_one(input)?.as_secs_f64() * 1e3),
                None => Err(crate::error::failed!("no block {block}")),
            },
            Loaded::Remote(remote) => remote.time(block),
        }
    }
}

/// Runs `f` on a new thread confined to `cpus` and returns its result.
fn on_unit<T: Send + 'static>(
    cpus: Vec<usize>,
    f: impl FnOnce() -> crate::error::Result<T> + Send + 'static,
) -> crate::error::Result<T> {
    std::thread::spawn(move || {
        confine(&cpus)?;
        f()
    })
    .join()
    .map_err(|_| crate::error::failed!("a unit's thread panicked"))?
}

/// Each block on each unit, timed in interleaved rounds (block by block, unit after unit), so
/// a machine that slows down or speeds up while it runs shifts every unit alike.
fn profile(r: &Request, whole: &Whole) -> crate::error::Result<Response> {
    let blocks: Vec<Piece> = r
        .blocks
        .iter()
        .map(|&range| whole.piece(range))
        .collect::<crate::error::Result<_>>()?;
    // The ONNX files of the blocks, for the units an engine serves.
    let files: Vec<PathBuf> = if r.units.iter().any(|u| u.engine.is_some()) {
        blocks
            .iter()
            .zip(&r.blocks)
            .map(|(m, &range)| m.file(r, range))
            .collect::<crate::error::Result<_>>()?
    } else {
        Vec::new()
    };
    // One thread per unit holds every block loaded and times the one it is asked for.
    let mut units = Vec::new();
    for unit in &r.units {
        let (ask_tx, ask_rx) = mpsc::channel::<usize>();
        let (answer_tx, answer_rx) = mpsc::channel::<crate::error::Result<f64>>();
        let unit_here = unit.clone();
        let blocks = blocks.clone();
        let files = files.clone();
        let seed = r.seed;
        let thread = std::thread::spawn(move || {
            let setup = confine(&unit_here.cpus)
                .and_then(|_| Loaded::new(&unit_here, &blocks, &files, seed));
            let mut loaded = match setup {
                Ok(l) => {
                    let _ = answer_tx.send(Ok(0.0));
                    l
                }
                Err(e) => {
                    let _ = answer_tx.send(Err(e));
                    return;
                }
            };
            while let Ok(b) = ask_rx.recv() {
                if answer_tx.send(loaded.time(b)).is_err() {
                    break;
                }
            }
        });
        answer_rx
            .recv()
            .map_err(|_| crate::error::failed!("the thread of unit {} ended early", unit.name))??;
        units.push((ask_tx, answer_rx, thread));
    }
    let mut times = vec![vec![Vec::with_capacity(r.runs); r.units.len()]; r.blocks.len()];
    for _ in 0..r.runs.max(1) {
        for (b, per_unit) in times.iter_mut().enumerate() {
            for (u, (ask, answer, _)) in units.iter().enumerate() {
                let lost = || crate::error::failed!("the thread of unit {} ended", r.units[u].name);
                ask.send(b).map_err(|_| lost())?;
                per_unit[u].push(answer.recv().map_err(|_| lost())??);
            }
        }
    }
    for (ask, _, thread) in units {
        drop(ask);
        let _ = thread.join();
    }
    let ms = times
        .into_iter()
        .map(|per_unit| per_unit.into_iter().map(|mut t| median(&mut t)).collect())
        .collect();
    Ok(Response::Profile { ms })
}

/// The copy microbenchmark between every ordered pair of units. Into a unit an engine serves,
/// the receiving thread puts the tensor onto its device; out of one, the sending thread first
/// fetches it from the device (the timer running), as a split plan's stages do.
fn transfer(r: &Request, sizes: &[u64]) -> crate::error::Result<Response> {
    let k = r.units.len();
    let remotes: Vec<Option<Arc<Mutex<Remote>>>> = r
        .units
        .iter()
        .map(start_remote)
        .collect::<crate::error::Result<_>>()?;
    let mut samples = vec![vec![Vec::new(); k]; k];
    let runs = r.runs.max(3);
    for (from, row) in samples.iter_mut().enumerate() {
        for (to, cell) in row.iter_mut().enumerate() {
            if from == to {
                continue;
            }
            let (send_tx, send_rx) = mpsc::channel::<Vec<f32>>();
            let (done_tx, done_rx) = mpsc::channel::<f64>();
            let receiver_cpus = r.units[to].cpus.clone();
            let into = remotes[to].clone();
            // The receiver copies each tensor into its own buffer (or onto its device), as a
            // stage on another unit must before it can compute on it.
            let receiver = std::thread::spawn(move || -> crate::error::Result<()> {
                confine(&receiver_cpus)?;
                let mut own: Vec<f32> = Vec::new();
                while let Ok(data) = send_rx.recv() {
                    let checksum = match &into {
                        Some(remote) => {
                            lock(remote)?.put(&data)?;
                            0.0
                        }
                        None => {
                            own.clear();
                            own.extend_from_slice(&data);
                            own.iter().step_by(1024).map(|v| *v as f64).sum::<f64>()
                        }
                    };
                    if done_tx.send(checksum).is_err() {
                        break;
                    }
                }
                Ok(())
            });
            let sizes = sizes.to_vec();
            let sender_cpus = r.units[from].cpus.clone();
            let out_of = remotes[from].clone();
            let pair = on_unit(sender_cpus, move || {
                let mut out = Vec::new();
                for &bytes in &sizes {
                    let n = (bytes / 4).max(1) as usize;
                    let mut times = Vec::with_capacity(runs);
                    for i in 0..runs + 2 {
                        // Written on the sending unit (so it sits in that unit's caches, or on
                        // its device).
                        let data: Vec<f32> = (0..n).map(|j| (j + i) as f32).collect();
                        let (start, data) = match &out_of {
                            Some(remote) => {
                                let mut remote = lock(remote)?;
                                remote.put(&data)?;
                                let start = Instant::now();
                                (start, remote.fetch()?)
                            }
                            None => (Instant::now(), data),
                        };
                        send_tx
                            .send(data)
                            .map_err(|_| crate::error::failed!("the receiving thread ended"))?;
                        done_rx
                            .recv()
                            .map_err(|_| crate::error::failed!("the receiving thread ended"))?;
                        if i >= 2 {
                            times.push(ms_since(start));
                        }
                    }
                    out.push((bytes, median(&mut times)));
                }
                Ok(out)
            });
            // The sender's end of the channel went with its thread: the receiver stops.
            receiver
                .join()
                .map_err(|_| crate::error::failed!("the receiving thread panicked"))??;
            *cell = pair?;
        }
    }
    Ok(Response::Transfer { samples })
}

type Stage = (mpsc::Receiver<Tensor>, mpsc::Sender<Tensor>);

fn to_tensor(shape: &[usize], data: &[f32]) -> crate::error::Result<Tensor> {
    Tensor::from_shape(shape, data)
        .map_err(|e| crate::error::failed!("cannot pass a tensor on: {e}"))
}

/// A tensor's values as f32, in order.
fn plain(t: &Tensor) -> crate::error::Result<Vec<f32>> {
    Ok(t.cast_to::<f32>()
        .map_err(|e| crate::error::failed!("cannot hand a tensor on: {e}"))?
        .to_plain_array_view::<f32>()
        .map_err(|e| crate::error::failed!("cannot hand a tensor on: {e}"))?
        .iter()
        .copied()
        .collect())
}

/// A segment of a split plan, ready to run on its unit: a tract session, or sub-model `id` of
/// its unit's program (one program per unit, holding each of the unit's segments).
enum SegmentRun {
    Tract(TractSession),
    Remote(Arc<Mutex<Remote>>, usize),
}

impl SegmentRun {
    fn run(&mut self, t: &Tensor) -> crate::error::Result<Tensor> {
        let (shape, data) = match self {
            SegmentRun::Tract(s) => s.run(t)?,
            SegmentRun::Remote(remote, id) => {
                let data = plain(t)?;
                lock(remote)?.run(*id, t.shape(), &data)?
            }
        };
        to_tensor(&shape, &data)
    }
}

fn split(r: &Request, whole: &Whole, assign: &[usize]) -> crate::error::Result<Response> {
    if assign.len() != r.blocks.len() {
        crate::error::bail!(
            "the plan places {} block(s) but the chain has {}",
            assign.len(),
            r.blocks.len()
        );
    }
    if let Some(&u) = assign.iter().find(|&&u| u >= r.units.len()) {
        crate::error::bail!("the plan names unit {u}, but there are {}", r.units.len());
    }
    // Consecutive blocks on one unit run as one sub-model.
    let mut segments: Vec<(usize, usize, usize)> = Vec::new();
    for (&(a, b), &u) in r.blocks.iter().zip(assign) {
        match segments.last_mut() {
            Some(last) if last.0 == u && last.2 == a => last.2 = b,
            _ => segments.push((u, a, b)),
        }
    }
    // The reference: the whole model on this thread.
    let (input, expected) = whole.reference(r.seed)?;
    // The units an engine serves: one program each, every segment of the unit loaded in it
    // below.
    let mut remotes: Vec<Option<Arc<Mutex<Remote>>>> = Vec::new();
    for (i, unit) in r.units.iter().enumerate() {
        let remote = if segments.iter().any(|s| s.0 == i) {
            start_remote(unit)?
        } else {
            None
        };
        remotes.push(remote);
    }
    // One thread per segment, chained by channels; the last hands the output back.
    let (first_tx, mut rx) = mpsc::channel::<Tensor>();
    let mut threads = Vec::new();
    let (ready_tx, ready_rx) = mpsc::channel::<crate::error::Result<()>>();
    // The first error of a stage while the plan runs, to say why it stopped.
    let failure: Arc<Mutex<Option<crate::error::Error>>> = Arc::new(Mutex::new(None));
    for (id, &(u, a, b)) in segments.iter().enumerate() {
        let sub = whole.piece((a, b))?;
        let (tx, next_rx) = mpsc::channel::<Tensor>();
        let stage: Stage = (rx, tx);
        rx = next_rx;
        let cpus = r.units[u].cpus.clone();
        let remote = remotes[u].clone();
        if let Some(remote) = &remote {
            let file = sub.file(r, (a, b))?;
            lock(remote)?.load(id, &file, sub.input_shape(), r.seed)?;
        }
        let seed = r.seed;
        let ready = ready_tx.clone();
        let failure = Arc::clone(&failure);
        threads.push(std::thread::spawn(move || {
            let setup = confine(&cpus).and_then(|_| match remote {
                Some(remote) => Ok(SegmentRun::Remote(remote, id)),
                None => sub.session(seed).map(|(s, _)| SegmentRun::Tract(s)),
            });
            let mut s = match setup {
                Ok(s) => {
                    let _ = ready.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let (input, output) = stage;
            while let Ok(t) = input.recv() {
                match s.run(&t) {
                    Ok(t) => {
                        if output.send(t).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        if let Ok(mut slot) = failure.lock() {
                            slot.get_or_insert(e);
                        }
                        break;
                    }
                }
            }
        }));
    }
    drop(ready_tx);
    for _ in 0..segments.len() {
        ready_rx
            .recv()
            .map_err(|_| crate::error::failed!("a stage ended before it was ready"))??;
    }
    let stage_failed = || match failure.lock().ok().and_then(|mut slot| slot.take()) {
        Some(e) => e.context("a stage of the split plan failed while running"),
        None => crate::error::failed!("a stage of the split plan failed while running"),
    };
    let once = |t: &Tensor| -> crate::error::Result<(f64, Tensor)> {
        let start = Instant::now();
        first_tx.send(t.clone()).map_err(|_| stage_failed())?;
        let out = rx.recv().map_err(|_| stage_failed())?;
        Ok((ms_since(start), out))
    };
    let (_, out) = once(&input)?;
    let got = plain(&out)?;
    let (max_relative_difference, non_finite) = compare(&got, &expected);
    for _ in 0..2 {
        once(&input)?;
    }
    let mut times: Vec<f64> = (0..r.runs.max(1))
        .map(|_| once(&input).map(|(ms, _)| ms))
        .collect::<crate::error::Result<_>>()?;
    drop(first_tx);
    for t in threads {
        let _ = t.join();
    }
    let min_ms = times.iter().copied().fold(f64::INFINITY, f64::min);
    let max_ms = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(Response::Split {
        median_ms: median(&mut times),
        min_ms,
        max_ms,
        max_relative_difference,
        non_finite,
        segments,
    })
}

/// The largest difference of `got` from `expected` relative to the largest finite magnitude
/// of `expected`, and how many of `expected`'s values are NaN or infinite: a non-finite value
/// matches only the same one (NaN a NaN), and one that is finite on one side only is an
/// infinite difference.
fn compare(got: &[f32], expected: &[f32]) -> (f64, usize) {
    let non_finite = expected.iter().filter(|v| !v.is_finite()).count();
    if got.len() != expected.len() {
        return (f64::INFINITY, non_finite);
    }
    let scale = expected
        .iter()
        .filter(|v| v.is_finite())
        .map(|v| v.abs())
        .fold(0.0f32, f32::max)
        .max(1e-30);
    let worst = got
        .iter()
        .zip(expected)
        .map(|(&a, &b)| match (a.is_finite(), b.is_finite()) {
            (true, true) => f64::from((a - b).abs() / scale),
            (false, false) if (a.is_nan() && b.is_nan()) || a == b => 0.0,
            _ => f64::INFINITY,
        })
        .fold(0.0, f64::max);
    (worst, non_finite)
}

/// Serves one request from `input`.
pub fn serve(mut input: impl Read) -> crate::error::Result<Response> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .context("cannot read the request from stdin")?;
    let r: Request = serde_json::from_str(&text)
        .map_err(|e| crate::error::BadInput(format!("the placement request is not valid: {e}")))?;
    if r.units.is_empty() {
        crate::error::bail!(crate::error::BadInput("name at least one unit".into()));
    }
    // The copy benchmark needs no model.
    match &r.task {
        Task::Profile => profile(&r, &Whole::open(&r)?),
        Task::Transfer { sizes } => transfer(&r, sizes),
        Task::Split { assign } => split(&r, &Whole::open(&r)?, assign),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::graph::Model;
    use crate::models::onnx_graph::Chain;
    use crate::models::zoo::{self, ModelParams};

    /// MobileNetV2 at 3×32×32 with ten classes: small enough to cut and run in a test.
    fn small_mobilenet() -> crate::error::Result<Model> {
        let params = ModelParams {
            num_classes: 10,
            channels: 3,
            height: 32,
            width: 32,
            batch: 1,
        };
        Ok(zoo::build("mobilenet_v2", &params)?)
    }

    #[test]
    fn a_chain_split_in_two_computes_what_the_whole_model_does() -> crate::error::Result<()> {
        let cpus: Vec<usize> = vec![0];
        let model = small_mobilenet()?;
        let blocks = crate::models::blocks::blocks(&model, 4);
        let request = Request {
            source: Source::Zoo {
                model: "mobilenet_v2".into(),
                input: InputShape {
                    channels: 3,
                    height: 32,
                    width: 32,
                },
                batch: 1,
                classes: 10,
            },
            seed: 7,
            blocks: blocks.iter().map(|b| (b.first, b.end)).collect(),
            units: vec![Unit::cpus("a", cpus.clone()), Unit::cpus("b", cpus)],
            runs: 2,
            task: Task::Split {
                assign: vec![0, 1, 1, 0],
            },
        };
        let Response::Split {
            max_relative_difference,
            segments,
            median_ms,
            ..
        } = split(&request, &Whole::Zoo(model.clone()), &[0, 1, 1, 0])?
        else {
            panic!("not a split response");
        };
        assert_eq!(segments.len(), 3);
        assert!(max_relative_difference < 1e-4, "{max_relative_difference}");
        assert!(median_ms > 0.0);
        let Response::Profile { ms } = profile(&request, &Whole::Zoo(model))? else {
            panic!("not a profile");
        };
        assert_eq!(ms.len(), 4);
        assert!(ms.iter().flatten().all(|t| *t > 0.0));
        let Response::Transfer { samples } = transfer(&request, &[4096, 1 << 16])? else {
            panic!("not a transfer");
        };
        assert!(samples[0][0].is_empty());
        assert_eq!(samples[0][1].len(), 2);
        Ok(())
    }

    #[test]
    fn a_nan_matches_only_a_nan_and_a_finite_value_only_a_close_one() {
        let nan = f32::NAN;
        assert_eq!(compare(&[1.0, nan], &[1.0, nan]), (0.0, 1));
        assert_eq!(compare(&[1.0, 2.0], &[1.0, nan]), (f64::INFINITY, 1));
        assert_eq!(compare(&[nan], &[f32::INFINITY]), (f64::INFINITY, 1));
        assert_eq!(compare(&[1.0, 1.5], &[1.0, 2.0]), (0.25, 0));
        assert_eq!(compare(&[1.0], &[1.0, 2.0]), (f64::INFINITY, 0));
    }

    #[test]
    fn an_onnx_file_cut_at_its_nodes_computes_what_the_whole_file_does() -> crate::error::Result<()>
    {
        let model = small_mobilenet()?;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("mobilenet_v2.onnx");
        std::fs::write(
            &path,
            crate::models::onnx::encode(&crate::models::onnx::to_onnx(&model, 3)),
        )?;
        let chain = Chain::open(&path, &[])?;
        let blocks = crate::models::blocks::file_blocks(&chain, 4);
        assert_eq!(blocks.len(), 4);
        assert_eq!(blocks.last().map(|b| b.out_bytes), Some(40));
        let request = Request {
            source: Source::File {
                path: path.clone(),
                inputs: Vec::new(),
            },
            seed: 7,
            blocks: blocks.iter().map(|b| (b.first, b.end)).collect(),
            units: vec![Unit::cpus("a", vec![0]), Unit::cpus("b", vec![0])],
            runs: 1,
            task: Task::Split {
                assign: vec![1, 0, 1, 0],
            },
        };
        let whole = Whole::open(&request)?;
        let Response::Split {
            max_relative_difference,
            segments,
            ..
        } = split(&request, &whole, &[1, 0, 1, 0])?
        else {
            panic!("not a split response");
        };
        assert_eq!(segments.len(), 4);
        assert!(max_relative_difference < 1e-5, "{max_relative_difference}");
        Ok(())
    }
}

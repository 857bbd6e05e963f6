//! The model a placement cuts: a zoo model's description or an ONNX file's [`Chain`], and the
//! pieces of either (blocks and segments) as models of their own that a unit loads.

use super::{Request, Source};
use crate::engines::tract::{ModelSource, TractSession};
use crate::error::Context;
use crate::models::graph::Model;
use crate::models::onnx_graph::{is_integer_type, BoundInput, Chain, InputSpec};
use crate::models::zoo::{self, ModelParams};
use std::path::PathBuf;
use tract_onnx::prelude::Tensor;

/// The model being placed, ready to be cut.
pub(super) enum Whole {
    Zoo(Model),
    /// A file's chain, its fed inputs, and where its sub-models are written.
    File {
        path: PathBuf,
        chain: Box<Chain>,
        dir: tempfile::TempDir,
    },
}

/// One block or segment of the chain, ready to load: a zoo model's layers, or the ONNX file
/// of a file's nodes.
#[derive(Clone)]
pub(super) enum Piece {
    Zoo(Model),
    File {
        path: PathBuf,
        input: BoundInput,
        /// The nodes and the file they come from, in messages.
        label: String,
    },
}

/// The blocks' ONNX files live in `FOLDER_PREFIX<pid>-…` under the temporary directory,
/// removed when the worker ends, and by the next worker when it was killed first.
const FOLDER_PREFIX: &str = "edgeprof-place-";

/// Removes the folders of workers that are gone (killed before they could remove their own).
fn remove_stale_folders() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(FOLDER_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Whole {
    pub(super) fn open(r: &Request) -> crate::error::Result<Whole> {
        match &r.source {
            Source::Zoo {
                model,
                input,
                batch,
                classes,
            } => {
                let params = ModelParams {
                    num_classes: *classes,
                    channels: input.channels,
                    height: input.height,
                    width: input.width,
                    batch: *batch,
                };
                Ok(Whole::Zoo(zoo::build(model, &params)?))
            }
            Source::File { path, inputs } => {
                let given = InputSpec::parse_all(inputs)
                    .map_err(|e| crate::error::BadInput(e.to_string()))?;
                let chain =
                    Chain::open(path, &given).map_err(|e| crate::error::BadInput(e.to_string()))?;
                remove_stale_folders();
                let dir = tempfile::Builder::new()
                    .prefix(&format!("{FOLDER_PREFIX}{}-", std::process::id()))
                    .tempdir()
                    .context("cannot make a folder for the blocks' ONNX files")?;
                Ok(Whole::File {
                    path: path.clone(),
                    chain: Box::new(chain),
                    dir,
                })
            }
        }
    }

    /// Layers (nodes) `a..b` as a model of their own.
    pub(super) fn piece(&self, (a, b): (usize, usize)) -> crate::error::Result<Piece> {
        match self {
            Whole::Zoo(model) => model.slice(a, b).map(Piece::Zoo).ok_or_else(|| {
                crate::error::failed!("layers {a}..{b} are not a block of the chain")
            }),
            Whole::File {
                path: file,
                chain,
                dir,
                ..
            } => {
                let proto = chain.sub_model(a, b)?;
                let input = chain.crossing_at(a).ok_or_else(|| {
                    crate::error::failed!("position {a} is not a cut of the chain")
                })?;
                let path = dir.path().join(format!("nodes-{a}-{b}.onnx"));
                if !path.is_file() {
                    crate::results::write_atomic(&path, &crate::models::onnx::encode(&proto))?;
                }
                Ok(Piece::File {
                    label: format!("nodes {a}..{b} of {}", file.display()),
                    path,
                    input: BoundInput {
                        name: input.name.clone(),
                        elem: tract_onnx::pb::tensor_proto::DataType::Float as i32,
                        shape: input.shape.clone(),
                        values: None,
                    },
                })
            }
        }
    }

    /// The whole model's input and its first output, on one tract thread: what a split plan
    /// must reproduce.
    pub(super) fn reference(&self, seed: u64) -> crate::error::Result<(Tensor, Vec<f32>)> {
        match self {
            Whole::Zoo(model) => {
                let whole = session(model, seed)?;
                let input = whole.make_input(seed)?;
                let (_, expected) = whole.run(&input)?;
                Ok((input, expected))
            }
            Whole::File { path, chain, .. } => {
                let inputs = chain.bound_inputs();
                let (whole, fed) = TractSession::load_fed(path, inputs, 1, seed)
                    .with_context(|| format!("cannot load {} on tract", path.display()))?;
                let outputs = whole.run_fed(&fed)?;
                let expected = outputs.into_iter().next().map(|(_, v)| v).ok_or_else(|| {
                    crate::error::failed!("{} produced no output", path.display())
                })?;
                // The one input fed at run time (the others are constants).
                let k = inputs
                    .iter()
                    .filter(|i| !(i.values.is_some() && is_integer_type(i.elem)))
                    .position(|i| i.name == chain.input().name)
                    .unwrap_or(0);
                let input = fed
                    .get(k)
                    .map(|v| (**v).clone())
                    .ok_or_else(|| crate::error::failed!("{} has no input fed", path.display()))?;
                Ok((input, expected))
            }
        }
    }
}

impl Piece {
    pub(super) fn input_shape(&self) -> &[usize] {
        match self {
            Piece::Zoo(m) => &m.input_shape,
            Piece::File { input, .. } => &input.shape,
        }
    }

    /// A tract session of the piece (one thread) and the seeded input it is timed on.
    pub(super) fn session(&self, seed: u64) -> crate::error::Result<(TractSession, Tensor)> {
        match self {
            Piece::Zoo(m) => {
                let s = session(m, seed)?;
                let input = s.make_input(seed)?;
                Ok((s, input))
            }
            Piece::File { path, input, label } => {
                let (s, fed) = TractSession::load_fed(path, std::slice::from_ref(input), 1, seed)
                    .with_context(|| format!("cannot load {label} on tract"))?;
                let input = fed
                    .into_iter()
                    .next()
                    .map(|v| (*v).clone())
                    .ok_or_else(|| crate::error::failed!("{} has no input", path.display()))?;
                Ok((s, input))
            }
        }
    }

    /// The piece as an ONNX file, for a unit an engine serves.
    pub(super) fn file(
        &self,
        r: &Request,
        (a, b): (usize, usize),
    ) -> crate::error::Result<PathBuf> {
        match self {
            Piece::Zoo(sub) => sub_model_file(r, sub, (a, b)),
            Piece::File { path, .. } => Ok(path.clone()),
        }
    }
}

fn session(model: &Model, seed: u64) -> crate::error::Result<TractSession> {
    TractSession::load(ModelSource::Zoo { model, seed }, None, 1)
        .with_context(|| format!("cannot load {} on tract", model.name))
}

/// The ONNX file of a zoo model's layers `a..b` (a block or a segment of the chain) for a
/// unit served by an engine, kept in edgeprof's cache like the runner's exports: the zoo's
/// seeded weights, the sub-model's input shape.
fn sub_model_file(
    r: &Request,
    sub: &Model,
    (a, b): (usize, usize),
) -> crate::error::Result<PathBuf> {
    let Source::Zoo {
        model,
        input,
        batch,
        classes,
    } = &r.source
    else {
        crate::error::bail!("layers {a}..{b} belong to no zoo model");
    };
    let path = crate::engines::env::cache_dir()?
        .join("models")
        .join(format!(
            "{model}-{input}-b{batch}-c{classes}-seed{}-layers{a}-{b}.onnx",
            r.seed
        ));
    crate::runner::prepare::keep(&path, || {
        Ok(crate::models::onnx::encode(&crate::models::onnx::to_onnx(
            sub, r.seed,
        )))
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_left_by_a_worker_that_is_gone_is_removed_and_a_live_ones_is_kept(
    ) -> crate::error::Result<()> {
        // A process that has ended: its pid is free (until the system hands it out again).
        let mut child = std::process::Command::new("true").spawn()?;
        let dead = child.id();
        child.wait()?;
        let stale = std::env::temp_dir().join(format!("{FOLDER_PREFIX}{dead}-test"));
        let live = std::env::temp_dir().join(format!("{FOLDER_PREFIX}{}-test", std::process::id()));
        for dir in [&stale, &live] {
            std::fs::create_dir_all(dir)?;
            std::fs::write(dir.join("nodes-0-1.onnx"), b"x")?;
        }
        remove_stale_folders();
        let kept = live.is_dir();
        std::fs::remove_dir_all(&live)?;
        assert!(!stale.exists());
        assert!(kept);
        Ok(())
    }
}

//! A zoo model written as an ONNX file, with tract's reference input and output beside it in
//! ONNX's test-data layout (`test_data_set_0/input_0.pb`, `output_0.pb`) when asked: what
//! another runtime's answer is checked against.

use super::{EngineError, ModelSource, TractSession};
use crate::files::FileError;
use crate::models::graph::Model;
use crate::models::onnx;
use std::path::{Path, PathBuf};

/// Why a model could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    File(#[from] FileError),
    /// tract could not run the model for its reference output.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl ExportError {
    /// Whether what the user asked for is at fault (a path that cannot be written) rather than
    /// the engine.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ExportError::File(_) => true,
            ExportError::Engine(e) => e.is_bad_input(),
        }
    }
}

/// Writes `model` with weights drawn from `seed` to `output`, the path as the user named it (a
/// link, a FIFO or `/dev/stdout` is written through, as a shell's redirection would); returns
/// the bytes written.
pub fn write_onnx(model: &Model, seed: u64, output: &Path) -> Result<usize, FileError> {
    let bytes = onnx::encode(&onnx::to_onnx(model, seed));
    std::fs::write(output, &bytes).map_err(|error| FileError::Write {
        path: output.to_path_buf(),
        error,
    })?;
    Ok(bytes.len())
}

/// Writes tract's output for a seeded input to `model` (weights from `seed`) into
/// `dir/test_data_set_0` (`input_0.pb`, `output_0.pb`); returns that folder.
pub fn write_test_set(model: &Model, seed: u64, dir: &Path) -> Result<PathBuf, ExportError> {
    let set = dir.join("test_data_set_0");
    std::fs::create_dir_all(&set).map_err(|error| FileError::Create {
        path: set.clone(),
        error,
    })?;
    let session = TractSession::load(ModelSource::Zoo { model, seed }, None, 1)?;
    let input = session.make_input(seed)?;
    let (out_shape, values) = session.run(&input)?;
    let input_values: Vec<f32> = input
        .to_plain_array_view::<f32>()
        .map_err(|e| EngineError::Run {
            reason: format!("the input tensor is not float32: {e}"),
        })?
        .iter()
        .copied()
        .collect();
    let write = |file: &str, tensor: tract_onnx::pb::TensorProto| {
        let path = set.join(file);
        std::fs::write(&path, prost::Message::encode_to_vec(&tensor))
            .map_err(|error| FileError::Write { path, error })
    };
    write(
        "input_0.pb",
        onnx::float_tensor("input", &session.input_shape, &input_values),
    )?;
    write(
        "output_0.pb",
        onnx::float_tensor("output", &out_shape, &values),
    )?;
    Ok(set)
}

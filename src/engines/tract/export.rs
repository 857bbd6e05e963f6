//! A zoo model written as an ONNX file, with tract's reference input and output beside it in
//! ONNX's test-data layout (`test_data_set_0/input_0.pb`, `output_0.pb`) when asked: what
//! another runtime's answer is checked against.

use super::{EngineError, ModelSource, TractSession};
use crate::files::FileError;
use crate::models::graph::Model;
use crate::models::onnx;
use std::path::{Path, PathBuf};

/// What [`export`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The ONNX file's size in bytes.
    pub bytes: usize,
    /// The folder holding the reference input and output, when asked for.
    pub test_set: Option<PathBuf>,
}

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
    /// Whether what the user asked for is at fault (a path that cannot be written, a link)
    /// rather than the engine.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ExportError::File(_) => true,
            ExportError::Engine(e) => e.is_bad_input(),
        }
    }
}

/// Writes `model` with weights drawn from `seed` to `output` (whole or not at all), and with
/// `test_data`, tract's output for a seeded input into `test_data/test_data_set_0`.
pub fn export(
    model: &Model,
    seed: u64,
    output: &Path,
    test_data: Option<&Path>,
) -> Result<Exported, ExportError> {
    let bytes = onnx::encode(&onnx::to_onnx(model, seed));
    crate::files::write_atomic(output, &bytes)?;
    let Some(dir) = test_data else {
        return Ok(Exported {
            bytes: bytes.len(),
            test_set: None,
        });
    };
    let set = dir.join("test_data_set_0");
    crate::files::create_real_dir(&set)?;
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
        crate::files::write_atomic(&set.join(file), &prost::Message::encode_to_vec(&tensor))
    };
    write(
        "input_0.pb",
        onnx::float_tensor("input", &session.input_shape, &input_values),
    )?;
    write(
        "output_0.pb",
        onnx::float_tensor("output", &out_shape, &values),
    )?;
    Ok(Exported {
        bytes: bytes.len(),
        test_set: Some(set),
    })
}

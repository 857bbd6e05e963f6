//! Engines (frameworks) that run models: the embedded tract and candle engines, behind one
//! [`Loaded`] so that the worker and `bench` time them the same way.

pub mod candle;
pub mod env;
pub mod external;
pub mod sample_images;
pub mod tract;

use crate::models::graph::Model;
use std::path::Path;
use std::time::Duration;
pub use tract::EngineError;

/// The built-in engines.
pub const BUILT_IN: &[&str] = &["tract", "candle"];

/// Why `engine` cannot run a model in `precision`, if it cannot: each engine declares the
/// precisions it runs.
pub fn precision_unsupported(
    engine: &str,
    precision: crate::collect::kernels::Precision,
) -> Option<String> {
    use crate::collect::kernels::Precision;
    if precision == Precision::Fp32 {
        return None;
    }
    match engine {
        "candle" => candle::dtype_of(precision).err().map(|e| e.0),
        // int8 and fp16 are ONNX files converted by onnxruntime's own tools.
        "tract" | "onnxruntime" if precision == Precision::Int8 => None,
        "onnxruntime" if precision == Precision::Fp16 => None,
        "tract" if precision == Precision::Fp16 => Some(format!(
            "tract {} does not run float16 ONNX models (the float16 conversion of a model with \
             a Gemm fails in its translation, which expects float32)",
            tract::TRACT_VERSION
        )),
        // PyTorch's own tools: autocast for fp16 and bf16, FX static quantization for int8.
        "pytorch" => None,
        // TensorFlow Lite's converter: float16 weights, full-integer int8.
        "tflite" if precision != Precision::Bf16 => None,
        "tflite" => {
            Some("TensorFlow Lite's converter makes float16 and int8 models, not bf16".to_string())
        }
        // Keras's mixed precision policies.
        "tensorflow" if precision != Precision::Int8 => None,
        "tensorflow" => Some(
            "TensorFlow runs int8 through TensorFlow Lite's conversion: the tflite engine"
                .to_string(),
        ),
        "tract" | "onnxruntime" => Some(format!(
            "ONNX's converters write no {precision} models, so edgeprof has none for {engine}"
        )),
        other => Some(format!(
            "edgeprof runs {other} in fp32 only so far (its {precision} conversion with the \
             framework's own tools is not built yet)"
        )),
    }
}

/// A built-in engine's version.
pub fn version(engine: &str) -> Option<&'static str> {
    match engine {
        "tract" => Some(tract::TRACT_VERSION),
        "candle" => Some(candle::CANDLE_VERSION),
        _ => None,
    }
}

/// Whether `engine` times a model layer by layer when a request asks for `layer_runs`: tract
/// (its node profile), and the external frameworks whose harness can.
pub fn profiles_layers(engine: &str) -> bool {
    engine == "tract" || external::find(engine).is_some_and(|f| f.layer_profile)
}

/// What to load: a zoo model (with its weight seed) or an ONNX file.
pub enum Source<'a> {
    Zoo {
        model: &'a Model,
        seed: u64,
    },
    /// An ONNX file with an optional (N, C, H, W) input shape override.
    OnnxFile {
        path: &'a Path,
        input_shape: Option<&'a [usize]>,
    },
    /// An ONNX file with every input bound as the user gave it (names, types, shapes, values).
    OnnxFed {
        path: &'a Path,
        inputs: &'a [crate::models::onnx_graph::BoundInput],
    },
}

/// A model loaded on a built-in engine, with its reproducible input.
pub enum Loaded {
    Tract {
        session: tract::TractSession,
        input: tract_onnx::prelude::Tensor,
    },
    Candle {
        session: candle::CandleSession,
        input: candle_core::Tensor,
    },
    /// tract with any number of inputs, of any element type.
    TractFed {
        session: tract::TractSession,
        inputs: tract_onnx::prelude::TVec<tract_onnx::prelude::TValue>,
    },
}

impl Loaded {
    /// Loads `source` on `engine` with `threads` threads in `precision`; the input is the
    /// values given (the run's input file), else drawn from `seed`.
    pub fn load(
        engine: &str,
        source: Source,
        threads: usize,
        (seed, given): (u64, Option<Vec<f32>>),
        precision: crate::collect::kernels::Precision,
    ) -> Result<Loaded, EngineError> {
        if let Some(reason) = precision_unsupported(engine, precision) {
            return Err(EngineError::UnsupportedModel {
                origin: engine.to_string(),
                reason,
            });
        }
        match (engine, source) {
            ("tract", Source::Zoo { .. })
                if precision != crate::collect::kernels::Precision::Fp32 =>
            {
                Err(EngineError::UnsupportedModel {
                    origin: engine.to_string(),
                    reason: format!(
                        "tract runs {precision} from the ONNX file converted to it (the zoo \
                         model itself is float32); edgeprof's run and bench convert it first"
                    ),
                })
            }
            ("tract", source) => {
                let session = match source {
                    Source::Zoo { model, seed } => tract::TractSession::load(
                        tract::ModelSource::Zoo { model, seed },
                        None,
                        threads,
                    )?,
                    Source::OnnxFile { path, input_shape } => tract::TractSession::load(
                        tract::ModelSource::OnnxFile(path),
                        input_shape,
                        threads,
                    )?,
                    Source::OnnxFed { path, inputs } => {
                        let (session, inputs) =
                            tract::TractSession::load_fed(path, inputs, threads, seed)?;
                        return Ok(Loaded::TractFed { session, inputs });
                    }
                };
                let input = match given {
                    Some(values) => session.input_from(values)?,
                    None => session.make_input(seed)?,
                };
                Ok(Loaded::Tract { session, input })
            }
            (
                "candle",
                Source::Zoo {
                    model,
                    seed: weights,
                },
            ) => {
                let session = candle::CandleSession::load_in(model, weights, threads, precision)?;
                let input = match given {
                    Some(values) => session.input_from(values)?,
                    None => session.make_input(seed)?,
                };
                Ok(Loaded::Candle { session, input })
            }
            ("candle", Source::OnnxFile { path, .. } | Source::OnnxFed { path, .. }) => {
                Err(EngineError::UnsupportedModel {
                    origin: path.display().to_string(),
                    reason:
                        "candle runs the zoo's models (built from their description); run ONNX \
                         files on tract"
                            .to_string(),
                })
            }
            (other, _) => Err(EngineError::UnsupportedModel {
                origin: other.to_string(),
                reason: format!(
                    "{other} is not a built-in engine (built in: {})",
                    BUILT_IN.join(", ")
                ),
            }),
        }
    }

    pub fn engine(&self) -> &'static str {
        match self {
            Loaded::Tract { .. } | Loaded::TractFed { .. } => "tract",
            Loaded::Candle { .. } => "candle",
        }
    }

    pub fn init_time(&self) -> Duration {
        match self {
            Loaded::Tract { session, .. } | Loaded::TractFed { session, .. } => session.init_time,
            Loaded::Candle { session, .. } => session.init_time,
        }
    }

    /// Threads the engine really runs with.
    pub fn threads(&self) -> usize {
        match self {
            Loaded::Tract { session, .. } | Loaded::TractFed { session, .. } => session.threads,
            Loaded::Candle { session, .. } => session.threads,
        }
    }

    pub fn input_shape(&self) -> &[usize] {
        match self {
            Loaded::Tract { session, .. } | Loaded::TractFed { session, .. } => {
                &session.input_shape
            }
            Loaded::Candle { session, .. } => &session.input_shape,
        }
    }

    /// Trainable parameters the engine built, where it knows (candle builds them itself; tract
    /// reads them from the ONNX graph).
    pub fn parameters(&self) -> Option<u64> {
        match self {
            Loaded::Tract { .. } | Loaded::TractFed { .. } => None,
            Loaded::Candle { session, .. } => Some(session.parameters),
        }
    }

    /// One inference on the loaded input: its first output's values.
    pub fn output(&self) -> Result<Vec<f32>, EngineError> {
        Ok(self
            .outputs()?
            .into_iter()
            .next()
            .map(|(_, v)| v)
            .unwrap_or_default())
    }

    /// Each layer's median time over `runs` profiled inferences, where the engine has a
    /// per-layer profile (tract's node profile; candle has none: None). Only the nodes tract
    /// could name after a layer of the model are kept.
    pub fn layer_profile(&self, runs: usize) -> Option<Result<Vec<tract::LayerTime>, EngineError>> {
        match self {
            Loaded::Tract { session, input } => Some(
                session
                    .profile(input, runs)
                    .map(|times| times.into_iter().filter(|t| t.mapped).collect()),
            ),
            Loaded::TractFed { session, inputs } => Some(
                session
                    .profile_fed(inputs, runs)
                    .map(|times| times.into_iter().filter(|t| t.mapped).collect()),
            ),
            Loaded::Candle { .. } => None,
        }
    }

    /// Every output of one inference on the loaded input, in the model's output order, each
    /// with its shape.
    pub fn outputs(&self) -> Result<Vec<tract::Output>, EngineError> {
        match self {
            Loaded::Tract { session, input } => session.run(input).map(|o| vec![o]),
            Loaded::Candle { session, input } => session.run(input).map(|o| vec![o]),
            Loaded::TractFed { session, inputs } => session.run_fed(inputs),
        }
    }

    /// One timed inference on the loaded input.
    pub fn time_one(&self) -> Result<Duration, EngineError> {
        match self {
            Loaded::Tract { session, input } => session.time_one(input),
            Loaded::Candle { session, input } => session.time_one(input),
            Loaded::TractFed { session, inputs } => session.time_fed(inputs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_engines_versions_come_from_the_build() {
        for engine in BUILT_IN {
            let version = version(engine).unwrap_or("none");
            let parts: Vec<&str> = version.split('.').collect();
            assert!(
                parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
                "{engine}: {version:?} is not a release version"
            );
        }
        assert_eq!(version("onnxruntime"), None);
    }
}

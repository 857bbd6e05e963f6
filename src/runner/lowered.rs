//! A condition's model in lower precision for the engines that run ONNX files (tract and
//! onnxruntime): the ONNX file (the zoo model's export or the user's own) converted with
//! onnxruntime's own tools — int8 by its quantization tool, static with calibration on seeded
//! inputs (or dynamic, where the onnxruntime options ask), fp16 by its float16 converter — and
//! kept in edgeprof's cache beside the exports. A file that is quantized already runs as it is.

use super::prepare::{model_file, run_conversion, Interpreters};
use crate::collect::kernels::Precision;
use crate::config::ModelRef;
use crate::error::Context;
use crate::models::images::ImageSet;
use crate::protocol::{Condition, FedInput};
use std::path::{Path, PathBuf};

/// Batches the static quantization calibrates its ranges on.
pub const CALIBRATION_BATCHES: usize = 8;

/// The first seed of the calibration batches, counted on from the measurement's seed: the
/// ranges come from other inputs than the ones the accuracy is measured on.
const CALIBRATION_SEED_OFFSET: u64 = 1_000;

/// The engines whose lower precisions edgeprof makes by converting the ONNX file.
pub fn converts(engine: &str, precision: Precision) -> bool {
    precision != Precision::Fp32 && matches!(engine, "tract" | "onnxruntime")
}

/// What an int8 conversion calibrates on: the user's folder of `.npy` batches, else the
/// sample photographs (where the input is an image and they are in use), else seeded batches.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calibration<'a> {
    pub given: Option<&'a Path>,
    pub images: Option<&'a ImageSet>,
}

impl Calibration<'_> {
    /// The photographs `c` calibrates on, if it does.
    fn photographs(&self, c: &Condition) -> Option<&ImageSet> {
        self.images
            .filter(|_| self.given.is_none() && super::prepare::photographs_fit(c))
    }
}

/// How onnxruntime's tool quantizes to int8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Ranges of the activations calibrated beforehand; the QDQ format.
    Static,
    /// Activations quantized at run time from each batch's own range (weights beforehand).
    Dynamic,
}

impl Method {
    /// The method an onnxruntime condition's options ask for (`quantization`), static unless
    /// they say otherwise; tract always reads the static QDQ file.
    pub fn of(
        c: &Condition,
        config_options: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Method, crate::error::BadInput> {
        if c.engine != "onnxruntime" {
            return Ok(Method::Static);
        }
        let value = c
            .options
            .get("quantization")
            .or_else(|| config_options.and_then(|o| o.get("quantization")));
        match value.map(|v| v.as_str()) {
            None | Some(Some("static")) => Ok(Method::Static),
            Some(Some("dynamic")) => Ok(Method::Dynamic),
            Some(other) => Err(crate::error::BadInput(format!(
                "onnxruntime option quantization = {} is not \"static\" or \"dynamic\"",
                other.map_or_else(|| "a non-string".to_string(), |s| format!("{s:?}"))
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Method::Static => "static",
            Method::Dynamic => "dynamic",
        }
    }
}

/// The ONNX file `c`'s engine runs in `c.precision`: the converted file, made (once, kept in
/// `cache`) by onnxruntime's tools under the onnxruntime interpreter of `interpreters`; the
/// file itself when it is quantized already and int8 is asked.
pub fn lowered_file(
    cache: &Path,
    c: &Condition,
    (classes, seed): (usize, u64),
    method: Method,
    calibration: Calibration,
    interpreters: &Interpreters,
) -> crate::error::Result<PathBuf> {
    let base = model_file(cache, c, classes, seed)?;
    if c.precision == Precision::Int8 {
        let ops = crate::models::onnx_graph::quantized_ops(&base)
            .map_err(|e| crate::error::BadInput(e.to_string()))?;
        if !ops.is_empty() {
            return Ok(base);
        }
    }
    let tag = match (c.precision, method) {
        (Precision::Int8, Method::Static) => {
            format!("int8-static-qdq-{}", calibration_tag(c, seed, calibration)?)
        }
        (Precision::Int8, Method::Dynamic) => "int8-dynamic".to_string(),
        (Precision::Fp16, _) => "fp16".to_string(),
        (other, _) => crate::error::bail!(crate::error::BadInput(format!(
            "edgeprof converts ONNX files to int8 and fp16 only, not {other}"
        ))),
    };
    let stem = match &c.model {
        ModelRef::Zoo(_) => base
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        _ => user_file_stem(&base, c)?,
    };
    let path = cache.join("models").join(format!("{stem}.{tag}.onnx"));
    if path.is_file() {
        return Ok(path);
    }
    let python = match interpreters.get("onnxruntime") {
        Some(Ok(p)) => p.clone(),
        Some(Err(why)) => crate::error::bail!(
            "{} in {} is converted by onnxruntime's tools here, and {why}",
            c.engine,
            c.precision
        ),
        None => crate::error::bail!("no onnxruntime interpreter was looked for"),
    };
    let calibration = if tag.starts_with("int8-static") {
        calibration_batches(cache, c, seed, calibration)?
    } else {
        Vec::new()
    };
    let request = serde_json::json!({
        "model": base,
        "output": path,
        "precision": c.precision.to_string(),
        "method": method.name(),
        "calibration": calibration,
    });
    let what = match c.precision {
        Precision::Int8 => format!(
            "onnxruntime's {} int8 quantization of {}",
            method.name(),
            c.model
        ),
        _ => format!("onnxruntime's float16 conversion of {}", c.model),
    };
    run_conversion(
        &what,
        &python,
        crate::engines::external::CONVERTER,
        &request,
        "converted",
        &path,
    )?;
    Ok(path)
}

/// The part of a converted file's name that says what `c` was calibrated on: a digest of the
/// user's folder (a changed set is converted again), the photographs from where `seed` starts
/// them, or the seeded batches of `seed`.
pub(crate) fn calibration_tag(
    c: &Condition,
    seed: u64,
    calibration: Calibration,
) -> crate::error::Result<String> {
    Ok(match (calibration.given, calibration.photographs(c)) {
        (Some(dir), _) => format!("cal{}", listing_digest(dir)?),
        (None, Some(set)) => format!(
            "cal{CALIBRATION_BATCHES}-images{}-from{}",
            set.digest(),
            set.start(seed)
        ),
        (None, None) => format!("cal{CALIBRATION_BATCHES}-seed{seed}"),
    })
}

/// A name for the conversions of the user's file `path`: its stem and a digest of where it is,
/// its size and time (a changed file is converted again) and what the condition feeds it.
fn user_file_stem(path: &Path, c: &Condition) -> crate::error::Result<String> {
    let full = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let hex = digest_of(
        &[full],
        &format!("{}/b{}/{:?}", c.input, c.batch, c.named_inputs),
    )?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string());
    Ok(format!("{stem}-{hex}"))
}

/// A digest of the `.npy` files in `dir` (names, sizes, times): a changed calibration set is
/// converted again.
fn listing_digest(dir: &Path) -> crate::error::Result<String> {
    let files = crate::models::npy::files_in(dir).map_err(|e| crate::error::BadInput(e.0))?;
    Ok(format!("{}-{}", files.len(), digest_of(&files, "")?))
}

/// Twelve hex digits of a digest of `files` (each one's path, size and time) and `more`.
fn digest_of(files: &[PathBuf], more: &str) -> crate::error::Result<String> {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for f in files {
        let meta = std::fs::metadata(f).with_context(|| format!("cannot read {}", f.display()))?;
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        digest.update(f.to_string_lossy().as_bytes());
        digest.update(meta.len().to_le_bytes());
        digest.update(modified.to_le_bytes());
    }
    digest.update(more.as_bytes());
    Ok(digest
        .finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The calibration batches of `c`: the `.npy` files of the user's folder (each one batch of
/// the model's first input), else the photographs after the ones the measurement is fed, else
/// seeded inputs drawn as every engine's input is, from seeds past the measurement's; written
/// as `.npy` files in `cache`.
pub(crate) fn calibration_batches(
    cache: &Path,
    c: &Condition,
    seed: u64,
    calibration: Calibration,
) -> crate::error::Result<Vec<Vec<FedInput>>> {
    if let Some(dir) = calibration.given {
        let files = crate::models::npy::files_in(dir).map_err(|e| crate::error::BadInput(e.0))?;
        return Ok(files
            .into_iter()
            .map(|file| {
                vec![FedInput {
                    name: String::new(),
                    file,
                }]
            })
            .collect());
    }
    let shape = [c.batch, c.input.channels, c.input.height, c.input.width];
    let dims = format!("{}x{}x{}x{}", shape[0], shape[1], shape[2], shape[3]);
    if let Some(set) = calibration.photographs(c) {
        // The pictures after the measured batch's, in turn.
        return (0..CALIBRATION_BATCHES)
            .map(|k| {
                let start = (set.start(seed) + c.batch * (k + 1)) % set.len();
                let name = format!("{dims}-images{}-from{start}.npy", set.digest());
                calibration_file(cache, &name, shape, || {
                    set.batch(shape, start)
                        .map_err(|e| crate::error::failed!("cannot make a calibration batch: {e}"))
                })
            })
            .collect();
    }
    let mut batches = Vec::with_capacity(CALIBRATION_BATCHES);
    for k in 0..CALIBRATION_BATCHES as u64 {
        let s = seed.wrapping_add(CALIBRATION_SEED_OFFSET + k);
        // An ONNX file's inputs bound as the run binds them (by name, or its image input).
        if matches!(c.model, ModelRef::Onnx(_)) {
            batches.push(super::prepare::fed_inputs(
                cache,
                c,
                c.named_inputs.as_deref(),
                s,
            )?);
            continue;
        }
        batches.push(calibration_file(
            cache,
            &format!("{dims}-seed{s}.npy"),
            shape,
            || Ok(crate::models::weights::input_data(&shape, s)),
        )?);
    }
    Ok(batches)
}

/// One calibration batch of `shape`: the values `make` gives, kept as the `.npy` file `name`
/// in the cache's calibration folder (made once), fed nameless, as the model's first input.
fn calibration_file(
    cache: &Path,
    name: &str,
    shape: [usize; 4],
    make: impl FnOnce() -> crate::error::Result<Vec<f32>>,
) -> crate::error::Result<Vec<FedInput>> {
    let file = cache.join("inputs").join("calibration").join(name);
    super::prepare::keep(&file, || {
        let values: Vec<f64> = make()?.iter().map(|&v| f64::from(v)).collect();
        crate::models::npy::encode(FLOAT, &shape, &values)
            .with_context(|| format!("cannot encode {}", file.display()))
    })?;
    Ok(vec![FedInput {
        name: String::new(),
        file,
    }])
}

/// ONNX's element type of float32.
const FLOAT: i32 = tract_onnx::pb::tensor_proto::DataType::Float as i32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::InputShape;

    fn condition(engine: &str, precision: Precision) -> Condition {
        Condition::new(
            engine,
            ModelRef::Zoo("resnet18".into()),
            InputShape {
                channels: 3,
                height: 32,
                width: 32,
            },
            1,
            1,
            crate::config::Device::Cpu,
        )
        .with_precision(precision)
    }

    #[test]
    fn tract_and_onnxruntime_convert_every_lower_precision_and_nothing_else_does() {
        assert!(converts("tract", Precision::Int8));
        assert!(converts("onnxruntime", Precision::Fp16));
        assert!(!converts("tract", Precision::Fp32));
        assert!(!converts("candle", Precision::Fp16));
    }

    #[test]
    fn the_method_is_static_unless_onnxruntimes_options_ask_for_dynamic() {
        let mut c = condition("onnxruntime", Precision::Int8);
        assert_eq!(Method::of(&c, None), Ok(Method::Static));
        let mut options = serde_json::Map::new();
        options.insert("quantization".into(), "dynamic".into());
        assert_eq!(Method::of(&c, Some(&options)), Ok(Method::Dynamic));
        c.options.insert("quantization".into(), "static".into());
        assert_eq!(Method::of(&c, Some(&options)), Ok(Method::Static));
        c.options.insert("quantization".into(), "fast".into());
        let said = Method::of(&c, None).err().map(|e| e.0).unwrap_or_default();
        assert!(said.contains("\"fast\" is not"), "{said}");
        // tract reads the static file whatever onnxruntime's options say.
        let t = condition("tract", Precision::Int8);
        assert_eq!(Method::of(&t, Some(&options)), Ok(Method::Static));
    }

    #[test]
    fn a_file_quantized_already_runs_as_it_is_without_onnxruntime() -> crate::error::Result<()> {
        use tract_onnx::pb;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("q.onnx");
        let node = |op: &str, input: &str, output: &str| pb::NodeProto {
            op_type: op.to_string(),
            input: vec![input.to_string(), "s".to_string()],
            output: vec![output.to_string()],
            ..Default::default()
        };
        let proto = pb::ModelProto {
            graph: Some(pb::GraphProto {
                node: vec![
                    node("QuantizeLinear", "x", "q"),
                    node("DequantizeLinear", "q", "y"),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        std::fs::write(&path, crate::models::onnx::encode(&proto))?;
        let mut c = condition("tract", Precision::Int8);
        c.model = ModelRef::Onnx(path.clone());
        // No interpreter is looked for: nothing is converted.
        let found = lowered_file(
            dir.path(),
            &c,
            (10, 7),
            Method::Static,
            Calibration::default(),
            &Interpreters::new(),
        )?;
        assert_eq!(found, path);
        Ok(())
    }

    #[test]
    fn a_given_calibration_folder_is_one_batch_per_npy_file() -> crate::error::Result<()> {
        let cache = tempfile::tempdir()?;
        let given = tempfile::tempdir()?;
        for name in ["b.npy", "a.npy", "notes.txt"] {
            std::fs::write(given.path().join(name), b"")?;
        }
        let c = condition("onnxruntime", Precision::Int8);
        let batches = calibration_batches(
            cache.path(),
            &c,
            7,
            Calibration {
                given: Some(given.path()),
                images: None,
            },
        )?;
        let files: Vec<(String, PathBuf)> = batches
            .into_iter()
            .flatten()
            .map(|f| (f.name, f.file))
            .collect();
        assert_eq!(
            files,
            [
                (String::new(), given.path().join("a.npy")),
                (String::new(), given.path().join("b.npy")),
            ]
        );
        Ok(())
    }

    #[test]
    fn calibration_batches_are_seeded_inputs_past_the_measured_one() -> crate::error::Result<()> {
        let dir = tempfile::tempdir()?;
        let c = condition("tract", Precision::Int8);
        let batches = calibration_batches(dir.path(), &c, 7, Calibration::default())?;
        assert_eq!(batches.len(), CALIBRATION_BATCHES);
        let first = crate::models::npy::read_file(&batches[0][0].file)
            .map_err(|e| crate::error::failed!("{e}"))?;
        assert_eq!(first.shape, [1, 3, 32, 32]);
        let expected: Vec<f64> = crate::models::weights::input_data(&[1, 3, 32, 32], 1_007)
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        assert_eq!(first.values, expected);
        Ok(())
    }
}

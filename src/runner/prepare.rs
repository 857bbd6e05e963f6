//! What a condition needs before its worker starts: the program that runs it (edgeprof's own
//! worker, the user's command, or a framework's harness under its interpreter) and, for the
//! external frameworks, the model file and input they read (exported once, kept in edgeprof's
//! cache), and where the first output goes for comparing engines.

use crate::config::{Config, ModelRef};
use crate::engines::external::{self, Framework, ModelInput};
use crate::error::Context;
use crate::models::images::ImageSet;
use crate::models::{onnx, weights, zoo};
use crate::protocol::Condition;
use crate::protocol::WorkerRequest;
use crate::runner::spawn::WorkerCommand;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::protocol::{file_stem, output_path, OUTPUTS};

/// Whether `engine` runs the zoo's own weights, so that its outputs are comparable.
pub fn runs_zoo_weights(engine: &str) -> bool {
    crate::engines::BUILT_IN.contains(&engine)
        || external::find(engine).is_some_and(|f| f.zoo_weights)
}

/// The zoo's build parameters of a condition.
fn zoo_params(c: &Condition, classes: usize) -> zoo::ModelParams {
    zoo::ModelParams {
        num_classes: classes,
        channels: c.input.channels,
        height: c.input.height,
        width: c.input.width,
        batch: c.batch,
    }
}

/// Writes `bytes` to `path` unless it is there already (the name says what it holds).
pub(crate) fn keep(
    path: &Path,
    make: impl FnOnce() -> crate::error::Result<Vec<u8>>,
) -> crate::error::Result<()> {
    if path.is_file() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    crate::results::write_atomic(path, &make()?)?;
    Ok(())
}

/// The input a condition's engine is fed, as little-endian f32, kept in `cache`, and what it
/// holds in words: photographs of `images` where the input is an image (1 or 3 channels),
/// else the values drawn from `seed`.
pub fn input_file(
    cache: &Path,
    c: &Condition,
    seed: u64,
    images: Option<&ImageSet>,
) -> crate::error::Result<(PathBuf, String)> {
    let shape = [c.batch, c.input.channels, c.input.height, c.input.width];
    let dims = format!("{}x{}x{}x{}", shape[0], shape[1], shape[2], shape[3]);
    let little = |values: Vec<f32>| values.iter().flat_map(|v| v.to_le_bytes()).collect();
    if let Some(set) = images.filter(|_| photographs_fit(c)) {
        let start = set.start(seed);
        let path = cache
            .join("inputs")
            .join(format!("{dims}-images{}-from{start}.f32", set.digest()));
        keep(&path, || {
            set.batch(shape, start)
                .map(little)
                .map_err(|e| crate::error::failed!("cannot make the input: {e}"))
        })?;
        return Ok((path, set.describe(c.batch, start)));
    }
    let path = cache.join("inputs").join(format!("{dims}-seed{seed}.f32"));
    keep(&path, || Ok(little(weights::input_data(&shape, seed))))?;
    Ok((path, seeded_note(seed)))
}

/// Whether `c`'s input is fed photographs when they are there: an image input (1 or 3
/// channels), not inputs bound by name.
pub fn photographs_fit(c: &Condition) -> bool {
    c.named_inputs.is_none()
        && crate::models::images::fits(c.input.channels, c.input.height, c.input.width)
}

/// The seeded input, in words for the record.
pub fn seeded_note(seed: u64) -> String {
    format!("seeded synthetic values, uniform in [-1, 1) (seed {seed})")
}

/// The photographs a run's inputs are made of, as `measure.input_data` asks: those set up
/// (auto, images), none (seeded); an error when images are asked for and not set up.
pub fn input_images(config: &Config) -> crate::error::Result<Option<ImageSet>> {
    use crate::config::InputData;
    match config.measure.input_data {
        InputData::Seeded => Ok(None),
        InputData::Auto => Ok(crate::engines::sample_images::set()),
        InputData::Images => {
            let dir = crate::engines::sample_images::dir()?;
            ImageSet::open(&dir).map(Some).map_err(|e| {
                crate::error::BadInput(format!("measure.input_data = \"images\", and {e}")).into()
            })
        }
    }
}

/// The ONNX file of a condition's model: the user's file, or the zoo model's export (with the
/// seeded weights every engine uses), kept in `cache`.
pub fn model_file(
    cache: &Path,
    c: &Condition,
    classes: usize,
    seed: u64,
) -> crate::error::Result<PathBuf> {
    match &c.model {
        ModelRef::Onnx(path) | ModelRef::Tflite(path) | ModelRef::Torch(path) => Ok(path.clone()),
        ModelRef::Zoo(name) => {
            let path = cache.join("models").join(format!(
                "{name}-{}-b{}-c{classes}-seed{seed}.onnx",
                c.input, c.batch
            ));
            keep(&path, || {
                let model = zoo::build(name, &zoo_params(c, classes))?;
                Ok(onnx::encode(&onnx::to_onnx(&model, seed)))
            })?;
            Ok(path)
        }
    }
}

/// The zoo model's description (its layers, as JSON) and its seeded parameters (one file of
/// little-endian f32, indexed by the description), kept in `cache`: what the frameworks that
/// build the model layer by layer read (TensorFlow's Keras model). Returns the description's path.
pub fn description_file(
    cache: &Path,
    c: &Condition,
    classes: usize,
    seed: u64,
) -> crate::error::Result<PathBuf> {
    let ModelRef::Zoo(name) = &c.model else {
        crate::error::bail!(
            "only the zoo's models have a description to build from, not ONNX files"
        );
    };
    let stem = format!("{name}-{}-b{}-c{classes}-seed{seed}", c.input, c.batch);
    let json = cache.join("models").join(format!("{stem}.json"));
    let weights = cache.join("models").join(format!("{stem}.weights.f32"));
    if json.is_file() && weights.is_file() {
        return Ok(json);
    }
    let model = zoo::build(name, &zoo_params(c, classes))?;
    write_description(&model, &json, &weights, seed)?;
    Ok(json)
}

/// Writes `model`'s description to `json` and its seeded parameters to `weights` (what
/// [`description_file`] keeps for the zoo's models; the cost model's probes are written
/// this way too).
pub fn write_description(
    model: &crate::models::graph::Model,
    json: &Path,
    weights: &Path,
    seed: u64,
) -> crate::error::Result<()> {
    let params: Vec<weights::Param> = model
        .layers
        .iter()
        .flat_map(|layer| weights::layer_params(&layer.op, &layer.name, seed))
        .collect();
    let mut index = Vec::new();
    let mut offset = 0usize;
    for p in &params {
        index.push(serde_json::json!({"name": p.name, "dims": p.dims, "offset": offset}));
        offset += p.data.len();
    }
    keep(weights, || {
        Ok(params
            .iter()
            .flat_map(|p| p.data.iter().flat_map(|v| v.to_le_bytes()))
            .collect())
    })?;
    let description = serde_json::json!({
        "model": model,
        "params": index,
        "weights_file": weights,
        "batch_norm_epsilon": weights::BN_EPSILON,
    });
    crate::results::write_atomic(json, &serde_json::to_vec(&description)?)?;
    Ok(())
}

/// The interpreters of the external frameworks a sweep runs, or why each cannot run.
pub type Interpreters = BTreeMap<String, Result<PathBuf, crate::error::Unavailable>>;

/// Finds the interpreter of every external framework among `conditions`.
pub fn interpreters(config: &Config, conditions: &[Condition]) -> Interpreters {
    let configured = config.interpreters();
    let mut out = Interpreters::new();
    let ort = external::find("onnxruntime");
    for c in conditions {
        let mut needs: Vec<&Framework> = Vec::new();
        if let Some(f) = external::find(&c.engine) {
            needs.push(f);
            // tflite runs what TensorFlow converts.
            if f.model == ModelInput::Tflite {
                needs.extend(external::find("tensorflow"));
            }
        }
        // Lower precisions of ONNX files are converted by onnxruntime's tools.
        if super::lowered::converts(&c.engine, c.precision) {
            needs.extend(ort);
        }
        for f in needs {
            if out.contains_key(f.name) {
                continue;
            }
            let readiness = crate::engines::env::readiness(f, configured.get(f.name));
            let found = match readiness.interpreter() {
                Some(i) => Ok(i.python.clone()),
                None => Err(readiness.blocker(f.name).unwrap_or_default().into()),
            };
            out.insert(f.name.to_string(), found);
        }
    }
    out
}

/// Longest a conversion may take (VGG-19 at 224×224 takes minutes on a small board, to .tflite
/// or to int8 with its calibration).
const CONVERT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// The .tflite file of a zoo model, converted by the TensorFlow harness from its Keras model
/// (with a `.json` note of the Keras model's parameters and TensorFlow's version), kept in
/// `cache`.
pub fn tflite_file(
    cache: &Path,
    c: &Condition,
    (classes, seed): (usize, u64),
    calibration: super::lowered::Calibration,
    interpreters: &Interpreters,
) -> crate::error::Result<PathBuf> {
    use crate::collect::kernels::Precision;
    let ModelRef::Zoo(name) = &c.model else {
        crate::error::bail!("tflite runs the zoo's models, not ONNX files");
    };
    // float32 keeps the name it always had; the lower precisions say how they were made.
    let tag = match c.precision {
        Precision::Fp32 => String::new(),
        Precision::Fp16 => ".fp16".to_string(),
        Precision::Int8 => format!(
            ".int8-full-{}",
            super::lowered::calibration_tag(c, seed, calibration)?
        ),
        other => crate::error::bail!(crate::error::BadInput(format!(
            "TensorFlow Lite's converter makes float16 and int8 models, not {other}"
        ))),
    };
    let path = cache.join("models").join(format!(
        "{name}-{}-b{}-c{classes}-seed{seed}{tag}.tflite",
        c.input, c.batch
    ));
    let note = PathBuf::from(format!("{}.json", path.display()));
    if path.is_file() && note.is_file() {
        return Ok(path);
    }
    let python = match interpreters.get("tensorflow") {
        Some(Ok(p)) => p.clone(),
        Some(Err(why)) => {
            crate::error::bail!("tflite runs the .tflite files TensorFlow converts here, and {why}")
        }
        None => crate::error::bail!("no TensorFlow interpreter was looked for"),
    };
    let tensorflow = external::find("tensorflow")
        .and_then(|f| f.harness())
        .ok_or_else(|| crate::error::failed!("the tensorflow harness is not in this build"))?;
    let description = description_file(cache, c, classes, seed)?;
    let mut convert = c.clone();
    convert.engine = "tensorflow".to_string();
    convert.threads = 0;
    convert.device = crate::config::Device::Cpu;
    let calibration = if c.precision == Precision::Int8 {
        super::lowered::calibration_batches(cache, c, seed, calibration)?
    } else {
        Vec::new()
    };
    let request = serde_json::json!({
        "condition": convert,
        "warmup": 0, "iterations": 1, "repeats": 1, "seed": seed, "classes": classes,
        "model_file": description,
        "export_tflite": path,
        "calibration": calibration,
    });
    run_conversion(
        &match c.precision {
            Precision::Fp32 => "TensorFlow's conversion to .tflite".to_string(),
            other => format!("TensorFlow Lite's {other} conversion"),
        },
        &python,
        &tensorflow,
        &request,
        "exported",
        &path,
    )?;
    Ok(path)
}

/// Runs a conversion `program` under `python` with `request` on its stdin, and checks that it
/// answered `done` (a JSON record of that type) and wrote `path`; `what` names the conversion
/// in errors.
pub(crate) fn run_conversion(
    what: &str,
    python: &Path,
    program: &str,
    request: &serde_json::Value,
    done: &str,
    path: &Path,
) -> crate::error::Result<()> {
    let mut command = crate::collect::child::Spec::new(python);
    command.args(["-c", program]);
    let (status, out, err) =
        crate::engines::env::run_collect(&command, request.to_string().as_bytes(), CONVERT_TIMEOUT)
            .map_err(|why| crate::error::failed!("{what} failed: {why}"))?;
    // The program's own error record says it best; else the last words on stderr.
    for line in out.lines().rev() {
        let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match record["type"].as_str() {
            Some(t) if t == done && path.is_file() => return Ok(()),
            Some("error") => crate::error::bail!(
                "{what} failed: {}",
                record["message"].as_str().unwrap_or("")
            ),
            _ => {}
        }
    }
    if !status.success() {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        crate::error::bail!("{what} failed ({status}): {}", last.trim());
    }
    crate::error::bail!(
        "{what} wrote no file ({} said {:?})",
        python.display(),
        out.trim()
    )
}

/// A condition made ready to start: the program and the request it reads.
pub struct Prepared {
    pub command: WorkerCommand,
    pub request: WorkerRequest,
}

/// Writes the values of every input of an ONNX file fed by name (`named`, as `matrix.inputs`
/// gives a set) as `.npy` files in `cache` ([`write_fed`]).
pub(crate) fn fed_inputs(
    cache: &Path,
    c: &Condition,
    named: Option<&str>,
    seed: u64,
) -> crate::error::Result<Vec<crate::protocol::FedInput>> {
    use crate::models::onnx_graph::{bind_file_inputs, bind_undeclared, InputSpec};
    let specs = match named {
        Some(named) => crate::config::named_specs(named)?,
        None => vec![InputSpec::image(c.input)],
    };
    let batch = crate::config::named_batch(named, c.batch);
    let bound = match &c.model {
        // A PyTorch program declares nothing to bind against.
        ModelRef::Torch(_) => bind_undeclared(&specs, batch)
            .map_err(|e| crate::error::BadInput(format!("{}: {e}", c.model)))?,
        ModelRef::Onnx(path) => bind_file_inputs(path, &specs, batch)
            .map_err(|e| crate::error::BadInput(e.to_string()))?,
        other => crate::error::bail!("{other} is not fed by name"),
    };
    write_fed(
        &cache.join("inputs"),
        &format!("{}-seed{seed}", file_stem(&c.id)),
        &bound,
        seed,
    )
}

/// Writes the values an ONNX file's inputs are fed as `.npy` files `STEM-K.npy` in `dir`:
/// the given values, else the seeded ones (input `k` with `seed + k`, as every engine feeds it).
pub fn write_fed(
    dir: &Path,
    stem: &str,
    inputs: &[crate::models::onnx_graph::BoundInput],
    seed: u64,
) -> crate::error::Result<Vec<crate::protocol::FedInput>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut fed = Vec::with_capacity(inputs.len());
    for (k, input) in inputs.iter().enumerate() {
        let file = dir.join(format!("{stem}-{k}.npy"));
        let values = input.values_or_seeded(seed.wrapping_add(k as u64));
        crate::models::npy::write_file(&file, input.elem, &input.shape, &values)
            .with_context(|| format!("cannot write the values of input {}", input.name))?;
        fed.push(crate::protocol::FedInput {
            name: input.name.clone(),
            file,
        });
    }
    Ok(fed)
}

/// The program and request of `condition`; `base` is the request without the files.
pub fn prepare(
    config: &Config,
    condition: &Condition,
    mut request: WorkerRequest,
    edgeprof: &Path,
    results_dir: &Path,
    interpreters: &Interpreters,
) -> crate::error::Result<Prepared> {
    if config.measure.check_outputs && runs_zoo_weights(&condition.engine) {
        let path = output_path(results_dir, &condition.id);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        request.output_file = Some(path);
    }
    // A .tflite file runs as it is, at the inputs it declares.
    if let ModelRef::Tflite(path) | ModelRef::Torch(path) = &condition.model {
        request.model_file = Some(path.clone());
    }
    // An ONNX file fed by name, and a PyTorch program (which declares no inputs: fed by name,
    // or its image input, unless the caller, `bench`, feeds it already): every input's values,
    // as every engine is fed them.
    let by_name = match &condition.model {
        ModelRef::Onnx(_) => condition.named_inputs.is_some(),
        ModelRef::Torch(_) => request.inputs.is_empty(),
        _ => false,
    };
    if by_name {
        let cache = crate::engines::env::cache_dir()?;
        request.inputs = fed_inputs(
            &cache,
            condition,
            condition.named_inputs.as_deref(),
            config.measure.seed,
        )?;
        request.input_note = Some(format!(
            "the inputs by name: the values given, else {}",
            seeded_note(config.measure.seed)
        ));
    }
    let images = input_images(config)?;
    // The built-in engines read the same input file as the frameworks (photographs, or the
    // values they would draw from the seed themselves).
    if crate::engines::BUILT_IN.contains(&condition.engine.as_str())
        && request.inputs.is_empty()
        && matches!(condition.model, ModelRef::Zoo(_) | ModelRef::Onnx(_))
    {
        let cache = crate::engines::env::cache_dir()?;
        let (file, note) = input_file(&cache, condition, config.measure.seed, images.as_ref())?;
        request.input_file = Some(file);
        request.input_note = Some(note);
    }
    // tract runs a lower precision from the ONNX file onnxruntime's tools convert.
    if condition.engine == "tract" && super::lowered::converts("tract", condition.precision) {
        let cache = crate::engines::env::cache_dir()?;
        request.model_file = Some(lowered(config, condition, &cache, interpreters)?);
    }
    let command = match (&config.command, external::find(&condition.engine)) {
        (Some(c), _) if condition.engine == "command" => WorkerCommand {
            program: c.program.clone(),
            args: c.args.clone(),
        },
        (_, Some(f)) => external_command(
            config,
            condition,
            f,
            &mut request,
            (interpreters, images.as_ref()),
        )?,
        _ => WorkerCommand::edgeprof(edgeprof),
    };
    Ok(Prepared { command, request })
}

/// The ONNX file of `condition` converted to its precision ([`super::lowered::lowered_file`]).
fn lowered(
    config: &Config,
    condition: &Condition,
    cache: &Path,
    interpreters: &Interpreters,
) -> crate::error::Result<PathBuf> {
    let options = config.frameworks.get("onnxruntime").map(|s| &s.options);
    let method = super::lowered::Method::of(condition, options)?;
    let images = input_images(config)?;
    super::lowered::lowered_file(
        cache,
        condition,
        (config.matrix.classes, config.measure.seed),
        method,
        super::lowered::Calibration {
            given: config.measure.calibration.as_deref(),
            images: images.as_ref(),
        },
        interpreters,
    )
    .with_context(|| {
        format!(
            "cannot make {} ready for {} in {}",
            condition.model, condition.engine, condition.precision
        )
    })
}

fn external_command(
    config: &Config,
    condition: &Condition,
    f: &Framework,
    request: &mut WorkerRequest,
    (interpreters, images): (&Interpreters, Option<&ImageSet>),
) -> crate::error::Result<WorkerCommand> {
    let python = match interpreters.get(f.name) {
        Some(Ok(p)) => p.clone(),
        Some(Err(why)) => crate::error::bail!("{why}"),
        None => crate::error::bail!("no interpreter was looked for {}", f.name),
    };
    let harness = f
        .harness()
        .ok_or_else(|| crate::error::failed!("the {} harness is not in this build yet", f.name))?;
    let cache = crate::engines::env::cache_dir()?;
    let seed = config.measure.seed;
    // A .tflite file the caller gives (the user's own) runs at the inputs it declares.
    let own_tflite = f.model == ModelInput::Tflite && request.model_file.is_some();
    if !own_tflite && request.inputs.is_empty() {
        let (file, note) = input_file(&cache, condition, seed, images)?;
        request.input_file = Some(file);
        request.input_note = Some(note);
    }
    let classes = config.matrix.classes;
    let model = match f.model {
        ModelInput::Onnx if super::lowered::converts(f.name, condition.precision) => {
            Some(lowered(config, condition, &cache, interpreters))
        }
        ModelInput::Onnx => Some(model_file(&cache, condition, classes, seed)),
        ModelInput::Tflite if own_tflite => None,
        // A description the caller wrote (the cost model's probes, which the zoo cannot build).
        ModelInput::Description | ModelInput::TorchvisionWithZooWeights
            if request.model_file.is_some() =>
        {
            None
        }
        ModelInput::Description | ModelInput::TorchvisionWithZooWeights => {
            Some(description_file(&cache, condition, classes, seed))
        }
        ModelInput::Tflite => Some(tflite_file(
            &cache,
            condition,
            (classes, seed),
            super::lowered::Calibration {
                given: config.measure.calibration.as_deref(),
                images,
            },
            interpreters,
        )),
    };
    if let Some(model) = model {
        request.model_file =
            Some(model.with_context(|| {
                format!("cannot make {} ready for {}", condition.model, f.name)
            })?);
    }
    // PyTorch quantizes in its harness, calibrated on the batches every int8 conversion uses.
    if f.name == "pytorch"
        && condition.precision == crate::collect::kernels::Precision::Int8
        && matches!(condition.model, ModelRef::Zoo(_))
    {
        request.calibration = super::lowered::calibration_batches(
            &cache,
            condition,
            seed,
            super::lowered::Calibration {
                given: config.measure.calibration.as_deref(),
                images,
            },
        )?;
    }
    // The config's options, with the condition's own (the tuner's) over them.
    let mut options = config
        .frameworks
        .get(f.name)
        .map(|s| s.options.clone())
        .unwrap_or_default();
    options.extend(condition.options.clone());
    if !options.is_empty() {
        request.options = Some(options);
    }
    Ok(WorkerCommand {
        program: python,
        // The harness is a constant program; the condition reaches it as JSON on stdin.
        args: vec!["-c".to_string(), harness],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_are_plain_file_names() {
        assert_eq!(
            file_stem("tract/resnet34/3x32x32/b1/t0/cpu"),
            "tract_resnet34_3x32x32_b1_t0_cpu"
        );
        assert_eq!(
            file_stem("onnxruntime//a b/m.onnx/gpu:0"),
            "onnxruntime__a_b_m.onnx_gpu_0"
        );
        assert!(runs_zoo_weights("candle") && runs_zoo_weights("onnxruntime"));
        assert!(runs_zoo_weights("pytorch") && !runs_zoo_weights("command"));
    }

    #[test]
    fn the_input_file_holds_the_built_in_engines_input() -> crate::error::Result<()> {
        let dir = tempfile::tempdir()?;
        let c = Condition::new(
            "onnxruntime",
            ModelRef::Zoo("resnet34".into()),
            crate::models::InputShape {
                channels: 3,
                height: 32,
                width: 32,
            },
            2,
            1,
            crate::config::Device::Cpu,
        );
        let (path, note) = input_file(dir.path(), &c, 7, None)?;
        assert_eq!(note, seeded_note(7));
        let bytes = std::fs::read(&path)?;
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(values, weights::input_data(&[2, 3, 32, 32], 7));
        // Kept: a second call finds it.
        assert_eq!(input_file(dir.path(), &c, 7, None)?.0, path);
        Ok(())
    }
}

//! Profiles measured through a framework's own op profiler, in its harness: onnxruntime's
//! (`SessionOptions.enable_profiling`), whose node times are summed into the same layer groups
//! as tract's.

use super::{profile_groups, zoo_model, Measure, Profile};
use crate::engines::external::{self, ModelInput};
use crate::runner::protocol::{NodeTime, WorkerRequest};
use anyhow::Context;
use std::path::Path;
use std::time::Duration;

/// The engines whose op profiles the cost model reads, beside tract (its node profile, read in
/// this process).
pub const PROFILED_ENGINES: [&str; 2] = ["tract", "onnxruntime"];

/// Timed runs per repeat, and repeats, of an external engine's end-to-end latency: the harness
/// times a fixed number (it cannot stop once an interval is tight), spread over repeats so the
/// interval covers their spread.
const RUNS_PER_REPEAT: usize = 20;
const REPEATS: usize = 5;

/// Longest one external profile may take.
const TIMEOUT: Duration = Duration::from_secs(900);

/// Profiles zoo model, probe or ONNX file `name` at `input` with `engine` (an external
/// framework whose harness has an op profiler) on `threads` threads: its harness runs in a
/// process of its own, under `python` if given, else the interpreter `edgeprof env setup`
/// made (or the system's that has the framework).
pub fn measure_external(
    engine: &str,
    name: &str,
    input: &str,
    threads: usize,
    how: Measure,
    python: Option<&Path>,
) -> anyhow::Result<Profile> {
    use crate::config::{Device, ModelRef};
    use crate::runner::matrix::Condition;
    let framework = external::find(engine)
        .filter(|f| f.model == ModelInput::Onnx)
        .ok_or_else(|| {
            crate::error::BadInput(format!(
                "the cost model reads the op profiles of {} only, not {engine}'s",
                PROFILED_ENGINES.join(" and ")
            ))
        })?;
    let model = zoo_model(name, input)?;
    let scratch = Scratch::new()?;
    // The file the framework runs: the user's own, or the zoo's (or probe's) seeded export.
    let file = if super::is_file(name) {
        Path::new(name).to_path_buf()
    } else {
        let path = scratch.0.join("model.onnx");
        let proto = crate::models::onnx::to_onnx(&model, crate::models::onnx::DEFAULT_SEED);
        std::fs::write(&path, crate::models::onnx::encode(&proto))
            .with_context(|| format!("cannot write {}", path.display()))?;
        path
    };
    let shape: crate::models::InputShape = input
        .parse()
        .map_err(|e| crate::error::BadInput(format!("input {input:?}: {e}")))?;
    let condition = Condition::new(
        framework.name,
        ModelRef::Onnx(file),
        shape,
        1,
        threads,
        Device::Cpu,
    );
    let mut config = crate::config::parse("", Path::new("edgeprof-costmodel.toml"))?;
    config.measure.check_outputs = false;
    if let Some(python) = python {
        config.frameworks.insert(
            framework.name.to_string(),
            crate::config::FrameworkSettings {
                python: Some(python.to_path_buf()),
                options: serde_json::Map::new(),
            },
        );
    }
    let request = WorkerRequest {
        condition: condition.clone(),
        warmup: 3,
        warmup_seconds: 0.0,
        iterations: how.min_runs.max(RUNS_PER_REPEAT),
        min_duration_s: 0.0,
        repeats: REPEATS,
        seed: config.measure.seed,
        classes: config.matrix.classes,
        counters: false,
        model_file: None,
        input_file: None,
        output_file: None,
        options: None,
        layer_runs: how.layer_runs.max(1),
    };
    let interpreters =
        crate::runner::prepare::interpreters(&config, std::slice::from_ref(&condition));
    let program = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    let prepared = crate::runner::prepare::prepare(
        &config,
        &condition,
        request,
        &program,
        &scratch.0,
        &interpreters,
    )?;
    let limits = crate::runner::spawn::RunLimits {
        timeout: TIMEOUT,
        sample_interval: Duration::from_secs(1),
    };
    let attempt = crate::runner::spawn::run_worker(
        &prepared.command,
        &prepared.request,
        limits,
        &crate::collect::stop::Cancel::new(),
        |_| {},
    );
    let run = attempt.outcome.map_err(|f| anyhow::anyhow!("{f}"))?;
    if run.layers.is_empty() {
        anyhow::bail!("{engine}'s harness reported no op profile");
    }
    let times: Vec<f64> = run.repeats.concat();
    let latency_ms = crate::stats::median(&times)
        .ok_or_else(|| anyhow::anyhow!("{engine}'s harness reported no timed run"))?;
    let interval =
        crate::stats::median_interval_of_repeats(&run.repeats, crate::stats::BOOTSTRAP_ROUNDS)
            .unwrap_or((latency_ms, latency_ms));
    let groups = profile_groups(&model, &layer_times(&run.layers));
    Ok(Profile::one_round(
        framework.name,
        (name, input, threads),
        groups,
        (latency_ms, interval),
        times,
    ))
}

/// A framework's node times as tract's layer times: a node is named after the ONNX node it
/// runs, or, fused, after one of its members (onnxruntime names a fused convolution after its
/// batch norm, say), so a group sums every node named after any of its layers; the rest (the
/// framework's own layout conversions) stay in the end-to-end latency only.
fn layer_times(nodes: &[NodeTime]) -> Vec<crate::engines::tract::LayerTime> {
    nodes
        .iter()
        .map(|n| crate::engines::tract::LayerTime {
            layer: n.name.clone(),
            mapped: true,
            ms_per_run: n.ms,
            runs_ms: Vec::new(),
            tract_nodes: 1,
        })
        .collect()
}

/// A directory of this process's own for the model file a framework runs, removed with it.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("edgeprof-costmodel-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot make a scratch directory {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

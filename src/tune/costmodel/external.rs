//! Profiles measured through a framework's own op profiler, in its harness, and summed into the
//! same layer groups as tract's: onnxruntime's (`SessionOptions.enable_profiling`), and
//! PyTorch's eager module times (hooks before and after every module's forward).

use super::{profile_groups, zoo_model, Measure, Profile};
use crate::engines::external::{self, ModelInput};
use crate::engines::tract::LayerTime;
use crate::error::Context;
use crate::protocol::{NodeTime, WorkerRequest};
use std::path::Path;
use std::time::Duration;

/// The engines whose op profiles the cost model reads, beside tract (its node profile, read in
/// this process).
pub const PROFILED_ENGINES: [&str; 3] = ["tract", "onnxruntime", "pytorch"];

/// Whether `engine` can profile an ONNX file: tract and onnxruntime run files; PyTorch runs
/// the zoo's models (torchvision's) and probes (their description), not files.
pub fn profiles_files(engine: &str) -> bool {
    external::find(engine).is_none_or(|f| f.model == ModelInput::Onnx)
}

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
) -> crate::error::Result<Profile> {
    use crate::config::{Device, ModelRef};
    use crate::protocol::Condition;
    let framework = external::find(engine)
        .filter(|f| PROFILED_ENGINES.contains(&f.name))
        .ok_or_else(|| {
            crate::error::BadInput(format!(
                "the cost model reads the op profiles of {} only, not {engine}'s",
                PROFILED_ENGINES.join(", ")
            ))
        })?;
    if super::graph_probe::seed_of(name).is_some() {
        return Err(crate::error::BadInput(format!(
            "{name} is a graph probe, profiled with tract only"
        ))
        .into());
    }
    let file = super::is_file(name);
    // A file's groups come from its own analysis; the zoo's models and probes are built.
    let model = if file {
        None
    } else {
        Some(zoo_model(name, input)?)
    };
    let scratch = crate::bench::scratch_dir("edgeprof-costmodel-")?;
    let seed = crate::models::onnx::DEFAULT_SEED;
    // What the framework runs: an ONNX file (the user's own, or the zoo's or probe's seeded
    // export), or the zoo model by name with its description (a probe's written here, since
    // only the cost model can build one).
    let mut description = None;
    let model_ref = if framework.model != ModelInput::Onnx {
        if super::is_file(name) {
            return Err(crate::error::BadInput(format!(
                "{engine} runs the zoo's models and the cost model's probes, not ONNX files \
                 (profile {name} with tract or onnxruntime)"
            ))
            .into());
        }
        if let (Some(model), Some(_)) = (&model, super::probe::seed_of(name)) {
            let json = scratch.path().join("model.json");
            crate::runner::prepare::write_description(
                model,
                &json,
                &scratch.path().join("model.weights.f32"),
                seed,
            )?;
            description = Some(json);
        }
        ModelRef::Zoo(name.to_string())
    } else if let Some(model) = &model {
        let path = scratch.path().join("model.onnx");
        let proto = crate::models::onnx::to_onnx(model, seed);
        std::fs::write(&path, crate::models::onnx::encode(&proto))
            .with_context(|| format!("cannot write {}", path.display()))?;
        ModelRef::Onnx(path)
    } else {
        ModelRef::Onnx(Path::new(name).to_path_buf())
    };
    // A file fed by name runs with those inputs; an image shape (CxHxW) the old way.
    let named = file && input.contains('=');
    let shape: crate::models::InputShape = if named {
        crate::models::InputShape::default()
    } else {
        input.parse().map_err(|e| {
            crate::error::BadInput(format!(
                "input {input:?}: {e} ({engine} profiles a file at an image shape or at its \
                 inputs by name: --file-input NAME=DIMS)"
            ))
        })?
    };
    let mut condition = Condition::new(framework.name, model_ref, shape, 1, threads, Device::Cpu);
    if named {
        condition = condition.with_named_inputs(input);
    }
    let mut config = crate::config::parse("", Path::new("edgeprof-costmodel.toml"))?;
    config.measure.check_outputs = false;
    if let Some(python) = python {
        config.set_python(framework.name, python);
    }
    let request = WorkerRequest {
        warmup: 3,
        iterations: how.min_runs.max(RUNS_PER_REPEAT),
        repeats: REPEATS,
        model_file: description,
        layer_runs: how.layer_runs.max(1),
        ..WorkerRequest::new(
            condition.clone(),
            config.measure.seed,
            config.matrix.classes,
        )
    };
    let interpreters =
        crate::runner::prepare::interpreters(&config, std::slice::from_ref(&condition));
    let program = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    let prepared = crate::runner::prepare::prepare(
        &config,
        &condition,
        request,
        &program,
        scratch.path(),
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
    let run = attempt.outcome.map_err(|f| crate::error::failed!("{f}"))?;
    if run.layers.is_empty() {
        crate::error::bail!("{engine}'s harness reported no op profile");
    }
    let times: Vec<f64> = run.repeats.concat();
    let latency_ms = crate::stats::median(&times)
        .ok_or_else(|| crate::error::failed!("{engine}'s harness reported no timed run"))?;
    let interval =
        crate::stats::median_interval_of_repeats(&run.repeats, crate::stats::BOOTSTRAP_ROUNDS)
            .unwrap_or((latency_ms, latency_ms));
    let groups = match &model {
        Some(model) if framework.model != ModelInput::Onnx => {
            profile_groups(model, &module_times(model, &run.layers))
        }
        Some(model) => profile_groups(model, &layer_times(&run.layers)),
        None => super::timed(super::groups_of(name, input)?, &layer_times(&run.layers)),
    };
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
pub(super) fn layer_times(nodes: &[NodeTime]) -> Vec<LayerTime> {
    nodes.iter().map(|n| layer_time(&n.name, n.ms)).collect()
}

/// The node times of a quantized model's run as layer times: the nodes a quantization tool
/// added or fused are named after the layer they serve (tract: `features.0.2_QuantizeLinear`,
/// `…_DequantizeLinear`; onnxruntime's fused integer kernels: `features.0.0_token_1`), so they
/// count to that layer; the model input's own (`input_QuantizeLinear`) stays in the
/// end-to-end latency. The nodes of one layer are summed into its one time.
pub(super) fn quantized_layer_times(nodes: &[NodeTime]) -> Vec<LayerTime> {
    let mut out: Vec<LayerTime> = Vec::new();
    for n in nodes {
        let layer = quantized_layer(&n.name);
        match out.iter_mut().find(|t| t.layer == layer) {
            Some(t) => t.ms_per_run += n.ms,
            None => out.push(layer_time(layer, n.ms)),
        }
    }
    out
}

/// The layer a quantized model's node serves, by its name.
fn quantized_layer(node: &str) -> &str {
    let mut name = node;
    loop {
        let before = name;
        for suffix in ["_QuantizeLinear", "_DequantizeLinear"] {
            name = name.strip_suffix(suffix).unwrap_or(name);
        }
        if let Some((head, n)) = name.rsplit_once("_token_") {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                name = head;
            }
        }
        if name == before {
            return name;
        }
    }
}

fn layer_time(layer: &str, ms: f64) -> LayerTime {
    LayerTime {
        layer: layer.to_string(),
        mapped: true,
        ms_per_run: ms,
        runs_ms: Vec::new(),
        tract_nodes: 1,
    }
}

/// PyTorch's module times as layer times. A module named after a layer is that layer (the zoo
/// names its layers after torchvision's modules, a second call of one module `name_1`). The
/// own time of a block (its time less its sub-modules') is that of its functional operators:
/// the layers no module ran whose nearest enclosing module it is (`layer1.0.add`, a ShuffleNet
/// unit's `cat`, `shuffle` and `chunk.0`; the model's own, named "", is `flatten`'s). It is
/// shared among them by their analytic work (FLOPs + DRAM bytes). A block with no such layer
/// only adds Python's call overhead, which stays in the end-to-end latency.
pub(super) fn module_times(
    model: &crate::models::graph::Model,
    nodes: &[NodeTime],
) -> Vec<LayerTime> {
    use std::collections::HashMap;
    let costs = crate::models::cost::analyze(model);
    let ran: HashMap<&str, f64> = nodes.iter().map(|n| (n.name.as_str(), n.ms)).collect();
    let mut out = Vec::new();
    // Each functional layer under the module that ran it: its name's longest prefix that ran.
    let mut owned: HashMap<&str, Vec<(&str, f64)>> = HashMap::new();
    for (layer, cost) in model.layers.iter().zip(&costs.layers) {
        let name = layer.name.as_str();
        if let Some(ms) = ran.get(name) {
            out.push(layer_time(name, *ms));
            continue;
        }
        let owner = name
            .char_indices()
            .rev()
            .filter(|(_, c)| *c == '.')
            .map(|(i, _)| &name[..i])
            .chain(std::iter::once(""))
            .find(|prefix| ran.contains_key(prefix));
        if let Some(owner) = owner {
            let work = (cost.flops + cost.dram_bytes) as f64;
            owned.entry(owner).or_default().push((name, work));
        }
    }
    for (owner, layers) in owned {
        let ms = ran.get(owner).copied().unwrap_or(0.0);
        let work: f64 = layers.iter().map(|(_, w)| w).sum();
        for (layer, w) in &layers {
            let share = if work > 0.0 {
                w / work
            } else {
                1.0 / layers.len() as f64
            };
            out.push(layer_time(layer, ms * share));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ms: f64) -> NodeTime {
        NodeTime {
            name: name.into(),
            op: String::new(),
            ms,
        }
    }

    fn time_of(times: &[LayerTime], layer: &str) -> f64 {
        times
            .iter()
            .filter(|t| t.layer == layer)
            .map(|t| t.ms_per_run)
            .sum()
    }

    #[test]
    fn a_blocks_own_time_goes_to_the_functional_layers_no_module_ran() -> crate::error::Result<()> {
        let model = super::super::zoo_model("shufflenet_v2_x0_5", "3x64x64")?;
        let functional = ["Concat", "ChannelShuffle", "ChannelSlice", "Flatten"];
        // As the harness reports them: every module (a layer, or a block) and the model ("").
        let mut nodes: Vec<NodeTime> = model
            .layers
            .iter()
            .filter(|l| !functional.contains(&l.op.kind()))
            .map(|l| node(&l.name, 0.1))
            .collect();
        nodes.extend([
            node("", 0.05),
            node("stage2", 0.01),
            node("stage2.0", 0.3),
            node("stage2.1", 0.2),
        ]);
        let times = module_times(&model, &nodes);
        let costs = crate::models::cost::analyze(&model);
        let work = |name: &str| {
            model
                .layers
                .iter()
                .zip(&costs.layers)
                .find(|(l, _)| l.name == name)
                .map_or(0.0, |(_, c)| (c.flops + c.dram_bytes) as f64)
        };
        // A unit's own time, shared by work among its concatenation and shuffle.
        let (cat, shuffle) = (work("stage2.0.cat"), work("stage2.0.shuffle"));
        assert!((time_of(&times, "stage2.0.cat") - 0.3 * cat / (cat + shuffle)).abs() < 1e-12);
        assert!(
            (time_of(&times, "stage2.0.cat") + time_of(&times, "stage2.0.shuffle") - 0.3).abs()
                < 1e-12
        );
        // The split (`chunk`, not a module) is the next unit's, with its own concatenation.
        assert!(time_of(&times, "stage2.1.chunk.0") > 0.0 || time_of(&times, "stage2.1.cat") > 0.0);
        let unit: f64 = [
            "stage2.1.chunk.0",
            "stage2.1.chunk.1",
            "stage2.1.cat",
            "stage2.1.shuffle",
        ]
        .iter()
        .map(|l| time_of(&times, l))
        .sum();
        assert!((unit - 0.2).abs() < 1e-12, "{unit}");
        // A layer a module ran keeps its own time. The units of stage 2 that reported no time
        // of their own leave their functional layers to the stage ("stage2"), the other
        // stages' to the model (""): every reported millisecond lands on some layer, once.
        assert_eq!(time_of(&times, "conv1.0"), 0.1);
        let stage2: f64 = [
            "stage2.2.cat",
            "stage2.2.shuffle",
            "stage2.3.cat",
            "stage2.3.shuffle",
        ]
        .iter()
        .map(|l| time_of(&times, l))
        .sum();
        assert!((stage2 - 0.01).abs() < 1e-12, "{stage2}");
        let total: f64 = times.iter().map(|t| t.ms_per_run).sum();
        let modules = 0.1 * nodes.iter().filter(|n| n.ms == 0.1).count() as f64;
        assert!(
            (total - (modules + 0.05 + 0.01 + 0.3 + 0.2)).abs() < 1e-9,
            "{total}"
        );
        Ok(())
    }

    #[test]
    fn the_engines_the_cost_model_learns_are_those_with_a_layer_profile() {
        use crate::engines::{external::FRAMEWORKS, profiles_layers, BUILT_IN};
        let all = BUILT_IN
            .iter()
            .copied()
            .chain(FRAMEWORKS.iter().map(|f| f.name));
        let profiled: Vec<&str> = all.filter(|e| profiles_layers(e)).collect();
        assert_eq!(profiled, PROFILED_ENGINES);
    }
}

//! The run matrix: the product of the configured axes, less `exclude` rules, with the
//! conditions an engine cannot run listed as skipped and why.

use crate::config::{Config, Device, ModelRef};
use crate::models::{cost, zoo};
use serde::Serialize;

pub use crate::protocol::{Condition, Skipped};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub to_run: Vec<Condition>,
    pub skipped: Vec<Skipped>,
    /// Conditions removed by `exclude` rules.
    pub excluded: usize,
}

/// Why `engine` cannot run this condition, if it cannot.
pub fn unsupported(c: &Condition) -> Option<String> {
    if let Some(why) = crate::engines::precision_unsupported(&c.engine, c.precision) {
        return Some(why);
    }
    if (c.engine == "tract" || c.engine == "candle") && c.device != Device::Cpu {
        return Some(format!(
            "{} runs on the CPU only here, not {}",
            c.engine, c.device
        ));
    }
    if c.engine == "candle" && matches!(c.model, crate::config::ModelRef::Onnx(_)) {
        return Some(
            "candle runs the zoo's models (built from their description), not ONNX files"
                .to_string(),
        );
    }
    if let crate::config::ModelRef::Torch(_) = c.model {
        if c.engine != "pytorch" {
            return Some("a PyTorch program runs on the pytorch engine".to_string());
        }
    }
    if let crate::config::ModelRef::Tflite(_) = c.model {
        if c.engine != "tflite" {
            return Some("a .tflite file runs on the tflite engine".to_string());
        }
        if c.batch != 1 {
            return Some("a .tflite file runs at the batch it declares".to_string());
        }
        if c.precision != crate::collect::kernels::Precision::Fp32 {
            return Some(format!(
                "a .tflite file runs in the precision it was converted to; edgeprof makes {} \
                 .tflite files from the zoo's models only",
                c.precision
            ));
        }
    }
    if let Some(f) = crate::engines::external::find(&c.engine) {
        if c.device != Device::Cpu && !f.gpu {
            return Some(format!("{} runs on the CPU only, not {}", f.name, c.device));
        }
        if !f.runs_onnx() && matches!(c.model, crate::config::ModelRef::Onnx(_)) {
            return Some(format!(
                "{} runs the zoo's models, not ONNX files (run those on tract or onnxruntime)",
                f.name
            ));
        }
    }
    None
}

/// The plan with the conditions of external frameworks that cannot run here (not set up, or
/// their interpreter broken) moved to the skipped list with the reason and what to do.
pub fn check_frameworks(config: &Config, mut plan: Plan) -> Plan {
    // Lower precisions of ONNX files are converted by onnxruntime's tools (onnxruntime's own
    // conditions are blocked by its own reason first).
    let lowers = |c: &Condition| crate::runner::lowered::converts(&c.engine, c.precision);
    let needed: std::collections::BTreeSet<&str> = plan
        .to_run
        .iter()
        .filter(|c| crate::engines::external::find(&c.engine).is_some())
        .map(|c| c.engine.as_str())
        .chain(plan.to_run.iter().any(lowers).then_some("onnxruntime"))
        .collect();
    if needed.is_empty() {
        return plan;
    }
    let configured = config.interpreters();
    let blockers: std::collections::BTreeMap<String, String> = needed
        .into_iter()
        .filter_map(|name| {
            let f = crate::engines::external::find(name)?;
            let blocker = crate::engines::env::readiness(f, configured.get(name)).blocker(name);
            blocker.map(|why| (name.to_string(), why))
        })
        .collect();
    // tflite runs the .tflite files TensorFlow converts from the zoo's models here (a user's
    // own .tflite file needs no conversion).
    let conversion = || {
        let tf = crate::engines::external::find("tensorflow")?;
        crate::engines::env::readiness(tf, configured.get(tf.name))
            .blocker(tf.name)
            .map(|why| format!("tflite runs the .tflite files TensorFlow converts here, and {why}"))
    };
    let converts = |c: &Condition| {
        crate::engines::external::find(&c.engine)
            .is_some_and(|f| f.model == crate::engines::external::ModelInput::Tflite)
            && !matches!(c.model, crate::config::ModelRef::Tflite(_))
    };
    let conversion = if plan.to_run.iter().any(converts) {
        conversion()
    } else {
        None
    };
    let reason = |c: &Condition| {
        blockers
            .get(&c.engine)
            .cloned()
            .or_else(|| conversion.clone().filter(|_| converts(c)))
            .or_else(|| {
                let why = blockers.get("onnxruntime").filter(|_| lowers(c))?;
                Some(format!(
                    "tract runs {} from the ONNX file onnxruntime's tools convert, and {why}",
                    c.precision
                ))
            })
    };
    let (to_run, blocked): (Vec<Condition>, Vec<Condition>) =
        plan.to_run.into_iter().partition(|c| reason(c).is_none());
    plan.to_run = to_run;
    for condition in blocked {
        let reason = reason(&condition).unwrap_or_default();
        plan.skipped.push(Skipped { condition, reason });
    }
    plan
}

/// Expands the configured axes into the conditions to run, in a stable order
/// (engine, model, input, batch, threads, device, precision).
pub fn expand(config: &Config) -> Plan {
    let m = &config.matrix;
    let mut plan = Plan {
        to_run: Vec::new(),
        skipped: Vec::new(),
        excluded: 0,
    };
    for engine in &m.engines {
        for model in &m.models {
            for (input, named) in &m.inputs_of(model) {
                for &batch in &m.batch {
                    for &threads in &m.threads {
                        for &device in &m.devices {
                            for &precision in &m.precision {
                                for cores in &m.cores {
                                    let mut condition = Condition::new(
                                        engine,
                                        model.clone(),
                                        *input,
                                        batch,
                                        threads,
                                        device,
                                    );
                                    if let Some(named) = named {
                                        condition = condition.with_named_inputs(named);
                                    }
                                    if matches!(model, ModelRef::Tflite(_)) {
                                        condition = condition.with_declared_inputs();
                                    }
                                    let condition = condition
                                        .with_precision(precision)
                                        .with_placement(cores.clone(), serde_json::Map::new());
                                    if m.exclude.iter().any(|rule| condition.matches(rule)) {
                                        plan.excluded += 1;
                                    } else if let Some(reason) = unsupported(&condition) {
                                        plan.skipped.push(Skipped { condition, reason });
                                    } else {
                                        plan.to_run.push(condition);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    plan
}

/// Rough CPU rate behind duration estimates before anything is measured: 2 GFLOP/s per thread
/// used (a small Arm core running tract reaches about that on these CNNs; x86 cores do better,
/// so estimates err long). Runs replace it with measured times.
pub const ESTIMATE_FLOPS_PER_THREAD: f64 = 2e9;
/// Process start, model load and optimisation, per run.
pub const ESTIMATE_RUN_OVERHEAD_S: f64 = 1.0;
/// Assumed per-inference time of an ONNX file or a user's program (no analytic cost known).
pub const ESTIMATE_FILE_INFERENCE_S: f64 = 0.05;

/// Estimated wall time of one condition's run, in seconds: each of its worker processes loads
/// the model and runs the first inference and the warm-up, then its share of the repeats; the
/// cool-down follows.
pub fn estimate_condition(config: &Config, c: &Condition, cores: usize) -> f64 {
    let ms = &config.measure;
    // Estimates use the cores of the machine that checks the config.
    let threads = if c.threads == 0 { cores } else { c.threads }.max(1);
    let per_inference = match &c.model {
        // A user's program: the model name means what the program makes of it.
        _ if c.engine == "command" => ESTIMATE_FILE_INFERENCE_S,
        ModelRef::Zoo(name) => {
            let params = zoo::ModelParams {
                num_classes: config.matrix.classes,
                channels: c.input.channels,
                height: c.input.height,
                width: c.input.width,
                batch: c.batch,
            };
            zoo::build(name, &params)
                .map(|model| {
                    cost::analyze(&model).total.flops as f64
                        / (ESTIMATE_FLOPS_PER_THREAD * threads as f64)
                })
                .unwrap_or(ESTIMATE_FILE_INFERENCE_S)
        }
        ModelRef::Onnx(_) | ModelRef::Tflite(_) | ModelRef::Torch(_) => ESTIMATE_FILE_INFERENCE_S,
    };
    let warm = ((1 + ms.warmup) as f64 * per_inference).max(ms.warmup_seconds);
    let repeat = (ms.iterations as f64 * per_inference).max(ms.min_duration_s);
    // The first process's layer profile, where the engine has one.
    let layers = if crate::engines::profiles_layers(&c.engine) {
        ms.layer_runs as f64 * per_inference
    } else {
        0.0
    };
    ms.processes.max(1) as f64 * (ESTIMATE_RUN_OVERHEAD_S + warm)
        + ms.repeats as f64 * repeat
        + layers
        + ms.cooldown_s
}

/// Estimated wall time of the whole plan, in seconds.
pub fn estimate_seconds(config: &Config, plan: &Plan, cores: usize) -> f64 {
    plan.to_run
        .iter()
        .map(|c| estimate_condition(config, c, cores))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::models::InputShape;
    use std::path::Path;

    fn plan_of(text: &str) -> (Config, Plan) {
        let config = match parse(text, Path::new("t.toml")) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let plan = expand(&config);
        (config, plan)
    }

    #[test]
    fn a_core_set_is_an_axis_of_the_plan() {
        let (_, plan) = plan_of("[matrix]\ncores = [\"all\", \"2-3\"]\n");
        let ids: Vec<&str> = plan.to_run.iter().map(|c| c.id.as_str()).collect();
        assert!(
            ids.contains(&"tract/resnet34/3x224x224/b1/t0/cpu"),
            "{ids:?}"
        );
        assert!(
            ids.contains(&"tract/resnet34/3x224x224/b1/t0/cpu/c2-3"),
            "{ids:?}"
        );
        assert_eq!(plan.to_run.len(), 8);
    }

    #[test]
    fn each_engine_runs_the_precisions_it_declares_and_says_why_not_the_rest() {
        let (_, plan) = plan_of(
            "[matrix]\nengines = [\"tract\", \"candle\", \"onnxruntime\"]\n\
             models = [\"mobilenet_v2\"]\nthreads = [1]\nprecision = [\"fp32\", \"fp16\", \"bf16\", \"int8\"]\n",
        );
        let ids: Vec<&str> = plan.to_run.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "tract/mobilenet_v2/3x224x224/b1/t1/cpu",
                "tract/mobilenet_v2/3x224x224/b1/t1/cpu/int8",
                "candle/mobilenet_v2/3x224x224/b1/t1/cpu",
                "candle/mobilenet_v2/3x224x224/b1/t1/cpu/fp16",
                "onnxruntime/mobilenet_v2/3x224x224/b1/t1/cpu",
                "onnxruntime/mobilenet_v2/3x224x224/b1/t1/cpu/fp16",
                "onnxruntime/mobilenet_v2/3x224x224/b1/t1/cpu/int8",
            ]
        );
        let why = |id: &str| {
            plan.skipped
                .iter()
                .find(|s| s.condition.id == id)
                .map(|s| s.reason.clone())
                .unwrap_or_default()
        };
        assert!(
            why("tract/mobilenet_v2/3x224x224/b1/t1/cpu/fp16").contains("float16 ONNX models"),
            "{:?}",
            plan.skipped
        );
        assert!(why("tract/mobilenet_v2/3x224x224/b1/t1/cpu/bf16").contains("no bf16 models"));
        assert!(why("candle/mobilenet_v2/3x224x224/b1/t1/cpu/bf16").contains("no bf16 matrix"));
        assert!(why("candle/mobilenet_v2/3x224x224/b1/t1/cpu/int8").contains("no integer kernels"));
        assert!(why("onnxruntime/mobilenet_v2/3x224x224/b1/t1/cpu/bf16").contains("no bf16 models"));
        assert_eq!(plan.skipped.len(), 12 - 7);
    }

    #[test]
    fn an_exclude_rule_can_name_a_precision() {
        let (config, plan) = plan_of(
            "[matrix]\nengines = [\"tract\", \"onnxruntime\"]\nmodels = [\"mobilenet_v2\"]\n\
             threads = [1]\nprecision = [\"fp32\", \"int8\"]\n\
             [[matrix.exclude]]\nengine = \"tract\"\nprecision = \"int8\"\n",
        );
        let ids: Vec<&str> = plan.to_run.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "tract/mobilenet_v2/3x224x224/b1/t1/cpu",
                "onnxruntime/mobilenet_v2/3x224x224/b1/t1/cpu",
                "onnxruntime/mobilenet_v2/3x224x224/b1/t1/cpu/int8",
            ]
        );
        assert_eq!(plan.excluded, 1);
        // Written back, the rule keeps its precision.
        let written = crate::config::to_toml(&config);
        assert!(written.contains("precision = \"int8\""), "{written}");
    }

    #[test]
    fn product_of_axes_in_stable_order() {
        let (_, plan) = plan_of(
            "[matrix]\nmodels = [\"resnet34\", \"vgg19\"]\ninputs = [\"3x32x32\", \"3x64x64\"]\nthreads = [1, 2]\n",
        );
        assert_eq!(plan.to_run.len(), 8);
        assert_eq!(plan.to_run[0].id, "tract/resnet34/3x32x32/b1/t1/cpu");
        assert_eq!(plan.to_run[7].id, "tract/vgg19/3x64x64/b1/t2/cpu");
        assert!(plan.skipped.is_empty());
    }

    #[test]
    fn exclude_rules_match_every_named_field() {
        let (_, plan) = plan_of(
            "[matrix]\nmodels = [\"resnet34\", \"vgg19\"]\ninputs = [\"3x32x32\", \"3x64x64\"]\n\
             [[matrix.exclude]]\nmodel = \"vgg19\"\ninput = \"3x64x64\"\n",
        );
        assert_eq!(plan.excluded, 1);
        assert_eq!(plan.to_run.len(), 3);
        assert!(plan
            .to_run
            .iter()
            .all(|c| c.id != "tract/vgg19/3x64x64/b1/t0/cpu"));
    }

    #[test]
    fn impossible_conditions_are_skipped_with_a_reason() {
        let (_, plan) = plan_of(
            "[matrix]\nengines = [\"tract\", \"pytorch\", \"tflite\"]\nmodels = [\"resnet34\"]\n\
             devices = [\"cpu\", \"gpu:0\"]\n",
        );
        let ids: Vec<&str> = plan.to_run.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "tract/resnet34/3x224x224/b1/t0/cpu",
                "pytorch/resnet34/3x224x224/b1/t0/cpu",
                "pytorch/resnet34/3x224x224/b1/t0/gpu:0",
                "tflite/resnet34/3x224x224/b1/t0/cpu"
            ]
        );
        assert_eq!(plan.skipped.len(), 2);
        assert!(plan.skipped[0]
            .reason
            .contains("tract runs on the CPU only here"));
        assert_eq!(
            plan.skipped[1].reason,
            "tflite runs on the CPU only, not gpu:0"
        );
        // ONNX files run on tract and onnxruntime; the frameworks that build zoo models refuse.
        let onnx = Condition::new(
            "pytorch",
            ModelRef::Onnx("m.onnx".into()),
            InputShape::default(),
            1,
            0,
            Device::Cpu,
        );
        assert!(unsupported(&onnx).is_some_and(|r| r.contains("not ONNX files")));
        let onnx = Condition {
            engine: "onnxruntime".into(),
            ..onnx
        };
        assert_eq!(unsupported(&onnx), None);
    }

    #[test]
    fn estimate_counts_every_inference_of_every_repeat() {
        let (config, plan) = plan_of(
            "[matrix]\nmodels = [\"resnet50\"]\nthreads = [2]\n[measure]\nwarmup = 9\niterations = 90\nrepeats = 2\n",
        );
        let flops = 8_217_431_528.0; // resnet50 at 3x224x224, see models::cost
        let per_inference = flops / (2.0 * ESTIMATE_FLOPS_PER_THREAD);
        // Two processes (one repeat each): load, first + 9 warm-up; then 2 repeats of 90.
        let expected =
            2.0 * (ESTIMATE_RUN_OVERHEAD_S + 10.0 * per_inference) + 180.0 * per_inference;
        let got = estimate_seconds(&config, &plan, 8);
        assert!((got - expected).abs() < 1e-6, "{got}");
        // Minimum durations stretch the short parts.
        let (config, plan) = plan_of(
            "[matrix]\nmodels = [\"resnet50\"]\nthreads = [2]\n[measure]\nwarmup = 0\niterations = 1\nrepeats = 3\nmin_duration_s = 10\nwarmup_seconds = 4\ncooldown_s = 2\n",
        );
        let expected = 3.0 * (ESTIMATE_RUN_OVERHEAD_S + 4.0) + 30.0 + 2.0;
        let got = estimate_seconds(&config, &plan, 8);
        assert!((got - expected).abs() < 1e-6, "{got}");
        // A layer profile adds its inferences once.
        let (config, plan) = plan_of(
            "[matrix]\nmodels = [\"resnet50\"]\nthreads = [2]\n[measure]\nwarmup = 9\niterations = 90\nrepeats = 2\nlayer_runs = 15\n",
        );
        let expected =
            2.0 * (ESTIMATE_RUN_OVERHEAD_S + 10.0 * per_inference) + 195.0 * per_inference;
        let got = estimate_seconds(&config, &plan, 8);
        assert!((got - expected).abs() < 1e-6, "{got}");
        // An engine without a layer profile runs none of them.
        let (config, plan) = plan_of(
            "[matrix]\nengines = [\"candle\"]\nmodels = [\"resnet50\"]\nthreads = [2]\n[measure]\nwarmup = 9\niterations = 90\nrepeats = 2\nlayer_runs = 15\n",
        );
        let expected =
            2.0 * (ESTIMATE_RUN_OVERHEAD_S + 10.0 * per_inference) + 180.0 * per_inference;
        let got = estimate_seconds(&config, &plan, 8);
        assert!((got - expected).abs() < 1e-6, "{got}");
    }
}

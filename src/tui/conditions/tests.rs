//! The condition-selection model's tests, and the machine they run against.

use super::*;

/// A machine with 4 cores, no GPU and no power source: what the UI tests run against, so
/// their screens do not depend on the machine running them.
pub fn offer() -> Offer {
    Offer {
        cores: 4,
        engines: config::KNOWN_ENGINES
            .iter()
            .map(|&e| {
                let state = match e {
                    "tract" => Ok("built in (0.23.9)".to_string()),
                    "candle" => Ok("built in (0.11.1)".to_string()),
                    "command" => Ok("your program, named in [command]".to_string()),
                    _ => Err(format!("not set up (run: edgeprof env setup {e})")),
                };
                (e.to_string(), state)
            })
            .collect(),
        gpus: Vec::new(),
        gpu_telemetry: Err("no Jetson GPU; libnvidia-ml.so.1 is not installed".into()),
        power: Err("no power source here (INA3221 rails, RAPL or NVML)".into()),
        counters: Err("perf_event_open is not permitted here".into()),
    }
}

pub fn conditions(text: &str) -> Conditions {
    let file = PathBuf::from("/tmp/edgeprof-test/configs/t.toml");
    match config::parse(text, &file) {
        Ok(c) => Conditions::new(file, c, offer()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn toggles_keep_order_and_one_value() {
    let mut c = conditions("[matrix]\nmodels = [\"resnet34\"]\nbatch = [1]\n");
    let models = c.items(Axis::Models);
    let mobilenet = models.iter().position(|i| i.label == "mobilenet_v2");
    let Some(mobilenet) = mobilenet else {
        panic!("{models:?}")
    };
    assert!(c.toggle(Axis::Models, mobilenet));
    let names: Vec<String> = c
        .config
        .matrix
        .models
        .iter()
        .map(|m| m.to_string())
        .collect();
    // Zoo order, not the order of ticking.
    let zoo_order: Vec<String> = edgeprof::models::zoo::zoo_names()
        .into_iter()
        .filter(|n| names.contains(&n.to_string()))
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, zoo_order);
    // Batch keeps its only value.
    assert!(!c.toggle(Axis::Batch, 0));
    assert_eq!(c.config.matrix.batch, vec![1]);
    assert!(c.toggle(Axis::Batch, 1));
    assert_eq!(c.config.matrix.batch, vec![1, 2]);
    // Engines that are not here cannot be ticked.
    let engines = c.items(Axis::Engines);
    let Some(pytorch) = engines.iter().position(|i| i.label == "pytorch") else {
        panic!("{engines:?}")
    };
    assert!(engines[pytorch].disabled);
    assert!(!c.toggle(Axis::Engines, pytorch));
}

#[test]
fn values_can_be_added_to_the_open_axes() {
    let mut c = conditions("[matrix]\nmodels = [\"resnet34\"]\n");
    assert!(c.add(Axis::Inputs, "3x96x96").is_ok());
    assert!(c
        .config
        .matrix
        .inputs
        .iter()
        .any(|i| i.to_string() == "3x96x96"));
    assert!(c.add(Axis::Batch, "32").is_ok());
    assert!(c.config.matrix.batch.contains(&32));
    assert!(c.add(Axis::Batch, "0").is_err());
    assert!(c.add(Axis::Inputs, "big").is_err());
    // The config reader's rules, in its words: a selection saved with `w` always reads back.
    for (axis, text, rule) in [
        (Axis::Inputs, "3x16x16", "must be from 32 to 8192"),
        (Axis::Inputs, "9999x32x32", "at most 64 channels"),
        (Axis::Batch, "100000", "from 1 to 4096"),
        (Axis::Threads, "5000", "from 0 to 1024"),
    ] {
        match c.add(axis, text) {
            Err(why) => assert!(why.contains(rule), "{text}: {why}"),
            Ok(said) => panic!("{text} accepted: {said}"),
        }
    }
    let saved = c.to_toml();
    assert!(edgeprof::config::parse(&saved, std::path::Path::new("saved.toml")).is_ok());
    let missing = c.add(Axis::Models, "/nonexistent/model.onnx");
    assert!(missing.is_err_and(|e| e.contains("no such file")));
    let onnx = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/onnx/two_inputs.onnx"
    );
    assert!(c.add(Axis::Models, onnx).is_ok());
    assert!(c
        .items(Axis::Models)
        .iter()
        .any(|i| i.label.ends_with("two_inputs.onnx")
            && i.ticked == Some(true)
            && i.note == "ONNX file"));
    assert!(c.add(Axis::Engines, "x").is_err());
}

#[test]
fn the_plan_and_the_saved_text_follow_the_selection() {
    let mut c =
        conditions("name = \"small\"\n[matrix]\nmodels = [\"resnet34\"]\ninputs = [\"3x32x32\"]\n");
    assert_eq!(c.plan().to_run.len(), 1);
    assert!(c.toggle(Axis::Threads, 1)); // 1 thread beside "all"
    assert_eq!(c.plan().to_run.len(), 2);
    c.adjust(Param::Iterations, true);
    c.adjust(Param::Repeats, false);
    assert_eq!(c.config.measure.iterations, 200);
    assert_eq!(c.config.measure.repeats, 3);
    for _ in 0..20 {
        c.adjust(Param::Iterations, false);
    }
    assert_eq!(c.config.measure.iterations, 1, "stops at the bottom");
    assert_eq!(ladder(7, &[1, 5, 10], true), 10);
    assert_eq!(ladder(7, &[1, 5, 10], false), 5);
    assert_eq!(ladder(10, &[1, 5, 10], true), 10);
    let text = c.to_toml();
    match config::parse(&text, Path::new("/elsewhere/saved.toml")) {
        Ok(back) => assert_eq!(back, c.config),
        Err(e) => panic!("{text}\n{e}"),
    }
    assert!(c.estimate_s() > 0.0);
}

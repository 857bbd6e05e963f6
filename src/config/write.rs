//! Writing a [`Config`] back as TOML (the terminal UI's `w`, the tuner's best configuration),
//! in the form the reader reads back to the same config.

use super::*;

/// A resolved configuration written back as config text that [`parse`] reads to the same
/// configuration (every key written out, defaults included; ONNX and program paths absolute as
/// resolved). This is how the terminal UI saves a selection.
pub fn to_toml(config: &Config) -> String {
    use toml::{Table, Value};
    let strings = |items: &mut dyn Iterator<Item = String>| -> Value {
        Value::Array(items.map(Value::String).collect())
    };
    let ints = |items: &[usize]| -> Value {
        Value::Array(items.iter().map(|&n| Value::Integer(n as i64)).collect())
    };
    let path = |p: &Path| p.display().to_string();
    let m = &config.matrix;
    let mut matrix = Table::new();
    matrix.insert("engines".into(), strings(&mut m.engines.iter().cloned()));
    matrix.insert(
        "models".into(),
        strings(&mut m.models.iter().map(|r| match r {
            ModelRef::Zoo(name) => name.clone(),
            ModelRef::Onnx(p) | ModelRef::Tflite(p) | ModelRef::Torch(p) => path(p),
        })),
    );
    // Left out when the config gave none: ONNX files then run at their own shapes.
    let inputs: Vec<String> = m
        .inputs
        .iter()
        .filter(|_| m.inputs_given)
        .map(|i| i.to_string())
        .chain(m.named_inputs.iter().cloned())
        .collect();
    if !inputs.is_empty() {
        matrix.insert("inputs".into(), strings(&mut inputs.into_iter()));
    }
    matrix.insert("batch".into(), ints(&m.batch));
    matrix.insert("threads".into(), ints(&m.threads));
    matrix.insert(
        "devices".into(),
        strings(&mut m.devices.iter().map(|d| d.to_string())),
    );
    // Left out at the default, fp32 alone.
    if m.precision != [crate::collect::kernels::Precision::Fp32] {
        matrix.insert(
            "precision".into(),
            strings(&mut m.precision.iter().map(|p| p.to_string())),
        );
    }
    if m.cores != [None] {
        matrix.insert(
            "cores".into(),
            strings(&mut m.cores.iter().map(|c| match c {
                Some(cpus) => crate::collect::device::cpu_list(cpus),
                None => "all".to_string(),
            })),
        );
    }
    matrix.insert("classes".into(), Value::Integer(m.classes as i64));
    if m.nodes != [LOCAL_NODE] {
        matrix.insert("nodes".into(), strings(&mut m.nodes.iter().cloned()));
    }
    if !m.exclude.is_empty() {
        let rules = m.exclude.iter().map(|e| {
            let mut rule = Table::new();
            if let Some(v) = &e.engine {
                rule.insert("engine".into(), Value::String(v.clone()));
            }
            if let Some(v) = &e.model {
                let name = match v {
                    ModelRef::Zoo(name) => name.clone(),
                    ModelRef::Onnx(p) | ModelRef::Tflite(p) | ModelRef::Torch(p) => path(p),
                };
                rule.insert("model".into(), Value::String(name));
            }
            if let Some(v) = &e.input {
                rule.insert("input".into(), Value::String(v.to_string()));
            }
            if let Some(v) = e.batch {
                rule.insert("batch".into(), Value::Integer(v as i64));
            }
            if let Some(v) = e.threads {
                rule.insert("threads".into(), Value::Integer(v as i64));
            }
            if let Some(v) = e.device {
                rule.insert("device".into(), Value::String(v.to_string()));
            }
            if let Some(v) = e.precision {
                rule.insert("precision".into(), Value::String(v.to_string()));
            }
            Value::Table(rule)
        });
        matrix.insert("exclude".into(), Value::Array(rules.collect()));
    }
    // The measure and output sections (and the command's and frameworks') are written from
    // their fields: a key added to one is saved with no change here (None is left out, and
    // read back as its default). Every value of a parsed config came from TOML, so each is
    // representable; were one not, its section would be left out and read back as defaults.
    let section =
        |value: Result<Value, toml::ser::Error>| value.unwrap_or(Value::Table(Table::new()));
    let measure = section(Value::try_from(&config.measure));
    let output = section(Value::try_from(&config.output));
    let mut top = Table::new();
    top.insert("name".into(), Value::String(config.name.clone()));
    top.insert("matrix".into(), Value::Table(matrix));
    top.insert("measure".into(), measure);
    top.insert("output".into(), output);
    if let Some(c) = &config.command {
        top.insert("command".into(), section(Value::try_from(c)));
    }
    if !config.frameworks.is_empty() {
        let mut frameworks = section(Value::try_from(&config.frameworks));
        // No options is the same as `options = {}`: left out.
        if let Value::Table(by_name) = &mut frameworks {
            for (_, settings) in by_name.iter_mut() {
                if let Value::Table(t) = settings {
                    if t.get("options")
                        .and_then(Value::as_table)
                        .is_some_and(Table::is_empty)
                    {
                        t.remove("options");
                    }
                }
            }
        }
        top.insert("frameworks".into(), frameworks);
    }
    if config.tune != Tune::default() {
        top.insert("tune".into(), tune_table(&config.tune));
    }
    if !config.nodes.is_empty() {
        let nodes = config.nodes.iter().map(|n| {
            let mut t = Table::new();
            // A name taken from the destination is left to be taken again: it need not be
            // one that may be written as a name (`ssh://pi@board:2222`).
            if n.name != n.destination {
                t.insert("name".into(), Value::String(n.name.clone()));
            }
            t.insert("destination".into(), Value::String(n.destination.clone()));
            if let Some(port) = n.port {
                t.insert("port".into(), Value::Integer(i64::from(port)));
            }
            if let Some(identity) = &n.identity {
                t.insert("identity".into(), Value::String(path(identity)));
            }
            t.insert("edgeprof".into(), Value::String(n.edgeprof.clone()));
            t.insert("workdir".into(), Value::String(n.workdir.clone()));
            if let Some(address) = &n.address {
                t.insert("address".into(), Value::String(address.clone()));
            }
            if !n.ssh_options.is_empty() {
                t.insert(
                    "ssh_options".into(),
                    strings(&mut n.ssh_options.iter().cloned()),
                );
            }
            Value::Table(t)
        });
        top.insert("nodes".into(), Value::Array(nodes.collect()));
    }
    if let Some(train) = &config.train {
        top.insert("train".into(), Value::Table(super::train::to_table(train)));
    }
    format!(
        "# Written by edgeprof {}; run it with: edgeprof run FILE\n{}",
        env!("CARGO_PKG_VERSION"),
        toml::to_string(&top).unwrap_or_default()
    )
}

/// The `[tune]` table of a config, every key written out.
fn tune_table(t: &Tune) -> toml::Value {
    use toml::{Table, Value};
    let model_name = |r: &ModelRef| match r {
        ModelRef::Zoo(name) => name.clone(),
        ModelRef::Onnx(p) | ModelRef::Tflite(p) | ModelRef::Torch(p) => p.display().to_string(),
    };
    let ints =
        |items: &[usize]| Value::Array(items.iter().map(|&n| Value::Integer(n as i64)).collect());
    let mut table = Table::new();
    if let Some(m) = &t.model {
        table.insert("model".into(), Value::String(model_name(m)));
    }
    if let Some(i) = &t.input {
        table.insert("input".into(), Value::String(i.to_string()));
    }
    if let Some(e) = &t.engines {
        table.insert(
            "engines".into(),
            Value::Array(e.iter().cloned().map(Value::String).collect()),
        );
    }
    table.insert("budget".into(), Value::Integer(t.budget as i64));
    table.insert("objective".into(), Value::String(t.objective.to_string()));
    if let Some(m) = t.max_memory {
        table.insert("max_memory".into(), Value::Integer(m as i64));
    }
    if !t.threads.is_empty() {
        table.insert("threads".into(), ints(&t.threads));
    }
    table.insert("batch".into(), ints(&t.batch));
    if !t.cores.is_empty() {
        table.insert(
            "cores".into(),
            Value::Array(t.cores.iter().cloned().map(Value::String).collect()),
        );
    }
    table.insert("stall".into(), Value::Integer(t.stall as i64));
    table.insert("initial".into(), Value::Integer(t.initial as i64));
    table.insert("confirm".into(), Value::Integer(t.confirm as i64));
    table.insert("seed".into(), Value::Integer(t.seed as i64));
    if !t.options.is_empty() {
        if let Ok(Value::Table(options)) = Value::try_from(&t.options) {
            table.insert("options".into(), Value::Table(options));
        }
    }
    Value::Table(table)
}

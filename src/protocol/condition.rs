//! One point of the evaluation space, as the matrix makes it, the workers are asked to run it
//! and the results name it.

use crate::collect::kernels::Precision;
use crate::config::{Device, Exclude, ModelRef};
use crate::models::InputShape;
use serde::{Deserialize, Serialize};

/// One point of the evaluation space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// Stable identifier, e.g. `tract/mobilenet_v2/3x224x224/b1/t0/cpu` (t0: all cores).
    pub id: String,
    pub engine: String,
    pub model: ModelRef,
    pub input: InputShape,
    pub batch: usize,
    pub threads: usize,
    pub device: Device,
    /// The CPUs the worker is confined to (None: every CPU edgeprof may use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    /// The framework's options for this condition, over the config's `[frameworks.NAME]
    /// options` (the tuner varies them).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// An ONNX file's inputs by name (`input=1x512 state=2x1x128 sr=int64:16000`), when the
    /// condition feeds them so; `input` then stands for nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_inputs: Option<String>,
    /// The precision the model runs in (fp32 unless the condition says otherwise).
    #[serde(default = "fp32", skip_serializing_if = "is_fp32")]
    pub precision: Precision,
}

fn fp32() -> Precision {
    Precision::Fp32
}

fn is_fp32(p: &Precision) -> bool {
    *p == Precision::Fp32
}

impl Condition {
    /// A condition with its stable id.
    pub fn new(
        engine: &str,
        model: ModelRef,
        input: InputShape,
        batch: usize,
        threads: usize,
        device: Device,
    ) -> Condition {
        Condition {
            id: format!("{engine}/{model}/{input}/b{batch}/t{threads}/{device}"),
            engine: engine.to_string(),
            model,
            input,
            batch,
            threads,
            device,
            cores: None,
            options: serde_json::Map::new(),
            named_inputs: None,
            precision: Precision::Fp32,
        }
    }

    /// The condition run in `precision`, which joins the id after the device where it is not
    /// fp32 (`…/cpu/fp16`), so float32 ids stay as they were. Called before
    /// [`Condition::with_placement`].
    pub fn with_precision(mut self, precision: Precision) -> Condition {
        if precision != Precision::Fp32 {
            self.id.push_str(&format!("/{precision}"));
        }
        self.precision = precision;
        self
    }

    /// The condition fed an ONNX file's inputs by name (`named`, as `matrix.inputs` gives a
    /// set), which stand in the id where an image shape would (`…/input=1x512,sr=int64:16000/b1/…`).
    /// Called before [`Condition::with_placement`].
    pub fn with_named_inputs(mut self, named: &str) -> Condition {
        let specs: Vec<&str> = named.split_whitespace().collect();
        self.id = format!(
            "{}/{}/{}/b{}/t{}/{}",
            self.engine,
            self.model,
            specs.join(","),
            self.batch,
            self.threads,
            self.device
        );
        self.named_inputs = Some(specs.join(" "));
        self
    }

    /// The condition of a model that runs at the inputs it declares (a .tflite file): `declared`
    /// stands in the id where an image shape would. Called before
    /// [`Condition::with_placement`].
    pub fn with_declared_inputs(mut self) -> Condition {
        self.id = format!(
            "{}/{}/{DECLARED}/b{}/t{}/{}",
            self.engine, self.model, self.batch, self.threads, self.device
        );
        self
    }

    /// The condition's input as shown: its image shape, its inputs by name, or `declared`.
    pub fn input_text(&self) -> String {
        match (&self.named_inputs, &self.model) {
            (Some(named), _) => named.clone(),
            (None, ModelRef::Tflite(_)) => DECLARED.to_string(),
            (None, _) => self.input.to_string(),
        }
    }

    /// The condition confined to `cores` and run with `options`; both join the id
    /// (`…/cpu/c0-1/graph_optimization_level=all`).
    pub fn with_placement(
        mut self,
        cores: Option<Vec<usize>>,
        options: serde_json::Map<String, serde_json::Value>,
    ) -> Condition {
        if let Some(cpus) = &cores {
            self.id
                .push_str(&format!("/c{}", crate::collect::device::cpu_list(cpus)));
        }
        if !options.is_empty() {
            let text: Vec<String> = options
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect();
            self.id.push_str(&format!("/{}", text.join(",")));
        }
        self.cores = cores;
        self.options = options;
        self
    }

    /// Whether the config's exclusion `rule` covers this condition.
    pub fn matches(&self, rule: &Exclude) -> bool {
        rule.engine.as_ref().is_none_or(|e| *e == self.engine)
            && rule.model.as_ref().is_none_or(|m| *m == self.model)
            && rule
                .input
                .is_none_or(|i| self.named_inputs.is_none() && i == self.input)
            && rule.batch.is_none_or(|b| b == self.batch)
            && rule.threads.is_none_or(|t| t == self.threads)
            && rule.device.is_none_or(|d| d == self.device)
            && rule.precision.is_none_or(|p| p == self.precision)
    }
}

/// What stands for the inputs of a model that runs at the inputs it declares.
const DECLARED: &str = "declared";

/// Why a condition will not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub condition: Condition,
    pub reason: String,
}

/// A configured thread count made concrete: 0 means all available cores.
pub fn resolve_threads(requested: usize) -> usize {
    if requested == 0 {
        crate::collect::device::available_cores()
    } else {
        requested
    }
}

//! Frameworks edgeprof drives from outside: each runs in its own Python interpreter
//! (a virtual environment `edgeprof env setup` made, one found system-wide, or one the config
//! names) through a harness program embedded in this binary. The harness reads the worker
//! request as JSON on stdin and speaks the worker protocol on stdout, like every worker.

/// A framework run through a Python harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framework {
    /// The engine name in configs and conditions.
    pub name: &'static str,
    pub title: &'static str,
    /// The Python module whose presence means the framework is installed.
    pub module: &'static str,
    /// The distribution whose version is reported.
    pub distribution: &'static str,
    /// What `edgeprof env setup` installs.
    pub packages: &'static [&'static str],
    /// The framework's part of the harness, when this build has one.
    harness: Option<&'static str>,
    /// Runs the zoo's own seeded weights, so its outputs can be compared with the built-in
    /// engines'.
    pub zoo_weights: bool,
    /// What it reads to build the model.
    pub model: ModelInput,
    /// Runs on a GPU where the framework sees one.
    pub gpu: bool,
    /// What the harness measures, in a sentence (`env list`, docs/commands/env.md).
    pub measures: &'static str,
    /// Its harness times the model layer by layer when a request asks for `layer_runs`
    /// (the framework's own op profiler, or hooks around its modules).
    pub layer_profile: bool,
}

/// What a harness reads to build the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelInput {
    /// An ONNX file: edgeprof's export of a zoo model (seeded weights), or the user's own.
    Onnx,
    /// The zoo model's description (layers as JSON) and its seeded weights.
    Description,
    /// A .tflite file that TensorFlow converts from the model it builds from the description.
    Tflite,
    /// The framework's own definition of the zoo's models (torchvision), loaded with the zoo's
    /// seeded weights from the description (the zoo names its parameters as torchvision does).
    TorchvisionWithZooWeights,
}

/// The harness's common part: reads the request, times the framework's session, reports.
const COMMON: &str = include_str!("harness/common.py");

/// The converter to lower precision with onnxruntime's own tools (its quantization tool and
/// float16 converter), run under the onnxruntime environment's interpreter.
pub const CONVERTER: &str = include_str!("harness/ort_quantize.py");

pub const FRAMEWORKS: &[Framework] = &[
    Framework {
        name: "onnxruntime",
        title: "ONNX Runtime",
        module: "onnxruntime",
        distribution: "onnxruntime",
        packages: &["onnxruntime", "onnx", "numpy"],
        harness: Some(include_str!("harness/onnxruntime.py")),
        zoo_weights: true,
        model: ModelInput::Onnx,
        gpu: true,
        measures: "InferenceSession.run on edgeprof's ONNX export (the zoo's weights) or your \
                   ONNX file; intra-op threads from the condition, CPU or CUDA/TensorRT providers",
        layer_profile: true,
    },
    Framework {
        name: "pytorch",
        title: "PyTorch",
        module: "torch",
        distribution: "torch",
        packages: &["torch", "torchvision", "numpy"],
        harness: Some(include_str!("harness/pytorch.py")),
        zoo_weights: true,
        model: ModelInput::TorchvisionWithZooWeights,
        gpu: true,
        measures: "torchvision's own definition of the model, loaded with the zoo's seeded \
                   weights, under inference_mode: eager, TorchScript or torch.compile; \
                   torch.set_num_threads from the condition, CPU or CUDA",
        layer_profile: true,
    },
    Framework {
        name: "tensorflow",
        title: "TensorFlow",
        module: "tensorflow",
        distribution: "tensorflow",
        packages: &["tensorflow", "numpy"],
        harness: Some(include_str!("harness/tensorflow.py")),
        zoo_weights: true,
        model: ModelInput::Description,
        gpu: true,
        measures: "a Keras model built layer by layer from the zoo model's description with its \
                   seeded weights, called as a tf.function (optionally XLA) or eagerly; intra-op \
                   threads from the condition, CPU or GPU",
        layer_profile: false,
    },
    Framework {
        name: "tflite",
        title: "TensorFlow Lite (LiteRT)",
        module: "ai_edge_litert",
        distribution: "ai-edge-litert",
        packages: &["ai-edge-litert", "numpy"],
        harness: Some(include_str!("harness/tflite.py")),
        zoo_weights: true,
        model: ModelInput::Tflite,
        gpu: false,
        measures: "the LiteRT interpreter (XNNPACK by default) on the float32 .tflite file \
                   TensorFlow converts from its Keras model of the zoo model; num_threads from \
                   the condition",
        layer_profile: false,
    },
];

/// The external framework called `name`.
pub fn find(name: &str) -> Option<&'static Framework> {
    FRAMEWORKS.iter().find(|f| f.name == name)
}

impl Framework {
    /// Whether this build can run the framework (it has its harness).
    pub fn runnable(&self) -> bool {
        self.harness.is_some()
    }

    /// The whole harness program: the framework's part, then the common part that runs it.
    pub fn harness(&self) -> Option<String> {
        self.harness.map(|part| format!("{part}\n{COMMON}"))
    }

    /// Runs ONNX files (the export of a zoo model, or the user's own).
    pub fn runs_onnx(&self) -> bool {
        self.model == ModelInput::Onnx
    }

    /// The command that sets the framework up.
    pub fn setup_hint(&self) -> String {
        format!("edgeprof env setup {}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_framework_is_a_known_engine_and_its_harness_runs_the_common_part_last() {
        for f in FRAMEWORKS {
            assert!(crate::config::KNOWN_ENGINES.contains(&f.name), "{}", f.name);
            if let Some(program) = f.harness() {
                assert!(program.contains(&format!("FRAMEWORK = \"{}\"", f.name)));
                assert!(program.trim_end().ends_with("sys.exit(1)"));
                assert!(program.find("def load(").unwrap_or(usize::MAX) < program.len());
            }
        }
        let names: Vec<&str> = FRAMEWORKS.iter().map(|f| f.name).collect();
        assert_eq!(names, crate::config::EXTERNAL_FRAMEWORKS);
        assert!(find("onnxruntime").is_some_and(Framework::runnable));
        assert!(find("tract").is_none());
    }
}

//! The user layer: the TOML file as written, every key optional, each value with its span so
//! that an error can name its line.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) name: Option<Spanned<String>>,
    pub(super) matrix: Option<RawMatrix>,
    pub(super) measure: Option<RawMeasure>,
    pub(super) output: Option<RawOutput>,
    pub(super) command: Option<Spanned<RawCommand>>,
    pub(super) frameworks: Option<std::collections::BTreeMap<String, Spanned<RawFramework>>>,
    pub(super) tune: Option<RawTune>,
    pub(super) nodes: Option<Vec<Spanned<RawNode>>>,
    pub(super) train: Option<super::train::RawTrain>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNode {
    pub(super) name: Option<Spanned<String>>,
    pub(super) destination: Option<Spanned<String>>,
    pub(super) port: Option<Spanned<i64>>,
    pub(super) identity: Option<Spanned<String>>,
    pub(super) edgeprof: Option<Spanned<String>>,
    pub(super) workdir: Option<Spanned<String>>,
    pub(super) address: Option<Spanned<String>>,
    pub(super) ssh_options: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTune {
    pub(super) model: Option<Spanned<String>>,
    pub(super) input: Option<Spanned<String>>,
    pub(super) engines: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) budget: Option<Spanned<i64>>,
    pub(super) objective: Option<Spanned<String>>,
    pub(super) max_memory: Option<Spanned<i64>>,
    pub(super) threads: Option<Spanned<Vec<Spanned<i64>>>>,
    pub(super) batch: Option<Spanned<Vec<Spanned<i64>>>>,
    pub(super) cores: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) stall: Option<Spanned<i64>>,
    pub(super) initial: Option<Spanned<i64>>,
    pub(super) confirm: Option<Spanned<i64>>,
    pub(super) seed: Option<Spanned<i64>>,
    pub(super) options: Option<std::collections::BTreeMap<String, RawOptionSpace>>,
}

/// `[tune.options.ENGINE]`: option name → the values to try.
type RawOptionSpace = std::collections::BTreeMap<String, Spanned<Vec<toml::Value>>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFramework {
    pub(super) python: Option<Spanned<String>>,
    pub(super) options: Option<toml::Table>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCommand {
    pub(super) program: Option<Spanned<String>>,
    pub(super) args: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMatrix {
    pub(super) engines: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) models: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) inputs: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) batch: Option<Spanned<Vec<Spanned<i64>>>>,
    pub(super) threads: Option<Spanned<Vec<Spanned<i64>>>>,
    pub(super) devices: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) precision: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) cores: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) classes: Option<Spanned<i64>>,
    pub(super) exclude: Option<Vec<Spanned<RawExclude>>>,
    pub(super) nodes: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExclude {
    pub(super) engine: Option<Spanned<String>>,
    pub(super) model: Option<Spanned<String>>,
    pub(super) input: Option<Spanned<String>>,
    pub(super) batch: Option<Spanned<i64>>,
    pub(super) threads: Option<Spanned<i64>>,
    pub(super) device: Option<Spanned<String>>,
    pub(super) precision: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMeasure {
    pub(super) warmup: Option<Spanned<i64>>,
    pub(super) warmup_seconds: Option<Spanned<f64>>,
    pub(super) iterations: Option<Spanned<i64>>,
    pub(super) repeats: Option<Spanned<i64>>,
    pub(super) processes: Option<Spanned<i64>>,
    pub(super) min_duration_s: Option<Spanned<f64>>,
    pub(super) timeout_s: Option<Spanned<f64>>,
    pub(super) retries: Option<Spanned<i64>>,
    pub(super) cooldown_s: Option<Spanned<f64>>,
    pub(super) sample_interval_ms: Option<Spanned<i64>>,
    pub(super) seed: Option<Spanned<i64>>,
    pub(super) check_outputs: Option<bool>,
    pub(super) outliers: Option<Spanned<String>>,
    pub(super) target_ci: Option<Spanned<f64>>,
    pub(super) max_repeats: Option<Spanned<i64>>,
    pub(super) rerun_disturbed: Option<Spanned<i64>>,
    pub(super) layer_runs: Option<Spanned<i64>>,
    pub(super) calibration: Option<Spanned<String>>,
    pub(super) input_data: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOutput {
    pub(super) dir: Option<Spanned<String>>,
    pub(super) formats: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) roofline: Option<bool>,
    pub(super) gpu_profiler: Option<Spanned<String>>,
}

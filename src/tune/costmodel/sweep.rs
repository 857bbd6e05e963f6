//! Profiles from sweeps: a condition run with `measure.layer_runs` keeps its engine's per-layer
//! times in its record, beside every timed iteration; such a record is the same measurement as
//! `costmodel profile` makes (one round), and is learnt from alike.

use super::{external, groups_of, is_file, profile_groups, timed, zoo_model, Profile};
use crate::config::Device;
use crate::results::{RunRecord, Stored};

/// What a sweep gave the database: profiles, and the records left out with why.
#[derive(Debug, Default)]
pub struct FromSweep {
    pub profiles: Vec<Profile>,
    /// (condition id, why), for the conditions that had layer times but cannot be learnt from.
    pub left_out: Vec<(String, String)>,
}

/// What [`import`] did with a sweep's profiles.
#[derive(Debug, Default)]
pub struct Imported {
    /// Profiles the database did not hold, now appended.
    pub added: usize,
    /// Profiles it held already.
    pub present: usize,
    /// (condition id, why) for the conditions that cannot be learnt from.
    pub left_out: Vec<(String, String)>,
}

/// Adds the profiles of the sweep in `dir` that `db` lacks. Into this device's database
/// (`this_device`) only a sweep measured on this device: another device's times would teach
/// it wrong. A directory that is not a readable run, or another device's run, is bad input.
pub fn import(
    db: &mut super::Db,
    dir: &std::path::Path,
    this_device: bool,
) -> crate::error::Result<Imported> {
    use crate::error::BadInput;
    if !dir.join(crate::results::MANIFEST).is_file() {
        crate::error::bail!(BadInput(format!(
            "{} is neither a table of `edgeprof tune --exhaustive` nor a sweep's results \
             directory (it holds no manifest.json)",
            dir.display()
        )));
    }
    let stored = crate::results::load(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    if this_device {
        let key = crate::roofline::store::device_key;
        let here = crate::collect::device::fingerprint(std::path::Path::new("/"));
        let there = &stored.manifest.device;
        if key(there) != key(&here) {
            crate::error::bail!(BadInput(format!(
                "{} was measured on another device ({}, {} {}); this device's database learns \
                 from its own measurements only (give --db FILE to keep them elsewhere)",
                dir.display(),
                there.hostname.as_deref().unwrap_or("unnamed"),
                there.arch,
                there.cpu_model.as_deref().unwrap_or("unknown CPU")
            )));
        }
    }
    let found = profiles(&stored);
    let mut imported = Imported {
        left_out: found.left_out,
        ..Imported::default()
    };
    for p in found.profiles {
        let known = db.profiles.iter().any(|q| {
            (
                &q.engine,
                &q.model,
                &q.input,
                q.threads,
                &q.cores,
                &q.written,
                q.precision,
            ) == (
                &p.engine,
                &p.model,
                &p.input,
                p.threads,
                &p.cores,
                &p.written,
                p.precision,
            )
        });
        if known {
            imported.present += 1;
        } else {
            db.append(p)?;
            imported.added += 1;
        }
    }
    Ok(imported)
}

/// The profiles of sweep `stored`: its conditions' last successful records that carry layer
/// times. A condition is learnt from only as `costmodel profile` measures: one image (a
/// batch of 1) on the CPU (on every core, or on its core set: a profile of that set), at the
/// engine's default options, with the zoo's 1000 classes.
pub fn profiles(stored: &Stored) -> FromSweep {
    let mut out = FromSweep::default();
    let classes = stored.classes();
    for record in stored.runs.iter().filter(|r| r.ok && r.last) {
        let Some(run) = &record.run else { continue };
        if run.layers.is_empty() {
            continue;
        }
        let options = stored
            .manifest
            .config
            .pointer(&format!("/frameworks/{}/options", record.condition.engine))
            .and_then(serde_json::Value::as_object)
            .is_some_and(|o| !o.is_empty());
        match from_record(record, classes, options) {
            Ok(p) => out.profiles.push(p),
            Err(why) => out.left_out.push((record.condition.id.clone(), why)),
        }
    }
    out
}

/// One record as a profile, or why it cannot be one. `options`: whether the sweep's config set
/// options for the record's engine.
fn from_record(record: &RunRecord, classes: usize, options: bool) -> Result<Profile, String> {
    let c = &record.condition;
    if !external::PROFILED_ENGINES.contains(&c.engine.as_str()) {
        return Err(format!("the cost model does not learn {}", c.engine));
    }
    if c.batch != 1 || c.device != Device::Cpu {
        return Err("not one image on the CPU".into());
    }
    if options || !c.options.is_empty() {
        return Err(format!("{} ran with options of its own", c.engine));
    }
    if classes != 1000 {
        return Err(format!("{classes} classes, not the zoo's 1000"));
    }
    let name = match &c.model {
        crate::config::ModelRef::Zoo(name) => name.clone(),
        crate::config::ModelRef::Tflite(path) => {
            return Err(format!("{} is a TensorFlow Lite file", path.display()))
        }
        crate::config::ModelRef::Torch(path) => {
            return Err(format!("{} is a PyTorch program", path.display()))
        }
        crate::config::ModelRef::Onnx(path) => std::fs::canonicalize(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .to_string_lossy()
            .into_owned(),
    };
    let input = c.input_text();
    let run = record.run.as_ref().ok_or("no run")?;
    // A lower precision's nodes: the converted file's (quantization nodes named after the
    // layers they serve); PyTorch's quantized modules keep their names.
    let layer_times = |nodes: &[crate::protocol::NodeTime]| {
        if c.precision == crate::collect::kernels::Precision::Fp32 {
            external::layer_times(nodes)
        } else {
            external::quantized_layer_times(nodes)
        }
    };
    let groups = if is_file(&name) {
        timed(
            groups_of(&name, &input).map_err(|e| e.0)?,
            &layer_times(&run.layers),
        )
    } else {
        let model = zoo_model(&name, &input).map_err(|e| e.0)?;
        let layers = if c.engine != "pytorch" {
            layer_times(&run.layers)
        } else {
            external::module_times(&model, &run.layers)
        };
        profile_groups(&model, &layers)
    };
    if groups.iter().all(|g| g.seconds <= 0.0) {
        return Err("its layer times name no layer of the model".into());
    }
    let repeats = record.kept_repeats().unwrap_or_default();
    let times: Vec<f64> = repeats.concat();
    let latency = crate::stats::median(&times).ok_or("no timed iteration")?;
    let interval =
        crate::stats::median_interval_of_repeats(&repeats, crate::stats::BOOTSTRAP_ROUNDS)
            .unwrap_or((latency, latency));
    let threads = run.threads.unwrap_or(c.threads);
    let mut profile = Profile::one_round(
        &c.engine,
        (&name, &input, threads),
        groups,
        (latency, interval),
        times,
    );
    profile.written = record.started.clone();
    profile.precision = c.precision;
    // Its worker was confined to the condition's core set: a profile of that set.
    profile.cores = super::profile_cores(c.cores.as_deref());
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::kernels::Precision;
    use crate::protocol::{Condition, NodeTime, WorkerRun};

    /// A record of `precision` with the layer times `nodes` (ms each) and three timed runs.
    fn record(precision: Precision, nodes: &[(&str, f64)]) -> RunRecord {
        let condition = Condition::new(
            "tract",
            crate::config::ModelRef::Zoo("mobilenet_v2".into()),
            crate::models::InputShape {
                channels: 3,
                height: 64,
                width: 64,
            },
            1,
            1,
            Device::Cpu,
        )
        .with_precision(precision);
        RunRecord {
            telemetry: None,
            condition,
            attempt: 1,
            last: true,
            started: "2026-12-06T13:00:00Z".into(),
            ok: true,
            reason: None,
            failure: None,
            run: Some(WorkerRun {
                threads: Some(1),
                repeats: vec![vec![2.0, 2.1, 1.9]],
                layers: nodes
                    .iter()
                    .map(|(name, ms)| NodeTime {
                        name: name.to_string(),
                        op: String::new(),
                        ms: *ms,
                    })
                    .collect(),
                ..WorkerRun::default()
            }),
            stats: None,
            resources: Default::default(),
            repetition: None,
            drift: None,
            ran_on: None,
            state_changes: Vec::new(),
        }
    }

    /// The first group's time in seconds (the stem: features.0.0 and its batch norm and ReLU).
    fn stem_seconds(p: &Profile) -> f64 {
        p.groups.first().map_or(0.0, |g| g.seconds)
    }

    #[test]
    fn an_int8_record_is_an_int8_profile_with_its_quantization_nodes_counted_to_their_layers(
    ) -> Result<(), String> {
        // tract's QDQ nodes and onnxruntime's fused integer kernels, named after their layers;
        // the input's own quantization is no layer's.
        let int8 = from_record(
            &record(
                Precision::Int8,
                &[
                    ("input_QuantizeLinear", 0.4),
                    ("features.0.0", 0.2),
                    ("features.0.2_QuantizeLinear", 0.1),
                    ("features.0.0_token_1", 0.05),
                ],
            ),
            1000,
            false,
        )?;
        assert_eq!(int8.precision, Precision::Int8);
        assert!((stem_seconds(&int8) - 0.35e-3).abs() < 1e-9, "{int8:?}");
        // The same nodes in fp32 count only the one named as the layer is.
        let fp32 = from_record(
            &record(
                Precision::Fp32,
                &[("features.0.0", 0.2), ("features.0.2_QuantizeLinear", 0.1)],
            ),
            1000,
            false,
        )?;
        assert_eq!(fp32.precision, Precision::Fp32);
        assert!((stem_seconds(&fp32) - 0.2e-3).abs() < 1e-9, "{fp32:?}");
        Ok(())
    }
}

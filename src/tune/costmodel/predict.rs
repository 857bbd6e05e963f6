//! A model's latency predicted from its layers without running it: the database's cost model
//! fitted for the engine, threads and cores asked, how far held-out models of the same database
//! were off, whether the model lies beyond what was profiled, and each layer group's share.

use super::{CostModel, Db, Group, Profile};
use crate::models::InputShape;
use serde::Serialize;

/// What a prediction is of: its layer groups, its input as profiles name it, its batch, its
/// image input (where it has one), the model's name as profiles keep it, and (a file's) how
/// many of its nodes were costed of how many.
#[derive(Debug, Clone)]
pub struct Target {
    pub groups: Vec<Group>,
    pub input: String,
    pub batch: usize,
    /// Its one image input as CxHxW, where it has one.
    pub image: Option<InputShape>,
    pub key: String,
    pub costed: Option<(usize, usize)>,
}

/// One layer group of a prediction: what it is, its predicted time (before the end-to-end
/// ratio) and, where the database holds a profile of the model, its profiled time.
#[derive(Debug, Clone, Serialize)]
pub struct LayerRow {
    pub group: String,
    pub template: String,
    pub flops: f64,
    pub predicted_ms: f64,
    /// The group's own model was coarser (its template's linear fit, no shape).
    pub fell_back: bool,
    pub measured_ms: Option<f64>,
}

/// A prediction and what tells how far to trust it.
#[derive(Debug, Clone)]
pub struct Prediction {
    pub ms: f64,
    /// Groups without a shape, predicted by their template's linear fit.
    pub fallbacks: usize,
    /// How close 9 in 10 models held out of the database were predicted (relative); None when
    /// it holds one model.
    pub spread: Option<f64>,
    /// The model's own profile on this configuration, where the database holds one.
    pub measured_ms: Option<f64>,
    /// The whole model's FLOPs, and the largest profiled model's.
    pub flops: u64,
    pub largest_flops: u64,
    /// Its image input and the largest profiled, when its is larger.
    pub bigger_input: Option<(InputShape, InputShape)>,
    /// Beyond what was profiled (more FLOPs, a larger input, a batch over 1): extrapolated.
    pub extrapolated: bool,
    pub layers: Vec<LayerRow>,
    /// The end-to-end latency over the layers' sum on the profiled models.
    pub overhead_ratio: f64,
    /// The bytes its layers move per inference, and the bandwidth the profiles' curve gives
    /// that working set.
    pub working_set: Option<u64>,
    pub bandwidth: Option<f64>,
}

/// Why no prediction could be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PredictError {
    /// The database holds no profile of the engine on those threads and cores.
    #[error("no profile of this engine on these threads and cores in the database")]
    NoProfiles,
    /// The model's groups give no finite time.
    #[error("{0}")]
    Unpredictable(String),
}

crate::error::kinds!(crate::error::Kind::BadInput => PredictError);

/// Predicts `target` on `engine` with `threads` threads on `cores` (None: every CPU) from the
/// latest profiles of `db`.
pub fn predict(
    db: &Db,
    target: &Target,
    engine: &str,
    threads: usize,
    cores: Option<&[usize]>,
) -> Result<Prediction, PredictError> {
    let latest = db.latest();
    let cm = CostModel::fit_on(&latest, engine, threads, cores).ok_or(PredictError::NoProfiles)?;
    let (ms, fallbacks) = cm
        .predict_finite(&target.groups)
        .map_err(|why| PredictError::Unpredictable(why.0))?;
    let cores_owned = cores.map(<[usize]>::to_vec);
    // The uncertainty: how far leave-one-model-out predictions of this database fall.
    let mut errors: Vec<f64> = super::leave_one_model_out(db, engine, Some(threads))
        .iter()
        .filter(|h| h.cores == cores_owned)
        .map(|h| h.error.abs())
        .filter(|e| e.is_finite())
        .collect();
    errors.sort_by(f64::total_cmp);
    let spread = errors
        .get((errors.len() * 9 / 10).min(errors.len().saturating_sub(1)))
        .copied();
    // The profiles are of batch 1.
    let measured = latest.iter().find(|p| {
        target.batch == 1
            && p.engine == engine
            && p.model == target.key
            && p.input == target.input
            && p.threads == threads
            && p.cores == cores_owned
    });
    // The whole model's FLOPs, which every planned group carries.
    let flops = target
        .groups
        .first()
        .and_then(|g| g.dims)
        .map_or(0, |d| d.model_flops);
    let profiled: Vec<&&Profile> = latest
        .iter()
        .filter(|p| p.engine == engine && p.threads == threads && p.cores == cores_owned)
        .collect();
    let largest_flops = profiled
        .iter()
        .filter_map(|p| p.groups.first().and_then(|g| g.dims))
        .map(|d| d.model_flops)
        .max()
        .unwrap_or(0);
    let largest_input = profiled
        .iter()
        .filter_map(|p| {
            p.input.parse::<InputShape>().ok().or_else(|| {
                super::graph_probe::seed_of(&p.model).and_then(super::graph_probe::image)
            })
        })
        .max_by_key(|s| s.height * s.width);
    let bigger_input = match (target.image, largest_input) {
        (Some(i), Some(l)) if i.height * i.width > l.height * l.width => Some((i, l)),
        _ => None,
    };
    let extrapolated =
        (largest_flops > 0 && flops > largest_flops) || bigger_input.is_some() || target.batch > 1;
    let layers = target
        .groups
        .iter()
        .map(|g| {
            let (seconds, fell_back) = cm.group_seconds(g);
            LayerRow {
                group: g.label.clone(),
                template: g.template.clone(),
                flops: g.flops,
                predicted_ms: seconds * 1e3,
                fell_back,
                measured_ms: measured
                    .and_then(|p| p.groups.iter().find(|m| m.label == g.label))
                    .map(|m| m.seconds * 1e3),
            }
        })
        .collect();
    let working_set = super::footprint(&target.groups);
    Ok(Prediction {
        ms,
        fallbacks,
        spread,
        measured_ms: measured.map(|p| p.latency_ms),
        flops,
        largest_flops,
        bigger_input,
        extrapolated,
        layers,
        overhead_ratio: cm.overhead_ratio,
        working_set,
        bandwidth: working_set.and_then(|b| cm.stream.at(b as f64)),
    })
}

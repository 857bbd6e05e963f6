//! Leave one model out: each profiled model predicted by a fit without any profile of it; and
//! every ONNX file held out at once: the files predicted by a fit on the zoo and the probes alone.

use super::{groups_of, CostModel, Db, Profile};
use serde::Serialize;

/// One model of a leave-one-model-out evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Held {
    pub model: String,
    pub input: String,
    pub threads: usize,
    /// The precision its layers ran in (a lower one is predicted by its own precision's fit).
    #[serde(skip_serializing_if = "is_fp32")]
    pub precision: super::Precision,
    /// The CPUs it was confined to; None: every CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    pub measured_ms: f64,
    /// The measured median's own interval, relative half-width.
    pub measured_half_width: f64,
    /// Rounds the measured profile merges.
    pub rounds: usize,
    pub predicted_ms: f64,
    /// predicted / measured − 1.
    pub error: f64,
    /// Groups predicted from a family's or the overall fit (their template had no samples).
    pub fallbacks: usize,
}

impl Held {
    /// Profile `p` beside what `model` (fitted without it) predicts from its `groups`.
    fn of(p: &Profile, model: &CostModel, groups: &[super::Group]) -> Held {
        let (predicted_ms, fallbacks) = model.predict(groups);
        Held {
            model: p.model.clone(),
            input: p.input.clone(),
            threads: p.threads,
            precision: p.precision,
            cores: p.cores.clone(),
            measured_ms: p.latency_ms,
            measured_half_width: p.relative_half_width(),
            rounds: p.rounds,
            predicted_ms,
            error: predicted_ms / p.latency_ms - 1.0,
            fallbacks,
        }
    }
}

/// Leave-one-model-out over the latest profiles of `engine` (on `threads`, or every thread
/// count): each zoo model predicted by a cost model fitted without any of its profiles, from its layers alone ([`super::planned_groups`]: nothing
/// of its own profile is used).
pub fn leave_one_model_out(db: &Db, engine: &str, threads: Option<usize>) -> Vec<Held> {
    use rayon::prelude::*;
    let latest = db.latest();
    let held: Vec<&Profile> = latest
        .iter()
        .filter(|p| p.engine == engine && !p.is_probe())
        .filter(|p| threads.is_none_or(|t| t == p.threads))
        .copied()
        .collect();
    // Each held-out model is a fit of its own: in parallel, in the database's order.
    held.par_iter()
        .filter_map(|p| {
            let others: Vec<&Profile> = latest
                .iter()
                .filter(|o| o.model != p.model)
                .copied()
                .collect();
            let model = CostModel::fit_in(
                &others,
                (engine, p.threads, p.cores.as_deref()),
                p.precision,
            )?;
            let groups = planned(p)?;
            Some(Held::of(p, &model, &groups))
        })
        .collect()
}

/// Every ONNX file held out at once: each file profile of `engine` predicted by a cost model
/// fitted on the zoo's models and the probes alone (none of the files), from its layers as a
/// prediction sees them ([`planned`]).
pub fn files_held_out(db: &Db, engine: &str) -> Vec<Held> {
    let latest = db.latest();
    let train: Vec<&Profile> = latest
        .iter()
        .filter(|p| !super::is_file(&p.model))
        .copied()
        .collect();
    // One fit per (thread count, core set, precision).
    type Fit = (usize, Option<Vec<usize>>, super::Precision);
    let mut fits: std::collections::BTreeMap<Fit, Option<CostModel>> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for p in latest
        .iter()
        .filter(|p| p.engine == engine && super::is_file(&p.model))
    {
        let fit = fits
            .entry((p.threads, p.cores.clone(), p.precision))
            .or_insert_with(|| {
                CostModel::fit_in(&train, (engine, p.threads, p.cores.as_deref()), p.precision)
            });
        let (Some(model), Some(groups)) = (fit.as_ref(), planned(p)) else {
            continue;
        };
        out.push(Held::of(p, model, &groups));
    }
    out
}

/// The groups a profile was summed over, as a prediction sees them: its own where each keeps
/// its shape, else the model's rebuilt (None when it cannot be).
pub fn planned(p: &Profile) -> Option<Vec<super::Group>> {
    if p.groups
        .iter()
        .all(|g| g.dims.is_some_and(|d| d.model_bytes > 0))
    {
        return Some(p.groups.clone());
    }
    groups_of(&p.model, &p.input).ok()
}

fn is_fp32(p: &super::Precision) -> bool {
    *p == super::Precision::Fp32
}

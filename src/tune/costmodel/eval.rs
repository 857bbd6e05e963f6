//! Leave one model out: each profiled model predicted by a fit without any profile of it.

use super::{planned_groups, zoo_model, CostModel, Db, Profile};
use serde::Serialize;

/// One model of a leave-one-model-out evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Held {
    pub model: String,
    pub input: String,
    pub threads: usize,
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

/// Leave-one-model-out over the latest profiles of `engine` (on `threads`, or every thread
/// count): each zoo model predicted by a cost model fitted without any of its profiles, from its layers alone ([`planned_groups`]: nothing
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
            let model = CostModel::fit_on(&others, engine, p.threads, p.cores.as_deref())?;
            let groups = planned_groups(&zoo_model(&p.model, &p.input).ok()?);
            let (predicted_ms, fallbacks) = model.predict(&groups);
            Some(Held {
                model: p.model.clone(),
                input: p.input.clone(),
                threads: p.threads,
                cores: p.cores.clone(),
                measured_ms: p.latency_ms,
                measured_half_width: p.relative_half_width(),
                rounds: p.rounds,
                predicted_ms,
                error: predicted_ms / p.latency_ms - 1.0,
                fallbacks,
            })
        })
        .collect()
}

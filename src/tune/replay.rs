//! Replay: a table of configurations measured once, exhaustively, and
//! searches run against it instead of the device, so a strategy's sample efficiency can be
//! judged without noise and over many seeds, beside random and grid search at the same budget.

use crate::tune::prior::Prior;
use crate::tune::search::{self, Settings, Strategy, Trace};
use crate::tune::{Candidate, Measured, Objective, Space};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A measured space (`table.json`, written by `edgeprof tune --exhaustive`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub model: String,
    pub input: String,
    /// Floating-point operations of one sample, for the cost model's features.
    pub flops_per_sample: f64,
    /// Where and when it was measured (the device fingerprint's summary line).
    pub machine: String,
    pub measured_at: String,
    /// The engine whose default configuration a search starts from.
    pub default_engine: String,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub candidate: Candidate,
    /// None: the configuration failed (with the reason).
    pub measured: Option<Measured>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Table {
    pub fn load(path: &Path) -> crate::error::Result<Table> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            crate::error::failed!("cannot read the tuning table {}: {e}", path.display())
        })?;
        serde_json::from_str(&text).map_err(|e| {
            crate::error::BadInput(format!(
                "{} is not a tuning table (written by edgeprof tune --exhaustive): {e}",
                path.display()
            ))
            .into()
        })
    }

    pub fn space(&self) -> Space {
        Space::new(
            self.rows.iter().map(|r| r.candidate.clone()).collect(),
            self.flops_per_sample,
            Some(&self.default_engine),
        )
    }

    /// Each row's cost under `objective`, or why it is not a configuration to pick: it failed
    /// when the table was measured, or it is a lower precision beyond the accuracy limit
    /// (`max_top1_drop`, see [`crate::tune::within_accuracy`]).
    pub fn costs(
        &self,
        objective: Objective,
        max_top1_drop: f64,
    ) -> Vec<Result<f64, search::CandidateFailed>> {
        self.rows
            .iter()
            .map(|r| match &r.measured {
                Some(m) => crate::tune::within_accuracy(&r.candidate.precision, m, max_top1_drop)
                    .map(|()| objective.cost(m)),
                None => Err(r
                    .failure
                    .clone()
                    .unwrap_or_else(|| "failed when the table was measured".into())
                    .into()),
            })
            .collect()
    }
}

/// One strategy's result on one seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedResult {
    pub seed: u64,
    /// The best cost found, relative to the table's best (1.0: found it).
    pub ratio: f64,
    /// The first trial whose best was within the tolerance of the table's best.
    pub trials_to_hit: Option<usize>,
    pub trials: usize,
}

/// One strategy over every seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyResult {
    pub strategy: Strategy,
    /// The guided search started from the database's prior.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prior: bool,
    pub seeds: Vec<SeedResult>,
    /// Seeds whose search came within the tolerance of the best.
    pub hits: usize,
    pub median_ratio: f64,
    /// The median over seeds of the prediction error (guided only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_prediction_error: Option<f64>,
}

/// The comparison `edgeprof tune --replay` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub objective: Objective,
    pub configurations: usize,
    pub budget: usize,
    pub tolerance: f64,
    pub best: f64,
    pub best_label: String,
    /// The accuracy limit the pick kept to: the most top-1 agreement with fp32 a lower
    /// precision could lose (a fraction).
    #[serde(default)]
    pub max_top1_drop: f64,
    /// The best's precision and, for a lower one, its top-1 agreement with fp32.
    #[serde(default)]
    pub best_precision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_top1_agreement: Option<f64>,
    /// The best fp32 configuration's cost, for the speed-up a lower precision buys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_fp32: Option<f64>,
    /// Measured lower-precision rows left out for exceeding the accuracy limit.
    #[serde(default)]
    pub beyond_accuracy_limit: usize,
    pub strategies: Vec<StrategyResult>,
    /// What the prior rested on, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior: Option<String>,
}

impl StrategyResult {
    /// `guided`, `guided + prior`, `random`, `grid`.
    pub fn name(&self) -> String {
        if self.prior {
            format!("{} + prior", self.strategy)
        } else {
            self.strategy.to_string()
        }
    }
}

/// What a replay picks by: the objective, and the accuracy limit lower precisions keep to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pick {
    pub objective: Objective,
    /// The most top-1 agreement with fp32 a lower precision may lose (a fraction).
    pub max_top1_drop: f64,
}

/// Runs `strategy` on the table once.
pub fn replay(
    table: &Table,
    space: &Space,
    pick: Pick,
    settings: Settings,
    prior: Option<&Prior>,
) -> Trace {
    let costs = table.costs(pick.objective, pick.max_top1_drop);
    search::run(
        space,
        settings,
        prior,
        |i, _| Some(costs[i].clone()),
        |_| {},
    )
}

/// Every strategy over `seeds` seeds at `budget` trials (no stall stop: every search spends
/// its budget, so the comparison is at equal cost); with `prior`, the guided search once
/// more, started from it.
pub fn compare(
    table: &Table,
    pick: Pick,
    budget: usize,
    seeds: u64,
    tolerance: f64,
    initial: usize,
    prior: Option<&Prior>,
) -> crate::error::Result<Comparison> {
    let Pick {
        objective,
        max_top1_drop,
    } = pick;
    let space = table.space();
    let costs = table.costs(objective, max_top1_drop);
    let (best_index, best) = costs
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((i, *c.as_ref().ok()?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .ok_or_else(|| {
            crate::error::BadInput(
                "the table has no successful measurement within the accuracy limit".into(),
            )
        })?;
    let mut runs = vec![
        (Strategy::Guided, None),
        (Strategy::Random, None),
        (Strategy::Grid, None),
    ];
    if let Some(p) = prior {
        runs.insert(1, (Strategy::Guided, Some(p)));
    }
    let strategies = runs
        .into_iter()
        .map(|(strategy, prior)| {
            let mut errors = Vec::new();
            let seeds: Vec<SeedResult> = (0..seeds)
                .map(|seed| {
                    let settings = Settings {
                        strategy,
                        budget,
                        stall: 0,
                        initial,
                        seed,
                    };
                    let trace = replay(table, &space, pick, settings, prior);
                    if let Some((median, _, _)) = trace.prediction_error() {
                        errors.push(median);
                    }
                    let found = trace.best().map_or(f64::INFINITY, |b| b.1);
                    SeedResult {
                        seed,
                        ratio: found / best,
                        trials_to_hit: trace
                            .trials
                            .iter()
                            .find(|t| t.best_cost.is_some_and(|c| c <= best * (1.0 + tolerance)))
                            .map(|t| t.n),
                        trials: trace.trials.len(),
                    }
                })
                .collect();
            let ratios: Vec<f64> = seeds.iter().map(|s| s.ratio).collect();
            StrategyResult {
                strategy,
                prior: prior.is_some(),
                hits: seeds.iter().filter(|s| s.trials_to_hit.is_some()).count(),
                median_ratio: crate::stats::median(&ratios).unwrap_or(f64::INFINITY),
                median_prediction_error: crate::stats::median(&errors),
                seeds,
            }
        })
        .collect();
    Ok(Comparison {
        objective,
        configurations: table.rows.len(),
        budget,
        tolerance,
        best,
        best_label: table.rows[best_index].candidate.label(),
        max_top1_drop,
        best_precision: table.rows[best_index].candidate.precision.clone(),
        best_top1_agreement: table.rows[best_index]
            .measured
            .and_then(|m| m.top1_agreement),
        best_fp32: table
            .rows
            .iter()
            .zip(&costs)
            .filter(|(r, _)| r.candidate.precision == "fp32")
            .filter_map(|(_, c)| c.as_ref().ok().copied())
            .min_by(f64::total_cmp),
        beyond_accuracy_limit: table
            .rows
            .iter()
            .zip(&costs)
            .filter(|(r, c)| r.measured.is_some() && c.is_err())
            .count(),
        strategies,
        prior: prior.map(Prior::summary),
    })
}

//! The full-lifecycle scorecard: each framework's development-time facts, its
//! deployment-time facts (curated, and probed on this device), and its runtime results from a
//! results directory, joined into one table per framework. Pure: the caller reads the files,
//! probes the device and renders (`report::scorecard`).

pub mod cards;
pub mod github;
pub mod here;

use crate::results::summary::Row;
use cards::Card;
use here::Here;
use serde::Serialize;
use std::collections::BTreeMap;

/// One workload (model, input, batch, threads, device) as one framework ran it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub model: String,
    pub input: String,
    pub batch: usize,
    pub threads: usize,
    pub device: String,
    /// The condition kept when the framework ran the workload more than once (options, cores):
    /// its fastest.
    pub condition: String,
    pub median_ms: f64,
    /// Half the width of the median's 95 % interval.
    pub median_ci_ms: Option<f64>,
    /// clean, noisy, disturbed or throttled: how far the median can be trusted.
    pub verdict: Option<String>,
    pub images_per_s: Option<f64>,
    pub peak_rss_bytes: Option<u64>,
    pub cpu_mean_pct: Option<f64>,
    /// 1 = fastest median among the frameworks that ran this workload.
    pub rank: usize,
    pub of: usize,
    /// This median over the fastest framework's.
    pub vs_fastest: f64,
}

/// One framework's runtime phase from a results directory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Runtime {
    pub ok: usize,
    pub failed: usize,
    /// Conditions an interrupted run did not reach.
    pub not_run: usize,
    /// Conditions the run left out, with the first reason.
    pub skipped: usize,
    pub skip_reason: Option<String>,
    pub workloads: Vec<Workload>,
    /// Geometric mean of `vs_fastest` over the workloads it ran that another framework ran
    /// too; absent when it shares none.
    pub geomean_vs_fastest: Option<f64>,
    pub shared_workloads: usize,
    pub fastest_in: usize,
}

/// Which results directory the runtime phase comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultsInfo {
    pub dir: String,
    pub name: String,
    pub device: String,
    pub started: String,
    pub conditions: usize,
}

/// One framework's row of the scorecard.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub card: Card,
    /// Probed here; absent when probing was not asked for.
    pub here: Option<Here>,
    /// From the results directory; absent when none was given or the framework was not in it.
    pub runtime: Option<Runtime>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scorecard {
    pub results: Option<ResultsInfo>,
    pub frameworks: Vec<Entry>,
    /// Warnings met while gathering (a damaged cache, unreadable records).
    pub warnings: Vec<String>,
}

/// The workload key that frameworks are compared on.
type Key = (String, String, usize, usize, String);

fn key_of(row: &Row) -> Key {
    (
        row.model.clone(),
        row.input.clone(),
        row.batch,
        row.threads,
        row.device.clone(),
    )
}

/// A results directory as the scorecard reads it: what it is, each engine's runtime phase,
/// and what was wrong in it (warnings).
pub fn from_results(
    dir: &std::path::Path,
) -> crate::error::Result<(ResultsInfo, BTreeMap<String, Runtime>, Vec<String>)> {
    let stored = crate::results::load(dir)?;
    let rows = crate::results::summary::rows(&stored.manifest, &stored.runs);
    let device = &stored.manifest.device;
    let info = ResultsInfo {
        dir: dir.display().to_string(),
        name: stored.manifest.name.clone(),
        device: device
            .board
            .clone()
            .or_else(|| device.cpu_model.clone())
            .unwrap_or_else(|| device.arch.clone()),
        started: stored.manifest.started.clone(),
        conditions: stored.manifest.conditions.len() + stored.manifest.skipped.len(),
    };
    Ok((info, runtimes(&rows), stored.warnings))
}

/// Each engine's runtime phase from a results directory's summary rows (one per condition,
/// skipped and not-run ones included).
pub fn runtimes(rows: &[Row]) -> BTreeMap<String, Runtime> {
    // Each engine's best median per workload.
    let mut best: BTreeMap<String, BTreeMap<Key, &Row>> = BTreeMap::new();
    let mut out: BTreeMap<String, Runtime> = BTreeMap::new();
    let blank = || Runtime {
        ok: 0,
        failed: 0,
        not_run: 0,
        skipped: 0,
        skip_reason: None,
        workloads: Vec::new(),
        geomean_vs_fastest: None,
        shared_workloads: 0,
        fastest_in: 0,
    };
    for row in rows {
        let runtime = out.entry(row.engine.clone()).or_insert_with(blank);
        match row.median_ms {
            Some(median) if row.status == "ok" && median > 0.0 => {
                runtime.ok += 1;
                let slot = best
                    .entry(row.engine.clone())
                    .or_default()
                    .entry(key_of(row))
                    .or_insert(row);
                if slot.median_ms.is_some_and(|m| median < m) {
                    *slot = row;
                }
            }
            _ if row.status == "ok" => runtime.ok += 1,
            _ if row.status == "skipped" => {
                runtime.skipped += 1;
                if let Some(reason) = &row.reason {
                    runtime.skip_reason.get_or_insert_with(|| reason.clone());
                }
            }
            _ if row.status == "not run" => runtime.not_run += 1,
            _ => runtime.failed += 1,
        }
    }
    // The fastest median per workload, and how many engines ran it.
    let mut fastest: BTreeMap<&Key, (f64, usize)> = BTreeMap::new();
    for per_engine in best.values() {
        for (key, row) in per_engine {
            let median = row.median_ms.unwrap_or(f64::INFINITY);
            let slot = fastest.entry(key).or_insert((f64::INFINITY, 0));
            slot.0 = slot.0.min(median);
            slot.1 += 1;
        }
    }
    for (engine, per_engine) in &best {
        let Some(runtime) = out.get_mut(engine) else {
            continue;
        };
        let mut log_sum = 0.0;
        for (key, row) in per_engine {
            let median = row.median_ms.unwrap_or(f64::INFINITY);
            let (best_median, of) = fastest.get(key).copied().unwrap_or((median, 1));
            let rank = 1 + best
                .values()
                .filter_map(|other| other.get(key).and_then(|r| r.median_ms))
                .filter(|m| *m < median)
                .count();
            let vs_fastest = median / best_median;
            if of > 1 {
                runtime.shared_workloads += 1;
                log_sum += vs_fastest.ln();
                if rank == 1 {
                    runtime.fastest_in += 1;
                }
            }
            runtime.workloads.push(Workload {
                model: row.model.clone(),
                input: row.input.clone(),
                batch: row.batch,
                threads: row.threads,
                device: row.device.clone(),
                condition: row.id.clone(),
                median_ms: median,
                median_ci_ms: row.median_ci_ms,
                verdict: row.verdict.clone(),
                images_per_s: row.images_per_s,
                peak_rss_bytes: row.peak_rss_bytes,
                cpu_mean_pct: row.cpu_mean_pct,
                rank,
                of,
                vs_fastest,
            });
        }
        if runtime.shared_workloads > 0 {
            runtime.geomean_vs_fastest = Some((log_sum / runtime.shared_workloads as f64).exp());
        }
    }
    out
}

/// Joins the cards with what was probed here and the runtimes, in the cards' order.
pub fn join(
    cards: Vec<Card>,
    here: Option<Vec<Here>>,
    runtimes: &BTreeMap<String, Runtime>,
    results: Option<ResultsInfo>,
    warnings: Vec<String>,
) -> Scorecard {
    let mut here: BTreeMap<String, Here> = here
        .unwrap_or_default()
        .into_iter()
        .map(|h| (h.framework.clone(), h))
        .collect();
    let frameworks = cards
        .into_iter()
        .map(|card| {
            let runtime = card
                .engine
                .as_ref()
                .and_then(|engine| runtimes.get(engine))
                .cloned();
            Entry {
                here: here.remove(&card.name),
                runtime,
                card,
            }
        })
        .collect();
    Scorecard {
        results,
        frameworks,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(engine: &str, model: &str, median: Option<f64>, status: &str) -> Row {
        let condition = crate::protocol::Condition::new(
            engine,
            crate::config::ModelRef::Zoo(model.into()),
            crate::models::InputShape::default(),
            1,
            0,
            crate::config::Device::Cpu,
        );
        let mut r = crate::results::summary::tests_support::row(&condition, status);
        r.median_ms = median;
        r
    }

    #[test]
    fn ranks_and_the_geometric_mean_compare_only_shared_workloads() {
        let rows = vec![
            row("tract", "mobilenet_v2", Some(2.0), "ok"),
            row("candle", "mobilenet_v2", Some(4.0), "ok"),
            row("tract", "resnet34", Some(10.0), "ok"),
            row("candle", "resnet34", Some(5.0), "ok"),
            // Only tract ran this one: not in the comparison.
            row("tract", "resnet50", Some(30.0), "ok"),
            row("candle", "resnet50", None, "failed"),
        ];
        let mut rows = rows;
        let mut skipped = row("pytorch", "resnet34", None, "skipped");
        skipped.reason = Some("not set up".into());
        rows.push(skipped);
        let r = runtimes(&rows);
        let tract = &r["tract"];
        assert_eq!((tract.ok, tract.failed), (3, 0));
        assert_eq!(tract.shared_workloads, 2);
        assert_eq!(tract.fastest_in, 1);
        // sqrt(1.0 × 2.0)
        let g = tract.geomean_vs_fastest.unwrap_or(0.0);
        assert!((g - 2f64.sqrt()).abs() < 1e-12, "{g}");
        let candle = &r["candle"];
        assert_eq!((candle.ok, candle.failed), (2, 1));
        assert!((candle.geomean_vs_fastest.unwrap_or(0.0) - 2f64.sqrt()).abs() < 1e-12);
        let resnet50 = tract
            .workloads
            .iter()
            .find(|w| w.model == "resnet50")
            .map(|w| (w.rank, w.of));
        assert_eq!(resnet50, Some((1, 1)));
        assert_eq!(r["pytorch"].skipped, 1);
        assert_eq!(r["pytorch"].skip_reason.as_deref(), Some("not set up"));
    }

    #[test]
    fn a_framework_run_twice_on_one_workload_keeps_its_fastest() {
        let mut slow = row("tract", "mobilenet_v2", Some(3.0), "ok");
        slow.id.push_str("/slow");
        let rows = vec![slow, row("tract", "mobilenet_v2", Some(2.0), "ok")];
        let r = runtimes(&rows);
        assert_eq!(r["tract"].workloads.len(), 1);
        assert_eq!(r["tract"].workloads[0].median_ms, 2.0);
        assert_eq!(r["tract"].geomean_vs_fastest, None);
    }
}

use super::*;
use crate::collect::device::Cluster;
use crate::tune::search::{self, Settings, Strategy};
use crate::tune::{core_sets, SpaceSpec};
use anyhow::Context;

/// A space of tract, candle and onnxruntime (two option values) on 1 or 2 threads, two core
/// sets, batch 1 or 4: 48 candidates, like the tables kept with the tests.
fn space() -> Space {
    let sets = core_sets(
        &[Cluster {
            cpus: vec![0, 1],
            capacity: None,
            max_freq_mhz: None,
        }],
        &[0, 1],
    );
    SpaceSpec {
        engines: vec!["tract".into(), "candle".into(), "onnxruntime".into()],
        threads: vec![1, 2],
        batch: vec![1, 4],
        core_sets: sets,
        devices: vec![crate::config::Device::Cpu],
        options: [(
            "onnxruntime".to_string(),
            crate::tune::OptionSpace::from([
                (
                    "graph_optimization_level".to_string(),
                    vec!["basic".into(), "all".into()],
                ),
                ("spinning".to_string(), vec![true.into(), false.into()]),
            ]),
        )]
        .into(),
        flops_per_sample: 1e8,
    }
    .build()
}

/// A law of cost with a per-model scale and per-configuration effects: onnxruntime with every
/// graph optimisation fastest, candle slowest, two threads help on all cores and hurt on one,
/// batch costs per sample a little less.
fn law(scale: f64, c: &Candidate) -> f64 {
    let engine = match c.engine.as_str() {
        "tract" => 1.0,
        "candle" => 6.0,
        _ => match c.options.get("graph_optimization_level") {
            Some(v) if v == "all" => 0.25,
            _ => 1.3,
        },
    };
    let spin = match c.options.get("spinning") {
        Some(v) if v == false => 1.1,
        _ => 1.0,
    };
    let threads = match (c.threads, c.cores.cpus.is_none()) {
        (2, true) => 0.7,
        (2, false) => 1.6,
        _ => 1.0,
    };
    scale * engine * spin * threads * c.batch as f64 * 0.9
}

fn measured(ms: f64) -> Measured {
    Measured {
        mean_ms: ms,
        p99_ms: ms * 1.2,
        throughput: 1e3 / ms,
        peak_rss_bytes: None,
    }
}

/// A database with every candidate of `space` measured on `model` under the law at `scale`.
fn db_of(space: &Space, models: &[(&str, f64)]) -> Db {
    let mut db = Db::default();
    for (model, scale) in models {
        for c in &space.candidates {
            db.trials.push(TrialRecord::new(
                model,
                "3x64x64",
                c,
                measured(law(*scale, c)),
                "tune",
            ));
        }
    }
    db
}

/// The stored layer profiles (17 zoo models and 80 probes, one and two threads): the models' scales.
fn with_profiles(mut db: Db) -> Db {
    let text = include_str!("../../../tests/fixtures/costmodel/tract-2core-x86.jsonl");
    for line in text.lines() {
        if let Ok(p) = serde_json::from_str::<Profile>(line) {
            db.profiles.push(p);
        }
    }
    db
}

fn best_index(space: &Space, scale: f64) -> usize {
    (0..space.candidates.len())
        .min_by(|&a, &b| {
            law(scale, &space.candidates[a]).total_cmp(&law(scale, &space.candidates[b]))
        })
        .unwrap_or(0)
}

/// The prior of mobilenet_v2 at 3x64x64 for latency; `own`: its own trials count.
fn prior_of(db: &Db, space: &Space, own: bool) -> Prior {
    build(
        db,
        "mobilenet_v2",
        "3x64x64",
        space,
        Objective::Latency,
        own,
    )
}

#[test]
fn other_models_trials_transfer_the_configuration_effects() -> anyhow::Result<()> {
    let space = space();
    let db = with_profiles(db_of(&space, &[("resnet18", 4.0), ("squeezenet1_1", 1.0)]));
    let prior = prior_of(&db, &space, true);
    assert_eq!(prior.predicted(), space.candidates.len(), "{prior:?}");
    assert_eq!(prior.models, vec!["resnet18", "squeezenet1_1"]);
    assert_eq!(prior.own_trials, 0);
    assert!(
        prior.summary().contains("trials of 2 other model(s)"),
        "{}",
        prior.summary()
    );
    // Every candidate is an exact match; the ranking is the law's.
    let log = |i: usize| prior.entries[i].map_or(f64::NAN, |e| e.log_cost);
    let best = (0..space.candidates.len())
        .min_by(|&a, &b| log(a).total_cmp(&log(b)))
        .context("empty")?;
    assert_eq!(best, best_index(&space, 1.0));
    for (i, c) in space.candidates.iter().enumerate() {
        let e = prior.entries[i].context("missing")?;
        assert_eq!(e.source, Source::Transferred { level: 0 });
        // Ratios between candidates are the law's exactly.
        let want = (law(1.0, c) / law(1.0, &space.candidates[0])).ln();
        assert!((log(i) - log(0) - want).abs() < 1e-9, "{}", c.label());
    }
    Ok(())
}

#[test]
fn a_configuration_not_measured_on_other_models_falls_back_to_a_looser_match() -> anyhow::Result<()>
{
    let space = space();
    // The other model was measured at batch 1 only.
    let mut db = with_profiles(db_of(&space, &[("resnet18", 4.0)]));
    db.trials.retain(|t| t.candidate.batch == 1);
    let prior = prior_of(&db, &space, true);
    for (i, c) in space.candidates.iter().enumerate() {
        let e = prior.entries[i].context("missing")?;
        let want = if c.batch == 1 { 0 } else { 2 };
        assert_eq!(
            e.source,
            Source::Transferred { level: want },
            "{}",
            c.label()
        );
        if c.batch == 4 {
            // Batch 4's latency is per sample the batch-1 one, times four.
            let one = space
                .candidates
                .iter()
                .position(|o| o.batch == 1 && key(o, 2) == key(c, 2))
                .and_then(|j| prior.entries[j])
                .context("no batch-1 twin")?;
            assert!((e.log_cost - one.log_cost - 4f64.ln()).abs() < 1e-9);
            assert!(e.sd > one.sd);
        }
    }
    Ok(())
}

#[test]
fn a_second_tuning_starts_from_the_first_ones_best() -> anyhow::Result<()> {
    let space = space();
    // The first tuning measured eight candidates, the law's best among them.
    let best = best_index(&space, 2.0);
    let mut db = Db::default();
    for i in (0..space.candidates.len()).step_by(7).chain([best]) {
        let c = &space.candidates[i];
        db.trials.push(TrialRecord::new(
            "mobilenet_v2",
            "3x64x64",
            c,
            measured(law(2.0, c)),
            "tune",
        ));
    }
    let prior = prior_of(&db, &space, true);
    assert_eq!(prior.own_trials, 8);
    assert_eq!(
        prior.entries[best].map(|e| e.source),
        Some(Source::Measured)
    );
    // Without any other model or layer profile, only what was measured is predicted.
    assert_eq!(prior.predicted(), 8);
    let settings = Settings {
        strategy: Strategy::Guided,
        budget: 5,
        stall: 0,
        initial: 2,
        seed: 1,
    };
    let trace = search::run(
        &space,
        settings,
        Some(&prior),
        |i, _| Some(Ok(law(2.0, &space.candidates[i]))),
        |_| {},
    );
    assert_eq!(trace.trials[0].index, best);
    // Left out (a replay), the same database predicts nothing.
    let none = prior_of(&db, &space, false);
    assert!(none.is_empty());
    assert!(none.summary().starts_with("no prior"), "{}", none.summary());
    Ok(())
}

#[test]
fn the_guided_search_corrects_a_prior_that_is_wrong_about_one_engine() -> anyhow::Result<()> {
    let space = space();
    let db = with_profiles(db_of(&space, &[("resnet18", 4.0)]));
    let prior = prior_of(&db, &space, true);
    // On this model, onnxruntime is three times slower than on the other: tract on two threads
    // and all cores is best, the prior's favourites are not.
    let truth = |c: &Candidate| law(1.0, c) * if c.engine == "onnxruntime" { 12.0 } else { 1.0 };
    let optimum = space
        .candidates
        .iter()
        .map(truth)
        .fold(f64::INFINITY, f64::min);
    // Eight trials: as many as the prior has onnxruntime favourites at batch 1, so trusting
    // the prior alone would never reach tract.
    let settings = Settings {
        strategy: Strategy::Guided,
        budget: 8,
        stall: 0,
        initial: 2,
        seed: 3,
    };
    let trace = search::run(
        &space,
        settings,
        Some(&prior),
        |i, _| Some(Ok(truth(&space.candidates[i]))),
        |_| {},
    );
    let (_, found) = trace.best().context("no best")?;
    assert!(found <= optimum * 1.05, "found {found}, optimum {optimum}");
    assert!(trace.trials.iter().all(|t| t.predicted.is_some()));
    Ok(())
}

#[test]
fn the_database_keeps_trials_beside_profiles_and_skips_broken_lines() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db.jsonl");
    let space = space();
    let profile = include_str!("../../../tests/fixtures/costmodel/tract-2core-x86.jsonl")
        .lines()
        .next()
        .context("empty fixture")?;
    std::fs::write(&path, format!("{profile}\n{{\"kind\": \"trial\"}}\n\n"))?;
    let mut db = Db::open(&path)?;
    db.append_trial(TrialRecord::new(
        "resnet18",
        "3x64x64",
        &space.candidates[3],
        measured(2.5),
        "tune",
    ))?;
    let again = Db::open(&path)?;
    assert_eq!(again.profiles.len(), 1);
    assert_eq!(again.trials.len(), 1);
    assert_eq!(again.trials[0].candidate, space.candidates[3]);
    assert_eq!(again.skipped, vec![2]);
    Ok(())
}

#[test]
fn layer_profiles_alone_predict_tract_on_all_cores() -> anyhow::Result<()> {
    let space = space();
    let prior = prior_of(&with_profiles(Db::default()), &space, true);
    let predicted: Vec<&Candidate> = space
        .candidates
        .iter()
        .zip(&prior.entries)
        .filter_map(|(c, e)| e.map(|_| c))
        .collect();
    // tract × threads 1, 2 × batch 1, 4 on all cores.
    assert_eq!(predicted.len(), 4, "{prior:?}");
    assert!(predicted
        .iter()
        .all(|c| c.engine == "tract" && c.cores.cpus.is_none()));
    assert!(prior
        .entries
        .iter()
        .flatten()
        .all(|e| e.source == Source::Layers));
    // Batch 4's call takes four times batch 1's.
    let log = |threads: usize, batch: usize| {
        space
            .candidates
            .iter()
            .zip(&prior.entries)
            .find(|(c, _)| {
                c.engine == "tract"
                    && c.cores.cpus.is_none()
                    && c.threads == threads
                    && c.batch == batch
            })
            .and_then(|(_, e)| e.map(|e| e.log_cost))
    };
    let (one, four) = (log(1, 1).context("b1")?, log(1, 4).context("b4")?);
    assert!((four - one - 4f64.ln()).abs() < 1e-9);
    assert!(
        prior
            .summary()
            .contains("layer profiles of 17 model(s) and 80 operator probe(s)"),
        "{}",
        prior.summary()
    );
    Ok(())
}

#[test]
fn layer_profiles_of_a_core_set_predict_that_core_set() -> anyhow::Result<()> {
    let space = space();
    // The stored profiles again, as if measured confined to CPU 0, every layer 1.5 times slower.
    let mut db = with_profiles(Db::default());
    let one: Vec<Profile> = db
        .profiles
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.cores = Some(vec![0]);
            p.latency_ms *= 1.5;
            for g in &mut p.groups {
                g.seconds *= 1.5;
            }
            p
        })
        .collect();
    db.profiles.extend(one);
    let prior = prior_of(&db, &space, true);
    let log = |cpus: Option<Vec<usize>>, threads: usize| {
        space
            .candidates
            .iter()
            .zip(&prior.entries)
            .find(|(c, _)| {
                c.engine == "tract" && c.cores.cpus == cpus && c.threads == threads && c.batch == 1
            })
            .and_then(|(_, e)| e.map(|e| e.log_cost))
    };
    // tract × threads 1, 2 × batch 1, 4 on all cores and on `one` (CPU 0).
    assert_eq!(prior.predicted(), 8, "{prior:?}");
    for threads in [1, 2] {
        let all = log(None, threads).context("all cores")?;
        let cpu0 = log(Some(vec![0]), threads).context("CPU 0")?;
        assert!((cpu0 - all - 1.5f64.ln()).abs() < 0.05, "{all} {cpu0}");
    }
    // Without profiles of a core set, its candidates are not predicted from layers.
    let prior = prior_of(&with_profiles(Db::default()), &space, true);
    assert_eq!(prior.predicted(), 4, "{prior:?}");
    Ok(())
}

#[test]
fn onnxruntime_layer_profiles_predict_it_at_the_options_they_were_measured_at() -> anyhow::Result<()>
{
    let space = space();
    // The stored tract profiles stand in for onnxruntime's, four times faster.
    let mut db = with_profiles(Db::default());
    let ort: Vec<Profile> = db
        .profiles
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.engine = "onnxruntime".into();
            p.latency_ms /= 4.0;
            for g in &mut p.groups {
                g.seconds /= 4.0;
            }
            p
        })
        .collect();
    db.profiles.extend(ort);
    let prior = prior_of(&db, &space, true);
    let predicted: Vec<(&Candidate, f64)> = space
        .candidates
        .iter()
        .zip(&prior.entries)
        .filter_map(|(c, e)| e.map(|e| (c, e.log_cost)))
        .collect();
    // tract and onnxruntime (every optimisation, spinning: as profiled) × threads 1, 2 ×
    // batch 1, 4, on all cores; onnxruntime's other options have no profile to go on.
    assert_eq!(predicted.len(), 8, "{prior:?}");
    for (c, _) in &predicted {
        if c.engine == "onnxruntime" {
            assert_eq!(
                c.options.get("graph_optimization_level"),
                Some(&"all".into())
            );
            assert_eq!(c.options.get("spinning"), Some(&true.into()));
        }
    }
    let log = |engine: &str| {
        predicted
            .iter()
            .find(|(c, _)| c.engine == engine && c.threads == 1 && c.batch == 1)
            .map(|(_, l)| *l)
    };
    let (tract, ort) = (
        log("tract").context("tract")?,
        log("onnxruntime").context("ort")?,
    );
    assert!((tract - ort - 4f64.ln()).abs() < 0.05, "{tract} {ort}");
    assert!(
        prior.summary().contains(
            "layer profiles of 17 model(s) and 80 operator probe(s) (onnxruntime, tract)"
        ),
        "{}",
        prior.summary()
    );
    Ok(())
}

#[test]
fn pytorch_layer_profiles_stand_for_eager_mode_with_one_inter_op_thread() {
    let candidate = |options: serde_json::Value| Candidate {
        engine: "pytorch".into(),
        threads: 1,
        cores: crate::tune::CoreSet {
            label: "all".into(),
            cpus: None,
            count: 2,
            capacity: 1.0,
        },
        batch: 1,
        device: crate::config::Device::Cpu,
        precision: "float32".into(),
        options: options.as_object().cloned().unwrap_or_default(),
    };
    // `costmodel profile --engine pytorch` times eager modules with one inter-op thread.
    assert!(profiled_as(&candidate(serde_json::json!({}))));
    assert!(profiled_as(&candidate(
        serde_json::json!({"mode": "eager", "inter_op_threads": 1})
    )));
    assert!(!profiled_as(&candidate(
        serde_json::json!({"mode": "torchscript"})
    )));
    assert!(!profiled_as(&candidate(
        serde_json::json!({"inter_op_threads": 2})
    )));
}

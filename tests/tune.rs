//! The tuner: replay over the table measured on a real machine, a live search through
//! worker processes, core sets applied to workers, and placement with a split plan run on two
//! CPU-side units.

mod common;

use common::{edgeprof, json_of, only_entry, read, temp_dir, write};
use std::path::Path;

/// The exhaustively measured space kept with the tests (48 configurations of mobilenet_v2 at
/// 3x64x64 on tract, candle and onnxruntime, measured by `edgeprof tune --exhaustive`).
fn table() -> String {
    format!(
        "{}/tests/fixtures/tune/mobilenet_v2-3x64x64.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A strategy's result; `guided+prior` names the guided search started from the prior.
fn strategy<'a>(c: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let (name, prior) = match name.strip_suffix("+prior") {
        Some(n) => (n, true),
        None => (name, false),
    };
    match c["strategies"].as_array().and_then(|s| {
        s.iter()
            .find(|s| s["strategy"] == name && s["prior"].as_bool().unwrap_or(false) == prior)
    }) {
        Some(s) => s,
        None => panic!("no {name} in {c}"),
    }
}

#[test]
fn replayed_the_guided_search_finds_the_best_within_a_quarter_of_the_trials() {
    let c = json_of(&["tune", "--replay", &table(), "--seeds", "10", "--json"]);
    let configurations = c["configurations"].as_u64().unwrap_or(0);
    let budget = c["budget"].as_u64().unwrap_or(u64::MAX);
    assert!(configurations >= 48, "{configurations}");
    assert!(budget * 4 <= configurations, "budget {budget}");
    assert_eq!(c["tolerance"], 0.05);
    let guided = strategy(&c, "guided");
    let random = strategy(&c, "random");
    let grid = strategy(&c, "grid");
    for s in [guided, random, grid] {
        assert_eq!(s["seeds"].as_array().map(Vec::len), Some(10));
        for seed in s["seeds"].as_array().into_iter().flatten() {
            assert_eq!(seed["trials"].as_u64(), Some(budget), "{seed}");
            assert!(seed["ratio"].as_f64().unwrap_or(0.0) >= 1.0, "{seed}");
        }
    }
    let hits = guided["hits"].as_u64().unwrap_or(0);
    assert!(
        hits >= 8,
        "the guided search found the best in {hits} of 10 seeds"
    );
    let g = guided["median_ratio"].as_f64().unwrap_or(f64::MAX);
    let r = random["median_ratio"].as_f64().unwrap_or(0.0);
    assert!(
        g < r || (g == r && hits > random["hits"].as_u64().unwrap_or(0)),
        "guided median {g} does not beat random median {r}"
    );
    assert!(guided["median_prediction_error"].as_f64().is_some());
    // The text form names the table's best and every strategy.
    let out = edgeprof()
        .args(["tune", "--replay", &table(), "--seeds", "3"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for needle in ["best in the table", "guided", "random", "grid", "per seed"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

/// The other table kept with the tests: 48 configurations of squeezenet1_1 at 3x64x64 on the
/// same machine, engines and options.
fn other_table() -> String {
    format!(
        "{}/tests/fixtures/tune/squeezenet1_1-3x64x64.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A measurement database holding the stored layer profiles and `table`'s trials, imported the
/// way a user would (twice: the second import adds nothing).
fn database_with(dir: &Path, table: &str) -> String {
    let db = dir.join("costmodel.jsonl");
    let profiles = format!(
        "{}/tests/fixtures/costmodel/tract-2core-x86.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    write(&db, &read(Path::new(&profiles)));
    let db = db.display().to_string();
    let out = edgeprof()
        .args(["costmodel", "import", table, "--db", &db])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains(": 48 trial(s) of "), "{text}");
    let out = edgeprof()
        .args(["costmodel", "import", table, "--db", &db])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("0 trial(s)") && text.contains("48 already"),
        "{text}"
    );
    db
}

#[test]
fn with_the_databases_prior_the_search_finds_the_best_within_fifteen_percent_of_the_table() {
    let tmp = temp_dir();
    // Each table replayed with a prior from the other model's trials and the layer profiles;
    // the replayed model's own trials are never in it.
    for (replayed, other, other_model) in [
        (table(), other_table(), "squeezenet1_1"),
        (other_table(), table(), "mobilenet_v2"),
    ] {
        let dir = tmp.path().join(other_model);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let db = database_with(&dir, &other);
        let c = json_of(&[
            "tune", "--replay", &replayed, "--db", &db, "--budget", "7", "--seeds", "10", "--json",
        ]);
        let configurations = c["configurations"].as_u64().unwrap_or(0);
        assert!(configurations >= 48, "{configurations}");
        assert!(7 * 100 <= 15 * configurations);
        let prior = c["prior"].as_str().unwrap_or_default();
        assert!(prior.contains(other_model), "{prior}");
        let with = strategy(&c, "guided+prior");
        let hits = with["hits"].as_u64().unwrap_or(0);
        assert!(hits >= 8, "with the prior: {hits} of 10 seeds ({replayed})");
        let without = strategy(&c, "guided")["hits"].as_u64().unwrap_or(0);
        assert!(
            hits > without,
            "{hits} with, {without} without ({replayed})"
        );
    }
    // Without the prior, the figures measured before the prior existed (the stored table, 7
    // trials, 20 seeds): the guided search 3 of 20, random search 7 of 20.
    let c = json_of(&[
        "tune",
        "--replay",
        &table(),
        "--budget",
        "7",
        "--seeds",
        "20",
        "--json",
    ]);
    assert!(c["prior"].is_null(), "{c}");
    assert_eq!(strategy(&c, "guided")["hits"], 3, "{c}");
    assert_eq!(strategy(&c, "random")["hits"], 7, "{c}");
}

/// With onnxruntime's layer profiles beside tract's and no trial of any model, the prior
/// predicts onnxruntime at the options it was profiled at, which is each table's best.
#[test]
fn onnxruntime_layer_profiles_alone_lead_the_search_to_its_best_configuration() {
    let tmp = temp_dir();
    let db = tmp.path().join("costmodel.jsonl");
    let fixture = |name: &str| {
        read(Path::new(&format!(
            "{}/tests/fixtures/costmodel/{name}",
            env!("CARGO_MANIFEST_DIR")
        )))
    };
    write(
        &db,
        &(fixture("tract-2core-x86.jsonl") + &fixture("onnxruntime-2core-x86.jsonl")),
    );
    let db = db.display().to_string();
    for replayed in [table(), other_table()] {
        let c = json_of(&[
            "tune", "--replay", &replayed, "--db", &db, "--budget", "7", "--seeds", "10", "--json",
        ]);
        let prior = c["prior"].as_str().unwrap_or_default();
        assert!(
            prior.contains(
                "layer profiles of 17 model(s) and 80 operator probe(s) (onnxruntime, tract)"
            ) && !prior.contains("trials"),
            "{prior}"
        );
        let hits = strategy(&c, "guided+prior")["hits"].as_u64().unwrap_or(0);
        assert!(hits >= 8, "with the prior: {hits} of 10 seeds ({replayed})");
    }
}

#[test]
fn a_broken_table_is_refused_with_one_clear_line() {
    let tmp = temp_dir();
    let bad = tmp.path().join("table.json");
    write(&bad, "{\"model\": 3}");
    common::assert_bad_input(
        &["tune", "--replay", &bad.display().to_string()],
        "is not a tuning table",
    );
    common::assert_bad_input(&["tune", "--model", "no_such_model"], "neither a zoo model");
}

/// The first two CPUs this process may use (the same one twice on a one-CPU machine).
fn two_cpus() -> (usize, usize) {
    let cpus = common::allowed_cpus();
    let first = cpus.first().copied().unwrap_or(0);
    (first, cpus.get(1).copied().unwrap_or(first))
}

const QUICK: &str = r#"
[matrix]
classes = 10

[measure]
warmup = 2
iterations = 5
repeats = 2
retries = 0
check_outputs = false
"#;

/// `edgeprof tune --config CONFIG --output OUT` with a cache directory of its own under `tmp`
/// (no database of this machine's is read or written).
fn tune_command(tmp: &Path, config: &Path, out: &Path) -> assert_cmd::Command {
    let mut c = edgeprof();
    c.env("EDGEPROF_CACHE_DIR", tmp.join("cache"))
        .args(["tune", "--config"])
        .arg(config)
        .arg("--output")
        .arg(out);
    c
}

#[test]
fn a_live_search_stays_within_its_budget_and_writes_a_runnable_best_config() {
    let tmp = temp_dir();
    let config = tmp.path().join("tune.toml");
    let (a, _) = two_cpus();
    write(
        &config,
        &format!(
            "{QUICK}\n[tune]\nmodel = \"shufflenet_v2_x0_5\"\ninput = \"3x32x32\"\n\
             engines = [\"tract\", \"candle\"]\nthreads = [1, 2]\ncores = [\"all\", \"{a}\"]\n\
             budget = 6\nconfirm = 1\nstall = 0\n"
        ),
    );
    let out = tmp.path().join("out");
    let best = tmp.path().join("best.toml");
    let assert = tune_command(tmp.path(), &config, &out)
        .arg("--write-config")
        .arg(&best)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    for needle in ["best:", "default:", "cost model:"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let dir = only_entry(&out);
    let report: serde_json::Value = match serde_json::from_str(&read(&dir.join("tune.json"))) {
        Ok(v) => v,
        Err(e) => panic!("tune.json: {e}"),
    };
    // The search's best is re-measured against the default in turns, unless it is the default.
    let default_is_best = report["best"] == report["default"];
    let confirmed = if default_is_best { 0 } else { 2 };
    let trials = report["trace"]["trials"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(trials.len(), 6, "{report}");
    assert_eq!(report["space"].as_array().map(Vec::len), Some(4 + 4));
    // The default first; every trial a distinct candidate.
    assert_eq!(trials[0]["index"], report["default"]);
    let mut seen: Vec<u64> = trials.iter().filter_map(|t| t["index"].as_u64()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 6);
    assert!(report["best_cost"].as_f64().is_some_and(|c| c > 0.0));
    assert!(trials
        .iter()
        .skip(2)
        .all(|t| t["predicted"].as_f64().is_some()));
    let confirmation = &report["confirmation"];
    if default_is_best {
        assert!(confirmation.is_null(), "{report}");
        assert!(text.contains("the default is the best found"), "{text}");
    } else {
        assert_eq!(
            confirmation["default_costs"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(confirmation["best_costs"].as_array().map(Vec::len), Some(1));
        assert!(text.contains("re-measured in turns"), "{text}");
    }
    // Every trial and confirmation run is a stored run record, so `report` reads the directory.
    let runs = read(&dir.join("runs.jsonl"));
    assert_eq!(runs.lines().count(), 6 + confirmed);
    edgeprof()
        .arg("report")
        .arg(&dir)
        .arg("--no-charts")
        .assert()
        .success();
    // The best configuration runs as a config of its own.
    let best_text = read(&best);
    assert!(best_text.contains("[matrix]"), "{best_text}");
    let rerun = tmp.path().join("rerun");
    common::run_config(&best, &rerun);
}

/// When the best found is the default there is nothing to weigh it against: no re-measurement
/// and no gain figure of a configuration over itself.
#[test]
fn the_default_as_the_best_is_not_re_measured_against_itself() {
    let tmp = temp_dir();
    let config = tmp.path().join("tune.toml");
    // One candidate, the default: every core as threads, on every core, batch 1.
    let threads = common::allowed_cpus().len().max(1);
    write(
        &config,
        &format!(
            "{QUICK}\n[tune]\nmodel = \"shufflenet_v2_x0_5\"\ninput = \"3x32x32\"\n\
             engines = [\"tract\"]\nthreads = [{threads}]\ncores = [\"all\"]\nbatch = [1]\n\
             budget = 3\nconfirm = 3\nstall = 0\n"
        ),
    );
    let out = tmp.path().join("out");
    let assert = tune_command(tmp.path(), &config, &out).assert().success();
    let text = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(text.contains("the default is the best found"), "{text}");
    assert!(!text.contains("→ gain"), "{text}");
    assert!(!text.contains("× the default"), "{text}");
    let dir = only_entry(&out);
    let report: serde_json::Value = match serde_json::from_str(&read(&dir.join("tune.json"))) {
        Ok(v) => v,
        Err(e) => panic!("tune.json: {e}"),
    };
    assert_eq!(
        report["space"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert!(report["confirmation"].is_null(), "{report}");
    assert_eq!(read(&dir.join("runs.jsonl")).lines().count(), 1);
}

#[test]
fn a_second_tuning_of_the_same_model_starts_from_the_first_ones_best() {
    let tmp = temp_dir();
    let config = tmp.path().join("tune.toml");
    // candle first: its default (two threads) is the first trial of a tuning without a prior,
    // and candle runs this model about seven times slower than tract here.
    write(
        &config,
        &format!(
            "{QUICK}\n[tune]\nmodel = \"mobilenet_v2\"\ninput = \"3x32x32\"\n\
             engines = [\"candle\", \"tract\"]\nthreads = [1, 2]\ncores = [\"all\"]\n\
             budget = 4\nconfirm = 0\nstall = 0\n"
        ),
    );
    let db = tmp.path().join("costmodel.jsonl");
    let tune = |name: &str| -> (serde_json::Value, String) {
        let out = tmp.path().join(name);
        let assert = tune_command(tmp.path(), &config, &out)
            .arg("--db")
            .arg(&db)
            .assert()
            .success();
        let said = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        let dir = only_entry(&out);
        match serde_json::from_str(&read(&dir.join("tune.json"))) {
            Ok(v) => (v, said),
            Err(e) => panic!("tune.json: {e}"),
        }
    };
    let trials_in_db = || {
        read(&db)
            .lines()
            .filter(|l| l.contains("\"kind\":\"trial\""))
            .count()
    };
    let (first, said) = tune("first");
    assert!(said.contains("no prior"), "{said}");
    let best = first["best"].clone();
    let trials = first["trace"]["trials"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(trials[0]["index"], first["default"], "{first}");
    let reached = |trials: &[serde_json::Value]| {
        trials
            .iter()
            .position(|t| t["index"] == best)
            .map_or(usize::MAX, |p| p + 1)
    };
    let first_reached = reached(&trials);
    assert!(first_reached >= 2, "{first}");
    assert_eq!(trials_in_db(), 4);
    // The second tuning starts from the first one's trials: its best comes first.
    let (second, said) = tune("second");
    assert!(said.contains("4 earlier trial(s) of this model"), "{said}");
    let trials = second["trace"]["trials"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let second_reached = reached(&trials);
    assert_eq!(second_reached, 1, "{second}");
    assert!(second_reached < first_reached);
    assert!(trials[0]["predicted"].as_f64().is_some(), "{second}");
    assert_eq!(trials_in_db(), 8);
}

#[test]
fn a_core_set_confines_the_worker_before_the_engine_starts_its_threads() {
    let (a, _) = two_cpus();
    let tmp = temp_dir();
    let config = tmp.path().join("cores.toml");
    write(
        &config,
        &format!(
            "[matrix]\nclasses = 10\nmodels = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\n\
             threads = [0]\ncores = [\"{a}\"]\n\n[measure]\nwarmup = 2\niterations = 5\n\
             repeats = 2\nretries = 0\ncheck_outputs = false\n"
        ),
    );
    let out = tmp.path().join("out");
    common::run_config(&config, &out);
    let dir = only_entry(&out);
    let record: serde_json::Value =
        match serde_json::from_str(read(&dir.join("runs.jsonl")).lines().next().unwrap_or("")) {
            Ok(v) => v,
            Err(e) => panic!("runs.jsonl: {e}"),
        };
    let id = record["condition"]["id"].as_str().unwrap_or("");
    assert!(id.ends_with(&format!("/c{a}")), "{id}");
    assert_eq!(record["condition"]["cores"], serde_json::json!([a]));
    // "All cores" inside a one-CPU set is one thread: the engine saw the confinement.
    assert_eq!(record["run"]["threads"], 1, "{record}");
}

#[test]
fn a_split_plan_runs_on_two_cpu_units_and_matches_the_whole_model() {
    let (a, b) = two_cpus();
    let units = format!("first={a},second={b}");
    let report = json_of(&[
        "place",
        "--model",
        "mobilenet_v2",
        "--input",
        "3x32x32",
        "--classes",
        "10",
        "--units",
        &units,
        "--blocks",
        "4",
        "--runs",
        "3",
        "--assign",
        "0,0,1,1",
        "--json",
    ]);
    let stages = report["stages"].as_array().cloned().unwrap_or_default();
    assert_eq!(stages.len(), 4);
    for s in &stages {
        let ms = s["ms"].as_array().cloned().unwrap_or_default();
        assert_eq!(ms.len(), 2);
        assert!(
            ms.iter().all(|m| m.as_f64().is_some_and(|m| m > 0.0)),
            "{s}"
        );
    }
    assert_eq!(report["ran"]["units"], serde_json::json!([0, 0, 1, 1]));
    // Whether a GPU was weighed is said: what memory it has where this machine has one, that
    // there is none where it has none.
    let gpu = report["gpu"].as_str().unwrap_or("");
    let expected = match edgeprof::collect::gpuprof::memory_kind(std::path::Path::new("/"), 0) {
        Ok(_) => "memory (",
        Err(_) => "no NVIDIA GPU here",
    };
    assert!(gpu.contains(expected), "{gpu}");
    let predicted = report["ran"]["predicted_ms"].as_f64().unwrap_or(0.0);
    assert!(predicted > 0.0);
    let measured = &report["measured"];
    assert!(measured["median_ms"].as_f64().is_some_and(|m| m > 0.0));
    assert_eq!(measured["segments"].as_array().map(Vec::len), Some(2));
    assert!(
        measured["max_relative_difference"]
            .as_f64()
            .is_some_and(|d| d < 1e-4),
        "{measured}"
    );
    // The optimal plan is never predicted slower than running everything on one unit.
    let optimal = report["optimal"]["predicted_ms"]
        .as_f64()
        .unwrap_or(f64::MAX);
    for single in report["single"].as_array().into_iter().flatten() {
        assert!(optimal <= single["predicted_ms"].as_f64().unwrap_or(0.0) + 1e-9);
    }
    common::assert_bad_input(
        &[
            "place",
            "--model",
            "mobilenet_v2",
            "--input",
            "3x32x32",
            "--units",
            &units,
            "--blocks",
            "4",
            "--assign",
            "0,1",
        ],
        "--assign names 2 unit(s) but the chain has 4 block(s)",
    );
}

/// A table measured here with precision in the space (`edgeprof tune --exhaustive --precision
/// fp32,int8`, mobilenet_v2 at 3x32x32 in batches of 16 on tract and onnxruntime): each int8
/// row is faster than its fp32 twin and agrees with it on the top-1 class of 13 of the 16 images.
fn int8_table() -> String {
    format!(
        "{}/tests/fixtures/tune/mobilenet_v2-3x32x32-b16-int8.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn the_tuner_picks_int8_only_when_its_top1_agreement_keeps_to_the_limit() {
    let table = int8_table();
    let replayed = |limit: Option<&str>| {
        let mut args = vec!["tune", "--replay", &table, "--seeds", "2", "--json"];
        if let Some(limit) = limit {
            args.extend(["--max-top1-drop", limit]);
        }
        json_of(&args)
    };
    // The default limit (at least 99 % agreement) leaves every int8 row out.
    let strict = replayed(None);
    assert_eq!(
        strict["best_label"],
        "onnxruntime t2 all b16 graph_optimization_level=all"
    );
    assert_eq!(strict["best_precision"], "fp32");
    assert_eq!(strict["beyond_accuracy_limit"], 4);
    // Allowing a 20 % drop admits 81.25 %: the faster int8 configuration is the pick.
    let loose = replayed(Some("20%"));
    assert_eq!(
        loose["best_label"],
        "onnxruntime t2 all b16 int8 graph_optimization_level=all"
    );
    assert_eq!(loose["best_top1_agreement"], 0.8125);
    assert_eq!(loose["beyond_accuracy_limit"], 0);
    // A limit just short of the measured agreement still leaves it out.
    assert_eq!(replayed(Some("18"))["best_precision"], "fp32");
    common::assert_bad_input(
        &["tune", "--replay", &int8_table(), "--max-top1-drop", "150%"],
        "not a percentage from 0 to 100",
    );
}

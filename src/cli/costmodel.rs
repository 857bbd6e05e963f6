//! `edgeprof costmodel`: the per-layer learned cost model from the command line. `profile`
//! measures zoo models, probes and ONNX files with tract, onnxruntime or PyTorch into this
//! device's measurement database (each in an `edgeprof costmodel profile-one` child process),
//! `fit` shows what it learns, `predict` gives a model's latency without running it (a zoo model or an ONNX
//! file), `eval` holds each model out in turn and predicts it.

use crate::cli::{print_json, print_out, render, BadInput};
use anyhow::Context;
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use edgeprof::collect::device::cpu_list;
use edgeprof::models::zoo;
use edgeprof::tune::costmodel::{self, probe, CostModel, Db, Measure, Profile, PROFILED_ENGINES};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

mod import;
mod predict;
mod resume;

#[derive(Subcommand, Debug)]
pub enum CostmodelCommand {
    /// Profile zoo models, probes and ONNX files with tract, onnxruntime or PyTorch (end-to-end
    /// latency, then the engine's per-layer profile) into this device's measurement database
    Profile(ProfileArgs),
    /// Fit the cost model from the database and show each operator template's fit
    Fit(DbArgs),
    /// Predict a zoo model's or an ONNX file's latency from its layers, without running it
    Predict(PredictArgs),
    /// Leave one model out: predict each profiled model from a fit without it
    Eval(DbArgs),
    /// Add the measured rows of tables from `edgeprof tune --exhaustive` to the database as
    /// trials, so later tunings of other models start from them, and the layer profiles of
    /// sweeps run with `measure.layer_runs`
    Import(ImportArgs),
    /// Profile one model in this process and print the profile as JSON (what `profile` runs)
    #[command(hide = true)]
    ProfileOne {
        #[arg(long, default_value = "tract")]
        engine: String,
        #[arg(long)]
        python: Option<PathBuf>,
        #[arg(long)]
        model: String,
        #[arg(long)]
        input: String,
        #[arg(long)]
        threads: usize,
        #[arg(long)]
        target: f64,
        #[arg(long)]
        max_runs: usize,
        #[arg(long)]
        layer_runs: usize,
        /// The CPU list to confine this process (and the engine's threads) to
        #[arg(long)]
        cores: Option<String>,
        /// Also measure the load bandwidth at a working set no cache holds
        #[arg(long)]
        memory: bool,
    },
}

#[derive(Args, Debug)]
pub struct DbArgs {
    /// The measurement database (default: this device's, in the cache directory)
    #[arg(long)]
    db: Option<PathBuf>,
    /// The engine whose profiles to fit
    #[arg(long, default_value = "tract", value_parser = PossibleValuesParser::new(PROFILED_ENGINES))]
    engine: String,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// The engine to profile with: tract (in a worker process of its own), onnxruntime (its op
    /// profiler) or pytorch (eager, its modules timed), in their harness under the interpreter
    /// `edgeprof env setup ENGINE` made
    #[arg(long, default_value = "tract", value_parser = PossibleValuesParser::new(PROFILED_ENGINES))]
    engine: String,
    /// The Python interpreter with the engine (onnxruntime, pytorch), instead of the environment
    /// `edgeprof env setup` made or the system's `python3`
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// A zoo model or an ONNX file (FILE.onnx) to profile; repeat for several (default: every
    /// zoo model)
    #[arg(long = "model", value_name = "MODEL")]
    models: Vec<String>,
    #[arg(long, default_value = "3x64x64")]
    input: edgeprof::models::InputShape,
    /// Thread counts, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Re-measure until the median latency's 95 % interval is within this fraction of it
    #[arg(long, default_value_t = 0.03)]
    target: f64,
    /// Most timed runs of the end-to-end latency per model
    #[arg(long, default_value_t = 600)]
    max_runs: usize,
    /// Runs of the per-layer profile
    #[arg(long, default_value_t = 15)]
    layer_runs: usize,
    /// Also profile this many operator-template probes (small networks drawn at random from
    /// the templates), between the models (default: 80 when no --model is named, else none)
    #[arg(long)]
    probes: Option<u64>,
    /// The first probe's seed (probe k is `probe-<seed + k>`)
    #[arg(long, default_value_t = 1)]
    probe_seed: u64,
    /// Profile the probes only (80 unless --probes says), no zoo model
    #[arg(long)]
    probes_only: bool,
    /// The core set to confine every measurement to: all (default), big, little, clusterN, one,
    /// or a CPU list such as 0-1; profiles are kept per core set
    #[arg(long, value_name = "SET", default_value = "all")]
    cores: String,
    /// Measure every profile this many times, each model once per round, and merge them
    /// (the interval then covers how the rounds differ)
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Most rounds of a profile whose merged interval is still wider than --target
    /// (default: twice --rounds)
    #[arg(long)]
    max_rounds: Option<usize>,
    /// Continue the profile a run cut short left beside the database (its measurements are kept
    /// as they are taken, in DB.partial)
    #[arg(long, conflicts_with = "restart")]
    resume: bool,
    /// Discard the measurements a run cut short left, and profile from the start
    #[arg(long)]
    restart: bool,
    #[arg(long)]
    db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// table.json files written by `edgeprof tune --exhaustive` (their rows become trials),
    /// or results directories of sweeps run with `measure.layer_runs` (their conditions'
    /// layer times become profiles)
    #[arg(required = true, value_name = "TABLE|RESULTS_DIR")]
    tables: Vec<PathBuf>,
    #[arg(long)]
    db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// Zoo model, or ONNX file (a path ending in .onnx)
    model: String,
    /// Input as CxHxW: a zoo model's (default 3x64x64, the profiles' size), or the size an ONNX
    /// file is read at (default: its own; needed where it leaves the size open)
    #[arg(long, value_name = "CxHxW")]
    input: Option<edgeprof::models::InputShape>,
    /// Batch size [default: 1, or an ONNX file's own]
    #[arg(long)]
    batch: Option<usize>,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The core set: all (default), big, little, clusterN, one, or a CPU list such as 0-1
    /// (predicted from the profiles measured on it)
    #[arg(long, value_name = "SET", default_value = "all")]
    cores: String,
    /// Show each layer group's predicted time (and the measured one, where the database holds
    /// a profile of this model): which layers the latency comes from, and where the model errs
    #[arg(long)]
    layers: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// Probes profiled with the zoo when no model is named.
const DEFAULT_PROBES: u64 = 80;

/// How long one model's profile may take before its worker is stopped.
const PROFILE_TIMEOUT: Duration = Duration::from_secs(900);

/// Adds each table's measured rows to the database as trials and says how many.
fn open(db: &Option<PathBuf>) -> anyhow::Result<Db> {
    let path = match db {
        Some(p) => p.clone(),
        None => Db::path_for_this_device().ok_or_else(|| {
            BadInput("no cache directory (set EDGEPROF_CACHE_DIR or HOME)".into())
        })?,
    };
    let db = Db::open(&path)?;
    if !db.skipped.is_empty() {
        errln!(
            "warning: {}: {} line(s) are not profiles and were skipped (line {})",
            path.display(),
            db.skipped.len(),
            db.skipped[0]
        );
    }
    Ok(db)
}

pub fn run(command: CostmodelCommand) -> anyhow::Result<()> {
    match command {
        CostmodelCommand::Profile(args) => profile(args),
        CostmodelCommand::Fit(args) => fit(args),
        CostmodelCommand::Predict(args) => predict::predict(args),
        CostmodelCommand::Eval(args) => eval(args),
        CostmodelCommand::Import(args) => import::import(args),
        CostmodelCommand::ProfileOne {
            engine,
            python,
            model,
            input,
            threads,
            target,
            max_runs,
            layer_runs,
            cores,
            memory,
        } => {
            let cores = cores.map(|list| confine(&list)).transpose()?;
            let how = Measure {
                target,
                max_runs,
                layer_runs,
                ..Measure::default()
            };
            let mut p = if engine == "tract" {
                costmodel::measure(&model, &input, threads, how)?
            } else {
                costmodel::measure_external(
                    &engine,
                    &model,
                    &input,
                    threads,
                    how,
                    python.as_deref(),
                )?
            };
            p.cores = cores;
            costmodel::measure_bandwidth(&mut p, memory);
            print_json(&p)
        }
    }
}

/// One model's profile, measured in an `edgeprof costmodel profile-one` child.
fn profile_in_child(
    model: &str,
    input: &str,
    threads: usize,
    cores: Option<&[usize]>,
    memory: bool,
    args: &ProfileArgs,
) -> anyhow::Result<Profile> {
    let mut argv: Vec<String> = vec![
        "costmodel".into(),
        "profile-one".into(),
        "--engine".into(),
        args.engine.clone(),
        "--model".into(),
        model.into(),
        "--input".into(),
        input.into(),
        "--threads".into(),
        threads.to_string(),
        "--target".into(),
        args.target.to_string(),
        "--max-runs".into(),
        args.max_runs.to_string(),
        "--layer-runs".into(),
        args.layer_runs.to_string(),
    ];
    if let Some(p) = &args.python {
        argv.extend(["--python".into(), p.display().to_string()]);
    }
    if let Some(cpus) = cores {
        argv.extend(["--cores".into(), cpu_list(cpus)]);
    }
    if memory {
        argv.push("--memory".into());
    }
    crate::cli::ask_worker(&argv, b"", PROFILE_TIMEOUT, "the profiling worker")
}

fn profile(args: ProfileArgs) -> anyhow::Result<()> {
    let zoo_models: Vec<String> = if args.probes_only {
        Vec::new()
    } else if args.models.is_empty() {
        zoo::zoo_names().into_iter().map(String::from).collect()
    } else {
        args.models.clone()
    };
    let mut zoo_models = zoo_models;
    for m in &mut zoo_models {
        if costmodel::is_file(m) {
            if !costmodel::profiles_files(&args.engine) {
                anyhow::bail!(BadInput(format!(
                    "--model {m}: {} runs the zoo's models and the cost model's probes, not \
                     ONNX files (profile the file with tract or onnxruntime)",
                    args.engine
                )));
            }
            // One spelling of the file wherever it is profiled from, read again by later fits;
            // read now, so that a file the cost model cannot describe is refused before any
            // measuring.
            let path = std::fs::canonicalize(&*m)
                .map_err(|e| BadInput(format!("--model {m}: cannot read it: {e}")))?;
            *m = path.to_string_lossy().into_owned();
            costmodel::zoo_model(m, &args.input.to_string())?;
        } else if zoo::find(m).is_none() && probe::seed_of(m).is_none() {
            anyhow::bail!(BadInput(format!(
                "--model {m}: the cost model profiles the zoo's models ({}), its probes \
                 (probe-<seed>) and ONNX files (FILE.onnx)",
                zoo::zoo_names().join(", ")
            )));
        }
    }
    let probe_count = args.probes.unwrap_or(if args.models.is_empty() {
        DEFAULT_PROBES
    } else {
        0
    });
    if args.probes_only && probe_count == 0 {
        anyhow::bail!(BadInput(
            "--probes-only needs at least one probe (--probes N)".into()
        ));
    }
    let probes: Vec<String> = (0..probe_count)
        .map(|k| probe::name(args.probe_seed.saturating_add(k)))
        .collect();
    // A probe after each model (the rest at the end), so that the probes and the models they
    // predict are measured in the same spells of the machine.
    let mut models: Vec<String> = Vec::new();
    let per_model = probes.len().div_ceil(zoo_models.len().max(1));
    let mut rest = probes.iter();
    for m in &zoo_models {
        models.push(m.clone());
        models.extend(rest.by_ref().take(per_model).cloned());
    }
    models.extend(rest.cloned());
    if !(0.001..=1.0).contains(&args.target) {
        anyhow::bail!(BadInput(format!(
            "--target {} must be between 0.001 and 1",
            args.target
        )));
    }
    if args.threads.contains(&0) || args.threads.is_empty() {
        anyhow::bail!(BadInput("--threads takes counts of 1 or more".into()));
    }
    // An external engine's interpreter is found before anything is measured.
    if let Some(f) = edgeprof::engines::external::find(&args.engine) {
        let readiness = edgeprof::engines::env::readiness(f, args.python.as_ref());
        if readiness.interpreter().is_none() {
            anyhow::bail!(BadInput(format!(
                "{} cannot profile here: {}; give --python PATH of an interpreter that has it",
                f.name,
                readiness.describe()
            )));
        }
    }
    let mut db = open(&args.db)?;
    db.check_writable()?;
    let input = args.input.to_string();
    let cores = core_set(&args.cores)?;
    let on = on_cpus(cores.as_deref());
    let rounds = args.rounds.max(1);
    let max_rounds = args.max_rounds.unwrap_or(2 * rounds).max(rounds);
    let total = models.len() * args.threads.len() * rounds;
    let partial = db.path.as_deref().map(costmodel::partial::beside);
    let left = resume::resumed(partial.as_deref(), &args, &input, cores.as_deref())?;
    let mut k = left.len().min(total);
    let mut taken = costmodel::rounds::Taken::new();
    for p in left {
        taken
            .entry((p.model.clone(), p.threads))
            .or_default()
            .push(p);
    }
    // Each pass over the models measures the bandwidth no cache serves once per thread count,
    // in the worker of its first model: every profile then keeps the median of them all.
    let mut memory: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for p in taken.values().flatten() {
        if let Some(rate) = p.memory_bytes_per_s {
            memory.entry(p.threads).or_default().push(rate);
        }
    }
    let mut measure = |model: &str, threads: usize, round: usize, total: usize| {
        k += 1;
        let first = memory.get(&threads).is_none_or(|m| m.len() < round);
        let tag = if max_rounds > 1 {
            format!("[{k}/{total}] round {round}: {model} {input} t{threads}{on}")
        } else {
            format!("[{k}/{total}] {model} {input} t{threads}{on}")
        };
        errln!("{tag}: profiling …");
        let p = profile_in_child(model, &input, threads, cores.as_deref(), first, &args)
            .with_context(|| format!("{model} {input} on {threads} thread(s)"))?;
        if let Some(rate) = p.memory_bytes_per_s {
            memory.entry(threads).or_default().push(rate);
        }
        if let Some(path) = &partial {
            costmodel::partial::append(path, &p)?;
        }
        let reached = if p.relative_half_width() <= args.target {
            String::new()
        } else {
            format!(
                " (target ±{:.1} % not reached after {} runs)",
                100.0 * args.target,
                p.runs
            )
        };
        errln!(
            "{tag}: {:.3} ms ±{:.1} % over {} runs, {} layer groups{reached}",
            p.latency_ms,
            100.0 * p.relative_half_width(),
            p.runs,
            p.groups.len()
        );
        anyhow::Ok(p)
    };
    // Models interleaved with thread counts, and every model measured once per round, so that
    // a slow spell of the machine does not hit every profile of one thread count or one model.
    for round in 1..=rounds {
        for model in &models {
            for &threads in &args.threads {
                let key = (model.clone(), threads);
                if taken.get(&key).map_or(0, Vec::len) >= round {
                    continue;
                }
                let p = measure(model, threads, round, total)?;
                taken.entry(key).or_default().push(p);
            }
        }
    }
    // Then more rounds while a model's rounds disagree beyond the target, until they agree or
    // have had `max_rounds`: every model again each time (the probes serve by their layers'
    // times, medians over the rounds, not by their latency).
    let order: Vec<(String, usize)> = models
        .iter()
        .filter(|m| probe::seed_of(m).is_none())
        .flat_map(|m| args.threads.iter().map(move |&t| (m.clone(), t)))
        .collect();
    loop {
        let keys = costmodel::rounds::next_round(&order, &taken, max_rounds, args.target);
        if keys.is_empty() {
            break;
        }
        let total = taken.values().map(Vec::len).sum::<usize>() + keys.len();
        for (model, threads) in keys {
            let round = taken.get(&(model.clone(), *threads)).map_or(0, Vec::len) + 1;
            let p = measure(model, *threads, round, total)?;
            taken.entry((model.clone(), *threads)).or_default().push(p);
        }
    }
    let drift = costmodel::rounds::drift(
        taken
            .iter()
            .filter(|((model, _), _)| probe::seed_of(model).is_none())
            .map(|(_, ps)| &ps[..]),
    );
    if let Some((round, ratio)) = costmodel::rounds::strayed(&drift, 2.0 * args.target) {
        errln!(
            "warning: the machine's speed moved during the profile: round {round} ran {:.0} % \
             {} than round 1 (median over the models); profiles of one database should come \
             from one state of the machine, so profile again when it is quiet if `costmodel \
             eval` errs more than it did",
            100.0 * (ratio - 1.0).abs(),
            if ratio > 1.0 { "slower" } else { "faster" }
        );
    }
    let mut loose = 0;
    for profiles in taken.values() {
        if let Some(mut p) = Profile::merge(profiles) {
            p.memory_bytes_per_s = memory
                .get(&p.threads)
                .and_then(|m| edgeprof::stats::median(m));
            if !p.is_probe() && p.relative_half_width() > args.target {
                loose += 1;
            }
            db.append(p)?;
        }
    }
    if let Some(path) = &partial {
        costmodel::partial::remove(path)?;
    }
    if loose > 0 {
        errln!(
            "warning: {loose} model profile(s) stayed wider than ±{:.1} % after {max_rounds} \
             round(s): the machine changed speed between them (`costmodel eval` lists them)",
            100.0 * args.target
        );
    }
    let where_ = db
        .path
        .as_ref()
        .map_or("memory".to_string(), |p| p.display().to_string());
    print_out(&format!(
        "{} profile(s) added to {where_} ({} in all)\n",
        taken.len(),
        db.profiles.len()
    ))
}

/// Every (thread count, core set) the database holds for `engine`.
fn configurations(db: &Db, engine: &str) -> Vec<(usize, Option<Vec<usize>>)> {
    let mut t: Vec<(usize, Option<Vec<usize>>)> = db
        .latest()
        .iter()
        .filter(|p| p.engine == engine)
        .map(|p| (p.threads, p.cores.clone()))
        .collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// A core set given on the command line (`all`, `big`, `little`, `clusterN`, `one` or a CPU
/// list) as the sorted CPUs profiles keep; None: every CPU.
fn core_set(name: &str) -> anyhow::Result<Option<Vec<usize>>> {
    let set = edgeprof::tune::resolve_core_set_here(name)
        .map_err(|e| BadInput(format!("--cores {}", e.0)))?;
    Ok(costmodel::profile_cores(set.cpus.as_deref()))
}

/// ` on CPUs 0-1` for a core set, nothing for every CPU.
fn on_cpus(cores: Option<&[usize]>) -> String {
    cores.map_or(String::new(), |c| format!(" on CPUs {}", cpu_list(c)))
}

/// Confines this process, and the threads and children it starts, to the CPUs of `list` (the
/// parent's core set, written by [`cpu_list`]).
fn confine(list: &str) -> anyhow::Result<Vec<usize>> {
    let cpus = edgeprof::collect::telemetry::cpu::parse_cpu_ids(list);
    if cpus.is_empty() {
        anyhow::bail!(BadInput(format!("--cores {list}: no CPU in it")));
    }
    edgeprof::runner::split::confine(&cpus)?;
    Ok(cpus)
}

fn no_profiles(db: &Db, engine: &str) -> BadInput {
    BadInput(format!(
        "the measurement database {} holds no {engine} profiles: `edgeprof costmodel profile \
         --engine {engine}` measures them",
        db.path
            .as_ref()
            .map_or("(none)".to_string(), |p| p.display().to_string())
    ))
}

/// The bandwidth curve a fit weighs bytes by: each point's working set and rate, as many to a
/// line as 80 columns hold.
fn bandwidth_lines(m: &CostModel) -> String {
    if m.stream.is_empty() {
        return "no load bandwidth measured with these profiles: a byte weighs like a FLOP\n"
            .into();
    }
    let mut out = format!(
        "load bandwidth by working set (a byte at the fastest weighs {:.2} FLOPs):\n",
        m.byte_weight
    );
    let mut line = String::from(" ");
    for (bytes, rate) in &m.stream.points {
        let item = format!(
            " {} {:.1} GB/s",
            edgeprof::text::bytes(*bytes as u64),
            rate / 1e9
        );
        if line.chars().count() + item.chars().count() + 1 > 80 {
            out.push_str(&line);
            out.push('\n');
            line = String::from(" ");
        } else if line.len() > 1 {
            line.push(',');
        }
        line.push_str(&item);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

fn fit(args: DbArgs) -> anyhow::Result<()> {
    let db = open(&args.db)?;
    let latest = db.latest();
    let models: Vec<CostModel> = configurations(&db, &args.engine)
        .into_iter()
        .filter_map(|(t, cores)| CostModel::fit_on(&latest, &args.engine, t, cores.as_deref()))
        .collect();
    if models.is_empty() {
        anyhow::bail!(no_profiles(&db, &args.engine));
    }
    if args.json {
        return print_json(&models);
    }
    let mut out = String::new();
    for m in &models {
        let _ = writeln!(
            out,
            "{} on {} thread(s){}, from {} model(s) and {} probe(s), {} layer groups; \
             end-to-end / summed layers {:.3}",
            m.engine,
            m.threads,
            on_cpus(m.cores.as_deref()),
            m.models.len(),
            m.probes,
            m.samples,
            m.overhead_ratio
        );
        out.push_str(&bandwidth_lines(m));
        let rows: Vec<Vec<String>> = m
            .templates
            .iter()
            .map(|(t, l)| {
                vec![
                    t.clone(),
                    l.samples.to_string(),
                    format!("{:.2}", l.fixed * 1e6),
                    format!("{:.3}", l.per_flop * 1e12),
                    format!("{:.3}", l.per_byte * 1e12),
                ]
            })
            .collect();
        out.push_str(&render::table(
            &["template", "groups", "fixed µs", "ps/FLOP", "ps/byte"],
            &[false, true, true, true, true],
            &rows,
        ));
        out.push('\n');
    }
    print_out(&out)
}

fn eval(args: DbArgs) -> anyhow::Result<()> {
    let db = open(&args.db)?;
    let held = costmodel::leave_one_model_out(&db, &args.engine, None);
    // A profile held out of nothing is said, not dropped in silence: its model cannot be built
    // again (an ONNX file moved or deleted since it was profiled), or no other model was
    // profiled on its thread count and core set.
    for p in db.latest() {
        let evaluated = held.iter().any(|h| {
            (&h.model, &h.input, h.threads, &h.cores) == (&p.model, &p.input, p.threads, &p.cores)
        });
        if p.engine != args.engine || p.is_probe() || evaluated {
            continue;
        }
        let why = match costmodel::zoo_model(&p.model, &p.input) {
            Err(e) => e.0,
            Ok(_) => "no other model was profiled on its thread count and core set".into(),
        };
        errln!(
            "warning: {} {} t{}{} left out: {why}",
            p.model,
            p.input,
            p.threads,
            on_cpus(p.cores.as_deref())
        );
    }
    if held.is_empty() && db.profiles.iter().any(Profile::is_probe) {
        anyhow::bail!(BadInput(format!(
            "the measurement database {} holds only probes: leaving one model out needs \
             profiles of zoo models (`edgeprof costmodel profile --model M`)",
            db.path
                .as_ref()
                .map_or("(none)".to_string(), |p| p.display().to_string())
        )));
    }
    if held.is_empty() {
        anyhow::bail!(no_profiles(&db, &args.engine));
    }
    let within = |limit: f64| held.iter().filter(|h| h.error.abs() <= limit).count();
    let loose = held.iter().filter(|h| h.measured_half_width > 0.03).count();
    if args.json {
        return print_json(&serde_json::json!({
            "held_out": held,
            "pairs": held.len(),
            "within_10_pct": within(0.10),
            "within_20_pct": within(0.20),
            "measured_wider_than_3_pct": loose,
        }));
    }
    let rows: Vec<Vec<String>> = held
        .iter()
        .map(|h| {
            vec![
                h.model.clone(),
                h.input.clone(),
                h.threads.to_string(),
                h.cores.as_deref().map_or("all".into(), cpu_list),
                format!(
                    "{:.3} ±{:.1} %",
                    h.measured_ms,
                    100.0 * h.measured_half_width
                ),
                h.rounds.to_string(),
                format!("{:.3}", h.predicted_ms),
                format!("{:+.1} %", 100.0 * h.error),
                h.fallbacks.to_string(),
            ]
        })
        .collect();
    let mut out = render::table(
        &[
            "held out",
            "input",
            "threads",
            "cores",
            "measured ms",
            "rounds",
            "predicted ms",
            "error",
            "fallbacks",
        ],
        &[false, false, true, false, true, true, true, true, true],
        &rows,
    );
    let _ = writeln!(
        out,
        "\n{} of {} (model, threads) pairs within ±10 %, {} within ±20 %; each predicted by a fit \
         without any profile of its model",
        within(0.10),
        held.len(),
        within(0.20)
    );
    if loose > 0 {
        let _ = writeln!(
            out,
            "{loose} measured median(s) have an interval wider than ±3 % (the machine's speed \
             moved between rounds): profile them again, with more --max-rounds"
        );
    }
    print_out(&out)
}

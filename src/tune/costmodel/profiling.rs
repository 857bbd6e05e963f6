//! Profiling for the cost model (`edgeprof costmodel profile`): the zoo models, the probes
//! and ONNX files measured in rounds, each in a worker process of its own, into this device's
//! measurement database; a run cut short is continued from what it kept beside the database.

use super::{probe, Db, Profile};
use crate::collect::device::cpu_list;
use crate::error::Context;
use crate::models::zoo;
use crate::tune::TuneError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a profiling is asked, as `edgeprof costmodel profile` takes it.
#[derive(Debug, Clone)]
pub struct ProfileJob {
    /// tract, onnxruntime or pytorch.
    pub engine: String,
    /// The interpreter with the engine (onnxruntime, pytorch).
    pub python: Option<PathBuf>,
    /// Zoo models, probes and ONNX files (empty: every zoo model).
    pub models: Vec<String>,
    /// The zoo models' and the probes' input (default 3x64x64), and an ONNX file's where given.
    pub input: Option<crate::models::InputShape>,
    /// An ONNX file's inputs by name.
    pub file_inputs: Vec<String>,
    pub threads: Vec<usize>,
    /// The relative half-width of the median's interval to reach.
    pub target: f64,
    pub max_runs: usize,
    pub layer_runs: usize,
    pub probes: Option<u64>,
    pub graph_probes: Option<u64>,
    pub probe_seed: u64,
    pub probes_only: bool,
    /// The CPUs every measurement is confined to (None: every CPU).
    pub cores: Option<Vec<usize>>,
    pub rounds: usize,
    pub max_rounds: Option<usize>,
    /// Continue, or discard, what a run cut short left beside the database.
    pub resume: bool,
    pub restart: bool,
    /// The database (None: this device's).
    pub db: Option<PathBuf>,
}

/// What a profiling added: how many profiles, how many the database now holds, and where it
/// is (None: in memory).
#[derive(Debug, Clone)]
pub struct Profiled {
    pub added: usize,
    pub total: usize,
    pub db: Option<PathBuf>,
}

/// The measurement database at `db`, else this device's; `say` hears what is wrong with it.
pub fn open(db: Option<&Path>, say: &mut impl FnMut(String)) -> crate::error::Result<Db> {
    let path = match db {
        Some(p) => p.to_path_buf(),
        None => Db::path_for_this_device().ok_or_else(|| {
            TuneError::Asked("no cache directory (set EDGEPROF_CACHE_DIR or HOME)".into())
        })?,
    };
    let db = Db::open(&path)?;
    for warning in db.warnings() {
        say(format!("warning: {warning}"));
    }
    Ok(db)
}

/// ` on CPUs 0-1` for a core set, nothing for every CPU.
pub fn on_cpus(cores: Option<&[usize]>) -> String {
    cores.map_or(String::new(), |c| format!(" on CPUs {}", cpu_list(c)))
}

/// Probes profiled with the zoo when no model is named.
const DEFAULT_PROBES: u64 = 80;

/// The zoo models of a quick profile, in order of preference: families that differ (residual,
/// inverted residual with squeeze-excitation, channel shuffle, fire modules, depthwise
/// separable), small enough to profile in seconds.
const QUICK_MODELS: [&str; 5] = [
    "resnet18",
    "mobilenet_v3_small",
    "shufflenet_v2_x1_0",
    "squeezenet1_1",
    "mnasnet0_5",
];

/// How many of [`QUICK_MODELS`] a quick profile takes, and how many template probes.
const QUICK_MODEL_COUNT: usize = 4;
const QUICK_PROBES: u64 = 16;

/// A quick profile for a first prediction of `target` (left out of it, so that the prediction
/// is one): four zoo models of different families and 16 template probes on `threads` threads,
/// each measured to ±5 %, its layers timed 5 times, one round. Seconds to minutes where the
/// whole profile takes ten or more; its predictions are correspondingly less sure, as the
/// held-out spread they are given with says.
pub fn quick(
    engine: &str,
    threads: usize,
    cores: Option<Vec<usize>>,
    db: Option<PathBuf>,
    target: &str,
) -> ProfileJob {
    ProfileJob {
        engine: engine.to_string(),
        python: None,
        models: QUICK_MODELS
            .iter()
            .filter(|m| **m != target)
            .take(QUICK_MODEL_COUNT)
            .map(|m| m.to_string())
            .collect(),
        input: None,
        file_inputs: Vec::new(),
        threads: vec![threads],
        target: 0.05,
        max_runs: 200,
        layer_runs: 5,
        probes: Some(QUICK_PROBES),
        graph_probes: Some(0),
        // The whole profile's first probes: it measures them again rather than others.
        probe_seed: 1,
        probes_only: false,
        cores,
        rounds: 1,
        max_rounds: Some(1),
        resume: false,
        restart: false,
        db,
    }
}

/// Graph probes profiled with the zoo when no model is named (tract).
const DEFAULT_GRAPH_PROBES: u64 = 60;

/// How long one model's profile may take before its worker is stopped.
const PROFILE_TIMEOUT: Duration = Duration::from_secs(900);

/// The input the zoo models and the probes are profiled at.
fn zoo_input(args: &ProfileJob) -> crate::models::InputShape {
    args.input.unwrap_or(crate::models::InputShape {
        channels: 3,
        height: 64,
        width: 64,
    })
}

/// The input `model` is profiled at: a file's `--file-input`s, else the `--input` given, else
/// its own shapes; the zoo's and the probes' [`zoo_input`].
fn input_of(args: &ProfileJob, model: &str) -> String {
    if super::graph_probe::seed_of(model).is_some() {
        return super::graph_probe::input().to_string();
    }
    if !super::is_file(model) {
        return zoo_input(args).to_string();
    }
    if !args.file_inputs.is_empty() {
        return args.file_inputs.join(" ");
    }
    args.input
        .map_or(super::files::DECLARED.to_string(), |i| i.to_string())
}

/// One model's profile, measured in an `edgeprof costmodel profile-one` child.
fn profile_in_child(
    model: &str,
    input: &str,
    threads: usize,
    cores: Option<&[usize]>,
    memory: bool,
    args: &ProfileJob,
) -> crate::error::Result<Profile> {
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
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    Ok(crate::collect::child::ask_worker(
        &argv,
        b"",
        PROFILE_TIMEOUT,
        "the profiling worker",
        None,
    )?)
}

/// What one `edgeprof costmodel profile-one` worker is asked to measure.
#[derive(Debug, Clone)]
pub struct OneProfile {
    pub engine: String,
    /// The framework's Python (external engines).
    pub python: Option<std::path::PathBuf>,
    pub model: String,
    pub input: String,
    pub threads: usize,
    /// The CPUs the worker is confined to (a list as [`cpu_list`] writes it); None: every CPU.
    pub cores: Option<String>,
    pub how: super::Measure,
    /// Whether to measure the load bandwidth curve too.
    pub memory: bool,
}

/// The profiling worker's own work: confines this process to the asked CPUs, measures the
/// model's layers with its engine, and the bandwidth curve when asked.
pub fn profile_one(one: &OneProfile) -> crate::error::Result<Profile> {
    let cores = match &one.cores {
        None => None,
        Some(list) => {
            let cpus = crate::collect::telemetry::cpu::parse_cpu_ids(list);
            if cpus.is_empty() {
                crate::error::bail!(crate::error::BadInput(format!(
                    "--cores {list}: no CPU in it"
                )));
            }
            crate::runner::place_worker::confine(&cpus)?;
            Some(cpus)
        }
    };
    let mut p = if one.engine == "tract" {
        super::measure(&one.model, &one.input, one.threads, one.how)?
    } else {
        super::measure_external(
            &one.engine,
            &one.model,
            &one.input,
            one.threads,
            one.how,
            one.python.as_deref(),
        )?
    };
    p.cores = cores;
    super::measure_bandwidth(&mut p, one.memory);
    Ok(p)
}

/// Profiles what `args` names into the measurement database, in rounds, each model in a worker
/// process of its own (`edgeprof costmodel profile-one`); `say` hears each step. What it
/// measures is kept beside the database as it is taken (DB.partial), so that a run cut short
/// can be continued. Returns how many profiles were added and where.
pub fn profile(args: &ProfileJob, mut say: impl FnMut(String)) -> crate::error::Result<Profiled> {
    let zoo_models: Vec<String> = if args.probes_only {
        Vec::new()
    } else if args.models.is_empty() {
        zoo::zoo_names().into_iter().map(String::from).collect()
    } else {
        args.models.clone()
    };
    let mut zoo_models = zoo_models;
    for m in &mut zoo_models {
        if super::is_file(m) {
            if !super::profiles_files(&args.engine) {
                crate::error::bail!(TuneError::Asked(format!(
                    "--model {m}: {} runs the zoo's models and the cost model's probes, not \
                     ONNX files (profile the file with tract or onnxruntime)",
                    args.engine
                )));
            }
            // One spelling of the file wherever it is profiled from, read again by later fits;
            // read now, so that a file the cost model cannot describe is refused before any
            // measuring.
            let path = std::fs::canonicalize(&*m)
                .map_err(|e| TuneError::Asked(format!("--model {m}: cannot read it: {e}")))?;
            *m = path.to_string_lossy().into_owned();
            let cost = super::files::analysis(Path::new(m), &input_of(args, m))?;
            if !cost.not_costed.is_empty() {
                let ops: Vec<&str> = cost.not_costed.iter().map(|n| n.op.as_str()).collect();
                crate::error::bail!(TuneError::Asked(format!(
                    "--model {m} uses operators edgeprof cannot cost ({}): the cost model learns \
                     only from files costed whole (`edgeprof models info {m}` says why; \
                     `costmodel predict` still predicts it from the rest)",
                    ops.join(", ")
                )));
            }
            if super::files::file_groups(&cost).is_empty() {
                crate::error::bail!(TuneError::Asked(format!(
                    "--model {m}: no node of it runs at inference time (`edgeprof models info \
                     {m}` shows its nodes)"
                )));
            }
        } else if zoo::find(m).is_none()
            && probe::seed_of(m).is_none()
            && super::graph_probe::seed_of(m).is_none()
        {
            crate::error::bail!(TuneError::Asked(format!(
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
    // The whole device profile (nothing named) takes the graph probes too; a run that names
    // its models or its template probes profiles those only.
    let whole = args.models.is_empty() && args.probes.is_none() && !args.probes_only;
    let graph_count = args
        .graph_probes
        .unwrap_or(if whole && args.engine == "tract" {
            DEFAULT_GRAPH_PROBES
        } else {
            0
        });
    if graph_count > 0 && args.engine != "tract" {
        crate::error::bail!(TuneError::Asked(format!(
            "--graph-probes are profiled with tract only, not {}",
            args.engine
        )));
    }
    if args.probes_only && probe_count + graph_count == 0 {
        crate::error::bail!(TuneError::Asked(
            "--probes-only needs at least one probe (--probes N or --graph-probes N)".into()
        ));
    }
    let probes: Vec<String> = (0..probe_count)
        .map(|k| probe::name(args.probe_seed.saturating_add(k)))
        .chain(
            (0..graph_count).map(|k| super::graph_probe::name(args.probe_seed.saturating_add(k))),
        )
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
        crate::error::bail!(TuneError::Asked(format!(
            "--target {} must be between 0.001 and 1",
            args.target
        )));
    }
    if args.threads.contains(&0) || args.threads.is_empty() {
        crate::error::bail!(TuneError::Asked(
            "--threads takes counts of 1 or more".into()
        ));
    }
    // An external engine's interpreter is found before anything is measured.
    if let Some(f) = crate::engines::external::find(&args.engine) {
        let readiness = crate::engines::env::readiness(f, args.python.as_ref());
        if readiness.interpreter().is_none() {
            crate::error::bail!(TuneError::Asked(format!(
                "{} cannot profile here: {}; give --python PATH of an interpreter that has it",
                f.name,
                readiness.describe()
            )));
        }
    }
    let mut db = open(args.db.as_deref(), &mut say)?;
    db.check_writable()?;
    let input = zoo_input(args).to_string();
    let cores = args.cores.clone();
    let on = on_cpus(cores.as_deref());
    let rounds = args.rounds.max(1);
    let max_rounds = args.max_rounds.unwrap_or(2 * rounds).max(rounds);
    let total = models.len() * args.threads.len() * rounds;
    let partial = db.path.as_deref().map(super::partial::beside);
    let left = resumed(partial.as_deref(), args, &input, cores.as_deref(), &mut say)?;
    let mut k = left.len().min(total);
    let mut taken = super::rounds::Taken::new();
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
    // Seconds per profile so far, for the time left.
    let began = std::time::Instant::now();
    let resumed_at = k;
    let mut measure = |model: &str, threads: usize, round: usize, total: usize| {
        k += 1;
        let first = memory.get(&threads).is_none_or(|m| m.len() < round);
        let tag = if max_rounds > 1 {
            format!(
                "[{k}/{total}] round {round}: {model} {} t{threads}{on}",
                input_of(args, model)
            )
        } else {
            format!(
                "[{k}/{total}] {model} {} t{threads}{on}",
                input_of(args, model)
            )
        };
        say(format!("{tag}: profiling …"));
        let input = input_of(args, model);
        let p = profile_in_child(model, &input, threads, cores.as_deref(), first, args)
            .with_context(|| format!("{model} {input} on {threads} thread(s)"))?;
        if let Some(rate) = p.memory_bytes_per_s {
            memory.entry(threads).or_default().push(rate);
        }
        if let Some(path) = &partial {
            super::partial::append(path, &p)?;
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
        let done = k - resumed_at;
        let left = total.saturating_sub(k);
        let eta = if left > 0 {
            let per = began.elapsed().as_secs_f64() / done.max(1) as f64;
            format!("; about {} left", crate::text::duration(per * left as f64))
        } else {
            String::new()
        };
        say(format!(
            "{tag}: {:.3} ms ±{:.1} % over {} runs, {} layer groups{reached}{eta}",
            p.latency_ms,
            100.0 * p.relative_half_width(),
            p.runs,
            p.groups.len()
        ));
        Ok::<_, crate::error::Error>(p)
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
        let keys = super::rounds::next_round(&order, &taken, max_rounds, args.target);
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
    let drift = super::rounds::drift(
        taken
            .iter()
            .filter(|((model, _), _)| probe::seed_of(model).is_none())
            .map(|(_, ps)| &ps[..]),
    );
    if let Some((round, ratio)) = super::rounds::strayed(&drift, 2.0 * args.target) {
        say(format!(
            "warning: the machine's speed moved during the profile: round {round} ran {:.0} % \
             {} than round 1 (median over the models); profiles of one database should come \
             from one state of the machine, so profile again when it is quiet if `costmodel \
             eval` errs more than it did",
            100.0 * (ratio - 1.0).abs(),
            if ratio > 1.0 { "slower" } else { "faster" }
        ));
    }
    let mut loose = 0;
    for profiles in taken.values() {
        if let Some(mut p) = Profile::merge(profiles) {
            p.memory_bytes_per_s = memory.get(&p.threads).and_then(|m| crate::stats::median(m));
            if !p.is_probe() && p.relative_half_width() > args.target {
                loose += 1;
            }
            db.append(p)?;
        }
    }
    if let Some(path) = &partial {
        super::partial::remove(path)?;
    }
    if loose > 0 {
        say(format!(
            "warning: {loose} model profile(s) stayed wider than ±{:.1} % after {max_rounds} \
             round(s): the machine changed speed between them (`costmodel eval` lists them)",
            100.0 * args.target
        ));
    }
    Ok(Profiled {
        added: taken.len(),
        total: db.profiles.len(),
        db: db.path.clone(),
    })
}

/// The measurements a run cut short left at `partial` that this run continues (`--resume`),
/// none when there are none or they were discarded (`--restart`); without either flag, such
/// measurements stop the run with what to do, so that none is lost or mixed in unasked.
fn resumed(
    partial: Option<&std::path::Path>,
    args: &ProfileJob,
    input: &str,
    cores: Option<&[usize]>,
    say: &mut impl FnMut(String),
) -> crate::error::Result<Vec<Profile>> {
    let Some(path) = partial else {
        return Ok(Vec::new());
    };
    let Some((left, broken)) = super::partial::read(path)? else {
        if args.resume {
            say(format!(
                "nothing to resume ({} does not exist): profiling from the start",
                path.display()
            ));
        }
        return Ok(Vec::new());
    };
    if args.restart {
        super::partial::remove(path)?;
        say(format!(
            "discarded {} measurement(s) a run cut short left in {}",
            left.len(),
            path.display()
        ));
        return Ok(Vec::new());
    }
    let when = match (left.first(), left.last()) {
        (Some(a), Some(b)) => format!(", taken {} – {}", a.written, b.written),
        _ => String::new(),
    };
    if !args.resume {
        crate::error::bail!(TuneError::Asked(format!(
            "a profile run cut short left {} measurement(s) in {}{when}: --resume continues \
             it, --restart discards them",
            left.len(),
            path.display()
        )));
    }
    if let Some(why) = super::partial::mismatch(&left, &args.engine, input, cores) {
        crate::error::bail!(TuneError::Asked(format!(
            "--resume: the measurements in {} cannot be continued by this run ({why}); run \
             with those settings, or --restart",
            path.display()
        )));
    }
    let cut = if broken > 0 {
        format!(" ({broken} line(s) cut short by the interruption left out)")
    } else {
        String::new()
    };
    say(format!(
        "resuming: {} measurement(s) kept from {}{when}{cut}",
        left.len(),
        path.display()
    ));
    Ok(left)
}

//! `edgeprof costmodel`: the per-layer learned cost model from the command line. `profile`
//! measures zoo models, probes and ONNX files with tract, onnxruntime or PyTorch into this
//! device's measurement database (each in an `edgeprof costmodel profile-one` child process),
//! `fit` shows what it learns, `predict` gives a model's latency without running it (a zoo model or an ONNX
//! file), `eval` holds each model out in turn and predicts it.

use crate::cli::{print_json, print_out, render, BadInput};
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use edgeprof::collect::device::cpu_list;
use edgeprof::tune::costmodel::{self, CostModel, Db, Measure, Profile, PROFILED_ENGINES};
use std::fmt::Write as _;
use std::path::PathBuf;

mod import;
mod predict;

#[derive(Subcommand, Debug)]
pub enum CostmodelCommand {
    /// Profile zoo models, probes and ONNX files with tract, onnxruntime or PyTorch (end-to-end
    /// latency, then the engine's per-layer profile) into this device's measurement database
    Profile(ProfileArgs),
    /// Fit the cost model from the database and show each operator template's fit
    Fit(DbArgs),
    /// Predict a zoo model's or an ONNX file's latency from its layers, without running it
    Predict(PredictArgs),
    /// Leave one model out: predict each profiled model from a fit without it (--files: every
    /// ONNX file at once, from the zoo and the probes alone)
    Eval(EvalArgs),
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
    /// Print the result as JSON instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Hold out every profiled ONNX file at once: each predicted by a fit on the zoo's models
    /// and the probes alone (how well the cost model carries over to models it never saw)
    #[arg(long)]
    files: bool,
    #[command(flatten)]
    db: DbArgs,
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
    /// The input as CxHxW: the zoo models' and the probes' (default 3x64x64); an ONNX file is
    /// profiled at it where given, else at its own shapes (`--file-input` binds them by name)
    #[arg(long, value_name = "CxHxW")]
    input: Option<edgeprof::models::InputShape>,
    /// An ONNX file's input by name, as `models info --input` takes it (NAME=DIMS,
    /// NAME=TYPE:VALUE, NAME=@FILE.npy); repeat for several: where a file leaves a dimension open
    #[arg(long = "file-input", value_name = "SPEC")]
    file_inputs: Vec<String>,
    /// Thread counts, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = crate::cli::args::thread_count)]
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
    /// Also profile this many graph probes: ONNX networks of the operator families real
    /// models have (depthwise 5–9, decomposed activations, dense blocks, upsampling,
    /// transposed convolutions, recurrent layers, attention), drawn at random at real models'
    /// input sizes; tract only (default: 60 with tract when neither --model, --probes nor
    /// --probes-only is given, else none)
    #[arg(long)]
    graph_probes: Option<u64>,
    /// The first probe's seed (probe k is `probe-<seed + k>`, graph probe k
    /// `graph-probe-<seed + k>`)
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
    /// The measurement database to add to (default: this device's, in the cache directory)
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
    /// The measurement database to import into (default: this device's, in the cache
    /// directory; another device's sweep only into a database given here)
    #[arg(long)]
    db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// Zoo model, or ONNX file (a path ending in .onnx)
    model: String,
    /// Input: a zoo model's as CxHxW (default 3x64x64, the profiles' size); an ONNX file's as
    /// `models info --input` takes them (NAME=DIMS, NAME=TYPE:VALUE, NAME=@FILE, or CxHxW for
    /// its one image input), repeated for several (default: the file's own shapes)
    #[arg(long, value_name = "SPEC")]
    input: Vec<String>,
    /// Batch size [default: 1, or an ONNX file's own]
    #[arg(long)]
    batch: Option<usize>,
    /// The threads the prediction is for (the profiles of that thread count are used)
    #[arg(long, default_value_t = 1, value_parser = crate::cli::args::thread_count)]
    threads: usize,
    /// The core set: all (default), big, little, clusterN, one, or a CPU list such as 0-1
    /// (predicted from the profiles measured on it)
    #[arg(long, value_name = "SET", default_value = "all")]
    cores: String,
    /// Show each layer group's predicted time (and the measured one, where the database holds
    /// a profile of this model): which layers the latency comes from, and where the model errs
    #[arg(long)]
    layers: bool,
    /// Predict only from the profiles the database holds: without it, a database with none for
    /// this engine, thread count and core set is given a quick profile first (four zoo models
    /// and 16 probes: about 10 s on a 2-core x86 VM)
    #[arg(long)]
    no_profile: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// The measurement database at `db`, else this device's.
fn open(db: &Option<PathBuf>) -> anyhow::Result<Db> {
    Ok(costmodel::profiling::open(db.as_deref(), &mut |line| {
        errln!("{line}")
    })?)
}

/// `edgeprof costmodel profile`: the library's profiling, its steps on stderr.
fn profile(args: ProfileArgs) -> anyhow::Result<()> {
    let job = costmodel::profiling::ProfileJob {
        cores: core_set(&args.cores)?,
        engine: args.engine,
        python: args.python,
        models: args.models,
        input: args.input,
        file_inputs: args.file_inputs,
        threads: args.threads,
        target: args.target,
        max_runs: args.max_runs,
        layer_runs: args.layer_runs,
        probes: args.probes,
        graph_probes: args.graph_probes,
        probe_seed: args.probe_seed,
        probes_only: args.probes_only,
        rounds: args.rounds,
        max_rounds: args.max_rounds,
        resume: args.resume,
        restart: args.restart,
        db: args.db,
    };
    let profiled = costmodel::profiling::profile(&job, |line| errln!("{line}"))?;
    let where_ = profiled
        .db
        .as_ref()
        .map_or("memory".to_string(), |p| p.display().to_string());
    print_out(&format!(
        "{} profile(s) added to {where_} ({} in all)\n",
        profiled.added, profiled.total
    ))
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
            let p = costmodel::profiling::profile_one(&costmodel::profiling::OneProfile {
                engine,
                python,
                model,
                input,
                threads,
                cores,
                how: Measure {
                    target,
                    max_runs,
                    layer_runs,
                    ..Measure::default()
                },
                memory,
            })?;
            print_json(&p)
        }
    }
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

use costmodel::profiling::on_cpus;

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

fn eval(eval_args: EvalArgs) -> anyhow::Result<()> {
    let args = eval_args.db;
    let db = open(&args.db)?;
    let held = if eval_args.files {
        costmodel::files_held_out(&db, &args.engine)
    } else {
        costmodel::leave_one_model_out(&db, &args.engine, None)
    };
    // A profile held out of nothing is said, not dropped in silence: its model cannot be built
    // again (an ONNX file moved or deleted since it was profiled), or no other model was
    // profiled on its thread count and core set.
    for p in db.latest() {
        let evaluated = held.iter().any(|h| {
            (&h.model, &h.input, h.threads, &h.cores, h.precision)
                == (&p.model, &p.input, p.threads, &p.cores, p.precision)
        });
        if p.engine != args.engine
            || p.is_probe()
            || evaluated
            || (eval_args.files && !costmodel::is_file(&p.model))
        {
            continue;
        }
        let why = match costmodel::planned(p) {
            None => costmodel::groups_of(&p.model, &p.input)
                .err()
                .map_or_else(|| "its layers cannot be read again".into(), |e| e.0),
            Some(_) => "no other model was profiled on its thread count and core set".into(),
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
    if held.is_empty() && eval_args.files {
        anyhow::bail!(BadInput(format!(
            "the measurement database holds no {} profile of an ONNX file: `edgeprof costmodel \
             profile --model FILE.onnx` measures one",
            args.engine
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
            "within_25_pct": within(0.25),
            "measured_wider_than_3_pct": loose,
        }));
    }
    let rows: Vec<Vec<String>> = held
        .iter()
        .map(|h| {
            vec![
                match h.precision {
                    costmodel::Precision::Fp32 => h.model.clone(),
                    // A lower precision's profile, predicted by that precision's own fit.
                    other => format!("{} ({other})", h.model),
                },
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
        "\n{} of {} (model, threads) pairs within ±10 %, {} within ±20 %, {} within ±25 %; each \
         predicted by a fit without any profile of {}",
        within(0.10),
        held.len(),
        within(0.20),
        within(0.25),
        if eval_args.files {
            "any ONNX file (the zoo's models and the probes only)"
        } else {
            "its model"
        }
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

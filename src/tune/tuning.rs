//! A tuning run's life in its results directory, shared by both front-ends: the request
//! resolved against the config's `[tune]` section and this machine (engines that can run here,
//! core sets, thread counts), the directory and its manifest, and what is written at the end
//! (`tune.json`, the summaries, `table.json` for an exhaustive run).

use crate::config::{Config, ModelRef};
use crate::error::Context;
use crate::models::InputShape;
use crate::results::{self, Manifest, SweepStatus};
use crate::runner::matrix::{self, Plan};
use crate::runner::sweep::SweepOutcome;
use crate::tune::costmodel::Db;
use crate::tune::live::{self, LiveTune, TuneReport};
use crate::tune::prior::{self, Prior};
use crate::tune::replay::{Row, Table};
use crate::tune::search::{Settings, Stop, Strategy};
use crate::tune::TuneError;
use crate::tune::{self, Objective, Space, SpaceSpec};
use std::path::{Path, PathBuf};

/// What the user asked for over the config's `[tune]` section (None or empty: the config's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub model: Option<String>,
    pub input: Option<InputShape>,
    pub engines: Vec<String>,
    pub budget: Option<usize>,
    pub objective: Option<Objective>,
    pub max_memory: Option<u64>,
    pub threads: Vec<usize>,
    pub batch: Vec<usize>,
    pub cores: Vec<String>,
    pub seed: Option<u64>,
    pub stall: Option<usize>,
    pub confirm: Option<usize>,
    /// Measure every candidate instead of searching.
    pub exhaustive: bool,
    /// Parent of the results directory (default: the config's `output.dir`).
    pub output: Option<PathBuf>,
    /// The measurement database the prior comes from and every trial goes to (default: this
    /// device's, in the cache directory).
    pub db: Option<PathBuf>,
    /// Search without the database's prior (the trials are still recorded).
    pub no_prior: bool,
    /// Precisions to search (default: the config's `matrix.precision`).
    pub precisions: Vec<crate::collect::kernels::Precision>,
    /// The most top-1 agreement with fp32 a lower precision may lose (a fraction; default
    /// [`DEFAULT_MAX_TOP1_DROP`]).
    pub max_top1_drop: Option<f64>,
}

/// A lower precision must agree with fp32 on the top-1 class of at least 99 % of the images
/// unless the user allows more.
pub const DEFAULT_MAX_TOP1_DROP: f64 = 0.01;

/// A tuning run ready to start: everything resolved, its results directory made.
pub struct Prepared {
    pub config: Config,
    pub model: ModelRef,
    pub input: InputShape,
    pub objective: Objective,
    pub settings: Settings,
    pub space: Space,
    /// Engines left out, each with why.
    pub skipped: Vec<String>,
    pub confirm: usize,
    pub max_memory: Option<u64>,
    /// The most top-1 agreement with fp32 a lower precision may lose (a fraction).
    pub max_top1_drop: f64,
    pub exhaustive: bool,
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// Where every trial is recorded (None: no database, with the reason in `prior_note`).
    pub db: Option<PathBuf>,
    /// What the guided search starts from.
    pub prior: Option<Prior>,
    /// One line on the prior (or why there is none), for the front-ends.
    pub prior_note: String,
}

/// Resolves the request and makes the results directory.
pub fn prepare(
    config: Config,
    config_file: Option<&Path>,
    o: &Overrides,
) -> crate::error::Result<Prepared> {
    let t = config.tune.clone();
    let model = match &o.model {
        Some(name) => model_ref(name)?,
        None => t
            .model
            .clone()
            .or_else(|| config.matrix.models.first().cloned())
            .ok_or_else(|| TuneError::Asked("name the model to tune with --model".into()))?,
    };
    let input = o
        .input
        .or(t.input)
        .or_else(|| config.matrix.inputs.first().copied())
        .unwrap_or_default();
    let objective = o.objective.unwrap_or(t.objective);
    let mut settings = Settings {
        strategy: Strategy::Guided,
        budget: o.budget.unwrap_or(t.budget),
        stall: o.stall.unwrap_or(t.stall),
        initial: t.initial,
        seed: o.seed.unwrap_or(t.seed),
    };
    let (space, skipped) = build_space(o, &config, &model, input)?;
    if space.candidates.is_empty() {
        crate::error::bail!(TuneError::Asked(format!(
            "no candidate can run here: every engine was left out ({})",
            skipped.join("; ")
        )));
    }
    let confirm = if o.exhaustive {
        settings.strategy = Strategy::Grid;
        settings.budget = space.candidates.len();
        settings.stall = 0;
        0
    } else {
        o.confirm.unwrap_or(t.confirm)
    };
    let (db, prior, prior_note) = open_prior(o, &model, input, &space, objective)?;
    let parent = o.output.clone().unwrap_or(config.output.dir.clone());
    let name = format!("tune-{}", model_stem(&model));
    let dir = crate::sweep_dir::new_dir(&parent, &name)?;
    let manifest = Manifest {
        format: results::FORMAT,
        edgeprof_version: env!("CARGO_PKG_VERSION").to_string(),
        name,
        config_file: config_file
            .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.to_path_buf()))
            .unwrap_or_default(),
        config_text: crate::config::to_toml(&config),
        config: serde_json::to_value(&config).context("cannot encode the config")?,
        device: crate::collect::device::fingerprint(Path::new("/")),
        engines: crate::sweep_dir::engine_versions_for(
            &config,
            &Plan {
                to_run: space
                    .candidates
                    .iter()
                    .map(|c| live::condition_of(c, &model, input))
                    .collect(),
                skipped: Vec::new(),
                excluded: 0,
            },
        ),
        conditions: Vec::new(),
        skipped: Vec::new(),
        excluded: 0,
        started: crate::text::now_rfc3339(),
        ended: None,
        resumed: Vec::new(),
        files: Default::default(),
        status: SweepStatus::Running,
        board_state: None,
    };
    results::write_manifest(&dir, &manifest)?;
    Ok(Prepared {
        max_memory: o.max_memory.or(t.max_memory),
        max_top1_drop: o.max_top1_drop.unwrap_or(DEFAULT_MAX_TOP1_DROP),
        config,
        model,
        input,
        objective,
        settings,
        space,
        skipped,
        confirm,
        exhaustive: o.exhaustive,
        dir,
        manifest,
        db,
        prior,
        prior_note,
    })
}

/// The database (an explicit one must be readable; this device's is skipped with the reason
/// when it is not) and the prior it gives the space.
fn open_prior(
    o: &Overrides,
    model: &ModelRef,
    input: InputShape,
    space: &Space,
    objective: Objective,
) -> crate::error::Result<(Option<PathBuf>, Option<Prior>, String)> {
    let db = match &o.db {
        Some(path) => Db::open(path)?,
        None => match Db::path_for_this_device() {
            None => {
                return Ok((
                    None,
                    None,
                    "no prior and no trial recorded: no cache directory (set \
                     EDGEPROF_CACHE_DIR or HOME)"
                        .into(),
                ))
            }
            Some(path) => match Db::open(&path) {
                Ok(db) => db,
                Err(e) => return Ok((None, None, format!("no prior and no trial recorded: {e}"))),
            },
        },
    };
    // What reading the database left out is said before the note.
    let said = |note: String| {
        let mut lines: Vec<String> = db
            .warnings()
            .iter()
            .map(|w| format!("warning: {w}"))
            .collect();
        lines.push(note);
        lines.join("\n")
    };
    let path = db.path.clone();
    if o.no_prior || o.exhaustive {
        let why = if o.exhaustive {
            "every candidate is measured"
        } else {
            "--no-prior"
        };
        return Ok((path, None, said(format!("no prior ({why})"))));
    }
    let p = prior::build(
        &db,
        &model.to_string(),
        &input.to_string(),
        space,
        objective,
        true,
    );
    let note = said(p.summary());
    Ok((path, (!p.is_empty()).then_some(p), note))
}

impl Prepared {
    /// The live tuner over this run.
    pub fn live<'a>(
        &'a self,
        edgeprof: &'a Path,
        cancel: &'a crate::collect::stop::Cancel,
        telemetry_root: &'a Path,
    ) -> LiveTune<'a> {
        LiveTune {
            config: &self.config,
            model: &self.model,
            input: self.input,
            space: &self.space,
            settings: self.settings,
            objective: self.objective,
            max_memory: self.max_memory,
            max_top1_drop: self.max_top1_drop,
            confirm: self.confirm,
            edgeprof,
            cancel,
            telemetry_root,
            dir: &self.dir,
            prior: self.prior.as_ref(),
            db: self.db.as_deref(),
        }
    }

    /// Writes what the run found: the manifest lists what was measured (so `edgeprof report`
    /// reads the directory like a run's), the summaries, `tune.json` and, for an exhaustive run,
    /// `table.json`.
    pub fn finish(&mut self, report: &TuneReport) -> crate::error::Result<()> {
        let runs = results::read_lines::<results::RunRecord>(&self.dir.join(results::RUNS))?;
        let mut seen = std::collections::HashSet::new();
        self.manifest.conditions = runs
            .records
            .into_iter()
            .filter(|r| seen.insert(r.condition.id.clone()))
            .map(|r| r.condition)
            .collect();
        let outcome = SweepOutcome {
            interrupted: report.trace.stop == Stop::Cancelled,
            ..SweepOutcome::default()
        };
        crate::sweep_dir::finish(
            &self.dir,
            &mut self.manifest,
            &outcome,
            &self.config.output.formats,
        )?;
        let text =
            serde_json::to_string_pretty(report).context("cannot encode the tuning report")?;
        results::write_atomic(&self.dir.join("tune.json"), (text + "\n").as_bytes())?;
        if self.exhaustive {
            let table = table_of(report, &self.space, &self.manifest, &self.model, self.input);
            let text = serde_json::to_string_pretty(&table).context("cannot encode the table")?;
            results::write_atomic(&self.dir.join("table.json"), (text + "\n").as_bytes())?;
        }
        Ok(())
    }
}

/// A name for the model fit for a directory or config name.
pub fn model_stem(model: &ModelRef) -> String {
    let text = match model {
        ModelRef::Zoo(name) => name.clone(),
        ModelRef::Onnx(path) | ModelRef::Tflite(path) | ModelRef::Torch(path) => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into()),
    };
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn model_ref(name: &str) -> crate::error::Result<ModelRef> {
    if crate::models::zoo::find(name).is_some() {
        return Ok(ModelRef::Zoo(name.to_string()));
    }
    let path = Path::new(name);
    if name.ends_with(".onnx") && path.is_file() {
        return Ok(ModelRef::Onnx(std::path::absolute(path)?));
    }
    crate::error::bail!(TuneError::Asked(format!(
        "--model {name}: neither a zoo model ({}) nor an ONNX file{}",
        crate::models::zoo::zoo_names().join(", "),
        crate::text::did_you_mean(name, crate::models::zoo::zoo_names())
    )))
}

/// The CPUs this process may run on (all the system reports when the kernel will not say).
pub fn allowed_cpus() -> Vec<usize> {
    let cpus = crate::collect::ceilings::allowed_cpus();
    if cpus.is_empty() {
        (0..crate::collect::device::available_cores()).collect()
    } else {
        cpus
    }
}

/// The search space from the arguments over the config, with the engines that cannot run
/// here left out (and why).
fn build_space(
    args: &Overrides,
    config: &Config,
    model: &ModelRef,
    input: InputShape,
) -> crate::error::Result<(Space, Vec<String>)> {
    let t = &config.tune;
    let engines: Vec<String> = if !args.engines.is_empty() {
        for e in &args.engines {
            if !crate::config::KNOWN_ENGINES.contains(&e.as_str()) || e == "command" {
                crate::error::bail!(TuneError::Asked(format!(
                    "--engine {e}: the tuner searches {}",
                    crate::config::KNOWN_ENGINES
                        .iter()
                        .filter(|e| **e != "command")
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        args.engines.clone()
    } else {
        t.engines
            .clone()
            .unwrap_or_else(|| config.matrix.engines.clone())
            .into_iter()
            .filter(|e| e != "command")
            .collect()
    };
    // The engines that can run this model here: each one's default condition through the
    // same checks as a run's plan.
    let probe: Vec<_> = engines
        .iter()
        .map(|e| {
            crate::protocol::Condition::new(
                e,
                model.clone(),
                input,
                1,
                0,
                crate::config::Device::Cpu,
            )
        })
        .collect();
    let mut plan = Plan {
        to_run: Vec::new(),
        skipped: Vec::new(),
        excluded: 0,
    };
    for c in probe {
        match matrix::unsupported(&c) {
            Some(reason) => plan.skipped.push(matrix::Skipped {
                condition: c,
                reason,
            }),
            None => plan.to_run.push(c),
        }
    }
    let plan = matrix::check_frameworks(config, plan);
    let skipped: Vec<String> = plan
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.condition.engine, s.reason))
        .collect();
    let engines: Vec<String> = plan.to_run.iter().map(|c| c.engine.clone()).collect();
    let allowed = allowed_cpus();
    let machine_sets = tune::core_sets(&crate::collect::device::clusters(Path::new("/")), &allowed);
    let names = if args.cores.is_empty() {
        t.cores.clone()
    } else {
        args.cores.clone()
    };
    let core_sets = if names.is_empty() {
        machine_sets
    } else {
        names
            .iter()
            .map(|n| tune::resolve_core_set(n, &machine_sets, &allowed))
            .collect::<Result<Vec<_>, _>>()?
    };
    let threads = if !args.threads.is_empty() {
        args.threads.clone()
    } else if !t.threads.is_empty() {
        t.threads.clone()
    } else {
        let cores = allowed.len().max(1);
        let mut v: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
            .take_while(|n| *n < cores)
            .collect();
        v.push(cores);
        v
    };
    if threads.contains(&0) {
        crate::error::bail!(TuneError::Asked(
            "--threads: name thread counts of 1 or more (the tuner tries them one by one)".into()
        ));
    }
    let batch = if args.batch.is_empty() {
        t.batch.clone()
    } else {
        args.batch.clone()
    };
    if batch.contains(&0) {
        crate::error::bail!(TuneError::Asked("--batch: batch sizes start at 1".into()));
    }
    let options = engines
        .iter()
        .map(|e| {
            (
                e.clone(),
                t.options
                    .get(e)
                    .cloned()
                    .unwrap_or_else(|| tune::default_options(e)),
            )
        })
        .collect();
    let flops_per_sample = match model {
        ModelRef::Zoo(name) => {
            let params = crate::models::zoo::ModelParams {
                num_classes: config.matrix.classes,
                channels: input.channels,
                height: input.height,
                width: input.width,
                batch: 1,
            };
            let m = crate::models::zoo::build(name, &params)?;
            crate::models::cost::analyze(&m).total.flops as f64
        }
        ModelRef::Onnx(_) | ModelRef::Tflite(_) | ModelRef::Torch(_) => 1.0,
    };
    let precisions = if args.precisions.is_empty() {
        config.matrix.precision.clone()
    } else {
        args.precisions.clone()
    };
    let mut skipped = skipped;
    for e in &engines {
        for &p in &precisions {
            if let Some(why) = crate::engines::precision_unsupported(e, p) {
                skipped.push(format!("{e} in {p}: {why}"));
            }
        }
    }
    let spec = SpaceSpec {
        engines,
        precisions,
        threads,
        batch,
        core_sets,
        devices: config.matrix.devices.clone(),
        options,
        flops_per_sample,
    };
    // tract's lower precisions are files onnxruntime's tools convert: without onnxruntime
    // here they leave the space, with the reason, rather than fail trial after trial.
    let mut candidates = spec.enumerate();
    let converting = |c: &tune::Candidate| {
        crate::collect::kernels::Precision::of_models(&c.precision)
            .is_some_and(|p| c.engine == "tract" && crate::runner::lowered::converts("tract", p))
    };
    if candidates.iter().any(converting) {
        let configured = config.interpreters();
        let blocker = crate::engines::external::find("onnxruntime").and_then(|f| {
            crate::engines::env::readiness(f, configured.get(f.name)).blocker(f.name)
        });
        if let Some(why) = blocker {
            candidates.retain(|c| !converting(c));
            skipped.push(format!(
                "tract in int8: tract runs the ONNX file onnxruntime's tools convert, and {why}"
            ));
        }
    }
    let space = Space::new(
        candidates,
        spec.flops_per_sample,
        spec.engines.first().map(String::as_str),
    );
    Ok((space, skipped))
}

/// The table an exhaustive run leaves for replay.
fn table_of(
    report: &TuneReport,
    space: &Space,
    manifest: &Manifest,
    model: &ModelRef,
    input: InputShape,
) -> Table {
    let mut rows: Vec<Row> = space
        .candidates
        .iter()
        .map(|c| Row {
            candidate: c.clone(),
            measured: None,
            failure: Some("not measured".into()),
        })
        .collect();
    for (trial, measured) in report.trace.trials.iter().zip(&report.measured) {
        rows[trial.index].measured = *measured;
        rows[trial.index].failure = trial.failure.clone();
    }
    let d = &manifest.device;
    Table {
        model: model.to_string(),
        input: input.to_string(),
        flops_per_sample: space.flops_per_sample,
        machine: format!(
            "{} ({} CPUs, {})",
            d.cpu_model.as_deref().unwrap_or("unknown CPU"),
            d.cpus_available,
            d.arch
        ),
        measured_at: manifest.started.clone(),
        default_engine: space.candidates[space.default].engine.clone(),
        rows,
    }
}

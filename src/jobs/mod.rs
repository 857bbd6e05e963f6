//! The jobs a front-end starts and watches: a run of a config (a sweep here, or a fleet run
//! when the config names nodes), the resumption of an interrupted results directory, and a
//! tuning. Each runs to its end on the caller's thread, reports through [`Event`]s, and stops
//! early when its [`Cancel`] is raised; the last event says how it ended. The terminal UI runs
//! them on threads of its own; they print nothing. This module sits at the top of the domain:
//! it names the sessions, sweeps, fleets and tunings it runs, and nothing below the front-ends
//! names it.

use crate::collect::stop::Cancel;
use crate::config::Config;
use crate::error::Context;
use crate::event::{Event, RunEvent};
use crate::fleet::run as fleets;
use crate::results;
use crate::runner::sweep::SweepOutcome;
use crate::tune::live::TuneEvent;
use std::path::{Path, PathBuf};

pub mod sweep;
pub use sweep::{Controls, Interrupted, Plan, SomeFailed, Swept};

pub use crate::fleet::FleetError;
pub use crate::train::TrainError;

/// What kind of failure an error a front-end holds is, read from the first error in its chain
/// (`anyhow::Error::chain`, or a source chain) that tells: the library's [`Error`] says its
/// kind; the typed errors the library's functions return (a config, a model or a shape the
/// user named, an engine refusing its input, a stopped or failed job) say theirs. Nothing that
/// tells: a failed run.
///
/// [`Error`]: crate::error::Error
pub fn kind_of<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> crate::error::Kind {
    chain
        .into_iter()
        .find_map(known_kind)
        .unwrap_or(crate::error::Kind::Failed)
}

/// The kind `cause` says it is, when it says one.
fn known_kind(cause: &(dyn std::error::Error + 'static)) -> Option<crate::error::Kind> {
    use crate::error::Kind;
    let bad_input = |yes: bool| yes.then_some(Kind::BadInput);
    if let Some(e) = cause.downcast_ref::<crate::error::Error>() {
        return Some(e.kind());
    }
    if cause.is::<Interrupted>() {
        return Some(Kind::Interrupted);
    }
    if let Some(e) = cause.downcast_ref::<FleetError>() {
        return Some(e.failure().into());
    }
    if let Some(e) = cause.downcast_ref::<TrainError>() {
        return Some(e.failure().into());
    }
    if let Some(e) = cause.downcast_ref::<crate::tune::TuneError>() {
        return Some(e.failure().into());
    }
    if cause.is::<crate::error::BadInput>()
        || cause.is::<crate::models::zoo::ZooError>()
        || cause.is::<crate::models::ShapeParseError>()
        || cause.is::<crate::config::ConfigError>()
        || cause.is::<crate::config::ConfigReadError>()
        || cause.is::<crate::config::LoadError>()
    {
        return Some(Kind::BadInput);
    }
    if let Some(e) = cause.downcast_ref::<crate::collect::child::AskError>() {
        return bad_input(matches!(e, crate::collect::child::AskError::Refused(_)));
    }
    if let Some(e) = cause.downcast_ref::<crate::engines::env::EnvError>() {
        return bad_input(e.is_bad_input());
    }
    if let Some(e) = cause.downcast_ref::<crate::files::FileError>() {
        return bad_input(e.is_bad_input());
    }
    if let Some(e) = cause.downcast_ref::<crate::models::npy::NpyWriteError>() {
        return bad_input(e.is_bad_input());
    }
    if let Some(e) = cause.downcast_ref::<crate::engines::tract::EngineError>() {
        return Some(bad_input(e.is_bad_input()).unwrap_or(Kind::Failed));
    }
    None
}

/// Where a job's events go: any thread may call it.
pub type Sink<'a> = &'a (dyn Fn(Event) + Sync);

/// Sends how a run ended.
fn finished(dir: Option<PathBuf>, result: crate::error::Result<SweepOutcome>, send: Sink) {
    let (outcome, error) = match result {
        Ok(outcome) => (Some(outcome), None),
        Err(e) => (None, Some(crate::error::JobError::from(e))),
    };
    send(Event::Run(RunEvent::Finished {
        dir,
        outcome,
        error,
    }));
}

/// Runs config `text` (`file` names it and resolves its relative paths): a new results
/// directory and its sweep ([`sweep::sweep`]), or a fleet run when the config names nodes.
/// Ends with [`RunEvent::Finished`].
pub fn run(
    text: String,
    file: &Path,
    cancel: &Cancel,
    telemetry_root: &Path,
    driver: &fleets::Driver,
    send: Sink,
) {
    let mut dir = None;
    let result = (|| -> crate::error::Result<SweepOutcome> {
        let parsed = crate::config::parse(&text, file)?;
        if parsed.matrix.nodes != [crate::config::LOCAL_NODE] {
            return fleet_run(&parsed, &text, file, cancel, driver, send);
        }
        let plan = Plan::new(text, file, None)?;
        dir = Some(plan.dir.clone());
        let controls = Controls {
            cancel,
            telemetry_root,
            detached: None,
        };
        Ok(sweep::sweep(plan, &controls, send)?.outcome)
    })();
    finished(dir, result, send);
}

/// Finishes an interrupted results directory as `edgeprof run --resume DIR` does (its stored
/// config, the conditions without a result, attempts counted on). Ends with
/// [`RunEvent::Finished`].
pub fn resume(dir: &Path, cancel: &Cancel, telemetry_root: &Path, send: Sink) {
    let result = (|| -> crate::error::Result<SweepOutcome> {
        let plan = Plan::resume(dir, Default::default())?;
        let controls = Controls {
            cancel,
            telemetry_root,
            detached: None,
        };
        Ok(sweep::sweep(plan, &controls, send)?.outcome)
    })();
    finished(Some(dir.to_path_buf()), result, send);
}

/// A fleet run that ended: its directory and each node's outcome.
pub struct FleetRan {
    pub dir: PathBuf,
    pub outcomes: Vec<fleets::NodeOutcome>,
    pub cancelled: bool,
}

impl FleetRan {
    /// How the fleet run ended as a result: [`FleetError::Cancelled`] when it was cancelled,
    /// [`FleetError::Incomplete`] naming the nodes that did not finish every condition cleanly,
    /// else Ok.
    pub fn verdict(&self) -> Result<(), FleetError> {
        if self.cancelled {
            return Err(FleetError::Cancelled {
                done: self.outcomes.iter().map(|o| o.ok + o.failed).sum(),
                total: self.outcomes.iter().map(|o| o.conditions).sum(),
                dir: self.dir.clone(),
            });
        }
        let short: Vec<String> = self
            .outcomes
            .iter()
            .filter(|o| o.status != fleets::NodeStatus::Complete || o.failed > 0)
            .map(|o| o.name.clone())
            .collect();
        if !short.is_empty() {
            return Err(FleetError::Incomplete {
                nodes: short,
                fleet_json: self.dir.join(fleets::FLEET),
            });
        }
        Ok(())
    }
}

/// A fleet run of config `text` (`file` names it): every node's share at once, their progress
/// as [`RunEvent::Node`]. Its directory (under `output` or the config's output directory)
/// holds `fleet.json`, written when the run starts and again when it ends, and one results
/// directory per node. `driver` is the front-end's runtime.
pub fn fleet(
    config: &Config,
    text: &str,
    file: &Path,
    output: Option<&Path>,
    cancel: &Cancel,
    driver: &fleets::Driver,
    send: Sink,
) -> crate::error::Result<FleetRan> {
    if let Some(why) = fleets::unshareable(config) {
        return Err(FleetError::Unshareable(why).into());
    }
    let share = fleets::share(text, file)?;
    let targets = fleets::targets(config);
    let parent = output.unwrap_or(&config.output.dir);
    let dir = crate::sweep_dir::new_dir(parent, &format!("{}-fleet", config.name))?;
    let mut manifest = fleets::FleetManifest {
        name: config.name.clone(),
        config_file: std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()),
        started: crate::text::now_rfc3339(),
        ended: None,
        nodes: Vec::new(),
    };
    fleets::write_manifest(&dir, &manifest)?;
    send(Event::Run(RunEvent::FleetStarted {
        dir: dir.clone(),
        nodes: config.matrix.nodes.clone(),
    }));
    let outcomes = fleets::run_all(&targets, &share, &dir, cancel, driver, |e| {
        send(Event::Run(RunEvent::Node(e)))
    });
    manifest.ended = Some(crate::text::now_rfc3339());
    manifest.nodes = outcomes.clone();
    fleets::write_manifest(&dir, &manifest)?;
    Ok(FleetRan {
        dir,
        outcomes,
        cancelled: cancel.is_raised(),
    })
}

/// [`fleet`] for the terminal UI's run: its outcome as a sweep's, summed over the nodes.
fn fleet_run(
    config: &Config,
    text: &str,
    file: &Path,
    cancel: &Cancel,
    driver: &fleets::Driver,
    send: Sink,
) -> crate::error::Result<SweepOutcome> {
    let ran = fleet(config, text, file, None, cancel, driver, send)?;
    Ok(SweepOutcome {
        ok: ran.outcomes.iter().map(|o| o.ok).sum(),
        failed: ran.outcomes.iter().map(|o| o.failed).sum(),
        interrupted: ran.cancelled,
        ..Default::default()
    })
}

/// What a tuning is asked: the config (its first model, its `[tune]` settings), the file it
/// came from (None: the defaults), the command line's overrides, and where to write the best
/// configuration found as a config `edgeprof run` takes.
pub struct TuneJob<'a> {
    pub config: Config,
    pub file: Option<&'a Path>,
    pub overrides: crate::tune::tuning::Overrides,
    pub write_config: Option<&'a Path>,
}

/// A tuning that ran: its report, its results directory, its budget and where the best
/// configuration was written.
pub struct Tuned {
    pub report: crate::tune::live::TuneReport,
    pub dir: PathBuf,
    pub budget: usize,
    pub written: Option<PathBuf>,
    pub seconds: f64,
}

impl Tuned {
    /// How the tuning ended as a result: [`Interrupted`] when it was cancelled, an error when
    /// no candidate could be measured, else Ok.
    pub fn verdict(&self) -> crate::error::Result<()> {
        if self.report.trace.stop == crate::tune::search::Stop::Cancelled {
            crate::error::bail!(Interrupted {
                done: self.report.trace.trials.len(),
                total: self.budget,
                dir: self.dir.clone(),
            });
        }
        if self.report.best.is_none() {
            crate::error::bail!(
                "no candidate could be measured; the reasons are in {}",
                self.dir.display()
            );
        }
        Ok(())
    }
}

/// Tunes as `job` asks, into a results directory of its own: [`TuneEvent::Started`], then
/// each trial's events. The caller says how it ended (the terminal UI hears
/// [`TuneEvent::Finished`] from [`tune`]).
pub fn tuning(
    job: TuneJob,
    cancel: &Cancel,
    telemetry_root: &Path,
    send: Sink,
) -> crate::error::Result<Tuned> {
    let started = std::time::Instant::now();
    let mut prepared = crate::tune::tuning::prepare(job.config, job.file, &job.overrides)?;
    send(Event::Tune(TuneEvent::Started {
        dir: prepared.dir.clone(),
        title: format!(
            "{} {} for {}",
            prepared.model, prepared.input, prepared.objective
        ),
        unit: prepared.objective.unit().to_string(),
        budget: prepared.settings.budget,
        candidates: prepared.space.candidates.len(),
        skipped: prepared.skipped.clone(),
        prior: prepared.prior_note.clone(),
    }));
    let edgeprof = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    let mut writer = results::Writer::open(&prepared.dir)?;
    let report = prepared
        .live(&edgeprof, cancel, telemetry_root)
        .run(&mut writer, |event| send(Event::Tune(event)))?;
    prepared.finish(&report)?;
    let mut written = None;
    if let (Some(file), Some(best)) = (job.write_config, report.recommended) {
        let best_config = crate::tune::live::best_config(
            &prepared.config,
            &prepared.model,
            prepared.input,
            &prepared.space.candidates[best],
        );
        results::write_atomic(file, crate::config::to_toml(&best_config).as_bytes()).map_err(
            |e| {
                crate::error::BadInput(format!(
                    "cannot write the best configuration to {}: {}",
                    file.display(),
                    e.reason()
                ))
            },
        )?;
        written = Some(file.to_path_buf());
    }
    Ok(Tuned {
        report,
        dir: prepared.dir.clone(),
        budget: prepared.settings.budget,
        written,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Tunes the config's first model with its `[tune]` settings, into a results directory of its
/// own. Starts with [`TuneEvent::Started`] and ends with [`TuneEvent::Finished`].
pub fn tune(text: &str, file: &Path, cancel: &Cancel, telemetry_root: &Path, send: Sink) {
    let result = (|| -> crate::error::Result<crate::tune::live::TuneReport> {
        let job = TuneJob {
            config: crate::config::parse(text, file)?,
            file: Some(file),
            overrides: Default::default(),
            write_config: None,
        };
        Ok(tuning(job, cancel, telemetry_root, send)?.report)
    })();
    send(Event::Tune(TuneEvent::Finished {
        report: result.map(Box::new).map_err(crate::error::JobError::from),
    }));
}

/// A distributed-training study: `t` on `nodes` (or processes on this machine), each cluster
/// size in turn, into a results directory under `parent`; each step as [`Event::Train`]. This
/// machine's framework is checked before anything starts.
pub fn study(
    t: &crate::config::Train,
    nodes: &[crate::config::Node],
    parent: PathBuf,
    cancel: &Cancel,
    send: Sink,
) -> crate::error::Result<crate::train::study::Finished> {
    let study = crate::train::study::Study::of(t, nodes, parent)?;
    if study.python.is_none() && study.cluster.iter().any(|m| m.node.is_none()) {
        crate::train::cluster::python_for(study.framework)?;
    }
    crate::train::study::run(&study, cancel, &|event| send(Event::Train(event)))
}

/// How a study ended as a result: [`TrainError::Cancelled`] when it was stopped,
/// [`TrainError::SizesFailed`] naming the cluster sizes that failed, else Ok.
pub fn study_verdict(finished: &crate::train::study::Finished) -> Result<(), TrainError> {
    if !finished.cancelled.is_empty() {
        return Err(TrainError::Cancelled {
            dir: finished.dir.clone(),
        });
    }
    if !finished.failures.is_empty() {
        return Err(TrainError::SizesFailed {
            sizes: finished.failures.iter().map(|(n, _)| *n).collect(),
            dir: finished.dir.clone(),
        });
    }
    Ok(())
}

/// [`study`] of the config's `[train]` on its `[[nodes]]`, into its output directory: the
/// terminal UI's. Ends with [`crate::train::study::TrainEvent::Finished`].
pub fn train(text: &str, file: &Path, cancel: &Cancel, send: Sink) {
    let result = (|| -> crate::error::Result<crate::train::study::Finished> {
        let config = crate::config::parse(text, file)?;
        let Some(t) = &config.train else {
            crate::error::bail!("the config has no [train] section");
        };
        study(t, &config.nodes, config.output.dir.clone(), cancel, send)
    })();
    send(Event::Train(crate::train::study::TrainEvent::Finished {
        result: result.map(Box::new).map_err(crate::error::JobError::from),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Failure;

    #[test]
    fn a_failure_is_told_by_its_cause_under_any_context() {
        let bad = crate::error::Error::from(crate::error::BadInput("no such model".into()))
            .context("cannot start the sweep");
        let told = crate::error::JobError::from(bad);
        assert_eq!(told.failure, Failure::BadInput);
        assert_eq!(told.message, "cannot start the sweep: no such model");
        let stopped = crate::error::Error::from(Interrupted {
            done: 1,
            total: 2,
            dir: PathBuf::from("r"),
        });
        assert_eq!(stopped.failure(), Failure::Interrupted);
        assert_eq!(stopped.failure().exit_code(), 130);
        let failed = crate::error::failed!("the disk is full");
        assert_eq!(failed.failure(), Failure::Failed);
        assert_eq!(failed.failure().exit_code(), 1);
    }

    #[test]
    fn fleet_and_training_errors_carry_their_kind_through_any_context() {
        let kind = |e: crate::error::Error| e.context("the run").failure();
        assert_eq!(
            kind(FleetError::Unshareable("an ONNX file".into()).into()),
            Failure::BadInput
        );
        let cancelled = FleetError::Cancelled {
            done: 3,
            total: 8,
            dir: PathBuf::from("r/f-fleet"),
        };
        assert_eq!(
            cancelled.to_string(),
            "cancelled with 3 of 8 condition(s) done across the nodes; what they finished is in \
             r/f-fleet"
        );
        assert_eq!(kind(cancelled.into()), Failure::Interrupted);
        let incomplete = FleetError::Incomplete {
            nodes: vec!["pi".into()],
            fleet_json: PathBuf::from("r/fleet.json"),
        };
        assert_eq!(kind(incomplete.into()), Failure::Failed);
        let not_set_up = TrainError::NotSetUp {
            framework: "pytorch".into(),
            why: "not set up".into(),
        };
        assert_eq!(kind(not_set_up.into()), Failure::BadInput);
        let sizes = TrainError::SizesFailed {
            sizes: vec![2, 3],
            dir: PathBuf::from("r/t"),
        };
        assert_eq!(
            sizes.to_string(),
            "training failed for cluster size(s) 2, 3 (see above; results in r/t)"
        );
        assert_eq!(kind(sizes.into()), Failure::Failed);
        assert_eq!(
            kind(TrainError::Cancelled { dir: "r/t".into() }.into()),
            Failure::Interrupted
        );
        use crate::tune::TuneError;
        assert_eq!(
            kind(TuneError::Asked("--batch: batch sizes start at 1".into()).into()),
            Failure::BadInput
        );
        assert_eq!(
            kind(TuneError::Unavailable("no CUDA provider".into()).into()),
            Failure::Failed
        );
    }
}

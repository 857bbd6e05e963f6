//! The work the UI starts on threads of its own: a sweep of the selected conditions, a fleet run
//! over the configured nodes, a tuning; each reports back over the UI's channel.

use super::*;

/// A sweep's plan in a results directory it holds (locked): what the run and resume threads share.
struct Planned {
    config: edgeprof::config::Config,
    dir: PathBuf,
    manifest: edgeprof::results::Manifest,
    todo: Vec<edgeprof::runner::matrix::Condition>,
    done_before: usize,
    attempts_before: std::collections::HashMap<String, usize>,
}

/// Sweeps `plan.todo` into its directory with progress as [`RunEvent`]s, then writes the
/// summaries.
fn sweep_planned(
    mut plan: Planned,
    tx: &Sender<Message>,
    cancel: &AtomicBool,
    telemetry_root: &Path,
) -> anyhow::Result<edgeprof::runner::sweep::SweepOutcome> {
    let send = |e: RunEvent| {
        let _ = tx.send(Message::Run(e));
    };
    let config = &plan.config;
    let cores = edgeprof::collect::device::available_cores();
    let estimates: Vec<f64> = plan
        .todo
        .iter()
        .map(|c| edgeprof::runner::matrix::estimate_condition(config, c, cores))
        .collect();
    let total = plan.manifest.conditions.len();
    send(RunEvent::Started {
        dir: plan.dir.clone(),
        total,
        done_before: plan.done_before,
        estimates,
        iterations: config.measure.iterations * config.measure.repeats,
    });
    let edgeprof = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    let mut writer = results::Writer::open(&plan.dir)?;
    let sweep = Sweep {
        config,
        conditions: &plan.todo,
        total,
        done_before: plan.done_before,
        edgeprof: &edgeprof,
        cancel,
        telemetry_root,
        dir: &plan.dir,
        attempts_before: &plan.attempts_before,
    };
    let outcome = sweep.run(&mut writer, |event| {
        if !matches!(event, SweepEvent::Worker(WorkerEvent::Ready)) {
            send(RunEvent::Sweep(event));
        }
    })?;
    edgeprof::session::finish(
        &plan.dir,
        &mut plan.manifest,
        &outcome,
        &config.output.formats,
    )?;
    Ok(outcome)
}

/// Sends how a run thread ended.
fn send_finished(
    tx: &Sender<Message>,
    dir: Option<PathBuf>,
    result: anyhow::Result<edgeprof::runner::sweep::SweepOutcome>,
) {
    let event = match result {
        Ok(outcome) => RunEvent::Finished {
            dir,
            outcome: Some(outcome),
            error: None,
        },
        Err(e) => RunEvent::Finished {
            dir,
            outcome: None,
            error: Some(format!("{e:#}")),
        },
    };
    let _ = tx.send(Message::Run(event));
}

/// The run thread: a new results directory for `text`, the sweep, the summaries, and progress as
/// [`RunEvent`]s.
pub(super) fn start_run(
    text: String,
    file: PathBuf,
    tx: Sender<Message>,
    cancel: Cancel,
    telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut dir = None;
        let result = (|| -> anyhow::Result<edgeprof::runner::sweep::SweepOutcome> {
            let parsed = edgeprof::config::parse(&text, &file)?;
            if parsed.matrix.nodes != [edgeprof::config::LOCAL_NODE] {
                return fleet_run(&parsed, &text, &file, &tx, &cancel);
            }
            let started = edgeprof::session::start_from_text(text, &file, None)?;
            dir = Some(started.dir.clone());
            let _lock = started.lock;
            let plan = Planned {
                config: started.config,
                dir: started.dir,
                manifest: started.manifest,
                todo: started.plan.to_run,
                done_before: 0,
                attempts_before: Default::default(),
            };
            sweep_planned(plan, &tx, cancel.flag(), &telemetry_root)
        })();
        send_finished(&tx, dir, result);
    })
}

/// The resume thread: an interrupted results directory finished as `edgeprof run --resume DIR`
/// finishes it (its stored config, the conditions without a result, attempts counted on).
pub(super) fn start_resume(
    dir: PathBuf,
    tx: Sender<Message>,
    cancel: Cancel,
    telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let result = (|| -> anyhow::Result<edgeprof::runner::sweep::SweepOutcome> {
            let resumed = edgeprof::session::resume(&dir)?;
            let _lock = resumed.lock;
            let plan = Planned {
                config: resumed.config,
                dir: dir.clone(),
                manifest: resumed.manifest,
                todo: resumed.todo,
                done_before: resumed.done_before,
                attempts_before: resumed.attempts_before,
            };
            sweep_planned(plan, &tx, cancel.flag(), &telemetry_root)
        })();
        send_finished(&tx, Some(dir.clone()), result);
    })
}

/// A fleet run from the UI: every node's share at once, their progress as [`RunEvent::Node`];
/// the fleet's directory holds one results directory per node (the Results tab opens one with
/// `o`).
pub(super) fn fleet_run(
    config: &edgeprof::config::Config,
    text: &str,
    file: &Path,
    tx: &Sender<Message>,
    cancel: &Cancel,
) -> anyhow::Result<edgeprof::runner::sweep::SweepOutcome> {
    use edgeprof::fleet::run as fleet;
    let send = |e: RunEvent| {
        let _ = tx.send(Message::Run(e));
    };
    if let Some(why) = fleet::unshareable(config) {
        anyhow::bail!(edgeprof::error::BadInput(why));
    }
    let share = fleet::share(text, file)?;
    let targets = fleet::targets(config);
    let dir = edgeprof::session::new_dir(&config.output.dir, &format!("{}-fleet", config.name))?;
    send(RunEvent::FleetStarted {
        dir: dir.clone(),
        nodes: config.matrix.nodes.clone(),
    });
    let started = edgeprof::text::now_rfc3339();
    let outcomes = fleet::run_all(&targets, &share, &dir, cancel, |e| send(RunEvent::Node(e)));
    let manifest = fleet::FleetManifest {
        name: config.name.clone(),
        config_file: PathBuf::from("(terminal UI selection)"),
        started,
        ended: Some(edgeprof::text::now_rfc3339()),
        nodes: outcomes.clone(),
    };
    fleet::write_manifest(&dir, &manifest)?;
    Ok(edgeprof::runner::sweep::SweepOutcome {
        ok: outcomes.iter().map(|o| o.ok).sum(),
        failed: outcomes.iter().map(|o| o.failed).sum(),
        interrupted: cancel.is_raised(),
        ..Default::default()
    })
}

/// The tune thread: the selection's first model tuned with the config's `[tune]` settings, into
/// a results directory of its own, with progress as [`TuneMsg`]s.
pub(super) fn start_tune(
    text: String,
    file: PathBuf,
    tx: Sender<Message>,
    cancel: Cancel,
    telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    use edgeprof::tune::live::TuneEvent;
    std::thread::spawn(move || {
        let send = |m: TuneMsg| {
            let _ = tx.send(Message::Tune(m));
        };
        let result = (|| -> anyhow::Result<app::TuneResult> {
            let config = edgeprof::config::parse(&text, &file)?;
            let mut prepared = edgeprof::tune::session::prepare(
                config,
                Some(&file),
                &edgeprof::tune::session::Overrides::default(),
            )?;
            send(TuneMsg::Started {
                dir: prepared.dir.clone(),
                title: format!(
                    "{} {} for {}",
                    prepared.model, prepared.input, prepared.objective
                ),
                unit: prepared.objective.unit().to_string(),
                budget: prepared.settings.budget,
                candidates: prepared.space.candidates.len(),
                skipped: prepared.skipped.clone(),
            });
            let edgeprof = std::env::current_exe().context("cannot locate the edgeprof binary")?;
            let mut writer = results::Writer::open(&prepared.dir)?;
            let space = prepared.space.candidates.clone();
            let report = prepared
                .live(&edgeprof, cancel.flag(), &telemetry_root)
                .run(&mut writer, |event| match event {
                    TuneEvent::Trial {
                        n,
                        candidate,
                        predicted,
                        ..
                    } => send(TuneMsg::Trial {
                        n,
                        label: candidate.label(),
                        predicted,
                    }),
                    TuneEvent::Measured { trial } => send(TuneMsg::Measured {
                        n: trial.n,
                        cost: trial.cost,
                        failure: trial.failure.clone(),
                        best_cost: trial.best_cost,
                    }),
                    TuneEvent::Confirm {
                        round,
                        rounds,
                        which,
                    } => send(TuneMsg::Confirm {
                        round,
                        rounds,
                        which,
                    }),
                    TuneEvent::Sweep(_) => {}
                })?;
            prepared.finish(&report)?;
            let confirmed = report
                .confirmation
                .as_ref()
                .and_then(|c| Some((c.default_median?, c.best_median?, c.gain?)));
            Ok(app::TuneResult {
                stop: report.trace.stop.to_string(),
                best: report
                    .best
                    .zip(report.best_cost)
                    .map(|(b, c)| (space[b].label(), c)),
                default: (space[report.default].label(), report.default_cost),
                confirmed,
                model_error: report.prediction_error,
                keep_default: report.recommended.is_some() && report.recommended != report.best,
            })
        })();
        match result {
            Ok(r) => send(TuneMsg::Finished {
                result: Some(r),
                error: None,
            }),
            Err(e) => send(TuneMsg::Finished {
                result: None,
                error: Some(format!("{e:#}")),
            }),
        }
    })
}

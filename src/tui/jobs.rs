//! The work the UI starts on threads of its own: a sweep of the selected conditions, a fleet run
//! over the configured nodes, a tuning; each reports back over the UI's channel.

use super::*;

/// The run thread: a new results directory for `text`, the sweep, the summaries, and progress as
/// [`RunEvent`]s.
pub(super) fn start_run(
    text: String,
    file: PathBuf,
    tx: Sender<Message>,
    cancel: Arc<AtomicBool>,
    telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let send = |e: RunEvent| {
            let _ = tx.send(Message::Run(e));
        };
        let mut dir = None;
        let result = (|| -> anyhow::Result<edgeprof::runner::sweep::SweepOutcome> {
            let parsed = edgeprof::config::parse(&text, &file)?;
            if parsed.matrix.nodes != [edgeprof::config::LOCAL_NODE] {
                return fleet_run(&parsed, &text, &file, &tx, &cancel);
            }
            let edgeprof::session::Started {
                config,
                plan,
                dir: d,
                mut manifest,
                lock: _lock,
            } = edgeprof::session::start_from_text(text, &file, None)?;
            dir = Some(d.clone());
            let cores = edgeprof::collect::device::available_cores();
            let estimates: Vec<f64> = plan
                .to_run
                .iter()
                .map(|c| edgeprof::runner::matrix::estimate_condition(&config, c, cores))
                .collect();
            send(RunEvent::Started {
                dir: d.clone(),
                total: plan.to_run.len(),
                done_before: 0,
                estimates,
                iterations: config.measure.iterations * config.measure.repeats,
            });
            let edgeprof = std::env::current_exe().context("cannot locate the edgeprof binary")?;
            let mut writer = results::Writer::open(&d)?;
            let sweep = Sweep {
                config: &config,
                conditions: &plan.to_run,
                total: plan.to_run.len(),
                done_before: 0,
                edgeprof: &edgeprof,
                cancel: &cancel,
                telemetry_root: &telemetry_root,
                dir: &d,
                attempts_before: &Default::default(),
            };
            let outcome = sweep.run(&mut writer, |event| {
                if !matches!(event, SweepEvent::Worker(WorkerEvent::Ready)) {
                    send(RunEvent::Sweep(event));
                }
            })?;
            edgeprof::session::finish(&d, &mut manifest, &outcome, &config.output.formats)?;
            Ok(outcome)
        })();
        match result {
            Ok(outcome) => send(RunEvent::Finished {
                dir,
                outcome: Some(outcome),
                error: None,
            }),
            Err(e) => send(RunEvent::Finished {
                dir,
                outcome: None,
                error: Some(format!("{e:#}")),
            }),
        }
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
    cancel: &AtomicBool,
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
        interrupted: cancel.load(Ordering::Relaxed),
        ..Default::default()
    })
}

/// The tune thread: the selection's first model tuned with the config's `[tune]` settings, into
/// a results directory of its own, with progress as [`TuneMsg`]s.
pub(super) fn start_tune(
    text: String,
    file: PathBuf,
    tx: Sender<Message>,
    cancel: Arc<AtomicBool>,
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
            let report =
                prepared
                    .live(&edgeprof, &cancel, &telemetry_root)
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

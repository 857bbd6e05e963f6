//! Keys and events driven through the UI's state.

use super::super::conditions::tests::conditions;
use super::*;

fn app() -> App {
    let Some(theme) = Theme::built_in("dark") else {
        panic!("no dark theme")
    };
    App::new(
        conditions("[matrix]\nmodels = [\"resnet34\"]\n"),
        theme,
        false,
    )
}

fn press(app: &mut App, code: KeyCode) -> Option<Command> {
    app.key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// A node that never started sends no count first: its failure records and outcome bring
/// their own.
#[test]
fn a_fleet_node_that_never_started_counts_its_failed_conditions() {
    use edgeprof::fleet::run::{FleetEvent, NodeOutcome, NodeStatus};
    let mut a = app();
    a.run_event(RunEvent::FleetStarted {
        dir: PathBuf::from("results/f-fleet"),
        nodes: vec!["gone".into()],
    });
    for model in ["resnet34", "resnet50"] {
        let condition = edgeprof::protocol::Condition::new(
            "tract",
            edgeprof::config::ModelRef::Zoo(model.into()),
            edgeprof::models::InputShape::default(),
            1,
            0,
            edgeprof::config::Device::Cpu,
        );
        a.run_event(RunEvent::Node(FleetEvent::Record {
            node: "gone".into(),
            record: Box::new(edgeprof::results::RunRecord {
                condition,
                attempt: 1,
                last: true,
                started: "2026-11-30T15:00:00Z".into(),
                ok: false,
                reason: Some("node gone never started its share: refused".into()),
                failure: None,
                run: None,
                stats: None,
                resources: Default::default(),
                telemetry: None,
                repetition: None,
                drift: None,
                ran_on: None,
                state_changes: Vec::new(),
            }),
        }));
    }
    a.run_event(RunEvent::Node(FleetEvent::Finished(NodeOutcome {
        name: "gone".into(),
        destination: Some("pi@10.0.0.9".into()),
        status: NodeStatus::Unreachable,
        reason: Some("refused".into()),
        resumed: 0,
        remote_dir: None,
        conditions: 2,
        ok: 0,
        failed: 2,
    })));
    assert_eq!((a.run.nodes[0].total, a.run.nodes[0].failed), (2, 2));
    assert_eq!((a.run.total, a.run.failed), (2, 2));
    assert_eq!(a.run.fraction(), 1.0);
}

#[test]
fn tabs_help_and_quit() {
    let mut a = app();
    press(&mut a, KeyCode::Char('3'));
    assert_eq!(a.tab, Tab::Results);
    press(&mut a, KeyCode::Tab);
    assert_eq!(a.tab, Tab::Roofline);
    press(&mut a, KeyCode::BackTab);
    press(&mut a, KeyCode::BackTab);
    assert_eq!(a.tab, Tab::Run);
    press(&mut a, KeyCode::Char('?'));
    assert!(a.help);
    // Keys go to the help overlay while it is open.
    assert_eq!(press(&mut a, KeyCode::Char('q')), None);
    assert!(!a.help && !a.quit);
    a.run.active = true;
    assert_eq!(press(&mut a, KeyCode::Char('q')), None);
    assert!(a
        .status
        .as_ref()
        .is_some_and(|s| s.1.contains("in progress")));
    assert_eq!(press(&mut a, KeyCode::Char('Q')), Some(Command::Quit));
    // q twice in a row does the same; another key between them does not.
    a.quit = false;
    press(&mut a, KeyCode::Char('q'));
    press(&mut a, KeyCode::Char('j'));
    assert_eq!(press(&mut a, KeyCode::Char('q')), None);
    assert_eq!(press(&mut a, KeyCode::Char('q')), Some(Command::Quit));
    assert!(a.quit);
}

#[test]
fn tuning_starts_from_the_tune_tab_and_cancels() {
    let mut a = app();
    assert_eq!(press(&mut a, KeyCode::Char('6')), None);
    assert_eq!(a.tab, Tab::Tune);
    let Some(Command::StartTune { text, .. }) = press(&mut a, KeyCode::Char('t')) else {
        panic!("t started no tuning")
    };
    assert!(text.contains("[matrix]"), "{text}");
    assert!(a.tune.active);
    // One at a time.
    assert_eq!(press(&mut a, KeyCode::Char('t')), None);
    assert_eq!(press(&mut a, KeyCode::Char('c')), Some(Command::CancelRun));
    a.tune_event(TuneEvent::Finished {
        report: Err("no candidate can run here".into()),
    });
    assert!(!a.tune.active);
    assert_eq!(a.tune.error.as_deref(), Some("no candidate can run here"));
    assert!(matches!(a.status, Some((Severity::Error, _))));
    assert_eq!(press(&mut a, KeyCode::Char('c')), None);
}

#[test]
fn selecting_and_running_from_keys() {
    let mut a = app();
    // Down to "Batch sizes", into its items, tick 2.
    for _ in 0..5 {
        press(&mut a, KeyCode::Down);
    }
    assert_eq!(a.current_axis(), Axis::Batch);
    press(&mut a, KeyCode::Right);
    press(&mut a, KeyCode::Down);
    press(&mut a, KeyCode::Char(' '));
    assert_eq!(a.conditions.config.matrix.batch, vec![1, 2]);
    let Some(Command::StartRun { text, .. }) = press(&mut a, KeyCode::Char('r')) else {
        panic!("no run")
    };
    assert!(text.contains("batch = [1, 2]"), "{text}");
    assert_eq!(a.tab, Tab::Run);
}

#[test]
fn prompts_produce_commands() {
    let mut a = app();
    press(&mut a, KeyCode::Char('w'));
    let Some(p) = &a.prompt else {
        panic!("no prompt")
    };
    assert_eq!(p.purpose, PromptFor::SaveConfig);
    for _ in 0..p.text.len() {
        press(&mut a, KeyCode::Backspace);
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let target = dir.path().join("x.toml");
    for c in target.display().to_string().chars() {
        press(&mut a, KeyCode::Char(c));
    }
    assert_eq!(
        press(&mut a, KeyCode::Enter),
        Some(Command::SaveConfig(target))
    );
    press(&mut a, KeyCode::Char('o'));
    press(&mut a, KeyCode::Esc);
    assert!(a.prompt.is_none());
}

/// Saving onto an existing file asks first: the first Enter says so and keeps the prompt, the
/// second replaces it.
#[test]
fn saving_over_an_existing_file_asks_first() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let target = dir.path().join("mine.toml");
    std::fs::write(&target, "# kept\n").unwrap_or_else(|e| panic!("{e}"));
    let mut a = app();
    press(&mut a, KeyCode::Char('w'));
    a.key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    for c in target.display().to_string().chars() {
        press(&mut a, KeyCode::Char(c));
    }
    assert_eq!(press(&mut a, KeyCode::Enter), None);
    assert!(a.prompt.is_some());
    assert_eq!(
        press(&mut a, KeyCode::Enter),
        Some(Command::SaveConfig(target))
    );
}

/// A prompt edits as a shell line does: Ctrl-W drops the last word, Ctrl-U the whole line, and
/// no other control key types its letter.
#[test]
fn a_prompt_takes_the_shells_line_editing_keys() {
    let mut a = app();
    press(&mut a, KeyCode::Char('w'));
    let ctrl = |a: &mut App, c: char| {
        a.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
    };
    let text = |a: &App| {
        a.prompt
            .as_ref()
            .map(|p| p.text.clone())
            .unwrap_or_default()
    };
    ctrl(&mut a, 'u');
    assert_eq!(text(&a), "");
    for c in "/tmp/dir/x.toml".chars() {
        press(&mut a, KeyCode::Char(c));
    }
    ctrl(&mut a, 'w');
    assert_eq!(text(&a), "/tmp/dir/");
    ctrl(&mut a, 'a');
    assert_eq!(text(&a), "/tmp/dir/");
    ctrl(&mut a, 'w');
    assert_eq!(text(&a), "/tmp/");
    ctrl(&mut a, 'u');
    assert_eq!(text(&a), "");
    assert!(a.prompt.is_some());
}

/// The output directory is edited in place on the Outputs axis; a path typed there is taken
/// from where the user is.
#[test]
fn the_output_directory_is_edited_in_place() {
    let mut a = app();
    a.axis = AXES.iter().position(|x| *x == Axis::Outputs).unwrap_or(0);
    press(&mut a, KeyCode::Right);
    press(&mut a, KeyCode::Enter);
    let Some(p) = &a.prompt else {
        panic!("no prompt")
    };
    assert_eq!(p.purpose, PromptFor::Add(Axis::Outputs));
    a.key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    for c in "/tmp/elsewhere".chars() {
        press(&mut a, KeyCode::Char(c));
    }
    assert_eq!(press(&mut a, KeyCode::Enter), None);
    assert_eq!(
        a.conditions.config.output.dir,
        PathBuf::from("/tmp/elsewhere")
    );
}

#[test]
fn eta_scales_with_how_finished_conditions_compared() {
    let mut a = app();
    a.run_event(RunEvent::Started {
        dir: PathBuf::from("results/r"),
        total: 3,
        done_before: 0,
        estimates: vec![10.0, 10.0, 10.0],
    });
    let start = |index: usize| {
        RunEvent::Sweep(edgeprof::runner::sweep::SweepEvent::Start {
            index,
            total: 3,
            condition: edgeprof::protocol::Condition::new(
                "tract",
                edgeprof::config::ModelRef::Zoo("resnet34".into()),
                edgeprof::models::InputShape::default(),
                1,
                0,
                edgeprof::config::Device::Cpu,
            ),
            attempt: 1,
            attempts: 1,
            process: 1,
            processes: 1,
            iterations: 100,
        })
    };
    a.run_event(start(1));
    // The first condition took 20 s, twice its estimate; the second has run 5 s.
    a.run.elapsed_s = 20.0;
    a.run_event(start(2));
    a.run.elapsed_s = 25.0;
    // Two left at twice the estimate, less the 5 s the current one has run.
    assert!((a.run.eta_s() - 35.0).abs() < 1e-9, "{}", a.run.eta_s());
    assert!((a.run.fraction() - 1.0 / 3.0).abs() < 1e-9);
}

/// What the status line says goes to the message log too; the line itself clears after a while
/// (a warning after 30 s), and M opens the log.
#[test]
fn the_status_line_clears_and_the_log_keeps_it() {
    let mut a = app();
    a.say(Severity::Info, "opened results/small");
    a.say(Severity::Warn, "a run is in progress");
    assert_eq!(a.said.len(), 2);
    assert_eq!(a.said[1].2, "a run is in progress");
    let Some(at) = a.status_expires() else {
        panic!("a warning never clears")
    };
    let now = std::time::Instant::now();
    assert!(at > now + std::time::Duration::from_secs(20));
    assert!(at <= now + std::time::Duration::from_secs(30));
    press(&mut a, KeyCode::Char('M'));
    assert!(a.log_open);
    press(&mut a, KeyCode::Char('q'));
    assert!(!a.log_open && !a.quit);
}

/// The drill-down ranks a stored profile as `roofline layers` ranked it: the saved profile's
/// `ranking` is the CLI's (tests/cli_roofline.rs checks that the CLI ranks it so again).
#[test]
fn the_layer_drill_down_ranks_a_stored_profile_as_roofline_layers_does() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let saved = fixtures.join("layers/shufflenet_v2_x0_5-3x64x64.json");
    let profile = match edgeprof::roofline::layers::read_saved(&saved) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap_or_default())
            .unwrap_or_default();
    let cli: Vec<String> = stored["ranking"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["label"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let ceilings = match edgeprof::roofline::store::read_file(&fixtures.join("ceilings-pi4.json")) {
        Ok(c) => c.ceilings,
        Err(_) => panic!("cannot read the Pi 4 ceilings"),
    };
    let mut a = app();
    a.roofline.ceilings = Some(Shown::Ready((ceilings, "pi4".into())));
    a.layers_profiled("tract/shufflenet".into(), Shown::Ready(profile.programs));
    let Some(Shown::Ready(view)) = &a.roofline.layers else {
        panic!("no layers shown");
    };
    let tui: Vec<String> = view.ranks.iter().map(|r| r.label.clone()).collect();
    assert!(!cli.is_empty());
    assert_eq!(tui, cli);
}

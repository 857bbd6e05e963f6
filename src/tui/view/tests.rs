//! Snapshots of every tab at 80×24 and 120×40 (insta; in `view/snapshots/`).

use super::super::app::{App, Command, Prompt, PromptFor, RunEvent, Shown, Tab};
use super::super::conditions::tests::conditions;
use super::super::theme::Theme;
use super::*;
use edgeprof::collect::telemetry::{Core, Gpu, Sample};
use edgeprof::runner::spawn::WorkerEvent;
use edgeprof::runner::sweep::SweepEvent;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

pub(super) fn app(text: &str, ascii: bool) -> App {
    let Some(theme) = Theme::built_in("dark") else {
        panic!("no dark theme")
    };
    App::new(conditions(text), theme, ascii)
}

pub(super) fn default_app() -> App {
    app(include_str!("../../../configs/default.toml"), false)
}

pub(super) fn screen(app: &App, (w, h): (u16, u16)) -> String {
    let mut terminal = match Terminal::new(TestBackend::new(w, h)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    if let Err(e) = terminal.draw(|f| draw(f, app)) {
        panic!("{e}");
    }
    format!("{}", terminal.backend())
}

/// Snapshots of `app` at both sizes, named `name_WxH`.
pub(super) fn snap(name: &str, app: &App) {
    for size in SIZES {
        insta::assert_snapshot!(format!("{name}_{}x{}", size.0, size.1), screen(app, size));
    }
}

fn fixture_results() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/small")
}

fn fixture_ceilings() -> edgeprof::roofline::Ceilings {
    let text = include_str!("../../../tests/fixtures/ceilings-pi4.json");
    match serde_json::from_str::<edgeprof::roofline::store::Stored>(text) {
        Ok(s) => s.ceilings,
        Err(e) => panic!("{e}"),
    }
}

pub(super) fn sample(t_s: f64, gpu: f64, cpu: [f64; 4]) -> Sample {
    Sample {
        t_s,
        cores: cpu
            .iter()
            .enumerate()
            .map(|(id, &l)| Core {
                id,
                online: id != 3,
                load_pct: (id != 3).then_some(l),
                freq_mhz: Some(1500),
            })
            .collect(),
        mem_used_bytes: Some((1200 + (t_s * 10.0) as u64) << 20),
        mem_total_bytes: Some(3956 << 20),
        gpus: vec![Gpu {
            name: "jetson gv11b".into(),
            load_pct: Some(gpu),
            freq_mhz: Some(1377),
            mem_used_bytes: Some((900 + (t_s * 5.0) as u64) << 20),
            ..Gpu::default()
        }],
        temperatures: vec![edgeprof::collect::telemetry::Reading {
            name: "GPU-therm".into(),
            value: 48.5,
        }],
        power_w: Some(9.8),
        ..Sample::default()
    }
}

#[test]
fn conditions_tab() {
    let mut a = default_app();
    snap("conditions", &a);
    // Into the Models axis, the cursor on the third model.
    a.axis = 3;
    a.in_items = true;
    a.cursors[3] = 2;
    snap("conditions_models", &a);
    let at = |axis: Axis| AXES.iter().position(|x| *x == axis).unwrap_or(0);
    // Parameters, and an error in the status line.
    a.axis = at(Axis::Parameters);
    a.say(Severity::Error, "nothing to run: 0 skipped, 8 excluded");
    snap("conditions_parameters_error", &a);
    a.axis = at(Axis::Metrics);
    a.in_items = false;
    a.status = None;
    a.prompt = Some(Prompt {
        purpose: PromptFor::SaveConfig,
        text: "default.toml".into(),
    });
    snap("conditions_metrics_prompt", &a);
}

#[test]
fn every_axis_pane() {
    let mut a = default_app();
    a.in_items = true;
    for (k, axis) in AXES.iter().enumerate() {
        a.axis = k;
        let name = axis.title().to_lowercase().replace(' ', "_");
        snap(&format!("axis_{name}"), &a);
    }
}

#[test]
fn help_overlay_and_ascii() {
    let mut a = app(include_str!("../../../configs/default.toml"), true);
    a.help = true;
    snap("help_ascii", &a);
    a.help = false;
    a.in_items = true;
    snap("conditions_ascii", &a);
}

/// At 80×24 the help is longer than the screen: it opens at its first key, scrolls with the
/// arrows to its last line, and says where it stands.
#[test]
fn help_scrolls_to_its_last_line_at_80x24() {
    use crossterm::event::KeyCode;
    let mut a = default_app();
    key(&mut a, KeyCode::Char('?'));
    let last = HELP[HELP.len() - 1].1;
    let first = screen(&a, (80, 24));
    assert!(first.contains(HELP[0].1), "{first}");
    assert!(!first.contains(last), "{first}");
    assert!(first.contains("Keys: lines 1-20 of "), "{first}");
    for _ in 0..HELP.len() {
        key(&mut a, KeyCode::Down);
    }
    let end = screen(&a, (80, 24));
    assert!(end.contains(last), "{end}");
    assert!(!end.contains(HELP[0].1), "{end}");
    // Closed and opened again: back at the top.
    key(&mut a, KeyCode::Esc);
    key(&mut a, KeyCode::Char('?'));
    assert!(screen(&a, (80, 24)).contains(HELP[0].1));
}

#[test]
fn run_tab_of_a_fleet_shows_each_node() {
    use edgeprof::fleet::run::{FleetEvent, NodeOutcome, NodeStatus};
    let mut a = default_app();
    a.tab = Tab::Run;
    a.run_event(RunEvent::FleetStarted {
        dir: PathBuf::from("results/20261130T150000Z-fleet-fleet"),
        nodes: vec!["pi4".into(), "orin".into(), "nano".into()],
    });
    for (node, device) in [
        ("pi4", "aarch64 Raspberry Pi 4 Model B Rev 1.5, 4 CPU(s)"),
        ("orin", "aarch64 NVIDIA Jetson AGX Orin, 12 CPU(s)"),
    ] {
        a.run_event(RunEvent::Node(FleetEvent::Started {
            node: node.into(),
            conditions: 4,
            device: device.into(),
        }));
    }
    let record = |id: &str, ok: bool| {
        let condition = edgeprof::protocol::Condition::new(
            "tract",
            edgeprof::config::ModelRef::Zoo(id.into()),
            edgeprof::models::InputShape::default(),
            1,
            0,
            edgeprof::config::Device::Cpu,
        );
        Box::new(edgeprof::results::RunRecord {
            condition,
            attempt: 1,
            last: true,
            started: "2026-11-30T15:00:00Z".into(),
            ok,
            reason: (!ok).then(|| {
                "node pi4 dropped before this condition finished: Connection reset".into()
            }),
            failure: None,
            run: None,
            stats: None,
            resources: Default::default(),
            telemetry: None,
            repetition: None,
            drift: None,
            ran_on: None,
            state_changes: Vec::new(),
        })
    };
    a.run_event(RunEvent::Node(FleetEvent::Record {
        node: "orin".into(),
        record: record("mobilenet_v2", true),
    }));
    a.run_event(RunEvent::Node(FleetEvent::Record {
        node: "pi4".into(),
        record: record("resnet34", true),
    }));
    a.run_event(RunEvent::Node(FleetEvent::Dropped {
        node: "pi4".into(),
        reason: "Connection reset by 10.0.0.21 port 22".into(),
        resuming: true,
    }));
    a.run_event(RunEvent::Node(FleetEvent::Record {
        node: "pi4".into(),
        record: record("resnet50", false),
    }));
    a.run_event(RunEvent::Node(FleetEvent::Finished(NodeOutcome {
        name: "nano".into(),
        destination: Some("nano@10.0.0.31".into()),
        status: NodeStatus::Unreachable,
        reason: Some("ssh: connect to host 10.0.0.31 port 22: No route to host".into()),
        resumed: 0,
        remote_dir: None,
        conditions: 0,
        ok: 0,
        failed: 0,
    })));
    assert_eq!((a.run.total, a.run.ok, a.run.failed), (8, 2, 1));
    assert_eq!(
        a.run.nodes[0].state,
        "dropped: Connection reset by 10.0.0.21 port 22"
    );
    snap("run_fleet", &a);
}

#[test]
fn run_tab() {
    let mut a = default_app();
    a.tab = Tab::Run;
    snap("run_empty", &a);
    a.run_event(RunEvent::Started {
        dir: PathBuf::from("results/20261130T020000Z-default"),
        total: 8,
        done_before: 0,
        estimates: vec![10.0; 8],
    });
    a.run_event(RunEvent::Sweep(SweepEvent::Start {
        index: 1,
        total: 8,
        condition: edgeprof::protocol::Condition::new(
            "tract",
            edgeprof::config::ModelRef::Zoo("resnet34".into()),
            edgeprof::models::InputShape {
                channels: 3,
                height: 32,
                width: 32,
            },
            1,
            0,
            edgeprof::config::Device::Cpu,
        ),
        attempt: 1,
        attempts: 2,
        process: 1,
        processes: 1,
        iterations: 500,
    }));
    for k in 0..60 {
        let t = k as f64 * 0.5;
        a.run_event(RunEvent::Sweep(SweepEvent::Telemetry(Box::new(sample(
            t,
            (k * 7 % 100) as f64,
            [90.0, 85.0, 12.0, 0.0],
        )))));
        a.run_event(RunEvent::Sweep(SweepEvent::Worker(WorkerEvent::Sample(
            edgeprof::collect::proc::ProcSample {
                t_s: t,
                cpu_pct: Some(180.0),
                rss_bytes: Some((40 + k) << 20),
                hwm_bytes: None,
                mem_used_bytes: None,
                mem_total_bytes: None,
            },
        ))));
    }
    a.run_event(RunEvent::Sweep(SweepEvent::Worker(WorkerEvent::Timed(250))));
    a.run.elapsed_s = 4.0;
    snap("run_live", &a);
    a.run_event(RunEvent::Finished {
        dir: Some(PathBuf::from("results/20261130T020000Z-default")),
        outcome: None,
        error: Some("cannot append to runs.jsonl: No space left on device (os error 28)".into()),
    });
    snap("run_error", &a);
}

#[test]
fn results_and_roofline_tabs() {
    let mut a = default_app();
    a.tab = Tab::Results;
    snap("results_empty", &a);
    super::super::open_results(&mut a, Path::new("/nonexistent/results"));
    // The directory in the message is this test's own; the screen shows it as is.
    snap("results_missing", &a);
    a.results.error = None;
    a.roofline.ceilings = Some(Shown::Ready((
        fixture_ceilings(),
        "ceilings-pi4.json".into(),
    )));
    super::super::open_results(&mut a, &fixture_results());
    a.results.dir = Some(PathBuf::from("results/small"));
    a.status = None;
    snap("results", &a);
    a.key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Right,
        crossterm::event::KeyModifiers::NONE,
    ));
    a.key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Right,
        crossterm::event::KeyModifiers::NONE,
    ));
    assert_eq!(a.results.sort, 2);
    // Sorted by median latency: shufflenet first.
    assert!(
        a.results.rows[0].id.contains("shufflenet"),
        "{:?}",
        a.results.rows[0].id
    );
    // b marks the selected (fastest) condition as the baseline: the other is slower.
    let b = || {
        crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('b'),
            crossterm::event::KeyModifiers::NONE,
        )
    };
    a.results.selected = 0;
    a.key(b());
    let other = a.results.rows[1].id.clone();
    assert_eq!(
        a.results.versus.get(&other).map(|c| c.verdict),
        Some(edgeprof::results::compare::Verdict::Slower)
    );
    a.results.selected = 1;
    let screen_text = screen(&a, (120, 40));
    // The names without what every condition shares (the title says it once).
    assert!(
        screen_text.contains("every condition is tract/*/3x32x32/b1/t1/cpu"),
        "{screen_text}"
    );
    assert!(
        screen_text.contains("* shufflenet_v2_x0_5"),
        "{screen_text}"
    );
    assert!(screen_text.contains("+ mobilenet_v2"), "{screen_text}");
    assert!(
        screen_text.contains("slower vs tract/shufflenet"),
        "{screen_text}"
    );
    // Again on the baseline: cleared.
    a.results.selected = 0;
    a.key(b());
    assert!(a.results.baseline.is_none() && a.results.versus.is_empty());
    a.status = None;
    a.tab = Tab::Roofline;
    snap("roofline", &a);
    a.roofline.selected = 1;
    snap("roofline_second", &a);
    // The drill-down into the second condition's layers (profiled by hand here).
    let Some(Command::Layers { condition, classes }) = a.key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('l'),
        crossterm::event::KeyModifiers::NONE,
    )) else {
        panic!("no drill-down")
    };
    assert_eq!(classes, 1000);
    snap("roofline_layers_pending", &a);
    let layer = |label: &str, mflops: f64, ms: f64, kib: f64| edgeprof::roofline::Program {
        label: label.into(),
        precision: edgeprof::roofline::Precision::Fp32,
        flops: mflops * 1e6,
        seconds: ms / 1e3,
        traffic: vec![(edgeprof::roofline::Level::Dram, kib * 1024.0)],
        source: edgeprof::roofline::PointSource::Analytic,
        basis: Vec::new(),
    };
    a.layers_profiled(
        condition.id.clone(),
        Shown::Ready(vec![
            layer("features.0.conv", 1.8, 0.30, 120.0),
            layer("features.1.dw", 0.4, 0.45, 400.0),
            layer("features.2.pw", 3.2, 0.20, 60.0),
            layer("classifier", 1.3, 0.10, 5000.0),
        ]),
    );
    snap("roofline_layers", &a);
    a.key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Esc,
        crossterm::event::KeyModifiers::NONE,
    ));
    assert!(a.roofline.layers.is_none());
    a.roofline = Default::default();
    snap("roofline_empty", &a);
    a.roofline.ceilings = Some(Shown::Note(
        "no ceilings for this device yet: press m to measure them (about 5 s), or run \
         `edgeprof roofline measure`"
            .into(),
    ));
    snap("roofline_no_ceilings", &a);
    assert_eq!(
        a.key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('m'),
            crossterm::event::KeyModifiers::NONE,
        )),
        Some(Command::MeasureCeilings(edgeprof::roofline::Processor::Cpu))
    );
}

#[test]
fn the_gpu_side_of_the_roofline() {
    use edgeprof::roofline::Processor;
    let key = |a: &mut App, c: char| {
        a.key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char(c),
            crossterm::event::KeyModifiers::NONE,
        ))
    };
    let mut a = default_app();
    a.tab = Tab::Roofline;
    a.roofline.ceilings = Some(Shown::Ready((
        fixture_ceilings(),
        "ceilings-pi4.json".into(),
    )));
    // g: the GPU side, whose ceilings are read first.
    assert_eq!(
        key(&mut a, 'g'),
        Some(Command::LoadCeilings(Processor::Gpu))
    );
    assert_eq!(a.roofline.processor, Processor::Gpu);
    a.roofline.ceilings = Some(Shown::Note(
        "no ceilings for GPU 0 yet: press m to measure them with \
         the CUDA microbenchmark, or run `edgeprof roofline measure-gpu`"
            .into(),
    ));
    snap("roofline_gpu_no_ceilings", &a);
    assert_eq!(
        key(&mut a, 'm'),
        Some(Command::MeasureCeilings(Processor::Gpu))
    );
    let stored: edgeprof::roofline::store::Stored = match serde_json::from_str(include_str!(
        "../../../tests/fixtures/ceilings-orin-gpu.json"
    )) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    a.roofline.ceilings = Some(Shown::Ready((
        stored.ceilings,
        "ceilings-orin-gpu.json".into(),
    )));
    let import = match edgeprof::roofline::nvidia::parse_ncu(include_str!(
        "../../../tests/fixtures/gpu-profilers/ncu-orin.csv"
    )) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    a.roofline.programs = edgeprof::roofline::nvidia::program(&import, "resnet-orin")
        .into_iter()
        .collect();
    a.roofline.left_out = vec![("broken".into(), "not Nsight Compute CSV output".into())];
    a.refresh_roofline();
    assert!(
        matches!(a.roofline.analyses.first(), Some(Ok(_))),
        "{:?}",
        a.roofline.analyses
    );
    snap("roofline_gpu", &a);
    // g again: the CPU side as it was; a side already seen is not read again.
    assert_eq!(key(&mut a, 'g'), None);
    assert_eq!(a.roofline.processor, Processor::Cpu);
    assert!(
        matches!(&a.roofline.ceilings, Some(Shown::Ready((_, from))) if from == "ceilings-pi4.json")
    );
    assert_eq!(key(&mut a, 'g'), None);
    assert_eq!(a.roofline.programs.len(), 1);
}

#[test]
fn scorecard_tab() -> anyhow::Result<()> {
    use edgeprof::scorecard::here::{Here, State};
    let mut a = default_app();
    a.tab = Tab::Scorecard;
    a.scorecard.cards = edgeprof::scorecard::cards::shipped()?;
    a.scorecard.rejoin(&[]);
    snap("scorecard_unprobed", &a);
    super::super::open_results(&mut a, &fixture_results());
    let here = |name: &str, state, version: Option<&str>, devices: &[&str]| Here {
        framework: name.into(),
        state,
        version: version.map(str::to_string),
        python: None,
        devices: devices.iter().map(|d| d.to_string()).collect(),
        tools: Vec::new(),
        note: None,
    };
    a.frameworks_probed(vec![
        here("tract", State::BuiltIn, Some("0.23.9"), &["CPU (asimd)"]),
        here("candle", State::BuiltIn, Some("0.11.1"), &["CPU (asimd)"]),
        here(
            "onnxruntime",
            State::Installed,
            Some("1.32.0"),
            &["CPUExecutionProvider"],
        ),
        here("tensorrt", State::Absent, None, &[]),
    ]);
    a.tab = Tab::Scorecard;
    snap("scorecard_tract", &a);
    // At 60×20 the facts are whole: a metric too long for its column, or a value column too
    // narrow, puts the value under the metric.
    let small = screen(&a, (60, 20));
    insta::assert_snapshot!("scorecard_tract_60x20", small);
    for whole in [
        "│ conditions ",
        "│   2 ok, 0 failed ",
        "│ mobilenet_v2            4.545 ",
        "│   built in 0.23.9 ",
    ] {
        assert!(small.contains(whole), "{whole}: {small}");
    }
    // The runtime table of the selected framework comes from the open results.
    let text = screen(&a, (120, 40));
    assert!(text.contains("mobilenet_v2"), "{text}");
    a.key(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::Down,
    ));
    a.key(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::PageDown,
    ));
    assert_eq!((a.scorecard.selected, a.scorecard.scroll), (1, 10));
    let probe = a.key(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::Char('p'),
    ));
    assert_eq!(probe, Some(Command::ProbeFrameworks));
    assert!(a.scorecard.probing);
    Ok(())
}

/// A tuning candidate whose label is `engine tT CORES bB` and the options, as the tuner makes
/// them.
fn candidate(
    engine: &str,
    threads: usize,
    cores: &str,
    batch: usize,
    options: &[(&str, serde_json::Value)],
) -> edgeprof::tune::Candidate {
    edgeprof::tune::Candidate {
        engine: engine.into(),
        threads,
        cores: edgeprof::tune::CoreSet {
            label: cores.into(),
            cpus: None,
            count: 2,
            capacity: 1.0,
        },
        batch,
        device: edgeprof::config::Device::Cpu,
        precision: "fp32".into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

/// A finished trial as the tuner reports it.
fn trial(n: usize, cost: Option<f64>, best_cost: Option<f64>) -> edgeprof::tune::search::Trial {
    edgeprof::tune::search::Trial {
        n,
        index: n - 1,
        cost,
        failure: cost
            .is_none()
            .then(|| "peak memory 900.0 MiB exceeds the limit".into()),
        predicted: None,
        predicted_sd: None,
        best: None,
        best_cost,
    }
}

#[test]
fn tune_tab() {
    use super::super::app::TuneEvent;
    use edgeprof::tune::live::{Confirmation, TuneReport};
    use edgeprof::tune::search::{Stop, Trace};
    let mut a = default_app();
    a.tab = Tab::Tune;
    snap("tune_empty", &a);
    a.tune_event(TuneEvent::Started {
        dir: PathBuf::from("results/20261130T120000Z-tune-mobilenet_v2"),
        title: "mobilenet_v2 3x64x64 for latency".into(),
        unit: "ms".into(),
        budget: 12,
        candidates: 48,
        skipped: vec!["pytorch: pytorch is not set up (run: edgeprof env setup pytorch)".into()],
        prior: "prior for 48 of 48 candidates from trials of 1 other model(s) (squeezenet1_1)"
            .into(),
    });
    let ort = |threads, cores, batch| {
        candidate(
            "onnxruntime",
            threads,
            cores,
            batch,
            &[
                ("graph_optimization_level", "all".into()),
                ("spinning", false.into()),
            ],
        )
    };
    let space = vec![
        candidate("tract", 2, "all", 1, &[]),
        ort(2, "one", 4),
        ort(1, "one", 4),
        candidate("candle", 1, "one", 4, &[]),
        ort(1, "one", 1),
        ort(2, "all", 1),
    ];
    let trials = [
        (None, Some(5.433)),
        (None, Some(3.902)),
        (Some((5.514, 0.32)), Some(3.738)),
        (Some((4.34, 0.95)), None),
        (Some((4.925, 0.31)), Some(1.017)),
    ];
    let mut best: Option<f64> = None;
    for (k, (predicted, cost)) in trials.iter().enumerate() {
        a.tune_event(TuneEvent::Trial {
            n: k + 1,
            budget: 12,
            candidate: space[k].clone(),
            predicted: *predicted,
        });
        if let Some(c) = cost {
            best = Some(best.map_or(*c, |b: f64| b.min(*c)));
        }
        a.tune_event(TuneEvent::Measured {
            trial: Box::new(trial(k + 1, *cost, best)),
        });
    }
    a.tune_event(TuneEvent::Trial {
        n: 6,
        budget: 12,
        candidate: space[5].clone(),
        predicted: Some((1.068, 0.16)),
    });
    snap("tune_running", &a);
    a.tune_event(TuneEvent::Measured {
        trial: Box::new(trial(6, Some(1.265), Some(1.017))),
    });
    a.tune_event(TuneEvent::Finished {
        report: Ok(Box::new(TuneReport {
            model: "mobilenet_v2".into(),
            input: "3x64x64".into(),
            objective: edgeprof::config::tuning::Objective::Latency,
            unit: "ms".into(),
            budget: 12,
            space,
            default: 0,
            trace: Trace {
                trials: Vec::new(),
                stop: Stop::Budget,
            },
            measured: Vec::new(),
            best: Some(4),
            best_cost: Some(1.017),
            default_cost: Some(5.433),
            prediction_error: Some((0.371, 0.733, 4)),
            leave_one_out_error: None,
            confirmation: Some(Confirmation {
                default_costs: vec![6.054],
                best_costs: vec![1.263],
                default_median: Some(6.054),
                best_median: Some(1.263),
                gain: Some(4.79),
                gain_interval: None,
                verdict: None,
            }),
            recommended: Some(4),
        })),
    });
    assert!(!a.tune.active);
    snap("tune_done", &a);
}

fn key(a: &mut App, code: crossterm::event::KeyCode) {
    a.key(crossterm::event::KeyEvent::new(
        code,
        crossterm::event::KeyModifiers::NONE,
    ));
}

/// Enter shows the selected condition's every figure; `/` keeps the conditions whose name holds
/// a text; `h` hides skipped ones, which sort last whichever way a figure sorts.
#[test]
fn results_detail_filter_and_hidden_skips() {
    use crossterm::event::KeyCode;
    let mut a = default_app();
    a.tab = Tab::Results;
    super::super::open_results(&mut a, &fixture_results());
    a.results.dir = Some(PathBuf::from("results/small"));
    a.status = None;
    let selected = a.results.rows[a.results.selected].id.clone();
    key(&mut a, KeyCode::Enter);
    assert!(a.results.detail);
    snap("results_detail", &a);
    let screen_text = screen(&a, (120, 40));
    assert!(
        screen_text.contains(&format!("{selected} (Enter: charts; PgUp/PgDn scroll)")),
        "{screen_text}"
    );
    // On a short screen the detail scrolls: PgDn moves its first line (the verdict) out.
    let short = screen(&a, (80, 16));
    assert!(short.contains("│clean"), "{short}");
    key(&mut a, KeyCode::PageDown);
    let scrolled = screen(&a, (80, 16));
    assert!(!scrolled.contains("│clean"), "{scrolled}");
    key(&mut a, KeyCode::PageUp);
    assert_eq!(screen(&a, (80, 16)), short);
    assert!(
        screen_text.contains("clean") && screen_text.contains("first inference"),
        "{screen_text}"
    );
    key(&mut a, KeyCode::Esc);
    assert!(!a.results.detail);
    // A skipped condition, as a framework not set up leaves one.
    let mut skipped = a.results.all[0].clone();
    skipped.id = "pytorch/mobilenet_v2/3x32x32/b1/t1/cpu".into();
    skipped.status = "skipped".into();
    skipped.median_ms = None;
    skipped.mean_ms = None;
    skipped.reason = Some("pytorch is not set up here".into());
    a.results.all.push(skipped);
    a.results.refresh_rows();
    assert_eq!(a.results.rows.len(), 3);
    key(&mut a, KeyCode::Right);
    key(&mut a, KeyCode::Right);
    for descending in [false, true] {
        a.results.descending = descending;
        a.results.sort_rows();
        assert_eq!(
            a.results.rows[2].status, "skipped",
            "descending {descending}"
        );
    }
    key(&mut a, KeyCode::Char('h'));
    assert_eq!(a.results.rows.len(), 2);
    assert!(a.status.as_ref().is_some_and(|s| s.1.contains("2 of 3")));
    key(&mut a, KeyCode::Char('h'));
    // `/` then a text: only the names holding it.
    key(&mut a, KeyCode::Char('/'));
    for c in "mobile".chars() {
        key(&mut a, KeyCode::Char(c));
    }
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.results.rows.len(), 2, "{:?}", a.results.rows);
    assert!(a.results.rows.iter().all(|r| r.id.contains("mobile")));
    // An empty filter shows every condition again.
    key(&mut a, KeyCode::Char('/'));
    for _ in 0.."mobile".len() {
        key(&mut a, KeyCode::Backspace);
    }
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.results.rows.len(), 3);
}

/// M opens the message log: everything the status line said, with its time, newest last.
#[test]
fn the_message_log_shows_what_the_status_line_said() {
    use crossterm::event::KeyCode;
    let mut a = default_app();
    // Fixed times for the snapshot.
    for (time, severity, text) in [
        ("10:00:01", Severity::Info, "opened results/20261202T100000Z-default"),
        ("10:00:05", Severity::Warn, "a run is in progress: q (or Ctrl-C) again, or Q, cancels it and quits; c on the Run tab cancels it"),
        ("10:01:00", Severity::Error, "cannot open /nowhere: No such file or directory (os error 2)"),
    ] {
        a.said.push_back((time.to_string(), severity, text.to_string()));
    }
    a.status = None;
    key(&mut a, KeyCode::Char('M'));
    assert!(a.log_open);
    snap("message_log", &a);
    key(&mut a, KeyCode::Esc);
    assert!(!a.log_open);
}

/// `p` offers only the precisions the ceilings have a roof for; PgDn scrolls the advice.
#[test]
fn the_roofline_offers_only_the_precisions_it_has() {
    use crossterm::event::KeyCode;
    use edgeprof::roofline::Precision;
    let mut a = default_app();
    a.tab = Tab::Roofline;
    a.roofline.ceilings = Some(Shown::Ready((
        fixture_ceilings(),
        "ceilings-pi4.json".into(),
    )));
    assert!(fixture_ceilings().peak(Precision::Fp16).is_none());
    let mut seen = Vec::new();
    for _ in 0..4 {
        key(&mut a, KeyCode::Char('p'));
        seen.extend(a.roofline.precision);
    }
    use Precision::{Fp32, Fp64};
    assert_eq!(seen, [Fp64, Fp32, Fp64, Fp32]);
    key(&mut a, KeyCode::PageDown);
    assert_eq!(a.roofline.advice_scroll, 5);
    key(&mut a, KeyCode::Down);
    assert_eq!(a.roofline.advice_scroll, 0);
    let screen_text = screen(&a, (80, 24));
    assert!(
        screen_text.contains("flat: fp32 48.0, fp64 24.0 GFLOP/s"),
        "{screen_text}"
    );
}

/// A lower-precision condition's detail says what it cost in accuracy against its fp32 twin.
#[test]
fn results_detail_shows_a_lower_precisions_accuracy() {
    use crossterm::event::KeyCode;
    use edgeprof::results::accuracy::{Accuracy, Figures};
    let mut a = default_app();
    a.tab = Tab::Results;
    super::super::open_results(&mut a, &fixture_results());
    let selected = a.results.rows[a.results.selected].id.clone();
    a.results.accuracy.insert(
        selected.clone(),
        Accuracy {
            condition: selected.clone(),
            precision: "int8".into(),
            reference: selected.clone(),
            inputs:
                "8 photographs (astronaut.png, chelsea.png, coffee.png, …) from scikit-image 0.24.0"
                    .to_string(),
            figures: Some(Figures {
                images: 8,
                top1_agreement: 0.875,
                top5_agreement: 1.0,
                max_abs_error: 0.25,
                mean_abs_error: 0.05,
                cosine: 0.9975,
            }),
            note: None,
        },
    );
    key(&mut a, KeyCode::Enter);
    let text = screen(&a, (160, 40));
    assert!(
        text.contains("int8 against fp32: top-1 agreement 87.5 % · top-5 100.0 %"),
        "{text}"
    );
    // What the figures were measured on, below them.
    assert!(
        text.contains("on 8 photographs (astronaut.png, chelsea.png, coffee.png, …)"),
        "{text}"
    );
}

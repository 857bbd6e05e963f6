//! Snapshots of the Training pane and of the Run tab during a training study, and the pane's
//! keys: ticking the task, `r` starting the study with the section in its config text.

use super::super::app::{Command, Tab};
use super::super::conditions::AXES;
use super::tests::{app, snap};
use super::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use edgeprof::train::study::{Outcome, TrainEvent};
use edgeprof::train::{cluster, Epoch, Trained};

const BOARDS: &str = "name = \"study\"\n\
    [[nodes]]\nname = \"pi-1\"\ndestination = \"pi@10.0.0.2\"\n\
    [[nodes]]\nname = \"pi-2\"\ndestination = \"pi@10.0.0.3\"\n";

fn key(a: &mut App, code: KeyCode) -> Option<Command> {
    a.key(KeyEvent::new(code, KeyModifiers::NONE))
}

#[test]
fn the_training_pane_ticks_the_task_and_r_starts_the_study() {
    let mut a = app(BOARDS, false);
    a.axis = AXES.iter().position(|x| *x == Axis::Training).unwrap_or(0);
    a.in_items = true;
    // Untrained: + says why it cannot change anything yet.
    assert!(key(&mut a, KeyCode::Char('+')).is_none());
    assert!(a.conditions.config.train.is_none());
    assert!(key(&mut a, KeyCode::Char(' ')).is_none());
    assert!(a.conditions.config.train.is_some());
    // tensorflow (line 2), then 5 epochs (line 4, + twice).
    for code in [
        KeyCode::Down,
        KeyCode::Down,
        KeyCode::Char(' '),
        KeyCode::Down,
    ] {
        key(&mut a, code);
    }
    key(&mut a, KeyCode::Down);
    key(&mut a, KeyCode::Char('+'));
    key(&mut a, KeyCode::Char('+'));
    snap("training_pane", &a);
    match key(&mut a, KeyCode::Char('r')) {
        Some(Command::StartTrain { text, .. }) => {
            let config = edgeprof::config::parse(&text, std::path::Path::new("t.toml"));
            let train = config.ok().and_then(|c| c.train);
            assert!(
                train
                    .as_ref()
                    .is_some_and(|t| t.framework == "tensorflow" && t.epochs == 5),
                "{text}"
            );
        }
        other => panic!("r gave {other:?}"),
    }
    assert_eq!(a.tab, Tab::Run);
}

fn epoch(epoch: usize, acc: f64) -> Epoch {
    Epoch {
        epoch,
        train_acc: acc,
        loss: 1.0,
        val_acc: acc - 0.1,
        elapsed_s: epoch as f64 * 4.0,
    }
}

#[test]
fn the_run_tab_follows_each_size_and_its_members() {
    let mut a = app(BOARDS, false);
    a.tab = Tab::Run;
    a.train.begin();
    let events = vec![
        TrainEvent::Started {
            dir: "/results/20261203T101500Z-train-cnn".into(),
            data: "synthetic CIFAR-10 (2000 training, 400 test images, seed 1), written by every \
                   member"
                .into(),
        },
        TrainEvent::Launch {
            nodes: 1,
            model: "cnn".into(),
            framework: cluster::Framework::Tensorflow,
            members: vec!["pi-1".into()],
        },
        TrainEvent::Epoch {
            nodes: 1,
            epochs: 2,
            epoch: epoch(1, 0.31),
        },
        TrainEvent::Epoch {
            nodes: 1,
            epochs: 2,
            epoch: epoch(2, 0.45),
        },
        TrainEvent::Ended {
            nodes: 1,
            outcome: Outcome::Trained(Trained {
                nodes: 1,
                wall_s: 8.2,
                epochs: vec![epoch(1, 0.31), epoch(2, 0.45)],
                framework: Some("tensorflow 2.20.0".into()),
                busiest_link_bytes: 0,
            }),
        },
        TrainEvent::Launch {
            nodes: 2,
            model: "cnn".into(),
            framework: cluster::Framework::Tensorflow,
            members: vec!["pi-1".into(), "pi-2".into()],
        },
        TrainEvent::NodeReady {
            nodes: 2,
            node: "pi-1".into(),
            device: "Raspberry Pi 4 Model B Rev 1.4, 4 cores, 3.7 GiB".into(),
        },
        TrainEvent::NodeSample {
            nodes: 2,
            node: "pi-1".into(),
            sample: cluster::NodeSample {
                t_s: 3.0,
                cpu_pct: Some(93.0),
                mem_used_bytes: Some(900 << 20),
                rx_bytes: 12 << 20,
                tx_bytes: 11 << 20,
            },
        },
        TrainEvent::Epoch {
            nodes: 2,
            epochs: 2,
            epoch: epoch(1, 0.29),
        },
    ];
    for e in events {
        a.train_event(e);
    }
    snap("train_run", &a);
    a.train_event(TrainEvent::Ended {
        nodes: 2,
        outcome: Outcome::Failed("pi-2: its stream ended: Connection reset by peer".into()),
    });
    a.train_event(TrainEvent::Finished {
        result: Err("the study could not finish".into()),
    });
    assert!(!a.train.active);
    snap("train_failed", &a);
}

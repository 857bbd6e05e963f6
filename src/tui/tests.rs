//! The event loop itself, over ratatui's `TestBackend`, its keys scripted and its jobs started by
//! a stand-in [`Runner`]: a key-driven flow from the first frame to the quit.

use super::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use edgeprof::event::RunEvent;
use futures_util::StreamExt;
use ratatui::backend::TestBackend;
use std::sync::{Arc, Mutex};

fn key(c: char) -> Message {
    Message::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

/// A runner whose run says it started in `results/scripted`, finishes at once, and then
/// presses `q` (on the loop's own channel, so after its events); the configs it was handed are
/// kept.
struct Scripted {
    handed: Arc<Mutex<Vec<String>>>,
}

impl Runner for Scripted {
    fn run(&self, text: String, _: PathBuf, to: JobLink) -> std::thread::JoinHandle<()> {
        if let Ok(mut handed) = self.handed.lock() {
            handed.push(text);
        }
        std::thread::spawn(move || {
            let dir = PathBuf::from("results/scripted");
            let events = [
                RunEvent::Started {
                    dir: dir.clone(),
                    total: 1,
                    done_before: 0,
                    estimates: vec![2.0],
                },
                RunEvent::Finished {
                    dir: Some(dir),
                    outcome: None,
                    error: None,
                },
            ];
            for event in events {
                let _ = to.tx.send(Message::Event(Event::Run(event)));
            }
            let _ = to.tx.send(key('q'));
        })
    }

    fn resume(&self, _: PathBuf, _: JobLink) -> std::thread::JoinHandle<()> {
        panic!("nothing to resume in this flow")
    }

    fn tune(&self, _: String, _: PathBuf, _: JobLink) -> std::thread::JoinHandle<()> {
        panic!("no tuning in this flow")
    }

    fn train(&self, _: String, _: PathBuf, _: JobLink) -> std::thread::JoinHandle<()> {
        panic!("no training in this flow")
    }
}

#[test]
fn r_starts_the_selection_through_the_runner_and_its_end_shows_on_the_run_tab() {
    let Some(theme) = theme::Theme::built_in("dark") else {
        panic!("no dark theme")
    };
    let mut app = App::new(
        conditions::tests::conditions("[matrix]\nmodels = [\"resnet34\"]\n"),
        theme,
        false,
    );
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let handed = Arc::new(Mutex::new(Vec::new()));
    let scripted = Scripted {
        handed: Arc::clone(&handed),
    };
    let mut work = Loop::with_runner(Box::new(scripted), runtime.handle().clone());
    let mut terminal = match ratatui::Terminal::new(TestBackend::new(80, 24)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    // `r` on the Conditions tab, then nothing more from the keyboard.
    let keys = futures_util::stream::iter([key('r')]).chain(futures_util::stream::pending());
    let hangup = AtomicBool::new(false);
    let exit = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(30),
            event_loop(
                &mut terminal,
                &mut app,
                &mut work,
                Outside::keys(Box::pin(keys)),
                &hangup,
            ),
        )
        .await
    });
    assert!(matches!(exit, Ok(Ok(Exit::Quit))), "the loop did not quit");
    let handed = handed.lock().map(|h| h.clone()).unwrap_or_default();
    assert_eq!(handed.len(), 1, "{handed:?}");
    assert!(handed[0].contains("resnet34"), "{}", handed[0]);
    assert_eq!(app.tab, Tab::Run);
    assert!(!app.run.active);
    assert_eq!(app.run.dir, Some(PathBuf::from("results/scripted")));
    if let Err(e) = terminal.draw(|f| view::draw(f, &app)) {
        panic!("{e}");
    }
    let screen: String = terminal
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(screen.contains("results/scripted"), "{screen}");
}

//! The work the UI starts on threads of its own: a run of the selected conditions (or a fleet
//! run over the configured nodes), the resumption of an interrupted directory, a tuning. The
//! jobs themselves are the library's (`edgeprof::jobs`); each thread sends their events
//! to the UI's channel as they come.

use super::*;
use edgeprof::event::Event;
use edgeprof::jobs;

/// The job's events as the event loop's messages.
fn forward(tx: Sender<Message>) -> impl Fn(Event) + Sync {
    move |event| {
        // The loop is gone only when the UI is leaving: nothing left to tell.
        let _ = tx.send(Message::Event(event));
    }
}

/// What starts the UI's background work (one job at a time, each on a thread of its own whose
/// events reach the loop as messages): the library's jobs, [`Jobs`], or in the tests a
/// stand-in that says scripted events, so that key-driven flows run without measuring.
pub trait Runner {
    /// A run of `text` (a new results directory, the sweep or a fleet run, the summaries).
    fn run(&self, text: String, file: PathBuf, to: JobLink) -> std::thread::JoinHandle<()>;
    /// The resumption of the interrupted directory `dir`.
    fn resume(&self, dir: PathBuf, to: JobLink) -> std::thread::JoinHandle<()>;
    /// A tuning of `text`'s first model.
    fn tune(&self, text: String, file: PathBuf, to: JobLink) -> std::thread::JoinHandle<()>;
    /// A training study.
    fn train(&self, text: String, file: PathBuf, to: JobLink) -> std::thread::JoinHandle<()>;
}

/// What a started job is given: where its messages go, its cancel, the telemetry root.
pub struct JobLink {
    pub tx: Sender<Message>,
    pub cancel: Cancel,
    pub telemetry_root: PathBuf,
    /// The UI's runtime, which its event loop runs: a fleet run's nodes are driven on it.
    pub runtime: tokio::runtime::Handle,
}

/// The library's jobs.
pub struct Jobs;

impl Runner for Jobs {
    fn run(&self, text: String, file: PathBuf, to: JobLink) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let driver = edgeprof::fleet::run::Driver::Shared(to.runtime);
            jobs::run(
                text,
                &file,
                &to.cancel,
                &to.telemetry_root,
                &driver,
                &forward(to.tx),
            )
        })
    }

    fn resume(&self, dir: PathBuf, to: JobLink) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            jobs::resume(&dir, &to.cancel, &to.telemetry_root, &forward(to.tx))
        })
    }

    fn tune(&self, text: String, file: PathBuf, to: JobLink) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            jobs::tune(
                &text,
                &file,
                &to.cancel,
                &to.telemetry_root,
                &forward(to.tx),
            )
        })
    }

    fn train(&self, text: String, file: PathBuf, to: JobLink) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || jobs::train(&text, &file, &to.cancel, &forward(to.tx)))
    }
}

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

/// The run thread: a new results directory for `text`, the sweep (or a fleet run), the
/// summaries.
pub(super) fn start_run(
    text: String,
    file: PathBuf,
    tx: Sender<Message>,
    cancel: Cancel,
    telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || jobs::run(text, &file, &cancel, &telemetry_root, &forward(tx)))
}

/// The resume thread: an interrupted results directory finished as `edgeprof run --resume DIR`
/// finishes it.
pub(super) fn start_resume(
    dir: PathBuf,
    tx: Sender<Message>,
    cancel: Cancel,
    telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || jobs::resume(&dir, &cancel, &telemetry_root, &forward(tx)))
}

/// The tune thread: the selection's first model tuned with the config's `[tune]` settings, into
/// a results directory of its own.
pub(super) fn start_tune(
    text: String,
    file: PathBuf,
    tx: Sender<Message>,
    cancel: Cancel,
    telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || jobs::tune(&text, &file, &cancel, &telemetry_root, &forward(tx)))
}

/// The training thread: the selection's `[train]` study, each cluster size in turn, into a
/// results directory of its own.
pub(super) fn start_train(
    text: String,
    file: PathBuf,
    tx: Sender<Message>,
    cancel: Cancel,
    _telemetry_root: PathBuf,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || jobs::train(&text, &file, &cancel, &forward(tx)))
}

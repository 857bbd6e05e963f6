//! The one event type the library's jobs send to a front-end: a run (a sweep, or a fleet run),
//! a tuning, a training study and the telemetry monitor all report through [`Event`]. Every event owns its data, so
//! a job on its own thread sends each one as it is, and the CLI and the TUI render the same
//! values: neither re-declares nor translates them.

use crate::collect::telemetry::Sample;
use crate::fleet::run::FleetEvent;
use crate::runner::sweep::{SweepEvent, SweepOutcome};
use crate::train::study::TrainEvent;
use crate::tune::live::TuneEvent;
use std::path::PathBuf;

/// What a job reports, as it happens.
#[derive(Debug)]
pub enum Event {
    /// A run of conditions: a sweep here or a fleet run over nodes.
    Run(RunEvent),
    /// A tuning.
    Tune(TuneEvent),
    /// A training scaling study.
    Train(TrainEvent),
    /// A telemetry sample of the monitor.
    Telemetry(Box<Sample>),
    /// The board's performance state, as the monitor reads it now and then.
    BoardState(Box<crate::collect::board::BoardState>),
}

/// How a run goes, from its start to its end.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// A sweep starts in `dir`: `total` conditions, `done_before` of them finished by an earlier
    /// run of the directory, the estimated seconds of each one to run.
    Started {
        dir: PathBuf,
        total: usize,
        done_before: usize,
        estimates: Vec<f64>,
    },
    /// The board's performance state as the sweep begins (kept in its manifest); its
    /// warnings follow as the sweep's own.
    BoardState(Box<crate::collect::board::BoardState>),
    /// The sweep's own events.
    Sweep(SweepEvent),
    /// A line of the run's progress, as its `progress.log` holds it.
    Said(crate::runner::progress::Said),
    /// The sweep ended and its summaries are written: its manifest as it now stands, the run
    /// read back and its summary's rows (what a front-end reports at once: the rooflines,
    /// when asked for, follow and may take minutes).
    Stored {
        manifest: Box<crate::results::Manifest>,
        stored: std::sync::Arc<crate::results::Stored>,
        rows: std::sync::Arc<Vec<crate::results::summary::Row>>,
    },
    /// After the sweep, its GPU conditions under the profiler for the GPU roofline.
    GpuProfile(crate::runner::gpu_profile::GpuProfileEvent),
    /// A fleet run began: its directory and nodes.
    FleetStarted { dir: PathBuf, nodes: Vec<String> },
    /// How one node of a fleet run is going.
    Node(FleetEvent),
    /// The run ended: its directory (when it got one) and its outcome, or why it failed.
    Finished {
        dir: Option<PathBuf>,
        outcome: Option<SweepOutcome>,
        error: Option<crate::error::JobError>,
    },
}

//! Why a training study could not start or did not end with every cluster size trained.

use crate::error::Failure;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TrainError {
    /// This build has no harness for the framework.
    #[error("this build has no {0} harness")]
    NoHarness(String),
    /// The framework is not set up here (`edgeprof env setup`).
    #[error("training needs {framework}: {why} (or give --python)")]
    NotSetUp { framework: String, why: String },
    /// Stopped on request: what finished is in its directory.
    #[error("training cancelled; what finished is in {}", dir.display())]
    Cancelled { dir: PathBuf },
    /// Cluster sizes whose training failed.
    #[error("training failed for cluster size(s) {} (see above; results in {})", sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(", "), dir.display())]
    SizesFailed { sizes: Vec<usize>, dir: PathBuf },
}

impl TrainError {
    /// What kind of failure it is, for the exit code.
    pub fn failure(&self) -> Failure {
        match self {
            TrainError::NoHarness(_) | TrainError::NotSetUp { .. } => Failure::BadInput,
            TrainError::Cancelled { .. } => Failure::Interrupted,
            TrainError::SizesFailed { .. } => Failure::Failed,
        }
    }
}

impl From<TrainError> for crate::error::Error {
    fn from(error: TrainError) -> crate::error::Error {
        let kind = crate::error::Kind::from(error.failure());
        crate::error::Error::of(kind, &error)
    }
}

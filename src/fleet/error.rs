//! Why a fleet run could not start or did not end with every node's conditions done.

use crate::error::Failure;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum FleetError {
    /// The config cannot be sent to the nodes as it is (an ONNX file or a program only this
    /// machine has).
    #[error("{0}")]
    Unshareable(String),
    /// The config shared with the nodes does not read back, resolve or encode.
    #[error("the config shared with the nodes {0}")]
    Share(String),
    /// `fleet.json` could not be written.
    #[error("cannot write {}: {reason}", path.display())]
    Manifest { path: PathBuf, reason: String },
    /// Cancelled: each node kept what it finished.
    #[error("cancelled with {done} of {total} condition(s) done across the nodes; what they finished is in {}", dir.display())]
    Cancelled {
        done: usize,
        total: usize,
        dir: PathBuf,
    },
    /// Nodes that did not finish every condition cleanly.
    #[error("the fleet run did not complete everywhere: {} (see {})", nodes.join(", "), fleet_json.display())]
    Incomplete {
        nodes: Vec<String>,
        fleet_json: PathBuf,
    },
}

impl FleetError {
    /// What kind of failure it is, for the exit code.
    pub fn failure(&self) -> Failure {
        match self {
            FleetError::Unshareable(_) | FleetError::Share(_) => Failure::BadInput,
            FleetError::Cancelled { .. } => Failure::Interrupted,
            FleetError::Manifest { .. } | FleetError::Incomplete { .. } => Failure::Failed,
        }
    }
}

impl From<FleetError> for crate::error::Error {
    fn from(error: FleetError) -> crate::error::Error {
        let kind = crate::error::Kind::from(error.failure());
        crate::error::Error::of(kind, &error)
    }
}

//! Why a tuning, a placement or a cost-model profile could not be done.

use crate::error::Failure;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TuneError {
    /// What was asked cannot be done as asked: an option, a model, a unit list, a database or
    /// an interrupted profile the user named.
    #[error("{0}")]
    Asked(String),
    /// This machine lacks what it takes (a CUDA execution provider, a framework's library).
    #[error("{0}")]
    Unavailable(String),
    /// A worker answered with something other than what it was asked for.
    #[error("{0}")]
    Worker(String),
}

impl TuneError {
    /// What kind of failure it is, for the exit code.
    pub fn failure(&self) -> Failure {
        match self {
            TuneError::Asked(_) => Failure::BadInput,
            TuneError::Unavailable(_) | TuneError::Worker(_) => Failure::Failed,
        }
    }
}

impl From<TuneError> for crate::error::Error {
    fn from(error: TuneError) -> crate::error::Error {
        let kind = crate::error::Kind::from(error.failure());
        crate::error::Error::of(kind, &error)
    }
}

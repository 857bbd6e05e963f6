//! The error kinds every layer shares.

use thiserror::Error;

/// An error caused by what the user asked for (exit code 2), as opposed to a failed run (1).
#[derive(Debug, Error)]
#[error("{0}")]
pub struct BadInput(pub String);

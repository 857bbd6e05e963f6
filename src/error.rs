//! The error kinds every layer shares.

use thiserror::Error;

/// An error caused by what the user asked for (exit code 2), as opposed to a failed run (1).
#[derive(Debug, Clone, Default, PartialEq, Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Something this machine lacks for a capability (a profiler, valgrind, the CUDA libraries,
/// hardware counters, a GPU), with what to do about it, in one sentence.
#[derive(Debug, Clone, Default, PartialEq, Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// A child process (an external tool, a framework's Python, ssh) that could not be started,
/// ran past its time, or failed, in one sentence.
#[derive(Debug, Clone, Default, PartialEq, Error)]
#[error("{0}")]
pub struct ChildFailed(pub String);

/// A panic inside a library edgeprof calls (tract on a malformed model), contained: its message.
#[derive(Debug, Clone, Default, PartialEq, Error)]
#[error("{0}")]
pub struct Panicked(pub String);

/// What kind of failure ended a job, as a front-end says it and edgeprof's exit code tells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Failure {
    /// What the user asked for cannot be done as asked (exit code 2).
    BadInput,
    /// Stopped on request, with what finished kept (exit code 130).
    Interrupted,
    /// It ran and failed (exit code 1).
    #[default]
    Failed,
}

impl Failure {
    /// The exit code edgeprof ends with for it.
    pub fn exit_code(self) -> u8 {
        match self {
            Failure::BadInput => 2,
            Failure::Interrupted => 130,
            Failure::Failed => 1,
        }
    }
}

/// Why a job failed, as its last event carries it: one sentence, and its kind
/// (`jobs::failure` makes one from any error).
#[derive(Debug, Clone, Default, PartialEq, Error)]
#[error("{message}")]
pub struct JobError {
    pub message: String,
    pub failure: Failure,
}

/// A failed run's sentence (what tests and stand-ins give).
impl From<&str> for JobError {
    fn from(message: &str) -> JobError {
        JobError {
            message: message.to_string(),
            failure: Failure::Failed,
        }
    }
}

macro_rules! from_message {
    ($($t:ident),*) => {$(
        impl From<String> for $t {
            fn from(message: String) -> $t {
                $t(message)
            }
        }
        /// The message, to read as text.
        impl std::ops::Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl From<&str> for $t {
            fn from(message: &str) -> $t {
                $t(message.to_string())
            }
        }
    )*};
}
from_message!(BadInput, Unavailable, ChildFailed, Panicked);

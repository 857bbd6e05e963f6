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

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Kind {
    /// What the user asked for or gave cannot be done as asked.
    BadInput,
    /// This machine lacks what it takes (a profiler, a GPU, a framework).
    Unavailable,
    /// A child process could not be started, ran past its time or failed.
    ChildFailed,
    /// A library edgeprof calls panicked, and the panic was contained.
    Panicked,
    /// Stopped on request, with what finished kept.
    Interrupted,
    /// It ran and failed.
    #[default]
    Failed,
}

impl Kind {
    /// How a front-end ends on it.
    pub fn failure(self) -> Failure {
        match self {
            Kind::BadInput => Failure::BadInput,
            Kind::Interrupted => Failure::Interrupted,
            Kind::Unavailable | Kind::ChildFailed | Kind::Panicked | Kind::Failed => {
                Failure::Failed
            }
        }
    }
}

impl From<Failure> for Kind {
    fn from(failure: Failure) -> Kind {
        match failure {
            Failure::BadInput => Kind::BadInput,
            Failure::Interrupted => Kind::Interrupted,
            Failure::Failed => Kind::Failed,
        }
    }
}

/// The library's error: its kind, decided where it arose, and its one sentence, what was being
/// done first ("cannot load DIR: cannot read DIR/manifest.json: …"). A front-end tells bad
/// input from a failed run by [`Error::kind`], not by looking inside.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{message}")]
pub struct Error {
    kind: Kind,
    message: String,
}

/// A result of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// A failed run's error.
    pub fn failed(message: impl Into<String>) -> Error {
        Error::new(Kind::Failed, message)
    }

    /// `error` as an error of `kind`: its sentence and those of its sources, joined.
    pub fn of(kind: Kind, error: &(dyn std::error::Error + 'static)) -> Error {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Error::new(kind, message)
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// How a front-end ends on it.
    pub fn failure(&self) -> Failure {
        self.kind.failure()
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error, said as part of `what` ("what: the error").
    pub fn context(self, what: impl std::fmt::Display) -> Error {
        Error {
            kind: self.kind,
            message: format!("{what}: {}", self.message),
        }
    }
}

/// A job's last event carries the error's sentence and kind.
impl From<Error> for JobError {
    fn from(error: Error) -> JobError {
        JobError {
            failure: error.failure(),
            message: error.message,
        }
    }
}

/// Says what was being done when an error arose: on a result whose error becomes an [`Error`]
/// (keeping its kind), and on an option (a missing value is a failed run's error).
pub trait Context<T> {
    fn context<C: std::fmt::Display>(self, what: C) -> Result<T>;
    fn with_context<C: std::fmt::Display, F: FnOnce() -> C>(self, what: F) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context<C: std::fmt::Display>(self, what: C) -> Result<T> {
        self.map_err(|e| e.into().context(what))
    }
    fn with_context<C: std::fmt::Display, F: FnOnce() -> C>(self, what: F) -> Result<T> {
        self.map_err(|e| e.into().context(what()))
    }
}

impl<T> Context<T> for Option<T> {
    fn context<C: std::fmt::Display>(self, what: C) -> Result<T> {
        self.ok_or_else(|| Error::failed(what.to_string()))
    }
    fn with_context<C: std::fmt::Display, F: FnOnce() -> C>(self, what: F) -> Result<T> {
        self.ok_or_else(|| Error::failed(what().to_string()))
    }
}

/// Errors of a known kind become [`Error`]s of that kind (`kinds!(Kind::Failed => std::io::Error)`);
/// each module says it for its own error types.
macro_rules! kinds {
    ($kind:expr => $($t:ty),* $(,)?) => {$(
        impl From<$t> for $crate::error::Error {
            fn from(error: $t) -> $crate::error::Error {
                $crate::error::Error::of($kind, &error)
            }
        }
    )*};
}

/// Errors that tell whether the user is at fault (their `is_bad_input()`) become [`Error`]s of
/// kind bad input, or failed.
macro_rules! kinds_by_input {
    ($($t:ty),* $(,)?) => {$(
        impl From<$t> for $crate::error::Error {
            fn from(error: $t) -> $crate::error::Error {
                let kind = if error.is_bad_input() {
                    $crate::error::Kind::BadInput
                } else {
                    $crate::error::Kind::Failed
                };
                $crate::error::Error::of(kind, &error)
            }
        }
    )*};
}

kinds!(Kind::BadInput => BadInput);
kinds!(Kind::Unavailable => Unavailable);
kinds!(Kind::ChildFailed => ChildFailed);
kinds!(Kind::Panicked => Panicked);
kinds!(Kind::Failed =>
    std::io::Error,
    std::fmt::Error,
    std::num::ParseIntError,
    std::num::ParseFloatError,
    std::str::Utf8Error,
    std::string::FromUtf8Error,
    std::time::SystemTimeError,
    serde_json::Error,
    toml::de::Error,
    toml::ser::Error,
    nix::errno::Errno,
);

/// Returns an [`Error`] made of a sentence (`bail!("cannot {x}")`, of kind failed) or of an
/// error of any kind edgeprof knows (`bail!(BadInput(…))`).
macro_rules! bail {
    ($msg:literal $(,)?) => {
        return Err($crate::error::Error::failed(format!($msg)))
    };
    ($fmt:literal, $($arg:tt)*) => {
        return Err($crate::error::Error::failed(format!($fmt, $($arg)*)))
    };
    ($err:expr $(,)?) => {
        return Err($crate::error::Error::from($err))
    };
}

/// A failed run's [`Error`] from a sentence (`failed!("cannot {x}")`).
macro_rules! failed {
    ($($arg:tt)*) => {
        $crate::error::Error::failed(format!($($arg)*))
    };
}

pub(crate) use {bail, failed, kinds, kinds_by_input};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_kind_and_says_the_outer_step_first() {
        let e: Result<()> = Err(BadInput::from("no such model").into());
        let e = match e.context("cannot load the run") {
            Err(e) => e,
            Ok(()) => panic!("an error became a success"),
        };
        assert_eq!(e.kind(), Kind::BadInput);
        assert_eq!(e.to_string(), "cannot load the run: no such model");
    }

    #[test]
    fn an_error_with_sources_says_them_all() {
        #[derive(Debug, Error)]
        #[error("cannot lock x")]
        struct Lock(#[source] std::io::Error);
        let e = Error::of(Kind::Failed, &Lock(std::io::Error::other("busy")));
        assert_eq!(e.message(), "cannot lock x: busy");
    }
}

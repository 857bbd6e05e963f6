//! How a worker run went, as the runner tells it and the results keep it: what it has done so
//! far, what it cost the machine, and why it failed.

use crate::collect::proc::ProcSample;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a worker run failed.
#[derive(Debug, Clone, Error, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunFailure {
    #[error("cannot start the worker {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error("the worker reported an error: {message}")]
    Reported {
        message: String,
        stderr_tail: String,
    },
    #[error("the worker was killed by signal {signal}{}", crash_hint(*signal))]
    Signal { signal: i32, stderr_tail: String },
    #[error("the worker exited with status {code}")]
    Exit { code: i32, stderr_tail: String },
    #[error("the worker broke the protocol: {error}")]
    Protocol { error: String, stderr_tail: String },
    #[error("the worker did not finish within the {seconds} s timeout and was killed")]
    Timeout { seconds: f64, stderr_tail: String },
    #[error("the run was interrupted")]
    Cancelled,
    #[error("cannot start this condition: {reason}")]
    Prepare { reason: String },
    #[error(
        "the engine built {built} parameters where the zoo's {model} has {expected}: it did not \
         build the same model"
    )]
    ParameterMismatch {
        model: String,
        built: u64,
        expected: u64,
    },
}

impl RunFailure {
    /// The worker's last stderr lines, when there are any.
    pub fn stderr_tail(&self) -> &str {
        match self {
            RunFailure::Reported { stderr_tail, .. }
            | RunFailure::Signal { stderr_tail, .. }
            | RunFailure::Exit { stderr_tail, .. }
            | RunFailure::Protocol { stderr_tail, .. }
            | RunFailure::Timeout { stderr_tail, .. } => stderr_tail,
            RunFailure::Spawn { .. }
            | RunFailure::Prepare { .. }
            | RunFailure::Cancelled
            | RunFailure::ParameterMismatch { .. } => "",
        }
    }
}

fn crash_hint(signal: i32) -> &'static str {
    match signal {
        9 => " (SIGKILL: out of memory, or killed from outside)",
        11 => " (SIGSEGV: the engine crashed)",
        6 => " (SIGABRT: the engine aborted)",
        _ => "",
    }
}

/// What a running worker has done so far, for live display.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    /// The engine has loaded the model.
    Ready,
    /// The worker's times now reach this repeat (counting from 0): it has begun, or, for a
    /// worker that reports a repeat at once, ended. Sent before the `Timed` of the same record.
    Repeat(usize),
    /// Timed iterations reported so far.
    Timed(usize),
    Sample(ProcSample),
}

/// What the run cost the machine, from the samples and from the reaped child's rusage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    pub wall_s: f64,
    /// The peak resident memory: the larger of the kernel's two accounts below.
    pub peak_rss_bytes: Option<u64>,
    /// VmHWM as last sampled from /proc while the worker ran.
    pub vmhwm_bytes: Option<u64>,
    /// ru_maxrss of the reaped worker (wait4), which also covers the moments between samples.
    pub rusage_maxrss_bytes: Option<u64>,
    pub user_s: Option<f64>,
    pub system_s: Option<f64>,
    /// (user + system) / wall over the whole run, in % of one core.
    pub cpu_mean_pct: Option<f64>,
    /// The busiest sampling interval, in % of one core.
    pub cpu_max_pct: Option<f64>,
    pub samples: usize,
}

impl Resources {
    /// Adds another worker run of the same condition (one that added repeats): times add up,
    /// peaks take the larger, the mean CPU is over both.
    pub fn absorb(&mut self, other: &Resources) {
        fn max<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b > a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        fn sum(a: Option<f64>, b: Option<f64>) -> Option<f64> {
            Some(a? + b?)
        }
        self.wall_s += other.wall_s;
        self.peak_rss_bytes = max(self.peak_rss_bytes, other.peak_rss_bytes);
        self.vmhwm_bytes = max(self.vmhwm_bytes, other.vmhwm_bytes);
        self.rusage_maxrss_bytes = max(self.rusage_maxrss_bytes, other.rusage_maxrss_bytes);
        self.user_s = sum(self.user_s, other.user_s);
        self.system_s = sum(self.system_s, other.system_s);
        self.cpu_mean_pct = match (self.user_s, self.system_s) {
            (Some(u), Some(s)) if self.wall_s > 0.0 => Some((u + s) / self.wall_s * 100.0),
            _ => None,
        };
        self.cpu_max_pct = max(self.cpu_max_pct, other.cpu_max_pct);
        self.samples += other.samples;
    }
}

crate::error::kinds!(crate::error::Kind::Failed => RunFailure);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_name_their_likely_cause() {
        assert!(crash_hint(9).contains("out of memory"));
        assert!(crash_hint(11).contains("crashed"));
        assert_eq!(crash_hint(15), "");
    }
}

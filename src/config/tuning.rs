//! What the tuner optimises and the option values it searches, as a config names them. The
//! cost each objective computes from a measurement lives with the tuner.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the tuner minimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Mean latency of one call (a batch).
    Latency,
    /// 99th-percentile latency of one call.
    P99,
    /// Samples per second (minimised as milliseconds per sample).
    Throughput,
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Objective::Latency => "latency",
            Objective::P99 => "p99",
            Objective::Throughput => "throughput",
        })
    }
}

impl std::str::FromStr for Objective {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "latency" => Ok(Objective::Latency),
            "p99" => Ok(Objective::P99),
            "throughput" => Ok(Objective::Throughput),
            _ => Err(format!(
                "unknown objective {s:?}; use latency, p99 or throughput"
            )),
        }
    }
}

impl Objective {
    /// The unit of the tuner's cost (`Objective::cost` in `tune`).
    pub fn unit(self) -> &'static str {
        match self {
            Objective::Throughput => "ms/sample",
            _ => "ms",
        }
    }
}

/// The options one engine's candidates take, each with the values to try.
pub type OptionSpace = BTreeMap<String, Vec<serde_json::Value>>;

//! The vocabulary the runner, the results and the analyses share, below all of them: a
//! condition ([`condition`]), what a worker is asked and answers (this file), how a worker run
//! went ([`outcome`]), how a condition's repeats came to be ([`repetition`]), and where a
//! condition's files go.
//!
//! The worker protocol: what a worker process reads and writes.
//!
//! A worker reads one [`WorkerRequest`] as JSON on stdin and writes JSON lines on stdout, each an
//! object with a `type`:
//!
//! | type | fields | when |
//! |---|---|---|
//! | `ready` | `init_ms`, optional `engine`, `engine_version`, `device`, `threads`, `parameters` | once, first |
//! | `first` | `latency_ms` | optional: the first inference |
//! | `warmup` | `latencies_ms` (list) | optional: the untimed iterations |
//! | `iteration` | `latency_ms`, optional `repeat` (default 0) | one per timed iteration, or … |
//! | `iterations` | `latencies_ms` (list), optional `repeat` | … a batch of them |
//! | `progress` | `done`, optional `repeat` | optional: iterations done so far in a repeat under way, about once a second |
//! | `counters` | `iterations`, `line_bytes`, `counts`, `unavailable` | optional: hardware events over the timed iterations |
//! | `summary` | optional `note` | once, last |
//! | `error` | `message` | instead of the rest, when the run fails |
//!
//! Lines that are not JSON objects of a known type are a protocol error; so are records out of
//! order (timing before `ready`, anything after `summary`) and output that ends without a
//! `summary` or `error`. [`Collector`] checks all of that while gathering the run.

pub mod condition;
pub mod outcome;
pub mod repetition;

pub use condition::{resolve_threads, Condition, Skipped};
pub use outcome::{Resources, RunFailure, WorkerEvent};
pub use repetition::Repetition;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What a worker is asked to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRequest {
    pub condition: Condition,
    /// Untimed iterations before timing…
    pub warmup: usize,
    /// … continued until at least this many seconds of warm-up have passed.
    #[serde(default)]
    pub warmup_seconds: f64,
    /// Timed iterations per repeat…
    pub iterations: usize,
    /// … continued until each repeat has lasted at least this many seconds.
    #[serde(default)]
    pub min_duration_s: f64,
    pub repeats: usize,
    pub seed: u64,
    pub classes: usize,
    /// Count hardware events over the timed iterations and report them in a `counters` record
    /// (built-in engines; workers that cannot simply omit the record).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counters: bool,
    /// The model file an external framework loads (edgeprof's ONNX export of a zoo model, or
    /// the user's ONNX file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_file: Option<std::path::PathBuf>,
    /// The input to feed, as little-endian f32 in (batch, channels, height, width) order:
    /// photographs where the sample images are set up, else the values the built-in engines
    /// make from `seed` (which they then read from here too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_file: Option<std::path::PathBuf>,
    /// What the input holds, in words, for the record (the worker does not read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_note: Option<String>,
    /// Where to write the first inference's output (little-endian f32), for comparing engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file: Option<std::path::PathBuf>,
    /// The framework's own options (`[frameworks.NAME] options` in the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Map<String, serde_json::Value>>,
    /// After the timed repeats, run this many inferences under the framework's own op profiler
    /// and report each node's median time in a `layers` record (harnesses whose framework has
    /// one; 0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub layer_runs: usize,
    /// An ONNX file's inputs by name, each with the `.npy` file of the values to feed: every
    /// input of the model. When given, `input_file` is not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<FedInput>,
    /// Where to write every output of the first inference, as `output_0.npy`,
    /// `output_1.npy`, … in the model's output order (`models::npy::output_file_name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs_dir: Option<std::path::PathBuf>,
    /// Batches to calibrate an int8 quantization on (a framework that quantizes in its
    /// harness, PyTorch): each batch the `.npy` files of its inputs (a nameless one: the
    /// model's image input), seeded as every engine's input is, from seeds past `seed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibration: Vec<Vec<FedInput>>,
}

/// One input of an ONNX file fed by name: the values in a `.npy` file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FedInput {
    pub name: String,
    pub file: std::path::PathBuf,
}

impl WorkerRequest {
    /// A request for `condition`: one timed iteration with no warm-up, the inputs made from
    /// `seed`, nothing optional asked for; callers set what they need over it.
    pub fn new(condition: Condition, seed: u64, classes: usize) -> WorkerRequest {
        WorkerRequest {
            condition,
            warmup: 0,
            warmup_seconds: 0.0,
            iterations: 1,
            min_duration_s: 0.0,
            repeats: 1,
            seed,
            classes,
            counters: false,
            model_file: None,
            input_file: None,
            input_note: None,
            output_file: None,
            options: None,
            layer_runs: 0,
            inputs: Vec::new(),
            outputs_dir: None,
            calibration: Vec::new(),
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One node of a framework's op profile: the node's name (an ONNX node's, for frameworks that
/// run ONNX files), its operator and its median time over the profiled runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTime {
    pub name: String,
    #[serde(default)]
    pub op: String,
    pub ms: f64,
}

fn default_line() -> u64 {
    64
}

/// One line of worker output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkerMessage {
    Ready {
        init_ms: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        engine: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        engine_version: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        threads: Option<usize>,
        /// Trainable parameters of the model the engine built; checked against the zoo's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parameters: Option<u64>,
    },
    First {
        latency_ms: f64,
    },
    Warmup {
        latencies_ms: Vec<f64>,
    },
    Iteration {
        latency_ms: f64,
        #[serde(default)]
        repeat: usize,
    },
    Iterations {
        latencies_ms: Vec<f64>,
        #[serde(default)]
        repeat: usize,
    },
    /// How many timed iterations repeat `repeat` has done so far, sent about once a second
    /// during a long repeat so that progress moves; its latencies come in its `iterations`
    /// record.
    Progress {
        done: usize,
        #[serde(default)]
        repeat: usize,
    },
    /// Hardware event counts over all timed iterations (after the last `iterations` record).
    Counters {
        iterations: usize,
        #[serde(default = "default_line")]
        line_bytes: u64,
        #[serde(default)]
        counts: Vec<crate::collect::perf::Count>,
        #[serde(default)]
        unavailable: Vec<String>,
    },
    /// The framework's op profile of `runs` inferences (after the timed repeats), when the
    /// request asked for one.
    Layers {
        runs: usize,
        nodes: Vec<NodeTime>,
    },
    Summary {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    Error {
        message: String,
    },
}

impl WorkerMessage {
    /// The message as one JSON line (no newline).
    pub fn to_line(&self) -> String {
        // Serialising these plain structs cannot fail; an empty object is the fallback.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ProtocolError {
    #[error("line {line}: not a protocol record ({reason}): {text}")]
    Malformed {
        line: usize,
        reason: String,
        text: String,
    },
    #[error("line {line}: {record} before ready")]
    BeforeReady { line: usize, record: &'static str },
    #[error("line {line}: output continues after the summary")]
    AfterSummary { line: usize },
    #[error("line {line}: a second ready record")]
    DuplicateReady { line: usize },
    #[error("line {line}: latency {value} ms is not a finite, non-negative number")]
    BadLatency { line: usize, value: f64 },
    #[error("output ended without a summary or error record")]
    Unfinished,
}

/// A run as reported by its worker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerRun {
    pub init_ms: f64,
    pub engine: Option<String>,
    pub engine_version: Option<String>,
    pub device: Option<String>,
    pub threads: Option<usize>,
    /// Trainable parameters the engine reported building.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<u64>,
    pub first_inference_ms: Option<f64>,
    pub warmup_ms: Vec<f64>,
    /// Timed iterations, one list per repeat.
    pub repeats: Vec<Vec<f64>>,
    /// The worker's own error message, when it reported one.
    pub error: Option<String>,
    /// What the worker said about how it ran (e.g. a framework's execution providers or mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Hardware event counts over the timed iterations, when they were asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::collect::perf::CounterReport>,
    /// The framework's op profile, when it was asked for and the framework has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<NodeTime>,
    /// What the timed input was made of (photographs, or seeded values), as the run prepared
    /// it; the accuracy of a lower precision is measured on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
}

/// Checks worker output line by line and gathers the run.
#[derive(Debug, Default)]
pub struct Collector {
    run: WorkerRun,
    ready: bool,
    finished: bool,
    lines: usize,
    /// The repeat under way and the iterations it said it has done.
    in_progress: Option<(usize, usize)>,
    /// How many repeats from the first are whole: one reported in one record, or one before a
    /// later repeat's first latency.
    whole: usize,
}

/// Most characters of an offending line quoted back in an error.
const QUOTE_CHARS: usize = 120;

fn check_latency(line: usize, value: f64) -> Result<f64, ProtocolError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(ProtocolError::BadLatency { line, value })
    }
}

impl Collector {
    /// Feeds one line of output; blank lines are ignored.
    pub fn feed(&mut self, text: &str) -> Result<(), ProtocolError> {
        self.lines += 1;
        let line = self.lines;
        if text.trim().is_empty() {
            return Ok(());
        }
        if self.finished {
            return Err(ProtocolError::AfterSummary { line });
        }
        let message: WorkerMessage =
            serde_json::from_str(text).map_err(|e| ProtocolError::Malformed {
                line,
                reason: e.to_string(),
                text: text.chars().take(QUOTE_CHARS).collect(),
            })?;
        let before_ready = |record| ProtocolError::BeforeReady { line, record };
        match message {
            WorkerMessage::Ready {
                init_ms,
                engine,
                engine_version,
                device,
                threads,
                parameters,
            } => {
                if self.ready {
                    return Err(ProtocolError::DuplicateReady { line });
                }
                self.ready = true;
                self.run.init_ms = check_latency(line, init_ms)?;
                self.run.engine = engine;
                self.run.engine_version = engine_version;
                self.run.device = device;
                self.run.threads = threads;
                self.run.parameters = parameters;
            }
            WorkerMessage::Error { message } => {
                self.run.error = Some(message);
                self.finished = true;
            }
            _ if !self.ready => {
                let record = match message {
                    WorkerMessage::First { .. } => "first",
                    WorkerMessage::Warmup { .. } => "warmup",
                    WorkerMessage::Summary { .. } => "summary",
                    WorkerMessage::Counters { .. } => "counters",
                    WorkerMessage::Progress { .. } => "progress",
                    WorkerMessage::Layers { .. } => "layers",
                    _ => "iteration",
                };
                return Err(before_ready(record));
            }
            WorkerMessage::First { latency_ms } => {
                self.run.first_inference_ms = Some(check_latency(line, latency_ms)?);
            }
            WorkerMessage::Warmup { latencies_ms } => {
                for v in latencies_ms {
                    self.run.warmup_ms.push(check_latency(line, v)?);
                }
            }
            WorkerMessage::Iteration { latency_ms, repeat } => {
                self.push(repeat, &[latency_ms], line)?;
                self.whole = self.whole.max(repeat);
            }
            WorkerMessage::Iterations {
                latencies_ms,
                repeat,
            } => {
                self.push(repeat, &latencies_ms, line)?;
                self.whole = self.whole.max(repeat + 1);
            }
            WorkerMessage::Progress { done, repeat } => {
                // Only for a repeat whose latencies have not come yet.
                let reported = self.run.repeats.get(repeat).is_some_and(|r| !r.is_empty());
                if repeat > 10_000 || reported {
                    return Err(ProtocolError::Malformed {
                        line,
                        reason: format!(
                            "progress of repeat {repeat}, which is over or out of range"
                        ),
                        text: String::new(),
                    });
                }
                self.in_progress = Some((repeat, done));
            }
            WorkerMessage::Counters {
                iterations,
                line_bytes,
                counts,
                unavailable,
            } => {
                if counts.iter().any(|c| !c.value.is_finite() || c.value < 0.0) {
                    return Err(ProtocolError::Malformed {
                        line,
                        reason: "a counter value is not a finite, non-negative number".into(),
                        text: String::new(),
                    });
                }
                self.run.counters = Some(crate::collect::perf::CounterReport {
                    iterations,
                    line_bytes,
                    counts,
                    unavailable,
                });
            }
            WorkerMessage::Layers { runs, nodes } => {
                if runs == 0 || nodes.iter().any(|n| !n.ms.is_finite() || n.ms < 0.0) {
                    return Err(ProtocolError::Malformed {
                        line,
                        reason: "a layers record without runs, or with a time that is not a \
                                 finite, non-negative number"
                            .into(),
                        text: String::new(),
                    });
                }
                self.run.layers = nodes;
            }
            WorkerMessage::Summary { note } => {
                self.run.note = note;
                self.finished = true;
            }
        }
        Ok(())
    }

    fn push(&mut self, repeat: usize, values: &[f64], line: usize) -> Result<(), ProtocolError> {
        if repeat > 10_000 {
            return Err(ProtocolError::Malformed {
                line,
                reason: format!("repeat index {repeat} is out of range"),
                text: String::new(),
            });
        }
        if self.run.repeats.len() <= repeat {
            self.run.repeats.resize(repeat + 1, Vec::new());
        }
        for &v in values {
            let v = check_latency(line, v)?;
            self.run.repeats[repeat].push(v);
        }
        Ok(())
    }

    /// Whether `ready` has arrived, how many timed iterations so far, and how many repeats
    /// they span (the highest repeat index reported, plus one).
    pub fn progress(&self) -> (bool, usize, usize) {
        let reported: usize = self.run.repeats.iter().map(Vec::len).sum();
        // A repeat under way counts what it said it has done until its latencies arrive.
        let under_way = match self.in_progress {
            Some((repeat, done)) if self.run.repeats.get(repeat).is_none_or(Vec::is_empty) => done,
            _ => 0,
        };
        (self.ready, reported + under_way, self.run.repeats.len())
    }

    /// What a run stopped part-way (Ctrl-C) had finished: its load, warm-up and whole repeats,
    /// without the counts taken over all of them. None before one repeat was whole, or after
    /// the worker reported an error.
    pub fn whole_repeats(&self) -> Option<WorkerRun> {
        if !self.ready || self.run.error.is_some() || self.whole == 0 {
            return None;
        }
        let mut run = self.run.clone();
        run.repeats.truncate(self.whole);
        if run.repeats.iter().any(Vec::is_empty) {
            return None;
        }
        run.counters = None;
        run.note = None;
        Some(run)
    }

    /// Ends the output: the run, or why it is incomplete.
    pub fn finish(self) -> Result<WorkerRun, ProtocolError> {
        if self.finished {
            Ok(self.run)
        } else {
            Err(ProtocolError::Unfinished)
        }
    }
}

/// The folder of a results directory that holds the conditions' first outputs.
pub const OUTPUTS: &str = "outputs";

/// A file name for a condition's id (which holds '/' and, for ONNX files, a path).
pub fn file_stem(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Where a condition's first output is kept in results directory `dir`.
pub fn output_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(OUTPUTS).join(format!("{}.f32", file_stem(id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects a whole output at once.
    fn collect(output: &str) -> Result<WorkerRun, ProtocolError> {
        let mut collector = Collector::default();
        for line in output.lines() {
            collector.feed(line)?;
        }
        collector.finish()
    }

    #[test]
    fn progress_counts_a_repeat_under_way_until_its_latencies_come() {
        let mut c = Collector::default();
        let feed = |c: &mut Collector, line: &str| match c.feed(line) {
            Ok(()) => {}
            Err(e) => panic!("{line}: {e}"),
        };
        // Before ready it is out of order, like any timing record.
        assert!(matches!(
            c.feed("{\"type\":\"progress\",\"done\":3}"),
            Err(ProtocolError::BeforeReady { .. })
        ));
        feed(&mut c, "{\"type\":\"ready\",\"init_ms\":1.0}");
        feed(&mut c, "{\"type\":\"progress\",\"done\":700}");
        assert_eq!(c.progress(), (true, 700, 0));
        feed(&mut c, "{\"type\":\"progress\",\"done\":1400}");
        assert_eq!(c.progress(), (true, 1400, 0));
        // The repeat's latencies replace what it said.
        feed(
            &mut c,
            "{\"type\":\"iterations\",\"latencies_ms\":[1.0,1.0,1.0]}",
        );
        assert_eq!(c.progress(), (true, 3, 1));
        feed(&mut c, "{\"type\":\"progress\",\"done\":5,\"repeat\":1}");
        assert_eq!(c.progress(), (true, 8, 1));
        // Progress of a repeat that has reported is a protocol error.
        assert!(c
            .feed("{\"type\":\"progress\",\"done\":9,\"repeat\":0}")
            .is_err());
    }

    #[test]
    fn a_complete_run_with_single_and_batched_records() {
        let out = "\
{\"type\":\"ready\",\"init_ms\":12.5,\"engine\":\"mine\",\"engine_version\":\"1.0\"}
{\"type\":\"first\",\"latency_ms\":9.0}
{\"type\":\"warmup\",\"latencies_ms\":[5.0,4.0]}

{\"type\":\"iteration\",\"latency_ms\":3.0}
{\"type\":\"iteration\",\"latency_ms\":3.5,\"repeat\":0}
{\"type\":\"iterations\",\"latencies_ms\":[2.0,2.5],\"repeat\":1}
{\"type\":\"summary\"}
";
        let run = match collect(out) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(run.init_ms, 12.5);
        assert_eq!(run.engine_version.as_deref(), Some("1.0"));
        assert_eq!(run.first_inference_ms, Some(9.0));
        assert_eq!(run.warmup_ms, vec![5.0, 4.0]);
        assert_eq!(run.repeats, vec![vec![3.0, 3.5], vec![2.0, 2.5]]);
        assert_eq!(run.error, None);
    }

    #[test]
    fn a_counters_record_is_kept_and_checked() {
        let good = "{\"type\":\"ready\",\"init_ms\":1}
{\"type\":\"iterations\",\"latencies_ms\":[2.0]}
{\"type\":\"counters\",\"iterations\":1,\"counts\":[{\"event\":\"LL read misses\",\"measures\":\"last_level_misses\",\"value\":640.0,\"running\":1.0}],\"unavailable\":[\"FLOPs: no event\"]}
{\"type\":\"summary\"}";
        let run = match collect(good) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let Some(c) = run.counters else {
            panic!("counters lost")
        };
        assert_eq!(c.iterations, 1);
        assert_eq!(c.counts[0].value, 640.0);
        assert_eq!(c.derive().dram_bytes, Some(640.0 * 64.0));
        let negative = good.replace("640.0", "-1.0");
        assert!(matches!(
            collect(&negative),
            Err(ProtocolError::Malformed { line: 3, .. })
        ));
        let early = "{\"type\":\"counters\",\"iterations\":1}";
        assert!(matches!(
            collect(early),
            Err(ProtocolError::BeforeReady {
                record: "counters",
                ..
            })
        ));
    }

    #[test]
    fn a_layers_record_keeps_the_framework_s_node_times_and_is_checked() {
        let good = "{\"type\":\"ready\",\"init_ms\":1}
{\"type\":\"iterations\",\"latencies_ms\":[2.0]}
{\"type\":\"layers\",\"runs\":5,\"nodes\":[{\"name\":\"features.0.1\",\"op\":\"Conv\",\"ms\":0.026},{\"name\":\"ReorderOutput\",\"ms\":0.003}]}
{\"type\":\"summary\"}";
        let run = match collect(good) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(run.layers.len(), 2);
        assert_eq!(run.layers[0].name, "features.0.1");
        assert_eq!(run.layers[1].op, "");
        for bad in [
            good.replace("0.026", "-1"),
            good.replace("\"runs\":5", "\"runs\":0"),
        ] {
            assert!(matches!(
                collect(&bad),
                Err(ProtocolError::Malformed { line: 3, .. })
            ));
        }
        // Asked for in the request only when wanted: a request without it reads as none.
        let request: Result<WorkerRequest, _> = serde_json::from_str(
            "{\"condition\":{\"id\":\"x\",\"engine\":\"tract\",\"model\":{\"kind\":\"zoo\",\"name\":\"m\"},\"input\":\"3x8x8\",\"batch\":1,\"threads\":1,\"device\":\"cpu\"},\"warmup\":0,\"iterations\":1,\"repeats\":1,\"seed\":1,\"classes\":10}",
        );
        assert!(request.is_ok_and(|r| r.layer_runs == 0));
    }

    #[test]
    fn an_error_record_ends_the_run_with_its_message() {
        let out = "{\"type\":\"ready\",\"init_ms\":1}\n{\"type\":\"error\",\"message\":\"out of memory\"}\n";
        let Ok(run) = collect(out) else {
            panic!("rejected")
        };
        assert_eq!(run.error.as_deref(), Some("out of memory"));
        let Ok(run) = collect("{\"type\":\"error\",\"message\":\"no model\"}") else {
            panic!("rejected")
        };
        assert_eq!(run.error.as_deref(), Some("no model"));
    }

    #[test]
    fn broken_outputs_are_protocol_errors() {
        type Expect = fn(&ProtocolError) -> bool;
        let cases: [(&str, Expect); 8] = [
            ("hello world", |e| matches!(e, ProtocolError::Malformed { line: 1, .. })),
            ("{\"type\":\"ready\",\"init_ms\":1}\n{\"type\":\"bogus\"}", |e| {
                matches!(e, ProtocolError::Malformed { line: 2, .. })
            }),
            ("{\"type\":\"ready\",\"init_ms\":1,\"colour\":2}", |e| {
                matches!(e, ProtocolError::Malformed { .. })
            }),
            ("{\"type\":\"iteration\",\"latency_ms\":1}", |e| {
                matches!(e, ProtocolError::BeforeReady { record: "iteration", .. })
            }),
            ("{\"type\":\"ready\",\"init_ms\":1}\n{\"type\":\"ready\",\"init_ms\":1}", |e| {
                matches!(e, ProtocolError::DuplicateReady { line: 2 })
            }),
            ("{\"type\":\"ready\",\"init_ms\":1}\n{\"type\":\"iteration\",\"latency_ms\":-1}", |e| {
                matches!(e, ProtocolError::BadLatency { line: 2, .. })
            }),
            ("{\"type\":\"ready\",\"init_ms\":1}\n{\"type\":\"summary\"}\n{\"type\":\"summary\"}", |e| {
                matches!(e, ProtocolError::AfterSummary { line: 3 })
            }),
            ("{\"type\":\"ready\",\"init_ms\":1}\n{\"type\":\"iteration\",\"latency_ms\":2}", |e| {
                *e == ProtocolError::Unfinished
            }),
        ];
        for (out, expected) in cases {
            match collect(out) {
                Ok(run) => panic!("accepted {out:?}: {run:?}"),
                Err(e) => assert!(expected(&e), "{out:?} gave {e}"),
            }
        }
    }

    #[test]
    fn messages_round_trip_as_single_lines() {
        let m = WorkerMessage::Iterations {
            latencies_ms: vec![1.5, 2.0],
            repeat: 3,
        };
        let line = m.to_line();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<WorkerMessage>(&line).ok(), Some(m));
    }
}

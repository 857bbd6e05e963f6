//! `edgeprof worker` and `edgeprof bench --isolated` through the binary.

mod common;

use common::*;
use predicates::prelude::*;

const REQUEST: &str = r#"{"condition":{"id":"tract/resnet34/3x32x32/b2/t1/cpu","engine":"tract",
"model":{"kind":"zoo","name":"resnet34"},"input":"3x32x32","batch":2,"threads":1,"device":"cpu"},
"warmup":2,"iterations":3,"repeats":2,"seed":1,"classes":10}"#;

#[test]
fn worker_speaks_the_protocol_in_order() {
    let out = edgeprof()
        .arg("worker")
        .write_stdin(REQUEST)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out).into_owned();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| match serde_json::from_str(l) {
            Ok(v) => v,
            Err(e) => panic!("not JSON: {l:?}: {e}"),
        })
        .collect();
    let types: Vec<&str> = records.iter().filter_map(|r| r["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "ready",
            "first",
            "warmup",
            "iterations",
            "iterations",
            "summary"
        ]
    );
    assert_eq!(records[0]["engine"], "tract");
    assert_eq!(records[0]["threads"], 1);
    assert!(records[0]["init_ms"].as_f64().unwrap_or(-1.0) > 0.0);
    assert_eq!(records[2]["latencies_ms"].as_array().map(Vec::len), Some(2));
    assert_eq!(records[3]["latencies_ms"].as_array().map(Vec::len), Some(3));
    assert_eq!(records[4]["repeat"], 1);
}

/// A long repeat says how far it has got, about once a second, before its latencies: a
/// 2000-iteration repeat (at least 3 s of it) shows moving progress within 2 s.
#[test]
fn a_long_repeat_reports_its_progress_every_second() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let request = REQUEST
        .replace(
            "\"iterations\":3",
            "\"iterations\":2000,\"min_duration_s\":3.0",
        )
        .replace("\"repeats\":2", "\"repeats\":1");
    let mut child = match std::process::Command::new(env!("CARGO_BIN_EXE_edgeprof"))
        .arg("worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(request.as_bytes());
    }
    let Some(stdout) = child.stdout.take() else {
        panic!("no stdout")
    };
    let mut warmed = None;
    let mut progress = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        match v["type"].as_str() {
            Some("warmup") => warmed = Some(Instant::now()),
            Some("progress") => {
                let after = warmed.map(|t| t.elapsed()).unwrap_or_default();
                progress.push((v["done"].as_u64().unwrap_or(0), after));
            }
            Some("iterations") => break,
            _ => {}
        }
    }
    let _ = child.wait();
    assert!(progress.len() >= 2, "{progress:?}");
    let (first, after) = progress[0];
    assert!(first > 0 && after < Duration::from_secs(2), "{progress:?}");
    assert!(progress.windows(2).all(|w| w[1].0 > w[0].0), "{progress:?}");
}

#[test]
fn worker_reports_a_bad_request_as_an_error_record() {
    edgeprof()
        .arg("worker")
        .write_stdin("{\"condition\": 5}")
        .assert()
        .code(2)
        .stdout(predicate::str::starts_with(
            "{\"type\":\"error\",\"message\":\"the worker request is not valid JSON",
        ));
    let gpu = REQUEST.replace("\"device\":\"cpu\"", "\"device\":\"gpu:0\"");
    edgeprof()
        .arg("worker")
        .write_stdin(gpu)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("CPU only"));
}

#[test]
fn isolated_bench_measures_in_a_worker_process() {
    let report = json_of(&[
        "bench",
        "--model",
        "mobilenet_v2",
        "--input",
        "3x32x32",
        "--threads",
        "1",
        "--warmup",
        "1",
        "--iterations",
        "3",
        "--repeats",
        "2",
        "--isolated",
        "--json",
    ]);
    assert_eq!(report["samples_ms"].as_array().map(Vec::len), Some(6));
    assert_eq!(report["repeat_summary"]["repeats"], 2);
    assert_eq!(report["warmup_iterations"], 1);
    assert!(report["analytic"]["flops"].as_u64().unwrap_or(0) > 0);
    assert_bad_input(
        &[
            "bench",
            "--model",
            "mobilenet_v2",
            "--isolated",
            "--profile",
        ],
        "leave out --isolated",
    );
}

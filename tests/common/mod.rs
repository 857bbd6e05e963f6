//! Helpers shared by the integration tests.
#![allow(dead_code)]

use assert_cmd::Command;

/// The edgeprof binary under test.
pub fn edgeprof() -> Command {
    match Command::cargo_bin("edgeprof") {
        Ok(c) => c,
        Err(e) => panic!("binary not built: {e}"),
    }
}

/// A file under tests/fixtures/onnx.
pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/onnx/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A fresh temporary directory.
pub fn temp_dir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("cannot create a temporary directory: {e}"),
    }
}

/// Runs edgeprof and parses its stdout as JSON.
pub fn json_of(args: &[&str]) -> serde_json::Value {
    let out = edgeprof()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    match serde_json::from_slice(&out) {
        Ok(v) => v,
        Err(e) => panic!("{args:?} printed no JSON: {e}"),
    }
}

/// A failure must be exit code 2 with one error line on stderr naming the problem, no panic.
pub fn assert_bad_input(args: &[&str], needle: &str) {
    let assert = edgeprof().args(args).assert().code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
    let error_lines = stderr.lines().filter(|l| l.contains("error")).count();
    assert_eq!(
        error_lines, 1,
        "{args:?} printed several error lines: {stderr}"
    );
}

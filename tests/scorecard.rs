//! `edgeprof scorecard` and `edgeprof frameworks`: the three phases over the results of
//! `configs/default.toml` (a real run kept in tests/fixtures/results/default), snapshot-tested
//! as text, Markdown and JSON.

mod common;

use common::{edgeprof, read, temp_dir};
use std::path::Path;

const RESULTS: &str = "tests/fixtures/results/default";

/// Runs edgeprof from the crate's root with an empty data directory (no refreshed figures).
fn run(data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = edgeprof()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("EDGEPROF_DATA_DIR", data)
        .args(args)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_fixture_is_a_run_of_the_default_config() {
    let manifest = read(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(RESULTS)
            .join("manifest.json"),
    );
    let manifest: serde_json::Value = match serde_json::from_str(&manifest) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let config = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/default.toml"));
    assert_eq!(
        manifest["config_text"].as_str(),
        Some(config.as_str()),
        "configs/default.toml changed: run it again (edgeprof run configs/default.toml) and keep \
         manifest.json and runs.jsonl in {RESULTS}"
    );
}

#[test]
fn the_scorecard_of_the_default_results_renders_as_text_markdown_and_json() {
    let data = temp_dir();
    for format in ["text", "markdown", "json"] {
        let (ok, out, err) = run(
            data.path(),
            &[
                "scorecard",
                RESULTS,
                "--no-probe",
                "--width",
                "100",
                "--format",
                format,
            ],
        );
        assert!(ok, "{format}: {err}");
        insta::assert_snapshot!(format!("scorecard_default_{format}"), out);
    }
}

#[test]
fn the_json_joins_every_phase_and_the_runtime_ranks_add_up() {
    let data = temp_dir();
    let (ok, out, err) = run(
        data.path(),
        &["scorecard", RESULTS, "--no-probe", "--format", "json"],
    );
    assert!(ok, "{err}");
    let card: serde_json::Value = match serde_json::from_str(&out) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let frameworks = card["frameworks"].as_array().cloned().unwrap_or_default();
    assert_eq!(frameworks.len(), 10);
    assert_eq!(card["results"]["conditions"], 48);
    let mut fastest = 0;
    for f in &frameworks {
        assert!(f["card"]["development"]["api"]["python"]["value"].is_boolean());
        assert!(f["card"]["deployment"]["hardware"]["value"].is_array());
        match f["card"]["engine"].as_str() {
            Some(_) => {
                let runtime = &f["runtime"];
                assert_eq!(runtime["ok"], 8, "{}", f["card"]["name"]);
                assert_eq!(runtime["shared_workloads"], 8);
                assert!(runtime["geomean_vs_fastest"].as_f64().unwrap_or(0.0) >= 1.0);
                fastest += runtime["fastest_in"].as_u64().unwrap_or(0);
            }
            None => assert!(f["runtime"].is_null()),
        }
    }
    // Each of the 8 workloads has exactly one fastest framework.
    assert_eq!(fastest, 8);
}

#[test]
fn markdown_goes_to_a_file_and_frameworks_can_be_picked() {
    let data = temp_dir();
    let out_file = data.path().join("scorecard.md");
    let out_arg = out_file.display().to_string();
    let (ok, _, err) = run(
        data.path(),
        &[
            "scorecard",
            RESULTS,
            "--format",
            "markdown",
            "--framework",
            "tract",
            "--framework",
            "onnx-runtime",
            "--output",
            &out_arg,
        ],
    );
    // "onnx-runtime" is not a name: the error lists the names and nothing is written.
    assert!(!ok);
    assert!(
        err.contains("no framework called \"onnx-runtime\""),
        "{err}"
    );
    assert!(err.contains("onnxruntime"), "{err}");
    assert!(!out_file.exists());
    let (ok, _, err) = run(
        data.path(),
        &[
            "scorecard",
            RESULTS,
            "--format",
            "markdown",
            "--framework",
            "tract",
            "--framework",
            "onnxruntime",
            "--output",
            &out_arg,
        ],
    );
    assert!(ok, "{err}");
    let text = read(&out_file);
    assert!(text.contains("## tract"), "{text}");
    assert!(text.contains("## ONNX Runtime (`onnxruntime`)"), "{text}");
    assert!(!text.contains("## PyTorch"), "{text}");
    // The probe ran (no --no-probe): tract is built in here, whatever else is installed.
    assert!(text.contains("| here | state | built in "), "{text}");
}

#[test]
fn frameworks_list_and_show_read_the_shipped_facts() {
    let data = temp_dir();
    let (ok, out, err) = run(data.path(), &["frameworks", "list", "--json"]);
    assert!(ok, "{err}");
    let cards: serde_json::Value = match serde_json::from_str(&out) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(cards.as_array().map(Vec::len), Some(10));
    let (ok, out, err) = run(data.path(), &["frameworks", "show", "tensorrt"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("TensorRT (tensorrt) — https://github.com/NVIDIA/TensorRT"),
        "{out}"
    );
    assert!(
        out.contains("API completeness: one point for each of"),
        "{out}"
    );
    assert!(out.contains("edgeprof does not benchmark it yet"), "{out}");
    let out = edgeprof()
        .env("EDGEPROF_DATA_DIR", data.path())
        .args(["frameworks", "show", "caffe"])
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no framework called \"caffe\"; known: tract, candle"),
        "{err}"
    );
}

#[test]
fn probe_reports_the_built_in_engines_with_their_versions() {
    let data = temp_dir();
    let (ok, out, err) = run(
        data.path(),
        &["frameworks", "probe", "tract", "candle", "--json"],
    );
    assert!(ok, "{err}");
    let found: serde_json::Value = match serde_json::from_str(&out) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(found[0]["framework"], "tract");
    assert_eq!(found[0]["state"], "built-in");
    assert!(found[0]["version"]
        .as_str()
        .is_some_and(|v| v.starts_with("0.")));
    assert!(found[1]["devices"][0]
        .as_str()
        .is_some_and(|d| d.starts_with("CPU")));
    assert!(err.contains("[1/2] probing tract"), "{err}");
}

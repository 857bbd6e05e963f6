//! Per-condition telemetry curves from fixture telemetry: each condition's GPU load, GPU memory
//! and the machine's CPU load over its own time, a panel (SVG) or a block (terminal) per
//! framework, read from the GPU the condition ran on.

mod common;

use common::*;
use std::path::Path;

/// A copy of fixture results directory `name` (the report writes its summaries into it).
fn fixture_dir(tmp: &Path, name: &str) -> std::path::PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results")
        .join(name);
    let dir = tmp.join(name);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("{e}");
    }
    for file in [
        "manifest.json",
        "runs.jsonl",
        "samples.jsonl",
        "telemetry.jsonl",
    ] {
        if from.join(file).exists() {
            if let Err(e) = std::fs::copy(from.join(file), dir.join(file)) {
                panic!("{file}: {e}");
            }
        }
    }
    dir
}

#[test]
fn every_condition_has_its_gpu_curves_in_svg_and_in_the_terminal() {
    let tmp = temp_dir();
    let dir = fixture_dir(tmp.path(), "gpu");
    let charts = tmp.path().join("charts");
    let out = edgeprof()
        .env("EDGEPROF_CACHE_DIR", tmp.path().join("no-cache"))
        .arg("report")
        .arg(&dir)
        .arg("--svg-dir")
        .arg(&charts)
        .assert()
        .success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let block = |title: &str| -> String {
        let from = said.find(title).map_or(said.len(), |i| i);
        said[from..]
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let load = block("GPU load per condition");
    // Grouped by framework, one line per condition; the gpu:1 condition reads the second GPU.
    let onnx = load.find("  onnxruntime").unwrap_or(usize::MAX);
    let torch = load.find("  pytorch").unwrap_or(usize::MAX);
    assert!(onnx < torch && torch < load.len(), "{load}");
    assert_eq!(
        load.lines().filter(|l| l.contains("mean")).count(),
        4,
        "{load}"
    );
    assert!(
        load.lines()
            .any(|l| l.contains("gpu:1") && l.contains("mean 80 %, peak 90 %")),
        "{load}"
    );
    assert!(load.lines().all(|l| l.chars().count() <= 80), "{load}");
    let memory = block("GPU memory per condition");
    assert!(
        memory
            .lines()
            .any(|l| l.contains("gpu:1") && l.contains("peak 133 MiB")),
        "{memory}"
    );
    assert!(said.contains("machine CPU load per condition"), "{said}");
    for (file, needles) in [
        (
            "gpu_per_condition.svg",
            ["GPU load per condition", "onnxruntime", "pytorch"],
        ),
        (
            "gpu_memory_per_condition.svg",
            [
                "GPU memory per condition",
                "mobilenet_v2/3x224x224/b1/t1/gpu:0",
                "MiB",
            ],
        ),
        (
            "cpu_per_condition.svg",
            [
                "Machine CPU load per condition",
                "shufflenet_v2_x0_5/3x224x224/b1/t1/gpu:1",
                "%",
            ],
        ),
    ] {
        let svg = read(&charts.join(file));
        assert!(svg.starts_with("<svg"), "{file}");
        for needle in needles {
            assert!(svg.contains(needle), "{file} lacks {needle}");
        }
    }
}

#[test]
fn without_gpu_figures_there_are_no_per_condition_charts() {
    let tmp = temp_dir();
    let from = fixture_dir(tmp.path(), "small");
    let charts = tmp.path().join("charts");
    let out = edgeprof()
        .env("EDGEPROF_CACHE_DIR", tmp.path().join("no-cache"))
        .arg("report")
        .arg(&from)
        .arg("--svg-dir")
        .arg(&charts)
        .assert()
        .success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(!said.contains("per condition"), "{said}");
    assert!(charts.join("latency.svg").exists());
    assert!(!charts.join("gpu_per_condition.svg").exists());
}

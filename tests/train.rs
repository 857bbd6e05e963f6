//! `edgeprof train`: the scaling study's orchestration — the synthetic CIFAR-10 set, one launch
//! per node count, the harness's lines read back, the ratios, the table and the charts — with
//! a stand-in for PyTorch's launcher that answers as the harness does (the real one is
//! gigabytes: scripts/train-scaling.sh runs it). The harness itself is checked for the Python
//! grammar here.

mod common;

use common::{edgeprof, read, temp_dir, write};
use std::path::Path;

/// A stand-in for `python -m torch.distributed.run … --nproc-per-node K harness --epochs E …`:
/// K ranks take 12/K seconds, accuracy 0.5 (validation 0.4) whatever K; `fail_at` ranks fail.
fn fake_python(dir: &Path, fail_at: Option<usize>) -> String {
    let path = dir.join("fake-python");
    let fail = fail_at.map(|k| k.to_string()).unwrap_or_default();
    write(
        &path,
        &format!(
            r#"#!/bin/sh
[ "$1" = "-m" ] && [ "$2" = "torch.distributed.run" ] || {{ echo "not the launcher: $*" >&2; exit 2; }}
k=""; e=""; data=""
while [ $# -gt 0 ]; do
    case "$1" in
        --nproc-per-node) k=$2; shift ;;
        --epochs) e=$2; shift ;;
        --data) data=$2; shift ;;
    esac
    shift
done
[ -f "$data/data_batch_1.bin" ] && [ -f "$data/test_batch.bin" ] || {{ echo "no CIFAR files in $data" >&2; exit 3; }}
if [ "$k" = "{fail}" ]; then echo "RuntimeError: Connection closed by peer (rank 3)" >&2; exit 1; fi
echo "[W socket] launcher chatter"
i=1
while [ $i -le $e ]; do
    echo "{{\"epoch\": $i, \"train_acc\": 0.5, \"loss\": 1.1, \"val_acc\": 0.4, \"elapsed_s\": $i.0}}"
    i=$((i + 1))
done
echo "{{\"done\": true, \"wall_s\": $((12 / k)).0, \"world\": $k, \"torch\": \"fake\"}}"
"#
        ),
    );
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status();
    path.display().to_string()
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = match edgeprof().args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn results_dir(dir: &Path) -> std::path::PathBuf {
    match std::fs::read_dir(dir)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
    {
        Some(e) => e.path(),
        None => panic!("no results directory under {}", dir.display()),
    }
}

#[test]
fn one_launch_per_node_count_gives_the_scaling_table_and_its_charts() {
    let dir = temp_dir();
    let python = fake_python(dir.path(), None);
    let out_dir = dir.path().join("out");
    let out_arg = out_dir.display().to_string();
    let (code, out, err) = run(&[
        "train",
        "--nodes",
        "1,2,4",
        "--epochs",
        "2",
        "--synthetic",
        "100",
        "--python",
        &python,
        "--output",
        &out_arg,
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let value: serde_json::Value = match serde_json::from_str(&out) {
        Ok(v) => v,
        Err(e) => panic!("{e}: {out}"),
    };
    let table = value["scaling"].as_array().cloned().unwrap_or_default();
    let speedups: Vec<f64> = table.iter().filter_map(|s| s["speedup"].as_f64()).collect();
    assert_eq!(speedups, [1.0, 2.0, 4.0]);
    assert!(table
        .iter()
        .all(|s| s["acc_imp"] == 1.0 && s["val_acc_imp"] == 1.0));
    assert_eq!(value["runs"][2]["epochs"].as_array().map(Vec::len), Some(2));
    assert!(
        err.contains("[4 node(s)] epoch 2/2: train acc 0.500, val acc 0.400"),
        "{err}"
    );
    let results = results_dir(&out_dir);
    for file in [
        "scaling.json",
        "ddp.py",
        "charts/speedup.svg",
        "charts/accuracy.svg",
    ] {
        assert!(results.join(file).is_file(), "{file}");
    }
    assert!(read(&results.join("charts/speedup.svg")).contains("speedup over one node"));
    // The synthetic set: 100 training and 20 test records of 3073 bytes.
    let bytes = |f: &str| {
        std::fs::metadata(results.join("cifar-synthetic").join(f))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    let train: u64 = (1..=5).map(|i| bytes(&format!("data_batch_{i}.bin"))).sum();
    assert_eq!((train, bytes("test_batch.bin")), (100 * 3073, 20 * 3073));

    // The text form: the table and the charts.
    let out_arg = dir.path().join("out2").display().to_string();
    let (code, out, err) = run(&[
        "train",
        "--nodes",
        "1,2",
        "--epochs",
        "1",
        "--synthetic",
        "50",
        "--python",
        &python,
        "--output",
        &out_arg,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("val-acc-imp"), "{out}");
    assert!(out.contains("speedup over one node"), "{out}");
}

#[test]
fn a_failed_node_count_is_reported_and_the_others_still_make_the_table() {
    let dir = temp_dir();
    let python = fake_python(dir.path(), Some(4));
    let out_arg = dir.path().join("out").display().to_string();
    let (code, out, err) = run(&[
        "train",
        "--nodes",
        "1,2,4",
        "--epochs",
        "1",
        "--synthetic",
        "30",
        "--python",
        &python,
        "--output",
        &out_arg,
        "--json",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("[4 node(s)] failed: the launcher ended"),
        "{err}"
    );
    assert!(
        err.contains("RuntimeError: Connection closed by peer (rank 3)"),
        "{err}"
    );
    assert!(err.contains("training failed on 4 node(s)"), "{err}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    assert_eq!(value["scaling"].as_array().map(Vec::len), Some(2));
    assert_eq!(value["failures"][0][0], 4);
    // Bad counts are refused before anything runs.
    let (code, _, err) = run(&["train", "--nodes", "0,2", "--python", &python]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--nodes takes counts from 1"), "{err}");
}

/// The harness parses under the machine's Python (no torch needed to compile it).
#[test]
fn the_harness_is_valid_python() {
    let dir = temp_dir();
    let harness = dir.path().join("ddp.py");
    write(&harness, include_str!("../src/train/ddp.py"));
    let status = std::process::Command::new("python3")
        .args(["-m", "py_compile"])
        .arg(&harness)
        .status();
    assert!(status.is_ok_and(|s| s.success()), "ddp.py does not compile");
}

//! `edgeprof train`: the scaling study's orchestration — the synthetic CIFAR-10 set, one launch
//! per node count, the harness's lines read back, the ratios, the table and the charts — with
//! a stand-in for PyTorch's launcher that answers as the harness does (the real one is
//! gigabytes: scripts/train-scaling.sh runs it). The harness itself is checked for the Python
//! grammar here.

mod common;

use common::{edgeprof, read, temp_dir, write};
use std::path::Path;

/// A stand-in for `python -m torch.distributed.run --nnodes K --node-rank R … harness --epochs E
/// …`, one per member: K members take 12/K seconds, accuracy 0.5 (validation 0.4) whatever K;
/// rank 0 reports, as the harness does; with `fail_at` K members, the last one fails.
fn fake_python(dir: &Path, fail_at: Option<usize>) -> String {
    let path = dir.join("fake-python");
    let fail = fail_at.map(|k| k.to_string()).unwrap_or_default();
    write(
        &path,
        &format!(
            r#"#!/bin/sh
[ "$1" = "-m" ] && [ "$2" = "torch.distributed.run" ] || {{ echo "not the launcher: $*" >&2; exit 2; }}
k=""; r=""; e=""; data=""
[ -n "$OMP_NUM_THREADS" ] || {{ echo "no OMP_NUM_THREADS" >&2; exit 4; }}
while [ $# -gt 0 ]; do
    case "$1" in
        --nnodes) k=$2; shift ;;
        --node-rank) r=$2; shift ;;
        --epochs) e=$2; shift ;;
        --data) data=$2; shift ;;
    esac
    shift
done
[ -f "$data/data_batch_1.bin" ] && [ -f "$data/test_batch.bin" ] || {{ echo "no CIFAR files in $data" >&2; exit 3; }}
if [ "$k" = "{fail}" ] && [ "$r" = "$((k - 1))" ]; then echo "RuntimeError: Connection closed by peer (rank 0)" >&2; exit 1; fi
[ "$r" = "0" ] || exit 0
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
        "charts/speedup.svg",
        "charts/improvement.svg",
        "charts/accuracy.svg",
        "nodes/4-local-3.json",
    ] {
        assert!(results.join(file).is_file(), "{file}");
    }
    assert!(read(&results.join("charts/speedup.svg")).contains("speedup over one node"));
    // Each member wrote the harness and the same data in its own working directory.
    let work = results.join("work/local-3/train");
    let study = results_dir(&work);
    assert!(study.join("ddp.py").is_file());
    assert_eq!(
        std::fs::read(study.join("cifar-synthetic/test_batch.bin")).ok(),
        std::fs::read(results.join("cifar-synthetic/test_batch.bin")).ok()
    );
    let record: serde_json::Value =
        serde_json::from_str(&read(&results.join("nodes/4-local-3.json"))).unwrap_or_default();
    assert_eq!(record["rank"], 3);
    assert!(record["fingerprint"]["arch"].is_string(), "{record}");
    assert_eq!(record["end"]["ok"], true, "{record}");
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
        err.contains("[4 node(s)] failed: local-3: the launcher ended"),
        "{err}"
    );
    assert!(
        err.contains("RuntimeError: Connection closed by peer (rank 0)"),
        "{err}"
    );
    assert!(
        err.contains("training failed for cluster size(s) 4"),
        "{err}"
    );
    let value: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    assert_eq!(value["scaling"].as_array().map(Vec::len), Some(2));
    assert_eq!(value["failures"][0][0], 4);
    // Bad counts are refused before anything runs.
    let (code, _, err) = run(&["train", "--nodes", "0,2", "--python", &python]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--sizes takes cluster sizes from 1"), "{err}");
}

/// The harnesses parse under the machine's Python (no framework needed to compile them).
#[test]
fn the_harnesses_are_valid_python() {
    let dir = temp_dir();
    for (name, text) in [
        ("ddp.py", include_str!("../src/train/ddp.py")),
        ("tf_mwms.py", include_str!("../src/train/tf_mwms.py")),
    ] {
        let harness = dir.path().join(name);
        write(&harness, text);
        let status = std::process::Command::new("python3")
            .args(["-m", "py_compile"])
            .arg(&harness)
            .status();
        assert!(status.is_ok_and(|s| s.success()), "{name} does not compile");
    }
}

/// A stand-in launcher that writes its pid to `pid_file`, reports one epoch at once and ends.
fn quick_python(dir: &Path, pid_file: &Path) -> String {
    let path = dir.join("quick-python");
    write(
        &path,
        &format!(
            r#"#!/bin/sh
echo $$ > "{pid}.part" && mv "{pid}.part" "{pid}"
echo '{{"epoch": 1, "train_acc": 0.5, "loss": 1.1, "val_acc": 0.4, "elapsed_s": 0.1}}'
echo '{{"done": true, "wall_s": 0.1, "world": 1, "torch": "fake"}}'
"#,
            pid = pid_file.display()
        ),
    );
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status();
    path.display().to_string()
}

/// After the launcher ends and is reaped its pid is free, and the kernel may give it to any new
/// process. Here the very next process gets it (root may choose the next pid through
/// /proc/sys/kernel/ns_last_pid): the time limit, reached later, must not signal that one.
#[test]
fn the_time_limit_never_signals_the_launchers_pid_once_it_is_reaped() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let wait_for = |what: &str, done: &mut dyn FnMut() -> bool| {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // Another process may take the pid between choosing it and starting the bystander: try again.
    for _ in 0..3 {
        let dir = temp_dir();
        let pid_file = dir.path().join("launcher.pid");
        let python = quick_python(dir.path(), &pid_file);
        let trainer = Command::new(env!("CARGO_BIN_EXE_edgeprof"))
            .args([
                "train",
                "--nodes",
                "1",
                "--epochs",
                "1",
                "--synthetic",
                "10",
            ])
            .args(["--timeout-s", "2", "--python", &python, "--output"])
            .arg(dir.path().join("out"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let trainer = match trainer {
            Ok(c) => c,
            Err(e) => panic!("cannot run edgeprof: {e}"),
        };
        let mut pid = 0u32;
        wait_for("the launcher never started", &mut || {
            pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0);
            pid > 1
        });
        wait_for("the launcher was never reaped", &mut || {
            !Path::new(&format!("/proc/{pid}")).exists()
        });
        if let Err(e) = std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()) {
            panic!("this test chooses the next pid, which needs root: {e}");
        }
        let mut bystander = match Command::new("sleep").arg("30").spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot start sleep: {e}"),
        };
        let out = match trainer.wait_with_output() {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        };
        let fate = bystander.try_wait();
        let _ = bystander.kill();
        let _ = bystander.wait();
        if bystander.id() != pid {
            continue;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            matches!(fate, Ok(None)),
            "pid {pid}, reaped then reused by another process, was signalled: {fate:?}"
        );
        return;
    }
    panic!("the launcher's pid went to another process three times");
}

/// At the time limit the launcher is stopped and the run reported as too long, even where a
/// rank left behind keeps the launcher's output open.
#[test]
fn a_launch_past_its_time_limit_is_stopped_and_reported_even_if_a_rank_holds_its_output() {
    let dir = temp_dir();
    let stray = dir.path().join("stray.pid");
    let path = dir.path().join("slow-python");
    write(
        &path,
        &format!(
            "#!/bin/sh\nsleep 60 &\necho $! > '{}'\nwait\n",
            stray.display()
        ),
    );
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status();
    let out_arg = dir.path().join("out").display().to_string();
    let start = std::time::Instant::now();
    let (code, _, err) = run(&[
        "train",
        "--nodes",
        "1",
        "--epochs",
        "1",
        "--synthetic",
        "10",
        "--timeout-s",
        "1",
        "--python",
        &path.display().to_string(),
        "--output",
        &out_arg,
    ]);
    let took = start.elapsed();
    if let Some(pid) = std::fs::read_to_string(&stray)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
    {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("[1 node(s)] failed: local-0: it did not finish within 1 s"),
        "{err}"
    );
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
}

/// Ctrl-C (SIGINT) during a study stops the launch in progress at once, with the ranks it
/// started, skips the rest, keeps what finished in `scaling.json`, and exits 130.
#[test]
fn ctrl_c_stops_the_launch_in_progress_and_keeps_what_finished() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let dir = temp_dir();
    let rank = dir.path().join("rank.pid");
    let path = dir.path().join("stuck-python");
    // One rank finishes at once; with two, a rank reports its first epoch and then hangs.
    write(
        &path,
        &format!(
            r#"#!/bin/sh
k=""; r=""
while [ $# -gt 0 ]; do
    [ "$1" = "--nnodes" ] && k=$2
    [ "$1" = "--node-rank" ] && r=$2
    shift
done
if [ "$k" = "1" ]; then
    echo '{{"epoch": 1, "train_acc": 0.5, "loss": 1.1, "val_acc": 0.4, "elapsed_s": 0.1}}'
    echo '{{"epoch": 2, "train_acc": 0.6, "loss": 0.9, "val_acc": 0.5, "elapsed_s": 0.2}}'
    echo '{{"done": true, "wall_s": 0.2, "world": 1, "torch": "fake"}}'
    exit 0
fi
sleep 60 &
[ "$r" = "0" ] || {{ wait; exit 0; }}
echo $! > '{}'
echo '{{"epoch": 1, "train_acc": 0.5, "loss": 1.1, "val_acc": 0.4, "elapsed_s": 0.1}}'
wait
"#,
            rank.display()
        ),
    );
    let _ = Command::new("chmod").arg("+x").arg(&path).status();
    let out_dir = dir.path().join("out");
    let mut child = match Command::new(env!("CARGO_BIN_EXE_edgeprof"))
        .args(["train", "--nodes", "1,2,4", "--epochs", "2"])
        .args(["--synthetic", "10", "--json", "--python"])
        .arg(&path)
        .arg("--output")
        .arg(&out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    let Some(stderr) = child.stderr.take() else {
        panic!("no stderr")
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut said = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("[2 node(s)] epoch 1/2") {
            break;
        }
    }
    assert!(said.contains("[2 node(s)] epoch 1/2"), "{said}");
    let start = Instant::now();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let took = start.elapsed();
    let said = said + &rest.join("\n");
    eprintln!("Ctrl-C to the end: {took:?}");
    assert_eq!(out.status.code(), Some(130), "{said}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(said.contains("[2 node(s)] cancelled"), "{said}");
    assert!(
        said.contains("training cancelled; what finished is in"),
        "{said}"
    );
    assert!(!said.contains("[4 node(s)]"), "{said}");
    // The rank the launcher left behind went with it.
    let pid = read(&rank).trim().to_string();
    let gone = || {
        // Gone, or killed and not yet reaped by whoever inherited it.
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    };
    let waited = Instant::now();
    while !gone() && waited.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone(), "rank {pid} still runs");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(value["runs"].as_array().map(Vec::len), Some(1), "{value}");
    assert_eq!(value["cancelled"], serde_json::json!([2, 4]));
    let stored = read(&results_dir(&out_dir).join("scaling.json"));
    assert!(stored.contains("\"cancelled\""), "{stored}");
}

/// A config's `[train]` is a task `edgeprof run` carries out: the study, not the matrix.
#[test]
fn a_config_with_a_train_section_runs_the_study_through_run() {
    let dir = temp_dir();
    let python = fake_python(dir.path(), None);
    let out_dir = dir.path().join("out");
    let config = dir.path().join("study.toml");
    write(
        &config,
        &format!(
            "name = \"study\"\n[output]\ndir = \"{}\"\n[train]\nsizes = [1, 2]\nepochs = 1\n\
             synthetic = 30\npython = \"{python}\"\n",
            out_dir.display()
        ),
    );
    let (code, out, err) = run(&["run", &config.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("val-acc-imp"), "{out}");
    assert!(err.contains("[2 node(s)] epoch 1/1"), "{err}");
    let results = results_dir(&out_dir);
    let value: serde_json::Value =
        serde_json::from_str(&read(&results.join("scaling.json"))).unwrap_or_default();
    assert_eq!(
        value["scaling"].as_array().map(Vec::len),
        Some(2),
        "{value}"
    );
    assert_eq!(value["framework"], "pytorch");
}

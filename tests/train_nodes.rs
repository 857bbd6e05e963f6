//! `edgeprof train` across nodes: three OpenSSH servers on loopback act as three boards, each
//! with its own working directory, and train together for cluster sizes 1, 2 and 3 with the
//! rendezvous on 127.0.0.1. TensorFlow trains for real (tensorflow-cpu, set up on first use in
//! `target/test-venv-tf`); PyTorch's launcher, gigabytes, is a stand-in that checks the exact
//! arguments and environment each rank gets. And a node killed mid-training: its size fails,
//! naming it, the other sizes complete, and nothing is left running on any node.
//! Needs OpenSSH's server (`apt-get install openssh-server`; `.ci/run` installs it).

mod common;

use common::sshd::{keys, node, sshd, Sshd};
use common::{read, temp_dir, write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Three loopback "boards", a b and c, and a config naming them; their working directories are
/// `DIR/work-NAME`.
fn boards(dir: &Path) -> (Vec<Sshd>, PathBuf) {
    let keys = keys(dir);
    let mut servers = Vec::new();
    let mut nodes = Vec::new();
    for name in ["a", "b", "c"] {
        let server = sshd(dir, &keys, name);
        let work = dir.join(format!("work-{name}")).display().to_string();
        nodes.push(node(
            name,
            server.port,
            &keys,
            env!("CARGO_BIN_EXE_edgeprof"),
            &work,
        ));
        servers.push(server);
    }
    let mut top = toml::Table::new();
    top.insert("name".into(), "boards".into());
    top.insert("nodes".into(), toml::Value::Array(nodes));
    let config = dir.join("boards.toml");
    write(&config, &toml::to_string(&top).unwrap_or_default());
    (servers, config)
}

/// A port with the next two free on 127.0.0.1 (rank r listens on PORT+r).
fn free_ports() -> u16 {
    for _ in 0..50 {
        let Ok(first) = std::net::TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(port) = first.local_addr().map(|a| a.port()) else {
            continue;
        };
        if port < 60000
            && (1..3).all(|k| std::net::TcpListener::bind(("127.0.0.1", port + k)).is_ok())
        {
            return port;
        }
    }
    panic!("no three free ports in a row");
}

fn executable(path: &Path, text: &str) -> String {
    write(path, text);
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(path)
        .status();
    path.display().to_string()
}

/// `edgeprof train` with `args`: exit code, stdout, stderr.
fn train(args: &[&str]) -> (Option<i32>, String, String) {
    let out = match common::edgeprof().arg("train").args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(text: &str) -> serde_json::Value {
    match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => panic!("not JSON ({e}): {text}"),
    }
}

/// `edgeprof train --json` on the boards of `config` with `python`, results under `out`, ports
/// from `port`, and `args`: exit code, the JSON (Null when there is none), stderr.
fn train_on(
    config: &Path,
    python: &str,
    out: &Path,
    port: u16,
    args: &[&str],
) -> (Option<i32>, serde_json::Value, String) {
    let config = config.display().to_string();
    let out = out.display().to_string();
    let port = port.to_string();
    let mut all = vec![
        "--config", &config, "--python", python, "--output", &out, "--port", &port, "--json",
    ];
    all.extend_from_slice(args);
    let (code, stdout, err) = train(&all);
    (code, serde_json::from_str(&stdout).unwrap_or_default(), err)
}

/// The cluster sizes of a study's table.
fn sizes_of(value: &serde_json::Value) -> Vec<u64> {
    value["scaling"]
        .as_array()
        .map(|t| t.iter().filter_map(|s| s["nodes"].as_u64()).collect())
        .unwrap_or_default()
}

/// A study's directory, and its name (which names its files on the nodes).
fn study_of(value: &serde_json::Value) -> (PathBuf, String) {
    let dir = PathBuf::from(value["dir"].as_str().unwrap_or(""));
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (dir, name)
}

/// A stand-in for the Python that runs a rank: it writes its arguments, one per line, and its
/// environment's OMP_NUM_THREADS and TF_CONFIG beside the data (`launch-K-R.txt`, in the node's
/// working directory) and its pids (`pids-K-R.txt`); rank 0 reports `epochs` epochs and its end
/// as the harnesses do. Rank `kill_rank` of size `kill_size` kills its node's edgeprof
/// (SIGKILL) once rank 0 has reported an epoch, and waits; rank 0 then waits for it forever.
fn stand_in(dir: &Path, kill: Option<(usize, usize)>) -> String {
    let (kill_size, kill_rank) = kill.unwrap_or((0, 0));
    executable(
        &dir.join("stand-in-python"),
        &format!(
            r#"#!/bin/sh
k=""; r=""; e=""; data=""; harness=""
[ "$1" = "-m" ] && k="" || harness=$1
for a in "$@"; do
    case "$prev" in
        --nnodes) k=$a ;;
        --node-rank) r=$a ;;
        --epochs) e=$a ;;
        --data) data=$a ;;
    esac
    prev=$a
    case "$a" in *.py) harness=$a ;; esac
done
if [ -z "$k" ]; then
    # TensorFlow: the cluster from TF_CONFIG.
    k=$(printf '%s' "$TF_CONFIG" | grep -o ':[0-9][0-9]*"' | wc -l)
    r=$(printf '%s' "$TF_CONFIG" | sed 's/.*"index":\([0-9]*\).*/\1/')
fi
log="$data/../launch-$k-$r.txt"
for a in "$@"; do echo "$a"; done > "$log"
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS" >> "$log"
echo "TF_CONFIG=$TF_CONFIG" >> "$log"
[ -f "$harness" ] || {{ echo "no harness at $harness" >&2; exit 3; }}
sleep 30 &
echo "$$ $!" > "$data/../pids-$k-$r.txt"
if [ "$k" = "{kill_size}" ] && [ "$r" = "{kill_rank}" ]; then
    while ! grep -q epoch "$data/../../../../progress-$k" 2>/dev/null; do sleep 0.1; done
    kill -9 $PPID
    wait
fi
if [ "$r" != "0" ]; then kill $! 2>/dev/null; exit 0; fi
i=1
while [ $i -le $e ]; do
    echo "{{\"epoch\": $i, \"train_acc\": 0.$((4 + i)), \"loss\": 1.1, \"val_acc\": 0.$((3 + i)), \"elapsed_s\": $i.0}}"
    echo epoch > "$data/../../../../progress-$k"
    i=$((i + 1))
done
if [ "$k" = "{kill_size}" ]; then wait; fi
kill $! 2>/dev/null
echo "{{\"done\": true, \"wall_s\": $((12 / k)).0, \"world\": $k, \"framework\": \"stand-in\"}}"
"#
        ),
    )
}

/// The study's directory on node `name`: `work-NAME/train/STUDY`.
fn node_study(dir: &Path, name: &str) -> PathBuf {
    let train = dir.join(format!("work-{name}/train"));
    match std::fs::read_dir(&train)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
    {
        Some(e) => e.path(),
        None => panic!("node {name} has no study under {}", train.display()),
    }
}

#[test]
fn torchrun_on_three_boards_gets_the_multi_node_arguments_and_environment_on_each() {
    let dir = temp_dir();
    let (_servers, config) = boards(dir.path());
    let python = stand_in(dir.path(), None);
    let port = free_ports();
    let out = dir.path().join("out");
    let (code, value, err) = train_on(
        &config,
        &python,
        &out,
        port,
        &[
            "--sizes",
            "1,2,3",
            "--epochs",
            "2",
            "--synthetic",
            "60",
            "--threads",
            "1",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(sizes_of(&value), [1, 2, 3], "{value}");
    assert!(err.contains("on a, b, c …"), "{err}");
    assert!(err.contains("[3 node(s)] c started its rank:"), "{err}");
    let (results, study) = study_of(&value);
    for (rank, name) in ["a", "b", "c"].iter().enumerate() {
        let on_node = node_study(dir.path(), name);
        let data = on_node.join("cifar-synthetic");
        let harness = on_node.join("ddp.py");
        assert!(harness.is_file(), "{}", harness.display());
        let said = read(&on_node.join(format!("launch-3-{rank}.txt")));
        let expected = [
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "3",
            "--node-rank",
            &rank.to_string(),
            "--nproc-per-node",
            "1",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            &format!("127.0.0.1:{port}"),
            "--rdzv-id",
            &format!("{study}-3"),
            "--rdzv-conf",
            if rank == 0 { "is_host=1" } else { "is_host=0" },
            &harness.display().to_string(),
            "--data",
            &data.display().to_string(),
            "--model",
            "cnn",
            "--epochs",
            "2",
            "--batch",
            "32",
            "--lr",
            "0.01",
            "--seed",
            "1",
            "--threads",
            "1",
            "OMP_NUM_THREADS=1",
            "TF_CONFIG=",
        ]
        .join("\n");
        assert_eq!(said.trim_end(), expected, "node {name}");
        // Each node's record: its device, and its samples while it trained.
        let record = json(&read(&results.join(format!("nodes/3-{name}.json"))));
        assert_eq!(record["rank"], rank);
        assert!(record["fingerprint"]["cpus_available"].as_u64() >= Some(1));
        assert!(record["end"]["samples"]
            .as_array()
            .is_some_and(|s| !s.is_empty()));
    }

    // TensorFlow's workers on the same path: the cluster and each one's index in TF_CONFIG.
    let (code, value, err) = train_on(
        &config,
        &python,
        &out,
        port,
        &[
            "--framework",
            "tensorflow",
            "--sizes",
            "2",
            "--epochs",
            "1",
            "--synthetic",
            "60",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let on_b = dir.path().join("work-b/train").join(study_of(&value).1);
    let said = read(&on_b.join("launch-2-1.txt"));
    assert!(said.starts_with(&format!("{}\n--data\n", on_b.join("tf_mwms.py").display())));
    assert!(
        said.contains(&format!(
            "TF_CONFIG={{\"cluster\":{{\"worker\":[\"127.0.0.1:{port}\",\"127.0.0.1:{}\"]}},\
             \"task\":{{\"index\":1,\"type\":\"worker\"}}}}",
            port + 1
        )),
        "{said}"
    );
}

/// The Python with tensorflow-cpu (hundreds of MB from PyPI, once): `$EDGEPROF_TEST_TF_PYTHON`,
/// else `target/test-venv-tf`, an environment of its own so that its numpy never meets the
/// onnxruntime tests'.
fn tf_python() -> PathBuf {
    common::test_python_in(
        "test-venv-tf",
        "EDGEPROF_TEST_TF_PYTHON",
        "import tensorflow",
        &["tensorflow-cpu"],
    )
}

#[test]
fn three_boards_train_a_cnn_with_tensorflow_for_real() {
    let python = tf_python().display().to_string();
    let dir = temp_dir();
    let (_servers, config) = boards(dir.path());
    let out = dir.path().join("out");
    let start = Instant::now();
    let (code, value, err) = train_on(
        &config,
        &python,
        &out,
        free_ports(),
        &[
            "--framework",
            "tensorflow",
            "--sizes",
            "1,2,3",
            "--epochs",
            "2",
            "--synthetic",
            "600",
            "--lr",
            "0.05",
            "--threads",
            "1",
            "--timeout-s",
            "600",
        ],
    );
    eprintln!("{err}");
    eprintln!("three sizes trained in {:?}", start.elapsed());
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(sizes_of(&value), [1, 2, 3], "{value}");
    let table = value["scaling"].as_array().cloned().unwrap_or_default();
    let (dir_of, _) = study_of(&value);
    for run in value["runs"].as_array().cloned().unwrap_or_default() {
        let k = run["nodes"].as_u64().unwrap_or(0);
        let acc: Vec<f64> = run["epochs"]
            .as_array()
            .map(|e| e.iter().filter_map(|e| e["train_acc"].as_f64()).collect())
            .unwrap_or_default();
        let val: Vec<f64> = run["epochs"]
            .as_array()
            .map(|e| e.iter().filter_map(|e| e["val_acc"].as_f64()).collect())
            .unwrap_or_default();
        eprintln!("size {k}: train acc {acc:?}, val acc {val:?}");
        assert_eq!(acc.len(), 2, "{run}");
        // Real figures from a real training: between chance and one, and rising.
        assert!(
            acc.iter().chain(&val).all(|a| (0.0..=1.0).contains(a)),
            "{run}"
        );
        assert!(
            acc[1] > acc[0],
            "size {k}: training accuracy did not rise: {run}"
        );
        assert!(
            run["framework"]
                .as_str()
                .is_some_and(|f| f.starts_with("tensorflow ")),
            "{run}"
        );
        for name in ["a", "b", "c"].iter().take(k as usize) {
            let record = json(&read(&dir_of.join(format!("nodes/{k}-{name}.json"))));
            assert_eq!(record["end"]["ok"], true, "{record}");
            assert!(record["fingerprint"]["arch"].is_string());
        }
    }
    // Ranks that talk to each other move bytes over loopback, and the table says how many.
    let link: Vec<f64> = table
        .iter()
        .filter_map(|s| s["link_mb_s"].as_f64())
        .collect();
    assert!(
        link.len() == 3 && link[1] > 0.0 && link[2] > 0.0,
        "{table:?}"
    );
}

/// Whether a process is gone (or ended and waiting for its parent to reap it).
fn gone(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_node_killed_mid_training_fails_its_size_and_leaves_nothing_running() {
    let dir = temp_dir();
    let (_servers, config) = boards(dir.path());
    // Size 3, rank 2 (node c): its edgeprof is killed once rank 0 reported its first epoch;
    // rank 0 then waits for it, as a real rank would wait for a dead peer.
    let python = stand_in(dir.path(), Some((3, 2)));
    let out = dir.path().join("out");
    let start = Instant::now();
    let (code, value, err) = train_on(
        &config,
        &python,
        &out,
        free_ports(),
        &["--sizes", "1,3,2", "--epochs", "2", "--synthetic", "60"],
    );
    let took = start.elapsed();
    assert_eq!(code, Some(1), "{err}");
    assert!(took < Duration::from_secs(60), "took {took:?}: {err}");
    assert!(
        err.contains("[3 node(s)] failed: c: its stream ended"),
        "{err}"
    );
    assert!(
        err.contains("training failed for cluster size(s) 3"),
        "{err}"
    );
    assert_eq!(sizes_of(&value), [1, 2], "{value}");
    assert_eq!(value["failures"][0][0], 3);
    assert!(
        value["failures"][0][1]
            .as_str()
            .is_some_and(|w| w.starts_with("c: ")),
        "{value}"
    );
    // Nothing of size 3 is left on any node: the launchers, what they started, or the nodes'
    // edgeprof.
    let waited = Instant::now();
    let mut left = Vec::new();
    for name in ["a", "b", "c"] {
        let file = node_study(dir.path(), name).join(format!(
            "pids-3-{}.txt",
            ["a", "b", "c"].iter().position(|n| *n == name).unwrap_or(0)
        ));
        // A member still preparing when the size failed starts its launcher only to stop it at
        // once (its control channel has ended): give its pids a moment to appear; a member
        // that never launched left nothing.
        while !file.exists() && waited.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if !file.exists() {
            continue;
        }
        let pids = read(&file);
        for pid in pids.split_whitespace() {
            while !gone(pid) && waited.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(50));
            }
            if !gone(pid) {
                left.push(format!("{name}: {pid}"));
            }
        }
    }
    assert!(left.is_empty(), "still running: {left:?}");
}

//! A fleet run whose node link goes half-dead: the node's ssh session is stopped (SIGSTOP) while
//! its sweep goes on measuring and new connections still work. The controller's ssh gives up on
//! its keep-alives, and its reconnect must collect what the node measured meanwhile rather than
//! record failures for it. Needs OpenSSH's server (`apt-get install openssh-server`).

mod common;

use common::sshd::{descendants, keys, node, sshd, Keys, Sshd};
use common::temp_dir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The matrix of a half-dead run.
struct Matrix {
    models: &'static str,
    inputs: &'static str,
    iterations: u32,
}

/// Six conditions of a second or so each, their records a few KiB.
const SMALL: Matrix = Matrix {
    models: r#""shufflenet_v2_x0_5", "mobilenet_v2", "resnet34""#,
    inputs: r#""3x32x32", "3x64x64""#,
    iterations: 40,
};

/// Six conditions whose records (every iteration's time) outgrow what a hung ssh session's
/// pipes hold.
const LARGE: Matrix = Matrix {
    models: r#""shufflenet_v2_x0_5""#,
    inputs: r#""3x32x32", "3x33x33", "3x34x34", "3x35x35", "3x36x36", "3x37x37""#,
    iterations: 4000,
};

/// `matrix` on one loopback node `n`, whose ssh gives up after about three seconds without an
/// answer.
fn config(dir: &Path, server: &Sshd, keys: &Keys, matrix: &Matrix) -> PathBuf {
    let work = dir.join("work").display().to_string();
    let mut n = node(
        "n",
        server.port,
        keys,
        env!("CARGO_BIN_EXE_edgeprof"),
        &work,
    );
    if let Some(toml::Value::Array(options)) = n.get_mut("ssh_options") {
        options.push("ServerAliveInterval=1".into());
        options.push("ServerAliveCountMax=2".into());
    }
    let text = format!(
        "name = \"fleet\"\n\
         [matrix]\nengines = [\"tract\"]\n\
         models = [{}]\ninputs = [{}]\nthreads = [1]\nclasses = 10\nnodes = [\"n\"]\n\
         [measure]\nwarmup = 1\niterations = {}\nrepeats = 1\nretries = 0\n\
         sample_interval_ms = 100\n\
         [output]\ndir = {}\n\
         {}",
        matrix.models,
        matrix.inputs,
        matrix.iterations,
        toml::Value::String(dir.join("results").display().to_string()),
        toml::to_string(&toml::Table::from_iter([(
            "nodes".to_string(),
            toml::Value::Array(vec![n])
        )]))
        .unwrap_or_default()
    );
    let path = dir.join("fleet.toml");
    common::write(&path, &text);
    path
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The fleet run's directory under DIR/results.
fn fleet_dir(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir.join("results"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-fleet"))
}

/// Kills (SIGKILL reaches stopped processes too) everything below the sshd listener when the
/// test ends, however it ends.
struct Reaper(u32);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in descendants(self.0).into_iter().skip(1) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// What a half-dead run left: the fleet directory and the controller's stderr.
struct HalfDead {
    fleet: PathBuf,
    stderr: String,
}

/// Runs the fleet, stops the node's ssh session processes once the controller holds the node's
/// first record, and waits (bounded) for the controller to end.
fn half_dead_run(dir: &Path, matrix: &Matrix) -> HalfDead {
    let keys = keys(dir);
    let server = sshd(dir, &keys, "n");
    let _reaper = Reaper(server.child.id());
    let config = config(dir, &server, &keys, matrix);
    let (out, err) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let file = |p: &Path| match std::fs::File::create(p) {
        Ok(f) => Stdio::from(f),
        Err(e) => panic!("cannot create {}: {e}", p.display()),
    };
    let mut child = match Command::new(env!("CARGO_BIN_EXE_edgeprof"))
        .args(["run", &config.display().to_string()])
        .stdout(file(&out))
        .stderr(file(&err))
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let start = Instant::now();
    let mut stopped = false;
    while start.elapsed() < Duration::from_secs(180) && !stopped {
        if let Some(fleet) = fleet_dir(dir) {
            if !lines(&fleet.join("n").join("runs.jsonl")).is_empty() {
                // The session's sshd processes, not the listener: new connections still work.
                for pid in descendants(server.child.id()).into_iter().skip(1) {
                    let comm =
                        std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                    if comm.starts_with("sshd") {
                        let _ = Command::new("kill")
                            .args(["-STOP", &pid.to_string()])
                            .status();
                    }
                }
                stopped = true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < Duration::from_secs(180) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let stderr = common::read(&err);
    assert!(stopped, "the node never reported a record: {stderr}");
    assert!(ended.is_some(), "the controller did not end: {stderr}");
    let Some(fleet) = fleet_dir(dir) else {
        panic!("no fleet directory: {stderr}")
    };
    HalfDead { fleet, stderr }
}

#[test]
fn a_reconnect_to_a_node_still_measuring_collects_every_record_it_measured() {
    assert_collected(&SMALL);
}

/// The node's stream goes to a session that no longer reads: the sweep must not wait on it.
#[test]
fn a_node_whose_hung_session_stops_reading_measures_on_and_is_collected() {
    assert_collected(&LARGE);
}

/// After a half-dead run of `matrix`: the node is complete, its six conditions ok, and the
/// controller holds exactly the records the node's own directory holds.
fn assert_collected(matrix: &Matrix) {
    let dir = temp_dir();
    let run = half_dead_run(dir.path(), matrix);
    let manifest: serde_json::Value =
        match serde_json::from_str(&common::read(&run.fleet.join("fleet.json"))) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
    let n = &manifest["nodes"][0];
    // The node's own directory holds what it measured; the controller holds the same.
    let remote = PathBuf::from(n["remote_dir"].as_str().unwrap_or(""));
    let measured: Vec<serde_json::Value> = lines(&remote.join("runs.jsonl"))
        .into_iter()
        .map(|r| r["condition"]["id"].clone())
        .collect();
    let collected: Vec<serde_json::Value> = lines(&run.fleet.join("n").join("runs.jsonl"))
        .into_iter()
        .map(|r| r["condition"]["id"].clone())
        .collect();
    assert_eq!(
        (
            n["status"].as_str(),
            n["ok"].as_u64(),
            n["failed"].as_u64(),
            collected
        ),
        (Some("complete"), Some(6), Some(0), measured),
        "{manifest}\n{}\nnode: {}\ncontroller: {}",
        run.stderr,
        std::fs::read_to_string(remote.join("runs.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.chars().take(600).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n"),
        std::fs::read_to_string(run.fleet.join("n").join("runs.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.chars().take(600).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_drop_says_sshs_reason_and_apart_from_it_the_nodes_last_progress_line() {
    let dir = temp_dir();
    let run = half_dead_run(dir.path(), &SMALL);
    let Some(line) = run.stderr.lines().find(|l| l.starts_with("[n] dropped: ")) else {
        panic!("no drop was told: {}", run.stderr)
    };
    // ssh's own words for a keep-alive timeout are below the node's LogLevel=ERROR: its exit
    // status is its reason. The node's last line (its progress on stderr) comes after, apart.
    assert!(
        line.starts_with("[n] dropped: ssh ended with exit status 255")
            && line.contains("; the node's last progress line: "),
        "{line}"
    );
}

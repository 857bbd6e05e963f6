//! A CPU hog started halfway through a sweep, on the core the conditions are confined to: the
//! repeats it overlapped are marked disturbed with the hog named, and with
//! `measure.rerun_disturbed` they are measured again and the medians come back. In a test binary
//! of its own, so that no other test of this suite runs beside it.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The quietest core this test may use: each core's other processes watched for half a second
/// (through edgeprof's own accounting), again for up to a minute while every core is busy.
fn quiet_core() -> usize {
    use edgeprof::collect::other_processes::{between, Scan};
    let root = Path::new("/");
    let cores = edgeprof::collect::ceilings::allowed_cpus();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = Scan::take(root);
        std::thread::sleep(Duration::from_millis(500));
        let after = Scan::take(root);
        let load = |c: usize| between(&before, &after, std::process::id(), Some(&[c]));
        let best = cores
            .iter()
            .map(|&c| (c, load(c)))
            .min_by(|a, b| a.1.others_cpu_pct.total_cmp(&b.1.others_cpu_pct));
        match best {
            Some((c, d)) if !d.disturbed() => return c,
            Some((c, d)) if Instant::now() > deadline => panic!(
                "no quiet core for this test: the quietest, {c}, is busy with {}",
                d.by_whom()
            ),
            None => return 0,
            _ => {}
        }
    }
}

/// A sweep of four like conditions on `core` with the cpu-time spinner (2 ms of CPU time per
/// iteration: a hog on its core doubles its latency, a slow host does not).
fn config(dir: &Path, rerun: usize, core: usize) -> std::path::PathBuf {
    let path = dir.join(format!("hog-{rerun}.toml"));
    write(
        &path,
        &format!(
            "name = \"hog\"\n[command]\nprogram = \"{}/tests/fixtures/workers/busy.py\"\n\
             [matrix]\nengines = [\"command\"]\nmodels = [\"resnet34\"]\nbatch = [1, 2, 3, 4]\n\
             cores = [\"{core}\"]\n[measure]\nwarmup = 3\niterations = 30\nrepeats = 3\nretries = 0\n\
             sample_interval_ms = 50\nrerun_disturbed = {rerun}\n",
            env!("CARGO_MANIFEST_DIR")
        ),
    );
    path
}

/// Runs the sweep on `core`, starting a hog pinned there when the second condition starts and
/// stopping it when the third does (or after `hog_for`) — the conditions' worker processes
/// take turns, so it overlaps the second one's first process; the records of runs.jsonl, and the summary's rows.
fn sweep_with_hog(
    dir: &Path,
    rerun: usize,
    hog_for: Duration,
) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let core = quiet_core();
    let out = dir.join(format!("results-{rerun}"));
    let mut child = spawn_run(&config(dir, rerun, core), &out);
    let Some(stderr) = child.stderr.take() else {
        panic!("no stderr")
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut said = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut hog: Option<std::thread::JoinHandle<()>> = None;
    let (stop_hog, mut hog_stopped) = std::sync::mpsc::channel::<()>();
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if hog.is_none() && line.starts_with("[2/4]") && line.contains(": running") {
            // Someone else's busy process on the conditions' core, for `hog_for` at most: the
            // second condition's first worker process, until the third condition's begins.
            let mut busy: Child = match Command::new("taskset")
                .args(["-c", &core.to_string(), "yes"])
                .stdout(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(e) => panic!("cannot start the hog: {e}"),
            };
            let stopped = std::mem::replace(&mut hog_stopped, std::sync::mpsc::channel().1);
            hog = Some(std::thread::spawn(move || {
                let _ = stopped.recv_timeout(hog_for);
                let _ = busy.kill();
                let _ = busy.wait();
            }));
        }
        if line.starts_with("[3/4]") {
            let _ = stop_hog.send(());
        }
        said.push(line);
        assert!(Instant::now() < deadline, "the sweep is stuck: {said:#?}");
    }
    let status = child.wait();
    if let Some(h) = hog {
        let _ = h.join();
    }
    assert!(
        status.is_ok_and(|s| s.success()),
        "edgeprof failed: {said:#?}"
    );
    assert!(
        hog_started(&said),
        "the second condition never started: {said:#?}"
    );
    let results = only_entry(&out);
    let records = read(&results.join("runs.jsonl"))
        .lines()
        .map(|l| match serde_json::from_str(l) {
            Ok(v) => v,
            Err(e) => panic!("runs.jsonl line is not JSON: {l:?}: {e}"),
        })
        .collect();
    let summary: serde_json::Value =
        match serde_json::from_str(&read(&results.join("summary.json"))) {
            Ok(v) => v,
            Err(e) => panic!("summary.json: {e}"),
        };
    let rows = summary["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (records, rows)
}

fn hog_started(said: &[String]) -> bool {
    said.iter().any(|l| l.starts_with("[2/4]"))
}

/// The mean: the time the repeat took, what a hog's time slices add to (a median of
/// iterations shorter than a scheduler slice can miss them).
fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Per repeat of a record: (mean latency, disturbed, excluded, names of who disturbed it).
type Repeat = (f64, bool, bool, Vec<String>);

fn repeats(record: &serde_json::Value) -> Vec<Repeat> {
    let raw = record["run"]["repeats"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let notes = record["repetition"]["repeats"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(raw.len(), notes.len(), "{record}");
    raw.iter()
        .zip(&notes)
        .map(|(times, note)| {
            let t: Vec<f64> = times
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
                .unwrap_or_default();
            let names = note["top"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|o| o["name"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (
                mean(&t),
                note["others_cpu_pct"].as_f64().unwrap_or(0.0) >= 20.0,
                note["excluded"].as_bool().unwrap_or(false),
                names,
            )
        })
        .collect()
}

/// The tests here each need the machine to themselves.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_hog_halfway_is_named_and_its_repeats_are_measured_again() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = temp_dir();

    // Without re-measuring: the conditions the hog overlapped are disturbed, and it is named.
    let (records, rows) = sweep_with_hog(tmp.path(), 0, Duration::from_millis(600));
    assert_eq!(records.len(), 4);
    // The conditions whose repeats name the hog: at least one, each judged disturbed.
    let hit: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| {
            repeats(r)
                .iter()
                .any(|x| x.1 && x.3.iter().any(|n| n == "yes"))
        })
        .collect();
    assert!(!hit.is_empty(), "the hog is named nowhere: {records:#?}");
    for r in &hit {
        let id = r["condition"]["id"].as_str().unwrap_or("");
        let row = rows.iter().find(|row| row["id"] == id);
        assert_eq!(
            row.map(|row| row["verdict"].clone()),
            Some(serde_json::json!("disturbed")),
            "{rows:#?}"
        );
    }
    // The first condition's processes ran before the hog started and after it stopped.
    assert!(
        repeats(&records[0])
            .iter()
            .all(|x| !x.3.iter().any(|n| n == "yes")),
        "{}",
        records[0]
    );

    // With re-measuring: the disturbed repeats are measured again and left out, so the
    // medians come back to those of the undisturbed first condition.
    let (records, rows) = sweep_with_hog(tmp.path(), 3, Duration::from_millis(600));
    let baseline = records[0]["stats"]["latency"]["median_ms"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let mut remeasured = 0;
    let mut worst: f64 = 0.0;
    for r in &records {
        let notes = repeats(r);
        if !notes.iter().any(|x| x.2) {
            continue;
        }
        remeasured += 1;
        // A repeat the hog only touched at its edge is left out too (the safe side); the
        // slowest one left out shows that the hog mattered.
        worst = notes
            .iter()
            .filter(|x| x.2)
            .map(|x| x.0)
            .fold(worst, f64::max);
        // At least `repeats` clean ones remain, and they are what the statistics use.
        assert!(notes.iter().filter(|x| !x.2).count() >= 3, "{r}");
        let m = r["stats"]["latency"]["median_ms"]
            .as_f64()
            .unwrap_or(f64::NAN);
        assert!(
            (m / baseline - 1.0).abs() < 0.05,
            "median {m} ms against {baseline} ms undisturbed: {r}"
        );
    }
    assert!(remeasured > 0, "nothing was measured again: {records:#?}");
    assert!(
        worst > 1.3 * baseline,
        "the repeats left out were no slower ({worst} ms on average) than undisturbed ones \
         ({baseline} ms median)"
    );
    for row in &rows {
        assert_ne!(row["verdict"], "disturbed", "{row}");
    }
}

/// A ceilings measurement that other processes disturbed does not replace kept ceilings that
/// were not (their figures would be low), unless told to with --replace.
#[test]
fn a_disturbed_ceilings_measurement_does_not_replace_an_undisturbed_one_unless_told() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = temp_dir();
    let fixture = format!(
        "{}/tests/fixtures/ert/new-dialect.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let roofline = |args: &[&str]| {
        let mut c = edgeprof();
        c.env("EDGEPROF_CACHE_DIR", cache.path())
            .arg("roofline")
            .args(args);
        c
    };
    roofline(&["import-ert", &fixture]).assert().success();
    let kept_file = || -> std::path::PathBuf {
        let entries: Vec<_> = match std::fs::read_dir(cache.path()) {
            Ok(e) => e.flatten().map(|e| e.path()).collect(),
            Err(e) => panic!("{e}"),
        };
        match &entries[..] {
            [one] => one.clone(),
            other => panic!("not one kept file: {other:?}"),
        }
    };
    let kept = read(&kept_file());
    assert!(kept.contains("imported from ERT"), "{kept}");
    // Someone else's busy process on every core this test may use.
    let hogs: Vec<Child> = edgeprof::collect::ceilings::allowed_cpus()
        .iter()
        .map(|core| {
            match Command::new("taskset")
                .args(["-c", &core.to_string(), "yes"])
                .stdout(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(e) => panic!("cannot start a hog: {e}"),
            }
        })
        .collect();
    struct Stop(Vec<Child>);
    impl Drop for Stop {
        fn drop(&mut self) {
            for hog in &mut self.0 {
                let _ = hog.kill();
                let _ = hog.wait();
            }
        }
    }
    let _hogs = Stop(hogs);
    let out = roofline(&["measure", "--quick"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("warning: other processes disturbed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(--replace keeps these instead)"),
        "{stderr}"
    );
    assert_eq!(read(&kept_file()), kept);
    roofline(&["measure", "--quick", "--replace"])
        .assert()
        .success();
    let replaced = read(&kept_file());
    assert!(replaced.contains("measured by edgeprof"), "{replaced}");
}

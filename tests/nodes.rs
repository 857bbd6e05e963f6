//! `edgeprof nodes check|install` against real OpenSSH servers started on loopback by the test
//! (key authentication with throw-away keys, ports above 1024), each acting as a separate node;
//! and config values with spaces, quotes, `;`, `$()` and backquotes reaching the node as data.
//! Needs OpenSSH's server (`apt-get install openssh-server`; `.ci/run` installs it).

mod common;

use common::sshd::{descendants, keys, node, sshd, user, Sshd};
use common::{edgeprof, temp_dir};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn config(dir: &Path, nodes: Vec<toml::Value>) -> PathBuf {
    let mut top = toml::Table::new();
    top.insert("name".into(), "nodes-test".into());
    top.insert("nodes".into(), toml::Value::Array(nodes));
    let path = dir.join("nodes.toml");
    common::write(&path, &toml::to_string(&top).unwrap_or_default());
    path
}

fn this_edgeprof() -> String {
    env!("CARGO_BIN_EXE_edgeprof").to_string()
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = match edgeprof().args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    (
        out.status.success(),
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

#[test]
fn check_finds_ready_missing_and_unreachable_nodes_and_install_fills_the_gap() {
    let dir = temp_dir();
    let keys = keys(dir.path());
    let a = sshd(dir.path(), &keys, "a");
    let b = sshd(dir.path(), &keys, "b");
    let missing = dir.path().join("b/bin/edgeprof").display().to_string();
    let work_a = dir.path().join("work-a").display().to_string();
    let config = config(
        dir.path(),
        vec![
            node("a", a.port, &keys, &this_edgeprof(), &work_a),
            node("b", b.port, &keys, &missing, "/tmp/edgeprof-nodes-test-b"),
            // Port 1, not a free port: a free one can be taken by another test's sshd
            // meanwhile, which answers "Permission denied" instead of refusing.
            node("gone", 1, &keys, &this_edgeprof(), "/tmp"),
        ],
    );
    let config = config.display().to_string();
    let (ok, out, err) = run(&["nodes", "check", "--config", &config, "--json"]);
    assert!(ok, "{err}");
    let checked = json(&out);
    assert_eq!(checked[0]["node"], "a");
    assert_eq!(checked[0]["state"], "ready", "{out}");
    assert_eq!(
        checked[0]["info"]["edgeprof_version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(checked[0]["info"]["arch"], std::env::consts::ARCH);
    assert!(checked[0]["info"]["fingerprint"]["cpus_available"].as_u64() >= Some(1));
    let engines = checked[0]["info"]["engines"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        engines.iter().any(|e| e[0] == "tract" && e[1] == true),
        "{out}"
    );
    assert_eq!(checked[0]["workdir_ok"], true);
    assert!(Path::new(&work_a).is_dir());
    assert_eq!(checked[1]["state"], "no-edgeprof", "{out}");
    assert_eq!(checked[1]["arch"], std::env::consts::ARCH);
    assert_eq!(checked[2]["state"], "unreachable", "{out}");
    assert!(
        checked[2]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("Connection refused"),
        "{out}"
    );

    // install copies this binary where b lacks it; a has this version and is left alone;
    // gone fails and makes the command fail, naming it.
    let (ok, _, err) = run(&["nodes", "install", "--config", &config]);
    assert!(!ok, "{err}");
    assert!(
        err.contains(&format!(
            "a: edgeprof {} is already at",
            env!("CARGO_PKG_VERSION")
        )),
        "{err}"
    );
    assert!(err.contains("b: installed; it says edgeprof"), "{err}");
    assert!(err.contains("gone: unreachable"), "{err}");
    assert!(err.contains("1 of 3 node(s) were not installed"), "{err}");
    assert!(Path::new(&missing).is_file());
    let (ok, out, err) = run(&["nodes", "check", "--config", &config]);
    assert!(ok, "{err}");
    assert!(out.contains("2 of 3 node(s) ready"), "{out}");
    // And which of them can train, with which framework.
    assert!(out.contains("ready to train with pytorch: "), "{out}");
    assert!(out.contains("ready to train with tensorflow: "), "{out}");
}

#[test]
fn hostile_config_values_reach_the_node_as_data() {
    let dir = temp_dir();
    let keys = keys(dir.path());
    let server = sshd(dir.path(), &keys, "h");
    let base = dir.path().display().to_string();
    let trap = |n: u32| format!("{base}/pwned{n}");
    let workdir = format!(
        "{base}/it's a \"work\" dir; touch {} $(touch {}) `touch {}` && touch {}",
        trap(1),
        trap(2),
        trap(3),
        trap(4)
    );
    let binary = format!(
        "{base}/bin; touch {} $(touch {})/edge 'prof\"",
        trap(5),
        trap(6)
    );
    let config = config(
        dir.path(),
        vec![node("hostile", server.port, &keys, &binary, &workdir)],
    );
    let config = config.display().to_string();
    let (ok, _, err) = run(&["nodes", "install", "--config", &config]);
    assert!(ok, "{err}");
    let (ok, out, err) = run(&["nodes", "check", "--config", &config, "--json"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)[0]["state"], "ready", "{out}");
    // The values became a directory and a file with exactly those names, and nothing ran.
    assert!(Path::new(&workdir).is_dir(), "{workdir}");
    assert!(Path::new(&binary).is_file(), "{binary}");
    for n in 1..=6 {
        assert!(
            !Path::new(&trap(n)).exists(),
            "pwned{n} exists: a value was run as code"
        );
    }

    // A destination that ssh would read as an option is refused before ssh runs.
    let bad = dir.path().join("bad.toml");
    common::write(
        &bad,
        &format!(
            "[[nodes]]\ndestination = \"-oProxyCommand=touch {}\"\n",
            trap(7)
        ),
    );
    let out = edgeprof()
        .args(["nodes", "check", "--config"])
        .arg(&bad)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nodes[0].destination"), "{err}");
    assert!(err.contains("not starting with '-'"), "{err}");
    assert!(!Path::new(&trap(7)).exists());
}

/// A fleet config over `nodes` running tract on `models` at 3x`size`x`size`.
fn fleet_config(
    dir: &Path,
    nodes: Vec<toml::Value>,
    models: &[&str],
    size: u32,
    iterations: i64,
) -> PathBuf {
    let names: Vec<toml::Value> = nodes
        .iter()
        .filter_map(|n| n.get("name").or_else(|| n.get("destination")).cloned())
        .collect();
    let mut matrix = toml::Table::new();
    matrix.insert("engines".into(), toml::Value::Array(vec!["tract".into()]));
    matrix.insert(
        "models".into(),
        toml::Value::Array(models.iter().map(|m| (*m).into()).collect()),
    );
    matrix.insert(
        "inputs".into(),
        toml::Value::Array(vec![format!("3x{size}x{size}").into()]),
    );
    matrix.insert("threads".into(), toml::Value::Array(vec![1.into()]));
    matrix.insert("classes".into(), 10.into());
    matrix.insert("nodes".into(), toml::Value::Array(names));
    let mut measure = toml::Table::new();
    measure.insert("warmup".into(), 1.into());
    measure.insert("iterations".into(), iterations.into());
    measure.insert("repeats".into(), 1.into());
    measure.insert("retries".into(), 0.into());
    measure.insert("sample_interval_ms".into(), 100.into());
    let mut output = toml::Table::new();
    output.insert(
        "dir".into(),
        dir.join("results").display().to_string().into(),
    );
    let mut top = toml::Table::new();
    top.insert("name".into(), "fleet".into());
    top.insert("matrix".into(), toml::Value::Table(matrix));
    top.insert("measure".into(), toml::Value::Table(measure));
    top.insert("output".into(), toml::Value::Table(output));
    top.insert("nodes".into(), toml::Value::Array(nodes));
    let path = dir.join("fleet.toml");
    common::write(&path, &toml::to_string(&top).unwrap_or_default());
    path
}

/// Nodes a, b and c, each its own sshd on loopback with its own working directory.
fn three_nodes(dir: &Path) -> (Vec<Sshd>, Vec<toml::Value>) {
    let keys = keys(dir);
    let servers: Vec<Sshd> = ["a", "b", "c"]
        .iter()
        .map(|n| sshd(dir, &keys, n))
        .collect();
    let nodes = ["a", "b", "c"]
        .iter()
        .zip(&servers)
        .map(|(n, s)| {
            let work = dir.join(format!("work-{n}")).display().to_string();
            node(n, s.port, &keys, &this_edgeprof(), &work)
        })
        .collect();
    (servers, nodes)
}

/// The fleet run's directory under DIR/results.
fn fleet_dir(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir.join("results"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-fleet"))
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_fleet_run_over_three_nodes_gathers_every_condition_with_each_nodes_device() {
    let dir = temp_dir();
    let (_servers, nodes) = three_nodes(dir.path());
    let config = fleet_config(
        dir.path(),
        nodes,
        &["shufflenet_v2_x0_5", "mobilenet_v2"],
        32,
        5,
    );
    let (ok, out, err) = run(&["run", &config.display().to_string()]);
    assert!(ok, "{err}\n{out}");
    let Some(fleet) = fleet_dir(dir.path()) else {
        panic!("no fleet directory: {err}")
    };
    let manifest = json(&common::read(&fleet.join("fleet.json")));
    let nodes = manifest["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(nodes.len(), 3);
    for (n, name) in nodes.iter().zip(["a", "b", "c"]) {
        assert_eq!(n["name"], name);
        assert_eq!(n["status"], "complete", "{manifest}");
        assert_eq!((n["ok"].as_u64(), n["failed"].as_u64()), (Some(2), Some(0)));
        // Each node's stream is a results directory with that node's own fingerprint.
        let node_manifest = json(&common::read(&fleet.join(name).join("manifest.json")));
        assert_eq!(node_manifest["device"]["arch"], std::env::consts::ARCH);
        assert_eq!(node_manifest["status"], "complete");
        let runs = lines(&fleet.join(name).join("runs.jsonl"));
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| r["ok"] == true));
        // The node kept its own copy in its working directory.
        assert!(n["remote_dir"].as_str().is_some_and(|d| d.starts_with(
            &dir.path()
                .join(format!("work-{name}"))
                .display()
                .to_string()
        )));
    }
    assert!(out.contains("complete"), "{out}");
    assert!(err.contains("[b] started: 2 condition(s) on"), "{err}");
    // Each node's directory reads as a results directory; report goes through them all.
    let (ok, out, err) = run(&[
        "report",
        "--no-charts",
        &fleet.join("a").display().to_string(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("tract/mobilenet_v2/3x32x32/b1/t1/cpu"),
        "{out}"
    );
    let (ok, out, err) = run(&["report", "--no-charts", &fleet.display().to_string()]);
    assert!(ok, "{err}");
    for name in ["a", "b", "c"] {
        assert!(
            out.contains(&format!("== node {name} (Complete) ==")),
            "{out}"
        );
    }
}

/// `edgeprof run CONFIG` in the background, its output piped.
fn spawn_run(config: &Path) -> Child {
    let child = std::process::Command::new(this_edgeprof())
        .args(["run", &config.display().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    match child {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_node_whose_sshd_is_killed_mid_run_has_its_conditions_recorded_and_the_others_complete() {
    let dir = temp_dir();
    let (mut servers, nodes) = three_nodes(dir.path());
    // Three conditions of about a second or more each, so c can be cut after its first.
    let config = fleet_config(
        dir.path(),
        nodes,
        &["shufflenet_v2_x0_5", "mobilenet_v2", "resnet34"],
        64,
        60,
    );
    let child = spawn_run(&config);
    let start = Instant::now();
    let mut cut = false;
    while start.elapsed() < Duration::from_secs(120) {
        if let Some(fleet) = fleet_dir(dir.path()) {
            if !lines(&fleet.join("c").join("runs.jsonl")).is_empty() {
                let Some(c) = servers.pop() else { break };
                let pids: Vec<String> = descendants(c.child.id())
                    .iter()
                    .map(|p| p.to_string())
                    .collect();
                let mut kill = vec!["-KILL".to_string()];
                kill.extend(pids);
                let _ = Command::new("kill").args(&kill).status();
                drop(c);
                cut = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(cut, "node c never reported a record");
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the fleet run did not complete everywhere: c"),
        "{err}"
    );
    assert!(err.contains("[c] dropped:"), "{err}");
    let Some(fleet) = fleet_dir(dir.path()) else {
        panic!("no fleet directory")
    };
    let manifest = json(&common::read(&fleet.join("fleet.json")));
    let nodes = manifest["nodes"].as_array().cloned().unwrap_or_default();
    for n in &nodes[..2] {
        assert_eq!(n["status"], "complete", "{manifest}");
        assert_eq!(n["ok"], 3, "{manifest}");
    }
    let c = &nodes[2];
    assert_eq!(c["status"], "dropped", "{manifest}");
    assert_eq!(c["conditions"], 3);
    // Every condition of c has its record: the ones it finished, and failures for the rest.
    let runs = lines(&fleet.join("c").join("runs.jsonl"));
    let finished: Vec<&serde_json::Value> = runs
        .iter()
        .filter(|r| r["last"] == true || r["ok"] == true)
        .collect();
    assert_eq!(finished.len(), 3, "{runs:?}");
    let dropped: Vec<&&serde_json::Value> = finished.iter().filter(|r| r["ok"] == false).collect();
    assert!(!dropped.is_empty());
    assert!(dropped.iter().all(|r| r["reason"]
        .as_str()
        .is_some_and(|why| why.starts_with("node c dropped before this condition finished"))));
    assert_eq!(
        c["ok"].as_u64().unwrap_or(0) + c["failed"].as_u64().unwrap_or(0),
        3
    );
}

#[test]
fn a_node_named_by_a_destination_like_a_path_keeps_its_results_inside_the_fleet_directory() {
    let dir = temp_dir();
    let keys = keys(dir.path());
    let server = sshd(dir.path(), &keys, "p");
    let work = dir.path().join("work-p").display().to_string();
    let mut node = node("unused", server.port, &keys, &this_edgeprof(), &work);
    let Some(table) = node.as_table_mut() else {
        panic!("a node is a table")
    };
    // No name, so the destination names the node; ssh reaches loopback through HostName.
    table.remove("name");
    table.insert("destination".into(), "../../escape".into());
    if let Some(toml::Value::Array(options)) = table.get_mut("ssh_options") {
        options.push("HostName=127.0.0.1".into());
        options.push(format!("User={}", user()).into());
    }
    let config = fleet_config(dir.path(), vec![node], &["shufflenet_v2_x0_5"], 32, 5);
    let (ok, out, err) = run(&["run", &config.display().to_string()]);
    assert!(ok, "{err}\n{out}");
    let Some(fleet) = fleet_dir(dir.path()) else {
        panic!("no fleet directory: {err}")
    };
    assert!(
        !dir.path().join("escape").exists(),
        "the node's results were written outside the fleet directory"
    );
    let inside = fleet.join("_.._.._escape");
    assert_eq!(lines(&inside.join("runs.jsonl")).len(), 1, "{err}");
    let manifest = json(&common::read(&fleet.join("fleet.json")));
    assert_eq!(manifest["nodes"][0]["name"], "../../escape");
    assert_eq!(manifest["nodes"][0]["status"], "complete", "{manifest}");
    let (ok, out, err) = run(&["report", "--no-charts", &fleet.display().to_string()]);
    assert!(ok, "{err}");
    assert!(out.contains("== node ../../escape (Complete) =="), "{out}");
    assert!(out.contains("tract/shufflenet_v2_x0_5/3x32x32"), "{out}");
}

/// A server that accepts connections and never says a word: a link that died silently.
fn silent_server() -> (u16, std::thread::JoinHandle<()>) {
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => panic!("cannot listen on loopback: {e}"),
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => panic!("{e}"),
    };
    let handle = std::thread::spawn(move || {
        // Hold the connection open, silent, for longer than any test waits.
        if let Ok((stream, _)) = listener.accept() {
            std::thread::sleep(Duration::from_secs(30));
            drop(stream);
        }
    });
    (port, handle)
}

#[test]
fn a_node_that_never_answers_is_given_up_after_its_own_connect_timeout() {
    let dir = temp_dir();
    let (port, _server) = silent_server();
    let mut t = toml::Table::new();
    t.insert("name".into(), "mute".into());
    t.insert("destination".into(), "127.0.0.1".into());
    t.insert("port".into(), i64::from(port).into());
    t.insert(
        "ssh_options".into(),
        toml::Value::Array(vec!["ConnectTimeout=1".into()]),
    );
    let config = config(dir.path(), vec![toml::Value::Table(t)]);
    let start = Instant::now();
    let (ok, out, err) = run(&[
        "nodes",
        "check",
        "--config",
        &config.display().to_string(),
        "--json",
    ]);
    let took = start.elapsed();
    assert!(ok, "{err}");
    assert_eq!(json(&out)[0]["state"], "unreachable", "{out}");
    // edgeprof's own default (10 s) must not come first and win: ssh keeps the first value.
    assert!(took < Duration::from_secs(6), "took {took:?}: {out}");
}

#[test]
fn a_node_that_never_connects_has_every_condition_recorded_as_failed_with_the_reason() {
    let dir = temp_dir();
    let keys = keys(dir.path());
    let server = sshd(dir.path(), &keys, "a");
    let work = dir.path().join("work-a").display().to_string();
    let nodes = vec![
        node("a", server.port, &keys, &this_edgeprof(), &work),
        // Port 1: no sshd of these tests (which take free ports above 1024) can be there.
        node("gone", 1, &keys, &this_edgeprof(), &work),
    ];
    let config = fleet_config(
        dir.path(),
        nodes,
        &["shufflenet_v2_x0_5", "mobilenet_v2"],
        32,
        5,
    );
    let out = match edgeprof()
        .args(["run", &config.display().to_string()])
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the fleet run did not complete everywhere: gone"),
        "{err}"
    );
    let Some(fleet) = fleet_dir(dir.path()) else {
        panic!("no fleet directory: {err}")
    };
    let manifest = json(&common::read(&fleet.join("fleet.json")));
    let gone = &manifest["nodes"][1];
    assert_eq!(gone["name"], "gone");
    assert_eq!(gone["status"], "unreachable", "{manifest}");
    assert_eq!(
        (
            gone["conditions"].as_u64(),
            gone["ok"].as_u64(),
            gone["failed"].as_u64()
        ),
        (Some(2), Some(0), Some(2)),
        "{manifest}"
    );
    assert!(
        gone["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Connection refused")),
        "{manifest}"
    );
    // Its directory is a results directory: each condition failed, naming the connection.
    let runs = lines(&fleet.join("gone").join("runs.jsonl"));
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in &runs {
        assert_eq!((&r["ok"], &r["last"]), (&false.into(), &true.into()), "{r}");
        let why = r["reason"].as_str().unwrap_or("");
        assert!(
            why.starts_with("node gone never started its share: "),
            "{why}"
        );
        assert!(why.contains("Connection refused"), "{why}");
    }
    let node_manifest = json(&common::read(&fleet.join("gone").join("manifest.json")));
    assert_eq!(
        node_manifest["conditions"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(manifest["nodes"][0]["status"], "complete", "{manifest}");
    let (ok, out, err) = run(&["report", "--no-charts", &fleet.display().to_string()]);
    assert!(ok, "{err}");
    let gone_part = out.split("== node gone").nth(1).unwrap_or("");
    assert!(!gone_part.contains("no results from this node"), "{out}");
    assert!(
        gone_part.contains("tract/mobilenet_v2/3x32x32/b1/t1/cpu"),
        "{out}"
    );
}

/// A fleet config over three loopback nodes whose first condition (shufflenet at 32×32) ends in
/// about a second and whose second (at 224×224) runs for minutes: a cancel lands mid-run.
fn long_fleet(dir: &Path) -> (Vec<Sshd>, PathBuf) {
    let (servers, nodes) = three_nodes(dir);
    let config = fleet_config(dir, nodes, &["shufflenet_v2_x0_5"], 32, 1000);
    let mut table: toml::Table = toml::from_str(&common::read(&config)).unwrap_or_default();
    if let Some(toml::Value::Table(matrix)) = table.get_mut("matrix") {
        matrix.insert(
            "inputs".into(),
            toml::Value::Array(vec!["3x32x32".into(), "3x224x224".into()]),
        );
    }
    common::write(&config, &toml::to_string(&table).unwrap_or_default());
    (servers, config)
}

/// Waits until every node of the fleet run under `dir` has streamed its first record.
fn wait_first_records(dir: &Path, seconds: u64) -> PathBuf {
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        if let Some(fleet) = fleet_dir(dir) {
            if ["a", "b", "c"]
                .iter()
                .all(|n| !lines(&fleet.join(n).join("runs.jsonl")).is_empty())
            {
                return fleet;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("not every node finished its first condition in {seconds} s");
}

/// After a cancel: every node is `cancelled` with its first condition recorded and its second
/// without a record, on the controller and on the node, and nothing runs below the sshds.
fn assert_cancelled(fleet: &Path, servers: &[Sshd]) {
    let manifest = json(&common::read(&fleet.join("fleet.json")));
    let nodes = manifest["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(nodes.len(), 3, "{manifest}");
    for n in &nodes {
        assert_eq!(n["status"], "cancelled", "{manifest}");
        assert_eq!((n["ok"].as_u64(), n["failed"].as_u64()), (Some(1), Some(0)));
        let name = n["name"].as_str().unwrap_or("");
        let runs = lines(&fleet.join(name).join("runs.jsonl"));
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0]["ok"], true);
        assert_eq!(
            runs[0]["condition"]["id"],
            "tract/shufflenet_v2_x0_5/3x32x32/b1/t1/cpu"
        );
        let kept = json(&common::read(&fleet.join(name).join("manifest.json")));
        assert_eq!(kept["status"], "interrupted");
        // The node stopped its own sweep too: its directory there says so.
        let remote = PathBuf::from(n["remote_dir"].as_str().unwrap_or(""));
        let there = json(&common::read(&remote.join("manifest.json")));
        assert_eq!(there["status"], "interrupted", "{}", remote.display());
    }
    let until = Instant::now() + Duration::from_secs(10);
    for server in servers {
        while descendants(server.child.id()).len() > 1 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        let left = descendants(server.child.id());
        assert_eq!(
            left.len(),
            1,
            "still running under sshd {}: {left:?}",
            server.port
        );
    }
}

#[test]
fn ctrl_c_cancels_a_fleet_run_on_every_node_within_two_seconds_keeping_what_finished() {
    let dir = temp_dir();
    let (servers, config) = long_fleet(dir.path());
    let child = spawn_run(&config);
    let fleet = wait_first_records(dir.path(), 180);
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let sent = Instant::now();
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let took = sent.elapsed();
    eprintln!("Ctrl-C to exit: {took:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_secs(2), "took {took:?}: {err}");
    assert!(
        err.contains("cancelled with 3 of 6 condition(s) done"),
        "{err}"
    );
    assert!(err.contains("[b] cancelled: 1 ok, 0 failed"), "{err}");
    assert_cancelled(&fleet, &servers);
}

#[test]
fn q_in_the_ui_cancels_a_fleet_run_of_three_nodes_within_two_seconds() {
    let dir = temp_dir();
    let (servers, config) = long_fleet(dir.path());
    let bin = this_edgeprof();
    let t = common::tmux::Tmux::start(
        dir.path(),
        &format!(
            "'{bin}' tui '{}'; echo EXIT=$? > exit.txt; echo done > finished.txt",
            config.display()
        ),
    );
    t.wait_for("Frameworks", 20);
    t.keys(&["r"]);
    let fleet = wait_first_records(dir.path(), 180);
    // q first asks (a run is in progress); a second q cancels it and quits, as Q does.
    t.keys(&["q"]);
    t.wait_for("again, or Q", 20);
    t.keys(&["q"]);
    let sent = Instant::now();
    let exit = t.wait_file("exit.txt", 30);
    let took = sent.elapsed();
    eprintln!("the second q to exit.txt: {took:?}");
    // Cancelled: exit 130, as the headless fleet run.
    assert_eq!(exit.trim(), "EXIT=130");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_cancelled(&fleet, &servers);
}

//! `edgeprof frameworks refresh` against a local server that replays GitHub REST API answers
//! (tests/fixtures/github): figures read with ETags, 304 on asking again, a spent rate limit, a
//! secondary limit, a missing repository, and no network. Never the real network.

mod common;

use common::{edgeprof, temp_dir};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Normal,
    RateLimited,
    Secondary,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    if_none_match: Option<String>,
    authorization: Option<String>,
    user_agent: Option<String>,
}

struct Replay {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    mode: Arc<Mutex<Mode>>,
}

fn fixture(name: &str) -> Option<String> {
    let path = format!(
        "{}/tests/fixtures/github/{name}.http",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).ok()
}

/// Splits a recorded answer into head lines and body.
fn split(answer: &str) -> (Vec<String>, String) {
    let (head, body) = answer.split_once("\n\n").unwrap_or((answer, ""));
    (head.lines().map(str::to_string).collect(), body.to_string())
}

fn header(head: &[String], name: &str) -> Option<String> {
    head.iter().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// What the server answers to `path` with `if_none_match` in `mode`.
fn answer(path: &str, if_none_match: Option<&str>, mode: Mode) -> String {
    match mode {
        Mode::RateLimited => return fixture("rate-limited").unwrap_or_default(),
        Mode::Secondary => return fixture("secondary-limit").unwrap_or_default(),
        Mode::Normal => {}
    }
    let name = path
        .split('?')
        .next()
        .unwrap_or("")
        .trim_start_matches('/')
        .replace('/', "__");
    let Some(recorded) = fixture(&name) else {
        return fixture("not-found").unwrap_or_default();
    };
    let (head, _) = split(&recorded);
    match (header(&head, "etag"), if_none_match) {
        (Some(etag), Some(asked)) if etag == asked => {
            let (mut head, body) = split(&fixture("not-modified").unwrap_or_default());
            head.push(format!("etag: {etag}"));
            format!("{}\n\n{body}", head.join("\n"))
        }
        _ => recorded,
    }
}

fn serve(listener: TcpListener, seen: Arc<Mutex<Vec<Seen>>>, mode: Arc<Mutex<Mode>>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let Ok(read_half) = stream.try_clone() else {
            continue;
        };
        let mut reader = BufReader::new(read_half);
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line.trim().is_empty() => break,
                Ok(_) => lines.push(line.trim_end().to_string()),
            }
        }
        let Some(request_line) = lines.first() else {
            continue;
        };
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_string();
        let request = Seen {
            path: path.clone(),
            if_none_match: header(&lines, "if-none-match"),
            authorization: header(&lines, "authorization"),
            user_agent: header(&lines, "user-agent"),
        };
        let mode = mode.lock().map(|m| *m).unwrap_or(Mode::Normal);
        let text = answer(&path, request.if_none_match.as_deref(), mode);
        if let Ok(mut s) = seen.lock() {
            s.push(request);
        }
        let (head, body) = split(&text);
        let mut out = head.join("\r\n");
        out.push_str(&format!(
            "\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ));
        let _ = stream.write_all(out.as_bytes());
    }
}

fn start(mode: Mode) -> Replay {
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => panic!("cannot listen on loopback: {e}"),
    };
    let url = match listener.local_addr() {
        Ok(a) => format!("http://{a}"),
        Err(e) => panic!("no local address: {e}"),
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mode = Arc::new(Mutex::new(mode));
    let (s, m) = (seen.clone(), mode.clone());
    std::thread::spawn(move || serve(listener, s, m));
    Replay { url, seen, mode }
}

impl Replay {
    fn set(&self, mode: Mode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }
    fn take(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

/// Runs edgeprof with the data directory `data` and no token from the environment.
/// Proxy variables the HTTP client honours: a proxy must not stand between the tests and their
/// loopback server.
const PROXY_VARS: [&str; 6] = [
    "ALL_PROXY",
    "all_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
];

fn run(data: &std::path::Path, args: &[&str], token: Option<&str>) -> (bool, String, String) {
    let mut cmd = edgeprof();
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    cmd.env("EDGEPROF_DATA_DIR", data)
        .env_remove("GITHUB_TOKEN")
        .env_remove("EDGEPROF_GITHUB_TOKEN")
        .env_remove("EDGEPROF_GITHUB_API")
        .args(args);
    if let Some(t) = token {
        cmd.env("EDGEPROF_GITHUB_TOKEN", t);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(text: &str) -> Value {
    match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => panic!("not JSON ({e}): {text}"),
    }
}

fn show(data: &std::path::Path, name: &str) -> Value {
    let (ok, out, err) = run(data, &["frameworks", "show", name, "--json"], None);
    assert!(ok, "{err}");
    json(&out)
}

#[test]
fn figures_are_read_with_etags_and_asking_again_gets_304s() {
    let server = start(Mode::Normal);
    let data = temp_dir();
    let args = [
        "frameworks",
        "refresh",
        "tract",
        "candle",
        "--api-url",
        &server.url,
        "--json",
    ];
    let (ok, out, err) = run(data.path(), &args, None);
    assert!(ok, "{err}");
    let report = json(&out);
    assert_eq!(report["status"], "refreshed", "{out}");
    assert_eq!(report["authenticated"], false);
    assert_eq!(report["rate_remaining"], 53, "{out}");
    let first = server.take();
    assert_eq!(first.len(), 6, "{first:?}");
    assert!(first.iter().all(|r| r.if_none_match.is_none()));
    assert!(first.iter().all(|r| r
        .user_agent
        .as_deref()
        .is_some_and(|u| u.starts_with("edgeprof/"))));
    assert!(first
        .iter()
        .any(|r| r.path == "/repos/sonos/tract/contributors?per_page=1"));

    let tract = show(data.path(), "tract");
    let github = &tract["development"]["github"];
    assert_eq!(github["stars"], 2468);
    assert_eq!(github["forks"], 135);
    assert_eq!(github["open_issues"], 71);
    // From the Link header's last page, one contributor per page.
    assert_eq!(github["contributors"], 87);
    assert_eq!(
        github["source"],
        format!("{}/repos/sonos/tract", server.url).as_str()
    );
    // GitHub's release is newer than the shipped one, so it replaces it, citing GitHub.
    assert_eq!(tract["development"]["last_release"]["version"], "0.23.10");
    assert_eq!(
        tract["sources"]["github-release"]["url"],
        "https://github.com/sonos/tract/releases/tag/0.23.10"
    );
    let candle = show(data.path(), "candle");
    assert_eq!(candle["development"]["github"]["contributors"], 204);
    // No GitHub releases (404): the shipped registry release stands.
    assert_eq!(candle["development"]["last_release"]["version"], "0.11.1");

    // Asking again sends the ETags and keeps the figures on 304.
    let (ok, out, err) = run(data.path(), &args, None);
    assert!(ok, "{err}");
    let report = json(&out);
    assert_eq!(report["status"], "refreshed");
    assert_eq!(report["repos"][0]["framework"], "tract");
    assert_eq!(report["repos"][0]["outcome"], "read");
    assert_eq!(report["repos"][0]["unchanged"], 3, "{out}");
    // candle's release answer was a 404 without an ETag: the two others come back 304.
    assert_eq!(report["repos"][1]["unchanged"], 2, "{out}");
    let second = server.take();
    assert_eq!(
        second
            .iter()
            .find(|r| r.path == "/repos/sonos/tract")
            .and_then(|r| r.if_none_match.clone())
            .as_deref(),
        Some("W/\"a1f0c3tract-repo\"")
    );
    assert_eq!(
        show(data.path(), "tract")["development"]["github"]["stars"],
        2468
    );
    // The text form says what happened.
    let (ok, out, err) = run(
        data.path(),
        &["frameworks", "refresh", "tract", "--api-url", &server.url],
        None,
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("tract: unchanged (every answer was 304)"),
        "{err}"
    );
    assert!(
        out.contains("2,468 stars, 135 forks, 87 contributors"),
        "{out}"
    );
    assert!(out.contains("refreshed 1 of 1"), "{out}");
}

#[test]
fn a_spent_rate_limit_stops_the_refresh_and_keeps_the_values_read_before() {
    let server = start(Mode::Normal);
    let data = temp_dir();
    let base = ["frameworks", "refresh", "tract", "--api-url", &server.url];
    let (ok, _, err) = run(data.path(), &base, None);
    assert!(ok, "{err}");
    server.take();

    server.set(Mode::RateLimited);
    let (ok, out, err) = run(
        data.path(),
        &[
            "frameworks",
            "refresh",
            "tract",
            "candle",
            "--api-url",
            &server.url,
        ],
        None,
    );
    assert!(ok, "{err}");
    // 1798003600 is 2026-12-23T05:26:40Z.
    assert!(
        out.contains("GitHub's rate limit is spent until 2026-12-23T05:26:40Z"),
        "{out}"
    );
    assert!(out.contains("EDGEPROF_GITHUB_TOKEN"), "{out}");
    assert!(out.contains("0 of 2 refreshed"), "{out}");
    // It stopped at the first refusal: candle was not asked.
    assert_eq!(server.take().len(), 1);
    assert_eq!(
        show(data.path(), "tract")["development"]["github"]["stars"],
        2468
    );

    // With a token: sent as a bearer token, never printed, and no token hint.
    let (ok, out, err) = run(
        data.path(),
        &[
            "frameworks",
            "refresh",
            "tract",
            "--api-url",
            &server.url,
            "--json",
        ],
        Some("tok-secret-42"),
    );
    assert!(ok, "{err}");
    let report = json(&out);
    assert_eq!(report["status"], "rate-limited");
    assert_eq!(report["authenticated"], true);
    assert_eq!(report["repos"][0]["outcome"], "not_asked");
    assert!(!out.contains("tok-secret-42") && !err.contains("tok-secret-42"));
    assert!(!report["stopped"].as_str().unwrap_or("").contains("TOKEN"));
    let seen = server.take();
    assert_eq!(
        seen.first()
            .and_then(|r| r.authorization.clone())
            .as_deref(),
        Some("Bearer tok-secret-42")
    );

    server.set(Mode::Secondary);
    let (ok, out, err) = run(data.path(), &base, None);
    assert!(ok, "{err}");
    assert!(
        out.contains("GitHub's rate limit asks to wait 60 s"),
        "{out}"
    );
}

#[test]
fn a_repository_github_does_not_know_is_reported_and_the_others_still_refresh() {
    let server = start(Mode::Normal);
    let data = temp_dir();
    let (ok, out, err) = run(
        data.path(),
        &[
            "frameworks",
            "refresh",
            "openvino",
            "tract",
            "--api-url",
            &server.url,
            "--json",
        ],
        None,
    );
    assert!(ok, "{err}");
    let report = json(&out);
    assert_eq!(report["status"], "partial", "{out}");
    assert_eq!(report["repos"][0]["outcome"], "failed");
    assert!(
        report["repos"][0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("/repos/openvinotoolkit/openvino answered 404 (Not Found)"),
        "{out}"
    );
    assert_eq!(report["repos"][1]["outcome"], "read");
    assert!(show(data.path(), "openvino")["development"]["github"].is_null());
}

#[test]
fn offline_it_says_so_and_the_shipped_values_stand() {
    // A port nobody listens on: the connection is refused, as with no network.
    let port = match TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => panic!("cannot find a free port: {e}"),
    };
    let url = format!("http://127.0.0.1:{port}");
    let data = temp_dir();
    let (ok, out, err) = run(
        data.path(),
        &["frameworks", "refresh", "--api-url", &url],
        None,
    );
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("offline: cannot reach {url}")),
        "{out}"
    );
    assert!(out.contains("0 of 10 refreshed"), "{out}");
    assert!(out.contains("not read yet"), "{out}");
    let tract = show(data.path(), "tract");
    assert!(tract["development"]["github"].is_null());
    assert_eq!(tract["development"]["last_release"]["version"], "0.23.9");
    // The same through the environment variable, as JSON.
    let mut cmd = edgeprof();
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let out = cmd
        .env("EDGEPROF_DATA_DIR", data.path())
        .env("EDGEPROF_GITHUB_API", &url)
        .env_remove("GITHUB_TOKEN")
        .env_remove("EDGEPROF_GITHUB_TOKEN")
        .args(["frameworks", "refresh", "tract", "--json"])
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("cannot run edgeprof: {e}"),
    };
    assert!(out.status.success());
    let report = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(report["status"], "offline");
    assert_eq!(report["api"], url.as_str());
}

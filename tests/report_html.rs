//! `edgeprof report DIR --html`: one self-contained HTML file that is valid HTML (HTML Tidy finds
//! no error in it) and renders in a headless browser (Debian's chromium-headless-shell) with
//! nothing fetched and no error logged. Both tools are test prerequisites (see README.md); a
//! missing one fails the test with the package to install.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of the small results fixture with the Raspberry Pi's ceilings kept beside it (as a
/// sweep with `output.roofline` keeps them), so the report has a roofline.
fn results_with_ceilings(tmp: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/small");
    let dir = tmp.join("small");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("cannot create {}: {e}", dir.display());
    }
    let entries = match std::fs::read_dir(&from) {
        Ok(e) => e,
        Err(e) => panic!("cannot list {}: {e}", from.display()),
    };
    for entry in entries.flatten() {
        if let Err(e) = std::fs::copy(entry.path(), dir.join(entry.file_name())) {
            panic!("cannot copy {}: {e}", entry.path().display());
        }
    }
    let pi: serde_json::Value = serde_json::from_str(&read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ceilings-pi4.json"),
    ))
    .unwrap_or_default();
    let kept = serde_json::json!({ "ceilings": pi["ceilings"] });
    write(&dir.join("roofline.json"), &kept.to_string());
    dir
}

/// A tool the test needs, or a failure naming the package that has it.
fn tool(name: &str, package: &str) -> PathBuf {
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let path = dir.join(name);
        if path.is_file() {
            return path;
        }
    }
    panic!("{name} is not installed: this test needs it (apt-get install {package})")
}

#[test]
fn the_html_report_is_one_valid_file_that_renders_offline() {
    let tmp = temp_dir();
    let dir = results_with_ceilings(tmp.path());
    let file = tmp.path().join("out").join("report.html");
    if let Err(e) = std::fs::create_dir_all(tmp.path().join("out")) {
        panic!("{e}");
    }
    let out = edgeprof()
        .env("EDGEPROF_CACHE_DIR", tmp.path().join("no-cache"))
        .arg("report")
        .arg(&dir)
        .arg("--html")
        .arg(&file)
        .assert()
        .success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.contains("report.html"), "{said}");
    let html = read(&file);

    // Self-contained: the charts are inline, nothing is fetched.
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..80]);
    assert_eq!(
        html.matches("<svg").count(),
        5,
        "four charts and the roofline"
    );
    for fetch in [
        "src=\"http",
        "href=\"http",
        "<script",
        "<link",
        "@import",
        "url(",
    ] {
        assert!(
            !html.contains(fetch),
            "the report fetches something: {fetch}"
        );
    }
    // What the tables and the advice say.
    let manifest: serde_json::Value =
        serde_json::from_str(&read(&dir.join("manifest.json"))).unwrap_or_default();
    let conditions = manifest["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!conditions.is_empty());
    for id in conditions.iter().filter_map(|c| c["id"].as_str()) {
        assert!(html.contains(id), "{id} is missing");
    }
    assert!(html.contains("ceilings: "), "no roofline text");
    assert!(html.contains("Device: "));

    // Valid HTML: tidy's exit code is 2 for errors (1 for warnings only).
    let tidy = tool("tidy", "tidy");
    let checked = match Command::new(tidy)
        .args(["-quiet", "-errors", "--show-warnings", "no"])
        .arg(&file)
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("cannot run tidy: {e}"),
    };
    assert!(
        checked.status.code().is_some_and(|c| c < 2),
        "tidy finds errors: {}",
        String::from_utf8_lossy(&checked.stderr)
    );

    // Renders: the browser loads it offline, builds the table and draws a picture of it.
    let browser = tool("chromium-headless-shell", "chromium-headless-shell");
    let shot = tmp.path().join("report.png");
    let profile = tmp.path().join("browser-profile");
    let url = format!("file://{}", file.display());
    let run = |extra: &[String]| {
        match Command::new(&browser)
            .args([
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1280,2000",
                // Nothing outside the file: a request elsewhere would fail and be logged.
                "--host-resolver-rules=MAP * ~NOTFOUND",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .output()
        {
            Ok(o) => o,
            Err(e) => panic!("cannot run chromium-headless-shell: {e}"),
        }
    };
    let dom = run(&["--dump-dom".to_string()]);
    let stderr = String::from_utf8_lossy(&dom.stderr).into_owned();
    assert!(dom.status.success(), "the browser failed: {stderr}");
    let text = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(text.contains("<table>") && text.contains("<svg"), "{text}");
    for complaint in ["Uncaught", "Failed to load resource", "ERR_", "CONSOLE"] {
        assert!(
            !stderr.contains(complaint),
            "the browser complains: {stderr}"
        );
    }
    let drawn = run(&[format!("--screenshot={}", shot.display())]);
    assert!(
        drawn.status.success(),
        "{}",
        String::from_utf8_lossy(&drawn.stderr)
    );
    let png = std::fs::read(&shot).unwrap_or_default();
    assert!(
        png.len() > 10_000 && png.starts_with(b"\x89PNG"),
        "no picture: {} bytes",
        png.len()
    );
}

#[test]
fn a_report_without_ceilings_says_how_to_get_a_roofline() {
    let tmp = temp_dir();
    let dir = results_with_ceilings(tmp.path());
    if let Err(e) = std::fs::remove_file(dir.join("roofline.json")) {
        panic!("{e}");
    }
    edgeprof()
        .env("EDGEPROF_CACHE_DIR", tmp.path().join("no-cache"))
        .arg("report")
        .arg(&dir)
        .arg("--html")
        .assert()
        .success();
    let html = read(&dir.join("report.html"));
    assert_eq!(html.matches("<svg").count(), 4, "the four charts");
    assert!(
        html.contains("edgeprof roofline measure"),
        "no word on the roofline"
    );
}

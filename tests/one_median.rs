//! One condition's median is one figure everywhere: the progress line, summary.csv,
//! summary.json, the HTML report, the terminal UI and `compare` give the same median (the
//! median over every timed iteration) with the same interval, the one computed for it.

mod common;

use common::tmux::Tmux;
use common::*;

/// The `X ±Y` after `median ` in `text`.
fn median_in(text: &str) -> (String, String) {
    let after = match text.split_once("median ") {
        Some((_, rest)) => rest,
        None => panic!("no median in: {text}"),
    };
    let mut words = after.split_whitespace();
    let value = words.next().unwrap_or("").to_string();
    let ci = words
        .find(|w| w.starts_with('±'))
        .map(|w| w.trim_start_matches('±').trim_end_matches(',').to_string())
        .unwrap_or_default();
    (value, ci)
}

#[test]
fn every_view_gives_the_same_median_and_interval() {
    let tmp = temp_dir();
    let config = tmp.path().join("one.toml");
    write(
        &config,
        "name = \"one\"\n[matrix]\nmodels = [\"shufflenet_v2_x0_5\"]\ninputs = [\"3x32x32\"]\n\
         threads = [1]\n[measure]\nwarmup = 2\niterations = 40\nrepeats = 3\n",
    );
    let out = tmp.path().join("results");
    let run = run_config(&config, &out);
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
    let line = stderr
        .lines()
        .find(|l| l.contains(": ok, mean "))
        .unwrap_or_else(|| panic!("no result line: {stderr}"));
    let (median, ci) = median_in(line);
    assert!(!median.is_empty() && !ci.is_empty(), "{line}");
    let dir = only_entry(&out);

    // summary.csv
    let csv = read(&dir.join("summary.csv"));
    let mut lines = csv.lines();
    let split =
        |line: Option<&str>| edgeprof::text::csv_split(line.unwrap_or("")).unwrap_or_default();
    let header = split(lines.next());
    let row = split(lines.next());
    let cell = |name: &str| -> f64 {
        header
            .iter()
            .position(|h| *h == name)
            .and_then(|i| row.get(i))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {csv}"))
    };
    assert_eq!(format!("{:.3}", cell("median_ms")), median, "{csv}");
    assert_eq!(format!("{:.3}", cell("median_ci_ms")), ci, "{csv}");

    // summary.json
    let json: serde_json::Value = match serde_json::from_str(&read(&dir.join("summary.json"))) {
        Ok(v) => v,
        Err(e) => panic!("summary.json: {e}"),
    };
    let condition = &json["conditions"][0];
    let figure = |v: &serde_json::Value| format!("{:.3}", v.as_f64().unwrap_or(f64::NAN));
    assert_eq!(figure(&condition["median_ms"]), median, "{condition}");
    assert_eq!(figure(&condition["median_ci_ms"]), ci, "{condition}");

    // The HTML report.
    let html_file = tmp.path().join("report.html");
    edgeprof()
        .arg("report")
        .arg(&dir)
        .arg("--html")
        .arg(&html_file)
        .assert()
        .success();
    let html = read(&html_file);
    assert!(
        html.contains(&format!("{median} ±{ci}")),
        "{median} ±{ci} not in the HTML"
    );

    // compare, the directory against itself.
    let compared = json_of(&[
        "compare",
        &dir.display().to_string(),
        &dir.display().to_string(),
        "--json",
    ]);
    assert_eq!(
        figure(&compared["conditions"][0]["baseline_median_ms"]),
        median,
        "{compared}"
    );

    // The terminal UI's Results tab, the condition's detail.
    let bin = edgeprof().get_program().to_string_lossy().into_owned();
    let t = Tmux::start(
        tmp.path(),
        &format!(
            "EDGEPROF_CACHE_DIR=cache '{bin}' tui --open '{}'; echo done > finished.txt",
            dir.display()
        ),
    );
    t.wait_for(&format!("median {median} ms ±{ci}"), 30);
    t.keys(&["q"]);
    t.wait_file("finished.txt", 20);
}

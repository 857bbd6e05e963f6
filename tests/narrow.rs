//! Headless output on a narrow terminal: in an 80-column terminal (tmux, `stty cols 80`) the
//! tables fit, long names cut in the middle and the least important columns left out and
//! named; `--wide`, a file or a pipe get them whole. tmux must be installed (.ci/run installs
//! it).

mod common;

use common::tmux::Tmux;
use common::{edgeprof, temp_dir};

/// The tables among `lines`: each header, its rule of dashes, and its rows up to a blank line.
fn tables<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 && !l.is_empty() && l.chars().all(|c| c == '-') {
            out.push(lines[i - 1]);
            out.extend(lines[i..].iter().take_while(|l| !l.is_empty()));
        }
    }
    out
}

/// The lines between `start` and `end` in `text`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| !l.contains(start))
        .skip(1)
        .take_while(|l| !l.contains(end))
        .collect()
}

#[test]
fn a_report_fits_an_80_column_terminal_and_wide_or_piped_output_is_whole() {
    let dir = temp_dir();
    let bin = edgeprof().get_program().to_string_lossy().into_owned();
    // A copy: `report` writes the summaries into the directory.
    let copy = dir.path().join("default");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/default"),
        )
        .arg(&copy)
        .status();
    assert!(status.is_ok_and(|s| s.success()), "cannot copy the fixture");
    let results = copy.display().to_string();
    let report = format!("'{bin}' report --no-charts '{results}'");
    let t = Tmux::start(
        dir.path(),
        &format!(
            "stty cols 80 rows 24; echo NARROW; {report}; echo WIDE; '{bin}' --wide report \
             --no-charts '{results}'; echo PIPED; {report} | cat; echo END; \
             echo done > finished.txt"
        ),
    );
    t.wait_file("finished.txt", 60);
    // The whole history, lines that the terminal wrapped joined again.
    let text = t.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "s"]);
    let widest = |lines: &[&str]| lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let narrow = between(&text, "NARROW", "WIDE");
    let wide = between(&text, "WIDE", "PIPED");
    let piped = between(&text, "PIPED", "END");
    assert!(narrow.len() > 10, "{text}");
    // The tables: a header, its rule, and rows up to a blank line.
    let narrow_tables = tables(&narrow);
    assert!(narrow_tables.len() > 48, "{}", narrow.join("\n"));
    assert!(
        widest(&narrow_tables) <= 80,
        "a table line over 80 columns:\n{}",
        narrow.join("\n")
    );
    // Every condition's row stays distinguishable: the summary's 48 names differ.
    let names: std::collections::BTreeSet<&str> = narrow_tables
        .iter()
        .skip(2)
        .take(48)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.len(), 48, "{}", narrow.join("\n"));
    assert!(
        narrow
            .iter()
            .any(|l| l.starts_with("(every condition is */*/")),
        "{}",
        narrow.join("\n")
    );
    assert!(
        narrow.iter().any(|l| l.starts_with("(not shown: ")),
        "{}",
        narrow.join("\n")
    );
    for whole in [&wide, &piped] {
        assert!(widest(whole) > 80, "{}", whole.join("\n"));
        assert!(
            !whole.iter().any(|l| l.contains("not shown")),
            "{}",
            whole.join("\n")
        );
    }
}

/// The main job headless in an 80-column terminal: every line it prints fits (long record
/// lines wrap at spaces with an indent, the tables fit) and the skipped framework is one line.
#[test]
fn a_headless_run_fits_an_80_column_terminal() {
    let dir = temp_dir();
    let bin = edgeprof().get_program().to_string_lossy().into_owned();
    let worker = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/workers/slow.sh")
        .display()
        .to_string();
    common::write(
        &dir.path().join("c.toml"),
        &format!(
            "name = \"a-config-with-a-rather-long-name-for-80-columns\"\n[command]\n\
             program = \"{worker}\"\nargs = [\"0.3\"]\n[matrix]\n\
             engines = [\"command\", \"pytorch\"]\n\
             models = [\"shufflenet_v2_x0_5\", \"mobilenet_v2\"]\ninputs = [\"3x224x224\"]\n\
             batch = [1, 2]\n[measure]\nsample_interval_ms = 50\n"
        ),
    );
    let data = dir.path().join("data");
    let t = Tmux::start(
        dir.path(),
        &format!(
            "stty cols 80 rows 24; echo START; EDGEPROF_DATA_DIR='{}' PATH=/usr/bin:/bin '{bin}' \
             run c.toml --output out --no-charts; echo END; echo done > finished.txt",
            data.display()
        ),
    );
    t.wait_file("finished.txt", 120);
    let text = t.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "s"]);
    let lines = between(&text, "START", "END");
    assert!(lines.len() > 5, "{text}");
    let long: Vec<&&str> = lines.iter().filter(|l| l.chars().count() > 80).collect();
    assert!(
        long.is_empty(),
        "lines over 80 columns:\n{}",
        lines.join("\n")
    );
    let skips: Vec<&&str> = lines.iter().filter(|l| l.contains("skipped")).collect();
    assert!(
        skips
            .iter()
            .any(|l| l.contains("skipped 4 conditions of pytorch")),
        "{}",
        lines.join("\n")
    );
    let words = lines
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(words.contains("4 ok, 0 failed"), "{}", lines.join("\n"));
    assert!(
        words.contains("why: 4 skipped condition(s) of pytorch: pytorch is not set up"),
        "{}",
        lines.join("\n")
    );
}

/// In an 80-column terminal no line of `roofline show`, `bench`, `scorecard`, `report` or the
/// interrupted-run error is broken by the terminal inside a word: edgeprof breaks its long lines
/// at spaces itself (tmux's joined capture shows a line the terminal wrapped as one over 80).
#[test]
fn no_line_is_broken_inside_a_word_at_80_columns() {
    let dir = temp_dir();
    let bin = edgeprof().get_program().to_string_lossy().into_owned();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let copy = dir.path().join("default");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(root.join("tests/fixtures/results/default"))
        .arg(&copy)
        .status();
    assert!(status.is_ok_and(|s| s.success()), "cannot copy the fixture");
    common::write(
        &dir.path().join("slow.toml"),
        &format!(
            "name = \"slow\"\n[command]\nprogram = \"{}\"\nargs = [\"30\"]\n[matrix]\n\
             engines = [\"command\"]\nmodels = [\"resnet18\"]\nbatch = [1, 2]\n",
            root.join("tests/fixtures/workers/slow.sh").display()
        ),
    );
    let ert = root.join("tests/fixtures/ert/new-dialect.json");
    let t = Tmux::start(
        dir.path(),
        &format!(
            "stty cols 80 rows 24; export EDGEPROF_CACHE_DIR=cache; \
             '{bin}' roofline import-ert '{ert}' > /dev/null; \
             echo SHOW; '{bin}' roofline show --ascii; \
             echo BENCH; '{bin}' bench --model shufflenet_v2_x0_5 --input 3x32x32 --warmup 1 \
             --iterations 5; \
             echo SCORECARD; '{bin}' scorecard --no-probe; \
             echo REPORT; '{bin}' report --no-charts default; \
             echo INTERRUPTED; timeout -s INT 4 '{bin}' run slow.toml --output out --no-charts; \
             echo END; echo done > finished.txt",
            ert = ert.display()
        ),
    );
    t.wait_file("finished.txt", 120);
    let text = t.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "s"]);
    for (start, end) in [
        ("SHOW", "BENCH"),
        ("BENCH", "SCORECARD"),
        ("SCORECARD", "REPORT"),
        ("REPORT", "INTERRUPTED"),
        ("INTERRUPTED", "END"),
    ] {
        let lines = between(&text, start, end);
        assert!(lines.len() > 2, "{start}: {text}");
        let broken: Vec<&&str> = lines.iter().filter(|l| l.chars().count() > 80).collect();
        assert!(
            broken.is_empty(),
            "{start}: lines the terminal broke:\n{}",
            broken
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert!(
        between(&text, "INTERRUPTED", "END")
            .join(" ")
            .contains("edgeprof run --resume"),
        "{text}"
    );
}

/// The rows of the first table among `lines` (after its rule, up to a blank line).
fn rows_of<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .skip_while(|l| l.is_empty() || !l.chars().all(|c| c == '-'))
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with("(not shown"))
        .copied()
        .collect()
}

/// In an 80-column terminal a table keeps the columns that carry its point: `compare` its
/// verdict and the part of each condition's id that differs (`t0→t1`, `→candle`), `roofline
/// layers` the saving it ranks by.
#[test]
fn narrow_tables_keep_the_columns_that_carry_their_point() {
    let dir = temp_dir();
    let bin = edgeprof().get_program().to_string_lossy().into_owned();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let results = root.join("tests/fixtures/results");
    let t = Tmux::start(
        dir.path(),
        &format!(
            "stty cols 80 rows 24; export EDGEPROF_CACHE_DIR=cache; \
             echo PAIR; '{bin}' compare '{default}' '{small}'; \
             echo WITHIN; '{bin}' compare '{default}' --within engine=tract; \
             echo LAYERS; '{bin}' roofline layers mobilenet_v2 --input 3x32x32 --threads 1 \
             --runs 2 --ascii --ceilings '{pi4}'; \
             echo END; echo done > finished.txt",
            default = results.join("default").display(),
            small = results.join("small").display(),
            pi4 = root.join("tests/fixtures/ceilings-pi4.json").display(),
        ),
    );
    t.wait_file("finished.txt", 180);
    let text = t.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "s"]);
    let verdicts = ["slower", "faster", "not significant", "not in both"];
    for (start, end) in [("PAIR", "WITHIN"), ("WITHIN", "LAYERS")] {
        let lines = between(&text, start, end);
        assert!(
            lines.iter().all(|l| l.chars().count() <= 80),
            "{start}: a line over 80 columns:\n{}",
            lines.join("\n")
        );
        let rows = rows_of(&lines);
        assert!(rows.len() > 5, "{start}: {}", lines.join("\n"));
        for row in &rows {
            assert!(
                verdicts.iter().any(|v| row.ends_with(v)),
                "{start}: a row without its verdict: {row}"
            );
        }
    }
    let pair = rows_of(&between(&text, "PAIR", "WITHIN"));
    assert!(
        pair[0].starts_with("tract/shufflenet_v2_x0_5/3x32x32/t0→t1 "),
        "{}",
        pair.join("\n")
    );
    let within = rows_of(&between(&text, "WITHIN", "LAYERS"));
    for engine in ["candle", "pytorch", "tflite"] {
        assert!(
            within
                .iter()
                .any(|r| r.starts_with(&format!("tract→{engine}/"))),
            "no row for {engine}: {}",
            within.join("\n")
        );
    }
    let layers = between(&text, "LAYERS", "END");
    let header = layers.iter().find(|l| l.contains(" layer "));
    assert!(
        header.is_some_and(|h| h.ends_with("saving %")),
        "{}",
        layers.join("\n")
    );
    let rows = rows_of(&layers);
    assert!(rows.len() > 5, "{}", layers.join("\n"));
    for row in rows {
        let last = row.split_whitespace().last().unwrap_or("");
        assert!(last.parse::<f64>().is_ok(), "no saving in: {row}");
    }
}

//! The documentation keeps up with the binary: every subcommand `edgeprof --help` lists has its
//! page under docs/commands/, the README stays short (at most 300 lines; the rest lives in docs/),
//! and every relative link in README.md and docs/**/*.md points to a file or folder that exists.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The most lines README.md may have.
const README_MAX_LINES: usize = 300;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => panic!("cannot read {}: {e}", path.display()),
    }
}

/// The subcommands listed under "Commands:" in `edgeprof --help`, without `help`.
fn subcommands() -> Vec<String> {
    let output = match Command::new(env!("CARGO_BIN_EXE_edgeprof"))
        .arg("--help")
        .env("NO_COLOR", "1")
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("cannot run edgeprof --help: {e}"),
    };
    assert!(
        output.status.success(),
        "edgeprof --help failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut names = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line.trim_end() == "Commands:" {
            in_commands = true;
            continue;
        }
        if !in_commands {
            continue;
        }
        if line.trim().is_empty() {
            break;
        }
        // A command's line starts with two spaces and its name; the wrapped rest of a
        // description is indented further.
        let Some(rest) = line.strip_prefix("  ") else {
            continue;
        };
        if rest.starts_with(' ') {
            continue;
        }
        if let Some(name) = rest.split_whitespace().next() {
            if name != "help" {
                names.push(name.to_string());
            }
        }
    }
    assert!(
        !names.is_empty(),
        "no subcommands found under \"Commands:\" in edgeprof --help:\n{help}"
    );
    names
}

#[test]
fn every_subcommand_has_a_page() {
    let dir = root().join("docs").join("commands");
    let missing: Vec<String> = subcommands()
        .into_iter()
        .filter(|name| !dir.join(format!("{name}.md")).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "subcommands without a page docs/commands/NAME.md: {}",
        missing.join(", ")
    );
}

#[test]
fn readme_is_short() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the rest into docs/"
    );
}

/// Every Markdown file under `dir`, recursively.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => panic!("cannot list {}: {e}", dir.display()),
    };
    for entry in entries {
        let path = match entry {
            Ok(e) => e.path(),
            Err(e) => panic!("cannot list {}: {e}", dir.display()),
        };
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "md") {
            out.push(path);
        }
    }
}

/// The text of a line outside its code spans (between backticks).
fn outside_code_spans(line: &str) -> String {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, part)| part)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The targets of the inline links `[text](target)` of a Markdown text, with their line
/// numbers, outside fenced code blocks and code spans.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let plain = outside_code_spans(line);
        let mut rest = plain.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            // A title after the target ("…" or '…') is not part of it.
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            let target = target.trim_start_matches('<').trim_end_matches('>');
            targets.push((number + 1, target.to_string()));
            rest = &rest[end..];
        }
    }
    targets
}

#[test]
fn relative_links_point_to_files_that_exist() {
    let root = root();
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let dir = match file.parent() {
            Some(d) => d.to_path_buf(),
            None => root.clone(),
        };
        for (line, target) in link_targets(&read(file)) {
            if target.is_empty()
                || target.starts_with('#')
                || target.contains("://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let path = target.split('#').next().unwrap_or("");
            if path.is_empty() {
                continue;
            }
            if !dir.join(path).exists() {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                broken.push(format!("{}:{line}: {target}", shown.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "relative links to files that do not exist:\n{}",
        broken.join("\n")
    );
}

//! The layers of the source tree, read from its own imports. Imports flow one way: the bottom
//! (samplers and readers, models, the config, statistics and the small shared helpers) names
//! nothing above it, nothing below the front-ends (`cli`, `tui`, in the binary) names them, and
//! no two modules name each other, directly or around a loop (the UI names nothing of the CLI).
//!
//! `cargo test --test layering -- --nocapture` prints the module import graph and its cycles.
//! Files follow concepts, not a line count: a long file that is one concept stays whole. Every
//! child process starts through the one supervisor, no public function's error is a bare
//! string, and `anyhow` is the front-ends' alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The front-ends: the binary's own modules.
const FRONT_ENDS: &[&str] = &["cli", "tui"];
/// The bottom layer, and the shared helpers it may use.
const BOTTOM: &[&str] = &[
    "collect", "models", "config", "stats", "error", "files", "text",
];
/// The bottom modules the rule is about (the helpers name nothing at all).
const RULED_BOTTOM: &[&str] = &["config", "models", "stats", "collect"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => panic!("cannot list {}: {e}", dir.display()),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/runner/sweep.rs` → `runner`), and how deep it
/// sits below that module's own file (0 for `src/runner/mod.rs` and `src/bench.rs`).
fn module_of(src: &Path, file: &Path) -> (String, usize) {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let first = parts.first().cloned().unwrap_or_default();
    let top = first.trim_end_matches(".rs").to_string();
    let depth = if parts.len() == 1 || parts.last().is_some_and(|l| l == "mod.rs") {
        parts.len().saturating_sub(2)
    } else {
        parts.len() - 1
    };
    (top, depth)
}

/// The identifier that starts `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules one line of code names through `root` (`crate::`, `edgeprof::`, or
/// `super::` that climbs to the crate root), including the names inside `root{a, b::c}`.
fn named(line: &str, root: &str, out: &mut BTreeSet<String>) {
    let mut rest = line;
    while let Some(i) = rest.find(root) {
        let before = rest[..i].chars().last();
        let after = &rest[i + root.len()..];
        rest = after;
        // `foo_crate::` or `$crate::` is not the crate root.
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                let name = ident(item.trim());
                if !name.is_empty() {
                    out.insert(name.to_string());
                }
            }
        } else {
            let name = ident(after);
            if !name.is_empty() {
                out.insert(name.to_string());
            }
        }
    }
}

/// For each top-level module of `src/` (the library's and the binary's), the other top-level
/// modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut modules: BTreeSet<String> = BTreeSet::new();
    for file in &files {
        modules.insert(module_of(&src, file).0);
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let (top, depth) = module_of(&src, file);
        if top == "lib" || top == "main" {
            continue;
        }
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => panic!("cannot read {}: {e}", file.display()),
        };
        let climb = "super::".repeat(depth + 1);
        let mut names = BTreeSet::new();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            named(code, "crate::", &mut names);
            named(code, "edgeprof::", &mut names);
            named(code, &climb, &mut names);
        }
        let entry = edges.entry(top.clone()).or_default();
        for name in names {
            if name != top && modules.contains(&name) {
                entry.insert(name);
            }
        }
    }
    edges
}

/// The import cycles: strongly connected components of more than one module.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(m) = stack.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (m, from_m) in &reachable {
        let component: BTreeSet<String> = from_m
            .iter()
            .filter(|o| reachable.get(o).is_some_and(|r| r.contains(*m)))
            .cloned()
            .collect();
        if component.len() > 1 && !out.contains(&component) {
            out.push(component);
        }
    }
    out
}

#[test]
fn imports_flow_down_the_layers() {
    let edges = graph();
    println!("module import graph (module -> the modules it names):");
    for (m, to) in &edges {
        let list: Vec<&str> = to.iter().map(String::as_str).collect();
        println!("  {m:<11} -> {}", list.join(" "));
    }
    let loops = cycles(&edges);
    if loops.is_empty() {
        println!("no import cycles");
    }
    for c in &loops {
        let list: Vec<&str> = c.iter().map(String::as_str).collect();
        println!("import cycle of {}: {}", c.len(), list.join(" "));
    }

    let mut broken = Vec::new();
    for (m, to) in &edges {
        if FRONT_ENDS.contains(&m.as_str()) {
            continue;
        }
        for f in FRONT_ENDS {
            if to.contains(*f) {
                broken.push(format!("{m} names the front-end {f}"));
            }
        }
        if RULED_BOTTOM.contains(&m.as_str()) {
            for t in to {
                if !BOTTOM.contains(&t.as_str()) {
                    broken.push(format!("{m} (bottom layer) names {t}, which is above it"));
                }
            }
        }
    }
    // A cycle, the front-ends' among them (the CLI opens the UI; the UI names nothing of the
    // CLI), means two modules each need the other: one of them holds what both share.
    for c in &loops {
        let list: Vec<&str> = c.iter().map(String::as_str).collect();
        broken.push(format!("import cycle among {}", list.join(", ")));
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
    // The graph really was read: the front-ends reach the domain.
    assert!(edges.get("cli").is_some_and(|t| t.contains("runner")));
    assert!(edges.get("runner").is_some_and(|t| t.contains("config")));
}

#[test]
fn the_reader_sees_every_spelling_of_an_import() {
    let mut names = BTreeSet::new();
    named("use crate::{cli, runner::matrix};", "crate::", &mut names);
    named("let x = crate::tui::run();", "crate::", &mut names);
    named("$crate::console::err(x)", "crate::", &mut names);
    named("other_crate::thing", "crate::", &mut names);
    named("use super::super::report;", "super::super::", &mut names);
    let list: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(list, ["cli", "report", "runner", "tui"]);
    let src = Path::new("/p/src");
    assert_eq!(
        module_of(src, Path::new("/p/src/bench.rs")),
        ("bench".into(), 0)
    );
    assert_eq!(
        module_of(src, Path::new("/p/src/runner/mod.rs")),
        ("runner".into(), 0)
    );
    assert_eq!(
        module_of(src, Path::new("/p/src/runner/sweep.rs")),
        ("runner".into(), 1)
    );
    assert_eq!(
        module_of(src, Path::new("/p/src/collect/telemetry/mod.rs")),
        ("collect".into(), 1)
    );
}

/// The error type of a `Result<T, E>` return type in `signature` (whitespace collapsed), if any.
fn result_error(signature: &str) -> Option<String> {
    let ret = signature.split_once("->")?.1;
    let start = ret.find("Result<")? + "Result<".len();
    let mut depth = 0usize;
    let mut last_comma = None;
    for (i, c) in ret[start..].char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' if depth > 0 => depth -= 1,
            '>' => {
                let from = last_comma.map_or(start, |c| c + 1);
                return last_comma.map(|_| ret[from..start + i].trim().to_string());
            }
            ',' if depth == 0 => last_comma = Some(start + i),
            _ => {}
        }
    }
    None
}

#[test]
fn the_reader_of_result_types_finds_the_error_type() {
    let e = |s: &str| result_error(s);
    assert_eq!(
        e("pub fn f(a: u8) -> Result<(u8, String), String>").as_deref(),
        Some("String")
    );
    assert_eq!(
        e("pub fn f() -> Result<HashMap<u8, String>, BadInput>").as_deref(),
        Some("BadInput")
    );
    assert_eq!(e("pub fn f() -> anyhow::Result<String>"), None);
    assert_eq!(e("pub fn f() -> Option<String>"), None);
}

#[test]
fn no_public_function_returns_a_bare_string_error() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found: Vec<String> = Vec::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => panic!("cannot read {}: {e}", file.display()),
        };
        // Unit tests at the end of a file are not the module's interface.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("pub") {
            let tail = &rest[at..];
            rest = &rest[at + 3..];
            let head: String = tail.chars().take(40).collect();
            let visibility_then_fn = head
                .trim_start_matches("pub")
                .trim_start_matches(|c: char| {
                    c == '(' || c.is_alphanumeric() || c == ':' || c == ')'
                })
                .trim_start()
                .starts_with("fn ");
            if !visibility_then_fn || !head.starts_with("pub") {
                continue;
            }
            let end = tail.find(['{', ';']).unwrap_or(tail.len());
            let signature = tail[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            if result_error(&signature).as_deref() == Some("String") {
                found.push(format!("{}: {signature}", file.display()));
            }
        }
    }
    assert!(files.len() > 50, "read only {} files", files.len());
    assert!(
        found.is_empty(),
        "give these a typed error (edgeprof::error or the module's own):\n{}",
        found.join("\n")
    );
}

/// The lines of the source files, outside the folders in `skip`, that `matches` (given the
/// line and the text before any comment on it), as `FILE:LINE: TEXT`; each file is read up to
/// its unit tests' module when `code_only`.
fn lines_matching(
    skip: &[PathBuf],
    code_only: bool,
    matches: impl Fn(&str) -> bool,
) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "read only {} files", files.len());
    let mut found: Vec<String> = Vec::new();
    for file in &files {
        if skip.iter().any(|s| file.starts_with(s))
            || (code_only && file.file_name().is_some_and(|n| n == "tests.rs"))
        {
            continue;
        }
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => panic!("cannot read {}: {e}", file.display()),
        };
        let code = if code_only {
            text.split("#[cfg(test)]\nmod tests").next().unwrap_or("")
        } else {
            &text
        };
        for (n, line) in code.lines().enumerate() {
            if matches(line.split("//").next().unwrap_or("")) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

/// Every child process starts through the one supervisor, `collect::child`, which gives it its
/// process group, parent-death signal and CPUs before exec: no other module makes a command
/// (unit tests aside).
#[test]
fn only_the_supervisor_makes_commands() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = lines_matching(&[src.join("collect").join("child")], true, |code| {
        code.contains("Command::new(")
    });
    assert!(
        found.is_empty(),
        "start these through collect::child::Spec:\n{}",
        found.join("\n")
    );
}

/// `anyhow` stays at the binary's edge: the library's errors are typed (`error::Error` with its
/// kind, or a module's own error type), so a front-end branches on a kind rather than looking
/// inside. Comments may name it.
#[test]
fn anyhow_is_only_in_the_front_ends() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edge: Vec<PathBuf> = FRONT_ENDS
        .iter()
        .map(|f| src.join(f))
        .chain([src.join("main.rs")])
        .collect();
    let found = lines_matching(&edge, false, |code| code.contains("anyhow"));
    assert!(
        found.is_empty(),
        "the library returns error::Result (or a typed error), not anyhow:\n{}",
        found.join("\n")
    );
}

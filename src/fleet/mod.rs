//! Reaching boards over SSH with the system's OpenSSH client, so `~/.ssh/config`,
//! agents and known hosts work as the user set them up. Every value from a config reaches the
//! remote shell as one single-quoted word (or `"$HOME"/'…'` for `~/` paths): data, never code.

pub mod attach;
mod error;
pub mod install;
mod launch;
pub mod run;

pub use error::FleetError;

use crate::collect::child::Spec;
use crate::config::Node;
use crate::error::ChildFailed;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// How long a node may take to answer `nodes check` (it probes the frameworks' interpreters).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one binary copy may take (tens of MiB over a slow link).
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

pub use crate::config::node_name::{dir_name, name_problem, MAX_NAME};

/// One word of a remote command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Passed as data: single-quoted.
    Data(String),
    /// Shell syntax edgeprof itself writes (`&&`, `>`, `2>&1`): never built from config values.
    Syntax(&'static str),
}

/// POSIX single-quoting: `it's` → `'it'\''s'`. A `~/` prefix becomes `"$HOME"/` so the remote
/// home is used; everything after it stays quoted.
pub fn quote(text: &str) -> String {
    let single = |t: &str| format!("'{}'", t.replace('\'', r"'\''"));
    match text.strip_prefix("~/") {
        Some(rest) if !rest.is_empty() => format!("\"$HOME\"/{}", single(rest)),
        Some(_) => "\"$HOME\"".to_string(),
        None if text == "~" => "\"$HOME\"".to_string(),
        None => single(text),
    }
}

/// The remote command line for `words`.
pub fn command_line(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| match w {
            Word::Data(text) => quote(text),
            Word::Syntax(s) => s.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// ssh options edgeprof sets unless a node's `ssh_options` set them. The connect timeout also
/// bounds the handshake, and the keep-alives make a link that died silently (a board unplugged,
/// a Wi-Fi drop) end its ssh in about a minute, where TCP alone would wait for hours and keep
/// its node's share hanging.
pub const SSH_DEFAULTS: [(&str, &str); 3] = [
    ("ConnectTimeout", "10"),
    ("ServerAliveInterval", "15"),
    ("ServerAliveCountMax", "4"),
];

/// The `ssh` invocation that runs `remote` on `node`: batch mode (no password prompts), the
/// [`SSH_DEFAULTS`] the node does not set, its port, identity and options, then `--` so the
/// destination can never be read as an option.
pub fn ssh(node: &Node, remote: &str) -> Spec {
    ssh_logging(node, remote, None)
}

/// [`ssh`], with ssh's own messages (`-E`) going to `log` instead of its stderr, which then
/// holds only what the remote command says: ssh's reason for ending and the node's last words
/// stay apart.
pub fn ssh_logging(node: &Node, remote: &str, log: Option<&Path>) -> Spec {
    let mut command = Spec::new("ssh");
    command.args(["-o", "BatchMode=yes"]);
    if let Some(log) = log {
        command.arg("-E").arg(log);
    }
    // ssh keeps the first value it is given for an option, so a default given before the
    // node's own would silently win over it: leave out those the node sets (keys are
    // case-insensitive).
    let set_by_node = |key: &str| {
        node.ssh_options.iter().any(|o| {
            o.split_once('=')
                .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case(key))
        })
    };
    for (key, value) in SSH_DEFAULTS {
        if !set_by_node(key) {
            command.arg("-o").arg(format!("{key}={value}"));
        }
    }
    if let Some(port) = node.port {
        command.arg("-p").arg(port.to_string());
    }
    if let Some(identity) = &node.identity {
        command.arg("-i").arg(identity);
        command.args(["-o", "IdentitiesOnly=yes"]);
    }
    for option in &node.ssh_options {
        command.arg("-o").arg(option);
    }
    command.arg("--").arg(&node.destination).arg(remote);
    command
}

/// The line that ends a share's config on the stdin of `edgeprof run - --stream --control` (a
/// TOML comment, so the text stays a valid config). What follows on stdin is the controller's
/// control channel: when it ends (the controller closed it, or went away), the node stops its
/// sweep as an interrupted one, keeping what it finished.
pub const SHARE_END: &str = "# edgeprof: end of the share";

/// A line of `edgeprof run --stream`: what a node sends its controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// The node's results directory (on the node) and its manifest (its device fingerprint).
    Started {
        dir: std::path::PathBuf,
        manifest: Box<crate::results::Manifest>,
    },
    /// One attempt at one condition, as the node stored it.
    Record(Box<crate::results::RunRecord>),
    /// The sweep ended; its final manifest.
    Finished {
        manifest: Box<crate::results::Manifest>,
    },
}

/// What a node's edgeprof says about itself (`edgeprof node-info`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub edgeprof_version: String,
    pub arch: String,
    pub fingerprint: crate::collect::device::Fingerprint,
    /// Engine → whether it can run there, and the readiness in words.
    pub engines: Vec<(String, bool, String)>,
}

/// This machine's answer to `node-info`.
pub fn node_info() -> NodeInfo {
    let engines = crate::engines::env::engines_here(&Default::default())
        .into_iter()
        .map(|(name, readiness)| {
            let ready = matches!(
                readiness,
                crate::engines::env::Readiness::BuiltIn { .. }
                    | crate::engines::env::Readiness::Ready(_)
            );
            (name, ready, readiness.describe())
        })
        .collect();
    NodeInfo {
        edgeprof_version: env!("CARGO_PKG_VERSION").to_string(),
        arch: std::env::consts::ARCH.to_string(),
        fingerprint: crate::collect::device::fingerprint(Path::new("/")),
        engines,
    }
}

/// A node's state as `nodes check` found it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Check {
    /// ssh could not log in or connect (its last words).
    Unreachable { reason: String },
    /// Reachable, but no edgeprof at the configured path.
    NoEdgeprof { arch: String, path: String },
    /// Reachable and edgeprof answered; the working directory could not be made.
    Ready {
        info: Box<NodeInfo>,
        workdir_ok: bool,
        workdir_error: Option<String>,
    },
    /// edgeprof there answered something else than its JSON.
    Broken { reason: String },
}

/// The marker a node prints when edgeprof is not at its path.
const MISSING: &str = "edgeprof-missing";

/// The remote script of `nodes check`: make the working directory, then ask edgeprof, or say it
/// is missing with the machine's architecture.
pub fn check_script(node: &Node) -> String {
    let exe = Word::Data(node.edgeprof.clone());
    let workdir = Word::Data(node.workdir.clone());
    command_line(&[
        Word::Syntax("if mkdir -p"),
        workdir,
        Word::Syntax("2>/dev/null; then echo workdir-ok; else echo workdir-failed; fi;"),
        Word::Syntax("if [ -x"),
        exe.clone(),
        Word::Syntax("] || command -v"),
        exe.clone(),
        Word::Syntax(">/dev/null 2>&1; then"),
        exe,
        Word::Syntax("node-info; else echo"),
        Word::Data(MISSING.to_string()),
        Word::Syntax("\"$(uname -m)\"; fi"),
    ])
}

/// Reads `nodes check`'s answer: exit status, stdout, stderr.
pub fn parse_check(node: &Node, status: Option<i32>, stdout: &str, stderr: &str) -> Check {
    let last_words = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    // ssh exits 255 when it cannot connect or authenticate.
    if status == Some(255) {
        return Check::Unreachable {
            reason: if last_words.is_empty() {
                "ssh failed without a message".to_string()
            } else {
                last_words
            },
        };
    }
    let workdir_ok = stdout.lines().any(|l| l.trim() == "workdir-ok");
    if let Some(line) = stdout.lines().find(|l| l.starts_with(MISSING)) {
        return Check::NoEdgeprof {
            arch: normalize_arch(line.trim_start_matches(MISSING).trim()),
            path: node.edgeprof.clone(),
        };
    }
    match stdout
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .map(serde_json::from_str::<NodeInfo>)
    {
        Some(Ok(info)) => Check::Ready {
            info: Box::new(info),
            workdir_ok,
            workdir_error: (!workdir_ok)
                .then(|| format!("cannot create the working directory {}", node.workdir)),
        },
        Some(Err(e)) => Check::Broken {
            reason: format!("its edgeprof answered something else than node-info's JSON ({e})"),
        },
        None => Check::Broken {
            reason: format!(
                "its edgeprof did not answer node-info (exit status {}): {}",
                status.map_or("unknown".to_string(), |s| s.to_string()),
                if last_words.is_empty() {
                    "no message"
                } else {
                    &last_words
                }
            ),
        },
    }
}

/// `uname -m`'s names as Rust's: arm64 → aarch64, amd64 → x86_64.
pub fn normalize_arch(uname: &str) -> String {
    match uname {
        "arm64" | "armv8l" => "aarch64".to_string(),
        "amd64" => "x86_64".to_string(),
        other => other.to_string(),
    }
}

/// The architecture of an ELF executable, from its header's machine field.
pub fn elf_arch(bytes: &[u8]) -> Option<&'static str> {
    if bytes.len() < 20 || &bytes[..4] != b"\x7fELF" {
        return None;
    }
    let machine = if bytes[5] == 2 {
        u16::from_be_bytes([bytes[18], bytes[19]])
    } else {
        u16::from_le_bytes([bytes[18], bytes[19]])
    };
    Some(match machine {
        0x3e => "x86_64",
        0xb7 => "aarch64",
        0x28 => "arm",
        0xf3 => "riscv64",
        0x03 => "x86",
        _ => "unknown",
    })
}

/// The remote script that precedes an install: the machine's architecture, and the version of
/// the edgeprof already there (if any).
pub fn arch_script(node: &Node) -> String {
    let exe = Word::Data(node.edgeprof.clone());
    command_line(&[
        Word::Syntax("uname -m; if [ -x"),
        exe.clone(),
        Word::Syntax("]; then"),
        exe,
        Word::Syntax("--version 2>/dev/null; fi"),
    ])
}

/// The remote script of `nodes install`: write stdin to a temporary file beside the target,
/// make it executable, move it into place, and run `--version`.
pub fn install_script(node: &Node) -> String {
    let target = node.edgeprof.clone();
    let tmp = format!("{target}.part");
    let dir = match target.rsplit_once('/') {
        Some(("", _)) => "/".to_string(),
        Some((dir, _)) => dir.to_string(),
        None => ".".to_string(),
    };
    command_line(&[
        Word::Syntax("mkdir -p"),
        Word::Data(dir),
        Word::Syntax("&& cat >"),
        Word::Data(tmp.clone()),
        Word::Syntax("&& chmod 755"),
        Word::Data(tmp.clone()),
        Word::Syntax("&& mv -f"),
        Word::Data(tmp),
        Word::Data(target.clone()),
        Word::Syntax("&&"),
        Word::Data(target),
        Word::Syntax("--version"),
    ])
}

/// Runs `command` with `input` on stdin (bytes), killed after `timeout`: exit code (None when
/// killed by a signal), stdout, stderr; Err when it could not start or timed out.
pub fn run(
    command: &Spec,
    input: &[u8],
    timeout: Duration,
) -> Result<(Option<i32>, String, String), crate::error::ChildFailed> {
    crate::engines::env::run_collect(command, input, timeout)
        .map(|(status, stdout, stderr)| (status.code(), stdout, stderr))
        .map_err(|e| ChildFailed(e.0.replace("cannot start it", "cannot start ssh")))
}

/// Checks every node at once: a node that does not answer costs its timeout once, not once
/// per node. The checks come back in the nodes' order.
pub fn check_all(nodes: &[Node]) -> Vec<Check> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|node| scope.spawn(move || check(node)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or(Check::Broken {
                    reason: "the check panicked".to_string(),
                })
            })
            .collect()
    })
}

/// Checks one node.
pub fn check(node: &Node) -> Check {
    match run(&ssh(node, &check_script(node)), b"", CHECK_TIMEOUT) {
        Ok((status, stdout, stderr)) => parse_check(node, status, &stdout, &stderr),
        Err(reason) => Check::Unreachable { reason: reason.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_every_hostile_character_as_data() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("a b; rm -rf $(x) `y`"), "'a b; rm -rf $(x) `y`'");
        assert_eq!(quote("~/edgeprof"), "\"$HOME\"/'edgeprof'");
        assert_eq!(quote("~/a'b"), r#""$HOME"/'a'\''b'"#);
        assert_eq!(quote("~"), "\"$HOME\"");
        // Only a leading ~/ is the home.
        assert_eq!(quote("x/~/y"), "'x/~/y'");
    }

    /// The quoted words, read back by a real POSIX shell, are the values themselves.
    #[test]
    fn a_shell_reads_the_quoted_words_back_unchanged() -> Result<(), String> {
        let values = [
            "it's a \"dir\"",
            "; touch /nonexistent/pwned",
            "$(id) `id` $HOME \\ \n",
            "-n",
            "*",
        ];
        let words: Vec<Word> = std::iter::once(Word::Syntax("printf '%s\\0'"))
            .chain(values.iter().map(|v| Word::Data(v.to_string())))
            .collect();
        let out = std::process::Command::new("sh")
            .args(["-c", &command_line(&words)])
            .output()
            .map_err(|e| e.to_string())?;
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        assert_eq!(got, values);
        Ok(())
    }

    fn node() -> Node {
        Node {
            name: "pi".into(),
            destination: "pi@10.0.0.2".into(),
            port: Some(2222),
            identity: Some("/k/id".into()),
            edgeprof: "~/.local/bin/edgeprof".into(),
            workdir: "~/work dir".into(),
            address: None,
            ssh_options: vec!["StrictHostKeyChecking=accept-new".into()],
        }
    }

    #[test]
    fn ssh_gets_batch_mode_the_node_options_and_the_destination_after_double_dash() {
        let command = ssh(&node(), "true");
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "ServerAliveInterval=15",
                "-o",
                "ServerAliveCountMax=4",
                "-p",
                "2222",
                "-i",
                "/k/id",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "StrictHostKeyChecking=accept-new",
                "--",
                "pi@10.0.0.2",
                "true"
            ]
        );
    }

    /// ssh takes the first value it is given for an option, so a node's own timeouts must
    /// replace edgeprof's defaults rather than follow them.
    #[test]
    fn a_nodes_own_timeouts_and_keep_alives_replace_the_defaults() {
        let mut n = node();
        n.ssh_options = vec!["connecttimeout=60".into(), "ServerAliveInterval=5".into()];
        let args: Vec<String> = ssh(&n, "true")
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let options: Vec<&str> = args
            .windows(2)
            .filter(|w| w[0] == "-o")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(
            options,
            [
                "BatchMode=yes",
                "ServerAliveCountMax=4",
                "IdentitiesOnly=yes",
                "connecttimeout=60",
                "ServerAliveInterval=5"
            ]
        );
    }

    #[test]
    fn check_answers_are_read_as_unreachable_missing_ready_or_broken() {
        let n = node();
        let unreachable = parse_check(
            &n,
            Some(255),
            "",
            "ssh: connect to host 10.0.0.2 port 2222: Connection refused\n",
        );
        assert_eq!(
            unreachable,
            Check::Unreachable {
                reason: "ssh: connect to host 10.0.0.2 port 2222: Connection refused".into()
            }
        );
        let missing = parse_check(&n, Some(0), "workdir-ok\nedgeprof-missing arm64\n", "");
        assert_eq!(
            missing,
            Check::NoEdgeprof {
                arch: "aarch64".into(),
                path: "~/.local/bin/edgeprof".into()
            }
        );
        let info = node_info();
        let json = serde_json::to_string(&info).unwrap_or_default();
        match parse_check(&n, Some(0), &format!("workdir-failed\n{json}\n"), "") {
            Check::Ready {
                info: got,
                workdir_ok,
                ..
            } => {
                assert_eq!(*got, info);
                assert!(!workdir_ok);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_check(
                &n,
                Some(2),
                "workdir-ok\n",
                "edgeprof: error: unrecognized subcommand 'node-info'"
            ),
            Check::Broken { .. }
        ));
    }

    #[test]
    fn a_node_directory_is_one_plain_component_whatever_the_name() {
        let long = "x".repeat(300);
        for name in [
            "..",
            ".",
            "",
            "../../x",
            "/etc",
            "a/../../b",
            "fleet.json",
            ".local",
            "ssh://pi@board:2222",
            "pi@fe80::1%eth0",
            "caf\u{e9}",
            long.as_str(),
        ] {
            let dir = dir_name(name);
            let components: Vec<_> = Path::new(&dir).components().collect();
            assert!(
                matches!(components.as_slice(), [std::path::Component::Normal(_)]),
                "{name:?} gave {dir:?}"
            );
            assert!(
                !dir.starts_with('.') && dir != run::FLEET,
                "{name:?} gave {dir:?}"
            );
            assert!(dir.len() <= MAX_NAME, "{name:?} gave {dir:?}");
            assert_eq!(
                run::node_dir(Path::new("/f"), name).parent(),
                Some(Path::new("/f"))
            );
        }
        for name in ["pi", "pi@10.0.0.2", "orin-nx_2", "a.b"] {
            assert_eq!(dir_name(name), name);
        }
    }

    #[test]
    fn the_elf_header_names_the_architecture() {
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[5] = 1;
        header[18] = 0xb7;
        assert_eq!(elf_arch(&header), Some("aarch64"));
        header[18] = 0x3e;
        assert_eq!(elf_arch(&header), Some("x86_64"));
        assert_eq!(elf_arch(b"#!/bin/sh\n"), None);
        if let Ok(me) = std::env::current_exe().and_then(std::fs::read) {
            assert_eq!(elf_arch(&me), Some(std::env::consts::ARCH));
        }
    }

    #[test]
    fn the_install_script_writes_beside_the_target_then_moves_it() {
        let script = install_script(&node());
        assert_eq!(
            script,
            "mkdir -p \"$HOME\"/'.local/bin' && cat > \"$HOME\"/'.local/bin/edgeprof.part' && \
             chmod 755 \"$HOME\"/'.local/bin/edgeprof.part' && mv -f \
             \"$HOME\"/'.local/bin/edgeprof.part' \"$HOME\"/'.local/bin/edgeprof' && \
             \"$HOME\"/'.local/bin/edgeprof' --version"
        );
    }
}

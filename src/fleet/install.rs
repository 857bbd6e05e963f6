//! `edgeprof nodes install`: this (or another) edgeprof binary copied to each node over ssh,
//! where the node's architecture matches and its copy is not already this version.

use super::{
    arch_script, install_script, normalize_arch, run, ssh, CHECK_TIMEOUT, INSTALL_TIMEOUT,
};
use crate::config::Node;

/// A binary to install: its bytes, its architecture and whether it is this very edgeprof.
pub struct Binary {
    pub bytes: Vec<u8>,
    pub arch: &'static str,
    /// This edgeprof's own binary: a node that already runs its version is left alone.
    pub this_one: bool,
}

/// What became of one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Installed {
    /// `nodes.edgeprof` names a program on the node's PATH, not a place to install to.
    NotAPath,
    /// ssh could not reach it, or the architecture check failed there: why.
    Unreachable(String),
    /// The node runs another architecture: its own, and the Rust target to build for it.
    OtherArch { arch: String, target: &'static str },
    /// It already runs this version (what it says).
    AlreadyThere(String),
    /// Copied; what the installed binary says of itself.
    Copied(String),
    /// The copy failed: why.
    CopyFailed(String),
}

impl Installed {
    /// Whether the node did not end with the binary.
    pub fn failed(&self) -> bool {
        !matches!(self, Installed::AlreadyThere(_) | Installed::Copied(_))
    }
}

/// The Rust target that builds edgeprof for a node of `arch` (as `uname -m` says it).
fn target_of(arch: &str) -> &'static str {
    match arch {
        "aarch64" => "aarch64-unknown-linux-gnu",
        "x86_64" => "x86_64-unknown-linux-gnu",
        "armv7l" | "arm" => "armv7-unknown-linux-gnueabihf",
        _ => "<the node's target>",
    }
}

/// Installs `binary` on `node` (unless `force`, a node already running this version is left
/// as it is); `copying` is told before the copy starts.
pub fn install(node: &Node, binary: &Binary, force: bool, copying: impl FnOnce()) -> Installed {
    if !node.edgeprof.contains('/') {
        return Installed::NotAPath;
    }
    let (status, stdout, stderr) = match run(&ssh(node, &arch_script(node)), b"", CHECK_TIMEOUT) {
        Ok(a) => a,
        Err(why) => return Installed::Unreachable(why.to_string()),
    };
    if status != Some(0) {
        let why = stderr.lines().last().unwrap_or("ssh failed").trim();
        return Installed::Unreachable(why.to_string());
    }
    let mut lines = stdout.lines();
    let node_arch = normalize_arch(lines.next().unwrap_or("").trim());
    let there = lines.next().map(str::trim).unwrap_or("");
    if node_arch != binary.arch {
        let target = target_of(&node_arch);
        return Installed::OtherArch {
            arch: node_arch,
            target,
        };
    }
    if !force && binary.this_one && there == format!("edgeprof {}", env!("CARGO_PKG_VERSION")) {
        return Installed::AlreadyThere(there.to_string());
    }
    copying();
    match run(
        &ssh(node, &install_script(node)),
        &binary.bytes,
        INSTALL_TIMEOUT,
    ) {
        Ok((Some(0), stdout, _)) => Installed::Copied(stdout.trim().to_string()),
        Ok((_, _, stderr)) => Installed::CopyFailed(
            stderr
                .lines()
                .last()
                .unwrap_or("no message")
                .trim()
                .to_string(),
        ),
        Err(why) => Installed::CopyFailed(why.to_string()),
    }
}

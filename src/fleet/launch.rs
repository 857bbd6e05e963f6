//! The child that carries a node's share — ssh to the node, or a local edgeprof — and, when its
//! stream ends early, why: ssh's reason and the node's last words, kept apart.

use super::run::Target;
use super::{command_line, ssh_logging, Word};
use crate::collect::child::Spec;
use crate::error::Context;
use std::path::Path;

/// The child that runs (or resumes) the share on `target`; `fleet_dir` holds the local
/// child's own results. Over ssh, the temporary file that gets ssh's own messages comes with it.
pub(super) fn launch(
    target: &Target,
    fleet_dir: &Path,
    resume: Option<&Path>,
) -> crate::error::Result<(Spec, Option<tempfile::NamedTempFile>)> {
    let run_args: Vec<String> = match resume {
        None => ["run", "-", "--stream", "--control", "--output", "results"]
            .map(String::from)
            .to_vec(),
        Some(dir) => vec![
            "run".into(),
            "--resume".into(),
            dir.display().to_string(),
            "--stream".into(),
            "--control".into(),
        ],
    };
    Ok(match &target.node {
        None => {
            let exe = std::env::current_exe().context("cannot locate the edgeprof binary")?;
            let work = fleet_dir.join(".local");
            std::fs::create_dir_all(&work)
                .with_context(|| format!("cannot create {}", work.display()))?;
            let mut command = Spec::new(exe);
            command.args(&run_args).current_dir(work);
            (command, None)
        }
        Some(node) => {
            let mut words = vec![
                Word::Syntax("mkdir -p"),
                Word::Data(node.workdir.clone()),
                Word::Syntax("&& cd"),
                Word::Data(node.workdir.clone()),
                Word::Syntax("&&"),
                Word::Data(node.edgeprof.clone()),
            ];
            words.extend(run_args.into_iter().map(Word::Data));
            let log = tempfile::Builder::new()
                .prefix("edgeprof-ssh-")
                .suffix(".log")
                .tempfile()
                .context("cannot create a temporary file for ssh's messages")?;
            let command = ssh_logging(node, &command_line(&words), Some(log.path()));
            (command, Some(log))
        }
    })
}

/// The last non-empty line of `text`, trimmed ("" when there is none).
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// Why a node's stream ended, for a person: ssh's reason (`ssh_said`, its own messages, and its
/// exit status; ssh exits 255 when the connection itself failed) first, then, apart, the last line
/// the node's edgeprof said on stderr (its progress, or its error). `ssh_said` is None for the
/// local child, which has no ssh.
pub(super) fn drop_reason(
    status: Option<std::process::ExitStatus>,
    ssh_said: Option<&str>,
    node_said: &str,
) -> String {
    let node_said = last_line(node_said);
    let code = status.and_then(|s| s.code());
    let how = match status {
        Some(s) => match s.code() {
            Some(code) => format!("exit status {code}"),
            None => format!("{s}"),
        },
        None => "a status that could not be waited for".to_string(),
    };
    let Some(ssh_said) = ssh_said.map(last_line) else {
        return match node_said {
            "" => format!("the local edgeprof ended with {how} without a message"),
            said => format!("the local edgeprof ended with {how}: {said}"),
        };
    };
    if code == Some(255) || code.is_none() {
        let ssh = match ssh_said {
            "" => format!("ssh ended with {how} without a message"),
            said => format!("ssh ended with {how}: {said}"),
        };
        return match node_said {
            "" => format!("{ssh}; the node said nothing on stderr"),
            said => format!("{ssh}; the node's last progress line: {said}"),
        };
    }
    // ssh passed on the exit status of the node's edgeprof: it ended by itself.
    let node = match node_said {
        "" => format!("the node's edgeprof ended with {how} without a message"),
        said => format!("the node's edgeprof ended with {how}: {said}"),
    };
    match ssh_said {
        "" => node,
        said => format!("{node}; ssh said: {said}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_gives_sshs_reason_first_and_the_nodes_last_line_apart() {
        use std::os::unix::process::ExitStatusExt;
        let exit = |code: i32| Some(std::process::ExitStatus::from_raw(code << 8));
        let progress = "[2/6] tract/x: running\n\n";
        assert_eq!(
            drop_reason(exit(255), Some(""), progress),
            "ssh ended with exit status 255 without a message; the node's last progress line: \
             [2/6] tract/x: running"
        );
        assert_eq!(
            drop_reason(
                exit(255),
                Some("Timeout, server 10.0.0.2 not responding.\n"),
                ""
            ),
            "ssh ended with exit status 255: Timeout, server 10.0.0.2 not responding.; the node \
             said nothing on stderr"
        );
        // ssh passed the node's own exit status on: the node's words are the reason.
        assert_eq!(
            drop_reason(exit(2), Some(""), "edgeprof: error: no such directory\n"),
            "the node's edgeprof ended with exit status 2: edgeprof: error: no such directory"
        );
        assert_eq!(
            drop_reason(exit(1), None, ""),
            "the local edgeprof ended with exit status 1 without a message"
        );
    }
}

//! A tmux server of its own per test, to drive the binary in a real terminal.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of its own with one 100×30 pane running `script` in `dir`.
pub struct Tmux {
    pub socket: String,
    pub dir: PathBuf,
}

impl Tmux {
    pub fn start(dir: &Path, script: &str) -> Tmux {
        Tmux::start_command(
            dir,
            &format!("cd '{}' && {script}; sleep 60", dir.display()),
        )
    }

    /// A pane whose own process is `command` (run by tmux through the shell's `-c`).
    pub fn start_command(dir: &Path, command: &str) -> Tmux {
        let socket = format!(
            "edgeprof-test-{}-{}",
            std::process::id(),
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        let t = Tmux {
            socket,
            dir: dir.to_path_buf(),
        };
        let status = Command::new("tmux")
            .args([
                "-L",
                &t.socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "s",
            ])
            .args(["-x", "100", "-y", "30"])
            .arg(command)
            .env("TERM", "xterm-256color")
            .status();
        match status {
            Ok(s) if s.success() => t,
            Ok(s) => panic!("tmux new-session failed: {s}"),
            Err(e) => panic!("tmux is needed for these tests (apt-get install tmux): {e}"),
        }
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
            Err(e) => panic!("tmux {args:?}: {e}"),
        }
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "s"])
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "s"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Waits until the screen shows `text`; the screen.
    pub fn wait_for(&self, text: &str, seconds: u64) -> String {
        let until = Instant::now() + Duration::from_secs(seconds);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            if Instant::now() > until {
                panic!("no {text:?} on screen after {seconds} s:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for a file the pane's script writes after edgeprof exits.
    pub fn wait_file(&self, name: &str, seconds: u64) -> String {
        let path = self.dir.join(name);
        let until = Instant::now() + Duration::from_secs(seconds);
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                if !text.is_empty() {
                    // Let the writer finish its line.
                    std::thread::sleep(Duration::from_millis(100));
                    return std::fs::read_to_string(&path).unwrap_or(text);
                }
            }
            if Instant::now() > until {
                panic!("no {name} after {seconds} s; screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The pid of edgeprof in the pane (the child of the pane's shell).
    pub fn edgeprof_pid(&self) -> i32 {
        let shell = self.tmux(&["display-message", "-p", "-t", "s", "#{pane_pid}"]);
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("pgrep")
                .args(["-P", shell.trim(), "edgeprof"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            if let Some(pid) = out.lines().next().and_then(|l| l.trim().parse().ok()) {
                return pid;
            }
            if Instant::now() > until {
                panic!("no edgeprof under the pane's shell {shell}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

//! OpenSSH servers on loopback, each acting as a separate node: throw-away keys, ports above
//! 1024, and the `[[nodes]]` table that reaches one. Needs OpenSSH's server (`apt-get install
//! openssh-server`; `.ci/run` installs it).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";

/// One sshd on 127.0.0.1, stopped when dropped.
pub struct Sshd {
    pub child: Child,
    pub port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sh(program: &str, args: &[&str]) -> String {
    let out = match Command::new(program).args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run {program}: {e}"),
    };
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The keys the servers and the client share: a host key and a user key with its
/// authorized_keys file.
pub struct Keys {
    pub host: PathBuf,
    pub user: PathBuf,
    pub authorized: PathBuf,
}

pub fn keys(dir: &Path) -> Keys {
    assert!(
        Path::new(SSHD).is_file(),
        "these tests need OpenSSH's server at {SSHD}: apt-get install openssh-server"
    );
    let host = dir.join("host_key");
    let user = dir.join("user_key");
    for key in [&host, &user] {
        let path = key.display().to_string();
        sh(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "edgeprof-test",
                "-f",
                &path,
            ],
        );
    }
    let authorized = dir.join("authorized_keys");
    let public = match std::fs::read_to_string(dir.join("user_key.pub")) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    super::write(&authorized, &public);
    Keys {
        host,
        user,
        authorized,
    }
}

pub fn free_port() -> u16 {
    match TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => panic!("no free port: {e}"),
    }
}

/// Starts an sshd on a free port above 1024 and waits until it accepts connections.
pub fn sshd(dir: &Path, keys: &Keys, name: &str) -> Sshd {
    // sshd refuses to start without its privilege separation directory (made at boot by the
    // service, which is not running here).
    let _ = std::fs::create_dir_all("/run/sshd");
    for _ in 0..5 {
        let port = free_port();
        let config = dir.join(format!("sshd_config_{name}"));
        super::write(
            &config,
            &format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile {}\n\
                 AuthorizedKeysFile {}\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n\
                 LogLevel ERROR\n",
                keys.host.display(),
                dir.join(format!("sshd_{name}.pid")).display(),
                keys.authorized.display(),
            ),
        );
        // sshd's own messages (each readiness probe below is a connection it logs) go to a
        // file, shown if it does not start.
        let log = dir.join(format!("sshd_{name}.log"));
        let log_file = match std::fs::File::create(&log) {
            Ok(f) => f,
            Err(e) => panic!("cannot create {}: {e}", log.display()),
        };
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => panic!("cannot start {SSHD}: {e}"),
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = child.try_wait() {
                break; // The port was taken meanwhile: try another.
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Sshd { child, port };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    let log = std::fs::read_to_string(dir.join(format!("sshd_{name}.log"))).unwrap_or_default();
    panic!("sshd did not start on loopback; it said:\n{log}");
}

pub fn user() -> String {
    sh("id", &["-un"])
}

/// A `[[nodes]]` table, written with the toml crate so any value is encoded as TOML data.
pub fn node(name: &str, port: u16, keys: &Keys, edgeprof: &str, workdir: &str) -> toml::Value {
    let mut t = toml::Table::new();
    t.insert("name".into(), name.into());
    t.insert("destination".into(), format!("{}@127.0.0.1", user()).into());
    t.insert("port".into(), i64::from(port).into());
    t.insert("identity".into(), keys.user.display().to_string().into());
    t.insert("edgeprof".into(), edgeprof.into());
    t.insert("workdir".into(), workdir.into());
    t.insert(
        "ssh_options".into(),
        toml::Value::Array(vec![
            "StrictHostKeyChecking=no".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "LogLevel=ERROR".into(),
        ]),
    );
    toml::Value::Table(t)
}

/// Every process below `pid` (the sshd listener: its sessions, their shells, edgeprof).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid …: the command may hold spaces, so read after its ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((p, ppid));
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

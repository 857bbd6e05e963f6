//! Setting the board's state for steady figures, and putting it back: the `performance`
//! governor and every CPU clock pinned at its maximum, turbo off, a Jetson's GPU clock pinned
//! and `jetson_clocks` run where it is installed, an nvpmodel mode when asked. Before each
//! change, what it replaces is written to a restore file, so the state goes back on every exit
//! path: at the end of the lock, on a signal or a panic (the guard's drop), and after a crash
//! or SIGKILL, when the next edgeprof finds the file of a process that is gone.

use super::{read, BoardState, Commands};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a lock changed, to put back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    /// The edgeprof that holds the lock, and its start time (a reused pid is not it).
    pub pid: u32,
    pub started: Option<u64>,
    pub root: PathBuf,
    /// The nvpmodel mode to go back to, when the lock selected another.
    #[serde(default)]
    pub nvpmodel: Option<u32>,
    /// Files written, each with what it held before, in the order written.
    pub files: Vec<(PathBuf, String)>,
    /// `jetson_clocks --store`'s file, when jetson_clocks ran.
    #[serde(default)]
    pub jetson_clocks_store: Option<PathBuf>,
}

/// Why nothing was locked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LockError {
    /// Nothing here can be set (a VM without cpufreq, say), or another edgeprof holds the lock.
    #[error("{0}")]
    Cannot(String),
    /// A change failed (most often: not root); what was changed before it is back.
    #[error("{0}")]
    Failed(String),
}

/// What to set beyond the clocks.
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    /// The nvpmodel mode to select (Jetson).
    pub mode: Option<u32>,
}

/// A held lock: the state goes back when it is released or dropped.
pub struct Locked {
    restore: Restore,
    file: PathBuf,
    commands: Box<dyn Commands + Send>,
    released: bool,
    /// What was set, in words.
    pub done: Vec<String>,
    /// What could not be set, and why (the rest was).
    pub notes: Vec<String>,
}

impl Locked {
    pub fn restore_file(&self) -> &Path {
        &self.file
    }

    /// Puts everything back and removes the restore file; what could not be put back.
    pub fn release(mut self) -> Vec<String> {
        self.released = true;
        let problems = put_back(&self.restore, self.commands.as_ref());
        let _ = std::fs::remove_file(&self.file);
        problems
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if !self.released {
            self.released = true;
            let _ = put_back(&self.restore, self.commands.as_ref());
            let _ = std::fs::remove_file(&self.file);
        }
    }
}

fn text(path: &Path) -> Option<String> {
    Some(std::fs::read_to_string(path).ok()?.trim().to_string())
}

fn keep(file: &Path, restore: &Restore) -> Result<(), String> {
    let json = serde_json::to_vec_pretty(restore).map_err(|e| e.to_string())?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    crate::files::write_atomic(file, &json).map_err(|e| e.to_string())
}

/// Whether the process that wrote `r` still runs.
fn holder_alive(r: &Restore) -> bool {
    let Ok(pid) = i32::try_from(r.pid) else {
        return false;
    };
    match crate::collect::tree::start_time(Path::new("/"), pid) {
        Some(t) => r.started.is_none_or(|s| s == t),
        None => false,
    }
}

/// Everything in `r` put back, last change first; what could not be.
fn put_back(r: &Restore, commands: &dyn Commands) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(store) = &r.jetson_clocks_store {
        let arg = store.to_string_lossy().into_owned();
        if let Err(why) = commands.output("jetson_clocks", &["--restore", &arg]) {
            problems.push(format!("jetson_clocks --restore: {why}"));
        }
        let _ = std::fs::remove_file(store);
    }
    for (path, before) in r.files.iter().rev() {
        if let Err(e) = std::fs::write(path, format!("{before}\n")) {
            problems.push(format!(
                "cannot put {} back to {before}: {e}",
                path.display()
            ));
        }
    }
    if let Some(mode) = r.nvpmodel {
        if let Err(why) = commands.output("nvpmodel", &["-m", &mode.to_string()]) {
            problems.push(format!("nvpmodel -m {mode}: {why}"));
        }
    }
    problems
}

/// A restore file left by an edgeprof that is gone (killed, crashed, the board lost power):
/// its changes put back and the file removed, in words; None when there is none (or its
/// edgeprof still runs).
pub fn restore_left_over(file: &Path, commands: &dyn Commands) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let Ok(r) = serde_json::from_str::<Restore>(&text) else {
        let _ = std::fs::remove_file(file);
        return Some(format!(
            "removed {}: it was not a restore file edgeprof can read, and the board's state it \
             stood for is unknown",
            file.display()
        ));
    };
    if holder_alive(&r) {
        return None;
    }
    let problems = put_back(&r, commands);
    let _ = std::fs::remove_file(file);
    Some(if problems.is_empty() {
        format!(
            "put back the board's state that edgeprof (pid {}) changed and did not restore: {} \
             setting(s)",
            r.pid,
            r.files.len() + usize::from(r.nvpmodel.is_some())
        )
    } else {
        format!(
            "put back what could be of the board's state that edgeprof (pid {}) left changed; \
             not: {}",
            r.pid,
            problems.join("; ")
        )
    })
}

/// The writes that pin this state's clocks: (file, new value, in words).
fn plan(root: &Path, state: &BoardState) -> Vec<(PathBuf, String, String)> {
    let mut writes = Vec::new();
    let cpufreq = root.join("sys/devices/system/cpu/cpufreq");
    for p in state.policies() {
        let dir = cpufreq.join(&p.policy);
        let available = text(&dir.join("scaling_available_governors")).unwrap_or_default();
        if p.governor.as_deref() != Some("performance")
            && (available.is_empty() || available.split_whitespace().any(|g| g == "performance"))
        {
            writes.push((
                dir.join("scaling_governor"),
                "performance".to_string(),
                format!("{}: governor performance", p.policy),
            ));
        }
        if let Some(max) = p.hw_max_khz {
            let mhz = max / 1000;
            if p.max_khz != Some(max) {
                writes.push((
                    dir.join("scaling_max_freq"),
                    max.to_string(),
                    format!("{}: limit raised to {mhz} MHz", p.policy),
                ));
            }
            if p.min_khz != Some(max) {
                writes.push((
                    dir.join("scaling_min_freq"),
                    max.to_string(),
                    format!("{}: clock pinned at {mhz} MHz", p.policy),
                ));
            }
        }
    }
    if let Some(t) = state.turbo.get().filter(|t| t.on) {
        let file = root.join(t.file.trim_start_matches('/'));
        let off = if t.file.ends_with("no_turbo") {
            "1"
        } else {
            "0"
        };
        writes.push((file, off.to_string(), "turbo off".to_string()));
    }
    if let Some(gpu) = state.jetson.get().and_then(|j| j.gpu.get()) {
        if let Some((node, _)) = crate::collect::telemetry::sysfs::jetson_gpu_devfreq(root) {
            if let Some(top) = gpu.available_max_hz.or(gpu.max_hz) {
                let mhz = top / 1_000_000;
                if gpu.max_hz != Some(top) {
                    writes.push((
                        node.join("max_freq"),
                        top.to_string(),
                        format!("GPU limit raised to {mhz} MHz"),
                    ));
                }
                if gpu.min_hz != Some(top) {
                    writes.push((
                        node.join("min_freq"),
                        top.to_string(),
                        format!("GPU clock pinned at {mhz} MHz"),
                    ));
                }
            }
        }
    }
    writes
}

/// Sets the board's state under `root` for steady figures, keeping what it replaces in
/// `restore_file` before each change.
pub fn lock(
    root: &Path,
    restore_file: &Path,
    commands: Box<dyn Commands + Send>,
    options: &LockOptions,
) -> Result<Locked, LockError> {
    if let Ok(t) = std::fs::read_to_string(restore_file) {
        if let Ok(r) = serde_json::from_str::<Restore>(&t) {
            if holder_alive(&r) {
                return Err(LockError::Cannot(format!(
                    "edgeprof (pid {}) holds the board's clocks already (its restore file is {})",
                    r.pid,
                    restore_file.display()
                )));
            }
        }
        let _ = restore_left_over(restore_file, commands.as_ref());
    }
    let mut locked = Locked {
        restore: Restore {
            pid: std::process::id(),
            started: crate::collect::tree::start_time(
                Path::new("/"),
                i32::try_from(std::process::id()).unwrap_or(0),
            ),
            root: root.to_path_buf(),
            nvpmodel: None,
            files: Vec::new(),
            jetson_clocks_store: None,
        },
        file: restore_file.to_path_buf(),
        commands,
        released: false,
        done: Vec::new(),
        notes: Vec::new(),
    };
    let mut state = read(root, locked.commands.as_ref());
    // A power mode first: nvpmodel sets clocks and cores of its own.
    if let Some(mode) = options.mode {
        let Some(jetson) = state.jetson.get() else {
            return Err(LockError::Cannot(
                "--mode selects a Jetson's nvpmodel mode, and this is not a Jetson".to_string(),
            ));
        };
        let before = jetson.mode.get().map(|m| m.id);
        if before != Some(mode) {
            locked.restore.nvpmodel = before;
            keep(&locked.file, &locked.restore)
                .map_err(|why| LockError::Failed(format!("cannot keep the restore file: {why}")))?;
            if let Err(why) = locked
                .commands
                .output("nvpmodel", &["-m", &mode.to_string()])
            {
                locked.restore.nvpmodel = None;
                return Err(LockError::Failed(format!("nvpmodel -m {mode}: {why}")));
            }
            locked.done.push(format!("nvpmodel mode {mode}"));
            state = read(root, locked.commands.as_ref());
        }
    }
    let writes = plan(root, &state);
    if writes.is_empty() && locked.restore.nvpmodel.is_none() {
        let why = match (&state.cpufreq, state.warnings().is_empty()) {
            (super::Found::Absent(why), _) => format!("nothing here can be locked: {why}"),
            (_, true) => "nothing to set: the governor, the clocks and turbo are as a lock \
                          leaves them already"
                .to_string(),
            (_, false) => {
                "nothing here can be set by edgeprof: see the warnings for what to do".to_string()
            }
        };
        let _ = std::fs::remove_file(&locked.file);
        locked.released = true;
        return Err(LockError::Cannot(why));
    }
    for (path, value, words) in writes {
        let Some(before) = text(&path) else {
            locked
                .notes
                .push(format!("{}: cannot read it, left alone", path.display()));
            continue;
        };
        locked.restore.files.push((path.clone(), before));
        keep(&locked.file, &locked.restore)
            .map_err(|why| LockError::Failed(format!("cannot keep the restore file: {why}")))?;
        if let Err(e) = std::fs::write(&path, format!("{value}\n")) {
            locked.restore.files.pop();
            let permission = e.kind() == std::io::ErrorKind::PermissionDenied;
            return Err(LockError::Failed(format!(
                "cannot write {value} to {}: {e}{}; what was set before it is put back",
                path.display(),
                if permission {
                    " (locking the clocks needs root: sudo edgeprof board lock)"
                } else {
                    ""
                }
            )));
        }
        locked.done.push(words);
    }
    if state.jetson.get().is_some() {
        let store = locked.file.with_extension("jetson_clocks");
        let arg = store.to_string_lossy().into_owned();
        match locked.commands.output("jetson_clocks", &["--store", &arg]) {
            Ok(_) => {
                locked.restore.jetson_clocks_store = Some(store);
                keep(&locked.file, &locked.restore).map_err(|why| {
                    LockError::Failed(format!("cannot keep the restore file: {why}"))
                })?;
                match locked.commands.output("jetson_clocks", &[]) {
                    Ok(_) => locked
                        .done
                        .push("jetson_clocks (memory clock and fan too)".to_string()),
                    Err(why) => locked.notes.push(format!("jetson_clocks: {why}")),
                }
            }
            Err(why) => locked.notes.push(format!(
                "{why}: the CPU and GPU clocks are pinned through sysfs, the memory clock (EMC) \
                 and the fan are left as they were"
            )),
        }
    }
    Ok(locked)
}

//! Python environments for the external frameworks: one virtual environment per
//! framework under edgeprof's data directory, made and removed by `edgeprof env`, and the
//! search for an interpreter that has the framework: the one the config names, then
//! edgeprof's own environment, then the system's `python3` (JetPack installs PyTorch there).

use crate::collect::child::Spec;
use crate::engines::external::{self, Framework};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file that marks a directory as an environment edgeprof made (and may remove).
pub const MARKER: &str = "edgeprof-env.json";
/// How long an interpreter may take to say what it has.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why an environment could not be found, made or removed, in one sentence.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("cannot find a data directory: set EDGEPROF_DATA_DIR, XDG_DATA_HOME or HOME")]
    NoDataDir,
    #[error("the {0} harness is not in this build yet, so there is nothing to set up for it")]
    NotInThisBuild(String),
    #[error("{} is not an environment edgeprof made for {framework} (it has no {MARKER}); remove it yourself if you mean to", dir.display())]
    NotOurs { dir: PathBuf, framework: String },
    /// A step's program could not be started (a `--python` that is not there).
    #[error("cannot start {what}: {why}")]
    CannotStart { what: String, why: String },
    /// A step ran and failed, or ran past its time; or the result does not work.
    #[error("{0}")]
    Failed(String),
    #[error("cannot {what} {}: {error}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Lock(#[from] crate::lockfile::LockError),
    /// What went wrong while making an environment, after which nothing of it is left.
    #[error("setting up {framework} failed: {error}")]
    Setup {
        framework: String,
        error: Box<EnvError>,
    },
}

impl EnvError {
    /// Whether what the user asked for is at fault (exit code 2) rather than the machine.
    pub fn is_bad_input(&self) -> bool {
        match self {
            EnvError::NoDataDir
            | EnvError::NotInThisBuild(_)
            | EnvError::NotOurs { .. }
            | EnvError::CannotStart { .. } => true,
            EnvError::Setup { error, .. } => error.is_bad_input(),
            EnvError::Failed(_) | EnvError::Io { .. } | EnvError::Lock(_) => false,
        }
    }
}

/// edgeprof's data directory: `$EDGEPROF_DATA_DIR`, else `$XDG_DATA_HOME/edgeprof`, else
/// `~/.local/share/edgeprof`.
pub fn data_dir() -> Result<PathBuf, EnvError> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("EDGEPROF_DATA_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_DATA_HOME") {
        return Ok(PathBuf::from(dir).join("edgeprof"));
    }
    match var("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/edgeprof")),
        None => Err(EnvError::NoDataDir),
    }
}

/// Where `edgeprof env setup FRAMEWORK` makes the framework's environment.
pub fn env_dir(framework: &Framework) -> Result<PathBuf, EnvError> {
    Ok(data_dir()?.join("envs").join(framework.name))
}

/// Models and inputs exported for the external frameworks, kept between runs.
pub fn cache_dir() -> Result<PathBuf, EnvError> {
    Ok(data_dir()?.join("cache"))
}

fn venv_python(dir: &Path) -> PathBuf {
    dir.join("bin").join("python")
}

/// Where an interpreter came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `[frameworks.NAME] python` in the config.
    Config,
    /// The environment `edgeprof env setup` made.
    Managed,
    /// The system's `python3` (a system-wide install).
    System,
}

impl Origin {
    pub fn describe(self) -> &'static str {
        match self {
            Origin::Config => "the config's interpreter",
            Origin::Managed => "edgeprof's environment",
            Origin::System => "system-wide",
        }
    }
}

/// An interpreter that has the framework.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interpreter {
    pub python: PathBuf,
    pub origin: Origin,
    /// The framework's version there.
    pub version: String,
    pub python_version: String,
}

/// Whether a framework can run here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Readiness {
    BuiltIn {
        version: String,
    },
    Ready(Interpreter),
    /// Nowhere to be found; `hint` is the command that sets it up.
    NotSetUp {
        hint: String,
    },
    /// The configured or managed interpreter does not work, or lacks the framework.
    Broken {
        python: PathBuf,
        reason: String,
    },
    /// This build has no harness for it.
    NotInBuild,
}

impl Readiness {
    pub fn interpreter(&self) -> Option<&Interpreter> {
        match self {
            Readiness::Ready(i) => Some(i),
            _ => None,
        }
    }

    /// One line: `ready: 1.19.2 (edgeprof's environment, /…/python)`, `not set up: run …`.
    pub fn describe(&self) -> String {
        match self {
            Readiness::BuiltIn { version } => format!("built in ({version})"),
            Readiness::Ready(i) => format!(
                "ready ({}; {}, {})",
                i.version,
                i.origin.describe(),
                i.python.display()
            ),
            Readiness::NotSetUp { hint } => format!("not set up (run: {hint})"),
            Readiness::Broken { python, reason } => {
                format!("not usable ({}: {reason})", python.display())
            }
            Readiness::NotInBuild => "not in this build yet".to_string(),
        }
    }

    /// Why a condition of this framework cannot run, if it cannot.
    pub fn blocker(&self, framework: &str) -> Option<String> {
        match self {
            Readiness::BuiltIn { .. } | Readiness::Ready(_) => None,
            Readiness::NotSetUp { hint } => Some(format!(
                "{framework} is not set up here: run `{hint}`, or point [frameworks.{framework}] \
                 python at an interpreter that has it"
            )),
            Readiness::Broken { python, reason } => Some(format!(
                "{framework} cannot run with {}: {reason}",
                python.display()
            )),
            Readiness::NotInBuild => {
                Some(format!("the {framework} harness is not in this build yet"))
            }
        }
    }
}

/// What an interpreter said about itself and the modules asked after.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Probe {
    pub python: String,
    /// Module name → its distribution's version (an empty string when found but unversioned),
    /// absent when the module is not installed.
    pub modules: BTreeMap<String, Option<String>>,
}

/// Asks `python` which of `frameworks` it has (without importing them, so it is quick).
const PROBE: &str = r#"
import json, sys
import importlib.util
try:
    from importlib import metadata
except ImportError:
    metadata = None
asked = json.load(sys.stdin)
modules = {}
for module, dist in asked:
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        modules[module] = None
        continue
    version = ""
    if metadata is not None:
        try:
            version = metadata.version(dist)
        except Exception:
            version = ""
    modules[module] = version
print(json.dumps({"python": sys.version.split()[0], "modules": modules}))
"#;

/// Runs `command` with `input` on stdin and returns its stdout, or why not.
pub fn run_with_timeout(
    command: &Spec,
    input: &str,
    timeout: Duration,
) -> Result<String, crate::error::ChildFailed> {
    let (status, stdout, stderr) = run_collect(command, input.as_bytes(), timeout)?;
    if !status.success() {
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(crate::error::ChildFailed::from(format!(
            "it failed ({status}): {}",
            last.trim()
        )));
    }
    Ok(stdout)
}

/// Runs `command` with `input` on stdin until it ends (its process group killed after
/// `timeout`): its exit status, stdout and stderr, through `collect::child`, the supervisor of
/// short-lived children.
pub fn run_collect(
    command: &Spec,
    input: &[u8],
    timeout: Duration,
) -> Result<(std::process::ExitStatus, String, String), crate::error::ChildFailed> {
    let ran = crate::collect::child::run(
        command,
        input,
        timeout,
        crate::collect::child::Stdout::Capture,
    )?;
    Ok((ran.status, ran.stdout, ran.stderr))
}

/// Asks `python` about `frameworks`.
pub fn probe(python: &Path, frameworks: &[&Framework]) -> Result<Probe, crate::error::ChildFailed> {
    let asked: Vec<(&str, &str)> = frameworks
        .iter()
        .map(|f| (f.module, f.distribution))
        .collect();
    let input = serde_json::to_string(&asked).map_err(|e| e.to_string())?;
    let mut command = Spec::new(python);
    command.args(["-c", PROBE]);
    let out = run_with_timeout(&command, &input, PROBE_TIMEOUT)?;
    let line = out.lines().last().unwrap_or("");
    serde_json::from_str(line)
        .map_err(|e| format!("it answered {line:?}, not the probe's JSON ({e})").into())
}

/// The system's `python3`, when there is one on PATH.
pub fn system_python() -> Option<PathBuf> {
    crate::collect::find_on_path("python3")
}

fn interpreter(
    python: &Path,
    origin: Origin,
    framework: &Framework,
    probe: &Probe,
) -> Option<Interpreter> {
    let version = probe.modules.get(framework.module)?.clone()?;
    Some(Interpreter {
        python: python.to_path_buf(),
        origin,
        version: if version.is_empty() {
            "version unknown".to_string()
        } else {
            version
        },
        python_version: probe.python.clone(),
    })
}

/// Where every external framework stands here. `configured` maps frameworks to the
/// interpreters a config names; the system's `python3` is asked once for all.
pub fn survey(configured: &BTreeMap<String, PathBuf>) -> Vec<(&'static Framework, Readiness)> {
    let mut system: Option<Option<(PathBuf, Probe)>> = None;
    let all: Vec<&Framework> = external::FRAMEWORKS.iter().collect();
    external::FRAMEWORKS
        .iter()
        .map(|f| {
            let readiness = readiness_with(f, configured.get(f.name), || {
                system
                    .get_or_insert_with(|| {
                        let python = system_python()?;
                        probe(&python, &all).ok().map(|p| (python, p))
                    })
                    .clone()
            });
            (f, readiness)
        })
        .collect()
}

/// Where every engine stands here: the built-in ones, then the external frameworks.
pub fn engines_here(configured: &BTreeMap<String, PathBuf>) -> Vec<(String, Readiness)> {
    let mut out: Vec<(String, Readiness)> = crate::engines::BUILT_IN
        .iter()
        .map(|&e| {
            let version = crate::engines::version(e).unwrap_or("unknown").to_string();
            (e.to_string(), Readiness::BuiltIn { version })
        })
        .collect();
    out.extend(
        survey(configured)
            .into_iter()
            .map(|(f, r)| (f.name.to_string(), r)),
    );
    out
}

/// Where one framework stands here.
pub fn readiness(framework: &Framework, configured: Option<&PathBuf>) -> Readiness {
    readiness_with(framework, configured, || {
        let python = system_python()?;
        probe(&python, &[framework]).ok().map(|p| (python, p))
    })
}

fn readiness_with(
    framework: &Framework,
    configured: Option<&PathBuf>,
    system: impl FnOnce() -> Option<(PathBuf, Probe)>,
) -> Readiness {
    if !framework.runnable() {
        return Readiness::NotInBuild;
    }
    let lacks = |python: &Path, probe: &Probe| Readiness::Broken {
        python: python.to_path_buf(),
        reason: format!(
            "Python {} there has no {} module",
            probe.python, framework.module
        ),
    };
    if let Some(python) = configured {
        return match probe(python, &[framework]) {
            Ok(p) => match interpreter(python, Origin::Config, framework, &p) {
                Some(i) => Readiness::Ready(i),
                None => lacks(python, &p),
            },
            Err(reason) => Readiness::Broken {
                python: python.clone(),
                reason: reason.0,
            },
        };
    }
    if let Ok(dir) = env_dir(framework) {
        let python = venv_python(&dir);
        if python.exists() {
            return match probe(&python, &[framework]) {
                Ok(p) => match interpreter(&python, Origin::Managed, framework, &p) {
                    Some(i) => Readiness::Ready(i),
                    None => lacks(&python, &p),
                },
                Err(reason) => Readiness::Broken {
                    python,
                    reason: reason.0,
                },
            };
        }
    }
    if let Some((python, p)) = system() {
        if let Some(i) = interpreter(&python, Origin::System, framework, &p) {
            return Readiness::Ready(i);
        }
    }
    Readiness::NotSetUp {
        hint: framework.setup_hint(),
    }
}

/// What `edgeprof env setup` recorded about an environment it made.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Marker {
    pub framework: String,
    pub packages: Vec<String>,
    pub pip_args: Vec<String>,
    pub base_python: PathBuf,
    pub created: String,
}

/// How a setup went.
#[derive(Debug)]
pub enum SetupOutcome {
    Made(Interpreter),
    /// The environment was there already and has the framework.
    AlreadyThere(Interpreter),
}

/// The longest a setup step may take (pip building a framework's wheels on a small board is
/// slow, yet one that has not ended in this long is stuck).
const SETUP_STEP_TIMEOUT: Duration = Duration::from_secs(2 * 3600);

/// Runs a setup step, passing each line it prints (stdout and stderr) to `on_line`, and
/// returns the last lines when it fails; stopped (its whole group) after
/// [`SETUP_STEP_TIMEOUT`].
pub(crate) fn run_step(
    what: &str,
    command: &Spec,
    on_line: &mut dyn FnMut(&str),
) -> Result<(), EnvError> {
    run_step_within(what, command, SETUP_STEP_TIMEOUT, on_line)
}

fn run_step_within(
    what: &str,
    command: &Spec,
    timeout: Duration,
    on_line: &mut dyn FnMut(&str),
) -> Result<(), EnvError> {
    use crate::collect::child::{Heard, Input, Output};
    let (tx, heard) = std::sync::mpsc::channel::<Heard>();
    let mut child = command
        .start(Input::Null, Output::Merged { max: 64 << 10 }, &tx, None)
        .map_err(|e| EnvError::CannotStart {
            what: what.to_string(),
            why: e.to_string(),
        })?;
    drop(tx);
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let ended = child.hear_to_end(&heard, std::time::Instant::now() + timeout, |line| {
        on_line(&line);
        tail.push_back(line);
        if tail.len() > 5 {
            tail.pop_front();
        }
    });
    if !ended {
        return Err(EnvError::Failed(format!(
            "{what} did not end within {} and was stopped",
            crate::collect::child::said(timeout)
        )));
    }
    let status = child
        .reap()
        .map_err(|e| EnvError::Failed(format!("cannot wait for {what}: {e}")))?
        .status;
    if !status.success() {
        let tail: Vec<String> = tail.into_iter().filter(|l| !l.trim().is_empty()).collect();
        return Err(EnvError::Failed(format!(
            "{what} failed ({status}); its last words: {}",
            tail.join(" | ")
        )));
    }
    Ok(())
}

fn write_marker(dir: &Path, marker: &Marker) -> Result<(), EnvError> {
    let text = serde_json::to_string_pretty(marker)
        .map_err(|e| EnvError::Failed(format!("cannot encode {MARKER}: {e}")))?;
    std::fs::write(dir.join(MARKER), text).map_err(|error| EnvError::Io {
        what: "write",
        path: dir.join(MARKER),
        error,
    })
}

/// An environment edgeprof made earlier that has the framework: the packages this version
/// installs and its marker lacks (an edgeprof that has learned to use one more, such as
/// onnxruntime's `onnx` for its quantization tool) are installed into it.
fn top_up(
    framework: &Framework,
    dir: &Path,
    python: &Path,
    pip_args: &[String],
    on_line: &mut dyn FnMut(&str),
    found: Interpreter,
) -> Result<SetupOutcome, EnvError> {
    let Some(mut marker) = std::fs::read_to_string(dir.join(MARKER))
        .ok()
        .and_then(|text| serde_json::from_str::<Marker>(&text).ok())
    else {
        return Ok(SetupOutcome::AlreadyThere(found));
    };
    let missing: Vec<&str> = framework
        .packages
        .iter()
        .copied()
        .filter(|p| !marker.packages.iter().any(|m| m == p))
        .collect();
    if missing.is_empty() {
        return Ok(SetupOutcome::AlreadyThere(found));
    }
    let mut pip = Spec::new(python);
    pip.args(["-m", "pip", "install", "--disable-pip-version-check"])
        .args(&missing)
        .args(pip_args);
    run_step("pip install", &pip, on_line).map_err(|e| EnvError::Setup {
        framework: framework.name.to_string(),
        error: Box::new(e),
    })?;
    marker
        .packages
        .extend(missing.iter().map(|p| p.to_string()));
    write_marker(dir, &marker)?;
    Ok(SetupOutcome::Made(found))
}

/// Makes the framework's environment with `base` (a `python3`) and installs its packages with
/// pip (`pip_args` are passed on, e.g. `--index-url URL`). `force` remakes an existing one.
pub fn setup(
    framework: &Framework,
    base: &Path,
    pip_args: &[String],
    force: bool,
    on_line: &mut dyn FnMut(&str),
) -> Result<SetupOutcome, EnvError> {
    if !framework.runnable() {
        return Err(EnvError::NotInThisBuild(framework.name.to_string()));
    }
    let dir = env_dir(framework)?;
    let python = venv_python(&dir);
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|error| EnvError::Io {
            what: "create",
            path: parent.to_path_buf(),
            error,
        })?;
    }
    // One set-up of an environment at a time (two shells, parallel tests): the second waits,
    // then finds the environment ready.
    let _lock = crate::lockfile::LockFile::acquire_waiting(
        &dir.with_extension("lock"),
        &format!("edgeprof env setup {}", framework.name),
        |held| on_line(&format!("waiting: {held}")),
    )?;
    if dir.exists() {
        if !force {
            if let Ok(p) = probe(&python, &[framework]) {
                if let Some(i) = interpreter(&python, Origin::Managed, framework, &p) {
                    return top_up(framework, &dir, &python, pip_args, on_line, i);
                }
            }
        }
        remove_dir(framework, &dir)?;
    }
    let made = (|| -> Result<Interpreter, EnvError> {
        let mut venv = Spec::new(base);
        venv.arg("-m").arg("venv").arg(&dir);
        run_step(&format!("{} -m venv", base.display()), &venv, on_line).map_err(|e| match e {
            EnvError::Failed(why) => EnvError::Failed(format!(
                "{why} (on Debian and Ubuntu the venv module comes with the python3-venv package)"
            )),
            other => other,
        })?;
        let mut pip = Spec::new(&python);
        pip.args(["-m", "pip", "install", "--disable-pip-version-check"])
            .args(framework.packages)
            .args(pip_args);
        run_step("pip install", &pip, on_line)?;
        let p = probe(&python, &[framework]).map_err(|why| {
            EnvError::Failed(format!("the new environment's python fails: {why}"))
        })?;
        let i = interpreter(&python, Origin::Managed, framework, &p).ok_or_else(|| {
            EnvError::Failed(format!(
                "pip installed {} but Python cannot find the {} module",
                framework.packages.join(" "),
                framework.module
            ))
        })?;
        write_marker(
            &dir,
            &Marker {
                framework: framework.name.to_string(),
                packages: framework.packages.iter().map(|s| s.to_string()).collect(),
                pip_args: pip_args.to_vec(),
                base_python: base.to_path_buf(),
                created: crate::text::now_rfc3339(),
            },
        )?;
        Ok(i)
    })();
    match made {
        Ok(i) => Ok(SetupOutcome::Made(i)),
        Err(e) => {
            // Leave nothing half-made behind: a later setup starts clean.
            let _ = std::fs::remove_dir_all(&dir);
            Err(EnvError::Setup {
                framework: framework.name.to_string(),
                error: Box::new(e),
            })
        }
    }
}

fn remove_dir(framework: &Framework, dir: &Path) -> Result<(), EnvError> {
    // venv writes pyvenv.cfg first, so a setup cut short leaves that without the marker.
    if !dir.join(MARKER).exists() && !dir.join("pyvenv.cfg").exists() {
        return Err(EnvError::NotOurs {
            dir: dir.to_path_buf(),
            framework: framework.name.to_string(),
        });
    }
    std::fs::remove_dir_all(dir).map_err(|error| EnvError::Io {
        what: "remove",
        path: dir.to_path_buf(),
        error,
    })
}

/// Removes the framework's environment; returns where it was, or `None` if there was none.
pub fn remove(framework: &Framework) -> Result<Option<PathBuf>, EnvError> {
    let dir = env_dir(framework)?;
    if !dir.exists() {
        return Ok(None);
    }
    remove_dir(framework, &dir)?;
    Ok(Some(dir))
}

crate::error::kinds_by_input!(EnvError);

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Spec {
        let mut spec = Spec::new("sh");
        spec.args(["-c", script]);
        spec
    }

    #[test]
    fn a_setup_step_passes_on_both_streams_and_fails_with_its_last_words() {
        let mut seen = Vec::new();
        let failed = run_step("step", &sh("echo out; echo err >&2; exit 4"), &mut |l| {
            seen.push(l.to_string())
        });
        seen.sort();
        assert_eq!(seen, ["err", "out"]);
        let why = match failed {
            Err(e) => e.to_string(),
            Ok(()) => panic!("a failed step succeeded"),
        };
        assert!(why.starts_with("step failed (exit status: 4)"), "{why}");
    }

    #[test]
    fn a_setup_step_that_hangs_is_stopped_at_its_time_limit() {
        let started = std::time::Instant::now();
        // The grandchild holds the pipes: only killing the group ends the step.
        let late = run_step_within(
            "pip install",
            &sh("sleep 30 & sleep 30"),
            Duration::from_millis(300),
            &mut |_| {},
        );
        match late {
            Err(e) => assert_eq!(
                e.to_string(),
                "pip install did not end within 300 ms and was stopped"
            ),
            Ok(()) => panic!("a hung step succeeded"),
        }
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    fn probe_of(modules: &[(&str, Option<&str>)]) -> Probe {
        Probe {
            python: "3.11.2".into(),
            modules: modules
                .iter()
                .map(|(m, v)| (m.to_string(), v.map(str::to_string)))
                .collect(),
        }
    }

    #[test]
    fn an_interpreter_counts_only_when_the_module_is_there() {
        let ort = external::find("onnxruntime").unwrap_or(&external::FRAMEWORKS[0]);
        let python = Path::new("/usr/bin/python3");
        let found = interpreter(
            python,
            Origin::System,
            ort,
            &probe_of(&[("onnxruntime", Some("1.19.2"))]),
        );
        assert_eq!(found.map(|i| i.version), Some("1.19.2".to_string()));
        let unversioned = interpreter(
            python,
            Origin::System,
            ort,
            &probe_of(&[("onnxruntime", Some(""))]),
        );
        assert_eq!(
            unversioned.map(|i| i.version),
            Some("version unknown".to_string())
        );
        assert!(interpreter(
            python,
            Origin::System,
            ort,
            &probe_of(&[("onnxruntime", None)])
        )
        .is_none());
        assert!(interpreter(python, Origin::System, ort, &probe_of(&[])).is_none());
    }

    #[test]
    fn readiness_says_what_to_do() {
        let hint = Readiness::NotSetUp {
            hint: "edgeprof env setup pytorch".into(),
        };
        assert_eq!(
            hint.describe(),
            "not set up (run: edgeprof env setup pytorch)"
        );
        let blocker = hint.blocker("pytorch").unwrap_or_default();
        assert!(
            blocker.contains("run `edgeprof env setup pytorch`"),
            "{blocker}"
        );
        assert!(blocker.contains("[frameworks.pytorch] python"), "{blocker}");
        assert!(Readiness::BuiltIn {
            version: "0.23.9".into()
        }
        .blocker("tract")
        .is_none());
    }
}

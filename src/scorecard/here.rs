//! Deploy-time facts probed on this device: whether each framework is built in or
//! installed here, its version, the accelerators, execution providers or delegates it sees,
//! and which of its tools and libraries are present. Each Python framework is asked in a child
//! interpreter with a time limit; nothing is imported into edgeprof itself.

use super::cards::Card;
use crate::engines::env::{self, Readiness};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one framework's interpreter may take (importing TensorFlow takes seconds).
const TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Compiled into edgeprof.
    BuiltIn,
    /// Importable here.
    Installed,
    /// Found, but importing it or asking it failed.
    Broken,
    /// Neither its module nor its tools are here.
    Absent,
    /// Only its command-line tools or libraries are here.
    ToolsOnly,
}

impl State {
    pub fn label(self) -> &'static str {
        match self {
            State::BuiltIn => "built in",
            State::Installed => "installed",
            State::Broken => "broken",
            State::Absent => "not installed",
            State::ToolsOnly => "tools only",
        }
    }
}

/// One framework on this device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Here {
    pub framework: String,
    pub state: State,
    pub version: Option<String>,
    /// The interpreter asked, and where it came from.
    pub python: Option<String>,
    /// The accelerators, providers or delegates it reports here.
    pub devices: Vec<String>,
    /// Its command-line tools and libraries found, as paths.
    pub tools: Vec<String>,
    /// Why it is broken or absent, or how to set it up.
    pub note: Option<String>,
}

/// What the child interpreter answers.
#[derive(Debug, Deserialize)]
struct Answer {
    python: String,
    found: bool,
    version: Option<String>,
    #[serde(default)]
    devices: Vec<String>,
    error: Option<String>,
}

/// Asks one module for its version and devices; `query` fills `devices` from the module `m`.
const ASK: &str = r#"
import json, sys, importlib, importlib.util
req = json.load(sys.stdin)
out = {"python": sys.version.split()[0], "found": False, "version": None, "devices": [], "error": None}
try:
    found = importlib.util.find_spec(req["module"]) is not None
except Exception:
    found = False
if found:
    out["found"] = True
    try:
        from importlib import metadata
        out["version"] = metadata.version(req["distribution"])
    except Exception:
        pass
    try:
        ns = {"m": importlib.import_module(req["module"]), "devices": []}
        exec(req["query"], ns)
        out["devices"] = [str(d) for d in ns["devices"]]
    except BaseException as e:
        out["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
sys.stdout.write("\n" + json.dumps(out) + "\n")
"#;

/// Per module: Python that lists what the framework sees here into `devices`.
fn query_for(module: &str) -> &'static str {
    match module {
        "onnxruntime" => "devices = list(m.get_available_providers())",
        "torch" => {
            "devices = ['CPU']\n\
             if m.cuda.is_available():\n\
             \x20   devices += ['CUDA %d: %s' % (i, m.cuda.get_device_name(i)) for i in range(m.cuda.device_count())]\n\
             mps = getattr(m.backends, 'mps', None)\n\
             if mps is not None and mps.is_available():\n\
             \x20   devices.append('MPS')\n\
             if m.backends.mkldnn.is_available():\n\
             \x20   devices.append('oneDNN')\n\
             if getattr(getattr(m.backends, 'xnnpack', None), 'enabled', False):\n\
             \x20   devices.append('XNNPACK')"
        }
        "tensorflow" => {
            "devices = ['%s (%s)' % (d.device_type, d.name) for d in m.config.list_physical_devices()]\n\
             if m.test.is_built_with_cuda():\n\
             \x20   devices.append('built with CUDA')"
        }
        "ai_edge_litert" => {
            "devices = ['XNNPACK (built in)']\n\
             try:\n\
             \x20   from ai_edge_litert.interpreter import load_delegate\n\
             \x20   load_delegate('libedgetpu.so.1')\n\
             \x20   devices.append('Edge TPU')\n\
             except Exception:\n\
             \x20   pass"
        }
        "ncnn" => {
            "devices = ['CPU']\n\
             count = getattr(m, 'get_gpu_count', lambda: 0)()\n\
             devices += ['Vulkan GPU %d' % i for i in range(count)]"
        }
        "openvino" => "devices = list(m.Core().available_devices)",
        _ => "devices = []",
    }
}

/// Probes every card's framework on this device, telling `progress` before each.
pub fn probe_all(cards: &[Card], mut progress: impl FnMut(&str)) -> Vec<Here> {
    let simd = crate::collect::device::fingerprint(Path::new("/")).simd;
    cards
        .iter()
        .map(|card| {
            progress(&card.name);
            probe(card, &simd)
        })
        .collect()
}

/// Probes one framework.
pub fn probe(card: &Card, simd: &[String]) -> Here {
    let mut here = Here {
        framework: card.name.clone(),
        state: State::Absent,
        version: None,
        python: None,
        devices: Vec::new(),
        tools: find_tools(card),
        note: None,
    };
    if card.probe.built_in {
        here.state = State::BuiltIn;
        here.version = crate::engines::version(&card.name).map(str::to_string);
        let widest: Vec<&str> = simd
            .iter()
            .map(String::as_str)
            .filter(|s| ["avx512f", "avx2", "fma", "asimd", "sve", "asimddp", "neon"].contains(s))
            .collect();
        here.devices = vec![if widest.is_empty() {
            "CPU".to_string()
        } else {
            format!("CPU ({})", widest.join(", "))
        }];
        if card.name == "candle" {
            here.note = Some("this build has no CUDA or Metal backend".to_string());
        }
        return here;
    }
    let (Some(module), Some(distribution)) = (&card.probe.python_module, &card.probe.distribution)
    else {
        return here;
    };
    let (python, origin, hint) = interpreter_for(card);
    let Some(python) = python else {
        here.state = tools_or_absent(&here);
        here.note = Some(hint.unwrap_or_else(|| "no python3 on PATH to ask".to_string()));
        return here;
    };
    here.python = Some(format!("{} ({origin})", python.display()));
    let request = serde_json::json!({
        "module": module,
        "distribution": distribution,
        "query": query_for(module),
    });
    match ask(&python, &request) {
        Ok(answer) if answer.found => {
            here.version = answer.version.filter(|v| !v.is_empty());
            here.devices = answer.devices;
            match answer.error {
                Some(error) => {
                    here.state = State::Broken;
                    here.note = Some(format!("importing {module} failed: {error}"));
                }
                None => here.state = State::Installed,
            }
        }
        Ok(answer) => {
            here.state = tools_or_absent(&here);
            here.note = Some(match hint {
                Some(hint) => hint,
                None => format!("Python {} has no {module} module", answer.python),
            });
        }
        Err(why) => {
            here.state = State::Broken;
            here.note = Some(format!("{} could not be asked: {why}", python.display()));
        }
    }
    here
}

fn tools_or_absent(here: &Here) -> State {
    if here.tools.is_empty() {
        State::Absent
    } else {
        State::ToolsOnly
    }
}

/// The interpreter to ask: for an engine edgeprof runs, the one `run` would use (config-less:
/// edgeprof's environment, then the system's); otherwise the system's `python3`. Also the set-up
/// hint when the engine has none.
fn interpreter_for(card: &Card) -> (Option<PathBuf>, &'static str, Option<String>) {
    if let Some(framework) = card
        .engine
        .as_deref()
        .and_then(crate::engines::external::find)
    {
        return match env::readiness(framework, None) {
            Readiness::Ready(i) => (Some(i.python.clone()), i.origin.describe(), None),
            Readiness::Broken { python, .. } => (Some(python), "broken environment", None),
            other => (
                env::system_python(),
                "system",
                Some(other.describe()).filter(|d| !d.is_empty()),
            ),
        };
    }
    (env::system_python(), "system", None)
}

/// Runs the probe program in `python` with `request` (module, distribution, query).
fn ask(python: &Path, request: &serde_json::Value) -> Result<Answer, String> {
    let mut command = crate::collect::child::Spec::new(python);
    command.args(["-c", ASK]);
    // Quiet frameworks that log to stderr on import (TensorFlow).
    command.env("TF_CPP_MIN_LOG_LEVEL", "3");
    env::run_with_timeout(&command, &request.to_string(), TIMEOUT)
        .map_err(|e| e.0)
        .and_then(|out| parse_answer(&out))
}

/// The last line of the child's output that parses as the answer.
fn parse_answer(out: &str) -> Result<Answer, String> {
    out.lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| "it printed no answer".to_string())
        .and_then(|line| {
            serde_json::from_str(line).map_err(|e| format!("its answer is not JSON ({e})"))
        })
}

/// The card's tools on PATH or in its command directories, and its libraries in the system's
/// library directories.
fn find_tools(card: &Card) -> Vec<String> {
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let command_dirs: Vec<PathBuf> = card
        .probe
        .command_dirs
        .iter()
        .map(PathBuf::from)
        .chain(path_dirs)
        .collect();
    let mut found: Vec<String> = card
        .probe
        .commands
        .iter()
        .filter_map(|c| crate::collect::find_in(c, &command_dirs))
        .map(|p| p.display().to_string())
        .collect();
    let library_dirs = library_dirs();
    found.extend(
        card.probe
            .libraries
            .iter()
            .filter_map(|l| first_file(&library_dirs, l)),
    );
    found
}

fn first_file(dirs: &[PathBuf], name: &str) -> Option<String> {
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// Where the dynamic loader looks, near enough: LD_LIBRARY_PATH, the multiarch and usual
/// directories, and CUDA's.
fn library_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let triple = format!("{}-linux-gnu", std::env::consts::ARCH);
    for dir in [
        format!("/usr/lib/{triple}"),
        format!("/lib/{triple}"),
        "/usr/local/lib".to_string(),
        "/usr/lib".to_string(),
        "/lib".to_string(),
        "/usr/local/cuda/lib64".to_string(),
    ] {
        dirs.push(PathBuf::from(dir));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_the_last_json_line_after_any_import_chatter() -> Result<(), String> {
        let out = "Warning: something\n\n{\"python\": \"3.11.2\", \"found\": true, \
                   \"version\": \"1.32.0\", \"devices\": [\"CPUExecutionProvider\"], \
                   \"error\": null}\n";
        let answer = parse_answer(out)?;
        assert!(answer.found);
        assert_eq!(answer.version.as_deref(), Some("1.32.0"));
        assert_eq!(answer.devices, ["CPUExecutionProvider"]);
        assert!(parse_answer("Traceback (most recent call last):\n").is_err());
        assert!(parse_answer("{not json").is_err());
        Ok(())
    }

    #[test]
    fn built_in_frameworks_report_their_version_and_the_cpu_features_they_use(
    ) -> crate::error::Result<()> {
        let cards = super::super::cards::shipped()?;
        let tract = super::super::cards::find(&cards, "tract")?;
        let here = probe(tract, &["sse2".into(), "avx2".into(), "fma".into()]);
        assert_eq!(here.state, State::BuiltIn);
        assert_eq!(here.version.as_deref(), crate::engines::version("tract"));
        assert_eq!(here.devices, ["CPU (avx2, fma)"]);
        Ok(())
    }

    /// Runs the real probe program in this machine's python3 against a module that is always
    /// there, so the program itself (not only its parsing) is checked.
    #[test]
    fn the_probe_program_answers_for_a_module_python_always_has() -> Result<(), String> {
        let Some(python) = env::system_python() else {
            return Ok(()); // No python3 here: the parsing test above still runs.
        };
        let request = serde_json::json!({
            "module": "json", "distribution": "no-such-distribution",
            "query": "devices = ['CPU', m.__name__]",
        });
        let answer = ask(&python, &request)?;
        assert!(answer.found);
        assert_eq!(answer.version, None);
        assert_eq!(answer.devices, ["CPU", "json"]);
        assert_eq!(answer.error, None);
        let request = serde_json::json!({
            "module": "json", "distribution": "x", "query": "raise RuntimeError('no device')",
        });
        let answer = ask(&python, &request)?;
        assert_eq!(answer.error.as_deref(), Some("RuntimeError: no device"));
        Ok(())
    }
}

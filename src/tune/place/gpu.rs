//! The units an engine serves in `edgeprof place` (onnxruntime on the CPU or a GPU), and the
//! GPU: whether there is one, how it reaches the CPU's data, and whether it can be a unit here.

use crate::collect::gpuprof::{self, MemoryKind};
use crate::error::Unavailable;
use crate::runner::place_worker::{Unit, UnitEngine};
use crate::tune::placement::{self, GpuMemory, Link};
use crate::tune::TuneError;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The interpreter that has onnxruntime here (`given`, else edgeprof's environment, else the
/// system's), or why there is none, in a sentence.
pub fn onnxruntime_python(given: Option<&PathBuf>) -> Result<PathBuf, Unavailable> {
    let Some(framework) = crate::engines::external::find("onnxruntime") else {
        return Err(Unavailable("this build has no onnxruntime harness".into()));
    };
    let readiness = crate::engines::env::readiness(framework, given);
    match readiness.interpreter() {
        Some(i) => Ok(i.python.clone()),
        None => Err(Unavailable(
            readiness
                .blocker("onnxruntime")
                .unwrap_or_else(|| "onnxruntime is not ready here".into()),
        )),
    }
}

/// Whether a unit's spec names an engine (`onnxruntime:…`) rather than CPUs.
pub fn is_engine_spec(spec: &str) -> bool {
    spec.starts_with("onnxruntime:")
}

/// `ENGINE:DEVICE[@CPUS]` of `--units` (e.g. `onnxruntime:cuda:0`, `onnxruntime:cpu@1`), or
/// None when `spec` is a CPU list.
pub fn engine_unit(
    name: &str,
    spec: &str,
    python: Option<&PathBuf>,
) -> crate::error::Result<Option<Unit>> {
    let Some(rest) = spec.strip_prefix("onnxruntime:") else {
        if spec.contains(':') {
            crate::error::bail!(TuneError::Asked(format!(
                "--units: {name}={spec}: only onnxruntime serves units (e.g. \
                 {name}=onnxruntime:cuda:0 or {name}=onnxruntime:cpu@1)"
            )));
        }
        return Ok(None);
    };
    let (device, cpus) = match rest.split_once('@') {
        Some((device, cpus)) => (device, Some(cpus)),
        None => (rest, None),
    };
    let valid = device == "cpu"
        || device
            .strip_prefix("cuda:")
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()) && n.parse::<u32>().is_ok());
    if !valid {
        crate::error::bail!(TuneError::Asked(format!(
            "--units: {name}={spec}: the device {device:?} is neither cpu nor cuda:N"
        )));
    }
    let cpus = match cpus {
        Some(list) if list.trim().is_empty() => crate::error::bail!(TuneError::Asked(format!(
            "--units: {name}={spec}: name the CPUs after @ (e.g. @0-1), or leave @ out for all"
        ))),
        Some(list) => super::unit_cpus(name, list)?,
        None => crate::tune::tuning::allowed_cpus(),
    };
    let python = onnxruntime_python(python)
        .map_err(|why| TuneError::Asked(format!("--units: {name}: {}", why.0)))?;
    Ok(Some(Unit {
        name: name.to_string(),
        cpus,
        engine: Some(UnitEngine {
            framework: "onnxruntime".into(),
            device: device.to_string(),
            python,
        }),
    }))
}

/// The GPU ordinal of a unit, when a GPU serves it.
fn ordinal(unit: &Unit) -> Option<usize> {
    unit.engine
        .as_ref()?
        .device
        .strip_prefix("cuda:")?
        .parse()
        .ok()
}

/// The execution providers of `python`'s onnxruntime, or why they are not known.
fn providers(python: &Path) -> Result<Vec<String>, String> {
    let mut command = crate::collect::child::Spec::new(python);
    command.args([
        "-c",
        "import onnxruntime as o; print(','.join(o.get_available_providers()))",
    ]);
    let out = crate::engines::env::run_with_timeout(&command, "", Duration::from_secs(120))
        .map_err(|e| e.0)?;
    Ok(out
        .lines()
        .last()
        .unwrap_or("")
        .split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect())
}

/// What `place` says of the GPU, and the GPU unit with its memory when one is in the plan.
pub struct Gpu {
    pub line: String,
    /// The index of the GPU unit in the units, and its memory (None: not known).
    pub unit: Option<(usize, Option<MemoryKind>)>,
}

fn word(kind: MemoryKind) -> &'static str {
    match kind {
        MemoryKind::Unified => "unified",
        MemoryKind::Discrete => "discrete",
    }
}

/// Decides the GPU's part: a GPU unit named in `--units` is kept (its memory detected where it
/// can be); with the default units (`auto`), GPU 0 joins as unit `gpu` when there is one and
/// onnxruntime here has its CUDA provider. The line says which, and why not.
pub fn decide(
    units: &mut Vec<Unit>,
    auto: bool,
    python: Option<&PathBuf>,
) -> crate::error::Result<Gpu> {
    if let Some((i, n)) = units
        .iter()
        .enumerate()
        .find_map(|(i, u)| ordinal(u).map(|n| (i, n)))
    {
        // Said now, before any measurement, when its onnxruntime cannot reach a GPU.
        for u in units.iter().filter(|u| ordinal(u).is_some()) {
            let Some(engine) = &u.engine else { continue };
            match providers(&engine.python) {
                Ok(p) if p.iter().any(|p| p == "CUDAExecutionProvider") => {}
                Ok(p) => crate::error::bail!(TuneError::Unavailable(format!(
                    "unit {}: this onnxruntime ({}) has no CUDA execution provider (it has {}); \
                     install onnxruntime-gpu in its environment",
                    u.name,
                    engine.python.display(),
                    p.join(", ")
                ))),
                Err(why) => crate::error::bail!(TuneError::Unavailable(format!(
                    "unit {}: cannot ask {}'s onnxruntime for its providers: {why}",
                    u.name,
                    engine.python.display()
                ))),
            }
        }
        return Ok(match gpuprof::memory_kind(Path::new("/"), n) {
            Ok((kind, how)) => Gpu {
                line: format!(
                    "GPU {n}: {} memory ({how}); unit {} runs its blocks there on onnxruntime's \
                     CUDA provider",
                    word(kind),
                    units[i].name
                ),
                unit: Some((i, Some(kind))),
            },
            Err(why) => Gpu {
                line: format!(
                    "GPU {n}: edgeprof cannot tell whether it shares the CPU's memory ({why}); \
                     unit {} runs its blocks there on onnxruntime's CUDA provider, each \
                     direction of its copies fitted apart",
                    units[i].name
                ),
                unit: Some((i, None)),
            },
        });
    }
    let (kind, how) = match gpuprof::memory_kind(Path::new("/"), 0) {
        Err(why) => {
            return Ok(Gpu {
                line: format!("GPU: {why}; the blocks are placed across the CPU units"),
                unit: None,
            })
        }
        Ok(found) => found,
    };
    let not_a_unit = |why: String| Gpu {
        line: format!(
            "GPU 0: {} memory ({how}); not a unit of this plan: {why}; the blocks are placed \
             across the CPU units",
            word(kind)
        ),
        unit: None,
    };
    if !auto {
        return Ok(not_a_unit(
            "--units names no onnxruntime:cuda:N unit".into(),
        ));
    }
    let python = match onnxruntime_python(python) {
        Ok(p) => p,
        Err(why) => {
            return Ok(not_a_unit(format!(
                "its blocks run on onnxruntime, and {}",
                why.0
            )))
        }
    };
    match providers(&python) {
        Ok(p) if p.iter().any(|p| p == "CUDAExecutionProvider") => {}
        Ok(p) => {
            return Ok(not_a_unit(format!(
                "onnxruntime with {} has no CUDA provider (it has {}); install onnxruntime-gpu \
                 there",
                python.display(),
                p.join(", ")
            )))
        }
        Err(why) => {
            return Ok(not_a_unit(format!(
                "cannot ask {}'s onnxruntime for its providers: {why}",
                python.display()
            )))
        }
    }
    units.push(Unit {
        name: "gpu".into(),
        cpus: crate::tune::tuning::allowed_cpus(),
        engine: Some(UnitEngine {
            framework: "onnxruntime".into(),
            device: "cuda:0".into(),
            python,
        }),
    });
    Ok(Gpu {
        line: format!(
            "GPU 0: {} memory ({how}); unit gpu runs its blocks there on onnxruntime's CUDA \
             provider",
            word(kind)
        ),
        unit: Some((units.len() - 1, Some(kind))),
    })
}

/// The links to and from the GPU unit `g` refitted as its memory has them (see
/// [`placement::gpu_memory`]); every other link as measured.
pub fn apply_memory(
    links: &mut [Vec<Link>],
    samples: &[Vec<Vec<(u64, f64)>>],
    g: usize,
    kind: MemoryKind,
) {
    for a in 0..links.len() {
        if a == g {
            continue;
        }
        match placement::gpu_memory(kind, &samples[a][g], &samples[g][a]) {
            Some(GpuMemory::Unified { copy }) => {
                links[a][g] = copy;
                links[g][a] = copy;
            }
            Some(GpuMemory::Discrete { to_gpu, to_host }) => {
                links[a][g] = to_gpu;
                links[g][a] = to_host;
            }
            None => {}
        }
    }
}

/// How a unit is named in progress lines: `cpu0 (CPUs 0)`, `gpu (onnxruntime on cuda:0, fed
/// from CPUs 0-1)`.
pub fn describe(u: &Unit) -> String {
    let cpus = crate::collect::device::cpu_list(&u.cpus);
    match &u.engine {
        None => format!("{} (CPUs {cpus})", u.name),
        Some(e) => format!(
            "{} ({} on {}, fed from CPUs {cpus})",
            u.name, e.framework, e.device
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_units_are_parsed_and_bad_ones_refused() {
        assert!(matches!(engine_unit("a", "0-1", None), Ok(None)));
        for bad in [
            "tflite:cpu",
            "onnxruntime:npu",
            "onnxruntime:cuda:",
            "onnxruntime:cuda:99999999999999999999",
            "onnxruntime:cpu@x",
            "onnxruntime:cpu@",
            "onnxruntime:cpu@4096",
        ] {
            let Err(e) = engine_unit("a", bad, None) else {
                panic!("{bad} was taken");
            };
            assert!(e.to_string().starts_with("--units: a"), "{e}");
        }
    }
}

//! The GPU conditions of a finished sweep with `output.roofline`, each run once more under the
//! profiler its GPU needs (Nsight Compute's `ncu` from compute capability 7.0, nvprof before)
//! with the hierarchical roofline's metrics, its kernels summed into one point, and that point
//! judged against the GPU's kept ceilings with the ordered advice. Everything lands in the
//! results directory: the profiler's CSV under `gpu-profiles/<condition>/`, and
//! `gpu-roofline.json` with every condition's point, or the reason it has none (no profiler,
//! no permission to read the counters, no GPU), never a silent gap.
//!
//! The profiled run is short (one warm-up and a few timed iterations, one process): a profiler
//! replays every kernel once per pass over its metrics, so an inference of milliseconds takes
//! seconds under it, and its times are not the condition's latency (the sweep measured that).
//! The point's performance is the kernels' summed FLOPs over their summed time.

use crate::collect::gpuprof::{self, Tool};
use crate::collect::stop::Cancel;
use crate::config::{Config, Device, GpuProfiler};
use crate::protocol::Condition;
use crate::roofline::{advice, nvidia, store, Ceilings, Program};
use crate::runner::prepare;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file in the results directory.
pub const FILE: &str = "gpu-roofline.json";
/// The folder of the profilers' CSV files in the results directory.
pub const FOLDER: &str = "gpu-profiles";
/// Timed iterations of the profiled run (after one warm-up).
pub const ITERATIONS: usize = 5;

/// One GPU condition on the GPU roofline, or why it is not there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profiled {
    pub condition: String,
    pub gpu: usize,
    /// `ncu` or `nvprof`, once chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The folder of its CSV files, relative to the results directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<Program>,
    /// What reading the profile left out (failed launches, truncated lines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Why there is no point, in one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The ceilings one GPU's points are judged against, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuCeilings {
    pub gpu: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceilings: Option<Ceilings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `gpu-roofline.json`: every GPU condition, the ceilings of each GPU, and the analyses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuRoofline {
    pub conditions: Vec<Profiled>,
    pub ceilings: Vec<GpuCeilings>,
}

impl GpuRoofline {
    /// The conditions placed on GPU `gpu`'s roofline, and the others with their reasons.
    pub fn points(&self, gpu: usize) -> (Vec<Program>, Vec<(String, String)>) {
        let mut programs = Vec::new();
        let mut left_out = Vec::new();
        for p in self.conditions.iter().filter(|p| p.gpu == gpu) {
            match (&p.program, &p.reason) {
                (Some(program), _) => programs.push(program.clone()),
                (None, reason) => left_out.push((
                    p.condition.clone(),
                    reason.clone().unwrap_or_else(|| "not profiled".to_string()),
                )),
            }
        }
        (programs, left_out)
    }

    /// GPU `gpu`'s ceilings, when it has kept ones.
    pub fn ceilings_of(&self, gpu: usize) -> Option<&GpuCeilings> {
        self.ceilings.iter().find(|c| c.gpu == gpu)
    }

    /// The GPUs with conditions, in order.
    pub fn gpus(&self) -> Vec<usize> {
        let mut gpus: Vec<usize> = self.conditions.iter().map(|p| p.gpu).collect();
        gpus.sort_unstable();
        gpus.dedup();
        gpus
    }

    /// Every placed condition's analysis against its GPU's ceilings.
    pub fn analyses(&self) -> Vec<advice::Analysis> {
        self.conditions
            .iter()
            .filter_map(|p| {
                let c = self.ceilings_of(p.gpu)?.ceilings.as_ref()?;
                advice::analyse(p.program.as_ref()?, c).ok()
            })
            .collect()
    }
}

/// Reads `gpu-roofline.json` from a results directory: None when the sweep made none.
pub fn load(dir: &Path) -> crate::error::Result<Option<GpuRoofline>> {
    let path = dir.join(FILE);
    let text = match crate::collect::read_capped(&path, 64 << 20) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => crate::error::bail!("cannot read {}: {e}", path.display()),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| crate::error::failed!("{} is not a GPU roofline: {e}", path.display()))
}

/// How the profiling of a sweep's GPU conditions goes, for progress display.
#[derive(Debug, Clone)]
pub enum GpuProfileEvent {
    /// Condition `index` of `total` starts under `tool`.
    Start {
        index: usize,
        total: usize,
        condition: String,
        tool: String,
    },
    /// It ended: placed, or why not.
    Done {
        index: usize,
        total: usize,
        profiled: Box<Profiled>,
    },
}

impl GpuProfileEvent {
    /// The event as one line of progress, and whether it says something went wrong.
    pub fn line(&self) -> (String, bool) {
        match self {
            GpuProfileEvent::Start {
                index,
                total,
                condition,
                tool,
            } => (
                format!(
                    "[GPU roofline {index}/{total}] {condition}: running under {tool} (it \
                     replays every kernel per metric pass: minutes, not milliseconds)"
                ),
                false,
            ),
            GpuProfileEvent::Done {
                index,
                total,
                profiled,
            } => match (&profiled.program, &profiled.reason) {
                (Some(p), _) => (
                    format!(
                        "[GPU roofline {index}/{total}] {}: placed, {:.3} GFLOP in {:.3} ms of \
                         kernels ({:.1} GFLOP/s)",
                        profiled.condition,
                        p.flops / 1e9,
                        p.seconds * 1e3,
                        p.flops / p.seconds.max(f64::MIN_POSITIVE) / 1e9
                    ),
                    false,
                ),
                (None, reason) => (
                    format!(
                        "[GPU roofline {index}/{total}] {}: not placed: {}",
                        profiled.condition,
                        reason.as_deref().unwrap_or("not profiled")
                    ),
                    true,
                ),
            },
        }
    }
}

/// The GPU conditions of a results directory that gave times: the ones to profile.
pub fn gpu_conditions(stored: &crate::results::Stored) -> Vec<Condition> {
    let mut out: Vec<Condition> = Vec::new();
    for r in stored.runs.iter().filter(|r| r.ok && r.last) {
        if matches!(r.condition.device, Device::Gpu(_))
            && !out.iter().any(|c| c.id == r.condition.id)
        {
            out.push(r.condition.clone());
        }
    }
    out
}

/// The profiling of a sweep's GPU conditions.
pub struct GpuProfiling<'a> {
    pub config: &'a Config,
    /// The results directory.
    pub dir: &'a Path,
    /// This edgeprof binary (the built-in engines' worker).
    pub edgeprof: &'a Path,
    /// Where a Jetson's SoC is read when NVML does not answer (`/`, or a fixture tree).
    pub root: &'a Path,
    pub cancel: &'a Cancel,
}

impl GpuProfiling<'_> {
    /// Profiles `conditions` one after the other and writes `gpu-roofline.json`; stops early
    /// (keeping what was done) when cancelled.
    pub fn run(
        &self,
        conditions: &[Condition],
        mut on_event: impl FnMut(GpuProfileEvent),
    ) -> crate::error::Result<GpuRoofline> {
        let interpreters = prepare::interpreters(self.config, conditions);
        let mut out = GpuRoofline::default();
        let total = conditions.len();
        for (i, c) in conditions.iter().enumerate() {
            if self.cancel.is_raised() {
                break;
            }
            let Device::Gpu(gpu) = c.device else {
                continue;
            };
            let profiled =
                self.profile(c, gpu as usize, i + 1, total, &interpreters, &mut on_event);
            on_event(GpuProfileEvent::Done {
                index: i + 1,
                total,
                profiled: Box::new(profiled.clone()),
            });
            out.conditions.push(profiled);
        }
        out.ceilings = out.gpus().into_iter().map(kept_ceilings).collect();
        write(self.dir, &out)?;
        Ok(out)
    }

    /// The profiler for GPU `gpu`, or why there is none.
    fn tool(&self, gpu: usize) -> Result<(Tool, PathBuf), String> {
        let tool = match self.config.output.gpu_profiler {
            GpuProfiler::Ncu => Tool::Ncu,
            GpuProfiler::Nvprof => Tool::Nvprof,
            GpuProfiler::Auto => gpuprof::compute_capability_of(self.root, gpu)
                .map(gpuprof::tool_for)
                .map_err(|why| {
                    format!("{why}; or set output.gpu_profiler = \"ncu\" or \"nvprof\"")
                })?,
        };
        let program = gpuprof::find(tool).map_err(|why| why.0)?;
        Ok((tool, program))
    }

    fn profile(
        &self,
        c: &Condition,
        gpu: usize,
        index: usize,
        total: usize,
        interpreters: &prepare::Interpreters,
        on_event: &mut impl FnMut(GpuProfileEvent),
    ) -> Profiled {
        let mut profiled = Profiled {
            condition: c.id.clone(),
            gpu,
            tool: None,
            folder: None,
            program: None,
            warnings: Vec::new(),
            reason: None,
        };
        let (tool, program) = match self.tool(gpu) {
            Ok(t) => t,
            Err(why) => {
                profiled.reason = Some(why);
                return profiled;
            }
        };
        profiled.tool = Some(tool.program().to_string());
        on_event(GpuProfileEvent::Start {
            index,
            total,
            condition: c.id.clone(),
            tool: tool.program().to_string(),
        });
        let folder = format!("{FOLDER}/{}", prepare::file_stem(&c.id));
        match self.profile_with(c, tool, &program, &self.dir.join(&folder), interpreters) {
            Ok(import) => {
                profiled.warnings = import.warnings.clone();
                profiled.program = nvidia::program(&import, &c.id);
                if profiled.program.is_none() {
                    profiled.reason = Some(format!(
                        "{} measured no kernel time for it (is it running on the GPU?)",
                        tool.program()
                    ));
                }
            }
            Err(why) => profiled.reason = Some(why),
        }
        profiled.folder = Some(folder);
        profiled
    }

    /// Runs condition `c`'s worker under `tool` and reads what it wrote.
    fn profile_with(
        &self,
        c: &Condition,
        tool: Tool,
        program: &Path,
        folder: &Path,
        interpreters: &prepare::Interpreters,
    ) -> Result<nvidia::Import, String> {
        // Its outputs were kept by the sweep; the profiled run writes none.
        let mut config = self.config.clone();
        config.measure.check_outputs = false;
        let request = crate::protocol::WorkerRequest {
            warmup: 1,
            iterations: ITERATIONS,
            repeats: 1,
            ..crate::protocol::WorkerRequest::new(
                c.clone(),
                config.measure.seed,
                config.matrix.classes,
            )
        };
        let prepared = prepare::prepare(&config, c, request, self.edgeprof, self.dir, interpreters)
            .map_err(|e| format!("{e:#}"))?;
        let input = serde_json::to_vec(&prepared.request)
            .map_err(|e| format!("cannot encode the worker request: {e}"))?;
        let command: Vec<String> = std::iter::once(prepared.command.program.display().to_string())
            .chain(prepared.command.args.iter().cloned())
            .collect();
        let run = gpuprof::Run {
            input: &input,
            cancel: Some(self.cancel),
        };
        let profile =
            gpuprof::profile(tool, program, &command, folder, run).map_err(|e| e.0.clone())?;
        let read = |p: &Path| {
            crate::collect::read_capped(p, 256 << 20)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))
        };
        let metrics = read(&profile.metrics)?;
        let import = match (tool, &profile.summary) {
            (Tool::Ncu, _) => nvidia::parse_ncu(&metrics),
            (Tool::Nvprof, summary) => {
                let summary = summary.as_deref().map(read).transpose()?;
                nvidia::parse_nvprof(&metrics, summary.as_deref())
            }
        }
        .map_err(|e| format!("{}: {e}", profile.metrics.display()))?;
        Ok(import)
    }
}

/// GPU `gpu`'s kept ceilings on this machine, or what to do to get them.
fn kept_ceilings(gpu: usize) -> GpuCeilings {
    let mut out = GpuCeilings {
        gpu,
        file: None,
        ceilings: None,
        reason: None,
    };
    let Some(dir) = store::cache_dir() else {
        out.reason = Some("no cache directory (set EDGEPROF_CACHE_DIR or HOME)".to_string());
        return out;
    };
    let fingerprint = crate::collect::device::fingerprint(Path::new("/"));
    out.file = Some(
        store::gpu_path_for(&dir, &fingerprint, gpu)
            .display()
            .to_string(),
    );
    match store::load_gpu(&dir, &fingerprint, gpu) {
        Ok(Some(stored)) => out.ceilings = Some(stored.ceilings),
        Ok(None) => {
            out.reason = Some(format!(
                "GPU {gpu} has no measured ceilings on this device: `edgeprof roofline \
                 measure-gpu --device {gpu}` measures them (the points are kept without advice)"
            ))
        }
        Err(e) => out.reason = Some(format!("{e:#}")),
    }
    out
}

/// Writes `gpu-roofline.json` whole (its analyses included, for readers of the file).
fn write(dir: &Path, roofline: &GpuRoofline) -> crate::error::Result<()> {
    let mut value = serde_json::to_value(roofline)?;
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "analyses".to_string(),
            serde_json::to_value(roofline.analyses())?,
        );
    }
    let text = serde_json::to_string_pretty(&value)?;
    crate::results::write_atomic(&dir.join(FILE), (text + "\n").as_bytes())?;
    Ok(())
}

//! Running a workload under NVIDIA's profilers for the GPU roofline: Nsight Compute
//! (`ncu`) on Volta and newer, nvprof on Maxwell and Pascal (Jetson Nano, TX2), chosen by the
//! GPU's compute capability (from NVML, else from the Jetson SoC in the device tree). The
//! profiler's CSV is written to files that `roofline::nvidia` parses. Nothing here draws.

use crate::collect::child::Spec;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Ncu,
    Nvprof,
}

impl Tool {
    pub fn program(self) -> &'static str {
        match self {
            Tool::Ncu => "ncu",
            Tool::Nvprof => "nvprof",
        }
    }
}

/// ncu's hierarchical roofline metric set: elapsed cycles and their rate (time), …
pub const NCU_TIME: [&str; 2] = [
    "sm__cycles_elapsed.avg",
    "sm__cycles_elapsed.avg.per_second",
];
/// … the executed add, FMA and multiply instructions per precision (d, f, h), …
pub const NCU_FLOP_OPS: [&str; 9] = [
    "dadd", "dfma", "dmul", "fadd", "ffma", "fmul", "hadd", "hfma", "hmul",
];
/// … the bytes at L1, L2 and DRAM, in that order, …
pub const NCU_BYTES: [&str; 3] = ["l1tex__t_bytes.sum", "lts__t_bytes.sum", "dram__bytes.sum"];
/// … and the warp instructions of the tensor pipe (matrix multiply-adds), which the FLOP
/// counters above leave out: their ops depend on each instruction's shape.
pub const NCU_TENSOR: &str = "sm__inst_executed_pipe_tensor.sum";

/// ncu's counter of the executed instructions of one FLOP op (e.g. `ffma`).
pub fn ncu_flop_metric(op: &str) -> String {
    format!("sm__sass_thread_inst_executed_op_{op}_pred_on.sum")
}

/// Every metric ncu is asked for.
pub fn ncu_metrics() -> Vec<String> {
    NCU_TIME
        .iter()
        .map(|m| m.to_string())
        .chain(NCU_FLOP_OPS.iter().map(|op| ncu_flop_metric(op)))
        .chain(NCU_BYTES.iter().map(|m| m.to_string()))
        .chain([NCU_TENSOR.to_string()])
        .collect()
}

/// nvprof's FLOP counts (double, single, half; an FMA counts two) …
pub const NVPROF_FLOPS: [&str; 3] = ["flop_count_dp", "flop_count_sp", "flop_count_hp"];
/// … and its transactions (32 bytes each) at L1, …
pub const NVPROF_L1: [&str; 7] = [
    "gld_transactions",
    "gst_transactions",
    "atomic_transactions",
    "local_load_transactions",
    "local_store_transactions",
    "shared_load_transactions",
    "shared_store_transactions",
];
/// … L2 …
pub const NVPROF_L2: [&str; 2] = ["l2_read_transactions", "l2_write_transactions"];
/// … and DRAM.
pub const NVPROF_DRAM: [&str; 2] = ["dram_read_transactions", "dram_write_transactions"];

/// Every metric nvprof is asked for.
pub fn nvprof_metrics() -> Vec<&'static str> {
    NVPROF_FLOPS
        .iter()
        .chain(&NVPROF_L1)
        .chain(&NVPROF_L2)
        .chain(&NVPROF_DRAM)
        .copied()
        .collect()
}

/// The profiler for a compute capability: ncu from Volta (7.0) on, nvprof before.
pub fn tool_for(cc: (u32, u32)) -> Tool {
    if cc.0 >= 7 {
        Tool::Ncu
    } else {
        Tool::Nvprof
    }
}

/// A Jetson's GPU compute capability from its SoC in `/proc/device-tree/compatible`
/// (NUL-separated strings such as `nvidia,p3450-0000\0nvidia,tegra210\0`).
pub fn tegra_compute_capability(compatible: &str) -> Option<(u32, u32)> {
    compatible.split(['\0', '\n']).find_map(|c| match c.trim() {
        "nvidia,tegra210" => Some((5, 3)),
        "nvidia,tegra186" => Some((6, 2)),
        "nvidia,tegra194" => Some((7, 2)),
        "nvidia,tegra234" => Some((8, 7)),
        "nvidia,tegra264" => Some((11, 0)),
        _ => None,
    })
}

/// GPU 0's compute capability: NVML's answer, else the Jetson SoC's under `root`; or why
/// neither knows.
pub fn compute_capability(root: &Path) -> Result<(u32, u32), crate::error::Unavailable> {
    compute_capability_of(root, 0)
}

/// GPU `ordinal`'s compute capability: NVML's answer, else (GPU 0 only: a Jetson has one) the
/// Jetson SoC's under `root`; or why neither knows.
pub fn compute_capability_of(
    root: &Path,
    ordinal: usize,
) -> Result<(u32, u32), crate::error::Unavailable> {
    let index = u32::try_from(ordinal).unwrap_or(u32::MAX);
    let nvml = crate::collect::telemetry::nvml::NvmlReader::new().compute_capability(index);
    if let Ok(cc) = nvml {
        return Ok(cc);
    }
    if ordinal > 0 {
        return Err(crate::error::Unavailable::from(format!(
            "GPU {ordinal}'s compute capability is unknown (NVML: {})",
            nvml.err().map(|e| e.0).unwrap_or_default()
        )));
    }
    let compatible = std::fs::read(root.join("proc/device-tree/compatible")).unwrap_or_default();
    if let Some(cc) = tegra_compute_capability(&String::from_utf8_lossy(&compatible)) {
        return Ok(cc);
    }
    Err(crate::error::Unavailable::from(format!(
        "no NVIDIA GPU found (NVML: {}; not a Jetson: /proc/device-tree/compatible names no \
         known nvidia,tegra SoC); give --compute-capability X.Y to choose the profiler yourself",
        nvml.err().map(|e| e.0).unwrap_or_default()
    )))
}

/// Whether a GPU shares the CPU's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// One DRAM for CPU and GPU (a Jetson's SoC).
    Unified,
    /// The GPU's own memory behind PCIe.
    Discrete,
}

/// How GPU `ordinal` reaches the CPU's data, and how that is known: a Jetson's GPU (its SoC
/// under `root`) shares the DRAM; another GPU NVML sees is a PCIe card with its own memory. Err
/// says why there is no GPU to place work on.
pub fn memory_kind(
    root: &Path,
    ordinal: usize,
) -> Result<(MemoryKind, String), crate::error::Unavailable> {
    let compatible = std::fs::read(root.join("proc/device-tree/compatible")).unwrap_or_default();
    if ordinal == 0 && tegra_compute_capability(&String::from_utf8_lossy(&compatible)).is_some() {
        return Ok((
            MemoryKind::Unified,
            "a Jetson: the GPU shares the SoC's DRAM with the CPU".to_string(),
        ));
    }
    let index = u32::try_from(ordinal).unwrap_or(u32::MAX);
    match crate::collect::telemetry::nvml::NvmlReader::new().compute_capability(index) {
        Ok(_) => Ok((
            MemoryKind::Discrete,
            format!("NVML's GPU {ordinal}: a card with its own memory behind PCIe"),
        )),
        Err(why) => Err(crate::error::Unavailable::from(format!(
            "no NVIDIA GPU here (NVML: {}; not a Jetson)",
            why.0
        ))),
    }
}

/// The profiler's executable: on PATH, else in /usr/local/cuda/bin (where JetPack and the CUDA
/// toolkit put it without adding it to PATH).
pub fn find(tool: Tool) -> Result<PathBuf, crate::error::Unavailable> {
    if let Some(p) = crate::collect::find_on_path(tool.program()) {
        return Ok(p);
    }
    let cuda = Path::new("/usr/local/cuda/bin").join(tool.program());
    if cuda.is_file() {
        return Ok(cuda);
    }
    Err(crate::error::Unavailable::from(match tool {
        Tool::Ncu => {
            "ncu is not installed: install NVIDIA Nsight Compute (JetPack 5 and 6 ship it; \
                      on a desktop it comes with the CUDA toolkit) or put it on PATH"
                .to_string()
        }
        Tool::Nvprof => "nvprof is not installed: it comes with the CUDA toolkit up to 10.2 \
                         (JetPack 4) in /usr/local/cuda/bin"
            .to_string(),
    }))
}

/// Why a profiler run failed, in one sentence, from its output and exit status.
pub fn failure(tool: Tool, output: &str, status: Option<i32>) -> String {
    if output.contains("ERR_NVGPUCTRPERM") || output.contains("Insufficient privileges") {
        return format!(
            "{} may not read the GPU's performance counters as this user: run edgeprof as root \
             (sudo), or allow all users (NVreg_RestrictProfilingToAdminUsers=0 on a desktop driver)",
            tool.program()
        );
    }
    if output.contains("No kernels were profiled") || output.contains("No kernels were profiled.") {
        return format!(
            "{} profiled no kernels: the command ran nothing on the GPU (is it using the CPU?)",
            tool.program()
        );
    }
    let last = output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output");
    format!(
        "{} failed ({}): {last}",
        tool.program(),
        status.map_or("killed by a signal".to_string(), |c| format!(
            "exit code {c}"
        ))
    )
}

/// Files a profiling run wrote: the metrics CSV, and nvprof's GPU summary.
pub struct Profile {
    pub metrics: PathBuf,
    pub summary: Option<PathBuf>,
}

/// How long a profiled run may take before it is stopped: a profiler replays every kernel
/// once per pass of its metrics, so a workload of seconds takes minutes under it.
pub const PROFILE_TIMEOUT: Duration = Duration::from_secs(3600);

fn run_to_file(
    command: Spec,
    tool: Tool,
    file: &Path,
    input: &[u8],
    cancel: Option<&crate::collect::stop::Cancel>,
) -> Result<(), String> {
    use crate::collect::child::{self, Stdout};
    // ncu prints its CSV on stdout: streamed into the file, however large. nvprof writes its
    // own file (--log-file); its stdout is the application's.
    let stdout = match tool {
        Tool::Ncu => Stdout::File(file),
        Tool::Nvprof => Stdout::Capture,
    };
    let ran = child::run_until(&command, input, PROFILE_TIMEOUT, stdout, cancel)
        .map_err(|e| format!("{}: {e}", tool.program()))?;
    // ncu's own lines (==PROF==, ==ERROR==) are in the file with its CSV, nvprof's on stderr.
    let mut text = match tool {
        Tool::Ncu => {
            crate::collect::read_capped(file, child::STDOUT_LIMIT as u64).unwrap_or_default()
        }
        Tool::Nvprof => ran.stdout.clone(),
    };
    text.push_str(&ran.stderr);
    if !ran.status.success() || text.contains("ERR_NVGPUCTRPERM") {
        return Err(failure(tool, &text, ran.status.code()));
    }
    if !file.is_file() {
        return Err(format!(
            "{} wrote no {}; its output ended: {}",
            tool.program(),
            file.display(),
            text.lines().last().unwrap_or("nothing")
        ));
    }
    Ok(())
}

/// What a profiled command gets besides its arguments.
#[derive(Default)]
pub struct Run<'a> {
    /// Its standard input (a worker's request), given to every run of it.
    pub input: &'a [u8],
    /// Stops the profiler and the command at once when raised.
    pub cancel: Option<&'a crate::collect::stop::Cancel>,
}

/// Profiles `command` with `tool` (at `program`), writing the CSV files into `dir`.
pub fn profile(
    tool: Tool,
    program: &Path,
    command: &[String],
    dir: &Path,
    run: Run,
) -> Result<Profile, crate::error::ChildFailed> {
    let Some((first, args)) = command.split_first() else {
        return Err(crate::error::ChildFailed::from(
            "no command to profile: give it after --".to_string(),
        ));
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    match tool {
        Tool::Ncu => {
            let metrics = dir.join("ncu.csv");
            let mut c = Spec::new(program);
            c.args(["--csv", "--target-processes", "all", "--metrics"])
                .arg(ncu_metrics().join(","))
                .arg(first)
                .args(args);
            run_to_file(c, tool, &metrics, run.input, run.cancel)?;
            Ok(Profile {
                metrics,
                summary: None,
            })
        }
        Tool::Nvprof => {
            // nvprof prints to stderr; --log-file puts its CSV in a file of its own.
            let metrics = dir.join("nvprof-metrics.csv");
            let mut c = Spec::new(program);
            c.args(["--csv", "--log-file"])
                .arg(&metrics)
                .arg("--metrics")
                .arg(nvprof_metrics().join(","))
                .arg(first)
                .args(args);
            run_to_file(c, tool, &metrics, run.input, run.cancel)?;
            let summary = dir.join("nvprof-summary.csv");
            let mut c = Spec::new(program);
            c.args(["--csv", "--print-gpu-summary", "--log-file"])
                .arg(&summary)
                .arg(first)
                .args(args);
            run_to_file(c, tool, &summary, run.input, run.cancel)?;
            Ok(Profile {
                metrics,
                summary: Some(summary),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profiler_follows_the_compute_capability() {
        assert_eq!(
            tegra_compute_capability("nvidia,p3450-0000\0nvidia,tegra210\0"),
            Some((5, 3))
        );
        assert_eq!(
            tegra_compute_capability("nvidia,p3701-0000\0nvidia,tegra234\0"),
            Some((8, 7))
        );
        assert_eq!(
            tegra_compute_capability("raspberrypi,4-model-b\0brcm,bcm2711\0"),
            None
        );
        assert_eq!(tool_for((5, 3)), Tool::Nvprof);
        assert_eq!(tool_for((6, 2)), Tool::Nvprof);
        assert_eq!(tool_for((7, 2)), Tool::Ncu);
        assert_eq!(tool_for((8, 7)), Tool::Ncu);
    }

    #[test]
    fn failures_say_what_to_do() {
        let perm = failure(
            Tool::Ncu,
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU \
             Performance Counters on the target device 0.",
            Some(1),
        );
        assert!(perm.contains("run edgeprof as root"), "{perm}");
        let none = failure(Tool::Ncu, "==WARNING== No kernels were profiled.", Some(0));
        assert!(none.contains("profiled no kernels"), "{none}");
        let other = failure(
            Tool::Nvprof,
            "a\n======== Error: application not found\n",
            Some(1),
        );
        assert!(other.ends_with("application not found"), "{other}");
    }

    #[test]
    fn a_jetson_shares_memory_and_no_gpu_is_said() -> Result<(), Box<dyn std::error::Error>> {
        // An Orin's device tree: whatever NVML says here, it decides for GPU 0.
        let root = tempfile::tempdir()?;
        let tree = root.path().join("proc/device-tree");
        std::fs::create_dir_all(&tree)?;
        std::fs::write(
            tree.join("compatible"),
            "nvidia,p3737-0000\0nvidia,p3701-0005\0nvidia,tegra234\0",
        )?;
        let (kind, how) = memory_kind(root.path(), 0)?;
        assert_eq!(kind, MemoryKind::Unified, "{how}");
        let none = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boards/none");
        match memory_kind(&none, 0) {
            // A machine with an NVIDIA driver answers through NVML instead.
            Ok((kind, _)) => assert_eq!(kind, MemoryKind::Discrete),
            Err(why) => assert!(why.contains("no NVIDIA GPU here"), "{why}"),
        }
        Ok(())
    }

    #[test]
    fn without_a_gpu_the_reason_is_given() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boards/none");
        match compute_capability(&root) {
            // A machine with an NVIDIA driver answers through NVML instead.
            Ok(cc) => assert!(cc.0 >= 3),
            Err(why) => assert!(why.contains("give --compute-capability"), "{why}"),
        }
    }
}

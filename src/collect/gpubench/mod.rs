//! GPU ceilings: a CUDA microbenchmark measuring the fp64, fp32 and fp16
//! FMA peaks, shared-memory bandwidth, and load bandwidth over a working-set sweep through L1
//! and around it (L2, device memory). The CUDA driver and NVRTC are loaded at run time (cudarc's
//! dynamic loading), so edgeprof builds and runs on machines without CUDA; the kernels
//! (`kernels.cu`) are compiled by NVRTC for the GPU found.
//!
//! The measurement runs in a child process (`edgeprof gpu-bench-worker`) that reports JSON
//! lines ([`Message`]): a driver fault, hang or abort there costs the parent nothing but a
//! failure reason. This module holds the pure parts (plan, theoretical figures, protocol) and
//! the parent side; `cuda` holds the driver calls.

pub mod cuda;

use crate::collect::kernels::Precision;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// The kernels' source, compiled at run time by NVRTC.
pub const KERNELS: &str = include_str!("kernels.cu");
/// Threads per block of every kernel (`BLOCK` in kernels.cu).
pub const BLOCK: u32 = 256;
/// FMA chains per thread of the peak kernels (`CHAINS` in kernels.cu).
pub const CHAINS: u64 = 16;
/// Matrix multiply-add chains per warp of the tensor-core kernels (`TC_CHAINS` in kernels.cu).
pub const TC_CHAINS: u64 = 4;
/// float4 elements of the shared-memory tile (`TILE` in kernels.cu).
pub const TILE: u64 = 1024;
/// A block's chunk of the working set is a multiple of this many bytes (four 16-byte loads
/// per thread per step).
pub const CHUNK_BYTES: u64 = 4 * BLOCK as u64 * 16;

/// The GPU as the CUDA driver describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (u32, u32),
    pub multiprocessors: u32,
    pub l2_bytes: u64,
    /// Shared memory a multiprocessor can give its blocks.
    pub shared_per_sm_bytes: u64,
    pub max_threads_per_sm: u32,
    /// Peak SM clock, kHz (None: the driver no longer reports it).
    pub clock_khz: Option<u64>,
    pub memory_clock_khz: Option<u64>,
    pub memory_bus_bits: Option<u32>,
    pub memory_bytes: u64,
    /// Shares the system's memory (Jetson).
    pub integrated: bool,
    /// CUDA driver version, e.g. 12020.
    pub driver_version: Option<i32>,
    /// NVRTC version, e.g. (12, 2).
    pub nvrtc_version: Option<(i32, i32)>,
}

impl GpuInfo {
    /// FP32 lanes per multiprocessor by architecture (NVIDIA's CUDA programming guide,
    /// "arithmetic instructions" throughput table); None where unknown.
    pub fn fp32_lanes_per_sm(&self) -> Option<u32> {
        match self.compute_capability {
            (5, _) => Some(128),
            (6, 0) => Some(64),
            (6, _) => Some(128),
            (7, _) => Some(64),
            (8, 0) => Some(64),
            (8, _) => Some(128),
            (9, 0) => Some(128),
            (10..=12, _) => Some(128),
            _ => None,
        }
    }

    /// The FP32 FMA peak the data sheet would give: lanes × multiprocessors × 2 × clock.
    pub fn theoretical_fp32(&self) -> Option<f64> {
        let lanes = self.fp32_lanes_per_sm()?;
        let clock = self.clock_khz?;
        Some(f64::from(lanes) * f64::from(self.multiprocessors) * 2.0 * clock as f64 * 1e3)
    }

    /// Device-memory bandwidth from the driver's memory clock and bus width (double data
    /// rate): what deviceQuery prints. Integrated GPUs may report the clock differently.
    pub fn theoretical_dram(&self) -> Option<f64> {
        let clock = self.memory_clock_khz.filter(|c| *c > 0)?;
        let bits = self.memory_bus_bits.filter(|b| *b > 0)?;
        Some(clock as f64 * 1e3 * 2.0 * f64::from(bits) / 8.0)
    }

    /// The L1 data cache of one multiprocessor, estimated: from Volta on L1 and shared memory
    /// are one array (about the shared-memory maximum + 32 KiB); before, the L1/texture cache
    /// is 24 KiB.
    pub fn l1_bytes_per_sm(&self) -> u64 {
        if self.compute_capability.0 >= 7 {
            self.shared_per_sm_bytes + (32 << 10)
        } else {
            24 << 10
        }
    }

    /// fp16 FMA (fma.rn.f16x2) exists from compute capability 5.3 on.
    pub fn has_fp16(&self) -> bool {
        self.compute_capability >= (5, 3)
    }

    /// The int8 dot product of four (dp4a) exists from compute capability 6.1 on (not on the
    /// 6.0 of the P100; the TX2's 6.2 has it).
    pub fn has_dp4a(&self) -> bool {
        self.compute_capability >= (6, 1)
    }

    /// The warp-wide matrix multiply-adds the tensor-core kernels use (mma.sync m16n8k16 for
    /// fp16/bf16, m16n8k32 for int8) exist from compute capability 8.0 on. Volta and Turing
    /// have tensor cores with other shapes, which no kernel here measures yet.
    pub fn has_mma_sm80(&self) -> bool {
        self.compute_capability >= (8, 0)
    }

    /// NVRTC's target for this GPU.
    pub fn arch(&self) -> String {
        format!(
            "compute_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// The two operands every thread of a peak kernel receives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PeakOperands {
    F64(f64, f64),
    F32(f32, f32),
    /// 32-bit patterns: half2, bfloat16×2 or four int8 lanes.
    Bits(u32, u32),
}

/// One compute-peak kernel of kernels.cu: what it measures and how its work is counted.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakKernel {
    pub name: &'static str,
    pub precision: Precision,
    /// The unit, where a precision has several (dp4a, tensor cores); `None` for the FMA pipes.
    pub via: Option<&'static str>,
    /// Operations (an FMA counts two) per thread per loop iteration.
    pub ops_per_thread_iteration: u64,
    pub operands: PeakOperands,
    /// Bytes of the element each thread may store.
    pub out_bytes: usize,
}

impl PeakKernel {
    /// The step's name in the progress.
    pub fn what(&self) -> String {
        match self.via {
            Some("tensor cores") => format!("{} tensor-core peak", self.precision),
            Some(unit) => format!("{} {unit} peak", self.precision),
            None => format!("{} FMA peak", self.precision),
        }
    }
}

/// The peak kernels this GPU runs, and why each of the others is not run.
pub fn peak_kernels(info: &GpuInfo) -> (Vec<PeakKernel>, Vec<String>) {
    // half2(0.999, 0.999) and half2(0.001, 0.001); bfloat16×2 of 0.001.
    const HALF2_A: u32 = 0x3bfe_3bfe;
    const HALF2_B: u32 = 0x1419_1419;
    const BF16X2: u32 = 0x3a83_3a83;
    // int8 lanes (1, −1, 1, −1) and (1, 1, 1, 1): every dot product is 0.
    const INT8_A: u32 = 0x01ff_01ff;
    const INT8_B: u32 = 0x0101_0101;
    // Per warp instruction: m16n8k16 is 2 048 multiply-adds, m16n8k32 4 096.
    let per_thread = |macs_per_warp: u64| 2 * macs_per_warp / 32 * TC_CHAINS;
    let all = [
        PeakKernel {
            name: "peak_fp64",
            precision: Precision::Fp64,
            via: None,
            ops_per_thread_iteration: 2 * CHAINS,
            // x ← x·a + b converges to b / (1 − a): finite, never denormal.
            operands: PeakOperands::F64(0.999, 0.001),
            out_bytes: 8,
        },
        PeakKernel {
            name: "peak_fp32",
            precision: Precision::Fp32,
            via: None,
            ops_per_thread_iteration: 2 * CHAINS,
            operands: PeakOperands::F32(0.999, 0.001),
            out_bytes: 4,
        },
        PeakKernel {
            name: "peak_fp16",
            precision: Precision::Fp16,
            via: None,
            // Two FMAs per fma.rn.f16x2.
            ops_per_thread_iteration: 2 * 2 * CHAINS,
            operands: PeakOperands::Bits(HALF2_A, HALF2_B),
            out_bytes: 4,
        },
        PeakKernel {
            name: "peak_int8",
            precision: Precision::Int8,
            via: Some("dp4a"),
            // Four multiply-adds per dp4a.
            ops_per_thread_iteration: 2 * 4 * CHAINS,
            operands: PeakOperands::Bits(INT8_A, INT8_B),
            out_bytes: 4,
        },
        PeakKernel {
            name: "peak_tc_fp16",
            precision: Precision::Fp16,
            via: Some("tensor cores"),
            ops_per_thread_iteration: per_thread(16 * 8 * 16),
            operands: PeakOperands::Bits(HALF2_B, HALF2_B),
            out_bytes: 4,
        },
        PeakKernel {
            name: "peak_tc_bf16",
            precision: Precision::Bf16,
            via: Some("tensor cores"),
            ops_per_thread_iteration: per_thread(16 * 8 * 16),
            operands: PeakOperands::Bits(BF16X2, BF16X2),
            out_bytes: 4,
        },
        PeakKernel {
            name: "peak_tc_int8",
            precision: Precision::Int8,
            via: Some("tensor cores"),
            ops_per_thread_iteration: per_thread(16 * 8 * 32),
            operands: PeakOperands::Bits(INT8_A, INT8_B),
            out_bytes: 4,
        },
    ];
    let (major, minor) = info.compute_capability;
    let mut skipped = Vec::new();
    let mut tensor_skipped = false;
    let mut run = Vec::new();
    for k in all {
        let lacks = match (k.name, k.via) {
            ("peak_fp16", _) if !info.has_fp16() => Some("no fp16 FMA (5.3 and later do)"),
            ("peak_int8", _) if !info.has_dp4a() => {
                Some("no int8 dot product, dp4a (6.1 and later have it)")
            }
            (_, Some("tensor cores")) if !info.has_mma_sm80() => {
                if !tensor_skipped {
                    tensor_skipped = true;
                    skipped.push(format!(
                        "tensor-core peaks: not measured on compute capability {major}.{minor} \
                         (the kernels use the mma.sync shapes of 8.0 and later)"
                    ));
                }
                continue;
            }
            _ => None,
        };
        match lacks {
            Some(why) => skipped.push(format!(
                "{} peak: compute capability {major}.{minor} has {why}",
                k.precision
            )),
            None => run.push(k),
        }
    }
    (run, skipped)
}

/// How the loads of a sweep point travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadPath {
    /// `ld.global.nc`: cached in L1 (the read-only/texture path).
    ThroughL1,
    /// `ld.global.cg`: L1 bypassed; served by L2 or device memory.
    BypassL1,
}

/// One working set of the sweep, as planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepSize {
    /// Total bytes over all blocks.
    pub bytes: u64,
    pub blocks: u32,
}

impl SweepSize {
    /// float4 elements of one block's chunk.
    pub fn per_block(&self) -> u64 {
        self.bytes / u64::from(self.blocks.max(1)) / 16
    }
}

/// One measured point of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSweepPoint {
    pub path: LoadPath,
    pub bytes: u64,
    pub blocks: u32,
    pub bytes_per_s: f64,
}

/// One measured FMA peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPeak {
    pub precision: Precision,
    pub flops_per_s: f64,
    pub blocks: u32,
    /// The unit that reached it, where the precision has several (dp4a, tensor cores); absent
    /// in measurements from before the tensor-core kernels, where an int8 peak is dp4a's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// Everything one measurement found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuMeasurement {
    pub info: GpuInfo,
    pub peaks: Vec<GpuPeak>,
    pub shared_bytes_per_s: Option<f64>,
    pub sweep: Vec<GpuSweepPoint>,
    /// What was not measured, and why.
    pub skipped: Vec<String>,
    pub seconds: f64,
}

/// Trials per figure and the time each trial should last.
pub fn trials(effort: crate::collect::ceilings::Effort) -> (usize, f64) {
    use crate::collect::ceilings::Effort;
    match effort {
        Effort::Quick => (2, 0.005),
        Effort::Default => (3, 0.015),
        Effort::Thorough => (5, 0.05),
    }
}

/// The sweep's working sets for one load path: from one chunk per multiprocessor, growing by
/// √2, up to `max_bytes`; each split into `blocks` equal chunks that are whole multiples of
/// [`CHUNK_BYTES`], with as many blocks per multiprocessor (≤ `blocks_per_sm`) as the size
/// allows, so small working sets still give every block a full chunk.
pub fn sweep_sizes(multiprocessors: u32, blocks_per_sm: u32, max_bytes: u64) -> Vec<SweepSize> {
    let sms = u64::from(multiprocessors.max(1));
    let per_sm_max = u64::from(blocks_per_sm.max(1));
    let mut out: Vec<SweepSize> = Vec::new();
    let mut target = (sms * CHUNK_BYTES) as f64;
    while target <= max_bytes as f64 {
        let chunks = (target / CHUNK_BYTES as f64).floor() as u64;
        let per_sm = (chunks / sms).clamp(1, per_sm_max);
        let blocks = sms * per_sm;
        let chunks_per_block = (chunks / blocks).max(1);
        let size = SweepSize {
            bytes: blocks * chunks_per_block * CHUNK_BYTES,
            blocks: blocks as u32,
        };
        if out.last() != Some(&size) && size.bytes <= max_bytes {
            out.push(size);
        }
        target *= std::f64::consts::SQRT_2;
    }
    out
}

/// The largest working set worth sweeping: 8 × L2 (at least 256 MiB, to leave every cache
/// far behind), within half the free memory.
pub fn max_sweep_bytes(l2_bytes: u64, free_bytes: u64) -> u64 {
    (8 * l2_bytes).max(256 << 20).min(free_bytes / 2)
}

/// The through-L1 sweep stops at 4 × the L1 of every multiprocessor: past that it measures
/// what the bypassing sweep does.
pub fn max_l1_sweep_bytes(info: &GpuInfo, free_bytes: u64) -> u64 {
    (4 * info.l1_bytes_per_sm() * u64::from(info.multiprocessors))
        .min(max_sweep_bytes(info.l2_bytes, free_bytes))
}

/// A step of the measurement, for progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub what: String,
    pub done: usize,
    pub total: usize,
}

/// One line of the child's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    Info(GpuInfo),
    Step(Step),
    Done(GpuMeasurement),
    /// No CUDA here (no driver, no GPU, no NVRTC): why, in one sentence.
    Unavailable(String),
    /// CUDA is here but the measurement failed.
    Failed(String),
}

impl Message {
    pub fn to_line(&self) -> String {
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"failed\":\"cannot encode a report line: {e}\"}}"))
    }
}

/// Why no GPU ceilings came back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuBenchError {
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
}

/// Whether the CUDA driver and NVRTC can be loaded here (quick: loads the libraries only).
pub fn availability() -> Result<(), crate::error::Unavailable> {
    cuda::libraries_present()
}

/// Runs the measurement in a child process (`program gpu-bench-worker …`; `program` is this
/// edgeprof unless `EDGEPROF_GPU_BENCH_WORKER` names another, as the tests do), passing each
/// step to `progress`, and kills it after `timeout`.
pub fn measure_in_child(
    program: &Path,
    ordinal: usize,
    effort: crate::collect::ceilings::Effort,
    timeout: Duration,
    mut progress: impl FnMut(&Message),
) -> Result<GpuMeasurement, GpuBenchError> {
    let effort_arg = match effort {
        crate::collect::ceilings::Effort::Quick => "quick",
        crate::collect::ceilings::Effort::Default => "default",
        crate::collect::ceilings::Effort::Thorough => "thorough",
    };
    use crate::collect::child::{Heard, Input, Output, Spec};
    let mut spec = Spec::new(program);
    spec.args(["gpu-bench-worker", "--device"])
        .arg(ordinal.to_string())
        .args(["--effort", effort_arg]);
    let (tx, rx) = std::sync::mpsc::channel::<Heard>();
    let mut child = spec
        .start(Input::Null, Output::Lines { max: 1 << 20 }, &tx, None)
        .map_err(|e| {
            GpuBenchError::Failed(format!(
                "cannot start the GPU benchmark ({}): {e}",
                program.display()
            ))
        })?;
    drop(tx);
    let mut outcome: Option<Result<GpuMeasurement, GpuBenchError>> = None;
    let ended = child.hear_to_end(&rx, Instant::now() + timeout, |line| {
        match serde_json::from_str::<Message>(&line) {
            Ok(Message::Done(m)) => outcome = Some(Ok(m)),
            Ok(Message::Unavailable(why)) => outcome = Some(Err(GpuBenchError::Unavailable(why))),
            Ok(Message::Failed(why)) => outcome = Some(Err(GpuBenchError::Failed(why))),
            Ok(m) => progress(&m),
            // Anything else on stdout (a driver's own message) is not ours: skip it.
            Err(_) => {}
        }
    });
    if !ended {
        // Its group is killed; dropping it reaps it.
        return Err(GpuBenchError::Failed(format!(
            "the GPU benchmark did not finish within {} s and was stopped",
            timeout.as_secs()
        )));
    }
    // What it left in its group would hold its output open.
    child.signal_group(nix::sys::signal::Signal::SIGKILL);
    let status = child
        .reap()
        .map_err(|e| GpuBenchError::Failed(format!("cannot wait for the GPU benchmark: {e}")))?
        .status;
    let stderr_text = child.stderr(Duration::from_secs(1));
    match outcome {
        Some(result) => result,
        None => {
            let last = last_words(&stderr_text);
            Err(GpuBenchError::Failed(format!(
                "the GPU benchmark ended without a result ({}): {last}",
                match status.code() {
                    Some(c) => format!("exit code {c}"),
                    None => "killed by a signal".to_string(),
                }
            )))
        }
    }
}

/// The line of a dead child's stderr that says most: a panic's message, else the last line
/// (leaving out Rust's backtrace hint).
pub fn last_words(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if let Some(i) = lines.iter().position(|l| l.contains("panicked at")) {
        if let Some(message) = lines.get(i + 1) {
            return message.trim();
        }
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.starts_with("note: run with `RUST_BACKTRACE"))
        .map_or("no output", |l| l.trim())
}

/// The child's side: measures and writes one JSON line per message to `out`.
pub fn worker(
    ordinal: usize,
    effort: crate::collect::ceilings::Effort,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let mut send = |m: &Message| -> std::io::Result<()> {
        writeln!(out, "{}", m.to_line())?;
        out.flush()
    };
    let mut write_error = None;
    // A function the driver lacks makes cudarc panic: that becomes a failure reason.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cuda::measure(ordinal, effort, |m| {
            if let Err(e) = send(&m) {
                write_error.get_or_insert(e);
            }
        })
    }))
    .unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "no message".to_string());
        Err(GpuBenchError::Failed(format!(
            "the CUDA driver or NVRTC lacks something edgeprof needs ({what}); a driver for \
             CUDA 10.2 or later is needed"
        )))
    });
    if let Some(e) = write_error {
        return Err(e);
    }
    match result {
        Ok(m) => send(&Message::Done(m)),
        Err(GpuBenchError::Unavailable(why)) => send(&Message::Unavailable(why)),
        Err(GpuBenchError::Failed(why)) => send(&Message::Failed(why)),
    }
}

impl From<GpuBenchError> for crate::error::Error {
    fn from(error: GpuBenchError) -> crate::error::Error {
        let kind = match error {
            GpuBenchError::Unavailable(_) => crate::error::Kind::Unavailable,
            GpuBenchError::Failed(_) => crate::error::Kind::Failed,
        };
        crate::error::Error::of(kind, &error)
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// An Orin-like GPU (AGX Orin 64 GB: 16 SMs, 4 MiB L2, 1.3 GHz, 256-bit LPDDR5).
    pub fn orin() -> GpuInfo {
        GpuInfo {
            ordinal: 0,
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 16,
            l2_bytes: 4 << 20,
            shared_per_sm_bytes: 164 << 10,
            max_threads_per_sm: 1536,
            clock_khz: Some(1_300_500),
            memory_clock_khz: Some(3_199_000),
            memory_bus_bits: Some(256),
            memory_bytes: 62 << 30,
            integrated: true,
            driver_version: Some(11040),
            nvrtc_version: Some((11, 4)),
        }
    }

    #[test]
    fn theoretical_figures_follow_the_data_sheet_formulas() {
        let o = orin();
        // 2048 CUDA cores × 2 × 1.3005 GHz = 5.33 TFLOP/s (NVIDIA lists 5.3 for AGX Orin 64GB).
        let fp32 = o.theoretical_fp32().unwrap_or_default();
        assert!((fp32 / 1e12 - 5.327).abs() < 0.01, "{fp32}");
        // 3.199 GHz × 2 × 256 bit / 8 = 204.8 GB/s.
        let dram = o.theoretical_dram().unwrap_or_default();
        assert!((dram / 1e9 - 204.7).abs() < 0.2, "{dram}");
        let mut nano = o.clone();
        nano.compute_capability = (5, 3);
        nano.multiprocessors = 1;
        nano.clock_khz = Some(921_600);
        // 128 cores × 2 × 0.9216 GHz = 236 GFLOP/s: the Nano's "472 GFLOPS" is fp16.
        let fp32 = nano.theoretical_fp32().unwrap_or_default();
        assert!((fp32 / 1e9 - 235.9).abs() < 0.1, "{fp32}");
        assert_eq!(nano.l1_bytes_per_sm(), 24 << 10);
        assert!(nano.has_fp16());
        assert!(!nano.has_dp4a());
        assert!(o.has_dp4a());
        nano.compute_capability = (5, 2);
        assert!(!nano.has_fp16());
        nano.compute_capability = (3, 5);
        assert_eq!(nano.theoretical_fp32(), None);
        nano.clock_khz = None;
        assert_eq!(o.arch(), "compute_87");
    }

    #[test]
    fn each_gpu_runs_the_peak_kernels_it_has_and_says_why_not_the_others() {
        let names = |info: &GpuInfo| -> (Vec<&'static str>, Vec<String>) {
            let (run, skipped) = peak_kernels(info);
            (run.iter().map(|k| k.name).collect(), skipped)
        };
        let (run, skipped) = names(&orin());
        assert_eq!(
            run,
            [
                "peak_fp64",
                "peak_fp32",
                "peak_fp16",
                "peak_int8",
                "peak_tc_fp16",
                "peak_tc_bf16",
                "peak_tc_int8"
            ]
        );
        assert!(skipped.is_empty(), "{skipped:?}");
        // Xavier: tensor cores of another shape, said once.
        let mut xavier = orin();
        xavier.compute_capability = (7, 2);
        let (run, skipped) = names(&xavier);
        assert_eq!(run, ["peak_fp64", "peak_fp32", "peak_fp16", "peak_int8"]);
        assert_eq!(
            skipped,
            [
                "tensor-core peaks: not measured on compute capability 7.2 (the kernels use the \
              mma.sync shapes of 8.0 and later)"
            ]
        );
        // Nano: no dp4a either.
        let mut nano = orin();
        nano.compute_capability = (5, 3);
        let (run, skipped) = names(&nano);
        assert_eq!(run, ["peak_fp64", "peak_fp32", "peak_fp16"]);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(skipped[0].starts_with("int8 peak: compute capability 5.3 has no int8 dot"));
    }

    #[test]
    fn a_tensor_core_instruction_counts_every_multiply_add_of_its_warp() {
        let (run, _) = peak_kernels(&orin());
        let ops = |name: &str| {
            run.iter()
                .find(|k| k.name == name)
                .map(|k| k.ops_per_thread_iteration)
        };
        // m16n8k16: 16·8·16 multiply-adds = 4 096 ops per warp, 128 per thread, × 4 chains.
        assert_eq!(ops("peak_tc_fp16"), Some(512));
        assert_eq!(ops("peak_tc_bf16"), Some(512));
        // m16n8k32: twice that.
        assert_eq!(ops("peak_tc_int8"), Some(1024));
        // dp4a: 4 multiply-adds × 16 chains; fma.rn.f16x2: 2 × 16.
        assert_eq!(ops("peak_int8"), Some(128));
        assert_eq!(ops("peak_fp16"), Some(64));
        assert_eq!(ops("peak_fp32"), Some(32));
        let what: Vec<String> = run.iter().map(PeakKernel::what).collect();
        assert_eq!(
            what,
            [
                "fp64 FMA peak",
                "fp32 FMA peak",
                "fp16 FMA peak",
                "int8 dp4a peak",
                "fp16 tensor-core peak",
                "bf16 tensor-core peak",
                "int8 tensor-core peak"
            ]
        );
    }

    #[test]
    fn sweep_sizes_give_every_block_whole_chunks_and_grow_by_root_two() {
        let sizes = sweep_sizes(16, 6, 256 << 20);
        assert_eq!(sizes[0].bytes, 16 * CHUNK_BYTES);
        assert_eq!(sizes[0].blocks, 16);
        for s in &sizes {
            assert_eq!(s.bytes % (u64::from(s.blocks) * CHUNK_BYTES), 0, "{s:?}");
            assert!(s.blocks <= 16 * 6 && s.blocks % 16 == 0, "{s:?}");
            assert!(s.per_block() * 16 * u64::from(s.blocks) == s.bytes);
        }
        for w in sizes.windows(2) {
            let ratio = w[1].bytes as f64 / w[0].bytes as f64;
            assert!(ratio > 1.0 && ratio < 2.01, "{w:?}");
        }
        let last = sizes.last().map(|s| s.bytes).unwrap_or_default();
        assert!(last <= 256 << 20 && last > 128 << 20, "{last}");
        // Full occupancy once the working set allows it.
        assert!(sizes.iter().any(|s| s.blocks == 96));
        // Nothing fits: no sizes rather than a bogus one.
        assert!(sweep_sizes(16, 6, 1000).is_empty());
    }

    #[test]
    fn sweep_limits_leave_the_caches_behind_within_free_memory() {
        assert_eq!(max_sweep_bytes(4 << 20, 64 << 30), 256 << 20);
        assert_eq!(max_sweep_bytes(50 << 20, 140 << 30), 400 << 20);
        assert_eq!(max_sweep_bytes(256 << 10, 300 << 20), 150 << 20);
        let o = orin();
        assert_eq!(max_l1_sweep_bytes(&o, 64 << 30), 4 * (196 << 10) * 16);
    }

    #[test]
    fn a_dead_childs_last_words_are_its_panic_message() {
        let panic = "thread 'main' (7) panicked at cudarc-0.19.10/src/driver/sys/mod.rs:12:40:\n\
                     Missing symbol cuFoo_v2: undefined symbol\n\
                     note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            last_words(panic),
            "Missing symbol cuFoo_v2: undefined symbol"
        );
        assert_eq!(
            last_words("a\nSegmentation fault\n\n"),
            "Segmentation fault"
        );
        assert_eq!(last_words(""), "no output");
    }

    #[test]
    fn messages_round_trip_as_single_lines() {
        let m = Message::Step(Step {
            what: "fp32 peak".into(),
            done: 1,
            total: 9,
        });
        let line = m.to_line();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<Message>(&line).ok(), Some(m));
        let u: Result<Message, _> = serde_json::from_str(r#"{"unavailable":"no CUDA driver"}"#);
        assert_eq!(u.ok(), Some(Message::Unavailable("no CUDA driver".into())));
    }
}

//! Ceilings cached per device: measured once, reused by later commands on the same machine.
//! The cache key is a hash of the parts of the fingerprint that decide the ceilings (CPU,
//! board, CPU count, caches, memory), so a different machine never reuses them.

use crate::collect::ceilings::{self, Effort};
use crate::collect::device::{self, Fingerprint};
use crate::collect::gpubench::{self, GpuInfo};
use crate::collect::kernels;
use crate::error::Context;
use crate::roofline::levels;
use crate::roofline::Ceilings;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    pub device: Fingerprint,
    pub written: String,
    pub edgeprof_version: String,
    pub ceilings: Ceilings,
    /// Set for a GPU's ceilings: which GPU of this device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuTarget>,
}

/// The GPU a set of ceilings belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuTarget {
    /// The CUDA device number.
    pub ordinal: usize,
    /// What the CUDA driver said about it (None: imported without asking the driver).
    pub info: Option<GpuInfo>,
}

/// FNV-1a, 64 bit: a stable hash (std's hasher may change between Rust releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The key of a device's ceilings.
pub fn device_key(f: &Fingerprint) -> String {
    let parts = serde_json::json!([
        f.arch,
        f.cpu_model,
        f.board,
        f.cpus_online,
        f.cpus_available,
        f.caches,
        f.memory_total_bytes
    ]);
    format!("{:016x}", fnv1a(parts.to_string().as_bytes()))
}

/// Where cached ceilings live: `$EDGEPROF_CACHE_DIR`, else `$XDG_CACHE_HOME/edgeprof`, else
/// `~/.cache/edgeprof`.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("EDGEPROF_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("edgeprof")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/edgeprof")))
}

pub fn path_for(dir: &Path, f: &Fingerprint) -> PathBuf {
    dir.join(format!("ceilings-{}.json", device_key(f)))
}

/// Where GPU `ordinal`'s ceilings on this device are kept.
pub fn gpu_path_for(dir: &Path, f: &Fingerprint, ordinal: usize) -> PathBuf {
    dir.join(format!("ceilings-{}-gpu{ordinal}.json", device_key(f)))
}

pub fn save(dir: &Path, stored: &Stored) -> crate::error::Result<PathBuf> {
    // Never keep ceilings that would make every later command fail or mislead.
    stored
        .ceilings
        .check()
        .map_err(|why| crate::error::BadInput(format!("the ceilings cannot be kept: {why}")))?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the cache directory {}", dir.display()))?;
    let path = match &stored.gpu {
        Some(gpu) => gpu_path_for(dir, &stored.device, gpu.ordinal),
        None => path_for(dir, &stored.device),
    };
    let text = serde_json::to_string_pretty(stored).context("cannot encode the ceilings")?;
    crate::results::write_atomic(&path, (text + "\n").as_bytes())?;
    Ok(path)
}

/// The cached ceilings of this device's CPU, if any.
pub fn load(dir: &Path, f: &Fingerprint) -> crate::error::Result<Option<Stored>> {
    load_path(&path_for(dir, f))
}

/// The cached ceilings of GPU `ordinal` of this device, if any.
pub fn load_gpu(
    dir: &Path,
    f: &Fingerprint,
    ordinal: usize,
) -> crate::error::Result<Option<Stored>> {
    load_path(&gpu_path_for(dir, f, ordinal))
}

fn load_path(path: &Path) -> crate::error::Result<Option<Stored>> {
    match read_file(path) {
        Ok(stored) => Ok(Some(stored)),
        Err(ReadError::Missing) => Ok(None),
        Err(ReadError::Other(why)) => Err(crate::error::BadInput(format!(
            "{why}; delete it and measure (or import) the ceilings again"
        ))
        .into()),
    }
}

/// Most bytes of a ceilings file (a sweep of a few hundred points is some tens of KiB).
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Why a ceilings file could not be read.
#[derive(Debug)]
pub enum ReadError {
    Missing,
    /// One sentence naming the file.
    Other(String),
}

/// A ceilings file (kept, or given with --ceilings), read and checked: its size, its JSON, and
/// every figure in it.
pub fn read_file(path: &Path) -> Result<Stored, ReadError> {
    let text = match crate::collect::read_capped(path, MAX_FILE_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) => {
            return Err(ReadError::Other(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    parse_file(&text).map_err(|why| ReadError::Other(format!("{}: {why}", path.display())))
}

/// A ceilings file's text, parsed and checked.
pub fn parse_file(text: &str) -> Result<Stored, crate::error::BadInput> {
    let stored: Stored =
        serde_json::from_str(text).map_err(|e| format!("not a ceilings file ({e})"))?;
    stored
        .ceilings
        .check()
        .map_err(|why| format!("ceilings.{why}"))?;
    Ok(stored)
}

/// What a measurement of the ceilings is doing.
pub enum Progress {
    Start(String),
    Step(ceilings::Step),
}

/// Measures this device's ceilings (`effort`, on `threads` or every usable core) and keeps them
/// in the cache directory; where they were kept (None: no cache directory). `progress` hears the
/// plan and each step.
/// What became of a measurement: kept (where), not kept for want of a cache directory, or
/// withheld because it was disturbed and the kept set was measured quietly.
#[derive(Debug)]
pub enum Kept {
    Saved(PathBuf),
    NoCache,
    /// The clean set stays: where it is, and it.
    Withheld {
        path: PathBuf,
        kept: Box<Stored>,
    },
}

/// Whether a new measurement `new` may replace the `kept` set: a measurement other processes
/// disturbed (its figures may be low) does not replace one that was measured quietly, unless
/// `replace` says so; anything replaces a disturbed set or none.
pub fn replaces(new: &Ceilings, kept: Option<&Stored>, replace: bool) -> bool {
    replace || new.busy.is_empty() || kept.is_none_or(|k| !k.ceilings.busy.is_empty())
}

/// Measures this device's CPU ceilings and keeps them (see [`replaces`]: a disturbed
/// measurement is withheld where a quiet one is kept, unless `replace`).
pub fn measure_and_keep(
    effort: Effort,
    threads: Option<usize>,
    replace: bool,
    mut progress: impl FnMut(Progress),
) -> crate::error::Result<(Stored, Kept)> {
    let fingerprint = device::fingerprint(Path::new("/"));
    let threads = threads.unwrap_or_else(crate::collect::device::available_cores);
    let ranges = levels::level_ranges(&fingerprint.caches, threads);
    let dram = levels::dram_working_set(&ranges, threads, fingerprint.memory_total_bytes);
    let single = levels::single_thread_sizes(
        &fingerprint.caches,
        levels::dram_working_set(
            &levels::level_ranges(&fingerprint.caches, 1),
            1,
            fingerprint.memory_total_bytes,
        ),
    );
    let isa = kernels::best_isa();
    progress(Progress::Start(format!(
        "measuring {} ({}, {isa}) on {threads} thread(s), sweeping up to {} MiB per thread …",
        fingerprint.cpu_model.as_deref().unwrap_or("this CPU"),
        fingerprint.arch,
        dram >> 20
    )));
    let m = ceilings::measure(isa, threads, dram, &single, effort, |step| {
        progress(Progress::Step(step))
    });
    let source = format!(
        "measured by edgeprof {} ({isa}, {threads} thread(s), {:?} effort) in {:.1} s",
        env!("CARGO_PKG_VERSION"),
        effort,
        m.seconds
    );
    let ceilings = levels::ceilings(&m, &fingerprint.caches, source);
    let stored = Stored {
        device: fingerprint.clone(),
        written: crate::text::now_rfc3339(),
        edgeprof_version: env!("CARGO_PKG_VERSION").to_string(),
        ceilings,
        gpu: None,
    };
    let Some(dir) = cache_dir() else {
        return Ok((stored, Kept::NoCache));
    };
    // A kept set that cannot be read is replaced.
    let kept = load(&dir, &stored.device).ok().flatten();
    if !replaces(&stored.ceilings, kept.as_ref(), replace) {
        if let Some(kept) = kept {
            let path = path_for(&dir, &stored.device);
            return Ok((
                stored,
                Kept::Withheld {
                    path,
                    kept: Box::new(kept),
                },
            ));
        }
    }
    let saved = save(&dir, &stored)?;
    Ok((stored, Kept::Saved(saved)))
}

/// This device's kept CPU ceilings and where they are kept; when there are none yet they are
/// measured first (default effort, every usable core) and kept, `progress` hearing why and each
/// step.
pub fn kept_or_measure(
    mut progress: impl FnMut(Progress),
) -> crate::error::Result<(Stored, String)> {
    let fingerprint = device::fingerprint(Path::new("/"));
    if let Some(dir) = cache_dir() {
        if let Some(stored) = load(&dir, &fingerprint)? {
            return Ok((stored, path_for(&dir, &fingerprint).display().to_string()));
        }
    }
    progress(Progress::Start(
        "no ceilings for this device yet: measuring them first".to_string(),
    ));
    let (stored, kept) = measure_and_keep(Effort::Default, None, false, &mut progress)?;
    let from = match kept {
        // None was kept before this measurement, so nothing is withheld.
        Kept::Saved(path) | Kept::Withheld { path, .. } => path.display().to_string(),
        Kept::NoCache => {
            progress(Progress::Start(
                "warning: no cache directory (set EDGEPROF_CACHE_DIR or HOME); the ceilings are \
                 not kept"
                    .to_string(),
            ));
            "not kept".to_string()
        }
    };
    Ok((stored, from))
}

/// Measures GPU `ordinal`'s ceilings (in a child process: `program gpu-bench-worker`) and keeps
/// them in the cache directory; where they were kept (None: no cache directory).
pub fn measure_gpu_and_keep(
    program: &Path,
    ordinal: usize,
    effort: Effort,
    progress: impl FnMut(&gpubench::Message),
) -> Result<(Stored, Option<PathBuf>), gpubench::GpuBenchError> {
    // EDGEPROF_GPU_BENCH_TIMEOUT_S shortens (or lengthens) the limit.
    let timeout = std::env::var("EDGEPROF_GPU_BENCH_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(GPU_TIMEOUT, std::time::Duration::from_secs);
    let m = gpubench::measure_in_child(program, ordinal, effort, timeout, progress)?;
    let source = format!(
        "measured by edgeprof {} on GPU {ordinal} ({}, compute capability {}.{}, {:?} effort) in {:.1} s",
        env!("CARGO_PKG_VERSION"),
        m.info.name,
        m.info.compute_capability.0,
        m.info.compute_capability.1,
        effort,
        m.seconds
    );
    let stored = Stored {
        device: device::fingerprint(Path::new("/")),
        written: crate::text::now_rfc3339(),
        edgeprof_version: env!("CARGO_PKG_VERSION").to_string(),
        ceilings: crate::roofline::gpu::ceilings(&m, source),
        gpu: Some(GpuTarget {
            ordinal,
            info: Some(m.info),
        }),
    };
    let saved = match cache_dir() {
        Some(dir) => Some(
            save(&dir, &stored).map_err(|e| gpubench::GpuBenchError::Failed(format!("{e:#}")))?,
        ),
        None => None,
    };
    Ok((stored, saved))
}

/// The program that measures a GPU: this edgeprof (`gpu-bench-worker`), after a quick check that
/// the CUDA driver and NVRTC can be loaded here; or the stand-in `EDGEPROF_GPU_BENCH_WORKER`
/// names (the tests' recorded worker), unchecked.
pub fn gpu_bench_program() -> Result<PathBuf, gpubench::GpuBenchError> {
    if let Some(p) = std::env::var_os("EDGEPROF_GPU_BENCH_WORKER").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    gpubench::availability().map_err(|e| gpubench::GpuBenchError::Unavailable(e.0))?;
    std::env::current_exe().map_err(|e| {
        gpubench::GpuBenchError::Failed(format!("cannot locate the edgeprof binary: {e}"))
    })
}

/// How long the GPU benchmark may take (a thorough run on a small GPU takes about a minute).
pub const GPU_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// An ERT run kept as this device's ceilings (see [`import_ert`]).
#[derive(Debug)]
pub struct KeptErt {
    pub stored: Stored,
    pub saved: PathBuf,
    /// The threads (or, on a GPU, blocks × threads) the run measured with.
    pub threads: usize,
    /// What the user should know of how it was kept, a sentence each (`note: …`, `warning: …`).
    pub notes: Vec<String>,
}

/// Reads an ERT `roofline.json` (`json`, from `path`) and its sweep (labelled with this
/// device's caches) into ceilings and keeps them as this device's, or GPU `gpu`'s. A run whose
/// metadata says it measured a GPU is a GPU's ceilings even without `gpu` (GPU 0's).
pub fn import_ert(
    path: &Path,
    json: &str,
    sweep: Option<&str>,
    gpu: Option<usize>,
) -> crate::error::Result<KeptErt> {
    use crate::error::BadInput;
    let fingerprint = crate::collect::device::fingerprint(Path::new("/"));
    let source = match gpu {
        Some(n) => format!("imported from ERT {} for GPU {n}", path.display()),
        None => format!("imported from ERT {}", path.display()),
    };
    let mut imported = crate::roofline::ert::import(json, sweep, &fingerprint.caches, source)
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let mut notes = Vec::new();
    let gpu = match (gpu, imported.gpu_run) {
        (None, true) => {
            notes.push(
                "note: this ERT run measured a GPU (its metadata names GPU blocks): kept as GPU \
                 0's ceilings (give --gpu N for another GPU)"
                    .to_string(),
            );
            imported.ceilings.source = format!("{} for GPU 0", imported.ceilings.source);
            Some(0)
        }
        (Some(n), false) => {
            notes.push(format!(
                "warning: nothing in this ERT run's metadata says it measured a GPU; kept as GPU \
                 {n}'s ceilings as asked"
            ));
            Some(n)
        }
        (gpu, _) => gpu,
    };
    if gpu.is_some() {
        imported.ceilings.processor = crate::roofline::Processor::Gpu;
    } else if !imported.relabelled {
        notes.push(
            "note: ERT names bandwidth levels by their position (its last plateau is always \
             \"DRAM\"); give --sweep PATH/max to name them from this device's cache sizes"
                .to_string(),
        );
    }
    let stored = Stored {
        device: fingerprint,
        written: crate::text::now_rfc3339(),
        edgeprof_version: env!("CARGO_PKG_VERSION").to_string(),
        ceilings: imported.ceilings,
        gpu: gpu.map(|ordinal| GpuTarget {
            ordinal,
            info: None,
        }),
    };
    let dir = cache_dir()
        .ok_or_else(|| BadInput("no cache directory (set EDGEPROF_CACHE_DIR or HOME)".into()))?;
    let saved = save(&dir, &stored)?;
    Ok(KeptErt {
        stored,
        saved,
        threads: imported.threads,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(cpu: &str) -> Fingerprint {
        Fingerprint {
            hostname: Some("board".into()),
            arch: "aarch64".into(),
            cpu_model: Some(cpu.into()),
            board: None,
            cpus_online: Some(4),
            cpus_available: 4,
            caches: Vec::new(),
            kernel: Some("4.9".into()),
            os: None,
            memory_total_bytes: Some(4 << 30),
            clusters: Vec::new(),
            simd: Vec::new(),
        }
    }

    #[test]
    fn keys_are_stable_and_tell_machines_apart() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let a = fingerprint("Cortex-A57");
        let mut a_rebooted = a.clone();
        a_rebooted.kernel = Some("5.10".into());
        assert_eq!(device_key(&a), device_key(&a_rebooted));
        assert_ne!(device_key(&a), device_key(&fingerprint("Cortex-A78AE")));
    }

    fn ceilings(busy: &[&str]) -> Ceilings {
        Ceilings {
            source: "test".into(),
            compute: Vec::new(),
            bandwidth: Vec::new(),
            sweep: Vec::new(),
            notes: Vec::new(),
            processor: crate::roofline::Processor::Cpu,
            gpu_sweep: Vec::new(),
            trials: Vec::new(),
            busy: busy.iter().map(|b| b.to_string()).collect(),
        }
    }

    #[test]
    fn a_disturbed_measurement_does_not_replace_a_quiet_one_unless_asked() {
        let kept = |busy: &[&str]| Stored {
            device: fingerprint("Cortex-A57"),
            written: "then".into(),
            edgeprof_version: "0".into(),
            ceilings: ceilings(busy),
            gpu: None,
        };
        let disturbed = ceilings(&["fp32 peak: 80 % of a core to stress"]);
        let quiet = ceilings(&[]);
        assert!(!replaces(&disturbed, Some(&kept(&[])), false));
        assert!(replaces(&disturbed, Some(&kept(&[])), true));
        assert!(replaces(
            &disturbed,
            Some(&kept(&["bandwidth: busy"])),
            false
        ));
        assert!(replaces(&disturbed, None, false));
        assert!(replaces(&quiet, Some(&kept(&[])), false));
        assert!(replaces(&quiet, Some(&kept(&["bandwidth: busy"])), false));
    }

    #[test]
    fn saved_ceilings_load_back_for_the_same_device_only() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let stored = Stored {
            device: fingerprint("Cortex-A57"),
            written: "now".into(),
            edgeprof_version: "0".into(),
            ceilings: ceilings(&[]),
            gpu: None,
        };
        if let Err(e) = save(dir.path(), &stored) {
            panic!("{e}");
        }
        match load(dir.path(), &stored.device) {
            Ok(Some(back)) => assert_eq!(back, stored),
            other => panic!("{other:?}"),
        }
        assert!(matches!(load(dir.path(), &fingerprint("other")), Ok(None)));
        // A GPU's ceilings live beside the CPU's, one file per GPU.
        let mut gpu = stored.clone();
        gpu.ceilings.processor = crate::roofline::Processor::Gpu;
        gpu.gpu = Some(GpuTarget {
            ordinal: 1,
            info: None,
        });
        match save(dir.path(), &gpu) {
            Ok(path) => {
                assert!(path.ends_with(format!("ceilings-{}-gpu1.json", device_key(&stored.device))))
            }
            Err(e) => panic!("{e}"),
        }
        match load_gpu(dir.path(), &stored.device, 1) {
            Ok(Some(back)) => assert_eq!(back, gpu),
            other => panic!("{other:?}"),
        }
        assert!(matches!(load_gpu(dir.path(), &stored.device, 0), Ok(None)));
        assert!(matches!(load(dir.path(), &stored.device), Ok(Some(s)) if s == stored));
    }
}

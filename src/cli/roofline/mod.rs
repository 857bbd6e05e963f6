//! `edgeprof roofline`: measure and show the ceilings of this CPU or GPU and place programs under
//! them (`show`); importing other tools' measurements is in `import.rs`, per-layer points and the
//! kernel list in `layers.rs`, the ceilings as text in `tables.rs`.

mod import;
mod layers;
mod tables;

pub use import::*;
pub use layers::*;
pub use tables::*;

use crate::cli::{print_json, print_out, render, BadInput};
use edgeprof::collect::ceilings::Effort;
use edgeprof::collect::device;
use edgeprof::collect::kernels;
use edgeprof::report::text::roofline_text;
use edgeprof::roofline::{levels, store, Ceilings, Level, Precision, Processor};
use edgeprof::runner::cachesim;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Measures this device's ceilings and keeps them in the cache; returns them and where.
fn measure_and_keep(
    effort: Effort,
    threads: Option<usize>,
    replace: bool,
) -> anyhow::Result<(store::Stored, store::Kept)> {
    let tty = std::io::stderr().is_terminal();
    let (stored, kept) =
        store::measure_and_keep(effort, threads, replace, |progress| match progress {
            store::Progress::Start(what) => errln!("{what}"),
            store::Progress::Step(step) if tty => {
                err!("\r\x1b[2K[{}/{}] {}", step.done + 1, step.total, step.what);
                let _ = std::io::stderr().flush();
            }
            store::Progress::Step(step) => {
                errln!("[{}/{}] {}", step.done + 1, step.total, step.what)
            }
        })?;
    if tty {
        err!("\r\x1b[2K");
    }
    match &kept {
        store::Kept::NoCache => errln!(
            "warning: no cache directory (set EDGEPROF_CACHE_DIR or HOME); the ceilings are not kept"
        ),
        store::Kept::Withheld { path, kept } => errln!(
            "warning: other processes disturbed {} of this measurement's {} figures (the first: \
             {}), so they may be low: the undisturbed ceilings kept on {} stay in {} (--replace \
             keeps these instead)",
            stored.ceilings.busy.len(),
            stored.ceilings.trials.len().max(stored.ceilings.busy.len()),
            stored.ceilings.busy.first().map_or("", String::as_str),
            kept.written,
            path.display()
        ),
        store::Kept::Saved(_) => {}
    }
    Ok((stored, kept))
}

/// `edgeprof roofline measure`.
pub fn measure(
    effort: Effort,
    threads: Option<usize>,
    replace: bool,
    json: bool,
) -> anyhow::Result<()> {
    if threads == Some(0) {
        anyhow::bail!(BadInput("--threads must be at least 1".into()));
    }
    let (stored, kept) = measure_and_keep(effort, threads, replace)?;
    if json {
        return print_json(&stored);
    }
    let fingerprint = &stored.device;
    let mut out = format!("{}\n\n", stored.ceilings.source);
    out.push_str(&ceilings_text(&stored.ceilings, &fingerprint.caches));
    out.push_str(&trust_text(&stored.ceilings));
    out.push('\n');
    out.push_str(&sweep_text(&stored.ceilings, &fingerprint.caches));
    if let store::Kept::Saved(path) = kept {
        let _ = writeln!(
            out,
            "\nsaved to {} (used by later roofline commands on this device)",
            path.display()
        );
    }
    print_out(&out)
}

/// What the GPU benchmark is measuring, in one line.
fn gpu_info_line(i: &edgeprof::collect::gpubench::GpuInfo) -> String {
    format!(
        "measuring GPU {}: {} (compute capability {}.{}, {} multiprocessors, {} L2, {} memory{}; \
         CUDA driver {}, NVRTC {}) …",
        i.ordinal,
        i.name,
        i.compute_capability.0,
        i.compute_capability.1,
        i.multiprocessors,
        render::bytes(i.l2_bytes),
        render::bytes(i.memory_bytes),
        if i.integrated {
            ", shared with the CPU"
        } else {
            ""
        },
        i.driver_version.map_or("?".to_string(), |v| format!(
            "{}.{}",
            v / 1000,
            (v % 1000) / 10
        )),
        i.nvrtc_version
            .map_or("?".to_string(), |(a, b)| format!("{a}.{b}"))
    )
}

/// The GPU benchmark's progress on stderr: redrawn on a terminal, one line per step otherwise.
fn gpu_progress(m: &edgeprof::collect::gpubench::Message, tty: bool) {
    use edgeprof::collect::gpubench::Message;
    match m {
        Message::Info(i) => errln!("{}", gpu_info_line(i)),
        Message::Step(step) if tty => {
            err!("\r\x1b[2K[{}/{}] {}", step.done + 1, step.total, step.what);
            let _ = std::io::stderr().flush();
        }
        Message::Step(step) => errln!("[{}/{}] {}", step.done + 1, step.total, step.what),
        _ => {}
    }
}

/// `edgeprof roofline measure-gpu`.
pub fn measure_gpu(device: usize, effort: Effort, json: bool) -> anyhow::Result<()> {
    use edgeprof::collect::gpubench::GpuBenchError;
    let tty = std::io::stderr().is_terminal();
    let result = store::gpu_bench_program().and_then(|program| {
        store::measure_gpu_and_keep(&program, device, effort, |m| gpu_progress(m, tty))
    });
    if tty {
        err!("\r\x1b[2K");
    }
    let (stored, saved) = match result {
        Ok(r) => r,
        Err(GpuBenchError::Unavailable(why)) => {
            anyhow::bail!(BadInput(format!("GPU ceilings unavailable: {why}")))
        }
        Err(GpuBenchError::Failed(why)) => anyhow::bail!("the GPU benchmark failed: {why}"),
    };
    if saved.is_none() {
        errln!("warning: no cache directory (set EDGEPROF_CACHE_DIR or HOME); the ceilings are not kept");
    }
    if json {
        return print_json(&stored);
    }
    let mut out = format!("{}\n\n", stored.ceilings.source);
    out.push_str(&ceilings_text(&stored.ceilings, &[]));
    out.push_str(&trust_text(&stored.ceilings));
    out.push('\n');
    out.push_str(&sweep_text(&stored.ceilings, &[]));
    if let Some(path) = saved {
        let _ = writeln!(
            out,
            "\nsaved to {} (used by `roofline show --gpu`, import-ncu, import-nvprof and profile-gpu on this device)",
            path.display()
        );
    }
    print_out(&out)
}

/// `edgeprof roofline measure-gpu --compile-only`: NVRTC compiles the kernels for `arch`,
/// written to `ptx` when given.
pub fn compile_gpu_kernels(arch: &str, ptx_file: Option<&Path>) -> anyhow::Result<()> {
    use edgeprof::collect::gpubench::cuda;
    let valid = ["compute_", "sm_"].iter().any(|prefix| {
        arch.strip_prefix(prefix)
            .is_some_and(|n| n.len() >= 2 && n.chars().all(|c| c.is_ascii_alphanumeric()))
    });
    if !valid {
        anyhow::bail!(BadInput(format!(
            "--arch {arch:?} is not an NVRTC target such as compute_87"
        )));
    }
    cuda::nvrtc_present().map_err(|why| BadInput(format!("GPU kernels unavailable: {why}")))?;
    let ptx = cuda::compile(arch).map_err(|why| anyhow::anyhow!("{why}"))?;
    let entries: Vec<&str> = ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
        .map(|l| l.split('(').next().unwrap_or(l).trim())
        .collect();
    if let Some(path) = ptx_file {
        edgeprof::files::write_atomic(path, ptx.as_bytes())
            .map_err(|e| anyhow::anyhow!("the PTX was not written: {e}"))?;
    }
    print_out(&format!(
        "NVRTC {} compiled the GPU ceiling kernels for {arch}: {} bytes of PTX, entry points {}\n",
        cuda::nvrtc_version().map_or("?".to_string(), |(a, b)| format!("{a}.{b}")),
        ptx.len(),
        entries.join(", ")
    ))
}

/// Where `show` gets its ceilings: a given file, else this device's cache.
fn load_ceilings(file: Option<&Path>) -> anyhow::Result<(store::Stored, String)> {
    match file {
        Some(path) => {
            let stored = store::read_file(path).map_err(|e| match e {
                store::ReadError::Missing => {
                    BadInput(format!("cannot read {}: no such file", path.display()))
                }
                store::ReadError::Other(why) => BadInput(why),
            })?;
            Ok((stored, path.display().to_string()))
        }
        None => load_kept(None),
    }
}

/// GPU `ordinal`'s stored ceilings on this device, or a given file's.
fn load_gpu_ceilings(
    file: Option<&Path>,
    ordinal: usize,
) -> anyhow::Result<(store::Stored, String)> {
    match file {
        Some(_) => load_ceilings(file),
        None => load_kept(Some(ordinal)),
    }
}

/// The ceilings kept for this device's CPU (`gpu` None) or its GPU `gpu`, or how to get them.
fn load_kept(gpu: Option<usize>) -> anyhow::Result<(store::Stored, String)> {
    let fingerprint = device::fingerprint(Path::new("/"));
    let dir = store::cache_dir().ok_or_else(|| {
        BadInput(
            "no cache directory (set EDGEPROF_CACHE_DIR or HOME), so no stored ceilings".into(),
        )
    })?;
    let (kept, path) = match gpu {
        None => (
            store::load(&dir, &fingerprint)?,
            store::path_for(&dir, &fingerprint),
        ),
        Some(n) => (
            store::load_gpu(&dir, &fingerprint, n)?,
            store::gpu_path_for(&dir, &fingerprint, n),
        ),
    };
    match (kept, gpu) {
        (Some(stored), _) => Ok((stored, path.display().to_string())),
        (None, None) => anyhow::bail!(BadInput(
            "no ceilings for this device yet: run `edgeprof roofline measure` (about 5 s) or \
             `edgeprof roofline import-ert roofline.json`"
                .into()
        )),
        (None, Some(n)) => anyhow::bail!(BadInput(format!(
            "no ceilings for GPU {n} of this device yet: run `edgeprof roofline measure-gpu \
             --device {n}` or `edgeprof roofline import-ert roofline.json --gpu {n}`"
        ))),
    }
}

pub struct ShowOptions {
    pub results: Option<PathBuf>,
    pub ceilings: Option<PathBuf>,
    /// GPU ceilings (this CUDA device's) and the results directory's GPU profiles.
    pub gpu: Option<usize>,
    /// The roof asked for; None: fp32, else the ceilings' widest.
    pub precision: Option<Precision>,
    pub ascii: bool,
    pub width: usize,
    pub height: usize,
    pub svg: Option<PathBuf>,
    pub json: bool,
    /// Simulate the conditions that have no counted traffic (valgrind), this many inferences each.
    pub cache_sim: Option<usize>,
}

#[derive(serde::Serialize)]
struct ShowJson<'a> {
    ceilings: &'a Ceilings,
    ceilings_file: &'a str,
    programs: &'a [edgeprof::roofline::Program],
    left_out: &'a [(String, String)],
    /// None when hardware counters can be opened, else why not.
    counters_unavailable: Option<String>,
    analyses: Vec<edgeprof::roofline::advice::Analysis>,
}

/// `edgeprof roofline show`.
pub fn show(o: ShowOptions) -> anyhow::Result<()> {
    let (stored_ceilings, from) = match o.gpu {
        Some(n) => load_gpu_ceilings(o.ceilings.as_deref(), n)?,
        None => load_ceilings(o.ceilings.as_deref())?,
    };
    let ceilings = &stored_ceilings.ceilings;
    let precision = match o.precision {
        Some(p) if ceilings.peak(p).is_none() => {
            let have: Vec<String> = Precision::ALL
                .iter()
                .filter(|&&p| ceilings.peak(p).is_some())
                .map(|p| p.to_string())
                .collect();
            anyhow::bail!(BadInput(format!(
                "the ceilings in {from} have no {p} roof (they have {}): `edgeprof roofline \
                 kernels` lists the units this CPU has, and `roofline measure` measures each of \
                 them",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            )));
        }
        Some(p) => p,
        // fp32 is what most models run in; ERT's imports may have fp64 alone.
        None => [Precision::Fp32]
            .into_iter()
            .chain(Precision::ALL)
            .find(|&p| ceilings.peak(p).is_some())
            .unwrap_or(Precision::Fp32),
    };
    let (programs, left_out) = match &o.results {
        Some(dir) if o.gpu.is_some() => {
            if !dir.is_dir() {
                anyhow::bail!(BadInput(format!("{} is not a directory", dir.display())));
            }
            edgeprof::roofline::nvidia::programs_in(dir)
        }
        Some(dir) => {
            let stored = edgeprof::results::load(dir).map_err(|e| BadInput(format!("{e:#}")))?;
            let mut simulations = cachesim::load(dir)?;
            if let Some(iterations) = o.cache_sim {
                cachesim::simulate_missing(
                    &stored,
                    &mut simulations,
                    iterations,
                    SIMULATION_TIMEOUT,
                    |line| errln!("{line}"),
                )?;
            }
            edgeprof::roofline::programs_from_results(&stored, &simulations)
        }
        None => (Vec::new(), Vec::new()),
    };
    let analyses: Vec<_> = programs
        .iter()
        .filter_map(|p| edgeprof::roofline::advice::analyse(p, ceilings).ok())
        .collect();
    if let Some(path) = &o.svg {
        let svg = edgeprof::report::svg::roofline(ceilings, precision, &programs)?;
        edgeprof::results::write_atomic(path, svg.as_bytes())?;
        errln!("wrote {}", path.display());
    }
    if o.json {
        return print_json(&ShowJson {
            ceilings,
            ceilings_file: &from,
            programs: &programs,
            left_out: &left_out,
            counters_unavailable: edgeprof::collect::perf::probe().err().map(|e| e.0),
            analyses,
        });
    }
    let mut out = roofline_text(
        ceilings,
        &from,
        &programs,
        &left_out,
        precision,
        o.ascii,
        (o.width, o.height),
    );
    match (&o.results, o.gpu) {
        (None, None) => out.push_str("\n(no results directory given: ceilings only; `edgeprof roofline show DIR` places its conditions)\n"),
        (None, Some(_)) => out.push_str("\n(no results directory given: ceilings only; `edgeprof roofline show DIR --gpu` places the GPU profiles kept in DIR)\n"),
        (Some(dir), Some(_)) if programs.is_empty() && left_out.is_empty() => {
            let _ = writeln!(
                out,
                "\n(no GPU profiles in {}: `edgeprof roofline profile-gpu --output {}/NAME -- COMMAND` keeps one there)",
                dir.display(),
                dir.display()
            );
        }
        _ => {}
    }
    print_out(&out)
}

/// How long one condition may take under valgrind.
const SIMULATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

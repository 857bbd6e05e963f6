//! GPU ceilings through the binary: the CUDA microbenchmark's parent side with a recorded
//! stand-in worker (no GPU here), its failures, the GPU ceilings kept apart from the CPU's and
//! used by `roofline show --gpu` and the profiler imports, ERT GPU import, the unavailable paths
//! on a machine without CUDA, and the kernels compiled by a real NVRTC (from PyPI) for every
//! edge GPU generation.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn stand_in() -> String {
    format!(
        "{}/tests/fixtures/bin/gpu-bench-worker",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn fixture_file(path: &str) -> String {
    format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// edgeprof with its cache in `cache` and the stand-in GPU worker behaving as `mode`.
fn with_gpu(cache: &Path, mode: &str) -> assert_cmd::Command {
    let mut c = edgeprof();
    c.env("EDGEPROF_CACHE_DIR", cache)
        .env("EDGEPROF_GPU_BENCH_WORKER", stand_in())
        .env("FAKE_GPU", mode);
    c
}

fn out_err(a: &assert_cmd::assert::Assert) -> (String, String) {
    let o = a.get_output();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn gpu_ceilings_are_measured_in_a_child_kept_apart_and_used_by_the_gpu_commands() {
    let cache = temp_dir();
    let a = with_gpu(cache.path(), "ok")
        .args(["roofline", "measure-gpu"])
        .assert()
        .success();
    let (text, err) = out_err(&a);
    // Progress from the child's report, then the roofs, the notes and the sweep.
    assert!(
        err.contains("measuring GPU 0: Orin (compute capability 8.7"),
        "{err}"
    );
    assert!(err.contains("[40/40] load bandwidth around L1"), "{err}");
    assert!(err.contains("[8/40] int8 tensor-core peak"), "{err}");
    assert!(text.contains("GPU (24576 threads)"), "{text}");
    for (roof, value) in [
        ("fp16 peak ", "9380.0 GFLOP/s"),
        ("fp16 peak (tensor cores)", "39800.0 GFLOP/s"),
        ("int8 peak (dp4a)", "19600.0 GOP/s"),
        ("int8 peak (tensor cores)", "79500.0 GOP/s"),
        ("L1 bandwidth", "2050.0 GB/s"),
        ("L2 bandwidth", "610.0 GB/s"),
        ("DRAM bandwidth", "187.0 GB/s"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(roof) && l.ends_with(value)),
            "no {roof} {value}:\n{text}"
        );
    }
    assert!(
        text.contains("fp32 ridge points (FLOP/byte): L1 2.30, L2 7.72, DRAM 25.19"),
        "{text}"
    );
    assert!(text.contains("= 88 % of the 5.33 TFLOP/s"), "{text}");
    assert!(text.contains("around L1 (L2, DRAM)"), "{text}");
    let kept: Vec<PathBuf> = std::fs::read_dir(cache.path())
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].to_string_lossy().ends_with("-gpu0.json"),
        "{kept:?}"
    );

    // The CPU's ceilings are untouched: none yet.
    let a = with_gpu(cache.path(), "ok")
        .args(["roofline", "show"])
        .assert()
        .code(2);
    assert!(out_err(&a).1.contains("no ceilings for this device yet"));
    // The GPU's: the chart, and for GPU 1 the way to get them.
    let a = with_gpu(cache.path(), "ok")
        .args(["roofline", "show", "--gpu", "--ascii"])
        .assert()
        .success();
    let text = out_err(&a).0;
    assert!(text.contains("on GPU 0 (Orin"), "{text}");
    assert!(
        text.contains("`edgeprof roofline show DIR --gpu`"),
        "{text}"
    );
    let a = with_gpu(cache.path(), "ok")
        .args(["roofline", "show", "--gpu", "1"])
        .assert()
        .code(2);
    assert!(out_err(&a)
        .1
        .contains("run `edgeprof roofline measure-gpu --device 1`"));

    // import-ncu finds the stored GPU ceilings by itself; the advice speaks of GPUs.
    let a = with_gpu(cache.path(), "ok")
        .args(["roofline", "import-ncu", "--ascii"])
        .arg(fixture_file("gpu-profilers/ncu-orin.csv"))
        .assert()
        .success();
    let text = out_err(&a).0;
    assert!(
        text.contains("A  ncu-orin: 741.8 GFLOP/s at 15.7 % of the fp32 peak"),
        "{text}"
    );
    assert!(
        text.contains("fuse kernels, tile for reuse in shared memory"),
        "{text}"
    );
    assert!(text.contains("time = kernel-active time"), "{text}");

    // GPU profiles kept in a results directory become its GPU points.
    let results = temp_dir();
    let orin = results.path().join("resnet-orin");
    let nano = results.path().join("resnet-nano");
    for (dir, files) in [
        (&orin, vec![("ncu.csv", "ncu-orin.csv")]),
        (
            &nano,
            vec![
                ("nvprof-metrics.csv", "nvprof-nano-metrics.csv"),
                ("nvprof-summary.csv", "nvprof-nano-summary.csv"),
            ],
        ),
    ] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            panic!("{e}");
        }
        for (to, from) in files {
            if let Err(e) =
                std::fs::copy(fixture_file(&format!("gpu-profilers/{from}")), dir.join(to))
            {
                panic!("{e}");
            }
        }
    }
    let broken = results.path().join("broken");
    if let Err(e) = std::fs::create_dir_all(&broken)
        .and_then(|_| std::fs::write(broken.join("ncu.csv"), "no csv here\n"))
    {
        panic!("{e}");
    }
    let a = with_gpu(cache.path(), "ok")
        .args(["roofline", "show", "--gpu", "--ascii"])
        .arg(results.path())
        .assert()
        .success();
    let text = out_err(&a).0;
    assert!(
        text.contains("GPU profiler counters (ncu / nvprof) for 2"),
        "{text}"
    );
    assert!(text.contains("A  resnet-nano:"), "{text}");
    assert!(text.contains("B  resnet-orin:"), "{text}");
    assert!(text.contains("broken: not placed: "), "{text}");
    // JSON: the GPU measurement in full.
    let a = with_gpu(cache.path(), "ok")
        .args(["roofline", "measure-gpu", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = match serde_json::from_slice(&a.get_output().stdout) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(v["gpu"]["info"]["name"], "Orin");
    assert_eq!(v["ceilings"]["processor"], "gpu");
    assert_eq!(
        v["ceilings"]["gpu_sweep"].as_array().map(Vec::len),
        Some(31)
    );
}

#[test]
fn a_cpu_program_is_not_judged_against_gpu_ceilings() {
    let a = edgeprof()
        .args(["roofline", "show", "--ascii", "--ceilings"])
        .arg(fixture_file("ceilings-orin-gpu.json"))
        .arg(fixture_file("results/small"))
        .assert()
        .success();
    let text = out_err(&a).0;
    assert!(
        text.contains("cannot be analysed: a CPU program cannot be judged against GPU ceilings"),
        "{text}"
    );
}

#[test]
fn gpu_benchmark_failures_are_one_sentence_each() {
    let cache = temp_dir();
    let run = |mode: &str, code: i32| {
        let a = with_gpu(cache.path(), mode)
            .env("EDGEPROF_GPU_BENCH_TIMEOUT_S", "2")
            .args(["roofline", "measure-gpu"])
            .assert()
            .code(code);
        let err = out_err(&a).1;
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(
            err.lines().filter(|l| l.contains("error")).count(),
            1,
            "{err}"
        );
        err
    };
    assert!(run("unavailable", 2).contains("GPU ceilings unavailable: no CUDA driver (stand-in)"));
    assert!(run("failed", 1)
        .contains("the GPU benchmark failed: a kernel failed: CUDA_ERROR_LAUNCH_TIMEOUT"));
    assert!(
        run("crash", 1).contains("ended without a result (killed by a signal): Segmentation fault")
    );
    assert!(run("hang", 1).contains("did not finish within 2 s and was stopped"));
    assert!(run("garbage", 1).contains("ended without a result (exit code 0)"));
    // Nothing was kept from any of them.
    assert_eq!(
        std::fs::read_dir(cache.path())
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
}

#[test]
fn ert_gpu_runs_are_kept_as_gpu_ceilings() {
    // A hand-written ERT GPU roofline.json (V100-scale figures, ERT's new dialect and metadata).
    let cache = temp_dir();
    let import = |args: &[&str]| {
        edgeprof()
            .env("EDGEPROF_CACHE_DIR", cache.path())
            .args(["roofline", "import-ert"])
            .args(args)
            .assert()
            .success()
    };
    // Recognised by its metadata: GPU 0's ceilings, 640 blocks × 256 threads.
    let a = import(&[&fixture_file("ert/gpu-v100-fp32.json")]);
    let (text, err) = out_err(&a);
    assert!(err.contains("this ERT run measured a GPU"), "{err}");
    assert!(text.contains("for GPU 0"), "{text}");
    assert!(text.contains("GPU (163840 threads)"), "{text}");
    assert!(
        text.contains("fp32 peak") && text.contains(" 14032.6 GFLOP/s"),
        "{text}"
    );
    assert!(
        text.contains("fp32 ridge points (FLOP/byte): L1 1.00, L2 4.68, DRAM 16.93"),
        "{text}"
    );
    // --gpu N keeps it for another GPU; a CPU run imported with --gpu is kept but questioned.
    import(&[&fixture_file("ert/gpu-v100-fp32.json"), "--gpu", "1"]);
    let a = import(&[&fixture_file("ert/new-dialect.json"), "--gpu", "2"]);
    assert!(out_err(&a)
        .1
        .contains("nothing in this ERT run's metadata says it measured a GPU"));
    for n in ["0", "1", "2"] {
        let a = edgeprof()
            .env("EDGEPROF_CACHE_DIR", cache.path())
            .args(["roofline", "show", "--gpu", n])
            .assert()
            .success();
        assert!(out_err(&a).0.contains(&format!("for GPU {n}")));
    }
    // The CPU's slot stays empty.
    edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .args(["roofline", "show"])
        .assert()
        .code(2);
    assert_bad_input(
        &[
            "roofline",
            "import-ert",
            "x.json",
            "--gpu",
            "--sweep",
            "max",
        ],
        "cannot be used with",
    );
}

#[test]
fn without_cuda_the_gpu_paths_say_unavailable_and_why() {
    // The real worker, on this machine. CI has no NVIDIA driver; a machine with one measures.
    let cache = temp_dir();
    let a = edgeprof()
        .env("EDGEPROF_CACHE_DIR", cache.path())
        .env_remove("EDGEPROF_GPU_BENCH_WORKER")
        .args(["roofline", "measure-gpu", "--quick"])
        .assert();
    let o = a.get_output();
    let err = String::from_utf8_lossy(&o.stderr);
    let has_driver = [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
        "/usr/lib64/libcuda.so.1",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    let has_gpu = edgeprof::collect::gpuprof::memory_kind(Path::new("/"), 0).is_ok();
    if has_gpu {
        // A GPU the driver answers for: its ceilings are measured.
        assert!(o.status.success(), "{err}");
    } else if has_driver {
        // A driver without a GPU it can use (a container, a card gone): unavailable, and why.
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("GPU ceilings unavailable"), "{err}");
    } else {
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("GPU ceilings unavailable: no CUDA driver (libcuda.so.1 is not installed"),
            "{err}"
        );
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// NVRTC and ptxas of one CUDA release (12.4, from PyPI's nvidia-cuda-nvrtc-cu12 and
/// nvidia-cuda-nvcc-cu12): ptxas must know the PTX version that NVRTC writes.
const NVRTC: &str = "nvidia-cuda-nvrtc-cu12==12.4.127";
const PTXAS: &str = "nvidia-cuda-nvcc-cu12==12.4.131";

/// The directory of the pip-installed NVRTC and the path of ptxas, set up on first use.
fn toolkit() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let python = test_python(
            "import nvidia.cuda_nvrtc, nvidia.cuda_nvcc; from importlib.metadata import version; \
             assert version('nvidia-cuda-nvrtc-cu12') == '12.4.127'",
            &[NVRTC, PTXAS],
        );
        let out = std::process::Command::new(python)
            .args([
                "-c",
                "import nvidia.cuda_nvrtc as r, nvidia.cuda_nvcc as c; \
                 print(list(r.__path__)[0] + '/lib'); print(list(c.__path__)[0] + '/bin/ptxas')",
            ])
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                let mut lines = text.lines().map(|l| PathBuf::from(l.trim()));
                match (lines.next(), lines.next()) {
                    (Some(lib), Some(ptxas)) => (lib, ptxas),
                    _ => panic!("cannot locate NVRTC and ptxas: {text}"),
                }
            }
            other => panic!("cannot locate NVRTC and ptxas: {other:?}"),
        }
    })
}

fn nvrtc_dir() -> &'static Path {
    &toolkit().0
}

/// Maxwell desktops (5.2, no fp16 arithmetic), Jetson Nano (5.3), TX2 (6.2), Xavier (7.2), Orin
/// (8.7), H100/H200 (9.0).
const EDGE_ARCHS: [&str; 6] = [
    "compute_52",
    "compute_53",
    "compute_62",
    "compute_72",
    "compute_87",
    "compute_90",
];

#[test]
fn the_kernels_compile_with_nvrtc_for_every_edge_gpu_generation() {
    for arch in EDGE_ARCHS {
        let a = edgeprof()
            .env("LD_LIBRARY_PATH", nvrtc_dir())
            .args(["roofline", "measure-gpu", "--compile-only", "--arch", arch])
            .assert()
            .success();
        let text = out_err(&a).0;
        assert!(
            text.contains(&format!(" compiled the GPU ceiling kernels for {arch}"))
                && text.contains(
                    "entry points peak_fp32, peak_fp64, peak_fp16, peak_int8, peak_tc_fp16, \
                     peak_tc_bf16, peak_tc_int8, load_l1, load_l2, shared_read"
                ),
            "{text}"
        );
    }
    // NVRTC's own refusal reaches the user.
    let a = edgeprof()
        .env("LD_LIBRARY_PATH", nvrtc_dir())
        .args([
            "roofline",
            "measure-gpu",
            "--compile-only",
            "--arch",
            "compute_20",
        ])
        .assert()
        .code(1);
    assert!(out_err(&a)
        .1
        .contains("NVRTC could not compile the kernels for compute_20"));
    assert_bad_input(
        &["roofline", "measure-gpu", "--compile-only", "--arch", "87"],
        "is not an NVRTC target",
    );
}

#[test]
fn ptxas_assembles_every_kernel_for_every_edge_gpu_generation() {
    // NVRTC passes inline PTX (dp4a, fma.rn.f16x2, mma.sync) through unchecked: the toolkit's
    // assembler is what a GPU's driver would run on it.
    let dir = temp_dir();
    for arch in EDGE_ARCHS {
        let sm = arch.replace("compute_", "sm_");
        let ptx = dir.path().join(format!("{arch}.ptx"));
        edgeprof()
            .env("LD_LIBRARY_PATH", nvrtc_dir())
            .args([
                "roofline",
                "measure-gpu",
                "--compile-only",
                "--arch",
                arch,
                "--ptx",
            ])
            .arg(&ptx)
            .assert()
            .success();
        let out = std::process::Command::new(&toolkit().1)
            .arg(format!("-arch={sm}"))
            .arg(&ptx)
            .arg("-o")
            .arg(dir.path().join(format!("{sm}.cubin")))
            .output();
        match out {
            Ok(o) => assert!(
                o.status.success(),
                "ptxas refused the kernels for {sm}: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => panic!("cannot run ptxas: {e}"),
        }
    }
    // The fp16 and tensor-core kernels are real instructions where the GPU has them, and
    // stand-ins (never launched) where it does not.
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    assert!(read("compute_87.ptx").contains("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
    assert!(read("compute_87.ptx").contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    assert!(!read("compute_72.ptx").contains("mma.sync"));
    assert!(read("compute_53.ptx").contains("fma.rn.f16x2"));
    assert!(!read("compute_52.ptx").contains("fma.rn.f16x2"));
}

#[test]
fn without_nvrtc_compiling_says_where_it_comes_from() {
    let has_nvrtc = [
        "/usr/local/cuda/lib64/libnvrtc.so",
        "/usr/lib/x86_64-linux-gnu/libnvrtc.so",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    if !has_nvrtc {
        assert_bad_input(
            &["roofline", "measure-gpu", "--compile-only"],
            "GPU kernels unavailable: NVRTC (libnvrtc.so) is not found",
        );
    }
}

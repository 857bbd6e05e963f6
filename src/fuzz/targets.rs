//! The text and tree targets: each parser with its seed fixtures, its dictionary and the
//! function that feeds it one input.

use super::*;

pub(super) fn fixture(relative: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative);
    match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

pub(super) fn fixtures(relatives: &[&str]) -> Vec<Vec<u8>> {
    relatives.iter().map(|r| fixture(r)).collect()
}

pub(super) fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// A fixture's text, read once per process.
pub(super) fn text_fixture(relative: &'static str) -> String {
    static CACHE: std::sync::Mutex<BTreeMap<&'static str, String>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut cache = match CACHE.lock() {
        Ok(c) => c,
        Err(poisoned) => poisoned.into_inner(),
    };
    cache
        .entry(relative)
        .or_insert_with(|| String::from_utf8_lossy(&fixture(relative)).into_owned())
        .clone()
}

/// Every target.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "tegrastats",
            seeds: || {
                fixtures(&[
                    "tegrastats/jp4-nano-root.log",
                    "tegrastats/jp4-tx2-nonroot.log",
                    "tegrastats/jp5-orin-root.log",
                    "tegrastats/jp6-orin-nano-nonroot.log",
                    "tegrastats/jp7-thor.log",
                    "tegrastats/broken.log",
                    "tegrastats/implausible.log",
                ])
            },
            dictionary: &[
                "RAM ",
                "SWAP ",
                "IRAM ",
                "CPU [",
                "]",
                "off",
                "%@",
                "MB",
                "kB",
                "(lfb ",
                "(cached ",
                "EMC_FREQ ",
                "GR3D_FREQ ",
                "GR3D2_FREQ ",
                "@[",
                "MTS fg ",
                "C/",
                "mW/",
                "VDD_IN ",
                "NC ",
                "@-256C",
                "11-29-2026 14:02:11 ",
            ],
            structured: None,
            run: run_tegrastats,
            short: 3_000,
        },
        Target {
            name: "ncu",
            seeds: || {
                fixtures(&[
                    "gpu-profilers/ncu-orin.csv",
                    "gpu-profilers/ncu-truncated.csv",
                    "gpu-profilers/ncu-inconsistent.csv",
                ])
            },
            dictionary: &[
                "\"",
                "\",\"",
                "nan",
                "n/a",
                "==PROF==",
                "\"Metric Value\"",
                "\"ID\"",
                "Kbyte",
                "Ghz",
                "nsecond",
                "usecond",
                "dram__bytes.sum",
                "lts__t_bytes.sum",
                "sm__cycles_elapsed.avg.per_second",
                "gpu__time_duration.sum",
            ],
            structured: None,
            run: run_ncu,
            short: 800,
        },
        Target {
            name: "nvprof-metrics",
            seeds: || fixtures(&["gpu-profilers/nvprof-nano-metrics.csv"]),
            dictionary: &[
                "\"",
                "\",\"",
                "nan",
                "==7790==",
                "\"Invocations\"",
                "\"Avg\"",
                "flop_count_sp",
                "flop_count_dp",
                "dram_read_transactions",
                "gld_transactions",
                "GB/s",
                "%",
            ],
            structured: None,
            run: run_nvprof_metrics,
            short: 1_500,
        },
        Target {
            name: "nvprof-summary",
            seeds: || fixtures(&["gpu-profilers/nvprof-nano-summary.csv"]),
            dictionary: &[
                "\"",
                "\",\"",
                "\"GPU activities\"",
                "\"API calls\"",
                "[CUDA memcpy HtoD]",
                "\"ms\"",
                "\"us\"",
                "\"s\"",
                "\"Time\"",
                "\"Calls\"",
                "\"Name\"",
            ],
            structured: None,
            run: run_nvprof_summary,
            short: 2_000,
        },
        Target {
            name: "ert-json",
            seeds: || {
                fixtures(&[
                    "ert/gpu-v100-fp32.json",
                    "ert/new-dialect.json",
                    "ert/old-dialect.json",
                    "ert/broken.json",
                ])
            },
            dictionary: &[
                "\"empirical\"",
                "\"gflops\"",
                "\"gbytes\"",
                "\"data\"",
                "\"metadata\"",
                "[\"L1\", 1.5]",
                "[\"DRAM\", 0]",
                "\"OPENMP_THREADS\": 99999999999",
                "\"GPU_BLOCKS 4294967296\"",
                "\"GPU_THREADS 4294967296\"",
                "'ERT_GPU': ['True']",
                "null",
                "true",
                "[]",
                "{}",
            ],
            structured: None,
            run: run_ert_json,
            short: 4_000,
        },
        Target {
            name: "ert-sweep",
            seeds: || fixtures(&["ert/sweep.max"]),
            dictionary: &["META_DATA", "fp64", " 1e308", " -1", "\n"],
            structured: None,
            run: run_ert_sweep,
            short: 1_500,
        },
        Target {
            name: "config",
            seeds: config_seeds,
            dictionary: &[
                "[matrix]",
                "[measure]",
                "[output]",
                "[tune]",
                "[command]",
                "[[exclude]]",
                "[frameworks.onnxruntime]",
                "models = ",
                "inputs = ",
                "threads = ",
                "batch = ",
                "engines = ",
                "cores = ",
                "\"3x224x224\"",
                "\"0-3\"",
                "= [",
                "]",
                "= \"",
                "\"",
                "9223372036854775807",
                "-9223372036854775808",
                "1e400",
                "nan",
                "inf",
                "'''",
                "\\u0000",
            ],
            structured: None,
            run: run_config,
            short: 1_500,
        },
        Target {
            name: "protocol",
            seeds: protocol_seeds,
            dictionary: &[
                "{\"type\":\"ready\",\"init_ms\":1}",
                "{\"type\":\"summary\"}",
                "{\"type\":\"error\",\"message\":\"x\"}",
                "\"repeat\":",
                "\"latencies_ms\":",
                "\"latency_ms\":",
                "\"counts\":",
                "1e309",
                "-0.0",
                "null",
                "[]",
            ],
            structured: None,
            run: run_protocol,
            short: 8_000,
        },
        Target {
            name: "npy",
            seeds: npy_seeds,
            dictionary: &[
                "'descr': '<f4'",
                "'descr': '>i8'",
                "'descr': '|b1'",
                "'descr': '<f2'",
                "'descr': '<c8'",
                "'descr': '|O'",
                "'descr': [('a', '<f4')]",
                "'fortran_order': True",
                "'shape': (",
                "4611686018427387904,",
                "-1,",
                "NUMPY\x02\x00",
            ],
            structured: None,
            run: run_npy,
            short: 4_000,
        },
        Target {
            name: "results",
            seeds: results_seeds,
            dictionary: &[
                "\"condition\":",
                "\"ok\":",
                "\"run\":",
                "\"format\":",
                "\"repeats\":",
                "\"samples\":",
                "null",
                "true",
                "[]",
                "{}",
                "1e309",
                "-1",
            ],
            structured: Some(mutate_results),
            run: run_results,
            short: 600,
        },
        Target {
            name: "sysfs",
            seeds: sysfs_seeds,
            dictionary: &[
                "-256000", "cpu", " kB", "0x1002", "NC", "ina3221", "gpu", "\n",
            ],
            structured: Some(mutate_after_header),
            run: run_sysfs,
            short: 400,
        },
        Target {
            name: "ceilings",
            seeds: || fixtures(&["ceilings-orin-gpu.json", "ceilings-pi4.json"]),
            dictionary: &[
                "\"flops_per_s\":",
                "\"bytes_per_s\":",
                "\"threads\":",
                "\"processor\":\"gpu\"",
                "1e309",
                "-1",
                "0",
                "null",
                "[]",
            ],
            structured: None,
            run: run_ceilings,
            short: 3_000,
        },
        Target {
            name: "costmodel-db",
            seeds: costmodel_seeds,
            dictionary: &[
                "\"flops\":",
                "\"bytes\":",
                "\"seconds\":",
                "\"latency_ms\":",
                "\"threads\":",
                "\"stream_bytes_per_s\":",
                "\"template\":\"matmul\"",
                "null",
                "[]",
                "-1e308",
            ],
            structured: Some(extreme_numbers),
            run: run_costmodel,
            short: 120,
        },
        onnx_target(),
        onnx_reader_target(),
        model_path_target(),
        history_target(),
    ]
}

/// Caches of a small board, for naming sweep levels.
pub(super) fn caches() -> Vec<crate::collect::device::Cache> {
    let cache = |level, kind: &str, size_bytes, shared| crate::collect::device::Cache {
        level,
        kind: kind.into(),
        size_bytes,
        shared_cpus: shared,
    };
    vec![
        cache(1, "Data", 32 << 10, Some(1)),
        cache(2, "Unified", 512 << 10, Some(4)),
        cache(3, "Unified", 4 << 20, None),
    ]
}

/// Places programs on the terminal chart and the SVG one, and analyses them, as the import
/// commands do.
pub(super) fn place(programs: &[crate::roofline::Program], ceilings: &crate::roofline::Ceilings) {
    use crate::roofline::Precision;
    let marks = crate::report::roofline_chart::marks(programs);
    for p in [Precision::Fp32, Precision::Fp64] {
        let _ = crate::report::roofline_chart::render(ceilings, p, &marks, 80, 24, true);
    }
    let _ = crate::report::svg::roofline(ceilings, Precision::Fp32, programs);
    for p in programs {
        let _ = crate::roofline::advice::analyse(p, ceilings);
    }
}

pub(super) fn run_tegrastats(_: &mut Scratch, bytes: &[u8]) {
    let mut columns: Option<Vec<String>> = None;
    let _ = crate::collect::tegrastats::replay(
        bytes,
        Duration::from_millis(500),
        |sample| {
            let columns = columns.get_or_insert_with(|| {
                crate::collect::telemetry::csv_columns(std::slice::from_ref(&sample))
            });
            let _ = crate::collect::telemetry::csv_row(columns, &sample);
            let _ = serde_json::to_string(&sample);
            Ok::<(), std::convert::Infallible>(())
        },
        |_, _| {},
    );
}

pub(super) fn place_import(import: &crate::roofline::nvidia::Import) {
    if let Some(p) = crate::roofline::nvidia::program(import, "fuzz") {
        place(&[p], &crate::roofline::test_ceilings());
    }
}

pub(super) fn run_ncu(_: &mut Scratch, bytes: &[u8]) {
    if let Ok(import) = crate::roofline::nvidia::parse_ncu(&text(bytes)) {
        place_import(&import);
    }
}

pub(super) fn run_nvprof_metrics(_: &mut Scratch, bytes: &[u8]) {
    let summary = text_fixture("gpu-profilers/nvprof-nano-summary.csv");
    if let Ok(import) = crate::roofline::nvidia::parse_nvprof(&text(bytes), Some(&summary)) {
        place_import(&import);
    }
}

pub(super) fn run_nvprof_summary(_: &mut Scratch, bytes: &[u8]) {
    let metrics = text_fixture("gpu-profilers/nvprof-nano-metrics.csv");
    if let Ok(import) = crate::roofline::nvidia::parse_nvprof(&metrics, Some(&text(bytes))) {
        place_import(&import);
    }
}

/// A program at a plain place, to put on imported ceilings.
pub(super) fn program() -> crate::roofline::Program {
    crate::roofline::Program {
        label: "fuzz".into(),
        precision: crate::roofline::Precision::Fp64,
        flops: 1e9,
        seconds: 0.01,
        traffic: vec![
            (crate::roofline::Level::L1, 4e8),
            (crate::roofline::Level::Dram, 1e8),
        ],
        source: crate::roofline::PointSource::Analytic,
        basis: Vec::new(),
    }
}

pub(super) fn run_ert_json(_: &mut Scratch, bytes: &[u8]) {
    for caches in [Vec::new(), caches()] {
        if let Ok(i) = crate::roofline::ert::import(&text(bytes), None, &caches, "fuzz".into()) {
            assert_eq!(i.ceilings.check(), Ok(()), "an import passed bad ceilings");
            place(&[program()], &i.ceilings);
        }
    }
}

pub(super) fn run_ert_sweep(_: &mut Scratch, bytes: &[u8]) {
    let json = text_fixture("ert/old-dialect.json");
    let sweep = text(bytes);
    for threads in [0, 1, 3] {
        let _ = crate::roofline::ert::parse_sweep(&sweep, threads);
    }
    for caches in [Vec::new(), caches()] {
        if let Ok(i) = crate::roofline::ert::import(&json, Some(&sweep), &caches, "fuzz".into()) {
            assert_eq!(i.ceilings.check(), Ok(()), "an import passed bad ceilings");
            place(&[program()], &i.ceilings);
        }
    }
}

pub(super) fn run_ceilings(_: &mut Scratch, bytes: &[u8]) {
    if let Ok(stored) = crate::roofline::store::parse_file(&text(bytes)) {
        place(&[program()], &stored.ceilings);
    }
}

pub(super) fn config_seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seeds = Vec::new();
    for sub in ["configs", "tests/invalid_configs"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(sub))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "toml"))
        {
            if let Ok(b) = std::fs::read(f) {
                seeds.push(b);
            }
        }
    }
    seeds
}

pub(super) fn run_config(scratch: &mut Scratch, bytes: &[u8]) {
    let file = scratch.path().join("fuzz.toml");
    let _ = crate::config::parse(&text(bytes), &file);
}

pub(super) fn protocol_seeds() -> Vec<Vec<u8>> {
    use crate::protocol::WorkerMessage;
    let lines = [
        WorkerMessage::Ready {
            init_ms: 12.5,
            engine: Some("tract".into()),
            engine_version: Some("0.23.9".into()),
            device: Some("cpu".into()),
            threads: Some(4),
            parameters: Some(1_366_792),
        },
        WorkerMessage::First { latency_ms: 3.25 },
        WorkerMessage::Warmup {
            latencies_ms: vec![2.0, 2.1],
        },
        WorkerMessage::Iteration {
            latency_ms: 1.9,
            repeat: 0,
        },
        WorkerMessage::Iterations {
            latencies_ms: vec![1.8, 1.7, 1.75],
            repeat: 1,
        },
        WorkerMessage::Counters {
            iterations: 4,
            line_bytes: 64,
            counts: Vec::new(),
            unavailable: vec!["cache-misses: not supported".into()],
        },
        WorkerMessage::Summary {
            note: Some("fine".into()),
        },
    ];
    let whole: String = lines.iter().map(|m| m.to_line() + "\n").collect();
    let failed = format!(
        "{}\n{}\n",
        lines[0].to_line(),
        WorkerMessage::Error {
            message: "out of memory".into()
        }
        .to_line()
    );
    let counted = "{\"type\":\"ready\",\"init_ms\":1}\n{\"type\":\"counters\",\"iterations\":2,\"counts\":[{\"event\":\"cycles\",\"value\":1e9}]}\n{\"type\":\"summary\"}\n";
    vec![
        whole.into_bytes(),
        failed.into_bytes(),
        counted.as_bytes().to_vec(),
    ]
}

pub(super) fn run_protocol(_: &mut Scratch, bytes: &[u8]) {
    let text = text(bytes);
    let mut collector = crate::protocol::Collector::default();
    for line in text.lines() {
        if collector.feed(line).is_err() {
            break;
        }
        let _ = collector.progress();
    }
    if let Ok(run) = collector.finish() {
        let _ = serde_json::to_string(&run);
        let _ = crate::stats::run_stats(
            run.init_ms,
            run.first_inference_ms,
            &run.warmup_ms,
            &run.repeats,
            1,
            crate::stats::Outliers::Exclude,
        );
        if let Some(c) = &run.counters {
            let _ = c.derive();
        }
    }
    // The worker's own request, read from its stdin.
    let _ = serde_json::from_str::<crate::protocol::WorkerRequest>(&text);
}

/// Inputs whose first part names what the rest is (a results file, a board file): mutations
/// change the rest and keep the name.
pub(super) fn mutate_after_header(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let seed = pick(rng, seeds);
    let split = seed.iter().position(|b| *b == 0).map_or(0, |i| i + 1);
    let (header, body) = seed.split_at(split);
    let bodies: Vec<Vec<u8>> = vec![body.to_vec()];
    let mut out = header.to_vec();
    out.extend(mutate_bytes(rng, &bodies, &[]));
    out
}

/// `name\0content`: the name and the content of a header-carrying input.
pub(super) fn split_header(bytes: &[u8]) -> Option<(String, &[u8])> {
    let i = bytes.iter().position(|b| *b == 0)?;
    let name = std::str::from_utf8(&bytes[..i]).ok()?.to_string();
    (!name.is_empty() && !name.contains("..") && !name.starts_with('/'))
        .then_some((name, &bytes[i + 1..]))
}

pub(super) fn with_header(name: &str, content: &[u8]) -> Vec<u8> {
    let mut out = name.as_bytes().to_vec();
    out.push(0);
    out.extend_from_slice(content);
    out
}

/// A copy of a fixture tree in the scratch directory (made once per thread), by its path
/// under tests/fixtures.
pub(super) fn tree(scratch: &mut Scratch, relative: &str) -> PathBuf {
    if let Some(p) = scratch.trees.get(relative) {
        return p.clone();
    }
    let to = scratch.path().join(relative.replace('/', "_"));
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(relative),
        &to,
    );
    scratch.trees.insert(relative.to_string(), to.clone());
    to
}

pub(super) fn copy_tree(from: &Path, to: &Path) {
    if let Err(e) = std::fs::create_dir_all(to) {
        panic!("{}: {e}", to.display());
    }
    let entries: Vec<_> = std::fs::read_dir(from)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    for entry in entries {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else if let Err(e) = std::fs::copy(&path, &target) {
            panic!("{}: {e}", path.display());
        }
    }
}

/// Writes `content` at `relative` under `root` for the length of `f`, then puts the fixture's
/// own file back (also when `f` panics: the next input must start from the fixture).
pub(super) fn with_file(root: &Path, relative: &str, content: &[u8], f: impl FnOnce()) {
    struct Restore(PathBuf, Option<Vec<u8>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = match &self.1 {
                Some(o) => std::fs::write(&self.0, o),
                None => std::fs::remove_file(&self.0),
            };
        }
    }
    let path = root.join(relative);
    if !path.starts_with(root) || path.is_dir() {
        return;
    }
    let _restore = Restore(path.clone(), std::fs::read(&path).ok());
    if std::fs::write(&path, content).is_ok() {
        f();
    }
}

/// Every file of every board fixture, as `board/path\0content`.
pub(super) fn sysfs_seeds() -> Vec<Vec<u8>> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<Vec<u8>>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, base, out);
            } else if let (Ok(rel), Ok(content)) = (p.strip_prefix(base), std::fs::read(&p)) {
                out.push(with_header(&rel.to_string_lossy(), &content));
            }
        }
    }
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boards");
    let mut seeds = Vec::new();
    walk(&base, &base, &mut seeds);
    seeds
}

pub(super) fn run_sysfs(scratch: &mut Scratch, bytes: &[u8]) {
    use crate::collect::telemetry::{cpu, sysfs, Reader, Sample};
    let Some((name, content)) = split_header(bytes) else {
        return;
    };
    let Some((board, relative)) = name.split_once('/') else {
        return;
    };
    // Byte mutations reach the header too: only a board that exists is used.
    let known = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boards");
    if board.is_empty()
        || relative.is_empty()
        || board.contains(['/', '\\'])
        || !known.join(board).is_dir()
        || relative.split('/').any(|c| c.len() > 200 || c == "..")
    {
        return;
    }
    let root = tree(scratch, &format!("boards/{board}"));
    // The file's parsers on the content alone, then every reader over the tree.
    let text = String::from_utf8_lossy(content);
    let _ = crate::collect::proc::parse_meminfo(&text);
    let _ = crate::collect::proc::parse_stat_ticks(&text);
    let _ = crate::collect::proc::parse_stat_state(&text);
    let _ = crate::collect::proc::parse_status_memory(&text);
    let _ = cpu::parse_proc_stat(&text);
    let _ = cpu::parse_cpu_ids(&text);
    let _ = sysfs::parse_nvmap(&text);
    let _ = sysfs::jetpack(&text);
    let _ = sysfs::parse_throttled(&text);
    with_file(&root, relative, content, || {
        let mut readers: Vec<Box<dyn Reader>> = vec![
            Box::new(cpu::CpuReader::new(&root)),
            Box::new(cpu::MemoryReader::new(&root)),
            Box::new(sysfs::ThermalReader::new(&root)),
            Box::new(sysfs::JetsonGpuReader::new(&root)),
            Box::new(sysfs::Ina3221Reader::new(&root)),
            Box::new(sysfs::AmdGpuReader::new(&root)),
            Box::new(sysfs::RaplReader::new(&root)),
        ];
        for t_s in [0.0, 0.5] {
            let mut sample = Sample {
                t_s,
                ..Sample::default()
            };
            for r in &mut readers {
                let _ = r.probe();
                r.read(&mut sample);
            }
            let _ = crate::collect::telemetry::csv_row(
                &crate::collect::telemetry::csv_columns(std::slice::from_ref(&sample)),
                &sample,
            );
        }
        let _ = crate::collect::device::fingerprint(&root);
    });
}

/// `.npy` tensors of each kind a model takes, written by edgeprof's own encoder.
fn npy_seeds() -> Vec<Vec<u8>> {
    use tract_onnx::pb::tensor_proto::DataType as D;
    [
        (D::Float, vec![2, 3]),
        (D::Int64, vec![]),
        (D::Bool, vec![4]),
        (D::Float16, vec![1, 2, 2]),
        (D::Uint8, vec![3, 1]),
    ]
    .into_iter()
    .filter_map(|(elem, shape)| {
        let n: usize = shape.iter().product();
        crate::models::npy::encode(elem as i32, &shape, &vec![1.0; n]).ok()
    })
    .collect()
}

pub(super) fn run_npy(_: &mut Scratch, bytes: &[u8]) {
    if let Ok(t) = crate::models::npy::read(bytes, "fuzz.npy") {
        let _ = crate::models::npy::encode(t.elem, &t.shape, &t.values);
    }
}

//! The stored-record targets: a results directory's files (also replaced by a FIFO, a link or
//! a directory, as a damaged or tampered directory holds them), the cost-model database, a
//! device's history of clean runs, and
//! ONNX files given by path (a model named `*.onnx` that is a FIFO, a link to `/dev/zero`, a
//! directory).

use super::*;

pub(super) const RESULT_FILES: [&str; 4] = [
    crate::results::MANIFEST,
    crate::results::RUNS,
    crate::results::SAMPLES,
    crate::results::TELEMETRY,
];

pub(super) fn results_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for dir in ["results/small", "results/default"] {
        for f in RESULT_FILES {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(dir)
                .join(f);
            if let Ok(b) = std::fs::read(path) {
                seeds.push(with_header(f, &b));
            }
        }
    }
    seeds
}

/// What may stand in a results directory in place of a file: a FIFO (a reader that opens it
/// waits for a writer for ever), a link to an endless device, a link out of the directory, a
/// directory.
pub(super) const FILE_KINDS: &[&str] = &["fifo", "zero", "link", "dir"];

/// A results file's mutation; one input in ten puts something else in the file's place
/// (`runs.jsonl|fifo`).
pub(super) fn mutate_results(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mutated = mutate_after_header(rng, seeds);
    if !rng.random_bool(0.1) {
        return mutated;
    }
    match split_header(&mutated) {
        Some((name, content)) => with_header(&format!("{name}|{}", pick(rng, FILE_KINDS)), content),
        None => mutated,
    }
}

/// Puts a `kind` (see [`FILE_KINDS`]) at `relative` under `root` for the length of `f`, then
/// the fixture's own file back.
pub(super) fn with_special(
    root: &Path,
    relative: &str,
    kind: &str,
    content: &[u8],
    f: impl FnOnce(),
) {
    let path = root.join(relative);
    if !path.starts_with(root) || path.is_dir() {
        return;
    }
    struct Restore(PathBuf, Option<Vec<u8>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0).or_else(|_| std::fs::remove_dir_all(&self.0));
            if let Some(o) = &self.1 {
                let _ = std::fs::write(&self.0, o);
            }
        }
    }
    let _restore = Restore(path.clone(), std::fs::read(&path).ok());
    let _ = std::fs::remove_file(&path);
    let outside = root.with_extension("outside");
    let made = match kind {
        "fifo" => {
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).map_err(std::io::Error::from)
        }
        "zero" => std::os::unix::fs::symlink("/dev/zero", &path),
        "link" => std::fs::write(&outside, content)
            .and_then(|_| std::os::unix::fs::symlink(&outside, &path)),
        _ => std::fs::create_dir(&path),
    };
    if made.is_ok() {
        f();
    }
    // A write through the link would have changed the file outside the directory.
    if kind == "link" {
        let after = std::fs::read(&outside).unwrap_or_default();
        let _ = std::fs::remove_file(&outside);
        assert!(
            after == content,
            "{relative}: a file outside the results directory was written through a link"
        );
    }
}

pub(super) fn run_results(scratch: &mut Scratch, bytes: &[u8]) {
    let Some((name, content)) = split_header(bytes) else {
        return;
    };
    let (name, kind) = match name.split_once('|') {
        Some((n, k)) => (n.to_string(), Some(k.to_string())),
        None => (name, None),
    };
    if !RESULT_FILES.contains(&name.as_str()) {
        return;
    }
    let dir = tree(scratch, "results/small");
    let read = || {
        if let Ok(stored) = crate::results::load(&dir) {
            let rows = crate::results::summary::rows(&stored.manifest, &stored.runs);
            let _ = crate::results::summary::to_csv(&rows);
            let checks = crate::results::summary::OutputChecks::default();
            let _ = crate::results::summary::to_json(&stored.manifest, &rows, &checks);
            let _ = crate::results::summary::to_markdown(&stored.manifest, &rows, &checks);
            let (programs, _) = crate::roofline::programs_from_results(&stored, &[]);
            place(&programs, &crate::roofline::test_ceilings());
        }
        // What `edgeprof runs` reads, and what a resume opens for appending.
        let _ = crate::results::listing::describe(&dir);
        if let Ok(mut writer) = crate::results::Writer::open(&dir) {
            let _ = writer.samples("fuzz", 1, &[Default::default()]);
        }
    };
    // The sample appended above (and the files a writer creates) go again after each input:
    // the tree every input starts from stays the fixture's, and a campaign does not slow down
    // as the files grow.
    let lengths: Vec<(PathBuf, Option<u64>)> = RESULT_FILES
        .iter()
        .map(|f| {
            let path = dir.join(f);
            let len = std::fs::symlink_metadata(&path)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            (path, len)
        })
        .collect();
    match kind {
        Some(kind) if FILE_KINDS.contains(&kind.as_str()) => {
            with_special(&dir, &name, &kind, content, read)
        }
        Some(_) => {}
        None => with_file(&dir, &name, content, read),
    }
    for (path, len) in lengths {
        let _ = match len {
            Some(len) => std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(len)),
            None => std::fs::remove_file(&path),
        };
    }
}

/// Profiles of small models (and probes) from the stored tract database: the whole set, and
/// each model's profiles alone.
pub(super) fn costmodel_seeds() -> Vec<Vec<u8>> {
    const SMALL: &[&str] = &[
        "mobilenet_v3_small",
        "probe-1",
        "probe-2",
        "shufflenet_v2_x0_5",
    ];
    let text = text_fixture("costmodel/tract-2core-x86.jsonl");
    let of = |model: &str| -> Vec<&str> {
        text.lines()
            .filter(|l| l.contains(&format!("\"model\":\"{model}\"")))
            .collect()
    };
    let mut seeds: Vec<Vec<u8>> = SMALL
        .iter()
        .map(|m| (of(m).join("\n") + "\n").into_bytes())
        .collect();
    let all: Vec<&str> = SMALL.iter().flat_map(|m| of(m)).collect();
    seeds.push((all.join("\n") + "\n").into_bytes());
    seeds.retain(|s| s.len() > 1);
    seeds
}

/// A JSON database with one to four of its numbers made extreme (every field may be reached).
pub(super) fn extreme_numbers(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = pick(rng, seeds).clone();
    for _ in 0..rng.random_range(1..=4) {
        let fields = json_numbers(&data);
        if fields.is_empty() {
            break;
        }
        let r = pick(rng, &fields).clone();
        data.splice(r, pick(rng, EXTREME_JSON).bytes());
    }
    data
}

/// Opens a database, fits a model per engine and thread count and predicts every profile: an
/// error or a skipped line is fine, a panic or a prediction that is not a finite, non-negative
/// number of milliseconds is the bug.
pub(super) fn run_costmodel(scratch: &mut Scratch, bytes: &[u8]) {
    use crate::tune::costmodel::{CostModel, Db};
    let path = scratch.path().join("costmodel.jsonl");
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    let Ok(db) = Db::open(&path) else {
        return;
    };
    let profiles = db.latest();
    let kinds: std::collections::BTreeSet<(&str, usize)> = profiles
        .iter()
        .map(|p| (p.engine.as_str(), p.threads))
        .collect();
    for (engine, threads) in kinds {
        let Some(model) = CostModel::fit(&profiles, engine, threads) else {
            continue;
        };
        for p in profiles
            .iter()
            .filter(|p| p.engine == engine && p.threads == threads)
        {
            let (ms, _) = model.predict(&p.groups);
            assert!(
                ms.is_finite() && ms >= 0.0,
                "{} on {threads} thread(s) predicted as {ms} ms",
                p.model
            );
        }
    }
}

/// A mutated model behind a path: the first byte says what stands at the path (a regular file,
/// or one of [`FILE_KINDS`]), the rest is the model.
pub(super) fn mutate_model_path(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let kind = if rng.random_bool(0.5) {
        0
    } else {
        rng.random_range(1..=FILE_KINDS.len() as u8)
    };
    let mut out = vec![kind];
    out.extend(mutate_onnx(rng, seeds));
    out
}

/// Reads a model by its path as `models info`, the cost model and `bench` do: a path that is not
/// a regular file is refused at once (a hang past the harness's limit is a failure), a file is
/// read no further than an ONNX file can be.
pub(super) fn run_model_path(scratch: &mut Scratch, bytes: &[u8]) {
    let Some((&kind, model)) = bytes.split_first() else {
        return;
    };
    let dir = scratch.path().join("models");
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let read = || {
        let path = dir.join("model.onnx");
        let _ = crate::models::onnx_graph::analyse_file(&path, &[], None);
        let _ = crate::models::onnx_read::read_file(&path, Default::default());
        let source = crate::engines::tract::ModelSource::OnnxFile(&path);
        let _ = crate::engines::tract::TractSession::load(source, Some(&[1, 3, 32, 32]), 1);
    };
    match FILE_KINDS.get(usize::from(kind).wrapping_sub(1)) {
        Some(special) => with_special(&dir, "model.onnx", special, model, read),
        None => with_file(&dir, "model.onnx", model, read),
    }
}

pub(super) fn model_path_target() -> Target {
    Target {
        name: "model-paths",
        seeds: onnx_seeds,
        dictionary: &[],
        structured: Some(mutate_model_path),
        run: run_model_path,
        short: 200,
    }
}

/// A device's history of clean runs: three conditions' latest medians.
pub(super) fn history_seeds() -> Vec<Vec<u8>> {
    let entry = |median: f64, low: f64, high: f64| {
        serde_json::json!({
            "median_ms": median,
            "interval_ms": [low, high],
            "written": "2026-12-03T10:01:00Z",
            "results": "results/20261203T100100Z-x",
        })
    };
    let history = serde_json::json!({
        "a": entry(1.0, 0.9, 1.1),
        "b": entry(2.5, 2.4, 2.6),
        "c": entry(0.05, 0.049, 0.051),
    });
    vec![history.to_string().into_bytes()]
}

/// Opens a history and compares a clean run of 1 ms with each of its entries: a drift whose
/// ratio, or the percentage its reason opens with, is not a finite number is the bug.
pub(super) fn run_history(scratch: &mut Scratch, bytes: &[u8]) {
    use crate::results::history::History;
    let path = scratch.path().join("history.json");
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    let (history, _) = History::open(path);
    let times = vec![vec![1.0, 1.01, 0.99, 1.0, 1.02]];
    let mut stats = crate::stats::run_stats(
        10.0,
        Some(1.0),
        &[],
        &times,
        1,
        crate::stats::Outliers::Keep,
    );
    if let Some(s) = &mut stats {
        s.median_interval_ms = Some((0.98, 1.02));
    }
    let record = crate::results::RunRecord {
        stats,
        ..crate::results::RunRecord::bare(crate::protocol::Condition::new(
            "tract",
            crate::config::ModelRef::Zoo("lenet".into()),
            crate::models::InputShape::default(),
            1,
            1,
            crate::config::Device::Cpu,
        ))
    };
    for key in ["a", "b", "c"] {
        if let Some(drift) = history.against(key, &record) {
            let reason = drift.reason();
            // `14 % slower than …`: the figure it opens with is a number.
            let figure = reason.split(' ').next().and_then(|f| f.parse::<f64>().ok());
            assert!(
                drift.ratio.is_finite() && figure.is_some_and(f64::is_finite),
                "{key}: {reason}"
            );
        }
    }
}

pub(super) fn history_target() -> Target {
    Target {
        name: "history",
        seeds: history_seeds,
        dictionary: &[
            "\"median_ms\":",
            "\"interval_ms\":",
            "5e-324",
            "-0.0",
            "1e308",
        ],
        structured: Some(extreme_numbers),
        run: run_history,
        short: 2_000,
    }
}

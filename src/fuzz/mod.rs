//! In-process fuzzing of every parser edgeprof has: each one is fed mutated copies of its fixtures
//! (bit flips, truncation, duplicated and deleted ranges and lines, huge, NaN, infinite and
//! negative numbers, invalid UTF-8, very long lines, pieces of other fixtures), and a panic is a
//! failure. Errors and warnings are fine; so is rejecting everything: only panics count.
//!
//! The mutations are a seeded loop on stable Rust (cargo-fuzz needs nightly): input `i` of a
//! target comes from one 64-bit seed, so any failure is reproduced from the saved input (under
//! target/fuzz-failures) with `EDGEPROF_FUZZ_REPLAY=FILE EDGEPROF_FUZZ_TARGET=NAME cargo test
//! --lib fuzz::replay -- --ignored --nocapture`.
//!
//! A short run of every target is part of `cargo test`; `scripts/fuzz.sh` runs the long campaign
//! (`EDGEPROF_FUZZ_COUNT` inputs per target, a million by default) in an optimised build with
//! overflow checks on.

mod mutate;
mod onnx;
mod stores;
mod targets;

use crate::engines::tract::{contained, take_last_panic};
use mutate::*;
use onnx::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use stores::*;
use targets::*;

/// Largest input a mutation may produce: big enough for long lines and many duplicated lines,
/// small enough that a million inputs take minutes.
const MAX_INPUT: usize = 1 << 20;

/// Per-thread state a target may need: a scratch directory, fixture trees copied into it.
pub struct Scratch {
    dir: tempfile::TempDir,
    /// Fixture trees already copied under `dir`, by their path under tests/fixtures.
    trees: BTreeMap<String, PathBuf>,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("cannot create a scratch directory: {e}"),
        };
        Scratch {
            dir,
            trees: BTreeMap::new(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A structure-aware mutation: seeds in, a new input out.
type Structured = fn(&mut ChaCha8Rng, &[Vec<u8>]) -> Vec<u8>;

/// One parser under test.
pub struct Target {
    pub name: &'static str,
    /// Well-formed inputs the mutations start from.
    seeds: fn() -> Vec<Vec<u8>>,
    /// Words a mutation may insert (field names, keys, units).
    dictionary: &'static [&'static str],
    /// A structure-aware mutation used instead of the byte mutations part of the time.
    structured: Option<Structured>,
    /// Feeds one input to the parser.
    run: fn(&mut Scratch, &[u8]),
    /// Inputs of the short run inside `cargo test` (debug build, two cores, with the rest of
    /// the tests).
    short: u64,
}

/// A failing input.
#[derive(Debug)]
pub struct Failure {
    pub target: &'static str,
    pub index: u64,
    pub seed: u64,
    pub size: usize,
    pub message: String,
    pub saved: Option<PathBuf>,
}

/// What a run of one target did.
#[derive(Debug, Default)]
pub struct Report {
    pub inputs: u64,
    pub failures: Vec<Failure>,
    /// Panics contained by the code under test (tract's), by message and place, with counts.
    pub contained: BTreeMap<String, u64>,
    pub elapsed: Duration,
    /// The slowest input: its time and seed.
    pub slowest: (Duration, u64),
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The seed of input `index` of a target in a run started from `base`.
pub fn input_seed(base: u64, target: &str, index: u64) -> u64 {
    splitmix64(base ^ name_hash(target) ^ splitmix64(index))
}

/// The input of one seed for a target.
fn input_for(target: &Target, seeds: &[Vec<u8>], seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    match target.structured {
        Some(structured) if rng.random_bool(0.75) => structured(&mut rng, seeds),
        _ => mutate_bytes(&mut rng, seeds, target.dictionary),
    }
}

/// Where failing inputs are saved.
fn failures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures")
}

/// Runs `count` inputs of `target` from `base` on `threads` threads.
pub fn run_target(target: &Target, count: u64, base: u64, threads: usize) -> Report {
    let seeds = (target.seeds)();
    assert!(!seeds.is_empty(), "{}: no seed inputs", target.name);
    let threads = threads.max(1) as u64;
    let start = Instant::now();
    // What each thread runs now (seed, since when), for the watchdog.
    let running: Vec<std::sync::Mutex<Option<(u64, Instant)>>> =
        (0..threads).map(|_| std::sync::Mutex::new(None)).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    let reports: Vec<Report> = std::thread::scope(|scope| {
        let (running, done, seeds) = (&running, &done, &seeds);
        // A hang never reaches the report: the watchdog names (and saves) an input that has
        // run past the limit while it still runs.
        scope.spawn(move || {
            let mut named = std::collections::BTreeSet::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                for slot in running {
                    let now = match slot.lock() {
                        Ok(s) => *s,
                        Err(p) => *p.into_inner(),
                    };
                    if let Some((seed, since)) = now {
                        // A thread cannot be stopped: an input stuck for ten times the limit
                        // ends the run, so that an unattended campaign does not wait for ever.
                        if since.elapsed() > 10 * slow_limit() {
                            errln!(
                                "fuzz {}: input with seed {seed:016x} is stuck (over {:.0} s); stopping the run",
                                target.name,
                                since.elapsed().as_secs_f64()
                            );
                            std::process::exit(3);
                        }
                        if since.elapsed() > slow_limit() && named.insert(seed) {
                            let input = input_for(target, seeds, seed);
                            let file = save_failure(target.name, seed, &input);
                            errln!(
                                "fuzz {}: input with seed {seed:016x} ({} bytes) still runs after {:.0} s{}",
                                target.name,
                                input.len(),
                                since.elapsed().as_secs_f64(),
                                file.map(|f| format!("; saved as {}", f.display()))
                                    .unwrap_or_default()
                            );
                        }
                    }
                }
            }
        });
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut scratch = Scratch::new();
                    let mut report = Report::default();
                    let mut index = t;
                    let slot = &running[t as usize];
                    let set = |now: Option<(u64, Instant)>| match slot.lock() {
                        Ok(mut s) => *s = now,
                        Err(p) => *p.into_inner() = now,
                    };
                    while index < count {
                        let seed = input_seed(base, target.name, index);
                        set(Some((seed, Instant::now())));
                        run_one(target, seeds, base, index, &mut scratch, &mut report);
                        index += threads;
                    }
                    // A thread that has finished runs nothing: its last input must not look
                    // stuck while the others go on.
                    set(None);
                    report
                })
            })
            .collect();
        let reports = handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(_) => panic!("{}: a fuzz thread died", target.name),
            })
            .collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reports
    });
    let mut total = Report {
        elapsed: start.elapsed(),
        ..Report::default()
    };
    for r in reports {
        total.inputs += r.inputs;
        total.failures.extend(r.failures);
        for (k, v) in r.contained {
            *total.contained.entry(k).or_default() += v;
        }
        if r.slowest.0 > total.slowest.0 {
            total.slowest = r.slowest;
        }
    }
    total.failures.sort_by_key(|f| f.index);
    total
}

/// Saves a failing input for replay: target/fuzz-failures/TARGET-SEED.bin.
fn save_failure(target: &str, seed: u64, input: &[u8]) -> Option<PathBuf> {
    let dir = failures_dir();
    let file = dir.join(format!("{target}-{seed:016x}.bin"));
    std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(&file, input))
        .ok()
        .map(|_| file)
}

/// How long one input may take before it counts as a failure: `EDGEPROF_FUZZ_SLOW_S`, else 30 s
/// (the slowest inputs of a debug build take under a second).
fn slow_limit() -> Duration {
    static LIMIT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| Duration::from_secs(env_number("EDGEPROF_FUZZ_SLOW_S").unwrap_or(30)))
}

/// Whether each input is named (and saved) before it runs: `EDGEPROF_FUZZ_TRACE=1`.
fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("EDGEPROF_FUZZ_TRACE").is_some_and(|v| v == "1"))
}

fn run_one(
    target: &Target,
    seeds: &[Vec<u8>],
    base: u64,
    index: u64,
    scratch: &mut Scratch,
    report: &mut Report,
) {
    let seed = input_seed(base, target.name, index);
    let input = input_for(target, seeds, seed);
    if trace() {
        // An abort (a panic that cannot unwind, an allocation failure) ends the process without
        // a report: the last input named here is the culprit, saved for replay.
        let dir = failures_dir();
        let file = dir.join(format!("{}-last-{}.bin", target.name, index % 64));
        let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&file, &input));
        errln!(
            "{} input {index} seed {seed:016x}: {}",
            target.name,
            file.display()
        );
    }
    let _ = take_last_panic();
    let began = Instant::now();
    let outcome = contained(|| (target.run)(scratch, &input));
    let took = began.elapsed();
    report.inputs += 1;
    if took > report.slowest.0 {
        report.slowest = (took, seed);
    }
    let place = take_last_panic();
    // An input that takes this long is a hang in the making (a loop over an absurd range).
    let outcome = match outcome {
        Ok(()) if took > slow_limit() => Err(format!(
            "took {:.1} s (limit {:.0} s, EDGEPROF_FUZZ_SLOW_S)",
            took.as_secs_f64(),
            slow_limit().as_secs_f64()
        )),
        other => other.map_err(|e| e.0),
    };
    match outcome {
        Ok(()) => {
            // A panic the code under test contained itself (tract's): counted by place.
            if let Some(place) = place {
                *report.contained.entry(short_place(&place)).or_default() += 1;
            }
        }
        Err(message) => {
            let saved = save_failure(target.name, seed, &input);
            report.failures.push(Failure {
                target: target.name,
                index,
                seed,
                size: input.len(),
                message: place.unwrap_or(message),
                saved,
            });
        }
    }
}

/// A contained panic's message cut to its place and first words, so that one site counts once.
fn short_place(text: &str) -> String {
    let (message, place) = match text.rfind(" at ") {
        Some(i) => (&text[..i], &text[i + 4..]),
        None => (text, ""),
    };
    let words: String = message.chars().take(60).collect();
    format!("{place}: {words}")
}

impl Report {
    /// A paragraph about the run.
    pub fn describe(&self, name: &str) -> String {
        let rate = self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9);
        let mut text = format!(
            "fuzz {name}: {} inputs in {:.1} s ({rate:.0}/s), {} panic(s); slowest input {:.1} ms (seed {:016x})",
            self.inputs,
            self.elapsed.as_secs_f64(),
            self.failures.len(),
            self.slowest.0.as_secs_f64() * 1e3,
            self.slowest.1
        );
        for (place, n) in &self.contained {
            text.push_str(&format!("\n  contained ({n}×): {place}"));
        }
        for f in self.failures.iter().take(10) {
            text.push_str(&format!(
                "\n  PANIC {} input {} (seed {:016x}, {} bytes{}): {}",
                f.target,
                f.index,
                f.seed,
                f.size,
                f.saved
                    .as_ref()
                    .map(|p| format!(", saved as {}", p.display()))
                    .unwrap_or_default(),
                f.message.chars().take(300).collect::<String>()
            ));
        }
        text
    }
}

// ---------------------------------------------------------------------------------------------
// The runs.

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn target_named(name: &str) -> Target {
    match targets().into_iter().find(|t| t.name == name) {
        Some(t) => t,
        None => panic!("no fuzz target {name}"),
    }
}

/// The short run of one target: its `short` count, from a fixed seed, on one thread.
fn short_run(name: &str) {
    let target = target_named(name);
    let base = env_number("EDGEPROF_FUZZ_SEED").unwrap_or(0x5eed);
    let report = run_target(&target, target.short, base, 1);
    errln!("{}", report.describe(name));
    assert!(report.failures.is_empty(), "{}", report.describe(name));
}

#[test]
fn short_tegrastats() {
    short_run("tegrastats");
}

#[test]
fn short_ncu() {
    short_run("ncu");
}

#[test]
fn short_nvprof_metrics() {
    short_run("nvprof-metrics");
}

#[test]
fn short_nvprof_summary() {
    short_run("nvprof-summary");
}

#[test]
fn short_ert_json() {
    short_run("ert-json");
}

#[test]
fn short_ert_sweep() {
    short_run("ert-sweep");
}

#[test]
fn short_config() {
    short_run("config");
}

#[test]
fn short_history() {
    short_run("history");
}

#[test]
fn short_model_paths() {
    short_run("model-paths");
}

#[test]
fn short_costmodel_db() {
    short_run("costmodel-db");
}

#[test]
fn short_protocol() {
    short_run("protocol");
}

#[test]
fn short_npy() {
    short_run("npy");
}

#[test]
fn short_results() {
    short_run("results");
}

#[test]
fn short_sysfs() {
    short_run("sysfs");
}

#[test]
fn short_ceilings() {
    short_run("ceilings");
}

#[test]
fn short_onnx() {
    short_run("onnx");
}

#[test]
fn short_onnx_reader() {
    short_run("onnx-reader");
}

/// The harness itself: a parser that panics on some inputs is reported with the seed and the
/// saved input, which replays to the same panic; contained panics are counted, not failures.
#[test]
fn the_harness_reports_and_saves_panicking_inputs() {
    fn fragile(_: &mut Scratch, bytes: &[u8]) {
        if bytes.contains(&0xff) {
            let empty: Vec<u8> = Vec::new();
            let _ = empty[bytes.len()];
        }
        if bytes.contains(&b'!') {
            let _ = contained(|| panic!("tolerated"));
        }
    }
    let target = Target {
        name: "harness-self-test",
        seeds: || vec![b"hello world!\n".to_vec(), b"1,2,3\n".to_vec()],
        dictionary: &["!"],
        structured: None,
        run: fragile,
        short: 200,
    };
    let report = run_target(&target, target.short, 3, 2);
    assert_eq!(report.inputs, 200);
    assert!(
        !report.failures.is_empty(),
        "{}",
        report.describe(target.name)
    );
    assert!(report.contained.keys().any(|k| k.contains("tolerated")));
    let first = &report.failures[0];
    assert!(
        first.message.contains("index out of bounds"),
        "{}",
        first.message
    );
    assert_eq!(first.seed, input_seed(3, target.name, first.index));
    let saved = match &first.saved {
        Some(p) => p.clone(),
        None => panic!("the failing input was not saved"),
    };
    let bytes = std::fs::read(&saved).unwrap_or_default();
    assert_eq!(bytes.len(), first.size);
    assert_eq!(bytes, input_for(&target, &(target.seeds)(), first.seed));
    assert!(contained(|| fragile(&mut Scratch::new(), &bytes)).is_err());
    for f in &report.failures {
        if let Some(p) = &f.saved {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The long campaign: `EDGEPROF_FUZZ_COUNT` inputs (default a million) for every target (or
/// those `EDGEPROF_FUZZ_TARGETS` lists, comma-separated), on every core.
#[test]
#[ignore]
fn campaign() {
    let count = env_number("EDGEPROF_FUZZ_COUNT").unwrap_or(1_000_000);
    let base = env_number("EDGEPROF_FUZZ_SEED").unwrap_or(1);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wanted: Option<Vec<String>> = std::env::var("EDGEPROF_FUZZ_TARGETS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let mut failures = 0;
    for target in targets() {
        if wanted
            .as_ref()
            .is_some_and(|w| !w.iter().any(|n| n == target.name))
        {
            continue;
        }
        let report = run_target(&target, count, base, threads);
        errln!("{}", report.describe(target.name));
        failures += report.failures.len();
    }
    assert_eq!(failures, 0, "the campaign found panics (above)");
}

/// Runs one saved input again: `EDGEPROF_FUZZ_REPLAY=FILE EDGEPROF_FUZZ_TARGET=NAME`.
#[test]
#[ignore]
fn replay() {
    let (Ok(file), Ok(name)) = (
        std::env::var("EDGEPROF_FUZZ_REPLAY"),
        std::env::var("EDGEPROF_FUZZ_TARGET"),
    ) else {
        panic!("set EDGEPROF_FUZZ_REPLAY=FILE and EDGEPROF_FUZZ_TARGET=NAME");
    };
    let input = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) => panic!("{file}: {e}"),
    };
    let target = target_named(&name);
    let mut scratch = Scratch::new();
    (target.run)(&mut scratch, &input);
    errln!("{name}: {file} ran without a panic");
}

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

use crate::engines::tract::{contained, take_last_panic};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// Numbers that break parsers: huge, tiny, negative, not a number, past every integer type.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1e100",
    "-1e100",
    "1e308",
    "1e309",
    "-1e309",
    "1e-320",
    "NaN",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "-Infinity",
    "4294967295",
    "4294967296",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "0.0000000000000000000000001",
    "1e-7",
    "255",
    "256",
    "65536",
    "0x10",
    "1_000",
    "+5",
    "..",
    "1e",
    "-",
];

/// Bytes that mean something to one parser or another.
const BYTES: &[u8] = &[
    0, 0xff, b'\n', b'\r', b',', b'"', b'\'', b'{', b'}', b'[', b']', b'(', b')', b'-', b'+', b'.',
    b'e', b'%', b'@', b'/', b':', b'=', b'#', b' ', b'\t', b'\\', 0x80, 0xc3, 0xfe, b'0', b'9',
];

/// Sequences that are not UTF-8.
const INVALID_UTF8: &[&[u8]] = &[
    &[0xff],
    &[0xc3, 0x28],
    &[0xe2, 0x82],
    &[0xed, 0xa0, 0x80],
    &[0xf0, 0x90, 0x80],
    &[0xc0, 0xaf],
];

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

/// A random range of `data` at most `max` long (empty for empty data).
fn range(rng: &mut ChaCha8Rng, data: &[u8], max: usize) -> std::ops::Range<usize> {
    if data.is_empty() {
        return 0..0;
    }
    let start = rng.random_range(0..data.len());
    let len = rng.random_range(1..=max.min(data.len() - start).max(1));
    start..(start + len).min(data.len())
}

/// Line boundaries of `data`: (start, end including the line end).
fn lines(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in data.iter().enumerate() {
        if *b == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < data.len() {
        out.push((start, data.len()));
    }
    out
}

fn is_number_byte(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')
}

/// One byte-level mutation of `data` in place.
fn mutate_once(rng: &mut ChaCha8Rng, data: &mut Vec<u8>, seeds: &[Vec<u8>], dictionary: &[&str]) {
    let len = data.len();
    let at = |rng: &mut ChaCha8Rng| rng.random_range(0..=len);
    match rng.random_range(0..16) {
        // A flipped bit.
        0 if len > 0 => {
            let i = rng.random_range(0..len);
            data[i] ^= 1 << rng.random_range(0..8);
        }
        // A byte that means something.
        1 if len > 0 => {
            let i = rng.random_range(0..len);
            data[i] = *pick(rng, BYTES);
        }
        // A range deleted.
        2 => {
            let r = range(rng, data, 64);
            data.drain(r);
        }
        // Random bytes inserted.
        3 => {
            let n = rng.random_range(1..=16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            let i = at(rng);
            data.splice(i..i, bytes);
        }
        // A range duplicated somewhere else.
        4 => {
            let r = range(rng, data, 512);
            let copy = data[r].to_vec();
            let i = at(rng);
            data.splice(i..i, copy);
        }
        // Truncated.
        5 => {
            let i = at(rng);
            data.truncate(i);
        }
        // A number replaced by a troublesome one.
        6 | 7 => {
            let from = if len > 0 { rng.random_range(0..len) } else { 0 };
            let digit = data[from..]
                .iter()
                .position(u8::is_ascii_digit)
                .map(|p| p + from);
            let number = pick(rng, NUMBERS).as_bytes().to_vec();
            match digit {
                Some(d) => {
                    let mut start = d;
                    while start > 0 && is_number_byte(data[start - 1]) {
                        start -= 1;
                    }
                    let mut end = d;
                    while end < data.len() && is_number_byte(data[end]) {
                        end += 1;
                    }
                    data.splice(start..end, number);
                }
                None => {
                    let i = at(rng);
                    data.splice(i..i, number);
                }
            }
        }
        // Invalid UTF-8.
        8 => {
            let i = at(rng);
            data.splice(i..i, pick(rng, INVALID_UTF8).iter().copied());
        }
        // A very long line: a piece repeated thousands of times.
        9 => {
            let r = range(rng, data, 32);
            let piece = if r.is_empty() {
                b"x".to_vec()
            } else {
                data[r].iter().copied().filter(|b| *b != b'\n').collect()
            };
            let piece = if piece.is_empty() {
                b"7".to_vec()
            } else {
                piece
            };
            let total = if rng.random_bool(0.1) {
                rng.random_range(64_000..400_000)
            } else {
                rng.random_range(1_000..16_000)
            };
            let long: Vec<u8> = piece.iter().copied().cycle().take(total).collect();
            let i = at(rng);
            data.splice(i..i, long);
        }
        // A line duplicated, many times over at times (a big log or config).
        10 => {
            let l = lines(data);
            if !l.is_empty() {
                let (s, e) = *pick(rng, &l);
                let times = match rng.random_range(0..20) {
                    0 => rng.random_range(1_000..5_000),
                    1..=3 => rng.random_range(10..200),
                    _ => 1,
                };
                let mut line = data[s..e].to_vec();
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                let copies: Vec<u8> = line
                    .iter()
                    .copied()
                    .cycle()
                    .take(line.len() * times)
                    .collect();
                data.splice(s..s, copies);
            }
        }
        // A line deleted.
        11 => {
            let l = lines(data);
            if !l.is_empty() {
                let (s, e) = *pick(rng, &l);
                data.drain(s..e);
            }
        }
        // Two lines swapped.
        12 => {
            let l = lines(data);
            if l.len() >= 2 {
                let a = rng.random_range(0..l.len() - 1);
                let b = rng.random_range(a + 1..l.len());
                let (a, b) = (l[a], l[b]);
                let mut out = data[..a.0].to_vec();
                out.extend_from_slice(&data[b.0..b.1]);
                out.extend_from_slice(&data[a.1..b.0]);
                out.extend_from_slice(&data[a.0..a.1]);
                out.extend_from_slice(&data[b.1..]);
                *data = out;
            }
        }
        // A piece of another fixture.
        13 => {
            let other = pick(rng, seeds);
            let r = range(rng, other, 256);
            let piece = other[r].to_vec();
            let i = at(rng);
            data.splice(i..i, piece);
        }
        // A word of the format.
        14 | 15 if !dictionary.is_empty() => {
            let word = pick(rng, dictionary).as_bytes().to_vec();
            if rng.random_bool(0.5) || len == 0 {
                let i = at(rng);
                data.splice(i..i, word);
            } else {
                let r = range(rng, data, 12);
                data.splice(r, word);
            }
        }
        _ => {
            let i = at(rng);
            data.insert(i.min(data.len()), *pick(rng, BYTES));
        }
    }
    data.truncate(MAX_INPUT);
}

/// Mutated bytes: one seed with 1 to 8 stacked mutations (mostly few).
fn mutate_bytes(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>], dictionary: &[&str]) -> Vec<u8> {
    let mut data = pick(rng, seeds).clone();
    let count = if rng.random_bool(0.6) {
        1
    } else {
        rng.random_range(2..=8)
    };
    for _ in 0..count {
        mutate_once(rng, &mut data, seeds, dictionary);
    }
    data
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
        other => other,
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
// Fixtures and targets.

fn fixture(relative: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative);
    match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn fixtures(relatives: &[&str]) -> Vec<Vec<u8>> {
    relatives.iter().map(|r| fixture(r)).collect()
}

fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// A fixture's text, read once per process.
fn text_fixture(relative: &'static str) -> String {
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
            structured: Some(mutate_after_header),
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
        onnx_target(),
    ]
}

/// Caches of a small board, for naming sweep levels.
fn caches() -> Vec<crate::collect::device::Cache> {
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
fn place(programs: &[crate::roofline::Program], ceilings: &crate::roofline::Ceilings) {
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

fn run_tegrastats(_: &mut Scratch, bytes: &[u8]) {
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
            Ok(())
        },
        |_, _| {},
    );
}

fn place_import(import: &crate::roofline::nvidia::Import) {
    if let Some(p) = crate::roofline::nvidia::program(import, "fuzz") {
        place(&[p], &crate::roofline::test_ceilings());
    }
}

fn run_ncu(_: &mut Scratch, bytes: &[u8]) {
    if let Ok(import) = crate::roofline::nvidia::parse_ncu(&text(bytes)) {
        place_import(&import);
    }
}

fn run_nvprof_metrics(_: &mut Scratch, bytes: &[u8]) {
    let summary = text_fixture("gpu-profilers/nvprof-nano-summary.csv");
    if let Ok(import) = crate::roofline::nvidia::parse_nvprof(&text(bytes), Some(&summary)) {
        place_import(&import);
    }
}

fn run_nvprof_summary(_: &mut Scratch, bytes: &[u8]) {
    let metrics = text_fixture("gpu-profilers/nvprof-nano-metrics.csv");
    if let Ok(import) = crate::roofline::nvidia::parse_nvprof(&metrics, Some(&text(bytes))) {
        place_import(&import);
    }
}

/// A program at a plain place, to put on imported ceilings.
fn program() -> crate::roofline::Program {
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

fn run_ert_json(_: &mut Scratch, bytes: &[u8]) {
    for caches in [Vec::new(), caches()] {
        if let Ok(i) = crate::roofline::ert::import(&text(bytes), None, &caches, "fuzz".into()) {
            assert_eq!(i.ceilings.check(), Ok(()), "an import passed bad ceilings");
            place(&[program()], &i.ceilings);
        }
    }
}

fn run_ert_sweep(_: &mut Scratch, bytes: &[u8]) {
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

fn run_ceilings(_: &mut Scratch, bytes: &[u8]) {
    if let Ok(stored) = crate::roofline::store::parse_file(&text(bytes)) {
        place(&[program()], &stored.ceilings);
    }
}

fn config_seeds() -> Vec<Vec<u8>> {
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

fn run_config(scratch: &mut Scratch, bytes: &[u8]) {
    let file = scratch.path().join("fuzz.toml");
    let _ = crate::config::parse(&text(bytes), &file);
}

fn protocol_seeds() -> Vec<Vec<u8>> {
    use crate::runner::protocol::WorkerMessage;
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

fn run_protocol(_: &mut Scratch, bytes: &[u8]) {
    let text = text(bytes);
    let mut collector = crate::runner::protocol::Collector::default();
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
        );
        if let Some(c) = &run.counters {
            let _ = c.derive();
        }
    }
    // The worker's own request, read from its stdin.
    let _ = serde_json::from_str::<crate::runner::protocol::WorkerRequest>(&text);
}

/// Inputs whose first part names what the rest is (a results file, a board file): mutations
/// change the rest and keep the name.
fn mutate_after_header(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let seed = pick(rng, seeds);
    let split = seed.iter().position(|b| *b == 0).map_or(0, |i| i + 1);
    let (header, body) = seed.split_at(split);
    let bodies: Vec<Vec<u8>> = vec![body.to_vec()];
    let mut out = header.to_vec();
    out.extend(mutate_bytes(rng, &bodies, &[]));
    out
}

/// `name\0content`: the name and the content of a header-carrying input.
fn split_header(bytes: &[u8]) -> Option<(String, &[u8])> {
    let i = bytes.iter().position(|b| *b == 0)?;
    let name = std::str::from_utf8(&bytes[..i]).ok()?.to_string();
    (!name.is_empty() && !name.contains("..") && !name.starts_with('/'))
        .then_some((name, &bytes[i + 1..]))
}

fn with_header(name: &str, content: &[u8]) -> Vec<u8> {
    let mut out = name.as_bytes().to_vec();
    out.push(0);
    out.extend_from_slice(content);
    out
}

const RESULT_FILES: [&str; 4] = [
    crate::results::MANIFEST,
    crate::results::RUNS,
    crate::results::SAMPLES,
    crate::results::TELEMETRY,
];

fn results_seeds() -> Vec<Vec<u8>> {
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

/// A copy of a fixture tree in the scratch directory (made once per thread), by its path
/// under tests/fixtures.
fn tree(scratch: &mut Scratch, relative: &str) -> PathBuf {
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

fn copy_tree(from: &Path, to: &Path) {
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
fn with_file(root: &Path, relative: &str, content: &[u8], f: impl FnOnce()) {
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

fn run_results(scratch: &mut Scratch, bytes: &[u8]) {
    let Some((name, content)) = split_header(bytes) else {
        return;
    };
    if !RESULT_FILES.contains(&name.as_str()) {
        return;
    }
    let dir = tree(scratch, "results/small");
    with_file(&dir, &name, content, || {
        if let Ok(stored) = crate::results::load(&dir) {
            let rows = crate::results::summary::rows(&stored.manifest, &stored.runs);
            let _ = crate::results::summary::to_csv(&rows);
            let _ = crate::results::summary::to_json(&stored.manifest, &rows, &[]);
            let _ = crate::results::summary::to_markdown(&stored.manifest, &rows, &[]);
            let (programs, _) = crate::roofline::programs_from_results(&stored, &[]);
            place(&programs, &crate::roofline::test_ceilings());
        }
    });
}

/// Every file of every board fixture, as `board/path\0content`.
fn sysfs_seeds() -> Vec<Vec<u8>> {
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

fn run_sysfs(scratch: &mut Scratch, bytes: &[u8]) {
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

// ONNX: tract loading, optimising and running mutated models, with its panics contained.

/// Small models to mutate: a hand-made graph of the operators whose attributes tract checks
/// least (pads, strides, kernel shapes, axes, shape tensors), and a small zoo export.
fn onnx_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![crate::models::onnx::encode(
        &crate::engines::tract::tests::tiny_graph(),
    )];
    let params = crate::models::zoo::ModelParams {
        height: 32,
        width: 32,
        num_classes: 4,
        ..crate::models::zoo::ModelParams::default()
    };
    if let Ok(model) = crate::models::zoo::build("shufflenet_v2_x0_5", &params) {
        seeds.push(crate::models::onnx::encode(&crate::models::onnx::to_onnx(
            &model, 1,
        )));
    }
    seeds
}

/// The seeds are sound models, so that mutations start from something tract runs.
#[test]
fn onnx_seeds_load_and_run() {
    use crate::engines::tract::TractSession;
    for (i, bytes) in onnx_seeds().iter().enumerate() {
        let session = match TractSession::load_bytes(bytes, "seed", None, 1) {
            Ok(s) => s,
            Err(e) => panic!("seed {i}: {e}"),
        };
        let outcome = session.make_input(1).and_then(|input| session.run(&input));
        match outcome {
            Ok((shape, values)) => {
                assert_eq!(shape.first(), Some(&1), "seed {i}");
                assert!(values.iter().all(|v| v.is_finite()), "seed {i}");
            }
            Err(e) => panic!("seed {i}: {e}"),
        }
    }
}

/// Integers that break shape arithmetic.
const ONNX_INTS: &[i64] = &[
    0,
    -1,
    -2,
    1,
    2,
    3,
    7,
    -7,
    64,
    1 << 20,
    i32::MAX as i64,
    i32::MIN as i64,
    i64::MAX,
    i64::MIN,
    -(1 << 40),
];

const ONNX_FLOATS: &[f32] = &[
    0.0,
    -1.0,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    1e30,
    -1e-30,
];

/// Operators a node may become.
const ONNX_OPS: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "Pad",
    "Reshape",
    "Transpose",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "Flatten",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Gemm",
    "MatMul",
    "Add",
    "Mul",
    "Div",
    "Relu",
    "Softmax",
    "BatchNormalization",
    "Resize",
    "Squeeze",
    "Unsqueeze",
    "ReduceMean",
    "Expand",
    "Tile",
    "DepthToSpace",
    "SpaceToDepth",
    "LRN",
    "Clip",
    "Identity",
];

/// Attribute names the operators above read.
const ONNX_ATTRIBUTES: &[&str] = &[
    "pads",
    "strides",
    "kernel_shape",
    "dilations",
    "group",
    "axis",
    "axes",
    "perm",
    "split",
    "blocksize",
    "keepdims",
    "auto_pad",
    "ceil_mode",
    "count_include_pad",
    "transA",
    "transB",
    "alpha",
    "beta",
    "epsilon",
    "output_padding",
    "output_shape",
    "size",
    "mode",
];

/// One structural change to a decoded model: an attribute's value, a node's operator or wiring,
/// an initializer's dimensions or data, the input's dimensions.
fn mutate_model(rng: &mut ChaCha8Rng, model: &mut tract_onnx::pb::ModelProto) {
    use tract_onnx::pb;
    let Some(graph) = model.graph.as_mut() else {
        return;
    };
    let int = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.8) {
            *pick(rng, ONNX_INTS)
        } else {
            rng.random_range(-10..40)
        }
    };
    match rng.random_range(0..12) {
        // An attribute value.
        0..=3 if !graph.node.is_empty() => {
            let n = rng.random_range(0..graph.node.len());
            let node = &mut graph.node[n];
            if node.attribute.is_empty() || rng.random_bool(0.2) {
                let name = pick(rng, ONNX_ATTRIBUTES).to_string();
                let values: Vec<i64> = (0..rng.random_range(0..6)).map(|_| int(rng)).collect();
                node.attribute.push(pb::AttributeProto {
                    name,
                    r#type: if values.len() == 1 {
                        pb::attribute_proto::AttributeType::Int as i32
                    } else {
                        pb::attribute_proto::AttributeType::Ints as i32
                    },
                    i: values.first().copied().unwrap_or(0),
                    ints: values,
                    ..Default::default()
                });
                return;
            }
            let a = rng.random_range(0..node.attribute.len());
            let attr = &mut node.attribute[a];
            match rng.random_range(0..6) {
                0 if !attr.ints.is_empty() => {
                    let i = rng.random_range(0..attr.ints.len());
                    attr.ints[i] = int(rng);
                }
                1 => {
                    if rng.random_bool(0.5) {
                        attr.ints.pop();
                    } else {
                        attr.ints.push(int(rng));
                    }
                }
                2 => attr.i = int(rng),
                3 => attr.f = *pick(rng, ONNX_FLOATS),
                4 => attr.r#type = rng.random_range(0..15),
                _ => {
                    node.attribute.remove(a);
                }
            }
        }
        // A node's operator.
        4 if !graph.node.is_empty() => {
            let n = rng.random_range(0..graph.node.len());
            graph.node[n].op_type = pick(rng, ONNX_OPS).to_string();
        }
        // A node's wiring: an input dropped, added, or pointed elsewhere.
        5 if !graph.node.is_empty() => {
            let names: Vec<String> = graph
                .node
                .iter()
                .flat_map(|n| n.output.iter().cloned())
                .chain(graph.initializer.iter().map(|t| t.name.clone()))
                .chain(std::iter::once("input".to_string()))
                .collect();
            let n = rng.random_range(0..graph.node.len());
            let node = &mut graph.node[n];
            match rng.random_range(0..3) {
                0 => {
                    node.input.pop();
                }
                1 => node.input.push(pick(rng, &names).clone()),
                _ if !node.input.is_empty() => {
                    let i = rng.random_range(0..node.input.len());
                    node.input[i] = pick(rng, &names).clone();
                }
                _ => {}
            }
        }
        // A node removed or duplicated.
        6 if !graph.node.is_empty() => {
            let n = rng.random_range(0..graph.node.len());
            if rng.random_bool(0.5) {
                graph.node.remove(n);
            } else {
                let copy = graph.node[n].clone();
                graph.node.insert(n, copy);
            }
        }
        // An initializer's dimensions.
        7 | 8 if !graph.initializer.is_empty() => {
            let t = rng.random_range(0..graph.initializer.len());
            let tensor = &mut graph.initializer[t];
            match rng.random_range(0..3) {
                0 if !tensor.dims.is_empty() => {
                    let i = rng.random_range(0..tensor.dims.len());
                    tensor.dims[i] = int(rng);
                }
                1 => {
                    tensor.dims.push(int(rng).clamp(-1, 8));
                }
                _ => {
                    tensor.dims.pop();
                }
            }
        }
        // An initializer's data: int64 values (shapes, pads, axes) or cut bytes.
        9 if !graph.initializer.is_empty() => {
            let t = rng.random_range(0..graph.initializer.len());
            let tensor = &mut graph.initializer[t];
            if tensor.data_type == pb::tensor_proto::DataType::Int64 as i32
                && tensor.raw_data.len() >= 8
            {
                let slots = tensor.raw_data.len() / 8;
                let i = rng.random_range(0..slots) * 8;
                tensor.raw_data[i..i + 8].copy_from_slice(&int(rng).to_le_bytes());
            } else if rng.random_bool(0.5) {
                let keep = rng.random_range(0..=tensor.raw_data.len());
                tensor.raw_data.truncate(keep);
            } else {
                tensor.data_type = rng.random_range(0..17);
            }
        }
        // The input's dimensions.
        10 => {
            use pb::tensor_shape_proto::dimension::Value;
            if let Some(shape) = graph
                .input
                .first_mut()
                .and_then(|i| i.r#type.as_mut())
                .and_then(|t| match t.value.as_mut() {
                    Some(pb::type_proto::Value::TensorType(t)) => t.shape.as_mut(),
                    _ => None,
                })
            {
                if !shape.dim.is_empty() {
                    let d = rng.random_range(0..shape.dim.len());
                    shape.dim[d].value = match rng.random_range(0..3) {
                        0 => Some(Value::DimParam("N".into())),
                        1 => None,
                        _ => Some(Value::DimValue(int(rng).clamp(-2, 4096))),
                    };
                }
            }
        }
        // The opset.
        _ => {
            if let Some(o) = model.opset_import.first_mut() {
                o.version = *pick(rng, &[1, 6, 9, 10, 11, 12, 13, 17, 18, 21, 99]);
            }
        }
    }
}

/// A structurally mutated model, sometimes with byte mutations on top.
fn mutate_onnx(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    use prost::Message;
    let base = pick(rng, seeds);
    let Ok(mut model) = tract_onnx::pb::ModelProto::decode(&base[..]) else {
        return base.clone();
    };
    for _ in 0..rng.random_range(1..=3) {
        mutate_model(rng, &mut model);
    }
    let mut bytes = model.encode_to_vec();
    if rng.random_bool(0.1) {
        mutate_once(rng, &mut bytes, seeds, &[]);
    }
    bytes
}

/// Inputs larger than this are not run (the load and the optimisation are what is fuzzed).
const ONNX_RUN_ELEMENTS: usize = 1 << 16;
/// Nor one that makes a tensor larger than this.
const ONNX_RUN_BYTES: u64 = 16 << 20;

fn run_onnx(_: &mut Scratch, bytes: &[u8]) {
    use crate::engines::tract::TractSession;
    let Ok(session) = TractSession::load_bytes(bytes, "fuzz.onnx", None, 1) else {
        return;
    };
    // Running is for the small models: a mutated one can be valid and merely enormous (seconds
    // per inference, gigabytes of tensors), which is no bug and would stall the campaign.
    if session.input_shape.iter().product::<usize>() > ONNX_RUN_ELEMENTS
        || session.largest_tensor > ONNX_RUN_BYTES
    {
        return;
    }
    if let Ok(input) = session.make_input(1) {
        let _ = session.run(&input);
    }
}

fn onnx_target() -> Target {
    Target {
        name: "onnx",
        seeds: onnx_seeds,
        dictionary: &[],
        structured: Some(mutate_onnx),
        run: run_onnx,
        short: 300,
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
fn short_protocol() {
    short_run("protocol");
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

//! A parser for NVIDIA's `tegrastats` lines (Jetson boards, JetPack 4 to 7): one line per
//! interval, fields in a fixed order when present. The variants handled, all in the fixtures
//! under tests/fixtures/tegrastats:
//! - an optional leading `MM-DD-YYYY HH:MM:SS` timestamp (JetPack 5 and later);
//! - `RAM used/totalMB (lfb NxSIZE)`, `SWAP used/totalMB (cached NMB)`, `IRAM used/totalkB(lfb NkB)`;
//! - `CPU [a%@MHz,b%,off,…]`: one entry per core (ids by position), `off` for an offline core,
//!   `@MHz` missing when not root;
//! - `EMC_FREQ p%@MHz`, `GR3D_FREQ p%@MHz` or `p%@[f1,f2]` (one frequency per GPC), `GR3D2_FREQ`,
//!   frequencies without a percentage (Thor), `@MHz` missing when not root;
//! - engines: `NVENC 1%@115`, `NVDEC off`, `VIC_FREQ 115`, `APE 150`, `NVDLA0 off`, `MTS fg 1% bg 1%`;
//! - temperatures `NAME@45.5C` in upper or lower case, `current/average` pairs, `-256C` = offline;
//! - power rails `NAME cur/avg` unitless mW (JetPack 4), `cur mW/avg mW` (JetPack 5+), three values
//!   (JetPack 7: current/average/peak); rails named `NC` are not connected and left out.
//!
//! A line keeps whatever it could read: tokens it does not understand are listed, not fatal.

use serde::Serialize;
use thiserror::Error;

/// One CPU core's entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Core {
    /// Position in the list, which is the core id (offline cores keep their place).
    pub id: usize,
    pub online: bool,
    pub load_pct: Option<f64>,
    pub freq_mhz: Option<u32>,
}

/// An engine or clock domain: `off`, a load, frequencies (one per GPC for the GPU).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unit {
    pub name: String,
    pub on: bool,
    pub load_pct: Option<f64>,
    pub freq_mhz: Vec<u32>,
}

/// A temperature sensor; `celsius` is None for an offline sensor (`-256C`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Temperature {
    pub name: String,
    pub celsius: Option<f64>,
    pub average_celsius: Option<f64>,
}

/// A power rail, in milliwatts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rail {
    pub name: String,
    pub current_mw: f64,
    pub average_mw: Option<f64>,
    pub peak_mw: Option<f64>,
}

/// Everything one tegrastats line says.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Line {
    /// The board's local time as `YYYY-MM-DDTHH:MM:SS` (JetPack 5 and later print it).
    pub timestamp: Option<String>,
    pub ram_used_mb: Option<u64>,
    pub ram_total_mb: Option<u64>,
    pub swap_used_mb: Option<u64>,
    pub swap_total_mb: Option<u64>,
    pub swap_cached_mb: Option<u64>,
    pub iram_used_kb: Option<u64>,
    pub iram_total_kb: Option<u64>,
    pub cpus: Vec<Core>,
    pub emc: Option<Unit>,
    /// `GR3D_FREQ` and, on early Orin releases, `GR3D2_FREQ`.
    pub gpu: Vec<Unit>,
    pub engines: Vec<Unit>,
    pub temperatures: Vec<Temperature>,
    pub rails: Vec<Rail>,
    /// Tokens that were not understood.
    pub unparsed: Vec<String>,
    /// Readings dropped as implausible (a load of 250 %, a NaN temperature, more RAM used than
    /// there is), as written: `GR3D_FREQ 250%`.
    pub implausible: Vec<String>,
}

impl Line {
    /// The board's input power in mW: `POM_5V_IN` (Nano) or `VDD_IN`, else the sum of the rails.
    pub fn board_power_mw(&self) -> Option<f64> {
        let rails: Vec<crate::collect::telemetry::Reading> = self
            .rails
            .iter()
            .map(|r| crate::collect::telemetry::Reading {
                name: r.name.clone(),
                value: r.current_mw,
            })
            .collect();
        crate::collect::telemetry::sysfs::board_power(&rails)
    }

    /// The GPU's load in percent (the first GPU domain that reports one).
    pub fn gpu_load_pct(&self) -> Option<f64> {
        self.gpu.iter().find_map(|u| u.load_pct)
    }

    /// The GPU's frequency in MHz (the highest of its GPCs).
    pub fn gpu_freq_mhz(&self) -> Option<u32> {
        self.gpu
            .iter()
            .flat_map(|u| u.freq_mhz.iter())
            .max()
            .copied()
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum TegraError {
    #[error("not a tegrastats line (no RAM, CPU, GPU, temperature or power field): {0}")]
    NotTegrastats(String),
}

/// `MM-DD-YYYY` and `HH:MM:SS` → `YYYY-MM-DDTHH:MM:SS`.
fn timestamp(date: &str, time: &str) -> Option<String> {
    let d: Vec<&str> = date.split('-').collect();
    let t: Vec<&str> = time.split(':').collect();
    let digits = |s: &&str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if d.len() == 3
        && digits(&d[0], 2)
        && digits(&d[1], 2)
        && digits(&d[2], 4)
        && t.len() == 3
        && t.iter().all(|p| digits(p, 2))
    {
        Some(format!("{}-{}-{}T{time}", d[2], d[0], d[1]))
    } else {
        None
    }
}

/// `used/total` with a unit suffix on the total (`1923/3964MB`).
fn used_total(text: &str, unit: &str) -> Option<(u64, u64)> {
    let (used, total) = text.split_once('/')?;
    Some((used.parse().ok()?, total.strip_suffix(unit)?.parse().ok()?))
}

/// `off`, `45%`, `45%@921`, `0%@[0,0]`, `729`, `@[1575,1575]`, `[1575]`.
fn unit(name: &str, text: &str) -> Option<Unit> {
    let mut u = Unit {
        name: name.to_string(),
        on: true,
        load_pct: None,
        freq_mhz: Vec::new(),
    };
    if text == "off" {
        u.on = false;
        return Some(u);
    }
    let (load, freq) = match text.split_once('@') {
        Some((l, f)) => (l, f),
        None if text.ends_with('%') => (text, ""),
        None => ("", text),
    };
    if !load.is_empty() {
        u.load_pct = Some(load.strip_suffix('%')?.parse().ok()?);
    }
    if !freq.is_empty() {
        let list = freq
            .strip_prefix('[')
            .and_then(|f| f.strip_suffix(']'))
            .unwrap_or(freq);
        u.freq_mhz = list
            .split(',')
            .map(|f| f.trim().parse().ok())
            .collect::<Option<Vec<u32>>>()?;
    }
    (u.load_pct.is_some() || !u.freq_mhz.is_empty()).then_some(u)
}

/// `[a%@MHz,b%,off,…]`.
fn cores(text: &str) -> Option<Vec<Core>> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    inner
        .split(',')
        .enumerate()
        .map(|(id, entry)| {
            if entry == "off" {
                return Some(Core {
                    id,
                    online: false,
                    load_pct: None,
                    freq_mhz: None,
                });
            }
            let u = unit("cpu", entry)?;
            Some(Core {
                id,
                online: true,
                load_pct: Some(u.load_pct?),
                freq_mhz: u.freq_mhz.first().copied(),
            })
        })
        .collect()
}

/// A number in °C, None for the offline marker -256 (anything else, NaN included, is kept for
/// the plausibility check).
fn celsius(text: &str) -> Option<Option<f64>> {
    let v: f64 = text.strip_suffix('C')?.parse().ok()?;
    Some((v.is_nan() || v > -255.0).then_some(v))
}

/// `NAME@45.5C` or `name@47.6C/47.5C`.
fn temperature(token: &str) -> Option<Temperature> {
    let (name, value) = token.split_once('@')?;
    if name.is_empty() || !value.ends_with('C') {
        return None;
    }
    let (now, average) = match value.split_once('/') {
        Some((n, a)) => (celsius(n)?, celsius(a)?),
        None => (celsius(value)?, None),
    };
    Some(Temperature {
        name: name.to_string(),
        celsius: now,
        average_celsius: average,
    })
}

/// `1750/1628`, `2763mW/2846mW`, `4020mW/3980mW/6100mW`.
fn rail(name: &str, text: &str) -> Option<Rail> {
    if !text.contains('/') {
        return None;
    }
    let values = text
        .split('/')
        .map(|v| v.strip_suffix("mW").unwrap_or(v).parse::<f64>().ok())
        .collect::<Option<Vec<f64>>>()?;
    // Negative, infinite or NaN powers are read here and dropped as implausible later, so that
    // they are counted rather than reported as words not understood.
    if values.len() > 3 {
        return None;
    }
    Some(Rail {
        name: name.to_string(),
        current_mw: values[0],
        average_mw: values.get(1).copied(),
        peak_mw: values.get(2).copied(),
    })
}

/// An upper-case field name (`VDD_IN`, `GR3D_FREQ`, `NVDLA0`, `POM_5V_IN`).
fn is_name(token: &str) -> bool {
    token.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && token
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The most memory a board reports, in MB (16 TiB).
const MAX_MEMORY_MB: u64 = 1 << 24;
/// The highest clock, in MHz.
const MAX_MHZ: u32 = 100_000;
/// Temperatures a working sensor can report, in °C.
const TEMPERATURES: std::ops::RangeInclusive<f64> = -60.0..=200.0;
/// The most power one rail carries, in mW (a kilowatt).
const MAX_RAIL_MW: f64 = 1e6;

fn plausible_pct(v: f64) -> bool {
    (0.0..=100.0).contains(&v)
}

fn plausible_mw(v: f64) -> bool {
    (0.0..=MAX_RAIL_MW).contains(&v)
}

/// Drops what no board reports (loads outside 0–100 %, NaN, clocks past 100 GHz, temperatures
/// outside −60–200 °C, negative or kilowatt rails, more memory used than there is, totals past
/// 16 TiB) and lists each in `implausible`, so that a replay neither prints nonsense nor
/// overflows turning MB into bytes.
fn drop_implausible(line: &mut Line) {
    let dropped = &mut line.implausible;
    let mut memory = |name: &str, unit: &str, used: &mut Option<u64>, total: &mut Option<u64>| {
        if let (Some(u), Some(t)) = (*used, *total) {
            if u > t || t > MAX_MEMORY_MB {
                dropped.push(format!("{name} {u}/{t}{unit}"));
                (*used, *total) = (None, None);
            }
        }
    };
    memory("RAM", "MB", &mut line.ram_used_mb, &mut line.ram_total_mb);
    memory(
        "SWAP",
        "MB",
        &mut line.swap_used_mb,
        &mut line.swap_total_mb,
    );
    memory(
        "IRAM",
        "kB",
        &mut line.iram_used_kb,
        &mut line.iram_total_kb,
    );
    if let Some(c) = line.swap_cached_mb.filter(|c| *c > MAX_MEMORY_MB) {
        dropped.push(format!("SWAP cached {c}MB"));
        line.swap_cached_mb = None;
    }
    for core in &mut line.cpus {
        if let Some(l) = core.load_pct.filter(|l| !plausible_pct(*l)) {
            dropped.push(format!("CPU{} {l}%", core.id));
            core.load_pct = None;
        }
        if let Some(f) = core.freq_mhz.filter(|f| *f > MAX_MHZ) {
            dropped.push(format!("CPU{} @{f}MHz", core.id));
            core.freq_mhz = None;
        }
    }
    for unit in line
        .emc
        .iter_mut()
        .chain(&mut line.gpu)
        .chain(&mut line.engines)
    {
        if let Some(l) = unit.load_pct.filter(|l| !plausible_pct(*l)) {
            dropped.push(format!("{} {l}%", unit.name));
            unit.load_pct = None;
        }
        if let Some(f) = unit.freq_mhz.iter().find(|f| **f > MAX_MHZ) {
            dropped.push(format!("{} @{f}MHz", unit.name));
            unit.freq_mhz.clear();
        }
    }
    line.temperatures.retain(|t| {
        let bad = [t.celsius, t.average_celsius]
            .into_iter()
            .flatten()
            .find(|c| !TEMPERATURES.contains(c));
        if let Some(c) = bad {
            dropped.push(format!("{}@{c}C", t.name));
        }
        bad.is_none()
    });
    line.rails.retain(|r| {
        let bad = [Some(r.current_mw), r.average_mw, r.peak_mw]
            .into_iter()
            .flatten()
            .find(|v| !plausible_mw(*v));
        if let Some(v) = bad {
            dropped.push(format!("{} {v}mW", r.name));
        }
        bad.is_none()
    });
}

/// Parses one line; implausible readings are dropped and listed in `implausible`.
pub fn parse_line(text: &str) -> Result<Line, TegraError> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut line = Line::default();
    let mut i = 0;
    if let (Some(d), Some(t)) = (tokens.first(), tokens.get(1)) {
        if let Some(ts) = timestamp(d, t) {
            line.timestamp = Some(ts);
            i = 2;
        }
    }
    let at = |k: usize| tokens.get(k).copied().unwrap_or("");
    let mut understood = 0;
    while i < tokens.len() {
        let token = tokens[i];
        let next = at(i + 1);
        let step = match token {
            "RAM" => used_total(next, "MB").map(|(u, t)| {
                (line.ram_used_mb, line.ram_total_mb) = (Some(u), Some(t));
                // `(lfb NxSIZE)`
                if at(i + 2) == "(lfb" {
                    4
                } else {
                    2
                }
            }),
            "SWAP" => used_total(next, "MB").map(|(u, t)| {
                (line.swap_used_mb, line.swap_total_mb) = (Some(u), Some(t));
                if at(i + 2) == "(cached" {
                    line.swap_cached_mb =
                        at(i + 3).strip_suffix("MB)").and_then(|v| v.parse().ok());
                    4
                } else {
                    2
                }
            }),
            // `IRAM 0/252kB(lfb 252kB)`
            "IRAM" => used_total(next.split('(').next().unwrap_or(""), "kB").map(|(u, t)| {
                (line.iram_used_kb, line.iram_total_kb) = (Some(u), Some(t));
                if next.contains("(lfb") && at(i + 2).ends_with(')') {
                    3
                } else {
                    2
                }
            }),
            "CPU" if next.starts_with('[') => cores(next).map(|c| {
                line.cpus = c;
                2
            }),
            // `MTS fg 1% bg 1%`: the Denver cores' foreground/background load (TX2, Xavier).
            "MTS" if next == "fg" => Some(5),
            _ if token.contains('@') => temperature(token).map(|t| {
                line.temperatures.push(t);
                1
            }),
            _ if is_name(token) => {
                if let Some(r) = rail(token, next) {
                    if r.name != "NC" {
                        line.rails.push(r);
                    }
                    Some(2)
                } else if let Some(u) = unit(token, next) {
                    if token == "EMC_FREQ" {
                        line.emc = Some(u);
                    } else if token.starts_with("GR3D") {
                        line.gpu.push(u);
                    } else {
                        line.engines.push(u);
                    }
                    Some(2)
                } else {
                    None
                }
            }
            _ => None,
        };
        match step {
            Some(n) => {
                understood += 1;
                i += n;
            }
            None => {
                line.unparsed.push(token.to_string());
                i += 1;
            }
        }
    }
    if understood == 0 {
        return Err(TegraError::NotTegrastats(text.chars().take(80).collect()));
    }
    drop_implausible(&mut line);
    Ok(line)
}

/// Lines of a log with their line numbers.
#[cfg(test)]
pub type Numbered<T> = Vec<(usize, T)>;

/// Parses a log: the lines read and those that could not be, each with its line number.
#[cfg(test)]
pub fn parse_log(text: &str) -> (Numbered<Line>, Numbered<TegraError>) {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    for (n, text) in text.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        match parse_line(text) {
            Ok(l) => lines.push((n + 1, l)),
            Err(e) => errors.push((n + 1, e)),
        }
    }
    (lines, errors)
}

/// The longest line a replay reads: tegrastats lines are a few hundred bytes, and a log with no
/// line ends (a binary file given by mistake) must not be held whole.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// What a replay found besides its samples.
#[derive(Debug, Default, PartialEq)]
pub struct Replay {
    /// Samples written.
    pub samples: usize,
    /// Readings dropped as implausible, and the first of them: (line number, reading).
    pub dropped: usize,
    pub first_dropped: Option<(usize, String)>,
}

/// Most warnings about single lines a replay prints; the rest are counted.
const LINE_WARNINGS: usize = 20;

/// Why a replay stopped: the log could not be read, or `emit` failed with its own error.
#[derive(Debug)]
pub enum ReplayError<E> {
    Read(std::io::Error),
    Emit(E),
}

/// Replays a tegrastats log line by line (never holding it whole): each line becomes a sample
/// handed to `emit`, its `t_s` from the lines' own timestamps where they have them, else
/// `interval` apart. Lines that are not tegrastats, words not understood and overlong lines
/// go to `warn` with their line number (the first few; then a count, with none).
pub fn replay<E>(
    mut reader: impl std::io::BufRead,
    interval: std::time::Duration,
    mut emit: impl FnMut(crate::collect::telemetry::Sample) -> Result<(), E>,
    mut warn: impl FnMut(Option<usize>, String),
) -> Result<Replay, ReplayError<E>> {
    let mut replay = Replay::default();
    let mut first_stamp: Option<String> = None;
    let mut buffer = Vec::new();
    let mut number = 0;
    let mut warnings = 0;
    let mut note = |line: usize, text: String, warn: &mut dyn FnMut(Option<usize>, String)| {
        warnings += 1;
        if warnings <= LINE_WARNINGS {
            // The text quotes the log: its escape sequences are shown, never sent on.
            warn(Some(line), crate::text::shown(&text));
        }
    };
    loop {
        buffer.clear();
        let (read, overlong) = read_line(&mut reader, &mut buffer).map_err(ReplayError::Read)?;
        if read == 0 {
            break;
        }
        number += 1;
        if overlong {
            note(
                number,
                format!("a line over {MAX_LINE_BYTES} bytes; left out"),
                &mut warn,
            );
            continue;
        }
        let text = String::from_utf8_lossy(&buffer);
        if text.trim().is_empty() {
            continue;
        }
        let line = match parse_line(&text) {
            Ok(l) => l,
            Err(e) => {
                note(number, e.to_string(), &mut warn);
                continue;
            }
        };
        if !line.unparsed.is_empty() {
            note(
                number,
                format!("not understood: {}", line.unparsed.join(" ")),
                &mut warn,
            );
        }
        if let Some(first) = line.implausible.first() {
            replay
                .first_dropped
                .get_or_insert_with(|| (number, first.clone()));
            replay.dropped += line.implausible.len();
        }
        if replay.samples == 0 {
            first_stamp = line.timestamp.clone();
        }
        let t_s = match (&first_stamp, &line.timestamp) {
            (Some(a), Some(b)) => seconds_between(a, b),
            _ => None,
        }
        .unwrap_or(replay.samples as f64 * interval.as_secs_f64());
        emit(crate::collect::telemetry::from_tegrastats(&line, t_s)).map_err(ReplayError::Emit)?;
        replay.samples += 1;
    }
    if warnings > LINE_WARNINGS {
        warn(
            None,
            format!(
                "{} more line(s) with warnings not shown",
                warnings - LINE_WARNINGS
            ),
        );
    }
    Ok(replay)
}

/// Reads one line (up to and without its `\n`) into `buffer`: the bytes consumed, and whether
/// the line was longer than [`MAX_LINE_BYTES`] (its rest is skipped, not kept).
fn read_line(
    reader: &mut impl std::io::BufRead,
    buffer: &mut Vec<u8>,
) -> std::io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut overlong = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((consumed, overlong));
        }
        let (part, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if buffer.len() + part.len() > MAX_LINE_BYTES {
            overlong = true;
            buffer.clear();
        } else if !overlong {
            buffer.extend_from_slice(part);
        }
        let used = done.unwrap_or(chunk.len());
        reader.consume(used);
        consumed += used;
        if done.is_some() {
            return Ok((consumed, overlong));
        }
    }
}

/// Seconds between two `YYYY-MM-DDTHH:MM:SS` stamps.
pub fn seconds_between(a: &str, b: &str) -> Option<f64> {
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    let a = time::PrimitiveDateTime::parse(a, &format).ok()?;
    let b = time::PrimitiveDateTime::parse(b, &format).ok()?;
    Some((b - a).as_seconds_f64())
}

#[cfg(test)]
mod tests {
    //! Tests of `collect/tegrastats.rs`.

    use super::*;

    fn fixture(name: &str) -> Vec<Line> {
        let path = format!(
            "{}/tests/fixtures/tegrastats/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let (lines, errors) = parse_log(&text);
        let lines: Vec<Line> = lines.into_iter().map(|(_, l)| l).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
        assert!(!lines.is_empty(), "{name} is empty");
        for l in &lines {
            assert!(l.unparsed.is_empty(), "{name}: {:?}", l.unparsed);
        }
        lines
    }

    fn temp<'a>(l: &'a Line, name: &str) -> Option<&'a Temperature> {
        l.temperatures.iter().find(|t| t.name == name)
    }

    #[test]
    fn jetpack4_nano_as_root() {
        let lines = fixture("jp4-nano-root.log");
        assert_eq!(lines.len(), 2);
        let l = &lines[1];
        assert_eq!(l.timestamp, None);
        assert_eq!((l.ram_used_mb, l.ram_total_mb), (Some(1902), Some(3964)));
        assert_eq!((l.swap_used_mb, l.swap_cached_mb), (Some(180), Some(5)));
        assert_eq!((l.iram_used_kb, l.iram_total_kb), (Some(0), Some(252)));
        assert_eq!(l.cpus.len(), 4);
        assert_eq!(
            l.cpus[1],
            Core {
                id: 1,
                online: true,
                load_pct: Some(99.0),
                freq_mhz: Some(1479)
            }
        );
        assert!(!l.cpus[2].online && l.cpus[3].id == 3);
        assert_eq!(l.gpu_load_pct(), Some(99.0));
        assert_eq!(l.gpu_freq_mhz(), Some(921));
        assert_eq!(l.emc.as_ref().and_then(|e| e.load_pct), Some(9.0));
        assert_eq!(l.engines[0].name, "APE");
        assert_eq!(l.engines[0].freq_mhz, vec![25]);
        assert_eq!(temp(l, "thermal").and_then(|t| t.celsius), Some(41.75));
        // Unitless mW on JetPack 4; the board total is POM_5V_IN.
        assert_eq!(l.board_power_mw(), Some(5890.0));
        assert_eq!(l.rails[1].average_mw, Some(1247.0));
    }

    #[test]
    fn jetpack4_tx2_without_root_has_no_frequencies() {
        let l = &fixture("jp4-tx2-nonroot.log")[0];
        assert_eq!(l.swap_total_mb, None);
        assert_eq!(l.cpus.len(), 6);
        assert_eq!(l.cpus[0].load_pct, Some(14.0));
        assert_eq!(l.cpus[0].freq_mhz, None);
        assert_eq!(
            l.cpus
                .iter()
                .filter(|c| !c.online)
                .map(|c| c.id)
                .collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert_eq!(l.emc.as_ref().map(|e| e.freq_mhz.is_empty()), Some(true));
        assert_eq!(l.gpu_load_pct(), Some(0.0));
        assert_eq!(l.gpu_freq_mhz(), None);
        assert_eq!(l.board_power_mw(), Some(3140.0));
    }

    #[test]
    fn jetpack5_orin_with_gpc_arrays_engines_and_offline_sensors() {
        let lines = fixture("jp5-orin-root.log");
        let l = &lines[1];
        assert_eq!(l.timestamp.as_deref(), Some("2026-11-29T14:02:12"));
        assert_eq!(l.cpus.len(), 12);
        assert_eq!(l.cpus.iter().filter(|c| c.online).count(), 8);
        assert_eq!(l.cpus[8].freq_mhz, Some(729));
        assert_eq!(l.gpu.len(), 2);
        assert_eq!(l.gpu[0].freq_mhz, vec![1300, 1300]);
        assert_eq!(l.gpu[1].name, "GR3D2_FREQ");
        assert_eq!(l.gpu_load_pct(), Some(81.0));
        let nvenc = lines[0].engines.iter().find(|e| e.name == "NVENC");
        assert_eq!(nvenc.map(|e| (e.on, e.load_pct)), Some((true, Some(1.0))));
        let dla = l.engines.iter().find(|e| e.name == "NVDLA0");
        assert_eq!(dla.map(|e| e.on), Some(false));
        assert_eq!(temp(l, "CV0").map(|t| t.celsius), Some(None));
        assert_eq!(temp(l, "tj").and_then(|t| t.celsius), Some(55.6));
        // NC rails are left out; no VDD_IN on AGX Orin, so the total is the sum.
        assert_eq!(l.rails.len(), 4);
        assert_eq!(l.board_power_mw(), Some(9512.0 + 2401.0 + 5031.0 + 805.0));
    }

    #[test]
    fn jetpack6_lower_case_sensors_and_no_root() {
        let l = &fixture("jp6-orin-nano-nonroot.log")[0];
        assert_eq!(l.cpus[5].load_pct, Some(6.0));
        assert_eq!(l.gpu_load_pct(), Some(63.0));
        assert_eq!(temp(l, "gpu").and_then(|t| t.celsius), Some(50.062));
        assert_eq!(l.board_power_mw(), Some(7120.0));
    }

    #[test]
    fn jetpack7_thor_pairs_triples_and_frequency_only_gpu() {
        let l = &fixture("jp7-thor.log")[0];
        assert_eq!(l.cpus.len(), 14);
        assert_eq!(l.gpu_load_pct(), None);
        assert_eq!(l.gpu_freq_mhz(), Some(1575));
        let cpu = temp(l, "cpu");
        assert_eq!(
            cpu.map(|t| (t.celsius, t.average_celsius)),
            Some((Some(47.6), Some(47.5)))
        );
        assert_eq!(l.rails[0].peak_mw, Some(6100.0));
        assert_eq!(l.board_power_mw(), Some(4020.0 + 6630.0 + 2200.0));
    }

    #[test]
    fn stamps() {
        assert_eq!(
            seconds_between("2026-11-29T23:59:59", "2026-11-30T00:00:01"),
            Some(2.0)
        );
        assert_eq!(seconds_between("x", "2026-11-30T00:00:01"), None);
    }

    #[test]
    fn implausible_readings_are_dropped_and_listed() {
        let text =
            "RAM 18446744073709551615/3964MB SWAP 5/10MB CPU [-3%@1479,nan%@1479,50%@999999] \
                EMC_FREQ 9%@1600 GR3D_FREQ 250%@921 gpu@NaNC cpu@41.5C pmic@999C \
                POM_5V_IN -5/1628 VDD_IN 3000/2900";
        let l = match parse_line(text) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            l.implausible,
            vec![
                "RAM 18446744073709551615/3964MB",
                "CPU0 -3%",
                "CPU1 NaN%",
                "CPU2 @999999MHz",
                "GR3D_FREQ 250%",
                "gpu@NaNC",
                "pmic@999C",
                "POM_5V_IN -5mW",
            ]
        );
        assert_eq!((l.ram_used_mb, l.ram_total_mb), (None, None));
        assert_eq!((l.swap_used_mb, l.swap_total_mb), (Some(5), Some(10)));
        assert_eq!(l.cpus[2].load_pct, Some(50.0));
        assert_eq!(l.gpu_load_pct(), None);
        assert_eq!(l.gpu_freq_mhz(), Some(921));
        assert_eq!(l.temperatures.len(), 1);
        assert_eq!(l.rails.len(), 1);
        assert!(l.unparsed.is_empty(), "{:?}", l.unparsed);
        // The offline marker is not a drop.
        assert!(parse_line("cv0@-256C RAM 1/2MB")
            .is_ok_and(|l| l.implausible.is_empty() && l.temperatures[0].celsius.is_none()));
    }

    #[test]
    fn a_replay_streams_counts_drops_and_cuts_overlong_lines() {
        let log = format!(
        "RAM 1/2MB GR3D_FREQ 250%@921\n{}\nnot tegrastats\n\n12-01-2026 10:00:00 RAM 1/2MB\n12-01-2026 10:00:03 RAM 1/2MB CPU [101%]\n",
        "x".repeat(MAX_LINE_BYTES + 10)
    );
        let mut samples = Vec::new();
        let mut warnings = Vec::new();
        let replay = replay(
            std::io::BufReader::with_capacity(64, log.as_bytes()),
            std::time::Duration::from_millis(500),
            |s| {
                samples.push(s);
                Ok::<(), std::convert::Infallible>(())
            },
            |line, w| warnings.push((line, w)),
        );
        let replay = match replay {
            Ok(r) => r,
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(
            replay,
            Replay {
                samples: 3,
                dropped: 2,
                first_dropped: Some((1, "GR3D_FREQ 250%".to_string())),
            }
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(warnings[0].0, Some(2));
        assert!(warnings[0].1.contains("a line over"), "{warnings:?}");
        assert_eq!(warnings[1].0, Some(3));
        // The first line has no stamp: t_s by the interval until stamped lines, which count
        // from the first line's stamp (none here), so by the interval too.
        let t: Vec<f64> = samples.iter().map(|s| s.t_s).collect();
        assert_eq!(t, vec![0.0, 0.5, 1.0]);
    }

    #[test]
    fn garbage_and_truncated_lines_are_errors_or_partial() {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/tegrastats/broken.log",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap_or_default();
        let (lines, errors) = parse_log(&text);
        assert_eq!(lines.iter().map(|l| l.0).collect::<Vec<_>>(), vec![2, 4]);
        let lines: Vec<Line> = lines.into_iter().map(|(_, l)| l).collect();
        // Line 1 is prose, line 3 has nothing readable: errors with their line numbers.
        assert_eq!(errors.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(lines.len(), 2);
        // A garbled line keeps its RAM figures and lists what it could not read.
        assert_eq!(lines[0].ram_used_mb, Some(1890));
        assert!(lines[0].cpus.is_empty());
        assert!(lines[0].unparsed.iter().any(|t| t.contains("banana")));
        assert!(lines[0].unparsed.contains(&"POM_5V_IN".to_string()));
        // A line cut short keeps its timestamp and RAM.
        assert_eq!(lines[1].timestamp.as_deref(), Some("2026-11-29T14:02:11"));
        assert_eq!(lines[1].ram_total_mb, Some(30536));
        assert!(matches!(parse_line(""), Err(TegraError::NotTegrastats(_))));
    }
}

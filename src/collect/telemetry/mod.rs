//! Live telemetry: a sample type shared by every source, and readers that each
//! take a root path (the real `/`, or a fixture tree in tests) and fill in the fields they know.
//! A reader that cannot work here says why in [`Reader::probe`] and adds nothing; no reader
//! panics on missing, garbled or truncated files: a value it cannot read stays empty.

pub mod cpu;
pub mod net;
pub mod nvml;
pub mod sysfs;

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One CPU core at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Core {
    /// The kernel's core id (`cpuN`), kept when other cores go offline.
    pub id: usize,
    pub online: bool,
    /// Busy share since the previous sample, in % of this core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz: Option<u32>,
}

/// One GPU at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Where it was read and what it is, e.g. "jetson ga10b", "amdgpu card0".
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_freq_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// Compute processes on this GPU and their memory in bytes (NVML).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<(u32, u64)>,
}

/// A named reading: a temperature in °C, a rail's power in W, an energy counter in J.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub name: String,
    pub value: f64,
}

/// Everything the readers saw at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since monitoring started.
    pub t_s: f64,
    /// Wall-clock time: when the sample was taken (UTC, to the millisecond), or a tegrastats
    /// log line's own stamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<Core>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_total_bytes: Option<u64>,
    /// The 1, 5 and 15-minute load averages (runnable and uninterruptible tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_avg: Option<[f64; 3]>,
    /// Seconds since the machine booted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<Gpu>,
    /// Temperatures in °C (offline sensors left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temperatures: Vec<Reading>,
    /// Power rails in W.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rails: Vec<Reading>,
    /// The board's or package's total power in W, when a source gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// Cumulative energy counters in J (RAPL), wrap-corrected since monitoring started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub energy: Vec<Reading>,
    /// Throttling in effect now, in words (e.g. "under-voltage", "GPU clock below its maximum").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttling: Vec<String>,
    /// The monitored process, when one is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<crate::collect::proc::ProcSample>,
    /// Every process since the sample before, most CPU first (filled by the terminal UI's
    /// Monitor tab while it shows; empty elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<crate::collect::other_processes::ProcessRow>,
}

impl Sample {
    /// Mean load of the online cores that report one.
    pub fn cpu_load_pct(&self) -> Option<f64> {
        let loads: Vec<f64> = self.cores.iter().filter_map(|c| c.load_pct).collect();
        (!loads.is_empty()).then(|| loads.iter().sum::<f64>() / loads.len() as f64)
    }
}

/// A telemetry source.
pub trait Reader: Send {
    /// Its name in `edgeprof probe` and in messages.
    fn name(&self) -> &'static str;
    /// Ok with what it found when it can read here, else why not.
    fn probe(&self) -> Result<String, String>;
    /// Adds what it reads now to `sample`.
    fn read(&mut self, sample: &mut Sample);
    /// The readings it left out as implausible so far.
    fn dropped(&self) -> Dropped {
        Dropped::default()
    }
}

/// Readings a reader left out as implausible (a temperature of 3000 °C, a load of 250 %, a
/// clock of 18 EHz from a garbled file): how many, and the first, with its file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Dropped {
    pub count: u64,
    pub first: Option<String>,
}

impl Dropped {
    /// `value` when it lies in `range`; else None, counted (the first with its file).
    pub fn keep<T: PartialOrd + std::fmt::Display>(
        &mut self,
        value: Option<T>,
        range: std::ops::RangeInclusive<T>,
        file: &Path,
    ) -> Option<T> {
        let v = value?;
        if range.contains(&v) {
            return Some(v);
        }
        self.note(|| format!("{}: {v}", file.display()));
        None
    }

    /// Counts one dropped reading, described by `what` if it is the first.
    pub fn note(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(what());
        }
    }
}

/// Temperatures a working sensor reports, in °C.
pub const TEMPERATURES_C: std::ops::RangeInclusive<f64> = -60.0..=200.0;
/// Clocks a processor runs at, in MHz.
pub const CLOCKS_MHZ: std::ops::RangeInclusive<u64> = 0..=100_000;

/// Every reader edgeprof has, for this root.
pub fn readers(root: &Path) -> Vec<Box<dyn Reader>> {
    vec![
        Box::new(cpu::CpuReader::new(root)),
        Box::new(cpu::MemoryReader::new(root)),
        Box::new(sysfs::ThermalReader::new(root)),
        Box::new(sysfs::JetsonGpuReader::new(root)),
        Box::new(sysfs::Ina3221Reader::new(root)),
        Box::new(sysfs::AmdGpuReader::new(root)),
        Box::new(sysfs::RaplReader::new(root)),
        Box::new(sysfs::RaspberryPiReader::new(root)),
        Box::new(nvml::NvmlReader::new()),
    ]
}

/// The readers that work under `root` (each probed once).
pub fn working_readers(root: &Path) -> Vec<Box<dyn Reader>> {
    readers(root)
        .into_iter()
        .filter(|r| r.probe().is_ok())
        .collect()
}

/// The readers a sampling thread hands back, with what they read.
type Recording = (Vec<Sample>, Vec<Box<dyn Reader>>);

/// Samples telemetry on its own thread while something else runs (a benchmark's worker), so
/// neither waits for the other.
pub struct Recorder {
    stop: crate::collect::stop::Stop,
    handle: std::thread::JoinHandle<Recording>,
    /// Each sample as it is taken, for a live view.
    live: std::sync::mpsc::Receiver<Sample>,
}

/// Readers sampled every `interval` from a start: a late tick is skipped rather than taken
/// twice in a row; the first, unkept reading primes the interval figures (CPU %, power).
pub struct Sampler {
    readers: Vec<Box<dyn Reader>>,
    start: std::time::Instant,
    interval: std::time::Duration,
    tick: u32,
}

impl Sampler {
    pub fn new(mut readers: Vec<Box<dyn Reader>>, interval: std::time::Duration) -> Sampler {
        let mut prime = Sample::default();
        for r in &mut readers {
            r.read(&mut prime);
        }
        Sampler {
            readers,
            start: std::time::Instant::now(),
            interval,
            tick: 1,
        }
    }

    /// How long after the start the next sample is due.
    pub fn next_offset(&self) -> std::time::Duration {
        self.interval * self.tick
    }

    /// Samples every `interval` from now on (the first due within `interval`), keeping the
    /// start the samples' times count from.
    pub fn set_interval(&mut self, interval: std::time::Duration) {
        if interval.is_zero() || interval == self.interval {
            return;
        }
        let elapsed = self.start.elapsed().as_secs_f64() / interval.as_secs_f64();
        self.interval = interval;
        self.tick = elapsed.floor() as u32 + 1;
    }

    /// When the next sample is due.
    pub fn next_due(&self) -> std::time::Instant {
        self.start + self.next_offset()
    }

    /// Sleeps until the next sample is due; false when `stop` was raised meanwhile (it wakes
    /// the sleep at once).
    pub fn wait(&self, stop: &crate::collect::stop::Stop) -> bool {
        stop.wait_until(self.next_due())
    }

    /// The readers, for what they dropped.
    pub fn readers(&self) -> &[Box<dyn Reader>] {
        &self.readers
    }

    /// Reads every source now.
    pub fn take(&mut self) -> Sample {
        let mut sample = Sample {
            t_s: self.start.elapsed().as_secs_f64(),
            // Wall-clock time, so that samples line up with other logs of the board.
            timestamp: Some(crate::text::now_rfc3339_millis()),
            ..Sample::default()
        };
        for r in &mut self.readers {
            r.read(&mut sample);
        }
        let elapsed = self.start.elapsed().as_secs_f64() / self.interval.as_secs_f64();
        self.tick = self.tick.max(elapsed.floor() as u32) + 1;
        sample
    }
}

impl Recorder {
    /// Starts sampling `readers` every `interval` on its own thread.
    pub fn start(readers: Vec<Box<dyn Reader>>, interval: std::time::Duration) -> Recorder {
        let stop = crate::collect::stop::Stop::new();
        let flag = stop.clone();
        let (feed, live) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let mut sampler = Sampler::new(readers, interval);
            let mut samples = Vec::new();
            while sampler.wait(&flag) {
                let sample = sampler.take();
                // Nobody watching is fine: the samples are kept here either way.
                let _ = feed.send(sample.clone());
                samples.push(sample);
            }
            (samples, sampler.readers)
        });
        Recorder { stop, handle, live }
    }

    /// The samples taken since the last call, without waiting.
    pub fn fresh(&self) -> Vec<Sample> {
        self.live.try_iter().collect()
    }

    /// Stops sampling: the samples, and the readers for the next recording.
    pub fn finish(self) -> Recording {
        self.stop.raise();
        self.handle.join().unwrap_or_default()
    }
}

/// A number from a one-line sysfs or procfs file under `root`.
pub(crate) fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A tegrastats line as a sample (`edgeprof monitor --from-tegrastats`).
pub fn from_tegrastats(line: &crate::collect::tegrastats::Line, t_s: f64) -> Sample {
    const MB: u64 = 1 << 20;
    let gpu = (!line.gpu.is_empty()).then(|| Gpu {
        name: "jetson (tegrastats)".to_string(),
        load_pct: line.gpu_load_pct(),
        freq_mhz: line.gpu_freq_mhz(),
        ..Gpu::default()
    });
    Sample {
        t_s,
        timestamp: line.timestamp.clone(),
        cores: line
            .cpus
            .iter()
            .map(|c| Core {
                id: c.id,
                online: c.online,
                load_pct: c.load_pct,
                freq_mhz: c.freq_mhz,
            })
            .collect(),
        mem_used_bytes: line.ram_used_mb.and_then(|v| v.checked_mul(MB)),
        mem_total_bytes: line.ram_total_mb.and_then(|v| v.checked_mul(MB)),
        swap_used_bytes: line.swap_used_mb.and_then(|v| v.checked_mul(MB)),
        gpus: gpu.into_iter().collect(),
        temperatures: line
            .temperatures
            .iter()
            .filter_map(|t| {
                Some(Reading {
                    name: t.name.clone(),
                    value: t.celsius?,
                })
            })
            .collect(),
        rails: line
            .rails
            .iter()
            .map(|r| Reading {
                name: r.name.clone(),
                value: r.current_mw / 1e3,
            })
            .collect(),
        power_w: line.board_power_mw().map(|mw| mw / 1e3),
        ..Sample::default()
    }
}

/// CSV columns for samples: fixed ones, then one per core, GPU field, temperature, rail and
/// energy counter in the order they first appear.
pub fn csv_columns(samples: &[Sample]) -> Vec<String> {
    let mut columns: Vec<String> = [
        "t_s",
        "timestamp",
        "cpu_pct",
        "mem_used_mb",
        "mem_total_mb",
        "power_w",
        "throttling",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for sample in samples {
        for (key, _) in flatten(sample) {
            if !columns.contains(&key) {
                columns.push(key);
            }
        }
    }
    columns
}

/// One sample as a CSV row over `columns` (empty cells for what it lacks; no line end).
pub fn csv_row(columns: &[String], sample: &Sample) -> String {
    let row = flatten(sample);
    crate::text::csv_record(columns.iter().map(|c| {
        row.iter()
            .find(|(k, _)| k == c)
            .map_or(String::new(), |(_, v)| v.clone())
    }))
}

/// Samples as CSV with a header.
#[cfg(test)]
pub fn to_csv(samples: &[Sample]) -> String {
    let columns = csv_columns(samples);
    let mut out = crate::text::csv_record(&columns);
    out.push('\n');
    for s in samples {
        out.push_str(&csv_row(&columns, s));
        out.push('\n');
    }
    out
}

/// A sample as (column, value) pairs; names are made CSV-safe.
fn flatten(s: &Sample) -> Vec<(String, String)> {
    let safe = |name: &str| -> String {
        name.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect()
    };
    let num = |v: f64| format!("{v:.3}");
    let mut row = vec![("t_s".to_string(), num(s.t_s))];
    let mut put = |key: String, value: Option<String>| {
        if let Some(v) = value {
            row.push((key, v));
        }
    };
    put("timestamp".into(), s.timestamp.clone());
    put("cpu_pct".into(), s.cpu_load_pct().map(num));
    let mb = |bytes: Option<u64>| bytes.map(|b| num(b as f64 / (1u64 << 20) as f64));
    put("mem_used_mb".into(), mb(s.mem_used_bytes));
    put("mem_total_mb".into(), mb(s.mem_total_bytes));
    put("power_w".into(), s.power_w.map(num));
    put(
        "throttling".into(),
        (!s.throttling.is_empty()).then(|| s.throttling.join("; ").replace(',', " ")),
    );
    put("swap_used_mb".into(), mb(s.swap_used_bytes));
    put("swap_total_mb".into(), mb(s.swap_total_bytes));
    if let Some([one, five, fifteen]) = s.load_avg {
        put("load_1m".into(), Some(num(one)));
        put("load_5m".into(), Some(num(five)));
        put("load_15m".into(), Some(num(fifteen)));
    }
    put("uptime_s".into(), s.uptime_s.map(num));
    for c in &s.cores {
        let value = if c.online {
            c.load_pct.map(num)
        } else {
            Some("off".to_string())
        };
        put(format!("cpu{}_pct", c.id), value);
        put(
            format!("cpu{}_mhz", c.id),
            c.freq_mhz.map(|f| f.to_string()),
        );
    }
    for (i, g) in s.gpus.iter().enumerate() {
        put(format!("gpu{i}_pct"), g.load_pct.map(num));
        put(format!("gpu{i}_mhz"), g.freq_mhz.map(|f| f.to_string()));
        put(format!("gpu{i}_mem_used_mb"), mb(g.mem_used_bytes));
        put(format!("gpu{i}_temp_c"), g.temp_c.map(num));
        put(format!("gpu{i}_power_w"), g.power_w.map(num));
    }
    for t in &s.temperatures {
        put(format!("temp_{}_c", safe(&t.name)), Some(num(t.value)));
    }
    for r in &s.rails {
        put(format!("rail_{}_w", safe(&r.name)), Some(num(r.value)));
    }
    for e in &s.energy {
        put(format!("energy_{}_j", safe(&e.name)), Some(num(e.value)));
    }
    if let Some(p) = &s.process {
        put("process_cpu_pct".into(), p.cpu_pct.map(num));
        put("process_rss_mb".into(), mb(p.rss_bytes));
        put("process_hwm_mb".into(), mb(p.hwm_bytes));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tegrastats_line_becomes_a_sample_and_a_csv_row() {
        let text = "11-29-2026 14:10:05 RAM 3012/7620MB (lfb 12x4MB) CPU [11%@1510,off,14%@1510] \
                    GR3D_FREQ 63%@[624,624] gpu@50.06C cv0@-256C VDD_IN 7120mW/6500mW VDD_SOC 1610mW/1590mW";
        let line = match crate::collect::tegrastats::parse_line(text) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let s = from_tegrastats(&line, 0.5);
        assert_eq!(s.timestamp.as_deref(), Some("2026-11-29T14:10:05"));
        assert_eq!(s.cores.len(), 3);
        assert_eq!(s.cpu_load_pct(), Some(12.5));
        assert_eq!(s.mem_used_bytes, Some(3012 << 20));
        assert_eq!(s.gpus[0].load_pct, Some(63.0));
        assert_eq!(s.gpus[0].freq_mhz, Some(624));
        // The offline sensor is left out; power in W; VDD_IN is the board total.
        assert_eq!(s.temperatures.len(), 1);
        assert_eq!(s.power_w, Some(7.12));
        let csv = to_csv(&[s]);
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
        let row: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
        assert_eq!(header.len(), row.len());
        let cell = |name: &str| header.iter().position(|h| *h == name).map(|i| row[i]);
        assert_eq!(cell("cpu_pct"), Some("12.500"));
        assert_eq!(cell("cpu1_pct"), Some("off"));
        assert_eq!(cell("gpu0_pct"), Some("63.000"));
        assert_eq!(cell("temp_gpu_c"), Some("50.060"));
        assert_eq!(cell("rail_VDD_SOC_w"), Some("1.610"));
        assert_eq!(cell("power_w"), Some("7.120"));
    }
}

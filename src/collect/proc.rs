//! Process and system memory from procfs: `/proc/PID/stat` (CPU ticks), `/proc/PID/status`
//! (VmRSS, VmHWM) and `/proc/meminfo`. Parsers are pure functions of the file text; the sampler
//! reads them under a root path and turns tick counts into CPU % per interval.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// CPU time of one process, in clock ticks (user, system), from `/proc/PID/stat`.
pub fn parse_stat_ticks(text: &str) -> Option<(u64, u64)> {
    // The command name (field 2) is in parentheses and may itself hold spaces or ')': the
    // fields that follow start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // Tick counts whose sum does not fit in 64 bits are garbled, not CPU time.
    utime.checked_add(stime)?;
    Some((utime, stime))
}

/// The state letter of a process (`R`, `S`, `Z` for a zombie, …) from `/proc/PID/stat`.
pub fn parse_stat_state(text: &str) -> Option<char> {
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// A `Key:   123 kB` line of a procfs file, in bytes.
pub(crate) fn kib_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        let mut parts = value.split_whitespace();
        let number: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") | None => number.checked_mul(1024),
            Some(_) => None,
        }
    })
}

/// Resident and peak resident memory of a process, in bytes, from `/proc/PID/status`.
/// Kernel threads and zombies have neither.
pub fn parse_status_memory(text: &str) -> (Option<u64>, Option<u64>) {
    (kib_field(text, "VmRSS"), kib_field(text, "VmHWM"))
}

/// System memory from `/proc/meminfo`, in bytes: (total, used). Used is total minus
/// MemAvailable; kernels older than 3.14 lack MemAvailable, so free + buffers + cached stands in.
pub fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let total = kib_field(text, "MemTotal")?;
    let available = kib_field(text, "MemAvailable").or_else(|| {
        kib_field(text, "MemFree")?
            .checked_add(kib_field(text, "Buffers").unwrap_or(0))?
            .checked_add(kib_field(text, "Cached").unwrap_or(0))
    })?;
    Some((total, total.saturating_sub(available)))
}

/// One reading of a monitored process and of the system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcSample {
    /// Seconds since the process started.
    pub t_s: f64,
    /// CPU use of the process since the previous sample, in % of one core (200 = two cores busy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hwm_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
}

/// Every process under `root`/proc: its pid and its directory (empty when there is no procfs).
pub fn pids(root: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root.join("proc")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((pid, entry.path()))
        })
        .collect()
}

/// Clock ticks per second of `/proc/PID/stat` (USER_HZ; 100 on every Linux port in practice).
pub fn ticks_per_second() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(n)) if n > 0 => n as f64,
        _ => 100.0,
    }
}

/// Samples one process (and system memory) under `root`.
pub struct ProcessSampler {
    proc_dir: PathBuf,
    meminfo: PathBuf,
    ticks_per_s: f64,
    start: Instant,
    last: Option<(Instant, u64)>,
}

impl ProcessSampler {
    pub fn new(root: &Path, pid: u32, start: Instant) -> ProcessSampler {
        ProcessSampler {
            proc_dir: root.join("proc").join(pid.to_string()),
            meminfo: root.join("proc/meminfo"),
            ticks_per_s: ticks_per_second(),
            start,
            last: None,
        }
    }

    /// Reads the process now; `None` once it has gone (or never was).
    pub fn sample(&mut self, now: Instant) -> Option<ProcSample> {
        self.read(now, true)
    }

    /// Reads memory only, leaving the CPU interval running (for readings off the schedule,
    /// whose short intervals would make a per-interval CPU % meaningless).
    pub fn sample_memory(&mut self, now: Instant) -> Option<ProcSample> {
        self.read(now, false)
    }

    fn read(&mut self, now: Instant, cpu: bool) -> Option<ProcSample> {
        let stat = std::fs::read_to_string(self.proc_dir.join("stat")).ok()?;
        let status = std::fs::read_to_string(self.proc_dir.join("status")).unwrap_or_default();
        let (rss, hwm) = parse_status_memory(&status);
        let ticks = parse_stat_ticks(&stat).map(|(u, s)| u + s);
        let cpu_pct = match (ticks, self.last) {
            _ if !cpu => None,
            (Some(t), Some((then, before))) => {
                let wall = now.duration_since(then).as_secs_f64();
                (wall > 0.0)
                    .then(|| t.saturating_sub(before) as f64 / self.ticks_per_s / wall * 100.0)
            }
            _ => None,
        };
        if let (Some(t), true) = (ticks, cpu) {
            self.last = Some((now, t));
        }
        let memory = std::fs::read_to_string(&self.meminfo)
            .ok()
            .and_then(|text| parse_meminfo(&text));
        Some(ProcSample {
            t_s: now.duration_since(self.start).as_secs_f64(),
            cpu_pct,
            rss_bytes: rss,
            hwm_bytes: hwm,
            mem_used_bytes: memory.map(|m| m.1),
            mem_total_bytes: memory.map(|m| m.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str =
        "4242 (my (odd) prog) R 1 4242 4242 0 -1 4194560 12 0 0 0 250 37 0 0 20 0 3 0 \
                        100 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

    #[test]
    fn stat_ticks_survive_parentheses_in_the_name() {
        assert_eq!(parse_stat_ticks(STAT), Some((250, 37)));
        assert_eq!(parse_stat_ticks("4242 (cut"), None);
        assert_eq!(parse_stat_ticks("4242 (x) R 1 2"), None);
        assert_eq!(parse_stat_ticks(""), None);
    }

    #[test]
    fn status_gives_rss_and_peak_in_bytes() {
        let text =
            "Name:\tpython3\nVmPeak:\t  400000 kB\nVmHWM:\t  307500 kB\nVmRSS:\t  300100 kB\n";
        assert_eq!(
            parse_status_memory(text),
            (Some(300_100 * 1024), Some(307_500 * 1024))
        );
        // Kernel threads and zombies have no Vm lines.
        assert_eq!(
            parse_status_memory("Name:\tkworker\nState:\tZ\n"),
            (None, None)
        );
        assert_eq!(parse_status_memory("VmRSS:\tlots kB\n"), (None, None));
    }

    #[test]
    fn meminfo_used_is_total_less_available() {
        let text = "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    600 kB\n";
        assert_eq!(parse_meminfo(text), Some((1_024_000, 409_600)));
        // Before Linux 3.14 there is no MemAvailable.
        let old = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n";
        assert_eq!(parse_meminfo(old), Some((1_024_000, 614_400)));
        assert_eq!(parse_meminfo("garbage"), None);
        // Fields whose sum overflows 64 bits are garbled, not memory.
        let huge =
            "MemTotal: 1000 kB\nMemFree: 18014398509481983 kB\nCached: 18014398509481983 kB\n";
        assert_eq!(parse_meminfo(huge), None);
        let ticks = STAT.replace(" 250 37 ", " 18446744073709551615 37 ");
        assert_eq!(parse_stat_ticks(&ticks), None);
    }

    #[test]
    fn sampler_reads_a_fixture_tree_and_computes_cpu_per_interval() {
        let root = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let proc_dir = root.path().join("proc/4242");
        let write = |path: PathBuf, text: &str| {
            if let Err(e) =
                std::fs::create_dir_all(proc_dir.clone()).and_then(|_| std::fs::write(path, text))
            {
                panic!("{e}")
            }
        };
        write(proc_dir.join("stat"), STAT);
        write(
            proc_dir.join("status"),
            "VmHWM:\t 2048 kB\nVmRSS:\t 1024 kB\n",
        );
        write(
            root.path().join("proc/meminfo"),
            "MemTotal: 4096 kB\nMemAvailable: 1024 kB\n",
        );
        let start = Instant::now();
        let mut sampler = ProcessSampler::new(root.path(), 4242, start);
        let first = sampler.sample(start);
        assert_eq!(
            first,
            Some(ProcSample {
                t_s: 0.0,
                cpu_pct: None,
                rss_bytes: Some(1024 * 1024),
                hwm_bytes: Some(2048 * 1024),
                mem_used_bytes: Some(3072 * 1024),
                mem_total_bytes: Some(4096 * 1024),
            })
        );
        // 50 more ticks (0.5 s of CPU at 100 Hz) over one wall second: 50 %.
        write(proc_dir.join("stat"), &STAT.replace(" 250 37 ", " 280 57 "));
        let later = start + std::time::Duration::from_secs(1);
        let second = sampler.sample(later);
        let expected = 50.0 / ticks_per_second() * 100.0;
        match second.and_then(|s| s.cpu_pct) {
            Some(pct) => assert!((pct - expected).abs() < 1e-9, "{pct}"),
            None => panic!("no CPU figure"),
        }
        // An off-schedule memory reading neither reports nor restarts the CPU interval.
        let off = sampler.sample_memory(later + std::time::Duration::from_millis(1));
        assert_eq!(
            off.map(|s| (s.cpu_pct, s.rss_bytes)),
            Some((None, Some(1024 * 1024)))
        );
        write(proc_dir.join("stat"), &STAT.replace(" 250 37 ", " 380 57 "));
        let third = sampler.sample(later + std::time::Duration::from_secs(1));
        let expected = 100.0 / ticks_per_second() * 100.0;
        assert!(third
            .and_then(|s| s.cpu_pct)
            .is_some_and(|p| (p - expected).abs() < 1e-9));
        let mut gone = ProcessSampler::new(root.path(), 1, start);
        assert_eq!(gone.sample(start), None);
    }
}

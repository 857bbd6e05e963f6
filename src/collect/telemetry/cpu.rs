//! CPU and memory from procfs: per-core load from `/proc/stat` (which lists online cores only,
//! so ids come from the `cpuN` labels and offline cores stay in place as offline), per-core
//! frequency from cpufreq, system memory and swap from `/proc/meminfo`.

use super::{Core, Dropped, Reader, Sample, CLOCKS_MHZ};
use crate::collect::reread::Reread;
use std::path::{Path, PathBuf};

/// One core's time in clock ticks: busy and total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ticks {
    pub id: usize,
    pub busy: u64,
    pub total: u64,
}

/// The per-core lines of `/proc/stat` (`cpuN user nice system idle iowait irq softirq steal …`).
/// Idle and iowait count as not busy; guest time is already inside user time.
pub fn parse_proc_stat(text: &str) -> Vec<Ticks> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id: usize = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
            let values: Vec<u64> = fields
                .take(8)
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            if values.len() < 4 {
                return None;
            }
            // Counters past 64 bits together are garbled, not time.
            let total = values.iter().try_fold(0u64, |a, v| a.checked_add(*v))?;
            let idle = values[3].saturating_add(values.get(4).copied().unwrap_or(0));
            Some(Ticks {
                id,
                busy: total.saturating_sub(idle),
                total,
            })
        })
        .collect()
}

/// Busy % of each core between two readings; a core missing from either has none.
pub fn loads(before: &[Ticks], after: &[Ticks]) -> Vec<(usize, f64)> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| b.id == a.id)?;
            let total = a.total.checked_sub(b.total)?;
            let busy = a.busy.checked_sub(b.busy)?;
            (total > 0).then(|| (a.id, (100.0 * busy as f64 / total as f64).min(100.0)))
        })
        .collect()
}

/// Ids in a kernel CPU list such as `0-3,6` (the `possible` and `online` files).
pub fn parse_cpu_ids(text: &str) -> Vec<usize> {
    let mut ids = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    if b >= a && b - a < 4096 {
                        ids.extend(a..=b);
                    }
                }
            }
            None => ids.extend(part.parse::<usize>().ok()),
        }
    }
    ids
}

/// Per-core load and frequency.
pub struct CpuReader {
    root: PathBuf,
    previous: Vec<Ticks>,
    dropped: Dropped,
    /// `/proc/stat`, kept open between samples.
    stat: Reread,
    /// The CPUs that may ever exist (`possible`: fixed at boot), read once.
    possible: Option<Vec<usize>>,
    /// Each CPU's `scaling_cur_freq`, kept open; empty when this machine has no cpufreq.
    freq: std::collections::BTreeMap<usize, Reread>,
    /// Whether cpufreq is here at all (looked at once).
    has_cpufreq: Option<bool>,
    /// `/proc/loadavg` and `/proc/uptime`, kept open.
    loadavg: Reread,
    uptime: Reread,
}

impl CpuReader {
    pub fn new(root: &Path) -> CpuReader {
        CpuReader {
            root: root.to_path_buf(),
            previous: Vec::new(),
            dropped: Dropped::default(),
            stat: Reread::new(&root.join("proc/stat")),
            possible: None,
            freq: Default::default(),
            has_cpufreq: None,
            loadavg: Reread::new(&root.join("proc/loadavg")),
            uptime: Reread::new(&root.join("proc/uptime")),
        }
    }

    fn stat(&mut self) -> Option<Vec<Ticks>> {
        let ticks = parse_proc_stat(self.stat.read()?);
        (!ticks.is_empty()).then_some(ticks)
    }
}

impl Reader for CpuReader {
    fn name(&self) -> &'static str {
        "cpu (procfs, cpufreq)"
    }

    fn probe(&self) -> Result<String, String> {
        let ticks = std::fs::read_to_string(self.root.join("proc/stat"))
            .ok()
            .map(|text| parse_proc_stat(&text))
            .filter(|t| !t.is_empty())
            .ok_or_else(|| "/proc/stat is missing or has no per-core lines".to_string())?;
        let freq = self
            .root
            .join("sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
            .exists();
        Ok(format!(
            "{} core(s) online{}",
            ticks.len(),
            if freq {
                ", with frequencies"
            } else {
                "; no cpufreq (frequencies unknown)"
            }
        ))
    }

    fn read(&mut self, sample: &mut Sample) {
        let Some(now) = self.stat() else { return };
        let loads = loads(&self.previous, &now);
        let cpu_dir = self.root.join("sys/devices/system/cpu");
        let possible = self.possible.get_or_insert_with(|| {
            std::fs::read_to_string(cpu_dir.join("possible"))
                .map(|t| parse_cpu_ids(&t))
                .unwrap_or_default()
        });
        let mut ids = possible.clone();
        ids.extend(now.iter().map(|t| t.id));
        ids.sort_unstable();
        ids.dedup();
        let has_cpufreq = *self.has_cpufreq.get_or_insert_with(|| {
            ids.iter()
                .any(|id| cpu_dir.join(format!("cpu{id}/cpufreq")).is_dir())
        });
        let (dropped, freq) = (&mut self.dropped, &mut self.freq);
        sample.cores = ids
            .into_iter()
            .map(|id| {
                let online = now.iter().any(|t| t.id == id);
                let file = cpu_dir.join(format!("cpu{id}/cpufreq/scaling_cur_freq"));
                let khz = (online && has_cpufreq)
                    .then(|| {
                        freq.entry(id)
                            .or_insert_with(|| Reread::new(&file))
                            .read()
                            .and_then(|t| t.trim().parse::<u64>().ok())
                    })
                    .flatten();
                let khz = dropped.keep(khz, 0..=CLOCKS_MHZ.end() * 1000, &file);
                Core {
                    id,
                    online,
                    load_pct: loads.iter().find(|l| l.0 == id).map(|l| l.1),
                    freq_mhz: khz.map(|k| (k / 1000) as u32),
                }
            })
            .collect();
        self.previous = now;
        sample.load_avg = self.loadavg.read().and_then(parse_loadavg);
        sample.uptime_s = self
            .uptime
            .read()
            .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0);
    }

    fn dropped(&self) -> Dropped {
        self.dropped.clone()
    }
}

/// System memory and swap.
pub struct MemoryReader {
    root: PathBuf,
    /// `/proc/meminfo`, kept open between samples.
    meminfo: Reread,
}

impl MemoryReader {
    pub fn new(root: &Path) -> MemoryReader {
        MemoryReader {
            root: root.to_path_buf(),
            meminfo: Reread::new(&root.join("proc/meminfo")),
        }
    }
}

impl Reader for MemoryReader {
    fn name(&self) -> &'static str {
        "memory (procfs)"
    }

    fn probe(&self) -> Result<String, String> {
        let text = std::fs::read_to_string(self.root.join("proc/meminfo"))
            .map_err(|e| format!("cannot read /proc/meminfo: {e}"))?;
        let (total, _) = crate::collect::proc::parse_meminfo(&text)
            .ok_or_else(|| "/proc/meminfo has no MemTotal".to_string())?;
        Ok(format!("{} MiB", total >> 20))
    }

    fn read(&mut self, sample: &mut Sample) {
        let Some(text) = self.meminfo.read() else {
            return;
        };
        if let Some((total, used)) = crate::collect::proc::parse_meminfo(text) {
            sample.mem_total_bytes = Some(total);
            sample.mem_used_bytes = Some(used);
        }
        let kib = |key| crate::collect::proc::kib_field(text, key);
        if let (Some(total), Some(free)) = (kib("SwapTotal"), kib("SwapFree")) {
            sample.swap_used_bytes = Some(total.saturating_sub(free));
            sample.swap_total_bytes = Some(total);
        }
    }
}

/// The 1, 5 and 15-minute load averages of `/proc/loadavg` ("0.52 0.40 0.33 1/123 4567").
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    let mut load = [0.0; 3];
    for slot in &mut load {
        *slot = fields
            .next()
            .flatten()
            .filter(|v| v.is_finite() && *v >= 0.0)?;
    }
    Some(load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_averages() {
        assert_eq!(
            parse_loadavg("0.52 0.40 0.33 1/123 4567\n"),
            Some([0.52, 0.40, 0.33])
        );
        assert_eq!(parse_loadavg("0.52 0.40"), None);
        assert_eq!(parse_loadavg("x 0.40 0.33 1/1 1"), None);
        assert_eq!(parse_loadavg("-1 0 0 1/1 1"), None);
    }

    const STAT_BEFORE: &str = "cpu  400 0 200 1400 0 0 0 0 0 0
cpu0 100 0 50 350 0 0 0 0 0 0
cpu1 100 0 50 350 0 0 0 0 0 0
cpu3 200 0 100 700 0 0 0 0 0 0
intr 12345
";
    // cpu1 went offline; cpu3 spent 60 of 100 ticks busy, cpu0 25 of 100 (10 of them iowait).
    const STAT_AFTER: &str = "cpu  500 0 250 1500 10 0 0 0 0 0
cpu0 115 0 55 420 10 0 0 0 0 0
cpu3 240 0 120 740 0 0 0 0 0 0
";

    #[test]
    fn per_core_loads_by_hand_with_a_core_gone_offline() {
        let before = parse_proc_stat(STAT_BEFORE);
        let after = parse_proc_stat(STAT_AFTER);
        assert_eq!(before.len(), 3);
        assert_eq!(after.iter().map(|t| t.id).collect::<Vec<_>>(), vec![0, 3]);
        let l = loads(&before, &after);
        assert_eq!(l, vec![(0, 20.0), (3, 60.0)]);
        // Garbage and truncated lines are skipped, and so are counters that overflow together.
        assert!(parse_proc_stat("cpu0 1 2\ncpuX 1 2 3 4\ncpu1 a b c d").is_empty());
        assert!(parse_proc_stat("cpu0 18446744073709551615 1 1 1").is_empty());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_ids("0-3,6\n"), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_ids("0"), vec![0]);
        assert!(parse_cpu_ids("garbage").is_empty());
        assert!(parse_cpu_ids("").is_empty());
    }
}

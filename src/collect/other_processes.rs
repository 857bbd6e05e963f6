//! Who else ran while a condition was measured: every process's CPU time from `/proc/PID/stat`,
//! taken before and after the condition (two scans, nothing in between), minus edgeprof and
//! everything it started. A process is counted on the condition's cores when the CPU it last ran
//! on is one of them (the kernel's `processor` field: an approximation for a process that moved).
//! A process that both started and ended between the scans is not seen by name; the kernel's
//! per-CPU accounting (`/proc/stat`) still counts its time: whatever the cores were busy beyond
//! what the named processes and edgeprof's own took is reported as unseen processes, and the
//! time the hypervisor gave other virtual machines (steal) on its own line — between scans that
//! see the same processes of edgeprof's own (one of ours that started or ended between them took
//! time no scan shows).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// One process in a scan.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    name: String,
    ppid: u32,
    ticks: u64,
    /// User + system ticks of its children that ended and were waited for (cutime + cstime).
    reaped_ticks: u64,
    processor: Option<usize>,
    /// Resident pages.
    rss_pages: u64,
}

/// Every process's CPU time at one moment, and each CPU's busy and stolen ticks.
#[derive(Debug, Clone)]
pub struct Scan {
    at: Instant,
    by_pid: HashMap<u32, Seen>,
    /// Per CPU id: (busy ticks: user, nice, system, irq, softirq; stolen ticks).
    cpus: HashMap<usize, (u64, u64)>,
}

/// `/proc/stat`'s per-CPU lines: busy (user, nice, system, irq, softirq) and steal ticks.
fn parse_cpus(text: &str) -> HashMap<usize, (u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id: usize = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            // user nice system idle iowait irq softirq steal …
            Some((id, (at(0) + at(1) + at(2) + at(5) + at(6), at(7))))
        })
        .collect()
}

/// `/proc/PID/stat` of one process: name, parent, user + system ticks, last CPU.
fn parse(text: &str) -> Option<Seen> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name: state is field 3, ppid 4, utime 14, stime 15, rss 24, processor 39.
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let reaped = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some(Seen {
        name,
        ppid,
        ticks: utime.saturating_add(stime),
        reaped_ticks: reaped(13).saturating_add(reaped(14)),
        processor: fields.get(36).and_then(|p| p.parse().ok()),
        rss_pages: fields.get(21).and_then(|p| p.parse().ok()).unwrap_or(0),
    })
}

impl Scan {
    /// Every process under `root`/proc now.
    pub fn take(root: &Path) -> Scan {
        let at = Instant::now();
        let mut by_pid = HashMap::new();
        for (pid, dir) in crate::collect::proc::pids(root) {
            // Gone between the listing and the read: nothing to count.
            if let Some(seen) = std::fs::read_to_string(dir.join("stat"))
                .ok()
                .and_then(|t| parse(&t))
            {
                by_pid.insert(pid, seen);
            }
        }
        let cpus = std::fs::read_to_string(root.join("proc/stat"))
            .map(|t| parse_cpus(&t))
            .unwrap_or_default();
        Scan { at, by_pid, cpus }
    }

    /// When the scan was taken.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// The CPU ticks `pid`, seen later as `seen`, took since this scan. A pid whose ticks went
    /// down is another process (the number reused): it counts from zero. The name is no test: a
    /// kernel worker renames itself with its work.
    fn ticks_since(&self, pid: u32, seen: &Seen) -> u64 {
        let earlier = self
            .by_pid
            .get(&pid)
            .filter(|b| b.ticks <= seen.ticks)
            .map_or(0, |b| b.ticks);
        seen.ticks - earlier
    }

    /// Whether `pid` is `own` or descends from it in this scan.
    fn is_ours(&self, mut pid: u32, own: u32) -> bool {
        for _ in 0..64 {
            if pid == own {
                return true;
            }
            match self.by_pid.get(&pid) {
                Some(seen) if seen.ppid != 0 && seen.ppid != pid => pid = seen.ppid,
                _ => return false,
            }
        }
        false
    }
}

/// One process of the machine between two scans, for a process list (the Monitor tab's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub ppid: u32,
    pub name: String,
    /// Percent of one core between the scans.
    pub cpu_pct: f64,
    pub rss_bytes: u64,
    /// edgeprof itself or something it started (a sweep's workers, their children).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ours: bool,
}

/// Bytes per page of `/proc/PID/stat`'s `rss`.
fn page_bytes() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE) {
        Ok(Some(n)) if n > 0 => n as u64,
        _ => 4096,
    }
}

/// Every process in `after` with its CPU share since `before` and its resident memory, the
/// ones that are `own` or descend from it marked; most CPU first.
pub fn table(before: &Scan, after: &Scan, own: u32) -> Vec<ProcessRow> {
    let wall = after.at.duration_since(before.at).as_secs_f64();
    let per_tick = 100.0 / crate::collect::proc::ticks_per_second() / wall.max(1e-3);
    let page = page_bytes();
    let mut rows: Vec<ProcessRow> = after
        .by_pid
        .iter()
        .map(|(pid, seen)| ProcessRow {
            pid: *pid,
            ppid: seen.ppid,
            name: seen.name.clone(),
            cpu_pct: before.ticks_since(*pid, seen) as f64 * per_tick,
            rss_bytes: seen.rss_pages.saturating_mul(page),
            ours: after.is_ours(*pid, own),
        })
        .collect();
    rows.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct).then(a.pid.cmp(&b.pid)));
    rows
}

/// Another process's share of the condition's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Other {
    pub pid: u32,
    pub name: String,
    /// Percent of one core over the condition's wall time.
    pub cpu_pct: f64,
}

/// What other processes took while a condition ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disturbance {
    /// Their CPU time on the condition's cores, in percent of one core over its wall time.
    pub others_cpu_pct: f64,
    /// The three that took most, most first.
    pub top: Vec<Other>,
}

/// Others' CPU use at or above this (percent of one core) disturbs a condition.
pub const DISTURBED_PCT: f64 = 20.0;

impl Disturbance {
    pub fn disturbed(&self) -> bool {
        self.others_cpu_pct >= DISTURBED_PCT
    }

    /// "yes (pid 42) 98 %, …".
    pub fn by_whom(&self) -> String {
        by_whom(&self.top)
    }

    /// One figure for several stretches of a condition (its worker runs, when other conditions'
    /// runs came between them): each stretch's figures weighted by its wall seconds, a process
    /// seen in several added up, the three that took most kept.
    pub fn combine(parts: &[(Disturbance, f64)]) -> Disturbance {
        let wall: f64 = parts.iter().map(|(_, w)| w.max(0.0)).sum();
        let weight = |w: f64| if wall > 0.0 { w.max(0.0) / wall } else { 0.0 };
        let mut top: Vec<Other> = Vec::new();
        for (d, w) in parts {
            for o in &d.top {
                let share = o.cpu_pct * weight(*w);
                match top.iter_mut().find(|t| t.pid == o.pid && t.name == o.name) {
                    Some(t) => t.cpu_pct += share,
                    None => top.push(Other {
                        cpu_pct: share,
                        ..o.clone()
                    }),
                }
            }
        }
        top.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
        top.truncate(3);
        Disturbance {
            others_cpu_pct: parts
                .iter()
                .map(|(d, w)| d.others_cpu_pct * weight(*w))
                .sum(),
            top,
        }
    }
}

/// "yes (pid 42) 98 %, unseen processes 12 %, …".
pub fn by_whom(others: &[Other]) -> String {
    others
        .iter()
        .map(Other::label)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Other {
    /// "yes (pid 42) 98 %", or for time no process can be named, "unseen processes 12 %".
    pub fn label(&self) -> String {
        if self.pid == 0 {
            format!("{} {:.0} %", self.name, self.cpu_pct)
        } else {
            format!("{} (pid {}) {:.0} %", self.name, self.pid, self.cpu_pct)
        }
    }
}

/// Named in place of a process: busy time on the cores that no process seen in both scans
/// accounts for (short-lived processes, ones that moved between cores).
pub const UNSEEN: &str = "unseen processes";
/// Named in place of a process: time the hypervisor gave other virtual machines.
pub const STEAL: &str = "other virtual machines (steal)";
/// Less than this (percent of one core) of unseen or stolen time is not reported.
const UNNAMED_FLOOR_PCT: f64 = 2.0;

/// What processes other than `own` and its descendants took between `before` and `after`, on
/// `cores` (every core when None).
pub fn between(before: &Scan, after: &Scan, own: u32, cores: Option<&[usize]>) -> Disturbance {
    let mut others = each_between(before, after, own, cores);
    let others_cpu_pct = others.iter().map(|o| o.cpu_pct).sum();
    others.truncate(3);
    Disturbance {
        others_cpu_pct,
        top: others,
    }
}

/// Every process other than `own` and its descendants that took CPU on `cores` between
/// `before` and `after`, with its share of that stretch, most first.
pub fn each_between(before: &Scan, after: &Scan, own: u32, cores: Option<&[usize]>) -> Vec<Other> {
    let wall = after.at.duration_since(before.at).as_secs_f64();
    let per_tick = 100.0 / crate::collect::proc::ticks_per_second() / wall.max(1e-3);
    let mut others: Vec<Other> = after
        .by_pid
        .iter()
        .filter(|(pid, _)| !after.is_ours(**pid, own) && !before.is_ours(**pid, own))
        .filter(|(_, seen)| match (cores, seen.processor) {
            (Some(cores), Some(cpu)) => cores.contains(&cpu),
            _ => true,
        })
        .filter_map(|(pid, seen)| {
            let ticks = before.ticks_since(*pid, seen);
            (ticks > 0).then(|| Other {
                pid: *pid,
                name: seen.name.clone(),
                cpu_pct: ticks as f64 * per_tick,
            })
        })
        .collect();
    // What the kernel counted on the cores beyond the named processes and our own.
    let on = |cpu: &usize| cores.is_none_or(|c| c.contains(cpu));
    let delta = |pick: fn(&(u64, u64)) -> u64| -> Option<u64> {
        let mut sum = 0u64;
        let mut any = false;
        for (cpu, now) in after.cpus.iter().filter(|(c, _)| on(c)) {
            let then = before.cpus.get(cpu)?;
            sum += pick(now).saturating_sub(pick(then));
            any = true;
        }
        any.then_some(sum)
    };
    // Only where our own processes are the same in both scans: one of ours that started or
    // ended between them took time no scan shows, which would read as someone else's.
    let ours_in = |scan: &Scan| -> Vec<u32> {
        let mut pids: Vec<u32> = scan
            .by_pid
            .keys()
            .copied()
            .filter(|pid| scan.is_ours(*pid, own))
            .collect();
        pids.sort_unstable();
        pids
    };
    let steady = ours_in(before) == ours_in(after);
    if let (true, Some(busy), Some(steal)) = (steady, delta(|c| c.0), delta(|c| c.1)) {
        // Our processes' own time, and that of our children which ended between the scans (a
        // worker that started after the first and was waited for before the second): the
        // kernel adds it to the parent's reaped ticks, on whichever cores the child ran.
        let ours: u64 = after
            .by_pid
            .iter()
            .filter(|(pid, _)| after.is_ours(**pid, own))
            .map(|(pid, seen)| {
                let (ticks, reaped) = before
                    .by_pid
                    .get(pid)
                    .map_or((0, 0), |b| (b.ticks, b.reaped_ticks));
                let own_ticks = if seen.processor.is_none_or(|p| on(&p)) {
                    seen.ticks.saturating_sub(ticks)
                } else {
                    0
                };
                own_ticks + seen.reaped_ticks.saturating_sub(reaped)
            })
            .sum();
        let named: f64 = others.iter().map(|o| o.cpu_pct).sum();
        let unseen = busy.saturating_sub(ours) as f64 * per_tick - named;
        for (name, pct) in [(UNSEEN, unseen), (STEAL, steal as f64 * per_tick)] {
            if pct >= UNNAMED_FLOOR_PCT {
                others.push(Other {
                    pid: 0,
                    name: name.to_string(),
                    cpu_pct: pct,
                });
            }
        }
    }
    others.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
    others
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn time_no_scan_names_is_counted_as_unseen_and_steal_on_its_own() {
        let stat = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0\n";
        assert_eq!(parse_cpus(stat).get(&0), Some(&(10, 0)));
        let seen = |ppid: u32, ticks: u64| Seen {
            name: if ppid == 1 {
                "edgeprof".into()
            } else {
                "cc1".into()
            },
            ppid,
            ticks,
            reaped_ticks: 0,
            processor: Some(0),
            rss_pages: 2,
        };
        let t0 = Instant::now();
        let before = Scan {
            at: t0,
            by_pid: HashMap::from([(10, seen(1, 0)), (20, seen(1, 0))]),
            cpus: HashMap::from([(0, (0, 0)), (1, (0, 0))]),
        };
        // One second later: ours (pid 10) took 20 ticks on core 0, cc1 (pid 20) 10; core 0 was
        // busy 60 ticks and lost 5 to other virtual machines; core 1 busy 100.
        let after = Scan {
            at: t0 + std::time::Duration::from_secs(1),
            by_pid: HashMap::from([(10, seen(1, 20)), (20, seen(2, 10))]),
            cpus: HashMap::from([(0, (60, 5)), (1, (100, 0))]),
        };
        let per_tick = 100.0 / crate::collect::proc::ticks_per_second();
        let o = each_between(&before, &after, 10, Some(&[0]));
        let find = |name: &str| o.iter().find(|x| x.name == name).map(|x| x.cpu_pct);
        assert_eq!(find("cc1"), Some(10.0 * per_tick));
        // 60 busy − 20 ours − 10 named = 30 ticks nobody seen took.
        assert_eq!(find(UNSEEN), Some(30.0 * per_tick));
        assert_eq!(find(STEAL), Some(5.0 * per_tick));
        let d = between(&before, &after, 10, Some(&[0]));
        assert!(d.by_whom().contains("unseen processes"), "{d:?}");
        // Without the kernel's figures (a fixture tree): the named processes only.
        let bare = |s: &Scan| Scan {
            cpus: HashMap::new(),
            ..s.clone()
        };
        let o = each_between(&bare(&before), &bare(&after), 10, Some(&[0]));
        assert_eq!(o.len(), 1);
        // The process list: every process, ours marked, most CPU first.
        let rows = table(&before, &after, 10);
        assert_eq!(rows.iter().map(|r| r.pid).collect::<Vec<_>>(), [10, 20]);
        assert!(rows[0].ours && !rows[1].ours);
        assert_eq!(rows[0].cpu_pct, 20.0 * per_tick);
        assert_eq!(rows[1].rss_bytes, 2 * page_bytes());
    }

    #[test]
    fn a_worker_that_started_and_ended_between_the_scans_is_ours_not_unseen() {
        let edgeprof = |ticks: u64, reaped_ticks: u64| Seen {
            name: "edgeprof".into(),
            ppid: 1,
            ticks,
            reaped_ticks,
            processor: Some(1),
            rss_pages: 2,
        };
        let t0 = Instant::now();
        let before = Scan {
            at: t0,
            by_pid: HashMap::from([(10, edgeprof(5, 0))]),
            cpus: HashMap::from([(0, (0, 0)), (1, (0, 0))]),
        };
        // Its worker ran 40 ticks on core 0 and was waited for; edgeprof itself took 2 on core
        // 1; core 0 was busy 45 ticks: 5 nobody seen took.
        let after = Scan {
            at: t0 + std::time::Duration::from_secs(1),
            by_pid: HashMap::from([(10, edgeprof(7, 40))]),
            cpus: HashMap::from([(0, (45, 0)), (1, (2, 0))]),
        };
        let per_tick = 100.0 / crate::collect::proc::ticks_per_second();
        let o = each_between(&before, &after, 10, Some(&[0]));
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].name, UNSEEN);
        assert_eq!(o[0].cpu_pct, 5.0 * per_tick);
        assert!(!between(&before, &after, 10, Some(&[0])).disturbed());
    }

    #[test]
    fn a_stat_line_gives_name_parent_ticks_and_cpu() {
        let line = "4242 (my (odd) job) R 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 \
                    100 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";
        let Some(seen) = parse(line) else {
            panic!("not parsed")
        };
        assert_eq!(seen.name, "my (odd) job");
        assert_eq!(seen.ppid, 1);
        assert_eq!(seen.ticks, 300);
        assert_eq!(seen.processor, Some(3));
        assert_eq!(seen.rss_pages, 100);
    }

    #[test]
    fn a_busy_process_is_named_and_our_own_children_are_not() {
        // This test's own child burns CPU: as ours it is left out; as someone else's, named.
        let mut hog = match std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done"])
            .spawn()
        {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let root = Path::new("/");
        let before = Scan::take(root);
        std::thread::sleep(Duration::from_millis(600));
        let after = Scan::take(root);
        let _ = hog.kill();
        let _ = hog.wait();
        let ours = each_between(&before, &after, std::process::id(), None);
        assert!(
            ours.iter().all(|o| o.pid != hog.id()),
            "{ours:?} names our own child"
        );
        // Seen from no process's point of view, nothing here is its own.
        let theirs = each_between(&before, &after, u32::MAX, None);
        let Some(named) = theirs.iter().find(|o| o.pid == hog.id()) else {
            panic!("the busy child is not among {theirs:?}")
        };
        assert_eq!(named.name, "sh");
        // Busy for the whole window on a loaded machine still gets a good share of a core.
        assert!(named.cpu_pct > 10.0, "{named:?}");
        let summary = between(&before, &after, u32::MAX, None);
        assert!(summary.disturbed(), "{summary:?}");
        assert!(summary.top.len() <= 3);
    }

    #[test]
    fn stretches_combine_weighted_by_their_wall_time() {
        let other = |pid: u32, name: &str, cpu_pct: f64| Other {
            pid,
            name: name.into(),
            cpu_pct,
        };
        // 1 s with a hog at 90 %, 3 s quiet but for a shell at 4 %.
        let busy = Disturbance {
            others_cpu_pct: 90.0,
            top: vec![other(7, "yes", 90.0)],
        };
        let quiet = Disturbance {
            others_cpu_pct: 4.0,
            top: vec![other(8, "sh", 4.0)],
        };
        let d = Disturbance::combine(&[(busy.clone(), 1.0), (quiet, 3.0)]);
        assert!((d.others_cpu_pct - 25.5).abs() < 1e-9, "{d:?}");
        assert_eq!(d.top[0].name, "yes");
        assert!((d.top[0].cpu_pct - 22.5).abs() < 1e-9);
        assert!(d.disturbed());
        // The same process in two stretches adds up; no wall time at all reads 0.
        let twice = Disturbance::combine(&[(busy.clone(), 1.0), (busy.clone(), 1.0)]);
        assert_eq!(twice.top.len(), 1);
        assert!((twice.top[0].cpu_pct - 90.0).abs() < 1e-9);
        assert_eq!(Disturbance::combine(&[(busy, 0.0)]).others_cpu_pct, 0.0);
    }
}

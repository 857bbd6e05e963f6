//! Adaptive repetition: which of a condition's repeats other processes disturbed, and how many
//! more repeats it needs — to replace the disturbed ones (`measure.rerun_disturbed`) or to narrow
//! the interval of its median to `measure.target_ci` — never more than `measure.max_repeats` in
//! all.
//!
//! While a worker runs, a [`Watch`] scans every process's CPU time at most every
//! [`SCAN_EVERY`] (and when a repeat's times arrive) and keeps, per stretch between two scans,
//! who else ran on the condition's cores. A repeat's own stretch of time ends when its last time
//! arrived and began its summed latencies earlier; what others took there, in percent of one
//! core, is the overlap-weighted share of the stretches it spans (at least the last 250 ms before
//! its end: CPU time is counted in 10 ms ticks). A repeat is disturbed at the
//! same threshold as a whole condition ([`DISTURBED_PCT`]). A process that ends between two
//! scans still counts, through the kernel's per-CPU accounting (see [`others`]).

use crate::collect::other_processes::{self as others, Other, Scan, DISTURBED_PCT};
use crate::config::Measure;
use crate::protocol::outcome::WorkerEvent;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The most often a [`Watch`] scans `/proc` (each scan reads every process's `stat`).
pub const SCAN_EVERY: Duration = Duration::from_millis(250);
/// A repeat shorter than this is judged by this much time before its end.
const MIN_WINDOW: Duration = Duration::from_millis(250);
/// Scans closer than this are not taken even at a repeat's boundary.
const SCAN_AT_LEAST: Duration = Duration::from_millis(20);

/// One repeat of a condition: which worker run measured it, who else took CPU meanwhile, and
/// whether its statistics leave it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatNote {
    /// 1 for the condition's first worker run, 2, 3, … for the plan's other processes and the
    /// runs that added repeats.
    pub run: usize,
    /// Other processes' CPU time on the condition's cores during the repeat, in percent of one
    /// core (None when no scan covered it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cpu_pct: Option<f64>,
    /// The three that took most, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<Other>,
    /// Left out of the statistics: disturbed, and re-measured under `measure.rerun_disturbed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub excluded: bool,
}

impl RepeatNote {
    pub fn disturbed(&self) -> bool {
        self.others_cpu_pct.is_some_and(|p| p >= DISTURBED_PCT)
    }
}

/// How a condition's repeats came to be: one note per repeat (in the order of the raw
/// latencies), and whether the interval of the median reached its target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repetition {
    pub repeats: Vec<RepeatNote>,
    /// Worker runs made for the condition (`measure.processes` when nothing was added).
    pub runs: usize,
    /// Disturbed repeats measured again.
    #[serde(default)]
    pub remeasured: usize,
    /// `measure.target_ci`: the relative half-width asked of the median's 95 % interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ci: Option<f64>,
    /// The relative half-width of the kept repeats' interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_half_width: Option<f64>,
    /// Why repetition stopped short of what it wanted (the repeat limit, a failed run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<String>,
}

impl Repetition {
    /// Whether the target interval was reached (None without a target).
    pub fn reached(&self) -> Option<bool> {
        let target = self.target_ci?;
        Some(self.relative_half_width.is_some_and(|r| r <= target))
    }

    /// The repeats that enter the statistics.
    pub fn kept(&self, raw: &[Vec<f64>]) -> Vec<Vec<f64>> {
        kept(&self.repeats, raw)
    }

    /// The kept repeats that were disturbed, with the processes that took most over them.
    pub fn disturbed_kept(&self) -> Option<(usize, Vec<Other>)> {
        let hit: Vec<&RepeatNote> = self
            .repeats
            .iter()
            .filter(|n| !n.excluded && n.disturbed())
            .collect();
        if hit.is_empty() {
            return None;
        }
        Some((hit.len(), merge_top(hit.iter().flat_map(|n| n.top.iter()))))
    }

    /// "target ±2.0 % not reached (±3.1 %): 20 repeats, …"; without a target, why a worker run
    /// of the plan failed ("worker run 2 of the condition failed: …"); else None.
    pub fn shortfall(&self) -> Option<String> {
        match self.reached() {
            Some(false) => {}
            Some(true) => return None,
            None => return self.short.clone(),
        }
        let target = self.target_ci.unwrap_or(0.0);
        let got = self
            .relative_half_width
            .map(|r| format!(" (±{})", percent(r)))
            .unwrap_or_default();
        Some(format!(
            "target ±{} not reached{got}: {}",
            percent(target),
            self.short.as_deref().unwrap_or("too few repeats")
        ))
    }
}

/// A relative figure in percent with two significant digits at least: "3.1 %", "0.25 %".
pub fn percent(fraction: f64) -> String {
    let p = 100.0 * fraction;
    match p.abs() {
        a if a >= 1.0 || a == 0.0 => format!("{p:.1} %"),
        a if a >= 0.1 => format!("{p:.2} %"),
        _ => format!("{p:.3} %"),
    }
}

/// The repeats of `raw` that `notes` do not leave out (a repeat without a note is kept).
fn kept(notes: &[RepeatNote], raw: &[Vec<f64>]) -> Vec<Vec<f64>> {
    raw.iter()
        .enumerate()
        .filter(|(i, _)| !notes.get(*i).is_some_and(|n| n.excluded))
        .map(|(_, r)| r.clone())
        .collect()
}

/// The processes of several repeats, each once with its largest share, most first, three.
fn merge_top<'a>(all: impl Iterator<Item = &'a Other>) -> Vec<Other> {
    let mut merged: Vec<Other> = Vec::new();
    for o in all {
        match merged
            .iter_mut()
            .find(|m| m.pid == o.pid && m.name == o.name)
        {
            Some(m) => m.cpu_pct = m.cpu_pct.max(o.cpu_pct),
            None => merged.push(o.clone()),
        }
    }
    merged.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
    merged.truncate(3);
    merged
}

/// What others took between two scans.
struct Stretch {
    from: Instant,
    to: Instant,
    others: Vec<Other>,
}

/// Watches who else runs while one worker run measures (see the module's description).
pub struct Watch {
    root: PathBuf,
    own: u32,
    cores: Option<Vec<usize>>,
    last: Scan,
    stretches: Vec<Stretch>,
    /// The repeat the latest times belong to.
    repeat: usize,
    /// Per repeat, when its latest time arrived.
    arrived: Vec<Option<Instant>>,
}

impl Watch {
    /// Starts watching for the edgeprof process `own` on `cores` (every core when None).
    pub fn start(root: &Path, own: u32, cores: Option<&[usize]>) -> Watch {
        Watch {
            root: root.to_path_buf(),
            own,
            cores: cores.map(<[usize]>::to_vec),
            last: Scan::take(root),
            stretches: Vec::new(),
            repeat: 0,
            arrived: Vec::new(),
        }
    }

    fn scan(&mut self) {
        let now = Scan::take(&self.root);
        let others = others::each_between(&self.last, &now, self.own, self.cores.as_deref());
        self.stretches.push(Stretch {
            from: self.last.at(),
            to: now.at(),
            others,
        });
        self.last = now;
    }

    /// Follows the worker's progress, scanning when one is due.
    pub fn event(&mut self, event: &WorkerEvent) {
        let since = self.last.at().elapsed();
        match event {
            WorkerEvent::Repeat(r) => {
                // A boundary: scan there unless one was just taken.
                if since >= SCAN_AT_LEAST && !self.arrived.is_empty() {
                    self.scan();
                }
                self.repeat = *r;
            }
            WorkerEvent::Timed(_) => {
                if self.arrived.len() <= self.repeat {
                    self.arrived.resize(self.repeat + 1, None);
                }
                self.arrived[self.repeat] = Some(Instant::now());
                if since >= SCAN_EVERY {
                    self.scan();
                }
            }
            _ => {
                if since >= SCAN_EVERY {
                    self.scan();
                }
            }
        }
    }

    /// The notes of `repeats` (the run's raw times), this being worker run number `run`.
    pub fn finish(mut self, repeats: &[Vec<f64>], run: usize) -> Vec<RepeatNote> {
        self.scan();
        repeats
            .iter()
            .enumerate()
            .map(|(i, times)| {
                let end = self.arrived.get(i).copied().flatten();
                // CPU time is counted in ticks (10 ms): a shorter window would read 0 % or
                // 200 % by chance, so a short repeat is judged by the time before its end.
                let length = Duration::from_secs_f64(times.iter().sum::<f64>().max(0.0) / 1e3)
                    .max(MIN_WINDOW);
                let (others_cpu_pct, top) = match end {
                    Some(end) => self.share(end.checked_sub(length).unwrap_or(end), end),
                    None => (None, Vec::new()),
                };
                RepeatNote {
                    run,
                    others_cpu_pct,
                    top,
                    excluded: false,
                }
            })
            .collect()
    }

    /// Others' share of `[from, to]`: each stretch's figures weighted by its overlap.
    fn share(&self, from: Instant, to: Instant) -> (Option<f64>, Vec<Other>) {
        // A repeat shorter than a scan's resolution takes the figures of the stretch it lies in.
        let length = to.duration_since(from).max(Duration::from_micros(1));
        let mut covered = false;
        let mut total = 0.0;
        let mut by_pid: Vec<Other> = Vec::new();
        for s in &self.stretches {
            let start = s.from.max(from);
            let end = s.to.min(to);
            let weight = if to <= from {
                // A zero-length repeat: the stretch holding its moment.
                if s.from <= to && to <= s.to {
                    1.0
                } else {
                    0.0
                }
            } else if end > start {
                end.duration_since(start).as_secs_f64() / length.as_secs_f64()
            } else {
                0.0
            };
            if weight <= 0.0 {
                continue;
            }
            covered = true;
            for o in &s.others {
                let share = o.cpu_pct * weight;
                total += share;
                match by_pid
                    .iter_mut()
                    .find(|b| b.pid == o.pid && b.name == o.name)
                {
                    Some(b) => b.cpu_pct += share,
                    None => by_pid.push(Other {
                        cpu_pct: share,
                        ..o.clone()
                    }),
                }
            }
        }
        by_pid.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
        by_pid.retain(|o| o.cpu_pct >= 0.5);
        by_pid.truncate(3);
        (covered.then_some(total), by_pid)
    }
}

/// Why a condition gets more repeats.
#[derive(Debug, Clone, PartialEq)]
pub enum More {
    /// The plan's next share of `measure.repeats`, in a worker process of its own
    /// (`measure.processes`); no addition, so front-ends need not announce it.
    Spread { repeats: usize },
    /// Measure this many again: disturbed repeats left fewer than `measure.repeats` clean ones.
    Disturbed { repeats: usize, by: Vec<Other> },
    /// This many more to narrow the median's interval from `relative` towards the target.
    Interval { repeats: usize, relative: f64 },
}

impl More {
    pub fn repeats(&self) -> usize {
        match self {
            More::Spread { repeats }
            | More::Disturbed { repeats, .. }
            | More::Interval { repeats, .. } => *repeats,
        }
    }

    /// "2 repeats disturbed by yes (pid 42) 97 %" / "median ±3.4 %, target ±2.0 %".
    pub fn reason(&self, target: Option<f64>) -> String {
        match self {
            More::Spread { .. } => "the next worker process of the plan".to_string(),
            More::Disturbed { repeats, by } => format!(
                "{repeats} repeat{} disturbed by {}",
                if *repeats == 1 { "" } else { "s" },
                if by.is_empty() {
                    "other processes".to_string()
                } else {
                    others::by_whom(by)
                }
            ),
            More::Interval { relative, .. } => format!(
                "median ±{}, target ±{}",
                percent(*relative),
                percent(target.unwrap_or(0.0))
            ),
        }
    }
}

/// Leaves disturbed repeats out of the statistics when they are to be re-measured
/// (`measure.rerun_disturbed` > 0) and at least one clean repeat remains; otherwise keeps all.
pub fn exclude_disturbed(m: &Measure, notes: &mut [RepeatNote]) {
    let any_clean = notes.iter().any(|n| !n.disturbed());
    for n in notes.iter_mut() {
        n.excluded = m.rerun_disturbed > 0 && any_clean && n.disturbed();
    }
}

/// The relative half-width of the 95 % interval of the median over `kept` repeats, the levels
/// of the repeats measured alongside being `pool` ([`crate::stats::median_interval_pooled`]).
pub fn relative_half_width(kept: &[Vec<f64>], pool: &[f64]) -> Option<f64> {
    let (low, high) =
        crate::stats::median_interval_pooled(kept, pool, crate::stats::BOOTSTRAP_ROUNDS)?;
    let median = crate::stats::median(&kept.concat())?;
    (median > 0.0).then(|| (high - low) / 2.0 / median)
}

/// The repeats worker process `index` (from 0) of a condition measures when its `repeats` are
/// spread over `processes` (the earlier processes take one more when they do not divide).
pub fn share(repeats: usize, processes: usize, index: usize) -> usize {
    let processes = processes.clamp(1, repeats.max(1));
    if index >= processes {
        return 0;
    }
    repeats / processes + usize::from(index < repeats % processes)
}

/// What to measure next, if anything: `notes` and `raw` cover every repeat so far (notes already
/// through [`exclude_disturbed`]), made by `runs` worker processes; `disturbed_rounds` is how
/// many re-measurements of disturbed repeats were made; `pool` the levels of the repeats
/// measured alongside (for the interval). The plan's own processes come first,
/// then replacing disturbed repeats, then narrowing the interval.
pub fn next(
    m: &Measure,
    notes: &[RepeatNote],
    raw: &[Vec<f64>],
    runs: usize,
    disturbed_rounds: usize,
    pool: &[f64],
) -> Option<More> {
    if raw.len() < m.repeats {
        let missing = m.repeats - raw.len();
        // Past the planned processes with repeats missing (a run stopped part-way kept only
        // those it finished): the rest in one more run.
        let repeats = if runs >= m.processes {
            missing
        } else {
            share(m.repeats, m.processes, runs).min(missing)
        };
        if repeats > 0 {
            return Some(More::Spread { repeats });
        }
    }
    let room = m.max_repeats.saturating_sub(raw.len());
    if room == 0 {
        return None;
    }
    let clean = notes.iter().filter(|n| !n.disturbed()).count();
    if m.rerun_disturbed > disturbed_rounds && clean < m.repeats {
        let disturbed: Vec<&RepeatNote> = notes.iter().filter(|n| n.disturbed()).collect();
        if !disturbed.is_empty() {
            return Some(More::Disturbed {
                repeats: (m.repeats - clean).min(room),
                by: merge_top(disturbed.iter().flat_map(|n| n.top.iter())),
            });
        }
    }
    let target = m.target_ci?;
    let kept = kept(notes, raw);
    let relative = relative_half_width(&kept, pool)?;
    if relative <= target {
        return None;
    }
    // The interval narrows as 1/√n: the iterations that would reach the target, in repeats of
    // the size seen so far, one at least.
    let iterations: usize = kept.iter().map(Vec::len).sum();
    let per_repeat = (iterations as f64 / kept.len().max(1) as f64).max(1.0);
    let wanted = iterations as f64 * (relative / target).powi(2);
    let repeats = ((wanted - iterations as f64) / per_repeat).ceil().max(1.0) as usize;
    Some(More::Interval {
        repeats: repeats.min(room),
        relative,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measure(repeats: usize, max: usize, rerun: usize, target: Option<f64>) -> Measure {
        let Ok(config) = crate::config::parse("", Path::new("test.toml")) else {
            panic!("the empty config does not parse")
        };
        let mut m = config.measure;
        m.repeats = repeats;
        m.max_repeats = max;
        m.rerun_disturbed = rerun;
        m.target_ci = target;
        m
    }

    fn note(pct: f64) -> RepeatNote {
        RepeatNote {
            run: 1,
            others_cpu_pct: Some(pct),
            top: vec![Other {
                pid: 7,
                name: "hog".into(),
                cpu_pct: pct,
            }],
            excluded: false,
        }
    }

    /// Latencies spread evenly around 10 ms by ±`spread`.
    fn repeat(n: usize, spread: f64) -> Vec<f64> {
        (0..n)
            .map(|i| 10.0 + spread * ((i as f64 / n as f64) * 2.0 - 1.0))
            .collect()
    }

    #[test]
    fn disturbed_repeats_are_replaced_until_enough_are_clean() {
        let m = measure(3, 10, 1, None);
        let mut notes = vec![note(0.0), note(95.0), note(90.0)];
        exclude_disturbed(&m, &mut notes);
        assert_eq!(
            notes.iter().map(|n| n.excluded).collect::<Vec<_>>(),
            [false, true, true]
        );
        let raw = vec![repeat(10, 1.0); 3];
        let Some(More::Disturbed { repeats, by }) = next(&m, &notes, &raw, 2, 0, &[]) else {
            panic!("nothing re-measured")
        };
        assert_eq!(repeats, 2);
        assert_eq!(by[0].name, "hog");
        // The one round allowed is spent: nothing more for disturbance (and no target).
        assert_eq!(next(&m, &notes, &raw, 2, 1, &[]), None);
    }

    #[test]
    fn without_rerun_or_with_nothing_clean_every_repeat_is_kept() {
        let mut notes = vec![note(0.0), note(95.0)];
        exclude_disturbed(&measure(2, 10, 0, None), &mut notes);
        assert!(notes.iter().all(|n| !n.excluded));
        let mut notes = vec![note(80.0), note(95.0)];
        exclude_disturbed(&measure(2, 10, 2, None), &mut notes);
        assert!(notes.iter().all(|n| !n.excluded));
    }

    #[test]
    fn the_repeat_limit_bounds_every_addition() {
        let m = measure(3, 4, 5, Some(0.0001));
        let mut notes = vec![note(0.0), note(95.0), note(90.0)];
        exclude_disturbed(&m, &mut notes);
        let raw = vec![repeat(10, 1.0); 3];
        assert_eq!(
            next(&m, &notes, &raw, 2, 0, &[]).map(|x| x.repeats()),
            Some(1)
        );
        let raw = vec![repeat(10, 1.0); 4];
        notes.push(note(0.0));
        assert_eq!(next(&m, &notes, &raw, 2, 1, &[]), None);
    }

    #[test]
    fn repeats_are_spread_over_the_processes_before_anything_is_added() {
        assert_eq!(
            (0..3).map(|i| share(5, 2, i)).collect::<Vec<_>>(),
            [3, 2, 0]
        );
        assert_eq!(
            (0..3).map(|i| share(3, 3, i)).collect::<Vec<_>>(),
            [1, 1, 1]
        );
        // More processes than repeats: one repeat each, as many as there are repeats.
        assert_eq!(
            (0..3).map(|i| share(2, 5, i)).collect::<Vec<_>>(),
            [1, 1, 0]
        );
        assert_eq!(share(1, 1, 0), 1);
        let mut m = measure(5, 20, 1, Some(0.0001));
        m.processes = 2;
        // The first process measured 3 of 5, one disturbed: the plan's second process comes
        // first, with the 2 it was planned to measure.
        let mut notes = vec![note(0.0), note(95.0), note(0.0)];
        exclude_disturbed(&m, &mut notes);
        let raw = vec![repeat(10, 1.0); 3];
        assert_eq!(
            next(&m, &notes, &raw, 1, 0, &[]),
            Some(More::Spread { repeats: 2 })
        );
        // Then the disturbed one is replaced.
        notes.extend([note(0.0), note(0.0)]);
        let raw = vec![repeat(10, 1.0); 5];
        assert!(matches!(
            next(&m, &notes, &raw, 2, 0, &[]),
            Some(More::Disturbed { repeats: 1, .. })
        ));
    }

    #[test]
    fn a_wide_interval_asks_for_repeats_in_proportion() {
        let m = measure(2, 1000, 0, Some(0.01));
        let raw = vec![repeat(20, 4.0); 2];
        let notes = vec![note(0.0); 2];
        let Some(More::Interval { repeats, relative }) = next(&m, &notes, &raw, 2, 0, &[]) else {
            panic!("no repeats added")
        };
        assert!(relative > 0.01, "{relative}");
        // (relative / target)² × 40 iterations, less the 40 there are, in repeats of 20.
        let expected = ((40.0 * (relative / 0.01).powi(2) - 40.0) / 20.0).ceil() as usize;
        assert_eq!(repeats, expected);
        // A target already met asks for nothing.
        let loose = measure(2, 1000, 0, Some(0.5));
        assert_eq!(next(&loose, &notes, &raw, 2, 0, &[]), None);
    }

    #[test]
    fn a_repeat_takes_the_overlap_weighted_share_of_the_stretches_it_spans() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let hog = |pct: f64| Other {
            pid: 9,
            name: "yes".into(),
            cpu_pct: pct,
        };
        let mut watch = Watch::start(Path::new("/nonexistent"), 1, None);
        watch.stretches = vec![
            Stretch {
                from: at(0),
                to: at(100),
                others: vec![],
            },
            Stretch {
                from: at(100),
                to: at(200),
                others: vec![hog(100.0)],
            },
        ];
        // Half in the quiet stretch, half in the busy one.
        let (pct, top) = watch.share(at(50), at(150));
        assert!((pct.unwrap_or(0.0) - 50.0).abs() < 1e-6, "{pct:?}");
        assert_eq!(top[0].name, "yes");
        // Wholly inside the busy one, and a zero-length moment there.
        assert!((watch.share(at(120), at(180)).0.unwrap_or(0.0) - 100.0).abs() < 1e-6);
        assert!((watch.share(at(150), at(150)).0.unwrap_or(0.0) - 100.0).abs() < 1e-6);
        // Outside every stretch: unknown, not clean.
        assert_eq!(watch.share(at(500), at(600)).0, None);
    }

    #[test]
    fn shortfall_says_the_target_and_why() {
        let r = Repetition {
            target_ci: Some(0.02),
            relative_half_width: Some(0.031),
            short: Some("20 repeats, the most allowed".into()),
            ..Repetition::default()
        };
        assert_eq!(r.reached(), Some(false));
        assert_eq!(
            r.shortfall().as_deref(),
            Some("target ±2.0 % not reached (±3.1 %): 20 repeats, the most allowed")
        );
        let met = Repetition {
            relative_half_width: Some(0.01),
            ..r
        };
        assert_eq!(met.shortfall(), None);
        // Without a target: only a failed worker run is worth a word.
        let failed = Repetition {
            short: Some("worker run 2 of the condition failed: signal 11".into()),
            ..Repetition::default()
        };
        assert_eq!(
            failed.shortfall().as_deref(),
            Some("worker run 2 of the condition failed: signal 11")
        );
        assert_eq!(Repetition::default().shortfall(), None);
    }
}

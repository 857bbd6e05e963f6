//! How far a sweep is and how long it has left, from its events: the same figures for the
//! terminal UI's Run tab and the headless progress line. A condition's worker processes may
//! come apart (interleaved with its neighbours'), so progress counts worker runs: each is its
//! condition's share of the plan and of its estimate.

use crate::runner::spawn::WorkerEvent;
use crate::runner::sweep::SweepEvent;

/// A sweep's progress; feed it every event with the seconds since the sweep started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tracker {
    /// Estimated seconds of each condition this sweep runs, in order.
    estimates: Vec<f64>,
    /// Conditions of the whole plan, and those finished before this sweep.
    total: usize,
    done_before: usize,
    /// Conditions' worth of worker runs finished in this sweep, their estimated seconds, and
    /// the sweep's seconds when the latest of them ended.
    done: f64,
    estimated_done: f64,
    elapsed_done: f64,
    current: Option<Current>,
}

/// The worker run in progress.
#[derive(Debug, Clone, Default, PartialEq)]
struct Current {
    /// Its share of its condition (1 / processes), and of the condition's estimate.
    part: f64,
    estimate_s: f64,
    started_s: f64,
    timed: usize,
    /// Timed iterations planned for it, with any repeats added to it.
    iterations: usize,
}

impl Tracker {
    pub fn new(estimates: Vec<f64>, total: usize, done_before: usize) -> Tracker {
        Tracker {
            estimates,
            total,
            done_before,
            ..Tracker::default()
        }
    }

    /// Follows the sweep: `now_s` is when `event` arrived, in seconds since the sweep started.
    pub fn event(&mut self, event: &SweepEvent, now_s: f64) {
        match event {
            SweepEvent::Start {
                index,
                processes,
                iterations,
                ..
            } => {
                self.close(now_s);
                let part = 1.0 / (*processes).max(1) as f64;
                let k = index.saturating_sub(self.done_before + 1);
                self.current = Some(Current {
                    part,
                    estimate_s: self.estimates.get(k).copied().unwrap_or(0.0) * part,
                    started_s: now_s,
                    timed: 0,
                    iterations: *iterations,
                });
            }
            SweepEvent::Worker(WorkerEvent::Timed(n)) => {
                if let Some(c) = &mut self.current {
                    c.timed = *n;
                }
            }
            SweepEvent::MoreRepeats { iterations, .. } => {
                if let Some(c) = &mut self.current {
                    c.iterations += iterations;
                }
            }
            // A failed attempt's run is no progress: the next attempt runs it again.
            SweepEvent::Done { retry: true, .. } => self.current = None,
            SweepEvent::Done { .. } => self.close(now_s),
            _ => {}
        }
    }

    /// The worker run in progress ended at `now_s`.
    fn close(&mut self, now_s: f64) {
        if let Some(c) = self.current.take() {
            self.done += c.part;
            self.estimated_done += c.estimate_s;
            self.elapsed_done = now_s;
        }
    }

    /// The share of the current worker run's timed iterations done, when one runs.
    fn within(&self) -> Option<f64> {
        let c = self.current.as_ref()?;
        (c.iterations > 0).then(|| (c.timed as f64 / c.iterations as f64).min(1.0))
    }

    /// Share of the whole plan done, 0–1, counting the current run's timed iterations.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            return 1.0;
        }
        let current = self
            .current
            .as_ref()
            .map_or(0.0, |c| c.part * self.within().unwrap_or(0.0));
        ((self.done_before as f64 + self.done + current) / self.total as f64).clamp(0.0, 1.0)
    }

    /// Whether every condition of this sweep has had its last run.
    pub fn finished(&self) -> bool {
        self.done + 1e-9 >= self.estimates.len() as f64
    }

    /// Seconds left at `now_s`: the estimates not yet run, scaled by how the runs finished so far
    /// compared with theirs on this machine; the current run by its own pace once a tenth of its
    /// timed iterations are done (so one slower than its estimate does not read "0 s" while it
    /// runs on), by its scaled estimate before.
    pub fn eta_s(&self, now_s: f64) -> f64 {
        let ratio = if self.estimated_done > 0.0 {
            self.elapsed_done / self.estimated_done
        } else {
            1.0
        };
        let planned: f64 = self.estimates.iter().sum();
        let current_estimate = self.current.as_ref().map_or(0.0, |c| c.estimate_s);
        let after = (planned - self.estimated_done - current_estimate).max(0.0) * ratio;
        let current_left = match &self.current {
            None => 0.0,
            Some(c) => {
                let ran = (now_s - c.started_s).max(0.0);
                match self.within() {
                    Some(f) if (0.1..1.0).contains(&f) => ran * (1.0 - f) / f,
                    Some(f) if f >= 1.0 => 0.0,
                    _ => (c.estimate_s * ratio - ran).max(0.0),
                }
            }
        };
        (after + current_left).max(0.0)
    }
}

/// A line of a sweep's progress, as every front-end and the run's `progress.log` say it.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// For the log and for whoever watches.
    Line(String),
    /// For the log; a terminal shows it on its redrawn status line rather than as a line of its
    /// own (a plain stderr and a front-end with a log of its own take it as a line).
    Status(String),
    /// For the log only: what a front-end says in its own way (the run's end).
    Logged(String),
}

impl Said {
    pub fn text(&self) -> &str {
        match self {
            Said::Line(t) | Said::Status(t) | Said::Logged(t) => t,
        }
    }
}

/// Says a sweep's events as lines ([`Said`]): the condition that starts, each attempt's
/// result with the time left, repeats added, warnings and cool-downs.
#[derive(Debug, Clone)]
pub struct Narrator {
    pub tracker: Tracker,
    started: std::time::Instant,
    /// The condition of the latest start, its place in the plan and the plan's size.
    pub current: String,
    pub index: usize,
    pub total: usize,
}

impl Narrator {
    pub fn new(estimates: Vec<f64>, total: usize, done_before: usize) -> Narrator {
        Narrator {
            tracker: Tracker::new(estimates, total, done_before),
            started: std::time::Instant::now(),
            current: String::new(),
            index: 0,
            total,
        }
    }

    /// Seconds left (see [`Tracker::eta_s`]).
    pub fn eta_s(&self) -> f64 {
        self.tracker.eta_s(self.started.elapsed().as_secs_f64())
    }

    /// Follows `event`; what to say about it, if anything.
    pub fn event(&mut self, event: &SweepEvent) -> Option<Said> {
        self.tracker
            .event(event, self.started.elapsed().as_secs_f64());
        match event {
            SweepEvent::Start {
                index,
                total,
                condition,
                attempt,
                attempts,
                process,
                processes,
                ..
            } => {
                (self.index, self.total) = (*index, *total);
                self.current = condition.id.clone();
                let mut notes = Vec::new();
                if *attempt > 1 {
                    notes.push(format!("attempt {attempt} of {attempts}"));
                }
                if *processes > 1 {
                    notes.push(format!("process {process} of {processes}"));
                }
                let id = &condition.id;
                Some(Said::Status(if *process > 1 {
                    format!("[{index}/{total}] {id}: {}", notes.join(", "))
                } else if notes.is_empty() {
                    format!("[{index}/{total}] {id}: running")
                } else {
                    format!("[{index}/{total}] {id}: running ({})", notes.join(", "))
                }))
            }
            SweepEvent::Done {
                index,
                total,
                record,
                retry,
            } => {
                let mut line = format!(
                    "[{index}/{total}] {}: {}",
                    record.condition.id,
                    crate::results::summary::record_line(record, *retry)
                );
                if !retry && !self.tracker.finished() {
                    line.push_str(&format!(" (ETA {})", crate::text::duration(self.eta_s())));
                }
                Some(Said::Line(line))
            }
            SweepEvent::MoreRepeats {
                repeats, reason, ..
            } => Some(Said::Status(format!(
                "[{}/{}] {}: {repeats} more repeat(s): {reason}",
                self.index, self.total, self.current
            ))),
            SweepEvent::Warning(why) => Some(Said::Line(format!("warning: {why}"))),
            SweepEvent::Cooldown { seconds } => {
                Some(Said::Status(format!("cooling down {seconds} s")))
            }
            SweepEvent::Worker(_) | SweepEvent::Telemetry(_) => None,
        }
    }
}

/// Where a sweep's time went: the workers' measured work, their process life, and the rest.
pub fn overhead_line(o: &crate::runner::sweep::SweepOutcome) -> String {
    let outside = (o.wall_s - o.measured_s).max(0.0);
    let pct = if o.wall_s > 0.0 {
        100.0 * outside / o.wall_s
    } else {
        0.0
    };
    format!(
        "swept in {:.1} s: {:.1} s measured by the workers (load, first inference, warm-up, timed), \
         {:.1} s outside it ({pct:.1} %: {:.1} s worker start-up and exit, {:.1} s in edgeprof itself)",
        o.wall_s,
        o.measured_s,
        outside,
        (o.worker_s - o.measured_s).max(0.0),
        (o.wall_s - o.worker_s).max(0.0),
    )
}

/// Skipped conditions that share a reason: how many, and of which engines.
pub struct SkipGroup<'a> {
    pub reason: &'a str,
    pub engines: Vec<&'a str>,
    pub count: usize,
}

/// Groups (engine, reason) pairs by reason, in the order the reasons first come.
pub fn skip_groups<'a>(skips: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<SkipGroup<'a>> {
    let mut groups: Vec<SkipGroup> = Vec::new();
    for (engine, reason) in skips {
        match groups.iter_mut().find(|g| g.reason == reason) {
            Some(g) => {
                g.count += 1;
                if !g.engines.contains(&engine) {
                    g.engines.push(engine);
                }
            }
            None => groups.push(SkipGroup {
                reason,
                engines: vec![engine],
                count: 1,
            }),
        }
    }
    groups
}

/// The skipped conditions, a line per reason: a reason that holds for one condition names it,
/// one that holds for several counts them and names their engines (a framework not set up
/// skips every condition of it, and its set-up command is said once).
pub fn skipped_lines(skipped: &[crate::runner::matrix::Skipped]) -> Vec<String> {
    skip_groups(
        skipped
            .iter()
            .map(|s| (s.condition.engine.as_str(), s.reason.as_str())),
    )
    .into_iter()
    .map(|g| match skipped.iter().find(|s| s.reason == g.reason) {
        Some(one) if g.count == 1 => format!("  skipped {}: {}", one.condition.id, g.reason),
        _ => format!(
            "  skipped {} conditions of {}: {}",
            g.count,
            g.engines.join(", "),
            g.reason
        ),
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelRef;
    use crate::models::InputShape;
    use crate::protocol::Condition;

    fn condition() -> Condition {
        let input = InputShape {
            channels: 3,
            height: 8,
            width: 8,
        };
        let model = ModelRef::Zoo("lenet".into());
        Condition::new("tract", model, input, 1, 1, crate::config::Device::Cpu)
    }

    fn start(index: usize, process: usize, processes: usize) -> SweepEvent {
        SweepEvent::Start {
            index,
            total: 3,
            condition: condition(),
            attempt: 1,
            attempts: 1,
            process,
            processes,
            iterations: 100,
        }
    }

    fn timed(n: usize) -> SweepEvent {
        SweepEvent::Worker(WorkerEvent::Timed(n))
    }

    fn done(retry: bool) -> SweepEvent {
        SweepEvent::Done {
            index: 1,
            total: 1,
            record: Box::new(crate::results::RunRecord {
                last: !retry,
                ok: !retry,
                ..crate::results::RunRecord::bare(condition())
            }),
            retry,
        }
    }

    #[test]
    fn the_eta_follows_the_current_runs_own_pace() {
        // Three conditions of 10 s estimated, one process each; the first took 20 s (this
        // machine is twice as slow), the second has run 30 s.
        let mut t = Tracker::new(vec![10.0; 3], 3, 0);
        t.event(&start(1, 1, 1), 0.0);
        t.event(&start(2, 1, 1), 20.0);
        // Without its progress, it is past its scaled estimate: only the last one is left.
        assert_eq!(t.eta_s(50.0), 20.0);
        // Half its iterations done in 30 s: 30 s more, then the last one.
        t.event(&timed(50), 50.0);
        assert_eq!(t.eta_s(50.0), 50.0);
        // Too early to trust its pace; and done.
        t.event(&timed(5), 50.0);
        assert_eq!(t.eta_s(50.0), 20.0);
        t.event(&timed(100), 50.0);
        assert_eq!(t.eta_s(50.0), 20.0);
        assert!((t.fraction() - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn interleaved_processes_count_as_their_share_and_never_go_back() {
        // Two conditions of 30 s in three processes each: 1.1, 2.1, 1.2, 2.2, 1.3, 2.3.
        let mut t = Tracker::new(vec![30.0, 30.0], 2, 0);
        let mut last = 0.0;
        let mut now = 0.0;
        for round in 1..=3 {
            for index in 1..=2 {
                t.event(&start(index, round, 3), now);
                t.event(&timed(50), now + 5.0);
                let f = t.fraction();
                assert!(f > last, "{f} after {last}");
                last = f;
                now += 10.0;
            }
        }
        assert!(!t.finished());
        t.event(&done(false), now);
        assert!(t.finished());
        assert!((t.fraction() - 1.0).abs() < 1e-9);
        // Each run took its estimated 10 s: after five of six, one run of 10 s was left.
        let mut five = Tracker::new(vec![30.0, 30.0], 2, 0);
        for (i, (index, round)) in [(1, 1), (2, 1), (1, 2), (2, 2), (1, 3), (2, 3)]
            .into_iter()
            .enumerate()
        {
            five.event(&start(index, round, 3), 10.0 * i as f64);
        }
        assert!(
            (five.eta_s(50.0) - 10.0).abs() < 1e-9,
            "{}",
            five.eta_s(50.0)
        );
    }

    #[test]
    fn a_failed_attempt_is_no_progress_and_a_resumed_plan_counts_what_was_done() {
        let mut t = Tracker::new(vec![10.0], 4, 3);
        assert_eq!(t.fraction(), 0.75);
        t.event(&start(4, 1, 1), 0.0);
        t.event(&timed(100), 1.0);
        t.event(&done(true), 2.0);
        assert_eq!(t.fraction(), 0.75);
        assert!(!t.finished());
    }

    use crate::config::Device;
    use crate::protocol::Skipped;

    fn skipped(engine: &str, batch: usize, reason: &str) -> Skipped {
        let input = InputShape {
            channels: 3,
            height: 32,
            width: 32,
        };
        Skipped {
            condition: Condition::new(
                engine,
                ModelRef::Zoo("resnet34".into()),
                input,
                batch,
                0,
                Device::Cpu,
            ),
            reason: reason.to_string(),
        }
    }

    #[test]
    fn skips_read_a_line_per_reason() {
        let lines = skipped_lines(&[
            skipped("pytorch", 1, "pytorch is not set up"),
            skipped("onnxruntime", 1, "too big"),
            skipped("pytorch", 2, "pytorch is not set up"),
        ]);
        assert_eq!(
            lines,
            [
                "  skipped 2 conditions of pytorch: pytorch is not set up",
                "  skipped onnxruntime/resnet34/3x32x32/b1/t0/cpu: too big",
            ]
        );
    }
}

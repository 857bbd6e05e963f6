//! Measures the CPU's ceilings: the peak FLOP rate per precision (one thread and all threads)
//! and the sustained load bandwidth over a sweep of working-set sizes, in the spirit of the LBNL
//! Empirical Roofline Toolkit but in seconds. Threads are pinned one per CPU, allocate and touch
//! their own buffers (so memory lands near them), start together at a barrier, and the rate is
//! the total work over the slowest thread's time. Each figure is the best of a few trials: a
//! ceiling is what the machine can reach, so the peak is the maximum measured. How far apart
//! the trials were is kept beside it ([`Trials`]). Other processes' CPU time is read before and
//! after each figure; a figure measured while they took at least [`DISTURBED_PCT`] of a core is
//! measured again (at most [`BUSY_RETRIES`] times) and said so.

use crate::collect::kernels::{self, Isa, Precision};
use crate::collect::other_processes::{self as others, DISTURBED_PCT};
use serde::{Deserialize, Serialize};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// One point of the bandwidth sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Working set of each thread.
    pub bytes_per_thread: u64,
    pub threads: usize,
    pub bytes_per_s: f64,
}

/// A measured peak FLOP rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    pub precision: Precision,
    pub threads: usize,
    /// Operations per second: FLOPs, or OPs for integer precisions.
    pub flops_per_s: f64,
    /// The unit that reached it, where the precision has several (AMX-INT8, AVX-512 VNNI);
    /// `None` for the fp64/fp32 kernels, which run in the measurement's ISA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// How long to measure: trials per figure and seconds per trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    Quick,
    Default,
    Thorough,
}

impl Effort {
    fn trials(self) -> usize {
        match self {
            Effort::Quick => 2,
            Effort::Default => 3,
            Effort::Thorough => 5,
        }
    }

    /// One trial of a peak or of a working set a cache holds: long enough that the best of the
    /// trials is the steady rate (45 ms gives the figures 100 ms gave within a few per cent, in
    /// half the time).
    fn trial_time(self) -> Duration {
        Duration::from_millis(match self {
            Effort::Quick => 40,
            Effort::Default => 45,
            Effort::Thorough => 300,
        })
    }

    /// One trial of a working set, `dram_only` for one only DRAM holds: DRAM's rate on a shared
    /// machine wanders more, and shorter trials caught fewer of its good moments.
    fn bandwidth_trial_time(self, dram_only: bool) -> Duration {
        match self {
            Effort::Default if dram_only => Duration::from_millis(100),
            _ => self.trial_time(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub isa: Isa,
    pub threads: usize,
    pub peaks: Vec<Peak>,
    /// With every thread; one-thread points too, at the sizes of `single_thread_sizes`.
    pub sweep: Vec<SweepPoint>,
    pub seconds: f64,
    /// Each figure's trials, in the order measured.
    #[serde(default)]
    pub trials: Vec<Trials>,
    /// Figures other processes disturbed, in words.
    #[serde(default)]
    pub busy: Vec<String>,
}

/// The trials behind one figure: the best is the figure, the worst shows how steady it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trials {
    /// e.g. "fp32 peak, 2 thread(s)", "bandwidth, 64 MiB per thread × 2".
    pub what: String,
    /// The best trial of every attempt (the figure).
    pub best: f64,
    /// The worst trial of the last attempt (a figure measured again for being disturbed is
    /// judged by its quiet attempt).
    pub worst: f64,
    /// Trials in all.
    pub count: usize,
}

impl Trials {
    /// (best − worst) / best: 0 for trials that agree.
    pub fn spread(&self) -> f64 {
        if self.best > 0.0 {
            (self.best - self.worst) / self.best
        } else {
            0.0
        }
    }
}

/// Most extra measurements of a figure that other processes disturbed.
pub const BUSY_RETRIES: usize = 2;

/// Measures one figure with `rates` (each call gives its trials' rates), again while other
/// processes took CPU meanwhile (bounded); the best rate, its trials, and what was busy.
/// `max_again` bounds the extra measurements.
fn watched(
    what: &str,
    max_again: usize,
    mut rates: impl FnMut() -> Vec<f64>,
) -> (f64, Trials, Option<String>) {
    let root = std::path::Path::new("/");
    let own = std::process::id();
    let mut all = Vec::new();
    let mut busy: Option<others::Disturbance> = None;
    let mut again = 0;
    loop {
        let before = others::Scan::take(root);
        let last = rates();
        all.extend(&last);
        let d = others::between(&before, &others::Scan::take(root), own, None);
        let disturbed = d.others_cpu_pct >= DISTURBED_PCT;
        if disturbed {
            busy = Some(d);
        }
        if !disturbed || again >= max_again {
            // The best of every attempt; the spread of the last (the quiet one, if any was).
            let best = all.iter().copied().fold(0.0, f64::max);
            let worst = last.iter().copied().fold(f64::INFINITY, f64::min);
            let said = busy.map(|d| {
                format!(
                    "{what}: other processes took {:.0} % of a core ({}); measured {} time(s), {}",
                    d.others_cpu_pct,
                    d.by_whom(),
                    again + 1,
                    if disturbed {
                        "busy every time: the figure may be low"
                    } else {
                        "quiet the last time"
                    }
                )
            });
            let trials = Trials {
                what: what.to_string(),
                best,
                worst: if worst.is_finite() { worst } else { 0.0 },
                count: all.len(),
            };
            return (best, trials, said);
        }
        again += 1;
    }
}

/// Progress of a measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub what: String,
    pub done: usize,
    pub total: usize,
}

/// The CPUs this process may run on, in order.
/// The CPUs this process may run on (empty when the kernel will not say).
pub fn allowed_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&i| set.is_set(i).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_ok() {
            // Unpinned threads still measure, only less steadily.
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
}

/// Runs `work` on `threads` pinned threads, `trials` times, each trial started together at a
/// barrier; returns each trial's rate: total units over the slowest thread's time.
/// `prepare` runs once on each thread (allocation and first touch, outside the timing) and its
/// result is handed to every trial of that thread.
fn rates<S, P, W>(threads: usize, trials: usize, prepare: P, work: W) -> Vec<f64>
where
    P: Fn(usize) -> S + Sync,
    W: Fn(&mut S) -> f64 + Sync,
{
    let cpus = allowed_cpus();
    let barrier = Barrier::new(threads);
    let per_thread: Vec<Vec<(f64, f64)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, prepare, work) = (&barrier, &prepare, &work);
                let cpu = cpus.get(i % cpus.len().max(1)).copied();
                scope.spawn(move || {
                    pin(cpu);
                    let mut state = prepare(i);
                    (0..trials)
                        .map(|_| {
                            barrier.wait();
                            let start = Instant::now();
                            let units = work(&mut state);
                            (units, start.elapsed().as_secs_f64())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    (0..trials)
        .map(|t| {
            let units: f64 = per_thread
                .iter()
                .filter_map(|r| r.get(t))
                .map(|r| r.0)
                .sum();
            let slowest = per_thread
                .iter()
                .filter_map(|r| r.get(t))
                .map(|r| r.1)
                .fold(0.0, f64::max);
            if slowest > 0.0 {
                units / slowest
            } else {
                0.0
            }
        })
        .collect()
}

/// Repetitions of a unit of work that fill `target` on one thread.
fn calibrate(target: Duration, mut once: impl FnMut(u64) -> f64) -> u64 {
    let mut reps = 1u64;
    loop {
        let start = Instant::now();
        std::hint::black_box(once(reps));
        let took = start.elapsed();
        if took >= target / 4 || reps >= 1 << 40 {
            let scale = target.as_secs_f64() / took.as_secs_f64().max(1e-9);
            return ((reps as f64 * scale).ceil() as u64).max(1);
        }
        reps *= 4;
    }
}

/// Operation rates of `kernel` (rounds → checksum, operations) on `threads` threads, one per
/// trial, each trial as many rounds as fill the effort's trial time on one thread.
fn kernel_rates(
    kernel: impl Fn(u64) -> (f64, u64) + Sync,
    threads: usize,
    effort: Effort,
) -> Vec<f64> {
    let rounds = calibrate(effort.trial_time(), |r| kernel(r).0);
    rates(
        threads,
        effort.trials(),
        |_| (),
        |_| kernel(rounds).1 as f64,
    )
}

/// FLOP rates of `precision` on `threads` threads, one per trial.
fn peak(isa: Isa, precision: Precision, threads: usize, effort: Effort) -> Vec<f64> {
    let kernel = move |rounds: u64| match precision {
        Precision::Fp32 => kernels::fma_f32(isa, rounds),
        _ => kernels::fma_f64(isa, rounds),
    };
    kernel_rates(kernel, threads, effort)
}

/// Load bandwidths with `bytes_per_thread` of working set on each of `threads` threads, one
/// per trial; `guess` (bytes/s per thread) sizes the trials.
fn bandwidth(
    isa: Isa,
    bytes_per_thread: u64,
    threads: usize,
    trials: usize,
    trial_time: Duration,
    guess: f64,
) -> Vec<f64> {
    let len = (bytes_per_thread / 8).max(8) as usize;
    let bytes = (len * 8) as f64;
    let passes = ((trial_time.as_secs_f64() * guess / bytes).ceil() as u64).max(1);
    rates(
        threads,
        trials,
        |_| kernels::Ones::new(len),
        |ones| kernels::load_f64(isa, ones.as_slice(), passes).1 as f64,
    )
}

/// The largest working set [`stream_bandwidth`] reads: beyond it every cache is long left
/// behind, and a board with little memory is spared a second copy of a large model.
pub const MAX_STREAM_BYTES: u64 = 1 << 30;

/// The load bandwidth, in bytes/s, of `threads` threads reading a working set of `bytes`
/// (split among them) over and over, now: what a model whose layers move `bytes` per inference
/// gets from the memory hierarchy — the caches while they hold it, DRAM once they do not. On a
/// machine shared with other tenants how much of the last-level cache is left changes by the
/// hour (on the development VM a 512-channel convolution streamed its weights at 21–27 GB/s in
/// a 50 MB model and at 11 GB/s in a 100 MB one in the morning, at 25 GB/s in both that
/// afternoon), so it is measured beside each profile. The median of five trials of about 20 ms
/// each (a single pass when one takes longer), at most a quarter of the memory available read;
/// None when nothing could be timed.
pub fn stream_bandwidth(bytes: u64, threads: usize) -> Option<f64> {
    let threads = threads.max(1);
    // Never more than a quarter of the memory available: a board with 1 GiB left must not be
    // pushed into swap (or the OOM killer) by a measurement.
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| crate::collect::proc::parse_meminfo(&text))
        .map_or(u64::MAX, |(total, used)| total.saturating_sub(used) / 4);
    let per_thread = (bytes.min(MAX_STREAM_BYTES).min(available) / threads as u64).max(4096);
    let len = (per_thread / 8) as usize;
    let isa = kernels::best_isa();
    // One pass, after a first that warms the buffer, sizes the trials.
    let one = {
        let ones = kernels::Ones::new(len);
        kernels::load_f64(isa, ones.as_slice(), 1);
        let start = Instant::now();
        kernels::load_f64(isa, ones.as_slice(), 1);
        start.elapsed().as_secs_f64()
    };
    let passes = ((0.02 / one.max(1e-7)).ceil() as u64).max(1);
    let rates = rates(
        threads,
        5,
        |_| kernels::Ones::new(len),
        |ones| kernels::load_f64(isa, ones.as_slice(), passes).1 as f64,
    );
    crate::stats::median(&rates).filter(|r| r.is_finite() && *r > 0.0)
}

/// A first guess of the per-thread load bandwidth, from a small buffer.
fn guess_bandwidth(isa: Isa) -> f64 {
    let ones = kernels::Ones::new(2048);
    let data = ones.as_slice();
    let target = Duration::from_millis(20);
    let passes = calibrate(target, |p| kernels::load_f64(isa, data, p).0);
    let start = Instant::now();
    let (_, bytes) = kernels::load_f64(isa, data, passes);
    bytes as f64 / start.elapsed().as_secs_f64().max(1e-9)
}

pub(crate) fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 && !bytes.is_multiple_of(1 << 20) {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    } else if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// Working-set sizes per thread for the sweep: powers of two from 4 KiB, then powers of four
/// from 64 MiB (large buffers take long to fill and no cache level ends up there), and
/// `largest` last.
pub fn sweep_sizes(largest: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut size = 4096u64;
    while size < largest {
        sizes.push(size);
        size *= if size >= 64 << 20 { 4 } else { 2 };
    }
    sizes.push(largest.max(4096));
    sizes
}

/// Operation rates of a narrow-precision unit on `threads` threads, one per trial.
fn unit_peak(unit: kernels::Unit, threads: usize, effort: Effort) -> Vec<f64> {
    kernel_rates(
        move |rounds| unit.run(rounds).unwrap_or((0.0, 0)),
        threads,
        effort,
    )
}

/// Measures peaks (fp64, fp32 and every narrow-precision unit this CPU has; one thread and
/// `threads`) and the bandwidth sweep up to `largest_bytes_per_thread`, with
/// `single_thread_sizes` also measured on one thread.
pub fn measure(
    isa: Isa,
    threads: usize,
    largest_bytes_per_thread: u64,
    single_thread_sizes: &[u64],
    effort: Effort,
    mut on_step: impl FnMut(Step),
) -> Measurement {
    let start = Instant::now();
    let threads = threads.max(1);
    let sizes = sweep_sizes(largest_bytes_per_thread);
    let mut thread_counts = vec![1];
    if threads > 1 {
        thread_counts.push(threads);
    }
    let units: Vec<kernels::Unit> = kernels::Unit::of_this_architecture()
        .iter()
        .copied()
        .filter(|u| u.available().is_ok() && !u.superseded())
        .collect();
    let total = (2 + units.len()) * thread_counts.len() + sizes.len() + single_thread_sizes.len();
    let mut done = 0;
    let mut step = |what: String, done: &mut usize| {
        on_step(Step {
            what,
            done: *done,
            total,
        });
        *done += 1;
    };
    let mut peaks = Vec::new();
    let mut trials = Vec::new();
    let mut busy = Vec::new();
    // After a figure stayed busy through its retries the disturbance is taken as lasting: the
    // figures after it are not measured again (that would triple the time for nothing).
    let mut lasting = false;
    let mut figure = |what: String, rates: &mut dyn FnMut() -> Vec<f64>| {
        let max_again = if lasting { 0 } else { BUSY_RETRIES };
        let (best, t, said) = watched(&what, max_again, rates);
        if let Some(said) = said {
            lasting |= said.contains("busy every time");
            busy.push(said);
        }
        trials.push(t);
        best
    };
    for precision in [Precision::Fp64, Precision::Fp32] {
        for &n in &thread_counts {
            let what = format!("{precision} peak, {n} thread(s)");
            step(what.clone(), &mut done);
            peaks.push(Peak {
                precision,
                threads: n,
                flops_per_s: figure(what, &mut || peak(isa, precision, n, effort)),
                via: None,
            });
        }
    }
    for &unit in &units {
        for &n in &thread_counts {
            let what = format!("{} peak ({unit}), {n} thread(s)", unit.precision());
            step(what.clone(), &mut done);
            peaks.push(Peak {
                precision: unit.precision(),
                threads: n,
                flops_per_s: figure(what, &mut || unit_peak(unit, n, effort)),
                via: Some(unit.to_string()),
            });
        }
    }
    let mut sweep: Vec<SweepPoint> = Vec::new();
    // Each size's trials are sized from the bandwidth just measured one size down.
    let mut guess = guess_bandwidth(isa);
    for &size in &sizes {
        let what = format!("bandwidth, {} per thread × {threads}", human(size));
        step(what.clone(), &mut done);
        // The largest working set stands for DRAM alone: give it an extra trial.
        let count = effort.trials() + usize::from(size == largest_bytes_per_thread);
        let trial_time = effort.bandwidth_trial_time(size == largest_bytes_per_thread);
        let bytes_per_s = figure(what, &mut || {
            bandwidth(isa, size, threads, count, trial_time, guess)
        });
        guess = (bytes_per_s / threads as f64).max(1e6);
        sweep.push(SweepPoint {
            bytes_per_thread: size,
            threads,
            bytes_per_s,
        });
    }
    if threads > 1 {
        for &size in single_thread_sizes {
            let what = format!("bandwidth, {} on one thread", human(size));
            step(what.clone(), &mut done);
            let near = sweep
                .iter()
                .rfind(|p| p.bytes_per_thread <= size)
                .map_or(guess, |p| p.bytes_per_s / threads as f64);
            sweep.push(SweepPoint {
                bytes_per_thread: size,
                threads: 1,
                bytes_per_s: figure(what, &mut || {
                    let trial_time = effort.bandwidth_trial_time(size >= largest_bytes_per_thread);
                    bandwidth(isa, size, 1, effort.trials(), trial_time, near.max(1e6))
                }),
            });
        }
    }
    Measurement {
        isa,
        threads,
        peaks,
        sweep,
        seconds: start.elapsed().as_secs_f64(),
        trials,
        busy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_sizes_double_up_to_the_largest() {
        assert_eq!(sweep_sizes(4096), vec![4096]);
        assert_eq!(sweep_sizes(20_000), vec![4096, 8192, 16384, 20_000]);
        assert_eq!(sweep_sizes(16384), vec![4096, 8192, 16384]);
        assert_eq!(sweep_sizes(0), vec![4096]);
        let big = sweep_sizes(600 << 20);
        assert_eq!(&big[big.len() - 3..], &[64 << 20, 256 << 20, 600 << 20][..]);
    }

    #[test]
    fn parallel_rates_add_up_over_threads() {
        // Each thread sleeps 20 ms per trial and counts its index + 1: 6 units in ≥ 20 ms.
        let all = rates(
            3,
            2,
            |i| i as f64,
            |s| {
                std::thread::sleep(Duration::from_millis(20));
                *s + 1.0
            },
        );
        assert_eq!(all.len(), 2);
        assert!(
            all.iter().all(|&rate| rate > 0.0 && rate <= 6.0 / 0.020),
            "{all:?}"
        );
    }

    #[test]
    fn the_stream_bandwidth_is_a_rate_for_any_working_set() {
        // A working set the L1 holds, one it does not, split over two threads, and none at all
        // (read as the smallest buffer).
        for (bytes, threads) in [(16 << 10, 1), (8 << 20, 2), (0, 1)] {
            let rate = stream_bandwidth(bytes, threads);
            assert!(
                rate.is_some_and(|r| r.is_finite() && r > 1e6),
                "{bytes} bytes on {threads}: {rate:?}"
            );
        }
    }

    #[test]
    fn a_tiny_measurement_reports_every_figure() {
        let mut steps = 0;
        let m = measure(
            kernels::Isa::Portable,
            2,
            16384,
            &[8192],
            Effort::Quick,
            |_| steps += 1,
        );
        // fp64 and fp32, then every narrow-precision unit this CPU has, on 1 and 2 threads.
        let units: Vec<kernels::Unit> = kernels::Unit::of_this_architecture()
            .iter()
            .copied()
            .filter(|u| u.available().is_ok() && !u.superseded())
            .collect();
        assert_eq!(m.peaks.len(), 4 + 2 * units.len());
        assert!(m.peaks.iter().all(|p| p.flops_per_s > 0.0));
        let via: Vec<Option<String>> = m.peaks[4..].iter().map(|p| p.via.clone()).collect();
        let expected: Vec<Option<String>> = units
            .iter()
            .flat_map(|u| [Some(u.to_string()), Some(u.to_string())])
            .collect();
        assert_eq!(via, expected);
        // 4 KiB, 8 KiB, 16 KiB on two threads, then 8 KiB on one.
        assert_eq!(m.sweep.len(), 4);
        assert_eq!((m.sweep[3].threads, m.sweep[3].bytes_per_thread), (1, 8192));
        assert!(m.sweep.iter().all(|p| p.bytes_per_s > 0.0));
        assert_eq!(steps, 4 + 2 * units.len() + 3 + 1);
        // Every figure keeps its trials, the figure the best of them.
        assert_eq!(m.trials.len(), 8 + 2 * units.len());
        assert!(m.trials.iter().all(|t| t.count >= 2 && t.worst <= t.best));
        assert_eq!(m.trials[0].best, m.peaks[0].flops_per_s);
    }
}

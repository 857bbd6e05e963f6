//! "Is this difference real?": two results directories compared condition by condition. For
//! each condition both ran, the ratio of the candidate's median latency to the baseline's, with
//! a 95 % bootstrap interval (the timed iterations of each side resampled with replacement), and
//! a verdict: slower or faster when the whole interval lies beyond 1 and the ratio beyond the
//! threshold, else no significant difference. Two runs of one plan that differ only in their
//! thread counts (half of each, say) pair position by position; otherwise conditions pair by
//! id, then (for what is left) by everything but the thread count, in plan order.

use super::{RunRecord, Stored};
use serde::Serialize;

/// Resamples drawn for each interval.
pub const BOOTSTRAP_ROUNDS: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Faster,
    Slower,
    NoSignificantDifference,
    /// Only one side has a result for it.
    Unpaired,
    /// A difference was measured, but the two runs were measured in different board states
    /// (power mode, clocks, governor): no verdict unless asked for across them.
    Withheld,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoSignificantDifference => "not significant",
            Verdict::Unpaired => "not in both",
            Verdict::Withheld => "withheld: states differ",
        }
    }
}

/// One condition of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compared {
    /// The baseline's condition id (the candidate's when only it has one).
    pub baseline: Option<String>,
    pub candidate: Option<String>,
    pub baseline_median_ms: Option<f64>,
    pub candidate_median_ms: Option<f64>,
    /// Candidate median / baseline median (above 1: the candidate is slower).
    pub ratio: Option<f64>,
    /// The 95 % bootstrap interval of the ratio.
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub verdict: Verdict,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: String,
    pub candidate: String,
    pub threshold: f64,
    pub conditions: Vec<Compared>,
    /// How the boards' performance states differed (`power mode: A MAXN (0), B 15W (1)`);
    /// empty when they agree, or when a side did not record its state.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
}

impl Comparison {
    /// A faster or slower verdict across different board states becomes [`Verdict::Withheld`]
    /// (the state, not the change, may be what made the difference).
    pub fn withhold_across_states(&mut self) {
        if self.states.is_empty() {
            return;
        }
        for c in &mut self.conditions {
            if matches!(c.verdict, Verdict::Faster | Verdict::Slower) {
                c.verdict = Verdict::Withheld;
            }
        }
    }

    pub fn count(&self, verdict: Verdict) -> usize {
        self.conditions
            .iter()
            .filter(|c| c.verdict == verdict)
            .count()
    }
}

/// A condition's record and its timed iterations, by repeat.
type Side<'a> = (&'a RunRecord, Vec<Vec<f64>>);

/// The timed iterations of each condition's last successful record, by condition (the repeats
/// its statistics keep: disturbed ones that were measured again are left out).
fn latencies(stored: &Stored) -> Vec<Side<'_>> {
    stored
        .runs
        .iter()
        .filter(|r| r.last && r.ok)
        .filter_map(|r| {
            let kept = r.kept_repeats()?;
            let all = kept.iter().flatten();
            (all.clone().next().is_some() && all.clone().all(|v| v.is_finite()))
                .then_some((r, kept))
        })
        .collect()
}

/// A condition without its thread count, for pairing runs with other threads.
fn without_threads(r: &RunRecord) -> String {
    let c = &r.condition;
    format!(
        "{}|{}|{}|{}|{}|{:?}",
        c.engine,
        c.model,
        c.input_text(),
        c.batch,
        c.device,
        c.options
    )
}

/// The ratio of medians (b over a) and its 95 % bootstrap interval, each side resampled by
/// repeat and then by iteration.
pub fn ratio_interval(a: &[Vec<f64>], b: &[Vec<f64>], rounds: usize) -> Option<(f64, f64, f64)> {
    let ma = crate::stats::median(&a.concat())?;
    let mb = crate::stats::median(&b.concat())?;
    if ma <= 0.0 {
        return None;
    }
    let mut rng = crate::stats::bootstrap_rng();
    let mut scratch = Vec::new();
    let mut ratios: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let ra = crate::stats::resampled_median_nested(a, &mut rng, &mut scratch);
            let rb = crate::stats::resampled_median_nested(b, &mut rng, &mut scratch);
            rb / ra
        })
        .filter(|r| r.is_finite())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let low = crate::stats::quantile_sorted(&ratios, 0.025)?;
    let high = crate::stats::quantile_sorted(&ratios, 0.975)?;
    Some((mb / ma, low, high))
}

/// The threshold a verdict is given at unless told otherwise: differences of medians under 5 %
/// are not significant.
pub const THRESHOLD: f64 = 0.05;

/// The verdict of a ratio and its interval at `threshold` (0.05: differences under 5 % are not
/// significant).
pub fn verdict(ratio: f64, low: f64, high: f64, threshold: f64) -> Verdict {
    if low > 1.0 && ratio > 1.0 + threshold {
        Verdict::Slower
    } else if high < 1.0 && ratio < 1.0 - threshold {
        Verdict::Faster
    } else {
        Verdict::NoSignificantDifference
    }
}

/// `candidate` (a condition id and its timed iterations by repeat) against `baseline`, with
/// `rounds` bootstrap resamples.
pub fn against(
    baseline: (&str, &[Vec<f64>]),
    candidate: (&str, &[Vec<f64>]),
    threshold: f64,
    rounds: usize,
) -> Compared {
    let median = |l: &[Vec<f64>]| crate::stats::median(&l.concat());
    let mut row = Compared {
        baseline: Some(baseline.0.to_string()),
        candidate: Some(candidate.0.to_string()),
        baseline_median_ms: median(baseline.1),
        candidate_median_ms: median(candidate.1),
        ratio: None,
        low: None,
        high: None,
        verdict: Verdict::Unpaired,
    };
    if let Some((ratio, low, high)) = ratio_interval(baseline.1, candidate.1, rounds) {
        row.ratio = Some(ratio);
        row.low = Some(low);
        row.high = Some(high);
        row.verdict = verdict(ratio, low, high, threshold);
    }
    row
}

/// One pair's ratio, interval and verdict (unpaired when a side is missing).
fn judge(a: Option<Side>, b: Option<Side>, threshold: f64) -> Compared {
    match (&a, &b) {
        (Some((ra, la)), Some((rb, lb))) => against(
            (&ra.condition.id, la),
            (&rb.condition.id, lb),
            threshold,
            BOOTSTRAP_ROUNDS,
        ),
        _ => {
            let median = |x: &Option<Side>| {
                x.as_ref()
                    .and_then(|(_, l)| crate::stats::median(&l.concat()))
            };
            Compared {
                baseline: a.as_ref().map(|(r, _)| r.condition.id.clone()),
                candidate: b.as_ref().map(|(r, _)| r.condition.id.clone()),
                baseline_median_ms: median(&a),
                candidate_median_ms: median(&b),
                ratio: None,
                low: None,
                high: None,
                verdict: Verdict::Unpaired,
            }
        }
    }
}

/// The axes a comparison within one directory can hold apart.
pub const AXES: [&str; 8] = [
    "engine",
    "model",
    "input",
    "batch",
    "threads",
    "device",
    "cores",
    "precision",
];

/// A condition's value on `axis` (one of [`AXES`]), and everything else about it.
fn split_axis(c: &crate::protocol::Condition, axis: &str) -> Option<(String, String)> {
    let cores = match &c.cores {
        Some(list) => list
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        None => "all".to_string(),
    };
    let mut values = [
        ("engine", c.engine.clone()),
        ("model", c.model.to_string()),
        ("input", c.input_text()),
        ("batch", c.batch.to_string()),
        ("threads", c.threads.to_string()),
        ("device", c.device.to_string()),
        ("cores", cores),
        ("precision", c.precision.to_string()),
    ];
    let at = values.iter().position(|(k, _)| *k == axis)?;
    let value = std::mem::take(&mut values[at].1);
    let rest = format!("{values:?}|{:?}", c.options);
    Some((value, rest))
}

/// Conditions within one directory against each other: every condition whose `axis` is
/// `value` is a baseline, and each condition that differs from one only on `axis` is compared
/// with it (e.g. `threads` = `1`: every thread count against one thread; `engine` = `tract`:
/// every engine against tract). None when `axis` is not one of [`AXES`].
pub fn within(stored: &Stored, axis: &str, value: &str, threshold: f64) -> Option<Comparison> {
    if !AXES.contains(&axis) {
        return None;
    }
    let sides = latencies(stored);
    let mut conditions = Vec::new();
    for (base, rest) in sides.iter().filter_map(|side| {
        let (v, rest) = split_axis(&side.0.condition, axis)?;
        (v == value).then_some((side, rest))
    }) {
        for other in &sides {
            let Some((v, other_rest)) = split_axis(&other.0.condition, axis) else {
                continue;
            };
            if v != value && other_rest == rest {
                conditions.push(judge(Some(base.clone()), Some(other.clone()), threshold));
            }
        }
    }
    let dir = stored.dir.display().to_string();
    Some(Comparison {
        baseline: format!("{dir} ({axis} = {value})"),
        candidate: format!("{dir} (the other {axis} values)"),
        threshold,
        conditions,
        states: Vec::new(),
    })
}

/// Compares `candidate` against `baseline`.
pub fn compare(baseline: &Stored, candidate: &Stored, threshold: f64) -> Comparison {
    let a = latencies(baseline);
    let mut b: Vec<Option<Side>> = latencies(candidate).into_iter().map(Some).collect();
    let mut pairs: Vec<(Option<Side>, Option<Side>)> = Vec::new();
    // The same plan but for the threads (a run with half the threads of each condition):
    // position by position.
    let same_plan_but_threads = a.len() == b.len()
        && a.iter().zip(&b).all(|((ra, _), x)| {
            x.as_ref()
                .is_some_and(|(rb, _)| without_threads(ra) == without_threads(rb))
        })
        && a.iter().zip(&b).any(|((ra, _), x)| {
            x.as_ref()
                .is_some_and(|(rb, _)| ra.condition.id != rb.condition.id)
        });
    let a = if same_plan_but_threads {
        for (x, y) in a.into_iter().zip(b.iter_mut()) {
            pairs.push((Some(x), y.take()));
        }
        Vec::new()
    } else {
        a
    };
    let mut left: Vec<Side> = Vec::new();
    for (ra, la) in a {
        let same_id = b.iter().position(|x| {
            x.as_ref()
                .is_some_and(|(rb, _)| rb.condition.id == ra.condition.id)
        });
        match same_id {
            Some(i) => pairs.push((Some((ra, la)), b[i].take())),
            None => left.push((ra, la)),
        }
    }
    // What no id paired: by everything but the threads, in plan order, when both sides have
    // as many of that kind left (a run with other threads, e.g. half of each).
    let mut keys: Vec<String> = left.iter().map(|(r, _)| without_threads(r)).collect();
    keys.dedup();
    let mut unpaired = Vec::new();
    for key in keys {
        let ours: Vec<Side> = left
            .iter()
            .filter(|(r, _)| without_threads(r) == key)
            .cloned()
            .collect();
        let theirs: Vec<usize> = b
            .iter()
            .enumerate()
            .filter(|(_, x)| x.as_ref().is_some_and(|(rb, _)| without_threads(rb) == key))
            .map(|(i, _)| i)
            .collect();
        if ours.len() == theirs.len() {
            for (a, i) in ours.into_iter().zip(theirs) {
                pairs.push((Some(a), b[i].take()));
            }
        } else {
            unpaired.extend(ours);
        }
    }
    pairs.extend(unpaired.into_iter().map(|a| (Some(a), None)));
    pairs.extend(b.into_iter().flatten().map(|x| (None, Some(x))));
    let conditions = pairs
        .into_iter()
        .map(|(a, b)| judge(a, b, threshold))
        .collect();
    let states = match (
        &baseline.manifest.board_state,
        &candidate.manifest.board_state,
    ) {
        (Some(a), Some(b)) => crate::collect::board::BoardState::differences(a, b),
        _ => Vec::new(),
    };
    Comparison {
        baseline: baseline.dir.display().to_string(),
        candidate: candidate.dir.display().to_string(),
        threshold,
        conditions,
        states,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// `n` latencies around `ms` with a few percent of noise and an occasional stall.
    fn noisy(ms: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let jitter: f64 = rng.random_range(-0.05..0.05);
                let stall = if i % 37 == 0 { 3.0 } else { 1.0 };
                ms * (1.0 + jitter) * stall
            })
            .collect()
    }

    #[test]
    fn the_same_distribution_is_no_difference_and_a_shift_is_one() {
        let mut same = 0;
        for seed in 0..30 {
            let a = [noisy(10.0, 200, seed)];
            let b = [noisy(10.0, 200, seed + 1000)];
            let Some((ratio, low, high)) = ratio_interval(&a, &b, 500) else {
                panic!("no interval")
            };
            assert!(low <= ratio && ratio <= high);
            if verdict(ratio, low, high, 0.05) == Verdict::NoSignificantDifference {
                same += 1;
            }
        }
        assert!(
            same >= 27,
            "{same} of 30 runs of one distribution were judged alike"
        );
        let a = [noisy(10.0, 200, 1)];
        let slow = [noisy(13.0, 200, 2)];
        let Some((ratio, low, high)) = ratio_interval(&a, &slow, 500) else {
            panic!("no interval")
        };
        assert_eq!(verdict(ratio, low, high, 0.05), Verdict::Slower);
        let Some((ratio, low, high)) = ratio_interval(&slow, &a, 500) else {
            panic!("no interval")
        };
        assert_eq!(verdict(ratio, low, high, 0.05), Verdict::Faster);
        // Beyond 1 but under the threshold: not significant.
        assert_eq!(
            verdict(1.03, 1.01, 1.05, 0.05),
            Verdict::NoSignificantDifference
        );
    }
}

//! How the machine's speed moved over a profile's rounds: each round's latency over the first
//! round's, per model, and its median over the models — a figure every model shares is the
//! machine, not the model.

use super::Profile;
use std::collections::BTreeMap;

/// The rounds taken so far, by (model, thread count).
pub type Taken = BTreeMap<(String, usize), Vec<Profile>>;

/// The (model, threads) a further round measures: while any in `order` with fewer than
/// `max_rounds` rounds has a merged interval wider than `target`, every one of them with fewer
/// than `max_rounds`, in `order` — not the wide ones alone, which, measured later by
/// themselves, would meet the machine in another state than the rest of the database did (on
/// the development VM ResNet-18's own further rounds ran at 4.4–5.6 ms, where its first three,
/// amid the other models minutes before, had run at 7.7, 6.3 and 5.4 ms).
/// Empty when no further round is due.
pub fn next_round<'a>(
    order: &'a [(String, usize)],
    taken: &Taken,
    max_rounds: usize,
    target: f64,
) -> Vec<&'a (String, usize)> {
    let open: Vec<&(String, usize)> = order
        .iter()
        .filter(|key| taken.get(*key).is_some_and(|ps| ps.len() < max_rounds))
        .collect();
    let wide = open.iter().any(|key| {
        taken
            .get(*key)
            .and_then(|ps| Profile::merge(ps))
            .is_some_and(|p| p.relative_half_width() > target)
    });
    if wide {
        open
    } else {
        Vec::new()
    }
}

/// For each round (the first is 1.0), the median over `models` — each a profile's rounds in the
/// order they were taken — of that round's median latency over the model's first round's.
/// Rounds only some models had count those models alone; a round no model had ends the list.
pub fn drift<'a>(models: impl IntoIterator<Item = &'a [Profile]>) -> Vec<f64> {
    let mut ratios: Vec<Vec<f64>> = Vec::new();
    for rounds in models {
        let Some(first) = rounds.first().map(|p| p.latency_ms).filter(|v| *v > 0.0) else {
            continue;
        };
        for (i, p) in rounds.iter().enumerate() {
            if ratios.len() <= i {
                ratios.push(Vec::new());
            }
            ratios[i].push(p.latency_ms / first);
        }
    }
    ratios
        .iter()
        .map_while(|r| crate::stats::median(r))
        .collect()
}

/// The round that strayed furthest from the first (its number, from 1, and its ratio), when
/// it strayed more than `limit` (a fraction).
pub fn strayed(drift: &[f64], limit: f64) -> Option<(usize, f64)> {
    drift
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| (a.1 - 1.0).abs().total_cmp(&(b.1 - 1.0).abs()))
        .filter(|(_, r)| (r - 1.0).abs() > limit)
        .map(|(i, r)| (i + 1, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(latencies: &[f64]) -> Vec<Profile> {
        latencies
            .iter()
            .map(|&ms| {
                Profile::one_round(
                    "tract",
                    ("resnet18", "3x64x64", 1),
                    Vec::new(),
                    (ms, (ms, ms)),
                    vec![ms],
                )
            })
            .collect()
    }

    fn times(ms: &[f64]) -> Profile {
        let mut p = rounds(&[ms[0]]).remove(0);
        p.times_ms = ms.to_vec();
        p.latency_ms = crate::stats::median(ms).unwrap_or(0.0);
        p
    }

    #[test]
    fn a_further_round_measures_every_model_while_one_is_wide() {
        let order: Vec<(String, usize)> = ["resnet18", "mobilenet_v2", "vgg19"]
            .iter()
            .map(|m| (m.to_string(), 1))
            .collect();
        let tight = || times(&[5.0; 30]);
        let mut taken = Taken::new();
        taken.insert(order[0].clone(), vec![tight(), tight()]);
        // Rounds that disagree by half: wide.
        taken.insert(order[1].clone(), vec![times(&[4.0; 30]), times(&[6.0; 30])]);
        taken.insert(order[2].clone(), vec![tight(), tight(), tight()]);
        // vgg19 has had its 3 rounds; the other two are measured again, the tight one too.
        let next = next_round(&order, &taken, 3, 0.03);
        assert_eq!(next, vec![&order[0], &order[1]]);
        // Once none is wide, or every wide one has had its rounds, no further round.
        taken.insert(order[1].clone(), vec![tight(), tight()]);
        assert!(next_round(&order, &taken, 3, 0.03).is_empty());
        taken.insert(order[1].clone(), vec![times(&[4.0; 30]), times(&[6.0; 30])]);
        assert!(next_round(&order, &taken, 2, 0.03).is_empty());
    }

    #[test]
    fn a_slowdown_every_model_shares_is_found_and_one_models_is_not() {
        // Every model 20 % slower in round 3; one model alone 50 % slower in round 2.
        let a = rounds(&[2.0, 2.0, 2.4]);
        let b = rounds(&[10.0, 15.0, 12.0]);
        let c = rounds(&[5.0, 5.0, 6.0, 5.0]);
        let d = drift([&a[..], &b[..], &c[..]]);
        assert_eq!(d.len(), 4);
        assert!((d[0] - 1.0).abs() < 1e-12);
        assert!((d[1] - 1.0).abs() < 1e-12, "{d:?}");
        assert!((d[2] - 1.2).abs() < 1e-12, "{d:?}");
        assert!((d[3] - 1.0).abs() < 1e-12, "{d:?}");
        assert_eq!(strayed(&d, 0.06), Some((3, d[2])));
        assert_eq!(strayed(&d, 0.25), None);
        assert!(drift(std::iter::empty::<&[Profile]>()).is_empty());
    }
}

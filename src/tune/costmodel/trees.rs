//! An extremely randomised trees regressor (Geurts, Ernst and Wehenkel, 2006): each tree splits
//! its samples on a random threshold of each of a few random features and keeps the split
//! that leaves the least squared error, down to leaves of a few samples; the forest predicts
//! the mean of its trees. It is what learns a layer's time from its shape: unlike one linear
//! fit per operator template it follows how an engine's efficiency changes with channel counts
//! and map sizes (a depthwise layer costs about the same per channel row whatever its FLOPs),
//! and the randomised thresholds make it smooth enough to interpolate between the sampled
//! configurations.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a forest is grown.
#[derive(Debug, Clone, Copy)]
pub struct Grow {
    pub trees: usize,
    /// Features tried at each split (each one once when this is at least their number).
    pub tries: usize,
    /// Fewest samples in a leaf.
    pub min_leaf: usize,
    pub seed: u64,
}

/// The cost model's: 8 of a layer's 22 features tried per split predicted held-out models as
/// well as trying all of them (on three profiles of the zoo taken minutes apart), in 2/5 of
/// the time.
impl Default for Grow {
    fn default() -> Self {
        Grow {
            trees: 60,
            tries: 8,
            min_leaf: 2,
            seed: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Leaf(f64),
    Split {
        feature: usize,
        threshold: f64,
        /// Index of the right child; the left one follows this node.
        right: usize,
    },
}

/// A fitted forest.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Forest {
    trees: Vec<Vec<Node>>,
    features: usize,
}

impl Forest {
    /// Grows a forest on `x` (one row of features per sample) and `y`. None without samples
    /// or with rows of different lengths.
    pub fn fit(x: &[Vec<f64>], y: &[f64], how: Grow) -> Option<Forest> {
        let features = x.first()?.len();
        if x.len() != y.len() || x.iter().any(|r| r.len() != features) || features == 0 {
            return None;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(how.seed);
        let trees = (0..how.trees.max(1))
            .map(|_| {
                let mut nodes = Vec::new();
                let mut index: Vec<usize> = (0..x.len()).collect();
                grow(x, y, &mut index, how, &mut rng, &mut nodes);
                nodes
            })
            .collect();
        Some(Forest { trees, features })
    }

    /// The mean of the trees' predictions, and their standard deviation.
    pub fn predict(&self, row: &[f64]) -> (f64, f64) {
        let each: Vec<f64> = self.trees.iter().map(|t| walk(t, row)).collect();
        let n = each.len().max(1) as f64;
        let mean = each.iter().sum::<f64>() / n;
        let var = each.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    }

    /// Features per row it was grown on.
    pub fn features(&self) -> usize {
        self.features
    }
}

fn walk(tree: &[Node], row: &[f64]) -> f64 {
    let mut at = 0;
    loop {
        match tree.get(at) {
            Some(Node::Leaf(v)) => return *v,
            Some(Node::Split {
                feature,
                threshold,
                right,
            }) => {
                let v = row.get(*feature).copied().unwrap_or(0.0);
                at = if v <= *threshold { at + 1 } else { *right };
            }
            None => return 0.0,
        }
    }
}

fn mean(y: &[f64], index: &[usize]) -> f64 {
    index.iter().map(|&i| y[i]).sum::<f64>() / index.len().max(1) as f64
}

/// Sum of squared deviations of `y` over `index`, from running sums.
fn sse(sum: f64, sum_sq: f64, n: f64) -> f64 {
    if n == 0.0 {
        0.0
    } else {
        sum_sq - sum * sum / n
    }
}

/// Appends the subtree of `index`'s samples to `nodes`, depth first (the left child right
/// after its parent).
fn grow(
    x: &[Vec<f64>],
    y: &[f64],
    index: &mut [usize],
    how: Grow,
    rng: &mut ChaCha8Rng,
    nodes: &mut Vec<Node>,
) {
    let here = nodes.len();
    let leaf = Node::Leaf(mean(y, index));
    if index.len() < 2 * how.min_leaf.max(1) {
        nodes.push(leaf);
        return;
    }
    let features = x[index[0]].len();
    let mut best: Option<(f64, usize, f64)> = None;
    let tries = how.tries.clamp(1, features);
    for t in 0..tries {
        // Every feature once when it tries as many as there are.
        let f = if tries == features {
            t
        } else {
            rng.random_range(0..features)
        };
        let (lo, hi) = index
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &i| {
                (lo.min(x[i][f]), hi.max(x[i][f]))
            });
        if hi <= lo {
            continue;
        }
        let threshold = lo + (hi - lo) * rng.random::<f64>();
        let (mut ls, mut lq, mut ln, mut rs, mut rq, mut rn) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for &i in index.iter() {
            if x[i][f] <= threshold {
                ls += y[i];
                lq += y[i] * y[i];
                ln += 1.0;
            } else {
                rs += y[i];
                rq += y[i] * y[i];
                rn += 1.0;
            }
        }
        if (ln as usize) < how.min_leaf || (rn as usize) < how.min_leaf {
            continue;
        }
        let err = sse(ls, lq, ln) + sse(rs, rq, rn);
        if best.is_none_or(|(e, _, _)| err < e) {
            best = Some((err, f, threshold));
        }
    }
    let Some((_, feature, threshold)) = best else {
        nodes.push(leaf);
        return;
    };
    // Left samples first.
    let mut split = 0;
    for k in 0..index.len() {
        if x[index[k]][feature] <= threshold {
            index.swap(k, split);
            split += 1;
        }
    }
    nodes.push(Node::Split {
        feature,
        threshold,
        right: 0,
    });
    let (left, right) = index.split_at_mut(split);
    grow(x, y, left, how, rng, nodes);
    let right_at = nodes.len();
    if let Some(Node::Split { right, .. }) = nodes.get_mut(here) {
        *right = right_at;
    }
    grow(x, y, right, how, rng, nodes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, f: impl Fn(f64, f64) -> f64) -> (Vec<Vec<f64>>, Vec<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let x: Vec<Vec<f64>> = (0..n)
            .map(|_| vec![rng.random::<f64>() * 4.0, rng.random::<f64>() * 4.0])
            .collect();
        let y = x.iter().map(|r| f(r[0], r[1])).collect();
        (x, y)
    }

    #[test]
    fn learns_a_smooth_function_and_a_step_it_was_never_told_the_shape_of() {
        let (x, y) = data(800, |a, b| a.sin() + if b > 2.0 { 1.0 } else { 0.0 });
        let Some(forest) = Forest::fit(&x, &y, Grow::default()) else {
            panic!("no forest")
        };
        for (a, b) in [(0.5, 1.0), (1.5, 3.0), (3.0, 0.5), (2.5, 2.5)] {
            let want = f64::sin(a) + if b > 2.0 { 1.0 } else { 0.0 };
            let (got, _) = forest.predict(&[a, b]);
            assert!((got - want).abs() < 0.12, "{a},{b}: {got} vs {want}");
        }
        // A feature with no bearing on y leaves the prediction alone.
        let (x, y) = data(400, |a, _| 2.0 * a);
        let Some(forest) = Forest::fit(&x, &y, Grow::default()) else {
            panic!("no forest")
        };
        let (p, _) = forest.predict(&[2.0, 0.1]);
        let (q, _) = forest.predict(&[2.0, 3.9]);
        assert!((p - q).abs() < 0.2, "{p} vs {q}");
    }

    #[test]
    fn is_deterministic_and_refuses_ragged_or_empty_input() {
        let (x, y) = data(100, |a, b| a * b);
        let a = Forest::fit(&x, &y, Grow::default());
        let b = Forest::fit(&x, &y, Grow::default());
        assert!(a.is_some() && a == b);
        assert!(Forest::fit(&[], &[], Grow::default()).is_none());
        assert!(Forest::fit(&[vec![1.0], vec![1.0, 2.0]], &[1.0, 2.0], Grow::default()).is_none());
        // One sample: a single leaf that predicts it.
        let Some(one) = Forest::fit(&[vec![1.0]], &[5.0], Grow::default()) else {
            panic!("no forest")
        };
        assert_eq!(one.predict(&[7.0]).0, 5.0);
    }
}

//! The per-template linear fit kept beside the forest: a group's seconds as a fixed cost, a
//! cost per FLOP and a cost per byte, fitted by non-negative least squares; the groups without
//! a shape, and `costmodel fit`'s summary, use it.

use serde::{Deserialize, Serialize};

/// Samples a template needs before it is fitted on its own (else its family's, else every
/// group's model is used).
pub const MIN_SAMPLES: usize = 4;

/// A fitted time model: seconds = fixed + per_flop · FLOPs + per_byte · bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    pub fixed: f64,
    pub per_flop: f64,
    pub per_byte: f64,
    pub samples: usize,
}

impl Linear {
    pub fn seconds(&self, flops: f64, bytes: f64) -> f64 {
        self.fixed + self.per_flop * flops + self.per_byte * bytes
    }
}

/// Non-negative least squares over `samples` (flops, bytes, seconds), in seconds: the large
/// layers that make up most of a model's latency weigh most (weighing each sample by its
/// relative error instead let the many tiny layers — squeeze-and-excitation convolutions on a
/// 1×1 map — set the cost per FLOP, and predicted held-out models about half as well). An
/// active set: a coefficient that comes out negative is dropped and the rest refitted.
pub fn fit_linear(samples: &[(f64, f64, f64)]) -> Option<Linear> {
    let usable: Vec<&(f64, f64, f64)> = samples.iter().filter(|s| s.2 > 0.0).collect();
    if usable.is_empty() {
        return None;
    }
    let mut active = [true; 3];
    loop {
        let index: Vec<usize> = (0..3).filter(|&j| active[j]).collect();
        if index.is_empty() {
            return None;
        }
        let n = index.len();
        let mut a = vec![vec![0.0; n]; n];
        let mut b = vec![0.0; n];
        for (f, by, t) in &usable {
            let x = [1.0, *f, *by];
            for (r, &jr) in index.iter().enumerate() {
                b[r] += x[jr] * t;
                for (c, &jc) in index.iter().enumerate() {
                    a[r][c] += x[jr] * x[jc];
                }
            }
        }
        // Collinear features (every sample's bytes a multiple of its FLOPs): the last one
        // still active goes, and the rest are fitted.
        let Some(solved) = solve(a, b) else {
            match (1..3).rev().find(|&j| active[j]) {
                Some(j) => {
                    active[j] = false;
                    continue;
                }
                None => return None,
            }
        };
        let mut coef = [0.0; 3];
        for (r, &j) in index.iter().enumerate() {
            coef[j] = solved[r];
        }
        match (0..3)
            .filter(|&j| active[j] && coef[j] < 0.0)
            .min_by(|&x, &y| coef[x].total_cmp(&coef[y]))
        {
            Some(j) => active[j] = false,
            None => {
                return Some(Linear {
                    fixed: coef[0],
                    per_flop: coef[1],
                    per_byte: coef[2],
                    samples: usable.len(),
                })
            }
        }
    }
}

/// Solves the normal equations `a x = b` (symmetric, positive definite unless the features
/// are collinear: None then) by Cholesky, the features scaled first (FLOPs and bytes reach 1e9
/// beside a constant 1).
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    use crate::tune::gp::{backward, cholesky, forward};
    let n = b.len();
    let scale: Vec<f64> = (0..n).map(|j| a[j][j].abs().sqrt().max(1e-300)).collect();
    for (r, row) in a.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v /= scale[r] * scale[c];
        }
        b[r] /= scale[r];
    }
    // Scaled, the diagonal is 1: a pivot this small is a collinear feature.
    let l = cholesky(&a)?;
    if l.iter().enumerate().any(|(i, row)| row[i] < 1e-6) {
        return None;
    }
    let x = backward(&l, &forward(&l, &b));
    Some(x.iter().zip(&scale).map(|(x, s)| x / s).collect())
}

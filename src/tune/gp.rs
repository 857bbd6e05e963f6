//! The tuner's cost model: Gaussian-process regression on the configurations'
//! features, fitted to the logarithm of the measured cost, predicting a mean and an
//! uncertainty for every configuration not measured yet; and the expected-improvement rule
//! that turns those predictions into the next candidate.
//!
//! The kernel is a squared exponential with one length scale per feature (automatic relevance
//! determination). Its scales and the noise level are chosen by the log marginal likelihood over
//! a small grid, coordinate by coordinate: no gradient, no hardware knowledge, cheap at the
//! few dozen observations a tuning run makes.

/// Length scales tried for every feature at once (features are scaled to [0, 1]).
const SHARED_SCALES: &[f64] = &[0.3, 0.6, 1.0, 2.0, 4.0];
/// Factors tried on one feature's scale while the others stay; the last one all but
/// switches the feature off.
const FEATURE_FACTORS: &[f64] = &[0.35, 0.6, 1.0, 1.7, 3.0, 100.0];
/// Noise variances tried, relative to the standardised targets' unit variance.
const NOISE: &[f64] = &[1e-4, 1e-3, 1e-2, 5e-2];
/// Passes of the coordinate-wise search over the feature scales.
const PASSES: usize = 2;
/// Weights tried for the linear part of the kernel: latency on a log scale is close to a sum
/// of per-feature effects (engine, threads, batch, options), which a linear kernel carries to
/// configurations far from any measured one, where the squared exponential alone reverts to
/// the mean.
const LINEAR: &[f64] = &[0.0, 0.1, 0.5, 2.0];

/// A fitted model.
#[derive(Debug, Clone)]
pub struct Gp {
    x: Vec<Vec<f64>>,
    /// The standardised targets.
    ys: Vec<f64>,
    /// The Cholesky factor of the kernel matrix with noise.
    chol: Vec<Vec<f64>>,
    alpha: Vec<f64>,
    mean: f64,
    scale: f64,
    pub length: Vec<f64>,
    pub noise: f64,
    pub linear: f64,
}

/// A prediction in the target's units (the logarithm of the cost).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub mean: f64,
    pub sd: f64,
}

/// Hyperparameters of the kernel.
#[derive(Debug, Clone, PartialEq)]
struct Hyper {
    length: Vec<f64>,
    noise: f64,
    linear: f64,
}

/// Squared exponential plus a linear part on features centred at 0.5.
fn kernel(a: &[f64], b: &[f64], h: &Hyper) -> f64 {
    let d2: f64 = a
        .iter()
        .zip(b)
        .zip(&h.length)
        .map(|((x, y), l)| ((x - y) / l).powi(2))
        .sum();
    let dims = a.len().max(1) as f64;
    let dot: f64 = a.iter().zip(b).map(|(x, y)| (x - 0.5) * (y - 0.5)).sum();
    (-0.5 * d2).exp() + h.linear * dot * 4.0 / dims
}

/// The lower Cholesky factor of a symmetric positive-definite matrix, or None when it is not.
pub(super) fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if d <= 0.0 || !d.is_finite() {
                    return None;
                }
                l[i][j] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

/// Solves L z = b (L lower triangular).
pub(super) fn forward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; b.len()];
    for i in 0..b.len() {
        let s: f64 = (0..i).map(|k| l[i][k] * z[k]).sum();
        z[i] = (b[i] - s) / l[i][i];
    }
    z
}

/// Solves Lᵀ z = b.
pub(super) fn backward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut z = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * z[k]).sum();
        z[i] = (b[i] - s) / l[i][i];
    }
    z
}

/// The factor, the weights and the log marginal likelihood of standardised targets `y` under
/// one setting of the hyperparameters.
fn factor(x: &[Vec<f64>], y: &[f64], h: &Hyper) -> Option<(Vec<Vec<f64>>, Vec<f64>, f64)> {
    let n = x.len();
    let k: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| kernel(&x[i], &x[j], h) + if i == j { h.noise } else { 0.0 })
                .collect()
        })
        .collect();
    let l = cholesky(&k)?;
    let alpha = backward(&l, &forward(&l, y));
    let fit: f64 = y.iter().zip(&alpha).map(|(a, b)| a * b).sum();
    let logdet: f64 = (0..n).map(|i| l[i][i].ln()).sum();
    let lml = -0.5 * fit - logdet - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
    Some((l, alpha, lml))
}

impl Gp {
    /// Fits the model to features `x` (scaled to [0, 1]) and targets `y`; None without data.
    pub fn fit(x: &[Vec<f64>], y: &[f64]) -> Option<Gp> {
        let n = y.len();
        if n == 0 || x.len() != n {
            return None;
        }
        let dims = x[0].len();
        let mean = y.iter().sum::<f64>() / n as f64;
        let var = y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let scale = if var > 1e-12 { var.sqrt() } else { 1.0 };
        let ys: Vec<f64> = y.iter().map(|v| (v - mean) / scale).collect();
        let score = |h: &Hyper| factor(x, &ys, h).map(|f| f.2);
        // The shared scale, the noise and the linear weight first, then each feature's own
        // scale in turn.
        let mut best: Option<(f64, Hyper)> = None;
        for &s in SHARED_SCALES {
            for &noise in NOISE {
                for &linear in LINEAR {
                    let h = Hyper {
                        length: vec![s; dims],
                        noise,
                        linear,
                    };
                    if let Some(lml) = score(&h) {
                        if best.as_ref().is_none_or(|b| lml > b.0) {
                            best = Some((lml, h));
                        }
                    }
                }
            }
        }
        let (mut lml, mut h) = best?;
        if n >= 3 {
            for _ in 0..PASSES {
                for d in 0..dims {
                    let base = h.length[d];
                    for &f in FEATURE_FACTORS {
                        let mut trial = h.clone();
                        trial.length[d] = base * f;
                        if let Some(l) = score(&trial) {
                            if l > lml + 1e-9 {
                                lml = l;
                                h = trial;
                            }
                        }
                    }
                }
            }
        }
        let (chol, alpha, _) = factor(x, &ys, &h)?;
        Some(Gp {
            x: x.to_vec(),
            ys,
            chol,
            alpha,
            mean,
            scale,
            length: h.length,
            noise: h.noise,
            linear: h.linear,
        })
    }

    /// Leave-one-out predictions of every training target (closed form: each is what the
    /// model with the same hyperparameters predicts from all the other points).
    pub fn leave_one_out(&self) -> Vec<f64> {
        let n = self.ys.len();
        // The diagonal of K⁻¹ = L⁻ᵀ L⁻¹: the squared norms of L⁻¹'s columns.
        let mut diag = vec![0.0; n];
        for i in 0..n {
            let mut e = vec![0.0; n];
            e[i] = 1.0;
            diag[i] = forward(&self.chol, &e).iter().map(|v| v * v).sum();
        }
        (0..n)
            .map(|i| {
                let standardised = self.ys[i] - self.alpha[i] / diag[i].max(1e-300);
                self.mean + self.scale * standardised
            })
            .collect()
    }

    /// The predicted target at `point`, with the standard deviation of the latent function.
    pub fn predict(&self, point: &[f64]) -> Prediction {
        let h = Hyper {
            length: self.length.clone(),
            noise: self.noise,
            linear: self.linear,
        };
        let k: Vec<f64> = self.x.iter().map(|xi| kernel(xi, point, &h)).collect();
        let mean: f64 = k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = forward(&self.chol, &k);
        let prior = kernel(point, point, &h);
        let var = (prior - v.iter().map(|x| x * x).sum::<f64>()).max(1e-12);
        Prediction {
            mean: self.mean + self.scale * mean,
            sd: self.scale * var.sqrt(),
        }
    }
}

/// The standard normal's cumulative distribution (Abramowitz and Stegun 7.1.26 for erf,
/// absolute error below 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

pub fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Expected improvement below `best` (we minimise), with a margin `xi` that favours
/// exploration.
pub fn expected_improvement(p: Prediction, best: f64, xi: f64) -> f64 {
    let gain = best - p.mean - xi;
    if p.sd <= 1e-12 {
        return gain.max(0.0);
    }
    let z = gain / p.sd;
    gain * normal_cdf(z) + p.sd * normal_pdf(z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Context;

    #[test]
    fn the_normal_distribution_matches_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655_25).abs() < 1e-6);
        assert!((normal_pdf(0.0) - 0.398_942_28).abs() < 1e-7);
    }

    #[test]
    fn cholesky_solves_a_small_system() -> crate::error::Result<()> {
        let a = vec![vec![4.0, 2.0], vec![2.0, 3.0]];
        let l = cholesky(&a).context("missing")?;
        let x = backward(&l, &forward(&l, &[2.0, 1.0]));
        // 4x + 2y = 2, 2x + 3y = 1 → x = 0.5, y = 0.
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12);
        assert!(cholesky(&[vec![1.0, 2.0], vec![2.0, 1.0]]).is_none());
        Ok(())
    }

    #[test]
    fn the_model_interpolates_and_is_unsure_far_from_data() -> crate::error::Result<()> {
        // y = 3·x0, x1 irrelevant.
        let x: Vec<Vec<f64>> = (0..8)
            .map(|i| vec![i as f64 / 7.0, ((i * 5) % 8) as f64 / 7.0])
            .collect();
        let y: Vec<f64> = x.iter().map(|p| 3.0 * p[0]).collect();
        let gp = Gp::fit(&x, &y).context("missing")?;
        for (p, t) in x.iter().zip(&y) {
            let pred = gp.predict(p);
            assert!((pred.mean - t).abs() < 0.05, "{pred:?} vs {t}");
        }
        let mid = gp.predict(&[0.5, 0.5]);
        assert!((mid.mean - 1.5).abs() < 0.15, "{mid:?}");
        let near = gp.predict(&x[3]).sd;
        let far = gp.predict(&[3.0, 3.0]).sd;
        assert!(far > 5.0 * near, "far {far} near {near}");
        // The irrelevant feature earns a longer scale than the relevant one.
        assert!(gp.length[1] > gp.length[0], "{:?}", gp.length);
        Ok(())
    }

    #[test]
    fn leave_one_out_matches_refitting_without_the_point() -> crate::error::Result<()> {
        let x: Vec<Vec<f64>> = (0..7).map(|i| vec![i as f64 / 6.0]).collect();
        let y: Vec<f64> = x.iter().map(|p| (3.0 * p[0]).sin()).collect();
        let gp = Gp::fit(&x, &y).context("missing")?;
        let loo = gp.leave_one_out();
        // Refit on the other points with the same hyperparameters and predict the left-out one.
        let h = Hyper {
            length: gp.length.clone(),
            noise: gp.noise,
            linear: gp.linear,
        };
        for i in 0..x.len() {
            let xs: Vec<Vec<f64>> = (0..x.len())
                .filter(|&j| j != i)
                .map(|j| x[j].clone())
                .collect();
            let ys: Vec<f64> = (0..x.len())
                .filter(|&j| j != i)
                .map(|j| (y[j] - gp.mean) / gp.scale)
                .collect();
            let (_, alpha, _) = factor(&xs, &ys, &h).context("missing")?;
            let k: Vec<f64> = xs.iter().map(|xj| kernel(xj, &x[i], &h)).collect();
            let predicted: f64 = k.iter().zip(&alpha).map(|(a, b)| a * b).sum();
            let expected = gp.mean + gp.scale * predicted;
            assert!(
                (loo[i] - expected).abs() < 1e-6,
                "{i}: {} vs {expected}",
                loo[i]
            );
        }
        Ok(())
    }

    #[test]
    fn expected_improvement_prefers_low_means_and_high_uncertainty() {
        let best = 1.0;
        let low = expected_improvement(Prediction { mean: 0.5, sd: 0.1 }, best, 0.0);
        let high = expected_improvement(Prediction { mean: 1.5, sd: 0.1 }, best, 0.0);
        let unsure = expected_improvement(Prediction { mean: 1.5, sd: 1.0 }, best, 0.0);
        assert!(low > unsure && unsure > high, "{low} {unsure} {high}");
        assert!((low - 0.5).abs() < 1e-3);
        assert_eq!(
            expected_improvement(Prediction { mean: 2.0, sd: 0.0 }, best, 0.0),
            0.0
        );
    }
}

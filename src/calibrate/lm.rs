//! A small Levenberg–Marquardt least-squares solver with bounds (clamped
//! steps) and forward-difference Jacobians, and the statistics that say
//! whether the data determine each parameter.

/// A parameter to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its key (e.g. `cost.step_overhead_ms`).
    pub key: String,
    /// Starting value.
    pub init: f64,
    /// Smallest allowed value.
    pub lo: f64,
    /// Largest allowed value.
    pub hi: f64,
    /// A typical magnitude, for finite differences and step scaling.
    pub scale: f64,
}

/// The outcome of a fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Fitted values, in parameter order.
    pub values: Vec<f64>,
    /// Residuals at the solution.
    pub residuals: Vec<f64>,
    /// Jacobian at the solution: rows = residuals, columns = parameters
    /// (per unit of each parameter's `scale`).
    pub jacobian: Vec<Vec<f64>>,
    /// Iterations used.
    pub iterations: usize,
}

fn ssq(r: &[f64]) -> f64 {
    r.iter().map(|x| x * x).sum()
}

/// Solves the symmetric positive system `a x = b` (Cholesky); None if singular.
pub fn solve(a: &[Vec<f64>], b: &[f64]) -> Option<Vec<f64>> {
    let n = b.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s = a[i][j] - (0..j).map(|k| l[i][k] * l[j][k]).sum::<f64>();
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
        y[i] = (b[i] - s) / l[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i][i];
    }
    Some(x)
}

/// The inverse of a symmetric positive matrix; None if singular.
pub fn inverse(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut inv = vec![vec![0.0; n]; n];
    for j in 0..n {
        let mut e = vec![0.0; n];
        e[j] = 1.0;
        let col = solve(a, &e)?;
        for i in 0..n {
            inv[i][j] = col[i];
        }
    }
    Some(inv)
}

/// Minimises Σ residuals(values)² within the bounds. `residuals` may fail
/// (an impossible set-up); a failing trial step counts as a worse one.
pub fn minimise<E>(
    params: &[Param],
    max_iter: usize,
    mut residuals: impl FnMut(&[f64]) -> Result<Vec<f64>, E>,
) -> Result<Solution, E> {
    let p = params.len();
    let clamp = |v: &mut Vec<f64>| {
        for (x, q) in v.iter_mut().zip(params) {
            *x = x.clamp(q.lo, q.hi);
        }
    };
    let mut x: Vec<f64> = params.iter().map(|q| q.init).collect();
    clamp(&mut x);
    let mut r = residuals(&x)?;
    let mut cost = ssq(&r);
    let mut lambda = 1e-2;
    let mut jac = vec![vec![0.0; p]; r.len()];
    let mut iterations = 0;
    type Residuals<'a, E> = dyn FnMut(&[f64]) -> Result<Vec<f64>, E> + 'a;
    let jacobian = |x: &[f64], r: &[f64], res: &mut Residuals<E>| -> Result<Vec<Vec<f64>>, E> {
        let mut j = vec![vec![0.0; p]; r.len()];
        for (k, q) in params.iter().enumerate() {
            // Step towards the interior so both sides of a bound work.
            let h = 0.05 * q.scale;
            let mut xs = x.to_vec();
            let dir = if x[k] + h > q.hi { -1.0 } else { 1.0 };
            xs[k] = x[k] + dir * h;
            let rs = res(&xs)?;
            for (i, row) in j.iter_mut().enumerate() {
                // Per unit of scale.
                row[k] = (rs[i] - r[i]) / (dir * h) * q.scale;
            }
        }
        Ok(j)
    };
    for it in 0..max_iter {
        iterations = it + 1;
        jac = jacobian(&x, &r, &mut residuals)?;
        // Normal equations in scaled units.
        let mut a = vec![vec![0.0; p]; p];
        let mut g = vec![0.0; p];
        for (i, row) in jac.iter().enumerate() {
            for k in 0..p {
                g[k] -= row[k] * r[i];
                for l in 0..p {
                    a[k][l] += row[k] * row[l];
                }
            }
        }
        let mut improved = false;
        for _ in 0..12 {
            let mut damped = a.clone();
            for (k, row) in damped.iter_mut().enumerate() {
                row[k] += lambda * (a[k][k].max(1e-12));
            }
            let Some(step) = solve(&damped, &g) else {
                lambda *= 10.0;
                continue;
            };
            let mut xn: Vec<f64> = x.iter().zip(&step).zip(params).map(|((v, s), q)| v + s * q.scale).collect();
            clamp(&mut xn);
            let trial = residuals(&xn);
            if let Ok(rn) = trial {
                let cn = ssq(&rn);
                if cn < cost {
                    let rel = (cost - cn) / cost.max(1e-300);
                    x = xn;
                    r = rn;
                    cost = cn;
                    lambda = (lambda / 3.0).max(1e-9);
                    improved = true;
                    if rel < 1e-6 {
                        return Ok(Solution { values: x, residuals: r, jacobian: jac, iterations });
                    }
                    break;
                }
            }
            lambda *= 10.0;
        }
        if !improved {
            break;
        }
    }
    Ok(Solution { values: x, residuals: r, jacobian: jac, iterations })
}

/// What the data say about each fitted parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Identifiability {
    /// Standard error of each parameter, in its units (NaN when singular).
    pub std_err: Vec<f64>,
    /// Pairwise correlations of the estimates.
    pub correlation: Vec<Vec<f64>>,
    /// Length of each Jacobian column relative to the longest one.
    pub sensitivity: Vec<f64>,
}

/// Standard errors, correlations and sensitivities at a solution.
pub fn identifiability(sol: &Solution, params: &[Param]) -> Identifiability {
    let p = params.len();
    let n = sol.residuals.len();
    let norms: Vec<f64> = (0..p).map(|k| sol.jacobian.iter().map(|row| row[k] * row[k]).sum::<f64>().sqrt()).collect();
    let max = norms.iter().cloned().fold(0.0, f64::max).max(1e-300);
    let mut a = vec![vec![0.0; p]; p];
    for row in &sol.jacobian {
        for k in 0..p {
            for l in 0..p {
                a[k][l] += row[k] * row[l];
            }
        }
    }
    let sigma2 = ssq(&sol.residuals) / (n.saturating_sub(p)).max(1) as f64;
    let (std_err, correlation) = match inverse(&a) {
        Some(inv) => {
            let se: Vec<f64> = (0..p).map(|k| (sigma2 * inv[k][k]).max(0.0).sqrt() * params[k].scale).collect();
            let corr = (0..p).map(|k| (0..p).map(|l| inv[k][l] / (inv[k][k] * inv[l][l]).sqrt()).collect()).collect();
            (se, corr)
        }
        None => (vec![f64::NAN; p], vec![vec![f64::NAN; p]; p]),
    };
    Identifiability { std_err, correlation, sensitivity: norms.iter().map(|v| v / max).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(key: &str, init: f64) -> Param {
        Param { key: key.into(), init, lo: 0.0, hi: 100.0, scale: 1.0 }
    }

    #[test]
    fn recovers_a_line() {
        // y = 2 + 0.5 x, residuals in log space as servesim uses them.
        let xs: Vec<f64> = (1..=20).map(|i| i as f64).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 2.0 + 0.5 * x).collect();
        let params = [param("a", 1.0), param("b", 1.0)];
        let sol = minimise(&params, 100, |v| -> Result<Vec<f64>, ()> {
            Ok(xs.iter().zip(&ys).map(|(x, y)| ((v[0] + v[1] * x) / y).ln()).collect())
        })
        .unwrap();
        assert!((sol.values[0] - 2.0).abs() < 1e-3 && (sol.values[1] - 0.5).abs() < 1e-4, "{:?}", sol.values);
        let id = identifiability(&sol, &params);
        assert!(id.sensitivity.iter().all(|s| *s > 0.01));
    }

    #[test]
    fn flags_what_the_data_cannot_see() {
        // y = a + b·x with every x the same: a and b are not separable.
        let xs = [3.0; 10];
        let params = [param("a", 1.0), param("b", 1.0)];
        let sol = minimise(&params, 50, |v| -> Result<Vec<f64>, ()> {
            Ok(xs.iter().map(|x| ((v[0] + v[1] * x) / 5.0).ln()).collect())
        })
        .unwrap();
        let id = identifiability(&sol, &params);
        assert!(id.std_err.iter().any(|s| !s.is_finite()) || id.correlation[0][1].abs() > 0.99, "{id:?}");
        // A parameter nothing depends on has no sensitivity.
        let params = [param("a", 1.0), param("unused", 1.0)];
        let sol = minimise(&params, 50, |v| -> Result<Vec<f64>, ()> { Ok(vec![(v[0] / 5.0).ln(); 4]) }).unwrap();
        assert!(identifiability(&sol, &params).sensitivity[1] < 1e-9);
    }
}

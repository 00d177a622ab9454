//! Choosing τ for a requested valid ratio (cuSpAMM section 3.5.2).
//!
//! The paper: take the mean `ave` of all block norm products, binary-search τ in `[0, k·ave]` starting
//! at τ = ave with k = 1, and raise k to k + 1 whenever the upper bound still performs more products
//! than requested; stop when the ratio is within the tolerance or after the iteration budget.

use super::{NormMap, is_performed};
use crate::error::{Error, Result};
use rayon::prelude::*;

/// Counts, for any τ, how many block products `nA[i,k] · nB[k,j] ≥ τ` hold, exactly as the plan
/// decides them, in O(mb · kb · log nb) per τ instead of O(mb · nb · kb).
pub struct ValidProductCounter<'a> {
    a_norms: &'a NormMap,
    /// Row k of B's norm map: its finite values, ascending.
    sorted_b_rows: Vec<Vec<f64>>,
    /// Row k of B's norm map: how many entries are +∞ (they never sort usefully with the finite ones).
    infinite_b: Vec<usize>,
    total: u64,
}

impl<'a> ValidProductCounter<'a> {
    pub fn new(a_norms: &'a NormMap, b_norms: &NormMap) -> Self {
        let kb = b_norms.block_rows;
        let (sorted_b_rows, infinite_b): (Vec<Vec<f64>>, Vec<usize>) = (0..kb)
            .into_par_iter()
            .map(|k| {
                let row: Vec<f64> = (0..b_norms.block_cols).map(|j| b_norms.get(k, j)).collect();
                // NaN norms (NaN in the input) never satisfy `≥ τ`, so they are simply left out.
                let mut finite: Vec<f64> = row.iter().copied().filter(|x| x.is_finite()).collect();
                finite.sort_by(f64::total_cmp);
                (finite, row.iter().filter(|x| **x == f64::INFINITY).count())
            })
            .unzip();
        let total = (a_norms.block_rows * b_norms.block_cols * kb) as u64;
        ValidProductCounter { a_norms, sorted_b_rows, infinite_b, total }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Number of performed block products at threshold τ.
    ///
    /// Exact: for a fixed `a ≥ 0`, rounding `a·x` to nearest is monotone in `x`, so over B's finite
    /// norms sorted ascending the failing products `!(a·x ≥ τ)` form a prefix (NaN products fail).
    pub fn count(&self, tau: f64) -> u64 {
        (0..self.a_norms.block_cols)
            .into_par_iter()
            .map(|k| {
                let sorted = &self.sorted_b_rows[k];
                let mut count = 0u64;
                for i in 0..self.a_norms.block_rows {
                    let a = self.a_norms.get(i, k);
                    let failing = sorted.partition_point(|&x| !is_performed(a, x, tau));
                    count += (sorted.len() - failing) as u64;
                    if is_performed(a, f64::INFINITY, tau) {
                        count += self.infinite_b[k] as u64;
                    }
                }
                count
            })
            .sum()
    }

    pub fn ratio(&self, tau: f64) -> f64 {
        if self.total == 0 { 1.0 } else { self.count(tau) as f64 / self.total as f64 }
    }
}

/// The τ search's answer: the best τ seen and the valid ratio it gives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TauChoice {
    pub tau: f64,
    pub valid_ratio: f64,
    /// Valid-ratio evaluations spent (extensions of the upper bound included).
    pub iterations: usize,
}

/// Checks the search arguments (before any expensive work).
pub fn check_search(target: f64, tolerance: f64, max_iterations: usize) -> Result<()> {
    if !(target > 0.0 && target <= 1.0) {
        return Err(Error::invalid_value(format!("argument targetValidRatio = {target} is outside (0, 1]")));
    }
    if !(tolerance >= 0.0 && tolerance.is_finite()) {
        return Err(Error::invalid_value(format!(
            "argument tolerance = {tolerance} must be a finite non-negative number"
        )));
    }
    if max_iterations == 0 {
        return Err(Error::invalid_value("argument maxIterations = 0 must be at least 1"));
    }
    Ok(())
}

/// Searches τ so that the valid ratio is within `tolerance` of `target` (0 < target ≤ 1), spending at
/// most `max_iterations` valid-ratio evaluations; returns the τ whose ratio was closest to the target.
pub fn tune_tau(
    a_norms: &NormMap,
    b_norms: &NormMap,
    target: f64,
    tolerance: f64,
    max_iterations: usize,
) -> Result<TauChoice> {
    check_search(target, tolerance, max_iterations)?;
    let counter = ValidProductCounter::new(a_norms, b_norms);
    tune_tau_with(a_norms, b_norms, target, tolerance, max_iterations, |tau| Ok(counter.count(tau)))
}

/// [`tune_tau`] with the valid products at a τ counted by `count` (which must decide exactly as
/// [`is_performed`]; a backend may count on its device).
pub fn tune_tau_with(
    a_norms: &NormMap,
    b_norms: &NormMap,
    target: f64,
    tolerance: f64,
    max_iterations: usize,
    mut count: impl FnMut(f64) -> Result<u64>,
) -> Result<TauChoice> {
    check_search(target, tolerance, max_iterations)?;
    let total = (a_norms.block_rows * b_norms.block_cols * a_norms.block_cols) as u64;
    if total == 0 {
        return Err(Error::invalid_size("m, n and k must be positive to tune tau: there are no block products"));
    }
    // Mean of all products nA[i,k]·nB[k,j] = Σ_k (Σ_i nA[i,k]) (Σ_j nB[k,j]) / total.
    let sum: f64 = (0..a_norms.block_cols)
        .map(|k| {
            let a: f64 = (0..a_norms.block_rows).map(|i| a_norms.get(i, k)).sum();
            let b: f64 = (0..b_norms.block_cols).map(|j| b_norms.get(k, j)).sum();
            a * b
        })
        .sum();
    let ave = sum / total as f64;
    if !ave.is_finite() {
        return Err(Error::invalid_value(
            "A or B contains Inf or NaN, so block norms are not finite and tau cannot be searched",
        ));
    }

    let mut best: Option<(f64, f64)> = None;
    let mut evaluations = 0usize;
    let mut consider = |tau: f64| -> Result<f64> {
        evaluations += 1;
        let ratio = count(tau)? as f64 / total as f64;
        if best.is_none_or(|(_, r)| (ratio - target).abs() < (r - target).abs()) {
            best = Some((tau, ratio));
        }
        Ok(ratio)
    };

    if ave == 0.0 {
        // Every product is zero: τ = 0 performs all of them, any τ > 0 none. Nothing to search.
        consider(0.0)?;
        if max_iterations > 1 {
            consider(f64::MIN_POSITIVE)?;
        }
    } else {
        let (mut lower, mut upper, mut expansion) = (0.0f64, ave, 1.0f64);
        let mut tau = ave;
        for _ in 0..max_iterations {
            let ratio = consider(tau)?;
            if (ratio - target).abs() <= tolerance {
                break;
            }
            if ratio > target {
                // Too many products performed: τ must grow.
                lower = tau;
                if tau >= upper {
                    expansion += 1.0;
                    upper = expansion * ave;
                    tau = upper;
                    continue;
                }
            } else {
                upper = tau;
            }
            let middle = lower + (upper - lower) / 2.0;
            if middle <= lower || middle >= upper {
                break; // the interval is down to adjacent floats: no τ in between to try
            }
            tau = middle;
        }
    }
    let (tau, valid_ratio) = best.ok_or_else(|| Error::internal("tau search evaluated nothing"))?;
    Ok(TauChoice { tau, valid_ratio, iterations: evaluations })
}

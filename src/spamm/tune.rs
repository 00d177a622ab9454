//! Choosing τ: for a requested valid ratio (cuSpAMM section 3.5.2, generalised to a multi-way
//! search) or for a requested error bound.
//!
//! The paper takes the mean `ave` of all block norm products and bisects τ in `[0, k·ave]`, raising k
//! while the upper end still performs too many products: one valid-ratio evaluation per step, and on
//! a GPU one kernel launch plus one blocking copy per step. Here each *iteration* evaluates a whole
//! set of candidate τ at once (up to [`RATIO_CANDIDATES`]): a multi-way search, of which bisection is
//! the two-way case. Both searches below run on the host and ask a [`CandidateEvaluator`] (the CPU's
//! [`NormMapEvaluator`], or the CUDA backend's device evaluator) for exact facts about the norm
//! products `nA[i,k]·nB[k,j]` at the candidates; every backend computes the same numbers, so every
//! backend picks the same τ.
//!
//! The bracket is `[0, next_up(max product)]` rather than `[0, k·ave]`: both ends are known without
//! counting (τ = 0 performs every product, a τ above the largest product none), the largest product is
//! exact on every backend (a maximum does not depend on summation order, a mean does), and no
//! iterations go into growing the upper end. Candidates are spread evenly over the *bit patterns* of
//! the f64 values in the bracket (the order of non-negative doubles is the order of their bits), so a
//! bracket spanning many orders of magnitude (exponentially decaying matrices) is searched in its
//! logarithm and a narrow one linearly. After each iteration the bracket is shrunk to the two
//! neighbouring candidates that enclose the target, and then to the norm products just inside them
//! (every evaluation reports the smallest performed and the largest skipped product), so the search
//! also ends, exactly, once no τ is left that could do better. From the second iteration half of the
//! candidates are clustered around the point where the target is predicted by interpolating between
//! the bracket's ends.

use super::{NormMap, is_performed, skipped_squares};
use crate::alloc::{try_copy, try_vec};
use crate::error::{Error, Float, Result};
use rayon::prelude::*;

/// Candidates one iteration of the valid-ratio search evaluates. Counting them costs, per inner block
/// k, one merge-like walk over the sorted norms of A's column k and B's row k per candidate.
pub(crate) const RATIO_CANDIDATES: usize = 256;

/// Candidates one iteration of the error-bound search evaluates. The bound of a τ needs every C
/// block's sum of skipped products in k order, so the evaluation walks all block products with one
/// accumulator per candidate.
pub(crate) const BOUND_CANDIDATES: usize = 16;

/// Facts about the norm products `nA[i,k]·nB[k,j]` (f64 products of finite norms) that do not depend
/// on any summation order, so every backend computes them exactly alike.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProductRange {
    /// (mb, nb, kb): block rows of op(A), block columns of op(B), inner blocks.
    pub dims: (usize, usize, usize),
    /// The smallest product (0 when a zero block meets any block).
    pub min: f64,
    /// The largest product.
    pub max: f64,
    /// `min over k` of (smallest positive norm of A's column k) · (smallest positive norm of B's row
    /// k): no positive product is smaller. 0 when no k has positive norms on both sides or when such a
    /// product underflows (then it says nothing).
    pub positive_floor: f64,
}

impl ProductRange {
    pub fn total(&self) -> u64 {
        let (mb, nb, kb) = self.dims;
        (mb * nb * kb) as u64
    }

    /// The range of two host norm maps; fails where a norm is not finite or a product overflows.
    pub fn of_norm_maps(a: &NormMap, b: &NormMap) -> Result<ProductRange> {
        let (mb, kb, nb) = (a.block_rows, a.block_cols, b.block_cols);
        if a.norms.iter().chain(&b.norms).any(|x| !x.is_finite()) {
            return Err(non_finite_norms());
        }
        let stats = |values: &mut dyn Iterator<Item = f64>| {
            let (mut min, mut max, mut min_positive) = (f64::INFINITY, 0.0f64, f64::INFINITY);
            for x in values {
                min = min.min(x);
                max = max.max(x);
                if x > 0.0 {
                    min_positive = min_positive.min(x);
                }
            }
            (min, max, min_positive)
        };
        let (mut min, mut max, mut positive_floor) = (f64::INFINITY, 0.0f64, f64::INFINITY);
        for k in 0..kb {
            let (a_min, a_max, a_pos) = stats(&mut a.norms[k * mb..(k + 1) * mb].iter().copied());
            let (b_min, b_max, b_pos) = stats(&mut (0..nb).map(|j| b.get(k, j)));
            min = min.min(a_min * b_min);
            max = max.max(a_max * b_max);
            if a_pos.is_finite() && b_pos.is_finite() {
                positive_floor = positive_floor.min(a_pos * b_pos);
            }
        }
        let range = ProductRange {
            dims: (mb, nb, kb),
            min,
            max,
            positive_floor: if positive_floor.is_finite() { positive_floor } else { 0.0 },
        };
        range.check()?;
        Ok(range)
    }

    /// Fails where there is nothing to search or where a product overflowed.
    pub fn check(&self) -> Result<()> {
        if self.total() == 0 {
            return Err(Error::invalid_size("m, n and k must be positive to tune tau: there are no block products"));
        }
        if !self.max.is_finite() {
            return Err(Error::invalid_value(
                "products of block norms of A and B overflow double precision, so tau cannot be searched",
            ));
        }
        Ok(())
    }
}

/// The error of norm maps with Inf or NaN (the backends check this before anything else).
pub fn non_finite_norms() -> Error {
    Error::invalid_value("A or B contains Inf or NaN, so block norms are not finite and tau cannot be searched")
}

/// What the search learns about one candidate τ, exactly as every backend computes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    pub tau: f64,
    /// Block products performed at τ ([`is_performed`]).
    pub performed: u64,
    /// The smallest performed norm product (meaningless when `performed` is 0).
    pub smallest_performed: f64,
    /// The largest skipped norm product (meaningless when every product is performed).
    pub largest_skipped: f64,
    /// `Σ_j Σ_i S_ij²`, S_ij the skipped sum of C block (i, j), in [`skipped_squares`]' order: the
    /// error bound is `|α|·sqrt` of it. NaN unless asked for.
    pub skipped_squares: f64,
}

/// A backend's evaluation of candidate τ on the norm maps of one product.
pub trait CandidateEvaluator {
    /// The products' range; fails where a norm is not finite or a product overflows.
    fn range(&mut self) -> Result<ProductRange>;

    /// Evaluates ascending, distinct, positive τ (at most [`RATIO_CANDIDATES`], and at most
    /// [`BOUND_CANDIDATES`] with `squares`); `squares` asks for [`Evaluation::skipped_squares`].
    fn evaluate(&mut self, taus: &[f64], squares: bool) -> Result<Vec<Evaluation>>;

    /// Told before [`CandidateEvaluator::range`] when a valid-ratio search follows, whose first
    /// candidates derive from the range alone: an evaluator may count them along with the range
    /// (the CUDA backend's saves a round trip). Nothing by default.
    fn prepare_ratio_search(&mut self) {}
}

/// The valid-ratio search's answer: the best τ seen and the valid ratio it gives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TauChoice {
    pub tau: f64,
    pub valid_ratio: f64,
    /// Iterations spent: each evaluates up to [`RATIO_CANDIDATES`] τ at once.
    pub iterations: usize,
}

/// The error-bound search's answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundChoice {
    /// The largest τ found whose bound is within the request (+∞ when skipping every product is).
    pub tau: f64,
    /// The bound at τ in the statistics' order: exactly what a product at τ reports.
    pub error_bound: f64,
    pub valid_ratio: f64,
    /// Iterations spent: each evaluates up to [`BOUND_CANDIDATES`] τ at once.
    pub iterations: usize,
    /// Whether τ is provably the largest (the search closed its bracket before the budget ran out).
    pub exact: bool,
}

/// How a product gets its τ: given by the caller, or searched on the product's own norm maps (so a
/// tuned product reads its inputs for norms once, where spammTuneTau and then spamm?gemm read them
/// twice). A searched τ is the one [`tune_for_ratio`] / [`tune_for_error_bound`] would return.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TauRule {
    Given(f64),
    /// The τ whose valid ratio is closest to `target` ([`tune_for_ratio`]).
    ValidRatio {
        target: f64,
        tolerance: f64,
        max_iterations: usize,
    },
    /// The largest τ whose error bound, for the product's |α|, is at most `bound`
    /// ([`tune_for_error_bound`]).
    ErrorBound {
        bound: f64,
        max_iterations: usize,
    },
}

impl TauRule {
    /// Checks the rule's arguments before any work (`alpha_abs`: the product's |α|).
    pub fn check(&self, alpha_abs: f64) -> Result<()> {
        match *self {
            TauRule::Given(tau) => super::check_tau(tau),
            TauRule::ValidRatio { target, tolerance, max_iterations } => {
                check_search(target, tolerance, max_iterations)
            }
            TauRule::ErrorBound { bound, max_iterations } => check_bound_search(alpha_abs, bound, max_iterations),
        }
    }

    /// The τ itself when the caller gave it.
    pub fn given(&self) -> Option<f64> {
        match *self {
            TauRule::Given(tau) => Some(tau),
            _ => None,
        }
    }

    /// The τ of a product with block counts `dims` whose norm maps `evaluator` reads. A product
    /// without block products (m, n or k zero) has nothing to skip: τ = 0 there, without a search.
    pub fn choose(
        &self,
        evaluator: &mut dyn CandidateEvaluator,
        dims: (usize, usize, usize),
        alpha_abs: f64,
    ) -> Result<f64> {
        Ok(match *self {
            TauRule::Given(tau) => tau,
            _ if dims.0 * dims.1 * dims.2 == 0 => 0.0,
            TauRule::ValidRatio { target, tolerance, max_iterations } => {
                tune_for_ratio(evaluator, target, tolerance, max_iterations)?.tau
            }
            TauRule::ErrorBound { bound, max_iterations } => {
                tune_for_error_bound(evaluator, alpha_abs, bound, max_iterations)?.tau
            }
        })
    }
}

/// Checks the valid-ratio search's arguments (before any expensive work).
pub fn check_search(target: f64, tolerance: f64, max_iterations: usize) -> Result<()> {
    if !(target > 0.0 && target <= 1.0) {
        return Err(Error::invalid_value(format!("argument targetValidRatio = {} is outside (0, 1]", Float(target))));
    }
    if !(tolerance >= 0.0 && tolerance.is_finite()) {
        return Err(Error::invalid_value(format!(
            "argument tolerance = {} must be a finite non-negative number",
            Float(tolerance)
        )));
    }
    check_iterations(max_iterations)
}

/// Checks the error-bound search's arguments.
pub fn check_bound_search(alpha_abs: f64, error_bound: f64, max_iterations: usize) -> Result<()> {
    if !alpha_abs.is_finite() {
        return Err(Error::invalid_value(format!("argument alpha = {} must be finite", Float(alpha_abs))));
    }
    if error_bound.is_nan() || error_bound < 0.0 {
        return Err(Error::invalid_value(format!(
            "argument errorBound = {} must be a non-negative number",
            Float(error_bound)
        )));
    }
    check_iterations(max_iterations)
}

fn check_iterations(max_iterations: usize) -> Result<()> {
    if max_iterations == 0 {
        return Err(Error::invalid_value("argument maxIterations = 0 must be at least 1"));
    }
    Ok(())
}

/// Searches τ so that the valid ratio is within `tolerance` of `target` (0 < target ≤ 1), spending
/// at most `max_iterations` iterations of up to [`RATIO_CANDIDATES`] candidates each; returns the τ
/// whose ratio was closest to the target (ties: the smaller τ). τ = 0 (ratio 1) and τ just above the
/// largest norm product (ratio 0) are known without counting, so they count as found: a target
/// within tolerance of 1 returns τ = 0 without any iteration.
pub fn tune_for_ratio(
    evaluator: &mut dyn CandidateEvaluator,
    target: f64,
    tolerance: f64,
    max_iterations: usize,
) -> Result<TauChoice> {
    check_search(target, tolerance, max_iterations)?;
    evaluator.prepare_ratio_search();
    let range = evaluator.range()?;
    range.check()?;
    let total = range.total();
    let ratio = |e: &Evaluation| e.performed as f64 / total as f64;
    let bracket = Bracket::initial(&range, true);
    let closest = |b: &Bracket| {
        let hi = b.hi.expect("the ratio search knows its upper end");
        if ratio(&b.lo) - target <= target - ratio(&hi) { b.lo } else { hi }
    };
    let end = bracket.search(
        evaluator,
        &range,
        &Goal {
            slots: RATIO_CANDIDATES,
            squares: false,
            max_iterations,
            first_window: None,
            is_good: &|e| ratio(e) >= target,
            level: &|e| ratio(e),
            target_level: target,
            settled: &|b| (ratio(&closest(b)) - target).abs() <= tolerance,
        },
    )?;
    let best = closest(&end.bracket);
    Ok(TauChoice { tau: best.tau, valid_ratio: ratio(&best), iterations: end.iterations })
}

/// Searches the largest τ whose error bound `|α|·sqrt(Σ_(i,j) (Σ_(skipped k) nA[i,k]·nB[k,j])²)`
/// (exactly as [`super::BlockStats::statistics`] computes it) is at most `error_bound`, spending at
/// most `max_iterations` iterations of up to [`BOUND_CANDIDATES`] candidates each.
///
/// The bound is a non-decreasing step function of τ that changes only just above a norm product, so
/// the largest such τ is a norm product itself (every smaller τ down to the next smaller product
/// skips the same products), or +∞ when skipping every product stays within the bound (α = 0, for
/// one). When the budget runs out first, the answer is the largest τ found, still within the bound,
/// and `exact` is false.
pub fn tune_for_error_bound(
    evaluator: &mut dyn CandidateEvaluator,
    alpha_abs: f64,
    error_bound: f64,
    max_iterations: usize,
) -> Result<BoundChoice> {
    check_bound_search(alpha_abs, error_bound, max_iterations)?;
    let range = evaluator.range()?;
    range.check()?;
    let (mb, nb, kb) = range.dims;
    let total = range.total();
    let bound = |e: &Evaluation| alpha_abs * e.skipped_squares.sqrt();
    // Where to look first: skipping one product p already makes the bound at least |α|·p, and
    // skipping only products below τ keeps every C block's sum below kb·τ, so the bound below
    // |α|·kb·τ·sqrt(mb·nb). Only a hint (rounding aside, the evaluations decide).
    let first_window = (alpha_abs > 0.0).then(|| {
        let high = error_bound / alpha_abs;
        (high / (kb as f64 * ((mb * nb) as f64).sqrt()) * (1.0 - 1e-9), high * (1.0 + 1e-9))
    });
    let end = Bracket::initial(&range, false).search(
        evaluator,
        &range,
        &Goal {
            slots: BOUND_CANDIDATES,
            squares: true,
            max_iterations,
            first_window,
            is_good: &|e| bound(e) <= error_bound,
            // The bound grows roughly as a power of τ: interpolate its logarithm.
            level: &|e| bound(e).ln(),
            target_level: error_bound.ln(),
            settled: &|_| false,
        },
    )?;
    let lo = end.bracket.lo;
    // The largest τ skipping what lo skips: lo's smallest performed product (+∞ when none is).
    let tau = if lo.performed == 0 { f64::INFINITY } else { lo.smallest_performed };
    Ok(BoundChoice {
        tau,
        error_bound: bound(&lo),
        valid_ratio: lo.performed as f64 / total as f64,
        iterations: end.iterations,
        exact: end.closed,
    })
}

/// What a search looks for.
struct Goal<'a> {
    slots: usize,
    squares: bool,
    max_iterations: usize,
    /// Values to spread the first iteration's candidates over, where they are inside the bracket.
    first_window: Option<(f64, f64)>,
    /// The acceptable side: true for small τ, false for large τ (monotone in τ).
    is_good: &'a dyn Fn(&Evaluation) -> bool,
    /// A value monotone in τ that crosses `target_level` where good turns bad (for interpolation).
    level: &'a dyn Fn(&Evaluation) -> f64,
    target_level: f64,
    /// Stop early (the valid-ratio tolerance).
    settled: &'a dyn Fn(&Bracket) -> bool,
}

/// The largest good τ evaluated so far and the smallest bad one (None until one is found).
#[derive(Clone, Copy, Debug)]
struct Bracket {
    lo: Evaluation,
    hi: Option<Evaluation>,
}

struct SearchEnd {
    bracket: Bracket,
    iterations: usize,
    /// No τ is left between the bracket's ends that would evaluate differently from both.
    closed: bool,
}

impl Bracket {
    /// τ = 0 performs every product and skips nothing (bound 0). With `known_top`, τ = next_up(max)
    /// is known to perform nothing (the valid-ratio search); otherwise it is yet to be evaluated.
    fn initial(range: &ProductRange, known_top: bool) -> Bracket {
        let lo = Evaluation {
            tau: 0.0,
            performed: range.total(),
            smallest_performed: range.min,
            largest_skipped: f64::NAN,
            skipped_squares: 0.0,
        };
        let hi = known_top.then(|| Evaluation {
            tau: next_up(range.max),
            performed: 0,
            smallest_performed: f64::NAN,
            largest_skipped: range.max,
            skipped_squares: f64::NAN,
        });
        Bracket { lo, hi }
    }

    fn search(
        mut self,
        evaluator: &mut dyn CandidateEvaluator,
        range: &ProductRange,
        goal: &Goal<'_>,
    ) -> Result<SearchEnd> {
        let mut iterations = 0;
        loop {
            if self.lo.performed == 0 {
                // Skipping everything is good: nothing larger can differ.
                return Ok(SearchEnd { bracket: self, iterations, closed: true });
            }
            if (goal.settled)(&self) {
                return Ok(SearchEnd { bracket: self, iterations, closed: false });
            }
            // Bit patterns of the τ that could still evaluate differently from both ends: above lo's
            // smallest performed product (at or below it, τ performs what lo performs) and up to hi's
            // largest skipped product (above it, τ skips what hi skips); with hi unknown, up to
            // next_up(max), which skips everything.
            let first = self.lo.smallest_performed.to_bits() + 1;
            let last = match &self.hi {
                Some(hi) => hi.largest_skipped.to_bits(),
                None => range.max.to_bits() + 1,
            };
            if first > last {
                return Ok(SearchEnd { bracket: self, iterations, closed: true });
            }
            if iterations == goal.max_iterations {
                return Ok(SearchEnd { bracket: self, iterations, closed: false });
            }
            let (mut from, mut to) = (first, last);
            let mut extra = None;
            if iterations == 0 {
                if let Some((low, high)) = goal.first_window {
                    let (low, high) = (low.max(0.0).to_bits().max(first), high.min(f64::MAX).to_bits().min(last));
                    if low < high {
                        (from, to) = (low, high);
                    }
                }
                // Zero blocks: every product is 0 or at least the positive floor, so the floor is
                // the one τ worth trying between 0 and the positive products.
                let floor = range.positive_floor.to_bits();
                if range.min == 0.0 && floor > from && floor <= to {
                    extra = Some(floor);
                }
            }
            // Predict where the target lies by interpolating the level between the bracket's ends in
            // bit space (only once both ends were evaluated: the initial ends say nothing about the
            // shape in between), and cluster half of the candidates around it.
            let prediction = match (&self.hi, iterations) {
                (Some(hi), 1..) => {
                    let (low, high) = ((goal.level)(&self.lo), (goal.level)(hi));
                    let fraction = (goal.target_level - low) / (high - low);
                    fraction.is_finite().then(|| fraction.clamp(0.0, 1.0))
                }
                _ => None,
            };
            let taus = spread(from, to, goal.slots, prediction, extra);
            let evaluations = evaluator.evaluate(&taus, goal.squares)?;
            iterations += 1;
            for e in evaluations {
                if (goal.is_good)(&e) {
                    if e.tau > self.lo.tau {
                        self.lo = e;
                    }
                } else if self.hi.is_none_or(|hi| e.tau < hi.tau) {
                    self.hi = Some(e);
                }
            }
        }
    }
}

/// The next larger double of a finite non-negative `x`.
fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

/// Up to `slots` distinct τ whose bit patterns lie in `[from, to]`, ascending: every pattern when
/// they fit; otherwise evenly spaced patterns including both ends, with half of the slots instead
/// clustered around `prediction` (a fraction of the way from `from` to `to`) at geometrically
/// shrinking distances. `extra` is added (it is one of the slots).
fn spread(from: u64, to: u64, slots: usize, prediction: Option<f64>, extra: Option<u64>) -> Vec<f64> {
    debug_assert!(from <= to && slots >= 4);
    let mut bits: Vec<u64> = Vec::with_capacity(slots);
    let slots = slots - extra.is_some() as usize;
    let width = to - from;
    if width < slots as u64 {
        bits.extend(from..=to);
    } else {
        let even = if prediction.is_some() { slots / 2 } else { slots };
        // from + floor(width·e / d), d = even - 1, without a 128-bit product. The device derives the
        // first iteration of the valid-ratio search by the same arithmetic (kernels/spamm.cu,
        // spamm_tune_first_candidates), before the host has read the range: keep the two in step.
        let d = even as u64 - 1;
        let (whole, rest) = (width / d, width % d);
        bits.extend((0..even as u64).map(|e| from + whole * e + rest * e / d));
        if let Some(fraction) = prediction {
            let center = from + (width as f64 * fraction) as u64;
            let spacing = (width / (even as u64 - 1)) as f64;
            // Distances from a quarter of the even spacing down by a factor 2^shrink, reaching about
            // 2^-36 of it with many slots (and shrinking by 4 at most).
            let per_side = (slots - even) / 2;
            let shrink = (36.0 / per_side as f64).min(2.0);
            for m in 0..per_side {
                let offset = (spacing / 4.0 * (-(m as f64) * shrink).exp2()) as u64;
                bits.push(center.saturating_sub(offset).max(from));
                bits.push(center.saturating_add(offset).min(to));
            }
        }
    }
    bits.extend(extra);
    bits.sort_unstable();
    bits.dedup();
    bits.into_iter().map(f64::from_bits).collect()
}

/// The CPU backend's evaluator, and the specification of every other: counts by a merge-like walk
/// over A's column k and B's row k sorted ascending (for a fixed norm `a ≥ 0`, rounding `a·x` to
/// nearest is monotone in `x`, so the performed products of each `a` are a suffix of B's sorted row,
/// and that suffix only grows as `a` grows); skipped sums product by product in k order.
pub struct NormMapEvaluator<'a> {
    a_norms: &'a NormMap,
    b_norms: &'a NormMap,
    /// Built on first use (sorting needs finite norms, which the range checks).
    sorted: Option<SortedNorms>,
}

/// Column k of A's norm map and row k of B's, ascending: `a_columns` is A's map with each column
/// sorted, `b_rows` B's map transposed (row k contiguous) with each row sorted.
struct SortedNorms {
    a_columns: Vec<f64>,
    b_rows: Vec<f64>,
}

impl<'a> NormMapEvaluator<'a> {
    pub fn new(a_norms: &'a NormMap, b_norms: &'a NormMap) -> Self {
        debug_assert_eq!(a_norms.block_cols, b_norms.block_rows);
        NormMapEvaluator { a_norms, b_norms, sorted: None }
    }

    fn sorted(&mut self) -> Result<&SortedNorms> {
        let (a, b) = (self.a_norms, self.b_norms);
        if self.sorted.is_none() {
            let mut a_columns = try_copy(&a.norms, "the sorted block norms of A")?;
            a_columns.par_chunks_mut(a.block_rows.max(1)).for_each(|column| column.sort_by(f64::total_cmp));
            let mut b_rows = try_vec(b.norms.len(), 0.0, "the sorted block norms of B")?;
            b_rows.par_chunks_mut(b.block_cols.max(1)).enumerate().for_each(|(k, row)| {
                for (j, norm) in row.iter_mut().enumerate() {
                    *norm = b.get(k, j);
                }
                row.sort_by(f64::total_cmp);
            });
            self.sorted = Some(SortedNorms { a_columns, b_rows });
        }
        Ok(self.sorted.as_ref().expect("just sorted"))
    }
}

/// Performed count, smallest performed and largest skipped product of `a_sorted × b_sorted` at τ
/// (`u64::MAX` / 0 bit patterns when there is none).
fn walk(a_sorted: &[f64], b_sorted: &[f64], tau: f64) -> (u64, u64, u64) {
    let nb = b_sorted.len();
    let (mut performed, mut smallest, mut largest) = (0u64, u64::MAX, 0u64);
    // p: the first performed position in B's row for the current a; it only moves down as a grows.
    let mut p = nb;
    for &a in a_sorted {
        while p > 0 && is_performed(a, b_sorted[p - 1], tau) {
            p -= 1;
        }
        performed += (nb - p) as u64;
        if p < nb {
            smallest = smallest.min((a * b_sorted[p]).to_bits());
        }
        if p > 0 {
            largest = largest.max((a * b_sorted[p - 1]).to_bits());
        }
    }
    (performed, smallest, largest)
}

impl CandidateEvaluator for NormMapEvaluator<'_> {
    fn range(&mut self) -> Result<ProductRange> {
        ProductRange::of_norm_maps(self.a_norms, self.b_norms)
    }

    fn evaluate(&mut self, taus: &[f64], squares: bool) -> Result<Vec<Evaluation>> {
        let (mb, nb) = (self.a_norms.block_rows.max(1), self.b_norms.block_cols.max(1));
        let sorted = self.sorted()?;
        // Per candidate: the counts summed and the extremes taken over k, in any order (exact for
        // integers and bit patterns), so that memory does not grow with k.
        let combine = |t: &mut (u64, u64, u64), (performed, smallest, largest): (u64, u64, u64)| {
            *t = (t.0 + performed, t.1.min(smallest), t.2.max(largest));
        };
        let none = || vec![(0u64, u64::MAX, 0u64); taus.len()];
        let counts = sorted
            .a_columns
            .par_chunks(mb)
            .zip(sorted.b_rows.par_chunks(nb))
            .fold(none, |mut total, (column, row)| {
                total.iter_mut().zip(taus).for_each(|(t, &tau)| combine(t, walk(column, row, tau)));
                total
            })
            .reduce(none, |mut total, part| {
                total.iter_mut().zip(part).for_each(|(t, p)| combine(t, p));
                total
            });
        let squares =
            if squares { skipped_squares_at(self.a_norms, self.b_norms, taus)? } else { vec![f64::NAN; taus.len()] };
        Ok(taus
            .iter()
            .enumerate()
            .map(|(c, &tau)| {
                let (performed, smallest, largest) = counts[c];
                Evaluation {
                    tau,
                    performed,
                    smallest_performed: f64::from_bits(smallest),
                    largest_skipped: f64::from_bits(largest),
                    skipped_squares: squares[c],
                }
            })
            .collect())
    }
}

/// [`Evaluation::skipped_squares`] for each τ: per C block the skipped products summed in k order,
/// exactly as [`super::ProductPlan::block_stats`], then squared and summed in [`skipped_squares`]'
/// order.
pub fn skipped_squares_at(a_norms: &NormMap, b_norms: &NormMap, taus: &[f64]) -> Result<Vec<f64>> {
    let (mb, nb, kb) = (a_norms.block_rows, b_norms.block_cols, a_norms.block_cols);
    let slots = taus.len().max(1);
    let mut per_column = try_vec(nb * taus.len(), 0.0f64, "the skipped sums per column of C blocks")?;
    per_column.par_chunks_mut(slots).enumerate().try_for_each(|(j, column_squares)| {
        // Column j's skipped sums, candidate after candidate.
        let mut columns = try_vec(mb * taus.len(), 0.0f64, "a column of skipped sums")?;
        let mut sums = vec![0.0f64; taus.len()];
        for i in 0..mb {
            sums.fill(0.0);
            for k in 0..kb {
                let (a, b) = (a_norms.get(i, k), b_norms.get(k, j));
                for (sum, &tau) in sums.iter_mut().zip(taus) {
                    if !is_performed(a, b, tau) {
                        *sum += a * b;
                    }
                }
            }
            for (c, &sum) in sums.iter().enumerate() {
                columns[c * mb + i] = sum;
            }
        }
        for (c, squares) in column_squares.iter_mut().enumerate() {
            *squares = skipped_squares(&columns[c * mb..(c + 1) * mb], mb);
        }
        Ok(())
    })?;
    Ok((0..taus.len()).map(|c| per_column.chunks(slots).fold(0.0, |total, column| total + column[c])).collect())
}

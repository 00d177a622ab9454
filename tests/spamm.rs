//! SpAMM: products against an independent f64 reference that decides the skip set from its own norms,
//! the error bound, τ tuning, the real ergo density matrix, the Matrix Market reader, and every
//! C API entry point with its failure paths.
//!
//! One file per family on purpose, although long: each integration-test file is its own binary that
//! links the whole library (about 3 MB), so splitting a family's tests would multiply link time and
//! the binaries carried to a GPU machine; the tests are grouped by section instead.

mod common;
use common::last_error;

use common::{Rng, assert_all_close, relative_error};
use half::{bf16, f16};
use sparsegpu::Status;
use sparsegpu::capi::spamm::*;
use sparsegpu::matrix_market::read_matrix_market;
use sparsegpu::scalar::Element;
use sparsegpu::spamm::{MathMode, TauRule};
use sparsegpu::testgen::{algebraic_decay, exponential_decay};
use std::ffi::c_void;
use std::ptr::{null, null_mut};

const OK: i32 = Status::Success as i32;
const OP_N: i32 = sparsegpu::Operation::N as i32;
const OP_T: i32 = sparsegpu::Operation::T as i32;

/// Asserts a failure status and that the message names the function and contains `fragment`.
fn expect_failure(status: i32, expected: Status, function: &str, fragment: &str) {
    assert_eq!(status, expected as i32, "{function}: expected {}, message: {}", expected.name(), last_error());
    let msg = last_error();
    assert!(msg.contains(function) && msg.contains(fragment), "message '{msg}' lacks '{function}' or '{fragment}'");
}

fn create() -> spammHandle_t {
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, OK);
    assert!(!h.is_null());
    h
}

fn stats(h: spammHandle_t) -> spammStats_t {
    let mut s = spammStats_t::default();
    assert_eq!(unsafe { spammGetStats(h, &mut s) }, OK, "{}", last_error());
    s
}

/// The element types with a spamm gemm, and how to call it.
trait SpammElement: common::SpammGemm {
    /// Relative tolerance against the magnitude Σ|α·a·b| + |β·c| of an element.
    const RTOL: f64;
    /// Absolute tolerance: the spacing of the storage format's subnormals.
    const ATOL: f64;
}

impl SpammElement for f32 {
    const RTOL: f64 = 2e-5;
    const ATOL: f64 = 1e-44;
}

impl SpammElement for f64 {
    const RTOL: f64 = 1e-12;
    const ATOL: f64 = 1e-300;
}

impl SpammElement for f16 {
    // Inputs are already f16 (the reference uses the rounded values); the f32 accumulation and the
    // final rounding of C to f16 (2^-11 relative) remain.
    const RTOL: f64 = 2e-3;
    const ATOL: f64 = 6e-8;
}

impl SpammElement for bf16 {
    // As f16: the inputs are already bf16 and the f32 accumulation is comparatively exact; the final
    // rounding of C to bf16 (8 significant bits, 2^-9 relative) remains. Its subnormals are spaced
    // 2^-133 apart.
    const RTOL: f64 = 8e-3;
    const ATOL: f64 = 9.183549615799121e-41;
}

/// A stored column-major matrix used as op(X), in f64 as the library sees it (after rounding to T).
struct Operand {
    values: Vec<f64>,
    transposed: bool,
    ld: usize,
}

impl Operand {
    fn at(&self, i: usize, j: usize) -> f64 {
        if self.transposed { self.values[j + i * self.ld] } else { self.values[i + j * self.ld] }
    }
}

/// The independent reference: its own block norms (row-major over op(X), plain sums), its own skip
/// decisions, the approximate and the exact products, the performed count and the error bound.
struct Reference {
    approx: Vec<f64>,
    exact: Vec<f64>,
    magnitude: Vec<f64>,
    performed: u64,
    total: u64,
    bound: f64,
}

fn block_norms(x: &Operand, rows: usize, cols: usize, bs: usize) -> Vec<Vec<f64>> {
    let mut norms = vec![vec![0.0; cols.div_ceil(bs)]; rows.div_ceil(bs)];
    for i in 0..rows {
        for j in 0..cols {
            norms[i / bs][j / bs] += x.at(i, j) * x.at(i, j);
        }
    }
    norms.iter().map(|r| r.iter().map(|v| v.sqrt()).collect()).collect()
}

/// All norm products of op(A)·op(B), ascending.
fn norm_products(a: &Operand, b: &Operand, m: usize, n: usize, k: usize, bs: usize) -> Vec<f64> {
    let (na, nb) = (block_norms(a, m, k, bs), block_norms(b, k, n, bs));
    let mut p = Vec::new();
    for row in &na {
        for (kk, &x) in row.iter().enumerate() {
            p.extend(nb[kk].iter().map(|&y| x * y));
        }
    }
    p.sort_by(f64::total_cmp);
    p
}

#[allow(clippy::too_many_arguments)]
fn reference(
    a: &Operand,
    b: &Operand,
    (m, n, k): (usize, usize, usize),
    alpha: f64,
    beta: f64,
    c0: &[f64],
    ldc: usize,
    tau: f64,
    bs: usize,
) -> Reference {
    let (na, nb) = (block_norms(a, m, k, bs), block_norms(b, k, n, bs));
    let (mb, nbk, kb) = (m.div_ceil(bs), n.div_ceil(bs), k.div_ceil(bs));
    let mut r = Reference {
        approx: vec![0.0; m * n],
        exact: vec![0.0; m * n],
        magnitude: vec![0.0; m * n],
        performed: 0,
        total: (mb * nbk * kb) as u64,
        bound: 0.0,
    };
    let mut bound_sq = 0.0;
    #[allow(clippy::needless_range_loop)] // bi, bj index both norm maps and C
    for bi in 0..mb {
        for bj in 0..nbk {
            let mut skipped = 0.0;
            for bk in 0..kb {
                let product = na[bi][bk] * nb[bk][bj];
                let valid = product >= tau;
                if valid {
                    r.performed += 1;
                } else {
                    skipped += product;
                }
                for i in bi * bs..((bi + 1) * bs).min(m) {
                    for j in bj * bs..((bj + 1) * bs).min(n) {
                        for p in bk * bs..((bk + 1) * bs).min(k) {
                            let t = a.at(i, p) * b.at(p, j);
                            r.exact[i + j * m] += t;
                            if valid {
                                r.approx[i + j * m] += t;
                                r.magnitude[i + j * m] += t.abs();
                            }
                        }
                    }
                }
            }
            bound_sq += skipped * skipped;
        }
    }
    for j in 0..n {
        for i in 0..m {
            let old = if beta == 0.0 { 0.0 } else { beta * c0[i + j * ldc] };
            let e = i + j * m;
            r.approx[e] = alpha * r.approx[e] + old;
            r.exact[e] = alpha * r.exact[e] + old;
            r.magnitude[e] = alpha.abs() * r.magnitude[e] + old.abs();
        }
    }
    r.bound = alpha.abs() * bound_sq.sqrt();
    r
}

/// A random stored matrix: uniform, or algebraic / exponential decay, sometimes with a zeroed
/// rectangle; the ld padding holds NaN so a read outside the matrix shows up.
fn random_stored<T: Element>(rng: &mut Rng, rows: usize, cols: usize, ld: usize) -> Vec<T> {
    let rate = rng.uniform();
    let mut dense: Vec<f64> = match rng.below(3) {
        0 => rng.vec(rows * cols),
        1 => algebraic_decay(rng, rows, cols, 1.0, 0.5 + 2.5 * rate),
        _ => exponential_decay(rng, rows, cols, 1.0, 0.3 + 0.6 * rate),
    };
    if rng.below(3) == 0 && rows > 0 && cols > 0 {
        let (r0, c0) = (rng.below(rows), rng.below(cols));
        let (r1, c1) = (r0 + rng.below(rows - r0 + 1), c0 + rng.below(cols - c0 + 1));
        for j in c0..c1 {
            for i in r0..r1 {
                dense[i + j * rows] = 0.0;
            }
        }
    }
    let mut stored = vec![T::from_f64(f64::NAN); if cols == 0 { 0 } else { (cols - 1) * ld + rows }];
    for j in 0..cols {
        for i in 0..rows {
            stored[i + j * ld] = T::from_f64(dense[i + j * rows]);
        }
    }
    stored
}

fn to_f64<T: Element>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// A τ strictly between two distinct adjacent norm products, so rounding differences between the
/// reference's norms and the library's cannot flip a decision; sometimes 0 (everything performed).
fn pick_tau(rng: &mut Rng, products: &[f64]) -> f64 {
    if products.is_empty() || rng.below(5) == 0 {
        return 0.0;
    }
    for _ in 0..20 {
        let q = rng.below(products.len());
        let (lo, hi) = (products[q], products.get(q + 1).copied().unwrap_or(products[q] * 2.0 + 1.0));
        if hi - lo > 1e-9 * hi {
            return lo + (hi - lo) / 2.0;
        }
    }
    0.0
}

fn property_loop<T: SpammElement>(label: &str, cases: usize)
where
    T::Compute: SpammElement,
{
    let mut rng = Rng::fresh(label);
    let h = create();
    for case in 0..cases {
        let bs = [1, 2, 3, 4, 5, 8, 16, 32][rng.below(8)];
        let dim = |rng: &mut Rng| match rng.below(8) {
            0 => 0,
            1 => 1,
            _ => 1 + rng.below(60),
        };
        let (m, n, k) = (dim(&mut rng), dim(&mut rng), dim(&mut rng));
        let (ta, tb) = (rng.below(2) == 1, rng.below(2) == 1);
        let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
        let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
        let (lda, ldb, ldc) = (a_rows.max(1) + rng.below(3), b_rows.max(1) + rng.below(3), m.max(1) + rng.below(3));
        let a_stored: Vec<T> = random_stored(&mut rng, a_rows, a_cols, lda);
        let b_stored: Vec<T> = random_stored(&mut rng, b_rows, b_cols, ldb);
        let alpha = rng.range(-2.0, 2.0);
        let beta = if rng.below(3) == 0 { 0.0 } else { rng.range(-2.0, 2.0) };
        let c_len = if n == 0 { 0 } else { (n - 1) * ldc + m };
        let sentinel = T::from_f64(-77.0);
        let mut c: Vec<T> = vec![sentinel; c_len];
        for j in 0..n {
            for i in 0..m {
                // β = 0 must not read C: poison it with NaN.
                c[i + j * ldc] = if beta == 0.0 { T::from_f64(f64::NAN) } else { T::from_f64(rng.range(-1.0, 1.0)) };
            }
        }
        let c0 = to_f64(&c);
        let a = Operand { values: to_f64(&a_stored), transposed: ta, ld: lda };
        let b = Operand { values: to_f64(&b_stored), transposed: tb, ld: ldb };
        let tau = pick_tau(&mut rng, &norm_products(&a, &b, m, n, k, bs));
        let (alpha_c, beta_c) = (T::Compute::from_f64(alpha), T::Compute::from_f64(beta));
        let (alpha, beta) = (alpha_c.to_f64(), beta_c.to_f64());
        let want = reference(&a, &b, (m, n, k), alpha, beta, &c0, ldc, tau, bs);

        assert_eq!(unsafe { spammSetBlockSize(h, bs as i32) }, OK);
        let st = unsafe {
            T::gemm(
                h,
                if ta { OP_T } else { OP_N },
                if tb { OP_T } else { OP_N },
                m as i32,
                n as i32,
                k as i32,
                &alpha_c,
                a_stored.as_ptr(),
                lda as i32,
                b_stored.as_ptr(),
                ldb as i32,
                &beta_c,
                c.as_mut_ptr(),
                ldc as i32,
                tau,
            )
        };
        let what = format!("{label} case {case}: m={m} n={n} k={k} bs={bs} ta={ta} tb={tb} tau={tau:e} beta={beta}");
        assert_eq!(st, OK, "{what}: {}", last_error());

        let mut got = vec![0.0; m * n];
        for j in 0..n {
            for i in 0..m {
                got[i + j * m] = c[i + j * ldc].to_f64();
            }
            for i in m..ldc.min(c_len - j * ldc) {
                assert_eq!(c[i + j * ldc], sentinel, "{what}: ldc padding ({i}, {j}) was written");
            }
        }
        for (e, (&g, &w)) in got.iter().zip(&want.approx).enumerate() {
            let tol = T::RTOL * want.magnitude[e] + T::ATOL;
            assert!((g - w).abs() <= tol, "{what}: element {e}: got {g}, want {w}, tolerance {tol}");
        }
        let s = stats(h);
        assert_eq!(s.performedProducts as u64, want.performed, "{what}: performed");
        assert_eq!(s.totalProducts as u64, want.total, "{what}: total");
        let expected_ratio = if want.total == 0 { 1.0 } else { want.performed as f64 / want.total as f64 };
        assert_eq!(s.validRatio, expected_ratio, "{what}");
        assert_eq!((s.tau, s.blockSize), (tau, bs as i32), "{what}");
        assert!(s.elapsedSeconds >= 0.0);
        assert!(
            (s.errorBound - want.bound).abs() <= 1e-9 * want.bound,
            "{what}: bound {} vs {}",
            s.errorBound,
            want.bound
        );
        if tau == 0.0 {
            assert_eq!(s.performedProducts, s.totalProducts, "{what}");
            assert_eq!(s.errorBound, 0.0, "{what}");
        }
        // The actual error against the full product stays within the bound (plus rounding).
        let err: f64 = got.iter().zip(&want.exact).map(|(g, x)| (g - x) * (g - x)).sum::<f64>().sqrt();
        let rounding: f64 = want.magnitude.iter().map(|x| x * x).sum::<f64>().sqrt() * T::RTOL;
        assert!(
            err <= s.errorBound * (1.0 + 1e-9) + rounding + T::ATOL * (m * n) as f64,
            "{what}: error {err} > bound {}",
            s.errorBound
        );
    }
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

#[test]
fn single_precision_matches_the_reference() {
    property_loop::<f32>("spamm f32", 60);
}

#[test]
fn double_precision_matches_the_reference() {
    property_loop::<f64>("spamm f64", 60);
}

#[test]
fn half_precision_matches_the_reference() {
    property_loop::<f16>("spamm f16", 40);
}

#[test]
fn bfloat16_matches_the_reference() {
    property_loop::<bf16>("spamm bf16", 40);
}

#[test]
fn tau_zero_equals_full_gemm_and_skipping_reduces_work() {
    let mut rng = Rng::fresh("spamm tau zero");
    let (m, n, k) = (70, 45, 83);
    let a: Vec<f64> = algebraic_decay(&mut rng, m, k, 1.0, 2.0);
    let b: Vec<f64> = algebraic_decay(&mut rng, k, n, 1.0, 2.0);
    let h = create();
    let mut full = vec![0.0; m * n];
    common::reference_gemm(m, n, k, 1.0, |i, p| a[i + p * m], |p, j| b[p + j * k], 0.0, &mut full);
    let mut c = vec![f64::NAN; m * n];
    let st = unsafe {
        spammDgemm(
            h,
            OP_N,
            OP_N,
            m as i32,
            n as i32,
            k as i32,
            &1.0,
            a.as_ptr(),
            m as i32,
            b.as_ptr(),
            k as i32,
            &0.0,
            c.as_mut_ptr(),
            m as i32,
            0.0,
        )
    };
    assert_eq!(st, OK);
    assert_all_close("tau = 0", &c, &full, 1e-12, 1e-14);
    assert_eq!(stats(h).validRatio, 1.0);
    // A positive τ on a decay matrix skips the far-off-diagonal products.
    let st = unsafe {
        spammDgemm(
            h,
            OP_N,
            OP_N,
            m as i32,
            n as i32,
            k as i32,
            &1.0,
            a.as_ptr(),
            m as i32,
            b.as_ptr(),
            k as i32,
            &0.0,
            c.as_mut_ptr(),
            m as i32,
            0.05,
        )
    };
    assert_eq!(st, OK);
    let s = stats(h);
    assert!(s.validRatio < 1.0 && s.validRatio > 0.0, "{s:?}");
    assert!(s.errorBound > 0.0);
    unsafe { spammDestroy(h) };
}

/// spammGemmEx against `T`'s typed entry point (spammSgemm, spammDgemm or spammHgemm, which
/// [`common::SpammGemm::gemm`] calls for f32, f64 and f16) on the same decay inputs, at a τ that skips
/// about half of the block products, with α and β other than 0 and 1, op(A) = Aᵀ and padded leading
/// dimensions: C bit for bit and the statistics (all but the time) the same.
fn gemm_ex_equals_the_typed_entry_point<T: SpammElement>(rng: &mut Rng, math_mode: MathMode) {
    let (m, n, k, bs) = (150, 97, 130, 32);
    let (lda, ldb, ldc) = (k + 1, k + 2, m + 3);
    let a: Vec<T> = algebraic_decay(rng, lda, m, 1.0, 1.0);
    let b: Vec<T> = exponential_decay(rng, ldb, n, 1.0, 0.9);
    let c0: Vec<T> = rng.vec(ldc * n);
    let op_a = Operand { values: to_f64(&a), transposed: true, ld: lda };
    let op_b = Operand { values: to_f64(&b), transposed: false, ld: ldb };
    let products = norm_products(&op_a, &op_b, m, n, k, bs);
    let tau = products[products.len() / 2];
    let (alpha, beta) = (T::Compute::from_f64(-0.75), T::Compute::from_f64(0.5));
    let h = create();
    assert_eq!(unsafe { spammSetBlockSize(h, bs as i32) }, OK);
    assert_eq!(unsafe { spammSetMathMode(h, math_mode as i32) }, OK);
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let mut typed = c0.clone();
    let st = unsafe {
        T::gemm(
            h,
            OP_T,
            OP_N,
            mi,
            ni,
            ki,
            &alpha,
            a.as_ptr(),
            lda as i32,
            b.as_ptr(),
            ldb as i32,
            &beta,
            typed.as_mut_ptr(),
            ldc as i32,
            tau,
        )
    };
    assert_eq!(st, OK, "{}", last_error());
    let typed_stats = stats(h);
    let mut ex = c0.clone();
    let st = unsafe {
        spammGemmEx(
            h,
            T::VALUE_TYPE as i32,
            OP_T,
            OP_N,
            mi,
            ni,
            ki,
            &alpha as *const T::Compute as *const c_void,
            a.as_ptr() as *const c_void,
            lda as i32,
            b.as_ptr() as *const c_void,
            ldb as i32,
            &beta as *const T::Compute as *const c_void,
            ex.as_mut_ptr() as *mut c_void,
            ldc as i32,
            tau,
        )
    };
    assert_eq!(st, OK, "{}", last_error());
    let ex_stats = stats(h);
    let what = format!("{:?} {math_mode:?} tau {tau:e}", T::VALUE_TYPE);
    assert!(
        0 < typed_stats.performedProducts && typed_stats.performedProducts < typed_stats.totalProducts,
        "{what}: tau must skip some products and keep some: {typed_stats:?}"
    );
    let untimed = |s: spammStats_t| spammStats_t { elapsedSeconds: 0.0, ..s };
    assert_eq!(untimed(ex_stats), untimed(typed_stats), "{what}: statistics");
    let bits = |x: &[T]| x.iter().map(|v| v.to_f64().to_bits()).collect::<Vec<_>>();
    assert!(bits(&ex) == bits(&typed), "{what}: spammGemmEx's C differs from the typed entry point's");
    assert!(bits(&ex) != bits(&c0), "{what}: C was not written");
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

#[test]
fn gemm_ex_equals_spamm_sgemm_dgemm_and_hgemm() {
    let mut rng = Rng::fresh("spamm gemm ex");
    gemm_ex_equals_the_typed_entry_point::<f32>(&mut rng, MathMode::Default);
    gemm_ex_equals_the_typed_entry_point::<f32>(&mut rng, MathMode::Tf32x3);
    gemm_ex_equals_the_typed_entry_point::<f64>(&mut rng, MathMode::Default);
    gemm_ex_equals_the_typed_entry_point::<f16>(&mut rng, MathMode::Default);
}

fn tune(h: spammHandle_t, vt: sparsegpu::ValueType, n: usize, a: *const c_void, target: f64, tol: f64) -> (f64, f64) {
    let (mut tau, mut ratio) = (-1.0, -1.0);
    let st = unsafe {
        spammTuneTau(
            h, vt as i32, OP_N, OP_N, n as i32, n as i32, n as i32, a, n as i32, a, n as i32, target, tol, 200,
            &mut tau, &mut ratio,
        )
    };
    assert_eq!(st, OK, "{}", last_error());
    (tau, ratio)
}

#[test]
fn tuned_tau_reaches_the_target_ratio_and_the_product_reports_it() {
    let mut rng = Rng::fresh("spamm tune");
    let n = 256;
    let h = create();
    assert_eq!(unsafe { spammSetBlockSize(h, 16) }, OK);
    let matrices: [Vec<f32>; 2] = [
        // The paper's synthetic matrix (slow algebraic decay) and a fast exponential one.
        algebraic_decay(&mut rng, n, n, 0.1, 0.1),
        exponential_decay(&mut rng, n, n, 1.0, 0.8),
    ];
    for a in &matrices {
        for target in [0.05, 0.1, 0.3] {
            let tol = 0.005;
            let (tau, ratio) = tune(h, sparsegpu::ValueType::F32, n, a.as_ptr() as _, target, tol);
            assert!((ratio - target).abs() <= tol, "target {target}: achieved {ratio} at tau {tau}");
            let mut c = vec![0.0f32; n * n];
            let st = unsafe {
                spammSgemm(
                    h,
                    OP_N,
                    OP_N,
                    n as i32,
                    n as i32,
                    n as i32,
                    &1.0,
                    a.as_ptr(),
                    n as i32,
                    a.as_ptr(),
                    n as i32,
                    &0.0,
                    c.as_mut_ptr(),
                    n as i32,
                    tau,
                )
            };
            assert_eq!(st, OK);
            assert_eq!(stats(h).validRatio, ratio, "target {target}");
        }
    }
    // f16, bf16 and f64 inputs tune through the same search.
    let a16: Vec<f16> = matrices[1].iter().map(|&x| f16::from_f32(x)).collect();
    let (_, ratio) = tune(h, sparsegpu::ValueType::F16, n, a16.as_ptr() as _, 0.1, 0.005);
    assert!((ratio - 0.1).abs() <= 0.005);
    let abf16: Vec<bf16> = matrices[1].iter().map(|&x| bf16::from_f32(x)).collect();
    let (_, ratio) = tune(h, sparsegpu::ValueType::Bf16, n, abf16.as_ptr() as _, 0.05, 0.005);
    assert!((ratio - 0.05).abs() <= 0.005);
    let a64: Vec<f64> = matrices[1].iter().map(|&x| x as f64).collect();
    let (_, ratio) = tune(h, sparsegpu::ValueType::F64, n, a64.as_ptr() as _, 0.3, 0.005);
    assert!((ratio - 0.3).abs() <= 0.005);
    // Target 1 is met by τ = 0 territory: everything performed.
    let (_, ratio) = tune(h, sparsegpu::ValueType::F64, n, a64.as_ptr() as _, 1.0, 0.0);
    assert_eq!(ratio, 1.0);
    unsafe { spammDestroy(h) };
}

/// The paper's setting (section 4: a_ij = 0.1/(|i−j|^0.1 + 1) times a random factor, the valid ratio
/// within 1 % after at most 20 iterations) and a fast-decaying matrix: every target is met, and in a
/// few iterations of the multi-way search (the paper's bisection needs up to 20 evaluations).
#[test]
fn tuning_meets_the_paper_targets_in_a_few_iterations() {
    let mut rng = Rng::fresh("spamm tune iterations");
    let n = 1024;
    let mut h = sparsegpu::spamm::SpammHandle::new().unwrap();
    h.set_block_size(16).unwrap();
    let matrices: [Vec<f64>; 2] =
        [algebraic_decay(&mut rng, n, n, 0.1, 0.1), exponential_decay(&mut rng, n, n, 1.0, 0.99)];
    for (which, a) in matrices.iter().enumerate() {
        let op = sparsegpu::spamm::GemmOperand {
            data: a,
            op: sparsegpu::Operation::N,
            stored_rows: n,
            stored_cols: n,
            ld: n,
        };
        for target in [0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 0.95] {
            let choice = unsafe { h.tune_tau(&op.raw(), &op.raw(), target, 0.01, 20) }.unwrap();
            assert!(
                (choice.valid_ratio - target).abs() <= 0.01 && choice.iterations <= 2,
                "matrix {which} target {target}: {choice:?}"
            );
        }
        let exact = unsafe { h.tune_tau(&op.raw(), &op.raw(), 1.0, 0.0, 20) }.unwrap();
        assert_eq!((exact.tau, exact.valid_ratio, exact.iterations), (0.0, 1.0, 0), "target 1 is tau = 0");
    }
}

/// Random small norm maps (zero blocks, ties, products spanning 60 orders of magnitude): both searches
/// find what an exhaustive search over every distinct norm product finds.
#[test]
fn tau_searches_agree_with_exhaustive_searches() {
    use sparsegpu::spamm::tune::{self, NormMapEvaluator};
    use sparsegpu::spamm::{NormMap, ProductPlan};
    let mut rng = Rng::fresh("spamm tune exhaustive");
    for case in 0..60 {
        let (mb, nb, kb) = (1 + rng.below(8), 1 + rng.below(8), 1 + rng.below(8));
        let mut norms = |len: usize| -> Vec<f64> {
            (0..len)
                .map(|_| match rng.below(5) {
                    0 => 0.0,
                    1 => 0.5,
                    2 => rng.uniform(),
                    _ => 10f64.powf(-30.0 * rng.uniform()),
                })
                .collect()
        };
        let a = NormMap { block_rows: mb, block_cols: kb, norms: norms(mb * kb) };
        let b = NormMap { block_rows: kb, block_cols: nb, norms: norms(kb * nb) };
        let alpha_abs = [1.0, 0.3, 7.0][case % 3];
        let stats = |tau: f64| {
            ProductPlan { a_norms: a.clone(), b_norms: b.clone(), tau, block_size: 1 }
                .statistics(alpha_abs, 0.0)
                .unwrap()
        };
        let mut products: Vec<f64> = (0..kb)
            .flat_map(|k| (0..mb).flat_map(move |i| (0..nb).map(move |j| (i, k, j))))
            .map(|(i, k, j)| a.get(i, k) * b.get(k, j))
            .collect();
        products.sort_by(f64::total_cmp);
        products.dedup();
        let max = *products.last().unwrap();
        // Every τ that evaluates differently: each distinct product (performing it and everything
        // above) and one above all of them.
        let mut taus = products.clone();
        taus.push(f64::from_bits(max.to_bits() + 1));

        let target = [1.0, 0.5, 0.1, 0.01, rng.uniform().max(1e-3)][case % 5];
        let choice = tune::tune_for_ratio(&mut NormMapEvaluator::new(&a, &b), target, 0.0, 100).unwrap();
        let best = taus.iter().map(|&t| (stats(t).valid_ratio - target).abs()).fold(f64::INFINITY, f64::min);
        assert_eq!((choice.valid_ratio - target).abs(), best, "case {case}: target {target}, {choice:?}");
        assert_eq!(stats(choice.tau).valid_ratio, choice.valid_ratio, "case {case}");

        let skip_all = stats(*taus.last().unwrap()).error_bound;
        let epsilon = match case % 4 {
            0 => 0.0,
            1 => skip_all * 2.0,
            _ => skip_all * 10f64.powf(-6.0 * rng.uniform()),
        };
        let choice = tune::tune_for_error_bound(&mut NormMapEvaluator::new(&a, &b), alpha_abs, epsilon, 100).unwrap();
        let expected = if skip_all <= epsilon {
            f64::INFINITY
        } else {
            *products.iter().rfind(|&&q| stats(q).error_bound <= epsilon).unwrap()
        };
        assert_eq!(choice.tau, expected, "case {case}: epsilon {epsilon:e}, {choice:?}");
        assert!(choice.exact && choice.error_bound <= epsilon, "case {case}: {choice:?}");
        let at = stats(if expected.is_finite() { expected } else { *taus.last().unwrap() });
        assert_eq!((choice.error_bound, choice.valid_ratio), (at.error_bound, at.valid_ratio), "case {case}");
    }
}

fn tune_bound<T: Element>(h: spammHandle_t, n: usize, alpha: T::Compute, a: &[T], epsilon: f64) -> (f64, f64, f64) {
    let (mut tau, mut bound, mut ratio) = (-1.0, -1.0, -1.0);
    let ni = n as i32;
    let st = unsafe {
        spammTuneTauForErrorBound(
            h,
            T::VALUE_TYPE as i32,
            OP_N,
            OP_T,
            ni,
            ni,
            ni,
            &alpha as *const T::Compute as *const c_void,
            a.as_ptr() as *const c_void,
            ni,
            a.as_ptr() as *const c_void,
            ni,
            epsilon,
            60,
            &mut tau,
            &mut bound,
            &mut ratio,
        )
    };
    assert_eq!(st, OK, "{}", last_error());
    (tau, bound, ratio)
}

/// spammTuneTauForErrorBound on decay matrices: the product at the τ found reports exactly the bound
/// and the ratio the search found, within the request; the true error is within the
/// bound; the next τ up would exceed the request (the search is exact); α = 0 and ε = 0 are the two
/// extremes.
fn error_bound_tuning<T: SpammElement>(rng: &mut Rng, n: usize) {
    let h = create();
    assert_eq!(unsafe { spammSetBlockSize(h, 16) }, OK);
    let a: Vec<T> = exponential_decay(rng, n, n, 1.0, 0.9);
    // op(A)·op(B) = A·Aᵀ.
    let op = Operand { values: a.iter().map(|x| x.to_f64()).collect(), transposed: false, ld: n };
    let opt = Operand { values: op.values.clone(), transposed: true, ld: n };
    let alpha = T::Compute::from_f64(-1.5);
    let full = reference(&op, &opt, (n, n, n), alpha.to_f64(), 0.0, &[], n, f64::INFINITY, 16);
    let exact_norm = full.exact.iter().map(|x| x * x).sum::<f64>().sqrt();
    let product = |tau: f64| {
        let mut c = vec![T::from_f64(0.0); n * n];
        let (zero, ni) = (T::Compute::from_f64(0.0), n as i32);
        let st = unsafe {
            T::gemm(h, OP_N, OP_T, ni, ni, ni, &alpha, a.as_ptr(), ni, a.as_ptr(), ni, &zero, c.as_mut_ptr(), ni, tau)
        };
        assert_eq!(st, OK, "{}", last_error());
        (c, stats(h))
    };
    for relative in [1e-9, 1e-6, 1e-3, 0.1] {
        let epsilon = relative * full.bound;
        let (tau, bound, ratio) = tune_bound(h, n, alpha, &a, epsilon);
        let what = format!("{:?} epsilon {epsilon:e}: tau {tau:e} bound {bound:e} ratio {ratio}", T::VALUE_TYPE);
        assert!(tau.is_finite() && tau > 0.0 && bound <= epsilon && (relative < 1e-3 || ratio < 1.0), "{what}");
        let (c, s) = product(tau);
        assert_eq!(s.validRatio, ratio, "{what}: the product reports the search's ratio");
        // Both backends report the search's bound exactly (the same order of sums).
        assert_eq!(s.errorBound.to_bits(), bound.to_bits(), "{what}: the product reports {:e}", s.errorBound);
        assert!(s.errorBound <= epsilon, "{what}");
        let c: Vec<f64> = c.iter().map(|x| x.to_f64()).collect();
        let err = c.iter().zip(&full.exact).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt();
        assert!(err <= bound + T::RTOL * exact_norm, "{what}: error {err:e}");
        let (_, above) = product(f64::from_bits(tau.to_bits() + 1));
        assert!(above.errorBound > epsilon, "{what}: the next tau up has bound {:e}", above.errorBound);
    }
    // ε = 0: only zero products may go (there are none here); the next τ skips a positive product.
    let (tau, bound, ratio) = tune_bound(h, n, alpha, &a, 0.0);
    assert_eq!((bound, ratio), (0.0, 1.0));
    assert!(product(f64::from_bits(tau.to_bits() + 1)).1.errorBound > 0.0);
    // A bound above that of skipping everything, or α = 0: τ = +∞.
    let (tau, bound, ratio) = tune_bound(h, n, alpha, &a, full.bound * 1.01);
    assert_eq!((tau, ratio), (f64::INFINITY, 0.0));
    assert!(bound <= full.bound * 1.01);
    let (tau, bound, ratio) = tune_bound(h, n, T::Compute::from_f64(0.0), &a, 0.0);
    assert_eq!((tau, bound, ratio), (f64::INFINITY, 0.0, 0.0));
    unsafe { spammDestroy(h) };
}

#[test]
fn error_bound_tuning_is_exact_and_the_product_reports_it() {
    let mut rng = Rng::fresh("spamm tune bound");
    error_bound_tuning::<f32>(&mut rng, 150);
    error_bound_tuning::<f64>(&mut rng, 130);
    error_bound_tuning::<f16>(&mut rng, 100);
    error_bound_tuning::<bf16>(&mut rng, 100);
}

#[test]
fn ergo_density_matrix_squared_within_the_bound() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/ergo-w125/D.mtx.gz");
    use common::outcomes::{self, Category};
    let Ok(file) = std::fs::File::open(path) else {
        let reason = format!("{path} is absent");
        outcomes::skipped(Category::Files, "ergo_density_matrix_squared_within_the_bound", &reason);
        // Written to stderr directly: libtest captures eprintln! of passing tests, and a skip must show.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
        return;
    };
    outcomes::ran(Category::Files, "ergo_density_matrix_squared_within_the_bound");
    let clock = std::time::Instant::now();
    let d = read_matrix_market(std::io::BufReader::new(flate2::read::GzDecoder::new(file))).expect("D.mtx parses");
    let n = d.rows;
    assert_eq!((d.rows, d.cols), (1625, 1625));
    // D is symmetric, so its row-major dense copy is also its column-major one.
    let dense = d.to_dense_f64();
    let single: Vec<f32> = dense.iter().map(|&x| x as f32).collect();
    let h = create();
    let (mut tau, mut ratio) = (0.0, 0.0);
    let ni = n as i32;
    let st = unsafe {
        spammTuneTau(
            h,
            sparsegpu::ValueType::F32 as i32,
            OP_N,
            OP_N,
            ni,
            ni,
            ni,
            single.as_ptr() as _,
            ni,
            single.as_ptr() as _,
            ni,
            0.1,
            0.01,
            100,
            &mut tau,
            &mut ratio,
        )
    };
    assert_eq!(st, OK, "{}", last_error());
    assert!((ratio - 0.1).abs() <= 0.01, "achieved {ratio}");
    // One product, in f32 (the exact D·D would cost ten times as much in a debug build): the error
    // is checked against the exact f64 product on sampled columns, C block by C block, against the
    // block's own bound |α|·Σ_(skipped k) ‖D_ik‖·‖D_kj‖ from the test's own norms.
    let mut approx = vec![f32::NAN; n * n];
    let st = unsafe {
        spammSgemm(
            h,
            OP_N,
            OP_N,
            ni,
            ni,
            ni,
            &1.0,
            single.as_ptr(),
            ni,
            single.as_ptr(),
            ni,
            &0.0,
            approx.as_mut_ptr(),
            ni,
            tau,
        )
    };
    assert_eq!(st, OK);
    let s = stats(h);
    assert_eq!(s.validRatio, ratio, "the product performs what the search counted");

    let bs = 32;
    let op = Operand { values: single.iter().map(|&x| x as f64).collect(), transposed: false, ld: n };
    let norms = block_norms(&op, n, n, bs);
    let nblocks = n.div_ceil(bs);
    let mut rng = Rng::fresh("spamm ergo columns");
    let (mut sampled_err_sq, mut worst) = (0.0f64, 0.0f64);
    let (mut sampled_got, mut sampled_exact) = (Vec::new(), Vec::new());
    for _ in 0..24 {
        let j = rng.below(n);
        let bj = j / bs;
        let exact: Vec<f64> = (0..n).map(|i| (0..n).map(|p| op.at(i, p) * op.at(p, j)).sum()).collect();
        sampled_got.extend((0..n).map(|i| approx[i + j * n] as f64));
        sampled_exact.extend_from_slice(&exact);
        for bi in 0..nblocks {
            let skipped: f64 = (0..nblocks).map(|bk| norms[bi][bk] * norms[bk][bj]).filter(|&p| p < tau).sum::<f64>();
            let rows = bi * bs..((bi + 1) * bs).min(n);
            let err = rows.clone().map(|i| (approx[i + j * n] as f64 - exact[i]).powi(2)).sum::<f64>().sqrt();
            let scale = rows.map(|i| exact[i].abs()).fold(0.0, f64::max);
            assert!(
                err <= skipped * (1.0 + 1e-6) + 1e-5 * scale + 1e-6,
                "block ({bi}, {bj}) column {j}: {err} > {skipped}"
            );
            worst = worst.max(err / skipped.max(1e-300));
            sampled_err_sq += err * err;
        }
    }
    eprintln!(
        "ergo D*D: tau {tau:e}, valid ratio {ratio}, sampled-column error {:e} (relative {:e}), bound {:e}, worst block error/bound {worst:.3}, {:?}",
        sampled_err_sq.sqrt(),
        relative_error(&sampled_got, &sampled_exact),
        s.errorBound,
        clock.elapsed()
    );
    assert!(sampled_err_sq.sqrt() <= s.errorBound);
    assert!(sampled_err_sq > 0.0, "skipping 90 % of the block products must change the result");
    unsafe { spammDestroy(h) };
}

#[test]
fn matrix_market_reader_formats_and_errors() {
    let read = |text: &str| read_matrix_market(text.as_bytes());
    let general =
        read("%%MatrixMarket matrix coordinate real general\n% comment\n\n3 4 3\n1 1 1.5\n3 4 -2e1\n2 2 7\n").unwrap();
    assert_eq!((general.rows, general.cols), (3, 4));
    assert_eq!(general.to_dense_f64(), vec![1.5, 0.0, 0.0, 0.0, 0.0, 7.0, 0.0, 0.0, 0.0, 0.0, 0.0, -20.0]);
    let symmetric = read("%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 4\n2 1 -1\n").unwrap();
    assert_eq!(symmetric.to_dense_f64(), vec![4.0, -1.0, -1.0, 0.0]);
    let pattern = read("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n").unwrap();
    assert_eq!(pattern.to_dense_f64(), vec![0.0, 1.0, 1.0, 0.0]);
    let integer = read("%%MatrixMarket matrix coordinate integer general\n1 2 1\n1 2 -3\n").unwrap();
    assert_eq!(integer.to_dense_f64(), vec![0.0, -3.0]);
    // Arrays are column-major; a symmetric array lists the lower triangle.
    let array = read("%%MatrixMarket matrix array real general\n2 3\n1\n2\n3\n4\n5\n6\n").unwrap();
    assert_eq!(array.to_dense_f64(), vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    let sym_array = read("%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n").unwrap();
    assert_eq!(sym_array.to_dense_f64(), vec![1.0, 2.0, 2.0, 3.0]);

    for (text, fragment) in [
        ("", "empty"),
        ("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "complex"),
        ("%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n", "hermitian"),
        ("%%MatrixMarket vector coordinate real general\n1 1 1\n", "expected"),
        ("%%MatrixMarket matrix array pattern general\n1 1\n", "pattern"),
        ("%%MatrixMarket matrix coordinate real general\n", "size line"),
        ("%%MatrixMarket matrix coordinate real general\n2 2\n", "3 numbers"),
        ("%%MatrixMarket matrix coordinate real general\n2 x 1\n", "malformed"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n", "row index 3"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 0 1\n", "column index 0"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n", "not a real"),
        ("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n", "not an integer"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n", "missing value"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1 9\n", "unexpected"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n", "1 of the 2"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 2\n", "more entries"),
        ("%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n", "square"),
    ] {
        let e = read(text).expect_err(text);
        assert!(e.to_string().contains(fragment), "'{e}' lacks '{fragment}' for {text:?}");
    }
    let e = read("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 5 1\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
}

/// Valid arguments for a 4×3×5 product, to be spoiled one at a time.
struct Args {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

impl Args {
    fn new() -> Self {
        Args { a: vec![1.0; 4 * 5], b: vec![1.0; 5 * 3], c: vec![3.0; 4 * 3] }
    }
}

#[test]
fn gemm_rejects_every_bad_argument_and_leaves_c_untouched() {
    let h = create();
    let mut x = Args::new();
    let (a, b) = (x.a.as_ptr(), x.b.as_ptr());
    let c = x.c.as_mut_ptr();
    let one = 1.0f32;
    type Call<'a> = Box<dyn Fn() -> i32 + 'a>;
    let cases: Vec<(Call, Status, &str)> = vec![
        (
            Box::new(|| unsafe { spammSgemm(null_mut(), OP_N, OP_N, 4, 3, 5, &one, a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidHandle,
            "handle",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, 7, OP_N, 4, 3, 5, &one, a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidValue,
            "transa",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, -1, 4, 3, 5, &one, a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidValue,
            "transb",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, -4, 3, 5, &one, a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidSize,
            "argument m = -4",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, -3, 5, &one, a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidSize,
            "argument n = -3",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, -5, &one, a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidSize,
            "argument k = -5",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, null(), a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidPointer,
            "alpha",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 4, b, 5, null(), c, 4, 0.1) }),
            Status::InvalidPointer,
            "beta",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 4, b, 5, &one, c, 4, -0.5) }),
            Status::InvalidValue,
            "tau",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 4, b, 5, &one, c, 4, f64::NAN) }),
            Status::InvalidValue,
            "tau",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 3, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidSize,
            "argument lda = 3 must be at least",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_T, OP_N, 4, 3, 5, &one, a, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidSize,
            "argument lda = 4 must be at least",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, -1, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidSize,
            "argument lda = -1",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 4, b, 4, &one, c, 4, 0.1) }),
            Status::InvalidSize,
            "argument ldb = 4 must be at least",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 4, b, 5, &one, c, 3, 0.1) }),
            Status::InvalidSize,
            "argument ldc = 3 must be at least",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, null(), 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidPointer,
            "argument A is NULL",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 4, null(), 5, &one, c, 4, 0.1) }),
            Status::InvalidPointer,
            "argument B is NULL",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, a, 4, b, 5, &one, null_mut(), 4, 0.1) }),
            Status::InvalidPointer,
            "argument C is NULL",
        ),
        (
            Box::new(|| unsafe {
                spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, (a as *const u8).add(1) as _, 4, b, 5, &one, c, 4, 0.1)
            }),
            Status::InvalidPointer,
            "aligned",
        ),
        (
            Box::new(|| unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 5, &one, c, 4, b, 5, &one, c, 4, 0.1) }),
            Status::InvalidPointer,
            "C overlaps argument A",
        ),
    ];
    for (call, status, fragment) in cases {
        expect_failure(call(), status, "spammSgemm", fragment);
        assert!(x.c.iter().all(|&v| v == 3.0), "C was written on failure ({fragment})");
    }
    // spammGemmEx checks as the typed entry points, its value type right after the handle. Some
    // cases are bf16, which has no other entry point (the f32 arrays hold enough bf16 elements).
    let (f32t, bf16t) = (sparsegpu::ValueType::F32 as i32, sparsegpu::ValueType::Bf16 as i32);
    let (av, bv, cv) = (a as *const c_void, b as *const c_void, c as *mut c_void);
    let onev = &one as *const f32 as *const c_void;
    let ex_cases: Vec<(Call, Status, &str)> = vec![
        (
            Box::new(|| unsafe {
                spammGemmEx(null_mut(), f32t, OP_N, OP_N, 4, 3, 5, onev, av, 4, bv, 5, onev, cv, 4, 0.1)
            }),
            Status::InvalidHandle,
            "handle",
        ),
        (
            Box::new(|| unsafe { spammGemmEx(h, 17, OP_N, OP_N, 4, 3, 5, onev, av, 4, bv, 5, onev, cv, 4, 0.1) }),
            Status::InvalidValue,
            "valueType",
        ),
        (
            Box::new(|| unsafe { spammGemmEx(h, bf16t, 7, OP_N, 4, 3, 5, onev, av, 4, bv, 5, onev, cv, 4, 0.1) }),
            Status::InvalidValue,
            "transa",
        ),
        (
            Box::new(|| unsafe { spammGemmEx(h, f32t, OP_N, OP_N, -4, 3, 5, onev, av, 4, bv, 5, onev, cv, 4, 0.1) }),
            Status::InvalidSize,
            "argument m = -4",
        ),
        (
            Box::new(|| unsafe { spammGemmEx(h, bf16t, OP_N, OP_N, 4, 3, 5, null(), av, 4, bv, 5, onev, cv, 4, 0.1) }),
            Status::InvalidPointer,
            "alpha",
        ),
        (
            Box::new(|| unsafe {
                spammGemmEx(h, bf16t, OP_N, OP_N, 4, 3, 5, onev, null(), 4, bv, 5, onev, cv, 4, 0.1)
            }),
            Status::InvalidPointer,
            "argument A is NULL",
        ),
        (
            Box::new(|| unsafe { spammGemmEx(h, bf16t, OP_N, OP_T, 4, 3, 5, onev, av, 4, bv, 2, onev, cv, 4, 0.1) }),
            Status::InvalidSize,
            "argument ldb = 2 must be at least",
        ),
        (
            Box::new(|| unsafe {
                spammGemmEx(h, f32t, OP_N, OP_N, 4, 3, 5, onev, av, 4, bv, 5, onev, cv, 4, f64::NAN)
            }),
            Status::InvalidValue,
            "tau",
        ),
        (
            Box::new(|| unsafe { spammGemmEx(h, bf16t, OP_N, OP_N, 4, 3, 5, onev, cv, 4, bv, 5, onev, cv, 4, 0.1) }),
            Status::InvalidPointer,
            "C overlaps argument A",
        ),
    ];
    for (call, status, fragment) in ex_cases {
        expect_failure(call(), status, "spammGemmEx", fragment);
        assert!(x.c.iter().all(|&v| v == 3.0), "C was written on failure ({fragment})");
    }
    // No product has succeeded yet on this handle.
    let mut s = spammStats_t { tau: 123.0, ..Default::default() };
    expect_failure(unsafe { spammGetStats(h, &mut s) }, Status::InvalidValue, "spammGetStats", "no product has run");
    assert_eq!(s.tau, 123.0);
    // Empty problems succeed: m = 0 with NULL A and C; k = 0 scales C by β.
    assert_eq!(unsafe { spammSgemm(h, OP_N, OP_N, 0, 3, 5, &one, null(), 1, b, 5, &one, null_mut(), 1, 0.1) }, OK);
    let two = 2.0f32;
    assert_eq!(unsafe { spammSgemm(h, OP_N, OP_N, 4, 3, 0, &one, null(), 4, null(), 1, &two, c, 4, 0.1) }, OK);
    assert!(x.c.iter().all(|&v| v == 6.0));
    assert_eq!(stats(h).totalProducts, 0);
    expect_failure(unsafe { spammGetStats(h, null_mut()) }, Status::InvalidPointer, "spammGetStats", "stats");
    // Half and double precision share the checks.
    let (ha, hb, mut hc) = (vec![0u16; 20], vec![0u16; 15], vec![0x4200u16; 12]);
    let st = unsafe {
        spammHgemm(h, OP_N, OP_N, 4, 3, 5, &one, ha.as_ptr(), 4, hb.as_ptr(), 5, &one, hc.as_mut_ptr(), 4, f64::NAN)
    };
    expect_failure(st, Status::InvalidValue, "spammHgemm", "tau");
    let st = unsafe {
        spammHgemm(h, OP_N, OP_N, 4, 3, 5, &one, ha.as_ptr(), 4, hb.as_ptr(), 2, &one, hc.as_mut_ptr(), 4, 0.0)
    };
    expect_failure(st, Status::InvalidSize, "spammHgemm", "ldb");
    assert!(hc.iter().all(|&v| v == 0x4200));
    let (da, db, mut dc) = (vec![0.0f64; 20], vec![0.0f64; 15], vec![5.0f64; 12]);
    let st = unsafe {
        spammDgemm(h, OP_N, OP_N, 4, 3, 5, &1.0, da.as_ptr(), 4, db.as_ptr(), 5, null(), dc.as_mut_ptr(), 4, 0.0)
    };
    expect_failure(st, Status::InvalidPointer, "spammDgemm", "beta");
    assert!(dc.iter().all(|&v| v == 5.0));
    unsafe { spammDestroy(h) };
}

#[test]
fn handle_lifecycle_settings_and_their_failures() {
    expect_failure(unsafe { spammCreate(null_mut()) }, Status::InvalidPointer, "spammCreate", "handle");
    assert_eq!(unsafe { spammDestroy(null_mut()) }, OK);
    let h = create();

    let mut bs = 0;
    assert_eq!(unsafe { spammGetBlockSize(h, &mut bs) }, OK);
    assert_eq!(bs, 32);
    assert_eq!(unsafe { spammSetBlockSize(h, 64) }, OK);
    assert_eq!(unsafe { spammGetBlockSize(h, &mut bs) }, OK);
    assert_eq!(bs, 64);
    for bad in [0, -3, 1025] {
        expect_failure(unsafe { spammSetBlockSize(h, bad) }, Status::InvalidValue, "spammSetBlockSize", "blockSize");
    }
    expect_failure(
        unsafe { spammGetBlockSize(h, null_mut()) },
        Status::InvalidPointer,
        "spammGetBlockSize",
        "blockSize",
    );
    assert_eq!(unsafe { spammGetBlockSize(h, &mut bs) }, OK);
    assert_eq!(bs, 64, "a rejected block size leaves the old one");

    let mut stream: *mut c_void = null_mut();
    let fake_stream = 0x1234usize as *mut c_void;
    assert_eq!(unsafe { spammSetStream(h, fake_stream) }, OK);
    assert_eq!(unsafe { spammGetStream(h, &mut stream) }, OK);
    assert_eq!(stream, fake_stream);
    expect_failure(unsafe { spammGetStream(h, null_mut()) }, Status::InvalidPointer, "spammGetStream", "stream");

    let mut backend = -1;
    assert_eq!(unsafe { spammSetBackend(h, sparsegpu::BackendKind::Cpu as i32) }, OK);
    assert_eq!(unsafe { spammGetBackend(h, &mut backend) }, OK);
    assert_eq!(backend, sparsegpu::BackendKind::Cpu as i32);
    expect_failure(unsafe { spammSetBackend(h, 9) }, Status::InvalidValue, "spammSetBackend", "backend");
    if sparsegpu::backend::cuda::availability().is_ok() {
        assert_eq!(unsafe { spammSetBackend(h, sparsegpu::BackendKind::Cuda as i32) }, OK, "{}", last_error());
        assert_eq!(unsafe { spammGetBackend(h, &mut backend) }, OK);
        assert_eq!(backend, sparsegpu::BackendKind::Cuda as i32);
        assert_eq!(unsafe { spammSetBackend(h, sparsegpu::BackendKind::Cpu as i32) }, OK);
    } else {
        expect_failure(
            unsafe { spammSetBackend(h, sparsegpu::BackendKind::Cuda as i32) },
            Status::BackendUnavailable,
            "spammSetBackend",
            "CUDA",
        );
        assert_eq!(unsafe { spammGetBackend(h, &mut backend) }, OK);
        assert_eq!(backend, sparsegpu::BackendKind::Cpu as i32, "a failed switch leaves the backend");
    }
    expect_failure(unsafe { spammGetBackend(h, null_mut()) }, Status::InvalidPointer, "spammGetBackend", "backend");

    let (mut count, mut ids) = (0, [-1; 4]);
    assert_eq!(unsafe { spammGetDevices(h, 0, &mut count, null_mut()) }, OK);
    assert_eq!(count, 1);
    assert_eq!(unsafe { spammSetDevices(h, 3, [2, 0, 5].as_ptr()) }, OK);
    assert_eq!(unsafe { spammGetDevices(h, 2, &mut count, ids.as_mut_ptr()) }, OK);
    assert_eq!((count, ids), (3, [2, 0, -1, -1]));
    expect_failure(unsafe { spammSetDevices(h, 0, [1].as_ptr()) }, Status::InvalidSize, "spammSetDevices", "count");
    expect_failure(unsafe { spammSetDevices(h, -1, [1].as_ptr()) }, Status::InvalidSize, "spammSetDevices", "count");
    expect_failure(unsafe { spammSetDevices(h, 2, null()) }, Status::InvalidPointer, "spammSetDevices", "devices");
    expect_failure(unsafe { spammSetDevices(h, 2, [1, 1].as_ptr()) }, Status::InvalidValue, "spammSetDevices", "twice");
    expect_failure(
        unsafe { spammSetDevices(h, 1, [-2].as_ptr()) },
        Status::InvalidValue,
        "spammSetDevices",
        "negative",
    );
    expect_failure(
        unsafe { spammGetDevices(h, 2, &mut count, null_mut()) },
        Status::InvalidPointer,
        "spammGetDevices",
        "devices",
    );
    expect_failure(
        unsafe { spammGetDevices(h, -1, &mut count, null_mut()) },
        Status::InvalidSize,
        "spammGetDevices",
        "capacity",
    );
    expect_failure(
        unsafe { spammGetDevices(h, 0, null_mut(), null_mut()) },
        Status::InvalidPointer,
        "spammGetDevices",
        "count",
    );
    assert_eq!(unsafe { spammGetDevices(h, 4, &mut count, ids.as_mut_ptr()) }, OK);
    assert_eq!((count, &ids[..3]), (3, &[2, 0, 5][..]), "rejected device lists leave the old one");

    // A destroyed handle and a foreign pointer are reported, not dereferenced.
    assert_eq!(unsafe { spammDestroy(h) }, OK);
    let mut local = 0u64;
    let foreign = &mut local as *mut u64 as spammHandle_t;
    for (handle, label) in [(h, "destroyed"), (foreign, "foreign")] {
        let one = 1.0f32;
        let mut c = [9.0f32];
        let st = unsafe {
            spammSgemm(
                handle,
                OP_N,
                OP_N,
                1,
                1,
                1,
                &one,
                [1.0].as_ptr(),
                1,
                [1.0].as_ptr(),
                1,
                &one,
                c.as_mut_ptr(),
                1,
                0.0,
            )
        };
        expect_failure(st, Status::InvalidHandle, "spammSgemm", "not a live spamm handle");
        assert_eq!(c[0], 9.0, "{label}");
        expect_failure(unsafe { spammSetBlockSize(handle, 8) }, Status::InvalidHandle, "spammSetBlockSize", "handle");
        expect_failure(
            unsafe { spammGetStats(handle, &mut spammStats_t::default()) },
            Status::InvalidHandle,
            "spammGetStats",
            "handle",
        );
        expect_failure(
            unsafe { spammSetStream(handle, null_mut()) },
            Status::InvalidHandle,
            "spammSetStream",
            "handle",
        );
        expect_failure(
            unsafe { spammGetDevices(handle, 0, &mut count, null_mut()) },
            Status::InvalidHandle,
            "spammGetDevices",
            "handle",
        );
        expect_failure(unsafe { spammDestroy(handle) }, Status::InvalidHandle, "spammDestroy", "handle");
    }
    assert_eq!(local, 0);
}

#[test]
fn tune_tau_rejects_bad_arguments_and_leaves_outputs() {
    let h = create();
    let a = [1.0f32; 16];
    let ap = a.as_ptr() as *const c_void;
    let f32t = sparsegpu::ValueType::F32 as i32;
    let (mut tau, mut ratio) = (-5.0, -5.0);
    let (tp, rp): (*mut f64, *mut f64) = (&mut tau, &mut ratio);
    type Call<'a> = Box<dyn Fn() -> i32 + 'a>;
    let cases: Vec<(Call, Status, &str)> = vec![
        (
            Box::new(|| unsafe {
                spammTuneTau(null_mut(), f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.5, 0.1, 10, tp, rp)
            }),
            Status::InvalidHandle,
            "handle",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, 17, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.5, 0.1, 10, tp, rp) }),
            Status::InvalidValue,
            "valueType",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, 2, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.5, 0.1, 10, tp, rp) }),
            Status::InvalidValue,
            "transa",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, -4, 4, ap, 4, ap, 4, 0.5, 0.1, 10, tp, rp) }),
            Status::InvalidSize,
            "argument n = -4",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 0, 4, 4, ap, 4, ap, 4, 0.5, 0.1, 10, tp, rp) }),
            Status::InvalidSize,
            "no block products",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 2, ap, 4, 0.5, 0.1, 10, tp, rp) }),
            Status::InvalidSize,
            "argument lda = 2",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, null(), 4, 0.5, 0.1, 10, tp, rp) }),
            Status::InvalidPointer,
            "argument B is NULL",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.0, 0.1, 10, tp, rp) }),
            Status::InvalidValue,
            "targetValidRatio",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 1.5, 0.1, 10, tp, rp) }),
            Status::InvalidValue,
            "targetValidRatio",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.5, -0.1, 10, tp, rp) }),
            Status::InvalidValue,
            "tolerance",
        ),
        (
            Box::new(|| unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.5, 0.1, 0, tp, rp) }),
            Status::InvalidValue,
            "maxIterations",
        ),
        (
            Box::new(|| unsafe {
                spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.5, 0.1, 10, null_mut(), rp)
            }),
            Status::InvalidPointer,
            "argument tau",
        ),
        (
            Box::new(|| unsafe {
                spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.5, 0.1, 10, tp, null_mut())
            }),
            Status::InvalidPointer,
            "achievedValidRatio",
        ),
    ];
    for (call, status, fragment) in cases {
        expect_failure(call(), status, "spammTuneTau", fragment);
        assert_eq!((tau, ratio), (-5.0, -5.0), "outputs written on failure ({fragment})");
    }
    // All-equal blocks: every norm product is the mean, so the only ratios are 1 (τ ≤ ave) and 0.
    assert_eq!(unsafe { spammSetBlockSize(h, 2) }, OK);
    assert_eq!(
        unsafe { spammTuneTau(h, f32t, OP_N, OP_N, 4, 4, 4, ap, 4, ap, 4, 0.9, 0.0, 30, &mut tau, &mut ratio) },
        OK
    );
    assert_eq!(ratio, 1.0);
    // An all-zero matrix has only τ = 0 (ratio 1) and τ > 0 (ratio 0).
    let zeros = [0.0f64; 16];
    let zp = zeros.as_ptr() as *const c_void;
    let f64t = sparsegpu::ValueType::F64 as i32;
    assert_eq!(
        unsafe { spammTuneTau(h, f64t, OP_N, OP_T, 4, 4, 4, zp, 4, zp, 4, 0.2, 0.0, 30, &mut tau, &mut ratio) },
        OK
    );
    assert!(tau > 0.0 && ratio == 0.0, "{tau} {ratio}");
    unsafe { spammDestroy(h) };
}

#[test]
fn tune_tau_for_error_bound_rejects_bad_arguments_and_leaves_outputs() {
    let h = create();
    let a = [1.0f32; 16];
    let ap = a.as_ptr() as *const c_void;
    let one = 1.0f32;
    let nan = f32::NAN;
    let (alpha, alpha_nan) = (&one as *const f32 as *const c_void, &nan as *const f32 as *const c_void);
    let f32t = sparsegpu::ValueType::F32 as i32;
    let (mut tau, mut bound, mut ratio) = (-5.0, -5.0, -5.0);
    let (tp, bp, rp): (*mut f64, *mut f64, *mut f64) = (&mut tau, &mut bound, &mut ratio);
    let call = |h: spammHandle_t,
                vt: i32,
                m: i32,
                alpha: *const c_void,
                b: *const c_void,
                eps: f64,
                iterations: i32,
                outs: (*mut f64, *mut f64, *mut f64)| unsafe {
        spammTuneTauForErrorBound(
            h, vt, OP_N, OP_N, m, 4, 4, alpha, ap, 4, b, 4, eps, iterations, outs.0, outs.1, outs.2,
        )
    };
    let outs = (tp, bp, rp);
    type Case<'a> = (Box<dyn Fn() -> i32 + 'a>, Status, &'a str);
    let cases: Vec<Case> = vec![
        (Box::new(|| call(null_mut(), f32t, 4, alpha, ap, 1.0, 10, outs)), Status::InvalidHandle, "handle"),
        (Box::new(|| call(h, 17, 4, alpha, ap, 1.0, 10, outs)), Status::InvalidValue, "valueType"),
        (Box::new(|| call(h, f32t, -4, alpha, ap, 1.0, 10, outs)), Status::InvalidSize, "argument m = -4"),
        (Box::new(|| call(h, f32t, 0, alpha, ap, 1.0, 10, outs)), Status::InvalidSize, "no block products"),
        (Box::new(|| call(h, f32t, 4, null(), ap, 1.0, 10, outs)), Status::InvalidPointer, "argument alpha is NULL"),
        (Box::new(|| call(h, f32t, 4, alpha_nan, ap, 1.0, 10, outs)), Status::InvalidValue, "alpha"),
        (Box::new(|| call(h, f32t, 4, alpha, null(), 1.0, 10, outs)), Status::InvalidPointer, "argument B is NULL"),
        (Box::new(|| call(h, f32t, 4, alpha, ap, -1.0, 10, outs)), Status::InvalidValue, "errorBound"),
        (Box::new(|| call(h, f32t, 4, alpha, ap, f64::NAN, 10, outs)), Status::InvalidValue, "errorBound"),
        (Box::new(|| call(h, f32t, 4, alpha, ap, 1.0, 0, outs)), Status::InvalidValue, "maxIterations"),
        (
            Box::new(|| call(h, f32t, 4, alpha, ap, 1.0, 10, (null_mut(), bp, rp))),
            Status::InvalidPointer,
            "argument tau",
        ),
        (
            Box::new(|| call(h, f32t, 4, alpha, ap, 1.0, 10, (tp, null_mut(), rp))),
            Status::InvalidPointer,
            "achievedErrorBound",
        ),
        (
            Box::new(|| call(h, f32t, 4, alpha, ap, 1.0, 10, (tp, bp, null_mut()))),
            Status::InvalidPointer,
            "achievedValidRatio",
        ),
    ];
    for (call, expected, fragment) in cases {
        expect_failure(call(), expected, "spammTuneTauForErrorBound", fragment);
        assert_eq!((tau, bound, ratio), (-5.0, -5.0, -5.0), "outputs written on failure ({fragment})");
    }
    // Inf in A: no norm is finite, nothing to search.
    let inf = [f32::INFINITY; 16];
    expect_failure(
        call(h, f32t, 4, alpha, inf.as_ptr() as *const c_void, 1.0, 10, outs),
        Status::InvalidValue,
        "spammTuneTauForErrorBound",
        "Inf or NaN",
    );
    // All-equal blocks (bs 2: every norm 2, every product 4, each C block sums 2 of them): skipping
    // everything gives 8·sqrt(4) = 16, so ε = 16 allows τ = +∞ and anything less keeps τ = 4.
    assert_eq!(unsafe { spammSetBlockSize(h, 2) }, OK);
    assert_eq!(call(h, f32t, 4, alpha, ap, 16.0, 10, outs), OK);
    assert_eq!((tau, bound, ratio), (f64::INFINITY, 16.0, 0.0));
    assert_eq!(call(h, f32t, 4, alpha, ap, 15.9, 10, outs), OK);
    assert_eq!((tau, bound, ratio), (4.0, 0.0, 1.0));
    unsafe { spammDestroy(h) };
}

/// The row split of multi-device products: consecutive ranges covering every row, each holding its
/// fraction of the work (within one row's work), and even rows when nothing is valid.
#[test]
fn multi_device_shares_get_their_fraction_of_valid_work() {
    use sparsegpu::backend::cuda::spamm::work_bounds;
    let mut rng = Rng::fresh("spamm shares");
    for _ in 0..400 {
        let rows = rng.below(40);
        let parts = 1 + rng.below(8);
        let work: Vec<u64> =
            (0..rows).map(|i| if rng.below(4) == 0 { 0 } else { (i * i % 17) as u64 + rng.below(50) as u64 }).collect();
        let fractions: Vec<f64> = match rng.below(2) {
            0 => vec![1.0 / parts as f64; parts],
            _ => {
                let weights: Vec<f64> = (0..parts).map(|_| 1.0 + rng.below(9) as f64).collect();
                weights.iter().map(|w| w / weights.iter().sum::<f64>()).collect()
            }
        };
        let bounds = work_bounds(&work, &fractions);
        assert_eq!((bounds.len(), bounds[0], bounds[parts]), (parts + 1, 0, rows));
        assert!(bounds.windows(2).all(|w| w[0] <= w[1]), "{bounds:?}");
        let total: u64 = work.iter().sum();
        let largest = work.iter().copied().max().unwrap_or(0);
        let mut before = 0.0;
        for p in 0..parts {
            // Boundaries land within a row of the ideal, so a share is off by at most two rows' work.
            let share: u64 = work[bounds[p]..bounds[p + 1]].iter().sum();
            let ideal = total as f64 * fractions[p];
            assert!((share as f64 - ideal).abs() <= 2.0 * largest as f64 + 1.0, "{work:?} {bounds:?} share {p}");
            before += fractions[p];
            let reached: u64 = work[..bounds[p + 1]].iter().sum();
            assert!(reached as f64 + 1e-6 >= (total as f64 * before).min(total as f64) - 1.0, "{work:?} {bounds:?}");
        }
    }
    assert_eq!(work_bounds(&[0; 10], &[1.0 / 3.0; 3]), vec![0, 3, 6, 10]);
    assert_eq!(work_bounds(&[5; 10], &[0.5, 0.3, 0.2]), vec![0, 5, 8, 10]);
}

// ---- FP32 math mode (spammSetMathMode) ------------------------------------------------------------

#[test]
fn math_mode_setting_and_its_failures() {
    let h = create();
    let mut mode = -1;
    assert_eq!(unsafe { spammGetMathMode(h, &mut mode) }, OK);
    assert_eq!(mode, MathMode::Default as i32, "DEFAULT until set");
    assert_eq!(unsafe { spammSetMathMode(h, MathMode::Tf32x3 as i32) }, OK, "{}", last_error());
    assert_eq!(unsafe { spammGetMathMode(h, &mut mode) }, OK);
    assert_eq!(mode, MathMode::Tf32x3 as i32);
    for bad in [-1, 2, 99, i32::MIN] {
        expect_failure(unsafe { spammSetMathMode(h, bad) }, Status::InvalidValue, "spammSetMathMode", "mode");
        assert!(last_error().contains("spammMathMode_t"), "{}", last_error());
    }
    assert_eq!(unsafe { spammGetMathMode(h, &mut mode) }, OK);
    assert_eq!(mode, MathMode::Tf32x3 as i32, "a rejected mode leaves the old one");
    expect_failure(unsafe { spammGetMathMode(h, null_mut()) }, Status::InvalidPointer, "spammGetMathMode", "mode");
    expect_failure(unsafe { spammSetMathMode(null_mut(), 0) }, Status::InvalidHandle, "spammSetMathMode", "handle");
    expect_failure(
        unsafe { spammGetMathMode(null_mut(), &mut mode) },
        Status::InvalidHandle,
        "spammGetMathMode",
        "handle",
    );
    assert_eq!(unsafe { spammSetMathMode(h, MathMode::Default as i32) }, OK);
    assert_eq!(unsafe { spammGetMathMode(h, &mut mode) }, OK);
    assert_eq!(mode, 0);
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

#[test]
fn tf32_rounding_is_to_nearest_with_ties_away_from_zero() {
    use sparsegpu::backend::cpu::tf32::{tf32_round, tf32_split, tf32_truncate};
    let ulp = 2f32.powi(-10); // TF32 spacing at 1
    for sign in [1.0f32, -1.0] {
        assert_eq!(tf32_round(sign * (1.0 + ulp / 2.0)), sign * (1.0 + ulp), "a tie goes away from zero");
        assert_eq!(tf32_round(sign * (1.0 + ulp / 4.0)), sign * 1.0);
        assert_eq!(tf32_round(sign * (1.0 + 0.75 * ulp)), sign * (1.0 + ulp));
        assert_eq!(tf32_round(sign * (2.0 - ulp / 4.0)), sign * 2.0, "a carry into the exponent");
    }
    assert_eq!(tf32_round(0.0), 0.0);
    assert_eq!(tf32_round(f32::INFINITY), f32::INFINITY);
    assert!(tf32_round(f32::NAN).is_nan());
    // The split: big rounded, small the truncated remainder, together x to within 2^-21 |x|.
    let mut rng = Rng::fresh("tf32 split");
    for _ in 0..10_000 {
        let x = rng.range(-1e3, 1e3) as f32;
        let (big, small) = tf32_split(x);
        assert_eq!(big, tf32_round(x));
        assert_eq!(small, tf32_truncate(x - big));
        assert_eq!(big.to_bits() & 0x1fff, 0);
        assert_eq!(small.to_bits() & 0x1fff, 0);
        assert!(((big as f64 + small as f64) - x as f64).abs() <= 2f64.powi(-21) * (x as f64).abs(), "{x}");
    }
    assert_eq!(tf32_truncate(-(1.0 + 0.75 * ulp)), -1.0, "truncation is toward zero");
}

/// 3xTF32 products on the CPU (the executable specification of the mode) against the independent f64
/// reference: relative Frobenius error at FP32 level on random and decay inputs, every transpose,
/// padded leading dimensions, α / β, τ = 0 and τ > 0 (the same skips as the exact mode), block sizes
/// where the mode applies (multiples of 32) and where it does not (exact FP32 then, bit for bit).
#[test]
fn tf32x3_is_close_to_fp32_against_an_f64_reference() {
    let mut rng = Rng::fresh("spamm 3xtf32");
    let h = create();
    let mut emulated_differs = 0;
    for case in 0..24 {
        let bs = [32, 64, 8][case % 3];
        let (m, n, k) = (20 + rng.below(90), 20 + rng.below(90), 30 + rng.below(200));
        let (ta, tb) = (case % 2 == 1, (case / 2) % 2 == 1);
        let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
        let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
        let (lda, ldb, ldc) = (a_rows + rng.below(3), b_rows + rng.below(3), m + rng.below(3));
        let (a_stored, b_stored): (Vec<f32>, Vec<f32>) = if case % 4 < 2 {
            (random_stored(&mut rng, a_rows, a_cols, lda), random_stored(&mut rng, b_rows, b_cols, ldb))
        } else {
            // Decay matrices with a wide range of magnitudes: the small parts matter.
            let decay = |rng: &mut Rng, rows: usize, cols: usize, ld: usize| -> Vec<f32> {
                let dense: Vec<f32> = algebraic_decay(rng, rows, cols, 1.0, 1.5);
                let mut out = vec![f32::NAN; (cols - 1) * ld + rows];
                for j in 0..cols {
                    for i in 0..rows {
                        out[i + j * ld] = dense[i + j * rows];
                    }
                }
                out
            };
            (decay(&mut rng, a_rows, a_cols, lda), decay(&mut rng, b_rows, b_cols, ldb))
        };
        let (alpha, beta) = if case % 3 == 0 { (1.0f32, 0.0f32) } else { (-0.75f32, 0.5f32) };
        let c_len = (n - 1) * ldc + m;
        let c0: Vec<f32> =
            (0..c_len).map(|_| if beta == 0.0 { f32::NAN } else { rng.range(-1.0, 1.0) as f32 }).collect();
        let a = Operand { values: to_f64(&a_stored), transposed: ta, ld: lda };
        let b = Operand { values: to_f64(&b_stored), transposed: tb, ld: ldb };
        let tau = if case % 5 == 0 { 0.0 } else { pick_tau(&mut rng, &norm_products(&a, &b, m, n, k, bs)) };
        let want = reference(&a, &b, (m, n, k), alpha as f64, beta as f64, &to_f64(&c0), ldc, tau, bs);
        assert_eq!(unsafe { spammSetBlockSize(h, bs as i32) }, OK);
        let mut results = Vec::new();
        for mode in [MathMode::Default, MathMode::Tf32x3] {
            assert_eq!(unsafe { spammSetMathMode(h, mode as i32) }, OK);
            let mut c = c0.clone();
            let st = unsafe {
                spammSgemm(
                    h,
                    if ta { OP_T } else { OP_N },
                    if tb { OP_T } else { OP_N },
                    m as i32,
                    n as i32,
                    k as i32,
                    &alpha,
                    a_stored.as_ptr(),
                    lda as i32,
                    b_stored.as_ptr(),
                    ldb as i32,
                    &beta,
                    c.as_mut_ptr(),
                    ldc as i32,
                    tau,
                )
            };
            assert_eq!(st, OK, "{}", last_error());
            let s = stats(h);
            assert_eq!(s.performedProducts as u64, want.performed, "case {case} {mode:?}: the mode changes no skip");
            let got: Vec<f64> = (0..m * n).map(|e| c[e % m + (e / m) * ldc] as f64).collect();
            let err = relative_error(&got, &want.approx);
            let what = format!("case {case} {mode:?}: {m}x{n}x{k} bs {bs} ta {ta} tb {tb} tau {tau:e}: error {err:e}");
            assert!(err <= 1e-5, "{what}");
            for j in 0..n {
                for i in m..ldc.min(c_len - j * ldc) {
                    assert!(c[i + j * ldc].to_bits() == c0[i + j * ldc].to_bits(), "{what}: padding written");
                }
            }
            results.push(c);
        }
        let same = results[0].iter().zip(&results[1]).all(|(x, y)| x.to_bits() == y.to_bits());
        if bs % 32 != 0 {
            assert!(same, "case {case}: block size {bs}: the mode does not apply, exact FP32 expected");
        } else if !same {
            emulated_differs += 1;
        }
    }
    assert!(emulated_differs > 0, "3xTF32 never differed from exact FP32: is it emulated at all?");
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

/// A tuned product (C = αAB + βC, A m×k, B k×n, no transposes, lda = m, ldb = k, ldc = m) by
/// [`common::SpammGemm::gemm_by_rule`]; returns the status and the τ written (−5 untouched).
fn tuned_gemm<T: SpammElement>(
    h: spammHandle_t,
    rule: TauRule,
    (m, n, k): (usize, usize, usize),
    (alpha, beta): (T::Compute, T::Compute),
    (a, b, c): (&[T], &[T], &mut [T]),
) -> (i32, f64) {
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let (lda, ldb) = (mi.max(1), ki.max(1));
    let operands = ((a.as_ptr(), lda), (b.as_ptr(), ldb), (c.as_mut_ptr(), lda));
    unsafe { T::gemm_by_rule(h, (OP_N, OP_N), (mi, ni, ki), &alpha, operands.0, operands.1, &beta, operands.2, rule) }
}

/// The tuned products' rules in these tests: a valid ratio within 0.005 in at most 20 iterations, or
/// an error bound in at most 60.
fn at_ratio(target: f64) -> TauRule {
    TauRule::ValidRatio { target, tolerance: 0.005, max_iterations: 20 }
}

fn within_bound(bound: f64) -> TauRule {
    TauRule::ErrorBound { bound, max_iterations: 60 }
}

/// A tuned product equals spammTuneTau (or spammTuneTauForErrorBound) followed by spamm?gemm at the
/// τ found: the same τ, the same C to the bit, the same statistics; on square and non-square decay
/// products with α / β, and with m, n or k zero (τ = 0, C = βC).
fn tuned_products_equal_tune_then_gemm<T: SpammElement>(rng: &mut Rng) {
    let h = create();
    assert_eq!(unsafe { spammSetBlockSize(h, 16) }, OK);
    for (m, n, k) in [(150, 150, 150), (97, 130, 70)] {
        let a: Vec<T> = algebraic_decay(rng, m, k, 0.1, 0.1);
        let b: Vec<T> = exponential_decay(rng, k, n, 1.0, 0.9);
        let c0: Vec<T> = rng.vec(m * n);
        let (alpha, beta) = (T::Compute::from_f64(-0.75), T::Compute::from_f64(0.5));
        let (ap, bp) = (a.as_ptr() as *const c_void, b.as_ptr() as *const c_void);
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        // spamm?gemm at τ into c (A m×k, B k×n, lda = m, ldb = k, ldc = m).
        let product = |beta: T::Compute, c: &mut [T], tau: f64| unsafe {
            T::gemm(h, OP_N, OP_N, mi, ni, ki, &alpha, a.as_ptr(), mi, b.as_ptr(), ki, &beta, c.as_mut_ptr(), mi, tau)
        };
        // The bound of skipping every product, to ask for a fraction of it.
        let everything = product(T::Compute::from_f64(0.0), &mut c0.clone(), f64::INFINITY);
        assert_eq!(everything, OK, "{}", last_error());
        let skip_all = stats(h).errorBound;
        for rule in [at_ratio(0.1), at_ratio(0.3), within_bound(0.05 * skip_all)] {
            let what = format!("{:?} {m}x{n}x{k} {rule:?}", T::VALUE_TYPE);
            let mut tuned = c0.clone();
            let (status, tau) = tuned_gemm(h, rule, (m, n, k), (alpha, beta), (&a, &b, &mut tuned));
            assert_eq!(status, OK, "{what}: {}", last_error());
            let tuned_stats = stats(h);
            let (mut searched, mut bound, mut ratio) = (-1.0, -1.0, -1.0);
            let st = unsafe {
                match rule {
                    TauRule::ValidRatio { target, tolerance, max_iterations } => spammTuneTau(
                        h,
                        T::VALUE_TYPE as i32,
                        OP_N,
                        OP_N,
                        mi,
                        ni,
                        ki,
                        ap,
                        mi,
                        bp,
                        ki,
                        target,
                        tolerance,
                        max_iterations as i32,
                        &mut searched,
                        &mut ratio,
                    ),
                    TauRule::ErrorBound { bound: epsilon, max_iterations } => spammTuneTauForErrorBound(
                        h,
                        T::VALUE_TYPE as i32,
                        OP_N,
                        OP_N,
                        mi,
                        ni,
                        ki,
                        &alpha as *const T::Compute as *const c_void,
                        ap,
                        mi,
                        bp,
                        ki,
                        epsilon,
                        max_iterations as i32,
                        &mut searched,
                        &mut bound,
                        &mut ratio,
                    ),
                    TauRule::Given(_) => unreachable!("only tuned rules here"),
                }
            };
            assert_eq!(st, OK, "{what}: {}", last_error());
            assert_eq!(tau.to_bits(), searched.to_bits(), "{what}: the tuned product's τ is the search's");
            assert_eq!(tuned_stats.tau.to_bits(), tau.to_bits(), "{what}: spammGetStats reports τ");
            assert_eq!(tuned_stats.validRatio, ratio, "{what}");
            if let TauRule::ErrorBound { bound: epsilon, .. } = rule {
                assert_eq!(tuned_stats.errorBound.to_bits(), bound.to_bits(), "{what}");
                assert!(bound <= epsilon && tuned_stats.validRatio < 1.0, "{what}: bound {bound:e}");
            }
            let mut plain = c0.clone();
            let st = product(beta, &mut plain, tau);
            assert_eq!(st, OK, "{what}: {}", last_error());
            let bits = |x: &[T]| x.iter().map(|v| v.to_f64().to_bits()).collect::<Vec<_>>();
            assert!(bits(&tuned) == bits(&plain), "{what}: C differs from spamm?gemm at the τ found");
        }
    }
    // No block products: τ = 0 without a search, C = βC (k = 0) or nothing to write.
    for (m, n, k) in [(0, 5, 3), (4, 0, 3), (5, 4, 0)] {
        let (a, b): (Vec<T>, Vec<T>) = (rng.vec(m.max(1) * k.max(1)), rng.vec(k.max(1) * n.max(1)));
        let c0: Vec<T> = rng.vec(m.max(1) * n.max(1));
        let mut c = c0.clone();
        let (alpha, beta) = (T::Compute::from_f64(1.0), T::Compute::from_f64(2.0));
        for rule in [at_ratio(0.1), within_bound(0.0)] {
            c.copy_from_slice(&c0);
            let (status, tau) = tuned_gemm(h, rule, (m, n, k), (alpha, beta), (&a, &b, &mut c));
            assert_eq!((status, tau), (OK, 0.0), "{m}x{n}x{k} {rule:?}: {}", last_error());
            let want: Vec<f64> = c0
                .iter()
                .map(|x| if m * n > 0 { T::from_f64(2.0 * x.to_f64()).to_f64() } else { x.to_f64() })
                .collect();
            let got: Vec<f64> = c.iter().map(|x| x.to_f64()).collect();
            assert_all_close(&format!("{m}x{n}x{k} {rule:?}"), &got, &want, 0.0, 0.0);
        }
    }
    unsafe { spammDestroy(h) };
}

#[test]
fn tuned_products_equal_tuning_then_the_product() {
    let mut rng = Rng::fresh("spamm tuned products");
    tuned_products_equal_tune_then_gemm::<f32>(&mut rng);
    tuned_products_equal_tune_then_gemm::<f64>(&mut rng);
    tuned_products_equal_tune_then_gemm::<f16>(&mut rng);
    tuned_products_equal_tune_then_gemm::<bf16>(&mut rng);
}

/// The tuned products check their arguments (their own and spamm?gemm's) before any work, fail with
/// a message naming the function and the argument, and leave C and *tau untouched.
#[test]
fn tuned_products_reject_bad_arguments_and_leave_c_untouched() {
    let h = create();
    let a = [1.0f32; 16];
    let (ap, one) = (a.as_ptr() as *const c_void, &1.0f32 as *const f32 as *const c_void);
    let f32t = sparsegpu::ValueType::F32 as i32;
    let mut c = [7.0f32; 16];
    let cp = c.as_mut_ptr() as *mut c_void;
    let mut tau = -5.0;
    let tp: *mut f64 = &mut tau;
    type Call<'a> = Box<dyn Fn() -> i32 + 'a>;
    let ratio = |h, vt, m, alpha, c, target, iterations, tau| -> Call {
        Box::new(move || unsafe {
            spammGemmAtValidRatio(
                h, vt, OP_N, OP_N, m, 4, 4, alpha, ap, 4, ap, 4, one, c, 4, target, 0.01, iterations, tau,
            )
        })
    };
    let bound = |h, vt, alpha, epsilon, iterations| -> Call {
        Box::new(move || unsafe {
            spammGemmWithinErrorBound(
                h, vt, OP_N, OP_N, 4, 4, 4, alpha, ap, 4, ap, 4, one, cp, 4, epsilon, iterations, tp,
            )
        })
    };
    let cases: Vec<(Call, Status, &str, &str)> = vec![
        (ratio(null_mut(), f32t, 4, one, cp, 0.5, 10, tp), Status::InvalidHandle, "spammGemmAtValidRatio", "handle"),
        (ratio(h, 17, 4, one, cp, 0.5, 10, tp), Status::InvalidValue, "spammGemmAtValidRatio", "valueType"),
        (ratio(h, f32t, -1, one, cp, 0.5, 10, tp), Status::InvalidSize, "spammGemmAtValidRatio", "m"),
        (ratio(h, f32t, 4, one, cp, 0.5, 0, tp), Status::InvalidValue, "spammGemmAtValidRatio", "maxIterations"),
        (ratio(h, f32t, 4, one, cp, 0.5, 10, null_mut()), Status::InvalidPointer, "spammGemmAtValidRatio", "tau"),
        (ratio(h, f32t, 4, null(), cp, 0.5, 10, tp), Status::InvalidPointer, "spammGemmAtValidRatio", "alpha"),
        (ratio(h, f32t, 4, one, cp, 0.0, 10, tp), Status::InvalidValue, "spammGemmAtValidRatio", "targetValidRatio"),
        (ratio(h, f32t, 4, one, cp, 1.5, 10, tp), Status::InvalidValue, "spammGemmAtValidRatio", "targetValidRatio"),
        (ratio(h, f32t, 4, one, null_mut(), 0.5, 10, tp), Status::InvalidPointer, "spammGemmAtValidRatio", "C"),
        (
            ratio(h, f32t, 4, one, ap as *mut c_void, 0.5, 10, tp),
            Status::InvalidPointer,
            "spammGemmAtValidRatio",
            "overlaps",
        ),
        (bound(h, f32t, one, -1.0, 10), Status::InvalidValue, "spammGemmWithinErrorBound", "errorBound"),
        (bound(h, f32t, one, f64::NAN, 10), Status::InvalidValue, "spammGemmWithinErrorBound", "errorBound"),
        (bound(h, f32t, one, 1.0, 0), Status::InvalidValue, "spammGemmWithinErrorBound", "maxIterations"),
        (bound(h, f32t, null(), 1.0, 10), Status::InvalidPointer, "spammGemmWithinErrorBound", "alpha"),
    ];
    for (call, status, function, fragment) in cases {
        expect_failure(call(), status, function, fragment);
        assert_eq!(unsafe { *tp }, -5.0, "{function} {fragment}: tau written");
        assert!(c.iter().all(|&x| x == 7.0), "{function} {fragment}: C written");
    }
    unsafe { spammDestroy(h) };
}

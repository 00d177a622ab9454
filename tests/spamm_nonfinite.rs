//! SpAMM on data holding NaN and ±∞, and on f64 data whose squares underflow or overflow: never a
//! silently wrong answer. Every check runs on the CPU backend, and on the CUDA backend where a GPU is
//! usable.

mod common;
use common::{POISON, Rng, SpammGemm, last_error, reference_gemm};
use half::{bf16, f16};
use sparsegpu::BackendKind;
use sparsegpu::capi::spamm::*;
use sparsegpu::scalar::Element;
use sparsegpu::spamm::{MathMode, TauRule};
use std::ptr::null_mut;

const OK: i32 = 0;
const OP_N: i32 = sparsegpu::Operation::N as i32;

/// The backends to check: the CPU always, CUDA where it is usable.
fn backends(test: &str) -> Vec<BackendKind> {
    let mut kinds = vec![BackendKind::Cpu];
    if common::cuda_available(test) {
        kinds.push(BackendKind::Cuda);
    }
    kinds
}

fn handle(backend: BackendKind, block_size: usize, mode: MathMode) -> spammHandle_t {
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, OK);
    assert_eq!(unsafe { spammSetBackend(h, backend as i32) }, OK, "{}", last_error());
    assert_eq!(unsafe { spammSetBlockSize(h, block_size as i32) }, OK);
    assert_eq!(unsafe { spammSetMathMode(h, mode as i32) }, OK);
    h
}

fn stats(h: spammHandle_t) -> spammStats_t {
    let mut s = spammStats_t::default();
    assert_eq!(unsafe { spammGetStats(h, &mut s) }, OK, "{}", last_error());
    s
}

/// `C = op(A)·op(B)` (α = 1, β = 0, no transposes, tight leading dimensions) at τ, on a poisoned C.
fn product<T: SpammGemm>(h: spammHandle_t, (m, n, k): (usize, usize, usize), a: &[T], b: &[T], tau: f64) -> Vec<f64> {
    let (one, zero) = (T::Compute::from_f64(1.0), T::Compute::from_f64(0.0));
    let mut c = vec![T::from_f64(POISON); m * n];
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let status = unsafe {
        T::gemm(h, OP_N, OP_N, mi, ni, ki, &one, a.as_ptr(), mi, b.as_ptr(), ki, &zero, c.as_mut_ptr(), mi, tau)
    };
    assert_eq!(status, OK, "{}", last_error());
    c.iter().map(|x| x.to_f64()).collect()
}

/// What an element is: a finite number, NaN, +∞ or −∞.
fn class(x: f64) -> &'static str {
    if x.is_nan() {
        "NaN"
    } else if x == f64::INFINITY {
        "+inf"
    } else if x == f64::NEG_INFINITY {
        "-inf"
    } else {
        "finite"
    }
}

/// The smallest case: A and B all ones (32 × 32), A[0] = NaN, τ = 0: as GEMM, row 0 of C is
/// NaN and every other element is 32.
fn nan_in_one_element<T: SpammGemm>(backend: BackendKind, mode: MathMode) {
    let what = format!("{:?} {backend:?} {mode:?}", T::VALUE_TYPE);
    let mut a = vec![T::from_f64(1.0); 32 * 32];
    a[0] = T::from_f64(f64::NAN);
    let b = vec![T::from_f64(1.0); 32 * 32];
    let h = handle(backend, 32, mode);
    let c = product(h, (32, 32, 32), &a, &b, 0.0);
    for j in 0..32 {
        for i in 0..32 {
            let x = c[i + j * 32];
            if i == 0 {
                assert!(x.is_nan(), "{what}: C({i}, {j}) = {x}, want NaN");
            } else {
                assert_eq!(x, 32.0, "{what}: C({i}, {j})");
            }
        }
    }
    let s = stats(h);
    assert_eq!(s.performedProducts, 1, "{what}: the one block product must be performed: {s:?}");
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

/// Several blocks, partial edge blocks, NaN, +∞ and −∞ planted in A and B, at τ = 0, at a τ that skips
/// most finite block products, and at τ = +∞ (which skips every finite one): C's elements are NaN,
/// ±∞ or finite exactly where GEMM's are (3xTF32 turns ±∞ into NaN, as its documentation says), the
/// finite ones at τ = 0 agree with GEMM, and the reported bound stays finite.
fn planted_non_finite_values<T: SpammGemm>(rng: &mut Rng, backend: BackendKind, mode: MathMode) {
    let (m, n, k, bs) = (100, 90, 110, 32);
    let what = format!("{:?} {backend:?} {mode:?}", T::VALUE_TYPE);
    let positive = |rng: &mut Rng, len: usize| (0..len).map(|_| T::from_f64(rng.range(0.5, 1.0))).collect::<Vec<T>>();
    let mut a = positive(rng, m * k);
    let mut b = positive(rng, k * n);
    a[5 + 40 * m] = T::from_f64(f64::NAN);
    a[70 + 3 * m] = T::from_f64(f64::INFINITY);
    b[90 + 60 * k] = T::from_f64(f64::NEG_INFINITY);
    let (af, bf): (Vec<f64>, Vec<f64>) =
        (a.iter().map(|x| x.to_f64()).collect(), b.iter().map(|x| x.to_f64()).collect());
    let mut want = vec![0.0; m * n];
    reference_gemm(m, n, k, 1.0, |i, p| af[i + p * m], |p, j| bf[p + j * k], 0.0, &mut want);
    let expected_class = |x: f64| match class(x) {
        "+inf" | "-inf" if mode == MathMode::Tf32x3 => "NaN",
        other => other,
    };
    let h = handle(backend, bs, mode);
    for tau in [0.0, 300.0, f64::INFINITY] {
        let c = product(h, (m, n, k), &a, &b, tau);
        let s = stats(h);
        assert!(s.errorBound.is_finite(), "{what} tau {tau}: error bound {}", s.errorBound);
        if tau == 300.0 {
            assert!(s.performedProducts < s.totalProducts, "{what}: tau {tau} must skip finite products: {s:?}");
        }
        for (e, (&got, &w)) in c.iter().zip(&want).enumerate() {
            let (i, j) = (e % m, e / m);
            assert_eq!(class(got), expected_class(w), "{what} tau {tau}: C({i}, {j}) = {got}, GEMM gives {w}");
            if tau == 0.0 && w.is_finite() {
                let tolerance = if T::VALUE_TYPE == sparsegpu::ValueType::F64 { 1e-12 } else { 1e-2 };
                assert!((got - w).abs() <= tolerance * w.abs(), "{what}: C({i}, {j}) = {got}, want {w}");
            }
        }
    }
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

#[test]
fn nan_and_infinity_reach_c_as_through_gemm_at_every_tau() {
    let mut rng = Rng::fresh("spamm non-finite");
    for backend in backends("nan_and_infinity_reach_c_as_through_gemm_at_every_tau") {
        for &mode in MathMode::variants() {
            nan_in_one_element::<f32>(backend, mode);
            planted_non_finite_values::<f32>(&mut rng, backend, mode);
        }
        nan_in_one_element::<f64>(backend, MathMode::Default);
        planted_non_finite_values::<f64>(&mut rng, backend, MathMode::Default);
        nan_in_one_element::<f16>(backend, MathMode::Default);
        planted_non_finite_values::<f16>(&mut rng, backend, MathMode::Default);
        nan_in_one_element::<bf16>(backend, MathMode::Default);
        planted_non_finite_values::<bf16>(&mut rng, backend, MathMode::Default);
    }
}

/// f64 data whose squares underflow (A near 1e-170 against B near 1e150) or overflow (A near 1e160
/// against B near 1e-160): the block norms are scaled, so the products that matter are performed and
/// the reported bound holds, ‖C_exact − C‖_F ≤ errorBound, at a τ between the smallest and the
/// largest norm product.
#[test]
fn the_error_bound_holds_where_squares_underflow_or_overflow() {
    let mut rng = Rng::fresh("spamm scaled norms");
    for backend in backends("the_error_bound_holds_where_squares_underflow_or_overflow") {
        for (scale_a, scale_b) in [(1e-170, 1e150), (1e160, 1e-160), (1e-200, 1e180)] {
            let what = format!("{backend:?} A ~ {scale_a:e}, B ~ {scale_b:e}");
            let (m, n, k, bs) = (96, 80, 128, 32);
            // Decay across blocks so that block norm products spread over several orders of magnitude.
            let decaying = |rng: &mut Rng, rows: usize, cols: usize, scale: f64| -> Vec<f64> {
                (0..rows * cols)
                    .map(|e| {
                        let distance = ((e % rows) as f64 - (e / rows) as f64).abs();
                        scale * rng.range(0.5, 1.0) / (1.0 + distance).powi(3)
                    })
                    .collect()
            };
            let a = decaying(&mut rng, m, k, scale_a);
            let b = decaying(&mut rng, k, n, scale_b);
            let mut exact = vec![0.0; m * n];
            reference_gemm(m, n, k, 1.0, |i, p| a[i + p * m], |p, j| b[p + j * k], 0.0, &mut exact);
            let h = handle(backend, bs, MathMode::Default);
            let full = product(h, (m, n, k), &a, &b, 0.0);
            assert_eq!(stats(h).performedProducts, stats(h).totalProducts, "{what}");
            // τ well below the diagonal blocks' products and above the farthest ones'.
            let diagonal = (bs as f64) * scale_a * scale_b;
            let tau = diagonal * 1e-6;
            let c = product(h, (m, n, k), &a, &b, tau);
            let s = stats(h);
            assert!(
                0 < s.performedProducts && s.performedProducts < s.totalProducts,
                "{what}: tau {tau:e} must perform some products and skip some: {s:?}"
            );
            let difference = c.iter().zip(&exact).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
            let exact_norm = exact.iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!(difference > 0.0, "{what}: skipping must change C");
            assert!(
                difference <= s.errorBound * (1.0 + 1e-9) + 1e-13 * exact_norm,
                "{what}: ‖C_exact − C‖_F = {difference:e} exceeds the reported bound {:e}",
                s.errorBound
            );
            let full_error = full.iter().zip(&exact).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            assert!(full_error <= 1e-13 * exact_norm, "{what}: tau = 0 differs from GEMM by {full_error:e}");
            assert_eq!(unsafe { spammDestroy(h) }, OK);
        }
    }
}

/// A searched product on data holding NaN is refused (the τ searches need finite norms) with C
/// untouched, and the statistics of the last successful product stay those `spammGetStats` reports.
#[test]
fn a_search_on_non_finite_data_is_refused_and_keeps_the_last_statistics() {
    for backend in backends("a_search_on_non_finite_data_is_refused_and_keeps_the_last_statistics") {
        let n = 64;
        let mut a = vec![1.0f32; n * n];
        let b = vec![1.0f32; n * n];
        let h = handle(backend, 32, MathMode::Default);
        product(h, (n, n, n), &a, &b, 0.0);
        let before = stats(h);
        a[3] = f32::NAN;
        let (one, zero) = (1.0f32, 0.0f32);
        let mut c = vec![POISON as f32; n * n];
        let ni = n as i32;
        let rule = TauRule::ValidRatio { target: 0.5, tolerance: 0.01, max_iterations: 20 };
        let (status, tau) = unsafe {
            f32::gemm_by_rule(
                h,
                (OP_N, OP_N),
                (ni, ni, ni),
                &one,
                (a.as_ptr(), ni),
                (b.as_ptr(), ni),
                &zero,
                (c.as_mut_ptr(), ni),
                rule,
            )
        };
        assert_eq!(status, sparsegpu::Status::InvalidValue as i32, "{backend:?}: {}", last_error());
        assert!(last_error().contains("Inf or NaN"), "{backend:?}: {}", last_error());
        assert!(c.iter().all(|&x| x == POISON as f32), "{backend:?}: C was written");
        assert_eq!(tau, -5.0, "{backend:?}: tau was written");
        let after = stats(h);
        assert_eq!(after, before, "{backend:?}: the last successful product's statistics changed");
        assert_eq!(unsafe { spammDestroy(h) }, OK);
    }
}

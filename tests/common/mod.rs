//! Helpers shared by the integration tests: naive f64 references and element-wise checks.
#![allow(dead_code, clippy::too_many_arguments)]

#[allow(unused_imports)]
pub use sparsegpu::testgen::{Rng, relative_error};

/// Naive `C = α·A·B + β·C` in f64 over accessor closures (so any layout or transpose can be fed in).
/// `c` is m×n column-major with ld = m; `beta == 0` ignores the old C.
pub fn reference_gemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    a: impl Fn(usize, usize) -> f64,
    b: impl Fn(usize, usize) -> f64,
    beta: f64,
    c: &mut [f64],
) {
    for j in 0..n {
        for i in 0..m {
            let mut acc = 0.0;
            for p in 0..k {
                acc += a(i, p) * b(p, j);
            }
            let old = if beta == 0.0 { 0.0 } else { beta * c[i + j * m] };
            c[i + j * m] = alpha * acc + old;
        }
    }
}

/// Asserts |got − want| ≤ atol + rtol·|want| for every element, reporting the first offender.
pub fn assert_all_close(what: &str, got: &[f64], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= atol + rtol * w.abs() && g.is_finite(),
            "{what}: element {i}: got {g}, want {w} (rtol {rtol}, atol {atol})"
        );
    }
}

/// A value no correct computation produces, to fill outputs before a call.
pub const POISON: f64 = -7.777e30;

/// Whether the CUDA backend is usable here; prints a SKIPPED line naming the test when it is not.
pub fn cuda_available(test: &str) -> bool {
    match sparsegpu::backend::cuda::availability() {
        Ok(_) => true,
        Err(why) => {
            // Written to stderr directly: libtest captures eprintln! of passing tests, and a skip must show.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no usable GPU ({why})");
            false
        }
    }
}

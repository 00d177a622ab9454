//! Helpers shared by the integration tests: naive f64 references and element-wise checks.
#![allow(dead_code, clippy::too_many_arguments)]

pub mod msrep;
pub mod outcomes;
pub mod sddmm;
pub mod smat;

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

/// The library's message for the last failed call on this thread.
pub fn last_error() -> String {
    let message = sparsegpu::capi::common::sgpuGetLastErrorMessage();
    unsafe { std::ffi::CStr::from_ptr(message) }.to_string_lossy().into_owned()
}

/// A value no correct computation produces, to fill outputs before a call.
pub const POISON: f64 = -7.777e30;

/// The median wall time in milliseconds of `repeats` runs of `f`, after one run that is not counted
/// (first-use costs: modules, pools, staging buffers).
pub fn median_wall_ms(repeats: usize, f: &mut dyn FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let started = std::time::Instant::now();
            f();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Whether the CUDA backend is usable here, recorded for the run's summary ([`outcomes`]). Where it
/// is not, prints a SKIPPED line naming the test, or fails where SPARSEGPU_REQUIRE_GPU=1.
pub fn cuda_available(test: &str) -> bool {
    use outcomes::Category;
    match sparsegpu::backend::cuda::availability() {
        Ok(_) => {
            outcomes::ran(Category::Gpu, test);
            true
        }
        Err(why) => {
            assert!(!Category::Gpu.required(), "SPARSEGPU_REQUIRE_GPU=1 but {test} has no usable GPU: {why}");
            let reason = format!("no usable GPU ({why})");
            outcomes::skipped(Category::Gpu, test, &reason);
            // Written to stderr directly: libtest captures eprintln! of passing tests, and a skip must show.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
            false
        }
    }
}

/// The element types with a spamm gemm, and the C entry point for each: spamm?gemm, or spammGemmEx
/// for bf16, which has no typed entry point (f16 and bf16 data travel as their bit patterns).
pub trait SpammGemm: sparsegpu::scalar::Element {
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        h: sparsegpu::capi::spamm::spammHandle_t,
        ta: i32,
        tb: i32,
        m: i32,
        n: i32,
        k: i32,
        alpha: *const Self::Compute,
        a: *const Self,
        lda: i32,
        b: *const Self,
        ldb: i32,
        beta: *const Self::Compute,
        c: *mut Self,
        ldc: i32,
        tau: f64,
    ) -> i32;

    /// The product through the entry point of its τ rule: spamm?gemm for a given τ,
    /// spammGemmAtValidRatio or spammGemmWithinErrorBound for a searched one. Returns the status and
    /// the τ the call wrote (the given τ itself for spamm?gemm; −5 when a tuned call left it).
    ///
    /// # Safety
    /// As the C entry points: the pointers hold A, B and C of the stated shapes.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_by_rule(
        h: sparsegpu::capi::spamm::spammHandle_t,
        (ta, tb): (i32, i32),
        (m, n, k): (i32, i32, i32),
        alpha: &Self::Compute,
        (a, lda): (*const Self, i32),
        (b, ldb): (*const Self, i32),
        beta: &Self::Compute,
        (c, ldc): (*mut Self, i32),
        rule: sparsegpu::spamm::TauRule,
    ) -> (i32, f64) {
        use sparsegpu::capi::spamm::{spammGemmAtValidRatio, spammGemmWithinErrorBound};
        use sparsegpu::spamm::TauRule;
        use std::ffi::c_void;
        let mut tau = -5.0;
        let (vt, av, bv, cv) = (Self::VALUE_TYPE as i32, a as *const c_void, b as *const c_void, c as *mut c_void);
        let scalars = (alpha as *const Self::Compute as *const c_void, beta as *const Self::Compute as *const c_void);
        let status = unsafe {
            match rule {
                TauRule::Given(given) => {
                    tau = given;
                    Self::gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, given)
                }
                TauRule::ValidRatio { target, tolerance, max_iterations } => spammGemmAtValidRatio(
                    h,
                    vt,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    scalars.0,
                    av,
                    lda,
                    bv,
                    ldb,
                    scalars.1,
                    cv,
                    ldc,
                    target,
                    tolerance,
                    max_iterations as i32,
                    &mut tau,
                ),
                TauRule::ErrorBound { bound, max_iterations } => spammGemmWithinErrorBound(
                    h,
                    vt,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    scalars.0,
                    av,
                    lda,
                    bv,
                    ldb,
                    scalars.1,
                    cv,
                    ldc,
                    bound,
                    max_iterations as i32,
                    &mut tau,
                ),
            }
        };
        (status, tau)
    }
}

/// `impl SpammGemm for $t` through the C entry point `$function`; a value type after it is passed
/// first, as spammGemmEx takes it (α, β and the arrays then travel as `void` pointers).
macro_rules! spamm_gemm {
    ($t:ty, $function:ident $(, $value_type:expr)?) => {
        impl SpammGemm for $t {
            unsafe fn gemm(
                h: sparsegpu::capi::spamm::spammHandle_t,
                ta: i32,
                tb: i32,
                m: i32,
                n: i32,
                k: i32,
                alpha: *const Self::Compute,
                a: *const Self,
                lda: i32,
                b: *const Self,
                ldb: i32,
                beta: *const Self::Compute,
                c: *mut Self,
                ldc: i32,
                tau: f64,
            ) -> i32 {
                unsafe {
                    sparsegpu::capi::spamm::$function(
                        h,
                        $($value_type as i32,)?
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        alpha as _,
                        a as _,
                        lda,
                        b as _,
                        ldb,
                        beta as _,
                        c as _,
                        ldc,
                        tau,
                    )
                }
            }
        }
    };
}

spamm_gemm!(f32, spammSgemm);
spamm_gemm!(f64, spammDgemm);
spamm_gemm!(half::f16, spammHgemm);
spamm_gemm!(half::bf16, spammGemmEx, sparsegpu::ValueType::Bf16);

//! The wording of argument errors through the C API: floats in their shortest exact form (τ =
//! −1e-300 reads "-1e-300", not a 372-character decimal), leading dimensions against the BLAS rule
//! ld ≥ max(1, rows) (or columns, row-major), and every message in the shape "argument NAME = VALUE
//! must …" in every family.

use sparsegpu::capi::sddmm::*;
use sparsegpu::capi::smat::*;
use sparsegpu::capi::spamm::*;
use sparsegpu::{Layout, Status, ValueType};
use std::ffi::{CStr, c_void};
use std::ptr::null_mut;

const OK: i32 = Status::Success as i32;
const F32: i32 = ValueType::F32 as i32;
const ROW_MAJOR: i32 = Layout::RowMajor as i32;
const COL_MAJOR: i32 = Layout::ColMajor as i32;
const TINY_NEGATIVE: f64 = -1e-300;

fn last_error() -> String {
    unsafe { CStr::from_ptr(sparsegpu::capi::common::sgpuGetLastErrorMessage()) }.to_string_lossy().into_owned()
}

#[track_caller]
fn assert_message(status: i32, want: Status, message: &str) {
    assert_eq!((status, last_error().as_str()), (want as i32, message));
}

fn spamm_handle() -> spammHandle_t {
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, OK);
    h
}

fn as_void<T>(x: &T) -> *const c_void {
    x as *const T as *const c_void
}

#[test]
fn spamm_floats_are_shown_in_their_shortest_form() {
    let h = spamm_handle();
    let (a, mut c) = ([1.0f32; 4], [0.0f32; 4]);
    let (one, zero) = (1.0f32, 0.0f32);
    let st = unsafe {
        spammSgemm(h, 0, 0, 2, 2, 2, &one, a.as_ptr(), 2, a.as_ptr(), 2, &zero, c.as_mut_ptr(), 2, TINY_NEGATIVE)
    };
    assert_message(st, Status::InvalidValue, "spammSgemm: argument tau = -1e-300 must be a non-negative number");

    let (ap, (mut tau, mut ratio, mut bound)) = (a.as_ptr() as *const c_void, (0.0, 0.0, 0.0));
    let tune = |target: f64, tolerance: f64, tau: &mut f64, ratio: &mut f64| unsafe {
        spammTuneTau(h, F32, 0, 0, 2, 2, 2, ap, 2, ap, 2, target, tolerance, 4, tau, ratio)
    };
    assert_message(
        tune(1.5, 0.01, &mut tau, &mut ratio),
        Status::InvalidValue,
        "spammTuneTau: argument targetValidRatio = 1.5 is outside (0, 1]",
    );
    assert_message(
        tune(-2.5e-300, 0.01, &mut tau, &mut ratio),
        Status::InvalidValue,
        "spammTuneTau: argument targetValidRatio = -2.5e-300 is outside (0, 1]",
    );
    assert_message(
        tune(0.5, TINY_NEGATIVE, &mut tau, &mut ratio),
        Status::InvalidValue,
        "spammTuneTau: argument tolerance = -1e-300 must be a finite non-negative number",
    );
    let st = unsafe {
        spammTuneTauForErrorBound(
            h,
            F32,
            0,
            0,
            2,
            2,
            2,
            as_void(&one),
            ap,
            2,
            ap,
            2,
            TINY_NEGATIVE,
            4,
            &mut tau,
            &mut bound,
            &mut ratio,
        )
    };
    assert_message(
        st,
        Status::InvalidValue,
        "spammTuneTauForErrorBound: argument errorBound = -1e-300 must be a non-negative number",
    );
    let infinite = f32::INFINITY;
    let st = unsafe {
        spammTuneTauForErrorBound(
            h,
            F32,
            0,
            0,
            2,
            2,
            2,
            as_void(&infinite),
            ap,
            2,
            ap,
            2,
            1.0,
            4,
            &mut tau,
            &mut bound,
            &mut ratio,
        )
    };
    assert_message(st, Status::InvalidValue, "spammTuneTauForErrorBound: argument alpha = inf must be finite");
    let cp = c.as_mut_ptr() as *mut c_void;
    let st = unsafe {
        spammGemmWithinErrorBound(
            h,
            F32,
            0,
            0,
            2,
            2,
            2,
            as_void(&one),
            ap,
            2,
            ap,
            2,
            as_void(&zero),
            cp,
            2,
            TINY_NEGATIVE,
            4,
            &mut tau,
        )
    };
    assert_message(
        st,
        Status::InvalidValue,
        "spammGemmWithinErrorBound: argument errorBound = -1e-300 must be a non-negative number",
    );
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

#[test]
fn thresholds_are_shown_once_and_in_their_shortest_form() {
    let mut smat = null_mut();
    assert_eq!(unsafe { smatCreate(&mut smat) }, OK);
    assert_message(
        unsafe { smatSetJaccardThreshold(smat, TINY_NEGATIVE) },
        Status::InvalidValue,
        "smatSetJaccardThreshold: argument threshold = -1e-300 is outside (0, 1]",
    );
    assert_eq!(unsafe { smatDestroy(smat) }, OK);
    let mut sddmm = null_mut();
    assert_eq!(unsafe { sddmmCreate(&mut sddmm) }, OK);
    assert_message(
        unsafe { sddmmSetDensityThreshold(sddmm, TINY_NEGATIVE) },
        Status::InvalidValue,
        "sddmmSetDensityThreshold: argument threshold = -1e-300 must be a number >= 0",
    );
    assert_message(
        unsafe { sddmmSetDensityThreshold(sddmm, f64::NAN) },
        Status::InvalidValue,
        "sddmmSetDensityThreshold: argument threshold = NaN must be a number >= 0",
    );
    assert_eq!(unsafe { sddmmDestroy(sddmm) }, OK);
}

#[test]
fn leading_dimensions_are_held_to_max_of_one_and_the_rows() {
    // m = 0: C has no rows, and ldc must still be at least 1.
    let h = spamm_handle();
    let (a, mut c) = ([1.0f32; 4], [0.0f32; 4]);
    let (one, zero) = (1.0f32, 0.0f32);
    let st = unsafe { spammSgemm(h, 0, 0, 0, 2, 2, &one, a.as_ptr(), 1, a.as_ptr(), 2, &zero, c.as_mut_ptr(), 0, 0.0) };
    assert_message(st, Status::InvalidSize, "spammSgemm: argument ldc = 0 must be at least max(1, rows of C) = 1");
    let st = unsafe { spammSgemm(h, 0, 0, 2, 2, 2, &one, a.as_ptr(), 1, a.as_ptr(), 2, &zero, c.as_mut_ptr(), 2, 0.0) };
    assert_message(st, Status::InvalidSize, "spammSgemm: argument lda = 1 must be at least max(1, rows of A) = 2");
    assert_eq!(unsafe { spammDestroy(h) }, OK);

    // SMaT: a 2×2 matrix times B (2×3), row-major and column-major.
    let mut smat = null_mut();
    assert_eq!(unsafe { smatCreate(&mut smat) }, OK);
    let (row_ptr, col_ind, values) = ([0, 1, 2], [0, 1], [1.0f32, 2.0]);
    let mut m = null_mut();
    let vp = values.as_ptr() as *const c_void;
    let st = unsafe { smatCreateCsr(smat, &mut m, 2, 2, 2, row_ptr.as_ptr(), col_ind.as_ptr(), vp, F32, 0) };
    assert_eq!(st, OK, "{}", last_error());
    let (b, mut c) = ([1.0f32; 6], [0.0f32; 6]);
    let (bp, cp) = (b.as_ptr() as *const c_void, c.as_mut_ptr() as *mut c_void);
    let spmm = |ldb: i32, ldc: i32, layout: i32| unsafe {
        smatSpMM(smat, m, 3, as_void(&one), bp, ldb, as_void(&zero), cp, ldc, layout)
    };
    assert_message(
        spmm(2, 3, ROW_MAJOR),
        Status::InvalidSize,
        "smatSpMM: argument ldb = 2 must be at least max(1, columns of B) = 3",
    );
    assert_message(
        spmm(2, 1, COL_MAJOR),
        Status::InvalidSize,
        "smatSpMM: argument ldc = 1 must be at least max(1, rows of C) = 2",
    );
    assert_eq!(unsafe { smatDestroyMatrix(m) }, OK);
    assert_eq!(unsafe { smatDestroy(smat) }, OK);

    // SDDMM: A is m × k = 2 × 3 row-major, so lda ≥ 3.
    let mut sddmm = null_mut();
    assert_eq!(unsafe { sddmmCreate(&mut sddmm) }, OK);
    let mut out = [0.0f32; 2];
    let st = unsafe {
        sddmmDynamic(
            sddmm,
            2,
            2,
            3,
            as_void(&one),
            bp,
            2,
            bp,
            3,
            ROW_MAJOR,
            2,
            row_ptr.as_ptr(),
            col_ind.as_ptr(),
            std::ptr::null(),
            0,
            F32,
            out.as_mut_ptr() as *mut c_void,
        )
    };
    assert_message(st, Status::InvalidSize, "sddmmDynamic: argument lda = 2 must be at least max(1, columns of A) = 3");
    assert_eq!(unsafe { sddmmDestroy(sddmm) }, OK);
}

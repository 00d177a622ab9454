//! Every family refuses an output that overlaps an input it reads, with one status
//! (SGPU_STATUS_INVALID_POINTER) and one message shape naming both arguments, before anything is
//! written: SpAMM's C against A and B, SMaT's C against B, MSREP's y against x, SDDMM's out against A,
//! B, sValues (and rowPtr, colInd for sddmmDynamic). The check runs before the backend is chosen, so
//! it holds on both backends.

use sparsegpu::capi::msrep::*;
use sparsegpu::capi::sddmm::*;
use sparsegpu::capi::smat::*;
use sparsegpu::capi::spamm::*;
use sparsegpu::{Layout, Status, ValueType};
use std::ffi::{CStr, c_void};
use std::ptr::{null, null_mut};

const OK: i32 = Status::Success as i32;
const F32: i32 = ValueType::F32 as i32;
const ROW_MAJOR: i32 = Layout::RowMajor as i32;

fn last_error() -> String {
    unsafe { CStr::from_ptr(sparsegpu::capi::common::sgpuGetLastErrorMessage()) }.to_string_lossy().into_owned()
}

#[track_caller]
fn assert_overlap(status: i32, function: &str, output: &str, input: &str) {
    let message = last_error();
    assert_eq!(status, Status::InvalidPointer as i32, "{function}: status {status}, message: {message}");
    assert_eq!(
        message,
        format!("{function}: argument {output} overlaps argument {input}: {output} is written while {input} is read")
    );
}

fn f32s(x: &[f32]) -> *const c_void {
    x.as_ptr() as *const c_void
}

#[test]
fn spamm_c_overlapping_a_or_b_is_refused() {
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, OK);
    // 4×4 products; one buffer holds C and, shifted by two elements, the input.
    let (one, zero) = (1.0f32, 0.0f32);
    let other = vec![1.0f32; 16];
    let mut shared = vec![2.0f32; 18];
    let base = shared.as_mut_ptr();
    let (input, c) = (base as *const f32, unsafe { base.add(2) });
    let a_overlaps = unsafe { spammSgemm(h, 0, 0, 4, 4, 4, &one, input, 4, other.as_ptr(), 4, &zero, c, 4, 0.0) };
    assert_overlap(a_overlaps, "spammSgemm", "C", "A");
    let b_overlaps = unsafe { spammSgemm(h, 0, 0, 4, 4, 4, &one, other.as_ptr(), 4, input, 4, &zero, c, 4, 0.0) };
    assert_overlap(b_overlaps, "spammSgemm", "C", "B");
    let (one_ptr, zero_ptr) = (&one as *const f32 as *const c_void, &zero as *const f32 as *const c_void);
    let ex = unsafe {
        spammGemmEx(h, F32, 0, 0, 4, 4, 4, one_ptr, f32s(&other), 4, input.cast(), 4, zero_ptr, c.cast(), 4, 0.0)
    };
    assert_overlap(ex, "spammGemmEx", "C", "B");
    assert_eq!(&shared[2..], &[2.0; 16], "a refused product wrote C");
    // Adjacent arrays do not overlap: C is elements 14 and 15, A and B start at 16.
    let (left, right) = shared.split_at_mut(16);
    let (input, c) = (right.as_ptr(), left[14..].as_mut_ptr());
    let st = unsafe { spammSgemm(h, 0, 0, 1, 2, 1, &one, input, 1, input, 1, &zero, c, 1, 0.0) };
    assert_eq!(st, OK, "{}", last_error());
    assert_eq!(&shared[14..16], &[4.0, 4.0]);
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

#[test]
fn smat_c_overlapping_b_is_refused() {
    let mut h = null_mut();
    assert_eq!(unsafe { smatCreate(&mut h) }, OK);
    let (row_ptr, col_ind, values) = ([0, 1, 2], [0, 1], [1.0f32, 2.0]);
    let mut a = null_mut();
    let st = unsafe { smatCreateCsr(h, &mut a, 2, 2, 2, row_ptr.as_ptr(), col_ind.as_ptr(), f32s(&values), F32, 0) };
    assert_eq!(st, OK, "{}", last_error());
    let (one, zero) = (1.0f32, 0.0f32);
    let (one, zero) = (&one as *const f32 as *const c_void, &zero as *const f32 as *const c_void);
    // B (2×2) at element 1 of C's 2×2 buffer, row-major.
    let mut shared = [3.0f32; 5];
    let base = shared.as_mut_ptr();
    let st =
        unsafe { smatSpMM(h, a, 2, one, base.add(1) as *const c_void, 2, zero, base as *mut c_void, 2, ROW_MAJOR) };
    assert_overlap(st, "smatSpMM", "C", "B");
    assert_eq!(shared, [3.0; 5], "a refused product wrote C");
    assert_eq!(unsafe { smatDestroyMatrix(a) }, OK);
    assert_eq!(unsafe { smatDestroy(h) }, OK);
}

#[test]
fn msrep_y_overlapping_x_is_refused() {
    let mut h = null_mut();
    assert_eq!(unsafe { msrepCreate(&mut h) }, OK);
    let (row_ptr, col_ind, values) = ([0, 1, 2], [0, 1], [1.0f32, 2.0]);
    let mut a = null_mut();
    let st =
        unsafe { msrepCreateCsr(h, &mut a, 2, 2, 2, row_ptr.as_ptr(), col_ind.as_ptr(), f32s(&values), F32, 0, 1) };
    assert_eq!(st, OK, "{}", last_error());
    let (one, zero) = (1.0f32, 0.0f32);
    let (one, zero) = (&one as *const f32 as *const c_void, &zero as *const f32 as *const c_void);
    let mut shared = [3.0f32; 3];
    let base = shared.as_mut_ptr();
    let st = unsafe { msrepSpMV(h, a, one, base as *const c_void, zero, base.add(1) as *mut c_void) };
    assert_overlap(st, "msrepSpMV", "y", "x");
    assert_eq!(shared, [3.0; 3], "a refused SpMV wrote y");
    assert_eq!(unsafe { msrepDestroyMatrix(a) }, OK);
    assert_eq!(unsafe { msrepDestroy(h) }, OK);
}

/// A 2×2 S with both diagonal entries, k = 2, row-major: A and B hold 4 values, sValues and out 2.
struct Sddmm {
    h: sddmmHandle_t,
    row_ptr: [i32; 3],
    col_ind: [i32; 2],
    a: [f32; 4],
    b: [f32; 4],
    s: [f32; 2],
}

impl Sddmm {
    fn new() -> Sddmm {
        let mut h = null_mut();
        assert_eq!(unsafe { sddmmCreate(&mut h) }, OK);
        Sddmm { h, row_ptr: [0, 1, 2], col_ind: [0, 1], a: [1.0; 4], b: [2.0; 4], s: [3.0; 2] }
    }

    /// sddmmDynamic with the given arrays (NULL: this problem's own).
    unsafe fn dynamic(&self, arrays: [*const c_void; 5], out: *mut f32) -> i32 {
        let pick = |given: *const c_void, own: *const c_void| if given.is_null() { own } else { given };
        let alpha = 1.0f32;
        let a = pick(arrays[0], f32s(&self.a));
        let b = pick(arrays[1], f32s(&self.b));
        let s = pick(arrays[2], f32s(&self.s));
        let row_ptr = pick(arrays[3], self.row_ptr.as_ptr().cast()) as *const i32;
        let col_ind = pick(arrays[4], self.col_ind.as_ptr().cast()) as *const i32;
        let alpha = &alpha as *const f32 as *const c_void;
        unsafe {
            sddmmDynamic(self.h, 2, 2, 2, alpha, a, 2, b, 2, ROW_MAJOR, 2, row_ptr, col_ind, s, 0, F32, out.cast())
        }
    }
}

impl Drop for Sddmm {
    fn drop(&mut self) {
        unsafe { sddmmDestroy(self.h) };
    }
}

#[test]
fn sddmm_dynamic_out_overlapping_an_input_is_refused() {
    let p = Sddmm::new();
    // Each input, copied to the front of a buffer whose last two elements are `out`.
    let inputs: [(&str, &[f32]); 3] = [("A", &p.a), ("B", &p.b), ("sValues", &p.s)];
    for (k, (name, data)) in inputs.into_iter().enumerate() {
        let mut shared = vec![0.0f32; data.len()];
        shared.copy_from_slice(data);
        let out = unsafe { shared.as_mut_ptr().add(data.len() - 2) };
        let mut arrays = [null(); 5];
        arrays[k] = shared.as_ptr() as *const c_void;
        assert_overlap(unsafe { p.dynamic(arrays, out) }, "sddmmDynamic", "out", name);
        assert_eq!(shared, data, "a refused SDDMM wrote out");
    }
    // The pattern: out's two floats are colInd's two ints, or rowPtr's last two.
    let mut col_ind = p.col_ind;
    let out = col_ind.as_mut_ptr() as *mut f32;
    assert_overlap(
        unsafe { p.dynamic([null(), null(), null(), null(), out as *const c_void], out) },
        "sddmmDynamic",
        "out",
        "colInd",
    );
    assert_eq!(col_ind, [0, 1]);
    let mut row_ptr = p.row_ptr;
    let out = unsafe { row_ptr.as_mut_ptr().add(1) } as *mut f32;
    let arrays = [null(), null(), null(), row_ptr.as_ptr() as *const c_void, null()];
    assert_overlap(unsafe { p.dynamic(arrays, out) }, "sddmmDynamic", "out", "rowPtr");
    assert_eq!(row_ptr, [0, 1, 2]);
    // Apart, the same call succeeds: out = α·S·⟨A_i, B_j⟩ = 3·(2 + 2).
    let mut out = [0.0f32; 2];
    assert_eq!(unsafe { p.dynamic([null(); 5], out.as_mut_ptr()) }, OK, "{}", last_error());
    assert_eq!(out, [12.0, 12.0]);
}

#[test]
fn sddmm_execute_plan_out_overlapping_an_input_is_refused() {
    let p = Sddmm::new();
    let mut plan = null_mut();
    let st = unsafe { sddmmCreatePlan(p.h, &mut plan, 2, 2, 2, p.row_ptr.as_ptr(), p.col_ind.as_ptr(), 0) };
    assert_eq!(st, OK, "{}", last_error());
    let alpha = 1.0f32;
    let alpha = &alpha as *const f32 as *const c_void;
    let inputs: [(&str, &[f32]); 3] = [("A", &p.a), ("B", &p.b), ("sValues", &p.s)];
    for (k, (name, data)) in inputs.into_iter().enumerate() {
        let mut shared = data.to_vec();
        let out = unsafe { shared.as_mut_ptr().add(data.len() - 2) } as *mut c_void;
        let mut arrays = [f32s(&p.a), f32s(&p.b), f32s(&p.s)];
        arrays[k] = shared.as_ptr() as *const c_void;
        let st = unsafe {
            sddmmExecutePlan(p.h, plan, 2, alpha, arrays[0], 2, arrays[1], 2, ROW_MAJOR, arrays[2], F32, out)
        };
        assert_overlap(st, "sddmmExecutePlan", "out", name);
        assert_eq!(shared, data, "a refused SDDMM wrote out");
    }
    assert_eq!(unsafe { sddmmDestroyPlan(plan) }, OK);
}

//! `sddmm*`: sampled dense-dense matrix multiplication (GPU-Dynamic).

use super::{
    ArrayBytes, FamilyHandle, ObjectKind, Registry, boundary, check_array, check_no_overlap, check_ptr, enum_arg,
    for_value_type, handle_create, handle_destroy, handle_get_backend, handle_get_stream, handle_set_backend,
    handle_set_stream, out_arg, scalar_arg, sgpuBackend_t, sgpuIndexBase_t, sgpuLayout_t, sgpuStatus_t,
    sgpuValueType_t, size_arg,
};
use crate::dense::required_len;
use crate::error::{Error, Result};
use crate::handle::HandleCore;
use crate::sddmm::{PatternShape, RawFactor, RawOperands, SddmmElement, SddmmHandle, SddmmPlan, Structure};
use crate::sparse::{CSR_NAMES, CompressedRef, StructureFault};
use crate::types::{IndexBase, Layout, ValueType};
use std::borrow::Cow;
use std::ffi::c_void;
use std::os::raw::c_int;

/// An SDDMM handle (`sddmmContext*`): backend, stream and algorithm policy.
pub type sddmmHandle_t = *mut SddmmHandle;
/// A preprocessed sparsity pattern (`sddmmPlan*`), reusable by any SDDMM handle.
pub type sddmmPlan_t = *mut SddmmPlan;
/// `sddmmAlgorithm_t`: an `sddmmAlgorithm` value passed as `int`.
pub type sddmmAlgorithm_t = c_int;
/// `sddmmMathMode_t`: an `sddmmMathMode` value passed as `int`.
pub type sddmmMathMode_t = c_int;

static HANDLES: Registry<SddmmHandle> = Registry::new(ObjectKind::SddmmHandle);
static PLANS: Registry<SddmmPlan> = Registry::new(ObjectKind::SddmmPlan);

impl FamilyHandle for SddmmHandle {
    fn registry() -> &'static Registry<Self> {
        &HANDLES
    }
    fn create() -> Result<Self> {
        SddmmHandle::new()
    }
    fn core(&mut self) -> &mut HandleCore {
        &mut self.core
    }
    fn settle(&mut self) {
        self.settle();
    }
}

/// Creates an SDDMM handle on the backend `SPARSEGPU_BACKEND` names (auto when unset), algorithm
/// AUTO, density threshold 1 (SDDMM_DEFAULT_DENSITY_THRESHOLD). Destroy it with sddmmDestroy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmCreate(handle: *mut sddmmHandle_t) -> sgpuStatus_t {
    unsafe { handle_create("sddmmCreate", handle) }
}

/// Destroys an SDDMM handle; NULL is accepted and does nothing. Plans stay valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmDestroy(handle: sddmmHandle_t) -> sgpuStatus_t {
    unsafe { handle_destroy("sddmmDestroy", handle) }
}

/// Sets the `cudaStream_t` the handle's GPU work is ordered on (NULL: the default stream).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmSetStream(handle: sddmmHandle_t, stream: *mut c_void) -> sgpuStatus_t {
    unsafe { handle_set_stream("sddmmSetStream", handle, stream) }
}

/// Writes the handle's stream to `*stream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmGetStream(handle: sddmmHandle_t, stream: *mut *mut c_void) -> sgpuStatus_t {
    unsafe { handle_get_stream("sddmmGetStream", handle, stream) }
}

/// Selects the backend (SGPU_BACKEND_AUTO / _CUDA / _CPU). An explicit CUDA request where CUDA is
/// unusable fails with SGPU_STATUS_BACKEND_UNAVAILABLE and leaves the handle unchanged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmSetBackend(handle: sddmmHandle_t, backend: sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_set_backend("sddmmSetBackend", handle, backend) }
}

/// Writes the backend the handle executes on (never AUTO) to `*backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmGetBackend(handle: sddmmHandle_t, backend: *mut sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_get_backend("sddmmGetBackend", handle, backend) }
}

/// Forces an algorithm for the handle's later calls: SDDMM_ALGORITHM_TILED (GPU-Shared),
/// SDDMM_ALGORITHM_COO (GPU-Convert), or SDDMM_ALGORITHM_AUTO (the default: TILED when
/// nnz / (m·n) > the density threshold, or on a CUDA handle through a plan where its tiled kernels
/// measured the faster: where the rows are sorted by column and its tiles holding entries are full
/// enough to compute densely (128 × 128 on tensor cores for f16 / bf16 and for f32 in a TF32 math
/// mode, 16 × 16 on CUDA cores for every type); also where rows are short and even and a band's
/// rows of A fit shared memory
/// (docs/methods.md); COO otherwise).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmSetAlgorithm(handle: sddmmHandle_t, algorithm: sddmmAlgorithm_t) -> sgpuStatus_t {
    boundary("sddmmSetAlgorithm", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        h.set_algorithm(enum_arg(algorithm, "algorithm")?);
        Ok(())
    })
}

/// Sets the density nnz / (m·n) above which AUTO picks TILED (strictly above; default 1, so that
/// AUTO picks COO, measured the faster at every density tried: docs/methods.md; the paper's switch
/// point was 1e-4). Any number >= 0 is accepted, +infinity meaning never TILED; negative or NaN is
/// SGPU_STATUS_INVALID_VALUE.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmSetDensityThreshold(handle: sddmmHandle_t, threshold: f64) -> sgpuStatus_t {
    boundary("sddmmSetDensityThreshold", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        h.set_density_threshold(threshold)
    })
}

/// Sets how the handle's f32 calls multiply (`sddmmMathMode`), as cublasSetMathMode:
/// SDDMM_MATH_MODE_DEFAULT (exact FP32, the default), SDDMM_MATH_MODE_TF32X3 (3xTF32: close to FP32
/// accuracy) or SDDMM_MATH_MODE_TF32 (A and B rounded to TF32, 10-bit mantissas, products summed in
/// FP32). The TF32 modes allow that arithmetic rather than require it: a CUDA handle uses it on
/// tensor cores through a plan whose rows are sorted by column, A and B row-major with K, the
/// leading dimensions and the base addresses multiples of 16 bytes, where its tiles are the faster
/// (or wherever the plan has them with SDDMM_ALGORITHM_TILED), and is exact FP32 elsewhere; a CPU
/// handle computes every product in the mode. f64, f16 and bf16 calls ignore it. Another value:
/// SGPU_STATUS_INVALID_VALUE, handle unchanged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmSetMathMode(handle: sddmmHandle_t, mode: sddmmMathMode_t) -> sgpuStatus_t {
    boundary("sddmmSetMathMode", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        h.set_math_mode(enum_arg(mode, "mode")?);
        Ok(())
    })
}

/// Writes the handle's math mode to `*mode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmGetMathMode(handle: sddmmHandle_t, mode: *mut sddmmMathMode_t) -> sgpuStatus_t {
    boundary("sddmmGetMathMode", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        *unsafe { out_arg(mode, "mode") }? = h.math_mode() as c_int;
        Ok(())
    })
}

/// Writes the algorithm the handle's last successful sddmmDynamic / sddmmExecutePlan ran
/// (SDDMM_ALGORITHM_TILED or SDDMM_ALGORITHM_COO) to `*algorithm`. Before any such call:
/// SGPU_STATUS_INVALID_VALUE.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmGetLastAlgorithm(
    handle: sddmmHandle_t,
    algorithm: *mut sddmmAlgorithm_t,
) -> sgpuStatus_t {
    boundary("sddmmGetLastAlgorithm", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        let out = unsafe { out_arg(algorithm, "algorithm") }?;
        let last = h.last_algorithm().ok_or_else(|| {
            Error::invalid_value("no SDDMM has run on this handle yet, so there is no last algorithm")
        })?;
        *out = last as c_int;
        Ok(())
    })
}

/// An int array of the caller's as a host slice: borrowed when it is host memory; copied from the
/// device (waiting for the handle's stream) when a CUDA handle was given device memory, since the
/// structure of S is validated on the host before anything runs: for plans, and for sddmmDynamic
/// unless the backend validates the arrays where they lie (`SddmmHandle::validates_in_place`).
unsafe fn caller_ints<'a>(handle: &SddmmHandle, ptr: *const c_int, len: usize, name: &str) -> Result<Cow<'a, [i32]>> {
    if len == 0 {
        return Ok(Cow::Borrowed(&[]));
    }
    check_ptr(ptr, name)?;
    unsafe { handle.caller_indices(ptr, len, name) }
}

/// rowPtr and colInd as host slices.
type PatternArrays<'a> = (Cow<'a, [i32]>, Cow<'a, [i32]>);

/// The caller's CSR pattern read to the host (see [`caller_ints`]) and validated: rowPtr's first
/// and last entries are checked against the index base and nnz before colInd is touched, so a wrong
/// nnz cannot make the validation read past the caller's colInd.
unsafe fn csr_pattern_arrays<'a>(
    handle: &SddmmHandle,
    (m, n): (usize, usize),
    row_ptr: *const c_int,
    col_ind: *const c_int,
    index_base: IndexBase,
    nnz: usize,
) -> Result<PatternArrays<'a>> {
    let row_ptr = unsafe { caller_ints(handle, row_ptr, m + 1, "rowPtr") }?;
    let fault = |fault: StructureFault| fault.error(CSR_NAMES, m, n, nnz, index_base);
    if row_ptr[0] as i64 != index_base.offset() {
        return Err(fault(StructureFault::FirstPointer { value: row_ptr[0] }));
    }
    if row_ptr[m] as i64 - index_base.offset() != nnz as i64 {
        return Err(fault(StructureFault::LastPointer { value: row_ptr[m] }));
    }
    let col_ind = unsafe { caller_ints(handle, col_ind, nnz, "colInd") }?;
    Ok((row_ptr, col_ind))
}

fn csr_pattern<'a>(
    m: usize,
    n: usize,
    arrays: &'a PatternArrays<'a>,
    index_base: IndexBase,
    units: &'a [()],
) -> Result<CompressedRef<'a, ()>> {
    CompressedRef::new(m, n, &arrays.0, &arrays.1, units, index_base, false, CSR_NAMES)
}

/// A non-negative nnz that int row pointers can express. Duplicated entries are allowed, so nnz may
/// exceed m·n.
fn nnz_arg(nnz: i64) -> Result<usize> {
    let count = size_arg(nnz, "nnz")?;
    if count > i32::MAX as usize {
        return Err(Error::invalid_size(format!("argument nnz = {nnz} exceeds the int range of rowPtr")));
    }
    Ok(count)
}

/// The dense operands and output of a compute call, checked for one value type.
struct DenseArgs {
    k: usize,
    alpha: *const c_void,
    a: *const c_void,
    lda: usize,
    b: *const c_void,
    ldb: usize,
    layout: Layout,
    s_values: *const c_void,
    out: *mut c_void,
    /// S's structure where the backend reads it (the caller's arrays, or a plan's zero-based host
    /// copy).
    row_ptr: *const c_int,
    col_ind: *const c_int,
    /// Whether `row_ptr` and `col_ind` are the caller's arguments (sddmmDynamic), which `out` must not
    /// overlap either.
    pattern_is_argument: bool,
}

/// Checks the value-typed pointers and runs the handle's SDDMM for element type `T`.
unsafe fn compute_typed<T: SddmmElement>(
    handle: &mut SddmmHandle,
    plan: Option<&SddmmPlan>,
    structure: Structure<'_>,
    args: &DenseArgs,
) -> Result<()> {
    let PatternShape { rows: m, cols: n, nnz, .. } = structure.shape();
    let a_len = required_len(m, args.k, args.lda, args.layout, "A")?;
    let b_len = required_len(n, args.k, args.ldb, args.layout, "B")?;
    let alpha = unsafe { scalar_arg(args.alpha as *const T::Compute, "alpha") }?;
    // Device or host memory: checked for size, NULL and the alignment of the element type without
    // being read, and `out` against every array the call reads.
    for (ptr, len, name) in [(args.a, a_len, "A"), (args.b, b_len, "B"), (args.out as *const c_void, nnz, "out")] {
        check_array(ptr as *const T, len, name)?;
    }
    let s_len = if args.s_values.is_null() { 0 } else { nnz };
    check_array(args.s_values as *const T, s_len, "sValues")?;
    let mut inputs = vec![
        ArrayBytes::of(args.a as *const T, a_len, "A"),
        ArrayBytes::of(args.b as *const T, b_len, "B"),
        ArrayBytes::of(args.s_values as *const T, s_len, "sValues"),
    ];
    if args.pattern_is_argument {
        inputs.push(ArrayBytes::of(args.row_ptr, m + 1, "rowPtr"));
        inputs.push(ArrayBytes::of(args.col_ind, nnz, "colInd"));
    }
    check_no_overlap(ArrayBytes::of(args.out as *const T, nnz, "out"), &inputs)?;
    let operands = RawOperands::<T> {
        k: args.k,
        alpha,
        a: RawFactor { ptr: args.a.cast(), len: a_len, ld: args.lda },
        b: RawFactor { ptr: args.b.cast(), len: b_len, ld: args.ldb },
        layout: args.layout,
        s_values: args.s_values.cast(),
        out: args.out.cast(),
        row_ptr: args.row_ptr,
        col_ind: args.col_ind,
    };
    unsafe { handle.compute(&operands, structure, plan) }
}

unsafe fn compute(
    handle: &mut SddmmHandle,
    plan: Option<&SddmmPlan>,
    structure: Structure<'_>,
    value_type: ValueType,
    args: &DenseArgs,
) -> Result<()> {
    unsafe { for_value_type!(value_type, compute_typed(handle, plan, structure, args)) }
}

/// Sampled dense-dense product with per-call algorithm choice (GPU-Dynamic): for each nonzero
/// e = (i, j) of the m×n CSR matrix S (rowPtr, colInd, sValues),
///     out[e] = alpha · S[e] · sum_p A[i][p] · B[j][p],
/// where A is m×k and B is n×k (B holds the rows of the right factor: the product sampled is A·Bᵀ),
/// both stored in `layout` with leading dimensions lda, ldb (>= k row-major, >= m resp. n
/// column-major). `out` has nnz entries in S's entry order; it is overwritten, never read (no beta).
/// sValues may be NULL: S is then a pattern and every S[e] is 1. Column indices need not be sorted
/// and may repeat (each entry gets its own output). `out` must not overlap A, B, sValues, rowPtr or
/// colInd (SGPU_STATUS_INVALID_POINTER).
///
/// valueType applies to A, B, sValues and out. SGPU_VALUE_TYPE_F32 / _F64 compute in their own precision
/// and take alpha as float / double; SGPU_VALUE_TYPE_F16 / _BF16 (uint16_t bit patterns) compute in f32
/// and take alpha as float. Every argument is checked before anything is written; rowPtr and colInd
/// are validated in full (O(nnz)). Without a plan, the chosen algorithm's preprocessing is redone on
/// each call: use sddmmCreatePlan when the pattern repeats.
///
/// On a CUDA handle, rowPtr and colInd in device memory are validated on the device, by the kernel
/// that computes with them (COO) or converts them (TILED), and never copied to the host: the call
/// returns without waiting for the stream (unless out is host memory). Nothing is read out of bounds
/// through an invalid pattern and no plausible number is left: out is filled with NaN, and the fault
/// (SGPU_STATUS_INVALID_SPARSE_MATRIX, the message naming the first bad rowPtr or colInd entry as
/// the host validation does) is reported by the call itself when out is
/// host memory (out then untouched); otherwise, once the validation has finished, by the handle's
/// next sddmmDynamic or sddmmExecutePlan (which then does nothing else), or by sddmmSynchronize,
/// which waits for it. Host-memory rowPtr and colInd are validated on the host before anything runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmDynamic(
    handle: sddmmHandle_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    lda: c_int,
    B: *const c_void,
    ldb: c_int,
    layout: sgpuLayout_t,
    nnz: i64,
    rowPtr: *const c_int,
    colInd: *const c_int,
    sValues: *const c_void,
    indexBase: sgpuIndexBase_t,
    valueType: sgpuValueType_t,
    out: *mut c_void,
) -> sgpuStatus_t {
    boundary("sddmmDynamic", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        let layout = enum_arg(layout, "layout")?;
        let index_base = enum_arg(indexBase, "indexBase")?;
        let value_type = enum_arg(valueType, "valueType")?;
        let m = size_arg(m as i64, "m")?;
        let n = size_arg(n as i64, "n")?;
        let k = size_arg(k as i64, "k")?;
        let lda = size_arg(lda as i64, "lda")?;
        let ldb = size_arg(ldb as i64, "ldb")?;
        let nnz_count = nnz_arg(nnz)?;
        let units = vec![(); nnz_count];
        let arrays;
        check_ptr(rowPtr, "rowPtr")?;
        let col_ind = if nnz_count > 0 {
            check_ptr(colInd, "colInd")?;
            Some(colInd)
        } else {
            None
        };
        let structure = if h.validates_in_place(rowPtr, col_ind) {
            Structure::InPlace(PatternShape { rows: m, cols: n, nnz: nnz_count, base: index_base })
        } else {
            arrays = unsafe { csr_pattern_arrays(h, (m, n), rowPtr, colInd, index_base, nnz_count) }?;
            Structure::Validated(csr_pattern(m, n, &arrays, index_base, &units)?)
        };
        let args = DenseArgs {
            k,
            alpha,
            a: A,
            lda,
            b: B,
            ldb,
            layout,
            s_values: sValues,
            out,
            row_ptr: rowPtr,
            col_ind: colInd,
            pattern_is_argument: true,
        };
        unsafe { compute(h, None, structure, value_type, &args) }
    })
}

/// Validates the m×n CSR pattern (rowPtr, colInd, indexBase; values are not needed) and
/// preprocesses it once for many sddmmExecutePlan calls (the paper's GPU-Preprocessing): COO row
/// indices and the nonzeros grouped by tile with the columns each tile uses. The plan copies what it
/// needs, so the caller's arrays may change or be freed afterwards. `handle` must be a live SDDMM
/// handle; the plan may be used with any. Destroy it with sddmmDestroyPlan.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmCreatePlan(
    handle: sddmmHandle_t,
    plan: *mut sddmmPlan_t,
    m: c_int,
    n: c_int,
    nnz: i64,
    rowPtr: *const c_int,
    colInd: *const c_int,
    indexBase: sgpuIndexBase_t,
) -> sgpuStatus_t {
    boundary("sddmmCreatePlan", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        let plan_out = unsafe { out_arg(plan, "plan") }?;
        let index_base = enum_arg(indexBase, "indexBase")?;
        let m = size_arg(m as i64, "m")?;
        let n = size_arg(n as i64, "n")?;
        let nnz_count = nnz_arg(nnz)?;
        let units = vec![(); nnz_count];
        let arrays = unsafe { csr_pattern_arrays(h, (m, n), rowPtr, colInd, index_base, nnz_count) }?;
        let pattern = csr_pattern(m, n, &arrays, index_base, &units)?;
        let planned = h.create_plan(&pattern)?;
        *plan_out = PLANS.register(planned)?;
        Ok(())
    })
}

/// sddmmDynamic on a planned pattern: same arguments, same algorithm choice (the handle's forced
/// algorithm, or its density rule on the plan's m, n, nnz) and same results, without re-validating
/// or re-preprocessing the pattern. sValues (NULL: all ones) and out have the plan's nnz entries; out
/// must not overlap A, B or sValues (SGPU_STATUS_INVALID_POINTER).
/// Like sddmmDynamic, it first reports an invalid device-memory pattern of an earlier call that no
/// call has reported yet (and then does nothing else).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmExecutePlan(
    handle: sddmmHandle_t,
    plan: sddmmPlan_t,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    lda: c_int,
    B: *const c_void,
    ldb: c_int,
    layout: sgpuLayout_t,
    sValues: *const c_void,
    valueType: sgpuValueType_t,
    out: *mut c_void,
) -> sgpuStatus_t {
    boundary("sddmmExecutePlan", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        let p: &SddmmPlan = unsafe { PLANS.get(plan, "plan") }?;
        let layout = enum_arg(layout, "layout")?;
        let value_type = enum_arg(valueType, "valueType")?;
        let k = size_arg(k as i64, "k")?;
        let lda = size_arg(lda as i64, "lda")?;
        let ldb = size_arg(ldb as i64, "ldb")?;
        let pattern = p.pattern();
        let args = DenseArgs {
            k,
            alpha,
            a: A,
            lda,
            b: B,
            ldb,
            layout,
            s_values: sValues,
            out,
            row_ptr: pattern.ptr.as_ptr(),
            col_ind: pattern.idx.as_ptr(),
            pattern_is_argument: false,
        };
        unsafe { compute(h, Some(p), Structure::Validated(pattern), value_type, &args) }
    })
}

/// Waits until the validations on the device of the rowPtr / colInd that earlier sddmmDynamic calls
/// on this handle passed in device memory have finished (and those calls' products; nothing else on
/// the stream is waited for), and reports the first pattern found invalid that no call has reported
/// yet: SGPU_STATUS_INVALID_SPARSE_MATRIX, the message naming that call's m, n, nnz and its first bad
/// rowPtr or colInd entry (that call's out holds NaN). SGPU_STATUS_SUCCESS when there is none, and at
/// once on the CPU backend, which validates every pattern before its call returns. A pattern not
/// reported when the handle is destroyed is not reported.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmSynchronize(handle: sddmmHandle_t) -> sgpuStatus_t {
    boundary("sddmmSynchronize", || unsafe { HANDLES.get(handle, "handle") }?.synchronize())
}

/// Destroys a plan; NULL is accepted and does nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sddmmDestroyPlan(plan: sddmmPlan_t) -> sgpuStatus_t {
    boundary("sddmmDestroyPlan", || unsafe { PLANS.destroy(plan, "plan") })
}

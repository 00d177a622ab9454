//! The SpAMM family's C API: `spamm*`.

use super::{
    ArrayBytes, FamilyHandle, ObjectKind, Registry, boundary, check_array, check_no_overlap, enum_arg, for_value_type,
    handle_create, handle_destroy, handle_get_backend, handle_get_devices, handle_get_stream, handle_set_backend,
    handle_set_devices, handle_set_stream, out_arg, scalar_arg, sgpuBackend_t, sgpuOperation_t, sgpuStatus_t,
    sgpuValueType_t, size_arg,
};
use crate::dense::{op_shape, required_len};
use crate::error::{Error, Float, Result};
use crate::handle::HandleCore;
use crate::scalar::Element;
use crate::spamm::MathMode;
use crate::spamm::{RawOperand, SpammElement, SpammHandle, TauRule};
use crate::types::{Layout, Operation, ValueType};
use half::f16;
use std::ffi::c_void;
use std::os::raw::c_int;

/// An opaque SpAMM handle (`spammContext*`): backend, stream, devices, block size and the statistics
/// of its last product. One thread uses a handle at a time.
pub type spammHandle_t = *mut SpammHandle;

static REGISTRY: Registry<SpammHandle> = Registry::new(ObjectKind::SpammHandle);

impl FamilyHandle for SpammHandle {
    fn registry() -> &'static Registry<Self> {
        &REGISTRY
    }
    fn create() -> Result<Self> {
        SpammHandle::new()
    }
    fn core(&mut self) -> &mut HandleCore {
        self.core_mut()
    }
    fn settle(&mut self) {
        self.settle();
    }
}

/// The handle object a `spammHandle_t` names, for Rust code holding one (tests, benchmarks); a value
/// that is not a live SpAMM handle is INVALID_HANDLE. Not part of the C API.
///
/// # Safety
/// As every use of a handle: one thread at a time, and not after `spammDestroy`.
pub unsafe fn spamm_handle_object<'a>(handle: spammHandle_t) -> Result<&'a mut SpammHandle> {
    unsafe { REGISTRY.get(handle, "handle") }
}

/// Statistics of the last product on a handle (`spammGetStats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct spammStats_t {
    /// performedProducts / totalProducts (1 when there are no block products).
    pub validRatio: f64,
    /// Block products A_ik·B_kj performed (norm product not below τ).
    pub performedProducts: i64,
    /// All block products: ceil(m/b)·ceil(n/b)·ceil(k/b) for block size b.
    pub totalProducts: i64,
    /// |α|·sqrt(Σ over C blocks (i,j) of (Σ over skipped k of ‖A_ik‖_F·‖B_kj‖_F)²): an upper bound of
    /// ‖C_exact − C‖_F up to rounding, where C_exact uses every block product.
    pub errorBound: f64,
    /// The τ of the product.
    pub tau: f64,
    /// The block size (LoNum) of the product.
    pub blockSize: c_int,
    /// Host time spent in the product call, in seconds. On the CUDA backend with device-memory
    /// operands the call returns once the work is queued on the handle's stream (time the GPU work
    /// with events); spammGetStats waits for the statistics, not the caller.
    pub elapsedSeconds: f64,
}

/// Creates a SpAMM handle on the backend `SPARSEGPU_BACKEND` asks for (auto when unset), block size
/// 32, device 0, the default stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammCreate(handle: *mut spammHandle_t) -> sgpuStatus_t {
    unsafe { handle_create("spammCreate", handle) }
}

/// Destroys a handle; NULL is accepted and does nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammDestroy(handle: spammHandle_t) -> sgpuStatus_t {
    unsafe { handle_destroy("spammDestroy", handle) }
}

/// Sets the `cudaStream_t` later calls run on (NULL = the default stream). The CPU backend ignores it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammSetStream(handle: spammHandle_t, stream: *mut c_void) -> sgpuStatus_t {
    unsafe { handle_set_stream("spammSetStream", handle, stream) }
}

/// Writes the handle's stream to `*stream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGetStream(handle: spammHandle_t, stream: *mut *mut c_void) -> sgpuStatus_t {
    unsafe { handle_get_stream("spammGetStream", handle, stream) }
}

/// Selects the backend (SGPU_BACKEND_AUTO / _CUDA / _CPU). An explicit CUDA request where CUDA is
/// unusable fails with SGPU_STATUS_BACKEND_UNAVAILABLE and leaves the handle unchanged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammSetBackend(handle: spammHandle_t, backend: sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_set_backend("spammSetBackend", handle, backend) }
}

/// Writes the backend the handle runs on (never SGPU_BACKEND_AUTO) to `*backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGetBackend(handle: spammHandle_t, backend: *mut sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_get_backend("spammGetBackend", handle, backend) }
}

/// Sets the block size LoNum (1 ≤ blockSize ≤ 1024, default 32): norms are taken and products skipped
/// per blockSize × blockSize block. Smaller blocks skip more precisely but cost more bookkeeping.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammSetBlockSize(handle: spammHandle_t, blockSize: c_int) -> sgpuStatus_t {
    boundary("spammSetBlockSize", || unsafe { REGISTRY.get(handle, "handle") }?.set_block_size(blockSize as i64))
}

/// Writes the handle's block size to `*blockSize`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGetBlockSize(handle: spammHandle_t, blockSize: *mut c_int) -> sgpuStatus_t {
    boundary("spammGetBlockSize", || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        *unsafe { out_arg(blockSize, "blockSize") }? = h.block_size() as c_int;
        Ok(())
    })
}

/// Sets the GPUs a product is split over by rows of C (the paper's multi-GPU scheme): `count`
/// distinct non-negative device ordinals. The CPU backend records them and ignores them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammSetDevices(handle: spammHandle_t, count: c_int, devices: *const c_int) -> sgpuStatus_t {
    unsafe { handle_set_devices("spammSetDevices", handle, count, devices) }
}

/// Writes the number of devices to `*count` and the first min(count, capacity) ordinals to `devices`.
/// Query the count with capacity 0 and devices NULL; devices may be NULL only when capacity is 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGetDevices(
    handle: spammHandle_t,
    capacity: c_int,
    count: *mut c_int,
    devices: *mut c_int,
) -> sgpuStatus_t {
    unsafe { handle_get_devices("spammGetDevices", handle, capacity, count, devices) }
}

// ---- FP32 math mode ----------------------------------------------------------------------------

/// `spammMathMode_t`: a `spammMathMode` value passed as `int`.
pub type spammMathMode_t = c_int;

/// Sets how later spammSgemm calls on this handle multiply (`spammMathMode`), as cublasSetMathMode:
/// SPAMM_MATH_MODE_DEFAULT (exact FP32 FMA) or SPAMM_MATH_MODE_TF32X3 (3xTF32 on tensor cores, close
/// to FP32 accuracy; used where LoNum is a multiple of 32, exact FP32 elsewhere). spammHgemm and
/// spammDgemm ignore the mode. Another value: SGPU_STATUS_INVALID_VALUE, handle unchanged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammSetMathMode(handle: spammHandle_t, mode: spammMathMode_t) -> sgpuStatus_t {
    boundary("spammSetMathMode", || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        h.set_math_mode(enum_arg::<MathMode>(mode, "mode")?);
        Ok(())
    })
}

/// Writes the handle's math mode to `*mode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGetMathMode(handle: spammHandle_t, mode: *mut spammMathMode_t) -> sgpuStatus_t {
    boundary("spammGetMathMode", || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        *unsafe { out_arg(mode, "mode") }? = h.math_mode() as c_int;
        Ok(())
    })
}

// ------------------------------------------------------------------------------------------------

/// Checks one stored operand and returns its description by pointer (no memory is touched: it may be
/// device memory); messages name `name` and `ld_name`.
fn raw_operand_arg<T>(
    data: *const T,
    op: Operation,
    op_rows: usize,
    op_cols: usize,
    ld: c_int,
    name: &str,
    ld_name: &str,
) -> Result<RawOperand<T>> {
    let ld = size_arg(ld as i64, ld_name)?;
    let (stored_rows, stored_cols) = op_shape(op, op_rows, op_cols);
    let len = required_len(stored_rows, stored_cols, ld, Layout::ColMajor, name)?;
    check_array(data, len, name)?;
    Ok(RawOperand { ptr: data, len, op, stored_rows, stored_cols, ld })
}

/// The shared body of the three gemm entry points.
unsafe fn gemm_c<T: SpammElement>(
    function: &str,
    handle: spammHandle_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const T::Compute,
    a: *const T,
    lda: c_int,
    b: *const T,
    ldb: c_int,
    beta: *const T::Compute,
    c: *mut T,
    ldc: c_int,
    tau: f64,
) -> sgpuStatus_t {
    boundary(function, || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        let ops = (enum_arg(transa, "transa")?, enum_arg(transb, "transb")?);
        let dims = (size_arg(m as i64, "m")?, size_arg(n as i64, "n")?, size_arg(k as i64, "k")?);
        unsafe { run_gemm(h, ops, dims, (alpha, beta), (a, lda), (b, ldb), (c, ldc), TauRule::Given(tau)) }.map(|_| ())
    })
}

/// Checks the rest of a product's arguments (α, β, the τ rule, A, B, C and their overlap) and runs
/// it; returns the τ used.
#[allow(clippy::too_many_arguments)]
unsafe fn run_gemm<T: SpammElement>(
    h: &mut SpammHandle,
    (op_a, op_b): (Operation, Operation),
    (m, n, k): (usize, usize, usize),
    (alpha, beta): (*const T::Compute, *const T::Compute),
    (a, lda): (*const T, c_int),
    (b, ldb): (*const T, c_int),
    (c, ldc): (*mut T, c_int),
    tau: TauRule,
) -> Result<f64> {
    let alpha = unsafe { scalar_arg(alpha, "alpha") }?;
    let beta = unsafe { scalar_arg(beta, "beta") }?;
    tau.check(alpha.to_f64().abs())?;
    let a = raw_operand_arg(a, op_a, m, k, lda, "A", "lda")?;
    let b = raw_operand_arg(b, op_b, k, n, ldb, "B", "ldb")?;
    let ldc = size_arg(ldc as i64, "ldc")?;
    let c_len = required_len(m, n, ldc, Layout::ColMajor, "C")?;
    check_array(c as *const T, c_len, "C")?;
    let inputs = [ArrayBytes::of(a.ptr, a.len, "A"), ArrayBytes::of(b.ptr, b.len, "B")];
    check_no_overlap(ArrayBytes::of(c as *const T, c_len, "C"), &inputs)?;
    // Host or device memory (the backend knows which it takes): never made into Rust slices here.
    unsafe { h.gemm(&a, &b, alpha, beta, c, c_len, ldc, tau) }
}

/// SpAMM in single precision: C = α·op(A)·op(B) + β·C, column-major as BLAS sgemm, where the block
/// product op(A)_ik·op(B)_kj (blocks of the handle's block size) is skipped when
/// ‖op(A)_ik‖_F·‖op(B)_kj‖_F < tau. tau = 0 performs every product and equals sgemm; a block holding
/// NaN or ±∞ is never skipped, so they reach C as through sgemm at every tau; tau < 0 or NaN is
/// SGPU_STATUS_INVALID_VALUE. op(A) is m×k, op(B) k×n; transa/transb are sgpuOperation_t values;
/// lda ≥ max(1, rows of A as stored), likewise ldb, ldc ≥ max(1, m). beta = 0 never reads C. C must
/// not overlap A or B (SGPU_STATUS_INVALID_POINTER). Statistics of the call are kept on the handle
/// (spammGetStats). The handle's math mode (spammSetMathMode) chooses exact FP32 or 3xTF32
/// arithmetic.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammSgemm(
    handle: spammHandle_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    A: *const f32,
    lda: c_int,
    B: *const f32,
    ldb: c_int,
    beta: *const f32,
    C: *mut f32,
    ldc: c_int,
    tau: f64,
) -> sgpuStatus_t {
    unsafe { gemm_c("spammSgemm", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tau) }
}

/// SpAMM in double precision: as spammSgemm with double data and scalars.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammDgemm(
    handle: spammHandle_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f64,
    A: *const f64,
    lda: c_int,
    B: *const f64,
    ldb: c_int,
    beta: *const f64,
    C: *mut f64,
    ldc: c_int,
    tau: f64,
) -> sgpuStatus_t {
    unsafe { gemm_c("spammDgemm", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tau) }
}

/// SpAMM in half precision: as spammSgemm with A, B, C as IEEE binary16 bit patterns (uint16_t,
/// __half, _Float16). Products accumulate in FP32 and alpha, beta are float, as cublasGemmEx with
/// CUBLAS_COMPUTE_32F: tensor cores accumulate in FP32, and an FP16 alpha would round scale factors
/// such as 1/3 or 1e-4 before they are applied. Block norms are taken from the FP16 values in FP64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammHgemm(
    handle: spammHandle_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    A: *const u16,
    lda: c_int,
    B: *const u16,
    ldb: c_int,
    beta: *const f32,
    C: *mut u16,
    ldc: c_int,
    tau: f64,
) -> sgpuStatus_t {
    // half::f16 is repr(transparent) over u16, so the bit patterns are read in place.
    let (a, b, c) = (A as *const f16, B as *const f16, C as *mut f16);
    unsafe { gemm_c("spammHgemm", handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, tau) }
}

/// Writes the statistics of the handle's last successful product to `*stats`. Before any product:
/// SGPU_STATUS_INVALID_VALUE.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGetStats(handle: spammHandle_t, stats: *mut spammStats_t) -> sgpuStatus_t {
    boundary("spammGetStats", || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        let out = unsafe { out_arg(stats, "stats") }?;
        let s = h.last_stats()?;
        *out = spammStats_t {
            validRatio: s.valid_ratio,
            performedProducts: s.performed_products as i64,
            totalProducts: s.total_products as i64,
            errorBound: s.error_bound,
            tau: s.tau,
            blockSize: s.block_size as c_int,
            elapsedSeconds: s.elapsed_seconds,
        };
        Ok(())
    })
}

/// The arguments both τ searches check alike, in the same order: the value type, the transposes, the
/// dimensions and the iteration budget (at least 1).
#[allow(clippy::type_complexity)]
fn tune_args(
    value_type: sgpuValueType_t,
    (transa, transb): (sgpuOperation_t, sgpuOperation_t),
    (m, n, k): (c_int, c_int, c_int),
    max_iterations: c_int,
) -> Result<(ValueType, (Operation, Operation), (usize, usize, usize), usize)> {
    let value_type: ValueType = enum_arg(value_type, "valueType")?;
    let ops = (enum_arg(transa, "transa")?, enum_arg(transb, "transb")?);
    let dims = (size_arg(m as i64, "m")?, size_arg(n as i64, "n")?, size_arg(k as i64, "k")?);
    if max_iterations < 1 {
        return Err(Error::invalid_value(format!("argument maxIterations = {max_iterations} must be at least 1")));
    }
    Ok((value_type, ops, dims, max_iterations as usize))
}

unsafe fn tune_c<T: SpammElement>(
    h: &mut SpammHandle,
    ops: (Operation, Operation),
    (m, n, k): (usize, usize, usize),
    a: *const c_void,
    lda: c_int,
    b: *const c_void,
    ldb: c_int,
    (target, tolerance, max_iterations): (f64, f64, usize),
) -> Result<(f64, f64)> {
    let a = raw_operand_arg(a as *const T, ops.0, m, k, lda, "A", "lda")?;
    let b = raw_operand_arg(b as *const T, ops.1, k, n, ldb, "B", "ldb")?;
    let choice = unsafe { h.tune_tau(&a, &b, target, tolerance, max_iterations) }?;
    Ok((choice.tau, choice.valid_ratio))
}

/// The body of spammTuneTauForErrorBound for one element type: (τ, bound, valid ratio).
#[allow(clippy::too_many_arguments)]
unsafe fn tune_bound_c<T: SpammElement>(
    h: &mut SpammHandle,
    ops: (Operation, Operation),
    (m, n, k): (usize, usize, usize),
    alpha: *const c_void,
    a: *const c_void,
    lda: c_int,
    b: *const c_void,
    ldb: c_int,
    (error_bound, max_iterations): (f64, usize),
) -> Result<(f64, f64, f64)> {
    let alpha = unsafe { scalar_arg(alpha as *const T::Compute, "alpha") }?;
    let a = raw_operand_arg(a as *const T, ops.0, m, k, lda, "A", "lda")?;
    let b = raw_operand_arg(b as *const T, ops.1, k, n, ldb, "B", "ldb")?;
    let choice = unsafe { h.tune_tau_for_error_bound(&a, &b, alpha, error_bound, max_iterations) }?;
    Ok((choice.tau, choice.error_bound, choice.valid_ratio))
}

/// Searches the τ at which op(A)·op(B) (as spamm?gemm would take them, at the handle's block size)
/// performs a fraction targetValidRatio ∈ (0, 1] of the block products (cuSpAMM section 3.5.2,
/// generalised from bisection to a multi-way search): each iteration evaluates up to 256 candidate τ
/// at once (on the GPU: one counting kernel and one small copy back), spread over the bracket
/// [0, just above the largest block norm product] and then over the part of it that still encloses
/// the target. τ = 0 (ratio 1) and τ above every norm product (ratio 0) are known without an
/// iteration. Stops when |ratio − target| ≤ tolerance, when no τ could come closer, or after
/// maxIterations iterations, and writes the τ whose ratio was closest and that ratio (what spamm?gemm
/// at that τ reports). valueType: SGPU_VALUE_TYPE_F16, _BF16, _F32 or _F64, the type of A and B. m,
/// n and k must be positive.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammTuneTau(
    handle: spammHandle_t,
    valueType: sgpuValueType_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    A: *const c_void,
    lda: c_int,
    B: *const c_void,
    ldb: c_int,
    targetValidRatio: f64,
    tolerance: f64,
    maxIterations: c_int,
    tau: *mut f64,
    achievedValidRatio: *mut f64,
) -> sgpuStatus_t {
    boundary("spammTuneTau", || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        let (value_type, ops, dims, max_iterations) = tune_args(valueType, (transa, transb), (m, n, k), maxIterations)?;
        let search = (targetValidRatio, tolerance, max_iterations);
        let tau_out = unsafe { out_arg(tau, "tau") }?;
        let ratio_out = unsafe { out_arg(achievedValidRatio, "achievedValidRatio") }?;
        let (found_tau, found_ratio) =
            unsafe { for_value_type!(value_type, tune_c(h, ops, dims, A, lda, B, ldb, search)) }?;
        *tau_out = found_tau;
        *ratio_out = found_ratio;
        Ok(())
    })
}

/// Searches the largest τ at which the error bound that spamm?gemm would report for
/// C = alpha·op(A)·op(B) + beta·C (spammStats_t.errorBound: |alpha|·sqrt(Σ over C blocks (i,j) of
/// (Σ over skipped k of ‖A_ik‖_F·‖B_kj‖_F)²), an upper bound of ‖C_exact − C‖_F up to rounding) is
/// at most errorBound, an absolute bound on the Frobenius norm of the error (for a relative one, scale
/// it by a norm of C the caller knows). alpha points to a float (SGPU_VALUE_TYPE_F16, _BF16, _F32) or a
/// double (_F64), the value the product will use. The bound is a non-decreasing step function of τ,
/// so the answer is the largest τ of its step: a block norm product, or +INFINITY when skipping
/// every product stays within errorBound (alpha = 0, for one). Each iteration evaluates the bound at
/// up to 16 candidate τ at once (on the GPU: one pass over all block norm products and one small
/// copy back), over the bracket [0, just above the largest norm product] and then over the part of
/// it that still encloses errorBound. The search ends when no τ is left between a candidate within
/// the bound and one beyond it (the τ found is then exactly the largest), or after maxIterations
/// iterations (then it is the largest τ found, still within the bound). Writes τ, the bound at τ and
/// the valid ratio at τ, which spammGetStats reports exactly after spamm?gemm at that τ with this
/// alpha (both backends sum the bound in the same order). errorBound: a non-negative number
/// (+INFINITY allowed); other arguments as spammTuneTau.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammTuneTauForErrorBound(
    handle: spammHandle_t,
    valueType: sgpuValueType_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    lda: c_int,
    B: *const c_void,
    ldb: c_int,
    errorBound: f64,
    maxIterations: c_int,
    tau: *mut f64,
    achievedErrorBound: *mut f64,
    achievedValidRatio: *mut f64,
) -> sgpuStatus_t {
    boundary("spammTuneTauForErrorBound", || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        let (value_type, ops, dims, max_iterations) = tune_args(valueType, (transa, transb), (m, n, k), maxIterations)?;
        if errorBound.is_nan() || errorBound < 0.0 {
            return Err(Error::invalid_value(format!(
                "argument errorBound = {} must be a non-negative number",
                Float(errorBound)
            )));
        }
        let search = (errorBound, max_iterations);
        let tau_out = unsafe { out_arg(tau, "tau") }?;
        let bound_out = unsafe { out_arg(achievedErrorBound, "achievedErrorBound") }?;
        let ratio_out = unsafe { out_arg(achievedValidRatio, "achievedValidRatio") }?;
        let (found_tau, found_bound, found_ratio) =
            unsafe { for_value_type!(value_type, tune_bound_c(h, ops, dims, alpha, A, lda, B, ldb, search)) }?;
        *tau_out = found_tau;
        *bound_out = found_bound;
        *ratio_out = found_ratio;
        Ok(())
    })
}

/// A, B and C as the C API passes them to spammGemmEx and the tuned products (the value type says
/// what they hold), each with its leading dimension.
type UntypedOperands = ((*const c_void, c_int), (*const c_void, c_int), (*mut c_void, c_int));

/// [`run_gemm`] on the element type `value_type` names; α / β are that type's scalars (float for
/// SGPU_VALUE_TYPE_F16, _BF16 and _F32, double for _F64). Returns the τ used.
unsafe fn run_untyped_gemm(
    h: &mut SpammHandle,
    value_type: ValueType,
    ops: (Operation, Operation),
    dims: (usize, usize, usize),
    scalars: (*const c_void, *const c_void),
    operands: UntypedOperands,
    rule: TauRule,
) -> Result<f64> {
    unsafe fn typed<T: SpammElement>(
        h: &mut SpammHandle,
        ops: (Operation, Operation),
        dims: (usize, usize, usize),
        (alpha, beta): (*const c_void, *const c_void),
        ((a, lda), (b, ldb), (c, ldc)): UntypedOperands,
        tau: TauRule,
    ) -> Result<f64> {
        let scalars = (alpha as *const T::Compute, beta as *const T::Compute);
        unsafe { run_gemm(h, ops, dims, scalars, (a as *const T, lda), (b as *const T, ldb), (c as *mut T, ldc), tau) }
    }
    unsafe { for_value_type!(value_type, typed(h, ops, dims, scalars, operands, rule)) }
}

/// SpAMM of any value type, as cublasGemmEx is GEMM's: C = alpha·op(A)·op(B) + beta·C with A, B and
/// C of valueType, exactly as the typed entry point: SGPU_VALUE_TYPE_F32 as spammSgemm (with the
/// handle's math mode), _F64 as spammDgemm, _F16 as spammHgemm, and _BF16 for bfloat16 data
/// (uint16_t bit patterns, __nv_bfloat16's layout), which like f16 multiplies on tensor cores with
/// FP32 accumulation (cublasGemmEx with CUDA_R_16BF and CUBLAS_COMPUTE_32F) and takes block norms
/// in FP64. alpha and beta point to a float for _F16, _BF16 and _F32, a double for _F64. Other
/// arguments, the statistics and the failure statuses as spammSgemm; an unknown valueType is
/// SGPU_STATUS_INVALID_VALUE.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGemmEx(
    handle: spammHandle_t,
    valueType: sgpuValueType_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    lda: c_int,
    B: *const c_void,
    ldb: c_int,
    beta: *const c_void,
    C: *mut c_void,
    ldc: c_int,
    tau: f64,
) -> sgpuStatus_t {
    boundary("spammGemmEx", || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        let value_type: ValueType = enum_arg(valueType, "valueType")?;
        let ops = (enum_arg(transa, "transa")?, enum_arg(transb, "transb")?);
        let dims = (size_arg(m as i64, "m")?, size_arg(n as i64, "n")?, size_arg(k as i64, "k")?);
        let operands = ((A, lda), (B, ldb), (C, ldc));
        unsafe { run_untyped_gemm(h, value_type, ops, dims, (alpha, beta), operands, TauRule::Given(tau)) }.map(|_| ())
    })
}

/// The shared body of the tuned products: the search's arguments checked first as the τ searches
/// check them (value type, transposes, dimensions, maxIterations), then *tau, then the product's as
/// spamm?gemm checks them; `rule` makes the τ rule from maxIterations.
#[allow(clippy::too_many_arguments)]
unsafe fn tuned_gemm_c(
    function: &str,
    handle: spammHandle_t,
    value_type: sgpuValueType_t,
    ops: (sgpuOperation_t, sgpuOperation_t),
    dims: (c_int, c_int, c_int),
    scalars: (*const c_void, *const c_void),
    operands: UntypedOperands,
    max_iterations: c_int,
    rule: impl FnOnce(usize) -> TauRule,
    tau: *mut f64,
) -> sgpuStatus_t {
    boundary(function, || {
        let h = unsafe { REGISTRY.get(handle, "handle") }?;
        let (value_type, ops, dims, max_iterations) = tune_args(value_type, ops, dims, max_iterations)?;
        let tau_out = unsafe { out_arg(tau, "tau") }?;
        *tau_out = unsafe { run_untyped_gemm(h, value_type, ops, dims, scalars, operands, rule(max_iterations)) }?;
        Ok(())
    })
}

/// C = alpha·op(A)·op(B) + beta·C as spammGemmEx (valueType SGPU_VALUE_TYPE_F16, _BF16, _F32 or
/// _F64; A, B, C of that type; alpha and beta point to a float for _F16, _BF16 and _F32, a double for
/// _F64) at the τ spammTuneTau would return for targetValidRatio,
/// tolerance and maxIterations, and writes that τ to *tau. The search runs on the product's own block
/// norm maps, so the inputs are read for norms once, not once for spammTuneTau and again for the
/// product; the host waits for each search iteration. spammGetStats reports the product, its valid
/// ratio and τ among it. m, n or k = 0: no block products, τ = 0 without a search. Other arguments
/// as spammSgemm and spammTuneTau.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGemmAtValidRatio(
    handle: spammHandle_t,
    valueType: sgpuValueType_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    lda: c_int,
    B: *const c_void,
    ldb: c_int,
    beta: *const c_void,
    C: *mut c_void,
    ldc: c_int,
    targetValidRatio: f64,
    tolerance: f64,
    maxIterations: c_int,
    tau: *mut f64,
) -> sgpuStatus_t {
    let rule = |max_iterations| TauRule::ValidRatio { target: targetValidRatio, tolerance, max_iterations };
    let operands = ((A, lda), (B, ldb), (C, ldc));
    let (ops, dims) = ((transa, transb), (m, n, k));
    let name = "spammGemmAtValidRatio";
    unsafe { tuned_gemm_c(name, handle, valueType, ops, dims, (alpha, beta), operands, maxIterations, rule, tau) }
}

/// C = alpha·op(A)·op(B) + beta·C as spammGemmAtValidRatio, at the τ spammTuneTauForErrorBound
/// would return for errorBound and maxIterations with this alpha: the largest τ whose reported error
/// bound (spammStats_t.errorBound, ≥ ‖C_exact − C‖_F up to rounding) is at most errorBound. Writes τ
/// to *tau; spammGetStats reports the bound reached. This is the product a purification step with an
/// error budget per multiplication wants, with one read of its inputs for norms.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spammGemmWithinErrorBound(
    handle: spammHandle_t,
    valueType: sgpuValueType_t,
    transa: sgpuOperation_t,
    transb: sgpuOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    lda: c_int,
    B: *const c_void,
    ldb: c_int,
    beta: *const c_void,
    C: *mut c_void,
    ldc: c_int,
    errorBound: f64,
    maxIterations: c_int,
    tau: *mut f64,
) -> sgpuStatus_t {
    let rule = |max_iterations| TauRule::ErrorBound { bound: errorBound, max_iterations };
    let operands = ((A, lda), (B, ldb), (C, ldc));
    let (ops, dims) = ((transa, transb), (m, n, k));
    let name = "spammGemmWithinErrorBound";
    unsafe { tuned_gemm_c(name, handle, valueType, ops, dims, (alpha, beta), operands, maxIterations, rule, tau) }
}

//! MSREP C API: `y = α·A·x + β·y` with A cut into nnz-balanced partitions (pCSR / pCSC / pCOO) spread
//! over several devices.

use super::{
    ArrayBytes, FamilyHandle, ObjectKind, Registry, boundary, check_array, check_no_overlap, enum_arg, handle_create,
    handle_destroy, handle_get_backend, handle_get_devices, handle_get_stream, handle_set_backend, handle_set_devices,
    handle_set_stream, out_arg, scalar_arg, sgpuBackend_t, sgpuIndexBase_t, sgpuSparseFormat_t, sgpuStatus_t,
    sgpuValueType_t, size_arg, slice_arg,
};
use crate::error::{Error, Result};
use crate::handle::HandleCore;
use crate::msrep::{MsrepElement, MsrepHandle, MsrepMatrix, PartitionedMatrix, with_matrix};
use crate::sparse::{CSC_NAMES, CSR_NAMES, CompressedRef, CooRef};
use crate::types::{IndexBase, SparseFormat, ValueType};
use std::ffi::c_void;
use std::os::raw::c_int;

/// An MSREP handle: backend, stream and the devices matrices are partitioned over.
pub type msrepHandle_t = *mut MsrepHandle;
/// A matrix partitioned for MSREP SpMV, resident across calls.
pub type msrepMatrix_t = *mut MsrepMatrix;

/// The largest numPartitions a matrix may have. Partitions stand for devices (a few per GPU at
/// most); the bound keeps a mistyped count from exhausting memory on per-partition bookkeeping.
pub const MSREP_MAX_PARTITIONS: c_int = 65536;

static HANDLES: Registry<MsrepHandle> = Registry::new(ObjectKind::MsrepHandle);
static MATRICES: Registry<MsrepMatrix> = Registry::new(ObjectKind::MsrepMatrix);

/// The Rust handle behind a C handle, for Rust programs that use both (tests set their handle's
/// [`crate::executor::TestHooks`] through it).
///
/// # Safety
/// As every function taking a handle: no other thread uses the handle meanwhile.
#[doc(hidden)]
pub unsafe fn msrep_handle_object<'a>(handle: msrepHandle_t) -> Result<&'a mut MsrepHandle> {
    unsafe { HANDLES.get(handle, "handle") }
}

impl FamilyHandle for MsrepHandle {
    fn registry() -> &'static Registry<Self> {
        &HANDLES
    }
    fn create() -> Result<Self> {
        MsrepHandle::new()
    }
    fn core(&mut self) -> &mut HandleCore {
        self.core_mut()
    }
}

/// Where one partition of an `msrepMatrix_t` lies, as `msrepGetPartitionInfo` reports it.
/// All ranges are half-open: `startIdx <= k < endIdx`, `startMajor <= r < endMajor`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct msrepPartitionInfo_t {
    /// The partial format, an `sgpuSparseFormat` value: CSR (pCSR), CSC (pCSC) or COO (pCOO).
    pub format: sgpuSparseFormat_t,
    /// First nonzero of the partition, zero-based position in the input's value array:
    /// ⌊partition·nnz/numPartitions⌋.
    pub startIdx: i64,
    /// One past the partition's last nonzero (exclusive; the paper's end_idx + 1).
    pub endIdx: i64,
    /// Nonzeros in the partition, endIdx − startIdx (0 when there are more partitions than nonzeros).
    pub nnz: i64,
    /// Zero-based major index of the partition's first nonzero: its row for pCSR and pCOO, its column
    /// for pCSC.
    pub startMajor: i64,
    /// One past the row (pCSR, pCOO) / column (pCSC) of its last nonzero (exclusive; the paper's
    /// end_row + 1). Equal to startMajor for an empty partition.
    pub endMajor: i64,
    /// 1 when the first row (column) is split: earlier partitions hold some of its nonzeros; else 0.
    pub startFlag: c_int,
    /// The device ordinal the partition is placed on (round-robin over the handle's devices).
    pub device: c_int,
}

/// Creates an MSREP handle on the backend `SPARSEGPU_BACKEND` selects (auto when unset), using device 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepCreate(handle: *mut msrepHandle_t) -> sgpuStatus_t {
    unsafe { handle_create("msrepCreate", handle) }
}

/// Destroys a handle. NULL is accepted. Matrices created with it stay valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepDestroy(handle: msrepHandle_t) -> sgpuStatus_t {
    unsafe { handle_destroy("msrepDestroy", handle) }
}

/// Sets the `cudaStream_t` (NULL = default stream) SpMV calls are ordered on.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepSetStream(handle: msrepHandle_t, stream: *mut c_void) -> sgpuStatus_t {
    unsafe { handle_set_stream("msrepSetStream", handle, stream) }
}

/// Writes the handle's stream to `*stream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepGetStream(handle: msrepHandle_t, stream: *mut *mut c_void) -> sgpuStatus_t {
    unsafe { handle_get_stream("msrepGetStream", handle, stream) }
}

/// Selects the backend (`sgpuBackend`). SGPU_BACKEND_CUDA where CUDA is unusable is
/// SGPU_STATUS_BACKEND_UNAVAILABLE and leaves the handle unchanged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepSetBackend(handle: msrepHandle_t, backend: sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_set_backend("msrepSetBackend", handle, backend) }
}

/// Writes the handle's concrete backend (never SGPU_BACKEND_AUTO) to `*backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepGetBackend(handle: msrepHandle_t, backend: *mut sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_get_backend("msrepGetBackend", handle, backend) }
}

/// Sets the devices partitions of matrices created afterwards are spread over: `count >= 1` distinct,
/// non-negative ordinals. Existing matrices keep their placement.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepSetDevices(handle: msrepHandle_t, count: c_int, devices: *const c_int) -> sgpuStatus_t {
    unsafe { handle_set_devices("msrepSetDevices", handle, count, devices) }
}

/// Writes the number of devices to `*count` and the first min(count, capacity) ordinals to `devices`.
/// Query the count with capacity 0 and devices NULL; devices may be NULL only when capacity is 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepGetDevices(
    handle: msrepHandle_t,
    capacity: c_int,
    count: *mut c_int,
    devices: *mut c_int,
) -> sgpuStatus_t {
    unsafe { handle_get_devices("msrepGetDevices", handle, capacity, count, devices) }
}

/// The arguments every matrix constructor shares, checked.
struct MatrixArgs<'a> {
    handle: &'a mut MsrepHandle,
    out: &'a mut msrepMatrix_t,
    rows: usize,
    cols: usize,
    nnz: usize,
    value_type: ValueType,
    base: IndexBase,
    partitions: usize,
}

/// Checks handle, output, sizes, enums and the partition count: everything but the arrays.
#[allow(clippy::too_many_arguments)]
unsafe fn matrix_args<'a>(
    handle: msrepHandle_t,
    matrix: *mut msrepMatrix_t,
    rows: c_int,
    cols: c_int,
    nnz: i64,
    value_type: sgpuValueType_t,
    idx_base: sgpuIndexBase_t,
    num_partitions: c_int,
) -> Result<MatrixArgs<'a>> {
    let handle: &mut MsrepHandle = unsafe { HANDLES.get(handle, "handle") }?;
    let out = unsafe { out_arg(matrix, "matrix") }?;
    let rows = size_arg(rows as i64, "rows")?;
    let cols = size_arg(cols as i64, "cols")?;
    let nnz = size_arg(nnz, "nnz")?;
    let value_type: ValueType = enum_arg(value_type, "valueType")?;
    let base = enum_arg(idx_base, "indexBase")?;
    let partitions = match size_arg(num_partitions as i64, "numPartitions")? {
        0 => handle.core().devices().len(),
        n if n > MSREP_MAX_PARTITIONS as usize => {
            return Err(Error::invalid_size(format!(
                "argument numPartitions = {n} exceeds MSREP_MAX_PARTITIONS = {MSREP_MAX_PARTITIONS}"
            )));
        }
        n => n,
    };
    Ok(MatrixArgs { handle, out, rows, cols, nnz, value_type, base, partitions })
}

/// Builds the typed partitioned matrix from the caller's arrays (copied; they may be freed afterwards),
/// placed by the handle's backend. `major` is rowPtr / colPtr (compressed) or rowInd (COO), `minor`
/// colInd / rowInd / colInd.
unsafe fn build<T: MsrepElement>(
    args: &mut MatrixArgs<'_>,
    format: SparseFormat,
    major: *const c_int,
    minor: *const c_int,
    values: *const c_void,
) -> Result<PartitionedMatrix<T>> {
    let values = unsafe { slice_arg(values as *const T, args.nnz, "values") }?;
    match format {
        SparseFormat::Csr | SparseFormat::Csc => {
            let (names, outer, inner) = match format {
                SparseFormat::Csr => (CSR_NAMES, args.rows, args.cols),
                _ => (CSC_NAMES, args.cols, args.rows),
            };
            let ptr = unsafe { slice_arg(major, outer + 1, names.ptr) }?;
            let idx = unsafe { slice_arg(minor, args.nnz, names.idx) }?;
            // Sorted minor indices are not needed: a partition's sums do not depend on their order.
            let a = CompressedRef::new(outer, inner, ptr, idx, values, args.base, false, names)?;
            args.handle.partition_compressed(&a, format, args.partitions)
        }
        SparseFormat::Coo => {
            let row_ind = unsafe { slice_arg(major, args.nnz, "rowInd") }?;
            let col_ind = unsafe { slice_arg(minor, args.nnz, "colInd") }?;
            let a = CooRef::new(args.rows, args.cols, row_ind, col_ind, values, args.base, true)?;
            args.handle.partition_coo(&a, args.partitions)
        }
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn create_matrix(
    function: &str,
    format: SparseFormat,
    handle: msrepHandle_t,
    matrix: *mut msrepMatrix_t,
    rows: c_int,
    cols: c_int,
    nnz: i64,
    major: *const c_int,
    minor: *const c_int,
    values: *const c_void,
    value_type: sgpuValueType_t,
    idx_base: sgpuIndexBase_t,
    num_partitions: c_int,
) -> sgpuStatus_t {
    boundary(function, || {
        let mut args = unsafe { matrix_args(handle, matrix, rows, cols, nnz, value_type, idx_base, num_partitions) }?;
        let built = match args.value_type {
            ValueType::F32 => MsrepMatrix::F32(unsafe { build(&mut args, format, major, minor, values) }?),
            ValueType::F64 => MsrepMatrix::F64(unsafe { build(&mut args, format, major, minor, values) }?),
            ValueType::F16 => MsrepMatrix::F16(unsafe { build(&mut args, format, major, minor, values) }?),
            ValueType::Bf16 => MsrepMatrix::Bf16(unsafe { build(&mut args, format, major, minor, values) }?),
        };
        *args.out = MATRICES.register(built)?;
        Ok(())
    })
}

/// Creates a matrix from CSR and cuts it into `numPartitions` pCSR partitions of ⌊nnz/numPartitions⌋
/// or ⌈nnz/numPartitions⌉ nonzeros (0 = one per device of the handle; at most MSREP_MAX_PARTITIONS;
/// more partitions than nonzeros gives empty partitions), placed round-robin on the
/// handle's devices. `rowPtr` has rows + 1 entries, `colInd` and `values` nnz (NULL allowed when
/// nnz = 0); column indices need not be sorted. `valueType` is SGPU_VALUE_TYPE_F32, _F64, _F16 or
/// _BF16: a matrix of 16-bit values (half the bytes of f32 values to stream per SpMV) multiplies them
/// in FP32, with FP32 x and y (see msrepSpMV). The arrays are copied: the caller may free them on
/// return.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepCreateCsr(
    handle: msrepHandle_t,
    matrix: *mut msrepMatrix_t,
    rows: c_int,
    cols: c_int,
    nnz: i64,
    rowPtr: *const c_int,
    colInd: *const c_int,
    values: *const c_void,
    valueType: sgpuValueType_t,
    indexBase: sgpuIndexBase_t,
    numPartitions: c_int,
) -> sgpuStatus_t {
    unsafe {
        create_matrix(
            "msrepCreateCsr",
            SparseFormat::Csr,
            handle,
            matrix,
            rows,
            cols,
            nnz,
            rowPtr,
            colInd,
            values,
            valueType,
            indexBase,
            numPartitions,
        )
    }
}

/// Creates a matrix from CSC and cuts it into pCSC partitions, as `msrepCreateCsr` does for CSR:
/// `colPtr` has cols + 1 entries, `rowInd` and `values` nnz. Each pCSC partition yields a full-length
/// partial y, so the matrix keeps one rows-long buffer per non-empty partition. On a GPU handle the
/// entries of each device's partitions are also sorted by rows here, and run there as rows (no
/// atomics; the same sums on every call): creation takes longer than `msrepCreateCsr` (figures in
/// docs/benchmarks.md) and each device holds row pointers over all rows.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepCreateCsc(
    handle: msrepHandle_t,
    matrix: *mut msrepMatrix_t,
    rows: c_int,
    cols: c_int,
    nnz: i64,
    colPtr: *const c_int,
    rowInd: *const c_int,
    values: *const c_void,
    valueType: sgpuValueType_t,
    indexBase: sgpuIndexBase_t,
    numPartitions: c_int,
) -> sgpuStatus_t {
    unsafe {
        create_matrix(
            "msrepCreateCsc",
            SparseFormat::Csc,
            handle,
            matrix,
            rows,
            cols,
            nnz,
            colPtr,
            rowInd,
            values,
            valueType,
            indexBase,
            numPartitions,
        )
    }
}

/// Creates a matrix from COO sorted by row (rows non-decreasing; unsorted is
/// SGPU_STATUS_INVALID_SPARSE_MATRIX) and cuts it into pCOO partitions, as `msrepCreateCsr` does.
/// `rowInd`, `colInd` and `values` have nnz entries; duplicates are summed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepCreateCoo(
    handle: msrepHandle_t,
    matrix: *mut msrepMatrix_t,
    rows: c_int,
    cols: c_int,
    nnz: i64,
    rowInd: *const c_int,
    colInd: *const c_int,
    values: *const c_void,
    valueType: sgpuValueType_t,
    indexBase: sgpuIndexBase_t,
    numPartitions: c_int,
) -> sgpuStatus_t {
    unsafe {
        create_matrix(
            "msrepCreateCoo",
            SparseFormat::Coo,
            handle,
            matrix,
            rows,
            cols,
            nnz,
            rowInd,
            colInd,
            values,
            valueType,
            indexBase,
            numPartitions,
        )
    }
}

/// Destroys a matrix. NULL is accepted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepDestroyMatrix(matrix: msrepMatrix_t) -> sgpuStatus_t {
    boundary("msrepDestroyMatrix", || unsafe { MATRICES.destroy(matrix, "matrix") })
}

/// Writes the number of partitions of the matrix to `*count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepGetPartitionCount(matrix: msrepMatrix_t, count: *mut c_int) -> sgpuStatus_t {
    boundary("msrepGetPartitionCount", || {
        let matrix = unsafe { MATRICES.get(matrix, "matrix") }?;
        *unsafe { out_arg(count, "count") }? = matrix.partition_count() as c_int;
        Ok(())
    })
}

/// Describes partition `partition` (0 ≤ partition < count) in `*info`; see `msrepPartitionInfo_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepGetPartitionInfo(
    matrix: msrepMatrix_t,
    partition: c_int,
    info: *mut msrepPartitionInfo_t,
) -> sgpuStatus_t {
    boundary("msrepGetPartitionInfo", || {
        let matrix = unsafe { MATRICES.get(matrix, "matrix") }?;
        let info = unsafe { out_arg(info, "info") }?;
        let count = matrix.partition_count();
        let (bounds, device) = usize::try_from(partition)
            .ok()
            .and_then(|i| matrix.partition_placement(i))
            .ok_or_else(|| Error::invalid_value(format!("argument partition = {partition} is outside [0, {count})")))?;
        *info = msrepPartitionInfo_t {
            format: matrix.format() as c_int,
            startIdx: bounds.start_idx as i64,
            endIdx: bounds.end_idx as i64,
            nnz: bounds.nnz() as i64,
            startMajor: bounds.start_major as i64,
            endMajor: bounds.end_major as i64,
            startFlag: bounds.start_flag as c_int,
            device,
        };
        Ok(())
    })
}

unsafe fn spmv_typed<T: MsrepElement>(
    handle: &mut MsrepHandle,
    a: &mut PartitionedMatrix<T>,
    alpha: *const c_void,
    x: *const c_void,
    beta: *const c_void,
    y: *mut c_void,
) -> Result<()> {
    let (x, y) = (x as *const T::Compute, y as *mut T::Compute);
    let alpha = unsafe { scalar_arg(alpha as *const T::Compute, "alpha") }?;
    let beta = unsafe { scalar_arg(beta as *const T::Compute, "beta") }?;
    // Checked as slice_arg would (size, NULL, alignment) without making slices: on CUDA they may be
    // device memory.
    check_array(x, a.cols, "x")?;
    check_array(y, a.rows, "y")?;
    check_no_overlap(ArrayBytes::of(y, a.rows, "y"), &[ArrayBytes::of(x, a.cols, "x")])?;
    // x and y may be device memory: never made into slices here.
    unsafe { handle.spmv(a, alpha, x, beta, y) }
}

/// `y = α·A·x + β·y` in the matrix's compute type: α, β, x and y are float for an F32, F16 or BF16
/// matrix (16-bit values are multiplied and summed in FP32), double for F64. x has cols elements, y
/// has rows (NULL allowed when that is 0). With β = 0, y is not read (NaN in y does not propagate).
/// Partitions run concurrently; a row split between partitions gets the sum of their partial results
/// and β·y exactly once, rows with no nonzeros get β·y. y must not overlap x
/// (SGPU_STATUS_INVALID_POINTER). A matrix serves one SpMV at a time (pCSC keeps its partial results
/// in the matrix), like a handle. On several GPUs, x and y belong to the handle's first device (or
/// the host): x passes from it along the other devices, each receiving the columns it and the
/// devices after it read, and their pCSR rows of y are written into its memory by peer access
/// (copied and finished there where a device cannot reach y).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msrepSpMV(
    handle: msrepHandle_t,
    matrix: msrepMatrix_t,
    alpha: *const c_void,
    x: *const c_void,
    beta: *const c_void,
    y: *mut c_void,
) -> sgpuStatus_t {
    boundary("msrepSpMV", || {
        let handle = unsafe { HANDLES.get(handle, "handle") }?;
        let matrix = unsafe { MATRICES.get(matrix, "matrix") }?;
        with_matrix!(matrix, a => unsafe { spmv_typed(handle, a, alpha, x, beta, y) })
    })
}

//! SMaT: sparse × dense products (SpMM) on tensor-core tiles, after Jaccard row reordering.
//!
//! Usage: `smatCreate` a handle, optionally set the reordering mode and Jaccard threshold, analyse a
//! CSR matrix once with `smatCreateCsr`, then call `smatSpMM` as often as needed.

use super::{
    ArrayBytes, FamilyHandle, ObjectKind, Registry, boundary, check_array, check_no_overlap, enum_arg, for_value_type,
    handle_create, handle_destroy, handle_get_backend, handle_get_stream, handle_set_backend, handle_set_stream,
    out_arg, scalar_arg, sgpuBackend_t, sgpuIndexBase_t, sgpuLayout_t, sgpuStatus_t, sgpuValueType_t, size_arg,
};
use crate::dense::required_len;
use crate::error::Result;
use crate::handle::HandleCore;
use crate::smat::contract::{Product, RawCsr, SmatElement};
use crate::smat::{SmatHandle, SmatMathMode, SmatMatrix, StorageFormat};
use crate::types::{IndexBase, Layout, ValueType};
use std::ffi::c_void;
use std::os::raw::c_int;

/// An SMaT handle (`smatContext*`): backend, stream and analysis settings. One thread at a time.
pub type smatHandle_t = *mut SmatHandle;
/// An analysed sparse matrix (`smatMatrix*`). It outlives the handle that created it but is tied to
/// that handle's backend (and device): a CUDA-built matrix keeps its blocks on the device only.
pub type smatMatrix_t = *mut SmatMatrix;
/// `smatReorderMode_t`: an `smatReorderMode` value passed as `int`.
pub type smatReorderMode_t = c_int;
/// `smatFormat_t`: an `smatFormat` value passed as `int`.
pub type smatFormat_t = c_int;

/// What `smatGetMatrixInfo` reports about an analysed matrix.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct smatMatrixInfo_t {
    pub rows: c_int,
    pub cols: c_int,
    /// CSR entries passed to `smatCreateCsr` (duplicates counted).
    pub nnz: i64,
    /// BCSR tile, the A operand of the value type's tensor-core mma: 16×16 for f16 / bf16
    /// (m16n8k16), 16×8 for f32 (m16n8k8 TF32), 8×4 for f64 (DMMA m8n8k4).
    pub tileRows: c_int,
    pub tileCols: c_int,
    /// Nonzero tiles stored (after reordering, when applied), for the rows stored as tiles.
    pub blockCount: i64,
    /// Nonzero tiles the whole matrix has in its original row order.
    pub blockCountBeforeReordering: i64,
    /// Distinct nonzero positions in the tiles / (blockCount · tileRows · tileCols); 1 = no
    /// padding, 0 = no tiles.
    pub fillRatio: f64,
    /// 1 when the rows are stored permuted (invisible to results), 0 otherwise.
    pub reordered: c_int,
    pub valueType: sgpuValueType_t,
    /// Rows of the matrix stored as tiles (multiplied on tensor cores), and rows stored as CSR
    /// (multiplied on the CUDA cores, rows without entries included) with their entries.
    pub rowsInTiles: i64,
    pub rowsInCsr: i64,
    pub entriesInCsr: i64,
    /// Bytes the analysed matrix takes on a CUDA device (besides the schedule of its long rows, a few
    /// bytes per segment), and the bytes of its CSR (32-bit indices); `SMAT_FORMAT_AUTO` keeps the
    /// first within twice the second.
    pub bytes: i64,
    pub csrBytes: i64,
}

static HANDLES: Registry<SmatHandle> = Registry::new(ObjectKind::SmatHandle);
static MATRICES: Registry<SmatMatrix> = Registry::new(ObjectKind::SmatMatrix);

impl FamilyHandle for SmatHandle {
    fn registry() -> &'static Registry<Self> {
        &HANDLES
    }
    fn create() -> Result<Self> {
        SmatHandle::new()
    }
    fn core(&mut self) -> &mut HandleCore {
        &mut self.core
    }
}

/// Creates an SMaT handle on the backend `SPARSEGPU_BACKEND` selects (auto when unset), with
/// reordering mode `SMAT_REORDER_MODE_AUTO` and Jaccard threshold 0.5.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatCreate(handle: *mut smatHandle_t) -> sgpuStatus_t {
    unsafe { handle_create("smatCreate", handle) }
}

/// Destroys a handle. NULL is accepted. Matrices created with it stay valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatDestroy(handle: smatHandle_t) -> sgpuStatus_t {
    unsafe { handle_destroy("smatDestroy", handle) }
}

/// Sets the `cudaStream_t` later calls on this handle run on (NULL = the default stream).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatSetStream(handle: smatHandle_t, stream: *mut c_void) -> sgpuStatus_t {
    unsafe { handle_set_stream("smatSetStream", handle, stream) }
}

/// Writes the handle's stream to `*stream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatGetStream(handle: smatHandle_t, stream: *mut *mut c_void) -> sgpuStatus_t {
    unsafe { handle_get_stream("smatGetStream", handle, stream) }
}

/// Selects the backend: `SGPU_BACKEND_AUTO` (CUDA when usable, else CPU), `SGPU_BACKEND_CUDA`
/// (`SGPU_STATUS_BACKEND_UNAVAILABLE` when CUDA is not usable) or `SGPU_BACKEND_CPU`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatSetBackend(handle: smatHandle_t, backend: sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_set_backend("smatSetBackend", handle, backend) }
}

/// Writes the backend the handle resolved to (`SGPU_BACKEND_CUDA` or `SGPU_BACKEND_CPU`, never AUTO).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatGetBackend(handle: smatHandle_t, backend: *mut sgpuBackend_t) -> sgpuStatus_t {
    unsafe { handle_get_backend("smatGetBackend", handle, backend) }
}

/// Sets when later `smatCreateCsr` calls on this handle reorder rows (`smatReorderMode`):
/// AUTO (default) keeps the Jaccard permutation only when it stores fewer blocks — on band matrices
/// the clustering can increase the block count —, ALWAYS applies it, NEVER skips it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatSetReorderMode(handle: smatHandle_t, mode: smatReorderMode_t) -> sgpuStatus_t {
    boundary("smatSetReorderMode", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        h.settings.reorder = enum_arg(mode, "mode")?;
        Ok(())
    })
}

/// Writes the handle's reordering mode to `*mode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatGetReorderMode(handle: smatHandle_t, mode: *mut smatReorderMode_t) -> sgpuStatus_t {
    boundary("smatGetReorderMode", || {
        let h: &mut SmatHandle = unsafe { HANDLES.get(handle, "handle") }?;
        *unsafe { out_arg(mode, "mode") }? = h.settings.reorder as c_int;
        Ok(())
    })
}

/// Sets how later `smatCreateCsr` calls on this handle store a matrix (`smatFormat`): AUTO (default)
/// chooses per block row between tensor-core tiles, where they are full enough to pay, and CSR rows
/// on the CUDA cores, within twice the CSR's bytes; TILES stores every block row holding entries as
/// tiles, as the SMaT paper does; CSR stores every row as CSR and does not reorder.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatSetFormat(handle: smatHandle_t, format: smatFormat_t) -> sgpuStatus_t {
    boundary("smatSetFormat", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        h.settings.format = enum_arg::<StorageFormat>(format, "format")?;
        Ok(())
    })
}

/// Writes the handle's storage format to `*format`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatGetFormat(handle: smatHandle_t, format: *mut smatFormat_t) -> sgpuStatus_t {
    boundary("smatGetFormat", || {
        let h: &mut SmatHandle = unsafe { HANDLES.get(handle, "handle") }?;
        *unsafe { out_arg(format, "format") }? = h.settings.format as c_int;
        Ok(())
    })
}

/// `smatMathMode_t`: an `smatMathMode` value passed as `int`.
pub type smatMathMode_t = c_int;

/// Sets how the handle multiplies f32 tiles (`smatMathMode`), as cublasSetMathMode:
/// SMAT_MATH_MODE_DEFAULT (exact FP32 FMA) or SMAT_MATH_MODE_TF32X3 (3xTF32 on tensor cores, close to
/// FP32 accuracy). The mode at smatCreateCsr decides which f32 block rows are worth tiles (3xTF32
/// tiles pay at a lower fill); the mode at smatSpMM how they are multiplied. Other value types and
/// CSR rows ignore it. Another value: SGPU_STATUS_INVALID_VALUE, handle unchanged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatSetMathMode(handle: smatHandle_t, mode: smatMathMode_t) -> sgpuStatus_t {
    boundary("smatSetMathMode", || {
        let h = unsafe { HANDLES.get(handle, "handle") }?;
        h.settings.math_mode = enum_arg::<SmatMathMode>(mode, "mode")?;
        Ok(())
    })
}

/// Writes the handle's math mode to `*mode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatGetMathMode(handle: smatHandle_t, mode: *mut smatMathMode_t) -> sgpuStatus_t {
    boundary("smatGetMathMode", || {
        let h: &mut SmatHandle = unsafe { HANDLES.get(handle, "handle") }?;
        *unsafe { out_arg(mode, "mode") }? = h.settings.math_mode as c_int;
        Ok(())
    })
}

/// Sets the Jaccard distance threshold τ in (0, 1] of the row clustering (default 0.5): a row joins
/// a cluster when 1 − |shared column blocks| / |union of column blocks| < τ. At 0.5 a row joins only
/// when it shares more tile columns with the cluster than it adds, so merging never adds more blocks
/// than it saves. `SGPU_STATUS_INVALID_VALUE` for τ ≤ 0, τ > 1 or NaN.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatSetJaccardThreshold(handle: smatHandle_t, threshold: f64) -> sgpuStatus_t {
    boundary("smatSetJaccardThreshold", || {
        let h: &mut SmatHandle = unsafe { HANDLES.get(handle, "handle") }?;
        h.settings.set_jaccard_threshold(threshold)
    })
}

/// Writes the handle's Jaccard distance threshold to `*threshold`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatGetJaccardThreshold(handle: smatHandle_t, threshold: *mut f64) -> sgpuStatus_t {
    boundary("smatGetJaccardThreshold", || {
        let h: &mut SmatHandle = unsafe { HANDLES.get(handle, "handle") }?;
        *unsafe { out_arg(threshold, "threshold") }? = h.settings.jaccard_threshold();
        Ok(())
    })
}

/// Analyses a `rows × cols` CSR matrix into `*A`: validates it, reorders rows as the handle's settings
/// ask, and stores it in BCSR with the value type's tensor-core tile. `values` holds `nnz` elements of
/// `valueType` (16-bit types as `uint16_t` patterns); indices use `indexBase`. Column indices may be
/// unsorted within a row; duplicates are summed. Everything needed is copied: the arrays may be freed
/// afterwards. `colInd` and `values` may be NULL when `nnz` is 0; `rowPtr` never.
///
/// On a CUDA handle the three arrays may be host or device memory; the analysis runs on the host and
/// its blocks are then uploaded once to the handle's device (on its stream; the call waits for the
/// upload). Such a matrix multiplies only on CUDA handles of that device, and a CPU-built one only on
/// CPU handles (`SGPU_STATUS_INVALID_VALUE` otherwise). For f16 / bf16, duplicate entries are summed
/// in FP32 and, on CUDA, the sum is rounded once to the value type the tensor cores read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatCreateCsr(
    handle: smatHandle_t,
    A: *mut smatMatrix_t,
    rows: c_int,
    cols: c_int,
    nnz: i64,
    rowPtr: *const c_int,
    colInd: *const c_int,
    values: *const c_void,
    valueType: sgpuValueType_t,
    indexBase: sgpuIndexBase_t,
) -> sgpuStatus_t {
    boundary("smatCreateCsr", || {
        let h: &mut SmatHandle = unsafe { HANDLES.get(handle, "handle") }?;
        let out = unsafe { out_arg(A, "A") }?;
        let rows = size_arg(rows as i64, "rows")?;
        let cols = size_arg(cols as i64, "cols")?;
        let nnz = size_arg(nnz, "nnz")?;
        let value_type: ValueType = enum_arg(valueType, "valueType")?;
        let base: IndexBase = enum_arg(indexBase, "indexBase")?;
        let matrix = unsafe { for_value_type!(value_type, analyse(h, rows, cols, rowPtr, colInd, values, nnz, base)) }?;
        *out = MATRICES.register(matrix)?;
        Ok(())
    })
}

/// The CSR arrays checked (they may be device memory on a CUDA handle), then analysed by the family.
#[allow(clippy::too_many_arguments)]
unsafe fn analyse<T: SmatElement>(
    h: &mut SmatHandle,
    rows: usize,
    cols: usize,
    row_ptr: *const c_int,
    col_ind: *const c_int,
    values: *const c_void,
    nnz: usize,
    base: IndexBase,
) -> Result<SmatMatrix> {
    let values = values as *const T;
    check_array(row_ptr, rows + 1, "rowPtr")?;
    check_array(col_ind, nnz, "colInd")?;
    check_array(values, nnz, "values")?;
    unsafe { h.analyse_csr(&RawCsr { rows, cols, nnz, row_ptr, col_ind, values, base }) }
}

/// Writes facts about an analysed matrix to `*info`: shape, tile, block counts before and after
/// reordering, fill ratio, whether rows were reordered, value type, how its rows are split between
/// tiles and CSR, and its size.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatGetMatrixInfo(A: smatMatrix_t, info: *mut smatMatrixInfo_t) -> sgpuStatus_t {
    boundary("smatGetMatrixInfo", || {
        let matrix: &mut SmatMatrix = unsafe { MATRICES.get(A, "A") }?;
        let out = unsafe { out_arg(info, "info") }?;
        let i = matrix.info();
        *out = smatMatrixInfo_t {
            rows: i.rows as c_int,
            cols: i.cols as c_int,
            nnz: i.nnz as i64,
            tileRows: i.tile.rows as c_int,
            tileCols: i.tile.cols as c_int,
            blockCount: i.blocks as i64,
            blockCountBeforeReordering: i.blocks_before_reordering as i64,
            fillRatio: i.fill_ratio(),
            reordered: i.reordered as c_int,
            valueType: i.value_type as c_int,
            rowsInTiles: i.rows_in_tiles as i64,
            rowsInCsr: i.rows_in_csr as i64,
            entriesInCsr: i.entries_in_csr as i64,
            bytes: i.bytes() as i64,
            csrBytes: i.csr_bytes() as i64,
        };
        Ok(())
    })
}

/// Destroys an analysed matrix. NULL is accepted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatDestroyMatrix(A: smatMatrix_t) -> sgpuStatus_t {
    boundary("smatDestroyMatrix", || unsafe { MATRICES.destroy(A, "A") })
}

/// `C = alpha·A·B + beta·C` with A an analysed `rows × cols` matrix, B `cols × n` and C `rows × n`,
/// both dense in `layout` with leading dimensions `ldb` / `ldc` (≥ the column count for row-major,
/// ≥ the row count for column-major) and of A's value type. `alpha` and `beta` point to `float` for
/// f16 / bf16 (products accumulate in FP32, like cuSPARSE's CUDA_R_32F compute type) and to the value
/// type otherwise. Rows of C are in the caller's order (any reordering is internal). `beta == 0`
/// never reads C, so C may hold garbage or NaN. C must not overlap B (SGPU_STATUS_INVALID_POINTER).
/// B may be NULL when it has no elements (cols or n is 0), C when rows or n is 0. On a CUDA handle B and C may be host or
/// device memory, the work runs on the handle's stream, and the call returns without waiting unless C
/// is host memory; A must have been created on a CUDA handle of the same device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn smatSpMM(
    handle: smatHandle_t,
    A: smatMatrix_t,
    n: c_int,
    alpha: *const c_void,
    B: *const c_void,
    ldb: c_int,
    beta: *const c_void,
    C: *mut c_void,
    ldc: c_int,
    layout: sgpuLayout_t,
) -> sgpuStatus_t {
    boundary("smatSpMM", || {
        let h: &mut SmatHandle = unsafe { HANDLES.get(handle, "handle") }?;
        let matrix: &SmatMatrix = unsafe { MATRICES.get(A, "A") }?;
        let n = size_arg(n as i64, "n")?;
        let ldb = size_arg(ldb as i64, "ldb")?;
        let ldc = size_arg(ldc as i64, "ldc")?;
        let layout: Layout = enum_arg(layout, "layout")?;
        let info = *matrix.info();
        let b_len = required_len(info.cols, n, ldb, layout, "B")?;
        let c_len = required_len(info.rows, n, ldc, layout, "C")?;
        let operands = Operands { n, b: B, ldb, b_len, c: C, ldc, c_len, layout };
        unsafe { for_value_type!(info.value_type, spmm(h, matrix, alpha, beta, operands)) }
    })
}

/// smatSpMM's dense operands after the size checks.
struct Operands {
    n: usize,
    b: *const c_void,
    ldb: usize,
    b_len: usize,
    c: *mut c_void,
    ldc: usize,
    c_len: usize,
    layout: Layout,
}

unsafe fn spmm<T: SmatElement>(
    h: &mut SmatHandle,
    matrix: &SmatMatrix,
    alpha: *const c_void,
    beta: *const c_void,
    op: Operands,
) -> Result<()> {
    let alpha = unsafe { scalar_arg(alpha as *const T::Compute, "alpha") }?;
    let beta = unsafe { scalar_arg(beta as *const T::Compute, "beta") }?;
    let (b, c) = (op.b as *const T, op.c as *mut T);
    check_array(b, op.b_len, "B")?;
    check_array(c as *const T, op.c_len, "C")?;
    check_no_overlap(ArrayBytes::of(c as *const T, op.c_len, "C"), &[ArrayBytes::of(b, op.b_len, "B")])?;
    let product = Product {
        alpha,
        beta,
        n: op.n,
        b,
        ldb: op.ldb,
        b_len: op.b_len,
        c,
        ldc: op.ldc,
        c_len: op.c_len,
        layout: op.layout,
        math_mode: h.settings.math_mode,
    };
    // Host or device memory (the backend knows which it takes): never made into Rust slices here.
    unsafe { h.spmm(matrix, &product) }
}

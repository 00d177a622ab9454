//! The vendor side: cuBLAS GEMM and cuSPARSE SpMM / SpMV / SDDMM through cudarc's sys bindings,
//! on the harness's stream, every operand device-resident. Each prepared operation owns its
//! descriptors and workspace, so the timed call is the library call alone.

use crate::gpu::{DeviceBuffer, Gpu, Outcome, Timing};
use cudarc::cublas::sys as cb;
use cudarc::cusparse::sys as sp;
use sparsegpu::ValueType;
use std::ffi::{CStr, c_void};

/// Whether libcublas and libcusparse can be loaded (cudarc panics on a missing library).
pub fn missing_libraries() -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !unsafe { cb::is_culib_present() } {
        missing.push("libcublas");
    }
    if !unsafe { sp::is_culib_present() } {
        missing.push("libcusparse");
    }
    missing
}

fn cublas_check(status: cb::cublasStatus_t, call: &str) -> Outcome<()> {
    if status == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS { Ok(()) } else { Err(format!("{call} failed: {status:?}")) }
}

fn cusparse_check(status: sp::cusparseStatus_t, call: &str) -> Outcome<()> {
    cusparse_status(status, call).map_err(String::from)
}

/// Why cuSPARSE gave no result, told apart where the harness treats them apart.
#[derive(Clone, Debug)]
pub enum VendorFailure {
    /// CUSPARSE_STATUS_NOT_SUPPORTED: the algorithm does not take these types, layout or sizes.
    NotSupported(String),
    Failed(String),
}

impl From<VendorFailure> for String {
    fn from(f: VendorFailure) -> String {
        match f {
            VendorFailure::NotSupported(why) | VendorFailure::Failed(why) => why,
        }
    }
}

fn cusparse_status(status: sp::cusparseStatus_t, call: &str) -> Result<(), VendorFailure> {
    if status == sp::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        return Ok(());
    }
    let text = unsafe { CStr::from_ptr(sp::cusparseGetErrorString(status)) }.to_string_lossy().into_owned();
    let why = format!("{call} failed: {status:?} ({text})");
    Err(if status == sp::cusparseStatus_t::CUSPARSE_STATUS_NOT_SUPPORTED {
        VendorFailure::NotSupported(why)
    } else {
        VendorFailure::Failed(why)
    })
}

/// A scalar α or β in the precision the vendor call takes it: FP32 for 16-bit data (FP32 compute,
/// like our APIs), the data type otherwise.
#[derive(Clone, Copy)]
pub enum Scalar {
    F32(f32),
    F64(f64),
}

impl Scalar {
    pub fn new(ty: ValueType, v: f64) -> Scalar {
        match crate::compute_type(ty) {
            ValueType::F64 => Scalar::F64(v),
            _ => Scalar::F32(v as f32),
        }
    }

    pub fn ptr(&self) -> *const c_void {
        match self {
            Scalar::F32(v) => (v as *const f32).cast(),
            Scalar::F64(v) => (v as *const f64).cast(),
        }
    }
}

fn sparse_data_type(ty: ValueType) -> sp::cudaDataType {
    match ty {
        ValueType::F16 => sp::cudaDataType::CUDA_R_16F,
        ValueType::Bf16 => sp::cudaDataType::CUDA_R_16BF,
        ValueType::F32 => sp::cudaDataType::CUDA_R_32F,
        ValueType::F64 => sp::cudaDataType::CUDA_R_64F,
    }
}

fn sparse_compute_type(ty: ValueType) -> sp::cudaDataType {
    sparse_data_type(crate::compute_type(ty))
}

pub struct Cublas {
    handle: cb::cublasHandle_t,
}

impl Cublas {
    /// A handle on the harness's stream, default math mode: FP32 GEMM without TF32, FP16 GemmEx on
    /// tensor cores with FP32 accumulation.
    pub fn new(gpu: &Gpu) -> Outcome<Cublas> {
        gpu.bind()?;
        let mut handle = std::ptr::null_mut();
        cublas_check(unsafe { cb::cublasCreate_v2(&mut handle) }, "cublasCreate")?;
        let blas = Cublas { handle };
        cublas_check(unsafe { cb::cublasSetStream_v2(handle, gpu.raw_stream().cast()) }, "cublasSetStream")?;
        Ok(blas)
    }

    /// The name of the call `gemm` makes for a value type.
    pub fn gemm_name(ty: ValueType) -> &'static str {
        match ty {
            ValueType::F32 => "cublasSgemm",
            ValueType::F64 => "cublasDgemm",
            ValueType::F16 => "cublasGemmEx(16F, COMPUTE_32F)",
            ValueType::Bf16 => "cublasGemmEx(16BF, COMPUTE_32F)",
        }
    }

    /// C = α·A·B + β·C, column-major, no transposes. f32 → cublasSgemm, f64 → cublasDgemm, f16 /
    /// bf16 → cublasGemmEx with 16-bit A, B, C and CUBLAS_COMPUTE_32F (FP32 α, β and accumulation:
    /// the semantics of spammHgemm and of spammGemmEx on bf16; cublasHgemm would accumulate in FP16).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        ty: ValueType,
        (m, n, k): (usize, usize, usize),
        alpha: f64,
        a: u64,
        lda: usize,
        b: u64,
        ldb: usize,
        beta: f64,
        c: u64,
        ldc: usize,
    ) -> Outcome<()> {
        let op = cb::cublasOperation_t::CUBLAS_OP_N;
        let (m, n, k, lda, ldb, ldc) = (m as i32, n as i32, k as i32, lda as i32, ldb as i32, ldc as i32);
        let status = unsafe {
            match ty {
                ValueType::F32 => {
                    let (alpha, beta) = (alpha as f32, beta as f32);
                    cb::cublasSgemm_v2(
                        self.handle,
                        op,
                        op,
                        m,
                        n,
                        k,
                        &alpha,
                        a as *const f32,
                        lda,
                        b as *const f32,
                        ldb,
                        &beta,
                        c as *mut f32,
                        ldc,
                    )
                }
                ValueType::F64 => cb::cublasDgemm_v2(
                    self.handle,
                    op,
                    op,
                    m,
                    n,
                    k,
                    &alpha,
                    a as *const f64,
                    lda,
                    b as *const f64,
                    ldb,
                    &beta,
                    c as *mut f64,
                    ldc,
                ),
                ValueType::F16 | ValueType::Bf16 => {
                    let (alpha, beta) = (alpha as f32, beta as f32);
                    let data =
                        if ty == ValueType::F16 { cb::cudaDataType::CUDA_R_16F } else { cb::cudaDataType::CUDA_R_16BF };
                    cb::cublasGemmEx(
                        self.handle,
                        op,
                        op,
                        m,
                        n,
                        k,
                        (&alpha as *const f32).cast(),
                        a as *const c_void,
                        data,
                        lda,
                        b as *const c_void,
                        data,
                        ldb,
                        (&beta as *const f32).cast(),
                        c as *mut c_void,
                        data,
                        ldc,
                        cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        cb::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
                    )
                }
            }
        };
        cublas_check(status, Self::gemm_name(ty))
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        unsafe { cb::cublasDestroy_v2(self.handle) };
    }
}

pub struct Cusparse {
    handle: sp::cusparseHandle_t,
}

impl Cusparse {
    pub fn new(gpu: &Gpu) -> Outcome<Cusparse> {
        gpu.bind()?;
        let mut handle = std::ptr::null_mut();
        cusparse_check(unsafe { sp::cusparseCreate(&mut handle) }, "cusparseCreate")?;
        let s = Cusparse { handle };
        cusparse_check(unsafe { sp::cusparseSetStream(handle, gpu.raw_stream().cast()) }, "cusparseSetStream")?;
        Ok(s)
    }
}

impl Drop for Cusparse {
    fn drop(&mut self) {
        unsafe { sp::cusparseDestroy(self.handle) };
    }
}

/// A zero-based CSR matrix with 32-bit indices, on the device.
pub struct DeviceCsr {
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    pub row_ptr: DeviceBuffer,
    pub col_ind: DeviceBuffer,
    pub values: DeviceBuffer,
    pub ty: ValueType,
}

/// The descriptors of one call, destroyed together.
#[derive(Default)]
struct Descriptors {
    sparse: Vec<sp::cusparseSpMatDescr_t>,
    dense: Vec<sp::cusparseDnMatDescr_t>,
    vectors: Vec<sp::cusparseDnVecDescr_t>,
}

impl Descriptors {
    /// A sparse matrix descriptor made by `create` (the cuSPARSE call named `call`), destroyed with
    /// the others.
    fn sparse_matrix(
        &mut self,
        call: &str,
        create: impl FnOnce(&mut sp::cusparseSpMatDescr_t) -> sp::cusparseStatus_t,
    ) -> Outcome<sp::cusparseSpMatDescr_t> {
        let mut d = std::ptr::null_mut();
        cusparse_check(create(&mut d), call)?;
        self.sparse.push(d);
        Ok(d)
    }

    fn csr(&mut self, a: &DeviceCsr, values: u64) -> Outcome<sp::cusparseSpMatDescr_t> {
        self.sparse_matrix("cusparseCreateCsr", |d| unsafe {
            sp::cusparseCreateCsr(
                d,
                a.rows as i64,
                a.cols as i64,
                a.nnz as i64,
                a.row_ptr.ptr() as *mut c_void,
                a.col_ind.ptr() as *mut c_void,
                values as *mut c_void,
                sp::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sp::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sp::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                sparse_data_type(a.ty),
            )
        })
    }

    /// The CSC of a matrix whose transpose's CSR is `transpose` (its row pointers are the column
    /// pointers, its column indices the row indices).
    fn csc(&mut self, transpose: &DeviceCsr) -> Outcome<sp::cusparseSpMatDescr_t> {
        self.sparse_matrix("cusparseCreateCsc", |d| unsafe {
            sp::cusparseCreateCsc(
                d,
                transpose.cols as i64,
                transpose.rows as i64,
                transpose.nnz as i64,
                transpose.row_ptr.ptr() as *mut c_void,
                transpose.col_ind.ptr() as *mut c_void,
                transpose.values.ptr() as *mut c_void,
                sp::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sp::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sp::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                sparse_data_type(transpose.ty),
            )
        })
    }

    /// The row-sorted COO of the CSR matrix `a`, whose column indices and values it shares, with the
    /// row of each entry in `row_ind`.
    fn coo(&mut self, a: &DeviceCsr, row_ind: &DeviceBuffer) -> Outcome<sp::cusparseSpMatDescr_t> {
        self.sparse_matrix("cusparseCreateCoo", |d| unsafe {
            sp::cusparseCreateCoo(
                d,
                a.rows as i64,
                a.cols as i64,
                a.nnz as i64,
                row_ind.ptr() as *mut c_void,
                a.col_ind.ptr() as *mut c_void,
                a.values.ptr() as *mut c_void,
                sp::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sp::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                sparse_data_type(a.ty),
            )
        })
    }

    /// A row-major `rows × cols` dense matrix with leading dimension `ld`.
    fn row_major(
        &mut self,
        rows: usize,
        cols: usize,
        ld: usize,
        ptr: u64,
        ty: ValueType,
    ) -> Outcome<sp::cusparseDnMatDescr_t> {
        let mut d = std::ptr::null_mut();
        cusparse_check(
            unsafe {
                sp::cusparseCreateDnMat(
                    &mut d,
                    rows as i64,
                    cols as i64,
                    ld as i64,
                    ptr as *mut c_void,
                    sparse_data_type(ty),
                    sp::cusparseOrder_t::CUSPARSE_ORDER_ROW,
                )
            },
            "cusparseCreateDnMat",
        )?;
        self.dense.push(d);
        Ok(d)
    }

    fn vector(&mut self, len: usize, ptr: u64, ty: ValueType) -> Outcome<sp::cusparseDnVecDescr_t> {
        let mut d = std::ptr::null_mut();
        cusparse_check(
            unsafe { sp::cusparseCreateDnVec(&mut d, len as i64, ptr as *mut c_void, sparse_data_type(ty)) },
            "cusparseCreateDnVec",
        )?;
        self.vectors.push(d);
        Ok(d)
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        unsafe {
            for &d in &self.sparse {
                sp::cusparseDestroySpMat(d as _);
            }
            for &d in &self.dense {
                sp::cusparseDestroyDnMat(d as _);
            }
            for &d in &self.vectors {
                sp::cusparseDestroyDnVec(d as _);
            }
        }
    }
}

fn workspace(gpu: &Gpu, bytes: usize, call: &str) -> Outcome<DeviceBuffer> {
    gpu.zeros(bytes, &format!("the {call} workspace"))
}

/// The fastest of a vendor call's algorithms on one problem, and what each gave.
pub struct Fastest<Op> {
    /// The fastest algorithm's call, its result left in the output.
    pub op: Op,
    pub timing: Timing,
    /// Each algorithm's median time, or why it gave none, e.g. "CSR_ALG1 0.031 ms, CSR_ALG2 not
    /// supported".
    pub algorithms: String,
}

/// Sets each of `algorithms` up with `make` (outside the timing), times `run` with it, and runs the
/// fastest once more so that the output holds its result (the one ours is compared with). `label`
/// adds to an algorithm's name in the summary (what its setup lacked, say). `call` names the vendor
/// call in the error when none ran.
pub fn fastest<A: Copy, Op>(
    gpu: &Gpu,
    call: &str,
    algorithms: &[A],
    name: impl Fn(A) -> &'static str,
    make: impl Fn(A) -> Result<Op, VendorFailure>,
    run: impl Fn(&Op) -> Result<(), VendorFailure>,
    label: impl Fn(&Op) -> &'static str,
) -> Outcome<Fastest<Op>> {
    let mut best: Option<(Op, Timing)> = None;
    let mut summary = Vec::new();
    for &alg in algorithms {
        let timed = (|| -> Result<(Op, Timing), VendorFailure> {
            let op = make(alg)?;
            run(&op)?;
            let timing = gpu.time(|| run(&op).map_err(String::from)).map_err(VendorFailure::Failed)?;
            Ok((op, timing))
        })();
        match timed {
            Ok((op, timing)) => {
                summary.push(format!("{}{} {:.3} ms", name(alg), label(&op), timing.gpu_ms));
                if best.as_ref().is_none_or(|(_, fastest)| timing.gpu_ms < fastest.gpu_ms) {
                    best = Some((op, timing));
                }
            }
            Err(VendorFailure::NotSupported(_)) => summary.push(format!("{} not supported", name(alg))),
            Err(VendorFailure::Failed(why)) => summary.push(format!("{} failed: {why}", name(alg))),
        }
    }
    let algorithms = summary.join(", ");
    let (op, timing) = best.ok_or_else(|| format!("no algorithm of {call} ran: {algorithms}"))?;
    run(&op)?;
    Ok(Fastest { op, timing, algorithms })
}

/// The CSR algorithms of cusparseSpMM. Which is fastest depends on the matrix, the width and the
/// type, and a caller who cares picks it, so the harness times each one cuSPARSE accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmmAlg {
    Default,
    Csr1,
    Csr2,
    Csr3,
}

impl SpmmAlg {
    pub const ALL: [SpmmAlg; 4] = [SpmmAlg::Default, SpmmAlg::Csr1, SpmmAlg::Csr2, SpmmAlg::Csr3];

    /// The enumerator's name without its `CUSPARSE_SPMM_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            SpmmAlg::Default => "ALG_DEFAULT",
            SpmmAlg::Csr1 => "CSR_ALG1",
            SpmmAlg::Csr2 => "CSR_ALG2",
            SpmmAlg::Csr3 => "CSR_ALG3",
        }
    }

    fn raw(self) -> sp::cusparseSpMMAlg_t {
        match self {
            SpmmAlg::Default => sp::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT,
            SpmmAlg::Csr1 => sp::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG1,
            SpmmAlg::Csr2 => sp::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG2,
            SpmmAlg::Csr3 => sp::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3,
        }
    }

    /// Whether cusparseSpMM_preprocess speeds the algorithm's later calls up: CSR_ALG1 and CSR_ALG3,
    /// as cuSPARSE documents it; for the others it does nothing.
    pub fn wants_preprocessing(self) -> bool {
        matches!(self, SpmmAlg::Csr1 | SpmmAlg::Csr3)
    }
}

/// cusparseSpMM: C = α·A·B + β·C with A CSR, B and C row-major, one CSR algorithm, compute type FP32
/// for 16-bit and f32 data, FP64 for f64. The workspace, and cusparseSpMM_preprocess where the
/// algorithm gains from it, are set up at creation, outside the timing. Preprocessing is optional:
/// where cuSPARSE does not offer it for the operands, the algorithm runs without, as a caller's would.
pub struct SpMM<'a> {
    sparse: &'a Cusparse,
    descriptors: Descriptors,
    a: sp::cusparseSpMatDescr_t,
    b: sp::cusparseDnMatDescr_t,
    c: sp::cusparseDnMatDescr_t,
    alpha: Scalar,
    beta: Scalar,
    compute: sp::cudaDataType,
    pub alg: SpmmAlg,
    /// Whether cusparseSpMM_preprocess ran (the algorithm wants it and cuSPARSE offered it).
    pub preprocessed: bool,
    buffer: DeviceBuffer,
}

impl<'a> SpMM<'a> {
    /// B is `a.cols × n` (ld n), C `a.rows × n` (ld n), both row-major. An algorithm that does not
    /// take these operands is `NotSupported`.
    pub fn new(
        sparse: &'a Cusparse,
        gpu: &Gpu,
        a: &DeviceCsr,
        n: usize,
        b: u64,
        c: u64,
        alg: SpmmAlg,
    ) -> Result<SpMM<'a>, VendorFailure> {
        let mut descriptors = Descriptors::default();
        let da = descriptors.csr(a, a.values.ptr()).map_err(VendorFailure::Failed)?;
        let db = descriptors.row_major(a.cols, n, n, b, a.ty).map_err(VendorFailure::Failed)?;
        let dc = descriptors.row_major(a.rows, n, n, c, a.ty).map_err(VendorFailure::Failed)?;
        let (alpha, beta) = (Scalar::new(a.ty, 1.0), Scalar::new(a.ty, 0.0));
        let compute = sparse_compute_type(a.ty);
        let op = sp::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let mut bytes = 0usize;
        cusparse_status(
            unsafe {
                sp::cusparseSpMM_bufferSize(
                    sparse.handle,
                    op,
                    op,
                    alpha.ptr(),
                    da as _,
                    db as _,
                    beta.ptr(),
                    dc,
                    compute,
                    alg.raw(),
                    &mut bytes,
                )
            },
            "cusparseSpMM_bufferSize",
        )?;
        let buffer = workspace(gpu, bytes, "cusparseSpMM").map_err(VendorFailure::Failed)?;
        let mut preprocessed = false;
        if alg.wants_preprocessing() {
            let status = cusparse_status(
                unsafe {
                    sp::cusparseSpMM_preprocess(
                        sparse.handle,
                        op,
                        op,
                        alpha.ptr(),
                        da as _,
                        db as _,
                        beta.ptr(),
                        dc,
                        compute,
                        alg.raw(),
                        buffer.ptr() as *mut c_void,
                    )
                },
                "cusparseSpMM_preprocess",
            );
            match status {
                Ok(()) => preprocessed = true,
                Err(VendorFailure::NotSupported(_)) => {}
                Err(failure) => return Err(failure),
            }
        }
        Ok(SpMM { sparse, descriptors, a: da, b: db, c: dc, alpha, beta, compute, alg, preprocessed, buffer })
    }

    /// One product. An algorithm may report that it does not take the operands only here.
    pub fn run(&self) -> Result<(), VendorFailure> {
        let op = sp::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let _ = &self.descriptors;
        cusparse_status(
            unsafe {
                sp::cusparseSpMM(
                    self.sparse.handle,
                    op,
                    op,
                    self.alpha.ptr(),
                    self.a as _,
                    self.b as _,
                    self.beta.ptr(),
                    self.c,
                    self.compute,
                    self.alg.raw(),
                    self.buffer.ptr() as *mut c_void,
                )
            },
            "cusparseSpMM",
        )
    }
}

/// The algorithms of cusparseSpMV: the default, CSR_ALG1 (row-split) and CSR_ALG2 (merge-based,
/// balanced by nonzeros) for CSR, COO_ALG1 and COO_ALG2 for COO. As for SpMM, which is fastest
/// depends on the matrix and type, so the harness times each one cuSPARSE accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmvAlg {
    Default,
    Csr1,
    Csr2,
    Coo1,
    Coo2,
}

impl SpmvAlg {
    /// The algorithms that may take a matrix of this format (the CSR ones for CSC too, which
    /// cuSPARSE may refuse).
    pub fn for_format(matrix: &SpmvMatrix) -> &'static [SpmvAlg] {
        match matrix {
            SpmvMatrix::Csr(_) | SpmvMatrix::Csc { .. } => &[SpmvAlg::Default, SpmvAlg::Csr1, SpmvAlg::Csr2],
            SpmvMatrix::Coo { .. } => &[SpmvAlg::Default, SpmvAlg::Coo1, SpmvAlg::Coo2],
        }
    }

    /// The enumerator's name without its `CUSPARSE_SPMV_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            SpmvAlg::Default => "ALG_DEFAULT",
            SpmvAlg::Csr1 => "CSR_ALG1",
            SpmvAlg::Csr2 => "CSR_ALG2",
            SpmvAlg::Coo1 => "COO_ALG1",
            SpmvAlg::Coo2 => "COO_ALG2",
        }
    }

    fn raw(self) -> sp::cusparseSpMVAlg_t {
        match self {
            SpmvAlg::Default => sp::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
            SpmvAlg::Csr1 => sp::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG1,
            SpmvAlg::Csr2 => sp::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG2,
            SpmvAlg::Coo1 => sp::cusparseSpMVAlg_t::CUSPARSE_SPMV_COO_ALG1,
            SpmvAlg::Coo2 => sp::cusparseSpMVAlg_t::CUSPARSE_SPMV_COO_ALG2,
        }
    }
}

/// The sparse operand of [`SpMV`], in the format a caller of cuSPARSE would hand it over.
pub enum SpmvMatrix<'a> {
    Csr(&'a DeviceCsr),
    /// The CSC of A, given as the CSR of Aᵀ.
    Csc {
        transpose: &'a DeviceCsr,
    },
    /// The row-sorted COO of the CSR matrix `csr`: its column indices and values, with each entry's
    /// row in `row_ind`.
    Coo {
        csr: &'a DeviceCsr,
        row_ind: &'a DeviceBuffer,
    },
}

impl SpmvMatrix<'_> {
    /// Rows, columns and value type of A.
    fn shape(&self) -> (usize, usize, ValueType) {
        match self {
            SpmvMatrix::Csr(a) | SpmvMatrix::Coo { csr: a, .. } => (a.rows, a.cols, a.ty),
            SpmvMatrix::Csc { transpose } => (transpose.cols, transpose.rows, transpose.ty),
        }
    }
}

/// cusparseSpMV: y = α·A·x + β·y with A CSR, CSC or COO, one algorithm, compute type = value type (FP32
/// for 16-bit A, whose x is of A's type, since cuSPARSE takes no FP32 x with it, and y FP32). The
/// workspace and cusparseSpMV_preprocess (optional; it lets later calls reuse what an algorithm
/// learns about the matrix) are set up at creation, outside the timing; where cuSPARSE does not offer
/// preprocessing for the operands, the algorithm runs without, as a caller's would.
pub struct SpMV<'a> {
    sparse: &'a Cusparse,
    descriptors: Descriptors,
    a: sp::cusparseSpMatDescr_t,
    x: sp::cusparseDnVecDescr_t,
    y: sp::cusparseDnVecDescr_t,
    alpha: Scalar,
    beta: Scalar,
    compute: sp::cudaDataType,
    pub alg: SpmvAlg,
    buffer: DeviceBuffer,
}

impl<'a> SpMV<'a> {
    pub fn new(
        sparse: &'a Cusparse,
        gpu: &Gpu,
        a: &SpmvMatrix,
        x: u64,
        y: u64,
        alg: SpmvAlg,
    ) -> Result<SpMV<'a>, VendorFailure> {
        let mut descriptors = Descriptors::default();
        let da = match a {
            SpmvMatrix::Csr(a) => descriptors.csr(a, a.values.ptr()),
            SpmvMatrix::Csc { transpose } => descriptors.csc(transpose),
            SpmvMatrix::Coo { csr, row_ind } => descriptors.coo(csr, row_ind),
        }
        .map_err(VendorFailure::Failed)?;
        let (rows, cols, ty) = a.shape();
        let dx = descriptors.vector(cols, x, ty).map_err(VendorFailure::Failed)?;
        let dy = descriptors.vector(rows, y, crate::compute_type(ty)).map_err(VendorFailure::Failed)?;
        let (alpha, beta) = (Scalar::new(ty, 1.0), Scalar::new(ty, 0.0));
        let compute = sparse_compute_type(ty);
        let op = sp::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let mut bytes = 0usize;
        cusparse_status(
            unsafe {
                sp::cusparseSpMV_bufferSize(
                    sparse.handle,
                    op,
                    alpha.ptr(),
                    da as _,
                    dx as _,
                    beta.ptr(),
                    dy,
                    compute,
                    alg.raw(),
                    &mut bytes,
                )
            },
            "cusparseSpMV_bufferSize",
        )?;
        let buffer = workspace(gpu, bytes, "cusparseSpMV").map_err(VendorFailure::Failed)?;
        let preprocessed = cusparse_status(
            unsafe {
                sp::cusparseSpMV_preprocess(
                    sparse.handle,
                    op,
                    alpha.ptr(),
                    da as _,
                    dx as _,
                    beta.ptr(),
                    dy,
                    compute,
                    alg.raw(),
                    buffer.ptr() as *mut c_void,
                )
            },
            "cusparseSpMV_preprocess",
        );
        match preprocessed {
            Ok(()) | Err(VendorFailure::NotSupported(_)) => {}
            Err(failure) => return Err(failure),
        }
        Ok(SpMV { sparse, descriptors, a: da, x: dx, y: dy, alpha, beta, compute, alg, buffer })
    }

    pub fn run(&self) -> Result<(), VendorFailure> {
        let op = sp::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let _ = &self.descriptors;
        cusparse_status(
            unsafe {
                sp::cusparseSpMV(
                    self.sparse.handle,
                    op,
                    self.alpha.ptr(),
                    self.a as _,
                    self.x as _,
                    self.beta.ptr(),
                    self.y,
                    self.compute,
                    self.alg.raw(),
                    self.buffer.ptr() as *mut c_void,
                )
            },
            "cusparseSpMV",
        )
    }
}

/// cusparseSDDMM: C = α·(A·Bᵀ) ∘ spy(C) + β·C with C CSR (values written in the pattern's entry
/// order), A `m × k` and B `n × k` row-major (B used with CUSPARSE_OPERATION_TRANSPOSE), β = 0,
/// CUSPARSE_SDDMM_ALG_DEFAULT. cusparseSDDMM_preprocess runs once at creation, outside the timing.
pub struct Sddmm<'a> {
    sparse: &'a Cusparse,
    descriptors: Descriptors,
    a: sp::cusparseDnMatDescr_t,
    b: sp::cusparseDnMatDescr_t,
    c: sp::cusparseSpMatDescr_t,
    alpha: Scalar,
    beta: Scalar,
    compute: sp::cudaDataType,
    buffer: DeviceBuffer,
}

const SDDMM_ALG: sp::cusparseSDDMMAlg_t = sp::cusparseSDDMMAlg_t::CUSPARSE_SDDMM_ALG_DEFAULT;
const SDDMM_OPS: (sp::cusparseOperation_t, sp::cusparseOperation_t) =
    (sp::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE, sp::cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE);

impl<'a> Sddmm<'a> {
    /// `pattern` gives C's structure; its `values` array receives C's nnz values.
    pub fn new(sparse: &'a Cusparse, gpu: &Gpu, pattern: &DeviceCsr, k: usize, a: u64, b: u64) -> Outcome<Sddmm<'a>> {
        let ty = pattern.ty;
        let mut descriptors = Descriptors::default();
        let da = descriptors.row_major(pattern.rows, k, k, a, ty)?;
        let db = descriptors.row_major(pattern.cols, k, k, b, ty)?;
        let dc = descriptors.csr(pattern, pattern.values.ptr())?;
        let (alpha, beta) = (Scalar::new(ty, 1.0), Scalar::new(ty, 0.0));
        let compute = sparse_compute_type(ty);
        let mut bytes = 0usize;
        cusparse_check(
            unsafe {
                sp::cusparseSDDMM_bufferSize(
                    sparse.handle,
                    SDDMM_OPS.0,
                    SDDMM_OPS.1,
                    alpha.ptr(),
                    da as _,
                    db as _,
                    beta.ptr(),
                    dc,
                    compute,
                    SDDMM_ALG,
                    &mut bytes,
                )
            },
            "cusparseSDDMM_bufferSize",
        )?;
        let buffer = workspace(gpu, bytes, "cusparseSDDMM")?;
        cusparse_check(
            unsafe {
                sp::cusparseSDDMM_preprocess(
                    sparse.handle,
                    SDDMM_OPS.0,
                    SDDMM_OPS.1,
                    alpha.ptr(),
                    da as _,
                    db as _,
                    beta.ptr(),
                    dc,
                    compute,
                    SDDMM_ALG,
                    buffer.ptr() as *mut c_void,
                )
            },
            "cusparseSDDMM_preprocess",
        )?;
        Ok(Sddmm { sparse, descriptors, a: da, b: db, c: dc, alpha, beta, compute, buffer })
    }

    pub fn run(&self) -> Outcome<()> {
        let _ = &self.descriptors;
        cusparse_check(
            unsafe {
                sp::cusparseSDDMM(
                    self.sparse.handle,
                    SDDMM_OPS.0,
                    SDDMM_OPS.1,
                    self.alpha.ptr(),
                    self.a as _,
                    self.b as _,
                    self.beta.ptr(),
                    self.c,
                    self.compute,
                    SDDMM_ALG,
                    self.buffer.ptr() as *mut c_void,
                )
            },
            "cusparseSDDMM",
        )
    }
}

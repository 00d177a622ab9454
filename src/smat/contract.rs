//! What a backend does for SMaT. The family ([`super::SmatHandle`]) validates the CSR input, runs the
//! analysis (Jaccard reordering, the choice between tiles and CSR rows, both parts built) on the host
//! and keeps the analysed matrix; a backend makes a caller's CSR arrays readable on the host, takes
//! the analysed storage to where it multiplies ([`SmatBackend::prepare`]: kept in host memory, or
//! uploaded to a device) and runs SpMM with it. What a backend prepared is its own type, held by the matrix as a
//! [`PreparedBlocks`] and downcast by that backend only.

use super::{MatrixInfo, SmatMathMode, SmatMatrix, Storage};
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::scalar::Element;
use crate::types::{IndexBase, Layout};
use half::{bf16, f16};
use std::any::Any;
use std::borrow::Cow;
use std::os::raw::c_int;

/// An analysed matrix's blocks in the form the backend that analysed it multiplies from (host BCSR,
/// device-resident BCSR, ...): that backend's own type, which only it downcasts to
/// ([`SmatMatrix::blocks`]).
pub trait PreparedBlocks: Any + Send + Sync + std::fmt::Debug {
    /// The backend that prepared them, as messages name it ("CPU", "CUDA").
    fn backend_name(&self) -> &'static str;
}

/// The error for a matrix whose blocks a backend other than the handle's prepared; the handle runs
/// on `handle_runs_on` ("the CPU", "CUDA"). A matrix is used with the backend that analysed it.
pub fn foreign_matrix(a: &SmatMatrix, handle_runs_on: &str) -> Error {
    Error::invalid_value(format!(
        "argument A was analysed on the {} backend and the handle runs on {handle_runs_on}; a matrix is used with the backend that created it",
        a.prepared_by()
    ))
}

/// A caller's `rows × cols` CSR matrix by raw pointers (host memory, or device memory for the CUDA
/// backend), checked by the caller for size, NULL and alignment but not read: `row_ptr` holds
/// `rows + 1` entries, `col_ind` and `values` `nnz` each (and may be NULL when `nnz` is 0).
#[derive(Clone, Copy, Debug)]
pub struct RawCsr<T> {
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    pub row_ptr: *const c_int,
    pub col_ind: *const c_int,
    pub values: *const T,
    pub base: IndexBase,
}

/// A CSR matrix's arrays readable on the host: the caller's memory in place, or host copies.
pub struct HostCsr<'a, T: Clone> {
    pub row_ptr: Cow<'a, [c_int]>,
    pub col_ind: Cow<'a, [c_int]>,
    pub values: Cow<'a, [T]>,
}

impl<T: Copy> RawCsr<T> {
    /// The arrays as slices of the caller's memory.
    ///
    /// # Safety
    /// The arrays must be host memory readable for their lengths for `'a` (or have length 0).
    pub unsafe fn host<'a>(&self) -> HostCsr<'a, T> {
        unsafe {
            HostCsr {
                row_ptr: Cow::Borrowed(host_slice(self.row_ptr, self.rows + 1)),
                col_ind: Cow::Borrowed(host_slice(self.col_ind, self.nnz)),
                values: Cow::Borrowed(host_slice(self.values, self.nnz)),
            }
        }
    }
}

/// # Safety
/// As [`RawCsr::host`], for one array.
unsafe fn host_slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(ptr, len) } }
}

/// One `smatSpMM`, its arguments checked by the caller: `C = α·A·B + β·C` with B `A.cols × n` and C
/// `A.rows × n`, both dense in `layout` with leading dimensions `ldb` / `ldc`, at `b` / `c` (`b_len`
/// / `c_len` elements, not overlapping; host memory, or device memory for the CUDA backend).
#[derive(Clone, Copy, Debug)]
pub struct Product<T: Element> {
    pub alpha: T::Compute,
    pub beta: T::Compute,
    pub n: usize,
    pub b: *const T,
    pub ldb: usize,
    pub b_len: usize,
    pub c: *mut T,
    pub ldc: usize,
    pub c_len: usize,
    pub layout: Layout,
    /// How f32 tiles are multiplied; other types ignore it.
    pub math_mode: SmatMathMode,
}

/// The SMaT steps a backend executes for element type `T`.
pub trait SmatBackend<T: Element> {
    /// The CSR arrays readable on the host, for the analysis: the CPU backend reads them in place;
    /// the CUDA backend downloads those in memory of its device.
    ///
    /// # Safety
    /// The arrays must be readable for their lengths, in memory this backend accepts (host memory;
    /// the CUDA backend also takes memory of its device), while the returned arrays live.
    unsafe fn csr_to_host<'a>(&mut self, csr: &RawCsr<T>) -> Result<HostCsr<'a, T>>;

    /// Takes an analysed matrix's storage (tiles and CSR rows, each naming the caller's rows it
    /// produces) to where this backend multiplies with it.
    fn prepare(&mut self, info: &MatrixInfo, storage: Storage<T::Compute>) -> Result<Box<dyn PreparedBlocks>>;

    /// `C = α·A·B + β·C` with `a`'s blocks; rows of C in the caller's order. β = 0 never reads C.
    /// Blocks another backend prepared are [`foreign_matrix`], reported before anything is read.
    ///
    /// # Safety
    /// B and C must be readable (C also writable) for their lengths, in memory this backend accepts.
    unsafe fn spmm(&mut self, a: &SmatMatrix, product: &Product<T>) -> Result<()>;
}

/// The element types SMaT multiplies, each finding its contract in an executor.
pub trait SmatElement: Element {
    fn backend(executor: &mut dyn Executor) -> &mut dyn SmatBackend<Self>;
}

macro_rules! smat_element {
    ($($t:ty),*) => {$(
        impl SmatElement for $t {
            fn backend(executor: &mut dyn Executor) -> &mut dyn SmatBackend<$t> {
                executor
            }
        }
    )*};
}
smat_element!(f32, f64, f16, bf16);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Status;
    use crate::smat::{AnalysisSettings, SmatHandle};
    use crate::sparse::CsrMatrix;
    use crate::types::BackendKind;

    /// Blocks of a backend this machine may not have.
    #[derive(Debug)]
    struct OtherBlocks(&'static str);

    impl PreparedBlocks for OtherBlocks {
        fn backend_name(&self) -> &'static str {
            self.0
        }
    }

    /// A matrix with no blocks, its analysis done, whose blocks `backend` prepared.
    fn matrix_of(backend: &'static str) -> SmatMatrix {
        let csr = CsrMatrix::<f32>::from_triplets(3, 2, vec![(0, 1, 1.0)]);
        let view = csr.view();
        let super::super::Analysis { info, .. } = super::super::analyse(&view, &AnalysisSettings::default()).unwrap();
        SmatMatrix { info, blocks: Box::new(OtherBlocks(backend)) }
    }

    #[test]
    fn a_matrix_of_another_backend_is_reported_as_such() {
        let message = |a: &SmatMatrix, runs_on| foreign_matrix(a, runs_on).message;
        assert_eq!(
            message(&matrix_of("CUDA"), "the CPU"),
            "argument A was analysed on the CUDA backend and the handle runs on the CPU; a matrix is used with the backend that created it"
        );
        assert_eq!(
            message(&matrix_of("CPU"), "CUDA"),
            "argument A was analysed on the CPU backend and the handle runs on CUDA; a matrix is used with the backend that created it"
        );

        // The CPU executor finds blocks not its own before it reads anything.
        let mut h = SmatHandle::new().unwrap();
        h.core.set_backend(BackendKind::Cpu).unwrap();
        let b = [1.0f32; 2];
        let mut c = [7.0f32; 3];
        let product = Product::<f32> {
            alpha: 1.0,
            beta: 0.0,
            n: 1,
            b: b.as_ptr(),
            ldb: 1,
            b_len: 2,
            c: c.as_mut_ptr(),
            ldc: 1,
            c_len: 3,
            layout: Layout::RowMajor,
            math_mode: SmatMathMode::Default,
        };
        let error = unsafe { h.spmm(&matrix_of("CUDA"), &product) }.unwrap_err();
        assert_eq!(error.status, Status::InvalidValue);
        assert!(error.message.starts_with("argument A was analysed on the CUDA backend"), "{}", error.message);
        assert_eq!(c, [7.0; 3]);
    }
}

//! SMaT helpers shared by the CPU and GPU test suites: RAII handles and matrices, dense operand
//! shapes, unit roundoffs and the random sparse structures.

use super::{Rng, last_error};
use sparsegpu::capi::smat::*;
use sparsegpu::scalar::Element;
use sparsegpu::smat::{ReorderMode, StorageFormat};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{band_csr, block_csr, random_csr, rmat_csr};
use sparsegpu::{BackendKind, Layout, Status, ValueType};
use std::ptr::null_mut;

const SUCCESS: i32 = Status::Success as i32;

/// An SMaT handle on one backend, reordering mode and storage format, destroyed on drop.
pub struct Handle(pub smatHandle_t);

impl Handle {
    /// The default storage format (`SMAT_FORMAT_AUTO`).
    pub fn new(backend: BackendKind, mode: ReorderMode) -> Handle {
        Handle::with_format(backend, mode, StorageFormat::Auto)
    }

    pub fn with_format(backend: BackendKind, mode: ReorderMode, format: StorageFormat) -> Handle {
        let mut h = null_mut();
        assert_eq!(unsafe { smatCreate(&mut h) }, SUCCESS, "{}", last_error());
        assert_eq!(unsafe { smatSetBackend(h, backend as i32) }, SUCCESS, "{}", last_error());
        assert_eq!(unsafe { smatSetReorderMode(h, mode as i32) }, SUCCESS);
        assert_eq!(unsafe { smatSetFormat(h, format as i32) }, SUCCESS);
        Handle(h)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { smatDestroy(self.0) };
    }
}

/// An analysed SMaT matrix, destroyed on drop.
pub struct Matrix(pub smatMatrix_t);

impl Drop for Matrix {
    fn drop(&mut self) {
        unsafe { smatDestroyMatrix(self.0) };
    }
}

impl Matrix {
    pub fn info(&self) -> smatMatrixInfo_t {
        let mut info = smatMatrixInfo_t::default();
        assert_eq!(unsafe { smatGetMatrixInfo(self.0, &mut info) }, SUCCESS, "{}", last_error());
        info
    }
}

/// A dense operand stored in `layout` with leading dimension `ld`.
#[derive(Clone, Copy, Debug)]
pub struct Dense {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub layout: Layout,
}

impl Dense {
    pub fn random_ld(rng: &mut Rng, rows: usize, cols: usize, layout: Layout) -> Dense {
        let inner = if layout == Layout::RowMajor { cols } else { rows };
        Dense { rows, cols, ld: inner.max(1) + rng.below(3), layout }
    }
    pub fn index(&self, i: usize, j: usize) -> usize {
        if self.layout == Layout::RowMajor { i * self.ld + j } else { i + j * self.ld }
    }
    pub fn len(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else if self.layout == Layout::RowMajor {
            (self.rows - 1) * self.ld + self.cols
        } else {
            (self.cols - 1) * self.ld + self.rows
        }
    }
}

/// Unit roundoff of a type's storage and of the type it computes in.
pub fn roundoffs(vt: ValueType) -> (f64, f64) {
    match vt {
        ValueType::F16 => (2f64.powi(-11), 2f64.powi(-24)),
        ValueType::Bf16 => (2f64.powi(-8), 2f64.powi(-24)),
        ValueType::F32 => (2f64.powi(-24), 2f64.powi(-24)),
        ValueType::F64 => (2f64.powi(-53), 2f64.powi(-53)),
    }
}

/// A random sparse matrix (uniform, band, block-structured or R-MAT) and the name of its structure;
/// each dimension is one of `interesting` half the time, else below `limit`.
pub fn random_matrix<T: Element>(rng: &mut Rng, interesting: &[usize], limit: usize) -> (CsrMatrix<T>, &'static str) {
    let size = |rng: &mut Rng| {
        if rng.below(2) == 0 { interesting[rng.below(interesting.len())] } else { rng.below(limit) }
    };
    match rng.below(4) {
        0 => {
            let (rows, cols) = (size(rng), size(rng));
            let density = rng.range(0.0, 0.4);
            (random_csr(rng, rows, cols, density), "random")
        }
        1 => {
            let n = size(rng);
            let half_width = rng.below(6);
            (band_csr(rng, n, half_width), "band")
        }
        2 => {
            let (rows, cols) = (size(rng), size(rng));
            let block = 1 + rng.below(20);
            let (block_density, fill) = (rng.range(0.1, 0.6), rng.range(0.3, 1.0));
            (block_csr(rng, rows, cols, block, block_density, fill), "block")
        }
        _ => {
            let (scale, edge_factor) = (rng.below(7) as u32, 1 + rng.below(4));
            (rmat_csr(rng, scale, edge_factor), "rmat")
        }
    }
}

/// Row-major `Σ |a|` over each position's entries: the magnitude an error bound must use when
/// duplicates may be multiplied one by one (a sum of cancelling duplicates is small, its products'
/// rounding errors are not).
pub fn dense_abs<T: Element>(csr: &CsrMatrix<T>) -> Vec<f64> {
    let mut out = vec![0.0; csr.rows * csr.cols];
    for r in 0..csr.rows {
        for e in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
            out[r * csr.cols + csr.col_ind[e] as usize] += csr.values[e].to_f64().abs();
        }
    }
    out
}

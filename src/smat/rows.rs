//! The rows the analysis leaves to the CUDA cores: plain CSR over a subset of the caller's rows, in
//! increasing caller order, each row's entries as the caller gave them (duplicates are summed when
//! the kernel accumulates). Rows without entries are here too: they still get C = β·C.

use crate::alloc::{ZeroBits, try_collect};
use crate::chunks::gather_rows;
use crate::error::Result;
use crate::scalar::Element;
use crate::sparse::CsrRef;

#[derive(Clone, Debug)]
pub struct RowsCsr<S> {
    /// The caller's row of each stored row (increasing as [`build`] makes them).
    pub out_rows: Vec<u32>,
    /// `row_ptr[i]..row_ptr[i + 1]` are stored row `i`'s entries.
    pub row_ptr: Vec<usize>,
    /// Zero-based column of each entry.
    pub col_ind: Vec<u32>,
    /// Each entry's value in the compute type.
    pub values: Vec<S>,
}

impl<S> RowsCsr<S> {
    pub fn rows(&self) -> usize {
        self.out_rows.len()
    }

    pub fn entries(&self) -> usize {
        self.col_ind.len()
    }
}

impl<S: ZeroBits + Sync> RowsCsr<S> {
    /// The same rows in `order` (new position to old position): `out_rows` still names each row's
    /// row of C, but no longer increases.
    pub fn reordered(&self, order: &[u32]) -> Result<RowsCsr<S>> {
        let entries = |at: usize| self.row_ptr[order[at] as usize]..self.row_ptr[order[at] as usize + 1];
        let (row_ptr, col_ind, values) = gather_rows(
            order.len(),
            |at| entries(at).len(),
            |at, cols, vals| {
                cols.copy_from_slice(&self.col_ind[entries(at)]);
                vals.copy_from_slice(&self.values[entries(at)]);
            },
        )?;
        let out_rows = try_collect(order.len(), "the CSR rows", |at| self.out_rows[order[at] as usize])?;
        Ok(RowsCsr { out_rows, row_ptr, col_ind, values })
    }
}

/// The CSR of `csr`'s rows `out_rows` (increasing).
pub fn build<T: Element>(csr: &CsrRef<'_, T>, out_rows: Vec<u32>) -> Result<RowsCsr<T::Compute>> {
    let range = |i: usize| csr.range(out_rows[i] as usize);
    let (row_ptr, col_ind, values) = gather_rows(
        out_rows.len(),
        |i| range(i).len(),
        |i, cols, vals| {
            for ((col, val), e) in cols.iter_mut().zip(vals).zip(range(i)) {
                *col = csr.index(e) as u32;
                *val = csr.values[e].to_compute();
            }
        },
    )?;
    Ok(RowsCsr { out_rows, row_ptr, col_ind, values })
}

//! The rows the analysis leaves to the CUDA cores: plain CSR over a subset of the caller's rows, in
//! increasing caller order, each row's entries as the caller gave them (duplicates are summed when
//! the kernel accumulates). Rows without entries are here too: they still get C = β·C.

use super::chunks;
use crate::alloc::{try_vec, try_zeros};
use crate::error::Result;
use crate::scalar::Element;
use crate::sparse::CsrRef;
use rayon::prelude::*;

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

/// The CSR of `csr`'s rows `out_rows` (increasing), copied in parallel over runs of rows.
pub fn build<T: Element>(csr: &CsrRef<'_, T>, out_rows: Vec<u32>) -> Result<RowsCsr<T::Compute>> {
    let mut row_ptr = try_vec(out_rows.len() + 1, 0usize, "the CSR row pointers")?;
    for (i, &r) in out_rows.iter().enumerate() {
        row_ptr[i + 1] = row_ptr[i] + csr.range(r as usize).len();
    }
    let entries = row_ptr[out_rows.len()];
    let mut col_ind: Vec<u32> = try_zeros(entries, "the CSR column indices")?;
    let mut values: Vec<T::Compute> = try_zeros(entries, "the CSR values")?;
    let bounds = chunks::runs(out_rows.len(), |i| row_ptr[i]);
    let col_runs = chunks::split_by_runs(&mut col_ind, &bounds, |i| row_ptr[i]);
    let value_runs = chunks::split_by_runs(&mut values, &bounds, |i| row_ptr[i]);
    col_runs.into_par_iter().zip(value_runs).zip(bounds.par_windows(2)).for_each(|((cols, vals), run)| {
        let first = row_ptr[run[0]];
        for (i, &r) in out_rows.iter().enumerate().take(run[1]).skip(run[0]) {
            for (at, e) in (row_ptr[i] - first..).zip(csr.range(r as usize)) {
                cols[at] = csr.index(e) as u32;
                vals[at] = csr.values[e].to_compute();
            }
        }
    });
    Ok(RowsCsr { out_rows, row_ptr, col_ind, values })
}

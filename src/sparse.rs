//! Validated, borrowed views of caller-supplied sparse matrices (CSR, CSC, COO) in either index base.
//!
//! Validation is the single place that turns untrusted index arrays into something the families can
//! walk without bounds surprises: every index a view hands out is in range and zero-based.

use crate::error::{Error, Result};
use crate::types::IndexBase;
use rayon::prelude::*;
use std::ops::Range;

/// Positions a thread of the pool checks at least at a time, so that small arrays are checked
/// without the pool's overhead.
const CHECK_MIN_POSITIONS: usize = 4096;

/// The first i in 0..n where `fault(i)`, as a serial scan finds it, searched on the thread pool: a
/// structure check reads every index of the matrix (on one host thread, the CSR check of 134 M
/// entries had taken 268 ms, most of the time of creating an MSREP matrix of that size).
fn first_where(n: usize, fault: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    (0..n).into_par_iter().with_min_len(CHECK_MIN_POSITIONS).find_first(|&i| fault(i))
}

/// CSR, or CSC read as the CSR of the transpose: `outer` pointers over `inner` indices.
#[derive(Clone, Copy, Debug)]
pub struct CompressedRef<'a, T> {
    /// Rows for CSR, columns for CSC.
    pub outer_dim: usize,
    /// Columns for CSR, rows for CSC.
    pub inner_dim: usize,
    pub ptr: &'a [i32],
    pub idx: &'a [i32],
    pub values: &'a [T],
    pub base: IndexBase,
}

/// The names C callers know the arrays by, for messages.
#[derive(Clone, Copy, Debug)]
pub struct CompressedNames {
    pub ptr: &'static str,
    pub idx: &'static str,
    pub outer: &'static str,
    pub inner: &'static str,
}

pub const CSR_NAMES: CompressedNames = CompressedNames { ptr: "rowPtr", idx: "colInd", outer: "rows", inner: "cols" };
pub const CSC_NAMES: CompressedNames = CompressedNames { ptr: "colPtr", idx: "rowInd", outer: "cols", inner: "rows" };

/// The first thing wrong with a compressed structure: what every validation of one reports, on the
/// host or on a device, so that the messages read the same wherever it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StructureFault {
    /// `ptr[0]` is not the index base.
    FirstPointer { value: i32 },
    /// `ptr[outer_dim] - base` is not nnz.
    LastPointer { value: i32 },
    /// `ptr[at] < ptr[at - 1]`.
    Decreases { at: usize, value: i32, previous: i32 },
    /// `idx[at]` lies outside `[base, base + inner_dim)`.
    IndexOutOfRange { at: usize, value: i32 },
}

impl StructureFault {
    /// The fault described for a structure of `outer_dim` pointers' slices over `inner_dim`, `nnz`
    /// entries, in `base`.
    pub fn message(
        &self,
        names: CompressedNames,
        outer_dim: usize,
        inner_dim: usize,
        nnz: usize,
        base: IndexBase,
    ) -> String {
        let b = base.offset();
        let ptr = names.ptr;
        match *self {
            StructureFault::FirstPointer { value } => format!("{ptr}[0] = {value} but the index base is {b}"),
            StructureFault::LastPointer { value } => {
                format!("{ptr}[{outer_dim}] - base = {} does not match nnz = {nnz}", value as i64 - b)
            }
            StructureFault::Decreases { at, value, previous } => {
                format!("{ptr} decreases: {ptr}[{at}] = {value} < {ptr}[{}] = {previous}", at - 1)
            }
            StructureFault::IndexOutOfRange { at, value } => format!(
                "{}[{at}] = {value} is outside [{b}, {}) ({} = {inner_dim})",
                names.idx,
                inner_dim as i64 + b,
                names.inner
            ),
        }
    }

    /// [`StructureFault::message`] as an `INVALID_SPARSE_MATRIX` error.
    pub fn error(
        &self,
        names: CompressedNames,
        outer_dim: usize,
        inner_dim: usize,
        nnz: usize,
        base: IndexBase,
    ) -> Error {
        Error::invalid_sparse(self.message(names, outer_dim, inner_dim, nnz, base))
    }
}

pub type CsrRef<'a, T> = CompressedRef<'a, T>;

impl<'a, T> CompressedRef<'a, T> {
    /// Validates the structure: `ptr` has `outer_dim + 1` entries starting at the base and never
    /// decreasing, `ptr[outer_dim] - base` equals the number of values, every index lies in
    /// `[base, base + inner_dim)`, and, when `require_sorted`, indices strictly increase within each
    /// outer slice (sorted, no duplicates).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        outer_dim: usize,
        inner_dim: usize,
        ptr: &'a [i32],
        idx: &'a [i32],
        values: &'a [T],
        base: IndexBase,
        require_sorted: bool,
        names: CompressedNames,
    ) -> Result<Self> {
        let b = base.offset();
        let nnz = values.len();
        if ptr.len() != outer_dim + 1 {
            return Err(Error::internal(format!(
                "{} has {} entries, expected {}",
                names.ptr,
                ptr.len(),
                outer_dim + 1
            )));
        }
        if idx.len() != nnz {
            return Err(Error::internal(format!("{} has {} entries, values has {nnz}", names.idx, idx.len())));
        }
        let fault = |fault: StructureFault| fault.error(names, outer_dim, inner_dim, nnz, base);
        if ptr[0] as i64 != b {
            return Err(fault(StructureFault::FirstPointer { value: ptr[0] }));
        }
        if let Some(o) = first_where(outer_dim, |o| ptr[o + 1] < ptr[o]) {
            return Err(fault(StructureFault::Decreases { at: o + 1, value: ptr[o + 1], previous: ptr[o] }));
        }
        if ptr[outer_dim] as i64 - b != nnz as i64 {
            return Err(fault(StructureFault::LastPointer { value: ptr[outer_dim] }));
        }
        // The first fault of outer slice o, in entry order.
        let slice_fault = |o: usize| -> Option<Error> {
            let range = (ptr[o] as i64 - b) as usize..(ptr[o + 1] as i64 - b) as usize;
            let mut prev: i64 = -1;
            for e in range {
                let i = idx[e] as i64 - b;
                if i < 0 || i >= inner_dim as i64 {
                    return Some(fault(StructureFault::IndexOutOfRange { at: e, value: idx[e] }));
                }
                if require_sorted && i <= prev {
                    return Some(Error::invalid_sparse(format!(
                        "{} is not strictly increasing within {} {o} (entry {e}); this operation requires sorted indices without duplicates",
                        names.idx,
                        &names.outer[..names.outer.len() - 1]
                    )));
                }
                prev = i;
            }
            None
        };
        if let Some(error) = first_where(outer_dim, |o| slice_fault(o).is_some()).and_then(slice_fault) {
            return Err(error);
        }
        Ok(CompressedRef { outer_dim, inner_dim, ptr, idx, values, base })
    }

    #[inline]
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Zero-based positions of outer slice `o`'s entries.
    #[inline]
    pub fn range(&self, o: usize) -> Range<usize> {
        let b = self.base.offset() as i32;
        (self.ptr[o] - b) as usize..(self.ptr[o + 1] - b) as usize
    }

    /// Zero-based inner index of entry `e`.
    #[inline]
    pub fn index(&self, e: usize) -> usize {
        (self.idx[e] - self.base.offset() as i32) as usize
    }
}

/// Coordinate format; entry `e` is (`row_ind[e]`, `col_ind[e]`, `values[e]`).
#[derive(Clone, Copy, Debug)]
pub struct CooRef<'a, T> {
    pub rows: usize,
    pub cols: usize,
    pub row_ind: &'a [i32],
    pub col_ind: &'a [i32],
    pub values: &'a [T],
    pub base: IndexBase,
}

impl<'a, T> CooRef<'a, T> {
    /// Validates every index against the shape; with `require_row_sorted`, rows must not decrease.
    pub fn new(
        rows: usize,
        cols: usize,
        row_ind: &'a [i32],
        col_ind: &'a [i32],
        values: &'a [T],
        base: IndexBase,
        require_row_sorted: bool,
    ) -> Result<Self> {
        let b = base.offset();
        if row_ind.len() != values.len() || col_ind.len() != values.len() {
            return Err(Error::internal("COO arrays differ in length"));
        }
        // The fault of entry e, if any.
        let entry_fault = |e: usize| -> Option<Error> {
            let r = row_ind[e] as i64 - b;
            let c = col_ind[e] as i64 - b;
            if r < 0 || r >= rows as i64 {
                return Some(Error::invalid_sparse(format!(
                    "rowInd[{e}] = {} is outside [{b}, {}) (rows = {rows})",
                    row_ind[e],
                    rows as i64 + b
                )));
            }
            if c < 0 || c >= cols as i64 {
                return Some(Error::invalid_sparse(format!(
                    "colInd[{e}] = {} is outside [{b}, {}) (cols = {cols})",
                    col_ind[e],
                    cols as i64 + b
                )));
            }
            if require_row_sorted && e > 0 && row_ind[e] < row_ind[e - 1] {
                return Some(Error::invalid_sparse(format!(
                    "rowInd is not sorted: rowInd[{e}] = {} < rowInd[{}] = {}; this operation requires COO sorted by row",
                    row_ind[e],
                    e - 1,
                    row_ind[e - 1]
                )));
            }
            None
        };
        if let Some(error) = first_where(values.len(), |e| entry_fault(e).is_some()).and_then(entry_fault) {
            return Err(error);
        }
        Ok(CooRef { rows, cols, row_ind, col_ind, values, base })
    }

    #[inline]
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    #[inline]
    pub fn row(&self, e: usize) -> usize {
        (self.row_ind[e] as i64 - self.base.offset()) as usize
    }

    #[inline]
    pub fn col(&self, e: usize) -> usize {
        (self.col_ind[e] as i64 - self.base.offset()) as usize
    }
}

/// An owned zero-based CSR matrix: what generators and readers produce.
#[derive(Clone, Debug, PartialEq)]
pub struct CsrMatrix<T> {
    pub rows: usize,
    pub cols: usize,
    pub row_ptr: Vec<i32>,
    pub col_ind: Vec<i32>,
    pub values: Vec<T>,
}

impl<T: Copy> CsrMatrix<T> {
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Builds from (row, col, value) triplets; duplicates are kept, columns sorted within rows.
    pub fn from_triplets(rows: usize, cols: usize, mut triplets: Vec<(usize, usize, T)>) -> Self {
        triplets.sort_by_key(|&(r, c, _)| (r, c));
        let mut row_ptr = vec![0i32; rows + 1];
        for &(r, _, _) in &triplets {
            row_ptr[r + 1] += 1;
        }
        for r in 0..rows {
            row_ptr[r + 1] += row_ptr[r];
        }
        CsrMatrix {
            rows,
            cols,
            row_ptr,
            col_ind: triplets.iter().map(|t| t.1 as i32).collect(),
            values: triplets.iter().map(|t| t.2).collect(),
        }
    }

    /// A validated view (zero-based, structure is correct by construction).
    pub fn view(&self) -> CsrRef<'_, T> {
        CompressedRef {
            outer_dim: self.rows,
            inner_dim: self.cols,
            ptr: &self.row_ptr,
            idx: &self.col_ind,
            values: &self.values,
            base: IndexBase::Zero,
        }
    }

    /// The same matrix in CSC: (colPtr, rowInd, values), rows sorted within columns.
    pub fn to_csc(&self) -> (Vec<i32>, Vec<i32>, Vec<T>) {
        let t = self.transpose();
        (t.row_ptr, t.col_ind, t.values)
    }

    /// The same matrix in row-sorted COO: (rowInd, colInd, values).
    pub fn to_coo(&self) -> (Vec<i32>, Vec<i32>, Vec<T>) {
        (self.row_indices(), self.col_ind.clone(), self.values.clone())
    }

    /// The row of each entry: the row indices of the row-sorted COO that shares `col_ind` and
    /// `values` with this CSR.
    pub fn row_indices(&self) -> Vec<i32> {
        let mut row_ind = Vec::with_capacity(self.nnz());
        for r in 0..self.rows {
            row_ind.extend(std::iter::repeat_n(r as i32, (self.row_ptr[r + 1] - self.row_ptr[r]) as usize));
        }
        row_ind
    }

    /// Aᵀ in CSR (so A's CSC), by a counting sort: each row of Aᵀ holds its entries in the order of
    /// A's rows, as `from_triplets` of the transposed triplets would.
    pub fn transpose(&self) -> CsrMatrix<T> {
        let mut row_ptr = vec![0i32; self.cols + 1];
        for &c in &self.col_ind {
            row_ptr[c as usize + 1] += 1;
        }
        for c in 0..self.cols {
            row_ptr[c + 1] += row_ptr[c];
        }
        let mut next: Vec<i32> = row_ptr[..self.cols].to_vec();
        let mut col_ind = vec![0i32; self.nnz()];
        // Every slot is written once below (the counts cover each entry).
        let mut values = self.values.clone();
        for r in 0..self.rows {
            for e in self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize {
                let c = self.col_ind[e] as usize;
                let at = next[c] as usize;
                next[c] += 1;
                col_ind[at] = r as i32;
                values[at] = self.values[e];
            }
        }
        CsrMatrix { rows: self.cols, cols: self.rows, row_ptr, col_ind, values }
    }

    /// Row-major dense copy in f64 (duplicates summed), for references.
    pub fn to_dense_f64(&self) -> Vec<f64>
    where
        T: crate::scalar::Element,
    {
        let mut d = vec![0.0; self.rows * self.cols];
        for r in 0..self.rows {
            for e in self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize {
                d[r * self.cols + self.col_ind[e] as usize] += self.values[e].to_f64();
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_matches_the_transposed_triplets() {
        // Unsorted columns within rows, a duplicate, an empty row and an empty column.
        let triplets = vec![(0, 3, 1.0), (0, 1, 2.0), (2, 1, 3.0), (2, 1, 4.0), (3, 0, 5.0), (3, 3, 6.0)];
        let mut a = CsrMatrix::from_triplets(4, 5, triplets.clone());
        a.col_ind.swap(0, 1);
        a.values.swap(0, 1);
        let want = CsrMatrix::from_triplets(5, 4, triplets.iter().map(|&(r, c, v)| (c, r, v)).collect());
        assert_eq!(a.transpose(), want);
        assert_eq!(CsrMatrix::<f64>::from_triplets(0, 3, vec![]).transpose(), CsrMatrix::from_triplets(3, 0, vec![]));
    }

    /// Checked in parallel, a structure with several faults far apart (each part of the pool's work
    /// finding one) still reports the first in entry order, as a serial scan would.
    #[test]
    fn checks_report_the_first_of_many_faults() {
        let rows = 200_000;
        let ptr: Vec<i32> = (0..=rows as i32).map(|r| 3 * r).collect();
        let good: Vec<i32> = (0..3 * rows as i32).map(|e| e % 3 + e / 3 % 7).collect();
        let values = vec![0.0f32; good.len()];
        let check = |idx: &[i32], ptr: &[i32], sorted: bool| {
            CompressedRef::new(rows, 10, ptr, idx, &values, IndexBase::Zero, sorted, CSR_NAMES).err().map(|e| e.message)
        };
        assert_eq!(check(&good, &ptr, true), None);
        let mut idx = good.clone();
        for (e, value) in [(3 * 180_000 + 1, -1), (3 * 150_000 + 2, 10), (3 * 190_000, 99)] {
            idx[e] = value;
        }
        assert_eq!(check(&idx, &ptr, false).as_deref(), Some("colInd[450002] = 10 is outside [0, 10) (cols = 10)"));
        // An unsorted row before the first index out of range.
        idx.swap(3 * 120_000, 3 * 120_000 + 1);
        assert!(check(&idx, &ptr, true).is_some_and(|m| m.contains("within row 120000 (entry 360001)")));
        assert_eq!(check(&idx, &ptr, false).as_deref(), Some("colInd[450002] = 10 is outside [0, 10) (cols = 10)"));
        let mut decreasing = ptr.clone();
        decreasing[170_000] = decreasing[169_999] - 1;
        decreasing[130_000] = decreasing[129_999] - 2;
        assert!(
            check(&good, &decreasing, false).is_some_and(|m| m.contains("rowPtr[130000]")),
            "{:?}",
            check(&good, &decreasing, false)
        );

        let row_ind: Vec<i32> = (0..3 * rows as i32).map(|e| e / 3).collect();
        let coo = |row_ind: &[i32], col_ind: &[i32]| {
            CooRef::new(rows, 10, row_ind, col_ind, &values, IndexBase::Zero, true).err().map(|e| e.message)
        };
        assert_eq!(coo(&row_ind, &good), None);
        let mut unsorted = row_ind.clone();
        unsorted[500_000] = 0;
        assert_eq!(
            coo(&unsorted, &idx).as_deref(),
            Some("colInd[450002] = 10 is outside [0, 10) (cols = 10)"),
            "the first fault is a column's"
        );
        unsorted[400_000] = 0;
        assert!(coo(&unsorted, &idx).is_some_and(|m| m.starts_with("rowInd is not sorted: rowInd[400000] = 0")));
    }
}

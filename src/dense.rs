//! Strided views of dense matrices, shared by every family.
//!
//! A view is (rows, cols, row stride, column stride) over a slice, so column-major with a leading
//! dimension, row-major, and transposes are all the same type.

use crate::error::{Error, Result};
use crate::types::{Layout, Operation};

/// Checks a stored matrix's leading dimension and returns the number of elements the slice must hold.
/// `rows × cols` is the matrix as stored (before any transpose); `ld` is the distance between
/// consecutive columns (column-major) or rows (row-major) and must be at least max(1, rows) or
/// max(1, cols) respectively, as BLAS requires. Messages name the argument (`ld` + the lower-case
/// name).
pub fn required_len(rows: usize, cols: usize, ld: usize, layout: Layout, name: &str) -> Result<usize> {
    let (outer, inner) = match layout {
        Layout::ColMajor => (cols, rows),
        Layout::RowMajor => (rows, cols),
    };
    let ld_name = format!("ld{}", name.to_ascii_lowercase());
    if ld < inner.max(1) {
        return Err(Error::invalid_size(format!(
            "argument {ld_name} = {ld} must be at least max(1, {} of {name}) = {}",
            if layout == Layout::ColMajor { "rows" } else { "columns" },
            inner.max(1)
        )));
    }
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    (outer - 1).checked_mul(ld).and_then(|x| x.checked_add(inner)).ok_or_else(|| {
        Error::invalid_size(format!("argument {name} is too large to address ({rows} x {cols}, {ld_name} = {ld})"))
    })
}

/// Shape of `op(X)` for a stored `rows × cols` matrix.
pub fn op_shape(op: Operation, rows: usize, cols: usize) -> (usize, usize) {
    match op {
        Operation::N => (rows, cols),
        Operation::T => (cols, rows),
    }
}

#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a, T: Copy> MatRef<'a, T> {
    /// A stored matrix in the given layout with leading dimension `ld`.
    pub fn new(data: &'a [T], rows: usize, cols: usize, ld: usize, layout: Layout) -> Self {
        let (row_stride, col_stride) = layout.strides(ld);
        MatRef { data, rows, cols, row_stride, col_stride }
    }

    /// A BLAS column-major operand `op(X)` where X is stored `stored_rows × stored_cols` with `ld`.
    pub fn col_major_op(data: &'a [T], op: Operation, stored_rows: usize, stored_cols: usize, ld: usize) -> Self {
        let m = Self::new(data, stored_rows, stored_cols, ld, Layout::ColMajor);
        match op {
            Operation::N => m,
            Operation::T => m.t(),
        }
    }

    pub fn t(self) -> Self {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    #[inline]
    pub fn index(&self, i: usize, j: usize) -> usize {
        i * self.row_stride + j * self.col_stride
    }

    #[inline]
    pub fn get(&self, i: usize, j: usize) -> T {
        self.data[self.index(i, j)]
    }
}

#[derive(Debug)]
pub struct MatMut<'a, T> {
    pub data: &'a mut [T],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a, T: Copy> MatMut<'a, T> {
    pub fn new(data: &'a mut [T], rows: usize, cols: usize, ld: usize, layout: Layout) -> Self {
        let (row_stride, col_stride) = layout.strides(ld);
        MatMut { data, rows, cols, row_stride, col_stride }
    }

    #[inline]
    pub fn index(&self, i: usize, j: usize) -> usize {
        i * self.row_stride + j * self.col_stride
    }

    #[inline]
    pub fn get(&self, i: usize, j: usize) -> T {
        self.data[self.index(i, j)]
    }

    #[inline]
    pub fn set(&mut self, i: usize, j: usize, v: T) {
        let idx = self.index(i, j);
        self.data[idx] = v;
    }

    pub fn as_ref(&self) -> MatRef<'_, T> {
        MatRef {
            data: self.data,
            rows: self.rows,
            cols: self.cols,
            row_stride: self.row_stride,
            col_stride: self.col_stride,
        }
    }
}

/// BLAS's update of one output element: `α·acc + β·c`, where β = 0 ignores (does not read) `c`.
#[inline]
pub fn axpby<T: crate::scalar::ComputeScalar>(alpha: T, acc: T, beta: T, c: T) -> T {
    if beta == T::ZERO { alpha * acc } else { alpha * acc + beta * c }
}

//! MSREP SpMV on the CPU: one rayon task per partition (standing in for one GPU each), then the merge
//! of `crate::msrep::merge`. Every partition reads only its own resident copy of its nonzeros. Values
//! stored as `T` are multiplied and summed in `T::Compute` (16-bit values in f32).

use super::CpuExecutor;
use crate::error::{Error, Result};
use crate::log;
use crate::msrep::contract::MsrepBackend;
use crate::msrep::merge::{RowSegment, finish, row_segments, scale};
use crate::msrep::{Partition, PartitionData, PartitionedMatrix};
use crate::scalar::{ComputeScalar, Element};
use crate::types::SparseFormat;
use rayon::prelude::*;
use std::ops::Range;

/// `y = α·A·x + β·y`; `x` has `cols` elements, `y` has `rows`. With β = 0, y is not read.
pub fn spmv<T: Element>(
    a: &mut PartitionedMatrix<T>,
    alpha: T::Compute,
    x: &[T::Compute],
    beta: T::Compute,
    y: &mut [T::Compute],
) -> Result<()> {
    if x.len() != a.cols || y.len() != a.rows {
        return Err(Error::internal(format!(
            "SpMV of a {}x{} matrix got x of {} and y of {} elements",
            a.rows,
            a.cols,
            x.len(),
            y.len()
        )));
    }
    match a.format {
        SparseFormat::Csr | SparseFormat::Coo => row_partitioned_spmv(a, alpha, x, beta, y),
        SparseFormat::Csc => column_partitioned_spmv(a, alpha, x, beta, y),
    }
    Ok(())
}

/// pCSR / pCOO: partitions finish their exclusive rows in place and hand back the partial sums of
/// their shared rows; the merge then finishes shared and uncovered rows with β applied once.
fn row_partitioned_spmv<T: Element>(
    a: &PartitionedMatrix<T>,
    alpha: T::Compute,
    x: &[T::Compute],
    beta: T::Compute,
    y: &mut [T::Compute],
) {
    let bounds: Vec<_> = a.partitions.iter().map(|p| p.bounds).collect();
    let mut exclusive: Vec<&mut [T::Compute]> = (0..a.partitions.len()).map(|_| Default::default()).collect();
    let mut merged: Vec<(Range<usize>, &mut [T::Compute])> = Vec::new();
    let mut rest = y;
    for segment in row_segments(&bounds, a.rows) {
        let rows = match &segment {
            RowSegment::Exclusive { rows, .. } | RowSegment::Merged { rows } => rows.clone(),
        };
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(rows.len());
        rest = tail;
        match segment {
            RowSegment::Exclusive { partition, .. } => exclusive[partition] = head,
            RowSegment::Merged { rows } => merged.push((rows, head)),
        }
    }

    let shared_partials: Vec<Vec<(usize, T::Compute)>> = a
        .partitions
        .par_iter()
        .zip(exclusive.into_par_iter())
        .map(|(p, own)| partition_rows(p, alpha, x, beta, own))
        .collect();

    merged.par_iter_mut().for_each(|(_, ys)| ys.iter_mut().for_each(|v| *v = scale(beta, v)));
    for (row, sum) in shared_partials.into_iter().flatten() {
        // Merged segments are in row order; a shared row always lies in one of them.
        let k = merged.partition_point(|(rows, _)| rows.end <= row);
        let (rows, ys) = &mut merged[k];
        ys[row - rows.start] += alpha * sum;
    }
}

/// Rows per parallel task inside one partition, so a single large partition (one device) still
/// uses every core.
const ROW_CHUNK: usize = 2048;

/// One partition's SpMV over its row span: exclusive rows are finished into `own` (which starts at
/// the first exclusive row), the raw sums of shared rows are returned as (row, sum).
fn partition_rows<T: Element>(
    p: &Partition<T>,
    alpha: T::Compute,
    x: &[T::Compute],
    beta: T::Compute,
    own: &mut [T::Compute],
) -> Vec<(usize, T::Compute)> {
    let b = &p.bounds;
    let first_own = b.exclusive_majors().start - b.start_major;
    own.par_chunks_mut(ROW_CHUNK).enumerate().for_each(|(chunk, ys)| {
        let first = first_own + chunk * ROW_CHUNK;
        local_row_sums(&p.data, first..first + ys.len(), x, |k, sum| ys[k] = finish(alpha, sum, beta, &ys[k]));
    });
    let mut shared = Vec::with_capacity(2);
    for row in b.shared_majors() {
        let j = row - b.start_major;
        local_row_sums(&p.data, j..j + 1, x, |_, sum| shared.push((row, sum)));
    }
    shared
}

/// Calls `emit(k, Σ a·x)` for the k-th of the partition's local rows `rows`, in order, including
/// rows without entries (sum 0) so every row of the range is finished.
fn local_row_sums<T: Element>(
    data: &PartitionData<T>,
    rows: Range<usize>,
    x: &[T::Compute],
    mut emit: impl FnMut(usize, T::Compute),
) {
    match data {
        PartitionData::Compressed { local_ptr, minor_ind, values } => {
            for (k, j) in rows.enumerate() {
                let entries = local_ptr[j] as usize..local_ptr[j + 1] as usize;
                let mut sum = T::Compute::ZERO;
                for (v, c) in values[entries.clone()].iter().zip(&minor_ind[entries]) {
                    sum += v.to_compute() * x[*c as usize];
                }
                emit(k, sum);
            }
        }
        PartitionData::Coordinate { local_row, col_ind, values } => {
            // Rows are sorted: find the range's first entry once, then walk.
            let mut e = local_row.partition_point(|&r| (r as usize) < rows.start);
            for (k, j) in rows.enumerate() {
                let mut sum = T::Compute::ZERO;
                while e < local_row.len() && local_row[e] as usize == j {
                    sum += values[e].to_compute() * x[col_ind[e] as usize];
                    e += 1;
                }
                emit(k, sum);
            }
        }
    }
}

/// pCSC (Algorithm 5): each non-empty partition scatters its columns into its own full-length partial
/// vector; the vectors are summed row by row and `y = α·Σ + β·y` is applied once.
fn column_partitioned_spmv<T: Element>(
    a: &mut PartitionedMatrix<T>,
    alpha: T::Compute,
    x: &[T::Compute],
    beta: T::Compute,
    y: &mut [T::Compute],
) {
    let PartitionedMatrix { partitions, column_partials, .. } = a;
    let non_empty: Vec<_> = partitions.iter().filter(|p| p.bounds.nnz() > 0).zip(column_partials.iter_mut()).collect();
    non_empty.into_par_iter().for_each(|(p, partial)| {
        partial.fill(T::Compute::ZERO);
        let PartitionData::Compressed { local_ptr, minor_ind, values } = &p.data else {
            unreachable!("pCSC partitions are always built in the compressed layout")
        };
        for j in 0..p.bounds.major_count() {
            let xj = x[p.bounds.start_major + j];
            let entries = local_ptr[j] as usize..local_ptr[j + 1] as usize;
            for (v, r) in values[entries.clone()].iter().zip(&minor_ind[entries]) {
                partial[*r as usize] += v.to_compute() * xj;
            }
        }
    });
    const CHUNK: usize = 4096;
    let partials: &[Vec<T::Compute>] = column_partials;
    y.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, ys)| {
        for (k, slot) in ys.iter_mut().enumerate() {
            let row = chunk * CHUNK + k;
            let sum = partials.iter().fold(T::Compute::ZERO, |s, partial| s + partial[row]);
            *slot = finish(alpha, sum, beta, slot);
        }
    });
}

impl<T: Element> MsrepBackend<T> for CpuExecutor {
    /// Nothing to do: the CPU computes on the matrix's host partitions.
    fn place(&mut self, _a: &mut PartitionedMatrix<T>) -> Result<()> {
        Ok(())
    }

    unsafe fn spmv(
        &mut self,
        a: &mut PartitionedMatrix<T>,
        alpha: T::Compute,
        x: *const T::Compute,
        beta: T::Compute,
        y: *mut T::Compute,
    ) -> Result<()> {
        // SAFETY: host memory of these lengths, not overlapping (the contract).
        let x = if a.cols == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(x, a.cols) } };
        let y = if a.rows == 0 { &mut [][..] } else { unsafe { std::slice::from_raw_parts_mut(y, a.rows) } };
        log::note(|| match a.format {
            SparseFormat::Csc => "kernel: a task per partition into its own partial vector, summed row by row".into(),
            _ => format!(
                "kernel: a task per partition, its rows in chunks of {ROW_CHUNK}; rows cut between partitions merged \
                 after"
            ),
        });
        spmv(a, alpha, x, beta, y)
    }
}

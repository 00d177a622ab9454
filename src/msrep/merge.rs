//! Merging partial results into `y = α·A·x + β·y`.
//!
//! pCSR / pCOO: partition `p` produces `α·A_p·x` for its row span. Rows are of three kinds:
//! - rows inside exactly one partition's span and not split ([`PartitionBounds::exclusive_majors`]):
//!   that partition finishes them in place, `y = α·s + β·y`, concurrently with the others;
//! - rows split between partitions (a `start_flag` boundary) and rows no partition spans (empty rows
//!   between or around partitions): "merged rows", finished after all partitions ran as
//!   `y = β·y + Σ_p α·s_p`.
//!
//! The paper's Algorithm 3 instead lets every partition's kernel compute `α·A_p·x + β·y` over its whole
//! span, copies the partial vectors into y, and subtracts `β·y_tmp` at a flagged start row to undo the
//! second application of β. We apply β exactly once per row by construction: partitions never touch
//! y on shared rows, the merge applies β once there. That is the same result without the
//! cancellation (`β·y − β·y` is not 0 when `β·y` overflows, and is NaN when y holds NaN with β = 0,
//! where BLAS semantics say y must not be read), and it also covers the paper's unstated cases: a row
//! split over three or more partitions and rows that belong to no partition at all.
//!
//! pCSC: every partition produces a full-length partial vector over its columns; they are summed and
//! `y = α·Σ + β·y` is applied once per row (Algorithm 5).

use super::partition::PartitionBounds;
use crate::scalar::ComputeScalar;
use std::ops::Range;

/// A consecutive run of rows of y and who finishes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowSegment {
    /// Rows only partition `partition` contributes to; it writes them in place.
    Exclusive { partition: usize, rows: Range<usize> },
    /// Shared or uncovered rows, finished by the merge.
    Merged { rows: Range<usize> },
}

/// Cuts `0..rows` into segments, in increasing row order, covering every row exactly once.
/// Exclusive segments of empty partitions are empty and left out.
pub fn row_segments(bounds: &[PartitionBounds], rows: usize) -> Vec<RowSegment> {
    let mut segments = Vec::with_capacity(2 * bounds.len() + 1);
    let mut cursor = 0;
    for (partition, b) in bounds.iter().enumerate() {
        let own = b.exclusive_majors();
        if own.is_empty() {
            continue;
        }
        debug_assert!(own.start >= cursor, "exclusive row ranges of partitions overlap");
        if own.start > cursor {
            segments.push(RowSegment::Merged { rows: cursor..own.start });
        }
        cursor = own.end;
        segments.push(RowSegment::Exclusive { partition, rows: own });
    }
    if rows > cursor {
        segments.push(RowSegment::Merged { rows: cursor..rows });
    }
    segments
}

/// `α·s + β·y_old`, never reading `y_old` when β = 0 (so NaN or garbage in y does not propagate).
#[inline]
pub fn finish<T: ComputeScalar>(alpha: T, sum: T, beta: T, y_old: &T) -> T {
    if beta == T::ZERO { alpha * sum } else { alpha * sum + beta * *y_old }
}

/// `β·y`, or 0 without reading y when β = 0: the start of a merged row before partials are added.
#[inline]
pub fn scale<T: ComputeScalar>(beta: T, y_old: &T) -> T {
    if beta == T::ZERO { T::ZERO } else { beta * *y_old }
}

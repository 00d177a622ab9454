//! pCSC partitions as rows: the entries of the pCSC partitions of one device side, sorted by row when
//! they are placed, so that the side's partial vector (Algorithm 5's, one a GPU) is computed by the
//! pCSR batch kernels, a row at a time, instead of by scattering each column's products with atomics.
//! A stable counting sort in two parallel passes: entries into buckets of consecutive rows (each
//! task a run of columns), then each bucket by row into its part of the result; in each row, the
//! entries stay in the order of the partitions and of their columns, so the sums are the same on
//! every call.

use crate::alloc::{ZeroBits, try_collect_par, try_with_capacity, try_zeros};
use crate::chunks;
use crate::error::{Error, Result};
use crate::msrep::partition::PartitionBounds;
use rayon::prelude::*;
use std::ops::Range;

/// Rows of a bucket of the first pass: few enough that a bucket's row counts stay in L2, many enough
/// that a task's entries make few, long bucket lists.
const ROWS_PER_BUCKET: usize = 1 << 16;

/// One pCSC partition's entries: the local pointers of its columns (`first_column` on), the rows of
/// their entries and their values.
pub struct Columns<'a, T> {
    pub first_column: usize,
    pub local_ptr: &'a [i32],
    pub rows: &'a [i32],
    pub values: &'a [T],
}

impl<T> Columns<'_, T> {
    /// The positions in `rows` / `values` of local column `j`'s entries.
    fn entries(&self, j: usize) -> Range<usize> {
        let base = self.local_ptr[0];
        (self.local_ptr[j] - base) as usize..(self.local_ptr[j + 1] - base) as usize
    }
}

/// The entries of some pCSC partitions by rows: CSR arrays over all the matrix's rows, global
/// column indices.
#[derive(Debug, PartialEq)]
pub struct ByRows<T> {
    pub row_ptr: Vec<usize>,
    pub cols: Vec<i32>,
    pub values: Vec<T>,
}

/// An entry on its way to its row: row, column, value.
type Entry<T> = (i32, i32, T);

impl<T: ZeroBits + Copy + Send + Sync> ByRows<T> {
    /// The entries of `parts` (rows below `rows`) sorted by row; in a row, in the order of `parts`
    /// and of their columns.
    pub fn of(parts: &[Columns<T>], rows: usize) -> Result<Self> {
        // Tasks: runs of columns of one partition with about the same number of entries.
        let mut tasks: Vec<(usize, Range<usize>)> = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            let base = p.local_ptr[0] as usize;
            let bounds = chunks::runs(p.local_ptr.len() - 1, |j| p.local_ptr[j] as usize - base);
            tasks.extend(bounds.windows(2).map(|w| (k, w[0]..w[1])));
        }
        let buckets = rows.div_ceil(ROWS_PER_BUCKET);
        // Pass 1: each task's entries into its lists of the buckets, counted first so that every list
        // is allocated once (and its failure reported).
        let bucketed: Vec<Vec<Vec<Entry<T>>>> = tasks
            .par_iter()
            .map(|(k, columns)| {
                let p = &parts[*k];
                let mut counts = vec![0usize; buckets];
                for j in columns.clone() {
                    for &r in &p.rows[p.entries(j)] {
                        counts[r as usize / ROWS_PER_BUCKET] += 1;
                    }
                }
                let mut lists: Vec<Vec<Entry<T>>> =
                    counts.iter().map(|&c| try_with_capacity(c, "pCSC entries by rows")).collect::<Result<_>>()?;
                for j in columns.clone() {
                    let column = (p.first_column + j) as i32;
                    for e in p.entries(j) {
                        let r = p.rows[e];
                        lists[r as usize / ROWS_PER_BUCKET].push((r, column, p.values[e]));
                    }
                }
                Ok(lists)
            })
            .collect::<Result<_>>()?;
        // Pass 2: each bucket's entries (from the tasks in order) by row, straight into its part of
        // the result (the buckets hold consecutive rows).
        let mut by_bucket: Vec<Vec<Vec<Entry<T>>>> = (0..buckets).map(|_| Vec::with_capacity(tasks.len())).collect();
        for lists in bucketed {
            for (b, list) in lists.into_iter().enumerate() {
                by_bucket[b].push(list);
            }
        }
        let sizes: Vec<usize> = by_bucket.iter().map(|lists| lists.iter().map(Vec::len).sum()).collect();
        let entries: usize = sizes.iter().sum();
        let mut cols: Vec<i32> = try_zeros(entries, "pCSC entries by rows")?;
        let mut values: Vec<T> = try_zeros(entries, "pCSC entries by rows")?;
        let col_parts = chunks::split_mut(&mut cols, sizes.iter().copied());
        let value_parts = chunks::split_mut(&mut values, sizes.iter().copied());
        // Per bucket, the positions of its rows' first entries within it.
        let starts: Vec<Vec<usize>> = by_bucket
            .into_par_iter()
            .zip(col_parts)
            .zip(value_parts)
            .enumerate()
            .map(|(b, ((lists, cols), values))| {
                let first = b * ROWS_PER_BUCKET;
                let count = ROWS_PER_BUCKET.min(rows - first);
                let mut start = vec![0usize; count + 1];
                for &(r, _, _) in lists.iter().flatten() {
                    start[r as usize - first + 1] += 1;
                }
                for i in 0..count {
                    start[i + 1] += start[i];
                }
                let mut next = start[..count].to_vec();
                for &(r, c, v) in lists.iter().flatten() {
                    let at = &mut next[r as usize - first];
                    (cols[*at], values[*at]) = (c, v);
                    *at += 1;
                }
                start
            })
            .collect();
        let mut offsets = vec![0usize; buckets + 1];
        for b in 0..buckets {
            offsets[b + 1] = offsets[b] + sizes[b];
        }
        let row_ptr = try_collect_par(rows + 1, "pCSC row pointers", |i| match i {
            _ if i == rows => entries,
            _ => offsets[i / ROWS_PER_BUCKET] + starts[i / ROWS_PER_BUCKET][i % ROWS_PER_BUCKET],
        })?;
        Ok(ByRows { row_ptr, cols, values })
    }

    /// The rows from its first row with an entry to its last (empty without entries).
    pub fn occupied(&self) -> Range<usize> {
        let entries = self.cols.len();
        if entries == 0 {
            return 0..0;
        }
        self.row_ptr.partition_point(|&p| p == 0) - 1..self.row_ptr.partition_point(|&p| p < entries)
    }

    /// Its rows `rows` cut into consecutive pieces of at most `limit` entries each (the pointers of a
    /// batch are 32-bit), each as the bounds of a pCSR partition of whole rows and its local pointers.
    pub fn pieces(&self, rows: Range<usize>, limit: usize) -> Result<Vec<(PartitionBounds, Vec<i32>)>> {
        let mut pieces = Vec::new();
        let mut start = rows.start;
        while start < rows.end {
            let first = self.row_ptr[start];
            let end = start + self.row_ptr[start..=rows.end].partition_point(|&p| p - first <= limit) - 1;
            if end == start {
                return Err(Error::not_supported(format!(
                    "row {start} of the pCSC matrix holds more than {limit} entries, more than a GPU batch holds"
                )));
            }
            let bounds = PartitionBounds {
                start_idx: first,
                end_idx: self.row_ptr[end],
                start_major: start,
                end_major: end,
                start_flag: false,
                end_flag: false,
            };
            let local_ptr =
                try_collect_par(end - start + 1, "pCSC row pointers", |i| (self.row_ptr[start + i] - first) as i32)?;
            pieces.push((bounds, local_ptr));
            start = end;
        }
        Ok(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_two_partitions_become_rows_in_column_order() {
        // A 4 x 5 matrix; partition 0 holds columns 0..3 with column 2 split after its first entry,
        // partition 1 the rest of column 2 and columns 3..5. Row 2 is empty.
        // Columns: 0: rows 1, 3; 1: row 0; 2: rows 0 | 3; 3: none; 4: rows 1, 0 (unsorted).
        let p0 = Columns {
            first_column: 0,
            local_ptr: &[10, 12, 13, 14],
            rows: &[1, 3, 0, 0],
            values: &[1.0, 2.0, 3.0, 4.0],
        };
        let p1 = Columns { first_column: 2, local_ptr: &[0, 1, 1, 3], rows: &[3, 1, 0], values: &[5.0, 6.0, 7.0] };
        let got = ByRows::of(&[p0, p1], 4).unwrap();
        let want = ByRows {
            row_ptr: vec![0, 3, 5, 5, 7],
            cols: vec![1, 2, 4, 0, 4, 0, 2],
            values: vec![3.0, 4.0, 7.0, 1.0, 6.0, 2.0, 5.0],
        };
        assert_eq!(got, want);
        let empty: ByRows<f64> = ByRows::of(&[], 3).unwrap();
        assert_eq!(empty, ByRows { row_ptr: vec![0; 4], cols: vec![], values: vec![] });
    }

    #[test]
    fn rows_spread_over_buckets_keep_their_order() {
        // Two columns over 3 buckets of rows, each column holding every third row backwards.
        let rows = 2 * ROWS_PER_BUCKET + 7;
        let column: Vec<i32> = (0..rows as i32).rev().filter(|r| r % 3 == 0).collect();
        let n = column.len() as i32;
        let all_rows: Vec<i32> = column.iter().chain(&column).copied().collect();
        let values: Vec<f32> = (0..2 * n).map(|e| e as f32).collect();
        let p = Columns { first_column: 5, local_ptr: &[0, n, 2 * n], rows: &all_rows, values: &values };
        let got = ByRows::of(&[p], rows).unwrap();
        for r in 0..rows {
            let at = got.row_ptr[r]..got.row_ptr[r + 1];
            match r % 3 {
                0 => {
                    let e = column.iter().position(|&c| c == r as i32).unwrap() as f32;
                    assert_eq!((&got.cols[at.clone()], &got.values[at]), (&[5, 6][..], &[e, e + n as f32][..]));
                }
                _ => assert!(at.is_empty()),
            }
        }
    }

    #[test]
    fn pieces_cut_at_rows_within_the_limit() {
        let by_rows = ByRows { row_ptr: vec![0, 2, 2, 5, 6, 9], cols: vec![0; 9], values: vec![0.0f32; 9] };
        let pieces = by_rows.pieces(0..5, 4).unwrap();
        let spans: Vec<_> =
            pieces.iter().map(|(b, p)| (b.start_major..b.end_major, b.start_idx..b.end_idx, p.clone())).collect();
        assert_eq!(spans, vec![(0..2, 0..2, vec![0, 2, 2]), (2..4, 2..6, vec![0, 3, 4]), (4..5, 6..9, vec![0, 3])]);
        assert_eq!(by_rows.pieces(0..5, 9).unwrap().len(), 1);
        assert!(by_rows.pieces(0..5, 2).is_err());
        // Rows 1..4 only: the piece ends at row 4 although row 4 would fit.
        let inner: Vec<_> =
            by_rows.pieces(1..4, 4).unwrap().into_iter().map(|(b, p)| (b.start_major..b.end_major, p)).collect();
        assert_eq!(inner, vec![(1..4, vec![0, 0, 3, 4])]);
        let none = ByRows::<f32> { row_ptr: vec![0], cols: vec![], values: vec![] };
        assert!(none.pieces(0..0, 4).unwrap().is_empty());
    }

    #[test]
    fn occupied_rows_run_from_the_first_row_with_an_entry_to_the_last() {
        let by_rows = ByRows { row_ptr: vec![0, 0, 0, 2, 2, 3, 3], cols: vec![0; 3], values: vec![0.0f32; 3] };
        assert_eq!(by_rows.occupied(), 2..5);
        let full = ByRows { row_ptr: vec![0, 1, 2], cols: vec![0; 2], values: vec![0.0f32; 2] };
        assert_eq!(full.occupied(), 0..2);
        let none = ByRows::<f32> { row_ptr: vec![0, 0, 0], cols: vec![], values: vec![] };
        assert_eq!(none.occupied(), 0..0);
    }
}

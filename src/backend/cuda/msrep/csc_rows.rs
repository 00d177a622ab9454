//! pCSC partitions as rows: the entries of the pCSC partitions of one device side, sorted by row when
//! they are placed, so that the side's partial vector (Algorithm 5's, one a GPU) is computed by the
//! pCSR batch kernels, a row at a time, instead of by scattering each column's products with atomics.
//! A stable counting sort in parallel passes: the entries counted by bins of rows, which make
//! buckets of consecutive rows holding about the same number of entries; each task (a run of
//! columns) counts its entries in each bucket, then writes them into its piece of each bucket; then
//! each bucket is sorted by row into its part of the result. In each row, the entries stay in the
//! order of the partitions and of their columns, so the sums are the same on every call.

use crate::alloc::{ZeroBits, try_collect_par, try_with_capacity};
use crate::chunks;
use crate::error::{Error, Result};
use crate::msrep::partition::PartitionBounds;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ops::Range;

/// Rows are counted in bins of this many rows, and buckets of the first pass are runs of bins.
const ROWS_PER_BIN: usize = 256;

/// A bucket holds at most this many rows (its row counts stay in L2) ...
const MAX_ROWS_PER_BUCKET: usize = 1 << 16;

/// ... and, where its rows allow, about the entries of all divided by this times the threads: a
/// power-law matrix holds a large share of its entries in its first rows, and buckets of equal row
/// counts left the one of those rows to a single thread (R-MAT scale 23: 15 % of the entries in
/// its first 65,536 rows) ...
const BUCKETS_PER_THREAD: usize = 4;

/// ... but no fewer than this many: below it, a bucket costs more to schedule than to sort.
const MIN_ENTRIES_PER_BUCKET: usize = 1 << 16;

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
        let entries: usize = parts.iter().map(|p| p.rows.len()).sum();
        let target = (entries / (BUCKETS_PER_THREAD * rayon::current_num_threads())).max(MIN_ENTRIES_PER_BUCKET);
        Self::in_buckets_of(parts, rows, target)
    }

    /// [`ByRows::of`], with buckets of about `target` entries where their rows allow.
    fn in_buckets_of(parts: &[Columns<T>], rows: usize, target: usize) -> Result<Self> {
        // Tasks: runs of columns of one partition with about the same number of entries.
        let mut tasks: Vec<(usize, Range<usize>)> = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            let base = p.local_ptr[0] as usize;
            let bounds = chunks::runs(p.local_ptr.len() - 1, |j| p.local_ptr[j] as usize - base);
            tasks.extend(bounds.windows(2).map(|w| (k, w[0]..w[1])));
        }
        let task_rows = |&(k, ref columns): &(usize, Range<usize>)| {
            let p = &parts[k];
            &p.rows[p.entries(columns.start).start..p.entries(columns.end - 1).end]
        };
        // The entries of each bin of rows, and the buckets: runs of bins.
        let bin_entries = tasks
            .par_iter()
            .fold(
                || vec![0usize; rows.div_ceil(ROWS_PER_BIN)],
                |mut bins, task| {
                    for &r in task_rows(task) {
                        bins[r as usize / ROWS_PER_BIN] += 1;
                    }
                    bins
                },
            )
            .reduce_with(|mut a, b| {
                a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                a
            })
            .unwrap_or_default();
        let mut first_rows = vec![0usize];
        let mut bucket_of_bin = Vec::with_capacity(bin_entries.len());
        let mut held = 0;
        for (bin, &count) in bin_entries.iter().enumerate() {
            let start = *first_rows.last().expect("a first bucket");
            if held > 0 && (held + count > target || (bin + 1) * ROWS_PER_BIN - start > MAX_ROWS_PER_BUCKET) {
                first_rows.push(bin * ROWS_PER_BIN);
                held = 0;
            }
            held += count;
            bucket_of_bin.push((first_rows.len() - 1) as u32);
        }
        first_rows.push(rows);
        let buckets = first_rows.len() - 1;
        let bucket_of = |r: i32| bucket_of_bin[r as usize / ROWS_PER_BIN] as usize;
        // Pass 1: each task's entries in each bucket, counted.
        let counts: Vec<Vec<usize>> = tasks
            .par_iter()
            .map(|task| {
                let mut counts = vec![0usize; buckets];
                for &r in task_rows(task) {
                    counts[bucket_of(r)] += 1;
                }
                counts
            })
            .collect();
        let sizes: Vec<usize> = (0..buckets).map(|b| counts.iter().map(|c| c[b]).sum()).collect();
        let entries: usize = sizes.iter().sum();
        // Pass 2: the entries by bucket, in a bucket in the order of the tasks; each task writes its
        // own piece of every bucket (pieces bucket by bucket, a task's piece of each in task order).
        let mut bucketed: Vec<Entry<T>> = try_with_capacity(entries, "pCSC entries by rows")?;
        let lengths = (0..buckets).flat_map(|b| counts.iter().map(move |c| c[b]));
        let mut pieces_of_task: Vec<Vec<&mut [MaybeUninit<Entry<T>>]>> =
            (0..tasks.len()).map(|_| Vec::with_capacity(buckets)).collect();
        for (i, piece) in
            chunks::split_mut(&mut bucketed.spare_capacity_mut()[..entries], lengths).into_iter().enumerate()
        {
            pieces_of_task[i % tasks.len()].push(piece);
        }
        tasks.par_iter().zip(pieces_of_task).for_each(|((k, columns), mut pieces)| {
            let p = &parts[*k];
            let mut next = vec![0usize; buckets];
            for j in columns.clone() {
                let column = (p.first_column + j) as i32;
                for e in p.entries(j) {
                    let r = p.rows[e];
                    let b = bucket_of(r);
                    pieces[b][next[b]].write((r, column, p.values[e]));
                    next[b] += 1;
                }
            }
        });
        // SAFETY: the pieces cover the first `entries` elements, and each task wrote every element of
        // its pieces (its count of entries in each bucket).
        unsafe { bucketed.set_len(entries) };
        // Pass 3: each bucket's entries by row, into its part of the result (the buckets hold
        // consecutive rows, so a bucket's part of the result is where its entries lie now).
        let mut cols: Vec<i32> = try_with_capacity(entries, "pCSC entries by rows")?;
        let mut values: Vec<T> = try_with_capacity(entries, "pCSC entries by rows")?;
        let col_parts = chunks::split_mut(&mut cols.spare_capacity_mut()[..entries], sizes.iter().copied());
        let value_parts = chunks::split_mut(&mut values.spare_capacity_mut()[..entries], sizes.iter().copied());
        let bucket_parts = chunks::split_mut(&mut bucketed, sizes.iter().copied());
        // Per bucket, the positions of its rows' first entries within it.
        let starts: Vec<Vec<usize>> = bucket_parts
            .into_par_iter()
            .zip(col_parts)
            .zip(value_parts)
            .enumerate()
            .map(|(b, ((bucket, cols), values))| {
                let first = first_rows[b];
                let count = first_rows[b + 1] - first;
                let mut start = vec![0usize; count + 1];
                for &(r, _, _) in bucket.iter() {
                    start[r as usize - first + 1] += 1;
                }
                for i in 0..count {
                    start[i + 1] += start[i];
                }
                let mut next = start[..count].to_vec();
                for &(r, c, v) in bucket.iter() {
                    let at = &mut next[r as usize - first];
                    cols[*at].write(c);
                    values[*at].write(v);
                    *at += 1;
                }
                start
            })
            .collect();
        // SAFETY: the parts cover the first `entries` elements, and each bucket wrote every element of
        // its part: one entry at each position from its rows' starts to the next row's.
        unsafe {
            cols.set_len(entries);
            values.set_len(entries);
        }
        let mut offsets = vec![0usize; buckets + 1];
        for b in 0..buckets {
            offsets[b + 1] = offsets[b] + sizes[b];
        }
        let row_ptr = try_collect_par(rows + 1, "pCSC row pointers", |i| match i {
            _ if i == rows => entries,
            _ => {
                let b = bucket_of_bin[i / ROWS_PER_BIN] as usize;
                offsets[b] + starts[b][i - first_rows[b]]
            }
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
        let rows = 2 * MAX_ROWS_PER_BUCKET + 7;
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
    fn skewed_rows_in_buckets_of_any_size_keep_their_order() {
        // Three partitions of columns over 5,000 rows, half of the entries in the first 300 rows
        // (as a power-law graph's first rows hold many); buckets from one bin of rows each to one
        // bucket of all, against a stable sort of the entries by row.
        let rows = 5000;
        let mut rng = crate::testgen::Rng::fresh("skewed_rows_in_buckets_of_any_size_keep_their_order");
        let mut next = move || rng.next_u64();
        let mut owned = Vec::new();
        let mut first_column = 0;
        for columns in [700, 1, 1300] {
            let mut ptr = vec![0i32];
            let mut row_of = Vec::new();
            for _ in 0..columns {
                for _ in 0..next() % 12 {
                    let r = next() as usize % rows;
                    row_of.push(if next() % 2 == 0 { r % 300 } else { r } as i32);
                }
                ptr.push(row_of.len() as i32);
            }
            let values: Vec<f64> = (0..row_of.len()).map(|_| next() as f64).collect();
            owned.push((first_column, ptr, row_of, values));
            first_column += columns;
        }
        let parts: Vec<Columns<f64>> = owned
            .iter()
            .map(|(first_column, ptr, rows, values)| Columns {
                first_column: *first_column,
                local_ptr: ptr,
                rows,
                values,
            })
            .collect();
        let mut listed: Vec<(i32, i32, f64)> = Vec::new();
        for p in &parts {
            for j in 0..p.local_ptr.len() - 1 {
                listed.extend(p.entries(j).map(|e| (p.rows[e], (p.first_column + j) as i32, p.values[e])));
            }
        }
        listed.sort_by_key(|&(r, _, _)| r);
        let mut row_ptr = vec![0; rows + 1];
        for &(r, _, _) in &listed {
            row_ptr[r as usize + 1] += 1;
        }
        for r in 0..rows {
            row_ptr[r + 1] += row_ptr[r];
        }
        let want = ByRows {
            row_ptr,
            cols: listed.iter().map(|e| e.1).collect(),
            values: listed.iter().map(|e| e.2).collect(),
        };
        for target in [1, 50, 1000, usize::MAX] {
            assert!(ByRows::in_buckets_of(&parts, rows, target).unwrap() == want, "buckets of {target} entries");
        }
        assert!(ByRows::of(&parts, rows).unwrap() == want);
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

//! Splitting row-wise work into parallel tasks: consecutive runs of rows (or block rows) with about
//! the same number of entries, and the matching disjoint pieces of the flat arrays each run writes,
//! so that every pass (SMaT's analysis, the rows a device stores in its own order) is one rayon loop
//! with no shared mutable state.

use crate::alloc::{ZeroBits, try_vec, try_zeros};
use crate::error::Result;
use rayon::prelude::*;

/// Entries one task handles at least: below this a task costs more to schedule than to run.
const ENTRIES_PER_TASK: usize = 1 << 15;

/// Boundaries `0 = b₀ < b₁ < … = items` of consecutive runs of items, where `offset(i)` is the number
/// of entries before item `i` (non-decreasing, `offset(0) = 0`): each run holds about
/// [`ENTRIES_PER_TASK`] entries, or one item when a single item holds more.
pub fn runs(items: usize, offset: impl Fn(usize) -> usize) -> Vec<usize> {
    let mut bounds = vec![0];
    let mut start = 0;
    while start < items {
        let target = offset(start) + ENTRIES_PER_TASK;
        // The first item past `start` whose offset reaches the target (binary search: offsets grow).
        let (mut lo, mut hi) = (start + 1, items);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if offset(mid) >= target { hi = mid } else { lo = mid + 1 }
        }
        start = lo;
        bounds.push(start);
    }
    bounds
}

/// Splits `data` into consecutive pieces of the given lengths (which must add up to at most its
/// length).
pub fn split_mut<T>(mut data: &mut [T], lengths: impl IntoIterator<Item = usize>) -> Vec<&mut [T]> {
    let mut pieces = Vec::new();
    for len in lengths {
        let (piece, rest) = std::mem::take(&mut data).split_at_mut(len);
        pieces.push(piece);
        data = rest;
    }
    pieces
}

/// The pieces of `data` that the runs `bounds` own, when item `i` owns `data[offset(i)..offset(i + 1)]`.
pub fn split_by_runs<'a, T>(data: &'a mut [T], bounds: &[usize], offset: impl Fn(usize) -> usize) -> Vec<&'a mut [T]> {
    split_mut(data, bounds.windows(2).map(|w| offset(w[1]) - offset(w[0])))
}

/// The row pointers, columns and values of `rows` rows, row i holding `length(i)` entries that
/// `fill(i, columns, values)` writes, filled in parallel over runs of rows.
pub fn gather_rows<C: ZeroBits, S: ZeroBits>(
    rows: usize,
    length: impl Fn(usize) -> usize,
    fill: impl Fn(usize, &mut [C], &mut [S]) + Sync,
) -> Result<(Vec<usize>, Vec<C>, Vec<S>)> {
    let mut row_ptr = try_vec(rows + 1, 0usize, "the CSR row pointers")?;
    for i in 0..rows {
        row_ptr[i + 1] = row_ptr[i] + length(i);
    }
    let entries = row_ptr[rows];
    let mut col_ind: Vec<C> = try_zeros(entries, "the CSR column indices")?;
    let mut values: Vec<S> = try_zeros(entries, "the CSR values")?;
    let bounds = runs(rows, |i| row_ptr[i]);
    let col_runs = split_by_runs(&mut col_ind, &bounds, |i| row_ptr[i]);
    let value_runs = split_by_runs(&mut values, &bounds, |i| row_ptr[i]);
    col_runs.into_par_iter().zip(value_runs).zip(bounds.par_windows(2)).for_each(|((cols, vals), run)| {
        let first = row_ptr[run[0]];
        for i in run[0]..run[1] {
            let at = row_ptr[i] - first..row_ptr[i + 1] - first;
            fill(i, &mut cols[at.clone()], &mut vals[at]);
        }
    });
    Ok((row_ptr, col_ind, values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_every_item_once_with_bounded_work() {
        let lengths: Vec<usize> = (0..5000).map(|i| if i % 997 == 0 { 100_000 } else { i % 40 }).collect();
        let mut offsets = vec![0];
        for l in &lengths {
            offsets.push(offsets.last().unwrap() + l);
        }
        let bounds = runs(lengths.len(), |i| offsets[i]);
        assert_eq!((bounds[0], *bounds.last().unwrap()), (0, lengths.len()));
        for w in bounds.windows(2) {
            assert!(w[0] < w[1]);
            let work = offsets[w[1]] - offsets[w[0]];
            // A run stops at the first item reaching the target, so it exceeds it by at most one item.
            assert!(work < ENTRIES_PER_TASK + 100_000 || w[1] - w[0] == 1, "{w:?}: {work}");
        }
        assert_eq!(runs(0, |_| 0), vec![0]);
        // Items without entries still end up in a run.
        assert_eq!(runs(3, |_| 0), vec![0, 3]);
    }

    #[test]
    fn split_pieces_are_consecutive() {
        let mut data: Vec<u32> = (0..10).collect();
        let pieces = split_mut(&mut data, [3, 0, 4]);
        assert_eq!(
            pieces.iter().map(|p| p.to_vec()).collect::<Vec<_>>(),
            vec![vec![0, 1, 2], vec![], vec![3, 4, 5, 6]]
        );
    }
}

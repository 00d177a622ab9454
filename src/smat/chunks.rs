//! Splitting the analysis's row-wise work into parallel tasks: consecutive runs of rows (or block
//! rows) with about the same number of entries, and the matching disjoint pieces of the flat arrays
//! each run writes, so that every pass of the analysis is one rayon loop with no shared mutable state.

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

//! The paper's partial formats: nnz-balanced cuts of a CSR / CSC / row-sorted COO matrix into pCSR /
//! pCSC / pCOO partitions (Algorithms 2, 4 and 6).
//!
//! Every partition holds a consecutive run of nonzeros `[start_idx, end_idx)` of the input's storage
//! order, so a row (pCSR, pCOO) or a column (pCSC) may be split between partitions: `start_flag` says
//! the partition's first major index already has entries in an earlier partition. All ranges here are
//! half-open (`end_*` exclusive), unlike the paper's inclusive `end_idx` / `end_row`, because empty
//! partitions (more partitions than nonzeros) then need no special value: `start == end`.

use crate::alloc::try_collect_par;
use crate::error::Result;
use std::ops::Range;

/// Entry where partition `i` of `np` starts: the paper's `⌊i·nnz/np⌋`. Partition `i` ends (exclusive)
/// where partition `i + 1` starts, so the cuts cover `[0, nnz)` exactly once for any `np ≥ 1`.
pub fn nnz_cut(i: usize, nnz: usize, np: usize) -> usize {
    // u128: i·nnz overflows u64 for neither realistic input, but costs nothing to make exact.
    ((i as u128 * nnz as u128) / np as u128) as usize
}

/// The major index (row for CSR, column for CSC) that holds entry `e`, by binary search over the
/// zero-based pointer array: the last `m` with `ptr[m] ≤ e`. Empty rows share their pointer value with
/// the next row, so "last" skips them and lands on the row that really holds `e`. For `e = nnz` the
/// answer is the major dimension itself (one past the last row).
pub fn major_of_entry(ptr: &[usize], e: usize) -> usize {
    ptr.partition_point(|&p| p <= e) - 1
}

/// Where one partition lies in the whole matrix: the bookkeeping of the paper's pCSR / pCSC / pCOO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionBounds {
    /// First nonzero of the partition, in the input's storage order.
    pub start_idx: usize,
    /// One past its last nonzero (exclusive; the paper's `end_idx + 1`).
    pub end_idx: usize,
    /// Row (pCSR, pCOO) or column (pCSC) of its first nonzero.
    pub start_major: usize,
    /// One past the row / column of its last nonzero (exclusive; the paper's `end_row + 1`).
    /// Equals `start_major` for an empty partition.
    pub end_major: usize,
    /// The first row / column is partial: earlier partitions hold some of its entries.
    pub start_flag: bool,
    /// The last row / column continues into later partitions. The paper infers this from the next
    /// partition's `start_flag`; keeping it here makes each partition's merge decision local, which
    /// also stays right when empty partitions sit in between.
    pub end_flag: bool,
}

impl PartitionBounds {
    pub fn nnz(&self) -> usize {
        self.end_idx - self.start_idx
    }

    /// Number of rows / columns the partition spans, including empty ones between its first and last.
    pub fn major_count(&self) -> usize {
        self.end_major - self.start_major
    }

    /// The rows of y this partition alone contributes to (pCSR, pCOO): its span minus a first row
    /// shared with earlier partitions and a last row shared with later ones. These ranges of different
    /// partitions never overlap, so each partition can finish them in place, concurrently.
    pub fn exclusive_majors(&self) -> Range<usize> {
        let lo = self.start_major + self.start_flag as usize;
        let hi = self.end_major - self.end_flag as usize;
        lo..hi.max(lo)
    }

    /// The rows this partition shares with others, each once, in increasing order.
    pub fn shared_majors(&self) -> impl Iterator<Item = usize> + '_ {
        let first = self.start_flag.then_some(self.start_major);
        let last = (self.end_flag && !(self.start_flag && self.major_count() == 1)).then(|| self.end_major - 1);
        first.into_iter().chain(last)
    }
}

/// Algorithms 2 and 4: bounds of `np` partitions of a CSR (or CSC) matrix given its zero-based
/// pointer array (`ptr.len()` = major dimension + 1, `ptr[last]` = nnz).
pub fn compressed_bounds(ptr: &[usize], np: usize) -> Vec<PartitionBounds> {
    let nnz = *ptr.last().expect("a pointer array has at least one entry");
    (0..np)
        .map(|i| {
            let start_idx = nnz_cut(i, nnz, np);
            let end_idx = nnz_cut(i + 1, nnz, np);
            let start_major = major_of_entry(ptr, start_idx);
            if start_idx == end_idx {
                return empty_bounds(start_idx, start_major);
            }
            let end_major = major_of_entry(ptr, end_idx - 1) + 1;
            PartitionBounds {
                start_idx,
                end_idx,
                start_major,
                end_major,
                start_flag: start_idx > ptr[start_major],
                end_flag: end_idx < ptr[end_major],
            }
        })
        .collect()
}

/// Algorithm 6: bounds of `np` partitions of a COO matrix of `nnz` entries sorted by row, given each
/// entry's zero-based row `row_of(e)` (read at the cuts only). Sorted rows make the paper's binary
/// search over a row pointer a direct look-up: the row holding entry `e` is `row_of(e)`, and a row is
/// split at a cut exactly when the entries on both sides of the cut have the same row.
pub fn coo_bounds(nnz: usize, row_of: impl Fn(usize) -> usize, rows: usize, np: usize) -> Vec<PartitionBounds> {
    (0..np)
        .map(|i| {
            let start_idx = nnz_cut(i, nnz, np);
            let end_idx = nnz_cut(i + 1, nnz, np);
            if start_idx == end_idx {
                return empty_bounds(start_idx, if start_idx < nnz { row_of(start_idx) } else { rows });
            }
            PartitionBounds {
                start_idx,
                end_idx,
                start_major: row_of(start_idx),
                end_major: row_of(end_idx - 1) + 1,
                start_flag: start_idx > 0 && row_of(start_idx - 1) == row_of(start_idx),
                end_flag: end_idx < nnz && row_of(end_idx) == row_of(end_idx - 1),
            }
        })
        .collect()
}

fn empty_bounds(at_idx: usize, at_major: usize) -> PartitionBounds {
    PartitionBounds {
        start_idx: at_idx,
        end_idx: at_idx,
        start_major: at_major,
        end_major: at_major,
        start_flag: false,
        end_flag: false,
    }
}

/// The partition's local pointer array (the paper's `pA[i].row_ptr`): `major_count + 1` offsets into
/// its own slice of nonzeros, `ptr[start_major + j] − start_idx` clamped to the slice, so a split first
/// row starts at 0 and a split last row ends at the partition's nnz.
pub fn local_pointers(ptr: &[usize], bounds: &PartitionBounds) -> Result<Vec<i32>> {
    let len = bounds.nnz();
    let majors = &ptr[bounds.start_major..=bounds.end_major];
    try_collect_par(majors.len(), "a partition's local pointer array", |i| {
        majors[i].saturating_sub(bounds.start_idx).min(len) as i32
    })
}

/// Devices of partitions spread round-robin: partition `i` goes to `devices[i % devices.len()]`.
pub fn device_of(partition: usize, devices: &[i32]) -> i32 {
    devices[partition % devices.len()]
}

//! Sylos Labini's Jaccard row clustering (the preprocessing SMaT selected, section IV-C of the paper)
//! and the block count a row order produces.
//!
//! Rows are compared by their *column-block patterns*: the set of tile-wide column blocks in which
//! the row has an entry. Two rows with the same pattern fill the same BCSR blocks, so the Jaccard
//! distance between patterns measures the padding a merge causes at exactly the granularity the
//! tensor-core tiles are cut at.

use crate::alloc::{try_collect, try_copy, try_extend, try_vec, try_with_capacity};
use crate::error::Result;
use crate::sparse::CsrRef;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// For every row, the sorted, distinct column-block indices (`col / tile_cols`) of its entries.
/// Stored CSR-like, so its size is proportional to nnz, never to the number of column blocks.
#[derive(Clone, Debug)]
pub struct RowPatterns {
    ptr: Vec<usize>,
    blocks: Vec<usize>,
}

impl RowPatterns {
    pub fn new<T>(csr: &CsrRef<'_, T>, tile_cols: usize) -> Result<Self> {
        let mut ptr = try_with_capacity(csr.outer_dim + 1, "the row patterns' pointers")?;
        let mut blocks = try_with_capacity(csr.nnz(), "the row patterns")?;
        ptr.push(0);
        for r in 0..csr.outer_dim {
            let start = blocks.len();
            blocks.extend(csr.range(r).map(|e| csr.index(e) / tile_cols));
            // Rows may be unsorted or hold duplicates (the C API accepts both).
            blocks[start..].sort_unstable();
            let distinct = dedup_sorted_tail(&mut blocks, start);
            blocks.truncate(start + distinct);
            ptr.push(blocks.len());
        }
        Ok(RowPatterns { ptr, blocks })
    }

    pub fn rows(&self) -> usize {
        self.ptr.len() - 1
    }

    pub fn row(&self, r: usize) -> &[usize] {
        &self.blocks[self.ptr[r]..self.ptr[r + 1]]
    }
}

/// Removes consecutive duplicates from `v[start..]` in place; returns how many distinct values remain.
fn dedup_sorted_tail(v: &mut [usize], start: usize) -> usize {
    let tail = &mut v[start..];
    if tail.is_empty() {
        return 0;
    }
    let mut kept = 1;
    for i in 1..tail.len() {
        if tail[i] != tail[kept - 1] {
            tail[kept] = tail[i];
            kept += 1;
        }
    }
    kept
}

/// Number of nonzero `tile_rows`-high BCSR blocks when stored row `i` is original row `order[i]`
/// (`None`: the original order).
pub fn count_blocks(patterns: &RowPatterns, order: Option<&[usize]>, tile_rows: usize) -> Result<usize> {
    let rows = patterns.rows();
    let mut block_row_columns = Vec::new();
    let mut total = 0;
    for start in (0..rows).step_by(tile_rows) {
        block_row_columns.clear();
        for position in start..(start + tile_rows).min(rows) {
            let r = order.map_or(position, |o| o[position]);
            try_extend(&mut block_row_columns, patterns.row(r), "the column blocks of a block row")?;
        }
        block_row_columns.sort_unstable();
        block_row_columns.dedup();
        total += block_row_columns.len();
    }
    Ok(total)
}

/// Sylos Labini's greedy clustering: take the first unclustered row as the seed of a new cluster,
/// scan the later unclustered rows once in order and merge each whose Jaccard distance to the
/// cluster's union pattern is below `threshold` (the union grows as rows join); repeat until every
/// row is clustered. Returns the row order: clusters one after another, then the empty rows (they
/// create no blocks wherever they go, and a distance to an empty pattern is meaningless).
///
/// A row sharing no column block with the union has distance 1, which no threshold in (0, 1]
/// accepts, so the scan visits only rows reachable through an inverted index (column block → rows);
/// the result is identical to the full quadratic scan, the cost proportional to the candidates.
///
/// The candidates can still be quadratic in number: on an unstructured matrix every row shares some
/// column block with almost every other (16384² at 1 % took 30 s). The work — index entries scanned
/// plus candidate patterns compared — is therefore bounded by [`WORK_PER_PATTERN_ENTRY`] per entry of
/// the row patterns. Past that budget the clustering stops and the rows not yet clustered follow in
/// their original order. Structured matrices, where clustering pays, finish well inside the budget
/// (their candidate sets are small); on unstructured ones it would not have reduced the block count
/// much, and `SMAT_REORDER_MODE_AUTO` keeps a permutation only when it does.
pub fn jaccard_row_order(patterns: &RowPatterns, threshold: f64) -> Result<Vec<usize>> {
    let rows = patterns.rows();
    let mut state = Clustering::new(patterns)?;
    state.budget = WORK_PER_PATTERN_ENTRY.saturating_mul(patterns.blocks.len()).saturating_add(MIN_WORK);
    let mut order = try_with_capacity(rows, "the row order")?;
    for seed in 0..rows {
        if state.clustered[seed] || patterns.row(seed).is_empty() {
            continue;
        }
        if state.work > state.budget {
            // Budget spent: the rest keep their original order (see above).
            state.clustered[seed] = true;
            order.push(seed);
            continue;
        }
        state.clustered[seed] = true;
        order.push(seed);
        state.join(seed, seed);
        while let Some(Reverse(row)) = state.candidates.pop() {
            if state.work > state.budget {
                state.candidates.clear();
                break;
            }
            state.work += state.patterns.row(row).len();
            let pattern = state.compact_row(row);
            let shared = pattern.iter().filter(|&&c| state.in_union[c]).count();
            let union = state.union_blocks.len() + pattern.len() - shared;
            // Jaccard distance 1 − shared/union < threshold, without dividing.
            if ((union - shared) as f64) < threshold * union as f64 {
                state.clustered[row] = true;
                order.push(row);
                state.join(row, seed);
            }
        }
        state.clear_union();
    }
    order.extend((0..rows).filter(|&r| patterns.row(r).is_empty()));
    Ok(order)
}

/// Work units (index entries scanned + pattern entries compared) allowed per row-pattern entry.
const WORK_PER_PATTERN_ENTRY: usize = 48;
/// Work always allowed, so small matrices are clustered exactly whatever their structure.
const MIN_WORK: usize = 4_000_000;

/// Working state of [`jaccard_row_order`]. Column-block ids are compacted to `0..used`, so every
/// array is O(rows + nnz), never O(cols / tile).
struct Clustering<'a> {
    patterns: &'a RowPatterns,
    compact: Vec<usize>,
    /// Inverted index, CSR-like: the rows holding compact block `c`, sorted by row.
    rows_of_block_ptr: Vec<usize>,
    rows_of_block: Vec<usize>,
    clustered: Vec<bool>,
    /// The seed whose cluster last queued each row, so a row is examined at most once per cluster.
    queued_for_seed: Vec<usize>,
    in_union: Vec<bool>,
    union_blocks: Vec<usize>,
    /// Rows still to examine for the current cluster, smallest first (the scan order).
    candidates: BinaryHeap<Reverse<usize>>,
    /// Work done so far and the most allowed (see [`jaccard_row_order`]).
    work: usize,
    budget: usize,
}

impl<'a> Clustering<'a> {
    fn new(patterns: &'a RowPatterns) -> Result<Self> {
        let rows = patterns.rows();
        let mut used = try_copy(&patterns.blocks, "the column blocks in use")?;
        used.sort_unstable();
        used.dedup();
        let compact = try_collect(patterns.blocks.len(), "the compacted row patterns", |e| {
            used.partition_point(|&u| u < patterns.blocks[e])
        })?;
        let mut rows_of_block_ptr = try_vec(used.len() + 1, 0usize, "the rows per column block")?;
        for &c in &compact {
            rows_of_block_ptr[c + 1] += 1;
        }
        for c in 0..used.len() {
            rows_of_block_ptr[c + 1] += rows_of_block_ptr[c];
        }
        let mut fill = try_copy(&rows_of_block_ptr, "the rows per column block")?;
        let mut rows_of_block = try_vec(compact.len(), 0usize, "the rows per column block")?;
        for r in 0..rows {
            for &c in &compact[patterns.ptr[r]..patterns.ptr[r + 1]] {
                rows_of_block[fill[c]] = r;
                fill[c] += 1;
            }
        }
        Ok(Clustering {
            patterns,
            compact,
            rows_of_block_ptr,
            rows_of_block,
            clustered: try_vec(rows, false, "the clustered rows")?,
            queued_for_seed: try_vec(rows, usize::MAX, "the queued rows")?,
            in_union: try_vec(used.len(), false, "the union of a cluster")?,
            // A union holds each block once, and the candidates of one cluster each row once: room
            // for all of them up front means nothing grows later.
            union_blocks: try_with_capacity(used.len(), "the union of a cluster")?,
            candidates: BinaryHeap::from(try_with_capacity(rows, "the candidate rows")?),
            work: 0,
            budget: usize::MAX,
        })
    }

    fn compact_row(&self, r: usize) -> &[usize] {
        &self.compact[self.patterns.ptr[r]..self.patterns.ptr[r + 1]]
    }

    /// Adds `row`'s blocks to the current cluster's union and queues the later unclustered rows that
    /// share one of the new blocks. Earlier rows are not queued: the single pass never revisits them.
    fn join(&mut self, row: usize, seed: usize) {
        for k in self.patterns.ptr[row]..self.patterns.ptr[row + 1] {
            let c = self.compact[k];
            if self.in_union[c] {
                continue;
            }
            self.in_union[c] = true;
            self.union_blocks.push(c);
            let holders = &self.rows_of_block[self.rows_of_block_ptr[c]..self.rows_of_block_ptr[c + 1]];
            let later = &holders[holders.partition_point(|&x| x <= row)..];
            self.work += later.len();
            for &candidate in later {
                if !self.clustered[candidate] && self.queued_for_seed[candidate] != seed {
                    self.queued_for_seed[candidate] = seed;
                    self.candidates.push(Reverse(candidate));
                }
            }
        }
    }

    fn clear_union(&mut self) {
        for c in self.union_blocks.drain(..) {
            self.in_union[c] = false;
        }
    }
}

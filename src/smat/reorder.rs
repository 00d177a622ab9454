//! Sylos Labini's Jaccard row clustering (the preprocessing SMaT selected, section IV-C of the paper)
//! and the block count a row order produces.
//!
//! Rows are compared by their *column-block patterns*: the set of tile-wide column blocks in which
//! the row has an entry. Two rows with the same pattern fill the same BCSR blocks, so the Jaccard
//! distance between patterns measures the padding a merge causes at exactly the granularity the
//! tensor-core tiles are cut at.

use super::Tile;
use crate::alloc::{try_collect_par, try_copy, try_vec, try_with_capacity, try_zeros};
use crate::chunks;
use crate::error::Result;
use crate::sparse::CsrRef;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// For every row, the sorted, distinct column-block indices (`col / tile_cols`) of its entries.
/// Stored CSR-like, so its size is proportional to nnz, never to the number of column blocks.
#[derive(Clone, Debug)]
pub struct RowPatterns {
    ptr: Vec<usize>,
    blocks: Vec<u32>,
}

impl RowPatterns {
    /// Built in parallel over runs of rows: each run sorts its rows' column blocks in place in a
    /// scratch copy of the column indices, then the distinct ones are packed together.
    pub fn new<T: Sync>(csr: &CsrRef<'_, T>, tile_cols: usize) -> Result<Self> {
        let rows = csr.outer_dim;
        let entry = |r: usize| if r == rows { csr.nnz() } else { csr.range(r).start };
        let bounds = chunks::runs(rows, entry);
        let mut scratch: Vec<u32> = try_zeros(csr.nnz(), "the row patterns")?;
        let mut distinct: Vec<usize> = try_zeros(rows, "the row patterns' lengths")?;
        let scratch_runs = chunks::split_by_runs(&mut scratch, &bounds, entry);
        let distinct_runs = chunks::split_by_runs(&mut distinct, &bounds, |r| r);
        scratch_runs.into_par_iter().zip(distinct_runs).zip(bounds.par_windows(2)).for_each(
            |((scratch, distinct), run)| {
                let first_entry = entry(run[0]);
                for r in run[0]..run[1] {
                    let range = csr.range(r);
                    let row = &mut scratch[range.start - first_entry..range.end - first_entry];
                    for (slot, e) in row.iter_mut().zip(range) {
                        // Column indices are below 2³¹ (C int), so their blocks fit in u32.
                        *slot = (csr.index(e) / tile_cols) as u32;
                    }
                    // Rows may be unsorted or hold duplicates (the C API accepts both).
                    row.sort_unstable();
                    distinct[r - run[0]] = dedup_sorted(row);
                }
            },
        );
        let mut ptr = try_vec(rows + 1, 0usize, "the row patterns' pointers")?;
        for r in 0..rows {
            ptr[r + 1] = ptr[r] + distinct[r];
        }
        let mut blocks: Vec<u32> = try_zeros(ptr[rows], "the row patterns")?;
        let block_runs = chunks::split_by_runs(&mut blocks, &bounds, |r| ptr[r]);
        block_runs.into_par_iter().zip(bounds.par_windows(2)).for_each(|(out, run)| {
            let mut at = 0;
            for r in run[0]..run[1] {
                let start = entry(r);
                out[at..at + distinct[r]].copy_from_slice(&scratch[start..start + distinct[r]]);
                at += distinct[r];
            }
        });
        Ok(RowPatterns { ptr, blocks })
    }

    pub fn rows(&self) -> usize {
        self.ptr.len() - 1
    }

    pub fn row(&self, r: usize) -> &[u32] {
        &self.blocks[self.ptr[r]..self.ptr[r + 1]]
    }
}

/// Moves the distinct values of sorted `v` to its front; returns how many there are.
fn dedup_sorted<T: PartialEq + Copy>(v: &mut [T]) -> usize {
    if v.is_empty() {
        return 0;
    }
    let mut kept = 1;
    for i in 1..v.len() {
        if v[i] != v[kept - 1] {
            v[kept] = v[i];
            kept += 1;
        }
    }
    kept
}

/// What one block row of `tile.rows` stored rows holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockRowShape {
    /// Distinct columns over its rows.
    pub columns: usize,
    /// Distinct tile-wide column blocks over its rows: the tiles a BCSR of aligned column blocks
    /// (the paper's) would store.
    pub blocks: usize,
    /// CSR entries of its rows (duplicates counted).
    pub entries: usize,
}

impl BlockRowShape {
    /// The tiles the analysis stores for it: its distinct columns gathered `tile_cols` at a time.
    pub fn tiles(&self, tile_cols: usize) -> usize {
        self.columns.div_ceil(tile_cols)
    }
}

/// The shape of every block row when stored row `i` is row `order[i]` (`None`: the original order;
/// an order of fewer rows gives the block rows of those only).
///
/// A block row's distinct columns and column blocks are counted by marking them in bitmaps of the
/// matrix's columns, one pair per task, cleared entry by entry after each block row: one pass over
/// the entries, where sorting each block row's merged columns took 40 % of a random matrix's
/// analysis. Bitmaps are used only while zeroing one per task costs no more than a word per
/// entry; beyond that (far more columns than entries) the columns are sorted, which is then cheap.
pub fn block_row_shapes<T: Sync>(
    csr: &CsrRef<'_, T>,
    order: Option<&[usize]>,
    tile: Tile,
) -> Result<Vec<BlockRowShape>> {
    let positions = order.map_or(csr.outer_dim, |o| o.len());
    let mut shapes = try_vec(positions.div_ceil(tile.rows), BlockRowShape::default(), "the block-row shapes")?;
    let rows_of = |block_row: usize| {
        let start = block_row * tile.rows;
        (start..(start + tile.rows).min(positions)).map(move |position| order.map_or(position, |o| o[position]))
    };
    let tasks = rayon::current_num_threads() * 4;
    if tasks * ColumnMarks::words(csr.inner_dim) <= csr.nnz() {
        let per_task = shapes.len().div_ceil(tasks).max(1);
        shapes.par_chunks_mut(per_task).enumerate().try_for_each(|(task, chunk)| -> Result<()> {
            let mut marks = ColumnMarks::new(csr.inner_dim, tile.cols)?;
            for (i, shape) in chunk.iter_mut().enumerate() {
                for r in rows_of(task * per_task + i) {
                    shape.entries += csr.range(r).len();
                    for e in csr.range(r) {
                        let column = csr.index(e);
                        if ColumnMarks::mark(&mut marks.columns, column) {
                            shape.columns += 1;
                            shape.blocks += ColumnMarks::mark(&mut marks.blocks, column / tile.cols) as usize;
                        }
                    }
                }
                for r in rows_of(task * per_task + i) {
                    for e in csr.range(r) {
                        marks.clear(csr.index(e), tile.cols);
                    }
                }
            }
            Ok(())
        })?;
    } else {
        shapes.par_iter_mut().enumerate().for_each_init(Vec::new, |columns: &mut Vec<u32>, (block_row, shape)| {
            columns.clear();
            for r in rows_of(block_row) {
                // Bounded by the block row's entries, which the CSR already holds: not a caller-sized
                // allocation of its own. Column indices are below 2³¹ (C int).
                columns.extend(csr.range(r).map(|e| csr.index(e) as u32));
                shape.entries += csr.range(r).len();
            }
            columns.sort_unstable();
            shape.columns = dedup_sorted(columns);
            shape.blocks = distinct_blocks(&columns[..shape.columns], tile.cols);
        });
    }
    Ok(shapes)
}

/// One bit per column and per column block, all clear between block rows.
struct ColumnMarks {
    columns: Vec<u64>,
    blocks: Vec<u64>,
}

impl ColumnMarks {
    fn words(columns: usize) -> usize {
        columns.div_ceil(64)
    }

    fn new(columns: usize, tile_cols: usize) -> Result<Self> {
        Ok(ColumnMarks {
            columns: try_zeros(Self::words(columns), "the column marks")?,
            blocks: try_zeros(Self::words(columns.div_ceil(tile_cols)), "the column-block marks")?,
        })
    }

    /// Sets bit `i`; whether it was clear.
    fn mark(bits: &mut [u64], i: usize) -> bool {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let new = bits[word] & bit == 0;
        bits[word] |= bit;
        new
    }

    /// Clears the words holding `column` and its block.
    fn clear(&mut self, column: usize, tile_cols: usize) {
        self.columns[column / 64] = 0;
        self.blocks[column / tile_cols / 64] = 0;
    }
}

/// Distinct `col / tile_cols` over sorted, distinct columns.
fn distinct_blocks(sorted_columns: &[u32], tile_cols: usize) -> usize {
    let mut last = None;
    sorted_columns
        .iter()
        .filter(|&&c| {
            let block = c as usize / tile_cols;
            let new = last != Some(block);
            last = Some(block);
            new
        })
        .count()
}

/// The fewest nonzero `tile_rows`-high tiles any row order can give: a column block holding entries
/// in `k` rows needs at least ⌈k / tile_rows⌉ tiles whatever the order. Linear in the patterns; it
/// tells the analysis when no reordering can make tiles full enough to be worth trying.
pub fn fewest_blocks_of_any_order(patterns: &RowPatterns, tile_rows: usize) -> Result<usize> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let column_blocks = patterns.blocks.par_iter().max().map_or(0, |&c| c as usize + 1);
    let tiles = |rows_in: u32| (rows_in as usize).div_ceil(tile_rows);
    // Counted in parallel (one thread took 5-10 ms of a few-million-entry analysis): by each task
    // into a histogram of its own where the column blocks are few (shared counters would be fought
    // over), into one shared histogram otherwise. Counts are at most the rows, below 2³¹.
    let tasks = rayon::current_num_threads() * 4;
    if tasks.saturating_mul(column_blocks) <= patterns.blocks.len() {
        let per_task = patterns.blocks.len().div_ceil(tasks).max(1);
        let histograms = patterns
            .blocks
            .par_chunks(per_task)
            .map(|chunk| {
                let mut rows_in: Vec<u32> = try_zeros(column_blocks, "the rows per column block")?;
                for &c in chunk {
                    rows_in[c as usize] += 1;
                }
                Ok(rows_in)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((0..column_blocks).into_par_iter().map(|c| tiles(histograms.iter().map(|h| h[c]).sum())).sum())
    } else {
        let rows_in: Vec<AtomicU32> =
            try_collect_par(column_blocks, "the rows per column block", |_| AtomicU32::new(0))?;
        patterns.blocks.par_iter().for_each(|&c| {
            rows_in[c as usize].fetch_add(1, Relaxed);
        });
        Ok(rows_in.par_iter().map(|k| tiles(k.load(Relaxed))).sum())
    }
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
    jaccard_clusters(patterns, threshold, usize::MAX)
}

/// [`jaccard_row_order`] with clusters of at most `max_cluster` rows: a cluster is closed once it has
/// that many. With `max_cluster` = the tile height every full cluster is exactly one block row; those
/// come first, in the order they were formed, then the smaller clusters, then the empty rows, so that
/// a small cluster never shifts the full ones off the block-row boundaries.
pub fn jaccard_clusters(patterns: &RowPatterns, threshold: f64, max_cluster: usize) -> Result<Vec<usize>> {
    Ok(ClusterRun::new(patterns, threshold, max_cluster)?.finish())
}

/// [`jaccard_clusters`] run in steps: [`ClusterRun::advance`] forms clusters until enough rows are
/// placed, so that a caller can judge the first clusters before paying for the rest.
pub struct ClusterRun<'a> {
    state: Clustering<'a>,
    threshold: f64,
    max_cluster: usize,
    /// The clusters formed so far, one after another (with a cap, only the full ones).
    order: Vec<usize>,
    /// Rows of clusters smaller than `max_cluster` (only used when clusters are capped).
    partial: Vec<usize>,
    next_seed: usize,
}

impl<'a> ClusterRun<'a> {
    pub fn new(patterns: &'a RowPatterns, threshold: f64, max_cluster: usize) -> Result<Self> {
        let mut state = Clustering::new(patterns)?;
        state.budget = WORK_PER_PATTERN_ENTRY.saturating_mul(patterns.blocks.len()).saturating_add(MIN_WORK);
        let order = try_with_capacity(patterns.rows(), "the row order")?;
        Ok(ClusterRun { state, threshold, max_cluster, order, partial: Vec::new(), next_seed: 0 })
    }

    /// The rows of the clusters formed so far, in order (with a cap, the full clusters only, each
    /// one block row of `max_cluster` rows).
    pub fn clustered(&self) -> &[usize] {
        &self.order
    }

    /// The rows taken so far that [`Self::clustered`] does not hold: those of clusters smaller than
    /// the cap (and seeds past the work budget), which [`Self::finish`] places after the full ones.
    pub fn unclustered(&self) -> &[usize] {
        &self.partial
    }

    /// Forms clusters until at least `rows` rows are taken (into [`Self::clustered`] or
    /// [`Self::unclustered`]), every seed is, or, for a `work_share` above 1, the work done reaches
    /// 1 / `work_share` of the clustering's budget (checked between clusters). Past the whole budget
    /// the seeds left are taken as they come (see [`jaccard_row_order`]).
    pub fn advance(&mut self, rows: usize, work_share: usize) {
        let work_limit = if work_share > 1 { self.state.budget / work_share } else { usize::MAX };
        let (state, order, partial) = (&mut self.state, &mut self.order, &mut self.partial);
        let (max_cluster, threshold) = (self.max_cluster, self.threshold);
        let patterns = state.patterns;
        let capped = max_cluster != usize::MAX;
        while self.next_seed < patterns.rows() && order.len() + partial.len() < rows && state.work <= work_limit {
            let seed = self.next_seed;
            self.next_seed += 1;
            if state.clustered[seed] || patterns.row(seed).is_empty() {
                continue;
            }
            if state.work > state.budget {
                // Budget spent: the rest keep their original order (see jaccard_row_order).
                state.clustered[seed] = true;
                if capped {
                    partial.push(seed)
                } else {
                    order.push(seed)
                }
                continue;
            }
            let start = order.len();
            state.clustered[seed] = true;
            order.push(seed);
            state.join(seed, seed);
            while let Some(Reverse(row)) = state.candidates.pop() {
                let row = row as usize;
                if state.work > state.budget || order.len() - start == max_cluster {
                    state.candidates.clear();
                    break;
                }
                state.work += patterns.row(row).len();
                let pattern = state.compact_row(row);
                let shared = pattern.iter().filter(|&&c| state.in_union[c as usize]).count();
                let union = state.union_blocks.len() + pattern.len() - shared;
                // Jaccard distance 1 − shared/union < threshold, without dividing.
                if ((union - shared) as f64) < threshold * union as f64 {
                    state.clustered[row] = true;
                    order.push(row);
                    state.join(row, seed);
                }
            }
            state.clear_union();
            if capped && order.len() - start < max_cluster {
                partial.extend(order.drain(start..));
            }
        }
    }

    /// The row order: the clusters, then the rest (see [`jaccard_clusters`]).
    pub fn finish(mut self) -> Vec<usize> {
        self.advance(usize::MAX, 1);
        let patterns = self.state.patterns;
        self.order.append(&mut self.partial);
        self.order.extend((0..patterns.rows()).filter(|&r| patterns.row(r).is_empty()));
        self.order
    }
}

/// Work units (index entries scanned + pattern entries compared) allowed per row-pattern entry.
const WORK_PER_PATTERN_ENTRY: usize = 48;
/// Work always allowed, so small matrices are clustered exactly whatever their structure.
const MIN_WORK: usize = 4_000_000;

/// Working state of [`jaccard_row_order`]. Column-block ids are compacted to `0..used`, so every
/// array is O(rows + nnz), never O(cols / tile). Rows and compacted blocks are held as u32 (a CSR's
/// rows and columns fit i32): half the bytes the clustering walks (fem3x3 with permuted rows, f64,
/// on a 2-core host: 661–713 → 548–594 ms for the whole analysis).
struct Clustering<'a> {
    patterns: &'a RowPatterns,
    compact: Vec<u32>,
    /// Inverted index, CSR-like: the rows holding compact block `c`, sorted by row.
    rows_of_block_ptr: Vec<usize>,
    rows_of_block: Vec<u32>,
    clustered: Vec<bool>,
    /// The seed whose cluster last queued each row, so a row is examined at most once per cluster.
    queued_for_seed: Vec<u32>,
    in_union: Vec<bool>,
    union_blocks: Vec<u32>,
    /// Rows still to examine for the current cluster, smallest first (the scan order).
    candidates: BinaryHeap<Reverse<u32>>,
    /// Work done so far and the most allowed (see [`jaccard_row_order`]).
    work: usize,
    budget: usize,
}

impl<'a> Clustering<'a> {
    fn new(patterns: &'a RowPatterns) -> Result<Self> {
        let rows = patterns.rows();
        let mut used = try_copy(&patterns.blocks, "the column blocks in use")?;
        used.par_sort_unstable();
        used.dedup();
        let compact = try_collect_par(patterns.blocks.len(), "the compacted row patterns", |e| {
            used.partition_point(|&u| u < patterns.blocks[e]) as u32
        })?;
        let mut rows_of_block_ptr = try_vec(used.len() + 1, 0usize, "the rows per column block")?;
        for &c in &compact {
            rows_of_block_ptr[c as usize + 1] += 1;
        }
        for c in 0..used.len() {
            rows_of_block_ptr[c + 1] += rows_of_block_ptr[c];
        }
        let mut fill = try_copy(&rows_of_block_ptr, "the rows per column block")?;
        let mut rows_of_block = try_vec(compact.len(), 0u32, "the rows per column block")?;
        for r in 0..rows {
            for &c in &compact[patterns.ptr[r]..patterns.ptr[r + 1]] {
                rows_of_block[fill[c as usize]] = r as u32;
                fill[c as usize] += 1;
            }
        }
        Ok(Clustering {
            patterns,
            compact,
            rows_of_block_ptr,
            rows_of_block,
            clustered: try_vec(rows, false, "the clustered rows")?,
            queued_for_seed: try_vec(rows, u32::MAX, "the queued rows")?,
            in_union: try_vec(used.len(), false, "the union of a cluster")?,
            // A union holds each block once, and the candidates of one cluster each row once: room
            // for all of them up front means nothing grows later.
            union_blocks: try_with_capacity(used.len(), "the union of a cluster")?,
            candidates: BinaryHeap::from(try_with_capacity(rows, "the candidate rows")?),
            work: 0,
            budget: usize::MAX,
        })
    }

    fn compact_row(&self, r: usize) -> &[u32] {
        &self.compact[self.patterns.ptr[r]..self.patterns.ptr[r + 1]]
    }

    /// Adds `row`'s blocks to the current cluster's union and queues the later unclustered rows that
    /// share one of the new blocks. Earlier rows are not queued: the single pass never revisits them.
    fn join(&mut self, row: usize, seed: usize) {
        let (row, seed) = (row as u32, seed as u32);
        for k in self.patterns.ptr[row as usize]..self.patterns.ptr[row as usize + 1] {
            let c = self.compact[k];
            if self.in_union[c as usize] {
                continue;
            }
            self.in_union[c as usize] = true;
            self.union_blocks.push(c);
            let holders =
                &self.rows_of_block[self.rows_of_block_ptr[c as usize]..self.rows_of_block_ptr[c as usize + 1]];
            let later = &holders[holders.partition_point(|&x| x <= row)..];
            self.work += later.len();
            for &candidate in later {
                if !self.clustered[candidate as usize] && self.queued_for_seed[candidate as usize] != seed {
                    self.queued_for_seed[candidate as usize] = seed;
                    self.candidates.push(Reverse(candidate));
                }
            }
        }
    }

    fn clear_union(&mut self) {
        for c in self.union_blocks.drain(..) {
            self.in_union[c as usize] = false;
        }
    }
}

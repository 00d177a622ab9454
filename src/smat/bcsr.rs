//! The tensor-core part of an analysed matrix, for the block rows the analysis gives to the tensor
//! cores: BCSR (section IV-B of the paper) whose tiles gather their columns. A block row's distinct
//! columns, in increasing order, are cut `tile.cols` at a time; each tile stores those column
//! indices and its `tile.rows × tile.cols` values densely (row-major, zero padded). The paper's tiles
//! cover aligned column blocks instead; gathering stores at most as many tiles (exactly as many when
//! every block is full) and packs entries of different blocks into one tile, at the price of a
//! column index per tile column. Metadata grows with the tiles and the block rows only.

use super::Tile;
use crate::alloc::{element_count, try_vec, try_zeros};
use crate::chunks;
use crate::error::{Error, Result};
use crate::scalar::Element;
use crate::sparse::CsrRef;
use rayon::prelude::*;

#[derive(Clone, Debug)]
pub struct Bcsr<S> {
    pub tile: Tile,
    /// `block_row_ptr[br]..block_row_ptr[br + 1]` are block row `br`'s tiles.
    pub block_row_ptr: Vec<usize>,
    /// `tile.cols` per tile: the column of A (row of B) each tile column multiplies, increasing
    /// through a block row's tiles; [`NO_COLUMN`] pads the last tile of a block row.
    pub columns: Vec<u32>,
    /// `tile.area()` values per tile in the compute type.
    pub values: Vec<S>,
    /// The caller's row that row `i` of block row `br` produces, at `br · tile.rows + i`;
    /// [`NO_ROW`] for the padding rows of a last, partial block row.
    pub out_rows: Vec<u32>,
    /// Distinct (row, column) positions the blocks hold: what is not padding.
    pub positions: usize,
}

/// `out_rows` entry of a tile row that produces no row of C.
pub const NO_ROW: u32 = u32::MAX;

/// `columns` entry of a tile column that holds no column of A (its values are zero).
pub const NO_COLUMN: u32 = u32::MAX;

impl<S> Bcsr<S> {
    pub fn block_count(&self) -> usize {
        self.block_row_ptr.last().copied().unwrap_or(0)
    }

    /// The columns tile `slot` multiplies, padding included.
    pub fn tile_columns(&self, slot: usize) -> &[u32] {
        &self.columns[slot * self.tile.cols..(slot + 1) * self.tile.cols]
    }

    pub fn block_rows(&self) -> usize {
        self.block_row_ptr.len() - 1
    }
}

/// Tiles the given block rows of `csr` (stored block row `b` holds stored rows `b·tile.rows …`, and
/// stored row `i` is row `order[i]`, or `i` without an order); `blocks[k]` is the tile count of
/// `block_rows[k]` as [`super::reorder::block_row_shapes`] gave it, which sizes the arrays up front
/// so a huge matrix fails with `AllocationFailed` instead of aborting. Duplicate entries are summed in
/// the compute type, in CSR order. Runs in parallel over runs of block rows.
pub fn build<T: Element>(
    csr: &CsrRef<'_, T>,
    order: Option<&[usize]>,
    tile: Tile,
    block_rows: &[usize],
    blocks: &[usize],
) -> Result<Bcsr<T::Compute>> {
    let rows = csr.outer_dim;
    let area = tile.area();
    let mut block_row_ptr = try_vec(block_rows.len() + 1, 0usize, "the BCSR block-row pointers")?;
    for (k, &count) in blocks.iter().enumerate() {
        block_row_ptr[k + 1] = block_row_ptr[k] + count;
    }
    let block_count = block_row_ptr[block_rows.len()];
    let mut columns: Vec<u32> =
        try_vec(element_count(block_count, tile.cols, "the tile columns")?, NO_COLUMN, "the tile columns")?;
    let mut values: Vec<T::Compute> =
        try_zeros(element_count(block_count, area, "the BCSR block values")?, "the BCSR block values")?;
    let mut out_rows =
        try_vec(element_count(block_rows.len(), tile.rows, "the BCSR row map")?, NO_ROW, "the BCSR row map")?;
    let mut positions = try_vec(block_rows.len(), 0usize, "the BCSR positions")?;

    let bounds = chunks::runs(block_rows.len(), |k| block_row_ptr[k] * area);
    let col_runs = chunks::split_by_runs(&mut columns, &bounds, |k| block_row_ptr[k] * tile.cols);
    let value_runs = chunks::split_by_runs(&mut values, &bounds, |k| block_row_ptr[k] * area);
    let row_runs = chunks::split_by_runs(&mut out_rows, &bounds, |k| k * tile.rows);
    let position_runs = chunks::split_by_runs(&mut positions, &bounds, |k| k);
    let work = col_runs.into_par_iter().zip(value_runs).zip(row_runs).zip(position_runs).zip(bounds.par_windows(2));
    work.try_for_each(|((((cols_out, values_out), rows_out), positions_out), run)| -> Result<()> {
        let (mut touched, mut union) = (Vec::new(), Vec::new());
        for k in run[0]..run[1] {
            let local = block_row_ptr[k] - block_row_ptr[run[0]];
            let count = blocks[k];
            let tiles = &mut values_out[local * area..(local + count) * area];
            touched.clear();
            touched.resize(count * area, false);
            // The block row's columns: the union of its rows' columns, sorted.
            union.clear();
            let start = block_rows[k] * tile.rows;
            for position in start..(start + tile.rows).min(rows) {
                let r = order.map_or(position, |o| o[position]);
                union.extend(csr.range(r).map(|e| csr.index(e) as u32));
            }
            union.sort_unstable();
            union.dedup();
            if union.len().div_ceil(tile.cols) != count {
                return Err(Error::internal(format!(
                    "a block row has {} columns but {count} tiles were predicted",
                    union.len()
                )));
            }
            cols_out[local * tile.cols..local * tile.cols + union.len()].copy_from_slice(&union);
            for (i, position) in (start..(start + tile.rows).min(rows)).enumerate() {
                let r = order.map_or(position, |o| o[position]);
                rows_out[(k - run[0]) * tile.rows + i] = r as u32;
                for e in csr.range(r) {
                    let at = union.binary_search(&(csr.index(e) as u32)).expect("the column is in the union");
                    let at = (at / tile.cols) * area + i * tile.cols + at % tile.cols;
                    tiles[at] += csr.values[e].to_compute();
                    touched[at] = true;
                }
            }
            positions_out[k - run[0]] = touched.iter().filter(|&&t| t).count();
        }
        Ok(())
    })?;
    Ok(Bcsr { tile, block_row_ptr, columns, values, out_rows, positions: positions.iter().sum() })
}

//! BCSR with tensor-core tiles (section IV-B of the paper): block-row pointers, one column index per
//! nonzero block, and each block's `tile.rows × tile.cols` values stored densely (row-major, zero
//! padded). Metadata grows with the nonzero blocks and the block rows only.

use super::Tile;
use crate::alloc::{element_count, try_push, try_vec, try_with_capacity};
use crate::error::{Error, Result};
use crate::scalar::{ComputeScalar, Element};
use crate::sparse::CsrRef;

#[derive(Clone, Debug)]
pub struct Bcsr<S> {
    pub tile: Tile,
    /// `block_row_ptr[br]..block_row_ptr[br + 1]` are block row `br`'s blocks.
    pub block_row_ptr: Vec<usize>,
    /// Column-block index of each block, increasing within a block row (so B is read in order).
    pub block_cols: Vec<usize>,
    /// `block_cols.len() · tile.area()` values in the compute type.
    pub values: Vec<S>,
}

impl<S> Bcsr<S> {
    pub fn block_count(&self) -> usize {
        self.block_cols.len()
    }
}

/// Blocks `csr` with stored row `i` = original row `order[i]` (`None`: original order). Duplicate
/// entries are summed in the compute type. `block_count` is the count [`super::reorder::count_blocks`]
/// gave for this order; it sizes the value array up front so a huge matrix fails with
/// `AllocationFailed` instead of aborting.
pub fn build<T: Element>(
    csr: &CsrRef<'_, T>,
    order: Option<&[usize]>,
    tile: Tile,
    block_count: usize,
) -> Result<Bcsr<T::Compute>> {
    let rows = csr.outer_dim;
    let area = tile.area();
    let values_len = element_count(block_count, area, "the BCSR block values")?;
    let mut values = try_vec(values_len, T::Compute::ZERO, "the BCSR block values")?;
    let mut block_cols = try_with_capacity(block_count, "the BCSR column indices")?;
    let mut block_row_ptr = try_with_capacity(rows.div_ceil(tile.rows) + 1, "the BCSR block-row pointers")?;
    block_row_ptr.push(0);

    // (column block, offset inside the block, CSR entry) of one block row, grouped by sorting.
    let mut entries: Vec<(usize, usize, usize)> = Vec::new();
    for start in (0..rows).step_by(tile.rows) {
        entries.clear();
        for position in start..(start + tile.rows).min(rows) {
            let r = order.map_or(position, |o| o[position]);
            let local_row = position - start;
            for e in csr.range(r) {
                let c = csr.index(e);
                try_push(
                    &mut entries,
                    (c / tile.cols, local_row * tile.cols + c % tile.cols, e),
                    "a block row's entries",
                )?;
            }
        }
        // Stable, so duplicates are summed in CSR order whatever the sort does.
        entries.sort_by_key(|&(block_col, _, _)| block_col);
        let mut previous = None;
        for &(block_col, offset, e) in &entries {
            if previous != Some(block_col) {
                previous = Some(block_col);
                if block_cols.len() == block_count {
                    return Err(Error::internal(format!("BCSR has more blocks than the {block_count} predicted")));
                }
                block_cols.push(block_col);
            }
            let slot = block_cols.len() - 1;
            let value = &mut values[slot * area + offset];
            *value += csr.values[e].to_compute();
        }
        block_row_ptr.push(block_cols.len());
    }
    if block_cols.len() != block_count {
        return Err(Error::internal(format!(
            "BCSR has {} blocks but the block count predicted {block_count}",
            block_cols.len()
        )));
    }
    Ok(Bcsr { tile, block_row_ptr, block_cols, values })
}

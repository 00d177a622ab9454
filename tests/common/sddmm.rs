//! What the SDDMM tests share about the CUDA backend's dispatch.

use sparsegpu::{IndexBase, Layout, ValueType};

/// Whether AUTO with a plan made on the CUDA handle takes the tensor-core tiles (the tiled
/// algorithm) for a call with these operands (host, or 16-byte aligned device memory; the pattern in
/// its own index base): only for f16 / bf16, A and B row-major with K and the leading dimensions
/// multiples of 8, rows sorted by column without repeats and at least as many entries as rows times
/// (column tiles of 128 + 1); then where the 128 × 128 tiles holding entries are at least 10 % full,
/// never below 2.5 % (between, by the library's cost model: `None`).
pub fn takes_tensor_tiles(
    value_type: ValueType,
    (m, n, k): (usize, usize, usize),
    layout: Layout,
    base: IndexBase,
    (lda, ldb): (usize, usize),
    row_ptr: &[i32],
    col_ind: &[i32],
) -> Option<bool> {
    let offset = base.offset() as usize;
    let nnz = col_ind.len();
    let row = |i: usize| &col_ind[row_ptr[i] as usize - offset..row_ptr[i + 1] as usize - offset];
    let rows_sorted = (0..m).all(|i| row(i).windows(2).all(|p| p[0] < p[1]));
    let possible = matches!(value_type, ValueType::F16 | ValueType::Bf16)
        && layout == Layout::RowMajor
        && k.is_multiple_of(8)
        && lda.is_multiple_of(8)
        && ldb.is_multiple_of(8)
        && rows_sorted
        && m > 0
        && m * (n.div_ceil(128) + 1) <= nnz;
    if !possible {
        return Some(false);
    }
    let tiles: std::collections::HashSet<(usize, usize)> =
        (0..m).flat_map(|i| row(i).iter().map(move |&c| (i / 128, (c as usize - offset) / 128))).collect();
    let fill = nnz as f64 / (tiles.len() * 128 * 128) as f64;
    if fill >= 0.1 {
        Some(true)
    } else if fill < 0.025 {
        Some(false)
    } else {
        None
    }
}

//! What the SDDMM tests share about the CUDA backend's dispatch.

use sparsegpu::{IndexBase, Layout, ValueType};

/// Whether AUTO with a plan made on the CUDA handle takes dense tiles of S (the tiled algorithm) for
/// a call with these operands (host, or 16-byte aligned device memory; the pattern in its own index
/// base): f16 / bf16's tensor-core tiles ([`tensor_tiles`]) or any type's 16 × 16 block tiles
/// ([`block_tiles`]); `None` where neither is clear-cut yes and one is not clear-cut no. (The band
/// kernels, the tiled algorithm's other kernels, need patterns whose slices fill the GPU: none of
/// the tests' patterns that this predicts for is that large.)
pub fn takes_dense_tiles(
    value_type: ValueType,
    shape: (usize, usize, usize),
    layout: Layout,
    base: IndexBase,
    lds: (usize, usize),
    row_ptr: &[i32],
    col_ind: &[i32],
) -> Option<bool> {
    let tensor = tensor_tiles(value_type, shape, layout, base, lds, row_ptr, col_ind);
    let block = block_tiles(value_type, shape, layout, base, lds, row_ptr, col_ind);
    match (tensor, block) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// Whether AUTO takes the tensor-core tiles: only for f16 / bf16, A and B row-major with K and the
/// leading dimensions multiples of 8, rows sorted by column without repeats and at least as many
/// entries as rows times (column tiles of 128 + 1); then where the 128 × 128 tiles holding entries
/// are at least 10 % full, never below 2.5 % (between, by the library's cost model: `None`).
fn tensor_tiles(
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

/// Whether AUTO takes the block tiles: A and B row-major with K and the leading dimensions multiples
/// of 16 bytes, rows sorted by column without repeats, the 16 × 16 tiles holding entries at least 40
/// a tile on average (the plan keeps none otherwise); then by the library's cost model
/// (`block_tiles_pay` in src/backend/cuda/sddmm.rs), `None` within 25 % of its break-even.
fn block_tiles(
    value_type: ValueType,
    (m, _n, k): (usize, usize, usize),
    layout: Layout,
    base: IndexBase,
    (lda, ldb): (usize, usize),
    row_ptr: &[i32],
    col_ind: &[i32],
) -> Option<bool> {
    let offset = base.offset() as usize;
    let nnz = col_ind.len();
    let row = |i: usize| &col_ind[row_ptr[i] as usize - offset..row_ptr[i + 1] as usize - offset];
    let vector = match value_type {
        ValueType::F64 => 2,
        ValueType::F32 => 4,
        _ => 8,
    };
    let possible = layout == Layout::RowMajor
        && k.is_multiple_of(vector)
        && lda.is_multiple_of(vector)
        && ldb.is_multiple_of(vector)
        && m > 0
        && nnz > 0
        && (0..m).all(|i| row(i).windows(2).all(|p| p[0] < p[1]));
    if !possible {
        return Some(false);
    }
    let tiles: std::collections::HashSet<(usize, usize)> =
        (0..m).flat_map(|i| row(i).iter().map(move |&c| (i / 16, (c as usize - offset) / 16))).collect();
    if nnz < 40 * tiles.len() {
        return Some(false);
    }
    let k = k as f64;
    let (tile_ns, entry_ns) = match value_type {
        ValueType::F64 => (1.83 + 0.0495 * k, 0.00095 * k),
        _ => (2.0 + 0.0234 * k, 0.0015 + 0.00057 * k),
    };
    let ratio = tiles.len() as f64 * tile_ns / (nnz as f64 * entry_ns);
    if ratio < 0.8 {
        Some(true)
    } else if ratio > 1.25 {
        Some(false)
    } else {
        None
    }
}

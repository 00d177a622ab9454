//! What the SDDMM tests share about the CUDA backend's dispatch.

use sparsegpu::{IndexBase, Layout, ValueType};

/// An SDDMM call's operands as a C caller passes them: the pattern in its own index base.
pub struct SddmmOperands<'a> {
    pub value_type: ValueType,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub layout: Layout,
    pub base: IndexBase,
    pub lda: usize,
    pub ldb: usize,
    pub row_ptr: &'a [i32],
    pub col_ind: &'a [i32],
}

impl SddmmOperands<'_> {
    /// Whether AUTO with a plan made on the CUDA handle takes the tensor-core tiles (the tiled
    /// algorithm), for host (or 16-byte aligned device) operands: only for f16 / bf16, A and B
    /// row-major with K and the leading dimensions multiples of 8, rows sorted by column without
    /// repeats and at least as many entries as rows times (column tiles of 128 + 1); then where the
    /// 128 × 128 tiles holding entries are at least 10 % full, never below 2.5 % (between, by the
    /// library's cost model: `None`).
    pub fn takes_tensor_tiles(&self) -> Option<bool> {
        let offset = self.base.offset() as usize;
        let nnz = self.col_ind.len();
        let row = |i: usize| &self.col_ind[self.row_ptr[i] as usize - offset..self.row_ptr[i + 1] as usize - offset];
        let rows_sorted = (0..self.m).all(|i| row(i).windows(2).all(|p| p[0] < p[1]));
        let possible = matches!(self.value_type, ValueType::F16 | ValueType::Bf16)
            && self.layout == Layout::RowMajor
            && self.k.is_multiple_of(8)
            && self.lda.is_multiple_of(8)
            && self.ldb.is_multiple_of(8)
            && rows_sorted
            && self.m > 0
            && self.m * (self.n.div_ceil(128) + 1) <= nnz;
        if !possible {
            return Some(false);
        }
        let tiles: std::collections::HashSet<(usize, usize)> =
            (0..self.m).flat_map(|i| row(i).iter().map(move |&c| (i / 128, (c as usize - offset) / 128))).collect();
        let fill = nnz as f64 / (tiles.len() * 128 * 128) as f64;
        if fill >= 0.1 {
            Some(true)
        } else if fill < 0.025 {
            Some(false)
        } else {
            None
        }
    }
}

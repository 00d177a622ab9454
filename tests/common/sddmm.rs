//! What the SDDMM tests share: the CUDA backend's dispatch, and the products of the math modes.

use sparsegpu::sddmm::SddmmMathMode;
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
    let call = Call { value_type, shape, layout, base, lds, row_ptr, col_ind };
    match (tensor_tiles(&call), block_tiles(&call)) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// A call's operands as the predictions read them.
struct Call<'a> {
    value_type: ValueType,
    shape: (usize, usize, usize),
    layout: Layout,
    base: IndexBase,
    lds: (usize, usize),
    row_ptr: &'a [i32],
    col_ind: &'a [i32],
}

impl Call<'_> {
    fn row(&self, i: usize) -> &[i32] {
        let offset = self.base.offset() as usize;
        &self.col_ind[self.row_ptr[i] as usize - offset..self.row_ptr[i + 1] as usize - offset]
    }

    /// A and B row-major with K and the leading dimensions multiples of `vector` elements, at least
    /// one row and one entry, every row sorted by column without repeats.
    fn suits_tiles(&self, vector: usize) -> bool {
        let ((m, _, k), (lda, ldb)) = (self.shape, self.lds);
        self.layout == Layout::RowMajor
            && k.is_multiple_of(vector)
            && lda.is_multiple_of(vector)
            && ldb.is_multiple_of(vector)
            && m > 0
            && !self.col_ind.is_empty()
            && (0..m).all(|i| self.row(i).windows(2).all(|p| p[0] < p[1]))
    }

    /// The `size` × `size` tiles of S holding entries.
    fn tiles(&self, size: usize) -> usize {
        let offset = self.base.offset() as usize;
        let tiles: std::collections::HashSet<(usize, usize)> = (0..self.shape.0)
            .flat_map(|i| self.row(i).iter().map(move |&c| (i / size, (c as usize - offset) / size)))
            .collect();
        tiles.len()
    }
}

/// Whether AUTO takes the tensor-core tiles: only for f16 / bf16, A and B row-major with K and the
/// leading dimensions multiples of 8, rows sorted by column without repeats and at least as many
/// entries as rows times (column tiles of 128 + 1), and only where the library's cost model puts the
/// COO kernel above the tiles' least time (`tensor_tiles_pay` and `TC_FEWEST_TILES_NS` in
/// src/backend/cuda/sddmm.rs: 15 µs; `None` within 25 % of it); then where the 128 × 128 tiles
/// holding entries are at least 10 % full, never below 2.5 % (between, by the cost model: `None`).
fn tensor_tiles(call: &Call) -> Option<bool> {
    let ((m, n, k), nnz) = (call.shape, call.col_ind.len());
    let possible = matches!(call.value_type, ValueType::F16 | ValueType::Bf16)
        && call.suits_tiles(8)
        && m * (n.div_ceil(128) + 1) <= nnz;
    if !possible {
        return Some(false);
    }
    let coo_ns = nnz as f64 * (0.0164 + 0.00029 * k as f64);
    if coo_ns < 0.8 * 15_000.0 {
        return Some(false);
    }
    if coo_ns < 1.25 * 15_000.0 {
        return None;
    }
    let fill = nnz as f64 / (call.tiles(128) * 128 * 128) as f64;
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
fn block_tiles(call: &Call) -> Option<bool> {
    let vector = match call.value_type {
        ValueType::F64 => 2,
        ValueType::F32 => 4,
        _ => 8,
    };
    if !call.suits_tiles(vector) {
        return Some(false);
    }
    let (tiles, nnz) = (call.tiles(16), call.col_ind.len());
    if nnz < 40 * tiles {
        return Some(false);
    }
    let k = call.shape.2 as f64;
    let (tile_ns, entry_ns) = match call.value_type {
        ValueType::F64 => (1.83 + 0.0495 * k, 0.00095 * k),
        _ => (2.0 + 0.0234 * k, 0.0015 + 0.00057 * k),
    };
    let ratio = tiles as f64 * tile_ns / (nnz as f64 * entry_ns);
    if ratio < 0.8 {
        Some(true)
    } else if ratio > 1.25 {
        Some(false)
    } else {
        None
    }
}

/// An FP32 value's TF32 neighbour, worked out in f64 apart from the library's bit operations: 10
/// explicit mantissa bits at the value's own exponent (f32's subnormals share the least), rounded
/// to nearest with ties away from zero (`nearest`) or toward zero.
pub fn tf32(x: f64, nearest: bool) -> f64 {
    let bits = (x as f32).to_bits();
    let exponent = ((bits >> 23) & 0xff) as i32;
    let ulp = 2f64.powi(exponent.max(1) - 127 - 10);
    let steps = x / ulp;
    (if nearest { steps.round() } else { steps.trunc() }) * ulp
}

/// a·b (FP32 values) as SDDMM's math mode `math` multiplies them, exactly (every product of TF32
/// values is exact in f64): TF32, tf32(a)·tf32(b); 3xTF32, with big = TF32 to nearest and small =
/// the rest truncated to TF32, small_a·big_b + big_a·small_b + big_a·big_b; the default, a·b.
pub fn product_in(math: SddmmMathMode, a: f64, b: f64) -> f64 {
    let split = |x: f64| {
        let big = tf32(x, true);
        (big, tf32(x - big, false))
    };
    match math {
        SddmmMathMode::Default => a * b,
        SddmmMathMode::Tf32 => tf32(a, true) * tf32(b, true),
        SddmmMathMode::Tf32x3 => {
            let ((a_big, a_small), (b_big, b_small)) = (split(a), split(b));
            a_small * b_big + a_big * b_small + a_big * b_big
        }
    }
}

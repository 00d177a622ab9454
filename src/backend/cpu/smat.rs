//! SMaT SpMM on the CPU: `C = α·A·B + β·C` over the tiles and the CSR rows of an analysed matrix.
//!
//! Tiles: one task per (block row, panel of up to `COLUMN_PANEL` columns of B); every tile of the
//! block row is multiplied with the rows of the B panel its columns name, one rank-1 update per tile
//! column (the CPU counterpart of the tensor-core mma on a tile), accumulated into a small tile-high
//! buffer, which is then scaled and scattered into C at the caller's row indices (undoing the row
//! permutation).
//! CSR rows: one task per (run of rows, panel), each row accumulated entry by entry.
//! Half-precision types compute in f32, like the paper's f16 mma with f32 accumulation.

use super::CpuExecutor;
use super::tf32::tf32_split;
use crate::alloc::{element_count, try_vec};
use crate::dense::{MatMut, MatRef};
use crate::error::Result;
use crate::log;
use crate::scalar::{ComputeScalar, Element};
use crate::smat::bcsr::{Bcsr, NO_COLUMN, NO_ROW};
use crate::smat::contract::{HostCsr, PreparedBlocks, Product, RawCsr, SmatBackend, foreign_matrix};
use crate::smat::rows::RowsCsr;
use crate::smat::{MatrixInfo, SmatMathMode, SmatMatrix, Storage};
use crate::types::ValueType;
use half::{bf16, f16};
use rayon::prelude::*;

/// Columns of B one task handles: keeps the accumulator (tile rows × panel) in L1/L2 and gives
/// parallelism when there are few block rows but many right-hand sides.
const COLUMN_PANEL: usize = 256;

/// Element types SMaT multiplies; each picks how B reaches the compute type.
pub trait SpmmElement: Element {
    /// `C = α·A·B + β·C`; `b` is `A.cols × n`, `c` is `A.rows × n`, both already validated.
    /// β = 0 never reads C. `math_mode` applies to f32 tiles only.
    fn spmm(
        storage: &Storage<Self::Compute>,
        alpha: Self::Compute,
        b: MatRef<'_, Self>,
        beta: Self::Compute,
        c: MatMut<'_, Self>,
        math_mode: SmatMathMode,
    ) -> Result<()>;
}

macro_rules! native_spmm {
    ($t:ty) => {
        impl SpmmElement for $t {
            fn spmm(
                storage: &Storage<$t>,
                alpha: $t,
                b: MatRef<'_, $t>,
                beta: $t,
                c: MatMut<'_, $t>,
                math_mode: SmatMathMode,
            ) -> Result<()> {
                let out = ScatteredOutput::new(c);
                let tf32x3 = <$t>::VALUE_TYPE == ValueType::F32 && math_mode == SmatMathMode::Tf32x3;
                for_each_panel(storage, b, tf32x3, |row, first_col, acc: &[$t]| {
                    for (j, &v) in acc.iter().enumerate() {
                        // SAFETY: (row, first_col + j) lies inside C, and each task owns its rows × panel.
                        unsafe {
                            let value =
                                if beta == 0.0 { alpha * v } else { alpha * v + beta * out.read(row, first_col + j) };
                            out.write(row, first_col + j, value);
                        }
                    }
                })
            }
        }
    };
}

native_spmm!(f32);
native_spmm!(f64);

macro_rules! half_spmm {
    ($t:ty) => {
        impl SpmmElement for $t {
            fn spmm(
                storage: &Storage<f32>,
                alpha: f32,
                b: MatRef<'_, $t>,
                beta: f32,
                c: MatMut<'_, $t>,
                _: SmatMathMode,
            ) -> Result<()> {
                // The products read f32 operands: widen B once (exact) into a row-major copy.
                let (k, n) = (b.rows, b.cols);
                const WHAT: &str = "the f32 copy of B";
                let mut wide = try_vec(element_count(k, n, WHAT)?, 0.0f32, WHAT)?;
                if n > 0 {
                    wide.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
                        for (j, x) in row.iter_mut().enumerate() {
                            *x = b.get(i, j).to_f32();
                        }
                    });
                }
                let wide_b = MatRef { data: &wide, rows: k, cols: n, row_stride: n, col_stride: 1 };
                let out = ScatteredOutput::new(c);
                for_each_panel(storage, wide_b, false, |row, first_col, acc: &[f32]| {
                    for (j, &v) in acc.iter().enumerate() {
                        // SAFETY: as for the native types.
                        unsafe {
                            let value = if beta == 0.0 {
                                alpha * v
                            } else {
                                alpha * v + beta * out.read(row, first_col + j).to_f32()
                            };
                            out.write(row, first_col + j, <$t>::from_f32(value));
                        }
                    }
                })
            }
        }
    };
}

half_spmm!(f16);
half_spmm!(bf16);

/// Computes every row of `A · B[:, panel]` for every column panel in parallel, from the tiles and
/// the CSR rows, and hands each to `finish(caller's row, first column of the panel, accumulated
/// values)`. Each caller row is produced exactly once.
fn for_each_panel<S: ComputeScalar>(
    storage: &Storage<S>,
    b: MatRef<'_, S>,
    tf32x3: bool,
    finish: impl Fn(usize, usize, &[S]) + Sync,
) -> Result<()> {
    tile_panels(&storage.tiles, b, tf32x3, &finish);
    row_panels(&storage.rows, b, &finish);
    Ok(())
}

/// The tiles' rows of `A · B[:, panel]`; with `tf32x3` (f32 only) in 3xTF32, the GPU kernel's
/// arithmetic up to the order of the FP32 sums: both operands split by [`tf32_split`], each product
/// as small·big + big·small + big·big.
fn tile_panels<S: ComputeScalar>(
    bcsr: &Bcsr<S>,
    b: MatRef<'_, S>,
    tf32x3: bool,
    finish: &(impl Fn(usize, usize, &[S]) + Sync),
) {
    let (n, tile) = (b.cols, bcsr.tile);
    if bcsr.block_rows() == 0 {
        return;
    }
    let panels = n.div_ceil(COLUMN_PANEL);
    // The rows of B that hold only finite values. A padding zero of a tile times such a row adds
    // ±0 to sums that start at +0 (and so are never −0): no change, and it is skipped. Where the
    // row holds an Inf or a NaN it is multiplied, as on the tensor cores. Multiplying every padding
    // zero had made tiles of fill 0.37 (the suite's fem3x3 in f32) three times slower than the same
    // rows as CSR on a 2-core host.
    let finite_rows: Vec<bool> = (0..b.rows).into_par_iter().map(|k| row_is_finite(b, k)).collect();
    let scratch = || (Vec::new(), Vec::new(), Vec::new());
    (0..bcsr.block_rows() * panels).into_par_iter().for_each_init(scratch, |(acc, b_big, b_small), task| {
        let (block_row, panel) = (task / panels, task % panels);
        let first_col = panel * COLUMN_PANEL;
        let width = COLUMN_PANEL.min(n - first_col);
        let out_rows = &bcsr.out_rows[block_row * tile.rows..(block_row + 1) * tile.rows];
        let height = out_rows.iter().take_while(|&&r| r != NO_ROW).count();
        acc.clear();
        acc.resize(height * width, S::ZERO);
        for slot in bcsr.block_row_ptr[block_row]..bcsr.block_row_ptr[block_row + 1] {
            let columns = bcsr.tile_columns(slot);
            let block = &bcsr.values[slot * tile.area()..(slot + 1) * tile.area()];
            // Padding columns come last and must not read B.
            let depth = columns.iter().take_while(|&&k| k != NO_COLUMN).count();
            // One rank-1 update per column, in increasing column order whatever rows share the
            // tile, so a row's result does not depend on the reordering. Padding zeros are
            // multiplied where B's row is not finite, as on the tensor cores (a NaN in B reaches
            // the tile's rows alike).
            for (q, &k) in columns[..depth].iter().enumerate() {
                let skip_zeros = finite_rows[k as usize];
                if tf32x3 {
                    // B's panel row split once for the tile's rows.
                    b_big.clear();
                    b_small.clear();
                    for j in 0..width {
                        let (big, small) = tf32_split(b.get(k as usize, first_col + j).to_f64() as f32);
                        b_big.push(S::from_f64(big as f64));
                        b_small.push(S::from_f64(small as f64));
                    }
                }
                for i in 0..height {
                    let (row, v) = (&mut acc[i * width..(i + 1) * width], block[i * tile.cols + q]);
                    if skip_zeros && v == S::ZERO {
                        continue;
                    }
                    if tf32x3 {
                        let (big, small) = tf32_split(v.to_f64() as f32);
                        let (v_big, v_small) = (S::from_f64(big as f64), S::from_f64(small as f64));
                        for ((x, &bb), &bs) in row.iter_mut().zip(b_big.iter()).zip(b_small.iter()) {
                            *x += v_small * bb;
                            *x += v_big * bs;
                            *x += v_big * bb;
                        }
                    } else {
                        add_scaled_row(row, v, b, k as usize, first_col);
                    }
                }
            }
        }
        for (i, &row) in out_rows[..height].iter().enumerate() {
            finish(row as usize, first_col, &acc[i * width..(i + 1) * width]);
        }
    });
}

/// Whether row k of B holds only finite values.
fn row_is_finite<S: ComputeScalar>(b: MatRef<'_, S>, k: usize) -> bool {
    (0..b.cols).all(|j| b.get(k, j).to_f64().is_finite())
}

/// `acc += v · B[k, first_col .. first_col + acc.len()]`.
fn add_scaled_row<S: ComputeScalar>(acc: &mut [S], v: S, b: MatRef<'_, S>, k: usize, first_col: usize) {
    if b.col_stride == 1 {
        // Row-major B: the panel of row k is contiguous, and the loop vectorises.
        let start = b.index(k, first_col);
        let width = acc.len();
        for (x, &bk) in acc.iter_mut().zip(&b.data[start..start + width]) {
            *x += v * bk;
        }
    } else {
        for (j, x) in acc.iter_mut().enumerate() {
            *x += v * b.get(k, first_col + j);
        }
    }
}

/// Rows of the CSR part one task handles.
const ROWS_PER_TASK: usize = 64;

fn row_panels<S: ComputeScalar>(csr: &RowsCsr<S>, b: MatRef<'_, S>, finish: &(impl Fn(usize, usize, &[S]) + Sync)) {
    let n = b.cols;
    let panels = n.div_ceil(COLUMN_PANEL);
    let runs = csr.rows().div_ceil(ROWS_PER_TASK);
    (0..runs * panels).into_par_iter().for_each_init(Vec::new, |acc: &mut Vec<S>, task| {
        let (run, panel) = (task / panels, task % panels);
        let first_col = panel * COLUMN_PANEL;
        let width = COLUMN_PANEL.min(n - first_col);
        for i in run * ROWS_PER_TASK..((run + 1) * ROWS_PER_TASK).min(csr.rows()) {
            acc.clear();
            acc.resize(width, S::ZERO);
            for e in csr.row_ptr[i]..csr.row_ptr[i + 1] {
                add_scaled_row(acc, csr.values[e], b, csr.col_ind[e] as usize, first_col);
            }
            finish(csr.out_rows[i] as usize, first_col, acc);
        }
    });
}

/// An analysed matrix on the CPU backend: the host storage as the analysis built it.
#[derive(Debug)]
pub struct HostStorage<S>(pub Storage<S>);

impl<S: ComputeScalar> PreparedBlocks for HostStorage<S> {
    fn backend_name(&self) -> &'static str {
        "CPU"
    }
}

/// The CPU keeps an analysed matrix's host BCSR as it is and multiplies caller arrays in place.
impl<T: SpmmElement> SmatBackend<T> for CpuExecutor {
    unsafe fn csr_to_host<'a>(&mut self, csr: &RawCsr<T>) -> Result<HostCsr<'a, T>> {
        // SAFETY: host memory of their stated lengths (the contract).
        Ok(unsafe { csr.host() })
    }

    fn prepare(&mut self, _info: &MatrixInfo, storage: Storage<T::Compute>) -> Result<Box<dyn PreparedBlocks>> {
        Ok(Box::new(HostStorage(storage)))
    }

    unsafe fn spmm(&mut self, a: &SmatMatrix, product: &Product<T>) -> Result<()> {
        let HostStorage(storage) = a.blocks::<HostStorage<T::Compute>>().ok_or_else(|| foreign_matrix(a, "the CPU"))?;
        // SAFETY: host memory of their stated lengths, not overlapping (the contract).
        let b =
            if product.b_len == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(product.b, product.b_len) } };
        let c = if product.c_len == 0 {
            &mut [][..]
        } else {
            unsafe { std::slice::from_raw_parts_mut(product.c, product.c_len) }
        };
        let info = a.info();
        log::note(|| {
            let panels = product.n.div_ceil(COLUMN_PANEL);
            let tf32x3 = T::VALUE_TYPE == ValueType::F32 && product.math_mode == SmatMathMode::Tf32x3;
            format!(
                "kernel: a task per block row of tiles or {ROWS_PER_TASK} CSR rows and per panel of up to \
                 {COLUMN_PANEL} columns of B (panels: {panels}); tiles as a rank-1 update per tile column{}",
                if tf32x3 { " in 3xTF32" } else { "" }
            )
        });
        let b = MatRef::new(b, info.cols, product.n, product.ldb, product.layout);
        let c = MatMut::new(c, info.rows, product.n, product.ldc, product.layout);
        T::spmm(storage, product.alpha, b, product.beta, c, product.math_mode)
    }
}

/// C shared by the tasks. Each task writes a distinct set of elements (its rows' caller rows — every
/// caller row is produced by one tile row or one CSR row — times its column panel), which is what
/// makes the unsynchronised writes sound.
struct ScatteredOutput<T> {
    ptr: *mut T,
    len: usize,
    row_stride: usize,
    col_stride: usize,
}

// SAFETY: see the type's comment; T is a plain number.
unsafe impl<T: Send> Send for ScatteredOutput<T> {}
unsafe impl<T: Send> Sync for ScatteredOutput<T> {}

impl<T: Copy> ScatteredOutput<T> {
    fn new(c: MatMut<'_, T>) -> Self {
        ScatteredOutput {
            ptr: c.data.as_mut_ptr(),
            len: c.data.len(),
            row_stride: c.row_stride,
            col_stride: c.col_stride,
        }
    }

    #[inline]
    fn index(&self, i: usize, j: usize) -> usize {
        let idx = i * self.row_stride + j * self.col_stride;
        assert!(idx < self.len, "C index {idx} out of {}", self.len);
        idx
    }

    /// # Safety
    /// No other task may write element (i, j) concurrently.
    #[inline]
    unsafe fn read(&self, i: usize, j: usize) -> T {
        unsafe { *self.ptr.add(self.index(i, j)) }
    }

    /// # Safety
    /// No other task may access element (i, j) concurrently.
    #[inline]
    unsafe fn write(&self, i: usize, j: usize, v: T) {
        unsafe { *self.ptr.add(self.index(i, j)) = v }
    }
}

//! SpAMM on the CPU: the reference semantics of the family and a fast fallback.
//!
//! Each C block is one rayon task (as each C block is one thread block in cuSpAMM's multiplication
//! kernel). It walks the valid k of its block in increasing order and multiplies straight from the
//! caller's memory with the dense `ComputeScalar::gemm` on strided views, so transposed operands
//! cost nothing. Consecutive valid k are merged into one GEMM with a longer inner dimension: on decay
//! matrices the valid k of a block are mostly one run around the diagonal, and a long GEMM runs at
//! dense speed where b³-sized calls would be dominated by packing overhead.
//!
//! In the 3xTF32 math mode ([`MathMode::Tf32x3`]) the operands are split once into their TF32 big and
//! small parts ([`tf32_split`], bit for bit the GPU kernel's split), and each run of valid k is three
//! FP32 GEMMs (small·big, big·small, big·big) summed into the tile: the tensor-core kernel's
//! arithmetic, up to the order and rounding of the FP32 sums.

use super::CpuExecutor;
use super::tf32::tf32_split;
use crate::alloc::{element_count, try_vec};
use crate::dense::axpby;
use crate::error::{Error, Result};
use crate::log;
use crate::scalar::{ComputeScalar, Element};
use crate::spamm::contract::{Outcome, Product, RawOperand, SpammBackend, SpammStatistics, Totals};
use crate::spamm::tune::{CandidateEvaluator, NormMapEvaluator};
use crate::spamm::{GemmOperand, MathMode, NormMap, ProductPlan, runs_3xtf32};
use crate::types::ValueType;
use rayon::prelude::*;
use std::any::TypeId;
use std::borrow::Cow;

/// `C ← α · Σ_(valid (i,k,j)) op(A)_ik · op(B)_kj + β · C` for the column-major m × n matrix C with
/// leading dimension `ldc` (`c` holds at least `(n − 1)·ldc + m` elements when m, n > 0). β = 0
/// never reads C. Half-precision operands are converted to f32 once and accumulate in f32, as tensor
/// cores do; f32 and f64 are used in place. `mode` matters to f32 only ([`runs_3xtf32`]). Copies
/// are allocated before C is written, so an allocation failure leaves C untouched.
#[allow(clippy::too_many_arguments)]
pub fn spamm_gemm<T: Element>(
    plan: &ProductPlan,
    a: &GemmOperand<'_, T>,
    b: &GemmOperand<'_, T>,
    alpha: T::Compute,
    beta: T::Compute,
    c: &mut [T],
    ldc: usize,
    mode: MathMode,
) -> Result<()> {
    let (m, k) = a.op_shape();
    let (k_b, n) = b.op_shape();
    debug_assert_eq!(k, k_b);
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (a_data, a_ld) = in_compute_type(a)?;
    let (b_data, b_ld) = in_compute_type(b)?;
    let a_compute =
        GemmOperand { data: &a_data, op: a.op, stored_rows: a.stored_rows, stored_cols: a.stored_cols, ld: a_ld };
    let b_compute =
        GemmOperand { data: &b_data, op: b.op, stored_rows: b.stored_rows, stored_cols: b.stored_cols, ld: b_ld };
    let c = &mut c[..(n - 1) * ldc + m];
    if runs_3xtf32(mode, T::VALUE_TYPE, plan.block_size, plan.block_dims().2) {
        let (a_big, a_small) = tf32_split_operand(&a_compute)?;
        let (b_big, b_small) = tf32_split_operand(&b_compute)?;
        let part = |x: &GemmOperand<'_, T::Compute>, data| GemmOperand { data, ..*x };
        let (a_big, a_small) = (part(&a_compute, &a_big[..]), part(&a_compute, &a_small[..]));
        let (b_big, b_small) = (part(&b_compute, &b_big[..]), part(&b_compute, &b_small[..]));
        let terms = [(a_small, b_big), (a_big, b_small), (a_big, b_big)];
        execute::<T>(plan, &terms, alpha, beta, c, m, n, ldc);
    } else {
        execute::<T>(plan, &[(a_compute, b_compute)], alpha, beta, c, m, n, ldc);
    }
    Ok(())
}

/// The TF32 big and small parts of every stored element of an f32 operand (same layout).
#[allow(clippy::type_complexity)]
fn tf32_split_operand<C: ComputeScalar>(x: &GemmOperand<'_, C>) -> Result<(Vec<C>, Vec<C>)> {
    let mut big = try_vec(x.data.len(), C::ZERO, "the TF32 parts of an operand")?;
    let mut small = try_vec(x.data.len(), C::ZERO, "the TF32 parts of an operand")?;
    big.par_iter_mut().zip(&mut small).zip(x.data).for_each(|((big, small), v)| {
        // Exact for C = f32, the only compute type a 3xTF32 product has.
        let (b, s) = tf32_split(v.to_f64() as f32);
        (*big, *small) = (C::from_f64(b as f64), C::from_f64(s as f64));
    });
    Ok((big, small))
}

/// The operand's data as the compute type: borrowed when `T` already is it, else a compact copy
/// (leading dimension = stored rows) made once.
fn in_compute_type<'a, T: Element>(x: &GemmOperand<'a, T>) -> Result<(Cow<'a, [T::Compute]>, usize)> {
    if TypeId::of::<T>() == TypeId::of::<T::Compute>() {
        // SAFETY: T and T::Compute are the same type (same TypeId), so the slice is reinterpreted
        // as itself.
        let same = unsafe { std::slice::from_raw_parts(x.data.as_ptr() as *const T::Compute, x.data.len()) };
        return Ok((Cow::Borrowed(same), x.ld));
    }
    let rows = x.stored_rows;
    if rows == 0 || x.stored_cols == 0 {
        return Ok((Cow::Owned(Vec::new()), rows.max(1)));
    }
    const WHAT: &str = "an operand converted to its compute type";
    let mut converted = try_vec(element_count(rows, x.stored_cols, WHAT)?, T::Compute::ZERO, WHAT)?;
    converted.par_chunks_mut(rows).enumerate().for_each(|(j, column)| {
        for (out, v) in column.iter_mut().zip(&x.data[j * x.ld..j * x.ld + rows]) {
            *out = v.to_compute();
        }
    });
    Ok((Cow::Owned(converted), rows.max(1)))
}

/// Runs the plan, each block product being the sum of `Σ op(A_t)·op(B_t)` over the `terms` (one pair
/// for an ordinary product; three for 3xTF32), all of the same shapes. Each C block is one task; its
/// tile (at most `MAX_BLOCK_SIZE²` values, whatever the matrices' sizes) is the only allocation.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn execute<T: Element>(
    plan: &ProductPlan,
    terms: &[(GemmOperand<'_, T::Compute>, GemmOperand<'_, T::Compute>)],
    alpha: T::Compute,
    beta: T::Compute,
    c: &mut [T],
    m: usize,
    n: usize,
    ldc: usize,
) {
    let bs = plan.block_size;
    let (mb, _, kb) = plan.block_dims();
    let k = terms[0].0.op_shape().1;
    let views: Vec<_> = terms.iter().map(|(a, b)| (a.view(), b.view())).collect();
    // A block column of C is one contiguous chunk of `bs` columns: disjoint chunks let the tasks
    // write C safely in parallel. Inside a chunk the row blocks run in parallel too, each writing
    // only its own rows of the chunk.
    c.par_chunks_mut(bs * ldc).enumerate().for_each(|(j, c_chunk)| {
        let col0 = j * bs;
        let cols = bs.min(n - col0);
        let chunk = SharedChunk { ptr: c_chunk.as_mut_ptr(), len: c_chunk.len() };
        (0..mb).into_par_iter().for_each_init(Vec::new, |tile, i| {
            let row0 = i * bs;
            let rows = bs.min(m - row0);
            tile.clear();
            tile.resize(rows * cols, T::Compute::ZERO);
            // Runs of consecutive valid k (Algorithm 2's bitmap over k, walked in increasing order)
            // are merged into one GEMM with a longer inner dimension.
            let mut start = 0;
            while start < kb {
                if !plan.is_valid(i, start, j) {
                    start += 1;
                    continue;
                }
                let mut end = start + 1;
                while end < kb && plan.is_valid(i, end, j) {
                    end += 1;
                }
                let inner0 = start * bs;
                let inner1 = (end * bs).min(k);
                for (a_view, b_view) in &views {
                    // SAFETY: rows row0..row0+rows of op(A), columns inner0..inner1 and rows
                    // inner0..inner1 of op(B), columns col0..col0+cols all lie inside the operands,
                    // whose sizes and leading dimensions were validated; the tile is rows × cols,
                    // column-major, and aliases nothing.
                    unsafe {
                        T::Compute::gemm(
                            rows,
                            inner1 - inner0,
                            cols,
                            alpha,
                            a_view.data.as_ptr().add(a_view.index(row0, inner0)),
                            a_view.row_stride as isize,
                            a_view.col_stride as isize,
                            b_view.data.as_ptr().add(b_view.index(inner0, col0)),
                            b_view.row_stride as isize,
                            b_view.col_stride as isize,
                            T::Compute::ONE,
                            tile.as_mut_ptr(),
                            1,
                            rows as isize,
                        );
                    }
                }
                start = end;
            }
            for jj in 0..cols {
                // SAFETY: rows row0..row0+rows of the chunk's columns belong to this task alone.
                let column = unsafe { chunk.part(jj * ldc + row0, rows) };
                for (out, &acc) in column.iter_mut().zip(&tile[jj * rows..(jj + 1) * rows]) {
                    // α is already applied inside the GEMM; β = 0 does not read the old value.
                    let old = if beta == T::Compute::ZERO { T::Compute::ZERO } else { out.to_compute() };
                    *out = T::from_compute(axpby(T::Compute::ONE, acc, beta, old));
                }
            }
        });
    });
}

impl<T: Element> SpammBackend<T> for CpuExecutor {
    unsafe fn gemm(&mut self, product: &Product<'_, T>) -> Result<Outcome> {
        // SAFETY: the caller's arrays are host memory of their stated lengths (the contract).
        let (a, b) = unsafe { (product.a.host(), product.b.host()) };
        let c = if product.c_len == 0 {
            &mut [][..]
        } else {
            unsafe { std::slice::from_raw_parts_mut(product.c, product.c_len) }
        };
        let (a_norms, b_norms) = NormMap::of_operands(&a, &b, product.block_size)?;
        let dims = (a_norms.block_rows, b_norms.block_cols, a_norms.block_cols);
        let alpha_abs = product.alpha.to_f64().abs();
        let tau = product.tau.choose(&mut NormMapEvaluator::new(&a_norms, &b_norms), dims, alpha_abs)?;
        let plan = ProductPlan { a_norms, b_norms, tau, block_size: product.block_size };
        // Everything that may fail for want of memory comes before C is written.
        let (performed, squared_skipped) = plan.block_stats()?.totals();
        spamm_gemm(&plan, &a, &b, product.alpha, product.beta, c, product.ldc, product.math_mode)?;
        log::note(|| {
            let gemm = match T::VALUE_TYPE {
                ValueType::F32 if runs_3xtf32(product.math_mode, T::VALUE_TYPE, plan.block_size, dims.2) => {
                    "three FP32 GEMMs on the operands' TF32 parts"
                }
                ValueType::F32 => "one FP32 GEMM",
                ValueType::F64 => "one FP64 GEMM",
                ValueType::F16 | ValueType::Bf16 => "one FP32 GEMM on the operands widened once",
            };
            format!("kernel: a task per C block, each run of consecutive valid k {gemm}")
        });
        Ok(Outcome { dims, tau, totals: Totals::Known { performed, squared_skipped } })
    }

    unsafe fn search_tau(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        block_size: usize,
        search: &mut dyn FnMut(&mut dyn CandidateEvaluator) -> Result<()>,
    ) -> Result<()> {
        // SAFETY: host memory of their stated lengths (the contract).
        let (a, b) = unsafe { (a.host(), b.host()) };
        let (a_norms, b_norms) = NormMap::of_operands(&a, &b, block_size)?;
        search(&mut NormMapEvaluator::new(&a_norms, &b_norms))
    }
}

impl SpammStatistics for CpuExecutor {
    fn wait_totals(&mut self) -> Result<(u64, f64)> {
        Err(Error::internal("the CPU backend leaves no SpAMM statistics pending"))
    }
}

/// One block column of C, shared by the tasks of its row blocks: each writes only its own rows.
struct SharedChunk<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: the tasks sharing a chunk access disjoint elements (see `part`); T is a plain number.
unsafe impl<T: Send> Send for SharedChunk<T> {}
unsafe impl<T: Send> Sync for SharedChunk<T> {}

impl<T> SharedChunk<T> {
    /// Elements `start..start + len` of the chunk.
    ///
    /// # Safety
    /// No other task may access these elements while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn part(&self, start: usize, len: usize) -> &mut [T] {
        assert!(start + len <= self.len, "C range {start}+{len} outside a chunk of {}", self.len);
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

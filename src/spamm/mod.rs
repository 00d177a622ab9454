//! SpAMM (sparse approximate matrix multiplication) after cuSpAMM (Liu et al., "Accelerating Sparse
//! Approximate Matrix Multiplication on GPUs"): `C = α·op(A)·op(B) + β·C` for dense decay matrices,
//! skipping every block product whose Frobenius-norm product is below τ.
//!
//! This module is backend-independent: block norm maps (the paper's get-norm kernel), the valid
//! product selection (the bitmap + compacted offsets of Algorithm 2), statistics with an a-posteriori
//! error bound, and the τ search of section 3.5.2. Backends only execute the selected products.
//!
//! The recursion of the original SpAMM (Algorithm 1) is flattened as in cuSpAMM: one level of
//! `b × b` blocks (b = LoNum), decision per block triple (i, k, j). Matrices whose sizes are not
//! multiples of b are handled with partial edge blocks, which is the paper's zero padding without
//! copying: a zero-padded row or column adds nothing to a norm or a product.

use crate::alloc::{element_count, try_vec, try_with_capacity};
use crate::dense::{MatRef, op_shape, required_len};
use crate::error::{Error, Float, Result};
use crate::handle::HandleCore;
use crate::log;
use crate::scalar::Element;
use crate::types::{Layout, Operation, ValueType};
use rayon::prelude::*;
use std::os::raw::c_int;
use std::time::Instant;

pub mod contract;
pub mod scaled_norm;
pub mod tune;
use contract::{Product, Totals};
pub use contract::{RawOperand, SpammElement};
use scaled_norm::SquareSums;
pub use tune::TauRule;

/// The paper's LoNum default: 32 × 32 blocks fit a thread block's shared memory and tensor-core tiles.
pub const DEFAULT_BLOCK_SIZE: usize = 32;
/// Largest accepted block size. Beyond this a block no longer fits any GPU's shared memory, and the
/// approximation degenerates to a handful of blocks.
pub const MAX_BLOCK_SIZE: usize = 1024;

/// How `spammSgemm` multiplies (`spammMathMode`), after cuBLAS's math modes. Only FP32 products are
/// affected: `spammHgemm` (FP16 on tensor cores, FP32 accumulation) and `spammDgemm` (FP64 FMA)
/// ignore it, as cuBLAS's TF32 mode leaves other types alone.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MathMode {
    /// Exact FP32: every block product is FP32 fused multiply-adds (the default).
    #[default]
    Default = 0,
    /// 3xTF32 on tensor cores: each element x of op(A) and op(B) is split as x ≈ big + small with
    /// big = TF32(x) rounded to nearest (ties away from zero) and small = x − big truncated to TF32
    /// (TF32: 10 explicit mantissa bits), and a·b is computed as small_a·big_b + big_a·small_b +
    /// big_a·big_b, products exact (the dropped small_a·small_b and the truncation of small are below
    /// 2⁻²⁰ |a·b|), summed on the tensor core over 32 k at a time and added to an FP32 accumulator.
    /// Accuracy is that of FP32 to within a small factor (1.7e-6 relative against cublasSgemm at
    /// N = 8192); NaN and ±∞ inputs give NaN. It applies where the tensor-core kernel does (block sizes
    /// that are multiples of 32); other products stay exact FP32, on both backends alike.
    Tf32x3 = 1,
}

crate::types::c_enum_conversions! {
    MathMode as "spammMathMode_t" { Default, Tf32x3 }
}

/// Whether a product of `value_type` with `k_blocks` inner blocks of `block_size` on a handle in `mode`
/// runs as 3xTF32: FP32 in [`MathMode::Tf32x3`] where the tensor-core tile kernel can describe the
/// blocks (multiples of 32, fewer than 2¹⁶ inner blocks). Both backends decide with this.
pub fn runs_3xtf32(mode: MathMode, value_type: ValueType, block_size: usize, k_blocks: usize) -> bool {
    mode == MathMode::Tf32x3 && value_type == ValueType::F32 && block_size.is_multiple_of(32) && k_blocks < 1 << 16
}

/// Everything a SpAMM handle holds: the shared backend / stream / device state, the block size, the
/// FP32 math mode and the statistics of the last product.
#[derive(Debug)]
pub struct SpammHandle {
    core: HandleCore,
    block_size: usize,
    math_mode: MathMode,
    last_stats: Option<LastStats>,
}

/// The statistics of a handle's last product: known, or still being computed by the backend (the
/// totals come from [`SpammStatistics::wait_totals`]; the rest is known when the call returns).
#[derive(Clone, Copy, Debug)]
enum LastStats {
    Ready(SpammStats),
    Pending { dims: (usize, usize, usize), tau: f64, block_size: usize, alpha_abs: f64, elapsed_seconds: f64 },
}

impl SpammHandle {
    pub fn new() -> Result<Self> {
        Ok(SpammHandle {
            core: HandleCore::new()?,
            block_size: DEFAULT_BLOCK_SIZE,
            math_mode: MathMode::Default,
            last_stats: None,
        })
    }

    pub fn core(&self) -> &HandleCore {
        &self.core
    }

    pub fn core_mut(&mut self) -> &mut HandleCore {
        &mut self.core
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Sets LoNum, the edge of the square blocks whose norms decide what is skipped.
    pub fn set_block_size(&mut self, block_size: i64) -> Result<()> {
        if block_size < 1 || block_size > MAX_BLOCK_SIZE as i64 {
            return Err(Error::invalid_value(format!(
                "argument blockSize = {block_size} is outside [1, {MAX_BLOCK_SIZE}]"
            )));
        }
        self.block_size = block_size as usize;
        Ok(())
    }

    pub fn math_mode(&self) -> MathMode {
        self.math_mode
    }

    /// Sets how later FP32 products multiply ([`MathMode`]).
    pub fn set_math_mode(&mut self, mode: MathMode) {
        self.math_mode = mode;
    }

    /// Statistics of the last successful product on this handle (after a product whose statistics
    /// the device computes, this waits for them).
    pub fn last_stats(&mut self) -> Result<SpammStats> {
        let stats = match self.last_stats.ok_or_else(|| Error::invalid_value("no product has run on this handle"))? {
            LastStats::Ready(stats) => stats,
            LastStats::Pending { dims, tau, block_size, alpha_abs, elapsed_seconds } => {
                let (performed, squared) = self.core.executor_mut().wait_totals()?;
                SpammStats::from_totals(dims, performed, squared, tau, block_size, alpha_abs, elapsed_seconds)
            }
        };
        self.last_stats = Some(LastStats::Ready(stats));
        Ok(stats)
    }

    /// Brings pending statistics home before the executor is replaced (another backend); statistics
    /// the device can no longer give are dropped (`spammGetStats` then reports no product).
    pub fn settle(&mut self) {
        if matches!(self.last_stats, Some(LastStats::Pending { .. })) && self.last_stats().is_err() {
            self.last_stats = None;
        }
    }

    /// `C ← α·op(A)·op(B) + β·C` skipping the block products below τ (given, or searched on the
    /// product's norm maps: [`tune::TauRule`]), on the handle's executor; the statistics, τ among them,
    /// are kept on the handle; returns τ. C is column-major m × n with leading dimension `ldc`.
    ///
    /// # Safety
    /// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements and `c` readable and writable
    /// for `c_len`, in memory the handle's backend takes (host memory; for CUDA also memory of the
    /// handle's first device), C overlapping neither operand.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm<T: SpammElement>(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        alpha: T::Compute,
        beta: T::Compute,
        c: *mut T,
        c_len: usize,
        ldc: usize,
        tau: TauRule,
    ) -> Result<f64> {
        let started = Instant::now();
        let call = log::Call::open();
        let alpha_abs = alpha.to_f64().abs();
        tau.check(alpha_abs)?;
        let (m, _) = a.op_shape();
        let n = b.op_shape().1;
        check_inner_dimensions(a.op_shape(), b.op_shape())?;
        for (x, name) in [(a, "A"), (b, "B")] {
            let needed = required_len(x.stored_rows, x.stored_cols, x.ld, Layout::ColMajor, name)?;
            if x.len < needed {
                return Err(Error::invalid_size(format!("{name} holds {} elements, needs {needed}", x.len)));
            }
        }
        let needed = required_len(m, n, ldc, Layout::ColMajor, "C")?;
        if c_len < needed {
            return Err(Error::invalid_size(format!("C holds {c_len} elements, needs {needed}")));
        }
        // Pending statistics of the last product are no longer reachable once the backend starts
        // another (known ones stay until this product succeeds).
        if matches!(self.last_stats, Some(LastStats::Pending { .. })) {
            self.last_stats = None;
        }
        let product =
            Product { a, b, alpha, beta, c, c_len, ldc, tau, block_size: self.block_size, math_mode: self.math_mode };
        let outcome = unsafe { T::backend(self.core.executor_mut()).gemm(&product) }?;
        let (dims, tau, block_size) = (outcome.dims, outcome.tau, self.block_size);
        let elapsed_seconds = started.elapsed().as_secs_f64();
        self.last_stats = Some(match outcome.totals {
            Totals::Known { performed, squared_skipped } => LastStats::Ready(SpammStats::from_totals(
                dims,
                performed,
                squared_skipped,
                tau,
                block_size,
                alpha_abs,
                elapsed_seconds,
            )),
            Totals::Pending => LastStats::Pending { dims, tau, block_size, alpha_abs, elapsed_seconds },
        });
        if call.is_open() {
            // A device computes the statistics after the call returns: the valid ratio waits for them.
            let stats = self.last_stats().ok();
            let product = LoggedProduct { a, b, rule: product.tau, block_size, math_mode: self.math_mode };
            call.finish(|| product.describe(&self.core, tau, stats));
        }
        Ok(tau)
    }

    /// The τ whose valid ratio for `op(A)·op(B)` at this handle's block size is closest to `target`
    /// (section 3.5.2's search, multi-way; see [`tune::tune_for_ratio`]).
    ///
    /// # Safety
    /// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements, in memory the handle's
    /// backend takes.
    pub unsafe fn tune_tau<T: SpammElement>(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        target: f64,
        tolerance: f64,
        max_iterations: usize,
    ) -> Result<tune::TauChoice> {
        let call = log::Call::open();
        check_inner_dimensions(a.op_shape(), b.op_shape())?;
        tune::check_search(target, tolerance, max_iterations)?;
        let choice = unsafe {
            self.search(a, b, |evaluator| tune::tune_for_ratio(evaluator, target, tolerance, max_iterations))
        }?;
        call.finish(|| {
            format!(
                "{}: valid ratio {:.4} (asked {target} ± {tolerance}) at tau {:.4e}, search iterations {}",
                self.describe_search::<T>(a, b),
                choice.valid_ratio,
                choice.tau,
                choice.iterations
            )
        });
        Ok(choice)
    }

    /// The largest τ at which the error bound the product would report (`spammGetStats`' errorBound,
    /// for `|alpha|`) is at most `error_bound` (see [`tune::tune_for_error_bound`]).
    ///
    /// # Safety
    /// As [`SpammHandle::tune_tau`].
    pub unsafe fn tune_tau_for_error_bound<T: SpammElement>(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        alpha: T::Compute,
        error_bound: f64,
        max_iterations: usize,
    ) -> Result<tune::BoundChoice> {
        let call = log::Call::open();
        check_inner_dimensions(a.op_shape(), b.op_shape())?;
        let alpha_abs = alpha.to_f64().abs();
        tune::check_bound_search(alpha_abs, error_bound, max_iterations)?;
        let choice = unsafe {
            self.search(a, b, |evaluator| tune::tune_for_error_bound(evaluator, alpha_abs, error_bound, max_iterations))
        }?;
        call.finish(|| {
            format!(
                "{}: error bound {:.4e} (asked at most {error_bound:e}) at tau {:.4e}, valid ratio {:.4}, search \
                 iterations {}",
                self.describe_search::<T>(a, b),
                choice.error_bound,
                choice.tau,
                choice.valid_ratio,
                choice.iterations
            )
        });
        Ok(choice)
    }

    /// How log lines name a τ search on op(A)·op(B).
    fn describe_search<T: Element>(&self, a: &RawOperand<T>, b: &RawOperand<T>) -> String {
        let ((m, k), n) = (a.op_shape(), b.op_shape().1);
        format!(
            "spamm tau search {} {m}x{n}x{k} on {}: block size {}",
            T::VALUE_TYPE.short_name(),
            self.core.describe_placement(),
            self.block_size
        )
    }

    /// Runs a τ search on the norm maps of two operands at this handle's block size, computed and
    /// evaluated by the handle's backend.
    unsafe fn search<T: SpammElement, R>(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        mut search: impl FnMut(&mut dyn tune::CandidateEvaluator) -> Result<R>,
    ) -> Result<R> {
        let mut found = None;
        let block_size = self.block_size;
        unsafe {
            T::backend(self.core.executor_mut()).search_tau(a, b, block_size, &mut |evaluator| {
                found = Some(search(evaluator)?);
                Ok(())
            })
        }?;
        found.ok_or_else(|| Error::internal("the backend ran no tau search"))
    }
}

/// What a product's log line says of it besides what the backend notes.
struct LoggedProduct<'a, T> {
    a: &'a RawOperand<T>,
    b: &'a RawOperand<T>,
    rule: TauRule,
    block_size: usize,
    math_mode: MathMode,
}

impl<T: Element> LoggedProduct<'_, T> {
    /// The plan of a product that ran at `tau` with these statistics (None: they could not be had).
    fn describe(&self, core: &HandleCore, tau: f64, stats: Option<SpammStats>) -> String {
        let ((m, k), n) = (self.a.op_shape(), self.b.op_shape().1);
        let rule = match self.rule {
            TauRule::Given(_) => "given".to_string(),
            TauRule::ValidRatio { target, .. } => format!("searched for valid ratio {target}"),
            TauRule::ErrorBound { bound, .. } => format!("searched for error bound {bound:e}"),
        };
        let work = match stats {
            Some(s) => format!(
                "valid ratio {:.4} ({} of {} block products)",
                s.valid_ratio, s.performed_products, s.total_products
            ),
            None => "valid ratio unknown (the statistics failed)".to_string(),
        };
        let arithmetic = match T::VALUE_TYPE {
            ValueType::F32
                if runs_3xtf32(self.math_mode, T::VALUE_TYPE, self.block_size, block_count(k, self.block_size)) =>
            {
                "3xTF32"
            }
            ValueType::F32 if self.math_mode == MathMode::Tf32x3 => {
                "exact FP32 (3xTF32 needs a block size multiple of 32)"
            }
            ValueType::F32 => "exact FP32",
            ValueType::F64 => "FP64",
            ValueType::F16 | ValueType::Bf16 => "FP32 accumulation",
        };
        format!(
            "spamm gemm {} {m}x{n}x{k} (A {:?}, B {:?}) on {}: block size {}, tau {tau:.4e} ({rule}), {work}, {arithmetic}",
            T::VALUE_TYPE.short_name(),
            self.a.op,
            self.b.op,
            core.describe_placement(),
            self.block_size
        )
    }
}

fn check_inner_dimensions((_, k_a): (usize, usize), (k_b, _): (usize, usize)) -> Result<()> {
    if k_a != k_b {
        return Err(Error::invalid_size(format!("op(A) has {k_a} columns but op(B) has {k_b} rows")));
    }
    Ok(())
}

/// A column-major BLAS operand: the stored `stored_rows × stored_cols` matrix with leading dimension
/// `ld`, used as `op(X)`.
#[derive(Clone, Copy, Debug)]
pub struct GemmOperand<'a, T> {
    pub data: &'a [T],
    pub op: Operation,
    pub stored_rows: usize,
    pub stored_cols: usize,
    pub ld: usize,
}

impl<'a, T: Copy> GemmOperand<'a, T> {
    /// The strided view of `op(X)`: a transpose only swaps strides, nothing is copied.
    pub fn view(&self) -> MatRef<'a, T> {
        MatRef::col_major_op(self.data, self.op, self.stored_rows, self.stored_cols, self.ld)
    }

    /// Shape of `op(X)`.
    pub fn op_shape(&self) -> (usize, usize) {
        op_shape(self.op, self.stored_rows, self.stored_cols)
    }

    /// The operand by pointer, for the CUDA backend.
    pub fn raw(&self) -> RawOperand<T> {
        RawOperand {
            ptr: self.data.as_ptr(),
            len: self.data.len(),
            op: self.op,
            stored_rows: self.stored_rows,
            stored_cols: self.stored_cols,
            ld: self.ld,
        }
    }
}

/// Number of `block_size` blocks covering `len` (the last one partial).
pub fn block_count(len: usize, block_size: usize) -> usize {
    len.div_ceil(block_size)
}

/// Frobenius norms of the `b × b` blocks of a matrix, `norms[row_block + col_block · block_rows]`.
#[derive(Clone, Debug, PartialEq)]
pub struct NormMap {
    pub block_rows: usize,
    pub block_cols: usize,
    pub norms: Vec<f64>,
}

impl NormMap {
    #[inline]
    pub fn get(&self, row_block: usize, col_block: usize) -> f64 {
        self.norms[row_block + col_block * self.block_rows]
    }

    /// Norm map of `op(X)` for the blocks of the stored matrix.
    ///
    /// The reproducible order (the CUDA backend uses the same one, so both make the same skip
    /// decisions): every element is converted exactly to f64; for each *stored* row of a block, its
    /// squares are accumulated over the block's columns left to right by
    /// [`SquareSums::add_square`] (one fused multiply-add, scaled where a square could underflow or
    /// overflow); the block's row sums are then added top to bottom part by part from 0, and the
    /// norm is [`SquareSums::norm`] (`sqrt(acc)` of the unscaled sum whenever nothing was scaled). (On a GPU one thread
    /// per row walks the columns, so a warp reads consecutive rows: coalesced.) A transposed operand
    /// uses the stored matrix's norms, transposed, so the order does not depend on `op`.
    pub fn of_operand<T: Element>(x: &GemmOperand<'_, T>, block_size: usize) -> Result<NormMap> {
        let stored = Self::of_col_major(x.data, x.stored_rows, x.stored_cols, x.ld, block_size)?;
        match x.op {
            Operation::N => Ok(stored),
            Operation::T => stored.transposed(),
        }
    }

    /// The norm maps of a product's op(A) and op(B), computed side by side.
    pub fn of_operands<T: Element>(
        a: &GemmOperand<'_, T>,
        b: &GemmOperand<'_, T>,
        block_size: usize,
    ) -> Result<(NormMap, NormMap)> {
        let (a_norms, b_norms) = rayon::join(|| Self::of_operand(a, block_size), || Self::of_operand(b, block_size));
        Ok((a_norms?, b_norms?))
    }

    fn of_col_major<T: Element>(data: &[T], rows: usize, cols: usize, ld: usize, block_size: usize) -> Result<NormMap> {
        let block_rows = block_count(rows, block_size);
        let block_cols = block_count(cols, block_size);
        let mut norms = try_vec(element_count(block_rows, block_cols, NORM_MAP)?, 0.0f64, NORM_MAP)?;
        if block_rows > 0 {
            norms.par_chunks_mut(block_rows).enumerate().try_for_each(|(col_block, block_norms)| {
                // Column by column (contiguous reads), each row keeping its own running sum: per row
                // this is exactly the left-to-right order documented above.
                let mut row_sums = try_vec(rows, SquareSums::default(), "the row sums of a block norm map")?;
                for j in col_block * block_size..((col_block + 1) * block_size).min(cols) {
                    for (sum, &x) in row_sums.iter_mut().zip(&data[j * ld..j * ld + rows]) {
                        sum.add_square(x.to_f64());
                    }
                }
                for (norm, block) in block_norms.iter_mut().zip(row_sums.chunks(block_size)) {
                    let mut acc = SquareSums::default();
                    for row in block {
                        acc.add(row);
                    }
                    *norm = acc.norm();
                }
                Ok(())
            })?;
        }
        Ok(NormMap { block_rows, block_cols, norms })
    }

    pub fn transposed(&self) -> Result<NormMap> {
        let mut norms = try_with_capacity(self.norms.len(), NORM_MAP)?;
        for r in 0..self.block_rows {
            for c in 0..self.block_cols {
                norms.push(self.get(r, c));
            }
        }
        Ok(NormMap { block_rows: self.block_cols, block_cols: self.block_rows, norms })
    }
}

/// What a norm map is called in allocation failures.
const NORM_MAP: &str = "a block norm map";

/// The skip decisions of one product: which block products `op(A)_ik · op(B)_kj` are performed.
///
/// A product is skipped iff `nA[i,k] · nB[k,j] < τ`, the f64 product compared in f64 (so τ = 0
/// performs everything, zero blocks and blocks holding NaN or ±∞ included, and the result equals
/// GEMM; [`is_performed`]).
#[derive(Clone, Debug)]
pub struct ProductPlan {
    pub a_norms: NormMap,
    pub b_norms: NormMap,
    pub tau: f64,
    pub block_size: usize,
}

/// Valid-product counts and the skipped-norm error bound of a plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpammStats {
    /// Performed / all block products; 1 when there are no block products (nothing was skipped).
    pub valid_ratio: f64,
    pub performed_products: u64,
    pub total_products: u64,
    /// `|α| · sqrt(Σ_(i,j) (Σ_(skipped k) ‖A_ik‖_F ‖B_kj‖_F)²)` ≥ ‖C_exact − C‖_F (submultiplicativity
    /// and the triangle inequality, per C block), up to rounding.
    pub error_bound: f64,
    pub tau: f64,
    pub block_size: usize,
    pub elapsed_seconds: f64,
}

impl ProductPlan {
    /// The plan of `op(A) · op(B)` at threshold τ (τ ≥ 0, checked by the caller).
    pub fn new<T: Element>(
        a: &GemmOperand<'_, T>,
        b: &GemmOperand<'_, T>,
        tau: f64,
        block_size: usize,
    ) -> Result<Self> {
        let (a_norms, b_norms) = NormMap::of_operands(a, b, block_size)?;
        debug_assert_eq!(a_norms.block_cols, b_norms.block_rows);
        Ok(ProductPlan { a_norms, b_norms, tau, block_size })
    }

    /// Block counts (mb, nb, kb) of the product.
    pub fn block_dims(&self) -> (usize, usize, usize) {
        (self.a_norms.block_rows, self.b_norms.block_cols, self.a_norms.block_cols)
    }

    #[inline]
    pub fn is_valid(&self, i: usize, k: usize, j: usize) -> bool {
        is_performed(self.a_norms.get(i, k), self.b_norms.get(k, j), self.tau)
    }

    /// Per-C-block counts of performed products and sums of skipped norm products.
    pub fn block_stats(&self) -> Result<BlockStats> {
        let (mb, nb, kb) = self.block_dims();
        let c_blocks = element_count(mb, nb, "the statistics per C block")?;
        let mut performed = try_vec(c_blocks, 0u64, "the performed-product counts per C block")?;
        let mut skipped = try_vec(c_blocks, 0.0f64, "the skipped-norm sums per C block")?;
        performed.par_iter_mut().zip(&mut skipped).enumerate().for_each(|(c_block, (performed, skipped))| {
            let (i, j) = (c_block % mb, c_block / mb);
            for k in 0..kb {
                let (a, b) = (self.a_norms.get(i, k), self.b_norms.get(k, j));
                if is_performed(a, b, self.tau) {
                    *performed += 1;
                } else {
                    *skipped += a * b;
                }
            }
        });
        Ok(BlockStats { dims: (mb, nb, kb), performed, skipped })
    }

    /// Counts and error bound, with `alpha` scaling the bound and `elapsed_seconds` recorded as given.
    pub fn statistics(&self, alpha_abs: f64, elapsed_seconds: f64) -> Result<SpammStats> {
        Ok(self.block_stats()?.statistics(self.tau, self.block_size, alpha_abs, elapsed_seconds))
    }
}

/// The skip decisions of a plan per C block (i, j), column-major over C blocks: how many k are
/// performed, and `Σ_(skipped k) nA[i,k]·nB[k,j]` summed in increasing k with every product and sum
/// rounded separately. The CPU backend's statistics; the CUDA backend reduces the same quantities on
/// the device in the same order (`spamm_block_stats`, `spamm_stats_sum`), so both report the same
/// bits.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockStats {
    /// (mb, nb, kb): C blocks by rows and columns, inner blocks.
    pub dims: (usize, usize, usize),
    pub performed: Vec<u64>,
    pub skipped: Vec<f64>,
}

impl BlockStats {
    /// Performed products and `Σ_(i,j) skipped(i,j)²` in [`skipped_squares`]' order: reproducible, and
    /// parallel over columns on a GPU (the τ search for a bound sums in this order).
    pub fn totals(&self) -> (u64, f64) {
        (self.performed.iter().sum(), skipped_squares(&self.skipped, self.dims.0))
    }

    /// Counts and error bound.
    pub fn statistics(&self, tau: f64, block_size: usize, alpha_abs: f64, elapsed_seconds: f64) -> SpammStats {
        let (performed, squared) = self.totals();
        SpammStats::from_totals(self.dims, performed, squared, tau, block_size, alpha_abs, elapsed_seconds)
    }
}

impl SpammStats {
    /// The statistics from [`BlockStats::totals`] of a product with `dims` = (mb, nb, kb).
    pub fn from_totals(
        (mb, nb, kb): (usize, usize, usize),
        performed: u64,
        squared_skipped: f64,
        tau: f64,
        block_size: usize,
        alpha_abs: f64,
        elapsed_seconds: f64,
    ) -> SpammStats {
        let total = (mb * nb * kb) as u64;
        SpammStats {
            valid_ratio: if total == 0 { 1.0 } else { performed as f64 / total as f64 },
            performed_products: performed,
            total_products: total,
            error_bound: alpha_abs * squared_skipped.sqrt(),
            tau,
            block_size,
            elapsed_seconds,
        }
    }
}

/// `Σ_(i,j) skipped[i + j·mb]²` in a fixed order: down each column of C blocks (i increasing, from
/// 0), then the column sums left to right (j increasing, from 0), every product and sum rounded. A GPU
/// thread block per column of C blocks reproduces it exactly, so the τ search for an error bound can
/// evaluate the bound on the device without copying per-block sums back.
pub fn skipped_squares(skipped: &[f64], mb: usize) -> f64 {
    skipped.chunks(mb.max(1)).map(|column| column.iter().fold(0.0, |sum, s| sum + s * s)).fold(0.0, |sum, c| sum + c)
}

/// The SpAMM decision for one block product: skipped iff `‖A_ik‖_F · ‖B_kj‖_F < τ`, the f64 product
/// compared in f64. A block holding NaN or ±∞ has a NaN or +∞ norm, whose products are never below
/// τ: such blocks are always multiplied, so NaN and ±∞ reach C as they would through GEMM, at τ = 0
/// and at every τ. Every backend decides with exactly this.
#[inline]
pub fn is_performed(norm_a: f64, norm_b: f64, tau: f64) -> bool {
    // Written as the skip test on purpose: NaN compares false, so a NaN product is performed.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let performed = !(norm_a * norm_b < tau);
    performed
}

/// Checks τ. NaN would skip every product without saying so, and a negative τ would silently mean
/// τ = 0 (a norm product is never negative), so both are rejected; +∞ is allowed (skip all finite).
pub fn check_tau(tau: f64) -> Result<()> {
    if tau.is_nan() || tau < 0.0 {
        return Err(Error::invalid_value(format!("argument tau = {} must be a non-negative number", Float(tau))));
    }
    Ok(())
}

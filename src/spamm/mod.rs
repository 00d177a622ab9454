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
use crate::backend::Backend;
use crate::backend::cpu::spamm as cpu_spamm;
use crate::backend::cuda::GpuDevice;
use crate::backend::cuda::spamm as cuda_spamm;
pub use crate::backend::cuda::spamm::RawOperand;
use crate::dense::{MatRef, op_shape, required_len};
use crate::error::{Error, Float, Result};
use crate::handle::HandleCore;
use crate::scalar::Element;
use crate::types::{Layout, Operation, ValueType};
use rayon::prelude::*;
use std::os::raw::c_int;
use std::sync::Arc;
use std::time::Instant;

pub mod tune;
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

impl MathMode {
    pub const fn variants() -> &'static [MathMode] {
        &[MathMode::Default, MathMode::Tf32x3]
    }
}

impl TryFrom<c_int> for MathMode {
    type Error = Error;
    fn try_from(v: c_int) -> Result<Self> {
        MathMode::variants()
            .iter()
            .copied()
            .find(|m| *m as c_int == v)
            .ok_or_else(|| Error::invalid_value(format!("{v} is not a valid spammMathMode_t")))
    }
}

/// Whether a product of `value_type` with `k_blocks` inner blocks of `block_size` on a handle in `mode`
/// runs as 3xTF32: FP32 in [`MathMode::Tf32x3`] where the tensor-core tile kernel can describe the
/// blocks (multiples of 32, fewer than 2¹⁶ inner blocks). Both backends decide with this.
pub fn runs_3xtf32(mode: MathMode, value_type: ValueType, block_size: usize, k_blocks: usize) -> bool {
    mode == MathMode::Tf32x3 && value_type == ValueType::F32 && block_size.is_multiple_of(32) && k_blocks < 1 << 16
}

/// Everything a SpAMM handle holds: the shared backend / stream / device state, the block size, the
/// FP32 math mode and the statistics of the last product.
pub struct SpammHandle {
    core: HandleCore,
    block_size: usize,
    math_mode: MathMode,
    last_stats: Option<LastStats>,
    /// Where the CUDA backend's products leave their statistics (one device at a time).
    stats_slot: Option<cuda_spamm::StatsSlot>,
    /// The other devices of multi-device products (the handle's devices after the first) and the
    /// split of the work, kept between products.
    shared: Option<cuda_spamm::SharedDevices>,
}

impl std::fmt::Debug for SpammHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpammHandle")
            .field("core", &self.core)
            .field("block_size", &self.block_size)
            .field("math_mode", &self.math_mode)
            .finish()
    }
}

/// The statistics of a handle's last product: known, or still being computed by the device (the
/// totals arrive in the handle's stats slot; the rest is known when the call returns).
#[derive(Clone, Copy, Debug)]
enum LastStats {
    Ready(SpammStats),
    /// The totals are in the stats slot.
    OnDevice {
        dims: (usize, usize, usize),
        tau: f64,
        block_size: usize,
        alpha_abs: f64,
        elapsed_seconds: f64,
    },
}

impl SpammHandle {
    pub fn new() -> Result<Self> {
        Ok(SpammHandle {
            core: HandleCore::new()?,
            block_size: DEFAULT_BLOCK_SIZE,
            math_mode: MathMode::Default,
            last_stats: None,
            stats_slot: None,
            shared: None,
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

    /// Statistics of the last successful product on this handle (after a CUDA product, this waits
    /// until the device has computed them).
    pub fn last_stats(&mut self) -> Result<SpammStats> {
        let stats = match self.last_stats.ok_or_else(|| Error::invalid_value("no product has run on this handle"))? {
            LastStats::Ready(stats) => stats,
            LastStats::OnDevice { dims, tau, block_size, alpha_abs, elapsed_seconds } => {
                let slot = self.stats_slot.as_ref().expect("a CUDA product left its statistics in the slot");
                let (performed, squared) = slot.wait()?;
                SpammStats::from_totals(dims, performed, squared, tau, block_size, alpha_abs, elapsed_seconds)
            }
        };
        self.last_stats = Some(LastStats::Ready(stats));
        Ok(stats)
    }

    /// `C ← α·op(A)·op(B) + β·C` skipping the block products below τ (given, or searched on the
    /// product's norm maps: [`tune::TauRule`]), on the handle's backend; the statistics, τ among them,
    /// are stored on the handle; returns τ. C is column-major m × n with leading dimension `ldc`. The
    /// C API has validated every argument; the checks here guard the Rust entry point.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<T: Element>(
        &mut self,
        a: &GemmOperand<'_, T>,
        b: &GemmOperand<'_, T>,
        alpha: T::Compute,
        beta: T::Compute,
        c: &mut [T],
        ldc: usize,
        tau: TauRule,
    ) -> Result<f64> {
        let started = Instant::now();
        let alpha_abs = alpha.to_f64().abs();
        tau.check(alpha_abs)?;
        let (m, k) = a.op_shape();
        let (k_b, n) = b.op_shape();
        if k != k_b {
            return Err(Error::invalid_size(format!("op(A) has {k} columns but op(B) has {k_b} rows")));
        }
        for (x, name) in [(a, "A"), (b, "B")] {
            let needed = required_len(x.stored_rows, x.stored_cols, x.ld, Layout::ColMajor, name)?;
            if x.data.len() < needed {
                return Err(Error::invalid_size(format!("{name} holds {} elements, needs {needed}", x.data.len())));
            }
        }
        let needed = required_len(m, n, ldc, Layout::ColMajor, "C")?;
        if c.len() < needed {
            return Err(Error::invalid_size(format!("C holds {} elements, needs {needed}", c.len())));
        }
        if *self.core.backend() == Backend::Cuda {
            let c_len = c.len();
            // SAFETY: the slices were checked above to hold the operands and C, and a mutable C
            // cannot overlap the shared A and B.
            return unsafe { self.gemm_raw(&a.raw(), &b.raw(), alpha, beta, c.as_mut_ptr(), c_len, ldc, tau) };
        }
        let (a_norms, b_norms) = self.host_norm_maps(a, b)?;
        let dims = (a_norms.block_rows, b_norms.block_cols, a_norms.block_cols);
        let tau = tau.choose(&mut tune::NormMapEvaluator::new(&a_norms, &b_norms), dims, alpha_abs)?;
        let plan = ProductPlan { a_norms, b_norms, tau, block_size: self.block_size };
        // Everything that may fail for want of memory comes before C is written.
        let block_stats = plan.block_stats()?;
        cpu_spamm::spamm_gemm(&plan, a, b, alpha, beta, c, ldc, self.math_mode)?;
        let elapsed = started.elapsed().as_secs_f64();
        self.last_stats = Some(LastStats::Ready(block_stats.statistics(tau, plan.block_size, alpha_abs, elapsed)));
        Ok(tau)
    }

    /// [`SpammHandle::gemm`] on the CUDA backend, for operands by pointer to host or device memory
    /// (a CUDA handle never makes Rust slices of the caller's arrays). The caller has validated the
    /// arguments: shapes agree and the τ rule's arguments are valid.
    ///
    /// # Safety
    /// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements and `c` readable and writable
    /// for `c_len`, host memory or memory of the handle's device, C overlapping neither.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm_raw<T: Element>(
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
        let alpha_abs = alpha.to_f64().abs();
        tau.check(alpha_abs)?;
        let gpu = self.core.gpu()?;
        gpu.bind()?;
        let stream = self.core.cu_stream();
        if self.stats_slot.as_ref().is_none_or(|slot| !Arc::ptr_eq(slot.device(), &gpu)) {
            self.stats_slot = Some(cuda_spamm::StatsSlot::new(&gpu)?);
        }
        // The last product's statistics are no longer reachable once the slot is reused.
        self.last_stats = None;
        let share_gpus = self.share_gpus(&gpu)?;
        let (bs, mode) = (self.block_size, self.math_mode);
        let split = !share_gpus.is_empty()
            && cuda_spamm::splits::<T>(
                &std::iter::once(&gpu).chain(&share_gpus).collect::<Vec<_>>(),
                bs,
                a.op_shape().1,
                mode,
            );
        if split && self.shared.as_ref().is_none_or(|shared| !shared.serves(&gpu, &share_gpus)) {
            self.shared = None;
            self.shared = Some(cuda_spamm::SharedDevices::new(&gpu, &share_gpus)?);
        }
        let slot = self.stats_slot.as_ref().expect("just made");
        let shared = self.shared.as_mut().filter(|_| split);
        let (dims, tau) =
            unsafe { cuda_spamm::gemm(&gpu, stream, slot, shared, a, b, alpha, beta, c, c_len, ldc, tau, bs, mode) }?;
        self.last_stats = Some(LastStats::OnDevice {
            dims,
            tau,
            block_size: self.block_size,
            alpha_abs,
            elapsed_seconds: started.elapsed().as_secs_f64(),
        });
        Ok(tau)
    }

    /// The devices besides the lead that share a product: the handle's other devices, or (test hook
    /// [`cuda_spamm::split_for_testing`]) the lead itself again.
    fn share_gpus(&self, lead: &Arc<GpuDevice>) -> Result<Vec<Arc<GpuDevice>>> {
        let gpus = self.core.gpus()?;
        Ok(if gpus.len() > 1 { gpus[1..].to_vec() } else { vec![lead.clone(); cuda_spamm::shares_for_testing() - 1] })
    }

    /// The τ whose valid ratio for `op(A)·op(B)` at this handle's block size is closest to `target`
    /// (section 3.5.2's search, multi-way; see [`tune::tune_for_ratio`]).
    pub fn tune_tau<T: Element>(
        &self,
        a: &GemmOperand<'_, T>,
        b: &GemmOperand<'_, T>,
        target: f64,
        tolerance: f64,
        max_iterations: usize,
    ) -> Result<tune::TauChoice> {
        if *self.core.backend() == Backend::Cuda {
            // SAFETY: the operands are slices of the stated lengths. tune_tau_raw checks the shapes.
            return unsafe { self.tune_tau_raw(&a.raw(), &b.raw(), target, tolerance, max_iterations) };
        }
        tune::check_search(target, tolerance, max_iterations)?;
        let (a_norms, b_norms) = self.host_norm_maps(a, b)?;
        tune::tune_for_ratio(&mut tune::NormMapEvaluator::new(&a_norms, &b_norms), target, tolerance, max_iterations)
    }

    /// [`SpammHandle::tune_tau`] on the CUDA backend for operands by pointer (host or device memory):
    /// norm maps by the get-norm kernel, candidates evaluated on the device, only the search's
    /// decisions on the host (one small copy back per iteration).
    ///
    /// # Safety
    /// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements (host or device memory).
    pub unsafe fn tune_tau_raw<T: Element>(
        &self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        target: f64,
        tolerance: f64,
        max_iterations: usize,
    ) -> Result<tune::TauChoice> {
        check_inner_dimensions(a.op_shape(), b.op_shape())?;
        tune::check_search(target, tolerance, max_iterations)?;
        unsafe {
            self.with_device_evaluator(a, b, |evaluator| {
                tune::tune_for_ratio(&mut evaluator.anticipating_ratio_search(), target, tolerance, max_iterations)
            })
        }
    }

    /// The largest τ at which the error bound the product would report (`spammGetStats`' errorBound,
    /// for `|alpha|`) is at most `error_bound` (see [`tune::tune_for_error_bound`]).
    pub fn tune_tau_for_error_bound<T: Element>(
        &self,
        a: &GemmOperand<'_, T>,
        b: &GemmOperand<'_, T>,
        alpha: T::Compute,
        error_bound: f64,
        max_iterations: usize,
    ) -> Result<tune::BoundChoice> {
        if *self.core.backend() == Backend::Cuda {
            // SAFETY: as in tune_tau.
            return unsafe {
                self.tune_tau_for_error_bound_raw(&a.raw(), &b.raw(), alpha, error_bound, max_iterations)
            };
        }
        let alpha_abs = alpha.to_f64().abs();
        tune::check_bound_search(alpha_abs, error_bound, max_iterations)?;
        let (a_norms, b_norms) = self.host_norm_maps(a, b)?;
        let mut evaluator = tune::NormMapEvaluator::new(&a_norms, &b_norms);
        tune::tune_for_error_bound(&mut evaluator, alpha_abs, error_bound, max_iterations)
    }

    /// [`SpammHandle::tune_tau_for_error_bound`] on the CUDA backend for operands by pointer.
    ///
    /// # Safety
    /// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements (host or device memory).
    pub unsafe fn tune_tau_for_error_bound_raw<T: Element>(
        &self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        alpha: T::Compute,
        error_bound: f64,
        max_iterations: usize,
    ) -> Result<tune::BoundChoice> {
        check_inner_dimensions(a.op_shape(), b.op_shape())?;
        let alpha_abs = alpha.to_f64().abs();
        tune::check_bound_search(alpha_abs, error_bound, max_iterations)?;
        unsafe {
            self.with_device_evaluator(a, b, |mut evaluator| {
                tune::tune_for_error_bound(&mut evaluator, alpha_abs, error_bound, max_iterations)
            })
        }
    }

    /// Runs a τ search on the device: the norm maps of two operands at this handle's block size on
    /// the handle's device and stream, evaluated there.
    ///
    /// # Safety
    /// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements (host or device memory).
    unsafe fn with_device_evaluator<T: Element, R>(
        &self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        search: impl FnOnce(cuda_spamm::DeviceTauEvaluator<'_>) -> Result<R>,
    ) -> Result<R> {
        let gpu = self.core.gpu()?;
        gpu.bind()?;
        let stream = self.core.cu_stream();
        let [a_device, b_device] = unsafe { cuda_spamm::operand_norm_maps(&gpu, stream, a, b, self.block_size) }?;
        search(cuda_spamm::DeviceTauEvaluator::new(&gpu, stream, &a_device, &b_device)?)
    }

    /// Norm maps of two host operands at this handle's block size, for the CPU's τ searches.
    fn host_norm_maps<T: Element>(&self, a: &GemmOperand<'_, T>, b: &GemmOperand<'_, T>) -> Result<(NormMap, NormMap)> {
        check_inner_dimensions(a.op_shape(), b.op_shape())?;
        NormMap::of_operands(a, b, self.block_size)
    }
}

fn check_inner_dimensions((_, k_a): (usize, usize), (k_b, _): (usize, usize)) -> Result<()> {
    if k_a != k_b {
        return Err(Error::invalid_size("op(A) and op(B) have different inner dimensions"));
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
    /// squares are accumulated over the block's columns left to right as
    /// `row = f64::mul_add(x, x, row)` from `row = 0`; the block's row sums are then added top to
    /// bottom, `acc = acc + row` from `acc = 0`, and the norm is `sqrt(acc)`. (On a GPU one thread
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
                let mut row_sums = try_vec(rows, 0.0f64, "the row sums of a block norm map")?;
                for j in col_block * block_size..((col_block + 1) * block_size).min(cols) {
                    for (sum, &x) in row_sums.iter_mut().zip(&data[j * ld..j * ld + rows]) {
                        let x = x.to_f64();
                        *sum = x.mul_add(x, *sum);
                    }
                }
                for (norm, block) in block_norms.iter_mut().zip(row_sums.chunks(block_size)) {
                    let mut acc = 0.0f64;
                    for &row in block {
                        acc += row;
                    }
                    *norm = acc.sqrt();
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
/// A product is performed iff `nA[i,k] · nB[k,j] ≥ τ`, the f64 product compared in f64 (so τ = 0
/// performs everything, zero blocks included, and the result equals GEMM).
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

/// The SpAMM decision for one block product: performed iff `‖A_ik‖_F · ‖B_kj‖_F ≥ τ`, the f64
/// product compared in f64 (a NaN norm product is skipped). Every backend decides with exactly this.
#[inline]
pub fn is_performed(norm_a: f64, norm_b: f64, tau: f64) -> bool {
    norm_a * norm_b >= tau
}

/// Checks τ. NaN would skip every product without saying so, and a negative τ would silently mean
/// τ = 0 (a norm product is never negative), so both are rejected; +∞ is allowed (skip all finite).
pub fn check_tau(tau: f64) -> Result<()> {
    if tau.is_nan() || tau < 0.0 {
        return Err(Error::invalid_value(format!("argument tau = {} must be a non-negative number", Float(tau))));
    }
    Ok(())
}

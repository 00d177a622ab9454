//! SpAMM on the GPU: launchers of `kernels/spamm.cu` and the call sequence of one product (get-norm
//! kernel on op(A) and op(B), multiplication kernel, per-C-block statistics) and the τ searches'
//! candidate evaluations.

use super::kernels::SPAMM;
use super::memory::{DeviceBuffer, DeviceInput, DeviceOutput};
use super::{GpuDevice, Launch, Stream, driver_error, launch};
use crate::error::{Error, Result};
use crate::kernel_args;
use crate::scalar::{ComputeScalar, Element};
use crate::spamm::tune::{self, CandidateEvaluator, Evaluation, ProductRange};
use crate::spamm::{BlockStats, NormMap, block_count};
use crate::types::{Operation, ValueType};
use cudarc::driver::result as drv;
use cudarc::driver::sys::CUdeviceptr;
use std::sync::Arc;

/// A caller's column-major operand by raw pointer (host or device memory), validated by the caller:
/// `ptr` is readable for `len` elements, the stored matrix is `stored_rows × stored_cols` with
/// leading dimension `ld`, used as `op(X)`.
#[derive(Clone, Copy, Debug)]
pub struct RawOperand<T> {
    pub ptr: *const T,
    pub len: usize,
    pub op: Operation,
    pub stored_rows: usize,
    pub stored_cols: usize,
    pub ld: usize,
}

impl<T> RawOperand<T> {
    /// Shape of `op(X)`.
    pub fn op_shape(&self) -> (usize, usize) {
        crate::dense::op_shape(self.op, self.stored_rows, self.stored_cols)
    }
}

/// A block norm map of `op(X)` in device memory, laid out as [`NormMap`].
pub struct DeviceNormMap {
    pub block_rows: usize,
    pub block_cols: usize,
    pub norms: DeviceBuffer,
}

impl DeviceNormMap {
    /// Copies the map back (waits for the stream).
    pub fn to_host(&self) -> Result<NormMap> {
        let mut norms = vec![0.0f64; self.block_rows * self.block_cols];
        self.norms.copy_to_host(&mut norms)?;
        Ok(NormMap { block_rows: self.block_rows, block_cols: self.block_cols, norms })
    }
}

fn type_suffix<T: Element>() -> &'static str {
    match T::VALUE_TYPE {
        ValueType::F32 => "f32",
        ValueType::F64 => "f64",
        ValueType::F16 => "f16",
        ValueType::Bf16 => unreachable!("SpAMM has no bf16 product"),
    }
}

/// Threads per block and a grid-stride grid for `items` independent work items.
fn flat_launch(device: &GpuDevice, items: usize) -> Launch {
    let blocks = items.div_ceil(256).clamp(1, device.multiprocessors * 32) as u32;
    Launch { grid: (blocks, 1, 1), block: (256, 1, 1), shared_bytes: 0 }
}

/// The get-norm kernel: the Frobenius norm of every `bs × bs` block of `op(X)`, stored at `x` on the
/// device, summed in [`NormMap::of_operand`]'s order so that the map is bit-identical to the CPU's.
#[allow(clippy::too_many_arguments)]
pub fn norm_map<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    x: CUdeviceptr,
    op: Operation,
    stored_rows: usize,
    stored_cols: usize,
    ld: usize,
    bs: usize,
) -> Result<DeviceNormMap> {
    let (stored_block_rows, stored_block_cols) = (block_count(stored_rows, bs), block_count(stored_cols, bs));
    let blocks = stored_block_rows * stored_block_cols;
    let norms = DeviceBuffer::alloc(device, blocks * 8, stream, "the block norm map")?;
    if blocks > 0 {
        let row_sums = DeviceBuffer::alloc(device, stored_rows * stored_block_cols * 8, stream, "block norm row sums")?;
        let rows_fn = device.function(&SPAMM, &format!("spamm_norm_rows_{}", type_suffix::<T>()))?;
        let (rows, cols, bs_i) = (stored_rows as i32, stored_cols as i32, bs as i32);
        let ld = ld as i64;
        let grid_x = stored_rows.div_ceil(256).min(device.multiprocessors * 8) as u32;
        let grid_y = stored_block_cols.min(65535) as u32;
        let cfg = Launch { grid: (grid_x, grid_y, 1), block: (256, 1, 1), shared_bytes: 0 };
        let sums = row_sums.ptr();
        unsafe { launch(&rows_fn, cfg, stream, kernel_args![&rows, &cols, &x, &ld, &bs_i, &sums]) }?;
        let blocks_fn = device.function(&SPAMM, "spamm_norm_blocks")?;
        let transpose = (op == Operation::T) as i32;
        let out = norms.ptr();
        unsafe {
            launch(
                &blocks_fn,
                flat_launch(device, blocks),
                stream,
                kernel_args![&rows, &cols, &bs_i, &sums, &transpose, &out],
            )
        }?;
    }
    let (block_rows, block_cols) = match op {
        Operation::N => (stored_block_rows, stored_block_cols),
        Operation::T => (stored_block_cols, stored_block_rows),
    };
    Ok(DeviceNormMap { block_rows, block_cols, norms })
}

/// [`norm_map`] of an operand the caller passed (host or device memory).
///
/// # Safety
/// `x.ptr` must be readable for `x.len` elements (host or device memory of this device).
pub unsafe fn operand_norm_map<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    x: &RawOperand<T>,
    bs: usize,
) -> Result<DeviceNormMap> {
    let input = unsafe { DeviceInput::new(device, stream, x.ptr, x.len, "the operand") }?;
    norm_map::<T>(device, stream, input.ptr(), x.op, x.stored_rows, x.stored_cols, x.ld, bs)
}

/// `C ← α·Σ_(valid k) op(A)_ik·op(B)_kj + β·C` on the device, with C column-major `m × n` (`ldc`) at
/// `c_ptr` (host or device, `c_len` elements). Returns the per-C-block statistics (this waits for
/// the stream: they are host results).
///
/// # Safety
/// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements and `c_ptr` readable and
/// writable for `c_len`, host memory or memory of this device, not overlapping.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    a: &RawOperand<T>,
    b: &RawOperand<T>,
    alpha: T::Compute,
    beta: T::Compute,
    c_ptr: *mut T,
    c_len: usize,
    ldc: usize,
    tau: f64,
    bs: usize,
) -> Result<BlockStats> {
    let (m, k) = a.op_shape();
    let n = b.op_shape().1;
    let a_in = unsafe { DeviceInput::new(device, stream, a.ptr, a.len, "A") }?;
    let b_in = unsafe { DeviceInput::new(device, stream, b.ptr, b.len, "B") }?;
    let a_norms = norm_map::<T>(device, stream, a_in.ptr(), a.op, a.stored_rows, a.stored_cols, a.ld, bs)?;
    let b_norms = norm_map::<T>(device, stream, b_in.ptr(), b.op, b.stored_rows, b.stored_cols, b.ld, bs)?;
    let (mb, nb, kb) = (a_norms.block_rows, b_norms.block_cols, a_norms.block_cols);
    let block_stats = device_block_stats(device, stream, &a_norms, &b_norms, tau, (mb, nb, kb))?;
    // A staged host C goes back whole, padding rows m..ldc included, which the kernel never writes:
    // with ldc > m those must be uploaded first so that they come back unchanged.
    let reads_c = beta != T::Compute::ZERO || (ldc > m && n > 1);
    let c = unsafe { DeviceOutput::new(device, stream, c_ptr, c_len, "C", reads_c) }?;
    if m > 0 && n > 0 {
        // Block sizes that are multiples of 32: the tile kernels (several C blocks per thread block,
        // register-blocked / tensor-core warp tiles). Others: one 32 × 32 tile per thread block.
        let (f, cfg) = if bs.is_multiple_of(32) {
            let tile = if T::VALUE_TYPE == ValueType::F64 { 64 } else { 128 };
            let f = device.function(&SPAMM, &format!("spamm_multiply_tiled_{}", type_suffix::<T>()))?;
            let grid = (m.div_ceil(tile) as u32, n.div_ceil(tile).min(65535) as u32, 1);
            (f, Launch { grid, block: (256, 1, 1), shared_bytes: 0 })
        } else {
            let threads = if T::VALUE_TYPE == ValueType::F16 { 128 } else { 256 };
            let tiles_per_block = bs.div_ceil(32);
            let f = device.function(&SPAMM, &format!("spamm_multiply_{}", type_suffix::<T>()))?;
            let grid = ((mb * tiles_per_block) as u32, (nb * tiles_per_block).min(65535) as u32, 1);
            (f, Launch { grid, block: (threads, 1, 1), shared_bytes: 0 })
        };
        let (m_i, n_i, k_i, bs_i) = (m as i32, n as i32, k as i32, bs as i32);
        let (a_ptr, lda, ta) = (a_in.ptr(), a.ld as i64, (a.op == Operation::T) as i32);
        let (b_ptr, ldb, tb) = (b_in.ptr(), b.ld as i64, (b.op == Operation::T) as i32);
        let (c_dev, ldc) = (c.ptr(), ldc as i64);
        let (an, bn) = (a_norms.norms.ptr(), b_norms.norms.ptr());
        unsafe {
            launch(
                &f,
                cfg,
                stream,
                kernel_args![
                    &m_i, &n_i, &k_i, &bs_i, &alpha, &a_ptr, &lda, &ta, &b_ptr, &ldb, &tb, &beta, &c_dev, &ldc, &an,
                    &bn, &tau
                ],
            )
        }?;
    }
    let stats = block_stats.finish()?;
    c.finish()?;
    Ok(stats)
}

/// Per-C-block counts being computed on the device; `finish` copies them back.
struct PendingBlockStats {
    performed: DeviceBuffer,
    skipped: DeviceBuffer,
    blocks: usize,
    dims: (usize, usize, usize),
}

impl PendingBlockStats {
    fn finish(self) -> Result<BlockStats> {
        let mut performed = vec![0u64; self.blocks];
        let mut skipped = vec![0.0f64; self.blocks];
        self.performed.copy_to_host(&mut performed)?;
        self.skipped.copy_to_host(&mut skipped)?;
        Ok(BlockStats { dims: self.dims, performed, skipped })
    }
}

fn device_block_stats(
    device: &Arc<GpuDevice>,
    stream: Stream,
    a_norms: &DeviceNormMap,
    b_norms: &DeviceNormMap,
    tau: f64,
    (mb, nb, kb): (usize, usize, usize),
) -> Result<PendingBlockStats> {
    let blocks = mb * nb;
    let performed = DeviceBuffer::alloc(device, blocks * 8, stream, "SpAMM statistics")?;
    let skipped = DeviceBuffer::alloc(device, blocks * 8, stream, "SpAMM statistics")?;
    if blocks > 0 {
        let f = device.function(&SPAMM, "spamm_block_stats")?;
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (an, bn, p, s) = (a_norms.norms.ptr(), b_norms.norms.ptr(), performed.ptr(), skipped.ptr());
        unsafe {
            launch(&f, flat_launch(device, blocks), stream, kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &tau, &p, &s])
        }?;
    }
    Ok(PendingBlockStats { performed, skipped, blocks, dims: (mb, nb, kb) })
}

/// The candidates of one τ-search iteration as a kernel parameter (`SpammTuneCandidates`): `count`
/// ascending τ, the remaining slots repeating the last.
#[repr(C)]
#[derive(Clone, Copy)]
struct TuneCandidates {
    count: i32,
    tau: [f64; tune::RATIO_CANDIDATES],
}

/// Doubles of two segments (A's column k and B's row k, each padded to a power of two) that one thread
/// block sorts in shared memory (48 KiB, the default limit); longer ones are sorted in global memory,
/// one launch per bitonic step.
const SORT_IN_SHARED_MEMORY: usize = 6144;

/// Doubles of A's column k and B's row k the counting kernel copies into shared memory (32 KiB).
const STAGE_IN_SHARED_MEMORY: usize = 4096;

/// The τ searches' [`CandidateEvaluator`] on the device, bit-identical to the CPU's
/// [`tune::NormMapEvaluator`]: A's columns and B's rows of the norm maps are sorted once (one kernel
/// that also reduces the products' range); an iteration is one counting kernel (plus, for the error
/// bound, one pass over all block products) and one copy of a few kilobytes back. The iterations'
/// accumulators alternate between two slots, each kernel clearing the other, so nothing else is
/// queued per iteration.
pub struct DeviceTauEvaluator<'a> {
    device: &'a Arc<GpuDevice>,
    stream: Stream,
    a_norms: &'a DeviceNormMap,
    b_norms: &'a DeviceNormMap,
    /// Sorted columns of A (column k at `k · pitches.0`), sorted rows of B (row k at `k · pitches.1`),
    /// the summary (4 words) and two iterations' accumulators (4 · RATIO_CANDIDATES words each).
    workspace: DeviceBuffer,
    pitches: (usize, usize),
    /// The accumulators the next iteration uses (0 or 1).
    parity: usize,
    /// Per candidate and column of C blocks, the sums of squares (allocated by the first bound pass).
    column_sums: Option<DeviceBuffer>,
}

const ACCUMULATOR_WORDS: usize = 4 * tune::RATIO_CANDIDATES;

impl<'a> DeviceTauEvaluator<'a> {
    /// Queues the sorting of the norm maps and the range's reduction (nothing waits yet).
    pub fn new(
        device: &'a Arc<GpuDevice>,
        stream: Stream,
        a_norms: &'a DeviceNormMap,
        b_norms: &'a DeviceNormMap,
    ) -> Result<Self> {
        let (mb, kb, nb) = (a_norms.block_rows, a_norms.block_cols, b_norms.block_cols);
        let pitches = (mb.next_power_of_two(), nb.next_power_of_two());
        let sorted_words = if mb * nb * kb == 0 { 0 } else { kb * (pitches.0 + pitches.1) };
        let words = sorted_words + 4 + 2 * ACCUMULATOR_WORDS;
        let workspace = DeviceBuffer::alloc(device, words * 8, stream, "the tau search")?;
        let evaluator =
            DeviceTauEvaluator { device, stream, a_norms, b_norms, workspace, pitches, parity: 0, column_sums: None };
        if sorted_words == 0 {
            return Ok(evaluator);
        }
        let counters = evaluator.summary_ptr();
        unsafe { drv::memset_d8_async(counters, 0, (4 + 2 * ACCUMULATOR_WORDS) * 8, stream.0) }
            .map_err(driver_error("clearing the tau search's counters"))?;
        let (sorted_a, sorted_b) = evaluator.sorted_ptrs();
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (an, bn) = (a_norms.norms.ptr(), b_norms.norms.ptr());
        if pitches.0 + pitches.1 <= SORT_IN_SHARED_MEMORY {
            let f = device.function(&SPAMM, "spamm_tune_sort_pairs")?;
            let cfg = Launch {
                grid: (kb.min(65535) as u32, 1, 1),
                block: (256, 1, 1),
                shared_bytes: ((pitches.0 + pitches.1) * 8) as u32,
            };
            let (pa, pb) = (pitches.0 as i32, pitches.1 as i32);
            unsafe {
                launch(
                    &f,
                    cfg,
                    stream,
                    kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &sorted_a, &pa, &sorted_b, &pb, &counters],
                )
            }?;
        } else {
            let flags = counters + 8;
            // Column k of A: contiguous. Row k of B: stride kb.
            sort_in_global_memory(device, stream, an, (1, mb), mb, kb, pitches.0, sorted_a, flags)?;
            sort_in_global_memory(device, stream, bn, (kb, 1), nb, kb, pitches.1, sorted_b, flags)?;
            let f = device.function(&SPAMM, "spamm_tune_range")?;
            let (pa, pb) = (pitches.0 as i64, pitches.1 as i64);
            unsafe {
                launch(
                    &f,
                    flat_launch(device, kb),
                    stream,
                    kernel_args![&mb_i, &nb_i, &kb_i, &sorted_a, &pa, &sorted_b, &pb, &counters],
                )
            }?;
        }
        Ok(evaluator)
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.a_norms.block_rows, self.b_norms.block_cols, self.a_norms.block_cols)
    }

    fn sorted_ptrs(&self) -> (CUdeviceptr, CUdeviceptr) {
        let kb = self.a_norms.block_cols;
        let base = self.workspace.ptr();
        (base, base + (kb * self.pitches.0 * 8) as u64)
    }

    fn summary_ptr(&self) -> CUdeviceptr {
        let (mb, nb, kb) = self.dims();
        let sorted_words = if mb * nb * kb == 0 { 0 } else { kb * (self.pitches.0 + self.pitches.1) };
        self.workspace.ptr() + (sorted_words * 8) as u64
    }

    fn accumulators(&self, parity: usize) -> CUdeviceptr {
        self.summary_ptr() + ((4 + parity * ACCUMULATOR_WORDS) * 8) as u64
    }

    /// Queues one iteration's kernels (for [`CandidateEvaluator::evaluate`], and for timing the
    /// device's share of an iteration); returns the accumulator slot its results go to.
    pub fn queue(&mut self, taus: &[f64], squares: bool) -> Result<usize> {
        let (mb, nb, kb) = self.dims();
        if mb * nb * kb == 0 {
            return Err(Error::internal("the tau search evaluated candidates of an empty product"));
        }
        let limit = if squares { tune::BOUND_CANDIDATES } else { tune::RATIO_CANDIDATES };
        if taus.is_empty() || taus.len() > limit {
            return Err(Error::internal(format!("the tau search asked for {} candidates", taus.len())));
        }
        let (device, stream) = (self.device, self.stream);
        device.bind()?;
        let parity = self.parity;
        self.parity ^= 1;
        let mut candidates =
            TuneCandidates { count: taus.len() as i32, tau: [taus[taus.len() - 1]; tune::RATIO_CANDIDATES] };
        candidates.tau[..taus.len()].copy_from_slice(taus);
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (sa, sb) = self.sorted_ptrs();
        let (pa, pb) = (self.pitches.0 as i64, self.pitches.1 as i64);
        let (out, next) = (self.accumulators(parity), self.accumulators(parity ^ 1));
        let staged = (mb + nb <= STAGE_IN_SHARED_MEMORY) as i32;
        let count = device.function(&SPAMM, "spamm_tune_count")?;
        let cfg = Launch {
            grid: (kb.min(device.multiprocessors * 2) as u32, 1, 1),
            block: (1024, 1, 1),
            shared_bytes: if staged == 1 { ((mb + nb) * 8) as u32 } else { 0 },
        };
        unsafe {
            launch(
                &count,
                cfg,
                stream,
                kernel_args![&mb_i, &nb_i, &kb_i, &sa, &pa, &sb, &pb, &staged, &candidates, &out, &next],
            )
        }?;
        if squares {
            if self.column_sums.is_none() {
                let bytes = tune::BOUND_CANDIDATES * nb * 8;
                self.column_sums = Some(DeviceBuffer::alloc(device, bytes, stream, "the error-bound search")?);
            }
            let sums = self.column_sums.as_ref().map_or(0, |b| b.ptr());
            let (an, bn) = (self.a_norms.norms.ptr(), self.b_norms.norms.ptr());
            let skipped = device.function(&SPAMM, "spamm_tune_skipped")?;
            let cfg = Launch { grid: (nb.min(65535) as u32, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
            unsafe { launch(&skipped, cfg, stream, kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &candidates, &sums]) }?;
            let total = device.function(&SPAMM, "spamm_tune_skipped_total")?;
            let cfg = Launch { grid: (1, 1, 1), block: (32, 1, 1), shared_bytes: 0 };
            let (count_i, totals) = (taus.len() as i32, out + (3 * tune::RATIO_CANDIDATES * 8) as u64);
            unsafe { launch(&total, cfg, stream, kernel_args![&nb_i, &count_i, &sums, &totals]) }?;
        }
        Ok(parity)
    }
}

/// `segments` segments of `len` norms (element e of segment s at `src + 8·(s·strides.1 + e·strides.0)`)
/// sorted ascending into `dst`, segment s at `s · padded` (padded: a power of two ≥ len, the tail
/// +∞), one launch per bitonic step. Sets `*flags` bit 0 where a norm is not finite.
#[allow(clippy::too_many_arguments)]
fn sort_in_global_memory(
    device: &Arc<GpuDevice>,
    stream: Stream,
    src: CUdeviceptr,
    (element_stride, segment_stride): (usize, usize),
    len: usize,
    segments: usize,
    padded: usize,
    dst: CUdeviceptr,
    flags: CUdeviceptr,
) -> Result<()> {
    let (es, ss, len_i, segments_i, padded_i) =
        (element_stride as i64, segment_stride as i64, len as i32, segments as i32, padded as i32);
    let load = device.function(&SPAMM, "spamm_tune_sort_load")?;
    unsafe {
        launch(
            &load,
            flat_launch(device, segments * padded),
            stream,
            kernel_args![&src, &es, &ss, &len_i, &segments_i, &padded_i, &dst, &flags],
        )
    }?;
    let step = device.function(&SPAMM, "spamm_tune_sort_step")?;
    let cfg = flat_launch(device, segments * padded / 2);
    let mut size = 2;
    while size <= padded {
        let mut stride = size / 2;
        while stride > 0 {
            let (size_i, stride_i) = (size as i32, stride as i32);
            unsafe { launch(&step, cfg, stream, kernel_args![&dst, &segments_i, &padded_i, &size_i, &stride_i]) }?;
            stride /= 2;
        }
        size *= 2;
    }
    Ok(())
}

impl CandidateEvaluator for DeviceTauEvaluator<'_> {
    fn range(&mut self) -> Result<ProductRange> {
        let dims = self.dims();
        if dims.0 * dims.1 * dims.2 == 0 {
            return Ok(ProductRange { dims, min: 0.0, max: 0.0, positive_floor: 0.0 });
        }
        let mut summary = [0u64; 4];
        self.device.bind()?;
        unsafe { drv::memcpy_dtoh_async(&mut summary[..], self.summary_ptr(), self.stream.0) }
            .map_err(driver_error("copying to the host"))?;
        self.device.synchronize(self.stream)?;
        if summary[1] != 0 {
            return Err(tune::non_finite_norms());
        }
        // summary[3] == 0: no k has positive norms on both sides.
        let floor = if summary[3] == 0 { 0.0 } else { f64::from_bits(!summary[3]) };
        Ok(ProductRange {
            dims,
            min: f64::from_bits(!summary[2]),
            max: f64::from_bits(summary[0]),
            positive_floor: floor,
        })
    }

    fn evaluate(&mut self, taus: &[f64], squares: bool) -> Result<Vec<Evaluation>> {
        let parity = self.queue(taus, squares)?;
        let slots = tune::RATIO_CANDIDATES;
        let mut results = vec![0u64; if squares { 4 * slots } else { 3 * slots }];
        unsafe { drv::memcpy_dtoh_async(&mut results[..], self.accumulators(parity), self.stream.0) }
            .map_err(driver_error("copying to the host"))?;
        self.device.synchronize(self.stream)?;
        Ok(taus
            .iter()
            .enumerate()
            .map(|(c, &tau)| Evaluation {
                tau,
                performed: results[c],
                largest_skipped: f64::from_bits(results[slots + c]),
                smallest_performed: f64::from_bits(!results[2 * slots + c]),
                skipped_squares: if squares { f64::from_bits(results[3 * slots + c]) } else { f64::NAN },
            })
            .collect())
    }
}

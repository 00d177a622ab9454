//! SpAMM on the GPU: launchers of `kernels/spamm.cu` and the call sequence of one product (get-norm
//! kernel on op(A) and op(B), multiplication kernel, per-C-block statistics) and the τ searches'
//! candidate evaluations.

use super::CudaExecutor;
use super::kernels::{KernelSource, SPAMM, SPAMM_BF16, SPAMM_F16, SPAMM_F32, SPAMM_F64, UTIL};
use super::memory::{DeviceBuffer, DeviceInput, DeviceOutput};
use super::timeline::Timeline;
use super::{Event, GpuDevice, Launch, Stream, copy_matrix_async, driver_error, launch};
use crate::alloc::{element_count, try_vec};
use crate::error::{Error, Result};
use crate::kernel_args;
use crate::scalar::{ComputeScalar, Element};
use crate::spamm::contract::{self, Outcome, RawOperand, SpammBackend, SpammStatistics, Totals};
use crate::spamm::tune::{self, CandidateEvaluator, Evaluation, ProductRange, TauRule};
use crate::spamm::{MathMode, NormMap, block_count, runs_3xtf32};
use crate::types::{Operation, ValueType};
use cudarc::driver::CudaStream;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{CU_MEMHOSTALLOC_PORTABLE, CUdeviceptr};
use std::sync::Arc;

/// A block norm map of `op(X)` in device memory, laid out as [`NormMap`].
pub struct DeviceNormMap {
    pub block_rows: usize,
    pub block_cols: usize,
    pub norms: DeviceBuffer,
}

impl DeviceNormMap {
    /// Copies the map back (waits for the stream).
    pub fn to_host(&self) -> Result<NormMap> {
        let len = element_count(self.block_rows, self.block_cols, "a block norm map")?;
        let mut norms = try_vec(len, 0.0f64, "a block norm map")?;
        self.norms.copy_to_host(&mut norms)?;
        Ok(NormMap { block_rows: self.block_rows, block_cols: self.block_cols, norms })
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
    let [map] = norm_maps::<T, 1>(device, stream, x, [op], stored_rows, stored_cols, ld, bs)?;
    Ok(map)
}

/// Threads per block of the get-norm kernel (`SPAMM_NORM_THREADS` in kernels/spamm.cu).
const NORM_THREADS: usize = 256;

/// [`norm_map`] for one or two `op`s of one stored matrix, reading the matrix once (one kernel
/// writes every map).
#[allow(clippy::too_many_arguments)]
fn norm_maps<T: Element, const OPS: usize>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    x: CUdeviceptr,
    ops: [Operation; OPS],
    stored_rows: usize,
    stored_cols: usize,
    ld: usize,
    bs: usize,
) -> Result<[DeviceNormMap; OPS]> {
    const { assert!(OPS == 1 || OPS == 2, "the get-norm kernel writes one or two maps") };
    let (stored_block_rows, stored_block_cols) = (block_count(stored_rows, bs), block_count(stored_cols, bs));
    let blocks = stored_block_rows * stored_block_cols;
    let maps = ops.map(|op| {
        let (block_rows, block_cols) = match op {
            Operation::N => (stored_block_rows, stored_block_cols),
            Operation::T => (stored_block_cols, stored_block_rows),
        };
        DeviceBuffer::alloc(device, blocks * 8, stream, "the block norm map").map(|norms| DeviceNormMap {
            block_rows,
            block_cols,
            norms,
        })
    });
    let maps = maps.into_iter().collect::<Result<Vec<_>>>()?;
    if blocks > 0 {
        let function = device.function(&SPAMM, &format!("spamm_norm_blocks_{}", T::VALUE_TYPE.short_name()))?;
        // Thread blocks of NORM_THREADS threads over groups of whole row blocks (as many as fit in
        // NORM_THREADS rows, at least one) and over column blocks; the group's row sums in shared
        // memory, in three scaled parts for f64 data (crate::spamm::scaled_norm).
        let group_rows = (NORM_THREADS / bs).max(1) * bs;
        let sums_per_row = if T::VALUE_TYPE == ValueType::F64 { 3 } else { 1 };
        let grid_x = stored_rows.div_ceil(group_rows) as u32;
        let grid_y = stored_block_cols.min(65535) as u32;
        let cfg = Launch {
            grid: (grid_x, grid_y, 1),
            block: (NORM_THREADS as u32, 1, 1),
            shared_bytes: (group_rows * 8 * sums_per_row) as u32,
        };
        let (rows, cols, bs_i, ld) = (stored_rows as i32, stored_cols as i32, bs as i32, ld as i64);
        let transposed = |i: usize| (ops.get(i) == Some(&Operation::T)) as i32;
        let (map0, map1) = (maps[0].norms.ptr(), maps.get(1).map_or(0, |m| m.norms.ptr()));
        let (t0, t1) = (transposed(0), transposed(1));
        unsafe { launch(&function, cfg, stream, kernel_args![&rows, &cols, &x, &ld, &bs_i, &map0, &t0, &map1, &t1]) }?;
    }
    Ok(maps.try_into().unwrap_or_else(|_| unreachable!("one map per op")))
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

/// The norm maps of a product's op(A) and op(B) (host or device memory), as [`gemm`] computes them:
/// one matrix used twice (A·A, Aᵀ·A) is staged and read once.
///
/// # Safety
/// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements (host or device memory of this
/// device).
pub unsafe fn operand_norm_maps<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    a: &RawOperand<T>,
    b: &RawOperand<T>,
    bs: usize,
) -> Result<[DeviceNormMap; 2]> {
    let inputs = unsafe { StagedInputs::new(device, stream, a, b) }?;
    inputs.norm_maps(device, stream, a, b, bs)
}

/// `C ← α·Σ_(valid k) op(A)_ik·op(B)_kj + β·C` on the handle's device (the lead), with C
/// column-major `m × n` (`ldc`) at `c_ptr` (host or device, `c_len` elements), shared with the
/// devices of `shared` when given (cuSpAMM section 3.4; the caller checked [`splits`]).
///
/// The statistics totals of the whole product are queued into `stats` (nothing waits for the stream
/// unless C or an input is in host memory, or the product is shared). `kernels` selects the FP32 kernel
/// ([`runs_3xtf32`]). A τ to be searched ([`TauRule`]) is searched on the product's own norm maps
/// once they are computed (the host waits for each search iteration). Returns (mb, nb, kb) and τ.
///
/// A shared product cuts C's rows at block-row boundaries by valid block products, each device
/// getting its fraction of them ([`SharedDevices`]: equal at first, then adapted so that the devices
/// finish together). The lead computes the first rows in place on the caller's stream; each other
/// device computes its rows in its workspace ([`start_shares`], [`finish_shares`]): op(A)'s rows
/// come from the lead, op(B) comes chunk by chunk along a chain (the lead sends it to the first
/// share, each share forwards every chunk it has received to the next), so each device sends op(B)
/// at most once whatever the number of devices; the lead's SMs write the norm maps' parts into each
/// ([`push_norms`]). The statistics run on the slot's stream beside the multiplication. When the last
/// product had these dimensions, its valid work per row gives the split at once and every share's
/// operands start moving before the norm maps are computed; otherwise the lead counts this
/// product's (with the statistics) and the host waits for the count. The caller's stream waits for
/// every share. Host inputs are staged on the lead first.
///
/// # Safety
/// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements and `c_ptr` readable and
/// writable for `c_len`, host memory or memory of the lead device, not overlapping.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm<T: Element>(
    lead: &Arc<GpuDevice>,
    stream: Stream,
    stats: &StatsSlot,
    mut shared: Option<&mut SharedDevices>,
    a: &RawOperand<T>,
    b: &RawOperand<T>,
    alpha: T::Compute,
    beta: T::Compute,
    c_ptr: *mut T,
    c_len: usize,
    ldc: usize,
    tau: TauRule,
    bs: usize,
    kernels: KernelSettings,
) -> Result<((usize, usize, usize), f64)> {
    let (m, k) = a.op_shape();
    let n = b.op_shape().1;
    let size = std::mem::size_of::<T>();
    let dims @ (mb, nb, kb) = (block_count(m, bs), block_count(n, bs), block_count(k, bs));
    let devices = shared.as_ref().map_or(1, |s| s.shares.len() + 1);
    let mut timeline = Timeline::start(|| format!("SpAMM {m}x{n}x{k}, tau {tau:?}, {devices} device(s)"));
    timeline.stamp(lead, stream, || "called".into())?;
    let inputs = unsafe { StagedInputs::new(lead, stream, a, b) }?;
    let reads_c = reads_c(beta, m, n, ldc);
    let c = unsafe { DeviceOutput::new(lead, stream, c_ptr, c_len, "C", reads_c) }?;
    let (a_dev, b_dev) = (inputs.a_operand(a), inputs.b_operand(b));
    let operands = SharedOperands { a: a_dev, b: b_dev, b_rows: b.stored_rows, b_cols: b.stored_cols };
    // The shares' operands may leave the lead once it has them; a split known now starts them moving.
    let early = match shared.as_deref_mut() {
        None => None,
        Some(shared) => {
            let ready = shared.begin(stream)?;
            let runs = match shared.last_split(dims)? {
                None => None,
                Some(bounds) => {
                    let rows = SplitRows { bounds: &bounds, bs, m, n, k, dims, reads_c };
                    Some((unsafe { start_shares::<T>(lead, shared, &mut timeline, &ready, &rows, &operands) }?, bounds))
                }
            };
            Some((ready, runs))
        }
    };
    let norms = inputs.norm_maps(lead, stream, a, b, bs)?;
    timeline.stamp(lead, stream, || "norm maps".into())?;
    let (an, bn) = (norms[0].norms.ptr(), norms[1].norms.ptr());
    let tau = match tau.given() {
        Some(tau) => tau,
        None => {
            // A valid-ratio search has the evaluator anticipate its first iteration
            // (CandidateEvaluator::prepare_ratio_search).
            let mut evaluator = DeviceTauEvaluator::new(lead, stream, &norms[0], &norms[1])?;
            let tau = tau.choose(&mut evaluator, dims, alpha.to_f64().abs())?;
            timeline.stamp(lead, stream, || format!("tau {tau:e} searched"))?;
            tau
        }
    };
    let whole = Product { m, n, k, bs, tau };
    // The statistics on the slot's stream, beside the multiplication; the caller's stream waits for
    // them before the norm maps are freed.
    let side = stats.side_stream();
    let norms_done = Event::new(lead)?;
    norms_done.record(stream)?;
    norms_done.wait_on(side)?;
    let bounds = match shared.as_deref_mut() {
        // One device: the statistics are queued after the multiplication (below).
        None => vec![0, mb],
        Some(shared) => {
            let row_work = DeviceBuffer::zeroed(lead, mb * 8, side, "SpAMM row work")?;
            stats.record(side, &product_stats(lead, side, (an, bn), tau, dims, Some(row_work.ptr()))?)?;
            shared.keep_row_work(side, &row_work, dims)?;
            timeline.stamp(lead, side, || "statistics and work per row".into())?;
            match early.as_ref().and_then(|(_, runs)| runs.as_ref()) {
                Some((_, bounds)) => bounds.clone(),
                None => shared.this_split()?,
            }
        }
    };
    let fractions = shared.as_ref().map(|s| s.fractions.clone());
    timeline.stamp(lead, stream, || format!("split at block rows {bounds:?}, fractions {fractions:.3?}"))?;
    let rows = SplitRows { bounds: &bounds, bs, m, n, k, dims, reads_c };
    // Multi-device: every share started (now, when the split came late), and the norm maps' parts
    // pushed to each before the lead's own rows.
    let in_flight = match (shared.as_deref_mut(), early) {
        (Some(shared), Some((ready, runs))) => {
            let runs = match runs {
                Some((runs, _)) => runs,
                None => unsafe { start_shares::<T>(lead, shared, &mut timeline, &ready, &rows, &operands) }?,
            };
            let norms_in = push_norms(lead, stream, shared, &runs, &rows, (an, bn))?;
            Some((ready, runs, norms_in))
        }
        _ => None,
    };
    // The lead's share, the first rows, in place.
    let lead_rows = rows.of(0);
    let a_lead = match a_dev.op {
        Operation::N => DeviceOperand { ptr: a_dev.ptr + (lead_rows.start * size) as u64, ..a_dev },
        Operation::T => DeviceOperand { ptr: a_dev.ptr + (lead_rows.start * a_dev.ld * size) as u64, ..a_dev },
    };
    timeline.stamp(lead, stream, || "lead's rows start".into())?;
    unsafe {
        multiply::<T>(
            lead,
            stream,
            &whole.rows(&lead_rows),
            a_lead,
            b_dev,
            (an + (bounds[0] * 8) as u64, mb),
            bn,
            alpha,
            beta,
            (c.ptr() + (lead_rows.start * size) as u64, ldc),
            kernels,
        )
    }?;
    timeline.stamp(lead, stream, || "lead's rows computed".into())?;
    if shared.is_none() {
        // Queued after the multiplication's kernels, so that the statistics' blocks take the SMs the
        // multiplication leaves idle (its tail) rather than delaying its start.
        stats.record(side, &product_stats(lead, side, (an, bn), tau, dims, None)?)?;
    }
    if let (Some(shared), Some((ready, mut runs, norms_in))) = (shared, in_flight) {
        shared.finished[0].record(stream)?;
        unsafe {
            finish_shares::<T>(
                lead,
                shared,
                &mut timeline,
                &mut runs,
                (&ready, &norms_in),
                &rows,
                &operands,
                &whole,
                (alpha, beta),
                (c.ptr(), ldc),
                kernels,
            )
        }?;
        // The caller's stream goes on (and this call's temporaries on the lead are freed) once every
        // share is done.
        for side in &shared.shares {
            side.done.wait_on(stream)?;
        }
        shared.observe_finish(&bounds)?;
        timeline.stamp(lead, stream, || "every share done".into())?;
    }
    let stats_done = Event::new(lead)?;
    stats_done.record(side)?;
    stats_done.wait_on(stream)?;
    c.finish()?;
    timeline.print()?;
    Ok(((mb, nb, kb), tau))
}

/// What a handle keeps on a device that computes a share of multi-device products: its streams, the
/// event that marks the share done, and its workspace.
struct DeviceShare {
    gpu: Arc<GpuDevice>,
    /// Multiplications, panel p on stream p % PANEL_STREAMS; the first also receives op(A)'s rows and
    /// the norm parts, orders the workspace and carries `done`.
    compute: Vec<Arc<CudaStream>>,
    /// op(B) arriving from the lead device or the previous share, and C's rows when read.
    copy_in: Arc<CudaStream>,
    /// Rows of C returning to the lead device.
    copy_out: Arc<CudaStream>,
    done: Event,
    /// The device's copies of its operands, norms and rows of C, kept between products (grown when a
    /// product needs more): allocating gigabytes anew for every product costs more than copying them.
    workspace: Option<DeviceBuffer>,
}

impl DeviceShare {
    fn new(gpu: &Arc<GpuDevice>) -> Result<Self> {
        Ok(DeviceShare {
            compute: (0..PANEL_STREAMS).map(|_| gpu.new_stream()).collect::<Result<_>>()?,
            copy_in: gpu.new_stream()?,
            copy_out: gpu.new_stream()?,
            done: Event::new(gpu)?,
            gpu: gpu.clone(),
            workspace: None,
        })
    }

    /// The compute streams (panel p on the p % PANEL_STREAMS-th), the copy-in and the copy-out stream.
    fn streams(&self) -> (Vec<Stream>, Stream, Stream) {
        let compute = self.compute.iter().map(|stream| Stream(stream.cu_stream())).collect();
        (compute, Stream(self.copy_in.cu_stream()), Stream(self.copy_out.cu_stream()))
    }

    /// A workspace of at least `bytes` (of `grown` bytes when the one kept is smaller), free once
    /// `stream` reaches the point where this is called (the last product's work on it is done: `done`
    /// is recorded after everything of a share).
    fn workspace(&mut self, bytes: usize, grown: usize, stream: Stream) -> Result<CUdeviceptr> {
        if self.workspace.as_ref().is_none_or(|w| w.bytes() < bytes) {
            // The old one may still be in use by the last product: freed after it (cuMemFree waits).
            self.done.synchronize()?;
            self.workspace = None;
            let bytes = grown.max(bytes);
            self.workspace = Some(DeviceBuffer::alloc(&self.gpu, bytes, stream, "SpAMM workspace")?.resident());
        }
        self.done.wait_on(stream)?;
        Ok(self.workspace.as_ref().expect("just made").ptr())
    }
}

/// The devices besides the lead that compute shares of a handle's multi-device products, and how the
/// valid work is divided among all of them. The fractions start equal and are adapted after every
/// product to how long each device took (measured in the lead's clock): a device that starts later —
/// the others wait for their operands to arrive over the interconnect, the lead does not — or
/// computes more slowly gets less work next time, so that the devices finish together. Repeated
/// products (purification's) converge in a few calls; a product of another shape starts from the
/// last split. The split changes which device computes a row, not the row's arithmetic, so it may
/// come from the last product's valid work per row: a product of the same dimensions (purification's
/// next square) is split before its own norm maps exist.
pub struct SharedDevices {
    lead: Arc<GpuDevice>,
    shares: Vec<DeviceShare>,
    /// Fraction of the valid work per device, the lead's first; they sum to 1.
    fractions: Vec<f64>,
    /// Recorded on the caller's stream once a product's inputs are on the lead: where the devices'
    /// times are measured from.
    started: Event,
    /// Per device, recorded on the lead once the device has finished its part of the product: the
    /// lead's on the caller's stream, each share's on its observer stream.
    finished: Vec<Event>,
    /// Streams of the lead that wait for one share each and record its `finished` event.
    observers: Vec<Arc<CudaStream>>,
    /// Valid block products per block row of C of the last product, copied to the host, with that
    /// product's (mb, nb, kb).
    row_work: PinnedWords,
    row_work_dims: Option<(usize, usize, usize)>,
    /// The block-row bounds of the last product, until its timings have been read.
    unread: Option<Vec<usize>>,
}

impl SharedDevices {
    pub fn new(lead: &Arc<GpuDevice>, share_gpus: &[Arc<GpuDevice>]) -> Result<Self> {
        let devices = share_gpus.len() + 1;
        Ok(SharedDevices {
            lead: lead.clone(),
            shares: share_gpus.iter().map(DeviceShare::new).collect::<Result<_>>()?,
            fractions: vec![1.0 / devices as f64; devices],
            started: Event::timed(lead)?,
            finished: (0..devices).map(|_| Event::timed(lead)).collect::<Result<_>>()?,
            observers: share_gpus.iter().map(|_| lead.new_stream()).collect::<Result<_>>()?,
            row_work: PinnedWords::new(lead, 0)?,
            row_work_dims: None,
            unread: None,
        })
    }

    /// Whether these are `lead` and then `share_gpus`.
    pub fn serves(&self, lead: &Arc<GpuDevice>, share_gpus: &[Arc<GpuDevice>]) -> bool {
        Arc::ptr_eq(&self.lead, lead)
            && self.shares.len() == share_gpus.len()
            && self.shares.iter().zip(share_gpus).all(|(share, gpu)| Arc::ptr_eq(&share.gpu, gpu))
    }

    /// The start of a product whose inputs the caller's `stream` has queued: the fractions follow the
    /// last product's timings, the stream waits until every share of the last product is done (the
    /// shares are about to overwrite their workspaces, which the last product's next share may still
    /// be reading: op(B)'s chain) and records `started` and the returned event, after which the
    /// shares may copy the lead's inputs.
    fn begin(&mut self, stream: Stream) -> Result<Event> {
        self.rebalance()?;
        for side in &self.shares {
            side.done.wait_on(stream)?;
        }
        self.started.record(stream)?;
        let ready = Event::new(&self.lead)?;
        ready.record(stream)?;
        Ok(ready)
    }

    /// The split of a product of dimensions `dims` from the last product's valid work per row, when
    /// that product had the same dimensions.
    fn last_split(&self, dims: (usize, usize, usize)) -> Result<Option<Vec<usize>>> {
        if self.row_work_dims != Some(dims) {
            return Ok(None);
        }
        Ok(Some(work_bounds(self.row_work.wait(dims.0)?, &self.fractions)))
    }

    /// Queues on `stream` the copy of this product's valid work per block row (`row_work`, mb words,
    /// counted by [`product_stats`]) to the host, for [`SharedDevices::this_split`], the next
    /// product's [`SharedDevices::last_split`] and the rates of [`SharedDevices::rebalance`].
    fn keep_row_work(&mut self, stream: Stream, row_work: &DeviceBuffer, dims: (usize, usize, usize)) -> Result<()> {
        if self.row_work.len() < dims.0 {
            self.row_work = PinnedWords::new(&self.lead, dims.0)?;
        }
        self.row_work.record_from(stream, row_work.ptr(), dims.0)?;
        self.row_work_dims = Some(dims);
        Ok(())
    }

    /// The split of this product from its own valid work per row (waits for the count).
    fn this_split(&self) -> Result<Vec<usize>> {
        let mb = self.row_work_dims.map_or(0, |dims| dims.0);
        Ok(work_bounds(self.row_work.wait(mb)?, &self.fractions))
    }

    /// After a product has been queued: each share's observer records its `finished` once the share is
    /// done, and the product's split is kept for [`SharedDevices::rebalance`].
    fn observe_finish(&mut self, bounds: &[usize]) -> Result<()> {
        self.lead.bind()?;
        for ((side, observer), finished) in self.shares.iter().zip(&self.observers).zip(&self.finished[1..]) {
            let observer = Stream(observer.cu_stream());
            side.done.wait_on(observer)?;
            finished.record(observer)?;
        }
        self.unread = Some(bounds.to_vec());
        Ok(())
    }

    /// Adapts the fractions to the last product's timings (waits for that product): each device's new
    /// fraction is proportional to the work it got over the time it took from `started` to its finish
    /// (its effective rate, start latency included), averaged with its old fraction to damp noise. A
    /// product in which some device got no work, or finished at once, changes nothing.
    fn rebalance(&mut self) -> Result<()> {
        let Some(bounds) = self.unread.take() else { return Ok(()) };
        let row_work = self.row_work.wait(bounds.last().copied().unwrap_or(0))?;
        let mut rates = Vec::with_capacity(bounds.len() - 1);
        for (finished, range) in self.finished.iter().zip(bounds.windows(2)) {
            let work: u64 = row_work[range[0]..range[1]].iter().sum();
            finished.synchronize()?;
            let ms = self.started.elapsed_ms(finished)? as f64;
            if work == 0 || ms <= 0.0 {
                return Ok(());
            }
            rates.push(work as f64 / ms);
        }
        let total: f64 = rates.iter().sum();
        for (fraction, rate) in self.fractions.iter_mut().zip(&rates) {
            *fraction = 0.5 * *fraction + 0.5 * rate / total;
        }
        Ok(())
    }
}

/// How a product's tile kernels are chosen and launched.
#[derive(Clone, Copy, Debug)]
pub struct KernelSettings {
    /// The FP32 kernel ([`runs_3xtf32`]).
    pub mode: MathMode,
    /// Launch with the least shared memory the kernels run with ([`crate::executor::TestHooks`]).
    pub fewest_shared_memory: bool,
}

/// Whether a product can be split over devices (the tile kernels take panels of C's rows; k = 0 only
/// scales C, nothing worth sharing).
pub fn splits<T: Element>(devices: &[&Arc<GpuDevice>], bs: usize, k: usize, mode: MathMode) -> bool {
    let kb = block_count(k, bs);
    let kernel = TileKernel::of::<T>(runs_3xtf32(mode, T::VALUE_TYPE, bs, kb), (false, false));
    k > 0 && devices.iter().all(|device| kernel.applies(device, bs, kb))
}

/// Column panels a device's share is cut into: op(B)'s next panel is copied in, and C's last one
/// copied out, while the current one is multiplied.
const SHARE_PANELS: usize = 8;

/// Streams a share's panels are multiplied on, so that a panel's kernel starts while the last
/// one's heaviest tiles finish: a panel of a decay product has few heavy tiles (those crossing the
/// diagonal) and many light ones, and one after another on one stream each panel would take at
/// least its heaviest tile's time with the device mostly idle.
const PANEL_STREAMS: usize = 4;

/// Chunks each panel of op(B) travels in along the chain of shares: a share forwards a chunk as soon
/// as it has it, so the last of d devices waits about d chunk copies, not d panel copies, for its
/// first panel.
const CHUNKS_PER_PANEL: usize = 4;

/// The column panels of op(B) and C (in blocks of `bs`, n columns), each cut into chunks.
struct Panels {
    n: usize,
    bs: usize,
    nb: usize,
    panel_blocks: usize,
    chunk_blocks: usize,
}

impl Panels {
    fn new(n: usize, bs: usize, nb: usize) -> Panels {
        let panel_blocks = nb.div_ceil(SHARE_PANELS).max(1);
        Panels { n, bs, nb, panel_blocks, chunk_blocks: panel_blocks.div_ceil(CHUNKS_PER_PANEL) }
    }

    fn count(&self) -> usize {
        self.nb.div_ceil(self.panel_blocks)
    }

    /// Panel p's block columns.
    fn blocks(&self, p: usize) -> std::ops::Range<usize> {
        p * self.panel_blocks..((p + 1) * self.panel_blocks).min(self.nb)
    }

    fn columns(&self, blocks: std::ops::Range<usize>) -> std::ops::Range<usize> {
        (blocks.start * self.bs).min(self.n)..(blocks.end * self.bs).min(self.n)
    }

    /// Panel p's chunks, as column ranges.
    fn chunks(&self, p: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let blocks = self.blocks(p);
        blocks
            .clone()
            .step_by(self.chunk_blocks)
            .map(move |first| self.columns(first..(first + self.chunk_blocks).min(blocks.end)))
    }
}

/// A product's split: block-row bounds per device (the lead's first), and what every share needs to
/// know about the whole product.
struct SplitRows<'a> {
    bounds: &'a [usize],
    bs: usize,
    /// The whole product's op(A) rows, op(B) columns and inner dimension.
    m: usize,
    n: usize,
    k: usize,
    /// (mb, nb, kb) of the whole product.
    dims: (usize, usize, usize),
    reads_c: bool,
}

impl SplitRows<'_> {
    /// Device d's rows of C.
    fn of(&self, d: usize) -> std::ops::Range<usize> {
        (self.bounds[d] * self.bs).min(self.m)..(self.bounds[d + 1] * self.bs).min(self.m)
    }

    fn block_rows(&self, d: usize) -> std::ops::Range<usize> {
        self.bounds[d]..self.bounds[d + 1]
    }
}

/// The lead's operands of a shared product, as every share copies from them.
struct SharedOperands {
    a: DeviceOperand,
    b: DeviceOperand,
    /// B's stored shape.
    b_rows: usize,
    b_cols: usize,
}

/// The element offset of op(B)'s column `col` in column-major storage of B with leading dimension
/// `ld`: a stored column (op N) or a stored row (op T).
fn op_column_offset(op: Operation, col: usize, ld: usize) -> usize {
    match op {
        Operation::N => col * ld,
        Operation::T => col,
    }
}

/// One other device's share of a product in flight: where its copies live in its workspace, and
/// which of op(B)'s chunks have been queued to it.
struct ShareRun {
    /// The device's index in [`SharedDevices::shares`] (its place in the chain is one more).
    side: usize,
    /// op(A)'s rows, compact.
    a: DeviceOperand,
    /// op(B), stored as the lead's is (leading dimension B's stored rows), and B's stored columns.
    b: DeviceOperand,
    b_cols: usize,
    an: CUdeviceptr,
    bn: CUdeviceptr,
    c: CUdeviceptr,
    /// Per chunk of op(B) queued so far, in order: recorded once it has arrived here.
    arrived: Vec<Event>,
    /// Recorded on the first compute stream once op(A)'s rows are in.
    a_in: Option<Event>,
}

/// The first part of the other devices' shares of a shared [`gemm`]: each device's workspace, then
/// op(A)'s rows of the first share, op(B)'s first panel along the chain, and the other shares' rows
/// of op(A), all once `ready`. The lead's outgoing copies are served in the order queued: this order
/// lets the first share start after one share of op(A) and one panel of op(B), the next shares one
/// share of op(A) later each, while the rest of op(B) follows ([`finish_shares`]). Shares without rows
/// get no run.
///
/// # Safety
/// As [`gemm`]; the lead's buffers stay alive until the caller's stream has waited.
unsafe fn start_shares<T: Element>(
    lead: &Arc<GpuDevice>,
    shared: &mut SharedDevices,
    timeline: &mut Timeline,
    ready: &Event,
    rows: &SplitRows,
    operands: &SharedOperands,
) -> Result<Vec<ShareRun>> {
    let size = std::mem::size_of::<T>();
    let (_, nb, kb) = rows.dims;
    let a_dev = operands.a;
    let mut runs = Vec::with_capacity(shared.shares.len());
    for (side, device) in shared.shares.iter_mut().enumerate() {
        let (share_rows, block_rows) = (rows.of(side + 1), rows.block_rows(side + 1));
        if share_rows.is_empty() {
            continue;
        }
        let (n, k) = (rows.n, rows.k);
        let gpu = &device.gpu.clone();
        gpu.enable_peer_access(lead)?;
        lead.enable_peer_access(gpu)?;
        gpu.bind()?;
        let (panel_streams, copy_in, copy_out) = device.streams();
        // The device's copies, in its workspace: op(A)'s rows, op(B) (stored as B is), the norm
        // parts, C's rows (each part 256-byte aligned), for `rows` rows in `block_rows` block rows.
        let layout = |rows: usize, block_rows: usize| {
            let sizes = [
                rows * k * size,
                operands.b_rows * operands.b_cols * size,
                block_rows * kb * 8,
                kb * nb * 8,
                rows * n * size,
            ];
            let mut offsets = [0usize; 5];
            let mut end = 0;
            for (offset, bytes) in offsets.iter_mut().zip(sizes) {
                *offset = end;
                end += bytes.div_ceil(256) * 256;
            }
            (offsets, end)
        };
        let (offsets, bytes) = layout(share_rows.len(), block_rows.len());
        // A workspace that must grow is made for a quarter more rows: the split moves a little with
        // every product, and growing frees and allocates gigabytes (tens of milliseconds).
        let headroom = |count: usize, limit: usize| (count + count / 4).min(limit);
        let grown = layout(headroom(share_rows.len(), rows.m), headroom(block_rows.len(), rows.dims.0)).1;
        let base = device.workspace(bytes, grown, panel_streams[0])?;
        let [a, b, an, bn, c] = offsets.map(|offset| base + offset as u64);
        let started = Event::new(gpu)?;
        started.record(panel_streams[0])?;
        for other in panel_streams[1..].iter().chain([&copy_in, &copy_out]) {
            started.wait_on(*other)?;
        }
        let a_ld = match a_dev.op {
            Operation::N => share_rows.len(),
            Operation::T => k,
        };
        runs.push(ShareRun {
            side,
            a: DeviceOperand { ptr: a, ld: a_ld, op: a_dev.op },
            b: DeviceOperand { ptr: b, ld: operands.b_rows, op: operands.b.op },
            b_cols: operands.b_cols,
            an,
            bn,
            c,
            arrived: Vec::new(),
            a_in: None,
        });
    }
    let panels = Panels::new(rows.n, rows.bs, nb);
    for r in 0..runs.len() {
        let run = &runs[r];
        let device = &shared.shares[run.side];
        let (gpu, share_rows) = (&device.gpu, rows.of(run.side + 1));
        let k = rows.k;
        let receive = device.streams().0[0];
        // op(A)'s rows: stored rows of A (op N) or stored columns (op T), into a compact matrix.
        let (a_src, a_width, a_height) = match a_dev.op {
            Operation::N => (a_dev.ptr + (share_rows.start * size) as u64, share_rows.len(), k),
            Operation::T => (a_dev.ptr + (share_rows.start * a_dev.ld * size) as u64, k, share_rows.len()),
        };
        gpu.bind()?;
        let s = run.side + 1;
        timeline.stamp(gpu, receive, || format!("share {s}: rows {share_rows:?} queued"))?;
        ready.wait_on(receive)?;
        unsafe {
            copy_matrix_async(
                (run.a.ptr, a_width * size, gpu),
                (a_src, a_dev.ld * size, lead),
                a_width * size,
                a_height,
                receive,
            )?;
        }
        let a_in = Event::new(gpu)?;
        a_in.record(receive)?;
        runs[r].a_in = Some(a_in);
        timeline.stamp(gpu, receive, || format!("share {s}: op(A)'s rows in"))?;
        if r == 0 && panels.count() > 0 {
            forward_panel::<T>(lead, shared, timeline, &mut runs, (operands.b, ready), &panels, 0)?;
        }
    }
    lead.bind()?;
    Ok(runs)
}

/// Queues panel `p` of op(B) along the chain of `runs`: the lead's op(B) (`lead_b`, readable once its
/// event has completed) to the first share, each share's copy to the next, chunk by chunk on the
/// copy-in streams, each chunk forwarded once it has arrived.
fn forward_panel<T: Element>(
    lead: &Arc<GpuDevice>,
    shared: &SharedDevices,
    timeline: &mut Timeline,
    runs: &mut [ShareRun],
    lead_b: (DeviceOperand, &Event),
    panels: &Panels,
    p: usize,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    for r in 0..runs.len() {
        let (before, rest) = runs.split_at_mut(r);
        let run = &mut rest[0];
        let device = &shared.shares[run.side];
        let gpu = &device.gpu;
        let copy_in = device.streams().1;
        let (from_gpu, from) = match before.last() {
            None => (lead, lead_b.0),
            Some(previous) => (&shared.shares[previous.side].gpu, previous.b),
        };
        gpu.enable_peer_access(from_gpu)?;
        from_gpu.enable_peer_access(gpu)?;
        gpu.bind()?;
        for cols in panels.chunks(p) {
            let chunk = run.arrived.len();
            match before.last() {
                None => lead_b.1.wait_on(copy_in)?,
                Some(previous) => previous.arrived[chunk].wait_on(copy_in)?,
            }
            // op(B)'s columns: stored columns of B (op N) or stored rows (op T).
            let (width, height) = match run.b.op {
                Operation::N => (run.b.ld, cols.len()),
                Operation::T => (cols.len(), run.b_cols),
            };
            unsafe {
                copy_matrix_async(
                    (
                        run.b.ptr + (op_column_offset(run.b.op, cols.start, run.b.ld) * size) as u64,
                        run.b.ld * size,
                        gpu,
                    ),
                    (
                        from.ptr + (op_column_offset(from.op, cols.start, from.ld) * size) as u64,
                        from.ld * size,
                        from_gpu,
                    ),
                    width * size,
                    height,
                    copy_in,
                )?;
            }
            let event = Event::new(gpu)?;
            event.record(copy_in)?;
            run.arrived.push(event);
        }
        let s = run.side + 1;
        timeline.stamp(gpu, copy_in, || format!("share {s}: panel {p} in"))?;
    }
    lead.bind()
}

/// Pushes each share's parts of the norm maps (its block rows of `an`, all of `bn`) into its
/// workspace with the lead's SMs, on the caller's `stream` once the maps are there, and returns the
/// event after them. The copy engines would serve them only after everything queued out of the lead
/// before them: op(A)'s rows for every share and op(B)'s first panel. (A device the lead cannot
/// reach peer to peer gets them by a copy, staged by the driver.)
fn push_norms(
    lead: &Arc<GpuDevice>,
    stream: Stream,
    shared: &SharedDevices,
    runs: &[ShareRun],
    rows: &SplitRows,
    (an, bn): (CUdeviceptr, CUdeviceptr),
) -> Result<Event> {
    let (mb, nb, kb) = rows.dims;
    let f = lead.function(&UTIL, "copy_words")?;
    // `lines` lines of `width` words, from the lead to `gpu`.
    let push = |gpu: &Arc<GpuDevice>, (src, src_pitch): (CUdeviceptr, usize), (dst, dst_pitch), width, lines| {
        if !(lead.enable_peer_access(gpu)? && gpu.enable_peer_access(lead)?) {
            lead.bind()?;
            return unsafe {
                copy_matrix_async((dst, dst_pitch * 8, gpu), (src, src_pitch * 8, lead), width * 8, lines, stream)
            };
        }
        lead.bind()?;
        let (width_i, lines_i, src_pitch, dst_pitch) = (width as i32, lines as i32, src_pitch as i64, dst_pitch as i64);
        unsafe {
            launch(
                &f,
                flat_launch(lead, width * lines),
                stream,
                kernel_args![&width_i, &lines_i, &src, &src_pitch, &dst, &dst_pitch],
            )
        }
    };
    for run in runs {
        let gpu = &shared.shares[run.side].gpu;
        let block_rows = rows.block_rows(run.side + 1);
        // op(A)'s map is mb × kb column-major: the share's block rows of every column.
        push(gpu, (an + (block_rows.start * 8) as u64, mb), (run.an, block_rows.len()), block_rows.len(), kb)?;
        push(gpu, (bn, kb), (run.bn, kb), kb, nb)?;
    }
    let norms_in = Event::new(lead)?;
    norms_in.record(stream)?;
    Ok(norms_in)
}

/// The rest of the other devices' shares of a shared [`gemm`], after [`start_shares`] and
/// [`push_norms`] (`ready`, `norms_in`: their events on the lead): the rest of op(B) along the
/// chain, and per panel: C's rows when read (copy-in stream), the multiplication (the compute
/// streams in turn, once the panel's chunks, op(A)'s rows and the norm parts are in), C's rows back
/// to the lead (copy-out stream). Each share's `done` is recorded after all of it.
///
/// # Safety
/// As [`gemm`]; the lead's buffers stay alive until the caller's stream has waited.
#[allow(clippy::too_many_arguments)]
unsafe fn finish_shares<T: Element>(
    lead: &Arc<GpuDevice>,
    shared: &SharedDevices,
    timeline: &mut Timeline,
    runs: &mut [ShareRun],
    (ready, norms_in): (&Event, &Event),
    rows: &SplitRows,
    operands: &SharedOperands,
    whole: &Product,
    (alpha, beta): (T::Compute, T::Compute),
    (c_lead, ldc): (CUdeviceptr, usize),
    kernels: KernelSettings,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let (_, nb, kb) = rows.dims;
    let panels = Panels::new(whole.n, whole.bs, nb);
    for p in 0..panels.count() {
        if p > 0 {
            forward_panel::<T>(lead, shared, timeline, runs, (operands.b, ready), &panels, p)?;
        }
        for run in runs.iter() {
            let device = &shared.shares[run.side];
            let gpu = &device.gpu;
            let (share_rows, block_rows) = (rows.of(run.side + 1), rows.block_rows(run.side + 1));
            let panel_rows = share_rows.len();
            let (panel_streams, copy_in, copy_out) = device.streams();
            let panel_stream = panel_streams[p % PANEL_STREAMS];
            let blocks = panels.blocks(p);
            let cols = panels.columns(blocks.clone());
            let c_offset = (share_rows.start * size + cols.start * ldc * size) as u64;
            let c_panel = run.c + (cols.start * panel_rows * size) as u64;
            gpu.bind()?;
            if rows.reads_c {
                unsafe {
                    copy_matrix_async(
                        (c_panel, panel_rows * size, gpu),
                        (c_lead + c_offset, ldc * size, lead),
                        panel_rows * size,
                        cols.len(),
                        copy_in,
                    )?;
                }
            }
            // The panel's chunks of op(B) are the last queued on the copy-in stream, C's rows after them.
            let panel_in = Event::new(gpu)?;
            panel_in.record(copy_in)?;
            panel_in.wait_on(panel_stream)?;
            run.a_in.as_ref().expect("set by start_shares").wait_on(panel_stream)?;
            norms_in.wait_on(panel_stream)?;
            let s = run.side + 1;
            timeline.stamp(gpu, panel_stream, || format!("share {s}: panel {p} starts"))?;
            unsafe {
                multiply::<T>(
                    gpu,
                    panel_stream,
                    &Product { n: cols.len(), ..whole.rows(&share_rows) },
                    run.a,
                    DeviceOperand {
                        ptr: run.b.ptr + (op_column_offset(run.b.op, cols.start, run.b.ld) * size) as u64,
                        ..run.b
                    },
                    (run.an, block_rows.len()),
                    run.bn + (blocks.start * kb * 8) as u64,
                    alpha,
                    beta,
                    (c_panel, panel_rows),
                    kernels,
                )
            }?;
            timeline.stamp(gpu, panel_stream, || format!("share {s}: panel {p} computed"))?;
            let panel_done = Event::new(gpu)?;
            panel_done.record(panel_stream)?;
            panel_done.wait_on(copy_out)?;
            unsafe {
                copy_matrix_async(
                    (c_lead + c_offset, ldc * size, lead),
                    (c_panel, panel_rows * size, gpu),
                    panel_rows * size,
                    cols.len(),
                    copy_out,
                )?;
            }
            timeline.stamp(gpu, copy_out, || format!("share {s}: panel {p} out"))?;
        }
    }
    // `done` (on the first compute stream) covers the other streams: the panels are computed, the
    // last panel of C has left, and the copies in are over even when no panel waited for them
    // (n = 0), before the caller may free the inputs or this workspace.
    for run in runs.iter() {
        let device = &shared.shares[run.side];
        let (panel_streams, copy_in, copy_out) = device.streams();
        device.gpu.bind()?;
        for &other in panel_streams[1..].iter().chain([&copy_out, &copy_in]) {
            let finished = Event::new(&device.gpu)?;
            finished.record(other)?;
            finished.wait_on(panel_streams[0])?;
        }
        device.done.record(panel_streams[0])?;
        let s = run.side + 1;
        timeline.stamp(&device.gpu, panel_streams[0], || format!("share {s}: done"))?;
    }
    lead.bind()
}

/// Cuts `work` (per block row) into consecutive ranges, range d holding about `fractions[d]` of the
/// total (the fractions sum to 1): boundary p is the first row where the running sum reaches the
/// fractions before p of the total. Rows of no work spread evenly when nothing is valid.
pub fn work_bounds(work: &[u64], fractions: &[f64]) -> Vec<usize> {
    let parts = fractions.len();
    let total: u64 = work.iter().sum();
    let mut bounds = vec![0; parts + 1];
    bounds[parts] = work.len();
    if total == 0 {
        for (p, bound) in bounds.iter_mut().enumerate() {
            *bound = work.len() * p / parts;
        }
        return bounds;
    }
    let (mut running, mut row, mut before) = (0u64, 0, 0.0);
    for (p, fraction) in fractions.iter().enumerate().take(parts - 1) {
        before += fraction;
        let target = (total as f64 * before).ceil().min(total as f64) as u64;
        while row < work.len() && running < target {
            running += work[row];
            row += 1;
        }
        bounds[p + 1] = row;
    }
    bounds
}

/// Whether C must be read: β ≠ 0, or a staged host C whose padding rows m..ldc go back whole and must
/// come back unchanged.
fn reads_c<F: ComputeScalar>(beta: F, m: usize, n: usize, ldc: usize) -> bool {
    beta != F::ZERO || (ldc > m && n > 1)
}

/// The sizes and threshold of one product `op(A)·op(B)` (m × k times k × n, blocks of `bs`).
#[derive(Clone, Copy, Debug)]
struct Product {
    m: usize,
    n: usize,
    k: usize,
    bs: usize,
    tau: f64,
}

impl Product {
    /// The part of this product that computes `rows` of C.
    fn rows(&self, rows: &std::ops::Range<usize>) -> Product {
        Product { m: rows.len(), ..*self }
    }
}

/// A column-major operand in device memory, used as `op(X)`.
#[derive(Clone, Copy, Debug)]
struct DeviceOperand {
    ptr: CUdeviceptr,
    ld: usize,
    op: Operation,
}

/// A product's inputs on its (lead) device, staged from host memory when needed. A product of a
/// matrix with itself (X·X, Xᵀ·X: purification's repeated squares) stages and reads the matrix once
/// and computes its norms in one pass.
struct StagedInputs {
    a: DeviceInput,
    b: Option<DeviceInput>,
}

impl StagedInputs {
    /// # Safety
    /// As [`gemm`] for `a` and `b`.
    unsafe fn new<T: Element>(
        device: &Arc<GpuDevice>,
        stream: Stream,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
    ) -> Result<Self> {
        let a_in = unsafe { DeviceInput::new(device, stream, a.ptr, a.len, "A") }?;
        let b_in = match a.same_matrix(b) {
            true => None,
            false => Some(unsafe { DeviceInput::new(device, stream, b.ptr, b.len, "B") }?),
        };
        Ok(StagedInputs { a: a_in, b: b_in })
    }

    /// The norm maps of op(A) and op(B), queued on `stream`.
    fn norm_maps<T: Element>(
        &self,
        device: &Arc<GpuDevice>,
        stream: Stream,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        bs: usize,
    ) -> Result<[DeviceNormMap; 2]> {
        let a_in = self.a.ptr();
        match &self.b {
            None => norm_maps::<T, 2>(device, stream, a_in, [a.op, b.op], a.stored_rows, a.stored_cols, a.ld, bs),
            Some(b_in) => Ok([
                norm_map::<T>(device, stream, a_in, a.op, a.stored_rows, a.stored_cols, a.ld, bs)?,
                norm_map::<T>(device, stream, b_in.ptr(), b.op, b.stored_rows, b.stored_cols, b.ld, bs)?,
            ]),
        }
    }

    fn a_operand<T>(&self, a: &RawOperand<T>) -> DeviceOperand {
        DeviceOperand { ptr: self.a.ptr(), ld: a.ld, op: a.op }
    }

    fn b_operand<T>(&self, b: &RawOperand<T>) -> DeviceOperand {
        DeviceOperand { ptr: self.b.as_ref().unwrap_or(&self.a).ptr(), ld: b.ld, op: b.op }
    }
}

/// The multiplication of a product whose operands and norm maps are on `device`: `an` is op(A)'s norm
/// map (pointer, leading dimension: a panel of a larger map may be given by its first row), `bn`
/// op(B)'s (leading dimension kb); C at (`c`, `ldc`). The statistics are the caller's
/// ([`product_stats`], over the whole product).
///
/// # Safety
/// Every pointer must be device memory of `device` holding what the sizes say.
#[allow(clippy::too_many_arguments)]
unsafe fn multiply<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    p: &Product,
    a: DeviceOperand,
    b: DeviceOperand,
    (an, an_ld): (CUdeviceptr, usize),
    bn: CUdeviceptr,
    alpha: T::Compute,
    beta: T::Compute,
    (c_dev, ldc): (CUdeviceptr, usize),
    kernels: KernelSettings,
) -> Result<()> {
    let Product { m, n, k, bs, tau } = *p;
    let (mb, nb, kb) = (block_count(m, bs), block_count(n, bs), block_count(k, bs));
    if m == 0 || n == 0 {
        return Ok(());
    }
    let transposes = (a.op == Operation::T, b.op == Operation::T);
    let tile = TileKernel::of::<T>(runs_3xtf32(kernels.mode, T::VALUE_TYPE, bs, kb), transposes);
    let (m_i, n_i, k_i, bs_i) = (m as i32, n as i32, k as i32, bs as i32);
    let (a_ptr, lda, ta) = (a.ptr, a.ld as i64, (a.op == Operation::T) as i32);
    let (b_ptr, ldb, tb) = (b.ptr, b.ld as i64, (b.op == Operation::T) as i32);
    let ldc = ldc as i64;
    if tile.applies(device, bs, kb) {
        let work = tile_work(device, stream, &tile, (an, an_ld), bn, tau, (m, n, bs, kb))?;
        let f = device.function(tile.module, tile.name)?;
        let shared_bytes = tile.shared_bytes_on(device, kernels.fewest_shared_memory);
        if shared_bytes > 48 * 1024 {
            device.allow_shared_memory(&f, shared_bytes as usize)?;
        }
        let cfg = Launch { grid: (work.tiles as u32, 1, 1), block: (tile.threads, 1, 1), shared_bytes };
        let (order, counts, lists, stride) = (work.order.ptr(), work.counts.ptr(), work.lists.ptr(), kb as i32);
        return unsafe {
            launch(
                &f,
                cfg,
                stream,
                kernel_args![
                    &m_i, &n_i, &k_i, &bs_i, &alpha, &a_ptr, &lda, &ta, &b_ptr, &ldb, &tb, &beta, &c_dev, &ldc, &order,
                    &counts, &lists, &stride
                ],
            )
        };
    }
    // Other block sizes: one 32 × 32 tile of one C block per thread block, deciding its own k from
    // whole norm maps (never a panel: multi-device products use the tile kernels).
    debug_assert_eq!(an_ld, mb);
    let threads = if matches!(T::VALUE_TYPE, ValueType::F16 | ValueType::Bf16) { 128 } else { 256 };
    let tiles_per_block = bs.div_ceil(32);
    let f = device.function(&SPAMM, &format!("spamm_multiply_{}", T::VALUE_TYPE.short_name()))?;
    let grid = ((mb * tiles_per_block) as u32, (nb * tiles_per_block).min(65535) as u32, 1);
    let cfg = Launch { grid, block: (threads, 1, 1), shared_bytes: 0 };
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &m_i, &n_i, &k_i, &bs_i, &alpha, &a_ptr, &lda, &ta, &b_ptr, &ldb, &tb, &beta, &c_dev, &ldc, &an, &bn,
                &tau
            ],
        )
    }
}

/// A tile kernel of `kernels/spamm_*.cu` (contract in `kernels/spamm_tiles.cuh`): one thread block
/// per `tile_m × tile_n` tile of C, walking the tile's work list.
struct TileKernel {
    module: &'static KernelSource,
    name: &'static str,
    tile_m: usize,
    tile_n: usize,
    threads: u32,
    /// Dynamic shared memory per thread block: as much as the kernel can use, and the least it runs
    /// with (the f64 kernel keeps three or two pipeline stages, whichever the device gives).
    shared_bytes: u32,
    fewest_shared_bytes: u32,
    /// The tiles' launch order unless `SPARSEGPU_SPAMM_SCHEDULE` says otherwise, as
    /// `spamm_tile_order`'s `group_cols` (0: heaviest first, G > 0: groups of G tile columns, -S:
    /// squares of S × S tiles heaviest first).
    group_cols: i32,
}

impl TileKernel {
    /// The tile kernel of a product of `T` (`tf32x3`: FP32 in 3xTF32, see [`runs_3xtf32`]) with
    /// op(A), op(B) transposed as `transposes` says.
    fn of<T: Element>(tf32x3: bool, transposes: (bool, bool)) -> TileKernel {
        match T::VALUE_TYPE {
            ValueType::F32 => f32_tile_kernel(tf32x3, transposes),
            ValueType::F64 => TileKernel {
                module: &SPAMM_F64,
                name: "spamm_tiles_f64",
                tile_m: 128,
                tile_n: 128,
                threads: 256,
                // SPAMM_F64_STAGE_BYTES in kernels/spamm_f64.cu: three stages, or two.
                shared_bytes: 3 * 65536,
                fewest_shared_bytes: 2 * 65536,
                // Squares of 4 × 4 tiles, heaviest first: longest job first as for FP32, while the
                // tiles running side by side share rows of A and columns of B (its 64 KiB stages make
                // it the kernel most bound by L2; docs/methods.md, load balance).
                group_cols: -4,
            },
            ValueType::F16 => half_tile_kernel(&SPAMM_F16, "spamm_tiles_f16"),
            ValueType::Bf16 => half_tile_kernel(&SPAMM_BF16, "spamm_tiles_bf16"),
        }
    }

    /// Whether the work lists can describe this product: a tile spans at most 4 × 4 C blocks (block
    /// sizes that are multiples of 32, tiles of at most 128 starting at multiples of 32), whose fragments
    /// each lie inside one C block, and k blocks fit an entry's 16 bits.
    /// A kernel whose shared memory the device cannot give (the f64 kernel's 128 KiB on a GPU of
    /// 99 KiB per block) leaves the product to the per-block kernels.
    fn applies(&self, device: &GpuDevice, bs: usize, kb: usize) -> bool {
        bs.is_multiple_of(32)
            && self.tile_m <= 128
            && self.tile_n <= 128
            && kb < 1 << 16
            && self.fewest_shared_bytes as usize <= device.max_shared_memory_per_block_optin
    }

    /// The dynamic shared memory to launch with on `device` (where [`TileKernel::applies`]): the
    /// fewest bytes the kernel runs with when `fewest`.
    fn shared_bytes_on(&self, device: &GpuDevice, fewest: bool) -> u32 {
        if !fewest && self.shared_bytes as usize <= device.max_shared_memory_per_block_optin {
            self.shared_bytes
        } else {
            self.fewest_shared_bytes
        }
    }
}

/// The 16-bit tile kernel of `kernels/spamm_half.cuh` for one format: 4 warps of 64 × 64; a 4-stage
/// cp.async ring (64 KiB), reused by the epilogue's f32 C tile (SPAMM_H_SHARED_BYTES there). Launched
/// in the natural order: its tiles are short and bound by L2, where tiles running side by side should
/// share rows of A and columns of B (docs/methods.md, load balance).
fn half_tile_kernel(module: &'static KernelSource, name: &'static str) -> TileKernel {
    TileKernel {
        module,
        name,
        tile_m: 128,
        tile_n: 128,
        threads: 128,
        shared_bytes: 67584,
        fewest_shared_bytes: 67584,
        group_cols: 1,
    }
}

/// spammSgemm's tile kernels (`kernels/spamm_f32.cu`): one per math mode and pair of transposes, with
/// the dynamic shared memory each takes (F32_SIMT_SMEM / F32_TC_SMEM there).
fn f32_tile_kernel(tf32x3: bool, transposes: (bool, bool)) -> TileKernel {
    let name = match (tf32x3, transposes) {
        (false, (false, false)) => "spamm_tiles_f32_nn",
        (false, (false, true)) => "spamm_tiles_f32_nt",
        (false, (true, false)) => "spamm_tiles_f32_tn",
        (false, (true, true)) => "spamm_tiles_f32_tt",
        (true, (false, false)) => "spamm_tiles_3xtf32_nn",
        (true, (false, true)) => "spamm_tiles_3xtf32_nt",
        (true, (true, false)) => "spamm_tiles_3xtf32_tn",
        (true, (true, true)) => "spamm_tiles_3xtf32_tt",
    };
    // Exact: two stages of 2 × 32 × 132 floats; 3xTF32: three stages of 2 × 128 × 36 floats.
    let shared_bytes = if tf32x3 { 3 * 2 * 128 * 36 * 4 } else { 2 * 2 * 32 * 132 * 4 };
    TileKernel {
        module: &SPAMM_F32,
        name,
        tile_m: 128,
        tile_n: 128,
        threads: 256,
        shared_bytes,
        fewest_shared_bytes: shared_bytes,
        group_cols: 0,
    }
}

/// The work lists of a tile kernel's product, on the device.
struct TileWork {
    tiles: usize,
    order: DeviceBuffer,
    counts: DeviceBuffer,
    lists: DeviceBuffer,
}

/// The tiles' launch order `SPARSEGPU_SPAMM_SCHEDULE` asks for, as `spamm_tile_order`'s
/// `group_cols`: `heaviest` (0), `natural` (1, column-major), `grouped:G` (G: groups of G tile
/// columns, row by row within a group) or `squares:S` (-S: squares of S × S tiles heaviest first, row
/// by row within a square); None (each kernel's own order) when unset or not one of these. Kept to
/// measure what the ordering buys.
fn schedule_group_cols() -> Option<i32> {
    static GROUP_COLS: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *GROUP_COLS.get_or_init(|| match std::env::var("SPARSEGPU_SPAMM_SCHEDULE").ok()?.as_str() {
        "heaviest" => Some(0),
        "natural" => Some(1),
        v => match v.split_once(':')? {
            ("grouped", g) => g.parse().ok().filter(|&g| g > 0),
            ("squares", side) => side.parse().ok().filter(|&s: &i32| s > 0).map(|s| -s),
            _ => None,
        },
    })
}

/// Builds the per-tile lists of k blocks with their C-block masks (`spamm_tile_lists`), then the
/// launch order of the tiles (`spamm_tile_order`).
fn tile_work(
    device: &Arc<GpuDevice>,
    stream: Stream,
    kernel: &TileKernel,
    (an, an_ld): (CUdeviceptr, usize),
    bn: CUdeviceptr,
    tau: f64,
    (m, n, bs, kb): (usize, usize, usize, usize),
) -> Result<TileWork> {
    let tiles = m.div_ceil(kernel.tile_m) * n.div_ceil(kernel.tile_n);
    let order = DeviceBuffer::alloc(device, tiles * 4, stream, "the SpAMM tile order")?;
    let counts = DeviceBuffer::alloc(device, tiles * 4, stream, "the SpAMM work lists")?;
    let lists = DeviceBuffer::alloc(device, tiles * kb.max(1) * 4, stream, "the SpAMM work lists")?;
    let f = device.function(&SPAMM, "spamm_tile_lists")?;
    let (m_i, n_i, bs_i, mb_i, kb_i) = (m as i32, n as i32, bs as i32, an_ld as i32, kb as i32);
    let (tm, tn) = (kernel.tile_m as i32, kernel.tile_n as i32);
    let (counts_ptr, lists_ptr) = (counts.ptr(), lists.ptr());
    let cfg =
        Launch { grid: (tiles.min(device.multiprocessors * 8) as u32, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![&m_i, &n_i, &bs_i, &mb_i, &kb_i, &tm, &tn, &an, &bn, &tau, &counts_ptr, &lists_ptr],
        )
    }?;
    let group_cols = schedule_group_cols().unwrap_or(kernel.group_cols);
    let (tiles_i, tile_rows) = (tiles as i32, m.div_ceil(kernel.tile_m) as i32);
    let order_ptr = order.ptr();
    let f = device.function(&SPAMM, "spamm_tile_order")?;
    let cfg = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared_bytes: 0 };
    unsafe {
        launch(&f, cfg, stream, kernel_args![&tiles_i, &tile_rows, &kb_i, &group_cols, &counts_ptr, &order_ptr])
    }?;
    Ok(TileWork { tiles, order, counts, lists })
}

/// Words the device copies into pinned host memory behind an event: the host reads them after
/// waiting for that event only, not for the stream.
struct PinnedWords {
    host: *mut u64,
    len: usize,
    /// Recorded after every copy into `host`.
    copied: Event,
}

// SAFETY: the pinned memory and the event belong to the device's context, usable from any thread; the
// handle owning them is used by one thread at a time.
unsafe impl Send for PinnedWords {}

impl PinnedWords {
    fn new(device: &Arc<GpuDevice>, len: usize) -> Result<Self> {
        let copied = Event::new(device)?;
        let host = unsafe { drv::malloc_host(len.max(1) * 8, CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(driver_error("allocating pinned host memory"))? as *mut u64;
        Ok(PinnedWords { host, len, copied })
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Queues on `stream` the copy of `words` words at `from` (device memory of the event's device)
    /// into the first words, after any earlier copy into them (which may have been queued on another
    /// stream), and records the event.
    fn record_from(&self, stream: Stream, from: CUdeviceptr, words: usize) -> Result<()> {
        assert!(words <= self.len, "{words} words into pinned memory of {}", self.len);
        self.copied.wait_on(stream)?;
        unsafe { drv::memcpy_dtoh_async(std::slice::from_raw_parts_mut(self.host, words), from, stream.0) }
            .map_err(driver_error("copying to pinned host memory"))?;
        self.copied.record(stream)
    }

    /// The first `words` words (at most all) as the last copy left them (waits for it).
    fn wait(&self, words: usize) -> Result<&[u64]> {
        self.copied.synchronize()?;
        // SAFETY: the copy into the memory has completed, and nothing writes it until the next
        // `record_from`, which takes `&self` only after this borrow ends.
        Ok(unsafe { std::slice::from_raw_parts(self.host, words.min(self.len)) })
    }
}

impl Drop for PinnedWords {
    fn drop(&mut self) {
        // A copy may still be in flight into the pinned memory: wait before freeing it (the event
        // goes after this, with the struct's fields).
        let _ = self.copied.synchronize();
        if self.copied.device().bind().is_ok() {
            unsafe { drv::free_host(self.host as *mut _) }.ok();
        }
    }
}

/// Where a product's statistics land without stopping the caller's stream: two pinned words the
/// device copies a product's statistics totals into, performed products and the bits of the f64 sum
/// of squared skipped sums. A handle keeps one per device, with a stream of that device on which
/// [`gemm`] computes the statistics beside the multiplication (nothing in the multiplication reads
/// them).
pub struct StatsSlot {
    words: PinnedWords,
    side: Arc<CudaStream>,
}

impl StatsSlot {
    pub fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        Ok(StatsSlot { words: PinnedWords::new(device, 2)?, side: device.new_stream()? })
    }

    pub fn device(&self) -> &Arc<GpuDevice> {
        self.words.copied.device()
    }

    /// The totals of the last product recorded into the slot (waits for its copy).
    pub fn wait(&self) -> Result<(u64, f64)> {
        let words = self.words.wait(2)?;
        Ok((words[0], f64::from_bits(words[1])))
    }

    /// The stream the statistics are computed on.
    fn side_stream(&self) -> Stream {
        Stream(self.side.cu_stream())
    }

    /// Queues on `stream` the copy of 16 bytes of device totals into the slot.
    fn record(&self, stream: Stream, totals: &DeviceBuffer) -> Result<()> {
        self.record_from(stream, totals.ptr())
    }

    /// [`StatsSlot::record`] from 16 bytes at `totals` on the slot's device.
    fn record_from(&self, stream: Stream, totals: CUdeviceptr) -> Result<()> {
        self.words.record_from(stream, totals, 2)
    }
}

/// The statistics totals of a product from its whole norm maps (`an` mb × kb, `bn` kb × nb), queued
/// on `stream`: 16 bytes, performed products and the bits of the sum of squared skipped sums, summed
/// in the CPU's order (`spamm_block_stats`, `spamm_stats_sum`; [`crate::spamm::BlockStats::totals`])
/// so that the reported bound is the CPU's to the bit. With `row_work` (mb zeroed u64), also each
/// block row's performed products.
fn product_stats(
    device: &Arc<GpuDevice>,
    stream: Stream,
    (an, bn): (CUdeviceptr, CUdeviceptr),
    tau: f64,
    (mb, nb, kb): (usize, usize, usize),
    row_work: Option<CUdeviceptr>,
) -> Result<DeviceBuffer> {
    let totals = DeviceBuffer::zeroed(device, 16, stream, "SpAMM statistics")?;
    if mb * nb > 0 {
        let column_sums = DeviceBuffer::alloc(device, nb * 8, stream, "SpAMM statistics")?;
        let f = device.function(&SPAMM, "spamm_block_stats")?;
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (sums, out, rows) = (column_sums.ptr(), totals.ptr(), row_work.unwrap_or(0));
        let cfg = Launch { grid: (nb.min(65535) as u32, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
        unsafe { launch(&f, cfg, stream, kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &tau, &sums, &out, &rows]) }?;
        let f = device.function(&SPAMM, "spamm_stats_sum")?;
        let cfg = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared_bytes: 0 };
        unsafe { launch(&f, cfg, stream, kernel_args![&nb_i, &sums, &out]) }?;
    }
    Ok(totals)
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
/// queued per iteration. Before a valid-ratio search the first iteration can ride along with the
/// range ([`DeviceTauEvaluator::anticipating_ratio_search`]): one wait for both instead of two.
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
    /// Whether [`CandidateEvaluator::range`] also counts the valid-ratio search's first candidates
    /// ([`DeviceTauEvaluator::anticipating_ratio_search`]); cleared once it has.
    anticipate: bool,
    /// Those candidates' evaluations, until the search asks for them.
    anticipated: Option<Vec<Evaluation>>,
    /// How many times the search's candidates were the anticipated ones.
    anticipation_hits: usize,
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
        let evaluator = DeviceTauEvaluator {
            device,
            stream,
            a_norms,
            b_norms,
            workspace,
            pitches,
            parity: 0,
            column_sums: None,
            anticipate: false,
            anticipated: None,
            anticipation_hits: 0,
        };
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

    /// Has [`CandidateEvaluator::range`] also count the valid-ratio search's first candidates,
    /// derived from the range on the device exactly as [`tune::tune_for_ratio`] derives them on the
    /// host, and bring the range and the counts back in one copy: the search's first iteration then
    /// costs no round trip of its own. Only worth it before a valid-ratio search (the error-bound
    /// search starts from other candidates, and would pay for a count it never uses).
    pub fn anticipating_ratio_search(mut self) -> Self {
        self.anticipate = true;
        self
    }

    /// How many times an evaluation was served by the anticipated first iteration.
    pub fn anticipation_hits(&self) -> usize {
        self.anticipation_hits
    }

    /// Queues one iteration's kernels (for [`CandidateEvaluator::evaluate`], and for timing the
    /// device's share of an iteration); returns the accumulator slot its results go to.
    pub fn queue(&mut self, taus: &[f64], squares: bool) -> Result<usize> {
        let limit = if squares { tune::BOUND_CANDIDATES } else { tune::RATIO_CANDIDATES };
        if taus.is_empty() || taus.len() > limit {
            return Err(Error::internal(format!("the tau search asked for {} candidates", taus.len())));
        }
        let mut candidates =
            TuneCandidates { count: taus.len() as i32, tau: [taus[taus.len() - 1]; tune::RATIO_CANDIDATES] };
        candidates.tau[..taus.len()].copy_from_slice(taus);
        let parity = self.queue_count(&candidates, 0)?;
        if squares {
            let (mb, nb, kb) = self.dims();
            let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
            let (device, stream, out) = (self.device, self.stream, self.accumulators(parity));
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

    /// Queues the counting kernel over `candidates`, or over the first ratio candidates derived from
    /// the summary at `derive` (non-zero); returns the accumulator slot its results go to.
    fn queue_count(&mut self, candidates: &TuneCandidates, derive: CUdeviceptr) -> Result<usize> {
        let (mb, nb, kb) = self.dims();
        if mb * nb * kb == 0 {
            return Err(Error::internal("the tau search evaluated candidates of an empty product"));
        }
        let (device, stream) = (self.device, self.stream);
        device.bind()?;
        let parity = self.parity;
        self.parity ^= 1;
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (sa, sb) = self.sorted_ptrs();
        let (pa, pb) = (self.pitches.0 as i64, self.pitches.1 as i64);
        let (out, next) = (self.accumulators(parity), self.accumulators(parity ^ 1));
        let staged = (mb + nb <= STAGE_IN_SHARED_MEMORY) as i32;
        let count = device.function(&SPAMM, "spamm_tune_count")?;
        let cfg = Launch {
            grid: (kb.min(device.multiprocessors * 2) as u32, 1, 1),
            block: (1024, 1, 1),
            // A's column, then B's row between the sentinels 0 and +inf.
            shared_bytes: if staged == 1 { ((mb + nb + 2) * 8) as u32 } else { 0 },
        };
        unsafe {
            launch(
                &count,
                cfg,
                stream,
                kernel_args![&mb_i, &nb_i, &kb_i, &sa, &pa, &sb, &pb, &staged, candidates, &derive, &out, &next],
            )
        }?;
        Ok(parity)
    }
}

/// The evaluations of `taus` from one iteration's accumulators as the counting kernel leaves them
/// (`[performed | largest skipped | ~smallest performed | skipped squares]`, slots of
/// [`tune::RATIO_CANDIDATES`]).
fn evaluations_from(taus: &[f64], results: &[u64], squares: bool) -> Vec<Evaluation> {
    let slots = tune::RATIO_CANDIDATES;
    taus.iter()
        .enumerate()
        .map(|(c, &tau)| Evaluation {
            tau,
            performed: results[c],
            largest_skipped: f64::from_bits(results[slots + c]),
            smallest_performed: f64::from_bits(!results[2 * slots + c]),
            skipped_squares: if squares { f64::from_bits(results[3 * slots + c]) } else { f64::NAN },
        })
        .collect()
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
    fn prepare_ratio_search(&mut self) {
        self.anticipate = true;
    }

    fn range(&mut self) -> Result<ProductRange> {
        let dims = self.dims();
        if dims.0 * dims.1 * dims.2 == 0 {
            return Ok(ProductRange { dims, min: 0.0, max: 0.0, positive_floor: 0.0 });
        }
        // The summary, followed by the first slot of accumulators where the first iteration was
        // anticipated (its counts, and in the squares' slot the candidates it derived).
        let anticipate = std::mem::take(&mut self.anticipate);
        if anticipate {
            let empty = TuneCandidates { count: 0, tau: [0.0; tune::RATIO_CANDIDATES] };
            let parity = self.queue_count(&empty, self.summary_ptr())?;
            debug_assert_eq!(parity, 0, "the anticipated iteration is the first");
        }
        let mut copied = vec![0u64; if anticipate { 4 + ACCUMULATOR_WORDS } else { 4 }];
        self.device.bind()?;
        unsafe { drv::memcpy_dtoh_async(&mut copied[..], self.summary_ptr(), self.stream.0) }
            .map_err(driver_error("copying to the host"))?;
        self.device.synchronize(self.stream)?;
        let summary = &copied[..4];
        if anticipate {
            let results = &copied[4..];
            let derived = &results[3 * tune::RATIO_CANDIDATES..];
            let taus: Vec<f64> =
                derived.iter().take_while(|&&bits| bits != 0).map(|&bits| f64::from_bits(bits)).collect();
            self.anticipated = Some(evaluations_from(&taus, results, false));
        }
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
        if let Some(anticipated) = self.anticipated.take() {
            let same = |e: &Evaluation, &tau: &f64| e.tau.to_bits() == tau.to_bits();
            if !squares && anticipated.len() == taus.len() && anticipated.iter().zip(taus).all(|(e, t)| same(e, t)) {
                self.anticipation_hits += 1;
                return Ok(anticipated);
            }
        }
        let parity = self.queue(taus, squares)?;
        let slots = tune::RATIO_CANDIDATES;
        let mut results = vec![0u64; if squares { 4 * slots } else { 3 * slots }];
        unsafe { drv::memcpy_dtoh_async(&mut results[..], self.accumulators(parity), self.stream.0) }
            .map_err(driver_error("copying to the host"))?;
        self.device.synchronize(self.stream)?;
        Ok(evaluations_from(taus, &results, squares))
    }
}

/// What a handle's executor keeps between SpAMM products: where the statistics land (one slot, for
/// the lead device), and the other devices of multi-device products with the split of the work.
#[derive(Default)]
pub struct SpammState {
    stats_slot: Option<StatsSlot>,
    shared: Option<SharedDevices>,
}

impl CudaExecutor {
    /// The devices besides the lead that share a product: the placement's other devices, or (test
    /// hook [`crate::executor::TestHooks::spamm_shares_on_one_device`]) the lead itself again.
    fn spamm_share_gpus(&self, lead: &Arc<GpuDevice>) -> Result<Vec<Arc<GpuDevice>>> {
        let gpus = self.devices()?;
        Ok(if gpus.len() > 1 {
            gpus[1..].to_vec()
        } else {
            vec![lead.clone(); self.test_hooks.spamm_shares_on_one_device.saturating_sub(1)]
        })
    }
}

impl<T: Element> SpammBackend<T> for CudaExecutor {
    unsafe fn gemm(&mut self, product: &contract::Product<'_, T>) -> Result<Outcome> {
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        let share_gpus = self.spamm_share_gpus(&gpu)?;
        let kernels = KernelSettings {
            mode: product.math_mode,
            fewest_shared_memory: self.test_hooks.spamm_fewest_shared_memory,
        };
        let bs = product.block_size;
        let state = &mut self.spamm;
        if state.stats_slot.as_ref().is_none_or(|slot| !Arc::ptr_eq(slot.device(), &gpu)) {
            state.stats_slot = Some(StatsSlot::new(&gpu)?);
        }
        let split = !share_gpus.is_empty()
            && splits::<T>(
                &std::iter::once(&gpu).chain(&share_gpus).collect::<Vec<_>>(),
                bs,
                product.a.op_shape().1,
                kernels.mode,
            );
        if split && state.shared.as_ref().is_none_or(|shared| !shared.serves(&gpu, &share_gpus)) {
            state.shared = None;
            state.shared = Some(SharedDevices::new(&gpu, &share_gpus)?);
        }
        let slot = state.stats_slot.as_ref().expect("just made");
        let shared = state.shared.as_mut().filter(|_| split);
        let contract::Product { a, b, alpha, beta, c, c_len, ldc, tau, .. } = *product;
        let (dims, tau) =
            unsafe { gemm(&gpu, stream, slot, shared, a, b, alpha, beta, c, c_len, ldc, tau, bs, kernels) }?;
        Ok(Outcome { dims, tau, totals: Totals::Pending })
    }

    unsafe fn search_tau(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        block_size: usize,
        search: &mut dyn FnMut(&mut dyn CandidateEvaluator) -> Result<()>,
    ) -> Result<()> {
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        let [a_norms, b_norms] = unsafe { operand_norm_maps(&gpu, stream, a, b, block_size) }?;
        search(&mut DeviceTauEvaluator::new(&gpu, stream, &a_norms, &b_norms)?)
    }
}

impl SpammStatistics for CudaExecutor {
    fn wait_totals(&mut self) -> Result<(u64, f64)> {
        match &self.spamm.stats_slot {
            Some(slot) => slot.wait(),
            None => Err(Error::internal("no SpAMM product left statistics on this executor")),
        }
    }
}

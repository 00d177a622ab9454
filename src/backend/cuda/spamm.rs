//! SpAMM on the GPU: launchers of `kernels/spamm.cu` and the call sequence of one product (get-norm
//! kernel on op(A) and op(B), multiplication kernel, per-C-block statistics) and the τ searches'
//! candidate evaluations.

use super::kernels::{KernelSource, SPAMM, SPAMM_F16, SPAMM_F32, SPAMM_F64};
use super::memory::{DeviceBuffer, DeviceInput, DeviceOutput};
use super::timeline::Timeline;
use super::{Event, GpuDevice, Launch, Stream, copy_matrix_async, driver_error, launch};
use crate::error::{Error, Result};
use crate::kernel_args;
use crate::scalar::{ComputeScalar, Element};
use crate::spamm::tune::{self, CandidateEvaluator, Evaluation, ProductRange};
use crate::spamm::{MathMode, NormMap, block_count, runs_3xtf32};
use crate::types::{Operation, ValueType};
use cudarc::driver::CudaStream;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{CU_MEMHOSTALLOC_PORTABLE, CUdeviceptr};
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

    /// Whether `other` is the same stored matrix (same memory and shape; `op` may differ).
    pub fn same_matrix(&self, other: &RawOperand<T>) -> bool {
        std::ptr::eq(self.ptr, other.ptr)
            && (self.len, self.stored_rows, self.stored_cols, self.ld)
                == (other.len, other.stored_rows, other.stored_cols, other.ld)
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
    let [map] = norm_maps::<T, 1>(device, stream, x, [op], stored_rows, stored_cols, ld, bs)?;
    Ok(map)
}

/// [`norm_map`] for several `op`s of one stored matrix, reading the matrix once (the per-row sums of
/// squares are shared; only the cheap block sums run per `op`).
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
        for (op, map) in ops.iter().zip(&maps) {
            let transpose = (*op == Operation::T) as i32;
            let out = map.norms.ptr();
            unsafe {
                launch(
                    &blocks_fn,
                    flat_launch(device, blocks),
                    stream,
                    kernel_args![&rows, &cols, &bs_i, &sums, &transpose, &out],
                )
            }?;
        }
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

/// `C ← α·Σ_(valid k) op(A)_ik·op(B)_kj + β·C` on the handle's device (the lead), with C
/// column-major `m × n` (`ldc`) at `c_ptr` (host or device, `c_len` elements), shared with the
/// devices of `shared` when given (cuSpAMM section 3.4; the caller checked [`splits`]).
///
/// The statistics totals of the whole product are queued into `stats` (nothing waits for the stream
/// unless C or an input is in host memory, or the product is shared). `mode` selects the FP32 kernel
/// ([`runs_3xtf32`]). Returns (mb, nb, kb).
///
/// A shared product cuts C's rows at block-row boundaries by valid block products (counted on the
/// lead from the norm maps, with the statistics: the only wait on the caller's stream), each device
/// getting its fraction of them ([`SharedDevices`]: equal at first, then adapted so that the devices
/// finish together). The lead computes the first rows in place on the caller's stream, queued first;
/// each other device computes its rows in its workspace: op(A)'s rows and the norm maps' parts come
/// from the lead, every share's before any of op(B) ([`send_rows`]); then op(B) comes chunk by
/// chunk along a chain ([`run_share`]: the lead sends it to the first share, each share forwards
/// every chunk it has received to the next), so each device sends op(B) at most once whatever the
/// number of devices. The caller's stream waits for every share. Host inputs are staged on the lead
/// first.
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
    tau: f64,
    bs: usize,
    mode: MathMode,
) -> Result<(usize, usize, usize)> {
    let (m, k) = a.op_shape();
    let n = b.op_shape().1;
    let size = std::mem::size_of::<T>();
    let devices = shared.as_ref().map_or(1, |s| s.shares.len() + 1);
    let mut timeline = Timeline::start(|| format!("SpAMM {m}x{n}x{k}, tau {tau:e}, {devices} device(s)"));
    timeline.stamp(lead, stream, || "called".into())?;
    let inputs = unsafe { StagedInputs::new(lead, stream, a, b, bs) }?;
    timeline.stamp(lead, stream, || "norm maps".into())?;
    let (mb, nb, kb) = inputs.dims();
    let reads_c = reads_c(beta, m, n, ldc);
    let c = unsafe { DeviceOutput::new(lead, stream, c_ptr, c_len, "C", reads_c) }?;
    let (a_dev, b_dev) = (inputs.a_operand(a), inputs.b_operand(b));
    let (an, bn) = (inputs.a_norms.norms.ptr(), inputs.b_norms.norms.ptr());
    let (bounds, work) = match shared.as_deref_mut() {
        None => {
            stats.record(stream, &product_stats(lead, stream, (an, bn), tau, (mb, nb, kb), None)?)?;
            (vec![0, mb], Vec::new())
        }
        Some(shared) => {
            let row_work = DeviceBuffer::zeroed(lead, mb * 8, stream, "SpAMM row work")?;
            stats.record(stream, &product_stats(lead, stream, (an, bn), tau, (mb, nb, kb), Some(row_work.ptr()))?)?;
            timeline.stamp(lead, stream, || "statistics and work per row".into())?;
            let mut work = vec![0u64; mb];
            row_work.copy_to_host(&mut work)?;
            // The caller's stream has passed the last product: its timings can be read.
            shared.rebalance()?;
            let bounds = work_bounds(&work, &shared.fractions);
            let fractions = &shared.fractions;
            timeline.stamp(lead, stream, || format!("split at block rows {bounds:?}, fractions {fractions:.3?}"))?;
            (bounds, work)
        }
    };
    let product = |rows: &std::ops::Range<usize>| Product { m: rows.len(), n, k, bs, tau };
    let rows = |share: usize| (bounds[share] * bs).min(m)..(bounds[share + 1] * bs).min(m);
    let ready = match shared.as_deref_mut() {
        None => None,
        Some(shared) => {
            // The shares overwrite their workspaces, which the last product's next share may still be
            // reading (op(B)'s chain) if the caller's stream has changed since.
            for side in &shared.shares {
                side.done.wait_on(stream)?;
            }
            shared.split_at.record(stream)?;
            let ready = Event::new(lead)?;
            ready.record(stream)?;
            Some(ready)
        }
    };
    // The lead's share, the first rows, in place: queued before the shares' copies so that the lead
    // starts at once (queueing a share takes the host a while).
    let lead_rows = rows(0);
    let a_lead = match a_dev.op {
        Operation::N => DeviceOperand { ptr: a_dev.ptr + (lead_rows.start * size) as u64, ..a_dev },
        Operation::T => DeviceOperand { ptr: a_dev.ptr + (lead_rows.start * a_dev.ld * size) as u64, ..a_dev },
    };
    timeline.stamp(lead, stream, || "lead's rows start".into())?;
    unsafe {
        multiply::<T>(
            lead,
            stream,
            &product(&lead_rows),
            a_lead,
            b_dev,
            (an + (bounds[0] * 8) as u64, mb),
            bn,
            alpha,
            beta,
            (c.ptr() + (lead_rows.start * size) as u64, ldc),
            mode,
        )
    }?;
    timeline.stamp(lead, stream, || "lead's rows computed".into())?;
    if let (Some(shared), Some(ready)) = (shared, ready) {
        shared.finished[0].record(stream)?;
        let share_rows = |share: usize| SharedRows {
            index: share,
            rows: rows(share),
            block_rows: bounds[share]..bounds[share + 1],
            mb,
            nb,
            kb,
            reads_c,
        };
        let mut copies = Vec::with_capacity(shared.shares.len());
        for (share, side) in shared.shares.iter_mut().enumerate().map(|(i, side)| (i + 1, side)) {
            copies.push(unsafe {
                send_rows::<T>(
                    lead,
                    side,
                    &mut timeline,
                    &ready,
                    &share_rows(share),
                    &product(&rows(share)),
                    (a_dev, b_dev.op, b.stored_rows, b.stored_cols),
                    (an, bn),
                )
            }?);
        }
        let mut source = ChunkSource { device: lead.clone(), operand: b_dev, arrived: ChunkEvents::All(ready) };
        for (share, (side, copies)) in shared.shares.iter().zip(&copies).enumerate().map(|(i, pair)| (i + 1, pair)) {
            let Some(copies) = copies else { continue };
            source = unsafe {
                run_share::<T>(
                    lead,
                    side,
                    &mut timeline,
                    source,
                    copies,
                    &share_rows(share),
                    &product(&rows(share)),
                    alpha,
                    beta,
                    (c.ptr(), ldc),
                    mode,
                )
            }?;
        }
        // The caller's stream goes on (and this call's temporaries on the lead are freed) once every
        // share is done.
        for side in &shared.shares {
            side.done.wait_on(stream)?;
        }
        shared.observe_finish(&bounds, &work)?;
        timeline.stamp(lead, stream, || "every share done".into())?;
    }
    c.finish()?;
    timeline.print()?;
    Ok((mb, nb, kb))
}

/// What a handle keeps on a device that computes a share of multi-device products: its streams, the
/// event that marks the share done, and its workspace.
struct DeviceShare {
    gpu: Arc<GpuDevice>,
    /// Multiplications, panel p on stream p % PANEL_STREAMS; the first also orders the workspace and
    /// carries `done`.
    compute: Vec<Arc<CudaStream>>,
    /// Operands arriving from the lead device or the previous share.
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

    /// A workspace of at least `bytes`, free once `stream` reaches the point where this is called
    /// (the last product's work on it is done: `done` is recorded after everything of a share).
    fn workspace(&mut self, bytes: usize, stream: Stream) -> Result<CUdeviceptr> {
        if self.workspace.as_ref().is_none_or(|w| w.bytes() < bytes) {
            // The old one may still be in use by the last product: freed after it (cuMemFree waits).
            self.done.synchronize()?;
            self.workspace = None;
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
/// last split. The split changes which device computes a row, not the row's arithmetic.
pub struct SharedDevices {
    lead: Arc<GpuDevice>,
    shares: Vec<DeviceShare>,
    /// Fraction of the valid work per device, the lead's first; they sum to 1.
    fractions: Vec<f64>,
    /// Recorded on the caller's stream once a product's split is known.
    split_at: Event,
    /// Per device, recorded on the lead once the device has finished its part of the product: the
    /// lead's on the caller's stream, each share's on its observer stream.
    finished: Vec<Event>,
    /// Streams of the lead that wait for one share each and record its `finished` event.
    observers: Vec<Arc<CudaStream>>,
    /// The valid work each device was given by the last product, until its timings have been read.
    unread: Option<Vec<u64>>,
}

impl SharedDevices {
    pub fn new(lead: &Arc<GpuDevice>, share_gpus: &[Arc<GpuDevice>]) -> Result<Self> {
        let devices = share_gpus.len() + 1;
        Ok(SharedDevices {
            lead: lead.clone(),
            shares: share_gpus.iter().map(DeviceShare::new).collect::<Result<_>>()?,
            fractions: vec![1.0 / devices as f64; devices],
            split_at: Event::timed(lead)?,
            finished: (0..devices).map(|_| Event::timed(lead)).collect::<Result<_>>()?,
            observers: share_gpus.iter().map(|_| lead.new_stream()).collect::<Result<_>>()?,
            unread: None,
        })
    }

    /// Whether these are `lead` and then `share_gpus`.
    pub fn serves(&self, lead: &Arc<GpuDevice>, share_gpus: &[Arc<GpuDevice>]) -> bool {
        Arc::ptr_eq(&self.lead, lead)
            && self.shares.len() == share_gpus.len()
            && self.shares.iter().zip(share_gpus).all(|(share, gpu)| Arc::ptr_eq(&share.gpu, gpu))
    }

    /// After a product has been queued: each share's observer records its `finished` once the share is
    /// done, and the work each device got is kept for [`SharedDevices::rebalance`].
    fn observe_finish(&mut self, bounds: &[usize], work: &[u64]) -> Result<()> {
        self.lead.bind()?;
        for ((side, observer), finished) in self.shares.iter().zip(&self.observers).zip(&self.finished[1..]) {
            let observer = Stream(observer.cu_stream());
            side.done.wait_on(observer)?;
            finished.record(observer)?;
        }
        self.unread = Some(bounds.windows(2).map(|range| work[range[0]..range[1]].iter().sum()).collect());
        Ok(())
    }

    /// Adapts the fractions to the last product's timings, once that product is done: each device's
    /// new fraction is proportional to the work it got over the time it took from the split to its
    /// finish (its effective rate, start latency included), averaged with its old fraction to damp
    /// noise. A product in which some device got no work, or finished at once, changes nothing.
    fn rebalance(&mut self) -> Result<()> {
        let Some(work) = self.unread.take() else { return Ok(()) };
        let mut rates = Vec::with_capacity(work.len());
        for (finished, &w) in self.finished.iter().zip(&work) {
            finished.synchronize()?;
            let ms = self.split_at.elapsed_ms(finished)? as f64;
            if w == 0 || ms <= 0.0 {
                return Ok(());
            }
            rates.push(w as f64 / ms);
        }
        let total: f64 = rates.iter().sum();
        for (fraction, rate) in self.fractions.iter_mut().zip(&rates) {
            *fraction = 0.5 * *fraction + 0.5 * rate / total;
        }
        Ok(())
    }
}

/// Test hook: a one-device product is split into this many row shares computed like other devices'
/// shares (own stream, operands copied), so a one-GPU machine exercises the multi-device path.
static SPLIT_FOR_TESTING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

pub fn split_for_testing(shares: usize) {
    SPLIT_FOR_TESTING.store(shares.max(1), std::sync::atomic::Ordering::Relaxed);
}

pub fn shares_for_testing() -> usize {
    SPLIT_FOR_TESTING.load(std::sync::atomic::Ordering::Relaxed)
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

/// The rows of C a device's share computes, with the block counts of the whole product.
struct SharedRows {
    /// The share's place in the chain (the lead's own rows are share 0).
    index: usize,
    rows: std::ops::Range<usize>,
    block_rows: std::ops::Range<usize>,
    mb: usize,
    nb: usize,
    kb: usize,
    reads_c: bool,
}

/// When the chunks of a [`ChunkSource`] can be read.
enum ChunkEvents {
    /// Every chunk, once this event has completed (the lead's op(B)).
    All(Event),
    /// Chunk c once event c has completed (a share's copy, still arriving).
    Each(Vec<Event>),
}

/// Where a share copies op(B) from: the lead's op(B) or the previous share's copy of it.
struct ChunkSource {
    device: Arc<GpuDevice>,
    operand: DeviceOperand,
    arrived: ChunkEvents,
}

impl ChunkSource {
    fn arrived(&self, chunk: usize) -> &Event {
        match &self.arrived {
            ChunkEvents::All(event) => event,
            ChunkEvents::Each(events) => &events[chunk],
        }
    }
}

/// The element offset of op(B)'s column `col` in column-major storage of B with leading dimension
/// `ld`: a stored column (op N) or a stored row (op T).
fn op_column_offset(op: Operation, col: usize, ld: usize) -> usize {
    match op {
        Operation::N => col * ld,
        Operation::T => col,
    }
}

/// Where a share's copies of its operands, norm parts and rows of C live in its device's workspace.
struct ShareCopies {
    /// op(A)'s rows, compact.
    a: DeviceOperand,
    /// op(B), stored as the lead's is (leading dimension B's stored rows), and B's stored columns.
    b: DeviceOperand,
    b_cols: usize,
    an: CUdeviceptr,
    bn: CUdeviceptr,
    c: CUdeviceptr,
}

/// The first part of one other device's share of a shared [`gemm`] (`p` is the share's product: its
/// rows of C, all of n): its workspace, and op(A)'s rows and the norm maps' parts copied from the lead
/// on its copy-in stream once `ready`. [`gemm`] queues this for every share before any chunk of op(B)
/// ([`run_share`]): the lead's outgoing copies are served in the order queued, and a share whose
/// rows of op(A) came after the first share's op(B) would idle until all of op(B) had left the lead.
/// `None` for a share without rows.
///
/// # Safety
/// As [`gemm`]; the lead's buffers stay alive until the caller's stream has waited.
#[allow(clippy::too_many_arguments)]
unsafe fn send_rows<T: Element>(
    lead: &Arc<GpuDevice>,
    side: &mut DeviceShare,
    timeline: &mut Timeline,
    ready: &Event,
    share: &SharedRows,
    p: &Product,
    (a_dev, b_op, b_rows, b_cols): (DeviceOperand, Operation, usize, usize),
    (an, bn): (CUdeviceptr, CUdeviceptr),
) -> Result<Option<ShareCopies>> {
    let size = std::mem::size_of::<T>();
    let gpu = &side.gpu.clone();
    let (rows, block_rows) = (share.rows.clone(), share.block_rows.clone());
    let (mb, nb, kb) = (share.mb, share.nb, share.kb);
    let (n, k) = (p.n, p.k);
    if rows.is_empty() {
        return Ok(None);
    }
    gpu.enable_peer_access(lead)?;
    lead.enable_peer_access(gpu)?;
    gpu.bind()?;
    let (panel_streams, copy_in, copy_out) = side.streams();
    let compute = panel_streams[0];
    let panel_rows = rows.len();
    // op(A)'s rows: stored rows of A (op N) or stored columns (op T), into a compact matrix.
    let (a_src, a_width, a_height, a_ld) = match a_dev.op {
        Operation::N => (a_dev.ptr + (rows.start * size) as u64, panel_rows, k, panel_rows),
        Operation::T => (a_dev.ptr + (rows.start * a_dev.ld * size) as u64, k, panel_rows, k),
    };
    // The device's copies, in its workspace: op(A)'s rows, op(B) (stored as B is, leading dimension
    // b_rows), the norm parts, C's rows (each part 256-byte aligned).
    let sizes = [
        a_width * a_height * size,
        b_rows * b_cols * size,
        block_rows.len() * kb * 8,
        kb * nb * 8,
        panel_rows * n * size,
    ];
    let mut offsets = [0usize; 5];
    let mut end = 0;
    for (offset, bytes) in offsets.iter_mut().zip(sizes) {
        *offset = end;
        end += bytes.div_ceil(256) * 256;
    }
    let base = side.workspace(end, compute)?;
    let [a_side, b_side, an_side, bn_side, c_side] = offsets.map(|offset| base + offset as u64);
    let started = Event::new(gpu)?;
    started.record(compute)?;
    for other in panel_streams[1..].iter().chain([&copy_in, &copy_out]) {
        started.wait_on(*other)?;
    }
    let s = share.index;
    timeline.stamp(gpu, compute, || format!("share {s}: rows {rows:?} queued"))?;
    ready.wait_on(copy_in)?;
    unsafe {
        copy_matrix_async(
            (a_side, a_width * size, gpu),
            (a_src, a_dev.ld * size, lead),
            a_width * size,
            a_height,
            copy_in,
        )?;
        copy_matrix_async(
            (an_side, block_rows.len() * 8, gpu),
            (an + (block_rows.start * 8) as u64, mb * 8, lead),
            block_rows.len() * 8,
            kb,
            copy_in,
        )?;
        copy_matrix_async((bn_side, kb * 8, gpu), (bn, kb * 8, lead), kb * 8, nb, copy_in)?;
    }
    timeline.stamp(gpu, copy_in, || format!("share {s}: op(A)'s rows and norms in"))?;
    lead.bind()?;
    Ok(Some(ShareCopies {
        a: DeviceOperand { ptr: a_side, ld: a_ld, op: a_dev.op },
        b: DeviceOperand { ptr: b_side, ld: b_rows, op: b_op },
        b_cols,
        an: an_side,
        bn: bn_side,
        c: c_side,
    }))
}

/// The rest of one other device's share of a shared [`gemm`], after [`send_rows`] gave it `copies`:
/// its copy-in stream receives op(B) chunk by chunk from `source` (and C's rows panel by panel when
/// read); its compute streams, in turn, multiply each panel once the panel's chunks have arrived; its
/// copy-out stream returns each panel of C once computed; `done` is recorded after all of it. Returns
/// where the next share takes op(B) from: this share's copy.
///
/// # Safety
/// As [`gemm`]; the lead's buffers stay alive until the caller's stream has waited.
#[allow(clippy::too_many_arguments)]
unsafe fn run_share<T: Element>(
    lead: &Arc<GpuDevice>,
    side: &DeviceShare,
    timeline: &mut Timeline,
    source: ChunkSource,
    copies: &ShareCopies,
    share: &SharedRows,
    p: &Product,
    alpha: T::Compute,
    beta: T::Compute,
    (c_lead, ldc): (CUdeviceptr, usize),
    mode: MathMode,
) -> Result<ChunkSource> {
    let size = std::mem::size_of::<T>();
    let gpu = &side.gpu;
    let (rows, block_rows) = (share.rows.clone(), share.block_rows.clone());
    let (nb, kb) = (share.nb, share.kb);
    let (n, bs) = (p.n, p.bs);
    let (panel_streams, copy_in, copy_out) = side.streams();
    let compute = panel_streams[0];
    gpu.enable_peer_access(&source.device)?;
    source.device.enable_peer_access(gpu)?;
    gpu.bind()?;
    let panel_rows = rows.len();
    let (b_copy, an_side, bn_side, c_side) = (copies.b, copies.an, copies.bn, copies.c);
    let (b_side, b_rows, b_cols) = (b_copy.ptr, b_copy.ld, copies.b_cols);
    let s = share.index;
    let panel_blocks = nb.div_ceil(SHARE_PANELS).max(1);
    let chunk_blocks = panel_blocks.div_ceil(CHUNKS_PER_PANEL);
    // Per chunk of op(B): arrived here (what the next share waits for). Per panel: computed.
    let mut arrived = Vec::new();
    let mut computed = Vec::new();
    for first_block in (0..nb).step_by(panel_blocks) {
        let blocks = first_block..(first_block + panel_blocks).min(nb);
        let cols = blocks.start * bs..(blocks.end * bs).min(n);
        for chunk_start in blocks.clone().step_by(chunk_blocks) {
            let chunk_cols = chunk_start * bs..((chunk_start + chunk_blocks).min(blocks.end) * bs).min(n);
            source.arrived(arrived.len()).wait_on(copy_in)?;
            // op(B)'s columns: stored columns of B (op N) or stored rows (op T).
            let (width, height) = match b_copy.op {
                Operation::N => (b_rows, chunk_cols.len()),
                Operation::T => (chunk_cols.len(), b_cols),
            };
            let from = source.operand;
            unsafe {
                copy_matrix_async(
                    (
                        b_side + (op_column_offset(b_copy.op, chunk_cols.start, b_rows) * size) as u64,
                        b_rows * size,
                        gpu,
                    ),
                    (
                        from.ptr + (op_column_offset(from.op, chunk_cols.start, from.ld) * size) as u64,
                        from.ld * size,
                        &source.device,
                    ),
                    width * size,
                    height,
                    copy_in,
                )?;
            }
            let event = Event::new(gpu)?;
            event.record(copy_in)?;
            arrived.push(event);
        }
        let c_offset = (rows.start * size + cols.start * ldc * size) as u64;
        let c_panel = c_side + (cols.start * panel_rows * size) as u64;
        if share.reads_c {
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
        let panel = computed.len();
        let panel_stream = panel_streams[panel % PANEL_STREAMS];
        timeline.stamp(gpu, copy_in, || format!("share {s}: panel {panel} in"))?;
        let panel_in = Event::new(gpu)?;
        panel_in.record(copy_in)?;
        panel_in.wait_on(panel_stream)?;
        timeline.stamp(gpu, panel_stream, || format!("share {s}: panel {panel} starts"))?;
        unsafe {
            multiply::<T>(
                gpu,
                panel_stream,
                &Product { n: cols.len(), ..*p },
                copies.a,
                DeviceOperand {
                    ptr: b_side + (op_column_offset(b_copy.op, cols.start, b_rows) * size) as u64,
                    ..b_copy
                },
                (an_side, block_rows.len()),
                bn_side + (blocks.start * kb * 8) as u64,
                alpha,
                beta,
                (c_panel, panel_rows),
                mode,
            )
        }?;
        timeline.stamp(gpu, panel_stream, || format!("share {s}: panel {panel} computed"))?;
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
        timeline.stamp(gpu, copy_out, || format!("share {s}: panel {panel} out"))?;
        computed.push((panel_in, panel_done));
    }
    // `done` (on the first compute stream) covers the other streams: the panels are computed, the
    // last panel of C has left, and the copies in are over even when no panel waited for them
    // (n = 0), before the caller may free the inputs or this workspace.
    for &other in panel_streams[1..].iter().chain([&copy_out, &copy_in]) {
        let finished = Event::new(gpu)?;
        finished.record(other)?;
        finished.wait_on(compute)?;
    }
    side.done.record(compute)?;
    timeline.stamp(gpu, compute, || format!("share {s}: done"))?;
    lead.bind()?;
    Ok(ChunkSource { device: gpu.clone(), operand: b_copy, arrived: ChunkEvents::Each(arrived) })
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

/// A column-major operand in device memory, used as `op(X)`.
#[derive(Clone, Copy, Debug)]
struct DeviceOperand {
    ptr: CUdeviceptr,
    ld: usize,
    op: Operation,
}

/// A product's inputs on its (lead) device, staged from host memory when needed, with their norm maps.
/// A product of a matrix with itself (X·X, Xᵀ·X: purification's repeated squares) stages and reads
/// the matrix once and computes its norms in one pass.
struct StagedInputs {
    a: DeviceInput,
    b: Option<DeviceInput>,
    a_norms: DeviceNormMap,
    b_norms: DeviceNormMap,
}

impl StagedInputs {
    /// # Safety
    /// As [`gemm`] for `a` and `b`.
    unsafe fn new<T: Element>(
        device: &Arc<GpuDevice>,
        stream: Stream,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        bs: usize,
    ) -> Result<Self> {
        let a_in = unsafe { DeviceInput::new(device, stream, a.ptr, a.len, "A") }?;
        if a.same_matrix(b) {
            let [a_norms, b_norms] =
                norm_maps::<T, 2>(device, stream, a_in.ptr(), [a.op, b.op], a.stored_rows, a.stored_cols, a.ld, bs)?;
            return Ok(StagedInputs { a: a_in, b: None, a_norms, b_norms });
        }
        let b_in = unsafe { DeviceInput::new(device, stream, b.ptr, b.len, "B") }?;
        let a_norms = norm_map::<T>(device, stream, a_in.ptr(), a.op, a.stored_rows, a.stored_cols, a.ld, bs)?;
        let b_norms = norm_map::<T>(device, stream, b_in.ptr(), b.op, b.stored_rows, b.stored_cols, b.ld, bs)?;
        Ok(StagedInputs { a: a_in, b: Some(b_in), a_norms, b_norms })
    }

    /// (mb, nb, kb): C blocks by rows and columns, inner blocks.
    fn dims(&self) -> (usize, usize, usize) {
        (self.a_norms.block_rows, self.b_norms.block_cols, self.a_norms.block_cols)
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
    mode: MathMode,
) -> Result<()> {
    let Product { m, n, k, bs, tau } = *p;
    let (mb, nb, kb) = (block_count(m, bs), block_count(n, bs), block_count(k, bs));
    if m == 0 || n == 0 {
        return Ok(());
    }
    let transposes = (a.op == Operation::T, b.op == Operation::T);
    let tile = TileKernel::of::<T>(runs_3xtf32(mode, T::VALUE_TYPE, bs, kb), transposes);
    let (m_i, n_i, k_i, bs_i) = (m as i32, n as i32, k as i32, bs as i32);
    let (a_ptr, lda, ta) = (a.ptr, a.ld as i64, (a.op == Operation::T) as i32);
    let (b_ptr, ldb, tb) = (b.ptr, b.ld as i64, (b.op == Operation::T) as i32);
    let ldc = ldc as i64;
    if tile.applies(device, bs, kb) {
        let work = tile_work(device, stream, &tile, (an, an_ld), bn, tau, (m, n, bs, kb))?;
        let f = device.function(tile.module, tile.name)?;
        if tile.shared_bytes > 48 * 1024 {
            device.allow_shared_memory(&f, tile.shared_bytes as usize)?;
        }
        let cfg =
            Launch { grid: (work.tiles as u32, 1, 1), block: (tile.threads, 1, 1), shared_bytes: tile.shared_bytes };
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
    let threads = if T::VALUE_TYPE == ValueType::F16 { 128 } else { 256 };
    let tiles_per_block = bs.div_ceil(32);
    let f = device.function(&SPAMM, &format!("spamm_multiply_{}", type_suffix::<T>()))?;
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
    /// Dynamic shared memory per thread block.
    shared_bytes: u32,
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
                shared_bytes: 163_840,
            },
            // 4 warps of 64 × 64; a 4-stage cp.async ring (64 KiB), reused by the epilogue's f32 C tile
            // (SPAMM_H_SHARED_BYTES in kernels/spamm_f16.cu).
            ValueType::F16 => TileKernel {
                module: &SPAMM_F16,
                name: "spamm_tiles_f16",
                tile_m: 128,
                tile_n: 128,
                threads: 128,
                shared_bytes: 67584,
            },
            ValueType::Bf16 => unreachable!("SpAMM has no bf16 product"),
        }
    }

    /// Whether the work lists can describe this product: a tile spans at most 4 × 4 C blocks (block
    /// sizes that are multiples of 32, tiles of at most 128 starting at multiples of 32), whose fragments
    /// each lie inside one C block, and k blocks fit an entry's 16 bits.
    /// A kernel whose shared memory the device cannot give (the f64 kernel's 160 KiB on a GPU of
    /// 99 KiB per block) leaves the product to the per-block kernels.
    fn applies(&self, device: &GpuDevice, bs: usize, kb: usize) -> bool {
        bs.is_multiple_of(32)
            && self.tile_m <= 128
            && self.tile_n <= 128
            && kb < 1 << 16
            && self.shared_bytes as usize <= device.max_shared_memory_per_block_optin
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
    TileKernel { module: &SPAMM_F32, name, tile_m: 128, tile_n: 128, threads: 256, shared_bytes }
}

/// The work lists of a tile kernel's product, on the device.
struct TileWork {
    tiles: usize,
    order: DeviceBuffer,
    counts: DeviceBuffer,
    lists: DeviceBuffer,
}

/// Whether tiles are launched heaviest first (the default) or in their natural column-major order
/// (`SPARSEGPU_SPAMM_SCHEDULE=natural`, kept to measure what the ordering buys).
fn heaviest_first() -> bool {
    static NATURAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !*NATURAL.get_or_init(|| std::env::var("SPARSEGPU_SPAMM_SCHEDULE").is_ok_and(|v| v == "natural"))
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
    let (tiles_i, natural) = (tiles as i32, (!heaviest_first()) as i32);
    let order_ptr = order.ptr();
    let f = device.function(&SPAMM, "spamm_tile_order")?;
    let cfg = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared_bytes: 0 };
    unsafe { launch(&f, cfg, stream, kernel_args![&tiles_i, &kb_i, &natural, &counts_ptr, &order_ptr]) }?;
    Ok(TileWork { tiles, order, counts, lists })
}

/// Where a product's statistics land without stopping the caller's stream: a pinned host slot that
/// the device copies a product's statistics totals into, and an event recorded after the copy.
/// A handle keeps one per device; reading waits for the event only.
pub struct StatsSlot {
    /// Two u64: performed products, then the bits of the f64 sum of squared skipped sums.
    host: *mut u64,
    /// Recorded after every copy into `host`.
    copied: Event,
}

// SAFETY: the pinned slot and the event belong to the device's context, usable from any thread; the
// handle owning the slot is used by one thread at a time.
unsafe impl Send for StatsSlot {}

impl StatsSlot {
    pub fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        let copied = Event::new(device)?;
        let host = unsafe { drv::malloc_host(16, CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(driver_error("allocating pinned memory for SpAMM statistics"))? as *mut u64;
        Ok(StatsSlot { host, copied })
    }

    pub fn device(&self) -> &Arc<GpuDevice> {
        self.copied.device()
    }

    /// The totals of the last product recorded into the slot (waits for its copy).
    pub fn wait(&self) -> Result<(u64, f64)> {
        self.copied.synchronize()?;
        // SAFETY: the copy into the slot has completed; volatile because the device wrote it.
        let (performed, bits) = unsafe { (self.host.read_volatile(), self.host.add(1).read_volatile()) };
        Ok((performed, f64::from_bits(bits)))
    }

    /// Queues on `stream` the copy of 16 bytes of device totals into the slot, after any earlier copy
    /// into it (which may have been queued on another stream), and records the event.
    fn record(&self, stream: Stream, totals: &DeviceBuffer) -> Result<()> {
        self.record_from(stream, totals.ptr())
    }

    /// [`StatsSlot::record`] from 16 bytes at `totals` on the slot's device.
    fn record_from(&self, stream: Stream, totals: CUdeviceptr) -> Result<()> {
        self.copied.wait_on(stream)?;
        unsafe { drv::memcpy_dtoh_async(std::slice::from_raw_parts_mut(self.host, 2), totals, stream.0) }
            .map_err(driver_error("copying SpAMM statistics"))?;
        self.copied.record(stream)
    }
}

impl Drop for StatsSlot {
    fn drop(&mut self) {
        // A copy may still be in flight into the pinned slot: wait before freeing it (the event goes
        // after this, with the struct's fields).
        let _ = self.copied.synchronize();
        if self.copied.device().bind().is_ok() {
            unsafe { drv::free_host(self.host as *mut _) }.ok();
        }
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

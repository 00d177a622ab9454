//! SpAMM on the GPU: launchers of `kernels/spamm.cu` and the call sequence of one product (get-norm
//! kernel on op(A) and op(B), multiplication kernel, per-C-block statistics) and of the τ search's
//! valid-ratio evaluations.

use super::kernels::{KernelSource, SPAMM, SPAMM_F16, SPAMM_F32};
use super::memory::{DeviceBuffer, DeviceInput, DeviceOutput};
use super::{GpuDevice, Launch, Stream, driver_error, launch};
use crate::error::Result;
use crate::kernel_args;
use crate::scalar::{ComputeScalar, Element};
use crate::spamm::{MathMode, NormMap, block_count, runs_3xtf32};
use crate::types::{Operation, ValueType};
use cudarc::driver::result as drv;
use cudarc::driver::sys::{CU_MEMHOSTALLOC_PORTABLE, CUdeviceptr, CUevent, CUevent_flags, CUevent_wait_flags};
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

/// `C ← α·Σ_(valid k) op(A)_ik·op(B)_kj + β·C` on the device, with C column-major `m × n` (`ldc`) at
/// `c_ptr` (host or device, `c_len` elements). The totals of the statistics are queued into `stats`
/// (nothing waits for the stream unless C or an input is in host memory). `mode` selects the FP32
/// kernel ([`runs_3xtf32`]). Returns (mb, nb, kb).
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
    mode: MathMode,
    stats: &StatsSlot,
) -> Result<(usize, usize, usize)> {
    let (m, k) = a.op_shape();
    let n = b.op_shape().1;
    let a_in = unsafe { DeviceInput::new(device, stream, a.ptr, a.len, "A") }?;
    // A product of a matrix with itself (X·X, Xᵀ·X: purification's repeated squares) stages and reads
    // the matrix once and computes its norms in one pass.
    let b_in =
        if a.same_matrix(b) { None } else { Some(unsafe { DeviceInput::new(device, stream, b.ptr, b.len, "B") }?) };
    let b_dev = b_in.as_ref().map_or(a_in.ptr(), |b_in| b_in.ptr());
    let (a_norms, b_norms) = match &b_in {
        None => {
            let [a_norms, b_norms] =
                norm_maps::<T, 2>(device, stream, a_in.ptr(), [a.op, b.op], a.stored_rows, a.stored_cols, a.ld, bs)?;
            (a_norms, b_norms)
        }
        Some(b_in) => (
            norm_map::<T>(device, stream, a_in.ptr(), a.op, a.stored_rows, a.stored_cols, a.ld, bs)?,
            norm_map::<T>(device, stream, b_in.ptr(), b.op, b.stored_rows, b.stored_cols, b.ld, bs)?,
        ),
    };
    let (mb, nb, kb) = (a_norms.block_rows, b_norms.block_cols, a_norms.block_cols);
    // A staged host C goes back whole, padding rows m..ldc included, which the kernel never writes:
    // with ldc > m those must be uploaded first so that they come back unchanged.
    let reads_c = beta != T::Compute::ZERO || (ldc > m && n > 1);
    let c = unsafe { DeviceOutput::new(device, stream, c_ptr, c_len, "C", reads_c) }?;
    if m > 0 && n > 0 {
        let transposes = (a.op == Operation::T, b.op == Operation::T);
        let tile = TileKernel::of::<T>(runs_3xtf32(mode, T::VALUE_TYPE, bs, kb), transposes);
        let (m_i, n_i, k_i, bs_i) = (m as i32, n as i32, k as i32, bs as i32);
        let (a_ptr, lda, ta) = (a_in.ptr(), a.ld as i64, (a.op == Operation::T) as i32);
        let (b_ptr, ldb, tb) = (b_dev, b.ld as i64, (b.op == Operation::T) as i32);
        let (c_dev, ldc) = (c.ptr(), ldc as i64);
        if tile.applies(bs, kb) {
            let work = tile_work(device, stream, &tile, &a_norms, &b_norms, tau, (m, n, bs))?;
            let f = device.function(tile.module, tile.name)?;
            if tile.shared_bytes > 48 * 1024 {
                device.allow_shared_memory(&f, tile.shared_bytes as usize)?;
            }
            let cfg = Launch {
                grid: (work.tiles as u32, 1, 1),
                block: (tile.threads, 1, 1),
                shared_bytes: tile.shared_bytes,
            };
            let (order, counts, lists, stride) = (work.order.ptr(), work.counts.ptr(), work.lists.ptr(), kb as i32);
            unsafe {
                launch(
                    &f,
                    cfg,
                    stream,
                    kernel_args![
                        &m_i, &n_i, &k_i, &bs_i, &alpha, &a_ptr, &lda, &ta, &b_ptr, &ldb, &tb, &beta, &c_dev, &ldc,
                        &order, &counts, &lists, &stride
                    ],
                )
            }?;
        } else {
            // Other block sizes: one 32 × 32 tile of one C block per thread block, deciding its own k.
            let threads = if T::VALUE_TYPE == ValueType::F16 { 128 } else { 256 };
            let tiles_per_block = bs.div_ceil(32);
            let f = device.function(&SPAMM, &format!("spamm_multiply_{}", type_suffix::<T>()))?;
            let grid = ((mb * tiles_per_block) as u32, (nb * tiles_per_block).min(65535) as u32, 1);
            let cfg = Launch { grid, block: (threads, 1, 1), shared_bytes: 0 };
            let (an, bn) = (a_norms.norms.ptr(), b_norms.norms.ptr());
            unsafe {
                launch(
                    &f,
                    cfg,
                    stream,
                    kernel_args![
                        &m_i, &n_i, &k_i, &bs_i, &alpha, &a_ptr, &lda, &ta, &b_ptr, &ldb, &tb, &beta, &c_dev, &ldc,
                        &an, &bn, &tau
                    ],
                )
            }?;
        }
    }
    record_stats(device, stream, &a_norms, &b_norms, tau, (mb, nb, kb), stats)?;
    c.finish()?;
    Ok((mb, nb, kb))
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
                module: &SPAMM_F32,
                name: "spamm_tiles_f64",
                tile_m: 64,
                tile_n: 64,
                threads: 256,
                shared_bytes: 0,
            },
            ValueType::F16 => TileKernel {
                module: &SPAMM_F16,
                name: "spamm_tiles_f16",
                tile_m: 128,
                tile_n: 128,
                threads: 256,
                shared_bytes: 0,
            },
            ValueType::Bf16 => unreachable!("SpAMM has no bf16 product"),
        }
    }

    /// Whether the work lists can describe this product: a tile spans at most 4 × 4 C blocks (block
    /// sizes that are multiples of 32, tiles of at most 128 starting at multiples of 32), whose fragments
    /// each lie inside one C block, and k blocks fit an entry's 16 bits.
    fn applies(&self, bs: usize, kb: usize) -> bool {
        bs.is_multiple_of(32) && self.tile_m <= 128 && self.tile_n <= 128 && kb < 1 << 16
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

/// Builds the per-tile lists of k blocks with their C-block masks (`spamm_tile_lists`) and the
/// launch order of the tiles (`spamm_tile_order`).
fn tile_work(
    device: &Arc<GpuDevice>,
    stream: Stream,
    kernel: &TileKernel,
    a_norms: &DeviceNormMap,
    b_norms: &DeviceNormMap,
    tau: f64,
    (m, n, bs): (usize, usize, usize),
) -> Result<TileWork> {
    let (mb, kb) = (a_norms.block_rows, a_norms.block_cols);
    let tiles = m.div_ceil(kernel.tile_m) * n.div_ceil(kernel.tile_n);
    let order = DeviceBuffer::alloc(device, tiles * 4, stream, "the SpAMM tile order")?;
    let counts = DeviceBuffer::alloc(device, tiles * 4, stream, "the SpAMM work lists")?;
    let lists = DeviceBuffer::alloc(device, tiles * kb.max(1) * 4, stream, "the SpAMM work lists")?;
    let f = device.function(&SPAMM, "spamm_tile_lists")?;
    let (m_i, n_i, bs_i, mb_i, kb_i) = (m as i32, n as i32, bs as i32, mb as i32, kb as i32);
    let (tm, tn) = (kernel.tile_m as i32, kernel.tile_n as i32);
    let (an, bn, counts_ptr, lists_ptr) = (a_norms.norms.ptr(), b_norms.norms.ptr(), counts.ptr(), lists.ptr());
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
    let tiles_i = tiles as i32;
    let order_ptr = order.ptr();
    if heaviest_first() {
        let f = device.function(&SPAMM, "spamm_tile_order")?;
        let cfg = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared_bytes: 0 };
        unsafe { launch(&f, cfg, stream, kernel_args![&tiles_i, &kb_i, &counts_ptr, &order_ptr]) }?;
    } else {
        let f = device.function(&SPAMM, "spamm_tile_identity_order")?;
        unsafe { launch(&f, flat_launch(device, tiles), stream, kernel_args![&tiles_i, &order_ptr]) }?;
    }
    Ok(TileWork { tiles, order, counts, lists })
}

/// Where a product's statistics land without stopping the caller's stream: a pinned host slot that
/// the device copies the totals of [`crate::spamm::BlockStats::totals`] into, and an event recorded after the copy.
/// A handle keeps one per device; reading waits for the event only.
pub struct StatsSlot {
    device: Arc<GpuDevice>,
    /// Two u64: performed products, then the bits of the f64 sum of squared skipped sums.
    host: *mut u64,
    event: CUevent,
}

// SAFETY: the pinned slot and the event belong to the device's context, usable from any thread; the
// handle owning the slot is used by one thread at a time.
unsafe impl Send for StatsSlot {}

impl StatsSlot {
    pub fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        device.bind()?;
        let host = unsafe { drv::malloc_host(16, CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(driver_error("allocating pinned memory for SpAMM statistics"))? as *mut u64;
        let event = drv::event::create(CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(|e| {
            unsafe { drv::free_host(host as *mut _) }.ok();
            driver_error("creating an event")(e)
        })?;
        Ok(StatsSlot { device: device.clone(), host, event })
    }

    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.device
    }

    /// The totals of the last product recorded into the slot (waits for its event).
    pub fn wait(&self) -> Result<(u64, f64)> {
        self.device.bind()?;
        unsafe { drv::event::synchronize(self.event) }.map_err(driver_error("executing on the GPU"))?;
        // SAFETY: the copy into the slot has completed; volatile because the device wrote it.
        let (performed, bits) = unsafe { (self.host.read_volatile(), self.host.add(1).read_volatile()) };
        Ok((performed, f64::from_bits(bits)))
    }

    /// Queues on `stream` the copy of 16 bytes of device totals into the slot, after any earlier copy
    /// into it (which may have been queued on another stream), and records the event.
    fn record(&self, stream: Stream, totals: &DeviceBuffer) -> Result<()> {
        unsafe {
            drv::stream::wait_event(stream.0, self.event, CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
                .map_err(driver_error("ordering SpAMM statistics"))?;
            drv::memcpy_dtoh_async(std::slice::from_raw_parts_mut(self.host, 2), totals.ptr(), stream.0)
                .map_err(driver_error("copying SpAMM statistics"))?;
            drv::event::record(self.event, stream.0).map_err(driver_error("recording an event"))
        }
    }
}

impl Drop for StatsSlot {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // A copy may still be in flight into the pinned slot: wait before freeing it.
            unsafe {
                drv::event::synchronize(self.event).ok();
                drv::event::destroy(self.event).ok();
                drv::free_host(self.host as *mut _).ok();
            }
        }
    }
}

/// Queues the per-C-block statistics (`spamm_block_stats`), their totals (`spamm_stats_totals`) and
/// the copy of the totals into `slot`.
fn record_stats(
    device: &Arc<GpuDevice>,
    stream: Stream,
    a_norms: &DeviceNormMap,
    b_norms: &DeviceNormMap,
    tau: f64,
    (mb, nb, kb): (usize, usize, usize),
    slot: &StatsSlot,
) -> Result<()> {
    let blocks = mb * nb;
    let totals = DeviceBuffer::zeroed(device, 16, stream, "SpAMM statistics")?;
    if blocks > 0 {
        let performed = DeviceBuffer::alloc(device, blocks * 8, stream, "SpAMM statistics")?;
        let skipped = DeviceBuffer::alloc(device, blocks * 8, stream, "SpAMM statistics")?;
        let f = device.function(&SPAMM, "spamm_block_stats")?;
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (an, bn, p, s) = (a_norms.norms.ptr(), b_norms.norms.ptr(), performed.ptr(), skipped.ptr());
        unsafe {
            launch(&f, flat_launch(device, blocks), stream, kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &tau, &p, &s])
        }?;
        let columns = DeviceBuffer::alloc(device, nb * 16, stream, "SpAMM statistics")?;
        let f = device.function(&SPAMM, "spamm_stats_totals")?;
        let (column_performed, column_squared, out) = (columns.ptr(), columns.ptr() + nb as u64 * 8, totals.ptr());
        let cfg = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared_bytes: 0 };
        unsafe {
            launch(&f, cfg, stream, kernel_args![&mb_i, &nb_i, &p, &s, &column_performed, &column_squared, &out])
        }?;
    }
    slot.record(stream, &totals)
}

/// Counts the block products `nA[i,k]·nB[k,j] ≥ τ` of two device norm maps, on the device (the τ
/// search's valid-ratio evaluation); waits for the result.
pub struct DeviceValidCounter<'a> {
    device: &'a Arc<GpuDevice>,
    stream: Stream,
    a_norms: &'a DeviceNormMap,
    b_norms: &'a DeviceNormMap,
    counter: DeviceBuffer,
}

impl<'a> DeviceValidCounter<'a> {
    pub fn new(
        device: &'a Arc<GpuDevice>,
        stream: Stream,
        a_norms: &'a DeviceNormMap,
        b_norms: &'a DeviceNormMap,
    ) -> Result<Self> {
        let counter = DeviceBuffer::alloc(device, 8, stream, "the valid-product counter")?;
        Ok(DeviceValidCounter { device, stream, a_norms, b_norms, counter })
    }

    pub fn count(&self, tau: f64) -> Result<u64> {
        let (mb, nb, kb) = (self.a_norms.block_rows, self.b_norms.block_cols, self.a_norms.block_cols);
        let mut count = [0u64];
        if mb * nb * kb == 0 {
            return Ok(0);
        }
        self.device.bind()?;
        unsafe { drv::memset_d8_async(self.counter.ptr(), 0, 8, self.stream.0) }
            .map_err(driver_error("clearing the valid-product counter"))?;
        let f = self.device.function(&SPAMM, "spamm_count_valid")?;
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (an, bn, out) = (self.a_norms.norms.ptr(), self.b_norms.norms.ptr(), self.counter.ptr());
        unsafe {
            launch(
                &f,
                flat_launch(self.device, mb * nb),
                self.stream,
                kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &tau, &out],
            )
        }?;
        self.counter.copy_to_host(&mut count)?;
        Ok(count[0])
    }
}

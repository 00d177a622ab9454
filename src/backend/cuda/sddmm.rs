//! Launchers of `kernels/sddmm.cu`: the CSR → COO row expansion and the nnz-balanced kernel
//! (GPU-Convert), and the on-device band order in which the tiled algorithm runs that kernel.

use super::kernels::SDDMM;
use super::memory::{self, DeviceBuffer, DeviceInput, DeviceOutput};
use super::{CudaExecutor, GpuDevice, Launch, Stream, driver_error, launch};
use crate::alloc::try_vec;
use crate::error::Result;
use crate::kernel_args;
use crate::scalar::Element;
use crate::sddmm::SddmmAlgorithm;
use crate::sddmm::SddmmPlan;
use crate::sddmm::contract::{PreparedPlan, Sampling, SddmmBackend, SddmmPatterns};
use cudarc::driver::sys::CUdeviceptr;
use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

/// Rows of S per band of the tiled algorithm's order (the kernels' SD_BAND).
const BAND_ROWS: usize = 256;
/// The nnz-balanced kernel: threads per block, nonzeros a group takes at a time (SD_BATCH), and
/// thread blocks per multiprocessor (about twice what fits at once, for balance).
const NNZ_THREADS: u32 = 256;
const NNZ_BATCH: usize = 4;
const NNZ_BLOCKS_PER_SM: usize = 8;
/// Vectors of a row a lane loads per nonzero on a large problem: nnz·k at least NNZ_LARGE_PRODUCTS.
const NNZ_VECTORS_PER_LANE: usize = 4;
const NNZ_LARGE_PRODUCTS: usize = 1 << 22;
/// Threads per block of the order kernel (its SD_THREADS).
const SCHEDULE_THREADS: u32 = 256;
/// The order kernel's histograms (one per block) are capped at this many counters in all.
const SCHEDULE_SCRATCH_COUNTERS: usize = 1 << 26;

/// Device pointers and strides of one SDDMM; element (r, p) of A / B is at `r·rs + p·cs`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceOperands<T: Element> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub nnz: usize,
    pub alpha: T::Compute,
    pub a: CUdeviceptr,
    pub a_strides: (usize, usize),
    pub b: CUdeviceptr,
    pub b_strides: (usize, usize),
    /// 0 when S is a pattern (every S[e] is 1).
    pub s_values: CUdeviceptr,
    pub row_ptr: CUdeviceptr,
    pub col_ind: CUdeviceptr,
    pub base: i32,
    pub out: CUdeviceptr,
}

/// The zero-based row of every nonzero (GPU-Convert's CSR → COO step), as u32.
pub fn coo_rows(
    device: &Arc<GpuDevice>,
    stream: Stream,
    m: usize,
    nnz: usize,
    row_ptr: CUdeviceptr,
    base: i32,
) -> Result<DeviceBuffer> {
    let rows = DeviceBuffer::alloc(device, nnz * 4, stream, "the COO row indices")?;
    if nnz == 0 {
        return Ok(rows);
    }
    let f = device.function(&SDDMM, "sddmm_coo_rows")?;
    let warps_per_block = 8;
    let blocks = m.div_ceil(warps_per_block).clamp(1, device.multiprocessors * 32) as u32;
    let cfg = Launch { grid: (blocks, 1, 1), block: (32 * warps_per_block as u32, 1, 1), shared_bytes: 0 };
    let (m32, out) = (m as i32, rows.ptr());
    unsafe { launch(&f, cfg, stream, kernel_args![&m32, &row_ptr, &base, &out]) }?;
    Ok(rows)
}

/// The tiled algorithm's order of the nonzeros: band by band of `BAND_ROWS` rows, each band's
/// nonzeros sorted by column (`sddmm_band_order`); `order[g]` is the entry at position g.
pub struct BandOrder {
    order: DeviceBuffer,
}

impl BandOrder {
    /// Marks the buffer resident (a plan keeps its order beyond the call that built it).
    pub fn resident(self) -> Self {
        BandOrder { order: self.order.resident() }
    }
}

impl std::fmt::Debug for BandOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BandOrder({} entries)", self.order.bytes() / 4)
    }
}

/// Builds the band order of an m×n pattern on the device.
#[allow(clippy::too_many_arguments)]
pub fn band_order(
    device: &Arc<GpuDevice>,
    stream: Stream,
    m: usize,
    n: usize,
    nnz: usize,
    row_ptr: CUdeviceptr,
    col_ind: CUdeviceptr,
    base: i32,
) -> Result<BandOrder> {
    let bands = m.div_ceil(BAND_ROWS);
    let band_order =
        BandOrder { order: DeviceBuffer::alloc(device, nnz * 4, stream, "the band order of the nonzeros")? };
    if bands == 0 || nnz == 0 {
        return Ok(band_order);
    }
    let columns = n.max(1);
    let blocks = bands.min(device.multiprocessors * 8).min((SCHEDULE_SCRATCH_COUNTERS / columns).max(1));
    let scratch = DeviceBuffer::alloc(device, blocks * columns * 4, stream, "the column histograms")?;
    let f = device.function(&SDDMM, "sddmm_band_order")?;
    let cfg = Launch { grid: (blocks as u32, 1, 1), block: (SCHEDULE_THREADS, 1, 1), shared_bytes: 0 };
    let (m32, n32, scratch_ptr, order) = (m as i32, n as i32, scratch.ptr(), band_order.order.ptr());
    unsafe { launch(&f, cfg, stream, kernel_args![&m32, &n32, &row_ptr, &col_ind, &base, &scratch_ptr, &order]) }?;
    Ok(band_order)
}

/// The tiled algorithm: the nnz-balanced kernel of [`coo`] walking the nonzeros in band order (a
/// band of rows, column by column), so that a thread block's nonzeros share a few B rows and the
/// band's A rows, read from L1.
pub fn tiled<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    order: &BandOrder,
    rows: CUdeviceptr,
) -> Result<()> {
    nnz_balanced(device, stream, op, rows, Some(order.order.ptr()))
}

/// The widest vector load (in elements) that every row start of A and B allows: rows contiguous,
/// K, the leading dimensions and both base addresses multiples of it.
fn vector_width<T: Element>(op: &DeviceOperands<T>) -> usize {
    let size = std::mem::size_of::<T>();
    if op.a_strides.1 != 1 || op.b_strides.1 != 1 {
        return 1;
    }
    let mut width = 16 / size;
    while width > 1 {
        let bytes = (width * size) as u64;
        if op.k.is_multiple_of(width)
            && op.a_strides.0.is_multiple_of(width)
            && op.b_strides.0.is_multiple_of(width)
            && op.a.is_multiple_of(bytes)
            && op.b.is_multiple_of(bytes)
        {
            break;
        }
        width /= 2;
    }
    width
}

/// GPU-Convert: equal chunks of consecutive nonzeros (in row order) per group of lanes, vector
/// loads along K.
pub fn coo<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    rows: CUdeviceptr,
) -> Result<()> {
    nnz_balanced(device, stream, op, rows, None)
}

/// `sddmm_coo_*`: equal chunks of consecutive positions per group of lanes; position g is entry
/// `order[g]`, or entry g without an order.
fn nnz_balanced<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    rows: CUdeviceptr,
    order: Option<CUdeviceptr>,
) -> Result<()> {
    if op.nnz == 0 {
        return Ok(());
    }
    let width = vector_width(op);
    let f = device.function(&SDDMM, &format!("sddmm_coo_{}_v{width}", T::VALUE_TYPE.short_name()))?;
    // Lanes per nonzero, at most a warp: on a large problem, enough that each lane loads about
    // NNZ_VECTORS_PER_LANE vectors of the row, so that the shuffles of the reduction are few per
    // nonzero (measured: 1.6x faster than one vector per lane at density 5e-2, k = 64); on a small
    // one, where the GPU is not filled and the time is latency, one vector per lane.
    let per_lane = if op.nnz * op.k >= NNZ_LARGE_PRODUCTS { NNZ_VECTORS_PER_LANE } else { 1 };
    let group = op.k.div_ceil(width * per_lane).next_power_of_two().clamp(1, 32);
    let group_log2 = group.trailing_zeros() as i32;
    // Equal chunks of positions, one per thread block, as many blocks as fit on the GPU at once
    // (NNZ_BLOCKS_PER_SM), fewer when there is not a batch for each group.
    let per_pass = (NNZ_THREADS as usize / group) * NNZ_BATCH;
    let blocks = op.nnz.div_ceil(per_pass).clamp(1, device.multiprocessors * NNZ_BLOCKS_PER_SM);
    let chunk = op.nnz.div_ceil(blocks);
    let groups = blocks * (NNZ_THREADS as usize / group);
    let blocks = blocks as u32;
    let cfg = Launch { grid: (blocks, 1, 1), block: (NNZ_THREADS, 1, 1), shared_bytes: 0 };
    crate::log::note(|| {
        format!(
            "kernel sddmm_coo_{}_v{width} ({blocks} thread blocks of {chunk} nonzeros in {} order, {groups} groups of {group} lanes, loads of {width})",
            T::VALUE_TYPE.short_name(),
            if order.is_some() { "band-column" } else { "row" }
        )
    });
    let (nnz, k, chunk, order) = (op.nnz as i64, op.k as i32, chunk as i64, order.unwrap_or(0));
    let (a_rs, a_cs) = (op.a_strides.0 as i64, op.a_strides.1 as i64);
    let (b_rs, b_cs) = (op.b_strides.0 as i64, op.b_strides.1 as i64);
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &nnz,
                &k,
                &op.alpha,
                &op.a,
                &a_rs,
                &a_cs,
                &op.b,
                &b_rs,
                &b_cs,
                &op.s_values,
                &rows,
                &op.col_ind,
                &op.base,
                &order,
                &group_log2,
                &chunk,
                &op.out
            ],
        )
    }
}

/// A plan's copy on one GPU (made at sddmmCreatePlan on a CUDA handle): the zero-based pattern, its
/// COO rows and its band order, both built on the device once.
pub struct DevicePlan {
    ordinal: usize,
    row_ptr: DeviceBuffer,
    col_ind: DeviceBuffer,
    coo_rows: DeviceBuffer,
    band_order: BandOrder,
}

impl std::fmt::Debug for DevicePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevicePlan(device {}, {:?})", self.ordinal, self.band_order)
    }
}

impl PreparedPlan for DevicePlan {}

impl<T: Element> SddmmBackend<T> for CudaExecutor {
    /// The arrays may be host or device memory (`sampling.pattern` is a host view of S's structure).
    /// With a plan prepared on this device its COO rows / band order are used; otherwise the
    /// chosen algorithm's preprocessing runs on the GPU first. Returns without waiting unless `out`
    /// is host memory.
    unsafe fn sample(&mut self, sampling: &Sampling<'_, T>) -> Result<()> {
        let call = sampling.operands;
        let pattern = &sampling.pattern;
        let (m, n, nnz) = (pattern.outer_dim, pattern.inner_dim, pattern.nnz());
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        let a = unsafe { DeviceInput::new(&gpu, stream, call.a.ptr, call.a.len, "A") }?;
        let b = unsafe { DeviceInput::new(&gpu, stream, call.b.ptr, call.b.len, "B") }?;
        let s = if call.s_values.is_null() {
            None
        } else {
            Some(unsafe { DeviceInput::new(&gpu, stream, call.s_values, nnz, "sValues") }?)
        };
        let resident = sampling
            .plan
            .and_then(|p| p.prepared())
            .and_then(|prepared| (prepared as &dyn Any).downcast_ref::<DevicePlan>())
            .filter(|d| d.ordinal == gpu.ordinal);
        let (staged_ptr, staged_idx);
        let (row_ptr, col_ind, base) = match resident {
            Some(d) => (d.row_ptr.ptr(), d.col_ind.ptr(), 0),
            None => {
                staged_ptr = unsafe { DeviceInput::new(&gpu, stream, call.row_ptr, m + 1, "rowPtr") }?;
                staged_idx = unsafe { DeviceInput::new(&gpu, stream, call.col_ind, nnz, "colInd") }?;
                (staged_ptr.ptr(), staged_idx.ptr(), pattern.base.offset() as i32)
            }
        };
        let out = unsafe { DeviceOutput::new(&gpu, stream, call.out, nnz, "out", false) }?;
        let operands = DeviceOperands::<T> {
            m,
            n,
            k: call.k,
            nnz,
            alpha: call.alpha,
            a: a.ptr(),
            a_strides: call.strides(call.a.ld),
            b: b.ptr(),
            b_strides: call.strides(call.b.ld),
            s_values: s.as_ref().map_or(0, |s| s.ptr()),
            row_ptr,
            col_ind,
            base,
            out: out.ptr(),
        };
        if nnz > 0 && resident.is_none() {
            crate::log::note(|| "preprocessing on the device (no plan prepared on it)".to_string());
        }
        if nnz > 0 {
            match sampling.algorithm {
                SddmmAlgorithm::Tiled => {
                    let (built_order, built_rows);
                    let (order, rows) = match resident {
                        Some(d) => (&d.band_order, d.coo_rows.ptr()),
                        None => {
                            built_order = band_order(&gpu, stream, m, n, nnz, row_ptr, col_ind, base)?;
                            built_rows = coo_rows(&gpu, stream, m, nnz, row_ptr, base)?;
                            (&built_order, built_rows.ptr())
                        }
                    };
                    tiled(&gpu, stream, &operands, order, rows)?;
                }
                SddmmAlgorithm::Coo | SddmmAlgorithm::Auto => {
                    let built;
                    let rows = match resident {
                        Some(d) => d.coo_rows.ptr(),
                        None => {
                            built = coo_rows(&gpu, stream, m, nnz, row_ptr, base)?;
                            built.ptr()
                        }
                    };
                    coo(&gpu, stream, &operands, rows)?;
                }
            }
        }
        out.finish()
    }
}

impl SddmmPatterns for CudaExecutor {
    unsafe fn host_indices<'a>(&self, ptr: *const i32, len: usize, name: &str) -> Result<Cow<'a, [i32]>> {
        if let memory::Location::Device(_) = memory::locate(ptr.cast()) {
            let gpu = self.lead()?;
            gpu.bind()?;
            let mut host = try_vec(len, 0i32, name)?;
            let stream = self.stream();
            unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut host[..], ptr as u64, stream.0) }
                .map_err(driver_error(&format!("reading {name} from the device")))?;
            gpu.synchronize(stream)?;
            return Ok(Cow::Owned(host));
        }
        Ok(Cow::Borrowed(unsafe { std::slice::from_raw_parts(ptr, len) }))
    }

    /// Uploads the pattern to the handle's GPU and builds its COO rows and band order there, once
    /// (GPU-Preprocessing), so that sddmmExecutePlan on that device does no per-call preprocessing.
    /// Waits for the stream, so the plan may be used on any stream of the device afterwards.
    fn prepare_plan(&mut self, plan: &SddmmPlan) -> Result<Option<Box<dyn PreparedPlan>>> {
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        let pattern = plan.pattern();
        let (m, n, nnz) = (plan.rows(), plan.cols(), plan.nnz());
        let row_ptr = DeviceBuffer::from_host(&gpu, pattern.ptr, stream, "the plan's row pointers")?.resident();
        let col_ind = DeviceBuffer::from_host(&gpu, pattern.idx, stream, "the plan's column indices")?.resident();
        let coo_rows = coo_rows(&gpu, stream, m, nnz, row_ptr.ptr(), 0)?.resident();
        let band_order = band_order(&gpu, stream, m, n, nnz, row_ptr.ptr(), col_ind.ptr(), 0)?.resident();
        gpu.synchronize(stream)?;
        Ok(Some(Box::new(DevicePlan { ordinal: gpu.ordinal, row_ptr, col_ind, coo_rows, band_order })))
    }
}

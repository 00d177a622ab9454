//! SMaT on the GPU (the CUDA executor's [`SmatBackend`]): an analysed matrix resident on a device,
//! and the launchers of `kernels/smat.cu`.
//!
//! The analysis (reordering, the choice between tiles and CSR rows, both parts built) runs on the
//! host exactly as for the CPU backend, on a CSR read where it lives (device arrays are downloaded
//! first); [`DeviceStorage::upload`] then moves both parts to the handle's device once, and the
//! matrix holds them as the backend's own type. All indices and pointers are 32-bit: `smatCreateCsr`
//! takes `int` row pointers, so no matrix has 2³¹ entries.
//!
//! The CSR rows may be stored in another order than the caller's ([`device_row_order`]: longest
//! first where their lengths are skewed, by first column where neighbouring rows lie far apart), C's
//! row of each kept beside it.
//!
//! Both parts get one more thing here, a schedule that is the kernels' business: rows longer than
//! [`DeviceRows::long_limit`] are cut into segments that separate groups of lanes multiply, and block
//! rows of more tiles than their share of the work ([`TileSchedule`]) into runs that separate thread
//! blocks walk; partial sums are added in a second pass, in a fixed order, so a few very long rows
//! cannot stall the product and results do not depend on timing.

use super::kernels::SMAT;
use super::memory::{self, DeviceBuffer, DeviceInput, DeviceOutput, Location, locate};
use super::row_order;
use super::{CudaExecutor, GpuDevice, Launch, Stream, driver_error, launch};
use crate::alloc::{byte_count, element_count, try_vec, try_zeros};
use crate::error::{Error, Result};
use crate::kernel_args;
use crate::scalar::{ComputeScalar, Element};
use crate::smat::bcsr::{Bcsr, NO_COLUMN, NO_ROW};
use crate::smat::contract::{HostCsr, PreparedBlocks, Product, RawCsr, SmatBackend, foreign_matrix};
use crate::smat::rows::RowsCsr;
use crate::smat::{MatrixInfo, SmatMathMode, SmatMatrix, Storage};
use crate::types::{Layout, ValueType};
use cudarc::driver::result as drv;
use cudarc::driver::sys::CUdeviceptr;
use rayon::prelude::*;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// Warps per thread block and columns per warp of the tile kernels (SMAT_WARPS_PER_BLOCK and
/// SMAT_STRIP in kernels/smat.cu).
const WARPS_PER_BLOCK: usize = 4;
const STRIP: usize = 32;
/// The most thread blocks a grid may have along y; kernels loop over the column chunks past it
/// (the staged tile kernel, which does not, is not used past it).
const MAX_GRID_Y: usize = 65535;
/// Threads per block of the CSR kernels (their `__launch_bounds__`).
const ROW_THREADS: usize = 256;
/// Rows a group of lanes takes in the `smat_short_rows_*` kernels (their SMAT_SHORT_ROWS), for
/// matrices of at least SHORT_ROWS_MIN_ROWS rows (a grid of a few thousand blocks) whose CSR rows
/// hold at most SHORT_ROW_MEAN_ENTRIES entries on average (long rows aside): docs/methods.md has
/// the measurements (rows of 3–6 entries 2–22 % faster than a row a group, longer rows slower).
const SHORT_ROWS: usize = 8;
const SHORT_ROWS_MIN_ROWS: usize = 65536;
const SHORT_ROW_MEAN_ENTRIES: usize = 8;
/// CSR rows whose lengths spread this much (standard deviation over mean, long rows left out) are
/// stored on the device longest first, so that the rows a thread block takes together are about as
/// long and the block does not hold its place on the multiprocessor while one warp finishes a row
/// far longer than the others' (a power-law graph's rows: ncu measured 32 % achieved occupancy
/// against 50 % possible in caller order). Rows of similar lengths keep the caller's order, whose
/// neighbouring rows share rows of B through the caches.
const SKEWED_ROW_LENGTHS: f64 = 1.0;
/// The most warps per thread block of the staged tile kernels (smat_tiles_*_staged{1,2,4}).
const STAGED_WARPS: usize = 4;

/// Shared memory of a staged tile kernel with a `panel`-column B panel (smat_staging in
/// kernels/smat.cu): SMAT_STAGES stages of 16 padded B rows and one padded 16 × 16 tile.
fn staged_shared_bytes(panel: usize) -> usize {
    const STAGES: usize = 4;
    const A_ROW_BYTES: usize = 48;
    STAGES * (16 * (panel * 2 + 16) + 16 * A_ROW_BYTES)
}

/// An analysed matrix's tiles on one device (addresses inside [`DeviceStorage::memory`]).
struct DeviceTiles {
    tile_rows: usize,
    /// The work items of [`TileSchedule`], four i32 each.
    items: usize,
    item_list: CUdeviceptr,
    /// `tile.cols` columns of A (i32) per tile, −1 for padding.
    columns: CUdeviceptr,
    /// `blocks · tile area` values of the element type, each tile row-major.
    tiles: CUdeviceptr,
    /// Caller's row (i32) of each tile row, −1 for padding.
    out_rows: CUdeviceptr,
    /// The split block rows of [`TileSchedule`], three i32 each, and the slots they use.
    splits: usize,
    split_list: CUdeviceptr,
    slots: usize,
    /// The slots' partial sums (`tile_rows · n` compute values each), kept between calls.
    partials: Mutex<Option<memory::Workspace>>,
}

/// How the tile kernels share out the tiles: one work item (a thread block along the grid's x) per
/// block row, except that a block row of more than `run` tiles is cut into runs of about equal
/// length, each summing into a partial slot of its own, which a second kernel adds up in run order.
/// `run` is the tiles per item when all tiles are spread over [`TILE_ITEMS`] items (but at least
/// [`MIN_TILES_PER_ITEM`]): a matrix with enough block rows keeps whole block rows unless one of
/// them is far longer than the rest, and a small matrix (few block rows of many tiles, as ergo's
/// overlap matrix) still fills the GPU.
#[derive(Debug, PartialEq, Eq)]
struct TileSchedule {
    /// (block row, first tile, end tile, slot or −1 for a whole block row).
    items: Vec<[i32; 4]>,
    /// (block row, first slot, slots) of each block row cut into runs.
    splits: Vec<[i32; 3]>,
    slots: usize,
}

/// Work items the tile schedule aims at: about the thread blocks an H100 runs at once (132 SMs,
/// four each). A block row longer than its share of that many items would still be running when
/// the others are done; a block row a few times the average is not worth a second kernel.
const TILE_ITEMS: usize = 512;
/// The fewest tiles a run holds: the staged kernels' pipeline depth (SMAT_STAGES).
const MIN_TILES_PER_ITEM: usize = 4;

impl TileSchedule {
    fn new(block_row_ptr: &[usize]) -> TileSchedule {
        let total = block_row_ptr.last().copied().unwrap_or(0);
        let run = total.div_ceil(TILE_ITEMS).max(MIN_TILES_PER_ITEM);
        let (mut items, mut splits, mut slots) = (Vec::new(), Vec::new(), 0);
        for (block_row, bounds) in block_row_ptr.windows(2).enumerate() {
            let (first, count) = (bounds[0], bounds[1] - bounds[0]);
            if count <= run {
                items.push([block_row as i32, first as i32, bounds[1] as i32, -1]);
                continue;
            }
            let pieces = count.div_ceil(run);
            splits.push([block_row as i32, slots as i32, pieces as i32]);
            for p in 0..pieces {
                let (start, end) = (first + count * p / pieces, first + count * (p + 1) / pieces);
                items.push([block_row as i32, start as i32, end as i32, (slots + p) as i32]);
            }
            slots += pieces;
        }
        TileSchedule { items, splits, slots }
    }
}

/// An analysed matrix's CSR rows on one device, with the segments of its long rows (addresses inside
/// [`DeviceStorage::memory`]).
struct DeviceRows {
    rows: usize,
    /// `rows + 1` offsets (i32), the caller's row of each row (i32), column indices (i32), values.
    row_ptr: CUdeviceptr,
    out_rows: CUdeviceptr,
    col_ind: CUdeviceptr,
    values: CUdeviceptr,
    /// Rows with more entries are left to the segment kernels.
    long_limit: usize,
    /// Rows a group of lanes takes: `SHORT_ROWS` (the `smat_short_rows_*` kernels, a run of rows
    /// as one sequence of entries; fewer where a group has fewer lanes) where the rows are short
    /// and many, else 1 (`smat_rows_*`).
    rows_per_group: usize,
    /// Segments of the long rows: (first entry, end) pairs (i32), each inside one long row.
    segments: usize,
    seg_bounds: CUdeviceptr,
    /// The long rows: `long_rows + 1` offsets into the segments (i32), and their caller rows (i32).
    long_rows: usize,
    long_seg_ptr: CUdeviceptr,
    long_out_rows: CUdeviceptr,
    /// The segments' partial sums, kept between calls: allocating them per call costs more than a
    /// small product when the memory pool has returned its memory at the last synchronisation.
    partials: Mutex<Option<memory::Workspace>>,
}

/// A [`memory::Workspace`] of partial sums held by one call, from [`HeldWorkspace::take`] to
/// [`HeldWorkspace::release`].
struct HeldWorkspace<'a> {
    held: std::sync::MutexGuard<'a, Option<memory::Workspace>>,
    ptr: CUdeviceptr,
}

impl<'a> HeldWorkspace<'a> {
    /// The workspace of `holder`, at least `bytes` long, ready for work queued on `stream`.
    fn take(
        holder: &'a Mutex<Option<memory::Workspace>>,
        gpu: &Arc<GpuDevice>,
        stream: Stream,
        bytes: usize,
        what: &str,
    ) -> Result<HeldWorkspace<'a>> {
        let mut held = holder.lock().unwrap_or_else(|p| p.into_inner());
        let workspace = match held.as_mut() {
            Some(workspace) => workspace,
            None => held.insert(memory::Workspace::new(gpu)?),
        };
        let ptr = workspace.take(gpu, stream, bytes, what)?;
        Ok(HeldWorkspace { held, ptr })
    }

    fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Marks the work queued on `stream` so far as the workspace's last use.
    fn release(mut self, stream: Stream) -> Result<()> {
        self.held.as_mut().expect("a taken workspace exists").release(stream)
    }
}

/// Bytes of `rows` rows of `n` partial sums of type `S`.
fn partial_bytes<S>(rows: usize, n: usize, what: &str) -> Result<usize> {
    element_count(element_count(rows, n, what)?, std::mem::size_of::<S>(), what)
}

/// A one-dimensional launch of the CSR kernels' block size with a thread for each of `threads`.
fn one_thread_each(threads: usize) -> Launch {
    Launch { grid: (threads.div_ceil(ROW_THREADS) as u32, 1, 1), block: (ROW_THREADS as u32, 1, 1), shared_bytes: 0 }
}

impl DeviceRows {
    /// The length from which a row is long (its segments hold about half of it): when its time
    /// exceeds what the GPU needs for its share of all entries (about 8192 groups run at once on an
    /// H100), or, for a matrix with too few rows to fill the GPU, when splitting it gives the GPU
    /// more groups to run; never below a length one group handles in a few steps anyway.
    fn long_limit(entries: usize) -> usize {
        (entries / 8192).max(128)
    }
}

/// A matrix's storage on one device: every array in one resident allocation (see
/// `DeviceBuffer::resident`), uploaded by one copy. A device allocation can cost more than the
/// copy itself when the memory pool has to map new memory, and the analysis makes a dozen arrays.
pub struct DeviceStorage {
    device: Arc<GpuDevice>,
    memory: DeviceBuffer,
    tiles: DeviceTiles,
    rows: DeviceRows,
}

impl std::fmt::Debug for DeviceStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceStorage(device {}, {} bytes, {} CSR rows)",
            self.device.ordinal,
            self.memory.bytes(),
            self.rows.rows
        )
    }
}

impl PreparedBlocks for DeviceStorage {
    fn backend_name(&self) -> &'static str {
        "CUDA"
    }
}

/// Host arrays laid out one after another, each at a 256-byte boundary (what the kernels' 16-byte
/// loads and cudaMalloc's own alignment need), for one upload. Arrays are described first and
/// written into one allocation at the end: growing a buffer array by array copied and cleared it
/// on one thread, most of preparing a matrix of a few million entries (measured).
#[derive(Default)]
struct Packed<'a> {
    bytes: usize,
    /// Each array's byte range and the writer of its bytes.
    arrays: Vec<(std::ops::Range<usize>, ArrayWriter<'a>)>,
}

type ArrayWriter<'a> = Box<dyn Fn(&mut [u8]) + Sync + 'a>;

/// Alignment of each array in a [`Packed`] buffer.
const PACKED_ALIGNMENT: usize = 256;

/// Elements one task converts when an array is packed.
const PACKED_CHUNK: usize = 1 << 14;

impl<'a> Packed<'a> {
    /// Appends `len` elements made by `item`; returns their byte offset.
    fn push<T: Copy>(&mut self, len: usize, what: &str, item: impl Fn(usize) -> T + Sync + 'a) -> Result<usize> {
        let offset = self.bytes.next_multiple_of(PACKED_ALIGNMENT);
        let end = offset.checked_add(byte_count::<T>(len, what)?).ok_or_else(|| {
            Error::invalid_size(format!("the analysed matrix with {what} would take more bytes than can be addressed"))
        })?;
        let size = std::mem::size_of::<T>().max(1);
        let write = move |out: &mut [u8]| {
            out.par_chunks_mut(size * PACKED_CHUNK).enumerate().for_each(|(c, chunk)| {
                for (k, slot) in chunk.chunks_exact_mut(size).enumerate() {
                    let value = item(c * PACKED_CHUNK + k);
                    // SAFETY: `slot` is size_of::<T>() bytes, and T is a plain number read as its bytes.
                    slot.copy_from_slice(unsafe {
                        std::slice::from_raw_parts((&value as *const T).cast::<u8>(), size)
                    });
                }
            })
        };
        self.arrays.push((offset..end, Box::new(write)));
        self.bytes = end;
        Ok(offset)
    }

    /// The arrays' bytes, converted in parallel.
    fn bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = try_zeros(self.bytes, "the analysed matrix")?;
        for (range, write) in &self.arrays {
            write(&mut bytes[range.clone()]);
        }
        Ok(bytes)
    }
}

/// A row or column index as the kernels take it: −1 for none.
fn as_i32_index(index: u32) -> i32 {
    if index == NO_ROW || index == NO_COLUMN { -1 } else { index as i32 }
}

/// The order in which the device stores `csr`'s rows (positions to caller rows), where it is not
/// the caller's: longest first where their lengths are skewed ([`SKEWED_ROW_LENGTHS`]), else by
/// their first column where neighbouring rows lie far apart but would not in that order
/// ([`row_order::by_first_column`]); `None` keeps the caller's order.
fn device_row_order<S: Sync>(csr: &RowsCsr<S>, long_limit: usize) -> Result<Option<Vec<u32>>> {
    if let Some(order) = longest_first(csr, long_limit)? {
        crate::log::note(|| "CSR rows stored longest first (skewed lengths)".to_string());
        return Ok(Some(order));
    }
    let order = row_order::by_first_column(csr.rows(), |i| &csr.col_ind[csr.row_ptr[i]..csr.row_ptr[i + 1]])?;
    if order.is_some() {
        crate::log::note(|| "CSR rows stored by first column (neighbouring rows far apart)".to_string());
    }
    Ok(order)
}

/// `csr`'s rows longest first (ties in caller order; rows longer than `long_limit`, which the
/// segment kernels take, last) where their lengths are skewed; `None` otherwise.
fn longest_first<S>(csr: &RowsCsr<S>, long_limit: usize) -> Result<Option<Vec<u32>>> {
    let length = |i: usize| csr.row_ptr[i + 1] - csr.row_ptr[i];
    let (mut rows, mut sum, mut squares) = (0usize, 0f64, 0f64);
    for i in (0..csr.rows()).filter(|&i| length(i) <= long_limit) {
        rows += 1;
        sum += length(i) as f64;
        squares += (length(i) as f64).powi(2);
    }
    let mean = sum / rows.max(1) as f64;
    let deviation = (squares / rows.max(1) as f64 - mean * mean).max(0.0).sqrt();
    if rows == 0 || mean == 0.0 || deviation <= SKEWED_ROW_LENGTHS * mean {
        return Ok(None);
    }
    // Long rows share the bucket past the shortest.
    let bucket = |i: usize| if length(i) > long_limit { long_limit + 1 } else { long_limit - length(i) };
    counting_order(csr.rows(), long_limit + 2, bucket).map(Some)
}

/// The positions 0..rows sorted by `bucket` (below `buckets`), ties in increasing order: as caller
/// rows in device order.
fn counting_order(rows: usize, buckets: usize, bucket: impl Fn(usize) -> usize) -> Result<Vec<u32>> {
    let mut starts = try_vec(buckets + 1, 0usize, "the CSR row order")?;
    for i in 0..rows {
        starts[bucket(i) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut order = try_vec(rows, 0u32, "the CSR row order")?;
    for i in 0..rows {
        order[starts[bucket(i)]] = i as u32;
        starts[bucket(i)] += 1;
    }
    Ok(order)
}

impl DeviceStorage {
    /// Uploads an analysed matrix of element type `T` to `device` on `stream`, and waits for the
    /// copy so that later calls may run on any stream of the device. Values in the compute type are
    /// rounded once to the element type the kernels read (halves were widened and duplicates in a
    /// tile summed in f32 at analysis; a value from one entry round-trips).
    pub fn upload<T: Element>(
        device: &Arc<GpuDevice>,
        stream: Stream,
        storage: &Storage<T::Compute>,
    ) -> Result<DeviceStorage> {
        let Bcsr { block_row_ptr, columns, values, out_rows, .. } = &storage.tiles;
        let schedule = TileSchedule::new(block_row_ptr);
        let long_limit = DeviceRows::long_limit(storage.rows.entries());
        let reordered = match device_row_order(&storage.rows, long_limit)? {
            Some(order) => Some(storage.rows.reordered(&order)?),
            None => None,
        };
        let csr = reordered.as_ref().unwrap_or(&storage.rows);
        // Long rows are few (at most entries / long_limit of them): these lists stay small.
        let (mut seg_bounds, mut long_seg_ptr, mut long_out_rows) = (Vec::new(), vec![0i32], Vec::new());
        let mut long_entries = 0;
        for i in 0..csr.rows() {
            let (first, last) = (csr.row_ptr[i], csr.row_ptr[i + 1]);
            if last - first > long_limit {
                long_entries += last - first;
                let pieces = (last - first).div_ceil(long_limit / 2);
                for p in 0..pieces {
                    seg_bounds.push((first + (last - first) * p / pieces) as i32);
                    seg_bounds.push((first + (last - first) * (p + 1) / pieces) as i32);
                }
                long_seg_ptr.push((seg_bounds.len() / 2) as i32);
                long_out_rows.push(csr.out_rows[i] as i32);
            }
        }
        let mut packed = Packed::default();
        let tiles = [
            packed.push(schedule.items.len(), "the tile schedule", |i| schedule.items[i])?,
            packed.push(columns.len(), "the tile columns", |i| as_i32_index(columns[i]))?,
            packed.push(values.len(), "the tiles", |i| T::from_compute(values[i]))?,
            packed.push(out_rows.len(), "the tile rows", |i| as_i32_index(out_rows[i]))?,
            packed.push(schedule.splits.len(), "the tile schedule", |i| schedule.splits[i])?,
        ];
        let rows = [
            packed.push(csr.row_ptr.len(), "the CSR row pointers", |i| csr.row_ptr[i] as i32)?,
            packed.push(csr.rows(), "the CSR rows", |i| as_i32_index(csr.out_rows[i]))?,
            packed.push(csr.entries(), "the CSR columns", |e| csr.col_ind[e] as i32)?,
            packed.push(csr.entries(), "the CSR values", |e| T::from_compute(csr.values[e]))?,
            packed.push(seg_bounds.len(), "the long-row segments", |i| seg_bounds[i])?,
            packed.push(long_seg_ptr.len(), "the long-row segments", |i| long_seg_ptr[i])?,
            packed.push(long_out_rows.len(), "the long rows", |i| long_out_rows[i])?,
        ];
        crate::log::note(|| {
            format!(
                "tile schedule: {} work items, {} block rows cut into {} runs; CSR rows longer than {long_limit} \
                 entries: {} in {} segments",
                schedule.items.len(),
                schedule.splits.len(),
                schedule.slots,
                long_out_rows.len(),
                seg_bounds.len() / 2
            )
        });
        let bytes = packed.bytes()?;
        let memory = DeviceBuffer::from_host(device, &bytes, stream, "the analysed matrix")?.resident();
        let at = |offset: usize| memory.ptr() + offset as CUdeviceptr;
        let tiles = DeviceTiles {
            tile_rows: storage.tiles.tile.rows,
            items: schedule.items.len(),
            item_list: at(tiles[0]),
            columns: at(tiles[1]),
            tiles: at(tiles[2]),
            out_rows: at(tiles[3]),
            splits: schedule.splits.len(),
            split_list: at(tiles[4]),
            slots: schedule.slots,
            partials: Mutex::new(None),
        };
        let short_rows =
            csr.rows() >= SHORT_ROWS_MIN_ROWS && csr.entries() - long_entries <= SHORT_ROW_MEAN_ENTRIES * csr.rows();
        let rows = DeviceRows {
            rows: csr.rows(),
            rows_per_group: if short_rows { SHORT_ROWS } else { 1 },
            row_ptr: at(rows[0]),
            out_rows: at(rows[1]),
            col_ind: at(rows[2]),
            values: at(rows[3]),
            long_limit,
            segments: seg_bounds.len() / 2,
            seg_bounds: at(rows[4]),
            long_rows: long_out_rows.len(),
            long_seg_ptr: at(rows[5]),
            long_out_rows: at(rows[6]),
            partials: Mutex::new(None),
        };
        // The packed host copy is freed on return: the copy must be done first.
        device.synchronize(stream)?;
        Ok(DeviceStorage { device: device.clone(), memory, tiles, rows })
    }

    pub fn device_ordinal(&self) -> usize {
        self.device.ordinal
    }
}

/// A caller's CSR input array as host data: used in place when it is host memory, downloaded when it
/// is device memory of `device` (the analysis runs on the host).
///
/// # Safety
/// `ptr` must be valid for reading `len` elements of host or device memory, or `len` must be 0 (the
/// caller has already rejected NULL and misaligned pointers).
unsafe fn host_view<'a, T: Copy + Default>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    ptr: *const T,
    len: usize,
    name: &str,
) -> Result<Cow<'a, [T]>> {
    if len == 0 {
        return Ok(Cow::Borrowed(&[]));
    }
    device.bind()?;
    match locate(ptr.cast()) {
        Location::Host => Ok(Cow::Borrowed(unsafe { std::slice::from_raw_parts(ptr, len) })),
        Location::Device(ordinal) => {
            if ordinal != device.ordinal {
                return Err(Error::invalid_pointer(format!(
                    "argument {name} is memory of device {ordinal}, but the handle runs on device {}",
                    device.ordinal
                )));
            }
            let mut host: Vec<T> = try_vec(len, T::default(), name)?;
            unsafe { drv::memcpy_dtoh_async(&mut host[..], ptr as u64, stream.0) }
                .map_err(driver_error("copying a CSR array to the host"))?;
            device.synchronize(stream)?;
            Ok(Cow::Owned(host))
        }
    }
}

/// SMaT's element types on the GPU: the suffix of their kernels, and the columns one lane of the
/// vectorised CSR kernel reads with one 16-byte load.
pub trait GpuSpmmElement: Element {
    const NAME: &'static str;
    const COLUMNS_PER_LOAD: usize = 16 / std::mem::size_of::<Self>();
    /// Has the tile kernel that stages B through shared memory (smat_tiles_*_staged*).
    const STAGED_TILES: bool = false;
}
impl GpuSpmmElement for half::f16 {
    const NAME: &'static str = "f16";
    const STAGED_TILES: bool = true;
}
impl GpuSpmmElement for half::bf16 {
    const NAME: &'static str = "bf16";
    const STAGED_TILES: bool = true;
}
impl GpuSpmmElement for f32 {
    const NAME: &'static str = "f32";
}
impl GpuSpmmElement for f64 {
    const NAME: &'static str = "f64";
}

fn strides(layout: Layout, ld: usize) -> (i64, i64) {
    let (rs, cs) = layout.strides(ld);
    (rs as i64, cs as i64)
}

/// Lanes per row of the CSR kernels: the fewest (a power of two, at most a warp) whose loads cover
/// n columns, so narrow products put several rows in one warp instead of idling lanes.
fn lanes_per_row(n: usize, columns_per_lane: usize) -> usize {
    n.div_ceil(columns_per_lane).next_power_of_two().min(32)
}

/// `C = α·A·B + β·C` on `gpu` (the handle's device, bound) and `stream`. B and C may be host or
/// device memory; the call returns without waiting unless C is host memory.
///
/// # Safety
/// B and C must be valid for their lengths.
unsafe fn spmm<T: GpuSpmmElement>(
    gpu: &Arc<GpuDevice>,
    stream: Stream,
    a: &SmatMatrix,
    resident: &DeviceStorage,
    op: &Product<T>,
) -> Result<()> {
    let (alpha, beta) = (op.alpha, op.beta);
    if resident.device_ordinal() != gpu.ordinal {
        return Err(Error::invalid_value(format!(
            "argument A was analysed on device {}, but the handle runs on device {}",
            resident.device_ordinal(),
            gpu.ordinal
        )));
    }
    let info = a.info();
    debug_assert_eq!(info.value_type, T::VALUE_TYPE);
    let (rows, n) = (info.rows, op.n);
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let b = unsafe { DeviceInput::new(gpu, stream, op.b, op.b_len, "B") }?;
    // A staged host C is copied back whole: upload it first unless the kernels overwrite all of it
    // (β = 0 and no padding between leading dimensions).
    let c_inner = if op.layout == Layout::RowMajor { n } else { rows };
    let read_existing = beta != T::Compute::ZERO || op.ldc != c_inner;
    let c = unsafe { DeviceOutput::new(gpu, stream, op.c, op.c_len, "C", read_existing) }?;
    let (b_ptr, c_ptr) = (b.ptr(), c.ptr());
    let (b_rs, b_cs) = strides(op.layout, op.ldb);
    let (c_rs, c_cs) = strides(op.layout, op.ldc);
    let n_i = n as i32;

    // The 16-byte forms need row-major B and C whose rows all start 16-byte aligned.
    let aligned = |ptr: u64, ld: usize| ptr.is_multiple_of(16) && ld.is_multiple_of(T::COLUMNS_PER_LOAD);
    let vectorised = op.layout == Layout::RowMajor && aligned(b_ptr, op.ldb) && aligned(c_ptr, op.ldc);

    let tiles = &resident.tiles;
    if tiles.items > 0 {
        // Only a matrix with split block rows needs the partial sums.
        let workspace = if tiles.slots > 0 {
            let bytes = partial_bytes::<T::Compute>(tiles.slots * tiles.tile_rows, n, "the tile partial sums")?;
            Some(HeldWorkspace::take(&tiles.partials, gpu, stream, bytes, "the tile partial sums")?)
        } else {
            None
        };
        let partial = workspace.as_ref().map_or(0, HeldWorkspace::ptr);
        let (items, columns, values, out_rows) = (tiles.item_list, tiles.columns, tiles.tiles, tiles.out_rows);
        // The staged kernel copies 8-column chunks of row-major B with cp.async (16-byte aligned rows)
        // and writes C by column pairs (4-byte aligned).
        let staged = T::STAGED_TILES
            && op.layout == Layout::RowMajor
            && b_ptr.is_multiple_of(16)
            && op.ldb.is_multiple_of(8)
            && c_ptr.is_multiple_of(4)
            && op.ldc.is_multiple_of(2)
            && n.div_ceil(STAGED_WARPS * STRIP) <= MAX_GRID_Y;
        // The kernels for row-major B and C with leading dimensions: the half types' staged kernel, or
        // f32's panel kernel for exact FP32 (both take the same arguments).
        let row_major = if staged {
            // Warps per thread block: as many 32-column strips as n needs, up to 4.
            let warps = n.div_ceil(STRIP).next_power_of_two().min(STAGED_WARPS);
            let name = format!("smat_tiles_{}_staged{warps}", T::NAME);
            let panel = warps * STRIP;
            crate::log::note(|| {
                format!("tiles: {name} (B staged in panels of {panel} columns), {} work items", tiles.items)
            });
            let cfg = Launch {
                grid: (tiles.items as u32, n.div_ceil(panel) as u32, 1),
                block: ((warps * 32) as u32, 1, 1),
                shared_bytes: staged_shared_bytes(panel) as u32,
            };
            Some((name, cfg))
        } else if T::VALUE_TYPE == ValueType::F32 && op.math_mode != SmatMathMode::Tf32x3 && vectorised {
            // Exact FP32 by FMA, a lane four columns of all 16 tile rows; panels of 128 columns, or of
            // 64 / 32 (two / four groups of lanes a warp, each on its own tiles) for narrow C.
            let panel = match n {
                0..=32 => 32,
                33..=64 => 64,
                _ => 128,
            };
            let name = format!("smat_tiles_f32_panel{panel}");
            crate::log::note(|| format!("tiles: {name} (panels of {panel} columns), {} work items", tiles.items));
            let cfg = Launch {
                grid: (tiles.items as u32, n.div_ceil(panel).min(MAX_GRID_Y) as u32, 1),
                block: ((WARPS_PER_BLOCK * 32) as u32, 1, 1),
                shared_bytes: 0,
            };
            Some((name, cfg))
        } else {
            None
        };
        if let Some((name, cfg)) = row_major {
            let f = gpu.function(&SMAT, &name)?;
            let (ldb, ldc) = (op.ldb as i64, op.ldc as i64);
            // SAFETY: the argument list matches smat_tiles_*_staged* and smat_tiles_f32_panel*; B and
            // C are row-major with the alignment each kernel needs (`staged`, `vectorised`), every
            // pointer covers what the kernel reads or writes for these sizes (the partial sums:
            // slots × tile rows × n), and the shared memory is what the staged kernel lays out.
            unsafe {
                launch(
                    &f,
                    cfg,
                    stream,
                    kernel_args![
                        &n_i, &items, &columns, &values, &partial, &out_rows, &alpha, &b_ptr, &ldb, &beta, &c_ptr, &ldc
                    ],
                )
            }?;
        } else {
            // f32 tiles in 3xTF32 on tensor cores when the handle asks; exact FP32 by FMA, a column a
            // lane, for other layouts.
            let mode =
                if T::VALUE_TYPE == ValueType::F32 && op.math_mode == SmatMathMode::Tf32x3 { "_3xtf32" } else { "" };
            let name = format!("smat_tiles_{}{mode}", T::NAME);
            let f = gpu.function(&SMAT, &name)?;
            let strips = n.div_ceil(STRIP);
            crate::log::note(|| format!("tiles: {name} (B unstaged), {} work items", tiles.items));
            let cfg = Launch {
                grid: (tiles.items as u32, strips.div_ceil(WARPS_PER_BLOCK).min(MAX_GRID_Y) as u32, 1),
                block: ((WARPS_PER_BLOCK * 32) as u32, 1, 1),
                shared_bytes: 0,
            };
            // SAFETY: the argument list matches smat_tiles_* (α / β are float for the half types,
            // i.e. T::Compute); every pointer covers what the kernel reads or writes for these sizes.
            unsafe {
                launch(
                    &f,
                    cfg,
                    stream,
                    kernel_args![
                        &n_i, &items, &columns, &values, &partial, &out_rows, &alpha, &b_ptr, &b_rs, &b_cs, &beta,
                        &c_ptr, &c_rs, &c_cs
                    ],
                )
            }?;
        }
        if tiles.splits > 0 {
            let f = gpu.function(&SMAT, &format!("smat_finish_tiles_{}", T::NAME))?;
            crate::log::note(|| {
                format!("{} block rows in {} runs summed by smat_finish_tiles_{}", tiles.splits, tiles.slots, T::NAME)
            });
            let (splits_i, split_list, tile_rows_i) = (tiles.splits as i32, tiles.split_list, tiles.tile_rows as i32);
            // SAFETY: matches smat_finish_tiles_*; one thread per (row of a split block row, column).
            unsafe {
                launch(
                    &f,
                    one_thread_each(tiles.splits * tiles.tile_rows * n),
                    stream,
                    kernel_args![
                        &splits_i,
                        &split_list,
                        &tile_rows_i,
                        &out_rows,
                        &partial,
                        &alpha,
                        &beta,
                        &c_ptr,
                        &c_rs,
                        &c_cs,
                        &n_i
                    ],
                )
            }?;
        }
        if let Some(workspace) = workspace {
            workspace.release(stream)?;
        }
    }

    let csr = &resident.rows;
    if csr.rows > 0 {
        // The 16-byte form also addresses a row of B by a 32-bit byte pitch.
        let (suffix, columns_per_lane) =
            if vectorised && pitch_fits_32_bits::<T>(op.ldb) { ("_vec", T::COLUMNS_PER_LOAD) } else { ("", 1) };
        let lanes = lanes_per_row(n, columns_per_lane);
        let lanes_i = lanes as i32;
        let blocks_for = |items: usize| (items * lanes).div_ceil(ROW_THREADS) as u32;
        // One grid row per chunk of lanes · columns_per_lane columns of B and C.
        let chunks = n.div_ceil(lanes * columns_per_lane).min(MAX_GRID_Y) as u32;
        let launch_cfg = |items: usize| Launch {
            grid: (blocks_for(items), chunks, 1),
            block: (ROW_THREADS as u32, 1, 1),
            shared_bytes: 0,
        };

        let kernel = if csr.rows_per_group > 1 { "smat_short_rows" } else { "smat_rows" };
        // A group's run of short rows is at most one a lane (the kernel's R).
        let rows_per_group = csr.rows_per_group.min(lanes);
        let f = gpu.function(&SMAT, &format!("{kernel}_{}{suffix}", T::NAME))?;
        crate::log::note(|| {
            format!("CSR rows: {kernel}_{}{suffix}, {lanes} lanes a row, {rows_per_group} rows a group", T::NAME)
        });
        let (rows_i, long_limit) = (csr.rows as i32, csr.long_limit as i32);
        let (row_ptr, out_rows, col_ind, values) = (csr.row_ptr, csr.out_rows, csr.col_ind, csr.values);
        // SAFETY: the argument list matches smat_rows_*; every pointer covers what the kernel reads
        // or writes for these sizes.
        unsafe {
            launch(
                &f,
                launch_cfg(csr.rows.div_ceil(rows_per_group)),
                stream,
                kernel_args![
                    &rows_i,
                    &row_ptr,
                    &out_rows,
                    &col_ind,
                    &values,
                    &long_limit,
                    &lanes_i,
                    &alpha,
                    &b_ptr,
                    &b_rs,
                    &b_cs,
                    &beta,
                    &c_ptr,
                    &c_rs,
                    &c_cs,
                    &n_i
                ],
            )
        }?;

        if csr.segments > 0 {
            let partial_bytes = partial_bytes::<T::Compute>(csr.segments, n, "the long-row partial sums")?;
            let workspace =
                HeldWorkspace::take(&csr.partials, gpu, stream, partial_bytes, "the long-row partial sums")?;
            let partial_ptr = workspace.ptr();
            let f = gpu.function(&SMAT, &format!("smat_segments_{}{suffix}", T::NAME))?;
            crate::log::note(|| {
                let (long, segments) = (csr.long_rows, csr.segments);
                format!(
                    "{long} long rows in {segments} segments: smat_segments_{0}{suffix}, smat_finish_long_{0}",
                    T::NAME
                )
            });
            let (segments_i, seg_bounds) = (csr.segments as i32, csr.seg_bounds);
            // SAFETY: matches smat_segments_*; partial holds segments × n compute values.
            unsafe {
                launch(
                    &f,
                    launch_cfg(csr.segments),
                    stream,
                    kernel_args![
                        &segments_i,
                        &seg_bounds,
                        &col_ind,
                        &values,
                        &lanes_i,
                        &b_ptr,
                        &b_rs,
                        &b_cs,
                        &partial_ptr,
                        &n_i
                    ],
                )
            }?;
            let f = gpu.function(&SMAT, &format!("smat_finish_long_{}", T::NAME))?;
            let (long_i, long_seg_ptr, long_out_rows) = (csr.long_rows as i32, csr.long_seg_ptr, csr.long_out_rows);
            // SAFETY: matches smat_finish_long_*; one thread per (long row, column).
            unsafe {
                launch(
                    &f,
                    one_thread_each(csr.long_rows * n),
                    stream,
                    kernel_args![
                        &long_i,
                        &long_seg_ptr,
                        &long_out_rows,
                        &partial_ptr,
                        &alpha,
                        &beta,
                        &c_ptr,
                        &c_rs,
                        &c_cs,
                        &n_i
                    ],
                )
            }?;
            workspace.release(stream)?;
        }
    }
    drop(b);
    c.finish()
}

/// The CUDA backend reads a device-resident CSR through host copies, keeps an analysed matrix's
/// storage on the handle's device only ([`DeviceStorage`]) and multiplies there.
impl<T: GpuSpmmElement> SmatBackend<T> for CudaExecutor {
    unsafe fn csr_to_host<'a>(&mut self, csr: &RawCsr<T>) -> Result<HostCsr<'a, T>> {
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        unsafe {
            Ok(HostCsr {
                row_ptr: host_view(&gpu, stream, csr.row_ptr, csr.rows + 1, "rowPtr")?,
                col_ind: host_view(&gpu, stream, csr.col_ind, csr.nnz, "colInd")?,
                values: host_view(&gpu, stream, csr.values, csr.nnz, "values")?,
            })
        }
    }

    fn prepare(&mut self, _info: &MatrixInfo, storage: Storage<T::Compute>) -> Result<Box<dyn PreparedBlocks>> {
        let gpu = self.lead()?;
        gpu.bind()?;
        Ok(Box::new(DeviceStorage::upload::<T>(&gpu, self.stream(), &storage)?))
    }

    unsafe fn spmm(&mut self, a: &SmatMatrix, product: &Product<T>) -> Result<()> {
        let resident = a.blocks::<DeviceStorage>().ok_or_else(|| foreign_matrix(a, "CUDA"))?;
        let gpu = self.lead()?;
        gpu.bind()?;
        unsafe { spmm(&gpu, self.stream(), a, resident, product) }
    }
}

/// Whether rows `ld` elements of T apart are at most `i32::MAX` bytes apart (what the 16-byte CSR
/// kernels address B by).
fn pitch_fits_32_bits<T>(ld: usize) -> bool {
    ld.checked_mul(std::mem::size_of::<T>()).is_some_and(|bytes| bytes <= i32::MAX as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_form_takes_b_rows_at_most_2_gib_apart() {
        assert!(pitch_fits_32_bits::<half::f16>(i32::MAX as usize / 2));
        assert!(!pitch_fits_32_bits::<half::f16>(i32::MAX as usize / 2 + 1));
        assert!(pitch_fits_32_bits::<f64>(128));
        assert!(!pitch_fits_32_bits::<f64>(usize::MAX / 4));
    }

    #[test]
    fn packed_arrays_lie_aligned_one_after_another() {
        let long: Vec<i32> = (0..3 * PACKED_CHUNK as i32 + 5).collect();
        let mut packed = Packed::default();
        let offsets = [
            packed.push(3, "bytes", |i| i as u8 + 1).unwrap(),
            packed.push(0, "nothing", |_| 0u64).unwrap(),
            packed.push(long.len(), "indices", |i| long[i]).unwrap(),
            packed.push(2, "pairs", |i| [i as i32, -(i as i32)]).unwrap(),
        ];
        assert_eq!(offsets, [0, 256, 256, 256 + (4 * long.len()).next_multiple_of(256)]);
        let bytes = packed.bytes().unwrap();
        assert_eq!(bytes.len(), offsets[3] + 16);
        assert_eq!(bytes[..3], [1, 2, 3]);
        assert!(bytes[3..256].iter().all(|&b| b == 0), "padding is cleared");
        let read = |at: usize| i32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        assert!((0..long.len()).all(|i| read(offsets[2] + 4 * i) == long[i]));
        assert_eq!(
            [read(offsets[3]), read(offsets[3] + 4), read(offsets[3] + 8), read(offsets[3] + 12)],
            [0, 0, 1, -1]
        );
    }

    #[test]
    fn the_tile_schedule_cuts_long_block_rows_into_ordered_runs() {
        // 24 tiles: runs of MIN_TILES_PER_ITEM; the 17-tile block row becomes 5 runs of 3 or 4.
        let schedule = TileSchedule::new(&[0, 3, 20, 24]);
        let expected_items =
            [[0, 0, 3, -1], [1, 3, 6, 0], [1, 6, 9, 1], [1, 9, 13, 2], [1, 13, 16, 3], [1, 16, 20, 4], [2, 20, 24, -1]];
        assert_eq!(schedule, TileSchedule { items: expected_items.to_vec(), splits: vec![[1, 0, 5]], slots: 5 });

        // Many short block rows and one long one: only the long one is cut, into runs no longer than
        // its share, which cover it in order.
        let mut ptr = vec![0];
        for block_row in 0..10_000 {
            ptr.push(ptr[block_row] + if block_row == 777 { 500 } else { 3 });
        }
        let schedule = TileSchedule::new(&ptr);
        let run = ptr[10_000].div_ceil(TILE_ITEMS);
        assert_eq!(schedule.splits, [[777, 0, 500usize.div_ceil(run) as i32]]);
        assert_eq!(schedule.items.len(), 9_999 + schedule.slots);
        let mut next_tile = 0;
        for item in &schedule.items {
            assert_eq!(item[1], next_tile);
            assert!(item[2] > item[1] && (item[2] - item[1]) as usize <= run, "{item:?}");
            assert_eq!(item[3] >= 0, item[0] == 777, "{item:?}");
            next_tile = item[2];
        }
        assert_eq!(next_tile as usize, ptr[10_000]);
    }

    /// A CSR part whose rows have the given lengths; entry e of caller row r holds column r·100 + e
    /// and value −e, so that the test can tell where each entry went.
    fn rows_of_lengths(lengths: &[usize]) -> RowsCsr<f64> {
        let mut csr = RowsCsr { out_rows: vec![], row_ptr: vec![0], col_ind: vec![], values: vec![] };
        for (r, &length) in lengths.iter().enumerate() {
            csr.out_rows.push(2 * r as u32);
            for e in 0..length {
                csr.col_ind.push((r * 100 + e) as u32);
                csr.values.push(-(e as f64));
            }
            csr.row_ptr.push(csr.col_ind.len());
        }
        csr
    }

    #[test]
    fn skewed_rows_go_longest_first_with_their_entries_and_long_rows_last() {
        // Lengths 1, 1, 1, 1, 1, 30 (deviation 11.2 over mean 5.8) and one long row (50 > 40).
        let csr = rows_of_lengths(&[1, 30, 50, 1, 0, 1, 1, 1]);
        let order = device_row_order(&csr, 40).unwrap().expect("skewed");
        let sorted = csr.reordered(&order).unwrap();
        assert_eq!(sorted.out_rows, [2, 0, 6, 10, 12, 14, 8, 4]);
        assert_eq!(sorted.row_ptr, [0, 30, 31, 32, 33, 34, 35, 35, 85]);
        for (at, &out) in sorted.out_rows.iter().enumerate() {
            let r = out as usize / 2;
            let entries = sorted.row_ptr[at]..sorted.row_ptr[at + 1];
            assert_eq!(entries.len(), csr.row_ptr[r + 1] - csr.row_ptr[r]);
            for (e, at) in entries.enumerate() {
                assert_eq!((sorted.col_ind[at], sorted.values[at]), ((r * 100 + e) as u32, -(e as f64)));
            }
        }
        // Lengths that spread less than their mean keep the caller's order; so do empty parts.
        assert!(longest_first(&rows_of_lengths(&[3, 5, 4, 9, 2, 60]), 40).unwrap().is_none());
        assert!(longest_first(&rows_of_lengths(&[0, 0, 0]), 40).unwrap().is_none());
        assert!(longest_first(&rows_of_lengths(&[]), 40).unwrap().is_none());
    }

    /// A band of half-width 2 over 1000 rows whose caller row i is band row `perm[i]`, every 7th row
    /// empty.
    fn permuted_band(perm: &[usize]) -> RowsCsr<f64> {
        let mut csr = RowsCsr { out_rows: vec![], row_ptr: vec![0], col_ind: vec![], values: vec![] };
        for (i, &r) in perm.iter().enumerate() {
            csr.out_rows.push(i as u32);
            if r % 7 != 3 {
                // Columns in decreasing order: the first is not the first given.
                for c in (r.saturating_sub(2)..(r + 3).min(perm.len())).rev() {
                    csr.col_ind.push(c as u32);
                    csr.values.push(r as f64);
                }
            }
            csr.row_ptr.push(csr.col_ind.len());
        }
        csr
    }

    #[test]
    fn rows_out_of_order_go_by_their_first_column() {
        let identity: Vec<usize> = (0..1000).collect();
        assert!(device_row_order(&permuted_band(&identity), 100).unwrap().is_none());
        // A fixed scrambling: caller row i is band row 387·i mod 1000.
        let perm: Vec<usize> = (0..1000).map(|i| 387 * i % 1000).collect();
        let csr = permuted_band(&perm);
        let order = device_row_order(&csr, 100).unwrap().expect("scattered");
        let sorted = csr.reordered(&order).unwrap();
        // The band's rows by first column (rows 0–2 all start at column 0), then the empty ones in
        // caller order; each with its own entries.
        let band_rows: Vec<usize> = order.iter().map(|&i| perm[i as usize]).collect();
        let empty: Vec<usize> = perm.iter().copied().filter(|r| r % 7 == 3).collect();
        let (full, tail) = band_rows.split_at(band_rows.len() - empty.len());
        assert_eq!(tail, empty);
        let mut expected: Vec<usize> = identity.iter().copied().filter(|r| r % 7 != 3).collect();
        assert!(full.windows(2).all(|w| w[0].saturating_sub(2) <= w[1].saturating_sub(2)), "{full:?}");
        assert_eq!(full[3..], expected.split_off(3));
        // Rows of random columns span most of the columns: no new order.
        let mut random = RowsCsr { out_rows: vec![], row_ptr: vec![0], col_ind: vec![], values: vec![] };
        let mut state = 12345u64;
        for i in 0..1000 {
            random.out_rows.push(i);
            for _ in 0..5 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                random.col_ind.push((state >> 33) as u32 % 100_000);
                random.values.push(1.0);
            }
            random.row_ptr.push(random.col_ind.len());
        }
        assert!(device_row_order(&random, 100).unwrap().is_none());
        for (at, &i) in order.iter().enumerate() {
            assert_eq!(sorted.out_rows[at], i);
            let entries = sorted.row_ptr[at]..sorted.row_ptr[at + 1];
            assert!(sorted.values[entries].iter().all(|&v| v == perm[i as usize] as f64));
        }
    }
}

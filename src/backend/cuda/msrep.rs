//! MSREP SpMV on the GPUs: partitions resident on their devices, the partitions of a device in one
//! launch of the pCSR batch kernels ([`batch`]), and the merge of `crate::msrep::merge` on the lead
//! device (the handle's first device, where the caller's stream lives and where y ends up). A
//! row-sorted pCOO partition holds the entries of a pCSR partition and runs as one, from row
//! pointers made when it is placed; a device's pCSC partitions run as pCSR partitions of whole rows
//! once their entries are sorted by rows when they are placed ([`csc_rows`]).
//!
//! Streams: partitions on the lead device run on the caller's stream and finish their own rows of y
//! in place. Every other device has two streams the matrix owns there. x reaches it in chunks, each
//! pushed by its sender. Where the devices read mostly different columns of x (a band, a stencil),
//! the lead device sends each device its own columns, on a stream of its own per device, all
//! devices at once. Otherwise x travels along the chain of devices: the first device receives from
//! the lead device's x, each next one from the device before it (which sends on its copy stream),
//! each chunk once it has arrived there, and each device only the columns it and the devices after
//! it read, so the lead sends x once whatever the number of devices. On its compute stream, the row
//! blocks of its partitions start as the chunks holding the columns they read arrive, the rest of
//! its work once all of its columns are in. pCSR partitions write their finished rows of y, and
//! the raw sums of their split rows, straight into the lead device's memory (peer access); where
//! the device cannot reach that memory, they write raw row sums that are copied to the lead device
//! and finished there. A device's pCSC rows sum into one rows-long partial vector per device (the
//! paper's, one a GPU, Algorithm 5), summed on the lead device as y = α·Σ + β·y; with a single
//! device (one side on the caller's stream) they finish y themselves. Each device records its
//! `ready` event, which the caller's stream waits for before merging the rows split between
//! partitions.
//!
//! Everything a call needs besides x and y (partition data, partial vectors, staging, merge
//! metadata, x copies on other devices) is allocated when the matrix becomes resident, so an SpMV
//! allocates only the staging of host x / y (and, once, the raw sums of a device that cannot write
//! the caller's y).

mod batch;
mod csc_rows;

use super::kernels::MSREP;
use super::memory::{self, DeviceBuffer, DeviceInput, DeviceOutput};
use super::timeline::Timeline;
use super::{CudaExecutor, Event, GpuDevice, Launch, Stream, TrackedEvent, driver_error, launch};
use crate::error::Result;
use crate::executor::TestHooks;
use crate::kernel_args;
use crate::msrep::contract::MsrepBackend;
use crate::msrep::merge::{RowSegment, row_segments};
use crate::msrep::partition::PartitionBounds;
use crate::msrep::{MsrepElement, PartitionData, PartitionedMatrix};
use crate::scalar::{ComputeScalar, Element};
use crate::types::SparseFormat;
use cudarc::driver::CudaStream;
use cudarc::driver::result as drv;
use cudarc::driver::sys::CUdeviceptr;
use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

const BLOCK: u32 = 256;

/// x travels along the chain of devices in at most this many chunks (of the whole of x)...
const X_CHUNKS: usize = 8;
/// ...of at least this many bytes, so that a small x costs few copies and events.
const X_CHUNK_MIN_BYTES: usize = 4 << 20;
/// The lead device sends each side its own columns directly (a star) where the sides' column spans
/// add up to at most this multiple of their hull, so that a star sends hardly more of x out of the
/// lead device than the chain does; otherwise x passes along the chain.
const STAR_OVERLAP: f64 = 1.25;

/// A device that holds partitions, with the streams the matrix owns there.
struct DeviceSide {
    gpu: Arc<GpuDevice>,
    /// Which of its device's sides this is: 0, or more under [`TestHooks::msrep_sides_per_device`].
    slot: usize,
    /// Recorded on `stream` once this device's results are in the lead device's memory or on their
    /// way there.
    ready: Event,
    stream: Arc<CudaStream>,
    /// Passes x on to the next device of the chain, beside the partitions' work on `stream`.
    copy_stream: Arc<CudaStream>,
    /// The entries of x its partitions read (the union of their column ranges): all a copy of x on
    /// this device needs, so a banded matrix sends each device only its slice of x per call.
    x_span: Range<usize>,
    /// Whether this device's kernels can reach the lead device's memory (peer access).
    reaches_lead: bool,
    /// pCSC: the rows its batches cover, those of its partial vector. With several sides, the rows
    /// from the first that its partitions hold an entry of to the last (a band's or a stencil's
    /// column block touches the rows beside it only); with one, every row, since it may finish y.
    csc_rows: Range<usize>,
}

impl DeviceSide {
    fn stream(&self) -> Stream {
        Stream(self.stream.cu_stream())
    }

    fn copy_stream(&self) -> Stream {
        Stream(self.copy_stream.cu_stream())
    }

    /// pCSC: where the sums of batch `b` (of this side) go in the side's partial vector at
    /// `partial`, of `size`-byte elements over [`DeviceSide::csc_rows`].
    fn partial_sums_of(&self, b: &batch::CsrBatch, partial: CUdeviceptr, size: usize) -> CUdeviceptr {
        partial + ((b.first_row() - self.csc_rows.start) * size) as u64
    }
}

/// How x reaches a side on the multi-device path: chunk by chunk from the lead device's x or from
/// the copy of the side before it in the chain.
struct XRoute {
    /// This side's copy of x (only `chunks`' columns are written).
    copy: DeviceBuffer,
    /// Where its chunks come from, and the stream that sends them.
    from: XSource,
    /// This side's columns (sent by the lead device) or the hull of its columns and those of every
    /// later side in the chain, cut at multiples of the chunk width, in order; the first chunk's
    /// cell is `first_cell`.
    chunks: Vec<XChunk>,
    first_cell: usize,
    /// `chunks[own]` is the last chunk holding columns this side reads: the work that reads columns
    /// anywhere (stream blocks, long-row chunks) starts once it has arrived.
    own: usize,
}

/// The sender of a side's chunks of x, which pushes them on a stream of its own device (measured a
/// little faster than the receiving device pulling them).
enum XSource {
    /// The lead device's x, sent on a stream of the lead device kept for this side.
    Lead(Arc<CudaStream>),
    /// The copy of x of the side before it in the chain, sent on that side's copy stream.
    Side(usize),
}

/// A piece of x on its way to a side: its columns (within one cell of the chunk width), and
/// the event recorded once it has arrived.
struct XChunk {
    cols: Range<usize>,
    arrived: Event,
}

/// The raw row sums of a pCSR batch whose device cannot write the lead device's memory: on its
/// device, their copy on the lead device, and the batch's partition table there for the finish.
struct RawSums {
    raw: DeviceBuffer,
    staging: DeviceBuffer,
    parts: DeviceBuffer,
}

/// What depends on which device leads (merges): partial vectors, staging, merge metadata, events.
struct LeadSide {
    ordinal: usize,
    /// Per side: its results travel to the lead device through staging (another device, or the
    /// test hook).
    staged: Vec<bool>,
    /// Per side: how x reaches it, when staged.
    x_routes: Vec<Option<XRoute>>,
    /// pCSC, per side (where the sides' sums are merged): the partial vector its batches write, of
    /// its rows (`DeviceSide::csc_rows`), and its lead copy.
    accumulators: Vec<Option<DeviceBuffer>>,
    accumulator_staging: Vec<Option<DeviceBuffer>>,
    /// pCSC: each side's vector summed by the merge and its rows (`MsrepCscSource`, one a side), on
    /// the lead device.
    csc_sources: Option<DeviceBuffer>,
    /// Per pCSR batch: its raw sums on the way to the lead device, made at the first call that
    /// needs them (a staged side that cannot write y).
    batch_raw_sums: Vec<Option<RawSums>>,
    /// Two slots per partition: raw sums of its split first and last row.
    shared_sums: Option<DeviceBuffer>,
    /// The merge of rows split between partitions or in none ([`MergeTable`]), where there are such
    /// rows: the table on the device, and the arrays and counter it points to.
    merge: Option<Merge>,
    x_ready: Event,
    /// Recorded on the caller's stream at the end of every SpMV: the next call on another stream and
    /// the matrix's destruction wait for it, as the matrix's buffers are reused.
    done: TrackedEvent,
    /// The lead device's own stream for the allocations above that live there.
    alloc_stream: Arc<CudaStream>,
}

/// The merge's table as the kernels read it (`MsrepMerge` in kernels/msrep.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct MergeTable {
    shared_count: i32,
    rows: CUdeviceptr,
    first: CUdeviceptr,
    slot: CUdeviceptr,
    runs: i32,
    run_bounds: CUdeviceptr,
    finished: CUdeviceptr,
}

/// The merge of the rows split between partitions (shared rows) and of those in no partition, on the
/// lead device: shared row i is `rows[i]`, the slots of its partitions' sums `slots[first[i]..first[i +
/// 1]]` in partition order (as the CPU merge adds them); the rows in no partition as runs, two bounds
/// a run; `finished` counts the shared sums a merging batch launch has written (zero between calls);
/// `table` points the kernels at all of them.
struct Merge {
    table: DeviceBuffer,
    /// Threads the merge has work for: one a shared row, and one a row of the longest run.
    threads: usize,
    /// Whether a batch launch may merge at its end: shared rows only (its last writer merges alone).
    in_batch: bool,
    _rows: DeviceBuffer,
    _first: DeviceBuffer,
    _slots: DeviceBuffer,
    _run_bounds: DeviceBuffer,
    _finished: DeviceBuffer,
}

/// What [`Merge`] uploads, built on the host.
#[derive(Debug, PartialEq, Eq)]
struct MergeLists {
    shared_rows: Vec<i32>,
    first: Vec<i32>,
    slots: Vec<i32>,
    run_bounds: Vec<i32>,
    longest_run: usize,
}

impl MergeLists {
    /// The lists for `rows` rows cut by `bounds`: shared rows from the partitions' flags, rows in no
    /// partition from the merged segments ([`row_segments`]) less the shared rows.
    fn of(bounds: &[PartitionBounds], rows: usize) -> MergeLists {
        let mut contributions: Vec<(usize, i32)> = Vec::new();
        for (p, b) in bounds.iter().enumerate() {
            for row in b.shared_majors() {
                let slot = if b.start_flag && row == b.start_major { 0 } else { 1 };
                contributions.push((row, (2 * p + slot) as i32));
            }
        }
        // Stable: contributions to one row stay in partition order.
        contributions.sort_by_key(|&(row, _)| row);
        let (mut shared_rows, mut first) = (Vec::new(), Vec::new());
        for (k, &(row, _)) in contributions.iter().enumerate() {
            if shared_rows.last() != Some(&(row as i32)) {
                shared_rows.push(row as i32);
                first.push(k as i32);
            }
        }
        first.push(contributions.len() as i32);
        let slots = contributions.iter().map(|&(_, s)| s).collect();
        let (mut run_bounds, mut longest_run) = (Vec::new(), 0);
        let mut run = |start: usize, end: usize| {
            if end > start {
                run_bounds.extend([start as i32, end as i32]);
                longest_run = longest_run.max(end - start);
            }
        };
        for segment in row_segments(bounds, rows) {
            if let RowSegment::Merged { rows } = segment {
                let mut start = rows.start;
                let first_shared = shared_rows.partition_point(|&r| (r as usize) < rows.start);
                for &row in shared_rows[first_shared..].iter().take_while(|&&r| (r as usize) < rows.end) {
                    run(start, row as usize);
                    start = row as usize + 1;
                }
                run(start, rows.end);
            }
        }
        MergeLists { shared_rows, first, slots, run_bounds, longest_run }
    }
}

impl Merge {
    /// The merge of `rows` rows cut by `bounds`, uploaded to `lead`; None where every row belongs to
    /// one partition only.
    fn build(bounds: &[PartitionBounds], rows: usize, lead: &Arc<GpuDevice>, stream: Stream) -> Result<Option<Merge>> {
        let lists = MergeLists::of(bounds, rows);
        if lists.shared_rows.is_empty() && lists.run_bounds.is_empty() {
            return Ok(None);
        }
        let upload =
            |data: &[i32], what: &str| DeviceBuffer::from_host(lead, data, stream, what).map(DeviceBuffer::resident);
        let rows_buffer = upload(&lists.shared_rows, "MSREP shared rows")?;
        let first_buffer = upload(&lists.first, "MSREP shared rows")?;
        let slots_buffer = upload(&lists.slots, "MSREP shared rows")?;
        let runs_buffer = upload(&lists.run_bounds, "MSREP rows in no partition")?;
        let finished = DeviceBuffer::zeroed(lead, 4, stream, "MSREP merge count")?.resident();
        let table = MergeTable {
            shared_count: lists.shared_rows.len() as i32,
            rows: rows_buffer.ptr(),
            first: first_buffer.ptr(),
            slot: slots_buffer.ptr(),
            runs: (lists.run_bounds.len() / 2) as i32,
            run_bounds: runs_buffer.ptr(),
            finished: finished.ptr(),
        };
        Ok(Some(Merge {
            table: DeviceBuffer::from_host(lead, &[table], stream, "MSREP merge table")?.resident(),
            threads: lists.shared_rows.len().max(lists.longest_run),
            in_batch: lists.run_bounds.is_empty(),
            _rows: rows_buffer,
            _first: first_buffer,
            _slots: slots_buffer,
            _run_bounds: runs_buffer,
            _finished: finished,
        }))
    }
}

/// The GPU side of a partitioned matrix. Field order is drop order: lead-side buffers (freed on
/// side and lead streams), partition data (side streams), then the side streams themselves.
pub struct GpuResident {
    lead: Option<LeadSide>,
    /// Every partition's bounds as the devices compute them: pCSR partitions stretched over the rows
    /// in no partition beside them ([`stretched_over_empty_rows`]).
    bounds: Vec<PartitionBounds>,
    batches: Vec<batch::CsrBatch>,
    sides: Vec<DeviceSide>,
    stage_lead: bool,
    /// Test hook: other devices' pCSR results travel as raw sums even where they could write y.
    partials_through_copies: bool,
}

impl std::fmt::Debug for GpuResident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let devices: Vec<_> = self.sides.iter().map(|s| s.gpu.ordinal).collect();
        write!(f, "GpuResident {{ batches: {}, devices: {devices:?} }}", self.batches.len())
    }
}

impl Drop for GpuResident {
    fn drop(&mut self) {
        // Buffers may still be in use by a queued SpMV; wait for it before they are freed. Errors mean
        // a broken context, already reported by the call that broke it.
        if let Some(lead) = &self.lead
            && lead.done.is_recorded()
        {
            let _ = lead.done.synchronize();
        }
        for side in &self.sides {
            let _ = side.gpu.bind().and_then(|_| {
                side.stream
                    .synchronize()
                    .and_then(|_| side.copy_stream.synchronize())
                    .map_err(driver_error("synchronizing"))
            });
        }
    }
}

/// The smallest range holding both `a` and `b` (an empty range holds nothing).
fn spanning(a: &Range<usize>, b: &Range<usize>) -> Range<usize> {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.clone(),
        (false, true) => a.clone(),
        (false, false) => a.start.min(b.start)..a.end.max(b.end),
    }
}

fn sync_stream(gpu: &GpuDevice, stream: &CudaStream) -> Result<()> {
    gpu.synchronize(Stream(stream.cu_stream()))
}

/// Launches kernel `name` of kernels/msrep.cu on `gpu` (bound first: the layout and the sort run on
/// each side's device in turn) with `cfg` on `stream`.
///
/// # Safety
/// `args` must be the kernel's arguments, every device pointer among them valid for what it accesses.
unsafe fn launch_on(
    gpu: &GpuDevice,
    name: &str,
    cfg: Launch,
    stream: Stream,
    args: &mut [*mut std::ffi::c_void],
) -> Result<()> {
    let f = gpu.function(&super::kernels::MSREP, name)?;
    gpu.bind()?;
    unsafe { super::launch(&f, cfg, stream, args) }
}

fn grid_for(gpu: &GpuDevice, threads: usize) -> Launch {
    let blocks = threads.div_ceil(BLOCK as usize).clamp(1, gpu.multiprocessors * 32);
    Launch { grid: (blocks as u32, 1, 1), block: (BLOCK, 1, 1), shared_bytes: 0 }
}

/// Copies between devices (or within one) on `stream`, which belongs to the source's device.
fn peer_copy(
    dst: CUdeviceptr,
    dst_gpu: &GpuDevice,
    src: CUdeviceptr,
    src_gpu: &GpuDevice,
    bytes: usize,
    stream: Stream,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    unsafe { drv::memcpy_peer_async(dst_gpu.ctx.cu_ctx(), dst, src_gpu.ctx.cu_ctx(), src, bytes, stream.0) }
        .map_err(driver_error("copying between devices"))
}

/// pCSR bounds with each non-empty partition's rows stretched over the rows in no partition before
/// it (empty rows after the previous partition's last entry, or at the top) and, for the last one,
/// after it: the batch kernel then finishes those rows (β·y) itself, so that unless rows are split
/// between partitions there is nothing to merge (R-MAT's empty leading rows cost a 3 µs merge kernel
/// a call otherwise, ncu on an H100), and split rows alone the batch launch merges itself
/// ([`Merge::in_batch`]). A partition whose first row is split keeps its start.
fn stretched_over_empty_rows(bounds: &[PartitionBounds], rows: usize) -> Vec<PartitionBounds> {
    let mut stretched = bounds.to_vec();
    let mut covered = 0;
    let mut last = None;
    for (k, b) in stretched.iter_mut().enumerate().filter(|(_, b)| b.nnz() > 0) {
        if !b.start_flag {
            b.start_major = covered;
        }
        covered = b.end_major;
        last = Some(k);
    }
    if let Some(k) = last {
        stretched[k].end_major = rows;
    }
    stretched
}

/// A partition's local pointer array for `stretched` bounds: as many empty rows before and after
/// as its span grew.
fn padded_pointers(local_ptr: &[i32], bounds: &PartitionBounds, stretched: &PartitionBounds) -> Result<Vec<i32>> {
    let before = bounds.start_major - stretched.start_major;
    let after = stretched.end_major - bounds.end_major;
    let mut padded = crate::alloc::try_zeros::<i32>(before + local_ptr.len() + after, "MSREP partition pointers")?;
    let (first, last) = (local_ptr[0], *local_ptr.last().expect("a pointer array has at least one entry"));
    padded[..before].fill(first);
    padded[before..before + local_ptr.len()].copy_from_slice(local_ptr);
    padded[before + local_ptr.len()..].fill(last);
    Ok(padded)
}

/// The row pointers (zero-based positions) of a pCOO partition of `rows` rows whose entries lie in
/// rows `local_row` (relative to its first row, sorted): the same entries as a pCSR partition.
fn coo_pointers(local_row: &[i32], rows: usize) -> Result<Vec<i32>> {
    // Row r's first entry is the first whose row is not below r (entries fit i32: a partition's do).
    crate::alloc::try_collect_par(rows + 1, "MSREP pCOO row pointers", |r| {
        local_row.partition_point(|&row| (row as usize) < r) as i32
    })
}

fn ptr_of(b: &Option<DeviceBuffer>) -> CUdeviceptr {
    b.as_ref().map_or(0, |b| b.ptr())
}

impl GpuResident {
    /// Uploads every non-empty partition to its device (`Partition::device`), on a stream the
    /// matrix owns there, and prepares the merge on `lead`. Waits for the uploads.
    ///
    /// The test hooks [`TestHooks::msrep_stage_lead_partitions`],
    /// [`TestHooks::msrep_long_row_chunks`], [`TestHooks::msrep_slices_at_any_size`] and
    /// [`TestHooks::msrep_csc_sort_on_device_at_any_size`] of `hooks`
    /// apply to the matrix from now on.
    pub fn upload<T: MsrepElement>(a: &PartitionedMatrix<T>, lead: &Arc<GpuDevice>, hooks: &TestHooks) -> Result<Self> {
        let original: Vec<PartitionBounds> = a.partitions.iter().map(|p| p.bounds).collect();
        let bounds = match a.format {
            SparseFormat::Csc => original,
            _ => stretched_over_empty_rows(&original, a.rows),
        };
        // Row pointers of the pCSR and pCOO partitions where they are not the partition's own:
        // stretched over empty rows, or made from a pCOO partition's rows.
        let row_pointers: Vec<Option<Vec<i32>>> = a
            .partitions
            .iter()
            .zip(&bounds)
            .map(|(p, b)| match &p.data {
                PartitionData::Compressed { local_ptr, .. } if *b != p.bounds && a.format == SparseFormat::Csr => {
                    padded_pointers(local_ptr, &p.bounds, b).map(Some)
                }
                PartitionData::Coordinate { local_row, .. } => {
                    let local_ptr = coo_pointers(local_row, p.bounds.major_count())?;
                    match *b != p.bounds {
                        true => padded_pointers(&local_ptr, &p.bounds, b).map(Some),
                        false => Ok(Some(local_ptr)),
                    }
                }
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        let mut resident = GpuResident {
            lead: None,
            bounds,
            batches: Vec::new(),
            sides: Vec::new(),
            stage_lead: hooks.msrep_stage_lead_partitions,
            partials_through_copies: hooks.msrep_partials_through_copies,
        };
        let sides_per_device = hooks.msrep_sides_per_device.max(1);
        // Non-empty partitions placed so far on each device, to spread them over its sides.
        let mut placed: Vec<(usize, usize)> = Vec::new();
        // Batch members of each side (pCSR and pCOO partitions, pCSC rows), gathered into batches once
        // every side is known.
        let mut csr_members: Vec<Vec<batch::Member<T>>> = Vec::new();
        // pCSC partitions of each side, run as rows ([`csc_rows`]), and the index of its first.
        let mut csc_columns: Vec<Vec<csc_rows::Columns<T>>> = Vec::new();
        let mut csc_first: Vec<usize> = Vec::new();
        for (index, p) in a.partitions.iter().enumerate() {
            if p.bounds.nnz() == 0 {
                continue;
            }
            // pCSC partitions read x over their own columns; pCSR and pCOO over the columns they hold,
            // which their batches measure on the device (set below).
            let x_span = match a.format {
                SparseFormat::Csc => p.bounds.start_major..p.bounds.end_major,
                _ => 0..0,
            };
            let ordinal = p.device as usize;
            let slot = match placed.iter_mut().find(|(o, _)| *o == ordinal) {
                Some((_, count)) => {
                    *count += 1;
                    (*count - 1) % sides_per_device
                }
                None => {
                    placed.push((ordinal, 1));
                    0
                }
            };
            let side = match resident.sides.iter().position(|s| s.gpu.ordinal == ordinal && s.slot == slot) {
                Some(s) => {
                    let span = &mut resident.sides[s].x_span;
                    *span = spanning(span, &x_span);
                    s
                }
                None => {
                    let gpu = super::device(ordinal)?;
                    // x travels between devices by peer copies; results are written into the lead
                    // device's memory where this device can reach it.
                    let reaches_lead = gpu.enable_peer_access(lead)?;
                    lead.enable_peer_access(&gpu)?;
                    let (stream, copy_stream) = (gpu.new_stream()?, gpu.new_stream()?);
                    let ready = Event::new(&gpu)?;
                    let side =
                        DeviceSide { gpu, slot, ready, stream, copy_stream, x_span, reaches_lead, csc_rows: 0..0 };
                    resident.sides.push(side);
                    csr_members.push(Vec::new());
                    csc_columns.push(Vec::new());
                    csc_first.push(index);
                    resident.sides.len() - 1
                }
            };
            let (major, minor, values) = match &p.data {
                PartitionData::Compressed { local_ptr, minor_ind, values } => (local_ptr, minor_ind, values),
                PartitionData::Coordinate { local_row, col_ind, values } => (local_row, col_ind, values),
            };
            if a.format != SparseFormat::Csc {
                let (bounds, local_ptr) = (resident.bounds[index], row_pointers[index].as_deref().unwrap_or(major));
                csr_members[side].push(batch::Member { index, bounds, local_ptr, minor, values });
                continue;
            }
            let columns =
                csc_rows::Columns { first_column: p.bounds.start_major, local_ptr: major, rows: minor, values };
            csc_columns[side].push(columns);
        }
        // pCSC: each side's partitions by rows, as pCSR partitions of whole rows covering its rows.
        let by_rows: Vec<Option<csc_rows::ByRows<T>>> = csc_columns
            .iter()
            .zip(&resident.sides)
            .map(|(columns, side)| match columns.is_empty() {
                true => Ok(None),
                false => {
                    let on_device = hooks.msrep_csc_sort_on_device_at_any_size;
                    csc_rows::ByRows::sorted(columns, a.rows, &side.gpu, side.stream(), on_device).map(Some)
                }
            })
            .collect::<Result<_>>()?;
        let several_sides = resident.sides.len() > 1;
        for (side, r) in resident.sides.iter_mut().zip(&by_rows) {
            side.csc_rows = match r {
                Some(r) if several_sides => r.occupied(),
                Some(_) => 0..a.rows,
                None => 0..0,
            };
        }
        let pieces: Vec<Vec<(PartitionBounds, Vec<i32>)>> = by_rows
            .iter()
            .zip(&resident.sides)
            .map(|(r, side)| r.as_ref().map_or(Ok(Vec::new()), |r| r.pieces(side.csc_rows.clone(), i32::MAX as usize)))
            .collect::<Result<_>>()?;
        for (side, (r, pieces)) in by_rows.iter().zip(&pieces).enumerate() {
            let Some(r) = r else { continue };
            let index = csc_first[side];
            for (bounds, local_ptr) in pieces {
                let entries = bounds.start_idx..bounds.end_idx;
                let (minor, values) = (&r.cols[entries.clone()], &r.values[entries]);
                csr_members[side].push(batch::Member { index, bounds: *bounds, local_ptr, minor, values });
            }
        }
        let layout = batch::Layout {
            chunk_long_rows: hooks.msrep_long_row_chunks,
            slices_at_any_size: hooks.msrep_slices_at_any_size,
        };
        for (side, members) in csr_members.into_iter().enumerate() {
            let (gpu, stream) = (resident.sides[side].gpu.clone(), resident.sides[side].stream());
            for group in batch::split_by_size(members) {
                let b = batch::CsrBatch::upload(&gpu, stream, side, &group, layout)?;
                if a.format != SparseFormat::Csc {
                    let span = &mut resident.sides[side].x_span;
                    *span = spanning(span, &b.columns_read());
                }
                resident.batches.push(b);
            }
        }
        resident.ensure_lead(a, lead)?;
        for side in &resident.sides {
            sync_stream(&side.gpu, &side.stream)?;
        }
        Ok(resident)
    }

    /// Builds the lead-dependent buffers for `lead` unless they exist already.
    fn ensure_lead<T: Element>(&mut self, a: &PartitionedMatrix<T>, lead: &Arc<GpuDevice>) -> Result<()> {
        if self.lead.as_ref().is_some_and(|l| l.ordinal == lead.ordinal) {
            return Ok(());
        }
        if let Some(old) = self.lead.take()
            && old.done.is_recorded()
        {
            old.done.synchronize()?;
        }
        // x's copies, partial vectors and sums are of the compute type.
        let size = std::mem::size_of::<T::Compute>();
        let alloc_stream = lead.new_stream()?;
        let lead_stream = Stream(alloc_stream.cu_stream());
        let on_lead =
            |bytes: usize, what: &str| DeviceBuffer::alloc(lead, bytes, lead_stream, what).map(DeviceBuffer::resident);
        let staged: Vec<bool> =
            self.sides.iter().map(|s| s.gpu.ordinal != lead.ordinal || s.slot > 0 || self.stage_lead).collect();
        let x_routes = self.x_routes(&staged, a.cols, size, lead)?;
        let mut accumulators = Vec::new();
        let mut accumulator_staging = Vec::new();
        // pCSC: each side's batches write its partial vector, and the merge sums them (y = β·y where
        // no partition holds an entry), unless the lead device's stream runs them all (one side, not
        // staged): their rows then finish y.
        let csc = a.format == SparseFormat::Csc;
        let partials = csc && (self.sides.len() != 1 || staged[0]);
        for (s, side) in self.sides.iter().enumerate() {
            let side_alloc = |bytes: usize, what: &str| {
                DeviceBuffer::alloc(&side.gpu, bytes, side.stream(), what).map(DeviceBuffer::resident)
            };
            let bytes = side.csc_rows.len() * size;
            accumulators.push(if partials { Some(side_alloc(bytes, "a pCSC partial vector")?) } else { None });
            accumulator_staging.push(if partials && staged[s] {
                Some(on_lead(bytes, "a pCSC partial vector's copy")?)
            } else {
                None
            });
        }
        let mut csc_sources = None;
        if partials {
            // Per side: its partial vector on the lead device, and the rows it covers
            // (MsrepCscSource in kernels/msrep.cu).
            let sources: Vec<u64> = (0..self.sides.len())
                .flat_map(|s| {
                    let values = if staged[s] { ptr_of(&accumulator_staging[s]) } else { ptr_of(&accumulators[s]) };
                    let rows = &self.sides[s].csc_rows;
                    [values, rows.start as u64, rows.end as u64]
                })
                .collect();
            csc_sources = Some(DeviceBuffer::from_host(lead, &sources, lead_stream, "pCSC merge sources")?.resident());
        }
        let mut shared_sums = None;
        let mut merge = None;
        if !csc {
            let bounds = &self.bounds;
            shared_sums = Some(on_lead(2 * bounds.len() * size, "MSREP shared-row sums")?);
            merge = Merge::build(bounds, a.rows, lead, lead_stream)?;
        }
        let lead_side = LeadSide {
            ordinal: lead.ordinal,
            staged,
            x_routes,
            accumulators,
            accumulator_staging,
            csc_sources,
            batch_raw_sums: self.batches.iter().map(|_| None).collect(),
            shared_sums,
            merge,
            x_ready: Event::new(lead)?,
            done: TrackedEvent::new(lead)?,
            alloc_stream,
        };
        // Later calls use these buffers on other streams: the allocations and uploads must be done.
        sync_stream(lead, &lead_side.alloc_stream)?;
        for side in &self.sides {
            sync_stream(&side.gpu, &side.stream)?;
        }
        self.lead = Some(lead_side);
        Ok(())
    }
}

impl<T: MsrepElement> MsrepBackend<T> for CudaExecutor {
    /// Makes a freshly built matrix resident on the executor's devices (msrepCreate* on a CUDA
    /// handle).
    fn place(&mut self, a: &mut PartitionedMatrix<T>) -> Result<()> {
        let lead = self.lead()?;
        lead.bind()?;
        a.resident = Some(Box::new(GpuResident::upload(a, &lead, &self.test_hooks)?));
        Ok(())
    }

    /// x and y are host or device memory of the executor's first device. Returns without waiting
    /// unless y is host memory.
    unsafe fn spmv(
        &mut self,
        a: &mut PartitionedMatrix<T>,
        alpha: T::Compute,
        x: *const T::Compute,
        beta: T::Compute,
        y: *mut T::Compute,
    ) -> Result<()> {
        let lead = self.lead()?;
        lead.bind()?;
        let stream = self.stream();
        // A matrix created on another backend's handle becomes resident at its first CUDA SpMV; one
        // made resident for another lead device gets that device's merge buffers.
        match a.resident.take().map(|r| (r as Box<dyn Any>).downcast::<GpuResident>()) {
            Some(Ok(mut r)) => {
                let built = r.ensure_lead(a, &lead);
                a.resident = Some(r);
                built?;
            }
            _ => a.resident = Some(Box::new(GpuResident::upload(a, &lead, &self.test_hooks)?)),
        }
        lead.bind()?;
        let x_in = unsafe { DeviceInput::new(&lead, stream, x, a.cols, "x") }?;
        let y_out = unsafe { DeviceOutput::new(&lead, stream, y, a.rows, "y", beta != T::Compute::ZERO) }?;
        let resident = a
            .resident
            .as_deref_mut()
            .and_then(|r| (r as &mut dyn Any).downcast_mut::<GpuResident>())
            .expect("made resident above");
        resident.run(a.rows, &lead, stream, alpha, x_in.ptr(), beta, y_out.ptr())?;
        y_out.finish()
    }
}

impl GpuResident {
    #[allow(clippy::too_many_arguments)]
    fn run<T: ComputeScalar>(
        &mut self,
        rows: usize,
        lead: &Arc<GpuDevice>,
        stream: Stream,
        alpha: T,
        x: CUdeviceptr,
        beta: T,
        y: CUdeviceptr,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let sfx = T::VALUE_TYPE.short_name();
        let mut timeline =
            Timeline::start(|| format!("MSREP SpMV, {rows} rows, partitions on {} device side(s)", self.sides.len()));
        let l = self.lead.as_mut().expect("ensure_lead ran");
        l.done.wait_on(stream)?;
        timeline.stamp(lead, stream, || "called".into())?;
        // Only partitions on streams of their own wait for x; with none, recording would cost a
        // driver call per SpMV for nothing.
        if l.staged.contains(&true) {
            l.x_ready.record(stream)?;
            crate::log::note(|| {
                let staged: Vec<usize> =
                    self.sides.iter().zip(&l.staged).filter(|(_, s)| **s).map(|(d, _)| d.gpu.ordinal).collect();
                format!("partitions of devices {staged:?} on streams of their own, x passed along them")
            });
        }
        let shared_sums = ptr_of(&l.shared_sums);
        // Where one launch holds every partition (a single batch of the lead device, on its stream)
        // and the merge has shared rows only, the last thread of that launch to write a shared row's
        // sum merges, instead of a launch of the merge after it.
        let merge_in_batch = self.batches.len() == 1
            && !l.staged[self.batches[0].side]
            && self.batches[0].can_merge()
            && l.merge.as_ref().is_some_and(|m| m.in_batch);
        let batch_merge = match merge_in_batch {
            true => l.merge.as_ref().map_or(0, |m| m.table.ptr()),
            false => 0,
        };
        // The lead device's own partitions first: queued before the host spends its time on the
        // other devices' copies and launches, they start at once.
        lead.bind()?;
        for (s, _) in self.sides.iter().enumerate().filter(|(s, _)| !l.staged[*s]) {
            for b in self.batches.iter().filter(|b| b.side == s) {
                match &l.accumulators[s] {
                    // pCSC: the sums of the rows its batches cover into the side's partial vector.
                    Some(acc) => {
                        let raw = self.sides[s].partial_sums_of(b, acc.ptr(), size);
                        b.launch(lead, stream, x, T::ONE, T::ZERO, 0, 0, raw, b.all_blocks(), 0)?
                    }
                    None => b.launch(lead, stream, x, alpha, beta, y, shared_sums, 0, b.all_blocks(), batch_merge)?,
                }
            }
        }
        timeline.stamp(lead, stream, || "the lead device's own partitions done".into())?;
        // Other devices' partitions run while the lead device works on its own.
        let mut through_copies = vec![false; self.sides.len()];
        for (s, side) in self.sides.iter().enumerate().filter(|(s, _)| l.staged[*s]) {
            let route = l.x_routes[s].as_ref().expect("staged sides have a route");
            let (cs, sender) = match &route.from {
                XSource::Lead(stream) => (Stream(stream.cu_stream()), lead),
                XSource::Side(p) => (self.sides[*p].copy_stream(), &self.sides[*p].gpu),
            };
            // The sender's device while its copies are queued, then the side's for its work.
            sender.bind()?;
            if let XSource::Lead(_) = route.from {
                l.x_ready.wait_on(cs)?;
            }
            for (c, chunk) in route.chunks.iter().enumerate() {
                let (source, source_gpu) = match route.from {
                    XSource::Lead(_) => (x, lead),
                    XSource::Side(p) => {
                        let before = l.x_routes[p].as_ref().expect("staged sides have a route");
                        before.chunks[route.first_cell + c - before.first_cell].arrived.wait_on(cs)?;
                        (before.copy.ptr(), &self.sides[p].gpu)
                    }
                };
                let offset = (chunk.cols.start * size) as u64;
                let (to, bytes) = (route.copy.ptr() + offset, chunk.cols.len() * size);
                peer_copy(to, &side.gpu, source + offset, source_gpu, bytes, cs)?;
                chunk.arrived.record(cs)?;
                if c == route.own {
                    timeline.stamp(sender, cs, || format!("side {s}: its columns of x in"))?;
                }
            }
            side.gpu.bind()?;
            let ss = side.stream();
            let x_copy = route.copy.ptr();
            // pCSR rows are finished on this device and written into y where it can reach y;
            // otherwise their raw sums go to the lead device. pCSC rows' sums go to the side's
            // partial vector.
            let accumulator = ptr_of(&l.accumulators[s]);
            through_copies[s] = self.batches.iter().any(|b| b.side == s)
                && accumulator == 0
                && (self.partials_through_copies
                    || !side.reaches_lead
                    || (side.gpu.ordinal != lead.ordinal && !memory::writable_from(y, &side.gpu)?));
            let mut batch_raw: Vec<u64> = match accumulator {
                0 => vec![0; self.batches.len()],
                _ => self
                    .batches
                    .iter()
                    .map(|b| match b.side == s {
                        true => side.partial_sums_of(b, accumulator, size),
                        false => 0,
                    })
                    .collect(),
            };
            for (k, b) in self.batches.iter().enumerate().filter(|(_, b)| b.side == s && through_copies[s]) {
                batch_raw[k] = raw_sums(&mut l.batch_raw_sums[k], b, side, lead, &l.alloc_stream, size)?.raw.ptr();
            }
            side.gpu.bind()?;
            let launch_batch = |k: usize, blocks: Range<u32>| -> Result<()> {
                let b = &self.batches[k];
                if batch_raw[k] == 0 {
                    b.launch(&side.gpu, ss, x_copy, alpha, beta, y, shared_sums, 0, blocks, 0)
                } else {
                    b.launch(&side.gpu, ss, x_copy, T::ONE, T::ZERO, 0, 0, batch_raw[k], blocks, 0)
                }
            };
            // The row blocks of pCSR batches start as the columns they read arrive, chunk by chunk
            // (a band's or a stencil's rows read only the columns near them), instead of all of
            // them waiting for the side's last chunk; the rest (stream blocks of skewed rows,
            // long-row chunks) wait for all of the side's columns.
            // Per batch, its first row block not launched yet.
            let mut next: Vec<u32> = self.batches.iter().map(|b| b.row_blocks().start).collect();
            for chunk in &route.chunks[..=route.own] {
                chunk.arrived.wait_on(ss)?;
                for (k, b) in self.batches.iter().enumerate().filter(|(_, b)| b.side == s) {
                    let ready = b.row_blocks_ready(chunk.cols.end).end;
                    if ready > next[k] {
                        launch_batch(k, next[k]..ready)?;
                        next[k] = ready;
                    }
                }
            }
            for (k, b) in self.batches.iter().enumerate().filter(|(_, b)| b.side == s) {
                // The leading blocks (long-row chunks, stream blocks) and the row blocks not yet
                // launched.
                let leading = 0..b.row_blocks().start;
                if !leading.is_empty() {
                    launch_batch(k, leading)?;
                }
                if next[k] < b.blocks() {
                    launch_batch(k, next[k]..b.blocks())?;
                }
                if through_copies[s] {
                    let sums = l.batch_raw_sums[k].as_ref().expect("made above");
                    peer_copy(sums.staging.ptr(), lead, sums.raw.ptr(), &side.gpu, b.rows * size, ss)?;
                }
            }
            if let (Some(staging), Some(acc)) = (&l.accumulator_staging[s], &l.accumulators[s]) {
                peer_copy(staging.ptr(), lead, acc.ptr(), &side.gpu, side.csc_rows.len() * size, ss)?;
            }
            timeline.stamp(&side.gpu, ss, || format!("side {s}: its partitions done"))?;
            side.ready.record(ss)?;
        }
        if through_copies.contains(&true) {
            crate::log::note(|| "raw sums of pCSR rows of other devices copied to the lead device".to_string());
        }

        lead.bind()?;
        for (s, side) in self.sides.iter().enumerate().filter(|(s, _)| l.staged[*s]) {
            side.ready.wait_on(stream)?;
            for (k, b) in self.batches.iter().enumerate().filter(|(_, b)| b.side == s && through_copies[s]) {
                let sums = l.batch_raw_sums[k].as_ref().expect("made above");
                b.finish(lead, stream, sums.staging.ptr(), sums.parts.ptr(), alpha, beta, y, shared_sums, sfx)?;
            }
        }

        if l.csc_sources.is_some() {
            let f = lead.function(&MSREP, &format!("msrep_csc_merge_{sfx}"))?;
            let (r, sources, count) = (rows as i32, ptr_of(&l.csc_sources), self.sides.len() as i32);
            unsafe { launch(&f, grid_for(lead, rows), stream, kernel_args![&r, &sources, &count, &alpha, &beta, &y]) }?;
        } else if let Some(merge) = l.merge.as_ref().filter(|_| !merge_in_batch) {
            let f = lead.function(&MSREP, &format!("msrep_merge_rows_{sfx}"))?;
            let table = merge.table.ptr();
            unsafe {
                launch(&f, grid_for(lead, merge.threads), stream, kernel_args![&table, &shared_sums, &alpha, &beta, &y])
            }?;
        }
        l.done.record(stream)?;
        timeline.stamp(lead, stream, || "merged".into())?;
        timeline.print()
    }

    /// How x reaches each staged side, in chunks of at most `cols / X_CHUNKS` columns (at least
    /// `X_CHUNK_MIN_BYTES`). Where the sides read mostly disjoint columns (a band, a stencil: their
    /// spans add up to at most `STAR_OVERLAP` times their hull), the lead device sends each its own
    /// columns at once, all sides in parallel. Otherwise (a graph, whose every side reads nearly all
    /// of x) along the chain of staged sides in order, each receiving the hull of its own columns
    /// and those of every later side from the side before it (the first from the lead device's x),
    /// so that the lead device sends x once and a side forwards a chunk while the next is on its way
    /// to it.
    fn x_routes(
        &self,
        staged: &[bool],
        cols: usize,
        size: usize,
        lead: &Arc<GpuDevice>,
    ) -> Result<Vec<Option<XRoute>>> {
        let chain: Vec<usize> = (0..self.sides.len()).filter(|&s| staged[s]).collect();
        let cell = cols.div_ceil(X_CHUNKS).max(X_CHUNK_MIN_BYTES / size).max(1);
        let spans: usize = chain.iter().map(|&s| self.sides[s].x_span.len()).sum();
        let hull_of =
            |sides: &[usize]| sides.iter().map(|&t| self.sides[t].x_span.clone()).reduce(|a, b| spanning(&a, &b));
        let star = hull_of(&chain).is_some_and(|hull| spans as f64 <= STAR_OVERLAP * hull.len() as f64);
        if chain.len() > 1 {
            crate::log::note(|| match star {
                true => format!("x sent to each of {} device sides by the lead device", chain.len()),
                false => format!("x passed along a chain of {} device sides", chain.len()),
            });
        }
        let mut routes: Vec<Option<XRoute>> = self.sides.iter().map(|_| None).collect();
        for (i, &s) in chain.iter().enumerate() {
            let side = &self.sides[s];
            let (hull, from) = if star {
                (side.x_span.clone(), None)
            } else {
                (hull_of(&chain[i..]).expect("the chain holds s"), i.checked_sub(1).map(|j| chain[j]))
            };
            if let Some(p) = from {
                // Chunks pass from device to device: copies between their memory pools need peer
                // access, or the driver stages them through host memory.
                self.sides[p].gpu.enable_peer_access(&side.gpu)?;
                side.gpu.enable_peer_access(&self.sides[p].gpu)?;
            }
            // The arrival events are the sender's: recorded on the stream that copies.
            let sender = from.map_or(lead, |p| &self.sides[p].gpu);
            let from = match from {
                None => XSource::Lead(lead.new_stream()?),
                Some(p) => XSource::Side(p),
            };
            let first_cell = hull.start / cell;
            let chunks = (first_cell..hull.end.div_ceil(cell))
                .map(|c| {
                    let cols = (c * cell).max(hull.start)..((c + 1) * cell).min(hull.end);
                    Ok(XChunk { cols, arrived: Event::new(sender)? })
                })
                .collect::<Result<Vec<_>>>()?;
            let own = (side.x_span.end - 1) / cell - first_cell;
            let copy = DeviceBuffer::alloc(&side.gpu, cols * size, side.stream(), "a copy of x")?.resident();
            routes[s] = Some(XRoute { copy, from, chunks, first_cell, own });
        }
        Ok(routes)
    }
}

/// The raw sums of pCSR batch `b` of `side` in `slot`, made (and the batch's partition table copied
/// to the lead device) the first time a call needs them.
fn raw_sums<'a>(
    slot: &'a mut Option<RawSums>,
    b: &batch::CsrBatch,
    side: &DeviceSide,
    lead: &Arc<GpuDevice>,
    lead_stream: &CudaStream,
    size: usize,
) -> Result<&'a RawSums> {
    if slot.is_none() {
        let on_lead = Stream(lead_stream.cu_stream());
        let bytes = b.rows * size;
        let sums = RawSums {
            raw: DeviceBuffer::alloc(&side.gpu, bytes, side.stream(), "an MSREP partial vector")?.resident(),
            staging: DeviceBuffer::alloc(lead, bytes, on_lead, "an MSREP partial vector's copy")?.resident(),
            parts: DeviceBuffer::from_host(lead, b.part_table(), on_lead, "MSREP partition table")?.resident(),
        };
        // The lead device's buffers are used on other streams from now on.
        sync_stream(lead, lead_stream)?;
        *slot = Some(sums);
    }
    Ok(slot.as_ref().expect("made above"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msrep::partition::{compressed_bounds, local_pointers};

    #[test]
    fn a_pcoo_partition_has_the_row_pointers_of_its_rows() {
        // Rows 0..5 (relative to the partition's first): 2, 0, 3, 0 and 1 entries.
        assert_eq!(coo_pointers(&[0, 0, 2, 2, 2, 4], 5).unwrap(), [0, 2, 2, 5, 5, 6]);
        assert_eq!(coo_pointers(&[], 0).unwrap(), [0]);
    }

    #[test]
    fn the_merge_lists_split_rows_with_their_partitions_sums_and_the_other_merged_rows_as_runs() {
        // 10 rows: 0-1 empty, 2-3 three entries each, 4 empty, 5 four entries, 6-9 empty; the
        // partitions as computed (not stretched), so rows in none of them lie before, between and after.
        let ptr = [0, 0, 0, 3, 6, 6, 10, 10, 10, 10, 10];
        for np in 1..=12 {
            let bounds = compressed_bounds(&ptr, np);
            let lists = MergeLists::of(&bounds, 10);
            // Every merged row once: in the shared list or in one run.
            let merged: Vec<usize> = row_segments(&bounds, 10)
                .into_iter()
                .flat_map(|s| match s {
                    RowSegment::Merged { rows } => rows,
                    RowSegment::Exclusive { .. } => 0..0,
                })
                .collect();
            let mut listed: Vec<usize> = lists.shared_rows.iter().map(|&r| r as usize).collect();
            for run in lists.run_bounds.chunks(2) {
                assert!(run[0] < run[1], "np {np}: empty run {run:?}");
                listed.extend(run[0] as usize..run[1] as usize);
            }
            listed.sort_unstable();
            assert_eq!(listed, merged, "np {np}");
            let longest = lists.run_bounds.chunks(2).map(|r| (r[1] - r[0]) as usize).max().unwrap_or(0);
            assert_eq!(lists.longest_run, longest, "np {np}");
            // A shared row's sums: the slot of each partition that splits it, in partition order.
            assert_eq!(lists.first.len(), lists.shared_rows.len() + 1);
            for (i, &row) in lists.shared_rows.iter().enumerate() {
                let want: Vec<i32> = bounds
                    .iter()
                    .enumerate()
                    .flat_map(|(p, b)| {
                        let slot = move |r: usize| (2 * p + usize::from(!(b.start_flag && r == b.start_major))) as i32;
                        b.shared_majors().filter(move |&r| r == row as usize).map(slot)
                    })
                    .collect();
                assert!(want.len() >= 2, "np {np}: row {row} is split between partitions");
                let (from, to) = (lists.first[i] as usize, lists.first[i + 1] as usize);
                assert_eq!(lists.slots[from..to], want[..], "np {np}, row {row}");
            }
        }
        let one = MergeLists::of(&compressed_bounds(&ptr, 1), 10);
        assert!(one.shared_rows.is_empty() && one.slots.is_empty());
        assert_eq!((one.run_bounds, one.longest_run), (vec![0, 2, 6, 10], 4), "the rows before and after");
    }

    #[test]
    fn pcsr_partitions_cover_the_empty_rows_beside_them() {
        // 10 rows: 0-1 empty, 2-3 three entries each, 4 empty, 5 four entries, 6-9 empty.
        let ptr = [0, 0, 0, 3, 6, 6, 10, 10, 10, 10, 10];
        for np in 1..=12 {
            let bounds = compressed_bounds(&ptr, np);
            let stretched = stretched_over_empty_rows(&bounds, 10);
            let segments = row_segments(&stretched, 10);
            // Only split rows are left to the merge.
            for segment in &segments {
                if let RowSegment::Merged { rows } = segment {
                    assert!(
                        rows.clone().all(|r| stretched
                            .iter()
                            .filter(|b| b.nnz() > 0 && (b.start_major..b.end_major).contains(&r))
                            .count()
                            > 1),
                        "np {np}: merged rows {rows:?} are not all split rows"
                    );
                }
            }
            for (b, s) in bounds.iter().zip(&stretched) {
                assert_eq!(
                    (b.start_idx, b.end_idx, b.start_flag, b.end_flag),
                    (s.start_idx, s.end_idx, s.start_flag, s.end_flag)
                );
                if b.nnz() == 0 {
                    assert_eq!(b, s, "empty partitions stay as they are");
                    continue;
                }
                let local: Vec<i32> = local_pointers(&ptr, b).unwrap();
                let padded = padded_pointers(&local, b, s).unwrap();
                assert_eq!(padded.len(), s.major_count() + 1);
                // Row r of the stretched span has the entries the original gives it (none outside).
                for r in s.start_major..s.end_major {
                    let entries = padded[r - s.start_major + 1] - padded[r - s.start_major];
                    let expected = if (b.start_major..b.end_major).contains(&r) {
                        local[r - b.start_major + 1] - local[r - b.start_major]
                    } else {
                        0
                    };
                    assert_eq!(entries, expected, "np {np}, row {r}");
                }
            }
        }
        let one = stretched_over_empty_rows(&compressed_bounds(&ptr, 1), 10);
        assert_eq!((one[0].start_major, one[0].end_major), (0, 10));
        assert!(row_segments(&one, 10).iter().all(|s| matches!(s, RowSegment::Exclusive { .. })));
    }
}

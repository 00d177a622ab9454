//! pCSR batches: the pCSR partitions of one device concatenated into one CSR of "virtual" rows, so that
//! one kernel launch (`msrep_csr_batch_*` in kernels/msrep.cu) covers them all, whatever the partition
//! count. How the rows are spread over the kernel's blocks is decided at build time from their
//! lengths: regular rows in order with a group of lanes each (or, in large f64 batches, a lane each
//! in slices of 32 rows), skewed rows (and short regular rows that read columns far from their
//! neighbours') in stream blocks of consecutive rows (CSR-stream), and rows longer than a threshold
//! in chunks of a block each, so that a power-law row costs its bytes spread over the GPU rather than
//! one block's time.

use super::super::memory::DeviceBuffer;
use super::super::row_order;
use super::super::{GpuDevice, Launch, Stream};
use super::ptr_of;
use crate::alloc::{ZeroBits, try_collect_par, try_push, try_zeros};
use crate::chunks;
use crate::error::{Error, Result};
use crate::msrep::partition::PartitionBounds;
use crate::scalar::Element;
use std::ops::Range;
use std::sync::Arc;

/// Threads of every block of the batch kernel (its `__launch_bounds__`).
const BLOCK: u32 = 256;

/// Rows longer than this are cut into chunks: a group of 32 lanes would loop over them more than 32
/// times while the rest of the GPU waits.
const LONG_ROW: usize = 1024;

/// Entries of a long row one block sums (8 per thread).
const ENTRIES_PER_CHUNK: usize = 2048;

/// Regular rows (standard deviation of the lengths at most half their mean, as a band or stencil
/// has): lanes for about this many entries a lane, so that few lanes idle at the end of a row and a
/// group's reduction is short (band, 17 entries a row: 4 lanes, 2.3x faster than 32 in f32, 1.9x in
/// f64, measured on an H100) ...
const REGULAR_ENTRIES_PER_LANE: usize = 8;

/// ... but in a batch of at least this many entries, which fills the GPU many times over, a lane takes
/// about REGULAR_VALUE_BYTES_PER_LANE of values (16 entries in f32, 8 in f64): fewer shuffles for the
/// same bytes. The band of 54 M nonzeros (17 a row) then takes 2 lanes a row in f32 and 4 in f64, the
/// 27-point stencil of 73 M 2 and 4. Measured on an H200, two rounds each
/// (docs/results/h200-2026-11-28-msrep-lanes-ab.jsonl): with the f64 kernel at eight blocks an SM,
/// 48 bytes (the stencil on 4 lanes in f32, 8 in f64) took 0.181 / 0.284–0.287 ms for the stencil in
/// f32 / f64, 64 bytes 0.167–0.168 / 0.274–0.277, and 96 bytes (also the band on 1 lane in f32, 2 in
/// f64) the stencil alike, the band in f32 slower (0.126–0.127 → 0.129–0.130 ms) and in f64 a little
/// faster (0.198–0.199 → 0.194–0.196); with six, 32 bytes (the band on 4 lanes in f32, 8 in f64)
/// 0.163–0.165 / 0.273–0.276 ms for the band against 0.125 / 0.208. On the suite's 2-4 M-nonzero
/// matrices, a few waves of the GPU, 16 entries a lane in f32 made the block matrix 17 % slower
/// (H100).
const LARGE_BATCH_ENTRIES: usize = 1 << 24;
const REGULAR_VALUE_BYTES_PER_LANE: usize = 64;

/// ... and 16-bit values (f16, bf16) about this many entries a lane: the band (17 a row) then takes 1
/// lane a row and the 27-point stencil 2. Measured on an H200 in f16 and bf16, alternately, two runs
/// of two and three rounds (docs/results/h200-2026-11-29-msrep-16bit-lanes-ab.jsonl): the band on 1
/// lane a row 0.089–0.090 ms against 0.108–0.112 on 2 (32 entries a lane against 16, f32's count), 0.145–0.147 on
/// 4 and 0.237–0.258 on 8; the stencil 0.127–0.130 on 2 lanes, 0.141–0.146 on 1 and 0.145–0.147 on 4
/// (`build` and `run` tag the lines; 24 gives each the schedule of its fastest run).
const SIXTEEN_BIT_ENTRIES_PER_LANE: usize = 24;

/// Regular rows of f64 values (at least this many bytes a value), at most [`SLICED_MAX_MEAN`] entries
/// a row on average, in a batch of at least [`LARGE_BATCH_ENTRIES`] go in slices of [`SLICE`] rows,
/// one lane a row (sliced ELLPACK, `batch_slices` in kernels/msrep.cu), where no row is chunked and
/// padding each row to its slice's longest adds at most 1/[`SLICE_PADDING_LIMIT`] of the entries. A
/// warp then loads 32 consecutive values and indices at a time and, where neighbouring rows read
/// neighbouring columns, gathers 32 consecutive entries of x. Measured on an H200 against groups of
/// lanes, two rounds each (docs/results/h200-2026-11-28-msrep-slices-ab.jsonl): in f64 the band of
/// 54 M nonzeros 0.197 → 0.175 ms (87 → 98 % of the copy bandwidth), the 27-point stencil of 73 M
/// 0.275 → 0.234 (81 → 95 %); in f32 both slower (band 0.124 → 0.137, stencil 0.166 → 0.175), and on
/// the suite's 2-4 M-nonzero matrices, a wave of the GPU or less with a lane a row, up to 1.8x slower
/// in f64 (the band, FEM).
const SLICED_MIN_VALUE_BYTES: usize = 8;
const SLICED_MAX_MEAN: f64 = 32.0;
const SLICE: usize = 32;
const SLICE_PADDING_LIMIT: usize = 8;

/// Regular rows of at most this many lanes go to stream blocks too where their neighbours read distant
/// columns ([`row_order::scattered`]): with few lanes a row, a warp's loads of values and column indices
/// spread over several rows, and where the gathers of x do not hit L1 (random rows, a stencil whose
/// rows were permuted) those extra sectors are what the kernel waits for in L2 (ncu, random 1e-4 in
/// f64 with 2 lanes a row: L2 77 % busy for 33 µs where cusparseSpMV takes 26 µs at 73 %). A stream
/// block loads them coalesced. Measured on an H100 (suite, f64): random 1e-4 0.042 → 0.037 ms, the
/// permuted 2D stencil 0.050 → 0.041 ms (now stored by first column instead, [`ReorderedRows`], and
/// so no longer scattered); rows whose neighbours read nearby columns (stencils, band, FEM, blocks)
/// were 5–20 % slower in stream blocks, and with 16 or 32 lanes a row (random 1e-2) no faster.
const STREAM_SCATTERED_MAX_LANES: usize = 8;

/// Skewed rows go to stream blocks of consecutive rows with at most this many entries in all
/// (`MSREP_STREAM_ENTRIES`: the kernel stages their products in shared memory) ...
const STREAM_ENTRIES: usize = 1024;

/// ... and at most one row per thread of the block.
const STREAM_ROWS: usize = BLOCK as usize;

/// One partition as the kernel sees it (`MsrepCsrPart`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PartEntry {
    row_base: i32,
    rows: i32,
    y_offset: i32,
    shared_slot: i32,
    start_flag: i32,
    end_flag: i32,
}

/// A piece of a long row (`MsrepChunk`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    row: i32,
    begin: i32,
    end: i32,
    first: i32,
    count: i32,
    long_index: i32,
}

/// How a batch's rows are spread over the kernel's blocks.
#[derive(Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Regular rows: lanes a row, and the blocks that stride over the rows in order (0: streamed) ...
    pub lanes: usize,
    pub row_blocks: usize,
    /// ... or over slices of [`SLICE`] rows (one lane a row), where this is not empty: the position
    /// of each slice's first entry in the sliced layout, and one past the last slice's.
    pub slices: Vec<i32>,
    /// Skewed rows: the first and one-past-last row of each stream block.
    pub stream: Vec<[i32; 2]>,
    /// Rows longer than the threshold, cut into chunks, and how many such rows.
    pub chunks: Vec<Chunk>,
    pub long_rows: usize,
}

/// Lanes for a row of `len` entries at `per_lane` entries a lane: a power of two, 1..32.
pub(super) fn lanes_for(len: usize, per_lane: usize) -> usize {
    len.div_ceil(per_lane).max(1).next_power_of_two().min(32)
}

/// The schedule of rows with pointer array `ptr` (zero-based, `ptr.len()` = rows + 1) of values of
/// `value_bytes` each. Rows longer than `long_row` become chunks. The others: regular lengths
/// (standard deviation at most half the mean) go in order to groups of lanes or in slices
/// ([`SLICED_MIN_VALUE_BYTES`]; wherever the layout allows with `slices_at_any_size`), on at most
/// `max_blocks` blocks that stride over them, unless they take few lanes and `scattered` (asked only
/// then) says that neighbouring rows read distant columns; skewed lengths and those to stream blocks.
pub fn schedule(
    ptr: &[i32],
    value_bytes: usize,
    long_row: usize,
    max_blocks: usize,
    slices_at_any_size: bool,
    scattered: impl FnOnce() -> Result<bool>,
) -> Result<Schedule> {
    use rayon::prelude::*;
    let rows = ptr.len() - 1;
    let len = |v: usize| (ptr[v + 1] - ptr[v]) as usize;
    let nnz = (ptr[rows] - ptr[0]) as usize;
    let mean = nnz as f64 / rows.max(1) as f64;
    let squares: f64 = ptr.par_windows(2).map(|w| ((w[1] - w[0]) as f64 - mean).powi(2)).sum();
    let regular = (squares / rows.max(1) as f64).sqrt() <= mean / 2.0;

    let mut chunks = Vec::new();
    let mut long_rows = 0;
    for v in (0..rows).filter(|&v| len(v) > long_row) {
        let (begin, end) = (ptr[v] as usize, ptr[v + 1] as usize);
        let (first, count) = (chunks.len(), (end - begin).div_ceil(ENTRIES_PER_CHUNK));
        for c in 0..count {
            let chunk = Chunk {
                row: v as i32,
                begin: (begin + c * ENTRIES_PER_CHUNK) as i32,
                end: (begin + (c + 1) * ENTRIES_PER_CHUNK).min(end) as i32,
                first: first as i32,
                count: count as i32,
                long_index: long_rows as i32,
            };
            try_push(&mut chunks, chunk, "MSREP long-row chunks")?;
        }
        long_rows += 1;
    }

    if regular {
        // Long rows among regular ones (a dense block of rows) are skipped by the kernel's length test.
        let per_lane = if nnz >= LARGE_BATCH_ENTRIES {
            match value_bytes {
                2 => SIXTEEN_BIT_ENTRIES_PER_LANE,
                _ => (REGULAR_VALUE_BYTES_PER_LANE / value_bytes).max(1),
            }
        } else {
            REGULAR_ENTRIES_PER_LANE
        };
        let lanes = lanes_for(mean.ceil() as usize, per_lane);
        if lanes > STREAM_SCATTERED_MAX_LANES || !scattered()? {
            let sliced_rows = slices_at_any_size
                || (nnz >= LARGE_BATCH_ENTRIES && value_bytes >= SLICED_MIN_VALUE_BYTES && mean <= SLICED_MAX_MEAN);
            let slices = if sliced_rows { slices_of(ptr, nnz, &chunks)? } else { None }.unwrap_or_default();
            // In slices, a lane a row.
            let lanes = if slices.is_empty() { lanes } else { 1 };
            let row_blocks = (rows * lanes).div_ceil(BLOCK as usize).clamp(1, max_blocks);
            return Ok(Schedule { lanes, row_blocks, slices, stream: Vec::new(), chunks, long_rows });
        }
    }
    let mut stream = Vec::new();
    // The block being filled: its first row and its entries so far.
    let mut open: Option<(usize, usize)> = None;
    for v in 0..rows {
        let l = len(v);
        if let Some((first, entries)) = open
            && (l > long_row || v - first == STREAM_ROWS || entries + l > STREAM_ENTRIES)
        {
            try_push(&mut stream, [first as i32, v as i32], "MSREP stream blocks")?;
            open = None;
        }
        if l <= long_row {
            let (first, entries) = open.unwrap_or((v, 0));
            open = Some((first, entries + l));
        }
    }
    if let Some((first, _)) = open {
        try_push(&mut stream, [first as i32, rows as i32], "MSREP stream blocks")?;
    }
    Ok(Schedule { lanes: 1, row_blocks: 0, slices: Vec::new(), stream, chunks, long_rows })
}

/// The slice pointers of rows with pointer array `ptr` (`nnz` entries) in the sliced layout
/// ([`SLICED_MIN_VALUE_BYTES`]), or None where it cannot be or costs too much memory: rows chunked,
/// padding past the limit, or more positions than 32-bit indices reach.
fn slices_of(ptr: &[i32], nnz: usize, chunks: &[Chunk]) -> Result<Option<Vec<i32>>> {
    use rayon::prelude::*;
    if !chunks.is_empty() {
        return Ok(None);
    }
    let rows = ptr.len() - 1;
    let widths: Vec<usize> = ptr[..rows]
        .par_chunks(SLICE)
        .enumerate()
        .map(|(s, firsts)| (0..firsts.len()).map(|l| (ptr[s * SLICE + l + 1] - firsts[l]) as usize).max().unwrap_or(0))
        .collect();
    let positions: usize = widths.iter().map(|w| SLICE * w).sum();
    if positions > nnz + nnz / SLICE_PADDING_LIMIT || positions > i32::MAX as usize {
        return Ok(None);
    }
    let mut slices = Vec::new();
    slices.try_reserve_exact(widths.len() + 1).map_err(|_| Error::alloc_failed("MSREP slices"))?;
    slices.push(0);
    for w in widths {
        slices.push(slices.last().expect("pushed above") + (SLICE * w) as i32);
    }
    Ok(Some(slices))
}

/// Choices of a batch's layout that tests change ([`crate::executor::TestHooks`]).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Rows longer than [`LONG_ROW`] are chunked (otherwise left to the rows' schedule).
    pub chunk_long_rows: bool,
    /// Regular rows go in slices wherever the layout allows, whatever the batch's size and type.
    pub slices_at_any_size: bool,
}

/// The pCSR partitions of one device, resident and scheduled.
pub struct CsrBatch {
    /// The device side that holds it.
    pub side: usize,
    /// Virtual rows: the sum of the partitions' spans.
    pub rows: usize,
    ptr: DeviceBuffer,
    /// Where the rows go in slices ([`Schedule::slices`]), the slices' first positions: the column
    /// indices and values are then in the sliced layout.
    slices: Option<DeviceBuffer>,
    /// Column indices: 32-bit, or 16-bit offsets from what `offsets_from` says ([`ColumnBase`]).
    idx: DeviceBuffer,
    offsets_from: Option<ColumnBase>,
    val: DeviceBuffer,
    /// The values' type as the kernels' names spell it (f32, f64, f16, bf16); x, y and the sums are
    /// of its compute type.
    value_suffix: &'static str,
    parts: DeviceBuffer,
    part_table: Vec<PartEntry>,
    part_count: i32,
    /// Where the device stores some partitions' rows by first column ([`ReorderedRows`]): each
    /// stored virtual row's virtual row in the partitions' order.
    row_map: Option<DeviceBuffer>,
    lanes: i32,
    row_blocks: i32,
    stream: Option<DeviceBuffer>,
    stream_count: i32,
    chunks: Option<DeviceBuffer>,
    chunk_count: i32,
    /// Per chunk: its sum, for the last block of its row to add.
    chunk_sums: Option<DeviceBuffer>,
    /// Per long row: how many of its chunks have finished (zero between calls).
    counters: Option<DeviceBuffer>,
    long_row: i32,
    /// Per row block, one past the largest column read by it or any row block before it: the row
    /// blocks that may start once x's columns below some end have arrived are a prefix.
    row_block_cols_end: Vec<usize>,
    /// The lowest to the highest column it reads (empty without entries).
    columns_read: Range<usize>,
    /// What the batch runs, for the log.
    summary: String,
}

impl Schedule {
    /// Rows of each row block of a batch of `rows` rows, the last's at most: as the kernel's
    /// `batch_rows` and `batch_slices` share them out.
    fn rows_per_block(&self, rows: usize) -> usize {
        let blocks = self.row_blocks.max(1);
        match self.slices.is_empty() {
            true => rows.div_ceil(blocks),
            false => rows.div_ceil(SLICE).div_ceil(blocks) * SLICE,
        }
    }
}

/// A member of a batch: the partition's index among all partitions, its bounds, and its local
/// pointers, column indices and values.
#[derive(Clone, Copy)]
pub struct Member<'a, T> {
    pub index: usize,
    pub bounds: PartitionBounds,
    pub local_ptr: &'a [i32],
    pub minor: &'a [i32],
    pub values: &'a [T],
}

/// Whether neighbouring rows of the members read distant columns ([`row_order::scattered`]).
fn scattered_rows<T: Sync>(members: &[Member<T>]) -> Result<bool> {
    let mut counts = (0, 0);
    for m in members {
        let (pairs, far) = row_order::neighbours_far_apart(m.bounds.major_count(), |j| m.row(j))?;
        counts = (counts.0 + pairs, counts.1 + far);
    }
    Ok(row_order::scattered(counts))
}

/// A member's rows in the order [`row_order::by_first_column`] gives its rows between a split first
/// and a split last row (which stay first and last, where the merge expects them): the local
/// pointers, columns and values in that order, and at each position the local row it holds.
struct ReorderedRows<T> {
    local_ptr: Vec<i32>,
    minor: Vec<i32>,
    values: Vec<T>,
    local_rows: Vec<i32>,
}

impl<T: ZeroBits + Sync> ReorderedRows<T> {
    fn by_first_column(m: &Member<T>) -> Result<Option<Self>> {
        let rows = m.bounds.major_count();
        let first = usize::from(m.bounds.start_flag).min(rows);
        let end = rows - usize::from(m.bounds.end_flag && rows > first);
        let Some(order) = row_order::by_first_column(end - first, |j| m.row(first + j))? else { return Ok(None) };
        let local_rows: Vec<i32> =
            (0..first).chain(order.iter().map(|&j| first + j as usize)).chain(end..rows).map(|j| j as i32).collect();
        let entries = |at: usize| {
            let (j, base) = (local_rows[at] as usize, m.local_ptr[0]);
            (m.local_ptr[j] - base) as usize..(m.local_ptr[j + 1] - base) as usize
        };
        let (row_ptr, minor, values) = chunks::gather_rows(
            rows,
            |at| entries(at).len(),
            |at, cols, vals| {
                cols.copy_from_slice(&m.minor[entries(at)]);
                vals.copy_from_slice(&m.values[entries(at)]);
            },
        )?;
        // Entries fit i32: the batch holds at most i32::MAX.
        let local_ptr = try_collect_par(rows + 1, "MSREP reordered rows", |at| row_ptr[at] as i32)?;
        Ok(Some(ReorderedRows { local_ptr, minor, values, local_rows }))
    }
}

impl<'a, T> Member<'a, T> {
    /// The entries of local row `j`.
    fn entries(&self, j: usize) -> Range<usize> {
        let base = self.local_ptr[0];
        (self.local_ptr[j] - base) as usize..(self.local_ptr[j + 1] - base) as usize
    }

    /// The column indices of local row `j`.
    fn row(&self, j: usize) -> &'a [i32] {
        &self.minor[self.entries(j)]
    }
}

impl CsrBatch {
    /// Uploads `members` (partitions of one device, in order; together at most i32::MAX entries and
    /// rows) to `gpu` on `stream`, laid out as `layout` says.
    pub fn upload<T: Element + ZeroBits>(
        gpu: &Arc<GpuDevice>,
        stream: Stream,
        side: usize,
        members: &[Member<T>],
        layout: Layout,
    ) -> Result<CsrBatch> {
        let reordered: Vec<Option<ReorderedRows<T>>> =
            members.iter().map(ReorderedRows::by_first_column).collect::<Result<_>>()?;
        let members: Vec<Member<T>> = members
            .iter()
            .zip(&reordered)
            .map(|(m, r)| match r {
                Some(r) => Member { local_ptr: &r.local_ptr, minor: &r.minor, values: &r.values, ..*m },
                None => Member { ..*m },
            })
            .collect();
        let members = &members[..];
        let rows: usize = members.iter().map(|m| m.bounds.major_count()).sum();
        let mut ptr: Vec<i32> = Vec::new();
        ptr.try_reserve_exact(rows + 1).map_err(|_| Error::alloc_failed("MSREP batch pointers"))?;
        let mut parts = Vec::with_capacity(members.len());
        let mut entries = 0i32;
        for m in members {
            let base = m.local_ptr[0];
            parts.push(PartEntry {
                row_base: ptr.len() as i32,
                rows: m.bounds.major_count() as i32,
                y_offset: m.bounds.start_major as i32,
                shared_slot: 2 * m.index as i32,
                start_flag: m.bounds.start_flag as i32,
                end_flag: m.bounds.end_flag as i32,
            });
            ptr.extend(m.local_ptr[..m.bounds.major_count()].iter().map(|&p| entries + (p - base)));
            entries += m.local_ptr[m.bounds.major_count()] - base;
        }
        ptr.push(entries);
        let row_map = match reordered.iter().any(Option::is_some) {
            true => {
                let mut map = try_zeros::<i32>(rows, "MSREP row order")?;
                for (p, r) in parts.iter().zip(&reordered) {
                    let base = p.row_base as usize;
                    for at in 0..p.rows as usize {
                        map[base + at] = p.row_base + r.as_ref().map_or(at as i32, |r| r.local_rows[at]);
                    }
                }
                Some(map)
            }
            false => None,
        };
        let long_row = if layout.chunk_long_rows { LONG_ROW } else { usize::MAX };
        let plan = schedule(
            &ptr,
            std::mem::size_of::<T>(),
            long_row,
            gpu.multiprocessors * 32,
            layout.slices_at_any_size,
            || scattered_rows(members),
        )?;
        // The layout on the device: the columns as the partitions hold them, measured there and
        // turned into 16-bit offsets where they fit, then the values; each in the sliced layout where
        // the schedule chose slices. Each buffer as uploaded is freed (stream-ordered) before the next
        // is uploaded, so that the device holds at most the final layout plus the sliced layout's
        // copy of the values.
        let upload =
            |data: &[i32], what: &str| DeviceBuffer::from_host(gpu, data, stream, what).map(DeviceBuffer::resident);
        let ptr_buffer = upload(&ptr, "MSREP batch pointers")?;
        let stream_blocks = match plan.stream.is_empty() {
            true => None,
            false => Some(DeviceBuffer::from_host(gpu, &plan.stream, stream, "MSREP stream blocks")?.resident()),
        };
        let slices = match plan.slices.is_empty() {
            true => None,
            false => Some(upload(&plan.slices, "MSREP slices")?),
        };
        let minors: Vec<&[i32]> = members.iter().map(|m| m.minor).collect();
        let columns = DeviceBuffer::from_host_parts(gpu, &minors, stream, "MSREP partition indices")?;
        let layout_on_device = DeviceLayout {
            gpu,
            stream,
            rows,
            ptr: &ptr_buffer,
            stream_blocks: (ptr_of(&stream_blocks), plan.stream.len()),
            slices: (ptr_of(&slices), plan.slices.last().map_or(0, |&end| end as usize)),
        };
        let mut scan = layout_on_device.scan(&columns, plan.row_blocks, plan.rows_per_block(rows))?;
        let diagonal_shift = parts.first().map_or(0, |p| p.y_offset - p.row_base);
        let offsets_from = ColumnBase::for_spread(scan.spread, diagonal_shift);
        let row_block_cols_end = std::mem::take(&mut scan.row_block_cols_end);
        let idx = match offsets_from {
            Some(base) => layout_on_device.offsets(columns, base)?,
            None => layout_on_device.sliced::<i32>(columns, "MSREP partition indices")?,
        }
        .resident();
        let values: Vec<&[T]> = members.iter().map(|m| m.values).collect();
        let values = DeviceBuffer::from_host_parts(gpu, &values, stream, "MSREP partition values")?;
        let val = layout_on_device.sliced::<T>(values, "MSREP partition values")?.resident();
        let summary = format!(
            "{} partition(s), {} rows: {}, {} long row(s) in {} chunk(s), column indices {}",
            members.len(),
            rows,
            if !plan.slices.is_empty() {
                format!(
                    "slices of {SLICE} rows ({} positions for {} entries) on {} blocks",
                    plan.slices.last().expect("slices end"),
                    ptr[rows],
                    plan.row_blocks
                )
            } else if plan.row_blocks > 0 {
                format!("{} lanes a row on {} blocks", plan.lanes, plan.row_blocks)
            } else {
                format!("{} stream blocks", plan.stream.len())
            },
            plan.long_rows,
            plan.chunks.len(),
            match offsets_from {
                Some(ColumnBase { from_diagonal: 1, .. }) => "as 16-bit offsets from the diagonal".to_string(),
                Some(ColumnBase { shift, .. }) => format!("as 16-bit offsets from column {shift}"),
                None => "of 32 bits".to_string(),
            }
        ) + if row_map.is_some() { ", rows by first column (neighbouring rows far apart)" } else { "" };
        let size = std::mem::size_of::<T::Compute>();
        Ok(CsrBatch {
            side,
            rows,
            idx,
            offsets_from,
            val,
            ptr: ptr_buffer,
            slices,
            value_suffix: T::VALUE_TYPE.short_name(),
            parts: DeviceBuffer::from_host(gpu, &parts, stream, "MSREP partition table")?.resident(),
            part_count: parts.len() as i32,
            part_table: parts,
            row_map: match &row_map {
                Some(map) => Some(upload(map, "MSREP row order")?),
                None => None,
            },
            lanes: plan.lanes as i32,
            row_blocks: plan.row_blocks as i32,
            stream: stream_blocks,
            stream_count: plan.stream.len() as i32,
            chunks: if plan.chunks.is_empty() {
                None
            } else {
                Some(DeviceBuffer::from_host(gpu, &plan.chunks, stream, "MSREP long-row chunks")?.resident())
            },
            chunk_count: plan.chunks.len() as i32,
            chunk_sums: if plan.chunks.is_empty() {
                None
            } else {
                Some(DeviceBuffer::alloc(gpu, plan.chunks.len() * size, stream, "MSREP chunk sums")?.resident())
            },
            counters: if plan.long_rows == 0 {
                None
            } else {
                Some(DeviceBuffer::zeroed(gpu, plan.long_rows * 4, stream, "MSREP long-row counters")?.resident())
            },
            long_row: long_row.min(i32::MAX as usize) as i32,
            row_block_cols_end,
            columns_read: scan.spread.columns_read(),
            summary,
        })
    }

    /// The batch's thread blocks: long-row chunks and stream blocks first, then the row blocks.
    pub fn blocks(&self) -> u32 {
        (self.chunk_count + self.stream_count + self.row_blocks) as u32
    }

    /// All of the batch's thread blocks, as [`Self::launch`] takes them (at least one).
    pub fn all_blocks(&self) -> Range<u32> {
        0..self.blocks().max(1)
    }

    /// The row blocks, as thread blocks of the batch (after its long-row chunks and stream blocks).
    pub fn row_blocks(&self) -> Range<u32> {
        (self.chunk_count + self.stream_count) as u32..self.blocks()
    }

    /// The row blocks (from the first) whose rows read only columns below `cols_end`, as thread
    /// blocks of the batch: those that may start once x up to `cols_end` is in.
    pub fn row_blocks_ready(&self, cols_end: usize) -> Range<u32> {
        let first = self.row_blocks().start;
        first..first + self.row_block_cols_end.partition_point(|&end| end <= cols_end) as u32
    }

    /// Queues the batch's thread blocks `blocks` (all: [`Self::all_blocks`]) on `stream` of `gpu` (its
    /// device): with `raw` (non-zero) every virtual row's sum goes there; otherwise rows are finished
    /// into `y` and split rows' sums into `shared`. With `merge` (non-zero: the lead device's merge
    /// table, of shared rows only), the launch's last thread to write a shared row's sum then merges
    /// the shared rows into `y` (the `_merging` kernels): only for a launch of all the blocks of a
    /// batch that holds every partition and [`Self::can_merge`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch<T: Copy>(
        &self,
        gpu: &GpuDevice,
        stream: Stream,
        x: u64,
        alpha: T,
        beta: T,
        y: u64,
        shared: u64,
        raw: u64,
        blocks: Range<u32>,
        merge: u64,
    ) -> Result<()> {
        // A batch of stream blocks and one of row groups each run a kernel without the other's code
        // (fewer registers or no shared memory), asking for no more shared memory than its resident
        // blocks need, the rest of the SM's on-chip memory going to L1 for the gathers of x.
        debug_assert!(merge == 0 || self.can_merge(), "a batch with a row map has no merging kernel");
        let name = format!(
            "msrep_csr_batch_{}{}{}{}{}",
            self.value_suffix,
            if self.offsets_from.is_some() { "_i16" } else { "" },
            if self.row_map.is_some() { "_mapped" } else { "" },
            if self.row_blocks == 0 { "_streamed" } else { "" },
            if merge != 0 { "_merging" } else { "" }
        );
        let f = gpu.function_prepared(&super::super::kernels::MSREP, &name, |gpu, f| gpu.prefer_l1_cache(f, BLOCK))?;
        crate::log::note(|| format!("{name}: {}", self.summary));
        let first_block = blocks.start as i32;
        let cfg = Launch { grid: (blocks.len() as u32, 1, 1), block: (BLOCK, 1, 1), shared_bytes: 0 };
        let (ptr, idx, val, parts) = (self.ptr.ptr(), self.idx.ptr(), self.val.ptr(), self.parts.ptr());
        let (stream_blocks, chunks, chunk_sums, counters) =
            (ptr_of(&self.stream), ptr_of(&self.chunks), ptr_of(&self.chunk_sums), ptr_of(&self.counters));
        let (row_map, slices) = (ptr_of(&self.row_map), ptr_of(&self.slices));
        let rows = self.rows as i32;
        let columns = self.offsets_from.unwrap_or(ColumnBase { shift: 0, from_diagonal: 0 });
        unsafe {
            super::super::launch(
                &f,
                cfg,
                stream,
                crate::kernel_args![
                    &ptr,
                    &slices,
                    &idx,
                    &columns,
                    &val,
                    &x,
                    &parts,
                    &self.part_count,
                    &rows,
                    &self.lanes,
                    &self.row_blocks,
                    &stream_blocks,
                    &self.stream_count,
                    &chunks,
                    &self.chunk_count,
                    &chunk_sums,
                    &counters,
                    &alpha,
                    &beta,
                    &y,
                    &shared,
                    &raw,
                    &row_map,
                    &self.long_row,
                    &first_block,
                    &merge
                ],
            )
        }
    }

    /// Whether a launch of this batch can merge at its end (`merge` of [`Self::launch`]): the
    /// merging kernels are those of batches without a row map.
    pub fn can_merge(&self) -> bool {
        self.row_map.is_none()
    }

    /// The columns (entries of x) the batch reads, from its lowest to its highest.
    pub fn columns_read(&self) -> Range<usize> {
        self.columns_read.clone()
    }

    /// The row of y of the batch's first virtual row.
    pub fn first_row(&self) -> usize {
        self.part_table.first().map_or(0, |p| p.y_offset as usize)
    }

    /// The partition table, for a copy on the lead device.
    pub fn part_table(&self) -> &[PartEntry] {
        &self.part_table
    }

    /// Queues the finish of raw sums (this batch's, copied to `gpu`, the lead device) into `y` and
    /// `shared`, with `parts` a copy of [`Self::part_table`] on `gpu`.
    #[allow(clippy::too_many_arguments)]
    pub fn finish<T: Copy>(
        &self,
        gpu: &GpuDevice,
        stream: Stream,
        raw: u64,
        parts: u64,
        alpha: T,
        beta: T,
        y: u64,
        shared: u64,
        sfx: &str,
    ) -> Result<()> {
        let f = gpu.function(&super::super::kernels::MSREP, &format!("msrep_finish_batch_{sfx}"))?;
        let cfg = super::grid_for(gpu, self.rows);
        let rows = self.rows as i32;
        unsafe {
            super::super::launch(
                &f,
                cfg,
                stream,
                crate::kernel_args![&rows, &raw, &parts, &self.part_count, &alpha, &beta, &y, &shared],
            )
        }
    }
}

/// What a batch's 16-bit offsets count from (`MsrepColumns` in kernels/msrep.cu): `shift`, plus each
/// entry's anchor where `from_diagonal` is 1. Entry e of virtual row v has column `shift` +
/// `offsets[e]`, plus, with offsets from the diagonal, the anchor a: v, or for a row of a stream block
/// the block's first row (the kernel forms a stream block's products without knowing each entry's
/// row). Half the index bytes, which bandwidth-bound SpMV turns into time, wherever every column lies
/// within ±32 K of its anchor's diagonal (bands, stencils, FEM meshes and road networks in a local
/// order; `shift` then carries a device's first row, since virtual rows count from 0 on each
/// device), or else wherever all of the batch's columns lie within 64 K of each other, whatever rows
/// read them (offsets from a fixed column: blocks scattered over 65,536 columns, random rows of a
/// matrix of at most 65,536 columns).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ColumnBase {
    shift: i32,
    from_diagonal: i32,
}

/// How a batch's columns spread (`msrep_layout_scan`): the lowest and highest column minus its
/// entry's anchor ([`ColumnBase`]), and the lowest and highest column; (i32::MAX, i32::MIN) where
/// the batch has no entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ColumnSpread {
    from_anchor: (i32, i32),
    columns: (i32, i32),
}

impl ColumnSpread {
    /// The columns from the lowest to the highest (empty without entries).
    fn columns_read(&self) -> Range<usize> {
        let (low, high) = self.columns;
        match low <= high {
            true => low as usize..high as usize + 1,
            false => 0..0,
        }
    }
}

impl ColumnBase {
    /// The base of a batch whose columns spread as `spread`, its virtual rows' diagonal at anchor +
    /// `diagonal_shift`: the diagonal where every column fits 16 bits about it, else the lowest column
    /// (at offset i16::MIN) where the highest is at most 65,535 past it, else None (32-bit columns,
    /// also for a batch without entries).
    fn for_spread(spread: ColumnSpread, diagonal_shift: i32) -> Option<ColumnBase> {
        let ((near, far), (low, high)) = (spread.from_anchor, spread.columns);
        if low > high {
            return None;
        }
        let fits = |offset: i64| (i16::MIN as i64..=i16::MAX as i64).contains(&offset);
        if fits(near as i64 - diagonal_shift as i64) && fits(far as i64 - diagonal_shift as i64) {
            return Some(ColumnBase { shift: diagonal_shift, from_diagonal: 1 });
        }
        let shift = low as i64 - i16::MIN as i64;
        match fits(high as i64 - shift) && shift <= i32::MAX as i64 {
            true => Some(ColumnBase { shift: shift as i32, from_diagonal: 0 }),
            false => None,
        }
    }
}

/// What `msrep_layout_scan` measured of a batch: its columns' spread, and per row block (from the
/// first) one past the largest column read by it or any row block before it, so that the row blocks
/// that may start once x's columns below some end have arrived are a prefix.
struct ColumnScan {
    spread: ColumnSpread,
    row_block_cols_end: Vec<usize>,
}

/// Per row block, one past the largest column read by it or an earlier block, from `ends` (the same
/// per block alone, 0 for a block without entries) for `row_blocks` blocks: missing blocks read
/// nothing.
fn cumulative_cols_end(ends: &[i32], row_blocks: usize) -> Vec<usize> {
    let mut cumulative: Vec<usize> = ends.iter().map(|&end| end.max(0) as usize).collect();
    cumulative.resize(row_blocks, 0);
    for b in 1..cumulative.len() {
        cumulative[b] = cumulative[b].max(cumulative[b - 1]);
    }
    cumulative
}

/// A batch being laid out on its device (the `msrep_layout_*` kernels, a warp a virtual row): its
/// device, the stream the layout is queued on, its virtual rows and their pointers, its stream
/// blocks (device pointer, or 0, and count) and slices (device pointer, or 0, and positions in all).
struct DeviceLayout<'a> {
    gpu: &'a Arc<GpuDevice>,
    stream: Stream,
    rows: usize,
    ptr: &'a DeviceBuffer,
    stream_blocks: (u64, usize),
    slices: (u64, usize),
}

impl DeviceLayout<'_> {
    fn launch(&self, name: &str, args: &mut [*mut std::ffi::c_void]) -> Result<()> {
        let cfg = super::grid_for(self.gpu, self.rows * 32);
        // SAFETY: the arguments are those of the kernel named, pointing into live buffers.
        unsafe { super::launch_on(self.gpu, name, cfg, self.stream, args) }
    }

    /// Measures the columns ([`ColumnScan`]) of row blocks of `rows_per_block` rows, waiting for the
    /// stream.
    fn scan(&self, columns: &DeviceBuffer, row_blocks: usize, rows_per_block: usize) -> Result<ColumnScan> {
        let blocks = if row_blocks == 0 { 0 } else { self.rows.div_ceil(rows_per_block.max(1)) };
        let spread = [i32::MAX, i32::MIN, i32::MAX, i32::MIN];
        let spread_buffer = DeviceBuffer::from_host(self.gpu, &spread, self.stream, "MSREP column spread")?;
        let ends_buffer = DeviceBuffer::zeroed(self.gpu, blocks * 4, self.stream, "MSREP row-block columns")?;
        let (rows, per_block) = (self.rows as i32, if blocks == 0 { 0 } else { rows_per_block as i32 });
        let (ptr, cols, ends, out) = (self.ptr.ptr(), columns.ptr(), ends_buffer.ptr(), spread_buffer.ptr());
        let (stream_blocks, stream_count) = (self.stream_blocks.0, self.stream_blocks.1 as i32);
        self.launch(
            "msrep_layout_scan",
            crate::kernel_args![&rows, &ptr, &cols, &stream_blocks, &stream_count, &per_block, &ends, &out],
        )?;
        let mut spread = [0i32; 4];
        spread_buffer.copy_to_host(&mut spread)?;
        let mut ends = vec![0i32; blocks];
        ends_buffer.copy_to_host(&mut ends)?;
        Ok(ColumnScan {
            spread: ColumnSpread { from_anchor: (spread[0], spread[1]), columns: (spread[2], spread[3]) },
            row_block_cols_end: cumulative_cols_end(&ends, row_blocks),
        })
    }

    /// The 16-bit offsets from `base` of the 32-bit `columns` (freed once read), in the sliced layout
    /// where there are slices (its padding 0).
    fn offsets(&self, columns: DeviceBuffer, base: ColumnBase) -> Result<DeviceBuffer> {
        let (gpu, stream, what) = (self.gpu, self.stream, "MSREP column offsets");
        let offsets = match self.slices.0 {
            0 => DeviceBuffer::alloc(gpu, columns.bytes() / 2, stream, what)?,
            _ => DeviceBuffer::zeroed(gpu, self.slices.1 * 2, stream, what)?,
        };
        let (rows, ptr, cols, out) = (self.rows as i32, self.ptr.ptr(), columns.ptr(), offsets.ptr());
        let (stream_blocks, stream_count) = (self.stream_blocks.0, self.stream_blocks.1 as i32);
        let slices = self.slices.0;
        self.launch(
            "msrep_layout_offsets",
            crate::kernel_args![&rows, &ptr, &cols, &stream_blocks, &stream_count, &slices, &base, &out],
        )?;
        Ok(offsets)
    }

    /// `entries` (32-bit columns, or values of 2, 4 or 8 bytes, as many as the batch's entries) in
    /// the sliced layout (its padding 0; `entries` freed once read) where there are slices; otherwise
    /// as they are.
    fn sliced<E: Copy>(&self, entries: DeviceBuffer, what: &str) -> Result<DeviceBuffer> {
        if self.slices.0 == 0 {
            return Ok(entries);
        }
        let size = std::mem::size_of::<E>();
        let laid = DeviceBuffer::zeroed(self.gpu, self.slices.1 * size, self.stream, what)?;
        let (rows, ptr, slices, from, to) =
            (self.rows as i32, self.ptr.ptr(), self.slices.0, entries.ptr(), laid.ptr());
        self.launch(&format!("msrep_layout_sliced_b{size}"), crate::kernel_args![&rows, &ptr, &slices, &from, &to])?;
        Ok(laid)
    }
}

/// Groups consecutive `members` into batches of at most i32::MAX entries and rows each (the kernel's
/// 32-bit indices); normally all of a device's partitions make one batch.
pub fn split_by_size<T>(members: Vec<Member<'_, T>>) -> Vec<Vec<Member<'_, T>>> {
    let limit = i32::MAX as usize;
    let mut groups: Vec<Vec<Member<T>>> = Vec::new();
    let (mut entries, mut rows) = (0usize, 0usize);
    for m in members {
        let (e, r) = (m.bounds.nnz(), m.bounds.major_count());
        if groups.is_empty() || entries + e > limit || rows + r + 1 > limit {
            groups.push(Vec::new());
            (entries, rows) = (0, 0);
        }
        entries += e;
        rows += r;
        groups.last_mut().expect("pushed above").push(m);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr_of(lengths: &[usize]) -> Vec<i32> {
        let mut ptr = vec![0i32];
        for &l in lengths {
            ptr.push(ptr.last().unwrap() + l as i32);
        }
        ptr
    }

    #[test]
    fn regular_rows_go_in_order_to_groups_of_lanes() {
        let s = schedule(&ptr_of(&[17; 1000]), 8, LONG_ROW, 4096, false, || Ok(false)).unwrap();
        assert_eq!((s.lanes, s.row_blocks), (4, 16), "1000 rows × 4 lanes in blocks of 256");
        let s = schedule(&ptr_of(&[17; 1000]), 4, LONG_ROW, 4096, false, || Ok(false)).unwrap();
        assert_eq!(s.lanes, 4, "a small batch: 8 entries a lane in f32 too");
        let s = schedule(&ptr_of(&[17; LARGE_BATCH_ENTRIES / 17 + 1]), 4, LONG_ROW, 4096, false, || Ok(false)).unwrap();
        assert_eq!(s.lanes, 2, "a large batch in f32: 16 entries a lane");
        let s = schedule(&ptr_of(&[40; LARGE_BATCH_ENTRIES / 40 + 1]), 8, LONG_ROW, 4096, false, || Ok(false)).unwrap();
        assert_eq!(s.lanes, 8, "a large batch in f64 of rows too long for slices: 8 entries a lane");
        let s = schedule(&ptr_of(&[27; LARGE_BATCH_ENTRIES / 27 + 1]), 4, LONG_ROW, 4096, false, || Ok(false)).unwrap();
        assert_eq!(s.lanes, 2, "a 27-point stencil in f32: 2 lanes a row");
        assert!(s.stream.is_empty() && s.chunks.is_empty() && s.slices.is_empty());
        let s = schedule(&ptr_of(&[8; 1 << 20]), 8, LONG_ROW, 100, false, || Ok(false)).unwrap();
        assert_eq!(s.row_blocks, 100, "blocks are bounded");
    }

    #[test]
    fn large_batches_of_short_regular_f64_rows_go_in_slices() {
        // A band of 17 entries a row, its first and last 8 rows shorter, in f64: slices of 32 rows,
        // each as long as its longest row.
        let rows = LARGE_BATCH_ENTRIES / 17 + 10;
        let lengths: Vec<usize> = (0..rows).map(|r| 17 - 8usize.saturating_sub(r.min(rows - 1 - r))).collect();
        let ptr = ptr_of(&lengths);
        let s = schedule(&ptr, 8, LONG_ROW, 4096, false, || Ok(false)).unwrap();
        assert_eq!((s.lanes, s.row_blocks), (1, rows.div_ceil(256)), "one lane a row, blocks of 256");
        assert_eq!(s.slices.len(), rows.div_ceil(SLICE) + 1);
        assert!(s.slices.windows(2).all(|w| w[1] - w[0] == (SLICE * 17) as i32), "every slice holds a 17");
        assert!(s.stream.is_empty() && s.chunks.is_empty());
        // f32, or a smaller batch: groups of lanes; asked for slices at any size: slices.
        assert!(schedule(&ptr, 4, LONG_ROW, 4096, false, || Ok(false)).unwrap().slices.is_empty());
        let small = ptr_of(&lengths[..1000]);
        assert!(schedule(&small, 8, LONG_ROW, 4096, false, || Ok(false)).unwrap().slices.is_empty());
        let s = schedule(&small, 4, LONG_ROW, 4096, true, || Ok(false)).unwrap();
        assert_eq!((s.lanes, s.row_blocks, s.slices.len()), (1, 4, 1000usize.div_ceil(SLICE) + 1));
        // Rows as regular as the schedule asks (deviation at most half the mean) but unequal within
        // each slice: padding them would add more than 1/8 of the entries.
        let uneven = ptr_of(&(0..1000).map(|r| [8, 12, 16][r % 3]).collect::<Vec<_>>());
        let s = schedule(&uneven, 8, LONG_ROW, 4096, true, || Ok(false)).unwrap();
        assert!(s.slices.is_empty() && s.lanes > 1);
        // Chunked rows keep the groups of lanes.
        let mut lengths = vec![17; 1000];
        lengths[500] = LONG_ROW + 1;
        let s = schedule(&ptr_of(&lengths), 8, LONG_ROW, 4096, true, || Ok(false)).unwrap();
        assert!(s.slices.is_empty() && !s.chunks.is_empty());
    }

    #[test]
    fn slices_hold_rows_of_about_equal_lengths() {
        // 35 rows (a slice of 32 and one of 3) of lengths r % 4 + 1: padding 3/5 of the entries.
        let lengths: Vec<usize> = (0..35).map(|r| r % 4 + 1).collect();
        let ptr = ptr_of(&lengths);
        assert_eq!(slices_of(&ptr, ptr[35] as usize, &[]).unwrap(), None, "padding 3/5 of the entries");
        let slices = [0, 4 * SLICE as i32, 8 * SLICE as i32];
        // Rows of equal lengths: no padding but in a last slice of fewer rows.
        assert_eq!(slices_of(&ptr_of(&[3; 64]), 192, &[]).unwrap(), Some(vec![0, 96, 192]));
        assert_eq!(slices_of(&ptr_of(&[3; 300]), 900, &[]).unwrap().map(|s| s[10]), Some(960));
        // The row blocks share whole slices out: 35 rows on 2 blocks is a slice each.
        let s =
            Schedule { lanes: 1, row_blocks: 2, slices: slices.to_vec(), stream: vec![], chunks: vec![], long_rows: 0 };
        assert_eq!(s.rows_per_block(35), 32);
        let s = Schedule { slices: vec![], ..s };
        assert_eq!(s.rows_per_block(35), 18);
    }

    #[test]
    fn short_regular_rows_stream_where_neighbours_read_distant_columns() {
        let s = schedule(&ptr_of(&[17; 1000]), 8, LONG_ROW, 4096, false, || Ok(true)).unwrap();
        assert_eq!((s.lanes, s.row_blocks), (1, 0), "4 lanes a row, scattered: stream blocks");
        assert_eq!(s.stream.len(), 1000usize.div_ceil(STREAM_ENTRIES / 17));
        let s = schedule(&ptr_of(&[100; 1000]), 8, LONG_ROW, 4096, false, || panic!("not asked")).unwrap();
        assert_eq!(s.lanes, 16, "16 lanes a row load coalesced: scattered or not, in order");
    }

    #[test]
    fn scattered_rows_are_stored_by_first_column_between_split_ends() {
        // 200 rows of a band of half-width 1 in a scrambled order (row j holds band row 77·j mod 200),
        // the first and last rows split with other partitions.
        let band_row = |j: usize| 77 * j % 200;
        let mut ptr = vec![0i32];
        let (mut minor, mut values) = (Vec::new(), Vec::new());
        for j in 0..200 {
            for c in band_row(j).saturating_sub(1)..(band_row(j) + 2).min(200) {
                minor.push(c as i32);
                values.push(j as f32);
            }
            ptr.push(minor.len() as i32);
        }
        let mut m = member(3, 10, &ptr, &minor, &values);
        (m.bounds.start_flag, m.bounds.end_flag) = (true, true);
        let r = ReorderedRows::by_first_column(&m).unwrap().expect("scattered rows of a band");
        assert_eq!((r.local_rows[0], r.local_rows[199]), (0, 199), "split rows stay first and last");
        let mut seen = r.local_rows.clone();
        seen.sort();
        assert_eq!(seen, (0..200).collect::<Vec<i32>>());
        let firsts: Vec<i32> = (1..199).map(|at| r.minor[r.local_ptr[at] as usize]).collect();
        assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "by first column between the split rows");
        for (at, &j) in r.local_rows.iter().enumerate() {
            let entries = r.local_ptr[at] as usize..r.local_ptr[at + 1] as usize;
            assert_eq!(&r.minor[entries.clone()], m.row(j as usize));
            assert!(r.values[entries].iter().all(|&v| v == j as f32), "each row keeps its values");
        }
        // In band order they stay as they are.
        let identity: Vec<i32> =
            (0..200).flat_map(|r: i32| (r.max(1) - 1..(r + 2).min(200)).collect::<Vec<_>>()).collect();
        let mut ptr = vec![0i32];
        for r in 0..200 {
            ptr.push(ptr[r] + (r.min(1) + 1 + usize::from(r < 199)) as i32);
        }
        assert!(
            ReorderedRows::by_first_column(&member(0, 0, &ptr, &identity, &vec![0.0; identity.len()]))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn rows_are_scattered_when_most_neighbours_start_far_apart() {
        // Three entries a row. A band: each row starts one column after the one before.
        let ptr: Vec<i32> = (0..=300).map(|r| 3 * r).collect();
        let band: Vec<i32> = (0..300).flat_map(|r| [r, r + 1, r + 2]).collect();
        assert!(!scattered_rows(&[member(0, 0, &ptr, &band, &[])]).unwrap());
        // The same rows in a shuffled order: neighbours start about a third of the columns apart.
        let shuffled: Vec<i32> = (0..300)
            .flat_map(|r| {
                let s = (r * 7919) % 300;
                [s, s + 1, s + 2]
            })
            .collect();
        assert!(scattered_rows(&[member(0, 0, &ptr, &shuffled, &[])]).unwrap());
        // Empty rows in between are not pairs: only the rows with entries are compared.
        let gapped_ptr: Vec<i32> = (0..=600).map(|r| 3 * (r / 2)).collect();
        assert!(!scattered_rows(&[member(0, 0, &gapped_ptr, &band, &[])]).unwrap());
        // More than half of the pairs must be far apart: two of four are not, two of three are.
        let rows_starting_at = |starts: &[i32]| -> bool {
            let ptr: Vec<i32> = (0..=starts.len() as i32).collect();
            scattered_rows(&[member(0, 0, &ptr, starts, &[])]).unwrap()
        };
        assert!(!rows_starting_at(&[0, 1, 1000, 1001, 2000]));
        assert!(rows_starting_at(&[0, 1000, 2000, 2001]));
    }

    #[test]
    fn skewed_rows_stream_in_blocks_and_long_rows_are_chunked() {
        // Lengths 0..=5 repeated, and two long rows: one of three chunks, one of one.
        let mut lengths: Vec<usize> = (0..600).map(|i| i % 6).collect();
        lengths[100] = 2 * ENTRIES_PER_CHUNK + 1;
        lengths[400] = LONG_ROW + 1;
        lengths[402] = 1020;
        let ptr = ptr_of(&lengths);
        let s = schedule(&ptr, 8, LONG_ROW, 4096, false, || Ok(false)).unwrap();
        assert_eq!(s.row_blocks, 0);
        // The stream blocks cover every row but the long ones, in order, each within its limits.
        let mut covered = Vec::new();
        for &[first, end] in &s.stream {
            assert!(first < end && (end - first) as usize <= STREAM_ROWS);
            let entries = (ptr[end as usize] - ptr[first as usize]) as usize;
            assert!(entries <= STREAM_ENTRIES, "block {first}..{end}: {entries} entries");
            covered.extend(first..end);
        }
        let want: Vec<i32> = (0..600).filter(|&v| v != 100 && v != 400).collect();
        assert_eq!(covered, want);
        // Blocks end before a long row, and where the next row would not fit (row 402, 1020 entries).
        assert!(s.stream.iter().any(|b| b[1] == 100) && s.stream.iter().any(|b| b[0] == 101));
        assert!(s.stream.iter().any(|b| b[0] == 401) && s.stream.iter().any(|b| b[0] == 402));
        assert_eq!(s.long_rows, 2);
        let chunks: Vec<(i32, i32, i32)> = s.chunks.iter().map(|c| (c.row, c.begin, c.end)).collect();
        let (a, b) = (ptr[100], ptr[400]);
        let chunk = ENTRIES_PER_CHUNK as i32;
        assert_eq!(
            chunks,
            [
                (100, a, a + chunk),
                (100, a + chunk, a + 2 * chunk),
                (100, a + 2 * chunk, a + 2 * chunk + 1),
                (400, b, ptr[401])
            ]
        );
        assert!(s.chunks[..3].iter().all(|c| (c.first, c.count, c.long_index) == (0, 3, 0)));
        assert_eq!((s.chunks[3].first, s.chunks[3].count, s.chunks[3].long_index), (3, 1, 1));
    }

    /// A member holding rows `start..start + rows.len()` (whole rows) with these columns.
    fn member<'a>(index: usize, start: usize, ptr: &'a [i32], minor: &'a [i32], values: &'a [f32]) -> Member<'a, f32> {
        let rows = ptr.len() - 1;
        let bounds = PartitionBounds {
            start_idx: ptr[0] as usize,
            end_idx: ptr[rows] as usize,
            start_major: start,
            end_major: start + rows,
            start_flag: false,
            end_flag: false,
        };
        Member { index, bounds, local_ptr: ptr, minor, values }
    }

    #[test]
    fn columns_become_16_bit_offsets_from_the_diagonal_or_else_the_lowest_column() {
        let spread = |from_anchor, columns| ColumnSpread { from_anchor, columns };
        // Virtual rows whose diagonal is at anchor + 40000, columns at the extremes of the i16 range
        // from it: offsets from the diagonal.
        let at_extremes = spread((40000 - 32768, 40000 + 32767), (7000, 80000));
        assert_eq!(ColumnBase::for_spread(at_extremes, 40000), Some(ColumnBase { shift: 40000, from_diagonal: 1 }));
        // A column a step too far from its diagonal, either way: offsets from the lowest column,
        // which is at offset -32768 ...
        for from_anchor in [(40000 - 32769, 40000), (40000, 40000 + 32768)] {
            let base = ColumnBase::for_spread(spread(from_anchor, (40000, 40000 + 65535)), 40000);
            assert_eq!(base, Some(ColumnBase { shift: 40000 + 32768, from_diagonal: 0 }), "{from_anchor:?}");
        }
        // ... where the columns are at most 65,535 apart; 65,536 apart keep 32-bit indices, as does
        // a lowest column so high that the shift would pass i32::MAX.
        let far = (-70000, 70000);
        assert!(ColumnBase::for_spread(spread(far, (40000, 40000 + 65536)), 0).is_none());
        let top = i32::MAX - 10;
        assert!(ColumnBase::for_spread(spread(far, (top - 1, top)), 0).is_none(), "a shift past i32::MAX");
        assert_eq!(
            ColumnBase::for_spread(spread(far, (i32::MAX - 32768 - 100, i32::MAX - 32768)), 0),
            Some(ColumnBase { shift: i32::MAX - 100, from_diagonal: 0 })
        );
        // The diagonal's shift may be negative (a device's virtual rows past its first row of y).
        assert_eq!(
            ColumnBase::for_spread(spread((-32768 - 5, 32767 - 5), (0, 10)), -5),
            Some(ColumnBase { shift: -5, from_diagonal: 1 })
        );
        // No entries: nothing to store, 32-bit.
        assert!(ColumnBase::for_spread(spread((i32::MAX, i32::MIN), (i32::MAX, i32::MIN)), 0).is_none());
    }

    #[test]
    fn row_blocks_know_the_columns_they_and_earlier_blocks_read() {
        // Each block's own end (0: no entries), kept at least the earlier blocks'.
        assert_eq!(cumulative_cols_end(&[91, 4, 0], 3), [91, 91, 91]);
        assert_eq!(cumulative_cols_end(&[2, 10, 7, 0, 3], 5), [2, 10, 10, 10, 10]);
        // More blocks than measured (rows shared out among fewer): the blocks without rows keep the
        // end before them; none (stream blocks only): none.
        assert_eq!(cumulative_cols_end(&[2, 10], 4), [2, 10, 10, 10]);
        assert!(cumulative_cols_end(&[], 0).is_empty());
    }

    #[test]
    fn without_chunks_a_long_row_is_a_stream_block_of_its_own() {
        let mut lengths = vec![1usize; 300];
        lengths[7] = 5000;
        let s = schedule(&ptr_of(&lengths), 8, usize::MAX, 4096, false, || Ok(false)).unwrap();
        assert!(s.chunks.is_empty());
        assert_eq!(s.stream, [[0, 7], [7, 8], [8, 264], [264, 300]]);
    }
}

//! Launchers of `kernels/sddmm.cu`: the CSR → COO row expansion and the nnz-balanced kernel
//! (GPU-Convert), the on-device band order in which the tiled algorithm runs that kernel, and the
//! tiled algorithm through a plan: bands of A in shared memory, or, where the rows are sorted by
//! column, panels of B in shared memory or dense tiles of S (tensor cores for f16 / bf16, CUDA cores
//! for every type); the validation of a caller's pattern in device memory, fused into the row
//! expansion, and what a handle keeps on its device for calls without a plan ([`Unplanned`]).

use super::kernels::SDDMM;
use super::memory::{self, DeviceBuffer, DeviceInput, DeviceOutput, MappedWords, Workspace};
use super::{CudaExecutor, GpuDevice, Launch, Stream, driver_error, launch};
use crate::alloc::try_vec;
use crate::error::{Error, Result};
use crate::kernel_args;
use crate::scalar::Element;
use crate::sddmm::SddmmPlan;
use crate::sddmm::contract::{
    InvalidPattern, PatternShape, PreparedPlan, RawOperands, Sampling, SddmmBackend, SddmmPatterns, Structure,
};
use crate::sddmm::{SddmmAlgorithm, SddmmMathMode};
use crate::sparse::{CompressedRef, StructureFault};
use crate::types::{IndexBase, ValueType};
use cudarc::driver::sys::CUdeviceptr;
use rayon::prelude::*;
use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

/// Rows of S per band of the tiled algorithm's order (the kernels' SD_BAND): the band kernels keep a
/// band's rows of A in shared memory, three thread blocks an SM up to K = 256 in f32 (66 KiB each).
const BAND_ROWS: usize = 64;
/// The nnz-balanced kernel: threads per block, nonzeros a group takes at a time (SD_BATCH), and
/// thread blocks per multiprocessor (about twice what fits at once, for balance).
const NNZ_THREADS: u32 = 256;
const NNZ_BATCH: usize = 4;
const NNZ_BLOCKS_PER_SM: usize = 8;
/// Vectors of a row a lane loads per nonzero on a large problem: nnz·k at least NNZ_LARGE_PRODUCTS;
/// but a nonzero gets at least NNZ_MIN_GROUP lanes where its row has that many vectors (in the CSR
/// kernels CSR_MIN_GROUP; see [`lanes_per_nonzero`]).
const NNZ_VECTORS_PER_LANE: usize = 4;
const NNZ_MIN_GROUP: usize = 4;
const CSR_MIN_GROUP: usize = 2;
/// Lanes per nonzero at most on a large problem whose rows hold NNZ_LONG_ROWS entries or more on
/// average: wider rows of A and B give each lane more vectors instead (see [`lanes_per_nonzero`]).
const NNZ_MAX_GROUP: usize = 8;
const NNZ_LONG_ROWS: usize = 32;
const NNZ_LARGE_PRODUCTS: usize = 1 << 22;
/// The row-warp kernel (`sddmm_row_warps_*`, see [`row_warps_shape`]): where rows hold
/// ROW_WARPS_MIN_ROW entries or more on average and none more than ROW_WARPS_EVEN times that, and
/// there are ROW_WARPS_MIN_ROWS_PER_SM rows a multiprocessor (ergo's overlap matrix, 1625 rows of 219
/// entries, was 13 % slower in f64 at k = 32 than in the COO kernel); thread blocks per
/// multiprocessor at most (the rest of the rows taken grid-stride).
const ROW_WARPS_MIN_ROW: usize = 32;
const ROW_WARPS_EVEN: usize = 2;
const ROW_WARPS_MIN_ROWS_PER_SM: usize = 16;
const ROW_WARPS_BLOCKS_PER_SM: usize = 16;
/// Thread blocks per multiprocessor of the kernel that shares rows longer than ROW_WARPS_EVEN times
/// the mean among all its warps (`sddmm_long_rows_*`, GPU-Dynamic): as many as its launch bounds
/// keep resident (two of 256 threads, up to 128 registers a thread), since every warp takes its
/// share of the rows' iterations. Where there are none, as on even patterns, its blocks only read
/// the count, count themselves done and leave.
const ROW_WARPS_LONG_BLOCKS_PER_SM: usize = 2;
/// The row-warp kernel's time an entry against the COO kernel's, in the dense tiles' cost models:
/// on random S at density 5e-2 (H200, both forced in one run) 0.53-0.68 in f16 and 0.57-0.69 in f32
/// at k = 32 to 256.
const ROW_WARPS_COST: f64 = 0.6;
/// The tensor-core tiles of f16 / bf16 and of f32 in the TF32 math modes (the kernels' SD_TC_M,
/// SD_TC_N, SD_TC_THREADS): rows and columns of S a thread block computes densely, its threads, and
/// its shared memory (three stages of the tile's rows of A and B, 80 bytes a row, or the 128 × 136
/// floats of the finished tile).
const TC_TILE_ROWS: usize = 128;
const TC_TILE_COLS: usize = 128;
const TC_THREADS: u32 = 512;
const TC_SHARED_BYTES: usize = 128 * 136 * 4;
const _: () = assert!(TC_SHARED_BYTES >= 3 * (TC_TILE_ROWS + TC_TILE_COLS) * 80);
/// The block tiles (the kernels' SD_BT, SD_BT_WARPS, SD_BT_WORDS): rows and columns of
/// S a warp computes densely, warps (each a tile) of a thread block, words of a tile's record, and a
/// block's shared memory (a warp's two stages of 32 rows of 128 bytes and a chunk of padding).
const BLOCK_TILE: usize = 16;
const BLOCK_TILE_WARPS: u32 = 4;
const BLOCK_TILE_WORDS: usize = 36;
const BLOCK_TILE_SHARED_BYTES: usize = BLOCK_TILE_WARPS as usize * 2 * 2 * BLOCK_TILE * 144;
/// A plan keeps block tiles where they hold at least this many entries each on average: below, they
/// do not pay at any width ([`block_tiles_pay`]); above, a record costs at most 3.6 bytes an entry.
const BLOCK_TILE_MIN_ENTRIES: usize = 40;
/// Threads per block of the order kernel (its SD_THREADS).
const ORDER_THREADS: u32 = 256;
/// The order kernel's histograms (one per block) are capped at this many counters in all.
const ORDER_SCRATCH_COUNTERS: usize = 1 << 26;
/// Alignment of each array carved out of one allocation.
const ARRAY_ALIGNMENT: usize = 256;
/// Bytes of the kernels' `sd_check`.
const CHECK_BYTES: usize = 32;

/// The words of the kernels' `sd_report`, in order.
mod report {
    pub(super) const INVALID_CALLS: usize = 0;
    pub(super) const ROWS: usize = 1;
    pub(super) const COLS: usize = 2;
    pub(super) const NNZ: usize = 3;
    pub(super) const BASE: usize = 4;
    pub(super) const FIRST: usize = 5;
    pub(super) const LAST: usize = 6;
    pub(super) const DECREASE: usize = 7;
    pub(super) const DECREASE_PREVIOUS: usize = 8;
    pub(super) const COLUMN: usize = 9;
    pub(super) const WORDS: usize = 10;
}

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
    /// The `sd_check` whose verdict the kernel reads first (filling `out` with NaN when the pattern
    /// is invalid); 0 when the pattern was validated on the host.
    pub check: CUdeviceptr,
}

/// Where a validation on the device gathers its faults (`sd_check`) and reports an invalid pattern
/// (`sd_report`, host memory the device writes).
#[derive(Clone, Copy, Debug)]
pub struct DeviceCheck {
    pub check: CUdeviceptr,
    pub report: CUdeviceptr,
}

/// The zero-based row of every nonzero (GPU-Convert's CSR → COO step), as u32, into `rows` (`nnz`
/// words). With `check` the pattern is validated too (it may be invalid: nothing outside `rows` is
/// written and nothing outside the pattern's arrays is read).
#[allow(clippy::too_many_arguments)]
pub fn coo_rows(
    device: &Arc<GpuDevice>,
    stream: Stream,
    (m, n, nnz): (usize, usize, usize),
    row_ptr: CUdeviceptr,
    col_ind: CUdeviceptr,
    base: i32,
    rows: CUdeviceptr,
    check: Option<DeviceCheck>,
) -> Result<()> {
    if nnz == 0 && check.is_none() {
        return Ok(());
    }
    let f = device.function(&SDDMM, "sddmm_coo_rows")?;
    let warps_per_block = 8;
    let blocks = m.div_ceil(warps_per_block).clamp(1, device.multiprocessors * 32) as u32;
    let cfg = Launch { grid: (blocks, 1, 1), block: (32 * warps_per_block as u32, 1, 1), shared_bytes: 0 };
    let (m32, n32, nnz64) = (m as i32, n as i32, nnz as i64);
    let (state, report) = check.map_or((0, 0), |c| (c.check, c.report));
    unsafe {
        launch(&f, cfg, stream, kernel_args![&m32, &n32, &nnz64, &row_ptr, &col_ind, &base, &rows, &state, &report])
    }
}

/// Where an m×n pattern's band order (`nnz` entries) lies in one allocation, followed by the
/// histograms the order kernel counts in, and how many blocks the kernel runs.
struct OrderLayout {
    blocks: usize,
    order_bytes: usize,
    scratch_bytes: usize,
}

impl OrderLayout {
    fn new(device: &GpuDevice, m: usize, n: usize, nnz: usize) -> Self {
        let bands = m.div_ceil(BAND_ROWS);
        let columns = n.max(1);
        let blocks = bands.min(device.multiprocessors * 8).min((ORDER_SCRATCH_COUNTERS / columns).max(1)).max(1);
        OrderLayout { blocks, order_bytes: word_array_bytes(nnz), scratch_bytes: blocks * columns * 4 }
    }
}

/// Builds the tiled algorithm's order of an m×n pattern on the device into `order` (`nnz` words):
/// band by band of `BAND_ROWS` rows, each band's nonzeros sorted by column (`sddmm_band_order`),
/// counting in `scratch` (`layout.scratch_bytes`); with `positions` (a plan's, `nnz` words, n at
/// most 2^24) each position's row within its band and zero-based column too, packed as the band
/// kernels read them. Safe on an invalid pattern (it reads and writes nothing out of bounds); the
/// validation is [`coo_rows`]'s.
#[allow(clippy::too_many_arguments)]
fn band_order(
    device: &Arc<GpuDevice>,
    stream: Stream,
    layout: &OrderLayout,
    (m, n, nnz): (usize, usize, usize),
    (row_ptr, col_ind, base): (CUdeviceptr, CUdeviceptr, i32),
    order: CUdeviceptr,
    scratch: CUdeviceptr,
    positions: Option<CUdeviceptr>,
) -> Result<()> {
    if m == 0 || nnz == 0 {
        return Ok(());
    }
    let f = device.function(&SDDMM, "sddmm_band_order")?;
    let cfg = Launch { grid: (layout.blocks as u32, 1, 1), block: (ORDER_THREADS, 1, 1), shared_bytes: 0 };
    let (m32, n32, nnz64) = (m as i32, n as i32, nnz as i64);
    let positions = positions.unwrap_or(0);
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![&m32, &n32, &nnz64, &row_ptr, &col_ind, &base, &scratch, &order, &positions],
        )
    }
}

/// The tiled algorithm: the nnz-balanced kernel of [`coo`] walking the nonzeros in band order (a
/// band of rows, column by column), so that a thread block's nonzeros share a few B rows and the
/// band's A rows, read from L1.
pub fn tiled<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    order: CUdeviceptr,
    rows: CUdeviceptr,
) -> Result<()> {
    nnz_balanced(device, stream, op, Rows::Coo { rows, order: Some(order) })
}

/// A plan's band-column order on the device ([`band_order`]) with what the band kernels read
/// besides: each position's row within its band and column, packed (where the pattern has at most
/// 2^24 columns, as the packing needs), the list of the thread blocks' slices, and the pattern's
/// longest row (for [`band_pays`]).
struct BandOrder {
    order: DeviceBuffer,
    positions: Option<DeviceBuffer>,
    slices: BandSlices,
    longest_row: usize,
}

/// The band kernels' thread blocks: (band, first position, last position, 0) each, on the device.
struct BandSlices {
    list: DeviceBuffer,
    count: usize,
}

/// Columns a pattern may have for the band kernels (24 bits of a packed position).
const BAND_MAX_COLS: usize = 1 << 24;
/// Thread blocks of the band kernels a multiprocessor holds at least (see [`band_fits`]), and the
/// fewest positions a slice of a band holds where its band has them. A band is cut into slices of
/// about nnz / (multiprocessors · BAND_BLOCKS_PER_SM) positions (BAND_MIN_SLICE at least), so that
/// the slices of a pattern of even bands run in about one wave: each block copies its band's rows
/// of A once, before its first product. But where bands hold BAND_LONG_ROWS entries a row on
/// average, slices of BAND_SHORT_SLICE positions: on random S at density 5e-2 (410 entries a row) in
/// f32 at k = 128 and 256 they took 0.206 and 0.390 ms against one wave's 0.283 and 0.500 (H100),
/// where on shorter bands (the 3D stencil, FEM node blocks, random S of 50 entries a row) they
/// measured 12-20 % slower.
const BAND_BLOCKS_PER_SM: usize = 3;
const BAND_MIN_SLICE: usize = 2048;
const BAND_SHORT_SLICE: usize = 1024;
/// Threads of a thread block of the band kernels, and the passes of its positions whose indices
/// are staged in shared memory at once (the kernel's SD_BAND_STAGES).
const BAND_THREADS: u32 = 256;
const BAND_STAGES: usize = 3;

/// Positions a slice of the band kernels holds at most, for a pattern of `nnz` entries in `m` rows on
/// a GPU of `multiprocessors` (see BAND_BLOCKS_PER_SM).
fn band_slice_size(nnz: usize, m: usize, multiprocessors: usize) -> usize {
    if nnz >= BAND_LONG_ROWS * m {
        BAND_SHORT_SLICE
    } else {
        nnz.div_ceil(multiprocessors * BAND_BLOCKS_PER_SM).max(BAND_MIN_SLICE)
    }
}

/// The slices of a zero-based pattern's bands (row pointers `ptr` of `m` rows) for a GPU of
/// `multiprocessors`: each band's positions cut into equal parts of at most [`band_slice_size`],
/// none for a band without entries; listed part by part (every band's first part, then every
/// band's second, ...): a band's positions go by column, so that the blocks that run at once read
/// B's rows of about the same stretch of columns.
fn band_slices(ptr: &[i32], m: usize, multiprocessors: usize) -> Vec<[i32; 4]> {
    let slice = band_slice_size(ptr[m] as usize, m, multiprocessors);
    // Each band's first and last position and the parts it is cut into.
    let bands: Vec<(usize, usize, usize)> = (0..m)
        .step_by(BAND_ROWS)
        .map(|r| {
            let (first, last) = (ptr[r] as usize, ptr[(r + BAND_ROWS).min(m)] as usize);
            (first, last, (last - first).div_ceil(slice))
        })
        .collect();
    let most_parts = bands.iter().map(|&(_, _, parts)| parts).max().unwrap_or(0);
    let mut slices = Vec::new();
    for part in 0..most_parts {
        for (band, &(first, last, parts)) in bands.iter().enumerate() {
            if part < parts {
                let at = |p: usize| (first + (last - first) * p / parts) as i32;
                slices.push([band as i32, at(part), at(part + 1), 0]);
            }
        }
    }
    slices
}

/// Elements a row of A takes in the band kernels' shared memory, loading `width` at a time: K and
/// one load of padding, so that rows read side by side start in different banks.
fn band_row_stride(k: usize, width: usize) -> usize {
    k.next_multiple_of(width) + width
}

/// Shared memory of a band kernel's thread block of groups of `group` lanes: the stages of its
/// passes' positions and entries, then the band's rows of A.
fn band_shared_bytes(k: usize, width: usize, group: usize, element: usize) -> usize {
    let per_pass = (BAND_THREADS as usize / group) * NNZ_BATCH;
    BAND_STAGES * 2 * per_pass * 4 + BAND_ROWS * band_row_stride(k, width) * element
}

/// Whether a band kernel's thread block of `bytes` of shared memory leaves room for
/// BAND_BLOCKS_PER_SM a multiprocessor. With one (bands of 256 rows, f64 at k = 64 or f32 at k =
/// 128), the band kernel took 2.1-2.2x the time of the COO kernel in band order on random S at
/// density 5e-2 (H200).
fn band_fits(device: &GpuDevice, bytes: usize) -> bool {
    bytes <= device.max_shared_memory_per_block_optin / BAND_BLOCKS_PER_SM
}

/// Rows at most BAND_SHORT_ROWS long on average make the band kernels pay at any width K, rows of at
/// most BAND_LONG_ROWS from K = 128 on in f32 and at any K in f16 / bf16, longer rows (cut into
/// short slices) where the slices fill BAND_LONG_WAVES waves of thread blocks, from K = 128 on in
/// f32 and from K = 64 on in f64; a longest row of at most BAND_EVEN_ROWS times the average leaves
/// the rows even enough (see [`band_pays`]).
const BAND_SHORT_ROWS: usize = 32;
const BAND_LONG_ROWS: usize = 128;
/// Below K = BAND_NARROW_K, rows of at most BAND_TINY_ROWS entries on average take the band
/// kernels in f32 / f64 only, and longer ones in f32 / f16 / bf16 only (see [`band_pays`]).
const BAND_NARROW_K: usize = 64;
const BAND_TINY_ROWS: usize = 8;
const BAND_LONG_WAVES: usize = 4;
const BAND_EVEN_ROWS: usize = 16;

/// Whether AUTO takes the band kernels for a call on an m-row pattern of `nnz` entries at width k
/// through a plan: they fit ([`band_fits`]), their slices fill the multiprocessors, the rows
/// are even (the graphs with a few rows of thousands of entries, R-MAT and the circuit, measured
/// slower) and short: at most BAND_SHORT_ROWS entries on average (each row of A is then read by few
/// positions in row order, where the band reads it once a thread block), or in f32 from K = 128 on
/// and in f16 / bf16 at any K at most BAND_LONG_ROWS, or long, cut into short slices, on a pattern
/// large enough for several waves of them: in f32 from K = 128 on, in f64 from K = 64 on (random S
/// of 8192 columns at density 5e-2 in f64: 0.207 and 0.424 ms against COO's 0.227 and 0.449 at
/// k = 64 and 128; below, in f32 below K = 128, and on ergo's overlap matrix, 347 slices, the COO
/// kernel was the faster). Fitted to random S and the suite's patterns at k = 32 to 256
/// (docs/methods.md). The 16-bit types, whose rows are half as many bytes, gain at every width: on
/// an H200, f16 on random S at density 1e-2 0.025-0.064 ms against COO's 0.028-0.078 at k = 32 to
/// 256, on the suite's stencils, road network, FEM matrices and random 1e-4 / 1e-3 up to a third
/// less time at k = 256 (but 5-8 % more at k = 64 on the rows of 3-5 entries of the road network
/// and the permuted 2D stencil). Below K = 64 the suite's short rows split by type (H200, k = 32):
/// rows of 3-5 entries (the road network, the 2D stencils) took 10-23 % longer in the band kernels
/// than in COO in f16 / bf16 but 30 % less in f64, rows of 15-26 (random 1e-4, the 3D stencil) 7-16
/// % less in f16 / bf16 but 17-22 % more in f64; f32 was within 2 % of COO on both but for the
/// permuted 2D stencil.
fn band_pays<T: Element>(
    device: &GpuDevice,
    band: &BandOrder,
    (m, nnz, k): (usize, usize, usize),
    a_strides: (usize, usize),
    b_strides: (usize, usize),
) -> bool {
    let mean_row = nnz.div_ceil(m.max(1)).max(1);
    if band.positions.is_none()
        || band.slices.count < device.multiprocessors
        || band.longest_row > BAND_EVEN_ROWS * mean_row
    {
        return false;
    }
    let tiny_rows = nnz <= BAND_TINY_ROWS * m;
    let narrow_loses = k < BAND_NARROW_K
        && match T::VALUE_TYPE {
            ValueType::F16 | ValueType::Bf16 => tiny_rows,
            ValueType::F64 => !tiny_rows,
            ValueType::F32 => false,
        };
    if narrow_loses {
        return false;
    }
    let width = shape_vector_width::<T>(k, a_strides, b_strides);
    let bytes =
        band_shared_bytes(k, width, lanes_per_nonzero(nnz, m, k, width, NNZ_MIN_GROUP), std::mem::size_of::<T>());
    let long_rows =
        nnz >= BAND_LONG_ROWS * m && band.slices.count >= BAND_LONG_WAVES * BAND_BLOCKS_PER_SM * device.multiprocessors;
    let wide = match T::VALUE_TYPE {
        ValueType::F32 => k >= 128 && (nnz <= BAND_LONG_ROWS * m || long_rows),
        ValueType::F64 => k >= 64 && long_rows,
        ValueType::F16 | ValueType::Bf16 => nnz <= BAND_LONG_ROWS * m,
    };
    band_fits(device, bytes) && (nnz <= BAND_SHORT_ROWS * m || wide)
}

/// The tiled algorithm through a plan (`sddmm_band_*`): a thread block a slice of a band's
/// positions in band-column order, with the band's rows of A in shared memory. Returns false,
/// launching nothing, where the plan has no packed positions or the rows do not fit
/// ([`band_fits`]).
fn band_staged<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    band: &BandOrder,
) -> Result<bool> {
    let width = vector_width(op);
    let group = lanes_per_nonzero(op.nnz, op.m, op.k, width, NNZ_MIN_GROUP);
    let bytes = band_shared_bytes(op.k, width, group, std::mem::size_of::<T>());
    let Some(positions) = band.positions.as_ref().filter(|_| band_fits(device, bytes)) else {
        return Ok(false);
    };
    if band.slices.count == 0 {
        return Ok(true);
    }
    let name = format!("sddmm_band_{}_v{width}", T::VALUE_TYPE.short_name());
    let f = device
        .function_prepared(&SDDMM, &name, |d, f| d.allow_shared_memory(f, d.max_shared_memory_per_block_optin))?;
    let slices = band.slices.count;
    crate::log::note(|| {
        format!(
            "kernel {name} ({slices} slices of bands, groups of {group} lanes, loads of {width}, {bytes} bytes of shared memory a block)"
        )
    });
    let cfg = Launch { grid: (slices as u32, 1, 1), block: (BAND_THREADS, 1, 1), shared_bytes: bytes as u32 };
    let (m, k, a_stride) = (op.m as i32, op.k as i32, band_row_stride(op.k, width) as i32);
    let (a_rs, a_cs) = (op.a_strides.0 as i64, op.a_strides.1 as i64);
    let (b_rs, b_cs) = (op.b_strides.0 as i64, op.b_strides.1 as i64);
    let group_log2 = group.trailing_zeros() as i32;
    let (list, order, positions) = (band.slices.list.ptr(), band.order.ptr(), positions.ptr());
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &m,
                &k,
                &op.alpha,
                &op.a,
                &a_rs,
                &a_cs,
                &op.b,
                &b_rs,
                &b_cs,
                &op.s_values,
                &list,
                &order,
                &positions,
                &a_stride,
                &group_log2,
                &op.out
            ],
        )?;
    }
    Ok(true)
}

/// The widest vector load (in elements) that every row start of A and B allows: rows contiguous,
/// K, the leading dimensions and both base addresses multiples of it.
fn vector_width<T: Element>(op: &DeviceOperands<T>) -> usize {
    let size = std::mem::size_of::<T>();
    let mut width = shape_vector_width::<T>(op.k, op.a_strides, op.b_strides);
    while width > 1 && !(op.a.is_multiple_of((width * size) as u64) && op.b.is_multiple_of((width * size) as u64)) {
        width /= 2;
    }
    width
}

/// [`vector_width`] but for the base addresses.
fn shape_vector_width<T: Element>(k: usize, a_strides: (usize, usize), b_strides: (usize, usize)) -> usize {
    if a_strides.1 != 1 || b_strides.1 != 1 {
        return 1;
    }
    let mut width = 16 / std::mem::size_of::<T>();
    while width > 1
        && !(k.is_multiple_of(width) && a_strides.0.is_multiple_of(width) && b_strides.0.is_multiple_of(width))
    {
        width /= 2;
    }
    width
}

/// Lanes per nonzero of the nnz-balanced and band kernels on a pattern of `nnz` entries in m rows
/// (a power of two, at most a warp), loading `width` elements at a time: on a large problem, enough
/// that each lane loads about NNZ_VECTORS_PER_LANE vectors of the row, so that the shuffles of the
/// reduction are few per nonzero (measured: 1.6x faster than one vector per lane at density 5e-2,
/// k = 64), but at least `fewest` where the row has that many vectors (NNZ_MIN_GROUP in the COO and
/// band kernels: k = 32 in f32, 4 lanes of 2 vectors 15 % faster than 2 lanes of 4 at densities
/// 1e-2 and 5e-2; CSR_MIN_GROUP in the CSR kernels, whose groups each search their rows: on an H200,
/// sddmmDynamic on random S of 8192 columns at density 5e-2 in f16 0.114 -> 0.076 ms at k = 32 and
/// 0.138 -> 0.104 at k = 64, in f32 at k = 32 0.114 -> 0.099; at 1e-2 13-24 % faster in f16 / bf16
/// and 5 % in f32), and on rows of NNZ_LONG_ROWS entries or more at most NNZ_MAX_GROUP (f32 at
/// k = 256, f64 at k = 128 and 256: on an H200, random S of 8192 columns at density 5e-2 in f64 at
/// k = 256 0.869 -> 0.724 ms in the
/// band-column order, in f32 0.389 -> 0.347 in the band kernels, the suite's FEM matrix, random
/// 1e-2 and ergo's overlap matrix 1-12 % faster; on rows of a few entries, the stencils, the road
/// network, R-MAT and the circuit, 2-17 % slower); on a small one, where the GPU is not filled and
/// the time is latency, one vector per lane.
fn lanes_per_nonzero(nnz: usize, m: usize, k: usize, width: usize, fewest: usize) -> usize {
    let vectors = k.div_ceil(width).next_power_of_two();
    if nnz * k < NNZ_LARGE_PRODUCTS {
        return vectors.min(32);
    }
    let most = if nnz >= NNZ_LONG_ROWS * m { NNZ_MAX_GROUP } else { 32 };
    k.div_ceil(width * NNZ_VECTORS_PER_LANE).next_power_of_two().clamp(vectors.min(fewest), most)
}

/// GPU-Convert through a plan: equal chunks of consecutive nonzeros (in row order) per group of
/// lanes, vector loads along K; or, where rows are long and even, a warp a row (`row_warps_shape`,
/// [`DevicePlan::row_warps`]).
fn coo<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    rows: CUdeviceptr,
    row_warps_shape: Option<(usize, usize)>,
) -> Result<()> {
    if let Some(shape) = row_warps_shape {
        return row_warps(device, stream, op, shape);
    }
    nnz_balanced(device, stream, op, Rows::Coo { rows, order: None })
}

/// `sddmm_row_warps_*`: a warp a row, the row of A in registers, `group` lanes a group of nonzeros
/// and `per_lane` vectors of A's row a lane ([`row_warps_shape`]).
fn row_warps<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    (group, per_lane): (usize, usize),
) -> Result<()> {
    let name = format!("sddmm_row_warps_{}_g{group}_n{per_lane}", T::VALUE_TYPE.short_name());
    let f = device.function(&SDDMM, &name)?;
    let warps_per_block = NNZ_THREADS as usize / 32;
    let blocks = op.m.div_ceil(warps_per_block).min(device.multiprocessors * ROW_WARPS_BLOCKS_PER_SM) as u32;
    let cfg = Launch { grid: (blocks, 1, 1), block: (NNZ_THREADS, 1, 1), shared_bytes: 0 };
    crate::log::note(|| format!("kernel {name} ({blocks} thread blocks, a warp a row)"));
    let (m, nnz, k) = (op.m as i32, op.nnz as i64, op.k as i32);
    // row_warps_shape checked that the row strides fit.
    let (a_rs, b_rs) = (op.a_strides.0 as i32, op.b_strides.0 as i32);
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &m,
                &nnz,
                &k,
                &op.alpha,
                &op.a,
                &a_rs,
                &op.b,
                &b_rs,
                &op.s_values,
                &op.row_ptr,
                &op.col_ind,
                &op.base,
                &op.out,
                &op.check
            ],
        )
    }
}

/// The row-warp kernels' lanes a group and vectors of A's row a lane, where they suit a call on a
/// pattern of m rows and `nnz` entries at width k: rows of at least ROW_WARPS_MIN_ROW entries on
/// average and, where the longest row is known (a plan's), at most ROW_WARPS_EVEN times that
/// (without a plan, longer rows are shared by every warp: [`csr_row_warps`]), at least
/// ROW_WARPS_MIN_ROWS_PER_SM rows a multiprocessor, A's and B's rows in whole 16-byte chunks
/// (`chunks`, as for the dense tiles) with row strides below 2^31 elements (B's below 2^32 bytes,
/// which the kernels multiply by a column in one 32-bit product), and a kernel for the vectors a
/// lane (up to 8 in f32 / f64, 4 in f16 / bf16). Eight lanes a group, four where a row is at most
/// four vectors (f16 / bf16 at k <= 32): on random S at densities 1e-2 and 5e-2 (H200), four lanes
/// (two or four vectors a lane) were as fast as eight in f32 at k = 32 and 5-11 % slower in f32 at
/// k = 64 and f64 at k = 32.
fn row_warps_shape<T: Element>(
    multiprocessors: usize,
    (m, nnz, k): (usize, usize, usize),
    longest_row: Option<usize>,
    chunks: bool,
    row_strides: (usize, usize),
) -> Option<(usize, usize)> {
    let mean_row = nnz / m.max(1);
    if !chunks
        || mean_row < ROW_WARPS_MIN_ROW
        || longest_row.is_some_and(|longest| longest > ROW_WARPS_EVEN * mean_row)
        || m < ROW_WARPS_MIN_ROWS_PER_SM * multiprocessors
        || i32::try_from(row_strides.0.max(row_strides.1)).is_err()
        || u32::try_from(row_strides.1.saturating_mul(std::mem::size_of::<T>())).is_err()
    {
        return None;
    }
    row_in_registers::<T>(k)
}

/// Lanes a group and 16-byte vectors a lane that hold a row of A of k elements in registers, as the
/// row-warp and panel kernels hold it: eight lanes, four where a row is at most four vectors, and
/// up to 8 vectors a lane in f32 / f64, 4 in f16 / bf16 (whose vectors widen to 8 floats); `None`
/// for wider rows.
fn row_in_registers<T: Element>(k: usize) -> Option<(usize, usize)> {
    let vectors = k.div_ceil(16 / std::mem::size_of::<T>());
    let group = if vectors <= 4 { 4 } else { 8 };
    let per_lane = vectors.div_ceil(group).next_power_of_two();
    let most = match T::VALUE_TYPE {
        ValueType::F32 | ValueType::F64 => 8,
        ValueType::F16 | ValueType::Bf16 => 4,
    };
    (per_lane <= most).then_some((group, per_lane))
}

/// GPU-Dynamic in one launch: the COO kernel reading S as CSR, each nonzero's row found from the row
/// pointers instead of a conversion; with `check` the same launch validates the pattern.
pub fn coo_from_csr<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    check: Option<DeviceCheck>,
) -> Result<()> {
    nnz_balanced(device, stream, op, Rows::Csr { check })
}

/// Where the nnz-balanced kernel finds the row of each nonzero.
enum Rows {
    /// COO rows (`nnz` words), with the band-column order for the tiled algorithm: `sddmm_coo_*`.
    Coo { rows: CUdeviceptr, order: Option<CUdeviceptr> },
    /// The operands' row pointers, with the validation's state where the pattern is not validated
    /// yet: `sddmm_csr_*`.
    Csr { check: Option<DeviceCheck> },
}

/// `sddmm_coo_*` / `sddmm_csr_*`: equal chunks of consecutive positions per thread block; position
/// g is entry `order[g]`, or entry g without an order.
fn nnz_balanced<T: Element>(device: &Arc<GpuDevice>, stream: Stream, op: &DeviceOperands<T>, rows: Rows) -> Result<()> {
    // A pattern to validate is looked at even without entries: its row pointers may be wrong.
    if op.nnz == 0 && !matches!(rows, Rows::Csr { check: Some(_) }) {
        return Ok(());
    }
    let width = vector_width(op);
    let csr = matches!(rows, Rows::Csr { .. });
    let name = format!("sddmm_{}_{}_v{width}", if csr { "csr" } else { "coo" }, T::VALUE_TYPE.short_name());
    // The CSR kernels' row pointers in shared memory should not take L1 from the rows of A and B.
    let f = if csr {
        device.function_prepared(&SDDMM, &name, |d, f| d.prefer_l1_cache(f, NNZ_THREADS))?
    } else {
        device.function(&SDDMM, &name)?
    };
    let group = lanes_per_nonzero(op.nnz, op.m, op.k, width, if csr { CSR_MIN_GROUP } else { NNZ_MIN_GROUP });
    let group_log2 = group.trailing_zeros() as i32;
    // Equal chunks of positions, one per thread block, as many blocks as fit on the GPU at once
    // (NNZ_BLOCKS_PER_SM), fewer when there is not a batch for each group.
    let per_pass = (NNZ_THREADS as usize / group) * NNZ_BATCH;
    let blocks = if csr {
        // Each block of the CSR kernels first finds its rows and last validates its share, a few
        // memory round trips each: one wave of blocks, as many as are resident at once, pays them
        // once. And a block for every NNZ_THREADS rows: its share of the row pointers to check is
        // then one a thread, read at its start (a second would be one more round trip at its end),
        // and its positions span, on average, a quarter of the 1024 rows whose pointers it keeps
        // in shared memory (the kernels' SD_CSR_ROWS; more would bisect in global memory). The
        // occupancy is asked of the driver at every launch: a cache of it measured no faster.
        let resident = f
            .occupancy_max_active_blocks_per_multiprocessor(NNZ_THREADS, 0, None)
            .map_err(driver_error("reading a kernel's occupancy"))? as usize;
        op.nnz
            .div_ceil(per_pass)
            .max(op.m.div_ceil(NNZ_THREADS as usize))
            .clamp(1, device.multiprocessors * resident.max(1))
    } else {
        op.nnz.div_ceil(per_pass).clamp(1, device.multiprocessors * NNZ_BLOCKS_PER_SM)
    };
    let chunk = op.nnz.div_ceil(blocks);
    let groups = blocks * (NNZ_THREADS as usize / group);
    let blocks = blocks as u32;
    let cfg = Launch { grid: (blocks, 1, 1), block: (NNZ_THREADS, 1, 1), shared_bytes: 0 };
    crate::log::note(|| {
        format!(
            "kernel {name} ({blocks} thread blocks of {chunk} nonzeros in {} order, {groups} groups of {group} lanes, loads of {width})",
            if matches!(rows, Rows::Coo { order: Some(_), .. }) { "band-column" } else { "row" }
        )
    });
    let (nnz, k, chunk) = (op.nnz as i64, op.k as i32, chunk as i64);
    let (a_rs, a_cs) = (op.a_strides.0 as i64, op.a_strides.1 as i64);
    let (b_rs, b_cs) = (op.b_strides.0 as i64, op.b_strides.1 as i64);
    // Both kernels take the same arguments, each ignoring the other source's.
    let (m, n) = (op.m as i32, op.n as i32);
    let (rows, order, check, report) = match rows {
        Rows::Coo { rows, order } => (rows, order.unwrap_or(0), op.check, 0),
        Rows::Csr { check } => (0, 0, check.map_or(0, |c| c.check), check.map_or(0, |c| c.report)),
    };
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
                &op.row_ptr,
                &m,
                &n,
                &op.col_ind,
                &op.base,
                &order,
                &group_log2,
                &chunk,
                &op.out,
                &check,
                &report
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
    band: BandOrder,
    /// Where the pattern suits the tensor-core tiles (rows sorted by column, at least as many
    /// entries as rows × (column tiles + 1)): their starts and list.
    tensor_tiles: Option<TensorTiles>,
    /// Where the pattern suits the block tiles (rows sorted by column, BLOCK_TILE_MIN_ENTRIES
    /// entries a tile on average): their records.
    block_tiles: Option<BlockTiles>,
}

/// A plan's block tiles on the device: a record of BLOCK_TILE_WORDS words for each 16 × 16 tile of S
/// holding entries (see [`block_tile_records`]).
struct BlockTiles {
    records: DeviceBuffer,
    count: usize,
}

/// The tensor-core tiles of a plan's pattern on the device: for every row i and column tile t the
/// first entry of row i in the tile's columns (`column_tiles + 1` words a row, the last the row's
/// end; the panels read them too), and the (row tile, column tile) pairs holding entries.
struct TensorTiles {
    starts: DeviceBuffer,
    tiles: DeviceBuffer,
    count: usize,
    column_tiles: usize,
    /// The most entries a listed tile holds (how evenly the panel kernel's blocks share the work).
    busiest: usize,
}

/// The host arrays of [`TensorTiles`] for a zero-based pattern, or `None` where the pattern does not
/// suit them: a row not sorted by column (its entries in a tile would not be consecutive), or fewer
/// entries than rows × column tiles (the starts would outgrow the column indices, and the tiles
/// would compute mostly products nobody asked for).
fn tensor_tile_arrays(pattern: &CompressedRef<'_, ()>) -> Result<Option<ColumnTiles>> {
    let (m, n, nnz) = (pattern.outer_dim, pattern.inner_dim, pattern.nnz());
    let column_tiles = n.div_ceil(TC_TILE_COLS);
    let per_row = column_tiles + 1;
    if m == 0 || nnz == 0 || m.saturating_mul(per_row) > nnz || nnz > i32::MAX as usize {
        return Ok(None);
    }
    if !rows_sorted(pattern) {
        return Ok(None);
    }
    let mut starts = try_vec(m * per_row, 0i32, "the tensor-core tiles' row starts")?;
    starts.par_chunks_mut(per_row).enumerate().for_each(|(i, at)| {
        let (first, last) = (pattern.ptr[i] as usize, pattern.ptr[i + 1] as usize);
        let mut e = first;
        for (t, start) in at.iter_mut().enumerate() {
            let column = (t * TC_TILE_COLS) as i32;
            while e < last && pattern.idx[e] < column {
                e += 1;
            }
            *start = e as i32;
        }
    });
    let row_tiles = m.div_ceil(TC_TILE_ROWS);
    let counted: Vec<([i32; 2], usize)> = (0..row_tiles)
        .into_par_iter()
        .flat_map_iter(|r| {
            let rows = r * TC_TILE_ROWS..((r + 1) * TC_TILE_ROWS).min(m);
            let starts = &starts;
            (0..column_tiles)
                .map(move |t| {
                    let entries =
                        rows.clone().map(|i| (starts[i * per_row + t + 1] - starts[i * per_row + t]) as usize);
                    ([r as i32, t as i32], entries.sum())
                })
                .filter(|&(_, entries)| entries > 0)
        })
        .collect();
    let busiest = counted.iter().map(|&(_, entries)| entries).max().unwrap_or(0);
    let tiles = counted.into_iter().map(|(tile, _)| tile).collect();
    Ok(Some(ColumnTiles { starts, tiles, column_tiles, busiest }))
}

/// The host arrays of [`TensorTiles`], and the most entries any tile holds.
struct ColumnTiles {
    starts: Vec<i32>,
    tiles: Vec<[i32; 2]>,
    column_tiles: usize,
    busiest: usize,
}

/// Whether every row of a zero-based pattern is sorted by column without repeats.
fn rows_sorted(pattern: &CompressedRef<'_, ()>) -> bool {
    (0..pattern.outer_dim).into_par_iter().all(|i| {
        let row = &pattern.idx[pattern.ptr[i] as usize..pattern.ptr[i + 1] as usize];
        row.windows(2).all(|w| w[0] < w[1])
    })
}

/// The records of the block tiles of a zero-based pattern (`sddmm_block_tiles`), row tile by row
/// tile, each row tile's tiles holding entries in column order: the row tile and column tile, two
/// unused words, then for each of the tile's 16 rows its first entry in the tile's columns, then
/// for each the entry after its last there. `None` where a row is not sorted by column (its
/// entries in a tile would not be consecutive) or the tiles would hold fewer than
/// BLOCK_TILE_MIN_ENTRIES entries each on average.
fn block_tile_records(pattern: &CompressedRef<'_, ()>) -> Option<Vec<[i32; BLOCK_TILE_WORDS]>> {
    let (m, nnz) = (pattern.outer_dim, pattern.nnz());
    if m == 0 || nnz == 0 || nnz > i32::MAX as usize || !rows_sorted(pattern) {
        return None;
    }
    let row_tiles = m.div_ceil(BLOCK_TILE);
    // Counted first, so that no records are built for a pattern too sparse to keep them.
    let count: usize = (0..row_tiles)
        .into_par_iter()
        .map(|r| {
            let mut tiles = 0;
            visit_block_tiles(pattern, r, |_, _, _| tiles += 1);
            tiles
        })
        .sum();
    if count * BLOCK_TILE_MIN_ENTRIES > nnz {
        return None;
    }
    let records = (0..row_tiles)
        .into_par_iter()
        .flat_map_iter(|r| {
            let mut records = Vec::new();
            visit_block_tiles(pattern, r, |t, first, last| {
                let mut record = [0i32; BLOCK_TILE_WORDS];
                (record[0], record[1]) = (r as i32, t as i32);
                for h in 0..BLOCK_TILE {
                    (record[4 + h], record[4 + BLOCK_TILE + h]) = (first[h] as i32, last[h] as i32);
                }
                records.push(record);
            });
            records
        })
        .collect();
    Some(records)
}

/// Calls `visit(column tile, first, last)` for each block tile of row tile `row_tile` of a zero-based
/// pattern whose rows are sorted by column, in column order: `first[h]..last[h]` are the entries of
/// the tile's row h in its columns (empty for rows past the last).
fn visit_block_tiles(
    pattern: &CompressedRef<'_, ()>,
    row_tile: usize,
    mut visit: impl FnMut(usize, &[usize; BLOCK_TILE], &[usize; BLOCK_TILE]),
) {
    let rows = row_tile * BLOCK_TILE..((row_tile + 1) * BLOCK_TILE).min(pattern.outer_dim);
    let (mut cursor, mut end) = ([0usize; BLOCK_TILE], [0usize; BLOCK_TILE]);
    for (h, i) in rows.enumerate() {
        (cursor[h], end[h]) = (pattern.ptr[i] as usize, pattern.ptr[i + 1] as usize);
    }
    let tile_of = |e: usize| pattern.idx[e] as usize / BLOCK_TILE;
    while let Some(t) = (0..BLOCK_TILE).filter(|&h| cursor[h] < end[h]).map(|h| tile_of(cursor[h])).min() {
        let first = cursor;
        for h in 0..BLOCK_TILE {
            while cursor[h] < end[h] && tile_of(cursor[h]) == t {
                cursor[h] += 1;
            }
        }
        visit(t, &first, &cursor);
    }
}

/// The dense tiles of a plan: on tensor cores (f16 / bf16) or on CUDA cores (every type).
#[derive(Clone, Copy, Debug, PartialEq)]
enum DenseTiles {
    Tensor,
    Block,
}

impl DevicePlan {
    /// The row-warp kernel's shape for a COO call on this plan's pattern ([`row_warps_shape`]).
    fn row_warps<T: Element>(
        &self,
        device: &GpuDevice,
        dims: (usize, usize, usize),
        chunks: bool,
        row_strides: (usize, usize),
    ) -> Option<(usize, usize)> {
        row_warps_shape::<T>(device.multiprocessors, dims, Some(self.band.longest_row), chunks, row_strides)
    }

    /// The panel kernel's shape for a call at width k on this plan's m × n pattern of `nnz` entries
    /// ([`panel_shape`]), where the plan has its column tiles' row starts and the panels pay
    /// ([`panels_pay`]; `row_warps`: the row-warp kernel would take the call).
    fn panels<T: Element>(
        &self,
        device: &GpuDevice,
        (m, n, nnz, k): (usize, usize, usize, usize),
        chunks: bool,
        row_strides: (usize, usize),
        row_warps: bool,
    ) -> Option<PanelShape> {
        let tt = self.tensor_tiles.as_ref()?;
        let gpu = (device.multiprocessors, device.max_shared_memory_per_block_optin);
        panel_shape::<T>(gpu, (m, n, k), tt.column_tiles, chunks, row_strides)
            .filter(|shape| panels_pay(shape, (m, n, nnz), (tt.column_tiles, tt.busiest), row_warps))
    }

    /// The dense tiles the tiled algorithm computes for a call on `nnz` entries at width k whose
    /// operands' rows lie in whole 16-byte chunks, base addresses included (`chunks`, which both
    /// kinds need; the tensor-core tiles also 16-bit elements, or f32 in a TF32 `math` mode): the
    /// tensor-core tiles or else the block tiles where they pay ([`tensor_tiles_pay`],
    /// [`block_tiles_pay`]; against the row-warp kernel where it would take the call, `row_warps`, at
    /// ROW_WARPS_COST of the COO kernel's time an entry); failing that, with `tensor_fallback` (the
    /// tiled algorithm forced where the band kernels do not pay), the tensor-core tiles wherever the
    /// plan has them. `None`: the band kernels.
    fn dense_tiles<T: Element>(
        &self,
        (nnz, k): (usize, usize),
        chunks: bool,
        tensor_fallback: bool,
        row_warps: bool,
        math: SddmmMathMode,
    ) -> Option<DenseTiles> {
        let products = TensorProducts::of(T::VALUE_TYPE, math);
        let tensor = self.tensor_tiles.as_ref().filter(|_| chunks && products.is_some());
        let block = self.block_tiles.as_ref().filter(|_| chunks);
        // The cost models' COO kernel, or the row-warp kernel that takes a COO call instead.
        let entries = if row_warps { ROW_WARPS_COST * nnz as f64 } else { nnz as f64 };
        if let (Some(tt), Some(products)) = (tensor, products)
            && tensor_tiles_pay(products, tt.count, entries, k)
        {
            Some(DenseTiles::Tensor)
        } else if block.is_some_and(|bt| block_tiles_pay::<T>(bt.count, entries, k)) {
            Some(DenseTiles::Block)
        } else if tensor_fallback && tensor.is_some() {
            Some(DenseTiles::Tensor)
        } else {
            None
        }
    }
}

/// Whether the block tiles (`tiles` of them) beat the other kernels on `entries` entries at width k, by
/// a cost model fitted to an H100 (the suite's band, block, FEM and stencil patterns at k = 64 and
/// 256, the block tiles and the COO kernel forced in one run): a tile costs 2.0 + 0.0234·k ns in
/// f32 and 1.83 + 0.0495·k ns in f64, the COO kernel 1.5 + 0.57·k ps an entry in f32 and 0.95·k ps
/// in f64. So the tiles pay where they hold more than about 92 entries (f32) or 82 (f64) at k = 64,
/// 54 or 60 at k = 256: bands and blocks (150-210 entries a tile), not FEM node blocks (54) or
/// stencils (16-20), where the band kernels are faster still. f16 / bf16 take f32's figures (not
/// fitted to them; on the suite's band and block patterns their tiles beat COO 1.8-2.6x at k = 64
/// and 256).
fn block_tiles_pay<T: Element>(tiles: usize, entries: f64, k: usize) -> bool {
    let k = k as f64;
    let (tile_ns, entry_ns) = match T::VALUE_TYPE {
        ValueType::F32 | ValueType::F16 | ValueType::Bf16 => (2.0 + 0.0234 * k, 0.0015 + 0.00057 * k),
        ValueType::F64 => (1.83 + 0.0495 * k, 0.00095 * k),
    };
    tiles as f64 * tile_ns < entries * entry_ns
}

/// Whether A's and B's rows lie in whole 16-byte chunks, as the dense tiles stage them and the
/// row-warp kernels load them: row-major with K and the leading dimensions multiples of 16 bytes
/// (their base addresses must be too: [`operands_in_chunks`]).
fn rows_in_chunks<T: Element>(k: usize, a_strides: (usize, usize), b_strides: (usize, usize)) -> bool {
    shape_vector_width::<T>(k, a_strides, b_strides) == 16 / std::mem::size_of::<T>()
}

/// [`rows_in_chunks`] with the base addresses of A and B.
fn operands_in_chunks<T: Element>(op: &DeviceOperands<T>) -> bool {
    rows_in_chunks::<T>(op.k, op.a_strides, op.b_strides) && op.a.is_multiple_of(16) && op.b.is_multiple_of(16)
}

/// The tiled algorithm on CUDA cores (`sddmm_block_tiles_*`, FP32 arithmetic for the 16-bit types):
/// each listed 16 × 16 tile of S computed densely by a warp, its entries written from shared memory.
fn block_tiles<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    bt: &BlockTiles,
) -> Result<()> {
    if bt.count == 0 {
        return Ok(());
    }
    let name = format!("sddmm_block_tiles_{}", T::VALUE_TYPE.short_name());
    let f = device.function(&SDDMM, &name)?;
    let blocks = bt.count.div_ceil(BLOCK_TILE_WARPS as usize) as u32;
    crate::log::note(|| format!("kernel {name} ({} tiles of 16 x 16, {blocks} thread blocks)", bt.count));
    let cfg = Launch {
        grid: (blocks, 1, 1),
        block: (BLOCK_TILE_WARPS * 32, 1, 1),
        shared_bytes: BLOCK_TILE_SHARED_BYTES as u32,
    };
    let (m, n, k) = (op.m as i32, op.n as i32, op.k as i32);
    let (lda, ldb) = (op.a_strides.0 as i64, op.b_strides.0 as i64);
    let (records, tiles) = (bt.records.ptr(), bt.count as i32);
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &m,
                &n,
                &k,
                &op.alpha,
                &op.a,
                &lda,
                &op.b,
                &ldb,
                &op.s_values,
                &op.col_ind,
                &records,
                &tiles,
                &op.out
            ],
        )
    }
}

/// What the tensor-core tiles multiply: 16-bit elements (m16n8k16), or f32 elements in a TF32 math
/// mode (m16n8k8): rounded to TF32, or split into three products (3xTF32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TensorProducts {
    Half,
    Tf32,
    Tf32x3,
}

impl TensorProducts {
    /// The tiles' products for a call of `value_type` in `math`; `None`: no tensor-core kernel (f64,
    /// and f32 in the exact default mode).
    fn of(value_type: ValueType, math: SddmmMathMode) -> Option<TensorProducts> {
        match (value_type, math) {
            (ValueType::F16 | ValueType::Bf16, _) => Some(TensorProducts::Half),
            (ValueType::F32, SddmmMathMode::Tf32) => Some(TensorProducts::Tf32),
            (ValueType::F32, SddmmMathMode::Tf32x3) => Some(TensorProducts::Tf32x3),
            _ => None,
        }
    }

    /// The kernel's name for elements of `value_type`.
    fn kernel(self, value_type: ValueType) -> String {
        match self {
            TensorProducts::Half => format!("sddmm_tc_tiles_{}", value_type.short_name()),
            TensorProducts::Tf32 => "sddmm_tc_tiles_f32_tf32".to_string(),
            TensorProducts::Tf32x3 => "sddmm_tc_tiles_f32_3xtf32".to_string(),
        }
    }
}

/// Whether the tensor-core tiles (`tiles` of them listed) beat the COO kernel on `entries` entries at
/// width k, by cost models of the tiles and of the COO kernel, fitted to random 8192 × 8192 patterns
/// with both forced in one run. f16 / bf16 (an H100, densities 5e-2 and 1e-1, k = 32 to 256): a
/// listed tile costs 8.5 + 0.119·k ns plus 8.9 ps an entry, the COO kernel 16.4 + 0.29·k ps an
/// entry, so the tiles pay where they are more than 2.9 % (k = 256) to 4.5 % (k = 32) full. f32 in
/// the TF32 modes (an H200, densities 1e-2, 5e-2 and 1e-1, k = 32 to 256,
/// docs/results/h200-2026-11-29-sddmm-tf32.jsonl): a tile costs 13.0 + 0.298·k ns in TF32 and
/// 12 + 0.554·k ns in 3xTF32 plus 5.6 ps an entry, the COO kernel 5.8 + 0.47·k ps an entry (the
/// row-warp kernel at 1e-1, which took those calls, over ROW_WARPS_COST), so that TF32 pays from
/// about 9 % full at k = 128 and 8 % at k = 256, 3xTF32 only where tiles are nearly full. That model
/// counts throughput, which thousands of tiles reach; a few hundred tiles, a block each, take the
/// time of one block at least ([`TC_FEWEST_TILES_NS`] in the model's units).
fn tensor_tiles_pay(products: TensorProducts, tiles: usize, entries: f64, k: usize) -> bool {
    let k = k as f64;
    let ((tile_ns, tile_k_ns, entry_ns), (coo_ns, coo_k_ns)) = match products {
        TensorProducts::Half => ((8.5, 0.119, 0.0089), (0.0164, 0.00029)),
        TensorProducts::Tf32 => ((13.0, 0.298, 0.0056), (0.0058, 0.00047)),
        TensorProducts::Tf32x3 => ((12.0, 0.554, 0.0056), (0.0058, 0.00047)),
    };
    let tiles_ns = (tiles as f64 * (tile_ns + tile_k_ns * k) + entries * entry_ns).max(TC_FEWEST_TILES_NS);
    tiles_ns < entries * (coo_ns + coo_k_ns * k)
}

/// The least time of the tensor-core tiles in [`tensor_tiles_pay`]'s model, from ergo's overlap
/// matrix (1625 rows, 0.36 M entries, 165 tiles of 128 × 128 holding entries) in f16 on an H200,
/// both algorithms forced (docs/results/h200-2026-11-28-sddmm-tiles-least-time-ab.jsonl): the tiles
/// took 23.7 / 24.4 / 26.3 / 31.3 µs a call at k = 32 / 64 / 128 / 256, COO 19.8 / 22.7 / 31.0 /
/// 45.2. The model puts COO at 9.1 / 12.4 / 19.0 / 32.2 µs there and the tiles at 5.2–9.8, so any
/// least time between 12.4 and 19.0 µs picks the faster at each k.
const TC_FEWEST_TILES_NS: f64 = 15_000.0;

/// The tiled algorithm on tensor cores (`sddmm_tc_tiles_*`, f16 / bf16, whose α is an f32, and f32
/// in a TF32 math mode): each listed tile of S computed densely, its entries written from shared
/// memory.
fn tensor_tiles<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    tt: &TensorTiles,
    products: TensorProducts,
) -> Result<()> {
    if tt.count == 0 {
        return Ok(());
    }
    let f = device.function(&SDDMM, &products.kernel(T::VALUE_TYPE))?;
    device.allow_shared_memory(&f, TC_SHARED_BYTES)?;
    // Where every tile holds entries the grid is all of them (no list to read first).
    let row_tiles = op.m.div_ceil(TC_TILE_ROWS);
    let every_tile = tt.count == row_tiles * tt.column_tiles && row_tiles <= u16::MAX as usize;
    let (grid, tiles) = if every_tile {
        ((tt.column_tiles as u32, row_tiles as u32, 1), 0)
    } else {
        ((tt.count as u32, 1, 1), tt.tiles.ptr())
    };
    let cfg = Launch { grid, block: (TC_THREADS, 1, 1), shared_bytes: TC_SHARED_BYTES as u32 };
    let (m, n, k) = (op.m as i32, op.n as i32, op.k as i32);
    let (lda, ldb) = (op.a_strides.0 as i64, op.b_strides.0 as i64);
    let (starts, column_tiles) = (tt.starts.ptr(), tt.column_tiles as i32);
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &m,
                &n,
                &k,
                &op.alpha,
                &op.a,
                &lda,
                &op.b,
                &ldb,
                &op.s_values,
                &op.col_ind,
                &starts,
                &column_tiles,
                &tiles,
                &op.out
            ],
        )
    }
}

/// The panel kernel's threads a block (the kernels' SD_PANELS lines), one block a multiprocessor
/// whose shared memory holds the panel of B: 32 warps where a lane holds at most
/// PANEL_WIDE_VECTORS vectors of A's row (the kernel then fits 64 registers), else 16. On random S
/// of 8192 × 8192 on an H200, 1024 threads against 512, both builds forced to the panels in one run,
/// two rounds (docs/results/h200-2026-11-29-sddmm-panel-threads-ab.jsonl): f32 at k = 64 0.0738 ->
/// 0.0640 ms at density 5e-2 and 0.0322 -> 0.0300 at 1e-2, f16 / bf16 at k = 128 0.096 -> 0.082 at
/// 5e-2 and 0.039 -> 0.035 at 1e-2, at k = 64 0.024-0.026 -> 0.023 at 1e-2 but 0.049-0.050 ->
/// 0.051-0.052 at 5e-2.
const PANEL_THREADS: u32 = 512;
const PANEL_WIDE_THREADS: u32 = 1024;
const PANEL_WIDE_VECTORS: usize = 2;
/// Where AUTO takes the panel kernel ([`panels_pay`]), from random S of 8192 × 8192 on an
/// H200, the panels and the row-warp kernel forced in one run (docs/methods.md): at density 5e-2 the
/// panels took 0.68-0.71 of the row-warp kernel's time in f16 / bf16 at K = 64 (rows of 83 entries a
/// panel), 0.79 in f64 (19), 0.95 in f32 (45); at K = 128 0.90-0.96 in f16 / bf16 (45) and 0.92 in
/// f32 (19); at K = 32, whose rows of B are loaded in one vector a lane, 1.11-1.60 times its time
/// at 5e-2 (but f64's 0.97) and 1.20-1.37 at 1e-2; and wherever a row held fewer than 16 entries a
/// panel 0.99-2.41 times (every cell at 1e-2 but f16 / bf16 at K = 64; f32 at K = 256 and f64 at
/// K = 128, a column tile a panel). f16 / bf16 at K = 64 and 1e-2 (16.6 entries a panel): 0.97 / 1.03
/// of the row-warp kernel's time, and 1.18 / 1.06 (0.0225 / 0.0214 against 0.0190 / 0.0201 ms) once
/// that kernel was held to four blocks an SM (kernels/sddmm.cu), hence at least 18 entries (f64 at
/// K = 64 and 5e-2 has 19). A tile of S holding more than twice the mean would leave the blocks of
/// other panels or rows idle.
const PANEL_MIN_K: usize = 64;
const PANEL_MIN_ENTRIES: usize = 18;
const PANEL_EVEN_TILES: usize = 2;

/// The launch of `sddmm_panels_*` for one call: the row of A in registers (`group` lanes of
/// `per_lane` vectors, [`row_in_registers`]), panels of `panel_tiles` column tiles of B in shared
/// memory (`shared_bytes`), and the grid: `panels` × `row_groups` thread blocks of `group_rows` rows
/// and `threads` threads.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PanelShape {
    group: usize,
    per_lane: usize,
    threads: u32,
    panel_tiles: usize,
    panels: usize,
    row_groups: usize,
    group_rows: usize,
    shared_bytes: usize,
}

/// The panel kernel's shape for a call at width k on an m × n pattern with `column_tiles` tiles of
/// TC_TILE_COLS columns, on a GPU of `multiprocessors` whose blocks may have `shared_memory` bytes,
/// where it applies: from K = PANEL_MIN_K on (at K = 32 the row-warp kernel was the faster but in
/// f64 at density 5e-2), A's and B's rows in whole 16-byte chunks (`chunks`) with row strides below
/// 2^31, the row of A in registers, and a column tile of B in the shared memory of a block. Panels
/// as wide as the shared memory holds, the column tiles split evenly among them, and as many row
/// groups as leave one block a multiprocessor in one wave.
fn panel_shape<T: Element>(
    (multiprocessors, shared_memory): (usize, usize),
    (m, n, k): (usize, usize, usize),
    column_tiles: usize,
    chunks: bool,
    row_strides: (usize, usize),
) -> Option<PanelShape> {
    if !chunks || m == 0 || n == 0 || k < PANEL_MIN_K || i32::try_from(row_strides.0.max(row_strides.1)).is_err() {
        return None;
    }
    let (group, per_lane) = row_in_registers::<T>(k)?;
    let column_bytes = k * std::mem::size_of::<T>();
    let most_tiles = shared_memory / (TC_TILE_COLS * column_bytes);
    if most_tiles == 0 {
        return None;
    }
    let panel_tiles = column_tiles.div_ceil(column_tiles.div_ceil(most_tiles));
    let panels = column_tiles.div_ceil(panel_tiles);
    let row_groups = (multiprocessors / panels).clamp(1, m);
    let group_rows = m.div_ceil(row_groups);
    let row_groups = m.div_ceil(group_rows);
    let shared_bytes = (panel_tiles * TC_TILE_COLS).min(n) * column_bytes;
    let threads = if per_lane <= PANEL_WIDE_VECTORS { PANEL_WIDE_THREADS } else { PANEL_THREADS };
    Some(PanelShape { group, per_lane, threads, panel_tiles, panels, row_groups, group_rows, shared_bytes })
}

/// Whether the panel kernel (of `shape`) beats the other kernels on an m × n pattern of `nnz`
/// entries with `column_tiles` tiles of TC_TILE_COLS columns, none of whose TC_TILE_ROWS ×
/// TC_TILE_COLS tiles holds more than `busiest` entries: where the row-warp kernel would take the
/// call (`row_warps`: rows long and even), a row holds at least PANEL_MIN_ENTRIES entries a panel on
/// average, and no tile holds more than PANEL_EVEN_TILES times the mean of all tiles (the blocks
/// then share the work about evenly).
fn panels_pay(
    shape: &PanelShape,
    (m, n, nnz): (usize, usize, usize),
    (column_tiles, busiest): (usize, usize),
    row_warps: bool,
) -> bool {
    let panel_columns = (shape.panel_tiles * TC_TILE_COLS).min(n);
    let all_tiles = m.div_ceil(TC_TILE_ROWS) * column_tiles;
    row_warps
        && nnz as f64 * panel_columns as f64 >= PANEL_MIN_ENTRIES as f64 * m as f64 * n as f64
        && busiest * all_tiles <= PANEL_EVEN_TILES * nnz
}

/// The tiled algorithm with panels of B in shared memory (`sddmm_panels_*`, [`panel_shape`]), on the
/// column tiles' row starts of a plan whose rows are sorted by column.
fn panels<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    tt: &TensorTiles,
    shape: PanelShape,
) -> Result<()> {
    let name = format!("sddmm_panels_{}_g{}_n{}", T::VALUE_TYPE.short_name(), shape.group, shape.per_lane);
    let f = device
        .function_prepared(&SDDMM, &name, |d, f| d.allow_shared_memory(f, d.max_shared_memory_per_block_optin))?;
    crate::log::note(|| {
        format!(
            "kernel {name} ({} panels of {} columns of B, {} groups of {} rows)",
            shape.panels,
            shape.panel_tiles * TC_TILE_COLS,
            shape.row_groups,
            shape.group_rows
        )
    });
    let cfg = Launch {
        grid: (shape.panels as u32, shape.row_groups as u32, 1),
        block: (shape.threads, 1, 1),
        shared_bytes: shape.shared_bytes as u32,
    };
    let (m, n, k) = (op.m as i32, op.n as i32, op.k as i32);
    // panel_shape checked that the row strides fit.
    let (a_rs, b_rs) = (op.a_strides.0 as i32, op.b_strides.0 as i32);
    let (starts, column_tiles) = (tt.starts.ptr(), tt.column_tiles as i32);
    let (panel_tiles, group_rows) = (shape.panel_tiles as i32, shape.group_rows as i32);
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &m,
                &n,
                &k,
                &op.alpha,
                &op.a,
                &a_rs,
                &op.b,
                &b_rs,
                &op.s_values,
                &op.col_ind,
                &starts,
                &column_tiles,
                &panel_tiles,
                &group_rows,
                &op.out
            ],
        )
    }
}

impl std::fmt::Debug for DevicePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevicePlan(device {}, {} entries)", self.ordinal, self.col_ind.bytes() / 4)
    }
}

impl PreparedPlan for DevicePlan {}

/// What calls without a plan prepared on the device keep on it between calls, made at the first:
/// the workspace their COO rows (and band order) are built in, whose event also orders the calls
/// one after another whatever their streams, and for patterns in device memory the validation's
/// `sd_check` and the `sd_report` the host reads an invalid pattern from once the calls that may
/// write it have finished.
pub struct Unplanned {
    device: Arc<GpuDevice>,
    workspace: Workspace,
    check: DeviceBuffer,
    report: MappedWords,
    /// The row-warp kernels' two counters ([`csr_row_warps`]), zero between calls.
    row_counters: DeviceBuffer,
    /// A validation on the device was queued since the report was last read.
    unread: bool,
}

impl Unplanned {
    fn new(device: &Arc<GpuDevice>, stream: Stream) -> Result<Self> {
        // Zeroed on `stream`; the workspace's event, recorded after it, makes calls on any stream
        // wait for it.
        let check = DeviceBuffer::zeroed(device, CHECK_BYTES, stream, "the validation of device patterns")?.resident();
        let row_counters = DeviceBuffer::zeroed(device, 8, stream, "the row-warp kernels' counters")?.resident();
        let mut workspace = Workspace::new(device)?;
        workspace.release(stream)?;
        Ok(Unplanned {
            device: device.clone(),
            workspace,
            check,
            report: MappedWords::new(device, report::WORDS)?,
            row_counters,
            unread: false,
        })
    }

    fn device_check(&self) -> DeviceCheck {
        DeviceCheck { check: self.check.ptr(), report: self.report.device_ptr() }
    }

    /// The first invalid pattern in the report not read yet, once the validations that may write it
    /// have finished (with `wait`, after waiting for them; without, `None` while they run). Without
    /// `wait` the report's count of invalid patterns is read first: while it is zero there is
    /// nothing to report, and the driver is not asked whether the work has finished (asked, it took
    /// 1.8 µs of every sddmmDynamic call on a device pattern, H200).
    fn invalid_pattern(&mut self, wait: bool) -> Result<Option<InvalidPattern>> {
        if !self.unread {
            return Ok(None);
        }
        if wait {
            self.workspace.wait_idle()?;
        } else if self.report.read(report::INVALID_CALLS) == 0 || !self.workspace.is_idle()? {
            return Ok(None);
        }
        self.unread = false;
        let words: [u64; report::WORDS] = std::array::from_fn(|i| self.report.read(i));
        if words[report::INVALID_CALLS] == 0 {
            return Ok(None);
        }
        self.report.write(report::INVALID_CALLS, 0);
        reported_pattern(&words).map(Some)
    }
}

/// A fault word of `sd_check` / `sd_report` for the entry at `position` holding `value`: the
/// complement of (position << 32 | the value's bits), as the kernels' `sd_fault` makes it, so that
/// the largest word is that of the first position and 0 is no fault.
#[cfg(test)]
fn fault_word(position: usize, value: i32) -> u64 {
    !(((position as u64) << 32) | value as u32 as u64)
}

/// The position and value of a fault word ([`fault_word`]).
fn position_and_value(word: u64) -> (usize, i32) {
    ((!word >> 32) as usize, !word as u32 as i32)
}

/// The first invalid pattern an `sd_report` holds (its invalid-call count not 0): the fault the host
/// validation would name first (sddmmDynamic's rowPtr checks, a decrease, a column out of range).
fn reported_pattern(words: &[u64; report::WORDS]) -> Result<InvalidPattern> {
    let base = if words[report::BASE] == 0 { IndexBase::Zero } else { IndexBase::One };
    let shape = PatternShape {
        rows: words[report::ROWS] as usize,
        cols: words[report::COLS] as usize,
        nnz: words[report::NNZ] as usize,
        base,
    };
    let (first, last) = (words[report::FIRST] as i32, words[report::LAST] as i32);
    let fault = if first as i64 != base.offset() {
        StructureFault::FirstPointer { value: first }
    } else if last as i64 - base.offset() != shape.nnz as i64 {
        StructureFault::LastPointer { value: last }
    } else if words[report::DECREASE] != 0 {
        let (at, value) = position_and_value(words[report::DECREASE]);
        let (_, previous) = position_and_value(words[report::DECREASE_PREVIOUS]);
        StructureFault::Decreases { at, value, previous }
    } else if words[report::COLUMN] != 0 {
        let (at, value) = position_and_value(words[report::COLUMN]);
        StructureFault::IndexOutOfRange { at, value }
    } else {
        return Err(Error::internal("the device found a pattern invalid but reported no fault"));
    };
    Ok(InvalidPattern { shape, fault, later_invalid: words[report::INVALID_CALLS] - 1 })
}

impl Drop for Unplanned {
    fn drop(&mut self) {
        // Kernels of calls still running may write the report: wait for them before it is freed.
        let _ = self.workspace.wait_idle();
    }
}

impl CudaExecutor {
    /// The state of calls without a plan on `gpu`, made on first use. Moving to another device
    /// leaves the old state behind; an invalid pattern it had not reported yet is this call's error.
    fn unplanned(&mut self, gpu: &Arc<GpuDevice>, stream: Stream) -> Result<&mut Unplanned> {
        if self.sddmm.as_ref().is_some_and(|u| u.device.ordinal != gpu.ordinal) {
            let mut left = self.sddmm.take().expect("checked");
            let invalid = left.invalid_pattern(true);
            drop(left);
            gpu.bind()?;
            if let Some(invalid) = invalid? {
                return Err(invalid.error(true));
            }
        }
        if self.sddmm.is_none() {
            self.sddmm = Some(Unplanned::new(gpu, stream)?);
        }
        Ok(self.sddmm.as_mut().expect("made above"))
    }
}

/// Runs the chosen algorithm of a call without a plan on its device and, with `check`, validates the
/// pattern there: the COO algorithm in one launch that reads the row pointers itself; the tiled
/// algorithm builds its COO rows (validating) and band order in `memory` (see [`unplanned_bytes`]).
fn run_unplanned<T: Element>(
    gpu: &Arc<GpuDevice>,
    stream: Stream,
    algorithm: SddmmAlgorithm,
    operands: &DeviceOperands<T>,
    memory: CUdeviceptr,
    row_counters: CUdeviceptr,
    check: Option<DeviceCheck>,
) -> Result<()> {
    let op = operands;
    let dims = (op.m, op.n, op.nnz);
    match algorithm {
        SddmmAlgorithm::Tiled => {
            let rows = memory;
            coo_rows(gpu, stream, dims, op.row_ptr, op.col_ind, op.base, rows, check)?;
            let layout = OrderLayout::new(gpu, op.m, op.n, op.nnz);
            let order = memory + word_array_bytes(op.nnz) as u64;
            let scratch = order + layout.order_bytes as u64;
            band_order(gpu, stream, &layout, dims, (op.row_ptr, op.col_ind, op.base), order, scratch, None)?;
            tiled(gpu, stream, op, order, rows)
        }
        // No conversion: the kernels read the row pointers (and validate where asked) themselves.
        SddmmAlgorithm::Coo | SddmmAlgorithm::Auto => {
            let (chunks, row_strides) = (operands_in_chunks(op), (op.a_strides.0, op.b_strides.0));
            match row_warps_shape::<T>(gpu.multiprocessors, (op.m, op.nnz, op.k), None, chunks, row_strides) {
                Some(shape) => csr_row_warps(gpu, stream, op, shape, check, (memory, row_counters)),
                None => coo_from_csr(gpu, stream, op, check),
            }
        }
    }
}

/// GPU-Dynamic on rows of many entries (`sddmm_csr_row_warps_*` then `sddmm_long_rows_*`): a warp a
/// row of at most ROW_WARPS_EVEN times the mean row, the row of A in registers, as through a plan;
/// longer rows are listed in `long_rows` (m words) as the first kernel meets them and the second
/// shares their iterations among every warp of its grid. `counters` (two words, zero between calls:
/// the second kernel clears them) count the listed rows and the second kernel's blocks. With
/// `check` the two validate the pattern, each column where it is read, and the second gives the
/// verdict.
fn csr_row_warps<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    op: &DeviceOperands<T>,
    (group, per_lane): (usize, usize),
    check: Option<DeviceCheck>,
    (long_rows, counters): (CUdeviceptr, CUdeviceptr),
) -> Result<()> {
    let suffix = format!("{}_g{group}_n{per_lane}", T::VALUE_TYPE.short_name());
    let rows_kernel = device.function(&SDDMM, &format!("sddmm_csr_row_warps_{suffix}"))?;
    let long_kernel = device.function(&SDDMM, &format!("sddmm_long_rows_{suffix}"))?;
    let warps_per_block = NNZ_THREADS as usize / 32;
    let blocks = op.m.div_ceil(warps_per_block).clamp(1, device.multiprocessors * ROW_WARPS_BLOCKS_PER_SM) as u32;
    let long_blocks = (device.multiprocessors * ROW_WARPS_LONG_BLOCKS_PER_SM) as u32;
    crate::log::note(|| {
        format!(
            "kernels sddmm_csr_row_warps_{suffix} ({blocks} thread blocks, a warp a row) and sddmm_long_rows_{suffix}"
        )
    });
    let (m, n, nnz, k) = (op.m as i32, op.n as i32, op.nnz as i64, op.k as i32);
    // row_warps_shape checked that the row strides fit.
    let (a_rs, b_rs) = (op.a_strides.0 as i32, op.b_strides.0 as i32);
    let long_limit = (ROW_WARPS_EVEN * (op.nnz / op.m.max(1))) as i64;
    let (check, report) = (check.map_or(0, |c| c.check), check.map_or(0, |c| c.report));
    let cfg = |grid: u32| Launch { grid: (grid, 1, 1), block: (NNZ_THREADS, 1, 1), shared_bytes: 0 };
    // One argument list for both kernels (kernels/sddmm.cu, SD_CSR_ROW_WARPS_PARAMS).
    let args = kernel_args![
        &m,
        &n,
        &nnz,
        &k,
        &op.alpha,
        &op.a,
        &a_rs,
        &op.b,
        &b_rs,
        &op.s_values,
        &op.row_ptr,
        &op.col_ind,
        &op.base,
        &long_limit,
        &long_rows,
        &counters,
        &op.out,
        &check,
        &report
    ];
    // SAFETY: the list matches SD_CSR_ROW_WARPS_PARAMS; the operands cover what the kernels read
    // and write for these sizes, long_rows holds a row per row of the pattern and counters two words.
    unsafe {
        launch(&rows_kernel, cfg(blocks), stream, args)?;
        launch(&long_kernel, cfg(long_blocks), stream, args)
    }
}

/// Bytes of an array of `count` 32-bit words where other arrays follow it in one allocation.
fn word_array_bytes(count: usize) -> usize {
    (count * 4).next_multiple_of(ARRAY_ALIGNMENT)
}

/// The workspace bytes [`run_unplanned`] uses.
fn unplanned_bytes(gpu: &GpuDevice, algorithm: SddmmAlgorithm, (m, n, nnz): (usize, usize, usize)) -> usize {
    match algorithm {
        SddmmAlgorithm::Tiled => {
            let layout = OrderLayout::new(gpu, m, n, nnz);
            word_array_bytes(nnz) + layout.order_bytes + layout.scratch_bytes
        }
        // The row-warp kernels' list of long rows, where they may take the call.
        SddmmAlgorithm::Coo | SddmmAlgorithm::Auto if nnz >= ROW_WARPS_MIN_ROW * m => word_array_bytes(m),
        SddmmAlgorithm::Coo | SddmmAlgorithm::Auto => 0,
    }
}

impl<T: Element> SddmmBackend<T> for CudaExecutor {
    /// With a plan prepared on this device: where its pattern has tensor-core tiles (f16 / bf16) or
    /// block tiles full enough to pay and the operands suit them (`DevicePlan::dense_tiles`), or
    /// where the band kernels pay (`band_pays`) and the row-warp kernel would not take the call
    /// (`DevicePlan::row_warps`: on random S of 8192 rows at densities 1e-2 and 5e-2, H200, the band
    /// kernels took 1.0-1.49 times its time in every type and width where AUTO had taken them).
    fn prefers_tiled(
        &self,
        operands: &RawOperands<T>,
        shape: PatternShape,
        plan: Option<&SddmmPlan>,
        math: SddmmMathMode,
    ) -> bool {
        let Some(d) = plan.and_then(|p| p.prepared()).and_then(|p| (p as &dyn Any).downcast_ref::<DevicePlan>()) else {
            return false;
        };
        let Some(gpu) = self.lead().ok().filter(|gpu| gpu.ordinal == d.ordinal) else {
            return false;
        };
        let (a_strides, b_strides) = (operands.strides(operands.a.ld), operands.strides(operands.b.ld));
        // Host arrays are staged into aligned device memory; device arrays are read where they lie.
        // An aligned address needs no driver call to say where it lies.
        let aligned = |ptr: *const T| {
            (ptr as u64).is_multiple_of(16) || matches!(memory::locate(ptr.cast()), memory::Location::Host)
        };
        let chunks =
            rows_in_chunks::<T>(operands.k, a_strides, b_strides) && aligned(operands.a.ptr) && aligned(operands.b.ptr);
        let dims = (shape.rows, shape.nnz, operands.k);
        let row_strides = (a_strides.0, b_strides.0);
        let row_warps = d.row_warps::<T>(&gpu, dims, chunks, row_strides).is_some();
        let full_dims = (shape.rows, shape.cols, shape.nnz, operands.k);
        d.panels::<T>(&gpu, full_dims, chunks, row_strides, row_warps).is_some()
            || d.dense_tiles::<T>((shape.nnz, operands.k), chunks, false, row_warps, math).is_some()
            || (!row_warps && band_pays::<T>(&gpu, &d.band, dims, a_strides, b_strides))
    }

    /// The arrays may be host or device memory. With a plan prepared on this device its COO rows /
    /// band order are used; otherwise the chosen algorithm's preprocessing runs on the GPU first,
    /// in the handle's workspace, validating a pattern passed in place. Returns without waiting
    /// unless `out` is host memory.
    unsafe fn sample(&mut self, sampling: &Sampling<'_, T>) -> Result<()> {
        let call = sampling.operands;
        let PatternShape { rows: m, cols: n, nnz, base } = sampling.structure.shape();
        let in_place = matches!(sampling.structure, Structure::InPlace(_));
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
                // A pattern passed in place is device memory, used where it lies (DeviceInput checks
                // its device).
                staged_ptr = unsafe { DeviceInput::new(&gpu, stream, call.row_ptr, m + 1, "rowPtr") }?;
                staged_idx = unsafe { DeviceInput::new(&gpu, stream, call.col_ind, nnz, "colInd") }?;
                (staged_ptr.ptr(), staged_idx.ptr(), base.offset() as i32)
            }
        };
        let out = unsafe { DeviceOutput::new(&gpu, stream, call.out, nnz, "out", false) }?;
        let mut operands = DeviceOperands::<T> {
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
            check: 0,
        };
        if let Some(d) = resident {
            let chunks = operands_in_chunks(&operands);
            let row_strides = (operands.a_strides.0, operands.b_strides.0);
            let row_warps = d.row_warps::<T>(&gpu, (m, nnz, call.k), chunks, row_strides);
            match sampling.algorithm {
                SddmmAlgorithm::Tiled => {
                    // Where the panels or the band kernels pay, TILED takes them (as AUTO, which may
                    // have chosen TILED for them), not the tensor-core tiles it falls back on
                    // elsewhere.
                    let band = band_pays::<T>(&gpu, &d.band, (m, nnz, call.k), operands.a_strides, operands.b_strides);
                    let dims = (m, n, nnz, call.k);
                    let (math, products) = (sampling.math, TensorProducts::of(T::VALUE_TYPE, sampling.math));
                    // TILED forced in a TF32 mode: f32's tensor-core tiles wherever the plan has them
                    // (chosen by AUTO, they come after the panels, as the 16-bit types' do).
                    let tf32_forced = math != SddmmMathMode::Default && sampling.forced && chunks;
                    if let (true, Some(tt), Some(products)) = (tf32_forced, &d.tensor_tiles, products) {
                        tensor_tiles(&gpu, stream, &operands, tt, products)?
                    } else if let Some(shape) = d.panels::<T>(&gpu, dims, chunks, row_strides, row_warps.is_some()) {
                        panels(&gpu, stream, &operands, d.tensor_tiles.as_ref().expect("the panels' starts"), shape)?
                    } else {
                        match d.dense_tiles::<T>((nnz, call.k), chunks, !band, row_warps.is_some(), math) {
                            Some(DenseTiles::Tensor) => {
                                let tt = d.tensor_tiles.as_ref().expect("chosen");
                                tensor_tiles(&gpu, stream, &operands, tt, products.expect("chosen"))?
                            }
                            Some(DenseTiles::Block) => {
                                block_tiles(&gpu, stream, &operands, d.block_tiles.as_ref().expect("chosen"))?
                            }
                            None => {
                                if !band_staged(&gpu, stream, &operands, &d.band)? {
                                    tiled(&gpu, stream, &operands, d.band.order.ptr(), d.coo_rows.ptr())?;
                                }
                            }
                        }
                    }
                }
                SddmmAlgorithm::Coo | SddmmAlgorithm::Auto => {
                    coo(&gpu, stream, &operands, d.coo_rows.ptr(), row_warps)?
                }
            }
            return out.finish();
        }
        if nnz == 0 && !in_place {
            return out.finish();
        }
        crate::log::note(|| {
            let work = match sampling.algorithm {
                SddmmAlgorithm::Tiled => "preprocessing on the device (no plan prepared on it)",
                SddmmAlgorithm::Coo | SddmmAlgorithm::Auto => "reading the CSR pattern directly (no plan prepared)",
            };
            format!("{work}{}", if in_place { ", validating the pattern there" } else { "" })
        });
        let unplanned = self.unplanned(&gpu, stream)?;
        if in_place && out.is_staged() {
            // The call waits anyway: earlier patterns' verdicts first, so that what it reports after
            // its own work is its own.
            if let Some(invalid) = unplanned.invalid_pattern(true)? {
                return Err(invalid.error(true));
            }
        }
        let check = in_place.then(|| unplanned.device_check());
        operands.check = check.map_or(0, |c| c.check);
        let bytes = unplanned_bytes(&gpu, sampling.algorithm, (m, n, nnz));
        let memory = unplanned.workspace.take(&gpu, stream, bytes, "the COO rows or band order of a call")?;
        unplanned.unread |= in_place;
        let counters = unplanned.row_counters.ptr();
        let queued = run_unplanned(&gpu, stream, sampling.algorithm, &operands, memory, counters, check);
        // Released whatever was queued, so that the next user waits for it.
        let released = unplanned.workspace.release(stream);
        queued?;
        released?;
        // Out in host memory: the call's own verdict, before anything is copied back.
        if in_place
            && out.is_staged()
            && let Some(invalid) = unplanned.invalid_pattern(true)?
        {
            return Err(invalid.error(false));
        }
        out.finish()
    }
}

impl SddmmPatterns for CudaExecutor {
    /// Both arrays in device memory (of any device: the call then reports one of another device as
    /// DeviceInput does).
    fn validates_in_place(&self, row_ptr: *const i32, col_ind: Option<*const i32>) -> bool {
        let on_device = |ptr: *const i32| matches!(memory::locate(ptr.cast()), memory::Location::Device(_));
        on_device(row_ptr) && col_ind.is_none_or(on_device)
    }

    fn invalid_pattern(&mut self, wait: bool) -> Result<Option<InvalidPattern>> {
        match self.sddmm.as_mut() {
            Some(unplanned) => unplanned.invalid_pattern(wait),
            None => Ok(None),
        }
    }

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
        let coo_rows_memory = DeviceBuffer::alloc(&gpu, nnz * 4, stream, "the plan's COO row indices")?.resident();
        coo_rows(&gpu, stream, (m, n, nnz), row_ptr.ptr(), col_ind.ptr(), 0, coo_rows_memory.ptr(), None)?;
        let layout = OrderLayout::new(&gpu, m, n, nnz);
        let order = DeviceBuffer::alloc(&gpu, nnz * 4, stream, "the plan's band order")?.resident();
        let positions = if n <= BAND_MAX_COLS {
            Some(DeviceBuffer::alloc(&gpu, nnz * 4, stream, "the plan's band positions")?.resident())
        } else {
            None
        };
        let scratch = DeviceBuffer::alloc(&gpu, layout.scratch_bytes, stream, "the column histograms")?;
        let dev_pattern = (row_ptr.ptr(), col_ind.ptr(), 0);
        let packed = positions.as_ref().map(|p| p.ptr());
        band_order(&gpu, stream, &layout, (m, n, nnz), dev_pattern, order.ptr(), scratch.ptr(), packed)?;
        let slices = band_slices(pattern.ptr, m, gpu.multiprocessors);
        let list = DeviceBuffer::from_host(&gpu, slices.as_flattened(), stream, "the plan's band slices")?.resident();
        let longest_row = pattern.ptr.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0);
        let band = BandOrder { order, positions, slices: BandSlices { list, count: slices.len() }, longest_row };
        // The host arrays outlive the copies: they are dropped after the synchronisation.
        let arrays = tensor_tile_arrays(&plan.pattern())?;
        let tensor_tiles = match &arrays {
            Some(host) => Some(TensorTiles {
                starts: DeviceBuffer::from_host(&gpu, &host.starts, stream, "the column tiles' row starts")?.resident(),
                tiles: DeviceBuffer::from_host(&gpu, host.tiles.as_flattened(), stream, "the tensor-core tiles")?
                    .resident(),
                count: host.tiles.len(),
                column_tiles: host.column_tiles,
                busiest: host.busiest,
            }),
            None => None,
        };
        let records = block_tile_records(&plan.pattern());
        let block_tiles = match &records {
            Some(records) => Some(BlockTiles {
                records: DeviceBuffer::from_host(&gpu, records.as_flattened(), stream, "the block tiles")?.resident(),
                count: records.len(),
            }),
            None => None,
        };
        gpu.synchronize(stream)?;
        Ok(Some(Box::new(DevicePlan {
            ordinal: gpu.ordinal,
            row_ptr,
            col_ind,
            coo_rows: coo_rows_memory,
            band,
            tensor_tiles,
            block_tiles,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// The tensor-core tiles' cost model: ergo's overlap matrix (165 tiles, 355 741 entries) goes to
    /// COO at K = 32 and 64 and to the tiles at 128 and 256, as measured; thousands of tiles, where
    /// the least time does not bind, as the throughput model alone says (random 8192 × 8192 at
    /// density 5e-2: 4096 tiles, 3.36 M entries, the tiles from K = 32 on; at 1e-2, 0.67 M entries,
    /// not at K = 32).
    #[test]
    fn tensor_tiles_pay_their_least_time_where_few() {
        let half = TensorProducts::Half;
        let ergo: Vec<bool> = [32, 64, 128, 256].iter().map(|&k| tensor_tiles_pay(half, 165, 355_741.0, k)).collect();
        assert_eq!(ergo, [false, false, true, true]);
        for k in [32, 64, 128, 256] {
            let throughput_only =
                |tiles: f64, entries: f64| tiles * (8.5 + 0.119 * k as f64) < entries * (0.0075 + 0.00029 * k as f64);
            for (tiles, entries) in [(4096, 3_355_443.0), (4096, 671_089.0)] {
                assert_eq!(
                    tensor_tiles_pay(half, tiles, entries, k),
                    throughput_only(tiles as f64, entries),
                    "K = {k}"
                );
            }
        }
        assert!(tensor_tiles_pay(half, 4096, 3_355_443.0, 32) && !tensor_tiles_pay(half, 4096, 671_089.0, 32));
    }

    /// f32's tiles in the TF32 modes where they were measured (random 8192 × 8192, every tile
    /// holding entries, the row-warp kernel the alternative): TF32 the faster at density 1e-1 from
    /// k = 128 on (0.233 / 0.389 ms against 0.235 / 0.492), not below (0.127 / 0.158 against 0.077 /
    /// 0.127) nor at 5e-2 (0.372 against 0.273 at k = 256); 3xTF32 nowhere.
    #[test]
    fn tf32_tiles_pay_where_they_were_the_faster() {
        let row_warps = |nnz: f64| ROW_WARPS_COST * nnz;
        let at = |products, nnz: f64, k| tensor_tiles_pay(products, 4096, row_warps(nnz), k);
        let tf32: Vec<bool> = [32, 64, 128, 256].iter().map(|&k| at(TensorProducts::Tf32, 6_710_886.0, k)).collect();
        assert_eq!(tf32, [false, false, true, true]);
        assert!(!at(TensorProducts::Tf32, 3_355_443.0, 256));
        for k in [32, 64, 128, 256] {
            assert!(!at(TensorProducts::Tf32x3, 6_710_886.0, k), "K = {k}");
        }
    }

    /// The band kernels' slices: every band's positions covered once, in order, by non-empty slices
    /// of at most the slice size, listed part by part (a band's k-th slice after every band's
    /// (k-1)-th), none for a band without entries, bands of very different sizes and a last band
    /// of fewer rows among them.
    #[test]
    fn band_slices_cover_each_band_part_by_part() {
        let m = 7 * BAND_ROWS + 5;
        // Band 0 short rows, band 1 empty, band 2 one row of 50 000 entries, the others 40 a row.
        let row_len = |r: usize| match r / BAND_ROWS {
            0 => 3,
            1 => 0,
            2 if r == 2 * BAND_ROWS => 50_000,
            2 => 0,
            _ => 40,
        };
        let mut ptr = vec![0i32];
        for r in 0..m {
            ptr.push(ptr[r] + row_len(r));
        }
        let multiprocessors = 2;
        let slice = band_slice_size(ptr[m] as usize, m, multiprocessors);
        let slices = band_slices(&ptr, m, multiprocessors);
        let bands = m.div_ceil(BAND_ROWS);
        let mut next = vec![0usize; bands]; // each band's next position to be covered
        let mut part_of = vec![0usize; bands]; // each band's slices so far
        let mut last_part = 0;
        for &[band, first, last, zero] in &slices {
            let band = band as usize;
            let (first, last) = (first as usize, last as usize);
            assert_eq!(zero, 0);
            if next[band] == 0 {
                next[band] = ptr[band * BAND_ROWS] as usize;
            }
            assert_eq!(first, next[band], "band {band}: slices one after another");
            assert!(first < last && last - first <= slice, "band {band}: slice {first}..{last}");
            next[band] = last;
            assert!(part_of[band] >= last_part, "band {band}: listed part by part");
            last_part = part_of[band];
            part_of[band] += 1;
        }
        for band in 0..bands {
            let (first, last) = (ptr[band * BAND_ROWS] as usize, ptr[((band + 1) * BAND_ROWS).min(m)] as usize);
            let end = if first < last { last } else { 0 }; // a band without entries gets no slice
            assert_eq!(next[band], end, "band {band}: every position covered");
            assert_eq!(part_of[band], (last - first).div_ceil(slice), "band {band}: its parts");
        }
        assert!(part_of[2] > 1, "the long band is cut into several slices");
    }

    /// The row-warp kernels' shape: eight lanes a group (four where a row is at most four vectors)
    /// and the vectors a lane a kernel exists for, only where rows are long and even enough, many
    /// enough and in whole 16-byte chunks; without a plan the longest row is not asked.
    #[test]
    fn row_warps_take_long_even_rows_in_whole_chunks() {
        let sms = 132;
        let (m, nnz) = (8192, 8192 * 82);
        // Random S at density 1e-2: eight lanes a group, K / 8 vectors a lane (16-byte vectors).
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 32), Some(120), true, (32, 32)), Some((8, 1)));
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 256), Some(120), true, (256, 256)), Some((8, 8)));
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 200), Some(120), true, (200, 200)), Some((8, 8)));
        assert_eq!(row_warps_shape::<f64>(sms, (m, nnz, 128), Some(120), true, (128, 128)), Some((8, 8)));
        assert_eq!(row_warps_shape::<f64>(sms, (m, nnz, 256), Some(120), true, (256, 256)), None);
        assert_eq!(row_warps_shape::<f16>(sms, (m, nnz, 256), Some(120), true, (256, 256)), Some((8, 4)));
        assert_eq!(row_warps_shape::<f16>(sms, (m, nnz, 512), Some(120), true, (512, 512)), None);
        // Rows of at most four vectors: four lanes.
        assert_eq!(row_warps_shape::<f16>(sms, (m, nnz, 32), Some(120), true, (32, 32)), Some((4, 1)));
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 8), Some(120), true, (8, 8)), Some((4, 1)));
        // Short, uneven or too few rows, rows not in whole chunks, strides past 31 bits.
        assert_eq!(row_warps_shape::<f32>(sms, (m, m * 31, 32), Some(40), true, (32, 32)), None);
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 32), Some(165), true, (32, 32)), None);
        assert_eq!(row_warps_shape::<f32>(sms, (2111, 2111 * 82, 32), Some(120), true, (32, 32)), None);
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 32), Some(120), false, (32, 32)), None);
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 32), Some(120), true, (1 << 31, 32)), None);
        // B's rows less than 2^32 bytes apart (the kernels' 32-bit product of a column and them).
        assert_eq!(row_warps_shape::<f64>(sms, (m, nnz, 32), Some(120), true, (32, 1 << 29)), None);
        assert_eq!(row_warps_shape::<f64>(sms, (m, nnz, 32), Some(120), true, (32, (1 << 29) - 2)), Some((8, 2)));
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 32), Some(120), true, (32, (1 << 30) - 4)), Some((8, 1)));
        // Without a plan the longest row is not known: long rows are shared at run time.
        assert_eq!(row_warps_shape::<f32>(sms, (m, nnz, 32), None, true, (32, 32)), Some((8, 1)));
        assert_eq!(row_warps_shape::<f32>(sms, (m, m * 31, 32), None, true, (32, 32)), None);
    }

    /// Panels as wide as a block's shared memory holds (an H200: 132 multiprocessors, 227 KiB a
    /// block), the column tiles split evenly among them, one wave of blocks; none where the row of A
    /// does not fit the registers, K is 0 or a column tile does not fit.
    #[test]
    fn panels_fill_the_shared_memory_in_one_wave() {
        let h200 = (132, 232_448);
        let random = (8192, 8192, 64);
        let shape = panel_shape::<f32>(h200, random, 64, true, (64, 64)).expect("f32 at K = 64");
        let expected = PanelShape {
            group: 8,
            per_lane: 2,
            threads: 1024,
            panel_tiles: 7,
            panels: 10,
            row_groups: 13,
            group_rows: 631,
            shared_bytes: 896 * 256,
        };
        assert_eq!(shape, expected);
        let f16 = panel_shape::<f16>(h200, random, 64, true, (64, 64)).expect("f16 at K = 64");
        assert_eq!((f16.group, f16.per_lane, f16.panel_tiles, f16.panels, f16.row_groups), (8, 1, 13, 5, 26));
        let f64 = panel_shape::<f64>(h200, random, 64, true, (64, 64)).expect("f64 at K = 64");
        assert_eq!((f64.per_lane, f64.threads, f64.panel_tiles), (4, 512, 3));
        // Fewer columns than a panel holds: one panel, its shared memory the columns there are.
        let narrow = panel_shape::<f32>(h200, (100, 300, 64), 3, true, (64, 64)).expect("300 columns");
        assert_eq!((narrow.panels, narrow.row_groups, narrow.group_rows), (1, 100, 1));
        assert_eq!(narrow.shared_bytes, 300 * 256);
        assert_eq!(panel_shape::<f64>(h200, (8192, 8192, 256), 64, true, (256, 256)), None);
        assert_eq!(panel_shape::<f32>(h200, (8192, 8192, 32), 64, true, (32, 32)), None);
        assert_eq!(panel_shape::<f32>(h200, random, 64, false, (64, 64)), None);
        assert_eq!(panel_shape::<f32>((132, 100_000), random, 64, true, (64, 64)).map(|s| s.panel_tiles), Some(3));
        assert_eq!(panel_shape::<f32>((132, 60_000), (8192, 8192, 128), 64, true, (128, 128)), None);
    }

    /// AUTO's panels: random S of 8192 × 8192 on an H200 at density 5e-2 (tiles of 819 entries on
    /// average) where a row holds 18 entries a panel or more; never at 1e-2 (16.6 entries a panel at
    /// most, 16-bit at K = 64), nor where the row-warp kernel would not take the call or a tile
    /// holds more than twice the mean.
    #[test]
    fn panels_pay_on_wide_panels_of_even_patterns() {
        let h200 = (132, 232_448);
        let pays = |shape: Option<PanelShape>, nnz: usize, busiest: usize| {
            panels_pay(&shape.expect("a shape"), (8192, 8192, nnz), (64, busiest), true)
        };
        let (dense, sparse) = (3_355_443, 671_089);
        let at = |k: usize| (8192, 8192, k);
        for k in [64, 128] {
            assert!(pays(panel_shape::<f32>(h200, at(k), 64, true, (k, k)), dense, 900), "f32, K = {k}");
            assert!(pays(panel_shape::<f16>(h200, at(k), 64, true, (k, k)), dense, 900), "f16, K = {k}");
        }
        assert!(pays(panel_shape::<f64>(h200, at(64), 64, true, (64, 64)), dense, 900));
        assert!(!pays(panel_shape::<f64>(h200, at(128), 64, true, (128, 128)), dense, 900));
        assert!(!pays(panel_shape::<f32>(h200, at(256), 64, true, (256, 256)), dense, 900));
        assert!(!pays(panel_shape::<f32>(h200, at(64), 64, true, (64, 64)), sparse, 200));
        assert!(!pays(panel_shape::<f16>(h200, at(64), 64, true, (64, 64)), sparse, 200));
        // Uneven: a tile of more than twice the mean (819).
        assert!(!pays(panel_shape::<f32>(h200, at(64), 64, true, (64, 64)), dense, 1700));
        let shape = panel_shape::<f32>(h200, at(64), 64, true, (64, 64)).expect("f32 at K = 64");
        assert!(!panels_pay(&shape, (8192, 8192, dense), (64, 900), false));
    }

    /// Lanes per nonzero: one vector a lane on small problems (up to a warp); on large ones about
    /// four vectors a lane, at least four lanes where the row has four vectors (two in the CSR
    /// kernels), and at most eight lanes where rows hold 32 entries or more on average.
    #[test]
    fn lanes_per_nonzero_follow_the_width_and_the_rows_length() {
        let (m, short, long) = (100_000, 500_000, 5_000_000);
        // Small: nnz·k below 2^22.
        assert_eq!(lanes_per_nonzero(1000, 10, 256, 4, NNZ_MIN_GROUP), 32);
        assert_eq!(lanes_per_nonzero(1000, 10, 32, 4, NNZ_MIN_GROUP), 8);
        assert_eq!(lanes_per_nonzero(1000, 10, 7, 1, NNZ_MIN_GROUP), 8);
        // Large, short rows (5 a row): 4 vectors a lane, 4 lanes at least, up to a warp.
        assert_eq!(lanes_per_nonzero(short, m, 32, 4, NNZ_MIN_GROUP), 4);
        assert_eq!(lanes_per_nonzero(short, m, 64, 4, NNZ_MIN_GROUP), 4);
        assert_eq!(lanes_per_nonzero(short, m, 256, 4, NNZ_MIN_GROUP), 16);
        assert_eq!(lanes_per_nonzero(short, m, 256, 2, NNZ_MIN_GROUP), 32);
        assert_eq!(lanes_per_nonzero(short, m, 1024, 4, NNZ_MIN_GROUP), 32);
        assert_eq!(lanes_per_nonzero(short, m, 16, 4, NNZ_MIN_GROUP), 4);
        assert_eq!(lanes_per_nonzero(short, m, 8, 4, NNZ_MIN_GROUP), 2);
        // Large, long rows (50 a row): the same, but at most 8 lanes.
        assert_eq!(lanes_per_nonzero(long, m, 64, 4, NNZ_MIN_GROUP), 4);
        assert_eq!(lanes_per_nonzero(long, m, 128, 4, NNZ_MIN_GROUP), 8);
        assert_eq!(lanes_per_nonzero(long, m, 256, 4, NNZ_MIN_GROUP), 8);
        assert_eq!(lanes_per_nonzero(long, m, 256, 2, NNZ_MIN_GROUP), 8);
        assert_eq!(lanes_per_nonzero(long, m, 1024, 8, NNZ_MIN_GROUP), 8);
        // The CSR kernels: at least 2 lanes instead of 4 (K = 32 in f32 or 16-bit, 64 in 16-bit).
        assert_eq!(lanes_per_nonzero(short, m, 32, 4, CSR_MIN_GROUP), 2);
        assert_eq!(lanes_per_nonzero(short, m, 32, 8, CSR_MIN_GROUP), 2);
        assert_eq!(lanes_per_nonzero(short, m, 64, 8, CSR_MIN_GROUP), 2);
        assert_eq!(lanes_per_nonzero(short, m, 64, 4, CSR_MIN_GROUP), 4);
        assert_eq!(lanes_per_nonzero(short, m, 8, 4, CSR_MIN_GROUP), 2);
        assert_eq!(lanes_per_nonzero(1000, 10, 32, 4, CSR_MIN_GROUP), 8);
    }

    /// Rows in whole 16-byte chunks: row-major, K and both leading dimensions multiples of 8 f16 /
    /// bf16, 4 f32 or 2 f64 elements (what the tensor-core tiles of the 16-bit types need too).
    #[test]
    fn rows_in_chunks_needs_every_row_start_on_16_bytes() {
        use half::{bf16, f16};
        let row_major = |ld: usize| (ld, 1);
        assert!(rows_in_chunks::<f16>(64, row_major(72), row_major(64)));
        assert!(rows_in_chunks::<bf16>(8, row_major(8), row_major(16)));
        assert!(!rows_in_chunks::<f16>(60, row_major(64), row_major(64)), "K not a multiple of 8");
        assert!(!rows_in_chunks::<f16>(64, row_major(68), row_major(64)), "lda not a multiple of 8");
        assert!(!rows_in_chunks::<bf16>(64, row_major(64), row_major(12)), "ldb not a multiple of 8");
        assert!(rows_in_chunks::<f32>(36, row_major(40), row_major(36)));
        assert!(!rows_in_chunks::<f32>(34, row_major(36), row_major(36)), "K not a multiple of 4");
        assert!(rows_in_chunks::<f64>(2, row_major(2), row_major(4)));
        assert!(!rows_in_chunks::<f64>(3, row_major(4), row_major(4)), "K odd");
        assert!(!rows_in_chunks::<f32>(64, (1, 100), row_major(64)), "A column-major");
        assert!(!rows_in_chunks::<f64>(64, row_major(64), (1, 100)), "B column-major");
    }

    /// The block tiles' records: each row tile's tiles in column order, each of a row's entries in
    /// the one tile of its column, a row's entries in a tile the run its record gives; rows past
    /// the last (a row count that is not a multiple of a tile) and rows without entries in a tile
    /// empty; none where a row is unsorted or holds a repeat, or where the tiles would be sparse.
    #[test]
    fn block_tile_records_cover_every_entry_once() {
        let (m, n) = (3 * BLOCK_TILE + 5, 70);
        // Row i: a run about the diagonal of varying length, row 20 empty, row 40 every column.
        let columns = |i: usize| -> Vec<i32> {
            match i {
                20 => vec![],
                40 => (0..n as i32).collect(),
                _ => ((i.saturating_sub(i % 7))..(i + 9).min(n)).map(|j| j as i32).collect(),
            }
        };
        let (mut ptr, mut idx) = (vec![0i32], Vec::new());
        for i in 0..m {
            idx.extend(columns(i));
            ptr.push(idx.len() as i32);
        }
        let values = vec![(); idx.len()];
        let pattern =
            CompressedRef { outer_dim: m, inner_dim: n, ptr: &ptr, idx: &idx, values: &values, base: IndexBase::Zero };
        let records = block_tile_records(&pattern).expect("tiles full enough");
        let mut covered = vec![0usize; idx.len()];
        let mut previous = (-1, -1);
        for record in &records {
            let (row_tile, tile) = (record[0], record[1]);
            assert!((row_tile, tile) > previous, "records in order: {previous:?} then {:?}", (row_tile, tile));
            previous = (row_tile, tile);
            let mut entries = 0;
            for h in 0..BLOCK_TILE {
                let (first, end) = (record[4 + h] as usize, record[4 + BLOCK_TILE + h] as usize);
                let i = row_tile as usize * BLOCK_TILE + h;
                if i >= m {
                    assert_eq!(first, end, "row {i} past the last");
                    continue;
                }
                assert!(
                    ptr[i] as usize <= first && first <= end && end <= ptr[i + 1] as usize,
                    "row {i}: {first}..{end}"
                );
                for e in first..end {
                    assert_eq!(idx[e] as usize / BLOCK_TILE, tile as usize, "entry {e} of row {i} in tile {tile}");
                    covered[e] += 1;
                }
                entries += end - first;
            }
            assert!(entries > 0, "tile {row_tile}, {tile} holds entries");
        }
        assert!(covered.iter().all(|&c| c == 1), "every entry in one tile");

        let mut unsorted = idx.clone();
        unsorted.swap(ptr[3] as usize, ptr[3] as usize + 1);
        let pattern_unsorted = CompressedRef { idx: &unsorted, ..pattern };
        assert!(block_tile_records(&pattern_unsorted).is_none(), "a row out of order");
        let mut repeated = idx.clone();
        repeated[ptr[5] as usize + 1] = repeated[ptr[5] as usize];
        let pattern_repeated = CompressedRef { idx: &repeated, ..pattern };
        assert!(block_tile_records(&pattern_repeated).is_none(), "a repeated column");
        // One entry a row on the anti-diagonal: a row tile's 16 entries fall in two column tiles.
        let sparse_idx: Vec<i32> = (0..m).map(|i| (m - 1 - i) as i32).collect();
        let sparse_ptr: Vec<i32> = (0..=m as i32).collect();
        let sparse_values = vec![(); m];
        let sparse = CompressedRef {
            outer_dim: m,
            inner_dim: m,
            ptr: &sparse_ptr,
            idx: &sparse_idx,
            values: &sparse_values,
            base: IndexBase::Zero,
        };
        assert!(block_tile_records(&sparse).is_none(), "tiles of one entry each");
    }

    /// An `sd_report` as the kernels leave it for a 3×4 one-based pattern of 5 entries whose rowPtr
    /// reads `first`, `last`, with the faults given as (position, value) pairs, after `calls` invalid
    /// calls.
    fn report_words(
        (first, last): (i32, i32),
        decrease: Option<(usize, i32, i32)>,
        column: Option<(usize, i32)>,
        calls: u64,
    ) -> [u64; report::WORDS] {
        let mut words = [0u64; report::WORDS];
        words[report::INVALID_CALLS] = calls;
        words[report::ROWS] = 3;
        words[report::COLS] = 4;
        words[report::NNZ] = 5;
        words[report::BASE] = 1;
        // The kernels store ints in long long words: sign-extended.
        words[report::FIRST] = first as i64 as u64;
        words[report::LAST] = last as i64 as u64;
        if let Some((at, value, previous)) = decrease {
            words[report::DECREASE] = fault_word(at, value);
            words[report::DECREASE_PREVIOUS] = fault_word(at, previous);
        }
        if let Some((at, value)) = column {
            words[report::COLUMN] = fault_word(at, value);
        }
        words
    }

    fn message(words: &[u64; report::WORDS]) -> String {
        reported_pattern(words).unwrap().error(false).message
    }

    #[test]
    fn fault_words_keep_the_first_position_under_atomic_max() {
        // atomicMax over the words of several faults keeps the one a scan from the start meets first,
        // whatever the values (negative ones included).
        let faults = [(7usize, -3i32), (2, i32::MAX), (2_000_000_000, 0), (2, i32::MIN), (0, -1)];
        for &(p, v) in &faults {
            for &(q, w) in &faults {
                if p < q {
                    assert!(fault_word(p, v) > fault_word(q, w), "({p}, {v}) against ({q}, {w})");
                }
            }
            assert_ne!(fault_word(p, v), 0, "a fault is never the empty word");
            assert_eq!(position_and_value(fault_word(p, v)), (p, v));
        }
        assert_eq!(position_and_value(fault_word(i32::MAX as usize, i32::MIN)), (i32::MAX as usize, i32::MIN));
    }

    #[test]
    fn a_reported_pattern_names_its_fault_as_the_host_validation_does() {
        // The host's order: rowPtr[0], rowPtr[m], a decrease, a column; each as the host says it.
        let all_faults = report_words((0, 5), Some((2, 1, 4)), Some((3, 9)), 1);
        assert_eq!(message(&all_faults), "rowPtr[0] = 0 but the index base is 1");
        let last = report_words((1, -7), Some((2, 1, 4)), Some((3, 9)), 1);
        assert_eq!(message(&last), "rowPtr[3] - base = -8 does not match nnz = 5");
        let decrease = report_words((1, 6), Some((2, 1, 4)), Some((3, 9)), 1);
        assert_eq!(message(&decrease), "rowPtr decreases: rowPtr[2] = 1 < rowPtr[1] = 4");
        let column = report_words((1, 6), None, Some((3, -9)), 1);
        assert_eq!(message(&column), "colInd[3] = -9 is outside [1, 5) (cols = 4)");
        let later = report_words((1, 6), None, Some((3, 9)), 3);
        assert_eq!(
            message(&later),
            "colInd[3] = 9 is outside [1, 5) (cols = 4); 2 later calls' patterns were invalid too"
        );
        let earlier = reported_pattern(&column).unwrap().error(true);
        assert_eq!(earlier.status, crate::error::Status::InvalidSparseMatrix);
        assert!(earlier.message.contains("m = 3, n = 4, nnz = 5"), "{}", earlier.message);
        assert!(earlier.message.ends_with(": colInd[3] = -9 is outside [1, 5) (cols = 4)"), "{}", earlier.message);
        // Invalid without a fault cannot come from the kernels; it is an internal error, never a guess.
        assert!(reported_pattern(&report_words((1, 6), None, None, 1)).is_err());
    }
}

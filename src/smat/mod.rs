//! SMaT (Okanovic et al., "High Performance Unstructured SpMM Computation Using Tensor Cores"):
//! `C = α·A·B + β·C` with A sparse. The analysis, done once per matrix, permutes A's rows with
//! Sylos Labini's Jaccard clustering to pack nonzeros into fewer tiles, then stores A in BCSR whose
//! blocks are exactly the A-operand tile of the tensor-core `mma` instruction for the value type.
//! The compute phase multiplies every nonzero block with the matching panel of B.
//!
//! Tiles pay only where they are full enough: a tile costs about as much as a fixed number of
//! nonzeros multiplied one by one, whatever it holds. So the analysis decides per block row (the
//! `tile.rows` stored rows one warp of tiles covers) between tiles and plain CSR rows multiplied on
//! the CUDA cores ([`StorageFormat`]); an unstructured matrix ends up all CSR, a banded or
//! block-structured one all tiles, and a matrix of both kinds split between them (see
//! docs/methods.md).
//!
//! Everything here is backend-independent: a backend keeps the blocks where it multiplies and runs
//! SpMM on them ([`contract`]). The row permutation is internal and results are always in the
//! caller's row order.

pub mod bcsr;
pub mod contract;
pub mod reorder;
pub mod rows;

use crate::error::{Error, Float, Result};
use crate::handle::HandleCore;
use crate::log;
use crate::scalar::Element;
use crate::sparse::{CSR_NAMES, CompressedRef, CsrRef};
use crate::types::{Layout, ValueType};
use bcsr::Bcsr;
use contract::{PreparedBlocks, Product, RawCsr, SmatElement};
use rayon::prelude::*;
use reorder::{BlockRowShape, RowPatterns};
use rows::RowsCsr;
use std::any::Any;
use std::os::raw::c_int;

/// When `smatCreateCsr` applies the Jaccard row reordering (`smatReorderMode`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReorderMode {
    /// Keep the permutation only when it stores strictly fewer blocks than the original order. The
    /// paper observes that on band matrices (conf5_4-8x8) the clustering *increases* the block count.
    Auto = 0,
    /// Always apply the clustering's permutation, even when it stores more blocks.
    Always = 1,
    /// Never reorder: BCSR of the matrix as given.
    Never = 2,
}

/// How `smatCreateCsr` stores a matrix (`smatFormat`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StorageFormat {
    /// Per block row: tensor-core tiles where they are full enough to beat multiplying the nonzeros
    /// one by one on the CUDA cores, CSR rows elsewhere, within twice the bytes of the caller's CSR.
    Auto = 0,
    /// Every block row holding entries as tiles, as the paper does, whatever the padding costs.
    Tiles = 1,
    /// Every row as CSR on the CUDA cores; no tiles, and no reordering (it could not change anything).
    Csr = 2,
}

/// How f32 tiles are multiplied (`smatMathMode`), after cuBLAS's math modes: the mode of the handle
/// at `smatCreateCsr` decides which f32 block rows are worth tiles, the mode at `smatSpMM` how the
/// tiles are multiplied. f16 / bf16 (tensor cores, FP32 accumulation), f64 (DMMA, IEEE FP64) and
/// every CSR row (FMA in the compute type) ignore it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SmatMathMode {
    /// Exact FP32: f32 tiles are multiplied by FP32 fused multiply-adds (the default).
    #[default]
    Default = 0,
    /// 3xTF32 on tensor cores: each element x of a tile and of B is split as x ≈ big + small with
    /// big = TF32(x) rounded to nearest (ties away from zero) and small = x − big truncated to TF32,
    /// and a·b is computed as small_a·big_b + big_a·small_b + big_a·big_b with FP32 accumulation:
    /// FP32 accuracy to within a small factor; NaN and ±∞ in a tile's columns of B give NaN in its
    /// rows.
    Tf32x3 = 1,
}

crate::types::c_enum_conversions! {
    ReorderMode as "smatReorderMode_t" { Auto, Always, Never }
    StorageFormat as "smatFormat_t" { Auto, Tiles, Csr }
    SmatMathMode as "smatMathMode_t" { Default, Tf32x3 }
}

/// Default Jaccard distance threshold. A row joins a cluster when its distance to the cluster's
/// column-block union is below τ; at τ = 0.5 that means the row shares more column blocks with the
/// cluster than the merge adds, so a merge never costs more new blocks than it saves — the break-even
/// point of the padding trade-off. Smaller τ merges only near-identical rows (little gain), larger τ
/// pulls dissimilar rows together and adds padding. AUTO mode guards against a bad choice anyway.
pub const DEFAULT_JACCARD_THRESHOLD: f64 = 0.5;

/// What later `smatCreateCsr` calls on a handle do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnalysisSettings {
    pub reorder: ReorderMode,
    pub format: StorageFormat,
    /// Also how `smatSpMM` multiplies f32 tiles.
    pub math_mode: SmatMathMode,
    jaccard_threshold: f64,
}

impl Default for AnalysisSettings {
    fn default() -> Self {
        AnalysisSettings {
            reorder: ReorderMode::Auto,
            format: StorageFormat::Auto,
            math_mode: SmatMathMode::Default,
            jaccard_threshold: DEFAULT_JACCARD_THRESHOLD,
        }
    }
}

impl AnalysisSettings {
    pub fn jaccard_threshold(&self) -> f64 {
        self.jaccard_threshold
    }

    /// τ must lie in (0, 1]: the distance is in [0, 1] and merging needs distance < τ, so τ ≤ 0 would
    /// never merge (reordering in name only) and τ > 1 means nothing more than τ = 1.
    pub fn set_jaccard_threshold(&mut self, threshold: f64) -> Result<()> {
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(Error::invalid_value(format!("argument threshold = {} is outside (0, 1]", Float(threshold))));
        }
        self.jaccard_threshold = threshold;
        Ok(())
    }
}

/// An SMaT handle: backend and stream, plus the analysis settings.
#[derive(Debug)]
pub struct SmatHandle {
    pub core: HandleCore,
    pub settings: AnalysisSettings,
}

impl SmatHandle {
    pub fn new() -> Result<Self> {
        Ok(SmatHandle { core: HandleCore::new()?, settings: AnalysisSettings::default() })
    }

    /// Analyses a CSR matrix as the settings ask, on the host, and has the handle's backend prepare
    /// the blocks for its SpMM. The CSR arrays are read (by the backend, where they live) and copied
    /// as needed: the caller may free them afterwards.
    ///
    /// # Safety
    /// The arrays must be readable for their lengths, in memory the handle's backend takes (host
    /// memory; for CUDA also memory of the handle's first device).
    pub unsafe fn analyse_csr<T: SmatElement>(&mut self, csr: &RawCsr<T>) -> Result<SmatMatrix> {
        let call = log::Call::open();
        let placement = if call.is_open() { self.core.describe_placement() } else { String::new() };
        let backend = T::backend(self.core.executor_mut());
        let began = std::time::Instant::now();
        let host = unsafe { backend.csr_to_host(csr) }?;
        let read = began.elapsed();
        let view = CompressedRef::new(
            csr.rows,
            csr.cols,
            &host.row_ptr,
            &host.col_ind,
            &host.values,
            csr.base,
            false,
            CSR_NAMES,
        )?;
        let Analysis { info, storage } = analyse(&view, &self.settings)?;
        let analysed = began.elapsed();
        let blocks = backend.prepare(&info, storage)?;
        let prepared = began.elapsed();
        call.finish(|| {
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
            format!(
                "{}; {:.1} ms: reading the CSR {:.1}, analysis {:.1}, preparing the blocks {:.1}",
                describe_analysis(&info, &self.settings, &placement),
                ms(prepared),
                ms(read),
                ms(analysed - read),
                ms(prepared - analysed)
            )
        });
        Ok(SmatMatrix { info, blocks })
    }

    /// `C = α·A·B + β·C` on the handle's backend, which must be the one that analysed `a`
    /// (`SGPU_STATUS_INVALID_VALUE` otherwise).
    ///
    /// # Safety
    /// B and C must be readable (C also writable) for their lengths, in memory the handle's backend
    /// takes, and must not overlap.
    pub unsafe fn spmm<T: SmatElement>(&mut self, a: &SmatMatrix, product: &Product<T>) -> Result<()> {
        if a.info.value_type != T::VALUE_TYPE {
            return Err(Error::internal(format!("a {:?} matrix multiplied as {:?}", a.info.value_type, T::VALUE_TYPE)));
        }
        let call = log::Call::open();
        unsafe { T::backend(self.core.executor_mut()).spmm(a, product) }?;
        call.finish(|| {
            let info = &a.info;
            let math = match info.value_type {
                ValueType::F32 if info.blocks > 0 => format!(", f32 tiles in {}", math_mode_name(product.math_mode)),
                _ => String::new(),
            };
            format!(
                "smat spmm {} {}x{} times {}x{} ({}) on {}: {} rows in {} tiles of {}x{}, {} rows in CSR{math}",
                info.value_type.short_name(),
                info.rows,
                info.cols,
                info.cols,
                product.n,
                if product.layout == Layout::RowMajor { "row-major" } else { "column-major" },
                self.core.describe_placement(),
                info.rows_in_tiles,
                info.blocks,
                info.tile.rows,
                info.tile.cols,
                info.rows_in_csr,
            )
        });
        Ok(())
    }
}

fn math_mode_name(mode: SmatMathMode) -> &'static str {
    match mode {
        SmatMathMode::Default => "exact FP32",
        SmatMathMode::Tf32x3 => "3xTF32",
    }
}

/// What an analysis's log line says: what was asked, and what the analysis made of the matrix.
fn describe_analysis(info: &MatrixInfo, settings: &AnalysisSettings, placement: &str) -> String {
    let reordering = match (info.reordered, settings.format, settings.reorder) {
        (true, ..) => format!("rows reordered ({} tiles in the original order)", info.blocks_before_reordering),
        (false, StorageFormat::Csr, _) | (false, _, ReorderMode::Never) => "rows not reordered".to_string(),
        (false, ..) => {
            format!(
                "rows not reordered (it would not pay; {} tiles in the original order)",
                info.blocks_before_reordering
            )
        }
    };
    let tiles_from = match settings.format {
        StorageFormat::Auto => {
            format!(", tiles where fuller than {:.3}", tile_fill_worth(info.value_type, settings.math_mode))
        }
        _ => String::new(),
    };
    format!(
        "smat analysis {} {}x{}, nnz {} on {placement}: format {}{tiles_from}, reorder {}: {reordering}; {} rows in \
         {} tiles of {}x{} (fill {:.3}), {} rows in CSR ({} entries); {} bytes ({:.2}x the CSR's)",
        info.value_type.short_name(),
        info.rows,
        info.cols,
        info.nnz,
        format!("{:?}", settings.format).to_lowercase(),
        format!("{:?}", settings.reorder).to_lowercase(),
        info.rows_in_tiles,
        info.blocks,
        info.tile.rows,
        info.tile.cols,
        info.fill_ratio(),
        info.rows_in_csr,
        info.entries_in_csr,
        info.bytes(),
        info.bytes() as f64 / info.csr_bytes().max(1) as f64
    )
}

/// A BCSR block: the A operand of one tensor-core `mma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub rows: usize,
    pub cols: usize,
}

impl Tile {
    /// The tile of each value type is the A fragment of the mma shape its GPU kernel would issue:
    /// - f16 / bf16: 16×16, `mma.sync.m16n8k16` with f32 accumulation, as in the paper.
    /// - f32: 16×8, `mma.sync.m16n8k8.tf32`; the same 16×8 tile serves an FMA kernel that keeps full
    ///   f32 precision (one warp covers 16 rows × 8 columns with 4 elements per lane).
    /// - f64: 8×4, the DMMA `mma.sync.m8n8k4.f64` of sm_80+, the only f64 tensor-core shape.
    pub fn for_value_type(value_type: ValueType) -> Tile {
        match value_type {
            ValueType::F16 | ValueType::Bf16 => Tile { rows: 16, cols: 16 },
            ValueType::F32 => Tile { rows: 16, cols: 8 },
            ValueType::F64 => Tile { rows: 8, cols: 4 },
        }
    }

    pub fn area(&self) -> usize {
        self.rows * self.cols
    }
}

/// Facts about an analysed matrix (`smatMatrixInfo_t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatrixInfo {
    pub rows: usize,
    pub cols: usize,
    /// CSR entries as passed (duplicates counted).
    pub nnz: usize,
    pub tile: Tile,
    /// Tiles stored (in the tensor-core part).
    pub blocks: usize,
    /// Tiles the whole matrix has in its original row order.
    pub blocks_before_reordering: usize,
    /// Distinct (row, column) positions the tiles hold: what is not padding.
    pub tile_positions: usize,
    /// Rows of C the tiles produce.
    pub rows_in_tiles: usize,
    /// Rows of C the CSR part produces (rows without entries included), and its entries.
    pub rows_in_csr: usize,
    pub entries_in_csr: usize,
    pub reordered: bool,
    pub value_type: ValueType,
}

impl MatrixInfo {
    /// Distinct positions in tiles / (blocks · tile area): 1 means no padding; 0 when there are no blocks.
    pub fn fill_ratio(&self) -> f64 {
        if self.blocks == 0 { 0.0 } else { self.tile_positions as f64 / (self.blocks * self.tile.area()) as f64 }
    }

    /// Bytes of the analysed matrix as the CUDA backend stores it (element type values, 32-bit
    /// indices and pointers), not counting the schedule of its long rows (a few bytes per segment);
    /// [`StorageFormat::Auto`] keeps it within [`MEMORY_BUDGET`] CSR sizes.
    pub fn bytes(&self) -> usize {
        let csr_part = (self.rows_in_csr, self.entries_in_csr);
        analysed_bytes(self.value_type, self.tile, self.rows_in_tiles, self.blocks, csr_part)
    }

    /// Bytes of the caller's CSR (32-bit indices, element type values).
    pub fn csr_bytes(&self) -> usize {
        csr_bytes(self.value_type, self.rows, self.nnz)
    }
}

/// [`StorageFormat::Auto`] gives the block rows left to CSR beside tiles to the tiles as well when
/// they hold less than a quarter of the entries and fewer rows than this, and every one of them is
/// at least half as full as [`tile_fill_worth`]. Such a CSR part cannot fill the GPU (this is about
/// the groups of lanes an H100 runs at once), and its kernels (rows, and the segments of long rows)
/// add their latency to the tiles' instead of hiding it; a part only partly given to the tiles
/// would keep its kernels. Measured on H100 at n = 32 / 128 / 512 against the fastest cuSPARSE
/// CSR algorithm: ergo's overlap matrix in f32 (384 of 1625 rows as CSR, their block rows of fill
/// 0.16–0.25) 0.50× / 0.67× / 0.73× → 1.17× / 1.09× / 1.00×, in f64 (65 rows) 0.50× / 0.80× /
/// 1.15× → 0.92× / 1.38× / 1.51× (suite runs before and after); fem3x3 with permuted rows in f64,
/// where 1568 of 7312 such rows qualified, 1.30× / 1.85× / 2.01× → 0.99× / 1.68× / 1.87× when
/// those alone were given.
const SMALL_CSR_PART_ROWS: usize = 8192;

/// The most bytes [`StorageFormat::Auto`] spends on an analysed matrix, in sizes of its CSR: tiles
/// trade padding for speed, and a caller with a large matrix must still be able to afford them.
pub const MEMORY_BUDGET: usize = 2;

fn csr_bytes(value_type: ValueType, rows: usize, nnz: usize) -> usize {
    4 * (rows + 1) + nnz * (4 + value_type.size())
}

/// [`MatrixInfo::bytes`] of a matrix with `rows_in_tiles` rows in `blocks` tiles and the rest,
/// `(rows, entries)`, in CSR: what [`StorageFormat::Auto`]'s memory budget is checked against too.
/// Tiles: a pointer and `tile.rows` output rows per block row (a partial one counted whole),
/// `tile.cols` column indices and `area` values per tile; CSR part: a pointer and an output row per
/// row, a column index and a value per entry.
fn analysed_bytes(
    value_type: ValueType,
    tile: Tile,
    rows_in_tiles: usize,
    blocks: usize,
    (csr_rows, csr_entries): (usize, usize),
) -> usize {
    let s = value_type.size();
    (4 + 4 * tile.rows) * rows_in_tiles.div_ceil(tile.rows)
        + (4 * tile.cols + tile.area() * s) * blocks
        + 8 * csr_rows
        + (4 + s) * csr_entries
        + 8
}

/// The fill at which a tile of `value_type` starts to cost less than its nonzeros multiplied one by
/// one on the CUDA cores. A CSR row reads one row of B per nonzero; a tile reads `tile.cols` rows of
/// B for all its nonzeros and multiplies them on tensor cores, so in B traffic it breaks even at fill
/// 1 / `tile.rows`. Measured on an H100 at n = 128 against the same rows as CSR:
/// - f16 / bf16 (staged through shared memory) take twice that, for the cost of staging A's tiles
///   and the extra kernel beside the CSR rows' that a partly tiled matrix runs: tiles of fill 0.16
///   (a 27-point stencil) ran 1.1–1.2× faster than CSR at n = 128 and 512 (0.92× at n = 32), but
///   the dense rows of a power-law graph (fill 0.10) and a circuit matrix's (fill 0.09) as tiles
///   made the product 7–22 % slower at n = 32, 128 and 512 than all rows as CSR (the threshold
///   was 1/12 before).
/// - f32 in 3xTF32 (three mma per product) and f64 on DMMA, both unstaged, need 1/4: tiles of fill
///   0.09–0.18 ran 0.75–1.05× as fast as CSR, of fill 0.24–0.55 1.2–2.2× faster.
/// - f32 in exact FP32 is multiplied by FMA, padding included; with row-major B and C (the panel
///   kernel, a lane four columns of all 16 tile rows) it needs 1/4 as well: at n = 128, tiles of
///   fill 0.17–0.19 ran 0.9–1.1× as fast as CSR, of fill 0.34–0.37 1.6–1.7× faster (at n = 32
///   fill 0.37 ran 1.17× faster). Other layouts take a kernel of a column a lane that loads each
///   tile element once per FMA and trails CSR below fill 1/2.
pub fn tile_fill_worth(value_type: ValueType, math_mode: SmatMathMode) -> f64 {
    match (value_type, math_mode) {
        (ValueType::F16 | ValueType::Bf16, _) => 1.0 / 8.0,
        (ValueType::F32, _) | (ValueType::F64, _) => 0.25,
    }
}

/// [`StorageFormat::Auto`] with [`ReorderMode::Auto`] does not cluster rows whose original order
/// touches at most this many times the fewest column blocks any order could give.
pub const NEAR_FEWEST: f64 = 1.25;

/// The clustering's trial (see `analyse`) takes 1 / TRIAL_SHARE of the rows, but at least
/// TRIAL_BLOCK_ROWS block rows, within 1 / TRIAL_SHARE of the clustering's work budget, and goes on
/// only when they cost TRIAL_GAIN less per entry than the original order.
const TRIAL_SHARE: usize = 64;
const TRIAL_BLOCK_ROWS: usize = 64;
const TRIAL_GAIN: f64 = 0.1;

/// An analysis's result on the host, before a backend prepares it. Values are in the compute type
/// (f32 for f16 / bf16 / f32, f64 for f64): halves are widened once at analysis so duplicates in a
/// tile sum without rounding and the CPU kernels read them directly.
struct Analysis<S> {
    info: MatrixInfo,
    storage: Storage<S>,
}

/// An analysed matrix on the host: the block rows given to the tensor cores as tiles, the other rows
/// as CSR. Every row of C is produced by exactly one of them.
#[derive(Clone, Debug)]
pub struct Storage<S> {
    pub tiles: Bcsr<S>,
    pub rows: RowsCsr<S>,
}

/// Runs the analysis on a validated CSR matrix: reordering and the per-block-row choice between
/// tiles and CSR as `settings` ask, then both parts built. Copies everything it needs from `csr`.
fn analyse<T: Element>(csr: &CsrRef<'_, T>, settings: &AnalysisSettings) -> Result<Analysis<T::Compute>> {
    let tile = Tile::for_value_type(T::VALUE_TYPE);
    let (rows, worth) = (csr.outer_dim, tile_fill_worth(T::VALUE_TYPE, settings.math_mode));
    let patterns = RowPatterns::new(csr, tile.cols)?;
    let original = reorder::block_row_shapes(csr, None, tile)?;
    let blocks_before_reordering = original.iter().map(|s| s.tiles(tile.cols)).sum();

    // What an order costs: the tiles stored when everything is tiles, else every block row at the
    // cheaper of its tiles and its nonzeros (in nonzero units).
    let cost = |shapes: &[BlockRowShape]| -> f64 {
        match settings.format {
            StorageFormat::Tiles => shapes.iter().map(|s| s.tiles(tile.cols) as f64).sum(),
            _ => shapes.iter().map(|s| (s.entries as f64).min(worth * (s.tiles(tile.cols) * tile.area()) as f64)).sum(),
        }
    };
    let order = match (settings.format, settings.reorder) {
        (StorageFormat::Csr, _) | (_, ReorderMode::Never) => None,
        (format, mode) => {
            // Cheap tests first. The clustering groups rows by their column blocks, so they are in
            // column blocks too, against the fewest blocks any order could give: if even that
            // leaves blocks emptier than `worth`, rows share too few column blocks for the
            // clustering to fill any tile; if the original order is already within NEAR_FEWEST of
            // it, there is little for the clustering (the most expensive step of the analysis) to
            // gain.
            let skip = format == StorageFormat::Auto && mode == ReorderMode::Auto && {
                let fewest = reorder::fewest_blocks_of_any_order(&patterns, tile.rows)?;
                let blocks: usize = original.iter().map(|s| s.blocks).sum();
                (csr.nnz() as f64) < worth * (fewest * tile.area()) as f64
                    || blocks as f64 <= NEAR_FEWEST * fewest as f64
            };
            if skip {
                None
            } else {
                // AUTO closes a cluster at one block row (see jaccard_clusters); TILES clusters as the
                // paper does.
                let max_cluster = if format == StorageFormat::Auto { tile.rows } else { usize::MAX };
                let mut run = reorder::ClusterRun::new(&patterns, settings.jaccard_threshold, max_cluster)?;
                // AUTO tries first (see TRIAL_SHARE): the first clusters must cost TRIAL_GAIN less
                // per entry than the original order, or no more are formed. The trial's rows left
                // out of full clusters count at the original order's cost.
                let promising = format != StorageFormat::Auto || mode != ReorderMode::Auto || {
                    run.advance((rows / TRIAL_SHARE).max(TRIAL_BLOCK_ROWS * tile.rows), TRIAL_SHARE);
                    let trial = reorder::block_row_shapes(csr, Some(run.clustered()), tile)?;
                    let clustered: usize = trial.iter().map(|s| s.entries).sum();
                    let unclustered: usize = run.unclustered().iter().map(|&r| csr.range(r).len()).sum();
                    let original_per_entry = cost(&original) / csr.nnz().max(1) as f64;
                    let trial_cost = cost(&trial) + original_per_entry * unclustered as f64;
                    trial_cost < (1.0 - TRIAL_GAIN) * original_per_entry * (clustered + unclustered) as f64
                };
                if !promising {
                    None
                } else {
                    let order = run.finish();
                    let identity = order.iter().enumerate().all(|(i, &r)| i == r);
                    if identity {
                        None
                    } else {
                        let shapes = reorder::block_row_shapes(csr, Some(&order), tile)?;
                        (mode == ReorderMode::Always || cost(&shapes) < cost(&original)).then_some((order, shapes))
                    }
                }
            }
        }
    };
    let (order, shapes) = match order {
        Some((order, shapes)) => (Some(order), shapes),
        None => (None, original),
    };
    let in_tiles = choose_tiles(T::VALUE_TYPE, tile, settings, rows, csr.nnz(), &shapes);

    let tile_block_rows: Vec<usize> = (0..shapes.len()).filter(|&b| in_tiles[b]).collect();
    let tile_blocks: Vec<usize> = tile_block_rows.iter().map(|&b| shapes[b].tiles(tile.cols)).collect();
    let tiles = bcsr::build(csr, order.as_deref(), tile, &tile_block_rows, &tile_blocks)?;
    let mut csr_rows: Vec<u32> =
        (0..rows).filter(|&i| !in_tiles[i / tile.rows]).map(|i| order.as_ref().map_or(i, |o| o[i]) as u32).collect();
    csr_rows.par_sort_unstable();
    let row_part = rows::build(csr, csr_rows)?;
    let info = MatrixInfo {
        rows,
        cols: csr.inner_dim,
        nnz: csr.nnz(),
        tile,
        blocks: tiles.block_count(),
        blocks_before_reordering,
        tile_positions: tiles.positions,
        rows_in_tiles: rows - row_part.rows(),
        rows_in_csr: row_part.rows(),
        entries_in_csr: row_part.entries(),
        reordered: order.is_some(),
        value_type: T::VALUE_TYPE,
    };
    Ok(Analysis { info, storage: Storage { tiles, rows: row_part } })
}

/// Which block rows become tiles. [`StorageFormat::Auto`] takes those fuller than
/// [`tile_fill_worth`] (and a small CSR part beside them: [`SMALL_CSR_PART_ROWS`]), then, while the
/// storage would exceed [`MEMORY_BUDGET`] CSR sizes, hands the emptiest back to CSR. Block rows
/// without entries are always CSR (rows that only get β·C).
fn choose_tiles(
    value_type: ValueType,
    tile: Tile,
    settings: &AnalysisSettings,
    rows: usize,
    nnz: usize,
    shapes: &[BlockRowShape],
) -> Vec<bool> {
    let format = settings.format;
    let tiles_of = |s: &BlockRowShape| s.tiles(tile.cols);
    let fill = |s: &BlockRowShape| s.entries as f64 / (tiles_of(s) * tile.area()) as f64;
    let mut in_tiles: Vec<bool> = shapes
        .iter()
        .map(|s| {
            s.entries > 0
                && match format {
                    StorageFormat::Tiles => true,
                    StorageFormat::Csr => false,
                    StorageFormat::Auto => fill(s) > tile_fill_worth(value_type, settings.math_mode),
                }
        })
        .collect();
    if format == StorageFormat::Auto {
        // Rows of block row b: the last one may be partial.
        let rows_of = |b: usize| tile.rows.min(rows - b * tile.rows);
        // A small CSR part beside the tiles goes to the tiles, whole or not at all.
        let csr_part: Vec<usize> = (0..shapes.len()).filter(|&b| !in_tiles[b] && shapes[b].entries > 0).collect();
        let csr_part_rows: usize = csr_part.iter().map(|&b| rows_of(b)).sum();
        let csr_part_entries: usize = csr_part.iter().map(|&b| shapes[b].entries).sum();
        let half_worth = tile_fill_worth(value_type, settings.math_mode) / 2.0;
        // Counted over the block row's own rows: the last block row may be partial.
        let own_fill = |b: usize| shapes[b].entries as f64 / (tiles_of(&shapes[b]) * rows_of(b) * tile.cols) as f64;
        if in_tiles.contains(&true)
            && csr_part_rows < SMALL_CSR_PART_ROWS
            && 4 * csr_part_entries < nnz
            && csr_part.iter().all(|&b| own_fill(b) > half_worth)
        {
            for b in csr_part {
                in_tiles[b] = true;
            }
        }
        let budget = MEMORY_BUDGET * csr_bytes(value_type, rows, nnz);
        let (mut rows_in_tiles, mut blocks, mut entries_in_tiles) = (0, 0, 0);
        for (b, s) in shapes.iter().enumerate().filter(|(b, _)| in_tiles[*b]) {
            (rows_in_tiles, blocks, entries_in_tiles) =
                (rows_in_tiles + rows_of(b), blocks + tiles_of(s), entries_in_tiles + s.entries);
        }
        let bytes = |rows_in_tiles: usize, blocks: usize, entries_in_tiles: usize| {
            let csr_part = (rows - rows_in_tiles, nnz - entries_in_tiles);
            analysed_bytes(value_type, tile, rows_in_tiles, blocks, csr_part)
        };
        if bytes(rows_in_tiles, blocks, entries_in_tiles) > budget {
            let mut by_fill: Vec<usize> = (0..shapes.len()).filter(|&b| in_tiles[b]).collect();
            by_fill.sort_by(|&x, &y| fill(&shapes[x]).total_cmp(&fill(&shapes[y])));
            for b in by_fill {
                if bytes(rows_in_tiles, blocks, entries_in_tiles) <= budget {
                    break;
                }
                in_tiles[b] = false;
                (rows_in_tiles, blocks, entries_in_tiles) =
                    (rows_in_tiles - rows_of(b), blocks - tiles_of(&shapes[b]), entries_in_tiles - shapes[b].entries);
            }
        }
    }
    in_tiles
}

/// An analysed sparse matrix: its tiles and CSR rows, ready for SpMM.
#[derive(Debug)]
pub struct SmatMatrix {
    info: MatrixInfo,
    /// The storage as the backend that analysed the matrix prepared it, where it multiplies (a
    /// CUDA-built matrix keeps no host copy, which may be large): only handles of that backend
    /// multiply with the matrix.
    blocks: Box<dyn PreparedBlocks>,
}

impl SmatMatrix {
    pub fn info(&self) -> &MatrixInfo {
        &self.info
    }

    /// The prepared storage, when it is of type `B` (the type of the backend asking: its own).
    pub fn blocks<B: PreparedBlocks>(&self) -> Option<&B> {
        (self.blocks.as_ref() as &dyn Any).downcast_ref()
    }

    /// The backend that prepared the blocks, as messages name it.
    pub fn prepared_by(&self) -> &'static str {
        self.blocks.backend_name()
    }
}

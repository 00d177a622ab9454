//! SDDMM after GPU-Dynamic (Costa et al., "Efficient SDDMM algorithms on GPU, a dynamic approach"):
//! `out[e] = α·S[e]·⟨A[i,:], B[j,:]⟩` for every nonzero `e = (i, j)` of a CSR matrix S, with A m×k
//! and B n×k.
//!
//! Two algorithms, chosen per call from the density of S:
//! - TILED (the paper's GPU-Shared): S is cut into `TILE_ROWS × TILE_COLS` tiles whose nonzeros are
//!   computed together, so that the A and B rows they use are loaded once per tile (the CPU backend
//!   in K slices of `TILE_K`; the CUDA backend, through a plan, with a band of 64 rows of A in
//!   shared memory and the band's nonzeros column by column, or for f16 / bf16 (and f32 in a TF32
//!   math mode) whose rows are sorted 128 × 128 tiles computed densely on tensor cores, or for any
//!   type whose rows are sorted
//!   16 × 16 tiles computed densely on CUDA cores; without a plan it runs the COO kernel
//!   in that band order, the rows reused from L1). Pays off when tiles hold enough nonzeros to
//!   amortise the loads.
//! - COO (GPU-Convert): CSR is converted to COO and the nonzeros are split into equal chunks, one
//!   independent dot product each: perfect balance, no reuse. Best for very sparse S. (The CUDA
//!   backend without a plan skips the conversion: its kernel finds each chunk's rows from the row
//!   pointers, GPU-Dynamic in one launch.)
//!
//! AUTO takes TILED when `nnz / (m·n)` exceeds the handle's threshold, or where the backend says its
//! tiled kernel is the faster for the call ([`contract::SddmmBackend::prefers_tiled`]: through a
//! CUDA plan, the tensor-core tiles or the 16 × 16 tiles where they are full enough, the band
//! kernels where rows are short and even), COO otherwise. The default threshold is
//! 1: on random patterns of densities 1e-5 to 5e-2 (and 0.5 on the CPU), k = 32 to 256, COO was the
//! faster of the paper's two kernels on both backends (docs/methods.md), unlike in the paper, whose
//! switch point was 0.01 %. A [`SddmmPlan`] is the paper's GPU-Preprocessing: the work both
//! algorithms derive from the sparsity pattern alone, done once for many calls.
//!
//! The family chooses the algorithm and plans; the handle's executor runs the chosen algorithm
//! through the family's contract ([`contract`]), so this module names no backend.

use crate::alloc::{try_push, try_vec, try_with_capacity};
use crate::dense::MatRef;
use crate::error::{Error, Float, Result};
use crate::handle::HandleCore;
use crate::log;
use crate::scalar::Element;
use crate::sparse::CompressedRef;
use crate::types::{IndexBase, ValueType};
use rayon::prelude::*;
use std::borrow::Cow;
use std::os::raw::c_int;

pub mod contract;
use contract::{InvalidPattern, PreparedPlan, Sampling, SddmmPatterns};
pub use contract::{PatternShape, RawFactor, RawOperands, SddmmElement, Structure};

/// Rows of S per tile (the paper's Ti). One band of this many rows is one parallel task.
pub const TILE_ROWS: usize = 64;
/// Columns of S per tile (Tj): bounds the B panel of a tile.
pub const TILE_COLS: usize = 64;
/// Length of a K slice (Tk): 64 × 64 panels of f64 are 32 KiB, so a tile's A and B panels stay in
/// L1/L2 while all of its nonzeros use them.
pub const TILE_K: usize = 64;

/// Density above which AUTO takes TILED by default: none (see the module's documentation).
pub const DEFAULT_DENSITY_THRESHOLD: f64 = 1.0;

/// SDDMM algorithm (`sddmmAlgorithm`), passed as `int`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SddmmAlgorithm {
    /// Choose per call from the density of S (GPU-Dynamic).
    Auto = 0,
    /// Tiles of S and slices of K with panel reuse (GPU-Shared).
    Tiled = 1,
    /// nnz-balanced COO, one dot product per nonzero (GPU-Convert).
    Coo = 2,
}

crate::types::c_enum_conversions! {
    SddmmAlgorithm as "sddmmAlgorithm_t" { Auto, Tiled, Coo }
}

/// How f32 SDDMM multiplies (`sddmmMathMode`), after cuBLAS's math modes. Only f32 calls are
/// affected: f16 / bf16 (FP32 arithmetic) and f64 ignore it. As in cuBLAS, the TF32 modes allow the
/// rounded arithmetic, they do not require it: the CUDA backend uses it in its tensor-core tiles (a
/// plan whose rows are sorted by column, A and B row-major in whole 16-byte chunks) where they are
/// the faster kernel, or wherever the plan has them when TILED is forced, and its other kernels stay
/// exact FP32; the CPU backend, the mode's executable specification, computes every product as the
/// mode defines it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SddmmMathMode {
    /// Exact FP32: every product an FP32 fused multiply-add (the default).
    #[default]
    Default = 0,
    /// 3xTF32: each element x of A and B is split as x ≈ big + small with big = TF32(x) rounded to
    /// nearest (ties away from zero) and small = x − big truncated to TF32 (10 explicit mantissa
    /// bits), and a·b is computed as small_a·big_b + big_a·small_b + big_a·big_b, each product exact,
    /// summed in FP32: FP32 accuracy to within a small factor. NaN and ±∞ in a row of A or B give NaN
    /// in its entries.
    Tf32x3 = 1,
    /// TF32: each element of A and B rounded to TF32 (to nearest, ties away from zero), the products
    /// (exact) summed in FP32: about 3 decimal digits, 2⁻¹¹ relative per element, as cuBLAS's
    /// CUBLAS_TF32_TENSOR_OP_MATH; an element within 2⁻¹² of FP32's largest rounds to ±∞.
    Tf32 = 2,
}

crate::types::c_enum_conversions! {
    SddmmMathMode as "sddmmMathMode_t" { Default, Tf32x3, Tf32 }
}

/// The C `sddmmContext`: shared handle state plus the algorithm policy.
#[derive(Debug)]
pub struct SddmmHandle {
    pub core: HandleCore,
    algorithm: SddmmAlgorithm,
    density_threshold: f64,
    math_mode: SddmmMathMode,
    last_algorithm: Option<SddmmAlgorithm>,
    /// An invalid pattern found by a validation in place after its call returned, brought home from
    /// an executor that was replaced ([`SddmmHandle::settle`]), for the next call to report.
    unreported: Option<InvalidPattern>,
}

impl SddmmHandle {
    pub fn new() -> Result<Self> {
        Ok(SddmmHandle {
            core: HandleCore::new()?,
            algorithm: SddmmAlgorithm::Auto,
            density_threshold: DEFAULT_DENSITY_THRESHOLD,
            math_mode: SddmmMathMode::Default,
            last_algorithm: None,
            unreported: None,
        })
    }

    pub fn algorithm(&self) -> SddmmAlgorithm {
        self.algorithm
    }

    pub fn set_algorithm(&mut self, algorithm: SddmmAlgorithm) {
        self.algorithm = algorithm;
    }

    pub fn density_threshold(&self) -> f64 {
        self.density_threshold
    }

    /// Any value ≥ 0 is accepted; +∞ means "never tiled".
    pub fn set_density_threshold(&mut self, threshold: f64) -> Result<()> {
        if threshold.is_nan() || threshold < 0.0 {
            return Err(Error::invalid_value(format!(
                "argument threshold = {} must be a number >= 0",
                Float(threshold)
            )));
        }
        self.density_threshold = threshold;
        Ok(())
    }

    pub fn math_mode(&self) -> SddmmMathMode {
        self.math_mode
    }

    pub fn set_math_mode(&mut self, mode: SddmmMathMode) {
        self.math_mode = mode;
    }

    /// TILED or COO of the last successful compute call; `None` before any.
    pub fn last_algorithm(&self) -> Option<SddmmAlgorithm> {
        self.last_algorithm
    }

    /// The algorithm a call on an m×n pattern with `nnz` entries runs (never `Auto`), given whether
    /// the backend's tiled algorithm is the faster for it ([`contract::SddmmBackend::prefers_tiled`]).
    pub fn choose(&self, rows: usize, cols: usize, nnz: usize, backend_prefers_tiled: bool) -> SddmmAlgorithm {
        match self.algorithm {
            SddmmAlgorithm::Auto => {
                if backend_prefers_tiled || density(rows, cols, nnz) > self.density_threshold {
                    SddmmAlgorithm::Tiled
                } else {
                    SddmmAlgorithm::Coo
                }
            }
            forced => forced,
        }
    }

    /// Computes `out[e] = α·S[e]·⟨A[i,:], B[j,:]⟩` on the handle's backend, for every entry of S,
    /// whose structure `operands.row_ptr` / `col_ind` hold: validated on the host (`structure`
    /// [`Structure::Validated`]), or to be validated where it lies by the backend
    /// ([`Structure::InPlace`], when [`SddmmHandle::validates_in_place`] said so). With a plan, its
    /// preprocessing is reused; without, the chosen algorithm derives what it needs from the pattern.
    /// `out` is overwritten (never read). On the CUDA backend the arrays may be host or device memory,
    /// and the call returns without waiting unless `out` is host memory.
    ///
    /// First of all, an invalid pattern that an earlier call passed in device memory, found after that
    /// call returned and not reported yet, is this call's error (and nothing else is done).
    ///
    /// # Safety
    /// The operands must be readable (`out` writable) for their lengths in memory the handle's
    /// backend accepts, `out` overlapping no input.
    pub unsafe fn compute<T: SddmmElement>(
        &mut self,
        operands: &RawOperands<T>,
        structure: Structure<'_>,
        plan: Option<&SddmmPlan>,
    ) -> Result<()> {
        self.report_invalid_pattern(false)?;
        let call = log::Call::open();
        let shape = structure.shape();
        let math = if T::VALUE_TYPE == ValueType::F32 { self.math_mode } else { SddmmMathMode::Default };
        let prefers_tiled = self.algorithm == SddmmAlgorithm::Auto
            && T::backend(self.core.executor_mut()).prefers_tiled(operands, shape, plan, math);
        let algorithm = self.choose(shape.rows, shape.cols, shape.nnz, prefers_tiled);
        let forced = self.algorithm != SddmmAlgorithm::Auto;
        let sampling = Sampling { operands, structure, plan, algorithm, forced, math };
        unsafe { T::backend(self.core.executor_mut()).sample(&sampling) }?;
        self.last_algorithm = Some(algorithm);
        call.finish(|| {
            let PatternShape { rows: m, cols: n, nnz, .. } = shape;
            format!(
                "sddmm {}{} {m}x{n}, k {}, nnz {nnz} on {}: {} ({}){}",
                T::VALUE_TYPE.short_name(),
                match math {
                    SddmmMathMode::Default => "",
                    SddmmMathMode::Tf32x3 => " in 3xTF32",
                    SddmmMathMode::Tf32 => " in TF32",
                },
                operands.k,
                self.core.describe_placement(),
                match algorithm {
                    SddmmAlgorithm::Tiled => "tiled",
                    _ => "nnz-balanced COO",
                },
                self.why(m, n, nnz, prefers_tiled),
                if plan.is_some() { ", the plan's preprocessing reused" } else { "" }
            )
        });
        Ok(())
    }

    /// Whether the handle's backend validates S's structure at `row_ptr` / `col_ind` (`None` when
    /// nnz is 0) where it lies, so that a call passes it as [`Structure::InPlace`] instead of
    /// reading it to the host ([`SddmmPatterns::validates_in_place`]: the CUDA backend, for arrays
    /// in device memory).
    pub fn validates_in_place(&self, row_ptr: *const i32, col_ind: Option<*const i32>) -> bool {
        let patterns: &dyn SddmmPatterns = self.core.executor();
        patterns.validates_in_place(row_ptr, col_ind)
    }

    /// Waits for the validations of patterns that earlier calls passed in device memory and reports
    /// the first one found invalid that no call has reported yet (the C sddmmSynchronize).
    pub fn synchronize(&mut self) -> Result<()> {
        self.report_invalid_pattern(true)
    }

    /// The first invalid pattern not reported yet, as an error naming its fault: kept from a replaced
    /// executor, or found by this one (with `wait`, after waiting for every validation queued).
    fn report_invalid_pattern(&mut self, wait: bool) -> Result<()> {
        if let Some(invalid) = self.unreported.take() {
            return Err(invalid.error(true));
        }
        let patterns: &mut dyn SddmmPatterns = self.core.executor_mut();
        match patterns.invalid_pattern(wait)? {
            Some(invalid) => Err(invalid.error(true)),
            None => Ok(()),
        }
    }

    /// Brings the verdicts of validations in place home before the executor is replaced (another
    /// backend), waiting for them: an invalid pattern is then reported by the handle's next call. A
    /// device that can no longer give them (a broken context) is passed over, since the handle
    /// leaves it.
    pub fn settle(&mut self) {
        let patterns: &mut dyn SddmmPatterns = self.core.executor_mut();
        if let Ok(Some(found)) = patterns.invalid_pattern(true) {
            self.unreported = Some(match self.unreported.take() {
                Some(kept) => InvalidPattern { later_invalid: kept.later_invalid + 1 + found.later_invalid, ..kept },
                None => found,
            });
        }
    }

    /// Why [`SddmmHandle::choose`] chose what it did, as log lines say it.
    fn why(&self, rows: usize, cols: usize, nnz: usize, backend_prefers_tiled: bool) -> String {
        let density = density(rows, cols, nnz);
        let threshold = self.density_threshold;
        match self.algorithm {
            SddmmAlgorithm::Auto if backend_prefers_tiled => {
                format!("density {density:.3e}, where the backend's tiled kernel is the faster")
            }
            SddmmAlgorithm::Auto if density > threshold => format!("density {density:.3e} above {threshold:e}"),
            SddmmAlgorithm::Auto => format!("density {density:.3e} at most {threshold:e}"),
            _ => format!("asked for; density {density:.3e}"),
        }
    }

    /// Validated-pattern preprocessing for many compute calls ([`SddmmPlan::new`]), also prepared on
    /// the handle's backend (the CUDA backend: uploaded and preprocessed on the handle's device,
    /// waiting for the stream, so the plan may be used on any stream of the device afterwards).
    pub fn create_plan(&mut self, pattern: &CompressedRef<'_, ()>) -> Result<SddmmPlan> {
        let call = log::Call::open();
        let mut plan = SddmmPlan::new(pattern)?;
        plan.prepared = self.core.executor_mut().prepare_plan(&plan)?;
        call.finish(|| {
            let bands = &plan.tile_schedule().bands;
            let tiles: usize = bands.iter().map(|band| band.tiles.len()).sum();
            format!(
                "sddmm plan {}x{}, nnz {} on {}: COO rows, and tiles of {TILE_ROWS}x{TILE_COLS} (bands {}, tiles {tiles})",
                plan.rows,
                plan.cols,
                plan.nnz(),
                self.core.describe_placement(),
                bands.len(),
            )
        });
        Ok(plan)
    }

    /// The caller's `len` int indices at `ptr` (not NULL, aligned, `len` > 0) in host memory, for
    /// validation: borrowed when they are host memory, copied from the device (waiting for the
    /// handle's stream) when a CUDA handle was given device memory.
    ///
    /// # Safety
    /// `ptr` must be readable for `len` ints, in memory the handle's backend accepts, for `'a`.
    pub unsafe fn caller_indices<'a>(&self, ptr: *const i32, len: usize, name: &str) -> Result<Cow<'a, [i32]>> {
        let patterns: &dyn SddmmPatterns = self.core.executor();
        unsafe { patterns.host_indices(ptr, len, name) }
    }
}

/// `nnz / (m·n)`; an empty matrix has density 0.
pub fn density(rows: usize, cols: usize, nnz: usize) -> f64 {
    let cells = rows as f64 * cols as f64;
    if cells == 0.0 { 0.0 } else { nnz as f64 / cells }
}

/// The validated inputs of one SDDMM as host views ([`RawOperands::host`]): the pattern of S (values
/// are separate so a plan can hold the pattern alone), A and B as m×k and n×k views, S's values
/// (`None`: every S[e] is 1), and α.
#[derive(Clone, Copy, Debug)]
pub struct SddmmOperands<'a, T: Element> {
    pub pattern: CompressedRef<'a, ()>,
    pub a: MatRef<'a, T>,
    pub b: MatRef<'a, T>,
    pub s_values: Option<&'a [T]>,
    pub alpha: T::Compute,
}

/// The sparsity pattern of S preprocessed once (GPU-Preprocessing) for any number of compute calls:
/// an owned zero-based copy of the pattern, its COO row indices (for the COO algorithm) and its tile
/// schedule (for the tiled one).
#[derive(Debug)]
pub struct SddmmPlan {
    rows: usize,
    cols: usize,
    row_ptr: Vec<i32>,
    col_ind: Vec<i32>,
    /// Zero-sized stand-ins for values: they give the pattern view its length without storage.
    entries: Vec<()>,
    coo_rows: Vec<u32>,
    tiles: TileSchedule,
    /// What the backend of the handle that created the plan keeps of it (the CUDA backend: a copy
    /// on its device), of the backend's own type.
    prepared: Option<Box<dyn PreparedPlan>>,
}

impl SddmmPlan {
    /// Copies a validated pattern to zero base and preprocesses it.
    pub fn new(pattern: &CompressedRef<'_, ()>) -> Result<Self> {
        let offset = pattern.base.offset() as i32;
        let mut row_ptr = try_vec(pattern.ptr.len(), 0i32, "the plan's row pointers")?;
        row_ptr.iter_mut().zip(pattern.ptr).for_each(|(dst, &src)| *dst = src - offset);
        let mut col_ind = try_vec(pattern.nnz(), 0i32, "the plan's column indices")?;
        col_ind.par_iter_mut().zip(pattern.idx.par_iter()).for_each(|(dst, &src)| *dst = src - offset);
        let mut plan = SddmmPlan {
            rows: pattern.outer_dim,
            cols: pattern.inner_dim,
            row_ptr,
            col_ind,
            entries: vec![(); pattern.nnz()],
            coo_rows: Vec::new(),
            tiles: TileSchedule::default(),
            prepared: None,
        };
        let (coo_rows, tiles) = {
            let zero_based = plan.pattern();
            (coo_row_indices(&zero_based)?, TileSchedule::build(&zero_based)?)
        };
        plan.coo_rows = coo_rows;
        plan.tiles = tiles;
        Ok(plan)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn nnz(&self) -> usize {
        self.col_ind.len()
    }

    /// The planned pattern as a zero-based view.
    pub fn pattern(&self) -> CompressedRef<'_, ()> {
        CompressedRef {
            outer_dim: self.rows,
            inner_dim: self.cols,
            ptr: &self.row_ptr,
            idx: &self.col_ind,
            values: &self.entries,
            base: IndexBase::Zero,
        }
    }

    pub fn tile_schedule(&self) -> &TileSchedule {
        &self.tiles
    }

    pub fn coo_rows(&self) -> &[u32] {
        &self.coo_rows
    }

    /// What a backend prepared of the plan when it was created, if anything.
    pub fn prepared(&self) -> Option<&dyn PreparedPlan> {
        self.prepared.as_deref()
    }
}

/// CSR → COO: the zero-based row of every entry (the paper's GPU-Convert step), filled in parallel
/// chunks of entries. A chunk finds the row of its first entry by binary search over the row
/// pointers and walks on from there, so the work is O(nnz) and the only memory the result.
pub fn coo_row_indices(pattern: &CompressedRef<'_, ()>) -> Result<Vec<u32>> {
    const CHUNK: usize = 4096;
    let mut rows = try_vec(pattern.nnz(), 0u32, "COO row indices")?;
    let base = pattern.base.offset();
    rows.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, out)| {
        let first = chunk * CHUNK;
        // The last row starting at or before `first`: empty rows share their start with the next
        // row, and `first` < nnz lies inside a row.
        let mut r = pattern.ptr.partition_point(|&p| (p as i64 - base) as usize <= first) - 1;
        for (e, slot) in (first..).zip(out) {
            while pattern.range(r).end <= e {
                r += 1;
            }
            *slot = r as u32;
        }
    });
    Ok(rows)
}

/// One tile of S: its nonzeros and the distinct columns of B they touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// Which `TILE_COLS`-wide block of columns the tile covers.
    pub col_block: u32,
    /// The tile's entries: a range of the band's `entries` / `entry_rows` / `entry_slots`.
    pub entries: (u32, u32),
    /// The tile's distinct columns: a range of the band's `columns`.
    pub columns: (u32, u32),
}

/// The tiles of one band of `TILE_ROWS` rows. The band's entries are a contiguous range of S's
/// entries (CSR order), so bands write disjoint parts of the output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BandSchedule {
    /// First row of the band.
    pub first_row: usize,
    /// Rows in the band (`TILE_ROWS`, fewer in the last band).
    pub row_count: usize,
    /// The band's entries in S: `first_entry .. first_entry + entries.len()`.
    pub first_entry: usize,
    pub tiles: Vec<Tile>,
    /// Entry positions relative to `first_entry`, grouped by tile.
    pub entries: Vec<u32>,
    /// Row of each grouped entry, relative to `first_row`.
    pub entry_rows: Vec<u16>,
    /// Column of each grouped entry as a slot in its tile's column list (the paper's
    /// preprocessing re-indexes columns so only columns with nonzeros of B are loaded).
    pub entry_slots: Vec<u16>,
    /// The distinct zero-based columns of each tile, tile after tile.
    pub columns: Vec<u32>,
}

/// Nonzeros of S grouped by `TILE_ROWS × TILE_COLS` tile, band by band.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TileSchedule {
    pub bands: Vec<BandSchedule>,
}

impl TileSchedule {
    /// Groups a validated pattern's nonzeros by tile; bands are built in parallel.
    pub fn build(pattern: &CompressedRef<'_, ()>) -> Result<Self> {
        let band_count = pattern.outer_dim.div_ceil(TILE_ROWS);
        let mut bands = try_vec(band_count, BandSchedule::default(), "the schedule of the row bands")?;
        bands.par_iter_mut().enumerate().try_for_each(|(b, band)| {
            *band = build_band(pattern, b)?;
            Ok::<_, Error>(())
        })?;
        Ok(TileSchedule { bands })
    }

    pub fn tile_count(&self) -> usize {
        self.bands.iter().map(|b| b.tiles.len()).sum()
    }
}

fn build_band(pattern: &CompressedRef<'_, ()>, band: usize) -> Result<BandSchedule> {
    let first_row = band * TILE_ROWS;
    let row_count = TILE_ROWS.min(pattern.outer_dim - first_row);
    let first_entry = pattern.range(first_row).start;
    let end_entry = pattern.range(first_row + row_count - 1).end;
    let count = end_entry - first_entry;

    // Sort the band's entries by column: tiles become contiguous runs and so do repeated columns.
    // Key: column in the high half, the entry's position in the low half (stable, and unique).
    let mut keyed: Vec<(u64, u16)> = try_with_capacity(count, "the sort keys of a row band")?;
    for local_row in 0..row_count {
        for e in pattern.range(first_row + local_row) {
            let key = ((pattern.index(e) as u64) << 32) | (e - first_entry) as u64;
            keyed.push((key, local_row as u16));
        }
    }
    keyed.sort_unstable_by_key(|&(key, _)| key);

    let mut schedule = BandSchedule {
        first_row,
        row_count,
        first_entry,
        entries: try_with_capacity(count, "the entries of a row band")?,
        entry_rows: try_with_capacity(count, "the entries of a row band")?,
        entry_slots: try_with_capacity(count, "the entries of a row band")?,
        ..Default::default()
    };
    let mut tile_start = 0usize;
    let mut columns_start = 0usize;
    for (pos, &(key, local_row)) in keyed.iter().enumerate() {
        let column = (key >> 32) as u32;
        let col_block = column / TILE_COLS as u32;
        if pos > 0 && (keyed[pos - 1].0 >> 32) as u32 / TILE_COLS as u32 != col_block {
            let tile = Tile {
                col_block: (keyed[pos - 1].0 >> 32) as u32 / TILE_COLS as u32,
                entries: (tile_start as u32, pos as u32),
                columns: (columns_start as u32, schedule.columns.len() as u32),
            };
            try_push(&mut schedule.tiles, tile, "the tiles of a row band")?;
            tile_start = pos;
            columns_start = schedule.columns.len();
        }
        if schedule.columns.len() == columns_start || *schedule.columns.last().unwrap_or(&u32::MAX) != column {
            try_push(&mut schedule.columns, column, "the columns of a row band")?;
        }
        schedule.entries.push(key as u32);
        schedule.entry_rows.push(local_row);
        schedule.entry_slots.push((schedule.columns.len() - 1 - columns_start) as u16);
    }
    if let Some(&(key, _)) = keyed.last() {
        let tile = Tile {
            col_block: (key >> 32) as u32 / TILE_COLS as u32,
            entries: (tile_start as u32, keyed.len() as u32),
            columns: (columns_start as u32, schedule.columns.len() as u32),
        };
        try_push(&mut schedule.tiles, tile, "the tiles of a row band")?;
    }
    Ok(schedule)
}

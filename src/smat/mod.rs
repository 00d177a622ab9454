//! SMaT (Okanovic et al., "High Performance Unstructured SpMM Computation Using Tensor Cores"):
//! `C = α·A·B + β·C` with A sparse. The analysis, done once per matrix, permutes A's rows with
//! Sylos Labini's Jaccard clustering to pack nonzeros into fewer tiles, then stores A in BCSR whose
//! blocks are exactly the A-operand tile of the tensor-core `mma` instruction for the value type.
//! The compute phase multiplies every nonzero block with the matching panel of B.
//!
//! Everything here is backend-independent: a backend keeps the blocks where it multiplies and runs
//! SpMM on them ([`contract`]). The row permutation is internal and results are always in the
//! caller's row order.

pub mod bcsr;
pub mod contract;
pub mod reorder;

use crate::alloc::try_with_capacity;
use crate::error::{Error, Float, Result};
use crate::handle::HandleCore;
use crate::scalar::Element;
use crate::sparse::{CSR_NAMES, CompressedRef, CsrRef};
use crate::types::ValueType;
use bcsr::Bcsr;
use contract::{PreparedBlocks, Product, RawCsr, SmatElement};
use reorder::RowPatterns;
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

impl ReorderMode {
    pub const fn variants() -> &'static [ReorderMode] {
        &[ReorderMode::Auto, ReorderMode::Always, ReorderMode::Never]
    }
}

impl TryFrom<c_int> for ReorderMode {
    type Error = Error;
    fn try_from(v: c_int) -> Result<Self> {
        ReorderMode::variants()
            .iter()
            .copied()
            .find(|m| *m as c_int == v)
            .ok_or_else(|| Error::invalid_value(format!("{v} is not a valid smatReorderMode_t")))
    }
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
    jaccard_threshold: f64,
}

impl Default for AnalysisSettings {
    fn default() -> Self {
        AnalysisSettings { reorder: ReorderMode::Auto, jaccard_threshold: DEFAULT_JACCARD_THRESHOLD }
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
        let backend = T::backend(self.core.executor_mut());
        let host = unsafe { backend.csr_to_host(csr) }?;
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
        let Analysis { info, row_order, bcsr } = analyse(&view, &self.settings)?;
        let blocks = backend.prepare(&info, row_order.as_deref(), bcsr)?;
        Ok(SmatMatrix { info, row_order, blocks })
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
        unsafe { T::backend(self.core.executor_mut()).spmm(a, product) }
    }
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
    /// Distinct (row, column) positions among the entries: what the blocks actually hold.
    pub positions: usize,
    pub tile: Tile,
    pub blocks: usize,
    pub blocks_before_reordering: usize,
    pub reordered: bool,
    pub value_type: ValueType,
}

impl MatrixInfo {
    /// Distinct positions / (blocks · tile area): 1 means no padding; 0 when there are no blocks.
    pub fn fill_ratio(&self) -> f64 {
        if self.blocks == 0 { 0.0 } else { self.positions as f64 / (self.blocks * self.tile.area()) as f64 }
    }
}

/// An analysis's result on the host, before a backend prepares the blocks. Block values are in the
/// compute type (f32 for f16 / bf16 / f32, f64 for f64): halves are widened once at analysis so
/// duplicates sum without rounding and the CPU kernel reads blocks directly.
struct Analysis<S> {
    info: MatrixInfo,
    row_order: Option<Vec<usize>>,
    bcsr: Bcsr<S>,
}

/// Runs the analysis on a validated CSR matrix: reordering as `settings` ask, then BCSR blocking
/// with the value type's tile. Copies everything it needs from `csr`.
fn analyse<T: Element>(csr: &CsrRef<'_, T>, settings: &AnalysisSettings) -> Result<Analysis<T::Compute>> {
    let tile = Tile::for_value_type(T::VALUE_TYPE);
    let patterns = RowPatterns::new(csr, tile.cols)?;
    let blocks_before_reordering = reorder::count_blocks(&patterns, None, tile.rows)?;
    let identity = |order: &[usize]| order.iter().enumerate().all(|(i, &r)| i == r);

    let (row_order, blocks) = match settings.reorder {
        ReorderMode::Never => (None, blocks_before_reordering),
        mode => {
            let order = reorder::jaccard_row_order(&patterns, settings.jaccard_threshold)?;
            let blocks = reorder::count_blocks(&patterns, Some(&order), tile.rows)?;
            let keep = !identity(&order) && (mode == ReorderMode::Always || blocks < blocks_before_reordering);
            if keep { (Some(order), blocks) } else { (None, blocks_before_reordering) }
        }
    };
    let bcsr = bcsr::build(csr, row_order.as_deref(), tile, blocks)?;
    let info = MatrixInfo {
        rows: csr.outer_dim,
        cols: csr.inner_dim,
        nnz: csr.nnz(),
        positions: distinct_positions(csr)?,
        tile,
        blocks,
        blocks_before_reordering,
        reordered: row_order.is_some(),
        value_type: T::VALUE_TYPE,
    };
    Ok(Analysis { info, row_order, bcsr })
}

/// An analysed sparse matrix: BCSR of the (possibly row-permuted) matrix, ready for SpMM.
#[derive(Debug)]
pub struct SmatMatrix {
    info: MatrixInfo,
    /// Stored row `i` is the caller's row `row_order[i]`; `None` when the original order is kept.
    row_order: Option<Vec<usize>>,
    /// The blocks as the backend that analysed the matrix prepared them, where it multiplies (a
    /// CUDA-built matrix keeps no host copy of its tiles, which may be large): only handles of that
    /// backend multiply with the matrix.
    blocks: Box<dyn PreparedBlocks>,
}

impl SmatMatrix {
    pub fn info(&self) -> &MatrixInfo {
        &self.info
    }

    /// The caller's row index of stored row `stored`.
    #[inline]
    pub fn original_row(&self, stored: usize) -> usize {
        self.row_order.as_ref().map_or(stored, |o| o[stored])
    }

    /// The blocks, when they are of type `B` (the type of the backend asking: its own blocks).
    pub fn blocks<B: PreparedBlocks>(&self) -> Option<&B> {
        (self.blocks.as_ref() as &dyn Any).downcast_ref()
    }

    /// The backend that prepared the blocks, as messages name it.
    pub fn prepared_by(&self) -> &'static str {
        self.blocks.backend_name()
    }
}

fn distinct_positions<T>(csr: &CsrRef<'_, T>) -> Result<usize> {
    let longest = (0..csr.outer_dim).map(|r| csr.range(r).len()).max().unwrap_or(0);
    let mut columns = try_with_capacity(longest, "the columns of a row")?;
    let mut positions = 0;
    for r in 0..csr.outer_dim {
        columns.clear();
        columns.extend(csr.range(r).map(|e| csr.index(e)));
        columns.sort_unstable();
        columns.dedup();
        positions += columns.len();
    }
    Ok(positions)
}

//! What a backend does for SpAMM. The family ([`super::SpammHandle`]) checks a product's arguments,
//! keeps its statistics and runs the τ searches ([`super::tune`]); a backend computes the block norm
//! maps where the operands are, evaluates τ candidates on them ([`CandidateEvaluator`]), and runs the
//! valid block products. Both backends decide with the family's rules ([`super::is_performed`],
//! [`super::NormMap::of_operand`]'s order), so they skip exactly the same products.

use super::MathMode;
use super::tune::{CandidateEvaluator, TauRule};
use crate::error::Result;
use crate::executor::Executor;
use crate::scalar::Element;
use crate::types::Operation;
use half::{bf16, f16};

/// A caller's column-major operand by raw pointer (host memory, or device memory for the CUDA
/// backend), validated by the caller: `ptr` is readable for `len` elements, the stored matrix is
/// `stored_rows × stored_cols` with leading dimension `ld`, used as `op(X)`.
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

    /// The operand as a slice view.
    ///
    /// # Safety
    /// `ptr` must be host memory readable for `len` elements for `'a` (or `len` is 0).
    pub unsafe fn host<'a>(&self) -> super::GemmOperand<'a, T> {
        let data = if self.len == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(self.ptr, self.len) } };
        super::GemmOperand {
            data,
            op: self.op,
            stored_rows: self.stored_rows,
            stored_cols: self.stored_cols,
            ld: self.ld,
        }
    }
}

/// One product, its arguments checked by the family: `C ← α·Σ_(performed k) op(A)_ik·op(B)_kj + β·C`,
/// C column-major `m × n` with leading dimension `ldc` at `c` (`c_len` elements, overlapping neither
/// operand), τ given or to be searched on the product's own norm maps.
pub struct Product<'a, T: Element> {
    pub a: &'a RawOperand<T>,
    pub b: &'a RawOperand<T>,
    pub alpha: T::Compute,
    pub beta: T::Compute,
    pub c: *mut T,
    pub c_len: usize,
    pub ldc: usize,
    pub tau: TauRule,
    pub block_size: usize,
    pub math_mode: MathMode,
}

/// Where a product's statistics totals are: performed block products and `Σ_(i,j) skipped(i,j)²`
/// ([`super::BlockStats::totals`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Totals {
    Known {
        performed: u64,
        squared_skipped: f64,
    },
    /// Still being computed by the device: [`SpammStatistics::wait_totals`] brings them.
    Pending,
}

/// What a backend reports of a product.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    /// (mb, nb, kb): block rows of op(A), block columns of op(B), inner blocks.
    pub dims: (usize, usize, usize),
    /// The τ used (the given one, or the one the search chose).
    pub tau: f64,
    pub totals: Totals,
}

/// The SpAMM steps a backend executes for element type `T`.
pub trait SpammBackend<T: Element> {
    /// Computes the block norm maps, chooses τ by `product.tau` ([`TauRule::choose`] on an evaluator
    /// of those maps), performs the block products not skipped and the statistics.
    ///
    /// # Safety
    /// The operands and C must be readable (C also writable) for their lengths, in memory this
    /// backend accepts (host memory; the CUDA backend also takes memory of its device).
    unsafe fn gemm(&mut self, product: &Product<'_, T>) -> Result<Outcome>;

    /// Computes the norm maps of op(A) and op(B) at `block_size` and runs `search` on an evaluator of
    /// their products.
    ///
    /// # Safety
    /// As [`SpammBackend::gemm`], for the two operands.
    unsafe fn search_tau(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        block_size: usize,
        search: &mut dyn FnMut(&mut dyn CandidateEvaluator) -> Result<()>,
    ) -> Result<()>;
}

/// Statistics a backend computes after a product returned ([`Totals::Pending`]).
pub trait SpammStatistics {
    /// The totals of the last product whose totals were pending (waits for the device).
    fn wait_totals(&mut self) -> Result<(u64, f64)>;
}

/// The element types SpAMM multiplies, each finding its contract in an executor.
pub trait SpammElement: Element {
    fn backend(executor: &mut dyn Executor) -> &mut dyn SpammBackend<Self>;
}

macro_rules! spamm_element {
    ($($t:ty),*) => {$(
        impl SpammElement for $t {
            fn backend(executor: &mut dyn Executor) -> &mut dyn SpammBackend<$t> {
                executor
            }
        }
    )*};
}
spamm_element!(f32, f64, f16, bf16);

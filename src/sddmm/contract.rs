//! What a backend does for SDDMM. The family ([`super::SddmmHandle`]) chooses the algorithm (TILED
//! or COO, by density or by the caller's choice) and plans from the pattern alone ([`SddmmPlan`]:
//! a zero-based copy, COO rows and tile schedule on the host); a backend reads the caller's index
//! arrays for validation (or validates them where they lie, [`SddmmPatterns::validates_in_place`]),
//! prepares what a plan keeps on it ([`PreparedPlan`]), and runs the chosen algorithm on the
//! operands where they are, doing itself whatever preprocessing a call without a plan (or with a
//! plan prepared elsewhere) needs.

use super::{SddmmAlgorithm, SddmmMathMode, SddmmOperands, SddmmPlan};
use crate::dense::MatRef;
use crate::error::Error;
use crate::error::Result;
use crate::executor::Executor;
use crate::scalar::Element;
use crate::sparse::{CSR_NAMES, CompressedRef, StructureFault};
use crate::types::{IndexBase, Layout};
use half::{bf16, f16};
use std::borrow::Cow;

/// A dense factor by raw pointer (host memory, or device memory for the CUDA backend), validated by
/// the caller: `ptr` is readable for `len` elements and holds a `rows × k` matrix (the rows are
/// S's rows for A, S's columns for B) stored in the call's layout with leading dimension `ld`.
#[derive(Clone, Copy, Debug)]
pub struct RawFactor<T> {
    pub ptr: *const T,
    pub len: usize,
    pub ld: usize,
}

/// The caller's arrays of one SDDMM by raw pointer (host memory, or device memory for the CUDA
/// backend), checked for size, NULL and alignment: A (m×k) and B (n×k) in `layout`, S's values
/// (NULL: every S[e] is 1) and `out`, both with S's nnz entries, and S's structure where the backend
/// should read it.
#[derive(Clone, Copy, Debug)]
pub struct RawOperands<T: Element> {
    pub k: usize,
    pub alpha: T::Compute,
    pub a: RawFactor<T>,
    pub b: RawFactor<T>,
    pub layout: Layout,
    /// NULL: S is a pattern.
    pub s_values: *const T,
    pub out: *mut T,
    /// S's row pointers and column indices as the device should read them: the caller's arrays, or
    /// a plan's zero-based host copy. Same contents and index base as the pattern of the call.
    pub row_ptr: *const i32,
    pub col_ind: *const i32,
}

impl<T: Element> RawOperands<T> {
    /// Element strides (row, column) of A and B.
    pub fn strides(&self, ld: usize) -> (usize, usize) {
        self.layout.strides(ld)
    }

    /// The inputs as host views over `pattern` (which has the call's nnz).
    ///
    /// # Safety
    /// A, B and S's values must be host memory readable for their lengths for `'a` (or have length
    /// 0).
    pub unsafe fn host<'a>(&self, pattern: CompressedRef<'a, ()>) -> SddmmOperands<'a, T> {
        let nnz = pattern.nnz();
        let (m, n) = (pattern.outer_dim, pattern.inner_dim);
        let (a, b) = unsafe { (host_slice(self.a.ptr, self.a.len), host_slice(self.b.ptr, self.b.len)) };
        SddmmOperands {
            pattern,
            a: MatRef::new(a, m, self.k, self.a.ld, self.layout),
            b: MatRef::new(b, n, self.k, self.b.ld, self.layout),
            s_values: if self.s_values.is_null() { None } else { Some(unsafe { host_slice(self.s_values, nnz) }) },
            alpha: self.alpha,
        }
    }

    /// `out` as a host slice of `nnz` elements.
    ///
    /// # Safety
    /// `out` must be host memory writable for `nnz` elements for `'a` (or `nnz` is 0), overlapping no
    /// input.
    pub unsafe fn host_out<'a>(&self, nnz: usize) -> &'a mut [T] {
        if nnz == 0 { &mut [] } else { unsafe { std::slice::from_raw_parts_mut(self.out, nnz) } }
    }
}

/// # Safety
/// `ptr` readable for `len` elements for `'a`, or `len` is 0.
unsafe fn host_slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(ptr, len) } }
}

/// S's dimensions, entry count and index base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternShape {
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    pub base: IndexBase,
}

/// S's structure as a call passes it to the backend.
#[derive(Clone, Copy, Debug)]
pub enum Structure<'a> {
    /// In host memory, validated in full (zero-based when it is a plan's).
    Validated(CompressedRef<'a, ()>),
    /// The caller's arrays ([`RawOperands::row_ptr`] / `col_ind`), not validated: the backend said it
    /// validates them where they lie ([`SddmmPatterns::validates_in_place`]), and reports a fault
    /// through [`SddmmPatterns::invalid_pattern`] when its call returned before the validation
    /// finished.
    InPlace(PatternShape),
}

impl Structure<'_> {
    pub fn shape(&self) -> PatternShape {
        match self {
            Structure::Validated(p) => {
                PatternShape { rows: p.outer_dim, cols: p.inner_dim, nnz: p.nnz(), base: p.base }
            }
            Structure::InPlace(shape) => *shape,
        }
    }
}

/// A structure validated in place by a backend and found invalid: the first fault (in the order the
/// host validation looks for them) of the first such call not reported yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidPattern {
    pub shape: PatternShape,
    pub fault: StructureFault,
    /// Calls after that one whose structures were invalid too, reported with it.
    pub later_invalid: u64,
}

impl InvalidPattern {
    /// `INVALID_SPARSE_MATRIX`, naming the fault as the host validation does. `earlier`: the structure was
    /// not the reporting call's own, but one an earlier call passed and returned before it was
    /// validated (that call's `out` holds NaN).
    pub fn error(&self, earlier: bool) -> Error {
        let PatternShape { rows, cols, nnz, base } = self.shape;
        let fault = self.fault.message(CSR_NAMES, rows, cols, nnz, base);
        let later = match self.later_invalid {
            0 => String::new(),
            1 => "; 1 later call's pattern was invalid too".to_string(),
            count => format!("; {count} later calls' patterns were invalid too"),
        };
        Error::invalid_sparse(if earlier {
            format!(
                "an earlier call on this handle passed a pattern in device memory that its validation on the device, \
                 finished after the call returned, found invalid (m = {rows}, n = {cols}, nnz = {nnz}; its out holds \
                 NaN): {fault}{later}"
            )
        } else {
            format!("{fault}{later}")
        })
    }
}

/// One SDDMM as the family planned it: the algorithm to run, S's structure, and the plan whose
/// preprocessing may be reused.
#[derive(Clone, Copy)]
pub struct Sampling<'a, T: Element> {
    pub operands: &'a RawOperands<T>,
    pub structure: Structure<'a>,
    /// The plan the structure belongs to, if any (the structure is then the plan's, validated): its host preprocessing, and what the backend prepared
    /// for it ([`SddmmPlan::prepared`]), which a backend uses only where it applies (its own type,
    /// made on the device the call runs on).
    pub plan: Option<&'a SddmmPlan>,
    /// TILED or COO (never AUTO).
    pub algorithm: SddmmAlgorithm,
    /// Whether the caller forced the algorithm (the handle's SDDMM_ALGORITHM_TILED / COO) rather
    /// than AUTO choosing it.
    pub forced: bool,
    /// The handle's math mode for f32 calls; [`SddmmMathMode::Default`] for every other type.
    pub math: SddmmMathMode,
}

/// The SDDMM steps a backend executes for element type `T`.
pub trait SddmmBackend<T: Element> {
    /// Writes `out[e] = α·S[e]·⟨A[i,:], B[j,:]⟩` for every entry `e = (i, j)` of the pattern by
    /// `sampling.algorithm`, reusing the plan's preprocessing where it can and doing the rest itself.
    /// On failure `out` is untouched. A [`Structure::InPlace`] is validated before anything reads
    /// through it: when the call must wait anyway (`out` in host memory) a fault is its error (`out`
    /// untouched); otherwise the call returns without waiting and, if the structure was invalid,
    /// `out` is filled with NaN and the fault waits for [`SddmmPatterns::invalid_pattern`].
    ///
    /// # Safety
    /// The operands must be readable (`out` writable) for their lengths, in memory this backend
    /// accepts (host memory; the CUDA backend also takes memory of its device), `out` overlapping
    /// no input; `row_ptr` / `col_ind` hold the pattern's structure.
    unsafe fn sample(&mut self, sampling: &Sampling<'_, T>) -> Result<()>;

    /// Whether this backend's TILED algorithm is the faster for a call on S of `shape` with these
    /// operands and plan, whatever the handle's density threshold says: AUTO then takes TILED. A
    /// backend says so where a kernel of its tiled algorithm beats its COO kernel (the CUDA
    /// backend, with a plan prepared on its device: f16 / bf16 tiles on tensor cores and 16 × 16
    /// tiles on CUDA cores where its tiles holding entries are full enough, f32's tensor-core tiles
    /// in a TF32 `math` mode likewise, the band kernels where rows are short and even). By default
    /// never.
    fn prefers_tiled(
        &self,
        _operands: &RawOperands<T>,
        _shape: PatternShape,
        _plan: Option<&SddmmPlan>,
        _math: SddmmMathMode,
    ) -> bool {
        false
    }
}

/// What a backend keeps of a plan between calls (the CUDA backend: the pattern, COO rows and tile
/// schedule on a device). The plan holds it without knowing its type; only the backend that made it
/// looks inside (through [`std::any::Any`]).
pub trait PreparedPlan: std::any::Any + Send + Sync + std::fmt::Debug {}

/// SDDMM steps on the structure of S, independent of the element type.
pub trait SddmmPatterns {
    /// Whether this backend reads S's row pointers and column indices at `row_ptr` / `col_ind`
    /// (`None` when nnz is 0; both not NULL and aligned) where they lie and validates them there
    /// itself (the CUDA backend: both in device memory), so that the call need not bring them to the
    /// host. Such a call passes [`Structure::InPlace`].
    fn validates_in_place(&self, row_ptr: *const i32, col_ind: Option<*const i32>) -> bool;

    /// The first structure an earlier call validated in place and found invalid after it returned
    /// that no call has reported yet, if any. Without `wait`, only validations that have finished are
    /// looked at (nothing waits for the device); with `wait`, every one queued so far is waited for.
    fn invalid_pattern(&mut self, wait: bool) -> Result<Option<InvalidPattern>>;

    /// The caller's `len` int indices at `ptr` (not NULL, aligned, `len` > 0) as a host slice:
    /// borrowed when they are host memory, copied (waiting for the stream) when they are device
    /// memory this backend reads, so that the structure can be validated before anything runs (for
    /// a plan, or a call whose arrays the backend does not validate in place).
    ///
    /// # Safety
    /// `ptr` must be readable for `len` ints (host memory, or device memory for the CUDA backend)
    /// for `'a`.
    unsafe fn host_indices<'a>(&self, ptr: *const i32, len: usize, name: &str) -> Result<Cow<'a, [i32]>>;

    /// Prepares `plan` on this backend once, so that calls with it do no per-call preprocessing;
    /// `None` when the host plan is all the backend uses.
    fn prepare_plan(&mut self, plan: &SddmmPlan) -> Result<Option<Box<dyn PreparedPlan>>>;
}

/// The element types SDDMM samples, each finding its contract in an executor.
pub trait SddmmElement: Element {
    fn backend(executor: &mut dyn Executor) -> &mut dyn SddmmBackend<Self>;
}

macro_rules! sddmm_element {
    ($($t:ty),*) => {$(
        impl SddmmElement for $t {
            fn backend(executor: &mut dyn Executor) -> &mut dyn SddmmBackend<$t> {
                executor
            }
        }
    )*};
}
sddmm_element!(f32, f64, f16, bf16);

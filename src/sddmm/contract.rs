//! What a backend does for SDDMM. The family ([`super::SddmmHandle`]) chooses the algorithm (TILED
//! or COO, by density or by the caller's choice) and plans from the pattern alone ([`SddmmPlan`]:
//! a zero-based copy, COO rows and tile schedule on the host); a backend reads the caller's index
//! arrays for validation, prepares what a plan keeps on it ([`PreparedPlan`]), and runs the chosen
//! algorithm on the operands where they are, doing itself whatever preprocessing a call without a
//! plan (or with a plan prepared elsewhere) needs.

use super::{SddmmAlgorithm, SddmmOperands, SddmmPlan};
use crate::dense::MatRef;
use crate::error::Result;
use crate::executor::Executor;
use crate::scalar::Element;
use crate::sparse::CompressedRef;
use crate::types::Layout;
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

/// One SDDMM as the family planned it: the algorithm to run, S's validated structure, and the plan
/// whose preprocessing may be reused.
#[derive(Clone, Copy)]
pub struct Sampling<'a, T: Element> {
    pub operands: &'a RawOperands<T>,
    /// S's structure in host memory, validated in full (zero-based when it is a plan's).
    pub pattern: CompressedRef<'a, ()>,
    /// The plan `pattern` belongs to, if any: its host preprocessing, and what the backend prepared
    /// for it ([`SddmmPlan::prepared`]), which a backend uses only where it applies (its own type,
    /// made on the device the call runs on).
    pub plan: Option<&'a SddmmPlan>,
    /// TILED or COO (never AUTO).
    pub algorithm: SddmmAlgorithm,
}

/// The SDDMM steps a backend executes for element type `T`.
pub trait SddmmBackend<T: Element> {
    /// Writes `out[e] = α·S[e]·⟨A[i,:], B[j,:]⟩` for every entry `e = (i, j)` of the pattern by
    /// `sampling.algorithm`, reusing the plan's preprocessing where it can and doing the rest itself.
    /// On failure `out` is untouched.
    ///
    /// # Safety
    /// The operands must be readable (`out` writable) for their lengths, in memory this backend
    /// accepts (host memory; the CUDA backend also takes memory of its device), `out` overlapping
    /// no input; `row_ptr` / `col_ind` hold the pattern's structure.
    unsafe fn sample(&mut self, sampling: &Sampling<'_, T>) -> Result<()>;
}

/// What a backend keeps of a plan between calls (the CUDA backend: the pattern, COO rows and tile
/// schedule on a device). The plan holds it without knowing its type; only the backend that made it
/// looks inside (through [`std::any::Any`]).
pub trait PreparedPlan: std::any::Any + Send + Sync + std::fmt::Debug {}

/// SDDMM steps on the structure of S, independent of the element type.
pub trait SddmmPatterns {
    /// The caller's `len` int indices at `ptr` (not NULL, aligned, `len` > 0) as a host slice:
    /// borrowed when they are host memory, copied (waiting for the stream) when they are device
    /// memory this backend reads, so that the structure can be validated before anything runs.
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

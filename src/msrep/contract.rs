//! What a backend does for MSREP. The family ([`super::MsrepHandle`]) cuts a matrix into partitions
//! over the handle's devices ([`super::partition`]) and says how their partial results merge
//! ([`super::merge`]); a backend places a partitioned matrix where it computes and runs SpMV on it,
//! the partitions concurrently, merged by the family's rules.
//!
//! What a backend keeps of a matrix between calls (the CUDA backend: each partition on its device,
//! the merge's buffers, streams and events) is of the backend's own type, held by the matrix as a
//! [`Resident`] whose type the family does not know. A matrix keeps its host partitions besides, so
//! any handle can use it: a backend that finds no resident data of its own type builds it from them.

use super::PartitionedMatrix;
use crate::alloc::ZeroBits;
use crate::error::Result;
use crate::executor::Executor;
use crate::scalar::Element;
use half::{bf16, f16};

/// A backend's data of one matrix, kept in the matrix ([`PartitionedMatrix::resident`]); the backend
/// that made it finds its own type again by upcasting to [`std::any::Any`] and downcasting.
pub trait Resident: std::any::Any + Send + Sync + std::fmt::Debug {}

impl<R: std::any::Any + Send + Sync + std::fmt::Debug> Resident for R {}

/// The MSREP steps a backend executes for matrices of value type `T`, computing in `T::Compute`
/// (f32 for the 16-bit types, whose matrices only store their values in 16 bits).
pub trait MsrepBackend<T: Element> {
    /// Prepares a freshly partitioned matrix for this backend's SpMVs (the CUDA backend uploads
    /// every partition to its device, where it stays resident).
    fn place(&mut self, a: &mut PartitionedMatrix<T>) -> Result<()>;

    /// `y = α·A·x + β·y` (β = 0: y is not read), α, β, x and y in the compute type; returns without
    /// waiting where the backend can (the CUDA backend with device-memory y).
    ///
    /// # Safety
    /// `x` must be readable for `a.cols` elements and `y` readable and writable for `a.rows`, not
    /// overlapping (either may dangle when its length is 0), in memory this backend accepts (host
    /// memory; the CUDA backend also takes memory of the handle's first device).
    unsafe fn spmv(
        &mut self,
        a: &mut PartitionedMatrix<T>,
        alpha: T::Compute,
        x: *const T::Compute,
        beta: T::Compute,
        y: *mut T::Compute,
    ) -> Result<()>;
}

/// The value types of MSREP matrices, each finding its contract in an executor.
pub trait MsrepElement: Element + ZeroBits {
    fn backend(executor: &mut dyn Executor) -> &mut dyn MsrepBackend<Self>;
}

macro_rules! msrep_element {
    ($($t:ty),*) => {$(
        impl MsrepElement for $t {
            fn backend(executor: &mut dyn Executor) -> &mut dyn MsrepBackend<$t> {
                executor
            }
        }
    )*};
}
msrep_element!(f32, f64, f16, bf16);

//! MSREP: multi-GPU SpMV `y = α·A·x + β·y` over nnz-balanced partial formats (pCSR, pCSC, pCOO).
//!
//! A matrix is cut once, at creation, into partitions of (almost) equal nnz; each partition keeps its
//! own copy of its nonzeros in the paper's partial format and is placed on one of the handle's devices
//! (round-robin), where it stays resident across SpMV calls. An SpMV runs every partition concurrently
//! and then merges the partial results ([`merge`] says how, and why it differs from the paper's code).

pub mod contract;
pub mod merge;
pub mod partition;

use crate::alloc::{try_collect_par, try_copy_par, try_vec};
use crate::error::{Error, Result};
use crate::handle::HandleCore;
use crate::log;
use crate::scalar::{ComputeScalar, Element};
use crate::sparse::{CompressedRef, CooRef};
use crate::types::{SparseFormat, ValueType};
pub use contract::MsrepElement;
use contract::Resident;
use half::{bf16, f16};
use partition::{PartitionBounds, compressed_bounds, coo_bounds, device_of, local_pointers};
use rayon::prelude::*;

/// An MSREP handle (`msrepContext`): backend, stream and the devices partitions are spread over.
#[derive(Debug)]
pub struct MsrepHandle {
    core: HandleCore,
}

impl MsrepHandle {
    pub fn new() -> Result<Self> {
        Ok(MsrepHandle { core: HandleCore::new()? })
    }

    pub fn core(&self) -> &HandleCore {
        &self.core
    }

    pub fn core_mut(&mut self) -> &mut HandleCore {
        &mut self.core
    }

    /// pCSR partitions of a CSR matrix or pCSC partitions of a CSC matrix (`format` says which `a`
    /// is), spread round-robin over the handle's devices and placed by its backend (on a CUDA handle:
    /// resident on their devices from now on).
    pub fn partition_compressed<T: MsrepElement>(
        &mut self,
        a: &CompressedRef<'_, T>,
        format: SparseFormat,
        partitions: usize,
    ) -> Result<PartitionedMatrix<T>> {
        let matrix = PartitionedMatrix::from_compressed(a, format, partitions, self.core.devices())?;
        self.place(matrix)
    }

    /// pCOO partitions of a row-sorted COO matrix, as [`MsrepHandle::partition_compressed`].
    pub fn partition_coo<T: MsrepElement>(
        &mut self,
        a: &CooRef<'_, T>,
        partitions: usize,
    ) -> Result<PartitionedMatrix<T>> {
        let matrix = PartitionedMatrix::from_coo(a, partitions, self.core.devices())?;
        self.place(matrix)
    }

    fn place<T: MsrepElement>(&mut self, mut matrix: PartitionedMatrix<T>) -> Result<PartitionedMatrix<T>> {
        let call = log::Call::open();
        T::backend(self.core.executor_mut()).place(&mut matrix)?;
        call.finish(|| format!("msrep partition {}", matrix.describe(&self.core)));
        Ok(matrix)
    }

    /// `y = α·A·x + β·y` on the handle's backend, whichever backend made `a`; α, β, x and y in `T`'s
    /// compute type (f32 for a matrix of 16-bit values).
    ///
    /// # Safety
    /// As [`contract::MsrepBackend::spmv`], for this handle's backend.
    pub unsafe fn spmv<T: MsrepElement>(
        &mut self,
        a: &mut PartitionedMatrix<T>,
        alpha: T::Compute,
        x: *const T::Compute,
        beta: T::Compute,
        y: *mut T::Compute,
    ) -> Result<()> {
        let call = log::Call::open();
        unsafe { T::backend(self.core.executor_mut()).spmv(a, alpha, x, beta, y) }?;
        call.finish(|| format!("msrep spmv {}", a.describe(&self.core)));
        Ok(())
    }
}

/// The nonzeros one partition keeps, renumbered to be self-contained (what would live on its device).
#[derive(Clone, Debug, PartialEq)]
pub enum PartitionData<T> {
    /// pCSR (minor = column) or pCSC (minor = row): the local pointer array over this partition's
    /// slice of minor indices and values. Minor indices are zero-based and global.
    Compressed { local_ptr: Vec<i32>, minor_ind: Vec<i32>, values: Vec<T> },
    /// pCOO: this partition's slice of the row-sorted COO; rows are relative to `start_major`
    /// (so they fit the partition's span), columns are zero-based and global.
    Coordinate { local_row: Vec<i32>, col_ind: Vec<i32>, values: Vec<T> },
}

/// One partition: where it lies in the matrix, which device holds it, and its data.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition<T> {
    pub bounds: PartitionBounds,
    pub device: i32,
    pub data: PartitionData<T>,
}

/// A matrix of one value type, partitioned. Its values are stored as `T` and multiplied in
/// `T::Compute`.
#[derive(Debug)]
pub struct PartitionedMatrix<T: Element> {
    pub rows: usize,
    pub cols: usize,
    pub format: SparseFormat,
    pub partitions: Vec<Partition<T>>,
    /// pCSC only: one full-length (rows) partial result per non-empty partition, allocated once with
    /// the matrix (the paper keeps these on the GPUs), so SpMV allocates nothing large per call.
    pub column_partials: Vec<Vec<T::Compute>>,
    /// What a backend keeps of the matrix where it computes, once the matrix has been used with a
    /// handle of that backend (created on one, or at its first SpMV there): for the CUDA backend the
    /// partitions on their devices. The host copies above stay: any handle may use the matrix.
    pub resident: Option<Box<dyn Resident>>,
}

/// A partitioned matrix (`msrepMatrix`): f32 or f64 values, or f16 / bf16 values multiplied in f32.
#[derive(Debug)]
pub enum MsrepMatrix {
    F32(PartitionedMatrix<f32>),
    F64(PartitionedMatrix<f64>),
    F16(PartitionedMatrix<f16>),
    Bf16(PartitionedMatrix<bf16>),
}

/// `$body` with `$m` bound to the typed matrix inside `$matrix`, whatever its value type.
macro_rules! with_matrix {
    ($matrix:expr, $m:ident => $body:expr) => {
        match $matrix {
            MsrepMatrix::F32($m) => $body,
            MsrepMatrix::F64($m) => $body,
            MsrepMatrix::F16($m) => $body,
            MsrepMatrix::Bf16($m) => $body,
        }
    };
}
pub(crate) use with_matrix;

impl MsrepMatrix {
    pub fn value_type(&self) -> ValueType {
        with_matrix!(self, m => m.value_type())
    }

    pub fn rows(&self) -> usize {
        with_matrix!(self, m => m.rows)
    }

    pub fn cols(&self) -> usize {
        with_matrix!(self, m => m.cols)
    }

    pub fn format(&self) -> SparseFormat {
        with_matrix!(self, m => m.format)
    }

    pub fn partition_count(&self) -> usize {
        with_matrix!(self, m => m.partitions.len())
    }

    /// Bounds and device of partition `i`, `None` when out of range.
    pub fn partition_placement(&self, i: usize) -> Option<(PartitionBounds, i32)> {
        with_matrix!(self, m => m.partitions.get(i).map(|p| (p.bounds, p.device)))
    }
}

fn check_partition_count(partitions: usize, devices: &[i32]) -> Result<()> {
    if devices.is_empty() {
        return Err(Error::internal("a handle always has at least one device"));
    }
    if partitions == 0 {
        return Err(Error::internal("the partition count is resolved to at least 1 before partitioning"));
    }
    Ok(())
}

impl<T: Element> PartitionedMatrix<T> {
    pub fn value_type(&self) -> ValueType {
        T::VALUE_TYPE
    }

    /// pCSR from CSR or pCSC from CSC (`format` says which the view is): Algorithms 2 / 4, every
    /// partition built independently (and so concurrently, as the paper does one per GPU thread).
    pub fn from_compressed(
        a: &CompressedRef<'_, T>,
        format: SparseFormat,
        partitions: usize,
        devices: &[i32],
    ) -> Result<Self> {
        check_partition_count(partitions, devices)?;
        let base = a.base.offset();
        let ptr =
            try_collect_par(a.outer_dim + 1, "the zero-based pointer array", |o| (a.ptr[o] as i64 - base) as usize)?;
        let bounds = compressed_bounds(&ptr, partitions);
        let parts = bounds
            .par_iter()
            .enumerate()
            .map(|(i, b)| {
                let range = b.start_idx..b.end_idx;
                Ok(Partition {
                    bounds: *b,
                    device: device_of(i, devices),
                    data: PartitionData::Compressed {
                        local_ptr: local_pointers(&ptr, b)?,
                        minor_ind: try_collect_par(range.len(), "partition indices", |k| {
                            (a.idx[b.start_idx + k] as i64 - base) as i32
                        })?,
                        values: try_copy_par(&a.values[range], "partition values")?,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (rows, cols) = match format {
            SparseFormat::Csc => (a.inner_dim, a.outer_dim),
            _ => (a.outer_dim, a.inner_dim),
        };
        Self::assemble(rows, cols, format, parts)
    }

    /// pCOO from a COO matrix sorted by row: Algorithm 6.
    pub fn from_coo(a: &CooRef<'_, T>, partitions: usize, devices: &[i32]) -> Result<Self> {
        check_partition_count(partitions, devices)?;
        let bounds = coo_bounds(a.nnz(), |e| a.row(e), a.rows, partitions);
        let parts = bounds
            .par_iter()
            .enumerate()
            .map(|(i, b)| {
                let range = b.start_idx..b.end_idx;
                Ok(Partition {
                    bounds: *b,
                    device: device_of(i, devices),
                    data: PartitionData::Coordinate {
                        local_row: try_collect_par(range.len(), "partition rows", |k| {
                            (a.row(b.start_idx + k) - b.start_major) as i32
                        })?,
                        col_ind: try_collect_par(range.len(), "partition columns", |k| a.col(b.start_idx + k) as i32)?,
                        values: try_copy_par(&a.values[range], "partition values")?,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Self::assemble(a.rows, a.cols, SparseFormat::Coo, parts)
    }

    /// The matrix and its partitions as log lines say them.
    fn describe(&self, core: &HandleCore) -> String {
        let nnz = self.partitions.iter().map(|p| p.bounds.nnz());
        let (fewest, most) = (nnz.clone().min().unwrap_or(0), nnz.clone().max().unwrap_or(0));
        let cut_inside = self.partitions.iter().filter(|p| p.bounds.start_flag).count();
        let major = if self.format == SparseFormat::Csc { "column" } else { "row" };
        let mut devices: Vec<i32> = self.partitions.iter().map(|p| p.device).collect();
        devices.sort_unstable();
        devices.dedup();
        format!(
            "p{} {} {}x{}, nnz {} on {}: {} partitions of {fewest} to {most} nonzeros on devices {devices:?}, \
             {major}s cut between partitions: {cut_inside}",
            self.format.name(),
            T::VALUE_TYPE.short_name(),
            self.rows,
            self.cols,
            nnz.sum::<usize>(),
            core.describe_placement(),
            self.partitions.len(),
        )
    }

    fn assemble(rows: usize, cols: usize, format: SparseFormat, partitions: Vec<Partition<T>>) -> Result<Self> {
        let mut column_partials = Vec::new();
        if format == SparseFormat::Csc {
            let non_empty = partitions.iter().filter(|p| p.bounds.nnz() > 0).count();
            for _ in 0..non_empty {
                column_partials.push(try_vec(rows, T::Compute::ZERO, "a pCSC partial result vector")?);
            }
        }
        Ok(PartitionedMatrix { rows, cols, format, partitions, column_partials, resident: None })
    }
}

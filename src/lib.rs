//! libsparsegpu: near-sparse and sparse matrix products with a C ABI.
//!
//! Four families, each from a published method: SpAMM (approximate products of decay matrices),
//! SMaT (SpMM on tensor cores through BCSR), MSREP (multi-GPU SpMV over nnz-balanced partitions) and
//! SDDMM (GPU-Dynamic). See `DESIGN.md`-style notes in `docs/` and the README.
//!
//! Layers: `capi` (the only `extern "C"` code) → the family modules (backend-independent planning)
//! → `backend::{cpu, ..}` (execution).

pub mod alloc;
pub mod backend;
pub mod capi;
pub(crate) mod chunks;
pub mod dense;
pub mod error;
pub mod executor;
pub mod handle;
pub mod log;
pub mod matrix_market;
pub mod msrep;
pub mod scalar;
pub mod sddmm;
pub mod smat;
pub mod spamm;
pub mod sparse;
pub mod testgen;
pub mod types;

pub use error::{Error, Result, Status};
pub use types::{BackendKind, IndexBase, Layout, Operation, SparseFormat, ValueType};

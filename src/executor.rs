//! What a handle runs its work on: an executor, a backend together with the handle's devices and
//! stream. Each family declares the contract a backend implements for it (a trait in the family's
//! module, [`crate::spamm::contract`] for instance); an [`Executor`] is a backend that implements
//! all of them. Families reach their contract through the executor and never name a backend; the
//! backends (`crate::backend::cpu`, `crate::backend::cuda`) implement the contracts and may use the
//! families' types; `crate::backend::executor` makes the executor a handle asked for.

use crate::error::Result;
use crate::msrep::contract::MsrepBackend;
use crate::sddmm::contract::{SddmmBackend, SddmmPatterns};
use crate::smat::contract::SmatBackend;
use crate::spamm::contract::{SpammBackend, SpammStatistics};
use crate::types::BackendKind;
use half::{bf16, f16};

/// Where a handle's work runs: the caller's `cudaStream_t` (0 = the default stream; kept as an
/// address, the CPU backend never dereferences it) and the device ordinals, first the one single-GPU
/// work runs on. The CPU backend keeps them only to report them back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub stream: usize,
    pub devices: Vec<i32>,
}

impl Default for Placement {
    fn default() -> Self {
        Placement { stream: 0, devices: vec![0] }
    }
}

/// Settings tests use to reach code paths the machine they run on would not take; off by default.
/// Each handle has its own, so tests that set them run side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestHooks {
    /// A one-device SpAMM product is split into this many row shares, computed as other devices'
    /// shares are (own stream, operands copied), so that one GPU exercises the multi-device path.
    /// 1: no split.
    pub spamm_shares_on_one_device: usize,
    /// SpAMM's tile kernels are launched with the least shared memory they run with (the f64
    /// kernel's two pipeline stages), as on a device that cannot give them more.
    pub spamm_fewest_shared_memory: bool,
    /// MSREP matrices this executor makes resident run their lead-device partitions the way
    /// partitions of other devices run (own streams, events, x copied along the chain of devices,
    /// results written into the lead device's memory), so that one GPU exercises the multi-device
    /// path.
    pub msrep_stage_lead_partitions: bool,
    /// MSREP matrices this executor makes resident spread each device's partitions round-robin
    /// over this many sides, every side but the lead device's first on the multi-device path (own
    /// streams, x along the chain of sides): one GPU then exercises a chain of several devices.
    pub msrep_sides_per_device: usize,
    /// MSREP matrices this executor makes resident send the raw row sums of other devices' pCSR
    /// partitions to the lead device for it to finish, as where those devices cannot write the lead
    /// device's memory, instead of writing y there directly.
    pub msrep_partials_through_copies: bool,
    /// MSREP matrices this executor makes resident cut each pCSR row longer than the long-row
    /// threshold into chunks of a block each. Off: the row groups process every row, long ones in the
    /// widest group (a benchmark compares the two).
    pub msrep_long_row_chunks: bool,
    /// MSREP matrices this executor makes resident put the regular rows of each pCSR batch in slices
    /// of 32 rows wherever the layout allows, as only large batches of f64 values are otherwise, so
    /// that small matrices and f32 exercise that layout.
    pub msrep_slices_at_any_size: bool,
    /// MSREP matrices this executor makes resident sort each device's pCSC partitions by rows on the
    /// device whatever their size, as only large ones are otherwise, so that small matrices exercise
    /// the device sort.
    pub msrep_csc_sort_on_device_at_any_size: bool,
}

impl Default for TestHooks {
    fn default() -> Self {
        TestHooks {
            spamm_shares_on_one_device: 1,
            spamm_fewest_shared_memory: false,
            msrep_stage_lead_partitions: false,
            msrep_sides_per_device: 1,
            msrep_partials_through_copies: false,
            msrep_long_row_chunks: true,
            msrep_slices_at_any_size: false,
            msrep_csc_sort_on_device_at_any_size: false,
        }
    }
}

/// A backend executing every family's contract on a handle's placement.
pub trait Executor:
    Send
    + std::fmt::Debug
    + SpammBackend<f32>
    + SpammBackend<f64>
    + SpammBackend<f16>
    + SpammBackend<bf16>
    + SpammStatistics
    + SmatBackend<f32>
    + SmatBackend<f64>
    + SmatBackend<f16>
    + SmatBackend<bf16>
    + MsrepBackend<f32>
    + MsrepBackend<f64>
    + MsrepBackend<f16>
    + MsrepBackend<bf16>
    + SddmmBackend<f32>
    + SddmmBackend<f64>
    + SddmmBackend<f16>
    + SddmmBackend<bf16>
    + SddmmPatterns
{
    /// The backend, as reported to callers (never `Auto`).
    fn kind(&self) -> BackendKind;

    fn placement(&self) -> &Placement;

    /// Moves the executor to other devices or another stream. A backend refuses devices it cannot
    /// use (the CUDA backend: an ordinal that names no visible device).
    fn set_placement(&mut self, placement: Placement) -> Result<()>;

    fn test_hooks(&self) -> &TestHooks;

    fn test_hooks_mut(&mut self) -> &mut TestHooks;
}

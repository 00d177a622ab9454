//! The CPU backend: rayon-parallel implementations of every family. It is the executable
//! specification of each method's semantics and a real fallback where no GPU is usable.

pub mod msrep;
pub mod sddmm;
pub mod smat;
pub mod spamm;
pub mod tf32;

use crate::error::Result;
use crate::executor::{Executor, Placement, TestHooks};
use crate::types::BackendKind;

/// The CPU executor: host memory only; the placement is kept to be reported back.
#[derive(Debug)]
pub struct CpuExecutor {
    placement: Placement,
    test_hooks: TestHooks,
}

impl CpuExecutor {
    pub fn new(placement: Placement, test_hooks: TestHooks) -> Self {
        CpuExecutor { placement, test_hooks }
    }
}

impl Executor for CpuExecutor {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn placement(&self) -> &Placement {
        &self.placement
    }

    fn set_placement(&mut self, placement: Placement) -> Result<()> {
        self.placement = placement;
        Ok(())
    }

    fn test_hooks(&self) -> &TestHooks {
        &self.test_hooks
    }

    fn test_hooks_mut(&mut self) -> &mut TestHooks {
        &mut self.test_hooks
    }
}

//! The backends and the choice among them. A handle asks for a kind (auto, cpu or cuda) and gets an
//! executor ([`executor`]) when it is created or when the caller changes its backend.

pub mod cpu;
pub mod cuda;

use crate::error::{Error, Result};
use crate::executor::{Executor, Placement, TestHooks};
use crate::types::BackendKind;

/// Environment variable that sets the backend of new handles: `auto`, `cuda` or `cpu`.
pub const BACKEND_ENV: &str = "SPARSEGPU_BACKEND";

/// The executor of a requested kind on `placement`. `Auto` falls back to the CPU silently; an
/// explicit `Cuda` where CUDA is unusable is `BackendUnavailable` with the reason.
pub fn executor(kind: BackendKind, placement: Placement, test_hooks: TestHooks) -> Result<Box<dyn Executor>> {
    let cuda = match kind {
        BackendKind::Cpu => false,
        BackendKind::Auto => cuda::availability().is_ok(),
        BackendKind::Cuda => match cuda::availability() {
            Ok(_) => true,
            Err(why) => {
                return Err(Error::backend_unavailable(format!("CUDA backend requested but unavailable: {why}")));
            }
        },
    };
    Ok(if cuda {
        Box::new(cuda::CudaExecutor::new(placement, test_hooks)?)
    } else {
        Box::new(cpu::CpuExecutor::new(placement, test_hooks))
    })
}

/// The kind requested by `SPARSEGPU_BACKEND`, `Auto` when unset.
pub fn kind_from_env() -> Result<BackendKind> {
    match std::env::var(BACKEND_ENV) {
        Err(_) => Ok(BackendKind::Auto),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(BackendKind::Auto),
            "cuda" | "gpu" => Ok(BackendKind::Cuda),
            "cpu" => Ok(BackendKind::Cpu),
            other => Err(Error::invalid_value(format!(
                "environment variable {BACKEND_ENV} = '{other}' is not one of auto, cuda, cpu"
            ))),
        },
    }
}

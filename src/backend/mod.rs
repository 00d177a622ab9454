//! Backend selection. A handle resolves its requested `BackendKind` into a concrete backend once,
//! when it is created or when the caller changes it.

pub mod cpu;
pub mod cuda;

use crate::error::{Error, Result};
use crate::types::BackendKind;

/// Environment variable that sets the backend of new handles: `auto`, `cuda` or `cpu`.
pub const BACKEND_ENV: &str = "SPARSEGPU_BACKEND";

/// The backend a handle executes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    Cpu,
    /// The handle's devices (`HandleCore::devices`) on the CUDA runtime of [`cuda`].
    Cuda,
}

impl Backend {
    /// The concrete kind (never `Auto`).
    pub fn kind(&self) -> BackendKind {
        match self {
            Backend::Cpu => BackendKind::Cpu,
            Backend::Cuda => BackendKind::Cuda,
        }
    }
}

/// Resolves a requested kind. `Auto` falls back to the CPU silently; an explicit `Cuda` where CUDA is
/// unusable is `BackendUnavailable` with the reason.
pub fn resolve(kind: BackendKind) -> Result<Backend> {
    match kind {
        BackendKind::Cpu => Ok(Backend::Cpu),
        BackendKind::Auto => Ok(if cuda::availability().is_ok() { Backend::Cuda } else { Backend::Cpu }),
        BackendKind::Cuda => match cuda::availability() {
            Ok(_) => Ok(Backend::Cuda),
            Err(why) => Err(Error::backend_unavailable(format!("CUDA backend requested but unavailable: {why}"))),
        },
    }
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

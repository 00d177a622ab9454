//! State every family's handle shares: backend, stream, devices.

use crate::alloc::try_copy;
use crate::backend::{self, Backend, cuda};
use crate::error::{Error, Result};
use crate::types::BackendKind;
use std::ffi::c_void;

#[derive(Debug)]
pub struct HandleCore {
    backend: Backend,
    /// The caller's `cudaStream_t` (NULL = the default stream). Kept as an address: the CPU backend
    /// never dereferences it.
    stream: usize,
    devices: Vec<i32>,
}

impl HandleCore {
    /// A new handle's state, on the backend `SPARSEGPU_BACKEND` asks for (auto when unset), device 0.
    pub fn new() -> Result<Self> {
        let backend = backend::resolve(backend::kind_from_env()?)?;
        Ok(HandleCore { backend, stream: 0, devices: vec![0] })
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    pub fn set_backend(&mut self, kind: BackendKind) -> Result<()> {
        let backend = backend::resolve(kind)?;
        if backend == Backend::Cuda {
            check_cuda_devices(&self.devices)?;
        }
        self.backend = backend;
        Ok(())
    }

    /// The first of the handle's devices on the CUDA runtime (where single-GPU work runs).
    pub fn gpu(&self) -> Result<std::sync::Arc<cuda::GpuDevice>> {
        cuda::device(self.devices[0] as usize)
    }

    /// All of the handle's devices, in the order given to `set_devices`.
    pub fn gpus(&self) -> Result<Vec<std::sync::Arc<cuda::GpuDevice>>> {
        self.devices.iter().map(|&d| cuda::device(d as usize)).collect()
    }

    /// The caller's stream as the driver API's type.
    pub fn cu_stream(&self) -> cuda::Stream {
        cuda::Stream(self.stream as cudarc::driver::sys::CUstream)
    }

    pub fn stream(&self) -> *mut c_void {
        self.stream as *mut c_void
    }

    pub fn set_stream(&mut self, stream: *mut c_void) {
        self.stream = stream as usize;
    }

    pub fn devices(&self) -> &[i32] {
        &self.devices
    }

    /// Sets the devices a multi-GPU family uses: a non-empty list of distinct, non-negative ordinals.
    pub fn set_devices(&mut self, devices: &[i32]) -> Result<()> {
        if devices.is_empty() {
            return Err(Error::invalid_size("count must be at least 1"));
        }
        for (i, &d) in devices.iter().enumerate() {
            if d < 0 {
                return Err(Error::invalid_value(format!("devices[{i}] = {d} is negative")));
            }
            if devices[..i].contains(&d) {
                return Err(Error::invalid_value(format!("devices[{i}] = {d} appears twice")));
            }
        }
        if self.backend == Backend::Cuda {
            check_cuda_devices(devices)?;
        }
        self.devices = try_copy(devices, "the device list")?;
        Ok(())
    }
}

/// Every ordinal must name a visible CUDA device.
fn check_cuda_devices(devices: &[i32]) -> Result<()> {
    let count = cuda::device_count()?;
    match devices.iter().position(|&d| d as usize >= count) {
        Some(i) => Err(Error::invalid_value(format!(
            "devices[{i}] = {} does not exist ({count} CUDA devices are visible)",
            devices[i]
        ))),
        None => Ok(()),
    }
}

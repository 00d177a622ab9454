//! State every family's handle shares: backend, stream, devices.

use crate::backend::{self, Backend};
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
        self.backend = backend::resolve(kind)?;
        Ok(())
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
        self.devices = devices.to_vec();
        Ok(())
    }
}

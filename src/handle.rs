//! State every family's handle shares: the executor its work runs on (backend, devices, stream).

use crate::alloc::try_copy;
use crate::backend;
use crate::error::{Error, Result};
use crate::executor::{Executor, Placement, TestHooks};
use crate::types::BackendKind;
use std::ffi::c_void;

#[derive(Debug)]
pub struct HandleCore {
    executor: Box<dyn Executor>,
}

impl HandleCore {
    /// A new handle's state, on the backend `SPARSEGPU_BACKEND` asks for (auto when unset), device 0,
    /// the default stream.
    pub fn new() -> Result<Self> {
        let kind = backend::kind_from_env()?;
        Ok(HandleCore { executor: backend::executor(kind, Placement::default(), TestHooks::default())? })
    }

    /// The backend the handle runs on (never `Auto`).
    pub fn backend(&self) -> BackendKind {
        self.executor.kind()
    }

    /// Moves the handle to another backend, keeping its devices and stream (which the new backend
    /// must accept).
    pub fn set_backend(&mut self, kind: BackendKind) -> Result<()> {
        let placement = self.executor.placement().clone();
        self.executor = backend::executor(kind, placement, *self.executor.test_hooks())?;
        Ok(())
    }

    pub fn executor(&self) -> &dyn Executor {
        self.executor.as_ref()
    }

    pub fn executor_mut(&mut self) -> &mut dyn Executor {
        self.executor.as_mut()
    }

    pub fn stream(&self) -> *mut c_void {
        self.executor.placement().stream as *mut c_void
    }

    pub fn set_stream(&mut self, stream: *mut c_void) -> Result<()> {
        let placement = Placement { stream: stream as usize, ..self.executor.placement().clone() };
        self.executor.set_placement(placement)
    }

    pub fn devices(&self) -> &[i32] {
        &self.executor.placement().devices
    }

    /// Where the handle runs, as log lines say it: "cpu", "cuda device 0", "cuda devices [0, 1]".
    pub fn describe_placement(&self) -> String {
        match (self.backend(), self.devices()) {
            (BackendKind::Cuda, [device]) => format!("cuda device {device}"),
            (BackendKind::Cuda, devices) => format!("cuda devices {devices:?}"),
            _ => "cpu".to_string(),
        }
    }

    /// Sets the devices a multi-GPU family uses: a non-empty list of distinct, non-negative ordinals
    /// (that the backend can use).
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
        let placement =
            Placement { devices: try_copy(devices, "the device list")?, ..self.executor.placement().clone() };
        self.executor.set_placement(placement)
    }

    /// The test hooks of this handle's executor (kept across backend changes).
    pub fn test_hooks_mut(&mut self) -> &mut TestHooks {
        self.executor.test_hooks_mut()
    }
}

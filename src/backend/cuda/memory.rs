//! Device memory for one call: stream-ordered allocations freed on the same stream, the caller's
//! pointers classified as host or device memory, and host arrays staged through the device (as
//! cuBLAS-XT does) so that plain host arrays work unchanged.

use super::{GpuDevice, Stream, driver_error};
use crate::error::{Error, Result};
use cudarc::driver::result as drv;
use cudarc::driver::sys::{self, CUdeviceptr, cudaError_enum};
use std::ffi::c_void;
use std::sync::Arc;

/// Where a caller's pointer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// Ordinary (pageable or pinned) host memory: staged through the device.
    Host,
    /// Device or managed memory of this device ordinal: used in place.
    Device(usize),
}

/// Classifies a pointer with `cuPointerGetAttributes`, which (unlike `cuPointerGetAttribute`) answers
/// for memory the driver does not know without raising an API error, so sanitizer runs stay clean.
/// Unknown memory and registered (pinned) host memory are host memory; device and managed memory
/// are used in place.
pub fn locate(ptr: *const c_void) -> Location {
    let mut memory_type: u32 = 0;
    let mut ordinal: i32 = -1;
    let mut attributes = [
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    ];
    let mut values: [*mut c_void; 2] = [(&mut memory_type as *mut u32).cast(), (&mut ordinal as *mut i32).cast()];
    let r = unsafe { sys::cuPointerGetAttributes(2, attributes.as_mut_ptr(), values.as_mut_ptr(), ptr as CUdeviceptr) };
    if r != cudaError_enum::CUDA_SUCCESS || memory_type != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 || ordinal < 0
    {
        return Location::Host;
    }
    Location::Device(ordinal as usize)
}

thread_local! {
    static FAILING_ALLOCATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes the next `count` device allocations made on this thread fail as if the device were out of
/// memory. For tests of the allocation-failure path: a call allocates on the thread that makes it, so
/// tests on other threads (each with its own handles) are not affected.
#[doc(hidden)]
pub fn inject_allocation_failures(count: usize) {
    FAILING_ALLOCATIONS.with(|failing| failing.set(count));
}

fn injected_failure() -> bool {
    FAILING_ALLOCATIONS.with(|failing| match failing.get() {
        0 => false,
        n => {
            failing.set(n - 1);
            true
        }
    })
}

/// A stream-ordered device allocation, freed on its stream when dropped — or, once marked
/// [`DeviceBuffer::resident`], freed the way `cudaFree` frees (after all work on the device).
pub struct DeviceBuffer {
    ptr: CUdeviceptr,
    bytes: usize,
    stream: Stream,
    device: Arc<GpuDevice>,
    resident: bool,
}

impl DeviceBuffer {
    /// `bytes` of device memory (at least 1 byte is allocated so the pointer is always valid).
    pub fn alloc(device: &Arc<GpuDevice>, bytes: usize, stream: Stream, what: &str) -> Result<Self> {
        device.bind()?;
        if injected_failure() {
            return Err(Error::alloc_failed(format!(
                "cannot allocate {bytes} bytes of device memory for {what} (injected failure)"
            )));
        }
        let ptr = unsafe { drv::malloc_async(stream.0, bytes.max(1)) }
            .map_err(|e| driver_error(&format!("allocating {bytes} bytes of device memory for {what}"))(e))?;
        Ok(DeviceBuffer { ptr, bytes, stream, device: device.clone(), resident: false })
    }

    /// A zero-filled allocation.
    pub fn zeroed(device: &Arc<GpuDevice>, bytes: usize, stream: Stream, what: &str) -> Result<Self> {
        let b = Self::alloc(device, bytes, stream, what)?;
        unsafe { drv::memset_d8_async(b.ptr, 0, bytes, stream.0) }.map_err(driver_error("clearing device memory"))?;
        Ok(b)
    }

    /// Copies a host slice into a new device allocation.
    pub fn from_host<T: Copy>(device: &Arc<GpuDevice>, data: &[T], stream: Stream, what: &str) -> Result<Self> {
        let b = Self::alloc(device, std::mem::size_of_val(data), stream, what)?;
        if !data.is_empty() {
            unsafe { drv::memcpy_htod_async(b.ptr, data, stream.0) }.map_err(driver_error("copying to the device"))?;
        }
        Ok(b)
    }

    /// Marks data that outlives the call that made it (an analysed matrix, a plan, partitions): it
    /// may be used on other streams later, and the stream it was made on may be gone by the time it
    /// is freed, so a stream-ordered free on that stream would be unsafe. A resident buffer is freed
    /// with `cuMemFree`, which waits for the device as `cudaFree` does.
    pub fn resident(mut self) -> Self {
        self.resident = true;
        self
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copies the first `out.len()` elements back to the host and waits for the stream.
    pub fn copy_to_host<T: Copy>(&self, out: &mut [T]) -> Result<()> {
        debug_assert!(std::mem::size_of_val(out) <= self.bytes.max(1));
        if !out.is_empty() {
            self.device.bind()?;
            unsafe { drv::memcpy_dtoh_async(out, self.ptr, self.stream.0) }
                .map_err(driver_error("copying to the host"))?;
        }
        self.device.synchronize(self.stream)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // A failure here means the context is already broken; the error has been reported by the
            // operation that broke it.
            let _ = if self.resident {
                unsafe { drv::free_sync(self.ptr) }
            } else {
                unsafe { drv::free_async(self.ptr, self.stream.0) }
            };
        }
    }
}

/// Checks that a device pointer belongs to the handle's device.
fn check_device(device: &GpuDevice, ordinal: usize, name: &str) -> Result<()> {
    if ordinal != device.ordinal {
        return Err(Error::invalid_pointer(format!(
            "argument {name} is memory of device {ordinal}, but the handle runs on device {}",
            device.ordinal
        )));
    }
    Ok(())
}

/// A read-only array on the device: the caller's device memory in place, or a staged host copy.
pub struct DeviceInput {
    ptr: CUdeviceptr,
    _staged: Option<DeviceBuffer>,
}

impl DeviceInput {
    /// # Safety
    /// `ptr` must be valid for reading `len` elements (host or device memory), or `len` must be 0.
    pub unsafe fn new<T: Copy>(
        device: &Arc<GpuDevice>,
        stream: Stream,
        ptr: *const T,
        len: usize,
        name: &str,
    ) -> Result<Self> {
        if len == 0 {
            return Ok(DeviceInput { ptr: 0, _staged: None });
        }
        match locate(ptr.cast()) {
            Location::Device(ordinal) => {
                check_device(device, ordinal, name)?;
                Ok(DeviceInput { ptr: ptr as CUdeviceptr, _staged: None })
            }
            Location::Host => {
                let host = unsafe { std::slice::from_raw_parts(ptr, len) };
                let staged = DeviceBuffer::from_host(device, host, stream, name)?;
                Ok(DeviceInput { ptr: staged.ptr(), _staged: Some(staged) })
            }
        }
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
}

/// A written array on the device: the caller's device memory in place, or a device copy of a host
/// array that [`DeviceOutput::finish`] copies back.
pub struct DeviceOutput<T> {
    ptr: CUdeviceptr,
    staged: Option<(DeviceBuffer, *mut T, usize)>,
}

impl<T: Copy> DeviceOutput<T> {
    /// `read_existing`: the kernel reads the old contents (β ≠ 0), so a host array is uploaded first.
    ///
    /// # Safety
    /// `ptr` must be valid for reading and writing `len` elements (host or device memory), or `len`
    /// must be 0, and must stay so until `finish` returns.
    pub unsafe fn new(
        device: &Arc<GpuDevice>,
        stream: Stream,
        ptr: *mut T,
        len: usize,
        name: &str,
        read_existing: bool,
    ) -> Result<Self> {
        if len == 0 {
            return Ok(DeviceOutput { ptr: 0, staged: None });
        }
        match locate(ptr as *const c_void) {
            Location::Device(ordinal) => {
                check_device(device, ordinal, name)?;
                Ok(DeviceOutput { ptr: ptr as CUdeviceptr, staged: None })
            }
            Location::Host => {
                let buffer = if read_existing {
                    DeviceBuffer::from_host(device, unsafe { std::slice::from_raw_parts(ptr, len) }, stream, name)?
                } else {
                    DeviceBuffer::alloc(device, len * std::mem::size_of::<T>(), stream, name)?
                };
                Ok(DeviceOutput { ptr: buffer.ptr(), staged: Some((buffer, ptr, len)) })
            }
        }
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Whether results go back to host memory (the call must then wait for the stream).
    pub fn is_staged(&self) -> bool {
        self.staged.is_some()
    }

    /// Copies staged results back to the caller's host array and waits; for device memory, returns
    /// at once (the work stays queued on the stream).
    pub fn finish(self) -> Result<()> {
        if let Some((buffer, host, len)) = self.staged {
            let out = unsafe { std::slice::from_raw_parts_mut(host, len) };
            buffer.copy_to_host(out)?;
        }
        Ok(())
    }
}

//! Device memory for one call: stream-ordered allocations freed on the same stream, the caller's
//! pointers classified as host or device memory, and host arrays staged through the device (as
//! cuBLAS-XT does) so that plain host arrays work unchanged. Also what a handle keeps between calls
//! without synchronising: workspaces ordered by an event, and host words the device writes.

use super::{Event, GpuDevice, Stream, TrackedEvent, driver_error};
use crate::error::{Error, Result};
use cudarc::driver::result as drv;
use cudarc::driver::sys::{self, CUdeviceptr, cudaError_enum};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};

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

/// Whether kernels on `device` may write the memory at `ptr` (of another device): peer access to
/// that device's context and memory pool covers `cudaMalloc` and `cudaMallocAsync` memory of its
/// default pool, not other pools or memory mapped without access for `device`. Asked with
/// `cuPointerGetAttributes`, which answers without raising an API error.
pub fn writable_from(ptr: CUdeviceptr, device: &GpuDevice) -> Result<bool> {
    device.bind()?;
    let mut flags: u32 = sys::CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS::CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE as u32;
    let mut attributes = [sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_ACCESS_FLAGS];
    let mut values: [*mut c_void; 1] = [(&mut flags as *mut u32).cast()];
    let r = unsafe { sys::cuPointerGetAttributes(1, attributes.as_mut_ptr(), values.as_mut_ptr(), ptr) };
    Ok(r == cudaError_enum::CUDA_SUCCESS
        && flags == sys::CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS::CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE as u32)
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
        Self::from_host_parts(device, &[data], stream, what)
    }

    /// Copies host slices one after another into a new device allocation: at least
    /// [`STAGED_COPY_MIN_BYTES`] in all through the device's pinned staging buffers
    /// ([`PinnedStaging`]) where no other copy is using them, else straight from the slices. Either
    /// way the slices have been read when this returns.
    pub fn from_host_parts<T: Copy>(
        device: &Arc<GpuDevice>,
        parts: &[&[T]],
        stream: Stream,
        what: &str,
    ) -> Result<Self> {
        let bytes = parts.iter().map(|p| std::mem::size_of_val(*p)).sum();
        let b = Self::alloc(device, bytes, stream, what)?;
        // SAFETY: plain data (`Copy`) viewed as the bytes it occupies.
        let as_bytes =
            |p: &&[T]| unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u8>(), std::mem::size_of_val(*p)) };
        let sources: Vec<&[u8]> = parts.iter().map(as_bytes).filter(|p| !p.is_empty()).collect();
        if let Some(mut staging) = PinnedStaging::for_copy(device, bytes) {
            staging.upload(b.ptr, &sources, stream)?;
            return Ok(b);
        }
        let mut at = b.ptr;
        for part in sources {
            unsafe { drv::memcpy_htod_async(at, part, stream.0) }.map_err(driver_error("copying to the device"))?;
            at += part.len() as u64;
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

    /// Frees the buffer stream-ordered on `stream` (of its device), after the work queued there so
    /// far: for a buffer kept between calls whose every use is ordered before that point.
    pub fn free_on(mut self, stream: Stream) {
        self.stream = stream;
        self.resident = false;
    }

    /// Copies the first `out.len()` elements back to the host and waits for the stream: at least
    /// [`STAGED_COPY_MIN_BYTES`] through the device's pinned staging buffers ([`PinnedStaging`])
    /// where no other copy is using them, else straight into `out`.
    pub fn copy_to_host<T: Copy>(&self, out: &mut [T]) -> Result<()> {
        let bytes = std::mem::size_of_val(out);
        debug_assert!(bytes <= self.bytes.max(1));
        if bytes > 0 {
            self.device.bind()?;
            match PinnedStaging::for_copy(&self.device, bytes) {
                Some(mut staging) => {
                    // SAFETY: the bytes of `out`, which receives the bytes of device elements of its type.
                    let to = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), bytes) };
                    staging.download(to, self.ptr, self.stream)?;
                }
                None => unsafe { drv::memcpy_dtoh_async(out, self.ptr, self.stream.0) }
                    .map_err(driver_error("copying to the host"))?,
            }
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

/// Copies between host and device of at least this many bytes go through pinned staging buffers.
pub const STAGED_COPY_MIN_BYTES: usize = 8 << 20;

/// Bytes of each staging buffer, and how many a device has: the host fills or empties one while the
/// device reads or writes the other.
const STAGING_SLOT_BYTES: usize = 32 << 20;
const STAGING_SLOTS: usize = 2;

/// Bytes one host thread copies into a staging buffer at a time.
const STAGING_TASK_BYTES: usize = 1 << 20;

/// Copies `from` into `to` (as long) on the thread pool, [`STAGING_TASK_BYTES`] a task: filling or
/// emptying a staging buffer.
fn copy_in_tasks(to: &mut [u8], from: &[u8]) {
    use rayon::prelude::*;
    to.par_chunks_mut(STAGING_TASK_BYTES)
        .zip(from.par_chunks(STAGING_TASK_BYTES))
        .for_each(|(to, from)| to.copy_from_slice(from));
}

/// Pinned host buffers that large copies between host and device pass through. The driver copies
/// from pageable memory at a fraction of the speed it copies from pinned memory (an H200 machine,
/// 1 GiB: 6.4 against 55 GB/s to the device, 13.9 against 54 back;
/// docs/results/h200-2026-11-29-host-device-copy.txt), and a matrix of 100 M nonzeros is over a
/// gigabyte to upload; the host threads copy data into (or out of) one buffer while the device
/// reads (or writes) the other, at about the host's copy bandwidth. Made on a device's first large
/// copy, kept for the life of the process (as the device is); 64 MiB of pinned memory a device.
pub struct PinnedStaging {
    slots: Vec<StagingSlot>,
}

struct StagingSlot {
    host: *mut u8,
    /// Recorded after the device's last copy out of or into the buffer: the host touches the buffer
    /// once this has completed.
    device_done: Event,
}

// SAFETY: the pinned buffers are process-wide allocations used under the staging's mutex only.
unsafe impl Send for PinnedStaging {}

impl Drop for StagingSlot {
    /// Only where making the staging failed part of the way: a made staging lives as long as the
    /// process.
    fn drop(&mut self) {
        if self.device_done.device().bind().is_ok() {
            let _ = unsafe { drv::free_host(self.host.cast()) };
        }
    }
}

impl PinnedStaging {
    /// The staging of `device`, made on first use; None where pinned memory cannot be had (copies
    /// then go to or from the pageable memory directly).
    fn of(device: &Arc<GpuDevice>) -> Option<&'static Mutex<PinnedStaging>> {
        type ByOrdinal = HashMap<usize, Option<&'static Mutex<PinnedStaging>>>;
        static STAGINGS: OnceLock<Mutex<ByOrdinal>> = OnceLock::new();
        let mut stagings =
            STAGINGS.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *stagings.entry(device.ordinal).or_insert_with(|| {
            PinnedStaging::new(device).ok().map(|staging| &*Box::leak(Box::new(Mutex::new(staging))))
        })
    }

    /// The staging of `device` for a copy of `bytes`: None below [`STAGED_COPY_MIN_BYTES`], where
    /// pinned memory cannot be had, or while another copy holds it.
    fn for_copy(device: &Arc<GpuDevice>, bytes: usize) -> Option<MutexGuard<'static, PinnedStaging>> {
        match bytes >= STAGED_COPY_MIN_BYTES {
            true => PinnedStaging::of(device).and_then(PinnedStaging::try_take),
            false => None,
        }
    }

    /// The staging, unless another copy holds it: that one may be this thread's, waiting for the
    /// host threads that copy its data, and a thread blocked here could be one of them.
    fn try_take(staging: &'static Mutex<PinnedStaging>) -> Option<MutexGuard<'static, PinnedStaging>> {
        match staging.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        device.bind()?;
        let mut slots = Vec::with_capacity(STAGING_SLOTS);
        for _ in 0..STAGING_SLOTS {
            let device_done = Event::new(device)?;
            let host = unsafe { drv::malloc_host(STAGING_SLOT_BYTES, sys::CU_MEMHOSTALLOC_PORTABLE) }
                .map_err(driver_error("allocating pinned host memory"))?;
            slots.push(StagingSlot { host: host.cast(), device_done });
        }
        Ok(PinnedStaging { slots })
    }

    /// Copies `sources` one after another to `dst` on `stream`, through the buffers in turn; returns
    /// once every source has been read.
    fn upload(&mut self, mut dst: CUdeviceptr, sources: &[&[u8]], stream: Stream) -> Result<()> {
        let mut next = 0;
        for piece in sources.iter().flat_map(|source| source.chunks(STAGING_SLOT_BYTES)) {
            let slot = &self.slots[next];
            next = (next + 1) % self.slots.len();
            slot.device_done.synchronize()?;
            // SAFETY: the buffer holds STAGING_SLOT_BYTES, no copy reads it any more, and only this
            // thread (holding the mutex) writes it.
            let host = unsafe { std::slice::from_raw_parts_mut(slot.host, piece.len()) };
            copy_in_tasks(host, piece);
            unsafe { drv::memcpy_htod_async(dst, &*host, stream.0) }.map_err(driver_error("copying to the device"))?;
            slot.device_done.record(stream)?;
            dst += piece.len() as u64;
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes from `src` into `dst`, after the work queued on `stream` so far,
    /// through the buffers in turn: the device fills one while the host empties the other.
    fn download(&mut self, dst: &mut [u8], src: CUdeviceptr, stream: Stream) -> Result<()> {
        let mut pieces: Vec<&mut [u8]> = dst.chunks_mut(STAGING_SLOT_BYTES).collect();
        let lengths: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
        let slots = self.slots.len();
        // Queues the copy of piece `i` into its buffer, once the host has emptied that buffer.
        let queue = |i: usize| -> Result<()> {
            let slot = &self.slots[i % slots];
            slot.device_done.synchronize()?;
            // SAFETY: the buffer holds STAGING_SLOT_BYTES and nothing else uses it now.
            let host = unsafe { std::slice::from_raw_parts_mut(slot.host, lengths[i]) };
            let from = src + (i * STAGING_SLOT_BYTES) as u64;
            unsafe { drv::memcpy_dtoh_async(host, from, stream.0) }.map_err(driver_error("copying to the host"))?;
            slot.device_done.record(stream)
        };
        if !pieces.is_empty() {
            queue(0)?;
        }
        for (i, piece) in pieces.iter_mut().enumerate() {
            if i + 1 < lengths.len() {
                queue(i + 1)?;
            }
            let slot = &self.slots[i % slots];
            slot.device_done.synchronize()?;
            // SAFETY: the device's copy into the buffer has completed; only this thread reads it.
            let host = unsafe { std::slice::from_raw_parts(slot.host, piece.len()) };
            copy_in_tasks(piece, host);
        }
        Ok(())
    }
}

/// Device memory a handle keeps between calls (allocating it per call costs more than a small call
/// when the memory pool has returned its memory at the last synchronisation), with the event
/// recorded after the last call that used it: a call on another stream waits for that event before
/// it writes the memory again, so the calls using a workspace run one after another whatever their
/// streams.
pub struct Workspace {
    buffer: Option<DeviceBuffer>,
    released: TrackedEvent,
}

impl Workspace {
    pub fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        Ok(Workspace { buffer: None, released: TrackedEvent::new(device)? })
    }

    /// At least `bytes` of the workspace, for work queued on `stream` (of the workspace's device,
    /// current on this thread) after the last user's. A larger allocation replaces a smaller one
    /// without waiting: the smaller is freed on `stream` once its last user is done.
    pub fn take(&mut self, device: &Arc<GpuDevice>, stream: Stream, bytes: usize, what: &str) -> Result<CUdeviceptr> {
        self.released.wait_on(stream)?;
        match &self.buffer {
            Some(held) if held.bytes() >= bytes => {}
            _ => {
                if let Some(smaller) = self.buffer.take() {
                    smaller.free_on(stream);
                }
                self.buffer = Some(DeviceBuffer::alloc(device, bytes.max(1), stream, what)?.resident());
            }
        }
        Ok(self.buffer.as_ref().map_or(0, DeviceBuffer::ptr))
    }

    /// Marks the work queued on `stream` so far as the workspace's last use. A call that took the
    /// workspace releases it whether or not its work was all queued.
    pub fn release(&mut self, stream: Stream) -> Result<()> {
        self.released.record(stream)
    }

    /// Whether the last user's work has finished (without waiting).
    pub fn is_idle(&self) -> Result<bool> {
        self.released.is_complete()
    }

    /// Waits on the host for the last user's work.
    pub fn wait_idle(&self) -> Result<()> {
        self.released.synchronize()
    }
}

/// Words of pinned host memory the device writes directly (mapped into its address space): a kernel
/// leaves a result there without a copy or an event of its own, and the host reads it once an event
/// after that kernel has completed. Zeroed when made.
pub struct MappedWords {
    host: *mut u64,
    device_ptr: CUdeviceptr,
    len: usize,
    device: Arc<GpuDevice>,
}

// SAFETY: the pinned memory belongs to the device's context, usable from any thread; the handle
// owning it is used by one thread at a time.
unsafe impl Send for MappedWords {}

impl MappedWords {
    pub fn new(device: &Arc<GpuDevice>, len: usize) -> Result<Self> {
        device.bind()?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        let host = unsafe { drv::malloc_host(len.max(1) * 8, flags) }
            .map_err(driver_error("allocating pinned host memory"))? as *mut u64;
        let mut words = MappedWords { host, device_ptr: 0, len, device: device.clone() };
        // SAFETY: `host` is a fresh allocation of `len` words (at least one).
        unsafe { std::ptr::write_bytes(host, 0, len.max(1)) };
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut words.device_ptr, host.cast(), 0) }
            .result()
            .map_err(driver_error("mapping pinned host memory into the device"))?;
        Ok(words)
    }

    /// The words' address for kernels of the device.
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.device_ptr
    }

    /// Word `i` as the device last wrote it. The caller makes sure no kernel writing the words runs
    /// (an event after the last one has completed).
    pub fn read(&self, i: usize) -> u64 {
        assert!(i < self.len, "word {i} of {}", self.len);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: in bounds; volatile because the device writes the memory behind the compiler's back.
        unsafe { self.host.add(i).read_volatile() }
    }

    /// Sets word `i` for kernels queued after this (no kernel writing the words may be running).
    pub fn write(&self, i: usize, value: u64) {
        assert!(i < self.len, "word {i} of {}", self.len);
        // SAFETY: in bounds; volatile so that the store is not deferred past a later launch.
        unsafe { self.host.add(i).write_volatile(value) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    }
}

impl Drop for MappedWords {
    /// The owner waits for every kernel that may write the words before dropping them.
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            let _ = unsafe { drv::free_host(self.host.cast()) };
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

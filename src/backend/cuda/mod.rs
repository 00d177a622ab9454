//! The CUDA backend's runtime: whether CUDA is usable here, one context per device, kernels compiled
//! by NVRTC for the device's own architecture (cached on disk), the caller's stream, device memory and
//! staging of host arrays.
//!
//! Everything is loaded dynamically (cudarc's `dynamic-loading`): the crate builds and the CPU backend
//! runs on machines without any CUDA library. cudarc panics when a library is missing, so presence is
//! checked here first, once, and only then is cudarc called.

pub mod kernels;
pub mod memory;
pub mod msrep;
pub mod nvrtc;
pub mod row_order;
pub mod sddmm;
pub mod smat;
pub mod spamm;
pub mod timeline;
pub mod util;

use crate::error::{Error, Result, Status};
use cudarc::driver::sys::{self, CUdevice_attribute, CUevent, CUstream, cudaError_enum};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, DriverError, result as drv};
use std::collections::{HashMap, hash_map::Entry};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// Whether `lib` (cudarc's name, e.g. "cuda", "nvrtc") can be opened under any of the names cudarc
/// will try. Opened and closed again with dlopen, so nothing is kept loaded by the probe itself.
pub fn library_present(lib: &str) -> bool {
    cudarc::get_lib_name_candidates(lib).iter().any(|name| {
        let Ok(cname) = std::ffi::CString::new(name.as_str()) else { return false };
        let handle = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return false;
        }
        unsafe { libc::dlclose(handle) };
        true
    })
}

/// `Ok(device count)` when libcuda, libnvrtc and at least one device are usable; otherwise why not.
/// Computed once per process.
pub fn availability() -> &'static std::result::Result<usize, String> {
    static AVAILABILITY: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    AVAILABILITY.get_or_init(|| {
        if !library_present("cuda") {
            return Err("libcuda (the NVIDIA driver library) is not installed".into());
        }
        if !library_present("nvrtc") {
            return Err("libnvrtc (the CUDA runtime compiler) is not installed or not on LD_LIBRARY_PATH".into());
        }
        drv::init().map_err(|e| format!("cuInit failed: {}", describe(&e)))?;
        let count = drv::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {}", describe(&e)))?;
        if count < 1 {
            return Err("no CUDA device is visible".into());
        }
        Ok(count as usize)
    })
}

/// The number of usable devices, or `BackendUnavailable` with the reason.
pub fn device_count() -> Result<usize> {
    availability().clone().map_err(|why| Error::backend_unavailable(format!("CUDA is unavailable: {why}")))
}

fn describe(e: &DriverError) -> String {
    match e.error_string() {
        Ok(s) => format!("{:?} ({})", e.0, s.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

/// Maps a driver error: out of memory → `AllocationFailed`, anything else → `ExecutionFailed`, both
/// with the CUDA error in the message.
pub fn driver_error(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| {
        let status = match e.0 {
            cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => Status::AllocationFailed,
            _ => Status::ExecutionFailed,
        };
        Error::new(status, format!("{what}: CUDA error {}", describe(&e)))
    }
}

/// One GPU: its primary context, properties, and the kernels loaded into it so far.
pub struct GpuDevice {
    pub ordinal: usize,
    pub ctx: Arc<CudaContext>,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    pub multiprocessors: usize,
    pub max_shared_memory_per_block_optin: usize,
    /// By kernel file: its module and the functions looked up in it so far (a lookup costs a driver
    /// call, ~0.3 µs, on every launch otherwise).
    modules: Mutex<HashMap<&'static str, LoadedModule>>,
    /// Devices `enable_peer_access` has been asked for, with whether this one's context may access
    /// their memory directly.
    peers: Mutex<Vec<(usize, bool)>>,
}

struct LoadedModule {
    module: Arc<CudaModule>,
    functions: HashMap<String, CudaFunction>,
}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuDevice({}, sm_{}{})", self.ordinal, self.capability.0, self.capability.1)
    }
}

/// The process-wide device `ordinal`, created on first use.
pub fn device(ordinal: usize) -> Result<Arc<GpuDevice>> {
    static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<GpuDevice>>>> = OnceLock::new();
    let count = device_count()?;
    if ordinal >= count {
        return Err(Error::invalid_value(format!(
            "device {ordinal} does not exist ({count} CUDA devices are visible)"
        )));
    }
    let mut devices = DEVICES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = devices.get(&ordinal) {
        return Ok(d.clone());
    }
    let ctx = CudaContext::new(ordinal).map_err(driver_error("creating the CUDA context"))?;
    // Every call orders its own work on one stream; cudarc's per-allocation event tracking would only
    // add synchronisation we do not need.
    unsafe { ctx.disable_event_tracking() };
    let attr = |a| ctx.attribute(a).map_err(driver_error("reading a device attribute"));
    let device = Arc::new(GpuDevice {
        ordinal,
        capability: ctx.compute_capability().map_err(driver_error("reading the compute capability"))?,
        multiprocessors: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as usize,
        max_shared_memory_per_block_optin: attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )? as usize,
        ctx,
        modules: Mutex::new(HashMap::new()),
        peers: Mutex::new(Vec::new()),
    });
    devices.insert(ordinal, device.clone());
    Ok(device)
}

impl GpuDevice {
    /// Makes this device's context current on the calling thread (every entry point does this first).
    pub fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(driver_error("binding the CUDA context"))
    }

    /// The NVRTC target for a kernel on this device: `sm_XY`, or `sm_90a` where the kernel uses
    /// Hopper-only instructions and the device is a Hopper.
    pub fn arch_for(&self, kernel: &kernels::KernelSource) -> String {
        let (major, minor) = self.capability;
        if kernel.uses_sm90a && (major, minor) == (9, 0) { "sm_90a".into() } else { format!("sm_{major}{minor}") }
    }

    /// `function` of `kernel`, compiling (or reading from the disk cache) and loading the module on
    /// first use in this process.
    pub fn function(&self, kernel: &'static kernels::KernelSource, function: &str) -> Result<CudaFunction> {
        self.function_prepared(kernel, function, |_, _| Ok(()))
    }

    /// [`Self::function`], with `prepare` run on the function once, when it is first looked up on
    /// this device (to set attributes that hold for every launch, such as [`Self::prefer_l1_cache`]).
    pub fn function_prepared(
        &self,
        kernel: &'static kernels::KernelSource,
        function: &str,
        prepare: impl FnOnce(&Self, &CudaFunction) -> Result<()>,
    ) -> Result<CudaFunction> {
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let loaded = match modules.entry(kernel.name) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let arch = self.arch_for(kernel);
                let image = nvrtc::compile_cached(kernel, &arch)?;
                self.bind()?;
                let module = self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image)).map_err(|e| {
                    let mut err = driver_error(&format!("loading kernels/{}.cu for {arch}", kernel.name))(e);
                    err.message.push_str(&format!(
                        " (NVRTC {}, driver supports CUDA {}: code from an NVRTC newer than the driver may not load)",
                        nvrtc::version_string(),
                        driver_version_string()
                    ));
                    err
                })?;
                e.insert(LoadedModule { module, functions: HashMap::new() })
            }
        };
        if let Some(f) = loaded.functions.get(function) {
            return Ok(f.clone());
        }
        let f = loaded
            .module
            .load_function(function)
            .map_err(driver_error(&format!("finding {function} in kernels/{}.cu", kernel.name)))?;
        prepare(self, &f)?;
        loaded.functions.insert(function.to_string(), f.clone());
        Ok(f)
    }

    /// Asks the driver to give shared memory no more of each SM's on-chip memory than the blocks of
    /// `f` that can be resident at once need (blocks of `block` threads, no dynamic shared memory),
    /// and the rest to the L1 cache. Left to itself the driver may take more: ncu showed an MSREP
    /// kernel whose eight resident blocks need 42 KiB run with 100 KiB of shared memory, its gathered
    /// loads of x hitting L1 34 % of the time instead of 46 %. The driver rounds the share up to a
    /// size the SM supports.
    pub fn prefer_l1_cache(&self, f: &CudaFunction, block: u32) -> Result<()> {
        let reading = driver_error("reading a kernel's occupancy");
        let blocks = f.occupancy_max_active_blocks_per_multiprocessor(block, 0, None).map_err(&reading)? as u64;
        let static_bytes = f.shared_size_bytes().map_err(&reading)? as u64;
        let attr = |a| self.ctx.attribute(a).map_err(driver_error("reading a device attribute"));
        let reserved = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)? as u64;
        let per_sm = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? as u64;
        let percent = (blocks * (static_bytes + reserved) * 100).div_ceil(per_sm.max(1)).min(100);
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            percent as i32,
        )
        .map_err(driver_error("setting the shared-memory carveout"))
    }

    /// Raises a function's dynamic shared-memory limit (needed above 48 KiB).
    pub fn allow_shared_memory(&self, f: &CudaFunction, bytes: usize) -> Result<()> {
        if bytes > self.max_shared_memory_per_block_optin {
            return Err(Error::not_supported(format!(
                "a kernel needs {bytes} bytes of shared memory; device {} allows {}",
                self.ordinal, self.max_shared_memory_per_block_optin
            )));
        }
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
        .map_err(driver_error("setting the shared-memory limit"))
    }

    /// Lets this device's context reach `peer`'s memory directly, and `peer` this device's memory
    /// pool (copies between them then go over NVLink / PCIe peer to peer instead of through host
    /// memory). A no-op for the device itself or a pair the hardware cannot connect (copies still
    /// work, staged by the driver). Returns whether this device's kernels can reach `peer`'s memory.
    pub fn enable_peer_access(&self, peer: &GpuDevice) -> Result<bool> {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if peer.ordinal == self.ordinal {
            return Ok(true);
        }
        if let Some(&(_, reachable)) = peers.iter().find(|(ordinal, _)| *ordinal == peer.ordinal) {
            return Ok(reachable);
        }
        self.bind()?;
        let mut can = 0;
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.ordinal as i32, peer.ordinal as i32) }
            .result()
            .map_err(driver_error("querying peer access"))?;
        if can != 0 {
            match unsafe { sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) } {
                cudaError_enum::CUDA_SUCCESS | cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => return Err(driver_error("enabling peer access")(DriverError(e))),
            }
            // Stream-ordered allocations (every temporary, and callers' cudaMallocAsync memory) live in
            // the device's memory pool, which context peer access does not open: without this, copies
            // between pools go through host memory (a 2-GPU SpAMM product moved its operands at roughly
            // 35 GB/s, judging by its time, on NVLink-connected H200s).
            let mut pool = std::ptr::null_mut();
            let access = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: peer.ordinal as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            unsafe {
                sys::cuDeviceGetDefaultMemPool(&mut pool, self.ordinal as i32)
                    .result()
                    .map_err(driver_error("finding the device's memory pool"))?;
                sys::cuMemPoolSetAccess(pool, &access, 1)
                    .result()
                    .map_err(driver_error("opening the memory pool to a peer device"))?;
            }
        }
        peers.push((peer.ordinal, can != 0));
        Ok(can != 0)
    }

    /// A new non-blocking stream of this device.
    pub fn new_stream(self: &Arc<Self>) -> Result<Arc<cudarc::driver::CudaStream>> {
        self.bind()?;
        self.ctx.new_stream().map_err(driver_error("creating a CUDA stream"))
    }

    /// Waits for the stream and turns a failure of anything queued on it into `ExecutionFailed`.
    pub fn synchronize(&self, stream: Stream) -> Result<()> {
        self.bind()?;
        unsafe { drv::stream::synchronize(stream.0) }.map_err(driver_error("executing on the GPU"))
    }
}

/// The driver's CUDA version, e.g. "13.0".
pub fn driver_version_string() -> String {
    let mut v = 0;
    let ok = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) } == cudaError_enum::CUDA_SUCCESS;
    if ok { format!("{}.{}", v / 1000, (v % 1000) / 10) } else { "unknown".into() }
}

/// A CUDA stream of the caller's (or the legacy default stream, NULL), passed by value. Work of one
/// call is ordered on it; the library never destroys it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream(pub CUstream);

// SAFETY: a CUstream is an opaque handle the driver lets any thread use.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    /// The legacy default stream.
    pub const DEFAULT: Stream = Stream(std::ptr::null_mut());
    /// The calling thread's default stream (`CU_STREAM_PER_THREAD`, 0x2 in cuda.h): one handle, a
    /// stream per thread.
    pub const PER_THREAD: Stream = Stream(std::ptr::without_provenance_mut(0x2));

    /// Whether work queued on this stream must wait for an event last recorded on `recorded_on`
    /// (None: never recorded) to come after the work before that event: not on the same stream,
    /// which runs its work in order (a driver call saved), but the per-thread default stream is
    /// another stream on every thread.
    pub fn waits_for_event_on(self, recorded_on: Option<Stream>) -> bool {
        recorded_on.is_some_and(|s| s != self || s == Stream::PER_THREAD)
    }
}

/// Launch geometry.
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

/// Launches `f` on `stream` with the given argument pointers (each points at one kernel argument).
///
/// # Safety
/// The arguments must match the kernel's parameter list in number, order and type, and every device
/// pointer among them must be valid for what the kernel accesses.
pub unsafe fn launch(f: &CudaFunction, cfg: Launch, stream: Stream, args: &mut [*mut c_void]) -> Result<()> {
    if cfg.grid.0 == 0 || cfg.grid.1 == 0 || cfg.grid.2 == 0 {
        return Ok(());
    }
    unsafe { drv::launch_kernel(f.cu_function(), cfg.grid, cfg.block, cfg.shared_bytes, stream.0, args) }
        .map_err(driver_error("launching a kernel"))
}

/// Builds the argument-pointer array of [`launch`] from kernel arguments held in local variables.
#[macro_export]
macro_rules! kernel_args {
    ($($arg:expr),* $(,)?) => {
        &mut [$(($arg) as *const _ as *mut ::std::ffi::c_void),*]
    };
}

/// A CUDA event of one device's context (timing disabled unless made by [`Event::timed`]).
pub struct Event {
    raw: CUevent,
    device: Arc<GpuDevice>,
}

// SAFETY: a CUevent is an opaque handle the driver lets any thread use.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    pub fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        device.bind()?;
        let raw = drv::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(driver_error("creating a CUDA event"))?;
        Ok(Event { raw, device: device.clone() })
    }

    /// An event that keeps the time it completed at, for [`Event::elapsed_ms`].
    pub fn timed(device: &Arc<GpuDevice>) -> Result<Self> {
        device.bind()?;
        let raw =
            drv::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver_error("creating a CUDA event"))?;
        Ok(Event { raw, device: device.clone() })
    }

    /// Milliseconds from this event's completion to `later`'s (both timed, of one device, completed).
    pub fn elapsed_ms(&self, later: &Event) -> Result<f32> {
        unsafe { drv::event::elapsed(self.raw, later.raw) }.map_err(driver_error("timing CUDA events"))
    }

    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.device
    }

    /// Records on `stream`, which must belong to this event's device.
    pub fn record(&self, stream: Stream) -> Result<()> {
        self.device.bind()?;
        unsafe { drv::event::record(self.raw, stream.0) }.map_err(driver_error("recording a CUDA event"))
    }

    /// Makes `stream` (of any device; its context must be current) wait for the last record.
    pub fn wait_on(&self, stream: Stream) -> Result<()> {
        unsafe { drv::stream::wait_event(stream.0, self.raw, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(driver_error("ordering streams with an event"))
    }

    /// Whether the work before the last record has finished (an event never recorded has); a failure
    /// of that work is an error.
    pub fn is_complete(&self) -> Result<bool> {
        self.device.bind()?;
        match unsafe { drv::event::query(self.raw) } {
            Ok(()) => Ok(true),
            Err(DriverError(cudaError_enum::CUDA_ERROR_NOT_READY)) => Ok(false),
            Err(e) => Err(driver_error("executing on the GPU")(e)),
        }
    }

    /// Waits on the host for the last record.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        unsafe { drv::event::synchronize(self.raw) }.map_err(driver_error("executing on the GPU"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            let _ = unsafe { drv::event::destroy(self.raw) };
        }
    }
}

/// An event that remembers the stream it was last recorded on, so that work queued on that same
/// stream, which runs after the recorded work anyway, does not wait for it (a driver call saved;
/// [`Stream::waits_for_event_on`]). Every stream it is recorded or waited on must be of the event's
/// device: the legacy default stream of two contexts is two streams under one handle.
pub struct TrackedEvent {
    event: Event,
    recorded_on: Option<Stream>,
}

impl TrackedEvent {
    pub fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        Ok(TrackedEvent { event: Event::new(device)?, recorded_on: None })
    }

    /// Records on `stream`.
    pub fn record(&mut self, stream: Stream) -> Result<()> {
        self.event.record(stream)?;
        self.recorded_on = Some(stream);
        Ok(())
    }

    /// Makes `stream` wait for the last record, where it must: never when nothing was recorded or
    /// the last record was on `stream` itself.
    pub fn wait_on(&self, stream: Stream) -> Result<()> {
        if stream.waits_for_event_on(self.recorded_on) { self.event.wait_on(stream) } else { Ok(()) }
    }

    /// Whether the event has been recorded.
    pub fn is_recorded(&self) -> bool {
        self.recorded_on.is_some()
    }

    /// Whether the work before the last record has finished ([`Event::is_complete`]).
    pub fn is_complete(&self) -> Result<bool> {
        self.event.is_complete()
    }

    /// Waits on the host for the last record.
    pub fn synchronize(&self) -> Result<()> {
        self.event.synchronize()
    }
}

/// Copies a matrix of `height` columns of `width_bytes` each (leading dimensions `*_pitch` in bytes)
/// from `src` on `src_gpu` to `dst` on `dst_gpu` (the same device or another), queued on `stream`,
/// a stream of the current context.
///
/// # Safety
/// Both ranges must be valid device memory of their devices for the whole copy.
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_matrix_async(
    (dst, dst_pitch, dst_gpu): (sys::CUdeviceptr, usize, &GpuDevice),
    (src, src_pitch, src_gpu): (sys::CUdeviceptr, usize, &GpuDevice),
    width_bytes: usize,
    height: usize,
    stream: Stream,
) -> Result<()> {
    if width_bytes == 0 || height == 0 {
        return Ok(());
    }
    let copy = sys::CUDA_MEMCPY3D_PEER {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcContext: src_gpu.ctx.cu_ctx(),
        srcPitch: src_pitch,
        srcHeight: height,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstContext: dst_gpu.ctx.cu_ctx(),
        dstPitch: dst_pitch,
        dstHeight: height,
        WidthInBytes: width_bytes,
        Height: height,
        Depth: 1,
    };
    unsafe { sys::cuMemcpy3DPeerAsync(&copy, stream.0) }.result().map_err(driver_error("copying between devices"))
}

/// The CUDA executor of one handle: its placement (the first device runs single-GPU work; the
/// caller's stream) and what the families keep on the device between calls.
pub struct CudaExecutor {
    placement: crate::executor::Placement,
    test_hooks: crate::executor::TestHooks,
    spamm: spamm::SpammState,
    /// SDDMM calls without a plan on the device, made at the first.
    sddmm: Option<sddmm::Unplanned>,
}

impl std::fmt::Debug for CudaExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaExecutor")
            .field("placement", &self.placement)
            .field("test_hooks", &self.test_hooks)
            .finish()
    }
}

impl CudaExecutor {
    /// An executor on `placement`, whose devices must all exist.
    pub fn new(placement: crate::executor::Placement, test_hooks: crate::executor::TestHooks) -> Result<Self> {
        check_devices(&placement.devices)?;
        Ok(CudaExecutor { placement, test_hooks, spamm: Default::default(), sddmm: None })
    }

    /// The device single-GPU work runs on.
    fn lead(&self) -> Result<Arc<GpuDevice>> {
        device(self.placement.devices[0] as usize)
    }

    /// Every device of the placement, the lead first.
    fn devices(&self) -> Result<Vec<Arc<GpuDevice>>> {
        self.placement.devices.iter().map(|&d| device(d as usize)).collect()
    }

    /// The caller's stream.
    fn stream(&self) -> Stream {
        Stream(self.placement.stream as CUstream)
    }
}

impl crate::executor::Executor for CudaExecutor {
    fn kind(&self) -> crate::types::BackendKind {
        crate::types::BackendKind::Cuda
    }

    fn placement(&self) -> &crate::executor::Placement {
        &self.placement
    }

    fn set_placement(&mut self, placement: crate::executor::Placement) -> Result<()> {
        check_devices(&placement.devices)?;
        self.placement = placement;
        Ok(())
    }

    fn test_hooks(&self) -> &crate::executor::TestHooks {
        &self.test_hooks
    }

    fn test_hooks_mut(&mut self) -> &mut crate::executor::TestHooks {
        &mut self.test_hooks
    }
}

/// Every ordinal must name a visible CUDA device.
fn check_devices(devices: &[i32]) -> Result<()> {
    let count = device_count()?;
    match devices.iter().position(|&d| d as usize >= count) {
        Some(i) => Err(Error::invalid_value(format!(
            "devices[{i}] = {} does not exist ({count} CUDA devices are visible)",
            devices[i]
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::Stream;

    #[test]
    fn a_stream_waits_for_an_event_only_from_another_stream() {
        let stream = |v: usize| Stream(std::ptr::without_provenance_mut(v));
        assert!(!stream(0x1000).waits_for_event_on(None), "never recorded");
        assert!(!stream(0x1000).waits_for_event_on(Some(stream(0x1000))), "the same stream");
        assert!(!Stream::DEFAULT.waits_for_event_on(Some(Stream::DEFAULT)), "the legacy default stream");
        assert!(stream(0x2000).waits_for_event_on(Some(stream(0x1000))), "another stream");
        assert!(stream(0x2000).waits_for_event_on(Some(Stream::DEFAULT)), "after the default stream");
        assert!(Stream::PER_THREAD.waits_for_event_on(Some(Stream::PER_THREAD)), "per-thread: maybe another");
    }
}

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
pub mod sddmm;
pub mod smat;
pub mod spamm;
pub mod util;

use crate::error::{Error, Result, Status};
use cudarc::driver::sys::{CUdevice_attribute, CUstream, cudaError_enum};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, DriverError, result as drv};
use std::collections::HashMap;
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
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
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
        let module = {
            let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
            match modules.get(kernel.name) {
                Some(m) => m.clone(),
                None => {
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
                    modules.insert(kernel.name, module.clone());
                    module
                }
            }
        };
        module
            .load_function(function)
            .map_err(driver_error(&format!("finding {function} in kernels/{}.cu", kernel.name)))
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

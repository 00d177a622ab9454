//! The GPU side of the harness: one device, one stream every measured call (ours and the vendor's)
//! is queued on, device copies of host arrays, read-back, and timing with CUDA events. All of it
//! through cudarc directly: the library is reached only through its C API.

use cudarc::driver::result::{self as drv, event, memset_d8_async, stream as drv_stream};
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUevent_flags};
use cudarc::driver::{CudaContext, CudaStream, DriverError};
use rayon::prelude::*;
use sparsegpu::scalar::Element;
use std::sync::Arc;
use std::time::Instant;

/// A failure of the harness or of a call it makes, as text for the report.
pub type Outcome<T> = Result<T, String>;

pub fn driver(what: &str) -> impl Fn(DriverError) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

/// Whether `lib` (cudarc's name: "cuda", "nvrtc", "cublas" ...) opens under any of the names cudarc
/// tries. Closed again at once: the probe keeps nothing loaded.
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

/// The number of visible devices where libcuda, libnvrtc (the library compiles its kernels with it)
/// and a device are usable; otherwise why not. Called before any other cudarc call: cudarc panics
/// when a library it loads is missing.
pub fn availability() -> Outcome<usize> {
    let describe = |e: DriverError| match e.error_string() {
        Ok(s) => format!("{:?} ({})", e.0, s.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    };
    if !library_present("cuda") {
        return Err("libcuda (the NVIDIA driver library) is not installed".into());
    }
    if !library_present("nvrtc") {
        return Err("libnvrtc (the CUDA runtime compiler) is not installed or not on LD_LIBRARY_PATH".into());
    }
    drv::init().map_err(|e| format!("cuInit failed: {}", describe(e)))?;
    let count = drv::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {}", describe(e)))?;
    if count < 1 {
        return Err("no CUDA device is visible".into());
    }
    Ok(count as usize)
}

/// The CUDA driver's version as "major.minor", or "unknown".
pub fn driver_version() -> String {
    let mut v = 0;
    match unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) }.result() {
        Ok(()) => format!("{}.{}", v / 1000, (v % 1000) / 10),
        Err(_) => "unknown".into(),
    }
}

/// Device memory allocated and freed in order on a stream, which it keeps alive.
pub struct DeviceBuffer {
    ptr: CUdeviceptr,
    stream: Arc<CudaStream>,
}

impl DeviceBuffer {
    /// `bytes` of device memory (at least 1 byte, so that the pointer is always a valid one).
    fn alloc(stream: &Arc<CudaStream>, bytes: usize, what: &str) -> Outcome<DeviceBuffer> {
        stream.context().bind_to_thread().map_err(driver("binding the CUDA context"))?;
        let ptr = unsafe { drv::malloc_async(stream.cu_stream(), bytes.max(1)) }
            .map_err(driver(&format!("allocating {bytes} bytes of device memory for {what}")))?;
        Ok(DeviceBuffer { ptr, stream: stream.clone() })
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Copies the first `out.len()` elements to the host and waits for the stream.
    fn copy_to_host<T: Copy>(&self, out: &mut [T]) -> Outcome<()> {
        self.stream.context().bind_to_thread().map_err(driver("binding the CUDA context"))?;
        if !out.is_empty() {
            unsafe { drv::memcpy_dtoh_async(out, self.ptr, self.stream.cu_stream()) }
                .map_err(driver("copying to the host"))?;
        }
        unsafe { drv_stream::synchronize(self.stream.cu_stream()) }.map_err(driver("executing on the GPU"))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // A failure means the context is broken already, which the call that broke it has reported.
        if self.stream.context().bind_to_thread().is_ok() {
            let _ = unsafe { drv::free_async(self.ptr, self.stream.cu_stream()) };
        }
    }
}

/// How many timed repeats and warm-ups a measurement makes, and how long it may take.
#[derive(Clone, Copy, Debug)]
pub struct Repeats {
    pub warmup: usize,
    pub max: usize,
    pub min: usize,
    /// Stop adding repeats once their total would exceed this (seconds), but never below `min`.
    pub budget_s: f64,
}

/// Median times of one operation, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    /// Between CUDA events recorded on the stream right before and after the call, the stream idle
    /// at the first: host work inside the call is counted as well as the GPU's.
    pub gpu_ms: f64,
    /// Host wall time from before the call to the completion of its work.
    pub wall_ms: f64,
    pub repeats: usize,
}

/// Fields drop in declaration order: the flush buffer (freed on the stream) before the stream.
pub struct Gpu {
    /// Written between repeats so that no operand is still in L2 (50 MB on an H100) from the last.
    l2_flush: DeviceBuffer,
    pub stream: Arc<CudaStream>,
    /// The device's primary context: the one the library's CUDA handles use on this device too.
    pub ctx: Arc<CudaContext>,
    pub name: String,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    pub repeats: Repeats,
    start: CUevent,
    stop: CUevent,
}

const L2_FLUSH_BYTES: usize = 256 << 20;

impl Gpu {
    /// Device `ordinal`; [`availability`] must have succeeded.
    pub fn new(ordinal: usize, repeats: Repeats) -> Outcome<Gpu> {
        let ctx = CudaContext::new(ordinal).map_err(driver("creating the CUDA context"))?;
        // The harness orders its work on one stream and makes no cudarc-managed allocations, so
        // cudarc's per-allocation event tracking would only add synchronisation.
        unsafe { ctx.disable_event_tracking() };
        ctx.bind_to_thread().map_err(driver("binding the CUDA context"))?;
        let name = ctx.name().map_err(driver("reading the device name"))?;
        let capability = ctx.compute_capability().map_err(driver("reading the compute capability"))?;
        let stream = ctx.new_stream().map_err(driver("creating a stream"))?;
        let l2_flush = DeviceBuffer::alloc(&stream, L2_FLUSH_BYTES, "the L2 flush buffer")?;
        let start = event::create(CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("creating an event"))?;
        let stop = event::create(CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("creating an event"))?;
        Ok(Gpu { l2_flush, stream, ctx, name, capability, repeats, start, stop })
    }

    /// Makes the device's context current on the calling thread.
    pub fn bind(&self) -> Outcome<()> {
        self.ctx.bind_to_thread().map_err(driver("binding the CUDA context"))
    }

    /// The stream as the C API's `void*` / `cudaStream_t`.
    pub fn raw_stream(&self) -> *mut std::ffi::c_void {
        self.stream.cu_stream().cast()
    }

    pub fn sync(&self) -> Outcome<()> {
        self.bind()?;
        unsafe { drv_stream::synchronize(self.stream.cu_stream()) }.map_err(driver("executing on the GPU"))
    }

    /// A device copy of `data`.
    pub fn upload<T: Copy>(&self, data: &[T], what: &str) -> Outcome<DeviceBuffer> {
        let buffer = DeviceBuffer::alloc(&self.stream, std::mem::size_of_val(data), what)?;
        if !data.is_empty() {
            unsafe { drv::memcpy_htod_async(buffer.ptr, data, self.stream.cu_stream()) }
                .map_err(driver("copying to the device"))?;
        }
        Ok(buffer)
    }

    /// `bytes` of zero-filled device memory.
    pub fn zeros(&self, bytes: usize, what: &str) -> Outcome<DeviceBuffer> {
        let buffer = DeviceBuffer::alloc(&self.stream, bytes, what)?;
        unsafe { memset_d8_async(buffer.ptr, 0, bytes, self.stream.cu_stream()) }
            .map_err(driver("clearing device memory"))?;
        Ok(buffer)
    }

    /// The first `len` elements of `buffer`, widened to f64.
    pub fn download<T: Element>(&self, buffer: &DeviceBuffer, len: usize) -> Outcome<Vec<f64>> {
        let mut host = vec![T::default(); len];
        buffer.copy_to_host(&mut host)?;
        Ok(host.into_par_iter().map(T::to_f64).collect())
    }

    fn flush_l2(&self) -> Outcome<()> {
        unsafe { memset_d8_async(self.l2_flush.ptr(), 0x5a, L2_FLUSH_BYTES, self.stream.cu_stream()) }
            .map_err(driver("flushing L2"))
    }

    /// Times `op`: warm-up calls, then repeats, each preceded by an L2 flush and a stream
    /// synchronisation; the medians of the event and wall times.
    pub fn time(&self, mut op: impl FnMut() -> Outcome<()>) -> Outcome<Timing> {
        self.bind()?;
        for _ in 0..self.repeats.warmup {
            op()?;
        }
        self.sync()?;
        let (mut gpu, mut wall) = (Vec::new(), Vec::new());
        let began = Instant::now();
        while gpu.len() < self.repeats.max
            && (gpu.len() < self.repeats.min || began.elapsed().as_secs_f64() < self.repeats.budget_s)
        {
            self.flush_l2()?;
            self.sync()?;
            let t0 = Instant::now();
            unsafe { event::record(self.start, self.stream.cu_stream()) }.map_err(driver("recording an event"))?;
            op()?;
            self.bind()?;
            unsafe { event::record(self.stop, self.stream.cu_stream()) }.map_err(driver("recording an event"))?;
            unsafe { event::synchronize(self.stop) }.map_err(driver("executing on the GPU"))?;
            wall.push(t0.elapsed().as_secs_f64() * 1e3);
            gpu.push(unsafe { event::elapsed(self.start, self.stop) }.map_err(driver("reading an event"))? as f64);
        }
        Ok(Timing { gpu_ms: median(&mut gpu), wall_ms: median(&mut wall), repeats: gpu.len() })
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.bind().is_ok() {
            let _ = self.sync();
            unsafe {
                let _ = event::destroy(self.start);
                let _ = event::destroy(self.stop);
            }
        }
    }
}

pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { 0.5 * (values[mid - 1] + values[mid]) }
}

/// ‖x − y‖_F / ‖y‖_F, and ‖y‖_F.
pub fn relative_error(x: &[f64], reference: &[f64]) -> (f64, f64) {
    let norm = reference.par_iter().map(|v| v * v).sum::<f64>().sqrt();
    (sparsegpu::testgen::relative_error(x, reference), norm)
}

/// Whether an error is within a tolerance (NaN is not).
pub fn within(err: f64, tolerance: f64) -> bool {
    err <= tolerance
}

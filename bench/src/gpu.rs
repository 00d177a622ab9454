//! The GPU side of the harness: one device, one stream every measured call (ours and the vendor's)
//! is queued on, device copies of host arrays, read-back, and timing with CUDA events.

use cudarc::driver::result::{event, memset_d8_async, stream as drv_stream};
use cudarc::driver::sys::{CUevent, CUevent_flags};
use cudarc::driver::{CudaStream, DriverError};
use rayon::prelude::*;
use sparsegpu::backend::cuda::memory::DeviceBuffer;
use sparsegpu::backend::cuda::{self, GpuDevice, Stream};
use sparsegpu::scalar::Element;
use std::sync::Arc;
use std::time::Instant;

/// A failure of the harness or of a call it makes, as text for the report.
pub type Outcome<T> = Result<T, String>;

pub fn driver(what: &str) -> impl Fn(DriverError) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

pub fn lib(e: sparsegpu::Error) -> String {
    e.message
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
    pub device: Arc<GpuDevice>,
    pub name: String,
    pub repeats: Repeats,
    start: CUevent,
    stop: CUevent,
}

const L2_FLUSH_BYTES: usize = 256 << 20;

impl Gpu {
    pub fn new(ordinal: usize, repeats: Repeats) -> Outcome<Gpu> {
        let device = cuda::device(ordinal).map_err(lib)?;
        device.bind().map_err(lib)?;
        let name = device.ctx.name().map_err(driver("reading the device name"))?;
        let stream = device.ctx.new_stream().map_err(driver("creating a stream"))?;
        let s = Stream(stream.cu_stream());
        let l2_flush = DeviceBuffer::alloc(&device, L2_FLUSH_BYTES, s, "the L2 flush buffer").map_err(lib)?;
        let start = event::create(CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("creating an event"))?;
        let stop = event::create(CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("creating an event"))?;
        Ok(Gpu { device, stream, name, repeats, l2_flush, start, stop })
    }

    pub fn stream(&self) -> Stream {
        Stream(self.stream.cu_stream())
    }

    /// The stream as the C API's `void*` / `cudaStream_t`.
    pub fn raw_stream(&self) -> *mut std::ffi::c_void {
        self.stream.cu_stream().cast()
    }

    pub fn sync(&self) -> Outcome<()> {
        self.device.bind().map_err(lib)?;
        unsafe { drv_stream::synchronize(self.stream.cu_stream()) }.map_err(driver("executing on the GPU"))
    }

    pub fn upload<T: Copy>(&self, data: &[T], what: &str) -> Outcome<DeviceBuffer> {
        DeviceBuffer::from_host(&self.device, data, self.stream(), what).map_err(lib)
    }

    pub fn zeros(&self, bytes: usize, what: &str) -> Outcome<DeviceBuffer> {
        DeviceBuffer::zeroed(&self.device, bytes, self.stream(), what).map_err(lib)
    }

    /// The first `len` elements of `buffer`, widened to f64.
    pub fn download<T: Element>(&self, buffer: &DeviceBuffer, len: usize) -> Outcome<Vec<f64>> {
        let mut host = vec![T::default(); len];
        buffer.copy_to_host(&mut host).map_err(lib)?;
        Ok(host.into_par_iter().map(T::to_f64).collect())
    }

    fn flush_l2(&self) -> Outcome<()> {
        unsafe { memset_d8_async(self.l2_flush.ptr(), 0x5a, L2_FLUSH_BYTES, self.stream.cu_stream()) }
            .map_err(driver("flushing L2"))
    }

    /// Times `op`: warm-up calls, then repeats, each preceded by an L2 flush and a stream
    /// synchronisation; the medians of the event and wall times.
    pub fn time(&self, mut op: impl FnMut() -> Outcome<()>) -> Outcome<Timing> {
        self.device.bind().map_err(lib)?;
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
            self.device.bind().map_err(lib)?;
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
        if self.device.bind().is_ok() {
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

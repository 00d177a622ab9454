//! The CUDA runtime on a GPU machine (each test reports SKIPPED without a usable GPU): kernels
//! compiled and cached, host and device pointers, the caller's stream, allocation failure.

mod common;

use sparsegpu::Status;
use sparsegpu::backend::cuda::{self, kernels, memory, nvrtc, util};
use std::sync::Mutex;

/// Allocation-failure injection is process-wide, and some tests count free device memory: tests that
/// allocate take this lock.
static ALLOCATION_LOCK: Mutex<()> = Mutex::new(());

#[test]
fn first_call_latency_with_cold_and_warm_cache() {
    if !common::cuda_available("first_call_latency_with_cold_and_warm_cache") {
        return;
    }
    // Loading modules takes device memory, which the tests that count free memory must not see.
    let _guard = ALLOCATION_LOCK.lock().unwrap();
    let gpu = cuda::device(0).unwrap();
    let arch = gpu.arch_for(&kernels::UTIL);
    let dir = std::env::temp_dir().join(format!("sparsegpu-latency-{}", std::process::id()));
    unsafe { std::env::set_var("SPARSEGPU_CACHE_DIR", &dir) };
    let cold = std::time::Instant::now();
    nvrtc::compile_cached(&kernels::UTIL, &arch).unwrap();
    let cold = cold.elapsed();
    let warm = std::time::Instant::now();
    nvrtc::compile_cached(&kernels::UTIL, &arch).unwrap();
    let warm = warm.elapsed();
    println!(
        "first-call kernel latency on {arch}: cold cache {:.1} ms, warm cache {:.3} ms (NVRTC {}, driver CUDA {})",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3,
        nvrtc::version_string(),
        cuda::driver_version_string()
    );
    assert!(warm < cold);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn host_and_device_arrays_are_recognised_and_staged() {
    if !common::cuda_available("host_and_device_arrays_are_recognised_and_staged") {
        return;
    }
    let _guard = ALLOCATION_LOCK.lock().unwrap();
    let gpu = cuda::device(0).unwrap();
    let stream = cuda::Stream::DEFAULT;
    let host: Vec<f32> = (0..1000).map(|i| i as f32 - 500.0).collect();
    assert_eq!(memory::locate(host.as_ptr().cast()), memory::Location::Host);
    let on_device = memory::DeviceBuffer::from_host(&gpu, &host, stream, "test").unwrap();
    assert_eq!(memory::locate(on_device.ptr() as *const _), memory::Location::Device(0));

    // Scale a host array in place through staging: β = −2.
    let mut staged = host.clone();
    let out = unsafe { memory::DeviceOutput::new(&gpu, stream, staged.as_mut_ptr(), staged.len(), "C", true) }.unwrap();
    assert!(out.is_staged());
    util::scale_matrix::<f32>(&gpu, stream, 1000, 1, -2.0, out.ptr(), 1, 1000).unwrap();
    out.finish().unwrap();
    for (got, x) in staged.iter().zip(&host) {
        assert_eq!(*got, -2.0 * x);
    }

    // β = 0 on device memory full of NaN writes zeros without reading.
    let nan = vec![f32::NAN; 1000];
    let dev = memory::DeviceBuffer::from_host(&gpu, &nan, stream, "test").unwrap();
    util::scale_matrix::<f32>(&gpu, stream, 10, 100, 0.0, dev.ptr(), 1, 10).unwrap();
    let mut back = vec![1.0f32; 1000];
    dev.copy_to_host(&mut back).unwrap();
    assert!(back.iter().all(|&x| x == 0.0));
}

#[test]
fn large_copies_arrive_intact_through_the_pinned_staging() {
    const TEST: &str = "large_copies_arrive_intact_through_the_pinned_staging";
    if !common::cuda_available(TEST) {
        return;
    }
    use cudarc::driver::result as drv;
    let _guard = ALLOCATION_LOCK.lock().unwrap();
    let gpu = cuda::device(0).unwrap();
    gpu.bind().unwrap();
    let stream = gpu.ctx.new_stream().unwrap();
    let raw = cuda::Stream(stream.cu_stream());
    // Fresh words each run; parts of odd lengths (one empty) whose joins fall inside staging
    // buffers, 100 MB in all: the buffers are refilled several times.
    let mut rng = sparsegpu::testgen::Rng::fresh(TEST);
    let mut words = |n: usize| -> Vec<u32> { (0..n).map(|_| rng.next_u64() as u32).collect() };
    let lengths = [1, 20_000_003, 0, 5_000_001, 7];
    let first: Vec<Vec<u32>> = lengths.iter().map(|&n| words(n)).collect();
    let second = words(12_345_679);
    let parts: Vec<&[u32]> = first.iter().map(Vec::as_slice).collect();
    assert!(std::mem::size_of_val(&second[..]) >= memory::STAGED_COPY_MIN_BYTES);
    let a = memory::DeviceBuffer::from_host_parts(&gpu, &parts, raw, "test").unwrap();
    // Queued at once behind the first: it refills the buffers the first is still being read from.
    let b = memory::DeviceBuffer::from_host(&gpu, &second, raw, "test").unwrap();
    // The uploads, read back by the driver's own copy.
    stream.synchronize().unwrap();
    let driver_copy = |buffer: &memory::DeviceBuffer, len: usize| {
        let mut back = vec![0u32; len];
        unsafe { drv::memcpy_dtoh_sync(&mut back, buffer.ptr()) }.unwrap();
        back
    };
    let whole = first.concat();
    assert!(driver_copy(&a, whole.len()) == whole, "the parts arrived changed");
    assert!(driver_copy(&b, second.len()) == second, "the second upload arrived changed");
    // Downloads through the staging: all of one buffer, and a head of the other that ends inside a
    // staging buffer, into poisoned arrays.
    let mut back = vec![0xDEAD_BEEFu32; second.len()];
    b.copy_to_host(&mut back).unwrap();
    assert!(back == second, "the second buffer came back changed");
    let mut head = vec![0xDEAD_BEEFu32; 9_876_543];
    a.copy_to_host(&mut head).unwrap();
    assert!(head[..] == whole[..head.len()], "the head of the parts came back changed");
    // What the staging gains on this machine: 256 MiB back to pageable memory, median of five.
    let mut out = words((256 << 20) / 4);
    let big = memory::DeviceBuffer::from_host(&gpu, &out, raw, "test").unwrap();
    let staged = common::median_wall_ms(5, &mut || big.copy_to_host(&mut out).unwrap());
    let direct = common::median_wall_ms(5, &mut || unsafe { drv::memcpy_dtoh_sync(&mut out, big.ptr()) }.unwrap());
    println!(
        "256 MiB device to pageable host memory: {staged:.1} ms through the staging, {direct:.1} ms by the driver's copy"
    );
}

#[test]
fn work_runs_on_the_callers_stream() {
    if !common::cuda_available("work_runs_on_the_callers_stream") {
        return;
    }
    let _guard = ALLOCATION_LOCK.lock().unwrap();
    let gpu = cuda::device(0).unwrap();
    gpu.bind().unwrap();
    let stream = gpu.ctx.new_stream().unwrap();
    let raw = cuda::Stream(stream.cu_stream());
    let data: Vec<f64> = (0..4096).map(|i| i as f64).collect();
    let buf = memory::DeviceBuffer::from_host(&gpu, &data, raw, "test").unwrap();
    for _ in 0..10 {
        util::scale_matrix::<f64>(&gpu, raw, 4096, 1, 0.5, buf.ptr(), 1, 4096).unwrap();
    }
    let mut back = vec![0.0f64; 4096];
    buf.copy_to_host(&mut back).unwrap();
    for (i, v) in back.iter().enumerate() {
        assert_eq!(*v, i as f64 / 1024.0);
    }
}

#[test]
fn an_injected_allocation_failure_is_reported() {
    if !common::cuda_available("an_injected_allocation_failure_is_reported") {
        return;
    }
    let _guard = ALLOCATION_LOCK.lock().unwrap();
    let gpu = cuda::device(0).unwrap();
    memory::inject_allocation_failures(1);
    let err = memory::DeviceBuffer::alloc(&gpu, 1024, cuda::Stream::DEFAULT, "test").err().unwrap();
    assert_eq!(err.status, Status::AllocationFailed);
    // The next allocation succeeds again.
    memory::DeviceBuffer::alloc(&gpu, 1024, cuda::Stream::DEFAULT, "test").unwrap();
    let huge = memory::DeviceBuffer::alloc(&gpu, 1 << 50, cuda::Stream::DEFAULT, "test").err().unwrap();
    assert_eq!(huge.status, Status::AllocationFailed, "{}", huge.message);
}

#[test]
fn devices_outside_the_machine_are_rejected() {
    if !common::cuda_available("devices_outside_the_machine_are_rejected") {
        return;
    }
    let count = cuda::device_count().unwrap();
    assert_eq!(cuda::device(count).unwrap_err().status, Status::InvalidValue);
}

#[test]
fn resident_memory_outlives_the_stream_it_was_made_on() {
    if !common::cuda_available("resident_memory_outlives_the_stream_it_was_made_on") {
        return;
    }
    let _guard = ALLOCATION_LOCK.lock().unwrap();
    let gpu = cuda::device(0).unwrap();
    gpu.bind().unwrap();
    gpu.ctx.synchronize().unwrap();
    let free_before = free_memory(&gpu);
    let stream = gpu.ctx.new_stream().unwrap();
    let data = vec![1.5f32; 1 << 22];
    let buffer =
        memory::DeviceBuffer::from_host(&gpu, &data, cuda::Stream(stream.cu_stream()), "test").unwrap().resident();
    gpu.synchronize(cuda::Stream(stream.cu_stream())).unwrap();
    // The caller destroys its stream while the analysed data lives on (as after smatCreateCsr).
    drop(stream);
    let mut back = vec![0.0f32; 4];
    let tail = memory::DeviceBuffer::alloc(&gpu, 16, cuda::Stream::DEFAULT, "test").unwrap();
    unsafe {
        cudarc::driver::result::memcpy_dtod_async(tail.ptr(), buffer.ptr(), 16, std::ptr::null_mut()).unwrap();
    }
    tail.copy_to_host(&mut back).unwrap();
    assert_eq!(back, [1.5; 4]);
    drop(tail);
    drop(buffer);
    assert_eq!(free_memory(&gpu), free_before, "the resident buffer was not freed");
}

/// Free device memory once the device is idle and the stream-ordered allocator's pool holds nothing
/// (other tests of this process may have left cached blocks in it, released at any synchronisation).
fn free_memory(gpu: &cuda::GpuDevice) -> usize {
    use cudarc::driver::sys;
    gpu.bind().unwrap();
    gpu.ctx.synchronize().unwrap();
    let mut pool = std::ptr::null_mut();
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, gpu.ordinal as i32).result().unwrap();
        sys::cuMemPoolTrimTo(pool, 0).result().unwrap();
    }
    gpu.ctx.mem_get_info().unwrap().0
}

//! SpAMM on the CUDA backend against the CPU backend (the specification) and an f64 reference: norm
//! maps bit-identical, identical skip decisions and statistics, results equal to rounding, τ = 0
//! equal to GEMM, the error bound holding, τ tuning identical, host and device pointers, a caller's
//! stream, and an injected allocation failure. Every test is skipped (and says so) without a GPU.
//!
//! One file per family on purpose, although long: each integration-test file is its own binary that
//! links the whole library (about 3 MB), so splitting a family's tests would multiply link time and
//! the binaries carried to a GPU machine; the tests are grouped by section instead.

mod common;
use common::last_error;

use common::{POISON, Rng, relative_error};
use half::{bf16, f16};
use sparsegpu::backend::cuda::memory::{self, DeviceBuffer};
use sparsegpu::backend::cuda::{self, Stream, spamm as cuda_spamm};
use sparsegpu::capi::spamm::*;
use sparsegpu::executor::TestHooks;
use sparsegpu::scalar::Element;
use sparsegpu::spamm::TauRule::{self, Given};
use sparsegpu::spamm::tune::{CandidateEvaluator, Evaluation, NormMapEvaluator, tune_for_ratio};
use sparsegpu::spamm::{GemmOperand, MathMode, NormMap, ProductPlan, RawOperand};
use sparsegpu::testgen::{algebraic_decay, exponential_decay};
use sparsegpu::{BackendKind, Operation, Status, ValueType};
use std::ffi::c_void;
use std::ptr::null_mut;

const OK: i32 = Status::Success as i32;

thread_local! {
    /// How the CUDA handles a test makes are set up: the devices (empty: the default) and the test
    /// hooks (the multi-device and fewest-shared-memory tests change them). Each test runs on its own
    /// thread.
    static CUDA_SETUP: std::cell::RefCell<(Vec<i32>, TestHooks)> = std::cell::RefCell::new(Default::default());
}

fn handle(backend: BackendKind, block_size: usize) -> spammHandle_t {
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, OK);
    assert_eq!(unsafe { spammSetBackend(h, backend as i32) }, OK, "{}", last_error());
    assert_eq!(unsafe { spammSetBlockSize(h, block_size as i32) }, OK);
    let (devices, hooks) = CUDA_SETUP.with(|setup| setup.borrow().clone());
    if backend == BackendKind::Cuda {
        if !devices.is_empty() {
            let status = unsafe { spammSetDevices(h, devices.len() as i32, devices.as_ptr()) };
            assert_eq!(status, OK, "{}", last_error());
        }
        *unsafe { spamm_handle_object(h) }.unwrap().core_mut().test_hooks_mut() = hooks;
    }
    h
}

/// Runs `body` with this thread's CUDA handles set up by `setup`, then restores the default.
fn with_cuda_setup<R>(setup: impl FnOnce(&mut Vec<i32>, &mut TestHooks), body: impl FnOnce() -> R) -> R {
    CUDA_SETUP.with(|s| {
        let (devices, hooks) = &mut *s.borrow_mut();
        setup(devices, hooks)
    });
    let result = body();
    CUDA_SETUP.with(|s| *s.borrow_mut() = Default::default());
    result
}

fn stats(h: spammHandle_t) -> spammStats_t {
    let mut s = spammStats_t::default();
    assert_eq!(unsafe { spammGetStats(h, &mut s) }, OK, "{}", last_error());
    s
}

trait GpuElement: common::SpammGemm {
    /// Tolerance of a GPU element against the CPU's, relative to Σ|α·a·b| + |β·c|.
    const RTOL: f64;
    /// Relative Frobenius error of τ = 0 against an f64 GEMM of the same (rounded) inputs.
    const GEMM_RTOL: f64;
    /// The type's subnormal spacing: two correctly rounded outputs near zero may differ by it.
    const ATOL: f64;
}

impl GpuElement for f32 {
    const RTOL: f64 = 2e-5;
    const GEMM_RTOL: f64 = 1e-5;
    const ATOL: f64 = 1.401298464324817e-45;
}

impl GpuElement for f64 {
    const RTOL: f64 = 1e-13;
    const GEMM_RTOL: f64 = 1e-12;
    const ATOL: f64 = 0.0;
}

impl GpuElement for f16 {
    // Both backends accumulate in f32 and round the result to f16 (2^-11 relative) once.
    const RTOL: f64 = 2e-3;
    const GEMM_RTOL: f64 = 1e-2;
    const ATOL: f64 = 5.960464477539063e-8;
}

impl GpuElement for bf16 {
    // As f16, with 8 significant bits: both backends accumulate in f32 (in different orders) and
    // round to bf16 (2^-9 relative) once, so the two results may straddle a rounding boundary and
    // differ by one bf16 ulp, at most 2^-7 ≈ 7.8e-3 of |C| ≤ Σ|α·a·b| + |β·c|.
    const RTOL: f64 = 8e-3;
    const GEMM_RTOL: f64 = 1e-2;
    const ATOL: f64 = 9.183549615799121e-41;
}

/// One stored operand: data (column-major, leading dimension `ld`) and its op.
struct Operand<T> {
    data: Vec<T>,
    op: Operation,
    stored_rows: usize,
    stored_cols: usize,
    ld: usize,
}

impl<T: Element> Operand<T> {
    /// A random `op(X)` of shape rows × cols, with `pad` extra rows of leading dimension.
    fn random(rng: &mut Rng, op: Operation, rows: usize, cols: usize, pad: usize) -> Self {
        let (stored_rows, stored_cols) = if op == Operation::N { (rows, cols) } else { (cols, rows) };
        let ld = stored_rows.max(1) + pad;
        Operand { data: rng.vec(ld * stored_cols), op, stored_rows, stored_cols, ld }
    }

    fn at(&self, i: usize, j: usize) -> f64 {
        let (r, c) = if self.op == Operation::N { (i, j) } else { (j, i) };
        self.data[r + c * self.ld].to_f64()
    }

    fn gemm_operand(&self) -> GemmOperand<'_, T> {
        GemmOperand {
            data: &self.data,
            op: self.op,
            stored_rows: self.stored_rows,
            stored_cols: self.stored_cols,
            ld: self.ld,
        }
    }
}

/// Where the arrays of a call live and which stream it uses.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Memory {
    Host,
    /// Device arrays, on a stream of the caller's (not the default stream).
    DeviceOnOwnStream,
    /// Device arrays, A, B and C each starting one element past an allocation (not 16-byte aligned:
    /// the kernels' element-wise load and store paths), on a stream of the caller's.
    DeviceMisaligned,
}

struct Call<'a, T: GpuElement> {
    a: &'a Operand<T>,
    b: &'a Operand<T>,
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    beta: f64,
    /// τ, given or searched by the tuned products (spammGemmAtValidRatio, spammGemmWithinErrorBound).
    tau: TauRule,
    block_size: usize,
    math_mode: MathMode,
}

impl<T: GpuElement> Call<'_, T> {
    /// Runs the product on `backend`; C starts as `c0` (ldc = m + 3). Returns C and the statistics.
    fn run(&self, backend: BackendKind, c0: &[T], memory: Memory) -> (Vec<T>, spammStats_t) {
        let h = handle(backend, self.block_size);
        let result = self.run_on(h, c0, memory);
        assert_eq!(unsafe { spammDestroy(h) }, OK);
        result
    }

    /// [`Call::run`] on the handle `h` (its backend and block size), which it keeps.
    fn run_on(&self, h: spammHandle_t, c0: &[T], memory: Memory) -> (Vec<T>, spammStats_t) {
        assert_eq!(unsafe { spammSetMathMode(h, self.math_mode as i32) }, OK, "{}", last_error());
        let ldc = self.m + 3;
        let mut c = c0.to_vec();
        if memory == Memory::Host {
            let (a, b) = (self.a.data.as_ptr(), self.b.data.as_ptr());
            unsafe { self.call(h, a, b, c.as_mut_ptr(), ldc) };
        } else {
            let gpu = cuda::device(0).unwrap();
            let stream = gpu.ctx.new_stream().unwrap();
            let own = Stream(stream.cu_stream());
            assert_eq!(unsafe { spammSetStream(h, own.0 as *mut c_void) }, OK);
            let offset = (memory == Memory::DeviceMisaligned) as usize;
            let shifted = |x: &[T]| -> Vec<T> { [&[T::from_f64(0.0)][..offset], x].concat() };
            let a = DeviceBuffer::from_host(&gpu, &shifted(&self.a.data), own, "A").unwrap();
            let b = DeviceBuffer::from_host(&gpu, &shifted(&self.b.data), own, "B").unwrap();
            let c_dev = DeviceBuffer::from_host(&gpu, &shifted(&c), own, "C").unwrap();
            let elem = (offset * std::mem::size_of::<T>()) as u64;
            let (a, b, c_ptr) =
                ((a.ptr() + elem) as *const T, (b.ptr() + elem) as *const T, (c_dev.ptr() + elem) as *mut T);
            unsafe { self.call(h, a, b, c_ptr, ldc) };
            let mut back = shifted(&c);
            c_dev.copy_to_host(&mut back).unwrap_or_else(|e| {
                panic!(
                    "{:?} {:?} {}x{}x{} bs {} {:?}{:?} {memory:?}: {e:?}",
                    T::VALUE_TYPE,
                    self.math_mode,
                    self.m,
                    self.n,
                    self.k,
                    self.block_size,
                    self.a.op,
                    self.b.op
                )
            });
            c.copy_from_slice(&back[offset..]);
            // The stream is about to go: a kept handle's later calls use the default stream.
            assert_eq!(unsafe { spammSetStream(h, null_mut()) }, OK);
        }
        (c, stats(h))
    }

    /// The product through the C API entry point of its τ rule, on operands and C at the given
    /// pointers (host or device); a tuned product's τ must be the one its statistics report.
    ///
    /// # Safety
    /// The pointers hold the operands and C (`ldc` × n) of this call.
    unsafe fn call(&self, h: spammHandle_t, a: *const T, b: *const T, c: *mut T, ldc: usize) {
        let (alpha, beta) = (T::Compute::from_f64(self.alpha), T::Compute::from_f64(self.beta));
        let ops = (self.a.op as i32, self.b.op as i32);
        let dims = (self.m as i32, self.n as i32, self.k as i32);
        let (a, b, c) = ((a, self.a.ld as i32), (b, self.b.ld as i32), (c, ldc as i32));
        let (status, searched) = unsafe { T::gemm_by_rule(h, ops, dims, &alpha, a, b, &beta, c, self.tau) };
        assert_eq!(status, OK, "{:?} {:?}: {}", T::VALUE_TYPE, self.tau, last_error());
        if self.tau.given().is_none() {
            assert_eq!(searched.to_bits(), stats(h).tau.to_bits(), "{:?}: the τ written is the product's", self.tau);
        }
    }

    /// Σ_p |α·a_ip·b_pj| + |β·c_ij|, the scale of element (i, j)'s rounding.
    fn magnitude(&self, c0: &[T], i: usize, j: usize) -> f64 {
        let mut s = 0.0;
        for p in 0..self.k {
            s += (self.alpha * self.a.at(i, p) * self.b.at(p, j)).abs();
        }
        let old = if self.beta == 0.0 { 0.0 } else { (self.beta * c0[i + j * (self.m + 3)].to_f64()).abs() };
        s + old
    }

    /// The GPU against the CPU: identical statistics, every element equal to rounding, the padding
    /// between columns of C untouched.
    fn check_against_cpu(&self, what: &str, memory: Memory, rng: &mut Rng) -> (Vec<T>, spammStats_t) {
        self.check_against_cpu_on(None, what, memory, rng)
    }

    /// [`Call::check_against_cpu`] on the CUDA handle `gpu` (kept) when given, else on a new one.
    fn check_against_cpu_on(
        &self,
        gpu: Option<spammHandle_t>,
        what: &str,
        memory: Memory,
        rng: &mut Rng,
    ) -> (Vec<T>, spammStats_t) {
        let ldc = self.m + 3;
        let mut c0: Vec<T> = rng.vec(ldc * self.n);
        if self.beta == 0.0 {
            c0.iter_mut().for_each(|x| *x = T::from_f64(f64::NAN));
        }
        let (cpu, cpu_stats) = self.run(BackendKind::Cpu, &c0, Memory::Host);
        let (gpu, gpu_stats) = match gpu {
            Some(h) => self.run_on(h, &c0, memory),
            None => self.run(BackendKind::Cuda, &c0, memory),
        };
        assert_eq!(gpu_stats.performedProducts, cpu_stats.performedProducts, "{what}: performed products");
        assert_eq!(gpu_stats.totalProducts, cpu_stats.totalProducts, "{what}: total products");
        assert_eq!(gpu_stats.validRatio.to_bits(), cpu_stats.validRatio.to_bits(), "{what}: valid ratio");
        // Both backends sum the bound in the same order (spamm_block_stats, BlockStats::totals).
        assert_eq!(
            gpu_stats.errorBound.to_bits(),
            cpu_stats.errorBound.to_bits(),
            "{what}: bound {gpu_stats:?} vs {cpu_stats:?}"
        );
        assert_eq!((gpu_stats.tau, gpu_stats.blockSize), (cpu_stats.tau, cpu_stats.blockSize), "{what}");
        for j in 0..self.n {
            for i in 0..ldc {
                let idx = i + j * ldc;
                let (g, c) = (gpu[idx].to_f64(), cpu[idx].to_f64());
                if i >= self.m {
                    assert_eq!(gpu[idx].to_f64().to_bits(), c0[idx].to_f64().to_bits(), "{what}: padding ({i},{j})");
                    continue;
                }
                let tol = T::RTOL * self.magnitude(&c0, i, j) + T::ATOL + 1e-30;
                assert!(g.is_finite() && (g - c).abs() <= tol, "{what}: C({i},{j}) gpu {g} cpu {c} tol {tol}");
            }
        }
        if self.tau == Given(0.0) && self.m * self.n > 0 {
            // Against GEMM in f64 of the same inputs: the FP32 level for both math modes.
            let mut want: Vec<f64> =
                (0..self.m * self.n).map(|e| c0[e % self.m + (e / self.m) * ldc].to_f64()).collect();
            let (a, b) = (self.a, self.b);
            common::reference_gemm(
                self.m,
                self.n,
                self.k,
                self.alpha,
                |i, p| a.at(i, p),
                |p, j| b.at(p, j),
                self.beta,
                &mut want,
            );
            let got: Vec<f64> = (0..self.m * self.n).map(|e| gpu[e % self.m + (e / self.m) * ldc].to_f64()).collect();
            // Relative to the magnitudes Σ|α·a·b| + |β·c| rather than to C: random small shapes can
            // cancel (a 1×1×1 α·a·b ≈ −β·c), which makes C's norm no measure of the rounding.
            let diff: f64 = got.iter().zip(&want).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
            let scale: f64 =
                (0..self.m * self.n).map(|e| self.magnitude(&c0, e % self.m, e / self.m).powi(2)).sum::<f64>().sqrt();
            let err = diff / scale.max(f64::MIN_POSITIVE);
            assert!(err <= T::GEMM_RTOL, "{what}: error {err:e} relative to the magnitudes against an f64 GEMM");
        }
        (gpu, gpu_stats)
    }
}

/// The median of all block norm products, a τ that skips about half of the products.
fn median_norm_product<T: GpuElement>(a: &Operand<T>, b: &Operand<T>, bs: usize) -> f64 {
    let an = NormMap::of_operand(&a.gemm_operand(), bs).unwrap();
    let bn = NormMap::of_operand(&b.gemm_operand(), bs).unwrap();
    let mut products = Vec::new();
    for i in 0..an.block_rows {
        for k in 0..an.block_cols {
            for j in 0..bn.block_cols {
                products.push(an.get(i, k) * bn.get(k, j));
            }
        }
    }
    products.sort_by(f64::total_cmp);
    products.get(products.len() / 2).copied().unwrap_or(0.0)
}

fn norm_maps_identical<T: GpuElement>(rng: &mut Rng) {
    let gpu = cuda::device(0).unwrap();
    for &(rows, cols) in &[(1, 1), (33, 70), (128, 64), (97, 250)] {
        for &bs in &[1, 7, 32, 48, 1024] {
            for op in [Operation::N, Operation::T] {
                let mut x = Operand::<T>::random(rng, op, rows, cols, 2);
                // A few exact zeros and a huge / tiny value exercise the order of the sums.
                x.data[0] = T::from_f64(0.0);
                let last = x.data.len() - 1;
                x.data[last] = T::from_f64(1e-3);
                let cpu = NormMap::of_operand(&x.gemm_operand(), bs).unwrap();
                let raw = x.gemm_operand().raw();
                let map = unsafe { cuda_spamm::operand_norm_map(&gpu, Stream::DEFAULT, &raw, bs) }.unwrap();
                let got = map.to_host().unwrap();
                assert_eq!((got.block_rows, got.block_cols), (cpu.block_rows, cpu.block_cols));
                for (idx, (g, c)) in got.norms.iter().zip(&cpu.norms).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        c.to_bits(),
                        "{:?} {rows}x{cols} {op:?} bs {bs}: norm {idx}: gpu {g} cpu {c}",
                        T::VALUE_TYPE
                    );
                }
            }
        }
    }
}

#[test]
fn norm_maps_are_bit_identical_to_the_cpu() {
    if !common::cuda_available("norm_maps_are_bit_identical_to_the_cpu") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu norm maps");
    norm_maps_identical::<f32>(&mut rng);
    norm_maps_identical::<f64>(&mut rng);
    norm_maps_identical::<f16>(&mut rng);
    norm_maps_identical::<bf16>(&mut rng);
}

fn shapes_against_cpu<T: GpuElement>(rng: &mut Rng, math_mode: MathMode) {
    let shapes = [(0, 5, 3), (4, 0, 3), (5, 4, 0), (1, 1, 1), (33, 17, 45), (70, 65, 100), (40, 97, 64)];
    let ops = [Operation::N, Operation::T];
    let mut case = 0usize;
    for &(m, n, k) in &shapes {
        for &bs in &[32, 8, 48] {
            for (ta, tb) in [(ops[0], ops[0]), (ops[1], ops[0]), (ops[0], ops[1]), (ops[1], ops[1])] {
                case += 1;
                let a = Operand::<T>::random(rng, ta, m, k, case % 3);
                let b = Operand::<T>::random(rng, tb, k, n, (case + 1) % 3);
                let (alpha, beta) = if case.is_multiple_of(2) { (1.0, 0.0) } else { (0.75, -0.5) };
                for tau in [0.0, median_norm_product(&a, &b, bs)] {
                    let call = Call { a: &a, b: &b, m, n, k, alpha, beta, tau: Given(tau), block_size: bs, math_mode };
                    let what = format!(
                        "{:?} {math_mode:?} {m}x{n}x{k} bs {bs} {ta:?}{tb:?} α {alpha} β {beta} τ {tau}",
                        T::VALUE_TYPE
                    );
                    let memory = if case % 4 == 1 { Memory::DeviceOnOwnStream } else { Memory::Host };
                    call.check_against_cpu(&what, memory, rng);
                }
            }
        }
    }
}

#[test]
fn every_shape_type_and_transpose_matches_the_cpu() {
    if !common::cuda_available("every_shape_type_and_transpose_matches_the_cpu") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu shapes");
    shapes_against_cpu::<f32>(&mut rng, MathMode::Default);
    shapes_against_cpu::<f64>(&mut rng, MathMode::Default);
    shapes_against_cpu::<f16>(&mut rng, MathMode::Default);
    shapes_against_cpu::<bf16>(&mut rng, MathMode::Default);
}

/// Products split over devices by valid work (rows of C; operands, norms and C rows copied to each
/// share, op(B) along the chain of shares): first three shares on GPU 0 itself (the test hook runs
/// the multi-device path on one GPU), then over every GPU when there are several.
#[test]
fn products_split_over_devices_match_the_cpu() {
    if !common::cuda_available("products_split_over_devices_match_the_cpu") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu split");
    for_each_split(|split, devices| {
        shapes_against_cpu::<f32>(&mut rng, MathMode::Default);
        shapes_against_cpu::<f32>(&mut rng, MathMode::Tf32x3);
        shapes_against_cpu::<f64>(&mut rng, MathMode::Default);
        shapes_against_cpu::<f16>(&mut rng, MathMode::Default);
        shapes_against_cpu::<bf16>(&mut rng, MathMode::Default);
        // A decay product large enough that the shares differ in rows but not in valid work.
        let n = 300;
        let a = decay_operand::<f32>(&mut rng, n, false);
        let b = decay_operand::<f32>(&mut rng, n, true);
        let tau = median_norm_product(&a, &b, 32);
        let call = Call {
            a: &a,
            b: &b,
            m: n,
            n,
            k: n,
            alpha: 1.0,
            beta: 0.5,
            tau: Given(tau),
            block_size: 32,
            math_mode: MathMode::Default,
        };
        call.check_against_cpu(
            &format!("decay split {split} devices {devices:?}"),
            Memory::DeviceOnOwnStream,
            &mut rng,
        );
    });
}

/// Runs `body(split, devices)` with the multi-device path on: three shares of GPU 0 (the test
/// hook), then every GPU when there are several; one device again afterwards.
fn for_each_split(mut body: impl FnMut(usize, &[i32])) {
    let mut configurations = vec![(3, vec![])];
    let count = cuda::device_count().unwrap_or(0);
    if count >= 2 {
        configurations.push((1, (0..count as i32).collect::<Vec<_>>()));
    }
    for (split, devices) in configurations {
        with_cuda_setup(
            |d, hooks| {
                *d = devices.clone();
                hooks.spamm_shares_on_one_device = split;
            },
            || body(split, &devices),
        );
    }
}

/// Repeated products on one multi-device handle: a product of the last one's dimensions is split by
/// that product's valid work before its own norm maps exist, so its inputs, τ and α / β change here
/// between calls (the split is stale, the result must not be), and a product of other dimensions
/// comes between (split by its own work).
#[test]
fn repeated_split_products_on_one_handle_match_the_cpu() {
    if !common::cuda_available("repeated_split_products_on_one_handle_match_the_cpu") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu repeated split");
    for_each_split(|split, devices| {
        let h = handle(BackendKind::Cuda, 32);
        // (n, exponential decay, τ as a multiple of the median norm product, α, β, memory)
        let sequence = [
            (300, false, 1.0, 1.0, 0.5, Memory::DeviceOnOwnStream),
            (300, true, 0.25, 0.75, 0.0, Memory::DeviceOnOwnStream),
            (300, false, 0.0, 1.0, -1.0, Memory::Host),
            (170, false, 1.0, 1.0, 0.0, Memory::DeviceOnOwnStream),
            (300, true, 4.0, -0.5, 0.25, Memory::DeviceOnOwnStream),
            (300, false, 1.0, 1.0, 0.0, Memory::DeviceOnOwnStream),
        ];
        for (call_index, &(n, exponential, tau_scale, alpha, beta, memory)) in sequence.iter().enumerate() {
            let a = decay_operand::<f32>(&mut rng, n, exponential);
            let b = decay_operand::<f32>(&mut rng, n, !exponential);
            let tau = tau_scale * median_norm_product(&a, &b, 32);
            let call = Call {
                a: &a,
                b: &b,
                m: n,
                n,
                k: n,
                alpha,
                beta,
                tau: Given(tau),
                block_size: 32,
                math_mode: MathMode::Default,
            };
            let what = format!("call {call_index}: {n}³ τ {tau} split {split} devices {devices:?}");
            call.check_against_cpu_on(Some(h), &what, memory, &mut rng);
        }
        assert_eq!(unsafe { spammDestroy(h) }, OK);
    });
}

/// Tuned products (τ searched on the product's own norm maps) on the GPU against the CPU: the same
/// τ, statistics and C to rounding; every type, transposes, shapes not multiples of the block size,
/// α / β, host and device memory, m, n or k zero; then decay products split over devices (τ is
/// searched before the shares multiply, after their operands started moving).
#[test]
fn tuned_products_match_the_cpu() {
    if !common::cuda_available("tuned_products_match_the_cpu") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu tuned products");
    fn rules<T: GpuElement>(a: &Operand<T>, b: &Operand<T>, alpha: f64, bs: usize) -> [TauRule; 3] {
        let everything = ProductPlan::new(&a.gemm_operand(), &b.gemm_operand(), f64::INFINITY, bs).unwrap();
        let skip_all = everything.statistics(alpha.abs(), 0.0).unwrap().error_bound;
        [
            TauRule::ValidRatio { target: 0.1, tolerance: 0.01, max_iterations: 20 },
            TauRule::ValidRatio { target: 0.4, tolerance: 0.0, max_iterations: 3 },
            TauRule::ErrorBound { bound: 0.05 * skip_all, max_iterations: 60 },
        ]
    }
    fn shapes<T: GpuElement>(rng: &mut Rng) {
        let ops = [Operation::N, Operation::T];
        let mut case = 0usize;
        for &(m, n, k) in &[(0, 5, 3), (5, 4, 0), (33, 17, 45), (70, 65, 100), (130, 97, 64)] {
            for &bs in &[32, 8] {
                case += 1;
                let (ta, tb) = (ops[case % 2], ops[(case / 2) % 2]);
                let a = Operand::<T>::random(rng, ta, m, k, case % 3);
                let b = Operand::<T>::random(rng, tb, k, n, (case + 1) % 3);
                let (alpha, beta) = if case.is_multiple_of(2) { (1.0, 0.0) } else { (0.75, -0.5) };
                for tau in rules(&a, &b, alpha, bs) {
                    let call =
                        Call { a: &a, b: &b, m, n, k, alpha, beta, tau, block_size: bs, math_mode: MathMode::Default };
                    let what =
                        format!("{:?} {m}x{n}x{k} bs {bs} {ta:?}{tb:?} α {alpha} β {beta} {tau:?}", T::VALUE_TYPE);
                    let memory = if case % 3 == 1 { Memory::Host } else { Memory::DeviceOnOwnStream };
                    call.check_against_cpu(&what, memory, rng);
                }
            }
        }
    }
    shapes::<f32>(&mut rng);
    shapes::<f64>(&mut rng);
    shapes::<f16>(&mut rng);
    shapes::<bf16>(&mut rng);
    for_each_split(|split, devices| {
        let h = handle(BackendKind::Cuda, 32);
        for call_index in 0..3 {
            let n = 300;
            let a = decay_operand::<f32>(&mut rng, n, call_index == 1);
            let b = decay_operand::<f32>(&mut rng, n, call_index != 1);
            let tau = rules(&a, &b, 1.0, 32)[call_index];
            let call = Call {
                a: &a,
                b: &b,
                m: n,
                n,
                k: n,
                alpha: 1.0,
                beta: 0.5,
                tau,
                block_size: 32,
                math_mode: MathMode::Default,
            };
            let what = format!("call {call_index}: {n}³ {tau:?} split {split} devices {devices:?}");
            call.check_against_cpu_on(Some(h), &what, Memory::DeviceOnOwnStream, &mut rng);
        }
        assert_eq!(unsafe { spammDestroy(h) }, OK);
    });
}

#[test]
fn block_sizes_from_one_to_the_maximum() {
    if !common::cuda_available("block_sizes_from_one_to_the_maximum") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu block sizes");
    /// A 45×70×130 product of `T` in host memory at the median norm product; B's leading dimension
    /// is padded by `pad_b`.
    fn check<T: GpuElement>(
        rng: &mut Rng,
        bs: usize,
        (ta, tb, pad_b): (Operation, Operation, usize),
        (alpha, beta): (f64, f64),
    ) {
        let (m, n, k) = (45, 70, 130);
        let a = Operand::<T>::random(rng, ta, m, k, 0);
        let b = Operand::<T>::random(rng, tb, k, n, pad_b);
        let tau = median_norm_product(&a, &b, bs);
        let math_mode = MathMode::Default;
        let call = Call { a: &a, b: &b, m, n, k, alpha, beta, tau: Given(tau), block_size: bs, math_mode };
        call.check_against_cpu(&format!("{:?} bs {bs}", T::VALUE_TYPE), Memory::Host, rng);
    }
    for &bs in &[1, 2, 16, 31, 33, 64, 100, 1024] {
        check::<f32>(&mut rng, bs, (Operation::N, Operation::T, 1), (1.5, 0.0));
        check::<f16>(&mut rng, bs, (Operation::T, Operation::N, 0), (1.0, 0.25));
        check::<bf16>(&mut rng, bs, (Operation::T, Operation::N, 0), (1.0, 0.25));
    }
}

#[test]
fn f16_tile_kernel_load_paths_match_the_cpu() {
    if !common::cuda_available("f16_tile_kernel_load_paths_match_the_cpu") {
        return;
    }
    half_tile_kernel_load_paths::<f16>(&mut Rng::fresh("spamm_gpu f16 tiles"));
}

#[test]
fn bf16_tile_kernel_load_paths_match_the_cpu() {
    if !common::cuda_available("bf16_tile_kernel_load_paths_match_the_cpu") {
        return;
    }
    half_tile_kernel_load_paths::<bf16>(&mut Rng::fresh("spamm_gpu bf16 tiles"));
}

/// The load paths of the 16-bit tensor-core tile kernel (kernels/spamm_half.cuh) on `T` (f16 or
/// bf16): leading dimensions that are multiples of 8 with aligned arrays (16-byte cp.async,
/// zero-filled at the edges), odd leading dimensions and arrays one element past an allocation
/// (element-wise loads, element-wise C), every transpose, block sizes 32, 64, 96, partial tiles and
/// k blocks, α / β, at τ = 0 and at a τ that skips about half. (C's ldc is m + 3: 132 for m = 129
/// takes the vector C path, the others the element-wise one.)
fn half_tile_kernel_load_paths<T: GpuElement>(rng: &mut Rng) {
    // Pads making each leading dimension a multiple of 8, or one more (odd) in every third case.
    let pad = |op: Operation, rows: usize, cols: usize, odd: bool| {
        let stored_rows = if op == Operation::N { rows } else { cols };
        (8 - stored_rows % 8) % 8 + odd as usize
    };
    tile_kernel_cases::<T>(
        rng,
        &[(200, 136, 264), (129, 257, 77), (256, 128, 320)],
        (0.75, -0.5),
        |case, (ta, m, k), (tb, n)| (pad(ta, m, k, case % 3 == 2), pad(tb, k, n, case % 3 == 2)),
        |case| if case % 3 == 1 { Memory::DeviceMisaligned } else { Memory::Host },
    );
}

/// Products of several tiles in each direction through `T`'s tile kernel: for each shape every
/// transpose pair and block sizes 32, 64 and 96, at τ = 0 and at a τ skipping about half of the block
/// products. Case c (counted from 1) pads A's and B's leading dimensions by `pads(c, (op(A), m, k),
/// (op(B), n))`, keeps its arrays where `memory(c)` says, and uses α = 1, β = 0 when even, else
/// `odd_alpha_beta`.
fn tile_kernel_cases<T: GpuElement>(
    rng: &mut Rng,
    shapes: &[(usize, usize, usize)],
    odd_alpha_beta: (f64, f64),
    pads: impl Fn(usize, (Operation, usize, usize), (Operation, usize)) -> (usize, usize),
    memory: impl Fn(usize) -> Memory,
) {
    let ops = [Operation::N, Operation::T];
    let mut case = 0usize;
    for &(m, n, k) in shapes {
        for &bs in &[32, 64, 96] {
            for (ta, tb) in [(ops[0], ops[0]), (ops[1], ops[0]), (ops[0], ops[1]), (ops[1], ops[1])] {
                case += 1;
                let (pad_a, pad_b) = pads(case, (ta, m, k), (tb, n));
                let a = Operand::<T>::random(rng, ta, m, k, pad_a);
                let b = Operand::<T>::random(rng, tb, k, n, pad_b);
                let (alpha, beta) = if case.is_multiple_of(2) { (1.0, 0.0) } else { odd_alpha_beta };
                let memory = memory(case);
                for tau in [0.0, median_norm_product(&a, &b, bs)] {
                    let call = Call {
                        a: &a,
                        b: &b,
                        m,
                        n,
                        k,
                        alpha,
                        beta,
                        tau: Given(tau),
                        block_size: bs,
                        math_mode: MathMode::Default,
                    };
                    let what = format!(
                        "{:?} {m}x{n}x{k} bs {bs} {ta:?}{tb:?} lda {} ldb {} α {alpha} β {beta} τ {tau} {memory:?}",
                        T::VALUE_TYPE,
                        a.ld,
                        b.ld,
                    );
                    call.check_against_cpu(&what, memory, rng);
                }
            }
        }
    }
}

/// The f64 tensor-core tile kernel (128 × 128 tiles) on products of several tiles in each direction:
/// every transpose, odd and even leading dimensions, A and B at addresses that are not 16-byte
/// aligned, block sizes 32, 64 and 96 (several groups of a tile in one C block), partial tiles and
/// partial k blocks, τ = 0 and a τ skipping about half of the block products; with three pipeline
/// stages (where the device gives the shared memory) and with two.
#[test]
fn f64_tile_kernel_across_tiles_transposes_alignments_and_block_sizes() {
    if !common::cuda_available("f64_tile_kernel_across_tiles_transposes_alignments_and_block_sizes") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu f64 tiles");
    // Three pipeline stages where the device gives the shared memory (an H100 does), then two.
    for fewest in [false, true] {
        with_cuda_setup(
            |_, hooks| hooks.spamm_fewest_shared_memory = fewest,
            || {
                tile_kernel_cases::<f64>(
                    &mut rng,
                    &[(300, 260, 333), (129, 257, 64), (256, 128, 97)],
                    (-1.25, 0.5),
                    |case, _, _| (case % 2, (case / 2) % 2),
                    |case| match case % 3 {
                        0 => Memory::Host,
                        1 => Memory::DeviceMisaligned,
                        _ => Memory::DeviceOnOwnStream,
                    },
                )
            },
        );
    }
}

/// A decay matrix `n × n` as an operand (no transpose).
fn decay_operand<T: GpuElement>(rng: &mut Rng, n: usize, exponential: bool) -> Operand<T> {
    let data = if exponential { exponential_decay(rng, n, n, 1.0, 0.9) } else { algebraic_decay(rng, n, n, 1.0, 2.0) };
    Operand { data, op: Operation::N, stored_rows: n, stored_cols: n, ld: n }
}

/// Frobenius norm of the difference of the m × n part of two column-major matrices with ldc = m + 3.
fn difference_norm<T: Element>(x: &[T], reference: &[f64], m: usize, n: usize) -> f64 {
    let mut s = 0.0;
    for j in 0..n {
        for i in 0..m {
            let d = x[i + j * (m + 3)].to_f64() - reference[i + j * m];
            s += d * d;
        }
    }
    s.sqrt()
}

fn decay_products<T: GpuElement>(rng: &mut Rng, n: usize, math_mode: MathMode) {
    let a = decay_operand::<T>(rng, n, false);
    let b = decay_operand::<T>(rng, n, true);
    let mut full = vec![0.0; n * n];
    common::reference_gemm(n, n, n, 1.0, |i, p| a.at(i, p), |p, j| b.at(p, j), 0.0, &mut full);
    let full_norm = full.iter().map(|x| x * x).sum::<f64>().sqrt();

    // τ = 0 is GEMM.
    let call = Call { a: &a, b: &b, m: n, n, k: n, alpha: 1.0, beta: 0.0, tau: Given(0.0), block_size: 32, math_mode };
    let (c, s) = call.check_against_cpu(&format!("{:?} {math_mode:?} decay τ = 0", T::VALUE_TYPE), Memory::Host, rng);
    assert_eq!(s.performedProducts, s.totalProducts);
    let compact: Vec<f64> = (0..n * n).map(|idx| c[idx % n + (idx / n) * (n + 3)].to_f64()).collect();
    let err = relative_error(&compact, &full);
    assert!(err <= T::GEMM_RTOL, "{:?}: τ = 0 relative error {err} against GEMM", T::VALUE_TYPE);

    // τ > 0: tuned on the GPU exactly as on the CPU, same skips, error within the bound.
    for &bs in &[32, 8, 48] {
        let mut tuned = [(0.0f64, 0.0f64); 2];
        for (slot, backend) in [BackendKind::Cpu, BackendKind::Cuda].into_iter().enumerate() {
            let h = handle(backend, bs);
            let (mut tau, mut ratio) = (0.0, 0.0);
            let status = unsafe {
                spammTuneTau(
                    h,
                    T::VALUE_TYPE as i32,
                    Operation::N as i32,
                    Operation::N as i32,
                    n as i32,
                    n as i32,
                    n as i32,
                    a.data.as_ptr().cast(),
                    n as i32,
                    b.data.as_ptr().cast(),
                    n as i32,
                    0.1,
                    0.005,
                    40,
                    &mut tau,
                    &mut ratio,
                )
            };
            assert_eq!(status, OK, "{}", last_error());
            tuned[slot] = (tau, ratio);
            assert_eq!(unsafe { spammDestroy(h) }, OK);
        }
        assert_eq!(
            tuned[0].0.to_bits(),
            tuned[1].0.to_bits(),
            "bs {bs}: tuned τ cpu {:?} gpu {:?}",
            tuned[0],
            tuned[1]
        );
        assert_eq!(tuned[0].1.to_bits(), tuned[1].1.to_bits(), "bs {bs}: tuned ratio");
        let tau = tuned[1].0;
        let call =
            Call { a: &a, b: &b, m: n, n, k: n, alpha: 1.0, beta: 0.0, tau: Given(tau), block_size: bs, math_mode };
        let what = format!("{:?} {math_mode:?} decay bs {bs} τ {tau}", T::VALUE_TYPE);
        let (c, s) = call.check_against_cpu(&what, Memory::Host, rng);
        assert_eq!(s.validRatio, tuned[1].1, "{what}: the product reports the tuned ratio");
        assert!(s.validRatio < 0.5, "{what}: tuning skipped too little ({})", s.validRatio);
        let err = difference_norm(&c, &full, n, n);
        let rounding = T::GEMM_RTOL * full_norm;
        assert!(err <= s.errorBound + rounding, "{what}: error {err} above bound {} + {rounding}", s.errorBound);
    }
}

#[test]
fn decay_matrices_gemm_at_tau_zero_and_within_the_bound_when_tuned() {
    if !common::cuda_available("decay_matrices_gemm_at_tau_zero_and_within_the_bound_when_tuned") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu decay");
    decay_products::<f32>(&mut rng, 600, MathMode::Default);
    decay_products::<f64>(&mut rng, 530, MathMode::Default);
    decay_products::<f16>(&mut rng, 600, MathMode::Default);
    decay_products::<bf16>(&mut rng, 600, MathMode::Default);
}

// ---- spammSgemm's math modes ------------------------------------------------------------------------

/// Several tiles, many k chunks, edges in every direction and both 16-byte-aligned and misaligned
/// leading dimensions, for both FP32 tile kernels (exact and 3xTF32) and every transpose pair.
fn large_shapes_against_cpu(rng: &mut Rng, math_mode: MathMode) {
    let mut case = 0usize;
    for &(m, n, k, bs) in &[(300, 260, 333, 32), (257, 129, 520, 64), (128, 384, 96, 32)] {
        for (ta, tb) in [
            (Operation::N, Operation::N),
            (Operation::T, Operation::N),
            (Operation::N, Operation::T),
            (Operation::T, Operation::T),
        ] {
            case += 1;
            let a = Operand::<f32>::random(rng, ta, m, k, case % 2);
            let b = Operand::<f32>::random(rng, tb, k, n, (case / 2) % 2 * 3);
            let (alpha, beta) = if case.is_multiple_of(2) { (1.0, 0.0) } else { (-1.25, 0.5) };
            for tau in [0.0, median_norm_product(&a, &b, bs)] {
                let call = Call { a: &a, b: &b, m, n, k, alpha, beta, tau: Given(tau), block_size: bs, math_mode };
                let what =
                    format!("f32 {math_mode:?} {m}x{n}x{k} bs {bs} {ta:?}{tb:?} lda {} ldb {} τ {tau}", a.ld, b.ld);
                let memory = if case % 3 == 1 { Memory::DeviceOnOwnStream } else { Memory::Host };
                call.check_against_cpu(&what, memory, rng);
            }
        }
    }
}

#[test]
fn fp32_tile_kernels_match_the_cpu_on_large_shapes_in_both_math_modes() {
    if !common::cuda_available("fp32_tile_kernels_match_the_cpu_on_large_shapes_in_both_math_modes") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu fp32 large");
    large_shapes_against_cpu(&mut rng, MathMode::Default);
    large_shapes_against_cpu(&mut rng, MathMode::Tf32x3);
}

#[test]
fn tf32x3_matches_the_cpu_and_an_f64_reference_on_every_shape_and_decay_input() {
    if !common::cuda_available("tf32x3_matches_the_cpu_and_an_f64_reference_on_every_shape_and_decay_input") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu 3xtf32");
    shapes_against_cpu::<f32>(&mut rng, MathMode::Tf32x3);
    decay_products::<f32>(&mut rng, 600, MathMode::Tf32x3);
    // spammDgemm and spammHgemm ignore the mode: the same results, bit for bit, as in the default mode.
    let (m, n, k) = (70, 65, 100);
    let run_both = |run: &dyn Fn(MathMode) -> Vec<u64>, ty: &str| {
        assert_eq!(run(MathMode::Default), run(MathMode::Tf32x3), "{ty}: the math mode changed a non-FP32 product");
    };
    let (a, b) = (
        Operand::<f64>::random(&mut rng, Operation::N, m, k, 0),
        Operand::<f64>::random(&mut rng, Operation::T, k, n, 1),
    );
    run_both(
        &|math_mode| {
            let call =
                Call { a: &a, b: &b, m, n, k, alpha: 1.0, beta: 0.0, tau: Given(0.0), block_size: 32, math_mode };
            call.run(BackendKind::Cuda, &vec![0.0; (m + 3) * n], Memory::Host).0.iter().map(|x| x.to_bits()).collect()
        },
        "f64",
    );
    let (a, b) = (
        Operand::<f16>::random(&mut rng, Operation::T, m, k, 0),
        Operand::<f16>::random(&mut rng, Operation::N, k, n, 0),
    );
    run_both(
        &|math_mode| {
            let call =
                Call { a: &a, b: &b, m, n, k, alpha: 1.0, beta: 0.0, tau: Given(0.0), block_size: 32, math_mode };
            let c0 = vec![f16::ZERO; (m + 3) * n];
            call.run(BackendKind::Cuda, &c0, Memory::Host).0.iter().map(|x| x.to_bits() as u64).collect()
        },
        "f16",
    );
}

#[test]
fn tuning_from_device_pointers_matches_host_pointers() {
    if !common::cuda_available("tuning_from_device_pointers_matches_host_pointers") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu tune device");
    let (m, n, k) = (200, 150, 170);
    let a = Operand::<f64>::random(&mut rng, Operation::T, m, k, 1);
    let b = Operand::<f64>::random(&mut rng, Operation::N, k, n, 0);
    let gpu = cuda::device(0).unwrap();
    let a_dev = DeviceBuffer::from_host(&gpu, &a.data, Stream::DEFAULT, "A").unwrap();
    let b_dev = DeviceBuffer::from_host(&gpu, &b.data, Stream::DEFAULT, "B").unwrap();
    let mut results = Vec::new();
    for (backend, pa, pb) in [
        (BackendKind::Cpu, a.data.as_ptr() as *const c_void, b.data.as_ptr() as *const c_void),
        (BackendKind::Cuda, a.data.as_ptr() as *const c_void, b.data.as_ptr() as *const c_void),
        (BackendKind::Cuda, a_dev.ptr() as *const c_void, b_dev.ptr() as *const c_void),
    ] {
        let h = handle(backend, 16);
        let (mut tau, mut ratio) = (0.0, 0.0);
        let status = unsafe {
            spammTuneTau(
                h,
                ValueType::F64 as i32,
                Operation::T as i32,
                Operation::N as i32,
                m as i32,
                n as i32,
                k as i32,
                pa,
                a.ld as i32,
                pb,
                b.ld as i32,
                0.3,
                0.0,
                30,
                &mut tau,
                &mut ratio,
            )
        };
        assert_eq!(status, OK, "{}", last_error());
        results.push((tau.to_bits(), ratio.to_bits()));
        assert_eq!(unsafe { spammDestroy(h) }, OK);
    }
    assert_eq!(results[0], results[1], "host pointers");
    assert_eq!(results[0], results[2], "device pointers");
}

/// The device evaluator of the τ searches against the CPU's, field by field and bit for bit: the
/// products' range, and counts, neighbouring products and skipped squares at candidate τ (random
/// norm products, the extremes, and values between), on shapes with zero blocks and odd sizes.
fn evaluator_matches_the_cpu<T: GpuElement>(rng: &mut Rng) {
    let gpu = cuda::device(0).unwrap();
    for &(m, n, k, bs, zero_rows) in
        &[(1, 1, 1, 32, 0), (70, 45, 33, 8, 0), (300, 200, 250, 16, 40), (130, 260, 95, 48, 0), (2050, 40, 30, 1, 7)]
    {
        let mut a = Operand::<T>::random(rng, Operation::N, m, k, 1);
        let b = Operand::<T>::random(rng, Operation::T, k, n, 2);
        for j in 0..k {
            for i in 0..zero_rows.min(m) {
                a.data[i + j * a.ld] = T::from_f64(0.0);
            }
        }
        let what = format!("{:?} {m}x{n}x{k} bs {bs}", T::VALUE_TYPE);
        let (an, bn) =
            (NormMap::of_operand(&a.gemm_operand(), bs).unwrap(), NormMap::of_operand(&b.gemm_operand(), bs).unwrap());
        let mut cpu = NormMapEvaluator::new(&an, &bn);
        let stream = Stream::DEFAULT;
        let (a_raw, b_raw) = (a.gemm_operand().raw(), b.gemm_operand().raw());
        let ad = unsafe { cuda_spamm::operand_norm_map(&gpu, stream, &a_raw, bs) }.unwrap();
        let bd = unsafe { cuda_spamm::operand_norm_map(&gpu, stream, &b_raw, bs) }.unwrap();
        assert_anticipated_search(&gpu, (&an, &bn), (&ad, &bd), 0.3, &what);
        let mut device = cuda_spamm::DeviceTauEvaluator::new(&gpu, stream, &ad, &bd).unwrap();
        let range = cpu.range().unwrap();
        assert_eq!(device.range().unwrap(), range, "{what}: range");
        let mut products: Vec<f64> = (0..an.block_rows)
            .flat_map(|i| (0..an.block_cols).flat_map(move |kk| (0..bn.block_cols).map(move |j| (i, kk, j))))
            .map(|(i, kk, j)| an.get(i, kk) * bn.get(kk, j))
            .collect();
        products.sort_by(f64::total_cmp);
        let mut taus: Vec<f64> = (0..60).map(|_| products[rng.below(products.len())]).collect();
        taus.extend([range.max, f64::from_bits(range.max.to_bits() + 1), range.positive_floor, range.min / 2.0]);
        let middle = products[products.len() / 2];
        taus.push(f64::from_bits(middle.to_bits() + 1));
        taus.retain(|&t| t > 0.0);
        taus.sort_by(f64::total_cmp);
        taus.dedup();
        taus.truncate(64);
        let (want, got) = (cpu.evaluate(&taus, false).unwrap(), device.evaluate(&taus, false).unwrap());
        for (w, g) in want.iter().zip(&got) {
            let bits = |e: &Evaluation| {
                (e.performed, e.smallest_performed.to_bits(), e.largest_skipped.to_bits(), e.skipped_squares.is_nan())
            };
            assert_eq!(bits(g), bits(w), "{what}: counts at tau {:e}: gpu {g:?} cpu {w:?}", w.tau);
        }
        for chunk in [&taus[..taus.len().min(16)], &taus[taus.len().saturating_sub(5)..], &taus[taus.len() / 2..][..1]]
        {
            let (want, got) = (cpu.evaluate(chunk, true).unwrap(), device.evaluate(chunk, true).unwrap());
            for (w, g) in want.iter().zip(&got) {
                assert_eq!(g.performed, w.performed, "{what}: count with squares at tau {:e}", w.tau);
                assert_eq!(
                    g.skipped_squares.to_bits(),
                    w.skipped_squares.to_bits(),
                    "{what}: skipped squares at tau {:e}: gpu {:e} cpu {:e}",
                    w.tau,
                    g.skipped_squares,
                    w.skipped_squares
                );
            }
        }
    }
    // A NaN in an operand: the range says so, as on the CPU.
    let mut a = Operand::<T>::random(rng, Operation::N, 40, 40, 0);
    a.data[77] = T::from_f64(f64::NAN);
    let raw = a.gemm_operand().raw();
    let ad = unsafe { cuda_spamm::operand_norm_map(&gpu, Stream::DEFAULT, &raw, 8) }.unwrap();
    let mut device = cuda_spamm::DeviceTauEvaluator::new(&gpu, Stream::DEFAULT, &ad, &ad).unwrap();
    let err = device.range().unwrap_err();
    assert!(err.message.contains("Inf or NaN"), "{}", err.message);
}

/// A valid-ratio search on the device, its first iteration anticipated (counted with the range, on
/// candidates the device derives from it), against the same search on the CPU: the same choice, and
/// the first iteration served by the anticipated counts whenever the search iterated at all.
fn assert_anticipated_search(
    gpu: &std::sync::Arc<cuda::GpuDevice>,
    (an, bn): (&NormMap, &NormMap),
    (ad, bd): (&cuda_spamm::DeviceNormMap, &cuda_spamm::DeviceNormMap),
    target: f64,
    what: &str,
) {
    let want = tune_for_ratio(&mut NormMapEvaluator::new(an, bn), target, 0.0, 3).unwrap();
    let mut device =
        cuda_spamm::DeviceTauEvaluator::new(gpu, Stream::DEFAULT, ad, bd).unwrap().anticipating_ratio_search();
    let got = tune_for_ratio(&mut device, target, 0.0, 3).unwrap();
    assert_eq!(
        (got.tau.to_bits(), got.valid_ratio.to_bits(), got.iterations),
        (want.tau.to_bits(), want.valid_ratio.to_bits(), want.iterations),
        "{what}: anticipated search chose {got:?}, the CPU {want:?}"
    );
    assert_eq!(device.anticipation_hits(), (want.iterations > 0) as usize, "{what}: anticipated iteration unused");
}

/// The anticipated first iteration where the device derives its candidates by each branch of the
/// host's spread: every bit pattern of a narrow range, evenly spaced patterns with the positive floor
/// (zero blocks) between two of them or on one of them, and no candidates when every product is equal.
#[test]
fn first_ratio_candidates_are_derived_on_the_device_as_on_the_host() {
    if !common::cuda_available("first_ratio_candidates_are_derived_on_the_device_as_on_the_host") {
        return;
    }
    let gpu = cuda::device(0).unwrap();
    let maps = |rows: usize, cols: usize, norms: Vec<f64>| {
        let device = cuda_spamm::DeviceNormMap {
            block_rows: rows,
            block_cols: cols,
            norms: DeviceBuffer::from_host(&gpu, &norms, Stream::DEFAULT, "norms").unwrap(),
        };
        (NormMap { block_rows: rows, block_cols: cols, norms }, device)
    };
    let bits = f64::from_bits;
    let one = 1.0f64.to_bits();
    // With min 0 and max q, from = 1 and width = q - 1: for q = 1 + 254·W the 255 evens are 1 + W·e.
    let w = (one - 1) / 254;
    let q = bits(1 + 254 * w);
    // (what, A's norm map and B's: block rows, block columns, norms column by column)
    type Map = (usize, usize, Vec<f64>);
    let cases: Vec<(&str, Map, Map)> = vec![
        (
            "a range of 108 patterns",
            (3, 2, vec![1.0, bits(one + 100), 1.0, 1.0, 1.0, 1.0]),
            (2, 4, vec![1.0, 1.0, 1.0, bits(one + 7), 1.0, 1.0, 1.0, 1.0]),
        ),
        ("the floor on an even pattern", (4, 2, vec![0.0, bits(1 + 100 * w), q, q, q, q, q, q]), (2, 3, vec![1.0; 6])),
        ("the floor between two", (4, 2, vec![0.0, bits(1 + 100 * w + 3), q, q, q, q, q, q]), (2, 3, vec![1.0; 6])),
        ("every product equal", (2, 2, vec![0.5; 4]), (2, 2, vec![2.0; 4])),
    ];
    for (what, (ar, ac, a), (br, bc, b)) in cases {
        let ((an, ad), (bn, bd)) = (maps(ar, ac, a), maps(br, bc, b));
        for target in [0.3, 0.5, 0.9] {
            assert_anticipated_search(&gpu, (&an, &bn), (&ad, &bd), target, &format!("{what}, target {target}"));
        }
    }
}

#[test]
fn tau_search_evaluations_are_bit_identical_to_the_cpu() {
    if !common::cuda_available("tau_search_evaluations_are_bit_identical_to_the_cpu") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu tune evaluator");
    evaluator_matches_the_cpu::<f64>(&mut rng);
    evaluator_matches_the_cpu::<f32>(&mut rng);
    evaluator_matches_the_cpu::<f16>(&mut rng);
    evaluator_matches_the_cpu::<bf16>(&mut rng);
}

/// Both searches through the C API on the CPU and on the GPU (host or device pointers), bit for bit.
#[allow(clippy::too_many_arguments)]
fn tune_both_ways<T: GpuElement>(
    a: &Operand<T>,
    b: &Operand<T>,
    (m, n, k): (usize, usize, usize),
    bs: usize,
    alpha: f64,
    epsilon: f64,
    what: &str,
) -> ((f64, f64), (f64, f64, f64)) {
    let gpu = cuda::device(0).unwrap();
    let a_dev = DeviceBuffer::from_host(&gpu, &a.data, Stream::DEFAULT, "A").unwrap();
    let b_dev = DeviceBuffer::from_host(&gpu, &b.data, Stream::DEFAULT, "B").unwrap();
    let alpha = T::Compute::from_f64(alpha);
    let mut results = Vec::new();
    for (backend, pa, pb) in [
        (BackendKind::Cpu, a.data.as_ptr() as *const c_void, b.data.as_ptr() as *const c_void),
        (BackendKind::Cuda, a.data.as_ptr() as *const c_void, b.data.as_ptr() as *const c_void),
        (BackendKind::Cuda, a_dev.ptr() as *const c_void, b_dev.ptr() as *const c_void),
    ] {
        let h = handle(backend, bs);
        let (mut tau, mut ratio, mut b_tau, mut b_bound, mut b_ratio) = (0.0, 0.0, 0.0, 0.0, 0.0);
        let (ta, tb, mi, ni, ki, lda, ldb) =
            (a.op as i32, b.op as i32, m as i32, n as i32, k as i32, a.ld as i32, b.ld as i32);
        let status = unsafe {
            spammTuneTau(
                h,
                T::VALUE_TYPE as i32,
                ta,
                tb,
                mi,
                ni,
                ki,
                pa,
                lda,
                pb,
                ldb,
                0.3,
                0.0,
                30,
                &mut tau,
                &mut ratio,
            )
        };
        assert_eq!(status, OK, "{what}: {}", last_error());
        let status = unsafe {
            spammTuneTauForErrorBound(
                h,
                T::VALUE_TYPE as i32,
                ta,
                tb,
                mi,
                ni,
                ki,
                &alpha as *const T::Compute as *const c_void,
                pa,
                lda,
                pb,
                ldb,
                epsilon,
                40,
                &mut b_tau,
                &mut b_bound,
                &mut b_ratio,
            )
        };
        assert_eq!(status, OK, "{what}: {}", last_error());
        results.push(((tau, ratio), (b_tau, b_bound, b_ratio)));
        assert_eq!(unsafe { spammDestroy(h) }, OK);
    }
    let bits = |r: &((f64, f64), (f64, f64, f64))| {
        (r.0.0.to_bits(), r.0.1.to_bits(), r.1.0.to_bits(), r.1.1.to_bits(), r.1.2.to_bits())
    };
    assert_eq!(
        bits(&results[1]),
        bits(&results[0]),
        "{what}: GPU (host pointers) {:?} vs CPU {:?}",
        results[1],
        results[0]
    );
    assert_eq!(
        bits(&results[2]),
        bits(&results[0]),
        "{what}: GPU (device pointers) {:?} vs CPU {:?}",
        results[2],
        results[0]
    );
    results[0]
}

/// The error-bound search on decay matrices: the same τ, bound and ratio as the CPU; the GPU product
/// at τ reports them exactly and its error stays within them.
fn bound_tuning_against_cpu<T: GpuElement>(rng: &mut Rng, n: usize) {
    let a = decay_operand::<T>(rng, n, false);
    let b = decay_operand::<T>(rng, n, true);
    let mut full = vec![0.0; n * n];
    common::reference_gemm(n, n, n, 1.0, |i, p| a.at(i, p), |p, j| b.at(p, j), 0.0, &mut full);
    let full_norm = full.iter().map(|x| x * x).sum::<f64>().sqrt();
    let alpha = 1.0;
    for &bs in &[32, 8, 48] {
        let everything = ProductPlan::new(&a.gemm_operand(), &b.gemm_operand(), f64::INFINITY, bs)
            .unwrap()
            .statistics(alpha, 0.0)
            .unwrap();
        for relative in [1e-6, 1e-3, 0.1] {
            let epsilon = relative * everything.error_bound;
            let what = format!("{:?} n {n} bs {bs} epsilon {epsilon:e}", T::VALUE_TYPE);
            let (_, (tau, bound, ratio)) = tune_both_ways(&a, &b, (n, n, n), bs, alpha, epsilon, &what);
            assert!(tau.is_finite() && bound <= epsilon, "{what}: tau {tau:e} bound {bound:e}");
            let call = Call {
                a: &a,
                b: &b,
                m: n,
                n,
                k: n,
                alpha,
                beta: 0.0,
                tau: Given(tau),
                block_size: bs,
                math_mode: MathMode::Default,
            };
            let (c, s) = call.run(BackendKind::Cuda, &vec![T::from_f64(0.0); (n + 3) * n], Memory::Host);
            // The ratio and the bound exactly: the product sums the bound in the search's order.
            assert_eq!(s.validRatio.to_bits(), ratio.to_bits(), "{what}: ratio");
            assert_eq!(s.errorBound.to_bits(), bound.to_bits(), "{what}: the product's bound vs the search's");
            assert!(s.errorBound <= epsilon, "{what}: bound {:e} above {epsilon:e}", s.errorBound);
            let err = difference_norm(&c, &full, n, n);
            assert!(err <= bound + T::GEMM_RTOL * full_norm, "{what}: error {err:e} above bound {bound:e}");
        }
    }
}

#[test]
fn error_bound_tuning_matches_the_cpu_and_the_product_reports_it() {
    if !common::cuda_available("error_bound_tuning_matches_the_cpu_and_the_product_reports_it") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu tune bound");
    bound_tuning_against_cpu::<f32>(&mut rng, 400);
    bound_tuning_against_cpu::<f64>(&mut rng, 330);
    bound_tuning_against_cpu::<f16>(&mut rng, 300);
    bound_tuning_against_cpu::<bf16>(&mut rng, 300);
}

/// Block size 1 and more than 4096 block rows or columns: the norm maps' segments are sorted in
/// global memory, one launch per bitonic step, rather than in shared memory.
#[test]
fn long_norm_segments_tune_as_on_the_cpu() {
    if !common::cuda_available("long_norm_segments_tune_as_on_the_cpu") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu tune long segments");
    for (m, n, k) in [(4100, 90, 5), (70, 4500, 4), (4096, 33, 3)] {
        let a = Operand::<f32>::random(&mut rng, Operation::N, m, k, 0);
        let b = Operand::<f32>::random(&mut rng, Operation::T, k, n, 1);
        let everything = ProductPlan::new(&a.gemm_operand(), &b.gemm_operand(), f64::INFINITY, 1)
            .unwrap()
            .statistics(1.0, 0.0)
            .unwrap();
        let what = format!("{m}x{n}x{k} bs 1");
        tune_both_ways(&a, &b, (m, n, k), 1, 1.0, 1e-3 * everything.error_bound, &what);
    }
}

/// The cost of the τ searches at N = 8192 in f32 (device arrays, after a warm-up; medians of 15 wall
/// clocks of whole calls, which wait for their results), beside the norms alone, the device's share
/// of an iteration (CUDA events around 20 queued iterations), an idle round trip, and the product at
/// the τ found. `SPAMM_TUNING_N=8192,16384` picks the sizes. Run with `--ignored --nocapture`.
#[test]
#[ignore]
fn tuning_cost_at_8192() {
    if !common::cuda_available("tuning_cost_at_8192") {
        return;
    }
    let sizes = std::env::var("SPAMM_TUNING_N").unwrap_or_else(|_| "8192".into());
    for n in sizes.split(',').map(|v| v.trim().parse::<usize>().unwrap()) {
        tuning_cost(n);
    }
}

fn tuning_cost(n: usize) {
    use cudarc::driver::result::event;
    let mut rng = Rng::fresh("spamm_gpu tuning cost");
    let gpu = cuda::device(0).unwrap();
    let a: Vec<f32> = algebraic_decay(&mut rng, n, n, 0.1, 0.1);
    let a_dev = DeviceBuffer::from_host(&gpu, &a, Stream::DEFAULT, "A").unwrap();
    let c_dev = DeviceBuffer::alloc(&gpu, n * n * 4, Stream::DEFAULT, "C").unwrap();
    let h = handle(BackendKind::Cuda, 32);
    let ap = a_dev.ptr() as *const c_void;
    let ni = n as i32;
    let median = |f: &mut dyn FnMut()| common::median_wall_ms(15, f);
    // Device milliseconds of one `f`, from events around 20 back-to-back calls.
    let device_ms = |f: &mut dyn FnMut()| unsafe {
        f();
        let (start, end) = (
            event::create(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT).unwrap(),
            event::create(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT).unwrap(),
        );
        event::record(start, Stream::DEFAULT.0).unwrap();
        for _ in 0..20 {
            f();
        }
        event::record(end, Stream::DEFAULT.0).unwrap();
        event::synchronize(end).unwrap();
        let ms = event::elapsed(start, end).unwrap() as f64 / 20.0;
        event::destroy(start).unwrap();
        event::destroy(end).unwrap();
        ms
    };
    let idle = median(&mut || gpu.synchronize(Stream::DEFAULT).unwrap());
    let word = DeviceBuffer::alloc(&gpu, 8, Stream::DEFAULT, "a word").unwrap();
    let round_trip = median(&mut || word.copy_to_host(&mut [0u64]).unwrap());
    let raw = RawOperand {
        ptr: a_dev.ptr() as *const f32,
        len: n * n,
        op: Operation::N,
        stored_rows: n,
        stored_cols: n,
        ld: n,
    };
    // The norms of A·A (what spammTuneTau, spammSgemm and the tuned products compute: one pass).
    let norms = median(&mut || {
        let maps = unsafe { cuda_spamm::operand_norm_maps(&gpu, Stream::DEFAULT, &raw, &raw, 32) }.unwrap();
        gpu.synchronize(Stream::DEFAULT).unwrap();
        drop(maps);
    });
    let norms_device = device_ms(&mut || {
        drop(unsafe { cuda_spamm::operand_norm_maps(&gpu, Stream::DEFAULT, &raw, &raw, 32) }.unwrap());
    });
    let x = unsafe { cuda_spamm::operand_norm_map(&gpu, Stream::DEFAULT, &raw, 32) }.unwrap();
    let setup = median(&mut || {
        let mut e = cuda_spamm::DeviceTauEvaluator::new(&gpu, Stream::DEFAULT, &x, &x).unwrap();
        e.range().unwrap();
    });
    let setup_device =
        device_ms(&mut || drop(cuda_spamm::DeviceTauEvaluator::new(&gpu, Stream::DEFAULT, &x, &x).unwrap()));
    // The same with the valid-ratio search's first iteration counted before the one wait.
    let anticipated = median(&mut || {
        let mut e =
            cuda_spamm::DeviceTauEvaluator::new(&gpu, Stream::DEFAULT, &x, &x).unwrap().anticipating_ratio_search();
        e.range().unwrap();
    });
    let mut e = cuda_spamm::DeviceTauEvaluator::new(&gpu, Stream::DEFAULT, &x, &x).unwrap();
    let range = e.range().unwrap();
    let spread = |count: usize, low: f64, high: f64| -> Vec<f64> {
        (0..count).map(|c| low + (high - low) * (c as f64 + 0.5) / count as f64).collect()
    };
    let taus = spread(256, range.min, range.max);
    let ratio_iteration = median(&mut || drop(e.evaluate(&taus, false).unwrap()));
    let ratio_device = device_ms(&mut || {
        e.queue(&taus, false).unwrap();
    });
    let wide = spread(16, range.min, range.max);
    let middle = (range.min + range.max) / 2.0;
    let narrow: Vec<f64> = (0..16).map(|c| middle * (1.0 + c as f64 * 1e-12)).collect();
    let bound_wide = median(&mut || drop(e.evaluate(&wide, true).unwrap()));
    let bound_wide_device = device_ms(&mut || {
        e.queue(&wide, true).unwrap();
    });
    let bound_narrow = median(&mut || drop(e.evaluate(&narrow, true).unwrap()));
    let bound_narrow_device = device_ms(&mut || {
        e.queue(&narrow, true).unwrap();
    });
    println!(
        "TUNING N {n} f32 bs 32: idle synchronize {idle:.4} ms, 8-byte copy back {round_trip:.4} ms; norm maps of A·A {norms:.4} ms (device {norms_device:.4} ms, \
         {:.0} GB/s); \
         sort + range {setup:.4} ms (device {setup_device:.4} ms), with the first ratio iteration {anticipated:.4} ms; ratio iteration (256 candidates) {ratio_iteration:.4} ms \
         (device {ratio_device:.4} ms); bound iteration (16 candidates) spread {bound_wide:.4} ms (device {bound_wide_device:.4} ms), \
         clustered {bound_narrow:.4} ms (device {bound_narrow_device:.4} ms)",
        (n * n * 4) as f64 / norms_device / 1e6
    );
    let (alpha, beta) = (1.0f32, 0.0f32);
    let gemm_at = |tau: f64| {
        median(&mut || {
            let st = unsafe {
                spammSgemm(h, 0, 0, ni, ni, ni, &alpha, ap as _, ni, ap as _, ni, &beta, c_dev.ptr() as _, ni, tau)
            };
            assert_eq!(st, OK, "{}", last_error());
            gpu.synchronize(Stream::DEFAULT).unwrap();
        })
    };
    for target in [0.05, 0.1, 0.3] {
        for tol in [0.01, 0.005] {
            let choice = unsafe { spamm_handle_object(h).unwrap().tune_tau(&raw, &raw, target, tol, 20) }.unwrap();
            let (mut tau, mut ratio) = (0.0, 0.0);
            let call = median(&mut || {
                let st = unsafe {
                    spammTuneTau(
                        h,
                        ValueType::F32 as i32,
                        0,
                        0,
                        ni,
                        ni,
                        ni,
                        ap,
                        ni,
                        ap,
                        ni,
                        target,
                        tol,
                        20,
                        &mut tau,
                        &mut ratio,
                    )
                };
                assert_eq!(st, OK, "{}", last_error());
            });
            let gemm = gemm_at(tau);
            let mut searched = 0.0;
            let tuned = median(&mut || {
                let st = unsafe {
                    spammGemmAtValidRatio(
                        h,
                        ValueType::F32 as i32,
                        0,
                        0,
                        ni,
                        ni,
                        ni,
                        &alpha as *const f32 as _,
                        ap,
                        ni,
                        ap,
                        ni,
                        &beta as *const f32 as _,
                        c_dev.ptr() as _,
                        ni,
                        target,
                        tol,
                        20,
                        &mut searched,
                    )
                };
                assert_eq!(st, OK, "{}", last_error());
                gpu.synchronize(Stream::DEFAULT).unwrap();
            });
            assert_eq!(searched.to_bits(), tau.to_bits(), "the tuned product's tau is spammTuneTau's");
            let search = tuned - gemm;
            println!(
                "TUNING N {n} f32 target {target} tol {tol}: {choice:?}; spammTuneTau {call:.4} ms with the norms, {:.4} ms \
                 without; spammSgemm at that tau {gemm:.3} ms; tuning without / with norms = {:.2} / {:.2} % of the product; \
                 spammGemmAtValidRatio {tuned:.3} ms: norms {norms:.4} + search {search:.4} ms = {:.2} % of it",
                call - norms,
                100.0 * (call - norms) / gemm,
                100.0 * call / gemm,
                100.0 * (norms + search) / tuned
            );
        }
    }
    let everything = ProductPlan::new(
        &GemmOperand { data: &a, op: Operation::N, stored_rows: n, stored_cols: n, ld: n },
        &GemmOperand { data: &a, op: Operation::N, stored_rows: n, stored_cols: n, ld: n },
        f64::INFINITY,
        32,
    )
    .unwrap()
    .statistics(1.0, 0.0)
    .unwrap();
    for relative in [1e-4, 1e-2] {
        let epsilon = relative * everything.error_bound;
        let mut choice = None;
        let call = median(&mut || {
            let handle = unsafe { spamm_handle_object(h) }.unwrap();
            choice = Some(unsafe { handle.tune_tau_for_error_bound(&raw, &raw, 1.0f32, epsilon, 20) }.unwrap());
        });
        let choice = choice.unwrap();
        let gemm = gemm_at(choice.tau);
        println!(
            "TUNING N {n} f32 error bound {epsilon:e}: {choice:?}; spammTuneTauForErrorBound {call:.4} ms with the norms; \
             spammSgemm at that tau {gemm:.3} ms"
        );
    }
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

#[test]
fn an_allocation_failure_leaves_c_untouched() {
    if !common::cuda_available("an_allocation_failure_leaves_c_untouched") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu allocation");
    let (m, n, k) = (40, 30, 50);
    let a = Operand::<f32>::random(&mut rng, Operation::N, m, k, 0);
    let b = Operand::<f32>::random(&mut rng, Operation::N, k, n, 0);
    let h = handle(BackendKind::Cuda, 32);
    let mut c = vec![POISON as f32; m * n];
    let (alpha, beta) = (1.0f32, 0.0f32);
    memory::inject_allocation_failures(1);
    let status = unsafe {
        spammSgemm(
            h,
            0,
            0,
            m as i32,
            n as i32,
            k as i32,
            &alpha,
            a.data.as_ptr(),
            m as i32,
            b.data.as_ptr(),
            k as i32,
            &beta,
            c.as_mut_ptr(),
            m as i32,
            0.0,
        )
    };
    memory::inject_allocation_failures(0);
    assert_eq!(status, Status::AllocationFailed as i32, "{}", last_error());
    assert!(c.iter().all(|&x| x == POISON as f32), "C was written");
    let mut s = spammStats_t::default();
    assert_eq!(unsafe { spammGetStats(h, &mut s) }, Status::InvalidValue as i32, "no stats after failures");
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

/// Rough timings at N = 4096 (device arrays, wall clock of 5 calls after a warm-up, up to the end of
/// their work on the device: the get-norm kernels, the lists, the products and the statistics). Run
/// with `--ignored --nocapture`.
#[test]
#[ignore]
fn timing_at_4096() {
    if !common::cuda_available("timing_at_4096") {
        return;
    }
    let mut rng = Rng::fresh("spamm_gpu timing");
    let n = 4096;
    time_type::<f32>(&mut rng, n);
    time_type::<f64>(&mut rng, n);
    time_type::<f16>(&mut rng, n);
    time_type::<bf16>(&mut rng, n);
}

fn time_type<T: GpuElement>(rng: &mut Rng, n: usize) {
    let gpu = cuda::device(0).unwrap();
    let a = decay_operand::<T>(rng, n, false);
    let b = decay_operand::<T>(rng, n, false);
    let a_dev = DeviceBuffer::from_host(&gpu, &a.data, Stream::DEFAULT, "A").unwrap();
    let b_dev = DeviceBuffer::from_host(&gpu, &b.data, Stream::DEFAULT, "B").unwrap();
    let c_dev = DeviceBuffer::alloc(&gpu, n * n * std::mem::size_of::<T>(), Stream::DEFAULT, "C").unwrap();
    let h = handle(BackendKind::Cuda, 32);
    let (mut tuned, mut ratio) = (0.0, 0.0);
    let status = unsafe {
        spammTuneTau(
            h,
            T::VALUE_TYPE as i32,
            0,
            0,
            n as i32,
            n as i32,
            n as i32,
            a_dev.ptr() as *const c_void,
            n as i32,
            b_dev.ptr() as *const c_void,
            n as i32,
            0.1,
            0.01,
            40,
            &mut tuned,
            &mut ratio,
        )
    };
    assert_eq!(status, OK, "{}", last_error());
    let (alpha, beta) = (T::Compute::from_f64(1.0), T::Compute::from_f64(0.0));
    for tau in [0.0, tuned] {
        let call = || {
            let status = unsafe {
                T::gemm(
                    h,
                    0,
                    0,
                    n as i32,
                    n as i32,
                    n as i32,
                    &alpha,
                    a_dev.ptr() as *const T,
                    n as i32,
                    b_dev.ptr() as *const T,
                    n as i32,
                    &beta,
                    c_dev.ptr() as *mut T,
                    n as i32,
                    tau,
                )
            };
            assert_eq!(status, OK, "{}", last_error());
        };
        call();
        gpu.synchronize(Stream::DEFAULT).unwrap();
        let repeats = 5;
        let started = std::time::Instant::now();
        for _ in 0..repeats {
            call();
        }
        // The products run on the device after the calls return: wait for them.
        gpu.synchronize(Stream::DEFAULT).unwrap();
        let seconds = started.elapsed().as_secs_f64() / repeats as f64;
        let s = stats(h);
        let flops = 2.0 * (n as f64).powi(3) * s.validRatio;
        println!(
            "TIMING {:?} N {n} bs 32 tau {tau:.3e} valid ratio {:.4}: {:.3} ms, {:.2} TFLOP/s effective",
            T::VALUE_TYPE,
            s.validRatio,
            seconds * 1e3,
            flops / seconds / 1e12
        );
    }
    assert_eq!(unsafe { spammDestroy(h) }, OK);
}

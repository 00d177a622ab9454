//! SpAMM against cuBLAS GEMM: spammSgemm / spammDgemm vs cublasSgemm / cublasDgemm, spammHgemm and
//! spammGemmEx on bf16 vs cublasGemmEx (FP16 / BF16 data, CUBLAS_COMPUTE_32F, FP32 α / β: the same
//! semantics). At τ = 0 the two
//! must agree to rounding; at the τ spammTuneTau finds for each target valid ratio, the actual error
//! against the vendor result must stay within the bound the library reports. spammSgemm is measured
//! in both math modes: exact FP32 (the default) and, on a row of its own, "spammSgemm 3xTF32" at the
//! same τ against the same cublasSgemm.

use crate::gpu::{DeviceBuffer, Outcome};
use crate::report::{Measurement, Verdict, table_header};
use crate::vendor::Cublas;
use crate::{Bench, HostArray, announce_probe, check, download_as, tolerance, type_name, type_size, upload_as};
use sparsegpu::ValueType;
use sparsegpu::capi::spamm::*;
use sparsegpu::testgen::{self, Rng};
use std::time::Instant;

/// The `spammMathMode` values of `include/sparsegpu.h`, which the C API takes as `int`.
const SPAMM_MATH_MODE_DEFAULT: spammMathMode_t = 0;
const SPAMM_MATH_MODE_TF32X3: spammMathMode_t = 1;

struct Handle(spammHandle_t);

impl Handle {
    fn new(b: &Bench, block_size: usize) -> Outcome<Handle> {
        let mut h = std::ptr::null_mut();
        check(unsafe { spammCreate(&mut h) }, "spammCreate")?;
        let handle = Handle(h);
        check(unsafe { spammSetBlockSize(h, block_size as i32) }, "spammSetBlockSize")?;
        check(unsafe { spammSetBackend(h, sparsegpu::BackendKind::Cuda as i32) }, "spammSetBackend(CUDA)")?;
        check(unsafe { spammSetStream(h, b.gpu.raw_stream()) }, "spammSetStream")?;
        Ok(handle)
    }

    /// C = A·B (column-major N×N, no transposes) at τ.
    fn gemm(
        &self,
        ty: ValueType,
        n: usize,
        a: &DeviceBuffer,
        bm: &DeviceBuffer,
        c: &DeviceBuffer,
        tau: f64,
    ) -> Outcome<()> {
        let ni = n as i32;
        let (one, zero) = (1.0f32, 0.0f32);
        let (done, dzero) = (1.0f64, 0.0f64);
        let h = self.0;
        unsafe {
            match ty {
                ValueType::F32 => check(
                    spammSgemm(
                        h,
                        0,
                        0,
                        ni,
                        ni,
                        ni,
                        &one,
                        a.ptr() as _,
                        ni,
                        bm.ptr() as _,
                        ni,
                        &zero,
                        c.ptr() as _,
                        ni,
                        tau,
                    ),
                    "spammSgemm",
                ),
                ValueType::F64 => check(
                    spammDgemm(
                        h,
                        0,
                        0,
                        ni,
                        ni,
                        ni,
                        &done,
                        a.ptr() as _,
                        ni,
                        bm.ptr() as _,
                        ni,
                        &dzero,
                        c.ptr() as _,
                        ni,
                        tau,
                    ),
                    "spammDgemm",
                ),
                ValueType::F16 => check(
                    spammHgemm(
                        h,
                        0,
                        0,
                        ni,
                        ni,
                        ni,
                        &one,
                        a.ptr() as _,
                        ni,
                        bm.ptr() as _,
                        ni,
                        &zero,
                        c.ptr() as _,
                        ni,
                        tau,
                    ),
                    "spammHgemm",
                ),
                ValueType::Bf16 => check(
                    spammGemmEx(
                        h,
                        ty as i32,
                        0,
                        0,
                        ni,
                        ni,
                        ni,
                        scalar_arg(ty, &one, &done),
                        a.ptr() as _,
                        ni,
                        bm.ptr() as _,
                        ni,
                        scalar_arg(ty, &zero, &dzero),
                        c.ptr() as _,
                        ni,
                        tau,
                    ),
                    "spammGemmEx",
                ),
            }
        }
    }

    /// τ for a target valid ratio, searched on host copies of A and B: tuning is setup, not timed,
    /// and host arrays are valid on every backend.
    fn tune(&self, ty: ValueType, n: usize, a: &HostArray, bm: &HostArray, target: f64) -> Outcome<(f64, f64)> {
        self.tune_ptr(ty, n, a.ptr(), bm.ptr(), target)
    }

    /// spammTuneTau on A and B at any address (host or device).
    fn tune_ptr(
        &self,
        ty: ValueType,
        n: usize,
        a: *const std::ffi::c_void,
        bm: *const std::ffi::c_void,
        target: f64,
    ) -> Outcome<(f64, f64)> {
        let ni = n as i32;
        let (mut tau, mut achieved) = (0.0, 0.0);
        check(
            unsafe {
                spammTuneTau(
                    self.0,
                    ty as i32,
                    0,
                    0,
                    ni,
                    ni,
                    ni,
                    a,
                    ni,
                    bm,
                    ni,
                    target,
                    // Within 1 % of the target: a 5 % product lands between 4.95 and 5.05 %.
                    target * 0.01,
                    30,
                    &mut tau,
                    &mut achieved,
                )
            },
            "spammTuneTau",
        )?;
        Ok((tau, achieved))
    }

    /// C = A·B at the τ the call itself searches for (norm maps computed once): spammGemmAtValidRatio
    /// with the search, tolerance and budget of [`Handle::tune_ptr`], or spammGemmWithinErrorBound;
    /// returns that τ.
    fn tuned_gemm(
        &self,
        ty: ValueType,
        n: usize,
        (a, bm, c): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
        rule: TauSearch,
    ) -> Outcome<f64> {
        let ni = n as i32;
        let (one32, zero32, one64, zero64) = (1.0f32, 0.0f32, 1.0f64, 0.0f64);
        let (one, zero) = (scalar_arg(ty, &one32, &one64), scalar_arg(ty, &zero32, &zero64));
        let (a, bm, c) = (a.ptr() as _, bm.ptr() as _, c.ptr() as _);
        let mut tau = 0.0;
        let h = self.0;
        unsafe {
            match rule {
                TauSearch::ValidRatio(target) => check(
                    spammGemmAtValidRatio(
                        h,
                        ty as i32,
                        0,
                        0,
                        ni,
                        ni,
                        ni,
                        one,
                        a,
                        ni,
                        bm,
                        ni,
                        zero,
                        c,
                        ni,
                        target,
                        target * 0.01,
                        30,
                        &mut tau,
                    ),
                    "spammGemmAtValidRatio",
                ),
                TauSearch::ErrorBound(bound) => check(
                    spammGemmWithinErrorBound(
                        h, ty as i32, 0, 0, ni, ni, ni, one, a, ni, bm, ni, zero, c, ni, bound, 30, &mut tau,
                    ),
                    "spammGemmWithinErrorBound",
                ),
            }
        }?;
        Ok(tau)
    }

    /// Products on devices 0..k (the harness's stream on device 0 is the caller's).
    fn set_devices(&self, k: usize) -> Outcome<()> {
        let devices: Vec<i32> = (0..k as i32).collect();
        check(unsafe { spammSetDevices(self.0, k as i32, devices.as_ptr()) }, "spammSetDevices")
    }

    fn set_math_mode(&self, mode: spammMathMode_t) -> Outcome<()> {
        check(unsafe { spammSetMathMode(self.0, mode) }, "spammSetMathMode")
    }

    fn stats(&self) -> Outcome<spammStats_t> {
        let mut stats = unsafe { std::mem::zeroed::<spammStats_t>() };
        check(unsafe { spammGetStats(self.0, &mut stats) }, "spammGetStats")?;
        Ok(stats)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { spammDestroy(self.0) };
    }
}

/// α or β as the untyped entry points take it: a double for f64, a float for the other types.
fn scalar_arg<'a>(ty: ValueType, x32: &'a f32, x64: &'a f64) -> *const std::ffi::c_void {
    match ty {
        ValueType::F64 => x64 as *const f64 as *const std::ffi::c_void,
        _ => x32 as *const f32 as *const std::ffi::c_void,
    }
}

fn op_name(ty: ValueType) -> &'static str {
    match ty {
        ValueType::F32 => "spammSgemm",
        ValueType::F64 => "spammDgemm",
        ValueType::F16 => "spammHgemm",
        ValueType::Bf16 => "spammGemmEx bf16",
    }
}

/// What a product that searches its own τ aims at.
#[derive(Clone, Copy)]
enum TauSearch {
    /// This fraction of the block products performed.
    ValidRatio(f64),
    /// The largest τ whose reported error bound is at most this (absolute, Frobenius).
    ErrorBound(f64),
}

/// Fills an N×N column-major decay matrix.
type Generator = fn(&mut Rng, usize) -> Vec<f64>;

const EXPONENTIAL: &str = "exponential 0.99^|i-j|";

fn exponential(rng: &mut Rng, n: usize) -> Vec<f64> {
    testgen::exponential_decay(rng, n, n, 1.0, 0.99)
}

pub fn run(b: &mut Bench) {
    let n = b.opts.n.unwrap_or(if b.opts.quick { 1024 } else { 4096 });
    let default_targets: &[f64] = if b.opts.quick { &[0.2, 0.05] } else { &[0.3, 0.2, 0.1, 0.05] };
    let targets = b.opts.ratios.clone().unwrap_or_else(|| default_targets.to_vec());
    let block_size = b.opts.block_size.unwrap_or(32);
    let types =
        b.opts.types.clone().unwrap_or_else(|| vec![ValueType::F32, ValueType::F16, ValueType::Bf16, ValueType::F64]);
    table_header(&format!(
        "SpAMM: C = A·B, N = {n}, column-major, LoNum {block_size}; vendor cuBLAS; dens/vr = valid ratio; GFLOP/s dense-equivalent (2N³/t), %peak of the vendor GEMM rate"
    ));
    let available = probe(b);
    announce_probe("SpAMM", &available);
    let mut rng = Rng::new(b.seed ^ 0x5a);
    let inputs: [(&str, Generator); 2] = [
        ("algebraic 0.1/(|i-j|^0.1+1)", |rng, n| testgen::algebraic_decay(rng, n, n, 0.1, 0.1)),
        (EXPONENTIAL, exponential),
    ];
    let decay = b.opts.decay.clone().unwrap_or_else(|| "both".into());
    for (input, generate) in inputs {
        if decay != "both" && !input.starts_with(decay.as_str()) {
            continue;
        }
        let a_host = generate(&mut rng, n);
        // --square: no B of its own (C = A·A).
        let b_host = (!b.opts.square).then(|| generate(&mut rng, n));
        let label = if b.opts.square { format!("{input}, C = A·A") } else { input.to_string() };
        let input = label.as_str();
        for &ty in &types {
            if let Err(why) = case(b, &available, input, ty, (n, block_size), &a_host, b_host.as_deref(), &targets) {
                let mut m = Measurement::new(
                    "spamm",
                    op_name(ty),
                    Cublas::gemm_name(ty),
                    type_name(ty),
                    input,
                    format!("N={n}"),
                );
                m.not_available(format!("harness or vendor failure: {why}"));
                b.report.push(m);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn case(
    b: &mut Bench,
    available: &Outcome<()>,
    input: &str,
    ty: ValueType,
    (n, block_size): (usize, usize),
    a_host: &[f64],
    b_host: Option<&[f64]>,
    targets: &[f64],
) -> Outcome<()> {
    let gpu = &b.gpu;
    let bytes = n * n * type_size(ty);
    // Without a B of its own, B is A's buffer itself, so the library sees one matrix (A·A).
    let a = upload_as(gpu, ty, a_host, "A")?;
    let b_owned = b_host.map(|b_host| upload_as(gpu, ty, b_host, "B")).transpose()?;
    let b_host = b_host.unwrap_or(a_host);
    let bm = b_owned.as_ref().unwrap_or(&a);
    let c_vendor = gpu.zeros(bytes, "C (vendor)")?;
    let c_ours = gpu.zeros(bytes, "C (ours)")?;
    let vendor = gpu.time(|| b.blas.gemm(ty, (n, n, n), 1.0, a.ptr(), n, bm.ptr(), n, 0.0, c_vendor.ptr(), n))?;
    let reference = download_as(gpu, ty, &c_vendor, n * n)?;

    let mut base =
        Measurement::new("spamm", op_name(ty), Cublas::gemm_name(ty), type_name(ty), input, format!("N={n}"));
    base.vendor_ms = Some(vendor.gpu_ms);
    base.vendor_wall_ms = Some(vendor.wall_ms);
    base.flops = Some(2.0 * (n as f64).powi(3));
    base.peak = b.peaks.gemm(ty).map(|p| (p, "GFLOP/s"));

    let (a_typed, b_typed) = (HostArray::new(ty, a_host), HostArray::new(ty, b_host));
    let handle = match available.clone().and_then(|_| Handle::new(b, block_size)) {
        Ok(h) => h,
        Err(why) => {
            base.not_available(why);
            b.report.push(base);
            return Ok(());
        }
    };
    // Fixed costs: the product at τ = ∞ (norm maps, work lists, statistics, C = 0; no block
    // product), and spammTuneTau on the device-resident A and B (median wall time of 5; norm maps
    // included).
    let fixed = b.gpu.time(|| handle.gemm(ty, n, &a, bm, &c_ours, f64::INFINITY))?;
    let mut tune_ms = Vec::new();
    for _ in 0..6 {
        let began = Instant::now();
        handle.tune_ptr(ty, n, a.ptr() as _, bm.ptr() as _, 0.1)?;
        tune_ms.push(began.elapsed().as_secs_f64() * 1e3);
    }
    tune_ms.remove(0);
    tune_ms.sort_by(f64::total_cmp);
    let fixed_note = format!(
        "at tau = inf (norms, lists, stats, C = 0) {:.3} ms; spammTuneTau(0.1) on device A, B {:.3} ms",
        fixed.gpu_ms, tune_ms[2]
    );
    let mut points: Vec<Option<f64>> = if b.opts.no_exact { vec![] } else { vec![None] };
    points.extend(targets.iter().map(|&t| Some(t)));
    // One timed product at τ into `m`: time, valid ratio, error against the vendor's C and the verdict.
    let measure = |m: &mut Measurement, tau: f64| -> Outcome<()> {
        handle.gemm(ty, n, &a, bm, &c_ours, tau)?;
        let stats = handle.stats()?;
        let t = b.gpu.time(|| handle.gemm(ty, n, &a, bm, &c_ours, tau))?;
        m.ours_ms = Some(t.gpu_ms);
        m.ours_wall_ms = Some(t.wall_ms);
        m.valid_ratio = Some(stats.validRatio);
        let ours = download_as(&b.gpu, ty, &c_ours, n * n)?;
        judge(m, ty, &ours, &reference, stats.errorBound);
        Ok(())
    };
    let counts = b.device_counts(1);
    for (target, k) in points.iter().flat_map(|&t| counts.iter().map(move |&k| (t, k))) {
        let mut m = base.clone();
        m.devices = k;
        // The table's op names the devices of a multi-device product ("spammSgemm x2").
        let on_devices = |op: &str| if k > 1 { format!("{op} x{k}") } else { op.to_string() };
        m.op = on_devices(&m.op);
        let mut extra = None;
        let result = (|| -> Outcome<()> {
            handle.set_devices(k)?;
            let tau = match target {
                None => {
                    m.note = fixed_note.clone();
                    0.0
                }
                Some(t) => {
                    let began = Instant::now();
                    let (tau, achieved) = handle.tune(ty, n, &a_typed, &b_typed, t)?;
                    m.note =
                        format!("target {t}, tuned to {achieved:.4} in {:.0} ms", began.elapsed().as_secs_f64() * 1e3);
                    tau
                }
            };
            m.tau = Some(tau);
            measure(&mut m, tau)?;
            if ty == ValueType::F32 {
                handle.set_math_mode(SPAMM_MATH_MODE_TF32X3)?;
                let mut fast = m.clone();
                fast.op = on_devices("spammSgemm 3xTF32");
                let outcome = measure(&mut fast, tau);
                handle.set_math_mode(SPAMM_MATH_MODE_DEFAULT)?;
                if let Err(why) = outcome {
                    fast.not_available(why);
                }
                extra = Some(fast);
            }
            if let Some(t) = target {
                // The same product with τ searched inside it (norm maps computed once): its cost over
                // the product at that τ is the search's. A failure here is noted, not the row's.
                let plain = m.ours_ms.unwrap_or(f64::NAN);
                let mut searched = tau;
                let tuned = b
                    .gpu
                    .time(|| {
                        handle
                            .tuned_gemm(ty, n, (&a, bm, &c_ours), TauSearch::ValidRatio(t))
                            .map(|found| searched = found)
                    })
                    .and_then(|tuned| match searched.to_bits() == tau.to_bits() {
                        true => Ok(tuned),
                        false => Err(format!("it chose tau {searched:e}, spammTuneTau {tau:e}")),
                    });
                m.note += &match tuned {
                    Ok(tuned) => format!(
                        "; spammGemmAtValidRatio {:.3} ms ({:+.1} % over the product at its tau)",
                        tuned.gpu_ms,
                        (tuned.gpu_ms / plain - 1.0) * 100.0
                    ),
                    Err(why) => format!("; spammGemmAtValidRatio failed: {why}"),
                };
            }
            Ok(())
        })();
        if let Err(why) = result {
            m.not_available(why);
        }
        b.report.push(m);
        if let Some(fast) = extra {
            b.report.push(fast);
        }
    }
    Ok(())
}

/// spammGemmWithinErrorBound against the vendor GEMM on the exponential-decay input, N×N: C = A·B at
/// the largest τ whose reported error bound is at most `relative_budget`·‖C‖_F (‖C‖_F of the vendor's
/// product), the search of τ inside the timed call as a caller pays it. The error against the
/// vendor's result must stay within the reported bound plus the type's tolerance.
pub fn within_error_budget(b: &mut Bench, n: usize, types: &[ValueType], relative_budget: f64) {
    let mut rng = Rng::new(b.seed ^ 0xeb);
    let (a_host, b_host) = (exponential(&mut rng, n), exponential(&mut rng, n));
    for &ty in types {
        let op = "spammGemmWithinErrorBound";
        let mut m = Measurement::new("spamm", op, Cublas::gemm_name(ty), type_name(ty), EXPONENTIAL, format!("N={n}"));
        if let Err(why) = budget_case(b, &mut m, (n, ty), (&a_host, &b_host), relative_budget) {
            m.not_available(why);
        }
        b.report.push(m);
    }
}

fn budget_case(
    b: &Bench,
    m: &mut Measurement,
    (n, ty): (usize, ValueType),
    (a_host, b_host): (&[f64], &[f64]),
    relative_budget: f64,
) -> Outcome<()> {
    let gpu = &b.gpu;
    let (a, bm) = (upload_as(gpu, ty, a_host, "A")?, upload_as(gpu, ty, b_host, "B")?);
    let bytes = n * n * type_size(ty);
    let (c_vendor, c_ours) = (gpu.zeros(bytes, "C (vendor)")?, gpu.zeros(bytes, "C (ours)")?);
    let vendor = gpu.time(|| b.blas.gemm(ty, (n, n, n), 1.0, a.ptr(), n, bm.ptr(), n, 0.0, c_vendor.ptr(), n))?;
    let reference = download_as(gpu, ty, &c_vendor, n * n)?;
    let norm = reference.iter().map(|x| x * x).sum::<f64>().sqrt();
    m.vendor_ms = Some(vendor.gpu_ms);
    m.vendor_wall_ms = Some(vendor.wall_ms);
    m.flops = Some(2.0 * (n as f64).powi(3));
    m.peak = b.peaks.gemm(ty).map(|p| (p, "GFLOP/s"));
    let handle = Handle::new(b, 32)?;
    let mut tau = 0.0;
    let rule = TauSearch::ErrorBound(relative_budget * norm);
    let t = gpu.time(|| handle.tuned_gemm(ty, n, (&a, &bm, &c_ours), rule).map(|found| tau = found))?;
    let stats = handle.stats()?;
    m.ours_ms = Some(t.gpu_ms);
    m.ours_wall_ms = Some(t.wall_ms);
    m.tau = Some(tau);
    m.valid_ratio = Some(stats.validRatio);
    let ours = download_as(gpu, ty, &c_ours, n * n)?;
    judge(m, ty, &ours, &reference, stats.errorBound);
    m.note = format!("budget {relative_budget:e}·‖C‖_F; the search of tau is inside the timed call");
    Ok(())
}

/// Our C against the vendor's: the relative error and the reported bound of ‖C_exact − C‖_F
/// (`error_bound`, relative to ‖C_vendor‖_F once recorded) into `m`, and a mismatch where the error
/// exceeds the bound: it holds against the exact product, from which the vendor's result differs by
/// rounding, which the type's tolerance covers.
fn judge(m: &mut Measurement, ty: ValueType, ours: &[f64], reference: &[f64], error_bound: f64) {
    let (err, norm) = crate::gpu::relative_error(ours, reference);
    let bound = error_bound / norm.max(f64::MIN_POSITIVE);
    m.error = Some(err);
    m.error_bound = Some(bound);
    let allowed = bound * 1.001 + tolerance(ty);
    if !crate::gpu::within(err, allowed) {
        m.verdict = Verdict::Mismatch(format!(
            "relative error {err:.3e} against {} exceeds {allowed:.3e} (reported bound {bound:.3e} + tolerance {:.0e})",
            Cublas::gemm_name(ty),
            tolerance(ty)
        ));
    }
}

/// What host arrays cost a caller: spammSgemm on the exponential-decay input at the τ of
/// `target` valid ratio, once on host arrays (A and B copied in, C out, within the call) and once on
/// device-resident ones; median wall times in milliseconds, (host, device).
pub fn host_staging(b: &Bench, n: usize, target: f64) -> Outcome<(f64, f64)> {
    let ty = ValueType::F32;
    let mut rng = Rng::new(b.seed ^ 0x57);
    let (a_host, b_host) =
        (HostArray::new(ty, &exponential(&mut rng, n)), HostArray::new(ty, &exponential(&mut rng, n)));
    let handle = Handle::new(b, 32)?;
    let (tau, _) = handle.tune(ty, n, &a_host, &b_host, target)?;
    let (a, bm) = (a_host.upload(&b.gpu, "A")?, b_host.upload(&b.gpu, "B")?);
    let c = b.gpu.zeros(n * n * type_size(ty), "C")?;
    let device = b.gpu.time(|| handle.gemm(ty, n, &a, &bm, &c, tau))?;
    let mut c_host = vec![0.0f32; n * n];
    let ni = n as i32;
    let (one, zero) = (1.0f32, 0.0f32);
    let mut host_ms: Vec<f64> = (0..4)
        .map(|_| {
            let began = Instant::now();
            let (a, bm) = (a_host.ptr() as *const f32, b_host.ptr() as *const f32);
            let c = c_host.as_mut_ptr();
            let status = unsafe { spammSgemm(handle.0, 0, 0, ni, ni, ni, &one, a, ni, bm, ni, &zero, c, ni, tau) };
            check(status, "spammSgemm on host arrays").map(|_| began.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<Outcome<_>>()?;
    host_ms.remove(0);
    Ok((crate::gpu::median(&mut host_ms), device.wall_ms))
}

/// A 2×2 product on host arrays through a CUDA handle.
fn probe(b: &Bench) -> Outcome<()> {
    let handle = Handle::new(b, 32)?;
    let (one, zero) = (1.0f32, 0.0f32);
    let a = [1.0f32, 0.0, 0.0, 1.0];
    let mut c = [0.0f32; 4];
    check(
        unsafe {
            spammSgemm(handle.0, 0, 0, 2, 2, 2, &one, a.as_ptr(), 2, a.as_ptr(), 2, &zero, c.as_mut_ptr(), 2, 0.0)
        },
        "spammSgemm",
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn math_mode_values_are_the_headers() {
        let header = include_str!("../../include/sparsegpu.h");
        for (name, value) in [
            ("SPAMM_MATH_MODE_DEFAULT", super::SPAMM_MATH_MODE_DEFAULT),
            ("SPAMM_MATH_MODE_TF32X3", super::SPAMM_MATH_MODE_TF32X3),
        ] {
            let line = format!("  {name} = {value},");
            assert!(header.lines().any(|l| l == line), "include/sparsegpu.h has no line {line:?}");
        }
    }
}

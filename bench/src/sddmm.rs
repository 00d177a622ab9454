//! SDDMM against cuSPARSE over densities and widths k: sddmmDynamic (algorithm chosen per call,
//! preprocessing redone each call) and sddmmExecutePlan (pattern preprocessed once), the latter also
//! with each algorithm forced, vs cusparseSDDMM (CSR, CUSPARSE_SDDMM_ALG_DEFAULT,
//! cusparseSDDMM_preprocess once, outside the timing). S is a pattern (values 1): ours computes
//! out[e] = ⟨A_i, B_j⟩ at e = (i, j), cuSPARSE (A·Bᵀ) ∘ spy(S). At the end: how often the dispatch
//! (SDDMM_ALGORITHM_AUTO) chose the faster algorithm.

use crate::gpu::Outcome;
use crate::report::{Measurement, Verdict, table_header};
use crate::vendor::{Scalar, Sddmm};
use crate::{Bench, announce_probe, check, download_as, suite, tolerance, type_name, type_size, upload_as};
use sparsegpu::capi::sddmm::*;
use sparsegpu::sddmm::SddmmMathMode;
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng};
use sparsegpu::{Layout, ValueType};

struct Handle(sddmmHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { sddmmDestroy(self.0) };
    }
}

struct Plan(sddmmPlan_t);

impl Drop for Plan {
    fn drop(&mut self) {
        unsafe { sddmmDestroyPlan(self.0) };
    }
}

/// The math mode of the handles' f32 calls (`--sddmm-math`).
fn math_mode(b: &Bench) -> SddmmMathMode {
    match b.opts.sddmm_math.as_deref() {
        Some("tf32") => SddmmMathMode::Tf32,
        Some("tf32x3") => SddmmMathMode::Tf32x3,
        _ => SddmmMathMode::Default,
    }
}

/// The report's type column for calls of `ty` in `math`: f32's TF32 modes are named.
fn measured_type(ty: ValueType, math: SddmmMathMode) -> &'static str {
    match (ty, math) {
        (ValueType::F32, SddmmMathMode::Tf32) => "f32 tf32",
        (ValueType::F32, SddmmMathMode::Tf32x3) => "f32 3xtf32",
        _ => type_name(ty),
    }
}

/// How far our result may be from cuSPARSE's (relative Frobenius error): TF32's products, rounded
/// to 11 significant bits, move random dot products by about 2e-4.
fn sddmm_tolerance(ty: ValueType, math: SddmmMathMode) -> f64 {
    if ty == ValueType::F32 && math == SddmmMathMode::Tf32 { 2e-3 } else { tolerance(ty) }
}

/// `sddmmAlgorithm_t` values of `include/sparsegpu.h`.
const AUTO: i32 = 0;
const FORCED: [(i32, &str); 2] = [(1, "tiled"), (2, "COO")];

pub fn run(b: &mut Bench) {
    let size = b.opts.n.unwrap_or(if b.opts.quick { 4096 } else { 8192 });
    let widths = b.opts.widths.clone().unwrap_or_else(|| vec![64]);
    let default_densities: &[f64] = if b.opts.quick { &[1e-4, 1e-2] } else { &[1e-5, 1e-4, 1e-3, 1e-2, 5e-2] };
    let densities = b.opts.densities.clone().unwrap_or_else(|| default_densities.to_vec());
    let default_types: &[ValueType] = if b.opts.quick { &[ValueType::F32] } else { &[ValueType::F32, ValueType::F64] };
    let types = b.opts.types.clone().unwrap_or_else(|| default_types.to_vec());
    let widths_text = widths.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ");
    table_header(&format!(
        "SDDMM: out = (A·Bᵀ) at the nonzeros of S, {}, k = {widths_text}, row-major; vendor cusparseSDDMM (CSR); GFLOP/s = 2·nnz·k/t, %peak of the copy bandwidth for compulsory traffic",
        if b.opts.suite.is_some() {
            "the patterns of the matrix suite".to_string()
        } else {
            format!("random {size}x{size}")
        }
    ));
    let available = probe(b);
    announce_probe("SDDMM", &available);
    let mut rng = Rng::new(b.seed ^ 0x5d);
    let first_row = b.report.rows.len();
    // The patterns: random at each density, or the matrix suite's (--suite).
    let mut patterns: Vec<(String, Outcome<CsrMatrix<f64>>)> = Vec::new();
    match b.opts.suite.clone() {
        Some(names) => {
            let scale = if b.opts.quick { suite::QUICK_SCALE } else { 1.0 };
            for name in names {
                let entry = suite::find(name).expect("--suite names entries of the suite");
                patterns.push((name.to_string(), entry.matrix(b.seed, scale)));
            }
        }
        None => {
            for &density in &densities {
                patterns.push(("random".into(), Ok(testgen::random_csr::<f64>(&mut rng, size, size, density))));
            }
        }
    }
    for &k in &widths {
        for (input, pattern) in &patterns {
            let pattern = match pattern {
                Ok(p) => p,
                Err(why) => {
                    let mut m =
                        Measurement::new("sddmm", "sddmmDynamic", "cusparseSDDMM", "-", input, format!("k={k}"));
                    m.not_available(format!("the pattern could not be made: {why}"));
                    b.report.push(m);
                    continue;
                }
            };
            let a_host: Vec<f64> = rng.vec(pattern.rows * k);
            let b_host: Vec<f64> = rng.vec(pattern.cols * k);
            for &ty in &types {
                if let Err(why) = case(b, &available, input, pattern, ty, k, &a_host, &b_host) {
                    let (rows, cols) = (pattern.rows, pattern.cols);
                    let mut m = Measurement::new(
                        "sddmm",
                        "sddmmDynamic",
                        "cusparseSDDMM",
                        type_name(ty),
                        input,
                        format!("{rows}x{cols} k={k}"),
                    );
                    m.density = Some(pattern.nnz() as f64 / (rows as f64 * cols as f64));
                    m.not_available(format!("harness or vendor failure: {why}"));
                    b.report.push(m);
                }
            }
        }
    }
    dispatch_score(&b.report.rows[first_row..]);
}

/// The algorithm a measured call ran, as [`measure`] notes it.
fn algorithm_of(m: &Measurement) -> &'static str {
    if m.note.starts_with("algorithm tiled") { "tiled" } else { "COO" }
}

/// How often sddmmExecutePlan with the algorithm left to the dispatch chose the faster of the two
/// forced algorithms (or one within 3 % of it, the run-to-run spread: where both are, either is the
/// faster), how often its time was within 3 % of the faster's, and its worst ratio to it. The two
/// counts differ where a call of 10-20 µs runs the faster algorithm's kernel and its time moves by
/// more than 3 % from one measurement to the next.
fn dispatch_score(rows: &[Measurement]) {
    let (mut cells, mut chose_faster, mut as_fast, mut worst) = (0, 0, 0, 1.0f64);
    for auto in rows.iter().filter(|m| m.op == "sddmmExecutePlan") {
        let same_case = |m: &&Measurement| (m.ty, &m.input, &m.shape) == (auto.ty, &auto.input, &auto.shape);
        let forced: Vec<(&Measurement, f64)> =
            rows.iter().filter(|m| m.forced).filter(same_case).filter_map(|m| Some((m, m.ours_ms?))).collect();
        let (Some(ours), Some(best)) = (auto.ours_ms, forced.iter().map(|&(_, t)| t).reduce(f64::min)) else {
            continue;
        };
        cells += 1;
        let near_best = |t: f64| t <= best * 1.03;
        chose_faster += usize::from(forced.iter().any(|&(m, t)| near_best(t) && algorithm_of(m) == algorithm_of(auto)));
        as_fast += usize::from(near_best(ours));
        worst = worst.max(ours / best);
    }
    if cells > 0 {
        println!(
            "dispatch: chose the faster forced algorithm (or one within 3 % of it) in {chose_faster} of {cells} \
             cells; as fast as the faster (within 3 %) in {as_fast} of {cells}; at worst {worst:.2}× its time"
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn case(
    b: &mut Bench,
    available: &Outcome<()>,
    input: &str,
    s: &CsrMatrix<f64>,
    ty: ValueType,
    k: usize,
    a_host: &[f64],
    b_host: &[f64],
) -> Outcome<()> {
    let gpu = &b.gpu;
    let (m_rows, n_cols, nnz) = (s.rows, s.cols, s.nnz());
    let size = type_size(ty);
    let a = upload_as(gpu, ty, a_host, "A")?;
    let bm = upload_as(gpu, ty, b_host, "B")?;
    let pattern = crate::upload_csr(gpu, ty, s)?;
    let out = gpu.zeros(nnz * size, "out (ours)")?;

    // cuSPARSE has no bf16 SDDMM: bf16 is timed against its f16 on the same inputs rounded to f16
    // (the same bytes moved), and checked against that f16 result.
    let vendor_ty = if ty == ValueType::Bf16 { ValueType::F16 } else { ty };
    let vendor_inputs = if vendor_ty == ty {
        None
    } else {
        Some((
            upload_as(gpu, vendor_ty, a_host, "A (vendor)")?,
            upload_as(gpu, vendor_ty, b_host, "B (vendor)")?,
            crate::upload_csr(gpu, vendor_ty, s)?,
        ))
    };
    let (va, vb, vpattern) = match &vendor_inputs {
        Some((va, vb, vp)) => (va, vb, vp),
        None => (&a, &bm, &pattern),
    };
    let vendor_op = Sddmm::new(&b.sparse, gpu, vpattern, k, va.ptr(), vb.ptr())?;
    vendor_op.run()?;
    let vendor = gpu.time(|| vendor_op.run())?;
    let reference = download_as(gpu, vendor_ty, &vpattern.values, nnz)?;

    let mut base = Measurement::new(
        "sddmm",
        "sddmmDynamic",
        if vendor_ty == ty { "cusparseSDDMM CSR" } else { "cusparseSDDMM CSR f16" },
        measured_type(ty, math_mode(b)),
        input,
        format!("{m_rows}x{n_cols} k={k} nnz={nnz}"),
    );
    base.density = Some(nnz as f64 / (m_rows as f64 * n_cols as f64));
    base.vendor_ms = Some(vendor.gpu_ms);
    base.vendor_wall_ms = Some(vendor.wall_ms);
    base.flops = Some(2.0 * nnz as f64 * k as f64);
    // A and B read once, the pattern read, out written.
    base.bytes = Some(((m_rows + n_cols) * k * size + nnz * (4 + size) + (m_rows + 1) * 4) as f64);
    base.peak = Some((b.peaks.copy_gbps, "GB/s"));

    let handle = available.clone().and_then(|_| new_handle(b));
    let alpha = Scalar::new(ty, 1.0);
    let (ki, layout) = (k as i32, Layout::RowMajor as i32);

    // sddmmDynamic: the whole call, pattern analysis included, as a caller without a plan pays it.
    let mut dynamic = base.clone();
    let result = handle.as_ref().map_err(Clone::clone).and_then(|handle| {
        let call = || {
            check(
                unsafe {
                    sddmmDynamic(
                        handle.0,
                        m_rows as i32,
                        n_cols as i32,
                        ki,
                        alpha.ptr(),
                        a.ptr() as *const _,
                        ki,
                        bm.ptr() as *const _,
                        ki,
                        layout,
                        nnz as i64,
                        pattern.row_ptr.ptr() as *const i32,
                        pattern.col_ind.ptr() as *const i32,
                        std::ptr::null(),
                        sparsegpu::IndexBase::Zero as i32,
                        ty as i32,
                        out.ptr() as *mut _,
                    )
                },
                "sddmmDynamic",
            )
        };
        call()?;
        measure(b, &mut dynamic, handle, call, &out, ty, nnz, &reference)
    });
    if let Err(why) = result {
        dynamic.not_available(why);
    }
    b.report.push(dynamic);

    // sddmmExecutePlan: the pattern preprocessed once (as cuSPARSE's preprocess is).
    let mut planned = base.clone();
    planned.op = "sddmmExecutePlan".into();
    let result = handle.as_ref().map_err(Clone::clone).and_then(|handle| {
        let mut p = std::ptr::null_mut();
        check(
            unsafe {
                sddmmCreatePlan(
                    handle.0,
                    &mut p,
                    m_rows as i32,
                    n_cols as i32,
                    nnz as i64,
                    s.row_ptr.as_ptr(),
                    s.col_ind.as_ptr(),
                    sparsegpu::IndexBase::Zero as i32,
                )
            },
            "sddmmCreatePlan",
        )?;
        let plan = Plan(p);
        let call = || {
            check(
                unsafe {
                    sddmmExecutePlan(
                        handle.0,
                        plan.0,
                        ki,
                        alpha.ptr(),
                        a.ptr() as *const _,
                        ki,
                        bm.ptr() as *const _,
                        ki,
                        layout,
                        std::ptr::null(),
                        ty as i32,
                        out.ptr() as *mut _,
                    )
                },
                "sddmmExecutePlan",
            )
        };
        call()?;
        measure(b, &mut planned, handle, call, &out, ty, nnz, &reference)?;
        b.report.push(planned.clone());
        for (algorithm, name) in FORCED {
            let mut forced = base.clone();
            forced.op = format!("sddmmExecutePlan {name}");
            forced.forced = true;
            check(unsafe { sddmmSetAlgorithm(handle.0, algorithm) }, "sddmmSetAlgorithm")?;
            let result = call().and_then(|_| measure(b, &mut forced, handle, call, &out, ty, nnz, &reference));
            if let Err(why) = result {
                forced.not_available(why);
            }
            b.report.push(forced);
        }
        // The planned row is recorded; a failure from here on belongs to no row.
        if let Err(why) = check(unsafe { sddmmSetAlgorithm(handle.0, AUTO) }, "sddmmSetAlgorithm") {
            eprintln!("sparsegpu-bench: {why}");
        }
        Ok(())
    });
    if let Err(why) = result {
        planned.not_available(why);
        b.report.push(planned);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn measure(
    b: &Bench,
    m: &mut Measurement,
    handle: &Handle,
    call: impl Fn() -> Outcome<()>,
    out: &crate::gpu::DeviceBuffer,
    ty: ValueType,
    nnz: usize,
    reference: &[f64],
) -> Outcome<()> {
    let t = b.gpu.time(call)?;
    let tolerance = sddmm_tolerance(ty, math_mode(b));
    m.ours_ms = Some(t.gpu_ms);
    m.ours_wall_ms = Some(t.wall_ms);
    let mut algorithm = 0;
    check(unsafe { sddmmGetLastAlgorithm(handle.0, &mut algorithm) }, "sddmmGetLastAlgorithm")?;
    m.note = format!("algorithm {}", if algorithm == 1 { "tiled" } else { "COO" });
    let got = download_as(&b.gpu, ty, out, nnz)?;
    let (err, _) = crate::gpu::relative_error(&got, reference);
    m.error = Some(err);
    if !crate::gpu::within(err, tolerance) {
        m.verdict =
            Verdict::Mismatch(format!("relative error {err:.3e} against cusparseSDDMM exceeds {tolerance:.0e}"));
    }
    Ok(())
}

fn new_handle(b: &Bench) -> Outcome<Handle> {
    let mut h = std::ptr::null_mut();
    check(unsafe { sddmmCreate(&mut h) }, "sddmmCreate")?;
    let handle = Handle(h);
    check(unsafe { sddmmSetBackend(h, sparsegpu::BackendKind::Cuda as i32) }, "sddmmSetBackend(CUDA)")?;
    check(unsafe { sddmmSetStream(h, b.gpu.raw_stream()) }, "sddmmSetStream")?;
    check(unsafe { sddmmSetMathMode(h, math_mode(b) as i32) }, "sddmmSetMathMode")?;
    Ok(handle)
}

/// A 2×2 identity pattern, k = 1, on host arrays through a CUDA handle.
fn probe(b: &Bench) -> Outcome<()> {
    let handle = new_handle(b)?;
    let (row_ptr, col_ind) = ([0i32, 1, 2], [0i32, 1]);
    let (a, bm) = ([1.0f32, 2.0], [3.0f32, 4.0]);
    let one = 1.0f32;
    let mut out = [0.0f32; 2];
    check(
        unsafe {
            sddmmDynamic(
                handle.0,
                2,
                2,
                1,
                (&one as *const f32).cast(),
                a.as_ptr().cast(),
                1,
                bm.as_ptr().cast(),
                1,
                Layout::RowMajor as i32,
                2,
                row_ptr.as_ptr(),
                col_ind.as_ptr(),
                std::ptr::null(),
                sparsegpu::IndexBase::Zero as i32,
                ValueType::F32 as i32,
                out.as_mut_ptr().cast(),
            )
        },
        "sddmmDynamic",
    )
}

//! SMaT against cuSPARSE and cuBLAS: smatSpMM (C = A·B, B and C row-major, A analysed once per
//! value type and reused at every width of B) vs cusparseSpMM on the same CSR, every CSR algorithm of
//! cuSPARSE timed and the fastest taken (FP32 compute for 16-bit and f32 data), and vs a dense GEMM
//! on A densified (cublasGemmEx FP16 / BF16 with COMPUTE_32F, cublasSgemm, cublasDgemm), which is
//! what a caller without a sparse library would do. Inputs: generated N×N matrices, or the matrix
//! suite (`--suite`, suite.rs); and `--mtx` files.

use crate::gpu::{DeviceBuffer, Outcome};
use crate::report::{Measurement, Verdict, table_header};
use crate::suite;
use crate::vendor::{Cublas, DeviceCsr, Fastest, Scalar, SpMM, SpmmAlg};
use crate::{
    Bench, HostArray, announce_probe, check, download_as, mtx_name, read_mtx, type_name, type_size, upload_csr,
};
use rayon::prelude::*;
use sparsegpu::capi::smat::*;
use sparsegpu::scalar::Element;
use sparsegpu::smat::{SmatMathMode, StorageFormat};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng};
use sparsegpu::{Layout, ValueType};
use std::time::Instant;

/// Densified A above this size is not built (the GEMM row is reported as skipped).
const DENSE_LIMIT_BYTES: usize = 4 << 30;

/// What the vendor rows name: the fastest of the CSR algorithms, which `vendor_alg` names.
const VENDOR_OP: &str = "cusparseSpMM CSR fastest";

struct Handle(smatHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { smatDestroy(self.0) };
    }
}

struct Matrix(smatMatrix_t);

impl Drop for Matrix {
    fn drop(&mut self) {
        unsafe { smatDestroyMatrix(self.0) };
    }
}

/// The relative error SMaT may show against cuSPARSE, or against an f64 product when they disagree:
/// the family's usual one, and for f32 in 3xTF32 the mode's promise of FP32-level accuracy.
fn smat_tolerance(ty: ValueType, tf32x3: bool) -> f64 {
    if ty == ValueType::F32 && tf32x3 { TF32X3_TOLERANCE } else { crate::tolerance(ty) }
}

/// What 3xTF32 must achieve against an f64 product of the same inputs.
const TF32X3_TOLERANCE: f64 = 1e-5;

/// Whether the handles multiply f32 tiles in 3xTF32 (`--smat-math tf32x3`).
fn tf32x3(b: &Bench) -> bool {
    b.opts.smat_math.as_deref() == Some("tf32x3")
}

/// A matrix the family is measured on.
struct Input {
    name: String,
    /// The report's class label (suite.rs's classes; "mtx" for a file given with --mtx).
    class: &'static str,
    matrix: CsrMatrix<f64>,
}

pub fn run(b: &mut Bench) {
    let suite = b.opts.suite.clone();
    let widths = b.opts.widths.clone().unwrap_or_else(|| if suite.is_some() { vec![32, 128, 512] } else { vec![128] });
    let types = b.opts.types.clone().unwrap_or_else(|| {
        if suite.is_some() {
            vec![ValueType::F16, ValueType::Bf16, ValueType::F32, ValueType::F64]
        } else {
            vec![ValueType::F16, ValueType::F32]
        }
    });
    let widths_text = widths.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ");
    table_header(&format!(
        "SMaT: C = A·B, A sparse, B dense with n = {widths_text} columns, row-major; vendor: the fastest of cusparseSpMM's CSR algorithms, and cuBLAS GEMM on densified A; GFLOP/s useful (2·nnz·n/t), %peak of the vendor GEMM rate; analysis once per matrix and type"
    ));
    let available = probe(b);
    announce_probe("SMaT", &available);
    match &suite {
        Some(names) => {
            let scale = if b.opts.quick { suite::QUICK_SCALE } else { 1.0 };
            for name in names {
                let entry = suite::find(name).expect("--suite names entries of the suite");
                let began = Instant::now();
                match entry.matrix(b.seed, scale) {
                    Ok(matrix) => {
                        let a = &matrix;
                        println!(
                            "-- {name} ({}): {}, {}x{}, {} nonzeros, drawn in {:.2} s",
                            entry.class.label(),
                            entry.about,
                            a.rows,
                            a.cols,
                            a.nnz(),
                            began.elapsed().as_secs_f64()
                        );
                        let input = Input { name: name.to_string(), class: entry.class.label(), matrix };
                        measure(b, &available, &input, &types, &widths);
                    }
                    Err(why) => unreadable(b, name, entry.class.label(), why),
                }
            }
        }
        None => {
            let size = b.opts.n.unwrap_or(if b.opts.quick { 4096 } else { 16384 });
            let mut rng = Rng::new(b.seed ^ 0x53);
            let mut inputs: Vec<Input> = Vec::new();
            let densities: &[f64] = if b.opts.quick { &[1e-2] } else { &[1e-3, 1e-2, 5e-2] };
            for &d in densities {
                inputs.push(Input {
                    name: format!("random {d}"),
                    class: "random",
                    matrix: testgen::random_csr(&mut rng, size, size, d),
                });
            }
            inputs.push(Input {
                name: "band hw 16".into(),
                class: "band",
                matrix: testgen::band_csr(&mut rng, size, 16),
            });
            inputs.push(Input {
                name: "block 16x16 2% fill .6".into(),
                class: "block",
                matrix: testgen::block_csr(&mut rng, size, size, 16, 0.02, 0.6),
            });
            let scale = (size as f64).log2().ceil() as u32;
            inputs.push(Input {
                name: format!("R-MAT scale {scale} ef 16"),
                class: "graph",
                matrix: testgen::rmat_csr(&mut rng, scale, 16),
            });
            for input in &inputs {
                measure(b, &available, input, &types, &widths);
            }
        }
    }
    for path in &b.opts.mtx.clone() {
        match read_mtx(path) {
            Ok(matrix) => {
                measure(b, &available, &Input { name: mtx_name(path), class: "mtx", matrix }, &types, &widths)
            }
            Err(why) => unreadable(b, &mtx_name(path), "mtx", why),
        }
    }
    summarise(&b.report.rows);
}

fn unreadable(b: &mut Bench, name: &str, class: &'static str, why: String) {
    let mut m = Measurement::new("smat", "smatSpMM", VENDOR_OP, "-", name, String::new());
    m.class = class;
    m.not_available(why);
    b.report.push(m);
}

fn shape(a: &CsrMatrix<f64>, n: usize) -> String {
    format!("{}x{} n={n}", a.rows, a.cols)
}

/// The width n a row's shape names.
fn width_of(m: &Measurement) -> Option<usize> {
    m.shape.rsplit_once(" n=").and_then(|(_, n)| n.parse().ok())
}

/// One input in every type; in each, A is analysed once and measured at every width.
fn measure(b: &mut Bench, available: &Outcome<()>, input: &Input, types: &[ValueType], widths: &[usize]) {
    for &ty in types {
        if let Err(why) = measure_type(b, available, input, ty, widths) {
            for &n in widths {
                harness_failure(b, input, ty, n, &why);
            }
        }
    }
}

/// The row of a product the harness or the vendor could not measure.
fn harness_failure(b: &mut Bench, input: &Input, ty: ValueType, n: usize, why: &str) {
    let mut m = Measurement::new("smat", "smatSpMM", VENDOR_OP, type_name(ty), &input.name, shape(&input.matrix, n));
    m.class = input.class;
    m.not_available(format!("harness or vendor failure: {why}"));
    b.report.push(m);
}

/// A matrix analysed for one value type. The matrix is destroyed before its handle.
struct Analysed {
    matrix: Matrix,
    handle: Handle,
    /// smatCreateCsr's wall time from the host CSR: reordering, blocking, and the blocks' upload.
    ms: f64,
    info: smatMatrixInfo_t,
}

/// smatCreateCsr from the host CSR: setup, timed apart; host arrays are what callers usually have.
fn analyse(b: &Bench, a: &CsrMatrix<f64>, ty: ValueType) -> Outcome<Analysed> {
    let handle = new_handle(b)?;
    let values = HostArray::new(ty, &a.values);
    let mut m = std::ptr::null_mut();
    let began = Instant::now();
    check(
        unsafe {
            smatCreateCsr(
                handle.0,
                &mut m,
                a.rows as i32,
                a.cols as i32,
                a.nnz() as i64,
                a.row_ptr.as_ptr(),
                a.col_ind.as_ptr(),
                values.ptr(),
                ty as i32,
                sparsegpu::IndexBase::Zero as i32,
            )
        },
        "smatCreateCsr",
    )?;
    let matrix = Matrix(m);
    let ms = began.elapsed().as_secs_f64() * 1e3;
    let mut info = smatMatrixInfo_t::default();
    check(unsafe { smatGetMatrixInfo(matrix.0, &mut info) }, "smatGetMatrixInfo")?;
    Ok(Analysed { matrix, handle, ms, info })
}

/// Row-major `A · B` in f64 from A's values rounded to `ty` (as uploaded) and B's values as drawn.
fn exact_product(a: &CsrMatrix<f64>, ty: ValueType, b: &[f64], n: usize) -> Vec<f64> {
    let round = |v: f64| match ty {
        ValueType::F16 => half::f16::from_f64(v).to_f64(),
        ValueType::Bf16 => half::bf16::from_f64(v).to_f64(),
        ValueType::F32 => (v as f32) as f64,
        ValueType::F64 => v,
    };
    let mut c = vec![0.0; a.rows * n];
    c.par_chunks_mut(n.max(1)).enumerate().for_each(|(r, row)| {
        for e in a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize {
            let (k, v) = (a.col_ind[e] as usize, round(a.values[e]));
            for (x, bk) in row.iter_mut().zip(&b[k * n..(k + 1) * n]) {
                *x += v * bk;
            }
        }
    });
    c
}

/// Bytes of a CSR with 32-bit indices: row pointers, a column index and a value per entry.
fn csr_bytes(a: &CsrMatrix<f64>, ty: ValueType) -> u64 {
    ((a.rows + 1) * 4 + a.nnz() * (4 + type_size(ty))) as u64
}

/// Row-major dense copy of A in `ty` (duplicates summed), built in that type so that the host never
/// holds more than the device does, rows in parallel.
fn densify(a: &CsrMatrix<f64>, ty: ValueType) -> HostArray {
    fn fill<T: Element>(a: &CsrMatrix<f64>) -> Vec<T> {
        let mut dense = vec![T::default(); a.rows * a.cols];
        dense.par_chunks_mut(a.cols.max(1)).enumerate().for_each(|(r, row)| {
            for e in a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize {
                let c = a.col_ind[e] as usize;
                row[c] = T::from_f64(row[c].to_f64() + a.values[e]);
            }
        });
        dense
    }
    match ty {
        ValueType::F16 => HostArray::F16(fill(a)),
        ValueType::Bf16 => HostArray::Bf16(fill(a)),
        ValueType::F32 => HostArray::F32(fill(a)),
        ValueType::F64 => HostArray::F64(fill(a)),
    }
}

fn measure_type(b: &mut Bench, available: &Outcome<()>, input: &Input, ty: ValueType, widths: &[usize]) -> Outcome<()> {
    let a = &input.matrix;
    let csr: DeviceCsr = upload_csr(&b.gpu, ty, a)?;
    let analysed = available.clone().and_then(|()| analyse(b, a, ty));
    let dense_bytes = a.rows * a.cols * type_size(ty);
    let dense_a =
        if dense_bytes <= DENSE_LIMIT_BYTES { Some(densify(a, ty).upload(&b.gpu, "A densified")?) } else { None };
    for &n in widths {
        if let Err(why) = measure_width(b, input, &csr, &analysed, dense_a.as_ref(), ty, n) {
            harness_failure(b, input, ty, n, &why);
        }
    }
    Ok(())
}

/// Times every CSR algorithm cuSPARSE accepts for these operands (each with its own workspace and
/// preprocessing, set up outside the timing) and leaves the fastest one's result in C.
fn fastest_spmm<'a>(b: &'a Bench, csr: &DeviceCsr, n: usize, bm: u64, c: u64) -> Outcome<Fastest<SpMM<'a>>> {
    crate::vendor::fastest(
        &b.gpu,
        "cusparseSpMM (CSR)",
        &SpmmAlg::ALL,
        SpmmAlg::name,
        |alg| SpMM::new(&b.sparse, &b.gpu, csr, n, bm, c, alg),
        SpMM::run,
        |spmm| if spmm.alg.wants_preprocessing() && !spmm.preprocessed { " (no preprocessing)" } else { "" },
    )
}

#[allow(clippy::too_many_arguments)]
fn measure_width(
    b: &mut Bench,
    input: &Input,
    csr: &DeviceCsr,
    analysed: &Outcome<Analysed>,
    dense_a: Option<&DeviceBuffer>,
    ty: ValueType,
    n: usize,
) -> Outcome<()> {
    let gpu = &b.gpu;
    let a = &input.matrix;
    let s = type_size(ty);
    // B depends on the seed and the width only: every type multiplies the same values, rounded.
    let b_host = HostArray::random(ty, a.cols * n, b.seed ^ 0x53 ^ ((n as u64) << 32));
    let bm = b_host.upload(gpu, "B")?;
    let c_vendor = gpu.zeros(a.rows * n * s, "C (cuSPARSE)")?;
    let c_ours = gpu.zeros(a.rows * n * s, "C (ours)")?;

    let vendor = fastest_spmm(b, csr, n, bm.ptr(), c_vendor.ptr())?;
    let reference = download_as(gpu, ty, &c_vendor, a.rows * n)?;

    let density = a.nnz() as f64 / (a.rows as f64 * a.cols as f64).max(1.0);
    let in_tf32x3 = ty == ValueType::F32 && tf32x3(b);
    let op = if in_tf32x3 { "smatSpMM 3xTF32" } else { "smatSpMM" };
    let mut base = Measurement::new("smat", op, VENDOR_OP, type_name(ty), &input.name, shape(a, n));
    base.class = input.class;
    base.density = Some(density);
    base.flops = Some(2.0 * a.nnz() as f64 * n as f64);
    base.peak = b.peaks.gemm(ty).map(|p| (p, "GFLOP/s"));
    base.vendor_ms = Some(vendor.timing.gpu_ms);
    base.vendor_wall_ms = Some(vendor.timing.wall_ms);

    // The dense alternative: row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
    let mut dense_row = base.clone();
    dense_row.vendor_op = Cublas::gemm_name(ty).to_string() + " on densified A";
    let dense_c = match dense_a {
        Some(a_dense) => {
            let c_dense = gpu.zeros(a.rows * n * s, "C (dense GEMM)")?;
            let gemm =
                || b.blas.gemm(ty, (n, a.rows, a.cols), 1.0, bm.ptr(), n, a_dense.ptr(), a.cols, 0.0, c_dense.ptr(), n);
            let t = gpu.time(gemm)?;
            dense_row.vendor_ms = Some(t.gpu_ms);
            dense_row.vendor_wall_ms = Some(t.wall_ms);
            let dense = download_as(gpu, ty, &c_dense, a.rows * n)?;
            let (agreement, _) = crate::gpu::relative_error(&dense, &reference);
            dense_row.note = format!("GEMM vs cuSPARSE {agreement:.1e}");
            Some(dense)
        }
        None => {
            dense_row.vendor_ms = None;
            dense_row.note = format!("dense GEMM skipped: A densified would take {} MiB", (a.rows * a.cols * s) >> 20);
            None
        }
    };

    let mut ours = base.clone();
    ours.vendor_alg = vendor.op.alg.name();
    ours.csr_bytes = Some(csr_bytes(a, ty));
    ours.note = format!("cuSPARSE {}", vendor.algorithms);
    let result = (|| -> Outcome<()> {
        let analysed = analysed.as_ref().map_err(Clone::clone)?;
        let info = &analysed.info;
        ours.analysis_ms = Some(analysed.ms);
        ours.analysed_bytes = Some(info.bytes as u64);
        ours.note += &format!(
            "; rows in tiles {} ({} tiles {}x{}, fill {:.2}), rows in CSR {}, reordered {}",
            info.rowsInTiles,
            info.blockCount,
            info.tileRows,
            info.tileCols,
            info.fillRatio,
            info.rowsInCsr,
            info.reordered != 0
        );
        let (alpha, beta) = (Scalar::new(ty, 1.0), Scalar::new(ty, 0.0));
        let spmm = || {
            check(
                unsafe {
                    smatSpMM(
                        analysed.handle.0,
                        analysed.matrix.0,
                        n as i32,
                        alpha.ptr(),
                        bm.ptr() as *const _,
                        n as i32,
                        beta.ptr(),
                        c_ours.ptr() as *mut _,
                        n as i32,
                        Layout::RowMajor as i32,
                    )
                },
                "smatSpMM",
            )
        };
        spmm()?;
        let t = gpu.time(spmm)?;
        ours.ours_ms = Some(t.gpu_ms);
        ours.ours_wall_ms = Some(t.wall_ms);
        let got = download_as(gpu, ty, &c_ours, a.rows * n)?;
        let (err, _) = crate::gpu::relative_error(&got, &reference);
        ours.error = Some(err);
        let tolerance = smat_tolerance(ty, in_tf32x3);
        // 3xTF32 is always measured against an f64 product: its promise is FP32-level accuracy.
        if in_tf32x3 || !crate::gpu::within(err, tolerance) {
            // The two disagree: an f64 product of the same rounded inputs says which is off.
            let exact = exact_product(a, ty, &b_host.to_f64(), n);
            let (ours_err, _) = crate::gpu::relative_error(&got, &exact);
            let (vendor_err, _) = crate::gpu::relative_error(&reference, &exact);
            ours.error = Some(ours_err);
            ours.note += &format!(
                "; ours and cuSPARSE differ by {err:.2e}: against an f64 product ours {ours_err:.2e}, cuSPARSE {vendor_err:.2e}"
            );
            if in_tf32x3 {
                ours.note += &format!(" (3xTF32 must stay within {tolerance:.0e})");
            }
            if !crate::gpu::within(ours_err, tolerance) {
                ours.verdict = Verdict::Mismatch(format!(
                    "relative error {ours_err:.3e} against an f64 product exceeds {tolerance:.0e}"
                ));
            }
        }
        Ok(())
    })();
    if let Err(why) = result {
        ours.not_available(why);
    }
    dense_row.ours_ms = ours.ours_ms;
    dense_row.ours_wall_ms = ours.ours_wall_ms;
    dense_row.verdict = ours.verdict.clone();
    if dense_c.is_some() {
        dense_row.error = ours.error;
    }
    b.report.push(ours);
    b.report.push(dense_row);
    Ok(())
}

/// Per class and width, over the rows against cuSPARSE: the geometric-mean speedup and the median
/// analysis cost in vendor calls; then that median over all of them at n = 128 (where the analysis
/// should cost no more than about 200 calls).
fn summarise(rows: &[Measurement]) {
    let measured: Vec<&Measurement> =
        rows.iter().filter(|m| m.family == "smat" && !m.vendor_alg.is_empty() && m.speedup().is_some()).collect();
    if measured.is_empty() {
        return;
    }
    fn median(mut values: Vec<f64>) -> Option<f64> {
        (!values.is_empty()).then(|| crate::gpu::median(&mut values))
    }
    let mut groups: Vec<(&str, Option<usize>)> = Vec::new();
    for m in &measured {
        if !groups.contains(&(m.class, width_of(m))) {
            groups.push((m.class, width_of(m)));
        }
    }
    println!();
    println!("SMaT by class, against the fastest cuSPARSE CSR algorithm (all types):");
    println!(
        "{:<10} {:>5} {:>5} {:>16} {:>9} {:>9} {:>24}",
        "class", "n", "rows", "geomean speedup", "min", "max", "median analysis (calls)"
    );
    for (class, n) in groups {
        let group: Vec<&&Measurement> = measured.iter().filter(|m| m.class == class && width_of(m) == n).collect();
        let speedups: Vec<f64> = group.iter().filter_map(|m| m.speedup()).collect();
        let geomean = (speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64).exp();
        let (min, max) = speedups.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        let calls = median(group.iter().filter_map(|m| m.analysis_in_vendor_calls()).collect());
        println!(
            "{class:<10} {:>5} {:>5} {:>15.2}x {min:>8.2}x {max:>8.2}x {:>24}",
            n.map(|n| n.to_string()).unwrap_or_default(),
            group.len(),
            geomean,
            calls.map(|c| format!("{c:.0}")).unwrap_or_else(|| "-".into())
        );
    }
    let at_128: Vec<f64> =
        measured.iter().filter(|m| width_of(m) == Some(128)).filter_map(|m| m.analysis_in_vendor_calls()).collect();
    if let Some(calls) = median(at_128.clone()) {
        println!(
            "analysis at n = 128: median {calls:.0} vendor calls over {} matrix-type pairs (target: at most 200)",
            at_128.len()
        );
    }
}

fn new_handle(b: &Bench) -> Outcome<Handle> {
    let mut h = std::ptr::null_mut();
    check(unsafe { smatCreate(&mut h) }, "smatCreate")?;
    let handle = Handle(h);
    check(unsafe { smatSetBackend(h, sparsegpu::BackendKind::Cuda as i32) }, "smatSetBackend(CUDA)")?;
    check(unsafe { smatSetStream(h, b.gpu.raw_stream()) }, "smatSetStream")?;
    let format = match b.opts.smat_format.as_deref() {
        Some("tiles") => StorageFormat::Tiles,
        Some("csr") => StorageFormat::Csr,
        _ => StorageFormat::Auto,
    };
    check(unsafe { smatSetFormat(h, format as i32) }, "smatSetFormat")?;
    let math_mode = if tf32x3(b) { SmatMathMode::Tf32x3 } else { SmatMathMode::Default };
    check(unsafe { smatSetMathMode(h, math_mode as i32) }, "smatSetMathMode")?;
    Ok(handle)
}

/// A 2×2 identity times a 2×1 B on host arrays through a CUDA handle.
fn probe(b: &Bench) -> Outcome<()> {
    let handle = new_handle(b)?;
    let (row_ptr, col_ind, values) = ([0i32, 1, 2], [0i32, 1], [1.0f32, 1.0]);
    let mut m = std::ptr::null_mut();
    check(
        unsafe {
            smatCreateCsr(
                handle.0,
                &mut m,
                2,
                2,
                2,
                row_ptr.as_ptr(),
                col_ind.as_ptr(),
                values.as_ptr().cast(),
                ValueType::F32 as i32,
                sparsegpu::IndexBase::Zero as i32,
            )
        },
        "smatCreateCsr",
    )?;
    let matrix = Matrix(m);
    let (one, zero) = (1.0f32, 0.0f32);
    let bm = [1.0f32, 2.0];
    let mut c = [0.0f32; 2];
    check(
        unsafe {
            smatSpMM(
                handle.0,
                matrix.0,
                1,
                (&one as *const f32).cast(),
                bm.as_ptr().cast(),
                1,
                (&zero as *const f32).cast(),
                c.as_mut_ptr().cast(),
                1,
                Layout::RowMajor as i32,
            )
        },
        "smatSpMM",
    )
}

//! SMaT against cuSPARSE and cuBLAS: smatSpMM (C = A·B, A sparse analysed once, B and C row-major)
//! vs cusparseSpMM on the same CSR (CUSPARSE_SPMM_ALG_DEFAULT, FP32 compute for f16 / f32), and vs a
//! dense GEMM on A densified (cublasGemmEx FP16 / COMPUTE_32F, cublasSgemm), which is what a caller
//! without a sparse library would do.

use crate::gpu::Outcome;
use crate::report::{Measurement, Verdict, table_header};
use crate::vendor::{Cublas, DeviceCsr, Scalar, SpMM};
use crate::{
    Bench, HostArray, announce_probe, check, download_as, mtx_name, read_mtx, type_name, type_size, upload_as,
    upload_csr,
};
use sparsegpu::capi::smat::*;
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng};
use sparsegpu::{Layout, ValueType};
use std::time::Instant;

/// Densified A above this size is not built (the GEMM row is reported as skipped).
const DENSE_LIMIT_BYTES: usize = 4 << 30;

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

/// The tolerance of SMaT against FP32 vendors: f32 runs on TF32 tensor cores (10-bit mantissa
/// products, m16n8k8), so it can only agree to TF32 rounding.
fn smat_tolerance(ty: ValueType) -> f64 {
    match ty {
        ValueType::F32 => 5e-3,
        _ => crate::tolerance(ty),
    }
}

pub fn run(b: &mut Bench) {
    let size = b.opts.n.unwrap_or(if b.opts.quick { 4096 } else { 16384 });
    let n = 128usize;
    table_header(&format!(
        "SMaT: C = A·B, A sparse, B dense {n} columns, row-major; vendor cusparseSpMM (CSR) and cuBLAS GEMM on densified A; GFLOP/s useful (2·nnz·n/t), %peak of the vendor GEMM rate"
    ));
    let available = probe(b);
    announce_probe("SMaT", &available);
    let mut rng = Rng::new(b.seed ^ 0x53);
    let mut inputs: Vec<(String, CsrMatrix<f64>)> = Vec::new();
    let densities: &[f64] = if b.opts.quick { &[1e-2] } else { &[1e-3, 1e-2, 5e-2] };
    for &d in densities {
        inputs.push((format!("random {d}"), testgen::random_csr(&mut rng, size, size, d)));
    }
    inputs.push(("band hw 16".into(), testgen::band_csr(&mut rng, size, 16)));
    inputs.push(("block 16x16 2% fill .6".into(), testgen::block_csr(&mut rng, size, size, 16, 0.02, 0.6)));
    let scale = (size as f64).log2().ceil() as u32;
    inputs.push((format!("R-MAT scale {scale} ef 16"), testgen::rmat_csr(&mut rng, scale, 16)));
    for path in &b.opts.mtx.clone() {
        match read_mtx(path) {
            Ok(a) => inputs.push((mtx_name(path), a)),
            Err(why) => {
                let mut m = Measurement::new("smat", "smatSpMM", "cusparseSpMM", "-", &mtx_name(path), String::new());
                m.not_available(why);
                b.report.push(m);
            }
        }
    }
    for (input, a) in &inputs {
        for ty in [ValueType::F16, ValueType::F32] {
            if let Err(why) = case(b, &available, input, a, ty, n, &mut rng) {
                let mut m = Measurement::new("smat", "smatSpMM", "cusparseSpMM", type_name(ty), input, shape(a, n));
                m.not_available(format!("harness or vendor failure: {why}"));
                b.report.push(m);
            }
        }
    }
}

fn shape(a: &CsrMatrix<f64>, n: usize) -> String {
    format!("{}x{} n={n}", a.rows, a.cols)
}

/// Row-major dense copy of A (duplicates summed).
fn densify(a: &CsrMatrix<f64>) -> Vec<f64> {
    let mut dense = vec![0.0; a.rows * a.cols];
    for r in 0..a.rows {
        for e in a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize {
            dense[r * a.cols + a.col_ind[e] as usize] += a.values[e];
        }
    }
    dense
}

fn case(
    b: &mut Bench,
    available: &Outcome<()>,
    input: &str,
    a: &CsrMatrix<f64>,
    ty: ValueType,
    n: usize,
    rng: &mut Rng,
) -> Outcome<()> {
    let gpu = &b.gpu;
    let s = type_size(ty);
    let csr: DeviceCsr = upload_csr(gpu, ty, a)?;
    let b_host: Vec<f64> = rng.vec(a.cols * n);
    let bm = upload_as(gpu, ty, &b_host, "B")?;
    let c_vendor = gpu.zeros(a.rows * n * s, "C (cuSPARSE)")?;
    let c_ours = gpu.zeros(a.rows * n * s, "C (ours)")?;

    let spmm = SpMM::new(&b.sparse, gpu, &csr, n, bm.ptr(), c_vendor.ptr())?;
    spmm.run()?;
    let vendor = gpu.time(|| spmm.run())?;
    let reference = download_as(gpu, ty, &c_vendor, a.rows * n)?;

    let density = a.nnz() as f64 / (a.rows as f64 * a.cols as f64).max(1.0);
    let mut base = Measurement::new("smat", "smatSpMM", "cusparseSpMM CSR", type_name(ty), input, shape(a, n));
    base.density = Some(density);
    base.flops = Some(2.0 * a.nnz() as f64 * n as f64);
    base.peak = b.peaks.gemm(ty).map(|p| (p, "GFLOP/s"));
    base.vendor_ms = Some(vendor.gpu_ms);
    base.vendor_wall_ms = Some(vendor.wall_ms);

    // The dense alternative: row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
    let mut dense_row = base.clone();
    dense_row.vendor_op = format!("{} on densified A", Cublas::gemm_name(ty));
    let dense_c = if a.rows * a.cols * s <= DENSE_LIMIT_BYTES {
        let a_dense = upload_as(gpu, ty, &densify(a), "A densified")?;
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
    } else {
        dense_row.vendor_ms = None;
        dense_row.note = format!("dense GEMM skipped: A densified would take {} MiB", (a.rows * a.cols * s) >> 20);
        None
    };

    let mut ours = base.clone();
    let result = (|| -> Outcome<()> {
        available.clone()?;
        let handle = new_handle(b)?;
        // Analysis from the host CSR: it is setup (timed apart, reported in the note), and host
        // arrays are what callers usually have.
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
        let analysis_ms = began.elapsed().as_secs_f64() * 1e3;
        let mut info = unsafe { std::mem::zeroed::<smatMatrixInfo_t>() };
        check(unsafe { smatGetMatrixInfo(matrix.0, &mut info) }, "smatGetMatrixInfo")?;
        ours.note = format!(
            "analysis {analysis_ms:.0} ms, {} tiles {}x{}, fill {:.2}, reordered {}",
            info.blockCount,
            info.tileRows,
            info.tileCols,
            info.fillRatio,
            info.reordered != 0
        );
        let (alpha, beta) = (Scalar::new(ty, 1.0), Scalar::new(ty, 0.0));
        let spmm = || {
            check(
                unsafe {
                    smatSpMM(
                        handle.0,
                        matrix.0,
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
        let t = b.gpu.time(spmm)?;
        ours.ours_ms = Some(t.gpu_ms);
        ours.ours_wall_ms = Some(t.wall_ms);
        let got = download_as(&b.gpu, ty, &c_ours, a.rows * n)?;
        let (err, _) = crate::gpu::relative_error(&got, &reference);
        ours.error = Some(err);
        if !crate::gpu::within(err, smat_tolerance(ty)) {
            ours.verdict = Verdict::Mismatch(format!(
                "relative error {err:.3e} against cusparseSpMM exceeds {:.0e}",
                smat_tolerance(ty)
            ));
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

fn new_handle(b: &Bench) -> Outcome<Handle> {
    let mut h = std::ptr::null_mut();
    check(unsafe { smatCreate(&mut h) }, "smatCreate")?;
    let handle = Handle(h);
    check(unsafe { smatSetBackend(h, sparsegpu::BackendKind::Cuda as i32) }, "smatSetBackend(CUDA)")?;
    check(unsafe { smatSetStream(h, b.gpu.raw_stream()) }, "smatSetStream")?;
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

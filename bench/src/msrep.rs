//! MSREP against cuSPARSE: msrepSpMV (y = A·x over nnz-balanced pCSR partitions, one per device)
//! on 1..K devices (or the numbers `--devices` lists) vs cusparseSpMV (CSR,
//! CUSPARSE_SPMV_ALG_DEFAULT) on device 0, the single-GPU baseline of the MSREP paper. x and y live on device 0 for both; our call spreads the work.

use crate::gpu::Outcome;
use crate::report::{Measurement, Verdict, table_header};
use crate::vendor::{Scalar, SpMV};
use crate::{
    Bench, HostArray, announce_probe, check, download_as, mtx_name, read_mtx, tolerance, type_name, type_size,
    upload_as, upload_csr,
};
use sparsegpu::ValueType;
use sparsegpu::capi::msrep::*;
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng};
use std::time::Instant;

struct Handle(msrepHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { msrepDestroy(self.0) };
    }
}

struct Matrix(msrepMatrix_t);

impl Drop for Matrix {
    fn drop(&mut self) {
        unsafe { msrepDestroyMatrix(self.0) };
    }
}

pub fn run(b: &mut Bench) {
    let counts = b.device_counts(b.device_count);
    let (scale, band_n) = match b.opts.n {
        Some(n) => ((n as f64).log2().ceil() as u32, n),
        None if b.opts.quick => (16, 1 << 16),
        None => (20, 1 << 20),
    };
    table_header(&format!(
        "MSREP: y = A·x on {counts:?} device(s); vendor cusparseSpMV (CSR) on one device; GB/s of compulsory traffic, %peak of devices × copy bandwidth"
    ));
    let available = probe(b);
    announce_probe("MSREP", &available);
    let mut rng = Rng::new(b.seed ^ 0x4d);
    let mut inputs: Vec<(String, CsrMatrix<f64>)> = vec![
        (format!("R-MAT scale {scale} ef 16"), testgen::rmat_csr(&mut rng, scale, 16)),
        ("band hw 8".into(), testgen::band_csr(&mut rng, band_n, 8)),
    ];
    for path in &b.opts.mtx.clone() {
        match read_mtx(path) {
            Ok(a) => inputs.push((mtx_name(path), a)),
            Err(why) => {
                let mut m = Measurement::new("msrep", "msrepSpMV", "cusparseSpMV", "-", &mtx_name(path), String::new());
                m.not_available(why);
                b.report.push(m);
            }
        }
    }
    for (input, a) in &inputs {
        for ty in [ValueType::F32, ValueType::F64] {
            if let Err(why) = case(b, &available, input, a, ty, &counts, &mut rng) {
                let mut m = Measurement::new("msrep", "msrepSpMV", "cusparseSpMV", type_name(ty), input, shape(a));
                m.not_available(format!("harness or vendor failure: {why}"));
                b.report.push(m);
            }
        }
    }
}

fn shape(a: &CsrMatrix<f64>) -> String {
    format!("{}x{} nnz={}", a.rows, a.cols, a.nnz())
}

fn case(
    b: &mut Bench,
    available: &Outcome<()>,
    input: &str,
    a: &CsrMatrix<f64>,
    ty: ValueType,
    device_counts: &[usize],
    rng: &mut Rng,
) -> Outcome<()> {
    let gpu = &b.gpu;
    let s = type_size(ty);
    let csr = upload_csr(gpu, ty, a)?;
    let x = upload_as(gpu, ty, &rng.vec::<f64>(a.cols), "x")?;
    let y_vendor = gpu.zeros(a.rows * s, "y (cuSPARSE)")?;
    let y_ours = gpu.zeros(a.rows * s, "y (ours)")?;
    let spmv = SpMV::new(&b.sparse, gpu, &csr, x.ptr(), y_vendor.ptr())?;
    spmv.run()?;
    let vendor = gpu.time(|| spmv.run())?;
    let reference = download_as(gpu, ty, &y_vendor, a.rows)?;

    let mut base =
        Measurement::new("msrep", "msrepSpMV pCSR", "cusparseSpMV CSR (1 GPU)", type_name(ty), input, shape(a));
    base.density = Some(a.nnz() as f64 / (a.rows as f64 * a.cols as f64).max(1.0));
    base.vendor_ms = Some(vendor.gpu_ms);
    base.vendor_wall_ms = Some(vendor.wall_ms);
    // Values and column indices once, row pointers, x once, y written (β = 0).
    base.bytes = Some((a.nnz() * (4 + s) + (a.rows + 1) * 4 + (a.cols + a.rows) * s) as f64);

    for &k in device_counts {
        let mut m = base.clone();
        m.devices = k;
        m.peak = Some((b.peaks.copy_gbps * k as f64, "GB/s"));
        let result = (|| -> Outcome<()> {
            available.clone()?;
            let handle = new_handle(b, k)?;
            // Partitioning from the host CSR: setup, timed apart (in the note).
            let values = HostArray::new(ty, &a.values);
            let mut mat = std::ptr::null_mut();
            let began = Instant::now();
            check(
                unsafe {
                    msrepCreateCsr(
                        handle.0,
                        &mut mat,
                        a.rows as i32,
                        a.cols as i32,
                        a.nnz() as i64,
                        a.row_ptr.as_ptr(),
                        a.col_ind.as_ptr(),
                        values.ptr(),
                        ty as i32,
                        sparsegpu::IndexBase::Zero as i32,
                        0,
                    )
                },
                "msrepCreateCsr",
            )?;
            let matrix = Matrix(mat);
            m.note = format!("{k} partition(s), created in {:.0} ms", began.elapsed().as_secs_f64() * 1e3);
            let (alpha, beta) = (Scalar::new(ty, 1.0), Scalar::new(ty, 0.0));
            let spmv = || {
                check(
                    unsafe {
                        msrepSpMV(
                            handle.0,
                            matrix.0,
                            alpha.ptr(),
                            x.ptr() as *const _,
                            beta.ptr(),
                            y_ours.ptr() as *mut _,
                        )
                    },
                    "msrepSpMV",
                )
            };
            spmv()?;
            let t = b.gpu.time(spmv)?;
            m.ours_ms = Some(t.gpu_ms);
            m.ours_wall_ms = Some(t.wall_ms);
            let got = download_as(&b.gpu, ty, &y_ours, a.rows)?;
            let (err, _) = crate::gpu::relative_error(&got, &reference);
            m.error = Some(err);
            if !crate::gpu::within(err, tolerance(ty)) {
                m.verdict = Verdict::Mismatch(format!(
                    "relative error {err:.3e} against cusparseSpMV exceeds {:.0e}",
                    tolerance(ty)
                ));
            }
            Ok(())
        })();
        if let Err(why) = result {
            m.not_available(why);
        }
        b.report.push(m);
    }
    Ok(())
}

/// A CUDA handle over devices 0..k on the harness's stream.
fn new_handle(b: &Bench, k: usize) -> Outcome<Handle> {
    let mut h = std::ptr::null_mut();
    check(unsafe { msrepCreate(&mut h) }, "msrepCreate")?;
    let handle = Handle(h);
    check(unsafe { msrepSetBackend(h, sparsegpu::BackendKind::Cuda as i32) }, "msrepSetBackend(CUDA)")?;
    let ordinals: Vec<i32> = (0..k as i32).collect();
    check(unsafe { msrepSetDevices(h, k as i32, ordinals.as_ptr()) }, "msrepSetDevices")?;
    check(unsafe { msrepSetStream(h, b.gpu.raw_stream()) }, "msrepSetStream")?;
    Ok(handle)
}

/// y = I·x for a 2×2 identity on host arrays through a CUDA handle.
fn probe(b: &Bench) -> Outcome<()> {
    let handle = new_handle(b, 1)?;
    let (row_ptr, col_ind, values) = ([0i32, 1, 2], [0i32, 1], [1.0f64, 1.0]);
    let mut m = std::ptr::null_mut();
    check(
        unsafe {
            msrepCreateCsr(
                handle.0,
                &mut m,
                2,
                2,
                2,
                row_ptr.as_ptr(),
                col_ind.as_ptr(),
                values.as_ptr().cast(),
                ValueType::F64 as i32,
                sparsegpu::IndexBase::Zero as i32,
                0,
            )
        },
        "msrepCreateCsr",
    )?;
    let matrix = Matrix(m);
    let (one, zero) = (1.0f64, 0.0f64);
    let x = [1.0f64, 2.0];
    let mut y = [0.0f64; 2];
    check(
        unsafe {
            msrepSpMV(
                handle.0,
                matrix.0,
                (&one as *const f64).cast(),
                x.as_ptr().cast(),
                (&zero as *const f64).cast(),
                y.as_mut_ptr().cast(),
            )
        },
        "msrepSpMV",
    )
}

//! MSREP against cuSPARSE: msrepSpMV (y = A·x over nnz-balanced pCSR partitions, or pCSC / pCOO with
//! `--formats`, `--partitions` per device) on 1..K devices (or the numbers `--devices` lists) vs the
//! fastest of cusparseSpMV's algorithms for A in the same format on device 0, the single-GPU baseline
//! of the MSREP paper. x and y live on device 0 for both; our call spreads the work. Matrices of f16 /
//! bf16 values (`--types f16,bf16`) compute in FP32 with x and y FP32; the vendor's closest call takes
//! x in A's 16-bit type (the same values) and y FP32. Inputs: R-MAT and a band (default), the matrix
//! suite (`--suite`) or large matrices of 54-131 M nonzeros (`--large`), and any `--mtx` files.

use crate::gpu::Outcome;
use crate::report::{Measurement, Verdict, table_header};
use crate::vendor::{Fastest, Scalar, SpMV, SpmvAlg, SpmvMatrix};
use crate::{
    Bench, HostArray, announce_probe, check, compute_type, download_as, mtx_name, read_mtx, suite, tolerance,
    type_name, type_size, upload_as, upload_csr,
};
use sparsegpu::ValueType;
use sparsegpu::capi::msrep::*;
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng};
use sparsegpu::types::SparseFormat;
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

/// An input: its name, class (suite matrices) and matrix, or why it could not be made.
struct Input {
    name: String,
    class: &'static str,
    matrix: Outcome<CsrMatrix<f64>>,
}

pub fn run(b: &mut Bench) {
    let counts = b.device_counts(b.device_count);
    let partitions = b.opts.partitions.clone().unwrap_or_else(|| vec![1]);
    let types = b.opts.types.clone().unwrap_or_else(|| vec![ValueType::F32, ValueType::F64]);
    let formats = b.opts.formats.clone().unwrap_or_else(|| vec![SparseFormat::Csr]);
    table_header(&format!(
        "MSREP: y = A·x on {counts:?} device(s), {partitions:?} partition(s) per device of {}; vendor the fastest of cusparseSpMV's algorithms for A in the same format on one device; GB/s of compulsory traffic, %peak of devices × copy bandwidth; creation from the host arrays in the note",
        formats.iter().map(|f| format!("p{}", f.name())).collect::<Vec<_>>().join(", ")
    ));
    let available = probe(b);
    announce_probe("MSREP", &available);
    let mut rng = Rng::new(b.seed ^ 0x4d);
    let mut inputs = inputs(b, &mut rng);
    for path in &b.opts.mtx {
        inputs.push(Input { name: mtx_name(path), class: "", matrix: read_mtx(path) });
    }
    for input in &inputs {
        let a = match &input.matrix {
            Ok(a) => a,
            Err(why) => {
                let mut m =
                    Measurement::new("msrep", &op_name(formats[0]), "cusparseSpMV", "-", &input.name, String::new());
                m.class = input.class;
                m.not_available(format!("the matrix could not be made: {why}"));
                b.report.push(m);
                continue;
            }
        };
        for &format in &formats {
            let given = Given::of(a, format);
            for &ty in &types {
                let setup = Setup { counts: &counts, partitions: &partitions, class: input.class };
                if let Err(why) = case(b, &available, &input.name, a, ty, &given, &setup, &mut rng) {
                    let mut m = Measurement::new(
                        "msrep",
                        &op_name(format),
                        "cusparseSpMV",
                        type_name(ty),
                        &input.name,
                        shape(a),
                    );
                    m.class = input.class;
                    m.not_available(format!("harness or vendor failure: {why}"));
                    b.report.push(m);
                }
            }
        }
    }
}

/// The matrices to run: the suite's (`--suite`), the large ones (`--large`), or R-MAT and a band
/// (sized by `--n`).
fn inputs(b: &Bench, rng: &mut Rng) -> Vec<Input> {
    if let Some(names) = &b.opts.suite {
        let scale = if b.opts.quick { suite::QUICK_SCALE } else { 1.0 };
        return names
            .iter()
            .map(|name| {
                let entry = suite::find(name).expect("--suite names entries of the suite");
                Input { name: name.to_string(), class: entry.class.label(), matrix: entry.matrix(b.seed, scale) }
            })
            .collect();
    }
    // Labelled with the suite's classes, so that every row carries its class and vendor algorithm.
    let generated =
        |name: String, class: suite::Class, a: CsrMatrix<f64>| Input { name, class: class.label(), matrix: Ok(a) };
    if b.opts.large {
        // Band and 3D stencil of at least 50 M nonzeros, and R-MAT scale 23: each well beyond the L2
        // cache, as the roofline targets ask (1/64 of the rows with --quick). With --n, the band's
        // rows, and a stencil and an R-MAT of about as many nonzeros (17 a row in the band, 27 in the
        // stencil, 16 edges a row before duplicates in R-MAT).
        let (band_rows, side, rmat_scale) = match b.opts.n {
            Some(n) => {
                let nnz = n as f64 * 17.0;
                (n, (nnz / 27.0).cbrt().round().max(3.0) as usize, (nnz / 16.0).log2().round().max(1.0) as u32)
            }
            None if b.opts.quick => (3_200_000 / 64, 35, 17),
            None => (3_200_000, 140, 23),
        };
        return vec![
            generated("band hw 8".into(), suite::Class::Band, testgen::band_csr(rng, band_rows, 8)),
            generated(
                format!("stencil3d 27-point {side}^3"),
                suite::Class::Stencil,
                testgen::stencil_csr(rng, &[side, side, side], testgen::Stencil::Box, 1),
            ),
            generated(
                format!("R-MAT scale {rmat_scale} ef 16"),
                suite::Class::Graph,
                testgen::rmat_csr(rng, rmat_scale, 16),
            ),
        ];
    }
    let (scale, band_n) = match b.opts.n {
        Some(n) => ((n as f64).log2().ceil() as u32, n),
        None if b.opts.quick => (16, 1 << 16),
        None => (20, 1 << 20),
    };
    vec![
        generated(format!("R-MAT scale {scale} ef 16"), suite::Class::Graph, testgen::rmat_csr(rng, scale, 16)),
        generated("band hw 8".into(), suite::Class::Band, testgen::band_csr(rng, band_n, 8)),
    ]
}

fn shape(a: &CsrMatrix<f64>) -> String {
    format!("{}x{} nnz={}", a.rows, a.cols, a.nnz())
}

fn op_name(format: SparseFormat) -> String {
    format!("msrepSpMV p{}", format.name())
}

/// msrepCreateCsr / msrepCreateCsc / msrepCreateCoo: (handle, matrix, rows, cols, nnz, major, minor,
/// values, valueType, indexBase, numPartitions).
type CreateFn = unsafe extern "C" fn(
    msrepHandle_t,
    *mut msrepMatrix_t,
    i32,
    i32,
    i64,
    *const i32,
    *const i32,
    *const std::ffi::c_void,
    i32,
    i32,
    i32,
) -> i32;

/// A in the format our call and the vendor's are given, made once for every value type: the CSR,
/// the CSR of Aᵀ (A's CSC), or the row of each entry (the row-sorted COO that shares the CSR's
/// column indices and values).
enum Given<'a> {
    Csr(&'a CsrMatrix<f64>),
    Csc { transpose: CsrMatrix<f64> },
    Coo { csr: &'a CsrMatrix<f64>, row_ind: Vec<i32> },
}

impl<'a> Given<'a> {
    fn of(a: &'a CsrMatrix<f64>, format: SparseFormat) -> Self {
        match format {
            SparseFormat::Csr => Given::Csr(a),
            SparseFormat::Csc => Given::Csc { transpose: a.transpose() },
            SparseFormat::Coo => Given::Coo { csr: a, row_ind: a.row_indices() },
        }
    }

    fn format(&self) -> SparseFormat {
        match self {
            Given::Csr(_) => SparseFormat::Csr,
            Given::Csc { .. } => SparseFormat::Csc,
            Given::Coo { .. } => SparseFormat::Coo,
        }
    }

    /// The arrays an msrepCreate* call is given: major (rowPtr / colPtr / rowInd), minor (colInd /
    /// rowInd / colInd) and values.
    fn arrays(&self) -> (&[i32], &[i32], &[f64]) {
        match self {
            Given::Csr(a) => (&a.row_ptr, &a.col_ind, &a.values),
            Given::Csc { transpose: t } => (&t.row_ptr, &t.col_ind, &t.values),
            Given::Coo { csr, row_ind } => (row_ind, &csr.col_ind, &csr.values),
        }
    }
}

/// What each input runs on: the device counts, partitions per device, and the input's class.
struct Setup<'a> {
    counts: &'a [usize],
    partitions: &'a [usize],
    class: &'static str,
}

/// Times every algorithm of cusparseSpMV that takes these operands (workspace and preprocessing set
/// up outside the timing) and leaves the fastest one's result in y.
fn fastest_spmv<'a>(b: &'a Bench, a: &SpmvMatrix, x: u64, y: u64) -> Outcome<Fastest<SpMV<'a>>> {
    crate::vendor::fastest(
        &b.gpu,
        "cusparseSpMV",
        SpmvAlg::for_format(a),
        SpmvAlg::name,
        |alg| SpMV::new(&b.sparse, &b.gpu, a, x, y, alg),
        SpMV::run,
        |_| "",
    )
}

#[allow(clippy::too_many_arguments)]
fn case(
    b: &mut Bench,
    available: &Outcome<()>,
    input: &str,
    a: &CsrMatrix<f64>,
    ty: ValueType,
    given: &Given,
    setup: &Setup,
    rng: &mut Rng,
) -> Outcome<()> {
    let s = type_size(ty);
    // x, y and the sums: FP32 for 16-bit values.
    let compute = compute_type(ty);
    let cs = type_size(compute);
    let format = given.format();
    // A on the device in the format our call is given, for the vendor.
    let (on_device, row_ind);
    let operand = match given {
        Given::Csr(a) => {
            on_device = upload_csr(&b.gpu, ty, a)?;
            SpmvMatrix::Csr(&on_device)
        }
        Given::Csc { transpose } => {
            on_device = upload_csr(&b.gpu, ty, transpose)?;
            SpmvMatrix::Csc { transpose: &on_device }
        }
        Given::Coo { csr, row_ind: rows } => {
            on_device = upload_csr(&b.gpu, ty, csr)?;
            row_ind = b.gpu.upload(rows, "rowInd")?;
            SpmvMatrix::Coo { csr: &on_device, row_ind: &row_ind }
        }
    };
    // x rounded to A's type, so that the vendor's 16-bit x and our FP32 x hold the same values.
    let x_values: Vec<f64> = HostArray::new(ty, &rng.vec::<f64>(a.cols)).to_f64();
    let x_vendor = upload_as(&b.gpu, ty, &x_values, "x (cuSPARSE)")?;
    let x = upload_as(&b.gpu, compute, &x_values, "x")?;
    let y_vendor = b.gpu.zeros(a.rows * cs, "y (cuSPARSE)")?;
    // NaN in y first: every row must be written (β = 0 does not read y).
    let nan_y = vec![f64::NAN; a.rows];
    let (vendor_alg, vendor, vendor_algorithms) = {
        let best = fastest_spmv(b, &operand, x_vendor.ptr(), y_vendor.ptr())?;
        (best.op.alg.name(), best.timing, best.algorithms)
    };
    let reference = download_as(&b.gpu, compute, &y_vendor, a.rows)?;

    let vendor_name = format!("cusparseSpMV {} fastest", format.name());
    let mut base = Measurement::new("msrep", &op_name(format), &vendor_name, type_name(ty), input, shape(a));
    base.class = setup.class;
    base.vendor_alg = vendor_alg;
    base.density = Some(a.nnz() as f64 / (a.rows as f64 * a.cols as f64).max(1.0));
    base.vendor_ms = Some(vendor.gpu_ms);
    base.vendor_wall_ms = Some(vendor.wall_ms);
    // Values and minor indices once, the major pointers (CSR, CSC) or indices (COO), x once, y
    // written (β = 0).
    let major_bytes = match format {
        SparseFormat::Csr => (a.rows + 1) * 4,
        SparseFormat::Csc => (a.cols + 1) * 4,
        SparseFormat::Coo => a.nnz() * 4,
    };
    base.bytes = Some((a.nnz() * (4 + s) + major_bytes + (a.cols + a.rows) * cs) as f64);

    for &k in setup.counts {
        for &per_device in setup.partitions {
            let mut m = base.clone();
            m.devices = k;
            m.peak = Some((b.peaks.copy_gbps * k as f64, "GB/s"));
            let result = (|| -> Outcome<()> {
                available.clone()?;
                let handle = new_handle(b, k)?;
                // Partitioning from the host arrays and the upload: setup, timed apart.
                let (major, minor, values) = given.arrays();
                let values = HostArray::new(ty, values);
                let y_ours = upload_as(&b.gpu, compute, &nan_y, "y (ours)")?;
                let mut mat = std::ptr::null_mut();
                let (create, create_name) = match format {
                    SparseFormat::Csr => (msrepCreateCsr as CreateFn, "msrepCreateCsr"),
                    SparseFormat::Csc => (msrepCreateCsc as CreateFn, "msrepCreateCsc"),
                    SparseFormat::Coo => (msrepCreateCoo as CreateFn, "msrepCreateCoo"),
                };
                let began = Instant::now();
                check(
                    unsafe {
                        create(
                            handle.0,
                            &mut mat,
                            a.rows as i32,
                            a.cols as i32,
                            a.nnz() as i64,
                            major.as_ptr(),
                            minor.as_ptr(),
                            values.ptr(),
                            ty as i32,
                            sparsegpu::IndexBase::Zero as i32,
                            (k * per_device) as i32,
                        )
                    },
                    create_name,
                )?;
                let matrix = Matrix(mat);
                let created_ms = began.elapsed().as_secs_f64() * 1e3;
                m.note = format!(
                    "{} partition(s), created in {created_ms:.0} ms; vendor: {vendor_algorithms}",
                    k * per_device
                );
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
                let got = download_as(&b.gpu, compute, &y_ours, a.rows)?;
                let t = b.gpu.time(spmv)?;
                m.ours_ms = Some(t.gpu_ms);
                m.ours_wall_ms = Some(t.wall_ms);
                let (err, _) = crate::gpu::relative_error(&got, &reference);
                m.error = Some(err);
                if !crate::gpu::within(err, tolerance(compute)) {
                    m.verdict = Verdict::Mismatch(format!(
                        "relative error {err:.3e} against cusparseSpMV exceeds {:.0e}",
                        tolerance(compute)
                    ));
                }
                Ok(())
            })();
            if let Err(why) = result {
                m.not_available(why);
            }
            b.report.push(m);
        }
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

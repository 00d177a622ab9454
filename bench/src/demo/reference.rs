//! The demonstration where there is nothing to compare with: every family on generated inputs (and
//! SpAMM on ergo's density matrix of 40 water molecules, from `examples/data`), through the C API on
//! host arrays, on the default backend (the CPU without a GPU). For each it prints the time (median
//! of repeats after a warm-up) and the accuracy against an f64 reference.

use sparsegpu::capi::common::sgpuGetLastErrorMessage;
use sparsegpu::capi::{msrep::*, sddmm::*, smat::*, spamm::*};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng, relative_error};
use sparsegpu::{BackendKind, IndexBase, Layout, ValueType};
use std::ffi::CStr;
use std::ptr::null_mut;
use std::time::Instant;

/// Panics with the library's message when a call fails.
fn ok(status: i32, call: &str) {
    if status != 0 {
        let msg = unsafe { CStr::from_ptr(sgpuGetLastErrorMessage()) }.to_string_lossy();
        panic!("{call} failed with status {status}: {msg}");
    }
}

/// Median wall time of `repeats` runs after one warm-up run.
fn median_seconds(repeats: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[repeats / 2]
}

fn backend_name(kind: i32) -> &'static str {
    match BackendKind::try_from(kind) {
        Ok(BackendKind::Cuda) => "cuda",
        Ok(BackendKind::Cpu) => "cpu",
        _ => "?",
    }
}

/// Exact f64 product of two column-major n×n matrices.
fn dgemm_f64(n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    unsafe {
        matrixmultiply::dgemm(
            n,
            n,
            n,
            1.0,
            a.as_ptr(),
            1,
            n as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0,
            c.as_mut_ptr(),
            1,
            n as isize,
        )
    };
    c
}

fn spamm_demo(rng: &mut Rng) {
    let n = 2048usize;
    let a: Vec<f32> = testgen::exponential_decay(rng, n, n, 1.0, 0.99);
    let b: Vec<f32> = testgen::exponential_decay(rng, n, n, 1.0, 0.99);
    let exact = dgemm_f64(
        n,
        &a.iter().map(|&x| x as f64).collect::<Vec<_>>(),
        &b.iter().map(|&x| x as f64).collect::<Vec<_>>(),
    );
    let mut h = null_mut();
    ok(unsafe { spammCreate(&mut h) }, "spammCreate");
    let mut backend = 0;
    ok(unsafe { spammGetBackend(h, &mut backend) }, "spammGetBackend");
    println!(
        "SpAMM  (backend {}): C = A·B, N = {n}, exponential decay |a_ij| ~ 0.99^|i-j|, FP32, LoNum 32",
        backend_name(backend)
    );
    let (one, zero) = (1.0f32, 0.0f32);
    let mut c = vec![0.0f32; n * n];
    let ni = n as i32;
    let run = |tau: f64, c: &mut Vec<f32>| {
        ok(
            unsafe {
                spammSgemm(h, 0, 0, ni, ni, ni, &one, a.as_ptr(), ni, b.as_ptr(), ni, &zero, c.as_mut_ptr(), ni, tau)
            },
            "spammSgemm",
        );
    };
    let dense_time = median_seconds(3, || run(0.0, &mut c));
    println!(
        "  tau = 0 (every block product):    {:8.1} ms  {:7.1} GFLOP/s",
        dense_time * 1e3,
        2.0 * (n as f64).powi(3) / dense_time / 1e9
    );
    for target in [0.3, 0.1, 0.05] {
        let (mut tau, mut achieved) = (0.0, 0.0);
        let tune = Instant::now();
        ok(
            unsafe {
                spammTuneTau(
                    h,
                    ValueType::F32 as i32,
                    0,
                    0,
                    ni,
                    ni,
                    ni,
                    a.as_ptr().cast(),
                    ni,
                    b.as_ptr().cast(),
                    ni,
                    target,
                    0.005,
                    20,
                    &mut tau,
                    &mut achieved,
                )
            },
            "spammTuneTau",
        );
        let tune_time = tune.elapsed().as_secs_f64();
        let t = median_seconds(3, || run(tau, &mut c));
        let mut stats = unsafe { std::mem::zeroed::<spammStats_t>() };
        ok(unsafe { spammGetStats(h, &mut stats) }, "spammGetStats");
        let got: Vec<f64> = c.iter().map(|&x| x as f64).collect();
        let err = relative_error(&got, &exact);
        let abs_err = err * exact.iter().map(|x| x * x).sum::<f64>().sqrt();
        println!(
            "  valid ratio {:5.1} % (tau {tau:.3e}, tuned in {:.0} ms): {:8.1} ms  speedup {:5.2}x over tau = 0  rel. error {err:.2e}  ||E||_F {abs_err:.2e} <= bound {:.2e}",
            stats.validRatio * 100.0,
            tune_time * 1e3,
            t * 1e3,
            dense_time / t,
            stats.errorBound
        );
    }
    ergo_demo(h);
    ok(unsafe { spammDestroy(h) }, "spammDestroy");
}

/// D·D for ergo's density matrix of 40 water molecules (a real decay matrix), in FP64.
fn ergo_demo(h: spammHandle_t) {
    let d = match crate::suite::repository_file(&["examples", "data", "w40-D.mtx.gz"]).and_then(|p| crate::read_mtx(&p))
    {
        Ok(d) => d,
        Err(why) => {
            println!("  (ergo's density matrix: {why}; skipped)");
            return;
        }
    };
    let n = d.rows;
    let mut dense = vec![0.0f64; n * n];
    for (idx, v) in d.to_dense_f64().into_iter().enumerate() {
        dense[(idx % n) * n + idx / n] = v; // row-major → column-major
    }
    let exact = dgemm_f64(n, &dense, &dense);
    let ni = n as i32;
    let (one, zero) = (1.0f64, 0.0f64);
    let (mut tau, mut achieved) = (0.0, 0.0);
    ok(
        unsafe {
            spammTuneTau(
                h,
                ValueType::F64 as i32,
                0,
                0,
                ni,
                ni,
                ni,
                dense.as_ptr().cast(),
                ni,
                dense.as_ptr().cast(),
                ni,
                0.2,
                0.01,
                20,
                &mut tau,
                &mut achieved,
            )
        },
        "spammTuneTau",
    );
    let mut c = vec![0.0f64; n * n];
    let t = median_seconds(3, || {
        ok(
            unsafe {
                spammDgemm(
                    h,
                    0,
                    0,
                    ni,
                    ni,
                    ni,
                    &one,
                    dense.as_ptr(),
                    ni,
                    dense.as_ptr(),
                    ni,
                    &zero,
                    c.as_mut_ptr(),
                    ni,
                    tau,
                )
            },
            "spammDgemm",
        );
    });
    let mut stats = unsafe { std::mem::zeroed::<spammStats_t>() };
    ok(unsafe { spammGetStats(h, &mut stats) }, "spammGetStats");
    println!(
        "  ergo D·D (N = {n}, FP64): valid ratio {:5.1} % (tau {tau:.2e}): {:7.1} ms  rel. error {:.2e}, bound {:.2e}",
        stats.validRatio * 100.0,
        t * 1e3,
        relative_error(&c, &exact),
        stats.errorBound
    );
}

fn smat_demo(rng: &mut Rng) {
    let (rows, cols, n) = (8192usize, 8192usize, 128usize);
    let a: CsrMatrix<f32> = testgen::block_csr(rng, rows, cols, 16, 0.02, 0.6);
    let b: Vec<f32> = rng.vec(cols * n);
    let mut h = null_mut();
    ok(unsafe { smatCreate(&mut h) }, "smatCreate");
    let mut backend = 0;
    ok(unsafe { smatGetBackend(h, &mut backend) }, "smatGetBackend");
    let mut m = null_mut();
    let analysis = Instant::now();
    ok(
        unsafe {
            smatCreateCsr(
                h,
                &mut m,
                rows as i32,
                cols as i32,
                a.nnz() as i64,
                a.row_ptr.as_ptr(),
                a.col_ind.as_ptr(),
                a.values.as_ptr().cast(),
                ValueType::F32 as i32,
                IndexBase::Zero as i32,
            )
        },
        "smatCreateCsr",
    );
    let analysis = analysis.elapsed().as_secs_f64();
    let mut info = unsafe { std::mem::zeroed::<smatMatrixInfo_t>() };
    ok(unsafe { smatGetMatrixInfo(m, &mut info) }, "smatGetMatrixInfo");
    let mut c = vec![0.0f32; rows * n];
    let (one, zero) = (1.0f32, 0.0f32);
    let t = median_seconds(5, || {
        ok(
            unsafe {
                smatSpMM(
                    h,
                    m,
                    n as i32,
                    (&one as *const f32).cast(),
                    b.as_ptr().cast(),
                    n as i32,
                    (&zero as *const f32).cast(),
                    c.as_mut_ptr().cast(),
                    n as i32,
                    Layout::RowMajor as i32,
                )
            },
            "smatSpMM",
        );
    });
    let mut reference = vec![0.0f64; rows * n];
    for r in 0..rows {
        for e in a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize {
            let (col, v) = (a.col_ind[e] as usize, a.values[e] as f64);
            for j in 0..n {
                reference[r * n + j] += v * b[col * n + j] as f64;
            }
        }
    }
    let got: Vec<f64> = c.iter().map(|&x| x as f64).collect();
    println!(
        "SMaT   (backend {}): C = A·B, A {rows}x{cols} block-structured, nnz {}, B dense x{n}, FP32",
        backend_name(backend),
        a.nnz()
    );
    println!(
        "  analysis {:.0} ms ({} tiles of {}x{}, fill {:.2}, reordered {}); SpMM {:7.2} ms  {:6.1} GFLOP/s (useful)  rel. error {:.2e}",
        analysis * 1e3,
        info.blockCount,
        info.tileRows,
        info.tileCols,
        info.fillRatio,
        info.reordered != 0,
        t * 1e3,
        2.0 * a.nnz() as f64 * n as f64 / t / 1e9,
        relative_error(&got, &reference)
    );
    ok(unsafe { smatDestroyMatrix(m) }, "smatDestroyMatrix");
    ok(unsafe { smatDestroy(h) }, "smatDestroy");
}

fn msrep_demo(rng: &mut Rng) {
    let a: CsrMatrix<f64> = testgen::rmat_csr(rng, 18, 16);
    let x: Vec<f64> = rng.vec(a.cols);
    let mut h = null_mut();
    ok(unsafe { msrepCreate(&mut h) }, "msrepCreate");
    let mut backend = 0;
    ok(unsafe { msrepGetBackend(h, &mut backend) }, "msrepGetBackend");
    let mut reference = vec![0.0f64; a.rows];
    for (r, out) in reference.iter_mut().enumerate() {
        for e in a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize {
            *out += a.values[e] * x[a.col_ind[e] as usize];
        }
    }
    println!(
        "MSREP  (backend {}): y = A·x, R-MAT power-law {}x{}, nnz {}, FP64",
        backend_name(backend),
        a.rows,
        a.cols,
        a.nnz()
    );
    for partitions in [1, 4] {
        let mut m = null_mut();
        ok(
            unsafe {
                msrepCreateCsr(
                    h,
                    &mut m,
                    a.rows as i32,
                    a.cols as i32,
                    a.nnz() as i64,
                    a.row_ptr.as_ptr(),
                    a.col_ind.as_ptr(),
                    a.values.as_ptr().cast(),
                    ValueType::F64 as i32,
                    IndexBase::Zero as i32,
                    partitions,
                )
            },
            "msrepCreateCsr",
        );
        let mut y = vec![0.0f64; a.rows];
        let (one, zero) = (1.0f64, 0.0f64);
        let t = median_seconds(9, || {
            ok(
                unsafe {
                    msrepSpMV(
                        h,
                        m,
                        (&one as *const f64).cast(),
                        x.as_ptr().cast(),
                        (&zero as *const f64).cast(),
                        y.as_mut_ptr().cast(),
                    )
                },
                "msrepSpMV",
            );
        });
        let bytes = a.nnz() as f64 * 12.0 + (a.rows + a.cols) as f64 * 8.0;
        println!(
            "  pCSR, {partitions} partition(s): {:7.2} ms  {:6.1} GB/s  rel. error {:.2e}",
            t * 1e3,
            bytes / t / 1e9,
            relative_error(&y, &reference)
        );
        ok(unsafe { msrepDestroyMatrix(m) }, "msrepDestroyMatrix");
    }
    ok(unsafe { msrepDestroy(h) }, "msrepDestroy");
}

fn sddmm_demo(rng: &mut Rng) {
    let (m, n, k) = (8192usize, 8192usize, 64usize);
    let a: Vec<f32> = rng.vec(m * k);
    let b: Vec<f32> = rng.vec(n * k);
    let mut h = null_mut();
    ok(unsafe { sddmmCreate(&mut h) }, "sddmmCreate");
    let mut backend = 0;
    ok(unsafe { sddmmGetBackend(h, &mut backend) }, "sddmmGetBackend");
    println!(
        "SDDMM  (backend {}): out = S ∘ (A·Bᵀ), {m}x{n}, k = {k}, FP32, algorithm chosen by density",
        backend_name(backend)
    );
    for density in [1e-2, 1e-5] {
        let s: CsrMatrix<f32> = testgen::random_csr(rng, m, n, density);
        let mut out = vec![0.0f32; s.nnz()];
        let one = 1.0f32;
        let t = median_seconds(5, || {
            ok(
                unsafe {
                    sddmmDynamic(
                        h,
                        m as i32,
                        n as i32,
                        k as i32,
                        (&one as *const f32).cast(),
                        a.as_ptr().cast(),
                        k as i32,
                        b.as_ptr().cast(),
                        k as i32,
                        Layout::RowMajor as i32,
                        s.nnz() as i64,
                        s.row_ptr.as_ptr(),
                        s.col_ind.as_ptr(),
                        s.values.as_ptr().cast(),
                        IndexBase::Zero as i32,
                        ValueType::F32 as i32,
                        out.as_mut_ptr().cast(),
                    )
                },
                "sddmmDynamic",
            );
        });
        let mut algorithm = 0;
        ok(unsafe { sddmmGetLastAlgorithm(h, &mut algorithm) }, "sddmmGetLastAlgorithm");
        let mut reference = Vec::with_capacity(s.nnz());
        for r in 0..m {
            for e in s.row_ptr[r] as usize..s.row_ptr[r + 1] as usize {
                let c = s.col_ind[e] as usize;
                let dot: f64 = (0..k).map(|p| a[r * k + p] as f64 * b[c * k + p] as f64).sum();
                reference.push(s.values[e] as f64 * dot);
            }
        }
        let got: Vec<f64> = out.iter().map(|&x| x as f64).collect();
        println!(
            "  density {density:.0e} (nnz {}): {} {:7.2} ms  {:6.1} GFLOP/s  rel. error {:.2e}",
            s.nnz(),
            if algorithm == 1 { "tiled" } else { "COO  " },
            t * 1e3,
            2.0 * s.nnz() as f64 * k as f64 / t / 1e9,
            relative_error(&got, &reference)
        );
    }
    ok(unsafe { sddmmDestroy(h) }, "sddmmDestroy");
}

/// Every family against its f64 reference.
pub fn run() {
    let mut rng = Rng::fresh("demo");
    spamm_demo(&mut rng);
    smat_demo(&mut rng);
    msrep_demo(&mut rng);
    sddmm_demo(&mut rng);
}

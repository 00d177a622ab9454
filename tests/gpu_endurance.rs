//! Endurance and concurrency of the CUDA backend (each test reports SKIPPED without a usable GPU):
//! 10 000 calls of each family leave device memory where it started, and several threads, each with
//! its own handles, run all four families at once with results equal to the CPU backend's.

mod common;

use common::{Rng, relative_error};
use sparsegpu::backend::cuda::{self, memory::DeviceBuffer};
use sparsegpu::capi::{msrep::*, sddmm::*, smat::*, spamm::*};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen;
use sparsegpu::{BackendKind, IndexBase, Layout, ValueType};
use std::ptr::null_mut;
use std::sync::Mutex;

/// Device-memory accounting is process-wide: the tests of this file run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn ok(status: i32, what: &str) {
    if status != 0 {
        let msg = unsafe { std::ffi::CStr::from_ptr(sparsegpu::capi::common::sgpuGetLastErrorMessage()) };
        panic!("{what} failed with status {status}: {}", msg.to_string_lossy());
    }
}

/// One small problem of each family, with its inputs, ready to run on either backend.
struct Problems {
    spamm_n: usize,
    spamm_a: Vec<f32>,
    spamm_b: Vec<f32>,
    smat_a: CsrMatrix<f32>,
    smat_n: usize,
    smat_b: Vec<f32>,
    msrep_a: CsrMatrix<f64>,
    msrep_x: Vec<f64>,
    sddmm_s: CsrMatrix<f32>,
    sddmm_k: usize,
    sddmm_a: Vec<f32>,
    sddmm_b: Vec<f32>,
}

impl Problems {
    fn new(rng: &mut Rng) -> Self {
        let spamm_n = 96;
        let smat_a = testgen::random_csr(rng, 200, 150, 0.05);
        let sddmm_s = testgen::random_csr(rng, 120, 100, 0.05);
        let (smat_n, sddmm_k) = (16, 24);
        Problems {
            spamm_n,
            spamm_a: testgen::exponential_decay(rng, spamm_n, spamm_n, 1.0, 0.9),
            spamm_b: testgen::exponential_decay(rng, spamm_n, spamm_n, 1.0, 0.9),
            smat_b: rng.vec(150 * smat_n),
            smat_a,
            smat_n,
            msrep_a: testgen::random_csr(rng, 500, 400, 0.02),
            msrep_x: rng.vec(400),
            sddmm_a: rng.vec(120 * sddmm_k),
            sddmm_b: rng.vec(100 * sddmm_k),
            sddmm_s,
            sddmm_k,
        }
    }
}

/// Handles and analysed matrices of all four families on one backend.
struct Session {
    spamm: spammHandle_t,
    smat: smatHandle_t,
    smat_matrix: smatMatrix_t,
    msrep: msrepHandle_t,
    msrep_matrix: msrepMatrix_t,
    sddmm: sddmmHandle_t,
}

// SAFETY: each Session is used by one thread at a time, as the C API requires of handles.
unsafe impl Send for Session {}

impl Session {
    fn new(p: &Problems, backend: BackendKind) -> Self {
        let b = backend as i32;
        let (mut spamm, mut smat, mut msrep, mut sddmm) = (null_mut(), null_mut(), null_mut(), null_mut());
        let (mut smat_matrix, mut msrep_matrix) = (null_mut(), null_mut());
        unsafe {
            ok(spammCreate(&mut spamm), "spammCreate");
            ok(spammSetBackend(spamm, b), "spammSetBackend");
            ok(smatCreate(&mut smat), "smatCreate");
            ok(smatSetBackend(smat, b), "smatSetBackend");
            let a = &p.smat_a;
            ok(
                smatCreateCsr(
                    smat,
                    &mut smat_matrix,
                    a.rows as i32,
                    a.cols as i32,
                    a.nnz() as i64,
                    a.row_ptr.as_ptr(),
                    a.col_ind.as_ptr(),
                    a.values.as_ptr().cast(),
                    ValueType::F32 as i32,
                    IndexBase::Zero as i32,
                ),
                "smatCreateCsr",
            );
            ok(msrepCreate(&mut msrep), "msrepCreate");
            ok(msrepSetBackend(msrep, b), "msrepSetBackend");
            let a = &p.msrep_a;
            ok(
                msrepCreateCsr(
                    msrep,
                    &mut msrep_matrix,
                    a.rows as i32,
                    a.cols as i32,
                    a.nnz() as i64,
                    a.row_ptr.as_ptr(),
                    a.col_ind.as_ptr(),
                    a.values.as_ptr().cast(),
                    ValueType::F64 as i32,
                    IndexBase::Zero as i32,
                    3,
                ),
                "msrepCreateCsr",
            );
            ok(sddmmCreate(&mut sddmm), "sddmmCreate");
            ok(sddmmSetBackend(sddmm, b), "sddmmSetBackend");
        }
        Session { spamm, smat, smat_matrix, msrep, msrep_matrix, sddmm }
    }

    /// One call of each family on host arrays; returns the four outputs in f64.
    fn run_all(&self, p: &Problems) -> [Vec<f64>; 4] {
        let n = p.spamm_n as i32;
        let (one32, zero32, one64, zero64) = (1.0f32, 0.0f32, 1.0f64, 0.0f64);
        let mut c = vec![f32::NAN; p.spamm_n * p.spamm_n];
        let mut smat_c = vec![f32::NAN; p.smat_a.rows * p.smat_n];
        let mut y = vec![f64::NAN; p.msrep_a.rows];
        let mut out = vec![f32::NAN; p.sddmm_s.nnz()];
        let s = &p.sddmm_s;
        unsafe {
            ok(
                spammSgemm(
                    self.spamm,
                    0,
                    0,
                    n,
                    n,
                    n,
                    &one32,
                    p.spamm_a.as_ptr(),
                    n,
                    p.spamm_b.as_ptr(),
                    n,
                    &zero32,
                    c.as_mut_ptr(),
                    n,
                    0.5,
                ),
                "spammSgemm",
            );
            ok(
                smatSpMM(
                    self.smat,
                    self.smat_matrix,
                    p.smat_n as i32,
                    (&one32 as *const f32).cast(),
                    p.smat_b.as_ptr().cast(),
                    p.smat_n as i32,
                    (&zero32 as *const f32).cast(),
                    smat_c.as_mut_ptr().cast(),
                    p.smat_n as i32,
                    Layout::RowMajor as i32,
                ),
                "smatSpMM",
            );
            ok(
                msrepSpMV(
                    self.msrep,
                    self.msrep_matrix,
                    (&one64 as *const f64).cast(),
                    p.msrep_x.as_ptr().cast(),
                    (&zero64 as *const f64).cast(),
                    y.as_mut_ptr().cast(),
                ),
                "msrepSpMV",
            );
            ok(
                sddmmDynamic(
                    self.sddmm,
                    s.rows as i32,
                    s.cols as i32,
                    p.sddmm_k as i32,
                    (&one32 as *const f32).cast(),
                    p.sddmm_a.as_ptr().cast(),
                    p.sddmm_k as i32,
                    p.sddmm_b.as_ptr().cast(),
                    p.sddmm_k as i32,
                    Layout::RowMajor as i32,
                    s.nnz() as i64,
                    s.row_ptr.as_ptr(),
                    s.col_ind.as_ptr(),
                    s.values.as_ptr().cast(),
                    IndexBase::Zero as i32,
                    ValueType::F32 as i32,
                    out.as_mut_ptr().cast(),
                ),
                "sddmmDynamic",
            );
        }
        let f = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        [f(&c), f(&smat_c), y, f(&out)]
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        unsafe {
            ok(spammDestroy(self.spamm), "spammDestroy");
            ok(smatDestroyMatrix(self.smat_matrix), "smatDestroyMatrix");
            ok(smatDestroy(self.smat), "smatDestroy");
            ok(msrepDestroyMatrix(self.msrep_matrix), "msrepDestroyMatrix");
            ok(msrepDestroy(self.msrep), "msrepDestroy");
            ok(sddmmDestroy(self.sddmm), "sddmmDestroy");
        }
    }
}

fn assert_same(got: &[Vec<f64>; 4], want: &[Vec<f64>; 4], context: &str) {
    for (family, (g, w)) in ["spamm", "smat", "msrep", "sddmm"].iter().zip(got.iter().zip(want)) {
        let err = relative_error(g, w);
        assert!(err <= 1e-5, "{context}: {family} differs from the CPU backend by {err:e}");
    }
}

fn free_device_memory() -> usize {
    let gpu = cuda::device(0).unwrap();
    gpu.bind().unwrap();
    gpu.ctx.synchronize().unwrap();
    gpu.ctx.mem_get_info().unwrap().0
}

#[test]
fn ten_thousand_calls_of_each_family_leave_device_memory_where_it_started() {
    if !common::cuda_available("ten_thousand_calls_of_each_family_leave_device_memory_where_it_started") {
        return;
    }
    let _serial = SERIAL.lock().unwrap();
    let mut rng = Rng::fresh("endurance");
    let p = Problems::new(&mut rng);
    let want = Session::new(&p, BackendKind::Cpu).run_all(&p);
    let gpu = Session::new(&p, BackendKind::Cuda);
    assert_same(&gpu.run_all(&p), &want, "warm-up");
    // Device-pointer variants of the SpAMM operands, so both staging and in-place paths are repeated.
    let dev = cuda::device(0).unwrap();
    let stream = cuda::Stream::DEFAULT;
    let (da, db) = (
        DeviceBuffer::from_host(&dev, &p.spamm_a, stream, "A").unwrap(),
        DeviceBuffer::from_host(&dev, &p.spamm_b, stream, "B").unwrap(),
    );
    let dc = DeviceBuffer::zeroed(&dev, p.spamm_a.len() * 4, stream, "C").unwrap();
    let before = free_device_memory();
    let n = p.spamm_n as i32;
    let (one, zero) = (1.0f32, 0.0f32);
    for call in 0..10_000 {
        if call % 2 == 0 {
            unsafe {
                ok(
                    spammSgemm(
                        gpu.spamm,
                        0,
                        0,
                        n,
                        n,
                        n,
                        &one,
                        da.ptr() as *const f32,
                        n,
                        db.ptr() as *const f32,
                        n,
                        &zero,
                        dc.ptr() as *mut f32,
                        n,
                        0.5,
                    ),
                    "spammSgemm",
                );
            }
        }
        if call % 1000 == 999 {
            assert_same(&gpu.run_all(&p), &want, &format!("call {call}"));
        } else {
            gpu.run_all(&p);
        }
    }
    let after = free_device_memory();
    println!("free device memory: {before} bytes before, {after} after 10 000 calls of each family");
    assert_eq!(before, after, "device memory changed by {} bytes", before as i64 - after as i64);
}

#[test]
fn threads_with_their_own_handles_run_every_family_at_once() {
    if !common::cuda_available("threads_with_their_own_handles_run_every_family_at_once") {
        return;
    }
    let _serial = SERIAL.lock().unwrap();
    let mut rng = Rng::fresh("concurrency");
    let problems: Vec<Problems> = (0..6).map(|_| Problems::new(&mut rng)).collect();
    let wanted: Vec<[Vec<f64>; 4]> = problems.iter().map(|p| Session::new(p, BackendKind::Cpu).run_all(p)).collect();
    std::thread::scope(|scope| {
        for (t, (p, want)) in problems.iter().zip(&wanted).enumerate() {
            scope.spawn(move || {
                let session = Session::new(p, BackendKind::Cuda);
                for round in 0..50 {
                    assert_same(&session.run_all(p), want, &format!("thread {t}, round {round}"));
                }
            });
        }
    });
}

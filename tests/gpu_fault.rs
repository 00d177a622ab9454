//! A kernel fault in the process leaves the library's handles answering with a status, never
//! crashing or hanging. The fault is planted: a kernel that writes through an invalid address,
//! launched on the library's own (primary) context after every family has run once. A fault breaks
//! the CUDA context for the whole process, so the check runs in a child process of this test.

mod common;
use common::last_error;
use sparsegpu::Status;
use sparsegpu::capi::{msrep::*, sddmm::*, smat::*, spamm::*};
use std::ffi::c_void;
use std::ptr::null_mut;

const CHILD: &str = "SPARSEGPU_PLANTED_FAULT_CHILD";
const OK: i32 = Status::Success as i32;
const CUDA: i32 = sparsegpu::BackendKind::Cuda as i32;
const F32: i32 = sparsegpu::ValueType::F32 as i32;
const ROW_MAJOR: i32 = sparsegpu::Layout::RowMajor as i32;
const BASE_ZERO: i32 = sparsegpu::IndexBase::Zero as i32;
const OP_N: i32 = sparsegpu::Operation::N as i32;

#[test]
fn a_planted_kernel_fault_gives_statuses_never_a_crash() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    if !common::cuda_available("a_planted_kernel_fault_gives_statuses_never_a_crash") {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = std::process::Command::new(exe)
        .args(["--exact", "a_planted_kernel_fault_gives_statuses_never_a_crash", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the child test runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the child ended with {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    assert!(stdout.contains("every call answered"), "the child did not finish:\n{stdout}\n{stderr}");
}

/// The identity of order `n` in CSR, and an `n`-vector of ones.
struct Problem {
    n: usize,
    row_ptr: Vec<i32>,
    col_ind: Vec<i32>,
    values: Vec<f32>,
    dense: Vec<f32>,
}

impl Problem {
    fn new(n: usize) -> Self {
        Problem {
            n,
            row_ptr: (0..=n as i32).collect(),
            col_ind: (0..n as i32).collect(),
            values: vec![1.0; n],
            dense: vec![1.0; n * n],
        }
    }
}

/// One call of each family on its own handle; returns the statuses.
fn every_family(
    p: &Problem,
    spamm: spammHandle_t,
    smat: smatHandle_t,
    msrep: msrepHandle_t,
    sddmm: sddmmHandle_t,
) -> [i32; 4] {
    let n = p.n as i32;
    let (one, zero) = (1.0f32, 0.0f32);
    let mut c = vec![0.0f32; p.n * p.n];
    let spamm_status = unsafe {
        spammSgemm(
            spamm,
            OP_N,
            OP_N,
            n,
            n,
            n,
            &one,
            p.dense.as_ptr(),
            n,
            p.dense.as_ptr(),
            n,
            &zero,
            c.as_mut_ptr(),
            n,
            0.0,
        )
    };
    let mut matrix = null_mut();
    let (rp, ci, v) = (p.row_ptr.as_ptr(), p.col_ind.as_ptr(), p.values.as_ptr() as *const c_void);
    let mut smat_status = unsafe { smatCreateCsr(smat, &mut matrix, n, n, p.n as i64, rp, ci, v, F32, BASE_ZERO) };
    if smat_status == OK {
        let (a, b, cp) = (&one as *const f32 as *const c_void, p.dense.as_ptr() as *const c_void, c.as_mut_ptr());
        smat_status = unsafe {
            smatSpMM(smat, matrix, n, a, b, n, &zero as *const f32 as *const c_void, cp as *mut c_void, n, ROW_MAJOR)
        };
        assert!(unsafe { smatDestroyMatrix(matrix) } == OK || smat_status != OK, "{}", last_error());
    }
    let mut partitioned = null_mut();
    let mut msrep_status =
        unsafe { msrepCreateCsr(msrep, &mut partitioned, n, n, p.n as i64, rp, ci, v, F32, BASE_ZERO, 0) };
    if msrep_status == OK {
        let mut y = vec![0.0f32; p.n];
        let (a, x) = (&one as *const f32 as *const c_void, p.dense.as_ptr() as *const c_void);
        msrep_status = unsafe {
            msrepSpMV(msrep, partitioned, a, x, &zero as *const f32 as *const c_void, y.as_mut_ptr() as *mut c_void)
        };
        assert!(unsafe { msrepDestroyMatrix(partitioned) } == OK || msrep_status != OK, "{}", last_error());
    }
    let mut out = vec![0.0f32; p.n];
    let d = p.dense.as_ptr() as *const c_void;
    let sddmm_status = unsafe {
        sddmmDynamic(
            sddmm,
            n,
            n,
            n,
            &one as *const f32 as *const c_void,
            d,
            n,
            d,
            n,
            ROW_MAJOR,
            p.n as i64,
            rp,
            ci,
            v,
            BASE_ZERO,
            F32,
            out.as_mut_ptr() as *mut c_void,
        )
    };
    [spamm_status, smat_status, msrep_status, sddmm_status]
}

macro_rules! cuda_handle {
    ($create:ident, $set_backend:ident) => {{
        let mut h = null_mut();
        let status = unsafe { $create(&mut h) };
        assert_eq!(status, OK, "{}", last_error());
        assert_eq!(unsafe { $set_backend(h, CUDA) }, OK, "{}", last_error());
        h
    }};
}

fn child() {
    let p = Problem::new(64);
    let before = [cuda_handle!(spammCreate, spammSetBackend), cuda_handle!(spammCreate, spammSetBackend)];
    let (smat, msrep, sddmm) = (
        cuda_handle!(smatCreate, smatSetBackend),
        cuda_handle!(msrepCreate, msrepSetBackend),
        cuda_handle!(sddmmCreate, sddmmSetBackend),
    );
    assert_eq!(every_family(&p, before[0], smat, msrep, sddmm), [OK; 4], "before the fault: {}", last_error());

    plant_fault();

    // Every later call, on handles made before the fault and after it, answers with a status: the
    // fault is reported as SGPU_STATUS_EXECUTION_FAILED (a call that needs no device work may still
    // succeed).
    let answered = |statuses: [i32; 4], when: &str| {
        for (family, status) in ["spamm", "smat", "msrep", "sddmm"].iter().zip(statuses) {
            assert!(
                status == OK || status == Status::ExecutionFailed as i32,
                "{family} {when}: status {status}, message: {}",
                last_error()
            );
        }
        statuses
    };
    let after = answered(every_family(&p, before[1], smat, msrep, sddmm), "on handles made before the fault");
    assert!(after.contains(&(Status::ExecutionFailed as i32)), "the fault went unreported: {after:?}");
    let mut fresh = null_mut();
    let status = unsafe { spammCreate(&mut fresh) };
    assert!(status == OK || status == Status::ExecutionFailed as i32, "spammCreate after the fault: {status}");
    if status == OK {
        let status = unsafe { spammSetBackend(fresh, CUDA) };
        assert!(status == OK || status == Status::ExecutionFailed as i32, "spammSetBackend: {status}");
        answered(every_family(&p, fresh, smat, msrep, sddmm), "on a handle made after the fault");
        assert_eq!(unsafe { spammDestroy(fresh) }, OK);
    }
    for h in before {
        assert_eq!(unsafe { spammDestroy(h) }, OK);
    }
    assert_eq!(unsafe { smatDestroy(smat) }, OK);
    assert_eq!(unsafe { msrepDestroy(msrep) }, OK);
    assert_eq!(unsafe { sddmmDestroy(sddmm) }, OK);
    println!("every call answered");
}

/// Launches a kernel that stores through address 8 on device 0's primary context (the library's)
/// and waits for it: the context is broken from here on.
fn plant_fault() {
    use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
    let ctx = CudaContext::new(0).expect("device 0's primary context");
    let ptx = cudarc::nvrtc::compile_ptx("extern \"C\" __global__ void planted_fault(int* p) { *p = 1; }")
        .expect("the faulting kernel compiles");
    let module = ctx.load_module(ptx).expect("the faulting kernel loads");
    let function = module.load_function("planted_fault").expect("the faulting kernel is there");
    let stream = ctx.default_stream();
    let address: u64 = 8;
    let config = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
    let mut launch = stream.launch_builder(&function);
    launch.arg(&address);
    unsafe { launch.launch(config) }.expect("the faulting kernel launches");
    assert!(stream.synchronize().is_err(), "the planted kernel did not fault");
}

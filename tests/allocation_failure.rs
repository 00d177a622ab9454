//! A request for more memory than the machine gives is a status, never an abort of the host program.
//!
//! Each case runs in a child process: this test binary again, with `SPARSEGPU_ALLOCATION_CASE` naming
//! the case and the CPU backend. The child prepares its inputs (zero-filled by calloc, so untouched
//! pages cost address space but no memory), caps its address space (RLIMIT_AS) a margin above what it
//! holds then, makes the call and checks the status and message. The parent requires the child to
//! exit normally, having passed: an allocation that aborts (SIGABRT) or any other signal fails here.
//! The inputs are valid (except where a case says its sizes are inconsistent): only the memory a call
//! needs internally exceeds the cap.

use sparsegpu::capi::msrep::*;
use sparsegpu::capi::sddmm::*;
use sparsegpu::capi::smat::*;
use sparsegpu::capi::spamm::*;
use sparsegpu::{IndexBase, Layout, Operation, Status, ValueType};
use std::ffi::{CStr, c_void};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::ptr::{null, null_mut};

const CASE_VARIABLE: &str = "SPARSEGPU_ALLOCATION_CASE";
const MIB: u64 = 1 << 20;
const N: i32 = Operation::N as i32;
const T: i32 = Operation::T as i32;
const F16: i32 = ValueType::F16 as i32;
const F32: i32 = ValueType::F32 as i32;
const ROW_MAJOR: i32 = Layout::RowMajor as i32;
const ZERO_BASE: i32 = IndexBase::Zero as i32;
/// 2^31 − 1: the largest `int` dimension.
const INT_MAX: i32 = i32::MAX;

/// Runs `case` in a child process and requires that it exits normally, having passed.
fn in_child(case: &str) {
    let exe = std::env::current_exe().expect("test executable");
    let started = std::time::Instant::now();
    let out = Command::new(exe)
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CASE_VARIABLE, case)
        .env("SPARSEGPU_BACKEND", "cpu")
        .output()
        .expect("start the child");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.signal().is_none(), "{case}: the child was killed by signal {:?}:\n{text}", out.status.signal());
    assert!(out.status.success(), "{case}: the child failed ({}):\n{text}", out.status);
    assert!(text.contains(&format!("case {case} passed")), "{case}: the child did not run the case:\n{text}");
    println!("{case}: {:.2} s", started.elapsed().as_secs_f64());
}

/// The child's entry point: a no-op in an ordinary test run.
#[test]
fn child() {
    let Ok(case) = std::env::var(CASE_VARIABLE) else { return };
    let cases: &[(&str, fn())] = &[
        ("spamm_sgemm_unaddressable", spamm_sgemm_unaddressable),
        ("spamm_sgemm_unaddressable_c", spamm_sgemm_unaddressable_c),
        ("spamm_hgemm_norm_map_beyond_memory", spamm_hgemm_norm_map_beyond_memory),
        ("spamm_hgemm_huge_norm_map", spamm_hgemm_huge_norm_map),
        ("spamm_sgemm_statistics_beyond_memory", spamm_sgemm_statistics_beyond_memory),
        ("spamm_tune_tau_norm_map_beyond_memory", spamm_tune_tau_norm_map_beyond_memory),
        ("spamm_tune_tau_long_inner_dimension", spamm_tune_tau_long_inner_dimension),
        (
            "spamm_tune_tau_for_error_bound_norm_map_beyond_memory",
            spamm_tune_tau_for_error_bound_norm_map_beyond_memory,
        ),
        ("spamm_gemm_at_valid_ratio_norm_map_beyond_memory", spamm_gemm_at_valid_ratio_norm_map_beyond_memory),
        ("spamm_gemm_within_error_bound_norm_map_beyond_memory", spamm_gemm_within_error_bound_norm_map_beyond_memory),
        ("smat_create_csr_many_rows", smat_create_csr_many_rows),
        ("msrep_create_csr_values_beyond_memory", msrep_create_csr_values_beyond_memory),
        ("sddmm_dynamic_coo_many_rows", sddmm_dynamic_coo_many_rows),
        ("sddmm_dynamic_tiled_beyond_memory", sddmm_dynamic_tiled_beyond_memory),
        ("sddmm_create_plan_beyond_memory", sddmm_create_plan_beyond_memory),
    ];
    let (_, run) = cases.iter().find(|(name, _)| *name == case).unwrap_or_else(|| panic!("unknown case {case}"));
    run();
    println!("case {case} passed");
}

// ---- the child's tools ----------------------------------------------------------------------------

fn last_error() -> String {
    unsafe { CStr::from_ptr(sparsegpu::capi::common::sgpuGetLastErrorMessage()) }.to_string_lossy().into_owned()
}

/// The address space this process holds now (VmSize), in bytes.
fn address_space() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmSize:")).expect("VmSize");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmSize in kB");
    kib * 1024
}

/// Caps the address space at what the process holds plus `margin`: any larger allocation fails.
fn cap_address_space(margin: u64) {
    // Threads the calls will use (rayon's pool) exist before the cap.
    rayon::broadcast(|_| ());
    let limit = address_space() + margin;
    let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut current) }, 0);
    let capped = libc::rlimit { rlim_cur: limit, rlim_max: current.rlim_max };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &capped) }, 0, "setrlimit");
    // The cap works: an allocation beyond it fails.
    let mut probe: Vec<u8> = Vec::new();
    assert!(probe.try_reserve_exact(margin as usize + 64 * MIB as usize).is_err(), "RLIMIT_AS is not enforced");
}

/// `len` zeros, from calloc: no page is touched until it is read or written.
fn zeros<X: Clone + Default>(len: usize) -> Vec<X> {
    vec![X::default(); len]
}

#[track_caller]
fn expect(status: i32, want: Status, function: &str, parts: &[&str]) {
    let message = last_error();
    assert_eq!(status, want as i32, "{function}: status {status}, message: {message}");
    assert!(message.starts_with(function), "message does not name {function}: {message}");
    for part in parts {
        assert!(message.contains(part), "message lacks {part:?}: {message}");
    }
    println!("{function}: {message}");
}

fn spamm_handle(block_size: i32) -> spammHandle_t {
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, 0, "{}", last_error());
    assert_eq!(unsafe { spammSetBlockSize(h, block_size) }, 0);
    h
}

// ---- SpAMM --------------------------------------------------------------------------------------

/// m = n = k = lda = ldb = ldc = 2^31 − 1 in FP32: A alone would be 2^64 bytes. No such array exists,
/// so the sizes are inconsistent (and nothing is allocated).
fn spamm_sgemm_unaddressable() {
    let h = spamm_handle(32);
    let data = [0.0f32; 64];
    let mut c = [0.0f32; 64];
    cap_address_space(256 * MIB);
    let st = unsafe {
        spammSgemm(
            h,
            N,
            N,
            INT_MAX,
            INT_MAX,
            INT_MAX,
            &1.0,
            data.as_ptr(),
            INT_MAX,
            data.as_ptr(),
            INT_MAX,
            &0.0,
            c.as_mut_ptr(),
            INT_MAX,
            0.0,
        )
    };
    expect(st, Status::InvalidSize, "spammSgemm", &["argument A", "4 bytes"]);
}

/// m = n = 2^31 − 1, k = 1 in FP32: A and B are 8 GiB each, C would be 2^64 bytes.
fn spamm_sgemm_unaddressable_c() {
    let h = spamm_handle(32);
    let data = [0.0f32; 64];
    let mut c = [0.0f32; 64];
    cap_address_space(256 * MIB);
    let st = unsafe {
        spammSgemm(
            h,
            N,
            N,
            INT_MAX,
            INT_MAX,
            1,
            &1.0,
            data.as_ptr(),
            INT_MAX,
            data.as_ptr(),
            1,
            &0.0,
            c.as_mut_ptr(),
            INT_MAX,
            0.0,
        )
    };
    expect(st, Status::InvalidSize, "spammSgemm", &["argument C"]);
}

/// 8192² f16 operands at block size 1: each norm map is 8192² doubles (512 MiB), beyond a cap of 256
/// MiB above the operands. C stays untouched.
fn spamm_hgemm_norm_map_beyond_memory() {
    const SIDE: i32 = 8192;
    let h = spamm_handle(1);
    let len = (SIDE as usize).pow(2);
    let (a, b, mut c) = (zeros::<u16>(len), zeros::<u16>(len), zeros::<u16>(len));
    c[0] = 0x3c00;
    cap_address_space(256 * MIB);
    let st = unsafe {
        spammHgemm(h, N, T, SIDE, SIDE, SIDE, &1.0, a.as_ptr(), SIDE, b.as_ptr(), SIDE, &0.0, c.as_mut_ptr(), SIDE, 0.0)
    };
    expect(st, Status::AllocationFailed, "spammHgemm", &["536870912 bytes"]);
    assert_eq!(c[0], 0x3c00, "C was written");
}

/// m = k = 2^31 − 1, n = 1 in f16 at block size 32: A is addressable (just under 2^63 bytes) but its
/// norm map is 2^52 doubles (32 PiB). Nothing is read, since the map is allocated first, so A and B
/// are addresses past C's 4 GiB (no overlap) with no memory behind them.
fn spamm_hgemm_huge_norm_map() {
    let h = spamm_handle(32);
    let mut c = [0u16; 64];
    let a = c.as_ptr().wrapping_add(1 << 40);
    cap_address_space(256 * MIB);
    let st = unsafe {
        spammHgemm(h, N, N, INT_MAX, 1, INT_MAX, &1.0, a, INT_MAX, a, INT_MAX, &0.0, c.as_mut_ptr(), INT_MAX, 0.0)
    };
    expect(st, Status::AllocationFailed, "spammHgemm", &["36028797018963968 bytes"]);
}

/// m = n = 8192, k = 1 at block size 1: tiny norm maps, but the statistics hold a count and a sum per
/// C block (2 × 512 MiB). They are allocated before C is written, so C stays untouched.
fn spamm_sgemm_statistics_beyond_memory() {
    const SIDE: i32 = 8192;
    let h = spamm_handle(1);
    let (a, b) = (vec![1.0f32; SIDE as usize], vec![1.0f32; SIDE as usize]);
    let mut c = zeros::<f32>((SIDE as usize).pow(2));
    c[0] = 5.0;
    cap_address_space(256 * MIB);
    let st = unsafe {
        spammSgemm(h, N, N, SIDE, SIDE, 1, &1.0, a.as_ptr(), SIDE, b.as_ptr(), 1, &1.0, c.as_mut_ptr(), SIDE, 0.0)
    };
    expect(st, Status::AllocationFailed, "spammSgemm", &["536870912 bytes"]);
    assert_eq!(c[0], 5.0, "C was written");
}

/// The τ searches and tuned products of 8192² f16 operands at block size 1, each norm map beyond the
/// cap as in [`spamm_hgemm_norm_map_beyond_memory`].
fn tuning_operands() -> (spammHandle_t, Vec<u16>, Vec<u16>, Vec<u16>) {
    let len = 8192usize.pow(2);
    let operands = (spamm_handle(1), zeros(len), zeros(len), zeros(len));
    cap_address_space(256 * MIB);
    operands
}

fn spamm_tune_tau_norm_map_beyond_memory() {
    let (h, a, b, _) = tuning_operands();
    let (mut tau, mut ratio) = (-1.0, -1.0);
    let (ap, bp) = (a.as_ptr() as *const c_void, b.as_ptr() as *const c_void);
    let st =
        unsafe { spammTuneTau(h, F16, N, N, 8192, 8192, 8192, ap, 8192, bp, 8192, 0.5, 0.01, 4, &mut tau, &mut ratio) };
    expect(st, Status::AllocationFailed, "spammTuneTau", &["536870912 bytes"]);
    assert_eq!((tau, ratio), (-1.0, -1.0), "outputs were written");
}

/// m = n = 1, k = 2^17 at block size 1: norm maps of 1 MiB, and a τ search that must not hold a count
/// per inner block and candidate (2^17 × 256 of them).
fn spamm_tune_tau_long_inner_dimension() {
    const K: i32 = 1 << 17;
    let h = spamm_handle(1);
    let a: Vec<f32> = (0..K).map(|p| 1.0 / (1.0 + p as f32)).collect();
    let (ap, bp) = (a.as_ptr() as *const c_void, a.as_ptr() as *const c_void);
    cap_address_space(256 * MIB);
    let (mut tau, mut ratio) = (-1.0, -1.0);
    let st = unsafe { spammTuneTau(h, F32, N, N, 1, 1, K, ap, 1, bp, K, 0.5, 0.01, 1, &mut tau, &mut ratio) };
    assert_eq!(st, 0, "{}", last_error());
    assert!(tau > 0.0 && (ratio - 0.5).abs() < 0.05, "tau {tau}, ratio {ratio}");
}

fn spamm_tune_tau_for_error_bound_norm_map_beyond_memory() {
    let (h, a, b, _) = tuning_operands();
    let (mut tau, mut bound, mut ratio) = (-1.0, -1.0, -1.0);
    let (ap, bp) = (a.as_ptr() as *const c_void, b.as_ptr() as *const c_void);
    let alpha = 1.0f32;
    let alpha = &alpha as *const f32 as *const c_void;
    let st = unsafe {
        spammTuneTauForErrorBound(
            h, F16, N, N, 8192, 8192, 8192, alpha, ap, 8192, bp, 8192, 1.0, 4, &mut tau, &mut bound, &mut ratio,
        )
    };
    expect(st, Status::AllocationFailed, "spammTuneTauForErrorBound", &["536870912 bytes"]);
}

fn spamm_gemm_at_valid_ratio_norm_map_beyond_memory() {
    let (h, a, b, mut c) = tuning_operands();
    let mut tau = -1.0;
    let (one, zero) = (1.0f32, 0.0f32);
    let (one, zero) = (&one as *const f32 as *const c_void, &zero as *const f32 as *const c_void);
    let (ap, bp, cp) = (a.as_ptr() as *const c_void, b.as_ptr() as *const c_void, c.as_mut_ptr() as *mut c_void);
    let st = unsafe {
        spammGemmAtValidRatio(
            h, F16, N, N, 8192, 8192, 8192, one, ap, 8192, bp, 8192, zero, cp, 8192, 0.5, 0.01, 4, &mut tau,
        )
    };
    expect(st, Status::AllocationFailed, "spammGemmAtValidRatio", &["536870912 bytes"]);
    assert_eq!(tau, -1.0, "tau was written");
}

fn spamm_gemm_within_error_bound_norm_map_beyond_memory() {
    let (h, a, b, mut c) = tuning_operands();
    let mut tau = -1.0;
    let (one, zero) = (1.0f32, 0.0f32);
    let (one, zero) = (&one as *const f32 as *const c_void, &zero as *const f32 as *const c_void);
    let (ap, bp, cp) = (a.as_ptr() as *const c_void, b.as_ptr() as *const c_void, c.as_mut_ptr() as *mut c_void);
    let st = unsafe {
        spammGemmWithinErrorBound(
            h, F16, N, N, 8192, 8192, 8192, one, ap, 8192, bp, 8192, zero, cp, 8192, 1.0, 4, &mut tau,
        )
    };
    expect(st, Status::AllocationFailed, "spammGemmWithinErrorBound", &["536870912 bytes"]);
}

// ---- SMaT ---------------------------------------------------------------------------------------

/// 2^26 empty rows (rowPtr: 256 MiB of zeros): the analysis keeps a count per row (512 MiB).
fn smat_create_csr_many_rows() {
    const ROWS: i32 = 1 << 26;
    let mut h = null_mut();
    assert_eq!(unsafe { smatCreate(&mut h) }, 0, "{}", last_error());
    let row_ptr = zeros::<i32>(ROWS as usize + 1);
    cap_address_space(256 * MIB);
    let mut a = null_mut();
    let st = unsafe { smatCreateCsr(h, &mut a, ROWS, ROWS, 0, row_ptr.as_ptr(), null(), null(), F32, ZERO_BASE) };
    expect(st, Status::AllocationFailed, "smatCreateCsr", &["536870912 bytes"]);
    assert!(a.is_null(), "a matrix was returned");
}

// ---- MSREP --------------------------------------------------------------------------------------

/// One row of 2^26 f32 entries (colInd and values: 256 MiB each) in one partition: the partition's
/// copies of the indices and of the values do not both fit 384 MiB.
fn msrep_create_csr_values_beyond_memory() {
    const NNZ: i32 = 1 << 26;
    let mut h = null_mut();
    assert_eq!(unsafe { msrepCreate(&mut h) }, 0, "{}", last_error());
    let row_ptr = [0, NNZ];
    let (col_ind, values) = (zeros::<i32>(NNZ as usize), zeros::<f32>(NNZ as usize));
    cap_address_space(384 * MIB);
    let mut a = null_mut();
    let st = unsafe {
        msrepCreateCsr(
            h,
            &mut a,
            1,
            1,
            NNZ as i64,
            row_ptr.as_ptr(),
            col_ind.as_ptr(),
            values.as_ptr() as *const c_void,
            F32,
            ZERO_BASE,
            1,
        )
    };
    expect(st, Status::AllocationFailed, "msrepCreateCsr", &["268435456 bytes"]);
    assert!(a.is_null(), "a matrix was returned");
}

// ---- SDDMM --------------------------------------------------------------------------------------

fn sddmm_handle() -> sddmmHandle_t {
    let mut h = null_mut();
    assert_eq!(unsafe { sddmmCreate(&mut h) }, 0, "{}", last_error());
    h
}

/// m = n = 2^26 and no nonzeros (rowPtr: 256 MiB of zeros), k = 0: the COO path (density 0) needs no
/// memory per row.
fn sddmm_dynamic_coo_many_rows() {
    const M: i32 = 1 << 26;
    let h = sddmm_handle();
    let row_ptr = zeros::<i32>(M as usize + 1);
    cap_address_space(256 * MIB);
    let alpha = 1.0f32;
    let st = unsafe {
        sddmmDynamic(
            h,
            M,
            M,
            0,
            &alpha as *const f32 as *const c_void,
            null(),
            1,
            null(),
            1,
            ROW_MAJOR,
            0,
            row_ptr.as_ptr(),
            null(),
            null(),
            ZERO_BASE,
            F32,
            null_mut(),
        )
    };
    assert_eq!(st, 0, "{}", last_error());
}

/// One row band holding 2^24 entries (all in row 0, column 0; colInd and out: 64 MiB each): the tiled
/// path's schedule of the band starts with a 16-byte sort key per entry (256 MiB).
fn sddmm_tiled_inputs() -> (sddmmHandle_t, Vec<i32>, Vec<i32>) {
    const NNZ: i32 = 1 << 24;
    let h = sddmm_handle();
    let mut row_ptr = vec![NNZ; 65];
    row_ptr[0] = 0;
    (h, row_ptr, zeros::<i32>(NNZ as usize))
}

fn sddmm_dynamic_tiled_beyond_memory() {
    let (h, row_ptr, col_ind) = sddmm_tiled_inputs();
    let mut out = zeros::<f32>(col_ind.len());
    out[0] = 5.0;
    cap_address_space(192 * MIB);
    let alpha = 1.0f32;
    let st = unsafe {
        sddmmDynamic(
            h,
            64,
            64,
            0,
            &alpha as *const f32 as *const c_void,
            null(),
            1,
            null(),
            1,
            ROW_MAJOR,
            col_ind.len() as i64,
            row_ptr.as_ptr(),
            col_ind.as_ptr(),
            null(),
            ZERO_BASE,
            F32,
            out.as_mut_ptr() as *mut c_void,
        )
    };
    expect(st, Status::AllocationFailed, "sddmmDynamic", &["bytes"]);
    assert_eq!(out[0], 5.0, "out was written");
}

/// As [`sddmm_dynamic_tiled_beyond_memory`]; the plan's copy of colInd and its COO rows (64 MiB each)
/// fit the cap, the tile schedule does not.
fn sddmm_create_plan_beyond_memory() {
    let (h, row_ptr, col_ind) = sddmm_tiled_inputs();
    cap_address_space(320 * MIB);
    let mut plan = null_mut();
    let st = unsafe {
        sddmmCreatePlan(h, &mut plan, 64, 64, col_ind.len() as i64, row_ptr.as_ptr(), col_ind.as_ptr(), ZERO_BASE)
    };
    expect(st, Status::AllocationFailed, "sddmmCreatePlan", &["bytes"]);
    assert!(plan.is_null(), "a plan was returned");
}

// ---- the parent's tests, one child each ---------------------------------------------------------

#[test]
fn spamm_sgemm_with_unaddressable_operands_is_invalid_size() {
    in_child("spamm_sgemm_unaddressable");
    in_child("spamm_sgemm_unaddressable_c");
}

#[test]
fn spamm_gemm_norm_maps_beyond_memory_fail_cleanly() {
    in_child("spamm_hgemm_norm_map_beyond_memory");
    in_child("spamm_hgemm_huge_norm_map");
}

#[test]
fn spamm_gemm_statistics_beyond_memory_fail_before_c_is_written() {
    in_child("spamm_sgemm_statistics_beyond_memory");
}

#[test]
fn spamm_tau_searches_beyond_memory_fail_cleanly() {
    in_child("spamm_tune_tau_norm_map_beyond_memory");
    in_child("spamm_tune_tau_for_error_bound_norm_map_beyond_memory");
    in_child("spamm_gemm_at_valid_ratio_norm_map_beyond_memory");
    in_child("spamm_gemm_within_error_bound_norm_map_beyond_memory");
}

#[test]
fn spamm_tau_search_memory_does_not_grow_with_candidates_times_inner_blocks() {
    in_child("spamm_tune_tau_long_inner_dimension");
}

#[test]
fn smat_analysis_beyond_memory_fails_cleanly() {
    in_child("smat_create_csr_many_rows");
}

#[test]
fn msrep_partitions_beyond_memory_fail_cleanly() {
    in_child("msrep_create_csr_values_beyond_memory");
}

#[test]
fn sddmm_coo_path_needs_no_memory_per_row() {
    in_child("sddmm_dynamic_coo_many_rows");
}

#[test]
fn sddmm_tile_schedules_beyond_memory_fail_cleanly() {
    in_child("sddmm_dynamic_tiled_beyond_memory");
    in_child("sddmm_create_plan_beyond_memory");
}

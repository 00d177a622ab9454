//! A request for more memory than the machine gives is a status, never an abort of the host program.
//!
//! Each case runs in a child process: this test binary again, with `SPARSEGPU_ALLOCATION_CASE` naming
//! the case and the CPU backend. The child prepares its inputs (zero-filled by calloc, so untouched
//! pages cost address space but no memory), caps its address space (RLIMIT_AS) a margin above what it
//! holds then, makes the call and checks the status and message. The parent requires the child to
//! exit normally, having passed: an allocation that aborts (SIGABRT) or any other signal fails here.
//! Every input is valid; only the internal memory a call needs exceeds the cap.

use sparsegpu::capi::spamm::*;
use sparsegpu::{Operation, Status};
use std::ffi::CStr;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::ptr::null_mut;

const CASE_VARIABLE: &str = "SPARSEGPU_ALLOCATION_CASE";
const MIB: u64 = 1 << 20;
const N: i32 = Operation::N as i32;
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

// ---- the parent's tests, one child each ---------------------------------------------------------

#[test]
fn spamm_sgemm_with_unaddressable_operands_is_invalid_size() {
    in_child("spamm_sgemm_unaddressable");
    in_child("spamm_sgemm_unaddressable_c");
}

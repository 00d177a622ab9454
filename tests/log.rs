//! `SPARSEGPU_LOG`: with `info`, every call of every family writes one line on standard error saying
//! what the library chose; unset or `off`, nothing; a value that names no level, one line saying so
//! and nothing else. The level is read once per process, so each test runs this executable again as
//! a child with the variable set, on the CPU backend, and reads the child's standard error.

mod common;

use sparsegpu::capi::{msrep::*, sddmm::*, smat::*, spamm::*};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng};
use sparsegpu::{IndexBase, Layout, Operation, Status, ValueType};
use std::ffi::c_void;
use std::process::Command;
use std::ptr::{null, null_mut};

/// Set in a child: the value is the test to run there.
const CHILD: &str = "SPARSEGPU_LOG_TEST_CHILD";
const OK: i32 = Status::Success as i32;
const BASE_ZERO: i32 = IndexBase::Zero as i32;
const ROW_MAJOR: i32 = Layout::RowMajor as i32;
const OP_N: i32 = Operation::N as i32;

/// Whether this process is the child of `test`.
fn in_child(test: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(test)
}

/// Runs `test` of this executable in a child with `SPARSEGPU_LOG` set to `level` (removed for None),
/// and returns the lines the library wrote on its standard error.
fn library_lines(test: &str, level: Option<&str>) -> Vec<String> {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut command = Command::new(exe);
    command.args(["--exact", test, "--test-threads=1"]).env(CHILD, test).env("SPARSEGPU_BACKEND", "cpu");
    match level {
        Some(level) => command.env("SPARSEGPU_LOG", level),
        None => command.env_remove("SPARSEGPU_LOG"),
    };
    let output = command.output().expect("the child runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the child failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains("1 passed"), "the child ran no test:\n{stdout}");
    stderr.lines().filter(|line| line.starts_with("sparsegpu: ")).map(str::to_string).collect()
}

/// One call of each kind of every family on the CPU backend, and one failing call; returns how many
/// calls succeeded.
fn every_family() -> usize {
    let mut rng = Rng::new(7);
    let mut calls = 0;
    let mut ok = |status: i32, what: &str| {
        assert_eq!(status, OK, "{what}: {}", common::last_error());
        calls += 1;
    };

    // SpAMM: a product at a given τ, a τ search, and a product refused for its τ.
    let n = 96;
    let a: Vec<f32> = testgen::exponential_decay(&mut rng, n, n, 1.0, 0.2);
    let mut c = vec![0f32; n * n];
    let (alpha, beta) = (1f32, 0f32);
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, OK);
    let ni = n as i32;
    let (ap, cp) = (a.as_ptr(), c.as_mut_ptr());
    ok(unsafe { spammSgemm(h, OP_N, OP_N, ni, ni, ni, &alpha, ap, ni, ap, ni, &beta, cp, ni, 1e-3) }, "spammSgemm");
    let refused = unsafe { spammSgemm(h, OP_N, OP_N, ni, ni, ni, &alpha, ap, ni, ap, ni, &beta, cp, ni, -1.0) };
    assert_eq!(refused, Status::InvalidValue as i32);
    let (mut tau, mut ratio) = (0.0, 0.0);
    let f32_type = ValueType::F32 as i32;
    let av = ap as *const c_void;
    let status = unsafe {
        spammTuneTau(h, f32_type, OP_N, OP_N, ni, ni, ni, av, ni, av, ni, 0.5, 0.01, 20, &mut tau, &mut ratio)
    };
    ok(status, "spammTuneTau");
    assert_eq!(unsafe { spammDestroy(h) }, OK);

    // SMaT: dense 16 × 16 blocks, full enough for f32 tiles, and rows without entries (CSR rows).
    let s: CsrMatrix<f32> = testgen::block_csr(&mut rng, 64, 64, 16, 0.3, 1.0);
    let width = 8;
    let b: Vec<f32> = rng.vec(64 * width);
    let mut c = vec![0f32; 64 * width];
    let mut h = null_mut();
    assert_eq!(unsafe { smatCreate(&mut h) }, OK);
    let mut matrix = null_mut();
    let (rp, ci, vals) = (s.row_ptr.as_ptr(), s.col_ind.as_ptr(), s.values.as_ptr() as *const c_void);
    let nnz = s.nnz() as i64;
    ok(unsafe { smatCreateCsr(h, &mut matrix, 64, 64, nnz, rp, ci, vals, f32_type, BASE_ZERO) }, "smatCreateCsr");
    let (bp, cp, w) = (b.as_ptr() as *const c_void, c.as_mut_ptr() as *mut c_void, width as i32);
    let (alpha, beta) = (&alpha as *const f32 as *const c_void, &beta as *const f32 as *const c_void);
    ok(unsafe { smatSpMM(h, matrix, w, alpha, bp, w, beta, cp, w, ROW_MAJOR) }, "smatSpMM");
    assert_eq!(unsafe { smatDestroyMatrix(matrix) }, OK);
    assert_eq!(unsafe { smatDestroy(h) }, OK);

    // MSREP: three pCSR partitions and an SpMV.
    let s: CsrMatrix<f64> = testgen::random_csr(&mut rng, 100, 100, 0.05);
    let x: Vec<f64> = rng.vec(100);
    let mut y = vec![0f64; 100];
    let (alpha, beta) = (1f64, 0f64);
    let mut h = null_mut();
    assert_eq!(unsafe { msrepCreate(&mut h) }, OK);
    let mut matrix = null_mut();
    let (rp, ci, vals) = (s.row_ptr.as_ptr(), s.col_ind.as_ptr(), s.values.as_ptr() as *const c_void);
    let f64_type = ValueType::F64 as i32;
    let status =
        unsafe { msrepCreateCsr(h, &mut matrix, 100, 100, s.nnz() as i64, rp, ci, vals, f64_type, BASE_ZERO, 3) };
    ok(status, "msrepCreateCsr");
    let (alpha, beta) = (&alpha as *const f64 as *const c_void, &beta as *const f64 as *const c_void);
    let (xp, yp) = (x.as_ptr() as *const c_void, y.as_mut_ptr() as *mut c_void);
    ok(unsafe { msrepSpMV(h, matrix, alpha, xp, beta, yp) }, "msrepSpMV");
    assert_eq!(unsafe { msrepDestroyMatrix(matrix) }, OK);
    assert_eq!(unsafe { msrepDestroy(h) }, OK);

    // SDDMM: tiled at a threshold below the density, COO at one above it, and a plan.
    let (m, k) = (64, 16);
    let s: CsrMatrix<f32> = testgen::random_csr(&mut rng, m, m, 0.1);
    let (a, b): (Vec<f32>, Vec<f32>) = (rng.vec(m * k), rng.vec(m * k));
    let mut out = vec![0f32; s.nnz()];
    let alpha = 1f32;
    let mut h = null_mut();
    assert_eq!(unsafe { sddmmCreate(&mut h) }, OK);
    let (mi, ki, nnz) = (m as i32, k as i32, s.nnz() as i64);
    let (ap, bp, op) = (a.as_ptr() as *const c_void, b.as_ptr() as *const c_void, out.as_mut_ptr() as *mut c_void);
    let (rp, ci, alpha) = (s.row_ptr.as_ptr(), s.col_ind.as_ptr(), &alpha as *const f32 as *const c_void);
    let sample = |h| unsafe {
        sddmmDynamic(h, mi, mi, ki, alpha, ap, ki, bp, ki, ROW_MAJOR, nnz, rp, ci, null(), BASE_ZERO, f32_type, op)
    };
    assert_eq!(unsafe { sddmmSetDensityThreshold(h, 1e-4) }, OK);
    ok(sample(h), "sddmmDynamic, tiled");
    assert_eq!(unsafe { sddmmSetDensityThreshold(h, 0.5) }, OK);
    ok(sample(h), "sddmmDynamic, COO");
    let mut plan = null_mut();
    ok(unsafe { sddmmCreatePlan(h, &mut plan, mi, mi, nnz, rp, ci, BASE_ZERO) }, "sddmmCreatePlan");
    let status = unsafe { sddmmExecutePlan(h, plan, ki, alpha, ap, ki, bp, ki, ROW_MAJOR, null(), f32_type, op) };
    ok(status, "sddmmExecutePlan");
    assert_eq!(unsafe { sddmmDestroyPlan(plan) }, OK);
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
    calls
}

/// Asserts that `line` contains every one of `parts`.
fn assert_says(line: &str, parts: &[&str]) {
    for part in parts {
        assert!(line.contains(part), "{part:?} is not in the line\n{line}");
    }
}

#[test]
fn info_reports_each_successful_call_of_every_family_in_one_line() {
    let test = "info_reports_each_successful_call_of_every_family_in_one_line";
    if in_child(test) {
        assert_eq!(every_family(), 10);
        return;
    }
    let lines = library_lines(test, Some("info"));
    assert_eq!(lines.len(), 10, "one line per successful call:\n{}", lines.join("\n"));
    assert_says(
        &lines[0],
        &[
            "spamm gemm f32 96x96x96 (A N, B N) on cpu: block size 32, tau 1.0000e-3 (given), valid ratio 0.",
            " block products), exact FP32",
            "; kernel: a task per C block, each run of consecutive valid k one FP32 GEMM",
        ],
    );
    assert_says(
        &lines[1],
        &["spamm tau search f32 96x96x96 on cpu: block size 32: valid ratio ", "(asked 0.5 ± 0.01)"],
    );
    assert_says(
        &lines[2],
        &[
            "smat analysis f32 64x64, nnz ",
            "on cpu: format auto, tiles where fuller than 0.250, reorder auto: rows ",
            " tiles of 16x8 (fill 1.000), ",
            " rows in CSR (0 entries); ",
            " bytes (",
            " ms: reading the CSR ",
            ", analysis ",
            ", preparing the blocks ",
        ],
    );
    assert_says(
        &lines[3],
        &[
            "smat spmm f32 64x64 times 64x8 (row-major) on cpu: ",
            " tiles of 16x8, ",
            "f32 tiles in exact FP32; kernel: a task per block row of tiles",
            "and per panel of up to 256 columns of B (panels: 1)",
        ],
    );
    assert_says(
        &lines[4],
        &[
            "msrep partition pCSR f64 100x100, nnz ",
            "on cpu: 3 partitions of ",
            "on devices [0], rows cut between partitions: ",
        ],
    );
    assert_says(&lines[5], &["msrep spmv pCSR f64 100x100, nnz ", "; kernel: a task per partition"]);
    assert_says(
        &lines[6],
        &["sddmm f32 64x64, k 16, nnz ", "on cpu: tiled (density ", " above 1e-4)", "; kernel: a task per band"],
    );
    assert_says(
        &lines[7],
        &["sddmm f32 64x64, k 16, ", ": nnz-balanced COO (density ", " at most 5e-1)", "; kernel: "],
    );
    assert_says(&lines[8], &["sddmm plan 64x64, nnz ", "on cpu: COO rows, and tiles of 64x64 (bands 1, tiles "]);
    assert_says(&lines[9], &["nnz-balanced COO", ", the plan's preprocessing reused; kernel: "]);
}

#[test]
fn off_or_unset_reports_nothing() {
    let test = "off_or_unset_reports_nothing";
    if in_child(test) {
        every_family();
        return;
    }
    for level in [None, Some("off"), Some("OFF")] {
        let lines = library_lines(test, level);
        assert!(lines.is_empty(), "SPARSEGPU_LOG={level:?} reported:\n{}", lines.join("\n"));
    }
}

#[test]
fn a_value_naming_no_level_is_reported_once_and_logs_nothing() {
    let test = "a_value_naming_no_level_is_reported_once_and_logs_nothing";
    if in_child(test) {
        every_family();
        return;
    }
    let lines = library_lines(test, Some("verbose"));
    assert_eq!(
        lines,
        ["sparsegpu: SPARSEGPU_LOG=\"verbose\" is not a log level (off, info): logging stays off"],
        "{}",
        lines.join("\n")
    );
}

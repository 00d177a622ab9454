//! MSREP: the paper's partitioning (Algorithms 2, 4, 6), the merge of partial results, SpMV of every
//! partial format against a dense f64 reference, and every C entry point including its failure paths.
//!
//! One file per family on purpose, although long: each integration-test file is its own binary that
//! links the whole library (about 3 MB), so splitting a family's tests would multiply link time and
//! the binaries carried to a GPU machine; the tests are grouped by section instead.

mod common;
use common::last_error;

use common::msrep::{Input, assert_spmv_close, inputs, long_rows_csr, reference};

use common::*;
use half::{bf16, f16};
use sparsegpu::capi::msrep::*;
use sparsegpu::msrep::merge::{RowSegment, row_segments};
use sparsegpu::msrep::partition::{
    PartitionBounds, compressed_bounds, coo_bounds, local_pointers, major_of_entry, nnz_cut,
};
use sparsegpu::scalar::Element;
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{band_csr, random_csr, rmat_csr};
use sparsegpu::{BackendKind, IndexBase, SparseFormat, Status, ValueType};
use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr::{null, null_mut};

const OK: c_int = Status::Success as c_int;

/// Asserts a failed call's status and that the message names the function and every given word.
fn assert_fails(status: c_int, want: Status, function: &str, words: &[&str]) {
    assert_eq!(status, want as c_int, "{function}: expected {}, last error: {}", want.name(), last_error());
    let msg = last_error();
    assert!(msg.contains(function), "message does not name {function}: {msg}");
    for w in words {
        assert!(msg.contains(w), "message does not mention '{w}': {msg}");
    }
}

fn zero_based_ptr(ptr: &[i32]) -> Vec<usize> {
    ptr.iter().map(|&p| p as usize).collect()
}

// ---------------------------------------------------------------------------------------------
// Partitioning against the paper's definitions
// ---------------------------------------------------------------------------------------------

/// The 6×6, 19-nonzero matrix of the paper's Figures 8–10 (Saad's classic CSR example).
fn paper_matrix() -> CsrMatrix<f64> {
    let dense = [
        [10.0, 0.0, 0.0, 0.0, -2.0, 0.0],
        [3.0, 9.0, 0.0, 0.0, 0.0, 3.0],
        [0.0, 7.0, 8.0, 7.0, 0.0, 0.0],
        [3.0, 0.0, 8.0, 7.0, 5.0, 0.0],
        [0.0, 8.0, 0.0, 9.0, 9.0, 13.0],
        [0.0, 4.0, 0.0, 0.0, 2.0, -1.0],
    ];
    let mut triplets = Vec::new();
    for (r, row) in dense.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            if v != 0.0 {
                triplets.push((r, c, v));
            }
        }
    }
    CsrMatrix::from_triplets(6, 6, triplets)
}

fn bounds(start_idx: usize, end_idx: usize, rows: (usize, usize), start_flag: bool, end_flag: bool) -> PartitionBounds {
    PartitionBounds { start_idx, end_idx, start_major: rows.0, end_major: rows.1, start_flag, end_flag }
}

#[test]
fn figure_8_example_is_cut_as_the_paper_describes() {
    let a = paper_matrix();
    assert_eq!(a.row_ptr, vec![0, 2, 5, 8, 12, 16, 19]);
    let ptr = zero_based_ptr(&a.row_ptr);
    let got = compressed_bounds(&ptr, 4);
    // Cuts ⌊i·19/4⌋ = 0, 4, 9, 14, 19. Rows 1, 3 and 4 are each split between two partitions.
    let want = vec![
        bounds(0, 4, (0, 2), false, true),
        bounds(4, 9, (1, 4), true, true),
        bounds(9, 14, (3, 5), true, true),
        bounds(14, 19, (4, 6), true, false),
    ];
    assert_eq!(got, want);
    let local: Vec<Vec<i32>> = got.iter().map(|b| local_pointers(&ptr, b).unwrap()).collect();
    assert_eq!(local, vec![vec![0, 2, 4], vec![0, 1, 4, 5], vec![0, 3, 5], vec![0, 2, 5]]);

    // pCOO of the same row-sorted entries has the same bookkeeping.
    let (row_ind, _, _) = a.to_coo();
    let row_of: Vec<usize> = row_ind.iter().map(|&r| r as usize).collect();
    assert_eq!(coo_bounds(row_of.len(), |e| row_of[e], 6, 4), want);

    // Shared rows go to the merge, the rest to exactly one partition.
    assert_eq!(
        row_segments(&got, 6),
        vec![
            RowSegment::Exclusive { partition: 0, rows: 0..1 },
            RowSegment::Merged { rows: 1..2 },
            RowSegment::Exclusive { partition: 1, rows: 2..3 },
            RowSegment::Merged { rows: 3..5 },
            RowSegment::Exclusive { partition: 3, rows: 5..6 },
        ]
    );
}

#[test]
fn cuts_and_binary_search_follow_the_definitions() {
    assert_eq!((0..=4).map(|i| nnz_cut(i, 19, 4)).collect::<Vec<_>>(), vec![0, 4, 9, 14, 19]);
    assert_eq!((0..=3).map(|i| nnz_cut(i, 2, 3)).collect::<Vec<_>>(), vec![0, 0, 1, 2]);
    // Empty rows 1, 2 share pointer 2 with row 3: entry 2 is in row 3, entry 1 in row 0.
    let ptr = [0, 2, 2, 2, 5, 5];
    assert_eq!(major_of_entry(&ptr, 0), 0);
    assert_eq!(major_of_entry(&ptr, 1), 0);
    assert_eq!(major_of_entry(&ptr, 2), 3);
    assert_eq!(major_of_entry(&ptr, 4), 3);
    assert_eq!(major_of_entry(&ptr, 5), 5, "one past the last entry maps to one past the last row");
}

/// A random test matrix of one of several sparsity families (rows or cols may be 0).
fn random_matrix<T: Element>(rng: &mut Rng) -> (CsrMatrix<T>, &'static str) {
    match rng.below(7) {
        0 => {
            let (r, c, density) = (rng.below(70), rng.below(70), rng.range(0.0, 0.25));
            (random_csr(rng, r, c, density), "random")
        }
        1 => {
            let (n, half_width) = (rng.below(80), rng.below(5));
            (band_csr(rng, n, half_width), "band")
        }
        2 => {
            let (scale, edge_factor) = (2 + rng.below(6) as u32, 1 + rng.below(6));
            (rmat_csr(rng, scale, edge_factor), "R-MAT")
        }
        3 | 4 => {
            let (r, c) = (rng.below(60), 1 + rng.below(90));
            (long_rows_csr(rng, r, c), "long rows")
        }
        5 => {
            let (r, c) = (rng.below(3), rng.below(3));
            (random_csr(rng, r, c, 0.6), "tiny")
        }
        _ => {
            let (r, c) = (1 + rng.below(40), 1 + rng.below(40));
            (random_csr(rng, r, c, 0.0), "no nonzeros")
        }
    }
}

/// Checks the bounds of every partition of a compressed pointer array against the paper's
/// definitions, computed here by linear scans instead of binary searches.
fn check_bounds_against_definitions(ptr: &[usize], np: usize, got: &[PartitionBounds]) {
    let majors = ptr.len() - 1;
    let nnz = ptr[majors];
    let holding = |e: usize| (0..majors).find(|&m| ptr[m] <= e && e < ptr[m + 1]).unwrap();
    assert_eq!(got.len(), np);
    for (i, b) in got.iter().enumerate() {
        let what = format!("partition {i} of {np}, nnz {nnz}, ptr {ptr:?}: {b:?}");
        assert_eq!(b.start_idx, i * nnz / np, "{what}");
        assert_eq!(b.end_idx, (i + 1) * nnz / np, "{what}");
        if b.nnz() == 0 {
            assert!(!b.start_flag && !b.end_flag && b.start_major == b.end_major, "{what}");
            continue;
        }
        assert_eq!(b.start_major, holding(b.start_idx), "{what}");
        assert_eq!(b.end_major, holding(b.end_idx - 1) + 1, "{what}");
        // Split exactly when an earlier / later partition holds entries of the same row.
        assert_eq!(b.start_flag, b.start_idx > 0 && holding(b.start_idx - 1) == b.start_major, "{what}");
        assert_eq!(b.end_flag, b.end_idx < nnz && holding(b.end_idx) == b.end_major - 1, "{what}");
        let local = local_pointers(ptr, b).unwrap();
        assert_eq!(local.len(), b.major_count() + 1, "{what}");
        assert_eq!((local[0], *local.last().unwrap() as usize), (0, b.nnz()), "{what}");
        for (j, w) in local.windows(2).enumerate() {
            // Local row j holds exactly the entries of global row start_major + j inside the partition.
            let row = b.start_major + j;
            let lo = ptr[row].max(b.start_idx) - b.start_idx;
            let hi = ptr[row + 1].min(b.end_idx) - b.start_idx;
            assert_eq!((w[0] as usize, w[1] as usize), (lo, hi), "{what}: local row {j}");
        }
    }
}

#[test]
fn partitions_of_random_matrices_follow_the_definitions() {
    let mut rng = Rng::fresh("partitions_of_random_matrices_follow_the_definitions");
    for _ in 0..150 {
        let (a, kind) = random_matrix::<f64>(&mut rng);
        let nnz = a.nnz();
        let ptr = zero_based_ptr(&a.row_ptr);
        let (col_ptr, _, _) = a.to_csc();
        let col_ptr = zero_based_ptr(&col_ptr);
        let (row_ind, _, _) = a.to_coo();
        let row_of: Vec<usize> = row_ind.iter().map(|&r| r as usize).collect();
        for np in (1..=9).chain([nnz + 1, nnz + 4]) {
            let csr = compressed_bounds(&ptr, np);
            check_bounds_against_definitions(&ptr, np, &csr);
            check_bounds_against_definitions(&col_ptr, np, &compressed_bounds(&col_ptr, np));
            assert_eq!(
                coo_bounds(row_of.len(), |e| row_of[e], a.rows, np),
                csr,
                "{kind}: pCOO and pCSR bookkeeping differ"
            );
            check_row_segments(&csr, a.rows, kind);
        }
    }
}

/// Every row is in exactly one segment; a row is exclusive to a partition exactly when it lies in
/// that partition's span and in no other partition's span.
fn check_row_segments(bounds: &[PartitionBounds], rows: usize, kind: &str) {
    let segments = row_segments(bounds, rows);
    let mut owner = vec![None; rows];
    let mut next = 0;
    for s in &segments {
        let (range, who) = match s {
            RowSegment::Exclusive { partition, rows } => (rows.clone(), Some(*partition)),
            RowSegment::Merged { rows } => (rows.clone(), None),
        };
        assert_eq!(range.start, next, "{kind}: segments not consecutive: {segments:?}");
        assert!(!range.is_empty(), "{kind}: empty segment in {segments:?}");
        next = range.end;
        range.for_each(|r| owner[r] = who);
    }
    assert_eq!(next, rows, "{kind}: segments do not cover every row: {segments:?}");
    for (r, o) in owner.iter().enumerate() {
        let spanning: Vec<usize> =
            (0..bounds.len()).filter(|&p| (bounds[p].start_major..bounds[p].end_major).contains(&r)).collect();
        let want = if spanning.len() == 1 { Some(spanning[0]) } else { None };
        assert_eq!(*o, want, "{kind}: row {r}, spanned by {spanning:?}, bounds {bounds:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// SpMV through the C API
// ---------------------------------------------------------------------------------------------

struct Handle(msrepHandle_t);

impl Handle {
    fn new() -> Self {
        let mut h = null_mut();
        assert_eq!(unsafe { msrepCreate(&mut h) }, OK, "{}", last_error());
        // The specification's tests run on the CPU backend, where any device list is accepted and
        // pCSR / pCOO agree bit for bit; tests/msrep_gpu.rs covers CUDA.
        assert_eq!(unsafe { msrepSetBackend(h, BackendKind::Cpu as i32) }, OK, "{}", last_error());
        Handle(h)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        assert_eq!(unsafe { msrepDestroy(self.0) }, OK);
    }
}

type Create = unsafe extern "C" fn(
    msrepHandle_t,
    *mut msrepMatrix_t,
    c_int,
    c_int,
    i64,
    *const c_int,
    *const c_int,
    *const c_void,
    c_int,
    c_int,
    c_int,
) -> c_int;

fn creator(format: SparseFormat) -> Create {
    match format {
        SparseFormat::Csr => msrepCreateCsr,
        SparseFormat::Csc => msrepCreateCsc,
        SparseFormat::Coo => msrepCreateCoo,
    }
}

fn create<T: Element>(
    h: &Handle,
    rows: usize,
    cols: usize,
    input: &Input<T>,
    base: IndexBase,
    np: c_int,
) -> msrepMatrix_t {
    let mut m = null_mut();
    let st = unsafe {
        creator(input.format)(
            h.0,
            &mut m,
            rows as c_int,
            cols as c_int,
            input.values.len() as i64,
            input.major.as_ptr(),
            input.minor.as_ptr(),
            input.values.as_ptr() as *const c_void,
            T::VALUE_TYPE as c_int,
            base as c_int,
            np,
        )
    };
    assert_eq!(st, OK, "{:?}: {}", input.format, last_error());
    m
}

fn partition_infos(m: msrepMatrix_t) -> Vec<msrepPartitionInfo_t> {
    let mut count = -1;
    assert_eq!(unsafe { msrepGetPartitionCount(m, &mut count) }, OK);
    (0..count)
        .map(|i| {
            let mut info = msrepPartitionInfo_t::default();
            assert_eq!(unsafe { msrepGetPartitionInfo(m, i, &mut info) }, OK, "{}", last_error());
            info
        })
        .collect()
}

/// The reported partitions are the paper's: checked against bounds computed from the CSR (pCSR,
/// pCOO) or CSC (pCSC) pointer, and placed round-robin on the handle's devices.
fn check_partition_info(m: msrepMatrix_t, a: &CsrMatrix<impl Copy>, format: SparseFormat, np: usize, devices: &[i32]) {
    let ptr = match format {
        SparseFormat::Csc => zero_based_ptr(&a.to_csc().0),
        _ => zero_based_ptr(&a.row_ptr),
    };
    let want = compressed_bounds(&ptr, np);
    let infos = partition_infos(m);
    assert_eq!(infos.len(), np);
    for (i, (info, b)) in infos.iter().zip(&want).enumerate() {
        let expected = msrepPartitionInfo_t {
            format: format as c_int,
            startIdx: b.start_idx as i64,
            endIdx: b.end_idx as i64,
            nnz: b.nnz() as i64,
            startMajor: b.start_major as i64,
            endMajor: b.end_major as i64,
            startFlag: b.start_flag as c_int,
            device: devices[i % devices.len()],
        };
        assert_eq!(*info, expected, "partition {i} of {np}, {format:?}");
    }
}

/// One random matrix through all three formats: partition info, SpMV against the reference, and
/// pCSR / pCOO bit-identical (same partial sums in the same order, same merge). α, β, x and y are of
/// `T`'s compute type (f32 for 16-bit values), `eps` its rounding unit.
fn spmv_case<T: Element>(rng: &mut Rng, h: &Handle, devices: &[i32], eps: f64) {
    let (a, kind) = random_matrix::<T>(rng);
    let base = if rng.below(2) == 0 { IndexBase::Zero } else { IndexBase::One };
    let np_arg = match rng.below(12) {
        0 => 0,
        1 => (a.nnz() + 1 + rng.below(5)) as c_int,
        _ => 1 + rng.below(9) as c_int,
    };
    let np = if np_arg == 0 { devices.len() } else { np_arg as usize };
    let alpha = T::Compute::from_f64(if rng.below(10) == 0 { 0.0 } else { rng.range(-2.0, 2.0) });
    let beta_zero = rng.below(3) == 0;
    let beta = T::Compute::from_f64(if beta_zero { 0.0 } else { rng.range(-2.0, 2.0) });
    let x: Vec<T::Compute> = rng.vec(a.cols);
    let y0: Vec<T::Compute> = if beta_zero { vec![T::Compute::from_f64(f64::NAN); a.rows] } else { rng.vec(a.rows) };
    let to64 = |v: &[T::Compute]| v.iter().map(|e| e.to_f64()).collect::<Vec<_>>();
    let want = reference(&a, alpha.to_f64(), &to64(&x), beta.to_f64(), &to64(&y0));

    let mut results = Vec::new();
    for input in inputs(&a, base) {
        let what = format!(
            "{kind} {}x{} nnz {} {:?} {:?} {:?} np {np} alpha {alpha:?} beta {beta:?}",
            a.rows,
            a.cols,
            a.nnz(),
            T::VALUE_TYPE,
            input.format,
            base
        );
        let m = create(h, a.rows, a.cols, &input, base, np_arg);
        check_partition_info(m, &a, input.format, np, devices);
        let mut y = y0.clone();
        let st = unsafe {
            msrepSpMV(
                h.0,
                m,
                &alpha as *const T::Compute as *const c_void,
                x.as_ptr() as *const c_void,
                &beta as *const T::Compute as *const c_void,
                y.as_mut_ptr() as *mut c_void,
            )
        };
        assert_eq!(st, OK, "{what}: {}", last_error());
        assert_spmv_close(&what, &y, &want, eps);
        // Resident matrix: a second call with the same inputs gives the same result.
        let mut again = y0.clone();
        let st = unsafe {
            msrepSpMV(
                h.0,
                m,
                &alpha as *const T::Compute as *const c_void,
                x.as_ptr() as *const c_void,
                &beta as *const T::Compute as *const c_void,
                again.as_mut_ptr() as *mut c_void,
            )
        };
        assert_eq!(st, OK);
        assert_eq!(to64(&again), to64(&y), "{what}: repeated SpMV differs");
        assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);
        results.push(to64(&y));
    }
    assert_eq!(results[0], results[2], "pCSR and pCOO of the same matrix must agree exactly");
}

#[test]
fn spmv_matches_dense_reference_for_every_format() {
    let mut rng = Rng::fresh("spmv_matches_dense_reference_for_every_format");
    let h = Handle::new();
    for round in 0..120 {
        // Sometimes several devices, so numPartitions = 0 means more than one partition.
        let devices: Vec<i32> = match round % 3 {
            0 => vec![0],
            1 => vec![2, 0, 5],
            _ => (0..1 + rng.below(8) as i32).collect(),
        };
        assert_eq!(unsafe { msrepSetDevices(h.0, devices.len() as c_int, devices.as_ptr()) }, OK);
        spmv_case::<f64>(&mut rng, &h, &devices, f64::EPSILON);
        spmv_case::<f32>(&mut rng, &h, &devices, f32::EPSILON as f64);
        // 16-bit values, multiplied and summed in f32: the reference takes the same 16-bit values.
        spmv_case::<f16>(&mut rng, &h, &devices, f32::EPSILON as f64);
        spmv_case::<bf16>(&mut rng, &h, &devices, f32::EPSILON as f64);
    }
}

#[test]
fn large_matrix_with_many_partitions_matches_reference() {
    // Big enough that every partition spans many rows, long rows are cut several times, and one
    // partition's rows are processed in several parallel chunks.
    let mut rng = Rng::fresh("large_matrix_with_many_partitions_matches_reference");
    let h = Handle::new();
    let a: CsrMatrix<f64> = long_rows_csr(&mut rng, 3000, 700);
    let x: Vec<f64> = rng.vec(a.cols);
    let y0: Vec<f64> = rng.vec(a.rows);
    let want = reference(&a, 1.5, &x, -0.5, &y0);
    for input in inputs(&a, IndexBase::Zero) {
        // A cut lands exactly on a row boundary now and then; over all the counts some row is split.
        let mut some_row_split = false;
        for np in [1, 2, 7, 64] {
            let m = create(&h, a.rows, a.cols, &input, IndexBase::Zero, np);
            let infos = partition_infos(m);
            some_row_split |= infos.iter().any(|i| i.startFlag == 1);
            let mut y = y0.clone();
            let (alpha, beta) = (1.5f64, -0.5f64);
            let st = unsafe {
                msrepSpMV(
                    h.0,
                    m,
                    &alpha as *const f64 as *const c_void,
                    x.as_ptr() as *const c_void,
                    &beta as *const f64 as *const c_void,
                    y.as_mut_ptr() as *mut c_void,
                )
            };
            assert_eq!(st, OK, "{}", last_error());
            assert_spmv_close(&format!("{:?} np {np}", input.format), &y, &want, f64::EPSILON);
            let exact: Vec<f64> = want.iter().map(|w| w.0).collect();
            assert!(relative_error(&y, &exact) < 1e-13, "{:?} np {np}", input.format);
            assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);
        }
        assert!(some_row_split, "{:?}: no partition count split a row", input.format);
    }
}

#[test]
fn paper_example_spmv_by_hand() {
    // y = A·1 with β = 1, y0 = 100: row sums of the Figure 8 matrix are 8, 15, 22, 23, 39, 5.
    let h = Handle::new();
    let a = paper_matrix();
    for input in inputs(&a, IndexBase::One) {
        let m = create(&h, 6, 6, &input, IndexBase::One, 4);
        let (alpha, beta) = (1.0f64, 1.0f64);
        let x = [1.0f64; 6];
        let mut y = [100.0f64; 6];
        let st = unsafe {
            msrepSpMV(
                h.0,
                m,
                &alpha as *const f64 as *const c_void,
                x.as_ptr() as *const c_void,
                &beta as *const f64 as *const c_void,
                y.as_mut_ptr() as *mut c_void,
            )
        };
        assert_eq!(st, OK);
        assert_eq!(y, [108.0, 115.0, 122.0, 123.0, 139.0, 105.0], "{:?}", input.format);
        assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);
    }
}

// ---------------------------------------------------------------------------------------------
// The C API: lifecycle, queries and every failure path
// ---------------------------------------------------------------------------------------------

/// A pointer value no call may write, to see that failed calls leave outputs untouched.
const SENTINEL_MATRIX: msrepMatrix_t = 0x5a5a_5a50 as msrepMatrix_t;

fn devices_of(h: msrepHandle_t) -> Vec<c_int> {
    let mut count = -1;
    assert_eq!(unsafe { msrepGetDevices(h, 0, &mut count, null_mut()) }, OK, "count query");
    let mut devices = vec![-1; count as usize];
    let mut again = -1;
    assert_eq!(unsafe { msrepGetDevices(h, count, &mut again, devices.as_mut_ptr()) }, OK);
    assert_eq!(again, count);
    devices
}

#[test]
fn handle_lifecycle_stream_backend_and_devices() {
    let h = Handle::new();
    assert_fails(unsafe { msrepCreate(null_mut()) }, Status::InvalidPointer, "msrepCreate", &["handle"]);
    assert_eq!(unsafe { msrepDestroy(null_mut()) }, OK, "destroying NULL is a no-op");

    let mut stream = 0x5a0 as *mut c_void;
    assert_eq!(unsafe { msrepGetStream(h.0, &mut stream) }, OK);
    assert!(stream.is_null(), "a new handle uses the default stream");
    assert_eq!(unsafe { msrepSetStream(h.0, 0xabc0 as *mut c_void) }, OK);
    assert_eq!(unsafe { msrepGetStream(h.0, &mut stream) }, OK);
    assert_eq!(stream as usize, 0xabc0);
    assert_fails(unsafe { msrepGetStream(h.0, null_mut()) }, Status::InvalidPointer, "msrepGetStream", &["stream"]);

    let mut backend = -1;
    assert_eq!(unsafe { msrepSetBackend(h.0, BackendKind::Cpu as c_int) }, OK);
    assert_eq!(unsafe { msrepGetBackend(h.0, &mut backend) }, OK);
    assert_eq!(backend, BackendKind::Cpu as c_int);
    assert_fails(unsafe { msrepSetBackend(h.0, 7) }, Status::InvalidValue, "msrepSetBackend", &["backend"]);
    assert_fails(unsafe { msrepGetBackend(h.0, null_mut()) }, Status::InvalidPointer, "msrepGetBackend", &["backend"]);
    match unsafe { msrepSetBackend(h.0, BackendKind::Cuda as c_int) } {
        OK => {
            assert_eq!(unsafe { msrepGetBackend(h.0, &mut backend) }, OK);
            assert_eq!(backend, BackendKind::Cuda as c_int);
        }
        st => {
            assert_fails(st, Status::BackendUnavailable, "msrepSetBackend", &["CUDA"]);
            assert_eq!(unsafe { msrepGetBackend(h.0, &mut backend) }, OK);
            assert_eq!(backend, BackendKind::Cpu as c_int, "a refused backend leaves the handle unchanged");
        }
    }
    assert_eq!(unsafe { msrepSetBackend(h.0, BackendKind::Auto as c_int) }, OK);
    assert_eq!(unsafe { msrepGetBackend(h.0, &mut backend) }, OK);
    assert_ne!(backend, BackendKind::Auto as c_int, "auto resolves to a concrete backend");
    // Arbitrary device lists below: the CPU backend accepts any (a CUDA handle only existing ones).
    assert_eq!(unsafe { msrepSetBackend(h.0, BackendKind::Cpu as c_int) }, OK);

    assert_eq!(devices_of(h.0), vec![0], "a new handle uses device 0");
    assert_eq!(unsafe { msrepSetDevices(h.0, 3, [4, 0, 2].as_ptr()) }, OK);
    assert_eq!(devices_of(h.0), vec![4, 0, 2]);
    let bad: [(c_int, *const c_int, Status, &str); 5] = [
        (0, [1].as_ptr(), Status::InvalidSize, "count"),
        (-2, [1].as_ptr(), Status::InvalidSize, "count"),
        (2, null(), Status::InvalidPointer, "devices"),
        (2, [1, -3].as_ptr(), Status::InvalidValue, "devices[1]"),
        (3, [1, 2, 1].as_ptr(), Status::InvalidValue, "devices[2]"),
    ];
    for (count, devices, status, word) in bad {
        assert_fails(unsafe { msrepSetDevices(h.0, count, devices) }, status, "msrepSetDevices", &[word]);
        assert_eq!(devices_of(h.0), vec![4, 0, 2], "a refused device list leaves the handle unchanged");
    }
    // A capacity below the count writes the first ordinals and still reports the whole count.
    let (mut out, mut count) = ([-9; 3], -1);
    assert_eq!(unsafe { msrepGetDevices(h.0, 2, &mut count, out.as_mut_ptr()) }, OK);
    assert_eq!((out, count), ([4, 0, -9], 3));
    assert_fails(
        unsafe { msrepGetDevices(h.0, -1, &mut count, out.as_mut_ptr()) },
        Status::InvalidSize,
        "msrepGetDevices",
        &["capacity"],
    );
    assert_fails(
        unsafe { msrepGetDevices(h.0, 3, &mut count, null_mut()) },
        Status::InvalidPointer,
        "msrepGetDevices",
        &["devices"],
    );
    assert_fails(
        unsafe { msrepGetDevices(h.0, 0, null_mut(), null_mut()) },
        Status::InvalidPointer,
        "msrepGetDevices",
        &["count"],
    );
    assert_eq!((out, count), ([4, 0, -9], 3), "failed calls leave outputs untouched");
}

/// Every handle-taking function refuses `h` with INVALID_HANDLE naming the handle.
fn assert_handle_refused(h: msrepHandle_t) {
    let mut stream = null_mut();
    let mut int_out = -5;
    let mut m = SENTINEL_MATRIX;
    let one = 1.0f64;
    let refused = |function: &str, status: c_int| assert_fails(status, Status::InvalidHandle, function, &["handle"]);
    refused("msrepSetStream", unsafe { msrepSetStream(h, null_mut()) });
    refused("msrepGetStream", unsafe { msrepGetStream(h, &mut stream) });
    refused("msrepSetBackend", unsafe { msrepSetBackend(h, BackendKind::Cpu as c_int) });
    refused("msrepGetBackend", unsafe { msrepGetBackend(h, &mut int_out) });
    refused("msrepSetDevices", unsafe { msrepSetDevices(h, 1, [0].as_ptr()) });
    refused("msrepGetDevices", unsafe { msrepGetDevices(h, 0, &mut int_out, null_mut()) });
    for format in [SparseFormat::Csr, SparseFormat::Csc, SparseFormat::Coo] {
        refused(function_name(format), CreateArgs::valid(format).call(h, &mut m));
    }
    refused("msrepSpMV", unsafe { msrepSpMV(h, null_mut(), p64(&one), null(), p64(&one), null_mut()) });
    assert_eq!((stream, int_out, m), (null_mut(), -5, SENTINEL_MATRIX), "outputs must be untouched");
}

#[test]
fn null_destroyed_and_foreign_handles_and_matrices_are_refused() {
    let h = Handle::new();
    let a = paper_matrix();
    let m = create(&h, 6, 6, &inputs(&a, IndexBase::Zero)[0], IndexBase::Zero, 2);

    assert_handle_refused(null_mut());
    assert_handle_refused(m as msrepHandle_t);
    let mut not_a_handle = [0u64; 8];
    assert_handle_refused(not_a_handle.as_mut_ptr() as msrepHandle_t);
    let mut dead = null_mut();
    assert_eq!(unsafe { msrepCreate(&mut dead) }, OK);
    assert_eq!(unsafe { msrepDestroy(dead) }, OK);
    assert_handle_refused(dead);
    assert_fails(unsafe { msrepDestroy(dead) }, Status::InvalidHandle, "msrepDestroy", &["handle"]);

    // Matrices: NULL, a handle, a destroyed matrix.
    let mut gone = null_mut();
    let input = &inputs(&a, IndexBase::Zero)[2];
    let mut st = unsafe {
        msrepCreateCoo(
            h.0,
            &mut gone,
            6,
            6,
            19,
            input.major.as_ptr(),
            input.minor.as_ptr(),
            input.values.as_ptr() as _,
            ValueType::F64 as c_int,
            0,
            0,
        )
    };
    assert_eq!(st, OK);
    assert_eq!(unsafe { msrepDestroyMatrix(gone) }, OK);
    assert_eq!(unsafe { msrepDestroyMatrix(null_mut()) }, OK, "destroying NULL is a no-op");
    let (one, x) = (1.0f64, [1.0f64; 6]);
    for bad in [null_mut(), h.0 as msrepMatrix_t, gone] {
        let mut count = -5;
        let mut info = msrepPartitionInfo_t { nnz: -5, ..Default::default() };
        let mut y = [3.0f64; 6];
        st = unsafe { msrepGetPartitionCount(bad, &mut count) };
        assert_fails(st, Status::InvalidHandle, "msrepGetPartitionCount", &["matrix"]);
        st = unsafe { msrepGetPartitionInfo(bad, 0, &mut info) };
        assert_fails(st, Status::InvalidHandle, "msrepGetPartitionInfo", &["matrix"]);
        st = unsafe {
            msrepSpMV(h.0, bad, &one as *const f64 as _, x.as_ptr() as _, &one as *const f64 as _, y.as_mut_ptr() as _)
        };
        assert_fails(st, Status::InvalidHandle, "msrepSpMV", &["matrix"]);
        assert_eq!((count, info.nnz, y), (-5, -5, [3.0; 6]), "outputs must be untouched");
        if !bad.is_null() {
            assert_fails(unsafe { msrepDestroyMatrix(bad) }, Status::InvalidHandle, "msrepDestroyMatrix", &["matrix"]);
        }
    }
    assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);
}

/// Arguments of one matrix-creation call, so each bad-input case changes one thing.
#[derive(Clone)]
struct CreateArgs {
    format: SparseFormat,
    rows: c_int,
    cols: c_int,
    nnz: i64,
    major: Option<Vec<i32>>,
    minor: Option<Vec<i32>>,
    values: Option<Vec<f64>>,
    value_type: c_int,
    base: c_int,
    partitions: c_int,
}

impl CreateArgs {
    /// The paper's matrix in `format`, zero-based, f64, 3 partitions.
    fn valid(format: SparseFormat) -> Self {
        let input = inputs(&paper_matrix(), IndexBase::Zero).into_iter().find(|i| i.format == format).unwrap();
        CreateArgs {
            format,
            rows: 6,
            cols: 6,
            nnz: 19,
            major: Some(input.major),
            minor: Some(input.minor),
            values: Some(input.values),
            value_type: ValueType::F64 as c_int,
            base: 0,
            partitions: 3,
        }
    }

    fn call(&self, h: msrepHandle_t, out: *mut msrepMatrix_t) -> c_int {
        let ptr_or_null = |v: &Option<Vec<i32>>| v.as_ref().map_or(null(), |v| v.as_ptr());
        unsafe {
            creator(self.format)(
                h,
                out,
                self.rows,
                self.cols,
                self.nnz,
                ptr_or_null(&self.major),
                ptr_or_null(&self.minor),
                self.values.as_ref().map_or(null(), |v| v.as_ptr() as *const c_void),
                self.value_type,
                self.base,
                self.partitions,
            )
        }
    }
}

fn function_name(format: SparseFormat) -> &'static str {
    match format {
        SparseFormat::Csr => "msrepCreateCsr",
        SparseFormat::Csc => "msrepCreateCsc",
        SparseFormat::Coo => "msrepCreateCoo",
    }
}

#[test]
fn matrix_creation_refuses_bad_input_and_leaves_the_output_untouched() {
    let h = Handle::new();
    for format in [SparseFormat::Csr, SparseFormat::Csc, SparseFormat::Coo] {
        let function = function_name(format);
        let valid = CreateArgs::valid(format);
        let (major_name, minor_name) = match format {
            SparseFormat::Csr => ("rowPtr", "colInd"),
            SparseFormat::Csc => ("colPtr", "rowInd"),
            SparseFormat::Coo => ("rowInd", "colInd"),
        };
        let mut m = null_mut();
        assert_eq!(valid.call(h.0, &mut m), OK, "{function}: {}", last_error());
        assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);

        let with = |change: &dyn Fn(&mut CreateArgs)| {
            let mut a = valid.clone();
            change(&mut a);
            a
        };
        let mut cases: Vec<(CreateArgs, Status, &str)> = vec![
            (with(&|a| a.rows = -1), Status::InvalidSize, "rows"),
            (with(&|a| a.cols = -6), Status::InvalidSize, "cols"),
            (with(&|a| a.nnz = -19), Status::InvalidSize, "nnz"),
            (with(&|a| a.value_type = 9), Status::InvalidValue, "valueType"),
            (with(&|a| a.base = 2), Status::InvalidValue, "indexBase"),
            (with(&|a| a.base = -1), Status::InvalidValue, "indexBase"),
            (with(&|a| a.partitions = -1), Status::InvalidSize, "numPartitions"),
            (with(&|a| a.partitions = MSREP_MAX_PARTITIONS + 1), Status::InvalidSize, "numPartitions"),
            (with(&|a| a.partitions = c_int::MAX), Status::InvalidSize, "numPartitions"),
            (with(&|a| a.major = None), Status::InvalidPointer, major_name),
            (with(&|a| a.minor = None), Status::InvalidPointer, minor_name),
            (with(&|a| a.values = None), Status::InvalidPointer, "values"),
            // Indices one past the last row / column.
            (with(&|a| a.minor.as_mut().unwrap()[5] = 6), Status::InvalidSparseMatrix, minor_name),
            (with(&|a| a.minor.as_mut().unwrap()[0] = -1), Status::InvalidSparseMatrix, minor_name),
            // One-based indices given with base 0 ... and zero-based ones with base 1.
            (with(&|a| a.base = 1), Status::InvalidSparseMatrix, major_name),
        ];
        match format {
            SparseFormat::Coo => {
                cases.push((with(&|a| a.major.as_mut().unwrap().swap(3, 12)), Status::InvalidSparseMatrix, "rowInd"));
                cases.push((with(&|a| a.major.as_mut().unwrap()[18] = 6), Status::InvalidSparseMatrix, "rowInd"));
            }
            _ => {
                // nnz disagrees with the pointer's last entry (arrays are long enough either way).
                cases.push((with(&|a| a.nnz = 18), Status::InvalidSparseMatrix, major_name));
                // Non-monotone pointer.
                cases.push((with(&|a| a.major.as_mut().unwrap()[2] = 13), Status::InvalidSparseMatrix, major_name));
                cases.push((with(&|a| a.major.as_mut().unwrap()[0] = 1), Status::InvalidSparseMatrix, major_name));
            }
        }
        for (args, status, word) in cases {
            let mut out = SENTINEL_MATRIX;
            assert_fails(args.call(h.0, &mut out), status, function, &[word]);
            assert_eq!(out, SENTINEL_MATRIX, "{function} wrote its output on failure ({word})");
        }
        assert_fails(valid.call(h.0, null_mut()), Status::InvalidPointer, function, &["matrix"]);

        // f64 values at an address that is not 8-byte aligned.
        let bytes = [0u8; 19 * 8 + 8];
        let misaligned = unsafe { bytes.as_ptr().add(if (bytes.as_ptr() as usize).is_multiple_of(8) { 4 } else { 0 }) };
        let mut out = SENTINEL_MATRIX;
        let st = unsafe {
            creator(format)(
                h.0,
                &mut out,
                6,
                6,
                19,
                valid.major.as_ref().unwrap().as_ptr(),
                valid.minor.as_ref().unwrap().as_ptr(),
                misaligned as *const c_void,
                ValueType::F64 as c_int,
                0,
                1,
            )
        };
        assert_fails(st, Status::InvalidPointer, function, &["values"]);
        assert_eq!(out, SENTINEL_MATRIX);
    }
}

#[test]
fn partition_queries_and_spmv_refuse_bad_arguments() {
    let h = Handle::new();
    let m = create(&h, 6, 6, &inputs(&paper_matrix(), IndexBase::Zero)[0], IndexBase::Zero, 4);
    let mut info = msrepPartitionInfo_t { nnz: -5, ..Default::default() };
    for partition in [-1, 4, c_int::MAX] {
        let st = unsafe { msrepGetPartitionInfo(m, partition, &mut info) };
        assert_fails(st, Status::InvalidValue, "msrepGetPartitionInfo", &["partition"]);
        assert_eq!(info.nnz, -5);
    }
    assert_fails(
        unsafe { msrepGetPartitionInfo(m, 0, null_mut()) },
        Status::InvalidPointer,
        "msrepGetPartitionInfo",
        &["info"],
    );
    assert_fails(
        unsafe { msrepGetPartitionCount(m, null_mut()) },
        Status::InvalidPointer,
        "msrepGetPartitionCount",
        &["count"],
    );

    let (one, x) = (1.0f64, [1.0f64; 6]);
    let p = |v: &f64| v as *const f64 as *const c_void;
    let mut y = [3.0f64; 6];
    let y_ptr = y.as_mut_ptr() as *mut c_void;
    let misaligned_y = unsafe { (y.as_mut_ptr() as *mut u8).add(4) } as *mut c_void;
    let refused = |word: &str, status: c_int| assert_fails(status, Status::InvalidPointer, "msrepSpMV", &[word]);
    refused("alpha", unsafe { msrepSpMV(h.0, m, null(), x.as_ptr() as _, p(&one), y_ptr) });
    refused("beta", unsafe { msrepSpMV(h.0, m, p(&one), x.as_ptr() as _, null(), y_ptr) });
    refused("x", unsafe { msrepSpMV(h.0, m, p(&one), null(), p(&one), y_ptr) });
    refused("y", unsafe { msrepSpMV(h.0, m, p(&one), x.as_ptr() as _, p(&one), null_mut()) });
    refused("y", unsafe { msrepSpMV(h.0, m, p(&one), x.as_ptr() as _, p(&one), misaligned_y) });
    assert_eq!(y, [3.0; 6], "a refused SpMV leaves y untouched");
    let mut xy = [3.0f64; 7];
    let (x_ptr, y_ptr) = (xy.as_ptr() as *const c_void, unsafe { xy.as_mut_ptr().add(1) } as *mut c_void);
    let st = unsafe { msrepSpMV(h.0, m, p(&one), x_ptr, p(&one), y_ptr) };
    assert_fails(st, Status::InvalidPointer, "msrepSpMV", &["argument y overlaps argument x"]);
    assert_eq!(xy, [3.0; 7]);
    assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);
}

#[test]
fn matrix_owns_its_data_and_outlives_its_handle() {
    let mut rng = Rng::fresh("matrix_owns_its_data_and_outlives_its_handle");
    let a: CsrMatrix<f32> = long_rows_csr(&mut rng, 50, 30);
    let mut matrices = Vec::new();
    {
        let h = Handle::new();
        assert_eq!(unsafe { msrepSetDevices(h.0, 2, [1, 3].as_ptr()) }, OK);
        for mut input in inputs(&a, IndexBase::One) {
            let m = create(&h, a.rows, a.cols, &input, IndexBase::One, 0);
            // The caller reuses its arrays: the matrix must not have kept them.
            input.major.fill(-77);
            input.minor.fill(-77);
            input.values.fill(f32::NAN);
            drop(input);
            let infos = partition_infos(m);
            assert_eq!(
                infos.iter().map(|i| i.device).collect::<Vec<_>>(),
                vec![1, 3],
                "numPartitions 0: one per device"
            );
            matrices.push(m);
        }
    } // the handle is destroyed here
    let h = Handle::new();
    let x: Vec<f32> = rng.vec(a.cols);
    let to64 = |v: &[f32]| v.iter().map(|&e| e as f64).collect::<Vec<_>>();
    let want = reference(&a, 1.0, &to64(&x), 0.0, &[]);
    for m in matrices {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let mut y = vec![f32::NAN; a.rows];
        let st = unsafe {
            msrepSpMV(h.0, m, &alpha as *const f32 as _, x.as_ptr() as _, &beta as *const f32 as _, y.as_mut_ptr() as _)
        };
        assert_eq!(st, OK, "{}", last_error());
        assert_spmv_close("after the creating handle was destroyed", &y, &want, f32::EPSILON as f64);
        assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);
    }
}

#[test]
fn empty_shapes_accept_null_arrays() {
    let h = Handle::new();
    let (one, zero) = (1.0f64, 0.0f64);
    for (rows, cols) in [(0, 0), (0, 4), (4, 0)] {
        for format in [SparseFormat::Csr, SparseFormat::Csc, SparseFormat::Coo] {
            let ptr = vec![1; if format == SparseFormat::Csc { cols + 1 } else { rows + 1 }];
            let major = if format == SparseFormat::Coo { null() } else { ptr.as_ptr() };
            let mut m = null_mut();
            let st = unsafe {
                creator(format)(
                    h.0,
                    &mut m,
                    rows as c_int,
                    cols as c_int,
                    0,
                    major,
                    null(),
                    null(),
                    ValueType::F64 as c_int,
                    1,
                    5,
                )
            };
            assert_eq!(st, OK, "{rows}x{cols} {format:?}: {}", last_error());
            assert_eq!(partition_infos(m).len(), 5);
            let x = vec![1.0f64; cols];
            let mut y = vec![f64::NAN; rows];
            let x_ptr = if cols == 0 { null() } else { x.as_ptr() as *const c_void };
            let y_ptr = if rows == 0 { null_mut() } else { y.as_mut_ptr() as *mut c_void };
            assert_eq!(unsafe { msrepSpMV(h.0, m, p64(&one), x_ptr, p64(&zero), y_ptr) }, OK, "{}", last_error());
            assert!(y.iter().all(|&v| v == 0.0), "{rows}x{cols} {format:?}: y = {y:?}");
            assert_eq!(unsafe { msrepDestroyMatrix(m) }, OK);
        }
    }
}

fn p64(v: &f64) -> *const c_void {
    v as *const f64 as *const c_void
}

//! SMaT on the CUDA backend (each test reports SKIPPED without a usable GPU): smatSpMM against the
//! CPU backend and an f64 reference for every value type, layout, structure, reordering mode and
//! storage format; the vectorised and strided CSR kernels; rows long enough to be split into
//! segments; host and device pointers; the caller's stream; matrices used with the wrong backend; injected
//! allocation failures; and a rough timing at 16384² with 1 % nonzeros in 16×16 blocks.

mod common;
use common::last_error;

use common::smat::{Dense, Handle, Matrix, random_matrix, roundoffs};
use common::{POISON, Rng};
use cudarc::driver::sys::CUstream;
use half::{bf16, f16};
use sparsegpu::backend::cuda::{self, Stream, memory};
use sparsegpu::capi::smat::*;
use sparsegpu::scalar::Element;
use sparsegpu::smat::{ReorderMode, SmatMathMode, StorageFormat};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{block_csr, random_csr};
use sparsegpu::{BackendKind, IndexBase, Layout, Status, ValueType};
use std::ffi::c_void;
use std::ptr::null_mut;

const SUCCESS: i32 = Status::Success as i32;

/// Matrix dimensions of the random cases (around the 16 × 16 tiles and 8-column blocks): one of
/// these half the time, else below the limit.
const SIZES: [usize; 14] = [0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 47];
const SIZE_LIMIT: usize = 90;

/// CSR arrays with the index base applied.
struct CsrArrays {
    row_ptr: Vec<i32>,
    col_ind: Vec<i32>,
}

fn shifted<T>(csr: &CsrMatrix<T>, base: IndexBase) -> CsrArrays {
    let shift = base as i32;
    CsrArrays {
        row_ptr: csr.row_ptr.iter().map(|p| p + shift).collect(),
        col_ind: csr.col_ind.iter().map(|c| c + shift).collect(),
    }
}

unsafe fn create_raw<T: Element>(
    h: &Handle,
    csr: &CsrMatrix<T>,
    row_ptr: *const i32,
    col_ind: *const i32,
    values: *const T,
    base: IndexBase,
) -> (i32, smatMatrix_t) {
    let mut a = null_mut();
    let status = unsafe {
        smatCreateCsr(
            h.0,
            &mut a,
            csr.rows as i32,
            csr.cols as i32,
            csr.nnz() as i64,
            row_ptr,
            col_ind,
            values as *const c_void,
            T::VALUE_TYPE as i32,
            base as i32,
        )
    };
    (status, a)
}

fn create_matrix<T: Element>(h: &Handle, csr: &CsrMatrix<T>, base: IndexBase) -> Matrix {
    let arrays = shifted(csr, base);
    let (status, a) =
        unsafe { create_raw(h, csr, arrays.row_ptr.as_ptr(), arrays.col_ind.as_ptr(), csr.values.as_ptr(), base) };
    assert_eq!(status, SUCCESS, "{}", last_error());
    Matrix(a)
}

/// `smatSpMM` with raw B / C pointers (host or device).
#[allow(clippy::too_many_arguments)]
unsafe fn spmm_raw<T: Element>(
    h: &Handle,
    a: &Matrix,
    alpha: T::Compute,
    b: *const T,
    db: Dense,
    beta: T::Compute,
    c: *mut T,
    dc: Dense,
) -> i32 {
    unsafe {
        smatSpMM(
            h.0,
            a.0,
            db.cols as i32,
            &alpha as *const T::Compute as *const c_void,
            b as *const c_void,
            db.ld as i32,
            &beta as *const T::Compute as *const c_void,
            c as *mut c_void,
            dc.ld as i32,
            db.layout as i32,
        )
    }
}

/// One problem: A, B, the old C (NaN in the written region when β = 0, poison in the padding).
struct Problem<T: Element> {
    csr: CsrMatrix<T>,
    db: Dense,
    dc: Dense,
    b: Vec<T>,
    c: Vec<T>,
    alpha: T::Compute,
    beta: T::Compute,
}

impl<T: Element> Problem<T> {
    fn new(rng: &mut Rng, csr: CsrMatrix<T>, n: usize, layout: Layout, beta_zero: bool) -> Self {
        let db = Dense::random_ld(rng, csr.cols, n, layout);
        let dc = Dense::random_ld(rng, csr.rows, n, layout);
        let alpha = T::Compute::from_f64(rng.range(-2.0, 2.0));
        let beta = T::Compute::from_f64(if beta_zero { 0.0 } else { rng.range(-2.0, 2.0) });
        Problem { csr, db, dc, b: Vec::new(), c: Vec::new(), alpha, beta }.with_shapes(db, dc, rng)
    }

    /// The same A, α and β with B and C of the given shapes, filled afresh (C's region NaN when β = 0,
    /// so a read of it shows; its padding poison).
    fn with_shapes(self, db: Dense, dc: Dense, rng: &mut Rng) -> Self {
        let beta_zero = self.beta.to_f64() == 0.0;
        let b: Vec<T> = rng.vec(db.len());
        let mut c = vec![T::from_f64(POISON); dc.len()];
        for i in 0..dc.rows {
            for j in 0..dc.cols {
                c[dc.index(i, j)] = if beta_zero { T::from_f64(f64::NAN) } else { T::from_f64(rng.range(-1.0, 1.0)) };
            }
        }
        Problem { db, dc, b, c, ..self }
    }

    /// Row-major B and C with 16-byte aligned rows (leading dimensions a multiple of 8 elements, so
    /// the CSR kernels' 16-byte form runs), filled afresh; column-major ones as they are.
    fn with_aligned_rows(self, rng: &mut Rng) -> Self {
        let aligned =
            |d: Dense| Dense { ld: if d.layout == Layout::RowMajor { d.cols.next_multiple_of(8) } else { d.ld }, ..d };
        let (db, dc) = (aligned(self.db), aligned(self.dc));
        self.with_shapes(db, dc, rng)
    }

    /// Checks every element of `got` against the f64 reference from the rounded inputs (bound of
    /// the tests of the CPU backend), and that C's padding is untouched.
    ///
    /// `tiles_rounded`: the CUDA backend feeds half-type tiles to the tensor cores, so duplicate
    /// entries, summed in f32 at analysis, reach it rounded once to the value type, while its CSR
    /// rows multiply duplicates one by one; the bound then also allows A's entries one rounding.
    /// `u_product`: the relative error of each product a·b beyond exact (3xTF32: 2⁻²⁰).
    fn check(&self, got: &[T], what: &str, tiles_rounded: bool, u_product: f64) {
        let (rows, cols, n) = (self.csr.rows, self.csr.cols, self.db.cols);
        let csr = &self.csr;
        let (alpha, beta) = (self.alpha.to_f64(), self.beta.to_f64());
        let (u_out, u_compute) = roundoffs(T::VALUE_TYPE);
        let u_a = if tiles_rounded { u_out } else { 0.0 };
        let tiny = if T::VALUE_TYPE == ValueType::F16 { 2f64.powi(-24) } else { 0.0 };
        for i in 0..rows {
            for j in 0..n {
                // Over the row's entries (duplicates one by one, as they sum): the matrices here
                // may have too many rows and columns to hold densely.
                let (mut exact, mut magnitude) = (0.0, 0.0);
                for e in csr.row_ptr[i] as usize..csr.row_ptr[i + 1] as usize {
                    let (a, bkj) = (csr.values[e].to_f64(), self.b[self.db.index(csr.col_ind[e] as usize, j)].to_f64());
                    exact += a * bkj;
                    magnitude += a.abs() * bkj.abs();
                }
                let mut want = alpha * exact;
                let mut bound = alpha.abs() * magnitude;
                if beta != 0.0 {
                    let old = self.c[self.dc.index(i, j)].to_f64();
                    want += beta * old;
                    bound += (beta * old).abs();
                }
                let value = got[self.dc.index(i, j)].to_f64();
                if !want.is_finite() {
                    // An Inf or a NaN of B in a product: as IEEE arithmetic gives it.
                    assert!(
                        value == want || (value.is_nan() && want.is_nan()),
                        "{what}: C[{i},{j}] = {value}, want {want}"
                    );
                    continue;
                }
                let tolerance = u_out * want.abs()
                    + 4.0 * (cols as f64 + 2.0) * u_compute * bound
                    + (u_a + u_product) * alpha.abs() * magnitude
                    + tiny;
                assert!(
                    (value - want).abs() <= tolerance,
                    "{what}: C[{i},{j}] = {value}, want {want} (tolerance {tolerance})"
                );
            }
        }
        let poison = T::from_f64(POISON);
        for (idx, (after, before)) in got.iter().zip(&self.c).enumerate() {
            if *before == poison {
                assert_eq!(after, before, "{what}: padding element {idx} of C was written");
            }
        }
    }
}

/// Adds duplicate entries (they must sum) so the device tiles hold sums, too.
fn with_duplicates<T: Element>(rng: &mut Rng, csr: &CsrMatrix<T>) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for r in 0..csr.rows {
        for e in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
            triplets.push((r, csr.col_ind[e] as usize, csr.values[e]));
            if rng.below(10) == 0 {
                triplets.push((r, csr.col_ind[e] as usize, T::from_f64(rng.range(-1.0, 1.0))));
            }
        }
    }
    CsrMatrix::from_triplets(csr.rows, csr.cols, triplets)
}

/// Random problems on CUDA and CPU handles: identical info, the GPU result within the reference
/// bound, and CPU and GPU results within twice that bound of each other (checked by both passing).
fn property_loop<T: Element>(cases: usize) {
    let mut rng = Rng::fresh(&format!("smat gpu spmm {:?}", T::VALUE_TYPE));
    for case in 0..cases {
        let (base_matrix, structure) = random_matrix::<T>(&mut rng, &SIZES, SIZE_LIMIT);
        let csr = with_duplicates(&mut rng, &base_matrix);
        let n = [0, 1, 2, 3, 8, 17, 31, 32, 33, 70, 129][rng.below(11)];
        let layout = if rng.below(2) == 0 { Layout::RowMajor } else { Layout::ColMajor };
        let base = if rng.below(2) == 0 { IndexBase::Zero } else { IndexBase::One };
        let mode = ReorderMode::variants()[rng.below(3)];
        let format = StorageFormat::variants()[rng.below(3)];
        let beta_zero = rng.below(3) == 0;
        let p = Problem::new(&mut rng, csr, n, layout, beta_zero);
        let what = format!(
            "case {case} {:?} {structure} {}x{} nnz {} n {n} {layout:?} {base:?} {mode:?} {format:?} alpha {:?} beta {:?} ldb {} ldc {}",
            T::VALUE_TYPE,
            p.csr.rows,
            p.csr.cols,
            p.csr.nnz(),
            p.alpha,
            p.beta,
            p.db.ld,
            p.dc.ld
        );

        let gpu_handle = Handle::with_format(BackendKind::Cuda, mode, format);
        let cpu_handle = Handle::with_format(BackendKind::Cpu, mode, format);
        compare_backends(&p, &gpu_handle, &cpu_handle, base, &what);
    }
}

/// `p` on a CUDA and a CPU handle: identical info, both results within the reference bound.
fn compare_backends<T: Element>(p: &Problem<T>, gpu_handle: &Handle, cpu_handle: &Handle, base: IndexBase, what: &str) {
    {
        let on_gpu = create_matrix(gpu_handle, &p.csr, base);
        let on_cpu = create_matrix(cpu_handle, &p.csr, base);
        assert_eq!(on_gpu.info(), on_cpu.info(), "{what}: info");

        let mut c_gpu = p.c.clone();
        let mut c_cpu = p.c.clone();
        let status =
            unsafe { spmm_raw(gpu_handle, &on_gpu, p.alpha, p.b.as_ptr(), p.db, p.beta, c_gpu.as_mut_ptr(), p.dc) };
        assert_eq!(status, SUCCESS, "{what}: {}", last_error());
        let status =
            unsafe { spmm_raw(cpu_handle, &on_cpu, p.alpha, p.b.as_ptr(), p.db, p.beta, c_cpu.as_mut_ptr(), p.dc) };
        assert_eq!(status, SUCCESS, "{what}: {}", last_error());
        // 3xTF32 f32 tiles: each product within 2⁻²⁰ of exact (the split's truncations and the
        // dropped small·small term).
        let mut math_mode = 0;
        assert_eq!(unsafe { smatGetMathMode(gpu_handle.0, &mut math_mode) }, SUCCESS);
        let u_product = if T::VALUE_TYPE == ValueType::F32 && math_mode == SmatMathMode::Tf32x3 as i32 {
            2f64.powi(-20)
        } else {
            0.0
        };
        p.check(&c_gpu, &format!("{what} (CUDA)"), true, u_product);
        p.check(&c_cpu, &format!("{what} (CPU)"), false, u_product);
    }
}

#[test]
fn spmm_matches_cpu_and_reference_f16() {
    if !common::cuda_available("spmm_matches_cpu_and_reference_f16") {
        return;
    }
    property_loop::<f16>(60);
}

#[test]
fn spmm_matches_cpu_and_reference_bf16() {
    if !common::cuda_available("spmm_matches_cpu_and_reference_bf16") {
        return;
    }
    property_loop::<bf16>(60);
}

#[test]
fn spmm_matches_cpu_and_reference_f32() {
    if !common::cuda_available("spmm_matches_cpu_and_reference_f32") {
        return;
    }
    property_loop::<f32>(60);
}

#[test]
fn spmm_matches_cpu_and_reference_f64() {
    if !common::cuda_available("spmm_matches_cpu_and_reference_f64") {
        return;
    }
    property_loop::<f64>(60);
}

/// The CSR kernels' two forms (16-byte loads for row-major B and C with aligned rows, strided loads
/// otherwise) at widths around their lanes' coverage, and rows long enough to be cut into segments
/// (with empty rows, a row of A with every column, and short rows around them); then a matrix of
/// many short rows, which groups of lanes take several at a time, one of skewed row lengths and a
/// band whose rows were shuffled (both stored in another row order on the device).
fn csr_rows_and_segments<T: Element>(rng: &mut Rng) {
    let cols = 2500;
    let mut triplets = Vec::new();
    for r in 0..700 {
        let length = match r % 50 {
            0 => cols,                  // whole rows: split into segments
            7 => 1100 + rng.below(300), // just above the segment threshold
            13 => 0,
            _ => rng.below(12),
        };
        let mut columns: Vec<usize> = (0..cols).collect();
        for i in 0..length {
            columns.swap(i, i + rng.below(cols - i));
            triplets.push((r, columns[i], T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    let csr = CsrMatrix::from_triplets(700, cols, triplets);
    let csr_only = |backend| Handle::with_format(backend, ReorderMode::Never, StorageFormat::Csr);
    let (gpu_handle, cpu_handle) = (csr_only(BackendKind::Cuda), csr_only(BackendKind::Cpu));
    // Every nonzero in one row: the whole product is segments.
    let one_row =
        CsrMatrix::from_triplets(30, cols, (0..cols).map(|c| (11, c, T::from_f64(rng.range(-1.0, 1.0)))).collect());
    for n in [1, 33] {
        let p = Problem::new(rng, one_row.clone(), n, Layout::RowMajor, false);
        compare_backends(&p, &gpu_handle, &cpu_handle, IndexBase::One, &format!("{:?} one row n {n}", T::VALUE_TYPE));
    }
    // The last width is narrower than the one before: the kept workspace is reused.
    for n in [1, 7, 8, 9, 31, 64, 100, 257, 9] {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let beta_zero = rng.below(2) == 0;
            let mut p = Problem::new(rng, csr.clone(), n, layout, beta_zero);
            // Leading dimensions that keep rows 16-byte aligned half of the time.
            if rng.below(2) == 0 {
                p = p.with_aligned_rows(rng);
            }
            let what = format!("{:?} long rows n {n} {layout:?} ldb {} ldc {}", T::VALUE_TYPE, p.db.ld, p.dc.ld);
            compare_backends(&p, &gpu_handle, &cpu_handle, IndexBase::Zero, &what);
        }
    }
    // Many short rows (0–6 entries, runs of empty ones, a few long ones among them), a row count
    // that is not a multiple of the rows a group takes: the kernel for short rows, whose groups of
    // 1 to 32 lanes take runs of up to 8 rows (one a lane), a warp with a long row a row at a time.
    let short = random_rows::<T>(rng, 70_003, cols, |rng, r| match r {
        _ if r % 10_007 == 5 => 700,
        _ if r % 1000 < 20 => 0,
        _ => rng.below(7),
    });
    let cases = [
        (1, Layout::RowMajor),
        (33, Layout::ColMajor),
        (128, Layout::RowMajor),
        (16, Layout::RowMajor),
        (32, Layout::RowMajor),
        (64, Layout::RowMajor),
        (300, Layout::RowMajor),
    ];
    compare_cases(rng, &short, &cases, IndexBase::One, "short rows", (&gpu_handle, &cpu_handle));
    // Row lengths of a power law (most rows 0–3 entries, every 97th 100–127, one long row): the
    // device keeps such rows longest first, and C's rows must still land in the caller's order.
    let skewed = random_rows::<T>(rng, 3001, cols, |rng, r| match r {
        1234 => 700,
        _ if r % 97 == 3 => 100 + rng.below(28),
        _ => rng.below(4),
    });
    let cases = [(1, Layout::ColMajor), (40, Layout::RowMajor), (128, Layout::RowMajor)];
    compare_cases(rng, &skewed, &cases, IndexBase::Zero, "skewed rows", (&gpu_handle, &cpu_handle));
    // A band whose rows were shuffled (some left empty): the device keeps its rows by first column.
    let band_rows = 4000;
    let mut shuffled: Vec<usize> = (0..band_rows).collect();
    for i in 0..band_rows {
        shuffled.swap(i, i + rng.below(band_rows - i));
    }
    let mut triplets = Vec::new();
    for (r, &band_row) in shuffled.iter().enumerate() {
        if band_row % 9 == 4 {
            continue;
        }
        let center = band_row * cols / band_rows;
        for c in center.saturating_sub(3)..(center + 4).min(cols) {
            triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    let permuted = CsrMatrix::from_triplets(band_rows, cols, triplets);
    let cases = [(3, Layout::RowMajor), (64, Layout::ColMajor), (128, Layout::RowMajor)];
    compare_cases(rng, &permuted, &cases, IndexBase::One, "shuffled band rows", (&gpu_handle, &cpu_handle));
}

/// Inf and NaN in B reach the rows of C that read them and no other (CSR semantics: no padding
/// zeros, unlike tiles): 70 001 rows of 0–9 entries over 40 columns (the short rows' kernels, whose
/// groups take runs of rows as one sequence of entries), B's row 5 holding ±Inf and row 17 NaN in
/// every 7th column; n = 128 and 44 with 16-byte aligned rows, 9 column-major.
fn csr_rows_with_nonfinite_b<T: Element>(rng: &mut Rng) {
    let cols = 40;
    let csr = random_rows::<T>(rng, 70_001, cols, |rng, _| rng.below(10));
    let csr_only = |backend| Handle::with_format(backend, ReorderMode::Never, StorageFormat::Csr);
    let (gpu_handle, cpu_handle) = (csr_only(BackendKind::Cuda), csr_only(BackendKind::Cpu));
    for (n, layout) in [(128, Layout::RowMajor), (44, Layout::RowMajor), (9, Layout::ColMajor)] {
        for beta_zero in [true, false] {
            let mut p = Problem::new(rng, csr.clone(), n, layout, beta_zero).with_aligned_rows(rng);
            for j in (0..n).step_by(7) {
                p.b[p.db.index(5, j)] = T::from_f64(if j % 2 == 0 { f64::INFINITY } else { f64::NEG_INFINITY });
                p.b[p.db.index(17, (j + 3) % n)] = T::from_f64(f64::NAN);
            }
            let what = format!("{:?} non-finite B n {n} {layout:?} beta zero {beta_zero}", T::VALUE_TYPE);
            compare_backends(&p, &gpu_handle, &cpu_handle, IndexBase::Zero, &what);
        }
    }
}

#[test]
fn csr_rows_keep_nonfinite_b_to_the_rows_that_read_it() {
    if !common::cuda_available("csr_rows_keep_nonfinite_b_to_the_rows_that_read_it") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu non-finite b");
    csr_rows_with_nonfinite_b::<f16>(&mut rng);
    csr_rows_with_nonfinite_b::<bf16>(&mut rng);
    csr_rows_with_nonfinite_b::<f32>(&mut rng);
    csr_rows_with_nonfinite_b::<f64>(&mut rng);
}

/// A rows × cols matrix whose row r holds `length(rng, r)` entries in random columns.
fn random_rows<T: Element>(
    rng: &mut Rng,
    rows: usize,
    cols: usize,
    length: impl Fn(&mut Rng, usize) -> usize,
) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for r in 0..rows {
        for _ in 0..length(rng, r) {
            triplets.push((r, rng.below(cols), T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(rows, cols, triplets)
}

/// The GPU against the CPU and the reference on `csr` at each (width, layout) of `cases`, β = 0 at
/// the second.
fn compare_cases<T: Element>(
    rng: &mut Rng,
    csr: &CsrMatrix<T>,
    cases: &[(usize, Layout)],
    base: IndexBase,
    name: &str,
    (gpu_handle, cpu_handle): (&Handle, &Handle),
) {
    for (k, &(n, layout)) in cases.iter().enumerate() {
        let p = Problem::new(rng, csr.clone(), n, layout, k == 1);
        let what = format!("{:?} {name} n {n} {layout:?}", T::VALUE_TYPE);
        compare_backends(&p, gpu_handle, cpu_handle, base, &what);
    }
}

/// The tile kernels for row-major B with 16-byte aligned rows (the half types' staged kernel, C with
/// even leading dimension; f32's panel kernel, C's rows 16-byte aligned too): widths around their
/// 32-column warps, 8-column chunks and panels of 32 to 128 columns, a last block column sticking
/// out of A, and the strided tile kernel on the same matrix for other layouts.
/// Tiles of nearly full aligned blocks, tiles gathering columns scattered over the whole width, and
/// a few block rows of so many tiles that the GPU cuts each into runs summed by a second kernel.
///
/// `math_mode` is the handles' (it changes how f32 tiles are multiplied).
fn staged_tiles<T: Element>(rng: &mut Rng, math_mode: SmatMathMode) {
    let blocks: CsrMatrix<T> = block_csr(rng, 301, 1007, 16, 0.25, 0.8);
    let scattered: CsrMatrix<T> = random_csr(rng, 203, 1501, 0.03);
    let long_block_rows: CsrMatrix<T> = block_csr(rng, 37, 3001, 16, 0.9, 0.5);
    let tiles_only = |backend| {
        let h = Handle::with_format(backend, ReorderMode::Auto, StorageFormat::Tiles);
        assert_eq!(unsafe { smatSetMathMode(h.0, math_mode as i32) }, SUCCESS);
        h
    };
    let (gpu_handle, cpu_handle) = (tiles_only(BackendKind::Cuda), tiles_only(BackendKind::Cpu));
    let matrices = [&blocks, &scattered, &long_block_rows];
    for (csr, n) in
        [1, 8, 17, 20, 32, 33, 44, 64, 100, 128, 130, 257].into_iter().flat_map(|n| matrices.map(|m| (m, n)))
    {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let beta_zero = rng.below(2) == 0;
            let mut p = Problem::new(rng, csr.clone(), n, layout, beta_zero);
            if layout == Layout::RowMajor && rng.below(4) != 0 {
                let ldc = n.next_multiple_of(if rng.below(2) == 0 { 4 } else { 2 });
                let (db, dc) = (Dense { ld: n.next_multiple_of(8), ..p.db }, Dense { ld: ldc, ..p.dc });
                p = p.with_shapes(db, dc, rng);
            }
            let what = format!(
                "{:?} tiles {math_mode:?} {}x{} n {n} {layout:?} ldb {} ldc {}",
                T::VALUE_TYPE,
                csr.rows,
                csr.cols,
                p.db.ld,
                p.dc.ld
            );
            compare_backends(&p, &gpu_handle, &cpu_handle, IndexBase::Zero, &what);
        }
    }
}

#[test]
fn tiles_staged_and_strided() {
    if !common::cuda_available("tiles_staged_and_strided") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu tiles");
    staged_tiles::<f16>(&mut rng, SmatMathMode::Default);
    staged_tiles::<bf16>(&mut rng, SmatMathMode::Default);
    staged_tiles::<f32>(&mut rng, SmatMathMode::Default);
    staged_tiles::<f64>(&mut rng, SmatMathMode::Default);
}

/// f32 tiles in 3xTF32 on the tensor cores, against the CPU's 3xTF32 and the f64 reference.
#[test]
fn f32_tiles_in_3xtf32() {
    if !common::cuda_available("f32_tiles_in_3xtf32") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu 3xtf32");
    staged_tiles::<f32>(&mut rng, SmatMathMode::Tf32x3);
}

#[test]
fn csr_rows_vectorised_strided_and_split() {
    if !common::cuda_available("csr_rows_vectorised_strided_and_split") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu csr rows");
    csr_rows_and_segments::<f16>(&mut rng);
    csr_rows_and_segments::<bf16>(&mut rng);
    csr_rows_and_segments::<f32>(&mut rng);
    csr_rows_and_segments::<f64>(&mut rng);
}

/// Device arrays for the CSR input and for B / C, on a non-default stream.
fn device_pointers_on_a_stream<T: Element>(rng: &mut Rng) {
    let gpu = cuda::device(0).unwrap();
    let stream = gpu.ctx.new_stream().unwrap();
    let raw: CUstream = stream.cu_stream();
    let s = Stream(raw);
    for (case, layout) in [Layout::RowMajor, Layout::ColMajor].into_iter().enumerate() {
        let csr: CsrMatrix<T> = block_csr(rng, 150 + case, 97, 16, 0.3, 0.7);
        let base = IndexBase::One;
        let p = Problem::new(rng, csr, 45, layout, case == 1);
        let what = format!("device pointers {:?} {layout:?}", T::VALUE_TYPE);
        let h = Handle::new(BackendKind::Cuda, ReorderMode::Always);
        assert_eq!(unsafe { smatSetStream(h.0, raw as *mut c_void) }, SUCCESS);
        let arrays = shifted(&p.csr, base);
        let d_row_ptr = memory::DeviceBuffer::from_host(&gpu, &arrays.row_ptr, s, "rowPtr").unwrap();
        let d_col_ind = memory::DeviceBuffer::from_host(&gpu, &arrays.col_ind, s, "colInd").unwrap();
        let d_values = memory::DeviceBuffer::from_host(&gpu, &p.csr.values, s, "values").unwrap();
        let (status, a) = unsafe {
            create_raw(
                &h,
                &p.csr,
                d_row_ptr.ptr() as *const i32,
                d_col_ind.ptr() as *const i32,
                d_values.ptr() as *const T,
                base,
            )
        };
        assert_eq!(status, SUCCESS, "{what}: {}", last_error());
        let a = Matrix(a);
        let cpu = Handle::new(BackendKind::Cpu, ReorderMode::Always);
        assert_eq!(a.info(), create_matrix(&cpu, &p.csr, base).info(), "{what}: info");

        let d_b = memory::DeviceBuffer::from_host(&gpu, &p.b, s, "B").unwrap();
        let d_c = memory::DeviceBuffer::from_host(&gpu, &p.c, s, "C").unwrap();
        let status =
            unsafe { spmm_raw(&h, &a, p.alpha, d_b.ptr() as *const T, p.db, p.beta, d_c.ptr() as *mut T, p.dc) };
        assert_eq!(status, SUCCESS, "{what}: {}", last_error());
        let mut got = vec![T::default(); p.c.len()];
        d_c.copy_to_host(&mut got).unwrap();
        p.check(&got, &what, true, 0.0);

        // Host B with device C, and device B with host C, on the same handle.
        let d_c2 = memory::DeviceBuffer::from_host(&gpu, &p.c, s, "C").unwrap();
        let status = unsafe { spmm_raw(&h, &a, p.alpha, p.b.as_ptr(), p.db, p.beta, d_c2.ptr() as *mut T, p.dc) };
        assert_eq!(status, SUCCESS, "{what}: {}", last_error());
        d_c2.copy_to_host(&mut got).unwrap();
        p.check(&got, &format!("{what}, host B"), true, 0.0);
        let mut host_c = p.c.clone();
        let status =
            unsafe { spmm_raw(&h, &a, p.alpha, d_b.ptr() as *const T, p.db, p.beta, host_c.as_mut_ptr(), p.dc) };
        assert_eq!(status, SUCCESS, "{what}: {}", last_error());
        p.check(&host_c, &format!("{what}, host C"), true, 0.0);
        drop(a);
        gpu.synchronize(s).unwrap();
    }
}

#[test]
fn device_pointers_and_a_caller_stream() {
    if !common::cuda_available("device_pointers_and_a_caller_stream") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu device pointers");
    device_pointers_on_a_stream::<f16>(&mut rng);
    device_pointers_on_a_stream::<bf16>(&mut rng);
    device_pointers_on_a_stream::<f32>(&mut rng);
    device_pointers_on_a_stream::<f64>(&mut rng);
}

#[test]
fn a_matrix_is_used_with_the_backend_that_created_it() {
    if !common::cuda_available("a_matrix_is_used_with_the_backend_that_created_it") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu backend mismatch");
    let csr: CsrMatrix<f32> = random_csr(&mut rng, 20, 20, 0.2);
    let gpu = Handle::new(BackendKind::Cuda, ReorderMode::Auto);
    let cpu = Handle::new(BackendKind::Cpu, ReorderMode::Auto);
    let on_gpu = create_matrix(&gpu, &csr, IndexBase::Zero);
    let on_cpu = create_matrix(&cpu, &csr, IndexBase::Zero);
    let d = Dense { rows: 20, cols: 4, ld: 4, layout: Layout::RowMajor };
    let b = vec![1.0f32; d.len()];
    for (h, a) in [(&gpu, &on_cpu), (&cpu, &on_gpu)] {
        let mut c = vec![3.0f32; d.len()];
        let status = unsafe { spmm_raw(h, a, 1.0, b.as_ptr(), d, 0.0, c.as_mut_ptr(), d) };
        assert_eq!(status, Status::InvalidValue as i32, "{}", last_error());
        let message = last_error();
        assert!(message.contains("smatSpMM") && message.contains("backend"), "{message}");
        assert!(c.iter().all(|&x| x == 3.0), "C was written");
    }
}

#[test]
fn injected_allocation_failures_leave_outputs_untouched() {
    if !common::cuda_available("injected_allocation_failures_leave_outputs_untouched") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu allocation failure");
    // Even and odd rows use different column tiles, so the clustering reorders (and the row
    // permutation is uploaded, too).
    let mut triplets = Vec::new();
    for r in 0..40 {
        for c in (r % 2) * 16..(r % 2) * 16 + 16 {
            if rng.below(4) != 0 {
                triplets.push((r, c, f16::from_f64(rng.range(-1.0, 1.0))));
            }
        }
    }
    let csr: CsrMatrix<f16> = CsrMatrix::from_triplets(40, 33, triplets);
    let h = Handle::new(BackendKind::Cuda, ReorderMode::Always);

    let arrays = shifted(&csr, IndexBase::Zero);
    {
        memory::inject_allocation_failures(1);
        let mut a = 0x5a5a as smatMatrix_t;
        let status = unsafe {
            smatCreateCsr(
                h.0,
                &mut a,
                40,
                33,
                csr.nnz() as i64,
                arrays.row_ptr.as_ptr(),
                arrays.col_ind.as_ptr(),
                csr.values.as_ptr() as *const c_void,
                ValueType::F16 as i32,
                0,
            )
        };
        memory::inject_allocation_failures(0);
        assert_eq!(status, Status::AllocationFailed as i32, "{}", last_error());
        assert_eq!(a as usize, 0x5a5a, "*A written after a failure");
    }

    let a = create_matrix(&h, &csr, IndexBase::Zero);
    assert_eq!(a.info().reordered, 1, "the permutation upload was not exercised");
    let p = Problem::new(&mut rng, csr, 19, Layout::ColMajor, false);
    let mut c = p.c.clone();
    memory::inject_allocation_failures(1);
    let status = unsafe { spmm_raw(&h, &a, p.alpha, p.b.as_ptr(), p.db, p.beta, c.as_mut_ptr(), p.dc) };
    memory::inject_allocation_failures(0);
    assert_eq!(status, Status::AllocationFailed as i32, "{}", last_error());
    assert!(c.iter().zip(&p.c).all(|(x, y)| x.to_bits() == y.to_bits()), "C written after a failure");
    let status = unsafe { spmm_raw(&h, &a, p.alpha, p.b.as_ptr(), p.db, p.beta, c.as_mut_ptr(), p.dc) };
    assert_eq!(status, SUCCESS, "{}", last_error());
    p.check(&c, "after the failure", true, 0.0);
}

/// 16384² with 1 % nonzeros in 16×16 blocks, n = 256, B and C on the device: times smatSpMM and
/// checks the result against the CPU backend.
fn timing<T: Element>(rng: &mut Rng, csr: &CsrMatrix<T>) {
    let gpu = cuda::device(0).unwrap();
    let s = Stream::DEFAULT;
    let n = 256;
    let layout = Layout::RowMajor;
    let db = Dense { rows: csr.cols, cols: n, ld: n, layout };
    let dc = Dense { rows: csr.rows, cols: n, ld: n, layout };
    let b: Vec<T> = rng.vec(db.len());
    let h = Handle::new(BackendKind::Cuda, ReorderMode::Never);
    let cpu = Handle::new(BackendKind::Cpu, ReorderMode::Never);
    let a = create_matrix(&h, csr, IndexBase::Zero);
    let a_cpu = create_matrix(&cpu, csr, IndexBase::Zero);
    let d_b = memory::DeviceBuffer::from_host(&gpu, &b, s, "B").unwrap();
    let d_c = memory::DeviceBuffer::alloc(&gpu, dc.len() * size_of::<T>(), s, "C").unwrap();
    let (one, zero) = (T::Compute::from_f64(1.0), T::Compute::from_f64(0.0));
    let call = || {
        let status = unsafe { spmm_raw(&h, &a, one, d_b.ptr() as *const T, db, zero, d_c.ptr() as *mut T, dc) };
        assert_eq!(status, SUCCESS, "{}", last_error());
    };
    call();
    gpu.synchronize(s).unwrap();
    let reps = 20;
    let start = std::time::Instant::now();
    for _ in 0..reps {
        call();
    }
    gpu.synchronize(s).unwrap();
    let seconds = start.elapsed().as_secs_f64() / reps as f64;
    let info = a.info();
    let flops = 2.0 * csr.nnz() as f64 * n as f64;
    let padded = 2.0 * (info.blockCount * (info.tileRows * info.tileCols) as i64) as f64 * n as f64;
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "TIMING smatSpMM {:?} {}x{} nnz {} blocks {} n {n}: {:.3} ms, {:.1} GFLOP/s useful, {:.1} GFLOP/s on tiles",
        T::VALUE_TYPE,
        csr.rows,
        csr.cols,
        csr.nnz(),
        info.blockCount,
        seconds * 1e3,
        flops / seconds * 1e-9,
        padded / seconds * 1e-9
    );

    let mut got = vec![T::default(); dc.len()];
    d_c.copy_to_host(&mut got).unwrap();
    let mut want = vec![T::default(); dc.len()];
    let status = unsafe { spmm_raw(&cpu, &a_cpu, one, b.as_ptr(), db, zero, want.as_mut_ptr(), dc) };
    assert_eq!(status, SUCCESS, "{}", last_error());
    let (u_out, u_compute) = roundoffs(T::VALUE_TYPE);
    // Each output sums about 164 products of magnitude < 1: bound their rounding differences.
    let tolerance = 2.0 * u_out * 16.0 + 4.0 * 400.0 * u_compute * 164.0;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (g, w) = (g.to_f64(), w.to_f64());
        assert!((g - w).abs() <= tolerance * (1.0 + w.abs()), "C element {i}: CUDA {g}, CPU {w}");
    }
}

#[test]
fn timing_16384_squared_one_percent_in_16x16_blocks() {
    if !common::cuda_available("timing_16384_squared_one_percent_in_16x16_blocks") {
        return;
    }
    let mut rng = Rng::fresh("smat gpu timing");
    let csr16: CsrMatrix<f16> = block_csr(&mut rng, 16384, 16384, 16, 0.01, 1.0);
    timing(&mut rng, &csr16);
    let csr32 = CsrMatrix::from_triplets(
        csr16.rows,
        csr16.cols,
        (0..csr16.rows)
            .flat_map(|r| {
                let csr16 = &csr16;
                (csr16.row_ptr[r] as usize..csr16.row_ptr[r + 1] as usize)
                    .map(move |e| (r, csr16.col_ind[e] as usize, csr16.values[e].to_f32()))
            })
            .collect(),
    );
    timing::<f32>(&mut rng, &csr32);
}

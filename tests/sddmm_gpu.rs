//! SDDMM on the CUDA backend: TILED, COO, AUTO and a plan against the CPU backend and an f64
//! reference, for every value type, both layouts with padded leading dimensions, both index bases,
//! S with and without values, unsorted and repeated columns, densities from 1e-5 to dense; host and
//! device pointers, a non-default stream, and an injected allocation failure. Patterns in device
//! memory, validated on the device: valid ones against the reference, each kind of bad one reported
//! naming its first fault (out NaN, never a plausible result), and a valid call that returns while
//! the stream is still busy. Every test prints SKIPPED and returns where no GPU is usable.

mod common;
use common::last_error;

use common::sddmm::{product_in, takes_dense_tiles};
use common::{POISON, Rng};
use half::{bf16, f16};
use sparsegpu::backend::cuda::{self, memory};
use sparsegpu::capi::sddmm::*;
use sparsegpu::scalar::Element;
use sparsegpu::sddmm::{SddmmAlgorithm, SddmmMathMode};
use sparsegpu::testgen::random_csr;
use sparsegpu::{BackendKind, IndexBase, Layout, Status, ValueType};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::Arc;

const OK: i32 = Status::Success as i32;

fn handle(backend: BackendKind) -> sddmmHandle_t {
    let mut h: sddmmHandle_t = null_mut();
    assert_eq!(unsafe { sddmmCreate(&mut h) }, OK);
    assert_eq!(unsafe { sddmmSetBackend(h, backend as i32) }, OK, "{}", last_error());
    h
}

/// One problem as a C caller passes it.
#[derive(Clone)]
struct Case {
    label: String,
    m: usize,
    n: usize,
    k: usize,
    layout: Layout,
    base: IndexBase,
    lda: usize,
    ldb: usize,
    row_ptr: Vec<i32>,
    col_ind: Vec<i32>,
}

impl Case {
    /// A random pattern of the given density whose rows are shuffled and, in some rows, hold a
    /// repeated column (both allowed by the API).
    fn new(rng: &mut Rng, m: usize, n: usize, k: usize, density: f64, layout: Layout, base: IndexBase) -> Case {
        let pad = rng.below(3);
        Case::arranged(rng, (m, n, k, density), layout, base, true, pad)
    }

    /// Rows sorted by column without repeats, row-major, leading dimensions K plus `pad`.
    fn sorted(rng: &mut Rng, (m, n, k, density): (usize, usize, usize, f64), base: IndexBase, pad: usize) -> Case {
        Case::arranged(rng, (m, n, k, density), Layout::RowMajor, base, false, pad)
    }

    /// An n × n band of half-width `half` (rows sorted), row-major, leading dimensions K plus `pad`:
    /// most 128 × 128 tiles away from the diagonal hold no entry.
    fn band(n: usize, half: usize, k: usize, base: IndexBase, pad: usize) -> Case {
        let mut c = Case::of_rows((n, n, k), base, pad, |i| i.saturating_sub(half)..(i + half + 1).min(n));
        c.label = format!("band {n}x{n} half-width {half} k={k} {base:?} lda={}", c.lda);
        c
    }

    /// `m` rows (at least 2 × `full`) of which only the first and the last `full` hold entries, every
    /// column each, row-major: a chunk of the CSR kernels' positions that straddles the empty rows
    /// spans more rows than a thread block keeps row pointers for, and its positions bisect the row
    /// pointers in global memory.
    fn clustered(m: usize, n: usize, k: usize, full: usize, base: IndexBase) -> Case {
        let mut c = Case::of_rows((m, n, k), base, 0, |i| if i < full || i >= m - full { 0..n } else { 0..0 });
        c.label = format!("{m}x{n}, the first and last {full} rows full, k={k} {base:?}");
        c
    }

    /// `m` rows of which every `every`-th holds every column and the others none, row-major: rows
    /// long enough that the CSR kernels step from a position's row to the next position's, with runs
    /// of empty rows longer than those steps, where they bisect instead.
    fn spaced(m: usize, n: usize, k: usize, every: usize, base: IndexBase) -> Case {
        let mut c = Case::of_rows((m, n, k), base, 0, |i| if i % every == 0 { 0..n } else { 0..0 });
        c.label = format!("{m}x{n}, every {every}th row full, k={k} {base:?}");
        c
    }

    /// An m × n pattern whose row i holds the columns `columns(i)` (sorted), row-major, leading
    /// dimensions K plus `pad`; the label is left to the caller.
    fn of_rows(
        (m, n, k): (usize, usize, usize),
        base: IndexBase,
        pad: usize,
        columns: impl Fn(usize) -> std::ops::Range<usize>,
    ) -> Case {
        let offset = base.offset() as i32;
        let (mut row_ptr, mut col_ind) = (vec![offset], Vec::new());
        for i in 0..m {
            col_ind.extend(columns(i).map(|j| j as i32 + offset));
            row_ptr.push(col_ind.len() as i32 + offset);
        }
        let (lda, ldb) = (k.max(1) + pad, k.max(1) + pad);
        Case { label: String::new(), m, n, k, layout: Layout::RowMajor, base, lda, ldb, row_ptr, col_ind }
    }

    /// Rows of 40 among which four of 3000, more than twice the mean (GPU-Dynamic's row-warp
    /// kernels list them for the second, whose warps share them); K = 32.
    fn four_long_rows(base: IndexBase, pad: usize) -> Case {
        let columns = |i: usize| if i % 1000 == 7 { 0..3000 } else { i * 37 % 2960..i * 37 % 2960 + 40 };
        let mut c = Case::of_rows((4000, 3000, 32), base, pad, columns);
        c.label = format!("4000x3000 rows of 40 and four of 3000 k=32 {base:?}");
        c
    }

    /// Rows of 40 among which 133 of 400 (every 30th) and one of 140 000: the second kernel reads
    /// its list in two rounds (of 128 rows), most of its rows of fewer iterations (of 32 entries)
    /// than the kernel has warps, and one of more (4375 against 2112 warps on 132 multiprocessors).
    /// K = 32.
    fn many_long_rows(base: IndexBase) -> Case {
        let columns = |i: usize| match i {
            7 => 0..140_000,
            _ if i.is_multiple_of(30) => i * 37 % 139_000..i * 37 % 139_000 + 400,
            _ => i * 37 % 139_000..i * 37 % 139_000 + 40,
        };
        let mut c = Case::of_rows((4000, 140_000, 32), base, 0, columns);
        c.label = format!("4000x140000 rows of 40, 133 of 400 and one of 140000 k=32 {base:?}");
        c
    }

    /// `shuffled`: rows in random column order, some with a repeated column.
    fn arranged(
        rng: &mut Rng,
        (m, n, k, density): (usize, usize, usize, f64),
        layout: Layout,
        base: IndexBase,
        shuffled: bool,
        pad: usize,
    ) -> Case {
        let s = random_csr::<f64>(rng, m, n, density);
        let mut row_ptr = vec![0i32];
        let mut col_ind = Vec::new();
        for r in 0..m {
            let mut cols: Vec<i32> = s.col_ind[s.row_ptr[r] as usize..s.row_ptr[r + 1] as usize].to_vec();
            if shuffled {
                if !cols.is_empty() && rng.below(4) == 0 {
                    cols.push(cols[rng.below(cols.len())]);
                }
                for i in (1..cols.len()).rev() {
                    cols.swap(i, rng.below(i + 1));
                }
            }
            col_ind.extend(cols);
            row_ptr.push(col_ind.len() as i32);
        }
        let offset = base.offset() as i32;
        row_ptr.iter_mut().for_each(|p| *p += offset);
        col_ind.iter_mut().for_each(|c| *c += offset);
        let (lda, ldb) = match layout {
            Layout::RowMajor => (k.max(1) + pad, k.max(1) + pad),
            Layout::ColMajor => (m.max(1) + pad, n.max(1) + pad),
        };
        let label = format!("{m}x{n} k={k} density={density} {layout:?} {base:?} lda={lda}");
        Case { label, m, n, k, layout, base, lda, ldb, row_ptr, col_ind }
    }

    fn nnz(&self) -> usize {
        self.col_ind.len()
    }

    /// Leaves the rows `rows` without entries.
    fn clear_rows(&mut self, rows: std::ops::Range<usize>) {
        let offset = self.base.offset() as i32;
        let (start, end) = (self.row_ptr[rows.start], self.row_ptr[rows.end]);
        self.col_ind.drain((start - offset) as usize..(end - offset) as usize);
        self.row_ptr[rows.start + 1..=rows.end].iter_mut().for_each(|p| *p = start);
        self.row_ptr[rows.end + 1..].iter_mut().for_each(|p| *p -= end - start);
    }

    /// Whether AUTO with a plan of a CUDA handle takes dense tiles of S (tensor-core or block tiles)
    /// for element type T.
    fn takes_dense_tiles<T: Element>(&self) -> Option<bool> {
        let (shape, lds) = ((self.m, self.n, self.k), (self.lda, self.ldb));
        takes_dense_tiles(T::VALUE_TYPE, shape, self.layout, self.base, lds, &self.row_ptr, &self.col_ind)
    }

    fn len(&self, rows: usize, ld: usize) -> usize {
        let outer = if self.layout == Layout::RowMajor { rows } else { self.k };
        if outer == 0 { 0 } else { (outer - 1) * ld + if self.layout == Layout::RowMajor { self.k } else { rows } }
    }

    fn at(&self, r: usize, p: usize, ld: usize) -> usize {
        if self.layout == Layout::RowMajor { r * ld + p } else { r + p * ld }
    }

    /// The f64 product of the rounded inputs and, per entry, the bound Σ|α·S·a·b| that scales
    /// rounding errors.
    fn reference<T: Element>(&self, alpha: f64, a: &[T], b: &[T], s: Option<&[T]>) -> (Vec<f64>, Vec<f64>) {
        self.reference_in(SddmmMathMode::Default, alpha, a, b, s)
    }

    /// [`Case::reference`] with each product as the math mode `math` forms it.
    fn reference_in<T: Element>(
        &self,
        math: SddmmMathMode,
        alpha: f64,
        a: &[T],
        b: &[T],
        s: Option<&[T]>,
    ) -> (Vec<f64>, Vec<f64>) {
        let offset = self.base.offset() as usize;
        let (mut want, mut scale) = (Vec::new(), Vec::new());
        for i in 0..self.m {
            for e in self.row_ptr[i] as usize - offset..self.row_ptr[i + 1] as usize - offset {
                let j = self.col_ind[e] as usize - offset;
                let sv = alpha * s.map_or(1.0, |s| s[e].to_f64());
                let (mut dot, mut abs) = (0.0, 0.0);
                for p in 0..self.k {
                    let x = product_in(math, a[self.at(i, p, self.lda)].to_f64(), b[self.at(j, p, self.ldb)].to_f64());
                    dot += x;
                    abs += x.abs();
                }
                want.push(sv * dot);
                scale.push((sv * abs).abs());
            }
        }
        (want, scale)
    }
}

fn tolerance<T: Element>() -> f64 {
    match std::mem::size_of::<T>() {
        8 => 1e-12,
        4 => 3e-5,
        _ if format!("{:?}", T::VALUE_TYPE) == "Bf16" => 2e-2,
        _ => 3e-3,
    }
}

fn check<T: Element>(what: &str, got: &[T], want: &[f64], scale: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let tol = tolerance::<T>();
    for (e, ((g, w), s)) in got.iter().zip(want).zip(scale).enumerate() {
        let g = g.to_f64();
        // The output is rounded to T: near zero its spacing (f16 subnormals, 6e-8) exceeds any
        // relative tolerance of the scale.
        let output_rounding = (T::from_f64(*w).to_f64() - w).abs();
        assert!(
            (g - w).abs() <= tol * s.max(f64::MIN_POSITIVE) + output_rounding + 1e-300,
            "{what}: entry {e}: got {g}, want {w} (scale {s})"
        );
    }
}

/// The caller's arrays, as pointers (host or device memory).
#[derive(Clone, Copy)]
struct Ptrs<T> {
    a: *const T,
    b: *const T,
    s: *const T,
    row_ptr: *const i32,
    col_ind: *const i32,
    out: *mut T,
}

unsafe fn dynamic<T: Element>(h: sddmmHandle_t, c: &Case, alpha: &T::Compute, p: Ptrs<T>) -> i32 {
    unsafe {
        sddmmDynamic(
            h,
            c.m as i32,
            c.n as i32,
            c.k as i32,
            (alpha as *const T::Compute).cast(),
            p.a.cast(),
            c.lda as i32,
            p.b.cast(),
            c.ldb as i32,
            c.layout as i32,
            c.nnz() as i64,
            p.row_ptr,
            p.col_ind,
            p.s.cast(),
            c.base as i32,
            T::VALUE_TYPE as i32,
            p.out.cast(),
        )
    }
}

unsafe fn create_plan(h: sddmmHandle_t, c: &Case, row_ptr: *const i32, col_ind: *const i32) -> sddmmPlan_t {
    let mut plan: sddmmPlan_t = null_mut();
    let status = unsafe {
        sddmmCreatePlan(h, &mut plan, c.m as i32, c.n as i32, c.nnz() as i64, row_ptr, col_ind, c.base as i32)
    };
    assert_eq!(status, OK, "{}: {}", c.label, last_error());
    plan
}

unsafe fn execute<T: Element>(h: sddmmHandle_t, plan: sddmmPlan_t, c: &Case, alpha: &T::Compute, p: Ptrs<T>) -> i32 {
    unsafe {
        sddmmExecutePlan(
            h,
            plan,
            c.k as i32,
            (alpha as *const T::Compute).cast(),
            p.a.cast(),
            c.lda as i32,
            p.b.cast(),
            c.ldb as i32,
            c.layout as i32,
            p.s.cast(),
            T::VALUE_TYPE as i32,
            p.out.cast(),
        )
    }
}

fn last_algorithm(h: sddmmHandle_t) -> i32 {
    let mut alg = -1;
    assert_eq!(unsafe { sddmmGetLastAlgorithm(h, &mut alg) }, OK);
    alg
}

/// Every algorithm (forced and AUTO), dynamically and through plans made on the CUDA and on the
/// CPU handle, on host pointers: each output against the reference and the CPU backend, and the
/// chosen algorithm against the CPU's choice.
fn all_ways<T: Element>(rng: &mut Rng, c: &Case, with_values: bool) {
    let a: Vec<T> = rng.vec(c.len(c.m, c.lda));
    let b: Vec<T> = rng.vec(c.len(c.n, c.ldb));
    let s: Vec<T> = if with_values { rng.vec(c.nnz()) } else { Vec::new() };
    let alpha_f = rng.range(-2.0, 2.0);
    let alpha = T::from_f64(alpha_f).to_compute();
    let alpha_f = alpha.to_f64();
    let (want, scale) = c.reference(alpha_f, &a, &b, with_values.then_some(&s[..]));
    let (gpu, cpu) = (handle(BackendKind::Cuda), handle(BackendKind::Cpu));
    let gpu_plan = unsafe { create_plan(gpu, c, c.row_ptr.as_ptr(), c.col_ind.as_ptr()) };
    let cpu_plan = unsafe { create_plan(cpu, c, c.row_ptr.as_ptr(), c.col_ind.as_ptr()) };
    for alg in SddmmAlgorithm::variants() {
        for h in [gpu, cpu] {
            assert_eq!(unsafe { sddmmSetAlgorithm(h, *alg as i32) }, OK);
        }
        let mut cpu_out = vec![T::from_f64(POISON); c.nnz()];
        let ptrs = |out: &mut Vec<T>| Ptrs {
            a: a.as_ptr(),
            b: b.as_ptr(),
            s: if with_values { s.as_ptr() } else { std::ptr::null() },
            row_ptr: c.row_ptr.as_ptr(),
            col_ind: c.col_ind.as_ptr(),
            out: out.as_mut_ptr(),
        };
        assert_eq!(unsafe { dynamic(cpu, c, &alpha, ptrs(&mut cpu_out)) }, OK, "{}", last_error());
        let cpu_alg = last_algorithm(cpu);
        for (way, plan) in [("dynamic", None), ("GPU plan", Some(gpu_plan)), ("CPU plan", Some(cpu_plan))] {
            let what = format!("{} {:?} {alg:?} {way} values={with_values}", c.label, T::VALUE_TYPE);
            let mut out = vec![T::from_f64(POISON); c.nnz()];
            let status = match plan {
                None => unsafe { dynamic(gpu, c, &alpha, ptrs(&mut out)) },
                Some(p) => unsafe { execute(gpu, p, c, &alpha, ptrs(&mut out)) },
            };
            assert_eq!(status, OK, "{what}: {}", last_error());
            // AUTO with a plan of the CUDA handle may take its dense tiles, which the CPU backend
            // does not have; otherwise both choose alike.
            let gpu_alg = match c.takes_dense_tiles::<T>() {
                Some(true) if *alg == SddmmAlgorithm::Auto && way == "GPU plan" => SddmmAlgorithm::Tiled as i32,
                Some(_) => cpu_alg,
                None => panic!("{what}: a shape for which AUTO's choice on the GPU is not predicted"),
            };
            assert_eq!(last_algorithm(gpu), gpu_alg, "{what}: algorithm");
            check(&what, &out, &want, &scale);
            let cpu_vals: Vec<f64> = cpu_out.iter().map(|v| v.to_f64()).collect();
            check(&format!("{what} vs CPU"), &out, &cpu_vals, &scale);
        }
    }
    unsafe {
        sddmmDestroyPlan(gpu_plan);
        sddmmDestroyPlan(cpu_plan);
        sddmmDestroy(gpu);
        sddmmDestroy(cpu);
    }
}

fn shapes_for<T: Element>(label: &str, shapes: &[(usize, usize, usize, f64)]) {
    let mut rng = Rng::fresh(label);
    for (idx, &(m, n, k, density)) in shapes.iter().enumerate() {
        let layout = if idx % 2 == 0 { Layout::RowMajor } else { Layout::ColMajor };
        let base = if idx % 3 == 0 { IndexBase::One } else { IndexBase::Zero };
        let c = Case::new(&mut rng, m, n, k, density, layout, base);
        all_ways::<T>(&mut rng, &c, idx % 4 != 1);
        let other = if layout == Layout::RowMajor { Layout::ColMajor } else { Layout::RowMajor };
        let c = Case::new(&mut rng, m, n, k, density, other, base);
        all_ways::<T>(&mut rng, &c, idx % 4 == 1);
    }
}

/// Shapes with 0 and 1, sizes that are not multiples of a band (64 rows on the CPU, 256 on the
/// GPU), a 64-column tile or a K slice, K below / at / above a vector and a slice, densities from
/// 1e-5 to dense, and one whose bands span several thread blocks of the GPU's tiled algorithm.
const SHAPES: &[(usize, usize, usize, f64)] = &[
    (0, 5, 3, 0.5),
    (5, 0, 3, 0.5),
    (1, 1, 1, 1.0),
    (3, 7, 0, 1.0),
    (65, 130, 33, 1.0),
    (129, 67, 7, 0.3),
    (200, 300, 64, 0.05),
    (64, 64, 32, 1.0),
    (300, 500, 128, 0.01),
    (1000, 1000, 16, 1e-3),
    (2000, 3000, 5, 1e-4),
    (5000, 4000, 40, 1e-5),
    (1, 5000, 129, 0.2),
    (700, 2, 31, 0.9),
    (1500, 800, 200, 0.05),
];

#[test]
fn f32_every_algorithm_matches_cpu_and_reference() {
    if !common::cuda_available("f32_every_algorithm_matches_cpu_and_reference") {
        return;
    }
    shapes_for::<f32>("sddmm gpu f32", SHAPES);
}

#[test]
fn f64_every_algorithm_matches_cpu_and_reference() {
    if !common::cuda_available("f64_every_algorithm_matches_cpu_and_reference") {
        return;
    }
    shapes_for::<f64>("sddmm gpu f64", SHAPES);
}

#[test]
fn f16_every_algorithm_matches_cpu_and_reference() {
    if !common::cuda_available("f16_every_algorithm_matches_cpu_and_reference") {
        return;
    }
    shapes_for::<f16>("sddmm gpu f16", SHAPES);
}

#[test]
fn bf16_every_algorithm_matches_cpu_and_reference() {
    if !common::cuda_available("bf16_every_algorithm_matches_cpu_and_reference") {
        return;
    }
    shapes_for::<bf16>("sddmm gpu bf16", SHAPES);
}

/// Shapes for the tensor-core tiles (K a multiple of 8): sizes that are not multiples of a 128 × 128
/// tile, several tiles each way, K below / at / above a 32-element stage, K = 0, one row, two
/// columns, densities from 1e-2 to dense (AUTO takes the tiles where they are full enough, the
/// forced tiled algorithm wherever the plan has them).
const TENSOR_TILE_SHAPES: &[(usize, usize, usize, f64)] = &[
    (200, 300, 64, 0.2),
    (300, 500, 128, 0.2),
    (129, 67, 8, 0.5),
    (1500, 800, 200, 0.05),
    (1500, 900, 64, 0.15),
    (65, 130, 40, 1.0),
    (1000, 1000, 16, 0.012),
    (1, 5000, 136, 0.2),
    (700, 2, 32, 0.9),
    (100, 200, 0, 0.5),
    (400, 300, 24, 0.2),
    // Large enough for AUTO to take the tiles (COO above the tiles' least time in the cost model).
    (1024, 1024, 128, 0.5),
];

/// The f16 / bf16 tiled algorithm on tensor cores through a plan made on the CUDA handle, chosen by
/// AUTO and forced, S with and without values, both index bases, padded leading dimensions, every
/// tile holding entries or a band whose tiles away from the diagonal hold none: every
/// entry against the f64 reference, out poisoned first. A leading dimension that is not a multiple
/// of 8 keeps AUTO on COO (and the forced tiled algorithm on its other kernel).
fn tensor_tiles_for<T: Element>(label: &str) {
    let mut rng = Rng::fresh(label);
    let gpu = handle(BackendKind::Cuda);
    let shapes = TENSOR_TILE_SHAPES.len();
    for idx in 0..shapes + 1 {
        let base = if idx % 2 == 0 { IndexBase::One } else { IndexBase::Zero };
        let pad = if idx == 3 { 1 } else { 8 * rng.below(2) };
        // The band leaves tiles without entries: the kernel then reads a list of the others.
        let c = match TENSOR_TILE_SHAPES.get(idx) {
            Some(&shape) => Case::sorted(&mut rng, shape, base, pad),
            None => Case::band(1000, 20, 16, base, pad),
        };
        let auto_tiled = c.takes_dense_tiles::<T>().unwrap_or_else(|| panic!("{}: fill not clear-cut", c.label));
        through_a_gpu_plan::<T>(&mut rng, gpu, &c, idx % 3 != 0, auto_tiled);
    }
    unsafe { sddmmDestroy(gpu) };
}

/// `c` through a plan made on the CUDA handle `gpu`, with AUTO (which must take TILED where
/// `auto_tiled`, COO elsewhere) and with TILED forced, S with or without values: every entry against
/// the f64 reference, out poisoned first.
fn through_a_gpu_plan<T: Element>(rng: &mut Rng, gpu: sddmmHandle_t, c: &Case, with_values: bool, auto_tiled: bool) {
    through_a_gpu_plan_with::<T>(rng, gpu, c, with_values, Some(auto_tiled))
}

/// [`through_a_gpu_plan`]; with `auto_tiled` None, TILED only.
fn through_a_gpu_plan_with<T: Element>(
    rng: &mut Rng,
    gpu: sddmmHandle_t,
    c: &Case,
    with_values: bool,
    auto_tiled: Option<bool>,
) {
    let a: Vec<T> = rng.vec(c.len(c.m, c.lda));
    let b: Vec<T> = rng.vec(c.len(c.n, c.ldb));
    let s: Vec<T> = if with_values { rng.vec(c.nnz()) } else { Vec::new() };
    let alpha = T::from_f64(rng.range(-2.0, 2.0)).to_compute();
    let (want, scale) = c.reference(alpha.to_f64(), &a, &b, with_values.then_some(&s[..]));
    let plan = unsafe { create_plan(gpu, c, c.row_ptr.as_ptr(), c.col_ind.as_ptr()) };
    let algorithms = if auto_tiled.is_some() {
        &[SddmmAlgorithm::Auto, SddmmAlgorithm::Tiled][..]
    } else {
        &[SddmmAlgorithm::Tiled]
    };
    for &alg in algorithms {
        assert_eq!(unsafe { sddmmSetAlgorithm(gpu, alg as i32) }, OK);
        let what = format!("{} {:?} {alg:?} values={with_values}", c.label, T::VALUE_TYPE);
        let mut out = vec![T::from_f64(POISON); c.nnz()];
        let ptrs = Ptrs {
            a: a.as_ptr(),
            b: b.as_ptr(),
            s: if with_values { s.as_ptr() } else { std::ptr::null() },
            row_ptr: c.row_ptr.as_ptr(),
            col_ind: c.col_ind.as_ptr(),
            out: out.as_mut_ptr(),
        };
        assert_eq!(unsafe { execute(gpu, plan, c, &alpha, ptrs) }, OK, "{what}: {}", last_error());
        let tiled = alg == SddmmAlgorithm::Tiled || auto_tiled == Some(true);
        let expected = if tiled { SddmmAlgorithm::Tiled } else { SddmmAlgorithm::Coo };
        assert_eq!(last_algorithm(gpu), expected as i32, "{what}: algorithm");
        check(&what, &out, &want, &scale);
    }
    unsafe { sddmmDestroyPlan(plan) };
}

#[test]
fn f16_tensor_core_tiles_match_the_reference() {
    if !common::cuda_available("f16_tensor_core_tiles_match_the_reference") {
        return;
    }
    tensor_tiles_for::<f16>("sddmm gpu f16 tensor tiles");
}

#[test]
fn bf16_tensor_core_tiles_match_the_reference() {
    if !common::cuda_available("bf16_tensor_core_tiles_match_the_reference") {
        return;
    }
    tensor_tiles_for::<bf16>("sddmm gpu bf16 tensor tiles");
}

/// Shapes for f32's tensor-core tiles in the TF32 math modes, which the tiled algorithm, forced, runs
/// wherever the plan has them: rows sorted by column, at least as many entries as rows × (column
/// tiles of 128 + 1), K a multiple of 4 (16-byte rows) below, at and above a stage of 16 floats and
/// not a multiple of it, sizes that are not multiples of a 128 × 128 tile, one row.
const TF32_TILE_SHAPES: &[(usize, usize, usize, f64)] = &[
    (200, 300, 64, 0.1),
    (300, 500, 128, 0.08),
    (129, 67, 4, 0.12),
    (1500, 800, 200, 0.05),
    (65, 130, 20, 0.1),
    (1000, 1000, 16, 0.012),
    (1, 5000, 136, 0.05),
    (1024, 1024, 128, 0.1),
];

/// f32 in a TF32 math mode through a plan made on the CUDA handle, S with and without values, both
/// index bases, leading dimensions K or K + 4, out poisoned first. TILED (the tensor-core tiles):
/// every entry within FP32's rounding of the sum of the mode's products, as the CPU backend's
/// result in the mode; in TF32 other than the default mode's result on the same tiles' shapes. AUTO,
/// which takes the tiles or an exact kernel: every entry within FP32's rounding of one or the other.
/// sddmmDynamic (no plan, so exact kernels): within FP32's rounding of the exact result.
fn tf32_tiles_for(math: SddmmMathMode, label: &str) {
    let mut rng = Rng::fresh(label);
    let (gpu, cpu) = (handle(BackendKind::Cuda), handle(BackendKind::Cpu));
    for h in [gpu, cpu] {
        assert_eq!(unsafe { sddmmSetMathMode(h, math as i32) }, OK);
    }
    for (idx, &shape) in TF32_TILE_SHAPES.iter().enumerate() {
        let base = if idx % 2 == 0 { IndexBase::One } else { IndexBase::Zero };
        let pad = 4 * rng.below(2);
        let c = Case::sorted(&mut rng, shape, base, pad);
        let with_values = idx % 3 != 0;
        let a: Vec<f32> = rng.vec(c.len(c.m, c.lda));
        let b: Vec<f32> = rng.vec(c.len(c.n, c.ldb));
        let s: Vec<f32> = if with_values { rng.vec(c.nnz()) } else { Vec::new() };
        let alpha = rng.range(-2.0, 2.0) as f32;
        let s_opt = with_values.then_some(&s[..]);
        let (want, scale) = c.reference_in(math, alpha as f64, &a, &b, s_opt);
        let (exact, exact_scale) = c.reference(alpha as f64, &a, &b, s_opt);
        let run = |h: sddmmHandle_t, plan: Option<sddmmPlan_t>, alg: SddmmAlgorithm| {
            assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK);
            let mut out = vec![POISON as f32; c.nnz()];
            let ptrs = Ptrs {
                a: a.as_ptr(),
                b: b.as_ptr(),
                s: if with_values { s.as_ptr() } else { std::ptr::null() },
                row_ptr: c.row_ptr.as_ptr(),
                col_ind: c.col_ind.as_ptr(),
                out: out.as_mut_ptr(),
            };
            let status = match plan {
                Some(p) => unsafe { execute(h, p, &c, &alpha, ptrs) },
                None => unsafe { dynamic(h, &c, &alpha, ptrs) },
            };
            assert_eq!(status, OK, "{} {math:?} {alg:?}: {}", c.label, last_error());
            out
        };
        let plan = unsafe { create_plan(gpu, &c, c.row_ptr.as_ptr(), c.col_ind.as_ptr()) };
        let what = format!("{} {math:?} values={with_values}", c.label);
        let tiled = run(gpu, Some(plan), SddmmAlgorithm::Tiled);
        check(&format!("{what} TILED"), &tiled, &want, &scale);
        let on_cpu: Vec<f64> = run(cpu, None, SddmmAlgorithm::Coo).iter().map(|&v| v as f64).collect();
        check(&format!("{what} TILED vs CPU"), &tiled, &on_cpu, &scale);
        if math == SddmmMathMode::Tf32 && alpha != 0.0 {
            assert_eq!(unsafe { sddmmSetMathMode(gpu, SddmmMathMode::Default as i32) }, OK);
            let default = run(gpu, Some(plan), SddmmAlgorithm::Tiled);
            assert_eq!(unsafe { sddmmSetMathMode(gpu, math as i32) }, OK);
            assert!(tiled.iter().zip(&default).any(|(x, y)| x != y), "{what}: TF32 gave the default mode's result");
        }
        let auto = run(gpu, Some(plan), SddmmAlgorithm::Auto);
        for e in 0..c.nnz() {
            let (g, tol) = (auto[e] as f64, 3e-5 * scale[e]);
            assert!(
                (g - want[e]).abs() <= tol || (g - exact[e]).abs() <= tol,
                "{what} AUTO: entry {e}: got {g}, the mode's {}, exact {}",
                want[e],
                exact[e]
            );
        }
        check(&format!("{what} dynamic"), &run(gpu, None, SddmmAlgorithm::Auto), &exact, &exact_scale);
        unsafe { sddmmDestroyPlan(plan) };
    }
    unsafe {
        sddmmDestroy(gpu);
        sddmmDestroy(cpu);
    }
}

#[test]
fn f32_tf32_tensor_core_tiles_match_the_modes_products() {
    if !common::cuda_available("f32_tf32_tensor_core_tiles_match_the_modes_products") {
        return;
    }
    tf32_tiles_for(SddmmMathMode::Tf32, "sddmm gpu f32 tf32 tiles");
}

#[test]
fn f32_3xtf32_tensor_core_tiles_match_the_modes_products() {
    if !common::cuda_available("f32_3xtf32_tensor_core_tiles_match_the_modes_products") {
        return;
    }
    tf32_tiles_for(SddmmMathMode::Tf32x3, "sddmm gpu f32 3xtf32 tiles");
}

/// NaN and ∞ in A through the TF32 modes' tensor-core tiles (a plan on the CUDA handle, TILED
/// forced): a row of A holding CUDA's NaN (0x7fffffff, which rounding to TF32 on the bits would
/// turn into -0) gives NaN in every entry of its row; a row holding +∞ gives +∞ in TF32 (B positive)
/// and NaN in 3xTF32 (∞'s small part is ∞ − ∞), as on the CPU backend; the other rows stay finite.
#[test]
fn tf32_tiles_keep_nan_and_infinity() {
    if !common::cuda_available("tf32_tiles_keep_nan_and_infinity") {
        return;
    }
    let mut c = Case::of_rows((3, 5, 8), IndexBase::Zero, 0, |_| 0..5);
    c.label = "3x5 dense, k 8".into();
    let mut a = [0.5f32; 24];
    let b = [0.25f32; 40];
    a[3] = f32::from_bits(0x7fff_ffff);
    a[8 + 5] = f32::INFINITY;
    let gpu = handle(BackendKind::Cuda);
    let plan = unsafe { create_plan(gpu, &c, c.row_ptr.as_ptr(), c.col_ind.as_ptr()) };
    assert_eq!(unsafe { sddmmSetAlgorithm(gpu, SddmmAlgorithm::Tiled as i32) }, OK);
    for (math, infinite_row) in [(SddmmMathMode::Tf32, f32::INFINITY), (SddmmMathMode::Tf32x3, f32::NAN)] {
        assert_eq!(unsafe { sddmmSetMathMode(gpu, math as i32) }, OK);
        let mut out = vec![POISON as f32; 15];
        let ptrs = Ptrs {
            a: a.as_ptr(),
            b: b.as_ptr(),
            s: std::ptr::null(),
            row_ptr: c.row_ptr.as_ptr(),
            col_ind: c.col_ind.as_ptr(),
            out: out.as_mut_ptr(),
        };
        assert_eq!(unsafe { execute(gpu, plan, &c, &1.0f32, ptrs) }, OK, "{}", last_error());
        let rows: Vec<&[f32]> = out.chunks(5).collect();
        assert!(rows[0].iter().all(|v| v.is_nan()), "{math:?}: {:?}", rows[0]);
        let inf_ok = |v: &f32| if infinite_row.is_nan() { v.is_nan() } else { *v == infinite_row };
        assert!(rows[1].iter().all(inf_ok), "{math:?}: {:?}", rows[1]);
        assert!(rows[2].iter().all(|v| *v == 1.0), "{math:?}: {:?}", rows[2]);
    }
    unsafe {
        sddmmDestroyPlan(plan);
        sddmmDestroy(gpu);
    }
}

/// The panel kernel's cases, every one of which AUTO takes to the panels in f32 and f16 / bf16:
/// rows long and even in 4000 rows or more, K from 64 on, rows of many entries a panel, several
/// panels and a narrower last one, K not a multiple of a group's vectors (200: the last lanes'
/// vectors past K), a panel of one column tile (f32 and f64 at K = 256 and 128). f64 takes them on
/// the first and the last; at K = 128 on the second its panels of one column tile hold 8 entries
/// of a row (AUTO takes the row-warp kernel), and at K = 200 and 256 it has no panel kernel (its row
/// of A would be 13-16 vectors a lane).
const PANEL_SHAPES: &[(usize, usize, usize, f64)] = &[
    (4000, 2000, 64, 0.1),
    (4100, 3000, 128, 0.06),
    (4000, 1029, 200, 0.2),
    (4000, 1500, 256, 0.2),
    (4000, 1000, 128, 0.2),
];

/// Whether the plan of `c` has the column tiles' row starts and the panel kernel applies to a call
/// of element type T: rows sorted by column without repeats, at least as many entries as rows ×
/// (column tiles of 128 + 1), K of 64 or more, A and B row-major with K and the leading dimensions
/// multiples of 16 bytes, and A's row in registers (8 vectors a lane at most, 4 in f16 / bf16).
fn panels_apply<T: Element>(c: &Case) -> bool {
    let size = std::mem::size_of::<T>();
    let offset = c.base.offset() as usize;
    let sorted = (0..c.m).all(|i| {
        c.col_ind[c.row_ptr[i] as usize - offset..c.row_ptr[i + 1] as usize - offset].windows(2).all(|w| w[0] < w[1])
    });
    c.layout == Layout::RowMajor
        && c.k >= 64
        && [c.k, c.lda, c.ldb].iter().all(|d| (d * size).is_multiple_of(16))
        && sorted
        && c.m * (c.n.div_ceil(128) + 1) <= c.nnz()
        && row_in_registers::<T>(c.k)
}

/// Whether AUTO takes the panel kernel (`panels_pay` in src/backend/cuda/sddmm.rs) on a GPU whose
/// blocks may have 227 KiB of shared memory (an H100 or H200): where it applies, the row-warp kernel
/// would take the call and a row holds at least 16 entries a panel (panels of as many column tiles
/// of 128 as the shared memory holds, split evenly), every 128 × 128 tile at most twice the mean;
/// `None` within 25 % of the 16 entries.
fn panels_take<T: Element>(c: &Case) -> Option<bool> {
    if !(panels_apply::<T>(c) && row_warps_take::<T>(c)) {
        return Some(false);
    }
    let column_tiles = c.n.div_ceil(128);
    let most = 232_448 / (128 * c.k * std::mem::size_of::<T>());
    let panel_tiles = column_tiles.div_ceil(column_tiles.div_ceil(most));
    let a_row_panel = c.nnz() as f64 * (panel_tiles * 128).min(c.n) as f64 / (c.m * c.n) as f64;
    let offset = c.base.offset() as usize;
    let mut tiles = std::collections::HashMap::new();
    for i in 0..c.m {
        for &j in &c.col_ind[c.row_ptr[i] as usize - offset..c.row_ptr[i + 1] as usize - offset] {
            *tiles.entry((i / 128, (j as usize - offset) / 128)).or_insert(0usize) += 1;
        }
    }
    let busiest = tiles.values().copied().max().unwrap_or(0);
    if busiest * c.m.div_ceil(128) * column_tiles > 2 * c.nnz() {
        return Some(false);
    }
    if a_row_panel >= 1.25 * 16.0 {
        Some(true)
    } else if a_row_panel < 0.8 * 16.0 {
        Some(false)
    } else {
        None
    }
}

/// The panel kernel through a plan made on the CUDA handle, on [`PANEL_SHAPES`]: AUTO and the tiled
/// algorithm forced, both of which take the panels where AUTO's rule says so (and on f64's second
/// shape AUTO takes the row-warp kernel), both index bases, leading dimensions K or K plus 16 bytes,
/// S with and without values, a run of rows without entries: every entry against the f64
/// reference, out poisoned first.
fn panels_for<T: Element>(label: &str) {
    let mut rng = Rng::fresh(label);
    let gpu = handle(BackendKind::Cuda);
    let chunk = 16 / std::mem::size_of::<T>();
    for (idx, &shape) in PANEL_SHAPES.iter().enumerate() {
        let base = if idx % 2 == 0 { IndexBase::One } else { IndexBase::Zero };
        let pad = chunk * rng.below(2);
        let mut c = Case::sorted(&mut rng, shape, base, pad);
        if idx == 0 {
            c.clear_rows(100..140);
        }
        let f64_without = T::VALUE_TYPE == ValueType::F64 && [1, 2, 3].contains(&idx);
        let auto = panels_take::<T>(&c).unwrap_or_else(|| panic!("{}: panels not clear-cut", c.label));
        assert_eq!(auto, !f64_without, "{}: AUTO's panels", c.label);
        // f64 at K = 200 and 256: which tiled kernel AUTO and TILED take is not the panels' concern.
        let checked_auto = (auto || idx == 1).then_some(auto);
        through_a_gpu_plan_with::<T>(&mut rng, gpu, &c, idx % 3 != 0, checked_auto);
    }
    unsafe { sddmmDestroy(gpu) };
}

#[test]
fn f32_panels_match_the_reference() {
    if !common::cuda_available("f32_panels_match_the_reference") {
        return;
    }
    panels_for::<f32>("sddmm gpu f32 panels");
}

#[test]
fn f64_panels_match_the_reference() {
    if !common::cuda_available("f64_panels_match_the_reference") {
        return;
    }
    panels_for::<f64>("sddmm gpu f64 panels");
}

#[test]
fn f16_panels_match_the_reference() {
    if !common::cuda_available("f16_panels_match_the_reference") {
        return;
    }
    panels_for::<f16>("sddmm gpu f16 panels");
}

#[test]
fn bf16_panels_match_the_reference() {
    if !common::cuda_available("bf16_panels_match_the_reference") {
        return;
    }
    panels_for::<bf16>("sddmm gpu bf16 panels");
}

/// The tiled algorithm's band kernels through a plan made on the CUDA handle: patterns of short rows
/// whose bands of 64 rows outnumber the multiprocessors, so that AUTO takes the band kernels where
/// the band's rows of A fit a third of a block's shared memory (K = 64; K = 7, but for f16 / bf16,
/// whose rows of 7 entries below K = 64 it leaves to COO; K = 300 in f16 / bf16, under 40 KiB) and
/// the COO kernel where they do not (K = 300 in f32 / f64: over 75 KiB, above a third of the 227
/// KiB an H100 or H200 block may have); and a pattern of rows of 140 entries at K = 128, whose
/// bands are cut into short slices (AUTO takes them for f32 and f64; for f16 / bf16 such rows are
/// too long); forced, the tiled algorithm for every type (unsorted rows: no tensor-core tiles;
/// f32 / f64 at K = 300 on the COO kernel in band order).
/// Row- and column-major, padded leading dimensions, both index bases, S with and without values,
/// a row count that is not a multiple of a band, two bands without entries: every entry against
/// the f64 reference, out poisoned first.
fn band_kernels_for<T: Element>(label: &str) {
    let mut rng = Rng::fresh(label);
    let gpu = handle(BackendKind::Cuda);
    let shapes =
        [(20_001, 3000, 64, 0.003), (16_500, 700, 7, 0.01), (12_000, 2000, 300, 0.004), (16_000, 2000, 128, 0.07)];
    for (idx, &(m, n, k, density)) in shapes.iter().enumerate() {
        let layout = if idx == 1 { Layout::ColMajor } else { Layout::RowMajor };
        let base = if idx % 2 == 0 { IndexBase::One } else { IndexBase::Zero };
        let mut c = Case::new(&mut rng, m, n, k, density, layout, base);
        // Rows 64 to 191, the second and third bands, without entries.
        let (start, end) = (c.row_ptr[64], c.row_ptr[192]);
        let offset = base.offset() as i32;
        c.col_ind.drain((start - offset) as usize..(end - offset) as usize);
        c.row_ptr[65..=192].iter_mut().for_each(|p| *p = start);
        c.row_ptr[193..].iter_mut().for_each(|p| *p -= end - start);
        // Below K = 64 rows of at most 8 entries on average (K = 7) take them in f32 / f64 only; the
        // rows of 140 go to the row-warp kernel instead where they lie in whole 16-byte chunks.
        let auto_band = match T::VALUE_TYPE {
            ValueType::F32 => k != 300,
            ValueType::F64 => k != 300 && (k >= 64 || c.nnz() <= 8 * m),
            ValueType::F16 | ValueType::Bf16 => c.nnz() <= 128 * m && (k >= 64 || c.nnz() > 8 * m),
        } && !row_warps_take::<T>(&c);
        through_a_gpu_plan::<T>(&mut rng, gpu, &c, idx != 1, auto_band);
    }
    unsafe { sddmmDestroy(gpu) };
}

#[test]
fn f32_band_kernels_match_the_reference() {
    if !common::cuda_available("f32_band_kernels_match_the_reference") {
        return;
    }
    band_kernels_for::<f32>("sddmm gpu f32 band kernels");
}

#[test]
fn f64_band_kernels_match_the_reference() {
    if !common::cuda_available("f64_band_kernels_match_the_reference") {
        return;
    }
    band_kernels_for::<f64>("sddmm gpu f64 band kernels");
}

#[test]
fn f16_band_kernels_match_the_reference() {
    if !common::cuda_available("f16_band_kernels_match_the_reference") {
        return;
    }
    band_kernels_for::<f16>("sddmm gpu f16 band kernels");
}

#[test]
fn bf16_band_kernels_match_the_reference() {
    if !common::cuda_available("bf16_band_kernels_match_the_reference") {
        return;
    }
    band_kernels_for::<bf16>("sddmm gpu bf16 band kernels");
}

/// Whether a plan's COO calls on `c` take the row-warp kernel (a warp a row, A's row in registers):
/// rows of at least 32 entries on average and none more than twice that, row-major operands whose
/// K and leading dimensions are multiples of 16 bytes, A's row in at most 8 vectors of 16 bytes a
/// lane of a group of 8 (4 in f16 / bf16), and 16 rows a multiprocessor (the cases here that should
/// take it have 4000 rows or more: every GPU of up to 250 multiprocessors).
fn row_warps_take<T: Element>(c: &Case) -> bool {
    let size = std::mem::size_of::<T>();
    let mean = c.nnz() / c.m.max(1);
    let longest = c.row_ptr.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0);
    c.layout == Layout::RowMajor
        && [c.k, c.lda, c.ldb].iter().all(|d| (d * size).is_multiple_of(16))
        && mean >= 32
        && longest <= 2 * mean
        && c.m >= 4000
        && row_in_registers::<T>(c.k)
}

/// Whether a row of A of k elements fits the registers of a group of lanes as the row-warp and panel
/// kernels hold it: 8 vectors of 16 bytes a lane at most (4 in f16 / bf16) in groups of 8 lanes (4
/// where the row is at most four vectors).
fn row_in_registers<T: Element>(k: usize) -> bool {
    let size = std::mem::size_of::<T>();
    let vectors = (k * size).div_ceil(16);
    let per_lane = vectors.div_ceil(if vectors <= 4 { 4 } else { 8 }).next_power_of_two();
    per_lane <= if size == 2 { 4 } else { 8 }
}

/// The row-warp kernel through a plan made on the CUDA handle (AUTO takes it; the tiled algorithm
/// forced, its band kernels or COO kernel in band order): rows of 45-150 entries in 4000-4500 rows,
/// K of one vector or less (four lanes a group), of one vector a lane, of several and not a
/// multiple of a group's vectors (K = 200: the last lanes' vectors past K), leading dimensions K or
/// K plus 8, both index bases, a run of rows without entries, S with and without values: every
/// entry against the f64 reference, out poisoned first; and each by sddmmDynamic from host memory
/// (GPU-Dynamic's row-warp kernels), with patterns of rows far longer than the mean
/// ([`Case::four_long_rows`], [`Case::many_long_rows`]). f64 at K = 200 (13 vectors a lane, beyond
/// the kernels' 8) stays on the COO kernel.
fn row_warps_for<T: Element>(label: &str) {
    let mut rng = Rng::fresh(label);
    let gpu = handle(BackendKind::Cuda);
    let shapes = [(4000, 300, 32, 0.15), (4200, 1000, 200, 0.05), (4100, 500, 8, 0.1), (4500, 600, 64, 0.25)];
    for (idx, &(m, n, k, density)) in shapes.iter().enumerate() {
        let base = if idx % 2 == 0 { IndexBase::One } else { IndexBase::Zero };
        let pad = 8 * rng.below(2);
        let mut c = Case::arranged(&mut rng, (m, n, k, density), Layout::RowMajor, base, true, pad);
        if idx == 3 {
            c.clear_rows(100..140);
        }
        let expected = !(T::VALUE_TYPE == ValueType::F64 && k == 200);
        assert_eq!(row_warps_take::<T>(&c), expected, "{}: the row-warp kernel's shape", c.label);
        through_a_gpu_plan::<T>(&mut rng, gpu, &c, idx != 1, false);
        dynamic_from_the_host::<T>(&mut rng, gpu, &c);
    }
    // Without a plan: rows more than twice the mean, which the second of GPU-Dynamic's row-warp
    // kernels shares among all its warps.
    dynamic_from_the_host::<T>(&mut rng, gpu, &Case::four_long_rows(IndexBase::One, 8));
    dynamic_from_the_host::<T>(&mut rng, gpu, &Case::many_long_rows(IndexBase::Zero));
    unsafe { sddmmDestroy(gpu) };
}

/// `c` by sddmmDynamic on the CUDA handle `gpu` with the pattern, A, B and out in host memory (the
/// pattern validated on the host), COO forced and AUTO: every entry against the f64 reference, out
/// poisoned first.
fn dynamic_from_the_host<T: Element>(rng: &mut Rng, gpu: sddmmHandle_t, c: &Case) {
    let data = Data::<T>::new(rng, c);
    let (want, scale) = data.reference(c);
    for alg in [SddmmAlgorithm::Coo, SddmmAlgorithm::Auto] {
        assert_eq!(unsafe { sddmmSetAlgorithm(gpu, alg as i32) }, OK);
        let what = format!("{} {:?} {alg:?} sddmmDynamic", c.label, T::VALUE_TYPE);
        let mut out = vec![T::from_f64(POISON); c.nnz()];
        assert_eq!(
            unsafe { dynamic(gpu, c, &data.alpha, data.host_ptrs(c, &mut out)) },
            OK,
            "{what}: {}",
            last_error()
        );
        assert_eq!(last_algorithm(gpu), SddmmAlgorithm::Coo as i32, "{what}: algorithm");
        check(&what, &out, &want, &scale);
    }
}

#[test]
fn f32_row_warps_match_the_reference() {
    if !common::cuda_available("f32_row_warps_match_the_reference") {
        return;
    }
    row_warps_for::<f32>("sddmm gpu f32 row warps");
}

#[test]
fn f64_row_warps_match_the_reference() {
    if !common::cuda_available("f64_row_warps_match_the_reference") {
        return;
    }
    row_warps_for::<f64>("sddmm gpu f64 row warps");
}

#[test]
fn f16_row_warps_match_the_reference() {
    if !common::cuda_available("f16_row_warps_match_the_reference") {
        return;
    }
    row_warps_for::<f16>("sddmm gpu f16 row warps");
}

#[test]
fn bf16_row_warps_match_the_reference() {
    if !common::cuda_available("bf16_row_warps_match_the_reference") {
        return;
    }
    row_warps_for::<bf16>("sddmm gpu bf16 row warps");
}

/// The tiled algorithm's block tiles (16 × 16 tiles of S computed densely on CUDA cores) through a
/// plan made on the CUDA handle, by AUTO and forced: patterns whose rows are sorted and whose tiles
/// hold 160 entries or more on average (bands, diagonal blocks, a dense matrix), where they pay from
/// K = 32 on; sizes that are not multiples of a tile, rows past the last column, K below, at and
/// above a stage of 128 bytes and not a multiple of it, padded leading dimensions (multiples of 16
/// bytes), both index bases, S with and without values: every entry against the f64 reference, out
/// poisoned first. For f16 / bf16 the tensor-core tiles come first where they pay (the bands, the
/// dense matrix); blocks scattered so that each 128 × 128 tile holding one is 1.6 % full leave the
/// 16 × 16 tiles to them.
fn block_tiles_for<T: Element>(label: &str) {
    let mut rng = Rng::fresh(label);
    let gpu = handle(BackendKind::Cuda);
    // Leading dimensions padded by 16 bytes keep the rows' starts aligned.
    let pad = 16 / std::mem::size_of::<T>();
    let diagonal_blocks = |i: usize| (i / 16 * 16).min(200)..(i / 16 * 16 + 16).min(200);
    let scattered_blocks = |i: usize| (i / 16 * 37 % 64) * 16..(i / 16 * 37 % 64) * 16 + 16;
    let cases = [
        Case::band(1000, 40, 48, IndexBase::One, pad),
        Case::band(517, 30, 296, IndexBase::Zero, 0),
        Case::of_rows((300, 200, 40), IndexBase::Zero, pad, diagonal_blocks),
        Case::of_rows((33, 45, 64), IndexBase::One, 0, |_| 0..45),
        Case::of_rows((1024, 1024, 64), IndexBase::One, pad, scattered_blocks),
    ];
    for (idx, mut c) in cases.into_iter().enumerate() {
        if c.label.is_empty() {
            c.label = format!("{}x{} k={} {:?} lda={} ({} entries)", c.m, c.n, c.k, c.base, c.lda, c.nnz());
        }
        through_a_gpu_plan::<T>(&mut rng, gpu, &c, idx % 2 == 0, true);
    }
    unsafe { sddmmDestroy(gpu) };
}

#[test]
fn f32_block_tiles_match_the_reference() {
    if !common::cuda_available("f32_block_tiles_match_the_reference") {
        return;
    }
    block_tiles_for::<f32>("sddmm gpu f32 block tiles");
}

#[test]
fn f64_block_tiles_match_the_reference() {
    if !common::cuda_available("f64_block_tiles_match_the_reference") {
        return;
    }
    block_tiles_for::<f64>("sddmm gpu f64 block tiles");
}

#[test]
fn f16_block_tiles_match_the_reference() {
    if !common::cuda_available("f16_block_tiles_match_the_reference") {
        return;
    }
    block_tiles_for::<f16>("sddmm gpu f16 block tiles");
}

#[test]
fn bf16_block_tiles_match_the_reference() {
    if !common::cuda_available("bf16_block_tiles_match_the_reference") {
        return;
    }
    block_tiles_for::<bf16>("sddmm gpu bf16 block tiles");
}

/// Device pointers for every array (S's structure included), on a non-default stream, dynamic and
/// planned (the plan built from device arrays), against the CPU backend on the same data.
#[test]
fn device_pointers_on_a_non_default_stream() {
    if !common::cuda_available("device_pointers_on_a_non_default_stream") {
        return;
    }
    let mut rng = Rng::fresh("sddmm gpu device pointers");
    let device = cuda::device(0).unwrap();
    let stream = device.ctx.new_stream().unwrap();
    let raw = cuda::Stream(stream.cu_stream());
    for (density, alg) in [(0.2, SddmmAlgorithm::Tiled), (1e-3, SddmmAlgorithm::Coo), (0.02, SddmmAlgorithm::Auto)] {
        let c = Case::new(&mut rng, 333, 271, 36, density, Layout::RowMajor, IndexBase::One);
        let a: Vec<f32> = rng.vec(c.len(c.m, c.lda));
        let b: Vec<f32> = rng.vec(c.len(c.n, c.ldb));
        let s: Vec<f32> = rng.vec(c.nnz());
        let alpha = 0.75f32;
        let (want, scale) = c.reference(alpha as f64, &a, &b, Some(&s));
        let up = |bytes: &[u8], what| memory::DeviceBuffer::from_host(&device, bytes, raw, what).unwrap();
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let ints = |v: &[i32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let (da, db, ds) = (up(&bytes(&a), "A"), up(&bytes(&b), "B"), up(&bytes(&s), "S"));
        let (dr, dc) = (up(&ints(&c.row_ptr), "rowPtr"), up(&ints(&c.col_ind), "colInd"));
        let dout = up(&bytes(&vec![POISON as f32; c.nnz()]), "out");
        let ptrs = Ptrs {
            a: da.ptr() as *const f32,
            b: db.ptr() as *const f32,
            s: ds.ptr() as *const f32,
            row_ptr: dr.ptr() as *const i32,
            col_ind: dc.ptr() as *const i32,
            out: dout.ptr() as *mut f32,
        };
        let h = handle(BackendKind::Cuda);
        assert_eq!(unsafe { sddmmSetStream(h, stream.cu_stream() as *mut c_void) }, OK);
        assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK);
        let plan = unsafe { create_plan(h, &c, ptrs.row_ptr, ptrs.col_ind) };
        for way in ["dynamic", "plan"] {
            let status = if way == "dynamic" {
                unsafe { dynamic(h, &c, &alpha, ptrs) }
            } else {
                unsafe { execute(h, plan, &c, &alpha, ptrs) }
            };
            assert_eq!(status, OK, "{way}: {}", last_error());
            let mut got = vec![0f32; c.nnz()];
            dout.copy_to_host(&mut got).unwrap();
            check(&format!("device pointers {alg:?} {way} density {density}"), &got, &want, &scale);
            // AUTO at the default threshold (1) takes COO.
            let expected = if alg == SddmmAlgorithm::Auto { SddmmAlgorithm::Coo } else { alg };
            assert_eq!(last_algorithm(h), expected as i32);
            // Poison again so the plan's result is its own.
            let poison = bytes(&vec![POISON as f32; c.nnz()]);
            let fresh = up(&poison, "poison");
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(dout.ptr(), fresh.ptr(), poison.len(), raw.0).unwrap();
            }
        }
        unsafe {
            sddmmDestroyPlan(plan);
            sddmmDestroy(h);
        }
    }
}

/// A device allocation that fails gives ALLOCATION_FAILED and leaves the host output untouched.
#[test]
fn an_allocation_failure_is_reported_and_leaves_the_output_untouched() {
    if !common::cuda_available("an_allocation_failure_is_reported_and_leaves_the_output_untouched") {
        return;
    }
    let mut rng = Rng::fresh("sddmm gpu allocation failure");
    let c = Case::new(&mut rng, 100, 90, 20, 0.1, Layout::ColMajor, IndexBase::Zero);
    let a: Vec<f64> = rng.vec(c.len(c.m, c.lda));
    let b: Vec<f64> = rng.vec(c.len(c.n, c.ldb));
    let h = handle(BackendKind::Cuda);
    for alg in [SddmmAlgorithm::Tiled, SddmmAlgorithm::Coo] {
        assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK);
        {
            let mut out = vec![POISON; c.nnz()];
            let p = Ptrs {
                a: a.as_ptr(),
                b: b.as_ptr(),
                s: std::ptr::null(),
                row_ptr: c.row_ptr.as_ptr(),
                col_ind: c.col_ind.as_ptr(),
                out: out.as_mut_ptr(),
            };
            memory::inject_allocation_failures(1);
            let status = unsafe { dynamic(h, &c, &1.0f64, p) };
            memory::inject_allocation_failures(0);
            assert_eq!(status, Status::AllocationFailed as i32, "{alg:?}: {}", last_error());
            assert!(out.iter().all(|&v| v == POISON), "{alg:?}: output written after a failed allocation");
        }
    }
    unsafe { sddmmDestroy(h) };
}

/// Rough timings of both kernels at m = n = 16384, k = 128, f32, device pointers (printed; the
/// outputs are spot-checked against an f64 dot product so a wrong kernel still fails).
#[test]
fn timing_of_both_kernels_at_16384() {
    if !common::cuda_available("timing_of_both_kernels_at_16384") {
        return;
    }
    let mut rng = Rng::fresh("sddmm gpu timing");
    let device = cuda::device(0).unwrap();
    let stream = cuda::Stream::DEFAULT;
    let (m, k) = (16384usize, 128usize);
    let a: Vec<f32> = rng.vec(m * k);
    let b: Vec<f32> = rng.vec(m * k);
    let da = memory::DeviceBuffer::from_host(&device, &a, stream, "A").unwrap();
    let db = memory::DeviceBuffer::from_host(&device, &b, stream, "B").unwrap();
    for density in [1e-2, 1e-5] {
        let mut c = Case::new(&mut rng, m, m, k, density, Layout::RowMajor, IndexBase::Zero);
        (c.lda, c.ldb) = (k, k);
        let dr = memory::DeviceBuffer::from_host(&device, &c.row_ptr, stream, "rowPtr").unwrap();
        let dc = memory::DeviceBuffer::from_host(&device, &c.col_ind, stream, "colInd").unwrap();
        let dout = memory::DeviceBuffer::alloc(&device, c.nnz() * 4, stream, "out").unwrap();
        let p = Ptrs {
            a: da.ptr() as *const f32,
            b: db.ptr() as *const f32,
            s: std::ptr::null(),
            row_ptr: dr.ptr() as *const i32,
            col_ind: dc.ptr() as *const i32,
            out: dout.ptr() as *mut f32,
        };
        let h = handle(BackendKind::Cuda);
        let plan = unsafe { create_plan(h, &c, p.row_ptr, p.col_ind) };
        for alg in [SddmmAlgorithm::Tiled, SddmmAlgorithm::Coo] {
            assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK);
            for way in ["dynamic", "plan"] {
                let mut times = Vec::new();
                for _ in 0..6 {
                    let start = std::time::Instant::now();
                    let status = if way == "dynamic" {
                        unsafe { dynamic(h, &c, &1.0f32, p) }
                    } else {
                        unsafe { execute(h, plan, &c, &1.0f32, p) }
                    };
                    assert_eq!(status, OK, "{}", last_error());
                    device.synchronize(stream).unwrap();
                    times.push(start.elapsed().as_secs_f64() * 1e3);
                }
                times.remove(0);
                times.sort_by(f64::total_cmp);
                let mut got = vec![0f32; c.nnz()];
                dout.copy_to_host(&mut got).unwrap();
                for _ in 0..200 {
                    let e = rng.below(c.nnz());
                    let i = c.row_ptr.partition_point(|&r| r as usize <= e) - 1;
                    let j = c.col_ind[e] as usize;
                    let want: f64 = (0..k).map(|q| a[i * k + q] as f64 * b[j * k + q] as f64).sum();
                    let scale: f64 = (0..k).map(|q| (a[i * k + q] as f64 * b[j * k + q] as f64).abs()).sum();
                    assert!((got[e] as f64 - want).abs() <= 3e-5 * scale, "{alg:?} {way}: entry {e}");
                }
                eprintln!(
                    "TIMING sddmm f32 m=n={m} k={k} density={density} nnz={} {alg:?} {way}: median {:.3} ms (includes the call's own preprocessing when dynamic; host wall clock)",
                    c.nnz(),
                    times[times.len() / 2]
                );
            }
        }
        unsafe {
            sddmmDestroyPlan(plan);
            sddmmDestroy(h);
        }
    }
}

/// A case's arrays in device memory (uploaded on `stream`), `out` poisoned.
struct OnDevice<T> {
    row_ptr: memory::DeviceBuffer,
    col_ind: memory::DeviceBuffer,
    a: memory::DeviceBuffer,
    b: memory::DeviceBuffer,
    s: memory::DeviceBuffer,
    out: memory::DeviceBuffer,
    nnz: usize,
    element: std::marker::PhantomData<T>,
}

impl<T: Element> OnDevice<T> {
    fn new(device: &Arc<cuda::GpuDevice>, stream: cuda::Stream, c: &Case, data: &Data<T>) -> Self {
        let up = |bytes: &[u8], what| memory::DeviceBuffer::from_host(device, bytes, stream, what).unwrap();
        let on_device = OnDevice {
            row_ptr: up(as_bytes(&c.row_ptr), "rowPtr"),
            col_ind: up(as_bytes(&c.col_ind), "colInd"),
            a: up(as_bytes(&data.a), "A"),
            b: up(as_bytes(&data.b), "B"),
            s: up(as_bytes(&data.s), "sValues"),
            out: up(as_bytes(&vec![T::from_f64(POISON); c.nnz()]), "out"),
            nnz: c.nnz(),
            element: std::marker::PhantomData,
        };
        device.synchronize(stream).unwrap();
        on_device
    }

    fn ptrs(&self) -> Ptrs<T> {
        Ptrs {
            a: self.a.ptr() as *const T,
            b: self.b.ptr() as *const T,
            s: self.s.ptr() as *const T,
            row_ptr: self.row_ptr.ptr() as *const i32,
            col_ind: self.col_ind.ptr() as *const i32,
            out: self.out.ptr() as *mut T,
        }
    }

    /// Fills `out` with POISON again (queued on `stream`).
    fn poison(&self, device: &Arc<cuda::GpuDevice>, stream: cuda::Stream) {
        let poison = vec![T::from_f64(POISON); self.nnz];
        let fresh = memory::DeviceBuffer::from_host(device, &poison, stream, "poison").unwrap();
        if self.nnz > 0 {
            let bytes = std::mem::size_of_val(&poison[..]);
            unsafe { cudarc::driver::result::memcpy_dtod_async(self.out.ptr(), fresh.ptr(), bytes, stream.0) }.unwrap();
        }
        device.synchronize(stream).unwrap();
    }

    fn out(&self) -> Vec<T> {
        let mut got = vec![T::from_f64(0.0); self.nnz];
        self.out.copy_to_host(&mut got).unwrap();
        got
    }
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: the element types here (i32, f32, f64, f16, bf16) are plain bits without padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// Random A, B and S's values for a case, and α.
struct Data<T: Element> {
    a: Vec<T>,
    b: Vec<T>,
    s: Vec<T>,
    alpha: T::Compute,
}

impl<T: Element> Data<T> {
    fn new(rng: &mut Rng, c: &Case) -> Self {
        Data {
            a: rng.vec(c.len(c.m, c.lda)),
            b: rng.vec(c.len(c.n, c.ldb)),
            s: rng.vec(c.nnz()),
            alpha: T::from_f64(rng.range(-2.0, 2.0)).to_compute(),
        }
    }

    fn reference(&self, c: &Case) -> (Vec<f64>, Vec<f64>) {
        c.reference(self.alpha.to_f64(), &self.a, &self.b, Some(&self.s))
    }

    /// The host arrays as a caller passes them, writing to `out`.
    fn host_ptrs(&self, c: &Case, out: &mut [T]) -> Ptrs<T> {
        Ptrs {
            a: self.a.as_ptr(),
            b: self.b.as_ptr(),
            s: self.s.as_ptr(),
            row_ptr: c.row_ptr.as_ptr(),
            col_ind: c.col_ind.as_ptr(),
            out: out.as_mut_ptr(),
        }
    }
}

fn synchronize(h: sddmmHandle_t) -> i32 {
    unsafe { sddmmSynchronize(h) }
}

/// Valid patterns in device memory (validated on the device, never read to the host): every
/// output element equals the f64 reference, for both index bases, empty rows (long runs of them
/// among them), m = 0, nnz = 0, every algorithm, out in device and in host memory, and calls that
/// alternate between two streams of one handle (ordered by the handle's workspace event).
fn valid_device_patterns<T: Element>(label: &str) {
    let mut rng = Rng::fresh(label);
    let device = cuda::device(0).unwrap();
    let streams = [device.new_stream().unwrap(), device.new_stream().unwrap()];
    let h = handle(BackendKind::Cuda);
    let shapes: &[(usize, usize, usize, f64)] = &[
        (0, 5, 3, 0.5),
        (40, 30, 8, 0.0),
        (1, 1, 1, 1.0),
        (3, 7, 0, 1.0),
        (129, 67, 7, 0.3),
        (300, 500, 40, 0.01),
        (1000, 1000, 16, 1e-3),
        (700, 2, 31, 0.9),
        // Rows of hundreds of entries: the CSR kernels step from row to row.
        (64, 4000, 32, 0.2),
        // More rows than a thread block of the CSR kernels keeps row pointers for: its search for
        // its rows takes rounds.
        (5000, 300, 16, 0.02),
        (200_000, 8, 4, 5e-5),
    ];
    let mut cases = Vec::new();
    for &(m, n, k, density) in shapes {
        for base in [IndexBase::Zero, IndexBase::One] {
            let layout = if cases.len() % 2 == 0 { Layout::RowMajor } else { Layout::ColMajor };
            cases.push(Case::new(&mut rng, m, n, k, density, layout, base));
        }
    }
    cases.extend([IndexBase::Zero, IndexBase::One].map(|base| Case::clustered(200_000, 8, 8, 300, base)));
    cases.extend([IndexBase::Zero, IndexBase::One].map(|base| Case::spaced(2000, 600, 32, 4, base)));
    // Rows of 45 entries on average in 4000 rows, row-major (the row-warp kernels, a warp a row);
    // and rows of 40 among rows more than twice the mean (those shared by every warp of the second
    // kernel).
    for base in [IndexBase::Zero, IndexBase::One] {
        cases.push(Case::arranged(&mut rng, (4000, 300, 32, 0.15), Layout::RowMajor, base, true, 0));
        cases.push(Case::four_long_rows(base, 0));
    }
    cases.push(Case::many_long_rows(IndexBase::One));
    let mut turn = 0;
    for c in &cases {
        let data = Data::<T>::new(&mut rng, c);
        let (want, scale) = data.reference(c);
        let empty_rows = (0..c.m).filter(|&r| c.row_ptr[r] == c.row_ptr[r + 1]).count();
        for alg in SddmmAlgorithm::variants() {
            turn += 1;
            let stream = &streams[turn % 2];
            let raw = cuda::Stream(stream.cu_stream());
            assert_eq!(unsafe { sddmmSetStream(h, stream.cu_stream() as *mut c_void) }, OK);
            assert_eq!(unsafe { sddmmSetAlgorithm(h, *alg as i32) }, OK);
            let what = format!("{} {:?} {alg:?} ({empty_rows} empty rows)", c.label, T::VALUE_TYPE);
            let arrays = OnDevice::new(&device, raw, c, &data);
            let status = unsafe { dynamic(h, c, &data.alpha, arrays.ptrs()) };
            assert_eq!(status, OK, "{what}: {}", last_error());
            assert_eq!(synchronize(h), OK, "{what}: {}", last_error());
            check(&format!("{what}, out in device memory"), &arrays.out(), &want, &scale);

            // out in host memory: the call waits, and validates before it copies.
            let mut host_out = vec![T::from_f64(POISON); c.nnz()];
            let ptrs = Ptrs { out: host_out.as_mut_ptr(), ..arrays.ptrs() };
            let status = unsafe { dynamic(h, c, &data.alpha, ptrs) };
            assert_eq!(status, OK, "{what}: {}", last_error());
            check(&format!("{what}, out in host memory"), &host_out, &want, &scale);
        }
    }
    unsafe { sddmmDestroy(h) };
}

#[test]
fn f32_valid_device_patterns_match_the_reference() {
    if !common::cuda_available("f32_valid_device_patterns_match_the_reference") {
        return;
    }
    valid_device_patterns::<f32>("sddmm gpu device patterns f32");
}

#[test]
fn f64_valid_device_patterns_match_the_reference() {
    if !common::cuda_available("f64_valid_device_patterns_match_the_reference") {
        return;
    }
    valid_device_patterns::<f64>("sddmm gpu device patterns f64");
}

#[test]
fn bf16_valid_device_patterns_match_the_reference() {
    if !common::cuda_available("bf16_valid_device_patterns_match_the_reference") {
        return;
    }
    valid_device_patterns::<bf16>("sddmm gpu device patterns bf16");
}

/// One way of breaking a valid pattern, at positions the test knows.
struct Breakage {
    what: &'static str,
    /// Edits the case's rowPtr / colInd (in its index base).
    edit: Box<dyn Fn(&mut Case)>,
}

/// Ways of breaking a pattern with at least 300 rows and 100 entries: each kind of fault at a known
/// position, with a second fault of the same kind later (the first must be named), and values that
/// would send an unchecked kernel far out of bounds.
fn breakages() -> Vec<Breakage> {
    vec![
        Breakage { what: "rowPtr[0] is not the base", edit: Box::new(|c| c.row_ptr[0] += 1) },
        Breakage {
            what: "rowPtr[m] - base is not nnz",
            edit: Box::new(|c| {
                let m = c.m;
                c.row_ptr[m] += 3;
            }),
        },
        Breakage {
            what: "rowPtr decreases at 150 and at 250",
            edit: Box::new(|c| {
                c.row_ptr[150] = c.row_ptr[149] - 1;
                c.row_ptr[250] = c.row_ptr[249] - 2;
            }),
        },
        Breakage {
            what: "rowPtr leaves the entries far behind and ahead (decreasing first at 10)",
            edit: Box::new(|c| {
                c.row_ptr[10] = -1_000_000;
                c.row_ptr[11] = i32::MAX;
            }),
        },
        Breakage {
            what: "a column at n + base, then one below the base",
            edit: Box::new(|c| {
                let (nnz, n, base) = (c.nnz(), c.n as i32, c.base.offset() as i32);
                c.col_ind[nnz / 3] = n + base;
                c.col_ind[2 * nnz / 3] = base - 1;
            }),
        },
        Breakage {
            // Every column is out of range; kernels that read no row without columns must still
            // name the first.
            what: "no columns (n = 0) for the entries",
            edit: Box::new(|c| c.n = 0),
        },
        Breakage {
            what: "a column at i32::MIN, then one at i32::MAX",
            edit: Box::new(|c| {
                let nnz = c.nnz();
                c.col_ind[nnz / 2] = i32::MIN;
                c.col_ind[nnz - 1] = i32::MAX;
            }),
        },
    ]
}

/// The message the host validation gives for a case's pattern (passed in host memory), without the
/// function's name.
fn host_validation_message(c: &Case) -> String {
    let h = handle(BackendKind::Cpu);
    let (a, b) = (vec![0f32; c.len(c.m, c.lda)], vec![0f32; c.len(c.n, c.ldb)]);
    let mut out = vec![0f32; c.nnz()];
    let ptrs = Ptrs {
        a: a.as_ptr(),
        b: b.as_ptr(),
        s: std::ptr::null(),
        row_ptr: c.row_ptr.as_ptr(),
        col_ind: c.col_ind.as_ptr(),
        out: out.as_mut_ptr(),
    };
    let status = unsafe { dynamic(h, c, &1.0f32, ptrs) };
    assert_eq!(status, Status::InvalidSparseMatrix as i32, "{}: the host validation accepted it", c.label);
    let message = last_error();
    unsafe { sddmmDestroy(h) };
    message.strip_prefix("sddmmDynamic: ").unwrap_or_else(|| panic!("unexpected message '{message}'")).to_string()
}

fn all_nan<T: Element>(out: &[T]) -> bool {
    out.iter().all(|v| v.to_f64().is_nan())
}

const INVALID: i32 = Status::InvalidSparseMatrix as i32;

/// Every kind of bad pattern in device memory, each algorithm and index base: never a silent wrong
/// result. With out in device memory the call returns, out holds NaN, and sddmmSynchronize reports
/// the fault naming the position the host validation names (and the later invalid calls); the
/// handle's next compute call reports it too (doing nothing else), and so does the first call after
/// a change of backend. With out in host memory the call reports it itself, out untouched.
#[test]
fn bad_device_patterns_are_reported_naming_the_first_fault_and_out_holds_nan() {
    if !common::cuda_available("bad_device_patterns_are_reported_naming_the_first_fault_and_out_holds_nan") {
        return;
    }
    let mut rng = Rng::fresh("sddmm gpu bad device patterns");
    let device = cuda::device(0).unwrap();
    let stream = device.new_stream().unwrap();
    let raw = cuda::Stream(stream.cu_stream());
    let h = handle(BackendKind::Cuda);
    assert_eq!(unsafe { sddmmSetStream(h, stream.cu_stream() as *mut c_void) }, OK);
    // The second shape's rows (45 entries on average, 4000 of them, row-major) take the row-warp
    // kernels, which validate as the CSR kernels do.
    let shapes = [(333, 271, 20, 0.03), (4000, 300, 32, 0.15)];
    for (shape, base) in shapes.into_iter().flat_map(|s| [IndexBase::One, IndexBase::Zero].map(|b| (s, b))) {
        let pad = if shape.0 == 333 { rng.below(3) } else { 0 };
        let valid = Case::arranged(&mut rng, shape, Layout::RowMajor, base, true, pad);
        assert!(valid.nnz() >= 100 && (1..valid.m).all(|r| valid.row_ptr[r] > base.offset() as i32));
        let data = Data::<f32>::new(&mut rng, &valid);
        let (want, scale) = data.reference(&valid);
        let good = OnDevice::new(&device, raw, &valid, &data);
        for breakage in breakages() {
            let mut c = valid.clone();
            c.label = format!("{}, {}", valid.label, breakage.what);
            (breakage.edit)(&mut c);
            let fault = host_validation_message(&c);
            let bad = OnDevice::new(&device, raw, &c, &data);
            for alg in [SddmmAlgorithm::Tiled, SddmmAlgorithm::Coo] {
                let what = format!("{} {base:?} {alg:?}", breakage.what);
                assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK);

                // out in device memory: reported by sddmmSynchronize, out all NaN.
                bad.poison(&device, raw);
                assert_eq!(unsafe { dynamic(h, &c, &data.alpha, bad.ptrs()) }, OK, "{what}: {}", last_error());
                assert_eq!(synchronize(h), INVALID, "{what}: not reported");
                let message = last_error();
                assert!(
                    message.starts_with("sddmmSynchronize: an earlier call on this handle")
                        && message.contains(&format!("m = {}, n = {}, nnz = {}", c.m, c.n, c.nnz()))
                        && message.ends_with(&format!(": {fault}")),
                    "{what}: '{message}' should end with the host validation's '{fault}'"
                );
                assert!(all_nan(&bad.out()), "{what}: out does not hold NaN everywhere");
                assert_eq!(synchronize(h), OK, "{what}: reported twice: {}", last_error());

                // Two invalid calls, the first named once. The second either reports the first (its
                // validation had finished: the GPU may be that quick) and does nothing else, or runs;
                // then one report names the first and counts the other.
                assert_eq!(unsafe { dynamic(h, &c, &data.alpha, bad.ptrs()) }, OK, "{what}: {}", last_error());
                match unsafe { dynamic(h, &c, &data.alpha, bad.ptrs()) } {
                    OK => {
                        assert_eq!(synchronize(h), INVALID, "{what}");
                        let message = last_error();
                        let counted = format!(": {fault}; 1 later call's pattern was invalid too");
                        assert!(message.ends_with(&counted), "{message}");
                    }
                    INVALID => {
                        let message = last_error();
                        assert!(message.starts_with("sddmmDynamic: an earlier call") && message.ends_with(&fault));
                    }
                    other => panic!("{what}: status {other}: {}", last_error()),
                }
                assert_eq!(synchronize(h), OK, "{what}: reported twice: {}", last_error());

                // Reported by the next compute call once the validation has finished; that call does
                // nothing else, and the one after it runs.
                assert_eq!(unsafe { dynamic(h, &c, &data.alpha, bad.ptrs()) }, OK, "{what}: {}", last_error());
                device.synchronize(raw).unwrap();
                good.poison(&device, raw);
                assert_eq!(unsafe { dynamic(h, &valid, &data.alpha, good.ptrs()) }, INVALID, "{what}");
                let message = last_error();
                assert!(message.starts_with("sddmmDynamic: an earlier call") && message.ends_with(&fault), "{message}");
                assert!(good.out().iter().all(|&v| v == POISON as f32), "{what}: the reporting call wrote out");
                assert_eq!(unsafe { dynamic(h, &valid, &data.alpha, good.ptrs()) }, OK, "{what}: {}", last_error());
                assert_eq!(synchronize(h), OK, "{what}: {}", last_error());
                check(&format!("{what}: the valid call after"), &good.out(), &want, &scale);

                // out in host memory: the call reports its own fault as the host validation does.
                let mut host_out = vec![POISON as f32; c.nnz()];
                let ptrs = Ptrs { out: host_out.as_mut_ptr(), ..bad.ptrs() };
                assert_eq!(unsafe { dynamic(h, &c, &data.alpha, ptrs) }, INVALID, "{what}");
                assert_eq!(last_error(), format!("sddmmDynamic: {fault}"), "{what}");
                assert!(host_out.iter().all(|&v| v == POISON as f32), "{what}: host out written");
                assert_eq!(synchronize(h), OK, "{what}: reported twice: {}", last_error());
            }
            if breakage.what.starts_with("a column at n") {
                // Carried over a change of backend: the CPU handle's first call reports it.
                assert_eq!(unsafe { dynamic(h, &c, &data.alpha, bad.ptrs()) }, OK, "{}", last_error());
                assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cpu as i32) }, OK, "{}", last_error());
                let mut host_out = vec![POISON as f32; valid.nnz()];
                let host = data.host_ptrs(&valid, &mut host_out);
                assert_eq!(unsafe { dynamic(h, &valid, &data.alpha, host) }, INVALID);
                assert!(last_error().ends_with(&fault), "{}", last_error());
                assert!(host_out.iter().all(|&v| v == POISON as f32));
                let host = data.host_ptrs(&valid, &mut host_out);
                assert_eq!(unsafe { dynamic(h, &valid, &data.alpha, host) }, OK, "{}", last_error());
                check("after the change of backend", &host_out, &want, &scale);
                assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cuda as i32) }, OK, "{}", last_error());
                assert_eq!(unsafe { sddmmSetStream(h, stream.cu_stream() as *mut c_void) }, OK);
            }
        }
    }
    unsafe { sddmmDestroy(h) };
}

/// A kernel that keeps the GPU busy for `ns` nanoseconds of its global timer.
static SPIN: sparsegpu::backend::cuda::kernels::KernelSource = sparsegpu::backend::cuda::kernels::KernelSource {
    name: "spin",
    source: r#"
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"#,
    uses_sm90a: false,
};

/// With rowPtr, colInd and out in device memory, a valid call neither copies the pattern to the host
/// nor waits for the stream: it returns while a long kernel queued before it on the stream is still
/// running (and its result is right once the stream gets there).
#[test]
fn a_call_with_a_valid_device_pattern_returns_without_waiting() {
    const ALONE: &str = "SPARSEGPU_TEST_ALONE";
    let test = "a_call_with_a_valid_device_pattern_returns_without_waiting";
    if std::env::var_os(ALONE).is_none() {
        if !common::cuda_available(test) {
            return;
        }
        // Run alone, in a child process: the other tests of this binary run in parallel threads,
        // and their synchronous copies and frees would wait for the long kernel below, holding up
        // the call under test as if it waited itself (seen on an H100).
        let exe = std::env::current_exe().expect("test executable");
        let out = std::process::Command::new(exe)
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(ALONE, "1")
            .output()
            .expect("start the child");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "the child failed ({}):\n{text}", out.status);
        assert!(text.contains("returned while the stream ran"), "the child did not run the test:\n{text}");
        return;
    }
    let mut rng = Rng::fresh("sddmm gpu returns without waiting");
    let device = cuda::device(0).unwrap();
    let stream = device.new_stream().unwrap();
    let raw = cuda::Stream(stream.cu_stream());
    let image = sparsegpu::backend::cuda::nvrtc::compile(&SPIN, &device.arch_for(&SPIN)).unwrap();
    let module = device.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image)).unwrap();
    let spin = module.load_function("spin").unwrap();
    let c = Case::new(&mut rng, 2000, 1500, 64, 0.01, Layout::RowMajor, IndexBase::Zero);
    let data = Data::<f32>::new(&mut rng, &c);
    let (want, scale) = data.reference(&c);
    let arrays = OnDevice::new(&device, raw, &c, &data);
    let h = handle(BackendKind::Cuda);
    assert_eq!(unsafe { sddmmSetStream(h, stream.cu_stream() as *mut c_void) }, OK);
    for alg in [SddmmAlgorithm::Tiled, SddmmAlgorithm::Coo] {
        assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK);
        // First use: kernels loaded, the handle's workspace made.
        assert_eq!(unsafe { dynamic(h, &c, &data.alpha, arrays.ptrs()) }, OK, "{}", last_error());
        assert_eq!(synchronize(h), OK, "{}", last_error());
        arrays.poison(&device, raw);

        let spin_ns: u64 = 400_000_000;
        let cfg = cuda::Launch { grid: (1, 1, 1), block: (1, 1, 1), shared_bytes: 0 };
        unsafe { cuda::launch(&spin, cfg, raw, sparsegpu::kernel_args![&spin_ns]) }.unwrap();
        let started = std::time::Instant::now();
        let status = unsafe { dynamic(h, &c, &data.alpha, arrays.ptrs()) };
        let returned_after = started.elapsed();
        let still_running = unsafe { cudarc::driver::sys::cuStreamQuery(raw.0) };
        assert_eq!(status, OK, "{alg:?}: {}", last_error());
        assert_eq!(
            still_running,
            cudarc::driver::sys::cudaError_enum::CUDA_ERROR_NOT_READY,
            "{alg:?}: the stream was idle when the call returned after {returned_after:?}: the call waited for it"
        );
        assert!(returned_after.as_nanos() < spin_ns as u128 / 2, "{alg:?}: the call took {returned_after:?}");
        println!("{alg:?}: returned while the stream ran, after {returned_after:?}");
        assert_eq!(synchronize(h), OK, "{alg:?}: {}", last_error());
        check(&format!("{alg:?} after the long kernel"), &arrays.out(), &want, &scale);
    }
    unsafe { sddmmDestroy(h) };
}

/// What sddmmDynamic costs over sddmmExecutePlan on the same pattern in device memory (A, B and out
/// too), per call: calls of each queued back to back on one stream and timed to the stream's end,
/// the median of five rounds, printed as TIMING lines (the target: at most 15 % or 10 µs more,
/// whichever is larger). Outputs are checked against the reference so that a wrong kernel fails.
#[test]
fn timing_of_dynamic_over_the_plan() {
    if !common::cuda_available("timing_of_dynamic_over_the_plan") {
        return;
    }
    let mut rng = Rng::fresh("sddmm gpu dynamic over the plan");
    let device = cuda::device(0).unwrap();
    let stream = device.new_stream().unwrap();
    let raw = cuda::Stream(stream.cu_stream());
    let h = handle(BackendKind::Cuda);
    assert_eq!(unsafe { sddmmSetStream(h, stream.cu_stream() as *mut c_void) }, OK);
    for (m, k, density) in [(1024usize, 32usize, 1e-3), (4096, 64, 1e-2), (16384, 128, 1e-4)] {
        let mut c = Case::new(&mut rng, m, m, k, density, Layout::RowMajor, IndexBase::Zero);
        (c.lda, c.ldb) = (k, k);
        let data = Data::<f32>::new(&mut rng, &c);
        let (want, scale) = data.reference(&c);
        let arrays = OnDevice::new(&device, raw, &c, &data);
        let plan = unsafe { create_plan(h, &c, arrays.ptrs().row_ptr, arrays.ptrs().col_ind) };
        for alg in [SddmmAlgorithm::Tiled, SddmmAlgorithm::Coo] {
            assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK);
            let calls = if c.nnz() > 1_000_000 { 20 } else { 200 };
            let per_call = |dynamic_way: bool| {
                let started = std::time::Instant::now();
                for _ in 0..calls {
                    let status = if dynamic_way {
                        unsafe { dynamic(h, &c, &data.alpha, arrays.ptrs()) }
                    } else {
                        unsafe { execute(h, plan, &c, &data.alpha, arrays.ptrs()) }
                    };
                    assert_eq!(status, OK, "{}", last_error());
                }
                device.synchronize(raw).unwrap();
                started.elapsed().as_secs_f64() * 1e6 / calls as f64
            };
            per_call(true);
            per_call(false);
            let (mut dynamic_us, mut plan_us) = (Vec::new(), Vec::new());
            for _ in 0..5 {
                dynamic_us.push(per_call(true));
                plan_us.push(per_call(false));
            }
            dynamic_us.sort_by(f64::total_cmp);
            plan_us.sort_by(f64::total_cmp);
            let (d, p) = (dynamic_us[2], plan_us[2]);
            assert_eq!(synchronize(h), OK, "{}", last_error());
            check(&format!("{} {alg:?} after the timing", c.label), &arrays.out(), &want, &scale);
            eprintln!(
                "TIMING sddmm f32 m=n={m} k={k} nnz={} {alg:?}, pattern in device memory: dynamic {d:.1} us, plan \
                 {p:.1} us per call, dynamic over plan {:+.1} us ({:+.1} %) (host wall clock of {calls} queued calls, \
                 median of 5)",
                c.nnz(),
                d - p,
                (d / p - 1.0) * 100.0
            );
        }
        unsafe { sddmmDestroyPlan(plan) };
    }
    unsafe { sddmmDestroy(h) };
}

//! SDDMM (GPU-Dynamic) through the C API: every algorithm and the plan against an f64 reference on
//! random shapes, patterns, layouts, index bases and value types; the density dispatch; every
//! exported function and every rejected input.
//!
//! One file per family on purpose, although long: each integration-test file is its own binary that
//! links the whole library (about 3 MB), so splitting a family's tests would multiply link time and
//! the binaries carried to a GPU machine; the tests are grouped by section instead.

mod common;
use common::last_error;

use common::sddmm::{product_in, takes_dense_tiles};
use common::{POISON, Rng, relative_error};
use half::{bf16, f16};
use sparsegpu::capi::sddmm::*;
use sparsegpu::scalar::Element;
use sparsegpu::sddmm::{DEFAULT_DENSITY_THRESHOLD, SddmmAlgorithm, SddmmMathMode, TILE_COLS, TILE_K, TILE_ROWS};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{band_csr, random_csr, rmat_csr};
use sparsegpu::{BackendKind, IndexBase, Layout, Status, ValueType};
use std::ffi::c_void;
use std::ptr::{null, null_mut};

/// Whether the last message is from `function` and names argument `arg` (as "argument arg ..." or
/// as the subject of the message, "function: arg ..." / "function: arg[..]").
fn names(function: &str, arg: &str) -> bool {
    let msg = last_error();
    msg.starts_with(&format!("{function}: "))
        && [format!("argument {arg} "), format!("argument {arg}:"), format!(": {arg} "), format!(": {arg}[")]
            .iter()
            .any(|form| msg.contains(form.as_str()))
}

const OK: i32 = Status::Success as i32;

fn create_handle() -> sddmmHandle_t {
    let mut h: sddmmHandle_t = null_mut();
    assert_eq!(unsafe { sddmmCreate(&mut h) }, OK, "{}", last_error());
    assert!(!h.is_null());
    h
}

/// An SDDMM problem as a C caller passes it: the pattern in the caller's index base, dense operands
/// in `layout` with padded leading dimensions.
#[derive(Clone, Debug)]
struct Problem {
    label: String,
    m: usize,
    n: usize,
    k: usize,
    layout: Layout,
    base: IndexBase,
    lda: usize,
    ldb: usize,
    /// Zero-based, for the reference.
    pattern: CsrMatrix<f64>,
    row_ptr: Vec<i32>,
    col_ind: Vec<i32>,
}

impl Problem {
    fn new(
        label: String,
        pattern: CsrMatrix<f64>,
        k: usize,
        layout: Layout,
        base: IndexBase,
        pad: (usize, usize),
    ) -> Self {
        let (m, n) = (pattern.rows, pattern.cols);
        let (lda, ldb) = match layout {
            Layout::RowMajor => (k.max(1) + pad.0, k.max(1) + pad.1),
            Layout::ColMajor => (m.max(1) + pad.0, n.max(1) + pad.1),
        };
        let shift = base as i32;
        Problem {
            label,
            m,
            n,
            k,
            layout,
            base,
            lda,
            ldb,
            row_ptr: pattern.row_ptr.iter().map(|&p| p + shift).collect(),
            col_ind: pattern.col_ind.iter().map(|&c| c + shift).collect(),
            pattern,
        }
    }

    fn nnz(&self) -> usize {
        self.pattern.nnz()
    }

    /// Whether AUTO with a plan of a CUDA handle takes dense tiles of S (tensor-core or block tiles)
    /// for element type T.
    fn takes_dense_tiles<T: Element>(&self) -> Option<bool> {
        let (shape, lds) = ((self.m, self.n, self.k), (self.lda, self.ldb));
        takes_dense_tiles(T::VALUE_TYPE, shape, self.layout, self.base, lds, &self.row_ptr, &self.col_ind)
    }

    fn a_len(&self) -> usize {
        dense_len(self.m, self.k, self.lda, self.layout)
    }

    fn b_len(&self) -> usize {
        dense_len(self.n, self.k, self.ldb, self.layout)
    }

    fn dense_index(&self, row: usize, p: usize, ld: usize) -> usize {
        match self.layout {
            Layout::RowMajor => row * ld + p,
            Layout::ColMajor => row + p * ld,
        }
    }

    fn density(&self) -> f64 {
        if self.m * self.n == 0 { 0.0 } else { self.nnz() as f64 / (self.m * self.n) as f64 }
    }
}

fn dense_len(rows: usize, cols: usize, ld: usize, layout: Layout) -> usize {
    if rows == 0 || cols == 0 {
        return 0;
    }
    match layout {
        Layout::RowMajor => (rows - 1) * ld + cols,
        Layout::ColMajor => (cols - 1) * ld + rows,
    }
}

/// Typed data for one problem: A, B, S's values (None: pattern only), α (now and then 0).
struct Data<T: Element> {
    a: Vec<T>,
    b: Vec<T>,
    s: Option<Vec<T>>,
    alpha: T::Compute,
}

impl<T: Element> Data<T> {
    fn random(rng: &mut Rng, p: &Problem) -> Self {
        Data {
            a: rng.vec(p.a_len()),
            b: rng.vec(p.b_len()),
            s: if rng.below(4) == 0 { None } else { Some(rng.vec(p.nnz())) },
            // Now and then α = 0: every entry must then be written as zero (scale 0, no tolerance).
            alpha: <T::Compute as Element>::from_f64(if rng.below(8) == 0 { 0.0 } else { rng.range(-2.0, 2.0) }),
        }
    }

    fn s_ptr(&self) -> *const c_void {
        self.s.as_ref().map_or(null(), |s| s.as_ptr() as *const c_void)
    }

    /// The exact result in f64 and, per entry, `|α·S[e]|·Σ|A[i,p]·B[j,p]|`, the scale rounding
    /// errors are measured against.
    fn reference(&self, p: &Problem) -> (Vec<f64>, Vec<f64>) {
        self.reference_in(p, SddmmMathMode::Default)
    }

    /// [`Data::reference`] with each product as the math mode `math` forms it.
    fn reference_in(&self, p: &Problem, math: SddmmMathMode) -> (Vec<f64>, Vec<f64>) {
        let alpha = self.alpha.to_f64();
        let mut want = Vec::with_capacity(p.nnz());
        let mut scale = Vec::with_capacity(p.nnz());
        for i in 0..p.m {
            for e in p.pattern.row_ptr[i] as usize..p.pattern.row_ptr[i + 1] as usize {
                let j = p.pattern.col_ind[e] as usize;
                let (mut dot, mut abs) = (0.0, 0.0);
                for q in 0..p.k {
                    let (a, b) = (self.a[p.dense_index(i, q, p.lda)], self.b[p.dense_index(j, q, p.ldb)]);
                    let prod = product_in(math, a.to_f64(), b.to_f64());
                    dot += prod;
                    abs += prod.abs();
                }
                let s = self.s.as_ref().map_or(1.0, |s| s[e].to_f64());
                want.push(alpha * s * dot);
                scale.push((alpha * s).abs() * abs);
            }
        }
        (want, scale)
    }
}

/// Relative accuracy expected of a k-term dot product computed in `T::Compute` and stored as `T`,
/// plus the absolute floor for results in f16's subnormal range.
fn tolerance<T: Element>(k: usize) -> (f64, f64) {
    let compute_eps =
        if <T::Compute as Element>::VALUE_TYPE == ValueType::F64 { f64::EPSILON } else { f32::EPSILON as f64 };
    let storage_eps = match T::VALUE_TYPE {
        ValueType::F16 => 2f64.powi(-11),
        ValueType::Bf16 => 2f64.powi(-8),
        _ => 0.0,
    };
    let floor = if T::VALUE_TYPE == ValueType::F16 { 1e-7 } else { 0.0 };
    ((k as f64 + 4.0) * compute_eps + storage_eps, floor)
}

fn check<T: Element>(what: &str, p: &Problem, got: &[T], want: &[f64], scale: &[f64]) {
    let (rel, floor) = tolerance::<T>(p.k);
    assert_eq!(got.len(), want.len(), "{what}: {}: length", p.label);
    for e in 0..got.len() {
        let g = got[e].to_f64();
        assert!(
            g.is_finite() && (g - want[e]).abs() <= rel * scale[e] + floor,
            "{what}: {}: entry {e}: got {g}, want {} (scale {}, tolerance {})",
            p.label,
            want[e],
            scale[e],
            rel * scale[e] + floor
        );
    }
}

fn poisoned<T: Element>(len: usize) -> Vec<T> {
    vec![T::from_f64(POISON); len]
}

unsafe fn dynamic<T: Element>(h: sddmmHandle_t, p: &Problem, d: &Data<T>, out: &mut [T]) -> i32 {
    unsafe {
        sddmmDynamic(
            h,
            p.m as i32,
            p.n as i32,
            p.k as i32,
            &d.alpha as *const T::Compute as *const c_void,
            d.a.as_ptr() as *const c_void,
            p.lda as i32,
            d.b.as_ptr() as *const c_void,
            p.ldb as i32,
            p.layout as i32,
            p.nnz() as i64,
            p.row_ptr.as_ptr(),
            p.col_ind.as_ptr(),
            d.s_ptr(),
            p.base as i32,
            T::VALUE_TYPE as i32,
            out.as_mut_ptr() as *mut c_void,
        )
    }
}

unsafe fn create_plan(h: sddmmHandle_t, p: &Problem) -> sddmmPlan_t {
    let mut plan: sddmmPlan_t = null_mut();
    let status = unsafe {
        sddmmCreatePlan(
            h,
            &mut plan,
            p.m as i32,
            p.n as i32,
            p.nnz() as i64,
            p.row_ptr.as_ptr(),
            p.col_ind.as_ptr(),
            p.base as i32,
        )
    };
    assert_eq!(status, OK, "{}: {}", p.label, last_error());
    plan
}

unsafe fn execute_plan<T: Element>(
    h: sddmmHandle_t,
    plan: sddmmPlan_t,
    p: &Problem,
    d: &Data<T>,
    out: &mut [T],
) -> i32 {
    unsafe {
        sddmmExecutePlan(
            h,
            plan,
            p.k as i32,
            &d.alpha as *const T::Compute as *const c_void,
            d.a.as_ptr() as *const c_void,
            p.lda as i32,
            d.b.as_ptr() as *const c_void,
            p.ldb as i32,
            p.layout as i32,
            d.s_ptr(),
            T::VALUE_TYPE as i32,
            out.as_mut_ptr() as *mut c_void,
        )
    }
}

fn last_algorithm(h: sddmmHandle_t) -> SddmmAlgorithm {
    let mut alg = -1;
    assert_eq!(unsafe { sddmmGetLastAlgorithm(h, &mut alg) }, OK, "{}", last_error());
    SddmmAlgorithm::try_from(alg).unwrap()
}

fn set_algorithm(h: sddmmHandle_t, alg: SddmmAlgorithm) {
    assert_eq!(unsafe { sddmmSetAlgorithm(h, alg as i32) }, OK, "{}", last_error());
}

/// Runs one problem every way (forced TILED, forced COO, AUTO; plan with AUTO, TILED and COO) and
/// checks each output element against the reference, and the dispatch against the density rule.
fn run_all_ways<T: Element>(h: sddmmHandle_t, rng: &mut Rng, p: &Problem) {
    let d = Data::<T>::random(rng, p);
    let (want, scale) = d.reference(p);
    let expected_auto =
        if p.density() > DEFAULT_DENSITY_THRESHOLD { SddmmAlgorithm::Tiled } else { SddmmAlgorithm::Coo };
    // AUTO with a plan of a CUDA handle may take its dense tiles (tensor-core tiles of f16 / bf16,
    // block tiles of every type); where the tiles' fill is between the clear-cut cases, either
    // algorithm is a right choice.
    let mut backend = -1;
    assert_eq!(unsafe { sddmmGetBackend(h, &mut backend) }, OK);
    let planned_auto = match (backend == BackendKind::Cuda as i32, p.takes_dense_tiles::<T>()) {
        (false, _) | (true, Some(false)) => Some(expected_auto),
        (true, Some(true)) => Some(SddmmAlgorithm::Tiled),
        (true, None) => None,
    };
    let plan = unsafe { create_plan(h, p) };
    for forced in [SddmmAlgorithm::Tiled, SddmmAlgorithm::Coo, SddmmAlgorithm::Auto] {
        set_algorithm(h, forced);
        let ran = if forced == SddmmAlgorithm::Auto { expected_auto } else { forced };
        let mut out = poisoned::<T>(p.nnz());
        assert_eq!(unsafe { dynamic(h, p, &d, &mut out) }, OK, "{}: {}", p.label, last_error());
        check(&format!("sddmmDynamic {forced:?}"), p, &out, &want, &scale);
        assert_eq!(last_algorithm(h), ran, "{}: dynamic {forced:?}", p.label);

        let mut planned = poisoned::<T>(p.nnz());
        assert_eq!(unsafe { execute_plan(h, plan, p, &d, &mut planned) }, OK, "{}: {}", p.label, last_error());
        check(&format!("sddmmExecutePlan {forced:?}"), p, &planned, &want, &scale);
        let planned_ran = if forced == SddmmAlgorithm::Auto { planned_auto } else { Some(forced) };
        if let Some(ran) = planned_ran {
            assert_eq!(last_algorithm(h), ran, "{}: plan {forced:?}", p.label);
        }
    }
    assert_eq!(unsafe { sddmmDestroyPlan(plan) }, OK);
}

/// Reverses each row's entries and repeats some: CSR that is valid but unsorted with duplicates.
fn scramble(rng: &mut Rng, s: &CsrMatrix<f64>) -> CsrMatrix<f64> {
    let mut row_ptr = vec![0i32];
    let mut col_ind = Vec::new();
    for r in 0..s.rows {
        let row = &s.col_ind[s.row_ptr[r] as usize..s.row_ptr[r + 1] as usize];
        col_ind.extend(row.iter().rev());
        if !row.is_empty() && rng.below(3) == 0 {
            col_ind.push(row[rng.below(row.len())]);
        }
        row_ptr.push(col_ind.len() as i32);
    }
    let values = vec![0.0; col_ind.len()];
    CsrMatrix { rows: s.rows, cols: s.cols, row_ptr, col_ind, values }
}

/// A random pattern: uniform at densities from 1e-5 to dense, band, R-MAT, or degenerate shapes.
fn random_pattern(rng: &mut Rng) -> (String, CsrMatrix<f64>) {
    match rng.below(6) {
        0 => {
            let (m, n) = (1 + rng.below(2500), 1 + rng.below(2500));
            let density = 10f64.powf(rng.range(-5.0, -3.0));
            (format!("random {m}x{n} density {density:.1e}"), random_csr(rng, m, n, density))
        }
        1 => {
            let (m, n) = (1 + rng.below(150), 1 + rng.below(150));
            let density = 10f64.powf(rng.range(-2.5, 0.0));
            (format!("random {m}x{n} density {density:.1e}"), random_csr(rng, m, n, density))
        }
        2 => {
            let n = 1 + rng.below(300);
            let w = rng.below(6);
            (format!("band {n} half-width {w}"), band_csr(rng, n, w))
        }
        3 => {
            let scale = 3 + rng.below(6) as u32;
            let ef = 1 + rng.below(8);
            (format!("R-MAT scale {scale} edge factor {ef}"), rmat_csr(rng, scale, ef))
        }
        4 => {
            // One dimension 0 or 1, the other around the tile sizes.
            let small = rng.below(2);
            let big = TILE_ROWS - 1 + rng.below(3);
            let (m, n) = if rng.below(2) == 0 { (small, big) } else { (big, small) };
            let density = rng.range(0.0, 1.0);
            (format!("degenerate {m}x{n}"), random_csr(rng, m, n, density))
        }
        _ => {
            // Just past multiples of the tile sizes, dense enough to fill every tile.
            let m = TILE_ROWS * (1 + rng.below(2)) + 1;
            let n = TILE_COLS * (1 + rng.below(2)) + rng.below(3);
            (format!("tile-edge {m}x{n}"), random_csr(rng, m, n, 0.3))
        }
    }
}

fn random_k(rng: &mut Rng) -> usize {
    match rng.below(5) {
        0 => rng.below(2),
        1 | 2 => 2 + rng.below(20),
        // Crosses one or two slice boundaries, not a multiple of the slice.
        _ => TILE_K + 1 + rng.below(TILE_K + 20),
    }
}

#[test]
fn every_algorithm_and_the_plan_match_the_reference_on_random_problems() {
    let mut rng = Rng::fresh("sddmm random problems");
    let h = create_handle();
    for case in 0..160 {
        let (label, pattern) = random_pattern(&mut rng);
        let pattern = if rng.below(4) == 0 { scramble(&mut rng, &pattern) } else { pattern };
        let k = random_k(&mut rng);
        let layout = if rng.below(2) == 0 { Layout::RowMajor } else { Layout::ColMajor };
        let base = if rng.below(2) == 0 { IndexBase::Zero } else { IndexBase::One };
        let pad = (rng.below(3), rng.below(3));
        let value_type = [ValueType::F32, ValueType::F64, ValueType::F16, ValueType::Bf16][case % 4];
        let label = format!("case {case}: {label}, k {k}, {layout:?}, base {base:?}, {value_type:?}");
        let p = Problem::new(label, pattern, k, layout, base, pad);
        match value_type {
            ValueType::F32 => run_all_ways::<f32>(h, &mut rng, &p),
            ValueType::F64 => run_all_ways::<f64>(h, &mut rng, &p),
            ValueType::F16 => run_all_ways::<f16>(h, &mut rng, &p),
            ValueType::Bf16 => run_all_ways::<bf16>(h, &mut rng, &p),
        }
    }
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

#[test]
fn tiled_and_coo_agree_to_rounding_on_a_dense_pattern() {
    let mut rng = Rng::fresh("sddmm dense agreement");
    let h = create_handle();
    let pattern = random_csr::<f64>(&mut rng, 130, 70, 1.0);
    let p = Problem::new("dense 130x70".into(), pattern, 2 * TILE_K + 3, Layout::RowMajor, IndexBase::Zero, (0, 1));
    let d = Data::<f64>::random(&mut rng, &p);
    let mut tiled = poisoned::<f64>(p.nnz());
    let mut coo = poisoned::<f64>(p.nnz());
    set_algorithm(h, SddmmAlgorithm::Tiled);
    assert_eq!(unsafe { dynamic(h, &p, &d, &mut tiled) }, OK);
    set_algorithm(h, SddmmAlgorithm::Coo);
    assert_eq!(unsafe { dynamic(h, &p, &d, &mut coo) }, OK);
    let (want, scale) = d.reference(&p);
    assert!(relative_error(&tiled, &want) < 1e-14 && relative_error(&coo, &want) < 1e-14);
    for e in 0..p.nnz() {
        assert!((tiled[e] - coo[e]).abs() <= 1e-13 * scale[e], "entry {e}: {} vs {}", tiled[e], coo[e]);
    }
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

fn set_math_mode(h: sddmmHandle_t, math: SddmmMathMode) {
    assert_eq!(unsafe { sddmmSetMathMode(h, math as i32) }, OK, "{}", last_error());
}

/// On the CPU backend, the math modes' executable specification, f32 calls in TF32 and 3xTF32 give
/// every entry as the sum of the mode's products (within FP32's rounding of that sum), by both
/// algorithms, dynamically and through a plan, both layouts, both index bases, K from 0 to past a
/// slice; TF32 differs from the default mode's result, 3xTF32 only within FP32's accuracy.
/// Other types ignore the mode: their outputs are those of the default mode, to the bit.
#[test]
fn the_tf32_math_modes_compute_the_products_they_define() {
    let mut rng = Rng::fresh("sddmm math modes");
    let h = create_handle();
    assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cpu as i32) }, OK);
    for case in 0..24 {
        let (label, pattern) = random_pattern(&mut rng);
        let k = [0, 1, 16, 40, 2 * TILE_K + 5][case % 5];
        let layout = if case % 2 == 0 { Layout::RowMajor } else { Layout::ColMajor };
        let base = if case % 3 == 0 { IndexBase::One } else { IndexBase::Zero };
        let p = Problem::new(format!("case {case}: {label}, k {k}, {layout:?}"), pattern, k, layout, base, (1, 0));
        let d = Data::<f32>::random(&mut rng, &p);
        let (exact, exact_scale) = d.reference(&p);
        let plan = unsafe { create_plan(h, &p) };
        set_algorithm(h, SddmmAlgorithm::Coo);
        let mut default = poisoned::<f32>(p.nnz());
        assert_eq!(unsafe { dynamic(h, &p, &d, &mut default) }, OK);
        for math in [SddmmMathMode::Tf32, SddmmMathMode::Tf32x3] {
            set_math_mode(h, math);
            let (want, scale) = d.reference_in(&p, math);
            for alg in [SddmmAlgorithm::Tiled, SddmmAlgorithm::Coo] {
                set_algorithm(h, alg);
                let mut out = poisoned::<f32>(p.nnz());
                assert_eq!(unsafe { dynamic(h, &p, &d, &mut out) }, OK, "{}: {}", p.label, last_error());
                let mut planned = poisoned::<f32>(p.nnz());
                assert_eq!(unsafe { execute_plan(h, plan, &p, &d, &mut planned) }, OK);
                for (way, got) in [("sddmmDynamic", &out), ("sddmmExecutePlan", &planned)] {
                    check(&format!("{way} {math:?} {alg:?}"), &p, got, &want, &scale);
                    if math == SddmmMathMode::Tf32x3 {
                        // Each product within 2⁻²¹ of a·b (the dropped small·small and the
                        // truncation of small), then FP32's rounding of the sum.
                        let (rel, _) = tolerance::<f32>(k);
                        for e in 0..p.nnz() {
                            let bound = (rel + 2f64.powi(-21)) * exact_scale[e];
                            let g = got[e] as f64;
                            assert!(
                                (g - exact[e]).abs() <= bound,
                                "{}: {way} 3xTF32 entry {e}: {g} vs exact {}",
                                p.label,
                                exact[e]
                            );
                        }
                    }
                }
                // TF32 took effect: random inputs are not TF32 values, and their products rounded
                // to 11 significant bits give other sums than the default mode's. (3xTF32's differ
                // by less than FP32's rounding of the result can show.)
                if math == SddmmMathMode::Tf32 && k > 0 && d.alpha.to_f64() != 0.0 && p.nnz() > 0 {
                    assert!(
                        out.iter().zip(&default).any(|(x, y)| x.to_bits() != y.to_bits()),
                        "{}: {math:?} gave the default mode's result",
                        p.label
                    );
                }
            }
        }
        set_math_mode(h, SddmmMathMode::Default);
        unsafe { sddmmDestroyPlan(plan) };
        // Other types: the mode changes nothing.
        let ignored = |rng: &mut Rng| {
            let d64 = Data::<f64>::random(rng, &p);
            let d16 = Data::<f16>::random(rng, &p);
            let run = |math| {
                set_math_mode(h, math);
                let (mut out64, mut out16) = (poisoned::<f64>(p.nnz()), poisoned::<f16>(p.nnz()));
                assert_eq!(unsafe { dynamic(h, &p, &d64, &mut out64) }, OK);
                assert_eq!(unsafe { dynamic(h, &p, &d16, &mut out16) }, OK);
                (
                    out64.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    out16.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                )
            };
            let default = run(SddmmMathMode::Default);
            assert_eq!(run(SddmmMathMode::Tf32), default, "{}: f64 / f16 in TF32", p.label);
            assert_eq!(run(SddmmMathMode::Tf32x3), default, "{}: f64 / f16 in 3xTF32", p.label);
            set_math_mode(h, SddmmMathMode::Default);
        };
        if case % 4 == 0 {
            ignored(&mut rng);
        }
    }
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

/// NaN and ∞ in A under the math modes (CPU backend): a row of A holding CUDA's NaN (0x7fffffff,
/// which rounding to TF32 on the bits would turn into -0) gives NaN in every entry of its row in
/// every mode; a row holding +∞ gives +∞ (B positive) in the default mode and in TF32, NaN in 3xTF32
/// (∞'s small part is ∞ − ∞); the other rows stay finite.
#[test]
fn the_tf32_math_modes_keep_nan_and_infinity() {
    let h = create_handle();
    assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cpu as i32) }, OK);
    let pattern = random_csr::<f64>(&mut Rng::new(7), 3, 5, 1.0);
    let p = Problem::new("3x5 dense, k 8".into(), pattern, 8, Layout::RowMajor, IndexBase::Zero, (0, 0));
    let mut d = Data::<f32> { a: vec![0.5; p.a_len()], b: vec![0.25; p.b_len()], s: None, alpha: 1.0 };
    d.a[3] = f32::from_bits(0x7fff_ffff);
    d.a[8 + 5] = f32::INFINITY;
    for (math, infinite_row) in [
        (SddmmMathMode::Default, f32::INFINITY),
        (SddmmMathMode::Tf32, f32::INFINITY),
        (SddmmMathMode::Tf32x3, f32::NAN),
    ] {
        set_math_mode(h, math);
        let mut out = poisoned::<f32>(p.nnz());
        assert_eq!(unsafe { dynamic(h, &p, &d, &mut out) }, OK, "{}", last_error());
        let rows: Vec<&[f32]> = out.chunks(5).collect();
        assert!(rows[0].iter().all(|v| v.is_nan()), "{math:?}: {:?}", rows[0]);
        let inf_ok = |v: &f32| if infinite_row.is_nan() { v.is_nan() } else { *v == infinite_row };
        assert!(rows[1].iter().all(inf_ok), "{math:?}: {:?}", rows[1]);
        assert!(rows[2].iter().all(|v| *v == 1.0), "{math:?}: {:?}", rows[2]);
    }
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

/// An n×n pattern with exactly `nnz` entries (the first ones in row-major order).
fn pattern_with(n: usize, nnz: usize) -> CsrMatrix<f64> {
    CsrMatrix::from_triplets(n, n, (0..nnz).map(|e| (e / n, e % n, 1.0)).collect())
}

#[test]
fn auto_switches_to_tiled_strictly_above_the_density_threshold() {
    let mut rng = Rng::fresh("sddmm dispatch");
    let h = create_handle();
    let run = |rng: &mut Rng, n: usize, nnz: usize| -> SddmmAlgorithm {
        let p = Problem::new(
            format!("{n}x{n} nnz {nnz}"),
            pattern_with(n, nnz),
            3,
            Layout::RowMajor,
            IndexBase::Zero,
            (0, 0),
        );
        let d = Data::<f32>::random(rng, &p);
        let mut out = poisoned::<f32>(p.nnz());
        assert_eq!(unsafe { dynamic(h, &p, &d, &mut out) }, OK, "{}", last_error());
        let (want, scale) = d.reference(&p);
        check("dispatch", &p, &out, &want, &scale);
        let dynamic_choice = last_algorithm(h);
        let plan = unsafe { create_plan(h, &p) };
        let mut planned = poisoned::<f32>(p.nnz());
        assert_eq!(unsafe { execute_plan(h, plan, &p, &d, &mut planned) }, OK);
        assert_eq!(last_algorithm(h), dynamic_choice, "the plan dispatches as the dynamic call");
        assert_eq!(unsafe { sddmmDestroyPlan(plan) }, OK);
        dynamic_choice
    };
    // The default, 1, is never exceeded: COO even for a full pattern.
    assert_eq!(run(&mut rng, 100, 1), SddmmAlgorithm::Coo);
    assert_eq!(run(&mut rng, 100, 10000), SddmmAlgorithm::Coo);
    // Moving the threshold moves the switch: at 1e-4 on 100 x 100, one entry is exactly 1e-4 (not
    // above), two are above.
    assert_eq!(unsafe { sddmmSetDensityThreshold(h, 1e-4) }, OK);
    assert_eq!(run(&mut rng, 100, 1), SddmmAlgorithm::Coo);
    assert_eq!(run(&mut rng, 100, 2), SddmmAlgorithm::Tiled);
    assert_eq!(run(&mut rng, 100, 5000), SddmmAlgorithm::Tiled);
    assert_eq!(unsafe { sddmmSetDensityThreshold(h, 0.5) }, OK);
    assert_eq!(run(&mut rng, 100, 5000), SddmmAlgorithm::Coo);
    assert_eq!(run(&mut rng, 100, 5001), SddmmAlgorithm::Tiled);
    assert_eq!(unsafe { sddmmSetDensityThreshold(h, 0.0) }, OK);
    assert_eq!(run(&mut rng, 100, 1), SddmmAlgorithm::Tiled);
    assert_eq!(run(&mut rng, 100, 0), SddmmAlgorithm::Coo);
    assert_eq!(unsafe { sddmmSetDensityThreshold(h, f64::INFINITY) }, OK);
    assert_eq!(run(&mut rng, 10, 100), SddmmAlgorithm::Coo);
    // A forced algorithm ignores the threshold; AUTO restores the rule.
    set_algorithm(h, SddmmAlgorithm::Tiled);
    assert_eq!(run(&mut rng, 100, 1), SddmmAlgorithm::Tiled);
    set_algorithm(h, SddmmAlgorithm::Auto);
    assert_eq!(run(&mut rng, 100, 1), SddmmAlgorithm::Coo);
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

#[test]
fn handle_functions_work_and_reject_bad_arguments() {
    assert_eq!(unsafe { sddmmCreate(null_mut()) }, Status::InvalidPointer as i32);
    assert!(names("sddmmCreate", "handle"), "{}", last_error());

    let h = create_handle();
    let mut backend = -1;
    assert_eq!(unsafe { sddmmGetBackend(h, &mut backend) }, OK);
    // Auto resolves to CUDA where it is usable, else the CPU.
    let auto = if sparsegpu::backend::cuda::availability().is_ok() { BackendKind::Cuda } else { BackendKind::Cpu };
    assert_eq!(backend, auto as i32);
    assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cpu as i32) }, OK);
    assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Auto as i32) }, OK);
    if sparsegpu::backend::cuda::availability().is_ok() {
        assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cuda as i32) }, OK);
        assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cpu as i32) }, OK);
    } else {
        assert_eq!(unsafe { sddmmSetBackend(h, BackendKind::Cuda as i32) }, Status::BackendUnavailable as i32);
        assert!(last_error().contains("CUDA"), "{}", last_error());
    }
    assert_eq!(unsafe { sddmmSetBackend(h, 7) }, Status::InvalidValue as i32);
    assert!(names("sddmmSetBackend", "backend"), "{}", last_error());
    assert_eq!(unsafe { sddmmGetBackend(h, null_mut()) }, Status::InvalidPointer as i32);
    assert!(names("sddmmGetBackend", "backend"), "{}", last_error());
    backend = -1;
    assert_eq!(unsafe { sddmmGetBackend(h, &mut backend) }, OK);
    assert_eq!(backend, BackendKind::Cpu as i32, "a failed SetBackend leaves the handle unchanged");

    // The CPU validates every pattern before its call returns: nothing for sddmmSynchronize to wait
    // for or report.
    assert_eq!(unsafe { sddmmSynchronize(h) }, OK, "{}", last_error());
    assert_eq!(unsafe { sddmmSynchronize(null_mut()) }, Status::InvalidHandle as i32);
    assert!(names("sddmmSynchronize", "handle"), "{}", last_error());

    let mut stream: *mut c_void = null_mut();
    assert_eq!(unsafe { sddmmSetStream(h, 0x1234 as *mut c_void) }, OK);
    assert_eq!(unsafe { sddmmGetStream(h, &mut stream) }, OK);
    assert_eq!(stream as usize, 0x1234);
    assert_eq!(unsafe { sddmmGetStream(h, null_mut()) }, Status::InvalidPointer as i32);
    assert!(names("sddmmGetStream", "stream"), "{}", last_error());

    for alg in SddmmAlgorithm::variants() {
        assert_eq!(unsafe { sddmmSetAlgorithm(h, *alg as i32) }, OK);
    }
    for bad in [-1, 3, 100] {
        assert_eq!(unsafe { sddmmSetAlgorithm(h, bad) }, Status::InvalidValue as i32);
        assert!(names("sddmmSetAlgorithm", "algorithm"), "{}", last_error());
    }
    let mut mode = -1;
    assert_eq!(unsafe { sddmmGetMathMode(h, &mut mode) }, OK);
    assert_eq!(mode, SddmmMathMode::Default as i32, "exact FP32 by default");
    for math in SddmmMathMode::variants() {
        set_math_mode(h, *math);
        assert_eq!(unsafe { sddmmGetMathMode(h, &mut mode) }, OK);
        assert_eq!(mode, *math as i32);
    }
    for bad in [-1, 3, 100] {
        assert_eq!(unsafe { sddmmSetMathMode(h, bad) }, Status::InvalidValue as i32);
        assert!(names("sddmmSetMathMode", "mode"), "{}", last_error());
        assert_eq!(unsafe { sddmmGetMathMode(h, &mut mode) }, OK);
        assert_eq!(mode, SddmmMathMode::Tf32 as i32, "a failed SetMathMode leaves the handle unchanged");
    }
    assert_eq!(unsafe { sddmmGetMathMode(h, null_mut()) }, Status::InvalidPointer as i32);
    assert!(names("sddmmGetMathMode", "mode"), "{}", last_error());
    set_math_mode(h, SddmmMathMode::Default);
    for bad in [-1e-9, -1.0, f64::NAN, f64::NEG_INFINITY] {
        assert_eq!(unsafe { sddmmSetDensityThreshold(h, bad) }, Status::InvalidValue as i32, "{bad}");
        assert!(names("sddmmSetDensityThreshold", "threshold"), "{}", last_error());
    }

    let mut alg = 77;
    assert_eq!(unsafe { sddmmGetLastAlgorithm(h, &mut alg) }, Status::InvalidValue as i32);
    assert!(last_error().contains("sddmmGetLastAlgorithm"), "{}", last_error());
    assert_eq!(alg, 77, "untouched on failure");
    assert_eq!(unsafe { sddmmGetLastAlgorithm(h, null_mut()) }, Status::InvalidPointer as i32);
    assert!(names("sddmmGetLastAlgorithm", "algorithm"), "{}", last_error());

    // NULL, foreign and destroyed handles.
    let mut plan_as_handle: sddmmPlan_t = null_mut();
    let p = Problem::new("tiny".into(), pattern_with(2, 2), 1, Layout::RowMajor, IndexBase::Zero, (0, 0));
    assert_eq!(
        unsafe { sddmmCreatePlan(h, &mut plan_as_handle, 2, 2, 2, p.row_ptr.as_ptr(), p.col_ind.as_ptr(), 0) },
        OK
    );
    let mut not_a_handle = 0u64;
    let foreign_handles: [sddmmHandle_t; 3] =
        [null_mut(), plan_as_handle as sddmmHandle_t, &mut not_a_handle as *mut u64 as sddmmHandle_t];
    let dead = create_handle();
    assert_eq!(unsafe { sddmmDestroy(dead) }, OK);
    for bad in foreign_handles.into_iter().chain([dead]) {
        let check = |status: i32, function: &str| {
            assert_eq!(status, Status::InvalidHandle as i32, "{function} with {bad:p}");
            assert!(names(function, "handle"), "{}", last_error());
        };
        check(unsafe { sddmmSetStream(bad, null_mut()) }, "sddmmSetStream");
        check(unsafe { sddmmGetStream(bad, &mut stream) }, "sddmmGetStream");
        check(unsafe { sddmmSetBackend(bad, 2) }, "sddmmSetBackend");
        check(unsafe { sddmmGetBackend(bad, &mut backend) }, "sddmmGetBackend");
        check(unsafe { sddmmSetAlgorithm(bad, 0) }, "sddmmSetAlgorithm");
        check(unsafe { sddmmSetDensityThreshold(bad, 0.1) }, "sddmmSetDensityThreshold");
        check(unsafe { sddmmGetLastAlgorithm(bad, &mut alg) }, "sddmmGetLastAlgorithm");
        if !bad.is_null() {
            check(unsafe { sddmmDestroy(bad) }, "sddmmDestroy");
        }
        let mut plan: sddmmPlan_t = null_mut();
        check(
            unsafe { sddmmCreatePlan(bad, &mut plan, 2, 2, 2, p.row_ptr.as_ptr(), p.col_ind.as_ptr(), 0) },
            "sddmmCreatePlan",
        );
        assert!(plan.is_null());
        let d = Data::<f32>::random(&mut Rng::new(1), &p);
        let mut out = poisoned::<f32>(2);
        check(unsafe { dynamic(bad, &p, &d, &mut out) }, "sddmmDynamic");
        check(unsafe { execute_plan(bad, plan_as_handle, &p, &d, &mut out) }, "sddmmExecutePlan");
        assert!(out.iter().all(|&v| v == POISON as f32));
    }
    assert_eq!(unsafe { sddmmDestroy(null_mut()) }, OK, "NULL is accepted as free() accepts it");
    assert_eq!(unsafe { sddmmDestroyPlan(plan_as_handle) }, OK);
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

/// Every argument of sddmmDynamic, with one broken at a time.
#[derive(Clone)]
struct DynamicCall {
    m: i32,
    n: i32,
    k: i32,
    alpha: *const c_void,
    a: *const c_void,
    lda: i32,
    b: *const c_void,
    ldb: i32,
    layout: i32,
    nnz: i64,
    row_ptr: *const i32,
    col_ind: *const i32,
    s_values: *const c_void,
    index_base: i32,
    value_type: i32,
    out: *mut c_void,
}

impl DynamicCall {
    unsafe fn dynamic(&self, h: sddmmHandle_t) -> i32 {
        unsafe {
            sddmmDynamic(
                h,
                self.m,
                self.n,
                self.k,
                self.alpha,
                self.a,
                self.lda,
                self.b,
                self.ldb,
                self.layout,
                self.nnz,
                self.row_ptr,
                self.col_ind,
                self.s_values,
                self.index_base,
                self.value_type,
                self.out,
            )
        }
    }

    unsafe fn create_plan(&self, h: sddmmHandle_t, plan: *mut sddmmPlan_t) -> i32 {
        unsafe { sddmmCreatePlan(h, plan, self.m, self.n, self.nnz, self.row_ptr, self.col_ind, self.index_base) }
    }

    unsafe fn execute_plan(&self, h: sddmmHandle_t, plan: sddmmPlan_t) -> i32 {
        unsafe {
            sddmmExecutePlan(
                h,
                plan,
                self.k,
                self.alpha,
                self.a,
                self.lda,
                self.b,
                self.ldb,
                self.layout,
                self.s_values,
                self.value_type,
                self.out,
            )
        }
    }
}

#[test]
fn bad_inputs_are_rejected_with_the_argument_named_and_outputs_untouched() {
    // S: 3 x 4, one-based, 5 entries; A 3 x 2 and B 4 x 2 column-major with lda = 3, ldb = 4.
    let row_ptr = [1, 3, 3, 6];
    let col_ind = [1, 4, 2, 3, 4];
    let a = [0.5f64; 6];
    let b = [0.25f64; 8];
    let s = [1.0f64; 5];
    let alpha = 2.0f64;
    let mut out = [POISON; 5];
    let mut bad_row_ptr = row_ptr;
    let mut bad_col_ind = col_ind;
    let valid = DynamicCall {
        m: 3,
        n: 4,
        k: 2,
        alpha: &alpha as *const f64 as *const c_void,
        a: a.as_ptr() as *const c_void,
        lda: 3,
        b: b.as_ptr() as *const c_void,
        ldb: 4,
        layout: Layout::ColMajor as i32,
        nnz: 5,
        row_ptr: row_ptr.as_ptr(),
        col_ind: col_ind.as_ptr(),
        s_values: s.as_ptr() as *const c_void,
        index_base: IndexBase::One as i32,
        value_type: ValueType::F64 as i32,
        out: out.as_mut_ptr() as *mut c_void,
    };
    let h = create_handle();
    // The valid call works (so the failures below are each due to the one broken argument).
    let out_ptr = out.as_mut_ptr();
    assert_eq!(unsafe { valid.dynamic(h) }, OK, "{}", last_error());
    let computed = unsafe { std::slice::from_raw_parts(out_ptr, 5) }.to_vec();
    assert!(computed.iter().all(|&v| (v - 2.0 * 2.0 * 0.5 * 0.25).abs() < 1e-15), "{computed:?}");
    let reset_out = || unsafe { std::slice::from_raw_parts_mut(out_ptr, 5) }.fill(POISON);

    let misaligned = unsafe { (a.as_ptr() as *const u8).add(1) } as *const c_void;
    type Edit = Box<dyn Fn(&mut DynamicCall)>;
    let cases: Vec<(&str, Edit, Status, &str)> = vec![
        ("m < 0", Box::new(|c| c.m = -1), Status::InvalidSize, "m"),
        ("n < 0", Box::new(|c| c.n = -2), Status::InvalidSize, "n"),
        ("k < 0", Box::new(|c| c.k = -1), Status::InvalidSize, "k"),
        ("nnz < 0", Box::new(|c| c.nnz = -5), Status::InvalidSize, "nnz"),
        ("nnz > INT_MAX", Box::new(|c| c.nnz = i32::MAX as i64 + 1), Status::InvalidSize, "nnz"),
        ("lda < m (column-major)", Box::new(|c| c.lda = 2), Status::InvalidSize, "lda"),
        ("ldb < n (column-major)", Box::new(|c| c.ldb = 3), Status::InvalidSize, "ldb"),
        ("lda < 0", Box::new(|c| c.lda = -3), Status::InvalidSize, "lda"),
        ("ldb < 0", Box::new(|c| c.ldb = -4), Status::InvalidSize, "ldb"),
        (
            "ldb < k (row-major)",
            Box::new(|c| {
                c.layout = Layout::RowMajor as i32;
                c.ldb = 1
            }),
            Status::InvalidSize,
            "ldb",
        ),
        (
            "lda < k (row-major)",
            Box::new(|c| {
                c.layout = Layout::RowMajor as i32;
                c.lda = 1
            }),
            Status::InvalidSize,
            "lda",
        ),
        ("alpha NULL", Box::new(|c| c.alpha = null()), Status::InvalidPointer, "alpha"),
        ("A NULL", Box::new(|c| c.a = null()), Status::InvalidPointer, "A"),
        ("A misaligned", Box::new(move |c| c.a = misaligned), Status::InvalidPointer, "A"),
        ("B NULL", Box::new(|c| c.b = null()), Status::InvalidPointer, "B"),
        ("rowPtr NULL", Box::new(|c| c.row_ptr = null()), Status::InvalidPointer, "rowPtr"),
        ("colInd NULL", Box::new(|c| c.col_ind = null()), Status::InvalidPointer, "colInd"),
        ("sValues misaligned", Box::new(move |c| c.s_values = misaligned), Status::InvalidPointer, "sValues"),
        ("out NULL", Box::new(|c| c.out = null_mut()), Status::InvalidPointer, "out"),
        ("nnz ≠ rowPtr[m] − base", Box::new(|c| c.nnz = 4), Status::InvalidSparseMatrix, "rowPtr"),
        ("unknown layout", Box::new(|c| c.layout = 2), Status::InvalidValue, "layout"),
        ("unknown value type", Box::new(|c| c.value_type = 9), Status::InvalidValue, "valueType"),
        ("unknown index base", Box::new(|c| c.index_base = 2), Status::InvalidValue, "indexBase"),
        (
            "wrong index base (rowPtr[0] = 1 with base 0)",
            Box::new(|c| c.index_base = 0),
            Status::InvalidSparseMatrix,
            "rowPtr",
        ),
    ];
    bad_row_ptr[2] = 2; // 1, 3, 2, 6: decreasing
    bad_col_ind[3] = 5; // column 5 of 4 (one-based)
    let structural: Vec<(&str, DynamicCall, &str)> = vec![
        ("non-monotone rowPtr", DynamicCall { row_ptr: bad_row_ptr.as_ptr(), ..valid.clone() }, "rowPtr"),
        ("column out of range", DynamicCall { col_ind: bad_col_ind.as_ptr(), ..valid.clone() }, "colInd"),
    ];
    let mut all: Vec<(&str, DynamicCall, Status, &str)> = cases
        .into_iter()
        .map(|(what, edit, status, arg)| {
            let mut call = valid.clone();
            edit(&mut call);
            (what, call, status, arg)
        })
        .collect();
    all.extend(structural.into_iter().map(|(what, call, arg)| (what, call, Status::InvalidSparseMatrix, arg)));
    let column_zero = [1, 3, 3, 6];
    let zero_col = [0, 4, 2, 3, 4];
    all.push((
        "column 0 with base 1",
        DynamicCall { row_ptr: column_zero.as_ptr(), col_ind: zero_col.as_ptr(), ..valid.clone() },
        Status::InvalidSparseMatrix,
        "colInd",
    ));

    let plan = {
        let mut plan: sddmmPlan_t = null_mut();
        assert_eq!(unsafe { valid.create_plan(h, &mut plan) }, OK, "{}", last_error());
        plan
    };
    let pattern_args = ["m", "n", "nnz", "rowPtr", "colInd", "indexBase"];
    let compute_args = ["k", "alpha", "A", "lda", "B", "ldb", "layout", "sValues", "valueType", "out"];
    for (what, call, status, arg) in &all {
        reset_out();
        assert_eq!(unsafe { call.dynamic(h) }, *status as i32, "sddmmDynamic: {what}: {}", last_error());
        assert!(names("sddmmDynamic", arg), "{what}: message '{}' should name {arg}", last_error());
        assert!(unsafe { std::slice::from_raw_parts(out_ptr, 5) }.iter().all(|&v| v == POISON), "{what}: out written");

        if pattern_args.contains(arg) {
            let mut plan_out: sddmmPlan_t = null_mut();
            assert_eq!(unsafe { call.create_plan(h, &mut plan_out) }, *status as i32, "sddmmCreatePlan: {what}");
            assert!(names("sddmmCreatePlan", arg), "{what}: '{}'", last_error());
            assert!(plan_out.is_null(), "{what}: plan written");
        }
        if compute_args.contains(arg) {
            assert_eq!(unsafe { call.execute_plan(h, plan) }, *status as i32, "sddmmExecutePlan: {what}");
            assert!(names("sddmmExecutePlan", arg), "{what}: '{}'", last_error());
            assert!(unsafe { std::slice::from_raw_parts(out_ptr, 5) }.iter().all(|&v| v == POISON), "{what}");
        }
    }

    // sValues NULL is not an error: S is then the pattern, all ones.
    reset_out();
    let pattern_only = DynamicCall { s_values: null(), ..valid.clone() };
    assert_eq!(unsafe { pattern_only.dynamic(h) }, OK, "{}", last_error());
    assert_eq!(unsafe { std::slice::from_raw_parts(out_ptr, 5) }, computed.as_slice());
    reset_out();
    assert_eq!(unsafe { pattern_only.execute_plan(h, plan) }, OK, "{}", last_error());
    assert_eq!(unsafe { std::slice::from_raw_parts(out_ptr, 5) }, computed.as_slice());

    // Plan object errors: NULL output, NULL / foreign / destroyed plan, double destroy.
    assert_eq!(unsafe { valid.create_plan(h, null_mut()) }, Status::InvalidPointer as i32);
    assert!(names("sddmmCreatePlan", "plan"), "{}", last_error());
    let dead_plan = {
        let mut p: sddmmPlan_t = null_mut();
        assert_eq!(unsafe { valid.create_plan(h, &mut p) }, OK);
        assert_eq!(unsafe { sddmmDestroyPlan(p) }, OK);
        p
    };
    let mut not_a_plan = 0u64;
    for bad in [null_mut(), h as sddmmPlan_t, &mut not_a_plan as *mut u64 as sddmmPlan_t, dead_plan] {
        reset_out();
        assert_eq!(unsafe { valid.execute_plan(h, bad) }, Status::InvalidHandle as i32, "{bad:p}");
        assert!(names("sddmmExecutePlan", "plan"), "{}", last_error());
        assert!(unsafe { std::slice::from_raw_parts(out_ptr, 5) }.iter().all(|&v| v == POISON));
        if !bad.is_null() {
            assert_eq!(unsafe { sddmmDestroyPlan(bad) }, Status::InvalidHandle as i32, "{bad:p}");
            assert!(names("sddmmDestroyPlan", "plan"), "{}", last_error());
        }
    }
    assert_eq!(unsafe { sddmmDestroyPlan(null_mut()) }, OK);
    assert_eq!(unsafe { sddmmDestroyPlan(plan) }, OK);
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

#[test]
fn empty_problems_succeed_and_write_nothing() {
    let h = create_handle();
    let alpha = 1.0f32;
    let row_ptr = [0i32; 4];
    for (m, n, k) in [(0usize, 0usize, 0usize), (3, 0, 5), (0, 4, 2), (3, 4, 0)] {
        let ld = k.max(1) as i32;
        // A and B hold data where they have elements; every pointer addressing none may be NULL
        // (rowPtr always has m + 1 entries).
        let a = vec![1.0f32; m * k];
        let b = vec![1.0f32; n * k];
        let data_or_null = |v: &Vec<f32>| if v.is_empty() { null() } else { v.as_ptr() as *const c_void };
        let status = unsafe {
            sddmmDynamic(
                h,
                m as i32,
                n as i32,
                k as i32,
                &alpha as *const f32 as *const c_void,
                data_or_null(&a),
                ld,
                data_or_null(&b),
                ld,
                Layout::RowMajor as i32,
                0,
                row_ptr.as_ptr(),
                null(),
                null(),
                0,
                ValueType::F32 as i32,
                null_mut(),
            )
        };
        assert_eq!(status, OK, "{m}x{n}, k {k}: {}", last_error());
        assert_eq!(last_algorithm(h), SddmmAlgorithm::Coo, "density of an empty S is 0");
    }
    assert_eq!(unsafe { sddmmDestroy(h) }, OK);
}

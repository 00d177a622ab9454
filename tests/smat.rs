//! SMaT through its C API: SpMM results against a dense f64 reference over random shapes,
//! structures, types, layouts, scalars and index bases; the reordering's effect on block counts; and
//! every exported function's bad-input paths.
//!
//! One file per family on purpose, although long: each integration-test file is its own binary that
//! links the whole library (about 3 MB), so splitting a family's tests would multiply link time and
//! the binaries carried to a GPU machine; the tests are grouped by section instead.

mod common;
use common::last_error;

use common::smat::{Dense, Handle, Matrix, dense_abs, random_matrix, roundoffs};
use common::{POISON, Rng, relative_error};
use half::{bf16, f16};
use sparsegpu::capi::smat::*;
use sparsegpu::scalar::Element;
use sparsegpu::smat::{ReorderMode, SmatMathMode, StorageFormat, Tile};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{band_csr, random_csr};
use sparsegpu::{BackendKind, IndexBase, Layout, Status, ValueType};
use std::ffi::c_void;
use std::ptr::{null, null_mut};

const SUCCESS: i32 = Status::Success as i32;

/// Matrix dimensions of the random cases: one of these half the time, else below the limit.
const SIZES: [usize; 12] = [0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 33, 47];
const SIZE_LIMIT: usize = 70;

/// Asserts a failed call's status and that the message names the function and the argument.
fn assert_fails(status: i32, expected: Status, function: &str, argument: &str) {
    assert_eq!(status, expected as i32, "{function} / {argument}: got status {status}, message '{}'", last_error());
    let message = last_error();
    assert!(
        message.contains(function) && message.contains(argument),
        "message '{message}' should name {function} and {argument}"
    );
}

fn create_matrix<T: Element>(h: &Handle, csr: &CsrMatrix<T>, base: IndexBase) -> Matrix {
    let shift = base as i32;
    let row_ptr: Vec<i32> = csr.row_ptr.iter().map(|p| p + shift).collect();
    let col_ind: Vec<i32> = csr.col_ind.iter().map(|c| c + shift).collect();
    let mut a = null_mut();
    let status = unsafe {
        smatCreateCsr(
            h.0,
            &mut a,
            csr.rows as i32,
            csr.cols as i32,
            csr.nnz() as i64,
            row_ptr.as_ptr(),
            col_ind.as_ptr(),
            csr.values.as_ptr() as *const c_void,
            T::VALUE_TYPE as i32,
            base as i32,
        )
    };
    assert_eq!(status, SUCCESS, "{}", last_error());
    Matrix(a)
}

/// `smatSpMM` on typed slices; the arguments mirror the C signature.
#[allow(clippy::too_many_arguments)]
fn spmm<T: Element>(
    h: &Handle,
    a: &Matrix,
    alpha: T::Compute,
    b: &[T],
    db: Dense,
    beta: T::Compute,
    c: &mut [T],
    dc: Dense,
) -> i32 {
    unsafe {
        smatSpMM(
            h.0,
            a.0,
            db.cols as i32,
            &alpha as *const T::Compute as *const c_void,
            b.as_ptr() as *const c_void,
            db.ld as i32,
            &beta as *const T::Compute as *const c_void,
            c.as_mut_ptr() as *mut c_void,
            dc.ld as i32,
            db.layout as i32,
        )
    }
}

/// Adds duplicates of some entries (they must sum) and reverses the column order of some rows
/// (unsorted rows are accepted).
fn with_duplicates_and_unsorted_rows<T: Element>(rng: &mut Rng, csr: &CsrMatrix<T>) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for r in 0..csr.rows {
        for e in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
            triplets.push((r, csr.col_ind[e] as usize, csr.values[e]));
            if rng.below(8) == 0 {
                triplets.push((r, csr.col_ind[e] as usize, T::from_f64(rng.range(-1.0, 1.0))));
            }
        }
    }
    let mut m = CsrMatrix::from_triplets(csr.rows, csr.cols, triplets);
    for r in 0..m.rows {
        if rng.below(3) == 0 {
            let range = m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize;
            m.col_ind[range.clone()].reverse();
            m.values[range].reverse();
        }
    }
    m
}

/// One random SpMM through the C API, every output element checked against an f64 reference built
/// from the rounded inputs, and C's padding between leading dimensions checked untouched.
fn check_random_spmm<T: Element>(rng: &mut Rng, case: usize) {
    let (base_matrix, structure) = random_matrix::<T>(rng, &SIZES, SIZE_LIMIT);
    let csr = with_duplicates_and_unsorted_rows(rng, &base_matrix);
    let mode = ReorderMode::variants()[rng.below(3)];
    let format = StorageFormat::variants()[rng.below(3)];
    let h = Handle::with_format(BackendKind::Cpu, mode, format);
    check_spmm(rng, &h, &csr, &format!("case {case} {structure} {mode:?} {format:?}"));
}

/// `smatSpMM` with `csr` analysed on `h` for a random width, layout, index base, α and β, checked
/// element by element against the f64 reference.
fn check_spmm<T: Element>(rng: &mut Rng, h: &Handle, csr: &CsrMatrix<T>, what: &str) {
    let (rows, cols) = (csr.rows, csr.cols);
    let n = [0, 1, 2, 3, 8, 17][rng.below(6)];
    let layout = if rng.below(2) == 0 { Layout::RowMajor } else { Layout::ColMajor };
    let base = if rng.below(2) == 0 { IndexBase::Zero } else { IndexBase::One };
    let alpha = T::Compute::from_f64(rng.range(-2.0, 2.0));
    let beta = T::Compute::from_f64(if rng.below(3) == 0 { 0.0 } else { rng.range(-2.0, 2.0) });
    let what = format!(
        "{what} {:?} {rows}x{cols} nnz {} n {n} {layout:?} {base:?} alpha {alpha:?} beta {beta:?}",
        T::VALUE_TYPE,
        csr.nnz()
    );

    let a = create_matrix(h, csr, base);
    let db = Dense::random_ld(rng, cols, n, layout);
    let dc = Dense::random_ld(rng, rows, n, layout);
    let b: Vec<T> = rng.vec(db.len());
    let padding = T::from_f64(POISON);
    let mut c: Vec<T> = vec![padding; dc.len()];
    for i in 0..rows {
        for j in 0..n {
            c[dc.index(i, j)] =
                if beta.to_f64() == 0.0 { T::from_f64(f64::NAN) } else { T::from_f64(rng.range(-1.0, 1.0)) };
        }
    }
    let c_before = c.clone();

    assert_eq!(spmm(h, &a, alpha, &b, db, beta, &mut c, dc), SUCCESS, "{what}: {}", last_error());

    let (dense_a, abs_a) = (csr.to_dense_f64(), dense_abs(csr));
    // 3xTF32 f32 tiles: each product a·b within 2⁻²⁰|a·b| (the split's truncations and the dropped
    // small·small term), besides the FP32 sums.
    let mut math_mode = 0;
    assert_eq!(unsafe { smatGetMathMode(h.0, &mut math_mode) }, SUCCESS);
    let u_product =
        if T::VALUE_TYPE == ValueType::F32 && math_mode == SmatMathMode::Tf32x3 as i32 { 2f64.powi(-20) } else { 0.0 };
    let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
    let (u_out, u_compute) = roundoffs(T::VALUE_TYPE);
    // Subnormal spacing of f16, the only storage type whose underflow matters at these magnitudes.
    let tiny = if T::VALUE_TYPE == ValueType::F16 { 2f64.powi(-24) } else { 0.0 };
    for i in 0..rows {
        for j in 0..n {
            let (mut exact, mut magnitude) = (0.0, 0.0);
            for k in 0..cols {
                let bkj = b[db.index(k, j)].to_f64();
                exact += dense_a[i * cols + k] * bkj;
                magnitude += abs_a[i * cols + k] * bkj.abs();
            }
            let mut want = alpha * exact;
            let mut bound = alpha.abs() * magnitude;
            if beta != 0.0 {
                let old = c_before[dc.index(i, j)].to_f64();
                want += beta * old;
                bound += (beta * old).abs();
            }
            let got = c[dc.index(i, j)].to_f64();
            let tolerance = u_out * want.abs()
                + 4.0 * (cols as f64 + 2.0) * u_compute * bound
                + u_product * alpha.abs() * magnitude
                + tiny;
            assert!((got - want).abs() <= tolerance, "{what}: C[{i},{j}] = {got}, want {want} (tolerance {tolerance})");
        }
    }
    for (idx, (after, before)) in c.iter().zip(&c_before).enumerate() {
        if *before == padding {
            assert_eq!(after, before, "{what}: padding element {idx} of C was written");
        }
    }
}

fn property_loop<T: Element>(cases: usize) {
    let mut rng = Rng::fresh(&format!("smat spmm {:?}", T::VALUE_TYPE));
    for case in 0..cases {
        check_random_spmm::<T>(&mut rng, case);
    }
}

#[test]
fn spmm_matches_dense_reference_f16() {
    property_loop::<f16>(150);
}

#[test]
fn spmm_matches_dense_reference_bf16() {
    property_loop::<bf16>(150);
}

#[test]
fn spmm_matches_dense_reference_f32() {
    property_loop::<f32>(150);
}

#[test]
fn spmm_matches_dense_reference_f64() {
    property_loop::<f64>(150);
}

/// Tiles of the original order (each block row's distinct columns, `tile.cols` to a tile) and
/// distinct positions, counted directly from the triplets.
fn direct_counts<T: Element>(csr: &CsrMatrix<T>, tile: Tile) -> (i64, i64) {
    let mut block_row_columns = std::collections::HashSet::new();
    let mut positions = std::collections::HashSet::new();
    for r in 0..csr.rows {
        for e in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
            let c = csr.col_ind[e] as usize;
            block_row_columns.insert((r / tile.rows, c));
            positions.insert((r, c));
        }
    }
    let mut columns_per_block_row = std::collections::HashMap::<usize, usize>::new();
    for (block_row, _) in block_row_columns {
        *columns_per_block_row.entry(block_row).or_default() += 1;
    }
    let tiles = columns_per_block_row.values().map(|c| c.div_ceil(tile.cols)).sum::<usize>();
    (tiles as i64, positions.len() as i64)
}

/// A CPU handle storing every block row as tiles, as the paper does: the reordering's effect on the
/// block count is then the whole story.
fn tiles_handle(mode: ReorderMode) -> Handle {
    Handle::with_format(BackendKind::Cpu, mode, StorageFormat::Tiles)
}

fn check_reordering<T: Element>(rng: &mut Rng, csr: &CsrMatrix<T>, what: &str) {
    let tile = Tile::for_value_type(T::VALUE_TYPE);
    let (direct_blocks, positions) = direct_counts(csr, tile);
    let handles = ReorderMode::variants().iter().map(|&m| (m, tiles_handle(m))).collect::<Vec<_>>();
    let n = 1 + rng.below(5);
    let layout = if rng.below(2) == 0 { Layout::RowMajor } else { Layout::ColMajor };
    let db = Dense::random_ld(rng, csr.cols, n, layout);
    let dc = Dense::random_ld(rng, csr.rows, n, layout);
    let b: Vec<T> = rng.vec(db.len());
    let c0: Vec<T> = rng.vec(dc.len());
    let (alpha, beta) = (T::Compute::from_f64(1.5), T::Compute::from_f64(-0.5));

    let mut infos = Vec::new();
    let mut outputs = Vec::new();
    for (mode, h) in &handles {
        let a = create_matrix(h, csr, IndexBase::Zero);
        let info = a.info();
        assert_eq!(info.blockCountBeforeReordering, direct_blocks, "{what} {mode:?}");
        assert_eq!((info.rows as usize, info.cols as usize, info.nnz as usize), (csr.rows, csr.cols, csr.nnz()));
        assert_eq!((info.tileRows as usize, info.tileCols as usize), (tile.rows, tile.cols));
        assert_eq!(info.valueType, T::VALUE_TYPE as i32);
        let expected_fill =
            if info.blockCount == 0 { 0.0 } else { positions as f64 / (info.blockCount as f64 * tile.area() as f64) };
        assert!((info.fillRatio - expected_fill).abs() < 1e-12, "{what} {mode:?}: fill {}", info.fillRatio);
        assert!(info.fillRatio <= 1.0);
        let mut c = c0.clone();
        assert_eq!(spmm(h, &a, alpha, &b, db, beta, &mut c, dc), SUCCESS, "{}", last_error());
        infos.push((*mode, info));
        outputs.push(c);
    }
    let info_of = |m: ReorderMode| infos.iter().find(|(mode, _)| *mode == m).map(|(_, i)| *i).unwrap();
    let (auto, always, never) = (info_of(ReorderMode::Auto), info_of(ReorderMode::Always), info_of(ReorderMode::Never));
    assert_eq!(never.reordered, 0, "{what}");
    assert_eq!(never.blockCount, direct_blocks, "{what}");
    assert!(auto.blockCount <= auto.blockCountBeforeReordering, "{what}: AUTO increased the block count");
    // AUTO keeps exactly what ALWAYS computes when (and only when) it stores fewer blocks.
    let expected_auto =
        if always.reordered == 1 && always.blockCount < direct_blocks { always.blockCount } else { direct_blocks };
    assert_eq!(auto.blockCount, expected_auto, "{what}");
    assert_eq!(auto.reordered == 1, auto.blockCount < direct_blocks, "{what}");
    for (k, output) in outputs.iter().enumerate().skip(1) {
        for (idx, (x, y)) in output.iter().zip(&outputs[0]).enumerate() {
            assert!(
                x.to_f64() == y.to_f64(),
                "{what}: {:?} and {:?} differ at {idx}: {x:?} vs {y:?}",
                infos[k].0,
                infos[0].0
            );
        }
    }
}

fn reordering_loop<T: Element>() {
    let mut rng = Rng::fresh(&format!("smat reordering {:?}", T::VALUE_TYPE));
    for case in 0..30 {
        let (csr, structure) = random_matrix::<T>(&mut rng, &SIZES, SIZE_LIMIT);
        check_reordering(&mut rng, &csr, &format!("case {case} {structure} {:?}", T::VALUE_TYPE));
        let (groups, tiles_per_group) = (1 + rng.below(6), 1 + rng.below(3));
        let shuffled = row_shuffled_groups::<T>(&mut rng, groups, tiles_per_group);
        check_reordering(&mut rng, &shuffled.0, &format!("case {case} shuffled groups {:?}", T::VALUE_TYPE));
    }
}

#[test]
fn reordering_never_changes_results_and_auto_never_adds_blocks() {
    reordering_loop::<f16>();
    reordering_loop::<bf16>();
    reordering_loop::<f32>();
    reordering_loop::<f64>();
}

/// `groups` groups of `tiles_per_group · tile.rows` rows; the rows of group g all fill the same three
/// column blocks, disjoint from other groups'. Rows are then shuffled. Returns the matrix and the
/// tile count of the unshuffled order (the optimum: three full tiles per block row).
fn row_shuffled_groups<T: Element>(rng: &mut Rng, groups: usize, tiles_per_group: usize) -> (CsrMatrix<T>, i64) {
    let tile = Tile::for_value_type(T::VALUE_TYPE);
    let group_rows = tiles_per_group * tile.rows;
    let rows = groups * group_rows;
    let cols = groups * 3 * tile.cols;
    let mut permutation: Vec<usize> = (0..rows).collect();
    for i in (1..rows).rev() {
        permutation.swap(i, rng.below(i + 1));
    }
    let mut triplets = Vec::new();
    for (original, &shuffled) in permutation.iter().enumerate() {
        let group = original / group_rows;
        for c in group * 3 * tile.cols..(group + 1) * 3 * tile.cols {
            triplets.push((shuffled, c, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    (CsrMatrix::from_triplets(rows, cols, triplets), (groups * tiles_per_group * 3) as i64)
}

#[test]
fn reordering_recovers_shuffled_block_structure() {
    fn check<T: Element>(rng: &mut Rng) {
        let (csr, optimum) = row_shuffled_groups::<T>(rng, 6, 2);
        let h = tiles_handle(ReorderMode::Auto);
        let info = create_matrix(&h, &csr, IndexBase::Zero).info();
        assert!(
            info.blockCountBeforeReordering > optimum,
            "{:?}: the shuffle should scatter the groups",
            T::VALUE_TYPE
        );
        assert_eq!(info.blockCount, optimum, "{:?}", T::VALUE_TYPE);
        assert_eq!(info.reordered, 1);
    }
    let mut rng = Rng::fresh("smat shuffled groups");
    check::<f16>(&mut rng);
    check::<bf16>(&mut rng);
    check::<f32>(&mut rng);
    check::<f64>(&mut rng);
}

#[test]
fn auto_keeps_the_order_of_a_band_matrix_when_clustering_adds_blocks() {
    let mut rng = Rng::fresh("smat band");
    for half_width in [1, 2, 5, 9] {
        let csr = band_csr::<f64>(&mut rng, 200, half_width);
        let always = create_matrix(&tiles_handle(ReorderMode::Always), &csr, IndexBase::Zero).info();
        let auto = create_matrix(&tiles_handle(ReorderMode::Auto), &csr, IndexBase::Zero).info();
        assert_eq!(auto.blockCountBeforeReordering, always.blockCountBeforeReordering);
        if always.blockCount >= always.blockCountBeforeReordering {
            assert_eq!(
                (auto.reordered, auto.blockCount),
                (0, auto.blockCountBeforeReordering),
                "half width {half_width}"
            );
        } else {
            assert_eq!((auto.reordered, auto.blockCount), (1, always.blockCount), "half width {half_width}");
        }
    }
}

/// `groups` groups of `tile.rows` rows each filling three whole column blocks of their own, rows
/// shuffled: before reordering every block row mixes rows of many groups and its tiles are mostly
/// padding; the clustering restores full tiles.
fn shuffled_full_groups<T: Element>(rng: &mut Rng, groups: usize) -> CsrMatrix<T> {
    let tile = Tile::for_value_type(T::VALUE_TYPE);
    let rows = groups * tile.rows;
    let mut permutation: Vec<usize> = (0..rows).collect();
    for i in (1..rows).rev() {
        permutation.swap(i, rng.below(i + 1));
    }
    let mut triplets = Vec::new();
    for (original, &shuffled) in permutation.iter().enumerate() {
        let group = original / tile.rows;
        for c in group * 3 * tile.cols..(group + 1) * 3 * tile.cols {
            triplets.push((shuffled, c, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(rows, groups * 3 * tile.cols, triplets)
}

/// Every row of C comes from exactly one part, and AUTO stays within its memory budget.
fn assert_consistent(info: &smatMatrixInfo_t, format: StorageFormat, what: &str) {
    assert_eq!(info.rowsInTiles + info.rowsInCsr, info.rows as i64, "{what}");
    assert!(info.entriesInCsr <= info.nnz, "{what}");
    if format == StorageFormat::Auto {
        assert!(info.bytes <= 2 * info.csrBytes, "{what}: {} bytes for a CSR of {}", info.bytes, info.csrBytes);
    }
    if format == StorageFormat::Csr {
        assert_eq!(
            (info.rowsInTiles, info.blockCount, info.reordered, info.entriesInCsr),
            (0, 0, 0, info.nnz),
            "{what}"
        );
    }
}

#[test]
fn auto_gives_tiles_to_full_block_rows_and_csr_to_the_rest() {
    fn check<T: Element>(rng: &mut Rng) {
        let auto = Handle::new(BackendKind::Cpu, ReorderMode::Auto);
        let what = format!("{:?}", T::VALUE_TYPE);

        // Scattered entries: a tile would hold about one of them.
        let scattered = random_csr::<T>(rng, 400, 300, 0.01);
        let info = create_matrix(&auto, &scattered, IndexBase::Zero).info();
        assert_eq!((info.rowsInTiles, info.blockCount, info.reordered), (0, 0, 0), "{what} scattered");
        assert_consistent(&info, StorageFormat::Auto, &what);

        // Whole tiles, rows shuffled: reordering restores them and AUTO keeps them as tiles.
        let groups = shuffled_full_groups::<T>(rng, 96);
        let info = create_matrix(&auto, &groups, IndexBase::Zero).info();
        assert_eq!((info.rowsInTiles, info.reordered, info.fillRatio), (groups.rows as i64, 1, 1.0), "{what} groups");
        assert_eq!(info.blockCount, 96 * 3, "{what} groups");
        assert_consistent(&info, StorageFormat::Auto, &what);
        // Without reordering a block row mixes rows of about 15 groups, so its tiles are about 1/15
        // full, too empty to pay: (nearly) everything is CSR.
        let never = create_matrix(&Handle::new(BackendKind::Cpu, ReorderMode::Never), &groups, IndexBase::Zero).info();
        assert_eq!(never.reordered, 0, "{what} groups unreordered");
        assert!(never.rowsInTiles * 8 < groups.rows as i64, "{what}: {} rows in tiles unreordered", never.rowsInTiles);

        // Both stacked: split between the parts, and the product is right across the split.
        let mut triplets = Vec::new();
        let unshuffled = shuffled_full_groups::<T>(rng, 1);
        for r in 0..unshuffled.rows {
            for e in unshuffled.row_ptr[r] as usize..unshuffled.row_ptr[r + 1] as usize {
                triplets.push((r, unshuffled.col_ind[e] as usize, unshuffled.values[e]));
            }
        }
        let offset = unshuffled.rows;
        for r in 0..scattered.rows {
            for e in scattered.row_ptr[r] as usize..scattered.row_ptr[r + 1] as usize {
                triplets.push((offset + r, scattered.col_ind[e] as usize, scattered.values[e]));
            }
        }
        let stacked = CsrMatrix::from_triplets(offset + scattered.rows, scattered.cols.max(unshuffled.cols), triplets);
        // In their own order (reordering may gather 16 scattered rows that share a column block into
        // a tile that pays, which is right but makes the split depend on the draw).
        let in_order = Handle::new(BackendKind::Cpu, ReorderMode::Never);
        let info = create_matrix(&in_order, &stacked, IndexBase::Zero).info();
        assert_eq!((info.rowsInTiles, info.rowsInCsr), (offset as i64, scattered.rows as i64), "{what} stacked");
        assert_consistent(&info, StorageFormat::Auto, &what);
        for _ in 0..4 {
            check_spmm(rng, &in_order, &stacked, &format!("{what} stacked"));
        }
        // Reordered, the full group stays in tiles.
        let info = create_matrix(&auto, &stacked, IndexBase::Zero).info();
        assert!(info.rowsInTiles >= offset as i64, "{what} stacked, reordered: {} rows in tiles", info.rowsInTiles);
        assert_consistent(&info, StorageFormat::Auto, &what);
        check_spmm(rng, &auto, &stacked, &format!("{what} stacked, reordered"));

        // A block row of many full tiles stays tiles however long it is (the GPU cuts it into runs).
        let tile = Tile::for_value_type(T::VALUE_TYPE);
        let cols = 100 * tile.cols;
        let full = (0..tile.rows).flat_map(|r| (0..cols).map(move |c| (r, c, T::from_f64(0.5)))).collect();
        let wide = CsrMatrix::<T>::from_triplets(tile.rows, cols, full);
        let info = create_matrix(&auto, &wide, IndexBase::Zero).info();
        assert_eq!((info.rowsInTiles, info.blockCount), (tile.rows as i64, 100), "{what} wide");

        // CSR format: no tiles and no reordering, whatever the matrix.
        let csr_only = Handle::with_format(BackendKind::Cpu, ReorderMode::Always, StorageFormat::Csr);
        let info = create_matrix(&csr_only, &groups, IndexBase::Zero).info();
        assert_consistent(&info, StorageFormat::Csr, &what);
    }
    let mut rng = Rng::fresh("smat auto format");
    check::<f16>(&mut rng);
    check::<bf16>(&mut rng);
    check::<f32>(&mut rng);
    check::<f64>(&mut rng);
}

/// Matrices with more entries than one analysis task takes, so every parallel pass splits them.
/// Rows that share columns scattered over many column blocks: every block would hold one column, but
/// a tile gathers `tile.cols` of them, so each block row is full tiles and AUTO keeps it as tiles.
#[test]
fn tiles_gather_shared_columns_scattered_over_blocks() {
    fn check<T: Element>(rng: &mut Rng) {
        let tile = Tile::for_value_type(T::VALUE_TYPE);
        let what = format!("{:?}", T::VALUE_TYPE);
        let (block_rows, tiles_per_block_row, stride) = (5, 3, 3 * tile.cols + 1);
        let rows = block_rows * tile.rows - 3;
        let mut triplets = Vec::new();
        for r in 0..rows {
            // Block row g uses its own columns g, g + stride, g + 2·stride, … (distinct across g).
            let g = r / tile.rows;
            for q in 0..tiles_per_block_row * tile.cols {
                triplets.push((r, g + q * stride, T::from_f64(rng.range(-1.0, 1.0))));
            }
        }
        let cols = block_rows + tiles_per_block_row * tile.cols * stride;
        let csr = CsrMatrix::from_triplets(rows, cols, triplets);
        let auto = Handle::new(BackendKind::Cpu, ReorderMode::Auto);
        let info = create_matrix(&auto, &csr, IndexBase::Zero).info();
        assert_eq!(
            (info.rowsInTiles, info.blockCount, info.blockCountBeforeReordering),
            (rows as i64, (block_rows * tiles_per_block_row) as i64, (block_rows * tiles_per_block_row) as i64),
            "{what}"
        );
        // The last block row is 3 rows short of full.
        let positions = rows * tiles_per_block_row * tile.cols;
        assert_eq!(info.fillRatio, positions as f64 / (info.blockCount as usize * tile.area()) as f64, "{what}");
        assert_consistent(&info, StorageFormat::Auto, &what);
        for _ in 0..4 {
            check_spmm(rng, &auto, &csr, &format!("{what} gathered"));
        }
    }
    let mut rng = Rng::fresh("smat gathered tiles");
    check::<f16>(&mut rng);
    check::<bf16>(&mut rng);
    check::<f32>(&mut rng);
    check::<f64>(&mut rng);
}

/// A value of entry (r, q) that is not a multiple of a power of two (so its TF32 split has a small part).
fn value_with_low_bits(r: usize, q: usize) -> f32 {
    1.0 + (r * 12 + q) as f32 / 997.0
}

/// `rows` rows in f32 block rows of 16, row r holding `per_row(r)` of the same 32 columns of its block
/// row (so 16 × 8 tiles are per_row/32 full), values with low mantissa bits set.
fn partly_full_block_rows(rows: usize, per_row: impl Fn(usize) -> usize) -> CsrMatrix<f32> {
    let tile = Tile::for_value_type(ValueType::F32);
    let triplets = (0..rows)
        .flat_map(|r| {
            (0..per_row(r)).map(move |q| (r, (r / tile.rows) * 32 + (r + 3 * q) % 32, value_with_low_bits(r, q)))
        })
        .collect();
    CsrMatrix::from_triplets(rows, rows.div_ceil(tile.rows) * 32, triplets)
}

/// SMAT_MATH_MODE_TF32X3: f32 tiles in 3xTF32 stay within FP32-level error of the f64 product; AUTO
/// gives f32 block rows to tiles from fill 1/4 in either math mode (3xTF32 on tensor cores, exact
/// FP32 by FMA four columns a lane) and leaves emptier ones to CSR.
#[test]
fn tf32x3_tiles_are_accurate_and_chosen_where_they_pay() {
    let mut rng = Rng::fresh("smat 3xtf32");
    let tf32x3 = |format| {
        let h = Handle::with_format(BackendKind::Cpu, ReorderMode::Auto, format);
        assert_eq!(unsafe { smatSetMathMode(h.0, SmatMathMode::Tf32x3 as i32) }, SUCCESS);
        h
    };
    for case in 0..40 {
        let (csr, structure) = random_matrix::<f32>(&mut rng, &SIZES, SIZE_LIMIT);
        let format = StorageFormat::variants()[rng.below(3)];
        check_spmm(&mut rng, &tf32x3(format), &csr, &format!("case {case} {structure} 3xTF32 {format:?}"));
    }
    // Four block rows of `per_row` entries a row: 16 × 8 tiles per_row/32 full.
    let tile = Tile::for_value_type(ValueType::F32);
    for (per_row, rows_in_tiles) in [(12, 4 * tile.rows as i64), (6, 0)] {
        let csr = partly_full_block_rows(4 * tile.rows, |_| per_row);
        let auto = |h: &Handle| create_matrix(h, &csr, IndexBase::Zero).info();
        let (exact, split) =
            (auto(&Handle::new(BackendKind::Cpu, ReorderMode::Never)), auto(&tf32x3(StorageFormat::Auto)));
        assert_eq!((exact.rowsInTiles, split.rowsInTiles), (rows_in_tiles, rows_in_tiles), "{per_row} a row");
        if rows_in_tiles > 0 {
            assert_eq!((exact.fillRatio, split.fillRatio), (0.375, 0.375));
        }
        check_spmm(&mut rng, &tf32x3(StorageFormat::Auto), &csr, &format!("{per_row}/32-full tiles in 3xTF32"));
    }
}

/// AUTO gives a CSR part beside the tiles to the tiles when it is small (a quarter of the entries or
/// less, few rows) and each of its block rows (the last one partial) at least half as full as pays,
/// and keeps a larger one as CSR.
#[test]
fn auto_folds_a_small_csr_part_into_the_tiles() {
    let mut rng = Rng::fresh("smat small csr part");
    let tile = Tile::for_value_type(ValueType::F32);
    // Block rows 3/8 full (1/4 pays for f32): `full` of 12 entries a row, then `sparse` of 6 a row,
    // then 3 more rows of 6.
    let stacked = |full: usize, sparse: usize| {
        partly_full_block_rows((full + sparse) * tile.rows + 3, |r| if r / tile.rows < full { 12 } else { 6 })
    };
    let auto = Handle::new(BackendKind::Cpu, ReorderMode::Never);
    for (full, sparse, rows_in_tiles) in [(12, 2, 14 * tile.rows + 3), (4, 4, 4 * tile.rows)] {
        let csr = stacked(full, sparse);
        let info = create_matrix(&auto, &csr, IndexBase::Zero).info();
        let what = format!("{full} block rows 3/8 full, {sparse} and 3 rows 3/16 full");
        assert_eq!(info.rowsInTiles, rows_in_tiles as i64, "{what}");
        assert_consistent(&info, StorageFormat::Auto, &what);
        check_spmm(&mut rng, &auto, &csr, &what);
    }
}

#[test]
fn large_matrices_analyse_in_parallel_runs() {
    let mut rng = Rng::fresh("smat large");
    let scattered = random_csr::<f16>(&mut rng, 1500, 1400, 0.03);
    let blocks = sparsegpu::testgen::block_csr::<f16>(&mut rng, 1024, 1024, 16, 0.2, 0.8);
    let shuffled = shuffled_full_groups::<f16>(&mut rng, 60);
    for (name, csr) in [("scattered", &scattered), ("blocks", &blocks), ("shuffled", &shuffled)] {
        assert!(csr.nnz() > 40_000, "{name}: {} entries", csr.nnz());
        for &format in StorageFormat::variants() {
            let h = Handle::with_format(BackendKind::Cpu, ReorderMode::Auto, format);
            assert_consistent(&create_matrix(&h, csr, IndexBase::Zero).info(), format, name);
            check_spmm(&mut rng, &h, csr, &format!("{name} {format:?}"));
        }
    }
}

/// Every nonzero in one row (long enough to be split into segments on the GPU), in every format.
#[test]
fn all_nonzeros_in_one_row() {
    let mut rng = Rng::fresh("smat one row");
    let (rows, cols) = (40, 3000);
    let mut triplets = Vec::new();
    for c in 0..cols {
        if rng.below(4) != 0 {
            triplets.push((17, c, rng.range(-1.0, 1.0)));
        }
    }
    let csr = CsrMatrix::<f64>::from_triplets(rows, cols, triplets);
    for &format in StorageFormat::variants() {
        let h = Handle::with_format(BackendKind::Cpu, ReorderMode::Auto, format);
        assert_consistent(&create_matrix(&h, &csr, IndexBase::Zero).info(), format, "one row");
        for _ in 0..3 {
            check_spmm(&mut rng, &h, &csr, &format!("one row {format:?}"));
        }
    }
}

#[test]
fn every_format_accounts_for_every_row() {
    let mut rng = Rng::fresh("smat formats");
    for case in 0..200 {
        let (csr, structure) = random_matrix::<f16>(&mut rng, &SIZES, SIZE_LIMIT);
        let (mode, format) = (ReorderMode::variants()[rng.below(3)], StorageFormat::variants()[rng.below(3)]);
        let info = create_matrix(&Handle::with_format(BackendKind::Cpu, mode, format), &csr, IndexBase::Zero).info();
        assert_consistent(&info, format, &format!("case {case} {structure} {mode:?} {format:?}"));
    }
}

#[test]
fn threshold_controls_merging() {
    // Rows alternate between two patterns that share 1 of 3 column blocks (distance 2/3), each filling
    // its two blocks: they merge at τ = 1 but not at τ = 0.5.
    let tile = Tile::for_value_type(ValueType::F64);
    let rows = 4 * tile.rows;
    let mut triplets = Vec::new();
    for r in 0..rows {
        let blocks = if r % 2 == 0 { [0, 1] } else { [1, 2] };
        for b in blocks {
            for c in b * tile.cols..(b + 1) * tile.cols {
                triplets.push((r, c, 1.0f64));
            }
        }
    }
    let csr = CsrMatrix::from_triplets(rows, 3 * tile.cols, triplets);
    let h = tiles_handle(ReorderMode::Always);
    let mut default_threshold = 0.0;
    assert_eq!(unsafe { smatGetJaccardThreshold(h.0, &mut default_threshold) }, SUCCESS);
    assert_eq!(default_threshold, 0.5);
    let separated = create_matrix(&h, &csr, IndexBase::Zero).info();
    // Even rows cluster, then odd rows: 2 tiles per block row instead of 3.
    assert_eq!((separated.blockCountBeforeReordering, separated.blockCount, separated.reordered), (12, 8, 1));
    assert_eq!(unsafe { smatSetJaccardThreshold(h.0, 1.0) }, SUCCESS);
    let merged = create_matrix(&h, &csr, IndexBase::Zero).info();
    // One cluster in scan order: the identity, so nothing is reordered.
    assert_eq!((merged.blockCount, merged.reordered), (12, 0));

    // The comparison is strict, as in the paper: rows {0, 1} and {0, 1, 2, 3} are at distance exactly
    // 0.5, so at τ = 0.5 they stay apart (even rows cluster, then odd rows) ...
    let mut triplets = Vec::new();
    for r in 0..rows {
        let blocks = if r % 2 == 0 { 2 } else { 4 };
        for c in 0..blocks * tile.cols {
            triplets.push((r, c, 1.0f64));
        }
    }
    let csr = CsrMatrix::from_triplets(rows, 4 * tile.cols, triplets);
    assert_eq!(unsafe { smatSetJaccardThreshold(h.0, 0.5) }, SUCCESS);
    let strict = create_matrix(&h, &csr, IndexBase::Zero).info();
    assert_eq!((strict.blockCountBeforeReordering, strict.blockCount, strict.reordered), (16, 12, 1));
    // ... and just above 0.5 they merge into one cluster in scan order.
    assert_eq!(unsafe { smatSetJaccardThreshold(h.0, 0.5000001) }, SUCCESS);
    let merged = create_matrix(&h, &csr, IndexBase::Zero).info();
    assert_eq!((merged.blockCount, merged.reordered), (16, 0));
}

#[test]
fn matrix_outlives_its_handle_and_copies_the_input() {
    let mut rng = Rng::fresh("smat lifetime");
    let csr = random_csr::<f64>(&mut rng, 20, 13, 0.3);
    let a = {
        let h = Handle::new(BackendKind::Cpu, ReorderMode::Auto);
        let mut copy = csr.clone();
        let a = create_matrix(&h, &copy, IndexBase::Zero);
        copy.values.iter_mut().for_each(|v| *v = f64::NAN);
        copy.col_ind.iter_mut().for_each(|c| *c = -5);
        a
    };
    let h = Handle::new(BackendKind::Cpu, ReorderMode::Never);
    let db = Dense { rows: 13, cols: 2, ld: 2, layout: Layout::RowMajor };
    let dc = Dense { rows: 20, cols: 2, ld: 2, layout: Layout::RowMajor };
    let b: Vec<f64> = rng.vec(db.len());
    let mut c = vec![0.0; dc.len()];
    assert_eq!(spmm(&h, &a, 1.0, &b, db, 0.0, &mut c, dc), SUCCESS, "{}", last_error());
    let dense = csr.to_dense_f64();
    let want: Vec<f64> =
        (0..20 * 2).map(|ij| (0..13).map(|k| dense[(ij / 2) * 13 + k] * b[k * 2 + ij % 2]).sum()).collect();
    assert!(relative_error(&c, &want) < 1e-14, "the matrix must not depend on the freed input arrays");
}

// ---------------------------------------------------------------------------------------------
// Every exported function's argument checks.

#[test]
fn handle_functions_and_their_errors() {
    unsafe {
        assert_fails(smatCreate(null_mut()), Status::InvalidPointer, "smatCreate", "handle");
        assert_eq!(smatDestroy(null_mut()), SUCCESS);

        let mut h = null_mut();
        assert_eq!(smatCreate(&mut h), SUCCESS);
        let mut stream = 7usize as *mut c_void;
        assert_eq!(smatGetStream(h, &mut stream), SUCCESS);
        assert!(stream.is_null());
        assert_eq!(smatSetStream(h, 0x1234 as *mut c_void), SUCCESS);
        assert_eq!(smatGetStream(h, &mut stream), SUCCESS);
        assert_eq!(stream as usize, 0x1234);
        assert_fails(smatGetStream(h, null_mut()), Status::InvalidPointer, "smatGetStream", "stream");
        assert_fails(smatSetStream(null_mut(), null_mut()), Status::InvalidHandle, "smatSetStream", "handle");

        let mut backend = -1;
        assert_eq!(smatSetBackend(h, BackendKind::Cpu as i32), SUCCESS);
        assert_eq!(smatGetBackend(h, &mut backend), SUCCESS);
        assert_eq!(backend, BackendKind::Cpu as i32);
        match smatSetBackend(h, BackendKind::Cuda as i32) {
            SUCCESS => {
                // A GPU machine: CUDA is accepted; go back to the CPU for the rest of the test.
                assert!(sparsegpu::backend::cuda::availability().is_ok());
                assert_eq!(smatGetBackend(h, &mut backend), SUCCESS);
                assert_eq!(backend, BackendKind::Cuda as i32);
                assert_eq!(smatSetBackend(h, BackendKind::Cpu as i32), SUCCESS);
            }
            status => assert_fails(status, Status::BackendUnavailable, "smatSetBackend", "CUDA"),
        }
        assert_fails(smatSetBackend(h, 17), Status::InvalidValue, "smatSetBackend", "backend");
        assert_eq!(smatGetBackend(h, &mut backend), SUCCESS);
        assert_eq!(backend, BackendKind::Cpu as i32, "a failed set must not change the backend");
        assert_fails(smatGetBackend(h, null_mut()), Status::InvalidPointer, "smatGetBackend", "backend");
        assert_fails(smatGetBackend(null_mut(), &mut backend), Status::InvalidHandle, "smatGetBackend", "handle");

        let mut mode = -1;
        assert_eq!(smatGetReorderMode(h, &mut mode), SUCCESS);
        assert_eq!(mode, ReorderMode::Auto as i32);
        for &m in ReorderMode::variants() {
            assert_eq!(smatSetReorderMode(h, m as i32), SUCCESS);
            assert_eq!(smatGetReorderMode(h, &mut mode), SUCCESS);
            assert_eq!(mode, m as i32);
        }
        assert_fails(smatSetReorderMode(h, 3), Status::InvalidValue, "smatSetReorderMode", "mode");
        assert_fails(smatSetReorderMode(h, -1), Status::InvalidValue, "smatSetReorderMode", "mode");
        assert_eq!(smatGetReorderMode(h, &mut mode), SUCCESS);
        assert_eq!(mode, ReorderMode::Never as i32);
        assert_fails(smatGetReorderMode(h, null_mut()), Status::InvalidPointer, "smatGetReorderMode", "mode");
        assert_fails(smatSetReorderMode(null_mut(), 0), Status::InvalidHandle, "smatSetReorderMode", "handle");

        let mut format = -1;
        assert_eq!(smatGetFormat(h, &mut format), SUCCESS);
        assert_eq!(format, StorageFormat::Auto as i32);
        for &f in StorageFormat::variants() {
            assert_eq!(smatSetFormat(h, f as i32), SUCCESS);
            assert_eq!(smatGetFormat(h, &mut format), SUCCESS);
            assert_eq!(format, f as i32);
        }
        assert_fails(smatSetFormat(h, 3), Status::InvalidValue, "smatSetFormat", "format");
        assert_fails(smatSetFormat(h, -1), Status::InvalidValue, "smatSetFormat", "format");
        assert_eq!(smatGetFormat(h, &mut format), SUCCESS);
        assert_eq!(format, StorageFormat::Csr as i32);
        assert_fails(smatGetFormat(h, null_mut()), Status::InvalidPointer, "smatGetFormat", "format");
        assert_fails(smatSetFormat(null_mut(), 0), Status::InvalidHandle, "smatSetFormat", "handle");

        let mut math_mode = -1;
        assert_eq!(smatGetMathMode(h, &mut math_mode), SUCCESS);
        assert_eq!(math_mode, SmatMathMode::Default as i32);
        for &m in SmatMathMode::variants() {
            assert_eq!(smatSetMathMode(h, m as i32), SUCCESS);
            assert_eq!(smatGetMathMode(h, &mut math_mode), SUCCESS);
            assert_eq!(math_mode, m as i32);
        }
        assert_fails(smatSetMathMode(h, 2), Status::InvalidValue, "smatSetMathMode", "mode");
        assert_eq!(smatGetMathMode(h, &mut math_mode), SUCCESS);
        assert_eq!(math_mode, SmatMathMode::Tf32x3 as i32);
        assert_fails(smatGetMathMode(h, null_mut()), Status::InvalidPointer, "smatGetMathMode", "mode");
        assert_fails(smatSetMathMode(null_mut(), 0), Status::InvalidHandle, "smatSetMathMode", "handle");

        let mut threshold = -1.0;
        assert_eq!(smatSetJaccardThreshold(h, 0.25), SUCCESS);
        for bad in [0.0, -0.5, 1.0000001, f64::NAN, f64::INFINITY] {
            assert_fails(smatSetJaccardThreshold(h, bad), Status::InvalidValue, "smatSetJaccardThreshold", "threshold");
        }
        assert_eq!(smatGetJaccardThreshold(h, &mut threshold), SUCCESS);
        assert_eq!(threshold, 0.25);
        assert_eq!(smatSetJaccardThreshold(h, 1.0), SUCCESS);
        assert_fails(
            smatGetJaccardThreshold(h, null_mut()),
            Status::InvalidPointer,
            "smatGetJaccardThreshold",
            "threshold",
        );
        assert_fails(
            smatSetJaccardThreshold(null_mut(), 0.5),
            Status::InvalidHandle,
            "smatSetJaccardThreshold",
            "handle",
        );

        // Destroyed and foreign handles are detected by every function that takes one.
        assert_eq!(smatDestroy(h), SUCCESS);
        let mut local = 0u64;
        let foreign = &mut local as *mut u64 as smatHandle_t;
        for bad in [h, foreign] {
            assert_fails(smatDestroy(bad), Status::InvalidHandle, "smatDestroy", "handle");
            assert_fails(smatSetStream(bad, null_mut()), Status::InvalidHandle, "smatSetStream", "handle");
            assert_fails(smatGetStream(bad, &mut stream), Status::InvalidHandle, "smatGetStream", "handle");
            assert_fails(smatSetBackend(bad, 2), Status::InvalidHandle, "smatSetBackend", "handle");
            assert_fails(smatGetBackend(bad, &mut backend), Status::InvalidHandle, "smatGetBackend", "handle");
            assert_fails(smatSetReorderMode(bad, 0), Status::InvalidHandle, "smatSetReorderMode", "handle");
            assert_fails(smatGetReorderMode(bad, &mut mode), Status::InvalidHandle, "smatGetReorderMode", "handle");
            assert_fails(smatSetFormat(bad, 0), Status::InvalidHandle, "smatSetFormat", "handle");
            assert_fails(smatGetFormat(bad, &mut format), Status::InvalidHandle, "smatGetFormat", "handle");
            assert_fails(smatSetMathMode(bad, 0), Status::InvalidHandle, "smatSetMathMode", "handle");
            assert_fails(smatGetMathMode(bad, &mut math_mode), Status::InvalidHandle, "smatGetMathMode", "handle");
            assert_fails(smatSetJaccardThreshold(bad, 0.5), Status::InvalidHandle, "smatSetJaccardThreshold", "handle");
            assert_fails(
                smatGetJaccardThreshold(bad, &mut threshold),
                Status::InvalidHandle,
                "smatGetJaccardThreshold",
                "handle",
            );
        }
        assert_eq!(local, 0, "a foreign pointer must not be written through");
        assert_eq!((mode, backend, threshold), (ReorderMode::Never as i32, BackendKind::Cpu as i32, 0.25));
    }
}

/// A valid 3 × 4 CSR with 5 entries in base `base`, as (rowPtr, colInd, values).
fn small_csr(base: i32) -> (Vec<i32>, Vec<i32>, Vec<f32>) {
    (
        vec![base, base + 2, base + 2, base + 5],
        vec![base, base + 3, base + 1, base + 2, base + 3],
        vec![1.0, 2.0, 3.0, 4.0, 5.0],
    )
}

#[test]
fn create_csr_rejects_bad_input_and_leaves_the_output_untouched() {
    let h = Handle::new(BackendKind::Cpu, ReorderMode::Auto);
    let sentinel = 0x5150usize as smatMatrix_t;
    let (rp, ci, v) = small_csr(0);
    let vp = v.as_ptr() as *const c_void;
    let f32_type = ValueType::F32 as i32;
    struct Case<'a> {
        handle: smatHandle_t,
        out: bool,
        rows: i32,
        cols: i32,
        nnz: i64,
        row_ptr: *const i32,
        col_ind: *const i32,
        values: *const c_void,
        value_type: i32,
        base: i32,
        expect: Status,
        argument: &'a str,
    }
    let good = Case {
        handle: h.0,
        out: true,
        rows: 3,
        cols: 4,
        nnz: 5,
        row_ptr: rp.as_ptr(),
        col_ind: ci.as_ptr(),
        values: vp,
        value_type: f32_type,
        base: 0,
        expect: Status::Success,
        argument: "",
    };
    let non_monotone = [0, 3, 2, 5];
    let bad_first = [1, 3, 3, 6];
    let bad_last = [0, 2, 2, 4];
    let col_too_big = [0, 4, 1, 2, 3];
    let col_negative = [0, 3, -1, 2, 3];
    let (rp1, _, _) = small_csr(1);
    let mut destroyed = null_mut();
    unsafe {
        assert_eq!(smatCreate(&mut destroyed), SUCCESS);
        assert_eq!(smatDestroy(destroyed), SUCCESS);
    }
    let mut local = 0u64;
    let foreign = &mut local as *mut u64 as smatHandle_t;
    let cases = [
        Case { handle: null_mut(), expect: Status::InvalidHandle, argument: "handle", ..good },
        Case { handle: destroyed, expect: Status::InvalidHandle, argument: "handle", ..good },
        Case { handle: foreign, expect: Status::InvalidHandle, argument: "handle", ..good },
        Case { out: false, expect: Status::InvalidPointer, argument: "A", ..good },
        Case { rows: -1, expect: Status::InvalidSize, argument: "rows", ..good },
        Case { cols: -2, expect: Status::InvalidSize, argument: "cols", ..good },
        Case { nnz: -1, expect: Status::InvalidSize, argument: "nnz", ..good },
        Case { row_ptr: null(), expect: Status::InvalidPointer, argument: "rowPtr", ..good },
        Case { col_ind: null(), expect: Status::InvalidPointer, argument: "colInd", ..good },
        Case { values: null(), expect: Status::InvalidPointer, argument: "values", ..good },
        Case { value_type: 4, expect: Status::InvalidValue, argument: "valueType", ..good },
        Case { value_type: -1, expect: Status::InvalidValue, argument: "valueType", ..good },
        Case { base: 2, expect: Status::InvalidValue, argument: "indexBase", ..good },
        Case { nnz: 4, expect: Status::InvalidSparseMatrix, argument: "nnz", ..good },
        Case { nnz: 6, row_ptr: bad_last.as_ptr(), expect: Status::InvalidSparseMatrix, argument: "nnz", ..good },
        Case { row_ptr: non_monotone.as_ptr(), expect: Status::InvalidSparseMatrix, argument: "rowPtr", ..good },
        Case { row_ptr: bad_first.as_ptr(), expect: Status::InvalidSparseMatrix, argument: "rowPtr[0]", ..good },
        // One-based row pointers with a zero-based claim, and the reverse.
        Case { row_ptr: rp1.as_ptr(), expect: Status::InvalidSparseMatrix, argument: "rowPtr[0]", ..good },
        Case { base: 1, expect: Status::InvalidSparseMatrix, argument: "rowPtr[0]", ..good },
        Case { col_ind: col_too_big.as_ptr(), expect: Status::InvalidSparseMatrix, argument: "colInd[1]", ..good },
        Case { col_ind: col_negative.as_ptr(), expect: Status::InvalidSparseMatrix, argument: "colInd[2]", ..good },
        // Misaligned values for f32 (the f64 type would need 8-byte alignment of a 4-byte-aligned array).
        Case {
            values: (vp as *const u8).wrapping_add(1) as *const c_void,
            expect: Status::InvalidPointer,
            argument: "values",
            ..good
        },
    ];
    for case in &cases {
        let mut out = sentinel;
        let out_ptr = if case.out { &mut out as *mut smatMatrix_t } else { null_mut() };
        let status = unsafe {
            smatCreateCsr(
                case.handle,
                out_ptr,
                case.rows,
                case.cols,
                case.nnz,
                case.row_ptr,
                case.col_ind,
                case.values,
                case.value_type,
                case.base,
            )
        };
        assert_fails(status, case.expect, "smatCreateCsr", case.argument);
        assert_eq!(out, sentinel, "output written on failure ({})", case.argument);
    }
    assert_eq!(local, 0);

    // NULL colInd / values are fine without entries; rows = 0 needs only rowPtr[0].
    let mut out = null_mut();
    let empty_rows = [0i32, 0, 0];
    let status = unsafe { smatCreateCsr(h.0, &mut out, 2, 5, 0, empty_rows.as_ptr(), null(), null(), f32_type, 0) };
    assert_eq!(status, SUCCESS, "{}", last_error());
    let empty = Matrix(out);
    assert_eq!(empty.info().blockCount, 0);
    assert_eq!(empty.info().fillRatio, 0.0);
    let status = unsafe { smatCreateCsr(h.0, &mut out, 0, 0, 0, empty_rows.as_ptr(), null(), null(), f32_type, 0) };
    assert_eq!(status, SUCCESS, "{}", last_error());
    drop(Matrix(out));
}

#[test]
fn matrix_info_and_destroy_matrix_errors() {
    let h = tiles_handle(ReorderMode::Auto);
    let csr = CsrMatrix::from_triplets(3, 4, vec![(0, 0, 1.0f32), (0, 3, 2.0), (2, 1, 3.0), (2, 2, 4.0), (2, 3, 5.0)]);
    let a = create_matrix(&h, &csr, IndexBase::Zero);
    let info = a.info();
    assert_eq!((info.rows, info.cols, info.nnz, info.tileRows, info.tileCols), (3, 4, 5, 16, 8));
    assert_eq!((info.blockCount, info.blockCountBeforeReordering, info.reordered), (1, 1, 0));
    assert_eq!(info.fillRatio, 5.0 / 128.0);
    assert_eq!(info.valueType, ValueType::F32 as i32);
    assert_eq!((info.rowsInTiles, info.rowsInCsr, info.entriesInCsr), (3, 0, 0));
    // One block row: pointer and 16 row indices; one tile: 8 column indices and 16 × 8 f32.
    assert_eq!(info.bytes, (4 + 4 * 16) + (4 * 8 + 128 * 4) + 8);
    assert_eq!(info.csrBytes, 4 * 4 + 5 * 8);
    // Five entries in 128 slots are far below what tiles need to pay: AUTO keeps them as CSR.
    let auto = create_matrix(&Handle::new(BackendKind::Cpu, ReorderMode::Auto), &csr, IndexBase::Zero).info();
    assert_eq!((auto.blockCount, auto.blockCountBeforeReordering, auto.fillRatio), (0, 1, 0.0));
    assert_eq!((auto.rowsInTiles, auto.rowsInCsr, auto.entriesInCsr), (0, 3, 5));
    assert_eq!(auto.bytes, 3 * 8 + 5 * 8 + 8);

    let sentinel = smatMatrixInfo_t { rows: -9, ..Default::default() };
    let mut out = sentinel;
    unsafe {
        assert_fails(smatGetMatrixInfo(a.0, null_mut()), Status::InvalidPointer, "smatGetMatrixInfo", "info");
        assert_fails(smatGetMatrixInfo(null_mut(), &mut out), Status::InvalidHandle, "smatGetMatrixInfo", "A");
        // A handle is not a matrix.
        assert_fails(smatGetMatrixInfo(h.0 as smatMatrix_t, &mut out), Status::InvalidHandle, "smatGetMatrixInfo", "A");
        let mut local = 0u64;
        let foreign = &mut local as *mut u64 as smatMatrix_t;
        assert_fails(smatGetMatrixInfo(foreign, &mut out), Status::InvalidHandle, "smatGetMatrixInfo", "A");
        assert_fails(smatDestroyMatrix(foreign), Status::InvalidHandle, "smatDestroyMatrix", "A");
        assert_eq!(smatDestroyMatrix(null_mut()), SUCCESS);
        let raw = a.0;
        std::mem::forget(a);
        assert_eq!(smatDestroyMatrix(raw), SUCCESS);
        assert_fails(smatGetMatrixInfo(raw, &mut out), Status::InvalidHandle, "smatGetMatrixInfo", "A");
        assert_fails(smatDestroyMatrix(raw), Status::InvalidHandle, "smatDestroyMatrix", "A");
        assert_eq!(local, 0);
    }
    assert_eq!(out, sentinel, "info written on failure");
}

#[test]
fn spmm_rejects_bad_input_and_leaves_c_untouched() {
    let h = Handle::new(BackendKind::Cpu, ReorderMode::Auto);
    let csr = CsrMatrix::from_triplets(3, 4, vec![(0, 0, 1.0f32), (0, 3, 2.0), (2, 1, 3.0), (2, 2, 4.0), (2, 3, 5.0)]);
    let a = create_matrix(&h, &csr, IndexBase::Zero);
    let n = 2;
    let b = vec![1.0f32; 4 * n];
    let c0 = vec![3.0f32; 3 * n + 8];
    let (alpha, beta) = (1.0f32, 1.0f32);
    let mut destroyed_matrix = null_mut();
    let mut destroyed_handle = null_mut();
    let (rp, ci, v) = small_csr(0);
    unsafe {
        assert_eq!(smatCreate(&mut destroyed_handle), SUCCESS);
        assert_eq!(
            smatCreateCsr(
                h.0,
                &mut destroyed_matrix,
                3,
                4,
                5,
                rp.as_ptr(),
                ci.as_ptr(),
                v.as_ptr() as *const c_void,
                2,
                0
            ),
            SUCCESS
        );
        assert_eq!(smatDestroyMatrix(destroyed_matrix), SUCCESS);
        assert_eq!(smatDestroy(destroyed_handle), SUCCESS);
    }
    let mut local = [0u64; 4];
    let foreign = local.as_mut_ptr() as *mut c_void;

    #[derive(Clone, Copy)]
    struct Call {
        handle: smatHandle_t,
        a: smatMatrix_t,
        n: i32,
        alpha: *const c_void,
        b: *const c_void,
        ldb: i32,
        beta: *const c_void,
        c_offset: Option<usize>,
        ldc: i32,
        layout: i32,
    }
    let good = Call {
        handle: h.0,
        a: a.0,
        n: n as i32,
        alpha: &alpha as *const f32 as *const c_void,
        b: b.as_ptr() as *const c_void,
        ldb: n as i32,
        beta: &beta as *const f32 as *const c_void,
        c_offset: Some(0),
        ldc: n as i32,
        layout: Layout::RowMajor as i32,
    };
    let run = |call: Call, c: &mut Vec<f32>| unsafe {
        let c_ptr = call.c_offset.map_or(null_mut(), |o| c.as_mut_ptr().add(o) as *mut c_void);
        smatSpMM(call.handle, call.a, call.n, call.alpha, call.b, call.ldb, call.beta, c_ptr, call.ldc, call.layout)
    };
    let cases: Vec<(Call, Status, &str)> = vec![
        (Call { handle: null_mut(), ..good }, Status::InvalidHandle, "handle"),
        (Call { handle: destroyed_handle, ..good }, Status::InvalidHandle, "handle"),
        (Call { handle: foreign as smatHandle_t, ..good }, Status::InvalidHandle, "handle"),
        (Call { a: null_mut(), ..good }, Status::InvalidHandle, "A"),
        (Call { a: destroyed_matrix, ..good }, Status::InvalidHandle, "A"),
        (Call { a: foreign as smatMatrix_t, ..good }, Status::InvalidHandle, "A"),
        (Call { a: h.0 as smatMatrix_t, ..good }, Status::InvalidHandle, "A"),
        (Call { n: -1, ..good }, Status::InvalidSize, "n"),
        (Call { ldb: -1, ..good }, Status::InvalidSize, "ldb"),
        (Call { ldc: -3, ..good }, Status::InvalidSize, "ldc"),
        (Call { ldb: 1, ..good }, Status::InvalidSize, "ldb"),
        (Call { ldc: 1, ..good }, Status::InvalidSize, "ldc"),
        // Column-major needs ld ≥ rows: 3 for B (4 rows) and 2 for C (3 rows) are too small.
        (Call { layout: Layout::ColMajor as i32, ldb: 3, ldc: 3, ..good }, Status::InvalidSize, "ldb"),
        (Call { layout: Layout::ColMajor as i32, ldb: 4, ldc: 2, ..good }, Status::InvalidSize, "ldc"),
        (Call { layout: 2, ..good }, Status::InvalidValue, "layout"),
        (Call { alpha: null(), ..good }, Status::InvalidPointer, "alpha"),
        (Call { beta: null(), ..good }, Status::InvalidPointer, "beta"),
        (Call { b: null(), ..good }, Status::InvalidPointer, "B"),
        (Call { c_offset: None, ..good }, Status::InvalidPointer, "C"),
    ];
    for (call, expect, argument) in cases {
        let mut c = c0.clone();
        assert_fails(run(call, &mut c), expect, "smatSpMM", argument);
        assert_eq!(c, c0, "C written on failure ({argument})");
    }
    assert_eq!(local, [0; 4]);

    // C overlapping B is refused: B lives inside C's buffer here.
    let mut shared = vec![1.0f32; 40];
    let overlap = unsafe {
        let base = shared.as_mut_ptr();
        smatSpMM(h.0, a.0, 2, good.alpha, base.add(4) as *const c_void, 2, good.beta, base as *mut c_void, 2, 0)
    };
    assert_fails(overlap, Status::InvalidPointer, "smatSpMM", "overlaps");
    assert!(shared.iter().all(|&x| x == 1.0));

    // n = 0 touches nothing and accepts NULL B and C.
    let zero = Call { n: 0, b: null(), c_offset: None, ..good };
    assert_eq!(run(zero, &mut c0.clone()), SUCCESS, "{}", last_error());
    // The good call works and computes [1+2, 0, 3+4+5] + C.
    let mut c = c0.clone();
    assert_eq!(run(good, &mut c), SUCCESS, "{}", last_error());
    assert_eq!(&c[..6], &[6.0, 6.0, 3.0, 3.0, 15.0, 15.0]);
}

#[test]
fn empty_rows_and_beta_zero_ignore_nan_in_c() {
    // rows = 0 and cols = 0 matrices work; cols = 0 gives C = β·C, and β = 0 gives exact zeros over NaN.
    let h = Handle::new(BackendKind::Cpu, ReorderMode::Auto);
    let no_rows = create_matrix(&h, &CsrMatrix::<f64>::from_triplets(0, 5, vec![]), IndexBase::One);
    let db = Dense { rows: 5, cols: 3, ld: 3, layout: Layout::RowMajor };
    let b = vec![1.0f64; 15];
    let mut nothing: Vec<f64> = vec![];
    assert_eq!(
        spmm(&h, &no_rows, 1.0, &b, db, 1.0, &mut nothing, Dense { rows: 0, cols: 3, ld: 3, layout: Layout::RowMajor }),
        SUCCESS
    );

    let no_cols = create_matrix(&h, &CsrMatrix::<f64>::from_triplets(4, 0, vec![]), IndexBase::Zero);
    let dc = Dense { rows: 4, cols: 3, ld: 4, layout: Layout::ColMajor };
    let mut c = vec![f64::NAN; dc.len()];
    let empty_b = Dense { rows: 0, cols: 3, ld: 1, layout: Layout::ColMajor };
    assert_eq!(spmm(&h, &no_cols, 2.0, &[], empty_b, 0.0, &mut c, dc), SUCCESS, "{}", last_error());
    assert!(c.iter().all(|&x| x == 0.0), "{c:?}");
    let mut c = vec![2.0; dc.len()];
    assert_eq!(spmm(&h, &no_cols, 2.0, &[], empty_b, -1.5, &mut c, dc), SUCCESS);
    assert!(c.iter().all(|&x| x == -3.0));
}

/// A tile's padding zeros meet B as on the tensor cores: where B's row holds an Inf, 0 · Inf makes
/// NaN in the tile's other rows; where it is finite they change nothing (the CPU skips them).
#[test]
fn tile_padding_times_nonfinite_b_is_nan_as_on_tensor_cores() {
    // One block row: row 0 reads columns 0 and 1, row 1 only column 0; one tile gathers both.
    let csr = CsrMatrix::<f64>::from_triplets(2, 4, vec![(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0)]);
    let db = Dense { rows: 4, cols: 3, ld: 3, layout: Layout::RowMajor };
    let dc = Dense { rows: 2, cols: 3, ld: 3, layout: Layout::RowMajor };
    let mut b = vec![1.0f64; db.len()];
    b[db.index(1, 2)] = f64::INFINITY;
    for format in [StorageFormat::Tiles, StorageFormat::Csr] {
        let h = Handle::with_format(BackendKind::Cpu, ReorderMode::Never, format);
        let a = create_matrix(&h, &csr, IndexBase::Zero);
        let mut c = vec![0.0f64; dc.len()];
        assert_eq!(spmm(&h, &a, 1.0, &b, db, 0.0, &mut c, dc), SUCCESS, "{}", last_error());
        let row_1_col_2 = if format == StorageFormat::Tiles { f64::NAN } else { 3.0 };
        let expected = [3.0, 3.0, f64::INFINITY, 3.0, 3.0, row_1_col_2];
        let same = |x: f64, y: f64| x == y || (x.is_nan() && y.is_nan());
        assert!(c.iter().zip(expected).all(|(&x, y)| same(x, y)), "{format:?}: {c:?}");
    }
}

/// Sylos Labini's scan written the obvious quadratic way, with sets: clusters of at most `cap` rows
/// (`usize::MAX`: the paper's, unbounded); with a cap, the full clusters first, then the smaller ones.
fn naive_jaccard_order(csr: &CsrMatrix<f64>, tile_cols: usize, threshold: f64, cap: usize) -> Vec<usize> {
    use std::collections::BTreeSet;
    let pattern = |r: usize| -> BTreeSet<usize> {
        (csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize).map(|e| csr.col_ind[e] as usize / tile_cols).collect()
    };
    let mut clustered = vec![false; csr.rows];
    let (mut full, mut partial) = (Vec::new(), Vec::new());
    for seed in 0..csr.rows {
        if clustered[seed] || pattern(seed).is_empty() {
            continue;
        }
        clustered[seed] = true;
        let mut cluster = vec![seed];
        let mut union = pattern(seed);
        for (r, done) in clustered.iter_mut().enumerate().skip(seed + 1) {
            let p = pattern(r);
            if cluster.len() == cap || *done || p.is_empty() {
                continue;
            }
            let shared = p.intersection(&union).count() as f64;
            let all = p.union(&union).count() as f64;
            if 1.0 - shared / all < threshold {
                *done = true;
                cluster.push(r);
                union.extend(p);
            }
        }
        if cap == usize::MAX || cluster.len() == cap { full.extend(cluster) } else { partial.extend(cluster) }
    }
    full.extend(partial);
    full.extend((0..csr.rows).filter(|&r| pattern(r).is_empty()));
    full
}

#[test]
fn indexed_clustering_equals_the_quadratic_scan() {
    use sparsegpu::smat::reorder::{ClusterRun, RowPatterns, jaccard_clusters, jaccard_row_order};
    let mut rng = Rng::fresh("smat clustering");
    for case in 0..60 {
        let (csr, structure) = random_matrix::<f64>(&mut rng, &SIZES, SIZE_LIMIT);
        let csr = with_duplicates_and_unsorted_rows(&mut rng, &csr);
        let tile_cols = [1, 4, 8, 16][rng.below(4)];
        // A random τ: the test divides, the library multiplies; they can differ only on exact ties.
        let threshold = rng.range(0.05, 1.0);
        let patterns = RowPatterns::new(&csr.view(), tile_cols).unwrap();
        let cap = [1, 2, 8, 16][rng.below(4)];
        for (order, cap) in [
            (jaccard_row_order(&patterns, threshold).unwrap(), usize::MAX),
            (jaccard_clusters(&patterns, threshold, cap).unwrap(), cap),
        ] {
            assert_eq!(
                order,
                naive_jaccard_order(&csr, tile_cols, threshold, cap),
                "case {case} {structure} {}x{} tile cols {tile_cols} threshold {threshold} cap {cap}",
                csr.rows,
                csr.cols
            );
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert!(sorted.iter().copied().eq(0..csr.rows), "case {case}: not a permutation");
        }
        // Formed in steps, as AUTO's trial does, the clusters are the same.
        let mut run = ClusterRun::new(&patterns, threshold, cap).unwrap();
        let (mut step, mut formed) = (0, Vec::new());
        while step < csr.rows {
            step += 1 + rng.below(2 * cap + 1);
            run.advance(step, 1 + rng.below(3));
            assert!(run.clustered().starts_with(&formed), "case {case}: a step changed earlier clusters");
            formed = run.clustered().to_vec();
            assert_eq!(formed.len() % cap, 0, "case {case}: a trial holds full clusters only");
        }
        let order = run.finish();
        assert!(order.starts_with(&formed), "case {case}");
        assert_eq!(order, jaccard_clusters(&patterns, threshold, cap).unwrap(), "case {case}: formed in steps");
    }
}

/// Distinct columns, distinct `tile.cols`-wide column blocks and entries of each block row when
/// stored row i is `order[i]`, counted with sets.
fn naive_shapes<T>(csr: &CsrMatrix<T>, order: &[usize], tile: Tile) -> Vec<(usize, usize, usize)> {
    order
        .chunks(tile.rows)
        .map(|rows| {
            let mut columns = std::collections::BTreeSet::new();
            let mut entries = 0;
            for &r in rows {
                let range = csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize;
                entries += range.len();
                columns.extend(csr.col_ind[range].iter().map(|&c| c as usize));
            }
            let blocks: std::collections::BTreeSet<usize> = columns.iter().map(|c| c / tile.cols).collect();
            (columns.len(), blocks.len(), entries)
        })
        .collect()
}

#[test]
fn block_row_shapes_and_fewest_blocks_match_a_direct_count() {
    use sparsegpu::smat::reorder::{RowPatterns, block_row_shapes, fewest_blocks_of_any_order};
    let mut rng = Rng::fresh("smat block-row shapes");
    for case in 0..80 {
        // Small random matrices, and wide sparse ones: both ways of counting (marking columns in a
        // bitmap where the columns are few against the entries, sorting them otherwise).
        let csr = if case % 4 == 3 {
            let (rows, cols) = (1 + rng.below(300), 50_000 + rng.below(200_000));
            random_csr::<f64>(&mut rng, rows, cols, 2e-5)
        } else {
            random_matrix::<f64>(&mut rng, &SIZES, SIZE_LIMIT).0
        };
        let csr = with_duplicates_and_unsorted_rows(&mut rng, &csr);
        let tile = [Tile { rows: 16, cols: 16 }, Tile { rows: 16, cols: 8 }, Tile { rows: 8, cols: 4 }][rng.below(3)];
        let mut permutation: Vec<usize> = (0..csr.rows).collect();
        for i in (1..csr.rows).rev() {
            permutation.swap(i, rng.below(i + 1));
        }
        let part = rng.below(csr.rows + 1);
        let identity: Vec<usize> = (0..csr.rows).collect();
        for (order, what) in
            [(None, "original"), (Some(&permutation[..]), "permuted"), (Some(&permutation[..part]), "part")]
        {
            let shapes = block_row_shapes(&csr.view(), order, tile).unwrap();
            let got: Vec<_> = shapes.iter().map(|s| (s.columns, s.blocks, s.entries)).collect();
            assert_eq!(got, naive_shapes(&csr, order.unwrap_or(&identity), tile), "case {case} {what}");
        }
        let patterns = RowPatterns::new(&csr.view(), tile.cols).unwrap();
        let mut rows_in = std::collections::HashMap::<usize, usize>::new();
        for r in 0..csr.rows {
            let blocks: std::collections::BTreeSet<usize> = csr.col_ind
                [csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize]
                .iter()
                .map(|&c| c as usize / tile.cols)
                .collect();
            for b in blocks {
                *rows_in.entry(b).or_default() += 1;
            }
        }
        let fewest: usize = rows_in.values().map(|k| k.div_ceil(tile.rows)).sum();
        assert_eq!(fewest_blocks_of_any_order(&patterns, tile.rows).unwrap(), fewest, "case {case}");
    }
}

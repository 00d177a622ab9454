//! Input generators for tests, the demonstration and the benchmark: a small seeded PRNG, the decay
//! matrices of the SpAMM paper, and the sparse structures the other papers evaluate on (random, band,
//! block-structured, power-law R-MAT, grid stencils and finite-element node blocks), with their rows
//! in a random order when a test needs reordering to matter.

use crate::scalar::Element;
use crate::sparse::CsrMatrix;
use rayon::prelude::*;

/// SplitMix64: small, fast, and good enough for test data. Not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// A fresh seed each run (from `SPARSEGPU_TEST_SEED` when set, else the clock), printed so a
    /// failure can be replayed.
    pub fn fresh(label: &str) -> Self {
        let seed = std::env::var("SPARSEGPU_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            t.as_nanos() as u64 ^ (std::process::id() as u64) << 32
        });
        eprintln!("{label}: SPARSEGPU_TEST_SEED={seed}");
        Rng::new(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in [0, n); n > 0.
    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }

    /// `len` values uniform in [-1, 1).
    pub fn vec<T: Element>(&mut self, len: usize) -> Vec<T> {
        (0..len).map(|_| T::from_f64(self.range(-1.0, 1.0))).collect()
    }
}

/// The SpAMM paper's algebraic decay, column-major `rows × cols` with ld = rows:
/// `a_ij = c / (|i − j|^λ + 1)`, each element scaled by a random factor in [0.5, 1) and a random sign
/// so every run sees fresh data with the same decay envelope.
pub fn algebraic_decay<T: Element>(rng: &mut Rng, rows: usize, cols: usize, c: f64, lambda: f64) -> Vec<T> {
    decay(rng, rows, cols, |d| c / (d.powf(lambda) + 1.0))
}

/// Exponential decay `a_ij = c·λ^|i−j|` (λ < 1), randomised as [`algebraic_decay`].
pub fn exponential_decay<T: Element>(rng: &mut Rng, rows: usize, cols: usize, c: f64, lambda: f64) -> Vec<T> {
    decay(rng, rows, cols, |d| c * lambda.powf(d))
}

/// Column-major `rows × cols`, columns in parallel (benchmark inputs reach a billion elements): each
/// task fills about [`PARALLEL_ELEMENTS`] elements, whole columns, from its own stream of `rng`.
fn decay<T: Element>(rng: &mut Rng, rows: usize, cols: usize, envelope: impl Fn(f64) -> f64 + Sync) -> Vec<T> {
    let mut a = vec![T::default(); rows * cols];
    let columns_per_task = (PARALLEL_ELEMENTS / rows.max(1)).max(1);
    let seeds: Vec<u64> = (0..cols.div_ceil(columns_per_task)).map(|_| rng.next_u64()).collect();
    a.par_chunks_mut((rows * columns_per_task).max(1)).zip(seeds).enumerate().for_each(|(task, (part, seed))| {
        let mut stream = Rng::new(seed);
        for (e, x) in part.iter_mut().enumerate() {
            let (i, j) = (e % rows, task * columns_per_task + e / rows);
            let sign = if stream.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
            *x = T::from_f64(sign * stream.range(0.5, 1.0) * envelope((i as f64 - j as f64).abs()));
        }
    });
    a
}

/// Uniformly random sparsity: each entry present with probability `density`, values in [-1, 1).
pub fn random_csr<T: Element>(rng: &mut Rng, rows: usize, cols: usize, density: f64) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    let expected = (rows as f64 * cols as f64 * density) as usize;
    if density > 0.05 {
        for r in 0..rows {
            for c in 0..cols {
                if rng.uniform() < density {
                    triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))));
                }
            }
        }
    } else if rows > 0 && cols > 0 {
        let mut seen = std::collections::HashSet::with_capacity(expected);
        for _ in 0..expected {
            let (r, c) = (rng.below(rows), rng.below(cols));
            if seen.insert((r, c)) {
                triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))));
            }
        }
    }
    CsrMatrix::from_triplets(rows, cols, triplets)
}

/// A band matrix: every entry with |i − j| ≤ half_width present, values in [-1, 1). Built directly in
/// CSR, rows in parallel (benchmark inputs reach hundreds of millions of entries).
pub fn band_csr<T: Element>(rng: &mut Rng, n: usize, half_width: usize) -> CsrMatrix<T> {
    let row = |r: usize| r.saturating_sub(half_width)..(r + half_width + 1).min(n);
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0usize);
    for r in 0..n {
        row_ptr.push(row_ptr[r] + row(r).len());
    }
    // Chunks of rows, each filled from its own stream of `rng`, then joined in order.
    let seeds: Vec<u64> = (0..n.div_ceil(PARALLEL_ROWS)).map(|_| rng.next_u64()).collect();
    let parts: Vec<(Vec<i32>, Vec<T>)> = seeds
        .into_par_iter()
        .enumerate()
        .map(|(task, seed)| {
            let mut stream = Rng::new(seed);
            let rows = task * PARALLEL_ROWS..((task + 1) * PARALLEL_ROWS).min(n);
            let cols: Vec<i32> = rows.flat_map(row).map(|c| c as i32).collect();
            let values = cols.iter().map(|_| T::from_f64(stream.range(-1.0, 1.0))).collect();
            (cols, values)
        })
        .collect();
    let (col_ind, values) = parts.into_iter().flat_map(|(cols, values)| cols.into_iter().zip(values)).unzip();
    CsrMatrix { rows: n, cols: n, row_ptr: index_array(&row_ptr), col_ind, values }
}

/// Rows (band), edges (R-MAT) or elements (decay, in whole columns) a parallel generator's task draws
/// from one stream.
const PARALLEL_ROWS: usize = 1 << 14;
const PARALLEL_EDGES: usize = 1 << 18;
const PARALLEL_ELEMENTS: usize = 1 << 18;

/// `row_ptr` as the CSR's 32-bit indices (panics beyond them: no generator input is that large).
fn index_array(offsets: &[usize]) -> Vec<i32> {
    offsets.iter().map(|&o| i32::try_from(o).expect("more than 2^31 - 1 entries")).collect()
}

/// Dense `block × block` blocks placed at random with probability `block_density`, each entry of a
/// placed block present with probability `fill`.
pub fn block_csr<T: Element>(
    rng: &mut Rng,
    rows: usize,
    cols: usize,
    block: usize,
    block_density: f64,
    fill: f64,
) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for br in (0..rows).step_by(block.max(1)) {
        for bc in (0..cols).step_by(block.max(1)) {
            if rng.uniform() < block_density {
                for r in br..(br + block).min(rows) {
                    for c in bc..(bc + block).min(cols) {
                        if rng.uniform() < fill {
                            triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))));
                        }
                    }
                }
            }
        }
    }
    CsrMatrix::from_triplets(rows, cols, triplets)
}

/// Power-law R-MAT graph of 2^scale vertices and about `edge_factor · 2^scale` distinct edges, with
/// the Graph500 probabilities (a, b, c) = (0.57, 0.19, 0.19); values in [-1, 1). Edges are drawn in
/// parallel, each task from its own stream of `rng`, then sorted and deduplicated (benchmark inputs
/// reach half a billion edges).
pub fn rmat_csr<T: Element>(rng: &mut Rng, scale: u32, edge_factor: usize) -> CsrMatrix<T> {
    assert!(scale <= 31, "R-MAT scale {scale} exceeds 32-bit indices");
    let n = 1usize << scale;
    let (a, b, c) = (0.57, 0.19, 0.19);
    let draws = edge_factor * n;
    let seeds: Vec<u64> = (0..draws.div_ceil(PARALLEL_EDGES)).map(|_| rng.next_u64()).collect();
    // Each edge packed as row << 32 | column, so that sorting orders by row, then column.
    let mut edges: Vec<u64> = seeds
        .par_iter()
        .enumerate()
        .flat_map_iter(|(task, &seed)| {
            let mut stream = Rng::new(seed);
            let count = PARALLEL_EDGES.min(draws - task * PARALLEL_EDGES);
            (0..count).map(move |_| {
                let (mut r, mut col) = (0u64, 0u64);
                for bit in (0..scale).rev() {
                    let p = stream.uniform();
                    let (dr, dc) = if p < a {
                        (0, 0)
                    } else if p < a + b {
                        (0, 1)
                    } else if p < a + b + c {
                        (1, 0)
                    } else {
                        (1, 1)
                    };
                    r |= dr << bit;
                    col |= dc << bit;
                }
                r << 32 | col
            })
        })
        .collect();
    edges.par_sort_unstable();
    edges.dedup();
    let mut row_ptr = vec![0usize; n + 1];
    for &e in &edges {
        row_ptr[(e >> 32) as usize + 1] += 1;
    }
    for r in 0..n {
        row_ptr[r + 1] += row_ptr[r];
    }
    let col_ind = edges.par_iter().map(|&e| (e & 0xffff_ffff) as i32).collect();
    let mut values = vec![T::default(); edges.len()];
    let seeds: Vec<u64> = (0..values.len().div_ceil(PARALLEL_EDGES)).map(|_| rng.next_u64()).collect();
    values.par_chunks_mut(PARALLEL_EDGES).zip(seeds).for_each(|(chunk, seed)| {
        let mut stream = Rng::new(seed);
        chunk.iter_mut().for_each(|v| *v = T::from_f64(stream.range(-1.0, 1.0)));
    });
    CsrMatrix { rows: n, cols: n, row_ptr: index_array(&row_ptr), col_ind, values }
}

/// The grid neighbours a stencil couples each point with, the point itself included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stencil {
    /// The point and its 2·d axis neighbours: 5-point in 2D, 7-point in 3D.
    Star,
    /// The whole 3^d box around the point: 9-point in 2D, 27-point in 3D.
    Box,
}

/// The operator of a stencil on a grid of `dims` points in natural order (the last dimension varies
/// fastest, so neighbours are near in index as a mesh's numbering keeps them), each point holding
/// `block` unknowns coupled densely with every unknown of each neighbour: `block` 1 is a
/// finite-difference stencil, 3 the node blocks of a 3D vector-valued (elasticity) finite-element
/// operator. Unknown `u` of point `p` is row `p·block + u`. Values in [-1, 1).
pub fn stencil_csr<T: Element>(rng: &mut Rng, dims: &[usize], stencil: Stencil, block: usize) -> CsrMatrix<T> {
    let points: usize = dims.iter().product();
    // Offsets in {-1, 0, 1}^d; a star keeps those moving along one axis at most.
    let offsets: Vec<Vec<isize>> = (0..3usize.pow(dims.len() as u32))
        .map(|code| (0..dims.len()).map(|axis| (code / 3usize.pow(axis as u32) % 3) as isize - 1).collect())
        .filter(|o: &Vec<isize>| stencil == Stencil::Box || o.iter().filter(|&&d| d != 0).count() <= 1)
        .collect();
    let mut row_ptr = Vec::with_capacity(points * block + 1);
    row_ptr.push(0usize);
    let mut col_ind = Vec::new();
    let mut neighbours = Vec::with_capacity(offsets.len());
    let mut coordinates = vec![0usize; dims.len()];
    for point in 0..points {
        let mut rest = point;
        for axis in (0..dims.len()).rev() {
            coordinates[axis] = rest % dims[axis];
            rest /= dims[axis];
        }
        neighbours.clear();
        neighbours.extend(offsets.iter().filter_map(|offset| {
            offset.iter().zip(&coordinates).zip(dims).try_fold(0usize, |index, ((&d, &x), &extent)| {
                let x = x.checked_add_signed(d).filter(|&x| x < extent)?;
                Some(index * extent + x)
            })
        }));
        neighbours.sort_unstable();
        for _ in 0..block {
            for &q in &neighbours {
                col_ind.extend((q * block..(q + 1) * block).map(|c| c as i32));
            }
            row_ptr.push(col_ind.len());
        }
    }
    let values = col_ind.iter().map(|_| T::from_f64(rng.range(-1.0, 1.0))).collect();
    CsrMatrix { rows: points * block, cols: points * block, row_ptr: index_array(&row_ptr), col_ind, values }
}

/// `a` with its rows in a random order, and that order: row `i` of the result is row `order[i]` of
/// `a`; the columns stay. A structured matrix so permuted has to be reordered to show its structure.
pub fn permute_rows<T: Copy>(rng: &mut Rng, a: &CsrMatrix<T>) -> (CsrMatrix<T>, Vec<usize>) {
    let mut order: Vec<usize> = (0..a.rows).collect();
    for i in (1..a.rows).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut row_ptr = Vec::with_capacity(a.rows + 1);
    row_ptr.push(0i32);
    let (mut col_ind, mut values) = (Vec::with_capacity(a.nnz()), Vec::with_capacity(a.nnz()));
    for &r in &order {
        let range = a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize;
        col_ind.extend_from_slice(&a.col_ind[range.clone()]);
        values.extend_from_slice(&a.values[range]);
        row_ptr.push(col_ind.len() as i32);
    }
    (CsrMatrix { rows: a.rows, cols: a.cols, row_ptr, col_ind, values }, order)
}

/// ‖x − y‖_F / max(‖y‖_F, tiny): the relative Frobenius error used by every accuracy check (summed
/// in parallel: benchmark results reach a billion elements).
pub fn relative_error(x: &[f64], reference: &[f64]) -> f64 {
    let (num, den) = x
        .par_iter()
        .zip(reference)
        .map(|(a, b)| ((a - b) * (a - b), b * b))
        .reduce(|| (0.0, 0.0), |(n1, d1), (n2, d2)| (n1 + n2, d1 + d2));
    num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows sorted and duplicate-free, pointers consistent.
    fn check_structure(m: &CsrMatrix<f64>) {
        assert_eq!(m.row_ptr.len(), m.rows + 1);
        assert_eq!((m.row_ptr[0], m.row_ptr[m.rows] as usize), (0, m.nnz()));
        for r in 0..m.rows {
            let row = &m.col_ind[m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize];
            assert!(row.windows(2).all(|w| w[0] < w[1]), "row {r} is not strictly increasing");
            assert!(row.iter().all(|&c| c >= 0 && (c as usize) < m.cols));
        }
        assert!(m.values.iter().all(|v| (-1.0..1.0).contains(v)));
    }

    #[test]
    fn band_has_exactly_the_band_in_every_size_and_chunking() {
        for (n, half_width) in [(0, 3), (1, 0), (5, 8), (PARALLEL_ROWS + 17, 2), (3 * PARALLEL_ROWS, 0)] {
            let m = band_csr::<f64>(&mut Rng::new(7), n, half_width);
            check_structure(&m);
            for r in 0..n {
                let row = &m.col_ind[m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize];
                let want: Vec<i32> =
                    (r.saturating_sub(half_width)..(r + half_width + 1).min(n)).map(|c| c as i32).collect();
                assert_eq!(row, &want[..], "n {n} half-width {half_width} row {r}");
            }
        }
    }

    #[test]
    fn decay_follows_its_envelope_across_task_boundaries() {
        // Columns of 3 elements: tasks of PARALLEL_ELEMENTS / 3 columns; 20000 columns span several.
        for (rows, cols) in [(0, 4), (4, 0), (3, 20000), (PARALLEL_ELEMENTS + 5, 2)] {
            let a: Vec<f64> = algebraic_decay(&mut Rng::new(11), rows, cols, 0.1, 0.1);
            assert_eq!(a.len(), rows * cols);
            for (e, x) in a.iter().enumerate() {
                let distance = ((e % rows) as f64 - (e / rows) as f64).abs();
                let envelope = 0.1 / (distance.powf(0.1) + 1.0);
                assert!(x.abs() >= 0.5 * envelope && x.abs() < envelope, "{rows}x{cols} element {e}: {x}");
            }
            let again: Vec<f64> = algebraic_decay(&mut Rng::new(11), rows, cols, 0.1, 0.1);
            assert_eq!(a, again);
        }
    }

    #[test]
    fn stencils_couple_exactly_the_grid_neighbours() {
        // (dims, stencil, block, entries of an interior row, all entries).
        let cases: [(&[usize], Stencil, usize, usize, usize); 5] = [
            (&[6, 7], Stencil::Star, 1, 5, 5 * 42 - 2 * (6 + 7)),
            (&[6, 7], Stencil::Box, 1, 9, (3 * 6 - 2) * (3 * 7 - 2)),
            (&[4, 5, 6], Stencil::Star, 1, 7, 7 * 120 - 2 * (4 * 5 + 5 * 6 + 4 * 6)),
            (&[4, 5, 6], Stencil::Box, 1, 27, 10 * 13 * 16),
            (&[4, 5, 6], Stencil::Box, 3, 81, 9 * 10 * 13 * 16),
        ];
        for (dims, stencil, block, interior, nnz) in cases {
            let m = stencil_csr::<f64>(&mut Rng::new(5), dims, stencil, block);
            check_structure(&m);
            assert_eq!((m.rows, m.cols, m.nnz()), (dims.iter().product::<usize>() * block, m.rows, nnz), "{dims:?}");
            // The point at (1, 1, ...) is interior; its neighbours' unknowns are whole blocks.
            let point = dims.iter().fold(0, |index, &extent| index * extent + 1);
            let row = point * block + block - 1;
            let cols = &m.col_ind[m.row_ptr[row] as usize..m.row_ptr[row + 1] as usize];
            assert_eq!(cols.len(), interior, "{dims:?} {stencil:?}");
            assert!(
                cols.chunks(block)
                    .all(|b| (b[0] as usize).is_multiple_of(block) && b.windows(2).all(|w| w[1] == w[0] + 1))
            );
            assert!(cols.contains(&(row as i32)));
            let again = stencil_csr::<f64>(&mut Rng::new(5), dims, stencil, block);
            assert_eq!((&m.col_ind, &m.values), (&again.col_ind, &again.values));
        }
    }

    #[test]
    fn permuted_rows_are_the_rows_of_the_original() {
        let a = random_csr::<f64>(&mut Rng::new(9), 300, 200, 0.05);
        let (p, order) = permute_rows(&mut Rng::new(10), &a);
        check_structure(&p);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert!(sorted.iter().enumerate().all(|(i, &r)| i == r), "not a permutation");
        assert_ne!(order, sorted, "300 rows left in their order");
        for (i, &r) in order.iter().enumerate() {
            let (pi, ar) =
                (p.row_ptr[i] as usize..p.row_ptr[i + 1] as usize, a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize);
            assert_eq!((&p.col_ind[pi.clone()], &p.values[pi]), (&a.col_ind[ar.clone()], &a.values[ar]));
        }
    }

    #[test]
    fn rmat_is_distinct_sorted_skewed_and_reproducible() {
        let m = rmat_csr::<f64>(&mut Rng::new(3), 12, 8);
        check_structure(&m);
        let draws = 8 << 12;
        assert!(m.nnz() <= draws && m.nnz() > draws / 2, "{} distinct edges of {draws} draws", m.nnz());
        // Power law: the first row (all bits from the heaviest quadrant) is far above the mean.
        assert!((m.row_ptr[1] - m.row_ptr[0]) as usize > 10 * m.nnz() / m.rows);
        let again = rmat_csr::<f64>(&mut Rng::new(3), 12, 8);
        assert_eq!((&m.row_ptr, &m.col_ind, &m.values), (&again.row_ptr, &again.col_ind, &again.values));
    }
}

//! MSREP helpers shared by the CPU and GPU test suites: generators, the three input formats and the
//! f64 reference with its rounding bound.

use super::Rng;
use sparsegpu::scalar::Element;
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::{IndexBase, SparseFormat};

/// The arrays of one matrix in one input format and index base, ready for the C API.
pub struct Input<T> {
    pub format: SparseFormat,
    pub major: Vec<i32>,
    pub minor: Vec<i32>,
    pub values: Vec<T>,
}

pub fn inputs<T: Copy>(a: &CsrMatrix<T>, base: IndexBase) -> Vec<Input<T>> {
    let b = base as i32;
    let shift = |v: Vec<i32>| v.into_iter().map(|i| i + b).collect::<Vec<_>>();
    let (col_ptr, row_ind, csc_values) = a.to_csc();
    let (coo_rows, coo_cols, coo_values) = a.to_coo();
    vec![
        Input {
            format: SparseFormat::Csr,
            major: shift(a.row_ptr.clone()),
            minor: shift(a.col_ind.clone()),
            values: a.values.clone(),
        },
        Input { format: SparseFormat::Csc, major: shift(col_ptr), minor: shift(row_ind), values: csc_values },
        Input { format: SparseFormat::Coo, major: shift(coo_rows), minor: shift(coo_cols), values: coo_values },
    ]
}

/// A matrix with empty rows and a few very long rows, so partitions both skip rows and split rows
/// over several partitions.
pub fn long_rows_csr<T: Element>(rng: &mut Rng, rows: usize, cols: usize) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for r in 0..rows {
        match rng.below(6) {
            0 => (0..cols).for_each(|c| triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))))),
            1 | 2 => {}
            _ => {
                for _ in 0..rng.below(4) {
                    triplets.push((r, rng.below(cols.max(1)), T::from_f64(rng.range(-1.0, 1.0))));
                }
            }
        }
    }
    if cols == 0 {
        triplets.clear();
    }
    CsrMatrix::from_triplets(rows, cols, triplets)
}

/// Reference `α·A·x + β·y` in f64, plus per row the magnitude Σ|α·a·x| + |β·y| and the row length,
/// which bound the rounding error of any summation order.
pub fn reference(a: &CsrMatrix<impl Element>, alpha: f64, x: &[f64], beta: f64, y: &[f64]) -> Vec<(f64, f64, usize)> {
    (0..a.rows)
        .map(|r| {
            let entries = a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize;
            let (mut sum, mut mag) = (0.0, 0.0);
            for e in entries.clone() {
                let term = a.values[e].to_f64() * x[a.col_ind[e] as usize];
                sum += term;
                mag += (alpha * term).abs();
            }
            let old = if beta == 0.0 { 0.0 } else { beta * y[r] };
            (alpha * sum + old, mag + old.abs(), entries.len())
        })
        .collect()
}

pub fn assert_spmv_close<T: Element>(what: &str, got: &[T], want: &[(f64, f64, usize)], eps: f64) {
    assert_eq!(got.len(), want.len());
    for (r, (g, (w, mag, len))) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        let tol = (*len as f64 + 16.0) * eps * mag + 1e-300;
        assert!((g - w).abs() <= tol && g.is_finite(), "{what}: y[{r}] = {g}, want {w} (tolerance {tol})");
    }
}

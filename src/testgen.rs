//! Input generators for tests, the demonstration and the benchmark: a small seeded PRNG, the decay
//! matrices of the SpAMM paper, and the sparse structures the other papers evaluate on (random, band,
//! block-structured, power-law R-MAT).

use crate::scalar::Element;
use crate::sparse::CsrMatrix;

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

fn decay<T: Element>(rng: &mut Rng, rows: usize, cols: usize, envelope: impl Fn(f64) -> f64) -> Vec<T> {
    let mut a = Vec::with_capacity(rows * cols);
    for j in 0..cols {
        for i in 0..rows {
            let sign = if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
            a.push(T::from_f64(sign * rng.range(0.5, 1.0) * envelope((i as f64 - j as f64).abs())));
        }
    }
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

/// A band matrix: every entry with |i − j| ≤ half_width present.
pub fn band_csr<T: Element>(rng: &mut Rng, n: usize, half_width: usize) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for r in 0..n {
        for c in r.saturating_sub(half_width)..(r + half_width + 1).min(n) {
            triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(n, n, triplets)
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
/// the Graph500 probabilities (a, b, c) = (0.57, 0.19, 0.19).
pub fn rmat_csr<T: Element>(rng: &mut Rng, scale: u32, edge_factor: usize) -> CsrMatrix<T> {
    let n = 1usize << scale;
    let (a, b, c) = (0.57, 0.19, 0.19);
    let mut seen = std::collections::HashSet::new();
    let mut triplets = Vec::new();
    for _ in 0..edge_factor * n {
        let (mut r, mut col) = (0usize, 0usize);
        for bit in (0..scale).rev() {
            let p = rng.uniform();
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
        if seen.insert((r, col)) {
            triplets.push((r, col, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(n, n, triplets)
}

/// ‖x − y‖_F / max(‖y‖_F, tiny): the relative Frobenius error used by every accuracy check.
pub fn relative_error(x: &[f64], reference: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (a, b) in x.iter().zip(reference) {
        num += (a - b) * (a - b);
        den += b * b;
    }
    num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE)
}

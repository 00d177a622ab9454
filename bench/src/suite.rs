//! The SMaT matrix suite (`--family smat --suite`): seeded stand-ins for the classes of SuiteSparse
//! matrices SpMM papers evaluate on, and one real matrix (ergo's overlap matrix, `bench/data`). Each
//! matrix has a short stable name and a class label that the report carries, so results can be
//! grouped by class; each is drawn from its own stream of the seed, so a selection of the suite has
//! the same matrices as the whole suite.
//!
//! At the default size every generated matrix has 2–4 M nonzeros: large enough that SpMM is not
//! launch-bound, small enough that the whole suite (14 matrices, four value types, three widths)
//! runs in minutes and each matrix is drawn in well under a second. `scale` multiplies the nonzeros
//! (about): `--quick` and the tests take a small one.

use crate::gpu::Outcome;
use rayon::prelude::*;
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{self, Rng, Stencil};
use std::ops::RangeInclusive;
use std::path::PathBuf;

/// The kind of matrix an entry stands for; its label is what the report prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Finite-difference stencils on 2D and 3D grids, scalar.
    Stencil,
    /// A vector-valued finite-element operator: 3×3 blocks coupling the nodes of a 3D mesh.
    Fem,
    Band,
    /// Dense-ish 16×16 blocks scattered.
    Block,
    /// A power-law graph (R-MAT).
    Graph,
    /// A road network: degree 2–4, planar, in spatial order.
    Road,
    /// Circuit simulation: very short rows plus a few very long rows and columns.
    Circuit,
    /// Uniformly random.
    Random,
    /// ergo's overlap matrix, from a real quantum-chemistry run.
    Ergo,
    /// A structured matrix with its rows in a random order, so that row reordering must earn its keep.
    Permuted,
}

impl Class {
    pub const ALL: [Class; 10] = [
        Class::Stencil,
        Class::Fem,
        Class::Band,
        Class::Block,
        Class::Graph,
        Class::Road,
        Class::Circuit,
        Class::Random,
        Class::Ergo,
        Class::Permuted,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Class::Stencil => "stencil",
            Class::Fem => "fem",
            Class::Band => "band",
            Class::Block => "block",
            Class::Graph => "graph",
            Class::Road => "road",
            Class::Circuit => "circuit",
            Class::Random => "random",
            Class::Ergo => "ergo",
            Class::Permuted => "permuted",
        }
    }
}

/// One matrix of the suite.
pub struct Entry {
    pub name: &'static str,
    pub class: Class,
    /// What it is, in a line.
    pub about: &'static str,
    /// Its nonzeros at the default size (scale 1), for readers; the tests check them.
    #[cfg_attr(not(test), allow(dead_code))]
    pub nnz: RangeInclusive<usize>,
    source: Source,
}

enum Source {
    /// Drawn from the entry's stream at a scale.
    Generated(fn(&mut Rng, f64) -> CsrMatrix<f64>),
    /// The matrix of the entry named (same seed, same scale) with its rows in a random order drawn
    /// from this entry's stream.
    RowsPermuted(&'static str),
    /// A Matrix Market file of `bench/data`, the same at every scale.
    DataFile(&'static str),
}

pub static SUITE: [Entry; 14] = [
    Entry {
        name: "stencil2d",
        class: Class::Stencil,
        about: "2D 5-point stencil, 768×768 grid",
        nnz: 2_900_000..=3_000_000,
        source: Source::Generated(stencil_2d),
    },
    Entry {
        name: "stencil3d",
        class: Class::Stencil,
        about: "3D 27-point stencil, 48³ grid",
        nnz: 2_800_000..=2_900_000,
        source: Source::Generated(stencil_3d),
    },
    Entry {
        name: "fem3x3",
        class: Class::Fem,
        about: "3D 27-point node graph of a 26³ mesh, 3×3 dense node blocks",
        nnz: 3_900_000..=4_000_000,
        source: Source::Generated(fem_3x3),
    },
    Entry {
        name: "band",
        class: Class::Band,
        about: "band of half-width 32, 50,000 rows",
        nnz: 3_200_000..=3_300_000,
        source: Source::Generated(band),
    },
    Entry {
        name: "block16",
        class: Class::Block,
        about: "16×16 blocks, 1.2 ‰ of them placed, filled 70 %, 65,536 rows",
        nnz: 3_400_000..=3_800_000,
        source: Source::Generated(block_16),
    },
    Entry {
        name: "rmat",
        class: Class::Graph,
        about: "R-MAT scale 18, edge factor 16 (power law)",
        nnz: 3_000_000..=4_200_000,
        source: Source::Generated(rmat),
    },
    Entry {
        name: "road",
        class: Class::Road,
        about: "860×860 street grid, 30 % of streets missing, a few diagonals, spatial order",
        nnz: 2_000_000..=2_200_000,
        source: Source::Generated(road),
    },
    Entry {
        name: "circuit",
        class: Class::Circuit,
        about: "400,000 nodes, 3–5 entries a row, 5 nets each on 10–30 % of the nodes (long rows and columns)",
        nnz: 2_000_000..=2_800_000,
        source: Source::Generated(circuit),
    },
    Entry {
        name: "random1e-4",
        class: Class::Random,
        about: "uniform random, density 1e-4, 150,000 rows",
        nnz: 2_200_000..=2_300_000,
        source: Source::Generated(random_1e4),
    },
    Entry {
        name: "random1e-3",
        class: Class::Random,
        about: "uniform random, density 1e-3, 50,000 rows",
        nnz: 2_450_000..=2_550_000,
        source: Source::Generated(random_1e3),
    },
    Entry {
        name: "random1e-2",
        class: Class::Random,
        about: "uniform random, density 1e-2, 16,384 rows",
        nnz: 2_650_000..=2_700_000,
        source: Source::Generated(random_1e2),
    },
    Entry {
        name: "ergo",
        class: Class::Ergo,
        about: "ergo 3.8 overlap matrix S, 125 waters, HF/3-21G, 1625 basis functions (bench/data)",
        nnz: 355_741..=355_741,
        source: Source::DataFile(ERGO_FILE),
    },
    Entry {
        name: "fem3x3-perm",
        class: Class::Permuted,
        about: "fem3x3 with its rows in a random order",
        nnz: 3_900_000..=4_000_000,
        source: Source::RowsPermuted("fem3x3"),
    },
    Entry {
        name: "stencil2d-perm",
        class: Class::Permuted,
        about: "stencil2d with its rows in a random order",
        nnz: 2_900_000..=3_000_000,
        source: Source::RowsPermuted("stencil2d"),
    },
];

const ERGO_FILE: &str = "ergo-w125-S.mtx.gz";

/// The scale `--quick` runs the suite at: about 1/16 of the nonzeros.
pub const QUICK_SCALE: f64 = 1.0 / 16.0;

impl Entry {
    /// The entry's matrix drawn from `seed` at `scale` (1 = the default size).
    pub fn matrix(&self, seed: u64, scale: f64) -> Outcome<CsrMatrix<f64>> {
        match self.source {
            Source::Generated(generate) => Ok(generate(&mut self.rng(seed), scale)),
            Source::RowsPermuted(base) => {
                let base = find(base).expect("a permuted entry names an entry of the suite").matrix(seed, scale)?;
                Ok(testgen::permute_rows(&mut self.rng(seed), &base).0)
            }
            Source::DataFile(file) => crate::read_mtx(&repository_file(&["bench", "data", file])?),
        }
    }

    /// The entry's own stream: the seed mixed with an FNV-1a hash of its name.
    fn rng(&self, seed: u64) -> Rng {
        let hash =
            self.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        Rng::new(seed ^ hash)
    }
}

pub fn find(name: &str) -> Option<&'static Entry> {
    SUITE.iter().find(|e| e.name == name)
}

/// `--suite`'s value: `all`, or names and class labels separated by commas; the entries they name,
/// in suite order.
pub fn parse_selection(v: &str) -> Result<Vec<&'static str>, String> {
    let mut wanted = vec![false; SUITE.len()];
    for word in v.split(',') {
        let mut known = false;
        for (i, e) in SUITE.iter().enumerate() {
            if word == "all" || word == e.name || word == e.class.label() {
                wanted[i] = true;
                known = true;
            }
        }
        if !known {
            let names: Vec<&str> = SUITE.iter().map(|e| e.name).collect();
            let classes: Vec<&str> = Class::ALL.iter().map(|c| c.label()).collect();
            return Err(format!(
                "'{word}' is neither a matrix of the suite ({}) nor a class ({}) nor all",
                names.join(", "),
                classes.join(", ")
            ));
        }
    }
    Ok(SUITE.iter().zip(wanted).filter(|(_, w)| *w).map(|(e, _)| e.name).collect())
}

/// Where a file of the repository is, given its path from the root: in the checkout the bench was
/// built from; else under the current directory (the repository root, where a machine without Rust
/// runs the prebuilt binary); else under a directory above the executable (`target/release/` or
/// `.gpu/bin/` of a checkout).
pub fn repository_file(parts: &[&str]) -> Outcome<PathBuf> {
    let relative: PathBuf = parts.iter().collect();
    let built_from = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(&relative);
    let mut candidates = vec![built_from, relative.clone()];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|dir| dir.join(&relative)));
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        format!("{} not found: run from the repository root, or beside a checkout's binary", relative.display())
    })
}

/// `default` scaled so that the points of a `dims`-dimensional grid, and with them the nonzeros,
/// scale by `scale`.
fn extent(default: usize, scale: f64, dims: i32) -> usize {
    ((default as f64 * scale.powf(1.0 / dims as f64)).round() as usize).max(3)
}

fn stencil_2d(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let side = extent(768, scale, 2);
    testgen::stencil_csr(rng, &[side, side], Stencil::Star, 1)
}

fn stencil_3d(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let side = extent(48, scale, 3);
    testgen::stencil_csr(rng, &[side, side, side], Stencil::Box, 1)
}

fn fem_3x3(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let side = extent(26, scale, 3);
    testgen::stencil_csr(rng, &[side, side, side], Stencil::Box, 3)
}

fn band(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    testgen::band_csr(rng, extent(50_000, scale, 1), 32)
}

/// Keeps the block density (and so the blocks a block row has) at every scale.
fn block_16(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let n = extent(65_536, scale, 2);
    testgen::block_csr(rng, n, n, 16, 0.0012, 0.7)
}

fn rmat(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let bits = (18.0 + scale.log2()).round().clamp(4.0, 30.0) as u32;
    testgen::rmat_csr(rng, bits, 16)
}

fn road(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    road_csr(rng, extent(860, scale, 2))
}

fn circuit(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    circuit_csr(rng, extent(400_000, scale, 1))
}

/// The random matrices keep their density: the rows scale with the square root.
fn random_1e4(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let n = extent(150_000, scale, 2);
    testgen::random_csr(rng, n, n, 1e-4)
}

fn random_1e3(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let n = extent(50_000, scale, 2);
    testgen::random_csr(rng, n, n, 1e-3)
}

fn random_1e2(rng: &mut Rng, scale: f64) -> CsrMatrix<f64> {
    let n = extent(16_384, scale, 2);
    testgen::random_csr(rng, n, n, 1e-2)
}

/// The chance that a street between grid neighbours exists, and that a diagonal one does.
const STREET: f64 = 0.7;
const DIAGONAL_STREET: f64 = 0.02;

/// A road network's stand-in: a `side × side` grid of junctions in natural (spatial) order, as road
/// networks come, where each street to the right or lower neighbour exists with probability
/// [`STREET`] and each diagonal one with [`DIAGONAL_STREET`]; both directions stored, no diagonal
/// entries. About 2.9 entries a row (degree 0–4 mostly), nearly planar.
fn road_csr(rng: &mut Rng, side: usize) -> CsrMatrix<f64> {
    let mut edges = Vec::with_capacity(3 * side * side);
    let at = |i: usize, j: usize| i * side + j;
    for i in 0..side {
        for j in 0..side {
            let mut neighbours = [None; 4];
            if j + 1 < side && rng.uniform() < STREET {
                neighbours[0] = Some(at(i, j + 1));
            }
            if i + 1 < side && rng.uniform() < STREET {
                neighbours[1] = Some(at(i + 1, j));
            }
            if i + 1 < side && j + 1 < side && rng.uniform() < DIAGONAL_STREET {
                neighbours[2] = Some(at(i + 1, j + 1));
            }
            if i + 1 < side && j > 0 && rng.uniform() < DIAGONAL_STREET {
                neighbours[3] = Some(at(i + 1, j - 1));
            }
            for q in neighbours.into_iter().flatten() {
                edges.push(pack(at(i, j), q));
                edges.push(pack(q, at(i, j)));
            }
        }
    }
    from_entries(rng, side * side, edges)
}

/// The supply and ground nets of [`circuit_csr`], and the share of all nodes each connects.
pub const CIRCUIT_NETS: usize = 5;
pub const CIRCUIT_NET_SHARE: std::ops::Range<f64> = 0.1..0.3;

/// A circuit simulation matrix's stand-in (the SMaT paper's failure case, dc2): `n` nodes, each with
/// its diagonal and one or two connections (both directions stored), three in four to a node within
/// 32 in netlist order and the rest anywhere, so 3–5 entries a row mostly; plus [`CIRCUIT_NETS`] nets
/// (supply, ground) at random nodes, each connected with a random share in [`CIRCUIT_NET_SHARE`] of
/// all nodes: as many very long rows and, the pattern being symmetric, columns.
fn circuit_csr(rng: &mut Rng, n: usize) -> CsrMatrix<f64> {
    let mut edges = Vec::with_capacity(8 * n);
    let connect = |edges: &mut Vec<u64>, a: usize, b: usize| {
        edges.push(pack(a, b));
        edges.push(pack(b, a));
    };
    for r in 0..n {
        edges.push(pack(r, r));
        for _ in 0..1 + rng.below(2) {
            let c = if rng.uniform() < 0.75 {
                let d = 1 + rng.below(32);
                if rng.next_u64() & 1 == 0 { r.checked_sub(d) } else { Some(r + d).filter(|&c| c < n) }
            } else {
                Some(rng.below(n))
            };
            if let Some(c) = c.filter(|&c| c != r) {
                connect(&mut edges, r, c);
            }
        }
    }
    let mut nets: Vec<usize> = Vec::with_capacity(CIRCUIT_NETS);
    while nets.len() < CIRCUIT_NETS.min(n) {
        let node = rng.below(n);
        if !nets.contains(&node) {
            nets.push(node);
        }
    }
    for &net in &nets {
        let share = rng.range(CIRCUIT_NET_SHARE.start, CIRCUIT_NET_SHARE.end);
        for node in 0..n {
            if node != net && rng.uniform() < share {
                connect(&mut edges, net, node);
            }
        }
    }
    from_entries(rng, n, edges)
}

/// An entry (row, column) as one sortable word.
fn pack(row: usize, col: usize) -> u64 {
    (row as u64) << 32 | col as u64
}

/// The `n × n` matrix of the packed entries (repeats merged), values in [-1, 1).
fn from_entries(rng: &mut Rng, n: usize, mut entries: Vec<u64>) -> CsrMatrix<f64> {
    entries.par_sort_unstable();
    entries.dedup();
    let mut row_ptr = vec![0i32; n + 1];
    for &e in &entries {
        row_ptr[(e >> 32) as usize + 1] += 1;
    }
    for r in 0..n {
        row_ptr[r + 1] += row_ptr[r];
    }
    let col_ind = entries.iter().map(|&e| (e & 0xffff_ffff) as i32).collect();
    let values = entries.iter().map(|_| rng.range(-1.0, 1.0)).collect();
    CsrMatrix { rows: n, cols: n, row_ptr, col_ind, values }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small enough that the whole suite draws in well under a second.
    const TEST_SCALE: f64 = 1.0 / 512.0;

    fn row(m: &CsrMatrix<f64>, r: usize) -> &[i32] {
        &m.col_ind[m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize]
    }

    /// What `smatCreateCsr` and cuSPARSE are given: consistent pointers, every row strictly
    /// increasing within the columns, finite values.
    fn check_structure(name: &str, m: &CsrMatrix<f64>) {
        assert_eq!(m.row_ptr.len(), m.rows + 1, "{name}");
        assert_eq!((m.row_ptr[0], m.row_ptr[m.rows] as usize, m.col_ind.len()), (0, m.nnz(), m.nnz()), "{name}");
        for r in 0..m.rows {
            let cols = row(m, r);
            assert!(cols.windows(2).all(|w| w[0] < w[1]), "{name}: row {r} is not strictly increasing");
            assert!(cols.iter().all(|&c| c >= 0 && (c as usize) < m.cols), "{name}: row {r} leaves the matrix");
        }
        assert!(m.values.iter().all(|v| v.is_finite()), "{name}");
    }

    #[test]
    fn every_matrix_is_well_formed_and_the_same_for_a_seed() {
        for e in &SUITE {
            let m = e.matrix(7, TEST_SCALE).unwrap();
            check_structure(e.name, &m);
            assert!(m.nnz() > 0 && m.rows == m.cols, "{}: {}x{}, {} nonzeros", e.name, m.rows, m.cols, m.nnz());
            let again = e.matrix(7, TEST_SCALE).unwrap();
            assert_eq!(
                (&m.row_ptr, &m.col_ind, &m.values),
                (&again.row_ptr, &again.col_ind, &again.values),
                "{}",
                e.name
            );
            if e.class != Class::Ergo {
                let other = e.matrix(8, TEST_SCALE).unwrap();
                assert_ne!(m.values, other.values, "{}: another seed drew the same values", e.name);
            }
        }
    }

    #[test]
    fn names_are_distinct_and_every_class_is_there() {
        for (i, e) in SUITE.iter().enumerate() {
            assert!(SUITE[..i].iter().all(|f| f.name != e.name), "{} twice", e.name);
            // A name that is also a class label must name that class's only matrix: selecting
            // either means the same.
            if let Some(class) = Class::ALL.iter().find(|c| c.label() == e.name) {
                assert_eq!(SUITE.iter().filter(|f| f.class == *class).count(), 1, "{} is a class of several", e.name);
                assert_eq!(e.class, *class, "{} is another class's label", e.name);
            }
        }
        for class in Class::ALL {
            assert!(SUITE.iter().any(|e| e.class == class), "no {} matrix", class.label());
        }
    }

    #[test]
    fn permuted_entries_hold_the_rows_of_their_base() {
        for e in SUITE.iter().filter(|e| e.class == Class::Permuted) {
            let Source::RowsPermuted(base) = e.source else { panic!("{} is not drawn as a permutation", e.name) };
            let (p, a) = (e.matrix(3, TEST_SCALE).unwrap(), find(base).unwrap().matrix(3, TEST_SCALE).unwrap());
            assert_eq!((p.rows, p.cols, p.nnz()), (a.rows, a.cols, a.nnz()), "{}", e.name);
            // Rows keyed by their entries: the same multiset in both, in another order.
            let key = |m: &CsrMatrix<f64>, r: usize| {
                let range = m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize;
                (m.col_ind[range.clone()].to_vec(), m.values[range].iter().map(|v| v.to_bits()).collect::<Vec<_>>())
            };
            let mut rows_p: Vec<_> = (0..p.rows).map(|r| key(&p, r)).collect();
            let mut rows_a: Vec<_> = (0..a.rows).map(|r| key(&a, r)).collect();
            assert_ne!(rows_p, rows_a, "{}: the rows kept their order", e.name);
            rows_p.sort_unstable();
            rows_a.sort_unstable();
            assert!(rows_p == rows_a, "{}: not the rows of {base}", e.name);
        }
    }

    #[test]
    fn the_circuit_has_its_long_rows_and_columns_and_short_ones_elsewhere() {
        let m = circuit_csr(&mut Rng::new(11), 20_000);
        check_structure("circuit", &m);
        let row_lengths: Vec<usize> = (0..m.rows).map(|r| row(&m, r).len()).collect();
        let mut col_lengths = vec![0usize; m.cols];
        m.col_ind.iter().for_each(|&c| col_lengths[c as usize] += 1);
        for lengths in [&row_lengths, &col_lengths] {
            let long: Vec<usize> = lengths.iter().copied().filter(|&l| l > m.rows / 20).collect();
            assert_eq!(long.len(), CIRCUIT_NETS, "long lines: {long:?}");
            assert!(
                long.iter().all(|&l| l as f64 >= 0.09 * m.rows as f64 && l as f64 <= 0.31 * m.rows as f64),
                "{long:?}"
            );
            let mut short: Vec<usize> = lengths.iter().copied().filter(|&l| l <= m.rows / 20).collect();
            short.sort_unstable();
            assert!((3..=5).contains(&short[short.len() / 2]), "median short line {}", short[short.len() / 2]);
            assert!(
                short[short.len() * 9 / 10] <= 8,
                "the 90th percentile of the short lines is {}",
                short[short.len() * 9 / 10]
            );
        }
    }

    #[test]
    fn the_road_network_is_sparse_local_and_symmetric() {
        let side = 200;
        let m = road_csr(&mut Rng::new(12), side);
        check_structure("road", &m);
        let mean = m.nnz() as f64 / m.rows as f64;
        assert!((2.6..3.2).contains(&mean), "{mean} entries a row");
        for r in 0..m.rows {
            for &c in row(&m, r) {
                let (i, j, k, l) = (r / side, r % side, c as usize / side, c as usize % side);
                assert!(i.abs_diff(k) <= 1 && j.abs_diff(l) <= 1 && r != c as usize, "({r}, {c}) is no street");
                assert!(row(&m, c as usize).binary_search(&(r as i32)).is_ok(), "({r}, {c}) one way");
            }
        }
    }

    #[test]
    fn selections_name_matrices_or_classes() {
        assert_eq!(parse_selection("all").unwrap().len(), SUITE.len());
        assert_eq!(parse_selection("road").unwrap(), ["road"]);
        assert_eq!(parse_selection("random,ergo").unwrap(), ["random1e-4", "random1e-3", "random1e-2", "ergo"]);
        assert_eq!(parse_selection("ergo,stencil2d,ergo").unwrap(), ["stencil2d", "ergo"]);
        assert_eq!(parse_selection("permuted").unwrap(), ["fem3x3-perm", "stencil2d-perm"]);
        for bad in ["", "roads", "road,", "ALL"] {
            assert!(parse_selection(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_ergo_matrix_is_read_whole() {
        let m = find("ergo").unwrap().matrix(0, 1.0).unwrap();
        assert_eq!((m.rows, m.cols, m.nnz()), (1625, 1625, 355_741));
        // Symmetric storage expanded: every (i, j) has its (j, i) with the same value.
        for r in 0..m.rows {
            for e in m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize {
                let c = m.col_ind[e] as usize;
                let mirror = row(&m, c).binary_search(&(r as i32)).expect("no mirror entry");
                assert_eq!(m.values[m.row_ptr[c] as usize + mirror], m.values[e]);
            }
        }
    }

    /// The sizes the suite states, at the default scale: every generated matrix drawn (a few
    /// seconds in release mode).
    #[test]
    fn the_default_sizes_are_as_stated() {
        for e in &SUITE {
            let began = std::time::Instant::now();
            let m = e.matrix(20240601, 1.0).unwrap();
            let seconds = began.elapsed().as_secs_f64();
            eprintln!(
                "{:<16} {:<9} {:>9} rows {:>10} nonzeros  {seconds:.2} s",
                e.name,
                e.class.label(),
                m.rows,
                m.nnz()
            );
            assert!(e.nnz.contains(&m.nnz()), "{}: {} nonzeros, stated {:?}", e.name, m.nnz(), e.nnz);
        }
    }
}

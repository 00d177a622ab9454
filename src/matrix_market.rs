//! A Matrix Market reader (<https://math.nist.gov/MatrixMarket/formats.html>): `coordinate` and
//! `array` matrices with `real`, `integer` or `pattern` values and `general` or `symmetric`
//! symmetry, into a zero-based [`CsrMatrix<f64>`]. Symmetric files store one triangle; the reader
//! mirrors every off-diagonal entry. Pattern entries read as 1.0. Array files keep every entry,
//! zeros included, since the file states them.

use crate::sparse::CsrMatrix;
use std::fmt;
use std::io::BufRead;

/// What went wrong, and on which line (1-based; 0 when the file ended early).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixMarketError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for MatrixMarketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "Matrix Market: {}", self.message)
        } else {
            write!(f, "Matrix Market line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for MatrixMarketError {}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Storage {
    Coordinate,
    Array,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Pattern,
}

/// Reads one matrix from `reader`.
pub fn read_matrix_market<R: BufRead>(reader: R) -> Result<CsrMatrix<f64>, MatrixMarketError> {
    let err = |line: usize, message: String| MatrixMarketError { line, message };
    let mut lines = reader.lines().enumerate().map(|(i, l)| (i + 1, l));
    let mut next_line = |what: &str| -> Result<Option<(usize, String)>, MatrixMarketError> {
        match lines.next() {
            None => Ok(None),
            Some((n, Ok(text))) => Ok(Some((n, text))),
            Some((n, Err(e))) => Err(err(n, format!("cannot read {what}: {e}"))),
        }
    };

    let (_, banner) = next_line("the header")?.ok_or_else(|| err(0, "the input is empty".into()))?;
    let words: Vec<String> = banner.split_whitespace().map(|w| w.to_ascii_lowercase()).collect();
    if words.len() != 5 || words[0] != "%%matrixmarket" || words[1] != "matrix" {
        return Err(err(1, format!("expected '%%MatrixMarket matrix <format> <field> <symmetry>', found '{banner}'")));
    }
    let storage = match words[2].as_str() {
        "coordinate" => Storage::Coordinate,
        "array" => Storage::Array,
        other => return Err(err(1, format!("format '{other}' is not coordinate or array"))),
    };
    let field = match words[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" if storage == Storage::Coordinate => Field::Pattern,
        "pattern" => return Err(err(1, "the pattern field is only defined for coordinate matrices".into())),
        other => return Err(err(1, format!("field '{other}' is not supported (real, integer or pattern)"))),
    };
    let symmetric = match words[4].as_str() {
        "general" => false,
        "symmetric" => true,
        other => return Err(err(1, format!("symmetry '{other}' is not supported (general or symmetric)"))),
    };

    // Skip comments and blank lines up to the size line.
    let (size_line_no, size_line) = loop {
        match next_line("the size line")? {
            None => return Err(err(0, "the file ends before the size line".into())),
            Some((_, text)) if text.trim().is_empty() || text.trim_start().starts_with('%') => continue,
            Some(found) => break found,
        }
    };
    let sizes: Vec<usize> = size_line
        .split_whitespace()
        .map(|w| w.parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| err(size_line_no, format!("malformed size line '{size_line}'")))?;
    let expected_sizes = if storage == Storage::Coordinate { 3 } else { 2 };
    if sizes.len() != expected_sizes {
        return Err(err(size_line_no, format!("the size line needs {expected_sizes} numbers, found '{size_line}'")));
    }
    let (rows, cols) = (sizes[0], sizes[1]);
    if symmetric && rows != cols {
        return Err(err(size_line_no, format!("a symmetric matrix must be square, not {rows} x {cols}")));
    }
    if rows > i32::MAX as usize || cols > i32::MAX as usize {
        return Err(err(size_line_no, format!("{rows} x {cols} does not fit 32-bit indices")));
    }
    // The entries the file must contain, and where entry number e lands for array storage.
    let entries = match storage {
        Storage::Coordinate => sizes[2],
        Storage::Array if symmetric => rows * (rows + 1) / 2,
        Storage::Array => rows * cols,
    };

    let parse_value = |line: usize, word: Option<&str>| -> Result<f64, MatrixMarketError> {
        let word = word.ok_or_else(|| err(line, "missing value".into()))?;
        match field {
            Field::Integer => {
                word.parse::<i64>().map(|v| v as f64).map_err(|_| err(line, format!("'{word}' is not an integer")))
            }
            _ => word.parse::<f64>().map_err(|_| err(line, format!("'{word}' is not a real number"))),
        }
    };

    let mut triplets: Vec<(usize, usize, f64)> = Vec::with_capacity(if symmetric { 2 * entries } else { entries });
    let (mut array_row, mut array_col) = (0usize, 0usize);
    let mut read = 0usize;
    while let Some((n, text)) = next_line("an entry")? {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('%') {
            continue;
        }
        if read == entries {
            return Err(err(n, format!("more entries than the {entries} the size line announces")));
        }
        let mut words = trimmed.split_whitespace();
        let (row, col, value) = match storage {
            Storage::Coordinate => {
                let mut index = |name: &str, limit: usize| -> Result<usize, MatrixMarketError> {
                    let word = words.next().ok_or_else(|| err(n, format!("missing {name} index")))?;
                    let i: usize =
                        word.parse().map_err(|_| err(n, format!("{name} index '{word}' is not a number")))?;
                    if i == 0 || i > limit {
                        return Err(err(n, format!("{name} index {i} is outside [1, {limit}]")));
                    }
                    Ok(i - 1)
                };
                let row = index("row", rows)?;
                let col = index("column", cols)?;
                let value = if field == Field::Pattern { 1.0 } else { parse_value(n, words.next())? };
                (row, col, value)
            }
            Storage::Array => {
                let value = parse_value(n, words.next())?;
                let here = (array_row, array_col, value);
                // Column-major; a symmetric array lists the lower triangle, diagonal included.
                array_row += 1;
                if array_row == rows {
                    array_col += 1;
                    array_row = if symmetric { array_col } else { 0 };
                }
                here
            }
        };
        if let Some(extra) = words.next() {
            return Err(err(n, format!("unexpected '{extra}' after the entry")));
        }
        triplets.push((row, col, value));
        if symmetric && row != col {
            triplets.push((col, row, value));
        }
        read += 1;
    }
    if read != entries {
        return Err(err(0, format!("the file ends after {read} of the {entries} entries the size line announces")));
    }
    Ok(csr_from_triplets(rows, cols, &triplets))
}

/// CSR from unordered triplets by a counting sort on rows and a stable sort of each row by column
/// (duplicates kept, in file order). Cheaper than sorting all triplets at once: a dense symmetric
/// file such as ergo's 1625² density matrix has millions of entries in no particular order.
fn csr_from_triplets(rows: usize, cols: usize, triplets: &[(usize, usize, f64)]) -> CsrMatrix<f64> {
    let mut row_ptr = vec![0i32; rows + 1];
    for &(r, _, _) in triplets {
        row_ptr[r + 1] += 1;
    }
    for r in 0..rows {
        row_ptr[r + 1] += row_ptr[r];
    }
    let mut next: Vec<usize> = row_ptr[..rows].iter().map(|&p| p as usize).collect();
    let mut entries = vec![(0i32, 0.0f64); triplets.len()];
    for &(r, c, v) in triplets {
        entries[next[r]] = (c as i32, v);
        next[r] += 1;
    }
    for r in 0..rows {
        entries[row_ptr[r] as usize..row_ptr[r + 1] as usize].sort_by_key(|e| e.0);
    }
    let (col_ind, values) = entries.into_iter().unzip();
    CsrMatrix { rows, cols, row_ptr, col_ind, values }
}

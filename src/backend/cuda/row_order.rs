//! Orders of CSR rows on the device (SMaT's CSR part, MSREP's pCSR batches): whether neighbouring
//! rows read distant columns, and the order by first column that brings such rows together, so that
//! rows reading nearby columns of the dense operand run side by side and share it through the caches
//! (a structured matrix whose rows were permuted).

use crate::alloc::try_collect_par;
use crate::error::Result;
use rayon::prelude::*;

/// Rows are scattered where more than `caller_far_apart` (a fraction) of neighbouring rows start
/// over `local_columns` columns apart in the caller's order. [`by_first_column`] reorders them where
/// sorting the rows by their first column brings that under `sorted_far_apart`; rows that span more
/// than `1 / widest_mean_span` of the columns on average (random columns, which no order brings
/// together) are not tried.
struct ScatteredRows {
    local_columns: u32,
    caller_far_apart: (usize, usize),
    widest_mean_span: usize,
    sorted_far_apart: (usize, usize),
}
const SCATTERED_ROWS: ScatteredRows =
    ScatteredRows { local_columns: 64, caller_far_apart: (1, 2), widest_mean_span: 8, sorted_far_apart: (1, 10) };

/// A zero-based column index as CSR storage holds it.
pub trait Column: Copy + Sync {
    fn index(self) -> u32;
}

impl Column for u32 {
    fn index(self) -> u32 {
        self
    }
}

impl Column for i32 {
    fn index(self) -> u32 {
        self as u32
    }
}

/// A row's first and last column, (u32::MAX, 0) for an empty row.
const EMPTY: (u32, u32) = (u32::MAX, 0);

fn has_entries((first, last): (u32, u32)) -> bool {
    first <= last
}

fn far(a: u32, b: u32) -> bool {
    a.abs_diff(b) > SCATTERED_ROWS.local_columns
}

/// Neighbouring rows, both with entries: (pairs, pairs far apart by `apart`).
fn neighbours(rows: &[(u32, u32)], apart: impl Fn((u32, u32), (u32, u32)) -> bool) -> (usize, usize) {
    let pairs = rows.windows(2).filter(|w| has_entries(w[0]) && has_entries(w[1]));
    pairs.fold((0, 0), |(count, far), w| (count + 1, far + usize::from(apart(w[0], w[1]))))
}

/// The columns of each row's first and last stored entries (`row(i)`: row i's column indices), in
/// increasing order: a read or two a row. Their distance is at most the row's span, and near it for
/// rows of random columns.
fn stored_ends<'a, C: Column + 'a>(rows: usize, row: &(impl Fn(usize) -> &'a [C] + Sync)) -> Result<Vec<(u32, u32)>> {
    try_collect_par(rows, "the CSR row order", |i| {
        let columns = row(i);
        let (Some(a), Some(b)) = (columns.first(), columns.last()) else { return EMPTY };
        let (a, b) = (a.index(), b.index());
        (a.min(b), a.max(b))
    })
}

/// Neighbouring rows with entries among `rows` rows (`row(i)`: row i's column indices) in the
/// caller's order, and how many of them start far apart: summed over several matrices, the
/// argument of [`scattered`].
pub fn neighbours_far_apart<'a, C: Column + 'a>(
    rows: usize,
    row: impl Fn(usize) -> &'a [C] + Sync,
) -> Result<(usize, usize)> {
    Ok(neighbours(&stored_ends(rows, &row)?, |a, b| far(a.0, b.0)))
}

/// Whether (pairs, far apart) of [`neighbours_far_apart`] says the rows are scattered.
pub fn scattered((pairs, far_apart): (usize, usize)) -> bool {
    let (most, of) = SCATTERED_ROWS.caller_far_apart;
    pairs > 0 && far_apart * of > pairs * most
}

/// The rows (`row(i)`: row i's column indices) by their first (smallest) column, empty rows last,
/// ties in caller order, as caller rows in the new order, where they are [`scattered`] and span on
/// average at most `1 / widest_mean_span` of the columns, both judged by the first and last entry
/// each row holds, and that order brings under a tenth the neighbours that start or end far apart;
/// `None` otherwise. Rows in order, or of random columns, cost a read or two a row.
pub fn by_first_column<'a, C: Column + 'a>(
    rows: usize,
    row: impl Fn(usize) -> &'a [C] + Sync,
) -> Result<Option<Vec<u32>>> {
    let stored_ends = stored_ends(rows, &row)?;
    let (pairs, far_apart) = neighbours(&stored_ends, |a, b| far(a.0, b.0));
    if !scattered((pairs, far_apart)) {
        return Ok(None);
    }
    let with_entries = || stored_ends.iter().copied().filter(|&row| has_entries(row));
    let columns = with_entries().map(|(_, b)| b as usize + 1).max().unwrap_or(0);
    let span: usize = with_entries().map(|(a, b)| (b - a) as usize).sum();
    if span * SCATTERED_ROWS.widest_mean_span > (pairs + 1) * columns {
        return Ok(None);
    }
    // Each row's first and last column.
    let ends: Vec<(u32, u32)> = try_collect_par(rows, "the CSR row order", |i| {
        row(i).iter().fold(EMPTY, |(first, last), &c| (first.min(c.index()), last.max(c.index())))
    })?;
    // By first column, ties in caller order (empty rows, first column u32::MAX, last).
    let mut keys = try_collect_par(rows, "the CSR row order", |i| ((ends[i].0 as u64) << 32) | i as u64)?;
    keys.par_sort_unstable();
    let order = try_collect_par(rows, "the CSR row order", |at| keys[at] as u32)?;
    let sorted = try_collect_par(rows, "the CSR row order", |at| ends[order[at] as usize])?;
    let (_, far_sorted) = neighbours(&sorted, |a, b| far(a.0, b.0) || far(a.1, b.1));
    let (most, of) = SCATTERED_ROWS.sorted_far_apart;
    Ok((far_sorted * of < pairs * most).then_some(order))
}

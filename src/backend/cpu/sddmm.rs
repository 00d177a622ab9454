//! SDDMM on the CPU: the tiled algorithm (GPU-Shared's structure, with cache in place of shared
//! memory) and the nnz-balanced COO algorithm (GPU-Convert). Both compute
//! `out[e] = α·S[e]·⟨A[i,:], B[j,:]⟩` in `T::Compute` and overwrite `out`.

use super::CpuExecutor;
use super::tf32::{tf32_round, tf32_split};
use crate::alloc::{try_vec, try_with_capacity};
use crate::dense::MatRef;
use crate::error::{Error, Result};
use crate::log;
use crate::scalar::{ComputeScalar, Element};
use crate::sddmm::contract::{InvalidPattern, PreparedPlan, Sampling, SddmmBackend, SddmmPatterns, Structure};
use crate::sddmm::{
    BandSchedule, SddmmAlgorithm, SddmmMathMode, SddmmOperands, SddmmPlan, TILE_COLS, TILE_K, TILE_ROWS, TileSchedule,
    coo_row_indices,
};
use crate::types::Layout;
use rayon::prelude::*;
use std::any::TypeId;
use std::borrow::Cow;

/// Lanes of independent partial sums in a dot product: enough for the compiler to vectorise and to
/// hide the add latency.
const LANES: usize = 8;

/// ⟨x, y⟩ of two contiguous slices of equal length, in the compute type. Independent lanes let
/// the compiler vectorise (the conversion is the identity for f32 / f64).
#[inline(always)]
fn dot_slices<X: Element>(x: &[X], y: &[X]) -> X::Compute {
    let zero = <X::Compute as ComputeScalar>::ZERO;
    let mut partial = [zero; LANES];
    let (xc, yc) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (xs, ys) in xc.zip(yc) {
        for l in 0..LANES {
            partial[l] += xs[l].to_compute() * ys[l].to_compute();
        }
    }
    let mut tail = zero;
    for (&a, &b) in xr.iter().zip(yr) {
        tail += a.to_compute() * b.to_compute();
    }
    reduce_lanes(partial) + tail
}

#[inline(always)]
fn reduce_lanes<C: ComputeScalar>(p: [C; LANES]) -> C {
    ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]))
}

/// ⟨row i of A, row j of B⟩ read straight from the caller's arrays, converting to the compute type.
#[inline(always)]
fn dot_rows<T: Element>(a: &MatRef<'_, T>, i: usize, b: &MatRef<'_, T>, j: usize) -> T::Compute {
    let k = a.cols;
    if k == 0 {
        return <T::Compute as ComputeScalar>::ZERO;
    }
    if a.col_stride == 1 && b.col_stride == 1 {
        // Row-major: both rows are contiguous, the case that vectorises.
        dot_slices(&a.data[i * a.row_stride..][..k], &b.data[j * b.row_stride..][..k])
    } else {
        // Column-major: rows are strided; still keep independent partial sums.
        let (sa, sb) = (a.col_stride, b.col_stride);
        let (a0, b0) = (i * a.row_stride, j * b.row_stride);
        let mut partial = [<T::Compute as ComputeScalar>::ZERO; LANES];
        let full = k - k % LANES;
        let mut p = 0;
        while p < full {
            for (l, lane) in partial.iter_mut().enumerate() {
                *lane += a.data[a0 + (p + l) * sa].to_compute() * b.data[b0 + (p + l) * sb].to_compute();
            }
            p += LANES;
        }
        let mut tail = <T::Compute as ComputeScalar>::ZERO;
        for p in full..k {
            tail += a.data[a0 + p * sa].to_compute() * b.data[b0 + p * sb].to_compute();
        }
        reduce_lanes(partial) + tail
    }
}

/// `α·S[e]·dot`, rounded to the output type. The order of the products is the same in both
/// algorithms so they differ only by the summation order of the dot product.
#[inline(always)]
fn finish<T: Element>(alpha: T::Compute, s_values: Option<&[T]>, e: usize, dot: T::Compute) -> T {
    let scaled = match s_values {
        Some(s) => alpha * s[e].to_compute(),
        None => alpha,
    };
    T::from_compute(scaled * dot)
}

/// GPU-Convert: equal chunks of nonzeros, each an independent dot product of two dense rows.
pub fn coo<T: Element>(op: &SddmmOperands<'_, T>, coo_rows: &[u32], out: &mut [T]) {
    let nnz = out.len();
    if nnz == 0 {
        return;
    }
    // Several chunks per thread so an uneven machine still balances; none so small that the
    // scheduling dominates.
    let chunk = nnz.div_ceil(rayon::current_num_threads() * 8).max(512);
    log::note(|| format!("kernel: a task per {chunk} nonzeros (tasks: {}), a dot product each", nnz.div_ceil(chunk)));
    out.par_chunks_mut(chunk).enumerate().for_each(|(c, out_chunk)| {
        let first = c * chunk;
        for (offset, slot) in out_chunk.iter_mut().enumerate() {
            let e = first + offset;
            let dot = dot_rows(&op.a, coo_rows[e] as usize, &op.b, op.pattern.index(e));
            *slot = finish(op.alpha, op.s_values, e, dot);
        }
    });
}

/// GPU-Shared: band by band (one task each), K slice by K slice: the band's A panel is packed once
/// per slice and reused by all its tiles; each tile's B panel (only the columns its nonzeros use)
/// is packed once per slice and reused by all its nonzeros. Panels are contiguous, in the compute
/// type, so every dot product is a contiguous one.
///
/// The dot products accumulate in the compute type: in `out` itself when that is its type, else in
/// one array allocated before anything is written, so a failure leaves `out` untouched.
pub fn tiled<T: Element>(op: &SddmmOperands<'_, T>, schedule: &TileSchedule, out: &mut [T]) -> Result<()> {
    log::note(|| {
        let tiles: usize = schedule.bands.iter().map(|band| band.tiles.len()).sum();
        format!(
            "kernel: a task per band of {TILE_ROWS} rows (bands {}, tiles {tiles} of {TILE_ROWS}x{TILE_COLS}), K in \
             slices of {TILE_K}",
            schedule.bands.len()
        )
    });
    if TypeId::of::<T>() == TypeId::of::<T::Compute>() {
        // SAFETY: T and T::Compute are the same type (same TypeId); `out` is not used again.
        let sums = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut T::Compute, out.len()) };
        return tiled_into(op, schedule, sums, None);
    }
    let mut sums = try_vec(out.len(), <T::Compute as ComputeScalar>::ZERO, "the tiled SDDMM's sums")?;
    tiled_into(op, schedule, &mut sums, Some(out))
}

/// [`tiled`] with the sums in `sums` and the results written to `out`, or over the sums when `out`
/// is `None` (the output is of the compute type).
fn tiled_into<T: Element>(
    op: &SddmmOperands<'_, T>,
    schedule: &TileSchedule,
    sums: &mut [T::Compute],
    mut out: Option<&mut [T]>,
) -> Result<()> {
    // Bands cover S's entries in order, so the sums and the output split into one disjoint slice per
    // band.
    let mut parts = try_with_capacity(schedule.bands.len(), "the row bands' parts of the output")?;
    let mut rest = sums;
    for band in &schedule.bands {
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut(band.entries.len());
        let out_band = out.as_mut().map(|o| {
            let (mine, tail) = std::mem::take(o).split_at_mut(band.entries.len());
            *o = tail;
            mine
        });
        parts.push((band, mine, out_band));
        rest = tail;
    }
    parts.into_par_iter().for_each(|(band, acc, out_band)| {
        if !band.entries.is_empty() {
            tiled_band(op, band, acc, out_band);
        }
    });
    Ok(())
}

fn tiled_band<T: Element>(
    op: &SddmmOperands<'_, T>,
    band: &BandSchedule,
    acc: &mut [T::Compute],
    out: Option<&mut [T]>,
) {
    let zero = <T::Compute as ComputeScalar>::ZERO;
    let k = op.a.cols;
    acc.fill(zero);
    // Row-major data already in the compute type has contiguous K slices: the tile order alone
    // keeps them in cache and a copy would only add traffic. Column-major or 16-bit data is packed
    // (transposed / converted) once per slice and reused.
    let direct = op.a.col_stride == 1 && op.b.col_stride == 1 && T::VALUE_TYPE == <T::Compute as Element>::VALUE_TYPE;
    if direct {
        for k0 in (0..k).step_by(TILE_K) {
            let width = TILE_K.min(k - k0);
            for tile in &band.tiles {
                let columns = &band.columns[tile.columns.0 as usize..tile.columns.1 as usize];
                for g in tile.entries.0 as usize..tile.entries.1 as usize {
                    let i = band.first_row + band.entry_rows[g] as usize;
                    let j = columns[band.entry_slots[g] as usize] as usize;
                    acc[band.entries[g] as usize] += dot_slices(
                        &op.a.data[i * op.a.row_stride + k0..][..width],
                        &op.b.data[j * op.b.row_stride + k0..][..width],
                    );
                }
            }
        }
        finish_band(op, band, acc, out);
        return;
    }
    let mut a_panel = vec![zero; TILE_ROWS * TILE_K.min(k)];
    let mut b_panel = vec![zero; TILE_COLS * TILE_K.min(k)];
    for k0 in (0..k).step_by(TILE_K) {
        let width = TILE_K.min(k - k0);
        for r in 0..band.row_count {
            let row = &mut a_panel[r * width..][..width];
            for (p, v) in row.iter_mut().enumerate() {
                *v = op.a.get(band.first_row + r, k0 + p).to_compute();
            }
        }
        for tile in &band.tiles {
            let columns = &band.columns[tile.columns.0 as usize..tile.columns.1 as usize];
            for (slot, &j) in columns.iter().enumerate() {
                let row = &mut b_panel[slot * width..][..width];
                for (p, v) in row.iter_mut().enumerate() {
                    *v = op.b.get(j as usize, k0 + p).to_compute();
                }
            }
            for g in tile.entries.0 as usize..tile.entries.1 as usize {
                let r = band.entry_rows[g] as usize;
                let slot = band.entry_slots[g] as usize;
                acc[band.entries[g] as usize] +=
                    dot_slices(&a_panel[r * width..][..width], &b_panel[slot * width..][..width]);
            }
        }
    }
    finish_band(op, band, acc, out);
}

/// The band's results from its sums, into `out`, or over the sums when there is no `out` (then the
/// output is of the compute type and the conversion is the identity).
fn finish_band<T: Element>(
    op: &SddmmOperands<'_, T>,
    band: &BandSchedule,
    acc: &mut [T::Compute],
    out: Option<&mut [T]>,
) {
    let s_band = op.s_values.map(|s| &s[band.first_entry..][..acc.len()]);
    match out {
        Some(out) => {
            for (local, (slot, &dot)) in out.iter_mut().zip(acc.iter()).enumerate() {
                *slot = finish(op.alpha, s_band, local, dot);
            }
        }
        None => {
            for (local, sum) in acc.iter_mut().enumerate() {
                *sum = finish::<T>(op.alpha, s_band, local, *sum).to_compute();
            }
        }
    }
}

/// A and B (m × k and n × k) as a TF32 math mode multiplies them, row-major, for the exact
/// algorithms to run on: in TF32 each element rounded to TF32; in 3xTF32 each row of k elements
/// made one of 3k, A's as [small, big, big] and B's as [big, small, big] ([`tf32_split`]), so that a
/// dot product of two new rows is the sum of small_a·big_b + big_a·small_b + big_a·big_b. Every
/// product of TF32 values is exact in FP32, so the exact algorithms add the mode's products.
/// f32 only: the family passes no other type a TF32 mode.
fn tf32_factors<T: Element>(op: &SddmmOperands<'_, T>, math: SddmmMathMode) -> Result<(Vec<T>, Vec<T>, usize)> {
    let k = op.a.cols;
    let width = if math == SddmmMathMode::Tf32x3 { 3 * k } else { k };
    let convert = |x: &MatRef<'_, T>, big_first: bool, name: &str| -> Result<Vec<T>> {
        let mut rows = try_vec(x.rows * width, T::from_f64(0.0), name)?;
        rows.par_chunks_mut(width.max(1)).enumerate().for_each(|(i, row)| {
            for p in 0..k {
                let value = x.get(i, p).to_f64() as f32;
                match math {
                    SddmmMathMode::Tf32x3 => {
                        let (big, small) = tf32_split(value);
                        let (first, second) = if big_first { (big, small) } else { (small, big) };
                        row[p] = T::from_f64(first as f64);
                        row[k + p] = T::from_f64(second as f64);
                        row[2 * k + p] = T::from_f64(big as f64);
                    }
                    _ => row[p] = T::from_f64(tf32_round(value) as f64),
                }
            }
        });
        Ok(rows)
    };
    let a = convert(&op.a, false, "A rounded to TF32")?;
    let b = convert(&op.b, true, "B rounded to TF32")?;
    Ok((a, b, width))
}

impl<T: Element> SddmmBackend<T> for CpuExecutor {
    unsafe fn sample(&mut self, sampling: &Sampling<'_, T>) -> Result<()> {
        let Structure::Validated(pattern) = sampling.structure else {
            return Err(Error::internal("the CPU backend was given a pattern to validate in place"));
        };
        // SAFETY: the caller's arrays are host memory of their stated lengths (the contract).
        let (operands, out) = unsafe { (sampling.operands.host(pattern), sampling.operands.host_out(pattern.nnz())) };
        let rounded;
        let operands = match sampling.math {
            SddmmMathMode::Default => operands,
            math => {
                log::note(|| format!("A and B rounded as {math:?} multiplies them, then the exact algorithm"));
                rounded = tf32_factors(&operands, math)?;
                let (a, b, width) = (&rounded.0, &rounded.1, rounded.2);
                SddmmOperands {
                    a: MatRef::new(a, operands.a.rows, width, width, Layout::RowMajor),
                    b: MatRef::new(b, operands.b.rows, width, width, Layout::RowMajor),
                    ..operands
                }
            }
        };
        match sampling.algorithm {
            SddmmAlgorithm::Tiled => {
                let built;
                let schedule = match sampling.plan {
                    Some(p) => p.tile_schedule(),
                    None => {
                        built = TileSchedule::build(&pattern)?;
                        &built
                    }
                };
                tiled(&operands, schedule, out)
            }
            SddmmAlgorithm::Coo | SddmmAlgorithm::Auto => {
                let built;
                let rows = match sampling.plan {
                    Some(p) => p.coo_rows(),
                    None => {
                        built = coo_row_indices(&pattern)?;
                        &built[..]
                    }
                };
                coo(&operands, rows, out);
                Ok(())
            }
        }
    }
}

impl SddmmPatterns for CpuExecutor {
    /// Never: every pattern is read on the host, so it is validated there before the call runs.
    fn validates_in_place(&self, _row_ptr: *const i32, _col_ind: Option<*const i32>) -> bool {
        false
    }

    fn invalid_pattern(&mut self, _wait: bool) -> Result<Option<InvalidPattern>> {
        Ok(None)
    }

    unsafe fn host_indices<'a>(&self, ptr: *const i32, len: usize, _name: &str) -> Result<Cow<'a, [i32]>> {
        // SAFETY: host memory readable for `len` ints (the contract).
        Ok(Cow::Borrowed(unsafe { std::slice::from_raw_parts(ptr, len) }))
    }

    fn prepare_plan(&mut self, _plan: &SddmmPlan) -> Result<Option<Box<dyn PreparedPlan>>> {
        Ok(None)
    }
}

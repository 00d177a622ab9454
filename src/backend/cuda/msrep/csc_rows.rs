//! pCSC partitions as rows: the entries of the pCSC partitions of one device side, sorted by row when
//! they are placed, so that the side's partial vector (Algorithm 5's, one a GPU) is computed by the
//! pCSR batch kernels, a row at a time, instead of by scattering each column's products with atomics.
//! In each row, the entries stay in the order of the partitions and of their columns, so the sums
//! are the same on every call. From [`DEVICE_SORT_MIN_ENTRIES`] on, the sort runs on the device (a
//! stable radix sort, [`ByRows::on_device`]); below, on the host: a stable counting sort in
//! parallel passes, the entries counted by bins of rows, which make buckets of consecutive rows
//! holding about the same number of entries; each task (a run of columns) counts its entries in each
//! bucket, then writes them into its piece of each bucket; then each bucket is sorted by row into
//! its part of the result.

use super::super::memory::DeviceBuffer;
use super::super::{GpuDevice, Launch, Stream};
use crate::alloc::{ZeroBits, try_collect_par, try_with_capacity, try_zeros};
use crate::chunks;
use crate::error::{Error, Result};
use crate::msrep::partition::PartitionBounds;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Arc;

/// Rows are counted in bins of this many rows, and buckets of the first pass are runs of bins.
const ROWS_PER_BIN: usize = 256;

/// A bucket holds at most this many rows (its row counts stay in L2) ...
const MAX_ROWS_PER_BUCKET: usize = 1 << 16;

/// ... and, where its rows allow, about the entries of all divided by this times the threads: a
/// power-law matrix holds a large share of its entries in its first rows, and buckets of equal row
/// counts left the one of those rows to a single thread (R-MAT scale 23: 15 % of the entries in
/// its first 65,536 rows) ...
const BUCKETS_PER_THREAD: usize = 4;

/// ... but no fewer than this many: below it, a bucket costs more to schedule than to sort.
const MIN_ENTRIES_PER_BUCKET: usize = 1 << 16;

/// One pCSC partition's entries: the local pointers of its columns (`first_column` on), the rows of
/// their entries and their values.
pub struct Columns<'a, T> {
    pub first_column: usize,
    pub local_ptr: &'a [i32],
    pub rows: &'a [i32],
    pub values: &'a [T],
}

impl<T> Columns<'_, T> {
    /// The positions in `rows` / `values` of local column `j`'s entries.
    fn entries(&self, j: usize) -> Range<usize> {
        let base = self.local_ptr[0];
        (self.local_ptr[j] - base) as usize..(self.local_ptr[j + 1] - base) as usize
    }
}

/// The entries of some pCSC partitions by rows: CSR arrays over all the matrix's rows, global
/// column indices.
#[derive(Debug, PartialEq)]
pub struct ByRows<T> {
    pub row_ptr: Vec<usize>,
    pub cols: Vec<i32>,
    pub values: Vec<T>,
}

/// An entry on its way to its row: row, column, value.
type Entry<T> = (i32, i32, T);

impl<T: ZeroBits + Copy + Send + Sync> ByRows<T> {
    /// The entries of `parts` (rows below `rows`) sorted by row; in a row, in the order of `parts`
    /// and of their columns.
    pub fn of(parts: &[Columns<T>], rows: usize) -> Result<Self> {
        let entries: usize = parts.iter().map(|p| p.rows.len()).sum();
        let target = (entries / (BUCKETS_PER_THREAD * rayon::current_num_threads())).max(MIN_ENTRIES_PER_BUCKET);
        Self::in_buckets_of(parts, rows, target)
    }

    /// [`ByRows::of`], with buckets of about `target` entries where their rows allow.
    fn in_buckets_of(parts: &[Columns<T>], rows: usize, target: usize) -> Result<Self> {
        // Tasks: runs of columns of one partition with about the same number of entries.
        let mut tasks: Vec<(usize, Range<usize>)> = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            let base = p.local_ptr[0] as usize;
            let bounds = chunks::runs(p.local_ptr.len() - 1, |j| p.local_ptr[j] as usize - base);
            tasks.extend(bounds.windows(2).map(|w| (k, w[0]..w[1])));
        }
        let task_rows = |&(k, ref columns): &(usize, Range<usize>)| {
            let p = &parts[k];
            &p.rows[p.entries(columns.start).start..p.entries(columns.end - 1).end]
        };
        // The entries of each bin of rows, and the buckets: runs of bins.
        let bin_entries = tasks
            .par_iter()
            .fold(
                || vec![0usize; rows.div_ceil(ROWS_PER_BIN)],
                |mut bins, task| {
                    for &r in task_rows(task) {
                        bins[r as usize / ROWS_PER_BIN] += 1;
                    }
                    bins
                },
            )
            .reduce_with(|mut a, b| {
                a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                a
            })
            .unwrap_or_default();
        let mut first_rows = vec![0usize];
        let mut bucket_of_bin = Vec::with_capacity(bin_entries.len());
        let mut held = 0;
        for (bin, &count) in bin_entries.iter().enumerate() {
            let start = *first_rows.last().expect("a first bucket");
            if held > 0 && (held + count > target || (bin + 1) * ROWS_PER_BIN - start > MAX_ROWS_PER_BUCKET) {
                first_rows.push(bin * ROWS_PER_BIN);
                held = 0;
            }
            held += count;
            bucket_of_bin.push((first_rows.len() - 1) as u32);
        }
        first_rows.push(rows);
        let buckets = first_rows.len() - 1;
        let bucket_of = |r: i32| bucket_of_bin[r as usize / ROWS_PER_BIN] as usize;
        // Pass 1: each task's entries in each bucket, counted.
        let counts: Vec<Vec<usize>> = tasks
            .par_iter()
            .map(|task| {
                let mut counts = vec![0usize; buckets];
                for &r in task_rows(task) {
                    counts[bucket_of(r)] += 1;
                }
                counts
            })
            .collect();
        let sizes: Vec<usize> = (0..buckets).map(|b| counts.iter().map(|c| c[b]).sum()).collect();
        let entries: usize = sizes.iter().sum();
        // Pass 2: the entries by bucket, in a bucket in the order of the tasks; each task writes its
        // own piece of every bucket (pieces bucket by bucket, a task's piece of each in task order).
        let mut bucketed: Vec<Entry<T>> = try_with_capacity(entries, "pCSC entries by rows")?;
        let lengths = (0..buckets).flat_map(|b| counts.iter().map(move |c| c[b]));
        let mut pieces_of_task: Vec<Vec<&mut [MaybeUninit<Entry<T>>]>> =
            (0..tasks.len()).map(|_| Vec::with_capacity(buckets)).collect();
        for (i, piece) in
            chunks::split_mut(&mut bucketed.spare_capacity_mut()[..entries], lengths).into_iter().enumerate()
        {
            pieces_of_task[i % tasks.len()].push(piece);
        }
        tasks.par_iter().zip(pieces_of_task).for_each(|((k, columns), mut pieces)| {
            let p = &parts[*k];
            let mut next = vec![0usize; buckets];
            for j in columns.clone() {
                let column = (p.first_column + j) as i32;
                for e in p.entries(j) {
                    let r = p.rows[e];
                    let b = bucket_of(r);
                    pieces[b][next[b]].write((r, column, p.values[e]));
                    next[b] += 1;
                }
            }
        });
        // SAFETY: the pieces cover the first `entries` elements, and each task wrote every element of
        // its pieces (its count of entries in each bucket).
        unsafe { bucketed.set_len(entries) };
        // Pass 3: each bucket's entries by row, into its part of the result (the buckets hold
        // consecutive rows, so a bucket's part of the result is where its entries lie now).
        let mut cols: Vec<i32> = try_with_capacity(entries, "pCSC entries by rows")?;
        let mut values: Vec<T> = try_with_capacity(entries, "pCSC entries by rows")?;
        let col_parts = chunks::split_mut(&mut cols.spare_capacity_mut()[..entries], sizes.iter().copied());
        let value_parts = chunks::split_mut(&mut values.spare_capacity_mut()[..entries], sizes.iter().copied());
        let bucket_parts = chunks::split_mut(&mut bucketed, sizes.iter().copied());
        // Per bucket, the positions of its rows' first entries within it.
        let starts: Vec<Vec<usize>> = bucket_parts
            .into_par_iter()
            .zip(col_parts)
            .zip(value_parts)
            .enumerate()
            .map(|(b, ((bucket, cols), values))| {
                let first = first_rows[b];
                let count = first_rows[b + 1] - first;
                let mut start = vec![0usize; count + 1];
                for &(r, _, _) in bucket.iter() {
                    start[r as usize - first + 1] += 1;
                }
                for i in 0..count {
                    start[i + 1] += start[i];
                }
                let mut next = start[..count].to_vec();
                for &(r, c, v) in bucket.iter() {
                    let at = &mut next[r as usize - first];
                    cols[*at].write(c);
                    values[*at].write(v);
                    *at += 1;
                }
                start
            })
            .collect();
        // SAFETY: the parts cover the first `entries` elements, and each bucket wrote every element of
        // its part: one entry at each position from its rows' starts to the next row's.
        unsafe {
            cols.set_len(entries);
            values.set_len(entries);
        }
        let mut offsets = vec![0usize; buckets + 1];
        for b in 0..buckets {
            offsets[b + 1] = offsets[b] + sizes[b];
        }
        let row_ptr = try_collect_par(rows + 1, "pCSC row pointers", |i| match i {
            _ if i == rows => entries,
            _ => {
                let b = bucket_of_bin[i / ROWS_PER_BIN] as usize;
                offsets[b] + starts[b][i - first_rows[b]]
            }
        })?;
        Ok(ByRows { row_ptr, cols, values })
    }

    /// [`ByRows::of`] sorted on `gpu` (bound) on `stream` (see [`ByRows::on_device`]) where the
    /// entries are at least [`DEVICE_SORT_MIN_ENTRIES`] (or `on_device_at_any_size`) and fewer than
    /// 2^31, otherwise on the host: the same result either way.
    pub fn sorted(
        parts: &[Columns<T>],
        rows: usize,
        gpu: &Arc<GpuDevice>,
        stream: Stream,
        on_device_at_any_size: bool,
    ) -> Result<Self> {
        let entries: usize = parts.iter().map(|p| p.rows.len()).sum();
        match (entries >= DEVICE_SORT_MIN_ENTRIES || on_device_at_any_size) && entries < 1 << 31 && entries > 0 {
            true => Self::on_device(parts, rows, gpu, stream),
            false => Self::of(parts, rows),
        }
    }

    /// [`ByRows::of`] on the device: the rows, columns and values uploaded, sorted by a stable radix
    /// sort of the rows (`msrep_sort_*` in kernels/msrep.cu) and downloaded. At most 2^31 - 1
    /// entries (32-bit positions).
    fn on_device(parts: &[Columns<T>], rows: usize, gpu: &Arc<GpuDevice>, stream: Stream) -> Result<Self> {
        let entries: usize = parts.iter().map(|p| p.rows.len()).sum();
        let device = DeviceSort { gpu, stream };
        // The partitions' columns, concatenated: their pointers and their columns of the matrix.
        let mut column_ptr: Vec<i64> = vec![0];
        let mut column_of: Vec<i32> = Vec::new();
        for p in parts {
            let (base, at) = (p.local_ptr[0] as i64, *column_ptr.last().expect("starts at 0"));
            column_ptr.extend(p.local_ptr[1..].iter().map(|&q| at + q as i64 - base));
            column_of.extend((0..p.local_ptr.len() - 1).map(|j| (p.first_column + j) as i32));
        }
        let keys: Vec<&[i32]> = parts.iter().map(|p| p.rows).collect();
        let mut keys = DeviceBuffer::from_host_parts(gpu, &keys, stream, "pCSC rows")?;
        let counts = DeviceBuffer::zeroed(gpu, rows * 4, stream, "pCSC row counts")?;
        device.launch(
            "msrep_sort_count",
            entries,
            crate::kernel_args![&(entries as i64), &keys.ptr(), &counts.ptr()],
        )?;
        let mut positions = DeviceBuffer::alloc(gpu, entries * 4, stream, "pCSC positions")?;
        device.launch("msrep_sort_iota", entries, crate::kernel_args![&(entries as i64), &positions.ptr()])?;
        let bits = usize::BITS - rows.saturating_sub(1).leading_zeros();
        let tiles = entries.div_ceil(SORT_TILE);
        let hist = DeviceBuffer::alloc(gpu, SORT_DIGITS * tiles * 4, stream, "pCSC sort counts")?;
        let mut keys_out = DeviceBuffer::alloc(gpu, entries * 4, stream, "pCSC rows")?;
        let mut positions_out = DeviceBuffer::alloc(gpu, entries * 4, stream, "pCSC positions")?;
        let tile_grid = Launch { grid: (tiles as u32, 1, 1), block: (SORT_THREADS, 1, 1), shared_bytes: 0 };
        for shift in (0..bits).step_by(8) {
            let (n, shift, tiles_i, hist_ptr) = (entries as i64, shift as i32, tiles as i32, hist.ptr());
            let args = crate::kernel_args![&n, &keys.ptr(), &shift, &hist_ptr, &tiles_i];
            device.launch_with("msrep_sort_histogram", tile_grid, args)?;
            device.scan(&hist, SORT_DIGITS * tiles)?;
            let (keys_in, positions_in) = (keys.ptr(), positions.ptr());
            let (keys_to, positions_to) = (keys_out.ptr(), positions_out.ptr());
            let args =
                crate::kernel_args![&n, &keys_in, &positions_in, &keys_to, &positions_to, &shift, &hist_ptr, &tiles_i];
            device.launch_with("msrep_sort_scatter", tile_grid, args)?;
            std::mem::swap(&mut keys, &mut keys_out);
            std::mem::swap(&mut positions, &mut positions_out);
        }
        drop((keys, keys_out, positions_out, hist));
        let column_ptr = DeviceBuffer::from_host(gpu, &column_ptr, stream, "pCSC column pointers")?;
        let column_of_buffer = DeviceBuffer::from_host(gpu, &column_of, stream, "pCSC columns")?;
        let columns = DeviceBuffer::alloc(gpu, entries * 4, stream, "pCSC entries' columns")?;
        let columns_count = column_of.len() as i32;
        device.launch(
            "msrep_sort_columns",
            column_of.len() * 32,
            crate::kernel_args![&columns_count, &column_ptr.ptr(), &column_of_buffer.ptr(), &columns.ptr()],
        )?;
        let cols = device.gathered::<i32>(&positions, &columns, entries)?;
        drop((column_ptr, column_of_buffer, columns));
        let values: Vec<&[T]> = parts.iter().map(|p| p.values).collect();
        let values = DeviceBuffer::from_host_parts(gpu, &values, stream, "pCSC values")?;
        let values = device.gathered::<T>(&positions, &values, entries)?;
        let mut row_counts: Vec<u32> = try_zeros(rows, "pCSC row counts")?;
        counts.copy_to_host(&mut row_counts)?;
        let mut row_ptr: Vec<usize> = try_zeros(rows + 1, "pCSC row pointers")?;
        for (r, &count) in row_counts.iter().enumerate() {
            row_ptr[r + 1] = row_ptr[r] + count as usize;
        }
        Ok(ByRows { row_ptr, cols, values })
    }

    /// The rows from its first row with an entry to its last (empty without entries).
    pub fn occupied(&self) -> Range<usize> {
        let entries = self.cols.len();
        if entries == 0 {
            return 0..0;
        }
        self.row_ptr.partition_point(|&p| p == 0) - 1..self.row_ptr.partition_point(|&p| p < entries)
    }

    /// Its rows `rows` cut into consecutive pieces of at most `limit` entries each (the pointers of a
    /// batch are 32-bit), each as the bounds of a pCSR partition of whole rows and its local pointers.
    pub fn pieces(&self, rows: Range<usize>, limit: usize) -> Result<Vec<(PartitionBounds, Vec<i32>)>> {
        let mut pieces = Vec::new();
        let mut start = rows.start;
        while start < rows.end {
            let first = self.row_ptr[start];
            let end = start + self.row_ptr[start..=rows.end].partition_point(|&p| p - first <= limit) - 1;
            if end == start {
                return Err(Error::not_supported(format!(
                    "row {start} of the pCSC matrix holds more than {limit} entries, more than a GPU batch holds"
                )));
            }
            let bounds = PartitionBounds {
                start_idx: first,
                end_idx: self.row_ptr[end],
                start_major: start,
                end_major: end,
                start_flag: false,
                end_flag: false,
            };
            let local_ptr =
                try_collect_par(end - start + 1, "pCSC row pointers", |i| (self.row_ptr[start + i] - first) as i32)?;
            pieces.push((bounds, local_ptr));
            start = end;
        }
        Ok(pieces)
    }
}

/// Entries from which a side's pCSC partitions are sorted by rows on the device
/// ([`ByRows::on_device`]): below, the host's sort costs less than the copies to the device and back.
const DEVICE_SORT_MIN_ENTRIES: usize = 1 << 20;

/// Keys a thread block of the device sort takes (`MSREP_SORT_TILE`), its threads
/// (`MSREP_SORT_THREADS`) and the digits of a pass (`MSREP_SORT_DIGITS`: 8 bits).
const SORT_TILE: usize = 2048;
const SORT_THREADS: u32 = 256;
const SORT_DIGITS: usize = 256;

/// The device and stream of a device sort.
struct DeviceSort<'a> {
    gpu: &'a Arc<GpuDevice>,
    stream: Stream,
}

impl DeviceSort<'_> {
    fn launch_with(&self, name: &str, cfg: Launch, args: &mut [*mut std::ffi::c_void]) -> Result<()> {
        // SAFETY: the arguments are those of the kernel named, pointing into live buffers.
        unsafe { super::launch_on(self.gpu, name, cfg, self.stream, args) }
    }

    /// Launches `name` with a thread for each of `threads` (a grid that strides over the rest).
    fn launch(&self, name: &str, threads: usize, args: &mut [*mut std::ffi::c_void]) -> Result<()> {
        self.launch_with(name, super::grid_for(self.gpu, threads), args)
    }

    /// The exclusive prefix sums of the first `n` counts of `data`, in place.
    fn scan(&self, data: &DeviceBuffer, n: usize) -> Result<()> {
        let blocks = n.div_ceil(SORT_TILE);
        let sums = DeviceBuffer::alloc(self.gpu, blocks.max(1) * 4, self.stream, "pCSC sort sums")?;
        let grid = Launch { grid: (blocks as u32, 1, 1), block: (SORT_THREADS, 1, 1), shared_bytes: 0 };
        let (n_i, data_ptr, sums_ptr) = (n as i64, data.ptr(), sums.ptr());
        self.launch_with("msrep_scan_blocks", grid, crate::kernel_args![&n_i, &data_ptr, &sums_ptr])?;
        if blocks > 1 {
            self.scan(&sums, blocks)?;
            self.launch_with("msrep_scan_add", grid, crate::kernel_args![&n_i, &data_ptr, &sums_ptr])?;
        }
        Ok(())
    }

    /// `from`'s `n` elements of `E` in the order of `positions`, downloaded.
    fn gathered<E: Copy + ZeroBits>(&self, positions: &DeviceBuffer, from: &DeviceBuffer, n: usize) -> Result<Vec<E>> {
        let size = std::mem::size_of::<E>();
        let to = DeviceBuffer::alloc(self.gpu, n * size, self.stream, "pCSC entries by rows")?;
        let (n_i, positions, from, to_ptr) = (n as i64, positions.ptr(), from.ptr(), to.ptr());
        let name = format!("msrep_sort_gather_b{size}");
        self.launch(&name, n, crate::kernel_args![&n_i, &positions, &from, &to_ptr])?;
        let mut out: Vec<E> = try_zeros(n, "pCSC entries by rows")?;
        to.copy_to_host(&mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_two_partitions_become_rows_in_column_order() {
        // A 4 x 5 matrix; partition 0 holds columns 0..3 with column 2 split after its first entry,
        // partition 1 the rest of column 2 and columns 3..5. Row 2 is empty.
        // Columns: 0: rows 1, 3; 1: row 0; 2: rows 0 | 3; 3: none; 4: rows 1, 0 (unsorted).
        let p0 = Columns {
            first_column: 0,
            local_ptr: &[10, 12, 13, 14],
            rows: &[1, 3, 0, 0],
            values: &[1.0, 2.0, 3.0, 4.0],
        };
        let p1 = Columns { first_column: 2, local_ptr: &[0, 1, 1, 3], rows: &[3, 1, 0], values: &[5.0, 6.0, 7.0] };
        let got = ByRows::of(&[p0, p1], 4).unwrap();
        let want = ByRows {
            row_ptr: vec![0, 3, 5, 5, 7],
            cols: vec![1, 2, 4, 0, 4, 0, 2],
            values: vec![3.0, 4.0, 7.0, 1.0, 6.0, 2.0, 5.0],
        };
        assert_eq!(got, want);
        let empty: ByRows<f64> = ByRows::of(&[], 3).unwrap();
        assert_eq!(empty, ByRows { row_ptr: vec![0; 4], cols: vec![], values: vec![] });
    }

    #[test]
    fn rows_spread_over_buckets_keep_their_order() {
        // Two columns over 3 buckets of rows, each column holding every third row backwards.
        let rows = 2 * MAX_ROWS_PER_BUCKET + 7;
        let column: Vec<i32> = (0..rows as i32).rev().filter(|r| r % 3 == 0).collect();
        let n = column.len() as i32;
        let all_rows: Vec<i32> = column.iter().chain(&column).copied().collect();
        let values: Vec<f32> = (0..2 * n).map(|e| e as f32).collect();
        let p = Columns { first_column: 5, local_ptr: &[0, n, 2 * n], rows: &all_rows, values: &values };
        let got = ByRows::of(&[p], rows).unwrap();
        for r in 0..rows {
            let at = got.row_ptr[r]..got.row_ptr[r + 1];
            match r % 3 {
                0 => {
                    let e = column.iter().position(|&c| c == r as i32).unwrap() as f32;
                    assert_eq!((&got.cols[at.clone()], &got.values[at]), (&[5, 6][..], &[e, e + n as f32][..]));
                }
                _ => assert!(at.is_empty()),
            }
        }
    }

    #[test]
    fn skewed_rows_in_buckets_of_any_size_keep_their_order() {
        // Three partitions of columns over 5,000 rows, half of the entries in the first 300 rows
        // (as a power-law graph's first rows hold many); buckets from one bin of rows each to one
        // bucket of all, against a stable sort of the entries by row.
        let rows = 5000;
        let mut rng = crate::testgen::Rng::fresh("skewed_rows_in_buckets_of_any_size_keep_their_order");
        let mut next = move || rng.next_u64();
        let mut owned = Vec::new();
        let mut first_column = 0;
        for columns in [700, 1, 1300] {
            let mut ptr = vec![0i32];
            let mut row_of = Vec::new();
            for _ in 0..columns {
                for _ in 0..next() % 12 {
                    let r = next() as usize % rows;
                    row_of.push(if next() % 2 == 0 { r % 300 } else { r } as i32);
                }
                ptr.push(row_of.len() as i32);
            }
            let values: Vec<f64> = (0..row_of.len()).map(|_| next() as f64).collect();
            owned.push((first_column, ptr, row_of, values));
            first_column += columns;
        }
        let parts: Vec<Columns<f64>> = owned
            .iter()
            .map(|(first_column, ptr, rows, values)| Columns {
                first_column: *first_column,
                local_ptr: ptr,
                rows,
                values,
            })
            .collect();
        let mut listed: Vec<(i32, i32, f64)> = Vec::new();
        for p in &parts {
            for j in 0..p.local_ptr.len() - 1 {
                listed.extend(p.entries(j).map(|e| (p.rows[e], (p.first_column + j) as i32, p.values[e])));
            }
        }
        listed.sort_by_key(|&(r, _, _)| r);
        let mut row_ptr = vec![0; rows + 1];
        for &(r, _, _) in &listed {
            row_ptr[r as usize + 1] += 1;
        }
        for r in 0..rows {
            row_ptr[r + 1] += row_ptr[r];
        }
        let want = ByRows {
            row_ptr,
            cols: listed.iter().map(|e| e.1).collect(),
            values: listed.iter().map(|e| e.2).collect(),
        };
        for target in [1, 50, 1000, usize::MAX] {
            assert!(ByRows::in_buckets_of(&parts, rows, target).unwrap() == want, "buckets of {target} entries");
        }
        assert!(ByRows::of(&parts, rows).unwrap() == want);
    }

    #[test]
    fn pieces_cut_at_rows_within_the_limit() {
        let by_rows = ByRows { row_ptr: vec![0, 2, 2, 5, 6, 9], cols: vec![0; 9], values: vec![0.0f32; 9] };
        let pieces = by_rows.pieces(0..5, 4).unwrap();
        let spans: Vec<_> =
            pieces.iter().map(|(b, p)| (b.start_major..b.end_major, b.start_idx..b.end_idx, p.clone())).collect();
        assert_eq!(spans, vec![(0..2, 0..2, vec![0, 2, 2]), (2..4, 2..6, vec![0, 3, 4]), (4..5, 6..9, vec![0, 3])]);
        assert_eq!(by_rows.pieces(0..5, 9).unwrap().len(), 1);
        assert!(by_rows.pieces(0..5, 2).is_err());
        // Rows 1..4 only: the piece ends at row 4 although row 4 would fit.
        let inner: Vec<_> =
            by_rows.pieces(1..4, 4).unwrap().into_iter().map(|(b, p)| (b.start_major..b.end_major, p)).collect();
        assert_eq!(inner, vec![(1..4, vec![0, 0, 3, 4])]);
        let none = ByRows::<f32> { row_ptr: vec![0], cols: vec![], values: vec![] };
        assert!(none.pieces(0..0, 4).unwrap().is_empty());
    }

    #[test]
    fn occupied_rows_run_from_the_first_row_with_an_entry_to_the_last() {
        let by_rows = ByRows { row_ptr: vec![0, 0, 0, 2, 2, 3, 3], cols: vec![0; 3], values: vec![0.0f32; 3] };
        assert_eq!(by_rows.occupied(), 2..5);
        let full = ByRows { row_ptr: vec![0, 1, 2], cols: vec![0; 2], values: vec![0.0f32; 2] };
        assert_eq!(full.occupied(), 0..2);
        let none = ByRows::<f32> { row_ptr: vec![0, 0, 0], cols: vec![], values: vec![] };
        assert_eq!(none.occupied(), 0..0);
    }
}

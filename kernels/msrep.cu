// MSREP SpMV kernels: the partitions of a device in one launch (a batch of pCSR partitions; a pCOO
// partition runs as the pCSR partition of the same entries, a device's pCSC partitions as pCSR
// partitions of their entries sorted by rows), on the device that holds them, plus the merge of
// partial results on the lead device, in a launch of its own or at the end of a batch launch that
// holds every partition (src/backend/cuda/msrep.rs orders them).
//
// Row results of a partition go one of two ways:
// - "finish" (partitions whose device writes y): rows only this partition touches are finished in
//   place, y = α·s + β·y (β = 0 never reads y); the raw sums of its split first / last row go to
//   shared[0] / shared[1] for the merge, which applies β once to those rows;
// - "raw" (partitions of a device that cannot write y, and pCSC rows where several devices' partial
//   vectors are summed): raw sums s of all its rows go to a partial vector, which finish_batch (or
//   csc_merge) later turns into y on the lead device.

// The sum of a product term, accumulated in the element type (as the CPU specification does).
template <typename T>
__device__ __forceinline__ T msrep_finish(T alpha, T s, T beta, const T* y) {
    return beta == (T)0 ? alpha * s : alpha * s + beta * *y;
}

// Where row j (local to its partition, n rows) of a partition's results goes in finish mode. Returns
// whether it went to a shared slot.
template <typename T>
__device__ __forceinline__ bool msrep_emit(int j, int n, T s, int start_flag, int end_flag, T alpha, T beta,
                                           T* y_part, T* shared) {
    if (start_flag && j == 0) {
        shared[0] = s;
    } else if (end_flag && j == n - 1) {
        shared[1] = s;
    } else {
        y_part[j] = msrep_finish(alpha, s, beta, y_part + j);
        return false;
    }
    return true;
}

// Merged rows (split between partitions, or in no partition): y = β·y (0 without reading y when
// β = 0) plus α·s of every partition sharing the row, in partition order (as the CPU merge adds them).
// Shared row i of shared_count is rows[i], its sums shared[slot[k]] for k in first[i]..first[i+1];
// the rows in no partition come as runs, run r rows run_bounds[2r]..run_bounds[2r+1]. Run by a launch
// of its own, or, where one batch launch holds every partition that writes shared sums and there are
// no such runs, by the last of that launch's threads to write a shared sum (`finished` counts them).
struct MsrepMerge {
    int shared_count;
    const int* rows;
    const int* first;
    const int* slot;
    int runs;
    const int* run_bounds;
    unsigned* finished;
};

// The merge's rows for thread `thread` of `threads`. The sums are read past L1 (ld.global.cg): in a
// batch launch that merges they were written by other blocks of the same launch.
template <typename T>
__device__ void merge_rows(int thread, int threads, const MsrepMerge& m, const T* shared, T alpha, T beta, T* y) {
    for (int i = thread; i < m.shared_count; i += threads) {
        const int row = m.rows[i];
        T acc = beta == (T)0 ? (T)0 : beta * y[row];
        for (int k = m.first[i]; k < m.first[i + 1]; ++k) acc += alpha * __ldcg(shared + m.slot[k]);
        y[row] = acc;
    }
    for (int r = 0; r < m.runs; ++r) {
        for (sgpu_i64 row = (sgpu_i64)m.run_bounds[2 * r] + thread; row < m.run_bounds[2 * r + 1]; row += threads) {
            y[row] = beta == (T)0 ? (T)0 : beta * y[row];
        }
    }
}

// The merge at the end of a batch launch that merges (`merge` given; only where the merge has no rows
// in no partition): each thread that writes a shared row's sum then counts it in `finished`, once it
// is visible to the device; the last of them (finished reaches the number of sums) merges the shared
// rows alone, and resets the count for the next call. A launch fewer a call than a merge of its own,
// and nothing for the threads and blocks that write no shared sum.
template <typename T>
__device__ void merge_when_last(const MsrepMerge* __restrict__ merge, const T* shared, T alpha, T beta, T* y) {
    __threadfence();
    const MsrepMerge m = *merge;
    if (atomicAdd(m.finished, 1u) != (unsigned)m.first[m.shared_count] - 1) return;
    __threadfence();
    merge_rows<T>(0, 1, m, shared, alpha, beta, y);
    *m.finished = 0;
}

// pCSR runs as batches: the partitions of one device concatenated (their local pointers offset into
// one pointer array), so that one launch covers them all and a device's partition count costs nothing
// per call. Row j of partition p is "virtual" row parts[p].row_base + j of its batch.
struct MsrepCsrPart {
    int row_base;     // its first virtual row
    int rows;         // its rows (the span of its entries, empty rows included)
    int y_offset;     // its first row of y (finish mode)
    int shared_slot;  // 2·(partition index): slots of its split first / last row's sum
    int start_flag;
    int end_flag;
};

// A piece of a long row, summed by one block. The chunks of a row are consecutive in the chunk list.
struct MsrepChunk {
    int row;         // virtual row
    int begin;       // entries begin..end of the batch
    int end;
    int first;       // the row's first chunk
    int count;       // the row's chunks
    int long_index;  // the row's completion counter
};

// The partition of virtual row v: `known` if it holds v (rows come in increasing order to each
// thread, so it mostly does), else found by binary search on row_base.
__device__ __forceinline__ MsrepCsrPart batch_part(int v, const MsrepCsrPart& known,
                                                   const MsrepCsrPart* __restrict__ parts, int part_count) {
    if (v >= known.row_base && v < known.row_base + known.rows) return known;
    int lo = 0, hi = part_count - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (parts[mid].row_base <= v) lo = mid; else hi = mid - 1;
    }
    return parts[lo];
}

// No partition yet: batch_part looks the first one up.
__device__ __forceinline__ MsrepCsrPart no_part() {
    MsrepCsrPart p = {0, 0, 0, 0, 0, 0};
    return p;
}

// Where virtual row v's sum goes: raw[v] (raw mode: partitions of another device), else finished
// into y or a shared slot as msrep_emit says for its partition (`part`, kept from row to row). A
// batch whose rows the device stores in another order than its partitions' maps each stored row to
// its virtual row in `row_map` (Mapped; otherwise stored rows are virtual rows). Returns whether the
// sum went to a shared slot.
template <bool Mapped, typename T>
__device__ __forceinline__ bool batch_emit(int v, T s, MsrepCsrPart& part, const MsrepCsrPart* __restrict__ parts,
                                           int part_count, T alpha, T beta, T* y, T* shared, T* raw,
                                           const int* __restrict__ row_map) {
    if (Mapped) v = row_map[v];
    if (raw) {
        raw[v] = s;
        return false;
    }
    part = batch_part(v, part, parts, part_count);
    return msrep_emit(v - part.row_base, part.rows, s, part.start_flag, part.end_flag, alpha, beta,
                      y + part.y_offset, shared + part.shared_slot);
}

// Column indices of a batch: 32-bit columns (I = int), or 16-bit offsets (I = short, where the
// batch's columns allow it): column = shift + idx[e], plus, where the offsets are from a diagonal, the
// entry's anchor a: its virtual row, or for a row of a stream block the block's first row (a stream
// block loads its entries without their rows). Offsets from a fixed column (from_diagonal 0) serve a
// batch whose columns all lie within 64 K of each other, wherever its rows read them. `col_base` is
// what an index is added to: 0, or shift (+ a).
struct MsrepColumns {
    int shift;
    int from_diagonal;
};
__device__ __forceinline__ int batch_col_base(const int*, int, MsrepColumns) { return 0; }
// from_diagonal is 0 or 1: a product rather than a select, with which the f64 row kernels, held to
// 32 registers, spilled.
__device__ __forceinline__ int batch_col_base(const short*, int a, MsrepColumns c) {
    return c.shift + a * c.from_diagonal;
}

// An entry's index or value: with Streaming (entries a block reads once, coalesced: stream blocks and
// long-row chunks), marked evict-first (ld.global.cs), so that the matrix passing through L2 leaves
// x's lines there (R-MAT scale 23 in f64, x 67 MB: 1.41 → 1.34 ms on an H100); without it (a row's
// group of lanes, whose neighbouring rows share the sectors of their entries), as cached loads: the
// same mark on them slowed the large band in f32 from 0.156 to 0.250 ms.
template <bool Streaming, typename E>
__device__ __forceinline__ E entry_load(const E* __restrict__ p) {
    return Streaming ? __ldcs(p) : *p;
}

// A batch's values as stored: float or double, computed in their own type, or the bits of a 16-bit
// float (msrep_f16, msrep_bf16), multiplied and summed in f32 (half the bytes of f32 values to stream;
// x, y and every sum stay f32).
struct msrep_f16 {
    sgpu_f16 bits;
};
struct msrep_bf16 {
    sgpu_bf16 bits;
};
template <bool Streaming>
__device__ __forceinline__ float value_load(const float* __restrict__ p) {
    return entry_load<Streaming>(p);
}
template <bool Streaming>
__device__ __forceinline__ double value_load(const double* __restrict__ p) {
    return entry_load<Streaming>(p);
}
template <bool Streaming>
__device__ __forceinline__ float value_load(const msrep_f16* __restrict__ p) {
    return sgpu_f16_to_f32(entry_load<Streaming>(&p->bits));
}
template <bool Streaming>
__device__ __forceinline__ float value_load(const msrep_bf16* __restrict__ p) {
    return sgpu_bf16_to_f32(entry_load<Streaming>(&p->bits));
}

// Σ val[e]·x[col_base + idx[e]] over e = first, first + stride, … < end, added in that order. Entries
// are loaded MSREP_IN_FLIGHT at a time before their x is gathered, so that a thread has that many loads
// in flight instead of one dependent pair (index, then x) after another.
#define MSREP_IN_FLIGHT 8
template <bool Streaming, typename T, typename I, typename V>
__device__ __forceinline__ T strided_dot(int first, int end, int stride, const I* __restrict__ idx, int col_base,
                                         const V* __restrict__ val, const T* __restrict__ x) {
    T s = 0;
    for (int e0 = first; e0 < end; e0 += MSREP_IN_FLIGHT * stride) {
        int col[MSREP_IN_FLIGHT];
        T v[MSREP_IN_FLIGHT];
#pragma unroll
        for (int k = 0; k < MSREP_IN_FLIGHT; ++k) {
            const int e = e0 + k * stride;
            col[k] = e < end ? col_base + (int)entry_load<Streaming>(idx + e) : 0;
            v[k] = e < end ? value_load<Streaming>(val + e) : (T)0;
        }
#pragma unroll
        for (int k = 0; k < MSREP_IN_FLIGHT; ++k) {
            if (e0 + k * stride < end) s += v[k] * x[col[k]];
        }
    }
    return s;
}

// Whether a thread of a row block wrote a shared row's sum, kept across the block's rows for the merge
// at the end of a launch that merges (Merging; otherwise nothing is kept): in a register, which the
// row loop returns (`in_loop`), but for f64 values in shared memory, cleared by csr_batch and read by
// it after the loop (`stored`), since the f64 row kernels, held to 32 registers, spill with one more
// live value (the large band in f64 0.174 -> 0.185 ms on an H200). The f32 kernels have room for it
// at 40 registers; a shared array there measured 2-5 % slower on the large band in two runs (its
// bytes raise the kernel's shared-memory carveout a step, leaving L1 less).
template <typename T, bool Merging>
struct SharedWrites {
    bool wrote = false;
    __device__ void note() { wrote = true; }
    __device__ bool in_loop() const { return wrote; }
    __device__ static void clear() {}
    __device__ static bool stored() { return false; }
};
template <typename T>
struct SharedWrites<T, false> {
    __device__ void note() {}
    __device__ bool in_loop() const { return false; }
    __device__ static void clear() {}
    __device__ static bool stored() { return false; }
};
__shared__ bool msrep_shared_writes[256];  // blockDim.x
template <>
struct SharedWrites<double, true> {
    __device__ void note() { msrep_shared_writes[threadIdx.x] = true; }
    __device__ bool in_loop() const { return false; }
    __device__ static void clear() { msrep_shared_writes[threadIdx.x] = false; }
    __device__ static bool stored() { return msrep_shared_writes[threadIdx.x]; }
};

// Regular rows (bands, stencils): a group of G lanes (G = 1..32) per row, in row order; lanes stride
// over the row's entries, then reduce by shuffles within the group. Each row block takes a contiguous
// range of rows, its groups striding over it (neighbouring groups on neighbouring rows, so loads
// coalesce, and a block meets at most a few partition boundaries); a group's lanes always agree on the
// row, so the group mask is exact even when other groups of the warp have finished. Rows longer than
// long_row belong to the chunk blocks.
template <typename T, int G, bool Mapped, bool Merging, typename I, typename V>
__device__ bool batch_rows(int block, int blocks, int rows, const int* __restrict__ ptr, const I* __restrict__ idx,
                           MsrepColumns columns, const V* __restrict__ val, const T* __restrict__ x,
                           const MsrepCsrPart* __restrict__ parts, int part_count, T alpha, T beta, T* y, T* shared,
                           T* raw, const int* __restrict__ row_map, int long_row) {
    const unsigned lane_in_warp = threadIdx.x & 31;
    const unsigned lane = lane_in_warp % G;
    const unsigned mask = G == 32 ? 0xffffffffu : (((1u << G) - 1u) << (lane_in_warp - lane));
    const sgpu_i64 per_block = ((sgpu_i64)rows + blocks - 1) / blocks;
    const int start = (int)min((sgpu_i64)rows, block * per_block);
    const int stop = (int)min((sgpu_i64)rows, (block + 1) * per_block);
    MsrepCsrPart part = no_part();
    SharedWrites<T, Merging> writes;
    for (int v = start + (int)(threadIdx.x / G); v < stop; v += (int)(blockDim.x / G)) {
        const int begin = ptr[v], end = ptr[v + 1];
        if (end - begin > long_row) continue;  // the same for every lane of the group
        T s = strided_dot<false>(begin + (int)lane, end, G, idx, batch_col_base(idx, v, columns), val, x);
#pragma unroll
        for (int off = G / 2; off > 0; off >>= 1) s += __shfl_xor_sync(mask, s, off, G);
        if (lane == 0 && batch_emit<Mapped>(v, s, part, parts, part_count, alpha, beta, y, shared, raw, row_map)) {
            writes.note();
        }
    }
    return writes.in_loop();
}

// Regular rows in slices of 32 (sliced ELLPACK): lane l of a warp takes row 32·s + l of slice s, whose
// entry e lies at slices[s] + 32·e + l, so that a warp's loads of values and indices are 32
// consecutive elements and, where neighbouring rows read neighbouring columns (bands, stencils), its
// gathers of x too; a slice is as long as its longest row (the host lays the batch out so and pads
// shorter rows, which their lanes skip). The sum runs in entry order, as the CPU specification's.
// Each row block takes a contiguous range of slices, its warps striding over it.
template <typename T, bool Mapped, bool Merging, typename I, typename V>
__device__ bool batch_slices(int block, int blocks, int rows, const int* __restrict__ ptr,
                             const int* __restrict__ slices, const I* __restrict__ idx, MsrepColumns columns,
                             const V* __restrict__ val, const T* __restrict__ x, const MsrepCsrPart* __restrict__ parts,
                             int part_count, T alpha, T beta, T* y, T* shared, T* raw,
                             const int* __restrict__ row_map) {
    const int lane = (int)(threadIdx.x & 31);
    const int slice_count = (rows + 31) / 32;
    const int per_block = (slice_count + blocks - 1) / blocks;
    const int start = min(slice_count, block * per_block);
    const int stop = min(slice_count, (block + 1) * per_block);
    MsrepCsrPart part = no_part();
    SharedWrites<T, Merging> writes;
    for (int s = start + (int)(threadIdx.x >> 5); s < stop; s += (int)(blockDim.x >> 5)) {
        const int v = 32 * s + lane;
        if (v >= rows) continue;
        const int first = slices[s] + lane;
        const T sum = strided_dot<false>(first, first + 32 * (ptr[v + 1] - ptr[v]), 32, idx,
                                         batch_col_base(idx, v, columns), val, x);
        if (batch_emit<Mapped>(v, sum, part, parts, part_count, alpha, beta, y, shared, raw, row_map)) {
            writes.note();
        }
    }
    return writes.in_loop();
}

// The sum of every thread's s, on thread 0: warps reduce by shuffles, thread 0 adds the warps' sums
// in warp order (the same bits on every run). blockDim.x is a multiple of 32.
template <typename T>
__device__ __forceinline__ T block_sum(T s) {
    __shared__ T warp_sums[32];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    T total = 0;
    if (threadIdx.x == 0) {
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += warp_sums[w];
    }
    return total;
}

// Skewed rows (graphs, circuits): consecutive rows r0..r1 with at most MSREP_STREAM_ENTRIES entries in
// all, one block (CSR-stream): the block forms the products of all their entries with coalesced loads
// into shared memory, then a group of lanes per row (as many as the block has for its rows, at most
// 32) adds the row's products. Short rows thus cost their bytes, read in order, with every lane busy.
// A block of one row (a row longer than that, up to long_row) is summed by the whole block directly.
// blockDim.x is 256 (the kernel's launch bounds).
#define MSREP_STREAM_ENTRIES 1024
template <bool Mapped, typename T, typename I, typename V>
__device__ bool batch_stream(int r0, int r1, const int* __restrict__ ptr, const I* __restrict__ idx,
                             MsrepColumns columns, const V* __restrict__ val, const T* __restrict__ x,
                             const MsrepCsrPart* __restrict__ parts, int part_count, T alpha, T beta, T* y, T* shared,
                             T* raw, const int* __restrict__ row_map) {
    __shared__ T products[MSREP_STREAM_ENTRIES];
    MsrepCsrPart part = no_part();
    const int base = ptr[r0], rows = r1 - r0;
    const int col_base = batch_col_base(idx, r0, columns);
    if (rows == 1) {
        const T total =
            block_sum(strided_dot<true>(base + (int)threadIdx.x, ptr[r1], (int)blockDim.x, idx, col_base, val, x));
        return threadIdx.x == 0 && batch_emit<Mapped>(r0, total, part, parts, part_count, alpha, beta, y, shared,
                                                       raw, row_map);
    }
    const int count = ptr[r1] - base;
    int col[MSREP_STREAM_ENTRIES / 256];
    T v[MSREP_STREAM_ENTRIES / 256];
#pragma unroll
    for (int k = 0; k < MSREP_STREAM_ENTRIES / 256; ++k) {
        const int e = (int)threadIdx.x + k * 256;
        col[k] = e < count ? col_base + (int)entry_load<true>(idx + base + e) : 0;
        v[k] = e < count ? value_load<true>(val + base + e) : (T)0;
    }
#pragma unroll
    for (int k = 0; k < MSREP_STREAM_ENTRIES / 256; ++k) {
        if ((int)threadIdx.x + k * 256 < count) products[threadIdx.x + k * 256] = v[k] * x[col[k]];
    }
    __syncthreads();
    int lanes = 32;  // the widest power of two that gives every row a group
    while (lanes > 1 && rows * lanes > (int)blockDim.x) lanes >>= 1;
    const unsigned lane_in_warp = threadIdx.x & 31;
    const unsigned lane = lane_in_warp % lanes;
    const unsigned mask = lanes == 32 ? 0xffffffffu : (((1u << lanes) - 1u) << (lane_in_warp - lane));
    const int row = (int)threadIdx.x / lanes;
    if (row >= rows) return false;  // whole groups: rows·lanes ≤ blockDim.x
    const int begin = ptr[r0 + row] - base, end = ptr[r0 + row + 1] - base;
    T s = 0;
    for (int e = begin + (int)lane; e < end; e += lanes) s += products[e];
    for (int off = lanes / 2; off > 0; off >>= 1) s += __shfl_xor_sync(mask, s, off, lanes);
    return lane == 0 && batch_emit<Mapped>(r0 + row, s, part, parts, part_count, alpha, beta, y, shared, raw, row_map);
}

// One chunk of a long row per block, summed by the whole block. A row of one chunk is emitted at once;
// otherwise each chunk leaves its sum in chunk_sums, and the last of the row's blocks to finish (a
// counter per long row, reset for the next call) adds them in chunk order and emits the row. No
// floating-point atomics: the result is the same bits on every run, though summed in another order
// than the CPU backend's loop.
template <bool Mapped, typename T, typename I, typename V>
__device__ bool batch_chunk(int chunk_index, const MsrepChunk c, const I* __restrict__ idx, MsrepColumns columns,
                            const V* __restrict__ val, const T* __restrict__ x, const MsrepCsrPart* __restrict__ parts,
                            int part_count, T alpha, T beta, T* y, T* shared, T* raw, const int* __restrict__ row_map,
                            T* chunk_sums, unsigned* counters) {
    const T total = block_sum(strided_dot<true>(c.begin + (int)threadIdx.x, c.end, (int)blockDim.x, idx,
                                          batch_col_base(idx, c.row, columns), val, x));
    if (threadIdx.x != 0) return false;
    MsrepCsrPart part = no_part();
    if (c.count == 1) {
        return batch_emit<Mapped>(c.row, total, part, parts, part_count, alpha, beta, y, shared, raw, row_map);
    }
    chunk_sums[chunk_index] = total;
    __threadfence();  // the sum is visible before the counter says so
    if (atomicAdd(counters + c.long_index, 1u) != (unsigned)c.count - 1) return false;
    __threadfence();
    T row_sum = 0;
    for (int k = 0; k < c.count; ++k) row_sum += __ldcg(chunk_sums + c.first + k);
    counters[c.long_index] = 0;
    return batch_emit<Mapped>(c.row, row_sum, part, parts, part_count, alpha, beta, y, shared, raw, row_map);
}

// A batch: blocks 0..chunk_count take one chunk each, the next stream_count one stream block each
// (rows stream[2i]..stream[2i+1]), the rest (row_blocks of them) the rows in order with `lanes` lanes a
// row, or, where `slices` is given, in slices of 32 rows (batch_slices). A batch has stream blocks
// (skewed rows) or row blocks (regular rows), and chunks of either. A launch runs the batch's blocks
// first_block.. (one launch may run a part of the batch, as x arrives). Each kind of batch has its
// kernel, which leaves the other kind's code out. Streamed (no row blocks): 32 registers a thread
// instead of 40 with the row groups' code, so that eight blocks of 256 threads fit an SM instead of
// six. Not streamed (no stream blocks): without the stream blocks' 4 or 8 KiB of shared memory a
// block, so that the driver leaves more of each SM's on-chip memory to the L1 cache, where the rows'
// loads of x hit. Merging (a launch of every block of a batch that holds every partition): the last
// thread to write a shared sum then merges (merge_when_last).
template <typename T, typename V, typename I, bool Mapped, bool Streamed, bool Merging>
__device__ void csr_batch(const int* __restrict__ ptr, const int* __restrict__ slices, const I* __restrict__ idx,
                          MsrepColumns columns, const V* __restrict__ val, const T* __restrict__ x,
                          const MsrepCsrPart* __restrict__ parts, int part_count, int rows, int lanes, int row_blocks,
                          const int* __restrict__ stream, int stream_count, const MsrepChunk* __restrict__ chunks,
                          int chunk_count, T* chunk_sums, unsigned* counters, T alpha, T beta, T* y, T* shared,
                          T* raw, const int* __restrict__ row_map, int long_row, int first_block,
                          const MsrepMerge* __restrict__ merge) {
    int b = (int)blockIdx.x + first_block;
    bool wrote_shared = false;
    if (Merging) SharedWrites<T, Merging>::clear();
    if (b < chunk_count) {
        wrote_shared = batch_chunk<Mapped>(b, chunks[b], idx, columns, val, x, parts, part_count, alpha, beta, y,
                                           shared, raw, row_map, chunk_sums, counters);
    } else if (Streamed) {
        b -= chunk_count;
        if (b < stream_count) {
            wrote_shared = batch_stream<Mapped>(stream[2 * b], stream[2 * b + 1], ptr, idx, columns, val, x, parts,
                                                part_count, alpha, beta, y, shared, raw, row_map);
        }
    } else if (slices) {
        wrote_shared = batch_slices<T, Mapped, Merging>(b - chunk_count, row_blocks, rows, ptr, slices, idx, columns,
                                                        val, x, parts, part_count, alpha, beta, y, shared, raw,
                                                        row_map);
    } else {
        b -= chunk_count;
#define MSREP_LANES(G)                                                                                              \
    case G:                                                                                                         \
        wrote_shared = batch_rows<T, G, Mapped, Merging>(b, row_blocks, rows, ptr, idx, columns, val, x, parts,     \
                                                         part_count, alpha, beta, y, shared, raw, row_map,          \
                                                         long_row);                                                 \
        break;
        switch (lanes) {
            MSREP_LANES(1)
            MSREP_LANES(2)
            MSREP_LANES(4)
            MSREP_LANES(8)
            MSREP_LANES(16)
            MSREP_LANES(32)
        }
#undef MSREP_LANES
    }
    if (Merging && (wrote_shared || SharedWrites<T, Merging>::stored())) {
        merge_when_last<T>(merge, shared, alpha, beta, y);
    }
}

// Raw sums of a batch of another device (copied to the lead device) finished into y / shared slots.
template <typename T>
__device__ void finish_batch(int rows, const T* __restrict__ raw, const MsrepCsrPart* __restrict__ parts, int part_count,
                             T alpha, T beta, T* y, T* shared) {
    MsrepCsrPart part = no_part();
    for (sgpu_i64 v = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; v < rows; v += (sgpu_i64)gridDim.x * blockDim.x) {
        batch_emit<false>((int)v, raw[v], part, parts, part_count, alpha, beta, y, shared, (T*)nullptr, nullptr);
    }
}

// A device side's pCSC partial vector: the sums of rows first_row..end_row (the rows its partitions
// hold entries in), values[0] row first_row's.
struct MsrepCscSource {
    unsigned long long values;
    unsigned long long first_row;
    unsigned long long end_row;
};

// pCSC merge: y = α·Σ_k sources[k] + β·y, the partial vectors of every device side that covers the
// row summed in side order.
template <typename T>
__device__ void csc_merge(int rows, const MsrepCscSource* __restrict__ sources, int count, T alpha, T beta, T* y) {
    for (sgpu_i64 r = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (sgpu_i64)gridDim.x * blockDim.x) {
        T s = 0;
        for (int k = 0; k < count; ++k) {
            const MsrepCscSource source = sources[k];
            const unsigned long long row = (unsigned long long)r;
            if (row >= source.first_row && row < source.end_row)
                s += reinterpret_cast<const T*>(source.values)[row - source.first_row];
        }
        y[r] = msrep_finish(alpha, s, beta, y + r);
    }
}

// Registers of the row groups' kernels: in f32 at most 40 a thread, so that six blocks fit an SM (held
// to 32 for eight blocks, they spill); in f64 at most 32, eight blocks an SM, which they take without
// spilling (unbounded, 42 with 32-bit indices, five blocks). Measured on an H200 against six blocks
// (40 registers): the large band in f64 0.208 → 0.197 ms, the 27-point stencil 0.298 → 0.287–0.289,
// the suite's geometric mean in f64 1.24–1.26× → 1.28–1.29×; in f32 eight blocks were slower (band
// 0.125 → 0.131 ms, suite 1.27–1.29× → 1.18–1.20×; docs/methods.md). The stream blocks' kernels are
// left to the compiler: asked for a block count, it gives them more registers than the 32 they take
// unasked.
#define MSREP_ROWS_BOUNDS_f32 __launch_bounds__(256, 6)
#define MSREP_ROWS_BOUNDS_f64 __launch_bounds__(256, 8)
// 16-bit values: f32's registers (their sums are f32).
#define MSREP_ROWS_BOUNDS_f16 MSREP_ROWS_BOUNDS_f32
#define MSREP_ROWS_BOUNDS_bf16 MSREP_ROWS_BOUNDS_f32

// msrep_csr_batch_<ty> (32-bit column indices) and msrep_csr_batch_<ty>_i16 (16-bit offsets), each
// also as _mapped (rows stored in another order, row_map given), and each of those as _streamed (a
// batch without row blocks); those without a row map also as _merging (the launch merges at its end,
// `merge` given; the others leave it unread), a variant of its own so that launches that do not merge
// run the code they ran before the merge moved into the launch. <ty> names the values' type V; x, y
// and the sums are of its compute type T.
#define MSREP_BATCH(V, T, S, I, SUFFIX, MAPPED, MAPPED_SUFFIX, STREAMED, STREAMED_SUFFIX, MERGING, MERGING_SUFFIX,  \
                    BOUNDS)                                                                                        \
    extern "C" __global__ void BOUNDS                                                                              \
        msrep_csr_batch_##S##SUFFIX##MAPPED_SUFFIX##STREAMED_SUFFIX##MERGING_SUFFIX(                               \
        const int* ptr, const int* slices, const I* idx, MsrepColumns columns, const V* val, const T* x,          \
        const MsrepCsrPart* parts, int part_count, int rows, int lanes, int row_blocks, const int* stream,         \
        int stream_count, const MsrepChunk* chunks, int chunk_count, T* chunk_sums, unsigned* counters, T alpha,  \
        T beta, T* y, T* shared, T* raw, const int* row_map, int long_row, int first_block,                       \
        const MsrepMerge* merge) {                                                                                 \
        csr_batch<T, V, I, MAPPED, STREAMED, MERGING>(ptr, slices, idx, columns, val, x, parts, part_count, rows, \
                                                      lanes, row_blocks, stream, stream_count, chunks,             \
                                                      chunk_count, chunk_sums, counters, alpha, beta, y, shared,   \
                                                      raw, row_map, long_row, first_block, merge);                 \
    }
#define MSREP_BATCHES(V, T, S, I, SUFFIX, MAPPED, MAPPED_SUFFIX, MERGING, MERGING_SUFFIX)                         \
    MSREP_BATCH(V, T, S, I, SUFFIX, MAPPED, MAPPED_SUFFIX, false, , MERGING, MERGING_SUFFIX,                       \
                MSREP_ROWS_BOUNDS_##S)                                                                             \
    MSREP_BATCH(V, T, S, I, SUFFIX, MAPPED, MAPPED_SUFFIX, true, _streamed, MERGING, MERGING_SUFFIX,              \
                __launch_bounds__(256))

// Every batch kernel of values V (suffix S) computing in T.
#define MSREP_VALUES(V, T, S)                                                                                       \
    MSREP_BATCHES(V, T, S, int, , false, , false, )                                                                 \
    MSREP_BATCHES(V, T, S, short, _i16, false, , false, )                                                           \
    MSREP_BATCHES(V, T, S, int, , true, _mapped, false, )                                                           \
    MSREP_BATCHES(V, T, S, short, _i16, true, _mapped, false, )                                                     \
    MSREP_BATCHES(V, T, S, int, , false, , true, _merging)                                                          \
    MSREP_BATCHES(V, T, S, short, _i16, false, , true, _merging)

// The kernels of a compute type T (suffix S) that see no values: finishing raw sums, the merges.
#define MSREP_COMPUTE(T, S)                                                                                         \
    extern "C" __global__ void msrep_finish_batch_##S(int rows, const T* raw, const MsrepCsrPart* parts,           \
                                                      int part_count, T alpha, T beta, T* y, T* shared) {         \
        finish_batch<T>(rows, raw, parts, part_count, alpha, beta, y, shared);                                    \
    }                                                                                                             \
    extern "C" __global__ void msrep_merge_rows_##S(const MsrepMerge* merge, const T* shared, T alpha, T beta,    \
                                                    T* y) {                                                       \
        merge_rows<T>((int)(blockIdx.x * blockDim.x + threadIdx.x), (int)(gridDim.x * blockDim.x), *merge, shared,  \
                      alpha, beta, y);                                                                            \
    }                                                                                                             \
    extern "C" __global__ void msrep_csc_merge_##S(int rows, const MsrepCscSource* sources, int count, T alpha,     \
                                                   T beta, T* y) {                                                \
        csc_merge<T>(rows, sources, count, alpha, beta, y);                                                       \
    }

MSREP_VALUES(float, float, f32)
MSREP_VALUES(double, double, f64)
MSREP_VALUES(msrep_f16, float, f16)
MSREP_VALUES(msrep_bf16, float, bf16)
MSREP_COMPUTE(float, f32)
MSREP_COMPUTE(double, f64)

// Building a batch on the device (CsrBatch::upload, src/backend/cuda/msrep/batch.rs): the host
// decides the schedule from the row lengths and uploads the batch's row pointers and its entries'
// 32-bit columns and values as the partitions hold them; these kernels then make the layout the
// batch kernels read, a warp a virtual row (its entries strided over the lanes). msrep_layout_scan
// measures the columns (what 16-bit offsets would need, and how far each row block reads x),
// msrep_layout_offsets writes the 16-bit offsets, and msrep_layout_sliced_b<bytes> puts 32-bit
// columns or values in the sliced layout.

#define MSREP_INT_MAX 0x7fffffff
#define MSREP_INT_MIN (-MSREP_INT_MAX - 1)

// Virtual row v's anchor (MsrepColumns): the first row of the stream block holding it, else v. The
// stream blocks (pairs of first and one-past-last row) are in row order.
__device__ __forceinline__ int layout_anchor(int v, const int* __restrict__ stream, int stream_count) {
    int lo = 0, hi = stream_count;  // blocks lo.. start after v; those before lo at or before it
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (stream[2 * mid] <= v) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && v < stream[2 * lo - 1] ? stream[2 * lo - 2] : v;
}

// Where entry e (the i-th of row v) goes: position e, or in slices of 32 rows (slices given) at
// slices[v / 32] + 32·i + v % 32.
__device__ __forceinline__ sgpu_i64 layout_position(int v, int e, int i, const int* __restrict__ slices) {
    return slices ? (sgpu_i64)slices[v / 32] + 32 * (sgpu_i64)i + (v & 31) : (sgpu_i64)e;
}

// The batch's columns as 16-bit offsets would need them: summary[0] / [1] the lowest / highest
// column − anchor, summary[2] / [3] the lowest / highest column (set to MSREP_INT_MAX, MSREP_INT_MIN,
// MSREP_INT_MAX, MSREP_INT_MIN before); and for row block b of rows_per_block rows (0: none), ends[b]
// (zeroed before) one past the largest column its rows read.
extern "C" __global__ void __launch_bounds__(256) msrep_layout_scan(int rows, const int* __restrict__ ptr,
                                                                    const int* __restrict__ cols,
                                                                    const int* __restrict__ stream, int stream_count,
                                                                    int rows_per_block, int* ends, int* summary) {
    const int lane = threadIdx.x & 31;
    int from_anchor_low = MSREP_INT_MAX, from_anchor_high = MSREP_INT_MIN, low = MSREP_INT_MAX, high = MSREP_INT_MIN;
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int v = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); v < rows; v += warps) {
        const int first = ptr[v], last = ptr[v + 1];
        if (first == last) continue;
        const int anchor = layout_anchor(v, stream, stream_count);
        int row_low = MSREP_INT_MAX, row_high = MSREP_INT_MIN;
        for (int e = first + lane; e < last; e += 32) {
            const int c = cols[e];
            row_low = min(row_low, c);
            row_high = max(row_high, c);
        }
        row_low = __reduce_min_sync(0xffffffffu, row_low);
        row_high = __reduce_max_sync(0xffffffffu, row_high);
        // Columns and anchors are non-negative int: their difference fits an int.
        from_anchor_low = min(from_anchor_low, row_low - anchor);
        from_anchor_high = max(from_anchor_high, row_high - anchor);
        low = min(low, row_low);
        high = max(high, row_high);
        if (lane == 0 && rows_per_block > 0) atomicMax(ends + v / rows_per_block, row_high + 1);
    }
    if (lane == 0 && low <= high) {
        atomicMin(summary, from_anchor_low);
        atomicMax(summary + 1, from_anchor_high);
        atomicMin(summary + 2, low);
        atomicMax(summary + 3, high);
    }
}

// offsets[position of e] = column(e) − shift − (from_diagonal ? anchor : 0), each within 16 bits (the
// host chose shift from msrep_layout_scan's summary); with slices, the padding positions are zeroed
// before.
extern "C" __global__ void __launch_bounds__(256) msrep_layout_offsets(int rows, const int* __restrict__ ptr,
                                                                       const int* __restrict__ cols,
                                                                       const int* __restrict__ stream,
                                                                       int stream_count, const int* __restrict__ slices,
                                                                       MsrepColumns columns, short* offsets) {
    const int lane = threadIdx.x & 31;
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int v = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); v < rows; v += warps) {
        const int first = ptr[v], last = ptr[v + 1];
        if (first == last) continue;
        const int base = columns.shift + (columns.from_diagonal ? layout_anchor(v, stream, stream_count) : 0);
        for (int e = first + lane; e < last; e += 32)
            offsets[layout_position(v, e, e - first, slices)] = (short)(cols[e] - base);
    }
}

// out[slices[v / 32] + 32·i + v % 32] = in[ptr[v] + i]: 32-bit columns or values (W: an
// unsigned integer of their size) in the sliced layout (padding zeroed before).
template <typename W>
__device__ void layout_sliced(int rows, const int* __restrict__ ptr, const int* __restrict__ slices,
                              const W* __restrict__ in, W* out) {
    const int lane = threadIdx.x & 31;
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int v = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); v < rows; v += warps) {
        const int first = ptr[v], last = ptr[v + 1];
        for (int e = first + lane; e < last; e += 32) out[layout_position(v, e, e - first, slices)] = in[e];
    }
}
#define MSREP_LAYOUT_SLICED(B, W)                                                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                                              \
        msrep_layout_sliced_b##B(int rows, const int* ptr, const int* slices, const W* in, W* out) {              \
        layout_sliced<W>(rows, ptr, slices, in, out);                                                              \
    }
MSREP_LAYOUT_SLICED(2, unsigned short)
MSREP_LAYOUT_SLICED(4, unsigned)
MSREP_LAYOUT_SLICED(8, unsigned long long)

// pCSC entries by rows on the device (ByRows::on_device, src/backend/cuda/msrep/csc_rows.rs): a
// stable LSD radix sort of the entries' rows, 8 bits a pass, carrying each entry's position, so that
// in each row the entries keep the order of the partitions and their columns (the same result as
// the host's sort, and the same sums on every run). A pass: msrep_sort_histogram counts each digit
// in each tile of MSREP_SORT_TILE keys, msrep_scan_* turn the counts (digit-major) into each tile's
// first position for each digit, and msrep_sort_scatter writes each tile's keys there in order, a
// warp's keys of one digit ranked by __match_any_sync. Then the entries' columns and values are
// gathered in the sorted order.

#define MSREP_SORT_THREADS 256
#define MSREP_SORT_ITEMS 8
#define MSREP_SORT_TILE (MSREP_SORT_THREADS * MSREP_SORT_ITEMS)
#define MSREP_SORT_DIGITS 256
static_assert(MSREP_SORT_THREADS == MSREP_SORT_DIGITS, "the sort's kernels take a digit a thread");

// counts[row of e] += 1 for every entry e.
extern "C" __global__ void __launch_bounds__(256) msrep_sort_count(sgpu_i64 n, const unsigned* __restrict__ keys,
                                                                   unsigned* counts) {
    for (sgpu_i64 e = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (sgpu_i64)gridDim.x * blockDim.x)
        atomicAdd(counts + keys[e], 1u);
}

// positions[e] = e.
extern "C" __global__ void __launch_bounds__(256) msrep_sort_iota(sgpu_i64 n, unsigned* positions) {
    for (sgpu_i64 e = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (sgpu_i64)gridDim.x * blockDim.x)
        positions[e] = (unsigned)e;
}

// The column of each entry: columns[e] = column_of[c] for the entries e of concatenated column c
// (pointers column_ptr, columns + 1 of them), a warp a column.
extern "C" __global__ void __launch_bounds__(256) msrep_sort_columns(int columns,
                                                                     const sgpu_i64* __restrict__ column_ptr,
                                                                     const int* __restrict__ column_of, int* out) {
    const int lane = threadIdx.x & 31;
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int c = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); c < columns; c += warps) {
        const int column = column_of[c];
        for (sgpu_i64 e = column_ptr[c] + lane; e < column_ptr[c + 1]; e += 32) out[e] = column;
    }
}

// hist[d · tiles + t]: the keys of tile t (block t) whose digit (key >> shift) & 255 is d.
extern "C" __global__ void __launch_bounds__(MSREP_SORT_THREADS) msrep_sort_histogram(sgpu_i64 n,
                                                                                      const unsigned* __restrict__ keys,
                                                                                      int shift, unsigned* hist,
                                                                                      int tiles) {
    __shared__ unsigned counts[MSREP_SORT_DIGITS];
    counts[threadIdx.x] = 0;
    __syncthreads();
    const sgpu_i64 base = (sgpu_i64)blockIdx.x * MSREP_SORT_TILE;
    for (int i = threadIdx.x; i < MSREP_SORT_TILE; i += MSREP_SORT_THREADS)
        if (base + i < n) atomicAdd(counts + ((keys[base + i] >> shift) & 255u), 1u);
    __syncthreads();
    hist[(sgpu_i64)threadIdx.x * tiles + blockIdx.x] = counts[threadIdx.x];
}

// The exclusive prefix sums of data[0 … n) in place, by blocks of MSREP_SORT_TILE (each thread
// MSREP_SORT_ITEMS consecutive values): msrep_scan_blocks scans each block and writes its total
// to sums[block]; the totals are scanned the same way (until one block holds them), and
// msrep_scan_add adds each block's scanned total to its values.
extern "C" __global__ void __launch_bounds__(MSREP_SORT_THREADS) msrep_scan_blocks(sgpu_i64 n, unsigned* data,
                                                                                   unsigned* sums) {
    __shared__ unsigned warp_totals[MSREP_SORT_THREADS / 32];
    const sgpu_i64 first = (sgpu_i64)blockIdx.x * MSREP_SORT_TILE + (sgpu_i64)threadIdx.x * MSREP_SORT_ITEMS;
    unsigned v[MSREP_SORT_ITEMS], own = 0;
#pragma unroll
    for (int i = 0; i < MSREP_SORT_ITEMS; ++i) {
        v[i] = first + i < n ? data[first + i] : 0u;
        own += v[i];
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned inclusive = own;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const unsigned up = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += up;
    }
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    unsigned before = inclusive - own;
    for (int w = 0; w < warp; ++w) before += warp_totals[w];
    if (threadIdx.x == MSREP_SORT_THREADS - 1) sums[blockIdx.x] = before + own;
#pragma unroll
    for (int i = 0; i < MSREP_SORT_ITEMS; ++i) {
        if (first + i < n) data[first + i] = before;
        before += v[i];
    }
}
extern "C" __global__ void __launch_bounds__(MSREP_SORT_THREADS) msrep_scan_add(sgpu_i64 n, unsigned* data,
                                                                                const unsigned* sums) {
    const sgpu_i64 first = (sgpu_i64)blockIdx.x * MSREP_SORT_TILE;
    for (int i = threadIdx.x; i < MSREP_SORT_TILE; i += MSREP_SORT_THREADS)
        if (first + i < n) data[first + i] += sums[blockIdx.x];
}

// One pass's scatter: tile t's keys (and their positions) to offsets[d · tiles + t] onwards for
// digit d, in the tile's order: each round takes MSREP_SORT_THREADS consecutive keys, a key's place
// among those of its digit being the keys of that digit in earlier rounds, earlier warps and
// earlier lanes.
extern "C" __global__ void __launch_bounds__(MSREP_SORT_THREADS) msrep_sort_scatter(
    sgpu_i64 n, const unsigned* __restrict__ keys_in, const unsigned* __restrict__ positions_in, unsigned* keys_out,
    unsigned* positions_out, int shift, const unsigned* __restrict__ offsets, int tiles) {
    __shared__ unsigned warp_counts[MSREP_SORT_THREADS / 32][MSREP_SORT_DIGITS];
    __shared__ unsigned next[MSREP_SORT_DIGITS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    next[threadIdx.x] = offsets[(sgpu_i64)threadIdx.x * tiles + blockIdx.x];
    const sgpu_i64 base = (sgpu_i64)blockIdx.x * MSREP_SORT_TILE;
    for (int round = 0; round < MSREP_SORT_ITEMS; ++round) {
        for (int i = threadIdx.x; i < MSREP_SORT_DIGITS * (MSREP_SORT_THREADS / 32); i += MSREP_SORT_THREADS)
            (&warp_counts[0][0])[i] = 0;
        __syncthreads();
        const sgpu_i64 e = base + round * MSREP_SORT_THREADS + threadIdx.x;
        const bool live = e < n;
        const unsigned key = live ? keys_in[e] : 0u;
        // Lanes past the end take digits of their own (256 + lane), which no live key shares.
        const unsigned digit = live ? (key >> shift) & 255u : 256u + lane;
        const unsigned peers = __match_any_sync(0xffffffffu, digit);
        const unsigned rank = __popc(peers & ((1u << lane) - 1u));
        if (live && rank == 0) warp_counts[warp][digit] = __popc(peers);
        __syncthreads();
        if (live) {
            unsigned at = next[digit] + rank;
            for (int w = 0; w < warp; ++w) at += warp_counts[w][digit];
            keys_out[at] = key;
            positions_out[at] = positions_in[e];
        }
        __syncthreads();
        unsigned round_count = 0;
        for (int w = 0; w < MSREP_SORT_THREADS / 32; ++w) round_count += warp_counts[w][threadIdx.x];
        next[threadIdx.x] += round_count;
        __syncthreads();
    }
}

// out[p] = in[positions[p]]: the entries' columns or values (W: an unsigned integer of their size)
// in the sorted order.
template <typename W>
__device__ void sort_gather(sgpu_i64 n, const unsigned* __restrict__ positions, const W* __restrict__ in, W* out) {
    for (sgpu_i64 p = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (sgpu_i64)gridDim.x * blockDim.x)
        out[p] = in[positions[p]];
}
#define MSREP_SORT_GATHER(B, W)                                                                                    \
    extern "C" __global__ void __launch_bounds__(256)                                                              \
        msrep_sort_gather_b##B(sgpu_i64 n, const unsigned* positions, const W* in, W* out) {                      \
        sort_gather<W>(n, positions, in, out);                                                                     \
    }
MSREP_SORT_GATHER(2, unsigned short)
MSREP_SORT_GATHER(4, unsigned)
MSREP_SORT_GATHER(8, unsigned long long)

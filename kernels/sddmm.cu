// SDDMM (Costa et al., GPU-Dynamic): out[e] = alpha * S[e] * <A[i,:], B[j,:]> for every nonzero
// e = (i, j) of a CSR matrix S. Element (r, p) of A / B is at r * rs + p * cs, so one kernel serves
// both layouts and any leading dimension. 16-bit types are loaded as bit patterns and computed in f32.
//
// Entry points per type suffix (f32, f64, f16, bf16):
//   sddmm_coo_rows         CSR -> COO row expansion (GPU-Convert's conversion, Algorithm 4)
//   sddmm_coo_<ty>_v<V>    nnz-balanced COO kernel, V-wide vector loads (GPU-Convert / GPU-Dynamic)
//   sddmm_band_order       sorts each band of SD_BAND rows' nonzeros by column (counting sort): the
//                          order in which the tiled algorithm runs sddmm_coo_<ty>_v<V>, and with a
//                          plan sddmm_band_<ty>_v<V>
//   sddmm_band_<ty>_v<V>   the tiled algorithm through a plan: a band's rows of A in shared memory
//   sddmm_csr_<ty>_v<V>    the COO kernel reading S as CSR (GPU-Dynamic in one launch)
//   sddmm_tc_tiles_<ty>    the tiled algorithm on tensor cores (f16 / bf16, and f32 as _f32_tf32 /
//                          _f32_3xtf32 in the TF32 math modes; a plan, rows sorted)
//   sddmm_block_tiles_<ty> the tiled algorithm on CUDA cores, 16 × 16 tiles (a plan, rows sorted)
//   sddmm_panels_<ty>_g8_n<NV>  the tiled algorithm with panels of B in shared memory (a plan, rows
//                          sorted; K = 64 and up)
// Given an sd_check, sddmm_coo_rows also validates a caller's pattern that lies in device memory
// (see "Validation on the device" below), and the compute kernels after it fill out with NaN
// instead of reading through a pattern found invalid.

#define SD_BAND 64      // rows of S per band of the tiled algorithm's order
#define SD_THREADS 256  // block size of sddmm_band_order

// The element types by index, converted by the prelude's sgpu_elem / sgpu_half_elem.
template <int TY> struct sd_type;
template <> struct sd_type<0> : sgpu_elem<float> { typedef float elem; typedef float comp; };
template <> struct sd_type<1> : sgpu_elem<double> { typedef double elem; typedef double comp; };
template <> struct sd_type<2> : sgpu_half_elem<false> { typedef sgpu_f16 elem; typedef float comp; };
template <> struct sd_type<3> : sgpu_half_elem<true> { typedef sgpu_bf16 elem; typedef float comp; };

struct __attribute__((aligned(16))) sd_bits16 { unsigned int x, y, z, w; };
struct __attribute__((aligned(8))) sd_bits8 { unsigned int x, y; };

// V consecutive elements from p (aligned to V elements by the launcher's choice of V) in one load.
template <int TY, int V>
__device__ __forceinline__ void sd_load_vec(const typename sd_type<TY>::elem* p, typename sd_type<TY>::comp* out) {
    typedef typename sd_type<TY>::elem elem;
    union {
        elem e[V];
        sd_bits16 b16;
        sd_bits8 b8;
        unsigned int b4;
        unsigned short b2;
    } u;
    const int bytes = V * (int)sizeof(elem);
    if (bytes == 16) u.b16 = *(const sd_bits16*)p;
    else if (bytes == 8) u.b8 = *(const sd_bits8*)p;
    else if (bytes == 4) u.b4 = *(const unsigned int*)p;
    else u.b2 = *(const unsigned short*)p;
    if (TY == 3 && V >= 2) {
        // bf16 pairs widened in their 32-bit words (a shift and a mask), rather than each element
        // taken out of its word and shifted: through a plan on random S at densities 1e-2 / 5e-2,
        // k = 32 (H200), the row-warp kernel had taken 0.024 / 0.071 ms in bf16 against 0.018 /
        // 0.046 in f16; widened so, 0.017 / 0.044 in bf16 (another run, another H200).
        const unsigned int* w = (const unsigned int*)&u;
#pragma unroll
        for (int v = 0; v < V; v += 2) {
            out[v] = __uint_as_float(w[v / 2] << 16);
            out[v + 1] = __uint_as_float(w[v / 2] & 0xffff0000u);
        }
        return;
    }
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = sd_type<TY>::load(u.e[v]);
}

// V consecutive elements from src to dst (both aligned to V elements) as they are, in one load.
template <int TY, int V>
__device__ __forceinline__ void sd_copy_vec(typename sd_type<TY>::elem* dst, const typename sd_type<TY>::elem* src) {
    const int bytes = V * (int)sizeof(typename sd_type<TY>::elem);
    if (bytes == 16) *(sd_bits16*)dst = *(const sd_bits16*)src;
    else if (bytes == 8) *(sd_bits8*)dst = *(const sd_bits8*)src;
    else if (bytes == 4) *(unsigned int*)dst = *(const unsigned int*)src;
    else *(unsigned short*)dst = *(const unsigned short*)src;
}

// alpha * S[e] * dot in the order the CPU backend uses: (alpha * S[e]) * dot.
template <int TY>
__device__ __forceinline__ typename sd_type<TY>::elem sd_finish(typename sd_type<TY>::comp alpha,
                                                               const typename sd_type<TY>::elem* s, long long e,
                                                               typename sd_type<TY>::comp dot) {
    typename sd_type<TY>::comp scaled = s ? alpha * sd_type<TY>::load(s[e]) : alpha;
    return sd_type<TY>::store(scaled * dot);
}

// ---------------------------------------------------------------------------------------------
// Validation on the device
// ---------------------------------------------------------------------------------------------

// The checks the host makes of a CSR pattern (rowPtr[0] = base, rowPtr[m] - base = nnz, rowPtr never
// decreasing, every column in [base, n + base)), fused into the kernel that converts the pattern, so
// that a pattern in device memory is validated without a copy to the host or a wait. Each fault is
// kept as the complement of (position << 32 | the entry's bits): atomicMax then keeps the first
// position, as the host's scan finds it, with its value; positions are below 2^31, so a zero word
// means no fault. The block that finishes last turns the faults into the verdict the compute kernel
// reads, leaves them zeroed for the handle's next call (calls using one sd_check run one after
// another: the launcher orders them with an event), and writes the first invalid pattern into host
// memory the host reads later.
struct sd_check {
    unsigned long long decrease;           // rowPtr[o] < rowPtr[o - 1]: (o, rowPtr[o]), first o
    unsigned long long decrease_previous;  // (o, rowPtr[o - 1]) of the same o
    unsigned long long column;             // colInd[e] outside [base, n + base): (e, colInd[e]), first e
    unsigned int blocks_done;              // blocks of the validating kernel finished so far
    unsigned int invalid;                  // the verdict on the last pattern validated
};

// Host memory (mapped) the device writes: the first pattern found invalid since the host last read
// it, and how many were. The host reads and clears it only while no validation is in flight.
struct sd_report {
    unsigned long long invalid_calls;  // patterns found invalid since the host cleared this word
    long long rows, cols, nnz, base;   // the first one's shape,
    long long first, last;             // its rowPtr[0] and rowPtr[m],
    unsigned long long decrease, decrease_previous, column;  // and its faults, as in sd_check
};

__device__ __forceinline__ unsigned long long sd_fault(long long position, int value) {
    return ~(((unsigned long long)position << 32) | (unsigned int)value);
}

// rowPtr[o] = next < rowPtr[o - 1] = previous.
__device__ __forceinline__ void sd_note_decrease(sd_check* check, long long o, int next, int previous) {
    atomicMax(&check->decrease, sd_fault(o, next));
    atomicMax(&check->decrease_previous, sd_fault(o, previous));
}

// rowPtr[o] >= rowPtr[o - 1] for o = first, first + blockDim.x, ... up to last; notes each decrease.
__device__ __forceinline__ void sd_check_decreases(sd_check* check, const int* row_ptr, long long first,
                                                   long long last) {
    for (long long o = first; o <= last; o += blockDim.x) {
        const int previous = row_ptr[o - 1], next = row_ptr[o];
        if (next < previous) sd_note_decrease(check, o, next, previous);
    }
}

// Whether colInd[e] = column lies in [base, n + base); notes it when not.
__device__ __forceinline__ bool sd_column_ok(sd_check* check, long long e, int column, int n, int base) {
    long long j = (long long)column - base;
    if (j >= 0 && j < n) return true;
    atomicMax(&check->column, sd_fault(e, column));
    return false;
}

// Called by every thread of every block of the validating kernel, at its end: the last block to
// finish reads the faults, the pattern's first and last row pointers, and records the verdict.
// Returns, in every thread of that block, whether the pattern was invalid (false elsewhere).
// The last block reads the five words in five threads at once and clears the faults with plain
// stores (every other block has finished): one memory round trip where a thread reading them in turn
// took five, at the end of every validating kernel.
__device__ bool sd_check_finish(sd_check* check, sd_report* report, int m, int n, long long nnz, const int* row_ptr,
                                int base) {
    __shared__ bool last_block, found_invalid;
    __shared__ unsigned long long words[5];  // decrease, decrease_previous, column, rowPtr[0], rowPtr[m]
    __threadfence();  // this thread's faults and writes are visible to the device before its block counts as done
    __syncthreads();
    if (threadIdx.x == 0) last_block = atomicAdd(&check->blocks_done, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
    __syncthreads();
    if (!last_block) return false;
    __threadfence();  // the other blocks' faults and writes are visible
    volatile unsigned long long* faults = &check->decrease;  // decrease, decrease_previous, column in order
    if (threadIdx.x < 3) {
        words[threadIdx.x] = faults[threadIdx.x];
        faults[threadIdx.x] = 0ull;
    } else if (threadIdx.x < 5) {
        words[threadIdx.x] = (unsigned int)((volatile const int*)row_ptr)[threadIdx.x == 3 ? 0 : m];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long decrease = words[0], decrease_previous = words[1], column = words[2];
        int first = (int)words[3], last = (int)words[4];
        bool invalid = first != base || (long long)last - base != nnz || decrease != 0 || column != 0;
        check->blocks_done = 0;
        check->invalid = invalid;
        found_invalid = invalid;
        if (invalid) {
            volatile sd_report* r = report;
            if (r->invalid_calls == 0) {
                r->rows = m;
                r->cols = n;
                r->nnz = nnz;
                r->base = base;
                r->first = first;
                r->last = last;
                r->decrease = decrease;
                r->decrease_previous = decrease_previous;
                r->column = column;
            }
            r->invalid_calls = r->invalid_calls + 1;
            __threadfence_system();
        }
    }
    __syncthreads();
    return found_invalid;
}

// out[e] = NaN for e = first, first + step, ... below nnz: what a compute kernel writes instead of
// products when the pattern was found invalid, so that no plausible number is left in out.
template <int TY>
__device__ void sd_fill_nan(typename sd_type<TY>::elem* out, long long first, long long step, long long nnz) {
    typename sd_type<TY>::elem nan = sd_type<TY>::store((typename sd_type<TY>::comp)__int_as_float(0x7fffffff));
    for (long long e = first; e < nnz; e += step) out[e] = nan;
}

// ---------------------------------------------------------------------------------------------
// GPU-Convert
// ---------------------------------------------------------------------------------------------

// One warp per row writes the row's index into each of its entries: rows of any length stay
// balanced within a warp and consecutive lanes write consecutive entries. With `check` (a pattern in
// device memory, not validated yet) it also validates the pattern; entries outside [0, nnz) are
// never touched, whatever the row pointers say.
extern "C" __global__ void sddmm_coo_rows(int m, int n, long long nnz, const int* row_ptr, const int* col_ind,
                                          int base, unsigned int* rows, sd_check* check, sd_report* report) {
    int lane = threadIdx.x & 31;
    long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = warp; r < m; r += warps) {
        int start = row_ptr[r], next = row_ptr[r + 1];
        if (check && next < start && lane == 0) sd_note_decrease(check, r + 1, next, start);
        long long begin = (long long)start - base, end = (long long)next - base;
        if (begin < 0) begin = 0;
        if (end > nnz) end = nnz;
        for (long long e = begin + lane; e < end; e += 32) {
            rows[e] = (unsigned int)r;
            if (check) sd_column_ok(check, e, col_ind[e], n, base);
        }
    }
    if (check) sd_check_finish(check, report, m, n, nnz, row_ptr, base);
}

// Rows of S whose row pointers a thread block that reads S as CSR keeps in shared memory: those
// from the row of its first position to the row of its last (host: CSR_SPAN_ROWS). A block whose
// positions span more rows reads the row pointers from global memory instead.
#define SD_CSR_ROWS 1024

// For each of SD_BATCH positions g[u], the largest r in [lo, lo + count) with ptr[r] - base <= g[u],
// by bisection (lo when there is none): the row holding position g[u], where ptr is the row pointers
// (or their copy in shared memory). In a valid pattern that row is not empty, so it holds g[u]; in
// any pattern the result lies in [lo, lo + count). The steps depend on count only, the same for
// every position: the positions' reads go out together, one round trip a step for all of them.
template <bool SHARED, int N>
__device__ __forceinline__ void sd_rows_of(const int* ptr, int base, const long long (&g)[N], int lo, int count,
                                           int (&row)[N]) {
#pragma unroll
    for (int u = 0; u < N; ++u) row[u] = lo;
    while (count > 1) {
        int half = count >> 1;
#pragma unroll
        for (int u = 0; u < N; ++u) {
            int probe = row[u] + half;
            if ((long long)(SHARED ? ptr[probe] : __ldg(ptr + probe)) - base <= g[u]) row[u] = probe;
        }
        count -= half;
    }
}

// Steps r (a row at or before the one holding position g, in ptr: the row pointers' copy in shared
// memory, count rows) forward to the row holding g, at most SD_ROW_STEPS rows; whether it got there.
// In any pattern r only grows and stays below count.
#define SD_ROW_STEPS 2
__device__ __forceinline__ bool sd_step_row(const int* ptr, int base, long long g, int count, int& r) {
#pragma unroll
    for (int step = 0; step < SD_ROW_STEPS; ++step) {
        if (r + 1 >= count || (long long)ptr[r + 1] - base > g) return true;
        ++r;
    }
    return r + 1 >= count || (long long)ptr[r + 1] - base > g;
}

// Rows [window[0], window[1]) that hold positions g[0] <= g[1] (each g's row being the largest r with
// row_ptr[r] - base <= g, over all m rows), found by the whole thread block together: each round,
// the threads read blockDim.x evenly spaced row pointers of the stretch left for each position and
// count those at or below it, which narrows the stretch by blockDim.x; the rounds stop once the
// window fits SD_CSR_ROWS (usually one round up to 65536 rows at 256 threads; one thread would bisect
// in 16 dependent reads) or cannot narrow. Every thread of the block must call it with the same
// positions. Whatever the row pointers hold, the window lies in [0, m] and is not empty when m > 0.
__device__ void sd_block_window(const int* row_ptr, int m, int base, const long long g[2], int window[2]) {
    int lo[2] = {0, 0};
    long long span[2] = {m, m};  // rows [lo, lo + span) are left for each position
    while (lo[1] + span[1] - lo[0] > SD_CSR_ROWS && (span[0] > 1 || span[1] > 1)) {
        long long step[2];
        bool at_or_below[2];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            step[t] = (span[t] + blockDim.x - 1) / blockDim.x;
            long long r = lo[t] + threadIdx.x * step[t];
            at_or_below[t] = span[t] > 1 && r < lo[t] + span[t] && (long long)row_ptr[r] - base <= g[t];
        }
        int count[2] = {__syncthreads_count(at_or_below[0]), __syncthreads_count(at_or_below[1])};
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            if (span[t] <= 1) continue;
            // A valid pattern's row pointers never decrease: the `count` sampled rows at or below
            // the position are the first ones, and its row lies in the stretch after the last.
            if (count[t] > 0) lo[t] += (int)((count[t] - 1) * step[t]);
            long long left = (long long)m - lo[t];
            span[t] = step[t] < left ? step[t] : left;
        }
    }
    long long end = lo[1] + span[1];  // only a bad pattern puts the last row before the first
    window[0] = lo[0];
    window[1] = (int)(end > lo[0] ? end : (lo[0] < m ? lo[0] + 1 : m));
}

// The row pointers a thread block of the CSR kernels checks for decreases: rowPtr[o] >= rowPtr[o - 1]
// for o in (o0, o1], the blocks' shares covering (0, m].
__device__ __forceinline__ void sd_block_share(int m, long long& o0, long long& o1) {
    long long share = (m + gridDim.x - 1) / gridDim.x;
    o0 = blockIdx.x * share;
    o1 = o0 + share < m ? o0 + share : m;
}

#define SD_BATCH 4

// The sum of v over lanes 0 … this one of the warp (every lane must call it).
__device__ __forceinline__ int sd_warp_inclusive_sum(int v) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
        const int below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    return v;
}

// Asks L1 for the line holding *p (no register waits for it): a later load of it then hits.
__device__ __forceinline__ void sd_prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

// sum[u] = <a[u][0..k), b[u][0..k)> for the SD_BATCH nonzeros of a group of G lanes (this lane is
// its `member`; `mask` its lanes), reduced over the group: each lane takes V elements of every G·V,
// the batch's loads issued together, STEPS steps of the vector loop at a time (element p of a row is
// at p·cs where V = 1; rows are contiguous where V > 1). The COO kernels read both rows from global
// memory, the band kernels A's from shared memory.
template <int TY, int V, int STEPS>
__device__ __forceinline__ void sd_batch_dots(const typename sd_type<TY>::elem* const (&a)[SD_BATCH], long long a_cs,
                                              const typename sd_type<TY>::elem* const (&b)[SD_BATCH], long long b_cs,
                                              int k, int member, int G, unsigned mask,
                                              typename sd_type<TY>::comp (&sum)[SD_BATCH]) {
    typedef typename sd_type<TY>::comp comp;
    if (V > 1) {
#pragma unroll(STEPS)
        for (int p = member * V; p < k; p += G * V) {
            comp x[SD_BATCH][V], y[SD_BATCH][V];
#pragma unroll
            for (int u = 0; u < SD_BATCH; ++u) {
                sd_load_vec<TY, V>(a[u] + p, x[u]);
                sd_load_vec<TY, V>(b[u] + p, y[u]);
            }
#pragma unroll
            for (int u = 0; u < SD_BATCH; ++u)
#pragma unroll
                for (int v = 0; v < V; ++v) sum[u] += x[u][v] * y[u][v];
        }
    } else {
        for (int p = member; p < k; p += G) {
            comp x[SD_BATCH], y[SD_BATCH];
#pragma unroll
            for (int u = 0; u < SD_BATCH; ++u) {
                x[u] = sd_type<TY>::load(a[u][p * a_cs]);
                y[u] = sd_type<TY>::load(b[u][p * b_cs]);
            }
#pragma unroll
            for (int u = 0; u < SD_BATCH; ++u) sum[u] += x[u] * y[u];
        }
    }
    for (int offset = G >> 1; offset > 0; offset >>= 1)
#pragma unroll
        for (int u = 0; u < SD_BATCH; ++u) sum[u] += __shfl_xor_sync(mask, sum[u], offset);
}

// Each thread block takes an equal chunk of `chunk` consecutive positions, its groups of
// G = 2^group_log2 lanes (inside one warp) SD_BATCH consecutive positions at a time, side by side,
// so that the block works on a narrow window of positions: nonzeros next to each other in the order
// share their A rows (row order) or B rows (band-column order), which then come from L1. The lanes
// of a group split K, V elements per load, and reduce with shuffles; a group's SD_BATCH nonzeros
// have their loads issued together, so that several rows are in flight per group rather than one.
// The row of each nonzero comes from `rows` (COO, GPU-Convert's conversion or a plan's) or, with CSR,
// from the row pointers themselves (GPU-Dynamic in one launch): the block finds the rows that hold
// its positions together (sd_block_window), copies their row pointers to shared memory (up to
// SD_CSR_ROWS of them), and each position bisects those or, where rows are long, steps to its row
// from its group's previous one (sd_step_row).
// Position g is entry order[g] of S (the band-column order of sddmm_band_order), or entry g
// without an order (row order; always with CSR).
// V > 1 only when rows are contiguous (cs == 1) and every row start is V-aligned.
//
// With CSR and a `check`, the kernel also validates the pattern, as sddmm_coo_rows does: each block
// checks each position's column as it is read and its share of the row pointers; what a bad pattern
// holds is clamped so that nothing is read out of bounds, and the last block to finish, once every
// product is written, overwrites out with NaN if it found the pattern invalid. Without CSR, `check`
// is the verdict of the conversion before it: an invalid pattern gets NaN and nothing is read.
template <int TY, int V, bool CSR>
__device__ void sddmm_coo(long long nnz, int k, typename sd_type<TY>::comp alpha,
                          const typename sd_type<TY>::elem* A, long long a_rs, long long a_cs,
                          const typename sd_type<TY>::elem* B, long long b_rs, long long b_cs,
                          const typename sd_type<TY>::elem* s, const unsigned int* rows, const int* row_ptr,
                          int m, int n, const int* col_ind, int base, const int* order, int group_log2,
                          long long chunk, typename sd_type<TY>::elem* out, sd_check* check, sd_report* report) {
    typedef typename sd_type<TY>::comp comp;
    typedef typename sd_type<TY>::elem elem;
    const int G = 1 << group_log2;
    int lane = threadIdx.x & 31;
    int member = lane & (G - 1);
    unsigned mask = G == 32 ? 0xffffffffu : (((1u << G) - 1) << (lane & ~(G - 1)));
    int group = threadIdx.x >> group_log2, groups = blockDim.x >> group_log2;
    long long first = blockIdx.x * chunk;
    long long last = first + chunk < nnz ? first + chunk : nnz;
    // With CSR: rows [span[0], span[1]) hold the chunk's positions; where they are few enough, their
    // row pointers are in shared memory (span_ptr[r - span[0]] = row_ptr[r]).
    __shared__ int span_ptr[CSR ? SD_CSR_ROWS : 1];
    int span[2] = {0, 0};
    bool span_shared = false;
    if (CSR && (m == 0 || n == 0)) {
        // A valid pattern has no entries then; an invalid one is only checked (A or B has no row).
        if (check)
            for (long long g = first + threadIdx.x; g < last; g += blockDim.x) sd_column_ok(check, g, col_ind[g], n, base);
        last = first;
    }
    // With a check: this block's share of the row pointers (sd_block_share). Each thread's first
    // pair is read now and compared after the products, so that the read is not one more round trip
    // at the end. (The share is computed again there rather than held in registers through the
    // products.)
    int share_previous = 0, share_next = 0;
    // With CSR: the columns of the group's first batch are asked of L1 before the block's rows are
    // found, so that their round trip overlaps that search's (the only batch of each group at low
    // densities: random S at 1e-5 to 1e-3). Loaded into registers there instead, they cost the
    // kernels registers through the products (f32 60 -> 72 a thread, f64 64 -> 80 with spills).
    if (CSR && first + group * SD_BATCH < last) sd_prefetch_l1(col_ind + first + group * SD_BATCH);
    if (CSR && check) {
        long long o0, o1;
        sd_block_share(m, o0, o1);
        if (o0 + 1 + threadIdx.x <= o1) {
            share_previous = row_ptr[o0 + threadIdx.x];
            share_next = row_ptr[o0 + 1 + threadIdx.x];
        }
    }
    if (CSR && first < last) {
        long long ends[2] = {first, last - 1};
        sd_block_window(row_ptr, m, base, ends, span);
        span_shared = span[1] - span[0] <= SD_CSR_ROWS;
        if (span_shared) {
            for (int r = span[0] + threadIdx.x; r < span[1]; r += blockDim.x) span_ptr[r - span[0]] = row_ptr[r];
            __syncthreads();
        }
    } else if (!CSR && check && check->invalid) {
        // Positions [first, last) of this block are entries [first, last): each entry once over the
        // grid, whatever the order (which a bad pattern leaves undefined).
        sd_fill_nan<TY>(out, first + threadIdx.x, blockDim.x, last);
        return;
    }
    // With CSR in shared memory, each batch's rows are searched from the row of the group's last
    // position (`hint`, of span_ptr): where the group's batches advance by at most about
    // SD_ROW_STEPS rows on average (the block's positions over its rows: rows of many nonzeros, as
    // random S of 8192 columns has from density 1e-2 on), by stepping one row at a time — at density
    // 5e-2 the bisections' loop had been a third of the kernel's instructions, which were twice the
    // planned COO kernel's (ncu) — and otherwise, or where a step falls short, by the four positions'
    // bisections together: one position after another they cost a few µs a call at densities up to
    // 1e-3 (H100).
    const long long stride = (long long)groups * SD_BATCH;
    const bool step_rows = (long long)(span[1] - span[0]) * stride <= SD_ROW_STEPS * (last - first);
    int hint = 0;
    for (long long g0 = first + group * SD_BATCH; g0 < last; g0 += stride) {
        long long e[SD_BATCH];
        const elem* a[SD_BATCH];
        const elem* b[SD_BATCH];
        comp sum[SD_BATCH];
        int row[SD_BATCH];
        if (CSR) {
            long long g[SD_BATCH];
#pragma unroll
            for (int u = 0; u < SD_BATCH; ++u) g[u] = g0 + u < last ? g0 + u : last - 1;
            if (span_shared) {
                const int count = span[1] - span[0];
                bool stepped = step_rows;
                if (step_rows) {
                    int r = hint;
#pragma unroll
                    for (int u = 0; u < SD_BATCH; ++u) {
                        stepped = sd_step_row(span_ptr, base, g[u], count, r) && stepped;
                        row[u] = r;
                    }
                }
                if (!stepped) sd_rows_of<true>(span_ptr, base, g, hint, count - hint, row);
                hint = row[SD_BATCH - 1];
#pragma unroll
                for (int u = 0; u < SD_BATCH; ++u) row[u] += span[0];
            } else {
                sd_rows_of<false>(row_ptr, base, g, span[0], span[1] - span[0], row);
            }
        }
#pragma unroll
        for (int u = 0; u < SD_BATCH; ++u) {
            // Past the chunk's end the last position is computed again and not written.
            long long g = g0 + u < last ? g0 + u : last - 1;
            e[u] = order ? order[g] : g;
            if (CSR) {
                long long col = (long long)col_ind[g] - base;
                if (check && (col < 0 || col >= n)) {
                    if (member == 0 && g == g0 + u) sd_column_ok(check, g, (int)(col + base), n, base);
                    col = 0;  // read a row that exists; out gets NaN
                }
                a[u] = A + (long long)row[u] * a_rs;
                b[u] = B + col * b_rs;
            } else {
                a[u] = A + (long long)rows[e[u]] * a_rs;
                b[u] = B + (long long)(col_ind[e[u]] - base) * b_rs;
            }
            sum[u] = 0;
        }
        // Two steps at a time hold twice the loads in flight; in f64, and in the CSR kernels with
        // their row search, they cost the registers of a thread block an SM (see SD_COO's bounds).
        sd_batch_dots<TY, V, sizeof(comp) == 8 || CSR ? 1 : 2>(a, a_cs, b, b_cs, k, member, G, mask, sum);
        if (member == 0) {
#pragma unroll
            for (int u = 0; u < SD_BATCH; ++u)
                if (g0 + u < last) out[e[u]] = sd_finish<TY>(alpha, s, e[u], sum[u]);
        }
    }
    if (CSR && check) {
        long long o0, o1;
        sd_block_share(m, o0, o1);
        if (share_next < share_previous) sd_note_decrease(check, o0 + 1 + threadIdx.x, share_next, share_previous);
        sd_check_decreases(check, row_ptr, o0 + 1 + threadIdx.x + blockDim.x, o1);
        if (sd_check_finish(check, report, m, n, nnz, row_ptr, base)) sd_fill_nan<TY>(out, threadIdx.x, blockDim.x, nnz);
    }
}

// f64's kernels are bounded to 256 threads a block, which with one step at a time in the vector loop
// leaves them 64 registers a thread (80 and 70 otherwise): four blocks an SM instead of three, and
// 14-24 % less time on random S at densities 1e-3 to 5e-2 (H100). f32's COO kernels held to 48
// registers (five blocks an SM, one step at a time) were 4-7 % slower at k = 256, so they keep the
// compiler's choice; the CSR kernels take one step at a time in every type (f32 with the row steps
// alone: 78 registers, 48 with one step; sddmmDynamic at density 5e-2, k = 256 0.523 -> 0.482 ms).
// The 16-bit types' CSR kernels are held to 64 registers, four blocks an SM (66-84 otherwise, three),
// but for bf16 with element loads, which would spill.
// sddmm_coo_<ty>_v<V> reads the COO rows; sddmm_csr_<ty>_v<V> the row pointers (and validates). Both
// take the same arguments; each ignores those of the other's source.
#define SD_COO_KERNEL(NAME, SUFFIX, TY, V, BOUNDS, CSR)                                                             \
    extern "C" __global__ void BOUNDS NAME##_##SUFFIX##_v##V(                                                       \
        long long nnz, int k, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, long long a_rs, long long a_cs, \
        const sd_type<TY>::elem* B, long long b_rs, long long b_cs, const sd_type<TY>::elem* s,                     \
        const unsigned int* rows, const int* row_ptr, int m, int n, const int* col_ind, int base, const int* order,  \
        int group_log2, long long chunk, sd_type<TY>::elem* out, sd_check* check, sd_report* report) {              \
        sddmm_coo<TY, V, CSR>(nnz, k, alpha, A, a_rs, a_cs, B, b_rs, b_cs, s, rows, row_ptr, m, n, col_ind, base,   \
                              CSR ? 0 : order, group_log2, chunk, out, check, report);                              \
    }
#define SD_COO(SUFFIX, TY, V, BOUNDS, CSR_BOUNDS)          \
    SD_COO_KERNEL(sddmm_coo, SUFFIX, TY, V, BOUNDS, false) \
    SD_COO_KERNEL(sddmm_csr, SUFFIX, TY, V, CSR_BOUNDS, true)
SD_COO(f32, 0, 1, , )
SD_COO(f32, 0, 2, , )
SD_COO(f32, 0, 4, , )
SD_COO(f64, 1, 1, __launch_bounds__(256), __launch_bounds__(256))
SD_COO(f64, 1, 2, __launch_bounds__(256), __launch_bounds__(256))
SD_COO(f16, 2, 1, , __launch_bounds__(256, 4))
SD_COO(f16, 2, 2, , __launch_bounds__(256, 4))
SD_COO(f16, 2, 4, , __launch_bounds__(256, 4))
SD_COO(f16, 2, 8, , __launch_bounds__(256, 4))
SD_COO(bf16, 3, 1, , )
SD_COO(bf16, 3, 2, , __launch_bounds__(256, 4))
SD_COO(bf16, 3, 4, , __launch_bounds__(256, 4))
SD_COO(bf16, 3, 8, , __launch_bounds__(256, 4))

// Rows of many nonzeros, of even lengths (a plan's pattern): a warp a row, as cusparseSDDMM's kernel
// does. The warp holds the row of A in registers (each lane of a group of G lanes NV vectors of V
// elements: k <= G·NV·V) and takes the row's nonzeros 32 at a time, G to each of its 32 / G groups:
// lane l reads the column of nonzero l (one coalesced load, the next iteration's issued with this
// one's products), the groups get theirs by shuffles, and the group's reduction leaves the sum of
// nonzero l in lane l (sd_transpose_sums), which writes it (one coalesced store). Where the COO
// kernel loads a row of A for every nonzero, as many bytes through L1 as its row of B, this loads it
// once a row; and a nonzero's reduction costs (G - 1) / G shuffles instead of log2 G.
// With a `check` whose verdict is invalid, out gets NaN and nothing is read.

// sum[u] is this lane's part of nonzero u's sum, u < G, for the G lanes of its group (member: this
// lane's place in it); afterwards sum[0] is the whole sum of nonzero `member`. Each step halves the
// values a lane holds: it keeps the half its partner (member ^ half) does not and adds the partner's
// part of it.
template <typename C, int G>
__device__ __forceinline__ void sd_transpose_sums(C (&sum)[G], int member) {
#pragma unroll
    for (int half = G / 2; half >= 1; half /= 2) {
        const bool upper = member & half;
#pragma unroll
        for (int j = 0; j < half; ++j) {
            const C send = upper ? sum[j] : sum[j + half];
            const C keep = upper ? sum[j + half] : sum[j];
            sum[j] = keep + __shfl_xor_sync(0xffffffffu, send, half);
        }
    }
}

// A row of A into the registers of a group of G lanes, as the row-warp and panel kernels hold it:
// lane `member` takes vectors member, member + G, ... of V elements (NV of them), zeros past k.
template <int TY, int V, int NV, int G>
__device__ __forceinline__ void sd_load_row(const typename sd_type<TY>::elem* a, int member, int k,
                                            typename sd_type<TY>::comp (&x)[NV][V]) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const int p = (member + i * G) * V;
        if (p < k) sd_load_vec<TY, V>(a + p, x[i]);
        else
#pragma unroll
            for (int v = 0; v < V; ++v) x[i][v] = 0;
    }
}

// The row-warp iterations of one row: positions [start, end) of row `row`, the warp's iterations
// first_step, first_step + steps, ... of 32 positions each (one warp a row: 0 and 1; a long row
// shared by every warp of the grid: the warp's index and their count). With a `check` (a pattern being
// validated, whose verdict replaces out) each column is validated where it is used, the only read of
// it, and one outside [0, n) is noted and reads B's row 0. LEAN and FULL: see sd_row_warp_span.
template <int TY, int V, int NV, int G, bool LEAN, bool FULL>
__device__ __forceinline__ void sd_row_warp_span_of(long long row, long long start, long long end, long long first_step,
                                                 long long steps, int k, typename sd_type<TY>::comp alpha,
                                                 const typename sd_type<TY>::elem* A, int a_rs,
                                                 const typename sd_type<TY>::elem* B, int b_rs,
                                                 const typename sd_type<TY>::elem* s, const int* col_ind, int base,
                                                 int n, sd_check* check, typename sd_type<TY>::elem* out) {
    typedef typename sd_type<TY>::comp comp;
    typedef typename sd_type<TY>::elem elem;
    const int lane = threadIdx.x & 31;
    const int member = lane & (G - 1);
    const int first = lane - member;  // nonzero `first + u` of an iteration is this group's u-th
    long long pos = start + first_step * 32;
    if (pos >= end) return;
    const long long stride = steps * 32;
    comp x[NV][V];
    sd_load_row<TY, V, NV, G>(A + row * a_rs, member, k, x);
    const unsigned b_row_bytes = (unsigned)b_rs * (unsigned)sizeof(elem);
    // A column is loaded an iteration ahead and checked only where it is used: a check right after
    // the load (a branch to an atomic) would hold this iteration's loads of B until the next
    // iteration's column had arrived. Past the row's end the stored value is `base`: B's row 0,
    // which exists where rows are read (n > 0), and nothing is written.
    auto stored_column = [&](long long e) { return e < end ? col_ind[e] : base; };
    int stored = stored_column(pos + lane);
    for (; pos < end; pos += stride) {
        const int col = check && !sd_column_ok(check, pos + lane, stored, n, base) ? 0 : stored - base;
        stored = stored_column(pos + stride + lane);
        const elem* b[G];
        comp sum[G];
#pragma unroll
        for (int u = 0; u < G; ++u) {
            const int column = __shfl_sync(0xffffffffu, col, first + u);
            b[u] = LEAN ? (const elem*)((const char*)B + (unsigned long long)(unsigned)column * b_row_bytes)
                        : B + (long long)column * b_rs;
            sum[u] = 0;
        }
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int p = (member + i * G) * V;
            comp y[G][V];
#pragma unroll
            for (int u = 0; u < G; ++u) {
                if (FULL || p < k) sd_load_vec<TY, V>(b[u] + p, y[u]);
                else
#pragma unroll
                    for (int v = 0; v < V; ++v) y[u][v] = 0;
            }
#pragma unroll
            for (int u = 0; u < G; ++u)
#pragma unroll
                for (int v = 0; v < V; ++v) sum[u] += x[i][v] * y[u][v];
        }
        sd_transpose_sums<comp, G>(sum, member);
        const long long e = pos + lane;
        if (e < end) out[e] = sd_finish<TY>(alpha, s, e, sum[0]);
    }
}

// sd_row_warp_span_of, lean where that measured faster: a row of B's address from one 32-bit
// product (IMAD.WIDE.U32 of a column, never negative here, and the row's bytes, below 2^32 by the
// host's row_warps_shape, added to B) instead of a sign extension, a 64-bit product and a scaled
// add; and where k = G·V·NV (every lane's vectors lie inside the row: the widths the kernels are
// tuned for) FULL, loads of B without a bound, where otherwise a vector past k is zeroed first (two
// instructions an element: 135 of the 310 instructions of an iteration of the f32 kernel at
// k = 64, sm_90; lean and full, 178). On random S (H200, docs/methods.md) the lean iteration made
// the row-warp kernels up to 25 % faster, but the f32 kernels of 4 and 8 vectors a lane up to 29 %
// slower (34 % with the 32-bit product alone): ptxas then gave them fewer registers (94 against
// 128) and interleaved each load with its products, 3 loads in flight a lane instead of 13-15.
// Those keep the bounded loads and 64-bit address arithmetic. The second instance of the loop
// costs compile time: NVRTC took 62 s for this file for sm_90 on a 2-core host, 41 s before.
// GPU-Dynamic's long-row kernel keeps one (sddmm_long_rows).
template <int TY, int V, int NV, int G>
__device__ __forceinline__ void sd_row_warp_span(long long row, long long start, long long end, long long first_step,
                                                 long long steps, int k, typename sd_type<TY>::comp alpha,
                                                 const typename sd_type<TY>::elem* A, int a_rs,
                                                 const typename sd_type<TY>::elem* B, int b_rs,
                                                 const typename sd_type<TY>::elem* s, const int* col_ind, int base,
                                                 int n, sd_check* check, typename sd_type<TY>::elem* out) {
    constexpr bool lean = TY != 0 || NV <= 2;
    if (lean && k == G * V * NV)
        sd_row_warp_span_of<TY, V, NV, G, lean, true>(row, start, end, first_step, steps, k, alpha, A, a_rs, B, b_rs,
                                                      s, col_ind, base, n, check, out);
    else
        sd_row_warp_span_of<TY, V, NV, G, lean, false>(row, start, end, first_step, steps, k, alpha, A, a_rs, B, b_rs,
                                                       s, col_ind, base, n, check, out);
}

// Row `row`'s positions [start, end) by the row pointers, clamped into [0, nnz] so that a pattern
// being validated reads nothing out of bounds whatever its row pointers hold (empty where they
// decrease).
__device__ __forceinline__ void sd_clamped_row(const int* row_ptr, long long row, int base, long long nnz,
                                               long long& start, long long& end) {
    start = (long long)row_ptr[row] - base;
    end = (long long)row_ptr[row + 1] - base;
    start = start < 0 ? 0 : (start > nnz ? nnz : start);
    end = end < start ? start : (end > nnz ? nnz : end);
}

template <int TY, int V, int NV, int G>
__device__ void sddmm_row_warps(int m, long long nnz, int k, typename sd_type<TY>::comp alpha,
                                const typename sd_type<TY>::elem* A, int a_rs, const typename sd_type<TY>::elem* B,
                                int b_rs, const typename sd_type<TY>::elem* s, const int* row_ptr, const int* col_ind,
                                int base, typename sd_type<TY>::elem* out, const sd_check* check) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    if (check && check->invalid) {
        sd_fill_nan<TY>(out, warp * 32 + (threadIdx.x & 31), warps * 32, nnz);
        return;
    }
    for (long long row = warp; row < m; row += warps) {
        const long long start = (long long)row_ptr[row] - base, end = (long long)row_ptr[row + 1] - base;
        sd_row_warp_span<TY, V, NV, G>(row, start, end, 0, 1, k, alpha, A, a_rs, B, b_rs, s, col_ind, base, 0,
                                       nullptr, out);
    }
}

// GPU-Dynamic's row-warp kernels (a pattern read as CSR, rows of many entries on average, no plan):
// sddmm_csr_row_warps takes a warp a row as sddmm_row_warps does, but for rows of more than
// `long_limit` entries, which it lists (long_rows, counters[0] of them) for sddmm_long_rows, run
// right after it, where every warp of the grid takes a share of each listed row's iterations: a
// warp a row is balanced only where rows are even, and without a plan their lengths are not known
// before the launch. With a `check`, the two validate the pattern: the first kernel's blocks check
// their shares of the row pointers, and each column is checked where a row's warp reads it (with
// row pointers that a valid pattern has, the rows cover every entry once, so the first bad column
// is found; with others the row pointers' fault is the one reported). What a bad pattern holds is
// clamped so that nothing is read or written out of bounds, and the second kernel's last block to
// finish writes NaN over out if the pattern is invalid. A pass of each block over a share of the
// columns before its rows, as the CSR kernels make, read them twice and found fewer of B's rows in
// L1 (random S, density 5e-2, f32, k = 32, H200: 22 % of its sectors against 32 % without, ncu);
// without it sddmmDynamic took 0.061 ms there instead of 0.075. The second kernel's last block also
// clears the counters for the next call (counters[1] counts its blocks done).
template <int TY, int V, int NV, int G>
__device__ void sddmm_csr_row_warps(int m, int n, long long nnz, int k, typename sd_type<TY>::comp alpha,
                                    const typename sd_type<TY>::elem* A, int a_rs,
                                    const typename sd_type<TY>::elem* B, int b_rs,
                                    const typename sd_type<TY>::elem* s, const int* row_ptr, const int* col_ind,
                                    int base, long long long_limit, int* long_rows, unsigned int* counters,
                                    typename sd_type<TY>::elem* out, sd_check* check) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    if (check) {
        long long o0, o1;
        sd_block_share(m, o0, o1);
        sd_check_decreases(check, row_ptr, o0 + 1 + threadIdx.x, o1);
        // Without columns no rows are read below, and every column is out of range: the first is.
        if (n == 0 && nnz > 0 && blockIdx.x == 0 && threadIdx.x == 0) sd_column_ok(check, 0, col_ind[0], n, base);
    }
    // A valid pattern without columns has no entries.
    for (long long row = warp; n > 0 && row < m; row += warps) {
        long long start, end;
        sd_clamped_row(row_ptr, row, base, nnz, start, end);
        if (end - start > long_limit) {
            if ((threadIdx.x & 31) == 0) long_rows[atomicAdd(&counters[0], 1u)] = (int)row;
            continue;
        }
        sd_row_warp_span<TY, V, NV, G>(row, start, end, 0, 1, k, alpha, A, a_rs, B, b_rs, s, col_ind, base, n,
                                       check, out);
    }
}

// Listed rows each warp of sddmm_long_rows reads a round.
#define SD_LIST_ROWS 128
template <int TY, int V, int NV, int G>
__device__ void sddmm_long_rows(int m, int n, long long nnz, int k, typename sd_type<TY>::comp alpha,
                                const typename sd_type<TY>::elem* A, int a_rs, const typename sd_type<TY>::elem* B,
                                int b_rs, const typename sd_type<TY>::elem* s, const int* row_ptr, const int* col_ind,
                                int base, const int* long_rows, unsigned int* counters,
                                typename sd_type<TY>::elem* out, sd_check* check, sd_report* report) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const int lane = threadIdx.x & 31;
    const unsigned int count = counters[0];
    // The listed rows' iterations (32 positions each) in list order form one sequence, of which
    // warp w takes iterations w, w + warps, ...: its first in a row is (w - the iterations before
    // the row) mod warps. So many rows just over the limit (a block pattern's: 2000 rows of 4-5
    // iterations) keep every warp busy, where the warps taking each row's iterations in turn left
    // most of them idle (sddmmDynamic took 38-55 times the planned call there), as does one row
    // longer than all the others together. Every warp reads the whole list, SD_LIST_ROWS rows a round (a
    // lane the bounds of SD_LIST_ROWS / 32 consecutive rows, their loads issued together), scans
    // their iteration counts and computes only the rows where it has iterations.
    // Iteration counts in 32 bits: enough for a valid pattern (row pointers are 32-bit) whose rows
    // are shorter than 2^31 - 32 entries. An invalid pattern's clamped rows may overlap and their
    // counts wrap; that moves only which warp takes which iteration (every position stays within
    // its clamped row, and out gets NaN).
    const int my_warp = (int)warp, all_warps = (int)warps;
    int before = 0;  // iterations of the rows of earlier rounds
    for (unsigned int i0 = 0; i0 < count; i0 += SD_LIST_ROWS) {
        constexpr int Q = SD_LIST_ROWS / 32;
        const unsigned int mine = i0 + lane * Q;  // this lane's first row of the round
        int row[Q], start[Q], end[Q];
#pragma unroll
        for (int q = 0; q < Q; ++q) row[q] = mine + q < count ? long_rows[mine + q] : -1;
        int lane_steps = 0;
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            long long s0 = 0, s1 = 0;
            if (row[q] >= 0) sd_clamped_row(row_ptr, row[q], base, nnz, s0, s1);
            start[q] = (int)s0;
            end[q] = (int)s1;
            lane_steps += (end[q] - start[q] + 31) / 32;
        }
        // Iterations of this round's rows up to this lane's last.
        const int through = sd_warp_inclusive_sum(lane_steps);
        int at = before + through - lane_steps;  // iterations before this lane's row q
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            const int steps = (end[q] - start[q] + 31) / 32;
            int first = (my_warp - at) % all_warps;  // this warp's first iteration in the row
            if (first < 0) first += all_warps;
            at += steps;
            unsigned int with_work = __ballot_sync(0xffffffffu, first < steps);
            while (with_work) {
                const int j = __ffs(with_work) - 1;
                with_work &= with_work - 1;
                // The bounded loop only (see sd_row_warp_span): these rows are the few longer than
                // twice the mean, and a second instance here made sddmm.cu a third slower to compile.
                sd_row_warp_span_of<TY, V, NV, G, false, false>(
                    __shfl_sync(0xffffffffu, row[q], j), __shfl_sync(0xffffffffu, start[q], j),
                    __shfl_sync(0xffffffffu, end[q], j), __shfl_sync(0xffffffffu, first, j), warps, k, alpha, A, a_rs,
                    B, b_rs, s, col_ind, base, n, check, out);
            }
        }
        before += __shfl_sync(0xffffffffu, through, 31);
    }
    if (check && sd_check_finish(check, report, m, n, nnz, row_ptr, base))
        sd_fill_nan<TY>(out, threadIdx.x, blockDim.x, nnz);
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(&counters[1], 1u) == gridDim.x - 1) {
        counters[0] = 0;
        counters[1] = 0;
    }
}

// Resident blocks of 256 threads an SM that the row-warp kernels of NV vectors a lane are held to
// (`dynamic`: GPU-Dynamic's sddmm_csr_row_warps; 0: no minimum, the compiler's choice): the kernels
// wait on the latency of their rows of B (ncu, f32, density 1e-2, k = 64: no eligible warp 64 % of
// the cycles at 3 blocks an SM, 80 registers), so 4 blocks (64 registers) for NV = 1 and 2, although
// ptxas then spills a few values in most of them (up to 80 bytes a thread stored), and 3 (80
// registers, up to 184 bytes spilled) for NV = 4 in bf16 and in GPU-Dynamic's f64 only. Measured on
// an H200 (random S, densities 1e-3 to 5e-2, k = 32 to 256, all four types; docs/methods.md,
// "Row-warp kernels held to more blocks"): against the unbounded kernels, NV = 1 and 2 (8 lanes a
// row) 1-13 % shorter at 1e-2 and 5e-2; NV = 4 bf16 2-11 % shorter and GPU-Dynamic's f64 8-12 %, but
// planned f64 2-8 % longer, f32 up to 23 % and f16 (GPU-Dynamic's, k = 256) 13-29 %, which this rule
// leaves unbounded (against NV = 4 held in every type: f32 GPU-Dynamic at 5e-2, k = 128 0.160 ->
// 0.140 ms, f16 at k = 256 0.060 -> 0.054 at 1e-2 and 0.191 -> 0.150 at 5e-2).
constexpr int sd_row_warp_blocks(int ty, int nv, bool dynamic) {
    // ty as sd_type's: 1 f64, 3 bf16.
    return nv <= 2 ? 4 : nv == 4 && (ty == 3 || (ty == 1 && dynamic)) ? 3 : 0;
}
#define SD_ROW_WARPS(SUFFIX, TY, V, G, NV)                                                                          \
    extern "C" __global__ void __launch_bounds__(256, sd_row_warp_blocks(TY, NV, false))                             \
        sddmm_row_warps_##SUFFIX##_g##G##_n##NV(                                                                    \
        int m, long long nnz, int k, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, int a_rs,                 \
        const sd_type<TY>::elem* B, int b_rs, const sd_type<TY>::elem* s, const int* row_ptr, const int* col_ind,   \
        int base, sd_type<TY>::elem* out, const sd_check* check) {                                                 \
        sddmm_row_warps<TY, V, NV, G>(m, nnz, k, alpha, A, a_rs, B, b_rs, s, row_ptr, col_ind, base, out, check);   \
    }
// The two kernels of GPU-Dynamic's row warps take one argument list (the host launches them with
// one array): sddmm_csr_row_warps does not read report, sddmm_long_rows not long_limit.
#define SD_CSR_ROW_WARPS_PARAMS(TY)                                                                                  \
    int m, int n, long long nnz, int k, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, int a_rs,            \
        const sd_type<TY>::elem* B, int b_rs, const sd_type<TY>::elem* s, const int* row_ptr, const int* col_ind,     \
        int base, long long long_limit, int* long_rows, unsigned int* counters, sd_type<TY>::elem* out,              \
        sd_check* check, sd_report* report
#define SD_CSR_ROW_WARPS(SUFFIX, TY, V, G, NV)                                                                        \
    extern "C" __global__ void __launch_bounds__(256, sd_row_warp_blocks(TY, NV, true))                              \
        sddmm_csr_row_warps_##SUFFIX##_g##G##_n##NV(SD_CSR_ROW_WARPS_PARAMS(TY)) {                                   \
        sddmm_csr_row_warps<TY, V, NV, G>(m, n, nnz, k, alpha, A, a_rs, B, b_rs, s, row_ptr, col_ind, base,           \
                                          long_limit, long_rows, counters, out, check);                              \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(256, 2)                                                             \
        sddmm_long_rows_##SUFFIX##_g##G##_n##NV(SD_CSR_ROW_WARPS_PARAMS(TY)) {                                       \
        sddmm_long_rows<TY, V, NV, G>(m, n, nnz, k, alpha, A, a_rs, B, b_rs, s, row_ptr, col_ind, base, long_rows,   \
                                      counters, out, check, report);                                                 \
    }
// Four lanes a group where a row is at most four vectors, else eight (the host's row_warps_shape);
// up to 8 vectors a lane in f32 / f64, 4 in f16 / bf16 (whose 16-byte vectors widen to 8 floats).
#define SD_ROW_WARPS_BOTH(SUFFIX, TY, V, G, NV) \
    SD_ROW_WARPS(SUFFIX, TY, V, G, NV)          \
    SD_CSR_ROW_WARPS(SUFFIX, TY, V, G, NV)
#define SD_ROW_WARPS_TYPE(SUFFIX, TY, V) \
    SD_ROW_WARPS_BOTH(SUFFIX, TY, V, 4, 1)    \
    SD_ROW_WARPS_BOTH(SUFFIX, TY, V, 8, 1)    \
    SD_ROW_WARPS_BOTH(SUFFIX, TY, V, 8, 2)    \
    SD_ROW_WARPS_BOTH(SUFFIX, TY, V, 8, 4)
SD_ROW_WARPS_TYPE(f32, 0, 4)
SD_ROW_WARPS_BOTH(f32, 0, 4, 8, 8)
SD_ROW_WARPS_TYPE(f64, 1, 2)
SD_ROW_WARPS_BOTH(f64, 1, 2, 8, 8)
SD_ROW_WARPS_TYPE(f16, 2, 8)
SD_ROW_WARPS_TYPE(bf16, 3, 8)

// ---------------------------------------------------------------------------------------------
// The tiled algorithm (GPU-Shared)
// ---------------------------------------------------------------------------------------------

// Exclusive block scan of one counter; returns the block total through *total.
__device__ __forceinline__ int sd_block_scan(int v, int* total) {
    __shared__ int warp_sums[SD_THREADS / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int in = sd_warp_inclusive_sum(v);
    if (lane == 31) warp_sums[warp] = in;
    __syncthreads();
    int before = 0, all = 0;
    for (int w = 0; w < SD_THREADS / 32; ++w) {
        if (w < warp) before += warp_sums[w];
        all += warp_sums[w];
    }
    *total = all;
    __syncthreads();  // warp_sums is reused by the next call
    return before + in - v;
}

// The tiled algorithm's order, on the GPU: for each band of SD_BAND rows, a counting sort of its
// nonzeros by column, so that the nonzeros of one column of the band, which read the same row of
// B, are next to each other (and those of a few neighbouring columns share the band's A rows).
// Band b's entries keep their range [e0, e1) of positions: order[e0 + g] is the entry (index into
// S) at position g of the band; bands need no global coordination. Given `positions` (a plan's
// order, n <= 2^24), positions[e0 + g] is the position's row within the band and zero-based column,
// packed as the band kernels read them (row << 24 | column). `scratch` holds one histogram
// of n counters per block. It runs after sddmm_coo_rows, which validates a pattern in device memory;
// whatever the pattern holds, nothing is read or written out of bounds here: a band whose row
// pointers leave [0, nnz] or decrease is left out, and so are columns outside [0, n) (the compute
// kernel then fills out with NaN and reads no order).
extern "C" __global__ void sddmm_band_order(int m, int n, long long nnz, const int* row_ptr, const int* col_ind,
                                            int base, int* scratch, int* order, unsigned* positions) {
    __shared__ int carry;
    const int bands = (m + SD_BAND - 1) / SD_BAND;
    int* hist = scratch + (long long)blockIdx.x * n;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int band = blockIdx.x; band < bands; band += gridDim.x) {
        int r0 = band * SD_BAND;
        int rows = m - r0 < SD_BAND ? m - r0 : SD_BAND;
        bool bad = false;
        for (int r = r0 + threadIdx.x; r < r0 + rows; r += SD_THREADS) {
            int start = row_ptr[r], next = row_ptr[r + 1];
            bad |= next < start || (long long)start - base < 0 || (long long)next - base > nnz;
        }
        if (__syncthreads_or(bad)) continue;
        long long e0 = row_ptr[r0] - base;
        for (int c = threadIdx.x; c < n; c += SD_THREADS) hist[c] = 0;
        if (threadIdx.x == 0) carry = 0;
        __syncthreads();
        for (int r = warp; r < rows; r += SD_THREADS / 32)
            for (long long e = row_ptr[r0 + r] - base + lane; e < row_ptr[r0 + r + 1] - base; e += 32) {
                long long col = (long long)col_ind[e] - base;
                if (col >= 0 && col < n) atomicAdd(&hist[col], 1);
            }
        __syncthreads();
        for (int c0 = 0; c0 < n; c0 += SD_THREADS) {
            int c = c0 + threadIdx.x;
            int count = c < n ? hist[c] : 0;
            int total_count;
            int ex_count = sd_block_scan(count, &total_count);
            if (c < n) hist[c] = carry + ex_count;
            __syncthreads();
            if (threadIdx.x == 0) carry += total_count;
            __syncthreads();
        }
        for (int r = warp; r < rows; r += SD_THREADS / 32)
            for (long long e = row_ptr[r0 + r] - base + lane; e < row_ptr[r0 + r + 1] - base; e += 32) {
                long long col = (long long)col_ind[e] - base;
                if (col >= 0 && col < n) {
                    long long g = e0 + atomicAdd(&hist[col], 1);
                    order[g] = (int)e;
                    if (positions) positions[g] = (unsigned)r << 24 | (unsigned)col;
                }
            }
        __syncthreads();
    }
}

// The tiled algorithm through a plan (GPU-Shared): a thread block takes one slice of a band's
// positions in band-column order, slices[blockIdx.x] = (band, first, last) (a plan's list: bands
// of very different sizes stay balanced). It copies the band's SD_BAND rows of A into shared memory
// (a_stride elements a row), then its groups take SD_BATCH positions at a time as in sddmm_coo,
// each position's row of A read from shared memory and its row of B from global memory, where the
// positions of a column come one after another (the row read from L2 once and then from L1).
// Position g's row within the band and column are packed in positions[g] (row << 24 | column:
// n <= 2^24) and its entry is order[g]; both are copied into shared memory SD_BAND_STAGES - 1
// passes of the block ahead (cp.async), so that a group's row loads do not wait for its index
// loads. V > 1 only when A's and B's rows are contiguous and every row start is V-aligned (then
// a_stride too).
#define SD_BAND_STAGES 3
template <int TY, int V>
__device__ void sddmm_band(int m, int k, typename sd_type<TY>::comp alpha, const typename sd_type<TY>::elem* A,
                           long long a_rs, long long a_cs, const typename sd_type<TY>::elem* B, long long b_rs,
                           long long b_cs, const typename sd_type<TY>::elem* s, const int4* slices,
                           const int* order, const unsigned* positions, int a_stride, int group_log2,
                           typename sd_type<TY>::elem* out) {
    typedef typename sd_type<TY>::comp comp;
    typedef typename sd_type<TY>::elem elem;
    const int G = 1 << group_log2;
    const int groups = blockDim.x >> group_log2;
    const int per_pass = groups * SD_BATCH;  // positions of a pass of the block
    // Shared memory: the stages of positions and entries (2 · per_pass words each), then A's rows.
    extern __shared__ __align__(16) unsigned char sd_band_shared[];
    unsigned* stages = (unsigned*)sd_band_shared;
    elem* a_band = (elem*)(stages + SD_BAND_STAGES * 2 * per_pass);
    const int4 slice = slices[blockIdx.x];
    const int r0 = slice.x * SD_BAND;
    const int rows = m - r0 < SD_BAND ? m - r0 : SD_BAND;
    const int first = slice.y, last = slice.z;
    const int passes = (last - first + per_pass - 1) / per_pass;

    // Pass t's positions and entries into its stage; words past the slice are zeros (row 0,
    // column 0: a position that exists, computed and not written).
    auto stage_pass = [&](int t) {
        if (t < passes) {
            unsigned* stage = stages + (t % SD_BAND_STAGES) * 2 * per_pass;
            const int g0 = first + t * per_pass;
            for (int w = threadIdx.x; w < 2 * per_pass; w += blockDim.x) {
                int i = w < per_pass ? w : w - per_pass;
                int g = g0 + i < last ? g0 + i : first;
                const void* src = w < per_pass ? (const void*)(positions + g) : (const void*)(order + g);
                sgpu_cp_async4(sgpu_smem_address(stage + w), src, g0 + i < last ? 4 : 0);
            }
        }
        sgpu_cp_async_commit();
    };
    for (int t = 0; t < SD_BAND_STAGES - 1; ++t) stage_pass(t);

    if (V > 1) {
        const int vectors = k / V;
        for (int i = threadIdx.x; i < rows * vectors; i += blockDim.x) {
            int r = i / vectors, p = (i - r * vectors) * V;
            const elem* src = A + (long long)(r0 + r) * a_rs + p;
            elem* dst = a_band + r * a_stride + p;
            if (V * sizeof(elem) == 16) sgpu_cp_async16(sgpu_smem_address(dst), src);
            else sd_copy_vec<TY, V>(dst, src);
        }
    } else if (a_rs < a_cs) {
        // Column-major A: consecutive threads read consecutive rows.
        for (int i = threadIdx.x; i < rows * k; i += blockDim.x) {
            int p = i / rows, r = i - p * rows;
            a_band[r * a_stride + p] = A[(long long)(r0 + r) * a_rs + (long long)p * a_cs];
        }
    } else {
        for (int i = threadIdx.x; i < rows * k; i += blockDim.x) {
            int r = i / k, p = i - r * k;
            a_band[r * a_stride + p] = A[(long long)(r0 + r) * a_rs + (long long)p * a_cs];
        }
    }
    sgpu_cp_async_commit();  // A's rows (with V > 1) finish with the first pass's stage at the latest

    int lane = threadIdx.x & 31;
    int member = lane & (G - 1);
    unsigned mask = G == 32 ? 0xffffffffu : (((1u << G) - 1) << (lane & ~(G - 1)));
    int group = threadIdx.x >> group_log2;
    for (int t = 0; t < passes; ++t) {
        // Pass t's stage (and A's rows) are in; every group is done with the stage refilled next.
        if (t == 0) sgpu_cp_async_wait<0>();
        else sgpu_cp_async_wait<SD_BAND_STAGES - 2>();
        __syncthreads();
        stage_pass(t + SD_BAND_STAGES - 1);
        const unsigned* stage = stages + (t % SD_BAND_STAGES) * 2 * per_pass;
        const int g0 = first + t * per_pass + group * SD_BATCH;
        int e[SD_BATCH];
        const elem* a[SD_BATCH];
        const elem* b[SD_BATCH];
        comp sum[SD_BATCH];
#pragma unroll
        for (int u = 0; u < SD_BATCH; ++u) {
            unsigned position = stage[group * SD_BATCH + u];
            e[u] = (int)stage[per_pass + group * SD_BATCH + u];
            a[u] = a_band + (position >> 24) * a_stride;
            b[u] = B + (long long)(position & 0xffffffu) * b_rs;
            sum[u] = 0;
        }
        sd_batch_dots<TY, V, sizeof(comp) == 8 ? 1 : 2>(a, 1, b, b_cs, k, member, G, mask, sum);
        if (member == 0) {
#pragma unroll
            for (int u = 0; u < SD_BATCH; ++u)
                if (g0 + u < last) out[e[u]] = sd_finish<TY>(alpha, s, e[u], sum[u]);
        }
    }
}

#define SD_BAND_KERNEL(SUFFIX, TY, V)                                                                              \
    extern "C" __global__ void sddmm_band_##SUFFIX##_v##V(                                                        \
        int m, int k, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, long long a_rs, long long a_cs,         \
        const sd_type<TY>::elem* B, long long b_rs, long long b_cs, const sd_type<TY>::elem* s, const int4* slices, \
        const int* order, const unsigned* positions, int a_stride, int group_log2, sd_type<TY>::elem* out) {       \
        sddmm_band<TY, V>(m, k, alpha, A, a_rs, a_cs, B, b_rs, b_cs, s, slices, order, positions, a_stride,        \
                          group_log2, out);                                                                        \
    }
SD_BAND_KERNEL(f32, 0, 1)
SD_BAND_KERNEL(f32, 0, 2)
SD_BAND_KERNEL(f32, 0, 4)
SD_BAND_KERNEL(f64, 1, 1)
SD_BAND_KERNEL(f64, 1, 2)
SD_BAND_KERNEL(f16, 2, 1)
SD_BAND_KERNEL(f16, 2, 2)
SD_BAND_KERNEL(f16, 2, 4)
SD_BAND_KERNEL(f16, 2, 8)
SD_BAND_KERNEL(bf16, 3, 1)
SD_BAND_KERNEL(bf16, 3, 2)
SD_BAND_KERNEL(bf16, 3, 4)
SD_BAND_KERNEL(bf16, 3, 8)

// ---------------------------------------------------------------------------------------------
// The tiled algorithm on tensor cores (f16 / bf16, and f32 in a TF32 math mode, with a plan whose
// rows are sorted by column)
// ---------------------------------------------------------------------------------------------

// A thread block computes one SD_TC_M × SD_TC_N tile of A·Bᵀ densely on tensor cores with FP32
// accumulation: f16 / bf16 by mma.sync m16n8k16; f32 by m16n8k8 on TF32 inputs, each element
// rounded to TF32 (SDDMM_MATH_MODE_TF32) or split into a TF32 big and small part whose products
// small·big + big·small + big·big make three mma (SDDMM_MATH_MODE_TF32X3). The tile's rows of A and
// of B are staged through shared memory by cp.async, SD_TC_K_BYTES of K a stage (32 halves or 16
// floats), SD_TC_STAGES stages in flight; sixteen warps of 32 × 32. A stage's rows and the
// ldmatrix addresses are the same bytes for both widths: ldmatrix's 8 × 8 matrices of 16-bit
// elements are, read as 32-bit words, the 8 × 4 matrices of m16n8k8's TF32 fragments. Then the
// tile goes to shared memory and its nonzeros are written from it: the plan's `starts` give, for
// every row i and column tile t, the first entry of row i in columns [t·SD_TC_N, (t + 1)·SD_TC_N)
// (rows sorted by column, so each row's entries in the tile are consecutive), and the block's
// threads take the tile's entries in that order, consecutive threads consecutive entries. `tiles`
// lists the (row tile, column tile) pairs that hold entries. Rows of A and B are row-major with K,
// the leading dimensions and both base addresses multiples of 16 bytes.
// At the widths SDDMM is used with, a tile has few products per instruction that is not an mma
// (staging, finding entries, writing them), and a chain of dependent latencies before its first mma
// (the tile's coordinates, its rows' starts, their scan), so: each thread's staged chunks are fixed
// (their rows and sources computed once); the tile's first SD_TC_EARLY entries get their rows from
// a table the rows fill (not a search) and their columns copied to shared memory by cp.async during
// the products, so that no thread waits for them before its mma; a grid of every tile needs no list;
// and two blocks share a multiprocessor.
#define SD_TC_M 128
#define SD_TC_N 128
#define SD_TC_K_BYTES 64
#define SD_TC_STAGES 3
#define SD_TC_THREADS 512
#define SD_TC_EARLY 1024    // the tile's first entries, whose rows and columns are found before the products
#define SD_TC_ROW_BYTES 80  // bytes per staged row: SD_TC_K_BYTES and 16 of padding (ldmatrix's eight
                            // rows fall in distinct bank groups)
#define SD_TC_C_STRIDE 136  // floats per row of the tile in shared memory

// Shared memory: the stages, then (reused after the last mma) the tile.
#define SD_TC_STAGE_BYTES ((SD_TC_M + SD_TC_N) * SD_TC_ROW_BYTES)
// 16-byte chunks of a stage, and how many each thread copies.
#define SD_TC_CHUNKS ((SD_TC_M + SD_TC_N) * (SD_TC_K_BYTES / 16))
#define SD_TC_THREAD_CHUNKS (SD_TC_CHUNKS / SD_TC_THREADS)

// The math of a tile kernel: 16-bit inputs, or f32 inputs in one of the TF32 modes (the values of
// sddmmMathMode).
#define SD_TC_HALF 0
#define SD_TC_TF32X3 1
#define SD_TC_TF32 2

// The chunks a thread stages, the same in every stage: chunk u is stage row
// threadIdx.x / (SD_TC_K_BYTES / 16) + u·SD_TC_CHUNK_ROWS (A's rows, then B's), 16 bytes at byte
// `part` of the stage's K; its source is NULL where the row lies outside the matrix.
#define SD_TC_CHUNK_ROWS (SD_TC_THREADS / (SD_TC_K_BYTES / 16))
struct sd_tc_chunks {
    const unsigned char* src[SD_TC_THREAD_CHUNKS];  // at byte `part` of the row
    unsigned dst;                                   // shared-memory address of chunk 0 in stage 0
    int part;
};

// A and B of `bytes`-byte elements, their leading dimensions in elements.
__device__ __forceinline__ void sd_tc_chunks_init(sd_tc_chunks& ch, const unsigned char* stages, int r0, int c0, int m,
                                                  int n, int bytes, const void* A, long long lda, const void* B,
                                                  long long ldb) {
    const int first_row = threadIdx.x / (SD_TC_K_BYTES / 16);
    ch.part = (threadIdx.x % (SD_TC_K_BYTES / 16)) * 16;
    ch.dst = sgpu_smem_address(stages + first_row * SD_TC_ROW_BYTES + ch.part);
    const unsigned char* a = (const unsigned char*)A + ch.part;
    const unsigned char* b = (const unsigned char*)B + ch.part;
#pragma unroll
    for (int u = 0; u < SD_TC_THREAD_CHUNKS; ++u) {
        int row = first_row + u * SD_TC_CHUNK_ROWS;
        if (row < SD_TC_M)
            ch.src[u] = r0 + row < m ? a + (long long)(r0 + row) * lda * bytes : nullptr;
        else
            ch.src[u] = c0 + row - SD_TC_M < n ? b + (long long)(c0 + row - SD_TC_M) * ldb * bytes : nullptr;
    }
}

// K bytes [kc, kc + SD_TC_K_BYTES) into stage `stage` (K has k_bytes); chunks outside the matrices
// are zeros.
__device__ __forceinline__ void sd_tc_stage(const sd_tc_chunks& ch, int stage, int kc, int k_bytes) {
    bool k_inside = kc + ch.part < k_bytes;
#pragma unroll
    for (int u = 0; u < SD_TC_THREAD_CHUNKS; ++u) {
        unsigned dst = ch.dst + stage * SD_TC_STAGE_BYTES + u * SD_TC_CHUNK_ROWS * SD_TC_ROW_BYTES;
        if (ch.src[u] && k_inside) sgpu_cp_async16(dst, ch.src[u] + kc);
        else sgpu_st_shared16(dst, 0, 0, 0, 0);
    }
}

// The tile row holding position p of the tile's entries: the last r with offset[r] <= p (rows
// without entries in the tile share their offset with the next row and are passed over).
__device__ __forceinline__ int sd_tc_row_of(const int* offset, int p) {
    int lo = 0, hi = SD_TC_M - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (offset[mid] <= p) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// TF32 of FP32 bits rounded to nearest, ties away from zero, NaN kept NaN (adding half a TF32 unit
// to the bits, as sgpu_tf32_split's big part does, makes the NaN 0x7fffffff that CUDA's invalid
// operations produce -0; 3xTF32 keeps it through the small part).
__device__ __forceinline__ unsigned sd_tf32_round(unsigned x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(x)));
    return r;
}

// acc += the products of one 16-element (16-bit) or 8-element (TF32) step of K, from fragments as
// ldmatrix loaded them.
template <int TY, int MATH>
__device__ __forceinline__ void sd_tc_products(float (&acc)[2][4][4], unsigned (&fa)[2][4], unsigned (&fb)[4][2]) {
    if (MATH == SD_TC_HALF) {
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y) sgpu_mma_16816<TY == 3>(acc[x][y], fa[x], fb[y]);
    } else if (MATH == SD_TC_TF32) {
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int e = 0; e < 4; ++e) fa[x][e] = sd_tf32_round(fa[x][e]);
#pragma unroll
        for (int y = 0; y < 4; ++y)
#pragma unroll
            for (int e = 0; e < 2; ++e) fb[y][e] = sd_tf32_round(fb[y][e]);
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y) sgpu_mma_1688(acc[x][y], fa[x], fb[y]);
    } else {
        unsigned a_big[2][4], a_small[2][4], b_big[4][2], b_small[4][2];
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int e = 0; e < 4; ++e) sgpu_tf32_split(__uint_as_float(fa[x][e]), a_big[x][e], a_small[x][e]);
#pragma unroll
        for (int y = 0; y < 4; ++y)
#pragma unroll
            for (int e = 0; e < 2; ++e) sgpu_tf32_split(__uint_as_float(fb[y][e]), b_big[y][e], b_small[y][e]);
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y) {
                sgpu_mma_1688(acc[x][y], a_small[x], b_big[y]);
                sgpu_mma_1688(acc[x][y], a_big[x], b_small[y]);
                sgpu_mma_1688(acc[x][y], a_big[x], b_big[y]);
            }
    }
}

template <int TY, int MATH>
__device__ void sddmm_tc_tiles(int m, int n, int k, float alpha, const typename sd_type<TY>::elem* A, long long lda,
                               const typename sd_type<TY>::elem* B, long long ldb,
                               const typename sd_type<TY>::elem* s, const int* col_ind, const int* starts,
                               int column_tiles, const int2* tiles, typename sd_type<TY>::elem* out) {
    const int bytes = sizeof(typename sd_type<TY>::elem);
    extern __shared__ __align__(16) unsigned char sd_tc_shared[];
    unsigned char* stages = sd_tc_shared;
    float* tile = (float*)sd_tc_shared;
    __shared__ int row_first[SD_TC_M];       // each row's first entry in the tile's columns
    __shared__ int row_offset[SD_TC_M + 1];  // exclusive scan of the rows' entry counts
    __shared__ int warp_total[SD_TC_M / 32];
    __shared__ unsigned char early_row[SD_TC_EARLY];  // the row of each of the first entries
    __shared__ int early_col[SD_TC_EARLY];            // and its column

    // Without a list, the grid is every tile: x the column tile, y the row tile.
    const int2 t = tiles ? tiles[blockIdx.x] : make_int2(blockIdx.y, blockIdx.x);
    const int r0 = t.x * SD_TC_M, c0 = t.y * SD_TC_N;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp >> 2, wn = warp & 3;  // the warp's 32 rows and 32 columns of the tile
    const int k_bytes = k * bytes;
    const int chunks = (k_bytes + SD_TC_K_BYTES - 1) / SD_TC_K_BYTES;

    sd_tc_chunks ch;
    sd_tc_chunks_init(ch, stages, r0, c0, m, n, bytes, A, lda, B, ldb);
#pragma unroll
    for (int c = 0; c < SD_TC_STAGES - 1; ++c) {
        if (c < chunks) sd_tc_stage(ch, c, c * SD_TC_K_BYTES, k_bytes);
        sgpu_cp_async_commit();
    }

    // The rows' entries in the tile, while the first stages load: counts, then their scan.
    int inclusive = 0;
    if (threadIdx.x < SD_TC_M) {
        int first = 0, count = 0;
        if (r0 + threadIdx.x < m) {
            const int* at = starts + (long long)(r0 + threadIdx.x) * (column_tiles + 1) + t.y;
            first = at[0];
            count = at[1] - first;
        }
        row_first[threadIdx.x] = first;
        inclusive = sd_warp_inclusive_sum(count);
        if (lane == 31) warp_total[warp] = inclusive;
    }
    __syncthreads();
    if (threadIdx.x < SD_TC_M) {
        for (int w = 0; w < warp; ++w) inclusive += warp_total[w];
        row_offset[threadIdx.x + 1] = inclusive;
        if (threadIdx.x == 0) row_offset[0] = 0;
    }
    __syncthreads();
    const int total = row_offset[SD_TC_M];
    const int early = total < SD_TC_EARLY ? total : SD_TC_EARLY;

    // The first entries: each row marks its own, then each thread starts copying the columns of
    // two of them.
    if (threadIdx.x < SD_TC_M) {
        int end = row_offset[threadIdx.x + 1] < early ? row_offset[threadIdx.x + 1] : early;
        for (int p = row_offset[threadIdx.x]; p < end; ++p) early_row[p] = (unsigned char)threadIdx.x;
    }
    __syncthreads();
#pragma unroll
    for (int p = threadIdx.x; p < SD_TC_EARLY; p += SD_TC_THREADS)
        if (p < early) {
            int r = early_row[p];
            sgpu_cp_async4(sgpu_smem_address(early_col + p), col_ind + row_first[r] + (p - row_offset[r]), 4);
        }
    sgpu_cp_async_commit();

    float acc[2][4][4];
#pragma unroll
    for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[x][y][e] = 0.f;

    for (int c = 0; c < chunks; ++c) {
        sgpu_cp_async_wait<SD_TC_STAGES - 2>();
        __syncthreads();  // chunk c is in; every warp is done with the stage refilled next
        int ahead = c + SD_TC_STAGES - 1;
        if (ahead < chunks) sd_tc_stage(ch, ahead % SD_TC_STAGES, ahead * SD_TC_K_BYTES, k_bytes);
        sgpu_cp_async_commit();
        const unsigned char* stage = stages + (c % SD_TC_STAGES) * SD_TC_STAGE_BYTES;
        // Two steps of K a stage: 16 halves (m16n8k16) or 8 floats (m16n8k8), 32 bytes each.
#pragma unroll
        for (int kb = 0; kb < SD_TC_K_BYTES; kb += 32) {
            unsigned fa[2][4], fb[4][2];
#pragma unroll
            for (int x = 0; x < 2; ++x) {
                // Matrices (rows 0-7 | 8-15) × (the step's first | second 16 bytes): lane l gives
                // row l & 15 at byte (l >> 4)·16.
                int row = wm * 32 + x * 16 + (lane & 15);
                sgpu_ldmatrix_x4<false>(fa[x], sgpu_smem_address(stage + row * SD_TC_ROW_BYTES + kb + (lane >> 4) * 16));
            }
#pragma unroll
            for (int y = 0; y < 4; y += 2) {
                // B's rows are the mma's columns, K contiguous: matrices (n 0-7, first 16 bytes), (n
                // 0-7, second), (n 8-15, first), (n 8-15, second) are b0, b1 of column tiles y and y + 1.
                int q = lane >> 3;
                int row = SD_TC_M + wn * 32 + y * 8 + (q >> 1) * 8 + (lane & 7);
                unsigned r[4];
                sgpu_ldmatrix_x4<false>(r, sgpu_smem_address(stage + row * SD_TC_ROW_BYTES + kb + (q & 1) * 16));
                fb[y][0] = r[0];
                fb[y][1] = r[1];
                fb[y + 1][0] = r[2];
                fb[y + 1][1] = r[3];
            }
            sd_tc_products<TY, MATH>(acc, fa, fb);
        }
    }
    sgpu_cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stages: the tile takes their place

#pragma unroll
    for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y) {
            int row = wm * 32 + x * 16 + (lane >> 2), col = wn * 32 + y * 8 + 2 * (lane & 3);
            *(float2*)(tile + row * SD_TC_C_STRIDE + col) = make_float2(acc[x][y][0], acc[x][y][1]);
            *(float2*)(tile + (row + 8) * SD_TC_C_STRIDE + col) = make_float2(acc[x][y][2], acc[x][y][3]);
        }
    __syncthreads();

    // (α·S[e])·dot, in the order the other kernels use.
#pragma unroll
    for (int p = threadIdx.x; p < SD_TC_EARLY; p += SD_TC_THREADS)
        if (p < early) {
            int r = early_row[p];
            int e = row_first[r] + (p - row_offset[r]);
            out[e] = sd_finish<TY>(alpha, s, e, tile[r * SD_TC_C_STRIDE + early_col[p] - c0]);
        }
    for (int p = SD_TC_EARLY + threadIdx.x; p < total; p += SD_TC_THREADS) {
        int r = sd_tc_row_of(row_offset, p);
        int e = row_first[r] + (p - row_offset[r]);
        out[e] = sd_finish<TY>(alpha, s, e, tile[r * SD_TC_C_STRIDE + col_ind[e] - c0]);
    }
}

#define SD_TC(NAME, TY, MATH)                                                                                 \
    extern "C" __global__ void __launch_bounds__(SD_TC_THREADS, 2) NAME(                                      \
        int m, int n, int k, float alpha, const sd_type<TY>::elem* A, long long lda, const sd_type<TY>::elem* B, \
        long long ldb, const sd_type<TY>::elem* s, const int* col_ind, const int* starts, int column_tiles,    \
        const int2* tiles, sd_type<TY>::elem* out) {                                                          \
        sddmm_tc_tiles<TY, MATH>(m, n, k, alpha, A, lda, B, ldb, s, col_ind, starts, column_tiles, tiles, out);  \
    }
SD_TC(sddmm_tc_tiles_f16, 2, SD_TC_HALF)
SD_TC(sddmm_tc_tiles_bf16, 3, SD_TC_HALF)
SD_TC(sddmm_tc_tiles_f32_tf32, 0, SD_TC_TF32)
SD_TC(sddmm_tc_tiles_f32_3xtf32, 0, SD_TC_TF32X3)

// ---------------------------------------------------------------------------------------------
// The tiled algorithm on CUDA cores (a plan whose rows are sorted by column)
// ---------------------------------------------------------------------------------------------

// A warp computes one SD_BT × SD_BT tile of A·Bᵀ densely, for patterns whose entries cluster in such
// tiles (blocks, bands): the tile's 16 rows of A and 16 rows of B are read once a tile instead of two
// rows an entry, and each element loaded from shared memory serves several products. The rows are
// staged by cp.async, 128 bytes of each row a stage (SD_BT_STAGES stages), each row padded by one 16-byte chunk so that the rows a load reads fall in distinct banks. Lane
// (r, q) = (lane / 4, lane % 4) accumulates the products of rows r and r + 8 with columns q, q + 4,
// q + 8, q + 12, along K in order (as the reference does), 16 bytes of K a load. The finished tile
// goes to shared memory and its entries are written from it, two rows a pass.
// `records` holds SD_BT_WORDS words a tile: its row tile and column tile, two unused words, then
// for each of its 16 rows the first and the last + 1 entry of the row in the tile's columns (the
// rows sorted by column, so each row's entries in a tile are consecutive), row tile by row tile.
// 16-bit types are converted to FP32 as they are loaded from shared memory.
// Rows of A and B are row-major with K; K, the leading dimensions and both base addresses are
// multiples of 16 bytes.
#define SD_BT 16
#define SD_BT_WARPS 4
#define SD_BT_STAGES 2
#define SD_BT_WORDS 36

template <int TY>
__device__ void sddmm_block_tiles(int m, int n, int k, typename sd_type<TY>::comp alpha,
                                  const typename sd_type<TY>::elem* A, long long lda,
                                  const typename sd_type<TY>::elem* B, long long ldb,
                                  const typename sd_type<TY>::elem* s, const int* col_ind, const int* records,
                                  int tiles, typename sd_type<TY>::elem* out) {
    typedef typename sd_type<TY>::comp comp;
    typedef typename sd_type<TY>::elem elem;
    constexpr int VEC = 16 / (int)sizeof(elem);  // elements of a 16-byte chunk
    constexpr int KC = 8 * VEC;                  // K of a stage: 128 bytes of a row
    constexpr int ROW = KC + VEC;                // elements of a staged row, padding included
    constexpr int STAGE = 2 * SD_BT * ROW;       // A's 16 rows, then B's
    constexpr int C_ROW = SD_BT + 1;             // elements of a row of the finished tile
    static_assert(SD_BT * C_ROW * sizeof(comp) <= STAGE * sizeof(elem),
                  "the finished tile takes the first stage's place");
    extern __shared__ __align__(16) unsigned char sd_bt_shared[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tile = blockIdx.x * SD_BT_WARPS + warp;
    if (tile >= tiles) return;  // no barrier below spans more than a warp
    elem* stages = (elem*)sd_bt_shared + warp * (SD_BT_STAGES * STAGE);
    const int* record = records + (long long)tile * SD_BT_WORDS;
    // Lane l < 16 holds the first entry of row l of the tile, lane 16 + l the end of row l.
    const int bounds = record[4 + lane];
    const int r0 = record[0] * SD_BT, c0 = record[1] * SD_BT;

    // The chunks a lane stages, the same in every stage: staged row (lane / 8) + 4u (A's rows 0-15,
    // then B's), the 16 bytes at K offset `part` of the stage's 128; NULL outside the matrix.
    const int part = (lane & 7) * VEC;
    const elem* src[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        int row = (lane >> 3) + 4 * u;
        if (row < SD_BT) src[u] = r0 + row < m ? A + (long long)(r0 + row) * lda + part : nullptr;
        else src[u] = c0 + row - SD_BT < n ? B + (long long)(c0 + row - SD_BT) * ldb + part : nullptr;
    }
    const unsigned dst = sgpu_smem_address(stages + (lane >> 3) * ROW + part);
    const int chunks = (k + KC - 1) / KC;
    auto stage_chunk = [&](int c) {
        if (c < chunks) {
            const int kc = c * KC;
            const bool inside = kc + part < k;
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                unsigned to = dst + ((c % SD_BT_STAGES) * STAGE + u * 4 * ROW) * (int)sizeof(elem);
                if (src[u] && inside) sgpu_cp_async16(to, src[u] + kc);
                else sgpu_st_shared16(to, 0, 0, 0, 0);
            }
        }
        sgpu_cp_async_commit();
    };
#pragma unroll
    for (int c = 0; c < SD_BT_STAGES - 1; ++c) stage_chunk(c);

    const int r = lane >> 2, q = lane & 3;
    comp acc[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[h][j] = 0;
    for (int c = 0; c < chunks; ++c) {
        stage_chunk(c + SD_BT_STAGES - 1);
        sgpu_cp_async_wait<SD_BT_STAGES - 1>();
        __syncwarp();  // chunk c is in for every lane
        const elem* stage = stages + (c % SD_BT_STAGES) * STAGE;
#pragma unroll
        for (int kk = 0; kk < KC; kk += VEC) {
            comp a[2][VEC], b[4][VEC];
            sd_load_vec<TY, VEC>(stage + r * ROW + kk, a[0]);
            sd_load_vec<TY, VEC>(stage + (r + 8) * ROW + kk, a[1]);
#pragma unroll
            for (int j = 0; j < 4; ++j) sd_load_vec<TY, VEC>(stage + (SD_BT + q + 4 * j) * ROW + kk, b[j]);
#pragma unroll
            for (int v = 0; v < VEC; ++v)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[h][j] += a[h][v] * b[j][v];
        }
        __syncwarp();  // every lane is done with the stage refilled next
    }
    sgpu_cp_async_wait<0>();
    __syncwarp();

    comp* tile_c = (comp*)stages;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) tile_c[(r + 8 * h) * C_ROW + q + 4 * j] = acc[h][j];
    __syncwarp();
    // (α·S[e])·dot, in the order the other kernels use; lanes 0-15 take an even row, 16-31 the odd.
#pragma unroll
    for (int pass = 0; pass < SD_BT / 2; ++pass) {
        const int row = 2 * pass + (lane >> 4);
        const int e = __shfl_sync(0xffffffffu, bounds, row) + (lane & 15);
        const int end = __shfl_sync(0xffffffffu, bounds, SD_BT + row);
        if (e < end) out[e] = sd_finish<TY>(alpha, s, e, tile_c[row * C_ROW + col_ind[e] - c0]);
    }
}

#define SD_BT_KERNEL(SUFFIX, TY)                                                                               \
    extern "C" __global__ void __launch_bounds__(SD_BT_WARPS * 32) sddmm_block_tiles_##SUFFIX(                 \
        int m, int n, int k, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, long long lda,               \
        const sd_type<TY>::elem* B, long long ldb, const sd_type<TY>::elem* s, const int* col_ind,             \
        const int* records, int tiles, sd_type<TY>::elem* out) {                                               \
        sddmm_block_tiles<TY>(m, n, k, alpha, A, lda, B, ldb, s, col_ind, records, tiles, out);                \
    }
SD_BT_KERNEL(f32, 0)
SD_BT_KERNEL(f64, 1)
SD_BT_KERNEL(f16, 2)
SD_BT_KERNEL(bf16, 3)

// ---------------------------------------------------------------------------------------------
// The tiled algorithm with B's rows in shared memory (a plan whose rows are sorted by column)
// ---------------------------------------------------------------------------------------------

// Where S is dense and spread over its columns (random S at density 5e-2), each row of B is read by
// many rows of S, and the row-warp kernel reads it from L1 or L2 once for every entry (838 MB a
// call on 8192 × 8192 at density 5e-2, k = 64 in f32, with L2 66 % busy). Here a thread block keeps
// a panel of B, all rows of SD_TC_N · panel_tiles consecutive columns of S (as many as its shared
// memory holds), and takes the entries in those columns of one group of group_rows rows of S: B is
// read from L2 once a block (30 MB there), each row of A once a panel, and an entry's row of B comes
// from shared memory: as many bytes through the same SRAM as before, so this pays only where L2
// held the row-warp kernel back (docs/methods.md). The grid is (panels, row groups), one wave.
// Each group of G lanes takes a row (its row of A in registers, NV vectors of V elements a lane, as
// the row-warp kernel holds it) and the row's entries in the panel, G at a time: lane `member`
// reads the column of the group's entry `member`, the group gets them by shuffles, and the
// transposing reduction leaves entry `member`'s sum in lane `member`, which writes it. The 32 / G
// groups of a warp take neighbouring rows and iterate as long as any has entries left.
// `starts` holds for every row its first entry in each column tile of SD_TC_N columns and its end
// (column_tiles + 1 words a row: the tensor-core tiles' starts). Rows of A and B lie in whole
// 16-byte chunks (k · the element's size, the row strides and both base addresses multiples of 16).
// FULL where k = G·V·NV (the kernel launched with k of a whole number of vectors a lane, the widths
// it is tuned for): no vector lies past k, and the loop over a lane's vectors has no branch. Entries
// past a row's end, which a group's last iteration has, read nothing in f32 and f64 (their loads
// and products predicated); in f16 / bf16, whose eight conversions a vector made that a branch,
// they read the panel's first row (random S on an H200, docs/methods.md: FULL and the predicate
// together 5-18 % faster in f32 / f64 at density 5e-2, FULL alone in f16 / bf16 10-17 %, with the
// predicate there 26-29 % slower at k = 64 and 256).
template <int TY, int V, int NV, int G, bool FULL>
__device__ void sddmm_panels(int m, int n, int k, typename sd_type<TY>::comp alpha, const typename sd_type<TY>::elem* A,
                             int a_rs, const typename sd_type<TY>::elem* B, int b_rs,
                             const typename sd_type<TY>::elem* s, const int* col_ind, const int* starts,
                             int column_tiles, int panel_tiles, int group_rows, typename sd_type<TY>::elem* out) {
    typedef typename sd_type<TY>::comp comp;
    typedef typename sd_type<TY>::elem elem;
    constexpr int CHUNK = 16 / (int)sizeof(elem);  // elements of a 16-byte chunk
    extern __shared__ __align__(16) unsigned char sd_panel_shared[];
    elem* panel = (elem*)sd_panel_shared;
    const int t0 = blockIdx.x * panel_tiles;
    const int t1 = t0 + panel_tiles < column_tiles ? t0 + panel_tiles : column_tiles;
    const int c0 = t0 * SD_TC_N;
    const int cols = (t1 * SD_TC_N < n ? t1 * SD_TC_N : n) - c0;
    const int r_begin = blockIdx.y * group_rows;
    const int r_end = r_begin + group_rows < m ? r_begin + group_rows : m;
    if (r_begin >= r_end) return;

    const int row_chunks = k / CHUNK;
    const int chunks = cols * row_chunks;
    for (int q = threadIdx.x; q < chunks; q += blockDim.x) {
        const int c = q / row_chunks, part = (q - c * row_chunks) * CHUNK;
        sgpu_cp_async16(sgpu_smem_address(panel + c * k + part), B + (long long)(c0 + c) * b_rs + part);
    }
    sgpu_cp_async_commit();

    const int lane = threadIdx.x & 31;
    const int member = lane & (G - 1);
    const int first = lane - member;  // entry `first + u` of an iteration is the group's u-th
    const int groups = blockDim.x / G;
    const long long per_row = column_tiles + 1;
    for (int row0 = r_begin; row0 < r_end; row0 += groups) {
        const int row = row0 + threadIdx.x / G;
        int start = 0, end = 0;
        comp x[NV][V];
        if (row < r_end) {
            start = starts[row * per_row + t0];
            end = starts[row * per_row + t1];
        }
        sd_load_row<TY, V, NV, G>(A + (long long)(row < r_end ? row : r_begin) * a_rs, member, k, x);
        if (row0 == r_begin) {  // the first rows' loads are issued: now the panel
            sgpu_cp_async_wait<0>();
            __syncthreads();
        }
        // Past a row's end a lane's column is the panel's first (its row of B is in shared memory:
        // the 16-bit types read it) and nothing is written.
        int stored = start + member < end ? col_ind[start + member] - c0 : 0;
        for (int pos = start; __any_sync(0xffffffffu, pos < end); pos += G) {
            const int e = pos + member;
            const int col = stored;
            stored = e + G < end ? col_ind[e + G] - c0 : 0;
            const elem* b[G];
            comp sum[G];
#pragma unroll
            for (int u = 0; u < G; ++u) {
                b[u] = panel + __shfl_sync(0xffffffffu, col, first + u) * k;
                sum[u] = 0;
            }
#pragma unroll
            for (int i = 0; i < NV; ++i) {
                const int p = (member + i * G) * V;
                if (FULL || p < k) {
#pragma unroll
                    for (int u = 0; u < G; ++u) {
                        if (sizeof(elem) == 2 || pos + u < end) {
                            comp y[V];
                            sd_load_vec<TY, V>(b[u] + p, y);
#pragma unroll
                            for (int v = 0; v < V; ++v) sum[u] += x[i][v] * y[v];
                        }
                    }
                }
            }
            sd_transpose_sums<comp, G>(sum, member);
            if (e < end) out[e] = sd_finish<TY>(alpha, s, e, sum[0]);
        }
    }
}

#define SD_PANELS(SUFFIX, TY, V, G, NV, THREADS)                                                                \
    extern "C" __global__ void __launch_bounds__(THREADS) sddmm_panels_##SUFFIX##_g##G##_n##NV(                 \
        int m, int n, int k, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, int a_rs,                     \
        const sd_type<TY>::elem* B, int b_rs, const sd_type<TY>::elem* s, const int* col_ind, const int* starts, \
        int column_tiles, int panel_tiles, int group_rows, sd_type<TY>::elem* out) {                            \
        if (k == G * V * NV)                                                                                    \
            sddmm_panels<TY, V, NV, G, true>(m, n, k, alpha, A, a_rs, B, b_rs, s, col_ind, starts, column_tiles,  \
                                             panel_tiles, group_rows, out);                                     \
        else                                                                                                    \
            sddmm_panels<TY, V, NV, G, false>(m, n, k, alpha, A, a_rs, B, b_rs, s, col_ind, starts, column_tiles, \
                                              panel_tiles, group_rows, out);                                    \
    }
// The shapes of K = 64 on (the host's panel_shape): eight lanes a group, each an eighth of the row's
// 16-byte vectors (rounded up to a power of two). 1024 threads a block where a lane holds at most
// two vectors (the kernel then fits 64 registers), else 512 (the host's PANEL_WIDE_VECTORS).
SD_PANELS(f32, 0, 4, 8, 2, 1024)
SD_PANELS(f32, 0, 4, 8, 4, 512)
SD_PANELS(f32, 0, 4, 8, 8, 512)
SD_PANELS(f64, 1, 2, 8, 4, 512)
SD_PANELS(f64, 1, 2, 8, 8, 512)
SD_PANELS(f16, 2, 8, 8, 1, 1024)
SD_PANELS(f16, 2, 8, 8, 2, 1024)
SD_PANELS(f16, 2, 8, 8, 4, 512)
SD_PANELS(bf16, 3, 8, 8, 1, 1024)
SD_PANELS(bf16, 3, 8, 8, 2, 1024)
SD_PANELS(bf16, 3, 8, 8, 4, 512)

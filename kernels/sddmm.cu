// SDDMM (Costa et al., GPU-Dynamic): out[e] = alpha * S[e] * <A[i,:], B[j,:]> for every nonzero
// e = (i, j) of a CSR matrix S. Element (r, p) of A / B is at r * rs + p * cs, so one kernel serves
// both layouts and any leading dimension. 16-bit types are loaded as bit patterns and computed in f32.
//
// Entry points per type suffix (f32, f64, f16, bf16):
//   sddmm_coo_rows         CSR -> COO row expansion (GPU-Convert's conversion, Algorithm 4)
//   sddmm_coo_<ty>_v<V>    nnz-balanced COO kernel, V-wide vector loads (GPU-Convert / GPU-Dynamic)
//   sddmm_tile_schedule    groups each Ti-row band's nonzeros by Tj-column tile (counting sort)
//   sddmm_tiled_<ty>       GPU-Shared (Algorithm 2): A and B panels of a tile staged in shared memory
//                          Tk columns at a time, each thread accumulating its nonzeros' dot products
// Given an sd_check, sddmm_coo_rows and sddmm_tile_schedule also validate a caller's pattern that
// lies in device memory (see "Validation on the device" below), and the compute kernels after them
// fill out with NaN instead of reading through a pattern found invalid.

#define SD_TI 64        // rows of S per band (Ti), equal to the CPU's TILE_ROWS
#define SD_TJ 64        // columns of S per tile (Tj), equal to the CPU's TILE_COLS
#define SD_TK 32        // K slice staged in shared memory (Tk): two f64 panels fit in 48 KiB
#define SD_THREADS 256  // block size of the tiled and schedule kernels
#define SD_EPT 4        // nonzeros a thread of the tiled kernel accumulates at once (registers)

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
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = sd_type<TY>::load(u.e[v]);
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

// Whether colInd[e] = column lies in [base, n + base); notes it when not.
__device__ __forceinline__ bool sd_column_ok(sd_check* check, long long e, int column, int n, int base) {
    long long j = (long long)column - base;
    if (j >= 0 && j < n) return true;
    atomicMax(&check->column, sd_fault(e, column));
    return false;
}

// Called by every thread of every block of the validating kernel, at its end: the last block to
// finish reads the faults, the pattern's first and last row pointers, and records the verdict.
__device__ void sd_check_finish(sd_check* check, sd_report* report, int m, int n, long long nnz, const int* row_ptr,
                                int base) {
    __shared__ bool last_block;
    __threadfence();  // this thread's faults are visible to the device before its block counts as done
    __syncthreads();
    if (threadIdx.x == 0)
        last_block = atomicAdd(&check->blocks_done, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
    __syncthreads();
    if (!last_block || threadIdx.x != 0) return;
    __threadfence();  // the other blocks' faults are visible
    unsigned long long decrease = atomicExch(&check->decrease, 0ull);
    unsigned long long decrease_previous = atomicExch(&check->decrease_previous, 0ull);
    unsigned long long column = atomicExch(&check->column, 0ull);
    int first = row_ptr[0], last = row_ptr[m];
    bool invalid = first != base || (long long)last - base != nnz || decrease != 0 || column != 0;
    check->blocks_done = 0;
    check->invalid = invalid;
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

// Groups of G = 2^group_log2 lanes (inside one warp) each take an equal chunk of `chunk`
// consecutive nonzeros; the lanes of a group split K, V elements per load, and reduce with shuffles.
// V > 1 only when rows are contiguous (cs == 1) and every row start is V-aligned.
template <int TY, int V>
__device__ void sddmm_coo(long long nnz, int k, typename sd_type<TY>::comp alpha,
                          const typename sd_type<TY>::elem* A, long long a_rs, long long a_cs,
                          const typename sd_type<TY>::elem* B, long long b_rs, long long b_cs,
                          const typename sd_type<TY>::elem* s, const unsigned int* rows, const int* col_ind,
                          int base, int group_log2, long long chunk, typename sd_type<TY>::elem* out,
                          const sd_check* check) {
    typedef typename sd_type<TY>::comp comp;
    const int G = 1 << group_log2;
    long long thread = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int member = lane & (G - 1);
    unsigned mask = G == 32 ? 0xffffffffu : (((1u << G) - 1) << (lane & ~(G - 1)));
    long long group = thread >> group_log2;
    long long first = group * chunk;
    long long last = first + chunk < nnz ? first + chunk : nnz;
    if (check && check->invalid) {
        sd_fill_nan<TY>(out, first + member, G, last);
        return;
    }
    for (long long e = first; e < last; ++e) {
        long long i = rows[e], j = col_ind[e] - base;
        const typename sd_type<TY>::elem* a = A + i * a_rs;
        const typename sd_type<TY>::elem* b = B + j * b_rs;
        comp sum = 0;
        if (V > 1) {
#pragma unroll 4
            for (int p = member * V; p < k; p += G * V) {
                comp x[V], y[V];
                sd_load_vec<TY, V>(a + p, x);
                sd_load_vec<TY, V>(b + p, y);
#pragma unroll
                for (int v = 0; v < V; ++v) sum += x[v] * y[v];
            }
        } else {
#pragma unroll 4
            for (int p = member; p < k; p += G)
                sum += sd_type<TY>::load(a[p * a_cs]) * sd_type<TY>::load(b[p * b_cs]);
        }
        for (int offset = G >> 1; offset > 0; offset >>= 1) sum += __shfl_xor_sync(mask, sum, offset);
        if (member == 0) out[e] = sd_finish<TY>(alpha, s, e, sum);
    }
}

#define SD_COO(SUFFIX, TY, V)                                                                                      \
    extern "C" __global__ void sddmm_coo_##SUFFIX##_v##V(                                                          \
        long long nnz, int k, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, long long a_rs, long long a_cs, \
        const sd_type<TY>::elem* B, long long b_rs, long long b_cs, const sd_type<TY>::elem* s,                     \
        const unsigned int* rows, const int* col_ind, int base, int group_log2, long long chunk,                   \
        sd_type<TY>::elem* out, const sd_check* check) {                                                           \
        sddmm_coo<TY, V>(nnz, k, alpha, A, a_rs, a_cs, B, b_rs, b_cs, s, rows, col_ind, base, group_log2, chunk,   \
                         out, check);                                                                              \
    }
SD_COO(f32, 0, 1)
SD_COO(f32, 0, 2)
SD_COO(f32, 0, 4)
SD_COO(f64, 1, 1)
SD_COO(f64, 1, 2)
SD_COO(f16, 2, 1)
SD_COO(f16, 2, 2)
SD_COO(f16, 2, 4)
SD_COO(f16, 2, 8)
SD_COO(bf16, 3, 1)
SD_COO(bf16, 3, 2)
SD_COO(bf16, 3, 4)
SD_COO(bf16, 3, 8)

// ---------------------------------------------------------------------------------------------
// GPU-Shared
// ---------------------------------------------------------------------------------------------

// Exclusive block scan of two counters at once; returns the block totals through *total0/*total1.
__device__ __forceinline__ void sd_block_scan2(int v0, int v1, int* ex0, int* ex1, int* total0, int* total1) {
    __shared__ int warp_sums[SD_THREADS / 32][2];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int in0 = v0, in1 = v1;
    for (int offset = 1; offset < 32; offset <<= 1) {
        int t0 = __shfl_up_sync(0xffffffffu, in0, offset);
        int t1 = __shfl_up_sync(0xffffffffu, in1, offset);
        if (lane >= offset) {
            in0 += t0;
            in1 += t1;
        }
    }
    if (lane == 31) {
        warp_sums[warp][0] = in0;
        warp_sums[warp][1] = in1;
    }
    __syncthreads();
    int before0 = 0, before1 = 0, all0 = 0, all1 = 0;
    for (int w = 0; w < SD_THREADS / 32; ++w) {
        if (w < warp) {
            before0 += warp_sums[w][0];
            before1 += warp_sums[w][1];
        }
        all0 += warp_sums[w][0];
        all1 += warp_sums[w][1];
    }
    *ex0 = before0 + in0 - v0;
    *ex1 = before1 + in1 - v1;
    *total0 = all0;
    *total1 = all1;
    __syncthreads();  // warp_sums is reused by the next call
}

// The per-call preprocessing of the tiled kernel, on the GPU: for each band of Ti rows, a counting
// sort of its nonzeros by column tile (c / Tj). Band b's output lives at its own entry range
// [e0, e1) of `order` / `order_rs` and at [e0 + b, e1 + b + 1) of the tile arrays (a band has at
// most one tile per nonzero), so bands need no global coordination. `scratch` holds one histogram
// of ceil(n / Tj) counters per block.
//   order[e0 + g]     the entry (index into S) at position g of the band, tile after tile
//   order_rs[e0 + g]  its row within the band << 8 | its column within the tile
//   tile_cb / tile_start [e0 + b + t]  tile t's column block and first position
//   band_tiles[b]     the band's tile count
// With `check` (a pattern in device memory, not validated yet) it also validates the pattern: a band
// whose row pointers leave [0, nnz] or decrease gets no tiles, and columns outside [0, n) are left
// out of their band, so that nothing is read or written out of bounds whatever the pattern holds.
extern "C" __global__ void sddmm_tile_schedule(int m, int n, long long nnz, const int* row_ptr, const int* col_ind,
                                               int base, int* scratch, int* order, int* order_rs, int* tile_cb,
                                               int* tile_start, int* band_tiles, sd_check* check,
                                               sd_report* report) {
    __shared__ int carry[2];
    const int ncb = (n + SD_TJ - 1) / SD_TJ;
    const int bands = (m + SD_TI - 1) / SD_TI;
    int* hist = scratch + (long long)blockIdx.x * ncb;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int band = blockIdx.x; band < bands; band += gridDim.x) {
        int r0 = band * SD_TI;
        int rows = m - r0 < SD_TI ? m - r0 : SD_TI;
        if (check) {
            bool bad = false;
            if (threadIdx.x < rows) {
                int r = r0 + threadIdx.x;
                int start = row_ptr[r], next = row_ptr[r + 1];
                if (next < start) sd_note_decrease(check, r + 1, next, start);
                bad = next < start || (long long)start - base < 0 || (long long)next - base > nnz;
            }
            if (__syncthreads_or(bad)) {
                if (threadIdx.x == 0) band_tiles[band] = 0;
                continue;
            }
        }
        long long e0 = row_ptr[r0] - base;
        long long toff = e0 + band;
        for (int c = threadIdx.x; c < ncb; c += SD_THREADS) hist[c] = 0;
        if (threadIdx.x == 0) carry[0] = carry[1] = 0;
        __syncthreads();
        for (int r = warp; r < rows; r += SD_THREADS / 32)
            for (long long e = row_ptr[r0 + r] - base + lane; e < row_ptr[r0 + r + 1] - base; e += 32) {
                int column = col_ind[e];
                if (!check || sd_column_ok(check, e, column, n, base)) atomicAdd(&hist[(column - base) / SD_TJ], 1);
            }
        __syncthreads();
        for (int c0 = 0; c0 < ncb; c0 += SD_THREADS) {
            int c = c0 + threadIdx.x;
            int count = c < ncb ? hist[c] : 0;
            int ex_count, ex_tiles, total_count, total_tiles;
            sd_block_scan2(count, count > 0, &ex_count, &ex_tiles, &total_count, &total_tiles);
            if (count > 0) {
                tile_cb[toff + carry[1] + ex_tiles] = c;
                tile_start[toff + carry[1] + ex_tiles] = carry[0] + ex_count;
            }
            if (c < ncb) hist[c] = carry[0] + ex_count;
            __syncthreads();
            if (threadIdx.x == 0) {
                carry[0] += total_count;
                carry[1] += total_tiles;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) band_tiles[band] = carry[1];
        for (int r = warp; r < rows; r += SD_THREADS / 32)
            for (long long e = row_ptr[r0 + r] - base + lane; e < row_ptr[r0 + r + 1] - base; e += 32) {
                long long col = (long long)col_ind[e] - base;
                if (check && (col < 0 || col >= n)) continue;
                int pos = atomicAdd(&hist[col / SD_TJ], 1);
                order[e0 + pos] = (int)e;
                order_rs[e0 + pos] = (r << 8) | (int)(col % SD_TJ);
            }
        __syncthreads();
    }
    if (check) sd_check_finish(check, report, m, n, nnz, row_ptr, base);
}

// Stages the listed rows r0 + list[j] (j < count) x columns [k0, k0 + w) of a matrix into a shared
// panel (row list[j] of the panel), reading along whichever direction is contiguous in memory so the
// loads coalesce. Only rows / columns of S that hold a nonzero of the tile are listed, so a sparse
// tile stages a few rows instead of all Ti + Tj.
template <int TY>
__device__ __forceinline__ void sd_stage(typename sd_type<TY>::comp (*panel)[SD_TK + 1],
                                         const typename sd_type<TY>::elem* X, long long rs, long long cs, long long r0,
                                         const int* list, int count, int k0, int w) {
    for (int idx = threadIdx.x; idx < count * w; idx += SD_THREADS) {
        int j, p;
        if (cs == 1) {
            j = idx / w;
            p = idx % w;
        } else {
            p = idx / count;
            j = idx % count;
        }
        int r = list[j];
        panel[r][p] = sd_type<TY>::load(X[(r0 + r) * rs + (long long)(k0 + p) * cs]);
    }
}

// OR of a 64-bit word over the warp.
__device__ __forceinline__ unsigned long long sd_warp_or64(unsigned long long x) {
    for (int offset = 16; offset > 0; offset >>= 1) x |= __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

// Blocks (band, y): block y of a band of Ti rows of S takes the band's tiles y, y + gridDim.y, ...
// (several blocks per band, so a few long bands do not leave the GPU idle). For each tile (Tj
// columns with nonzeros), chunk of up to SD_THREADS * SD_EPT of its nonzeros and K slice of Tk:
// the A rows and B rows that the chunk's nonzeros use are staged in shared memory, then each thread
// accumulates the dot products of up to SD_EPT nonzeros in registers; results are written once,
// after the last slice (no atomics, deterministic).
template <int TY>
__device__ void sddmm_tiled(int m, int n, int k, long long nnz, typename sd_type<TY>::comp alpha,
                            const typename sd_type<TY>::elem* A, long long a_rs, long long a_cs,
                            const typename sd_type<TY>::elem* B, long long b_rs, long long b_cs,
                            const typename sd_type<TY>::elem* s, const int* row_ptr, int base, const int* order,
                            const int* order_rs, const int* tile_cb, const int* tile_start, const int* band_tiles,
                            typename sd_type<TY>::elem* out, const sd_check* check) {
    typedef typename sd_type<TY>::comp comp;
    if (check && check->invalid) {
        long long block = (long long)blockIdx.y * gridDim.x + blockIdx.x;
        sd_fill_nan<TY>(out, block * SD_THREADS + threadIdx.x, (long long)gridDim.x * gridDim.y * SD_THREADS, nnz);
        return;
    }
    __shared__ comp panel_a[SD_TI][SD_TK + 1];
    __shared__ comp panel_b[SD_TJ][SD_TK + 1];
    __shared__ unsigned long long used_rows, used_cols;  // bit r / c: row / column of the tile in use
    __shared__ int list_rows[SD_TI], list_cols[SD_TJ];
    int band = blockIdx.x;
    int r0 = band * SD_TI;
    if (r0 >= m) return;  // the one block launched for an empty S
    int rows = m - r0 < SD_TI ? m - r0 : SD_TI;
    long long e0 = row_ptr[r0] - base, e1 = row_ptr[r0 + rows] - base;
    long long toff = e0 + band;
    int tiles = band_tiles[band];
    int lane = threadIdx.x & 31;
    for (int t = blockIdx.y; t < tiles; t += gridDim.y) {
        int c0 = tile_cb[toff + t] * SD_TJ;
        long long g0 = e0 + tile_start[toff + t];
        long long g1 = t + 1 < tiles ? e0 + tile_start[toff + t + 1] : e1;
        for (long long chunk = g0; chunk < g1; chunk += SD_THREADS * SD_EPT) {
            comp acc[SD_EPT];
            int rs[SD_EPT];
            unsigned long long my_rows = 0, my_cols = 0;
#pragma unroll
            for (int q = 0; q < SD_EPT; ++q) {
                long long g = chunk + threadIdx.x + q * SD_THREADS;
                acc[q] = 0;
                rs[q] = g < g1 ? order_rs[g] : -1;
                if (rs[q] >= 0) {
                    my_rows |= 1ull << (rs[q] >> 8);
                    my_cols |= 1ull << (rs[q] & 255);
                }
            }
            __syncthreads();  // the previous chunk is done with the masks, lists and panels
            if (threadIdx.x == 0) used_rows = used_cols = 0;
            __syncthreads();
            my_rows = sd_warp_or64(my_rows);
            my_cols = sd_warp_or64(my_cols);
            if (lane == 0) {
                if (my_rows) atomicOr(&used_rows, my_rows);
                if (my_cols) atomicOr(&used_cols, my_cols);
            }
            __syncthreads();
            unsigned long long mask_rows = used_rows, mask_cols = used_cols;
            int count_rows = __popcll(mask_rows), count_cols = __popcll(mask_cols);
            if (threadIdx.x < SD_TI) {
                int r = threadIdx.x;
                if ((mask_rows >> r) & 1) list_rows[__popcll(mask_rows & ((1ull << r) - 1))] = r;
            } else if (threadIdx.x < SD_TI + SD_TJ) {
                int c = threadIdx.x - SD_TI;
                if ((mask_cols >> c) & 1) list_cols[__popcll(mask_cols & ((1ull << c) - 1))] = c;
            }
            for (int k0 = 0; k0 < k; k0 += SD_TK) {
                int w = k - k0 < SD_TK ? k - k0 : SD_TK;
                __syncthreads();  // the lists are written; the previous slice is done with the panels
                sd_stage<TY>(panel_a, A, a_rs, a_cs, r0, list_rows, count_rows, k0, w);
                sd_stage<TY>(panel_b, B, b_rs, b_cs, c0, list_cols, count_cols, k0, w);
                __syncthreads();
#pragma unroll
                for (int q = 0; q < SD_EPT; ++q) {
                    if (rs[q] >= 0) {
                        const comp* x = panel_a[rs[q] >> 8];
                        const comp* y = panel_b[rs[q] & 255];
                        comp sum = 0;
                        for (int p = 0; p < w; ++p) sum += x[p] * y[p];
                        acc[q] += sum;
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < SD_EPT; ++q) {
                if (rs[q] >= 0) {
                    long long e = order[chunk + threadIdx.x + q * SD_THREADS];
                    out[e] = sd_finish<TY>(alpha, s, e, acc[q]);
                }
            }
        }
    }
}

#define SD_TILED(SUFFIX, TY)                                                                                       \
    extern "C" __global__ void sddmm_tiled_##SUFFIX(                                                               \
        int m, int n, int k, long long nnz, sd_type<TY>::comp alpha, const sd_type<TY>::elem* A, long long a_rs,   \
        long long a_cs, const sd_type<TY>::elem* B, long long b_rs, long long b_cs, const sd_type<TY>::elem* s,     \
        const int* row_ptr, int base, const int* order, const int* order_rs, const int* tile_cb,                   \
        const int* tile_start, const int* band_tiles, sd_type<TY>::elem* out, const sd_check* check) {             \
        sddmm_tiled<TY>(m, n, k, nnz, alpha, A, a_rs, a_cs, B, b_rs, b_cs, s, row_ptr, base, order, order_rs,      \
                        tile_cb, tile_start, band_tiles, out, check);                                              \
    }
SD_TILED(f32, 0)
SD_TILED(f64, 1)
SD_TILED(f16, 2)
SD_TILED(bf16, 3)

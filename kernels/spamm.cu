// SpAMM after cuSpAMM (Liu et al.): the get-norm kernel, the multiplication kernel of Algorithm 2
// (SIMT, f32 / f64) and Algorithm 3 (tensor cores, f16 or bf16 in / f32 accumulation), and the counting
// kernels behind the statistics and the tau search. The CPU backend (src/spamm) is the specification:
// norms are summed in exactly its order and every skip decision is its f64 rule: skipped iff `nA * nB < tau`
// (a NaN product, from a block holding NaN or Inf, is never skipped).
//
// One module, although long: every kernel here reads the same norm maps with the same skip rule, and a
// product loads one module for its norms, lists, statistics and searches (NVRTC compiles and caches a
// module per source).
//
// Matrices are BLAS column-major; op(X) = X or X^T is applied by the tile loads. Block norm maps are
// column-major over blocks of op(X): norm(i, k) at [i + k * block_rows].

#define SPAMM_TILE 32        // rows / columns of C one thread block computes
#define SPAMM_CHUNK 32       // inner-dimension elements per shared-memory stage
#define SPAMM_WINDOW_MAX 256 // k blocks decided per pass of the bitmap phase (= threads per block)

// ---------------------------------------------------------------------------------------------
// get-norm

#define SPAMM_NORM_THREADS 256

// Blue's scaled sums of squares, as src/spamm/scaled_norm.rs (SquareSums) keeps them: the same
// powers of two (2^-511, 2^486, 2^537, 2^-538) and the same correctly rounded operations in the same
// order, so that both backends compute the same norms to the bit. Only f64 data can hold values whose
// squares underflow or overflow; for every other type the middle sum is the only one.
#define SPAMM_SQUARES_SMALL 1.4916681462400413e-154
#define SPAMM_SQUARES_BIG 1.997919072202235e+146
#define SPAMM_SCALE_SMALL 4.4989137945431964e+161
#define SPAMM_SCALE_BIG 1.1113793747425387e-162

struct SpammSquareSums {
    double small, middle, big;
};

__device__ __forceinline__ void spamm_add_square(SpammSquareSums& s, double x) {
    const double magnitude = fabs(x);
    if (magnitude > SPAMM_SQUARES_BIG) {
        const double y = __dmul_rn(x, SPAMM_SCALE_BIG);
        s.big = __fma_rn(y, y, s.big);
    } else if (magnitude < SPAMM_SQUARES_SMALL) {
        const double y = __dmul_rn(x, SPAMM_SCALE_SMALL);
        s.small = __fma_rn(y, y, s.small);
    } else {
        s.middle = __fma_rn(x, x, s.middle);
    }
}

__device__ double spamm_square_sums_norm(double small, double middle, double big) {
    const bool has_middle = middle > 0.0 || isnan(middle);
    if (big > 0.0) {
        if (has_middle) big = __dadd_rn(big, __dmul_rn(__dmul_rn(middle, SPAMM_SCALE_BIG), SPAMM_SCALE_BIG));
        return __ddiv_rn(__dsqrt_rn(big), SPAMM_SCALE_BIG);
    }
    if (small > 0.0) {
        if (!has_middle) return __ddiv_rn(__dsqrt_rn(small), SPAMM_SCALE_SMALL);
        const double root_middle = __dsqrt_rn(middle), root_small = __ddiv_rn(__dsqrt_rn(small), SPAMM_SCALE_SMALL);
        const bool small_larger = root_small > root_middle;
        const double low = small_larger ? root_middle : root_small, high = small_larger ? root_small : root_middle;
        const double ratio = __ddiv_rn(low, high);
        return __dsqrt_rn(__dmul_rn(__dmul_rn(high, high), __dadd_rn(1.0, __dmul_rn(ratio, ratio))));
    }
    return __dsqrt_rn(middle);
}

// Block norms in one pass over x, in the CPU's order (src/spamm, NormMap::of_col_major): each row's
// sum of squares over the block's columns in column order (fma in f64 from 0), the block's row sums
// added in row order from 0, then sqrt (all correctly rounded); for f64 data (SCALED) each sum is the
// three scaled parts above. Thread block (g, cb) covers stored column block cb and the row blocks
// g * R .. g * R + R - 1, R = max(1, 256 / bs): whole blocks, so the row sums stay in shared memory
// (R * bs of them, at most max(256, bs), times 3 when SCALED). A thread sums rows t, t + 256, ...
// (consecutive threads read consecutive rows: coalesced), 8 loads in flight before their fma; then
// one thread per row block adds its rows. The norm of stored block (rb, cb) goes to map0 at op
// position (rb, cb), or (cb, rb) when transpose0, and likewise to map1 when it is not null (two ops
// of one matrix, read once). Maps are column-major over their op's blocks. E converts T to its
// compute type (bf16: sgpu_half_elem<true>).
template <typename T, typename E = sgpu_elem<T>, bool SCALED = false>
__device__ void norm_blocks(int rows, int cols, const T* x, sgpu_i64 ld, int bs, double* map0, int transpose0,
                            double* map1, int transpose1) {
    extern __shared__ double row_sums[];
    const int per_group = bs < SPAMM_NORM_THREADS ? SPAMM_NORM_THREADS / bs : 1;
    const int group_rows = per_group * bs;
    double* row_small = row_sums + group_rows;
    double* row_big = row_sums + 2 * group_rows;
    const sgpu_i64 block_rows = (rows + bs - 1) / bs, block_cols = (cols + bs - 1) / bs;
    const sgpu_i64 r_base = (sgpu_i64)blockIdx.x * group_rows;
    for (sgpu_i64 cb = blockIdx.y; cb < block_cols; cb += gridDim.y) {
        const sgpu_i64 c0 = cb * bs, c1 = c0 + bs < cols ? c0 + bs : cols;
        for (int t = threadIdx.x; t < group_rows; t += blockDim.x) {
            const sgpu_i64 r = r_base + t;
            SpammSquareSums s = {0.0, 0.0, 0.0};
            if (r < rows) {
                const T* p = x + r + c0 * ld;
                sgpu_i64 c = c0;
                for (; c + 8 <= c1; c += 8, p += 8 * ld) {
                    double v[8];
#pragma unroll
                    for (int u = 0; u < 8; ++u) v[u] = (double)E::load(p[u * ld]);
#pragma unroll
                    for (int u = 0; u < 8; ++u) {
                        if (SCALED) spamm_add_square(s, v[u]);
                        else s.middle = __fma_rn(v[u], v[u], s.middle);
                    }
                }
                for (; c < c1; ++c, p += ld) {
                    double v = (double)E::load(*p);
                    if (SCALED) spamm_add_square(s, v);
                    else s.middle = __fma_rn(v, v, s.middle);
                }
            }
            row_sums[t] = s.middle;
            if (SCALED) {
                row_small[t] = s.small;
                row_big[t] = s.big;
            }
        }
        __syncthreads();
        if (threadIdx.x < per_group) {
            const sgpu_i64 rb = blockIdx.x * (sgpu_i64)per_group + threadIdx.x;
            if (rb < block_rows) {
                const int first = threadIdx.x * bs;
                const int count = rows - rb * bs < bs ? (int)(rows - rb * bs) : bs;
                double acc = 0.0, small = 0.0, big = 0.0;
                for (int i = 0; i < count; ++i) {
                    acc = __dadd_rn(acc, row_sums[first + i]);
                    if (SCALED) {
                        small = __dadd_rn(small, row_small[first + i]);
                        big = __dadd_rn(big, row_big[first + i]);
                    }
                }
                const double norm = SCALED ? spamm_square_sums_norm(small, acc, big) : __dsqrt_rn(acc);
                map0[transpose0 ? cb + rb * block_cols : rb + cb * block_rows] = norm;
                if (map1) map1[transpose1 ? cb + rb * block_cols : rb + cb * block_rows] = norm;
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(SPAMM_NORM_THREADS)
    spamm_norm_blocks_f32(int rows, int cols, const float* x, sgpu_i64 ld, int bs, double* map0, int transpose0,
                          double* map1, int transpose1) {
    norm_blocks<float>(rows, cols, x, ld, bs, map0, transpose0, map1, transpose1);
}
extern "C" __global__ void __launch_bounds__(SPAMM_NORM_THREADS)
    spamm_norm_blocks_f64(int rows, int cols, const double* x, sgpu_i64 ld, int bs, double* map0, int transpose0,
                          double* map1, int transpose1) {
    norm_blocks<double, sgpu_elem<double>, true>(rows, cols, x, ld, bs, map0, transpose0, map1, transpose1);
}
extern "C" __global__ void __launch_bounds__(SPAMM_NORM_THREADS)
    spamm_norm_blocks_f16(int rows, int cols, const sgpu_f16* x, sgpu_i64 ld, int bs, double* map0, int transpose0,
                          double* map1, int transpose1) {
    norm_blocks<sgpu_f16>(rows, cols, x, ld, bs, map0, transpose0, map1, transpose1);
}
extern "C" __global__ void __launch_bounds__(SPAMM_NORM_THREADS)
    spamm_norm_blocks_bf16(int rows, int cols, const sgpu_bf16* x, sgpu_i64 ld, int bs, double* map0, int transpose0,
                           double* map1, int transpose1) {
    norm_blocks<sgpu_bf16, sgpu_half_elem<true>>(rows, cols, x, ld, bs, map0, transpose0, map1, transpose1);
}

// ---------------------------------------------------------------------------------------------
// Statistics and counting

// The statistics of a product in the CPU's order (src/spamm/mod.rs, BlockStats::totals), so that
// the bound a product reports is the CPU's to the bit and equals what the tau search for a bound
// evaluates: one thread block per column j of C blocks, one thread per row i counting the performed
// products of C block (i, j) and summing its skipped nA * nB in increasing k (the loads of 8 k are
// issued before they are summed in order); the squares then go down the column in row order.
// column_sums[j] = that column's sum; totals[0] += performed products (zeroed by the caller);
// rows[i] += the performed products of block row i when rows is not null (zeroed by the caller: how
// a multi-device product splits C's rows by valid work).
extern "C" __global__ void __launch_bounds__(256)
    spamm_block_stats(int mb, int nb, int kb, const double* an, const double* bn, double tau, double* column_sums,
                      unsigned long long* totals, unsigned long long* rows) {
    __shared__ double squares[256];
    for (sgpu_i64 j = blockIdx.x; j < nb; j += gridDim.x) {
        const double* bj = bn + j * kb;
        double column = 0.0;
        unsigned long long performed = 0;
        for (int i0 = 0; i0 < mb; i0 += blockDim.x) {
            const int i = i0 + threadIdx.x;
            if (i < mb) {
                unsigned count = 0;
                double sum = 0.0;
                for (int k0 = 0; k0 < kb; k0 += 8) {
                    double x[8], y[8];
#pragma unroll
                    for (int q = 0; q < 8; ++q) {
                        x[q] = k0 + q < kb ? an[i + (sgpu_i64)(k0 + q) * mb] : 0.0;
                        y[q] = k0 + q < kb ? bj[k0 + q] : 0.0;
                    }
#pragma unroll
                    for (int q = 0; q < 8; ++q) {
                        if (k0 + q >= kb) break;
                        double p = __dmul_rn(x[q], y[q]);
                        if (!(p < tau)) ++count;
                        else sum = __dadd_rn(sum, p);
                    }
                }
                squares[threadIdx.x] = __dmul_rn(sum, sum);
                performed += count;
                if (rows != nullptr && count != 0) atomicAdd(rows + i, (unsigned long long)count);
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                const int in_chunk = mb - i0 < (int)blockDim.x ? mb - i0 : (int)blockDim.x;
                for (int t = 0; t < in_chunk; ++t) column = __dadd_rn(column, squares[t]);
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) column_sums[j] = column;
        for (int offset = 16; offset > 0; offset >>= 1) performed += __shfl_down_sync(0xffffffffu, performed, offset);
        if ((threadIdx.x & 31) == 0 && performed != 0) atomicAdd(totals, performed);
    }
}

// totals[1] = the bits of column_sums[0..nb) added left to right (the CPU's order). One block of 1024
// threads: each chunk is staged in shared memory by all, then summed by one.
extern "C" __global__ void __launch_bounds__(1024) spamm_stats_sum(int nb, const double* column_sums,
                                                                   unsigned long long* totals) {
    __shared__ double chunk[1024];
    double total = 0.0;
    for (int j0 = 0; j0 < nb; j0 += 1024) {
        if (j0 + (int)threadIdx.x < nb) chunk[threadIdx.x] = column_sums[j0 + threadIdx.x];
        __syncthreads();
        if (threadIdx.x == 0) {
            const int in_chunk = nb - j0 < 1024 ? nb - j0 : 1024;
            for (int t = 0; t < in_chunk; ++t) total = __dadd_rn(total, chunk[t]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) totals[1] = (unsigned long long)__double_as_longlong(total);
}

// ---------------------------------------------------------------------------------------------
// Multiplication (Algorithm 2): one thread block per 32 x 32 tile of one C block (i, j). A C block of
// b > 32 is covered by ceil(b/32)^2 tiles, each walking the same valid k; b < 32 clips the tile.

// The bitmap phase for the window of k blocks [w, w + blockDim.x): valid k compacted, in increasing
// order, into `list` (the paper's map_offset); returns how many. Ends with a barrier.
__device__ int spamm_valid_window(sgpu_i64 i, sgpu_i64 j, int mb, int kb, sgpu_i64 w, const double* an,
                                  const double* bn, double tau, int* list, int* warp_counts) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
    sgpu_i64 k = w + tid;
    bool valid = k < kb && !(__dmul_rn(an[i + k * mb], bn[k + j * kb]) < tau);
    unsigned ballot = __ballot_sync(0xffffffffu, valid);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int offset = 0, total = 0;
    for (int q = 0; q < warps; ++q) {
        offset += q < warp ? warp_counts[q] : 0;
        total += warp_counts[q];
    }
    if (valid) list[offset + __popc(ballot & ((1u << lane) - 1u))] = (int)k;
    __syncthreads();
    return total;
}

// Walks the inner-dimension chunks of the valid k of one window. Consecutive valid k form one
// contiguous inner range (on decay matrices usually a single run around the diagonal), cut into
// chunks of SPAMM_CHUNK; every thread holds the same cursor.
struct SpammChunks {
    const int* list;
    int count, next;
    sgpu_i64 pos, run_end, bs, k_total;

    __device__ bool advance(sgpu_i64& start, sgpu_i64& end) {
        if (pos >= run_end) {
            if (next >= count) return false;
            int first = list[next];
            while (next + 1 < count && list[next + 1] == list[next] + 1) ++next;
            pos = (sgpu_i64)first * bs;
            run_end = ((sgpu_i64)list[next] + 1) * bs;
            if (run_end > k_total) run_end = k_total;
            ++next;
        }
        start = pos;
        end = pos + SPAMM_CHUNK < run_end ? pos + SPAMM_CHUNK : run_end;
        pos = end;
        return true;
    }
};

// Element (r, p) of op(X) as the compute type; zero outside [0, rows) x [p_start, p_end).
template <typename T>
__device__ __forceinline__ typename sgpu_elem<T>::compute spamm_load(const T* x, SpammOperand op, sgpu_i64 r,
                                                                      sgpu_i64 rows, sgpu_i64 p, sgpu_i64 p_end) {
    if (r >= rows || p >= p_end) return 0;
    return sgpu_elem<T>::load(op.transposed ? x[p + r * op.ld] : x[r + p * op.ld]);
}

// Which element of a 32 x 32 tile (first index along the 32 rows of op(A) / columns of op(B), second
// along the chunk) the e-th load of a thread block fetches: consecutive threads walk the stored
// matrix's contiguous dimension, so the loads coalesce whatever the transpose.
__device__ __forceinline__ void spamm_tile_coord(int e, bool contiguous_first, int& outer, int& inner) {
    if (contiguous_first) { outer = e & 31; inner = e >> 5; }
    else { outer = e >> 5; inner = e & 31; }
}

// The C tile of thread block (tile_row, tile_col): its C block (i, j) and its rows / columns.
__device__ __forceinline__ bool spamm_tile(sgpu_i64 tile_row, sgpu_i64 tile_col, int m, int n, int bs,
                                           sgpu_i64& i, sgpu_i64& j, sgpu_i64& row0, sgpu_i64& row_end,
                                           sgpu_i64& col0, sgpu_i64& col_end) {
    sgpu_i64 tiles_per_block = (bs + SPAMM_TILE - 1) / SPAMM_TILE;
    i = tile_row / tiles_per_block;
    j = tile_col / tiles_per_block;
    row0 = i * bs + (tile_row % tiles_per_block) * SPAMM_TILE;
    col0 = j * bs + (tile_col % tiles_per_block) * SPAMM_TILE;
    row_end = row0 + SPAMM_TILE;
    if (row_end > (i + 1) * bs) row_end = (i + 1) * bs;
    if (row_end > m) row_end = m;
    col_end = col0 + SPAMM_TILE;
    if (col_end > (j + 1) * bs) col_end = (j + 1) * bs;
    if (col_end > n) col_end = n;
    return row0 < row_end && col0 < col_end;
}

// SIMT kernel, 256 threads: thread (tr, tc) accumulates C rows {tr, tr + 16} x columns {tc, tc + 16}
// of the tile in registers. Stages are double-buffered: the next chunk's global loads are issued into
// registers before the current chunk is multiplied from shared memory, and stored to the other buffer
// after, so one barrier per chunk separates the buffers.
template <typename T>
__device__ void spamm_multiply_simt(int m, int n, int k, int bs, typename sgpu_elem<T>::compute alpha,
                                    const T* a, SpammOperand op_a, const T* b, SpammOperand op_b,
                                    typename sgpu_elem<T>::compute beta, T* c, sgpu_i64 ldc, const double* an,
                                    const double* bn, double tau) {
    typedef typename sgpu_elem<T>::compute F;
    __shared__ F tile_a[2][SPAMM_CHUNK][SPAMM_TILE + 1];  // [p][row]
    __shared__ F tile_b[2][SPAMM_CHUNK][SPAMM_TILE + 1];  // [p][column]
    __shared__ int list[SPAMM_WINDOW_MAX];
    __shared__ int warp_counts[SPAMM_WINDOW_MAX / 32];

    int mb = (m + bs - 1) / bs, nb = (n + bs - 1) / bs, kb = (k + bs - 1) / bs;
    sgpu_i64 tiles_per_block = (bs + SPAMM_TILE - 1) / SPAMM_TILE;
    sgpu_i64 col_tiles = (sgpu_i64)nb * tiles_per_block;
    int tid = threadIdx.x, tr = tid & 15, tc = tid >> 4;
    // Loads of op(A) are contiguous along rows when A is not transposed; of op(B) along p when B is not.
    bool a_rows_contiguous = !op_a.transposed, b_cols_contiguous = op_b.transposed;

    for (sgpu_i64 tile_col = blockIdx.y; tile_col < col_tiles; tile_col += gridDim.y) {
        sgpu_i64 i, j, row0, row_end, col0, col_end;
        if (!spamm_tile(blockIdx.x, tile_col, m, n, bs, i, j, row0, row_end, col0, col_end)) continue;
        F acc[2][2] = {{0, 0}, {0, 0}};
        F next_a[4], next_b[4];

        for (sgpu_i64 w = 0; w < kb; w += blockDim.x) {
            int count = spamm_valid_window(i, j, mb, kb, w, an, bn, tau, list, warp_counts);
            SpammChunks chunks = {list, count, 0, 0, 0, bs, k};
            sgpu_i64 start, end;
            bool have = chunks.advance(start, end);
            int stage = 0;
            auto fetch = [&](sgpu_i64 s, sgpu_i64 e) {
                for (int q = 0; q < 4; ++q) {
                    int outer, inner;
                    spamm_tile_coord(tid + 256 * q, a_rows_contiguous, outer, inner);
                    next_a[q] = spamm_load(a, op_a, row0 + outer, row_end, s + inner, e);
                    spamm_tile_coord(tid + 256 * q, b_cols_contiguous, outer, inner);
                    // op(B)(p, col): for B^T the stored index is col + p * ld, i.e. the roles of
                    // "row" and "p" of spamm_load swap.
                    next_b[q] = op_b.transposed
                                    ? (col0 + outer < col_end && s + inner < e
                                           ? sgpu_elem<T>::load(b[(col0 + outer) + (s + inner) * op_b.ld])
                                           : (F)0)
                                    : (col0 + outer < col_end && s + inner < e
                                           ? sgpu_elem<T>::load(b[(s + inner) + (col0 + outer) * op_b.ld])
                                           : (F)0);
                }
            };
            auto store = [&](int buffer) {
                for (int q = 0; q < 4; ++q) {
                    int outer, inner;
                    spamm_tile_coord(tid + 256 * q, a_rows_contiguous, outer, inner);
                    tile_a[buffer][inner][outer] = next_a[q];
                    spamm_tile_coord(tid + 256 * q, b_cols_contiguous, outer, inner);
                    tile_b[buffer][inner][outer] = next_b[q];
                }
            };
            if (have) {
                fetch(start, end);
                store(0);
            }
            __syncthreads();
            while (have) {
                have = chunks.advance(start, end);
                if (have) fetch(start, end);
#pragma unroll 8
                for (int p = 0; p < SPAMM_CHUNK; ++p) {
                    F a0 = tile_a[stage][p][tr], a1 = tile_a[stage][p][tr + 16];
                    F b0 = tile_b[stage][p][tc], b1 = tile_b[stage][p][tc + 16];
                    acc[0][0] += a0 * b0;
                    acc[0][1] += a0 * b1;
                    acc[1][0] += a1 * b0;
                    acc[1][1] += a1 * b1;
                }
                if (have) store(stage ^ 1);
                stage ^= 1;
                __syncthreads();
            }
        }

        for (int x = 0; x < 2; ++x) {
            for (int y = 0; y < 2; ++y) {
                sgpu_i64 r = row0 + tr + 16 * x, col = col0 + tc + 16 * y;
                if (r < row_end && col < col_end) {
                    T* out = c + r + col * ldc;
                    F value = alpha * acc[x][y];
                    if (beta != (F)0) value += beta * sgpu_elem<T>::load(*out);
                    *out = sgpu_elem<T>::store(value);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) spamm_multiply_f32(int m, int n, int k, int bs, float alpha,
        const float* a, sgpu_i64 lda, int ta, const float* b, sgpu_i64 ldb, int tb, float beta, float* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    spamm_multiply_simt<float>(m, n, k, bs, alpha, a, SpammOperand{lda, ta}, b, SpammOperand{ldb, tb}, beta, c, ldc,
                               an, bn, tau);
}
extern "C" __global__ void __launch_bounds__(256) spamm_multiply_f64(int m, int n, int k, int bs, double alpha,
        const double* a, sgpu_i64 lda, int ta, const double* b, sgpu_i64 ldb, int tb, double beta, double* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    spamm_multiply_simt<double>(m, n, k, bs, alpha, a, SpammOperand{lda, ta}, b, SpammOperand{ldb, tb}, beta, c,
                                ldc, an, bn, tau);
}

// ---------------------------------------------------------------------------------------------
// Tensor cores (Algorithm 3): f16 (or bf16) inputs, f32 accumulation, 128 threads = 4 warps, warp
// (wm, wn) owning the 16 x 16 quarter of the 32 x 32 tile as two m16n8k16 accumulators. Shared tiles
// hold 16-bit patterns, op(A) as [row][p] and op(B) as [column][p], so every fragment register is one
// aligned 32-bit load of two consecutive p (the layout mma.sync's row.col operands expect).

#define SPAMM_HSTRIDE (SPAMM_CHUNK + 8)  // padded row of a shared 16-bit tile (bank spread, 4-byte aligned)

template <bool BF16>
__device__ void spamm_multiply_half(int m, int n, int k, int bs, float alpha, const sgpu_b16* a, sgpu_i64 lda, int ta,
                                    const sgpu_b16* b, sgpu_i64 ldb, int tb, float beta, sgpu_b16* c, sgpu_i64 ldc,
                                    const double* an, const double* bn, double tau) {
    __shared__ __align__(16) sgpu_b16 tile_a[2][SPAMM_TILE][SPAMM_HSTRIDE];  // [row][p]
    __shared__ __align__(16) sgpu_b16 tile_b[2][SPAMM_TILE][SPAMM_HSTRIDE];  // [column][p]
    __shared__ int list[SPAMM_WINDOW_MAX];
    __shared__ int warp_counts[SPAMM_WINDOW_MAX / 32];

    int mb = (m + bs - 1) / bs, nb = (n + bs - 1) / bs, kb = (k + bs - 1) / bs;
    sgpu_i64 tiles_per_block = (bs + SPAMM_TILE - 1) / SPAMM_TILE;
    sgpu_i64 col_tiles = (sgpu_i64)nb * tiles_per_block;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int wm = warp & 1, wn = warp >> 1, group = lane >> 2, quad = lane & 3;
    bool a_rows_contiguous = !ta, b_cols_contiguous = tb;

    for (sgpu_i64 tile_col = blockIdx.y; tile_col < col_tiles; tile_col += gridDim.y) {
        sgpu_i64 i, j, row0, row_end, col0, col_end;
        if (!spamm_tile(blockIdx.x, tile_col, m, n, bs, i, j, row0, row_end, col0, col_end)) continue;
        float acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
        sgpu_b16 next_a[8], next_b[8];

        for (sgpu_i64 w = 0; w < kb; w += blockDim.x) {
            int count = spamm_valid_window(i, j, mb, kb, w, an, bn, tau, list, warp_counts);
            SpammChunks chunks = {list, count, 0, 0, 0, bs, k};
            sgpu_i64 start, end;
            bool have = chunks.advance(start, end);
            int stage = 0;
            auto fetch = [&](sgpu_i64 s, sgpu_i64 e) {
                for (int q = 0; q < 8; ++q) {
                    int outer, inner;
                    spamm_tile_coord(tid + 128 * q, a_rows_contiguous, outer, inner);
                    sgpu_i64 r = row0 + outer, p = s + inner;
                    next_a[q] = (r < row_end && p < e) ? (ta ? a[p + r * lda] : a[r + p * lda]) : (sgpu_b16)0;
                    spamm_tile_coord(tid + 128 * q, b_cols_contiguous, outer, inner);
                    sgpu_i64 col = col0 + outer;
                    p = s + inner;
                    next_b[q] = (col < col_end && p < e) ? (tb ? b[col + p * ldb] : b[p + col * ldb]) : (sgpu_b16)0;
                }
            };
            auto store = [&](int buffer) {
                for (int q = 0; q < 8; ++q) {
                    int outer, inner;
                    spamm_tile_coord(tid + 128 * q, a_rows_contiguous, outer, inner);
                    tile_a[buffer][outer][inner] = next_a[q];
                    spamm_tile_coord(tid + 128 * q, b_cols_contiguous, outer, inner);
                    tile_b[buffer][outer][inner] = next_b[q];
                }
            };
            if (have) {
                fetch(start, end);
                store(0);
            }
            __syncthreads();
            while (have) {
                have = chunks.advance(start, end);
                if (have) fetch(start, end);
#pragma unroll
                for (int kk = 0; kk < SPAMM_CHUNK; kk += 16) {
                    unsigned fa[4], fb[2][2];
                    const sgpu_b16* arow = &tile_a[stage][wm * 16 + group][kk + quad * 2];
                    fa[0] = *(const unsigned*)arow;
                    fa[1] = *(const unsigned*)(arow + 8 * SPAMM_HSTRIDE);
                    fa[2] = *(const unsigned*)(arow + 8);
                    fa[3] = *(const unsigned*)(arow + 8 * SPAMM_HSTRIDE + 8);
                    for (int h = 0; h < 2; ++h) {
                        const sgpu_b16* bcol = &tile_b[stage][wn * 16 + h * 8 + group][kk + quad * 2];
                        fb[h][0] = *(const unsigned*)bcol;
                        fb[h][1] = *(const unsigned*)(bcol + 8);
                    }
                    sgpu_mma_16816<BF16>(acc[0], fa, fb[0]);
                    sgpu_mma_16816<BF16>(acc[1], fa, fb[1]);
                }
                if (have) store(stage ^ 1);
                stage ^= 1;
                __syncthreads();
            }
        }

        for (int h = 0; h < 2; ++h) {
            for (int q = 0; q < 4; ++q) {
                sgpu_i64 r = row0 + wm * 16 + group + (q >> 1) * 8;
                sgpu_i64 col = col0 + wn * 16 + h * 8 + quad * 2 + (q & 1);
                if (r < row_end && col < col_end)
                    spamm_store_c<sgpu_b16, float, sgpu_half_elem<BF16>>(c, ldc, r, col, alpha, acc[h][q], beta);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) spamm_multiply_f16(int m, int n, int k, int bs, float alpha,
        const sgpu_f16* a, sgpu_i64 lda, int ta, const sgpu_f16* b, sgpu_i64 ldb, int tb, float beta, sgpu_f16* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    spamm_multiply_half<false>(m, n, k, bs, alpha, a, lda, ta, b, ldb, tb, beta, c, ldc, an, bn, tau);
}
extern "C" __global__ void __launch_bounds__(128) spamm_multiply_bf16(int m, int n, int k, int bs, float alpha,
        const sgpu_bf16* a, sgpu_i64 lda, int ta, const sgpu_bf16* b, sgpu_i64 ldb, int tb, float beta, sgpu_bf16* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    spamm_multiply_half<true>(m, n, k, bs, alpha, a, lda, ta, b, ldb, tb, beta, c, ldc, an, bn, tau);
}

// ---------------------------------------------------------------------------------------------
// Work lists of the tile kernels (kernels/spamm_tiles.cuh): per tile of C, the k blocks any of its C
// blocks performs, each with the mask of those that do.

// The C blocks a tile [row0, row0 + tile_m) x [col0, col0 + tile_n) touches: [i0, i0 + ni) x [j0, j0 + nj).
__device__ __forceinline__ void spamm_tile_blocks(sgpu_i64 row0, sgpu_i64 col0, int tile_m, int tile_n, int m, int n,
                                                  int bs, int& i0, int& ni, int& j0, int& nj) {
    sgpu_i64 row_end = row0 + tile_m < m ? row0 + tile_m : m, col_end = col0 + tile_n < n ? col0 + tile_n : n;
    i0 = (int)(row0 / bs);
    ni = (int)((row_end - 1) / bs) - i0 + 1;
    j0 = (int)(col0 / bs);
    nj = (int)((col_end - 1) / bs) - j0 + 1;
}

// One thread block of 256 per tile (grid-stride): the tile's k blocks in windows of 256, one per
// thread, compacted in increasing order by a ballot scan. counts[t] = entries written at
// lists + t * kb. The launcher guarantees ni, nj <= 4 and kb < 65536 (the entry format). A's norms of
// a window (the tile's rows are 4 consecutive doubles per k) are staged through shared memory, so a
// warp reads whole sectors; the window's entries too, so that the list is written contiguously.
extern "C" __global__ void __launch_bounds__(256) spamm_tile_lists(int m, int n, int bs, int mb, int kb, int tile_m,
        int tile_n, const double* an, const double* bn, double tau, int* counts, unsigned* lists) {
    __shared__ int warp_counts[8];
    __shared__ double a_window[4][256];
    __shared__ unsigned entries[256];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    sgpu_i64 tile_rows = ((sgpu_i64)m + tile_m - 1) / tile_m;
    sgpu_i64 tiles = tile_rows * (((sgpu_i64)n + tile_n - 1) / tile_n);
    for (sgpu_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        int i0, ni, j0, nj;
        spamm_tile_blocks((t % tile_rows) * tile_m, (t / tile_rows) * tile_n, tile_m, tile_n, m, n, bs, i0, ni, j0, nj);
        unsigned* list = lists + t * kb;
        int total = 0;
        for (int w = 0; w < kb; w += 256) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                int e = tid + 256 * r, bi = e & 3, k = w + (e >> 2);
                a_window[bi][e >> 2] = bi < ni && k < kb ? an[(i0 + bi) + (sgpu_i64)k * mb] : 0.0;
            }
            __syncthreads();
            int k = w + tid;
            unsigned mask = 0;
            if (k < kb) {
                double nbk[4];
#pragma unroll
                for (int bj = 0; bj < 4; ++bj) nbk[bj] = bj < nj ? bn[k + (sgpu_i64)(j0 + bj) * kb] : 0.0;
#pragma unroll
                for (int bi = 0; bi < 4; ++bi) {
                    double na = a_window[bi][tid];
#pragma unroll
                    for (int bj = 0; bj < 4; ++bj)
                        if (bi < ni && bj < nj && !(__dmul_rn(na, nbk[bj]) < tau)) mask |= 1u << (bi * 4 + bj);
                }
            }
            unsigned ballot = __ballot_sync(0xffffffffu, mask != 0);
            if (lane == 0) warp_counts[warp] = __popc(ballot);
            __syncthreads();
            int offset = 0, window = 0;
            for (int q = 0; q < 8; ++q) {
                offset += q < warp ? warp_counts[q] : 0;
                window += warp_counts[q];
            }
            if (mask != 0) entries[offset + __popc(ballot & ((1u << lane) - 1u))] = ((unsigned)k << 16) | mask;
            __syncthreads();
            if (tid < window) list[total + tid] = entries[tid];
            total += window;
            __syncthreads();
        }
        if (tid == 0) counts[t] = total;
    }
}

// The launch order of the tiles (one block of 1024 threads), by `group_cols`:
// - 0: by decreasing work (a counting sort on 1024 buckets of the entry count, the heaviest bucket
//   first; order within a bucket is arbitrary and changes no result);
// - G > 0: grouped for the caches: the tile columns in groups of G, a group's tiles row by row (so
//   the tiles running at once share rows of op(A) and columns of op(B)); G = 1 is the natural
//   column-major order;
// - -S < 0: both: squares of S x S tiles by decreasing work (the same counting sort on the squares'
//   entry counts), a square's tiles row by row.
#define SPAMM_ORDER_BUCKETS 1024
// start[b] <- the sum of start[0 .. b) (every thread of the block calls it).
__device__ void spamm_order_exclusive_scan(int* start) {
    const int tid = threadIdx.x;
    __syncthreads();
    // Hillis-Steele on the inclusive sums.
    int mine = start[tid];
    for (int offset = 1; offset < SPAMM_ORDER_BUCKETS; offset <<= 1) {
        int add = tid >= offset ? start[tid - offset] : 0;
        __syncthreads();
        start[tid] += add;
        __syncthreads();
    }
    start[tid] -= mine;
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(1024) spamm_tile_order(int tiles, int tile_rows, int kb, int group_cols,
                                                                     const int* counts, unsigned* order) {
    __shared__ int start[SPAMM_ORDER_BUCKETS];
    const int tid = threadIdx.x, tile_cols = tiles / tile_rows;
    start[tid] = 0;
    if (group_cols > 0) {
        for (int p = tid; p < tiles; p += 1024) {
            const int group_tiles = group_cols * tile_rows;
            int group = p / group_tiles, within = p % group_tiles;
            int first_col = group * group_cols;
            int width = tile_cols - first_col < group_cols ? tile_cols - first_col : group_cols;
            int row = within / width, col = first_col + within % width;
            order[p] = (unsigned)(row + col * tile_rows);
        }
        return;
    }
    // Units of work: tiles, or squares of side x side tiles (the last row / column of squares may be
    // narrower). Bucket 0 holds the heaviest units.
    const int side = group_cols < 0 ? -group_cols : 1;
    const int unit_rows = (tile_rows + side - 1) / side, units = unit_rows * ((tile_cols + side - 1) / side);
    const long long most = (long long)side * side * kb + 1;
    struct Unit {
        int row0, rows, col0, cols;
        long long work;
    };
    auto unit = [&](int u) {
        Unit x;
        x.row0 = u % unit_rows * side;
        x.col0 = u / unit_rows * side;
        x.rows = tile_rows - x.row0 < side ? tile_rows - x.row0 : side;
        x.cols = tile_cols - x.col0 < side ? tile_cols - x.col0 : side;
        x.work = 0;
        for (int c = 0; c < x.cols; ++c)
            for (int r = 0; r < x.rows; ++r) x.work += counts[x.row0 + r + (x.col0 + c) * tile_rows];
        return x;
    };
    auto bucket = [&](long long work) { return SPAMM_ORDER_BUCKETS - 1 - (int)(work * SPAMM_ORDER_BUCKETS / most); };
    __syncthreads();
    for (int u = tid; u < units; u += 1024) {
        Unit x = unit(u);
        atomicAdd(&start[bucket(x.work)], x.rows * x.cols);
    }
    spamm_order_exclusive_scan(start);
    for (int u = tid; u < units; u += 1024) {
        Unit x = unit(u);
        int p = atomicAdd(&start[bucket(x.work)], x.rows * x.cols);
        for (int r = 0; r < x.rows; ++r)
            for (int c = 0; c < x.cols; ++c) order[p++] = (unsigned)(x.row0 + r + (x.col0 + c) * tile_rows);
    }
}

// =============================================================================================
// The tau searches (src/spamm/tune.rs): each iteration evaluates a set of candidate tau at once. The
// host only chooses the candidates; everything here reproduces the CPU's NormMapEvaluator exactly
// (counts, minima and maxima do not depend on order; the skipped sums follow the CPU's order).
// Bit patterns of non-negative doubles order as the values, so minima and maxima are integer atomics;
// a minimum is kept as the maximum of the complemented patterns, so that every accumulator starts at 0.
// =============================================================================================

#define SPAMM_TUNE_MAX_CANDIDATES 256  // tune::RATIO_CANDIDATES
#define SPAMM_TUNE_BOUND_CANDIDATES 16 // tune::BOUND_CANDIDATES

// Candidates by value (kernel parameters): `count` ascending tau, the slots after them repeat the last.
struct SpammTuneCandidates {
    int count;
    double tau[SPAMM_TUNE_MAX_CANDIDATES];
};

__device__ __forceinline__ unsigned long long spamm_bits(double x) {
    return (unsigned long long)__double_as_longlong(x);
}

__device__ __forceinline__ bool spamm_finite(double x) {
    return (spamm_bits(x) & 0x7ff0000000000000ULL) != 0x7ff0000000000000ULL;
}

// One compare-exchange step of a bitonic sort: pair (x, x + stride), x without the stride bit; blocks
// of `size` alternate ascending and descending, the last (size = padded) ascending.
__device__ __forceinline__ void spamm_bitonic_step(double* d, int x, int size, int stride) {
    int y = x + stride;
    double a = d[x], b = d[y];
    bool ascending = (x & size) == 0;
    if ((a > b) == ascending) {
        d[x] = b;
        d[y] = a;
    }
}

// Sorts two arrays of keys in shared memory ascending, `pa` and `pb` of them (powers of two), with
// the whole thread block: the steps of both networks side by side, one barrier per step; ends with a
// barrier (when there is anything to sort).
__device__ void spamm_bitonic_sort_pair(double* a, int pa, double* b, int pb) {
    const int largest = pa > pb ? pa : pb;
    for (int size = 2; size <= largest; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            const int steps_a = size <= pa ? pa / 2 : 0, steps_b = size <= pb ? pb / 2 : 0;
            for (int t = threadIdx.x; t < steps_a + steps_b; t += blockDim.x) {
                const int u = t < steps_a ? t : t - steps_a;
                spamm_bitonic_step(t < steps_a ? a : b, 2 * stride * (u / stride) + u % stride, size, stride);
            }
            __syncthreads();
        }
    }
}

// First position of a positive value in an ascending array of non-negative values (len when none).
__device__ __forceinline__ int spamm_first_positive(const double* v, int len) {
    int lo = 0, hi = len;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (v[mid] > 0.0) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

// Adds inner block k's share of ProductRange to summary = [max, flags, ~min, ~positive floor] (bit
// patterns, zero before): a and b are A's column k and B's row k, sorted.
__device__ void spamm_tune_extremes(const double* a, int mb, const double* b, int nb, unsigned long long* summary) {
    atomicMax(&summary[0], spamm_bits(__dmul_rn(a[mb - 1], b[nb - 1])));
    atomicMax(&summary[2], ~spamm_bits(__dmul_rn(a[0], b[0])));
    int pa = spamm_first_positive(a, mb), pb = spamm_first_positive(b, nb);
    if (pa < mb && pb < nb) atomicMax(&summary[3], ~spamm_bits(__dmul_rn(a[pa], b[pb])));
}

// Per inner block k (one thread block each): A's column k (an[i + k * mb]) and B's row k
// (bn[k + j * kb]) into shared memory (padded with +inf to pa, pb: powers of two), sorted, written to
// sorted_a[k * pa ...] and sorted_b[k * pb ...], and the block's extremes added to the summary. Bit 0
// of summary[1] is set where a norm is not finite.
extern "C" __global__ void spamm_tune_sort_pairs(int mb, int nb, int kb, const double* an, const double* bn,
                                                 double* sorted_a, int pa, double* sorted_b, int pb,
                                                 unsigned long long* summary) {
    extern __shared__ double keys[];
    double* ka = keys;
    double* kbk = keys + pa;
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    for (int k = blockIdx.x; k < kb; k += gridDim.x) {
        bool bad = false;
        for (int e = threadIdx.x; e < pa; e += blockDim.x) {
            double v = inf;
            if (e < mb) {
                v = an[e + (sgpu_i64)k * mb];
                bad |= !spamm_finite(v);
            }
            ka[e] = v;
        }
        for (int e = threadIdx.x; e < pb; e += blockDim.x) {
            double v = inf;
            if (e < nb) {
                v = bn[k + (sgpu_i64)e * kb];
                bad |= !spamm_finite(v);
            }
            kbk[e] = v;
        }
        if (bad) atomicOr(&summary[1], 1ULL);
        __syncthreads();
        spamm_bitonic_sort_pair(ka, pa, kbk, pb);
        for (int e = threadIdx.x; e < pa; e += blockDim.x) sorted_a[(sgpu_i64)k * pa + e] = ka[e];
        for (int e = threadIdx.x; e < pb; e += blockDim.x) sorted_b[(sgpu_i64)k * pb + e] = kbk[e];
        if (threadIdx.x == 0) spamm_tune_extremes(ka, mb, kbk, nb, summary);
        __syncthreads();
    }
}

// For segments too long for shared memory: segment s of a norm map (element e at
// src[s * segment_stride + e * element_stride], e < len) into dst[s * padded + e], padded with +inf;
// sets bit 0 of *flags where a norm is not finite. Then spamm_tune_sort_step, then spamm_tune_range.
extern "C" __global__ void spamm_tune_sort_load(const double* src, sgpu_i64 element_stride, sgpu_i64 segment_stride,
                                                int len, int segments, int padded, double* dst,
                                                unsigned long long* flags) {
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    sgpu_i64 total = (sgpu_i64)segments * padded;
    for (sgpu_i64 idx = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; idx < total;
         idx += (sgpu_i64)gridDim.x * blockDim.x) {
        sgpu_i64 s = idx / padded, e = idx % padded;
        double v = inf;
        if (e < len) {
            v = src[s * segment_stride + e * element_stride];
            if (!spamm_finite(v)) atomicOr(flags, 1ULL);
        }
        dst[idx] = v;
    }
}

// One bitonic step over every segment in global memory.
extern "C" __global__ void spamm_tune_sort_step(double* data, int segments, int padded, int size, int stride) {
    sgpu_i64 half = padded / 2, total = (sgpu_i64)segments * half;
    for (sgpu_i64 idx = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; idx < total;
         idx += (sgpu_i64)gridDim.x * blockDim.x) {
        int t = (int)(idx % half);
        spamm_bitonic_step(data + (idx / half) * padded, 2 * stride * (t / stride) + t % stride, size, stride);
    }
}

// The summary of segments sorted in global memory.
extern "C" __global__ void spamm_tune_range(int mb, int nb, int kb, const double* sorted_a, sgpu_i64 pitch_a,
                                            const double* sorted_b, sgpu_i64 pitch_b, unsigned long long* summary) {
    for (sgpu_i64 k = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; k < kb; k += (sgpu_i64)gridDim.x * blockDim.x)
        spamm_tune_extremes(sorted_a + k * pitch_a, mb, sorted_b + k * pitch_b, nb, summary);
}

// Piece `lane` (of `piece` steps) of candidate tau's staircase over a = A's sorted column k and b =
// B's sorted row k (spamm_tune_count): adds its performed count to n and its products to small
// (smallest performed) and large (largest skipped). SENTINELS: b[-1] = 0 and a[mb] readable (the
// staged layout), so that the steps need no bounds checks; otherwise b[-1] is replaced by 0 here.
template <bool SENTINELS>
__device__ __forceinline__ void spamm_tune_walk(const double* a, int mb, const double* b, int nb, double tau,
                                                int lane, int piece, unsigned long long& n, double& small,
                                                double& large) {
    // The staircase's point after `first` steps: the smallest i whose count q_i reaches
    // first - i (i = mb: every a consumed), with q = first - i.
    const int first = lane * piece;
    int lo = first > nb ? first - nb : 0, hi = first < mb ? first : mb;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        int q = first - mid;  // >= 1 here: mid < first
        if (__dmul_rn(a[mid], b[nb - q]) >= tau) hi = mid;
        else lo = mid + 1;
    }
    int i = lo, q = first - lo;
    if (i >= mb) return;
    // Branch-free steps (the lanes of a warp raise and consume at different times). x = a[i] and
    // at = b[nb - q]: x * at is performed whenever q > 0 (it was when q last rose, and x only grew
    // since), so it goes into `small` at every step, not only when row i is consumed; at q = 0, at =
    // +inf and x * at (inf, or NaN for x = 0) leaves the minimum alone. below = b[nb - q - 1] (0 at
    // q = nb, where nothing can rise: tau > 0): x * below decides between raising q and consuming
    // row i, whose count is q and whose largest skipped product is x * below. The step's count fits
    // 32 bits when staged (mb + nb <= 4096).
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    double x = a[i], at = q > 0 ? b[nb - q] : inf;
    const int stop = first + piece;  // i + q after the piece's last step
    unsigned count = 0;
    while (i < mb && i + q < stop) {
        const double below = SENTINELS || q < nb ? b[nb - q - 1] : 0.0;
        const double low = __dmul_rn(x, below);
        const bool raise = low >= tau;
        small = fmin(small, __dmul_rn(x, at));
        large = raise ? large : fmax(large, low);
        count += raise ? 0u : (unsigned)q;
        at = raise ? below : at;
        q += raise;
        i += !raise;
        x = a[SENTINELS || i < mb ? i : mb - 1];
        if (!SENTINELS) {
            n += count;
            count = 0;
        }
    }
    n += count;
}

// The valid-ratio search's first candidates, as src/spamm/tune.rs chooses them from the range alone
// (Bracket::search's first iteration: spread() over the bit patterns from the smallest product's + 1
// to the largest product's, with the positive floor as an extra candidate where the smallest product
// is 0), so that the counting can start before the host has read the range. summary as
// spamm_tune_extremes leaves it. Every thread of the block calls it; returns the count and leaves the
// candidates in taus[0, count), with a barrier before returning.
__device__ int spamm_tune_first_candidates(const unsigned long long* summary, double* taus) {
    const unsigned long long max_bits = summary[0], min_bits = ~summary[2];
    const unsigned long long floor_bits = summary[3] ? ~summary[3] : 0ULL;
    const unsigned long long from = min_bits + 1, to = max_bits;
    int count = 0;
    if (from <= to) {
        const bool extra = min_bits == 0 && floor_bits > from && floor_bits <= to;
        const unsigned long long slots = SPAMM_TUNE_MAX_CANDIDATES - (extra ? 1 : 0);
        const unsigned long long width = to - from;
        const int t = threadIdx.x;
        if (width < slots) {
            // Every pattern (the floor among them).
            count = (int)width + 1;
            if (t < count) taus[t] = __longlong_as_double((long long)(from + t));
        } else {
            // from + floor(width * e / d) for e < slots, d = slots - 1, without 128-bit products.
            const unsigned long long d = slots - 1, whole = width / d, rest = width % d;
            auto even = [&](unsigned long long e) { return from + whole * e + rest * e / d; };
            const bool mine = (unsigned long long)t < slots;
            // The floor goes after the evens below it, unless it is one of them.
            const int below = extra ? __syncthreads_count(mine && even(t) < floor_bits) : 0;
            const bool duplicate = extra && (unsigned long long)below < slots && even(below) == floor_bits;
            count = (int)slots + (extra && !duplicate);
            if (t < count) {
                unsigned long long bits = extra && !duplicate && t >= below ? (t == below ? floor_bits : even(t - 1))
                                                                           : even(t);
                taus[t] = __longlong_as_double((long long)bits);
            }
        }
    }
    __syncthreads();
    return count;
}

// Per candidate c, over all block products: how many are performed (nA * nB >= tau), the largest
// skipped and the smallest performed product, added to out = [performed | largest skipped |
// ~smallest performed | skipped squares] (slots of SPAMM_TUNE_MAX_CANDIDATES, zero before). Block 0
// zeroes `next`, the accumulators of the following iteration (the host has read them already).
// Per inner block k and candidate, the performed products form a staircase: for ascending a in A's
// sorted column k, the count q of B's sorted row k performed with it (a * b >= tau for the largest q
// b) only grows (rounding a * x is monotone in both). Walking it takes at most mb + nb steps, each
// either raising q or consuming an a (adding q, and its smallest performed product a * b[nb - q] and
// largest skipped a * b[nb - q - 1]). The walk is cut into equal pieces, one per thread of the
// candidate (merge-path partitioning: the point where a piece starts is found by a binary search
// on its diagonal), so that no thread waits for one that walks far. With `staged`, the block first
// copies the column and the row into shared memory (mb + nb + 2 doubles of dynamic shared memory,
// laid out a, 0, b, +inf for the walk's sentinels).
// With `derive` (the summary's address), the candidates are the search's first ones, derived from
// the range on the device (spamm_tune_first_candidates) instead of `candidates`; block 0 writes
// their patterns to out[3 * SPAMM_TUNE_MAX_CANDIDATES + c], zero after the last, for the host.
extern "C" __global__ void __launch_bounds__(1024)
    spamm_tune_count(int mb, int nb, int kb, const double* sorted_a, sgpu_i64 pitch_a, const double* sorted_b,
                     sgpu_i64 pitch_b, int staged, SpammTuneCandidates candidates,
                     const unsigned long long* derive, unsigned long long* out, unsigned long long* next) {
    extern __shared__ double stage[];
    __shared__ double taus[SPAMM_TUNE_MAX_CANDIDATES];
    __shared__ unsigned long long performed[SPAMM_TUNE_MAX_CANDIDATES];
    __shared__ unsigned long long largest[SPAMM_TUNE_MAX_CANDIDATES];
    __shared__ unsigned long long smallest[SPAMM_TUNE_MAX_CANDIDATES]; // complemented
    if (blockIdx.x == 0)
        for (int e = threadIdx.x; e < 4 * SPAMM_TUNE_MAX_CANDIDATES; e += blockDim.x) next[e] = 0;
    int count = candidates.count;
    if (derive) {
        count = spamm_tune_first_candidates(derive, taus);
        if (blockIdx.x == 0)
            for (int c = threadIdx.x; c < SPAMM_TUNE_MAX_CANDIDATES; c += blockDim.x)
                out[3 * SPAMM_TUNE_MAX_CANDIDATES + c] = c < count ? spamm_bits(taus[c]) : 0ULL;
        if (count == 0) return;
    }
    for (int c = threadIdx.x; c < count; c += blockDim.x) {
        if (!derive) taus[c] = candidates.tau[c];
        performed[c] = 0;
        largest[c] = 0;
        smallest[c] = 0;
    }
    __syncthreads();
    // Thread t keeps candidate t % count over every k, walking piece t / count of its staircase, and
    // adds its totals once at the end. Consecutive threads: consecutive candidates.
    const int c = threadIdx.x % count, lane = threadIdx.x / count, lanes = blockDim.x / count;
    const double tau = taus[c];
    const int piece = (mb + nb + lanes - 1) / lanes;
    // Products of finite norms are finite and non-negative: as doubles they order as their bits.
    unsigned long long n = 0;
    double small = __longlong_as_double(0x7ff0000000000000LL), large = 0.0;
    double* stage_a = stage;
    double* stage_b = stage + mb + 1;
    if (staged && threadIdx.x == 0) {
        stage_b[-1] = 0.0;
        stage_b[nb] = __longlong_as_double(0x7ff0000000000000LL);
    }
    for (sgpu_i64 k = blockIdx.x; k < kb; k += gridDim.x) {
        const double* a = sorted_a + k * pitch_a;
        const double* b = sorted_b + k * pitch_b;
        if (staged) {
            for (int e = threadIdx.x; e < mb; e += blockDim.x) stage_a[e] = a[e];
            for (int e = threadIdx.x; e < nb; e += blockDim.x) stage_b[e] = b[e];
            __syncthreads();
        }
        if (lane < lanes) {
            // Two copies: shared-memory loads where staged, global ones otherwise.
            if (staged) spamm_tune_walk<true>(stage_a, mb, stage_b, nb, tau, lane, piece, n, small, large);
            else spamm_tune_walk<false>(a, mb, b, nb, tau, lane, piece, n, small, large);
        }
        if (staged) __syncthreads();
    }
    if (lane < lanes) {
        if (n) atomicAdd(&performed[c], n);
        if (spamm_finite(small)) atomicMax(&smallest[c], ~spamm_bits(small));
        if (spamm_bits(large)) atomicMax(&largest[c], spamm_bits(large));
    }
    __syncthreads();
    for (int c = threadIdx.x; c < count; c += blockDim.x) {
        if (performed[c]) atomicAdd(&out[c], performed[c]);
        if (largest[c]) atomicMax(&out[SPAMM_TUNE_MAX_CANDIDATES + c], largest[c]);
        if (smallest[c]) atomicMax(&out[2 * SPAMM_TUNE_MAX_CANDIDATES + c], smallest[c]);
    }
}

// The error bound's squared sums for up to SPAMM_TUNE_BOUND_CANDIDATES candidates, in the CPU's order
// (src/spamm/mod.rs, skipped_squares): one thread block per column j of C blocks, one thread per row i
// summing the skipped products of C block (i, j) in increasing k; the squares then go down the
// column in row order, one thread per candidate. column_sums[c * nb + j] = that column's sum.
// A C block without any product between the first and the last candidate skips the same products at
// every candidate, so one running sum serves them all; only the others keep one sum per candidate.
extern "C" __global__ void __launch_bounds__(256)
    spamm_tune_skipped(int mb, int nb, int kb, const double* an, const double* bn, SpammTuneCandidates candidates,
                       double* column_sums) {
    __shared__ double squares[SPAMM_TUNE_BOUND_CANDIDATES][256 + 1];
    const int count = candidates.count;
    const double first = candidates.tau[0], last = candidates.tau[SPAMM_TUNE_BOUND_CANDIDATES - 1];
    for (sgpu_i64 j = blockIdx.x; j < nb; j += gridDim.x) {
        const double* bj = bn + j * kb;
        double column = 0.0;
        for (int i0 = 0; i0 < mb; i0 += blockDim.x) {
            const int i = i0 + threadIdx.x;
            if (i < mb) {
                double below = 0.0;
                bool between = false;
                for (sgpu_i64 k = 0; k < kb; ++k) {
                    double p = __dmul_rn(an[i + k * mb], bj[k]);
                    if (!(p >= first)) below = __dadd_rn(below, p);
                    else if (!(p >= last)) between = true;
                }
                double s[SPAMM_TUNE_BOUND_CANDIDATES];
#pragma unroll
                for (int c = 0; c < SPAMM_TUNE_BOUND_CANDIDATES; ++c) s[c] = between ? 0.0 : below;
                if (between) {
                    for (sgpu_i64 k = 0; k < kb; ++k) {
                        double p = __dmul_rn(an[i + k * mb], bj[k]);
#pragma unroll
                        for (int c = 0; c < SPAMM_TUNE_BOUND_CANDIDATES; ++c)
                            s[c] = __dadd_rn(s[c], p >= candidates.tau[c] ? 0.0 : p);
                    }
                }
#pragma unroll
                for (int c = 0; c < SPAMM_TUNE_BOUND_CANDIDATES; ++c) squares[c][threadIdx.x] = __dmul_rn(s[c], s[c]);
            }
            __syncthreads();
            if (threadIdx.x < count) {
                const int rows = mb - i0 < (int)blockDim.x ? mb - i0 : (int)blockDim.x;
                for (int t = 0; t < rows; ++t) column = __dadd_rn(column, squares[threadIdx.x][t]);
            }
            __syncthreads();
        }
        if (threadIdx.x < count) column_sums[threadIdx.x * (sgpu_i64)nb + j] = column;
    }
}

// totals[c] = the column sums of candidate c added left to right.
extern "C" __global__ void spamm_tune_skipped_total(int nb, int count, const double* column_sums, double* totals) {
    const int c = threadIdx.x;
    if (c < count) {
        double total = 0.0;
        for (int j = 0; j < nb; ++j) total = __dadd_rn(total, column_sums[c * (sgpu_i64)nb + j]);
        totals[c] = total;
    }
}

// SpAMM after cuSpAMM (Liu et al.): the get-norm kernel, the multiplication kernel of Algorithm 2
// (SIMT, f32 / f64) and Algorithm 3 (tensor cores, f16 in / f32 accumulation), and the counting
// kernels behind the statistics and the tau search. The CPU backend (src/spamm) is the specification:
// norms are summed in exactly its order and every skip decision is its f64 rule `nA * nB >= tau`.
//
// Matrices are BLAS column-major; op(X) = X or X^T is applied by the tile loads. Block norm maps are
// column-major over blocks of op(X): norm(i, k) at [i + k * block_rows].

#define SPAMM_TILE 32        // rows / columns of C one thread block computes
#define SPAMM_CHUNK 32       // inner-dimension elements per shared-memory stage
#define SPAMM_WINDOW_MAX 256 // k blocks decided per pass of the bitmap phase (= threads per block)

// ---------------------------------------------------------------------------------------------
// get-norm

// Row sums of squares: thread (r, cb) sums x(r, c)^2 over the columns c of stored column block cb,
// sequentially with fma in f64. Consecutive threads read consecutive rows: coalesced.
template <typename T>
__device__ void norm_row_sums(int rows, int cols, const T* x, sgpu_i64 ld, int bs, double* row_sums) {
    int col_blocks = (cols + bs - 1) / bs;
    for (sgpu_i64 r = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; r < rows; r += (sgpu_i64)gridDim.x * blockDim.x) {
        for (int cb = blockIdx.y; cb < col_blocks; cb += gridDim.y) {
            sgpu_i64 c0 = (sgpu_i64)cb * bs;
            sgpu_i64 c1 = c0 + bs < cols ? c0 + bs : cols;
            double s = 0.0;
            for (sgpu_i64 c = c0; c < c1; ++c) {
                double v = (double)sgpu_elem<T>::load(x[r + c * ld]);
                s = __fma_rn(v, v, s);
            }
            row_sums[r + (sgpu_i64)cb * rows] = s;
        }
    }
}

extern "C" __global__ void spamm_norm_rows_f32(int rows, int cols, const float* x, sgpu_i64 ld, int bs, double* out) {
    norm_row_sums<float>(rows, cols, x, ld, bs, out);
}
extern "C" __global__ void spamm_norm_rows_f64(int rows, int cols, const double* x, sgpu_i64 ld, int bs, double* out) {
    norm_row_sums<double>(rows, cols, x, ld, bs, out);
}
extern "C" __global__ void spamm_norm_rows_f16(int rows, int cols, const sgpu_f16* x, sgpu_i64 ld, int bs, double* out) {
    norm_row_sums<sgpu_f16>(rows, cols, x, ld, bs, out);
}

// Block norms from the row sums: the block's row sums added in row order from 0, then sqrt (both
// correctly rounded, as on the CPU). `transpose` writes the norm of stored block (rb, cb) at op
// position (cb, rb), so the map describes op(X).
extern "C" __global__ void spamm_norm_blocks(int rows, int cols, int bs, const double* row_sums, int transpose,
                                              double* norms) {
    sgpu_i64 block_rows = (rows + bs - 1) / bs, block_cols = (cols + bs - 1) / bs;
    sgpu_i64 total = block_rows * block_cols;
    for (sgpu_i64 idx = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; idx < total;
         idx += (sgpu_i64)gridDim.x * blockDim.x) {
        sgpu_i64 rb = idx % block_rows, cb = idx / block_rows;
        sgpu_i64 r0 = rb * bs, r1 = r0 + bs < rows ? r0 + bs : rows;
        double acc = 0.0;
        for (sgpu_i64 r = r0; r < r1; ++r) acc = __dadd_rn(acc, row_sums[r + cb * rows]);
        norms[transpose ? cb + rb * block_cols : idx] = __dsqrt_rn(acc);
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and counting

// Per C block (i, j): how many k are performed, and the sum over the skipped k of nA * nB, in
// increasing k (the CPU's order, products and sums rounded separately), so the host reduces exactly
// the CPU's numbers.
extern "C" __global__ void spamm_block_stats(int mb, int nb, int kb, const double* an, const double* bn, double tau,
                                             unsigned long long* performed, double* skipped) {
    sgpu_i64 total = (sgpu_i64)mb * nb;
    for (sgpu_i64 idx = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; idx < total;
         idx += (sgpu_i64)gridDim.x * blockDim.x) {
        sgpu_i64 i = idx % mb, j = idx / mb;
        unsigned long long count = 0;
        double sum = 0.0;
        for (sgpu_i64 k = 0; k < kb; ++k) {
            double p = __dmul_rn(an[i + k * mb], bn[k + j * kb]);
            if (p >= tau) ++count;
            else sum = __dadd_rn(sum, p);
        }
        performed[idx] = count;
        skipped[idx] = sum;
    }
}

// ---------------------------------------------------------------------------------------------
// Multiplication (Algorithm 2): one thread block per 32 x 32 tile of one C block (i, j). A C block of
// b > 32 is covered by ceil(b/32)^2 tiles, each walking the same valid k; b < 32 clips the tile.

struct SpammOperand {
    sgpu_i64 ld;
    int transposed;
};

// The bitmap phase for the window of k blocks [w, w + blockDim.x): valid k compacted, in increasing
// order, into `list` (the paper's map_offset); returns how many. Ends with a barrier.
__device__ int spamm_valid_window(sgpu_i64 i, sgpu_i64 j, int mb, int kb, sgpu_i64 w, const double* an,
                                  const double* bn, double tau, int* list, int* warp_counts) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
    sgpu_i64 k = w + tid;
    bool valid = k < kb && __dmul_rn(an[i + k * mb], bn[k + j * kb]) >= tau;
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
// Tensor cores (Algorithm 3): f16 inputs, f32 accumulation, 128 threads = 4 warps, warp (wm, wn)
// owning the 16 x 16 quarter of the 32 x 32 tile as two m16n8k16 accumulators. Shared tiles hold
// f16 bit patterns, op(A) as [row][p] and op(B) as [column][p], so every fragment register is one
// aligned 32-bit load of two consecutive p (the layout mma.sync's row.col operands expect).

#define SPAMM_HSTRIDE (SPAMM_CHUNK + 8)  // padded row of a shared f16 tile (bank spread, 4-byte aligned)

__device__ __forceinline__ void spamm_mma_16816(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(128) spamm_multiply_f16(int m, int n, int k, int bs, float alpha,
        const sgpu_f16* a, sgpu_i64 lda, int ta, const sgpu_f16* b, sgpu_i64 ldb, int tb, float beta, sgpu_f16* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    __shared__ __align__(16) sgpu_f16 tile_a[2][SPAMM_TILE][SPAMM_HSTRIDE];  // [row][p]
    __shared__ __align__(16) sgpu_f16 tile_b[2][SPAMM_TILE][SPAMM_HSTRIDE];  // [column][p]
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
        sgpu_f16 next_a[8], next_b[8];

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
                    next_a[q] = (r < row_end && p < e) ? (ta ? a[p + r * lda] : a[r + p * lda]) : (sgpu_f16)0;
                    spamm_tile_coord(tid + 128 * q, b_cols_contiguous, outer, inner);
                    sgpu_i64 col = col0 + outer;
                    p = s + inner;
                    next_b[q] = (col < col_end && p < e) ? (tb ? b[col + p * ldb] : b[p + col * ldb]) : (sgpu_f16)0;
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
                    const sgpu_f16* arow = &tile_a[stage][wm * 16 + group][kk + quad * 2];
                    fa[0] = *(const unsigned*)arow;
                    fa[1] = *(const unsigned*)(arow + 8 * SPAMM_HSTRIDE);
                    fa[2] = *(const unsigned*)(arow + 8);
                    fa[3] = *(const unsigned*)(arow + 8 * SPAMM_HSTRIDE + 8);
                    for (int h = 0; h < 2; ++h) {
                        const sgpu_f16* bcol = &tile_b[stage][wn * 16 + h * 8 + group][kk + quad * 2];
                        fb[h][0] = *(const unsigned*)bcol;
                        fb[h][1] = *(const unsigned*)(bcol + 8);
                    }
                    spamm_mma_16816(acc[0], fa, fb[0]);
                    spamm_mma_16816(acc[1], fa, fb[1]);
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
                if (r < row_end && col < col_end) {
                    sgpu_f16* out = c + r + col * ldc;
                    float value = alpha * acc[h][q];
                    if (beta != 0.0f) value += beta * sgpu_f16_to_f32(*out);
                    *out = sgpu_f32_to_f16(value);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fast path (block sizes that are multiples of 32): one thread block computes a TILE x TILE tile of C
// (128 x 128 for f32 / f16, 64 x 64 for f64), i.e. several C blocks at once (up to 4 x 4), so that
// each loaded element of op(A) / op(B) feeds TILE / TM times more FMAs than with 32 x 32 tiles.
// The k blocks walked are the union of the valid k of the tile's C blocks; each k block carries a
// 16-bit mask (bit bi * 4 + bj: C block (i0 + bi, j0 + bj) of the tile performs it). Every thread
// (f32 / f64) or every mma.sync fragment (f16) lies inside a single C block (TM | 32, 16 | 32), and
// performs a chunk only when its C block's bit is set: the per-block skip decisions, and the set of
// products summed into every C element, are exactly Algorithm 2's.

#define SPAMM_FAST_WINDOW 256  // k blocks decided per pass (= threads per block of the fast kernels)

struct __align__(16) spamm_f4 { float x, y, z, w; };
struct __align__(16) spamm_d2 { double x, y; };
__device__ __forceinline__ void spamm_ld16(float* d, const float* s) {
    spamm_f4 v = *(const spamm_f4*)s;
    d[0] = v.x; d[1] = v.y; d[2] = v.z; d[3] = v.w;
}
__device__ __forceinline__ void spamm_ld16(double* d, const double* s) {
    spamm_d2 v = *(const spamm_d2*)s;
    d[0] = v.x; d[1] = v.y;
}

// The C blocks a tile [row0, row0 + tile) x [col0, col0 + tile) touches: [i0, i0 + ni) x [j0, j0 + nj).
__device__ __forceinline__ void spamm_tile_blocks(sgpu_i64 row0, sgpu_i64 col0, int tile, int m, int n, int bs,
                                                  int& i0, int& ni, int& j0, int& nj) {
    sgpu_i64 row_end = row0 + tile < m ? row0 + tile : m, col_end = col0 + tile < n ? col0 + tile : n;
    i0 = (int)(row0 / bs);
    ni = (int)((row_end - 1) / bs) - i0 + 1;
    j0 = (int)(col0 / bs);
    nj = (int)((col_end - 1) / bs) - j0 + 1;
}

// The bitmap phase of a tile for the window of k blocks [w, w + 256): the k blocks that any of the
// tile's C blocks performs, compacted in increasing order into `list`, their masks into `masks`;
// returns how many. Ends with a barrier.
__device__ int spamm_tile_window(int i0, int ni, int j0, int nj, int mb, int kb, sgpu_i64 w, const double* an,
                                 const double* bn, double tau, int* list, unsigned* masks, int* warp_counts) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
    sgpu_i64 k = w + tid;
    unsigned mask = 0;
    if (k < kb) {
        for (int bi = 0; bi < ni; ++bi) {
            double na = an[(i0 + bi) + k * mb];
            for (int bj = 0; bj < nj; ++bj)
                if (__dmul_rn(na, bn[k + (sgpu_i64)(j0 + bj) * kb]) >= tau) mask |= 1u << (bi * 4 + bj);
        }
    }
    bool valid = mask != 0;
    unsigned ballot = __ballot_sync(0xffffffffu, valid);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int offset = 0, total = 0;
    for (int q = 0; q < warps; ++q) {
        offset += q < warp ? warp_counts[q] : 0;
        total += warp_counts[q];
    }
    if (valid) {
        int at = offset + __popc(ballot & ((1u << lane) - 1u));
        list[at] = (int)k;
        masks[at] = mask;
    }
    __syncthreads();
    return total;
}

// Walks the chunks of the k blocks of one window: chunk [start, end) of k block list[entry], which
// never crosses a k block (the chunk divides the block size). Every thread holds the same cursor.
struct SpammTileChunks {
    const int* list;
    const unsigned* masks;
    int count, entry;
    sgpu_i64 pos, block_end, bs, k_total, chunk;

    __device__ bool advance(sgpu_i64& start, sgpu_i64& end, unsigned& mask) {
        if (pos >= block_end) {
            ++entry;
            if (entry >= count) return false;
            pos = (sgpu_i64)list[entry] * bs;
            block_end = pos + bs < k_total ? pos + bs : k_total;
        }
        start = pos;
        end = pos + chunk < block_end ? pos + chunk : block_end;
        mask = masks[entry];
        pos = end;
        return true;
    }
};

#define SPAMM_FAST_CHUNK 16

// One 16-byte group of V = 16 / sizeof(T) consecutive stored elements from src, of which the first
// `valid` are inside the matrix (the rest read as zero): one vector load when the whole group is
// inside and src is 16-byte aligned (leading dimension and base permitting), else element by element.
struct __align__(16) spamm_u4 { unsigned x, y, z, w; };
template <typename T>
__device__ __forceinline__ void spamm_load_group(T* dst, const T* src, int valid) {
    constexpr int V = 16 / (int)sizeof(T);
    if (valid == V && (((unsigned long long)src) & 15ull) == 0) {
        union { spamm_u4 v; T e[V]; } u;
        u.v = *(const spamm_u4*)src;
#pragma unroll
        for (int q = 0; q < V; ++q) dst[q] = u.e[q];
    } else {
#pragma unroll
        for (int q = 0; q < V; ++q) dst[q] = q < valid ? src[q] : (T)0;
    }
}

__device__ __forceinline__ int spamm_clamp_count(sgpu_i64 left, int v) { return left <= 0 ? 0 : left >= v ? v : (int)left; }

// Group g of an OUTER x CHUNK tile of an operand (outer: rows of op(A) / columns of op(B); inner: the
// chunk's p) whose stored matrix is contiguous along outer (`outer_contiguous`) or along p: the
// group's first coordinates and how many of its elements are inside [0, outer_limit) x [.., p_end).
template <int OUTER, int CHUNK, int V>
__device__ __forceinline__ void spamm_group(int g, bool outer_contiguous, sgpu_i64 outer0, sgpu_i64 outer_limit,
                                            sgpu_i64 p0, sgpu_i64 p_end, int& outer, int& inner, int& valid) {
    if (outer_contiguous) {
        outer = (g % (OUTER / V)) * V;
        inner = g / (OUTER / V);
        valid = p0 + inner < p_end ? spamm_clamp_count(outer_limit - (outer0 + outer), V) : 0;
    } else {
        inner = (g % (CHUNK / V)) * V;
        outer = g / (CHUNK / V);
        valid = outer0 + outer < outer_limit ? spamm_clamp_count(p_end - (p0 + inner), V) : 0;
    }
}

// SIMT tile kernel, 256 threads as 16 x 16, thread (tr, tc) owning the TM x TM outputs at rows
// tr * TM.., columns tc * TM.. of the tile (TM = TILE / 16), a warp covering 32 rows so that its
// threads' C blocks differ in one direction only. Shared tiles are [p][row] / [p][column] with rows
// padded to a multiple of 16 bytes (16-byte vector reads of a thread's TM values). Double-buffered
// through registers: the next chunk's global loads are issued before the current chunk's FMAs.
template <typename T, int TILE>
__device__ void spamm_multiply_tiled(int m, int n, int k, int bs, typename sgpu_elem<T>::compute alpha,
                                     const T* a, SpammOperand op_a, const T* b, SpammOperand op_b,
                                     typename sgpu_elem<T>::compute beta, T* c, sgpu_i64 ldc, const double* an,
                                     const double* bn, double tau) {
    typedef typename sgpu_elem<T>::compute F;
    constexpr int CHUNK = SPAMM_FAST_CHUNK;
    constexpr int TM = TILE / 16;
    constexpr int LD = TILE + 16 / (int)sizeof(F);
    constexpr int LOADS = TILE * CHUNK / 256;
    constexpr int WR = 32 / TM;  // threads of a warp along the rows: the warp covers 32 rows
    constexpr int WC = 32 / WR;
    constexpr int WARPS_R = 16 / WR;
    constexpr int V = 16 / (int)sizeof(T);
    __shared__ __align__(16) F tile_a[2][CHUNK][LD];  // [p][row]
    __shared__ __align__(16) F tile_b[2][CHUNK][LD];  // [p][column]
    __shared__ int list[SPAMM_FAST_WINDOW];
    __shared__ unsigned masks[SPAMM_FAST_WINDOW];
    __shared__ int warp_counts[SPAMM_FAST_WINDOW / 32];

    int mb = (m + bs - 1) / bs, nb = (n + bs - 1) / bs, kb = (k + bs - 1) / bs;
    (void)nb;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int tr = (warp % WARPS_R) * WR + lane % WR, tc = (warp / WARPS_R) * WC + lane / WR;
    sgpu_i64 col_tiles = ((sgpu_i64)n + TILE - 1) / TILE;
    sgpu_i64 row0 = (sgpu_i64)blockIdx.x * TILE;

    for (sgpu_i64 tile_col = blockIdx.y; tile_col < col_tiles; tile_col += gridDim.y) {
        sgpu_i64 col0 = tile_col * TILE;
        int i0, ni, j0, nj;
        spamm_tile_blocks(row0, col0, TILE, m, n, bs, i0, ni, j0, nj);
        // This thread's C block within the tile (rows / columns past m / n: a bit never set, or
        // outputs never written).
        int my_bit = (int)((row0 + tr * TM) / bs - i0) * 4 + (int)((col0 + tc * TM) / bs - j0);
        F acc[TM][TM];
#pragma unroll
        for (int x = 0; x < TM; ++x)
#pragma unroll
            for (int y = 0; y < TM; ++y) acc[x][y] = 0;
        T next_a[LOADS], next_b[LOADS];

        for (sgpu_i64 w = 0; w < kb; w += SPAMM_FAST_WINDOW) {
            int count = spamm_tile_window(i0, ni, j0, nj, mb, kb, w, an, bn, tau, list, masks, warp_counts);
            SpammTileChunks chunks = {list, masks, count, -1, 0, 0, bs, k, CHUNK};
            sgpu_i64 start, end;
            unsigned mask = 0, next_mask = 0;
            bool have = chunks.advance(start, end, mask);
            int stage = 0;
            // Groups of V stored-contiguous elements: op(A) is contiguous along rows unless A is
            // transposed, op(B) along columns when B is transposed.
            auto fetch = [&](sgpu_i64 s, sgpu_i64 e) {
#pragma unroll
                for (int q = 0; q < LOADS / V; ++q) {
                    int g = tid + 256 * q, outer, inner, valid;
                    spamm_group<TILE, CHUNK, V>(g, !op_a.transposed, row0, m, s, e, outer, inner, valid);
                    sgpu_i64 r = row0 + outer, p = s + inner;
                    spamm_load_group(next_a + q * V, op_a.transposed ? a + p + r * op_a.ld : a + r + p * op_a.ld, valid);
                    spamm_group<TILE, CHUNK, V>(g, op_b.transposed, col0, n, s, e, outer, inner, valid);
                    sgpu_i64 col = col0 + outer;
                    p = s + inner;
                    spamm_load_group(next_b + q * V, op_b.transposed ? b + col + p * op_b.ld : b + p + col * op_b.ld,
                                     valid);
                }
            };
            auto store = [&](int buffer) {
#pragma unroll
                for (int q = 0; q < LOADS / V; ++q) {
                    int g = tid + 256 * q, outer, inner, valid;
                    spamm_group<TILE, CHUNK, V>(g, !op_a.transposed, row0, m, 0, 0, outer, inner, valid);
#pragma unroll
                    for (int v = 0; v < V; ++v) {
                        F x = sgpu_elem<T>::load(next_a[q * V + v]);
                        if (op_a.transposed) tile_a[buffer][inner + v][outer] = x;
                        else tile_a[buffer][inner][outer + v] = x;
                    }
                    spamm_group<TILE, CHUNK, V>(g, op_b.transposed, col0, n, 0, 0, outer, inner, valid);
#pragma unroll
                    for (int v = 0; v < V; ++v) {
                        F x = sgpu_elem<T>::load(next_b[q * V + v]);
                        if (op_b.transposed) tile_b[buffer][inner][outer + v] = x;
                        else tile_b[buffer][inner + v][outer] = x;
                    }
                }
            };
            if (have) {
                fetch(start, end);
                store(0);
            }
            __syncthreads();
            while (have) {
                have = chunks.advance(start, end, next_mask);
                if (have) fetch(start, end);
                if ((mask >> my_bit) & 1u) {
#pragma unroll
                    for (int p = 0; p < CHUNK; ++p) {
                        F ra[TM], rb[TM];
#pragma unroll
                        for (int v = 0; v < TM; v += 16 / (int)sizeof(F)) {
                            spamm_ld16(ra + v, &tile_a[stage][p][tr * TM + v]);
                            spamm_ld16(rb + v, &tile_b[stage][p][tc * TM + v]);
                        }
#pragma unroll
                        for (int x = 0; x < TM; ++x)
#pragma unroll
                            for (int y = 0; y < TM; ++y) acc[x][y] += ra[x] * rb[y];
                    }
                }
                if (have) store(stage ^ 1);
                stage ^= 1;
                mask = next_mask;
                __syncthreads();
            }
        }

#pragma unroll
        for (int y = 0; y < TM; ++y) {
#pragma unroll
            for (int x = 0; x < TM; ++x) {
                sgpu_i64 r = row0 + tr * TM + x, col = col0 + tc * TM + y;
                if (r < m && col < n) {
                    T* out = c + r + col * ldc;
                    F value = alpha * acc[x][y];
                    if (beta != (F)0) value += beta * sgpu_elem<T>::load(*out);
                    *out = sgpu_elem<T>::store(value);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) spamm_multiply_tiled_f32(int m, int n, int k, int bs, float alpha,
        const float* a, sgpu_i64 lda, int ta, const float* b, sgpu_i64 ldb, int tb, float beta, float* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    spamm_multiply_tiled<float, 128>(m, n, k, bs, alpha, a, SpammOperand{lda, ta}, b, SpammOperand{ldb, tb}, beta,
                                     c, ldc, an, bn, tau);
}
extern "C" __global__ void __launch_bounds__(256) spamm_multiply_tiled_f64(int m, int n, int k, int bs, double alpha,
        const double* a, sgpu_i64 lda, int ta, const double* b, sgpu_i64 ldb, int tb, double beta, double* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    spamm_multiply_tiled<double, 64>(m, n, k, bs, alpha, a, SpammOperand{lda, ta}, b, SpammOperand{ldb, tb}, beta,
                                     c, ldc, an, bn, tau);
}

// Tensor-core tile kernel (Algorithm 3 on 128 x 128 tiles): 256 threads = 8 warps as 2 x 4, warp
// (wm, wn) owning rows wm * 64.. and columns wn * 32.. of the tile as 4 x 4 m16n8k16 accumulators
// (f32). Shared tiles as in spamm_multiply_f16 ([row][p] / [column][p], 32-bit fragment loads,
// conflict-free with the padded stride). Each 16 x 8 fragment lies in one C block: its mma is issued
// only when that block performs the chunk's k block (warp-uniform).
// Global loads stay element-wise here: 16-byte groups along the rows of op(A) (A not transposed)
// would be scattered down 8 rows of the [row][p] tile, same bank each (measured 4.25 ms against
// 3.13 ms at N = 4096, tau = 0); vector loads want ldmatrix.trans on a [p][row] tile instead.
#define SPAMM_HTILE 128
extern "C" __global__ void __launch_bounds__(256) spamm_multiply_tiled_f16(int m, int n, int k, int bs, float alpha,
        const sgpu_f16* a, sgpu_i64 lda, int ta, const sgpu_f16* b, sgpu_i64 ldb, int tb, float beta, sgpu_f16* c,
        sgpu_i64 ldc, const double* an, const double* bn, double tau) {
    constexpr int CHUNK = SPAMM_CHUNK;  // 32
    constexpr int LOADS = SPAMM_HTILE * CHUNK / 256;
    __shared__ __align__(16) sgpu_f16 tile_a[2][SPAMM_HTILE][SPAMM_HSTRIDE];  // [row][p]
    __shared__ __align__(16) sgpu_f16 tile_b[2][SPAMM_HTILE][SPAMM_HSTRIDE];  // [column][p]
    __shared__ int list[SPAMM_FAST_WINDOW];
    __shared__ unsigned masks[SPAMM_FAST_WINDOW];
    __shared__ int warp_counts[SPAMM_FAST_WINDOW / 32];

    int mb = (m + bs - 1) / bs, kb = (k + bs - 1) / bs;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int wm = warp & 1, wn = warp >> 1, group = lane >> 2, quad = lane & 3;
    sgpu_i64 col_tiles = ((sgpu_i64)n + SPAMM_HTILE - 1) / SPAMM_HTILE;
    sgpu_i64 row0 = (sgpu_i64)blockIdx.x * SPAMM_HTILE;

    for (sgpu_i64 tile_col = blockIdx.y; tile_col < col_tiles; tile_col += gridDim.y) {
        sgpu_i64 col0 = tile_col * SPAMM_HTILE;
        int i0, ni, j0, nj;
        spamm_tile_blocks(row0, col0, SPAMM_HTILE, m, n, bs, i0, ni, j0, nj);
        int bit_row[4], bit_col[4];
#pragma unroll
        for (int f = 0; f < 4; ++f) {
            bit_row[f] = (int)((row0 + wm * 64 + f * 16) / bs - i0) * 4;
            bit_col[f] = (int)((col0 + wn * 32 + f * 8) / bs - j0);
        }
        float acc[4][4][4];
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[x][y][q] = 0.0f;
        sgpu_f16 next_a[LOADS], next_b[LOADS];

        for (sgpu_i64 w = 0; w < kb; w += SPAMM_FAST_WINDOW) {
            int count = spamm_tile_window(i0, ni, j0, nj, mb, kb, w, an, bn, tau, list, masks, warp_counts);
            SpammTileChunks chunks = {list, masks, count, -1, 0, 0, bs, k, CHUNK};
            sgpu_i64 start, end;
            unsigned mask = 0, next_mask = 0;
            bool have = chunks.advance(start, end, mask);
            int stage = 0;
            auto fetch = [&](sgpu_i64 s, sgpu_i64 e) {
#pragma unroll
                for (int q = 0; q < LOADS; ++q) {
                    int idx = tid + 256 * q;
                    int outer = ta ? idx / CHUNK : idx % SPAMM_HTILE;
                    int inner = ta ? idx % CHUNK : idx / SPAMM_HTILE;
                    sgpu_i64 r = row0 + outer, p = s + inner;
                    next_a[q] = (r < m && p < e) ? (ta ? a[p + r * lda] : a[r + p * lda]) : (sgpu_f16)0;
                    outer = tb ? idx % SPAMM_HTILE : idx / CHUNK;
                    inner = tb ? idx / SPAMM_HTILE : idx % CHUNK;
                    sgpu_i64 col = col0 + outer;
                    p = s + inner;
                    next_b[q] = (col < n && p < e) ? (tb ? b[col + p * ldb] : b[p + col * ldb]) : (sgpu_f16)0;
                }
            };
            auto store = [&](int buffer) {
#pragma unroll
                for (int q = 0; q < LOADS; ++q) {
                    int idx = tid + 256 * q;
                    int outer = ta ? idx / CHUNK : idx % SPAMM_HTILE;
                    int inner = ta ? idx % CHUNK : idx / SPAMM_HTILE;
                    tile_a[buffer][outer][inner] = next_a[q];
                    outer = tb ? idx % SPAMM_HTILE : idx / CHUNK;
                    inner = tb ? idx / SPAMM_HTILE : idx % CHUNK;
                    tile_b[buffer][outer][inner] = next_b[q];
                }
            };
            if (have) {
                fetch(start, end);
                store(0);
            }
            __syncthreads();
            while (have) {
                have = chunks.advance(start, end, next_mask);
                if (have) fetch(start, end);
#pragma unroll
                for (int kk = 0; kk < CHUNK; kk += 16) {
                    unsigned fa[4][4], fb[4][2];
#pragma unroll
                    for (int f = 0; f < 4; ++f) {
                        const sgpu_f16* arow = &tile_a[stage][wm * 64 + f * 16 + group][kk + quad * 2];
                        fa[f][0] = *(const unsigned*)arow;
                        fa[f][1] = *(const unsigned*)(arow + 8 * SPAMM_HSTRIDE);
                        fa[f][2] = *(const unsigned*)(arow + 8);
                        fa[f][3] = *(const unsigned*)(arow + 8 * SPAMM_HSTRIDE + 8);
                        const sgpu_f16* bcol = &tile_b[stage][wn * 32 + f * 8 + group][kk + quad * 2];
                        fb[f][0] = *(const unsigned*)bcol;
                        fb[f][1] = *(const unsigned*)(bcol + 8);
                    }
#pragma unroll
                    for (int x = 0; x < 4; ++x)
#pragma unroll
                        for (int y = 0; y < 4; ++y)
                            if ((mask >> (bit_row[x] + bit_col[y])) & 1u) spamm_mma_16816(acc[x][y], fa[x], fb[y]);
                }
                if (have) store(stage ^ 1);
                stage ^= 1;
                mask = next_mask;
                __syncthreads();
            }
        }

#pragma unroll
        for (int x = 0; x < 4; ++x) {
#pragma unroll
            for (int y = 0; y < 4; ++y) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    sgpu_i64 r = row0 + wm * 64 + x * 16 + group + (q >> 1) * 8;
                    sgpu_i64 col = col0 + wn * 32 + y * 8 + quad * 2 + (q & 1);
                    if (r < m && col < n) {
                        sgpu_f16* out = c + r + col * ldc;
                        float value = alpha * acc[x][y][q];
                        if (beta != 0.0f) value += beta * sgpu_f16_to_f32(*out);
                        *out = sgpu_f32_to_f16(value);
                    }
                }
            }
        }
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
#define SPAMM_TUNE_SEGMENT 16          // sorted A norms one thread walks for one candidate

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

// Sorts `padded` (a power of two) keys in shared memory ascending, with the whole thread block; ends
// with a barrier (when there is anything to sort).
__device__ void spamm_bitonic_sort_block(double* keys, int padded) {
    for (int size = 2; size <= padded; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = threadIdx.x; t < padded / 2; t += blockDim.x)
                spamm_bitonic_step(keys, 2 * stride * (t / stride) + t % stride, size, stride);
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
        spamm_bitonic_sort_block(ka, pa);
        spamm_bitonic_sort_block(kbk, pb);
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

// Per candidate c, over all block products: how many are performed (nA * nB >= tau), the largest
// skipped and the smallest performed product, added to out = [performed | largest skipped |
// ~smallest performed | skipped squares] (slots of SPAMM_TUNE_MAX_CANDIDATES, zero before). Block 0
// zeroes `next`, the accumulators of the following iteration (the host has read them already).
// Per inner block k and candidate, a thread walks a segment of A's sorted column k: for ascending a,
// the first performed position p in B's sorted row k only moves down (rounding a * x is monotone in
// both), so each a costs its steps of p plus one multiply. With `staged`, the block first copies the
// column and the row into shared memory (mb + nb doubles of dynamic shared memory).
extern "C" __global__ void __launch_bounds__(1024)
    spamm_tune_count(int mb, int nb, int kb, const double* sorted_a, sgpu_i64 pitch_a, const double* sorted_b,
                     sgpu_i64 pitch_b, int staged, SpammTuneCandidates candidates, unsigned long long* out,
                     unsigned long long* next) {
    extern __shared__ double stage[];
    __shared__ double taus[SPAMM_TUNE_MAX_CANDIDATES];
    __shared__ unsigned long long performed[SPAMM_TUNE_MAX_CANDIDATES];
    __shared__ unsigned long long largest[SPAMM_TUNE_MAX_CANDIDATES];
    __shared__ unsigned long long smallest[SPAMM_TUNE_MAX_CANDIDATES]; // complemented
    const int count = candidates.count;
    if (blockIdx.x == 0)
        for (int e = threadIdx.x; e < 4 * SPAMM_TUNE_MAX_CANDIDATES; e += blockDim.x) next[e] = 0;
    for (int c = threadIdx.x; c < count; c += blockDim.x) {
        taus[c] = candidates.tau[c];
        performed[c] = 0;
        largest[c] = 0;
        smallest[c] = 0;
    }
    __syncthreads();
    const int segments = (mb + SPAMM_TUNE_SEGMENT - 1) / SPAMM_TUNE_SEGMENT;
    const sgpu_i64 work = (sgpu_i64)segments * count;
    for (sgpu_i64 k = blockIdx.x; k < kb; k += gridDim.x) {
        const double* a = sorted_a + k * pitch_a;
        const double* b = sorted_b + k * pitch_b;
        if (staged) {
            for (int e = threadIdx.x; e < mb; e += blockDim.x) stage[e] = a[e];
            for (int e = threadIdx.x; e < nb; e += blockDim.x) stage[mb + e] = b[e];
            __syncthreads();
            a = stage;
            b = stage + mb;
        }
        // Consecutive threads: consecutive candidates on the same segment (the same a, broadcast).
        for (sgpu_i64 w = threadIdx.x; w < work; w += blockDim.x) {
            const int c = (int)(w % count);
            int i = (int)(w / count) * SPAMM_TUNE_SEGMENT;
            const int end = i + SPAMM_TUNE_SEGMENT < mb ? i + SPAMM_TUNE_SEGMENT : mb;
            const double tau = taus[c];
            double x = a[i];
            int lo = 0, hi = nb;
            while (lo < hi) {
                int mid = (lo + hi) >> 1;
                if (__dmul_rn(x, b[mid]) >= tau) hi = mid;
                else lo = mid + 1;
            }
            int p = lo;
            unsigned long long n = 0, small = ~0ULL, large = 0;
            for (; i < end; ++i) {
                x = a[i];
                while (p > 0 && __dmul_rn(x, b[p - 1]) >= tau) --p;
                n += (unsigned long long)(nb - p);
                if (p < nb) {
                    unsigned long long v = spamm_bits(__dmul_rn(x, b[p]));
                    small = v < small ? v : small;
                }
                if (p > 0) {
                    unsigned long long v = spamm_bits(__dmul_rn(x, b[p - 1]));
                    large = v > large ? v : large;
                }
            }
            if (n) atomicAdd(&performed[c], n);
            if (~small) atomicMax(&smallest[c], ~small);
            if (large) atomicMax(&largest[c], large);
        }
        if (staged) __syncthreads();
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

// SpAMM tile kernels on CUDA cores (exact FP32 / FP64 FMA): see kernels/spamm_tiles.cuh for the
// work lists and the argument order.

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
                                     typename sgpu_elem<T>::compute beta, T* c, sgpu_i64 ldc, const unsigned* order,
                                     const int* counts, const unsigned* lists, int list_stride) {
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

    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int tr = (warp % WARPS_R) * WR + lane % WR, tc = (warp / WARPS_R) * WC + lane / WR;
    SpammTileWork work = spamm_tile_work(m, bs, TILE, TILE, order, counts, lists, list_stride);
    sgpu_i64 row0 = work.row0, col0 = work.col0;
    {
        // This thread's C block within the tile (rows / columns past m / n: a bit never set, or
        // outputs never written).
        int my_bit = work.bit(tr * TM, tc * TM, bs);
        F acc[TM][TM];
#pragma unroll
        for (int x = 0; x < TM; ++x)
#pragma unroll
            for (int y = 0; y < TM; ++y) acc[x][y] = 0;
        T next_a[LOADS], next_b[LOADS];

        {
            SpammChunkCursor chunks(work, bs, k, CHUNK);
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
                if (r < m && col < n) spamm_store_c(c, ldc, r, col, alpha, acc[x][y], beta);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) spamm_tiles_f32(int m, int n, int k, int bs, float alpha,
        const float* a, sgpu_i64 lda, int ta, const float* b, sgpu_i64 ldb, int tb, float beta, float* c,
        sgpu_i64 ldc, const unsigned* order, const int* counts, const unsigned* lists, int list_stride) {
    spamm_multiply_tiled<float, 128>(m, n, k, bs, alpha, a, SpammOperand{lda, ta}, b, SpammOperand{ldb, tb}, beta,
                                     c, ldc, order, counts, lists, list_stride);
}

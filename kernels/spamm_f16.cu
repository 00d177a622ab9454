// SpAMM tile kernel on tensor cores: f16 inputs, f32 accumulation (Algorithm 3); see
// kernels/spamm_tiles.cuh for the work lists and the argument order.

#define SPAMM_CHUNK 32
#define SPAMM_HSTRIDE (SPAMM_CHUNK + 8)  // padded row of a shared f16 tile (bank spread, 4-byte aligned)

// Tensor-core tile kernel (Algorithm 3 on 128 x 128 tiles): 256 threads = 8 warps as 2 x 4, warp
// (wm, wn) owning rows wm * 64.. and columns wn * 32.. of the tile as 4 x 4 m16n8k16 accumulators
// (f32). Shared tiles as in spamm_multiply_f16 ([row][p] / [column][p], 32-bit fragment loads,
// conflict-free with the padded stride). Each 16 x 8 fragment lies in one C block: its mma is issued
// only when that block performs the chunk's k block (warp-uniform).
// Global loads stay element-wise here: 16-byte groups along the rows of op(A) (A not transposed)
// would be scattered down 8 rows of the [row][p] tile, same bank each (measured 4.25 ms against
// 3.13 ms at N = 4096, tau = 0); vector loads want ldmatrix.trans on a [p][row] tile instead.
#define SPAMM_HTILE 128
extern "C" __global__ void __launch_bounds__(256) spamm_tiles_f16(int m, int n, int k, int bs, float alpha,
        const sgpu_f16* a, sgpu_i64 lda, int ta, const sgpu_f16* b, sgpu_i64 ldb, int tb, float beta, sgpu_f16* c,
        sgpu_i64 ldc, const unsigned* order, const int* counts, const unsigned* lists, int list_stride) {
    constexpr int CHUNK = SPAMM_CHUNK;  // 32
    constexpr int LOADS = SPAMM_HTILE * CHUNK / 256;
    __shared__ __align__(16) sgpu_f16 tile_a[2][SPAMM_HTILE][SPAMM_HSTRIDE];  // [row][p]
    __shared__ __align__(16) sgpu_f16 tile_b[2][SPAMM_HTILE][SPAMM_HSTRIDE];  // [column][p]

    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int wm = warp & 1, wn = warp >> 1, group = lane >> 2, quad = lane & 3;
    SpammTileWork work = spamm_tile_work(m, bs, SPAMM_HTILE, SPAMM_HTILE, order, counts, lists, list_stride);
    sgpu_i64 row0 = work.row0, col0 = work.col0;
    {
        int bit_row[4], bit_col[4];
#pragma unroll
        for (int f = 0; f < 4; ++f) {
            bit_row[f] = work.bit(wm * 64 + f * 16, 0, bs);
            bit_col[f] = work.bit(0, wn * 32 + f * 8, bs);
        }
        float acc[4][4][4];
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[x][y][q] = 0.0f;
        sgpu_f16 next_a[LOADS], next_b[LOADS];

        {
            SpammChunkCursor chunks(work, bs, k, CHUNK);
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
                    if (r < m && col < n) spamm_store_c(c, ldc, r, col, alpha, acc[x][y][q], beta);
                }
            }
        }
    }
}

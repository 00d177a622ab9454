// SpAMM tile kernel for FP64 on the tensor cores (DMMA): see kernels/spamm_tiles.cuh for the work
// lists and the argument order. Every product is an IEEE FP64 fused multiply-add, accumulated in FP64
// (results differ from the CUDA-core kernels by the order of the sums only).
//
// Tile 128 x 128 (up to 4 x 4 C blocks of 32), 256 threads = 8 warps. The fragments of a warp are
// spread over the whole tile rather than a corner of it: warp w holds, in each of the 4 x 4 groups of
// 32 x 32 outputs, the 16 x 8 fragment at rows 16 * (w % 2).., columns 8 * (w / 2)... Every warp
// therefore performs exactly the products the mask allows in every group (popcount(mask) mma per
// k step), so the warps stay balanced whatever the mask; a 32 x 32 group lies inside one C block
// (block sizes are multiples of 32), and so does each fragment.
//
// op(A) and op(B) reach shared memory through a 4-stage cp.async pipeline, 16 k per stage (a stage
// never crosses a k block, so it carries one mask). Each operand keeps its stored contiguity: a
// panel contiguous along its outer dimension (rows of op(A) / columns of op(B)) is stored [k][outer]
// with a row stride of 132 doubles, one contiguous along k is stored [outer][k] with 20; both strides
// are 4 mod 16 (doubles), so that the fragment reads of a half warp hit 16 distinct bank pairs. The
// 32-row (32-column) groups of op(A) (op(B)) that no C block of the stage's mask needs are not copied.
// Copies are 16-byte cp.async.cg (zero-filled past the matrix through src-size), 8-byte cp.async.ca
// pairs where the source is not 16-byte aligned (odd leading dimension or base), plain zero stores
// where nothing is inside.
//
// Tiles are taken in a grouped raster (8 tile rows at a time, column by column) rather than in the
// `order` array's heaviest-first order: the tiles running at once then share their panels of A and
// B in L2, where the heaviest-first order (tiles of equal work lie along diagonals) makes them
// disjoint and the kernel bound by DRAM traffic.

#define SPAMM_F64_TILE 128
#define SPAMM_F64_BK 16
#define SPAMM_F64_STAGES 4
#define SPAMM_F64_LD_OUTER 132                                        // [k][outer] row stride (doubles)
#define SPAMM_F64_LD_K 20                                             // [outer][k] row stride (doubles)
#define SPAMM_F64_OPERAND 2560                                        // doubles per operand and stage
#define SPAMM_F64_SHARED (SPAMM_F64_STAGES * 2 * SPAMM_F64_OPERAND * 8)  // bytes: 163840
#ifndef SPAMM_F64_GROUP
#define SPAMM_F64_GROUP 8  // tile rows per group of the raster; 0: tiles in `order`
#endif
// The mma shape on sm_90: 16 (m16n8k16), 8 (m16n8k8), 4 (m16n8k4) or 884 (m8n8k4, as on sm_80).
#ifndef SPAMM_F64_MMA
#define SPAMM_F64_MMA 16
#endif

__device__ __forceinline__ unsigned spamm_f64_smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// 16 bytes into shared memory at dst, of which the first src_bytes (8 or 16) come from src (16-byte
// aligned) and the rest are zero.
__device__ __forceinline__ void spamm_f64_cp16(unsigned dst, const double* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void spamm_f64_cp8(unsigned dst, const double* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void spamm_f64_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void spamm_f64_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Two consecutive stored elements src[0], src[1] into dst[0], dst[1] (dst 16-byte aligned), of which
// the first `valid` (0, 1 or 2) are inside the matrix; the others become zero.
__device__ __forceinline__ void spamm_f64_copy_pair(double* dst, const double* src, int valid) {
    if (valid == 0) {
        dst[0] = 0.0;
        dst[1] = 0.0;
    } else if ((((unsigned long long)src) & 15ull) == 0) {
        spamm_f64_cp16(spamm_f64_smem_addr(dst), src, 8 * valid);
    } else {
        spamm_f64_cp8(spamm_f64_smem_addr(dst), src);
        if (valid == 2) spamm_f64_cp8(spamm_f64_smem_addr(dst + 1), src + 1);
        else dst[1] = 0.0;
    }
}

__device__ __forceinline__ int spamm_f64_clamp2(sgpu_i64 left) { return left <= 0 ? 0 : left >= 2 ? 2 : (int)left; }

// D (16 x 8, rows g / g + 8, columns 2q, 2q + 1) += A (16 x 16) * B (16 x 8) for lane (g, q) = (lane / 4,
// lane % 4): a[i] = A(g + 8 (i % 2), q + 4 (i / 2)), b[i] = B(q + 4 i, g). This k order is the one of
// m16n8k16's fragments; the smaller shapes take the same registers piecewise.
__device__ __forceinline__ void spamm_f64_mma(double* d, const double* a, const double* b) {
#if __CUDA_ARCH__ >= 900 && SPAMM_F64_MMA == 16
    asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
        "{%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]),
          "d"(b[1]), "d"(b[2]), "d"(b[3]));
#elif __CUDA_ARCH__ >= 900 && SPAMM_F64_MMA == 8
#pragma unroll
    for (int h = 0; h < 2; ++h)
        asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
            : "d"(a[4 * h]), "d"(a[4 * h + 1]), "d"(a[4 * h + 2]), "d"(a[4 * h + 3]), "d"(b[2 * h]), "d"(b[2 * h + 1]));
#elif __CUDA_ARCH__ >= 900 && SPAMM_F64_MMA == 4
#pragma unroll
    for (int s = 0; s < 4; ++s)
        asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
            : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
            : "d"(a[2 * s]), "d"(a[2 * s + 1]), "d"(b[s]));
#else
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                : "+d"(d[2 * h]), "+d"(d[2 * h + 1])
                : "d"(a[2 * s + h]), "d"(b[s]));
#endif
}

// The tile of this thread block: the grouped raster of SPAMM_F64_GROUP tile rows (column by column
// inside a group), or order[blockIdx.x].
__device__ __forceinline__ unsigned spamm_f64_tile(int m, int n, const unsigned* order) {
    if (SPAMM_F64_GROUP == 0) return order[blockIdx.x];
    unsigned rows = (unsigned)((m + SPAMM_F64_TILE - 1) / SPAMM_F64_TILE);
    unsigned cols = (unsigned)((n + SPAMM_F64_TILE - 1) / SPAMM_F64_TILE);
    unsigned b = blockIdx.x, first = b / (SPAMM_F64_GROUP * cols) * SPAMM_F64_GROUP;
    unsigned size = rows - first < SPAMM_F64_GROUP ? rows - first : SPAMM_F64_GROUP;
    unsigned idx = b - first * cols;
    return first + idx % size + idx / size * rows;
}

// A_KC: op(A) contiguous along k (A transposed), stored [row][k]; else [k][row]. B_KC: op(B)
// contiguous along k (B not transposed), stored [column][k]; else [k][column].
template <bool A_KC, bool B_KC>
__device__ __forceinline__ void spamm_f64_tiles(int m, int n, int k, int bs, double alpha, const double* a,
                                                sgpu_i64 lda, const double* b, sgpu_i64 ldb, double beta, double* c,
                                                sgpu_i64 ldc, const unsigned* order, const int* counts,
                                                const unsigned* lists, int list_stride) {
    constexpr int T = SPAMM_F64_TILE, BK = SPAMM_F64_BK, STAGES = SPAMM_F64_STAGES;
    // Element strides of the shared panels: (outer, k).
    constexpr int AR = A_KC ? SPAMM_F64_LD_K : 1, AK = A_KC ? 1 : SPAMM_F64_LD_OUTER;
    constexpr int BC = B_KC ? SPAMM_F64_LD_K : 1, BKS = B_KC ? 1 : SPAMM_F64_LD_OUTER;
    extern __shared__ __align__(16) double spamm_f64_pool[];

    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int g = lane >> 2, q = lane & 3;
    unsigned t = spamm_f64_tile(m, n, order);
    unsigned tile_rows = (unsigned)((m + T - 1) / T);
    SpammTileWork work;
    work.row0 = (sgpu_i64)(t % tile_rows) * T;
    work.col0 = (sgpu_i64)(t / tile_rows) * T;
    work.i0 = (int)(work.row0 / bs);
    work.j0 = (int)(work.col0 / bs);
    work.count = counts[t];
    work.list = lists + (sgpu_i64)t * list_stride;
    const sgpu_i64 row0 = work.row0, col0 = work.col0;

    // The C block of each 32-row / 32-column group of the tile, as a mask bit offset (4 bits per group;
    // a group past the matrix gets 15, whose bits no mask has).
    unsigned row_blocks = 0, col_blocks = 0;
#pragma unroll
    for (int x = 0; x < 4; ++x) {
        sgpu_i64 r = row0 + 32 * x, cl = col0 + 32 * x;
        row_blocks |= (r < m ? (unsigned)(r / bs - work.i0) : 15u) << (4 * x);
        col_blocks |= (cl < n ? (unsigned)(cl / bs - work.j0) : 15u) << (4 * x);
    }
    // The list mask in terms of the 4 x 4 groups: bit gr * 4 + gc set when group (gr, gc)'s C block
    // performs the k block.
    auto group_mask = [&](unsigned mask) -> unsigned {
        if (bs == 32) return mask;
        unsigned out = 0;
#pragma unroll
        for (int gr = 0; gr < 4; ++gr)
#pragma unroll
            for (int gc = 0; gc < 4; ++gc) {
                unsigned bi = (row_blocks >> (4 * gr)) & 15u, bj = (col_blocks >> (4 * gc)) & 15u;
                if (bi < 4 && bj < 4 && ((mask >> (bi * 4 + bj)) & 1u)) out |= 1u << (gr * 4 + gc);
            }
        return out;
    };

    // Copy assignment (4 pairs of doubles per operand and thread, per stage). Outer-contiguous panels:
    // pair (tid % 64) * 2 of the outer dimension, k rows tid / 64 + 4 j. k-contiguous panels: outer
    // tid / 8 + 32 j (group j), k pair (tid % 8) * 2.
    const int oc_outer = (tid & 63) * 2, oc_k = tid >> 6;
    const int kc_outer = tid >> 3, kc_k = (tid & 7) * 2;
    // Elements of this thread's outer-contiguous pair inside the matrix.
    const int a_rows_in = A_KC ? 0 : spamm_f64_clamp2(m - (row0 + oc_outer));
    const int b_cols_in = B_KC ? 0 : spamm_f64_clamp2(n - (col0 + oc_outer));

    auto issue = [&](int stage, sgpu_i64 s0, sgpu_i64 e, unsigned fm) {
        double* as = spamm_f64_pool + stage * (2 * SPAMM_F64_OPERAND);
        double* bsm = as + SPAMM_F64_OPERAND;
        if (A_KC) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (((fm >> (4 * j)) & 15u) == 0) continue;
                sgpu_i64 r = row0 + kc_outer + 32 * j, p = s0 + kc_k;
                int valid = r < m ? spamm_f64_clamp2(e - p) : 0;
                spamm_f64_copy_pair(as + (kc_outer + 32 * j) * SPAMM_F64_LD_K + kc_k, a + p + r * lda, valid);
            }
        } else if ((fm >> (4 * (oc_outer >> 5))) & 15u) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                int kk = oc_k + 4 * j;
                sgpu_i64 p = s0 + kk;
                int valid = p < e ? a_rows_in : 0;
                spamm_f64_copy_pair(as + kk * SPAMM_F64_LD_OUTER + oc_outer, a + (row0 + oc_outer) + p * lda, valid);
            }
        }
        if (B_KC) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if ((fm & (0x1111u << j)) == 0) continue;
                sgpu_i64 cl = col0 + kc_outer + 32 * j, p = s0 + kc_k;
                int valid = cl < n ? spamm_f64_clamp2(e - p) : 0;
                spamm_f64_copy_pair(bsm + (kc_outer + 32 * j) * SPAMM_F64_LD_K + kc_k, b + p + cl * ldb, valid);
            }
        } else if (fm & (0x1111u << (oc_outer >> 5))) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                int kk = oc_k + 4 * j;
                sgpu_i64 p = s0 + kk;
                int valid = p < e ? b_cols_in : 0;
                spamm_f64_copy_pair(bsm + kk * SPAMM_F64_LD_OUTER + oc_outer, b + (col0 + oc_outer) + p * ldb, valid);
            }
        }
    };

    // This lane's fragment elements, relative to a stage's panels.
    const int rh = warp & 1, cq = warp >> 1;
    const int a_lane = (16 * rh + g) * AR + q * AK;
    const int b_lane = (8 * cq + g) * BC + q * BKS;

    double acc[4][4][4];
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y)
#pragma unroll
            for (int z = 0; z < 4; ++z) acc[x][y][z] = 0.0;

    {
        SpammChunkCursor chunks(work, bs, k, BK);
        unsigned long long queue = 0;  // group masks of the issued chunks not yet consumed, oldest lowest
        int pending = 0, next_stage = 0;
        bool more = true;
        auto issue_next = [&]() {
            sgpu_i64 s0, e;
            unsigned mask;
            if (more) more = chunks.advance(s0, e, mask);
            if (more) {
                unsigned fm = group_mask(mask);
                issue(next_stage, s0, e, fm);
                queue |= (unsigned long long)fm << (16 * pending);
                ++pending;
                next_stage = next_stage + 1 == STAGES ? 0 : next_stage + 1;
            }
            spamm_f64_commit();
        };
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) issue_next();
        int stage = 0;
        while (pending > 0) {
            spamm_f64_wait<STAGES - 2>();
            __syncthreads();
            unsigned fm = (unsigned)(queue & 0xffffu);
            queue >>= 16;
            --pending;
            issue_next();
            const double* as = spamm_f64_pool + stage * (2 * SPAMM_F64_OPERAND) + a_lane;
            const double* bsm = spamm_f64_pool + stage * (2 * SPAMM_F64_OPERAND) + SPAMM_F64_OPERAND + b_lane;
            double bf[4][4];
#pragma unroll
            for (int gc = 0; gc < 4; ++gc)
#pragma unroll
                for (int i = 0; i < 4; ++i) bf[gc][i] = bsm[32 * gc * BC + 4 * i * BKS];
#pragma unroll
            for (int gr = 0; gr < 4; ++gr) {
                unsigned row = (fm >> (4 * gr)) & 15u;
                if (row == 0) continue;
                double af[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) af[i] = as[(32 * gr + 8 * (i & 1)) * AR + 4 * (i >> 1) * AK];
#pragma unroll
                for (int gc = 0; gc < 4; ++gc)
                    if ((row >> gc) & 1u) spamm_f64_mma(acc[gr][gc], af, bf[gc]);
            }
            stage = stage + 1 == STAGES ? 0 : stage + 1;
        }
    }

#pragma unroll
    for (int gr = 0; gr < 4; ++gr)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            sgpu_i64 r = row0 + 32 * gr + 16 * rh + g + 8 * h;
            if (r >= m) continue;
#pragma unroll
            for (int gc = 0; gc < 4; ++gc)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    sgpu_i64 cl = col0 + 32 * gc + 8 * cq + 2 * q + e;
                    if (cl < n) spamm_store_c<double, double>(c, ldc, r, cl, alpha, acc[gr][gc][2 * h + e], beta);
                }
        }
}

extern "C" __global__ void __launch_bounds__(256, 1) spamm_tiles_f64(int m, int n, int k, int bs, double alpha,
        const double* a, sgpu_i64 lda, int ta, const double* b, sgpu_i64 ldb, int tb, double beta, double* c,
        sgpu_i64 ldc, const unsigned* order, const int* counts, const unsigned* lists, int list_stride) {
    if (ta) {
        if (tb) spamm_f64_tiles<true, false>(m, n, k, bs, alpha, a, lda, b, ldb, beta, c, ldc, order, counts, lists, list_stride);
        else spamm_f64_tiles<true, true>(m, n, k, bs, alpha, a, lda, b, ldb, beta, c, ldc, order, counts, lists, list_stride);
    } else {
        if (tb) spamm_f64_tiles<false, false>(m, n, k, bs, alpha, a, lda, b, ldb, beta, c, ldc, order, counts, lists, list_stride);
        else spamm_f64_tiles<false, true>(m, n, k, bs, alpha, a, lda, b, ldb, beta, c, ldc, order, counts, lists, list_stride);
    }
}

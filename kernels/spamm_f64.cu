// SpAMM tile kernel for FP64 on the tensor cores (DMMA): see kernels/spamm_tiles.cuh for the work
// lists, the tile order and the argument order. Every product is an IEEE FP64 fused multiply-add,
// accumulated in FP64 (results differ from the CUDA-core kernels by the order of the sums only).
//
// Tile 128 x 128 (up to 4 x 4 C blocks of 32), 256 threads = 8 warps. The fragments of a warp are
// spread over the whole tile rather than a corner of it: warp w holds, in each of the 4 x 4 groups of
// 32 x 32 outputs, the 16 x 8 fragment at rows 16 * (w % 2).., columns 8 * (w / 2)... Every warp
// therefore performs exactly the products the mask allows in every group (popcount(mask) mma per
// 16 k), so the warps stay balanced whatever the mask; a 32 x 32 group lies inside one C block
// (block sizes are multiples of 32), and so does each fragment. sm_90 issues m16n8k16 (DMMA.16x8x16;
// m8n8k4, m16n8k4 and m16n8k8 measured 1.5x, 1.05x and 1.02x slower on an H100), sm_80 m8n8k4.
//
// op(A) and op(B) reach shared memory through a 4-stage cp.async pipeline, 16 k per stage (a stage
// never crosses a k block, so it carries one mask). Each operand keeps its stored contiguity: a
// panel contiguous along its outer dimension (rows of op(A) / columns of op(B)) is stored [k][outer]
// with a row stride of 132 doubles, one contiguous along k is stored [outer][k] with 20; both strides
// are 4 mod 16 (doubles), so that the fragment reads of a half warp hit 16 distinct bank pairs. The
// 32-row (32-column) groups of op(A) (op(B)) that no C block of the stage's mask needs are not copied.
// Copies are 16-byte cp.async.cg with no checks for whole chunks of tiles inside the matrix from
// aligned sources; elsewhere zero-filled past the matrix through src-size, 8-byte cp.async.ca pairs
// where the source is not 16-byte aligned (odd leading dimension or base), plain zero stores where
// nothing is inside. The next chunk's copies are issued in four parts between the current chunk's
// group rows of mma, so that the tensor cores have work queued meanwhile; the next list entry is
// loaded a k block ahead.

#define SPAMM_F64_TILE 128
#define SPAMM_F64_BK 16
#define SPAMM_F64_STAGES 4
#define SPAMM_F64_LD_OUTER 132                                        // [k][outer] row stride (doubles)
#define SPAMM_F64_LD_K 20                                             // [outer][k] row stride (doubles)
#define SPAMM_F64_OPERAND 2560                                        // doubles per operand and stage
#define SPAMM_F64_SHARED (SPAMM_F64_STAGES * 2 * SPAMM_F64_OPERAND * 8)  // bytes: 163840

__device__ __forceinline__ void spamm_f64_cp8(unsigned dst, const double* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(src) : "memory");
}

// Two consecutive stored elements src[0], src[1] into dst[0], dst[1] (dst 16-byte aligned), of which
// the first `valid` (0, 1 or 2) are inside the matrix; the others become zero.
__device__ __forceinline__ void spamm_f64_copy_pair(double* dst, const double* src, int valid) {
    if (valid == 0) {
        dst[0] = 0.0;
        dst[1] = 0.0;
    } else if (valid == 2 && (((unsigned long long)src) & 15ull) == 0) {
        spamm_cp_async16(spamm_smem_address(dst), src, 16);
    } else {
        // Unaligned, or one element: 8-byte copies (16 bytes from one element would reach past it).
        spamm_f64_cp8(spamm_smem_address(dst), src);
        if (valid == 2) spamm_f64_cp8(spamm_smem_address(dst + 1), src + 1);
        else dst[1] = 0.0;
    }
}

__device__ __forceinline__ int spamm_f64_clamp2(sgpu_i64 left) { return left <= 0 ? 0 : left >= 2 ? 2 : (int)left; }

// D (16 x 8, rows g / g + 8, columns 2q, 2q + 1) += A (16 x 16) * B (16 x 8) for lane (g, q) = (lane / 4,
// lane % 4): a[i] = A(g + 8 (i % 2), q + 4 (i / 2)), b[i] = B(q + 4 i, g). This k order is the one of
// m16n8k16's fragments; m8n8k4 (sm_80) takes the same registers piecewise.
__device__ __forceinline__ void spamm_f64_mma(double* d, const double* a, const double* b) {
#if __CUDA_ARCH__ >= 900
    asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
        "{%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]),
          "d"(b[1]), "d"(b[2]), "d"(b[3]));
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

template <int V>
struct SpammF64Int {
    static constexpr int value = V;
};

// A_KC: op(A) contiguous along k (A transposed), stored [row][k]; else [k][row]. B_KC: op(B)
// contiguous along k (B not transposed), stored [column][k]; else [k][column].
template <bool A_KC, bool B_KC>
__device__ __forceinline__ void spamm_f64_tiles(int m, int n, int k, int bs, double alpha, const double* a,
                                                sgpu_i64 lda, const double* b, sgpu_i64 ldb, double beta, double* c,
                                                sgpu_i64 ldc, const unsigned* order, const int* counts,
                                                const unsigned* lists, int list_stride) {
    constexpr int T = SPAMM_F64_TILE, STAGES = SPAMM_F64_STAGES;
    constexpr int STAGE = 2 * SPAMM_F64_OPERAND;  // doubles per stage: A then B
    // Element strides of the shared panels: (outer, k).
    constexpr int AR = A_KC ? SPAMM_F64_LD_K : 1, AK = A_KC ? 1 : SPAMM_F64_LD_OUTER;
    constexpr int BC = B_KC ? SPAMM_F64_LD_K : 1, BKS = B_KC ? 1 : SPAMM_F64_LD_OUTER;
    extern __shared__ __align__(16) double spamm_f64_pool[];

    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int g = lane >> 2, q = lane & 3;
    SpammTileWork work = spamm_tile_work(m, bs, T, T, order, counts, lists, list_stride);
    const int row0 = (int)work.row0, col0 = (int)work.col0, i0 = work.i0, j0 = work.j0;

    // The C block of each 32-row / 32-column group of the tile, as a mask bit offset (4 bits per group;
    // a group past the matrix gets 15, whose bits no mask has).
    unsigned row_blocks = 0, col_blocks = 0;
#pragma unroll
    for (int x = 0; x < 4; ++x) {
        int r = row0 + 32 * x, cl = col0 + 32 * x;
        row_blocks |= (r < m ? (unsigned)(r / bs - i0) : 15u) << (4 * x);
        col_blocks |= (cl < n ? (unsigned)(cl / bs - j0) : 15u) << (4 * x);
    }
    // A list mask in terms of the 4 x 4 groups: bit gr * 4 + gc set when group (gr, gc)'s C block
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

    // Copies: 4 pairs of doubles per operand and thread and stage. An outer-contiguous panel: the pair
    // at outer (tid % 64) * 2 (group (tid % 64) / 16), k rows tid / 64 + 4 j. A k-contiguous panel:
    // outer tid / 8 + 32 j (group j), the k pair (tid % 8) * 2. Per operand: the source of copy 0 at
    // chunk start 0, the step between copies, the step per k, and the shared offset of copy 0.
    const int oc_outer = (tid & 63) * 2, oc_k = tid >> 6;
    const int kc_outer = tid >> 3, kc_k = (tid & 7) * 2;
    const double* a_src = A_KC ? a + kc_k + (sgpu_i64)(row0 + kc_outer) * lda : a + (row0 + oc_outer) + oc_k * lda;
    const sgpu_i64 a_step = A_KC ? 32 * lda : 4 * lda, a_kstep = A_KC ? 1 : lda;
    const int a_off = A_KC ? kc_outer * SPAMM_F64_LD_K + kc_k : oc_k * SPAMM_F64_LD_OUTER + oc_outer;
    const double* b_src = B_KC ? b + kc_k + (sgpu_i64)(col0 + kc_outer) * ldb : b + (col0 + oc_outer) + oc_k * ldb;
    const sgpu_i64 b_step = B_KC ? 32 * ldb : 4 * ldb, b_kstep = B_KC ? 1 : ldb;
    const int b_off = SPAMM_F64_OPERAND + (B_KC ? kc_outer * SPAMM_F64_LD_K + kc_k : oc_k * SPAMM_F64_LD_OUTER + oc_outer);
    // Copies inside the matrix along the outer dimension: k-contiguous, a bit per copy; outer-contiguous,
    // how many of the pair (the same for every copy).
    int a_outer_in = 0, b_outer_in = 0;
    if (A_KC) {
#pragma unroll
        for (int j = 0; j < 4; ++j) a_outer_in |= (row0 + kc_outer + 32 * j < m) << j;
    } else {
        a_outer_in = spamm_f64_clamp2(m - (row0 + oc_outer));
    }
    if (B_KC) {
#pragma unroll
        for (int j = 0; j < 4; ++j) b_outer_in |= (col0 + kc_outer + 32 * j < n) << j;
    } else {
        b_outer_in = spamm_f64_clamp2(n - (col0 + oc_outer));
    }
    const unsigned pool_addr = spamm_smem_address(spamm_f64_pool);

    // Whole chunks of a tile inside the matrix, from 16-byte aligned sources (even leading dimension
    // and base), take one cp.async.cg of 16 bytes per pair with no checks.
    const bool a_fast = (((unsigned long long)a_src | (unsigned long long)(a_step * 8) | (unsigned long long)(a_kstep * 16)) & 15ull) == 0 &&
                        (A_KC ? a_outer_in == 15 : a_outer_in == 2);
    const bool b_fast = (((unsigned long long)b_src | (unsigned long long)(b_step * 8) | (unsigned long long)(b_kstep * 16)) & 15ull) == 0 &&
                        (B_KC ? b_outer_in == 15 : b_outer_in == 2);

    // Copies J0, J0 + 1 of one operand for chunk [s0, e) into stage `stage`; `need` has bit j when copy
    // j's group is needed (k-contiguous) or, for an outer-contiguous panel, is non-zero when the
    // thread's group is.
    auto copy_operand = [&](auto j0, bool kc, bool fast, const double* src0, sgpu_i64 step, sgpu_i64 kstep, int off,
                            int outer_in, int stage, int s0, int e, unsigned need) {
        constexpr int J0 = decltype(j0)::value;
        const double* src = src0 + s0 * kstep;
        unsigned dst_addr = pool_addr + 8u * (unsigned)(stage * STAGE + off);
        if (fast && e - s0 == SPAMM_F64_BK) {
#pragma unroll
            for (int j = J0; j < J0 + 2; ++j) {
                if (kc ? !((need >> j) & 1u) : !need) continue;
                int doff = j * (kc ? 32 * SPAMM_F64_LD_K : 4 * SPAMM_F64_LD_OUTER);
                spamm_cp_async16(dst_addr + 8u * doff, src + j * step, 16);
            }
            return;
        }
        double* dst = spamm_f64_pool + stage * STAGE + off;
#pragma unroll
        for (int j = J0; j < J0 + 2; ++j) {
            int valid;
            if (kc) {
                if (!((need >> j) & 1u)) continue;
                valid = (outer_in >> j) & 1 ? spamm_f64_clamp2(e - (s0 + kc_k)) : 0;
            } else {
                if (!need) break;
                valid = s0 + oc_k + 4 * j < e ? outer_in : 0;
            }
            const double* sj = src + j * step;
            int doff = j * (kc ? 32 * SPAMM_F64_LD_K : 4 * SPAMM_F64_LD_OUTER);
            if (valid == 2 && (((unsigned long long)sj) & 15ull) == 0) spamm_cp_async16(dst_addr + 8u * doff, sj, 16);
            else spamm_f64_copy_pair(dst + doff, sj, valid);
        }
    };
    // Part p (0..3) of a chunk's copies: A's copies 0, 1, then A's 2, 3, B's 0, 1, B's 2, 3.
    auto issue_part = [&](int part, int stage, int s0, int e, unsigned fm) {
        if (part < 2) {
            unsigned need = A_KC ? (((fm & 0xfu) != 0) | (((fm & 0xf0u) != 0) << 1) | (((fm & 0xf00u) != 0) << 2) |
                                    (((fm & 0xf000u) != 0) << 3))
                                 : (fm >> (4 * (oc_outer >> 5))) & 15u;
            if (part == 0) copy_operand(SpammF64Int<0>(), A_KC, a_fast, a_src, a_step, a_kstep, a_off, a_outer_in, stage, s0, e, need);
            else copy_operand(SpammF64Int<2>(), A_KC, a_fast, a_src, a_step, a_kstep, a_off, a_outer_in, stage, s0, e, need);
        } else {
            unsigned need = B_KC ? (((fm & 0x1111u) != 0) | (((fm & 0x2222u) != 0) << 1) | (((fm & 0x4444u) != 0) << 2) |
                                    (((fm & 0x8888u) != 0) << 3))
                                 : fm & (0x1111u << (oc_outer >> 5));
            if (part == 2) copy_operand(SpammF64Int<0>(), B_KC, b_fast, b_src, b_step, b_kstep, b_off, b_outer_in, stage, s0, e, need);
            else copy_operand(SpammF64Int<2>(), B_KC, b_fast, b_src, b_step, b_kstep, b_off, b_outer_in, stage, s0, e, need);
        }
    };

    // This lane's fragment elements, relative to a stage's panels.
    const int rh = warp & 1, cq = warp >> 1;
    const int a_lane = (16 * rh + g) * AR + q * AK;
    const int b_lane = SPAMM_F64_OPERAND + (8 * cq + g) * BC + q * BKS;

    double acc[4][4][4];
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y)
#pragma unroll
            for (int z = 0; z < 4; ++z) acc[x][y][z] = 0.0;

    {
        SpammChunkCursor<SPAMM_F64_BK> chunks(work, bs, k);
        unsigned long long queue = 0;  // group masks of the issued chunks not yet consumed, oldest lowest
        unsigned block_fm = 0;
        int pending = 0, next_stage = 0;
        bool more = true;
        // The next chunk: found before a stage's mma, its copies issued in four parts between them.
        int n_s0 = 0, n_e = 0;
        bool have = false;
        auto find_next = [&]() {
            bool fresh;
            unsigned chunk_mask;
            have = more && chunks.advance(n_s0, n_e, chunk_mask, fresh);
            more = have;
            if (have && fresh) block_fm = group_mask(chunk_mask);
        };
        auto finish_next = [&]() {
            if (have) {
                queue |= (unsigned long long)block_fm << (16 * pending);
                ++pending;
                next_stage = next_stage + 1 == STAGES ? 0 : next_stage + 1;
            }
            spamm_cp_async_commit();
        };
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            find_next();
            if (have)
#pragma unroll
                for (int part = 0; part < 4; ++part) issue_part(part, next_stage, n_s0, n_e, block_fm);
            finish_next();
        }
        int stage = 0;
        while (pending > 0) {
            spamm_cp_async_wait<STAGES - 2>();
            __syncthreads();
            unsigned fm = (unsigned)(queue & 0xffffu);
            queue >>= 16;
            --pending;
            find_next();
            const double* as = spamm_f64_pool + stage * STAGE + a_lane;
            const double* bsm = spamm_f64_pool + stage * STAGE + b_lane;
            double bf[4][4];
#pragma unroll
            for (int gc = 0; gc < 4; ++gc)
#pragma unroll
                for (int i = 0; i < 4; ++i) bf[gc][i] = bsm[32 * gc * BC + 4 * i * BKS];
#pragma unroll
            for (int gr = 0; gr < 4; ++gr) {
                unsigned row = (fm >> (4 * gr)) & 15u;
                if (row != 0) {
                    double af[8];
#pragma unroll
                    for (int i = 0; i < 8; ++i) af[i] = as[(32 * gr + 8 * (i & 1)) * AR + 4 * (i >> 1) * AK];
#pragma unroll
                    for (int gc = 0; gc < 4; ++gc)
                        if ((row >> gc) & 1u) spamm_f64_mma(acc[gr][gc], af, bf[gc]);
                }
                if (have) issue_part(gr, next_stage, n_s0, n_e, block_fm);
            }
            finish_next();
            stage = stage + 1 == STAGES ? 0 : stage + 1;
        }
    }

#pragma unroll
    for (int gr = 0; gr < 4; ++gr)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int r = row0 + 32 * gr + 16 * rh + g + 8 * h;
            if (r >= m) continue;
#pragma unroll
            for (int gc = 0; gc < 4; ++gc)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    int cl = col0 + 32 * gc + 8 * cq + 2 * q + e;
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

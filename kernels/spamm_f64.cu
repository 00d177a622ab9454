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
// The kernel is built to keep the tensor pipe fed with few other instructions (the version before
// this one issued about 46 instructions per DMMA, two warps per SM sub-partition could not hide them):
// - 32 k per stage (one stage per list entry at LoNum 32), so the barrier, the cursor and the copy
//   set-up are paid once per 32 DMMA of a warp; three stages of 64 KiB where the device gives
//   192 KiB of shared memory to a block, else two (the kernel reads which from %dynamic_smem_size).
// - 16-byte fragment loads. Which k of a stage the tensor core pairs with which is free as long as
//   op(A) and op(B) agree, and which tile row a fragment row stands for is free as long as op(A)'s
//   rows and C's rows agree. So the m16n8k16 fragment's k = q + 4s (lane q = lane % 4, slot s) reads
//   the stored k 2q + (s & 1) + 8 (s >> 1), and fragment rows g, g + 8 (g = lane / 4) are tile rows
//   2g, 2g + 1: then a lane's two A rows (op(A) stored [k][row]), or its k slots in pairs (op(B)
//   stored [column][k]), lie side by side in shared memory and one 16-byte load brings two fragment
//   elements. The other two layouts take 8-byte loads: op(B) stored [k][column] gives a lane one
//   column; op(A) stored [row][k] gives it one row's k slots in pairs, which the fragment's
//   registers do not hold side by side.
// - Panels kept in their stored contiguity, with no padding: one contiguous along its outer
//   dimension (rows of op(A) / columns of op(B)) is stored [k][outer], 128 doubles a row, the 16-byte
//   unit of an outer index XOR-ed by bits 1..2 of k; one contiguous along k is stored [outer][k], 32
//   doubles a row, k's bit 3 XOR-ed by bits 0 ^ 1 of the outer index. Every copy and every fragment
//   load of a quarter (16-byte) or half (8-byte) warp then hits distinct banks, but for op(A) stored
//   [row][k], whose 8-byte loads of a half warp fall on 8 distinct places (two-way conflicts).
// - Every address is a per-thread base plus a constant; the copies of a whole chunk inside the matrix
//   from aligned sources are one 16-byte cp.async.cg each, with no checks. The 32-row (32-column)
//   groups of op(A) (op(B)) that no C block of the chunk needs are not copied. Chunks at the matrix's
//   edges (a partial tile, a partial k block) or from sources that are not 16-byte aligned (odd
//   leading dimension or base) go through registers element by element, zero-filled outside.
// - The next chunk's copies are issued after the first group row of the current chunk's products,
//   so that the tensor cores have work queued meanwhile; the list is read one entry ahead.

#define SPAMM_F64_TILE 128
#define SPAMM_F64_BK 32                                             // k per stage
#define SPAMM_F64_OPERAND (SPAMM_F64_TILE * SPAMM_F64_BK)           // doubles per operand and stage
#define SPAMM_F64_STAGE_BYTES (2 * SPAMM_F64_OPERAND * 8)           // 65536: op(A) then op(B)
// Dynamic shared memory: 3 stages (196608 bytes) where the device allows, else 2 (131072); the
// launcher (TileKernel in src/backend/cuda/spamm.rs) passes one of the two.

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

__device__ __forceinline__ void spamm_f64_lds128(double& x, double& y, unsigned addr) {
    asm volatile("ld.shared.v2.f64 {%0, %1}, [%2];\n" : "=d"(x), "=d"(y) : "r"(addr));
}
__device__ __forceinline__ double spamm_f64_lds64(unsigned addr) {
    double x;
    asm volatile("ld.shared.f64 %0, [%1];\n" : "=d"(x) : "r"(addr));
    return x;
}
// An 8-byte load that ptxas does not merge with its neighbour into a 16-byte one (whose two values
// would then have to be moved into the fragment's registers one by one).
__device__ __forceinline__ double spamm_f64_lds64_single(unsigned addr) {
    double x;
    asm volatile("ld.volatile.shared.f64 %0, [%1];\n" : "=d"(x) : "r"(addr));
    return x;
}
__device__ __forceinline__ void spamm_f64_sts128(unsigned addr, double x, double y) {
    asm volatile("st.shared.v2.f64 [%0], {%1, %2};\n" ::"r"(addr), "d"(x), "d"(y) : "memory");
}

// Byte offsets of element (k, outer) in a [k][outer] panel and (outer, k) in an [outer][k] one.
__device__ __forceinline__ unsigned spamm_f64_outer_major(int kk, int outer) {
    return (unsigned)(kk * SPAMM_F64_TILE + (outer ^ (((kk >> 1) & 3) << 2))) * 8u;
}
__device__ __forceinline__ unsigned spamm_f64_k_major(int outer, int kk) {
    return (unsigned)(outer * SPAMM_F64_BK + (kk ^ (((outer ^ (outer >> 1)) & 1) << 3))) * 8u;
}

// One operand's copies into a stage: 8 pairs of consecutive stored elements per thread. KC: the panel
// is contiguous along k (stored [outer][k]): pair j at outer tid / 16 + 16 j (group j / 2), k pair
// (tid % 16) * 2. Else (stored [k][outer]): pair j at outer (tid % 64) * 2 (group (tid % 64) / 16), k
// tid / 64 + 4 j.
template <bool KC>
struct SpammF64Operand {
    const double* first;  // pair 0's first element at chunk start 0 (may lie outside the matrix)
    sgpu_i64 ld;
    unsigned dst[2];      // byte offset of pair 0 (dst[0]) and pair 1 (dst[1]) in the operand's stage
    int kk;               // pair 0's k within the chunk
    int left;             // outer indices of the matrix from pair 0's on
    int group;            // [k][outer]: the 32-outer group of every pair
    bool interior;        // the tile's 128 outer indices all lie inside the matrix

    __device__ __forceinline__ void init(const double* x, sgpu_i64 ld_, int outer0, int limit, int tid) {
        ld = ld_;
        int outer;  // pair 0's outer index within the tile
        if (KC) {
            outer = tid >> 4;
            kk = (tid & 15) * 2;
            first = x + kk + (sgpu_i64)(outer0 + outer) * ld;
            dst[0] = dst[1] = spamm_f64_k_major(outer, kk);
            group = 0;
        } else {
            outer = (tid & 63) * 2;
            kk = tid >> 6;
            first = x + (outer0 + outer) + (sgpu_i64)kk * ld;
            dst[0] = spamm_f64_outer_major(kk, outer);
            dst[1] = spamm_f64_outer_major(kk + 4, outer) - 4 * SPAMM_F64_TILE * 8;
            group = outer >> 5;
        }
        left = limit - (outer0 + outer);
        interior = limit - outer0 >= SPAMM_F64_TILE;
    }

    // Bytes between pair j's and pair 0's stage offsets, beyond dst[j & 1] - dst[0].
    static __device__ __forceinline__ unsigned pair_step(int j) {
        return (unsigned)(j * (KC ? 16 * SPAMM_F64_BK : 4 * SPAMM_F64_TILE) * 8);
    }
    __device__ __forceinline__ bool needed(unsigned groups, int j) const {
        return ((groups >> (KC ? (j >> 1) : group)) & 1u) != 0;
    }

    // Whole chunk [s0, s0 + 32) of an interior tile from 16-byte aligned pairs: one cp.async per
    // needed pair. `groups`: bit g set when the chunk's mask needs group g.
    __device__ __forceinline__ void copy_fast(unsigned stage, int s0, unsigned groups) const {
        // A running source pointer: offsets j * step, invariant across chunks, would be kept in
        // (spilled) registers.
        const double* src = KC ? first + s0 : first + (sgpu_i64)s0 * ld;
        const sgpu_i64 step = KC ? 16 * ld : 4 * ld;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if (needed(groups, j)) sgpu_cp_async16(stage + dst[j & 1] + pair_step(j), src);
            src += step;
        }
    }

    // Any chunk [s0, e): element by element through registers, zero outside the matrix or past e.
    __device__ __forceinline__ void copy_checked(unsigned stage, int s0, int e, unsigned groups) const {
        const double* p = KC ? first + s0 : first + (sgpu_i64)s0 * ld;
        const sgpu_i64 step = KC ? 16 * ld : 4 * ld;
#pragma unroll
        for (int j = 0; j < 8; ++j, p += step) {
            if (!needed(groups, j)) continue;
            double x = 0.0, y = 0.0;
            if (KC) {
                int ks = s0 + kk;
                if (left - 16 * j > 0) {
                    if (ks < e) x = p[0];
                    if (ks + 1 < e) y = p[1];
                }
            } else if (s0 + kk + 4 * j < e) {
                if (left > 0) x = p[0];
                if (left > 1) y = p[1];
            }
            spamm_f64_sts128(stage + dst[j & 1] + pair_step(j), x, y);
        }
    }
};

// A_KC: op(A) contiguous along k (A transposed), stored [row][k]; else [k][row]. B_KC: op(B)
// contiguous along k (B not transposed), stored [column][k]; else [k][column].
template <bool A_KC, bool B_KC>
__device__ __forceinline__ void spamm_f64_tiles(int m, int n, int k, int bs, double alpha, const double* a,
                                                sgpu_i64 lda, const double* b, sgpu_i64 ldb, double beta, double* c,
                                                sgpu_i64 ldc, const unsigned* order, const int* counts,
                                                const unsigned* lists, int list_stride) {
    constexpr int T = SPAMM_F64_TILE, BK = SPAMM_F64_BK;
    extern __shared__ __align__(128) unsigned char spamm_f64_pool[];
    unsigned shared_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(shared_bytes));
    const bool three = shared_bytes >= 3 * SPAMM_F64_STAGE_BYTES;
    const int stages = three ? 3 : 2;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, q = lane & 3;
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
    // Groups of rows (columns) with any product in a group mask.
    auto row_groups = [](unsigned fm) -> unsigned {
        return ((fm & 0xfu) != 0) | (((fm & 0xf0u) != 0) << 1) | (((fm & 0xf00u) != 0) << 2) | (((fm & 0xf000u) != 0) << 3);
    };
    auto col_groups = [](unsigned fm) -> unsigned { return (fm | fm >> 4 | fm >> 8 | fm >> 12) & 15u; };

    SpammF64Operand<A_KC> op_a;
    SpammF64Operand<B_KC> op_b;
    op_a.init(a, lda, row0, m, tid);
    op_b.init(b, ldb, col0, n, tid);
    const bool aligned = ((((unsigned long long)a | (unsigned long long)b) & 15ull) == 0) && ((lda | ldb) & 1) == 0;
    const bool a_fast = aligned && op_a.interior, b_fast = aligned && op_b.interior;
    const unsigned pool = sgpu_smem_address(spamm_f64_pool);

    // Fragment loads: this lane's byte offsets within a stage's panels (the rest are constants).
    const int rh = warp & 1, cq = warp >> 1;
    unsigned a_frag[4];  // [k][row]: [0]; [row][k]: [h * 2 + c]
    if (A_KC) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) a_frag[h * 2 + cc] = spamm_f64_k_major(16 * rh + 2 * g + h, 2 * q + 8 * cc);
    } else {
        a_frag[0] = spamm_f64_outer_major(2 * q, 16 * rh + 2 * g);
    }
    unsigned b_frag[2];  // [column][k]: [c]; [k][column]: [0]
    if (B_KC) {
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) b_frag[cc] = SPAMM_F64_OPERAND * 8 + spamm_f64_k_major(8 * cq + g, 2 * q + 8 * cc);
    } else {
        b_frag[0] = SPAMM_F64_OPERAND * 8 + spamm_f64_outer_major(2 * q, 8 * cq + g);
    }

    double acc[4][4][4];
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y)
#pragma unroll
            for (int z = 0; z < 4; ++z) acc[x][y][z] = 0.0;

    SpammChunkCursor<BK> chunks(work, bs, k);
    unsigned block_fm = 0;
    // Queues the next chunk's copies into `stage` and returns its group mask (0: none left).
    auto issue = [&](int stage) -> unsigned {
        int s0, e;
        unsigned mask;
        bool fresh;
        unsigned fm = 0;
        if (chunks.advance(s0, e, mask, fresh)) {
            if (fresh) block_fm = group_mask(mask);
            fm = block_fm;
            unsigned base = pool + (unsigned)stage * SPAMM_F64_STAGE_BYTES;
            bool full = e - s0 == BK;
            unsigned ra = row_groups(fm), cb = col_groups(fm);
            if (a_fast && full) op_a.copy_fast(base, s0, ra);
            else op_a.copy_checked(base, s0, e, ra);
            if (b_fast && full) op_b.copy_fast(base + SPAMM_F64_OPERAND * 8, s0, cb);
            else op_b.copy_checked(base + SPAMM_F64_OPERAND * 8, s0, e, cb);
        }
        sgpu_cp_async_commit();
        return fm;
    };

    // The products of one stage: two steps of 16 k; the next chunk is issued by `refill` after the
    // first group row of the first step.
    auto compute = [&](int stage, unsigned fm, auto refill) {
        const unsigned base = pool + (unsigned)stage * SPAMM_F64_STAGE_BYTES;
        const unsigned cols = col_groups(fm);
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            double bf[4][4];
#pragma unroll
            for (int gc = 0; gc < 4; ++gc) {
                if (!((cols >> gc) & 1u)) continue;
                if (B_KC) {
                    // [column][k]: column 32 gc + 8 cq + g, stored k 16 u + 2q + 8c (+1).
#pragma unroll
                    for (int cc = 0; cc < 2; ++cc)
                        spamm_f64_lds128(bf[gc][2 * cc], bf[gc][2 * cc + 1],
                                         base + b_frag[cc] + (unsigned)((32 * gc * BK + 16 * u) * 8));
                } else {
                    // [k][column]: stored k 16 u + 2q + (s & 1) + 8 (s >> 1), column 32 gc + 8 cq + g.
#pragma unroll
                    for (int s = 0; s < 4; ++s)
                        bf[gc][s] = spamm_f64_lds64(base + b_frag[0] +
                                                    (unsigned)(((16 * u + (s & 1) + 8 * (s >> 1)) * T + 32 * gc) * 8));
                }
            }
#pragma unroll
            for (int gr = 0; gr < 4; ++gr) {
                const unsigned row = (fm >> (4 * gr)) & 15u;
                if (row != 0) {
                    double af[8];
                    if (A_KC) {
                        // [row][k]: row 32 gr + 16 rh + 2g + h, stored k 16 u + 2q + (s & 1) + 8 (s >> 1).
#pragma unroll
                        for (int s = 0; s < 4; ++s)
#pragma unroll
                            for (int h = 0; h < 2; ++h)
                                af[2 * s + h] = spamm_f64_lds64_single(base + a_frag[h * 2 + (s >> 1)] +
                                                                       (unsigned)((32 * gr * BK + 16 * u + (s & 1)) * 8));
                    } else {
                        // [k][row]: stored k 16 u + 2q + (s & 1) + 8 (s >> 1), rows 32 gr + 16 rh + 2g, +1.
#pragma unroll
                        for (int s = 0; s < 4; ++s)
                            spamm_f64_lds128(af[2 * s], af[2 * s + 1],
                                             base + a_frag[0] + (unsigned)(((16 * u + (s & 1) + 8 * (s >> 1)) * T + 32 * gr) * 8));
                    }
#pragma unroll
                    for (int gc = 0; gc < 4; ++gc)
                        if ((row >> gc) & 1u) spamm_f64_mma(acc[gr][gc], af, bf[gc]);
                }
                if (u == 0 && gr == 0) refill();
            }
        }
    };

    unsigned next0 = issue(0), next1 = three ? issue(1) : 0u;
    int stage = 0;
    while (next0 != 0) {
        if (three) sgpu_cp_async_wait<1>();
        else sgpu_cp_async_wait<0>();
        __syncthreads();
        const unsigned fm = next0;
        const int refill_stage = stage == 0 ? stages - 1 : stage - 1;
        if (three) {
            next0 = next1;
            compute(stage, fm, [&]() { next1 = issue(refill_stage); });
        } else {
            compute(stage, fm, [&]() { next0 = issue(refill_stage); });
        }
        stage = stage + 1 == stages ? 0 : stage + 1;
    }
    sgpu_cp_async_wait<0>();

    // C: fragment rows g, g + 8 are tile rows 2g, 2g + 1, so a lane's d[0], d[2] (and d[1], d[3]) are
    // one column's two adjacent rows: a 16-byte store where aligned.
    const bool c_pairs = (((unsigned long long)c) & 15ull) == 0 && (ldc & 1) == 0;
#pragma unroll
    for (int gr = 0; gr < 4; ++gr) {
        const int r = row0 + 32 * gr + 16 * rh + 2 * g;
        if (r >= m) continue;
#pragma unroll
        for (int gc = 0; gc < 4; ++gc)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int cl = col0 + 32 * gc + 8 * cq + 2 * q + e;
                if (cl >= n) continue;
                if (c_pairs && r + 1 < m) {
                    double v0 = alpha * acc[gr][gc][e], v1 = alpha * acc[gr][gc][2 + e];
                    double* out = c + r + (sgpu_i64)cl * ldc;
                    if (beta != 0.0) {
                        double o0, o1;
                        asm volatile("ld.global.v2.f64 {%0, %1}, [%2];\n" : "=d"(o0), "=d"(o1) : "l"(out));
                        v0 += beta * o0;
                        v1 += beta * o1;
                    }
                    asm volatile("st.global.v2.f64 [%0], {%1, %2};\n" ::"l"(out), "d"(v0), "d"(v1) : "memory");
                } else {
                    spamm_store_c<double, double>(c, ldc, r, cl, alpha, acc[gr][gc][e], beta);
                    if (r + 1 < m) spamm_store_c<double, double>(c, ldc, r + 1, cl, alpha, acc[gr][gc][2 + e], beta);
                }
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

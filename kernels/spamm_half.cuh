// SpAMM tile kernels on tensor cores, shared part (between kernels/spamm_tiles.cuh and
// kernels/spamm_f16.cu or kernels/spamm_bf16.cu, one module each so that a program using one format
// compiles only its own): f16 or bf16 inputs, f32 accumulation (Algorithm 3); see spamm_tiles.cuh
// for the work lists and the argument order. The formats differ only in the mma instruction and the
// conversions of C: data moves as 16-bit patterns.
//
// One 128 x 128 tile of C per thread block of 4 warps (2 x 2), each warp owning a 64 x 64 quarter as
// 4 x 8 m16n8k16 accumulators (f32). The warp's quarter splits into 2 x 2 squares of 32 x 32, each
// inside one C block (block sizes are multiples of 32, tiles start at multiples of 128): a square's
// 8 mma per k step are issued only when its C block performs the chunk's k block (warp-uniform).
//
// k advances 32 at a time (a chunk never crosses a k block) through a SPAMM_H_STAGES-deep ring of
// shared stages filled by 16-byte cp.async.cg (groups at the matrix's edge through registers), one
// commit group per chunk. Each operand's stage is laid out so that a 16-byte group is 8 elements
// contiguous in global memory:
//   "k-major" [outer][32 p], 64-byte rows (A transposed, B not): fragments by ldmatrix;
//   "mn-major" [32 p][128 outer], 256-byte rows (A not transposed, B transposed): ldmatrix.trans;
// both XOR-swizzled at 16-byte granularity so that ldmatrix phases and cp.async writes are free of
// bank conflicts. Groups of a row (A) / column (B) block that no C block of the tile uses in the
// chunk are not loaded (no mma reads them). When a base pointer is not 16-byte aligned or a leading
// dimension not a multiple of 8, the groups go through registers element by element instead.
// The k block list is read one entry ahead, so its latency hides behind a chunk's products.
// Epilogue: the accumulators staged as f32 in shared memory, C = alpha * acc + beta * C read / written
// coalesced, 8 bytes per thread where aligned, stored with an evict-first hint.

#define SPAMM_H_TILE 128
#define SPAMM_H_CHUNK 32
#define SPAMM_H_STAGES 4
#define SPAMM_H_WN 64  // columns per warp (64 or 32); each warp has 64 rows
#define SPAMM_H_THREADS (64 * SPAMM_H_TILE / SPAMM_H_WN)
#define SPAMM_H_GROUPS (SPAMM_H_TILE * SPAMM_H_CHUNK / 8 / SPAMM_H_THREADS)  // 16-byte groups per thread and operand
#define SPAMM_H_GROUP_STRIDE (SPAMM_H_THREADS * 16)  // bytes between a thread's groups in a stage
#define SPAMM_H_OPERAND_BYTES (SPAMM_H_TILE * SPAMM_H_CHUNK * 2)  // one operand's stage: 8 KiB
#define SPAMM_H_STAGE_BYTES (2 * SPAMM_H_OPERAND_BYTES)
#define SPAMM_H_CLD 132  // f32 staging of the C tile, [column][row] padded: conflict-free fragment stores
// Dynamic shared memory (TileKernel::of in src/backend/cuda/spamm.rs passes this many bytes):
// max(SPAMM_H_STAGES * SPAMM_H_STAGE_BYTES, SPAMM_H_TILE * SPAMM_H_CLD * 4) = max(65536, 67584).
#define SPAMM_H_SHARED_BYTES 67584

struct __align__(16) spamm_h_f4 { float x, y, z, w; };
struct __align__(8) spamm_h_u2 { unsigned x, y; };

// Byte offset of 16-byte group `chunk` of row `row` in a k-major ([outer][32]) or mn-major
// ([32][128]) operand stage.
template <bool KMAJOR>
__device__ __forceinline__ unsigned spamm_h_swizzle(int row, int chunk) {
    return KMAJOR ? (unsigned)(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4))
                  : (unsigned)(row * 256 + ((chunk ^ (row & 7)) << 4));
}

// One operand's share of a stage: this thread's SPAMM_H_GROUPS groups of 8 elements contiguous in
// memory, group q at outer index outer + THREADS / 4 * q (k-major) or at p + THREADS / 16 * q
// (mn-major), SPAMM_H_GROUP_STRIDE bytes apart in the stage.
template <bool KMAJOR>
struct SpammHOperand {
    const sgpu_b16* first;  // group 0's element at p = 0 (may point outside the matrix: then unused)
    unsigned dst;           // group 0's offset in the operand's stage
    unsigned shifts;        // per group, 4 * (C block row) for A or (C block column) for B, 8 bits each
    int left;               // rows (columns) of the matrix from group 0's outer index on
    int p;                  // group 0's p within a chunk
    bool interior;          // the tile's 128 rows (columns) are all inside the matrix

    __device__ __forceinline__ void init(const sgpu_b16* x, sgpu_i64 ld, sgpu_i64 outer0, int limit, int bs,
                                         int tid, bool rows) {
        int outer;
        if (KMAJOR) {
            outer = tid >> 2;
            p = (tid & 3) * 8;
            dst = spamm_h_swizzle<true>(outer, tid & 3);
        } else {
            p = tid >> 4;
            outer = (tid & 15) * 8;
            dst = spamm_h_swizzle<false>(p, tid & 15);
        }
        left = limit - (int)(outer0 + outer);
        interior = limit - outer0 >= SPAMM_H_TILE;
        first = KMAJOR ? x + (outer0 + outer) * ld + p : x + (outer0 + outer) + (sgpu_i64)p * ld;
        shifts = 0;
        int block0 = (int)(outer0 / bs);
#pragma unroll
        for (int q = 0; q < SPAMM_H_GROUPS; ++q) {
            int blk = (int)((outer0 + outer + (KMAJOR ? SPAMM_H_THREADS / 4 * q : 0)) / bs) - block0;
            shifts |= (unsigned)(rows ? 4 * blk : blk) << (8 * q);
        }
    }

    // Whether a C block of the chunk's mask uses group q.
    __device__ __forceinline__ bool needed(unsigned mask, int q, bool rows) const {
        unsigned sh = (shifts >> (8 * (KMAJOR ? q : 0))) & 0xffu;
        return ((mask >> sh) & (rows ? 0xfu : 0x1111u)) != 0;
    }

    // Queues the groups of chunk [s, e) that the mask needs into the stage at shared address `stage`:
    // VEC (every group's first element 16-byte aligned) by cp.async where the group lies inside the
    // matrix; groups that end or lie past it, and every group without VEC, element by element through
    // registers, zero past the matrix.
    template <bool VEC>
    __device__ __forceinline__ void load(sgpu_i64 ld, unsigned stage, int s, int e, unsigned mask, bool rows) const {
        const sgpu_b16* src0 = KMAJOR ? first + s : first + (sgpu_i64)s * ld;
        sgpu_i64 step = KMAJOR ? SPAMM_H_THREADS / 4 * ld : SPAMM_H_THREADS / 16 * ld;
        unsigned d0 = stage + dst;
        if (VEC && interior && e - s == SPAMM_H_CHUNK) {
#pragma unroll
            for (int q = 0; q < SPAMM_H_GROUPS; ++q)
                if (needed(mask, q, rows)) sgpu_cp_async16(d0 + SPAMM_H_GROUP_STRIDE * q, src0 + q * step);
            return;
        }
#pragma unroll
        for (int q = 0; q < SPAMM_H_GROUPS; ++q) {
            if (!needed(mask, q, rows)) continue;
            int valid;
            if (KMAJOR) {
                int lq = left - SPAMM_H_THREADS / 4 * q, pl = e - (s + p);
                valid = lq <= 0 || pl <= 0 ? 0 : pl >= 8 ? 8 : pl;
            } else {
                valid = s + p + SPAMM_H_THREADS / 16 * q < e ? (left <= 0 ? 0 : left >= 8 ? 8 : left) : 0;
            }
            const sgpu_b16* src = src0 + q * step;
            unsigned d = d0 + SPAMM_H_GROUP_STRIDE * q;
            if (VEC && valid == 8) {
                sgpu_cp_async16(d, src);
            } else {
                unsigned w[4];
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    unsigned lo = 2 * v < valid ? src[2 * v] : 0u;
                    unsigned hi = 2 * v + 1 < valid ? src[2 * v + 1] : 0u;
                    w[v] = lo | (hi << 16);
                }
                sgpu_st_shared16(d, w[0], w[1], w[2], w[3]);
            }
        }
    }
};

// The products of one k chunk (2 k steps of 16) for a warp's 64 x SPAMM_H_WN: squares (h, v) on where
// bit h * 2 + v of `quads` is set (ALL: every one, no test), fragments loaded only for squares on.
template <bool BF16, bool KA, bool KB, bool ALL>
__device__ __forceinline__ void spamm_h_chunk(float (&acc)[4][SPAMM_H_WN / 8][4], unsigned sa, unsigned sb, unsigned a_base,
                                              unsigned b_base, unsigned quads) {
    bool q00 = ALL || (quads & 1u), q01 = ALL || (quads & 2u), q10 = ALL || (quads & 4u), q11 = ALL || (quads & 8u);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned fa[4][4], fb[SPAMM_H_WN / 8][2];
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            bool need = x < 2 ? (q00 | q01) : (q10 | q11);
            unsigned off = KA ? (a_base ^ (unsigned)(h * 32)) + (unsigned)(x * 1024)
                              : (a_base ^ (unsigned)(x * 32)) + (unsigned)(h * 4096);
            if (need) sgpu_ldmatrix_x4<!KA>(fa[x], sa + off);
        }
#pragma unroll
        for (int j = 0; j < SPAMM_H_WN / 16; ++j) {
            bool need = j < 2 ? (q00 | q10) : (q01 | q11);
            unsigned off = KB ? (b_base ^ (unsigned)(h * 32)) + (unsigned)(j * 1024)
                              : (b_base ^ (unsigned)(j * 32)) + (unsigned)(h * 4096);
            if (need) {
                unsigned r[4];
                sgpu_ldmatrix_x4<!KB>(r, sb + off);
                fb[2 * j][0] = r[0];
                fb[2 * j][1] = r[1];
                fb[2 * j + 1][0] = r[2];
                fb[2 * j + 1][1] = r[3];
            }
        }
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
            for (int y = 0; y < SPAMM_H_WN / 8; ++y) {
                bool on = x < 2 ? (y < 4 ? q00 : q01) : (y < 4 ? q10 : q11);
                if (on) sgpu_mma_16816<BF16>(acc[x][y], fa[x], fb[y]);
            }
    }
}

template <bool BF16, bool TA, bool TB, bool VEC>
__device__ __forceinline__ void spamm_tiles_half_body(int m, int n, int k, int bs, float alpha, const sgpu_b16* a,
                                                      sgpu_i64 lda, const sgpu_b16* b, sgpu_i64 ldb, float beta,
                                                      sgpu_b16* c, sgpu_i64 ldc, const SpammTileWork& work,
                                                      unsigned char* smem) {
    // A transposed: op(A) contiguous along p (k-major); B not transposed: op(B) contiguous along p.
    constexpr bool KA = TA, KB = !TB;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int wm = warp & 1, wn = warp >> 1;
    sgpu_i64 row0 = work.row0, col0 = work.col0;
    unsigned smem0 = sgpu_smem_address(smem);

    SpammHOperand<KA> op_a;
    SpammHOperand<KB> op_b;
    op_a.init(a, lda, row0, m, bs, tid, true);
    op_b.init(b, ldb, col0, n, bs, tid, false);

    // Mask bits of the warp's 32 x 32 squares: (h, v) at rows wm * 64 + h * 32, columns wn * WN + v * 32.
    int rbit0 = work.bit(wm * 64, 0, bs), rbit1 = work.bit(wm * 64 + 32, 0, bs);
    int cbit0 = work.bit(0, wn * SPAMM_H_WN, bs), cbit1 = work.bit(0, wn * SPAMM_H_WN + 32, bs);

    // ldmatrix lane offsets (bytes within an operand stage) of A fragment x = 0 (rows wm * 64 + x * 16)
    // and B pair j = 0 (columns wn * 64 + j * 16) at k step 0; fragment_offset() gives the others.
    unsigned a_base, b_base;
    if (KA)
        a_base = spamm_h_swizzle<true>(wm * 64 + (lane & 15), lane >> 4);
    else
        a_base = spamm_h_swizzle<false>((lane & 7) + (lane >> 4) * 8, wm * 8 + ((lane >> 3) & 1));
    if (KB)
        b_base = spamm_h_swizzle<true>(wn * SPAMM_H_WN + (lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1);
    else
        b_base = spamm_h_swizzle<false>((lane & 7) + ((lane >> 3) & 1) * 8, wn * (SPAMM_H_WN / 8) + (lane >> 4));

    float acc[4][SPAMM_H_WN / 8][4];
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < SPAMM_H_WN / 8; ++y)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[x][y][q] = 0.0f;

    SpammChunkCursor<SPAMM_H_CHUNK> chunks(work, bs, k);
    auto issue = [&](int stage, unsigned& chunk_mask) {
        int s, e;
        if (chunks.advance(s, e, chunk_mask)) {
            unsigned base = smem0 + stage * SPAMM_H_STAGE_BYTES;
            op_a.template load<VEC>(lda, base, s, e, chunk_mask, true);
            op_b.template load<VEC>(ldb, base + SPAMM_H_OPERAND_BYTES, s, e, chunk_mask, false);
        }
        sgpu_cp_async_commit();
    };
    // Masks of the chunks in flight (0: none), oldest first.
    unsigned pending[SPAMM_H_STAGES - 1];
#pragma unroll
    for (int s = 0; s < SPAMM_H_STAGES - 1; ++s) issue(s, pending[s]);

    int stage = 0;
    while (pending[0] != 0) {
        unsigned mask = pending[0];
        sgpu_cp_async_wait<SPAMM_H_STAGES - 2>();
        __syncthreads();
#pragma unroll
        for (int s = 0; s < SPAMM_H_STAGES - 2; ++s) pending[s] = pending[s + 1];
        int refill = stage == 0 ? SPAMM_H_STAGES - 1 : stage - 1;
        issue(refill, pending[SPAMM_H_STAGES - 2]);

        unsigned quads = ((mask >> (rbit0 + cbit0)) & 1u) | ((mask >> (rbit1 + cbit0)) & 1u) << 2;
        if (SPAMM_H_WN == 64) quads |= ((mask >> (rbit0 + cbit1)) & 1u) << 1 | ((mask >> (rbit1 + cbit1)) & 1u) << 3;
        unsigned sa = smem0 + stage * SPAMM_H_STAGE_BYTES, sb = sa + SPAMM_H_OPERAND_BYTES;
        if (quads == (SPAMM_H_WN == 64 ? 0xfu : 0x5u))
            spamm_h_chunk<BF16, KA, KB, true>(acc, sa, sb, a_base, b_base, quads);
        else if (quads != 0)
            spamm_h_chunk<BF16, KA, KB, false>(acc, sa, sb, a_base, b_base, quads);
        stage = stage == SPAMM_H_STAGES - 1 ? 0 : stage + 1;
    }
    sgpu_cp_async_wait<0>();
    __syncthreads();

    // Epilogue: the accumulators into shared memory as [column][row] f32, then C column by column.
    float* staged = (float*)smem;
    int group = lane >> 2, quad = lane & 3;
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < SPAMM_H_WN / 8; ++y)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                int r = wm * 64 + x * 16 + group + (q >> 1) * 8;
                int col = wn * SPAMM_H_WN + y * 8 + quad * 2 + (q & 1);
                staged[col * SPAMM_H_CLD + r] = acc[x][y][q];
            }
    __syncthreads();
    // A warp reads one staged column (512 contiguous bytes, conflict-free), each thread 4 rows, and
    // writes them as 8 bytes (a warp: 256 contiguous bytes of C) with a streaming (evict-first) store,
    // so that C does not push A and B out of L2.
    bool cvec = (((unsigned long long)c) & 7ull) == 0 && (ldc & 3) == 0;
#pragma unroll 4
    for (int i = 0; i < SPAMM_H_TILE * SPAMM_H_TILE / 4 / SPAMM_H_THREADS; ++i) {
        int item = tid + SPAMM_H_THREADS * i;
        int rg = item & 31, col = item >> 5;
        sgpu_i64 r = row0 + rg * 4, cc = col0 + col;
        if (cc >= n || r >= m) continue;
        spamm_h_f4 q4 = *(const spamm_h_f4*)(staged + col * SPAMM_H_CLD + rg * 4);
        float v[4] = {q4.x, q4.y, q4.z, q4.w};
        sgpu_b16* out = c + r + cc * ldc;
        if (cvec && r + 4 <= m) {
            unsigned w[2];
            if (beta != 0.0f) {
                spamm_h_u2 old = *(const spamm_h_u2*)out;
                w[0] = old.x;
                w[1] = old.y;
            }
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float v0 = alpha * v[2 * e], v1 = alpha * v[2 * e + 1];
                if (beta != 0.0f) {
                    v0 += beta * sgpu_half_to_f32<BF16>((sgpu_b16)(w[e] & 0xffffu));
                    v1 += beta * sgpu_half_to_f32<BF16>((sgpu_b16)(w[e] >> 16));
                }
                w[e] = (unsigned)sgpu_f32_to_half<BF16>(v0) | ((unsigned)sgpu_f32_to_half<BF16>(v1) << 16);
            }
            asm volatile("st.global.cs.v2.b32 [%0], {%1, %2};\n" ::"l"(out), "r"(w[0]), "r"(w[1]) : "memory");
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (r + e < m)
                    spamm_store_c<sgpu_b16, float, sgpu_half_elem<BF16>>(c, ldc, r + e, cc, alpha, v[e], beta);
        }
    }
}

template <bool BF16>
__device__ __forceinline__ void spamm_tiles_half(int m, int n, int k, int bs, float alpha, const sgpu_b16* a,
                                                 sgpu_i64 lda, int ta, const sgpu_b16* b, sgpu_i64 ldb, int tb,
                                                 float beta, sgpu_b16* c, sgpu_i64 ldc, const unsigned* order,
                                                 const int* counts, const unsigned* lists, int list_stride) {
    extern __shared__ __align__(128) unsigned char spamm_h_shared[];
    SpammTileWork work = spamm_tile_work(m, bs, SPAMM_H_TILE, SPAMM_H_TILE, order, counts, lists, list_stride);
    // cp.async when every 16-byte group of both operands is aligned, else element-wise loads.
    bool vec = (((unsigned long long)a | (unsigned long long)b) & 15ull) == 0 && ((lda | ldb) & 7) == 0;
#define SPAMM_H_BODY(TA, TB, VEC) \
    spamm_tiles_half_body<BF16, TA, TB, VEC>(m, n, k, bs, alpha, a, lda, b, ldb, beta, c, ldc, work, spamm_h_shared)
#define SPAMM_H_BODY_VEC(TA, TB) \
    if (vec) SPAMM_H_BODY(TA, TB, true); \
    else SPAMM_H_BODY(TA, TB, false)
    if (ta) {
        if (tb) { SPAMM_H_BODY_VEC(true, true); }
        else { SPAMM_H_BODY_VEC(true, false); }
    } else {
        if (tb) { SPAMM_H_BODY_VEC(false, true); }
        else { SPAMM_H_BODY_VEC(false, false); }
    }
#undef SPAMM_H_BODY_VEC
#undef SPAMM_H_BODY
}

// spammSgemm's tile kernels: exact FP32 on the CUDA cores and 3xTF32 on the tensor cores; see
// kernels/spamm_tiles.cuh for the work lists and the argument order.

struct __align__(16) spamm_f4 { float x, y, z, w; };
__device__ __forceinline__ void spamm_ld16(float* d, const float* s) {
    spamm_f4 v = *(const spamm_f4*)s;
    d[0] = v.x; d[1] = v.y; d[2] = v.z; d[3] = v.w;
}

// ---------------------------------------------------------------------------------------------------
// spammSgemm's tile kernels, 128 x 128 tiles of C, 256 threads, k in chunks of 32 (a chunk never
// crosses a k block: LoNum is a multiple of 32 here). One extern kernel per math mode and (transa,
// transb), so that each gets its own shared layouts and register allocation:
//   spamm_tiles_f32_{nn,nt,tn,tt}     exact FP32 FMA on CUDA cores (SPAMM_MATH_MODE_DEFAULT)
//   spamm_tiles_3xtf32_{nn,nt,tn,tt}  3xTF32 on tensor cores (SPAMM_MATH_MODE_3XTF32)
// Both take their shared memory dynamically (F32_SIMT_SMEM / F32_TC_SMEM bytes, set by the launcher).
//
// Operands. Element (o, p) of op(A) (o: row) or op(B) (o: column) is stored either contiguous along o
// ("outer-contiguous": A not transposed, B transposed) or along p ("k-contiguous": A transposed, B
// not transposed). Global reads move 16-byte groups of 4 consecutive stored elements (cp.async.cg or
// 128-bit loads) when the operand's base is 16-byte aligned and its leading dimension a multiple of 4,
// else element by element; parts of a group past the matrix (rows >= m, columns >= n, p >= k) read as
// zero (4-byte cp.async with src-size 0), so edge tiles need no other special case.

#define F32_TILE 128
#define F32_CHUNK 32

extern __shared__ __align__(16) float f32_dynamic_smem[];

// One operand of a tile product, element (o, p) at base[o + p * ld] (outer-contiguous, OC) or
// base[p + o * ld] (k-contiguous), o counted from the tile's first row / column `outer0`; this
// thread's share of a F32_TILE x F32_CHUNK chunk: 4 groups of 4 stored-consecutive elements.
//   OC: group q at o = (tid % 32) * 4, p = tid / 32 + 8 q (a warp reads 128 consecutive elements);
//   k-contiguous: group q at o = tid / 8 + 32 q, p = (tid % 8) * 4 (8 threads read one o's 32 p).
// Everything but the chunk's start is worked out once per tile.
template <bool OC>
struct F32Operand {
    const float* base;
    const float* first;  // group 0 at chunk start 0
    sgpu_i64 ld, group_step;
    int o, p;
    int outer_valid;  // OC: elements of a group inside the matrix along o; else bit q: group q's o inside
    bool vector;      // 16-byte groups are aligned: base % 16 == 0 and ld % 4 == 0

    __device__ __forceinline__ F32Operand(const float* x, sgpu_i64 ld_, sgpu_i64 outer0, sgpu_i64 limit)
        : base(x), ld(ld_), vector(((unsigned long long)x & 15ull) == 0 && (ld_ & 3) == 0) {
        int tid = threadIdx.x;
        if (OC) {
            o = (tid & 31) * 4;
            p = tid >> 5;
            sgpu_i64 left = limit - (outer0 + o);
            outer_valid = left <= 0 ? 0 : left >= 4 ? 4 : (int)left;
            first = x + (outer0 + o) + (sgpu_i64)p * ld_;
            group_step = 8 * ld_;
        } else {
            o = tid >> 3;
            p = (tid & 7) * 4;
            outer_valid = 0;
#pragma unroll
            for (int q = 0; q < 4; ++q) outer_valid |= (outer0 + o + 32 * q < limit ? 1 : 0) << q;
            first = x + p + (outer0 + o) * ld_;
            group_step = 32 * ld_;
        }
    }

    __device__ __forceinline__ int group_o(int q) const { return OC ? o : o + 32 * q; }
    __device__ __forceinline__ int group_p(int q) const { return OC ? p + 8 * q : p; }

    // Group q of chunk [s, e): its first element and how many of its elements are inside the matrix.
    __device__ __forceinline__ const float* group(const float* chunk_first, int q, sgpu_i64 s, sgpu_i64 e,
                                                  int& valid) const {
        if (OC) {
            valid = s + p + 8 * q < e ? outer_valid : 0;
        } else {
            sgpu_i64 left = e - (s + p);
            valid = (outer_valid >> q) & 1 ? (left <= 0 ? 0 : left >= 4 ? 4 : (int)left) : 0;
        }
        return chunk_first + q * group_step;
    }
    __device__ __forceinline__ const float* chunk_first(sgpu_i64 s) const { return first + (OC ? s * ld : s); }

    // Queues the copy of this thread's groups of chunk [s, e) into shared memory: group (o, p) to
    // dst + o * o_stride + p * p_stride (floats), its 4 elements 1 apart along the contiguous direction.
    __device__ __forceinline__ void copy_async(float* dst, int o_stride, int p_stride, sgpu_i64 s, sgpu_i64 e) const {
        const float* from = chunk_first(s);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            int valid;
            const float* src = group(from, q, s, e, valid);
            unsigned to = sgpu_smem_address(dst + group_o(q) * o_stride + group_p(q) * p_stride);
            // Whole groups in one 16-byte copy; a group at the matrix's edge element by element.
            if (vector && valid == 4) {
                sgpu_cp_async16(to, src);
            } else {
#pragma unroll
                for (int v = 0; v < 4; ++v) sgpu_cp_async4(to + 4 * v, v < valid ? src + v : base, v < valid ? 4 : 0);
            }
        }
    }

    // Loads this thread's groups of chunk [s, e) into registers (k-contiguous operands of the SIMT
    // kernel, which transposes them on the way to shared memory).
    __device__ __forceinline__ void load(float* r, sgpu_i64 s, sgpu_i64 e) const {
        const float* from = chunk_first(s);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            int valid;
            const float* src = group(from, q, s, e, valid);
            if (vector && valid == 4) {
                spamm_f4 x = *(const spamm_f4*)src;
                r[4 * q] = x.x;
                r[4 * q + 1] = x.y;
                r[4 * q + 2] = x.z;
                r[4 * q + 3] = x.w;
            } else {
#pragma unroll
                for (int v = 0; v < 4; ++v) r[4 * q + v] = v < valid ? src[v] : 0.0f;
            }
        }
    }
};

// ---- Exact FP32 (CUDA cores) ------------------------------------------------------------------------
// Thread (tr, tc) of 16 x 16 owns the 8 x 8 outputs at rows tr * 8.., columns tc * 8.. of the tile; a
// warp covers 32 rows x 64 columns (all 8 x 8 inside one C block). Both operands sit in shared memory
// as [p][o] rows of F32_SIMT_LD floats, so each p costs a thread two 16-byte reads per operand for 64
// FMAs (broadcast within the warp, conflict-free). Outer-contiguous operands arrive by cp.async;
// k-contiguous ones through registers, transposed on the store. Two stages: chunk i + 1 is in flight
// while chunk i is multiplied (a chunk is 2048 FMAs per thread, far longer than a global load).
#define F32_SIMT_LD (F32_TILE + 4)
#define F32_SIMT_OPERAND (F32_CHUNK * F32_SIMT_LD)
#define F32_SIMT_STAGE (2 * F32_SIMT_OPERAND)
#define F32_SIMT_SMEM (2 * F32_SIMT_STAGE * 4)

template <bool TA, bool TB>
__device__ __forceinline__ void f32_simt_tiles(int m, int n, int k, int bs, float alpha, const float* a,
                                               sgpu_i64 lda, const float* b, sgpu_i64 ldb, float beta, float* c,
                                               sgpu_i64 ldc, const unsigned* order, const int* counts,
                                               const unsigned* lists, int list_stride) {
    constexpr bool A_OC = !TA, B_OC = TB;  // outer-contiguous operands
    float* smem = f32_dynamic_smem;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int tr = (warp & 3) * 4 + (lane & 3), tc = (warp >> 2) * 8 + (lane >> 2);
    SpammTileWork work = spamm_tile_work(m, bs, F32_TILE, F32_TILE, order, counts, lists, list_stride);
    F32Operand<A_OC> op_a(a, lda, work.row0, m);
    F32Operand<B_OC> op_b(b, ldb, work.col0, n);
    int my_bit = work.bit(tr * 8, tc * 8, bs);

    float acc[8][8];
#pragma unroll
    for (int x = 0; x < 8; ++x)
#pragma unroll
        for (int y = 0; y < 8; ++y) acc[x][y] = 0.0f;
    float staged_a[A_OC ? 1 : 16], staged_b[B_OC ? 1 : 16];

    // Chunk [s, e) into stage `st`: cp.async for outer-contiguous operands, register loads for the others.
    auto issue = [&](int st, sgpu_i64 s, sgpu_i64 e) {
        float* sa = smem + st * F32_SIMT_STAGE;
        if (A_OC) op_a.copy_async(sa, 1, F32_SIMT_LD, s, e);
        else op_a.load(staged_a, s, e);
        if (B_OC) op_b.copy_async(sa + F32_SIMT_OPERAND, 1, F32_SIMT_LD, s, e);
        else op_b.load(staged_b, s, e);
        sgpu_cp_async_commit();
    };
    // The register-staged groups of a k-contiguous operand: 4 consecutive p of one o, stored as [p][o].
    auto store = [&](int st) {
        float* sa = smem + st * F32_SIMT_STAGE;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                if (!A_OC) sa[(op_a.group_p(q) + v) * F32_SIMT_LD + op_a.group_o(q)] = staged_a[4 * q + v];
                if (!B_OC) {
                    sa[F32_SIMT_OPERAND + (op_b.group_p(q) + v) * F32_SIMT_LD + op_b.group_o(q)] = staged_b[4 * q + v];
                }
            }
        }
    };

    SpammChunkCursor<F32_CHUNK> chunks(work, bs, k);
    int s, e;
    unsigned mask = 0, next_mask = 0;
    bool have = chunks.advance(s, e, mask);
    int st = 0;
    if (have) {
        issue(0, s, e);
        store(0);
    }
    sgpu_cp_async_wait<0>();
    __syncthreads();
    while (have) {
        bool next = chunks.advance(s, e, next_mask);
        if (next) issue(st ^ 1, s, e);
        if ((mask >> my_bit) & 1u) {
            const float* sa = smem + st * F32_SIMT_STAGE + tr * 8;
            const float* sb = smem + st * F32_SIMT_STAGE + F32_SIMT_OPERAND + tc * 8;
#pragma unroll
            for (int p = 0; p < F32_CHUNK; ++p) {
                float ra[8], rb[8];
                spamm_ld16(ra, sa + p * F32_SIMT_LD);
                spamm_ld16(ra + 4, sa + p * F32_SIMT_LD + 4);
                spamm_ld16(rb, sb + p * F32_SIMT_LD);
                spamm_ld16(rb + 4, sb + p * F32_SIMT_LD + 4);
#pragma unroll
                for (int x = 0; x < 8; ++x)
#pragma unroll
                    for (int y = 0; y < 8; ++y) acc[x][y] = fmaf(ra[x], rb[y], acc[x][y]);
            }
        }
        if (next) {
            store(st ^ 1);
            sgpu_cp_async_wait<0>();
        }
        __syncthreads();
        st ^= 1;
        mask = next_mask;
        have = next;
    }

    // Epilogue through shared memory (the stages are free: the loop ended on a barrier after the last
    // chunk): the 128 x 128 tile column-major with leading dimension F32_SIMT_LD, then written to C a
    // column per warp, 4 rows per lane. Stored straight from the 8 x 8 register blocks, a warp's store
    // touched 32 sectors of 8 columns; this way it writes 512 contiguous bytes (measured: C = 0 at
    // N = 8192 took 0.68 ms the straight way).
    static_assert(F32_TILE * F32_SIMT_LD <= 2 * F32_SIMT_STAGE, "the C tile fits the stages");
#pragma unroll
    for (int y = 0; y < 8; ++y) {
        float* column = smem + (tc * 8 + y) * F32_SIMT_LD + tr * 8;
        spamm_f4 lo = {acc[0][y], acc[1][y], acc[2][y], acc[3][y]}, hi = {acc[4][y], acc[5][y], acc[6][y], acc[7][y]};
        *(spamm_f4*)column = lo;
        *(spamm_f4*)(column + 4) = hi;
    }
    __syncthreads();
    for (int col = warp; col < F32_TILE; col += 8) {
        sgpu_i64 cg = work.col0 + col, r = work.row0 + lane * 4;
        if (cg >= n || r >= m) continue;
        spamm_f4 v = *(const spamm_f4*)(smem + col * F32_SIMT_LD + lane * 4);
        float* out = c + r + cg * ldc;
        if (r + 3 < m && (((unsigned long long)out) & 15ull) == 0) {
            spamm_f4 o = {alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w};
            if (beta != 0.0f) {
                spamm_f4 old = *(const spamm_f4*)out;
                o.x += beta * old.x;
                o.y += beta * old.y;
                o.z += beta * old.z;
                o.w += beta * old.w;
            }
            *(spamm_f4*)out = o;
        } else {
            float e[4] = {v.x, v.y, v.z, v.w};
            for (int q = 0; q < 4 && r + q < m; ++q) spamm_store_c(c, ldc, r + q, cg, alpha, e[q], beta);
        }
    }
}

// ---- 3xTF32 (tensor cores) --------------------------------------------------------------------------
// x = big + small with big = TF32(x) rounded to nearest (ties away from zero: add half a TF32 unit to
// the bits, then drop the 13 low bits) and small = x - big (exact in FP32) truncated to TF32 (the
// tensor core reads only the top 19 bits of a register), exactly what the CPU backend emulates; a·b ≈
// small_a·big_b + big_a·small_b + big_a·big_b by three m16n8k8 TF32 mma (products exact, the dropped
// small_a·small_b and the truncation of small below 2^-20 |a·b|). The tensor core adds in FP32 but
// truncates: summed in one accumulator over all of k, that bias grew to 5.7e-5 relative at k = 8192
// (decay inputs; 1.7e-6 otherwise). So each chunk's (32 k) products are summed in a second set of mma
// accumulators, zeroed per chunk, and added to the FP32 accumulator by ordinary rounded FADDs (once
// per chunk: after every k step instead, the FADDs cost 25 % of the time at tau = 0). The two sets take
// 128 registers: one block of 8 warps per SM, each warp keeping 16 independent mma between dependent
// ones (the A fragments of all its rows are split before the mma of a k step).
//
// Warps as 2 x 4, warp (wm, wn) owning rows wm * 64.., columns wn * 32.. as 4 x 4 fragments of 16 x 8,
// each inside one C block: per chunk the warp's 16 fragment bits are taken from the chunk's mask; all
// set (the common case) runs unpredicated, else each fragment's mma runs only under its bit. Operands
// stay in shared memory in their global orientation, padded so that the scalar fragment reads are
// conflict-free: outer-contiguous as [p][o] (stride 136: a fragment's 4 p land 8 banks apart),
// k-contiguous as [o][p] (stride 36: 8 rows land 4 banks apart). Three stages of cp.async; the chunk
// masks travel through shared memory with their stage.
#define F32_TC_LDO (F32_TILE + 8)
#define F32_TC_LDK (F32_CHUNK + 4)
#define F32_TC_OPERAND (F32_TILE * F32_TC_LDK)  // >= F32_CHUNK * F32_TC_LDO
#define F32_TC_STAGE (2 * F32_TC_OPERAND)
#define F32_TC_STAGES 3
#define F32_TC_SMEM (F32_TC_STAGES * F32_TC_STAGE * 4)

// D = A * B (sgpu_mma_1688 in the prelude adds to D): one m16n8k8 product, TF32 inputs, FP32
// accumulators.
__device__ __forceinline__ void f32_mma_1688_zero(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f), "f"(0.0f), "f"(0.0f),
          "f"(0.0f));
}

template <bool B>
struct f32_flag {
    static constexpr bool value = B;
};

template <bool TA, bool TB>
__device__ __forceinline__ void f32_3xtf32_tiles(int m, int n, int k, int bs, float alpha, const float* a,
                                                 sgpu_i64 lda, const float* b, sgpu_i64 ldb, float beta, float* c,
                                                 sgpu_i64 ldc, const unsigned* order, const int* counts,
                                                 const unsigned* lists, int list_stride) {
    constexpr bool A_OC = !TA, B_OC = TB;
    // Element (o, p) of a stage's operand tile at o * O_STRIDE + p * P_STRIDE.
    constexpr int A_O = A_OC ? 1 : F32_TC_LDK, A_P = A_OC ? F32_TC_LDO : 1;
    constexpr int B_O = B_OC ? 1 : F32_TC_LDK, B_P = B_OC ? F32_TC_LDO : 1;
    float* smem = f32_dynamic_smem;
    __shared__ unsigned stage_mask[F32_TC_STAGES];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int wm = warp & 1, wn = warp >> 1, group = lane >> 2, quad = lane & 3;
    SpammTileWork work = spamm_tile_work(m, bs, F32_TILE, F32_TILE, order, counts, lists, list_stride);
    F32Operand<A_OC> op_a(a, lda, work.row0, m);
    F32Operand<B_OC> op_b(b, ldb, work.col0, n);

    // Fragment (x, y)'s C block: bit bit_row[x] + bit_col[y] of a chunk mask.
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

    // The chunk in stage `stage` for the fragments whose bit of `frags` (x * 4 + y) is set (ALL: every one).
    auto multiply = [&](auto all, int stage, unsigned frags) {
        constexpr bool ALL = decltype(all)::value;
        const float* sa = smem + stage * F32_TC_STAGE + (wm * 64 + group) * A_O + quad * A_P;
        const float* sb = smem + stage * F32_TC_STAGE + F32_TC_OPERAND + (wn * 32 + group) * B_O + quad * B_P;
        float part[4][4][4];
#pragma unroll
        for (int kk = 0; kk < F32_CHUNK; kk += 8) {
            unsigned b_big[4][2], b_small[4][2], a_big[4][4], a_small[4][4];
#pragma unroll
            for (int y = 0; y < 4; ++y) {
                const float* pb = sb + (y * 8) * B_O + kk * B_P;
                sgpu_tf32_split(pb[0], b_big[y][0], b_small[y][0]);
                sgpu_tf32_split(pb[4 * B_P], b_big[y][1], b_small[y][1]);
            }
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const float* pa = sa + (x * 16) * A_O + kk * A_P;
                sgpu_tf32_split(pa[0], a_big[x][0], a_small[x][0]);
                sgpu_tf32_split(pa[8 * A_O], a_big[x][1], a_small[x][1]);
                sgpu_tf32_split(pa[4 * A_P], a_big[x][2], a_small[x][2]);
                sgpu_tf32_split(pa[8 * A_O + 4 * A_P], a_big[x][3], a_small[x][3]);
            }
            // Term by term over all 16 fragments: 16 independent mma between dependent ones.
#pragma unroll
            for (int x = 0; x < 4; ++x)
#pragma unroll
                for (int y = 0; y < 4; ++y) {
                    if (!ALL && !((frags >> (4 * x + y)) & 1u)) continue;
                    if (kk == 0) f32_mma_1688_zero(part[x][y], a_small[x], b_big[y]);
                    else sgpu_mma_1688(part[x][y], a_small[x], b_big[y]);
                }
#pragma unroll
            for (int x = 0; x < 4; ++x)
#pragma unroll
                for (int y = 0; y < 4; ++y) {
                    if (!ALL && !((frags >> (4 * x + y)) & 1u)) continue;
                    sgpu_mma_1688(part[x][y], a_big[x], b_small[y]);
                }
#pragma unroll
            for (int x = 0; x < 4; ++x)
#pragma unroll
                for (int y = 0; y < 4; ++y) {
                    if (!ALL && !((frags >> (4 * x + y)) & 1u)) continue;
                    sgpu_mma_1688(part[x][y], a_big[x], b_big[y]);
                }
        }
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y) {
                if (!ALL && !((frags >> (4 * x + y)) & 1u)) continue;
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[x][y][q] += part[x][y][q];
            }
    };

    SpammChunkCursor<F32_CHUNK> chunks(work, bs, k);
    auto issue = [&](int st) {
        int s, e;
        unsigned chunk_mask;
        if (chunks.advance(s, e, chunk_mask)) {
            float* sa = smem + st * F32_TC_STAGE;
            op_a.copy_async(sa, A_O, A_P, s, e);
            op_b.copy_async(sa + F32_TC_OPERAND, B_O, B_P, s, e);
            if (tid == 0) stage_mask[st] = chunk_mask;
            return 1;
        }
        return 0;
    };
    int inflight = 0;
#pragma unroll
    for (int st = 0; st < F32_TC_STAGES - 1; ++st) {
        inflight += issue(st);
        sgpu_cp_async_commit();
    }
    int load_stage = F32_TC_STAGES - 1, stage = 0;
    while (inflight > 0) {
        sgpu_cp_async_wait<F32_TC_STAGES - 2>();
        __syncthreads();  // chunk `stage` visible to all; every thread is done with the stage refilled next
        inflight += issue(load_stage);
        sgpu_cp_async_commit();
        unsigned mask = stage_mask[stage], frags = 0;
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y) frags |= ((mask >> (bit_row[x] + bit_col[y])) & 1u) << (4 * x + y);
        if (frags == 0xffffu) multiply(f32_flag<true>(), stage, frags);
        else if (frags != 0) multiply(f32_flag<false>(), stage, frags);
        --inflight;
        stage = stage + 1 == F32_TC_STAGES ? 0 : stage + 1;
        load_stage = load_stage + 1 == F32_TC_STAGES ? 0 : load_stage + 1;
    }
    sgpu_cp_async_wait<0>();

#pragma unroll
    for (int x = 0; x < 4; ++x) {
#pragma unroll
        for (int y = 0; y < 4; ++y) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                sgpu_i64 r = work.row0 + wm * 64 + x * 16 + group + (q >> 1) * 8;
                sgpu_i64 col = work.col0 + wn * 32 + y * 8 + quad * 2 + (q & 1);
                if (r < m && col < n) spamm_store_c(c, ldc, r, col, alpha, acc[x][y][q], beta);
            }
        }
    }
}

#define F32_TILE_KERNEL(NAME, BODY, BLOCKS, ...)                                                              \
    extern "C" __global__ void __launch_bounds__(256, BLOCKS) NAME(int m, int n, int k, int bs, float alpha,  \
            const float* a, sgpu_i64 lda, int ta, const float* b, sgpu_i64 ldb, int tb, float beta, float* c, \
            sgpu_i64 ldc, const unsigned* order, const int* counts, const unsigned* lists, int list_stride) { \
        BODY<__VA_ARGS__>(m, n, k, bs, alpha, a, lda, b, ldb, beta, c, ldc, order, counts, lists, list_stride); \
    }
F32_TILE_KERNEL(spamm_tiles_f32_nn, f32_simt_tiles, 2, false, false)
F32_TILE_KERNEL(spamm_tiles_f32_nt, f32_simt_tiles, 2, false, true)
F32_TILE_KERNEL(spamm_tiles_f32_tn, f32_simt_tiles, 1, true, false)
F32_TILE_KERNEL(spamm_tiles_f32_tt, f32_simt_tiles, 1, true, true)
F32_TILE_KERNEL(spamm_tiles_3xtf32_nn, f32_3xtf32_tiles, 1, false, false)
F32_TILE_KERNEL(spamm_tiles_3xtf32_nt, f32_3xtf32_tiles, 1, false, true)
F32_TILE_KERNEL(spamm_tiles_3xtf32_tn, f32_3xtf32_tiles, 1, true, false)
F32_TILE_KERNEL(spamm_tiles_3xtf32_tt, f32_3xtf32_tiles, 1, true, true)

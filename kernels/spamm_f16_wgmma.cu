// SpAMM tile kernel for Hopper (sm_90a): f16 inputs, f32 accumulation on wgmma, for op(A) = A (A
// stored column-major, rows contiguous) and either op(B). The launcher (src/backend/cuda/spamm.rs,
// multiply_f16_hopper) uses it where the device is sm_90, the block size a multiple of 32 and both
// operands can be read by the bulk tensor copy engine (16-byte aligned, leading dimensions multiples
// of 8); every other f16 product runs kernels/spamm_f16.cu.
//
// Why another kernel: on the H100 the mma.sync kernel's 128 x 128 tiles move 16 KiB from L2 per 1 MFLOP
// of a list entry; tiles of 256 x 128 move 24 KiB per 2 MFLOP, on the tensor cores' own wgmma.
//
// Work: spamm_unit_lists (kernels/spamm.cu) gives each 256 x 128 tile of C its k blocks with a 32-bit
// mask over the tile's 8 x 4 units of 32 x 32 (bit u * 4 + v: the C block holding unit (u, v) performs
// the k block). A persistent grid (one thread block per SM) takes tiles from a global counter, in the
// grouped order of spamm_grouped_tile.
//
// Thread block: 2 consumer warpgroups (warps 0-7; warpgroup w computes tile rows 128w..128w+127 as
// two slices of 64 rows, each 64 x 128 f32 accumulators), a producer warp (8) and a transposing warp
// (9). Per 32 k, the producer fills a stage of the SPAMM_W_STAGES-deep ring with op(A)'s 256 x 32 and
// op(B)'s 32 x 128 by cp.async.bulk.tensor (64-byte swizzle; one copy per operand where a 3D view of
// the whole tile applies, else one per 32 x 32 box that a unit needs), completing on the stage's
// `full` barrier; the stage's header carries the mask, the tile and whether it is the tile's last
// stage. The transposing warp turns a K-major op(B) (B not transposed) into the MN-major copy the
// consumers read (ldmatrix / stmatrix.trans), then arrives on `ready`; consumers release a stage
// (8 warp arrivals on `empty`) once their wgmma on it retired.
//
// Masks on wgmma: both operands are MN-major in shared memory, and the descriptor of an MN-major
// operand places its 32-wide atoms independently along M (op(A)) or N (op(B)) through the leading
// byte offset. So an m64n64k16 covering two unit rows and two unit columns can leave out either unit
// row and either unit column: a unit left out is read from a box of zeros (zero boxes before and
// after the ring keep the offsets positive). Each 2 x 2 pattern of a mask is one or two such rank-1
// rectangles (spamm_w_slice), so every C element sums exactly Algorithm 2's products plus exact zeros
// (for finite inputs: a zero box times an infinity is NaN, where the CPU skips the product).
// m64n32k16, the natural per-unit shape, and m64n128k16 for whole slices were tried: mixed with
// other shapes, ptxas serialized every wgmma (C7511); the n32 kernel alone ran at about the mma.sync
// kernel's rate. The warp index goes through a shuffle so that ptxas knows the branches on it and on
// the masks are warp-uniform (else it serializes too, C7518 / C7519).

// Epilogue per warpgroup: accumulators staged as f32 [column][row] in shared memory, 32 columns at a
// time, then C = alpha * acc + beta * C written coalesced (spamm_store_c_f16x4). The producer fills
// the next tile's stages meanwhile.

#define SPAMM_W_TILE_M 256
#define SPAMM_W_TILE_N 128
#define SPAMM_W_STAGES 5
#define SPAMM_W_BOX 2048                         // bytes of one 32 x 32 f16 box
#define SPAMM_W_A_BYTES (8 * SPAMM_W_BOX)        // op(A): 8 boxes of 32 rows
#define SPAMM_W_B_BYTES (4 * SPAMM_W_BOX)        // op(B): 4 boxes of 32 columns
#define SPAMM_W_STAGE_BYTES (SPAMM_W_A_BYTES + 2 * SPAMM_W_B_BYTES)  // op(A), op(B) as loaded, op(B) MN-major
#define SPAMM_W_STAGING_COLUMNS 32
#define SPAMM_W_CLD 132  // f32 staging [column][row], padded: conflict-free
#define SPAMM_W_STAGING_BYTES (SPAMM_W_STAGING_COLUMNS * SPAMM_W_CLD * 4)
#define SPAMM_W_THREADS 320
#define SPAMM_W_DONE 0xffffffffu
// Shared memory, from a 1024-byte aligned base: zero box, ring, zero box, staging, headers, barriers.
#define SPAMM_W_ZERO0_AT 0
#define SPAMM_W_RING_AT SPAMM_W_BOX
#define SPAMM_W_ZERO1_AT (SPAMM_W_RING_AT + SPAMM_W_STAGES * SPAMM_W_STAGE_BYTES)
#define SPAMM_W_STAGING_AT (SPAMM_W_ZERO1_AT + SPAMM_W_BOX)
#define SPAMM_W_HEADERS_AT (SPAMM_W_STAGING_AT + 2 * SPAMM_W_STAGING_BYTES)
#define SPAMM_W_BARRIERS_AT (SPAMM_W_HEADERS_AT + 16 * SPAMM_W_STAGES)
// What the launcher passes (the base is aligned here, hence the extra 1024): 202952 bytes.
#define SPAMM_W_SHARED_BYTES (SPAMM_W_BARRIERS_AT + 24 * SPAMM_W_STAGES + 1024)

// A CUtensorMap, passed by value (__grid_constant__).
struct __align__(64) SpammTensorMap {
    unsigned long long opaque[16];
};

// What the producer tells the consumers about a stage.
struct SpammWHeader {
    unsigned mask;  // units performing this stage's k (0: a tile without work)
    unsigned tile;  // SPAMM_W_DONE: no more tiles
    unsigned last;  // the tile's last stage: its C is written after it
    unsigned pad;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ void spamm_w_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void spamm_w_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void spamm_w_mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void spamm_w_mbar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\nSPAMM_W_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra SPAMM_W_WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
// One box of a 2D map at element coordinates (inner, outer), or of a 3D map at (0, k, block): into
// shared memory at dst, completing on the mbarrier at bar.
__device__ __forceinline__ void spamm_w_load_2d(unsigned dst, const SpammTensorMap* map, int inner, int outer,
                                                unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
            dst),
        "l"((unsigned long long)map), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void spamm_w_load_3d(unsigned dst, const SpammTensorMap* map, int k, int block,
                                                unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
            dst),
        "l"((unsigned long long)map), "r"(0), "r"(k), "r"(block), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void spamm_w_warpgroup_barrier(int id) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

// Shared-memory matrix descriptor, 64-byte swizzle.
__device__ __forceinline__ unsigned long long spamm_w_desc(unsigned addr, unsigned leading, unsigned stride) {
    return (unsigned long long)((addr & 0x3ffffu) >> 4) | ((unsigned long long)(leading >> 4) << 16) |
           ((unsigned long long)(stride >> 4) << 32) | (2ull << 62);
}

// Keeps the compiler from moving accesses to the accumulators across the wgmma fences and waits.
__device__ __forceinline__ void spamm_w_pin(float (&acc)[2][64]) {
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
        for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(acc[q][i])::"memory");
}

// D (64 x 64, f32) += A (64 x 16) * B (16 x 64), both MN-major in shared memory.
__device__ __forceinline__ void spamm_w_mma_n64(float* d, unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// An MN-major operand of 16 k: two 32-wide atoms at `first` and `second` (second > first), 8 k rows
// of 64 bytes per 512.
__device__ __forceinline__ unsigned long long spamm_w_atoms(unsigned first, unsigned second) {
    return spamm_w_desc(first, second - first, 512);
}

// The products of one stage for one slice: unit rows `top_row`, `top_row` + 1 of op(A) (boxes at
// a_boxes), op(B)'s MN-major boxes at b_boxes; `top` / `bottom` hold the two unit rows' mask bits (bit
// v: unit column v). zero0 / zero1: zero boxes before / after every box.
//
// Each pair of unit columns gets one m64n64k16 per 16 k for the rectangle of both unit rows over the
// columns they share when they share all of theirs, else one for the top row over its columns and, in
// a second round, one for the bottom row (a rectangle without rows multiplies zeros). Only one shape,
// one rectangle per accumulator per round and no branch inside a round: anything else made ptxas
// serialize every wgmma (C7511, "insufficient register resources for the wgmma pipeline"), whether
// m64n128k16 for whole slices beside these, or both rectangles issued back to back.
__device__ __forceinline__ void spamm_w_slice(float (&acc)[64], unsigned a_boxes, unsigned b_boxes, int top_row,
                                              unsigned top, unsigned bottom, unsigned zero0, unsigned zero1) {
    const unsigned a_top = a_boxes + top_row * SPAMM_W_BOX, a_bottom = a_top + SPAMM_W_BOX;
    // Rectangles (rows: bit 0 top, bit 1 bottom; columns: bits of the pair) of the two rounds.
    unsigned rows1[2], cols1[2], rows2[2], cols2[2];
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
        const unsigned t = (top >> (2 * pair)) & 3u, b = (bottom >> (2 * pair)) & 3u;
        const bool same = t == b;
        // A rectangle without rows reads zeros on both sides (a unit column of it may not be loaded).
        rows1[pair] = t ? (same ? 3u : 1u) : 0u;
        cols1[pair] = t;
        rows2[pair] = !same && b ? 2u : 0u;
        cols2[pair] = !same ? b : 0u;
    }
    auto round = [&](const unsigned (&rows)[2], const unsigned (&cols)[2]) {
#pragma unroll
        for (int kk = 0; kk < 2; ++kk)  // 16 k further: 16 rows of 64 bytes
#pragma unroll
            for (int pair = 0; pair < 2; ++pair) {
                const unsigned k_off = kk * 1024, col0 = b_boxes + 2 * pair * SPAMM_W_BOX + k_off;
                const unsigned a_first = (rows[pair] & 1u ? a_top : zero0) + k_off;
                const unsigned a_second = (rows[pair] & 2u ? a_bottom : zero1) + k_off;
                const unsigned b_first = cols[pair] & 1u ? col0 : zero0 + k_off;
                const unsigned b_second = cols[pair] & 2u ? col0 + SPAMM_W_BOX : zero1 + k_off;
                spamm_w_mma_n64(&acc[32 * pair], spamm_w_atoms(a_first, a_second), spamm_w_atoms(b_first, b_second));
            }
    };
    round(rows1, cols1);
    if ((rows2[0] | rows2[1]) != 0) round(rows2, cols2);
}

// The transposing warp's work on one stage: op(B) as loaded, K-major (column n of the tile at n * 64
// bytes, its 32 k in 16-byte chunks XOR-ed by bits 1..2 of n), into the MN-major boxes (box n / 32:
// row k at k * 64 bytes, its 32 columns in 16-byte chunks XOR-ed by bits 1..2 of k). Each step moves
// 8 columns x 32 k: four 8 x 8 matrices read by ldmatrix, written transposed by stmatrix.
__device__ __forceinline__ void spamm_w_transpose_b(unsigned loaded, unsigned mn_major, int lane) {
    const int matrix = lane >> 3, row = lane & 7;  // the matrix (k chunk) and row this lane addresses
#pragma unroll 4
    for (int group = 0; group < 16; ++group) {    // columns 8 * group .. 8 * group + 7
        const int column = 8 * group + row;
        const unsigned src = loaded + column * 64 + ((matrix ^ ((column >> 1) & 3)) << 4);
        unsigned r0, r1, r2, r3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                     : "r"(src));
        const int kr = 8 * matrix + row;
        const unsigned dst = mn_major + (group >> 2) * SPAMM_W_BOX + kr * 64 + (((group & 3) ^ ((kr >> 1) & 3)) << 4);
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(r0),
                     "r"(r1), "r"(r2), "r"(r3)
                     : "memory");
    }
}

template <int TRANS_B>
__device__ __forceinline__ void spamm_w_body(int m, int n, int k, int bs, float alpha, float beta, sgpu_f16* c,
                                             sgpu_i64 ldc, const SpammTensorMap* map_a,
                                             const SpammTensorMap* map_b, const int* counts, const uint2* lists,
                                             int list_stride, int group_cols, unsigned* next_tile, bool a_whole,
                                             bool b_whole) {
    extern __shared__ unsigned char spamm_w_shared[];
    const unsigned raw = spamm_smem_address(spamm_w_shared), base = (raw + 1023u) & ~1023u;
    unsigned char* const generic = spamm_w_shared + (base - raw);
    // Warp index through a shuffle: warp-uniform for ptxas (see the header).
    const int tid = threadIdx.x, warp = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
    // Per stage: `full` (the copies landed), `ready` (op(B) is MN-major), `empty` (consumers are done).
    const unsigned full0 = base + SPAMM_W_BARRIERS_AT, ready0 = full0 + 8 * SPAMM_W_STAGES,
                   empty0 = ready0 + 8 * SPAMM_W_STAGES;
    const unsigned zero0 = base + SPAMM_W_ZERO0_AT, zero1 = base + SPAMM_W_ZERO1_AT;
    volatile SpammWHeader* headers = (volatile SpammWHeader*)(generic + SPAMM_W_HEADERS_AT);

    for (int i = tid; i < SPAMM_W_BOX / 16; i += SPAMM_W_THREADS) {
        *(uint4*)(generic + SPAMM_W_ZERO0_AT + 16 * i) = make_uint4(0, 0, 0, 0);
        *(uint4*)(generic + SPAMM_W_ZERO1_AT + 16 * i) = make_uint4(0, 0, 0, 0);
    }
    if (tid == 0) {
        for (int s = 0; s < SPAMM_W_STAGES; ++s) {
            spamm_w_mbar_init(full0 + 8 * s, 1);
            spamm_w_mbar_init(ready0 + 8 * s, 1);
            spamm_w_mbar_init(empty0 + 8 * s, 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // The zero boxes are read by the tensor cores (the async proxy).
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();

    const int tile_rows = (m + SPAMM_W_TILE_M - 1) / SPAMM_W_TILE_M, tile_cols = (n + SPAMM_W_TILE_N - 1) / SPAMM_W_TILE_N;
    const int tiles = tile_rows * tile_cols;

    if (warp == 8) {
        // Producer. The warp reads a tile's list 32 entries at a time; lane 0 fills the stages.
        int stage = 0;
        unsigned round = 0;
        auto claim = [&](unsigned mask, unsigned tile, bool last) -> unsigned {
            spamm_w_mbar_wait(empty0 + 8 * stage, (round & 1u) ^ 1u);
            headers[stage].mask = mask;
            headers[stage].tile = tile;
            headers[stage].last = last;
            return (unsigned)stage;
        };
        auto advance = [&]() {
            if (++stage == SPAMM_W_STAGES) {
                stage = 0;
                ++round;
            }
        };
        for (;;) {
            unsigned p = 0;
            if (lane == 0) p = atomicAdd(next_tile, 1u);
            p = __shfl_sync(0xffffffffu, p, 0);
            if (p >= (unsigned)tiles) {
                if (lane == 0) {
                    unsigned s = claim(0, SPAMM_W_DONE, false);
                    spamm_w_mbar_arrive(full0 + 8 * s);
                }
                break;
            }
            const unsigned tile = spamm_grouped_tile((int)p, tile_rows, tile_cols, group_cols);
            const int row0 = (int)(tile % tile_rows) * SPAMM_W_TILE_M, col0 = (int)(tile / tile_rows) * SPAMM_W_TILE_N;
            const int count = counts[tile];
            const uint2* list = lists + (sgpu_i64)tile * list_stride;
            if (count == 0) {
                if (lane == 0) {
                    unsigned s = claim(0, tile, true);
                    spamm_w_mbar_arrive(full0 + 8 * s);
                    advance();
                }
                continue;
            }
            for (int e0 = 0; e0 < count; e0 += 32) {
                uint2 mine = e0 + lane < count ? list[e0 + lane] : make_uint2(0, 0);
                const int batch = count - e0 < 32 ? count - e0 : 32;
                for (int i = 0; i < batch; ++i) {
                    const int kblock = (int)__shfl_sync(0xffffffffu, mine.x, i);
                    const unsigned mask = __shfl_sync(0xffffffffu, mine.y, i);
                    if (lane == 0) {
                        unsigned rows = 0, cols = 0;
#pragma unroll
                        for (int u = 0; u < 8; ++u) {
                            unsigned r = (mask >> (4 * u)) & 0xfu;
                            rows |= (r != 0) << u;
                            cols |= r;
                        }
                        if (a_whole) rows = 0xffu;
                        if (b_whole) cols = 0xfu;
                        const unsigned bytes = SPAMM_W_BOX * (__popc(rows) + __popc(cols));
                        const int k_first = kblock * bs, k_end = k_first + bs < k ? k_first + bs : k;
                        for (int k0 = k_first; k0 < k_end; k0 += 32) {
                            const bool last = e0 + i == count - 1 && k0 + 32 >= k_end;
                            const unsigned s = claim(mask, tile, last);
                            const unsigned full = full0 + 8 * s, ring = base + SPAMM_W_RING_AT + s * SPAMM_W_STAGE_BYTES;
                            spamm_w_mbar_expect_tx(full, bytes);
                            if (a_whole)
                                spamm_w_load_3d(ring, map_a, k0, row0 / 32, full);
                            else
                                for (int u = 0; u < 8; ++u)
                                    if ((rows >> u) & 1u) spamm_w_load_2d(ring + u * SPAMM_W_BOX, map_a, row0 + 32 * u, k0, full);
                            // op(B) lands in the MN-major boxes when it is stored so (B transposed), else
                            // beside them for the transposing warp.
                            const unsigned b_ring = ring + SPAMM_W_A_BYTES + (TRANS_B ? SPAMM_W_B_BYTES : 0);
                            if (b_whole) {
                                if (TRANS_B) spamm_w_load_3d(b_ring, map_b, k0, col0 / 32, full);
                                else spamm_w_load_2d(b_ring, map_b, k0, col0, full);
                            } else {
                                for (int v = 0; v < 4; ++v)
                                    if ((cols >> v) & 1u) {
                                        const unsigned dst = b_ring + v * SPAMM_W_BOX;
                                        if (TRANS_B) spamm_w_load_2d(dst, map_b, col0 + 32 * v, k0, full);
                                        else spamm_w_load_2d(dst, map_b, k0, col0 + 32 * v, full);
                                    }
                            }
                            advance();
                        }
                    }
                    __syncwarp();
                }
            }
        }
        return;
    }

    if (warp == 9) {
        // Transposing warp: every stage in order; a K-major op(B) into MN-major boxes.
        int stage = 0;
        unsigned round = 0;
        for (;;) {
            spamm_w_mbar_wait(full0 + 8 * stage, round & 1u);
            const unsigned tile = headers[stage].tile, mask = headers[stage].mask;
            if (!TRANS_B && mask != 0) {
                const unsigned b_loaded = base + SPAMM_W_RING_AT + stage * SPAMM_W_STAGE_BYTES + SPAMM_W_A_BYTES;
                spamm_w_transpose_b(b_loaded, b_loaded + SPAMM_W_B_BYTES, lane);
                // stmatrix writes through the generic proxy; wgmma reads through the async one.
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                __syncwarp();
            }
            if (lane == 0) spamm_w_mbar_arrive(ready0 + 8 * stage);
            if (tile == SPAMM_W_DONE) break;
            if (++stage == SPAMM_W_STAGES) {
                stage = 0;
                ++round;
            }
        }
        return;
    }

    // Consumers.
    const int group = warp >> 2, warp_in_group = warp & 3, gtid = tid & 127;
    float acc[2][64];
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[q][i] = 0.0f;
    int stage = 0, pending = -1;
    unsigned round = 0;
    auto release = [&](int s) {
        if (lane == 0) spamm_w_mbar_arrive(empty0 + 8 * s);
    };
    const bool cvec = (((unsigned long long)c) & 7ull) == 0 && (ldc & 3) == 0;
    for (;;) {
        spamm_w_mbar_wait(ready0 + 8 * stage, round & 1u);
        const unsigned tile = headers[stage].tile, mask = headers[stage].mask;
        const bool last = headers[stage].last != 0;
        if (tile == SPAMM_W_DONE) break;
        const unsigned mine = (mask >> (16 * group)) & 0xffffu;  // unit rows 4 * group .. 4 * group + 3
        if (mine != 0) {
            const unsigned a_boxes = base + SPAMM_W_RING_AT + stage * SPAMM_W_STAGE_BYTES;
            const unsigned b_boxes = a_boxes + SPAMM_W_A_BYTES + SPAMM_W_B_BYTES;
            spamm_w_pin(acc);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                const unsigned top = (mine >> (8 * q)) & 0xfu, bottom = (mine >> (8 * q + 4)) & 0xfu;
                if ((top | bottom) != 0)
                    spamm_w_slice(acc[q], a_boxes, b_boxes, 4 * group + 2 * q, top, bottom, zero0, zero1);
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            // Everything but this stage's products has retired: the stage before it can be refilled.
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            spamm_w_pin(acc);
            if (pending >= 0) release(pending);
            pending = stage;
        } else {
            // Nothing to issue: retire what is in flight and hand back both stages, so that a run of
            // stages without work for this warpgroup never holds one the producer must refill.
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            spamm_w_pin(acc);
            if (pending >= 0) release(pending);
            pending = -1;
            release(stage);
        }
        if (++stage == SPAMM_W_STAGES) {
            stage = 0;
            ++round;
        }
        if (!last) continue;

        // The tile's C: wait for its products, then through shared memory a few columns at a time.
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        spamm_w_pin(acc);
        if (pending >= 0) release(pending);
        pending = -1;
        float* staged = (float*)(generic + SPAMM_W_STAGING_AT + group * SPAMM_W_STAGING_BYTES);
        const sgpu_i64 row0 = (sgpu_i64)(tile % tile_rows) * SPAMM_W_TILE_M + 128 * group;
        const sgpu_i64 col0 = (sgpu_i64)(tile / tile_rows) * SPAMM_W_TILE_N;
        const int g = lane >> 2, quad = lane & 3;
#pragma unroll
        for (int part = 0; part < 128 / SPAMM_W_STAGING_COLUMNS; ++part) {
            spamm_w_warpgroup_barrier(1 + group);
#pragma unroll
            for (int q = 0; q < 2; ++q)
#pragma unroll
                for (int chunk = 0; chunk < SPAMM_W_STAGING_COLUMNS / 8; ++chunk)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int r = q * 64 + warp_in_group * 16 + g + (e >> 1) * 8;
                        const int col = chunk * 8 + quad * 2 + (e & 1);
                        staged[col * SPAMM_W_CLD + r] = acc[q][(SPAMM_W_STAGING_COLUMNS / 8 * part + chunk) * 4 + e];
                    }
            spamm_w_warpgroup_barrier(1 + group);
#pragma unroll 4
            for (int i = 0; i < SPAMM_W_STAGING_COLUMNS / 4; ++i) {
                const int item = gtid + 128 * i, rg = item & 31, col = item >> 5;
                const sgpu_i64 r = row0 + rg * 4, cc = col0 + SPAMM_W_STAGING_COLUMNS * part + col;
                if (cc >= n || r >= m) continue;
                const float4 q4 = *(const float4*)(staged + col * SPAMM_W_CLD + rg * 4);
                const float v[4] = {q4.x, q4.y, q4.z, q4.w};
                spamm_store_c_f16x4(c, ldc, r, cc, m, v, alpha, beta, cvec);
            }
        }
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[q][i] = 0.0f;
    }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

extern "C" __global__ void __launch_bounds__(SPAMM_W_THREADS, 1) spamm_tiles_f16_hopper(int m, int n, int k, int bs,
        float alpha, float beta, sgpu_f16* c, sgpu_i64 ldc, int tb, const __grid_constant__ SpammTensorMap map_a,
        const __grid_constant__ SpammTensorMap map_b, int a_whole, int b_whole, const int* counts,
        const uint2* lists, int list_stride, int group_cols, unsigned* next_tile) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (tb)
        spamm_w_body<1>(m, n, k, bs, alpha, beta, c, ldc, &map_a, &map_b, counts, lists, list_stride, group_cols,
                        next_tile, a_whole != 0, b_whole != 0);
    else
        spamm_w_body<0>(m, n, k, bs, alpha, beta, c, ldc, &map_a, &map_b, counts, lists, list_stride, group_cols,
                        next_tile, a_whole != 0, b_whole != 0);
#else
    // Built for sm_90a only; the launcher never runs it elsewhere.
    __trap();
#endif
}

// SMaT SpMM (Okanovic et al.): C = α·A·B + β·C with A stored in two parts, each producing its own
// rows of C: tiles (BCSR whose blocks are the A operand of one tensor-core mma, each gathering its
// own columns of A) for the block rows full enough, and CSR rows multiplied on the CUDA cores for the
// others.
//
// Strides: element (i, j) of B is b[i·b_rs + j·b_cs], of C c[i·c_rs + j·c_cs], so both layouts and
// any leading dimension take the same path; the CSR kernel has a vectorised form for row-major B and
// C whose rows are 16-byte aligned, and the half-precision tile kernel a staged form for row-major B
// with 16-byte aligned rows (smat_tiles_*_staged*).

// ---------------------------------------------------------------------------------------------
// Tiles. One warp owns one output tile — the 16 (or 8) rows of a block row times a strip of 32
// columns of B / C — and walks a run of the block row's tiles in order, accumulating in registers;
// this is the paper's schedule of one warp per row of output tiles, with the warps of a block row
// spread over the column strips (a 2D grid: work items × column strips). Column q of tile s
// multiplies row columns[s·TC + q] of B (TC: the tile's width); −1 pads a block row's last tile and
// reads zeros, as do reads past n.
//
// Work item i (items[i] = {block row, first tile, end tile, slot}) is a whole block row (slot −1)
// or, for a block row too long to walk alone, one run of its tiles whose TR × n sums go to partial
// slot `slot` (TR: the tile's height); smat_finish_tiles adds a block row's slots in order, so the
// result does not depend on scheduling. A whole block row's epilogue scales, adds β·C (C is not read
// when β = 0) and writes each tile row to the caller's row out_rows[·] (−1: a padding row of the last
// block row, not written).

#define SMAT_WARPS_PER_BLOCK 4
#define SMAT_STRIP 32  // columns of B / C per warp

// f16 / bf16: mma.sync.m16n8k16 with FP32 accumulation, as in the paper. A 16×16 tile is one A
// fragment; the strip is 4 n-tiles of 8 columns, so each tile costs 4 mma per warp.

// A warp's 8·HALVES × 32 accumulators (four n-tiles of mma D fragments: acc[t][2h + e] is row
// group + 8h, column 2·tig + e of n-tile t) into a partial slot: 8·HALVES rows of n sums, row-major.
template <typename T, int HALVES>
__device__ __forceinline__ void smat_store_tile_partial(const T (*acc)[2 * HALVES], T* __restrict__ slot,
                                                        int first_col, int n) {
    const int lane = threadIdx.x & 31, group = lane >> 2, tig = lane & 3;
#pragma unroll
    for (int half_row = 0; half_row < HALVES; ++half_row) {
        T* row = slot + (sgpu_i64)(group + half_row * 8) * n;
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            const int j = first_col + t * 8 + tig * 2;
            if (j < n) row[j] = acc[t][half_row * 2];
            if (j + 1 < n) row[j + 1] = acc[t][half_row * 2 + 1];
        }
    }
}

// A warp's 16 × 32 output tile from its m16n8k16 accumulators (four n-tiles), scaled, plus β·C (not
// read when β = 0), each row to its caller's row (−1: padding, not written). D fragment: rows group
// (elements 0, 1) and group + 8 (2, 3), columns 2·tig and 2·tig + 1. PAIRS: C row-major with even
// ldc (c_cs = 1), so each pair of columns is one aligned 32-bit access.
template <bool BF16, bool PAIRS>
__device__ __forceinline__ void smat_store_tile_rows(const float (*acc)[4], const int* __restrict__ out_rows,
                                                     sgpu_i64 block_row, int first_col, int n, float alpha, float beta,
                                                     unsigned short* __restrict__ c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, group = lane >> 2, tig = lane & 3;
#pragma unroll
    for (int half_row = 0; half_row < 2; ++half_row) {
        const sgpu_i64 out_row = out_rows[block_row * 16 + group + half_row * 8];
        if (out_row < 0) continue;
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            const int j = first_col + t * 8 + tig * 2;
            if (j >= n) continue;
            unsigned short* p = c + out_row * c_rs + j * c_cs;
            float v0 = alpha * acc[t][half_row * 2], v1 = alpha * acc[t][half_row * 2 + 1];
            if (PAIRS && j + 1 < n) {
                unsigned* pair = reinterpret_cast<unsigned*>(p);
                if (beta != 0.0f) {
                    const unsigned old = *pair;
                    v0 += beta * sgpu_half_to_f32<BF16>((unsigned short)(old & 0xffffu));
                    v1 += beta * sgpu_half_to_f32<BF16>((unsigned short)(old >> 16));
                }
                *pair = (unsigned)sgpu_f32_to_half<BF16>(v0) | ((unsigned)sgpu_f32_to_half<BF16>(v1) << 16);
            } else {
                if (beta != 0.0f) v0 += beta * sgpu_half_to_f32<BF16>(*p);
                *p = sgpu_f32_to_half<BF16>(v0);
                if (j + 1 < n) {
                    if (beta != 0.0f) v1 += beta * sgpu_half_to_f32<BF16>(p[c_cs]);
                    p[c_cs] = sgpu_f32_to_half<BF16>(v1);
                }
            }
        }
    }
}

template <bool BF16>
__device__ void smat_tiles_half(int n, const int4* __restrict__ items, const int* __restrict__ columns,
                               const unsigned short* __restrict__ tiles, float* __restrict__ partial,
                               const int* __restrict__ out_rows, float alpha, const unsigned short* __restrict__ b,
                               sgpu_i64 b_rs, sgpu_i64 b_cs, float beta, unsigned short* __restrict__ c,
                               sgpu_i64 c_rs, sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // Fragment coordinates of the PTX m16n8k16 layouts: lane = 4·group + thread-in-group.
    const int group = lane >> 2, tig = lane & 3;
    const int4 item = items[blockIdx.x];
    const sgpu_i64 block_row = item.x;
    const int first = item.y, last = item.z;
    const int strips = (n + SMAT_STRIP - 1) / SMAT_STRIP;
    for (int strip = blockIdx.y * SMAT_WARPS_PER_BLOCK + warp; strip < strips;
         strip += gridDim.y * SMAT_WARPS_PER_BLOCK) {
        const int first_col = strip * SMAT_STRIP;
        float acc[4][4];
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[t][e] = 0.0f;

        for (int s = first; s < last; ++s) {
            // A fragment: rows group / group+8, columns 2·tig (+1) and 2·tig+8 (+1); the tile is
            // row-major 16×16, so each register is one aligned 32-bit load of two neighbours.
            const unsigned* tile = reinterpret_cast<const unsigned*>(tiles + (sgpu_i64)s * 256);
            const unsigned fa[4] = {__ldg(tile + (group * 16 + tig * 2) / 2),
                                    __ldg(tile + ((group + 8) * 16 + tig * 2) / 2),
                                    __ldg(tile + (group * 16 + tig * 2 + 8) / 2),
                                    __ldg(tile + ((group + 8) * 16 + tig * 2 + 8) / 2)};
            // B fragment rows: tile columns 2·tig, 2·tig + 1, 2·tig + 8, 2·tig + 9.
            const int* kc = columns + (sgpu_i64)s * 16 + tig * 2;
            const sgpu_i64 k0 = __ldg(kc), k1 = __ldg(kc + 1), k8 = __ldg(kc + 8), k9 = __ldg(kc + 9);
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                // B fragment (col-major 16×8): column group of the n-tile, rows k0, k1 | k8, k9.
                const int j = first_col + t * 8 + group;
                unsigned fb[2] = {0, 0};
                if (j < n) {
                    const unsigned short* p = b + j * b_cs;
                    const unsigned v0 = k0 >= 0 ? __ldg(p + k0 * b_rs) : 0u, v1 = k1 >= 0 ? __ldg(p + k1 * b_rs) : 0u;
                    const unsigned v8 = k8 >= 0 ? __ldg(p + k8 * b_rs) : 0u, v9 = k9 >= 0 ? __ldg(p + k9 * b_rs) : 0u;
                    fb[0] = v0 | (v1 << 16);
                    fb[1] = v8 | (v9 << 16);
                }
                sgpu_mma_16816<BF16>(acc[t], fa, fb);
            }
        }

        if (item.w < 0)
            smat_store_tile_rows<BF16, false>(acc, out_rows, block_row, first_col, n, alpha, beta, c, c_rs, c_cs);
        else
            smat_store_tile_partial<float, 2>(acc, partial + (sgpu_i64)item.w * 16 * n, first_col, n);
    }
}

// The same product with B staged through shared memory, for row-major B whose rows are 16-byte
// aligned (ldb a multiple of 8) and row-major C with even ldc. A thread block of WARPS warps owns one
// block row and a panel of WARPS·32 columns; for each nonzero tile, all its threads copy the tile and
// the matching 16 rows of the B panel into one of SMAT_STAGES shared-memory stages by cp.async
// (SMAT_STAGES − 1 tiles ahead of the one multiplied), and every warp takes its fragments by
// ldmatrix: the tile's as they are, its 32 columns of B transposed (m16n8k16 wants B by columns).
// Rows of both are padded in shared memory so that the eight rows one ldmatrix reads fall in
// distinct banks.
#define SMAT_STAGES 4
#define SMAT_A_ROW_BYTES 48  // a 16 × 16 tile row is 32 bytes; 48 puts 8 consecutive rows in distinct banks

template <int WARPS>
struct smat_staging {
    static const int PANEL = WARPS * 32;            // columns of B / C per thread block
    static const int B_ROW_BYTES = PANEL * 2 + 16;  // padded so 8 consecutive k rows fall in distinct banks
    static const int B_BYTES = 16 * B_ROW_BYTES;
    static const int STAGE_BYTES = B_BYTES + 16 * SMAT_A_ROW_BYTES;
    static const int SHARED_BYTES = SMAT_STAGES * STAGE_BYTES;
};

template <bool BF16, int WARPS>
__device__ void smat_tiles_half_staged(int n, const int4* __restrict__ items, const int* __restrict__ columns,
                                       const unsigned short* __restrict__ tiles, float* __restrict__ partial,
                                       const int* __restrict__ out_rows, float alpha,
                                       const unsigned short* __restrict__ b, sgpu_i64 ldb, float beta,
                                       unsigned short* __restrict__ c, sgpu_i64 ldc) {
    typedef smat_staging<WARPS> S;
    extern __shared__ __align__(16) unsigned char smat_shared[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int4 item = items[blockIdx.x];
    const sgpu_i64 block_row = item.x;
    const int first_col = blockIdx.y * S::PANEL;
    const int first = item.y, count = item.z - item.y;
    const unsigned base = sgpu_smem_address(smat_shared);

    // Tile `first + i` and its B rows into stage st; a chunk of 8 columns crossing n or a padding
    // column's row goes through registers (zeros where outside), never a partial cp.async.
    auto stage_in = [&](int i, int st) {
        const unsigned stage = base + st * S::STAGE_BYTES;
        const int* tile_columns = columns + (sgpu_i64)(first + i) * 16;
        for (int q = threadIdx.x; q < 16 * (S::PANEL / 8); q += WARPS * 32) {
            const int r = q / (S::PANEL / 8), chunk = q % (S::PANEL / 8);
            const sgpu_i64 k = __ldg(tile_columns + r);
            const int j = first_col + chunk * 8;
            const unsigned dst = stage + r * S::B_ROW_BYTES + chunk * 16;
            const unsigned short* src = b + (k >= 0 ? k : 0) * ldb + j;
            if (k >= 0 && j + 8 <= n) {
                sgpu_cp_async16(dst, src);
            } else {
                unsigned w[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const unsigned lo = (k >= 0 && j + 2 * e < n) ? src[2 * e] : 0u;
                    const unsigned hi = (k >= 0 && j + 2 * e + 1 < n) ? src[2 * e + 1] : 0u;
                    w[e] = lo | (hi << 16);
                }
                sgpu_st_shared16(dst, w[0], w[1], w[2], w[3]);
            }
        }
        if (threadIdx.x < 32) {
            const int r = threadIdx.x >> 1, half_row = threadIdx.x & 1;
            sgpu_cp_async16(stage + S::B_BYTES + r * SMAT_A_ROW_BYTES + half_row * 16,
                            tiles + (sgpu_i64)(first + i) * 256 + threadIdx.x * 8);
        }
    };

    float acc[4][4];
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[t][e] = 0.0f;
    const bool warp_live = first_col + warp * 32 < n;
    // ldmatrix row addresses: lane l gives row (l & 7) of matrix l >> 3. A: matrices (rows 0-7 | 8-15)
    // × (k 0-7 | 8-15) in the order of the a0…a3 registers; B: (k 0-7 | 8-15) × (columns +0 | +8).
    const int matrix = lane >> 3, row_in = lane & 7;
    const unsigned a_offset = S::B_BYTES + ((matrix & 1) * 8 + row_in) * SMAT_A_ROW_BYTES + (matrix >> 1) * 16;
    const unsigned b_offset = ((matrix & 1) * 8 + row_in) * S::B_ROW_BYTES + (warp * 32 + (matrix >> 1) * 8) * 2;

#pragma unroll
    for (int p = 0; p < SMAT_STAGES - 1; ++p) {
        if (p < count) stage_in(p, p);
        sgpu_cp_async_commit();
    }
    for (int i = 0; i < count; ++i) {
        const int ahead = i + SMAT_STAGES - 1;
        if (ahead < count) stage_in(ahead, ahead % SMAT_STAGES);
        sgpu_cp_async_commit();
        sgpu_cp_async_wait<SMAT_STAGES - 1>();
        __syncthreads();
        if (warp_live) {
            const unsigned stage = base + (i % SMAT_STAGES) * S::STAGE_BYTES;
            unsigned fa[4];
            sgpu_ldmatrix_x4<false>(fa, stage + a_offset);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                unsigned fb[4];  // n-tiles 2h and 2h + 1, each (k 0-7, k 8-15)
                sgpu_ldmatrix_x4<true>(fb, stage + b_offset + h * 32);
                sgpu_mma_16816<BF16>(acc[2 * h], fa, fb);
                sgpu_mma_16816<BF16>(acc[2 * h + 1], fa, fb + 2);
            }
        }
        __syncthreads();
    }
    if (!warp_live) return;

    if (item.w < 0)
        smat_store_tile_rows<BF16, true>(acc, out_rows, block_row, first_col + warp * 32, n, alpha, beta, c, ldc, 1);
    else
        smat_store_tile_partial<float, 2>(acc, partial + (sgpu_i64)item.w * 16 * n, first_col + warp * 32, n);
}

#define SMAT_TILES_STAGED(NAME, BF16, WARPS)                                                                          \
    extern "C" __global__ void __launch_bounds__(WARPS * 32)                                                          \
        smat_tiles_##NAME##_staged##WARPS(int n, const int4* items, const int* columns, const unsigned short* tiles,  \
                                          float* partial, const int* out_rows, float alpha, const unsigned short* b, \
                                          sgpu_i64 ldb, float beta, unsigned short* c, sgpu_i64 ldc) {               \
        smat_tiles_half_staged<BF16, WARPS>(n, items, columns, tiles, partial, out_rows, alpha, b, ldb, beta, c,      \
                                            ldc);                                                                    \
    }
SMAT_TILES_STAGED(f16, false, 1)
SMAT_TILES_STAGED(f16, false, 2)
SMAT_TILES_STAGED(f16, false, 4)
SMAT_TILES_STAGED(bf16, true, 1)
SMAT_TILES_STAGED(bf16, true, 2)
SMAT_TILES_STAGED(bf16, true, 4)

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_tiles_f16(int n, const int4* items, const int* columns, const unsigned short* tiles, float* partial,
                  const int* out_rows, float alpha, const unsigned short* b, sgpu_i64 b_rs, sgpu_i64 b_cs,
                  float beta, unsigned short* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_tiles_half<false>(n, items, columns, tiles, partial, out_rows, alpha, b, b_rs, b_cs, beta, c, c_rs, c_cs);
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_tiles_bf16(int n, const int4* items, const int* columns, const unsigned short* tiles, float* partial,
                   const int* out_rows, float alpha, const unsigned short* b, sgpu_i64 b_rs, sgpu_i64 b_cs,
                   float beta, unsigned short* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_tiles_half<true>(n, items, columns, tiles, partial, out_rows, alpha, b, b_rs, b_cs, beta, c, c_rs, c_cs);
}

// ---------------------------------------------------------------------------------------------
// f32 (16×8 tiles) in exact FP32 (the default math mode): FMA on the same schedule. Each lane owns
// one column of the strip and a tile-high column of accumulators; every lane reads the same tile
// element at once (a broadcast), and its own TC elements of B per tile.

template <typename T, int TR, int TC>
__device__ void smat_tiles_simt(int n, const int4* __restrict__ items, const int* __restrict__ columns,
                               const T* __restrict__ tiles, T* __restrict__ partial,
                               const int* __restrict__ out_rows, T alpha, const T* __restrict__ b, sgpu_i64 b_rs,
                               sgpu_i64 b_cs, T beta, T* __restrict__ c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int4 item = items[blockIdx.x];
    const sgpu_i64 block_row = item.x;
    const int first = item.y, last = item.z;
    const int strips = (n + SMAT_STRIP - 1) / SMAT_STRIP;
    for (int strip = blockIdx.y * SMAT_WARPS_PER_BLOCK + warp; strip < strips;
         strip += gridDim.y * SMAT_WARPS_PER_BLOCK) {
        const int j = strip * SMAT_STRIP + lane;
        const bool live = j < n;
        T acc[TR];
#pragma unroll
        for (int r = 0; r < TR; ++r) acc[r] = 0;
        // Lane q < TC holds column q of the tile multiplied next, loaded one tile ahead so that the
        // B loads never wait for their index; the warp reads it by shuffle.
        int next_column = (first < last && lane < TC) ? __ldg(columns + (sgpu_i64)first * TC + lane) : -1;
        for (int s = first; s < last; ++s) {
            const int column = next_column;
            if (s + 1 < last && lane < TC) next_column = __ldg(columns + (sgpu_i64)(s + 1) * TC + lane);
            T bv[TC];
#pragma unroll
            for (int q = 0; q < TC; ++q) {
                const sgpu_i64 k = __shfl_sync(0xffffffffu, column, q);
                bv[q] = (live && k >= 0) ? __ldg(b + k * b_rs + j * b_cs) : T(0);
            }
            const T* tile = tiles + (sgpu_i64)s * (TR * TC);
#pragma unroll
            for (int r = 0; r < TR; ++r)
#pragma unroll
                for (int q = 0; q < TC; ++q) acc[r] = fma(__ldg(tile + r * TC + q), bv[q], acc[r]);
        }
        if (!live) continue;
        if (item.w >= 0) {
            T* slot = partial + (sgpu_i64)item.w * TR * n;
#pragma unroll
            for (int r = 0; r < TR; ++r) slot[(sgpu_i64)r * n + j] = acc[r];
            continue;
        }
#pragma unroll
        for (int r = 0; r < TR; ++r) {
            const sgpu_i64 out_row = out_rows[block_row * TR + r];
            if (out_row < 0) break;
            T* p = c + out_row * c_rs + j * c_cs;
            *p = beta == T(0) ? alpha * acc[r] : alpha * acc[r] + beta * *p;
        }
    }
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_tiles_f32(int n, const int4* items, const int* columns, const float* tiles, float* partial,
                  const int* out_rows, float alpha, const float* b, sgpu_i64 b_rs, sgpu_i64 b_cs, float beta, float* c,
                  sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_tiles_simt<float, 16, 8>(n, items, columns, tiles, partial, out_rows, alpha, b, b_rs, b_cs, beta, c, c_rs,
                                 c_cs);
}

// f32 tiles in exact FP32, panel form: row-major B and C whose rows are 16-byte aligned. The kernel
// above gives a lane one column and loads each tile element once per FMA, so it issues about three
// instructions per FMA and a warp's few loads in flight leave it waiting on L1 (ncu on ergo's
// overlap matrix at n = 128: 0.42 instructions a cycle per scheduler, 58 % of cycles with no warp
// eligible). Here a lane owns 4 columns of all 16 tile rows, a group of L lanes a panel of 4·L
// columns (a warp: one group of 32 lanes, or two of 16 / four of 8 for narrow C), and a thread block
// of SMAT_WARPS_PER_BLOCK warps a work item; the block's groups take the item's tiles in turn, so
// that a short item still keeps them all busy, and their sums are added at the end, by shuffles
// within a warp and in warp order through shared memory (the result does not depend on scheduling).
// Per tile a lane loads its 4 columns of the tile's 8 rows of B and its share of the tile, which
// the group stages in shared memory and reads back as broadcasts: one shared load per 16 FMAs.
#define SMAT_F32_TILE_ROWS 16
#define SMAT_F32_TILE_COLS 8

// A lane's 4 consecutive floats of a row of B from column j (zeros for columns ≥ n, or where `valid`
// is false). The panel kernel keeps these float4 loads and stores of its own rather than the CSR
// kernels' smat_fetch_b / smat_store_c below: with those it ran 3.5 % more instructions and 5–10 %
// longer at n = 64 (ncu and an A/B bench run on an H100).
__device__ __forceinline__ void smat_load_f32x4(float (&v)[4], const float* __restrict__ row, int j, int n,
                                                bool valid) {
    if (valid && j + 4 <= n) {
        const float4 t = __ldg(reinterpret_cast<const float4*>(row + j));
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) v[q] = (valid && j + q < n) ? __ldg(row + j + q) : 0.0f;
    }
}

// The first `count` of 4 floats to dst, one float4 store where all 4 go and `aligned` says dst is.
__device__ __forceinline__ void smat_store_f32x4(float* dst, const float (&v)[4], int count, bool aligned) {
    if (aligned && count >= 4) {
        *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
            if (q < count) dst[q] = v[q];
    }
}

template <int GROUPS>
__device__ void smat_tiles_f32_panel(int n, const int4* __restrict__ items, const int* __restrict__ columns,
                                     const float* __restrict__ tiles, float* __restrict__ partial,
                                     const int* __restrict__ out_rows, float alpha, const float* __restrict__ b,
                                     sgpu_i64 ldb, float beta, float* __restrict__ c, sgpu_i64 ldc) {
    const int W = SMAT_WARPS_PER_BLOCK, TR = SMAT_F32_TILE_ROWS, TC = SMAT_F32_TILE_COLS, CPL = 4;
    const int L = 32 / GROUPS, PANEL = L * CPL;  // lanes of a group, and the columns they cover
    const int TILE_VECTORS = TR * TC / 4;        // float4s of a tile
    // Each group's tile, double-buffered (one __syncwarp a tile); a group's tile 16 bytes past the
    // one before, so that the groups' broadcasts of the same element fall in different banks.
    __shared__ float4 staged[W][2][GROUPS][TILE_VECTORS + 1];
    __shared__ __align__(16) float sums[W][TR][PANEL];  // the warps' sums of the panel
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = lane / L, glane = lane % L;
    const int4 item = items[blockIdx.x];
    const int first = item.y, last = item.z;
    for (int panel = blockIdx.y; panel * PANEL < n; panel += gridDim.y) {
        const int j = panel * PANEL + glane * CPL;
        float acc[TR][CPL];
#pragma unroll
        for (int r = 0; r < TR; ++r)
#pragma unroll
            for (int q = 0; q < CPL; ++q) acc[r][q] = 0.0f;
        // Lane q < TC of a group holds column q of the group's tile (−1: padding, or past the item).
        auto column_of = [&](int s) {
            return (s < last && glane < TC) ? __ldg(columns + (sgpu_i64)s * TC + glane) : -1;
        };
        float bv[TC][CPL];
        float4 tv[TILE_VECTORS / L];
        auto load_tile = [&](int s, int column) {
#pragma unroll
            for (int q = 0; q < TC; ++q) {
                const int k = __shfl_sync(0xffffffffu, column, q, L);
                smat_load_f32x4(bv[q], b + (sgpu_i64)(k >= 0 ? k : 0) * ldb, j, n, k >= 0);
            }
            if (s < last)
#pragma unroll
                for (int t = 0; t < TILE_VECTORS / L; ++t)
                    tv[t] = __ldg(reinterpret_cast<const float4*>(tiles + (sgpu_i64)s * (TR * TC)) + glane + t * L);
        };
        // The warps' groups take the item's tiles in turn. A tile's B rows and elements are loaded at
        // the top of its iteration; other warps cover their latency (keeping the next tile's in
        // registers as well took 168 registers, three thread blocks an SM, and measured 5–25 %
        // slower).
        const int stride = W * GROUPS;
        int s = first + warp * GROUPS + group;
        int column = column_of(s);
        // Every lane of the warp loops as long as its furthest group, which has the most tiles.
        const int rounds = (last - first - warp * GROUPS + stride - 1) / stride;
        for (int round = 0, buf = 0; round < rounds; ++round, s += stride, buf ^= 1) {
            load_tile(s, column);
            column = column_of(s + stride);
#pragma unroll
            for (int t = 0; t < TILE_VECTORS / L; ++t) staged[warp][buf][group][glane + t * L] = tv[t];
            __syncwarp();
            if (s < last) {
#pragma unroll
                for (int r = 0; r < TR; ++r) {
                    const float4 lo = staged[warp][buf][group][2 * r], hi = staged[warp][buf][group][2 * r + 1];
                    const float a[TC] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
                    for (int q = 0; q < TC; ++q)
#pragma unroll
                        for (int e = 0; e < CPL; ++e) acc[r][e] = fmaf(a[q], bv[q][e], acc[r][e]);
                }
            }
        }
        // The groups' sums, in the same order on every lane.
#pragma unroll
        for (int offset = L; offset < 32; offset *= 2)
#pragma unroll
            for (int r = 0; r < TR; ++r)
#pragma unroll
                for (int e = 0; e < CPL; ++e) acc[r][e] += __shfl_xor_sync(0xffffffffu, acc[r][e], offset);
        if (group == 0)
#pragma unroll
            for (int r = 0; r < TR; ++r) smat_store_f32x4(&sums[warp][r][glane * CPL], acc[r], CPL, true);
        __syncthreads();
        // Warp w finishes rows 4w … 4w + 3 of the panel, adding the warps' sums in warp order; its
        // groups take the rows in turn.
        const int live = j < n ? min(CPL, n - j) : 0;  // this lane's columns inside C
        for (int r = warp * (TR / W) + group; r < (warp + 1) * (TR / W); r += GROUPS) {
            float v[CPL];
#pragma unroll
            for (int e = 0; e < CPL; ++e) v[e] = sums[0][r][glane * CPL + e];
#pragma unroll
            for (int w = 1; w < W; ++w)
#pragma unroll
                for (int e = 0; e < CPL; ++e) v[e] += sums[w][r][glane * CPL + e];
            if (live == 0) continue;
            if (item.w >= 0) {
                // A run of a split block row: the unscaled sums into its partial slot (TR rows × n).
                smat_store_f32x4(partial + ((sgpu_i64)item.w * TR + r) * n + j, v, live, n % CPL == 0);
                continue;
            }
            const sgpu_i64 out_row = out_rows[(sgpu_i64)item.x * TR + r];
            if (out_row < 0) continue;
            float* dst = c + out_row * ldc + j;
            if (beta != 0.0f) {
#pragma unroll
                for (int e = 0; e < CPL; ++e) v[e] = alpha * v[e] + (e < live ? beta * dst[e] : 0.0f);
            } else {
#pragma unroll
                for (int e = 0; e < CPL; ++e) v[e] = alpha * v[e];
            }
            smat_store_f32x4(dst, v, live, true);
        }
        __syncthreads();  // the sums are read before the next panel writes them
    }
}

// Four thread blocks an SM (128 registers a thread): the tile schedule's work items fill one wave.
// Panels of 128, 64 and 32 columns: one, two or four groups of lanes a warp.
#define SMAT_TILES_F32_PANEL(PANEL, GROUPS)                                                                           \
    extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32, 4)                                        \
        smat_tiles_f32_panel##PANEL(int n, const int4* items, const int* columns, const float* tiles,                 \
                                    float* partial, const int* out_rows, float alpha, const float* b, sgpu_i64 ldb,   \
                                    float beta, float* c, sgpu_i64 ldc) {                                             \
        smat_tiles_f32_panel<GROUPS>(n, items, columns, tiles, partial, out_rows, alpha, b, ldb, beta, c, ldc);       \
    }
SMAT_TILES_F32_PANEL(128, 1)
SMAT_TILES_F32_PANEL(64, 2)
SMAT_TILES_F32_PANEL(32, 4)

// f32 and f64 on tensor cores, unstaged like smat_tiles_half: one warp per 8·HALVES tile rows × 32
// columns, A fragments and B read directly (B rows by the tile's column indices), the next tile's
// column indices loaded while the current one is multiplied.
//
// The epilogue of a whole block row: a warp's output tile from mma D fragments (as in
// smat_store_tile_partial), scaled, plus β·C (not read when β = 0), each row to its caller's row.
template <typename T, int HALVES>
__device__ __forceinline__ void smat_store_mma_rows(const T (*acc)[2 * HALVES], const int* __restrict__ out_rows,
                                                    sgpu_i64 block_row, int first_col, int n, T alpha, T beta,
                                                    T* __restrict__ c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, group = lane >> 2, tig = lane & 3;
#pragma unroll
    for (int half_row = 0; half_row < HALVES; ++half_row) {
        const sgpu_i64 out_row = out_rows[block_row * (8 * HALVES) + group + half_row * 8];
        if (out_row < 0) continue;
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int j = first_col + t * 8 + tig * 2 + e;
                if (j >= n) continue;
                T* p = c + out_row * c_rs + j * c_cs;
                const T v = alpha * acc[t][half_row * 2 + e];
                *p = beta == T(0) ? v : v + beta * *p;
            }
    }
}

// f32 16 × 8 tiles in 3xTF32 (SMAT_MATH_MODE_TF32X3): m16n8k8 with each element of A and B split
// into TF32 big and small parts (sgpu_tf32_split), a·b as small_a·big_b + big_a·small_b +
// big_a·big_b, accumulated in FP32. A fragment: rows group / group + 8, tile columns tig / tig + 4;
// B fragment: B rows columns[tig] / columns[tig + 4], column group of the n-tile.
__device__ void smat_tiles_3xtf32(int n, const int4* __restrict__ items, const int* __restrict__ columns,
                                  const float* __restrict__ tiles, float* __restrict__ partial,
                                  const int* __restrict__ out_rows, float alpha, const float* __restrict__ b,
                                  sgpu_i64 b_rs, sgpu_i64 b_cs, float beta, float* __restrict__ c, sgpu_i64 c_rs,
                                  sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, group = lane >> 2, tig = lane & 3;
    const int4 item = items[blockIdx.x];
    const int first = item.y, last = item.z;
    const int strips = (n + SMAT_STRIP - 1) / SMAT_STRIP;
    for (int strip = blockIdx.y * SMAT_WARPS_PER_BLOCK + warp; strip < strips;
         strip += gridDim.y * SMAT_WARPS_PER_BLOCK) {
        const int first_col = strip * SMAT_STRIP;
        float acc[4][4];
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[t][e] = 0.0f;
        int next_k0 = first < last ? __ldg(columns + (sgpu_i64)first * 8 + tig) : -1;
        int next_k1 = first < last ? __ldg(columns + (sgpu_i64)first * 8 + tig + 4) : -1;
        for (int s = first; s < last; ++s) {
            const sgpu_i64 k0 = next_k0, k1 = next_k1;
            if (s + 1 < last) {
                next_k0 = __ldg(columns + (sgpu_i64)(s + 1) * 8 + tig);
                next_k1 = __ldg(columns + (sgpu_i64)(s + 1) * 8 + tig + 4);
            }
            const float* tile = tiles + (sgpu_i64)s * 128;
            const float av[4] = {__ldg(tile + group * 8 + tig), __ldg(tile + (group + 8) * 8 + tig),
                                 __ldg(tile + group * 8 + tig + 4), __ldg(tile + (group + 8) * 8 + tig + 4)};
            unsigned a_big[4], a_small[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) sgpu_tf32_split(av[e], a_big[e], a_small[e]);
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const int j = first_col + t * 8 + group;
                const bool live = j < n;
                const float b0 = (live && k0 >= 0) ? __ldg(b + k0 * b_rs + j * b_cs) : 0.0f;
                const float b1 = (live && k1 >= 0) ? __ldg(b + k1 * b_rs + j * b_cs) : 0.0f;
                unsigned b_big[2], b_small[2];
                sgpu_tf32_split(b0, b_big[0], b_small[0]);
                sgpu_tf32_split(b1, b_big[1], b_small[1]);
                sgpu_mma_1688(acc[t], a_small, b_big);
                sgpu_mma_1688(acc[t], a_big, b_small);
                sgpu_mma_1688(acc[t], a_big, b_big);
            }
        }
        if (item.w < 0)
            smat_store_mma_rows<float, 2>(acc, out_rows, item.x, first_col, n, alpha, beta, c, c_rs, c_cs);
        else
            smat_store_tile_partial<float, 2>(acc, partial + (sgpu_i64)item.w * 16 * n, first_col, n);
    }
}

// f64 8 × 4 tiles on DMMA (m8n8k4): the A fragment is tile element `lane` (row group, column tig),
// the B fragment B row columns[tig], column group of the n-tile.
__device__ void smat_tiles_dmma(int n, const int4* __restrict__ items, const int* __restrict__ columns,
                                const double* __restrict__ tiles, double* __restrict__ partial,
                                const int* __restrict__ out_rows, double alpha, const double* __restrict__ b,
                                sgpu_i64 b_rs, sgpu_i64 b_cs, double beta, double* __restrict__ c, sgpu_i64 c_rs,
                                sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, group = lane >> 2, tig = lane & 3;
    const int4 item = items[blockIdx.x];
    const int first = item.y, last = item.z;
    const int strips = (n + SMAT_STRIP - 1) / SMAT_STRIP;
    for (int strip = blockIdx.y * SMAT_WARPS_PER_BLOCK + warp; strip < strips;
         strip += gridDim.y * SMAT_WARPS_PER_BLOCK) {
        const int first_col = strip * SMAT_STRIP;
        double acc[4][2];
#pragma unroll
        for (int t = 0; t < 4; ++t) acc[t][0] = acc[t][1] = 0.0;
        int next_k = first < last ? __ldg(columns + (sgpu_i64)first * 4 + tig) : -1;
        for (int s = first; s < last; ++s) {
            const sgpu_i64 k = next_k;
            if (s + 1 < last) next_k = __ldg(columns + (sgpu_i64)(s + 1) * 4 + tig);
            const double a = __ldg(tiles + (sgpu_i64)s * 32 + lane);
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const int j = first_col + t * 8 + group;
                const double bv = (j < n && k >= 0) ? __ldg(b + k * b_rs + j * b_cs) : 0.0;
                sgpu_dmma_884(acc[t], a, bv);
            }
        }
        if (item.w < 0)
            smat_store_mma_rows<double, 1>(acc, out_rows, item.x, first_col, n, alpha, beta, c, c_rs, c_cs);
        else
            smat_store_tile_partial<double, 1>(acc, partial + (sgpu_i64)item.w * 8 * n, first_col, n);
    }
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_tiles_f32_3xtf32(int n, const int4* items, const int* columns, const float* tiles, float* partial,
                          const int* out_rows, float alpha, const float* b, sgpu_i64 b_rs, sgpu_i64 b_cs, float beta,
                          float* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_tiles_3xtf32(n, items, columns, tiles, partial, out_rows, alpha, b, b_rs, b_cs, beta, c, c_rs, c_cs);
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_tiles_f64(int n, const int4* items, const int* columns, const double* tiles, double* partial,
                        const int* out_rows, double alpha, const double* b, sgpu_i64 b_rs, sgpu_i64 b_cs, double beta,
                        double* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_tiles_dmma(n, items, columns, tiles, partial, out_rows, alpha, b, b_rs, b_cs, beta, c, c_rs, c_cs);
}

// ---------------------------------------------------------------------------------------------
// CSR rows on the CUDA cores. A group of G lanes (a power of two ≤ 32, chosen so that G·CPL columns
// cover n when they can) owns one row (or ROWS consecutive rows, one after another: smat_short_rows)
// and a chunk of G·CPL columns (grid y), each lane CPL consecutive columns. The group reads G
// entries of its row at once (one per lane, coalesced), then broadcasts them by shuffle and every
// lane reads its columns of the entry's row of B; four rows of B are in flight at a time.
// Accumulation is in the compute type (FP32 for the 16-bit types).
//
// Rows longer than long_limit are skipped here: the segment kernels below split them over many
// groups, so that a few very long rows (a circuit's supply nets, a graph's hubs) do not leave one
// group working while the rest of the GPU idles.
//
// VEC: B and C row-major with 16-byte aligned rows and CPL·sizeof(T) = 16, so a lane's columns are
// one 16-byte load; otherwise CPL = 1 and any strides.

// Up to 16 bytes of one row of B as fetched: a lane's CPL values, kept packed until they are used so
// that many loads can be in flight without holding their widened values.
template <typename T>
union smat_b_chunk {
    uint4 v;
    T e[16 / sizeof(T)];
};

// A lane's CPL values of row k of B element by element (columns j … j + CPL − 1; zeros for columns
// ≥ n and for k < 0, which marks an entry past the end of the lane's row): the general layout, and
// the 16-byte form's lanes whose columns reach past n (the others load their 16 bytes at once).
template <typename T, int CPL>
__device__ __forceinline__ uint4 smat_fetch_b(const T* __restrict__ b, int k, int j, int n, sgpu_i64 b_rs,
                                              sgpu_i64 b_cs) {
    smat_b_chunk<T> u;
    u.v.x = u.v.y = u.v.z = u.v.w = 0u;
    if (k < 0) return u.v;
    const T* p = b + (sgpu_i64)k * b_rs + j * b_cs;
#pragma unroll
    for (int q = 0; q < CPL; ++q)
        if (j + q < n) u.e[q] = p[q * b_cs];
    return u.v;
}

// Byte offset of row k of B from row 0 at `pitch` bytes a row: a signed 64-bit product, or, where
// the caller's pitch is unsigned (k ≥ 0 and the pitch within 32 bits), a 32-bit unsigned one widened
// by the multiply (made the short rows' kernels 2–10 % faster in f16 / bf16, docs/methods.md).
__device__ __forceinline__ sgpu_i64 smat_b_offset(int k, int pitch) { return (sgpu_i64)k * pitch; }
__device__ __forceinline__ unsigned long long smat_b_offset(int k, unsigned pitch) {
    return (unsigned long long)(unsigned)k * pitch;
}

// A lane's CPL values of rows k[0 … N) of B (zeros where k < 0): with `whole` (VEC, and the lane's
// columns all below n), one 16-byte load a row at b_lane + row offset; otherwise element by element.
template <typename T, int CPL, int N, typename Pitch>
__device__ __forceinline__ void smat_load_b_rows(uint4 (&raw)[N], const int (&k)[N], bool whole, const char* b_lane,
                                                 Pitch pitch, const T* __restrict__ b, int j, int n, sgpu_i64 b_rs,
                                                 sgpu_i64 b_cs) {
    if (whole) {
#pragma unroll
        for (int u = 0; u < N; ++u) {
            raw[u] = make_uint4(0u, 0u, 0u, 0u);
            if (k[u] >= 0) raw[u] = __ldg(reinterpret_cast<const uint4*>(b_lane + smat_b_offset(k[u], pitch)));
        }
    } else {
#pragma unroll
        for (int u = 0; u < N; ++u) raw[u] = smat_fetch_b<T, CPL>(b, k[u], j, n, b_rs, b_cs);
    }
}

// acc += Σ A[row, e] · B[col(e), j …] over entries first … last − 1 of one row, by a group of G lanes
// (sub = the lane's index in its group). Every lane of the warp must call this together: the loop
// runs as long as the warp's longest row, shorter rows' groups idling under a predicate, because
// groups looping on their own would diverge and run one after another. The group takes G entries at
// once (one per lane, coalesced) and hands them round by shuffle; UNROLL rows of B are in flight.
// VEC: the lane's columns of row k of B start k·pitch bytes after its columns of row 0 (the launcher
// keeps the pitch within 32 bits, so that the address is one wide multiply-add), and a lane whose
// CPL columns all lie below n loads them at once: the row's checks are made once, not per entry
// (ncu, random 1e-2 in f16 at n = 128: computing each entry's 64-bit address and testing its bounds
// took about 25 instructions a lane, more than the entry's conversions and FMAs).
template <typename T, typename E, int CPL, bool VEC>
__device__ __forceinline__ void smat_row_product(typename E::compute* acc, int first, int last,
                                                 const int* __restrict__ col_ind, const T* __restrict__ values,
                                                 const T* __restrict__ b, sgpu_i64 b_rs, sgpu_i64 b_cs, int j, int n,
                                                 int G, int sub) {
    typedef typename E::compute C;
    const int UNROLL = VEC ? 8 : 4;
    const int length = last - first;
    const int longest = __reduce_max_sync(0xffffffffu, length);
    const char* b_lane = reinterpret_cast<const char*>(b + j * b_cs);
    const int pitch = VEC ? (int)(b_rs * (sgpu_i64)sizeof(T)) : 0;
    const bool whole = VEC && j + CPL <= n;
    for (int base = 0; base < longest; base += G) {
        const bool mine = base + sub < length;
        const int my_col = mine ? __ldg(col_ind + first + base + sub) : -1;
        const C my_val = mine ? E::load(values[first + base + sub]) : C(0);
        const int count = min(G, longest - base);
        for (int t = 0; t < count; t += UNROLL) {
            // The entries' rows of B; past `count` every lane reads -1 (a lane of its own group past
            // the row): no load.
            int k[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int shuffled = __shfl_sync(0xffffffffu, my_col, (t + u) & (G - 1), G);
                k[u] = t + u < count ? shuffled : -1;
            }
            uint4 raw[UNROLL];
            smat_load_b_rows<T, CPL>(raw, k, whole, b_lane, pitch, b, j, n, b_rs, b_cs);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const C shuffled = __shfl_sync(0xffffffffu, my_val, (t + u) & (G - 1), G);
                const C v = t + u < count ? shuffled : C(0);  // never 0 × a NaN of A: a zero chunk stays 0
                smat_b_chunk<T> chunk;
                chunk.v = raw[u];
#pragma unroll
                for (int q = 0; q < CPL; ++q) acc[q] = fma(v, E::load(chunk.e[q]), acc[q]);
            }
        }
    }
}

// C[out_row, j …] = α·acc + β·C[out_row, j …] (C not read when β = 0).
template <typename T, typename E, int CPL, bool VEC>
__device__ __forceinline__ void smat_store_c(const typename E::compute* acc, typename E::compute alpha,
                                             typename E::compute beta, T* __restrict__ c, sgpu_i64 out_row, int j,
                                             int n, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    typedef typename E::compute C;
    T* p = c + out_row * c_rs + j * c_cs;
    if (VEC && j + CPL <= n) {
        union {
            uint4 v;
            T e[CPL];
        } u;
        if (beta != C(0)) u.v = *reinterpret_cast<const uint4*>(p);
#pragma unroll
        for (int q = 0; q < CPL; ++q)
            u.e[q] = E::store(beta == C(0) ? alpha * acc[q] : alpha * acc[q] + beta * E::load(u.e[q]));
        *reinterpret_cast<uint4*>(p) = u.v;
    } else {
#pragma unroll
        for (int q = 0; q < CPL; ++q) {
            if (j + q >= n) break;
            T* x = p + q * c_cs;
            *x = E::store(beta == C(0) ? alpha * acc[q] : alpha * acc[q] + beta * E::load(*x));
        }
    }
}

// One row `row` (none past `rows`) of C by a group of G lanes.
template <typename T, typename E, int CPL, bool VEC>
__device__ __forceinline__ void smat_row(int rows, sgpu_i64 row, const int* __restrict__ row_ptr,
                                         const int* __restrict__ out_rows, const int* __restrict__ col_ind,
                                         const T* __restrict__ values, int long_limit, int G,
                                         typename E::compute alpha, const T* __restrict__ b, sgpu_i64 b_rs,
                                         sgpu_i64 b_cs, typename E::compute beta, T* __restrict__ c, sgpu_i64 c_rs,
                                         sgpu_i64 c_cs, int n) {
    typedef typename E::compute C;
    const int sub = threadIdx.x & (G - 1);
    // Groups past the last row or on a long row take part with no entries (the warp loops together).
    int first = 0, last = 0;
    const bool live = row < rows;
    if (live) {
        first = row_ptr[row];
        last = row_ptr[row + 1];
        if (last - first > long_limit) last = first;
    }
    const bool writes = live && row_ptr[row + 1] - first <= long_limit;
    const sgpu_i64 out_row = live ? out_rows[row] : 0;
    // Column chunk blockIdx.y (and every gridDim.y-th after it): the grid runs chunk after chunk, so
    // only one chunk of B's columns is being read at a time (it stays in L2 when B as a whole would
    // not). Lanes past n load and store nothing but stay in the loop: the warp must stay together.
    for (int chunk = blockIdx.y * G * CPL; chunk < n; chunk += gridDim.y * G * CPL) {
        const int j = chunk + sub * CPL;
        C acc[CPL];
#pragma unroll
        for (int q = 0; q < CPL; ++q) acc[q] = C(0);
        smat_row_product<T, E, CPL, VEC>(acc, first, last, col_ind, values, b, b_rs, b_cs, j, n, G, sub);
        if (writes) smat_store_c<T, E, CPL, VEC>(acc, alpha, beta, c, out_row, j, n, c_rs, c_cs);
    }
}

// A row a group of G lanes (smat_rows_*).
template <typename T, typename E, int CPL, bool VEC>
__device__ void smat_rows(int rows, const int* __restrict__ row_ptr, const int* __restrict__ out_rows,
                          const int* __restrict__ col_ind, const T* __restrict__ values, int long_limit, int G,
                          typename E::compute alpha, const T* __restrict__ b, sgpu_i64 b_rs, sgpu_i64 b_cs,
                          typename E::compute beta, T* __restrict__ c, sgpu_i64 c_rs, sgpu_i64 c_cs, int n) {
    const sgpu_i64 group = ((sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    smat_row<T, E, CPL, VEC>(rows, group, row_ptr, out_rows, col_ind, values, long_limit, G, alpha, b, b_rs, b_cs, beta,
                             c, c_rs, c_cs, n);
}

// Rows a group takes in the short rows' kernels (at most one a lane).
#define SMAT_SHORT_ROWS 8

// The run's rows multiplied as one sequence of entries, G at a time, the rows of B of RUN_SLOTS
// entries in flight whichever rows they belong to; a row's sums are stored when the sequence passes
// its last entry. A row at a time, each row of a few entries costs a chain of dependent loads (its
// row pointers, then its columns, then its rows of B) for little work, which the kernel waits on.
// Lane i < R holds the first entry and caller's row of the run's row i. Returns false, having done
// nothing, when a run of the warp holds a row longer than long_limit (a segment kernel's): the
// caller then takes the rows a row at a time.
template <typename T, typename E, int CPL, bool VEC, int RUN_SLOTS>
__device__ __forceinline__ bool smat_row_runs(sgpu_i64 run, int R, int rows, const int* __restrict__ row_ptr,
                                              const int* __restrict__ out_rows, const int* __restrict__ col_ind,
                                              const T* __restrict__ values, int long_limit, int G,
                                              typename E::compute alpha, const T* __restrict__ b, sgpu_i64 b_rs,
                                              sgpu_i64 b_cs, typename E::compute beta, T* __restrict__ c,
                                              sgpu_i64 c_rs, sgpu_i64 c_cs, int n) {
    typedef typename E::compute C;
    const unsigned lane_in_warp = threadIdx.x & 31;
    const int sub = (int)(lane_in_warp & (G - 1));
    const unsigned group_mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane_in_warp - sub);
    const int r0 = (int)min(run * R, (sgpu_i64)rows);
    const int run_rows = min(R, rows - r0);  // 0 past the last row
    const int my_first = sub < run_rows ? row_ptr[r0 + sub] : 0;
    const int my_out = sub < run_rows ? out_rows[r0 + sub] : 0;
    const int last = run_rows > 0 ? row_ptr[r0 + run_rows] : 0;
    int my_end = __shfl_down_sync(0xffffffffu, my_first, 1, G);
    if (sub == run_rows - 1) my_end = last;
    if (__any_sync(0xffffffffu, sub < run_rows && my_end - my_first > long_limit)) return false;
    const int first = __shfl_sync(0xffffffffu, my_first, 0, G);
    const int length = last - first;
    const int longest = __reduce_max_sync(0xffffffffu, length);
    const char* b_lane0 = reinterpret_cast<const char*>(b);
    const unsigned pitch = VEC ? (unsigned)(b_rs * (sgpu_i64)sizeof(T)) : 0u;
    for (int chunk = blockIdx.y * G * CPL; chunk < n; chunk += gridDim.y * G * CPL) {  // as in smat_row
        const int j = chunk + sub * CPL;
        const char* b_lane = b_lane0 + (j * b_cs) * (sgpu_i64)sizeof(T);
        const bool whole = VEC && j + CPL <= n;
        C acc[CPL];
#pragma unroll
        for (int q = 0; q < CPL; ++q) acc[q] = C(0);
        int row = 0;  // the run's row being summed; rows before it are stored
        // Stores the sums of the run's rows row … up_to − 1 (all but the first empty) and moves on.
        auto store_rows = [&](int up_to) {
            while (row < up_to) {
                const int out_row = __shfl_sync(group_mask, my_out, row, G);
                smat_store_c<T, E, CPL, VEC>(acc, alpha, beta, c, out_row, j, n, c_rs, c_cs);
#pragma unroll
                for (int q = 0; q < CPL; ++q) acc[q] = C(0);
                ++row;
            }
        };
        for (int base = 0; base < longest; base += G) {
            const int e = first + base + sub;
            const bool mine = base + sub < length;
            const int my_col = mine ? __ldg(col_ind + e) : -1;
            const C my_val = mine ? E::load(values[e]) : C(0);
            // The run's row of entry e: the last row whose first entry is at most e (an empty row
            // shares its first entry with the next). Past the run's entries: its last row, so that
            // the rows before it are stored as soon as the group has none left.
            int my_row = 0;
#pragma unroll
            for (int i = 1; i < SMAT_SHORT_ROWS; ++i) {
                const int row_first = __shfl_sync(0xffffffffu, my_first, i & (G - 1), G);
                if (i < run_rows && row_first <= e) ++my_row;
            }
            if (!mine) my_row = max(run_rows - 1, 0);
            const int count = min(G, longest - base);  // the same on every lane of the warp
            for (int t = 0; t < count; t += RUN_SLOTS) {
                int k[RUN_SLOTS];
#pragma unroll
                for (int u = 0; u < RUN_SLOTS; ++u)
                    k[u] = t + u < count ? __shfl_sync(0xffffffffu, my_col, (t + u) & (G - 1), G) : -1;
                uint4 raw[RUN_SLOTS];
                smat_load_b_rows<T, CPL>(raw, k, whole, b_lane, pitch, b, j, n, b_rs, b_cs);
#pragma unroll
                for (int u = 0; u < RUN_SLOTS; ++u) {
                    if (t + u >= count) break;
                    const C v = __shfl_sync(0xffffffffu, my_val, (t + u) & (G - 1), G);
                    const int entry_row = __shfl_sync(0xffffffffu, my_row, (t + u) & (G - 1), G);
                    store_rows(entry_row);
                    smat_b_chunk<T> piece;
                    piece.v = raw[u];
#pragma unroll
                    for (int q = 0; q < CPL; ++q) acc[q] = fma(v, E::load(piece.e[q]), acc[q]);
                }
            }
        }
        store_rows(run_rows);
    }
    return true;
}

// Short rows (smat_short_rows_*): a run of R = min(SMAT_SHORT_ROWS, G) consecutive rows a group of G
// lanes, as one sequence of entries (smat_row_runs, RUN_SLOTS > 0) or a row at a time (on rows of
// 3–5 entries 2–22 % faster than a row a group: a grid of fewer thread blocks, each doing more
// work). Which, per type, was measured (docs/methods.md).
template <typename T, typename E, int CPL, bool VEC, int RUN_SLOTS>
__device__ void smat_short_rows(int rows, const int* __restrict__ row_ptr, const int* __restrict__ out_rows,
                                const int* __restrict__ col_ind, const T* __restrict__ values, int long_limit, int G,
                                typename E::compute alpha, const T* __restrict__ b, sgpu_i64 b_rs, sgpu_i64 b_cs,
                                typename E::compute beta, T* __restrict__ c, sgpu_i64 c_rs, sgpu_i64 c_cs, int n) {
    const int R = min(SMAT_SHORT_ROWS, G);
    const sgpu_i64 run = ((sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    if constexpr (RUN_SLOTS > 0) {
        if (smat_row_runs<T, E, CPL, VEC, RUN_SLOTS>(run, R, rows, row_ptr, out_rows, col_ind, values, long_limit, G,
                                                     alpha, b, b_rs, b_cs, beta, c, c_rs, c_cs, n))
            return;
    }
#pragma unroll 1
    for (int r = 0; r < R; ++r)
        smat_row<T, E, CPL, VEC>(rows, run * R + r, row_ptr, out_rows, col_ind, values, long_limit, G, alpha, b, b_rs,
                                 b_cs, beta, c, c_rs, c_cs, n);
}

// One group per segment of a long row: the partial product of entries seg_bounds[2s] …
// seg_bounds[2s + 1] − 1, unscaled, into partial[s·n + j] in the compute type.
template <typename T, typename E, int CPL, bool VEC>
__device__ void smat_segments(int segments, const int* __restrict__ seg_bounds, const int* __restrict__ col_ind,
                              const T* __restrict__ values, int G, const T* __restrict__ b, sgpu_i64 b_rs,
                              sgpu_i64 b_cs, typename E::compute* __restrict__ partial, int n) {
    typedef typename E::compute C;
    const int sub = threadIdx.x & (G - 1);
    const sgpu_i64 s = ((sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const bool live = s < segments;
    const int first = live ? seg_bounds[2 * s] : 0, last = live ? seg_bounds[2 * s + 1] : 0;
    for (int chunk = blockIdx.y * G * CPL; chunk < n; chunk += gridDim.y * G * CPL) {  // as in smat_rows
        const int j = chunk + sub * CPL;
        C acc[CPL];
#pragma unroll
        for (int q = 0; q < CPL; ++q) acc[q] = C(0);
        smat_row_product<T, E, CPL, VEC>(acc, first, last, col_ind, values, b, b_rs, b_cs, j, n, G, sub);
#pragma unroll
        for (int q = 0; q < CPL; ++q)
            if (live && j + q < n) partial[s * n + j + q] = acc[q];
    }
}

// Column j of C's row out_row from `count` partial rows of n sums, first, first + stride, …: their sum
// in that order (so the result does not depend on scheduling), scaled, plus β·C.
template <typename T, typename E>
__device__ __forceinline__ void smat_finish_row(const typename E::compute* __restrict__ partial, sgpu_i64 first,
                                                int count, int stride, sgpu_i64 out_row, int j,
                                                typename E::compute alpha, typename E::compute beta,
                                                T* __restrict__ c, sgpu_i64 c_rs, sgpu_i64 c_cs, int n) {
    typedef typename E::compute C;
    C sum = 0;
    for (int s = 0; s < count; ++s) sum += partial[(first + (sgpu_i64)s * stride) * n + j];
    T* p = c + out_row * c_rs + j * c_cs;
    *p = E::store(beta == C(0) ? alpha * sum : alpha * sum + beta * E::load(*p));
}

// One thread per (long row, column): the row's segment partials, in segment order.
template <typename T, typename E>
__device__ void smat_finish_long(int long_rows, const int* __restrict__ long_seg_ptr,
                                 const int* __restrict__ long_out_rows, const typename E::compute* __restrict__ partial,
                                 typename E::compute alpha, typename E::compute beta, T* __restrict__ c, sgpu_i64 c_rs,
                                 sgpu_i64 c_cs, int n) {
    const sgpu_i64 t = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (sgpu_i64)long_rows * n) return;
    const int r = (int)(t / n), j = (int)(t % n);
    const int first = long_seg_ptr[r];
    smat_finish_row<T, E>(partial, first, long_seg_ptr[r + 1] - first, 1, long_out_rows[r], j, alpha, beta, c, c_rs,
                          c_cs, n);
}

// One thread per (row of a split block row, column): the block row's slots, in tile order. splits
// holds (block row, first slot, slots) per split block row; slot s holds tile_rows rows of n sums.
template <typename T, typename E>
__device__ void smat_finish_tiles(int split_block_rows, const int* __restrict__ splits, int tile_rows,
                                  const int* __restrict__ out_rows, const typename E::compute* __restrict__ partial,
                                  typename E::compute alpha, typename E::compute beta, T* __restrict__ c,
                                  sgpu_i64 c_rs, sgpu_i64 c_cs, int n) {
    const sgpu_i64 t = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (sgpu_i64)split_block_rows * tile_rows * n) return;
    const int row = (int)(t / n), j = (int)(t % n);
    const int* split = splits + 3 * (row / tile_rows);
    const int i = row % tile_rows;
    const sgpu_i64 out_row = out_rows[(sgpu_i64)split[0] * tile_rows + i];
    if (out_row < 0) return;
    smat_finish_row<T, E>(partial, (sgpu_i64)split[1] * tile_rows + i, split[2], tile_rows, out_row, j, alpha, beta, c,
                          c_rs, c_cs, n);
}

#define SMAT_ROWS_ENTRY(KERNEL, BODY, T, E, BOUNDS)                                                                    \
    extern "C" __global__ void __launch_bounds__ BOUNDS                                                                \
        KERNEL(int rows, const int* row_ptr, const int* out_rows, const int* col_ind, const T* values, int long_limit, \
               int G, E::compute alpha, const T* b, sgpu_i64 b_rs, sgpu_i64 b_cs, E::compute beta, T* c,               \
               sgpu_i64 c_rs, sgpu_i64 c_cs, int n) {                                                                  \
        BODY(rows, row_ptr, out_rows, col_ind, values, long_limit, G, alpha, b, b_rs, b_cs, beta, c, c_rs, c_cs, n);   \
    }

// smat_rows_* (a row per group) and smat_short_rows_* (runs of short rows), each in the 16-byte
// form (_vec) and the general one; then the long-row kernels. The row kernels' launch bounds are
// BOUNDS: f64's are held to 64 registers (four blocks an SM): at the 72–76 the compiler takes
// otherwise, three blocks an SM made them 3–9 % slower on the suite's short-row matrices at n = 128
// (an A/B run on an H100). The other types' bounds name no block count: with one named (even 1) the
// compiler took 94–97 registers instead of 74–80 for f32, and f16 / f32 ran 10–20 % slower. The
// short rows' kernels run RUN_SLOTS rows of B in flight (0: a row at a time) under SHORT_BOUNDS; an
// A/B run on an H200 (docs/methods.md) chose 4 slots and three blocks an SM (80 registers) for f16
// and bf16, 8 slots and three blocks for f32, and a row at a time for f64, whose runs (spilling at
// 64 registers, or at 80) made the stencil and the circuit 7–12 % slower.
#define SMAT_ROWS_KERNELS(NAME, T, E, CPL, BOUNDS, RUN_SLOTS, SHORT_BOUNDS)                                            \
    SMAT_ROWS_ENTRY(smat_rows_##NAME##_vec, (smat_rows<T, E, CPL, true>), T, E, BOUNDS)                                \
    SMAT_ROWS_ENTRY(smat_rows_##NAME, (smat_rows<T, E, 1, false>), T, E, BOUNDS)                                       \
    SMAT_ROWS_ENTRY(smat_short_rows_##NAME##_vec, (smat_short_rows<T, E, CPL, true, RUN_SLOTS>), T, E, SHORT_BOUNDS)   \
    SMAT_ROWS_ENTRY(smat_short_rows_##NAME, (smat_short_rows<T, E, 1, false, RUN_SLOTS>), T, E, SHORT_BOUNDS)          \
    extern "C" __global__ void __launch_bounds__(256)                                                                  \
        smat_segments_##NAME##_vec(int segments, const int* seg_bounds, const int* col_ind, const T* values, int G,     \
                                   const T* b, sgpu_i64 b_rs, sgpu_i64 b_cs, E::compute* partial, int n) {             \
        smat_segments<T, E, CPL, true>(segments, seg_bounds, col_ind, values, G, b, b_rs, b_cs, partial, n);           \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                                                  \
        smat_segments_##NAME(int segments, const int* seg_bounds, const int* col_ind, const T* values, int G,           \
                             const T* b, sgpu_i64 b_rs, sgpu_i64 b_cs, E::compute* partial, int n) {                   \
        smat_segments<T, E, 1, false>(segments, seg_bounds, col_ind, values, G, b, b_rs, b_cs, partial, n);            \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                                                  \
        smat_finish_long_##NAME(int long_rows, const int* long_seg_ptr, const int* long_out_rows,                      \
                                const E::compute* partial, E::compute alpha, E::compute beta, T* c, sgpu_i64 c_rs,     \
                                sgpu_i64 c_cs, int n) {                                                                \
        smat_finish_long<T, E>(long_rows, long_seg_ptr, long_out_rows, partial, alpha, beta, c, c_rs, c_cs, n);       \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                                                  \
        smat_finish_tiles_##NAME(int split_block_rows, const int* splits, int tile_rows, const int* out_rows,                \
                                 const E::compute* partial, E::compute alpha, E::compute beta, T* c, sgpu_i64 c_rs,    \
                                 sgpu_i64 c_cs, int n) {                                                               \
        smat_finish_tiles<T, E>(split_block_rows, splits, tile_rows, out_rows, partial, alpha, beta, c, c_rs, c_cs, n);     \
    }

SMAT_ROWS_KERNELS(f16, sgpu_f16, sgpu_half_elem<false>, 8, (256), 4, (256, 3))
SMAT_ROWS_KERNELS(bf16, sgpu_bf16, sgpu_half_elem<true>, 8, (256), 4, (256, 3))
SMAT_ROWS_KERNELS(f32, float, sgpu_elem<float>, 4, (256), 8, (256, 3))
SMAT_ROWS_KERNELS(f64, double, sgpu_elem<double>, 2, (256, 4), 0, (256, 4))

// SMaT SpMM (Okanovic et al.): C = α·A·B + β·C with A in BCSR whose blocks are the A operand of
// one tensor-core mma. One warp owns one output tile — the 16 (or 8) rows of a block row times a
// strip of 32 columns of B / C — and walks the block row's nonzero blocks in order, accumulating in
// registers; this is the paper's schedule of one warp per row of output tiles, with the warps of a
// block row spread over the column strips (its 2D grid: block rows × column strips). The epilogue
// scales, adds β·C (C is not read when β = 0) and scatters each stored row to the caller's row
// through the reordering permutation (row_order == NULL: no reordering).
//
// Strides: element (i, j) of B is b[i·b_rs + j·b_cs], of C c[i·c_rs + j·c_cs], so both layouts and
// any leading dimension take the same path. Reads of B past A's columns (the padding of the last
// block column) or past n are replaced by zeros; rows past A's rows are never written.

#define SMAT_WARPS_PER_BLOCK 4
#define SMAT_STRIP 32  // columns of B / C per warp

// ---------------------------------------------------------------------------------------------
// f16 / bf16: mma.sync.m16n8k16 with FP32 accumulation, as in the paper. A 16×16 tile is one A
// fragment; the strip is 4 n-tiles of 8 columns, so each block costs 4 mma per warp.

template <bool BF16>
__device__ void smat_spmm_half(int rows, int cols, int n, const sgpu_i64* __restrict__ block_row_ptr,
                               const int* __restrict__ block_cols, const unsigned short* __restrict__ tiles,
                               const int* __restrict__ row_order, float alpha, const unsigned short* __restrict__ b,
                               sgpu_i64 b_rs, sgpu_i64 b_cs, float beta, unsigned short* __restrict__ c,
                               sgpu_i64 c_rs, sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // Fragment coordinates of the PTX m16n8k16 layouts: lane = 4·group + thread-in-group.
    const int group = lane >> 2, tig = lane & 3;
    const sgpu_i64 block_row = blockIdx.x;
    const sgpu_i64 first = block_row_ptr[block_row], last = block_row_ptr[block_row + 1];
    const int strips = (n + SMAT_STRIP - 1) / SMAT_STRIP;
    for (int strip = blockIdx.y * SMAT_WARPS_PER_BLOCK + warp; strip < strips;
         strip += gridDim.y * SMAT_WARPS_PER_BLOCK) {
        const int first_col = strip * SMAT_STRIP;
        float acc[4][4];
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[t][e] = 0.0f;

        for (sgpu_i64 s = first; s < last; ++s) {
            // A fragment: rows group / group+8, columns 2·tig (+1) and 2·tig+8 (+1); the tile is
            // row-major 16×16, so each register is one aligned 32-bit load of two neighbours.
            const unsigned* tile = reinterpret_cast<const unsigned*>(tiles + s * 256);
            const unsigned fa[4] = {__ldg(tile + (group * 16 + tig * 2) / 2),
                                    __ldg(tile + ((group + 8) * 16 + tig * 2) / 2),
                                    __ldg(tile + (group * 16 + tig * 2 + 8) / 2),
                                    __ldg(tile + ((group + 8) * 16 + tig * 2 + 8) / 2)};
            const int k = block_cols[s] * 16 + tig * 2;  // B rows k, k+1, k+8, k+9
            const bool k0 = k < cols, k1 = k + 1 < cols, k8 = k + 8 < cols, k9 = k + 9 < cols;
            const unsigned short* bk = b + k * b_rs;
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                // B fragment (col-major 16×8): column group of the n-tile, rows k, k+1 | k+8, k+9.
                const int j = first_col + t * 8 + group;
                unsigned fb[2] = {0, 0};
                if (j < n) {
                    const unsigned short* p = bk + j * b_cs;
                    const unsigned v0 = k0 ? __ldg(p) : 0u, v1 = k1 ? __ldg(p + b_rs) : 0u;
                    const unsigned v8 = k8 ? __ldg(p + 8 * b_rs) : 0u, v9 = k9 ? __ldg(p + 9 * b_rs) : 0u;
                    fb[0] = v0 | (v1 << 16);
                    fb[1] = v8 | (v9 << 16);
                }
                sgpu_mma_16816<BF16>(acc[t], fa, fb);
            }
        }

        // D fragment: rows group (elements 0, 1) and group+8 (2, 3), columns 2·tig, 2·tig+1.
#pragma unroll
        for (int half_row = 0; half_row < 2; ++half_row) {
            const sgpu_i64 row = block_row * 16 + group + half_row * 8;
            if (row >= rows) continue;
            const sgpu_i64 out_row = row_order ? row_order[row] : row;
#pragma unroll
            for (int t = 0; t < 4; ++t) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int j = first_col + t * 8 + tig * 2 + e;
                    if (j >= n) continue;
                    unsigned short* p = c + out_row * c_rs + j * c_cs;
                    const float v = acc[t][half_row * 2 + e];
                    const float out = beta == 0.0f ? alpha * v : alpha * v + beta * sgpu_half_to_f32<BF16>(*p);
                    *p = sgpu_f32_to_half<BF16>(out);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_spmm_f16(int rows, int cols, int n, const sgpu_i64* block_row_ptr, const int* block_cols,
                  const unsigned short* tiles, const int* row_order, float alpha, const unsigned short* b,
                  sgpu_i64 b_rs, sgpu_i64 b_cs, float beta, unsigned short* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_spmm_half<false>(rows, cols, n, block_row_ptr, block_cols, tiles, row_order, alpha, b, b_rs, b_cs, beta, c,
                          c_rs, c_cs);
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_spmm_bf16(int rows, int cols, int n, const sgpu_i64* block_row_ptr, const int* block_cols,
                   const unsigned short* tiles, const int* row_order, float alpha, const unsigned short* b,
                   sgpu_i64 b_rs, sgpu_i64 b_cs, float beta, unsigned short* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_spmm_half<true>(rows, cols, n, block_row_ptr, block_cols, tiles, row_order, alpha, b, b_rs, b_cs, beta, c,
                         c_rs, c_cs);
}

// ---------------------------------------------------------------------------------------------
// f32 (16×8 tiles) and f64 (8×4 tiles): full-precision FMA on the same schedule. Each lane owns one
// column of the strip and a tile-high column of accumulators; every lane reads the same tile element
// at once (a broadcast), and its own TC elements of B per block.

template <typename T, int TR, int TC>
__device__ void smat_spmm_simt(int rows, int cols, int n, const sgpu_i64* __restrict__ block_row_ptr,
                               const int* __restrict__ block_cols, const T* __restrict__ tiles,
                               const int* __restrict__ row_order, T alpha, const T* __restrict__ b, sgpu_i64 b_rs,
                               sgpu_i64 b_cs, T beta, T* __restrict__ c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const sgpu_i64 block_row = blockIdx.x;
    const sgpu_i64 first = block_row_ptr[block_row], last = block_row_ptr[block_row + 1];
    const int strips = (n + SMAT_STRIP - 1) / SMAT_STRIP;
    for (int strip = blockIdx.y * SMAT_WARPS_PER_BLOCK + warp; strip < strips;
         strip += gridDim.y * SMAT_WARPS_PER_BLOCK) {
        const int j = strip * SMAT_STRIP + lane;
        const bool live = j < n;
        T acc[TR];
#pragma unroll
        for (int r = 0; r < TR; ++r) acc[r] = 0;
        for (sgpu_i64 s = first; s < last; ++s) {
            const T* tile = tiles + s * (TR * TC);
            const int k = block_cols[s] * TC;
            T bv[TC];
#pragma unroll
            for (int q = 0; q < TC; ++q) bv[q] = (live && k + q < cols) ? __ldg(b + (k + q) * b_rs + j * b_cs) : T(0);
#pragma unroll
            for (int r = 0; r < TR; ++r)
#pragma unroll
                for (int q = 0; q < TC; ++q) acc[r] = fma(__ldg(tile + r * TC + q), bv[q], acc[r]);
        }
        if (!live) continue;
#pragma unroll
        for (int r = 0; r < TR; ++r) {
            const sgpu_i64 row = block_row * TR + r;
            if (row >= rows) break;
            const sgpu_i64 out_row = row_order ? row_order[row] : row;
            T* p = c + out_row * c_rs + j * c_cs;
            *p = beta == T(0) ? alpha * acc[r] : alpha * acc[r] + beta * *p;
        }
    }
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_spmm_f32(int rows, int cols, int n, const sgpu_i64* block_row_ptr, const int* block_cols, const float* tiles,
                  const int* row_order, float alpha, const float* b, sgpu_i64 b_rs, sgpu_i64 b_cs, float beta,
                  float* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_spmm_simt<float, 16, 8>(rows, cols, n, block_row_ptr, block_cols, tiles, row_order, alpha, b, b_rs, b_cs,
                                 beta, c, c_rs, c_cs);
}

extern "C" __global__ void __launch_bounds__(SMAT_WARPS_PER_BLOCK * 32)
    smat_spmm_f64(int rows, int cols, int n, const sgpu_i64* block_row_ptr, const int* block_cols,
                  const double* tiles, const int* row_order, double alpha, const double* b, sgpu_i64 b_rs,
                  sgpu_i64 b_cs, double beta, double* c, sgpu_i64 c_rs, sgpu_i64 c_cs) {
    smat_spmm_simt<double, 8, 4>(rows, cols, n, block_row_ptr, block_cols, tiles, row_order, alpha, b, b_rs, b_cs,
                                 beta, c, c_rs, c_cs);
}

// SpAMM tile kernels, shared part (prepended to kernels/spamm_*.cu). A tile kernel computes one
// TILE_M x TILE_N tile of C per thread block: several LoNum blocks at once (up to 4 x 4), so that each
// loaded element of op(A) / op(B) feeds many more multiply-adds than one 32 x 32 block would.
//
// Its work comes from spamm_tile_lists (kernels/spamm.cu): per tile, the k blocks that any of the
// tile's C blocks performs, in increasing order, each with a 16-bit mask (bit bi * 4 + bj: C block
// (i0 + bi, j0 + bj) of the tile performs it). A kernel issues the products of a k block only for
// the C blocks whose bit is set (per thread, per warp or per mma fragment, each lying inside one C
// block), so the products summed into every C element are exactly Algorithm 2's. Thread block b
// computes tile order[b] (spamm_tile_order): for FP32 and FP64 by decreasing work, so the hardware's
// in-order dispatch is a longest-job-first schedule and no SM idles at the end; for FP16, whose
// tiles are short and bound by L2, in the natural order, so tiles running together share operands.
//
// Kernel arguments (every tile kernel, in this order; the launcher in src/backend/cuda/spamm.rs):
//   int m, int n, int k, int bs, F alpha, const T* a, sgpu_i64 lda, int ta, const T* b, sgpu_i64 ldb,
//   int tb, F beta, T* c, sgpu_i64 ldc, const unsigned* order, const int* counts,
//   const unsigned* lists, int list_stride
// (F: the compute type; list of tile t at lists + t * list_stride, counts[t] entries; tiles are
// numbered column-major: t = tile_row + tile_col * ceil(m / TILE_M)).

struct SpammOperand {
    sgpu_i64 ld;
    int transposed;
};

// A work-list entry: k block in the high 16 bits, the C-block mask in the low 16.
__device__ __forceinline__ int spamm_entry_k(unsigned entry) { return (int)(entry >> 16); }
__device__ __forceinline__ unsigned spamm_entry_mask(unsigned entry) { return entry & 0xffffu; }

// The tile this thread block computes and its work list.
struct SpammTileWork {
    sgpu_i64 row0, col0;   // first row / column of the tile
    int i0, j0;            // C block of its first row / column
    int count;             // entries in `list`
    const unsigned* list;

    // Bit of the mask for the C block holding (row0 + r, col0 + c).
    __device__ __forceinline__ int bit(int r, int c, int bs) const {
        return (int)((row0 + r) / bs - i0) * 4 + (int)((col0 + c) / bs - j0);
    }
};

__device__ __forceinline__ SpammTileWork spamm_tile_work(int m, int bs, int tile_m, int tile_n, const unsigned* order,
                                                         const int* counts, const unsigned* lists, int list_stride) {
    unsigned t = order[blockIdx.x];
    unsigned tile_rows = (unsigned)((m + tile_m - 1) / tile_m);
    SpammTileWork w;
    w.row0 = (sgpu_i64)(t % tile_rows) * tile_m;
    w.col0 = (sgpu_i64)(t / tile_rows) * tile_n;
    w.i0 = (int)(w.row0 / bs);
    w.j0 = (int)(w.col0 / bs);
    w.count = counts[t];
    w.list = lists + (sgpu_i64)t * list_stride;
    return w;
}

// Walks the chunks [start, end) of the tile's k blocks, CHUNK elements of k at a time (a chunk never
// crosses a k block, so it carries one C-block mask). Every thread holds the same cursor. The list
// entry after the current one is read while the current one is used, so its latency hides behind a
// chunk of products. Positions are 32-bit: k is an int.
template <int CHUNK>
struct SpammChunkCursor {
    const unsigned* list;
    int count, entry, pos, block_end, bs, k;
    unsigned next, mask;

    __device__ __forceinline__ SpammChunkCursor(const SpammTileWork& w, int bs_, int k_)
        : list(w.list), count(w.count), entry(-1), pos(0), block_end(0), bs(bs_), k(k_),
          next(w.count > 0 ? w.list[0] : 0u), mask(0) {}

    // The next chunk [start, end), its C-block mask and whether it starts a k block (`fresh`); false
    // past the list (mask 0 then).
    __device__ __forceinline__ bool advance(int& start, int& end, unsigned& chunk_mask, bool& fresh) {
        fresh = pos >= block_end;
        if (fresh) {
            if (++entry >= count) {
                chunk_mask = 0;
                return false;
            }
            unsigned e = next;
            next = entry + 1 < count ? list[entry + 1] : 0u;
            pos = spamm_entry_k(e) * bs;
            block_end = pos + bs < k ? pos + bs : k;
            mask = spamm_entry_mask(e);
        }
        start = pos;
        end = pos + CHUNK < block_end ? pos + CHUNK : block_end;
        chunk_mask = mask;
        pos = end;
        return true;
    }

    __device__ __forceinline__ bool advance(int& start, int& end, unsigned& chunk_mask) {
        bool fresh;
        return advance(start, end, chunk_mask, fresh);
    }
};

// C(r, col) = alpha * acc + beta * C(r, col) (C not read when beta = 0, as BLAS); E converts T (bf16:
// sgpu_half_elem<true>).
template <typename T, typename F, typename E = sgpu_elem<T>>
__device__ __forceinline__ void spamm_store_c(T* c, sgpu_i64 ldc, sgpu_i64 r, sgpu_i64 col, F alpha, F acc, F beta) {
    T* out = c + r + col * ldc;
    F value = alpha * acc;
    if (beta != (F)0) value += beta * E::load(*out);
    *out = E::store(value);
}


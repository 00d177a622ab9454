// MSREP SpMV kernels: one partition of pCSR / pCSC / pCOO per launch, on the device that holds it,
// plus the merge of partial results on the lead device (src/backend/cuda/msrep.rs orders them).
//
// Row results of a partition go one of two ways:
// - "finish" (pCSR partitions on the lead device): rows only this partition touches are finished in
//   place, y = α·s + β·y (β = 0 never reads y); the raw sums of its split first / last row go to
//   shared[0] / shared[1] for the merge, which applies β once to those rows;
// - "raw" (pCOO, and every partition on another device): raw sums s of all its rows go to a partial
//   vector, which finish_partial later turns into the same y / shared writes on the lead device.

// The sum of a product term, accumulated in the element type (as the CPU specification does).
template <typename T>
__device__ __forceinline__ T msrep_finish(T alpha, T s, T beta, const T* y) {
    return beta == (T)0 ? alpha * s : alpha * s + beta * *y;
}

// Where row j (local to its partition, n rows) of a partition's results goes in finish mode.
template <typename T>
__device__ __forceinline__ void msrep_emit(int j, int n, T s, int start_flag, int end_flag, T alpha, T beta,
                                           T* y_part, T* shared) {
    if (start_flag && j == 0) {
        shared[0] = s;
    } else if (end_flag && j == n - 1) {
        shared[1] = s;
    } else {
        y_part[j] = msrep_finish(alpha, s, beta, y_part + j);
    }
}

// Vectorised pCSR: a group of G lanes (G = 1..32, chosen from the partition's average row length as
// cuSPARSE-style kernels do) per local row; lanes stride over the row's entries, then reduce by
// shuffles within the group. Rows are handed out grid-stride; a group's lanes always agree on the row,
// so the group mask below is exact even when other groups of the warp have finished.
// Rows longer than `long_row` entries are skipped here: power-law matrices (R-MAT) have a few rows of
// tens of thousands of entries, which one small group would work through long after every other warp
// finished; csr_long_rows gives each of those a whole block instead (the host lists them at upload,
// with the same threshold), balancing nonzeros rather than rows per worker.
template <typename T, int G>
__device__ void csr_partition(int n, const int* __restrict__ ptr, const int* __restrict__ idx,
                              const T* __restrict__ val, const T* __restrict__ x, T alpha, T beta, T* out,
                              int finish, int start_flag, int end_flag, T* shared, int long_row) {
    const unsigned lane_in_warp = threadIdx.x & 31;
    const unsigned lane = lane_in_warp % G;
    const unsigned mask = G == 32 ? 0xffffffffu : (((1u << G) - 1u) << (lane_in_warp - lane));
    const sgpu_i64 group = ((sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const sgpu_i64 groups = (sgpu_i64)gridDim.x * blockDim.x / G;
    for (sgpu_i64 j = group; j < n; j += groups) {
        const int begin = ptr[j], end = ptr[j + 1];
        if (end - begin > long_row) continue;  // the same for every lane of the group
        T s = 0;
        for (int e = begin + (int)lane; e < end; e += G) s += val[e] * x[idx[e]];
#pragma unroll
        for (int off = G / 2; off > 0; off >>= 1) s += __shfl_xor_sync(mask, s, off, G);
        if (lane == 0) {
            if (finish) {
                msrep_emit((int)j, n, s, start_flag, end_flag, alpha, beta, out, shared);
            } else {
                out[j] = s;
            }
        }
    }
}

// pCSR long rows (listed in `rows`, local indices): one block per row, blocks grid-stride over the
// list. Threads stride over the row, warps reduce by shuffles, then thread 0 adds the warps' sums in
// warp order: no atomics, so the result is deterministic (the same bits on every run), though summed in
// another order than the CPU backend's sequential loop (tests allow rounding differences).
// blockDim.x is a multiple of 32, at most 1024.
template <typename T>
__device__ void csr_long_rows(int count, const int* __restrict__ rows, int n, const int* __restrict__ ptr,
                              const int* __restrict__ idx, const T* __restrict__ val, const T* __restrict__ x,
                              T alpha, T beta, T* out, int finish, int start_flag, int end_flag, T* shared) {
    __shared__ T warp_sums[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int i = blockIdx.x; i < count; i += gridDim.x) {
        const int j = rows[i];
        const int end = ptr[j + 1];
        T s = 0;
        for (int e = ptr[j] + (int)threadIdx.x; e < end; e += blockDim.x) s += val[e] * x[idx[e]];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) warp_sums[warp] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            T total = 0;
            for (int w = 0; w < warps; ++w) total += warp_sums[w];
            if (finish) {
                msrep_emit(j, n, total, start_flag, end_flag, alpha, beta, out, shared);
            } else {
                out[j] = total;
            }
        }
        __syncthreads();  // warp_sums is reused by the next row
    }
}

// pCSC (Algorithm 5): a group of G lanes per local column scatters val·x[col] into the device's
// rows-long accumulator with atomics (partitions of one device share it; it is zeroed per call).
template <typename T, int G>
__device__ void csc_partition(int n, const int* __restrict__ ptr, const int* __restrict__ idx,
                              const T* __restrict__ val, const T* __restrict__ x_part, T* acc) {
    const unsigned lane = (threadIdx.x & 31) % G;
    const sgpu_i64 group = ((sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const sgpu_i64 groups = (sgpu_i64)gridDim.x * blockDim.x / G;
    for (sgpu_i64 j = group; j < n; j += groups) {
        const T xj = x_part[j];
        const int end = ptr[j + 1];
        for (int e = ptr[j] + (int)lane; e < end; e += G) atomicAdd(acc + idx[e], val[e] * xj);
    }
}

// pCOO, row-sorted: each warp takes 32 consecutive entries at a time, forms products, and sums runs of
// equal rows with a segmented inclusive scan by shuffles; the last lane of each run adds the run's sum
// to the partition's raw partial vector (zeroed per call) with one atomic. A long row thus costs one
// atomic per 32 entries, a short one one per run. The loop bound is warp-uniform (blockDim % 32 == 0).
template <typename T>
__device__ void coo_partition(sgpu_i64 nnz, const int* __restrict__ row, const int* __restrict__ col,
                              const T* __restrict__ val, const T* __restrict__ x, T* partial) {
    const int lane = threadIdx.x & 31;
    const sgpu_i64 warp = ((sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const sgpu_i64 warps = (sgpu_i64)gridDim.x * blockDim.x / 32;
    for (sgpu_i64 base = warp * 32; base < nnz; base += warps * 32) {
        const sgpu_i64 e = base + lane;
        int r = -1;
        T v = 0;
        if (e < nnz) {
            r = row[e];
            v = val[e] * x[col[e]];
        }
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const T other = __shfl_up_sync(0xffffffffu, v, off);
            const int other_row = __shfl_up_sync(0xffffffffu, r, off);
            if (lane >= off && other_row == r) v += other;
        }
        const int next_row = __shfl_down_sync(0xffffffffu, r, 1);
        if (r >= 0 && (lane == 31 || next_row != r)) atomicAdd(partial + r, v);
    }
}

// Finish mode applied to a raw partial vector on the lead device (pCOO, or partials from elsewhere).
template <typename T>
__device__ void finish_partial(int n, const T* __restrict__ partial, int start_flag, int end_flag, T alpha, T beta,
                               T* y_part, T* shared) {
    for (sgpu_i64 j = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (sgpu_i64)gridDim.x * blockDim.x) {
        msrep_emit((int)j, n, partial[j], start_flag, end_flag, alpha, beta, y_part, shared);
    }
}

// Merged rows (split between partitions, or in no partition) start as β·y (0 without reading y when
// β = 0). The rows are `segments` runs: run k starts at row starts[k] and covers flat positions
// offsets[k]..offsets[k+1] of `total`; a binary search maps a flat position to its run.
template <typename T>
__device__ void scale_merged_rows(sgpu_i64 total, const int* __restrict__ starts, const sgpu_i64* __restrict__ offsets,
                                  int segments, T beta, T* y) {
    for (sgpu_i64 t = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (sgpu_i64)gridDim.x * blockDim.x) {
        int lo = 0, hi = segments - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (offsets[mid] <= t) lo = mid; else hi = mid - 1;
        }
        T* p = y + starts[lo] + (t - offsets[lo]);
        *p = beta == (T)0 ? (T)0 : beta * *p;
    }
}

// Adds α·s of every partition sharing a row, in partition order (as the CPU merge does): shared row i
// is rows[i], its sums are shared[slot[k]] for k in first[i]..first[i+1].
template <typename T>
__device__ void add_shared_rows(int count, const int* __restrict__ rows, const int* __restrict__ first,
                                const int* __restrict__ slot, const T* __restrict__ shared, T alpha, T* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        T acc = y[rows[i]];
        for (int k = first[i]; k < first[i + 1]; ++k) acc += alpha * shared[slot[k]];
        y[rows[i]] = acc;
    }
}

// pCSC merge: y = α·Σ_k sources[k] + β·y, the partial vectors of every device summed in device order.
template <typename T>
__device__ void csc_merge(int rows, const T* const* __restrict__ sources, int count, T alpha, T beta, T* y) {
    for (sgpu_i64 r = (sgpu_i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (sgpu_i64)gridDim.x * blockDim.x) {
        T s = 0;
        for (int k = 0; k < count; ++k) s += sources[k][r];
        y[r] = msrep_finish(alpha, s, beta, y + r);
    }
}

#define MSREP_CSR(T, S, G)                                                                                          \
    extern "C" __global__ void msrep_csr_##S##_g##G(int n, const int* ptr, const int* idx, const T* val,          \
                                                    const T* x, T alpha, T beta, T* out, int finish,             \
                                                    int start_flag, int end_flag, T* shared, int long_row) {     \
        csr_partition<T, G>(n, ptr, idx, val, x, alpha, beta, out, finish, start_flag, end_flag, shared, long_row); \
    }                                                                                                             \
    extern "C" __global__ void msrep_csc_##S##_g##G(int n, const int* ptr, const int* idx, const T* val,          \
                                                    const T* x_part, T* acc) {                                   \
        csc_partition<T, G>(n, ptr, idx, val, x_part, acc);                                                       \
    }

#define MSREP_TYPE(T, S)                                                                                            \
    MSREP_CSR(T, S, 1)                                                                                              \
    MSREP_CSR(T, S, 2)                                                                                              \
    MSREP_CSR(T, S, 4)                                                                                              \
    MSREP_CSR(T, S, 8)                                                                                              \
    MSREP_CSR(T, S, 16)                                                                                             \
    MSREP_CSR(T, S, 32)                                                                                             \
    extern "C" __global__ void msrep_csr_long_##S(int count, const int* rows, int n, const int* ptr,               \
                                                  const int* idx, const T* val, const T* x, T alpha, T beta,     \
                                                  T* out, int finish, int start_flag, int end_flag, T* shared) { \
        csr_long_rows<T>(count, rows, n, ptr, idx, val, x, alpha, beta, out, finish, start_flag, end_flag, shared); \
    }                                                                                                             \
    extern "C" __global__ void msrep_coo_##S(sgpu_i64 nnz, const int* row, const int* col, const T* val,          \
                                             const T* x, T* partial) {                                            \
        coo_partition<T>(nnz, row, col, val, x, partial);                                                         \
    }                                                                                                             \
    extern "C" __global__ void msrep_finish_partial_##S(int n, const T* partial, int start_flag, int end_flag,    \
                                                        T alpha, T beta, T* y_part, T* shared) {                 \
        finish_partial<T>(n, partial, start_flag, end_flag, alpha, beta, y_part, shared);                        \
    }                                                                                                             \
    extern "C" __global__ void msrep_scale_merged_##S(sgpu_i64 total, const int* starts, const sgpu_i64* offsets,  \
                                                      int segments, T beta, T* y) {                               \
        scale_merged_rows<T>(total, starts, offsets, segments, beta, y);                                          \
    }                                                                                                             \
    extern "C" __global__ void msrep_add_shared_##S(int count, const int* rows, const int* first, const int* slot, \
                                                    const T* shared, T alpha, T* y) {                            \
        add_shared_rows<T>(count, rows, first, slot, shared, alpha, y);                                           \
    }                                                                                                             \
    extern "C" __global__ void msrep_csc_merge_##S(int rows, const T* const* sources, int count, T alpha, T beta,  \
                                                   T* y) {                                                        \
        csc_merge<T>(rows, sources, count, alpha, beta, y);                                                       \
    }

MSREP_TYPE(float, f32)
MSREP_TYPE(double, f64)

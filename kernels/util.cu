// The runtime's own kernels: C ← β·C over a strided matrix (no family needs it: each applies β in its
// own epilogue; tests/cuda_runtime.rs launches it to check staging, streams and the cache), a copy by
// the SMs, and the stamps of diagnostic timelines.

// C ← β·C over a strided rows × cols matrix (element (i, j) at i·rs + j·cs). β = 0 writes zeros
// without reading C, so NaN there does not propagate (the BLAS rule).
template <typename T>
__device__ void scale_matrix(int rows, int cols, typename sgpu_elem<T>::compute beta, T* c, sgpu_i64 rs, sgpu_i64 cs) {
    sgpu_i64 total = (sgpu_i64)rows * cols;
    for (sgpu_i64 idx = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; idx < total;
         idx += (sgpu_i64)gridDim.x * blockDim.x) {
        sgpu_i64 i = idx % rows, j = idx / rows;
        T* p = c + i * rs + j * cs;
        typename sgpu_elem<T>::compute v = beta == 0 ? 0 : beta * sgpu_elem<T>::load(*p);
        *p = sgpu_elem<T>::store(v);
    }
}

extern "C" __global__ void scale_matrix_f32(int rows, int cols, float beta, float* c, sgpu_i64 rs, sgpu_i64 cs) {
    scale_matrix<float>(rows, cols, beta, c, rs, cs);
}
extern "C" __global__ void scale_matrix_f64(int rows, int cols, double beta, double* c, sgpu_i64 rs, sgpu_i64 cs) {
    scale_matrix<double>(rows, cols, beta, c, rs, cs);
}
extern "C" __global__ void scale_matrix_f16(int rows, int cols, float beta, sgpu_f16* c, sgpu_i64 rs, sgpu_i64 cs) {
    scale_matrix<sgpu_f16>(rows, cols, beta, c, rs, cs);
}

// Copies `lines` lines of `width` 8-byte words from src (a line every src_pitch words) to dst (every
// dst_pitch words), either of which may be a peer device's memory: a small copy that must not queue
// behind the copy engines' traffic out of this device (SpAMM's norm maps to the other devices).
extern "C" __global__ void copy_words(int width, int lines, const unsigned long long* src, sgpu_i64 src_pitch,
                                      unsigned long long* dst, sgpu_i64 dst_pitch) {
    sgpu_i64 total = (sgpu_i64)width * lines;
    for (sgpu_i64 idx = blockIdx.x * (sgpu_i64)blockDim.x + threadIdx.x; idx < total;
         idx += (sgpu_i64)gridDim.x * blockDim.x) {
        sgpu_i64 word = idx % width, line = idx / width;
        dst[line * dst_pitch + word] = src[line * src_pitch + word];
    }
}

// Writes the device's global nanosecond timer to *slot when the stream reaches it: a stamp of a
// diagnostic timeline (src/backend/cuda/timeline.rs), comparable across the GPUs of one host.
extern "C" __global__ void timeline_stamp(unsigned long long* slot) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    *slot = now;
}

// The first device's half of a timeline handshake: spins for `ns` nanoseconds of the global timer,
// long enough for the host to queue the other device's half, then writes the timer's value.
extern "C" __global__ void timeline_spin_stamp(unsigned long long ns, unsigned long long* slot) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
    *slot = now;
}

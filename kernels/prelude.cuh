// Shared by every kernel file: NVRTC compiles kernels/prelude.cuh followed by one kernels/NAME.cu.
// Self-contained on purpose (no CUDA toolkit headers): a machine with only the driver and libnvrtc
// must be able to compile every kernel. 16-bit floats travel as their bit patterns.

typedef unsigned short sgpu_f16;   // IEEE binary16 bits
typedef unsigned short sgpu_bf16;  // bfloat16 bits
typedef unsigned short sgpu_b16;   // the bits of either (PTX's .b16), in code for both formats
typedef long long sgpu_i64;

__device__ __forceinline__ float sgpu_f16_to_f32(sgpu_f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ sgpu_f16 sgpu_f32_to_f16(float f) {
    sgpu_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float sgpu_bf16_to_f32(sgpu_bf16 h) {
    return __uint_as_float(((unsigned int)h) << 16);
}

__device__ __forceinline__ sgpu_bf16 sgpu_f32_to_bf16(float f) {
    sgpu_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// The two 16-bit formats share a storage type, so code for both takes the format as a template flag.
template <bool BF16> __device__ __forceinline__ float sgpu_half_to_f32(sgpu_b16 h) {
    return BF16 ? sgpu_bf16_to_f32(h) : sgpu_f16_to_f32(h);
}
template <bool BF16> __device__ __forceinline__ sgpu_b16 sgpu_f32_to_half(float f) {
    return BF16 ? sgpu_f32_to_bf16(f) : sgpu_f32_to_f16(f);
}

// D += A * B on tensor cores: one m16n8k16 product of f16 (or bf16) inputs with f32 accumulators, the
// fragments in the registers PTX's row.col layout gives them.
template <bool BF16> __device__ __forceinline__ void sgpu_mma_16816(float* d, const unsigned* a, const unsigned* b) {
    if (BF16)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Loads / stores of an element type through its compute type (float for 16-bit types). Templates on
// the storage type T take these as sgpu_elem<T>; for bf16, whose storage type is f16's, pass
// sgpu_half_elem<true> explicitly.
// The 3xTF32 split of an FP32 value: big = TF32(x) rounded to nearest (ties away from zero), small =
// x − big (exact in FP32) truncated to TF32, both as the bits a tensor core reads.
__device__ __forceinline__ void sgpu_tf32_split(float x, unsigned& big, unsigned& small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big)) & 0xffffe000u;
}

// D += A * B: one m16n8k8 product of TF32 inputs with FP32 accumulators (row.col fragments).
__device__ __forceinline__ void sgpu_mma_1688(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D += A * B: one m8n8k4 FP64 product (DMMA, sm_80+), IEEE double products and sums; row.col
// fragments: a = A[lane / 4][lane % 4], b = B[lane % 4][lane / 4], d = D[lane / 4][2·(lane % 4) + {0, 1}].
__device__ __forceinline__ void sgpu_dmma_884(double* d, double a, double b) {
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
        : "+d"(d[0]), "+d"(d[1])
        : "d"(a), "d"(b));
}

template <bool BF16> struct sgpu_half_elem {
    typedef float compute;
    static __device__ __forceinline__ float load(sgpu_b16 x) { return sgpu_half_to_f32<BF16>(x); }
    static __device__ __forceinline__ sgpu_b16 store(float x) { return sgpu_f32_to_half<BF16>(x); }
};
template <typename T> struct sgpu_elem;
template <> struct sgpu_elem<float> {
    typedef float compute;
    static __device__ __forceinline__ float load(float x) { return x; }
    static __device__ __forceinline__ float store(float x) { return x; }
};
template <> struct sgpu_elem<double> {
    typedef double compute;
    static __device__ __forceinline__ double load(double x) { return x; }
    static __device__ __forceinline__ double store(double x) { return x; }
};
template <> struct sgpu_elem<sgpu_f16> : sgpu_half_elem<false> {};

// cp.async, shared by the tile kernels of every family: a shared-memory address for the
// instructions, 16 whole bytes or one 4-byte element global -> shared, the groups, and a plain
// 16-byte store for what goes through registers. 16 bytes only where they lie inside the matrix: a
// group at its edge goes through registers (or element by element), since compute-sanitizer counts
// a cp.async whose src-size stops at the matrix as reading its whole 16-byte window, past the
// allocation for the last elements.
__device__ __forceinline__ unsigned sgpu_smem_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void sgpu_cp_async16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void sgpu_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// 4 bytes global -> shared, of which the first src_bytes (4 or 0) come from src, the rest zero.
__device__ __forceinline__ void sgpu_cp_async4(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// 16 bytes (four words) into shared memory at a shared-memory address.
__device__ __forceinline__ void sgpu_st_shared16(unsigned dst, unsigned x, unsigned y, unsigned z, unsigned w) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
template <int PENDING>
__device__ __forceinline__ void sgpu_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// Four 8×8 b16 matrices from shared memory into mma fragments (TRANS: each transposed), every lane
// giving the address of one matrix row.
template <bool TRANS>
__device__ __forceinline__ void sgpu_ldmatrix_x4(unsigned* r, unsigned addr) {
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
}

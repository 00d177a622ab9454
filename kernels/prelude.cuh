// Shared by every kernel file: NVRTC compiles kernels/prelude.cuh followed by one kernels/NAME.cu.
// Self-contained on purpose (no CUDA toolkit headers): a machine with only the driver and libnvrtc
// must be able to compile every kernel. 16-bit floats travel as their bit patterns.

typedef unsigned short sgpu_f16;   // IEEE binary16 bits
typedef unsigned short sgpu_bf16;  // bfloat16 bits
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

// Loads / stores of an element type through its compute type (float for 16-bit types).
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
template <> struct sgpu_elem<sgpu_f16> {
    typedef float compute;
    static __device__ __forceinline__ float load(sgpu_f16 x) { return sgpu_f16_to_f32(x); }
    static __device__ __forceinline__ sgpu_f16 store(float x) { return sgpu_f32_to_f16(x); }
};

// The fixed cost of one SDDMM call: sddmmDynamic (the pattern in device memory, validated there)
// and sddmmExecutePlan on a random 8192 x 8192 pattern of `density` (default 1e-5, about 670
// entries), f32, k columns (default 32), A, B and out on the device; and a 4-byte cudaMemsetAsync for
// reference. Prints, for each, the host time per call of 100 queued calls (the median of 5 rounds)
// and, for single calls on an idle stream, the median of 200 windows of events around the call (as
// the bench times a call) and of the host time the call takes.
//
// On a machine with the CUDA toolkit, from the repository root after `cargo build --release` (the
// library's soname is libsparsegpu.so.0, hence the link):
//   ln -sf libsparsegpu.so target/release/libsparsegpu.so.0
//   gcc -O2 scripts/sddmm_call_host_time.c -Iinclude -I/usr/local/cuda/include -Ltarget/release -lsparsegpu \
//     -L/usr/local/cuda/lib64 -lcudart -o sddmm_call_host_time
//   LD_LIBRARY_PATH=target/release ./sddmm_call_host_time [k = 32] [density = 1e-5]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "sparsegpu.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
    qsort(v, n, sizeof(double), by_value);
    return v[n / 2];
}

// Exits with the failing expression's status (a cudaError_t or an sgpuStatus_t).
#define CHECK(x)                                                        \
    do {                                                                \
        int status_ = (int)(x);                                         \
        if (status_ != 0) {                                             \
            printf("%s failed with %d (line %d)\n", #x, status_, __LINE__); \
            exit(1);                                                    \
        }                                                               \
    } while (0)

enum { DYNAMIC, PLAN, MEMSET, WAYS };
static const char* const NAMES[WAYS] = {"sddmmDynamic", "sddmmExecutePlan", "memset 4 bytes"};

int main(int argc, char** argv) {
    const int m = 8192, n = 8192, k = argc > 1 ? atoi(argv[1]) : 32;
    const double density = argc > 2 ? atof(argv[2]) : 1e-5;
    const long capacity = (long)(m * (double)n * density * 2) + 16;
    int* row_ptr = malloc((m + 1) * sizeof(int));
    int* col_ind = malloc(capacity * sizeof(int));
    long nnz = 0;
    srand(7);
    row_ptr[0] = 0;
    for (int r = 0; r < m; ++r) {
        for (int c = 0; c < n; ++c)
            if (rand() < density * RAND_MAX && nnz < capacity) col_ind[nnz++] = c;
        row_ptr[r + 1] = (int)nnz;
    }
    float* host = malloc((size_t)m * k * sizeof(float));
    for (long i = 0; i < (long)m * k; ++i) host[i] = (float)rand() / RAND_MAX - 0.5f;
    float *a, *b, *out;
    int *d_row_ptr, *d_col_ind;
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    CHECK(cudaMalloc((void**)&a, (size_t)m * k * sizeof(float)));
    CHECK(cudaMalloc((void**)&b, (size_t)n * k * sizeof(float)));
    CHECK(cudaMalloc((void**)&out, (nnz + 1) * sizeof(float)));
    CHECK(cudaMalloc((void**)&d_row_ptr, (m + 1) * sizeof(int)));
    CHECK(cudaMalloc((void**)&d_col_ind, (nnz + 1) * sizeof(int)));
    CHECK(cudaMemcpy(a, host, (size_t)m * k * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, host, (size_t)n * k * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_row_ptr, row_ptr, (m + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_col_ind, col_ind, nnz * sizeof(int), cudaMemcpyHostToDevice));
    sddmmHandle_t handle;
    sddmmPlan_t plan;
    CHECK(sddmmCreate(&handle));
    CHECK(sddmmSetStream(handle, stream));
    CHECK(sddmmCreatePlan(handle, &plan, m, n, nnz, row_ptr, col_ind, SGPU_INDEX_BASE_ZERO));
    const float alpha = 1.0f;
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    printf("m = %d, n = %d, k = %d, nnz = %ld\n", m, n, k, nnz);
    for (int way = 0; way < WAYS; ++way) {
#define CALL()                                                                                                     \
    (way == DYNAMIC ? (int)sddmmDynamic(handle, m, n, k, &alpha, a, k, b, k, SGPU_LAYOUT_ROW_MAJOR, nnz, d_row_ptr, \
                                        d_col_ind, NULL, SGPU_INDEX_BASE_ZERO, SGPU_VALUE_TYPE_F32, out)            \
     : way == PLAN  ? (int)sddmmExecutePlan(handle, plan, k, &alpha, a, k, b, k, SGPU_LAYOUT_ROW_MAJOR, NULL,      \
                                            SGPU_VALUE_TYPE_F32, out)                                               \
                    : (int)cudaMemsetAsync(out, 0, 4, stream))
        for (int i = 0; i < 20; ++i) CHECK(CALL());
        CHECK(cudaStreamSynchronize(stream));
        double queued[5];
        for (int round = 0; round < 5; ++round) {
            const double t0 = now_us();
            for (int i = 0; i < 100; ++i) CHECK(CALL());
            queued[round] = (now_us() - t0) / 100;
            CHECK(cudaStreamSynchronize(stream));
        }
        double window[200], in_call[200];
        for (int i = 0; i < 200; ++i) {
            CHECK(cudaStreamSynchronize(stream));
            const double t0 = now_us();
            CHECK(cudaEventRecord(start, stream));
            CHECK(CALL());
            in_call[i] = now_us() - t0;
            CHECK(cudaEventRecord(stop, stream));
            CHECK(cudaEventSynchronize(stop));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, start, stop));
            window[i] = ms * 1e3;
        }
        printf("%-17s %6.2f us a call queued; one call on an idle stream: window %6.2f us, host %6.2f us\n",
               NAMES[way], median(queued, 5), median(window, 200), median(in_call, 200));
    }
    CHECK(sddmmSynchronize(handle));
    CHECK(sddmmDestroyPlan(plan));
    CHECK(sddmmDestroy(handle));
    return 0;
}

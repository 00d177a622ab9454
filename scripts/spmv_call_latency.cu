// The fixed cost of one SpMV call: for an empty kernel, msrepSpMV (one pCSR partition) and
// cusparseSpMV (ALG_DEFAULT, its preprocess done) on an n-row tridiagonal f64 matrix, x and y on the
// device, prints the median of 300 windows of events around one call on an idle stream (as the
// bench times a call), the host time of such a call, and the host time per call of 200 queued calls;
// then the largest difference between the two libraries' y.
//
// On a machine with the CUDA toolkit, from the repository root after `cargo build --release` (the
// library's soname is libsparsegpu.so.0, hence the link):
//   ln -sf libsparsegpu.so target/release/libsparsegpu.so.0
//   nvcc -O2 -std=c++17 -arch=sm_90 scripts/spmv_call_latency.cu -Iinclude -Ltarget/release -lsparsegpu \
//     -lcusparse -o spmv_call_latency && LD_LIBRARY_PATH=target/release ./spmv_call_latency [n = 1000]
#include <cuda_runtime.h>
#include <cusparse.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cmath>
#include <time.h>
#include <algorithm>
#include <vector>
#include <functional>
#include "sparsegpu.h"
__global__ void empty_kernel() {}
static double now_us() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }
#define CK(x) do { int s_ = (int)(x); if (s_) { fprintf(stderr, "%s: %d %s\n", #x, s_, sgpuGetLastErrorMessage()); exit(1);} } while (0)
// CUDA runtime and cuSPARSE calls: any status but success ends the program, naming the call.
#define CU(x) do { cudaError_t s_ = (x); if (s_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(s_)); exit(1);} } while (0)
#define SP(x) do { cusparseStatus_t s_ = (x); if (s_ != CUSPARSE_STATUS_SUCCESS) { fprintf(stderr, "%s: %s\n", #x, cusparseGetErrorString(s_)); exit(1);} } while (0)
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int reps = 300;
  cudaStream_t st; CU(cudaStreamCreate(&st));
  std::vector<int> rp(n + 1), ci; std::vector<double> va;
  for (int i = 0; i < n; i++) { rp[i] = ci.size(); for (int j = i - 1; j <= i + 1; j++) if (j >= 0 && j < n) { ci.push_back(j); va.push_back(1.0 + (i % 7)); } }
  rp[n] = ci.size(); int nnz = ci.size();
  double *x, *y, *y2, *dv; int *drp, *dci;
  CU(cudaMalloc(&x, n * 8)); CU(cudaMalloc(&y, n * 8)); CU(cudaMalloc(&y2, n * 8)); CU(cudaMalloc(&dv, nnz * 8)); CU(cudaMalloc(&drp, (n + 1) * 4)); CU(cudaMalloc(&dci, nnz * 4));
  std::vector<double> hx(n); for (int i = 0; i < n; i++) hx[i] = 1.0 / (i + 1);
  CU(cudaMemcpy(x, hx.data(), n * 8, cudaMemcpyHostToDevice)); CU(cudaMemcpy(dv, va.data(), nnz * 8, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(drp, rp.data(), (n + 1) * 4, cudaMemcpyHostToDevice)); CU(cudaMemcpy(dci, ci.data(), nnz * 4, cudaMemcpyHostToDevice));
  msrepHandle_t h; CK(msrepCreate(&h)); CK(msrepSetBackend(h, SGPU_BACKEND_CUDA)); int dev0 = 0; CK(msrepSetDevices(h, 1, &dev0)); CK(msrepSetStream(h, st));
  msrepMatrix_t m; CK(msrepCreateCsr(h, &m, n, n, nnz, rp.data(), ci.data(), va.data(), SGPU_VALUE_TYPE_F64, SGPU_INDEX_BASE_ZERO, 1));
  cusparseHandle_t sh; SP(cusparseCreate(&sh)); SP(cusparseSetStream(sh, st));
  cusparseSpMatDescr_t A; cusparseDnVecDescr_t vx, vy;
  SP(cusparseCreateCsr(&A, n, n, nnz, drp, dci, dv, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  SP(cusparseCreateDnVec(&vx, n, x, CUDA_R_64F)); SP(cusparseCreateDnVec(&vy, n, y2, CUDA_R_64F));
  double one = 1, zero = 0; size_t bs = 0; void *buf = 0;
  SP(cusparseSpMV_bufferSize(sh, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT, &bs));
  CU(cudaMalloc(&buf, bs + 1));
  SP(cusparseSpMV_preprocess(sh, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT, buf));
  cudaEvent_t e0, e1; CU(cudaEventCreate(&e0)); CU(cudaEventCreate(&e1));
  auto window = [&](const char *name, std::function<void()> f) {
    for (int i = 0; i < 20; i++) f();
    CU(cudaStreamSynchronize(st));
    std::vector<double> g, hst;
    for (int r = 0; r < reps; r++) {
      CU(cudaStreamSynchronize(st));
      CU(cudaEventRecord(e0, st));
      double t0 = now_us(); f(); double t1 = now_us();
      CU(cudaEventRecord(e1, st)); CU(cudaEventSynchronize(e1));
      float ms; CU(cudaEventElapsedTime(&ms, e0, e1)); g.push_back(ms * 1e3); hst.push_back(t1 - t0);
    }
    double t0 = now_us(); for (int i = 0; i < 200; i++) f(); double t1 = now_us(); CU(cudaStreamSynchronize(st));
    printf("%-14s n=%d window %.2f us  host per call (idle) %.2f us  host per call (loop of 200) %.2f us\n", name, n, med(g), med(hst), (t1 - t0) / 200);
  };
  window("empty kernel", [&] { empty_kernel<<<1, 32, 0, st>>>(); });
  CU(cudaGetLastError());
  window("msrepSpMV", [&] { CK(msrepSpMV(h, m, &one, x, &zero, y)); });
  window("cusparseSpMV", [&] { SP(cusparseSpMV(sh, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT, buf)); });
  std::vector<double> hy(n), hy2(n);
  CU(cudaMemcpy(hy.data(), y, n * 8, cudaMemcpyDeviceToHost)); CU(cudaMemcpy(hy2.data(), y2, n * 8, cudaMemcpyDeviceToHost));
  // A NaN in either y makes the maximum NaN (std::max alone would pass over it).
  double err = 0; for (int i = 0; i < n; i++) { double d = fabs(hy[i] - hy2[i]); if (!(d <= err)) err = std::isnan(err) ? err : d; }
  printf("max |ours - vendor| = %g\n", err);
  return 0;
}

// SpAMM's f16 tile kernel (spammHgemm): the tile kernel of kernels/spamm_half.cuh on f16 data.

extern "C" __global__ void __launch_bounds__(SPAMM_H_THREADS, 2) spamm_tiles_f16(int m, int n, int k, int bs,
        float alpha, const sgpu_f16* a, sgpu_i64 lda, int ta, const sgpu_f16* b, sgpu_i64 ldb, int tb, float beta,
        sgpu_f16* c, sgpu_i64 ldc, const unsigned* order, const int* counts, const unsigned* lists, int list_stride) {
    spamm_tiles_half<false>(m, n, k, bs, alpha, a, lda, ta, b, ldb, tb, beta, c, ldc, order, counts, lists,
                            list_stride);
}

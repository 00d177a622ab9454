/* A program built against an installed libsparsegpu (through pkg-config and through CMake's
 * find_package): the header and the library it loads must agree on the version, and a SpAMM and an
 * SMaT product on the CPU backend must give the hand-computed results. Ends with "N passed,
 * M failed" and exits 1 when M > 0. */
#include <sparsegpu.h>

#include <stdio.h>
#include <string.h>

static int passed, failed;

static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    if (ok) passed++; else failed++;
}

static int succeeded(sgpuStatus_t status, const char *what) {
    if (status != SGPU_STATUS_SUCCESS) {
        printf("FAIL %s: %s (%s)\n", what, sgpuGetStatusName(status), sgpuGetLastErrorMessage());
        failed++;
        return 0;
    }
    return 1;
}

static void spamm_product(void) {
    /* Column-major A = [1 2; 3 4], B = [5 6; 7 8]: AB = [19 22; 43 50]. tau = 0 skips nothing. */
    const float a[4] = {1, 3, 2, 4}, b[4] = {5, 7, 6, 8}, want[4] = {19, 43, 22, 50};
    const float alpha = 1, beta = 0;
    float c[4] = {0, 0, 0, 0};
    spammHandle_t h = NULL;
    if (succeeded(spammCreate(&h), "spammCreate") && succeeded(spammSetBackend(h, SGPU_BACKEND_CPU), "spammSetBackend") &&
        succeeded(spammSgemm(h, SGPU_OPERATION_N, SGPU_OPERATION_N, 2, 2, 2, &alpha, a, 2, b, 2, &beta, c, 2, 0.0),
                  "spammSgemm")) {
        check(memcmp(c, want, sizeof c) == 0, "spammSgemm gives [19 22; 43 50]");
    }
    succeeded(spammDestroy(h), "spammDestroy");
}

static void smat_product(void) {
    /* A = [2 0 1; 0 3 0] in CSR, B (3x2, row-major) = [1 2; 3 4; 5 6]: AB = [7 10; 9 12]. */
    const int row_ptr[3] = {0, 2, 3}, col_ind[3] = {0, 2, 1};
    const double values[3] = {2, 1, 3};
    const double b[6] = {1, 2, 3, 4, 5, 6}, want[4] = {7, 10, 9, 12};
    const double alpha = 1, beta = 0;
    double c[4] = {0, 0, 0, 0};
    smatHandle_t h = NULL;
    smatMatrix_t m = NULL;
    if (succeeded(smatCreate(&h), "smatCreate") && succeeded(smatSetBackend(h, SGPU_BACKEND_CPU), "smatSetBackend") &&
        succeeded(smatCreateCsr(h, &m, 2, 3, 3, row_ptr, col_ind, values, SGPU_VALUE_TYPE_F64, SGPU_INDEX_BASE_ZERO),
                  "smatCreateCsr") &&
        succeeded(smatSpMM(h, m, 2, &alpha, b, 2, &beta, c, 2, SGPU_LAYOUT_ROW_MAJOR), "smatSpMM")) {
        check(memcmp(c, want, sizeof c) == 0, "smatSpMM gives [7 10; 9 12]");
    }
    succeeded(smatDestroyMatrix(m), "smatDestroyMatrix");
    succeeded(smatDestroy(h), "smatDestroy");
}

int main(void) {
    int version = -1;
    if (succeeded(sgpuGetVersion(&version), "sgpuGetVersion")) {
        check(version == SGPU_VERSION, "the loaded library's version is the header's");
    }
    check(strcmp(sgpuGetStatusName(SGPU_STATUS_INVALID_SIZE), "SGPU_STATUS_INVALID_SIZE") == 0, "sgpuGetStatusName");
    spamm_product();
    smat_product();
    printf("%d passed, %d failed\n", passed, failed);
    return failed > 0;
}
